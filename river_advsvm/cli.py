"""The `advsvm` command: argument parsing only; the work is done by the library."""

from __future__ import annotations

import argparse
import sys


PLOT_NAME = "advsvm-demo.png"


def _one_blas_thread():
    """One BLAS thread for this process: one-sample mat-vecs gain nothing from more, and lose a
    lot when the cores are shared."""
    import contextlib

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # only a speed-up
        return contextlib.nullcontext()
    return threadpool_limits(1)


def _read_parquet(path: str, target: str, test_fraction: float):
    """Every row of a Parquet file (or directory) as arrays; the last `test_fraction` held out."""
    import numpy as np

    (parquet,) = _import_streams("demo --data", "parquet", "parquet")
    blocks, labels = [], []
    for X, y in parquet.iter_batches(path, target=target):
        blocks.append(X.to_numpy(dtype=float))
        labels += y.tolist()
    if not blocks:
        raise ValueError(f"{path} holds no rows")
    X, y = np.vstack(blocks), np.array(labels)
    split = len(y) - int(round(len(y) * test_fraction))
    if split < 1:
        raise ValueError(f"--test-fraction {test_fraction} leaves nothing to stream")
    if split == len(y):
        return X, y, None, None
    return X[:split], y[:split], X[split:], y[split:]


def _demo_data(args: argparse.Namespace):
    """`(X, y, X_test, y_test, title)` for `advsvm demo`, inputs scaled into [0, 1]."""
    import os

    from river_advsvm import demo

    pair = "ten classes, one-vs-rest" if args.all else f"{args.pair[0]} vs {args.pair[1]}"
    if args.data is None:
        load = demo.load_digits_all if args.all else demo.load_digits_pair
        X, y = load(args.seed) if args.all else load(*args.pair, seed=args.seed)
        X_test = y_test = None
        source, scaling = "scikit-learn digits", "pixels / 16"
    else:
        path = args.data
        if path.endswith(".npz"):
            X, y, X_test, y_test = demo.load_npz(path)
        elif path.endswith((".parquet", ".pq")) or os.path.isdir(path):
            X, y, X_test, y_test = _read_parquet(path, args.target, args.test_fraction)
        else:
            raise ValueError(f"--data {path}: expected an .npz archive or a .parquet file")
        if not args.all:
            X, y = demo.select_labels(X, y, args.pair)
            if X_test is not None:
                kept = [label in args.pair for label in y_test.tolist()]
                X_test, y_test = X_test[kept], y_test[kept]
        X, X_test, scaling = demo.to_unit_box(X, X_test)
        source = os.path.basename(os.path.normpath(path))
    if args.max_samples:
        X, y = X[: args.max_samples], y[: args.max_samples]
    title = f"{source}, {pair}: {len(y):,} samples streamed once ({scaling})"
    return X, y, X_test, y_test, title


def _demo(args: argparse.Namespace) -> int:
    import os

    from river_advsvm import demo

    if not os.path.isdir(args.out):
        print(f"advsvm demo: --out {args.out} is not a directory", file=sys.stderr)
        return 2
    with _one_blas_thread():
        try:
            X, y, X_test, y_test, title = _demo_data(args)
            result = demo.run_demo(
                X, y, X_test, y_test, title=title, multiclass=args.all, epsilon=args.epsilon,
                train_epsilon=args.train_epsilon,
                norm=args.norm, sample_rate=args.sample_rate, seed=args.seed,
                progress=not args.no_progress, test_samples=args.test_samples,
            )
        except (OSError, ValueError) as error:
            print(f"advsvm demo: {error}", file=sys.stderr)
            return 2
        path = demo.plot(result, os.path.join(args.out, PLOT_NAME))

    import textwrap

    how = "black box, through predict_proba" if result.multiclass else "white box"
    print(f"\n{title}\n")
    print(textwrap.fill(
        f"Test, then train, one sample at a time. Each model has a RobustnessMonitor: PGD-10 "
        f"({result.threat}, {how}) on {result.sample_rate:.0%} of the samples, certificates at "
        f"the same radius, ADWIN on the clean and robust error, a gap alert above 20%. "
        f"Accuracies are over the whole stream (progressive validation); samples/s include "
        f"the monitor.", width=100))
    print()
    print(demo.format_table(demo.table_rows(result)))
    held_out = demo.held_out_rows(result)
    if held_out:
        print("\nHeld-out test set after the stream (evaluate.robustness_report):\n")
        print(demo.format_table(held_out))
    if any(run.alerts for run in result.runs):
        print()
    for run in result.runs:
        for alert in run.alerts:
            print(f"alert, {run.name}: {alert}")
    print(f"\nPlot of the rolling accuracies with the alerts: {os.path.abspath(path)}")
    return 0


def _add_demo(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="natural vs adversarial AdvKernelSVM on a stream of digits, under the monitor",
        description="Stream scikit-learn's bundled digits (or --data) through a natural and an "
        "adversarially trained AdvKernelSVM side by side, test then train, each watched by a "
        "RobustnessMonitor that attacks a share of the samples (PGD-10) and certifies them. "
        "Prints a table of clean / robust / certified accuracy and throughput, and writes a "
        f"plot of the rolling accuracies with the monitor's alerts to DIR/{PLOT_NAME}.",
    )
    data = parser.add_argument_group("data")
    data.add_argument("--pair", nargs=2, type=_label, default=[1, 7], metavar=("A", "B"),
                      help="the two labels to separate (default: 1 7)")
    data.add_argument("--all", action="store_true",
                      help="every label, one-vs-rest (river_advsvm.multiclass.OneVsRest); "
                      "attacked black box through predict_proba, certified by the smallest "
                      "radius of the binary models")
    data.add_argument("--data", metavar="PATH",
                      help="an .npz with X_train, y_train (and X_test, y_test: held out) or a "
                      "Parquet file (needs the parquet extra); streamed in row order, inputs "
                      "scaled into [0, 1] (non-negative data / its maximum: pixels / 255)")
    data.add_argument("--target", default="y", metavar="COLUMN",
                      help="label column of a Parquet file (default: y)")
    data.add_argument("--test-fraction", type=float, default=0.2, metavar="F",
                      help="a Parquet file's last F of rows are held out as the test set "
                      "(default: 0.2; 0: none)")
    data.add_argument("--max-samples", type=int, metavar="N", help="stream only the first N")
    data.add_argument("--test-samples", type=int, default=1000, metavar="N",
                      help="held-out samples evaluated after the stream (default: 1000)")
    threat = parser.add_argument_group("threat model and monitor")
    threat.add_argument("--epsilon", type=float, default=1.0,
                        help="attack radius: the monitors attack and certify at it "
                        "(default: 1.0)")
    threat.add_argument("--train-epsilon", type=float, metavar="EPS",
                        help="radius the adversarial model trains against (default: half of "
                        "--epsilon; near 1.0 in L2 the closed-form worst case makes training "
                        "collapse on digits)")
    threat.add_argument("--norm", default="l2", choices=["l2", "linf"],
                        help="norm of the attack ball (default: l2)")
    threat.add_argument("--sample-rate", type=float, metavar="RATE",
                        help="share of the stream the monitors attack (default: all of it up to "
                        "2,000 samples, then about 2,000; with --all about 30, as a black-box "
                        "PGD-10 costs ~0.5 s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the digits' shuffle, the models and the sampling")
    parser.add_argument("--out", default=".", metavar="DIR",
                        help="where the plot goes (default: the current directory)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(run=_demo)


_STREAMS_MISSING = (
    "advsvm {command} needs the optional streams extra ({module} is missing): "
    "pip install 'river-advsvm[{extra}]'"
)


def _import_streams(command: str, extra: str, *modules: str):
    """Import `streams` modules lazily: the core never depends on them."""
    import importlib

    try:
        return [importlib.import_module(f"streams.{m}") for m in modules]
    except ImportError as error:
        print(_STREAMS_MISSING.format(command=command, module=error.name, extra=extra),
              file=sys.stderr)
        raise SystemExit(2) from None


def _label(text: str):
    """A label from the command line: JSON when it parses (1, true, 2.5), else the string."""
    import json

    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (bool, int, float, str)) else text


def _model_factory(args: argparse.Namespace):
    from river_advsvm import AdvKernelSVM, AdvLinearSVM

    common = dict(epsilon=args.epsilon, norm=args.norm, regularization=args.regularization,
                  schedule=args.schedule)
    if args.step_size is not None:
        common["step_size"] = args.step_size
    if args.bias_step_size is not None:
        common["bias_step_size"] = args.bias_step_size
    if args.model == "linear":
        AdvLinearSVM(**common)  # invalid options fail now, not at the first message
        return lambda: AdvLinearSVM(**common)
    gamma = args.gamma if args.gamma == "scale" else float(args.gamma)
    kernel = dict(kernel=args.kernel, gamma=gamma, budget=args.budget,
                  budget_policy=args.budget_policy, seed=args.seed)
    AdvKernelSVM(**common, **kernel)  # invalid options fail now, not at the first message
    return lambda: AdvKernelSVM(**common, **kernel)


#: Options a worker of `serve --local-broker --workers N` gets from the command line, by dest.
_WORKER_OPTIONS = [
    "checkpoint_every", "checkpoint_interval", "exit_when_idle", "max_message_bytes", "features",
    "labels", "session_timeout_ms", "max_poll_records", "shutdown_timeout", "log_level",
    "sync_every", "blas_threads", "model", "epsilon", "norm", "kernel", "gamma",
    "regularization", "step_size", "bias_step_size", "schedule", "budget", "budget_policy", "seed",
]


def _worker_argv(args: argparse.Namespace):
    """The `advsvm serve` command line of one worker, from this command's options."""
    options = []
    for dest in _WORKER_OPTIONS:
        value = getattr(args, dest)
        if value is None:
            continue
        flag = "--" + dest.replace("_", "-")
        if dest == "labels":
            import json

            options += [flag, *(json.dumps(v) if not isinstance(v, str) else v for v in value)]
        else:
            options += [flag, str(value)]

    def argv(bootstrap_servers: str, topic: str, group: str, checkpoint_dir: str,
             worker_id: str) -> list[str]:
        return [sys.executable, "-m", "river_advsvm.cli", "serve",
                "--bootstrap-servers", bootstrap_servers, "--topic", topic, "--group", group,
                "--checkpoint-dir", checkpoint_dir, "--worker-id", worker_id, *options]

    return argv


def _monitor(args: argparse.Namespace):
    """The robustness monitor of `serve`, or None: on when there is an alerts topic."""
    if not args.alerts_topic:
        return None
    from river_advsvm.attacks import PGD
    from river_advsvm.monitor import RobustnessMonitor

    epsilon = args.monitor_epsilon
    if epsilon is None:
        epsilon = args.epsilon if args.epsilon > 0 else 8 / 255
    norm = args.monitor_norm or args.norm
    # The service points the monitor at its current model before each update (checkpoint
    # reloads and group merges replace the model object), hence no model here.
    return RobustnessMonitor(None, attack=PGD(epsilon=epsilon, norm=norm),
                             sample_rate=args.monitor_sample_rate)


def _check_group_options(args: argparse.Namespace, model_factory) -> None:
    """Workers that sync must share their feature pool: `ValueError` otherwise."""
    if args.sync_every is None and not args.workers:
        return
    if args.model != "kernel":
        raise ValueError("workers that sync need --model kernel (AdvKernelSVM)")
    from streams import merge

    merge.check_mergeable_params(model_factory()._get_params())


def _serve(args: argparse.Namespace) -> int:
    import logging

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.ERROR)  # reconnect chatter during outages
    if args.workers and not args.local_broker:
        print("advsvm serve: --workers starts workers next to a local broker (--local-broker); "
              "elsewhere start one `advsvm serve --sync-every N` per worker", file=sys.stderr)
        return 2
    if args.workers and args.sync_every is None:
        args.sync_every = 1000
    try:
        model_factory = _model_factory(args)
        monitor = _monitor(args)
        if args.sync_every is not None or args.workers:
            _import_streams("serve --sync-every", "kafka", "merge")
        _check_group_options(args, model_factory)
    except ValueError as error:
        print(f"advsvm serve: {error}", file=sys.stderr)
        return 2
    options = dict(
        predictions_topic=args.predictions_topic,
        alerts_topic=args.alerts_topic,
        dead_letter_topic=args.dead_letter_topic,
        checkpoint_every=args.checkpoint_every,
        checkpoint_interval=args.checkpoint_interval,
        exit_when_idle=args.exit_when_idle,
        max_message_bytes=args.max_message_bytes,
        width=args.features,
        labels=args.labels,
        session_timeout_ms=args.session_timeout_ms,
        max_poll_records=args.max_poll_records,
        shutdown_timeout=args.shutdown_timeout,
        sync_every=args.sync_every,
        sync_topic=args.sync_topic,
        worker_id=args.worker_id,
        blas_threads=args.blas_threads,
    )
    if args.local_broker:
        (local,) = _import_streams("serve --local-broker", "kafka", "local")
        overrides = dict(options, topic=args.topic, group=args.group,
                         checkpoint_dir=args.checkpoint_dir)
        pair = tuple(args.replay_pair) if args.replay_pair else None
        partitions = args.partitions or (2 * args.workers if args.workers else 1)
        return local.run_local(overrides, model_factory, source=args.replay,
                               target=args.replay_target, limit=args.replay_limit, pair=pair,
                               partitions=partitions,
                               unlabelled_every=args.replay_unlabelled_every,
                               monitor=monitor, workers=args.workers or 0,
                               worker_argv=_worker_argv(args) if args.workers else None)
    missing = [flag for flag, value in [("--bootstrap-servers", args.bootstrap_servers),
                                        ("--topic", args.topic), ("--group", args.group),
                                        ("--checkpoint-dir", args.checkpoint_dir)] if not value]
    if missing:
        print(f"advsvm serve: {', '.join(missing)} required (or use --local-broker)",
              file=sys.stderr)
        return 2
    (service,) = _import_streams("serve", "kafka", "service")
    from river_advsvm.checkpoint import CheckpointError

    try:
        config = service.ServiceConfig(
            bootstrap_servers=args.bootstrap_servers, topic=args.topic, group=args.group,
            checkpoint_dir=args.checkpoint_dir, **options,
        )
        return service.Service(config, model_factory, monitor).run()
    except (ValueError, CheckpointError) as error:
        print(f"advsvm serve: {error}", file=sys.stderr)
        return 2


def _add_serve(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="test-then-train on a Kafka topic, exactly once across crashes",
        description="Consume JSON messages {\"id\", \"x\", \"y\"} from a Kafka topic: predict "
        "each one (published to the predictions topic), learn the labelled ones, dead-letter "
        "the invalid ones, and checkpoint model + offsets atomically so that every message is "
        "learned exactly once even across crashes. A checkpoint in --checkpoint-dir wins over "
        "the model options. See the README for the message schema.",
    )
    where = parser.add_argument_group("where")
    where.add_argument("--bootstrap-servers", metavar="HOST:PORT")
    where.add_argument("--topic", metavar="T", help="input topic")
    where.add_argument("--group", metavar="G", help="consumer group")
    where.add_argument("--checkpoint-dir", metavar="DIR")
    where.add_argument("--predictions-topic", metavar="P")
    where.add_argument("--alerts-topic", metavar="A")
    where.add_argument("--dead-letter-topic", metavar="D")
    service = parser.add_argument_group("service")
    service.add_argument("--checkpoint-every", type=int, default=1000, metavar="N",
                         help="checkpoint after N messages (default 1000)")
    service.add_argument("--checkpoint-interval", type=float, default=10.0, metavar="SECONDS",
                         help="or after this long with progress (default 10)")
    service.add_argument("--exit-when-idle", type=float, metavar="SECONDS",
                         help="stop cleanly after this long without a message")
    service.add_argument("--max-message-bytes", type=int, default=2**20, metavar="BYTES",
                         help="larger messages are dead letters (default 1 MiB)")
    service.add_argument("--features", type=int, metavar="N",
                         help="width of array-form x (default: the first learned array's)")
    service.add_argument("--labels", nargs=2, type=_label, metavar=("NEG", "POS"),
                         help="pin the two classes; other labels are dead letters")
    service.add_argument("--session-timeout-ms", type=int, default=10000, metavar="MS")
    service.add_argument("--max-poll-records", type=int, default=500, metavar="N")
    service.add_argument("--shutdown-timeout", type=float, default=30.0, metavar="SECONDS",
                         help="how long the final flush waits for the broker")
    service.add_argument("--log-level", default="info",
                         choices=["debug", "info", "warning", "error"])
    service.add_argument("--blas-threads", type=int, default=1, metavar="N",
                         help="BLAS threads in the service (default 1: one-sample products gain "
                         "nothing from more; 0 leaves BLAS as it is)")
    group = parser.add_argument_group(
        "scale-out (several workers, one model)",
        "Start N services with the same --group and --sync-every: Kafka splits the partitions "
        "between them and they average their models through a snapshot topic. Needs the "
        "'compact' policy, a numeric --gamma and the same model options everywhere.")
    group.add_argument("--sync-every", type=int, metavar="N",
                       help="be one worker of the group: every N messages average the peers' "
                       "models in and publish this one (replaces --checkpoint-every)")
    group.add_argument("--sync-topic", metavar="S",
                       help="the group's snapshot topic (default <topic>-<group>-snapshots)")
    group.add_argument("--worker-id", metavar="ID",
                       help="this worker's id (default: kept in the checkpoint directory)")
    watch = parser.add_argument_group(
        "robustness monitor (on with --alerts-topic)",
        "Before learning each labelled message, a RobustnessMonitor checks the current model on "
        "it and, on a share of them, attacks it with PGD-10 and certifies it; drift in clean or "
        "robust accuracy, or a clean-robust gap, is published as JSON to the alerts topic.")
    watch.add_argument("--monitor-sample-rate", type=float, default=0.05, metavar="R",
                       help="share of labelled messages attacked (default 0.05)")
    watch.add_argument("--monitor-epsilon", type=float, metavar="EPS",
                       help="radius of the monitor's attack (default: --epsilon if > 0, "
                       "else 8/255)")
    watch.add_argument("--monitor-norm", choices=["l2", "linf"],
                       help="norm of the monitor's attack (default: --norm)")
    model = parser.add_argument_group("model (ignored when a checkpoint exists)")
    model.add_argument("--model", choices=["kernel", "linear"], default="kernel")
    model.add_argument("--epsilon", type=float, default=0.0)
    model.add_argument("--norm", default="l2", choices=["l2", "linf"])
    model.add_argument("--kernel", default="rbf", choices=["rbf", "laplacian"])
    model.add_argument("--gamma", default="scale", help="a positive number or 'scale'")
    model.add_argument("--regularization", type=float, default=1e-4)
    model.add_argument("--step-size", type=float)
    model.add_argument("--bias-step-size", type=float)
    model.add_argument("--schedule", default="constant", choices=["constant", "diminishing"])
    model.add_argument("--budget", type=int, default=1024)
    model.add_argument("--budget-policy", default="compact",
                       choices=["compact", "compact_slot", "truncate", "grow"])
    model.add_argument("--seed", type=int, default=0,
                       help="seed of the random features (default 0: restarts reproduce)")
    local = parser.add_argument_group("local broker (one-command demo)")
    local.add_argument("--local-broker", action="store_true",
                       help="start the bundled broker on 127.0.0.1, create the topics, replay a "
                       "data set into the input topic and serve it until idle")
    local.add_argument("--replay", default="phishing", metavar="SOURCE",
                       help="'phishing' (default), a .parquet file or an .npz with X_train/y_train")
    local.add_argument("--replay-target", default="y", metavar="COLUMN")
    local.add_argument("--replay-limit", type=int, metavar="N")
    local.add_argument("--replay-pair", nargs=2, type=_label, metavar=("A", "B"),
                       help="keep only these two labels (e.g. 1 7 for MNIST)")
    local.add_argument("--replay-unlabelled-every", type=int, default=10, metavar="K",
                       help="send every K-th message without its label (default 10; 0: never)")
    local.add_argument("--partitions", type=int,
                       help="partitions of the input topic (default 1, or 2 per worker)")
    local.add_argument("--workers", type=int, metavar="N",
                       help="run N worker processes that sync (default --sync-every 1000)")
    parser.set_defaults(run=_serve)


def _inspect(args: argparse.Namespace) -> int:
    import json

    if args.sync_topic or args.bootstrap_servers:
        return _inspect_group(args)
    if args.path is None:
        print("advsvm inspect: give a checkpoint DIR, or --bootstrap-servers and --sync-topic",
              file=sys.stderr)
        return 2
    (state,) = _import_streams("inspect", "kafka", "state")
    from river_advsvm.checkpoint import CheckpointError

    try:
        info = state.describe(args.path)
    except FileNotFoundError:
        print(f"advsvm inspect: no checkpoint in {args.path}", file=sys.stderr)
        return 2
    except CheckpointError as error:
        print(f"advsvm inspect: {error}", file=sys.stderr)
        return 2
    print(json.dumps(info, indent=2))
    return 0


def _inspect_group(args: argparse.Namespace) -> int:
    import json

    if not (args.sync_topic and args.bootstrap_servers):
        print("advsvm inspect: a group needs both --bootstrap-servers and --sync-topic",
              file=sys.stderr)
        return 2
    (group,) = _import_streams("inspect", "kafka", "group")
    try:
        snapshots = group.read_group(args.bootstrap_servers, args.sync_topic, timeout=30)
    except Exception as error:  # noqa: BLE001 - broker errors, timeouts
        print(f"advsvm inspect: cannot read {args.sync_topic}: {error!r}", file=sys.stderr)
        return 2
    summary = group.totals(snapshots.values())
    summary["per_worker"] = {
        w: {"samples_learned": s.learned, "messages": s.messages, "snapshot": s.seq,
            "created_at": s.meta["extra"].get("created_at"),
            "offsets": {t: {str(p): o for p, o in parts.items()} for t, parts in s.offsets.items()}}
        for w, s in sorted(snapshots.items())
    }
    model = group.group_model(snapshots.values())
    summary["merged_model"] = None if model is None else {
        "n_learned": model.n_learned, "classes": list(model.classes),
        "params": model._get_params()}
    print(json.dumps(summary, indent=2, default=str))
    return 0


def _add_inspect(subparsers) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="print a service checkpoint's (or a group's) metadata as JSON",
        description="Print the checkpoint of `advsvm serve` (a checkpoint directory or file) as "
        "JSON: samples learned, per-partition offsets, counters, creation time, model. With "
        "--bootstrap-servers and --sync-topic: the group of workers behind that snapshot topic "
        "(totals over the latest snapshot of every worker, each partition's resume point).",
    )
    parser.add_argument("path", nargs="?", metavar="DIR",
                        help="the checkpoint directory (or file)")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT")
    parser.add_argument("--sync-topic", metavar="S", help="a group's snapshot topic")
    parser.set_defaults(run=_inspect)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="advsvm", description="Adversarially robust kernel SVMs for streams."
    )
    subparsers = parser.add_subparsers(required=True, metavar="COMMAND")
    _add_demo(subparsers)
    _add_serve(subparsers)
    _add_inspect(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
