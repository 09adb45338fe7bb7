"""Reading a group's snapshot topic: `SnapshotReader` follows it, `read_group` reads it once.

Both keep the latest snapshot of every worker (`river_advsvm.streams.snapshot`); their Kafka clients
come from `river_advsvm.streams.clients.Clients`, like every client of the service. Basis records
(`river_advsvm.streams.group_basis`) go to the reader's `BasisChoice`, if it has one; a snapshot of
coefficients over a basis it holds is read with that basis' vectors.

Zombie snapshots are ignored. A worker writes a fence naming its consumer group generation each
time it is assigned partitions, and publishes its snapshots with the generation it holds them
in. A snapshot is *stale* if its generation is lower than that of its worker's latest fence
(a snapshot resent late, after its worker was assigned anew), or than that of a fence another
worker wrote after it: the group had moved the partitions on (that worker read the topic up to
its fence and resumed from what it found) while this one, frozen or cut off, still published.
A worker that is still a member publishes before the next generation exists (the coordinator
waits for it to rejoin), so only a zombie's snapshot can be stale. Fences written before a
worker's own do not count against it: a group whose generations start over (a new coordinator)
is not taken for zombies. The rule depends on the log alone, so every reader decides alike; a
compacted log only drops records, which can make a stale snapshot look valid again (see
`river_advsvm.streams.group`), never the reverse.

"""

from __future__ import annotations

import logging
import time
import uuid

from river_advsvm.streams.group_basis import BASIS_PREFIX, BasisChoice
from river_advsvm.streams.snapshot import (FENCE_PREFIX, Snapshot, fence_key, fence_value, newer,
                              parse_fence, parse_snapshot)

__all__ = ["FETCH_BYTES", "SnapshotReader", "read_group"]

log = logging.getLogger(__name__)

#: Snapshots can be large (B coefficients or support vectors, and the input names): fetch them
#: whole.
FETCH_BYTES = 64 * 2**20


class SnapshotReader:
    """Follows the snapshot topic and keeps the latest snapshot of every worker.

    Reads the whole log (a broker that does not compact, like the bundled one, keeps every
    snapshot; the latest of each worker wins either way).
    """

    def __init__(self, clients, topic: str, client_id: str = "advsvm-group", limits=None,
                 basis=None, own: tuple[str, str] | None = None):
        from kafka import TopicPartition

        self.topic = topic
        self.limits = limits  # the reader's `state.Limits`: a peer's snapshot cannot lift them
        # A `river_advsvm.streams.group_basis.BasisChoice` that reads the basis records; None:
        # they are skipped (a group that folds by the union, `advsvm inspect`).
        self.basis = basis
        self.latest: dict[str, Snapshot] = {}
        # `(worker id, instance)` of the process reading, if a worker: a snapshot of its id
        # from another instance that counts, after one of its own, is a live twin's (`twin`).
        self.own = own
        self.twin: Snapshot | None = None
        self._own_seen = False
        self.invalid = 0
        self.stale = 0  # zombie snapshots ignored
        # For each worker whose fence was read: the highest generation fenced since (and by)
        # its latest fence: its snapshots of a lower generation are stale.
        self._fenced_since: dict[str, int] = {}
        self._tp = TopicPartition(topic, 0)
        self._consumer = clients.reader(client_id=client_id, max_fetch_bytes=FETCH_BYTES)
        self._consumer.assign([self._tp])
        self._consumer.seek_to_beginning(self._tp)

    def poll(self, timeout_ms: int = 0) -> int:
        """Read what is available (waiting at most `timeout_ms`); returns records read."""
        count = 0
        for records in self._consumer.poll(timeout_ms=timeout_ms).values():
            for record in records:
                count += 1
                self._take(record)
        return count

    def _take(self, record) -> None:
        if record.key is not None and record.key.startswith(BASIS_PREFIX):
            if self.basis is not None:
                self.basis.take(record.key, record.value, record.offset)
            return
        fence = parse_fence(record.key, record.value)
        if fence is not None:
            writer, generation = fence
            if generation is not None:  # a worker's (a reader's fence names none)
                for worker, since in self._fenced_since.items():
                    if worker != writer:
                        self._fenced_since[worker] = max(since, generation)
                self._fenced_since[writer] = generation
            return
        try:
            snapshot = parse_snapshot(record.key, record.value, record.offset, self.limits,
                                      None if self.basis is None else self.basis.held)
        except MemoryError:  # the machine's fault, not the record's: exit 5, restarted
            raise
        except Exception as error:  # noqa: BLE001 - whatever a record holds, the group goes on
            self.invalid += 1
            # At the 1st, 2nd, 4th, 8th... such record: a flood written to the topic is not
            # one log line per record.
            if self.invalid & (self.invalid - 1) == 0:
                log.error("ignoring record %d of %s, not a readable snapshot (%d so far): %s",
                          record.offset, self.topic, self.invalid,
                          " ".join(str(error).split())[:300] or type(error).__name__)
            return
        if snapshot is None:
            return
        fenced = self._fenced_since.get(snapshot.worker, -1)
        if snapshot.generation is not None and fenced > snapshot.generation:
            self.stale += 1
            log.warning("ignoring snapshot %d of %s (record %d): published in generation %d, "
                        "after an assignment in generation %d (a zombie's)",
                        snapshot.seq, snapshot.worker, record.offset, snapshot.generation,
                        fenced)
            return
        if self.own is not None and snapshot.worker == self.own[0]:
            instance = snapshot.meta["extra"]["group"].get("instance")
            if instance == self.own[1]:
                self._own_seen = True
            elif self._own_seen and instance is not None:
                self.twin = snapshot
        if newer(self.latest.get(snapshot.worker), snapshot):
            self.latest[snapshot.worker] = snapshot

    def position(self) -> int:
        return self._consumer.position(self._tp)

    def read_past(self, offset: int, timeout: float) -> bool:
        """Read until every record up to `offset` is read; False after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self.position() <= offset:
            if time.monotonic() > deadline:
                return False
            self.poll(timeout_ms=100)
        return True

    def close(self) -> None:
        self._consumer.close(autocommit=False)


def read_group(bootstrap_servers: str, topic: str, timeout: float = 30.0,
               settings: dict | None = None, security=None, must_exist: bool = False
               ) -> dict[str, Snapshot]:
    """The latest snapshot of every worker of a group, read to the end of its snapshot topic.

    Writes one fence record (ignored by workers) to know where the end is. `security` (a
    `river_advsvm.streams.security.SecuritySettings`) and `settings` (other Kafka client settings)
    reach both clients, as in `river_advsvm.streams.clients.Clients`. With `must_exist`, a topic
    that does not exist or has more than one partition (no group's snapshot topic: an input topic
    named by mistake, say) is a `ValueError` before anything is written to it, and an empty topic
    holds no group: nothing is written to it either.
    """
    from river_advsvm.streams.clients import Clients
    from river_advsvm.streams.security import SecuritySettings

    clients = Clients(bootstrap_servers, settings or {}, security=security or SecuritySettings())
    if must_exist:
        _check_snapshot_topic(clients, topic)
        if not _check_first_record(clients, topic, timeout):
            return {}
    producer = clients.producer(client_id="advsvm-inspect")
    try:
        metadata = producer.send(topic, value=fence_value(None),
                                 key=fence_key(f"read-{uuid.uuid4().hex}"), partition=0
                                 ).get(timeout)
    finally:
        producer.close()
    # With the group's bases: a snapshot over one gets its vectors back.
    reader = SnapshotReader(clients, topic, client_id="advsvm-inspect", basis=BasisChoice())
    try:
        if not reader.read_past(metadata.offset, timeout):
            raise TimeoutError(f"could not read {topic} to its end within {timeout}s")
        return dict(reader.latest)
    finally:
        reader.close()


def _check_first_record(clients, topic: str, timeout: float) -> bool:
    """`ValueError` if the first record of `topic` is not one a group writes (a fence, a basis
    or a snapshot): it is another topic of one partition (predictions, dead letters, an input
    topic), which must not get the fence `read_group` writes. False if it has no record."""
    from kafka import TopicPartition

    reader = clients.reader(client_id="advsvm-inspect", max_fetch_bytes=FETCH_BYTES)
    try:
        tp = TopicPartition(topic, 0)
        reader.assign([tp])
        if reader.end_offsets([tp])[tp] <= reader.beginning_offsets([tp])[tp]:
            return False  # empty: no group, and nothing to tell the topic by
        reader.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for records in reader.poll(timeout_ms=200, max_records=1).values():
                if records and not _group_record(records[0]):
                    raise ValueError(f"{topic!r} is not a group's snapshot topic: its record "
                                     f"{records[0].offset} is no snapshot, fence or basis; "
                                     "nothing was written to it")
                return True
        raise TimeoutError(f"could not read the first record of {topic} within {timeout}s")
    finally:
        reader.close()


def _group_record(record) -> bool:
    """Whether a record is one a group writes: a fence, a basis or a snapshot (a checkpoint,
    which is a zip archive)."""
    key, value = record.key, record.value or b""
    if key is None:
        return False
    return key.startswith((FENCE_PREFIX, BASIS_PREFIX)) or value.startswith(b"PK\x03\x04")


def _check_snapshot_topic(clients, topic: str) -> None:
    """`ValueError` unless `topic` exists with one partition, as a group's snapshot topic does
    (the admin client's metadata request does not create a topic)."""
    admin = clients.admin()
    try:
        described = admin.describe_topics([topic])
    finally:
        admin.close()
    partitions = described[0].get("partitions") or [] if described else []
    if not partitions:
        raise ValueError(f"there is no topic {topic!r} at {clients.bootstrap_servers}")
    if len(partitions) != 1:
        raise ValueError(f"{topic!r} has {len(partitions)} partitions: it is not a group's "
                         "snapshot topic (that has one), and nothing was written to it")
