"""Scale-out: the workers of one consumer group learn one model together.

`advsvm serve --sync-every N` makes the service one *worker* of its consumer group. Kafka
spreads the input topic's partitions over the workers; every worker has the same random-feature
pool (same seed, numeric gamma, budget, kernel, the 'compact' policy), so their models live in
the same coordinates and can be averaged (`streams.merge`).

The group's state is a *snapshot topic* (one partition, `cleanup.policy=compact`, keyed by
worker id). A snapshot is a worker's service checkpoint (`streams.state`, the package's safe
format, as bytes): model, counters, `offsets` and the `group` bookkeeping. The protocol:

- **Sync** (every N messages, or `checkpoint_interval` seconds with progress): fold the fresh
  peer snapshots into the model, commit the offsets (a membership check, see Zombies), publish
  the state as a snapshot and wait for the broker's acknowledgement, then write the same bytes
  to the local checkpoint file. A worker publishes
  nothing else: what peers see is always a state whose every input offset is accounted for.
- **Fold**: merged = sum_k n_k a_k / sum_k n_k over this worker's model and each peer snapshot
  with samples this worker has not averaged in yet; n_k is that number of new samples (for
  itself: what it learned since its last fold). A snapshot already folded weighs 0, so a dead
  worker's last model is averaged in once, not at every sync. The bias and the calibration
  temperature are averaged the same way, and the model's `n_learned` becomes the group's total.
- **Claims**: a snapshot's `offsets` hold, for every partition the worker ever learned from, the
  next offset it had reached. The group's resume point of a partition is the largest offset any
  latest snapshot holds for it. A worker owning a partition resumes there, never from its local
  file or from Kafka's committed offsets (committed at each sync, as a membership check and for
  lag tools).
- **Rebalance**: on revocation the worker syncs before it lets go, so the next owner finds the
  exact position. On assignment it writes a fence record to the snapshot topic and reads up to
  it, so it has seen every snapshot published before it was assigned (the previous owner's last
  one included), then resumes each partition at its claim. If it had learned anything it could
  not publish (killed partitions, a failed sync), it first rolls back to its last published
  snapshot: those messages will be learned again, by whoever owns them now.
- **Start**: a worker restarts from its own latest snapshot in the topic (newer than or equal to
  its local file; a local file newer than the topic means the topic lost it, and it is
  republished). A new worker starts from the merged model of the whole group (it adopts the
  group's model options if its own differ, as a checkpoint would win over them).

Exactly once, with averaging. Each message is *counted* once: over the latest snapshot of every
worker, the `consumed` counters sum to the sum of the partitions' claims, and `samples_learned`
sums to the labelled ones among them; the merged model's `n_learned` is that sum. A message
learned by a worker that dies before its next snapshot is in no snapshot, so no peer averaged it
in, and it is learned again by the partition's next owner. With averaging, "learned" means its
gradient step went into one worker's model, and from there into the average with that worker's
weight; it is never stepped on twice.

Zombies. A worker frozen longer than the session timeout is evicted and its partitions move;
when it wakes up it may still hold messages learned after its last snapshot. Right before every
publication (outside rebalance callbacks) the service commits its offsets synchronously: the
coordinator refuses the commit of an evicted member, and the worker then publishes nothing and
rolls back at its next assignment (so do workers whose partitions were lost). What remains is
the round trip between that commit and the publication: closing it needs Kafka transactions.

Not covered (and said so in the README): a broker that loses the snapshot topic loses the
group's claims (the workers' local files are republished on restart).

"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import socket
import time
import uuid

from river_advsvm.checkpoint import CheckpointError
from streams import merge
from streams import state as state_io

__all__ = ["GroupSync", "Snapshot", "SnapshotReader", "claims", "group_model", "new_bookkeeping",
           "parse_snapshot", "read_group", "superseded", "totals", "worker_id"]

log = logging.getLogger(__name__)

FENCE_PREFIX = b"fence/"
WORKER_ID_FILE = "worker-id"
_WORKER_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
#: Snapshots can be large (B coefficients plus the input names): fetch them whole.
_FETCH_BYTES = 64 * 2**20


# -- snapshots ------------------------------------------------------------------------------------


@dataclasses.dataclass
class Snapshot:
    """One published worker state, as read from the snapshot topic."""

    worker: str
    position: int  # offset in the snapshot topic
    meta: dict
    arrays: dict
    fields: dict  # `streams.state.parse_extra`

    @property
    def group(self) -> dict:
        return self.fields["group"]

    @property
    def seq(self) -> int:
        return self.group["seq"]

    @property
    def learned(self) -> int:
        return self.fields["counters"]["learned"]

    @property
    def consumed(self) -> int:
        return self.fields["counters"]["consumed"]

    @property
    def offsets(self) -> dict:
        return self.fields["offsets"]

    @property
    def folded(self) -> dict:
        return self.group["folded"]

    def state(self) -> state_io.ServiceState:
        """The full service state (the model is rebuilt: slower than reading the fields)."""
        return state_io.from_checkpoint(self.meta, self.arrays, f"snapshot of {self.worker}")


def new_bookkeeping(worker: str) -> dict:
    return {"worker": worker, "seq": 0, "folded": {}, "self_at_fold": 0,
            "run": {"first": None, "last": None, "processed": 0}}


def parse_snapshot(key: bytes | None, value: bytes | None, position: int) -> Snapshot | None:
    """The snapshot in a record of the snapshot topic; None for fences and foreign records."""
    if key is None or key.startswith(FENCE_PREFIX) or not value:
        return None
    worker = key.decode("utf-8", "replace")
    from river_advsvm import checkpoint

    meta, arrays = checkpoint.loads(value)
    where = f"snapshot {position} of {worker}"
    fields = state_io.parse_extra(meta, where)
    if fields["group"] is None or fields["group"]["worker"] != worker:
        raise CheckpointError(f"snapshot {position} keyed {worker!r} is not that worker's")
    state_io.from_checkpoint(meta, arrays, where)  # a model can be made of it
    return Snapshot(worker, position, meta, arrays, fields)


def newer(a: Snapshot | None, b: Snapshot) -> bool:
    """True if `b` replaces `a` as its worker's latest: a higher seq, or the same seq later."""
    return a is None or (b.seq, b.position) > (a.seq, a.position)


def claims(snapshots, topic_ids: dict | None = None) -> dict[str, dict[int, int]]:
    """The group's next offset of every partition: the largest any snapshot holds for it.

    `topic_ids` (topic -> current id) drops the offsets of a topic's earlier incarnation: those
    positions are in a log that is gone.
    """
    result: dict[str, dict[int, int]] = {}
    for snapshot in snapshots:
        ids = snapshot.fields["topic_ids"]
        for topic, parts in snapshot.offsets.items():
            current = (topic_ids or {}).get(topic)
            if current is not None and ids.get(topic) not in (None, current):
                continue
            mine = result.setdefault(topic, {})
            for partition, offset in parts.items():
                mine[partition] = max(mine.get(partition, 0), offset)
    return result


def superseded(snapshots) -> set[str]:
    """Workers whose latest snapshot is entirely inside a later one: a snapshot published after
    it (higher position) that had folded in all of its samples."""
    out = set()
    for s in snapshots:
        for t in snapshots:
            if t.position > s.position and t.worker != s.worker \
                    and t.folded.get(s.worker, -1) >= s.learned:
                out.add(s.worker)
                break
    return out


def group_model(snapshots):
    """The group's model: what a new worker starts from, as a fitted model (None if empty).

    The latest snapshots that no later snapshot has folded in entirely, averaged with weights
    = their `samples_learned`; `n_learned` is the sum over every latest snapshot. Snapshots
    whose model cannot be averaged with the earliest one are left out (and logged).
    """
    members = _group_members(list(snapshots))
    if not members:
        return None
    return merge.to_model(*merge.average(members, sum(s.learned for s in snapshots)))


def _group_members(snapshots: list[Snapshot]) -> list[tuple]:
    if not snapshots:
        return []
    ordered = sorted(snapshots, key=lambda s: s.position)
    gone = superseded(ordered)
    base = ordered[0]
    members = [(base.meta, base.arrays, 0.0 if base.worker in gone else float(base.learned))]
    for s in ordered[1:]:
        reason = merge.incompatibility(base.meta, s.meta)
        if reason is not None:
            log.error("leaving out the snapshot of %s: %s", s.worker, reason)
            continue
        members.append((s.meta, s.arrays, 0.0 if s.worker in gone else float(s.learned)))
    return members


def totals(snapshots) -> dict:
    """What the group has done, over the latest snapshot of every worker."""
    snapshots = list(snapshots)
    sums = {key: sum(s.fields["counters"][key] for s in snapshots)
            for key in ("consumed", "learned", "predicted", "unlabelled", "dead_letters",
                        "learned_correct")}
    all_claims = claims(snapshots)
    runs = [s.group["run"] for s in snapshots if s.group["run"]["first"] is not None]
    return {
        "workers": sorted(s.worker for s in snapshots),
        "samples_learned": sums["learned"],
        "consumed": sums["consumed"],
        "predicted": sums["predicted"],
        "unlabelled": sums["unlabelled"],
        "dead_letters": sums["dead_letters"],
        "test_then_train_accuracy": (sums["learned_correct"] / sums["learned"]
                                     if sums["learned"] else None),
        "offsets": {t: {str(p): o for p, o in sorted(parts.items())}
                    for t, parts in sorted(all_claims.items())},
        "claimed_messages": sum(o for parts in all_claims.values() for o in parts.values()),
        "first_message_at": min((r["first"] for r in runs), default=None),
        "last_message_at": max((r["last"] for r in runs), default=None),
    }


# -- reading the topic ----------------------------------------------------------------------------


class SnapshotReader:
    """Follows the snapshot topic and keeps the latest snapshot of every worker.

    Reads the whole log (a broker that does not compact, like the bundled one, keeps every
    snapshot; the latest of each worker wins either way).
    """

    def __init__(self, clients, topic: str, client_id: str = "advsvm-group"):
        from kafka import TopicPartition

        self.topic = topic
        self.latest: dict[str, Snapshot] = {}
        self.invalid = 0
        self._tp = TopicPartition(topic, 0)
        self._consumer = clients.reader(client_id=client_id, max_fetch_bytes=_FETCH_BYTES)
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
        try:
            snapshot = parse_snapshot(record.key, record.value, record.offset)
        except Exception as error:  # noqa: BLE001 - whatever a record holds, the group goes on
            self.invalid += 1
            log.error("ignoring record %d of %s, not a readable snapshot (%d so far): %s",
                      record.offset, self.topic, self.invalid,
                      " ".join(str(error).split())[:300] or type(error).__name__)
            return
        if snapshot is not None and newer(self.latest.get(snapshot.worker), snapshot):
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


def _fence_key(name: str) -> bytes:
    return FENCE_PREFIX + name.encode()


def read_group(bootstrap_servers: str, topic: str, timeout: float = 30.0,
               settings: dict | None = None) -> dict[str, Snapshot]:
    """The latest snapshot of every worker of a group, read to the end of its snapshot topic.

    Writes one fence record (ignored by workers) to know where the end is. `settings` are
    extra Kafka client settings (`streams.clients.Clients`).
    """
    from streams.clients import Clients

    clients = Clients(bootstrap_servers, settings or {})
    producer = clients.producer(client_id="advsvm-inspect")
    try:
        metadata = producer.send(topic, value=b"fence", key=_fence_key(f"read-{uuid.uuid4().hex}"),
                                 partition=0).get(timeout)
    finally:
        producer.close()
    reader = SnapshotReader(clients, topic, client_id="advsvm-inspect")
    try:
        if not reader.read_past(metadata.offset, timeout):
            raise TimeoutError(f"could not read {topic} to its end within {timeout}s")
        return dict(reader.latest)
    finally:
        reader.close()


# -- a worker -------------------------------------------------------------------------------------


def worker_id(checkpoint_dir: str, requested: str | None = None) -> str:
    """This worker's id: `requested`, else the one kept in `checkpoint_dir/worker-id` (made on
    the first start from the host name and a random suffix). Stable across restarts."""
    path = os.path.join(checkpoint_dir, WORKER_ID_FILE)
    kept = None
    if os.path.exists(path):
        with open(path) as f:
            kept = f.read().strip()
    if requested is not None:
        if kept is not None and kept != requested:
            raise ValueError(f"{checkpoint_dir} belongs to worker {kept!r}, not {requested!r}: "
                             "give each worker a directory of its own")
        chosen = requested
    elif kept is not None:
        chosen = kept
    else:
        host = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:64] or "worker"
        chosen = f"{host}-{uuid.uuid4().hex[:8]}"
    if not _WORKER_ID.match(chosen) or chosen.encode().startswith(FENCE_PREFIX):
        raise ValueError(f"invalid worker id {chosen!r}: 1 to 128 of A-Z a-z 0-9 . _ -")
    if not os.path.exists(path):
        from river_advsvm.checkpoint import write_bytes

        write_bytes(path, (chosen + "\n").encode())
    return chosen


class GroupSync:
    """One worker's side of the protocol; `streams.worker.GroupWorker` drives it.

    Parameters
    ----------
    clients
        The service's `streams.clients.Clients`.
    topic
        The snapshot topic (created with one partition, compacted).
    worker
        This worker's id (the snapshots' key).
    checkpoint_dir
        Where the local copy of the last published snapshot goes.
    sink
        The service's `streams.sink.OutputSink`: snapshots go out through it, after the outputs.

    """

    def __init__(self, clients, topic: str, worker: str, checkpoint_dir: str, sink):
        self.clients = clients
        self.topic = topic
        self.worker = worker
        self.checkpoint_dir = checkpoint_dir
        self.sink = sink
        self.reader: SnapshotReader | None = None
        self._refused: set = set()
        self._last_sent = None

    # -- set-up ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Create the snapshot topic if needed and start reading it."""
        self.clients.create_topics({self.topic: 1}, configs={
            "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"})
        admin = self.clients.admin()
        try:
            described = admin.describe_topics([self.topic])
        finally:
            admin.close()
        partitions = len(described[0].get("partitions", [])) if described else 1
        if partitions != 1:
            raise ValueError(f"the snapshot topic {self.topic!r} has {partitions} partitions;"
                             " it needs exactly one (a total order of snapshots)")
        self.reader = SnapshotReader(self.clients, self.topic,
                                     client_id=f"advsvm-group-{self.worker}")

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    # -- reading --------------------------------------------------------------------------------

    def poll(self) -> None:
        """Take in the snapshots that arrived, without waiting for more."""
        while self.reader.poll(timeout_ms=0):
            pass

    def fence(self, timeout: float = 30.0, should_stop=lambda: False) -> bool:
        """Read every snapshot published before now (a fence record, then read past it)."""
        entry = self.sink.send(self.topic, b"fence", key=_fence_key(self.worker))
        if not self.sink.flush(timeout=timeout, should_stop=should_stop):
            return False
        offset = self.sink.offset_of(entry)
        if offset is None:
            return False
        return self.reader.read_past(offset, timeout)

    def peers(self) -> list[Snapshot]:
        return [s for w, s in self.reader.latest.items() if w != self.worker]

    def own(self) -> Snapshot | None:
        return self.reader.latest.get(self.worker)

    def claims(self, topic_ids: dict) -> dict[str, dict[int, int]]:
        return claims(self.reader.latest.values(), topic_ids)

    # -- state ----------------------------------------------------------------------------------

    def initial_state(self, new_state) -> tuple[state_io.ServiceState, bool]:
        """The state to continue from after a start or a rollback, and whether it must be
        republished (the topic lacks it). Call after `fence`.

        Own latest snapshot if any; else the local checkpoint (a topic that lost it); else a
        new model, with the group's model options if the peers have other ones.
        """
        own = self.own()
        local = state_io.load(self.checkpoint_dir)
        if local is not None and local.group is not None and local.group["worker"] != self.worker:
            raise ValueError(f"{self.checkpoint_dir} holds the checkpoint of worker "
                             f"{local.group['worker']!r}, not {self.worker!r}")
        if own is not None and (local is None or local.group is None
                                or local.group["seq"] <= own.seq):
            state = own.state()
            log.info("resuming from own snapshot %d (%d learned)", own.seq, own.learned)
            return state, False
        if local is not None:
            if local.group is None:
                local.group = new_bookkeeping(self.worker)
                log.warning("adopting the single-service checkpoint in %s as this worker's state",
                            self.checkpoint_dir)
            else:
                log.warning("the snapshot topic lacks this worker's snapshot %d (it has %s): "
                            "republishing the local checkpoint", local.group["seq"],
                            own.seq if own else "none")
            return local, True
        state = new_state()
        state.group = new_bookkeeping(self.worker)
        peers = sorted(self.peers(), key=lambda s: s.position)
        if peers:
            meta, _ = state.model.to_checkpoint()
            reason = merge.incompatibility(peers[0].meta, meta)
            if reason is not None:
                log.warning("adopting the group's model options (%s)", reason)
                state.model = type(state.model)(**peers[0].meta["params"])
        return state, False

    def fold(self, state: state_io.ServiceState) -> int:
        """Average the fresh peer snapshots into `state.model`; returns how many were folded."""
        group = state.group
        learned = state.counters["learned"]
        base_meta, base_arrays = state.model.to_checkpoint()
        fresh, in_model = [], learned
        for peer in sorted(self.peers(), key=lambda s: s.position):
            reason = merge.incompatibility(base_meta, peer.meta)
            if reason is not None:
                if (peer.worker, peer.seq) not in self._refused:
                    self._refused.add((peer.worker, peer.seq))
                    log.error("not averaging the snapshot %d of %s: %s", peer.seq, peer.worker,
                              reason)
                continue
            in_model += peer.learned
            new = peer.learned - group["folded"].get(peer.worker, 0)
            if new > 0:
                fresh.append((peer, new))
        if not fresh:
            return 0
        members = [(base_meta, base_arrays, float(learned - group["self_at_fold"]))]
        members += [(peer.meta, peer.arrays, float(new)) for peer, new in fresh]
        try:
            state.model = merge.to_model(*merge.average(members, in_model))
        except Exception as error:  # noqa: BLE001 - e.g. three labels over three snapshots
            log.error("not averaging %s: %s", [p.worker for p, _ in fresh], error)
            return 0
        for peer, _ in fresh:
            group["folded"][peer.worker] = peer.learned
        group["self_at_fold"] = learned
        log.debug("folded %s into the model (%d samples in it)",
                  {p.worker: n for p, n in fresh}, in_model)
        return len(fresh)

    def publish(self, state: state_io.ServiceState, timeout: float | None = None,
                should_stop=lambda: False) -> bool:
        """Publish `state` as the next snapshot, wait for the broker, then write it locally.

        False if the broker did not acknowledge it in time (or a stop came first): the state is
        then not published, and the caller must not count on it.
        """
        group = state.group
        group["seq"] += 1  # never reused, even if this attempt fails: the highest seq wins
        state.counters["checkpoints"] += 1
        data = state_io.to_bytes(state)
        if self._last_sent is not None:
            self.sink.cancel(self._last_sent)  # an older snapshot still waiting is superseded
        entry = self._last_sent = self.sink.send(self.topic, data, key=self.worker.encode())
        if not self.sink.flush(timeout=timeout, should_stop=should_stop):
            return False
        if self.sink.offset_of(entry) is None:
            raise RuntimeError(f"snapshot {group['seq']} ({len(data)} bytes) could not be "
                               f"published to {self.topic}; see the log")
        self._last_sent = None
        state_io.save_bytes(self.checkpoint_dir, data)
        return True
