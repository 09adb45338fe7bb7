"""The Kafka side of the service: the message schema, its validation, and the adapters around
kafka-python (consumer, a producer that does not lose outputs, topic creation).

Input messages are UTF-8 JSON objects::

    {"id": "a-17", "x": {"age": 31, "height": 1.7}, "y": true}
    {"id": 18, "x": [0.0, 0.5, 1.0]}

- `id` (optional): a string or an integer, echoed in the outputs.
- `x` (required): the features, either an object of name -> number (River's dict; names are
  strings) or an array of numbers (named `0..d-1`, like `river.stream.iter_array`). Numbers are
  JSON numbers or booleans; NaN, Infinity and out-of-range numbers are refused.
- `y` (optional): the label, a string, integer, boolean or finite number. Absent or null means
  unlabelled: the message is only predicted.

Anything else is a dead letter, with a machine-readable `code` (see `REASONS`) and a sentence.
`decode` does every check that needs no model; `check_against` the ones that do (a label
outside the two known classes, an array whose width differs from the model's).

Examples
--------

>>> from streams import kafka
>>> sample = kafka.decode(b'{"id": 7, "x": [0.5, 1.0], "y": 1}', max_bytes=1024)
>>> sample.id, sample.x, sample.y, sample.labelled
(7, {0: 0.5, 1: 1.0}, 1, True)
>>> try:
...     kafka.decode(b'{"x": [NaN]}', max_bytes=1024)
... except kafka.InvalidMessage as error:
...     print(error.code, "-", error)
non_finite - x holds a non-finite number (NaN)
>>> kafka.encode({"a": 1.5}, y="cat", id="m1")
b'{"id":"m1","x":{"a":1.5},"y":"cat"}'

"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import math
import time
import typing

__all__ = [
    "REASONS",
    "InvalidMessage",
    "OutputSink",
    "Sample",
    "check_against",
    "create_topics",
    "dead_letter",
    "decode",
    "encode",
    "make_consumer",
    "make_producer",
    "topic_id",
]

log = logging.getLogger(__name__)

#: Every reason a message can be dead-lettered for, by code.
REASONS = {
    "empty": "the message has no value (a tombstone)",
    "too_large": "the message is larger than the configured maximum",
    "not_utf8": "the bytes are not UTF-8",
    "not_json": "the text is not JSON",
    "duplicate_key": "a JSON object repeats a key",
    "not_object": "the JSON is not an object",
    "bad_id": "id is neither a string nor an integer",
    "missing_x": "there is no x",
    "bad_x": "x is neither an object nor an array",
    "empty_x": "x has no features",
    "non_numeric": "a feature value is not a number",
    "non_finite": "a feature value is NaN, infinite or out of range",
    "bad_label": "y is not a string, integer, boolean or finite number",
    "unknown_label": "y is not one of the model's two classes",
    "wrong_width": "an array x has another length than the model's features",
    "model_refused": "the model refused the sample",
}

_MISSING = object()


class InvalidMessage(ValueError):
    """A message that goes to the dead-letter topic; `code` is one of `REASONS`."""

    def __init__(self, code: str, detail: str):
        assert code in REASONS, code
        super().__init__(detail)
        self.code = code


@dataclasses.dataclass(frozen=True)
class Sample:
    """A valid message: `x` ready for River, `y` None when unlabelled, `width` for arrays."""

    id: str | int | None
    x: dict
    y: typing.Any
    labelled: bool
    width: int | None  # the array's length when x came as an array, else None


def _no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise InvalidMessage("duplicate_key", f"key {key!r} appears twice in an object")
        obj[key] = value
    return obj


def _refuse_constant(name):
    raise InvalidMessage("non_finite", f"x holds a non-finite number ({name})")


def _check_values(values, where: str) -> None:
    for v in values:
        kind = type(v)
        if kind is float:
            if not math.isfinite(v):
                raise InvalidMessage("non_finite", f"{where} holds a non-finite number ({v})")
        elif kind is int:
            if abs(v) > 1.7e308:  # would become inf as a float
                raise InvalidMessage("non_finite", f"{where} holds a number out of range")
        elif kind is not bool:
            raise InvalidMessage(
                "non_numeric", f"{where} holds {json.dumps(v)[:40]} ({type(v).__name__})"
            )


def _label(y):
    if isinstance(y, (str, bool, int)) or (isinstance(y, float) and math.isfinite(y)):
        return y
    raise InvalidMessage("bad_label", f"y is {json.dumps(y)[:40]}, not a usable label")


def decode(value: bytes | None, max_bytes: int) -> Sample:
    """Parse and validate one message value; raises `InvalidMessage` with a reason code."""
    if value is None or len(value) == 0:
        raise InvalidMessage("empty", "the message value is empty")
    if len(value) > max_bytes:
        raise InvalidMessage("too_large", f"{len(value)} bytes, over the {max_bytes} limit")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidMessage("not_utf8", f"not UTF-8: {error}") from None
    try:
        message = json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant
        )
    except json.JSONDecodeError as error:
        raise InvalidMessage("not_json", f"not JSON: {error}") from None
    except RecursionError:
        raise InvalidMessage("not_json", "JSON nested too deeply") from None
    if not isinstance(message, dict):
        raise InvalidMessage("not_object", f"a JSON {type(message).__name__}, not an object")

    id_ = message.get("id")
    if id_ is not None and (isinstance(id_, bool) or not isinstance(id_, (str, int))):
        raise InvalidMessage("bad_id", f"id is {json.dumps(id_)[:40]}")
    if "x" not in message:
        raise InvalidMessage("missing_x", "the message has no x")
    raw = message["x"]
    if isinstance(raw, dict):
        _check_values(raw.values(), "x")
        x, width = raw, None
    elif isinstance(raw, list):
        _check_values(raw, "x")
        x, width = dict(enumerate(raw)), len(raw)
    else:
        raise InvalidMessage("bad_x", f"x is a JSON {type(raw).__name__}")
    if not x:
        raise InvalidMessage("empty_x", "x has no features")

    y = message.get("y")
    labelled = y is not None
    return Sample(id=id_, x=x, y=_label(y) if labelled else None, labelled=labelled, width=width)


def check_against(sample: Sample, classes: tuple, width: int | None) -> None:
    """The checks that depend on the model: the label's class and an array's width.

    `classes` are the labels the model knows (or was pinned to): once there are two, any other
    label is unknown. `width` is the number of features arrays must have, None while unknown.
    """
    if sample.labelled and len(classes) >= 2 and sample.y not in classes:
        raise InvalidMessage(
            "unknown_label", f"label {sample.y!r} is not one of the classes {list(classes)}"
        )
    if sample.width is not None and width is not None and sample.width != width:
        raise InvalidMessage("wrong_width", f"x has {sample.width} values, the model {width}")


def encode(x, y=_MISSING, id=None) -> bytes:
    """A message in the input schema: `x` a dict, or a sequence of numbers (an array)."""
    if not isinstance(x, dict):
        x = [float(v) for v in x]
    message = {} if id is None else {"id": id}
    message["x"] = x
    if y is not _MISSING and y is not None:
        message["y"] = y.item() if hasattr(y, "item") else y
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode()


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def dead_letter(record, error: InvalidMessage, max_value_bytes: int = 2**20) -> bytes:
    """The dead-letter envelope of a consumed record: where it was, why, and its exact bytes.

    `value_b64` and `key_b64` hold the original bytes in base64 (null when absent). A value
    longer than `max_value_bytes` is cut there and `truncated` is true, so that a huge message
    cannot make its own dead letter too large to publish; `value_bytes` is the full length.
    """
    value = record.value
    truncated = value is not None and len(value) > max_value_bytes
    envelope = {
        "reason": str(error),
        "code": error.code,
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "value_b64": _b64(value[:max_value_bytes] if truncated else value),
        "key_b64": _b64(record.key),
        "value_bytes": None if value is None else len(value),
        "truncated": truncated,
    }
    return json.dumps(envelope, separators=(",", ":")).encode()


# -- kafka-python adapters --------------------------------------------------------------------

# Clients give up bootstrapping after this long and the service retries with backoff, so that
# a SIGTERM during an outage at start-up is answered within seconds.
_BOOTSTRAP_TIMEOUT_MS = 5000


def make_consumer(bootstrap_servers: str, group: str, *, session_timeout_ms: int = 10000,
                  max_poll_records: int = 500, client_id: str = "advsvm-serve"):
    """A group consumer that never commits on its own and starts at the earliest offset.

    Offsets are the checkpoint's business: auto-commit is off, and a partition the checkpoint
    does not know starts at the group's committed offset, else at the beginning.
    """
    from kafka import KafkaConsumer

    return KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=group,
        client_id=client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        allow_auto_create_topics=False,
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=max(100, min(3000, session_timeout_ms // 5)),
        max_poll_records=max_poll_records,
        reconnect_backoff_max_ms=2000,
        request_timeout_ms=max(30000, session_timeout_ms + 5000),
        bootstrap_timeout_ms=_BOOTSTRAP_TIMEOUT_MS,
    )


def make_producer(bootstrap_servers: str, *, max_request_size: int = 4 * 2**20,
                  client_id: str = "advsvm-serve"):
    """A producer for outputs: acks from all replicas, retries, and no idempotence.

    Idempotence is off because an idempotent producer does not survive a restart of the
    bundled broker; `OutputSink` resends what fails, so outputs are at-least-once either way.
    """
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=bootstrap_servers,
        client_id=client_id,
        acks="all",
        enable_idempotence=False,
        linger_ms=5,
        max_block_ms=5000,
        request_timeout_ms=10000,
        delivery_timeout_ms=60000,
        reconnect_backoff_max_ms=2000,
        max_request_size=max_request_size,
        bootstrap_timeout_ms=_BOOTSTRAP_TIMEOUT_MS,
    )


def create_topics(bootstrap_servers: str, topics: dict[str, int]) -> None:
    """Create each topic (name -> partitions) unless it exists already."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="advsvm-admin",
                             bootstrap_timeout_ms=_BOOTSTRAP_TIMEOUT_MS)
    try:
        for name, partitions in topics.items():
            try:
                admin.create_topics([NewTopic(name, partitions, 1)])
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()


def topic_id(consumer, topic: str) -> str | None:
    """The broker's id of `topic` as the consumer last saw it (None if unknown).

    A topic that is deleted and created again gets a new id: the checkpoint's offsets then
    belong to a log that no longer exists. kafka-python keeps the ids in its cluster metadata,
    which it does not expose publicly, hence the defensive lookup.
    """
    cluster = getattr(consumer, "_cluster", None)
    if cluster is None:
        cluster = getattr(getattr(consumer, "_client", None), "cluster", None)
    try:
        value = cluster.topic_id(topic)
    except Exception:  # noqa: BLE001 - an older kafka-python without topic ids
        return None
    return None if value is None else str(value)


class OutputSink:
    """Sends outputs and makes sure each one is acknowledged, resending what fails.

    `flush` returns only when every output sent so far is acknowledged (acks=all), retrying
    through broker outages with exponential backoff. The service flushes before every
    checkpoint, so a checkpoint never covers an input whose outputs could still be lost: a
    crash may duplicate an output, never drop one.

    Parameters
    ----------
    producer_factory
        Makes a producer; called again when the producer has to be replaced.

    """

    def __init__(self, producer_factory: typing.Callable[[], typing.Any]):
        self._factory = producer_factory
        self._producer = None
        self._pending: list[list] = []  # [topic, key, value, future or None]
        self.sent = 0

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _ensure_producer(self):
        if self._producer is None:
            self._producer = self._factory()
        return self._producer

    def send(self, topic: str, value: bytes, key: bytes | None = None) -> list:
        """Queue an output; returns its entry (for `offset_of` and `cancel`)."""
        entry = [topic, key, value, None]
        self._pending.append(entry)
        self._submit(entry)
        return entry

    @staticmethod
    def offset_of(entry: list) -> int | None:
        """The offset the broker gave an entry once acknowledged (None if not, or dropped)."""
        future = entry[3]
        if future is None or not future.is_done or future.exception is not None:
            return None
        return future.value.offset

    def cancel(self, entry: list) -> None:
        """Stop resending an entry not yet acknowledged (one already in flight may still land)."""
        if self.offset_of(entry) is None:
            self._pending = [e for e in self._pending if e is not entry]

    def _submit(self, entry) -> None:
        from kafka.errors import KafkaError, MessageSizeTooLargeError

        try:
            entry[3] = self._ensure_producer().send(entry[0], value=entry[2], key=entry[1])
        except MessageSizeTooLargeError as error:  # retrying cannot help: drop it, loudly
            log.error("dropping an output to %s too large to send: %r", entry[0], error)
            self._pending = [e for e in self._pending if e is not entry]
        except KafkaError as error:  # no metadata yet (broker down): retried by flush
            log.debug("could not send to %s yet: %r", entry[0], error)
            entry[3] = None

    def flush(self, timeout: float | None = None, should_stop=lambda: False) -> bool:
        """Wait until every output is acknowledged; False if `timeout` or `should_stop` came
        first (the outputs then stay pending, to be flushed later)."""
        from kafka.errors import KafkaTimeoutError, MessageSizeTooLargeError

        deadline = None if timeout is None else time.monotonic() + timeout
        backoff = 0.1
        while self._pending:
            try:
                if self._producer is not None:
                    wait = 5.0 if deadline is None else max(0.0, deadline - time.monotonic())
                    self._producer.flush(timeout=min(wait, 5.0))
            except KafkaTimeoutError:
                pass
            still = []
            fatal = False
            for entry in self._pending:
                future = entry[3]
                if future is not None and future.is_done and future.exception is None:
                    self.sent += 1
                    continue
                if future is not None and future.is_done:
                    error = future.exception
                    if isinstance(error, MessageSizeTooLargeError):
                        log.error("dropping an output too large for the broker: %r", error)
                        continue
                    log.warning("output to %s failed (%r); resending", entry[0], error)
                    fatal = fatal or not getattr(error, "retriable", False)
                    entry[3] = None
                still.append(entry)
            self._pending = still
            if not self._pending:
                break
            if fatal:
                self._replace_producer()
            for entry in list(self._pending):
                if entry[3] is None:
                    self._submit(entry)
            if should_stop() or (deadline is not None and time.monotonic() >= deadline):
                return False
            if any(entry[3] is None for entry in self._pending):
                log.warning("outputs waiting for the broker; retrying in %.1fs", backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
        return True

    def _replace_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=1)
            except Exception:  # noqa: BLE001 - a broken producer may fail to close
                pass

    def close(self, timeout: float = 5.0) -> None:
        if self._producer is not None:
            self._producer.close(timeout=timeout)
            self._producer = None
