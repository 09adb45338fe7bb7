"""What the binary margin classifiers of this package share: labels, inputs, the one/many
learning API around a numpy core, and step sizes (`schedule`). The prediction side is
`margin_predict.MarginPredictions`; checkpoints are `model_checkpoint`; the count of
the inputs a batch brings against `max_features`, `new_inputs`.

A subclass implements the model on float arrays (`_row_margin` and `_step` for learning, one
row at a time; `_decision_block` and `_gradient_block` for inference on many rows); this class
turns River's dicts and frames into those arrays, validates everything before any state
changes, registers new inputs, and maps labels to signs.

Learning is strictly one row at a time, also inside `learn_many`: a row's arithmetic depends
on the model's state and the row alone, never on the batch it came in, so a `learn_one` loop
and any batching of `learn_many` give bit-identical models, as do a loop that decides each row
before learning it (`decision_one`, `predict_one`...) and any batching of
`decision_then_learn_many`: predictions change nothing the model keeps.

"""

from __future__ import annotations

import math
import typing

import numpy as np
from river import base

from river_advsvm import calibration, collapse, inputs
from river_advsvm.kernels import check_norm
from river_advsvm.labels import as_label, classes_after
from river_advsvm.margin_predict import MarginPredictions, batch_labels, in_hash_order
from river_advsvm.model_checkpoint import CheckpointMixin
from river_advsvm.new_inputs import NewInputs, Rows
from river_advsvm.schedule import StepSchedule
from river_advsvm.warn import warn_caller

__all__ = ["MAX_FEATURES_LIMIT", "MarginClassifier"]

#: The largest `max_features` a model accepts (the bound behind `inputs.MAX_ABS_VALUE`).
MAX_FEATURES_LIMIT = 1_000_000


class MarginClassifier(CheckpointMixin, MarginPredictions, base.MiniBatchClassifier):
    """Base class of `AdvKernelSVM` and `AdvLinearSVM`: a binary classifier with a margin `g(x)`.

    The positive class is `True` for boolean labels, otherwise the larger of the two labels
    seen (7 in 1-vs-7); `decision_one(x) > 0` predicts it. Until a second label arrives the
    only one seen is provisionally positive; when the second arrives and sorts above it, the
    model's sign is flipped, which is exact because the update is odd in the label.

    """

    def __init__(
        self,
        epsilon: float,
        norm: str,
        regularization: float,
        step_size: float,
        schedule: str,
        bias_step_size: float,
        max_features: int,
    ):
        # A numpy scalar (a float32 or an int64 from an array, say) as the Python number it
        # equals: the parameters are saved as JSON, and a float32 would make the arithmetic it
        # enters float32.
        epsilon, regularization, step_size, bias_step_size, max_features = map(
            inputs.plain_number, (epsilon, regularization, step_size, bias_step_size,
                                  max_features))
        self.epsilon = epsilon
        self.norm = norm
        self.regularization = regularization
        self.step_size = step_size
        self.schedule = schedule
        self.bias_step_size = bias_step_size
        self.max_features = max_features
        if not (inputs.is_number(epsilon) and 0 <= epsilon < math.inf):
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        check_norm(norm)
        if not (inputs.is_whole(max_features) and 1 <= max_features <= MAX_FEATURES_LIMIT):
            raise ValueError(
                f"max_features must be an int in [1, {MAX_FEATURES_LIMIT}], got {max_features!r}")
        self._index = inputs.FeatureIndex()
        self._labels: list = []
        self._calibration = calibration.Temperature()
        self._bias = 0.0
        self._n_learned = 0
        self._schedule = StepSchedule(schedule, step_size, bias_step_size, regularization)
        self._started = False
        self._held: list[tuple[list, np.ndarray, typing.Any]] = []
        self._collapse = collapse.CollapseWatch()
        self._new_inputs = NewInputs(self._index, max_features)
        self._nothing_known_warned = False  # (see MarginPredictions._warn_if_nothing_known)

    # -- hooks for subclasses -------------------------------------------------------------------

    def _start(self) -> None:
        """Called once, before the first sample is learned (and before its inputs are added)."""

    def _add_inputs(self, names: list, hashes: np.ndarray, values=None) -> None:
        """New input columns, with the values of the sample that brought them when one
        did."""
        raise NotImplementedError

    def _row_margin(self, v: np.ndarray, u: np.ndarray, u_names: list, u_hashes) -> float:
        """`g(x)` of one row: `v` over the known inputs, `u` over inputs it does not know."""
        raise NotImplementedError

    def _row_decision(self, v: np.ndarray, u: np.ndarray, u_names: list, u_hashes,
                      margin: float | None = None) -> float:
        """The margin the model predicts one row with; `margin`, if given, is the row's
        `_row_margin`, just computed. It is that margin unless the model predicts with
        another function than the one it learns (an average of its iterates)."""
        return self._row_margin(v, u, u_names, u_hashes) if margin is None else margin

    def _step(self, v: np.ndarray, y: float, g: float, t: int, names: list) -> None:
        """Learn one row `v` (over every input, new ones added) of sign `y`, margin `g`, at
        step `t`; called right after `_row_margin` on the same row. `names` are the sample's
        own feature names, zero-valued ones included: the inputs an attacker may move."""
        raise NotImplementedError

    def _decision_block(self, V, U, u_names, u_hashes) -> np.ndarray:
        raise NotImplementedError

    def _gradient_block(self, V, U, u_names, u_hashes) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _negate(self) -> None:
        raise NotImplementedError

    def _unstarted_margins(self, names: list, values: np.ndarray) -> np.ndarray:
        """Margins before the first step (a warm-up may predict from the rows it holds)."""
        return np.full(len(values), self._bias)

    def _holds_back(self) -> bool:
        """True while labelled rows are to be kept aside (in `_held`) instead of learned: a
        warm-up. When it turns False the held rows are learned, in order."""
        return False

    def _rows_to_hold(self) -> int:
        """How many more labelled rows will be held back (`_holds_back`) before the warm-up ends."""
        return 0

    # -- shared pieces of the update ------------------------------------------------------------

    def _step_sizes(self, t: int) -> tuple[float, float]:
        """`(eta_t, eta_b_t)` at 0-based step `t` (see `river_advsvm.schedule`)."""
        return self._schedule.sizes(t)

    def group_steps(self, rate: float) -> None:
        """From now on, step as one of the workers of a group whose models are averaged, where
        `rate` samples reach the group for each one this model learns (the number of workers,
        with partitions of equal flow).

        Averaging `W` models that each learned their own samples divides each sample's step by
        `W`; with the 'diminishing' schedule it also slows the schedule's clock `W` times, so
        the group's model weighs its first samples far above its last ones. With `rate = W`,
        the step at this model's sample `t` is `W` times the step the schedule gives at the
        group's count, `n + W (t - n)` from the `n` learned now: the average then follows one
        model learning every sample. `rate = 1` is the model learning alone. The step is capped
        at `0.5 / regularization` (the shrink factor stays above 1/2).
        """
        self._schedule.join_group(self._n_learned, rate, self._n_learned)

    @property
    def group_rate(self) -> float:
        """The `rate` of `group_steps` (1: the model learns alone)."""
        return self._schedule.group_clock[1]

    # -- labels ---------------------------------------------------------------------------------

    @property
    def classes(self) -> tuple:
        """`(negative, positive)` once two labels are known; before that, what has been seen."""
        return tuple(self._labels)

    def _see_label(self, y) -> bool:
        """Make `y` a known class (validated beforehand), flipping the model if need be; whether
        it was flipped."""
        if y in self._labels:
            return False
        classes = classes_after(self._labels, [y])
        flipped = len(self._labels) == 1 and classes[0] == self._labels[0]
        if flipped:
            self._negate()  # the provisional positive label is the negative one
            self._collapse.restart_block()  # (its samples were counted as the positive one's)
        self._labels = classes
        return flipped

    def sign_of(self, y) -> float:
        """+1.0 for the positive class, -1.0 for the negative one."""
        y = as_label(y)
        if not self._labels:
            raise inputs.InvalidInput(f"label {y!r} is unknown: the model has not learned any "
                                      "label yet", "unknown_label")
        if y not in self._labels:
            raise inputs.InvalidInput(f"label {y!r} is not one of {list(self.classes)}",
                                      "unknown_label")
        return 1.0 if y == self._labels[-1] else -1.0

    # -- learning -------------------------------------------------------------------------------

    def learn_one(self, x: dict, y: base.typing.ClfTarget, **kwargs) -> None:
        """Learn one sample: a dict of features and its label (one of two: a bool, an int, a
        finite float or a str). `InvalidInput` if it cannot be learned; nothing changes then.
        Every sample weighs the same: a sample weight (River's `w`) other than 1 is a
        `TypeError`."""
        if kwargs:
            self._refuse_weights(kwargs, None)
        names, values = inputs.dict_values(x)
        if self._started and not self._held:
            # The usual sample of a stream: a known label, and inputs the model knows or, under
            # names checked before, 0 (those take no column). Nothing of `_run`'s checks can
            # refuse it (its values are checked), so it goes straight to its step.
            label = as_label(y)
            columns = self._index.lookup(names)
            if label in self._labels and (columns.complete or (
                    columns is self._new_inputs.names_checked
                    and not np.count_nonzero(values.take(columns.unknown)))):
                self._test_then_learn(names, values, label, {}, decide=False)
                return
        elif self._held and self._holds_back():
            # A warm-up row under the names of the latest one held (a stream repeating its
            # keys): `_run` would find no new input, and the count it checked then holds.
            label = as_label(y)
            if label in self._labels and names == self._new_inputs.latest_held_names(self._held):
                self._held.append((names, values, label))
                held = self._held_inputs()
                if not self._holds_back():
                    self._learn_held(dict(held))
                return
        self._run(Rows([(names, values[None, :])]), [y], predict_only_ok=False, vote=False)

    def learn_many(self, X, y, **kwargs) -> None:
        """Learn each row of `X` in order: the same model, bit for bit, as a `learn_one` loop.

        `X` is a pandas DataFrame, a 2-D numpy array whose columns are features 0..d-1, or a
        list of feature dicts.
        """
        rows = Rows.of(X, missing_ok=False)
        if kwargs:
            self._refuse_weights(kwargs, len(rows))
        self._run(rows, batch_labels(y, X, len(rows)), predict_only_ok=False, vote=False)

    def _refuse_weights(self, kwargs: dict, rows: int | None) -> None:
        # River's evaluation and ensembles pass on what a weighted stream yields (`w`): said
        # plainly, and before anything changes, not as an unexpected argument of this base
        # class. No weight (None) or a weight of 1 (for a batch of `rows`, one number or one a
        # row) is every sample's: it changes nothing.
        name = type(self).__name__
        others = [key for key in kwargs if key != "w"]
        if others:
            raise TypeError(f"{name}: unexpected argument {', '.join(map(repr, others))}")
        w = kwargs["w"]
        if w is None or (inputs.is_number(w) and w == 1):
            return
        weights = None if rows is None or isinstance(w, (str, bytes)) else np.asarray(w)
        ones = (weights is not None and weights.shape == (rows,) and weights.dtype.kind in "iuf"
                and bool(np.all(weights == 1)))
        if not ones:
            raise TypeError(f"{name} learns every sample with the same weight: it takes no 'w' "
                            "argument other than 1; drop 'w' from the stream, or repeat or "
                            "resample the samples to weigh them (River's imblearn)")

    def _check_learn_one(self, x: dict, y) -> None:
        """Raise the `InvalidInput` that `learn_one(x, y)` would, changing nothing: a
        one-vs-rest model asks each label's model before any of them learns."""
        names, values = inputs.dict_values(x)
        self._checked(Rows([(names, values[None, :])]), [y], predict_only_ok=False)

    def _check_label(self, y) -> None:
        """`InvalidInput` if learning the label `y` (a label as `as_label` gives it) would make
        a third class."""
        if y not in self._labels:
            classes_after(self._labels, [y])

    def _check_learn_many(self, X, y) -> None:
        """`_check_learn_one` for `learn_many(X, y)`."""
        rows = Rows.of(X, missing_ok=False)
        self._checked(rows, batch_labels(y, X, len(rows)), predict_only_ok=False)

    def decision_then_learn_many(self, X, y) -> np.ndarray:
        """Test-then-train on a batch: each row's margin `g(x)` just before it is learned.

        Row `i` gets exactly the margin `decision_one` would give it after `learn_one` of every
        earlier labelled row, bit for bit, and is then learned; a label `None` means "predict
        only" (the row is not learned). `X` is a DataFrame, a 2-D array or a list of feature
        dicts (whose keys may differ from row to row). Nothing changes if any row is invalid:
        `InvalidInput` is raised first.
        """
        rows, labels = self._predicted_rows(X, y)
        return self._run(rows, labels, predict_only_ok=True)[0]

    def predict_proba_then_learn_many(self, X, y):
        """Test-then-train on a batch: the probabilities `predict_proba_one` would give each row
        just before it is learned, as a DataFrame whose columns are the classes (0 for a class
        not known yet at that row; a row predicted before any label gets the same probability
        for each column). See `decision_then_learn_many`."""
        import pandas as pd

        rows, labels = self._predicted_rows(X, y)
        margins, scales, known = self._run(rows, labels, predict_only_ok=True)
        columns = list(self._labels) or [False, True]
        data = {c: np.zeros(len(margins)) for c in columns}
        for i, (g, s, classes) in enumerate(zip(margins.tolist(), scales, known)):
            if not classes:  # nothing known yet: the frame's columns are the classes to come
                classes = tuple(columns)
            for label, p in self._proba_dict(g, s, classes).items():
                data[label][i] = p
        index = X.index if isinstance(X, pd.DataFrame) else None
        return pd.DataFrame(data, columns=columns, index=index)

    @staticmethod
    def _predicted_rows(X, y) -> tuple[Rows, list]:
        """A test-then-train batch's rows and labels. NaN is a missing input in a row that is
        only predicted (label None), as in `decision_one`, and an error in a row to learn."""
        if isinstance(X, (list, tuple)) or getattr(X, "ndim", 0) == 2:
            # (counted before the mask of rows is matched with them)
            labels = batch_labels(y, X, len(X))
            predict_only = [label is None for label in labels]
        else:  # not a batch: `Rows.of` refuses it
            labels, predict_only = batch_labels(y, X), False
        return Rows.of(X, missing_ok=predict_only), labels

    def _run(self, rows: Rows, labels: list, predict_only_ok: bool, vote: bool = True):
        """Predict each row, then learn it if it has a label; everything is checked first.

        Returns each row's margin before its step, the calibration scale at that time and the
        classes known then. Without `vote`, rows held for a warm-up get no margin (learning
        alone does not read it, and the warm-up's vote is the costly part of holding a row).
        """
        labels, hashes = self._checked(rows, labels, predict_only_ok)
        margins = np.empty(len(labels))
        scales: list[float] = []
        known: list[tuple] = []
        # Started, no row held and every label known (the usual batch): no row is held for a
        # warm-up and none adds a class, so each goes straight to its step.
        steady = self._started and not self._held and all(
            y is None or y in self._labels for y in labels)
        classes = tuple(self._labels)
        i = 0
        for names, values in rows.runs:
            for row in values:
                y = labels[i]
                # What a predict-then-learn loop sees: the model before this row's label.
                scales.append(self._calibration.scale)
                if steady:
                    known.append(classes)
                    margins[i] = self._test_then_learn(names, row, y, hashes, vote)
                    i += 1
                    continue
                known.append(tuple(self._labels))
                held = y is not None and self._holds_back()
                if held:
                    margins[i] = self._unstarted_margins(names, row[None, :])[0] if vote else 0.0
                flipped = y is not None and self._see_label(y)
                if held:
                    self._held.append((names, row, y))
                    if not self._holds_back():
                        self._learn_held(hashes)
                    else:
                        self._held_inputs(hashes)  # (its names are hashed already)
                else:
                    margins[i] = self._test_then_learn(names, row, y, hashes, vote)
                    if flipped:  # negating every term negates the sum exactly: the same bits
                        margins[i] = -margins[i]
                i += 1
        return margins, scales, known

    def _checked(self, rows: Rows, labels: list, predict_only_ok: bool) -> tuple[list, dict]:
        """The labels as labels and the hashes of the inputs the rows bring; `InvalidInput`
        (nothing changed) if the rows cannot all be learned."""
        labels = [None if y is None and predict_only_ok else _learnable(y, i, len(labels))
                  for i, y in enumerate(labels)]
        if not all(y is None or y in self._labels for y in labels):
            classes_after(self._labels, [y for y in labels if y is not None])
        return labels, self._new_inputs.check(rows, labels, self._held, self._rows_to_hold())

    def _learn_held(self, hashes: dict) -> None:
        if not self._started:
            self._start()  # with the held rows in view (a warm-up fits on them)
            self._started = True
        held, self._held = self._held, []
        for names, row, y in held:
            self._test_then_learn(names, row, y, hashes, decide=False)

    def _held_inputs(self, hashes: dict | None = None) -> dict:
        """The inputs of the held rows that the index does not know, with their hashes (see
        `NewInputs.held_inputs`)."""
        return self._new_inputs.held_inputs(self._held, hashes)

    def _test_then_learn(self, names: list, row: np.ndarray, y, hashes: dict,
                         decide: bool = True) -> float:
        """The margin of one row, then (if `y` is a label) its step; returns the margin the
        model predicts the row with (if `decide`; else the one it learns with: learning alone
        does not read it)."""
        v, u, u_names = self._split(names, row)
        missing = [n for n in u_names if type(n) is str and n not in hashes]
        if missing:  # names held back in an earlier call, validated then
            hashes.update(zip(missing, self._index.hash_names(missing).tolist()))
        # Each name with its own hash: 1, 1.0 and True are one key to `hashes` (hashed as the
        # first of them seen), three names to a checkpoint, which hashes each again.
        u_hashes = [hashes[n] if type(n) is str else inputs.key_hash(n) for n in u_names]
        u, u_names, u_hashes = in_hash_order(u, u_names, u_hashes)
        if self._started:
            g = self._row_margin(v, u, u_names, u_hashes)
            shown = self._row_decision(v, u, u_names, u_hashes, g) if decide else g
        else:
            g = shown = float(self._unstarted_margins(names, row[None, :])[0])
        if y is not None:
            self._learn_row(names, v, u, u_names, u_hashes, g, y)
        return shown

    def _learn_row(self, names, v, u, u_names, u_hashes, g: float, y) -> None:
        if not self._started:
            self._start()
            self._started = True
            g = self._row_margin(v, u, u_names, u_hashes)
        if u_names:
            # New inputs get their columns in the order of their hashes, not of the dict's
            # keys: two models fed the same samples with keys in any order are identical.
            hashes = np.asarray(u_hashes, dtype=np.uint64)
            order = np.argsort(hashes, kind="stable")
            u_names = [u_names[j] for j in order.tolist()]
            self._index.add(u_names, hashes[order])
            self._add_inputs(u_names, hashes[order], u[order])
            v = np.concatenate([v, u[order]])
        sign = 1.0 if y == self._labels[-1] else -1.0
        if not math.isfinite(g):  # inputs are bounded, so only a broken state can do this
            raise FloatingPointError("the model's margin is not finite: a numerical failure of "
                                     "the model, not of the sample")
        # A fresh model starts as a constant (f = 0): in its first window, only an f that
        # stayed 0 counts.
        deployed = self._deployed_margin()
        self._watch_collapse(sign, g, self._n_learned < self._collapse.window, deployed, v)
        self._follow(sign, g, deployed)
        self._step(v, sign, g, self._n_learned, names)
        self._calibration.update_one(g, sign)
        self._n_learned += 1

    def _deployed_margin(self) -> tuple[float, float, bool] | None:
        """The margin the model predicts the row of the latest `_row_margin` with, the bias in
        it, and whether the margin is exact (else an estimate, for the collapse watch alone);
        None when it predicts with the function it learns, or has neither at hand."""
        return None

    def _follow(self, sign: float, g: float, deployed: tuple[float, float, bool] | None) -> None:
        """Before the step on a sample of sign `sign`: its learned margin `g` and the one the
        model predicts it with, if another (`_deployed_margin`), for a model that predicts
        with an average of its iterates to tell when that lags behind the stream."""

    def _watch_collapse(self, sign: float, g: float, early: bool,
                        deployed: tuple[float, float, bool] | None, v: np.ndarray) -> None:
        deployed = None if deployed is None else deployed[:2]
        if self._collapse.samples_before_verdict() > 1:  # (`collapsed` stays as it is)
            self._collapse.update(sign, g, self._bias, early, deployed)
            return
        was_collapsed = self._collapse.collapsed
        self._collapse.update(sign, g, self._bias, early, deployed)
        if self._collapse.collapsed and not was_collapsed:
            watch = self._collapse
            if watch.collapsed_deployed:
                why = (f"in its last {watch.blocks} blocks of {watch.block} samples with both "
                       "labels the average of its iterates, which predicts, decided as a "
                       "constant while its latest iterate guessed")
            elif watch.emptied:
                why = (f"over its last block of {watch.block} samples with both labels it "
                       "held nothing (f = 0 at every sample: each step was undone)")
            else:
                why = (f"in its last {watch.blocks} blocks of {watch.block} samples with both "
                       "labels its decisions were one class, or mostly one class, flat or "
                       "following time (in runs, or the previous label's), and no better than "
                       "a guess")
            if watch.longest_run >= collapse.LONG_RUN * watch.block:
                # A model that learns online decides as its latest samples did: after a run of
                # one class, that class, whatever else is wrong.
                why += (f"; before that, {watch.longest_run} samples in a row came with one "
                        "label: a stream in class order (shuffle it) is followed class by class")
            # (A one-vs-rest model's label models say which label they are of.)
            subject = getattr(self, "_subject", None) or type(self).__name__
            warn_caller(f"{subject} predicts a constant: {why} (see `collapsed`)"
                        f"{self._collapse_advice(v)}", collapse.CollapseWarning)

    def _join_one_vs_rest(self, label) -> None:
        """Be the model of `label` in a one-vs-rest model: its decisions are not the
        prediction, only whether `f` ranks the samples is judged for a collapse
        (`CollapseWatch.by_ranking`), and its collapse warning names the label."""
        self._collapse.judge_by_ranking()
        self._subject = f"{type(self).__name__}, the model of label {label!r:.40} in a OneVsRest,"

    def _collapse_advice(self, v: np.ndarray) -> str:
        """What the collapse warning suggests, after its text (empty: nothing); `v` is the
        sample learned when it came, over the model's columns."""
        if self.epsilon > 0:
            return (f". The radius epsilon={self.epsilon:g} may be more than the classes' "
                    "margins can pay: a model trained without it tells")
        return ""

    def _split(self, names: list, row: np.ndarray):
        """One row as (values over the known inputs, nonzero values of unknown ones, their
        names)."""
        v, u, u_names = self._index.split_row(names, row)
        self._new_inputs.check_unknown(len(u_names))
        return v, u, u_names

    @property
    def n_learned(self) -> int:
        """Number of samples learned so far."""
        return self._n_learned

    @property
    def collapsed(self) -> bool:
        """True when the model has collapsed to a constant: over its last two blocks of 128 learned
        samples in which both labels arrived, in each block either all but 2% of the decisions
        were for one class, or `f(x) = g(x) - b` varied by less than 0.1 (a model that learns
        anything spreads its decisions far more) and the decisions were right no more often than
        a constant guess, or the decisions came in runs (switching class under 0.4 times as
        often as independent ones would) on labels that did not, hardly better than a guess (a
        constant at each moment whose level swings with the steps: it decides by time, not by
        input), or echoed the previous sample's label (agreeing with it 4 standard deviations
        more often than independent decisions would) on labels that switch as often as
        independent ones, no better than a guess (a bias step outweighing `f`); in a block with
        under a tenth of one label, the decisions one class (if that label came 7 times or more)
        or `f` 0 at every sample, and in the first 256 samples (a model starts at `f = 0`) the
        latter (see `river_advsvm.collapse`). A model that predicts with the average of its
        iterates (`averaging`) has collapsed when the function it learns has (the average, still
        deciding as before, follows it to that constant over the next `averaging` or so
        samples), unless the average decided both ways, better than a guess, over its latest
        judged block; or when the average decided as a constant while the function it learns
        guessed. A model that has collapsed stays so until the decisions it predicts with are
        both ways and better than a guess over two blocks in a row (with `averaging`, about
        `averaging` samples after the function it learns recovers).
        A warning (`river_advsvm.collapse.CollapseWarning`) is issued when it happens; the
        robustness monitor raises an alert."""
        return self._collapse.collapsed

    def samples_before_collapse_check(self) -> int:
        """How many more labelled samples this model takes before `collapsed` may change (that
        sample included): a run of fewer can be learned at once (`learn_many`) without
        hiding a change of `collapsed` in its middle. During a warm-up, the rows left to hold
        (all held rows are learned with the one that ends it)."""
        holding = self._rows_to_hold()
        if holding:
            return holding
        return self._collapse.samples_before_verdict()

    @property
    def n_held(self) -> int:
        """Labelled samples taken but not learned yet: held back for a warm-up (`gamma='scale'`
        fits its bandwidths on them first), learned, in order, when it ends."""
        return len(self._held)

    @property
    def n_inputs(self) -> int:
        """Number of input columns (feature names) the model knows."""
        return len(self._index)


def _learnable(y, row: int, rows: int):
    """`as_label(y)` for a label to learn, row `row` of `rows`; its `InvalidInput` names the
    row of a batch, and says where a sample without a label (None) goes."""
    try:
        if y is None:
            raise inputs.InvalidInput("label None (no label) cannot be learned: predict such a "
                                      "sample (predict_one), or in a batch "
                                      "predict_proba_then_learn_many, which only predicts the "
                                      "rows without one", "bad_label")
        return as_label(y)
    except inputs.InvalidInput as error:
        if rows == 1:
            raise
        raise inputs.in_row(error, row) from None
