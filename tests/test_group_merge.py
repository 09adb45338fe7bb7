"""Averaging models across workers and the group protocol's bookkeeping, without a broker."""

from __future__ import annotations

import numpy as np
import pytest

from river_advsvm import AdvKernelSVM
from streams import group, merge
from streams import state as state_io

PARAMS = dict(epsilon=0.1, gamma=0.2, budget=64, budget_policy="compact", seed=3)


def trained(n: int, data_seed: int, labels=(0, 1), **params) -> AdvKernelSVM:
    rng = np.random.default_rng(data_seed)
    model = AdvKernelSVM(**{**PARAMS, **params})
    for _ in range(n):
        x = rng.normal(size=4)
        y = labels[int(x[0] + 0.5 * x[1] > 0)] if len(labels) == 2 else labels[0]
        model.learn_one(dict(enumerate(x)), y)
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


def test_models_that_saw_their_labels_in_another_order_are_aligned_exactly():
    # `only_b` saw only "b" (provisionally positive, rightly); `only_a` saw only "a", which it
    # holds as provisionally positive although "a" < "b" makes it the negative class.
    only_b = trained(50, 1, labels=("b",))
    only_a = trained(50, 2, labels=("a",))
    meta, arrays = merge.average([(*only_b.to_checkpoint(), 1.0), (*only_a.to_checkpoint(), 1.0)],
                                 n_learned=100)
    model = merge.to_model(meta, arrays)
    assert model.classes == ("a", "b")
    x = {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4}
    assert model.decision_one(x) == pytest.approx(
        (only_b.decision_one(x) - only_a.decision_one(x)) / 2)
    # A third label cannot be averaged in.
    third = trained(10, 3, labels=("c",))
    reason = merge.incompatibility(meta, third.to_checkpoint()[0])
    assert reason is not None and "do not fit" in reason


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
    (dict(budget_policy="truncate"), "compact"),
    (dict(seed=None), "seed"),
])
def test_options_that_cannot_share_a_pool_are_refused_up_front(params, message):
    model = AdvKernelSVM(**{**PARAMS, **params})
    with pytest.raises(ValueError, match=message):
        merge.check_mergeable_params(model._get_params())


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


class FakeReader:
    def __init__(self, latest):
        self.latest = latest


def test_fold_weighs_each_peer_by_the_samples_not_yet_averaged_in(tmp_path):
    """A peer's snapshot is averaged in once: folding the same snapshot again is a no-op, so a
    dead worker's last model does not pull the others back at every sync."""
    mine, peer = trained(200, 1), trained(300, 2)
    peer_snap = snapshot("p", 0, peer, {"t": {1: 300}}, learned=300)
    sync = group.GroupSync("127.0.0.1:1", "snaps", "me", str(tmp_path), sink=None)
    sync.reader = FakeReader({"p": peer_snap})
    state = state_io.ServiceState(model=mine, group=group.new_bookkeeping("me"))
    state.counters["learned"] = 200

    assert sync.fold(state) == 1
    x = {0: 0.5, 1: 0.5, 2: -0.5, 3: 1.0}
    expected = (200 * mine.decision_one(x) + 300 * peer.decision_one(x)) / 500
    assert state.model.decision_one(x) == pytest.approx(expected)
    assert state.model.n_learned == 500
    assert state.group["folded"] == {"p": 300} and state.group["self_at_fold"] == 200

    before = state.model.decision_one(x)
    assert sync.fold(state) == 0  # nothing new from the peer: unchanged
    assert state.model.decision_one(x) == before

    # 50 more samples here and 100 more at the peer: weights 50 and 100.
    for i in range(50):
        state.model.learn_one({0: float(i % 3) - 1, 1: 0.3}, i % 2)
    state.counters["learned"] = 250
    peer2 = trained(400, 2)
    sync.reader = FakeReader({"p": snapshot("p", 1, peer2, {"t": {1: 400}}, learned=400,
                                            seq=2)})
    mine_now = state.model.decision_one(x)
    assert sync.fold(state) == 1
    assert state.model.decision_one(x) == pytest.approx(
        (50 * mine_now + 100 * peer2.decision_one(x)) / 150)
    assert state.model.n_learned == 650


def test_a_new_worker_starts_from_the_group_and_adopts_its_options(tmp_path):
    peer = trained(100, 2)
    sync = group.GroupSync("127.0.0.1:1", "snaps", "new", str(tmp_path), sink=None)
    sync.reader = FakeReader({"p": snapshot("p", 0, peer, {"t": {0: 100}})})
    state, republish = sync.initial_state(
        lambda: state_io.ServiceState(model=AdvKernelSVM(**{**PARAMS, "epsilon": 0.0})))
    assert not republish and state.group["worker"] == "new" and state.counters["learned"] == 0
    assert state.model.epsilon == PARAMS["epsilon"]  # the group's options won
    sync.fold(state)
    x = {0: 1.0, 1: 0.0, 2: 0.0, 3: 0.0}
    assert state.model.decision_one(x) == pytest.approx(peer.decision_one(x))
    assert state.model.n_learned == 100


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


def test_totals_count_every_message_once_over_the_latest_snapshots():
    m = trained(10, 1)
    snaps = [snapshot("a", 0, m, {"t": {0: 60, 1: 20}}, learned=70, messages=80),
             snapshot("b", 1, m, {"t": {1: 50}}, learned=25, messages=30)]
    summary = group.totals(snaps)
    assert summary["consumed"] == 110 == summary["claimed_messages"]
    assert summary["samples_learned"] == 95 and summary["workers"] == ["a", "b"]


def test_worker_ids_are_kept_in_the_checkpoint_directory(tmp_path):
    first = group.worker_id(str(tmp_path))
    assert group.worker_id(str(tmp_path)) == first  # stable across restarts
    assert group.worker_id(str(tmp_path), first) == first
    with pytest.raises(ValueError, match="belongs to worker"):
        group.worker_id(str(tmp_path), "someone-else")
    with pytest.raises(ValueError, match="invalid worker id"):
        group.worker_id(str(tmp_path / "x"), "fence/me")
