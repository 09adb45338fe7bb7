"""The prediction side of the margin classifiers (`river_advsvm.margin.MarginClassifier`):
margins, their input gradients, probabilities, labels and certified radii, for one sample (a
dict) or many (a DataFrame or an array), in chunks of rows that bound the temporaries."""

from __future__ import annotations

import numpy as np

from river_advsvm import calibration, inputs
from river_advsvm.kernels import check_norm
from river_advsvm.warn import warn_caller

__all__ = ["ROWS_PER_CHUNK", "MarginPredictions", "batch_labels", "in_hash_order"]

#: Rows evaluated at once by the batch inference methods: bounds their temporaries.
ROWS_PER_CHUNK = 1024


def in_hash_order(u: np.ndarray, u_names: list, u_hashes: list) -> tuple[np.ndarray, list, list]:
    """One row's unknown inputs in the order of their hashes, as the model stores new inputs:
    sums over them, and so the margin, do not depend on the order of the sample's keys."""
    if len(u_names) < 2:
        return u, u_names, u_hashes
    order = np.argsort(np.asarray(u_hashes, dtype=np.uint64), kind="stable").tolist()
    return u[order], [u_names[j] for j in order], [u_hashes[j] for j in order]


def batch_labels(y, X=None, rows: int | None = None) -> list:
    """The labels of a batch as a list, one per row: from a list, a tuple, a 1-d array or a
    pandas Series, whose missing values (NaN, None, NA: pandas keeps a None among str labels
    as NaN) are None. `InvalidInput` for what `list(y)` would misread: a DataFrame (its column
    names), a str (its characters), a dict (its keys), a set (its hash order), a 2-d array, or
    a single label; for
    a Series whose index is not that of the DataFrame `X` (rows are matched by position); and,
    given the batch's number of `rows`, for another number of labels."""
    labels = _labels_of(y, X)
    if rows is not None and len(labels) != rows:
        raise inputs.InvalidInput(f"{rows} samples but {len(labels)} labels", "bad_shape")
    return labels


def _labels_of(y, X) -> list:
    ndim = getattr(y, "ndim", 1)
    if hasattr(y, "isna") and ndim == 1:  # a Series, a pandas array or a Categorical
        index = getattr(X, "index", None)
        if _is_series(y) and index is not None and hasattr(X, "columns") \
                and not index.equals(y.index):
            raise inputs.InvalidInput(
                "y's index is not X's: rows and labels are matched by position, so align them "
                "first (y.loc[X.index]) or pass y.to_numpy()", "bad_shape")
        missing = np.asarray(y.isna())
        labels = y.tolist()
        if missing.any():
            labels = [None if m else label for label, m in zip(labels, missing.tolist())]
        return labels
    if isinstance(y, (set, frozenset)):  # (iterated in hash order: no row of its own)
        raise inputs.InvalidInput(f"y must hold one label per row in the rows' order, got a "
                                  f"{type(y).__name__}, which has no order: pass a list",
                                  "bad_shape")
    if not isinstance(y, (str, bytes, dict)) and ndim == 1:
        try:
            return list(y)
        except TypeError:  # a single label
            pass
    shape = f" of shape {y.shape}" if ndim != 1 else ""
    raise inputs.InvalidInput(f"y must hold one label per row (a list, a 1-d array or a "
                              f"pandas Series), got a {type(y).__name__}{shape}", "bad_shape")


def _is_series(y) -> bool:
    return hasattr(y, "isna") and hasattr(y, "index") and getattr(y, "ndim", 0) == 1


class MarginPredictions:
    """What a margin classifier answers without learning: `decision_*`, `decision_gradient_*`,
    `predict_*`, `predict_proba_*` and `certified_radius_*`.

    A mixin of `MarginClassifier`, which holds the state it reads (the input index, the
    labels, the calibration) and the model's hooks: `_row_decision` for one row,
    `_decision_block` and `_gradient_block` for many, `_certified_radii`.
    """

    # -- inference ------------------------------------------------------------------------------

    def _unknown_hashes(self, u_names: list) -> list:
        return list(self._index.hash_names(u_names)) if u_names else []

    def _check_unstarted_names(self, names: list, values: np.ndarray) -> None:
        """Refuse, in the warm-up, a name the model could not hash (None, bytes, NaN), and a
        sample with more than `max_features` inputs it does not know, as the started model
        refuses them: inputs it does not know with a nonzero value."""
        # The names of the latest held row are hashed already (a stream repeating its keys,
        # as in progressive validation): hashing them again at every vote made the warm-up
        # cost a hash per input per prediction. (They are at most max_features: held.)
        if self._held:
            if names == self._new_inputs.latest_held_names(self._held):
                return
        columns = self._index.lookup(names).unknown
        nonzero = np.atleast_2d(values)[:, columns] != 0
        self._new_inputs.check_unknown(int(nonzero.sum(axis=1).max(initial=0)))
        present = nonzero.any(axis=0)
        if present.any():
            self._index.hash_names([names[j] for j in columns[present].tolist()])

    def _decision_of_row(self, names: list, row: np.ndarray) -> float:
        if not self._started:
            self._check_unstarted_names(names, row)
            return float(self._unstarted_margins(names, row[None, :])[0])
        v, u, u_names = self._split(names, row)
        # (The names hashed first: a name it refuses warned, once per model, of a sample it
        # then did not decide, and the warning was spent.)
        ordered = in_hash_order(u, u_names, self._unknown_hashes(u_names))
        if len(u_names) == len(names):
            self._warn_if_nothing_known(names)
        return self._row_decision(v, *ordered)

    def _warn_if_nothing_known(self, names: list) -> None:
        """Once per model: a sample none of whose inputs the model learned is decided from
        inputs every stored vector holds as 0, which is almost never what was meant (an array's
        columns are named 0..d-1, a DataFrame's by its columns)."""
        if self._nothing_known_warned or not len(self._index):
            return
        self._nothing_known_warned = True

        learned, given = (", ".join(inputs.shown_name(n) for n in some[:3])
                          for some in (self._index.names, names))
        what = f"none of the inputs given ({given}, ...) is one" if names else "the sample has none"
        # (The hint is for an array after a DataFrame; on a stream of words a sample of new
        # ones only is ordinary.)
        hint = (". An array's columns are named 0..d-1: to use a model learned from a "
                "DataFrame, pass a DataFrame with its columns"
                if names and all(type(n) is int for n in names[:3]) else "")
        warn_caller(f"{type(self).__name__}: {what} of the inputs it learned ({learned}, ...): "
                    f"it decides as if every learned input were 0{hint}", UserWarning)

    def _dense(self, names: list, values: np.ndarray, keep_zero: bool = False):
        """`(V, U, unknown names, their hashes)`; unknown inputs that are 0 in every row are
        dropped (they cost nothing) unless `keep_zero` (an attacker may move them)."""
        V, unknown, U = self._index.dense(names, values)
        nothing_known = len(unknown) == len(names) and len(V)  # (no rows: no sample)
        nonzero = U != 0
        keep = nonzero.any(axis=0) | keep_zero
        # The bound is on each sample's (kept) unknown inputs: a batch's rows may bring others.
        self._new_inputs.check_unknown(len(unknown) if keep_zero
                                       else int(nonzero.sum(axis=1).max(initial=0)))
        if not keep.all():
            unknown = [n for n, k in zip(unknown, keep.tolist()) if k]
            U = U[:, keep]
        hashes = self._unknown_hashes(unknown)  # (a name it refuses: no warning spent)
        if nothing_known:
            self._warn_if_nothing_known(names)
        return V, U, unknown, hashes

    def _decision(self, names: list, values: np.ndarray) -> np.ndarray:
        # In chunks, so that a large batch never materialises a (rows x features) matrix whole,
        # nor, during a warm-up, a (rows x held rows) one for the vote.
        if not self._started:
            self._check_unstarted_names(names, values)

            def block(rows):
                return self._unstarted_margins(names, rows)
        else:
            def block(rows):
                return self._decision_block(*self._dense(names, rows))
        return np.concatenate([block(values[i : i + ROWS_PER_CHUNK])
                               for i in range(0, max(len(values), 1), ROWS_PER_CHUNK)])

    def decision_one(self, x: dict) -> float:
        """The margin `g(x) = f(x) + b`; positive means the positive class. NaN values count
        as missing."""
        names, values = inputs.dict_values(x, missing_ok=True)
        return float(self._decision_of_row(names, values))

    def decision_many(self, X) -> np.ndarray:
        """`g(x)` for each row of a DataFrame, or of an array whose columns are features 0..d-1.

        NaN values count as missing. The margins equal `decision_one`'s up to rounding (a
        batch is one matrix product).
        """
        names, values = inputs.frame_values(X, missing_ok=True)
        return self._decision(names, values)

    def _gradient(self, names: list, values: np.ndarray) -> np.ndarray:
        """`d g / d x` over `names`, one row per sample."""
        values = np.atleast_2d(values)
        if not self._started:
            return np.zeros_like(values)
        columns = self._index.lookup(names)
        G = np.zeros_like(values)
        for i in range(0, len(values), ROWS_PER_CHUNK):
            rows = slice(i, i + ROWS_PER_CHUNK)
            V, U, unknown, hashes = self._dense(names, values[rows], keep_zero=True)
            GV, GU = self._gradient_block(V, U, unknown, hashes)
            G[rows, columns.known] = GV[:, columns.known_columns]
            if unknown:
                G[rows, columns.unknown] = GU
        return G

    def decision_gradient_one(self, x: dict) -> dict:
        """The analytic gradient of `g` at `x`, one entry per feature of `x`."""
        names, values = inputs.dict_values(x, missing_ok=True)
        return dict(zip(names, self._gradient(names, values[None, :])[0].tolist()))

    def decision_gradient_many(self, X):
        """Gradients of `g`, row by row: an array for an array, a DataFrame for a DataFrame."""
        names, values = inputs.frame_values(X, missing_ok=True)
        G = self._gradient(names, values)
        if not hasattr(X, "index"):  # an array, or rows that are not a pandas DataFrame
            return G
        import pandas as pd

        return pd.DataFrame(G, columns=X.columns, index=X.index)

    def _proba_dict(self, margin: float, scale: float | None = None,
                    classes: tuple | None = None) -> dict:
        classes = tuple(self._labels) if classes is None else classes
        if len(classes) == 1:
            return {classes[0]: 1.0}
        negative, positive = classes or (False, True)  # River's binary convention
        s = self._calibration.scale if scale is None else scale
        # Each side from its own margin: 1 - p would round to 0 once p is within 1e-16 of 1.
        return {negative: calibration.probability_one(s, -margin),
                positive: calibration.probability_one(s, margin)}

    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        """Probabilities from the margin by online temperature scaling (`calibration`); 0.5 for
        `False` and `True` before any label is known (River's binary convention)."""
        return self._proba_dict(self.decision_one(x))

    def predict_one(self, x: dict, **kwargs):
        """The sign of the margin: the positive class when `g(x) > 0`; None before any label
        is known."""
        return self._label_of(self.decision_one(x))

    def _label_of(self, margin: float):
        if len(self._labels) < 2:
            return self._labels[0] if self._labels else None
        negative, positive = self._labels
        return positive if margin > 0 else negative

    def predict_proba_many(self, X):
        """`predict_proba_one` for each row of a DataFrame, or of an array whose columns are
        features 0..d-1: a DataFrame with a column per class (X's index for a DataFrame)."""
        import pandas as pd

        margins = self.decision_many(X)
        index = X.index if hasattr(X, "index") else None
        if len(self._labels) == 1:
            return pd.DataFrame({self._labels[0]: np.ones(len(margins))}, index=index)
        # Before any label, River's binary convention, as `predict_proba_one` (a frame of no
        # columns would also have no rows for an array).
        negative, positive = self._labels or (False, True)
        return pd.DataFrame(
            {negative: self._calibration.proba(-margins),
             positive: self._calibration.proba(margins)},
            index=index,
        )

    def predict_many(self, X):
        """`predict_one` for each row of a DataFrame, or of an array whose columns are features
        0..d-1: a Series of labels (X's index for a DataFrame)."""
        import pandas as pd

        margins = self.decision_many(X)
        index = X.index if hasattr(X, "index") else None
        return pd.Series([self._label_of(m) for m in margins.tolist()], index=index, dtype=object)

    # -- certificates ---------------------------------------------------------------------------

    def _certified_radii(self, names: list, values: np.ndarray, margins: np.ndarray, norm: str,
                         bounds) -> np.ndarray:
        """Radii for samples `values` over `names` with margins `y g(x)`
        (`river_advsvm.certify`)."""
        raise NotImplementedError

    def _certified(self, names: list, values: np.ndarray, labels: list, norm: str | None,
                   bounds=None):
        norm = self.norm if norm is None else norm
        check_norm(norm)
        bounds = inputs.check_box(bounds)
        moved = inputs.onto_box(values, bounds, present_only=True)
        signs = np.array([self.sign_of(y) for y in labels])
        if len(self._labels) == 1:  # (it predicts its one label whatever the input)
            return np.full(len(labels), np.inf)
        margins = signs * self._decision(names, moved)
        radii = self._certified_radii(names, moved, margins, norm, bounds)
        if moved is values:
            return radii
        # An input moved onto the box's edge (rounding): the ball around the sample lies in
        # the one around the moved point, of the radius plus the move.
        shift = np.nan_to_num(np.abs(moved - values))  # (a missing input stays missing)
        moves = np.sqrt(np.square(shift).sum(axis=1)) if norm == "l2" else shift.max(axis=1)
        return np.maximum(radii - moves, 0.0)

    def certified_radius_one(self, x: dict, y, norm: str | None = None, bounds=None) -> float:
        """The radius within which the model provably keeps predicting `y` around `x`.

        Sound for the model as deployed, against any attack: no `x'` with `||x' - x|| <` the
        radius (in `norm`, the model's own by default) changes the prediction. 0 when the model
        does not predict `y` at `x`; infinite while it knows one label, which it predicts
        everywhere. `bounds = (lo, hi)` restricts `x'` to that box, as the
        attacks do: the radius is then never smaller than without it, up to the radius
        search's relative precision (1e-6). See `river_advsvm.certify`.

        `x'` may change every input the model knows (learned, or named in a `gamma` dict; one
        absent from `x` is the 0 it counts as) and the inputs of `x`. It does not add inputs
        beyond those: in L-inf each added input could move by the whole radius, and enough of
        them take the point arbitrarily far. (A frame's or an array's inputs are its columns.)
        """
        names, values = inputs.dict_values(x, missing_ok=True)
        return float(self._certified(names, values[None, :], [y], norm, bounds)[0])

    def certified_radius_many(self, X, y, norm: str | None = None, bounds=None) -> np.ndarray:
        """`certified_radius_one` for each row of a DataFrame, or of an array whose columns are
        features 0..d-1."""
        names, values = inputs.frame_values(X, missing_ok=True)
        return self._certified(names, values, batch_labels(y, X, len(values)), norm, bounds)
