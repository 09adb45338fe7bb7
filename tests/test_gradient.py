"""The analytic margin gradient against central finite differences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from river_advsvm import AdvKernelSVM, AdvLinearSVM

MODELS = {
    "rbf": lambda: AdvKernelSVM(epsilon=0.1, dtype="float64", seed=0),
    "laplacian": lambda: AdvKernelSVM(kernel="laplacian", budget=256, dtype="float64", seed=1),
    "truncate": lambda: AdvKernelSVM(budget=64, budget_policy="truncate", dtype="float64", seed=2),
    "linear": lambda: AdvLinearSVM(epsilon=0.05),
}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.random((200, 6))
    y = np.sin(4 * X[:, 0]) + X[:, 1] > 1.0
    return X, y


def central_differences(model, x: dict, h=1e-7) -> dict:
    # Small h: Laplacian features have Cauchy-tailed frequencies, some of them in the thousands.
    grad = {}
    for k in x:
        up, down = dict(x), dict(x)
        up[k] += h
        down[k] -= h
        grad[k] = (model.decision_one(up) - model.decision_one(down)) / (2 * h)
    return grad


@pytest.mark.parametrize("name", MODELS)
def test_gradient_matches_finite_differences(data, name):
    X, y = data
    model = MODELS[name]()
    model.learn_many(X, y)
    for row in X[:10]:
        x = dict(enumerate(row))
        x["never seen"] = 0.3  # its weights are generated on the fly
        analytic = model.decision_gradient_one(x)
        numeric = central_differences(model, x)
        assert analytic.keys() == x.keys()
        scale = max(1e-3, max(abs(v) for v in numeric.values()))
        for k in x:
            assert analytic[k] == pytest.approx(numeric[k], abs=1e-5 * scale + 1e-7)


@pytest.mark.parametrize("name", MODELS)
def test_batch_gradients_equal_one_by_one(data, name):
    X, y = data
    model = MODELS[name]()
    model.learn_many(X, y)
    G = model.decision_gradient_many(X[:20])
    assert isinstance(G, np.ndarray) and G.shape == (20, 6)
    frame = model.decision_gradient_many(pd.DataFrame(X[:20]))
    np.testing.assert_allclose(frame.to_numpy(), G)
    for row, g in zip(X[:20], G):
        one = model.decision_gradient_one(dict(enumerate(row)))
        np.testing.assert_allclose([one[i] for i in range(6)], g, rtol=1e-10, atol=1e-13)


def test_decision_many_takes_arrays_and_frames_alike(data):
    X, y = data
    model = AdvKernelSVM(seed=3)
    model.learn_many(pd.DataFrame(X), pd.Series(y))
    np.testing.assert_array_equal(model.decision_many(X), model.decision_many(pd.DataFrame(X)))
    one = [model.decision_one(dict(enumerate(row))) for row in X[:5]]
    # float32 features: a batch is one matrix product, a row a vector one; they round apart,
    # by a little of the terms summed (of order 1), whatever the margin they cancel down to
    np.testing.assert_allclose(model.decision_many(X[:5]), one, rtol=1e-5, atol=1e-5)


def test_large_batches_are_processed_in_chunks_with_the_same_result(data):
    from river_advsvm.margin_predict import ROWS_PER_CHUNK

    X, y = data
    model = AdvKernelSVM(budget=64, seed=3)
    model.learn_many(X, y)
    big = np.random.default_rng(1).random((2 * ROWS_PER_CHUNK + 7, X.shape[1]))
    rows = [0, ROWS_PER_CHUNK - 1, ROWS_PER_CHUNK, 2 * ROWS_PER_CHUNK + 6]
    np.testing.assert_allclose(model.decision_many(big)[rows], model.decision_many(big[rows]),
                               rtol=1e-5)
    np.testing.assert_allclose(model.decision_gradient_many(big)[rows],
                               model.decision_gradient_many(big[rows]), rtol=1e-4, atol=1e-7)
