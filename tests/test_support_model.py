"""`AdvKernelSVM` over support vectors ('merge', 'remove'): the model-level contracts."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from river import datasets, evaluate, metrics, multiclass, preprocessing
from river.checks import check_estimator

from river_advsvm import AdvKernelSVM
from river_advsvm.attacks import PGD

MODELS = {
    "merge": lambda: AdvKernelSVM(budget=24, budget_policy="merge", gamma=4.0, seed=1),
    "remove-laplacian-adversarial": lambda: AdvKernelSVM(
        epsilon=0.05, norm="linf", kernel="laplacian", budget=24, budget_policy="remove",
        gamma=2.0, seed=1,
    ),
    "merge-float64-scale": lambda: AdvKernelSVM(
        budget=24, budget_policy="merge", dtype="float64", warm_up=20, seed=1
    ),
    "unbounded": lambda: AdvKernelSVM(budget=None, budget_policy="merge", gamma=4.0, seed=1),
}


def sparse_stream(n=300, seed=0):
    """Feature dicts whose keys appear and vanish, with a nonlinear boundary."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i in range(n):
        x = {"a": rng.random(), "b": rng.random()}
        if i % 3 == 0:
            x["c"] = rng.random()
        if i > n // 2 and i % 5 == 0:
            x[("late", i % 4)] = rng.random()
        rows.append(x)
        labels.append(bool(np.sin(6 * x["a"]) + x["b"] + x.get("c", 0) > 0.9))
    return rows, labels


def store_state(model):
    scalars, arrays = model._store.state()
    return scalars, {name: array.copy() for name, array in arrays.items()}


def assert_same_state(one, other):
    (s1, a1), (s2, a2) = store_state(one), store_state(other)
    assert s1 == s2
    assert a1.keys() == a2.keys()
    for name in a1:
        np.testing.assert_array_equal(a1[name], a2[name])
    assert one._bias == other._bias


@pytest.mark.parametrize("kind", MODELS)
def test_learn_one_and_any_batching_give_the_same_bits(kind):
    X = np.random.default_rng(3).random((400, 3))
    y = np.sin(5 * X[:, 0]) + X[:, 1] > 0.9
    one = MODELS[kind]()
    for x, label in zip(X, y):
        one.learn_one(dict(enumerate(x)), label)
    for size in (7, 500):
        batched = MODELS[kind]()
        for start in range(0, len(X), size):
            batched.learn_many(X[start : start + size], y[start : start + size])
        assert_same_state(one, batched)
    if one.budget is not None:
        assert one.n_support_vectors == one.budget
    assert one._store.n_merges + one._store.n_removals > 0 or one.budget is None


@pytest.mark.parametrize("kind", MODELS)
def test_test_then_train_margins_are_decision_one_before_each_step(kind):
    rows, labels = sparse_stream()
    model, reference = MODELS[kind](), MODELS[kind]()
    margins = model.decision_then_learn_many(rows, labels)
    for x, label, margin in zip(rows, labels, margins):
        assert reference.decision_one(x) == margin
        reference.learn_one(x, label)
    assert_same_state(model, reference)


@pytest.mark.parametrize("kind", MODELS)
def test_checkpoint_round_trip_continues_bit_for_bit(kind, tmp_path):
    rows, labels = sparse_stream(seed=1)
    model = MODELS[kind]()
    for x, label in zip(rows[:200], labels[:200]):
        model.learn_one(x, label)
    model.save(tmp_path / "model.ckpt")
    loaded = AdvKernelSVM.load(tmp_path / "model.ckpt")
    for x, label in zip(rows[200:], labels[200:]):
        model.learn_one(x, label)
        loaded.learn_one(x, label)
    assert_same_state(model, loaded)
    assert [model.decision_one(x) for x in rows[:20]] == [loaded.decision_one(x) for x in rows[:20]]


@pytest.mark.parametrize("budget", [8, None])
def test_a_model_of_subnormal_squared_norm_restores_from_its_checkpoint(budget, tmp_path):
    """With a step of 1e-162 the squared norm `a^T K a` is a subnormal float64 (about 1e-320),
    the running one and its recomputation differ in its last digits, and the tolerance of the
    check squared the coefficients to 0: the model's own checkpoint was refused."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = X[:, 0] + X[:, 1] ** 2 > 0.5
    model = AdvKernelSVM(gamma=1.0, step_size=1e-162, bias_step_size=0.0, regularization=0.0,
                         budget=budget, seed=1)
    model.learn_many(X[:100], y[:100])
    assert 0.0 < model._store._q < 1e-300
    model.save(tmp_path / "model.ckpt")
    loaded = AdvKernelSVM.load(tmp_path / "model.ckpt")
    model.learn_many(X[100:], y[100:])
    loaded.learn_many(X[100:], y[100:])
    assert_same_state(model, loaded)


@pytest.mark.parametrize("step_size, reprocess, budget", [(0.5, 0, 5), (8.0, 2, 5), (0.5, 0, 1),
                                                         (0.5, 1, 12)])
def test_a_stream_repeating_inputs_restores_from_every_checkpoint(step_size, reprocess, budget):
    """One input again and again (a stuck sensor) with labels of both signs, float32: the
    input's kernel value with itself, taken from rounded distances, was 1 - 1e-7, and each
    label flip cancelled its coefficient down to that rounding; the running norm drifted from
    a^T K a until the model's own checkpoint was refused ('the saved norm does not match')."""
    rng = np.random.default_rng(3)
    pool = [{0: 1.1, 1: -0.4}, {0: 0.2, 1: 0.9}, {0: -0.7, 1: 0.3}][: 1 + budget // 5]
    model = AdvKernelSVM(gamma=0.3, budget=budget, step_size=step_size, reprocess=reprocess,
                         dtype="float32", seed=0)
    for i in range(1200):
        model.learn_one(pool[i % len(pool)], bool(rng.random() < 0.3))
        if i % 50 == 49:
            restored = AdvKernelSVM.from_checkpoint(*model.to_checkpoint())
            assert_same_state(model, restored)


@pytest.mark.parametrize("kind", ["merge", "remove-laplacian-adversarial"])
def test_river_estimator_checks(kind):
    check_estimator(MODELS[kind]())


def test_one_vs_rest_on_a_multiclass_stream():
    model = preprocessing.StandardScaler() | multiclass.OneVsRestClassifier(
        AdvKernelSVM(budget=64, budget_policy="merge", seed=1)
    )
    score = evaluate.progressive_val_score(
        datasets.ImageSegments(), model, metrics.Accuracy()
    )
    assert score.get() > 0.85


@pytest.mark.parametrize("norm,bounds", [("l2", None), ("linf", (0.0, 1.0))])
@pytest.mark.parametrize("gamma", [4.0, "scale"])
def test_certified_points_survive_attacks_through_the_model(norm, bounds, gamma):
    rng = np.random.default_rng(5)
    X = rng.random((600, 2))
    X[:, 1] *= 0.5  # unequal input ranges: 'scale' gives per-input bandwidths
    y = np.sin(6 * X[:, 0]) + 2 * X[:, 1] > 0.9
    model = AdvKernelSVM(budget=40, budget_policy="merge", gamma=gamma, seed=2)
    model.learn_many(X[:500], y[:500])
    X_test, y_test = X[500:], y[500:]
    radii = model.certified_radius_many(X_test, y_test, norm=norm, bounds=bounds)
    assert (radii > 0).mean() > 0.5
    certified = np.flatnonzero((radii > 0) & np.isfinite(radii))
    for i in certified[:25]:
        r = float(radii[i])
        batch = np.repeat(X_test[i : i + 1], 8, axis=0)
        labels = np.repeat(y_test[i], 8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for start in (False, True):
                attack = PGD(epsilon=r, norm=norm, steps=40, step_size=r / 8, bounds=bounds,
                             random_start=start, seed=int(i))
                assert not attack.run(model, batch, labels).fooled.any()


def test_budget_maintenance_counts_the_events_of_each_policy():
    rng = np.random.default_rng(3)
    rows = [{"a": float(a), "b": float(b)} for a, b in rng.random((300, 2))]
    labels = [x["a"] + 0.2 * rng.normal() > 0.5 for x in rows]
    seen = {}
    for policy in ("merge", "remove", "compact"):
        model = AdvKernelSVM(budget=8, budget_policy=policy, gamma=4.0, seed=0)
        for x, y in zip(rows, labels):
            model.learn_one(x, y)
        seen[policy] = model.budget_maintenance
    assert seen["compact"] == {}
    assert seen["remove"]["merges"] == 0 and seen["remove"]["removals"] > 0
    assert seen["merge"]["merges"] > 0
    assert all(m["degradation"] > 0 for m in (seen["merge"], seen["remove"]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_checkpoint_with_the_kept_kernel_exponents_continues_bit_for_bit(dtype, tmp_path):
    from river_advsvm import support

    d = support.GRAM_MIN_INPUTS + 2
    X = np.random.default_rng(5).random((300, d))
    y = X[:, 0] + np.sin(4 * X[:, 1]) > 1.0
    model = AdvKernelSVM(budget=16, budget_policy="merge", gamma=4.0 / d, dtype=dtype, seed=1)
    model.learn_many(X[:150], y[:150])
    assert "gram" in model._store.state()[1] and model._store.n_merges > 0
    model.save(tmp_path / "model.ckpt")
    loaded = AdvKernelSVM.load(tmp_path / "model.ckpt")
    model.learn_many(X[150:], y[150:])
    for x, label in zip(X[150:], y[150:]):
        loaded.learn_one(dict(enumerate(x)), label)
    assert_same_state(model, loaded)


# -- reprocess -------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, 101, 1.0, True, "1", None])
def test_reprocess_must_be_a_small_int(bad):
    with pytest.raises(ValueError, match="reprocess"):
        AdvKernelSVM(reprocess=bad)


@pytest.mark.parametrize("d", [3, 130])
def test_checkpoint_between_reprocess_steps_continues_bit_for_bit(d, tmp_path):
    """The round-robin cursor is saved: a restored model reprocesses the same vectors next."""
    X = np.random.default_rng(7).random((400, d))
    y = X[:, 0] + np.sin(4 * X[:, 1]) > 1.0
    model = AdvKernelSVM(budget=16, gamma=4.0 / d, reprocess=3, seed=1)
    cut = 200
    model.learn_many(X[:cut], y[:cut])
    while model._store.state()[0]["cursor"] == 0:  # (saved mid-round)
        model.learn_many(X[cut : cut + 1], y[cut : cut + 1])
        cut += 1
    scalars, arrays = model._store.state()
    assert model._store.n_merges > 0
    assert ("gram" in arrays) == (d >= 128)
    model.save(tmp_path / "model.ckpt")
    loaded = AdvKernelSVM.load(tmp_path / "model.ckpt")
    model.learn_many(X[cut:], y[cut:])
    for x, label in zip(X[cut:], y[cut:]):
        loaded.learn_one(dict(enumerate(x)), label)
    assert_same_state(model, loaded)


def test_reprocess_zero_takes_no_reprocess_step(monkeypatch):
    from river_advsvm.support import SupportVectors

    def refuse(*args, **kwargs):
        raise AssertionError("reprocess=0 must not reprocess")

    monkeypatch.setattr(SupportVectors, "reprocess", refuse)
    X = np.random.default_rng(3).random((100, 3))
    AdvKernelSVM(budget=8, gamma=4.0, reprocess=0, seed=1).learn_many(X, X[:, 0] > 0.5)


@pytest.mark.parametrize("first", [False, True])
def test_a_stream_of_one_input_is_decided_for_its_majority_whichever_label_came_first(first):
    """One input (a sensor stuck, or every feature absent), 70% True: reprocess pushed the
    stored vector towards the sign of its net coefficient, the first label's, and a model
    whose first label was False decided False for good (32% right), its f and bias drifting
    apart without bound. The vector holds both labels: reprocess leaves it alone."""
    rng = np.random.default_rng(0)
    labels = [first, not first] + (rng.random(3000) < 0.7).tolist()
    model = AdvKernelSVM(seed=0)
    right = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (f is a constant here: collapse warnings)
        for label in labels:
            right += model.predict_one({"a": 0.0}) == label
            model.learn_one({"a": 0.0}, label)
    assert model._store.mixed.tolist() == [True]
    assert model.predict_one({"a": 0.0}) is True
    assert right / len(labels) > 0.65 and abs(model._bias) < 5.0
    saved = AdvKernelSVM.from_checkpoint(*model.to_checkpoint())
    assert saved._store.mixed.tolist() == [True]
