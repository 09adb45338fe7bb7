"""`advsvm serve` and `advsvm inspect --bootstrap-servers`: the command line of the Kafka side.

`river_advsvm.cli` hands every `advsvm serve ...` command line to `main` here (the core never
imports Kafka); `python -m river_advsvm.streams.cli ARGS` is the same as `advsvm serve ARGS`.

"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys

from river_advsvm import bandwidth, inputs, kernels
from river_advsvm.streams.serve_parser import (KERNEL_ONLY, LOCAL_DEFAULTS, LOCAL_ONLY,
                                               build_parser)

__all__ = ["build_inspect_parser", "build_parser", "inspect_group", "inspect_main", "main"]

if importlib.util.find_spec("kafka") is None:  # the kafka extra; river_advsvm.cli says so
    raise ImportError("kafka-python is missing", name="kafka")


def _model_factory(args: argparse.Namespace):
    from river_advsvm import AdvKernelSVM, AdvLinearSVM

    common = dict(epsilon=args.epsilon, norm=args.norm, regularization=args.regularization,
                  schedule=args.schedule)
    if args.step_size is not None:
        common["step_size"] = args.step_size
    if args.bias_step_size is not None:
        common["bias_step_size"] = args.bias_step_size
    if args.max_features is not None:
        common["max_features"] = args.max_features
    if args.model == "linear":
        AdvLinearSVM(**common)  # invalid options fail now, not at the first message
        return lambda: AdvLinearSVM(**common)
    try:
        gamma = args.gamma if args.gamma == "scale" else float(args.gamma)
        bandwidth.check_gamma(gamma)  # (in the command line's words below: it takes no dict)
    except ValueError:
        raise ValueError(f"--gamma must be 'scale' or a number in (0, {kernels.MAX_GAMMA:g}], "
                         f"got {args.gamma!r}") from None
    kernel = dict(kernel=args.kernel, gamma=gamma, budget=args.budget,
                  budget_policy=args.budget_policy, seed=args.seed, adversary=args.adversary)
    if args.adversary_steps is not None:
        kernel["adversary_steps"] = args.adversary_steps
    if args.reprocess is not None:
        kernel["reprocess"] = args.reprocess
    if args.averaging is not None:
        kernel["averaging"] = args.averaging or None  # (0: the last iterate predicts)
    if args.input_bounds is not None:
        kernel["bounds"] = tuple(args.input_bounds)
    if args.dtype is not None:
        kernel["dtype"] = args.dtype
    AdvKernelSVM(**common, **kernel)  # invalid options fail now, not at the first message
    return lambda: AdvKernelSVM(**common, **kernel)


#: Options a worker of `serve --local-broker --workers N` gets from the command line, by dest.
_WORKER_OPTIONS = [
    "checkpoint_every", "checkpoint_interval", "exit_when_idle", "max_message_bytes", "features",
    "labels", "session_timeout_ms", "max_poll_records", "shutdown_timeout", "log_level",
    "sync_every", "blas_threads", "connect_timeout", "model", "epsilon", "norm", "kernel",
    "gamma", "regularization", "step_size", "bias_step_size", "schedule", "budget",
    "budget_policy", "max_features", "seed", "monitor_sample_rate", "monitor_epsilon",
    "monitor_norm", "monitor_bounds", "log_format", "adversary", "adversary_steps",
    "input_bounds", "reprocess", "averaging", "group_model", "basis_refresh_every", "dtype",
]


#: Parameters whose flag is not their name with dashes.
_FLAGS = {"bounds": "--input-bounds", "width": "--features"}


def _named_as_flags(error: ValueError) -> ValueError:
    """A model's or the service's `ValueError` about a parameter, naming the flag that sets
    it: its first word, and words with an underscore, that are options of `serve`."""
    if type(error) is not ValueError:  # (a CheckpointError says what a file holds)
        return error
    dests = {action.dest for action in build_parser()._actions} | set(_FLAGS)

    def flag(match: re.Match) -> str:
        name = match.group(0)
        return _FLAGS.get(name, "--" + name.replace("_", "-")) if name in dests else name

    text = str(error)
    first = re.match(r"[a-z_]+", text)
    head, rest = (flag(first), text[first.end():]) if first else ("", text)
    return ValueError(head + re.sub(r"\b[a-z]+(?:_[a-z]+)+\b", flag, rest))


def _worker_argv(args: argparse.Namespace):
    """The `advsvm serve` command line of one worker, from this command's options."""
    options = []
    for dest in _WORKER_OPTIONS:
        value = getattr(args, dest)
        if value is None:
            continue
        flag = "--" + dest.replace("_", "-")
        if isinstance(value, list):  # --labels, --monitor-bounds
            import json

            # JSON, as `_label` reads it: a string label "1" must not come back as 1.
            options += [flag, *(json.dumps(v) for v in value)]
        else:
            options += [flag, str(value)]

    def argv(bootstrap_servers: str, topic: str, group: str, checkpoint_dir: str,
             worker_id: str) -> list[str]:
        return [sys.executable, "-m", "river_advsvm.streams.cli",
                "--bootstrap-servers", bootstrap_servers, "--topic", topic, "--group", group,
                "--checkpoint-dir", checkpoint_dir, "--worker-id", worker_id, *options]

    return argv


def _check_box_flag(flag: str, box: list | None) -> None:
    """A `LOW HIGH` pair of flag values as `inputs.check_box` takes a box (or not given), in
    the flag's words."""
    try:
        inputs.check_box(box or None)
    except ValueError:
        low, high = box
        raise ValueError(f"{flag}: LOW and HIGH must be finite, LOW below HIGH, "
                         f"got {low:g} {high:g}") from None


def _check_monitor_flags(args: argparse.Namespace) -> None:
    """The monitor's flags, checked whether it is on or not: a bad value waiting in a unit
    file for the day the monitor is turned on (--alerts-topic) is refused now."""
    from river_advsvm.alerts import check_sample_rate
    from river_advsvm.attacks import PGD

    _check_box_flag("--monitor-bounds", args.monitor_bounds)
    try:
        if args.monitor_epsilon is not None:
            PGD(epsilon=args.monitor_epsilon)
    except ValueError as error:
        raise ValueError(f"--monitor-epsilon: {error}") from None
    try:
        check_sample_rate(args.monitor_sample_rate)
    except ValueError as error:
        raise ValueError(f"--monitor-sample-rate: {error}") from None


def _monitor(args: argparse.Namespace, model) -> tuple:
    """The robustness monitor of `serve` and its attack as a function of the model served, or
    `(None, None)`: on when there is an alerts topic."""
    _check_monitor_flags(args)
    if not args.alerts_topic:
        return None, None
    from river_advsvm.attacks import PGD
    from river_advsvm.monitor import RobustnessMonitor

    bounds = tuple(args.monitor_bounds) if args.monitor_bounds else None

    def attack_for(model):
        # Unless given, the threat is the one the model served trains against: a checkpoint's
        # model wins over --epsilon and --norm, so its radius does too.
        epsilon = args.monitor_epsilon
        if epsilon is None:
            epsilon = model.epsilon if model.epsilon > 0 else 8 / 255
        return PGD(epsilon=epsilon, norm=args.monitor_norm or model.norm, bounds=bounds)

    # The service points the monitor at its current model before each update (checkpoint
    # reloads and group merges replace the model object).
    monitor = RobustnessMonitor(model, attack=attack_for(model),
                                sample_rate=args.monitor_sample_rate)
    return monitor, attack_for


def _check_group_options(args: argparse.Namespace, model_factory) -> None:
    """Workers that sync must share their feature pool: `ValueError` otherwise."""
    if args.sync_every is None and not args.workers:
        return
    if args.model != "kernel":
        raise ValueError("workers that sync need --model kernel (AdvKernelSVM)")
    from river_advsvm.streams import group, merge

    if args.worker_id is not None:  # (before the checkpoint directory is made)
        group.check_worker_id(args.worker_id)
    merge.check_mergeable_params(model_factory()._get_params())


def _serve(args: argparse.Namespace) -> int:
    from river_advsvm.streams import logs, metrics, security

    logs.configure(args.log_level, args.log_format)
    settings = security.from_args(args)  # every file read and checked now
    if args.workers and not args.local_broker:
        raise ValueError("--workers starts workers next to a local broker (--local-broker); "
                         "elsewhere start one `advsvm serve --sync-every N` per worker")
    given = [flag for flag, dest in LOCAL_ONLY.items()
             if getattr(args, dest) is not None]
    if given and not args.local_broker:
        raise ValueError(f"{', '.join(given)}: for the bundled broker and its replay "
                         "(--local-broker)")
    for dest, value in LOCAL_DEFAULTS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, value)
    if args.model == "linear":  # (the kernel model's options: refused too, not ignored)
        defaults = build_parser()
        given = [flag for flag, dest in KERNEL_ONLY.items()
                 if getattr(args, dest) != defaults.get_default(dest)]
        if given:
            raise ValueError(f"{', '.join(given)}: for the kernel model (--model kernel), not "
                             "the linear one")
    if args.local_broker and settings != security.SecuritySettings():
        raise ValueError("--local-broker starts a plaintext broker on 127.0.0.1: the security "
                         "settings are for a cluster of your own (--bootstrap-servers)")
    if args.local_broker and args.bootstrap_servers:
        raise ValueError("--local-broker serves the bundled broker it starts on 127.0.0.1: "
                         "--bootstrap-servers is for a cluster of your own")
    if args.workers and args.metrics_port:
        raise ValueError("--metrics-port serves one service: with --workers each worker would "
                         "need a port of its own")
    if args.workers and args.sync_every is None:
        args.sync_every = 1000
    if args.worker_id is not None and args.sync_every is None:
        raise ValueError("--worker-id names one worker of a group: it goes with --sync-every N")
    if not args.liveness_timeout > 0:  # (checked with --metrics-port 0 too: NaN as well)
        raise ValueError(f"--liveness-timeout must be > 0 seconds, got {args.liveness_timeout:g}")
    _check_box_flag("--input-bounds", args.input_bounds)
    try:
        model_factory = _model_factory(args)
    except ValueError as error:
        raise _named_as_flags(error) from None
    monitor, monitor_attack = _monitor(args, model_factory())
    _check_group_options(args, model_factory)
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
        connect_timeout=args.connect_timeout,
        sync_every=args.sync_every,
        sync_topic=args.sync_topic,
        worker_id=args.worker_id,
        group_model=args.group_model,
        basis_refresh_every=args.basis_refresh_every,
        blas_threads=args.blas_threads,
        security=settings,
    )
    if args.local_broker:
        from river_advsvm.streams import local

        overrides = dict(options, topic=args.topic, group=args.group,
                         checkpoint_dir=args.checkpoint_dir)
        pair = tuple(args.replay_pair) if args.replay_pair else None
        partitions = args.partitions or (2 * args.workers if args.workers else 1)
        return local.run_local(overrides, model_factory, source=args.replay,
                               target=args.replay_target, limit=args.replay_limit, pair=pair,
                               partitions=partitions,
                               unlabelled_every=args.replay_unlabelled_every,
                               monitor=monitor, monitor_attack=monitor_attack,
                               workers=args.workers or 0,
                               worker_argv=_worker_argv(args) if args.workers else None,
                               show=args.show, outputs_file=args.outputs_file,
                               observe=lambda s: metrics.from_args(args, s.session.reading))
    missing = [flag for flag, value in [("--bootstrap-servers", args.bootstrap_servers),
                                        ("--topic", args.topic), ("--group", args.group),
                                        ("--checkpoint-dir", args.checkpoint_dir)] if not value]
    if missing:
        raise ValueError(f"{', '.join(missing)} required (or use --local-broker)")
    from river_advsvm.streams import service

    try:
        config = service.ServiceConfig(
            bootstrap_servers=args.bootstrap_servers, topic=args.topic, group=args.group,
            checkpoint_dir=args.checkpoint_dir, **options,
        )
    except ValueError as error:
        raise _named_as_flags(error) from None
    served = service.Service(config, model_factory, monitor, monitor_attack)
    # Up before the service connects: /healthz and /readyz answer during start-up too.
    server = metrics.from_args(args, served.session.reading)
    try:
        return served.run()
    finally:
        if server is not None:
            server.stop()


def inspect_group(args: argparse.Namespace) -> int:
    """`advsvm inspect --bootstrap-servers B --sync-topic S`: a group's totals as JSON.

    `args` may carry the security flags (`inspect_main` parses them); without them the
    clients connect in plaintext."""
    import json

    from river_advsvm.streams import security

    if not (args.sync_topic and args.bootstrap_servers):
        print("advsvm inspect: a group needs both --bootstrap-servers and --sync-topic",
              file=sys.stderr)
        return 2
    from river_advsvm.streams import config, group, state

    if not config._is_topic_name(args.sync_topic):  # one the client cannot encode hung it
        print(f"advsvm inspect: --sync-topic {args.sync_topic!r:.60} is not a Kafka topic name: "
              f"1 to {state.MAX_NAME} of A-Z a-z 0-9 . _ -", file=sys.stderr)
        return 2
    try:
        settings = (security.from_args(args) if hasattr(args, "security_protocol")
                    else security.SecuritySettings())
    except security.SecurityError as error:
        print(f"advsvm inspect: {error}", file=sys.stderr)
        return 2
    from river_advsvm.streams.connection_check import (ConnectionCheckError, check_connection,
                                                       explain)

    try:
        # The clients would only say that they could not bootstrap; the check says why.
        check_connection(args.bootstrap_servers, settings, timeout=10)
        snapshots = group.read_group(args.bootstrap_servers, args.sync_topic, timeout=30,
                                     security=settings, must_exist=True)
    except (ConnectionCheckError, ValueError) as error:
        print(f"advsvm inspect: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - broker errors, timeouts
        print(f"advsvm inspect: cannot read {args.sync_topic}: "
              f"{explain(error, args.bootstrap_servers, settings)}", file=sys.stderr)
        return 2
    summary = group.totals(snapshots.values())
    summary["per_worker"] = {
        w: {"samples_learned": s.learned, "consumed": s.consumed, "snapshot": s.seq,
            "created_at": s.meta["extra"].get("created_at"),
            "offsets": {t: {str(p): o for p, o in parts.items()} for t, parts in s.offsets.items()},
            **({"left_out": summary["left_out"][w]} if w in summary["left_out"] else {})}
        for w, s in sorted(snapshots.items())
    }
    try:
        model = group.group_model(snapshots.values())
    except (ValueError, KeyError, TypeError) as error:  # CheckpointError included
        # The group's state is shown all the same: the snapshots that would not average are
        # the operator's lead.
        model = None
        summary["merged_model_error"] = ("the snapshots do not average: "
                                         + " ".join(str(error).split()))
    summary["merged_model"] = None if model is None else {
        "n_learned": model.n_learned, "classes": list(model.classes),
        "params": model._get_params()}
    print(json.dumps(summary, indent=2, default=str))
    return 0


def build_inspect_parser() -> argparse.ArgumentParser:
    """The parser of `advsvm inspect --bootstrap-servers B --sync-topic S` with the security
    flags of `serve`."""
    from river_advsvm.streams import security
    from river_advsvm.streams.serve_parser import _Parser

    parser = _Parser(prog="advsvm inspect", description=(
        "Print the group of workers behind a snapshot topic as JSON: totals over the latest "
        "snapshot of every worker, each partition's resume point, the merged model."))
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT", required=True,
                        help="the Kafka brokers of the group, comma-separated")
    parser.add_argument("--sync-topic", metavar="S", required=True,
                        help="the group's snapshot topic")
    parser.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    security.add_arguments(parser)
    return parser


def inspect_main(argv: list[str] | None = None) -> int:
    """`advsvm inspect --bootstrap-servers B --sync-topic S [security flags]`; the exit
    status (0, or 2 with one line on stderr)."""
    parser = build_inspect_parser()
    args, extra = parser.parse_known_args(argv)
    directories = [arg for arg in extra if not arg.startswith("-")]
    if directories:  # (argparse would call it an unrecognized argument)
        parser.error(f"give a checkpoint directory ({directories[0]}) or --bootstrap-servers "
                     "and --sync-topic, not both")
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return inspect_group(args)


def main(argv: list[str] | None = None) -> int:
    """Run `advsvm serve` with `argv` (the arguments after `serve`); returns the exit status
    (see `advsvm serve --help`). Every error is one line on stderr (`--debug`: and its
    traceback)."""
    from river_advsvm.streams import lifecycle, logs

    args = build_parser().parse_args(argv)
    try:
        return _serve(args)
    except KeyboardInterrupt:  # a second Ctrl-C, or one before the service handles them
        print(logs.fatal_line("advsvm serve", "interrupted: stopped at once, without a final "
                              "checkpoint (the last one stays valid)", args.log_format, 130),
              file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - every error is one line
        if args.debug:
            import traceback

            traceback.print_exc()
        status = lifecycle.exit_status(error)
        if status == lifecycle.UNEXPECTED:
            return _fail(error, status, args.log_format,
                         prefix=f"unexpected {type(error).__name__}: ",
                         suffix=" (run with --debug for the traceback)")
        return _fail(error, status, args.log_format)
    finally:
        logs.reset()  # a program that ran `main` keeps its own logging afterwards


def _fail(error: BaseException, status: int, log_format: str, prefix: str = "",
          suffix: str = "") -> int:
    from river_advsvm.streams import logs

    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        text = f"{error.filename}: {error.strerror}"
    elif isinstance(error, MemoryError):  # (a restart repeats it unless something changes)
        text = ("out of memory" + (f" ({text})" if str(error).strip() else "")
                + ": give the service more memory, or lower --budget or --max-features")
    print(logs.fatal_line("advsvm serve", f"{prefix}{text}{suffix}", log_format, status),
          file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
