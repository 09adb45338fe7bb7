"""Checkpoints of a service that is one worker of a group: snapshots (`river_advsvm.streams.group`).

Every checkpoint is a sync: fold the peers' fresh snapshots into the model, confirm the group
membership by committing the offsets, publish the state (tagged with the consumer group
generation) to the snapshot topic and read it back, then write the same bytes locally. On
assignment the worker reads the snapshot topic up to a fence record it writes (naming the
generation), rolls back what it never published, folds its peers in and resumes each partition
at the group's claim. See `river_advsvm.streams.group` for the protocol and its guarantees.

"""

from __future__ import annotations

import logging
import os
import time

from kafka.errors import CommitFailedError, KafkaError, RebalanceInProgressError

from river_advsvm.streams import group as group_io
from river_advsvm.streams import merge
from river_advsvm.streams import state as state_io
from river_advsvm.streams.session import Session

__all__ = ["GroupWorker"]

log = logging.getLogger(__name__)


class GroupWorker:
    """The checkpoint strategy of one worker of a group (`sync_every`)."""

    def __init__(self, session: Session):
        self.session = session
        self.group: group_io.GroupSync | None = None
        self._started = False  # the state comes from the group's snapshots
        self._evicted = False  # the group dropped this worker: publish nothing, roll back
        self._ignored = False  # the topic ignored a snapshot of this worker: republish its last
        self._generation: int | None = None  # the consumer group generation of the assignment

    def start(self) -> bool:
        """Join the group's snapshot topic (retrying while the broker is away); False if
        stopped first."""
        session = self.session
        config = session.config
        worker = group_io.worker_id(config.checkpoint_dir, config.worker_id)
        group = group_io.GroupSync(session.clients, config.sync_topic, worker,
                                   config.checkpoint_dir, session.sink, session.limits,
                                   config.group_model, config.basis_refresh_every)
        session.progress.group_folds = session.progress.group_peers = 0
        if session.retry_while_away(lambda: group.start() or True) is None:
            return False  # stopped before the broker came back
        self.group = group
        log.info("worker %s of group %r; snapshots in %r, every %d messages (support vectors "
                 "folded by the %s)", worker, config.group, config.sync_topic, config.sync_every,
                 config.group_model)
        return True

    def close(self) -> None:
        if self.group is not None:
            self.group.close()

    def check_model(self) -> None:
        """`ValueError` if the model (a checkpoint's, which wins over the options) cannot be
        averaged with a group's."""
        model = self.session.state.model
        try:
            if type(model).__name__ != "AdvKernelSVM":
                raise ValueError("workers that sync need --model kernel (AdvKernelSVM)")
            merge.check_mergeable_params(model._get_params())
        except ValueError as error:
            path = state_io.checkpoint_path(self.session.config.checkpoint_dir)
            if not os.path.exists(path):
                raise
            raise ValueError(f"the checkpoint {path} wins over the model options, and its model "
                             f"cannot be averaged: {error}") from None

    # -- syncing --------------------------------------------------------------------------------

    def checkpoint(self) -> bool:
        session = self.session
        if not session.sink.flush(should_stop=session.waiting):
            return False
        return self.sync(should_stop=session.waiting)

    def sync(self, timeout: float | None = None, should_stop=lambda: False,
             check_membership: bool = True) -> bool:
        """Fold fresh peer snapshots in, then publish this state (outputs must be flushed
        already). False if the snapshot was not published.

        Right before publishing, the offsets are committed synchronously: the coordinator
        refuses the commit of a member it has evicted (frozen past the session timeout while
        another worker took its partitions over), and such a zombie must not publish claims on
        partitions that moved. The rebalance callback, which cannot block on the consumer,
        skips that check: a member being asked to revoke is still a member. The snapshot
        carries the generation of the assignment, and readers ignore it if a peer was assigned
        in a newer one before it landed (a freeze between the commit and the publication).
        """
        session, group = self.session, self.group
        if self._evicted:
            return False
        # `timeout` bounds the whole sync: each wait gets what the ones before left.
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        group.poll()
        progress = session.progress
        progress.group_folds += group.fold(session.state, left())
        progress.group_peers = len(group.peers())
        session.state.group["run"] = {"first": progress.first_wall, "last": progress.last_wall,
                                      "processed": progress.processed}
        if check_membership and not self._confirm_membership(left()):
            return False
        session.learner.save_monitor()
        session.note_output_ends()
        try:
            if not group.publish(session.state, self._generation, timeout=left(),
                                 should_stop=should_stop):
                return False
        except group_io.Fenced as error:
            log.warning("%s: this worker was cut off from the group; what it learned since its "
                        "last snapshot that counts is rolled back at its next assignment", error)
            self._evicted = self._ignored = True
            return False
        except group_io.DuplicateWorker:
            self._evicted = True  # publishes nothing more, not even at its shutdown
            raise
        progress.checkpointed()
        counters = session.state.counters
        log.info(
            "snapshot %d of %s: %d learned here, %d in the merged model, %d peers, offsets %s "
            "(%.0f msg/s)", session.state.group["seq"], group.worker, counters["learned"],
            session.state.model.n_learned, progress.group_peers, session.state.offsets,
            progress.throughput(), extra=session.log_fields(),
        )
        if not check_membership:
            session.commit_offsets()
        return True

    def _confirm_membership(self, timeout: float | None) -> bool:
        """Commit the offsets about to be published; False (and evicted) if the group refuses."""
        session = self.session
        offsets = session.assigned_offsets()
        if not offsets:
            return True
        try:
            wait = 10.0 if timeout is None else min(timeout, 10.0)  # (0: no time left)
            session.consumer.commit(offsets, timeout_ms=int(1000 * wait))
            return True
        except CommitFailedError as error:
            cause = error.args[0] if error.args else None
            if isinstance(cause, RebalanceInProgressError):  # still a member: publish later
                log.info("a rebalance is in progress: publishing after it")
                return False
            log.warning("the group no longer counts worker %s as the owner of its partitions "
                        "(%r): not publishing; what it learned since its last snapshot is "
                        "rolled back at its next assignment", self.group.worker, error)
            self._evicted = True
        except KafkaError as error:
            log.warning("could not confirm the group membership (%r): not publishing now", error)
        return False

    def final(self) -> int:
        """The sync at shutdown: 0, or 1 if the outputs could not be delivered."""
        session = self.session
        since = session.progress.since_checkpoint
        if since and (self._evicted or self.session.progress.restoring):
            log.info("not publishing at shutdown: the group has moved this worker's "
                     "partitions; %d messages will be learned again by their owners", since)
            return 0
        if not since:
            return 0
        timeout = session.config.shutdown_timeout
        keep_alive = lambda: session.waiting(False)  # noqa: E731
        if session.sink.flush(timeout=timeout, should_stop=keep_alive) and self.sync(
                timeout=session.drain_left(timeout), should_stop=keep_alive):
            return 0
        return session.no_final_checkpoint(timeout)

    # -- rebalances -----------------------------------------------------------------------------

    def on_revoked(self, partitions) -> None:
        session = self.session
        since = session.progress.since_checkpoint
        # While draining (the consumer leaves its group at shutdown), the final sync already
        # published what it could within the shutdown timeout.
        if since and not session.progress.restoring and session.drain_deadline is None:
            # Publish before letting go, so that the next owner resumes exactly here. This
            # blocks the consumer's heartbeats: bounded well below the session timeout.
            timeout = max(1.0, session.config.session_timeout_ms / 2000)
            keep_alive = lambda: session.waiting(False)  # noqa: E731
            if not (session.sink.flush(timeout=timeout, should_stop=keep_alive)
                    and self.sync(timeout=timeout, should_stop=keep_alive,
                                  check_membership=False)):
                log.warning("could not publish before the rebalance; %d messages will be "
                            "learned again", since)
        session.assignment -= set(partitions)
        session.published.forget(partitions)

    def on_lost(self, partitions) -> None:
        # Another worker may own these already: publishing now could count twice what it
        # resumes. What was learned since the last snapshot is rolled back at the next
        # assignment.
        self._evicted = True
        self.session.assignment -= set(partitions)
        self.session.published.forget(partitions)

    def on_assigned(self, partitions) -> None:
        # Positioning needs the group's latest snapshots, read outside this callback (which
        # blocks heartbeats): nothing is fetched from these partitions until then.
        session = self.session
        session.assignment = set(partitions)
        self.session.progress.restoring = True
        if partitions:
            session.consumer.pause(*partitions)

    def halted(self) -> bool:
        """True while the group has dropped this worker and no assignment has placed it again:
        what it would learn is rolled back at that assignment, and what it would predict the
        partitions' new owners predict too."""
        return self._evicted and not self.session.progress.restoring

    def after_poll(self) -> bool:
        """Called after every poll; True if the records it returned must be dropped."""
        session = self.session
        session.watch_brokers()
        if session.progress.restoring:
            self.restore()
            session.measure_lag()
            return True  # what this poll returned was fetched before the partitions were placed
        if self.halted():
            # Nothing is fetched until the group assigns partitions again (restore resumes
            # them at their claims); a rebalance that does not come stops the service as a
            # stalled one does, and a restart joins the group anew.
            held = session.assignment & session.consumer.assignment()
            if held:
                session.consumer.pause(*held)
            session.progress.rebalancing()
            session.progress.heartbeat()  # (alive: waiting for the group on purpose)
            return True
        session.resume_where_logs_end()
        session.measure_lag()
        if session.topic_recreated():
            timeout = session.config.shutdown_timeout
            if session.progress.since_checkpoint and session.sink.flush(timeout=timeout):
                self.sync(timeout=timeout)
            self.session.progress.restoring = True
            return True
        return False

    def restore(self) -> None:
        """After an assignment: read the group's snapshots up to now, roll back what was never
        published, fold the peers in, and resume each partition at its claim."""
        session, group = self.session, self.group
        partitions = set(session.assignment)
        generation = session.consumer.group_metadata().generation_id
        self._generation = generation if generation is not None and generation >= 0 else None
        backoff = 0.5
        while not group.fence(self._generation, timeout=10.0, should_stop=session.waiting):
            if session.stopping.is_set():
                return
            log.warning("could not read the snapshot topic %s; retrying in %.1fs", group.topic,
                        backoff)
            session.progress.heartbeat()
            session.stopping.wait(backoff)
            backoff = min(backoff * 2, 10.0)
        republish = False
        since = session.progress.since_checkpoint
        if not self._started or since or self._evicted:
            if self._started:
                log.warning("rolling back %d messages learned since the last snapshot: their "
                            "partitions may have moved; they are learned again", since)
            config = session.config

            def overridden(state):  # (the local checkpoint's were said when it was loaded)
                return state_io.overridden(state, config.labels, config.width, config.topic,
                                           session.new_state().model, source="snapshot")
            # At the start only: a rollback resumes what this process published.
            state, republish = group.initial_state(session.new_state,
                                                   None if self._started else overridden)
            # After an ignored snapshot, the last one that counts is published again: under
            # this worker's key, a compacted topic then keeps it rather than the ignored one.
            republish = republish or self._ignored
            session.state = state
            session.progress.since_checkpoint = 0
            self._started = True
            self._evicted = self._ignored = False
        if self._generation is None:  # already out of the group again: publish nothing
            self._evicted = True
        state = session.state
        folded = group.fold(state)
        session.progress.group_folds += folded
        session.progress.group_peers = len(group.peers())
        current = session.topic_ids(partitions)
        for topic, now in current.items():
            saved = state.topic_ids.get(topic)
            if now is not None and saved not in (None, now):
                log.warning("topic %r was recreated (id %s, state has %s): starting it from "
                            "its beginning", topic, now, saved)
                state.offsets.pop(topic, None)
                state.counters["topic_resets"] += 1
                republish = True
            if now is not None:
                state.topic_ids[topic] = now
        claims = group.claims(current)
        consumer = session.consumer
        unclaimed = []
        for tp in sorted(partitions):
            offset = claims.get(tp.topic, {}).get(tp.partition)
            if offset is None:
                consumer.seek_to_beginning(tp)
                committed = session.committed(tp)
                if isinstance(committed, int) and committed > 0:
                    unclaimed.append(f"{tp.topic}[{tp.partition}] ({committed:,d})")
            else:
                state.offsets.setdefault(tp.topic, {})[tp.partition] = offset
                consumer.seek(tp, offset)
        # What the workers before published of what is learned again: not sent twice; a crash
        # before it is all learned again reads it again.
        ends, resume = group.claimed_output_ends(claims, partitions, current)
        session.read_published(ends, partitions, resume)
        if session.published:
            state.output_ends = ends
        if partitions:
            consumer.resume(*partitions)
        session.progress.restoring = False
        session.progress.assigned_once = True
        session.progress.last_activity = time.monotonic()
        log.info("worker %s assigned %s; resuming from %s; merged model of %d samples (%d "
                 "peers folded in)", group.worker,
                 sorted((tp.topic, tp.partition) for tp in partitions),
                 {f"{tp.topic}[{tp.partition}]": claims.get(tp.topic, {}).get(tp.partition, 0)
                  for tp in sorted(partitions)}, state.model.n_learned, folded,
                 extra=session.log_fields())
        if unclaimed:
            # The claims decide where a worker resumes, never the committed offsets: said, as
            # moving a service's consumer group to workers learns its stream again.
            log.warning("no snapshot of this group claims %s, where the consumer group has "
                        "committed offsets (in parentheses): consumed by a service without "
                        "--sync-every, by a worker killed before its first snapshot, or the "
                        "group's snapshots are gone. A worker resumes at its group's claims "
                        "only: these partitions are learned again from their beginning, and "
                        "their outputs may be published again", ", ".join(unclaimed),
                        extra=session.log_fields())
        if republish and session.sink.flush(timeout=session.config.shutdown_timeout,
                                            should_stop=lambda: session.waiting(False)):
            self.sync(timeout=session.config.shutdown_timeout)
