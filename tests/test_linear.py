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
