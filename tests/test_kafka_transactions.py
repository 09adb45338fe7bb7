"""What the bundled broker (tansu) does with Kafka transactions, through kafka-python's API.

Exactly-once on Kafka's own machinery needs four things from the broker: a transactional
producer (`init_transactions`, `begin_transaction`, `send`, `commit_transaction`,
`abort_transaction`), the consumed offsets committed inside the transaction
(`send_offsets_to_transaction`), zombies fenced (a producer of the same `transactional_id`, and
a consumer group generation that moved on: KIP-447), and `read_committed` readers that never see
an aborted record. These tests assert what the bundled broker does for each, so that the
service's choice (its own protocol, `river_advsvm.streams.group`) is revisited when a new broker
changes the answer: a test here that fails means the broker changed.

On tansu 0.6.0 the producer side works and producers are fenced, but an aborted transaction's
records reach `read_committed` readers (its fetch responses list no aborted transactions, which
is what the client filters on), and an offset commit from a stale generation is accepted.
"""

from __future__ import annotations

import time
import uuid

import pytest

pytest.importorskip("kafka")

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.errors import KafkaError, ProducerFencedError  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

from river_advsvm.streams import clients  # noqa: E402

pytestmark = pytest.mark.kafka


def _names(prefix: str) -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"{prefix}-in-{tag}", f"{prefix}-out-{tag}", f"{prefix}-group-{tag}"


def _producer(bootstrap: str, transactional_id: str) -> KafkaProducer:
    """A transactional producer, initialised (an older one with the same id is fenced)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                             max_block_ms=15000)
    producer.init_transactions()
    return producer


def _read(bootstrap: str, topic: str, isolation_level: str, expected: int) -> list[bytes]:
    """The values of `topic` (one partition) from its beginning, for a reader of this
    isolation level; reads until `expected` values or the end of what it can see."""
    reader = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation_level,
                           auto_offset_reset="earliest", enable_auto_commit=False,
                           consumer_timeout_ms=3000)
    try:
        reader.assign([TopicPartition(topic, 0)])
        reader.seek_to_beginning()
        values = []
        for record in reader:
            values.append(record.value)
            if len(values) >= expected:
                break
        return values
    finally:
        reader.close()


def _assigned_consumer(bootstrap: str, topic: str, group: str) -> KafkaConsumer:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False, session_timeout_ms=1500,
                             heartbeat_interval_ms=300)
    consumer.subscribe([topic])
    return consumer


def _poll_until(consumers, condition, timeout: float = 90.0) -> None:
    """Poll every consumer (which drives the group's joins) until `condition()` holds; a
    deadline, not a count of polls: on a loaded machine a rebalance takes longer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for consumer in consumers:
            consumer.poll(timeout_ms=100)
        if condition():
            return
    raise AssertionError(f"the consumer group did not get there within {timeout:g}s")


def test_transactional_producer_commits_aborts_and_fences_its_predecessor(broker):
    bootstrap = broker.bootstrap_servers
    _, out, _ = _names("tx-producer")
    clients.create_topics(bootstrap, {out: 1})
    producer = _producer(bootstrap, f"{out}-tx")
    producer.begin_transaction()
    producer.send(out, b"first", partition=0).get(10)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(out, b"aborted", partition=0).get(10)
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send(out, b"second", partition=0).get(10)
    producer.commit_transaction()

    # A new instance of the same transactional id bumps the epoch: the old one is fenced.
    successor = _producer(bootstrap, f"{out}-tx")
    producer.begin_transaction()
    with pytest.raises(ProducerFencedError):
        producer.send(out, b"zombie", partition=0).get(10)
    with pytest.raises(KafkaError):
        producer.commit_transaction()
    producer.close(timeout=1)
    successor.close()

    committed = _read(bootstrap, out, "read_committed", expected=3)
    uncommitted = _read(bootstrap, out, "read_uncommitted", expected=3)
    assert b"zombie" not in committed + uncommitted
    # What tansu 0.6.0 does: the aborted record is delivered to read_committed readers too.
    assert committed == uncommitted == [b"first", b"aborted", b"second"]


def test_read_committed_waits_for_an_open_transaction(broker):
    bootstrap = broker.bootstrap_servers
    _, out, _ = _names("tx-open")
    clients.create_topics(bootstrap, {out: 1})
    producer = _producer(bootstrap, f"{out}-tx")
    producer.begin_transaction()
    producer.send(out, b"open", partition=0).get(10)
    assert _read(bootstrap, out, "read_committed", expected=1) == []  # bounded by the LSO
    assert _read(bootstrap, out, "read_uncommitted", expected=1) == [b"open"]
    producer.commit_transaction()
    producer.close()
    assert _read(bootstrap, out, "read_committed", expected=1) == [b"open"]


def test_offsets_commit_in_a_transaction_but_a_stale_generation_is_not_fenced(broker):
    bootstrap = broker.bootstrap_servers
    topic, out, group = _names("tx-offsets")
    clients.create_topics(bootstrap, {topic: 2, out: 1})
    first = _assigned_consumer(bootstrap, topic, group)
    _poll_until([first], lambda: len(first.assignment()) == 2)
    old = first.group_metadata()

    producer = _producer(bootstrap, f"{out}-tx")
    producer.begin_transaction()
    producer.send(out, b"a", partition=0).get(10)
    producer.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1)},
                                         old)
    producer.commit_transaction()
    assert first.committed(TopicPartition(topic, 0)) == 3

    # A second member joins: the group moves to a new generation.
    second = _assigned_consumer(bootstrap, topic, group)
    _poll_until([first, second], lambda: second.assignment()
                and second.group_metadata().generation_id > old.generation_id)
    producer.begin_transaction()
    producer.send(out, b"b", partition=0).get(10)
    # Apache Kafka 2.5+ refuses this commit (KIP-447: the member's generation is stale);
    # tansu 0.6.0 accepts it, so the group generation fences no zombie here.
    producer.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(7, "", -1)},
                                         old)
    producer.commit_transaction()
    assert second.committed(TopicPartition(topic, 0)) == 7
    for client in (producer, first, second):
        client.close()
