"""The model's batched test-then-train, as the service calls it.

`test_then_train(state, samples, labels)` gives each sample's class probabilities just before
it is learned and learns the labelled ones in order, in one call of the model's
`predict_proba_then_learn_many` (a matrix for a run of arrays of one width, River's dicts
otherwise). When the model refuses the run (`InvalidInput`), the model is unchanged.

"""

from __future__ import annotations

import copy

import numpy as np

__all__ = ["test_then_train"]


def test_then_train(state, samples: list, labels: list) -> list[dict]:
    """Each sample's class probabilities just before it is learned (labelled ones are learned
    in order; a label None is predicted only); `InvalidInput` leaves `state.model` unchanged."""
    model = state.model
    if len(model.classes) == 2:
        return _probabilities(model.predict_proba_then_learn_many(_rows(samples), labels))
    # Before the model knows two classes (the first messages of a stream: the service's runs
    # are then a message or two) the service answers as `predict_proba_one` does, row by row:
    # a one-class model's answer is {label: 1.0}, which a frame with two columns cannot say.
    # A copy of the model undoes a run the model refuses half-way.
    backup = copy.deepcopy(model) if len(samples) > 1 else None
    probas = []
    try:
        for sample, y in zip(samples, labels):
            x = sample.x
            probas.append(model.predict_proba_one(x) if model.classes else {})
            if y is not None:
                model.learn_one(x, y)
    except Exception:
        if backup is not None:
            state.model = backup
        raise
    return probas


def _rows(samples: list):
    """The model's input for a run: a matrix when every sample is an array of one width (its
    columns are named 0..d-1, as arrays' features are), else River's dicts."""
    first = samples[0].features
    if type(first) is list and all(type(s.features) is list and len(s.features) == len(first)
                                   for s in samples):
        return np.array([s.features for s in samples], dtype=float)
    return [s.x for s in samples]


def _probabilities(frame) -> list[dict]:
    """The rows of `predict_proba_then_learn_many`'s frame (columns: the two classes) as
    `predict_proba_one` dicts."""
    classes = list(frame.columns)
    return [dict(zip(classes, row)) for row in frame.to_numpy(dtype=float).tolist()]
