"""The `advsvm` command: argument parsing only; the work is done by the library.

Every error is one line on stderr and exit status 2 (`--debug` adds the traceback); a closed
standard output (`advsvm inspect DIR | head`) ends the command quietly with status 141, as
SIGPIPE ends other Unix tools; Ctrl-C ends it with status 130.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import warnings


PLOT_NAME = "advsvm-demo.png"
#: Where `advsvm demo` writes its plot unless told otherwise (git-ignored in this repository).
DEFAULT_OUT = "advsvm-output"
#: Which extra installs a module the commands may import lazily.
_EXTRAS = {"sklearn": "demo", "matplotlib": "demo", "tqdm": "demo", "pandas": "parquet",
           "pyarrow": "parquet", "kafka": "kafka", "threadpoolctl": "demo"}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (its default prints the usage first)."""

    def error(self, message: str):
        message = message.replace("\r", "\\r").replace("\n", "\\n")  # echoed user text
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _shown(text: str) -> str:
    """A command-line value as the user typed it, quoted when it holds odd characters."""
    return text if text.isprintable() and text.strip() == text and text else repr(text)


def _number(text: str, accept, condition: str) -> float:
    """A finite float for which `accept(value)` holds; `condition` says which, for the error."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and accept(value)):
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number {condition}")
    return value


def _positive(text: str) -> float:
    return _number(text, lambda v: v > 0, "> 0")


def _non_negative(text: str) -> float:
    return _number(text, lambda v: v >= 0, ">= 0")


def _rate(text: str) -> float:
    return _number(text, lambda v: 0 < v <= 1, "in (0, 1]")


def _fraction(text: str) -> float:
    return _number(text, lambda v: 0 <= v < 1, "in [0, 1)")


def user_path(text: str) -> str:
    """An argparse type: a path with `~` expanded (a shell leaves `--out=~/data` as it is)."""
    return os.path.expanduser(text)


def whole_numbers(low: int, high: int | None = None):
    """An argparse type: whole numbers >= `low` (and <= `high`; argparse names the flag in its
    error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number >= {low}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is more than {high}")
        return value

    return parse


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
    try:
        for X, y in parquet.iter_batches(path, target=target):
            blocks.append(X.to_numpy(dtype=float))
            labels += y.tolist()
    except KeyError as error:  # a column that is not in the file
        raise ValueError(f"{path}: {error.args[0]}; name the label column with --target"
                         ) from None
    if not blocks:
        raise ValueError(f"{path} holds no rows")
    from river_advsvm.demo import first_bad_label

    bad = first_bad_label(labels)  # a null (NaN once in pandas), a list, a timestamp
    if bad is not None:
        raise ValueError(f"{path}: row {bad[0]} of the label column {target!r}: {bad[1]}")
    X, y = np.vstack(blocks), np.array(labels)
    split = len(y) - int(round(len(y) * test_fraction))
    if split < 1:
        raise ValueError(f"--test-fraction {test_fraction} leaves nothing to stream")
    if split == len(y):
        return X, y, None, None
    return X[:split], y[:split], X[split:], y[split:]


def _spells(text: str, label) -> bool:
    """Whether `text` from the command line names `label` (3 for 3 or 3.0, True for True or
    true, a string for itself)."""
    import json

    if text == str(label) or text == json.dumps(label):
        return True
    if isinstance(label, (int, float)) and not isinstance(label, bool):
        try:
            return float(text) == label
        except ValueError:
            return False
    return False


def _resolve_pair(texts, y) -> tuple:
    """The two labels of `y` that `--pair` names: each must name exactly one label present."""
    import numpy as np

    present = np.unique(y).tolist()
    shown = sorted(present, key=str)[:20]
    _check_two_labels(present)
    if texts is None:
        if len(present) == 2:
            return tuple(present)
        raise ValueError(f"the data has {len(present)} labels; choose two with --pair A B, or "
                         f"stream them all with --all (labels present: {shown})")
    pair = []
    for text in texts:
        matches = [label for label in present if _spells(text, label)]
        if not matches:
            raise ValueError(f"no sample has label {text}; labels present: {shown}")
        if len(matches) > 1:
            raise ValueError(f"--pair {text} names several labels: {matches}")
        pair.append(matches[0])
    if pair[0] == pair[1]:
        raise ValueError(f"--pair needs two different labels, got {texts[0]} and {texts[1]}")
    return tuple(pair)


def _check_two_labels(present: list) -> None:
    """A stream of one label has nothing to tell apart, one-vs-rest (`--all`) included."""
    if len(present) < 2:
        raise ValueError(f"the data has 1 label ({present[0]}); a model needs two to tell apart")


def _demo_data(args: argparse.Namespace):
    """`(X, y, X_test, y_test, title)` for `advsvm demo`, inputs scaled into [0, 1]."""
    from river_advsvm import AdvKernelSVM, demo

    parquet = args.data is not None and (args.data.endswith((".parquet", ".pq"))
                                         or os.path.isdir(args.data))
    for flag, value in (("--target", args.target), ("--test-fraction", args.test_fraction)):
        if value is not None and not parquet:
            raise ValueError(f"{flag} applies to a Parquet file (--data FILE.parquet) only")
    if args.data is None:
        X, y = demo.load_digits_all(args.seed)
        X_test = y_test = None
        source, scaling = "scikit-learn digits", "pixels / 16"
        texts = ("1", "7") if args.pair is None else args.pair
    else:
        path = args.data
        if path.endswith(".npz"):
            X, y, X_test, y_test = demo.load_npz(path)
        elif parquet:
            X, y, X_test, y_test = _read_parquet(
                path, "y" if args.target is None else args.target,
                0.2 if args.test_fraction is None else args.test_fraction)
        else:
            raise ValueError(f"--data {path}: expected an .npz archive or a .parquet file")
        source, scaling = os.path.basename(os.path.normpath(path)), None
        texts = args.pair
    if args.all:
        _check_two_labels(list(set(y.tolist())))
        what = "ten classes" if args.data is None else f"{len(set(y.tolist()))} classes"
        pair = f"{what}, one-vs-rest"
    else:
        first, second = _resolve_pair(texts, y)
        X, y = demo.select_labels(X, y, (first, second))
        if X_test is not None:
            kept = [label in (first, second) for label in y_test.tolist()]
            if not any(kept):  # (the held-out table would vanish without a word)
                raise ValueError(f"{source}: no sample of the test set is labelled {first!r} "
                                 f"or {second!r}")
            X_test, y_test = X_test[kept], y_test[kept]
        pair = f"{first} vs {second}"
    most = AdvKernelSVM().max_features  # (the demo's models take their default)
    if X.shape[1] > most:
        raise ValueError(f"{source}: its samples hold {X.shape[1]:,} inputs, more than the "
                         f"demo's models learn ({most:,}: max_features)")
    if scaling is None:
        X, X_test, scaling = demo.to_unit_box(X, X_test)
    if args.max_samples:
        X, y = X[: args.max_samples], y[: args.max_samples]
    title = f"{source}, {pair}: {len(y):,} samples streamed once ({scaling})"
    return X, y, X_test, y_test, title


def _demo(args: argparse.Namespace) -> int:
    from river_advsvm import demo

    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out {args.out} is not a directory")
    if args.all and args.pair is not None:
        raise ValueError("--pair and --all exclude each other")
    with _one_blas_thread():
        X, y, X_test, y_test, title = _demo_data(args)
        # Made (and checked) once the data is, before the stream runs: the plot goes there
        # at the end.
        try:
            os.makedirs(args.out, exist_ok=True)
        except OSError as error:
            raise ValueError(f"--out {args.out}: cannot make the directory "
                             f"({error.strerror or error})") from None
        if not os.access(args.out, os.W_OK | os.X_OK):
            raise ValueError(f"--out {args.out}: the directory is not writable")
        # (before the progress bars, which name the models only)
        print(f"\n{title}\n", flush=True)
        result = demo.run_demo(
            X, y, X_test, y_test, title=title, multiclass=args.all, epsilon=args.epsilon,
            train_epsilon=args.train_epsilon,
            norm=args.norm, sample_rate=args.sample_rate, seed=args.seed,
            progress=not args.no_progress, test_samples=args.test_samples,
        )
        path = demo.plot(result, os.path.join(args.out, PLOT_NAME))

    import textwrap

    how = "black box, through predict_proba" if result.multiclass else "white box"
    ends = [run.warm_up_end for run in result.runs]
    if None in ends:
        warm_up = (" The stream ended during the models' warm-up (gamma='scale' fits the kernel "
                   "width on their first samples): nothing was attacked.")
    elif any(ends):
        warm_up = (f" The first {max(ends):,} samples are the models' warm-up (gamma='scale' fits "
                   f"the kernel width on them; meanwhile the models predict by a provisional "
                   f"vote): the monitors attack none of them, and the plot shades them.")
    else:
        warm_up = ""
    print(textwrap.fill(
        f"Test, then train, one sample at a time. Each model has a RobustnessMonitor: PGD-10 "
        f"({result.threat}, {how}) on {result.sample_rate:.0%} of the samples, certificates at "
        f"the same radius (a proof, so a lower bound on robust accuracy), ADWIN on the clean "
        f"and robust error, a gap alert above 20%."
        f"{warm_up} Accuracies are over the whole stream (progressive validation), robust and "
        f"certified ones over the attacked samples; samples/s include the monitor.", width=100))
    print()
    rows = demo.table_rows(result)
    print(demo.format_table(rows))
    if all(row["attacked"] and not row["certified %"] for row in rows):
        print()
        print(textwrap.fill(
            f"note, certified 0%: at {result.threat} the certificate (a proof from the kernel's "
            "smoothness, sound but not tight) holds for none of the attacked samples; at a "
            "smaller radius it proves more (--epsilon).", width=100, subsequent_indent="  "))
    held_out = demo.held_out_rows(result)
    if held_out:
        print("\nHeld-out test set after the stream (evaluate.robustness_report):\n")
        print(demo.format_table(held_out))
        notes = demo.held_out_notes(result)
        if notes:
            print()
        for note in notes:
            print(textwrap.fill(f"note, {note}", width=100, subsequent_indent="  "))
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
    data.add_argument("--pair", nargs=2, metavar=("A", "B"),
                      help="the two labels to separate, as they print (1 7, or False True); "
                      "default: 1 7 on the digits, the data's two labels if it has two")
    data.add_argument("--all", action="store_true",
                      help="every label, one-vs-rest (river_advsvm.multiclass.OneVsRest); "
                      "attacked black box through predict_proba, certified by the smallest "
                      "radius of the binary models")
    data.add_argument("--data", metavar="PATH", type=user_path,
                      help="an .npz with X_train, y_train (and X_test, y_test: held out) or a "
                      "Parquet file (needs the parquet extra), read whole into memory; "
                      "streamed in row order, inputs scaled into [0, 1] (non-negative data / "
                      "its maximum: pixels / 255)")
    data.add_argument("--target", metavar="COLUMN",
                      help="label column of a Parquet file (default: y)")
    data.add_argument("--test-fraction", type=_fraction, metavar="F",
                      help="a Parquet file's last F of rows, 0 <= F < 1, are held out as the "
                      "test set (default: 0.2; 0: none)")
    data.add_argument("--max-samples", type=whole_numbers(1), metavar="N",
                      help="stream only the first N (N >= 1)")
    data.add_argument("--test-samples", type=whole_numbers(0), default=1000, metavar="N",
                      help="held-out samples evaluated after the stream (default: 1000)")
    threat = parser.add_argument_group("threat model and monitor")
    threat.add_argument("--epsilon", type=_positive, default=1.0,
                        help="attack radius, > 0: the monitors attack and certify at it "
                        "(default: 1.0)")
    threat.add_argument("--train-epsilon", type=_non_negative, metavar="EPS",
                        help="radius the adversarial model trains against (default: "
                        "--epsilon, the radius the monitors attack with)")
    threat.add_argument("--norm", default="l2", choices=["l2", "linf"],
                        help="norm of the attack ball (default: l2)")
    threat.add_argument("--sample-rate", type=_rate, metavar="RATE",
                        help="share of the stream the monitors attack, 0 < RATE <= 1 (default: "
                        "all of it up to 2,000 samples, then about 2,000; with --all about 30, "
                        "as a black-box PGD-10 costs ~0.5 s on a 2-core AMD EPYC)")
    parser.add_argument("--seed", type=whole_numbers(0), default=0,
                        help="seed of the digits' shuffle, the models and the sampling")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", type=user_path,
                        help=f"where the plot goes, created if missing (default: {DEFAULT_OUT} "
                        "in the current directory)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(run=_demo)


_STREAMS_MISSING = (
    "advsvm {command} needs the optional {extra} extra ({module} is missing): install "
    "river-advsvm with it (in a clone: pip install -e '.[{extra}]')"
)


def _import_streams(command: str, extra: str, *modules: str):
    """Import `streams` modules lazily: the core never depends on them."""
    import importlib

    try:
        return [importlib.import_module(f"river_advsvm.streams.{m}") for m in modules]
    except ImportError as error:
        print(_STREAMS_MISSING.format(command=command, module=error.name, extra=extra),
              file=sys.stderr)
        raise SystemExit(2) from None


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
        where = state.checkpoint_path(args.path) if os.path.isdir(args.path) else args.path
        if os.path.islink(where):  # (a link whose target is gone)
            print(f"advsvm inspect: {where} is a link to {os.readlink(where)}, which does not "
                  "exist", file=sys.stderr)
        elif not os.path.exists(args.path):
            print(f"advsvm inspect: {args.path}: no such file or directory", file=sys.stderr)
        else:
            print(f"advsvm inspect: no checkpoint in {args.path}", file=sys.stderr)
        return 2
    except CheckpointError as error:
        print(f"advsvm inspect: {error}", file=sys.stderr)
        return 2
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as error:
        # Well-formed JSON of the wrong shape (a list where an object belongs, a count too
        # large for the accuracy's division, ...).
        print(f"advsvm inspect: {args.path}: invalid service metadata "
              f"({type(error).__name__}: {_one_line(error)})", file=sys.stderr)
        return 2
    print(json.dumps(info, indent=2, default=str))
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
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT",
                        help="with --sync-topic: the Kafka brokers of the group; the security "
                        "flags of serve apply too (advsvm inspect --bootstrap-servers B "
                        "--sync-topic S --help lists them)")
    parser.add_argument("--sync-topic", metavar="S", help="a group's snapshot topic")
    parser.set_defaults(run=_inspect)


def _data(args: argparse.Namespace) -> int:
    from river_advsvm import data

    directory = args.out or data.default_dir()
    for name in args.names:
        for path in data.fetch(name, directory, force=args.force):
            print(path)
    return 0


def _add_data(subparsers) -> None:
    parser = subparsers.add_parser(
        "data",
        help="download the benchmark data sets (MNIST, Fashion-MNIST, CIFAR-10)",
        description="Manage the data sets the benchmarks read.",
    )
    commands = parser.add_subparsers(required=True, metavar="ACTION")
    fetch = commands.add_parser(
        "fetch",
        help="download data sets and write the .npz files the benchmarks read",
        description="Download data sets from their public sources, check their SHA-256 and "
        "write, in DIR: mnist.npz, fashion-mnist.npz (uint8 X_train (n, 784), y_train, "
        "X_test, y_test) and cifar10.npz plus cifar10_pairs.npz (classes 1, 5, 7, 9 with their "
        "indices into the original sets). The downloads are deleted once converted.",
    )
    fetch.add_argument("names", nargs="+", metavar="NAME",
                       choices=["mnist", "fashion-mnist", "cifar10"],
                       help="mnist, fashion-mnist or cifar10")
    fetch.add_argument("--out", metavar="DIR", type=user_path,
                       help="where the .npz files go (default: $ADVSVM_DATA, or "
                       "~/.cache/river-advsvm)")
    fetch.add_argument("--force", action="store_true",
                       help="download and write again even if the files are there")
    fetch.set_defaults(run=_data, command="data fetch")


def build_parser() -> argparse.ArgumentParser:
    from river_advsvm import __version__

    parser = _Parser(
        prog="advsvm", description="Adversarially robust kernel SVMs for streams."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an error, not only its one-line message")
    # (Not required here: `main` says a command is missing after naming unknown options.)
    subparsers = parser.add_subparsers(metavar="COMMAND")
    _add_demo(subparsers)
    # Parsed by river_advsvm.streams.cli: `main` hands `serve ...` over before this.
    subparsers.add_parser(
        "serve", add_help=False,
        help="test-then-train on a Kafka topic, exactly once across crashes (advsvm serve --help)")
    _add_inspect(subparsers)
    _add_data(subparsers)
    for command, subparser in subparsers.choices.items():
        subparser.set_defaults(command=command)
        # Also after the command; SUPPRESS keeps `advsvm --debug COMMAND` working.
        subparser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                               help="show the traceback of an error")
    parser.commands = subparsers.choices
    return parser


def _one_line(error: BaseException) -> str:
    if isinstance(error, KeyError) and len(error.args) == 1 and isinstance(error.args[0], str):
        text = error.args[0]  # str(KeyError) is the repr of its message
    elif isinstance(error, OSError) and error.strerror and error.filename is not None:
        text = f"{error.filename}: {error.strerror}"
    elif isinstance(error, FileNotFoundError) and len(error.args) == 1:
        text = f"{error.args[0]}: No such file or directory"
    else:
        text = str(error)
    return " ".join(text.split()) or type(error).__name__


def _error_message(error: Exception) -> str:
    """One line for the user: the message of an error in what they gave (a bad value, file or
    input, `CheckpointError` and `InvalidInput` included), else what failed."""
    if isinstance(error, ModuleNotFoundError) and error.name:
        module = error.name.split(".")[0]
        extra = _EXTRAS.get(module)
        how = (f": install river-advsvm with its {extra} extra (in a clone: pip install -e "
               f"'.[{extra}]')") if extra else ""
        return f"this needs the module {module}, which is not installed{how}"
    if isinstance(error, (OSError, ValueError, KeyError)):
        return _one_line(error)
    return (f"unexpected {type(error).__name__}: {_one_line(error)} (run with --debug for the "
            "traceback)")


def _serve(argv: list[str]) -> int | None:
    """`advsvm [--debug] serve ...` and `advsvm inspect --bootstrap-servers ...` are parsed and
    run by `river_advsvm.streams.cli` (the kafka extra); None for any other command."""
    position = next((i for i, arg in enumerate(argv) if not arg.startswith("-")), None)
    if position is None or set(argv[:position]) - {"--debug"}:
        return None
    rest = argv[position + 1:]
    given = {arg.split("=")[0] for arg in rest}
    if argv[position] == "inspect" and "--bootstrap-servers" in given:
        (streams_cli,) = _import_streams("inspect --bootstrap-servers", "kafka", "cli")
        return streams_cli.inspect_main(rest)
    if argv[position] != "serve":
        return None
    # (--local-broker needs the broker too: the local extra, which holds the kafka one)
    extra = "local" if "--local-broker" in given else "kafka"
    (streams_cli,) = _import_streams("serve", extra, "cli")
    return streams_cli.main(argv[:position] + rest)


def _escape_what_the_output_cannot_encode() -> None:
    """An output in a legacy encoding (a file on Windows: cp1252; PYTHONIOENCODING=ascii) shows
    'ε' as '\\u03b5', as Python's stderr does, instead of failing the command at its first one."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def _warning_line(command: str):
    """`warnings.showwarning` for a command: one line, `advsvm COMMAND: warning: ...`, where
    Python prints the file and line that warned (the script `advsvm`) and its source. The
    package's own kinds keep their names (`CollapseWarning: ...`), as the service logs them."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = " ".join(str(message).split())
        kind = "warning" if category is UserWarning else category.__name__
        print(f"advsvm {command}: {kind}: {text}", file=sys.stderr if file is None else file)

    return show


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _escape_what_the_output_cannot_encode()
    code = _serve(argv)
    if code is not None:
        return code
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if not hasattr(args, "run"):  # no command; an unknown option is named first
            parser.error(f"unrecognized arguments: {' '.join(extra)}" if extra else
                         "the following arguments are required: COMMAND")
        if extra:  # named by the command's parser ('data', for 'data fetch')
            command = parser.commands[args.command.split()[0]]
            command.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exit_:
        if exit_.code:  # a usage error, already printed in one line
            return exit_.code
        raise  # --help, --version
    try:
        with warnings.catch_warnings():  # (restores `showwarning` after the command)
            if not args.debug:
                warnings.showwarning = _warning_line(args.command)
            code = args.run(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly. Python would flush stdout again at
        # exit and complain, so point it at /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print(f"advsvm {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - every error is one line, with --debug the rest
        if args.debug:
            import traceback

            traceback.print_exc()
        print(f"advsvm {args.command}: {_error_message(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
