"""The benchmarks' LaSVM reference (`benchmarks/budgeted_lasvm.py`) against the exact SVC, and
its bookkeeping under a budget against a recomputation from its vectors."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
try:
    from budgeted_lasvm import BudgetedLaSVM
finally:
    sys.path.pop(0)


@pytest.fixture(scope="module")
def moons():
    """Two overlapping classes: many coefficients at the box's bound."""
    from sklearn.datasets import make_moons

    X, y = make_moons(n_samples=300, noise=0.3, random_state=0)
    return X, np.where(y == 1, 1.0, -1.0)


def test_without_a_budget_it_finishes_at_the_exact_svc_of_the_vectors_it_kept(moons):
    """Finished, it is the SVM of the samples it kept (it drops those at 0 that cannot become
    violators, as LaSVM does), and it decides almost as the SVM of them all."""
    from sklearn.svm import SVC

    X, y = moons
    lasvm = BudgetedLaSVM(X.shape[1], budget=len(y), tau=1e-6)
    for x, label in zip(X, y):
        lasvm.learn(x, label)
    lasvm.finish()
    n = lasvm.size
    assert lasvm.merges == 0 and n < len(y)
    kept = SVC(kernel="rbf", gamma=1.0, C=1.0, tol=1e-8).fit(lasvm.S[:n], lasvm.y[:n])
    grid = np.random.default_rng(1).uniform(-2, 3, size=(500, 2))
    np.testing.assert_allclose(lasvm.decision(grid), kept.decision_function(grid), atol=1e-4)
    whole = SVC(kernel="rbf", gamma=1.0, C=1.0).fit(X, y)
    assert np.mean((lasvm.decision(grid) > 0) == (whole.decision_function(grid) > 0)) > 0.97


def test_under_a_budget_the_gradients_stay_exact_and_the_boxes_hold(moons):
    X, y = moons
    lasvm = BudgetedLaSVM(X.shape[1], budget=20)
    for x, label in zip(X, y):
        lasvm.learn(x, label)
        n = lasvm.size
        assert n <= 20
        S, a = lasvm.S[:n], lasvm.a[:n]
        K = np.exp(-((S[:, None, :] - S[None, :, :]) ** 2).sum(axis=2))
        np.testing.assert_allclose(lasvm.g[:n], lasvm.y[:n] - K @ a, atol=1e-9)
        np.testing.assert_allclose(lasvm.K[:n, :n], K, atol=1e-12)
        signed = lasvm.y[:n] * a
        assert (signed >= 0).all() and (signed <= lasvm.C * lasvm.count[:n] + 1e-12).all()
    assert lasvm.merges > 0
    assert np.mean((lasvm.decision(X) > 0) == (y > 0)) > 0.8
