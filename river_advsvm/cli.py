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


def _inspect(args: argparse.Namespace) -> int:
    import json

    if args.sync_topic or args.bootstrap_servers:
        (streams_cli,) = _import_streams("inspect --bootstrap-servers", "kafka", "cli")
        return streams_cli.inspect_group(args)
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
    subparsers.add_parser(  # parsed by streams.cli: `main` hands `serve ...` over before this
        "serve", add_help=False,
        help="test-then-train on a Kafka topic, exactly once across crashes (advsvm serve --help)")
    _add_inspect(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["serve"]:
        (streams_cli,) = _import_streams("serve", "kafka", "cli")
        return streams_cli.main(argv[1:])
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
