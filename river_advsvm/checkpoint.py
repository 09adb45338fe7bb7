"""A safe, versioned checkpoint format: a zip of JSON metadata and plain `.npy` arrays.

Nothing in a checkpoint is ever executed or unpickled: arrays are read with
`allow_pickle=False`, only numeric dtypes are accepted, and the metadata is plain JSON. Every
member's size is checked before it is read, so a hostile file cannot make the reader allocate
more than it declares. Writes are atomic (temporary file, fsync, rename), so a crash leaves
either the old checkpoint or the new one, never half of one.

`dumps` / `loads` are the same format as bytes (what the Kafka workers publish); `write` is
`dumps` written atomically, `read` is `loads` of a file.

"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile

import numpy as np

__all__ = ["FORMAT", "VERSION", "CheckpointError", "dumps", "loads", "read", "write",
           "write_bytes"]

FORMAT = "river-advsvm-checkpoint"
VERSION = 1
_META = "meta.json"
_MAX_META_BYTES = 16 * 2**20
_MAX_ARRAY_BYTES = 8 * 2**30
_ALLOWED_KINDS = "biuf"


class CheckpointError(ValueError):
    """The file is not a readable checkpoint of this format and version."""


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Atomically replace `path` by `data` (temporary file, fsync, rename, directory fsync)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".ckpt", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    # The rename itself must survive a power cut: sync the directory entry too.
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def dumps(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """`meta` (JSON-serialisable) and numeric `arrays` as checkpoint bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        header = {"format": FORMAT, "version": VERSION, "arrays": {}, **meta}
        for name, array in arrays.items():
            array = np.ascontiguousarray(array)
            if array.dtype.kind not in _ALLOWED_KINDS:
                raise TypeError(f"array {name!r} has non-numeric dtype {array.dtype}")
            header["arrays"][name] = {"dtype": array.dtype.str, "shape": list(array.shape)}
            member = io.BytesIO()
            np.lib.format.write_array(member, array, allow_pickle=False)
            archive.writestr(f"{name}.npy", member.getvalue())
        archive.writestr(_META, json.dumps(header, allow_nan=False))
    return buffer.getvalue()


def write(path: str | os.PathLike, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Atomically write `meta` (JSON-serialisable) and numeric `arrays` to `path`."""
    write_bytes(path, dumps(meta, arrays))


def read(path: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a checkpoint written by `write`; raises `CheckpointError` for anything else."""
    return _read(path, os.fspath(path))


def loads(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """Read checkpoint bytes made by `dumps`; raises `CheckpointError` for anything else."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointError(f"expected bytes, got {type(data).__name__}")
    return _read(io.BytesIO(data), f"{len(data)} bytes")


def _read(source, where: str) -> tuple[dict, dict[str, np.ndarray]]:
    try:
        with zipfile.ZipFile(source) as archive:
            meta = _read_meta(archive)
            arrays = {
                name: _read_array(archive, name, spec) for name, spec in meta["arrays"].items()
            }
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as error:
        raise CheckpointError(f"{where!r} is not a valid checkpoint: {error}") from None
    return meta, arrays


def _member(archive: zipfile.ZipFile, name: str, limit: int) -> bytes:
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise CheckpointError(f"checkpoint has no member {name!r}") from None
    if info.file_size > limit:
        raise CheckpointError(f"member {name!r} is {info.file_size} bytes, over the {limit} limit")
    with archive.open(info) as f:
        data = f.read(limit + 1)  # the CRC is checked as the member is read
    if len(data) != info.file_size:
        raise CheckpointError(f"member {name!r} is truncated")
    return data


def _read_meta(archive: zipfile.ZipFile) -> dict:
    try:
        meta = json.loads(_member(archive, _META, _MAX_META_BYTES))
    except json.JSONDecodeError as error:
        raise CheckpointError(f"metadata is not valid JSON: {error}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"not a {FORMAT} file")
    if meta.get("version") != VERSION:
        raise CheckpointError(
            f"checkpoint version {meta.get('version')!r} is not supported (expected {VERSION})"
        )
    if not isinstance(meta.get("arrays"), dict):
        raise CheckpointError("metadata lacks its array table")
    return meta


def _read_array(archive: zipfile.ZipFile, name: str, spec) -> np.ndarray:
    try:
        dtype = np.dtype(spec["dtype"])
        shape = tuple(int(s) for s in spec["shape"])
    except (TypeError, KeyError, ValueError):
        raise CheckpointError(f"array {name!r} has an invalid description {spec!r}") from None
    if dtype.kind not in _ALLOWED_KINDS or any(s < 0 for s in shape):
        raise CheckpointError(f"array {name!r} has a disallowed dtype or shape: {spec!r}")
    expected = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if expected > _MAX_ARRAY_BYTES:
        raise CheckpointError(f"array {name!r} declares {expected} bytes, over the limit")
    data = _member(archive, f"{name}.npy", expected + 4096)  # + the .npy header
    array = np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
    if array.dtype != dtype or array.shape != shape:
        raise CheckpointError(
            f"array {name!r} is {array.dtype}{array.shape}, metadata says {dtype}{shape}"
        )
    return array
