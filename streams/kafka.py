"""The service's message schema: decoding and validating input messages, dead-letter envelopes.

The Kafka clients are made in `river_advsvm.streams.clients`; outputs go out through
`river_advsvm.streams.sink`.

Input messages are UTF-8 JSON objects:

    {"id": "a-17", "x": {"age": 31, "height": 1.7}, "y": true}
    {"id": 18, "x": [0.0, 0.5, 1.0]}

- `id` (optional): a string (at most `MAX_TEXT_CHARS` characters) or a 64-bit integer,
  echoed in the outputs.
- `x` (required): the features, either an object of name -> number (River's dict; names are
  strings, refused by the model if they hold a NUL or a lone surrogate) or an array of numbers
  (named `0..d-1`, like `river.stream.iter_array`). Numbers are
  JSON numbers or booleans (as 1 and 0); NaN and Infinity (not JSON) and numbers beyond a
  float's range are refused here, values beyond the model's magnitude limit by the model.
- `y` (optional): the label, a string (at most `MAX_TEXT_CHARS` characters), integer, boolean
  or finite number. Absent or null means
  unlabelled: the message is only predicted.
- `id` and `y` are echoed as they came; any other key is ignored.

Anything else is a dead letter, with a machine-readable `code` (see `REASONS`) and a sentence.
`decode` does every check that needs no model; `check_against` the ones that do (a label
outside the two known classes, an array whose width differs from the model's).

Examples
--------

>>> from river_advsvm.streams import kafka
>>> sample = kafka.decode(b'{"id": 7, "x": [0.5, 1.0], "y": 1}', max_bytes=1024)
>>> sample.id, sample.x, sample.y, sample.labelled
(7, {0: 0.5, 1: 1.0}, 1, True)
>>> try:
...     kafka.decode(b'{"x": [1e999]}', max_bytes=1024)
... except kafka.InvalidMessage as error:
...     print(error.code, "-", error)
not_finite - x holds a number out of range (inf)
>>> kafka.encode({"a": 1.5}, y="cat", id="m1")
b'{"id":"m1","x":{"a":1.5},"y":"cat"}'

"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import typing

from river_advsvm.streams import missing_extra

try:
    import msgspec
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__, "kafka") from None

from river_advsvm.labels import INT64

__all__ = ["DECODE_REASONS", "MAX_REASON_CHARS", "MAX_TEXT_CHARS", "MODEL_REASONS", "REASONS",
           "InvalidMessage", "Sample", "check_against", "dead_letter", "dead_letter_key",
           "dead_letter_reason", "decode", "encode"]

#: Why `decode` and `check_against` refuse a message, by dead-letter code.
DECODE_REASONS = {
    "empty": "the message has no value (a tombstone)",
    "message_too_large": "the message is larger than the configured maximum (bytes)",
    "not_utf8": "the bytes are not UTF-8",
    "not_json": "the text is not JSON",
    "duplicate_key": "a JSON object repeats a key",
    "not_object": "the JSON is not an object",
    "bad_id": "id is neither a string of at most MAX_TEXT_CHARS characters nor a 64-bit "
              "integer",
    "missing_x": "there is no x",
    "bad_x": "x is neither an object nor an array",
    "empty_x": "x has no features",
    "not_a_number": "a feature value is not a number",
    "not_finite": "a feature value is NaN, infinite, or beyond a float's range",
    "bad_label": "y is not a string of at most MAX_TEXT_CHARS characters, 64-bit integer, "
                 "boolean or finite number",
    "unknown_label": "y is not one of the model's two classes",
    "wrong_width": "an array x has another length than the model's features",
}
#: Why the model refuses a sample (`river_advsvm.inputs.InvalidInput.code`), by code.
MODEL_REASONS = {
    "not_a_number": "a feature value is not a number",
    "not_finite": "a value the model must learn is NaN or infinite",
    "too_large": "a feature value is beyond the magnitude the model accepts",
    "bad_name": "a feature name the model cannot use",
    "too_many_features": "learning it would give the model more inputs than max_features",
    "bad_label": "a label the model cannot use",
    "third_class": "a third label for a binary model",
    "unknown_label": "a label outside the model's classes",
    "bad_shape": "features of the wrong shape",
    "invalid_input": "the model refused the sample",
}
#: Every reason a message can be dead-lettered for, by code. `internal_error` is a bug (ours or
#: the model's) met while processing the message: its traceback is in the service's log.
REASONS = {**MODEL_REASONS, **DECODE_REASONS,
           "internal_error": "processing the message raised an unexpected error"}

#: The longest string `id` or `y` (characters): both are echoed in every output of the message,
#: so they are bounded like every other field (a feature name by `inputs.MAX_NAME_LENGTH`).
MAX_TEXT_CHARS = 1000
#: A dead letter's `reason` is cut to this many characters: a refusal may quote what it refuses
#: (a repeated key, a feature name), which can be as long as the message.
MAX_REASON_CHARS = 1000

_MISSING = object()
#: Longest integer literal the strict decoder converts (a float holds ~309 digits at most).
_MAX_DIGITS = 400


class InvalidMessage(ValueError):
    """A message that goes to the dead-letter topic, with its `code` (see `REASONS`)."""

    def __init__(self, code: str, detail: str):
        super().__init__(detail)
        self.code = code


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """A valid message: `features` as sent (a dict, or a list for an array), `y` None when
    unlabelled."""

    id: str | int | None
    features: dict | list
    y: typing.Any
    labelled: bool

    @property
    def width(self) -> int | None:
        """The array's length when x came as an array, else None."""
        return len(self.features) if type(self.features) is list else None

    @property
    def x(self) -> dict:
        """The features as River takes them (an array's are named 0..d-1)."""
        features = self.features
        return features if type(features) is dict else dict(enumerate(features))


class _Message(msgspec.Struct):
    x: dict[str, float | bool] | list[float | bool]
    id: str | int | None | msgspec.UnsetType = msgspec.UNSET
    y: str | int | float | bool | None | msgspec.UnsetType = msgspec.UNSET


_FAST = msgspec.json.Decoder(_Message)


def decode(value: bytes | None, max_bytes: int) -> Sample:
    """Parse and validate one message value; raises `InvalidMessage` with a reason code.

    The common case is one pass of msgspec's typed decoder (the types are checked in C). It
    takes the last of repeated keys, so a message is also counted: when its bytes hold more
    colons than the keys it decoded to (a repeated key, or a colon in a string), or when the
    typed decoder refuses it, the strict decoder (the standard library, every key seen) decides
    and names the reason.
    """
    if value is None or len(value) == 0:
        raise InvalidMessage("empty", "the message value is empty")
    if len(value) > max_bytes:
        raise InvalidMessage("message_too_large",
                             f"{len(value)} bytes, over the {max_bytes} limit")
    try:
        message = _FAST.decode(value)
    except (msgspec.DecodeError, RecursionError):
        return _decode_strictly(value)
    x, keys = message.x, 1 + (message.id is not msgspec.UNSET) + (message.y is not msgspec.UNSET)
    if type(x) is dict:
        keys += len(x)
    id_, y = message.id, message.y
    if (value.count(b":") != keys or (type(id_) is int and id_ not in INT64)
            or (type(y) is int and y not in INT64)
            or (type(id_) is str and not _usable_text(id_))
            or (type(y) is str and not _usable_text(y))):
        return _decode_strictly(value)  # a repeated key, or values the strict rules judge
    if not x:
        raise InvalidMessage("empty_x", "x has no features")
    labelled = y is not msgspec.UNSET and y is not None
    id_ = None if id_ is msgspec.UNSET else id_
    return Sample(id=id_, features=x, y=y if labelled else None, labelled=labelled)


class _OutOfRange(str):
    """An integer literal too long to convert: kept as text, refused by the checks."""


def _parse_int(text: str):
    return int(text) if len(text) <= _MAX_DIGITS else _OutOfRange(text)


def _usable_text(text: str) -> bool:
    """At most `MAX_TEXT_CHARS` characters of valid UTF-8 (a JSON escape can make a lone
    surrogate, which no output could carry)."""
    if len(text) > MAX_TEXT_CHARS:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text_fault(text: str) -> str:
    if len(text) > MAX_TEXT_CHARS:
        return f"a string of {len(text)} characters, over the {MAX_TEXT_CHARS} allowed"
    return "a string holding a lone surrogate, which is not valid UTF-8"


def _no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise InvalidMessage("duplicate_key", f"key {key!r} appears twice in an object")
        obj[key] = value
    return obj


def _json_type(value) -> str:
    """The JSON name of a parsed value's type (what the sender wrote)."""
    names = {dict: "object", list: "array", str: "string", type(None): "null", bool: "boolean",
             int: "number", float: "number", _OutOfRange: "number"}
    return names.get(type(value), type(value).__name__)


def _describe(value) -> str:
    if isinstance(value, _OutOfRange):
        return f"an integer of {len(value.lstrip('-'))} digits"
    try:
        return json.dumps(value)[:40]
    except (TypeError, ValueError):
        return type(value).__name__


def _check_values(values, where: str) -> None:
    for v in values:
        kind = type(v)
        if kind is float:
            if not math.isfinite(v):
                raise InvalidMessage("not_finite", f"{where} holds a number out of range ({v})")
        elif kind is int:
            if abs(v) > 1.7e308:  # would become inf as a float
                raise InvalidMessage("not_finite", f"{where} holds an integer out of range")
        elif kind is _OutOfRange:
            raise InvalidMessage("not_finite", f"{where} holds {_describe(v)}, out of range")
        elif kind is not bool:
            raise InvalidMessage(
                "not_a_number", f"{where} holds {_describe(v)} (a JSON {_json_type(v)})"
            )


def _label(y):
    if type(y) is _OutOfRange or (type(y) is int and y not in INT64):
        raise InvalidMessage("bad_label", f"y is {_describe(y)}, out of range")
    if type(y) is str and not _usable_text(y):
        raise InvalidMessage("bad_label", f"y is {_text_fault(y)}")
    if isinstance(y, (str, bool, int)) or (isinstance(y, float) and math.isfinite(y)):
        return y
    raise InvalidMessage("bad_label", f"y is {_describe(y)}, not a usable label")


def _decode_strictly(value: bytes) -> Sample:
    """The standard library's parser with every check spelled out: slower, and exact about
    what is wrong."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidMessage("not_utf8", f"not UTF-8: {error}") from None
    try:
        # NaN and Infinity (not JSON, yet common) parse as floats: the checks below refuse
        # them where they are, with the reason of that place.
        message = json.loads(text, object_pairs_hook=_no_duplicates, parse_int=_parse_int)
    except json.JSONDecodeError as error:
        raise InvalidMessage("not_json", f"not JSON: {error}") from None
    except RecursionError:
        raise InvalidMessage("not_json", "JSON nested too deeply") from None
    if not isinstance(message, dict):
        raise InvalidMessage("not_object", f"a JSON {_json_type(message)}, not an object")

    id_ = message.get("id")
    if id_ is not None and type(id_) is not str and (type(id_) is not int
                                                     or id_ not in INT64):
        raise InvalidMessage("bad_id", f"id is {_describe(id_)}")
    if type(id_) is str and not _usable_text(id_):
        raise InvalidMessage("bad_id", f"id is {_text_fault(id_)}")
    if "x" not in message:
        raise InvalidMessage("missing_x", "the message has no x")
    x = message["x"]
    if isinstance(x, dict):
        _check_values(x.values(), "x")
    elif isinstance(x, list):
        _check_values(x, "x")
    else:
        raise InvalidMessage("bad_x", f"x is a JSON {_json_type(x)}")
    if not x:
        raise InvalidMessage("empty_x", "x has no features")
    x = {k: float(v) if type(v) is int else v for k, v in x.items()} if isinstance(x, dict) \
        else [float(v) if type(v) is int else v for v in x]
    y = message.get("y")
    labelled = y is not None
    return Sample(id=id_, features=x, y=_label(y) if labelled else None, labelled=labelled)


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
    """A message in the input schema: `x` a dict, or a sequence of numbers (an array).

    A dict's names are JSON's keys, so text: a dict of the features 0..d-1 in order (a row of
    River's `iter_array`) is sent as the array the service names so; other non-str names are a
    `ValueError` (JSON would make 0 and "0" one name).
    """
    if isinstance(x, dict) and not all(isinstance(name, str) for name in x):
        if list(x) != list(range(len(x))):
            raise ValueError("an object message names its features with str (JSON's keys are "
                             "text); features named 0..d-1 are sent as an array")
        x = list(x.values())
    if not isinstance(x, dict):
        x = [float(v) for v in x]
    message = {} if id is None else {"id": id}
    message["x"] = x
    if y is not _MISSING and y is not None:
        message["y"] = y.item() if hasattr(y, "item") else y
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode()


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def dead_letter_reason(error: InvalidMessage) -> str:
    """Why a message is a dead letter, cut to `MAX_REASON_CHARS` characters (a refusal quoting
    a huge name is as long as the message)."""
    reason = str(error)
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[:MAX_REASON_CHARS - 3] + "..."
    return reason


def dead_letter(record, error: InvalidMessage, max_bytes: int = 2**20) -> bytes:
    """The dead-letter envelope of a consumed record: where it was, why, and its exact bytes.

    `value_b64` and `key_b64` hold the original bytes in base64 (null when absent). A value
    longer than `max_bytes` is cut there and `truncated` is true, a key likewise with
    `key_truncated`, so that a huge message or key cannot make its own dead letter too large
    to publish; `value_bytes` and `key_bytes` are the full lengths. The `reason` is cut to
    `MAX_REASON_CHARS` characters.
    """
    value, key = record.value, record.key
    envelope = {
        "reason": dead_letter_reason(error),
        "code": error.code,
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "value_b64": _b64(_cut(value, max_bytes)),
        "key_b64": _b64(_cut(key, max_bytes)),
        "value_bytes": None if value is None else len(value),
        "truncated": value is not None and len(value) > max_bytes,
        "key_bytes": None if key is None else len(key),
        "key_truncated": key is not None and len(key) > max_bytes,
    }
    return json.dumps(envelope, separators=(",", ":")).encode()


def dead_letter_key(record, max_bytes: int = 2**20) -> bytes | None:
    """The key a dead letter is published under: the record's, cut as in its envelope."""
    return _cut(record.key, max_bytes)


def _cut(data: bytes | None, max_bytes: int) -> bytes | None:
    return None if data is None else data[:max_bytes]
