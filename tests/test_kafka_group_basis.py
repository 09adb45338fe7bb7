"""`advsvm serve --group-model basis`: workers fold over a basis the group shares, against a
real broker. The fold is checked exactly in process (`GroupSync` on the broker's snapshot
topic); two worker processes check the service end to end."""

from __future__ import annotations

import logging
import os
import re

import numpy as np
import pytest

import kafka_helpers as kh
from river_advsvm import AdvKernelSVM, checkpoint, model_checkpoint
from river_advsvm.streams import clients, merge
from river_advsvm.streams import group as group_io
from river_advsvm.streams import state as state_io
from river_advsvm.streams.group_basis import KEPT_EPOCHS, basis_record, coefficient_snapshot
from river_advsvm.streams.sink import OutputSink
from river_advsvm.support_basis import SharedBasis

pytestmark = pytest.mark.kafka

D, BUDGET, GAMMA = 6, 24, 0.2
PARAMS = dict(gamma=GAMMA, budget=BUDGET, budget_policy="merge", seed=0)


def learned_model(n: int, seed: int) -> AdvKernelSVM:
    model = AdvKernelSVM(**PARAMS)
    X, y = kh.stream(n, d=D, seed=seed)
    for x, label in zip(X, y):
        model.learn_one(dict(enumerate(x)), label)
    return model


def service_state(worker: str, model, learned: int, offset: int, partition: int):
    s = state_io.ServiceState(model=model, offsets={"in": {partition: offset}},
                              topic_ids={"in": None}, group=group_io.new_bookkeeping(worker))
    s.counters["consumed"] = s.counters["learned"] = learned
    return s


def basis_of(meta: dict, arrays: dict) -> SharedBasis:
    store = meta["state"]["model"]["store"]
    return SharedBasis(store["kernel"], store["gamma"], arrays["vectors"], meta["state"]["names"])


@pytest.fixture
def workers(broker, tmp_path, request):
    """Two `GroupSync`s over a fresh snapshot topic: w0 refreshes the basis at every fold."""
    kafka_clients = clients.Clients(broker.bootstrap_servers)
    topic = f"basis-{request.node.name[:40]}"
    made, sinks = {}, []
    for worker, refresh in (("w0", 1), ("w1", 100)):
        sinks.append(OutputSink(kafka_clients.producer))
        (tmp_path / worker).mkdir()
        made[worker] = group_io.GroupSync(
            kafka_clients, topic, worker, str(tmp_path / worker), sinks[-1],
            state_io.Limits.of(AdvKernelSVM(**PARAMS)), "basis", refresh)
        made[worker].start()
    yield made
    for sync in made.values():
        sync.close()
    for sink in sinks:
        sink.close()


def learn(state, n: int, seed: int) -> None:
    X, y = kh.stream(n, d=D, seed=seed)
    for x, label in zip(X, y):
        state.model.learn_one(dict(enumerate(x)), label)
    state.counters["learned"] += n
    state.counters["consumed"] += n


def alpha(state) -> np.ndarray:
    return state.model.to_checkpoint()[1]["alpha"]


def test_two_workers_fold_over_the_groups_basis_exactly(workers, caplog):
    """w1 folds w0's first snapshot: it proposes the first basis (its own vectors) and the
    fold is the sample-weighted mean of the coefficients of both models projected onto it. Two
    syncs later w0 proposes a newer basis (it refreshes after every fold on one): w1's latest
    snapshot, made on the older basis, is projected onto the new one; w1 then holds it too."""
    caplog.set_level(logging.INFO, logger="river_advsvm.streams.group")
    w0, w1 = workers["w0"], workers["w1"]
    s0 = service_state("w0", learned_model(60, seed=1), 60, 60, 0)
    s1 = service_state("w1", learned_model(90, seed=2), 90, 90, 1)
    assert w0.fold(s0) == 0 and w0.choice.basis is None  # no peers: no basis needed
    assert w0.fence(1) and w0.publish(s0, 1)

    f0, f1 = s0.model.to_checkpoint(), s1.model.to_checkpoint()
    assert w1.fence(1) and w1.fold(s1) == 1
    basis = w1.choice.basis
    assert (w1.choice.epoch, w1.choice.proposer) == (1, "w1")
    np.testing.assert_array_equal(basis.vectors, f1[1]["vectors"])
    a0, loss0 = merge.project(*f0, basis)
    a1, loss1 = merge.project(*f1, basis)
    # w1's own model is in the span (up to its float32 vectors' rounding of the norm)
    assert loss0 > 0 and loss1 <= 1e-6 * (1 + f1[0]["state"]["model"]["store"]["squared_norm"])
    np.testing.assert_allclose(alpha(s1), (60 * a0 + 90 * a1) / 150, rtol=1e-6, atol=1e-9)
    assert s1.model.n_learned == 150 and s1.model.n_support_vectors == basis.size
    assert s1.group["folded"] == {"w0": 60} and s1.group["self_at_fold"] == 90
    assert s1.model.group_rate == pytest.approx(150 / 90)  # the group's samples per own one
    assert w1.publish(s1, 1)

    # w0 learns 30 more and folds w1's snapshot, which is on the basis: by its coefficients.
    learn(s0, 30, seed=3)
    own, _ = merge.project(*s0.model.to_checkpoint(), basis)
    peer = alpha(s1)
    caplog.clear()
    assert w0.fence(1) and w0.fold(s0) == 1 and w0.choice.epoch == 1
    assert "projected the snapshot" not in caplog.text
    np.testing.assert_allclose(alpha(s0), (90 * own + 90 * peer) / 180, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(s0.model.to_checkpoint()[1]["vectors"], basis.vectors)
    assert w0.publish(s0, 1)
    learn(s1, 10, seed=4)
    assert w1.fence(1) and w1.fold(s1) == 1 and w1.choice.epoch == 1 and w1.publish(s1, 1)

    # w0's second fold on basis 1: it proposes basis 2, and projects w1's snapshot onto it.
    learn(s0, 10, seed=5)
    before, peer_state = s0.model.to_checkpoint(), s1.model.to_checkpoint()
    caplog.clear()
    assert w0.fence(1) and w0.fold(s0) == 1
    assert (w0.choice.epoch, w0.choice.proposer) == (2, "w0")
    assert "projected the snapshot 2 of w1 onto the group's basis 2" in caplog.text
    new = w0.choice.basis
    own, _ = merge.project(*before, new)
    peer, loss = merge.project(*peer_state, new)
    assert loss > 0
    np.testing.assert_allclose(alpha(s0), (10 * own + 10 * peer) / 20, rtol=1e-6, atol=1e-9)
    assert s0.model.n_learned == 200 and s0.group["folded"] == {"w1": 100}
    assert w1.fence(1) and w1.choice.epoch == 2 and w1.choice.basis.key == new.key


def test_hostile_basis_records_and_snapshots_change_nothing(workers, broker, caplog):
    """Basis records with NaN, too many vectors, or columns that do not match their names,
    and peer snapshots with NaN, wrong dimensions or over the budget, are each logged and
    skipped: the group's basis and the worker's model stay what they were."""
    w0, w1 = workers["w0"], workers["w1"]
    m0 = learned_model(60, seed=1)
    s0 = service_state("w0", m0, 60, 60, 0)
    assert w0.fence(1) and w0.publish(s0, 1)
    s1 = service_state("w1", learned_model(90, seed=2), 90, 90, 1)
    assert w1.fence(1) and w1.fold(s1) == 1 and w1.choice.epoch == 1
    assert w1.publish(s1, 1)
    meta, arrays = s1.model.to_checkpoint()
    names = meta["state"]["names"]
    vectors = arrays["vectors"].astype(np.float32)

    nan = vectors.copy()
    nan[0, 0] = np.nan
    big = np.random.default_rng(0).normal(size=(BUDGET + 1, len(names))).astype(np.float32)
    records = [basis_record(2, "x", "rbf", GAMMA, nan, names),
               basis_record(2, "x", "rbf", GAMMA, big, names),
               basis_record(2, "x", "rbf", GAMMA, vectors[:, :-1], names),
               (b"basis/3/x", b"not a checkpoint")]

    def snapshot(change):
        hostile = service_state("w9", s0.model, 60, 5, 2)
        hostile.group["seq"] = 1
        m, a = checkpoint.loads(state_io.to_bytes(hostile))
        m = {k: v for k, v in m.items() if k not in ("format", "version", "arrays")}
        a = {k: np.array(v, copy=True) for k, v in a.items()}
        change(m, a)
        return b"w9", checkpoint.dumps(m, a)

    def nan_alpha(m, a):
        a["alpha"][0] = np.nan

    def wide(m, a):
        a["vectors"] = np.concatenate([a["vectors"], a["vectors"][:, :1]], axis=1)

    def over_budget(m, a):
        m["params"]["budget"] = 10 * BUDGET

    records += [snapshot(nan_alpha), snapshot(wide), snapshot(over_budget)]
    kh.produce(broker.bootstrap_servers, w0.topic, [value for _, value in records], partition=0,
               keys=[key for key, _ in records])
    before = s1.model.to_checkpoint()
    basis_key = w1.choice.basis.key
    assert w1.fence(1)
    assert w1.choice.epoch == 1 and w1.choice.basis.key == basis_key
    # The snapshot over the budget is not unreadable: its model is never read, its claims are
    # (a worker with other limits did consume what it claims).
    assert w1.choice.invalid == 4 and w1.reader.invalid == 2
    assert set(w1.reader.latest) == {"w0", "w1", "w9"}
    assert "budget=240" in w1.reader.latest["w9"].model_unread
    assert w1.fold(s1) == 0  # nothing fresh: w0 was folded, w9's model is not read
    after = s1.model.to_checkpoint()
    assert after[0] == before[0]
    for name in before[1]:
        np.testing.assert_array_equal(after[1][name], before[1][name])
    text = caplog.text
    assert "not a usable basis" in text and "over --budget" in text
    # The 1st, 2nd and 4th unusable basis said, with the count: not one line a record.
    assert [m for m in re.findall(r"not a usable basis \((\d+) so far\)", text)] == [
        "1", "2", "4"]


def test_serve_workers_learn_their_partitions_and_fold_over_one_basis(broker, tmp_path):
    """Two `advsvm serve --group-model basis` workers on a 2-partition topic: every message is
    counted once, each folds the other over the basis, and the group's model is as accurate
    as one model trained on the whole stream in order (at least its worst last iterate)."""
    from test_kafka_group import (GROUP_MODEL_ARGS, accuracy, assigned_lines, iterate_accuracies,
                                  worker_command)

    total, topic, group = 4_000, "basis-serve", "basis-group"
    sync_topic = f"{topic}-{group}-snapshots"
    clients.create_topics(broker.bootstrap_servers, {topic: 2})
    X, y = kh.stream(total, d=16, seed=31)
    values = kh.messages(X, y, unlabelled_every=10)
    labelled = total - total // 10
    assert GROUP_MODEL_ARGS[-2:] == ["--budget-policy", "compact"]
    logs = {w: tmp_path / f"{w}.log" for w in ("b0", "b1")}
    processes = {w: kh.start_service(worker_command(
        broker, topic, group, tmp_path / w, w, "--budget-policy", "merge", "--group-model",
        "basis", "--sync-every", "400", "--checkpoint-interval", "0.5"), logs[w])
        for w in logs}
    kh.wait_until(lambda: all(assigned_lines(logs[w]) for w in processes), 60,
                  "two workers assigned", processes["b0"], logs["b0"])
    kh.produce(broker.bootstrap_servers, topic, values, partition=[0, 1])
    kh.stop_when_consumed(processes, logs,
                          lambda: group_io.read_group(broker.bootstrap_servers, sync_topic), total)

    snapshots = group_io.read_group(broker.bootstrap_servers, sync_topic)
    summary = group_io.totals(snapshots.values())
    assert summary["consumed"] == summary["claimed_messages"] == total
    assert summary["samples_learned"] == labelled
    assert {w: set(s.folded) for w, s in snapshots.items()} == {"b0": {"b1"}, "b1": {"b0"}}
    # Both hold models over a basis the group chose (no more vectors than the budget), and
    # published them as coefficients over it, which `read_group` read with its vectors.
    for s in snapshots.values():
        assert s.meta["state"]["model"]["store"]["size"] <= 256
        assert s.over_basis is not None and not s.coefficients_only
        assert s.whole()[1]["vectors"].shape[0] == s.arrays["alpha"].shape[0]
    model = group_io.group_model(snapshots.values())
    assert model.n_learned == labelled and 0 < model.n_support_vectors <= 256
    for log in logs.values():
        text = log.read_text(errors="replace")
        assert "not averaging" not in text and "basis 1 of the group" in text, kh.tail(log)
    X_test, y_test = kh.stream(5_000, d=16, seed=32)
    single = iterate_accuracies(values, X_test, y_test, budget_policy="merge")
    print(f"\nbasis group of 2: accuracy {accuracy(model, X_test, y_test):.4f}; one model: "
          f"{min(single):.4f} to {max(single):.4f}")
    assert accuracy(model, X_test, y_test) >= min(single)


def coefficient_record(state, basis, epoch: int) -> tuple[bytes, bytes]:
    """The snapshot record `GroupSync.publish` makes of `state` over `basis` of `epoch`."""
    meta, arrays = coefficient_snapshot(*state.model.to_checkpoint(state.extra()), basis, epoch)
    return state.group["worker"].encode(), checkpoint.dumps(meta, arrays)


def test_a_coefficient_snapshot_folds_as_the_hand_computation(workers, broker, tmp_path):
    """Once w1 holds the group's basis it publishes its model projected onto it, coefficients
    only (its local checkpoint stays whole), those of the average of its iterates with them;
    w0 puts the basis' vectors back and folds it: the sample-weighted mean of the two
    projections, coefficients and bias, of `f` and of the averages."""
    w0, w1 = workers["w0"], workers["w1"]
    s0 = service_state("w0", learned_model(60, seed=1), 60, 60, 0)
    assert w0.fence(1) and w0.publish(s0, 1)
    s1 = service_state("w1", learned_model(90, seed=2), 90, 90, 1)
    assert w1.fence(1) and w1.fold(s1) == 1
    basis = w1.choice.basis
    learn(s1, 10, seed=4)  # off the basis again: the snapshot is its projection
    whole = s1.model.to_checkpoint()
    member1, _ = merge.over_basis(*whole, basis)
    assert w1.publish(s1, 1)

    records = [r for r in kh.read_topic(broker.bootstrap_servers, w0.topic, 1) if r.key == b"w1"]
    meta, arrays = model_checkpoint.loads(records[-1].value)  # (the input names' table read)
    assert set(arrays) == {"alpha", "average_alpha"} and meta["extra"]["group"]["basis"] == {
        "epoch": 1, "key": basis.key}
    for name in arrays:
        np.testing.assert_allclose(arrays[name], member1[name], rtol=1e-12, atol=1e-15)
    kh.assert_same_model(state_io.load(str(tmp_path / "w1")).model, s1.model)  # whole

    learn(s0, 30, seed=3)
    member0, _ = merge.over_basis(*s0.model.to_checkpoint(), basis)
    b0, b1 = s0.model.to_checkpoint()[0]["state"]["bias"], whole[0]["state"]["bias"]
    c0 = s0.model.to_checkpoint()[0]["state"]["model"]["average"]
    c1 = whole[0]["state"]["model"]["average"]
    assert w0.fence(1) and w0.fold(s0) == 1 and w0.choice.epoch == 1
    peer = w0.reader.latest["w1"]
    assert peer.over_basis == (1, basis.key) and not peer.coefficients_only
    meta, arrays = s0.model.to_checkpoint()
    for name, folded in (("alpha", arrays["alpha"]),
                         ("average_alpha", arrays["average_coefficients"])):
        np.testing.assert_allclose(folded, (90 * member0[name] + 100 * member1[name]) / 190,
                                   rtol=1e-6, atol=1e-9)
    assert meta["state"]["bias"] == pytest.approx((90 * b0 + 100 * b1) / 190, rel=1e-12)
    average = meta["state"]["model"]["average"]
    assert average["bias"] == pytest.approx((90 * c0["bias"] + 100 * c1["bias"]) / 190,
                                            rel=1e-12)
    assert average["count"] == pytest.approx((90 * c0["count"] + 100 * c1["count"]) / 190)
    np.testing.assert_array_equal(s0.model.to_checkpoint()[1]["vectors"], basis.vectors)
    assert s0.model.n_learned == 190 and s0.group["folded"] == {"w1": 100}


def test_hostile_or_other_basis_coefficient_snapshots_change_nothing(workers, broker):
    """Coefficient snapshots with NaN, huge, too many or too few coefficients, or metadata no
    model can be made of (three labels), are skipped as unreadable; one over an epoch the
    reader does not hold, or over another basis of its epoch, counts for the claims but is not
    folded: the worker's model stays what it was."""
    w0, w1 = workers["w0"], workers["w1"]
    s0 = service_state("w0", learned_model(60, seed=1), 60, 60, 0)
    assert w0.fence(1) and w0.publish(s0, 1)
    s1 = service_state("w1", learned_model(90, seed=2), 90, 90, 1)
    assert w1.fence(1) and w1.fold(s1) == 1 and w1.publish(s1, 1)
    basis = w1.choice.basis
    other = SharedBasis(basis.kernel, basis.gamma, basis.vectors[1:], basis.names)

    def hostile(worker, change, over=basis, epoch=1):
        s = service_state(worker, learned_model(60, seed=1), 60, 5, 2)
        s.group["seq"] = 1
        key, value = coefficient_record(s, over, epoch)
        meta, arrays = checkpoint.loads(value)
        meta = {k: v for k, v in meta.items() if k not in ("format", "version", "arrays")}
        arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
        change(meta, arrays)
        return key, checkpoint.dumps(meta, arrays)

    def nan(m, a):
        a["alpha"][0] = np.nan

    def short(m, a):
        a["alpha"] = a["alpha"][:-1]

    def over_budget(m, a):
        a["alpha"] = np.zeros(BUDGET + 1)

    def three_labels(m, a):
        m["state"]["labels"] = [0, 1, 2]

    def huge(m, a):  # finite: it overflowed the group's average, and every fold failed
        a["alpha"][:] = 1e300

    def unchanged(m, a):
        pass

    records = [hostile("w4", three_labels), hostile("w5", nan), hostile("w6", short),
               hostile("w7", over_budget), hostile("w3", huge),
               hostile("w8", unchanged, epoch=7), hostile("w9", unchanged, over=other)]
    kh.produce(broker.bootstrap_servers, w0.topic, [value for _, value in records], partition=0,
               keys=[key for key, _ in records])
    before = s1.model.to_checkpoint()
    assert w1.fence(1) and w1.reader.invalid == 5
    assert {w for w, s in w1.reader.latest.items() if s.coefficients_only} == {"w8", "w9"}
    assert w1.claims({})["in"][2] == 5  # their claims count
    assert w1.fold(s1) == 0  # w0 was folded already; w8 and w9 are refused
    after = s1.model.to_checkpoint()
    assert after[0] == before[0] and s1.group["folded"] == {"w0": 60}
    for name in before[1]:
        np.testing.assert_array_equal(after[1][name], before[1][name])


def test_a_union_worker_names_the_group_model_a_basis_worker_uses(workers, broker, tmp_path,
                                                                   caplog):
    """A worker of --group-model union among workers of basis said only that it did not hold
    their basis, which reads as a matter of timing."""
    w0, w1 = workers["w0"], workers["w1"]
    s0 = service_state("w0", learned_model(60, seed=1), 60, 60, 0)
    assert w0.fence(1) and w0.publish(s0, 1)  # (a whole snapshot: no basis yet)
    s1 = service_state("w1", learned_model(90, seed=2), 90, 90, 1)
    assert w1.fence(1) and w1.fold(s1) == 1 and w1.publish(s1, 1)  # (over its basis)
    sink = OutputSink(clients.Clients(broker.bootstrap_servers).producer)
    (tmp_path / "wu").mkdir()
    union = group_io.GroupSync(clients.Clients(broker.bootstrap_servers), w0.topic, "wu",
                               str(tmp_path / "wu"), sink,
                               state_io.Limits.of(AdvKernelSVM(**PARAMS)), "union", 1)
    union.start()
    try:
        su = service_state("wu", learned_model(30, seed=3), 30, 30, 2)
        with caplog.at_level(logging.ERROR, logger="river_advsvm.streams.group"):
            assert union.fence(1) and union.fold(su) == 1  # (w0's whole one; not w1's)
        assert ("it comes from a worker of --group-model basis, this one has --group-model "
                "union, and the group's workers need the same one") in caplog.text
    finally:
        union.close()
        sink.close()


def test_a_restart_resumes_the_whole_local_checkpoint_else_the_coefficient_snapshot(workers,
                                                                                   tmp_path):
    """A worker whose snapshot is coefficients only resumes from its local checkpoint of the
    same seq, whole; without it, from the snapshot: its model projected onto the basis, with
    the snapshot's counters and offsets."""
    w0, w1 = workers["w0"], workers["w1"]
    s0 = service_state("w0", learned_model(60, seed=1), 60, 60, 0)
    assert w0.fence(1) and w0.publish(s0, 1)
    s1 = service_state("w1", learned_model(90, seed=2), 90, 90, 1)
    assert w1.fence(1) and w1.fold(s1) == 1
    learn(s1, 10, seed=4)
    a1, _ = merge.project(*s1.model.to_checkpoint(), w1.choice.basis)
    assert w1.publish(s1, 1) and w1.own().over_basis is not None

    resumed, republish = w1.initial_state(lambda: None)
    kh.assert_same_model(resumed.model, s1.model)
    assert not republish and resumed.group["seq"] == s1.group["seq"]

    os.remove(state_io.checkpoint_path(tmp_path / "w1"))
    resumed, republish = w1.initial_state(lambda: None)
    assert not republish and resumed.counters["learned"] == 100
    assert resumed.offsets == {"in": {1: 90}} and resumed.model.n_learned == 160
    meta, arrays = resumed.model.to_checkpoint()
    np.testing.assert_array_equal(arrays["vectors"], w1.choice.basis.vectors)
    np.testing.assert_allclose(arrays["alpha"], a1, rtol=1e-12, atol=1e-15)


def test_a_worker_deletes_its_bases_older_than_any_reader_keeps(workers):
    """w0 proposes a basis at every fold; each proposal deletes w0's own records of the epochs
    no reader keeps any more (a record without a value under the same key, which compaction
    turns into a deletion): the topic holds at most KEPT_EPOCHS + 1 of its bases, and a reader
    reading the deletions back folds as before."""
    w0, w1 = workers["w0"], workers["w1"]
    s0 = service_state("w0", learned_model(60, seed=1), 60, 60, 0)
    s1 = service_state("w1", learned_model(90, seed=2), 90, 90, 1)
    assert w1.fence(1)
    rounds = KEPT_EPOCHS + 3
    for k in range(rounds):
        learn(s1, 5, seed=10 + k)
        assert w1.publish(s1, 1)
        learn(s0, 5, seed=30 + k)
        assert w0.fence(1) and w0.fold(s0) == 1 and w0.publish(s0, 1)  # (a fence reads up)
    assert w0.choice.epoch == rounds
    assert w1.fence(1) and w1.choice.epoch == rounds  # read to the end, deletions included
    kept = {key for key in w1.choice.records if key.endswith(b"/w0")}
    assert kept == {f"basis/{e}/w0".encode() for e in range(rounds - KEPT_EPOCHS, rounds + 1)}
    assert w1.choice.invalid == 0 and w1.reader.invalid == 0
    assert w1.choice.stale_keys("w0") == []


def test_inspect_shows_the_group_when_its_snapshots_do_not_average(workers, broker, capsys,
                                                                  monkeypatch):
    """A group whose snapshots would not average (one with finite coefficients too large for
    the sum, say) made `advsvm inspect --sync-topic` stop with a traceback, showing nothing."""
    import json

    from river_advsvm.streams import cli as streams_cli

    w0 = workers["w0"]
    assert w0.fence(1) and w0.publish(service_state("w0", learned_model(60, seed=1), 60, 60, 0),
                                       1)

    def fails(snapshots):
        raise ValueError("saved support vector field 'squared_norm' must be a finite number")

    monkeypatch.setattr(group_io, "group_model", fails)
    status = streams_cli.inspect_main(["--bootstrap-servers", broker.bootstrap_servers,
                                       "--sync-topic", w0.topic])
    summary = json.loads(capsys.readouterr().out)
    assert status == 0 and list(summary["per_worker"]) == ["w0"]
    assert summary["merged_model"] is None and summary["merged_model_error"] == (
        "the snapshots do not average: saved support vector field 'squared_norm' must be a "
        "finite number")
