"""Arrays of an `.npz` archive, read without trusting its headers.

`np.load` allocates what an array's header declares before reading a byte of it, and unpickles
object arrays if asked to: `read_arrays` checks each member's header against the bytes the
member holds, never loads Python objects, and words every failure as a `ValueError` naming the
file. `advsvm demo --data`, `advsvm serve --replay` and `streams.parquet.from_npz` read their
archives through it.

"""

from __future__ import annotations

import math
import os
import zipfile
import zlib

import numpy as np

__all__ = ["flat_samples", "read_arrays"]

#: What an input array of each other kind of numpy dtype holds, for the error that refuses it.
_NOT_INPUTS = {"c": "complex numbers", "M": "dates or times", "m": "durations",
               "U": "strings", "S": "bytes", "V": "records or raw bytes"}


def read_arrays(path: str | os.PathLike, names: list[str], optional: list[str] = (),
                inputs: list[str] = ()) -> dict[str, np.ndarray]:
    """The arrays `names` of the archive at `path`, and those of `optional` if it holds them
    all; `ValueError` if it is no readable archive, lacks one of `names`, or an array's header
    declares more than its member holds. Arrays named in `inputs` must hold numbers."""
    try:
        archive = np.load(path, allow_pickle=False)
    except ValueError:  # neither an archive nor an array: numpy takes it for a pickle
        raise ValueError(f"{path} is not an .npz archive") from None
    except (zipfile.BadZipFile, EOFError) as error:
        raise ValueError(f"{path} is not a readable .npz archive ({error})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} holds one array, not an .npz archive of {', '.join(names)}")
    with archive:
        missing = set(names) - set(archive.files)
        if missing:
            raise ValueError(f"{path} lacks {sorted(missing)} (it has {archive.files})")
        wanted = list(names)
        if optional and set(optional) <= set(archive.files):
            wanted += list(optional)
        arrays = {}
        for name in wanted:
            _check_declared(path, archive, name, name in inputs)  # before numpy allocates
            try:
                arrays[name] = archive[name]
            except (ValueError, zipfile.BadZipFile, zlib.error, EOFError,
                    NotImplementedError, RuntimeError) as error:
                # (Object arrays are refused from their header: pickles are never loaded.)
                raise ValueError(f"{path} is not a readable .npz archive ({name}: {error})"
                                 ) from None
    return arrays


def _check_declared(path, archive, name: str, numbers: bool) -> None:
    """Refuse an array of the archive whose header declares more bytes than its member holds
    (numpy would allocate them all before reading: a few bytes declaring terabytes would be an
    out-of-memory error), Python objects, or, with `numbers`, values that are not real numbers."""
    member = name + ".npy" if name + ".npy" in archive.zip.namelist() else name
    try:
        with archive.zip.open(member) as f:
            version = np.lib.format.read_magic(f)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(f, max_header_size=10_000)
            header = f.tell()
    except (ValueError, TypeError, SyntaxError):
        raise ValueError(f"{path}: {name} is not an array (.npy) numpy can read") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError,
            RuntimeError) as error:
        # (NotImplementedError: a compression method zipfile lacks, deflate64 or a damaged one;
        # RuntimeError: an encrypted member, which needs a password)
        raise ValueError(f"{path} is not a readable .npz archive ({name}: {error})") from None
    if dtype.hasobject:
        raise ValueError(f"{path}: {name} holds Python objects, which are never loaded "
                         "(store numbers or strings)")
    declared = math.prod(shape) * dtype.itemsize
    held = archive.zip.getinfo(member).file_size - header
    if declared > held:
        raise ValueError(f"{path}: {name} declares {declared:,} bytes of values (shape "
                         f"{tuple(shape)}, {dtype}) but its member holds {max(held, 0):,}")
    if numbers and dtype.kind not in "biuf":
        what = _NOT_INPUTS.get(dtype.kind, str(dtype))
        raise ValueError(f"{path}: {name} holds {what} ({dtype}); inputs must be numbers "
                         "(bool, integers or floats)")


def flat_samples(path, X: np.ndarray, y: np.ndarray | None, x_name: str,
                 y_name: str) -> np.ndarray:
    """`X` (the array `x_name` of the archive at `path`) with each sample flattened to a row,
    once it is known to hold one per label of `y` (`y_name`; None: no labels)."""
    if y is None and X.ndim == 0:
        raise ValueError(f"{path}: {x_name} is a single value, not rows of samples")
    if y is not None and (X.ndim == 0 or y.ndim != 1 or len(X) != len(y)):
        raise ValueError(f"{path}: {x_name} has {len(X) if X.ndim else 0} samples but "
                         f"{y_name} {len(y) if y.ndim == 1 else y.shape} labels")
    return X.reshape(len(X), math.prod(X.shape[1:]))  # (reshape(0, -1) has no answer)
