"""What one run of the service shares between its loop and its checkpoints: `Session`.

A `Session` holds the consumer, the output sink, the learner (and through it the state that
checkpoints save), the partitions assigned now, and `Progress`, the run's observable progress
(messages processed, rate, time of the last poll, messages since the last checkpoint, consumer lag,
whether the partitions are positioned). The loop (`river_advsvm.streams.service`) and the checkpoint
strategies (`river_advsvm.streams.standalone`, `river_advsvm.streams.worker`) work on it; an
observer (logs, metrics, a health check) reads it with `Session.reading`
(`river_advsvm.streams.metrics.Reading`) from any thread, without touching the loop.

Liveness: `Progress.last_poll` is when the loop last polled Kafka, or last waited for the
broker on purpose (a retry during an outage, a flush waiting for acknowledgements: see
`Session.waiting`): a loop that waits and retries is alive; one stuck elsewhere is not.

"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import typing

from kafka import TopicPartition
from kafka.errors import AuthorizationError, KafkaError
from kafka.structs import OffsetAndMetadata

from river_advsvm.streams import clients as clients_io
from river_advsvm.streams import logs, metrics, output_log
from river_advsvm.streams import state as state_io
from river_advsvm.streams.config import ServiceConfig

__all__ = ["MISSING_TOPIC_EVERY", "Progress", "Session"]

log = logging.getLogger(__name__)

#: While the input topic does not exist, the warning that says so comes again this often
#: (seconds).
MISSING_TOPIC_EVERY = 60.0
#: Seconds without a connection to any broker before the service says so (and is not ready):
#: longer than a broker restart's own reconnection.
BROKERS_AWAY_WARNING = 10.0
#: Seconds a partition's log must keep ending before the offset the service resumes it from
#: before it resumes from that end: after a leader change the new leader may briefly report
#: an end (its high watermark) short of one the old leader had reported.
LOG_END_CONFIRM = 5.0


@dataclasses.dataclass
class Progress:
    """How far this run got. Monotonic clock times unless named `*_wall` (epoch seconds)."""

    started: float = dataclasses.field(default_factory=time.monotonic)
    processed: int = 0  # records processed in this run
    first_message: float | None = None  # when the first poll with records returned
    busy: float = 0.0  # seconds from each poll with records to the end of their processing
    _busy_since: float | None = None
    last_message: float | None = None  # when the processing of the last records ended
    first_wall: float | None = None
    last_wall: float | None = None
    last_poll: float | None = None  # when the latest poll returned, or a retry waited (liveness)
    polls: int = 0
    since_checkpoint: int = 0  # records processed since the state was last saved
    last_checkpoint: float = dataclasses.field(default_factory=time.monotonic)
    last_activity: float = dataclasses.field(default_factory=time.monotonic)
    assigned_once: bool = False
    restoring: bool = False  # partitions assigned, not positioned yet (a group worker)
    # When the consumer group's rebalance under way began (its partitions revoked, none
    # assigned since), or None.
    rebalancing_since: float | None = None
    # (topic, partition) -> messages behind the high watermark, as of the last poll; replaced
    # whole, never updated in place (an observer reads it from another thread).
    lag: dict = dataclasses.field(default_factory=dict)
    # Since when the consumer holds no connection to any broker (None: it holds one), and
    # whether that was said; when it was last looked at.
    brokers_away_since: float | None = None
    brokers_away_said: bool = False
    brokers_checked: float = 0.0
    group_folds: int | None = None  # peer snapshots averaged in, in this run (a group worker)
    group_peers: int | None = None  # peers whose snapshots this worker has seen
    # Where the time went, in seconds: polls that returned records ("fetch"), decoding and
    # validating, the model (and monitor), handing outputs to the producer ("publish"),
    # checkpoints (flushing outputs included).
    seconds: dict = dataclasses.field(default_factory=lambda: dict.fromkeys(
        ("fetch", "decode", "model", "publish", "checkpoint"), 0.0))

    def polled(self, count: int) -> None:
        """A poll returned `count` records."""
        now = time.monotonic()
        self.last_poll = now
        self.polls += 1
        if count:
            self.last_activity = now
            self._busy_since = now
            if self.first_message is None:
                self.first_message = now

    def rebalancing(self) -> None:
        """The group began a rebalance (kafka-python revokes every partition first)."""
        if self.rebalancing_since is None:
            self.rebalancing_since = time.monotonic()

    def rebalanced(self) -> None:
        """The group's rebalance ended: this member has its partitions (perhaps none)."""
        self.rebalancing_since = None

    def heartbeat(self) -> None:
        """The loop is waiting for the broker on purpose (a retry): alive, as after a poll."""
        self.last_poll = time.monotonic()

    def record(self, count: int = 1) -> None:
        """`count` more records processed (their outputs are in the sink)."""
        self.since_checkpoint += count
        self.processed += count
        self.last_wall = time.time()
        if self.first_wall is None:
            self.first_wall = self.last_wall

    def worked(self) -> None:
        """The records of a poll are processed: idle time restarts from now."""
        self.last_activity = self.last_message = now = time.monotonic()
        if self._busy_since is not None:
            self.busy += now - self._busy_since
            self._busy_since = None

    def checkpointed(self) -> None:
        self.since_checkpoint = 0
        self.last_checkpoint = time.monotonic()

    def throughput(self) -> float:
        """Messages per second in this run while busy: over the time from each poll that
        returned messages to the end of their processing (polls that waited for messages,
        idle time, excluded: the rate says what the service can do, not what came in)."""
        busy = self.busy
        if self._busy_since is not None:  # (records in hand)
            busy += time.monotonic() - self._busy_since
        return self.processed / busy if busy > 0 else 0.0


class Session:
    """The shared parts of one run; see the module docs.

    Parameters
    ----------
    config
        The `ServiceConfig`.
    learner
        The `river_advsvm.streams.learner.Learner`; its `state` is what checkpoints save and
        restore.
    new_state
        Makes the state of a fresh model (no checkpoint).

    """

    def __init__(self, config: ServiceConfig, learner, new_state: typing.Callable):
        self.config = config
        self.learner = learner
        self.new_state = new_state
        # The operator's limits, from the model the options make, before any checkpoint
        # replaces it: no checkpoint or peer snapshot may lift them.
        self.limits = state_io.Limits.of(learner.state.model)
        self.stopping = threading.Event()
        self.clients = clients_io.Clients(config.bootstrap_servers, config.client_settings,
                                          security=config.security)
        self.sink = None  # a `river_advsvm.streams.sink.OutputSink`, once running
        self.consumer = None
        self.assignment: set = set()
        self.progress = Progress()
        # Monotonic time by which the drain at shutdown must be over; None while running.
        self.drain_deadline: float | None = None
        self._missing_topic_warned: float | None = None
        # Outputs an earlier run published for messages learned again now (`output_log`).
        self.published = output_log.Published()
        self._ends_reader = None  # a Kafka client reading where the output topics end
        # Partition -> (since when, the lowest end seen) while its log ends before its offset.
        self._short_logs: dict = {}
        self._output_partitions: dict = {}  # output topic -> its partitions, as last asked
        self._input_partitions: list = []  # the input topic's, as last asked
        self.output_topics = [t for t in (config.predictions_topic, config.alerts_topic,
                                          config.dead_letter_topic) if t]

    @property
    def state(self) -> state_io.ServiceState:
        return self.learner.state

    @state.setter
    def state(self, value: state_io.ServiceState) -> None:
        self.learner.state = value

    def waiting(self, stoppable: bool = True) -> bool:
        """`should_stop` of a wait for the broker (a flush): keeps liveness fresh; True once
        stopping if the wait is `stoppable` (the final flush is not)."""
        self.progress.heartbeat()
        return stoppable and self.stopping.is_set()

    def drain_left(self, at_most: float) -> float:
        """Seconds a wait for the broker may take: `at_most`, cut to what the drain at shutdown
        has left (`config.shutdown_timeout` in all)."""
        if self.drain_deadline is None:
            return at_most
        return max(0.0, min(at_most, self.drain_deadline - time.monotonic()))

    def committed(self, tp):
        """The consumer group's committed offset of `tp`: None without one, "unknown" if it
        could not be read."""
        try:
            return self.consumer.committed(tp, timeout_ms=int(1000 * self.drain_left(5.0)))
        except Exception as error:  # noqa: BLE001 - the broker's trouble, said elsewhere
            log.debug("committed offset of %s not read: %r", tp, error)
            return "unknown"

    def retry_while_away(self, attempt: typing.Callable):
        """`attempt()`'s result, calling it again while it raises `KafkaError` (the broker is
        away: a warning, liveness kept, waits doubling from 0.5 s to 10 s); None if stopped
        first."""
        backoff = 0.5
        while not self.stopping.is_set():
            try:
                return attempt()
            except KafkaError as error:
                log.warning("cannot reach %s (%r); retrying in %.1fs",
                            self.config.bootstrap_servers, error, backoff)
                self.progress.heartbeat()
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 10.0)
        return None

    def warn_if_topic_missing(self, now: float) -> None:
        """Warn, at most every `MISSING_TOPIC_EVERY` seconds of the monotonic clock `now`,
        while the group assigned this service nothing because its input topic does not exist:
        on a cluster that does not create topics on first use, a typo in the name would
        otherwise leave it waiting in silence. The topic may still be created: it waits."""
        progress = self.progress
        if not progress.assigned_once or progress.restoring or self.assignment:
            return
        last = self._missing_topic_warned
        if last is not None and now - last < MISSING_TOPIC_EVERY:
            return
        if clients_io.topic_known(self.consumer, self.config.topic) is not False:
            return
        self._missing_topic_warned = now
        log.warning("the input topic %r does not exist at %s (is the name right?): nothing to "
                    "read until it is created; waiting for it", self.config.topic,
                    self.config.bootstrap_servers)

    def no_final_checkpoint(self, timeout: float) -> int:
        """Say that the final drain failed; the exit status of a stop without a final
        checkpoint (1)."""
        log.error("outputs could not be delivered within %.0fs: no final checkpoint; the last "
                  "one stays valid and what came after it will be learned again", timeout)
        return 1

    def note_output_ends(self) -> None:
        """Put where the output topics end now into the state about to be saved (its outputs
        must be delivered). While outputs of an earlier run are still ahead, the ends the
        state has stay: a crash before them must read them again. If the broker cannot say,
        the older ends stay too (reading from them reads more, never less)."""
        timeout = self.drain_left(5.0)  # (a final checkpoint shares the drain's budget)
        if self.published or self.sink is None or self.sink.pending or not self.output_topics \
                or timeout <= 0:
            return
        try:
            # A client of its own: checkpoints are also written in rebalance callbacks, where
            # the consumer cannot block. A topic's partitions are asked for until it has some
            # (a metadata request waits for the broker without a bound of its own), and again
            # after each reading back. A topic without any yet is noted empty: all of it comes
            # after this state.
            if self._ends_reader is None:
                self._ends_reader = self.clients.reader(client_id="advsvm-outputs",
                                                        max_fetch_bytes=output_log.FETCH_BYTES)
            known = self._output_partitions
            for topic in self.output_topics:
                if not known.get(topic):
                    known[topic] = output_log.partitions_of(self._ends_reader, [topic])
            ends = output_log.end_offsets(self._ends_reader,
                                          [tp for parts in known.values() for tp in parts],
                                          timeout)
            # Where this process's own outputs end, as acknowledged: the broker's answer may be
            # lower (the bundled broker's ListOffsets), and reading back from below them after
            # a topic came back as a new log would take the old log's outputs, which name the
            # same offsets, for the new messages' (whose outputs were then not sent).
            for (topic, partition), end in self.sink.acknowledged_ends.items():
                if topic in self.output_topics:
                    noted = ends.setdefault(topic, {})
                    noted[partition] = max(noted.get(partition, 0), end)
            if self.config.sync_every is None:  # (a group worker takes its ends per claim)
                if not self._input_partitions:
                    self._input_partitions = output_log.partitions_of(self._ends_reader,
                                                                      [self.config.topic])
                self._hold_output_ends(self._input_partitions)
            self.state.output_ends = {topic: ends.get(topic, {}) for topic in self.output_topics}
            # (The reader's metadata, fetched with the partitions: a topic deleted and made
            # again since has another id, and its outputs all came after this state.)
            self.state.output_ids = {topic: clients_io.topic_id(self._ends_reader, topic)
                                     for topic in self.output_topics}
        except KafkaError as error:
            log.debug("output topics' ends not known (%r): the checkpoint keeps older ones", error)

    def _hold_output_ends(self, input_partitions: list) -> None:
        """Before the output ends move on: keep the ends so far for each input partition that
        this service does not hold now (of the input topic, `input_partitions`, or with an
        offset in the state). A run killed before its checkpoint may have published outputs
        for it past them, which were not read back (the partition went elsewhere first); when
        it comes back, they are read from there. A partition held now was read back when it
        came: its entry goes. (Without ends so far, nothing was noted to read back from.)"""
        held, state = self.state.held_output_ends, self.state
        assigned = {(tp.topic, tp.partition) for tp in self.assignment}
        partitions = {(tp.topic, tp.partition) for tp in input_partitions}
        partitions.update((topic, p) for topic, parts in state.offsets.items() for p in parts)
        for topic, partition in sorted(partitions):
            if (topic, partition) in assigned:
                held.get(topic, {}).pop(partition, None)
            elif state.output_ends:
                held.setdefault(topic, {}).setdefault(
                    partition, {t: dict(ends) for t, ends in state.output_ends.items()})
        for topic in [t for t, parts in held.items() if not parts]:
            del held[topic]

    def close_clients(self, timeout: float) -> None:
        """Close the clients the session made itself (not the consumer, nor the sink)."""
        reader, self._ends_reader = self._ends_reader, None
        if reader is not None:
            try:
                reader.close(autocommit=False, timeout_ms=int(1000 * timeout))
            except Exception as error:  # noqa: BLE001 - the broker may be gone
                log.debug("output reader close failed: %r", error)

    def read_published(self, ends: dict, partitions, resume: dict,
                       ids: dict | None = None) -> None:
        """Read the outputs published since `ends` (in output topics of `ids`, if known) of
        the messages of `partitions` to be learned again (from `resume`, `{topic: {partition:
        offset}}`) into `published` (see `output_log`), retrying while the broker is away. A
        partition `resume` lacks (none known, or its topic was recreated) is not read back:
        outputs of a topic's earlier incarnation name the same offsets as its new messages,
        which must not go unsent."""
        inputs = {(tp.topic, tp.partition): resume[tp.topic][tp.partition]
                  for tp in partitions if tp.partition in resume.get(tp.topic, {})}
        self._output_partitions = {}  # (topics may have gained partitions)
        self._input_partitions = []
        started = time.monotonic()

        def attempt():
            try:
                return output_log.read(self.clients, ends, self.output_topics, inputs,
                                       self.config.shutdown_timeout, ids)
            except AuthorizationError as error:  # not an outage: waiting would not help
                log.warning("cannot read the output topics back (%r): outputs of the messages "
                            "learned again may be published twice", error)
                return None

        published = self.retry_while_away(attempt)
        self.published = output_log.Published() if published is None else published
        if self.published:
            log.info("%d outputs of messages past the checkpoint were published before (read "
                     "back in %.2fs): they are not sent again", len(self.published),
                     time.monotonic() - started)

    def log_fields(self) -> dict:
        """`extra=` of a log line: the reading under the metric names (`--log-format json`)."""
        return logs.fields(**metrics.log_fields(self.reading()))

    def measure_lag(self) -> None:
        """The consumer lag of the assigned partitions, into `progress.lag` (on the thread that
        polls: the consumer is not thread-safe)."""
        if self.consumer is None or self.progress.restoring:
            return
        self.progress.lag = metrics.partition_lag(self.consumer, self.state.offsets,
                                                  self.assignment)

    def resume_where_logs_end(self) -> None:
        """Each assigned partition whose next offset to learn has lain past the end of its log
        (the high watermark its fetches report) for `LOG_END_CONFIRM` seconds resumes from
        the lowest end seen meanwhile, with a warning. The log lost messages
        the state had read (a broker that lost its tail), or the state is of another log:
        waiting at the old offset, the consumer would skip what arrives (the bundled broker
        answers there with nothing; Kafka's client resets to the log's beginning, and the
        records before the old offset are skipped as learned). Call it on the thread that
        polls, before the poll's records are filtered."""
        from kafka.errors import KafkaError

        now = time.monotonic()
        offsets, short = self.state.offsets, self._short_logs
        for tp in sorted(self.assignment):
            expected = offsets.get(tp.topic, {}).get(tp.partition)
            try:
                end = self.consumer.highwater(tp)
            except KafkaError:  # e.g. no longer assigned (a rebalance in between)
                end = None
            if expected is None or end is None or expected <= end:
                short.pop(tp, None)
                continue
            since, lowest = short.setdefault(tp, (now, end))
            lowest = min(lowest, end)
            short[tp] = (since, lowest)
            if now - since < LOG_END_CONFIRM:
                continue
            del short[tp]
            log.warning("the log of %s partition %d ends at offset %d, before offset %d where "
                        "the state resumes it: the broker lost messages it had read, or the "
                        "state is of another log; resuming from the log's end", tp.topic,
                        tp.partition, lowest, expected, extra=self.log_fields())
            offsets[tp.topic][tp.partition] = lowest
            self.consumer.seek(tp, lowest)
            # Outputs published for the old offsets name messages this log no longer has.
            self.published.forget([tp])
            self.state.counters["topic_resets"] += 1
        for tp in set(short) - self.assignment:
            del short[tp]

    def past_log_end(self) -> bool:
        """Whether an assigned partition's next offset to learn lies past the end of its log,
        waiting for `resume_where_logs_end` to move it there: its lag reads 0, yet it is not
        caught up."""
        return bool(self._short_logs)

    def watch_brokers(self) -> None:
        """Whether the consumer holds a connection to a broker (kafka-python's
        `connection-count`), looked at once a second on the thread that polls: after
        `BROKERS_AWAY_WARNING` seconds without one, a warning (the service is then not ready,
        and goes on polling); when one is back, a line that says so."""
        progress, now = self.progress, time.monotonic()
        if self.consumer is None or now - progress.brokers_checked < 1.0:
            return
        progress.brokers_checked = now
        try:
            connections = self.consumer.metrics()["consumer-metrics"]["connection-count"]
        except Exception:  # noqa: BLE001 - metrics are only for this report
            return
        since = progress.brokers_away_since
        if connections > 0:
            if progress.brokers_away_said:
                log.info("connected to the Kafka cluster again after %.0fs", now - since,
                         extra=self.log_fields())
            progress.brokers_away_since, progress.brokers_away_said = None, False
        elif since is None:
            progress.brokers_away_since = now
        elif not progress.brokers_away_said and now - since >= BROKERS_AWAY_WARNING:
            progress.brokers_away_said = True
            log.warning("no connection to any Kafka broker for %.0fs: waiting for the cluster "
                        "(not ready until it is back)", now - since, extra=self.log_fields())

    def reading(self) -> metrics.Reading:
        """What the service reports now, for metrics, health checks and log fields; safe to
        call from another thread."""
        return metrics.read_session(self)

    def topic_ids(self, partitions) -> dict:
        """Topic -> the broker's current id, for the topics of `partitions`."""
        return {tp.topic: clients_io.topic_id(self.consumer, tp.topic) for tp in partitions}

    def topic_recreated(self) -> bool:
        """True if a topic we read now has another id than the one our offsets refer to."""
        for topic, now in self.topic_ids(self.assignment).items():
            saved = self.state.topic_ids.get(topic)
            if saved is not None and now is not None and saved != now:
                return True
        return False

    def assigned_offsets(self) -> dict:
        """The state's next offsets of the partitions assigned now, as Kafka commits them."""
        return {
            TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
            for topic, parts in self.state.offsets.items()
            for p, o in parts.items()
            if TopicPartition(topic, p) in self.assignment
        }

    def commit_offsets(self) -> None:
        # For visibility (lag tools) only; the checkpoint is what the service trusts.
        offsets = self.assigned_offsets()
        if offsets:
            try:
                self.consumer.commit_async(offsets)
            except Exception as error:  # noqa: BLE001 - e.g. during a rebalance
                log.debug("offset commit skipped: %r", error)
