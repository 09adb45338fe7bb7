"""`advsvm serve` on the bundled broker: one worker's rate and where its time goes, and a group.

    python benchmarks/scaleout.py                       # one worker, d = 784 and d = 16
    python benchmarks/scaleout.py --noisy [--messages 20000]  # the default model, noisy stream
    python benchmarks/scaleout.py --noisy --last-iterate --repeats 3  # its last iterate, 3 runs
    python benchmarks/scaleout.py --group --workers 1 2 3 [--messages 30000] [--d 16]

One worker (the default): for d = 784 (array messages, pixel-like values in [0, 1]) and d = 16
(object messages), the input topic is preloaded on a fresh local broker (tansu, 127.0.0.1,
memory), then one `advsvm serve` (predictions on, default checkpointing, BLAS on one thread)
learns it; its rate is the messages over the time from its first poll with messages to the end
of the last one's processing, and its log says where that time went (fetch: polls that
returned records; decode: parsing and checking; model: the batched test-then-train; publish:
handing outputs to the producer; checkpoint: flushing outputs and writing the checkpoint).
In the same process the same messages go through the service's `Learner` without Kafka, and
through the decoder alone: the ratios say what Kafka costs and how far the model is from
the decoder. Targets: 4,000 msg/s at d = 784, 10,000 msg/s at d = 16.

The default model on the noisy stream (`--noisy`): `advsvm serve` with no model options
(`AdvKernelSVM()`: gamma='scale', budget 1,024, merge, reprocess 1, predicting with the average
of its iterates; `--last-iterate` adds `--averaging 0`, as every other run here) and
predictions on, one worker, over the noisy stream of `throughput.py --support-only` as array
messages (d = 784, uniform pixels, the label from 20 of them: almost every sample violates the
margin, so almost every one merges once the budget is full, after about 1,100 messages). In the
same run the same messages go through the service's `Learner` without Kafka, in runs of 500 as
the service polls them: the model call's own rate (`predict_proba_then_learn_many`), over all the
messages and over those that arrived at full budget, says how much of the service's time the
model takes. Target: 4,000 msg/s.

A group (`--group`): for each number of workers, a fresh broker, an input topic of
`--partitions` partitions and N worker processes (`advsvm serve --sync-every`), started first
and waited for until the group is stable; then the stream is produced, and the clock runs from
the first message sent until the workers' checkpoints account for every message.

Everything (broker, producer, workers) shares the machine's cores (AMD EPYC, 2 cores here), so
the group numbers say how the group scales on it; on separate machines each worker has its
cores to itself.

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


#: Options of every `advsvm serve` run here but `--noisy` (the default model, unless
#: `--last-iterate`): their committed results are of the model predicting with its last iterate
#: (the default predicts with the average of its iterates).
LAST_ITERATE_OPTIONS = ["--averaging", "0"]

def make_stream(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).round(5)
    y = (X[:, 0] + 0.3 * X[:, 1] ** 2 - 0.5 * X[:, 2] > 0.3).astype(int)
    return X, y


def encode(X, y) -> list[bytes]:
    from river_advsvm.streams import kafka as kafka_io

    return [kafka_io.encode(x, int(t), id=i) for i, (x, t) in enumerate(zip(X.tolist(), y))]


def learned_messages(directories) -> int:
    from river_advsvm.streams import state

    total = 0
    for directory in directories:
        try:
            total += state.describe(directory)["counters"]["consumed"]
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


def produce(bootstrap_servers: str, topic: str, values: list[bytes], partitions: int,
            security=None) -> None:
    """Send `values` round-robin over the partitions, with the service's own producer
    settings (`river_advsvm.streams.clients`: acks from all replicas) and `security` (plaintext
    if None)."""
    from river_advsvm.streams import clients
    from river_advsvm.streams.security import SecuritySettings

    producer = clients.Clients(bootstrap_servers, {"batch_size": 256 * 1024},
                               security=security or SecuritySettings()).producer(
        client_id="advsvm-bench", linger_ms=20, max_request_size=8 * 2**20)
    for i, value in enumerate(values):
        producer.send(topic, value=value, partition=i % partitions)
    producer.flush()
    producer.close()


def run(workers: int, values: list[bytes], args, root: pathlib.Path) -> dict:
    from river_advsvm.streams import clients
    from river_advsvm.streams.broker import LocalBroker

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with LocalBroker(log_path=str(root / "broker.log")) as broker:
        topic = "bench"
        clients.create_topics(broker.bootstrap_servers, {topic: args.partitions})
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
                       str(args.budget), "--budget-policy", args.budget_policy, "--seed", "0",
                       "--blas-threads", str(args.blas_threads),
                       "--checkpoint-every", str(args.sync_every), *LAST_ITERATE_OPTIONS]
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
    from river_advsvm.streams import state

    runs = [(state.describe(d).get("group") or {}).get("run") or {} for d in directories]
    runs = [r for r in runs if r.get("first") and r.get("last")]
    span = (max(r["last"] for r in runs) - min(r["first"] for r in runs)) if runs else 0
    return {
        "workers": workers, "standalone": args.standalone, "messages": len(values), "d": args.d,
        "budget": args.budget, "budget_policy": args.budget_policy,
        "partitions": args.partitions, "sync_every": args.sync_every,
        "blas_threads": args.blas_threads, "seconds": round(seconds, 2),
        "preload": args.preload, "produce_seconds": round(produced, 2),
        "group_msg_per_s": round(len(values) / seconds, 1),
        "worker_msg_per_s_mean": round(sum(rates) / len(rates), 1) if None not in rates else None,
        "worker_msg_per_s_min": min(rates) if None not in rates else None,
        # first message processed by any worker to the last one, rebalance pauses included
        "group_first_to_last_msg_per_s": round(len(values) / span, 1) if span > 0 else None,
        "cpus": os.cpu_count(), "machine": platform.machine(),
    }


# -- one worker ------------------------------------------------------------------------------

#: The service's targets, msg/s, by d.
TARGETS = {784: 4000, 16: 10000}
STAGES = ("fetch", "decode", "model", "publish", "checkpoint")


def rate_messages(n: int, d: int, seed: int = 0) -> list[bytes]:
    """d = 784: arrays of pixel-like values in [0, 1]; otherwise objects named f0, f1, ..."""
    from river_advsvm.streams import kafka as kafka_io

    rng = np.random.default_rng(seed)
    X = rng.random((n, d)).round(3)
    y = (X[:, : d // 2].mean(axis=1) > X[:, d // 2:].mean(axis=1)).astype(int)
    if d >= 100:
        return [kafka_io.encode(x, int(t), id=i) for i, (x, t) in enumerate(zip(X.tolist(), y))]
    return [kafka_io.encode({f"f{j}": v for j, v in enumerate(x)}, int(t), id=i)
            for i, (x, t) in enumerate(zip(X.tolist(), y))]


def model_options(d: int, policy: str) -> list[str]:
    gamma = 1.0 / d  # numeric: the rate does not depend on a warm-up
    return ["--epsilon", "0.1", "--gamma", str(gamma), "--budget", "1024", "--seed", "0",
            "--budget-policy", policy, *LAST_ITERATE_OPTIONS]


def in_process(values: list[bytes], d: int, policy: str) -> dict:
    """The decoder alone, and the service's Learner (decode + model) without Kafka."""
    from river_advsvm.streams import cli as streams_cli
    from river_advsvm.streams import kafka as kafka_io
    from river_advsvm.streams import state
    from river_advsvm.streams.learner import Learner

    started = time.perf_counter()
    for value in values:
        kafka_io.decode(value, 2**20)
    decode_s = time.perf_counter() - started
    args = streams_cli.build_parser().parse_args(model_options(d, policy))
    learner = Learner(state.ServiceState(model=streams_cli._model_factory(args)()), 2**20)
    started = time.perf_counter()
    for i in range(0, len(values), 500):
        learner.process_many(values[i:i + 500])
    learner_s = time.perf_counter() - started
    return {"decode_msg_per_s": len(values) / decode_s,
            "learner_msg_per_s": len(values) / learner_s,
            "learner_model_share": learner.seconds["model"] / learner_s}


def client_floor(bootstrap_servers: str, values: list[bytes]) -> dict:
    """What kafka-python alone costs per message on this broker: consuming the preloaded topic
    (500 records a poll, as the service) and producing a prediction-sized record."""
    from river_advsvm.streams import clients

    kafka = clients.Clients(bootstrap_servers)
    consumer = kafka.consumer("floor", max_poll_records=500, session_timeout_ms=2000)
    consumer.subscribe(["bench"])
    got, first, busy = 0, True, 0.0
    while got < len(values):
        started = time.perf_counter()
        count = sum(len(batch) for batch in consumer.poll(timeout_ms=200).values())
        if count and not first:  # the first poll waited for the group
            busy += time.perf_counter() - started
        first = first and not count
        got += count
    consumer.close()
    prediction = (b'{"id":12345,"label":1,"probability":0.9312,"labelled":true,"topic":"bench",'
                  b'"partition":0,"offset":12345,"samples_learned":12345,"y":1}')
    producer = kafka.producer()
    started = time.perf_counter()
    for _ in range(len(values)):
        producer.send("bench-floor", prediction)
    producer.flush()
    produce_s = time.perf_counter() - started
    producer.close()
    return {"kafka_python_consume_us": 1e6 * busy / max(1, len(values) - 500),
            "kafka_python_produce_us": 1e6 * produce_s / len(values)}


def service_rate(values: list[bytes], d: int, root: pathlib.Path, policy: str,
                 options: list[str] | None = None) -> dict:
    """One `advsvm serve` over a preloaded topic: its rate and its time per stage; and the
    client floor (`client_floor`) on the same broker. `options`: the model's (by default
    `model_options(d, policy)`)."""
    from river_advsvm.streams import clients
    from river_advsvm.streams.broker import LocalBroker

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = root / f"rate-{d}.log"
    with LocalBroker(log_path=str(root / "broker.log")) as broker:
        clients.create_topics(broker.bootstrap_servers, {"bench": 1, "bench-predictions": 1})
        produce(broker.bootstrap_servers, "bench", values, 1)
        command = [sys.executable, "-m", "river_advsvm.cli", "serve",
                   "--bootstrap-servers", broker.bootstrap_servers, "--topic", "bench",
                   "--group", "bench", "--checkpoint-dir", str(root / f"rate-{d}"),
                   "--predictions-topic", "bench-predictions", "--exit-when-idle", "2",
                   "--session-timeout-ms", "2000", "--blas-threads", "1",
                   *(model_options(d, policy) if options is None else options)]
        with open(log, "ab") as f:
            status = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, env=env,
                                    cwd=REPO, timeout=1200).returncode
        clients.create_topics(broker.bootstrap_servers, {"bench-floor": 1})
        floor = client_floor(broker.bootstrap_servers, values)
    text = log.read_text(errors="replace")
    if status != 0:
        raise RuntimeError(f"the service exited {status}:\n{text[-2000:]}")
    rate = float(re.findall(r"messages processed in this run \(([\d.]+) msg/s\)", text)[-1])
    seconds = json.loads(re.findall(r"time spent \(seconds\): (\{.*\})", text)[-1])
    total = len(values) / rate
    record = {"service_msg_per_s": rate, "service_seconds": total, **floor,
              "client_floor_msg_per_s": 1e6 / (floor["kafka_python_consume_us"]
                                               + floor["kafka_python_produce_us"])}
    for stage in STAGES:
        record[f"share_{stage}"] = seconds.get(stage, 0.0) / total
        record[f"us_per_msg_{stage}"] = 1e6 * seconds.get(stage, 0.0) / len(values)
    record["share_other"] = max(0.0, 1.0 - sum(record[f"share_{s}"] for s in STAGES))
    return record


def rate(args, root: pathlib.Path) -> list[dict]:
    sizes = [(784, 600 if args.quick else 12000), (16, 2000 if args.quick else 40000)]
    records = []
    for d, n in sizes:
        values = rate_messages(n, d)
        record = {"d": d, "form": "array" if d >= 100 else "object", "messages": n,
                  "budget": 1024, "budget_policy": args.budget_policy, "workers": 1,
                  "target_msg_per_s": TARGETS[d],
                  "message_bytes": round(sum(map(len, values)) / n)}
        record.update(service_rate(values, d, root, args.budget_policy))
        record.update(in_process(values, d, args.budget_policy))
        record["target_met"] = record["service_msg_per_s"] >= TARGETS[d]
        record["ratio_service_to_learner"] = (record["service_msg_per_s"]
                                              / record["learner_msg_per_s"])
        record["ratio_learner_to_decode"] = (record["learner_msg_per_s"]
                                             / record["decode_msg_per_s"])
        # The keys every scale-out record has (one worker: its own rate).
        record.update(seconds=round(record["service_seconds"], 2),
                      group_msg_per_s=record["service_msg_per_s"],
                      worker_msg_per_s_mean=record["service_msg_per_s"])
        records.append(record)
        print(json.dumps({k: record[k] for k in ("d", "service_msg_per_s", "target_met")}),
              flush=True)
    return records


def noisy_messages(n: int, d: int = 784, seed: int = 0) -> list[bytes]:
    """`throughput.noisy_stream` as array messages (values to 3 decimals): uniform pixels, the
    label from the first 20."""
    from river_advsvm.streams import kafka as kafka_io

    X = np.random.default_rng(seed).random((n, d)).round(3)
    y = (X[:, :20].sum(axis=1) > 10.0).astype(int)
    return [kafka_io.encode(x, int(t), id=i) for i, (x, t) in enumerate(zip(X.tolist(), y))]


def model_call_rates(values: list[bytes], options: list[str], run: int = 500) -> dict:
    """The service's `Learner` (decode and model, no Kafka) with the model of the serve
    `options` over `values` in runs of `run`: messages per second of the whole, and of the
    model call alone, over every run and over the runs that started at full budget."""
    from river_advsvm.streams import cli as streams_cli
    from river_advsvm.streams import state
    from river_advsvm.streams.learner import Learner

    args = streams_cli.build_parser().parse_args(options)
    model = streams_cli._model_factory(args)()
    learner = Learner(state.ServiceState(model=model), 2**20)
    full_messages, full_seconds = 0, 0.0
    started = time.perf_counter()
    for i in range(0, len(values), run):
        model = learner.state.model
        full = model.n_support_vectors >= model.budget
        before = learner.seconds["model"]
        learner.process_many(values[i:i + run])
        if full:
            full_messages += len(values[i:i + run])
            full_seconds += learner.seconds["model"] - before
    seconds = time.perf_counter() - started
    return {"learner_msg_per_s": len(values) / seconds,
            "model_call_msg_per_s": len(values) / learner.seconds["model"],
            "model_call_full_budget_msg_per_s": (full_messages / full_seconds
                                                 if full_messages else None),
            "full_budget_messages": full_messages,
            "n_support_vectors": learner.state.model.n_support_vectors}


#: The service's target with the default model on the noisy stream, msg/s.
NOISY_TARGET = 4000


def noisy_rate(args, root: pathlib.Path) -> list[dict]:
    """`advsvm serve` with the default model (its last iterate with `--last-iterate`) on the
    noisy stream through the local broker, and the model call in process over the same
    messages; `--repeats` runs, each on a fresh broker: the record of the median run, with the
    range of the service's rates over the runs."""
    d, n = 784, 1500 if args.quick else args.messages
    values = noisy_messages(n, d)
    options = LAST_ITERATE_OPTIONS if args.last_iterate else []
    about = {"data": "noisy", "d": d, "form": "array", "messages": n, "workers": 1,
             "model": "AdvKernelSVM(averaging=None)" if options else "AdvKernelSVM()",
             "serve_options": " ".join(options), "budget": 1024,
             "target_msg_per_s": NOISY_TARGET, "message_bytes": round(sum(map(len, values)) / n)}
    runs = []
    for i in range(args.repeats):
        (root / f"run-{i}").mkdir()
        record = {**about, **service_rate(values, d, root / f"run-{i}", "merge", options=options),
                  **model_call_rates(values, options)}
        record["target_met"] = record["service_msg_per_s"] >= NOISY_TARGET
        record["ratio_service_to_model_call"] = (record["service_msg_per_s"]
                                                 / record["model_call_msg_per_s"])
        runs.append(record)
    runs.sort(key=lambda r: r["service_msg_per_s"])
    return [{**runs[(len(runs) - 1) // 2], "runs": len(runs),
             "service_msg_per_s_min": runs[0]["service_msg_per_s"],
             "service_msg_per_s_max": runs[-1]["service_msg_per_s"]}]


def print_noisy_table(records: list[dict]) -> None:
    from common import format_table

    print(format_table(records, [
        ("messages", "messages", "d"), ("service_msg_per_s", "service msg/s", ".0f"),
        ("target_msg_per_s", "target", "d"), ("target_met", "met", ""),
        ("model_call_msg_per_s", "model call msg/s", ".0f"),
        ("model_call_full_budget_msg_per_s", "at full budget", ".0f"),
        ("learner_msg_per_s", "decode+model msg/s", ".0f"),
        ("ratio_service_to_model_call", "service/model", ".2f")]))
    print("\nwhere the service's time goes (share; microseconds per message):")
    print(format_table(records, [(f"share_{s}", s, ".0%") for s in (*STAGES, "other")] + [
        (f"us_per_msg_{s}", f"{s} us", ".1f") for s in STAGES]))


def print_rate_table(records: list[dict]) -> None:
    from common import format_table

    print(format_table(records, [
        ("d", "d", "d"), ("form", "x", "s"), ("service_msg_per_s", "service msg/s", ".0f"),
        ("target_msg_per_s", "target", "d"), ("target_met", "met", ""),
        ("learner_msg_per_s", "no-Kafka msg/s", ".0f"),
        ("ratio_service_to_learner", "service/no-Kafka", ".2f"),
        ("decode_msg_per_s", "decode msg/s", ".0f"),
        ("client_floor_msg_per_s", "kafka-python floor msg/s", ".0f")]))
    print("\nwhere one worker's time goes (share of its time; microseconds per message):")
    print(format_table(records, [("d", "d", "d")] + [
        (f"share_{s}", s, ".0%") for s in (*STAGES, "other")] + [
        (f"us_per_msg_{s}", f"{s} us", ".1f") for s in STAGES]))
    print("\nkafka-python alone, per message: consume (500 a poll) and produce one output:")
    print(format_table(records, [("d", "d", "d"),
                                 ("kafka_python_consume_us", "consume us", ".1f"),
                                 ("kafka_python_produce_us", "produce us", ".1f")]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", action="store_true",
                        help="the group's scaling (--workers) instead of one worker's rate")
    parser.add_argument("--noisy", action="store_true",
                        help="one worker with the default model on the noisy stream at d = 784 "
                        "(--messages, default 20000), and its model call in process")
    parser.add_argument("--last-iterate", action="store_true",
                        help="--noisy with the model predicting with its last iterate "
                        "(--averaging 0)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="--noisy runs, each on a fresh broker: the median run is kept")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--messages", type=int,
                        help="messages of a --group run (default 30000) or --noisy (20000)")
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--gamma", type=float, default=0.05)
    parser.add_argument("--budget-policy", default="merge",
                        choices=["merge", "remove", "compact", "compact_slot", "truncate"],
                        help="the workers' model (default merge, the library's default)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--sync-every", type=int, default=1000)
    parser.add_argument("--blas-threads", type=int, default=1)
    parser.add_argument("--standalone", action="store_true",
                        help="plain services (no --sync-every): one model per process")
    parser.add_argument("--preload", action="store_true",
                        help="produce the stream before starting the workers (the clock then "
                        "includes their start-up: read worker_msg_per_s)")
    parser.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    parser.add_argument("--out", help="write the records as JSON here (default: benchmarks/results/"
                        "scaleout[_group|_noisy|_noisy_last_iterate][_quick].json)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    args = parser.parse_args(argv)
    if (args.last_iterate or args.repeats != 1) and not args.noisy:
        parser.error("--last-iterate and --repeats go with --noisy")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    from common import machine, one_blas_thread, write_records

    if args.messages is None:
        args.messages = 20000 if args.noisy else 30000
    records = []
    name = ("scaleout_group" if args.group else "scaleout" if not args.noisy
            else "scaleout_noisy_last_iterate" if args.last_iterate else "scaleout_noisy")
    with tempfile.TemporaryDirectory(prefix="advsvm-scaleout-") as tmp, one_blas_thread():
        if args.noisy:
            records = [{**r, **machine()} for r in noisy_rate(args, pathlib.Path(tmp))]
            print_noisy_table(records)
        elif not args.group:
            records = [{**r, **machine()} for r in rate(args, pathlib.Path(tmp))]
            print_rate_table(records)
        else:
            if args.quick:
                args.messages, args.workers = 1000, [2]
            X, y = make_stream(args.messages, args.d)
            values = encode(X, y)
            from river_advsvm import progress

            for workers in progress.bar(args.workers, desc="group sizes", unit="run",
                                        progress=not args.no_progress):
                record = run(workers, values, args, pathlib.Path(tmp))
                progress.write(json.dumps(record))
                records.append(record)
    write_records(records, args.out, name, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
