"""`advsvm serve`: test-then-train on a Kafka topic, exactly once across crashes.

The loop, for each consumed message (in offset order within a partition):

1. validate it (`streams.kafka.decode`, `check_against`); an invalid one becomes a dead letter
   and the model never sees it;
2. predict it, and publish the prediction (every valid message, labelled or not);
3. if it has a label: show it to the monitor (alerts are published), then `learn_one` it.

Exactly-once learning. The checkpoint (`streams.state`) is the one source of truth: the model,
the next offset of every partition and the counters, in one file replaced atomically every
`checkpoint_every` messages or `checkpoint_interval` seconds. On every partition assignment
(start-up included) the service reloads that file and seeks each partition to its offset, so
whatever was learned after the last checkpoint is read and learned again, and nothing
twice: if the process dies (SIGKILL, power cut) at any point, the model state after restart
and catch-up is the one an uninterrupted run reaches. Kafka's committed offsets are written
after each checkpoint for visibility only; they are used for a partition the checkpoint does
not know, and never override it.

Outputs (predictions, alerts, dead letters) are at-least-once: they are flushed with acks=all
before the checkpoint that covers their inputs is written (and before every poll), so a crash
can duplicate an output but never lose one.

Broker outages: the consumer reconnects by itself and the output sink retries with backoff;
nothing is learned while the broker is away, and nothing crashes. If a topic comes back with a
new topic id (a broker restarted without its data, like the bundled memory-only one), the
checkpointed offsets belong to a log that is gone: the service restarts that topic at its
beginning, counts a `topic_resets`, and writes a checkpoint at once. That checkpoint's
`samples_learned` tells an upstream that replays its data where to resume.

SIGTERM (or SIGINT) drains: the message in hand is finished, outputs are flushed, a final
checkpoint is written and the consumer leaves its group.

Several workers, one model (`sync_every`): the service is then one worker of its consumer
group, and its checkpoint is published to the group's snapshot topic, from which partitions
are handed over between workers and peers' models are averaged in; see `streams.group`.

BLAS runs on one thread in the service (`blas_threads`): a one-sample matrix-vector product
gains nothing from more, and on a shared machine extra BLAS threads only contend.

Examples
--------

>>> from river_advsvm import AdvKernelSVM
>>> from streams.service import Service, ServiceConfig
>>> config = ServiceConfig(bootstrap_servers="127.0.0.1:9092", topic="digits", group="svm",
...                        checkpoint_dir="/tmp/svm", predictions_topic="digits-predictions")
>>> service = Service(config, model_factory=lambda: AdvKernelSVM(epsilon=0.1, seed=0))
>>> service.run()  # doctest: +SKIP
0

"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import re
import signal
import threading
import time
import typing

from kafka import TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import CommitFailedError, KafkaError, RebalanceInProgressError
from kafka.structs import OffsetAndMetadata

from river_advsvm import inputs
from streams import group as group_io
from streams import kafka as kafka_io
from streams import state as state_io

__all__ = ["Learner", "Outcome", "Service", "ServiceConfig"]

log = logging.getLogger(__name__)


@dataclasses.dataclass
class ServiceConfig:
    """Everything `advsvm serve` needs besides the model.

    Parameters
    ----------
    bootstrap_servers, topic, group
        Where to read from: `HOST:PORT[,HOST:PORT]`, the input topic, the consumer group.
    checkpoint_dir
        Directory of the checkpoint file (created if missing).
    predictions_topic, alerts_topic, dead_letter_topic
        Where outputs go; None drops them (dead letters are still counted and logged).
    checkpoint_every, checkpoint_interval
        Checkpoint after this many messages, or this many seconds with progress.
    exit_when_idle
        Stop cleanly (final checkpoint) after this many seconds without a message, counted
        from the first partition assignment; None runs until SIGTERM.
    max_message_bytes
        Larger messages are dead letters.
    width
        Number of features of array-form `x`; None takes it from the first learned array.
    labels
        Pin the two classes; any other label is a dead letter. None: the first two labels seen.
    session_timeout_ms, max_poll_records, poll_timeout_ms
        Consumer settings; a short session timeout makes restarts rejoin faster.
    shutdown_timeout
        How long the final flush may wait for the broker before giving up.
    sync_every
        None: a standalone service. A number: this service is one worker of the group; every
        `sync_every` messages (or `checkpoint_interval` seconds with progress) it averages its
        peers' snapshots in and publishes its own (this replaces `checkpoint_every`).
    sync_topic
        The group's snapshot topic; by default `<topic>-<group>-snapshots`.
    worker_id
        This worker's key in the snapshot topic; by default kept in `checkpoint_dir/worker-id`.
    blas_threads
        BLAS threads in the service (threadpoolctl); None or 0 leaves BLAS as it is.

    """

    bootstrap_servers: str
    topic: str
    group: str
    checkpoint_dir: str
    predictions_topic: str | None = None
    alerts_topic: str | None = None
    dead_letter_topic: str | None = None
    checkpoint_every: int = 1000
    checkpoint_interval: float = 10.0
    exit_when_idle: float | None = None
    max_message_bytes: int = 2**20
    width: int | None = None
    labels: list | None = None
    session_timeout_ms: int = 10000
    max_poll_records: int = 500
    poll_timeout_ms: int = 200
    shutdown_timeout: float = 30.0
    sync_every: int | None = None
    sync_topic: str | None = None
    worker_id: str | None = None
    blas_threads: int | None = 1

    def __post_init__(self):
        if self.checkpoint_every < 1 or self.checkpoint_interval <= 0:
            raise ValueError("checkpoint_every must be >= 1 and checkpoint_interval > 0")
        if self.max_message_bytes < 1:
            raise ValueError("max_message_bytes must be >= 1")
        if self.labels is not None and (len(self.labels) != 2 or self.labels[0] == self.labels[1]):
            raise ValueError(f"labels must be two distinct labels, got {self.labels!r}")
        outputs = [self.predictions_topic, self.alerts_topic, self.dead_letter_topic]
        if self.topic in outputs:
            raise ValueError(f"the input topic {self.topic!r} cannot also be an output topic")
        if self.sync_every is not None:
            if self.sync_every < 1:
                raise ValueError("sync_every must be >= 1")
            if self.sync_topic is None:
                name = f"{self.topic}-{self.group}-snapshots"
                self.sync_topic = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:249]
            if self.sync_topic in [self.topic, *outputs]:
                raise ValueError(f"the snapshot topic {self.sync_topic!r} must be a topic of its own")
            self.checkpoint_every = self.sync_every

    @property
    def grouped(self) -> bool:
        """True when this service is one worker of a group that syncs its model."""
        return self.sync_every is not None


@dataclasses.dataclass
class Outcome:
    """What one message led to: a prediction (and alerts), or a dead-letter reason."""

    sample: kafka_io.Sample | None = None
    label: typing.Any = None
    probability: float | None = None
    alerts: list = dataclasses.field(default_factory=list)
    error: kafka_io.InvalidMessage | None = None


class Learner:
    """Test-then-train on message values, with no Kafka: validation, prediction, learning.

    The service feeds it consumed values; tests and replays can feed it bytes directly.
    `state` (a `streams.state.ServiceState`) is replaced when a checkpoint is reloaded.

    Parameters
    ----------
    state
        The model and its bookkeeping; counters are updated in place.
    max_message_bytes
        Larger values are refused (`too_large`).
    monitor
        Optional, e.g. a `river_advsvm.monitor.RobustnessMonitor`: before each `learn_one` its
        `model` is set to the current model and `monitor.update(x, y, y_pred=...)` returns a
        list of alerts (dataclasses).

    Examples
    --------

    >>> from river_advsvm import AdvLinearSVM
    >>> from streams.service import Learner
    >>> from streams.state import ServiceState
    >>> learner = Learner(ServiceState(model=AdvLinearSVM()), max_message_bytes=1024)
    >>> learner.process(b'{"x": [1.0, 0.0], "y": "cat"}').label  # no class known yet
    >>> learner.process(b'{"x": [0.0, 1.0], "y": "dog"}').sample.labelled
    True
    >>> learner.process(b'{"x": [1.0, 0.0], "y": "cow"}').error.code
    'unknown_label'
    >>> learner.process(b'{"x": [1.0]}').error.code
    'wrong_width'
    >>> learner.state.counters["learned"], learner.state.counters["dead_letters"]
    (2, 2)

    """

    def __init__(self, state: state_io.ServiceState, max_message_bytes: int, monitor=None):
        self.state = state
        self.max_message_bytes = max_message_bytes
        self.monitor = monitor

    def _classes(self) -> tuple:
        if self.state.labels is not None:
            return tuple(self.state.labels)
        return tuple(self.state.model.classes)

    def process(self, value: bytes | None) -> Outcome:
        counters = self.state.counters
        counters["messages"] += 1
        try:
            sample = kafka_io.decode(value, self.max_message_bytes)
            kafka_io.check_against(sample, self._classes(), self.state.width)
            outcome = self._test_then_train(sample)
        except kafka_io.InvalidMessage as error:
            counters["dead_letters"] += 1
            by_code = counters["dead_letters_by_code"]
            by_code[error.code] = by_code.get(error.code, 0) + 1
            return Outcome(error=error)
        return outcome

    def _test_then_train(self, sample: kafka_io.Sample) -> Outcome:
        model, counters = self.state.model, self.state.counters
        try:
            proba = model.predict_proba_one(sample.x) if model.classes else {}
        except inputs.InvalidInput as error:
            raise kafka_io.InvalidMessage("model_refused", str(error)) from None
        # Ties go to the first (negative) class, as `predict_one` does for a zero margin.
        label = max(proba, key=proba.get) if proba else None
        outcome = Outcome(sample, label, proba.get(label) if proba else None)
        if not sample.labelled:
            counters["predicted"] += 1
            return outcome
        if self.monitor is not None:
            try:
                # Reloads and merges replace the model object: watch the one that learns.
                self.monitor.model = model
                outcome.alerts = list(self.monitor.update(sample.x, sample.y, y_pred=label) or [])
            except Exception:  # noqa: BLE001 - a monitor bug must not stop learning
                log.exception("the monitor failed on message %r", sample.id)
        try:
            model.learn_one(sample.x, sample.y)
        except inputs.InvalidInput as error:  # the model is unchanged when it refuses
            raise kafka_io.InvalidMessage("model_refused", str(error)) from None
        if sample.width is not None and self.state.width is None:
            self.state.width = sample.width
        counters["learned"] += 1
        counters["correct"] += int(label is not None and label == sample.y)
        return outcome


def _prediction_json(outcome: Outcome, record, n_learned: int) -> bytes:
    sample = outcome.sample
    message = {
        "id": sample.id,
        "label": outcome.label,
        "probability": outcome.probability,
        "labelled": sample.labelled,
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "samples_learned": n_learned,
    }
    if sample.labelled:
        message["y"] = sample.y
    return json.dumps(message, separators=(",", ":")).encode()


def _alert_json(alert, outcome: Outcome, record) -> bytes:
    body = dataclasses.asdict(alert) if dataclasses.is_dataclass(alert) else {"detail": repr(alert)}
    message = {
        "alert": type(alert).__name__,
        **body,
        "message_id": outcome.sample.id,
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
    }
    return json.dumps(message, separators=(",", ":"), default=str).encode()


class _Rebalance(ConsumerRebalanceListener):
    """Forwards kafka-python's rebalance callbacks (run while the main thread is in `poll`)."""

    def __init__(self, service: Service):
        self.service = service

    def on_partitions_revoked(self, revoked):
        self.service._guarded(self.service._on_revoked, revoked)

    def on_partitions_lost(self, lost):
        self.service._guarded(self.service._on_lost, lost)

    def on_partitions_assigned(self, assigned):
        self.service._guarded(self.service._on_assigned, assigned)


class Service:
    """The Kafka test-then-train service; `run` until SIGTERM or idle.

    Parameters
    ----------
    config
        A `ServiceConfig`.
    model_factory
        Makes the model when there is no checkpoint; a checkpoint always wins over it.
    monitor
        Optional object with `update(x, y) -> list of alert dataclasses`.

    """

    def __init__(self, config: ServiceConfig, model_factory: typing.Callable[[], typing.Any],
                 monitor=None):
        self.config = config
        self.model_factory = model_factory
        self.stopping = threading.Event()
        self._learner = Learner(self._new_state(), config.max_message_bytes, monitor)
        self._consumer = None
        self._sink: kafka_io.OutputSink | None = None
        self._assignment: set = set()
        self._assigned_once = False
        self._since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        self._last_activity = time.monotonic()
        self._fatal: BaseException | None = None
        self._started = time.monotonic()
        self._first_message: float | None = None
        self._last_message: float | None = None
        self._processed = 0
        self._first_wall: float | None = None
        self._last_wall: float | None = None
        self._group: group_io.GroupSync | None = None
        self._group_started = False  # the state comes from the group's snapshots
        self._pending_restore = False  # partitions assigned, not yet positioned (group mode)
        self._evicted = False  # the group dropped this worker: publish nothing, roll back
        # Dead letters keep the original bytes whole up to this size (base64 makes them 4/3
        # larger); beyond it they are cut, so a huge message cannot block its own dead letter.
        self._dead_letter_cap = max(2 * 2**20, config.max_message_bytes)

    # -- state ----------------------------------------------------------------------------------

    @property
    def state(self) -> state_io.ServiceState:
        return self._learner.state

    def _new_state(self) -> state_io.ServiceState:
        labels = list(self.config.labels) if self.config.labels is not None else None
        return state_io.ServiceState(model=self.model_factory(), width=self.config.width,
                                     labels=labels)

    def _reload(self) -> None:
        """Replace the in-memory state by the checkpoint (or a new model if there is none)."""
        loaded = state_io.load(self.config.checkpoint_dir)
        self._learner.state = loaded if loaded is not None else self._new_state()
        self._since_checkpoint = 0

    def _save(self) -> None:
        state_io.save(self.config.checkpoint_dir, self.state)
        self._since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        counters = self.state.counters
        log.info(
            "checkpoint %d: %d learned, %d predicted, %d dead letters, offsets %s (%.0f msg/s)",
            counters["checkpoints"], counters["learned"], counters["predicted"],
            counters["dead_letters"], self.state.offsets, self.throughput(),
        )

    def throughput(self) -> float:
        """Messages per second in this run, from the first poll with messages to the end of
        the processing of the last one (idle time excluded)."""
        if self._first_message is None:
            return 0.0
        end = self._last_message or time.monotonic()
        return self._processed / max(end - self._first_message, 1e-9)

    def checkpoint(self) -> bool:
        """Flush outputs, then write the checkpoint; False if stopped before outputs were out.

        In a group the checkpoint is a sync: fold the peers in, publish, write the local copy.
        """
        if not self._sink.flush(should_stop=self.stopping.is_set):
            return False
        if self._group is not None:
            return self._sync(should_stop=self.stopping.is_set)
        self._save()
        self._commit_offsets()
        return True

    def _sync(self, timeout: float | None = None, should_stop=lambda: False,
              check_membership: bool = True) -> bool:
        """Group mode: fold fresh peer snapshots in, then publish this state (outputs must be
        flushed already). False if the snapshot was not published.

        Right before publishing, the offsets are committed synchronously: the coordinator
        refuses the commit of a member it has evicted (frozen past the session timeout while
        another worker took its partitions over), and such a zombie must not publish claims on
        partitions that moved. The rebalance callback, which cannot block on the consumer,
        skips that check: a member being asked to revoke is still a member.
        """
        group = self._group
        if self._evicted:
            return False
        group.poll()
        group.fold(self.state)
        self.state.group["run"] = {"first": self._first_wall, "last": self._last_wall,
                                   "processed": self._processed}
        if check_membership and not self._confirm_membership(timeout):
            return False
        if not group.publish(self.state, timeout=timeout, should_stop=should_stop):
            return False
        self._since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        counters = self.state.counters
        log.info(
            "snapshot %d of %s: %d learned here, %d in the merged model, %d peers, offsets %s "
            "(%.0f msg/s)", self.state.group["seq"], group.worker, counters["learned"],
            self.state.model.n_learned, len(group.peers()), self.state.offsets, self.throughput(),
        )
        if not check_membership:
            self._commit_offsets()
        return True

    def _confirm_membership(self, timeout: float | None) -> bool:
        """Commit the offsets about to be published; False (and evicted) if the group refuses."""
        offsets = self._assigned_offsets()
        if not offsets:
            return True
        try:
            self._consumer.commit(offsets, timeout_ms=int(1000 * min(timeout or 10.0, 10.0)))
            return True
        except CommitFailedError as error:
            cause = error.args[0] if error.args else None
            if isinstance(cause, RebalanceInProgressError):  # still a member: publish later
                log.info("a rebalance is in progress: publishing after it")
                return False
            log.warning("the group no longer counts worker %s as the owner of its partitions "
                        "(%r): not publishing; what it learned since its last snapshot is "
                        "rolled back at its next assignment", self._group.worker, error)
            self._evicted = True
        except KafkaError as error:
            log.warning("could not confirm the group membership (%r): not publishing now", error)
        return False

    def _assigned_offsets(self) -> dict:
        return {
            TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
            for topic, parts in self.state.offsets.items()
            for p, o in parts.items()
            if TopicPartition(topic, p) in self._assignment
        }

    def _commit_offsets(self) -> None:
        # For visibility (lag tools) only; the checkpoint is what the service trusts.
        offsets = self._assigned_offsets()
        if offsets:
            try:
                self._consumer.commit_async(offsets)
            except Exception as error:  # noqa: BLE001 - e.g. during a rebalance
                log.debug("offset commit skipped: %r", error)

    # -- rebalances -----------------------------------------------------------------------------

    def _guarded(self, handler, partitions) -> None:
        try:
            handler(partitions)
        except BaseException as error:  # noqa: BLE001 - re-raised by the main loop
            self._fatal = error

    def _on_revoked(self, partitions) -> None:
        # The main thread is blocked in poll(), and every output was flushed before that poll:
        # the in-memory state can be checkpointed as it is, so no work is lost.
        if self._group is not None:
            if self._since_checkpoint and not self._pending_restore:
                # Publish before letting go, so that the next owner resumes exactly here. This
                # blocks the consumer's heartbeats: bounded well below the session timeout.
                timeout = max(1.0, self.config.session_timeout_ms / 2000)
                if not (self._sink.flush(timeout=timeout)
                        and self._sync(timeout=timeout, check_membership=False)):
                    log.warning("could not publish before the rebalance; %d messages will be "
                                "learned again", self._since_checkpoint)
        elif self._since_checkpoint and self._sink.pending == 0:
            self._save()
        self._assignment -= set(partitions)

    def _on_lost(self, partitions) -> None:
        # Another worker may own these already: publishing now could count twice what it
        # resumes. In a group, what was learned since the last snapshot is rolled back at the
        # next assignment.
        if self._group is None:
            self._on_revoked(partitions)
        else:
            self._evicted = True
            self._assignment -= set(partitions)

    def _on_assigned(self, partitions) -> None:
        if self._group is None:
            self._restore(set(partitions))
            return
        # Positioning needs the group's latest snapshots, read outside this callback (which
        # blocks heartbeats): nothing is fetched from these partitions until then.
        self._assignment = set(partitions)
        self._pending_restore = True
        if partitions:
            self._consumer.pause(*partitions)

    def _group_restore(self) -> None:
        """Group mode, after an assignment: read the group's snapshots up to now, roll back
        what was never published, fold the peers in, and resume each partition at its claim."""
        group, partitions = self._group, set(self._assignment)
        backoff = 0.5
        while not group.fence(timeout=10.0, should_stop=self.stopping.is_set):
            if self.stopping.is_set():
                return
            log.warning("could not read the snapshot topic %s; retrying in %.1fs", group.topic,
                        backoff)
            self.stopping.wait(backoff)
            backoff = min(backoff * 2, 10.0)
        republish = False
        if not self._group_started or self._since_checkpoint or self._evicted:
            if self._group_started:
                log.warning("rolling back %d messages learned since the last snapshot: their "
                            "partitions may have moved; they are learned again",
                            self._since_checkpoint)
            state, republish = group.initial_state(self._new_state)
            self._learner.state = state
            self._since_checkpoint = 0
            self._group_started = True
            self._evicted = False
        state = self.state
        folded = group.fold(state)
        current = {tp.topic: kafka_io.topic_id(self._consumer, tp.topic) for tp in partitions}
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
        for tp in sorted(partitions):
            offset = claims.get(tp.topic, {}).get(tp.partition)
            if offset is None:
                self._consumer.seek_to_beginning(tp)
            else:
                state.offsets.setdefault(tp.topic, {})[tp.partition] = offset
                self._consumer.seek(tp, offset)
        if partitions:
            self._consumer.resume(*partitions)
        self._pending_restore = False
        self._assigned_once = True
        self._last_activity = time.monotonic()
        log.info("worker %s assigned %s; resuming from %s; merged model of %d samples (%d "
                 "peers folded in)", group.worker,
                 sorted((tp.topic, tp.partition) for tp in partitions),
                 {f"{tp.topic}[{tp.partition}]": claims.get(tp.topic, {}).get(tp.partition, 0)
                  for tp in sorted(partitions)}, state.model.n_learned, folded)
        if republish and self._sink.flush(timeout=self.config.shutdown_timeout):
            self._sync(timeout=self.config.shutdown_timeout)

    def _restore(self, partitions: set) -> None:
        """Reload the checkpoint and seek each partition to its checkpointed offset."""
        self._reload()
        saved = self.state
        current = {tp.topic: kafka_io.topic_id(self._consumer, tp.topic) for tp in partitions}
        recreated = {
            topic for topic, now in current.items()
            if now is not None and saved.topic_ids.get(topic) not in (None, now)
        }
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
        for tp in sorted(partitions):
            offset = saved.offsets.get(tp.topic, {}).get(tp.partition)
            if tp.topic in recreated:
                self._consumer.seek_to_beginning(tp)
            elif offset is not None:
                self._consumer.seek(tp, offset)
            # else: the group's committed offset, or the earliest one (auto_offset_reset)
        self._assignment = set(partitions)
        self._assigned_once = True
        self._last_activity = time.monotonic()
        log.info("assigned %s; resuming from %s", sorted((tp.topic, tp.partition)
                 for tp in partitions), saved.offsets or "the start")
        if recreated:
            self._save()  # the resync point, for an upstream that replays what the broker lost

    def _topic_recreated(self) -> bool:
        """True if a topic we read now has another id than the one our offsets refer to."""
        for topic in {tp.topic for tp in self._assignment}:
            saved = self.state.topic_ids.get(topic)
            now = kafka_io.topic_id(self._consumer, topic)
            if saved is not None and now is not None and saved != now:
                return True
        return False

    # -- the loop -------------------------------------------------------------------------------

    def _process(self, record) -> None:
        outcome = self._learner.process(record.value)
        sink, config = self._sink, self.config
        if outcome.error is not None:
            log.debug("dead letter at %s[%d]@%d: %s", record.topic, record.partition,
                      record.offset, outcome.error)
            if config.dead_letter_topic:
                envelope = kafka_io.dead_letter(record, outcome.error, self._dead_letter_cap)
                sink.send(config.dead_letter_topic, envelope, key=record.key)
        else:
            if config.predictions_topic:
                n = self.state.model.n_learned  # in a group: the merged model's samples
                sink.send(config.predictions_topic, _prediction_json(outcome, record, n),
                          key=record.key)
            for alert in outcome.alerts:
                self.state.counters["alerts"] += 1
                if config.alerts_topic:
                    sink.send(config.alerts_topic, _alert_json(alert, outcome, record))
                else:
                    log.warning("alert: %r", alert)
        self.state.offsets.setdefault(record.topic, {})[record.partition] = record.offset + 1
        self._since_checkpoint += 1
        self._processed += 1
        self._last_wall = time.time()
        if self._first_wall is None:
            self._first_wall = self._last_wall

    def _connect(self):
        backoff = 0.5
        while not self.stopping.is_set():
            try:
                return kafka_io.make_consumer(
                    self.config.bootstrap_servers, self.config.group,
                    session_timeout_ms=self.config.session_timeout_ms,
                    max_poll_records=self.config.max_poll_records,
                )
            except KafkaError as error:
                log.warning("cannot reach %s (%r); retrying in %.1fs",
                            self.config.bootstrap_servers, error, backoff)
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 10.0)
        return None

    def _create_output_topics(self) -> None:
        outputs = [self.config.predictions_topic, self.config.alerts_topic,
                   self.config.dead_letter_topic]
        try:
            kafka_io.create_topics(self.config.bootstrap_servers, {t: 1 for t in outputs if t})
        except Exception as error:  # noqa: BLE001 - the broker may auto-create them instead
            log.warning("could not create the output topics: %r", error)

    def _install_signals(self) -> dict:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: self.stop())
        return previous

    def stop(self) -> None:
        """Ask the loop to drain and stop (what SIGTERM does)."""
        self.stopping.set()

    def run(self) -> int:
        """Serve until stopped; returns the exit status (0 clean, 1 final checkpoint impossible).

        Raises `CheckpointError` if the checkpoint directory holds an unreadable checkpoint
        (the service never silently starts over), and `ValueError` if another service holds
        the directory.
        """
        config = self.config
        os.makedirs(config.checkpoint_dir, exist_ok=True)
        lock = self._lock_directory()
        try:
            with _blas_threads(config.blas_threads):
                return self._run()
        finally:
            lock.close()  # the kernel also drops the lock when the process dies

    def _lock_directory(self):
        # Two services writing one checkpoint would each overwrite the other's progress.
        lock = open(os.path.join(self.config.checkpoint_dir, ".lock"), "a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            raise ValueError(
                f"another service is using the checkpoint directory {self.config.checkpoint_dir}"
            ) from None
        return lock

    def _run(self) -> int:
        config = self.config
        for path in state_io.remove_temporaries(config.checkpoint_dir):
            log.info("removed %s, left by an interrupted checkpoint write", path)
        loaded = state_io.load(config.checkpoint_dir)  # fail fast, before touching Kafka
        if loaded is not None:
            self._learner.state = loaded
            log.info("restored the checkpoint in %s (%d learned); it wins over model options",
                     config.checkpoint_dir, loaded.counters["learned"])
        previous = self._install_signals()
        self._sink = kafka_io.OutputSink(
            lambda: kafka_io.make_producer(
                config.bootstrap_servers,
                max_request_size=max(4 * 2**20, 2 * self._dead_letter_cap + 2**16),
            )
        )
        try:
            self._create_output_topics()
            if config.grouped and not self._start_group():
                return 0
            self._consumer = self._connect()
            if self._consumer is None:
                return 0
            self._consumer.subscribe([config.topic], listener=_Rebalance(self))
            self._loop()
            return self._shutdown()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if self._group is not None:
                self._group.close()

    def _start_group(self) -> bool:
        """Join the group's snapshot topic (retrying while the broker is away); False if
        stopped first."""
        config = self.config
        worker = group_io.worker_id(config.checkpoint_dir, config.worker_id)
        group = group_io.GroupSync(config.bootstrap_servers, config.sync_topic, worker,
                                   config.checkpoint_dir, self._sink)
        backoff = 0.5
        while not self.stopping.is_set():
            try:
                group.start()
                self._group = group
                log.info("worker %s of group %r; snapshots in %r, every %d messages",
                         worker, config.group, config.sync_topic, config.sync_every)
                return True
            except KafkaError as error:
                log.warning("cannot reach %s (%r); retrying in %.1fs",
                            config.bootstrap_servers, error, backoff)
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 10.0)
        return False

    def _loop(self) -> None:
        config = self.config
        backoff = 0.1
        while not self.stopping.is_set():
            # Invariant: when poll() runs (and with it any rebalance callback), every output of
            # every processed message is acknowledged, so the state may be checkpointed as is.
            if not self._sink.flush(should_stop=self.stopping.is_set):
                break
            try:
                records = self._consumer.poll(timeout_ms=config.poll_timeout_ms)
                backoff = 0.1
            except KafkaError as error:
                if self._fatal is None:
                    log.warning("poll failed (%r); retrying in %.1fs", error, backoff)
                    self.stopping.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                records = {}
            if self._fatal is not None:
                raise self._fatal
            if self._pending_restore:
                self._group_restore()
                continue  # what this poll returned was fetched before the partitions were placed
            if self._topic_recreated():
                if self._group is not None:
                    if self._since_checkpoint and self._sink.pending == 0:
                        self._sync(timeout=self.config.shutdown_timeout)
                    self._pending_restore = True
                    continue
                if self._since_checkpoint and self._sink.pending == 0:
                    self._save()
                self._restore(set(self._assignment))
                continue  # what this poll returned was read at positions of the old log
            now = time.monotonic()
            if records:
                self._last_activity = now
                if self._first_message is None:
                    self._first_message = now
            for tp in sorted(records):
                for record in records[tp]:
                    known = self.state.offsets.get(tp.topic, {}).get(tp.partition)
                    if known is not None and record.offset < known:
                        continue  # already learned (a fetch that raced a seek)
                    self._process(record)
                    if self._since_checkpoint >= config.checkpoint_every:
                        self.checkpoint()
                    if self.stopping.is_set():
                        break
                if self.stopping.is_set():
                    break
            now = time.monotonic()
            if records:
                # Idle means no messages, not slow ones: the clock restarts after the work.
                self._last_activity = self._last_message = now
            if self._since_checkpoint and now - self._last_checkpoint >= config.checkpoint_interval:
                self.checkpoint()
            if (config.exit_when_idle is not None and self._assigned_once
                    and now - self._last_activity >= config.exit_when_idle):
                log.info("no message for %.1fs: stopping", config.exit_when_idle)
                break

    def _shutdown(self) -> int:
        status = 0
        if self._since_checkpoint and (self._evicted or self._pending_restore):
            log.info("not publishing at shutdown: the group has moved this worker's "
                     "partitions; %d messages will be learned again by their owners",
                     self._since_checkpoint)
        elif self._since_checkpoint:
            timeout = self.config.shutdown_timeout
            if self._sink.flush(timeout=timeout) and (
                    self._group is None or self._sync(timeout=timeout)):
                if self._group is None:
                    self._save()
                    self._commit_offsets()
            else:
                log.error(
                    "outputs could not be delivered within %.0fs: no final checkpoint; the "
                    "last one stays valid and what came after it will be learned again",
                    self.config.shutdown_timeout,
                )
                status = 1
        try:
            self._consumer.close(autocommit=False)
        except Exception as error:  # noqa: BLE001 - the broker may be gone
            log.warning("consumer close failed: %r", error)
        try:
            self._sink.close(timeout=5)
        except Exception as error:  # noqa: BLE001
            log.warning("producer close failed: %r", error)
        log.info("stopped after %.1fs: %d messages processed in this run (%.0f msg/s)",
                 time.monotonic() - self._started, self._processed, self.throughput())
        return status


@contextlib.contextmanager
def _blas_threads(threads: int | None):
    """Limit BLAS to `threads` threads for the duration (nothing if None or 0).

    threadpoolctl acts on the BLAS library numpy already loaded (the command line imports numpy
    before any service code runs, too late for OMP_NUM_THREADS and friends), covers OpenBLAS,
    MKL and BLIS alike, and restores the previous limits afterwards, so a program that embeds
    the service keeps its own BLAS settings outside it.
    """
    if not threads:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        log.warning("threadpoolctl is missing: BLAS keeps its default threads "
                    "(pip install 'river-advsvm[kafka]')")
        yield
        return
    with threadpool_limits(limits=threads, user_api="blas"):
        yield
