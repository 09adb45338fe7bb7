"""What the binary margin classifiers of this package share: labels, inputs, probabilities,
the one/many API around a dense-numpy core, step sizes, and checkpoints.

A subclass implements the model on dense float arrays (`_decision_dense`, `_gradient_dense`,
`_learn_dense`, ...); this class turns River's dicts and frames into those arrays once per call,
validates everything before any state changes, and maps labels to signs.

"""

from __future__ import annotations

import math
import numbers
import typing

import numpy as np
from river import base

from river_advsvm import calibration, checkpoint, inputs
from river_advsvm.kernels import NORMS

__all__ = ["MarginClassifier"]

SCHEDULES = ("constant", "diminishing")
#: Rows evaluated at once by the batch methods: bounds their temporaries to a few MB.
ROWS_PER_CHUNK = 1024


def _as_label(y):
    if isinstance(y, np.generic):
        y = y.item()
    if isinstance(y, bool) or isinstance(y, str):
        return y
    if isinstance(y, numbers.Integral):
        return int(y)
    if isinstance(y, numbers.Real) and math.isfinite(y):
        return float(y)
    raise inputs.InvalidInput(f"label {y!r} ({type(y).__name__}) is not a bool, number or str")


def _encode_name(name):
    """A feature name as tagged JSON (so that 1, 1.0, '1' and True stay distinct)."""
    if isinstance(name, bool):
        return ["b", name]
    if isinstance(name, numbers.Integral):
        return ["i", int(name)]
    if isinstance(name, numbers.Real):
        return ["f", float(name)]
    if isinstance(name, str):
        return ["s", name]
    if isinstance(name, tuple):
        return ["t", [_encode_name(n) for n in name]]
    raise TypeError(f"feature name {name!r} cannot be saved")


def _decode_name(encoded):
    tag, value = encoded
    decoders = {"b": bool, "i": int, "f": float, "s": str}
    if tag == "t":
        return tuple(_decode_name(v) for v in value)
    if tag not in decoders or not isinstance(value, (bool, int, float, str)):
        raise ValueError(f"bad feature name {encoded!r}")
    return decoders[tag](value)


class MarginClassifier(base.MiniBatchClassifier):
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
    ):
        self.epsilon = epsilon
        self.norm = norm
        self.regularization = regularization
        self.step_size = step_size
        self.schedule = schedule
        self.bias_step_size = bias_step_size
        if not (epsilon >= 0 and math.isfinite(epsilon)):
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
        if not (regularization >= 0 and step_size > 0 and bias_step_size >= 0):
            raise ValueError("regularization and bias_step_size must be >= 0, step_size > 0")
        if not step_size * regularization < 1:
            raise ValueError(
                "step_size * regularization must be < 1, or the shrink factor "
                f"1 - step_size * regularization = {1 - step_size * regularization} flips f"
            )
        if schedule == "diminishing" and regularization == 0:
            raise ValueError("the diminishing schedule 1 / (regularization t) needs regularization > 0")
        self._index = inputs.FeatureIndex()
        self._labels: list = []
        self._calibration = calibration.Temperature()
        self._bias = 0.0
        self._n_learned = 0
        self._started = False

    # -- hooks for subclasses -------------------------------------------------------------------

    def _start(self, first: np.ndarray) -> None:
        """Called once, with the first learned sample's values, before its inputs are added."""

    def _add_inputs(self, hashes: np.ndarray) -> None:
        raise NotImplementedError

    def _decision_dense(self, V, extra_hashes, U) -> np.ndarray:
        raise NotImplementedError

    def _gradient_dense(self, V, extra_hashes, U) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _learn_dense(self, V: np.ndarray, signs: np.ndarray) -> np.ndarray:
        """Learn each row in order; return the margin `g(x)` each row had before its step."""
        raise NotImplementedError

    def _negate(self) -> None:
        raise NotImplementedError

    def _model_state(self) -> tuple[dict, dict]:
        raise NotImplementedError

    def _restore_model_state(self, scalars: dict, arrays: dict) -> None:
        raise NotImplementedError

    # -- shared pieces of the update ------------------------------------------------------------

    def _step_sizes(self, t: int) -> tuple[float, float]:
        """`(eta_t, eta_b_t)` at 0-based step `t`.

        'diminishing' is `eta_0 / (1 + eta_0 lambda t)`: Pegasos' `1 / (lambda (t + t0))` with
        `t0 = 1 / (eta_0 lambda)`, which starts at `step_size` and behaves as `1 / (lambda t)`
        (the paper's `theta / t` with `theta = 1` in its C-scaled form). The bias follows the
        same schedule.
        """
        if self.schedule == "constant":
            return self.step_size, self.bias_step_size
        decay = 1.0 / (1.0 + self.step_size * self.regularization * t)
        return self.step_size * decay, self.bias_step_size * decay

    # -- labels ---------------------------------------------------------------------------------

    @property
    def classes(self) -> tuple:
        """`(negative, positive)` once two labels are known; before that, what has been seen."""
        return tuple(self._labels)

    def _classes_after(self, labels: list) -> list:
        classes = list(self._labels)
        for y in dict.fromkeys(labels):
            if y in classes:
                continue
            if not classes:
                classes = [False, True] if isinstance(y, bool) else [y]
            elif len(classes) == 1:
                pair = [classes[0], y]
                try:
                    pair.sort()
                except TypeError:
                    pass  # unorderable labels: the first one seen is the negative class
                classes = pair
            else:
                raise inputs.InvalidInput(
                    f"label {y!r} would be a third class, this binary classifier knows "
                    f"{classes}; wrap it in river.multiclass.OneVsRestClassifier for more"
                )
        return classes

    def sign_of(self, y) -> float:
        """+1.0 for the positive class, -1.0 for the negative one."""
        y = _as_label(y)
        if y not in self._labels:
            raise inputs.InvalidInput(f"label {y!r} is not one of {self.classes}")
        return 1.0 if y == self._labels[-1] else -1.0

    # -- learning -------------------------------------------------------------------------------

    def learn_one(self, x: dict, y: base.typing.ClfTarget) -> None:
        names, values = inputs.dict_values(x)
        self._learn(names, values[None, :], [y])

    def learn_many(self, X, y) -> None:
        """Learn each row of `X` (a DataFrame, or an array whose columns are features 0..d-1)
        in order: the result equals a `learn_one` loop over the rows, at BLAS speed."""
        names, values = inputs.frame_values(X)
        labels = list(y)
        if len(labels) != len(values):
            raise inputs.InvalidInput(f"{len(values)} samples but {len(labels)} labels")
        self._learn(names, values, labels)

    def _learn(self, names: list, values: np.ndarray, labels: list) -> None:
        # Everything that can fail runs first: an invalid sample leaves the model untouched.
        labels = [_as_label(y) for y in labels]
        classes = self._classes_after(labels)
        new_names = self._index.unknown(names)
        new_hashes = self._index.hash_names(new_names)
        if not labels:
            return

        if len(self._labels) == 1 and len(classes) == 2 and classes[0] == self._labels[0]:
            self._negate()  # the provisional positive label is the negative one
        self._labels = classes
        if not self._started:
            self._start(values[0])
            self._started = True
        if new_names:
            self._index.add(new_names, new_hashes)
            self._add_inputs(new_hashes)
        V, _, _ = self._index.dense(names, values)
        positive = self._labels[-1]
        signs = np.array([1.0 if y == positive else -1.0 for y in labels])
        margins = self._learn_dense(V, signs)
        self._calibration.update(margins, signs)
        self._n_learned += len(labels)

    @property
    def n_learned(self) -> int:
        """Number of samples learned so far."""
        return self._n_learned

    # -- inference ------------------------------------------------------------------------------

    def _dense_for_inference(self, names: list, values: np.ndarray):
        V, unknown, U = self._index.dense(names, values)
        return V, self._index.hash_names(unknown), U

    def _decision(self, names: list, values: np.ndarray) -> np.ndarray:
        if not self._started:
            return np.full(len(values), self._bias)
        # In chunks, so that a large batch never materialises a (rows x features) matrix whole.
        return np.concatenate([
            self._decision_dense(*self._dense_for_inference(names, values[i : i + ROWS_PER_CHUNK]))
            for i in range(0, max(len(values), 1), ROWS_PER_CHUNK)
        ])

    def decision_one(self, x: dict) -> float:
        """The margin `g(x) = f(x) + b`; positive means the positive class."""
        names, values = inputs.dict_values(x)
        return float(self._decision(names, values[None, :])[0])

    def decision_many(self, X) -> np.ndarray:
        """`g(x)` for each row of a DataFrame, or of an array whose columns are features 0..d-1."""
        names, values = inputs.frame_values(X)
        return self._decision(names, values)

    def _gradient(self, names: list, values: np.ndarray) -> np.ndarray:
        """`d g / d x` over `names`, one row per sample."""
        values = np.atleast_2d(values)
        if not self._started:
            return np.zeros_like(values)
        positions = self._index.positions(names)
        known = positions >= 0
        G = np.empty_like(values)
        for i in range(0, len(values), ROWS_PER_CHUNK):
            rows = slice(i, i + ROWS_PER_CHUNK)
            GV, GU = self._gradient_dense(*self._dense_for_inference(names, values[rows]))
            G[rows, known] = GV[:, positions[known]]
            G[rows, ~known] = GU
        return G

    def decision_gradient_one(self, x: dict) -> dict:
        """The analytic gradient of `g` at `x`, one entry per feature of `x`."""
        names, values = inputs.dict_values(x)
        return dict(zip(names, self._gradient(names, values[None, :])[0].tolist()))

    def decision_gradient_many(self, X):
        """Gradients of `g`, row by row: an array for an array, a DataFrame for a DataFrame."""
        names, values = inputs.frame_values(X)
        G = self._gradient(names, values)
        if isinstance(X, np.ndarray):
            return G
        import pandas as pd

        return pd.DataFrame(G, columns=X.columns, index=X.index)

    def _proba_dict(self, margin: float) -> dict:
        if len(self._labels) == 1:
            return {self._labels[0]: 1.0}
        negative, positive = self._labels or (False, True)
        # Each side from its own margin: 1 - p would round to 0 once p is within 1e-16 of 1.
        return {negative: float(self._calibration.proba(-margin)),
                positive: float(self._calibration.proba(margin))}

    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        """Probabilities from the margin by online temperature scaling (`calibration`)."""
        return self._proba_dict(self.decision_one(x))

    def predict_one(self, x: dict, **kwargs):
        """The sign of the margin: the positive class when `g(x) > 0`."""
        return self._label_of(self.decision_one(x))

    def _label_of(self, margin: float):
        if len(self._labels) == 1:
            return self._labels[0]
        negative, positive = self._labels or (False, True)
        return positive if margin > 0 else negative

    def predict_proba_many(self, X):
        import pandas as pd

        margins = self.decision_many(X)
        index = X.index if hasattr(X, "index") else None
        if len(self._labels) == 1:
            return pd.DataFrame({self._labels[0]: np.ones(len(margins))}, index=index)
        negative, positive = self._labels or (False, True)
        return pd.DataFrame(
            {negative: self._calibration.proba(-margins), positive: self._calibration.proba(margins)},
            index=index,
        )

    def predict_many(self, X):
        import pandas as pd

        margins = self.decision_many(X)
        index = X.index if hasattr(X, "index") else None
        return pd.Series([self._label_of(m) for m in margins.tolist()], index=index, dtype=object)

    # -- certificates ---------------------------------------------------------------------------

    def _certified_radii(self, names: list, margins: np.ndarray, norm: str) -> np.ndarray:
        """Radii for samples over `names` with margins `y g(x)` (see `river_advsvm.certify`)."""
        raise NotImplementedError

    def _certified(self, names: list, values: np.ndarray, labels: list, norm: str | None):
        if len(labels) != len(values):
            raise inputs.InvalidInput(f"{len(values)} samples but {len(labels)} labels")
        norm = self.norm if norm is None else norm
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        signs = np.array([self.sign_of(y) for y in labels])
        margins = signs * self._decision(names, values)
        return self._certified_radii(names, margins, norm)

    def certified_radius_one(self, x: dict, y, norm: str | None = None) -> float:
        """The radius within which the model provably keeps predicting `y` around `x`.

        Sound for the model as deployed, against any attack: no `x'` with `||x' - x|| <` the
        radius (in `norm`, the model's own by default) changes the prediction. 0 when the model
        does not predict `y` at `x`. See `river_advsvm.certify` for the bounds behind it.
        """
        names, values = inputs.dict_values(x)
        return float(self._certified(names, values[None, :], [y], norm)[0])

    def certified_radius_many(self, X, y, norm: str | None = None) -> np.ndarray:
        """`certified_radius_one` for each row of a DataFrame, or of an array whose columns are
        features 0..d-1."""
        names, values = inputs.frame_values(X)
        return self._certified(names, values, list(y), norm)

    # -- checkpoints ----------------------------------------------------------------------------

    def to_checkpoint(self, extra: dict | None = None) -> tuple[dict, dict]:
        """The model as checkpoint metadata and arrays (see `save`)."""
        scalars, arrays = self._model_state()
        state = {
            "names": [_encode_name(n) for n in self._index.names],
            "labels": list(self._labels),
            "bias": self._bias,
            "n_learned": self._n_learned,
            "started": self._started,
            "temperature": [self._calibration.scale, self._calibration.grad_squares],
            "model": scalars,
        }
        meta = {
            "class": type(self).__name__,
            "params": self._get_params(),
            "state": state,
            "extra": extra or {},
        }
        return meta, arrays

    @classmethod
    def from_checkpoint(cls, meta: dict, arrays: dict) -> typing.Self:
        """Rebuild a model from `to_checkpoint`'s output; raises `CheckpointError` if invalid."""
        if meta.get("class") != cls.__name__:
            raise checkpoint.CheckpointError(
                f"checkpoint holds a {meta.get('class')!r}, not a {cls.__name__}"
            )
        try:
            model = cls(**meta["params"])
            state = meta["state"]
            names = [_decode_name(n) for n in state["names"]]
            if len(set(names)) != len(names):
                raise ValueError("duplicate feature names")
            labels = [_as_label(y) for y in state["labels"]]
            if len(labels) > 2 or len(set(labels)) != len(labels):
                raise ValueError(f"bad labels {labels!r}")
            model._labels = labels
            model._bias = float(state["bias"])
            model._n_learned = int(state["n_learned"])
            model._started = bool(state["started"])
            model._calibration.scale, model._calibration.grad_squares = map(
                float, state["temperature"]
            )
            hashes = model._index.hash_names(names)
            model._index.add(names, hashes)
            model._restore_model_state(state["model"], arrays)
            numbers_ok = [model._bias, model._calibration.scale, model._calibration.grad_squares]
            if not all(math.isfinite(v) for v in numbers_ok) or model._n_learned < 0:
                raise ValueError("non-finite or negative state")
        except checkpoint.CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise checkpoint.CheckpointError(f"invalid {cls.__name__} checkpoint: {error}") from None
        return model

    def save(self, path, extra: dict | None = None) -> None:
        """Write the model to `path` atomically, in the safe format of `checkpoint`.

        `extra` is JSON metadata stored alongside (a service's offsets, say).
        """
        checkpoint.write(path, *self.to_checkpoint(extra))

    @classmethod
    def load(cls, path) -> typing.Self:
        """Read a model written by `save`. It predicts and learns exactly as the saved one."""
        return cls.from_checkpoint(*checkpoint.read(path))
