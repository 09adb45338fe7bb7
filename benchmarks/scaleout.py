"""Group throughput of `advsvm serve` workers on one machine, against the bundled broker.

    python benchmarks/scaleout.py [--workers 1 2 3] [--messages 30000] [--d 16] [--quick]
    python benchmarks/scaleout.py --standalone --preload --workers 1 --d 784 --budget 1024 \
        --gamma 0.001 --messages 4000 --blas-threads 0   # the service's rate, BLAS as it comes

For each number of workers: a fresh local broker (tansu, 127.0.0.1, memory), an input topic of
`--partitions` partitions, N worker processes (`advsvm serve --sync-every`), started first and
waited for until the group is stable (every worker owns partitions, all of them are owned);
then the stream is produced, and the clock runs from the first message sent until the workers'
checkpoints account for every message. `group_msg_per_s` is messages / that time. Each worker's
own rate (`worker_msg_per_s_*`: the messages it processed / its first-to-last message time, from
its log) is reported too. `--preload` produces the whole stream before the workers start (the
producer then does not compete for the cores), which is how the service's own rate is measured.

Everything (broker, producer, workers) shares the cores of one machine, so the numbers say how
the group scales on it; on separate machines each worker has its cores to itself.

"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402


def make_stream(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).round(5)
    y = (X[:, 0] + 0.3 * X[:, 1] ** 2 - 0.5 * X[:, 2] > 0.3).astype(int)
    return X, y


def encode(X, y) -> list[bytes]:
    from streams import kafka as kafka_io

    return [kafka_io.encode(x, int(t), id=i) for i, (x, t) in enumerate(zip(X.tolist(), y))]


def learned_messages(directories) -> int:
    from streams import state

    total = 0
    for directory in directories:
        try:
            total += state.describe(directory)["counters"]["messages"]
        except FileNotFoundError:
            pass
    return total


def assignments(log_path) -> set | None:
    """The partitions of the worker's latest assignment, from its log."""
    try:
        text = pathlib.Path(log_path).read_text(errors="replace")
    except FileNotFoundError:
        return None
    found = re.findall(r"assigned (\[.*?\]);", text)
    if not found:
        return None
    return set(re.findall(r"', (\d+)\)", found[-1]))


def worker_rate(log_path) -> float | None:
    """The worker's own rate, from the line it logs when it stops."""
    found = re.findall(r"messages processed in this run \(([\d.]+) msg/s\)",
                       pathlib.Path(log_path).read_text(errors="replace"))
    return float(found[-1]) if found else None


def produce(bootstrap_servers: str, topic: str, values: list[bytes], partitions: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks=1, linger_ms=20,
                             batch_size=256 * 1024, enable_idempotence=False,
                             max_request_size=8 * 2**20)
    for i, value in enumerate(values):
        producer.send(topic, value=value, partition=i % partitions)
    producer.flush()
    producer.close()


def run(workers: int, values: list[bytes], args, root: pathlib.Path) -> dict:
    from streams import kafka as kafka_io
    from streams.broker import LocalBroker

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with LocalBroker(log_path=str(root / "broker.log")) as broker:
        topic = "bench"
        kafka_io.create_topics(broker.bootstrap_servers, {topic: args.partitions})
        produced = None
        if args.preload:
            clock = time.monotonic()
            produce(broker.bootstrap_servers, topic, values, args.partitions)
            produced = time.monotonic() - clock
        processes, directories, logs = [], [], []
        for i in range(workers):
            directory = root / f"w{workers}-{i}"
            directories.append(directory)
            logs.append(root / f"w{workers}-{i}.log")
            command = [sys.executable, "-m", "river_advsvm.cli", "serve",
                       "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
                       "--group", f"bench-{workers}", "--checkpoint-dir", str(directory),
                       "--session-timeout-ms", "2000", "--log-level", "info",
                       "--epsilon", "0.1", "--gamma", str(args.gamma), "--budget",
                       str(args.budget), "--seed", "0", "--blas-threads", str(args.blas_threads),
                       "--checkpoint-every", str(args.sync_every)]
            if not args.standalone:
                command += ["--sync-every", str(args.sync_every), "--worker-id", f"w{i}"]
            with open(logs[-1], "ab") as log:
                processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                  env=env, cwd=REPO))
        try:
            deadline = time.monotonic() + 120
            while not args.preload:  # a stable group: every worker owns some partitions
                owned = [assignments(path) for path in logs]
                if all(owned) and sum(len(o) for o in owned) == args.partitions \
                        and len(set().union(*owned)) == args.partitions:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the group never settled: {owned}")
                time.sleep(0.1)
            started = time.monotonic()
            if not args.preload:
                produce(broker.bootstrap_servers, topic, values, args.partitions)
                produced = time.monotonic() - started
            while learned_messages(directories) < len(values):
                if time.monotonic() - started > 600:
                    raise RuntimeError("the workers did not finish in 10 minutes")
                time.sleep(0.05)
            seconds = time.monotonic() - started
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(60)
    rates = [worker_rate(path) for path in logs]
    from streams import state

    runs = [(state.describe(d).get("group") or {}).get("run") or {} for d in directories]
    runs = [r for r in runs if r.get("first") and r.get("last")]
    span = (max(r["last"] for r in runs) - min(r["first"] for r in runs)) if runs else 0
    return {
        "workers": workers, "standalone": args.standalone, "messages": len(values), "d": args.d,
        "budget": args.budget, "partitions": args.partitions, "sync_every": args.sync_every,
        "blas_threads": args.blas_threads, "seconds": round(seconds, 2),
        "preload": args.preload, "produce_seconds": round(produced, 2),
        "group_msg_per_s": round(len(values) / seconds, 1),
        "worker_msg_per_s_mean": round(sum(rates) / len(rates), 1) if None not in rates else None,
        "worker_msg_per_s_min": min(rates) if None not in rates else None,
        # first message processed by any worker to the last one, rebalance pauses included
        "group_first_to_last_msg_per_s": round(len(values) / span, 1) if span > 0 else None,
        "cpus": os.cpu_count(), "machine": platform.machine(),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--messages", type=int, default=30000)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--gamma", type=float, default=0.05)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--sync-every", type=int, default=1000)
    parser.add_argument("--blas-threads", type=int, default=1)
    parser.add_argument("--standalone", action="store_true",
                        help="plain services (no --sync-every): one model per process")
    parser.add_argument("--preload", action="store_true",
                        help="produce the stream before starting the workers (the clock then "
                        "includes their start-up: read worker_msg_per_s)")
    parser.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    parser.add_argument("--out", help="write the records as JSON here")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.workers = 1000, [2]
    X, y = make_stream(args.messages, args.d)
    values = encode(X, y)
    records = []
    from river_advsvm import progress

    with tempfile.TemporaryDirectory(prefix="advsvm-scaleout-") as tmp:
        for workers in progress.bar(args.workers, desc="group sizes", unit="run",
                                    progress=not args.no_progress):
            record = run(workers, values, args, pathlib.Path(tmp))
            progress.write(json.dumps(record))
            records.append(record)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
