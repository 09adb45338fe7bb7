"""`advsvm inspect DIR` on hostile or odd checkpoints, and through a closed pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from river_advsvm import AdvKernelSVM, checkpoint, cli
from river_advsvm.checkpoint import CheckpointError

state = pytest.importorskip("river_advsvm.streams.state")

RESERVED = ("format", "version", "arrays")


@pytest.fixture
def service_checkpoint(tmp_path):
    model = AdvKernelSVM(budget=16, seed=0)
    model.learn_one({"a": 1.0}, "x")
    saved = state.ServiceState(model=model, offsets={"in": {0: 5}}, topic_ids={"in": "abc"})
    saved.counters.update(learned=1, messages=5)
    state.save(tmp_path, saved)
    return tmp_path


def edit(directory, change_meta=None, add_arrays=None):
    """Rewrite the checkpoint in `directory` with its metadata or arrays changed."""
    path = state.checkpoint_path(directory)
    meta, arrays = checkpoint.read(path)
    meta = {k: v for k, v in meta.items() if k not in RESERVED}
    if change_meta is not None:
        change_meta(meta)
    checkpoint.write(path, meta, {**arrays, **(add_arrays or {})})


@pytest.mark.parametrize(
    "change, says",
    [(lambda m: m["extra"].update(counters=[1, 2]), "counters is a list, not an object"),
     (lambda m: m.update(state=[]), "its state is a list, not an object"),
     (lambda m: m.update(extra={"kind": "advsvm-serve", "version": 1, "counters": "x"}),
      "offsets is missing"),
     # learned_correct / learned: an OverflowError, which said "unexpected".
     (lambda m: m["extra"]["counters"].update(learned_correct=10**400),
      "counter learned_correct"),
     # What the service refuses, inspect printed: an accuracy of -112.7%, offsets of -1.
     (lambda m: m["extra"]["counters"].update(learned=-3), "counter learned -3 is out of range"),
     (lambda m: m["extra"]["offsets"]["in"].update({"0": -1}), "offset of in[0] -1"),
     (lambda m: m["state"].update(n_learned=-1), "the model's n_learned -1"),
     (lambda m: m["extra"].update(group=[]), "group is a list, not an object")],
)
def test_metadata_the_service_refuses_is_refused_in_one_line(service_checkpoint, capsys, change,
                                                               says):
    edit(service_checkpoint, change)
    with pytest.raises(CheckpointError):
        state.load(service_checkpoint)
    assert cli.main(["inspect", str(service_checkpoint)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("advsvm inspect: invalid ") and says in err
    assert str(state.checkpoint_path(service_checkpoint)) in err


def test_samples_learned_is_what_the_service_resumes_from(service_checkpoint, capsys):
    """The counter the service resumes from, not the copy beside it that it never reads."""
    edit(service_checkpoint, lambda m: m["extra"].update(samples_learned="lots"))
    assert cli.main(["inspect", str(service_checkpoint)]) == 0
    assert json.loads(capsys.readouterr().out)["samples_learned"] == 1


def test_a_closed_pipe_ends_quietly(service_checkpoint):
    """`advsvm inspect DIR | head`: the reader is gone before we write; no BrokenPipeError."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "river_advsvm", "inspect",
                               str(service_checkpoint)],
                              stdout=write, stderr=subprocess.PIPE, env=env, timeout=60)
    finally:
        os.close(write)
    assert done.stderr == b""
    assert done.returncode == 141
    done = subprocess.run([sys.executable, "-m", "river_advsvm", "inspect",
                           str(service_checkpoint)], capture_output=True, env=env, timeout=60)
    assert done.returncode == 0 and b'"samples_learned": 1' in done.stdout


def test_inspect_reads_the_metadata_only(service_checkpoint):
    """A 256 MiB array in the checkpoint (arrays are stored uncompressed) costs `inspect`
    nothing: it reads the metadata alone."""
    edit(service_checkpoint, add_arrays={"pad": np.zeros(2**25)})
    assert os.path.getsize(state.checkpoint_path(service_checkpoint)) > 2**28
    code = (
        "import os, sys\n"
        "if os.fork():\n    sys.exit(os.wait()[1] >> 8)\n"  # a fresh process: see test_checkpoint
        "import contextlib, io, resource\n"
        "from river_advsvm import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = cli.main(['inspect', {str(service_checkpoint)!r}])\n"
        "print(code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    status, peak = done.stdout.split()
    assert status == "0"
    assert float(peak) < 100
