"""`advsvm serve --local-broker`: the whole Kafka path on one machine, with one command.

Starts the bundled broker on a free loopback port, creates the topics, replays a data set
into the input topic (every `unlabelled_every`-th message without its label, to exercise the
prediction-only path), runs the service until it has been idle for a few seconds, prints what
it did and a sample of the predictions and alerts it published (all of its outputs go to a
file on request: they are gone with the broker), and stops the broker. Everything stays on
127.0.0.1 and in memory.

Replay sources: 'phishing' (River's bundled Phishing data set, no download), a Parquet file (read
with `river_advsvm.streams.parquet`, label column `y` unless told otherwise) or an `.npz` file with
`X_train`/`y_train` (e.g. the project's MNIST).

With `workers=N` it runs N `advsvm serve --sync-every` processes in one consumer group instead
of one service (each with its own checkpoint directory and log under the checkpoint directory),
waits until all of them are idle, and prints the group's totals from its snapshot topic.

"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import signal
import subprocess
import tempfile
import time
import typing

from river_advsvm.streams import clients
from river_advsvm.streams import kafka as kafka_io
from river_advsvm.streams import state as state_io
from river_advsvm.streams.broker import LocalBroker
from river_advsvm.streams.service import Service, ServiceConfig

__all__ = ["replay", "replay_samples", "run_local"]

log = logging.getLogger(__name__)


def replay_samples(source: str, target: str = "y", limit: int | None = None,
                   pair: tuple | None = None) -> typing.Iterator[tuple[typing.Any, typing.Any]]:
    """`(x, y)` pairs from 'phishing', a Parquet file, or an `.npz` with X_train/y_train.

    `pair` keeps only the samples of these two labels (for multi-class data like MNIST);
    without it, a third label raises `ThirdLabel` (the service's model is binary): at once for
    an `.npz`, whose labels are in memory, else at its first sample. `.npz` pixels are scaled
    to [0, 1] and sent as arrays, as are the rows of a Parquet file's single list column.
    """
    if source == "phishing":
        from river import datasets

        samples = iter(datasets.Phishing())
    elif source.endswith(".npz"):
        import numpy as np

        from river_advsvm.demo import check_finite, load_npz

        X, y, _, _ = load_npz(source)  # (checked as the demo checks its --data)
        check_finite(X)  # (a message cannot carry a NaN)
        if pair is None:
            for _ in _two_labels((None, label) for label in y[:limit].tolist()):
                pass
        scale = 255.0 if X.dtype == np.uint8 else 1.0
        samples = ((row / scale, label) for row, label in zip(X, y.tolist()))
    else:
        from river_advsvm.streams import parquet

        # (A single list column's rows are named 0..d-1: `kafka_io.encode` sends them as arrays.)
        samples = parquet.iter_rows(source, target=target)
    samples = _two_labels(samples) if pair is None else _of_pair(samples, pair)
    return itertools.islice(samples, limit)


class MissingLabel(ValueError):
    """A label of `--replay-pair` that the source does not have."""


class ThirdLabel(ValueError):
    """A third label in a source replayed without `--replay-pair`."""


def _same_label(a, b) -> bool:
    """Equal labels of one kind: `True == 1` in Python, not in a stream's labels."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _of_pair(samples, pair: tuple):
    """The samples whose label is one of `pair`; once the source ends, `ValueError` if one of
    them never came (naming the labels that did)."""
    seen: dict = {}  # (an ordered set, the first 20 labels)
    found = [False, False]
    for x, y in samples:
        if len(seen) < 20:
            seen.setdefault(y, None)
        for i, label in enumerate(pair):
            if _same_label(y, label):
                found[i] = True
                yield x, y
                break
    for label, came in zip(pair, found):
        if not came:
            raise MissingLabel(f"no sample has label {label!r} (--replay-pair); labels "
                               f"present: {sorted(seen, key=str)}")


def _checked_samples(source: str, target: str, limit, pair):
    """`replay_samples`, with a missing or unreadable source refused before any broker starts."""
    if source != "phishing" and not os.path.exists(source):
        raise ValueError(f"--replay {source}: no such file")
    try:
        samples = iter(replay_samples(source, target, limit, pair))
        first = next(samples, None)
    except KeyError as error:  # a column the file lacks (str() of a KeyError is its repr)
        message = error.args[0] if len(error.args) == 1 else error
        raise ValueError(f"--replay {source}: cannot read it ({message}; name the label column "
                         "with --replay-target)") from None
    except (MissingLabel, ThirdLabel) as error:
        raise ValueError(f"--replay {source}: {error}") from None
    except (OSError, ValueError) as error:
        text = str(error)  # (a Parquet error names the file: once is enough)
        text = text[len(source) + 2:] if text.startswith(f"{source}: ") else text
        raise ValueError(f"--replay {source}: cannot read it ({text})") from None
    if first is None:
        raise ValueError(f"--replay {source}: no samples to replay")
    return itertools.chain([first], samples)


def _two_labels(samples):
    """`samples`, refused at the first sample of a third label: the service's model is
    binary, and would learn the first two labels and dead-letter every sample of the others.
    (The error is named by the replay, which names its source.)"""
    seen: list = []
    for x, y in samples:
        if y is not None and (type(y), y) not in seen:  # (True is not 1 here)
            if len(seen) == 2:
                shown = ", ".join(repr(label) for _, label in seen)
                raise ThirdLabel(f"more than two labels ({shown}, {y!r}, ...): the model is "
                                 "binary; choose two with --replay-pair")
            seen.append((type(y), y))
        yield x, y


def replay(bootstrap_servers: str, topic: str, samples, unlabelled_every: int = 0,
           security=None) -> int:
    """Produce `samples` as input messages (ids 0, 1, ...); returns how many were sent.
    `security`: the `river_advsvm.streams.security.SecuritySettings` of the producer (plaintext if
    None)."""
    producer = _clients(bootstrap_servers, security).producer(client_id="advsvm-replay",
                                                              linger_ms=20)
    count = 0
    try:
        for count, (x, y) in enumerate(samples, start=1):
            unlabelled = unlabelled_every and count % unlabelled_every == 0
            x = x if isinstance(x, dict) else list(map(float, x))
            try:
                value = kafka_io.encode(x, None if unlabelled else y, id=count - 1)
            except (TypeError, ValueError) as error:  # NaN, or a label JSON cannot carry
                raise ValueError(f"sample {count - 1} (label {y!r}) cannot be sent as a "
                                 f"message: {error}") from None
            producer.send(topic, value)
        producer.flush()
    finally:
        producer.close()
    return count


def _clients(bootstrap_servers: str, security=None) -> clients.Clients:
    from river_advsvm.streams.security import SecuritySettings

    return clients.Clients(bootstrap_servers, security=security or SecuritySettings())


@contextlib.contextmanager
def _checkpoint_directory(directory: str | None):
    """The directory given, made and checked writable (as the service would, later), or a new
    temporary one, kept for `advsvm inspect`."""
    if directory:
        os.makedirs(directory, exist_ok=True)
        state_io.check_writable(directory)
        yield directory
    else:
        made = tempfile.mkdtemp(prefix="advsvm-local-")
        try:
            yield made
        except BaseException:  # (the broker could not start, say: nothing to inspect)
            with contextlib.suppress(OSError):
                os.rmdir(made)  # only when empty
            raise


def run_local(config_overrides: dict, model_factory, source: str = "phishing",
              target: str = "y", limit: int | None = None, pair: tuple | None = None,
              partitions: int = 1, unlabelled_every: int = 10, monitor=None,
              monitor_attack=None, workers: int = 0, worker_argv=None, show: int = 5,
              outputs_file: str | None = None, observe=None) -> int:
    """Broker, topics, replay, service (or `workers` worker processes), summary; returns the
    exit status (the worst of the workers').

    `worker_argv(bootstrap_servers, topic, group, checkpoint_dir, worker_id)` is the command
    line of one worker (the CLI builds it from its own options). The first `show` predictions
    and alerts are printed before the broker stops; `outputs_file` gets every output.
    `observe(service)`, called before the service runs, may return an object whose `stop()`
    is called after it (the CLI starts the metrics endpoint that way). Every Kafka client here
    has the config's security settings (the bundled broker itself is plaintext).
    """
    samples = _checked_samples(source, target, limit, pair)
    # The outputs file first, then the checkpoint directory: a path that cannot be written
    # fails before the broker, the replay and the run.
    with _opened(outputs_file) as out, _checkpoint_directory(
            config_overrides.get("checkpoint_dir")) as checkpoint_dir, LocalBroker() as broker:
        config = ServiceConfig(**{
            "topic": "advsvm-input",
            "group": "advsvm",
            "predictions_topic": "advsvm-predictions",
            "alerts_topic": "advsvm-alerts",
            "dead_letter_topic": "advsvm-dead-letters",
            "exit_when_idle": 5.0,
            "session_timeout_ms": 2000,
            **{k: v for k, v in config_overrides.items() if v is not None},
            "bootstrap_servers": broker.bootstrap_servers,
            "checkpoint_dir": checkpoint_dir,
        })
        print(f"local broker (tansu, memory only) on {broker.bootstrap_servers}", flush=True)
        outputs = [config.predictions_topic, config.alerts_topic, config.dead_letter_topic]
        _clients(broker.bootstrap_servers, config.security).create_topics(
            {config.topic: partitions, **{t: 1 for t in outputs if t}})
        try:
            sent = replay(broker.bootstrap_servers, config.topic, samples, unlabelled_every,
                          config.security)
        except ValueError as error:
            raise ValueError(f"--replay {source}: {error}") from None
        print(f"replayed {sent} messages from {source} into {config.topic!r}; serving "
              f"(stops after {config.exit_when_idle:g}s without messages)", flush=True)
        if workers:
            status = _run_workers(broker, config, workers, worker_argv, checkpoint_dir)
        else:
            service = Service(config, model_factory, monitor, monitor_attack)
            observer = observe(service) if observe is not None else None
            try:
                status = service.run()
            finally:
                if observer is not None:
                    observer.stop()
            if os.path.exists(state_io.checkpoint_path(checkpoint_dir)):
                summary = state_io.describe(checkpoint_dir)
                print(json.dumps({k: summary[k] for k in (
                    "samples_learned", "test_then_train_accuracy", "offsets", "counters",
                    "path")}, indent=2))
                print(f"inspect it again with: advsvm inspect {checkpoint_dir}")
            else:  # stopped (Ctrl-C, SIGTERM) before its first checkpoint
                print(f"no checkpoint in {checkpoint_dir}: the service stopped before it "
                      "wrote one")
        _show_outputs(broker.bootstrap_servers, config, show, out)
    return status


def _opened(path: str | None) -> typing.ContextManager:
    """`path` opened for writing, or nothing."""
    return open(path, "w") if path else contextlib.nullcontext()



def _run_workers(broker, config: ServiceConfig, workers: int, worker_argv,
                 checkpoint_dir: str) -> int:
    """Start the worker processes, wait for all of them, print the group's summary."""
    from river_advsvm.streams import group as group_io

    sync_topic = config.sync_topic or ServiceConfig(
        bootstrap_servers="", topic=config.topic, group=config.group, checkpoint_dir="",
        sync_every=1).sync_topic
    from river_advsvm.streams import lifecycle

    processes = []
    stopped = []

    def stop() -> None:  # SIGTERM or SIGINT: each worker drains, then the broker stops
        stopped.append(True)
        for process in processes:
            if process.poll() is None:
                process.terminate()

    signals = lifecycle.Signals(stop)
    try:
        for i in range(workers):
            if stopped:
                break
            directory = os.path.join(checkpoint_dir, f"worker-{i}")
            os.makedirs(directory, exist_ok=True)
            command = worker_argv(broker.bootstrap_servers, config.topic, config.group,
                                  directory, f"worker-{i}")
            for flag, value in [("--predictions-topic", config.predictions_topic),
                                ("--alerts-topic", config.alerts_topic),
                                ("--dead-letter-topic", config.dead_letter_topic),
                                ("--sync-topic", sync_topic),
                                ("--exit-when-idle", config.exit_when_idle),
                                ("--session-timeout-ms", config.session_timeout_ms)]:
                if value is not None:  # the last occurrence of an option wins
                    command += [flag, str(value)]
            with open(os.path.join(directory, "worker.log"), "ab") as log_file:
                processes.append(subprocess.Popen(command, stdout=log_file,
                                                  stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL))
            print(f"worker-{i}: pid {processes[-1].pid}, log {directory}/worker.log", flush=True)
        started = time.monotonic()
        statuses = [process.wait() for process in processes]
    finally:
        signals.restore()
        for process in processes:  # on an interrupt: drain them, by their own pids
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    print(f"all {workers} workers stopped after {time.monotonic() - started:.1f}s "
          f"(exit statuses {statuses})", flush=True)
    snapshots = group_io.read_group(broker.bootstrap_servers, sync_topic,
                                    security=config.security)
    summary = group_io.totals(snapshots.values())
    first, last = summary.pop("first_message_at"), summary.pop("last_message_at")
    if first is not None and last is not None and last > first:
        summary["group_msg_per_s"] = round(summary["consumed"] / (last - first), 1)
    summary["per_worker"] = {
        w: {"samples_learned": s.learned, "consumed": s.consumed, "snapshots": s.seq}
        for w, s in sorted(snapshots.items())
    }
    model = group_io.group_model(snapshots.values())
    summary["merged_model_samples"] = None if model is None else model.n_learned
    print(json.dumps(summary, indent=2))
    print(f"inspect a worker with: advsvm inspect {checkpoint_dir}/worker-0")
    # A worker our SIGTERM stopped before it could drain (still starting) stopped as asked;
    # one a signal killed otherwise is an unexpected end.
    return signals.status(max((0 if stopped and status == -signal.SIGTERM else
                               1 if status < 0 else status for status in statuses), default=0))


def _write_outputs(found: dict, outputs_file: typing.TextIO) -> None:
    """Every output of `found` (kind -> JSON values) as a line of `outputs_file`."""
    try:
        for kind, values in found.items():
            for value in values:
                outputs_file.write(json.dumps({"output": kind, **json.loads(value)}) + "\n")
        outputs_file.flush()
    except OSError as error:  # (a write's error names no file: a full disk, a size limit)
        raise OSError(error.errno, error.strerror or str(error), outputs_file.name) from None


def _show_outputs(bootstrap_servers: str, config: ServiceConfig, show: int,
                  outputs_file: typing.TextIO | None) -> None:
    """Print the first `show` predictions and alerts; write every output to `outputs_file`."""
    if not show and not outputs_file:
        return
    topics = [("prediction", config.predictions_topic), ("alert", config.alerts_topic),
              ("dead letter", config.dead_letter_topic)]
    found = {kind: read_outputs(bootstrap_servers, topic, security=config.security)
             for kind, topic in topics if topic}
    if outputs_file:
        _write_outputs(found, outputs_file)
        print(f"every output ({', '.join(f'{len(v)} {k}s' for k, v in found.items())}) "
              f"written to {outputs_file.name}")
    for kind in ("prediction", "alert"):
        values = found.get(kind, [])
        if show and values:
            print(f"the first {min(show, len(values))} of {len(values)} {kind}s "
                  f"({config.predictions_topic if kind == 'prediction' else config.alerts_topic}):")
            for value in values[:show]:
                print("  " + value.decode())
        elif show:
            print(f"no {kind}s")


def read_outputs(bootstrap_servers: str, topic: str, quiet: float = 1.0,
                 security=None) -> list[bytes]:
    """Every record value of `topic`, read from the beginning until nothing new came for
    `quiet` seconds (the bundled broker's end offsets cannot be trusted)."""
    from kafka import TopicPartition

    consumer = _clients(bootstrap_servers, security).reader(client_id="advsvm-local",
                                                            max_fetch_bytes=8 * 2**20)
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        if not tps:
            return []
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        values: list[bytes] = []
        last = time.monotonic()
        while time.monotonic() - last < quiet:
            batches = consumer.poll(timeout_ms=200)
            for tp in sorted(batches):
                values += [record.value for record in batches[tp]]
            if batches:
                last = time.monotonic()
        return values
    finally:
        consumer.close()
