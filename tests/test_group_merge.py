"""Averaging models across workers and the group protocol's bookkeeping, without a broker."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_advsvm import AdvKernelSVM, AdvLinearSVM
from river_advsvm import checkpoint, support, support_average
from river_advsvm.support_basis import SharedBasis
from river_advsvm.streams import group, group_state, merge
from river_advsvm.streams import state as state_io
from river_advsvm.streams.snapshot import parse_fence

# The fold averages what learns, the last iterates: these models predict with theirs too.
PARAMS = dict(epsilon=0.1, gamma=0.2, budget=64, budget_policy="compact", seed=3, averaging=None)
#: Support vectors, with room for every vector of a few models (no maintenance) unless a test
#: lowers the budget.
SV_PARAMS = dict(epsilon=0.1, gamma=0.2, budget=400, budget_policy="merge", dtype="float64",
                 seed=3, averaging=None)
REPRESENTATIONS = {"compact": PARAMS, "merge": SV_PARAMS}


def trained(n: int, data_seed: int, labels=(0, 1), names=range(4), **params) -> AdvKernelSVM:
    rng = np.random.default_rng(data_seed)
    model = AdvKernelSVM(**{**PARAMS, **params})
    for _ in range(n):
        x = rng.normal(size=len(names))
        y = labels[int(x[0] + 0.5 * x[1 % len(x)] > 0)] if len(labels) == 2 else labels[0]
        model.learn_one(dict(zip(names, x)), y)
    return model


def test_average_is_the_sample_weighted_mean_of_coefficients_bias_and_temperature():
    a, b = trained(300, 1), trained(200, 2)
    (ma, xa), (mb, xb) = a.to_checkpoint(), b.to_checkpoint()
    meta, arrays = merge.average([(ma, xa, 3.0), (mb, xb, 1.0)], n_learned=500)
    np.testing.assert_allclose(arrays["coef"], (3 * xa["coef"] + xb["coef"]) / 4)
    state = meta["state"]
    assert state["bias"] == pytest.approx((3 * ma["state"]["bias"] + mb["state"]["bias"]) / 4)
    for i in range(2):
        expected = (3 * ma["state"]["temperature"][i] + mb["state"]["temperature"][i]) / 4
        assert state["temperature"][i] == pytest.approx(expected)
    model = merge.to_model(meta, arrays)
    assert model.n_learned == 500
    # The margin is linear in (coefficients, bias): the merged margin is the mean margin.
    x = {0: 0.3, 1: -1.2, 2: 0.5, 3: 0.0}
    expected = (3 * a.decision_one(x) + b.decision_one(x)) / 4
    assert model.decision_one(x) == pytest.approx(expected)
    # The adversarial term's norm is the merged model's own (exact for 'compact').
    assert model.rkhs_norm == pytest.approx(np.sqrt(64) * np.linalg.norm(arrays["coef"]))


def test_weights_of_zero_contribute_nothing_and_all_zero_keeps_the_base():
    a, b = trained(100, 1), trained(100, 2)
    members = [(*a.to_checkpoint(), 0.0), (*b.to_checkpoint(), 5.0)]
    meta, arrays = merge.average(members, n_learned=200)
    np.testing.assert_allclose(arrays["coef"], b.to_checkpoint()[1]["coef"])
    meta, arrays = merge.average([(*a.to_checkpoint(), 0.0), (*b.to_checkpoint(), 0.0)], 7)
    np.testing.assert_array_equal(arrays["coef"], a.to_checkpoint()[1]["coef"])
    assert meta["state"]["n_learned"] == 7


@pytest.mark.parametrize("representation", REPRESENTATIONS)
def test_models_that_saw_their_labels_in_another_order_are_aligned_exactly(representation):
    # `only_b` saw only "b" (provisionally positive, rightly); `only_a` saw only "a", which it
    # holds as provisionally positive although "a" < "b" makes it the negative class.
    params = REPRESENTATIONS[representation]
    only_b = trained(50, 1, labels=("b",), **params)
    only_a = trained(50, 2, labels=("a",), **params)
    meta, arrays = merge.average([(*only_b.to_checkpoint(), 1.0), (*only_a.to_checkpoint(), 1.0)],
                                 n_learned=100)
    model = merge.to_model(meta, arrays)
    assert model.classes == ("a", "b")
    x = {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4}
    assert model.decision_one(x) == pytest.approx(
        (only_b.decision_one(x) - only_a.decision_one(x)) / 2, rel=1e-12)
    # So are the labels' balances: each saw its own label only, +1 provisionally.
    assert only_a._label_balance == only_b._label_balance > 0
    assert model._label_balance == 0.0
    alone = merge.to_model(*merge.average([(*only_a.to_checkpoint(), 0.0),
                                           (*only_b.to_checkpoint(), 0.0)], n_learned=7))
    assert alone._label_balance == -only_a._label_balance
    # A third label cannot be averaged in.
    third = trained(10, 3, labels=("c",), **params)
    reason = merge.incompatibility(meta, third.to_checkpoint()[0])
    assert reason is not None and "do not fit" in reason


@pytest.mark.parametrize("representation", REPRESENTATIONS)
def test_averages_of_the_iterates_are_aligned_as_their_models(representation):
    """The averages fold with their models' signs; a base kept alone (every weight 0) keeps
    its average, aligned with it."""
    params = {**REPRESENTATIONS[representation], "averaging": 20}
    only_b = trained(50, 1, labels=("b",), **params)
    only_a = trained(50, 2, labels=("a",), **params)
    x = {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4}
    both = merge.to_model(*merge.average([(*only_b.to_checkpoint(), 1.0),
                                          (*only_a.to_checkpoint(), 1.0)], n_learned=100))
    assert both.decision_one(x) == pytest.approx(
        (only_b.decision_one(x) - only_a.decision_one(x)) / 2, rel=1e-6, abs=1e-9)
    alone = merge.to_model(*merge.average([(*only_a.to_checkpoint(), 0.0),
                                           (*only_b.to_checkpoint(), 0.0)], n_learned=7))
    assert alone.classes == ("a", "b") and alone._store.averaged is not None
    assert alone.decision_one(x) == pytest.approx(-only_a.decision_one(x), rel=1e-6, abs=1e-9)
    alone = merge.to_model(*merge.average([(*only_b.to_checkpoint(), 0.0),
                                           (*only_a.to_checkpoint(), 0.0)], n_learned=7))
    assert alone._store.averaged is not None
    assert alone.decision_one(x) == pytest.approx(only_b.decision_one(x), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("change", [dict(seed=4), dict(gamma=0.3), dict(budget=32),
                                    dict(kernel="laplacian"), dict(epsilon=0.2)])
def test_models_with_another_pool_or_other_options_are_refused(change):
    a, b = trained(20, 1), trained(20, 2, **change)
    reason = merge.incompatibility(a.to_checkpoint()[0], b.to_checkpoint()[0])
    assert reason is not None and next(iter(change)) in reason
    with pytest.raises(merge.IncompatibleModels):
        merge.average([(*a.to_checkpoint(), 1.0), (*b.to_checkpoint(), 1.0)], 40)


@pytest.mark.parametrize("params, message", [
    (dict(gamma="scale"), "numeric gamma"),
    (dict(SV_PARAMS, gamma="scale"), "numeric gamma"),
    (dict(budget_policy="truncate"), "'merge', 'remove' or 'compact'"),
    (dict(budget_policy="grow"), "'merge', 'remove' or 'compact'"),
    (dict(seed=None), "seed"),
])
def test_options_that_cannot_share_a_pool_are_refused_up_front(params, message):
    model = AdvKernelSVM(**{**PARAMS, **params})
    with pytest.raises(ValueError, match=message):
        merge.check_mergeable_params(model._get_params())


@pytest.mark.parametrize("params", [SV_PARAMS, dict(SV_PARAMS, budget_policy="remove"),
                                    dict(SV_PARAMS, seed=None), dict(SV_PARAMS, budget=None),
                                    dict(SV_PARAMS, gamma={"a": 0.5, "b": 0.1})])
def test_support_vectors_with_a_fixed_gamma_can_sync(params):
    merge.check_mergeable_params(AdvKernelSVM(**params)._get_params())  # no error


def test_models_with_a_gamma_dict_of_int_names_average_and_keep_it():
    """A checkpoint holds a gamma dict naming inputs other than by str (an array's columns) as
    [name, bandwidth] pairs; such models still sync, and their average keeps the dict."""
    gamma = {0: 0.5, 1: 0.1, 2: 0.3, 3: 0.2}
    a, b = sv_trained(20, 1, range(4), gamma=gamma), sv_trained(20, 2, range(4), gamma=gamma)
    meta_a, meta_b = a.to_checkpoint()[0], b.to_checkpoint()[0]
    assert merge.incompatibility(meta_a, meta_b) is None
    merge.check_mergeable_params(meta_a["params"])
    merged = merge.to_model(*merge.average([(*a.to_checkpoint(), 1.0),
                                            (*b.to_checkpoint(), 1.0)], 40))
    assert merged.gamma == gamma
    x = {0: 0.3, 1: -0.2, 2: 0.1, 3: 0.0}
    assert merged.decision_one(x) == pytest.approx(
        (a.decision_one(x) + b.decision_one(x)) / 2, rel=1e-9)


# -- support vectors: the average in function space ------------------------------------------------


def sv_trained(n: int, data_seed: int, names, labels=(0, 1), **params) -> AdvKernelSVM:
    return trained(n, data_seed, labels=labels, names=names, **{**SV_PARAMS, **params})


def kernel_matrix(kernel: str, gamma: float, S, T) -> np.ndarray:
    if kernel == "rbf":
        return np.exp(-gamma * ((S[:, None, :] - T[None]) ** 2).sum(axis=2))
    return np.exp(-gamma * np.abs(S[:, None, :] - T[None]).sum(axis=2))


def weighted_norm(models, weights) -> float:
    """`||sum_k w_k f_k||` from the models' checkpoints: the cross terms by brute force."""
    metas = [m.to_checkpoint() for m in models]
    names = list(dict.fromkeys(repr(n) for meta, _ in metas for n in meta["state"]["names"]))
    parts = []
    for (meta, arrays), w in zip(metas, weights):
        S = np.zeros((len(arrays["alpha"]), len(names)))
        S[:, [names.index(repr(n)) for n in meta["state"]["names"]]] = arrays["vectors"]
        parts.append((S, w * meta["state"]["model"]["store"]["scale"] * arrays["alpha"]))
    model = metas[0][0]["state"]["model"]
    square = sum(a @ kernel_matrix(model["store"]["kernel"], model["gamma"], S, T) @ b
                 for S, a in parts for T, b in parts)
    return math.sqrt(square)


def queries(names, n=20, seed=7) -> list[dict]:
    """Points over every input of the models and one none of them knows."""
    rng = np.random.default_rng(seed)
    return [dict(zip([*names, "unseen"], rng.normal(size=len(names) + 1))) for _ in range(n)]


def fold_events(meta: dict, base: AdvKernelSVM) -> tuple[int, float]:
    """Maintenance events of an average and their total weight degradation (the merged
    store's counters continue the base's)."""
    after = meta["state"]["model"]["store"]
    before = base.to_checkpoint()[0]["state"]["model"]["store"]
    events = after["n_merges"] + after["n_removals"] - before["n_merges"] - before["n_removals"]
    return events, after["total_degradation"] - before["total_degradation"]


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
@pytest.mark.parametrize("policy", ["merge", "remove"])
def test_support_vectors_average_is_the_weighted_sum_of_the_decision_functions(kernel, policy):
    """Within the budget: exactly `sum_k w_k (f_k + b_k)`, over inputs that differ from model
    to model (and come in another order), with the exact norm, cross terms included."""
    options = dict(kernel=kernel, budget_policy=policy)
    models = [sv_trained(150, 1, ["a", "b", "c"], **options),
              sv_trained(120, 2, ["c", "b", "d"], **options),
              sv_trained(90, 3, ["e", "a"], **options)]
    weights = np.array([3.0, 1.0, 2.0])
    meta, arrays = merge.average([(*m.to_checkpoint(), w) for m, w in zip(models, weights)],
                                 n_learned=360)
    merged = merge.to_model(meta, arrays)
    shares = weights / weights.sum()
    for x in queries("abcde"):
        expected = sum(s * m.decision_one(x) for s, m in zip(shares, models))
        assert merged.decision_one(x) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert merged.n_support_vectors == sum(m.n_support_vectors for m in models)
    assert fold_events(meta, models[0]) == (0, 0.0)
    assert merged.rkhs_norm == pytest.approx(weighted_norm(models, shares), rel=1e-9)
    assert merged.n_learned == 360 and merged.classes == (0, 1)
    temperatures = [m.to_checkpoint()[0]["state"]["temperature"] for m in models]
    assert meta["state"]["temperature"] == pytest.approx(
        [sum(s * t[i] for s, t in zip(shares, temperatures)) for i in range(2)])
    # The merged model is a model like any other: it round-trips and keeps learning.
    again = AdvKernelSVM.from_checkpoint(*checkpoint.loads(checkpoint.dumps(meta, arrays)))
    x = queries("abcde", n=1)[0]
    assert again.decision_one(x) == merged.decision_one(x)
    merged.learn_one(x, 1)
    assert merged.n_learned == 361


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
@pytest.mark.parametrize("policy, dtype", [("merge", "float64"), ("remove", "float64"),
                                           ("merge", "float32")])
def test_support_vectors_average_over_the_budget_is_within_the_weight_degradation(
        kernel, policy, dtype):
    """Over the budget, maintenance brings the union down to `budget` vectors; each event moves
    `f` by at most the square root of the degradation it reports, so the sum of the events can
    move `f(x)` by at most `sqrt(events * total degradation)` (Cauchy-Schwarz)."""
    options = dict(kernel=kernel, budget_policy=policy, dtype=dtype, budget=40)
    models = [sv_trained(150, 1, ["a", "b", "c"], **options),
              sv_trained(150, 2, ["b", "c", "d"], **options)]
    assert [m.n_support_vectors for m in models] == [40, 40]
    meta, arrays = merge.average([(*models[0].to_checkpoint(), 2.0),
                                  (*models[1].to_checkpoint(), 1.0)], n_learned=300)
    merged = merge.to_model(meta, arrays)
    assert merged.n_support_vectors == 40
    events, degradation = fold_events(meta, models[0])
    assert events == 40 and degradation > 0
    # What the maintenance moved f by in the kernel's space (brute force), against what the
    # events reported; a value moves by at most that distance (k(x, x) = 1).
    distance = weighted_norm([*models, merged], [2 / 3, 1 / 3, -1.0])
    bound = math.sqrt(events * degradation)
    rounding = 1e-5 if dtype == "float32" else 1e-10
    assert 0 < distance <= bound * (1 + 1e-9) + rounding
    errors = [abs(merged.decision_one(x) - (2 * models[0].decision_one(x)
                                            + models[1].decision_one(x)) / 3)
              for x in queries("abcd", n=50)]
    assert max(errors) <= distance + rounding
    print(f"\n{kernel} {policy} {dtype}: 80 -> 40 vectors, largest |error| {max(errors):.2e}, "
          f"distance {distance:.2e}, bound {bound:.2e}")


def test_models_that_keep_their_kernel_exponents_average_into_a_model_that_loads():
    """A store of many inputs keeps the exponents between its vectors (`gram` in its
    checkpoint) once it has merged; the average, below the budget here, has its own vectors:
    the base's matrix is not carried into it, over the union or over a basis."""
    d = support.GRAM_MIN_INPUTS
    rng = np.random.default_rng(4)
    models = []
    for _ in range(2):
        model = AdvKernelSVM(gamma=1.0 / d, budget=16, seed=0, averaging=None)  # (see PARAMS)
        X = rng.random((40, d))
        model.learn_many(X, (X[:, 0] > 0.5).astype(int))
        models.append(model)
    published = [m.to_checkpoint() for m in models]
    assert "gram" in published[0][1]
    for budget in (16, 40):  # over the budget (maintenance) and below it (the union as is)
        for meta, _ in published:
            meta["params"]["budget"] = meta["state"]["model"]["store"]["budget"] = budget
        merged = merge.to_model(*merge.average([(m, a, 1.0) for m, a in published], 80))
        assert merged.n_support_vectors == min(32, budget)
        x = dict(enumerate(rng.random(d)))
        expected = (models[0].decision_one(x) + models[1].decision_one(x)) / 2
        if budget == 40:
            assert merged.decision_one(x) == pytest.approx(expected, abs=1e-5)
    meta, arrays = published[0]
    basis = SharedBasis("rbf", 1.0 / d, arrays["vectors"], meta["state"]["names"])
    members = [(m, {"alpha": merge.project(m, a, basis)[0]}, 1.0) for m, a in published]
    assert merge.to_model(*merge.average(members, 80, basis=basis)).n_support_vectors == 16


def test_support_vectors_weights_of_zero_contribute_nothing_and_all_zero_keeps_the_base():
    a = sv_trained(100, 1, ["a", "b"])
    b = sv_trained(100, 2, ["b", "c"])
    meta, arrays = merge.average([(*a.to_checkpoint(), 0.0), (*b.to_checkpoint(), 5.0)], 200)
    merged = merge.to_model(meta, arrays)
    for x in queries("abc", n=5):
        assert merged.decision_one(x) == pytest.approx(b.decision_one(x), rel=1e-12)
    meta, arrays = merge.average([(*a.to_checkpoint(), 0.0), (*b.to_checkpoint(), 0.0)], 7)
    kept = merge.to_model(meta, arrays)
    assert kept.n_learned == 7 and kept.n_support_vectors == a.n_support_vectors
    for x in queries("abc", n=5):
        assert kept.decision_one(x) == pytest.approx(a.decision_one(x), rel=1e-12)


@settings(max_examples=20, deadline=None)
@given(weights=st.lists(st.floats(0.0, 10.0), min_size=3, max_size=3),
       subsets=st.lists(st.sets(st.sampled_from("abcdef"), min_size=1), min_size=3, max_size=3),
       flips=st.lists(st.booleans(), min_size=3, max_size=3),
       seed=st.integers(0, 1000))
def test_support_vectors_average_is_exact_for_any_weights_inputs_and_first_label(
        weights, subsets, flips, seed):
    models = [sv_trained(25, seed + k, sorted(names), labels=("y", "x") if flip else ("x", "y"))
              for k, (names, flip) in enumerate(zip(subsets, flips))]
    meta, arrays = merge.average([(*m.to_checkpoint(), w) for m, w in zip(models, weights)], 75)
    merged = merge.to_model(meta, arrays)
    # Every model learned both labels: they all hold ("x", "y"), whatever came first.
    assert merged.classes == ("x", "y")
    total = sum(weights)
    for x in queries("abcdef", n=5, seed=seed):
        if total == 0:
            expected = models[0].decision_one(x)
        else:
            expected = sum(w / total * m.decision_one(x) for w, m in zip(weights, models))
        assert merged.decision_one(x) == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("change, key", [
    (dict(gamma=0.3), "gamma"), (dict(budget=32), "budget"), (dict(kernel="laplacian"), "kernel"),
    (dict(epsilon=0.2), "epsilon"), (dict(dtype="float32"), "dtype"),
    (dict(budget_policy="remove"), "budget_policy"),
    (dict(budget_policy="compact"), "budget_policy"),
    (dict(gamma={"a": 0.2, "b": 0.3}), "gamma"),
])
def test_support_vector_models_with_other_options_are_refused(change, key):
    a, b = sv_trained(20, 1, "ab"), sv_trained(20, 2, "ab", **change)
    reason = merge.incompatibility(a.to_checkpoint()[0], b.to_checkpoint()[0])
    assert reason == (f"params differ: {key} {a._get_params()[key]!r} != "
                      f"{b._get_params()[key]!r}")
    with pytest.raises(merge.IncompatibleModels, match=key):
        merge.average([(*a.to_checkpoint(), 1.0), (*b.to_checkpoint(), 1.0)], 40)


def test_every_option_two_models_differ_in_is_named():
    """A worker started with other options than its group's heard of the first only."""
    a, b = sv_trained(20, 1, "ab"), sv_trained(20, 2, "ab", gamma=0.7, epsilon=0.2)
    reason = merge.incompatibility(a.to_checkpoint()[0], b.to_checkpoint()[0])
    assert reason == "params differ: epsilon 0.1 != 0.2, gamma 0.2 != 0.7"


def test_support_vector_models_whose_inputs_together_are_too_many_are_refused():
    a, b = sv_trained(20, 1, "abc", max_features=4), sv_trained(20, 2, "cde", max_features=4)
    with pytest.raises(merge.IncompatibleModels, match="5 inputs together, more than "
                                                        "max_features"):
        merge.average([(*a.to_checkpoint(), 1.0), (*b.to_checkpoint(), 1.0)], 40)


# -- the protocol's bookkeeping, on snapshots made by hand ---------------------------------------


def snapshot(worker, position, model, offsets, folded=None, learned=None, messages=None,
             topic_ids=None, seq=1):
    state = state_io.ServiceState(model=model, offsets=offsets, topic_ids=topic_ids or {})
    state.counters["learned"] = model.n_learned if learned is None else learned
    state.counters["consumed"] = state.counters["learned"] if messages is None else messages
    state.group = {**group.new_bookkeeping(worker), "seq": seq, "folded": folded or {}}
    return group.parse_snapshot(worker.encode(), state_io.to_bytes(state), position)


def test_claims_take_the_furthest_offset_of_each_partition_and_skip_old_incarnations():
    m = trained(10, 1)
    snaps = [
        snapshot("a", 0, m, {"t": {0: 100, 1: 40}}, topic_ids={"t": "old"}),
        snapshot("b", 1, m, {"t": {0: 150, 2: 7}}, topic_ids={"t": "new"}),
        snapshot("c", 2, m, {"t": {1: 90}, "u": {0: 5}}),
    ]
    assert group.claims(snaps) == {"t": {0: 150, 1: 90, 2: 7}, "u": {0: 5}}
    assert group.claims(snaps, {"t": "new"}) == {"t": {0: 150, 1: 90, 2: 7}, "u": {0: 5}}
    assert group.claims(snaps[:1], {"t": "new"}) == {}
    assert group.parse_snapshot(b"fence/x", b"fence", 3) is None


def test_a_snapshot_folded_entirely_into_a_later_one_is_superseded():
    m = trained(10, 1)
    dead = snapshot("dead", 0, m, {}, learned=100)
    a = snapshot("a", 5, m, {}, folded={"dead": 100, "b": 40}, learned=300)
    b = snapshot("b", 6, m, {}, folded={"a": 290}, learned=310)
    assert group.superseded([dead, a, b]) == {"dead"}
    later = snapshot("a", 7, m, {}, folded={"dead": 100, "b": 310}, learned=300)
    assert group.superseded([dead, later, b]) == {"dead", "b"}


def test_the_group_model_of_support_vector_snapshots_weighs_them_by_their_samples():
    a = sv_trained(100, 1, ["a", "b"], budget=1000)
    b = sv_trained(300, 2, ["b", "c"], budget=1000)
    snaps = [snapshot("a", 0, a, {"t": {0: 100}}), snapshot("b", 1, b, {"t": {1: 300}})]
    model = group.group_model(snaps)
    assert model.n_learned == 400 and model.n_support_vectors == (a.n_support_vectors
                                                                  + b.n_support_vectors)
    for x in queries("abc", n=5):
        assert model.decision_one(x) == pytest.approx(
            (100 * a.decision_one(x) + 300 * b.decision_one(x)) / 400, rel=1e-12)
    # A snapshot that folded all of a's samples in supersedes a: b's model is the group's.
    snaps[1] = snapshot("b", 1, b, {"t": {1: 300}}, folded={"a": 100})
    model = group.group_model(snaps)
    for x in queries("abc", n=5):
        assert model.decision_one(x) == pytest.approx(b.decision_one(x), rel=1e-12)


class FakeReader:
    def __init__(self, latest):
        self.latest = latest


@pytest.mark.parametrize("representation", REPRESENTATIONS)
def test_fold_weighs_each_peer_by_the_samples_not_yet_averaged_in(tmp_path, representation):
    """A peer's snapshot is averaged in once: folding the same snapshot again is a no-op, so a
    dead worker's last model does not pull the others back at every sync."""
    params = dict(REPRESENTATIONS[representation], budget=1000)
    mine, peer = trained(200, 1, **params), trained(300, 2, **params)
    peer_snap = snapshot("p", 0, peer, {"t": {1: 300}}, learned=300)
    # The union's fold is exact within the budget (the basis' is checked in
    # test_kafka_group_basis.py, where a broker holds the basis).
    sync = group.GroupSync("127.0.0.1:1", "snaps", "me", str(tmp_path), sink=None,
                           group_model="union")
    sync.reader = FakeReader({"p": peer_snap})
    state = state_io.ServiceState(model=mine, group=group.new_bookkeeping("me"))
    state.counters["learned"] = 200

    assert sync.fold(state) == 1
    x = {0: 0.5, 1: 0.5, 2: -0.5, 3: 1.0}
    expected = (200 * mine.decision_one(x) + 300 * peer.decision_one(x)) / 500
    assert state.model.decision_one(x) == pytest.approx(expected, rel=1e-12)
    assert state.model.n_learned == 500
    assert state.group["folded"] == {"p": 300} and state.group["self_at_fold"] == 200
    if representation == "merge":  # "me" ranks before "p": its revisits start at sample 500
        store = state.model.to_checkpoint()[0]["state"]["model"]["store"]
        assert store["cursor"] == 500 % state.model.n_support_vectors

    before = state.model.decision_one(x)
    assert sync.fold(state) == 0  # nothing new from the peer: unchanged
    assert state.model.decision_one(x) == before

    # 50 more samples here and 100 more at the peer: weights 50 and 100.
    for i in range(50):
        state.model.learn_one({0: float(i % 3) - 1, 1: 0.3}, i % 2)
    state.counters["learned"] = 250
    peer2 = trained(400, 2, **params)
    sync.reader = FakeReader({"p": snapshot("p", 1, peer2, {"t": {1: 400}}, learned=400,
                                            seq=2)})
    mine_now = state.model.decision_one(x)
    assert sync.fold(state) == 1
    assert state.model.decision_one(x) == pytest.approx(
        (50 * mine_now + 100 * peer2.decision_one(x)) / 150, rel=1e-12)
    assert state.model.n_learned == 650


def test_a_peer_refused_at_every_sync_is_logged_once_a_snapshot_and_remembered_once(
        tmp_path, caplog):
    # A peer that cannot be averaged (other options) publishes a new snapshot at every sync,
    # for as long as the group runs: each is logged once, and the worker keeps no entry per one.
    peer = trained(50, 2, **{**SV_PARAMS, "gamma": 0.7})
    peer_snap = snapshot("p", 0, peer, {"t": {1: 50}}, learned=50)
    sync = group.GroupSync("127.0.0.1:1", "snaps", "me", str(tmp_path), sink=None,
                           group_model="union")
    sync.reader = FakeReader({"p": peer_snap})
    state = state_io.ServiceState(model=trained(50, 1, **SV_PARAMS),
                                  group=group.new_bookkeeping("me"))
    for seq in range(1, 1001):
        peer_snap.group["seq"] = seq
        for _ in range(2):  # (two syncs of this worker per snapshot of the peer)
            with caplog.at_level("ERROR", logger="river_advsvm.streams.group"):
                assert sync.fold(state) == 0
    refused = [r for r in caplog.records if "not averaging the snapshot" in r.getMessage()]
    assert [int(r.getMessage().split()[4]) for r in refused] == list(range(1, 1001))
    assert len(sync._refused) == 1


def test_a_basis_that_does_not_fit_is_logged_once_an_epoch_and_remembered_once(
        tmp_path, caplog):
    # Every epoch of a group's basis of another bandwidth than this worker's model: logged
    # once each, and the worker keeps no entry per epoch.
    model = trained(50, 1, **SV_PARAMS)
    meta, arrays = model.to_checkpoint()
    sync = group.GroupSync("127.0.0.1:1", "snaps", "me", str(tmp_path), sink=None,
                           refresh_every=10**9)
    basis = SharedBasis("rbf", 0.7, np.eye(64) * 3.0)  # (more vectors than the model)
    for epoch in range(1, 301):
        sync.choice.basis, sync.choice.epoch = basis, epoch
        for _ in range(2):
            with caplog.at_level("ERROR", logger="river_advsvm.streams.group"):
                assert sync._basis(meta, arrays, [], 0.0) is None
    refused = [r for r in caplog.records if "does not fit this model" in r.getMessage()]
    assert [int(r.getMessage().split()[3]) for r in refused] == list(range(1, 301))
    assert len(sync._refused) == 0  # (nothing kept per epoch)


@pytest.mark.parametrize("representation", [*REPRESENTATIONS, "gamma-dict-of-int-names"])
def test_a_new_worker_starts_from_the_group_and_adopts_its_options(tmp_path, representation):
    # (A gamma dict naming inputs 0..3 is held in the snapshot as [name, bandwidth] pairs.)
    params = REPRESENTATIONS.get(representation,
                                 dict(SV_PARAMS, gamma={0: 0.3, 1: 0.2, 2: 0.1, 3: 0.4}))
    peer = trained(100, 2, **params)
    sync = group.GroupSync("127.0.0.1:1", "snaps", "new", str(tmp_path), sink=None)
    sync.reader = FakeReader({"p": snapshot("p", 0, peer, {"t": {0: 100}})})
    state, republish = sync.initial_state(
        lambda: state_io.ServiceState(model=AdvKernelSVM(**{**params, "epsilon": 0.0})))
    assert not republish and state.group["worker"] == "new" and state.counters["learned"] == 0
    assert state.model.epsilon == params["epsilon"]  # the group's options won
    sync.fold(state)
    x = {0: 1.0, 1: 0.0, 2: 0.0, 3: 0.0}
    assert state.model.decision_one(x) == pytest.approx(peer.decision_one(x))
    assert state.model.n_learned == 100


@pytest.mark.parametrize("others, adopted", [
    (["odd", "same", "same"], None),  # the others' options, the worker's own: kept
    (["odd", "same"], None),  # one snapshot each: the worker's own count one more
    (["odd"], "odd"),  # the group is that one snapshot: a tie goes to the group's
    (["odd", "odd", "same"], "odd"),  # 2 against 2: the group's
    (["same", "odd", "odd"], "odd"),
])
def test_a_new_worker_adopts_the_options_most_snapshots_share(tmp_path, others, adopted):
    """A misconfigured worker's snapshot (another budget), published before the others and
    left behind when it was killed, was the one whose options a new worker adopted: a worker
    started with the same options as its peers took that budget, and the peers and it then
    refused to average each other. The worker counts as one more for its own options."""
    models = {"same": trained(20, 1, **SV_PARAMS),
              "odd": trained(20, 1, **{**SV_PARAMS, "budget": SV_PARAMS["budget"] // 2})}
    peers = {f"w{i}": snapshot(f"w{i}", i, models[kind], {"t": {i: 20}}, learned=20)
             for i, kind in enumerate(others)}
    sync = group.GroupSync("127.0.0.1:1", "snaps", "new", str(tmp_path), sink=None)
    sync.reader = FakeReader(peers)
    state, _ = sync.initial_state(
        lambda: state_io.ServiceState(model=AdvKernelSVM(**SV_PARAMS)))
    expected = models["same" if adopted is None else adopted]
    assert state.model._get_params() == expected._get_params()


@pytest.mark.parametrize("foreign", ["linear", "gamma scale", "truncate"])
def test_a_new_worker_keeps_its_options_over_a_snapshot_no_group_can_average(
        tmp_path, caplog, foreign):
    # The snapshot of a service started without --sync-every's checks (or a hostile record):
    # adopting its options gave the worker gamma='scale' or the linear model's defaults, which
    # --sync-every refuses, and a model no peer could be averaged with.
    peer = {"linear": lambda: AdvLinearSVM(),
            "gamma scale": lambda: AdvKernelSVM(**{**SV_PARAMS, "gamma": "scale"}),
            "truncate": lambda: AdvKernelSVM(**{**PARAMS, "budget_policy": "truncate"})}[foreign]()
    for i in range(10):
        peer.learn_one({0: float(i % 3) - 1, 1: 0.3}, i % 2)
    sync = group.GroupSync("127.0.0.1:1", "snaps", "new", str(tmp_path), sink=None)
    sync.reader = FakeReader({"p": snapshot("p", 0, peer, {"t": {0: 10}})})
    with caplog.at_level("ERROR", logger=group.__name__):
        state, republish = sync.initial_state(
            lambda: state_io.ServiceState(model=AdvKernelSVM(**SV_PARAMS)))
    assert not republish and state.model._get_params() == AdvKernelSVM(**SV_PARAMS)._get_params()
    assert [r.getMessage().startswith("not adopting the model options of p's snapshot")
            for r in caplog.records] == [True]


@pytest.mark.parametrize("foreign", ["linear", "gamma scale", "truncate", None])
def test_options_no_group_can_average_are_the_reasons_of_a_model_against_itself(foreign):
    model = {"linear": lambda: AdvLinearSVM(),
             "gamma scale": lambda: AdvKernelSVM(**{**SV_PARAMS, "gamma": "scale"}),
             "truncate": lambda: AdvKernelSVM(**{**PARAMS, "budget_policy": "truncate"}),
             None: lambda: AdvKernelSVM(**SV_PARAMS)}[foreign]()
    for i in range(10):
        model.learn_one({0: float(i % 3) - 1, 1: 0.3}, i % 2)
    meta = model.to_checkpoint()[0]
    reason = merge.options_incompatibility(meta)
    assert (reason is None) == (foreign is None)
    if foreign == "linear":
        assert reason == "only AdvKernelSVM models are averaged (AdvLinearSVM)"
    else:
        assert reason == merge.incompatibility(meta, meta)


def test_a_worker_restarts_from_its_newest_snapshot_local_or_published(tmp_path):
    model = trained(100, 2)
    published = snapshot("w", 0, model, {"t": {0: 100}}, seq=4)
    sync = group.GroupSync("127.0.0.1:1", "snaps", "w", str(tmp_path), sink=None)
    sync.reader = FakeReader({"w": published})
    state, republish = sync.initial_state(lambda: None)
    assert (state.group["seq"], republish, state.offsets) == (4, False, {"t": {0: 100}})
    # A local file newer than the topic (which lost it) is used and republished.
    local = published.state()
    local.group["seq"] = 9
    state_io.save(tmp_path, local)
    state, republish = sync.initial_state(lambda: None)
    assert (state.group["seq"], republish) == (9, True)
    # Another worker's checkpoint directory is refused.
    other = group.GroupSync("127.0.0.1:1", "snaps", "x", str(tmp_path), sink=None)
    other.reader = FakeReader({})
    with pytest.raises(ValueError, match="worker 'w'"):
        other.initial_state(lambda: None)


@pytest.mark.parametrize("local_seq", [None, 2])
def test_a_worker_whose_own_snapshot_is_beyond_its_limits_stops_saying_which(tmp_path,
                                                                             local_seq):
    """Restarted with a smaller --budget and no local checkpoint as recent as its snapshot, a
    worker started over: it published an empty model over all it had learned (the claims
    kept, so those messages were never learned again) and ran on. It now refuses to start,
    as it does for a local checkpoint beyond its limits, and nothing is published."""
    model = trained(100, 2, **SV_PARAMS)
    limits = state_io.Limits(budget=SV_PARAMS["budget"] // 2, dtype="float64")
    published = snapshot("w", 0, model, {"t": {0: 100}}, seq=4)
    published = group.parse_snapshot(b"w", state_io.to_bytes(published.state()), 0, limits)
    assert published.beyond_limits is not None
    if local_seq is not None:  # an older local checkpoint, within the limits
        local = snapshot("w", 0, trained(10, 2, **{**SV_PARAMS, "budget": 100}), {"t": {0: 10}},
                         seq=local_seq).state()
        state_io.save(tmp_path, local)
    sync = group.GroupSync("127.0.0.1:1", "snaps", "w", str(tmp_path), sink=None,
                           limits=limits)
    sync.reader = FakeReader({"w": published})
    message = (r"^this worker's snapshot 4 in snaps, newer than its local checkpoint: its model "
               r"has budget=400, over this service's limit budget=200; to load it, raise "
               r"--budget$")
    with pytest.raises(checkpoint.CheckpointError, match=message):
        sync.initial_state(lambda: pytest.fail("no new model"))


def test_a_worker_resuming_from_its_own_snapshot_says_what_it_overrides(tmp_path, caplog):
    """As a restored local checkpoint does: the options the operator changed lose to the
    snapshot's model (an adversarially trained one asked for, a natural one kept), and the
    log said nothing."""
    model = trained(50, 2, **SV_PARAMS)
    sync = group.GroupSync("127.0.0.1:1", "snaps", "w", str(tmp_path), sink=None)
    sync.reader = FakeReader({"w": snapshot("w", 0, model, {"t": {0: 50}}, seq=4)})
    made = AdvKernelSVM(**{**SV_PARAMS, "epsilon": 0.5, "norm": "linf"})
    with caplog.at_level("WARNING", logger=group.__name__):
        state, _ = sync.initial_state(
            lambda: pytest.fail("no new model"),
            lambda state: state_io.overridden(state, None, None, "t", made, source="snapshot"))
    assert state.model.epsilon == 0.1
    assert [r.getMessage() for r in caplog.records] == [
        "the snapshot's model is kept with epsilon=0.1 (the options: 0.5), norm='l2' (the "
        "options: 'linf')"]


def test_totals_count_every_message_once_over_the_latest_snapshots():
    m = trained(10, 1)
    snaps = [snapshot("a", 0, m, {"t": {0: 60, 1: 20}}, learned=70, messages=80),
             snapshot("b", 1, m, {"t": {1: 50}}, learned=25, messages=30)]
    summary = group.totals(snaps)
    assert summary["consumed"] == 110 == summary["claimed_messages"]
    assert summary["samples_learned"] == 95 and summary["workers"] == ["a", "b"]


def test_a_snapshot_with_other_options_is_not_the_groups_however_early():
    """A record on the snapshot topic with other model options (a larger budget, say) was
    counted by `advsvm inspect` as a worker of the group, and, published first, decided the
    merged model's options. Its messages and resume points do count: the workers resume from
    every snapshot's claims (a worker with other options did consume those messages)."""
    m = trained(10, 1)
    odd = trained(10, 1, budget=4096)
    snaps = [snapshot("odd", 0, odd, {"t": {0: 90, 1: 90}}, learned=170, messages=180),
             snapshot("a", 1, m, {"t": {0: 60, 1: 20}}, learned=70, messages=80),
             snapshot("b", 2, m, {"t": {1: 50}}, learned=25, messages=30)]
    summary = group.totals(snaps)
    assert summary["workers"] == ["a", "b"] and list(summary["left_out"]) == ["odd"]
    assert "budget" in summary["left_out"]["odd"]
    assert summary["consumed"] == 290 and summary["claimed_messages"] == 180
    assert summary["offsets"] == {"t": {"0": 90, "1": 90}}
    assert summary["samples_learned"] == 95  # the members', whose models make the group's
    model = group.group_model(snaps)
    assert model.budget == m.budget and model.n_learned == 95
    # Ties go to the earliest snapshot's options.
    assert group_state.members(snaps[:2]) == ([snaps[0]], {"a": merge.incompatibility(
        snaps[0].meta, snaps[1].meta)})


def test_worker_ids_are_kept_in_the_checkpoint_directory(tmp_path):
    first = group.worker_id(str(tmp_path))
    assert group.worker_id(str(tmp_path)) == first  # stable across restarts
    assert group.worker_id(str(tmp_path), first) == first
    with pytest.raises(ValueError, match="belongs to worker"):
        group.worker_id(str(tmp_path), "someone-else")
    with pytest.raises(ValueError, match="invalid worker id"):
        group.worker_id(str(tmp_path / "x"), "fence/me")


# -- the snapshot topic's records are outside input: any bytes parse or are refused ---------------


@settings(max_examples=300, deadline=None)
@given(key=st.one_of(st.none(), st.binary(max_size=24),
                     st.binary(max_size=16).map(lambda b: b"fence/" + b)),
       value=st.one_of(st.none(), st.binary(max_size=40),
                       st.integers(-2**70, 2**70).map(lambda g: f'{{"generation": {g}}}'.encode()),
                       st.sampled_from([b'{"generation": true}', b'{"generation": 1.0}',
                                        b'{"generation": null}', b"[1]", b'"x"'])))
def test_parse_fence_takes_any_record(key, value):
    """None for a record that is not a fence, else the writer and a generation that is None or
    an int >= 0; never an exception."""
    fence = parse_fence(key, value)
    if key is None or not key.startswith(b"fence/"):
        assert fence is None
        return
    writer, generation = fence
    assert writer == key[len(b"fence/"):].decode("utf-8", "replace")
    assert generation is None or (type(generation) is int and generation >= 0)


_SNAPSHOT = None


def _a_snapshot() -> bytes:
    global _SNAPSHOT
    if _SNAPSHOT is None:
        state = state_io.ServiceState(model=trained(30, 1, **SV_PARAMS), offsets={"t": {0: 30}},
                                      topic_ids={"t": None})
        state.counters["learned"] = 30
        state.group = group.new_bookkeeping("w")
        _SNAPSHOT = state_io.to_bytes(state)
    return _SNAPSHOT


@settings(max_examples=150, deadline=None)
@given(cuts=st.lists(st.integers(0, 10**6), max_size=4), noise=st.binary(min_size=1, max_size=8),
       reseal=st.booleans(), key=st.sampled_from([b"w", b"x", b"\xff"]))
def test_parse_snapshot_takes_any_bytes(cuts, noise, reseal, key):
    """A snapshot with bytes overwritten (resealed or not, so that the parsers behind the seal
    see them too) is a `Snapshot` of its key's worker or a `CheckpointError`, nothing else,
    under the reader's limits."""
    data = bytearray(_a_snapshot())
    for cut in cuts:
        at = cut % len(data)
        data[at:at + len(noise)] = noise
    if reseal:
        body = bytes(data[:-95])  # the seal: a 31-byte prefix and the hex SHA-256 of the rest
        data = body + b"river-advsvm-checkpoint sha256 " + hashlib.sha256(body).hexdigest(
            ).encode()
    try:
        snapshot = group.parse_snapshot(key, bytes(data), 7, state_io.Limits())
    except checkpoint.CheckpointError:
        return
    assert snapshot.worker == key.decode("utf-8", "replace") == "w"


def _model_paths(tree, prefix=()):
    """The paths to every value under a snapshot's `params` and `state`, three keys deep."""
    if prefix:
        yield prefix
    if isinstance(tree, dict) and len(prefix) < 3:
        for key, value in tree.items():
            if prefix or key in ("params", "state"):
                yield from _model_paths(value, prefix + (key,))


_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-2**64, 2**64), st.floats(),
                  st.text(max_size=3), st.lists(st.integers(-2, 2), max_size=3),
                  st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))


@settings(max_examples=120, deadline=None)
@given(unread=st.sampled_from(["basis not held", "beyond limits"]), data=st.data())
def test_a_snapshot_whose_model_is_not_read_is_a_models_metadata_or_refused(unread, data):
    """A peer's snapshot over a basis the reader does not hold, or beyond its limits, is never
    made a model, but the group compares its class, options and labels with the others': one
    field of them changed behind a valid seal is refused as the snapshot is read (a snapshot
    without its labels stopped every reader of the group's totals with a KeyError)."""
    from river_advsvm import model_checkpoint
    from river_advsvm.streams import group_basis

    model = trained(30, 2, **{**SV_PARAMS, "budget": 64})
    state = state_io.ServiceState(model=model, offsets={"t": {0: 30}}, topic_ids={"t": None})
    state.counters["learned"] = state.counters["consumed"] = 30
    state.group = group.new_bookkeeping("v")
    meta, arrays = model_checkpoint.loads(state_io.to_bytes(state))
    meta = {k: v for k, v in meta.items() if k not in ("format", "version", "arrays")}
    limits = state_io.Limits()
    if unread == "basis not held":
        basis = SharedBasis("rbf", 0.2, arrays["vectors"], meta["state"]["names"])
        meta, arrays = group_basis.coefficient_snapshot(meta, arrays, basis, 1)
    else:
        limits = state_io.Limits(budget=32, dtype="float64")
    path = data.draw(st.sampled_from(list(_model_paths(meta))))
    parent = meta
    for key in path[:-1]:
        parent = parent[key]
    if data.draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(_JUNK)
    try:
        blob = model_checkpoint.dumps(meta, arrays)
    except (ValueError, TypeError, KeyError, AttributeError):
        return  # (the writer takes only a model's metadata)
    good = snapshot("w", 3, trained(30, 1, **{**SV_PARAMS, "budget": 64}), {"t": {1: 30}})
    try:
        peer = group.parse_snapshot(b"v", blob, 9, limits)
    except checkpoint.CheckpointError:
        return
    assert peer.model_unread is not None
    group_state.totals([good, peer])
    group_state.totals([peer, good])
    merge.incompatibility(peer.meta, good.meta)
    merge.incompatibility(good.meta, peer.meta)


# -- weights near float64's range, and the group clock of an average --------------------------


@pytest.mark.parametrize("representation", ["compact", "merge", "basis"])
@pytest.mark.parametrize("weights, shares", [
    ((1e308, 1e308), (0.5, 0.5)),  # the sum overflowed to inf: every share was 0
    ((1.5e308, 0.5e308), (0.75, 0.25)),
    ((5e-324, 1.5e-323), (0.25, 0.75)),  # subnormal weights: their ratio is exact
])
def test_weights_whose_sum_overflows_average_as_their_ratio(representation, weights, shares):
    params = REPRESENTATIONS.get(representation, SV_PARAMS)
    a, b = trained(40, 1, names="abc", **params), trained(40, 2, names="abc", **params)
    if representation == "basis":
        meta, arrays = a.to_checkpoint()
        basis = SharedBasis("rbf", 0.2, arrays["vectors"], meta["state"]["names"])
        members = [(m, {"alpha": merge.project(m, x, basis)[0]}, w)
                   for (m, x), w in zip([a.to_checkpoint(), b.to_checkpoint()], weights)]
        expected = merge.to_model(*merge.average(
            [(m, x, s) for (m, x, _), s in zip(members, shares)], 80, basis=basis))
        merged = merge.to_model(*merge.average(members, 80, basis=basis))
    else:
        expected = None
        merged = merge.to_model(*merge.average(
            [(*a.to_checkpoint(), weights[0]), (*b.to_checkpoint(), weights[1])], 80))
    temperature = [shares[0] * ta + shares[1] * tb for ta, tb in zip(
        a.to_checkpoint()[0]["state"]["temperature"], b.to_checkpoint()[0]["state"]["temperature"])]
    assert merged.to_checkpoint()[0]["state"]["temperature"] == pytest.approx(temperature)
    for x in queries("abc", n=5):
        want = (expected.decision_one(x) if expected is not None
                else shares[0] * a.decision_one(x) + shares[1] * b.decision_one(x))
        assert merged.decision_one(x) == pytest.approx(want, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("representation", REPRESENTATIONS)
def test_the_group_clock_of_an_average_restarts_at_its_count(representation):
    """The base's clock `(start, rate)` maps its own count to the group's from `start`; the
    average counts `n_learned`. Kept as is, a start past `n_learned` made a model that could
    not be loaded (a new worker's `group_model` over snapshots whose total is below the base's
    last fold), and a start below it stepped as if the group had learned `rate` times each
    sample since the base's fold."""
    params = dict(REPRESENTATIONS[representation], schedule="diminishing", regularization=0.01)
    a, b = trained(30, 1, **params), trained(30, 2, **params)
    a.group_steps(3.0)
    for n_learned in (10, 30, 1000):
        merged = merge.to_model(*merge.average([(*a.to_checkpoint(), 1.0),
                                                (*b.to_checkpoint(), 1.0)], n_learned))
        start = 30 if n_learned == 30 else n_learned  # the base's own count: the same clock
        assert merged.to_checkpoint()[0]["state"]["group_clock"] == [start, 3.0]
        assert merged.n_learned == n_learned and merged.group_rate == 3.0
        # From its count on, each sample stands for 3 of the group's.
        alone = AdvKernelSVM(**params)
        assert merged._step_sizes(n_learned + 2) == pytest.approx(
            tuple(3 * s for s in alone._step_sizes(n_learned + 6)))
    # The group's model a new worker starts from (the base's clock is 30, the total 25).
    snaps = [snapshot("a", 0, a, {"t": {0: 30}}, learned=20),
             snapshot("b", 1, b, {"t": {1: 30}}, learned=5)]
    model = group.group_model(snaps)
    assert model.n_learned == 25 and model.to_checkpoint()[0]["state"]["group_clock"] == [25, 3.0]


@pytest.mark.parametrize("representation", ["compact", "merge", "basis"])
def test_the_share_of_active_samples_is_averaged_so_the_order_of_the_members_does_not_matter(
        representation):
    """`active_share` (recent samples inside the margin; it damps the bias' steps) was the
    first member's: averaging the same models in another order gave models that learned on
    differently (here 0.06 apart in f after 30 samples). It is averaged with the same shares,
    as is the labels' balance (which a damped bias step follows)."""
    params = REPRESENTATIONS.get(representation, SV_PARAMS)
    a, b = trained(40, 1, names="abc", **params), trained(5, 2, names="abc", **params)
    shares = {id(a): 0.25, id(b): 0.75}
    basis = None
    if representation == "basis":
        meta, arrays = a.to_checkpoint()
        basis = SharedBasis("rbf", 0.2, arrays["vectors"], meta["state"]["names"])

    def member(model):
        meta, arrays = model.to_checkpoint()
        if basis is not None:
            arrays = {"alpha": merge.project(meta, arrays, basis)[0]}
        return meta, arrays, 4.0 * shares[id(model)]

    expected = sum(s * m.to_checkpoint()[0]["state"]["model"]["active_share"]
                   for m, s in ((a, 0.25), (b, 0.75)))
    balance = 0.25 * a._label_balance + 0.75 * b._label_balance  # (the same orientation)
    assert a._active_share != b._active_share and a._label_balance != b._label_balance
    decisions = []
    for order in ((a, b), (b, a)):
        meta, arrays = merge.average([member(m) for m in order], 45, basis=basis)
        assert meta["state"]["model"]["active_share"] == pytest.approx(expected, rel=1e-12)
        assert meta["state"]["model"]["label_balance"] == pytest.approx(balance, rel=1e-12)
        model = merge.to_model(meta, arrays)
        if basis is not None:
            model._store.revisit_from(0)  # (over a basis the base's revisit cursor is kept)
        for i in range(30):
            model.learn_one({"a": 0.1 * (i % 5), "b": -0.3, "c": 0.2 * (i % 3)}, i % 2)
        decisions.append(model.decision_one({"a": 0.3, "b": 0.1, "c": -0.2}))
    assert decisions[0] == pytest.approx(decisions[1], rel=1e-9, abs=1e-12)


def test_out_of_memory_while_folding_or_reading_a_peer_is_the_machines_fault(
        tmp_path, monkeypatch):
    # A MemoryError while averaging the peers, or while parsing a peer's snapshot (which a
    # peer cannot make larger than this worker's limits), was logged as "not averaging" / "not
    # a readable snapshot" and the worker went on without the peer: it now stops the service
    # as any MemoryError does (exit status 5, restarted).
    from river_advsvm.streams import snapshot_topic

    peer = trained(50, 2, **SV_PARAMS)
    sync = group.GroupSync("127.0.0.1:1", "snaps", "me", str(tmp_path), sink=None,
                           group_model="union")
    sync.reader = FakeReader({"p": snapshot("p", 0, peer, {"t": {1: 50}}, learned=50)})
    state = state_io.ServiceState(model=trained(50, 1, **SV_PARAMS),
                                  group=group.new_bookkeeping("me"))

    def out_of_memory(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(merge, "average", out_of_memory)
    with pytest.raises(MemoryError):
        sync.fold(state)

    monkeypatch.setattr(snapshot_topic, "parse_snapshot", out_of_memory)
    reader = object.__new__(snapshot_topic.SnapshotReader)
    reader.topic, reader.basis, reader.limits, reader.invalid = "snaps", None, None, 0
    reader._fenced_since = {}

    class Record:
        key, value, offset = b"p", b"{}", 7

    with pytest.raises(MemoryError):
        reader._take(Record())
    assert reader.invalid == 0


@pytest.mark.parametrize("representation", list(REPRESENTATIONS))
def test_models_that_predict_with_their_average_fold_their_averages(representation):
    """The group's model predicts with the members' averages of their iterates, weighted as
    their `f` (exactly, when the fold keeps every vector: random features, or a budget no
    union fills); its `f` is the fold of the members' `f`, as without averaging; it learns on
    with the folded average."""
    params = {**REPRESENTATIONS[representation], "averaging": 50}
    a, b = (trained(150, seed, **params) for seed in (1, 2))
    members = [(*a.to_checkpoint(), 3.0), (*b.to_checkpoint(), 1.0)]
    merged = merge.to_model(*merge.average(members, 300))
    X = np.random.default_rng(3).normal(size=(20, 4))
    # (support vectors: the projection onto the union of the vectors solves with their
    # kernel matrix, ill-conditioned: exact in function space to its ridge)
    np.testing.assert_allclose(merged.decision_many(X),
                               0.75 * a.decision_many(X) + 0.25 * b.decision_many(X),
                               rtol=1e-6, atol=1e-6)
    average = merged._store.averaged
    assert average.count == 150 and average.horizon == 50
    assert average.bias == pytest.approx(0.75 * a._store.averaged.bias
                                         + 0.25 * b._store.averaged.bias, abs=1e-12)
    last = merge.to_model(*merge.average(
        [(*trained(150, seed, **REPRESENTATIONS[representation]).to_checkpoint(), w)
         for seed, w in ((1, 3.0), (2, 1.0))], 300))
    learner = "coef" if representation == "compact" else "alpha"
    np.testing.assert_array_equal(merged.to_checkpoint()[1][learner],
                                  last.to_checkpoint()[1][learner])
    merged.learn_many(X, X[:, 0] > 0.0)
    assert merged._store.averaged is average and average.count == 170
    assert np.isfinite(merged.decision_many(X)).all()


def test_a_member_without_an_average_stands_for_its_f():
    """A member that holds no average of its iterates (a model folded since it last learned)
    is folded as the average it would start: its `f`."""
    params = {**SV_PARAMS, "averaging": 50}
    a, b = trained(150, 1, **params), trained(150, 2, **params)
    meta_b, arrays_b = b.to_checkpoint()
    del meta_b["state"]["model"]["average"]
    arrays_b = {k: v for k, v in arrays_b.items() if not k.startswith("average_")}
    f_b = merge.to_model(meta_b, arrays_b)  # (predicts with its f)
    merged = merge.to_model(*merge.average([(*a.to_checkpoint(), 1.0),
                                            (meta_b, arrays_b, 1.0)], 300))
    X = np.random.default_rng(4).normal(size=(20, 4))
    np.testing.assert_allclose(merged.decision_many(X),
                               0.5 * a.decision_many(X) + 0.5 * f_b.decision_many(X),
                               rtol=1e-6, atol=1e-6)
    assert merged._store.averaged.count == 75


def test_a_fold_over_the_budget_projects_the_averages_onto_its_vectors():
    """Past the budget the fold keeps `B` vectors: the average it keeps is the closest
    function of their span to the members' weighted averages, in the kernel's space (so
    no farther than the fold's `f`, the average a fold that dropped them would start)."""
    params = {**SV_PARAMS, "averaging": 50, "budget": 16}
    a, b = trained(300, 1, **params), trained(300, 2, **params)
    assert a._store.averaged.orphans.size and b._store.averaged.orphans.size
    (meta, arrays), weights = merge.average([(*a.to_checkpoint(), 3.0),
                                             (*b.to_checkpoint(), 1.0)], 600), (0.75, 0.25)
    assert meta["state"]["model"]["average"]["count"] == 300
    gamma = meta["state"]["model"]["store"]["gamma"]
    assert all(m.to_checkpoint()[0]["state"]["names"] == meta["state"]["names"] for m in (a, b))
    target = [support_average.saved_expansion(m.to_checkpoint()[1]) for m in (a, b)]
    V = np.concatenate([arrays["vectors"]] + [v for v, _ in target])

    def distance(coefficients) -> float:
        w = np.concatenate([coefficients] + [-s * c for s, (_, c) in zip(weights, target)])
        return float(w @ kernel_matrix("rbf", gamma, V, V) @ w)

    scale = meta["state"]["model"]["store"]["scale"]
    folded_f = distance(scale * arrays["alpha"])
    folded_average = distance(arrays["average_coefficients"])
    assert folded_average <= folded_f + 1e-9 and folded_average < 0.9 * folded_f
    assert len(arrays["average_orphans"]) == 0
    merge.to_model(meta, arrays).learn_many(np.ones((3, 4)), [0, 1, 1])


@pytest.mark.parametrize("arrays, averaging, error", [
    ({"alpha": np.ones(4)}, False, None),
    ({"alpha": np.ones(5)}, False, "alpha has 5 coefficients, over 4"),
    ({"alpha": np.ones(4), "average_alpha": np.ones(4)}, True, None),
    ({"alpha": np.ones(4), "average_alpha": np.ones(3)}, True,
     "average_alpha has 3 coefficients, alpha 4"),
    ({"alpha": np.ones((2, 2))}, False, "alpha is not a row of float64 coefficients"),
    ({"alpha": np.ones(4, dtype=np.float32)}, False, "not a row of float64"),
    ({"alpha": np.array([1.0, np.nan, 0.0, 0.0])}, False, "not finite or too large"),
    ({"alpha": np.full(4, 3e149)}, False, r"add up to 1\.2e\+150, over 1e\+150"),
    ({"alpha": np.full(4, 2.5e149)}, False, None),  # the bound itself
    ({"alpha": np.ones(4)}, True, r"expected the arrays \['alpha', 'average_alpha'\]"),
])
def test_coefficients_over_a_basis_are_checked_one_way_each(arrays, averaging, error):
    """At most the basis' size, as many in the average as in `alpha`, float64 in one row, and
    magnitudes adding up to at most a store's bound (finite but huge ones overflowed the
    group's average, and every fold failed)."""
    meta = {"state": {"model": {"average": {}} if averaging else {}}}
    if error is None:
        merge.check_over_basis(meta, arrays, most=4)
    else:
        with pytest.raises(ValueError, match=error):
            merge.check_over_basis(meta, arrays, most=4)


def test_a_fold_starts_the_watches_of_the_average_afresh_whatever_the_members_order():
    """The evidence that the average lags behind or leads (`LagWatch.total`, `ahead`) and the
    estimate of the part of the average given up were the first member's: two orders of the
    same members gave models that restarted their averages at different samples. The fold's
    start at 0 (its count of restarts, a counter, stays the first member's)."""
    params = {**SV_PARAMS, "averaging": 20}
    a, b = trained(40, 1, **params), trained(30, 2, **params)
    a._lag.total, a._lag.restarts, a._given_up.part, a._given_up.misses = 3.5, 2, 0.25, 0.5
    b._lag.total, b._lag.restarts, b._given_up.part, b._given_up.misses = 1.5, 1, -0.5, 0.0
    a._lag.ahead, b._lag.ahead = 2.5, 4.0
    for first, second in ((a, b), (b, a)):
        meta, arrays = merge.average([(*first.to_checkpoint(), 1.0),
                                      (*second.to_checkpoint(), 1.0)], 70)
        model = merge.to_model(meta, arrays)
        assert (model._lag.total, model._lag.ahead) == (0.0, 0.0)
        assert model._lag.restarts == first._lag.restarts
        assert (model._given_up.part, model._given_up.misses) == (0.0, 0.0)


def test_a_fold_keeps_which_vectors_came_with_both_labels():
    """A member's vector whose input came with both labels is not reprocessed (its sign is no
    label): the fold of the union keeps the flag, and adds it where equal vectors of the
    members have different signs; the base's own flags do not outlive its vectors."""
    def model(labels):
        m = AdvKernelSVM(**{**SV_PARAMS, "epsilon": 0.0})
        for i, label in enumerate(labels):
            m.learn_one({0: 1.0, 1: float(i % 2)}, label)
        return m

    a, b = model([0, 1, 1]), model([1, 1, 1, 1])  # a: {0: 1, 1: 0} came as 0 and 1
    assert a._store.mixed.tolist() == [True, False] and not b._store.mixed.any()
    meta, arrays = merge.average([(*a.to_checkpoint(), 1.0), (*b.to_checkpoint(), 1.0)], 7)
    folded = merge.to_model(meta, arrays)
    rows = {tuple(v.astype(float)): m for v, m in zip(folded._store.vectors,
                                                      folded._store.mixed)}
    assert rows == {(1.0, 0.0): True, (1.0, 1.0): False}
    meta, arrays = merge.average([(*a.to_checkpoint(), 0.0), (*b.to_checkpoint(), 1.0)], 4)
    assert "mixed" not in arrays  # (a's vectors are not in the fold)
    assert not merge.to_model(meta, arrays)._store.mixed.any()
