"""Helpers of the Kafka tests: a synthetic stream, producing, reading topics back, and running
`advsvm serve` as a real subprocess. Everything talks to 127.0.0.1 only."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

from river_advsvm.streams import cli
from river_advsvm.streams import kafka as kafka_io
from river_advsvm.streams import state

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Model options of every service under test: small and fast, fixed seed.
MODEL_ARGS = ["--epsilon", "0.1", "--budget", "128", "--seed", "0"]
#: A short session timeout: tansu completes a group join after about half of it.
SERVICE_ARGS = ["--session-timeout-ms", "1500", "--log-level", "info"]
#: For a test that waits until its few messages are learned (read from the checkpoint): a
#: checkpoint a second after progress instead of the default 10 s. (Not for every test: a
#: group worker syncs with its checkpoints, and more syncs slow the group tests down.)
CHECKPOINT_SOON = ("--checkpoint-interval", "1")


def stream(n: int, d: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A labelled synthetic stream: `d` Gaussian features, a curved boundary, labels 0/1."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).round(6)
    y = (X[:, 0] + 0.3 * X[:, 1] ** 2 - 0.5 * X[:, 2] > 0.3).astype(int)
    return X, y


def messages(X, y, unlabelled_every: int = 0, start_id: int = 0) -> list[bytes]:
    out = []
    for i, (x, label) in enumerate(zip(X.tolist(), y.tolist())):
        unlabelled = unlabelled_every and (i + 1) % unlabelled_every == 0
        out.append(kafka_io.encode(x, None if unlabelled else label, id=start_id + i))
    return out


def produce(bootstrap: str, topic: str, values: list[bytes], partition=None,
            security=None, keys: list | None = None) -> list[tuple]:
    """Send `values` in order (to `partition`, or round-robin over a list of partitions; with
    `keys`, one each) and return each one's `(partition, offset)` once the broker acknowledged
    it. `security`: a `river_advsvm.streams.security.SecuritySettings` (plaintext if None)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=10,
                             enable_idempotence=False, max_request_size=8 * 2**20,
                             **(security.client_kwargs() if security else {}))
    try:
        futures = []
        for i, value in enumerate(values):
            p = partition[i % len(partition)] if isinstance(partition, list) else partition
            key = None if keys is None else keys[i]
            futures.append(producer.send(topic, value=value, key=key, partition=p))
        producer.flush()
        return [(f.get().partition, f.get().offset) for f in futures]
    finally:
        producer.close()


def recreate_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Delete `topic` and create it again (a new log, under a new id), unless a client's
    metadata request made it again first (the bundled broker creates topics on first use)."""
    from kafka import KafkaAdminClient

    from river_advsvm.streams import clients

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()
    clients.create_topics(bootstrap, {topic: partitions})


def read_topic(bootstrap: str, topic: str, count: int, timeout: float = 60.0,
               security=None, drain: bool = False) -> list:
    """The first `count` records of every partition of `topic` (fails if fewer arrive).

    Reads until `count` records are in rather than up to the end offsets: tansu's
    ListOffsets(latest) is not the high watermark.
    """
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             **(security.client_kwargs() if security else {}))
    try:
        deadline = time.monotonic() + timeout
        partitions = None
        while not partitions:
            partitions = consumer.partitions_for_topic(topic)
            if time.monotonic() > deadline:
                raise AssertionError(f"topic {topic} never appeared")
            if not partitions:
                time.sleep(0.1)
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records = []
        while len(records) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: {len(records)} records, expected {count}")
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        # Anything beyond `count` (a duplicated output, say) shows up in a short extra read;
        # with `drain`, in extra reads until one comes back empty (a poll returns at most
        # max_poll_records, fewer than the duplicates a killed worker can leave).
        while extra := [r for batch in consumer.poll(timeout_ms=500).values() for r in batch]:
            records.extend(extra)
            if not drain:
                break
        return records
    finally:
        consumer.close()


def serve_command(bootstrap, topic, group, checkpoint_dir, *extra) -> list[str]:
    return [sys.executable, "-m", "river_advsvm.cli", "serve",
            "--bootstrap-servers", bootstrap, "--topic", topic, "--group", group,
            "--checkpoint-dir", str(checkpoint_dir), *SERVICE_ARGS, *MODEL_ARGS, *extra]


#: Every service a test started; the `_no_service_outlives_its_test` fixture kills leftovers.
STARTED: list[subprocess.Popen] = []


def start_service(command: list[str], log_path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = open(log_path, "ab")
    try:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   cwd=REPO)
    finally:
        log.close()
    STARTED.append(process)
    return process


def kill_leftovers() -> None:
    """SIGKILL the services a failed test left running (they would hold CPU and ports)."""
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait(30)


def exit_status(process: subprocess.Popen, timeout: float, log_path=None) -> int:
    """The service's exit status once it exits; if it is still running after `timeout`, it is
    killed and the test fails with the end of its log (what it was doing)."""
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(30)
        raise AssertionError(f"the service was still running after {timeout:g}s\n"
                             f"{tail(log_path)}") from None


def stop_service(process: subprocess.Popen, timeout: float = 60.0, log_path=None,
                 signal_number: int = signal.SIGTERM) -> int:
    """SIGTERM (or `signal_number`), and wait for the drain to finish."""
    process.send_signal(signal_number)
    return exit_status(process, timeout, log_path)


def kill_service(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(30)


def stop_when_consumed(processes: dict, logs: dict, read_group, total: int,
                       timeout: float = 120.0) -> None:
    """Wait until the group's latest snapshots (`read_group()`, worker -> snapshot) count
    `total` consumed messages, then stop every worker of `processes` (SIGTERM; each must exit
    0). Whatever is still running if that fails is killed."""
    from river_advsvm.streams.group_state import totals

    try:
        wait_until(lambda: (s := read_group()) and totals(s.values())["consumed"] >= total,
                   timeout, "the group to learn the whole stream", poll=0.5)
        for worker in list(processes):
            status = stop_service(processes.pop(worker), log_path=logs[worker])
            assert status == 0, tail(logs[worker])
    finally:
        for process in processes.values():
            kill_service(process)


def checkpoint_info(directory) -> dict | None:
    """`advsvm inspect`'s view of the checkpoint, or None while there is none. (The file's
    path, not the directory's: `describe` reads a path that is not a directory yet as the file,
    and the service may create the directory in between.)"""
    try:
        return state.describe(state.checkpoint_path(directory))
    except FileNotFoundError:
        return None


def wait_until(condition, timeout: float, what: str, process=None, log_path=None, poll=0.05):
    """Poll `condition()` until true; fail after `timeout` or if `process` died."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the service exited ({process.returncode}) while waiting for "
                                 f"{what}\n{tail(log_path)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{tail(log_path)}")
        time.sleep(poll)


def learned(directory) -> int:
    info = checkpoint_info(directory)
    return 0 if info is None else info["samples_learned"]


def tail(log_path, lines: int = 30) -> str:
    if log_path is None or not os.path.exists(log_path):
        return ""
    with open(log_path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def reference_model(values: list[bytes]):
    """An uninterrupted in-process run: the same model options, `learn_one` on each valid
    labelled message in order (decoded by the same schema, nothing else shared)."""
    args = cli.build_parser().parse_args(MODEL_ARGS)
    model = cli._model_factory(args)()
    for value in values:
        try:
            sample = kafka_io.decode(value, max_bytes=2**20)
        except kafka_io.InvalidMessage:
            continue
        if sample.labelled:
            model.learn_one(sample.x, sample.y)
    return model


def assert_same_model(a, b) -> None:
    """Bitwise equality of two models: every state scalar and every array byte."""
    meta_a, arrays_a = a.to_checkpoint()
    meta_b, arrays_b = b.to_checkpoint()
    assert json.dumps(meta_a, sort_keys=True) == json.dumps(meta_b, sort_keys=True)
    assert sorted(arrays_a) == sorted(arrays_b)
    for name in arrays_a:
        assert arrays_a[name].dtype == arrays_b[name].dtype, name
        assert arrays_a[name].tobytes() == arrays_b[name].tobytes(), name


def b64(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data)
