"""What a crashed run published, read back so that none of it is sent twice (no Kafka here: the
Kafka tests kill the service and count its outputs)."""

from __future__ import annotations

import collections
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_advsvm import AdvLinearSVM, checkpoint
from river_advsvm.streams import state
from river_advsvm.streams.output_log import Published

Record = collections.namedtuple("Record", "topic partition offset")
TopicPartition = collections.namedtuple("TopicPartition", "topic partition")


def output(topic="in", partition=0, offset=0, **extra) -> bytes:
    return json.dumps({"topic": topic, "partition": partition, "offset": offset,
                       **extra}).encode()


def test_each_output_read_back_is_taken_once_per_kind_and_count():
    published = Published()
    inputs = {("in", 0): 0, ("in", 1): 0}
    for value in (output(offset=3), output(offset=3), output(offset=5), output("in", 1, 4)):
        published.add("alerts", value, inputs)
    published.add("preds", output(offset=3), inputs)
    # Two alerts and one prediction of message 3 are out; a third alert is not.
    assert [published.take("alerts", Record("in", 0, 3)) for _ in range(3)] == [True, True,
                                                                                 False]
    assert published.take("preds", Record("in", 0, 3))
    assert not published.take("preds", Record("in", 0, 4))  # no output of 4 was read
    assert published.take("alerts", Record("in", 0, 5))
    assert published  # partition 1 still has one ahead
    assert not published.take("alerts", Record("in", 1, 5))  # past the last: forgotten
    assert not published.take("alerts", Record("in", 1, 4))
    assert not published.take("alerts", Record("in", 0, 6))
    assert not published


def test_outputs_of_other_inputs_and_records_that_are_no_outputs_are_ignored():
    published = Published()
    for value in (output("other", 0, 1), output("in", 7, 1), b"not json", None, b"[1, 2]",
                  b'"text"', output(partition="0"), output(offset=1.0), output(offset=True),
                  output(topic=["in"]), json.dumps({"topic": "in"}).encode(),
                  "é".encode("latin-1")):
        published.add("preds", value, {("in", 0): 0})
    assert not published


def test_outputs_of_messages_before_the_resume_point_are_ignored_and_a_partition_done_is_dropped():
    """Outputs of messages the run will not learn again (before the checkpoint's offset) can
    never be taken: they are not kept. Once every output read back is taken, the partition is
    done (a checkpoint may then note newer ends)."""
    published = Published()
    for offset in (3, 4, 5):
        published.add("preds", output(offset=offset), {("in", 0): 4})
    assert not published.take("preds", Record("in", 0, 3))
    assert published.take("preds", Record("in", 0, 4))
    assert published
    assert published.take("preds", Record("in", 0, 5))
    assert not published


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.binary(max_size=40),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                 lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(st.sampled_from(["topic", "partition", "offset", "x"]),
                                   inner, max_size=4)).map(lambda v: json.dumps(v).encode())),
    max_size=20), st.integers(0, 5))
def test_any_record_read_back_is_counted_only_as_the_output_it_names(values, offset):
    """Whatever the output topics hold (other writers, garbage), `add` never raises, and an
    output is taken only if a record named its input message, as often as records did."""
    published = Published()
    named = 0
    for value in values:
        published.add("preds", value, {("in", 0): 0})
        try:
            body = json.loads(value)
        except ValueError:
            continue
        named += (isinstance(body, dict) and body.get("topic") == "in"
                  and type(body.get("partition")) is int and body["partition"] == 0
                  and type(body.get("offset")) is int and body["offset"] == offset)
    taken = 0
    while published.take("preds", Record("in", 0, offset)):
        taken += 1
    assert taken == named


def test_a_checkpoint_keeps_where_the_output_topics_ended_and_refuses_bad_ends(tmp_path):
    model = AdvLinearSVM()
    model.learn_one({"a": 1.0}, True)
    saved = state.ServiceState(model=model, offsets={"in": {0: 1}},
                               output_ends={"preds": {0: 10, 1: 4}})
    state.save(tmp_path, saved)
    assert state.load(tmp_path).output_ends == {"preds": {0: 10, 1: 4}}
    meta, arrays = checkpoint.read(state.checkpoint_path(tmp_path))
    del meta["extra"]["output_ends"]  # a checkpoint of an older version: nothing noted
    assert state.from_checkpoint(meta, arrays, "old").output_ends == {}
    for bad in ({"preds": {"0": -1}}, {"preds": {"x": 1}}, {"": {"0": 1}}, {"preds": [1]},
                {"preds": {"0": 1.5}}, {"preds": {str(p): 1 for p in range(100_001)}}):
        meta["extra"]["output_ends"] = bad
        with pytest.raises(checkpoint.CheckpointError, match="invalid service metadata"):
            state.from_checkpoint(meta, arrays, "bad")


def test_partitions_that_moved_on_are_forgotten():
    published = Published()
    for partition in (0, 1):
        published.add("preds", output(partition=partition, offset=2),
                      {("in", 0): 0, ("in", 1): 0})
    published.forget([TopicPartition("in", 0)])
    assert not published.take("preds", Record("in", 0, 2))
    assert published.take("preds", Record("in", 1, 2))


def _session():
    from river_advsvm.streams.config import ServiceConfig
    from river_advsvm.streams.learner import Learner
    from river_advsvm.streams.session import Session

    config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="in", group="g",
                           checkpoint_dir="d", predictions_topic="preds")
    return Session(config, Learner(state.ServiceState(model=AdvLinearSVM()), 1000),
                   lambda: None)


class Refusing:
    """Clients whose reader the broker refuses (an ACL that lets the service write only)."""

    def __init__(self):
        self.asked = 0

    def reader(self, **options):
        from kafka.errors import TopicAuthorizationFailedError

        self.asked += 1
        raise TopicAuthorizationFailedError("not allowed")


def test_output_topics_the_service_may_not_read_are_not_waited_for(caplog):
    """Reading the outputs back is refused: not an outage to wait out; the service goes on,
    and says outputs may come twice."""
    session = _session()
    session.clients = Refusing()
    session.read_published({"preds": {0: 5}}, [TopicPartition("in", 0)], {"in": {0: 9}})
    assert not session.published and session.clients.asked == 1
    assert "may be published twice" in caplog.text


def test_partitions_without_a_resume_offset_are_not_read_back():
    """A partition whose resume point is not known (none saved, or its topic recreated: an
    earlier incarnation's outputs name the offsets of the new messages) is not read back."""
    session = _session()
    session.clients = Refusing()
    session.read_published({"preds": {0: 5}}, [TopicPartition("in", 0)], {"other": {0: 9}})
    assert session.clients.asked == 0 and not session.published


def test_a_partition_no_snapshot_claims_is_read_back_from_0_after_the_latest_snapshots():
    """A worker killed before any of its snapshots claimed a partition had published the
    outputs of what it learned there: its new owner learns the partition from its beginning
    and sent them again (250 predictions twice in the group test). A partition no snapshot
    claims is read back from offset 0, from the least end the group's latest snapshots noted
    (whoever learned some of it did so after its latest snapshot), unless the topic is of
    another incarnation than the snapshots read."""
    from types import SimpleNamespace

    from kafka import TopicPartition

    from river_advsvm.streams.group_state import claimed_output_ends

    def snapshot(offsets, ends, topic_id="id-1"):
        return SimpleNamespace(offsets=offsets, fields={
            "output_ends": {"pred": {0: ends}}, "topic_ids": {"in": topic_id}})

    snapshots = [snapshot({"in": {1: 1500}}, 900), snapshot({"in": {2: 1750}}, 700)]
    claims = {"in": {1: 1500, 2: 1750}}
    claimed_only = [TopicPartition("in", 1)]
    assert claimed_output_ends(snapshots, claims, claimed_only, {"in": "id-1"}) == (
        {"pred": {0: 900}}, claims)
    taken_over = [TopicPartition("in", 0), TopicPartition("in", 1)]
    ends, resume = claimed_output_ends(snapshots, claims, taken_over, {"in": "id-1"})
    assert ends == {"pred": {0: 700}} and resume == {"in": {0: 0, 1: 1500, 2: 1750}}
    # The topic was recreated since (another id): its unclaimed partitions are not read back.
    ends, resume = claimed_output_ends(snapshots, {}, taken_over, {"in": "id-2"})
    assert ends == {} and resume == {}


class LowEnds:
    """Clients whose reader says each output partition ends at `end` (the bundled broker's
    ListOffsets may answer the start of its last batch)."""

    def __init__(self, end: int):
        self.end = end

    def reader(self, **options):
        end = self.end

        class Reader:
            def partitions_for_topic(self, topic):
                return {0}

            def end_offsets(self, partitions, timeout_ms=None):
                return {tp: end for tp in partitions}

        return Reader()


@pytest.mark.parametrize("broker_end, expected", [(3, 18), (25, 25)])
def test_noted_output_ends_are_at_least_where_the_acknowledged_outputs_end(broker_end,
                                                                          expected):
    """A checkpoint noted where the broker said an output topic ends; the bundled broker can
    say less. After the input topic came back as a new log, reading back from there took the
    old log's dead letters, which name the offsets of the new messages, for theirs: 9 new dead
    letters were not sent. The end noted is at least one past the last output acknowledged."""
    import types

    session = _session()
    session.clients = LowEnds(broker_end)
    session.sink = types.SimpleNamespace(pending=0, acknowledged_ends={("preds", 0): 18,
                                                                       ("elsewhere", 0): 40})
    session.note_output_ends()
    assert session.state.output_ends == {"preds": {0: expected}}
