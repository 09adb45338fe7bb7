"""The shortcuts of the learning step for streams that repeat themselves change nothing: a name
checked once is not trusted for another, a row passed back to the store is the row it got."""

from __future__ import annotations

import numpy as np
import pytest
from test_validation import fingerprint

from river_advsvm import AdvKernelSVM, inputs
from river_advsvm.support import SupportVectors


def test_a_bad_name_is_refused_after_the_same_keys_were_accepted():
    model = AdvKernelSVM(gamma=1.0, seed=0)
    good = {"a": 1.0, "b": 0.0}  # "b" stays unknown: 0 is never stored
    for _ in range(3):
        model.learn_one(dict(good), True)
    before = fingerprint(model)
    for bad in ({"a": 1.0, "b\0": 0.0}, {"a": 1.0, "b": 0.0, "\ud800": 0.0}):
        with pytest.raises(inputs.InvalidInput) as error:
            model.learn_one(bad, False)
        assert error.value.code == "bad_name"
        assert fingerprint(model) == before
    model.learn_one(dict(good), False)  # the good keys again: still accepted


def test_the_row_passed_back_to_add_is_the_row_value_got():
    """`add` skips its check when it gets back the very row `value` got; a copy is checked, and
    both store the same."""
    rng = np.random.default_rng(0)
    stores = []
    for passed_back in (True, False):
        store = SupportVectors("rbf", 0.5, budget=8)
        store.start()
        store.add_inputs(3)
        for _ in range(20):
            v = rng.random(3)
            store.value(v)
            store.add(0.3, v if passed_back else v.copy())
        stores.append(store)
        rng = np.random.default_rng(0)
    np.testing.assert_array_equal(stores[0].vectors, stores[1].vectors)
    np.testing.assert_array_equal(stores[0].coefficients, stores[1].coefficients)
    assert stores[0].norm == stores[1].norm
    with pytest.raises(RuntimeError):
        stores[0].value(np.ones(3))
        stores[0].add(0.3, np.zeros(3))


def test_the_same_input_again_grows_its_coefficient():
    """Equal squared norms are checked before comparing vectors: an equal one is still found."""
    store = SupportVectors("rbf", 0.5, budget=8)
    store.start()
    store.add_inputs(2)
    for c in (0.5, 0.25):
        store.value(np.array([0.3, 0.4]))
        store.add(c)
    store.value(np.array([0.4, 0.3]))  # another vector of the same norm
    store.add(0.1)
    assert store.size == 2
    np.testing.assert_allclose(sorted(store.coefficients), [0.1, 0.75])


@pytest.mark.parametrize("params", [
    {"gamma": 0.5, "budget": 6},
    {"gamma": "scale", "warm_up": 10, "budget": 6, "kernel": "laplacian"},
    {"gamma": 0.5, "budget": 6, "epsilon": 0.1, "norm": "linf"},
    {"gamma": 0.5, "budget": 6, "budget_policy": "remove", "reprocess": 0},
], ids=["rbf", "laplacian-scale", "adversarial", "remove"])
def test_predicting_before_learning_changes_nothing(params):
    """The store reuses the kernel values of a row it has just computed (a prediction, then
    learning the same sample): a model that predicts every sample (and another row now and
    then) before learning it is the model that only learns, to the bit, and its margins are a
    restored copy's (which has nothing to reuse)."""
    rng = np.random.default_rng(1)
    learner, predictor = AdvKernelSVM(seed=0, **params), AdvKernelSVM(seed=0, **params)
    rows = [rng.random(5) for _ in range(12)]
    for i in range(120):
        v = rows[i % 12] if i % 3 else rng.random(5)  # repeated rows, and fresh ones
        x = {f"x{j}": float(v[j]) for j in range(4 + (i > 70))}  # an input appears late
        y = bool(v[0] + 0.3 * v[1] > 0.6)
        predictor.decision_one(x)  # a prediction before the sample is learned
        if i % 7 == 0:
            predictor.predict_one({"x0": 0.5})
        learner.learn_one(x, y)
        predictor.learn_one(x, y)
        assert fingerprint(predictor) == fingerprint(learner), i
        # The same row after the step (which may have merged or added vectors): not the old
        # kernel values.
        copy = AdvKernelSVM.from_checkpoint(*predictor.to_checkpoint())
        assert predictor.decision_one(x) == copy.decision_one(x), i


def test_the_warm_up_vote_does_not_hash_the_held_names_again(monkeypatch):
    """Progressive validation in the warm-up of gamma='scale': a prediction with the keys of
    the rows already held hashes no name (a hash per input per prediction made the warm-up
    cost grow with the inputs); a new bad name is still refused."""
    model = AdvKernelSVM(seed=0)  # gamma='scale': the first rows are held
    rng = np.random.default_rng(0)
    for _ in range(3):
        model.learn_one({f"x{j}": float(v) for j, v in enumerate(rng.random(50))}, True)
    calls = []
    real = inputs.key_hash
    monkeypatch.setattr(inputs, "key_hash", lambda key: calls.append(key) or real(key))
    for _ in range(5):
        model.predict_one({f"x{j}": float(v) for j, v in enumerate(rng.random(50))})
    assert calls == []
    with pytest.raises(inputs.InvalidInput) as error:
        model.predict_one({"x0": 1.0, b"raw": 1.0})
    assert error.value.code == "bad_name"
