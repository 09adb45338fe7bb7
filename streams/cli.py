"""`advsvm serve` and `advsvm inspect --bootstrap-servers`: the command line of the Kafka side.

`river_advsvm.cli` hands every `advsvm serve ...` command line to `main` here (the core never
imports Kafka); `python -m streams.cli ARGS` is the same as `advsvm serve ARGS`.

"""

from __future__ import annotations

import argparse
import importlib.util
import sys

from river_advsvm.cli import _label

__all__ = ["build_parser", "inspect_group", "main"]

if importlib.util.find_spec("kafka") is None:  # the kafka extra; river_advsvm.cli says so
    raise ImportError("kafka-python is missing", name="kafka")


class _Parser(argparse.ArgumentParser):
    pass


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
        return [sys.executable, "-m", "streams.cli",
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
        from streams import local
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
    from streams import service
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


def build_parser() -> argparse.ArgumentParser:
    """The parser of `advsvm serve`."""
    parser = _Parser(
        prog="advsvm serve",
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
    return parser


def inspect_group(args: argparse.Namespace) -> int:
    """`advsvm inspect --bootstrap-servers B --sync-topic S`: a group's totals as JSON."""
    import json

    if not (args.sync_topic and args.bootstrap_servers):
        print("advsvm inspect: a group needs both --bootstrap-servers and --sync-topic",
              file=sys.stderr)
        return 2
    from streams import group
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


def main(argv: list[str] | None = None) -> int:
    """Run `advsvm serve` with `argv` (the arguments after `serve`); returns the exit status."""
    args = build_parser().parse_args(argv)
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
