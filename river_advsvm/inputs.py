"""The River boundary: feature dicts, frames and rows in, validated numpy arrays out.

Everything that reaches a model passes through here first, and everything that could break the
model's arithmetic is refused here, before the model changes any state:

- values must be numbers (bool, int, float, numpy numbers) with `|v| <= MAX_ABS_VALUE`
  (1e15). The bound keeps every product the models form finite, with room to spare, even in
  float32: a kernel distance over `d <= 10^6` inputs is at most `4 d 1e30 = 4e36 < 3.4e38`,
  and a random-feature projection `w . x` at most `d 1e15 max|w| < 1e37` for the bandwidths
  the models accept (`kernels.MAX_GAMMA`);
- NaN means "missing" at inference (River's scalers emit it for a feature they have not seen
  yet): the feature is dropped, as if absent. Learning refuses it;
- feature names must be str, int, bool, finite float, or tuples of those (at most
  `MAX_NAME_DEPTH` deep and `MAX_NAME_LENGTH` characters once encoded, counted as written:
  a character of any script is one), so that every name has
  one canonical encoding (`encode_name`), used for hashing and for checkpoints.

Models keep one `FeatureIndex` that gives every feature name a column, in order of first
appearance. Column order is bookkeeping only: nothing random depends on it (see `kernels`).

"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from decimal import Decimal
import struct
import typing

import numpy as np

__all__ = [
    "MAX_ABS_VALUE",
    "MAX_NAME_DEPTH",
    "MAX_NAME_LENGTH",
    "FeatureIndex",
    "InvalidInput",
    "check_batch",
    "check_name_texts",
    "check_storable_names",
    "decode_name",
    "describe",
    "dict_values",
    "encode_name",
    "frame_values",
    "in_row",
    "is_number",
    "is_whole",
    "key_hash",
    "plain_number",
    "shown_name",
]

#: Largest accepted absolute feature value (see the module docstring for why it is enough).
MAX_ABS_VALUE = 1e15
#: Longest accepted feature name, in characters of its canonical JSON encoding.
MAX_NAME_LENGTH = 1000
#: `encode_name`'s fast paths: `["s", "..."]` is 9 characters around the escaped text.
_SHORT_STR = (MAX_NAME_LENGTH - 9) // 6
_SHORT_INT = 10**18
#: Deepest accepted nesting of tuple feature names.
MAX_NAME_DEPTH = 4


class InvalidInput(ValueError):
    """A sample the model refuses; `code` says why in one word (a dead-letter code).

    Codes: `not_a_number`, `not_finite`, `too_large`, `bad_name`, `too_many_features`,
    `bad_label`, `third_class`, `unknown_label`, `bad_shape`, `invalid_input`.
    """

    def __init__(self, message: str, code: str = "invalid_input"):
        super().__init__(message)
        self.code = code


def plain_number(value):
    """A numpy scalar (a parameter taken from an array, say) as the Python value it equals;
    anything else as it is."""
    return value.item() if isinstance(value, np.generic) else value


def is_whole(value) -> bool:
    """Whether a parameter is a Python int, and not a bool (`True` is an int to Python, not a
    count to a user)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_count(name: str, value) -> int:
    """`value` as a plain int (a numpy integer, a count taken from an array, is the int it
    holds); ValueError naming `name` unless it is a whole number >= 1 (not a float, a str, a
    bool or None)."""
    whole = plain_number(value)
    if not (is_whole(whole) and whole >= 1):
        raise ValueError(f"{name} must be a whole number >= 1, got {describe(value)}")
    return whole


def check_flag(name: str, value) -> bool:
    """`value` as a bool (numpy's too); ValueError naming `name` for anything else: a str
    such as "no" would otherwise count as true."""
    value = plain_number(value)
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {describe(value)}")
    return value


def is_number(value) -> bool:
    """Whether a parameter is a real number, and not a bool (`is_whole`'s reason)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_number(name: str, value, accept: typing.Callable[[float], bool], condition: str) -> None:
    """ValueError naming `name` unless `value` is a finite real number (not a bool) for which
    `accept` holds; `condition` says which, for the message."""
    if not (is_number(value) and math.isfinite(value) and accept(value)):
        raise ValueError(f"{name} must be a finite number {condition}, got {describe(value)}")


def check_box(bounds) -> tuple[float, float] | None:
    """`bounds` as `(lo, hi)` floats, or None; ValueError unless finite with lo < hi."""
    if bounds is None:
        return None
    if not (isinstance(bounds, (tuple, list)) and len(bounds) == 2
            and all(is_number(b) and math.isfinite(b) for b in bounds) and bounds[0] < bounds[1]):
        raise ValueError("bounds must be None or (lo, hi) with finite lo < hi, got "
                         f"{describe(bounds)}")
    return float(bounds[0]), float(bounds[1])


#: How far outside a box, in units of its width, an input counts as rounding (a min-max
#: scaler's 1.0000000000000002 for 1): the attacks and certificates take it on the box's edge.
BOX_ROUNDING = 1e-9


def check_inside(values: np.ndarray, bounds: tuple[float, float] | None) -> bool:
    """InvalidInput unless every value lies in the box `bounds`, give or take rounding
    (`BOX_ROUNDING`): outside it, a threat set (the ball intersected with the box) would not
    hold the sample itself. Returns whether every value lies in the box itself."""
    if bounds is None or not values.size:
        return True
    low, high = float(values.min()), float(values.max())
    slack = BOX_ROUNDING * (bounds[1] - bounds[0])
    if low < bounds[0] - slack or high > bounds[1] + slack:
        # (repr: the shortest digits that tell a value apart from the bound)
        raise InvalidInput(
            f"inputs range over [{low!r}, {high!r}], outside bounds ({float(bounds[0])!r}, "
            f"{float(bounds[1])!r}): the threat set would be empty; pass the box the data "
            "lives in, or bounds=None")
    return bounds[0] <= low and high <= bounds[1]


def check_present_inside(values: np.ndarray, bounds: tuple[float, float] | None) -> bool:
    """`check_inside` for the inputs a sample has: a 0 is an absent input (a missing one in a
    frame too), which a certificate over the sample's own inputs does not move."""
    return check_inside(values[values != 0], bounds)


def onto_box(values: np.ndarray, bounds: tuple[float, float] | None,
             present_only: bool = False) -> np.ndarray:
    """`values` with the inputs outside the box by rounding moved onto its edge (a copy if any
    moves); InvalidInput, as `check_inside`, if one lies further out. With `present_only`,
    as `check_present_inside`: a 0 stays (an absent input)."""
    if (check_present_inside if present_only else check_inside)(values, bounds):
        return values
    moved = np.clip(values, *bounds)
    return np.where(values != 0, moved, values) if present_only else moved


def describe(value) -> str:
    """A value in plain Python terms for an error message: `'x' (a str)`, `nan`, `None`."""
    if isinstance(value, np.ndarray):  # (numpy's repr is no way to show a value to a user)
        return f"an array of shape {tuple(value.shape)}"
    if isinstance(value, (np.datetime64, np.timedelta64)):  # (`item` makes them datetimes)
        return f"{value} (a numpy {type(value).__name__})"
    if isinstance(value, np.generic):
        value = value.item()
    if type(value) in (tuple, list):  # (bounds=(0, np.float64(1)): its numbers as numbers)
        value = type(value)(_plain(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        if abs(value) < 10**18:
            return repr(value)
        return f"an integer of about {round(value.bit_length() * math.log10(2))} digits"
    text = _repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    kind = type(value).__name__
    # (Not "an" before a capital U: a UUID, a UserDict.)
    return f"{text} ({'an' if kind[0] in 'aeiouAEIO' else 'a'} {kind})"


# -- names ----------------------------------------------------------------------------------------


def _plain(value):
    """`value` with the numpy scalars in it (a tuple's too) as the Python values they hold."""
    if type(value) is tuple:
        return tuple(_plain(v) for v in value)
    return plain_number(value)


def shown_name(name) -> str:
    """A feature name as a message shows it: its repr, a numpy scalar's as the Python value it
    holds (`'a'` for `np.str_('a')`, `3` for `np.int64(3)`: names that are one name)."""
    return _repr(_plain(name))


def _repr(value) -> str:
    """`repr(value)`, or what it is when Python refuses to write it (an int, or a tuple
    holding one, past 4,300 digits)."""
    try:
        return repr(value)
    except ValueError:
        return "a value holding an integer too long to show"


def _encode(name, depth: int):
    if isinstance(name, np.generic):
        name = name.item()
    if isinstance(name, bool):
        return ["b", name]
    if isinstance(name, numbers.Integral):
        value = int(name)
        # (Past 4 bits a digit it has more digits than a name may have characters, and past
        # 4,300 digits Python refuses to write it at all.)
        if value.bit_length() > 4 * MAX_NAME_LENGTH:
            raise InvalidInput(f"feature name {describe(value)} is too long: its encoding is "
                               f"longer than {MAX_NAME_LENGTH} characters", "bad_name")
        return ["i", value]
    if isinstance(name, numbers.Real):
        value = float(name)
        if not math.isfinite(value):
            raise InvalidInput(f"feature name {describe(name)} is not allowed: a float name "
                               "must be finite", "bad_name")
        return ["f", value + 0.0]  # -0.0 == 0.0 as a dict key: one encoding for both
    if isinstance(name, str):
        # The text itself: str() of a str subclass may be other text (a `(str, Enum)`
        # member's is its qualified name), while as a dict key it is its text.
        return ["s", str.__str__(name)]
    if isinstance(name, tuple) and depth < MAX_NAME_DEPTH:
        return ["t", [_encode(n, depth + 1) for n in name]]
    raise InvalidInput(
        f"feature name {describe(name)} is not supported: use str, int, bool, finite float, "
        f"or tuples of those (at most {MAX_NAME_DEPTH} deep)", "bad_name")


def encode_name(name) -> list:
    """The canonical, JSON-able encoding of a feature name; `InvalidInput` if it has none.

    Tagged by type, so `1`, `1.0`, `'1'`, `True` and `(1,)` all differ, and injective: two
    names with the same encoding are the same name.
    """
    # The common names, without measuring their text: a str of at most `_SHORT_STR`
    # characters cannot pass the bound (JSON writes a character as at most 6), nor an int of
    # at most 18 digits.
    kind = type(name)
    if kind is str and len(name) <= _SHORT_STR:
        return ["s", name]
    if kind is int and -_SHORT_INT < name < _SHORT_INT:
        return ["i", name]
    encoded = _encode(name, 0)
    # Characters as written, not as escaped: a name in another script is as long as its text.
    if len(json.dumps(encoded, ensure_ascii=False)) > MAX_NAME_LENGTH:
        raise InvalidInput(
            f"feature name {describe(name)} is too long: its encoding is longer than "
            f"{MAX_NAME_LENGTH} characters (a str name may have {MAX_NAME_LENGTH - 9})",
            "bad_name")
    return encoded


def check_storable_names(names) -> None:
    """`InvalidInput` unless every name can be stored and read back: it has an encoding
    (`encode_name`), and its text is valid UTF-8 without NUL (`check_name_texts`). What a
    model checks of a new input's name, and of the names a checkpoint gives it."""
    for name in names:
        encode_name(name)
    check_name_texts(names)


def check_name_texts(names: list) -> None:
    """`InvalidInput` if a name's text holds a NUL or is not valid UTF-8 (a lone surrogate):
    either would make the saved model, and any JSON naming the input, unreadable elsewhere."""
    texts = [n if type(n) is str else "".join(_name_texts(n)) for n in names]
    joined = "".join(texts)  # (one search and one encoding for all of them)
    if "\0" not in joined and is_utf8(joined):
        return
    for name, text in zip(names, texts):
        if "\0" in text or not is_utf8(text):
            raise InvalidInput(f"feature name {describe(name)} holds a NUL or a lone "
                               "surrogate: names must be valid UTF-8 text", "bad_name")


def _name_texts(name) -> typing.Iterator[str]:
    """The strings in a name (a tuple name holds several)."""
    if isinstance(name, str):
        yield name
    elif isinstance(name, tuple):
        for part in name:
            yield from _name_texts(part)


def is_utf8(text: str) -> bool:
    """Whether `text` encodes as UTF-8 (no lone surrogate: a non-UTF-8 byte of argv or of the
    environment becomes one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Hashes of str and int names seen lately: a model rebuilt from a checkpoint (a group's fold,
# a restart) hashes the same names again. Bounded: an endless stream of new names is not kept.
_HASHES: dict = {}
_CACHED_TYPES = (str, int)
_MAX_CACHED_HASHES = 1 << 16
# ...and in characters (of their encodings, at least those of their text): names unknown to a
# model are hashed too, and 65,536 of 1000 characters each would hold over 250 MB.
_MAX_CACHED_CHARS = 1 << 22
_cached_chars = 0


def _forget_hashes() -> None:
    """Empty the cache of name hashes (when full; a benchmark measuring a model without it)."""
    global _cached_chars
    _HASHES.clear()
    _cached_chars = 0


def key_hash(key) -> int:
    """A 64-bit hash of a feature name that is stable across processes and platforms.

    Python's `hash()` of a str changes from one process to the next, so it cannot name a
    column in a checkpoint; this hashes the name's canonical encoding (`encode_name`),
    under which numpy scalars hash like the Python values they equal. Raises `InvalidInput`
    for a name that has no encoding.
    """
    global _cached_chars
    exact = type(key) in _CACHED_TYPES  # not bool or float: 1, 1.0 and True hash apart
    if exact and (known := _HASHES.get(key)) is not None:
        return known
    canonical = json.dumps(encode_name(key), separators=(",", ":"))
    digest = hashlib.blake2b(canonical.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    if exact:
        full = _cached_chars + len(canonical) > _MAX_CACHED_CHARS
        if full or len(_HASHES) >= _MAX_CACHED_HASHES:
            _forget_hashes()
        _HASHES[key] = value
        _cached_chars += len(canonical)
    return value


def decode_name(encoded):
    """The feature name that `encode_name` encoded; `ValueError` for anything else."""
    if not (isinstance(encoded, list) and len(encoded) == 2 and type(encoded[0]) is str):
        # (a checkpoint's: Python's own unpacking errors would say nothing of a name)
        raise ValueError(f"bad feature name {encoded!r:.80}: not a [tag, value] pair")
    tag, value = encoded
    if tag == "t" and isinstance(value, list):
        return tuple(decode_name(v) for v in value)
    types = {"b": bool, "i": int, "f": float, "s": str}
    if tag not in types or type(value) is not types[tag]:
        if not (tag == "f" and type(value) is int):  # JSON writes 1.0 back as 1.0, but be lenient
            raise ValueError(f"bad feature name {encoded!r}")
    return types[tag](value)


# -- values ---------------------------------------------------------------------------------------


def _is_number(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        # A 0-d array is a number to numpy too: np.asarray([1.0, np.array(2.0)]) is numeric.
        return value.dtype.kind in "biuf"
    return isinstance(value, numbers.Real)


def _first_bad_value(names: typing.Sequence, raw: typing.Sequence,
                     rows: bool = False) -> InvalidInput:
    """The error for the first value among `raw` that is not a number within bounds; with
    `rows`, `raw` is a column of a batch, and the error names the value's row."""
    for i, (name, value) in enumerate(zip(names, raw)):  # an error path: a Python loop is fine
        row = i if rows else None
        if not _is_number(value):
            # (A Decimal is a number, but not a float's kind: a database's NUMERIC column)
            hint = (": convert Decimal values with float()" if isinstance(value, Decimal) else
                    ": encode a category first (River's preprocessing.OneHotEncoder)"
                    if isinstance(value, str) else "")
            return InvalidInput(
                f"{_feature(name, row)} is {describe(value)}; feature values must be "
                f"numbers{hint}", "not_a_number")
        if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
            if abs(int(value)) > MAX_ABS_VALUE:
                return _too_large(name, value, row)
    return InvalidInput("feature values must be numbers", "not_a_number")


def _too_large(name, value, row: int | None = None) -> InvalidInput:
    return InvalidInput(
        f"{_feature(name, row)} is {describe(value)}, beyond the accepted magnitude "
        f"{MAX_ABS_VALUE:g}; rescale the input", "too_large")


def _in_row(row: int | None) -> str:
    """How an error names the row of a batch it is of (by position): "" for none."""
    return "" if row is None else f"row {row} of the batch (counting from 0): "


def in_row(error: InvalidInput, row: int) -> InvalidInput:
    """`error`, of row `row` of a batch."""
    return InvalidInput(f"{_in_row(row)}{error}", error.code)


def _feature(name, row: int | None = None) -> str:
    """How an error names a feature: after the row of a batch (by position), if one."""
    return f"{_in_row(row)}feature {shown_name(name)}"


def _bounds_error(name, value, needs: str | None = None, row: int | None = None
                  ) -> InvalidInput:
    value = float(value)
    feature = _feature(name, row)
    if math.isnan(value):
        if needs is not None:
            return InvalidInput(f"{feature} is nan; {needs} needs finite values", "not_finite")
        return InvalidInput(
            f"{feature} is nan; learning needs finite values "
            "(at prediction time NaN counts as a missing feature)", "not_finite")
    if math.isinf(value):
        return InvalidInput(f"{feature} is {value!r}; feature values must be finite",
                            "not_finite")
    return _too_large(name, value, row)


def _is_pandas_na(value) -> bool:
    """Whether `value` is pandas' missing marker `pd.NA` (without importing pandas)."""
    kind = type(value)
    return kind.__name__ == "NAType" and kind.__module__.startswith("pandas")


def _numeric(names: typing.Sequence, raw: typing.Sequence, rows: bool = False) -> np.ndarray:
    """`raw` as float64 if every entry is a number, else the error naming the first bad one
    (and its row, with `rows`: `raw` is a column of a batch). pandas' `NA` (a nullable
    column's missing value) is NaN: missing at prediction time, an error when learning, as
    NaN is."""
    # np.asarray rather than np.fromiter: it keeps strings and None visible in the dtype
    # instead of quietly parsing "1.5" as 1.5.
    try:
        values = np.asarray(raw)
    except (ValueError, TypeError, OverflowError):  # ragged sequences among the values
        values = None
    if values is not None and values.dtype.kind == "O" and any(map(_is_pandas_na, raw)):
        raw = [math.nan if _is_pandas_na(v) else v for v in raw]
        return _numeric(names, raw, rows)
    if values is None or values.ndim != 1 or values.dtype.kind not in "biuf":
        if values is not None and values.dtype.kind == "O" and all(map(_is_number, raw)):
            error = _first_bad_value(names, raw, rows)  # huge ints: the only numbers left here
            if error.code == "too_large":
                raise error
            return np.array([float(v) for v in raw])
        raise _first_bad_value(names, raw, rows)
    return values.astype(np.float64, copy=False)


def _check_bounds(names: typing.Sequence, values: np.ndarray, missing_ok,
                  needs: str | None = None):
    """Refuse non-finite and too large values; with `missing_ok`, NaN entries are returned as
    a mask of entries to drop instead. For a matrix, `missing_ok` may also say it row by row
    (a sequence of bools). `needs` names what refuses NaN, for the message (default:
    learning)."""
    # Two reductions and no temporary: NaN fails both comparisons, as inf does one.
    if values.size == 0 or (values.max() <= MAX_ABS_VALUE and values.min() >= -MAX_ABS_VALUE):
        return None
    inside = np.abs(values) <= MAX_ABS_VALUE
    rows_ok = np.asarray(missing_ok, dtype=bool)
    missing = np.isnan(values) & (rows_ok.reshape(-1, 1) if values.ndim == 2 else rows_ok)
    bad = ~inside & ~missing
    if bad.any():
        flat = int(np.flatnonzero(bad)[0])
        column = flat % len(names) if values.ndim == 2 else flat
        row = flat // len(names) if values.ndim == 2 and len(values) > 1 else None
        raise _bounds_error(names[column], values.flat[flat], needs, row)
    return missing


def _plain_floats(x: dict) -> np.ndarray | None:
    """The values of `x` as float64 when they are plain numbers within bounds, else None.

    The common case, fast: Python's `sum` runs over floats, ints and bools in C and fails or
    leaves the float/int world on anything else (a str or None raises, a Decimal, a complex or
    an array makes the total one of those), then `struct` packs the values in one call, each
    through its `__float__`, as numpy would convert it.
    Anything that does not pass, NaN and out-of-bounds values included, returns None, and the
    general path (`_numeric`, `_check_bounds`) decides and words the error. (An object written
    to add to a float as a float and to convert with `__float__` passes as that float. A dict
    of numpy scalars after a first Python number may show numpy's overflow warning here when
    their sum overflows their own type; the general path then converts them exactly.)
    """
    values = x.values()
    if values and type(next(iter(values))) not in (float, int):
        return None  # numpy scalars, say: their arithmetic would make the sum slower than numpy
    try:
        total = sum(values)
    except Exception:  # whatever a value's own arithmetic raises, the general path handles it
        return None
    if type(total) is not float and type(total) is not int:
        return None
    n = len(values)
    array = np.empty(n)
    try:  # struct keeps its own bounded cache of compiled formats
        struct.pack_into(f"{n}d", array, 0, *values)
    except Exception:  # as for the sum: the general path decides
        return None
    if n and not (array.max() <= MAX_ABS_VALUE and array.min() >= -MAX_ABS_VALUE):
        return None
    return array


def dict_values(x: dict, missing_ok: bool = False,
                needs: str | None = None) -> tuple[list, np.ndarray]:
    """Names and float values of a feature dict, or `InvalidInput`.

    With `missing_ok` (inference), NaN values are dropped with their names. Without it, the
    message for a NaN says learning needs finite values, or `needs` does ("the attack PGD").
    """
    if not isinstance(x, dict):
        raise InvalidInput(f"x must be a dict of features, got a {type(x).__name__}", "bad_shape")
    names = list(x)
    values = _plain_floats(x)
    if values is not None:
        return names, values
    return _checked_values(names, list(x.values()), missing_ok, needs)


def _checked_values(names: list, raw: list, missing_ok: bool,
                    needs: str | None = None) -> tuple[list, np.ndarray]:
    """`dict_values`' general path: any value, each checked (`_plain_floats` is its shortcut)."""
    values = _numeric(names, raw)
    missing = _check_bounds(names, values, missing_ok, needs)
    if missing is not None:
        keep = ~missing
        names = [n for n, k in zip(names, keep.tolist()) if k]
        values = values[keep]
    return names, values


def check_batch(X) -> None:
    """`InvalidInput` unless `X` is a batch the models take: a 2-D numpy array (its columns are
    features 0..d-1) or a pandas DataFrame."""
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise InvalidInput(f"expected a 2-D array of samples, got shape {X.shape}",
                               "bad_shape")
    elif not (hasattr(X, "columns") and hasattr(X, "to_numpy")):
        raise InvalidInput(
            f"expected a pandas DataFrame or a 2-D numpy array, got a {type(X).__name__}",
            "bad_shape")


def frame_values(X, missing_ok=False, needs: str | None = None) -> tuple[list, np.ndarray]:
    """Column names and a float matrix from a pandas DataFrame or a 2-D numpy array.

    A numpy array's columns are named 0..d-1, as `river.stream.iter_array` names them; a
    masked array's masked entries are NaN. With `missing_ok` (inference), NaN entries become
    0: absent, in River's sparse semantics; `missing_ok` may also be one bool per row. `needs`
    is `dict_values`'.
    """
    check_batch(X)
    if isinstance(X, np.matrix):  # (`*` of matrices is their product: an array's rows)
        X = np.asarray(X)
    if isinstance(X, np.ndarray):
        names = list(range(X.shape[1]))
        values = X
        if isinstance(X, np.ma.MaskedArray):  # a masked entry is missing, as NaN is
            values = np.where(np.ma.getmaskarray(X), np.nan, np.ma.getdata(X))
    else:
        names = list(X.columns)
        if len(set(names)) != len(names):
            seen = set()
            twice = next(n for n in names if n in seen or seen.add(n))
            raise InvalidInput(f"feature names (columns) must be unique: {shown_name(twice)} "
                               "is there twice", "bad_name")
        values = X.to_numpy()
    if values.dtype.kind not in "biuf":
        # Column by column, each value checked (and pandas' NA read as NaN). A frame's columns
        # are taken as they are: its matrix casts them to one type, and one complex column
        # makes every number complex (the error then named the first column).
        if isinstance(X, np.ndarray):
            columns = [_numeric([name] * len(values), list(values[:, j]), rows=True)
                       for j, name in enumerate(names)]
        else:
            columns = [_frame_column(name, X.iloc[:, j]) for j, name in enumerate(names)]
        values = np.array(columns, dtype=np.float64).T.reshape(values.shape)
    values = values.astype(np.float64, copy=False)
    missing = _check_bounds(names, values, missing_ok, needs)
    if missing is not None:
        values = np.where(missing, 0.0, values)
    return names, values


def _frame_column(name, column) -> np.ndarray:
    """One column of a DataFrame as numbers (a nullable one's NA as NaN), else the error
    naming its first value that is not a number."""
    values = column.to_numpy()
    if values.dtype.kind in "biuf":
        return values
    return _numeric([name] * len(values), list(column), rows=True)


def rows_values(rows: typing.Sequence, missing_ok=False) -> list[tuple[list, np.ndarray]]:
    """`dict_values` of each feature dict in `rows`; `missing_ok` is one bool for all of them
    or one per row. An error names the row, as a frame's does."""
    if isinstance(missing_ok, bool):
        missing_ok = [missing_ok] * len(rows)
    out = []
    for i, (x, ok) in enumerate(zip(rows, missing_ok, strict=True)):
        try:
            out.append(dict_values(x, ok))
        except InvalidInput as error:
            raise in_row(error, i) from None
    return out


# -- the index ------------------------------------------------------------------------------------

_NO_HASHES = np.empty(0, dtype=np.uint64)


class Columns(typing.NamedTuple):
    """Where the features of a list of names go in a `FeatureIndex` (see `FeatureIndex.lookup`)."""

    positions: np.ndarray  # the column of each name, -1 if unknown
    identity: bool  # the names are exactly the columns 0..D-1, in order
    complete: bool  # every name has a column
    known: np.ndarray  # the indices of the names with a column
    known_columns: np.ndarray  # their columns
    unknown: np.ndarray  # the indices of the names without a column
    # For each column, the index of the name it has, when the names hold every column (the
    # usual row of a stream): the row over the columns is then one `take`. None otherwise.
    gather: np.ndarray | None


class FeatureIndex:
    """Columns for feature names, in order of first appearance, with their stable hashes."""

    def __init__(self):
        self.names: list = []
        self.position: dict = {}
        self._hashes = np.empty(16, dtype=np.uint64)
        self._last_names: list | None = None
        self._last: Columns | None = None

    def __getstate__(self) -> dict:
        # The lookup cache is not state: a pickle does not depend on which rows were looked
        # up (nor does a call refused after its lookup change one).
        return {**self.__dict__, "_last_names": None, "_last": None}

    def __len__(self) -> int:
        return len(self.names)

    @property
    def hashes(self) -> np.ndarray:
        return self._hashes[: len(self.names)]

    def lookup(self, names: list) -> Columns:
        """The columns of `names` in this index."""
        # Streams usually repeat the same names in the same order: one list comparison then
        # replaces a dict lookup per feature. The list last matched is kept, so that rows
        # sharing their key objects (River's iter_array, iter_pandas) compare by identity.
        if names is not self._last_names and names == self._last_names:
            self._last_names = names
        if names is self._last_names:
            return self._last
        get = self.position.get
        positions = np.fromiter((get(n, -1) for n in names), dtype=np.intp, count=len(names))
        identity = len(names) == len(self.names) and bool(
            (positions == np.arange(len(names))).all()
        )
        known = np.flatnonzero(positions >= 0)
        known_columns = positions[known]
        gather = None
        if len(known) == len(self.names) and not identity:  # (names are distinct)
            gather = np.empty(len(known), dtype=np.intp)
            gather[known_columns] = known
        self._last_names = names
        self._last = Columns(positions, identity, len(known) == len(names), known,
                             known_columns, np.flatnonzero(positions < 0), gather)
        return self._last

    def positions(self, names: list) -> np.ndarray:
        """The column of each name, -1 where the name is unknown."""
        return self.lookup(names).positions

    @staticmethod
    def hash_names(names: list) -> np.ndarray:
        """Stable hashes of `names`; raises `InvalidInput` for a name that cannot be hashed."""
        if not names:
            return _NO_HASHES
        return np.fromiter((key_hash(n) for n in names), dtype=np.uint64, count=len(names))

    def add(self, names: list, hashes: np.ndarray) -> None:
        """Give a column to each of `names` (names the index does not know yet)."""
        start = len(self.names)
        end = start + len(names)
        if end > len(self._hashes):  # amortised growth: no copy per new name
            grown = np.empty(max(end, 2 * len(self._hashes)), dtype=np.uint64)
            grown[:start] = self._hashes[:start]
            self._hashes = grown
        self._hashes[start:end] = hashes
        for n in names:
            self.position[n] = len(self.names)
            self.names.append(n)
        self._last_names = None

    def dense(self, names: list, values: np.ndarray) -> tuple[np.ndarray, list, np.ndarray]:
        """Split samples into a dense matrix over the known columns and the unknown remainder.

        Returns `(V, unknown_names, U)`: `V` has one column per known name (0 where a sample
        lacks it), `U` holds the values of the names the index does not know.

        """
        values = np.atleast_2d(values)
        columns = self.lookup(names)
        n = values.shape[0]
        if columns.identity:
            return values, [], np.empty((n, 0))
        V = self._over_columns(values, columns)
        if columns.complete:
            return V, [], np.empty((n, 0))
        return V, [names[j] for j in columns.unknown.tolist()], values[:, columns.unknown]

    def _over_columns(self, values: np.ndarray, columns: Columns) -> np.ndarray:
        """A row (or rows) of values for `columns`' names as values over the index's columns,
        0 where a column's name is not among them."""
        if columns.gather is not None:
            return values.take(columns.gather, axis=-1)
        out = np.zeros((*values.shape[:-1], len(self.names)))
        out[..., columns.known_columns] = values.take(columns.known, axis=-1)
        return out

    def split_row(self, names: list, row: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
        """One sample as `(values over the known columns, nonzero values of unknown names,
        those names)`: an absent input and a zero one are the same."""
        columns = self.lookup(names)
        if columns.identity:
            return row, row[:0], []
        v = self._over_columns(row, columns)
        if columns.complete:
            return v, row[:0], []
        u = row.take(columns.unknown)
        if not np.count_nonzero(u):
            return v, row[:0], []
        nonzero = u != 0
        return v, u[nonzero], [names[j] for j in columns.unknown[nonzero].tolist()]
