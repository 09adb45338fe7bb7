"""`averaging` with random features: the model predicts with the average of its iterates'
coefficients over the same features. (Batches, checkpoints and certificates of both
representations: `test_support_average.py`.)"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_advsvm import AdvKernelSVM
from river_advsvm.feature_average import AveragedFeatures


def stream(n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    return X, X[:, 0] + 0.3 * rng.standard_normal(n) > 0.5


def brute_force_average(model, twin, X, y, horizon):
    """Both models learn row by row; the average of the twin's coefficients slot by slot,
    weighted as the model's (in proportion to t, then exponential), a slot starting again at 0
    when it holds a new feature; and of its bias."""
    coef, bias, ids = np.zeros(0), 0.0, np.zeros(0, dtype=np.int64)
    for t, (row, label) in enumerate(zip(X, y), start=1):
        positive = twin.classes[-1] if twin.classes else None
        model.learn_many(row[None, :], [label])
        twin.learn_many(row[None, :], [label])
        if twin._store is None:
            continue
        if twin.classes[-1] != positive:
            coef, bias = -coef, -bias  # the second label sorts above the first: signs flip
        store = twin._store
        new_ids = store.ids[: store.size]
        grown = np.zeros(store.size)
        grown[: len(coef)] = coef
        grown[: len(ids)][new_ids[: len(ids)] != ids] = 0.0  # slots given to new features
        coef, ids = grown, new_ids.copy()
        rho = max(2.0 / (t + 1), 1.0 / horizon)
        coef = (1.0 - rho) * coef + rho * store.coefficients
        bias = (1.0 - rho) * bias + rho * twin._bias
    return coef, bias


@settings(max_examples=20, deadline=None)
@given(policy=st.sampled_from(["compact", "compact_slot", "truncate", "grow"]),
       horizon=st.integers(1, 60), seed=st.integers(0, 2**16),
       epsilon=st.sampled_from([0.0, 0.05]), first_smaller=st.booleans())
def test_the_model_predicts_with_the_average_of_its_iterates_coefficients(
        policy, horizon, seed, epsilon, first_smaller):
    X, y = stream(120, 3, seed)
    y = np.where(y == y[0], 1 if first_smaller else 7, 7 if first_smaller else 1)
    params = dict(gamma=2.0, budget=16, budget_policy=policy, epsilon=epsilon, seed=0,
                  warm_up=1)
    model, twin = AdvKernelSVM(averaging=horizon, **params), AdvKernelSVM(averaging=None, **params)
    coef, bias = brute_force_average(model, twin, X[:100], y[:100], horizon)
    np.testing.assert_allclose(model._store.averaged.coefficients, coef, rtol=1e-9,
                               atol=1e-12 * max(1.0, np.abs(coef).max()))
    assert math.isclose(model._store.averaged.bias, bias, rel_tol=1e-9, abs_tol=1e-12)
    # Its decisions are those of the twin with the averaged coefficients and bias...
    averaged = copy.deepcopy(twin)
    averaged._store.coef[: len(coef)] = coef
    averaged._bias = bias
    probe = X[100:]
    expected = averaged.decision_many(probe)
    np.testing.assert_allclose(model.decision_many(probe), expected, rtol=1e-9,
                               atol=1e-9 * max(1.0, np.abs(expected).max()))
    # ... and it learns as the twin does, bit for bit.
    np.testing.assert_array_equal(model._store.coefficients, twin._store.coefficients)


def test_the_averages_gradient_is_its_decisions_derivative():
    X, y = stream(300, 3, 9)
    model = AdvKernelSVM(gamma=3.0, budget=32, budget_policy="compact", averaging=50, seed=0,
                         dtype="float64")  # (finite differences need the digits)
    model.learn_many(X, y)
    x, h = X[:5], 1e-6
    numeric = np.stack([(model.decision_many(x + h * e) - model.decision_many(x - h * e)) / (2 * h)
                        for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(model.decision_gradient_many(x), numeric, rtol=1e-3, atol=1e-4)


def test_a_saved_average_that_is_not_the_stores_is_refused():
    X, y = stream(200, 3, 6)
    model = AdvKernelSVM(gamma=3.0, budget=10, budget_policy="compact", averaging=100, seed=0)
    model.learn_many(X, y)
    scalars, arrays = model._model_state()
    for bad in [{"average_coefficients": arrays["average_coefficients"][:-1].copy()},
                {"average_coefficients": arrays["average_coefficients"] * np.nan},
                {"average_coefficients": arrays["average_coefficients"].astype(np.float32)},
                {"average_heirs": np.zeros(0, dtype=np.int64)}]:
        with pytest.raises(ValueError, match="average"):
            AveragedFeatures.restore(model._store, scalars["average"], {**arrays, **bad})
    with pytest.raises(ValueError, match="average"):
        AveragedFeatures.restore(model._store, {**scalars["average"], "bias": math.nan}, arrays)


def test_an_average_past_the_checkpoint_limits_is_refused():
    from river_advsvm.checkpoint import CheckpointError

    X, y = stream(200, 3, 8)
    model = AdvKernelSVM(gamma=3.0, budget=10, budget_policy="compact", averaging=100, seed=0)
    model.learn_many(X, y)
    meta, arrays = model.to_checkpoint()
    AdvKernelSVM.from_checkpoint(meta, arrays)  # as saved: loads
    arrays = {**arrays, "average_coefficients": arrays["average_coefficients"] * 1e200}
    with pytest.raises(CheckpointError, match="margins up to"):
        AdvKernelSVM.from_checkpoint(meta, arrays)


def test_the_averages_certificate_reuses_the_stores_spectrum():
    """The spectrum of the features (an SVD) is cached per store: certifying the average does
    not compute it again at every call."""
    from river_advsvm import certify

    X, y = stream(300, 3, 10)
    model = AdvKernelSVM(gamma=3.0, budget=64, budget_policy="compact", averaging=50, seed=0)
    model.learn_many(X, y)
    first = model.certified_radius_many(X[:20], y[:20], norm="l2")
    version, spectrum, stacks = certify._spectra[model._store]
    second = model.certified_radius_many(X[:20], y[:20], norm="l2")
    np.testing.assert_array_equal(first, second)
    again = certify._spectra[model._store]
    assert again[0] == version and again[1] is spectrum and not stacks
