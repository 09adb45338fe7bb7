"""What a checkpoint, a file, a peer's snapshot or a client hands the service is input: limits
it cannot lift, ranges, file kinds, exit statuses, the directory lock, the metrics endpoint, and
the names and texts a model or an output takes."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("kafka")

from river_advsvm import (AdvKernelSVM, AdvLinearSVM, CheckpointError, InvalidInput,  # noqa: E402
                          checkpoint)
from river_advsvm import cli  # noqa: E402
from river_advsvm.streams import faults, lifecycle, metrics, state  # noqa: E402
from river_advsvm.streams import kafka as kafka_io  # noqa: E402
from river_advsvm.streams.snapshot import parse_snapshot  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _learned_state(model, n=30, seed=0) -> state.ServiceState:
    rng = np.random.default_rng(seed)
    for i in range(n):
        model.learn_one({f"f{j}": float(v) for j, v in enumerate(rng.random(4))}, i % 2 == 0)
    saved = state.ServiceState(model=model, offsets={"in": {0: n}}, topic_ids={"in": None})
    saved.counters["learned"] = n
    return saved


def _write(directory, meta, arrays) -> str:
    path = state.checkpoint_path(directory)
    checkpoint.write(path, meta, arrays)
    return path


def _serve(directory, *flags) -> list[str]:
    # Port 1 on loopback: nothing answers, so a service that got past its checkpoint would
    # wait for a broker; the checkpoint is read before any connection.
    return ["--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--group", "g",
            "--checkpoint-dir", str(directory), "--connect-timeout", "0.2", *flags]


# -- 1. a checkpoint or a snapshot cannot lift the operator's limits -------------------------------


@pytest.mark.parametrize("params, flags, limit, flag", [
    (dict(budget=2048), [], "budget=1024", "--budget"),
    (dict(budget=300), ["--budget", "200"], "budget=200", "--budget"),
    (dict(budget=None), [], "budget=1024", "--budget"),
    (dict(budget=64, budget_policy="grow"), ["--budget", "64"], "budget=64", "--budget"),
    (dict(max_features=20_000), [], "max_features=10000", "--max-features"),
    (dict(max_features=50), ["--max-features", "40"], "max_features=40", "--max-features"),
    (dict(averaging=500), ["--averaging", "0"], "averaging=500", "--averaging"),
    # Twice the memory a number: the operator's float32 is a limit as a budget is.
    (dict(dtype="float64"), [], "float32", "--dtype float64"),
])
def test_a_checkpoint_beyond_the_operators_limits_is_refused_in_one_line(
        tmp_path, capsys, params, flags, limit, flag):
    saved = _learned_state(AdvKernelSVM(seed=0, **params))
    state.save(tmp_path, saved)
    assert cli.main(["serve", *_serve(tmp_path, *flags)]) == lifecycle.USAGE_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and limit in err and flag in err, err
    if "averaging" in params:  # with the operator's consent it loads, average and all
        state.save(tmp_path, _learned_state(AdvKernelSVM(seed=0, **params), n=150))
        loaded = state.load(tmp_path, state.Limits.of(AdvKernelSVM()))
        assert loaded.model._store.averaged is not None
    if "dtype" in params:  # with the operator's consent it loads; float32 under float64 too
        assert state.load(tmp_path, state.Limits.of(AdvKernelSVM(dtype="float64"))
                          ).model.dtype == "float64"
        state.save(tmp_path, _learned_state(AdvKernelSVM(seed=0)))
        assert state.load(tmp_path, state.Limits.of(AdvKernelSVM(dtype="float64"))
                          ).model.dtype == "float32"


def test_a_checkpoint_in_a_longer_warm_up_than_the_services_is_refused_in_one_line(
        tmp_path, capsys):
    # A warm-up lays its rows out densely over every input they have: 2,499 rows of 4 new
    # inputs each are a file of 0.3 MB, over which the service's first prediction ran for more
    # than 5 minutes of CPU. The service's own warm-up holds 100 rows.
    state.save(tmp_path, _learned_state(AdvKernelSVM(seed=0, warm_up=10_000), n=50))
    assert cli.main(["serve", *_serve(tmp_path)]) == lifecycle.USAGE_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warm_up=10000" in err and "warm_up=100;" in err, err
    with pytest.raises(CheckpointError, match="in a warm-up of warm_up=10000 samples"):
        state.load(tmp_path, state.Limits.of(AdvKernelSVM()))
    # Once its warm-up is over it holds no row back: it loads, keeping its own warm_up.
    state.save(tmp_path, _learned_state(AdvKernelSVM(seed=0, warm_up=200), n=250))
    assert state.load(tmp_path, state.Limits()).model.warm_up == 200
    # A numeric gamma has no warm-up; and one as long as the service's loads mid-way.
    state.save(tmp_path, _learned_state(AdvKernelSVM(seed=0, warm_up=10_000, gamma=0.5)))
    assert state.load(tmp_path, state.Limits()).model.n_learned == 30
    state.save(tmp_path, _learned_state(AdvKernelSVM(seed=0), n=50))
    assert len(state.load(tmp_path, state.Limits()).model._held) == 50


def test_the_limits_of_a_linear_service_are_its_max_features_and_the_default_budget(tmp_path):
    state.save(tmp_path, _learned_state(AdvKernelSVM(seed=0, budget=4096)))
    limits = state.Limits.of(AdvLinearSVM())
    assert (limits.budget, limits.max_features) == (1024, 10_000)
    with pytest.raises(CheckpointError, match="its model has budget=4096, over this service's "
                                              "limit budget=1024; to load it, raise --budget"):
        state.load(tmp_path, limits)


def test_a_linear_service_loads_a_default_kernel_checkpoint_whose_model_keeps_an_average(
        tmp_path):
    """`--model linear` over a default kernel checkpoint (`averaging=1000`) was refused, telling
    the operator to leave out an `--averaging 0` never given: a linear model has no average,
    and the checkpoint wins (the docs), within the library's limits as for the budget."""
    saved = _learned_state(AdvKernelSVM(seed=0))
    state.save(tmp_path, saved)
    loaded = state.load(tmp_path, state.Limits.of(AdvLinearSVM()))
    assert loaded.model.averaging == 1000 and loaded.model.n_learned == saved.model.n_learned
    # A kernel service with `--averaging 0` still refuses it, as documented.
    with pytest.raises(CheckpointError, match="leave out --averaging 0"):
        state.load(tmp_path, state.Limits.of(AdvKernelSVM(averaging=None)))


def test_an_unbounded_checkpoint_is_refused_naming_the_option_that_loads_it(tmp_path):
    """The refusal of a `grow` checkpoint said "raise --budget": no budget loads it."""
    state.save(tmp_path, _learned_state(AdvKernelSVM(seed=0, budget_policy="grow", budget=16)))
    with pytest.raises(CheckpointError, match="no bound on its budget, .* limit budget=1024; "
                                              "to load it, start the service with "
                                              "--budget-policy grow"):
        state.load(tmp_path, state.Limits.of(AdvKernelSVM()))
    assert state.load(tmp_path, state.Limits.of(AdvKernelSVM(budget_policy="grow"))).model


def test_a_checkpoint_within_the_limits_loads_and_keeps_its_own_smaller_ones(tmp_path):
    saved = _learned_state(AdvKernelSVM(seed=0, budget=16, max_features=50))
    state.save(tmp_path, saved)
    loaded = state.load(tmp_path, state.Limits.of(AdvKernelSVM(budget=1024)))
    assert (loaded.model.budget, loaded.model.max_features) == (16, 50)
    assert loaded.model.n_learned == saved.model.n_learned


def test_a_parameter_the_checkpoint_leaves_out_counts_at_its_default(tmp_path):
    saved = _learned_state(AdvKernelSVM(seed=0, max_features=30))
    meta, arrays = saved.model.to_checkpoint(saved.extra())
    del meta["params"]["max_features"]  # the model it makes has the default, 10,000
    _write(tmp_path, meta, arrays)
    with pytest.raises(CheckpointError, match="max_features=10000, over this service's limit "
                                              "max_features=40"):
        state.load(tmp_path, state.Limits.of(AdvKernelSVM(max_features=40)))


def test_the_limits_are_checked_before_any_array_is_read(tmp_path, monkeypatch):
    state.save(tmp_path, _learned_state(AdvKernelSVM(seed=0, max_features=20_000)))
    monkeypatch.setattr(checkpoint, "_read_array", lambda *a: pytest.fail("an array was read"))
    with pytest.raises(CheckpointError, match="max_features=20000"):
        state.load(tmp_path, state.Limits())


def test_a_peers_snapshot_beyond_the_limits_keeps_its_claims_not_its_model(tmp_path,
                                                                           monkeypatch):
    """A worker started with a smaller --budget read its peers' snapshots as nothing, and
    learned and published again every message of the partitions it took over: their offsets
    count, their model is never read (no array of it) and never folded or resumed from."""
    saved = _learned_state(AdvKernelSVM(seed=0, budget=4096))
    saved.group = {"worker": "peer", "seq": 1, "folded": {}, "self_at_fold": 0,
                   "run": {"first": None, "last": None, "processed": 0}}
    data = state.to_bytes(saved)
    assert parse_snapshot(b"peer", data, 7).model_unread is None  # no limits: a reader's view
    monkeypatch.setattr(checkpoint, "_read_array", lambda *a: pytest.fail("an array was read"))
    peer = parse_snapshot(b"peer", data, 7, state.Limits.of(AdvKernelSVM(budget=1024)))
    assert peer.worker == "peer" and peer.offsets == {"in": {0: 30}} and peer.learned == 30
    assert peer.arrays == {} and "budget=4096" in peer.model_unread
    with pytest.raises(CheckpointError, match="snapshot 1 of peer: .*raise --budget"):
        peer.whole()
    # A corrupt record is still refused whole.
    with pytest.raises(CheckpointError, match="snapshot 7 of peer"):
        parse_snapshot(b"peer", data[:-1] + bytes([data[-1] ^ 1]), 7,
                       state.Limits.of(AdvKernelSVM(budget=1024)))


# -- 2. values are range-checked before they are used ----------------------------------------------


def _tampered(tmp_path, change) -> str:
    saved = _learned_state(AdvKernelSVM(seed=0))
    meta, arrays = saved.model.to_checkpoint(saved.extra())
    change(meta)
    return _write(tmp_path, meta, arrays)


@pytest.mark.parametrize("change, message", [
    (lambda m: m["extra"]["offsets"]["in"].update({"0": 10**30}), "offset of in"),
    (lambda m: m["extra"]["offsets"]["in"].update({"0": -1}), "offset of in"),
    (lambda m: m["extra"]["offsets"]["in"].update({"0": 1.5}), "not an integer"),
    (lambda m: m["extra"]["offsets"]["in"].update({"x": 1}), "partition"),
    (lambda m: m["extra"]["counters"].update({"learned": 2**63}), "counter learned"),
    (lambda m: m["extra"].update({"width": 10**7}), "width"),
    # Within the service's bound, past the model's: every array message was a dead letter.
    (lambda m: m["extra"].update({"width": 20_000}),
     r"width 20000 is more inputs than its model learns \(max_features=10000\)"),
    # Pinned labels the model's classes are not among: every labelled message was refused.
    (lambda m: m["extra"].update({"labels": ["cat", "dog"]}),
     r"its model's classes \[False, True\] are not among its pinned labels \['cat', 'dog'\]"),
    (lambda m: m["extra"].update({"labels": [True, "dog"]}), r"classes \[False, True\] are not"),
    (lambda m: m["extra"].update({"labels": [1, 1]}), "labels"),
    (lambda m: m["state"].update({"bias": 1e308}), "bias"),
    (lambda m: m["state"].update({"bias": -1e16}), "bias"),
    (lambda m: m["state"].update({"n_learned": 2**64}), "out of range"),
    (lambda m: m["state"]["model"].update({"label_balance": 1.5}), "label_balance 1.5"),
    (lambda m: m["state"]["model"].update({"label_balance": -2.0}), "label_balance -2.0"),
])
def test_a_value_out_of_its_range_is_a_checkpoint_error_in_one_line(tmp_path, capsys, change,
                                                                    message):
    _tampered(tmp_path, change)
    with pytest.raises(CheckpointError, match=message) as caught:
        state.load(tmp_path)
    assert "\n" not in str(caught.value)
    assert state.checkpoint_path(tmp_path) in str(caught.value)  # which file
    assert cli.main(["serve", *_serve(tmp_path)]) == lifecycle.USAGE_ERROR
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("where", ["v1 counter", "monitor"])
def test_a_number_beyond_a_floats_range_is_a_usage_error_before_anything_changes(
        tmp_path, capsys, where):
    # 1e999 is read by json as infinity: int() of it in a version-1 counter raised
    # OverflowError (status 1, restarted forever), and a monitor state holding it was kept
    # until the first checkpoint write refused it.
    saved = _learned_state(AdvKernelSVM(seed=0))
    meta, arrays = saved.model.to_checkpoint(saved.extra())
    if where == "v1 counter":
        meta["extra"].update(version=1, counters={"messages": 30, "learned": 123456,
                                                  "correct": 20, "predicted": 0})
    else:
        meta["extra"]["monitor"] = {"attack_seconds": 123456}
    path = _write(tmp_path, meta, arrays)
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    text = members["meta.json"].decode().replace("123456", "1e999")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, text if name == "meta.json" else data,
                             compress_type=zipfile.ZIP_DEFLATED if name == "meta.json"
                             else zipfile.ZIP_STORED)
        archive.comment = b"\0" * 94
    body = buffer.getvalue()[:-94]
    seal = b"river-advsvm-checkpoint sha256 " + hashlib.sha256(body).hexdigest().encode()
    with open(path, "wb") as f:
        f.write(body + seal)
    with pytest.raises(CheckpointError, match="the number 1e999, beyond a float's range"):
        state.load(tmp_path)
    assert cli.main(["serve", *_serve(tmp_path)]) == lifecycle.USAGE_ERROR
    assert cli.main(["inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.endswith("its metadata holds the number 1e999, beyond a float's range")
            for line in err] == [True, True], err


@settings(max_examples=60, deadline=None)
@given(field=st.sampled_from(["offset", "counter", "seq", "self_at_fold", "processed"]),
       value=st.one_of(st.integers(max_value=-1), st.integers(min_value=2**63),
                       st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5),
                       st.booleans(), st.none()))
def test_any_count_out_of_its_range_is_refused(tmp_path_factory, field, value):
    saved = _learned_state(AdvKernelSVM(seed=0), n=4)
    saved.group = {"worker": "w", "seq": 1, "folded": {}, "self_at_fold": 0,
                   "run": {"first": None, "last": None, "processed": 0}}
    meta, arrays = saved.model.to_checkpoint(saved.extra())
    extra = meta["extra"]
    target = {"offset": (extra["offsets"]["in"], "0"), "counter": (extra["counters"], "learned"),
              "seq": (extra["group"], "seq"), "self_at_fold": (extra["group"], "self_at_fold"),
              "processed": (extra["group"]["run"], "processed")}[field]
    target[0][target[1]] = value
    with pytest.raises(CheckpointError):
        state.parse_extra(meta, "here")


# -- 3. only a regular file is read, without blocking ----------------------------------------------


def _special_files(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link-to-fifo"
    link.symlink_to(fifo)
    return {"a FIFO": fifo, "a symlink to a FIFO": link, "a character device": "/dev/zero"}


def test_a_fifo_or_a_device_is_refused_at_once_by_read_and_read_meta(tmp_path):
    for kind, path in _special_files(tmp_path).items():
        for read in (checkpoint.read, checkpoint.read_meta, AdvKernelSVM.load):
            with pytest.raises(CheckpointError, match="not a regular file"):
                read(path)


@pytest.mark.parametrize("command", ["inspect", "serve"])
def test_inspect_and_serve_refuse_a_fifo_checkpoint_without_blocking(tmp_path, command):
    directory = tmp_path / "ckpt"
    directory.mkdir()
    os.mkfifo(directory / state.CHECKPOINT_FILE)
    argv = ["inspect", str(directory)] if command == "inspect" else ["serve", *_serve(directory)]
    # A blocked open would never return: the timeout is the failure, not a synchronisation.
    done = subprocess.run([sys.executable, "-m", "river_advsvm", *argv], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2
    assert "a FIFO, not a regular file" in done.stderr and done.stderr.count("\n") == 1


def test_a_dangling_symlink_checkpoint_is_refused_not_started_over(tmp_path, capsys):
    # The file it points to is out of reach (a volume not mounted, say): starting a new model
    # would replace the link by a fresh checkpoint at the first write.
    directory = tmp_path / "ckpt"
    directory.mkdir()
    (directory / state.CHECKPOINT_FILE).symlink_to(tmp_path / "elsewhere" / "checkpoint.ckpt")
    with pytest.raises(CheckpointError, match="it is a symbolic link to .*elsewhere/checkpoint"
                                              r"\.ckpt, which does not exist"):
        state.load(directory)
    assert cli.main(["serve", *_serve(directory)]) == lifecycle.USAGE_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "which does not exist" in err, err
    assert (directory / state.CHECKPOINT_FILE).is_symlink()


# -- 4. exit statuses: environment faults are restarted, usage errors are not ----------------------


@pytest.mark.parametrize("code, status", [
    *((code, lifecycle.ENVIRONMENT_FAULT) for code in sorted(lifecycle.RETRIABLE_ERRNOS)),
    (errno.EACCES, lifecycle.USAGE_ERROR), (errno.EPERM, lifecycle.USAGE_ERROR),
    (errno.ENOTDIR, lifecycle.USAGE_ERROR), (errno.ENOENT, lifecycle.USAGE_ERROR),
])
def test_an_os_error_exits_by_whether_a_restart_can_help(code, status):
    assert lifecycle.exit_status(OSError(code, os.strerror(code), "/somewhere")) == status


def test_the_exit_statuses_of_every_kind_of_fault():
    cases = {lifecycle.BrokerUnreachable("x"): 3, lifecycle.SettingsRefused("x"): 4,
             CheckpointError("x"): 2, ValueError("x"): 2, MemoryError(): 5, RuntimeError("x"): 1}
    assert {type(e).__name__: lifecycle.exit_status(e) for e in cases} == \
        {type(e).__name__: s for e, s in cases.items()}


def test_a_full_disk_keeps_the_last_checkpoint_and_names_the_path(tmp_path, monkeypatch):
    saved = _learned_state(AdvKernelSVM(seed=0))
    state.save(tmp_path, saved)
    before = (tmp_path / state.CHECKPOINT_FILE).read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as caught:
        state.save(tmp_path, saved)
    error = caught.value
    assert error.errno == errno.ENOSPC and error.filename == state.checkpoint_path(tmp_path)
    assert lifecycle.exit_status(error) == lifecycle.ENVIRONMENT_FAULT
    assert (tmp_path / state.CHECKPOINT_FILE).read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [state.CHECKPOINT_FILE]  # no temporary left
    assert "the previous one is unchanged" in str(error)


def test_a_model_saved_where_it_cannot_be_says_no_checkpoint_is_there(tmp_path):
    path = tmp_path / "missing" / "model.ckpt"
    with pytest.raises(FileNotFoundError) as caught:
        AdvKernelSVM(seed=0).save(path)
    assert str(path) in str(caught.value) and "no checkpoint is there" in str(caught.value)
    assert "previous" not in str(caught.value)


def test_the_documented_unit_restarts_exactly_the_retriable_statuses():
    text = open(os.path.join(REPO, "docs", "deployment.md")).read()
    unit = text[text.index("[Service]"):text.index("[Install]")]
    settings_ = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line
                     and not line.startswith(" "))
    assert settings_["Restart"] == "on-failure"
    prevented = {int(s) for s in settings_["RestartPreventExitStatus"].split()}
    assert prevented == {lifecycle.USAGE_ERROR, lifecycle.SETTINGS_REFUSED, lifecycle.INTERRUPTED}
    for status in (lifecycle.UNEXPECTED, lifecycle.NO_BROKER, lifecycle.ENVIRONMENT_FAULT):
        assert f"| {status} |" in text and status not in prevented


# -- 5. the lock is on the directory itself --------------------------------------------------------


def test_the_lock_cannot_be_defeated_by_deleting_a_file_and_follows_symlinks(tmp_path):
    directory = tmp_path / "ckpt"
    directory.mkdir()
    link = tmp_path / "link"
    link.symlink_to(directory)
    held = lifecycle.lock_directory(str(directory))
    try:
        for entry in directory.iterdir():  # nothing to delete that would free the lock
            entry.unlink()
        for path in (directory, link):
            with pytest.raises(ValueError, match="another service is using"):
                lifecycle.lock_directory(str(path))
        probe = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        with pytest.raises(BlockingIOError):  # what another process sees, too
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(probe)
    finally:
        os.close(held)
    os.close(lifecycle.lock_directory(str(link)))  # free again once released


# -- 7. the metrics endpoint -----------------------------------------------------------------------


@pytest.fixture
def metrics_server(caplog):
    caplog.set_level(logging.DEBUG)
    server = metrics.MetricsServer(lambda: metrics.Reading(), port=0).start()
    yield server
    server.stop()


def _connection_threads() -> int:
    return sum(t.name == "metrics-connection" for t in threading.enumerate())


def test_idle_connections_cost_at_most_the_connection_limit(metrics_server):
    idle = [socket.create_connection(("127.0.0.1", metrics_server.port))
            for _ in range(3 * metrics.MAX_CONNECTIONS)]
    try:
        # Every connection beyond the limit is closed unanswered: read until each has an
        # answer (EOF) or is one of the held ones (its recv times out).
        closed = 0
        for s in idle:
            s.settimeout(0.2)
            try:
                closed += s.recv(1) == b""
            except TimeoutError:
                pass
        assert _connection_threads() <= metrics.MAX_CONNECTIONS
        assert closed >= 2 * metrics.MAX_CONNECTIONS
    finally:
        for s in idle:
            s.close()


def test_a_request_over_the_size_limit_is_answered_431(metrics_server):
    with socket.create_connection(("127.0.0.1", metrics_server.port)) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * metrics.MAX_REQUEST_BYTES
                  + b"\r\n\r\n")
        assert s.recv(12).startswith(b"HTTP/1.0 431")


def test_broken_clients_never_put_a_traceback_in_the_log(metrics_server, caplog):
    for payload in [b"\x00\xff\r\n\r\n", b"GET /metrics HTTP/9.9\r\n\r\n", b"GET", b""]:
        with socket.create_connection(("127.0.0.1", metrics_server.port)) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(30)
            while s.recv(4096):
                pass
    broken = metrics.MetricsServer(lambda: 1 / 0, port=0).start()
    try:
        import urllib.error
        import urllib.request
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(broken.url + "/healthz", timeout=30)
    finally:
        broken.stop()
    assert not any(r.exc_info or "Traceback" in r.getMessage() for r in caplog.records)


def test_the_listen_backlog_is_not_five():
    assert metrics._Server.request_queue_size == metrics.LISTEN_BACKLOG >= 128


# -- 8. messages: bounded ids and labels, names that keep outputs valid UTF-8 ----------------------


@pytest.mark.parametrize("value, code", [
    ({"id": "a" * (kafka_io.MAX_TEXT_CHARS + 1), "x": [1]}, "bad_id"),
    ({"id": "\ud800", "x": [1]}, "bad_id"),
    ({"y": "b" * (kafka_io.MAX_TEXT_CHARS + 1), "x": [1]}, "bad_label"),
    ({"y": "\udfff", "x": [1]}, "bad_label"),
])
def test_an_id_or_label_over_the_limit_or_not_utf8_is_a_dead_letter(value, code):
    with pytest.raises(kafka_io.InvalidMessage) as caught:
        kafka_io.decode(json.dumps(value).encode(), 2**20)
    assert caught.value.code == code


def test_an_id_at_the_limit_is_echoed():
    text = "é" * kafka_io.MAX_TEXT_CHARS
    assert kafka_io.decode(json.dumps({"id": text, "x": [1]}).encode(), 2**20).id == text


@settings(max_examples=200, deadline=None)
@given(name=st.text(max_size=8), labelled=st.booleans())
def test_a_name_is_learned_only_if_it_is_valid_utf8_without_nul(name, labelled):
    model = AdvKernelSVM(seed=0)
    valid = "\0" not in name and not any(0xD800 <= ord(c) <= 0xDFFF for c in name)
    try:
        model.decision_then_learn_many([{name: 1.0}], [True if labelled else None])
    except InvalidInput as error:
        assert not valid and error.code == "bad_name"
    else:
        assert valid
        meta, _ = model.to_checkpoint()
        json.dumps(meta, ensure_ascii=False).encode("utf-8")  # the saved names are UTF-8


# -- 9. the Python API -----------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [[None, "b"], ["a", None]])
@pytest.mark.parametrize("values", [[1.0, 2.0], [0.0, 0.0]])
def test_learn_many_refuses_a_none_column_up_front(tmp_path, columns, values):
    import pandas as pd

    for model in (AdvKernelSVM(seed=0), AdvKernelSVM(seed=0, gamma="scale"), AdvLinearSVM()):
        frame = pd.DataFrame([values])
        frame.columns = pd.Index(columns, dtype=object)
        with pytest.raises(InvalidInput, match="None"):
            model.learn_many(frame, [True])
        assert model.n_learned == 0 and model.n_inputs == 0 and model.n_held == 0
        model.save(tmp_path / "m.ckpt")  # still savable


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_empty_samples_in_the_warm_up_never_make_nan_decisions(kernel):
    model = AdvKernelSVM(seed=0, gamma="scale", kernel=kernel, warm_up=4)
    for i, x in enumerate([{}, {}, {"a": 1.0}, {}, {"a": 2.0}, {}]):
        model.learn_one(x, i % 2 == 0)
        for probe in ({}, {"a": 1.0}, {"b": 3.0}):
            assert np.isfinite(model.decision_one(probe))
            assert all(np.isfinite(p) for p in model.predict_proba_one(probe).values())


def test_n_held_counts_the_warm_up():
    model = AdvKernelSVM(seed=0, gamma="scale", warm_up=3)
    seen = []
    for i in range(5):
        model.learn_one({"a": float(i)}, i % 2 == 0)
        seen.append((model.n_learned, model.n_held))
    assert seen == [(0, 1), (0, 2), (3, 0), (4, 0), (5, 0)]


def test_running_out_of_memory_reading_the_checkpoint_is_a_fault_of_the_machine(
        tmp_path, monkeypatch, capsys):
    # It was a CheckpointError, exit status 2 ("fix the files", not restarted) for a file that
    # is fine: the table says a lack of memory is 5, restarted.
    state.save(tmp_path, _learned_state(AdvKernelSVM(seed=0)))

    def no_memory(*args):
        raise MemoryError()

    monkeypatch.setattr(checkpoint, "_read_array", no_memory)
    with pytest.raises(MemoryError, match="checkpoint.ckpt: not enough memory to read it$"):
        state.load(tmp_path)
    assert cli.main(["serve", *_serve(tmp_path)]) == lifecycle.ENVIRONMENT_FAULT
    assert capsys.readouterr().err == (
        f"advsvm serve: out of memory ({tmp_path / 'checkpoint.ckpt'}: not enough memory to read "
        "it): give the service more memory, or lower --budget or --max-features\n")


class _ConsumerSettings:
    """What `Service._rebalance_stalled` reads of a consumer: its settings."""

    config = {"max_poll_interval_ms": 300_000}


def _service_with_a_rebalance_begun(seconds_ago: float, session_timeout_ms: int = 4000):
    import time

    from river_advsvm.streams.service import Service, ServiceConfig

    config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="t", group="g",
                           checkpoint_dir="unused", exit_when_idle=1.0,
                           session_timeout_ms=session_timeout_ms)
    service = Service(config, model_factory=AdvLinearSVM)
    service.session.consumer = _ConsumerSettings()
    progress = service.session.progress
    progress.assigned_once = True
    progress.rebalancing()
    progress.rebalancing_since = time.monotonic() - seconds_ago
    return service


def test_a_worker_whose_group_is_rebalancing_is_not_idle_nor_ready():
    """A group whose coordinator never ended a rebalance (two members left during one) left
    the others with no partition: ready, and stopped by `--exit-when-idle` with status 0 and
    messages unread."""
    import time

    service = _service_with_a_rebalance_begun(seconds_ago=60.0)
    progress = service.session.progress
    service.session.assignment = set()
    progress.last_activity = time.monotonic() - 60.0  # idle past exit_when_idle and 2 x 4 s
    assert not service._caught_up()
    reading = metrics.read_session(service.session)
    assert not reading.ready and reading.not_ready_reason == "the consumer group is rebalancing"
    progress.rebalanced()
    assert service._caught_up()
    assert metrics.read_session(service.session).ready


def test_a_rebalance_that_does_not_end_stops_the_service_with_the_status_of_no_broker(caplog):
    """Past the members' rebalance timeout and a session timeout (longer than a working
    coordinator lets a rebalance last), the service stops; status 3 is restarted, and the
    restarted worker joins the group anew. A warning comes from twice the session timeout."""
    import time

    limit = 300.0 + 4.0
    with caplog.at_level(logging.WARNING, logger="river_advsvm.streams.service"):
        service = _service_with_a_rebalance_begun(seconds_ago=7.0)
        assert not service._rebalance_stalled(time.monotonic())
        assert not caplog.records  # (under twice the session timeout: a usual rebalance)
        service = _service_with_a_rebalance_begun(seconds_ago=limit - 5.0)
        assert not service._rebalance_stalled(time.monotonic())
        assert [r.levelname for r in caplog.records] == ["WARNING"]
        assert "rebalancing for" in caplog.records[0].getMessage()
        assert not service._stalled
        service.session.progress.rebalancing_since -= 10.0
        assert service._rebalance_stalled(time.monotonic())
        assert service._stalled
        assert caplog.records[-1].levelname == "ERROR"
        service.session.progress.rebalanced()
        assert not service._rebalance_stalled(time.monotonic())


class _DroppedMember(_ConsumerSettings):
    """A consumer whose group has dropped it and not assigned it again: it still holds its
    partition (kafka-python's assignment changes when the group answers its join)."""

    def __init__(self, partition):
        self.held, self.paused = {partition}, set()

    def assignment(self):
        return set(self.held)

    def pause(self, *partitions):
        self.paused.update(partitions)

    def metrics(self):
        return {"consumer-metrics": {"connection-count": 1}}


def test_a_dropped_group_worker_polls_nothing_and_stops_if_it_is_never_assigned_again():
    """A worker that learned at a sync that its group dropped it went on with the records
    of its poll and the polls after, predicting what the partitions' new owner predicted too.
    It now drops them, its partitions paused, waiting for the group (not ready meanwhile);
    one that never comes stops it as a rebalance that does not end does (status 3)."""
    import time

    from kafka import TopicPartition

    from river_advsvm.streams.service import Service, ServiceConfig

    config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="t", group="g",
                           checkpoint_dir="unused", session_timeout_ms=4000, sync_every=100)
    service = Service(config, model_factory=lambda: AdvKernelSVM(gamma=0.5, seed=0))
    worker, session = service.checkpoints, service.session
    partition = TopicPartition("t", 0)
    session.consumer, session.assignment = _DroppedMember(partition), {partition}
    assert not worker.halted()
    worker._evicted = True  # (what a refused commit at a sync, or a lost partition, sets)
    assert worker.halted()
    assert worker.after_poll()  # the poll's records are dropped
    assert session.consumer.paused == {partition}
    assert not metrics.read_session(session).ready
    assert not service._rebalance_stalled(time.monotonic())
    session.progress.rebalancing_since -= 300.0 + 4.0
    assert service._rebalance_stalled(time.monotonic())
    # Assigned again: the restore that follows takes the state back to the last snapshot.
    session.progress.rebalanced()
    worker.on_assigned({partition})
    assert not worker.halted()


def test_with_no_partition_assigned_the_service_is_not_idle_before_twice_the_session_timeout():
    """A member killed without leaving holds its partitions until the session timeout evicts
    it; a run assigned nothing in the meantime stopped on `--exit-when-idle` with status 0 and
    every message of those partitions waiting."""
    import time

    from river_advsvm.streams.service import Service, ServiceConfig

    config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="t", group="g",
                           checkpoint_dir="unused", exit_when_idle=1.0, session_timeout_ms=4000)
    service = Service(config, model_factory=AdvLinearSVM)
    progress = service.session.progress
    service.session.assignment = set()
    progress.last_activity = time.monotonic() - 7.9  # idle past exit_when_idle, not 2 x 4 s
    assert not service._caught_up()
    progress.last_activity = time.monotonic() - 8.1
    assert service._caught_up()


class _LogEndingAt:
    """What the service's start of a run reads of a consumer: a log that ends at `end`."""

    config = {"max_poll_interval_ms": 300_000}

    def __init__(self, end: int):
        self.end, self.sought = end, None

    def highwater(self, tp):
        return self.end

    def position(self, tp, timeout_ms=0):
        return None

    def seek(self, tp, offset):
        self.sought = offset


def test_a_position_past_the_logs_end_is_not_caught_up_until_it_resumes_there(monkeypatch):
    """A checkpoint whose offset lies past the log's end resumes from the end after
    LOG_END_CONFIRM seconds; meanwhile its lag reads 0, and a run with a shorter
    `--exit-when-idle` stopped there with status 0, keeping the offset for ever."""
    from kafka import TopicPartition

    from river_advsvm.streams import session as session_io
    from river_advsvm.streams.service import Service, ServiceConfig

    config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="t", group="g",
                           checkpoint_dir="unused", exit_when_idle=1.0)
    service = Service(config, model_factory=AdvLinearSVM)
    session = service.session
    session.consumer = _LogEndingAt(100)
    session.assignment = {TopicPartition("t", 0)}
    session.progress.assigned_once = True
    session.state.offsets = {"t": {0: 2**62}}
    session.resume_where_logs_end()  # (seen past the end: not yet confirmed)
    session.measure_lag()
    assert session.progress.lag == {("t", 0): 0} and not service._caught_up()
    monkeypatch.setattr(session_io, "LOG_END_CONFIRM", 0.0)
    session.resume_where_logs_end()  # (confirmed: it resumes from the log's end)
    session.measure_lag()
    assert session.state.offsets["t"][0] == session.consumer.sought == 100
    assert service._caught_up()


def test_a_directory_in_the_checkpoints_place_is_no_previous_checkpoint(tmp_path):
    """A directory where the file goes was called "the previous one", said unchanged."""
    (tmp_path / "model.ckpt").mkdir()
    with pytest.raises(IsADirectoryError) as caught:
        AdvKernelSVM(seed=0).save(tmp_path / "model.ckpt")
    assert "no checkpoint is there" in str(caught.value) and "previous" not in str(caught.value)


def test_a_file_that_is_no_checkpoint_is_not_called_one_when_it_cannot_be_written(tmp_path):
    from river_advsvm.checkpoint import write_bytes

    with pytest.raises(FileNotFoundError) as caught:
        write_bytes(tmp_path / "missing" / "worker-id", b"w0\n", what="worker id")
    assert "the worker id could not be written; no worker id is there" in str(caught.value)
    assert "the checkpoint could not" not in str(caught.value)


@pytest.mark.parametrize("text", ["batch.learned", "batch.learned:kill:x", "batch.learned:kill:0",
                                  "batch.learned:kill:-2", "batch.learned:kill:1:2",
                                  "nowhere:kill", "batch.learned:pause"])
def test_a_fault_plan_that_cannot_act_is_refused_naming_the_variable(text):
    """A plan that parsed to nothing an `advsvm serve` user could read ("not enough values to
    unpack", "invalid literal for int()"), or a count of 0 that never fires: a crash test
    believed a fault armed that never came."""
    with pytest.raises(ValueError, match=f"ADVSVM_FAULTS: {re.escape(repr(text))} is not "
                                         "POINT:kill|stop|term"):
        faults._plan(text)
    assert faults._plan(" batch.learned:kill:3 , outputs.flushed:stop, group.joining:term") == {
        "batch.learned": ("kill", 3), "outputs.flushed": ("stop", 1),
        "group.joining": ("term", 1)}


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminating_signal_drains_and_the_previous_handler_comes_back(signal_number):
    """SIGTERM and a hang-up ask the loop to stop (a drain and a final checkpoint, exit 0: the
    whole path is the slow service test's); once the service is done, the handler before it is
    back."""
    stops = []
    before = signal.getsignal(signal_number)
    signals = lifecycle.Signals(lambda: stops.append(True))
    try:
        assert signal.getsignal(signal_number) is not before  # installed: the kill is caught
        os.kill(os.getpid(), signal_number)
        assert stops == [True] and signals.status(0) == 0
    finally:
        signals.restore()
    assert signal.getsignal(signal_number) is before
