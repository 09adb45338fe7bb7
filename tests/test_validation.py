"""Bad input: a clear exception before any state changes, never a NaN in the model."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pandas as pd
import pytest

from river_advsvm import AdvKernelSVM, AdvLinearSVM, InvalidInput


def trained(model):
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = {"a": float(rng.random()), "b": float(rng.random())}
        model.learn_one(x, x["a"] > 0.5)
    return model


MODELS = [
    lambda: trained(AdvKernelSVM(epsilon=0.1, seed=1)),
    lambda: trained(AdvKernelSVM(budget=16, budget_policy="truncate", seed=1)),
    lambda: trained(AdvLinearSVM(epsilon=0.1)),
]

BAD_SAMPLES = [
    ({"a": math.nan, "b": 0.1}, True, "finite"),
    ({"a": math.inf, "b": 0.1}, True, "finite"),
    ({"a": -math.inf, "new": 1.0}, True, "finite"),
    ({"a": "0.5", "b": 0.1}, True, "numbers"),
    ({"a": None, "b": 0.1}, True, "numbers"),
    ({"a": [1.0], "b": 0.1}, True, "numbers"),
    ({"a": 0.5, object(): 0.1}, True, "feature name"),
    ([0.5, 0.1], True, "dict"),
    ({"a": 0.5, "b": 0.1}, "maybe", "third class"),
    ({"a": 0.5, "b": 0.1}, None, "label"),
    ({"a": 0.5, "b": 0.1}, math.nan, "label"),
]


@pytest.mark.parametrize("make", MODELS)
@pytest.mark.parametrize("x, y, message", BAD_SAMPLES)
def test_learn_one_rejects_bad_input_without_changing_the_model(make, x, y, message):
    model = make()
    before = pickle.dumps(model)
    with pytest.raises(InvalidInput, match=message):
        model.learn_one(x, y)
    assert pickle.dumps(model) == before


@pytest.mark.parametrize("make", MODELS)
def test_learn_many_rejects_a_batch_with_one_bad_row(make):
    model = make()
    before = pickle.dumps(model)
    X = pd.DataFrame({"a": [0.1, 0.2, np.nan], "b": [0.3, 0.4, 0.5], "c": [1.0, 2.0, 3.0]})
    with pytest.raises(InvalidInput, match="finite"):
        model.learn_many(X, pd.Series([True, False, True]))
    X = pd.DataFrame({"a": [0.1, 0.2], "b": ["x", "y"]})
    with pytest.raises(InvalidInput, match="numbers"):
        model.learn_many(X, pd.Series([True, False]))
    with pytest.raises(InvalidInput, match="labels"):
        model.learn_many(pd.DataFrame({"a": [0.1]}), pd.Series([True, False]))
    with pytest.raises(InvalidInput, match="third class"):
        model.learn_many(pd.DataFrame({"a": [0.1, 0.2]}), pd.Series([True, "other"]))
    assert pickle.dumps(model) == before


@pytest.mark.parametrize("make", MODELS)
def test_inference_rejects_bad_input(make):
    model = make()
    for method in (model.predict_one, model.predict_proba_one, model.decision_one,
                   model.decision_gradient_one):
        with pytest.raises(InvalidInput):
            method({"a": math.nan})
    with pytest.raises(InvalidInput):
        model.decision_many(np.array([[0.1, np.inf]]))


def test_a_third_label_names_the_way_out():
    model = AdvKernelSVM(seed=0)
    model.learn_one({"a": 0.1}, "cat")
    model.learn_one({"a": 0.9}, "dog")
    with pytest.raises(InvalidInput, match="OneVsRestClassifier"):
        model.learn_one({"a": 0.5}, "bird")
    assert model.classes == ("cat", "dog")


@pytest.mark.parametrize(
    "params",
    [
        dict(epsilon=-1.0), dict(epsilon=math.nan), dict(norm="l3"), dict(kernel="poly"),
        dict(gamma=0.0), dict(gamma="auto"), dict(budget=0), dict(budget=1.5),
        dict(budget_policy="lru"), dict(schedule="cosine"), dict(step_size=0.0),
        dict(step_size=2.0, regularization=0.6), dict(schedule="diminishing", regularization=0.0),
    ],
    ids=str,
)
def test_bad_parameters_are_refused_at_construction(params):
    with pytest.raises(ValueError):
        AdvKernelSVM(**params)


def test_huge_but_finite_inputs_never_put_nan_in_the_model():
    model = AdvKernelSVM(epsilon=0.1, gamma=1.0, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(200):
        model.learn_one({"a": float(rng.normal() * 1e150), "b": 1e-300}, bool(rng.random() > 0.5))
    assert np.isfinite(model._store.coefficients).all()
    assert math.isfinite(model.rkhs_norm) and math.isfinite(model._bias)
    assert math.isfinite(model.decision_one({"a": 1e300, "b": -1e300}))
