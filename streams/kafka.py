"""The service's message schema: decoding and validating input messages, dead-letter envelopes.

The Kafka clients are made in `streams.clients`; outputs go out through `streams.sink`.

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
import math
import typing

__all__ = ["REASONS", "InvalidMessage", "Sample", "check_against", "dead_letter", "decode",
           "encode"]

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
