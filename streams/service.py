"""`advsvm serve`: test-then-train on a Kafka topic, exactly once across crashes.

The loop, for the records of each poll (in offset order within a partition), in batches of
at most `checkpoint_every` messages and `BATCH_BYTES` bytes (`river_advsvm.streams.learner`):

1. validate each message (`river_advsvm.streams.kafka.decode`, `check_against`); an invalid one
   becomes a dead letter and the model never sees it;
2. predict each valid message, and publish the prediction (labelled or not);
3. if it has a label: show it to the monitor (alerts are published), then learn it. The model
   learns a batch in one call, with exactly the results of one message at a time.

Exactly-once learning. The checkpoint (`river_advsvm.streams.state`) is the one source of truth: the
model, the next offset of every partition and the counters, in one file replaced atomically every
`checkpoint_every` messages or `checkpoint_interval` seconds, and reloaded at every partition
assignment (`river_advsvm.streams.standalone`): if the process dies (SIGKILL, power cut) at any
point, the model state after restart and catch-up is the one an uninterrupted run reaches.

Outputs (predictions, alerts, dead letters) are exactly-once: they are flushed with acks=all
before the checkpoint that covers their inputs is written (and before a rebalance hands the
partitions over), never one by one, so a crash never loses one; and the messages learned again
after a crash do not send again the outputs the crashed run delivered
(`river_advsvm.streams.output_log`).

Broker outages: the consumer reconnects by itself and the output sink retries with backoff;
nothing is learned while the broker is away, and nothing crashes. A topic that comes back with
a new topic id restarts at its beginning (see `river_advsvm.streams.standalone`).

Signals and exit statuses. SIGTERM and SIGINT (Ctrl-C) drain: the batch in hand is finished,
outputs are flushed, a final checkpoint is written and the consumer leaves its group; a second
SIGINT stops at once (the last checkpoint stays valid). `run` returns, and `advsvm serve` exits
with:

- 0: stopped by SIGTERM or after `exit_when_idle`, final checkpoint written;
- 1: stopped, but the outputs could not be delivered within `shutdown_timeout`, so there is no
  final checkpoint (or the service met an unexpected error); the last checkpoint stays valid
  and what came after it is learned again at the next start;
- 2: a usage error: bad options, an unreadable checkpoint or one beyond the operator's limits
  (`river_advsvm.streams.state.Limits`), a checkpoint directory in use, a checkpoint deleted or
  moved while the service ran (found at the next assignment), a group's snapshot topic of more
  than one partition, an input batch compressed with a codec whose library is not installed;
- 3: no broker answered within `connect_timeout` at start-up (`BrokerUnreachable`), or the
  consumer group's rebalance did not end within the members' rebalance timeout
  (`max_poll_interval_ms`) and a session timeout: a restart joins the group anew;
- 4: at start-up the cluster refused the connection settings: TLS or SASL
  (`SettingsRefused`);
- 5: a fault of the machine (disk full, I/O error, out of memory): the last checkpoint is
  intact (`river_advsvm.streams.lifecycle.exit_status`);
- 130: stopped by SIGINT (after the drain, as for SIGTERM).

A message never stops the service: whatever goes wrong with one becomes its dead letter (out of
memory is a fault of the machine, status 5, not the message's).

Several workers, one model (`sync_every`): the service is then one worker of its consumer group, and
its checkpoint is published to the group's snapshot topic, from which partitions are handed over
between workers and peers' models are averaged in; see `river_advsvm.streams.worker` and
`river_advsvm.streams.group`.

BLAS runs on one thread in the service (`blas_threads`): a one-sample matrix-vector product
gains nothing from more, and on a shared machine extra BLAS threads only contend.

Examples
--------

>>> from river_advsvm import AdvKernelSVM
>>> from river_advsvm.streams.config import ServiceConfig
>>> from river_advsvm.streams.service import Service
>>> config = ServiceConfig(bootstrap_servers="127.0.0.1:9092", topic="digits", group="svm",
...                        checkpoint_dir="/tmp/svm", predictions_topic="digits-predictions")
>>> service = Service(config, model_factory=lambda: AdvKernelSVM(epsilon=0.1, seed=0))
>>> service.run()  # doctest: +SKIP
0

"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import typing

from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError, UnsupportedCodecError

from river_advsvm.streams import faults, lifecycle
from river_advsvm.streams import state as state_io
from river_advsvm.streams.config import ServiceConfig
from river_advsvm.streams.lifecycle import BrokerUnreachable, SettingsRefused
from river_advsvm.streams.learner import Learner, Outcome
from river_advsvm.streams.outputs import DEAD_LETTER_BYTES, Outputs
from river_advsvm.streams.session import Session
from river_advsvm.streams.sink import OutputSink
from river_advsvm.streams.standalone import Standalone
from river_advsvm.streams.worker import GroupWorker

__all__ = ["BrokerUnreachable", "Learner", "Outcome", "Service", "ServiceConfig",
           "SettingsRefused"]

log = logging.getLogger(__name__)

#: A batch holds at most this many bytes of messages, whatever a poll returned: decoding a batch
#: at once must not multiply a poll's worth of large messages in memory.
BATCH_BYTES = 4 * 2**20


def _check_width(width: int | None, model) -> None:
    """`ValueError` if arrays of `width` hold more inputs than the model learns: every array
    message would be a dead letter (`too_many_features`)."""
    most = getattr(model, "max_features", None)
    if width is not None and most is not None and width > most:
        raise ValueError(f"--features {width} is more inputs than the model learns "
                         f"(--max-features {most}): every array message would be a dead letter")


def _join_in_flight(consumer) -> bool:
    """Whether `consumer` waits for its group's answer to a join (kafka-python keeps the task
    of a join under way, JoinGroup then SyncGroup, on its coordinator)."""
    task = getattr(getattr(consumer, "_coordinator", None), "_join_task", None)
    return task is not None and not task.is_done


class _Rebalance(ConsumerRebalanceListener):
    """Forwards kafka-python's rebalance callbacks (run while the main thread is in `poll`) to
    the checkpoint strategy; an exception is kept and re-raised by the loop."""

    def __init__(self, service: Service):
        self.service = service

    def on_partitions_revoked(self, revoked):
        self.service.session.progress.rebalancing()
        self.service._guarded(self.service.checkpoints.on_revoked, revoked)

    def on_partitions_lost(self, lost):
        self.service.session.progress.rebalancing()
        self.service._guarded(self.service.checkpoints.on_lost, lost)

    def on_partitions_assigned(self, assigned):
        self.service.session.progress.rebalanced()
        self.service._guarded(self.service.checkpoints.on_assigned, assigned)


class Service:
    """The Kafka test-then-train service; `run` until SIGTERM or idle.

    Parameters
    ----------
    config
        A `ServiceConfig`.
    model_factory
        Makes the model when there is no checkpoint (an `AdvKernelSVM` or an `AdvLinearSVM`:
        `ValueError` otherwise); a checkpoint always wins over it.
    monitor
        Optional object with `update(x, y) -> list of alert dataclasses`.
    monitor_attack
        Optional: the monitor's attack as a function of the model served (see `Learner`).

    Attributes
    ----------
    session
        What the loop shares with the checkpoints: `session.progress` (messages processed,
        rate, last poll) and `session.state.counters` are what an observer reads.

    """

    def __init__(self, config: ServiceConfig, model_factory: typing.Callable[[], typing.Any],
                 monitor=None, monitor_attack=None):
        self.config = config
        self.model_factory = model_factory
        learner = Learner(self._new_state(), config.max_message_bytes, monitor, monitor_attack)
        state_io.check_model(learner.state.model)
        _check_width(config.width, learner.state.model)
        self.session = Session(config, learner, self._new_state)
        self.checkpoints = GroupWorker(self.session) if config.grouped else Standalone(
            self.session)
        self._outputs: Outputs | None = None
        self._fatal: BaseException | None = None
        self._stalled = False  # stopped by a rebalance that did not end
        self._rebalance_warned = False

    @property
    def state(self) -> state_io.ServiceState:
        return self.session.state

    @property
    def stopping(self) -> threading.Event:
        return self.session.stopping

    def _new_state(self) -> state_io.ServiceState:
        labels = list(self.config.labels) if self.config.labels is not None else None
        return state_io.ServiceState(model=self.model_factory(), width=self.config.width,
                                     labels=labels)

    def throughput(self) -> float:
        """Messages per second in this run (see
        `river_advsvm.streams.session.Progress.throughput`)."""
        return self.session.progress.throughput()

    def checkpoint(self) -> bool:
        """Flush outputs, then write the checkpoint (in a group: sync); False if stopped before
        the outputs were out."""
        started = time.perf_counter()
        try:
            return self.checkpoints.checkpoint()
        finally:
            self.session.progress.seconds["checkpoint"] += time.perf_counter() - started

    def stop(self) -> None:
        """Ask the loop to drain and stop (what SIGTERM does)."""
        self.stopping.set()

    def _guarded(self, handler, partitions) -> None:
        try:
            handler(partitions)
        except BaseException as error:  # noqa: BLE001 - re-raised by the main loop
            self._fatal = error

    # -- running --------------------------------------------------------------------------------

    def run(self) -> int:
        """Serve until stopped; returns the exit status (see the module docs: 0 clean, 1 no
        final checkpoint, 130 after SIGINT).

        Raises `CheckpointError` if the checkpoint directory holds an unreadable checkpoint
        (the service never silently starts over), `ValueError` if another service holds the
        directory, `BrokerUnreachable` if no broker answered within `connect_timeout`, and
        `SettingsRefused` if the cluster refused the connection settings.
        """
        config = self.config
        try:
            os.makedirs(config.checkpoint_dir, exist_ok=True)
        except FileExistsError:  # a file of that name: `lock_directory` says so
            pass
        lock = lifecycle.lock_directory(config.checkpoint_dir)
        try:
            with lifecycle.blas_threads(config.blas_threads):
                return self._run()
        finally:
            os.close(lock)  # the kernel also drops the lock when the process dies

    def _run(self) -> int:
        config, session = self.config, self.session
        for path in state_io.remove_temporaries(config.checkpoint_dir):
            log.info("removed %s, left by an interrupted checkpoint write", path)
        loaded = state_io.load(config.checkpoint_dir, session.limits)  # fail fast, before Kafka
        # Found at the first checkpoint, it stopped the service after it had learned and
        # published what it then learned again at every restart.
        state_io.check_writable(config.checkpoint_dir)
        if loaded is not None:
            made = session.state.model  # (the model the options made, which the loaded replaces)
            session.state = loaded
            log.info("restored the checkpoint in %s (%d learned); it wins over model options",
                     config.checkpoint_dir, loaded.counters["learned"])
            for note in state_io.overridden(loaded, config.labels, config.width,
                                              config.topic, made):
                log.warning("%s", note)
            if loaded.group is not None and config.sync_every is None:
                log.warning("the checkpoint is group worker %s's and this service runs alone "
                            "(no --sync-every): the partitions that worker did not read start "
                            "from the consumer group's committed offsets; where it has none "
                            "(another --group), from their beginning, and what the worker's "
                            "peers learned there, in the model already, is learned again",
                            loaded.group["worker"])
        # Before Kafka too: refused after, it made the output topics first, and while the
        # broker was away it stopped with the status of a fault a restart mends.
        self.checkpoints.check_model()
        signals = lifecycle.Signals(self.stop)
        # Room for the largest dead letter: its value and key in base64 (4/3 of the cap each),
        # the key again as its own, and the envelope's few fields.
        session.sink = OutputSink(lambda: session.clients.producer(
            max_request_size=max(4 * 2**20, 4 * DEAD_LETTER_BYTES + 2**16)))
        self._outputs = Outputs(config, session.sink, lambda: session.state.counters,
                                lambda: session.published)
        try:
            if not lifecycle.reach_broker(session.clients, session.output_topics,
                                          config.connect_timeout, self.stopping,
                                          heartbeat=session.progress.heartbeat):
                return signals.status(0)
            if not self.checkpoints.start():
                return signals.status(0)
            session.consumer = self._connect()
            if session.consumer is None:
                return signals.status(0)
            session.consumer.subscribe([config.topic], listener=_Rebalance(self))
            self._loop()
            status = self._shutdown()
            if self._stalled and status == 0:
                status = lifecycle.NO_BROKER  # (a restart joins the group anew)
            return signals.status(status)
        finally:
            try:
                faults.reach("service.closing")
                self.checkpoints.close()
                session.close_clients(1.0)
                # Stopped at once (a second Ctrl-C) or by an error: the producer is closed
                # here; kafka-python's exit handler would flush what a frozen broker never
                # acknowledged, time out, and print its traceback after the service's line.
                session.sink.close(timeout=0)
            finally:
                # Last: a second SIGTERM while the clients close (up to a second) killed the
                # process by the default handler, status 143, after a clean stop.
                signals.restore()

    def _connect(self):
        config, session = self.config, self.session
        return session.retry_while_away(lambda: session.clients.consumer(
            config.group, session_timeout_ms=config.session_timeout_ms,
            max_poll_records=config.max_poll_records))

    def _loop(self) -> None:
        config, session = self.config, self.session
        progress = session.progress
        backoff = 0.1
        while not self.stopping.is_set():
            try:
                started = time.perf_counter()
                records = session.consumer.poll(timeout_ms=config.poll_timeout_ms)
                if not records and _join_in_flight(session.consumer):
                    faults.reach("group.joining")
                if records and progress.first_message is not None:
                    # (The poll of the first records also waited for the group: not fetching.)
                    progress.seconds["fetch"] += time.perf_counter() - started
                backoff = 0.1
            except UnsupportedCodecError as error:
                # A poll after this one never returns (kafka-python loops over the batch it
                # cannot decompress): stop, naming what to install.
                raise ValueError(f"the input topic holds batches compressed with a codec whose "
                                 f"library is not installed ({error}): install the service's "
                                 "dependencies with the kafka extra (pip install "
                                 "'river-advsvm[kafka]': lz4, python-snappy, zstandard)") \
                    from None
            except KafkaError as error:
                if self._fatal is None:
                    log.warning("poll failed (%r); retrying in %.1fs", error, backoff)
                    progress.heartbeat()
                    self.stopping.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                records = {}
            if self._fatal is not None:
                raise self._fatal
            if self.checkpoints.after_poll():
                # (A group worker dropped by its group drops what it polls until it is
                # assigned again: a rebalance that never comes stops it here too.)
                if self._rebalance_stalled(time.monotonic()):
                    break
                continue
            progress.polled(sum(len(batch) for batch in records.values()))
            fresh = []
            for tp in sorted(records):
                known = self.state.offsets.get(tp.topic, {}).get(tp.partition)
                # A record before the known offset was learned already (a fetch raced a seek).
                fresh += [r for r in records[tp] if known is None or r.offset >= known]
            self._process(fresh)
            now = time.monotonic()
            session.warn_if_topic_missing(now)
            if records:
                # Idle means no messages, not slow ones: the clock restarts after the work.
                progress.worked()
            if (progress.since_checkpoint
                    and now - progress.last_checkpoint >= config.checkpoint_interval):
                self.checkpoint()
            if (config.exit_when_idle is not None and progress.assigned_once
                    and now - progress.last_activity >= config.exit_when_idle
                    and self._caught_up()):
                log.info("no message for %.1fs: stopping", config.exit_when_idle)
                break
            if self._rebalance_stalled(now):
                break

    def _rebalance_stalled(self, now: float) -> bool:
        """True once the group's rebalance under way has lasted longer than any a working
        group coordinator lets one last: the members' rebalance timeout (the consumer's
        `max_poll_interval_ms`) and a session timeout to evict a member that left. The
        service then stops, with the exit status of a broker that does not serve it (3: a
        restart joins the group anew). A warning comes first, from twice the session timeout."""
        since = self.session.progress.rebalancing_since
        if since is None:
            self._rebalance_warned = False
            return False
        consumer = self.session.consumer
        limit = (consumer.config["max_poll_interval_ms"] + self.config.session_timeout_ms) / 1000
        waited = now - since
        if waited >= limit:
            log.error("the consumer group's rebalance has not ended in %.0fs (no partition is "
                      "assigned to this worker meanwhile): the broker's group coordinator does "
                      "not complete it; stopping, a restart joins the group anew", waited)
            self._stalled = True
            return True
        if waited >= 2 * self.config.session_timeout_ms / 1000 and not self._rebalance_warned:
            log.warning("the consumer group has been rebalancing for %.0fs: no partition is "
                        "assigned to this worker until it ends (the service stops after %.0fs "
                        "of it)", waited, limit)
            self._rebalance_warned = True
        return False

    def _caught_up(self) -> bool:
        """Every assigned partition fetched at least once and none behind its high watermark
        (the lag measured after the last poll): a process frozen for longer than
        `exit_when_idle` (SIGSTOP, a long pause) must not stop with messages waiting. With no
        partition, not before twice the session timeout: a member killed without leaving
        holds its partitions until the group's session timeout evicts it, and the rebalance
        that follows may bring them here."""
        progress = self.session.progress
        if progress.rebalancing_since is not None:
            return False  # (the rebalance may bring partitions here)
        if self.session.past_log_end():
            return False  # (it resumes from the log's end, then learns what arrives there)
        if not self.session.assignment:
            unassigned = time.monotonic() - progress.last_activity
            return unassigned >= 2 * self.config.session_timeout_ms / 1000
        lag = progress.lag
        assigned = {(tp.topic, tp.partition) for tp in self.session.assignment}
        return assigned <= set(lag) and not any(lag.values())

    def _process(self, records: list) -> None:
        """Test-then-train the records of a poll in batches, checkpointing every
        `checkpoint_every` messages; stops between batches when asked to, or once the group has
        dropped this worker (what it would learn is rolled back)."""
        config, session = self.config, self.session
        progress = session.progress
        start = 0
        while (start < len(records) and not self.stopping.is_set()
               and not self.checkpoints.halted()):
            room = max(1, config.checkpoint_every - progress.since_checkpoint)
            end, size = start, 0
            while end < len(records) and end - start < room and (
                    end == start or size + len(records[end].value or b"") <= BATCH_BYTES):
                size += len(records[end].value or b"")
                end += 1
            batch, start = records[start:end], end
            # Labelled samples taken (a warm-up holds some back before learning them); in a
            # group, the merged model's samples.
            model = self.state.model
            n_learned = model.n_learned + getattr(model, "n_held", 0)
            outcomes = session.learner.process_many([record.value for record in batch])
            faults.reach("batch.decided")
            started = time.perf_counter()
            offsets = self.state.offsets
            for record, outcome in zip(batch, outcomes):
                n_learned += outcome.error is None and outcome.sample.labelled
                self._outputs.publish(outcome, record, n_learned)
                offsets.setdefault(record.topic, {})[record.partition] = record.offset + 1
            progress.seconds["publish"] += time.perf_counter() - started
            progress.record(len(batch))
            faults.reach("batch.learned", unpublished=progress.since_checkpoint,
                         learned=self.state.counters["learned"], left=len(records) - start)
            if progress.since_checkpoint >= config.checkpoint_every:
                self.checkpoint()

    def _shutdown(self) -> int:
        session = self.session
        # The final checkpoint, leaving the group and closing the producer share one budget:
        # a frozen broker must not hold the stop for the clients' own (longer) timeouts.
        timeout = self.config.shutdown_timeout
        session.drain_deadline = time.monotonic() + timeout
        # Stopped while its JoinGroup (or SyncGroup) waits for the group: kafka-python would
        # leave the group, then answer the join as its leader for the member that left, and
        # the bundled broker keeps that member for good: every later member of the group waits
        # for it. The join ends first (its records are not learned: nothing is committed).
        while _join_in_flight(session.consumer) and session.drain_left(timeout) > 0:
            try:
                session.consumer.poll(timeout_ms=100, max_records=1)
            except KafkaError as error:  # the broker gone: nothing left to wait for
                log.warning("the group's join did not end (%r)", error)
                break
        if session.sink.pending:
            log.info("stopping: %d outputs to deliver first (within %gs)", session.sink.pending,
                     timeout)
        status = self.checkpoints.final()
        try:
            session.consumer.close(autocommit=False,
                                   timeout_ms=int(1000 * session.drain_left(timeout)))
        except Exception as error:  # noqa: BLE001 - the broker may be gone
            log.warning("consumer close failed: %r", error)
        try:
            session.sink.close(timeout=session.drain_left(5.0))
        except Exception as error:  # noqa: BLE001
            log.warning("producer close failed: %r", error)
        session.close_clients(session.drain_left(5.0))
        progress = session.progress
        progress.seconds.update(session.learner.seconds)
        log.info("stopped after %.1fs: %d messages processed in this run (%.0f msg/s)",
                 time.monotonic() - progress.started, progress.processed, self.throughput())
        log.info("time spent (seconds): %s", json.dumps(
            {k: round(v, 3) for k, v in progress.seconds.items()}))
        return status
