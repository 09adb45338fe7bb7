"""Checkpoints of a service that owns its model alone: one local file, reloaded at assignment.

The checkpoint file (`river_advsvm.streams.state`) is the one source of truth: the model, the next
offset of every partition and the counters, replaced atomically. On every partition assignment
(start-up included) the service reloads that file and seeks each partition to its offset, so
whatever was learned after the last checkpoint is read and learned again, and nothing twice. Kafka's
committed offsets are written after each checkpoint and after each reload. They decide where a
partition the checkpoint does not know resumes (one another service of the group handed over, or
every partition of a new checkpoint directory; without a committed offset, its beginning), and where
one it knows resumes when they are past the checkpoint's offset: another service of the group
learned that partition since (it was handed back), and its messages are not learned or published
again. The log says where each such partition resumes.

If a topic comes back with a new topic id (a broker restarted without its data), the
checkpointed offsets belong to a log that is gone: that topic restarts at its beginning, a
`topic_resets` is counted, and a checkpoint is written at once (its `consumed` counter tells an
upstream that replays a one-partition topic where to resume; the warning names each
partition's offset).

"""

from __future__ import annotations

import logging
import time

from river_advsvm.checkpoint import CheckpointError
from river_advsvm.streams import faults, output_log
from river_advsvm.streams import state as state_io
from river_advsvm.streams.session import Session

__all__ = ["Standalone"]

log = logging.getLogger(__name__)


class Standalone:
    """The checkpoint strategy of a service alone on its model (no `sync_every`)."""

    def __init__(self, session: Session):
        self.session = session
        # Partitions assigned without a checkpointed offset, whose resume point is not logged
        # yet; and those with one, not compared with the group's committed offset yet.
        self._handed_over: list = []
        self._handed_back: list = []

    def check_model(self) -> None:
        """A service alone serves any model."""

    def start(self) -> bool:
        return True

    def close(self) -> None:
        pass

    def _log_handed_over(self) -> None:
        """Say where the partitions the checkpoint held no offset for at their assignment
        resume: at the group's committed offset (another service of the group handed them
        over, or this checkpoint directory is new), or at their beginning without one. A new
        checkpoint that starts past messages the group read before is a warning: this model
        never learns them."""
        partitions, self._handed_over = self._handed_over, []
        session = self.session
        committed = {tp: session.committed(tp) for tp in partitions}

        def at(offset) -> str:
            if offset is None:
                return "its beginning"
            if offset == "unknown":
                return "the group's committed offset, or its beginning without one"
            return f"the group's committed offset {offset}"

        where = ", ".join(f"{tp.topic}[{tp.partition}] at {at(committed[tp])}"
                          for tp in partitions)
        skipped = any(isinstance(offset, int) and offset > 0 for offset in committed.values())
        if skipped and not session.state.counters["learned"]:
            log.warning("the checkpoint holds no offset for %s: resuming %s; this model does not "
                        "learn the messages before them (a new --group reads every partition "
                        "from its beginning)", [f"{tp.topic}[{tp.partition}]" for tp in partitions],
                        where, extra=session.log_fields())
        else:
            log.info("not in the checkpoint: resuming %s", where, extra=session.log_fields())

    def _resume_past_the_group(self) -> None:
        """Resume the partitions assigned with a checkpointed offset at the group's committed
        offset where that is further: another service of the group learned and published
        their messages since this checkpoint (the partition went there and came back). Behind
        it (a kill between a checkpoint and its commit), the checkpoint's offset is committed.

        The records of this poll before the new offset are dropped as learned (the loop keeps
        a partition's records from its known offset on), and the partition is sought there."""
        partitions, self._handed_back = self._handed_back, []
        session = self.session
        offsets = session.state.offsets
        ahead = []
        for tp in partitions:
            committed = session.committed(tp)  # ("unknown": the checkpoint's offset holds)
            own = offsets.get(tp.topic, {}).get(tp.partition)
            if isinstance(committed, int) and own is not None and committed > own:
                offsets[tp.topic][tp.partition] = committed
                session.consumer.seek(tp, committed)
                ahead.append(f"{tp.topic}[{tp.partition}] at {committed} (checkpoint: {own})")
        if ahead:
            log.info("the group's committed offsets are past the checkpoint's: another service "
                     "of the group learned and published those messages; resuming %s",
                     ", ".join(ahead), extra=session.log_fields())
        # The group's offsets as the checkpoint has them: a kill between a checkpoint and its
        # commit left them behind, and a run with nothing new to learn would not commit.
        session.commit_offsets()

    # -- saving ---------------------------------------------------------------------------------

    def save(self) -> None:
        session = self.session
        session.learner.save_monitor()
        session.note_output_ends()
        state_io.save(session.config.checkpoint_dir, session.state)
        faults.reach("checkpoint.written")
        progress = session.progress
        progress.checkpointed()
        counters = session.state.counters
        log.info(
            "checkpoint %d: %d learned, %d predicted, %d dead letters, offsets %s (%.0f msg/s)",
            counters["checkpoints"], counters["learned"], counters["predicted"],
            counters["dead_letters"], session.state.offsets, progress.throughput(),
            extra=session.log_fields(),
        )

    def checkpoint(self) -> bool:
        """Flush outputs, then write the checkpoint; False if stopped before outputs were out."""
        session = self.session
        if not session.sink.flush(should_stop=session.waiting):
            return False
        faults.reach("outputs.flushed")
        self.save()
        session.commit_offsets()
        return True

    def final(self) -> int:
        """The checkpoint at shutdown: 0, or 1 if the outputs could not be delivered."""
        session = self.session
        if not session.progress.since_checkpoint:
            return 0
        timeout = session.config.shutdown_timeout
        if session.sink.flush(timeout=timeout, should_stop=lambda: session.waiting(False)):
            self.save()
            session.commit_offsets()
            return 0
        return session.no_final_checkpoint(timeout)

    # -- rebalances -----------------------------------------------------------------------------

    def on_revoked(self, partitions) -> None:
        # The main thread is blocked in poll() between two batches: once the outputs are out,
        # the in-memory state can be checkpointed as it is, so no work is lost. The flush blocks
        # the consumer's heartbeats: bounded well below the session timeout.
        session = self.session
        since = session.progress.since_checkpoint
        # While draining (the consumer leaves its group at shutdown), the final checkpoint
        # already flushed what it could within the shutdown timeout.
        if since and session.drain_deadline is None:
            if session.sink.flush(timeout=max(1.0, session.config.session_timeout_ms / 2000),
                                  should_stop=lambda: session.waiting(False)):
                self.save()
            else:
                log.warning("outputs not delivered before the rebalance; %d messages will be "
                            "learned again", since)
        session.assignment -= set(partitions)
        session.published.forget(partitions)

    def on_lost(self, partitions) -> None:
        self.on_revoked(partitions)

    def on_assigned(self, partitions) -> None:
        self.restore(set(partitions))

    def halted(self) -> bool:
        """Never: a single service keeps its partitions until a rebalance revokes them."""
        return False

    def after_poll(self) -> bool:
        """Called after every poll; True if the records it returned must be dropped (they
        were read at positions of a topic's previous incarnation)."""
        session = self.session
        if self._handed_over:
            self._log_handed_over()
        if self._handed_back:
            self._resume_past_the_group()
        session.watch_brokers()
        session.resume_where_logs_end()
        session.measure_lag()
        if not session.topic_recreated():
            return False
        if session.progress.since_checkpoint and session.sink.flush(
                timeout=session.config.shutdown_timeout,
                should_stop=lambda: session.waiting(False)):
            self.save()
        self.restore(set(session.assignment))
        return True

    def restore(self, partitions: set) -> None:
        """Reload the checkpoint and seek each partition to its checkpointed offset."""
        session = self.session
        directory = session.config.checkpoint_dir
        loaded = state_io.load(directory, session.limits)
        if loaded is None and session.state.counters["checkpoints"]:
            # The state in hand was written there (by this run or the one it resumed): deleted
            # or moved since, a new model would silently replace everything learned.
            raise CheckpointError(f"{state_io.checkpoint_path(directory)}: the checkpoint this "
                                  f"service wrote or read is gone; put it back, or start the "
                                  f"service on an empty directory to learn anew")
        session.state = loaded if loaded is not None else session.new_state()
        session.progress.since_checkpoint = 0
        saved = session.state
        current = session.topic_ids(partitions)
        recreated = {
            topic for topic, now in current.items()
            if now is not None and saved.topic_ids.get(topic) not in (None, now)
        }
        # Topics the checkpoint read as they are now: a partition of one that it holds no
        # offset for is learned from its beginning, and what this service published of it
        # after the checkpoint is read back (from offset 0; not for another incarnation,
        # whose outputs name the offsets of the new messages).
        known = {topic for topic, now in current.items()
                 if output_log.read_as_now(saved.topic_ids, saved.offsets, topic, now)}
        resume = output_log.resume_offsets(saved.offsets, partitions, known)
        for topic in sorted(recreated):
            log.warning(
                "topic %r was recreated (id %s, checkpoint has %s): its checkpointed offsets "
                "%s belong to a log the broker no longer has; starting it from its beginning",
                topic, current[topic], saved.topic_ids[topic], saved.offsets.get(topic),
            )
            saved.offsets.pop(topic, None)
            saved.counters["topic_resets"] += 1
        for topic, now in current.items():
            if now is not None:
                saved.topic_ids[topic] = now
        consumer = session.consumer
        # What the run before this one published of what is learned again: not sent twice
        # (from older ends for a partition that was elsewhere when the ends moved on).
        held = [saved.held_output_ends.get(tp.topic, {}).get(tp.partition) for tp in partitions]
        ends = output_log.lowest_ends(saved.output_ends, *[h for h in held if h is not None])
        session.read_published(ends, partitions, resume, saved.output_ids)
        for tp in sorted(partitions):
            offset = saved.offsets.get(tp.topic, {}).get(tp.partition)
            if tp.topic in recreated:
                consumer.seek_to_beginning(tp)
            elif offset is not None:
                consumer.seek(tp, offset)
            # else: the group's committed offset, or the earliest one (auto_offset_reset)
        session.assignment = set(partitions)
        session.progress.assigned_once = True
        session.progress.last_activity = time.monotonic()
        log.info("assigned %s; resuming from the checkpoint's offsets %s",
                 sorted((tp.topic, tp.partition) for tp in partitions), saved.offsets or "(none)",
                 extra=session.log_fields())
        # (Said after the poll: the group's offsets cannot be asked for in this callback.)
        self._handed_over = sorted(
            tp for tp in partitions if tp.topic not in recreated
            and saved.offsets.get(tp.topic, {}).get(tp.partition) is None)
        # (Compared after the poll, which may not ask for them here; committed then.)
        self._handed_back = sorted(
            tp for tp in partitions if tp.topic not in recreated
            and saved.offsets.get(tp.topic, {}).get(tp.partition) is not None)
        if recreated:
            self.save()  # the resync point, for an upstream that replays what the broker lost
