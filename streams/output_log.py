"""The outputs already published: read back when the service resumes, so that none goes twice.

At every checkpoint, once its outputs are delivered, the service notes where each output topic
ends (`end_offsets`, saved in the checkpoint as `output_ends`). After a crash it learns again
what came after that checkpoint, and would publish those messages' outputs a second time. So
when it resumes, it reads its output topics from the noted ends to their current ends (`read`)
and counts, for each input message, the outputs of each kind already there (`Published`); an
output about to be sent again is sent only if it is not among them (`Published.take`). Every
output names its input message (`topic`, `partition`, `offset`: predictions, alerts and dead
letters alike), so records of other writers to the same topics are told apart.

Learning is deterministic, so a message learned again has the same outputs in the same order:
counting them decides which of several alerts of one message are out. While outputs of the
earlier run are still ahead, a checkpoint keeps the ends it resumed from, so that a second
crash reads them again.

Examples
--------

>>> import collections, json
>>> from river_advsvm.streams.output_log import Published
>>> Record = collections.namedtuple("Record", "topic partition offset")
>>> published = Published()
>>> for offset in (6, 7, 8):
...     value = json.dumps({"topic": "in", "partition": 0, "offset": offset}).encode()
...     published.add("preds", value, {("in", 0): 7})  # learned again from offset 7
>>> published.take("preds", Record("in", 0, 7)), published.take("preds", Record("in", 0, 7))
(True, False)
>>> published.take("preds", Record("in", 0, 8)), bool(published)
(True, False)

"""

from __future__ import annotations

import collections
import json
import logging
import time

from river_advsvm.streams import clients as clients_io

__all__ = ["Published", "end_offsets", "partitions_of", "read", "read_as_now", "resume_offsets"]

log = logging.getLogger(__name__)

#: The most bytes one fetch of an output topic returns (a dead letter is at most about 1 MB).
FETCH_BYTES = 8 * 2**20


class Published:
    """Outputs already in the output topics, by input message: `(input topic, partition)` ->
    input offset -> output topic -> how many. A partition is forgotten once each of its
    outputs was taken, or once a message past them all is sent."""

    def __init__(self):
        self._by_input: dict[tuple, dict[int, collections.Counter]] = {}
        self._last: dict[tuple, int] = {}  # the highest input offset with an output there
        self._left: collections.Counter = collections.Counter()  # outputs not taken yet

    def __bool__(self) -> bool:
        """True while outputs of an earlier run may still be ahead."""
        return bool(self._by_input)

    def __len__(self) -> int:
        """Outputs read back and not taken yet."""
        return sum(self._left.values())

    def add(self, output_topic: str, value: bytes | None, inputs: dict) -> None:
        """Count the output `value` read from `output_topic`, if it names a message that will
        be learned again: `inputs` maps `(topic, partition)` to the first offset learned
        again. Anything else is ignored (outputs of earlier messages, of other partitions, and
        records that are no output)."""
        try:
            body = json.loads(value)
            key, offset = (body["topic"], body["partition"]), body["offset"]
        except (TypeError, ValueError, KeyError):  # (UnicodeDecodeError is a ValueError)
            return
        if type(key[0]) is not str or type(key[1]) is not int or type(offset) is not int \
                or key not in inputs or offset < inputs[key]:
            return
        outputs = self._by_input.setdefault(key, {}).setdefault(offset, collections.Counter())
        outputs[output_topic] += 1
        self._last[key] = max(self._last.get(key, offset), offset)
        self._left[key] += 1

    def forget(self, partitions) -> None:
        """Drop what was read for these input partitions (`TopicPartition`s): they moved on."""
        for tp in partitions:
            self._drop((tp.topic, tp.partition))

    def _drop(self, key: tuple) -> None:
        self._by_input.pop(key, None)
        self._last.pop(key, None)
        self._left.pop(key, None)

    def take(self, output_topic: str, record) -> bool:
        """True if an output to `output_topic` of the input `record` is already out (it then
        counts as sent again); False if it must be sent."""
        key = (record.topic, record.partition)
        seen = self._by_input.get(key)
        if seen is None:
            return False
        if record.offset > self._last[key]:  # past every output of the earlier run
            self._drop(key)
            return False
        outputs = seen.get(record.offset)
        if not outputs or outputs[output_topic] <= 0:
            return False
        outputs[output_topic] -= 1
        self._left[key] -= 1
        if not self._left[key]:
            self._drop(key)
        return True


def resume_offsets(offsets: dict, partitions, known_topics) -> dict:
    """The offsets to read outputs back from, `{topic: {partition: offset}}`: `offsets` (where
    the partitions are learned again from), and 0 for each of `partitions` they lack whose
    topic is in `known_topics` (learned from its beginning). A topic not known as it is now
    is left out: an earlier incarnation's outputs name the offsets of its new messages."""
    resume = {topic: dict(parts) for topic, parts in offsets.items()}
    for tp in partitions:
        if tp.topic in known_topics:
            resume.setdefault(tp.topic, {}).setdefault(tp.partition, 0)
    return resume


def read_as_now(topic_ids: dict, offsets: dict, topic: str, current) -> bool:
    """Whether a state (a checkpoint, a snapshot) with these topic ids and offsets read `topic`
    as it is now: under its `current` id, or (a broker without topic ids) at any offset."""
    if current is None:
        return topic in offsets
    return topic_ids.get(topic) == current


def lowest_ends(*noted: dict) -> dict:
    """Ends to read back from that cover every one of `noted` (`{topic: {partition: end}}`):
    the lowest of each partition (reading from lower ends reads more, never less); a partition
    that one of them lacks for its topic (read whole) is left out, and a topic none of them
    has is not read."""
    lowest: dict = {}
    for ends in noted:
        for topic, parts in ends.items():
            if topic not in lowest:
                lowest[topic] = dict(parts)
                continue
            mine = lowest[topic]
            for p in list(mine):
                if p in parts:
                    mine[p] = min(mine[p], parts[p])
                else:
                    del mine[p]
    return lowest


def partitions_of(consumer, topics: list[str]) -> list:
    """The `TopicPartition`s of the `topics` that exist (a metadata request, unless the
    consumer has them already)."""
    from kafka import TopicPartition

    return [TopicPartition(topic, p) for topic in topics
            for p in sorted(consumer.partitions_for_topic(topic) or ())]


def end_offsets(consumer, partitions: list, timeout: float) -> dict:
    """`{topic: {partition: end offset}}` of `partitions` (`KafkaError` if the broker does not
    say within `timeout` seconds). The bundled broker's ListOffsets can answer less than the
    true end (the start of its last batch): `read` then reads more, which is harmless within
    one log of an input topic but not across two (an input topic that came back as a new log:
    the old log's outputs name the offsets of the new messages), so the service raises each
    end to where its own acknowledged outputs end (`Session.note_output_ends`)."""
    ends: dict = {}
    if partitions:
        for tp, end in consumer.end_offsets(partitions, timeout_ms=int(1000 * timeout)).items():
            ends.setdefault(tp.topic, {})[tp.partition] = int(end)
    return ends


def read(clients, ends: dict, topics: list[str], inputs: dict, timeout: float,
         ids: dict | None = None) -> Published:
    """The outputs in `topics` from the offsets `ends` (`end_offsets` at a checkpoint) to the
    topics' current ends that name a message to be learned again (`inputs`: see
    `Published.add`). A topic without noted
    ends is not read (its outputs may come twice); a partition added since is read whole, and
    so is a topic whose id is not the one noted with the ends (`ids`: deleted and made again
    since, every output in it came after them). After `timeout` seconds, what was read so far
    (with a warning); `KafkaError` if the broker cannot be read."""
    published = Published()
    topics = [topic for topic in topics if topic in ends]
    if not topics or not inputs:
        return published
    reader = clients.reader(client_id="advsvm-outputs", max_fetch_bytes=FETCH_BYTES)
    try:
        partitions = partitions_of(reader, topics)
        if not partitions:
            return published
        first = reader.beginning_offsets(partitions)
        renewed = set()
        for topic in topics:
            noted, now = (ids or {}).get(topic), clients_io.topic_id(reader, topic)
            if noted is not None and now is not None and noted != now:
                log.warning("output topic %r was deleted and made again since the checkpoint "
                            "(id %s now, %s then): read back from its beginning", topic, now,
                            noted)
                renewed.add(topic)
        reader.assign(partitions)
        for tp in partitions:
            start = ends[tp.topic].get(tp.partition, first[tp])
            reader.seek(tp, first[tp] if tp.topic in renewed else max(start, first[tp]))
        # Up to the high watermark each fetch reports: `end_offsets` may answer less (the
        # bundled broker's ListOffsets), which would leave outputs unread.
        todo, deadline = set(partitions), time.monotonic() + timeout
        while todo:
            for tp, records in reader.poll(timeout_ms=200).items():
                for record in records:
                    published.add(tp.topic, record.value, inputs)
            todo = {tp for tp in todo if reader.highwater(tp) is None
                    or reader.position(tp) < reader.highwater(tp)}
            if todo and time.monotonic() > deadline:
                # What was read still holds: the rest of the outputs may come twice.
                log.warning("stopped reading back the outputs published since the checkpoint "
                            "after %.0fs: those not read yet may be published twice", timeout)
                break
    finally:
        reader.close(autocommit=False)
    return published
