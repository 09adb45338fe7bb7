"""AdvLinearSVM: the closed-form worst case and one step, by hand and by brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from river_advsvm import AdvLinearSVM


def trained(norm, epsilon=0.1):
    rng = np.random.default_rng(0)
    model = AdvLinearSVM(epsilon=epsilon, norm=norm, regularization=0.01, step_size=0.1)
    for _ in range(100):
        x = rng.random(3)
        model.learn_one(dict(enumerate(x)), bool(x[0] - x[1] > 0))
    return model


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_worst_case_hinge_is_the_closed_form(norm):
    """max over the ball of [1 - y g(x + d)]_+ = [1 - y g(x) + eps ||w||_*]_+ (brute force)."""
    model = trained(norm)
    w = np.array([model.weights[i] for i in range(3)])
    x, y, eps = np.array([0.4, 0.5, 0.6]), 1.0, 0.1
    if norm == "linf":
        deltas = eps * np.array(list(itertools.product([-1, 1], repeat=3)))
        dual = np.abs(w).sum()
    else:
        directions = np.random.default_rng(1).normal(size=(20000, 3))
        deltas = eps * np.vstack([directions / np.linalg.norm(directions, axis=1)[:, None],
                                  -w / np.linalg.norm(w)])
        dual = np.linalg.norm(w)
    margins = model.decision_many(x + deltas)
    brute = np.maximum(0, 1 - y * margins).max()
    closed = max(0.0, 1 - y * model.decision_one(dict(enumerate(x))) + eps * dual)
    assert brute == pytest.approx(closed, rel=1e-9)


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_one_step_by_hand(norm):
    model = trained(norm)
    w, b = np.array([model.weights[i] for i in range(3)]), model._bias
    eta, lam, eps, eta_b = 0.1, 0.01, 0.1, model.bias_step_size
    x, yy = np.array([0.2, 0.9, 0.4]), 1.0  # misclassified: active
    assert 1 - yy * (w @ x + b) + eps * (np.linalg.norm(w) if norm == "l2" else
                                          np.abs(w).sum()) > 0
    expected = (1 - eta * lam) * w + eta * yy * x
    if norm == "l2":
        expected *= max(0.0, 1 - eta * eps / np.linalg.norm(expected))
    else:  # soft-thresholding, the prox of the L1 norm
        expected = np.sign(expected) * np.maximum(np.abs(expected) - eta * eps, 0.0)
    model.learn_one(dict(enumerate(x)), True)
    np.testing.assert_allclose([model.weights[i] for i in range(3)], expected, rtol=1e-12)
    assert model._bias == pytest.approx(b + eta_b * yy)


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_a_tiny_step_learns_the_same_model_scaled(norm):
    """With no regularization nor bias step, a step of `2^-700` learns `2^-690` times the
    weights a step of `2^-10` learns, and the same radii. The L2 length of such weights squared
    to 0: the adversarial step took that for an empty model and zeroed the weights at every
    active sample, and the radii of epsilon=0 were infinite."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X[:, 0] - X[:, 1] > 0
    models = {}
    for step in (2.0**-10, 2.0**-700):
        for epsilon in (0.0, 0.1):
            model = AdvLinearSVM(epsilon=epsilon, norm=norm, step_size=step, bias_step_size=0.0,
                                 regularization=0.0)
            model.learn_many(X[:150], y[:150])
            models[step, epsilon] = model
    for epsilon in (0.0, 0.1):
        big, tiny = models[2.0**-10, epsilon], models[2.0**-700, epsilon]
        w = np.array(list(big.weights.values()))
        assert np.abs(w).max() > 0.05
        assert np.array_equal(np.array(list(tiny.weights.values())) * 2.0**690, w)
        radii = big.certified_radius_many(X[150:], y[150:])
        assert np.isfinite(radii).all() and (radii > 0).sum() > 25
        np.testing.assert_allclose(tiny.certified_radius_many(X[150:], y[150:]), radii,
                                   rtol=1e-12)


def test_an_l_inf_step_zeroes_small_weights_and_counts_the_attack_in_the_hinge():
    """By hand, with `norm='linf'` (dual norm L1, prox = soft-thresholding at eta eps):
    the first step sets a weight below the threshold to exactly 0 (never to the other sign);
    a later sample classified with margin above 1 but below `1 + eps ||w||_1` is active (the
    attack can push it inside), and one above it only shrinks the weights."""
    eta, lam, eps = 0.5, 0.01, 0.1
    model = AdvLinearSVM(epsilon=eps, norm="linf", step_size=eta, regularization=lam)
    eta_b = model.bias_step_size
    model.learn_one({0: 2.0, 1: 0.05, 2: -1.0}, True)
    w = np.array([model.weights[i] for i in range(3)])
    np.testing.assert_allclose(w, [2.0 * eta - eta * eps, 0.0, -(eta - eta * eps)], rtol=1e-12)
    assert model.weights[1] == 0.0 and model._bias == eta_b
    # y g = 1.12: inside 1 + eps ||w||_1 = 1.14, but not 1 + eps max |w_j| = 1.095, nor 1.
    t = (1.12 - eta_b) / w[0]
    model.learn_one({0: t, 1: 0.0, 2: 0.0}, True)
    expected = (1 - eta * lam) * w + eta * np.array([t, 0.0, 0.0])
    expected = np.sign(expected) * np.maximum(np.abs(expected) - eta * eps, 0.0)
    np.testing.assert_allclose([model.weights[i] for i in range(3)], expected, rtol=1e-12)
    assert model._bias == pytest.approx(2 * eta_b)
    # y g past 1 + eps ||w||_1: not active, the weights only shrink.
    w, b = np.array([model.weights[i] for i in range(3)]), model._bias
    t = (1.0 + eps * np.abs(w).sum() + 0.05 - b) / w[0]
    model.learn_one({0: t, 1: 0.0, 2: 0.0}, True)
    np.testing.assert_allclose([model.weights[i] for i in range(3)], (1 - eta * lam) * w,
                               rtol=1e-12)
    assert model._bias == b
