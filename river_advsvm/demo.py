"""The main job: natural vs adversarially trained AdvKernelSVM on a stream, each under a monitor.

`run_demo` streams samples through two models side by side, test then train (progressive
validation under attack, `evaluate.iter_progressive_robust_val`), each watched by a
`monitor.RobustnessMonitor` that attacks a share of the samples with PGD-10 and certifies them.
It returns the numbers; `table_rows` / `format_table` make the table and `plot` the figure
(matplotlib, imported there only). `advsvm demo` (`river_advsvm.cli`) wires them together.

The models fit their kernel width on their first samples (`gamma='scale'`, `warm_up`); until
then they predict by a provisional vote, which has no margin worth attacking. The monitors
attack nothing during that warm-up, and the plot shades it, so that its end does not read as
drift.

Data: scikit-learn's digits by default (`load_digits_pair`, `load_digits_all`), or arrays the
caller loaded. Inputs must lie in [0, 1] (the attacks' box): `to_unit_box` scales them.

"""

from __future__ import annotations

import dataclasses
import math
import typing

import numpy as np

from river_advsvm import npz
from river_advsvm import progress as progress_
from river_advsvm.attacks import PGD
from river_advsvm.monitor import RobustnessMonitor
from river_advsvm.svm import AdvKernelSVM

__all__ = [
    "AfterWarmUpMonitor",
    "DemoResult",
    "ModelRun",
    "auto_sample_rate",
    "format_table",
    "held_out_notes",
    "held_out_rows",
    "load_digits_all",
    "load_digits_pair",
    "load_npz",
    "plot",
    "run_demo",
    "select_labels",
    "table_rows",
    "to_unit_box",
    "warming_up",
]

#: The threat model of the adversarial model and of the monitors' PGD: an L2 ball of radius 1 on
#: pixels scaled to [0, 1]. On digits (8 x 8, pixels / 16) that is, e.g., 4 pixels changed by
#: half their range; on MNIST (28 x 28) a faint stroke.
DEFAULT_EPSILON = 1.0
DEFAULT_NORM = "l2"
#: `auto_sample_rate` aims at about this many attacked samples per model: white-box PGD-10 costs
#: ~3 ms a sample (d = 64), black-box PGD-10 on a ten-class one-vs-rest model ~0.5 s.
WHITE_BOX_ATTACKS = 2000
BLACK_BOX_ATTACKS = 30
#: Checkpoints (points of the plot) per run.
CHECKPOINTS = 250


# -- data -----------------------------------------------------------------------------------------


def load_digits_pair(first: int = 1, second: int = 7, seed: int = 0):
    """scikit-learn's bundled digits for two classes, pixels / 16, shuffled with `seed`."""
    X, y = load_digits_all(seed)
    return select_labels(X, y, (first, second))


def load_digits_all(seed: int = 0):
    """All 1,797 of scikit-learn's bundled digits, pixels / 16, shuffled with `seed`."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(y))
    return X[order] / 16.0, y[order]


def select_labels(X: np.ndarray, y: np.ndarray, labels: typing.Sequence):
    """The rows of `(X, y)` whose label is one of `labels`, in their order; every one of the
    labels must occur."""
    present = set(np.unique(y).tolist())
    missing = [label for label in labels if label not in present]
    if missing:
        raise ValueError(f"no sample has label {missing[0]!r}; labels present: "
                         f"{sorted(present, key=str)[:20]}")
    mask = np.isin(y, list(labels))
    return X[mask], y[mask]


def load_npz(path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """`X_train, y_train, X_test, y_test` of an `.npz` archive (test arrays optional), each
    image flattened to a row."""
    arrays = npz.read_arrays(path, ["X_train", "y_train"], optional=["X_test", "y_test"],
                             inputs=["X_train", "X_test"])
    X_train, y_train = arrays["X_train"], arrays["y_train"]
    X_test, y_test = arrays.get("X_test"), arrays.get("y_test")
    X_train = npz.flat_samples(path, X_train, y_train, "X_train", "y_train")
    if not len(X_train):
        raise ValueError(f"{path}: X_train holds no samples")
    _check_labels(path, "train", y_train)
    if X_test is not None:
        X_test = npz.flat_samples(path, X_test, y_test, "X_test", "y_test")
        _check_labels(path, "test", y_test)
        if X_test.shape[1] != X_train.shape[1]:
            raise ValueError(f"{path}: X_test has {X_test.shape[1]} inputs per sample, "
                             f"X_train {X_train.shape[1]}")
    return X_train, y_train, X_test, y_test


def _check_labels(path, part: str, y: np.ndarray) -> None:
    """Every value of `y` is a label the models take: a NaN would otherwise be a label of its
    own, never equal to itself."""
    bad = first_bad_label(y.tolist())
    if bad is not None:
        raise ValueError(f"{path}: row {bad[0]} of y_{part}: {bad[1]}")


def first_bad_label(labels: list):
    """`(row, error)` of the first value that is no label the models take (a null, a NaN, a
    list, a timestamp...), or None: how data files are checked before a demo streams them."""
    from river_advsvm.inputs import InvalidInput
    from river_advsvm.labels import as_label

    for row, label in enumerate(labels):
        if label is None:
            return row, ("no label (a null): the demo learns every row it streams, so each "
                         "needs one")
        try:
            as_label(label)
        except InvalidInput as error:
            return row, error
    return None


def check_finite(X: np.ndarray, what: str = "the inputs") -> None:
    """`ValueError` unless every value of `X` is finite."""
    if X.dtype.kind not in "fc":
        return
    finite = np.isfinite(X)
    n = int(X.size - np.count_nonzero(finite))
    if n:
        values = "1 value that is" if n == 1 else f"{n} values that are"
        first = np.argwhere(~finite)[0].tolist()  # (rows and columns counted from 0)
        where = (f"row {first[0]}, column {first[1]}" if len(first) == 2
                 else f"index {tuple(first)}")
        raise ValueError(f"{what} hold {values} NaN or infinite (the first at {where}, "
                         "counting from 0); the models learn finite numbers only")


def to_unit_box(X_train: np.ndarray, X_test: np.ndarray | None = None):
    """Inputs scaled into [0, 1] with the training stream's range, and how.

    Data already in [0, 1] is kept; non-negative data is divided by its maximum (pixels / 255
    for 8-bit images); anything else is min-max scaled. Test values are clipped to the box.
    """
    X_train = np.asarray(X_train, dtype=np.float64)
    if X_train.ndim != 2 or not X_train.size:
        raise ValueError(f"no inputs to learn from: the samples have shape {X_train.shape}")
    for what, X in (("the inputs", X_train), ("the test inputs", X_test)):
        if X is not None:  # (one NaN would make every scaled value NaN: said here, where it is)
            check_finite(X, what)
    lo, hi = float(X_train.min()), float(X_train.max())
    if lo >= 0.0 and hi <= 1.0:
        scale, shift, how = 1.0, 0.0, "inputs already in [0, 1]"
    elif lo >= 0.0:
        scale, shift, how = hi, 0.0, f"inputs / {hi:g}"
    else:  # (constant inputs, hi == lo, all become 0)
        scale, shift, how = (hi - lo) or 1.0, lo, f"inputs min-max scaled from [{lo:g}, {hi:g}]"

    def scaled(X):
        return None if X is None else np.clip((np.asarray(X, np.float64) - shift) / scale, 0, 1)

    return scaled(X_train), scaled(X_test), how


def auto_sample_rate(n: int, multiclass: bool) -> float:
    """Attack every sample of a short stream, else about `WHITE_BOX_ATTACKS` (binary models,
    white box) or `BLACK_BOX_ATTACKS` (one-vs-rest, black box) samples per model."""
    budget = BLACK_BOX_ATTACKS if multiclass else WHITE_BOX_ATTACKS
    return min(1.0, budget / max(n, 1))


# -- the run --------------------------------------------------------------------------------------


@dataclasses.dataclass
class ModelRun:
    """One model's pass over the stream.

    Attributes
    ----------
    name
        The model's name in the table.
    final
        The last checkpoint of `iter_progressive_robust_val`: accuracies over the whole stream.
    series
        The monitor's rolling accuracies at each checkpoint (`RobustnessMonitor.snapshot()`).
    alerts
        Every alert the monitor raised.
    held_out
        `evaluate.robustness_report` on the test set, if there is one.
    held_out_samples
        Rows of the test set it used.
    warm_up_end
        Samples the model took to fit its kernel width (`gamma='scale'`), none of them
        attacked; 0 if it had no warm-up, None if it never left it.

    """

    name: str
    final: dict
    series: list[dict]
    alerts: list
    held_out: typing.Any = None
    held_out_samples: int = 0
    warm_up_end: int | None = 0


@dataclasses.dataclass
class DemoResult:
    title: str
    epsilon: float
    norm: str
    sample_rate: float
    window_size: int
    multiclass: bool
    runs: list[ModelRun]

    @property
    def threat(self) -> str:
        return f"{self.norm.upper().replace('LINF', 'L-inf')} ε = {self.epsilon:g}"


def warming_up(model) -> bool:
    """Whether `model` (or a binary model of a one-vs-rest one) is still fitting its kernel
    width: `gamma='scale'` during its first `warm_up` labelled samples."""
    inner = getattr(model, "classifiers", None)
    if isinstance(inner, dict):
        # one-vs-rest: a binary model per class seen, each with its own warm-up
        models = list(inner.values()) or [model.classifier]
    else:
        models = [model]
    return any(getattr(m, "gamma", None) == "scale" and m.fitted_gamma is None for m in models)


class AfterWarmUpMonitor(RobustnessMonitor):
    """A `RobustnessMonitor` that attacks no sample while the model is `warming_up`.

    During the warm-up the model predicts by a provisional vote of the samples it holds; an
    attack on it would count every sample as robust, and the drop once the kernel model takes
    over would read as drift. `warm_up_end` is the number of samples the warm-up took (None
    while it lasts).
    """

    def __init__(self, model, **kwargs):
        super().__init__(model, **kwargs)
        self.warm_up_end = None if warming_up(model) else 0

    def update(self, x: dict, y, y_pred=None) -> list:
        if self.warm_up_end is None and not warming_up(self.model):
            self.warm_up_end = self.n_seen
        return super().update(x, y, y_pred)

    def upcoming(self, count: int) -> list[bool]:
        # While the warm-up lasts, progressive validation hands the samples over one at a time
        # (as it does samples to attack), so that its end is seen exactly.
        return [True] * count if warming_up(self.model) else super().upcoming(count)

    def _can_attack(self, y) -> bool:
        return not warming_up(self.model) and super()._can_attack(y)


def _models(multiclass: bool, train_epsilon: float, norm: str, seed: int) -> dict:
    def wrap(model):
        if not multiclass:
            return model
        from river_advsvm.multiclass import OneVsRest

        return OneVsRest(model)

    return {
        "natural": wrap(AdvKernelSVM(seed=seed)),
        f"adversarial ({norm.upper().replace('LINF', 'L-inf')} ε={train_epsilon:g})": wrap(
            AdvKernelSVM(epsilon=train_epsilon, norm=norm, bounds=(0.0, 1.0), seed=seed)
        ),
    }


def run_demo(
    X: np.ndarray,
    y: np.ndarray,
    X_test: np.ndarray | None = None,
    y_test: np.ndarray | None = None,
    *,
    title: str = "",
    multiclass: bool = False,
    epsilon: float = DEFAULT_EPSILON,
    norm: str = DEFAULT_NORM,
    train_epsilon: float | None = None,
    sample_rate: float | None = None,
    seed: int = 0,
    progress: bool = True,
    test_samples: int = 1000,
) -> DemoResult:
    """Stream `(X, y)` once through a natural and an adversarially trained model, each under a
    `RobustnessMonitor`, and evaluate both on `(X_test, y_test)` if given.

    Parameters
    ----------
    X
        The stream's inputs, in order, in [0, 1] (see `to_unit_box`).
    y
        Their labels.
    X_test
        A held-out set: after the stream, `robustness_report` on its first `test_samples`
        rows (clean, PGD-10 and certified; for one-vs-rest models clean and certified only,
        since the black-box attack costs ~0.5 s a sample).
    y_test
        Its labels.
    title
        Says what the data is, for the plot.
    multiclass
        Wrap both models in `river_advsvm.multiclass.OneVsRest` (any number of labels). The
        monitors then attack them black box, through their probabilities.
    epsilon
        The radius of the threat model: the monitors' PGD-10 attacks at it, and certificates
        are at it.
    norm
        Its norm, 'l2' or 'linf'.
    train_epsilon
        Radius the adversarial model trains against (same norm, attacker kept in the unit
        box); default `epsilon`, the threat the monitors attack with.
    sample_rate
        Share of the stream the monitors attack; default `auto_sample_rate`.
    seed
        Seed of the models' random features and of the monitors' sampling.
    progress
        Show a tqdm progress bar per model.

    """
    n = len(y)
    if n == 0:
        raise ValueError("the stream is empty")
    if sample_rate is None:
        sample_rate = auto_sample_rate(n, multiclass)
    window_size = min(1000, max(50, n // 8))
    step = max(1, n // CHECKPOINTS)
    runs = []
    if train_epsilon is None:
        train_epsilon = epsilon
    for name, model in _models(multiclass, train_epsilon, norm, seed).items():
        monitor = AfterWarmUpMonitor(
            model, attack=PGD(epsilon=epsilon, norm=norm), sample_rate=sample_rate,
            window_size=window_size, seed=seed,
        )
        runs.append(_stream_one(name, model, monitor, X, y, step, progress))
        if X_test is not None and y_test is not None and len(y_test) and test_samples:
            X_held, y_held = X_test[:test_samples], y_test[:test_samples]
            runs[-1].held_out = _held_out(model, X_held, y_held, epsilon, norm, multiclass)
            runs[-1].held_out_samples = len(y_held)
    return DemoResult(title, epsilon, norm, sample_rate, window_size, multiclass, runs)


def _stream_one(name, model, monitor, X, y, step, progress) -> ModelRun:
    from river import stream

    from river_advsvm.evaluate import iter_progressive_robust_val

    series, alerts, final = [], [], None
    dataset = stream.iter_array(X, y.tolist())
    # A bar on a terminal only: logs and pipes (`advsvm demo 2>file`) get none.
    with progress_.bar(total=len(y), desc=name, unit="sample", progress=progress) as bar:
        for final in iter_progressive_robust_val(dataset, model, step=step, monitor=monitor):
            series.append(final["window"])
            alerts += final["alerts"]
            bar.update(final["step"] - bar.n)
    return ModelRun(name, final, series, alerts, warm_up_end=monitor.warm_up_end)


def _held_out(model, X, y, epsilon, norm, multiclass):
    from river_advsvm.evaluate import robustness_report

    attacks = {} if multiclass else {"PGD-10": PGD(epsilon=epsilon, norm=norm)}
    return robustness_report(model, X, list(y), attacks, {norm: [epsilon]})


# -- the table ------------------------------------------------------------------------------------


def table_rows(result: DemoResult) -> list[dict]:
    """One row per model: progressive accuracies over the stream, alerts and throughput.

    Throughput is the whole test-then-train loop with the monitor's attacks included;
    `ms/attack` is the monitor's time per attacked sample (attack and certificate).
    """
    rows = []
    for run in result.runs:
        final = run.final
        attacked = final["n_attacked"]
        rows.append({
            "model": run.name,
            "samples": final["step"],
            "clean %": final["clean_accuracy"],
            "robust %": final["robust_accuracy"],
            "certified %": final["certified_accuracy"],
            "attacked": attacked,
            "alerts": len(run.alerts),
            "samples/s": final["step"] / final["seconds"],
            "ms/attack": 1000 * final["attack_seconds"] / attacked if attacked else None,
        })
    return rows


def held_out_rows(result: DemoResult) -> list[dict] | None:
    """One row per model from its `robustness_report` on the test set, or None without one."""
    if any(run.held_out is None for run in result.runs):
        return None
    rows = []
    for run in result.runs:
        report = run.held_out
        accuracy = dict(zip(report.attack, report.accuracy))
        rows.append({
            "model": run.name,
            "test samples": run.held_out_samples,
            "clean %": accuracy.get("clean"),
            "PGD-10 %": accuracy.get("PGD-10"),
            "certified %": accuracy.get("certified"),
        })
    return rows


def held_out_notes(result: DemoResult) -> list[str]:
    """A line per model whose held-out PGD-10 met no usable gradient at some test samples (a
    model still in its warm-up has none): its PGD-10 accuracy counts them as robust."""
    notes = []
    for run in result.runs:
        report = run.held_out
        if report is None or "no_gradient" not in report:
            continue
        rows = report[report.attack == "PGD-10"]
        stuck = int(rows.no_gradient.sum()) if len(rows) else 0
        if stuck:
            notes.append(f"{run.name}: PGD-10 met no usable gradient at {stuck} of "
                         f"{run.held_out_samples} test samples and counts them as robust: its "
                         "PGD-10 accuracy may be an overestimate")
    return notes


def format_table(rows: list[dict]) -> str:
    """A plain-text table: text left-aligned, numbers right-aligned.

    Columns whose name ends in '%' hold fractions, shown as percentages; `None` is 'n/a'.

    >>> print(format_table([{"model": "a", "clean %": 0.9712, "samples/s": 1234.5, "n": 3},
    ...                     {"model": "bb", "clean %": None, "samples/s": 9.87, "n": 10}]))
    model  clean %  samples/s   n
    -----  -------  ---------  --
    a         97.1      1,234   3
    bb         n/a       9.87  10
    """
    columns = list(rows[0])

    def cell(column, value):
        if value is None:
            return "n/a"
        if isinstance(value, str):
            return value
        if column.endswith("%"):
            return f"{100 * value:.1f}"
        if isinstance(value, float) and abs(value) < 100:
            return f"{value:.2f}"
        return f"{value:,.0f}"

    cells = [[cell(c, row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    text_columns = [all(isinstance(row[c], str) for row in rows) for c in columns]

    def line(values):
        return "  ".join(v.ljust(w) if text else v.rjust(w)
                         for v, w, text in zip(values, widths, text_columns)).rstrip()

    header = "  ".join(c.ljust(w) if text else c.rjust(w)
                       for c, w, text in zip(columns, widths, text_columns)).rstrip()
    return "\n".join([header, line(["-" * w for w in widths])] + [line(r) for r in cells])


# -- the plot -------------------------------------------------------------------------------------

ALERT_STYLES = {
    "clean_drift": dict(color="tab:blue", linestyle="--"),
    "robust_drift": dict(color="tab:red", linestyle="--"),
    "robust_gap": dict(color="tab:orange", linestyle=":"),
    "collapsed": dict(color="black", linestyle="-."),
}


def plot(result: DemoResult, path) -> str:
    """Rolling clean, robust and certified accuracy over the stream, one panel per model, with
    the monitor's alerts as vertical lines; written as a PNG to `path`, which is returned."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    figure = Figure(figsize=(9, 1.0 + 2.9 * len(result.runs)), layout="constrained")
    axes = figure.subplots(len(result.runs), 1, sharex=True, squeeze=False)[:, 0]
    attacked_window = max(1, math.ceil(result.window_size * result.sample_rate))

    def values(run, key):
        return [np.nan if s[key] is None else s[key] for s in run.series]

    for ax, run in zip(axes, result.runs):
        steps = [s["step"] for s in run.series]
        warm_up = run.warm_up_end if run.warm_up_end is not None else (steps or [0])[-1]
        if warm_up:
            ax.axvspan(0, warm_up, color="0.88", linewidth=0,
                       label=f"warm-up (γ fitted on {warm_up:,} samples; not attacked)")
        ax.plot(steps, values(run, "clean_accuracy"), color="tab:blue", label="clean")
        ax.plot(steps, values(run, "robust_accuracy"), color="tab:red",
                label=f"robust (PGD-10, {result.threat})")
        ax.plot(steps, values(run, "certified_accuracy"), color="tab:green", linestyle="-.",
                label=f"certified ({result.threat})")
        handles, _ = ax.get_legend_handles_labels()
        for kind, style in ALERT_STYLES.items():
            steps_of_kind = [a.step for a in run.alerts if a.kind == kind]
            for step in steps_of_kind:
                ax.axvline(step, linewidth=1.2, **style)
            if steps_of_kind:
                handles.append(Line2D([], [], linewidth=1.2, label=f"alert: {kind}", **style))
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("accuracy")
        ax.set_title(f"{run.name}: {len(run.alerts)} alert(s)", loc="left", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(handles=handles, loc="lower right", fontsize=8)
    axes[-1].set_xlabel("samples seen (test, then train)")
    figure.suptitle(
        f"{result.title}\nrolling accuracy: clean over the last {result.window_size} samples, "
        f"robust and certified over the last {attacked_window} attacked",
        fontsize=10,
    )
    figure.savefig(path, dpi=110)
    return str(path)
