"""save -> load: bit-identical predictions and learning; bad files raise and execute nothing."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import river_advsvm
from river_advsvm import AdvKernelSVM, AdvLinearSVM, CheckpointError, checkpoint

FACTORIES = {
    "compact": lambda: AdvKernelSVM(epsilon=0.1, budget=64, seed=3),
    "compact_slot": lambda: AdvKernelSVM(
        epsilon=0.1, budget=64, budget_policy="compact_slot", seed=4
    ),
    "truncate": lambda: AdvKernelSVM(
        epsilon=0.05, norm="linf", budget=32, budget_policy="truncate", kernel="laplacian", seed=5
    ),
    "grow": lambda: AdvKernelSVM(budget_policy="grow", schedule="diminishing", seed=2),
    "linear": lambda: AdvLinearSVM(epsilon=0.05, norm="linf"),
}


def stream(n, seed):
    """Named, shuffled, sometimes-missing features with tuple and int keys, labels 'a'/'b'."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = {"u": float(rng.random()), 3: float(rng.random()), ("t", 1): float(rng.random())}
        if rng.random() < 0.2:
            del x[3]
        keys = list(x)
        rng.shuffle(keys)
        yield {k: x[k] for k in keys}, "b" if x["u"] + x.get(3, 0.5) > 1 else "a"


@pytest.mark.parametrize("name", FACTORIES)
def test_save_load_continue_is_identical_to_never_saving(tmp_path, name):
    uninterrupted, first_half = FACTORIES[name](), FACTORIES[name]()
    data = list(stream(400, seed=1))
    for x, y in data[:200]:
        uninterrupted.learn_one(x, y)
        first_half.learn_one(x, y)
    path = tmp_path / "model.ckpt"
    first_half.save(path)
    loaded = type(first_half).load(path)
    probes = [x for x, _ in stream(50, seed=2)]
    for x in probes:
        assert loaded.decision_one(x) == first_half.decision_one(x)  # bit-identical
        assert loaded.predict_proba_one(x) == first_half.predict_proba_one(x)
    for x, y in data[200:]:
        uninterrupted.learn_one(x, y)
        loaded.learn_one(x, y)
    for x in probes:
        assert loaded.decision_one(x) == uninterrupted.decision_one(x)
    assert loaded.n_learned == uninterrupted.n_learned == 400
    (meta_a, arrays_a), (meta_b, arrays_b) = loaded.to_checkpoint(), uninterrupted.to_checkpoint()
    assert meta_a == meta_b
    assert arrays_a.keys() == arrays_b.keys()
    for key in arrays_a:
        np.testing.assert_array_equal(arrays_a[key], arrays_b[key])


def test_package_level_load_dispatches_and_keeps_extra(tmp_path):
    model = FACTORIES["compact"]()
    for x, y in stream(30, seed=0):
        model.learn_one(x, y)
    model.save(tmp_path / "m.ckpt", extra={"offsets": {"0": 42}})
    loaded = river_advsvm.load(tmp_path / "m.ckpt")
    assert isinstance(loaded, AdvKernelSVM)
    meta, _ = checkpoint.read(tmp_path / "m.ckpt")
    assert meta["extra"] == {"offsets": {"0": 42}}
    with pytest.raises(CheckpointError, match="not a AdvLinearSVM"):
        AdvLinearSVM.load(tmp_path / "m.ckpt")


def test_an_unstarted_model_round_trips(tmp_path):
    model = AdvKernelSVM(seed=1)
    model.save(tmp_path / "m.ckpt")
    loaded = AdvKernelSVM.load(tmp_path / "m.ckpt")
    assert loaded.predict_proba_one({"a": 1.0}) == {False: 0.5, True: 0.5}


def test_predictions_survive_a_new_process_with_another_hash_seed(tmp_path):
    """Feature names are hashed stably: Python's per-process str hash must not leak in."""
    model = FACTORIES["compact"]()
    for x, y in stream(100, seed=0):
        model.learn_one(x, y)
    model.save(tmp_path / "m.ckpt")
    probe = {"u": 0.3, 3: 0.9, ("t", 1): 0.1, "unseen": 0.4}
    code = (
        "import sys, river_advsvm; m = river_advsvm.load(sys.argv[1]); "
        "print(repr(m.decision_one({'u': 0.3, 3: 0.9, ('t', 1): 0.1, 'unseen': 0.4})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m.ckpt")],
        env={**os.environ, "PYTHONHASHSEED": "12345"}, capture_output=True, text=True, check=True,
    )
    assert float(out.stdout) == model.decision_one(probe)


def test_pickle_round_trip_keeps_learning_identically():
    model = FACTORIES["truncate"]()
    data = list(stream(300, seed=4))
    for x, y in data[:150]:
        model.learn_one(x, y)
    copy = pickle.loads(pickle.dumps(model))
    for x, y in data[150:]:
        model.learn_one(x, y)
        copy.learn_one(x, y)
    for x, _ in data[:20]:
        assert copy.decision_one(x) == model.decision_one(x)


@pytest.fixture
def saved(tmp_path):
    model = FACTORIES["compact"]()
    for x, y in stream(60, seed=0):
        model.learn_one(x, y)
    path = tmp_path / "m.ckpt"
    model.save(path)
    return path


def rewrite(path, edit_meta=None, replace=None):
    """Rebuild the zip with edited metadata or members."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    if edit_meta is not None:
        meta = json.loads(members["meta.json"])
        edit_meta(meta)
        members["meta.json"] = json.dumps(meta).encode()
    members.update(replace or {})
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def npy_bytes(array, allow_pickle=False):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


class Boom:
    def __reduce__(self):
        return (os.system, ("touch /tmp/river-advsvm-pwned",))


def test_truncated_file(saved):
    data = saved.read_bytes()
    for cut in (0, 10, len(data) // 2, len(data) - 1):
        saved.write_bytes(data[:cut])
        with pytest.raises(CheckpointError):
            AdvKernelSVM.load(saved)


def test_corrupted_bytes_fail_the_crc(saved):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as archive:
        info = archive.getinfo("coef.npy")
    offset = info.header_offset + 30 + len(info.filename) + 5
    data[offset] ^= 0xFF
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError):
        AdvKernelSVM.load(saved)


def test_not_a_zip_at_all(tmp_path):
    path = tmp_path / "m.ckpt"
    path.write_bytes(pickle.dumps(Boom()))
    with pytest.raises(CheckpointError):
        AdvKernelSVM.load(path)
    assert not os.path.exists("/tmp/river-advsvm-pwned")


def test_object_arrays_are_never_unpickled(saved):
    hostile = npy_bytes(np.array([Boom()], dtype=object), allow_pickle=True)

    def declare_object(meta):
        meta["arrays"]["coef"] = {"dtype": "|O", "shape": [1]}

    rewrite(saved, replace={"coef.npy": hostile})
    with pytest.raises(CheckpointError):
        AdvKernelSVM.load(saved)
    rewrite(saved, edit_meta=declare_object)
    with pytest.raises(CheckpointError):
        AdvKernelSVM.load(saved)
    assert not os.path.exists("/tmp/river-advsvm-pwned")


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.update(version=99),
        lambda m: m.update(format="something-else"),
        lambda m: m.update(arrays=[]),
        lambda m: m["state"].update(labels=[1, 2, 3]),
        lambda m: m["state"].update(names=[["s", "a"], ["s", "a"]]),
        lambda m: m["state"].update(names=[["x", "a"]]),
        lambda m: m["state"]["model"]["store"].update(size=10**9),
        lambda m: m["state"]["model"]["store"].update(size=-1),
        lambda m: m["params"].update(budget=-5),
        lambda m: m["params"].update(kernel="__import__('os')"),
        lambda m: m["params"].update(unexpected=1),
        lambda m: m.update(params=None),
        lambda m: m["arrays"]["coef"].update(shape=[10**12]),
        lambda m: m["arrays"]["coef"].update(shape=[3]),
        lambda m: m["state"].pop("bias"),
    ],
)
def test_hostile_or_inconsistent_metadata(saved, edit):
    rewrite(saved, edit_meta=edit)
    with pytest.raises(CheckpointError):
        AdvKernelSVM.load(saved)


def test_non_finite_coefficients_are_refused(saved):
    with zipfile.ZipFile(saved) as archive:
        coef = np.lib.format.read_array(io.BytesIO(archive.read("coef.npy")))
    coef[0] = np.nan
    rewrite(saved, replace={"coef.npy": npy_bytes(coef)})
    with pytest.raises(CheckpointError, match="finite"):
        AdvKernelSVM.load(saved)


def test_a_crash_while_saving_leaves_the_old_checkpoint(saved, monkeypatch):
    before = saved.read_bytes()
    model = AdvKernelSVM.load(saved)

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.os, "fsync", fail)
    with pytest.raises(OSError):
        model.save(saved)
    assert saved.read_bytes() == before
    assert [p.name for p in saved.parent.iterdir()] == [saved.name]  # no temp file left
