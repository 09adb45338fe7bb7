"""Input names as two plain arrays, for checkpoints.

A model may know a million inputs whose names are up to `inputs.MAX_NAME_LENGTH` characters
once encoded: far more text than a checkpoint's JSON metadata may hold
(`checkpoint.MAX_META_BYTES`). A checkpoint keeps them in a table of two numeric arrays
instead, and refers to a name by its position in the table:

- `text` (uint8): each name's canonical encoding (`inputs.encode_name`) as compact JSON in
  UTF-8 (characters beyond ASCII as themselves, not escaped), one after the other;
- `lengths` (uint16): the length of each one in bytes, 1 to `ENTRY_BYTES`.

Reading treats the table as hostile: each entry must be exactly the encoding of a name (so one
name has one entry, and two entries never name the same input), and no entry may appear twice.

Examples
--------

>>> from river_advsvm import inputs, name_table
>>> encoded = [inputs.encode_name(n) for n in ["age", 3, ("pixel", 7)]]
>>> text, lengths = name_table.to_arrays([name_table.entry(e) for e in encoded])
>>> bytes(text)
b'["s","age"]["i",3]["t",[["s","pixel"],["i",7]]]'
>>> lengths.tolist()
[11, 7, 29]
>>> name_table.from_arrays(text, lengths) == encoded
True

"""

from __future__ import annotations

import json
from json.encoder import encode_basestring as _quoted  # what json.dumps uses

import numpy as np

from river_advsvm import inputs

__all__ = ["ENTRY_BYTES", "entry", "from_arrays", "max_bytes", "to_arrays"]

#: The most bytes of one entry: an encoding is at most `inputs.MAX_NAME_LENGTH` characters
#: with JSON's default separators, a character at most 4 bytes in UTF-8, and the longest entry
#: is a str name's: `["s", "..."]` leaves it `MAX_NAME_LENGTH - 9` characters, and its compact
#: text is 8 bytes of ASCII around them.
ENTRY_BYTES = 4 * (inputs.MAX_NAME_LENGTH - 9) + 8
_COMPACT = (",", ":")
_STR_PREFIX, _INT_PREFIX = '["s",', '["i",'


def entry(encoded) -> str:
    """The table's text of one encoded name (`inputs.encode_name`'s output)."""
    # str and int names by hand, as `json.dumps` writes them: it is most of a save's time.
    if type(encoded) is list and len(encoded) == 2:
        kind, value = encoded
        if kind == "s" and type(value) is str:
            return _STR_PREFIX + _quoted(value) + "]"
        if kind == "i" and type(value) is int:
            return _INT_PREFIX + int.__repr__(value) + "]"
    return json.dumps(encoded, separators=_COMPACT, ensure_ascii=False)


def max_bytes(n_names: int) -> int:
    """The most bytes the two arrays of a table of `n_names` names take."""
    return n_names * (ENTRY_BYTES + 2)


def to_arrays(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The `text` and `lengths` arrays of a table of entries (`entry` of each name, distinct);
    `ValueError` for an entry that is no name's."""
    try:
        encoded = [t.encode("utf-8") for t in texts]
    except UnicodeEncodeError:
        raise ValueError("an input name's encoding is not valid UTF-8") from None
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    if lengths.size and not (lengths.min() >= 1 and lengths.max() <= ENTRY_BYTES):
        raise ValueError(f"an input name's encoding is over {ENTRY_BYTES} bytes")
    text = b"".join(encoded)
    return np.frombuffer(text, dtype=np.uint8).copy(), lengths.astype(np.uint16)


def from_arrays(text: np.ndarray, lengths: np.ndarray) -> list:
    """The encoded names of a table (lists, as `inputs.encode_name` returns them), each checked:
    `ValueError` unless every entry is exactly the encoding of a name, and no two are the same.
    """
    if text.dtype != np.uint8 or text.ndim != 1:
        raise ValueError("the names' text is not one array of bytes")
    if lengths.dtype != np.uint16 or lengths.ndim != 1:
        raise ValueError("the names' lengths are not one array of 16-bit counts")
    if lengths.size and not (lengths.min() >= 1 and lengths.max() <= ENTRY_BYTES):
        raise ValueError(f"a name's length is outside 1 to {ENTRY_BYTES} bytes")
    ends = np.cumsum(lengths, dtype=np.int64)
    if (ends[-1] if ends.size else 0) != text.size:
        raise ValueError(f"the names' lengths add up to {int(ends[-1]) if ends.size else 0} "
                         f"bytes, their text has {text.size}")
    starts, ends = (ends - lengths).tolist(), ends.tolist()
    raw = text.tobytes()
    if not text.size or text.max() < 128:  # ASCII, the usual case: bytes are characters
        whole = raw.decode("ascii")
        pieces = [whole[a:b] for a, b in zip(starts, ends)]
    else:  # (UnicodeDecodeError, for bytes that are no UTF-8, is a ValueError)
        pieces = [raw[a:b].decode("utf-8") for a, b in zip(starts, ends)]
    if len(set(pieces)) != len(pieces):
        raise ValueError("the table holds a name twice")
    encoded = []
    for i, piece in enumerate(pieces):
        # (With JSON's default separators, what `encode_name` bounds, an entry is one
        # character longer.)
        short = len(piece) < inputs.MAX_NAME_LENGTH
        if short and piece.startswith(_STR_PREFIX):
            # A str name, the usual kind, checked at a third of the general path's cost.
            try:
                text = json.loads(piece[len(_STR_PREFIX):-1])
            except ValueError:
                text = None
            if type(text) is str and \
                    _STR_PREFIX + json.dumps(text, ensure_ascii=False) + "]" == piece:
                encoded.append(["s", text])
                continue
        elif short and piece.startswith(_INT_PREFIX) and piece.endswith("]"):  # an int, likewise
            digits = piece[len(_INT_PREFIX):-1]
            try:
                number = int(digits)
            except ValueError:
                number = None
            if number is not None and str(number) == digits:  # (not '+1', '01' or '1_0')
                encoded.append(["i", number])
                continue
        try:
            value = json.loads(piece)
            canonical = entry(inputs.encode_name(inputs.decode_name(value)))
        except (ValueError, TypeError, RecursionError):  # InvalidInput is a ValueError
            canonical = None
        if canonical != piece:
            raise ValueError(f"entry {i} of the names' table, {piece[:60]!r}, is not the "
                             "encoding of a feature name")
        encoded.append(value)
    return encoded
