"""The service's outputs: predictions, alerts and dead letters, as JSON, to their topics.

A prediction::

    {"id": 7, "label": 1, "probability": 0.93, "labelled": true, "topic": "in",
     "partition": 0, "offset": 41, "samples_learned": 1200, "y": 1}

`label` and `probability` are null before the model knows a class; `samples_learned` counts
the labelled samples the model had taken once this message was (those a `gamma='scale'`
warm-up holds back included; in a group: the merged model's samples). Its key is the
message's, cut as a dead letter's (`kafka_io.dead_letter_key`).
An alert is the monitor's alert (`river_advsvm.monitor.Alert`) with `"alert"` (its type), the
message's `message_id`, `topic`, `partition` and `offset`. A dead letter is the envelope of
`river_advsvm.streams.kafka.dead_letter`.

Every output is strict JSON: a number that is not finite (NaN, infinity) is written as null,
never as the `NaN` or `Infinity` that strict parsers refuse.

"""

from __future__ import annotations

import dataclasses
import logging

import msgspec

from river_advsvm.streams import kafka as kafka_io

__all__ = ["DEAD_LETTER_BYTES", "Outputs", "alert_json", "prediction_json"]

log = logging.getLogger(__name__)

#: Bytes of the original value, and of its key, a dead letter keeps whole (a prediction's key
#: is cut there too): both in base64 (4/3 larger), the key again as the letter's own and the
#: envelope's fields stay under the 1 MB (`message.max.bytes`, 1,048,588) a Kafka broker takes
#: by default, so that the letter of any message is published, not refused by the broker. The
#: original stays in the input topic, at the letter's offset.
DEAD_LETTER_BYTES = 256 * 2**10


def _plain(value):
    """What msgspec cannot write itself: numpy scalars as numbers, anything else as text."""
    return value.item() if hasattr(value, "item") else str(value)


# msgspec writes NaN and infinities as null: outputs stay strict JSON.
_ENCODER = msgspec.json.Encoder(enc_hook=_plain)


def prediction_json(outcome, record, n_learned: int) -> bytes:
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
    return _ENCODER.encode(message)


def alert_json(alert, outcome, record) -> bytes:
    body = dataclasses.asdict(alert) if dataclasses.is_dataclass(alert) else {"detail": repr(alert)}
    message = {
        "alert": type(alert).__name__,
        **body,
        "message_id": outcome.sample.id,
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
    }
    return _ENCODER.encode(message)


class Outputs:
    """Sends what a message led to: its prediction and alerts, or its dead letter.

    Parameters
    ----------
    config
        The `ServiceConfig` (which topics; None drops that output).
    sink
        The `river_advsvm.streams.sink.OutputSink` they go through.
    counters
        A callable returning the state's counters (the state is replaced on reloads).
    published
        A callable returning the `river_advsvm.streams.output_log.Published` outputs of an
        earlier run: those are not sent again.

    """

    def __init__(self, config, sink, counters, published=None):
        self.config = config
        self.sink = sink
        self.counters = counters
        self.published = published
        # Codes of the dead letters logged at warning (the first of each; the rest at debug).
        self._codes_logged: set = set()

    def _send(self, topic: str, record, value: bytes, key: bytes | None = None) -> None:
        published = None if self.published is None else self.published()
        if not (published and published.take(topic, record)):
            self.sink.send(topic, value, key=key)

    def publish(self, outcome, record, n_learned: int) -> None:
        config = self.config
        if outcome.error is not None:
            code = outcome.error.code
            first = code not in self._codes_logged
            self._codes_logged.add(code)
            log.log(logging.WARNING if first else logging.DEBUG,
                    "dead letter (%s) at %s[%d]@%d: %s%s", code, record.topic, record.partition,
                    record.offset, kafka_io.dead_letter_reason(outcome.error),
                    "; more with this code are counted, and logged at debug level" if first
                    else "")
            if config.dead_letter_topic:
                envelope = kafka_io.dead_letter(record, outcome.error, DEAD_LETTER_BYTES)
                self._send(config.dead_letter_topic, record, envelope,
                           key=kafka_io.dead_letter_key(record, DEAD_LETTER_BYTES))
            return
        if config.predictions_topic:
            # Under the message's key, cut as a dead letter's: a key larger than the producer
            # takes would drop the prediction.
            self._send(config.predictions_topic, record,
                       prediction_json(outcome, record, n_learned),
                       key=kafka_io.dead_letter_key(record, DEAD_LETTER_BYTES))
        for alert in outcome.alerts:
            counters = self.counters()
            counters["alerts"] += 1
            kind = str(getattr(alert, "kind", type(alert).__name__))
            counters["alerts_by_kind"][kind] = counters["alerts_by_kind"].get(kind, 0) + 1
            if config.alerts_topic:
                self._send(config.alerts_topic, record, alert_json(alert, outcome, record))
            else:
                log.warning("alert: %r", alert)
