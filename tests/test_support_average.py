"""The average of f over its recent steps (`averaging`, `averaged()`): against the average of
the iterates computed by brute force, and its bookkeeping through merges and removals."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_advsvm import AdvKernelSVM
from river_advsvm.support_average import capacity_for


def stream(n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    return X, X[:, 0] + 0.3 * rng.standard_normal(n) > 0.5


def iterate_average(model, X, y, probe, horizon):
    """Learn row by row; the weighted mean of each iterate's decisions on `probe` (weights in
    proportion to t, then exponential), by brute force."""
    mean = None
    for t, (row, label) in enumerate(zip(X, y), start=1):
        positive = model.classes[-1] if model.classes else None
        model.learn_many(row[None, :], [label])
        if mean is not None and model.classes[-1] != positive:
            mean = -mean  # the second label sorts above the first: the margin's sign flips
        decisions = model.decision_many(probe)
        rho = max(2.0 / (t + 1), 1.0 / horizon)
        mean = decisions if mean is None else (1.0 - rho) * mean + rho * decisions
    return mean


@settings(max_examples=25, deadline=None)
@given(horizon=st.integers(1, 60), seed=st.integers(0, 2**16), reprocess=st.integers(0, 2),
       epsilon=st.sampled_from([0.0, 0.05]), first_smaller=st.booleans())
def test_without_a_budget_the_average_is_the_mean_of_the_iterates(horizon, seed, reprocess,
                                                                  epsilon, first_smaller):
    X, y = stream(120, 3, seed)
    # Labels 1 and 7: when the first is 1, the model's sign flips as 7 arrives (and the
    # average's with it).
    y = np.where(y == y[0], 1 if first_smaller else 7, 7 if first_smaller else 1)
    model = AdvKernelSVM(gamma=2.0, budget=None, averaging=horizon, reprocess=reprocess,
                         epsilon=epsilon, seed=0)
    expected = iterate_average(model, X[:100], y[:100], X[100:], horizon)
    averaged = model.averaged()
    # (rounding of the many terms of a decision near 0 is relative to the largest)
    np.testing.assert_allclose(averaged.decision_many(X[100:]), expected, rtol=1e-9,
                               atol=1e-9 * np.abs(expected).max())
    assert averaged.averaging is None and model.averaging == horizon


@pytest.mark.parametrize("policy", ["merge", "remove"])
def test_a_horizon_of_one_is_the_model_itself_through_merges(policy):
    X, y = stream(400, 4, 1)
    model = AdvKernelSVM(gamma=3.0, budget=12, budget_policy=policy, averaging=1, seed=0)
    model.learn_many(X[:300], y[:300])
    assert sum(model.budget_maintenance[k] for k in ("merges", "removals")) > 100
    averaged = model.averaged()
    np.testing.assert_allclose(averaged.decision_many(X[300:]), model.decision_many(X[300:]),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("policy", ["merge", "remove"])
@pytest.mark.parametrize("budget", [1, 2, 9])
def test_the_average_holds_the_models_vectors_and_stays_within_its_capacity(policy, budget):
    X, y = stream(300, 3, 2)
    model = AdvKernelSVM(gamma=3.0, budget=budget, budget_policy=policy, averaging=40, seed=0)
    for i in range(0, 300, 7):
        model.learn_many(X[i:i + 7], y[i:i + 7])
        store = model._store
        average = store.averaged
        assert average.size <= capacity_for(budget)
        rows = average._row_of[: store.size]
        assert len(set(rows.tolist())) == store.size
        np.testing.assert_array_equal(average._S[rows, : store.n_inputs], store.vectors)
        # Every row the model does not hold is an orphan; heirs are rows, and never themselves.
        mapped = np.zeros(average.size, bool)
        mapped[rows] = True
        np.testing.assert_array_equal(average._mapped[: average.size], mapped)
        heirs = average._heir[: average.size]
        assert ((heirs >= -1) & (heirs < average.size) & (heirs != np.arange(average.size))).all()
        assert np.isfinite(average._a[: average.size]).all()


def test_the_average_steadies_the_last_iterate_on_a_noisy_stream():
    """A long horizon against the last iterate of a constant step: the averaged model's
    decisions move less from one block of the stream to the next."""
    X, y = stream(3000, 2, 3)
    model = AdvKernelSVM(gamma=2.0, budget=64, averaging=500, seed=0)
    probe = X[:200]
    moves, averaged_moves, before = [], [], None
    for i in range(1000, 3000, 250):
        model.learn_many(X[i:i + 250], y[i:i + 250])
        now = (model.decision_many(probe), model.averaged().decision_many(probe))
        if before is not None:
            moves.append(np.abs(now[0] - before[0]).mean())
            averaged_moves.append(np.abs(now[1] - before[1]).mean())
        before = now
    assert np.mean(averaged_moves) < 0.5 * np.mean(moves)


def test_learn_many_and_a_learn_one_loop_give_the_same_average():
    X, y = stream(300, 3, 4)
    batched = AdvKernelSVM(gamma=3.0, budget=10, averaging=25, seed=0)
    batched.learn_many(X, y)
    one = AdvKernelSVM(gamma=3.0, budget=10, averaging=25, seed=0)
    for row, label in zip(X, y):
        one.learn_one(dict(enumerate(row)), label)
    probe = X[:50]
    np.testing.assert_array_equal(one.averaged().decision_many(probe),
                                  batched.averaged().decision_many(probe))


def test_a_loaded_model_starts_its_average_again_from_its_f(tmp_path):
    X, y = stream(300, 3, 5)
    model = AdvKernelSVM(gamma=3.0, budget=10, averaging=100, seed=0)
    model.learn_many(X[:200], y[:200])
    path = tmp_path / "model.ckpt"
    model.save(path)
    loaded = AdvKernelSVM.load(path)
    assert loaded.averaging == 100
    probe = X[250:]
    np.testing.assert_array_equal(loaded.averaged().decision_many(probe),
                                  model.decision_many(probe))
    loaded.learn_many(X[200:201], y[200:201])
    np.testing.assert_allclose(loaded.averaged().decision_many(probe),
                               loaded.decision_many(probe), rtol=1e-12, atol=1e-12)


def test_averaged_before_learning_and_without_averaging_is_a_plain_copy():
    X, y = stream(150, 3, 6)
    for model in (AdvKernelSVM(averaging=10), AdvKernelSVM(gamma=1.0)):
        assert model.averaged().n_learned == 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.learn_many(X, y)
        if model.averaging is None:
            copy = model.averaged()
            np.testing.assert_array_equal(copy.decision_many(X), model.decision_many(X))
            assert copy.budget == model.budget


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", True, 10**7])
def test_bad_averaging_is_refused(bad):
    with pytest.raises(ValueError, match="averaging"):
        AdvKernelSVM(averaging=bad)


def test_averaging_needs_support_vectors():
    with pytest.raises(ValueError, match="support vectors"):
        AdvKernelSVM(budget_policy="compact", averaging=100)
