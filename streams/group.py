"""Scale-out: the workers of one consumer group learn one model together.

`advsvm serve --sync-every N` makes the service one *worker* of its consumer group. Kafka spreads
the input topic's partitions over the workers; every worker has the same model options, so their
models can be averaged (`river_advsvm.streams.merge`): support vectors ('merge', 'remove') in
function space, the 'compact' random features (same seed) coefficient by coefficient. The kernel
bandwidth is a fixed number (or dict) given to every worker: with `gamma='scale'` each worker would
fit its own on its own first samples, and models of different bandwidths cannot be averaged, so
workers refuse it (`merge.check_mergeable_params`).

The group's state is a *snapshot topic* (one partition, `cleanup.policy=compact`, keyed by worker
id). A snapshot is a worker's service checkpoint (`river_advsvm.streams.state`, the package's safe
format, as bytes): model, counters, `offsets` and the `group` bookkeeping (over the group's basis,
the model's coefficients over it without the vectors). The protocol:

- **Sync** (every N messages, or `checkpoint_interval` seconds with progress): fold the fresh
  peer snapshots into the model, commit the offsets (a membership check, see Zombies), publish
  the state as a snapshot and wait for the broker's acknowledgement, then write the same state
  to the local checkpoint file (whole, vectors included). A worker publishes
  nothing else: what peers see is always a state whose every input offset is accounted for.
- **Fold**: merged f = sum_k n_k f_k / sum_k n_k over this worker's model and each peer
  snapshot with samples this worker has not averaged in yet; n_k is that number of new samples
  (for itself: what it learned since its last fold). A snapshot already folded weighs 0, so a dead
  worker's last model is averaged in once, not at every sync. The bias and the calibration
  temperature are averaged the same way, and the model's `n_learned` becomes the group's total.
  Until its next fold the worker steps on the group's clock (`AdvKernelSVM.group_steps`): each
  sample it learns stands for as many of the group's as reached the model per own sample since
  its last fold (about the number of workers), so that the average follows the schedule of one
  model learning the whole stream rather than one learning a W-th of it. Its revisits of
  stored vectors (`reprocess`) start at its own share of them (`AdvKernelSVM.group_revisits`,
  the workers ranked by id), where they would all start at the first vector again.
- **Over a basis** (`--group-model basis`, `river_advsvm.streams.group_basis`): the same
  average, of the models' coefficients over vectors the whole group shares: `B` numbers per
  peer instead of a union of every peer's vectors and budget maintenance. Once the group has
  a basis, a snapshot carries the worker's model projected onto it, as coefficients without
  the vectors (readers put the basis' vectors back); the local checkpoint stays whole.
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

Zombies. A worker frozen longer than the session timeout is evicted and its partitions move; when it
wakes up it may still hold messages learned after its last snapshot. Right before every publication
(outside rebalance callbacks) the service commits its offsets synchronously: the coordinator refuses
the commit of an evicted member, and the worker then publishes nothing and rolls back at its next
assignment (so do workers whose partitions were lost). A worker can also be frozen between that
commit and its publication; generations close that gap. Each worker's fence names the consumer group
generation it was assigned in, and each snapshot the generation it was published in; a snapshot is
ignored by every reader if its worker's latest fence, or a fence another worker wrote after that
one, names a higher generation (`river_advsvm.streams.snapshot_topic`): its partitions had moved on,
from claims that did not include it. A member that is still in the group publishes before the next
generation exists (the coordinator waits for it to rejoin), so only a zombie's snapshots are
ignored. The worker reads each snapshot it publishes back and counts it published only if the topic
took it; if not, it publishes nothing more, rolls back at its next assignment and republishes its
last snapshot that counts (so that a compacted topic keeps that one, not the zombie's, under its
key).

Not covered (and said so in the docs): a broker that loses the snapshot topic loses the
group's claims (the workers' local files are republished on restart); compaction that runs
between a zombie's snapshot and the republication that follows it can drop the fence that made
it stale, and the snapshot it replaced.

The parts: `river_advsvm.streams.snapshot` (the topic's records),
`river_advsvm.streams.snapshot_topic` (reading it), `river_advsvm.streams.group_state` (claims,
totals and the group's model over the latest snapshots) and, here, one worker's side of the protocol
(`GroupSync`, driven by `river_advsvm.streams.worker.GroupWorker`).

"""

from __future__ import annotations

import logging
import os
import re
import socket
import stat
import uuid

import numpy as np
from kafka.errors import KafkaError

from river_advsvm.streams import faults, merge
from river_advsvm.streams import state as state_io
from river_advsvm import model_checkpoint
from river_advsvm.checkpoint import CheckpointError
from river_advsvm.streams.group_basis import (BasisChoice, basis_record, coefficient_snapshot,
                                              proposed_vectors)
from river_advsvm.streams.group_state import (claimed_output_ends, claims, group_model,
                                              options_to_adopt, superseded, totals)
from river_advsvm.streams.snapshot import (FENCE_PREFIX, Snapshot, fence_key, fence_value,
                                           new_bookkeeping, newer, parse_snapshot)
from river_advsvm.streams.snapshot_topic import SnapshotReader, read_group
from river_advsvm.support_basis import SharedBasis

__all__ = ["FENCE_PREFIX", "GROUP_MODELS", "DuplicateWorker", "Fenced", "GroupSync", "Snapshot",
           "SnapshotReader", "check_worker_id", "claims", "group_model", "new_bookkeeping",
           "newer", "parse_snapshot", "read_group", "superseded", "totals", "worker_id"]

log = logging.getLogger(__name__)

WORKER_ID_FILE = "worker-id"
#: How a worker folds its peers: 'union' (every vector, then budget maintenance) or 'basis'
#: (coefficients over the group's shared basis, `river_advsvm.streams.group_basis`).
GROUP_MODELS = ("basis", "union")
_WORKER_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


# -- a worker -------------------------------------------------------------------------------------


class Fenced(Exception):
    """The topic ignored a snapshot this worker published: the group was assigned in a newer
    generation first. This worker is a zombie and must roll back."""


class DuplicateWorker(ValueError):
    """Another live process publishes snapshots under this worker's id (two workers given one
    `--worker-id`, or a checkpoint directory copied with the id it keeps): this one's
    snapshots no longer count, and it must stop (a usage error: restarting it would repeat
    it)."""


def worker_id(checkpoint_dir: str, requested: str | None = None) -> str:
    """This worker's id: `requested`, else the one kept in `checkpoint_dir/worker-id` (made on
    the first start from the host name and a random suffix). Stable across restarts."""
    path = os.path.join(checkpoint_dir, WORKER_ID_FILE)
    kept = _read_small_file(path)
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
    check_worker_id(chosen)
    if not os.path.exists(path):
        from river_advsvm.checkpoint import write_bytes

        write_bytes(path, (chosen + "\n").encode(), what="worker id")
    return chosen


def check_worker_id(chosen: str) -> None:
    """`ValueError` unless `chosen` can name a worker (its snapshots' key)."""
    if not _WORKER_ID.match(chosen) or chosen.encode().startswith(FENCE_PREFIX):
        raise ValueError(f"invalid worker id {chosen!r}: 1 to 128 of A-Z a-z 0-9 . _ -")


def _read_small_file(path: str, limit: int = 256) -> str | None:
    """The first `limit` bytes of a regular file as text, None if there is none; `ValueError`
    for anything else (a FIFO or a device, refused without blocking)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        return os.read(fd, limit).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)


class GroupSync:
    """One worker's side of the protocol; `river_advsvm.streams.worker.GroupWorker` drives it.

    Parameters
    ----------
    clients
        The service's `river_advsvm.streams.clients.Clients`.
    topic
        The snapshot topic (created with one partition, compacted).
    worker
        This worker's id (the snapshots' key).
    checkpoint_dir
        Where the local copy of the last published snapshot goes.
    sink
        The service's `river_advsvm.streams.sink.OutputSink`: snapshots go out through it, after the
        outputs.
    limits
        The operator's `river_advsvm.streams.state.Limits`: no peer's snapshot or basis lifts them.
    group_model
        'basis' (support vectors are folded over the group's basis) or 'union'.
    refresh_every
        With 'basis': this worker proposes a new basis after this many folds on the current one.

    """

    def __init__(self, clients, topic: str, worker: str, checkpoint_dir: str, sink,
                 limits: state_io.Limits | None = None, group_model: str = "basis",
                 refresh_every: int = 1):
        if group_model not in GROUP_MODELS:
            raise ValueError(f"group_model must be one of {GROUP_MODELS}, got {group_model!r}")
        if refresh_every < 1:
            raise ValueError("refresh_every must be >= 1")
        self.clients = clients
        self.limits = state_io.Limits() if limits is None else limits
        self.topic = topic
        self.worker = worker
        # This process's mark on its snapshots: another process publishing under the same id
        # has another.
        self.instance = uuid.uuid4().hex[:16]
        self.checkpoint_dir = checkpoint_dir
        self.sink = sink
        self.reader: SnapshotReader | None = None
        self.choice = BasisChoice(self.limits) if group_model == "basis" else None
        self.refresh_every = refresh_every
        self._folds_on_basis = 0  # this worker's folds over the current basis
        self._epoch_folded = 0  # the epoch they count for
        # The snapshot last refused of each peer, and the basis epoch last refused: each is
        # logged once, and a peer refused at every sync keeps one entry, not one per snapshot.
        self._refused: dict[str, int] = {}
        self._refused_basis: int | None = None
        self._last_sent = None

    # -- set-up ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Create the snapshot topic if needed and start reading it."""
        self._ensure_topic()
        self.reader = SnapshotReader(self.clients, self.topic,
                                     client_id=f"advsvm-group-{self.worker}", limits=self.limits,
                                     basis=self.choice, own=(self.worker, self.instance))

    def _ensure_topic(self) -> None:
        """The snapshot topic, created if it is missing (one partition, compacted);
        `ValueError` if it has more than one partition."""
        admin = self.clients.admin()  # (one connection: this runs at every assignment)
        try:
            self.clients.create_topics({self.topic: 1}, configs={
                "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"}, admin=admin)
            described = admin.describe_topics([self.topic])
        finally:
            admin.close()
        partitions = len(described[0].get("partitions", [])) if described else 1
        if partitions != 1:
            raise ValueError(f"the snapshot topic {self.topic!r} has {partitions} partitions;"
                             " it needs exactly one (a total order of snapshots): a broker that "
                             "lost it may have made it again with its default partitions when "
                             "a worker wrote to it. Delete it and restart the workers, which "
                             "make it as it must be")

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    # -- reading --------------------------------------------------------------------------------

    def poll(self) -> None:
        """Take in the snapshots that arrived, without waiting for more."""
        while self.reader.poll(timeout_ms=0):
            pass

    def fence(self, generation: int | None, timeout: float = 30.0,
              should_stop=lambda: False) -> bool:
        """Read every snapshot published before now (a fence record naming the consumer group
        `generation` this worker was assigned in, then read past it)."""
        # (Made again first if the broker lost it: written to as it is, a broker that creates
        # topics on demand would make it with its default partitions, and the snapshots
        # scattered over them would never be read back.)
        try:
            self._ensure_topic()
        except KafkaError as error:
            log.warning("could not check the snapshot topic %s (%r)", self.topic, error)
            return False
        entry = self.sink.send(self.topic, fence_value(generation), key=fence_key(self.worker))
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

    def claimed_output_ends(self, claimed: dict, partitions,
                            topic_ids: dict | None = None) -> tuple[dict, dict]:
        return claimed_output_ends(self.reader.latest.values(), claimed, partitions, topic_ids)

    # -- state ----------------------------------------------------------------------------------

    def initial_state(self, new_state, overridden=None) -> tuple[state_io.ServiceState, bool]:
        """The state to continue from after a start or a rollback, and whether it must be
        republished (the topic lacks it). Call after `fence`.

        Own latest snapshot if any; else the local checkpoint (a topic that lost it); else a
        new model, with the group's model options if the peers have other ones.
        `overridden(state)`: what a state resumed from the own snapshot overrides of the
        operator's settings (`river_advsvm.streams.state.overridden` with `source="snapshot"`),
        logged as warnings.

        Raises `CheckpointError` if the own snapshot, newer than the local checkpoint, holds
        a model beyond this worker's limits: as for the local checkpoint, the operator raises
        them to load it (starting over would publish an empty model over all it learned).
        """
        own = self.own()
        local = state_io.load(self.checkpoint_dir, self.limits)
        if local is not None and local.group is not None and local.group["worker"] != self.worker:
            raise ValueError(f"{self.checkpoint_dir} holds the checkpoint of worker "
                             f"{local.group['worker']!r}, not {self.worker!r}")
        local_seq = None if local is None or local.group is None else local.group["seq"]
        if own is not None and own.beyond_limits is not None and (local_seq or 0) < own.seq:
            raise CheckpointError(f"this worker's snapshot {own.seq} in {self.topic}, newer "
                                  f"than its local checkpoint: {own.beyond_limits}")
        if own is not None and own.over_basis is not None and local_seq == own.seq:
            # The same state as the snapshot, whose model is its projection onto the basis.
            log.info("resuming from the local checkpoint of own snapshot %d (%d learned)",
                     own.seq, own.learned)
            return local, False
        if own is not None and own.model_unread is None and (local_seq is None
                                                             or local_seq <= own.seq):
            state = own.state()
            log.info("resuming from own snapshot %d (%d learned); it wins over model options",
                     own.seq, own.learned)
            # (A local copy of the same snapshot said its overrides when the service loaded it.)
            if overridden is not None and (local_seq is None or local_seq < own.seq):
                for note in overridden(state):
                    log.warning("%s", note)
            return state, False
        if own is not None and own.model_unread is not None and (local_seq or 0) < own.seq:
            # What it learned since is rolled back, and learned again from the claims of the
            # state republished over it (with a seq that supersedes the snapshot's).
            log.error("the own snapshot %d cannot be resumed from (%s), and no local "
                      "checkpoint is as recent: resuming from %s", own.seq, own.model_unread,
                      "none" if local is None else "the local checkpoint")
        if local is not None:
            if local.group is None:
                local.group = new_bookkeeping(self.worker)
                log.warning("adopting the single-service checkpoint in %s as this worker's state",
                            self.checkpoint_dir)
            else:
                log.warning("the snapshot topic lacks this worker's snapshot %d (it has %s): "
                            "republishing the local checkpoint", local.group["seq"],
                            own.seq if own else "none")
            if own is not None:
                local.group["seq"] = max(local.group["seq"], own.seq)
            return local, True
        state = new_state()
        state.group = new_bookkeeping(self.worker)
        if own is not None:  # (its snapshot could not be read back: see above)
            state.group["seq"] = own.seq
            return state, True
        # (Never the options of a snapshot beyond this worker's limits: they would lift them.)
        meta, _ = state.model.to_checkpoint()
        group = options_to_adopt([p for p in self.peers() if p.beyond_limits is None], meta)
        if group is not None:
            reason = merge.incompatibility(group.meta, meta)
            # Options that cannot be averaged (another model class, gamma 'scale', a policy
            # without a shared representation) are no group's: the worker keeps its own.
            unmergeable = merge.options_incompatibility(group.meta)
            if reason is not None and unmergeable is not None:
                log.error("not adopting the model options of %s's snapshot, which no group can "
                          "average (%s)", group.worker, unmergeable)
            elif reason is not None:
                log.warning("adopting the group's model options, those of %s's snapshot, over "
                            "this worker's (%s, the group's first)", group.worker, reason)
                cls = type(state.model)
                state.model = cls(**cls._params_from_checkpoint(group.meta["params"]))
        return state, False

    def fold(self, state: state_io.ServiceState, timeout: float | None = None) -> int:
        """Average the fresh peer snapshots into `state.model`; returns how many were folded.
        `timeout`: for a basis proposal (`--group-model basis`), its publication and read."""
        group = state.group
        learned = state.counters["learned"]
        base_meta, base_arrays = state.model.to_checkpoint()
        fresh, in_model, group_ids = [], learned, {self.worker}
        for peer in sorted(self.peers(), key=lambda s: s.position):
            reason = peer.model_unread or merge.incompatibility(base_meta, peer.meta)
            if reason is not None:
                self._refuse(peer, reason)
                continue
            in_model += peer.learned
            group_ids.add(peer.worker)
            new = peer.learned - group["folded"].get(peer.worker, 0)
            if new > 0:
                fresh.append((peer, new))
        if not fresh:
            return 0
        own = float(learned - group["self_at_fold"])
        basis = None
        if self.choice is not None and base_meta["params"].get("budget_policy") \
                in merge.SUPPORT_VECTOR_POLICIES:
            basis = self._basis(base_meta, base_arrays, [p for p, _ in fresh],
                                30.0 if timeout is None else timeout)
        if basis is not None:
            try:
                over_basis = [(base_meta, merge.over_basis(base_meta, base_arrays, basis)[0],
                               own)]
            except ValueError as error:  # CheckpointError, IncompatibleModels
                log.error("cannot project this worker's model onto the group's basis %d (%s): "
                          "folding by the union", self.choice.epoch, error)
                basis = None
        if basis is not None:
            for peer, new in list(fresh):
                try:
                    member = self._on_basis(peer, basis)
                except (ValueError, KeyError, TypeError) as error:  # CheckpointError included
                    self._refuse(peer, f"cannot be projected onto the group's basis: {error}")
                    fresh.remove((peer, new))
                    in_model -= peer.learned
                    group_ids.discard(peer.worker)
                    continue
                over_basis.append((peer.meta, member, float(new)))
            if not fresh:
                return 0
            members = over_basis
        else:  # (a coefficient snapshot gets its basis' vectors back only here)
            members = [(base_meta, base_arrays, own)]
            members += [(*peer.whole(), float(new)) for peer, new in fresh]
        try:
            model = merge.to_model(*merge.average(members, in_model, basis=basis))
        except MemoryError:  # the machine's fault, not the peers': exit 5, restarted
            raise
        except Exception as error:  # noqa: BLE001 - e.g. three labels over three snapshots
            log.error("not averaging %s: %s", [p.worker for p, _ in fresh], error)
            return 0
        # Each sample learned here until the next fold stands for as many of the group's as
        # reached the model per own sample since the last fold (at most one per worker):
        # `group_steps` keeps the average on the schedule of one model over the stream.
        workers = len(group_ids)
        grown = in_model - (int(base_meta["state"]["n_learned"]) - own)
        model.group_steps(min(max(grown / own if own > 0 else workers, 1.0), workers))
        # The workers, by their ids, revisit consecutive shares of the stored vectors.
        model.group_revisits(int(in_model + sorted(group_ids).index(self.worker) * own))
        state.model = model
        for peer, _ in fresh:
            group["folded"][peer.worker] = peer.learned
        group["self_at_fold"] = learned
        if basis is not None:
            self._folds_on_basis += 1
        log.debug("folded %s into the model (%d samples in it)%s",
                  {p.worker: n for p, n in fresh}, in_model,
                  "" if basis is None else f" over basis {self.choice.epoch}")
        return len(fresh)

    def _refuse(self, peer: Snapshot, reason: str) -> None:
        if peer.coefficients_only and self.choice is None:
            # (only a worker of --group-model basis publishes over a basis)
            reason += (": it comes from a worker of --group-model basis, this one has "
                       "--group-model union, and the group's workers need the same one")
        if self._refused.get(peer.worker) != peer.seq:
            self._refused[peer.worker] = peer.seq
            log.error("not averaging the snapshot %d of %s: %s", peer.seq, peer.worker, reason)

    # -- the shared basis (--group-model basis, `river_advsvm.streams.group_basis`) --------------

    def _basis(self, meta: dict, arrays: dict, peers: list[Snapshot], timeout: float):
        """The group's basis to fold over (after proposing a new one if due, filled up with
        the vectors of `peers`), or None if there is none that this model can use: then the
        fold is by the union."""
        choice = self.choice
        if choice.epoch != self._epoch_folded:
            self._epoch_folded, self._folds_on_basis = choice.epoch, 0
        store = meta["state"]["model"].get("store")
        size = 0 if store is None else int(store["size"])
        budget = meta["params"].get("budget")
        current = choice.basis
        due = current is None or self._folds_on_basis >= self.refresh_every or (
            size > current.size and (budget is None or current.size < budget))
        if due and size > 0:
            self._propose(choice.epoch + 1, meta, arrays, peers, timeout)
            current = choice.basis
            self._epoch_folded, self._folds_on_basis = choice.epoch, 0
        if current is None:
            return None
        if not _fits(meta, current):
            if self._refused_basis != choice.epoch:
                self._refused_basis = choice.epoch
                log.error("the group's basis %d (%s at gamma %r, %s, %d vectors) does not fit "
                          "this model: folding by the union", choice.epoch, current.kernel,
                          current.gamma, current.vectors.dtype, current.size)
            return None
        return current

    def _snapshot_bytes(self, state: state_io.ServiceState) -> tuple[bytes, bytes]:
        """The snapshot to publish and the local checkpoint, as bytes: the whole state for
        both, but over the group's basis the snapshot holds the model's coefficients only
        (`group_basis.coefficient_snapshot`)."""
        meta, arrays = state.model.to_checkpoint(state.extra())
        whole = model_checkpoint.dumps(meta, arrays)
        basis = None if self.choice is None else self.choice.basis
        if basis is None or meta["params"].get("budget_policy") \
                not in merge.SUPPORT_VECTOR_POLICIES or not meta["state"]["started"] \
                or not _fits(meta, basis):
            return whole, whole
        try:
            over = coefficient_snapshot(meta, arrays, basis, self.choice.epoch)
        except ValueError as error:  # CheckpointError, IncompatibleModels
            log.error("publishing the whole model: it cannot be projected onto the group's "
                      "basis %d (%s)", self.choice.epoch, error)
            return whole, whole
        return model_checkpoint.dumps(*over), whole

    def _propose(self, epoch: int, meta: dict, arrays: dict, peers: list[Snapshot],
                 timeout: float) -> None:
        """Propose this model's vectors, filled up with the peers' (`proposed_vectors`), as the
        group's basis of `epoch`, and read past the record: the first proposal of an epoch in
        the topic wins, this one or a peer's."""
        store = meta["state"]["model"]["store"]
        budget = meta["params"].get("budget")
        vectors = proposed_vectors((meta, arrays), [p.whole() for p in peers],
                                   budget or int(store["size"]))
        try:
            SharedBasis(store["kernel"], store["gamma"], vectors, meta["state"]["names"])
        except ValueError as error:
            log.warning("not proposing a basis: %s", error)
            return
        key, value = basis_record(epoch, self.worker, store["kernel"], store["gamma"], vectors,
                                  meta["state"]["names"])
        entry = self.sink.send(self.topic, value, key=key)
        if not self.sink.flush(timeout=timeout):
            return
        offset = self.sink.offset_of(entry)
        if offset is not None and self.reader.read_past(offset, max(timeout, 1.0)):
            log.info("proposed basis %d (%d vectors); the group's is %d, from %s", epoch,
                     len(vectors), self.choice.epoch, self.choice.proposer)
        for stale in self.choice.stale_keys(self.worker):  # read back like any record
            self.sink.send(self.topic, None, key=stale)

    def _on_basis(self, peer: Snapshot, basis) -> dict:
        """A peer as a member of a fold over `basis` (`merge.over_basis`): its own arrays if
        it is a coefficient snapshot over it, its coefficients if its vectors are the basis,
        else the projection of its model (made on an older basis, or learned since)."""
        if peer.basis is not None and peer.basis.key == basis.key:
            return dict(peer.arrays)  # checked when read
        meta, arrays = peer.whole()
        store = meta["state"]["model"].get("store")
        names, d = meta["state"]["names"], basis.vectors.shape[1]
        vectors = arrays.get("vectors")
        if store is not None and vectors is not None and list(names[:d]) == basis.names \
                and vectors.shape == (basis.size, len(names)) \
                and vectors.dtype == basis.vectors.dtype \
                and np.array_equal(vectors[:, :d], basis.vectors) and not vectors[:, d:].any() \
                and not len(arrays.get("average_orphans", ())):
            member = {"alpha": float(store["scale"]) * np.asarray(arrays["alpha"], np.float64)}
            if "average_coefficients" in arrays:
                member["average_alpha"] = np.asarray(arrays["average_coefficients"], np.float64)
        else:
            member, loss = merge.over_basis(meta, arrays, basis)
            log.info("projected the snapshot %d of %s onto the group's basis %d (loss %.3g)",
                     peer.seq, peer.worker, self.choice.epoch, loss)
        merge.check_over_basis(meta, member, basis.size)  # (finite, from any peer's numbers)
        return member

    def publish(self, state: state_io.ServiceState, generation: int | None,
                timeout: float | None = None, should_stop=lambda: False) -> bool:
        """Publish `state` as the next snapshot of consumer group `generation`, wait for the
        broker, read it back, then write it locally.

        False if the broker did not acknowledge it, or it could not be read back, in time (or a
        stop came first): the caller must not count on it. `Fenced` if the topic ignores it (the
        group was assigned in a newer generation first).
        """
        group = state.group
        group["seq"] += 1  # never reused, even if this attempt fails: the highest seq wins
        group["generation"] = generation
        group["instance"] = self.instance
        state.counters["checkpoints"] += 1
        data, whole = self._snapshot_bytes(state)
        if self._last_sent is not None:
            self.sink.cancel(self._last_sent)  # an older snapshot still waiting is superseded
        entry = self._last_sent = self.sink.send(self.topic, data, key=self.worker.encode())
        if not self.sink.flush(timeout=timeout, should_stop=should_stop):
            return False
        offset = self.sink.offset_of(entry)
        if offset is None:
            raise RuntimeError(f"snapshot {group['seq']} ({len(data)} bytes) could not be "
                               f"published to {self.topic}; see the log")
        self._last_sent = None
        if not self.reader.read_past(offset, 30.0 if timeout is None else max(timeout, 1.0)):
            log.warning("could not read snapshot %d back from %s in time: not counting on it",
                        group["seq"], self.topic)
            return False
        faults.reach("snapshot.published", seq=group["seq"])
        twin = self.reader.twin
        if twin is not None:
            raise DuplicateWorker(
                f"another process publishes snapshots as worker {self.worker!r} (its snapshot "
                f"{twin.seq}, record {twin.position} of {self.topic}): give each worker its "
                "own --worker-id and checkpoint directory (a copied directory keeps the id of "
                "the one it was copied from)")
        own = self.own()
        if own is None or own.position != offset:
            raise Fenced(f"snapshot {group['seq']} of {self.worker} (generation {generation}) "
                         f"is ignored: the group was assigned in a newer generation first")
        state_io.save_bytes(self.checkpoint_dir, whole)
        return True


def _fits(meta: dict, basis: SharedBasis) -> bool:
    """Whether a support-vector model (checkpoint metadata) can be folded over `basis`: the
    same kernel, bandwidth and dtype, and no more vectors than its budget."""
    store = meta["state"]["model"].get("store")
    budget = meta["params"].get("budget")
    return (store is None or (store["kernel"], float(store["gamma"])) == (basis.kernel,
                                                                          basis.gamma)) \
        and basis.vectors.dtype == np.dtype(meta["params"].get("dtype")) \
        and (budget is None or basis.size <= budget)
