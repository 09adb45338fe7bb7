"""On an endless stream the model stays bounded: coefficients, seeds, cached weights, memory."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from river_advsvm import AdvKernelSVM


def drifting_stream(n, d=8, seed=0):
    """A stream whose concept rotates slowly, so that steps stay active for ever."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    angle = np.linspace(0, 6 * np.pi, n)
    w = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    y = (np.sum((X[:, :2] - 0.5) * w, axis=1) > 0) ^ (rng.random(n) < 0.05)
    for row, label in zip(X.tolist(), y.tolist()):
        yield dict(enumerate(row)), label


def memory(model) -> int:
    gc.collect()
    return model._raw_memory_usage


@pytest.mark.parametrize("policy", [
    "compact", pytest.param("compact_slot", marks=pytest.mark.slow), "truncate"])
def test_a_long_stream_stays_within_budget(policy):
    # The 20,000 steps after the reference point add 8 to 12 budgets' worth of features.
    model = AdvKernelSVM(epsilon=0.05, budget=1024, budget_policy=policy, seed=0)
    for i, (x, y) in enumerate(drifting_stream(25_000)):
        model.learn_one(x, y)
        if i == 5_000:
            after_warm_up = memory(model)
    store = model._store
    assert store.n_added > 5_000, "the stream must keep adding features"
    assert model.n_features <= 1024
    assert len(store.coefficients) <= 1024 and len(store.ids) <= 1024
    assert store._omega.shape[1] <= 1024 and len(store.phase) <= 1024
    assert memory(model) < 1.05 * after_warm_up


def test_grow_is_unbounded_by_design():
    model = AdvKernelSVM(budget_policy="grow", seed=0)
    sizes = []
    for i, (x, y) in enumerate(drifting_stream(6_000)):
        model.learn_one(x, y)
        if i in (2_999, 5_999):
            sizes.append(model.n_features)
    assert sizes[1] > sizes[0] > 1024


def test_unknown_names_cost_no_memory():
    # Names the model does not know are hashed to predict (random features depend on them), and
    # the hashes of names are cached: the cache holds few such names, however long, not 65,536
    # of 1000 characters (4 bytes each beyond the BMP: 260 MB).
    import tracemalloc

    model = AdvKernelSVM(gamma=1.0, seed=0)
    model.learn_one({"a": 0.1}, True)
    model.learn_one({"a": 0.9}, False)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(5_000):
            model.predict_one({f"{i:06d}" + "\U0001F600" * 985: 0.5, "a": 0.3})
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 5 * 2**20
