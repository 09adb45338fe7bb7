"""One pass over scikit-learn's digits, 1 vs 7: the learner a River user drops into a loop."""

from __future__ import annotations

import pytest
from conftest import accuracy, learn_stream

from river_advsvm import AdvKernelSVM, AdvLinearSVM


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_natural_model_one_pass(digits_1v7, seed):
    X_train, X_test, y_train, y_test = digits_1v7
    model = learn_stream(AdvKernelSVM(seed=seed), X_train, y_train)
    assert model.classes == (1, 7)
    assert accuracy(model, X_test, y_test) >= 0.98


@pytest.mark.parametrize(
    "params",
    # Radii short of the collapse regime: on digits (64 inputs, gamma='scale') an L-inf radius
    # of 0.1 already gives eps' = 0.36, where the ||f|| penalty costs clean accuracy (92%).
    [dict(epsilon=0.3, norm="l2"), dict(epsilon=8 / 255, norm="linf"),
     dict(epsilon=0.075, norm="linf")],
    ids=str,
)
def test_adversarial_model_one_pass(digits_1v7, params):
    X_train, X_test, y_train, y_test = digits_1v7
    model = learn_stream(AdvKernelSVM(seed=0, **params), X_train, y_train)
    assert model.kernel_radius > 0
    assert accuracy(model, X_test, y_test) >= 0.97


def test_linear_baseline_one_pass(digits_1v7):
    X_train, X_test, y_train, y_test = digits_1v7
    natural = learn_stream(AdvLinearSVM(), X_train, y_train)
    robust = learn_stream(AdvLinearSVM(epsilon=0.1, norm="linf"), X_train, y_train)
    assert accuracy(natural, X_test, y_test) >= 0.95
    assert accuracy(robust, X_test, y_test) >= 0.9
    # The L-inf threat is paid in ||w||_1, which the prox step shrinks.
    assert sum(map(abs, robust.weights.values())) < sum(map(abs, natural.weights.values()))


def test_probabilities_are_calibrated_better_than_a_fixed_sigmoid(digits_1v7):
    """The online temperature lowers the log loss of sigmoid(g) on held-out data."""
    import numpy as np

    X_train, X_test, y_train, y_test = digits_1v7
    model = learn_stream(AdvKernelSVM(seed=0), X_train, y_train)
    positive = y_test == 7
    p = model.predict_proba_many(X_test)[7].to_numpy()
    g = model.decision_many(X_test)
    fixed = 1 / (1 + np.exp(-g))

    def log_loss(q):
        q = np.clip(q, 1e-12, 1 - 1e-12)
        return -np.mean(np.where(positive, np.log(q), np.log(1 - q)))

    assert log_loss(p) < log_loss(fixed)
    assert ((p > 0.5) == (g > 0)).all()  # monotone, 0.5 at the margin


def test_probabilities_keep_their_digits_far_from_the_margin(digits_1v7):
    """Both classes' probabilities come from the margin itself, so a confident prediction still
    has a positive, finite log-odds for the other class (black-box attacks need it)."""
    import math

    X_train, X_test, y_train, _ = digits_1v7
    model = learn_stream(AdvKernelSVM(seed=0), X_train, y_train)
    x = dict(enumerate(X_test[0].tolist()))
    margin = model.decision_one(x)
    model._calibration.scale = 100.0 / abs(margin)  # |scale * g| = 100: 1 - p would be 0.0
    proba = model.predict_proba_one(x)
    assert min(proba.values()) > 0
    assert math.log(max(proba.values())) - math.log(min(proba.values())) == pytest.approx(100)
    many = model.predict_proba_many(X_test[:1]).iloc[0].to_dict()
    assert many == pytest.approx(proba, rel=1e-12)


@pytest.mark.parametrize("margin", [1e-20, -1e-20, 5e-324, -5e-324])
def test_a_margin_too_small_for_the_sigmoid_still_sides_with_its_label(margin):
    """sigmoid(1e-20) rounds to 0.5: the probability of the predicted class is kept above 0.5
    (and the other below), one margin at a time as in a batch, so that `predict_proba_one`'s
    larger probability is always `predict_one`'s label."""
    import numpy as np

    from river_advsvm import calibration

    one = calibration.probability_one(1.0, margin)
    assert one == calibration.probability(1.0, np.array([margin]))[0]
    assert (one > 0.5) if margin > 0 else (one < 0.5)
