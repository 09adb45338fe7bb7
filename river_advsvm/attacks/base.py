"""What every attack shares: the threat set, the margin it attacks, and the one/many plumbing.

An attack drives the margin of the true label, `m(x) = y g(x)`, below zero. `Oracle` gives that
margin (and its gradient) for any River binary classifier:

- white box, for models with the margin API of this package (`decision_many`,
  `decision_gradient_many`, `sign_of`): `m = sign_of(y) g(x)` and the analytic gradient;
- black box, for any other classifier (River's `LogisticRegression`, a `Pipeline`, ...), or
  when an attack is told to use scores only: `m = log p(y|x) - log max_{y' != y} p(y'|x)`, the
  log-odds of the true label against the likeliest other one from `predict_proba_*` (with two
  labels, `log p - log(1 - p)`), whose sign is the prediction's correctness (on a tie, the
  label River's `predict_one` meets first wins), and its gradient by central finite
  differences.

The threat set is the ball `||x' - x|| <= epsilon` (L2 or L-inf) intersected with the box
`bounds`. Each attack works on a dense float batch in `_attack`; `Attack` turns dicts and frames
into that batch (with the model's own validation, `river_advsvm.inputs`), copies it so that the
caller's input is never modified, and projects the result back onto the threat set.

"""

from __future__ import annotations

import dataclasses
import time
import typing

import numpy as np
from river import base

from river_advsvm import inputs
from river_advsvm import progress as progress_
from river_advsvm.kernels import check_norm, l2_lengths
from river_advsvm.margin_predict import batch_labels
from river_advsvm.warn import warn_caller

__all__ = [
    "Attack",
    "AttackResult",
    "NoGradientWarning",
    "Oracle",
    "accepted_box",
    "distances",
    "project",
]

#: A gradient whose L2 norm, times the size of the input (`max(1, ||x||_inf)`: the units of the
#: data), is below this, relative to `max(1, |margin|)`, points nowhere: the attack treats it as
#: missing (white box: a flat model; black box: saturated probabilities).
GRADIENT_TOLERANCE = 1e-8
#: Central-difference step of the black-box gradient, in input units.
FINITE_DIFFERENCE_STEP = 1e-4
#: Query rows per call to the black-box model when estimating gradients (bounds memory).
_QUERY_ROWS = 1 << 16
# Probabilities are clipped here before the log-odds, so that a saturated p gives a finite margin.
_TINY_PROBABILITY = 1e-300
#: Rows of the batch timed to estimate what an attack will cost (see `Attack.estimate_seconds`).
_PROBE_ROWS = 16
#: Attacks estimated to take longer than this say so before they start (when bars are shown).
NOTE_SECONDS = 5.0
#: A bar appears only once an attack has run this long: quick batches draw nothing.
BAR_DELAY = 1.0


def check_seed(seed) -> int | None:
    """`seed` as a plain int (a numpy integer is the int it holds), or None; ValueError unless
    it is None or an int >= 0 (what numpy's generators take)."""
    seed = inputs.plain_number(seed)
    if not (seed is None or (inputs.is_whole(seed) and seed >= 0)):
        raise ValueError(f"seed must be None or an int >= 0, got {inputs.describe(seed)}")
    return seed


class NoGradientWarning(UserWarning):
    """Some samples of a batch got no usable gradient: their robust accuracy is suspect."""


def distances(X_adv: np.ndarray, X: np.ndarray, norm: str) -> np.ndarray:
    """`||x' - x||` per row, in `norm` ('l2' or 'linf')."""
    delta = X_adv - X
    if norm == "l2":
        return l2_lengths(delta)
    return np.abs(delta).max(axis=1, initial=0.0)


def project(
    X_adv: np.ndarray, X: np.ndarray, epsilon: float | None, norm: str, bounds
) -> np.ndarray:
    """The points of `X_adv` moved into the threat set of `X`: the `epsilon`-ball, then the box.

    For L-inf both sets are boxes and this is the exact Euclidean projection. For L2 it is the
    ball projection followed by clipping to the box, which is feasible (not always the nearest
    feasible point): clipping moves each coordinate towards `X`, which lies in the box, so no
    `|x'_k - x_k|` grows and the point stays in the ball. The points are also kept within
    `inputs.MAX_ABS_VALUE`, the largest input the models accept (as is `X`), with a box or
    without, for the same reason.
    """
    if epsilon is not None:
        if norm == "linf":
            X_adv = np.clip(X_adv, X - epsilon, X + epsilon)
        else:
            delta = X_adv - X
            length = l2_lengths(delta)
            # Points inside the ball keep factor 1 (their epsilon / length may overflow to inf).
            with np.errstate(over="ignore"):
                factor = np.minimum(1.0, epsilon / np.maximum(length, np.finfo(float).tiny))
            X_adv = X + delta * factor[:, None]
    box = accepted_box(bounds)
    X_adv = np.clip(X_adv, *box)
    if epsilon is not None:
        X_adv = _rounded_into_ball(X_adv, X, epsilon, norm, box)
    return X_adv


def accepted_box(bounds) -> tuple[float, float]:
    """The box cut to the inputs the models accept (`inputs.MAX_ABS_VALUE`), which hold `X`:
    a point beyond would be refused by the model as if the user had given it."""
    lo, hi = (-inputs.MAX_ABS_VALUE, inputs.MAX_ABS_VALUE) if bounds is None else bounds
    return max(lo, -inputs.MAX_ABS_VALUE), min(hi, inputs.MAX_ABS_VALUE)


def _rounded_into_ball(X_adv: np.ndarray, X: np.ndarray, epsilon: float, norm: str,
                       bounds) -> np.ndarray:
    """`X_adv` with what rounding left outside the ball pulled back towards `X`.

    Next to large inputs, `x + epsilon` rounds to the nearest representable number, which may
    be farther than `epsilon` (near 1e15 they are 0.125 apart). Each such coordinate (L-inf) or
    row (L2) keeps the largest fraction of its step whose rounded point is within `epsilon`, as
    `distances` measures it (the fraction 0 is `x` itself).
    """
    if norm == "linf":
        outside = np.abs(X_adv - X) > epsilon
        if not outside.any():
            return X_adv
        start, delta = X[outside], X_adv[outside] - X[outside]

        def inside(t):
            return np.abs(start + t * delta - start) <= epsilon
    else:
        outside = distances(X_adv, X, norm) > epsilon
        if not outside.any():
            return X_adv
        start, delta = X[outside], X_adv[outside] - X[outside]

        def inside(t):
            return distances(start + t[:, None] * delta, start, norm) <= epsilon
    lo, hi = np.zeros(len(start)), np.ones(len(start))
    for _ in range(64):
        mid = (lo + hi) / 2
        ok = inside(mid)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    X_adv = X_adv.copy()
    X_adv[outside] = start + (lo if norm == "linf" else lo[:, None]) * delta
    # Towards `x`, which is in the box: clipping moves no coordinate away from it.
    return np.clip(X_adv, *accepted_box(bounds))


def unusable_gradients(G: np.ndarray, margins: np.ndarray,
                       X: np.ndarray | None = None) -> np.ndarray:
    """Rows of `G` that are non-finite or vanishing (see `GRADIENT_TOLERANCE`): gradients in
    the units of the inputs `X` (whose size scales the tolerance: 1 per unit at 1e9 units is a
    steep slope), or in units of order 1 (`X` None)."""
    finite = np.isfinite(G)
    G = np.where(finite, G, 0.0)
    length = np.sqrt(np.einsum("ij,ij->i", G, G))
    if X is not None:
        length *= np.maximum(1.0, np.abs(X).max(axis=1, initial=0.0))
    small = length <= GRADIENT_TOLERANCE * np.maximum(1.0, np.abs(margins))
    return ~finite.all(axis=1) | small


def has_margin_api(model) -> bool:
    """True for the margin classifiers of this package, which white-box attacks differentiate."""
    return all(hasattr(model, a) for a in ("decision_many", "decision_gradient_many", "sign_of"))


class NamedRows:
    """The rows of an array under feature names, read by this package's models as they read a
    DataFrame (`columns`, `to_numpy`): an attack asks for margins at every step, and building
    a DataFrame each time cost more than the margins themselves."""

    __slots__ = ("columns", "_values")

    def __init__(self, values: np.ndarray, columns: list):
        self.columns = columns
        self._values = values

    def to_numpy(self) -> np.ndarray:
        return self._values


class Oracle:
    """The margin `m(x)` of each sample's true label, and its gradient, for a batch.

    Parameters
    ----------
    model
        A fitted River binary classifier.
    columns
        Feature names of the batch's columns.
    labels
        The true label of each row.
    scores_only
        Use the black-box log-odds even when the model has the margin API.

    Attributes
    ----------
    white_box
        Whether margins and gradients come from the model's margin API.
    n_queries
        Rows sent to the model so far (each margin of each point is one query).

    """

    def __init__(self, model, columns: list, labels: list, scores_only: bool = False):
        self.model = model
        self.columns = list(columns)
        self.labels = list(labels)
        # This package's margin models read rows under names without a DataFrame (`_frame`).
        self._margin_model = has_margin_api(model)
        self.white_box = self._margin_model and not scores_only
        self.n_queries = 0
        self._batch_scores: bool | None = None  # decided on the first black-box query
        # A margin model reads a bare array as columns 0..d-1: no frame needed then.
        self._bare_arrays = self._margin_model and self.columns == list(range(len(columns)))
        if self._margin_model:
            # The model's own check of each label, black box too: an unknown label has no
            # probability, and would count as fooled from the start.
            self._signs = np.array([model.sign_of(y) for y in self.labels])
        #: A margin model that knows one class predicts it whatever the input (its margin's
        #: sign says nothing): there is nothing to attack.
        self.one_class = self._margin_model and len(getattr(model, "classes", ())) == 1

    def _frame(self, V: np.ndarray):
        if self._bare_arrays:
            return V
        if self._margin_model:
            return NamedRows(V, self.columns)
        import pandas as pd

        return pd.DataFrame(V, columns=self.columns, copy=False)

    # -- margins --------------------------------------------------------------------------------

    def margins(self, V: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """`m` at each row of `V`; `rows[i]` says which sample row `i` belongs to (default: i)."""
        rows = np.arange(len(V)) if rows is None else rows
        self.n_queries += len(V)
        if self.white_box:
            return self._signs[rows] * np.asarray(self.model.decision_many(self._frame(V)))
        return self._log_odds(V, rows)[0]

    def fooled(self, V: np.ndarray) -> np.ndarray:
        """Whether the model's prediction at each row of `V` (one per sample) is not its label."""
        if self._margin_model:
            m = self.margins(V)
            # g = 0 predicts the negative class (its probabilities are 1/2 each): a margin of
            # 0 fools a sample of the positive class only.
            return (m < 0.0) | ((m == 0.0) & (self._signs > 0))
        self.n_queries += len(V)
        m, first = self._log_odds(V, np.arange(len(V)))
        # On a tie River predicts the label it meets first (`max` over the probabilities).
        return (m < 0.0) | ((m == 0.0) & ~first)

    def _log_odds(self, V: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`log p(y|x) - log max_{y' != y} p(y'|x)` per row (the log-odds of two labels: below
        0 where another label is predicted), and whether `y` comes before that label (it wins
        a tie)."""
        p_true, p_other, first = self._probabilities(V, [self.labels[r] for r in rows.tolist()])
        # p_other is what the model gave another label: 1 - p_true would lose every digit
        # once p_true is close to 1.
        return np.log(np.maximum(p_true, _TINY_PROBABILITY)) - np.log(
            np.maximum(p_other, _TINY_PROBABILITY)
        ), first

    def _probabilities(self, V: np.ndarray, labels: list) -> tuple[np.ndarray, ...]:
        """`p(y|x)`, the largest probability of another label, and whether `y` comes before
        every other label of that probability, per row."""
        if self._batch_scores is None:
            self._batch_scores = self._batch_agrees(V[:1], labels[:1])
        if self._batch_scores:
            return self._batch_probabilities(V, labels)
        p_true, p_other = np.zeros(len(V)), np.zeros(len(V))
        first = np.zeros(len(V), dtype=bool)
        for i, (v, label) in enumerate(zip(V.tolist(), labels)):
            proba = self.model.predict_proba_one(dict(zip(self.columns, v)))
            if not i:
                self._check_known(proba, labels)
            p_true[i] = proba.get(label, 0.0)
            p_other[i] = max((p for y, p in proba.items() if y != label), default=0.0)
            first[i] = bool(proba) and max(proba, key=proba.get) == label
        return p_true, p_other, first

    def _batch_probabilities(self, V: np.ndarray, labels: list) -> tuple[np.ndarray, ...]:
        P = self.model.predict_proba_many(self._frame(V))
        values = P.to_numpy(dtype=float)
        column = {c: k for k, c in enumerate(P.columns)}
        self._check_known(column, labels)
        p_true, p_other = np.zeros(len(V)), np.zeros(len(V))
        first = np.zeros(len(V), dtype=bool)
        predicted = values.argmax(axis=1) if values.size else np.zeros(len(V), dtype=np.intp)
        for label in set(labels):
            if label in column:
                mask = np.fromiter((y == label for y in labels), bool, count=len(labels))
                k = column[label]
                p_true[mask] = values[mask, k]
                others = np.delete(values[mask], k, axis=1)
                p_other[mask] = others.max(axis=1, initial=0.0)
                first[mask] = predicted[mask] == k  # (as `predict_many`: the first maximum)
        return p_true, p_other, first

    def _check_known(self, classes, labels: list) -> None:
        """A black box's labels are among the classes its probabilities name: another would
        count as fooled before any attack (a margin model refuses it, `unknown_label`)."""
        if self._margin_model:
            return
        for label in dict.fromkeys(labels):
            if label not in classes:
                raise inputs.InvalidInput(
                    f"label {label!r} is not one of the classes the model's probabilities "
                    f"name ({list(classes)})", "unknown_label")

    def _batch_agrees(self, V: np.ndarray, labels: list) -> bool:
        """Whether `predict_proba_many` can stand in for `predict_proba_one` on this model.

        `predict_proba_one` is the black-box contract; the batch method is only a faster way to
        ask the same question. It is used when it exists, runs on these columns and gives the
        same answer on a first row (some River transformers fail on integer column names, and
        a model could score batches differently).
        """
        if not hasattr(self.model, "predict_proba_many"):
            return False
        try:
            batch = self._batch_probabilities(V, labels)
        except Exception:  # noqa: BLE001 - any failure just means: ask one row at a time
            return False
        proba = self.model.predict_proba_one(dict(zip(self.columns, V[0].tolist())))
        one = (proba.get(labels[0], 0.0),
               max((p for y, p in proba.items() if y != labels[0]), default=0.0))
        return bool(np.allclose([batch[0][0], batch[1][0]], one, rtol=1e-9, atol=1e-12))

    # -- gradients ------------------------------------------------------------------------------

    def margins_and_gradients(self, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`m` and `dm/dx` at each row of `V` (one row per sample)."""
        m = self.margins(V)
        if self.white_box:
            G = self.model.decision_gradient_many(self._frame(V))
            return m, self._signs[:, None] * np.asarray(G, dtype=float)
        return m, self.finite_differences(V, np.arange(V.shape[1]))

    def finite_differences(
        self,
        W: np.ndarray,
        coordinates: np.ndarray,
        step: float = FINITE_DIFFERENCE_STEP,
        to_inputs: typing.Callable[[np.ndarray], np.ndarray] | None = None,
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        """Central differences of `m(to_inputs(w))` along some coordinates of each row of `W`.

        `coordinates` is one row of coordinate indices per row of `W`, or a 1-d array shared by
        all; the result has one column per coordinate. `to_inputs` maps the attack's variables
        to inputs (the identity by default); `rows[i]` is the sample row `i` belongs to.
        """
        rows = np.arange(len(W)) if rows is None else rows
        n, d = W.shape
        C = np.broadcast_to(coordinates, (n, np.shape(coordinates)[-1]))
        k = C.shape[1]
        G = np.empty((n, k))
        if not k:  # a sample without inputs: no direction to estimate
            return G
        samples_per_call = max(1, _QUERY_ROWS // (2 * k))
        for start in range(0, n, samples_per_call):
            block = np.arange(start, min(n, start + samples_per_call))
            # For each sample: +step on each of its coordinates, then -step on each.
            Q = np.repeat(W[block], 2 * k, axis=0).reshape(len(block), 2, k, d)
            sample, j = np.meshgrid(np.arange(len(block)), np.arange(k), indexing="ij")
            Q[sample, 0, j, C[block][sample, j]] += step
            Q[sample, 1, j, C[block][sample, j]] -= step
            Q = Q.reshape(-1, d)
            if to_inputs is not None:
                Q = to_inputs(Q)
            m = self.margins(Q, np.repeat(rows[block], 2 * k)).reshape(len(block), 2, k)
            G[block] = (m[:, 0] - m[:, 1]) / (2 * step)
        return G


@dataclasses.dataclass
class AttackResult:
    """Everything an attack found for a batch.

    Attributes
    ----------
    adversarial
        The attacked points, one row per sample, in the box and the ball.
    norms
        `||x' - x||` per sample, in the attack's norm.
    fooled
        Whether the model no longer predicts the label at the attacked point: its margin is
        below 0, or 0 for a sample of the positive class (`g = 0` predicts the negative one).
        The margins are the batch's (`decision_many`): at a point within the model's rounding
        of the boundary, where a smallest-flip attack (C&W, ZOO) may end, a float32 model
        predicting that point alone can round its margin (of order 1e-6) the other way.
    no_gradient
        Samples the attack did not fool that met a zero, non-finite or vanishing gradient (or
        gradient estimate) on the way: their robust accuracy may be an artefact of the
        missing gradient rather than of robustness.
    seconds
        Wall time of the attack.
    n_queries
        Points the attack evaluated on the model.

    """

    adversarial: np.ndarray
    norms: np.ndarray
    fooled: np.ndarray
    no_gradient: np.ndarray
    seconds: float
    n_queries: int

    @property
    def n_no_gradient(self) -> int:
        return int(self.no_gradient.sum())


class Attack(base.Base):
    """Base class of the attacks: a threat set and the one/many API around `_attack`.

    A subclass implements `_attack(oracle, X, bar)`, which gets the batch `X` (read-only, in the
    box) and returns the attacked points and a per-sample mask of samples that got no usable
    gradient, calling `bar.update(k)` as its iterations go (`_progress_total` of them in all).
    It also says, in `_evaluations`, how many margins and gradients it asks per sample at most,
    which is what `estimate_seconds` multiplies by the model's measured cost. `Attack`
    projects the points onto the threat set and records what happened.

    Parameters
    ----------
    epsilon
        Radius of the threat ball; `None` (minimum-norm attacks only) for no limit.
    norm
        'l2' or 'linf'.
    bounds
        `(lo, hi)`: the box every input lives in, or `None` for no box.

    Attributes
    ----------
    last_result
        The `AttackResult` of the latest call.

    """

    #: Minimum-norm attacks (C&W, ZOO) find the smallest perturbation that flips the label and
    #: accept `epsilon=None`; with a finite `epsilon`, a sample whose smallest flip found is
    #: larger than `epsilon` is returned unchanged.
    minimizes_norm: typing.ClassVar[bool] = False
    #: Attacks that see scores only, even when the model has the margin API.
    scores_only: typing.ClassVar[bool] = False

    def __init__(self, epsilon: float | None, norm: str, bounds: tuple[float, float] | None):
        epsilon = inputs.plain_number(epsilon)  # (np.float32(8 / 255) is a radius too)
        self.epsilon = epsilon
        self.norm = norm
        self.bounds = bounds
        check_norm(norm)
        if epsilon is None:
            if not self.minimizes_norm:
                raise ValueError(f"{type(self).__name__} needs a finite epsilon")
        else:
            inputs.check_number("epsilon", epsilon, lambda v: v >= 0, ">= 0")
        inputs.check_box(bounds)
        self.last_result: AttackResult | None = None

    # -- to implement ---------------------------------------------------------------------------

    def _attack(self, oracle: Oracle, X: np.ndarray, bar) -> tuple[np.ndarray, np.ndarray]:
        """Attacked points and the no-usable-gradient mask for a batch (`X` is read-only)."""
        raise NotImplementedError

    def _progress_total(self) -> int:
        """The iterations `_attack` reports to its bar."""
        return 1

    def _evaluations(self, n_inputs: int) -> tuple[int, int]:
        """At most how many (margin-and-gradient, margin-only) evaluations a sample costs."""
        raise NotImplementedError

    # -- public API -----------------------------------------------------------------------------

    def perturb_one(self, model, x: dict, y) -> dict:
        """The attacked version of one sample; `x` is left as it is."""
        names, values = inputs.dict_values(x, needs=self._needs())
        result = self._run(model, names, values[None, :], [y])
        return dict(zip(names, result.adversarial[0].tolist()))

    def perturb_many(self, model, X, y, progress: bool = True):
        """Attacked versions of the rows of `X`, of `X`'s kind: a DataFrame with `X`'s columns
        and index for a DataFrame, an array for an array (whose columns are features 0..d-1).
        `X` is left as it is; `run(...).adversarial` is the array either way.

        A batch that takes more than a second shows a progress bar on stderr (when stderr is a
        terminal and tqdm is installed; `progress=False` switches it off), and one estimated to
        take more than a few seconds says how long first.
        """
        adversarial = self.run(model, X, y, progress=progress).adversarial
        if hasattr(X, "columns") and hasattr(X, "index"):  # a DataFrame in, a DataFrame out
            return type(X)(adversarial, columns=X.columns, index=X.index)
        return adversarial

    def run(self, model, X, y, progress: bool = True) -> AttackResult:
        """Attack the rows of `X` like `perturb_many`, and return everything found.

        Warns with `NoGradientWarning` when some samples got no usable gradient; the result and
        `last_result` say which.
        """
        progress = inputs.check_flag("progress", progress)
        names, values = inputs.frame_values(X, needs=self._needs())
        return self._run(model, names, values, batch_labels(y, X, len(values)), progress)

    def estimate_seconds(self, model, X, y) -> float:
        """About how long `run(model, X, y)` would take, at most, without running it.

        The model's cost per margin and per gradient is timed on a few rows of `X`, then
        multiplied by the evaluations this attack makes per sample at most (every step of every
        search; ZOO's early stops only shorten it).
        """
        names, values = inputs.frame_values(X, needs=self._needs())
        labels = batch_labels(y, X, len(values))
        return self._estimate(model, names, np.asarray(values, dtype=np.float64), labels)

    def _needs(self) -> str:
        """Who refuses a NaN input, for the message: the attack, not learning."""
        return f"the attack {type(self).__name__}"

    def _estimate(self, model, names: list, X: np.ndarray, labels: list) -> float:
        n, d = X.shape
        if not n:
            return 0.0
        k = min(n, _PROBE_ROWS)
        probe = Oracle(model, names, labels[:k], scores_only=self.scores_only)
        V = X[:k]
        probe.margins(V)  # the first call may set things up: not what a step costs
        start = time.perf_counter()
        probe.margins(V)
        margin_cost = (time.perf_counter() - start) / k
        gradients, margins = self._evaluations(d)
        gradient_cost = (2 * d + 1) * margin_cost  # finite differences, for a black box
        if gradients and probe.white_box:
            start = time.perf_counter()
            probe.margins_and_gradients(V)
            gradient_cost = (time.perf_counter() - start) / k
        return n * (gradients * gradient_cost + margins * margin_cost)

    def _run(
        self, model, names: list, values: np.ndarray, labels: list, progress: bool = False
    ) -> AttackResult:
        bounds = self.bounds
        # (a copy: the caller's data is never touched; inputs past the box by rounding are
        # attacked from its edge)
        X = inputs.onto_box(np.array(values, dtype=np.float64, copy=True), bounds)
        X.setflags(write=False)
        name, total = type(self).__name__, self._progress_total()
        if len(X) and progress_.enabled(progress):
            estimate = self._estimate(model, names, X, labels)
            if estimate >= NOTE_SECONDS:
                progress_.note(
                    f"{name} on {len(X):,} samples: up to {total:,} steps, "
                    f"~{progress_.duration(estimate / len(X))} per sample, "
                    f"at most ~{progress_.duration(estimate)} in all"
                )
        oracle = Oracle(model, names, labels, scores_only=self.scores_only)
        start = time.perf_counter()
        if len(X) and not oracle.one_class:
            with progress_.bar(total=total, desc=f"{name} ({len(X):,} samples)", unit="step",
                               progress=progress, leave=False, delay=BAR_DELAY) as bar:
                X_adv, no_gradient = self._attack(oracle, X, bar)
            radius = None if self.minimizes_norm else self.epsilon
            X_adv = project(X_adv, X, radius, self.norm, bounds)
            norms = distances(X_adv, X, self.norm)
            if self.minimizes_norm and self.epsilon is not None:
                # The smallest flip found lies outside the budget: nothing found within it.
                too_far = norms > self.epsilon
                X_adv[too_far] = X[too_far]
                norms[too_far] = 0.0
            fooled = oracle.fooled(X_adv)
            # A sample the attack fooled anyway needs no excuse.
            no_gradient = np.asarray(no_gradient, dtype=bool) & ~fooled
        else:  # no samples, or a model of one class: every sample comes back as it is
            X_adv, no_gradient = X.copy(), np.zeros(len(X), dtype=bool)
            norms, fooled = np.zeros(len(X)), np.zeros(len(X), dtype=bool)
        self.last_result = AttackResult(
            adversarial=X_adv,
            norms=norms,
            fooled=fooled,
            no_gradient=np.asarray(no_gradient, dtype=bool),
            seconds=time.perf_counter() - start,
            n_queries=oracle.n_queries,
        )
        if self.last_result.n_no_gradient:
            # At the caller's line, whichever public method (or evaluate function) got here.
            warn_caller(
                f"{type(self).__name__}: {self.last_result.n_no_gradient} of {len(X)} samples "
                "were not fooled and met a zero, vanishing or non-finite gradient on the way; "
                "the robust accuracy on them may be an overestimate",
                NoGradientWarning,
            )
        return self.last_result

    @property
    def n_no_gradient(self) -> int:
        """Samples of the latest batch that got no usable gradient."""
        return 0 if self.last_result is None else self.last_result.n_no_gradient


def adam_step(W, grad, M, V, t, learning_rate, beta1, beta2, eps=1e-8):
    """One Adam update of `W` in place; `t` is the (per-entry or scalar) 1-based step count."""
    M *= beta1
    M += (1.0 - beta1) * grad
    V *= beta2
    V += (1.0 - beta2) * grad * grad
    m_hat = M / (1.0 - beta1**t)
    v_hat = V / (1.0 - beta2**t)
    W -= learning_rate * m_hat / (np.sqrt(v_hat) + eps)


def steepest_direction(G: np.ndarray, norm: str) -> np.ndarray:
    """Per row, the unit vector `v` in `norm` that maximises `G . v` (0 where `G` is 0)."""
    if norm == "linf":
        return np.sign(G)
    length = l2_lengths(G)  # (as the training's ascent step measures its direction)
    return G / np.where(length > 0, length, 1.0)[:, None]
