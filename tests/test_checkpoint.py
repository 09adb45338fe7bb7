"""save -> load: bit-identical predictions and learning; bad files raise and execute nothing."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import pickle
import re
import subprocess
import sys
import warnings
import zipfile
import zlib
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import river_advsvm
from river_advsvm import (AdvKernelSVM, AdvLinearSVM, CheckpointError, InvalidInput, checkpoint,
                          model_checkpoint)

FACTORIES = {
    "compact": lambda: AdvKernelSVM(epsilon=0.1, budget=64, budget_policy="compact", seed=3),
    "merge": lambda: AdvKernelSVM(epsilon=0.1, budget=16, gamma=2.0, seed=3),
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


def test_a_restored_model_keeps_its_collapse_verdict():
    """The collapse watch is state: a model restored from a checkpoint reports `collapsed` as
    the uninterrupted one does, sample for sample, and warns when it does (it came back as a
    fresh watch: not collapsed, and judged again from nothing)."""
    rng = np.random.default_rng(0)
    data = [({"a": float(rng.random())}, bool(rng.random() < 0.5)) for _ in range(800)]

    def make():
        return AdvKernelSVM(epsilon=3.0, adversary="closed_form", gamma=1.0, seed=0)

    def learn(model, rows):  # the verdict and the warnings so far after each row
        seen = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for x, y in rows:
                model.learn_one(x, y)
                seen.append((model.collapsed, len(caught)))
        return seen

    uninterrupted = learn(make(), data)
    assert uninterrupted[-1][0]  # the stream does collapse the model
    for cut in (300, 530, 700):  # a block under way, a block just judged, after the collapse
        model = make()
        learn(model, data[:cut])
        loaded = AdvKernelSVM.from_checkpoint(*model.to_checkpoint())
        assert loaded.collapsed == model.collapsed
        warned = uninterrupted[cut - 1][1]
        assert [(c, n + warned) for c, n in learn(loaded, data[cut:])] == uninterrupted[cut:]


@settings(max_examples=25, deadline=None)
@given(magnitude=st.sampled_from([1.0, 1e2, 1e3, 1e4]),
       dtype=st.sampled_from(["float32", "float64"]),
       adversary=st.sampled_from(["pgd", "closed_form"]), seed=st.integers(0, 2**16))
def test_a_model_on_large_inputs_restores_from_its_own_checkpoint(magnitude, dtype, adversary,
                                                                   seed):
    """The restore checks the saved norm against the saved vectors; in float32, inputs in the
    thousands put the rounding of each vector's own distance (exactly 0) above the check's
    tolerance unless the check keeps that distance at 0, as the model does."""
    rng = np.random.default_rng(seed)
    model = AdvKernelSVM(gamma=0.5, epsilon=0.05, adversary=adversary, budget=8, dtype=dtype,
                         seed=seed)
    for _ in range(30):
        x = {"a": float(rng.random()), "c": float(rng.normal() * magnitude)}
        model.learn_one(x, x["a"] > 0.5)
        restored = AdvKernelSVM.from_checkpoint(*model.to_checkpoint())
        assert restored.decision_one(x) == model.decision_one(x)


@pytest.mark.parametrize("averaging", [None, 30])
@pytest.mark.parametrize("case", ["wide widths, values at the bound", "130 tiny inputs"])
def test_a_laplacian_model_restores_from_its_own_checkpoint_at_the_bounds(case, averaging):
    """Laplacian stores are checked by their L1 norms, which their exponents grow with: a
    Laplacian model with a width of 1e10 for one input beside 1 for the others (stored rows up
    to 1e25) was refused as 'too large' by the squared norms' test, and one with a gamma of
    1e10 on inputs of 1e-6 at 130 inputs (exponents of 1e8, kept in float32) by a tolerance
    scaled by squared norms of 1e-10."""
    rng = np.random.default_rng(0)
    if case.startswith("wide"):
        model = AdvKernelSVM(kernel="laplacian", gamma={"a": 1e10, "b": 1.0, "c": 1.0},
                             averaging=averaging, budget=4, seed=0)
        rows = [{"a": float(rng.uniform(-1e15, 1e15)), "b": float(rng.random()), "c": 0.0}
                for _ in range(24)]
    else:
        model = AdvKernelSVM(kernel="laplacian", gamma=1e10, averaging=averaging, warm_up=1,
                             seed=0)
        rows = [dict(enumerate((rng.normal(size=130) * 1e-6).tolist())) for _ in range(24)]
    labels = [i % 3 == 0 for i in range(24)]
    for x, y in zip(rows[:12], labels[:12]):
        model.learn_one(x, y)
    restored = AdvKernelSVM.from_checkpoint(*model.to_checkpoint())
    for x, y in zip(rows[12:], labels[12:]):
        assert restored.decision_one(x) == model.decision_one(x)
        model.learn_one(x, y)
        restored.learn_one(x, y)
    assert restored.to_checkpoint()[0] == model.to_checkpoint()[0]


_NAMES = st.one_of(st.text("ab", max_size=3), st.integers(-3, 3), st.booleans(),
                  st.floats(-2, 2, allow_nan=False),
                  st.tuples(st.text("ab", max_size=2), st.integers(0, 2)))


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gamma=st.dictionaries(_NAMES, st.floats(0.01, 10.0), min_size=1, max_size=4))
def test_a_gamma_dict_of_any_names_survives_save_and_load(tmp_path, gamma):
    """JSON's keys are strings: a gamma dict naming inputs 0 and 1 (a numpy array's columns)
    came back naming '0' and '1', the kernel lost its per-input bandwidths and the loaded model
    predicted otherwise; one with tuple names could not be saved at all."""
    model = AdvKernelSVM(gamma=gamma, budget=8, seed=1)
    names = list(gamma)
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = {n: float(rng.normal()) for n in names}
        model.learn_one(x, x[names[0]] > 0)
    path = tmp_path / "model.ckpt"
    model.save(path)
    loaded = AdvKernelSVM.load(path)
    assert loaded.gamma == gamma and loaded.fitted_gamma == model.fitted_gamma
    x = {n: float(rng.normal()) for n in names}
    assert loaded.decision_one(x) == model.decision_one(x)
    assert loaded.to_checkpoint()[0] == model.to_checkpoint()[0]


@pytest.mark.parametrize("cls, given, plain", [
    (AdvLinearSVM,
     {"epsilon": np.float32(0.25), "regularization": np.float32(0.5), "step_size": np.int64(1)},
     {"epsilon": 0.25, "regularization": 0.5, "step_size": 1}),
    (AdvKernelSVM, {"epsilon": np.float32(0.25), "gamma": np.float32(0.5), "seed": 1},
     {"epsilon": 0.25, "gamma": 0.5, "seed": 1}),
    (AdvKernelSVM, {"gamma": {"u": np.float32(0.5), 3: np.float64(2.0)}, "seed": 1},
     {"gamma": {"u": 0.5, 3: 2.0}, "seed": 1}),
    # Counts were refused ("budget must be a positive int ..., got np.int64(16)").
    (AdvKernelSVM, {"gamma": 0.5, "budget": np.int64(16), "warm_up": np.int32(5),
                    "seed": np.uint16(1), "adversary_steps": np.int64(2),
                    "reprocess": np.int8(2), "averaging": np.int64(50),
                    "max_features": np.int64(40)},
     {"gamma": 0.5, "budget": 16, "warm_up": 5, "seed": 1, "adversary_steps": 2, "reprocess": 2,
      "averaging": 50, "max_features": 40}),
    (AdvLinearSVM, {"max_features": np.int64(40)}, {"max_features": 40}),
])
def test_numpy_scalar_parameters_save_and_learn_as_python_numbers(tmp_path, cls, given, plain):
    """A parameter given as a numpy scalar (taken from an array) made `save` raise TypeError
    (JSON has no float32); it is the Python number it equals, so the model also learns as the
    one given that number, and as itself once loaded."""
    model, python = cls(**given), cls(**plain)
    assert model._get_params() == python._get_params()
    data = list(stream(60, seed=1))
    for x, y in data[:30]:
        model.learn_one(x, y)
        python.learn_one(x, y)
    model.save(tmp_path / "model.ckpt")
    loaded = cls.load(tmp_path / "model.ckpt")
    for x, y in data[30:]:
        for m in (model, python, loaded):
            m.learn_one(x, y)
    assert model.to_checkpoint()[0] == python.to_checkpoint()[0] == loaded.to_checkpoint()[0]
    x = data[0][0]
    assert model.decision_one(x) == python.decision_one(x) == loaded.decision_one(x)


def test_a_checkpoint_from_before_a_parameter_existed_learns_as_it_did():
    """A model saved before `adversary` and `reprocess` existed learned at the closed form's
    bound without reprocessing; loaded, it still does, whatever the defaults are now."""
    old = AdvKernelSVM(epsilon=0.1, budget=16, gamma=2.0, seed=3, adversary="closed_form",
                       reprocess=0)
    data = list(stream(300, seed=1))
    for x, y in data[:150]:
        old.learn_one(x, y)
    meta, arrays = old.to_checkpoint()
    for name in ("adversary", "adversary_steps", "bounds", "reprocess"):
        del meta["params"][name]
    loaded = AdvKernelSVM.from_checkpoint(meta, arrays)
    assert (loaded.adversary, loaded.reprocess) == ("closed_form", 0)
    for x, y in data[150:]:
        old.learn_one(x, y)
        loaded.learn_one(x, y)
    assert [loaded.decision_one(x) for x, _ in data] == [old.decision_one(x) for x, _ in data]


def test_package_level_load_dispatches_and_keeps_extra(tmp_path):
    model = FACTORIES["compact"]()
    for x, y in stream(30, seed=0):
        model.learn_one(x, y)
    model.save(tmp_path / "m.ckpt", extra={"offsets": {"0": 42}})
    loaded = river_advsvm.load(tmp_path / "m.ckpt")
    assert isinstance(loaded, AdvKernelSVM)
    meta, _ = checkpoint.read(tmp_path / "m.ckpt")
    assert meta["extra"] == {"offsets": {"0": 42}}
    with pytest.raises(CheckpointError) as error:
        AdvLinearSVM.load(tmp_path / "m.ckpt")
    # The class differs, not the parameters ("invalid AdvLinearSVM checkpoint parameters" said
    # otherwise), and the package's load reads it.
    assert "holds a 'AdvKernelSVM', not a AdvLinearSVM" in str(error.value)
    assert "parameters" not in str(error.value) and "river_advsvm.load" in str(error.value)


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


@pytest.mark.parametrize("name", FACTORIES)
def test_the_same_state_saved_at_two_times_is_the_same_bytes(tmp_path, monkeypatch, name):
    """No clock in the file: a save in 2001 and one in 2030 of one model are byte for byte
    the same (zipfile stamps members with `time.time()`, set here for each save)."""
    import time

    model = FACTORIES[name]()
    for x, y in stream(100, seed=5):
        model.learn_one(x, y)
    saved = []
    for when in (978_307_200.0, 1_893_456_000.0):  # 2001-01-01 and 2030-01-01, UTC
        monkeypatch.setattr(time, "time", lambda: when)
        path = tmp_path / f"{when:.0f}.ckpt"
        model.save(path)
        saved.append(path.read_bytes())
    assert saved[0] == saved[1]


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


@pytest.mark.parametrize("learned", [5, 150])  # in gamma='scale''s warm-up, and past it
@pytest.mark.parametrize("make", [lambda: AdvKernelSVM(seed=0), *FACTORIES.values()],
                         ids=["default", *FACTORIES])
def test_a_pickle_holds_state_not_caches_and_learns_on_identically(make, learned):
    """A pickle taken right after a prediction (the row's kernel values and the lookup of its
    names cached) equals one taken before it, and its model predicts then learns on to the
    same bits as the model it copies (to the checkpoint's every byte): the caches it leaves
    out are rebuilt exactly."""
    model = make()
    data = list(stream(learned + 150, seed=6))
    for x, y in data[:learned]:
        model.learn_one(x, y)
    before = pickle.dumps(model)
    model.predict_proba_one(data[learned][0])
    assert pickle.dumps(model) == before
    copy = pickle.loads(pickle.dumps(model))
    for x, y in data[learned:]:
        assert copy.predict_proba_one(x) == model.predict_proba_one(x)
        model.learn_one(x, y)
        copy.learn_one(x, y)
    (meta, arrays), (copy_meta, copy_arrays) = model.to_checkpoint(), copy.to_checkpoint()
    assert copy_meta == meta and copy_arrays.keys() == arrays.keys()
    assert all(copy_arrays[k].tobytes() == a.tobytes() for k, a in arrays.items())


@pytest.mark.parametrize("policy", ["merge", "compact", "compact_slot", "truncate", "grow"])
def test_a_sample_refused_for_its_new_inputs_leaves_the_pickle_as_it_was(policy):
    """The names of a sample refused as `too_many_features` were checked, and the lookup that
    passed that check was kept in the pickle."""
    model = AdvKernelSVM(gamma=0.5, budget=16, budget_policy=policy, max_features=5, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = {f"f{j}": float(v) for j, v in enumerate(rng.normal(size=3))}
        model.learn_one(x, x["f0"] > 0)
    before = pickle.dumps(model)
    with pytest.raises(InvalidInput, match="max_features"):
        model.learn_one({f"new{i}": 1.0 for i in range(9)}, True)
    assert pickle.dumps(model) == before


@pytest.fixture
def saved(tmp_path):
    model = FACTORIES["compact"]()
    for x, y in stream(150, seed=0):
        model.learn_one(x, y)
    path = tmp_path / "m.ckpt"
    model.save(path)
    return path


#: The format's seal, written out here independently of the module: the zip comment, last in the
#: file, is this prefix and the hex SHA-256 of every byte before it.
SEAL_PREFIX = b"river-advsvm-checkpoint sha256 "
SEAL_SIZE = len(SEAL_PREFIX) + 64


def reseal(data: bytes) -> bytes:
    """`data` with its seal recomputed: corruption behind a valid seal reaches the parser."""
    body = data[:-SEAL_SIZE]
    return body + SEAL_PREFIX + hashlib.sha256(body).hexdigest().encode()


def sealed_zip(members: dict[str, bytes], compression=None) -> bytes:
    """A zip of `members`, sealed as a checkpoint is (whatever the members hold); by default
    laid out as `dumps` does (metadata deflated, arrays stored)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            method = compression
            if method is None:
                method = zipfile.ZIP_DEFLATED if name == "meta.json" else zipfile.ZIP_STORED
            archive.writestr(name, data, compress_type=method)
        archive.comment = b"\0" * SEAL_SIZE
    return reseal(buffer.getvalue())


def rewrite(path, edit_meta=None, replace=None):
    """Rebuild the checkpoint with edited metadata or members, sealed again."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    if edit_meta is not None:
        meta = json.loads(members["meta.json"])
        edit_meta(meta)
        members["meta.json"] = json.dumps(meta).encode()
    members.update(replace or {})
    path.write_bytes(sealed_zip(members))


def npy_bytes(array, allow_pickle=False):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


class Boom:
    def __reduce__(self):
        return (os.system, ("touch /tmp/river-advsvm-pwned",))


def test_a_huge_file_is_refused_before_it_is_hashed(tmp_path):
    """The seal is a hash of the whole file: a file larger than its table says its members
    take (8 GiB of sparse zeros in front of a valid checkpoint, which zip allows) is refused
    from its table, without reading the 8 GiB."""
    path = tmp_path / "huge.ckpt"
    data = checkpoint.dumps({"note": 1}, {"w": np.arange(3.0)})
    with open(path, "wb") as f:
        f.truncate(8 * 2**30)  # (sparse: no disk used)
        f.seek(0, os.SEEK_END)
        f.write(data)
    hashed = []
    real = checkpoint._check_seal
    with mock.patch.object(checkpoint, "_check_seal", lambda f: hashed.append(1) or real(f)):
        with pytest.raises(CheckpointError, match="more than the .* its members take"):
            checkpoint.read(path)
        assert not hashed
        # A checkpoint past that size whose members take it is read whole.
        big = np.arange(9 * 2**20, dtype=np.float64)  # 72 MiB
        checkpoint.write(path, {"note": 2}, {"w": big})
        meta, arrays = checkpoint.read(path)
        assert hashed and meta["note"] == 2 and np.array_equal(arrays["w"], big)


def test_truncated_file(saved):
    data = saved.read_bytes()
    for cut in (0, 10, len(data) // 2, len(data) - 1):
        saved.write_bytes(data[:cut])
        with pytest.raises(CheckpointError):
            AdvKernelSVM.load(saved)


def test_a_file_of_another_kind_is_named_so(saved):
    """The message names what is wrong for the user: no format number of the package's."""
    saved.write_bytes(b"not a checkpoint, " * 20)
    with pytest.raises(CheckpointError, match=r"it does not end with the seal of a "
                                              r"river-advsvm checkpoint \(a truncated file, or "
                                              r"another kind of file\)$"):
        AdvKernelSVM.load(saved)


def test_corrupted_bytes_fail_the_crc(saved):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as archive:
        info = archive.getinfo("coef.npy")
    offset = info.header_offset + 30 + len(info.filename) + 5
    data[offset] ^= 0xFF
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum"):  # the seal catches it first
        AdvKernelSVM.load(saved)
    saved.write_bytes(reseal(bytes(data)))
    with pytest.raises(CheckpointError, match="CRC|Error -3|invalid"):  # then zip's own CRC
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
        lambda m: m["state"].update(group_clock=[0, 0.5]),
        lambda m: m["state"].update(group_clock=[10**9, 2.0]),
        lambda m: m["state"].update(group_clock=["0", 2.0]),
        lambda m: m["state"].update(collapse={"verdicts": [1, 1], "counts": [0] * 5,
                                              "sums": [0.0, 0.0]}),
        lambda m: m["state"].update(collapse={"verdicts": [], "counts": [128, 0, 0, 0, 0],
                                              "sums": [0.0, 0.0]}),
        lambda m: m["state"].update(collapse={"verdicts": [], "counts": [3, 1, 0, 0, 2],
                                              "sums": [0.0, 0.0]}),
        lambda m: m["state"].update(collapse={"verdicts": [], "counts": [1, 1, 1, 1, 1],
                                              "sums": [0.0, -1.0]}),
        # More switches than pairs of samples in the block, a decision that is no class, a
        # label without its decision.
        lambda m: m["state"].update(collapse={"verdicts": [], "counts": [2, 1, 1, 1, 1],
                                              "sums": [0.0, 0.0], "switches": [2, 0, 1, 1]}),
        lambda m: m["state"].update(collapse={"verdicts": [], "counts": [2, 1, 1, 1, 1],
                                              "sums": [0.0, 0.0], "switches": [0, 0, 1, 2]}),
        lambda m: m["state"].update(collapse={"verdicts": [], "counts": [2, 1, 1, 1, 1],
                                              "sums": [0.0, 0.0], "switches": [0, 0, 1, -1]}),
        # Loaded, these predicted from the bias alone, then failed to learn (a second store
        # over no inputs), or raised OverflowError at the next random feature's id.
        lambda m: m["state"].update(started=False),
        lambda m: m["state"].update(started={}),
        lambda m: m["state"]["model"]["store"].update(n_added=2**64),
        lambda m: m["state"]["model"]["store"].update(n_added=-1),
    ],
)
def test_hostile_or_inconsistent_metadata(saved, edit):
    rewrite(saved, edit_meta=edit)
    with pytest.raises(CheckpointError):
        AdvKernelSVM.load(saved)


@pytest.mark.parametrize("number", ["1e999", "-1e400", "2.5e308"])
def test_a_number_beyond_a_floats_range_in_the_metadata_is_refused(saved, number):
    # json.loads reads 1e999 as infinity, which dumps never writes (allow_nan=False): a model
    # or service field that keeps it would fail at the next save, or in int() (OverflowError).
    rewrite(saved, edit_meta=lambda m: m["extra"].update(note=123456.5))
    with zipfile.ZipFile(saved) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["meta.json"] = members["meta.json"].replace(b"123456.5", number.encode())
    saved.write_bytes(sealed_zip(members))
    message = f"its metadata holds the number {number}, beyond a float's range"
    for read in (checkpoint.read, checkpoint.read_meta):
        with pytest.raises(CheckpointError, match=re.escape(message)):
            read(saved)


def test_non_finite_coefficients_are_refused(saved):
    with zipfile.ZipFile(saved) as archive:
        coef = np.lib.format.read_array(io.BytesIO(archive.read("coef.npy")))
    coef[0] = np.nan
    rewrite(saved, replace={"coef.npy": npy_bytes(coef)})
    with pytest.raises(CheckpointError, match="finite"):
        AdvKernelSVM.load(saved)


def _store_edit(policy, edit):
    """A checkpoint of a model of random features under `policy`, its store's state edited."""
    model = AdvKernelSVM(epsilon=0.1, budget=8, budget_policy=policy, gamma=1.0, seed=3)
    for x, y in stream(60, seed=0):
        model.learn_one(x, y)
    meta, arrays = model.to_checkpoint()
    edit(meta["state"]["model"]["store"], arrays)
    return meta, arrays


def _fewer(store, arrays, n=3):
    store["size"] = n
    arrays["ids"], arrays["coef"] = arrays["ids"][:n], arrays["coef"][:n]


@pytest.mark.parametrize(
    "policy, edit, message",
    [
        # Loaded, a pool of 0 features divided by 0 at the next active step.
        ("compact", lambda s, a: _fewer(s, a, 0), "0 saved features are not the ones"),
        ("compact_slot", _fewer, "3 saved features are not the ones"),
        ("truncate", _fewer, "3 saved features are not the ones"),
        ("grow", _fewer, "3 saved features are not the ones"),
        ("compact", lambda s, a: a["ids"].__setitem__(0, 5), "not the ones"),
        ("truncate", lambda s, a: a.update(ids=a["ids"][::-1].copy()), "not the ones"),
        ("grow", lambda s, a: a["ids"].__setitem__(slice(None), 0), "not the ones"),
        ("compact", lambda s, a: a.update(ids=a["ids"].astype(np.uint64)), "must be int64"),
        ("compact", lambda s, a: a.update(coef=a["coef"] > 0), "must be int64 and float64"),
        ("compact", lambda s, a: s.update(size=8.0), "must be ints"),
        ("compact", lambda s, a: s.update(n_added="8"), "must be ints"),
        # Loaded, these predicted infinities, or a norm the coefficients do not have.
        ("compact", lambda s, a: a["coef"].__setitem__(0, 1e308), "norm does not match"),
        ("compact", lambda s, a: s.update(norm=s["norm"] * 2), "norm does not match"),
        ("compact_slot", lambda s, a: s.update(norm=s["norm"] * 2), "norm sketch"),
        ("grow", lambda s, a: a["sketch"].__setitem__(0, 1e300), "norm sketch"),
        ("truncate", lambda s, a: a.update(sketch=a["sketch"].astype(np.float32)), "norm sketch"),
    ],
)
def test_a_feature_store_that_learning_never_makes_is_refused(policy, edit, message):
    meta, arrays = _store_edit(policy, edit)
    with pytest.raises(CheckpointError, match=message):
        AdvKernelSVM.from_checkpoint(meta, arrays)


@pytest.mark.parametrize("policy, array", [("compact", "coef"), ("grow", "sketch")])
def test_a_feature_store_whose_norm_overflows_is_refused_without_a_warning(policy, array):
    """The norm of coefficients of 1e300 squares past float64: numpy's overflow warning came
    before the refusal (in a service's log, a line of its own)."""
    meta, arrays = _store_edit(policy, lambda s, a: a[array].__setitem__(0, 1e300))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(CheckpointError, match="norm"):
            AdvKernelSVM.from_checkpoint(meta, arrays)


@pytest.mark.parametrize("policy", ["compact", "compact_slot", "truncate", "grow"])
def test_a_feature_store_before_and_past_its_budget_round_trips(policy):
    for n in (1, 5, 60):  # fewer additions than the budget of 8, then more
        model = AdvKernelSVM(epsilon=0.1, budget=8, budget_policy=policy, gamma=1.0, seed=3)
        for x, y in stream(n, seed=0):
            model.learn_one(x, y)
        loaded = AdvKernelSVM.from_checkpoint(*model.to_checkpoint())
        for x, y in stream(20, seed=1):
            assert loaded.decision_one(x) == model.decision_one(x)
            loaded.learn_one(x, y)
            model.learn_one(x, y)


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


# -- hostile files: every failure to read is a CheckpointError, with bounded memory -------------


def small_checkpoint() -> bytes:
    meta = {"note": "small", "names": [["s", "a"], ["t", [["i", 3]]]], "x": 1.5}
    return checkpoint.dumps(meta, {"w": np.arange(4.0), "mask": np.array([True, False]),
                                   "n": np.array([[1, 2]], dtype=np.int32)})


def read_or_none(data: bytes):
    """`loads(data)`, or None when it raises CheckpointError (any other exception fails)."""
    try:
        return checkpoint.loads(data)
    except CheckpointError:
        return None


def same_content(result, reference) -> bool:
    (meta, arrays), (meta_ref, arrays_ref) = result, reference
    return (meta == meta_ref and arrays.keys() == arrays_ref.keys()
            and all(arrays[k].dtype == arrays_ref[k].dtype
                    and np.array_equal(arrays[k], arrays_ref[k]) for k in arrays))


def test_round_trip_of_every_stored_dtype():
    arrays = {f"a_{i}": np.arange(6).reshape(2, 3).astype(dtype)
              for i, dtype in enumerate(["?", "i1", "u1", "<i2", "<u2", "<i4", "<u4", "<i8",
                                         "<u8", "<f2", "<f4", "<f8"])}
    arrays["big_endian"] = np.arange(3, dtype=">f8")  # stored little-endian, same values
    arrays["scalar"] = np.array(2.5)
    arrays["empty"] = np.zeros((0, 7))
    meta, loaded = checkpoint.loads(checkpoint.dumps({"k": [1, None, "x"]}, arrays))
    assert meta["k"] == [1, None, "x"]
    for name, array in arrays.items():
        assert loaded[name].shape == array.shape
        np.testing.assert_array_equal(loaded[name], array)
    assert loaded["big_endian"].dtype.str == "<f8"


def test_truncated_at_every_length():
    data = small_checkpoint()
    assert read_or_none(data) is not None
    for cut in range(len(data)):
        with pytest.raises(CheckpointError):
            checkpoint.loads(data[:cut])


def test_every_flipped_byte_breaks_the_seal():
    data = small_checkpoint()
    for i in range(len(data)):
        corrupt = bytearray(data)
        corrupt[i] ^= 0xFF
        with pytest.raises(CheckpointError):
            checkpoint.loads(bytes(corrupt))


def test_every_flipped_byte_behind_a_valid_seal_is_refused_or_harmless():
    """With the seal recomputed, the corruption reaches zipfile, zlib, json and numpy: each flip
    is a CheckpointError or changes nothing that is read (a timestamp, say)."""
    data = small_checkpoint()
    reference = checkpoint.loads(data)
    refused = 0
    for i in range(len(data) - SEAL_SIZE):
        corrupt = bytearray(data)
        corrupt[i] ^= 0xFF
        result = read_or_none(reseal(bytes(corrupt)))
        refused += result is None
        assert result is None or same_content(result, reference), i
    assert refused > 0.6 * (len(data) - SEAL_SIZE)  # 573 of 759: headers have unread fields


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1,
                      max_size=8),
       cut=st.one_of(st.none(), st.integers(0, 10**6)),
       insert=st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.binary(max_size=40))))
def test_generated_corruptions_behind_a_valid_seal(edits, cut, insert):
    data = bytearray(small_checkpoint())
    reference = checkpoint.loads(bytes(data))
    body = len(data) - SEAL_SIZE
    for position, value in edits:
        data[position % body] = value
    if insert is not None:
        position, extra = insert
        data[position % body:position % body] = extra
    body = len(data) - SEAL_SIZE
    if cut is not None:
        data = data[:cut % body] + data[body:]
    result = read_or_none(reseal(bytes(data)))
    assert result is None or same_content(result, reference)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_sealed_or_not(data):
    with pytest.raises(CheckpointError):
        checkpoint.loads(data)
    if len(data) > SEAL_SIZE:
        with pytest.raises(CheckpointError):
            checkpoint.loads(reseal(data))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.text(max_size=10)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=30)
ARRAYS = st.dictionaries(
    st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True),
    st.tuples(st.sampled_from(["?", "u1", "i2", "i4", "i8", "f4", "f8"]),
              st.lists(st.integers(0, 4), max_size=3)),
    max_size=4)


@settings(max_examples=150, deadline=None)
@given(meta=st.dictionaries(st.text(max_size=8).filter(
    lambda k: k not in ("format", "version", "arrays")), JSON, max_size=5), specs=ARRAYS)
def test_whatever_dumps_writes_loads_reads_back(meta, specs):
    rng = np.random.default_rng(0)
    arrays = {name: (rng.random(shape) * 100).astype(dtype) for name, (dtype, shape) in
              specs.items()}
    loaded_meta, loaded = checkpoint.loads(checkpoint.dumps(meta, arrays))
    assert {k: v for k, v in loaded_meta.items() if k not in ("format", "version", "arrays")} \
        == meta
    for name, array in arrays.items():
        np.testing.assert_array_equal(loaded[name], array)


@pytest.mark.parametrize(
    "meta, arrays, message",
    [({"arrays": 1}, {}, "reserved"),
     ({"x": float("nan")}, {}, "Out of range"),
     ({"deep": json.loads("[" * 70 + "]" * 70)}, {}, "nested 71 deep"),
     ({"many": list(range(checkpoint.MAX_META_VALUES))}, {}, "values"),
     ({"long": "x" * checkpoint.MAX_META_BYTES}, {}, "bytes"),
     ({}, {"bad name": np.zeros(1)}, "identifier"),
     ({}, {"c": np.zeros(1, complex)}, "dtype"),
     ({}, {"o": np.array([None])}, "dtype")],
)
def test_dumps_refuses_what_loads_would_refuse(meta, arrays, message):
    with pytest.raises((ValueError, TypeError), match=message):
        checkpoint.dumps(meta, arrays)


def hostile_meta(arrays: dict, **extra) -> bytes:
    return json.dumps({"format": checkpoint.FORMAT, "version": checkpoint.VERSION,
                       "arrays": arrays, **extra}).encode()


def npy_header(dtype: str, shape: tuple) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


@pytest.mark.parametrize(
    "members, message",
    [({"meta.json": b"{\"format\": \"river-advsvm-checkpoint\", \"version\": 1, \"arrays\": {}}"},
      "version 1"),
     ({"meta.json": b"[" * 100_000 + b"]" * 100_000}, "nested 100000 deep"),
     ({"meta.json": b'{"a": ' + b"[" * 5000 + b"1" + b"]" * 5000 + b"}"}, "nested"),
     ({"meta.json": b"[" + b"[]," * 600_000 + b"[]]"}, "values"),
     ({"meta.json": b'{"x": NaN}'}, "NaN"),
     ({"meta.json": b'{"x": ' + b"9" * 5000 + b"}"}, "digits"),
     ({"meta.json": b"\xff\xfe{}"}, "UnicodeDecodeError"),
     ({"meta.json": b"[1, 2]"}, "not a river-advsvm checkpoint"),
     ({"meta.json": hostile_meta({"w": {"dtype": "|O", "shape": [1]}})}, "dtype"),
     ({"meta.json": hostile_meta({"w": {"dtype": ">f8", "shape": [1]}})}, "dtype"),
     ({"meta.json": hostile_meta({"w": {"dtype": "<c16", "shape": [1]}})}, "dtype"),
     ({"meta.json": hostile_meta({"w": {"dtype": {"names": ["a"], "formats": ["<f8"]},
                                        "shape": [1]}})}, "dtype"),
     ({"meta.json": hostile_meta({"w": {"dtype": "<f8", "shape": [10**30]}}), "w.npy": b""},
      "need 8000000000000000000000000000000 bytes, over the 2147483648 allowed"),
     ({"meta.json": hostile_meta({"w": {"dtype": "<f8", "shape": [2**62, 2**62]}}),
       "w.npy": b""}, "over the"),
     ({"meta.json": hostile_meta({"w": {"dtype": "<f8", "shape": [-1]}})}, "shape"),
     ({"meta.json": hostile_meta({"w": {"dtype": "<f8", "shape": [True]}})}, "shape"),
     ({"meta.json": hostile_meta({"w": {"dtype": "<f8", "shape": [1.0]}})}, "shape"),
     ({"meta.json": hostile_meta({"w": {"dtype": "<f8", "shape": [1] * 33}})}, "shape"),
     ({"meta.json": hostile_meta({"../w": {"dtype": "<f8", "shape": [1]}})}, "identifier"),
     ({"meta.json": hostile_meta({"w": {"dtype": "<f8", "shape": [1]}})}, "lacks"),
     ({"meta.json": hostile_meta({}), "x.npy": b""}, "unexpected"),
     ({"meta.json": hostile_meta({"w": {"dtype": "<f8", "shape": [2]}}),
       "w.npy": npy_header("<f8", (3,)) + bytes(8)}, "implies"),
     ({"meta.json": hostile_meta({"w": {"dtype": "<f8", "shape": [2]}}),
       "w.npy": npy_header("<i8", (2,)) + bytes(16)}, "holds"),
     ({"meta.json": hostile_meta({"w": {"dtype": "<f8", "shape": [2]}}),
       "w.npy": b"\x93NUMPY\x02\x00" + npy_header("<f8", (2,))[8:] + bytes(16)}, "1.0"),
     ({"meta.json": hostile_meta({"w": {"dtype": "|b1", "shape": [2]}}),
       "w.npy": npy_header("|b1", (2,)) + b"\x01\x07"}, "0 and 1")],
)
def test_hostile_files_are_checkpoint_errors(tmp_path, members, message):
    data = sealed_zip(members)
    with pytest.raises(CheckpointError, match=message):
        checkpoint.loads(data)
    (tmp_path / "x.ckpt").write_bytes(data)
    with pytest.raises(CheckpointError, match=message):
        checkpoint.read(tmp_path / "x.ckpt")


def test_only_stored_and_deflated_members_are_read():
    members = {"meta.json": hostile_meta({})}
    assert checkpoint.loads(sealed_zip(members, zipfile.ZIP_STORED))[0]["arrays"] == {}
    for method in (zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        with pytest.raises(CheckpointError, match="compression method"):
            checkpoint.loads(sealed_zip(members, method))


def test_a_missing_file_is_file_not_found_and_a_directory_a_checkpoint_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        checkpoint.read(tmp_path / "nowhere")
    with pytest.raises(CheckpointError, match="cannot read"):
        checkpoint.read(tmp_path)


def test_the_budget_may_be_a_function_of_the_validated_metadata(tmp_path):
    path = tmp_path / "m.ckpt"
    checkpoint.write(path, {"budget": 2}, {"w": np.zeros(3)})
    seen = []

    def bound(meta):
        seen.append(meta)
        return 8 * meta["budget"]

    with pytest.raises(CheckpointError, match="need 24 bytes, over the 16 allowed"):
        checkpoint.read(path, max_array_bytes=bound)
    assert seen[0]["arrays"] == {"w": {"dtype": "<f8", "shape": [3]}}

    def refuse(meta):
        raise CheckpointError("budget 2 is absurd")

    with pytest.raises(CheckpointError, match=f"^{path}: budget 2 is absurd$"):
        checkpoint.read(path, max_array_bytes=refuse)
    assert checkpoint.read(path, max_array_bytes=24)[1]["w"].shape == (3,)


@pytest.mark.parametrize("bound", [None, True, 1.5, -1, "1000"])
def test_an_array_bound_that_is_no_count_of_bytes_is_refused(tmp_path, bound):
    """None read the metadata alone and returned no arrays, as if the file held none; True
    and 1.5 were compared as numbers ("over the True allowed")."""
    path = tmp_path / "m.ckpt"
    data = checkpoint.dumps({"n": 7}, {"w": np.arange(3.0)})
    path.write_bytes(data)
    message = r"^max_array_bytes must be a number of bytes \(an int >= 0\) or a function"
    with pytest.raises(TypeError, match=message):
        checkpoint.read(path, max_array_bytes=bound)
    with pytest.raises(TypeError, match=message):
        checkpoint.loads(data, max_array_bytes=bound)
    assert checkpoint.read(path, max_array_bytes=np.int64(24))[1]["w"].tolist() == [0, 1, 2]


def test_read_meta_decompresses_no_array(tmp_path):
    """A corrupt array member behind a valid seal: `read` refuses it, `read_meta` never opens
    it."""
    path = tmp_path / "m.ckpt"
    data = checkpoint.dumps({"n": 7}, {"w": np.arange(1000.0)})
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = archive.getinfo("w.npy")
    corrupt = bytearray(data)
    corrupt[info.header_offset + 30 + len(info.filename) + 100] ^= 0xFF  # inside the array
    path.write_bytes(reseal(bytes(corrupt)))
    with pytest.raises(CheckpointError):
        checkpoint.read(path)
    assert checkpoint.read_meta(path)["n"] == 7


# -- peak memory on hostile files, measured in a fresh process ---------------------------------

#: Peak RSS of the reading process, Python, numpy and river_advsvm included (~32 MB of it).
#: Measured on AMD EPYC, Python 3.11, numpy 2.4: 32-36 MB for every refusal below, 55 MB for
#: the largest metadata the bounds accept. Arrays are stored uncompressed, so the 1 GiB bomb
#: is refused whatever the budget.
PEAK_RSS_MB = 100
GIB = 2**30
MIB = 2**20


class ChunkedDeflate:
    """A raw deflate stream cut into 1 MiB pieces, each compressed on its own (a full flush
    after it: no back-reference crosses it), so that a piece seen before is the same bytes
    again. A bomb of 1 GiB of one byte then deflates in the time of 1 MiB, to what zipfile's
    own compressor writes (about 1 MB)."""

    def __init__(self):
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
        self._pieces: dict[bytes, bytes] = {}

    def compress(self, data) -> bytes:
        view = memoryview(data)
        out = []
        for start in range(0, len(view), MIB):
            piece = bytes(view[start:start + MIB])
            if piece not in self._pieces:
                self._pieces[piece] = (self._deflate.compress(piece)
                                       + self._deflate.flush(zlib.Z_FULL_FLUSH))
            out.append(self._pieces[piece])
        return b"".join(out)

    def flush(self) -> bytes:
        return self._deflate.flush()


def bomb_zip(members: dict[str, list[bytes]]) -> bytes:
    """A zip of members given as lists of pieces (written one by one: 1 GiB is never in
    memory), deflated by `ChunkedDeflate`, sealed as a checkpoint is."""
    buffer = io.BytesIO()
    with mock.patch.object(zipfile, "_get_compressor", lambda *args, **kwargs: ChunkedDeflate()):
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, pieces in members.items():
                with archive.open(name, "w") as member:
                    for piece in pieces:
                        member.write(piece)
            archive.comment = b"\0" * SEAL_SIZE
    return buffer.getvalue()


def zip_bomb(path, declared_shape, written_bytes, sizes_lie_to: int | None = None):
    """A ~1 MB checkpoint whose array `w` inflates to `written_bytes` of zeros; with
    `sizes_lie_to`, the zip headers declare that many bytes instead (the CRC stays that of
    the full stream)."""
    data = bytearray(bomb_zip({
        "meta.json": [hostile_meta({"w": {"dtype": "<f8", "shape": list(declared_shape)}})],
        "w.npy": [npy_header("<f8", tuple(declared_shape))] + [bytes(MIB)] * (written_bytes // MIB),
    }))
    if sizes_lie_to is not None:
        size = sizes_lie_to.to_bytes(4, "little")
        end = len(data) - SEAL_SIZE - 22  # the end-of-archive record, before the comment
        entry = int.from_bytes(data[end + 16:end + 20], "little")  # the central directory
        while data[entry + 46:entry + 51] != b"w.npy":
            entry += 46 + sum(int.from_bytes(data[entry + i:entry + i + 2], "little")
                              for i in (28, 30, 32))
        local = int.from_bytes(data[entry + 42:entry + 46], "little")
        data[entry + 24:entry + 28] = size  # uncompressed size, central directory
        data[local + 22:local + 26] = size  # and local header
    path.write_bytes(reseal(bytes(data)))
    return path


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bombs")
    return {
        "declares_1_gib": zip_bomb(directory / "a.ckpt", (GIB // 8,), GIB),
        "headers_lie": zip_bomb(directory / "b.ckpt", (16,), GIB, sizes_lie_to=128 + 128),
        "absurd_shape": directory / "c.ckpt",
        "meta_bomb": directory / "d.ckpt",
        "deep_meta": directory / "e.ckpt",
        "largest_accepted_meta": directory / "f.ckpt",
    }


def peak_rss_mb(call: str, path) -> tuple[float, str]:
    """Run `river_advsvm.checkpoint.<call>` on `path` in a new process: its peak RSS in MB
    and the outcome ('ok' or the exception's class).

    Linux keeps a process's peak RSS across `exec`, so a child of this (large) test process
    would report at least our own; the measuring process is therefore forked from a fresh,
    small interpreter.
    """
    code = (
        "import os, sys\n"
        "if os.fork():\n    sys.exit(os.wait()[1] >> 8)\n"
        "import resource\n"
        "from river_advsvm import checkpoint\n"
        f"try:\n    checkpoint.{call}\n    outcome = 'ok'\n"
        "except Exception as error:\n    outcome = type(error).__name__\n"
        "print(outcome, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
    ).replace("PATH", repr(str(path)))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    outcome, peak = done.stdout.split()
    return float(peak), outcome


@pytest.mark.parametrize(
    "bomb, call, outcome",
    [("declares_1_gib", "read(PATH, max_array_bytes=64 * 2**20)", "CheckpointError"),
     ("declares_1_gib", "read(PATH)", "CheckpointError"),  # a compressed array, refused
     ("declares_1_gib", "read_meta(PATH)", "ok"),
     ("headers_lie", "read(PATH)", "CheckpointError"),
     ("absurd_shape", "read(PATH)", "CheckpointError"),
     ("meta_bomb", "read(PATH)", "CheckpointError"),
     ("deep_meta", "read_meta(PATH)", "CheckpointError"),
     ("largest_accepted_meta", "read_meta(PATH)", "ok")],
)
def test_peak_memory_refusing_a_1_mb_hostile_file(bombs, bomb, call, outcome):
    path = bombs[bomb]
    if bomb == "absurd_shape":
        path.write_bytes(sealed_zip({"meta.json": hostile_meta(
            {"w": {"dtype": "<f8", "shape": [2**40, 2**40]}}), "w.npy": b"\0" * 2**20}))
    elif bomb == "meta_bomb":  # 1 GiB of JSON whitespace, deflated to ~1 MB
        path.write_bytes(reseal(bomb_zip({"meta.json": [hostile_meta({})]
                                                        + [b" " * MIB] * (GIB // MIB)})))
    elif bomb == "deep_meta":
        path.write_bytes(sealed_zip({"meta.json": b"[" * 2**20 + b"]" * 2**20}))
    elif bomb == "largest_accepted_meta":  # the most Python objects the bounds let through
        n = checkpoint.MAX_META_VALUES // 2 - 10
        path.write_bytes(sealed_zip({"meta.json": hostile_meta({}, x=[[]] * n)}))
    assert path.stat().st_size < 1.1 * 2**20
    peak, result = peak_rss_mb(call, path)
    assert result == outcome
    assert peak < PEAK_RSS_MB, f"{bomb}: {peak:.0f} MB"


@pytest.mark.parametrize("coefficient, total", [(1e155, r"1e\+155"), (1e300, r"1e\+300"),
                                                (1e308, "inf")])
def test_support_vector_coefficients_too_large_to_check_are_refused_in_words(coefficient,
                                                                             total):
    # Their sum's square, the tolerance of the norm's check, overflowed: the error was
    # "(34, 'Numerical result out of range')". A sum past float64's range came with numpy's
    # overflow warning (in a service's log, a line of its own before the refusal).
    model = FACTORIES["merge"]()
    for x, y in stream(60, seed=0):
        model.learn_one(x, y)
    meta, arrays = model.to_checkpoint()
    arrays["alpha"][0] = coefficient
    if coefficient > 1e307:
        arrays["alpha"][1] = coefficient
    message = (r"invalid AdvKernelSVM checkpoint: the saved coefficients are too large: their "
               rf"magnitudes add up to {total}, over 1e\+150$")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(CheckpointError, match=message):
            AdvKernelSVM.from_checkpoint(meta, arrays)


@pytest.mark.parametrize("labels, held_label, shown", [
    (["a", "b"], "c", "'c'"),
    (["a"], "b", "'b'"),
    ([], "a", "'a'"),
])
def test_a_held_row_of_a_label_the_model_does_not_know_is_refused(tmp_path, labels, held_label,
                                                                   shown):
    # A checkpoint that names its inputs in its metadata (as before they were stored in
    # arrays): it loaded, and its held row was learned as the negative class once the warm-up
    # ended; the next save then failed.
    model = AdvKernelSVM(budget=8, warm_up=50, seed=1)
    for x, y in stream(10, seed=0):
        model.learn_one(x, y)
    meta, arrays = model.to_checkpoint()
    meta["state"]["labels"], meta["state"]["held"][0][2] = labels, held_label
    path = tmp_path / "m.ckpt"
    checkpoint.write(path, meta, arrays)
    message = f"a held row's label {shown} is not one of the model's classes {labels!r}"
    with pytest.raises(CheckpointError, match=re.escape(message)):
        AdvKernelSVM.load(path)


def _zip64_member_at(offset: int) -> bytes:
    """A sealed zip of one stored `meta.json` whose central directory puts its local header
    at `offset` (a zip64 extra field): the archive structure a reader seeks by."""
    import struct
    import zlib

    name, data = b"meta.json", b'{"format": "river-advsvm-checkpoint", "version": 2}'
    crc = zlib.crc32(data)
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, crc, len(data),
                        len(data), len(name), 0) + name + data
    extra = struct.pack("<2HQ", 1, 8, offset)
    central = struct.pack("<4s6H3L5HLL", b"PK\x01\x02", 45, 45, 0, 0, 0, 0x21, crc, len(data),
                          len(data), len(name), len(extra), 0, 0, 0, 0, 0xFFFFFFFF) + name + extra
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central), len(local),
                      SEAL_SIZE)
    return reseal(local + central + end + b"\0" * SEAL_SIZE)


@pytest.mark.parametrize("offset", [2**40, 2**62, 2**63 - 1])
def test_a_member_at_an_offset_past_any_files_end_is_a_checkpoint_error(tmp_path, offset):
    # Seeking there fails with EINVAL on most file systems: it was re-raised as an OSError
    # ("Invalid argument while reading it"), as if the disk had failed.
    path = tmp_path / "m.ckpt"
    path.write_bytes(_zip64_member_at(offset))
    for read in (checkpoint.read, checkpoint.read_meta, AdvKernelSVM.load):
        with pytest.raises(CheckpointError, match=f"^{re.escape(str(path))}: not a valid "):
            read(path)
    with pytest.raises(CheckpointError, match="^checkpoint of [0-9]+ bytes: not a valid "):
        checkpoint.loads(path.read_bytes())


@pytest.mark.parametrize("field, value", [
    ("n_learned", 150.5), ("n_learned", True), ("n_learned", "150"),
    ("bias", "0.5"), ("bias", False), ("temperature", ["1.0", 0.0]),
    ("temperature", [1.0, 0.0, 0.0]),
])
def test_counts_and_numbers_of_another_type_are_refused(field, value):
    # int() and float() took them: 150.5 samples became 150, "0.5" a bias of 0.5.
    model = FACTORIES["linear"]()
    for x, y in stream(30, seed=0):
        model.learn_one(x, y)
    meta, arrays = model.to_checkpoint()
    meta["state"][field] = value
    message = "n_learned must be an int, and the bias and temperature numbers"
    with pytest.raises(CheckpointError, match=message):
        AdvLinearSVM.from_checkpoint(meta, arrays)


@pytest.mark.parametrize("name, field, value, message", [
    ("compact", "gamma", 5.0, "the saved bandwidth 5.0 is not the gamma parameter 0.5"),
    ("compact_slot", "gamma", 5.0, "the saved bandwidth 5.0 is not the gamma parameter 0.5"),
    ("merge", "gamma", 5.0, "the saved bandwidth 5.0 is not the gamma parameter 2.0"),
    ("compact", "seed", 4, "the saved seed 4 is not the seed parameter 3"),
    ("truncate", "seed", 6, "the saved seed 6 is not the seed parameter 5"),
])
def test_a_bandwidth_or_seed_other_than_the_parameters_is_refused(name, field, value, message):
    # Random features keep no bandwidth or seed of their own: such a model loaded, and learned
    # with other features than its parameters say (a group then refused to average it).
    model = FACTORIES[name]()
    if isinstance(model.gamma, str):
        model = model.clone({"gamma": 0.5})
    for x, y in stream(30, seed=0):
        model.learn_one(x, y)
    meta, arrays = model.to_checkpoint()
    meta["state"]["model"][field] = value
    with pytest.raises(CheckpointError, match=re.escape(message)):
        AdvKernelSVM.from_checkpoint(meta, arrays)


#: Every kind of model a checkpoint holds: each budget policy, both kernels and dtypes, attacks
#: of both norms and none, both adversaries, a numeric gamma, a dict and 'scale' (a warm-up of
#: 8: a checkpoint may fall inside it), both schedules, reprocessing, and the linear model.
_REPLAYED = st.one_of(
    st.builds(
        lambda policy, kernel, dtype, epsilon, norm, gamma, adversary, schedule, reprocess:
        AdvKernelSVM(epsilon=epsilon, norm=norm, kernel=kernel, dtype=dtype, gamma=gamma,
                     budget=6, budget_policy=policy, adversary=adversary, schedule=schedule,
                     warm_up=8, seed=1,
                     reprocess=reprocess if policy in ("merge", "remove") else 0),
        st.sampled_from(["merge", "remove", "compact", "compact_slot", "truncate", "grow"]),
        st.sampled_from(["rbf", "laplacian"]), st.sampled_from(["float32", "float64"]),
        st.sampled_from([0.0, 0.1]), st.sampled_from(["l2", "linf"]),
        st.sampled_from([0.7, "scale", {"a": 1.0, "b": 2.0}]),
        st.sampled_from(["pgd", "closed_form"]), st.sampled_from(["constant", "diminishing"]),
        st.sampled_from([0, 2])),
    st.builds(lambda epsilon, norm: AdvLinearSVM(epsilon=epsilon, norm=norm),
              st.sampled_from([0.0, 0.1]), st.sampled_from(["l2", "linf"])),
)
_VALUE = st.one_of(st.floats(-3, 3, width=32), st.sampled_from([0.0, 1e6, -1e-9, 12345.678]))
_ROW = st.tuples(st.fixed_dictionaries({}, optional={"a": _VALUE, "b": _VALUE, "c": _VALUE,
                                                     7: _VALUE}), st.booleans())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_REPLAYED, st.lists(_ROW, min_size=1, max_size=40), st.integers(0, 40),
       st.sampled_from(["file form", "metadata form", "pickle"]))
def test_restoring_anywhere_and_going_on_is_bit_identical_to_never_stopping(model, rows, cut,
                                                                            form):
    uninterrupted, saved = model, model.clone()
    for x, y in rows[:cut]:
        uninterrupted.learn_one(x, y)
        saved.learn_one(x, y)
    if form == "file form":  # (what save writes, read under the bound load sets)
        restored = type(saved).from_checkpoint(*model_checkpoint.loads(
            model_checkpoint.dumps(*saved.to_checkpoint()),
            max_array_bytes=type(saved).checkpoint_array_bytes))
    elif form == "metadata form":
        restored = type(saved).from_checkpoint(*saved.to_checkpoint())
    else:
        restored = pickle.loads(pickle.dumps(saved))
    del saved
    probes = [{"a": 0.3, "b": -1.0}, {"c": 2.0, 7: 0.5}, {}, {"a": 1.5, "z": 0.2}]
    for x, y in rows[cut:]:
        for probe in probes:
            assert restored.decision_one(probe) == uninterrupted.decision_one(probe)
        uninterrupted.learn_one(x, y)
        restored.learn_one(x, y)
    for probe in probes:
        assert restored.decision_one(probe) == uninterrupted.decision_one(probe)
        assert restored.predict_proba_one(probe) == uninterrupted.predict_proba_one(probe)
    assert model_checkpoint.dumps(*restored.to_checkpoint()) == \
        model_checkpoint.dumps(*uninterrupted.to_checkpoint())


@pytest.mark.parametrize("kernel, dtype, first, second, refused", [
    ("rbf", "float64", 1e200, -1e200, True), ("rbf", "float64", 9e153, 9e153, True),
    ("rbf", "float64", 1e300, 0.0, True),
    # float32: finite, but a dot product in float32 overflowed (NaN decisions after loading)
    ("rbf", "float32", 1e20, 0.0, True), ("rbf", "float32", 1e30, -1e30, True),
    # Laplacian exponents are L1 distances: those of these vectors are within range (a model
    # with a wide width beside narrow ones stores rows of 1e25 and more), the squared norms
    # the store keeps beside them too, unless they overflow float64 or the L1 norms float32.
    ("laplacian", "float64", 1e200, -1e200, True), ("laplacian", "float64", 9e153, 9e153, False),
    ("laplacian", "float64", 1e300, 0.0, True), ("laplacian", "float32", 1e20, 0.0, False),
    ("laplacian", "float32", 1e30, -1e30, False), ("laplacian", "float32", 3e38, 0.0, True)])
def test_support_vectors_too_large_for_their_kernel_values_are_refused(kernel, dtype, first,
                                                                       second, refused):
    # Their squared norms overflowed: the model loaded, and its next margin was NaN (an RBF
    # exponent inf - inf), a FloatingPointError at the next sample.
    model = AdvKernelSVM(epsilon=0.1, budget=16, gamma=1.0, seed=3, kernel=kernel,
                         dtype=dtype)
    for x, y in stream(60, seed=0):
        model.learn_one(x, y)
    meta, arrays = model.to_checkpoint()
    arrays["vectors"][0, 0], arrays["vectors"][1, 0] = first, second
    if "gram" in arrays:  # (a kept exponent matrix would have to match them)
        del arrays["gram"]
    message = "the saved support vectors are too large for their kernel values to be computed"
    if refused:
        with pytest.raises(CheckpointError, match=message):
            AdvKernelSVM.from_checkpoint(meta, arrays)
        return
    loaded = AdvKernelSVM.from_checkpoint(meta, arrays)  # and its kernel values are numbers
    for x, y in stream(20, seed=1):
        assert math.isfinite(loaded.decision_one(x))
        loaded.learn_one(x, y)
    assert math.isfinite(loaded.rkhs_norm)


def _scaled_weights(name: str, factor: float):
    """A checkpoint of a `FACTORIES` model whose weights are `factor` times larger, its norm
    along with them (so that only their size is wrong)."""
    model = FACTORIES[name]()
    for x, y in stream(150, seed=0):  # (past a warm-up of 100)
        model.learn_one(x, y)
    meta, arrays = model.to_checkpoint()
    store = meta["state"]["model"].get("store", {})
    if name == "linear":
        arrays["weights"] *= factor
    elif name == "merge":
        store["scale"] *= 1e60  # (at most 1e64: the rest in the coefficients)
        arrays["alpha"] *= factor / 1e60
        store["squared_norm"] *= (factor / 1e60) ** 2
        # The average's coefficients as a group's fold saves them, without the base that
        # gives them from the store's (which no longer would).
        del arrays["average_coefficient_base"]
    else:
        arrays["coef"] *= factor
        store["norm"] *= factor
    return meta, arrays


@pytest.mark.parametrize("name, factor", [("linear", 1e290), ("merge", 1e200),
                                          ("compact", 1e120)])
def test_weights_past_any_margin_learning_reaches_are_refused(name, factor):
    # Loaded, the model's margins were past 1e154: the calibration's squared gradient became
    # infinite at the next sample, and the model could no longer be saved.
    meta, arrays = _scaled_weights(name, factor)
    with pytest.raises(CheckpointError, match=r"its weights give margins up to [0-9.e+]+, past "
                                              r"the 1e\+100 a model may reach"):
        type(FACTORIES[name]()).from_checkpoint(meta, arrays)
    meta, arrays = _scaled_weights(name, 1e6)  # large, but within reach: it learns and saves
    model = type(FACTORIES[name]()).from_checkpoint(meta, arrays)
    for x, y in stream(30, seed=1):
        model.learn_one(x, y)
    type(model).from_checkpoint(*model_checkpoint.loads(model_checkpoint.dumps(
        *model.to_checkpoint())))


@pytest.mark.parametrize("gamma, message", [
    (3.0, "the model holds warm-up rows back and already has its bandwidth"),
    (True, "the saved bandwidth True is not a number"),
])
def test_held_rows_with_a_bandwidth_are_refused(gamma, message):
    # Loaded, the model never learned its held rows (rows are held only until 'scale' fits
    # the bandwidth), and its next checkpoint could not be read back.
    model = AdvKernelSVM(budget=8, warm_up=50, seed=1)
    for x, y in stream(10, seed=0):
        model.learn_one(x, y)
    meta, arrays = model.to_checkpoint()
    meta["state"]["model"]["gamma"] = gamma
    with pytest.raises(CheckpointError, match=message):
        AdvKernelSVM.from_checkpoint(meta, arrays)


@pytest.mark.parametrize("name", [{"s": "u"}, [["s", "u"]], ["s"], [["s"], "u"], "u", 3])
def test_an_input_name_that_is_not_a_tag_and_a_value_is_refused_as_one(name):
    # Python's unpacking error was the message: "not enough values to unpack (expected 2,
    # got 1)", or "unhashable type: 'list'".
    model = FACTORIES["linear"]()
    for x, y in stream(10, seed=0):
        model.learn_one(x, y)
    meta, arrays = model.to_checkpoint()
    meta["state"]["names"][0] = name
    with pytest.raises(CheckpointError, match="bad feature name .*: not a \\[tag, value\\] pair"):
        AdvLinearSVM.from_checkpoint(meta, arrays)


@pytest.mark.parametrize("cls", [AdvKernelSVM, AdvLinearSVM])
def test_a_checkpoint_with_a_name_twice_or_a_bias_past_the_bound_is_refused(cls):
    """`from_checkpoint` on the form `to_checkpoint` gives (not only on the packed form a file
    holds): an input named twice (two columns for one input) and a bias past `MAX_ABS_BIAS`
    are refused, not restored."""
    from river_advsvm.model_checkpoint import MAX_ABS_BIAS

    model = cls(**({"budget": 8, "seed": 0, "gamma": 0.5} if cls is AdvKernelSVM else {}))
    model.learn_one({"a": 1.0, "b": 2.0}, True)
    model.learn_one({"a": -1.0, "b": 0.5}, False)
    meta, arrays = model.to_checkpoint()
    cls.from_checkpoint(meta, arrays)  # (as made: restored)
    twice = json.loads(json.dumps(meta))
    twice["state"]["names"] = [twice["state"]["names"][0]] * 2
    with pytest.raises(CheckpointError, match="duplicate feature names"):
        cls.from_checkpoint(twice, arrays)
    biased = json.loads(json.dumps(meta))
    biased["state"]["bias"] = 2 * MAX_ABS_BIAS
    with pytest.raises(CheckpointError, match="bias"):
        cls.from_checkpoint(biased, arrays)
