"""One-vs-rest over this package's margin classifiers, with a certificate for the multi-class
prediction.

River's `OneVsRestClassifier` predicts the label whose binary model gives the highest
probability. This package's models map the margin to a probability by temperature scaling,
`P = sigmoid(s g(x))` with `s > 0`, kept off 0.5 where the sigmoid rounds to it
(`calibration.probability`), so `P > 0.5` exactly when `g(x) > 0`. Hence if, around `x`,
the model of the true label keeps `g > 0` and every other model keeps `g < 0`, the true label
keeps the highest probability: the smallest of the binary models' certified radii (each for its
own verdict, "mine" or "not mine") certifies the multi-class prediction. It is sound, and
conservative: a sample predicted right while another label's model also says "mine" gets 0.

The margin API itself (`decision_*`, gradients) stays binary: attacks reach a one-vs-rest model
through its probabilities (`river_advsvm.attacks`, black box).

`save` / `load` use the package's safe checkpoint format: the binary models' own checkpoints,
one after the other in one array, each read with its own checks and bound.

"""

from __future__ import annotations

import math
import typing

import numpy as np
import pandas as pd
from river import multiclass

from river_advsvm import checkpoint, inputs, model_checkpoint
from river_advsvm.kernels import check_norm
from river_advsvm.labels import as_label
from river_advsvm.margin_predict import batch_labels

__all__ = ["OneVsRest"]


class OneVsRest(multiclass.OneVsRestClassifier):
    """River's `OneVsRestClassifier` with `certified_radius_one` / `certified_radius_many`.

    Parameters
    ----------
    classifier
        A binary classifier of this package (`AdvKernelSVM`, `AdvLinearSVM`), cloned per label.
        Every label seen adds one, kept for ever, and every sample is learned by each: memory
        and time grow with the number of labels (up to that many times the binary model's
        bound), as in River's; a stream of open labels needs them mapped to a known set.

    Examples
    --------

    >>> from river_advsvm import AdvLinearSVM
    >>> from river_advsvm.multiclass import OneVsRest

    >>> model = OneVsRest(AdvLinearSVM())
    >>> for _ in range(100):
    ...     model.learn_one({"a": 0.1, "b": 0.1}, "low")
    ...     model.learn_one({"a": 0.9, "b": 0.1}, "right")
    ...     model.learn_one({"a": 0.1, "b": 0.9}, "up")

    >>> x = {"a": 0.15, "b": 0.1}
    >>> model.predict_one(x)
    'low'
    >>> round(model.certified_radius_one(x, "low"), 3)
    0.094
    >>> model.certified_radius_one(x, "up")
    0.0

    """

    def __init__(self, classifier):
        if isinstance(classifier, type):
            raise TypeError(f"classifier must be a model, not the class {classifier.__name__}: "
                            f"OneVsRest({classifier.__name__}()) clones it per label")
        if not hasattr(classifier, "certified_radius_many"):
            raise TypeError(f"{type(classifier).__name__} has no certified radius; "
                            "use river.multiclass.OneVsRestClassifier")
        super().__init__(classifier)

    def learn_one(self, x: dict, y, **kwargs) -> None:
        # The binary models only ever see `y == label`: the label is checked here, as they
        # check theirs (a NaN, never equal to itself, would be a new class at every sample).
        self._learn(self._learn_sample, x, _label_to_learn(y), **kwargs)

    def _check_label(self, y) -> None:
        """`InvalidInput` if `learn_one` would refuse the label `y` (as `as_label` gives it):
        a new label is a new class, but None is no label. (A monitor asks this, as it asks the
        binary models, before it counts a sample.)"""
        _label_to_learn(y)

    def _member(self, label):
        """A new model of `label`: a clone of the binary model, judged for a collapse by
        whether it ranks, not by its decisions (those of a rare label's model are one class
        by right; the prediction is the label of the highest probability)."""
        model = self.classifier.clone()
        model._join_one_vs_rest(label)
        return model

    def _learn_sample(self, x: dict, y, **kwargs) -> None:
        if y not in self.classifiers:
            self.classifiers[y] = self._member(y)
        # Every label's model checks the sample before any learns it: one still in its warm-up
        # counts inputs (zero-valued ones) against max_features that a started one does not.
        for label, model in self.classifiers.items():
            model._check_learn_one(x, y == label)
        super().learn_one(x, y, **kwargs)

    def learn_many(self, X, y, **kwargs) -> None:
        """Learn a batch: `X` a DataFrame, or an array whose columns are features 0..d-1, as
        for the binary models; `y` a sequence of labels. The same models, bit for bit, as a
        `learn_one` loop over the rows: a label's model starts at the label's first row."""
        X = _frame(X)
        labels = []
        for i, label in enumerate(batch_labels(y, X, len(X))):
            try:
                labels.append(_label_to_learn(label))
            except inputs.InvalidInput as error:
                raise inputs.in_row(error, i) from None
        y = pd.Series(labels, index=X.index, name=y.name if isinstance(y, pd.Series) else None,
                      dtype=object)
        self._learn(self._learn_batch, X, y, **kwargs)

    def _learn_batch(self, X: pd.DataFrame, y: pd.Series, **kwargs) -> None:
        # River's one-vs-rest gives a new label's model the whole batch, the rows before the
        # label's first one too, which a `learn_one` loop never shows it.
        first: dict = {}
        for i, label in enumerate(y.tolist()):
            first.setdefault(label, 0 if label in self.classifiers else i)
        for label in first:
            if label not in self.classifiers:
                self.classifiers[label] = self._member(label)
        batches = [(model, X.iloc[first.get(label, 0):], y.iloc[first.get(label, 0):] == label)
                   for label, model in self.classifiers.items()]
        for model, rows, mine in batches:  # each model checks its rows before any learns (above)
            model._check_learn_many(rows, mine)
        self._y_name = y.name  # (saved with the model: not for a refused batch)
        for model, rows, mine in batches:
            model.learn_many(rows, mine, **kwargs)

    @classmethod
    def _unit_test_params(cls):
        # River's yields its LogisticRegression, which has no certified radius.
        from river_advsvm import AdvKernelSVM, AdvLinearSVM

        yield {"classifier": AdvLinearSVM()}
        yield {"classifier": AdvKernelSVM(seed=0)}

    def predict_proba_many(self, X, **kwargs) -> pd.DataFrame:
        """Each label's probability, per row of a DataFrame or of an array whose columns are
        features 0..d-1: `predict_proba_one`'s, row by row."""
        proba = super().predict_proba_many(_frame(X), **kwargs)
        # Where every label's probability rounds to 0, River's batch divides 0 by 0 (NaN) and
        # its predict_proba_one gives each label the same share: as here.
        if len(proba.columns):
            proba.loc[proba.isna().all(axis=1), :] = 1.0 / len(proba.columns)
        return proba

    def predict_many(self, X, **kwargs) -> pd.Series:
        """The most probable label, per row of a DataFrame or of an array whose columns are
        features 0..d-1."""
        return super().predict_many(_frame(X), **kwargs)

    # -- saving and loading -------------------------------------------------------------------

    def to_checkpoint(self, extra: dict | None = None) -> tuple[dict, dict]:
        """Checkpoint metadata and arrays of the model (see `save`)."""
        models = [self.classifier, *self.classifiers.values()]
        stored = [model_checkpoint.pack(*model.to_checkpoint()) for model in models]
        nested = [checkpoint.dumps(*form) for form in stored]
        meta = {"class": type(self).__name__, "classifier": type(self.classifier).__name__,
                "params": stored[0][0]["params"], "labels": list(self.classifiers),
                "y_name": _saved_name(self._y_name),
                "extra": extra or {}}
        lengths = np.array([len(data) for data in nested], dtype=np.int64)
        return meta, {"models": np.frombuffer(b"".join(nested), dtype=np.uint8),
                      "model_bytes": lengths}

    def save(self, path, extra: dict | None = None) -> None:
        """Write the model to `path` atomically: the binary model it clones and each label's,
        in the safe format of `river_advsvm.checkpoint` (`extra`: JSON stored alongside)."""
        checkpoint.write(path, *self.to_checkpoint(extra))

    @classmethod
    def checkpoint_array_bytes(cls, meta: dict) -> int:
        """The most array bytes a checkpoint with this metadata may hold: one binary
        checkpoint of its parameters per label, and one for the model it clones."""
        binary = _binary_class(meta)
        labels = meta.get("labels")
        if not isinstance(labels, list):
            raise checkpoint.CheckpointError("invalid OneVsRest checkpoint: no list of labels")
        arrays = binary.checkpoint_array_bytes({"class": binary.__name__,
                                                "params": meta.get("params"),
                                                "state": {"names": 0}})
        return (len(labels) + 1) * (arrays + _NESTED_OVERHEAD)

    @classmethod
    def from_checkpoint(cls, meta: dict, arrays: dict) -> OneVsRest:
        """Rebuild a model from `to_checkpoint`'s output; `CheckpointError` if invalid."""
        binary = _binary_class(meta)
        try:
            labels = [as_label(y) for y in meta["labels"]]
            if len(set(labels)) != len(labels):  # (1, 1.0 and True are one label to a dict)
                raise ValueError("a label twice")
            data, lengths = arrays["models"], arrays["model_bytes"]
            if data.dtype != np.uint8 or data.ndim != 1 or lengths.dtype != np.int64 \
                    or lengths.shape != (len(labels) + 1,) or (lengths < 0).any() \
                    or int(lengths.sum()) != data.size:
                raise ValueError("the binary models' bytes do not match their lengths")
            bound = binary.checkpoint_array_bytes
            ends = np.cumsum(lengths).tolist()
            models = []
            for start, end in zip([0, *ends[:-1]], ends):
                stored = checkpoint.loads(data[start:end].tobytes(), max_array_bytes=bound)
                # The parameters the file shows (`read_meta`) and sizes its arrays by are the
                # models': a binary model of a larger budget would lift what they say. (Both
                # in the stored form, where a dict of bandwidths is named, not listed.)
                if stored[0].get("params") != meta["params"]:
                    raise ValueError("a binary model has other parameters than the checkpoint's")
                models.append(binary.from_checkpoint(*model_checkpoint.unpack(*stored)))
        except (KeyError, TypeError, ValueError, AttributeError) as error:  # CheckpointError too
            raise checkpoint.CheckpointError(f"invalid OneVsRest checkpoint: {error}") from None
        template, *per_label = models
        params = template._get_params()
        if any(model._get_params() != params for model in per_label):
            raise checkpoint.CheckpointError("invalid OneVsRest checkpoint: a label's model has "
                                             "other parameters than the model it clones")
        # A label's model learns whether a sample is of its label: True or False, nothing else
        # (another class would stop its learning at the next sample).
        for label, binary_model in zip(labels, per_label):
            if not all(type(y) is bool for y in binary_model.classes):
                raise checkpoint.CheckpointError(
                    f"invalid OneVsRest checkpoint: the model of label {label!r:.40} has the "
                    f"classes {list(binary_model.classes)!r:.60}, not True and False")
        for label, binary_model in zip(labels, per_label):
            binary_model._join_one_vs_rest(label)
        model = cls(template)
        model.classifiers = dict(zip(labels, per_label))
        model._y_name = _saved_name(meta.get("y_name"))
        return model

    @classmethod
    def load(cls, path) -> OneVsRest:
        """Read a model written by `save`. It predicts and learns exactly as the saved one (the
        name its `predict_many` gives the labels is kept when a str, bool, int or float)."""
        return cls.from_checkpoint(
            *checkpoint.read(path, max_array_bytes=cls.checkpoint_array_bytes))

    def _learn(self, learn, *args, **kwargs) -> None:
        known, y_name = list(self.classifiers), self._y_name
        try:
            learn(*args, **kwargs)
        except Exception:
            # Refused: the models of the labels it brought, added first, go too (an untrained
            # model would take a share of every prediction and zero every certificate), and
            # the labels' name is as it was.
            for label in [label for label in self.classifiers if label not in known]:
                del self.classifiers[label]
            self._y_name = y_name
            raise

    def certified_radius_many(self, X, y, norm: str | None = None, bounds=None) -> np.ndarray:
        """The radius, per row, within which the predicted label provably stays `y`.

        `X` is a DataFrame, or an array whose columns are features 0..d-1; `norm` is 'l2' or
        'linf' (each binary model's own by default). 0 where the prediction is not `y` (a label
        the model never learned included); infinite for the one label of a model that learned
        one: it predicts it everywhere.
        `bounds = (lo, hi)` restricts the attacker's points to that box, as for the binary
        models.
        """
        labels = [as_label(label) for label in batch_labels(y, X)]  # (InvalidInput as binary's)
        if norm is not None:
            check_norm(norm)
        # NaN is a missing input here too, as for the binary models (and `certified_radius_one`).
        _, values = inputs.frame_values(X, missing_ok=True)
        if len(labels) != len(values):
            raise inputs.InvalidInput(f"{len(values)} samples but {len(labels)} labels",
                                      "bad_shape")
        bounds = inputs.check_box(bounds)
        inputs.check_present_inside(values, bounds)
        if len(self.classifiers) == 1:  # (it predicts its one label everywhere)
            return np.where([t in self.classifiers for t in labels], np.inf, 0.0)
        radii = np.full(len(labels), np.inf)
        for label, model in self.classifiers.items():
            if len(model.classes) < 2:  # this label's model has not seen both verdicts yet
                return np.zeros(len(labels))
            mine = [t == label for t in labels]
            radii = np.minimum(radii, model.certified_radius_many(X, mine, norm, bounds))
        known = np.fromiter((t in self.classifiers for t in labels), bool, len(labels))
        return np.where(known, radii, 0.0)

    def certified_radius_one(self, x: dict, y, norm: str | None = None, bounds=None) -> float:
        """`certified_radius_many` for one sample."""
        y = as_label(y)
        if norm is not None:
            check_norm(norm)
        bounds = inputs.check_box(bounds)
        if bounds is not None:
            _, values = inputs.dict_values(x, missing_ok=True)
            inputs.check_present_inside(values, bounds)
        if y not in self.classifiers:
            return 0.0
        if len(self.classifiers) == 1:  # (it predicts its one label everywhere)
            return math.inf
        radius = np.inf
        for label, model in self.classifiers.items():
            if len(model.classes) < 2:
                return 0.0
            radius = min(radius, model.certified_radius_one(x, label == y, norm, bounds))
        return float(radius)


def _saved_name(name):
    """The name of the labels' Series as a checkpoint keeps it: a str, bool, 64-bit int or
    finite float as it is (a numpy scalar as the value it holds); None for any other (a tuple,
    an object)."""
    if isinstance(name, np.generic):
        name = name.item()
    if type(name) in (str, bool) or (type(name) is int and -2**63 <= name < 2**63):
        return name
    return name if type(name) is float and math.isfinite(name) else None


# What a binary checkpoint holds besides its arrays: its metadata (deflated, at most its bound),
# the zip's records and the arrays' `.npy` headers, and the seal.
_NESTED_OVERHEAD = checkpoint.MAX_META_BYTES + (checkpoint.MAX_ARRAYS + 1) * 4800 + 4096


def _binary_class(meta) -> typing.Any:
    """The binary model class a OneVsRest checkpoint names (`CheckpointError` otherwise)."""
    from river_advsvm import _MODELS as classes  # (the package's binary models, by name)

    if not isinstance(meta, dict) or meta.get("class") != OneVsRest.__name__:
        found = meta.get("class") if isinstance(meta, dict) else None
        raise checkpoint.CheckpointError(f"checkpoint holds a {found!r}, not a OneVsRest")
    name = meta.get("classifier")
    if not isinstance(name, str) or name not in classes:
        raise checkpoint.CheckpointError(f"invalid OneVsRest checkpoint: unknown binary model "
                                         f"{str(name)[:40]!r}")
    return classes[name]


def _frame(X) -> pd.DataFrame:
    """A batch as River's one-vs-rest takes it: an array's columns are features 0..d-1."""
    inputs.check_batch(X)
    return pd.DataFrame(X) if isinstance(X, np.ndarray) else X


def _label_to_learn(y):
    """`as_label(y)` for a label to learn: a sample without one (None) is refused saying where
    it goes, as the binary models say it."""
    if y is None:
        raise inputs.InvalidInput("label None (no label) cannot be learned: predict such a "
                                  "sample (predict_one, or predict_many for a batch)",
                                  "bad_label")
    return as_label(y)
