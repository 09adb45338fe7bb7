"""A safe, versioned checkpoint format: a zip of JSON metadata and plain `.npy` arrays, sealed.

Nothing in a checkpoint is ever executed or unpickled: arrays are read with numpy's `.npy`
header parser and copied into preallocated numeric arrays, and the metadata is plain JSON.
Writes are atomic (temporary file, fsync, rename), so a crash leaves either the old
checkpoint or the new one, never half of one.

Reading treats the file as hostile. Every fault of the file is a `CheckpointError` (one of the
machine, an I/O error or a lack of memory, is the `OSError` or `MemoryError` it is), and the
memory a file can make the reader use is bounded before anything is allocated:

- the file ends with a SHA-256 seal of everything before it (in the zip comment), checked
  first, so a truncated file or any flipped byte is refused before it is parsed (a file over
  64 MiB is first measured against the bytes its table says its members take, so that a huge
  file is refused at once rather than after it is hashed);
- arrays are stored uncompressed, and a compressed array member is refused: a file can never
  unpack into more array bytes than it holds, so a 1 MB file costs about 1 MB to read. Only
  the metadata is deflated, decompressed in chunks and never past its bound (a member's own
  declared size is not trusted);
- the metadata is at most `MAX_META_BYTES` of UTF-8 JSON, nested at most `MAX_META_DEPTH`
  deep with at most `MAX_META_VALUES` values, all checked on the text before it is parsed;
- every array has a plain numeric dtype and a shape whose total size, summed over the
  checkpoint, stays within `max_array_bytes` (default `MAX_ARRAY_BYTES`; a model passes the
  bound its own parameters imply, as a number or as a function of the metadata).

`dumps` / `loads` are the format as bytes (what the Kafka workers publish); `write` is `dumps`
written atomically, `read` is `loads` of a file, and `read_meta` reads the metadata alone
without decompressing any array.

Examples
--------

>>> import numpy as np, tempfile, os
>>> from river_advsvm import checkpoint
>>> path = os.path.join(tempfile.mkdtemp(), "m.ckpt")
>>> checkpoint.write(path, {"note": "hello"}, {"w": np.arange(3.0)})
>>> meta, arrays = checkpoint.read(path)
>>> meta["note"], arrays["w"].tolist()
('hello', [0.0, 1.0, 2.0])
>>> checkpoint.read_meta(path)["arrays"]
{'w': {'dtype': '<f8', 'shape': [3]}}
>>> checkpoint.read(path, max_array_bytes=16)
Traceback (most recent call last):
...
river_advsvm.checkpoint.CheckpointError: ...: its arrays need 24 bytes, over the 16 allowed

"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import os
import re
import stat
import tempfile
import typing
import zipfile

import numpy as np

__all__ = ["FORMAT", "MAX_ARRAY_BYTES", "MAX_META_BYTES", "MAX_META_DEPTH", "MAX_META_VALUES",
           "VERSION", "CheckpointError", "dumps", "loads", "read", "read_meta", "write",
           "write_bytes"]

FORMAT = "river-advsvm-checkpoint"
VERSION = 2
#: Default bound on the bytes of all arrays of one checkpoint, together.
MAX_ARRAY_BYTES = 2 * 2**30
#: Bounds on the metadata, checked on its text before it is parsed: together they keep the
#: parsed metadata of any file under ~40 MB of Python objects.
MAX_META_BYTES = 4 * 2**20
MAX_META_DEPTH = 64
MAX_META_VALUES = 500_000
MAX_ARRAYS = 256

_META = "meta.json"
#: The seal: the zip comment, always the last bytes of the file.
_SEAL_PREFIX = b"river-advsvm-checkpoint sha256 "
_SEAL_SIZE = len(_SEAL_PREFIX) + 64
#: Numeric dtypes, little-endian: the only ones written or read.
_DTYPES = frozenset(["|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4",
                     "<f8"])
_MAX_NDIM = 32
_ARRAY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
#: A version 1.0 `.npy` member: magic, version, 2-byte header length, then the header.
_NPY_PREFIX = b"\x93NUMPY\x01\x00"
_MAX_NPY_HEADER = 4096
_CHUNK = 2**20
#: Files up to this size are hashed before anything else is read (see `_check_size`).
_HASHED_AT_ONCE = 64 * 2**20
#: A zip member's headers (local, central, zip64 extra fields, data descriptor) and its name.
_MEMBER_OVERHEAD = 1024
#: Errors of the machine rather than of the file, raised as the `OSError` they are.
_SYSTEM_ERRNOS = frozenset([errno.EIO, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.ESTALE])
#: What a seek to an absurd offset a hostile zip names (a zip64 member at 2**62) raises on a
#: regular file: the file's fault, not the machine's.
_SEEK_ERRNOS = frozenset([errno.EINVAL, errno.EOVERFLOW])
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")

ArrayBudget = typing.Union[int, typing.Callable[[dict], int]]


class CheckpointError(ValueError):
    """The file is not a readable checkpoint of this format and version."""


# -- writing --------------------------------------------------------------------------------------


def write_bytes(path: str | os.PathLike, data: bytes, *,
                before_rename: typing.Callable[[], None] | None = None,
                what: str = "checkpoint") -> None:
    """Atomically replace `path` by `data` (temporary file, fsync, rename, directory fsync).

    `before_rename` is called once the temporary file is synced, right before the rename (a
    crash test's window inside the write). `what` the file is, for the message of an
    `OSError`. A `path` that is a symbolic link stays one: the file it points to is replaced.
    """
    path = os.fspath(path)
    target = os.path.realpath(path)
    directory = os.path.dirname(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".ckpt", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if before_rename is not None:
                before_rename()
            os.replace(tmp, target)
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
    except OSError as error:
        # A full disk or an I/O error says nothing of which file: name it, and what is left.
        left = ("the previous one is unchanged" if os.path.isfile(path)
                else f"no {what} is there")
        raise type(error)(error.errno, f"{error.strerror or error} (the {what} could not be "
                          f"written; {left})", path) from error


def dumps(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """`meta` (JSON-serialisable) and numeric `arrays` as checkpoint bytes.

    Raises `ValueError` for what `loads` would refuse: NaN or infinity in `meta`, metadata
    over the bounds, a non-numeric array or an array name that is not an identifier.
    """
    reserved = {"format", "version", "arrays"} & set(meta)
    if reserved:
        raise ValueError(f"metadata keys {sorted(reserved)} are reserved by the format")
    if len(arrays) > MAX_ARRAYS:
        raise ValueError(f"{len(arrays)} arrays, over the {MAX_ARRAYS} a checkpoint holds")
    header: dict = {"format": FORMAT, "version": VERSION, "arrays": {}, **meta}
    stored = {}
    for name, array in arrays.items():
        if not isinstance(name, str) or not _ARRAY_NAME.match(name):
            raise ValueError(f"array name {name!r} is not an identifier of at most 64 characters")
        array = np.asarray(array)
        if array.dtype.kind not in "biuf" or array.ndim > _MAX_NDIM:
            raise TypeError(f"array {name!r} has dtype {array.dtype} and {array.ndim} "
                            "dimensions; numbers in at most 32 dimensions are stored")
        array = np.asarray(array, dtype=array.dtype.newbyteorder("<"), order="C")
        header["arrays"][name] = {"dtype": array.dtype.str, "shape": list(array.shape)}
        stored[name] = array
    text = json.dumps(header, allow_nan=False)
    try:
        _check_meta_text(text)
    except CheckpointError as error:
        raise ValueError(f"checkpoint metadata that could not be read back: {error}") from None
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as zf:
        # A fixed time stamp (the arrays' too, zipfile's default): the same state, the same bytes.
        info = zipfile.ZipInfo(_META, date_time=(1980, 1, 1, 0, 0, 0))
        zf.writestr(info, text, compress_type=zipfile.ZIP_DEFLATED, compresslevel=1)
        for name, array in stored.items():
            with zf.open(f"{name}.npy", "w", force_zip64=array.nbytes > 2**30) as member:
                # `np.save`'s bytes, without the copy `write_array` makes for a file object.
                np.lib.format.write_array_header_1_0(
                    member, np.lib.format.header_data_from_array_1_0(array))
                member.write(array.reshape(-1).view(np.uint8).data)
        zf.comment = b"\0" * _SEAL_SIZE  # replaced by the seal below
    with buffer.getbuffer() as view:
        digest = hashlib.sha256(view[:-_SEAL_SIZE]).hexdigest().encode()
    buffer.seek(-_SEAL_SIZE, io.SEEK_END)
    buffer.write(_SEAL_PREFIX + digest)
    return buffer.getvalue()


def write(path: str | os.PathLike, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Atomically write `meta` (JSON-serialisable) and numeric `arrays` to `path`."""
    write_bytes(path, dumps(meta, arrays))


# -- reading --------------------------------------------------------------------------------------


def read(path: str | os.PathLike, *, max_array_bytes: ArrayBudget = MAX_ARRAY_BYTES
         ) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a checkpoint written by `write`; raises `CheckpointError` for anything else.

    `max_array_bytes` bounds the bytes of all its arrays together: a count of bytes (an int
    >= 0), or a function of the (already validated) metadata returning one, which may itself
    raise `CheckpointError`; anything else is a `TypeError`.
    A missing file raises `FileNotFoundError`; an I/O error `OSError` and a lack of memory
    `MemoryError`, as faults of the machine rather than of the file.
    """
    _check_budget(max_array_bytes)
    with _open(path) as f:
        return _read(f, os.fspath(path), max_array_bytes)


def _check_budget(max_array_bytes) -> None:
    """TypeError for a `max_array_bytes` that is neither a count of bytes nor a function (None
    read the metadata alone and returned no arrays: taken for "no limit", silently)."""
    if callable(max_array_bytes):
        return
    count = isinstance(max_array_bytes, (int, np.integer)) and type(max_array_bytes) is not bool
    if not (count and max_array_bytes >= 0):
        raise TypeError("max_array_bytes must be a number of bytes (an int >= 0) or a function "
                        f"of the metadata returning one, got {max_array_bytes!r:.60}")


def loads(data: bytes, *, max_array_bytes: ArrayBudget = MAX_ARRAY_BYTES
          ) -> tuple[dict, dict[str, np.ndarray]]:
    """Read checkpoint bytes made by `dumps`; raises `CheckpointError` for anything else."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointError(f"expected checkpoint bytes, got {type(data).__name__}")
    _check_budget(max_array_bytes)
    return _read(io.BytesIO(data), f"checkpoint of {len(data)} bytes", max_array_bytes)


def loads_meta(data: bytes) -> dict:
    """The metadata of checkpoint bytes made by `dumps`, without decompressing any of its
    arrays (the seal is checked and the array table validated as in `loads`)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointError(f"expected checkpoint bytes, got {type(data).__name__}")
    return _read(io.BytesIO(data), f"checkpoint of {len(data)} bytes", None)[0]


def read_meta(path: str | os.PathLike) -> dict:
    """The metadata of the checkpoint at `path`, without decompressing any of its arrays.

    The seal is checked and the array table validated as in `read`.
    """
    with _open(path) as f:
        return _read(f, os.fspath(path), None)[0]


def _open(path: str | os.PathLike) -> typing.BinaryIO:
    """`path` opened for reading if it is a regular file (through symlinks); `CheckpointError`
    for anything else. O_NONBLOCK keeps a FIFO or a device from blocking the open itself; the
    type is then checked on the open descriptor, so a file swapped in between cannot slip by."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as error:
        if error.errno in _SYSTEM_ERRNOS:
            raise  # the machine's fault, not the file's (a restart may find it gone)
        raise CheckpointError(f"cannot read {path}: {error.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise CheckpointError(f"cannot read {path}: it is {_file_kind(mode)}, not a "
                                  "regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _file_kind(mode: int) -> str:
    kinds = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket")]
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")


def _read(f: typing.BinaryIO, where: str, max_array_bytes: ArrayBudget | None):
    """Meta and arrays (`{}` when `max_array_bytes` is None) of the checkpoint in `f`."""
    try:
        _check_size(f)
        _check_seal(f)
        with zipfile.ZipFile(f) as archive:
            members = _members(archive)
            meta, specs = _parse_meta(_read_member(archive, members[_META], MAX_META_BYTES))
            expected = {_META, *(f"{name}.npy" for name in specs)}
            if set(members) != expected:
                extra, missing = set(members) - expected, expected - set(members)
                raise CheckpointError(f"its members {sorted(extra)} are unexpected"
                                      if extra else f"it lacks the members {sorted(missing)}")
            if max_array_bytes is None:
                return meta, {}
            budget = max_array_bytes(meta) if callable(max_array_bytes) else max_array_bytes
            needed = sum(nbytes for _, _, nbytes in specs.values())
            if needed > budget:
                raise CheckpointError(
                    f"its arrays need {needed} bytes, over the {budget} allowed")
            arrays = {name: _read_array(archive, members[f"{name}.npy"], *spec)
                      for name, spec in specs.items()}
    except CheckpointError as error:
        raise CheckpointError(f"{where}: {_one_line(error)}") from None
    except MemoryError:
        # The machine's fault, not the file's (its arrays are within their bound): a restart
        # with memory to spare reads it.
        raise MemoryError(f"{where}: not enough memory to read it") from None
    except OSError as error:
        if error.errno in _SEEK_ERRNOS:  # an offset in the file past any file's end: the bytes
            raise CheckpointError(f"{where}: not a valid checkpoint (it points to offsets "
                                  "past the end of any file)") from None
        # The disk, not the bytes: an I/O error is not a corrupt file.
        raise type(error)(error.errno, f"{error.strerror or error} while reading it",
                          where) from None
    except Exception as error:  # noqa: BLE001 - hostile bytes reach zipfile, zlib, json, numpy
        raise CheckpointError(
            f"{where}: not a valid checkpoint ({type(error).__name__}: {_one_line(error)})"
        ) from None
    return meta, arrays


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _check_size(f: typing.BinaryIO) -> None:
    """A file larger than `_HASHED_AT_ONCE` must be no larger than its metadata says its
    members take (read from its table, before the seal is checked): the seal is a hash of the
    whole file, and a huge file would hold the reader up for as long as it takes to hash."""
    size = f.seek(0, io.SEEK_END)
    f.seek(0)
    if size <= _HASHED_AT_ONCE:
        return
    with zipfile.ZipFile(f) as archive:
        members = _members(archive)
        info = members[_META]
        _, specs = _parse_meta(_read_member(archive, info, MAX_META_BYTES))
    arrays = sum(nbytes for _, _, nbytes in specs.values())  # (stored uncompressed)
    most = (arrays + info.compress_size + _SEAL_SIZE
            + (len(specs) + 1) * (_MAX_NPY_HEADER + _MEMBER_OVERHEAD))
    if size > most:
        raise CheckpointError(f"it is {size} bytes, more than the {most} its members take")
    f.seek(0)


def _check_seal(f: typing.BinaryIO) -> None:
    """The last bytes must be the SHA-256 of all the others."""
    size = f.seek(0, io.SEEK_END)
    if size < _SEAL_SIZE + 22:  # 22: the smallest end-of-archive record
        raise CheckpointError(f"{size} bytes is too short for a checkpoint")
    f.seek(size - _SEAL_SIZE)
    seal = f.read(_SEAL_SIZE)
    if not seal.startswith(_SEAL_PREFIX):
        raise CheckpointError(
            "it does not end with the seal of a river-advsvm checkpoint (a truncated file, "
            "or another kind of file)")
    digest = hashlib.sha256()
    f.seek(0)
    remaining = size - _SEAL_SIZE
    while remaining:
        chunk = f.read(min(_CHUNK, remaining))
        if not chunk:
            raise CheckpointError("the file shrank while it was read")
        digest.update(chunk)
        remaining -= len(chunk)
    if digest.hexdigest().encode() != seal[len(_SEAL_PREFIX):]:
        raise CheckpointError("its checksum does not match: the file is corrupt")
    f.seek(0)


def _members(archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    infos = archive.infolist()
    if len(infos) > MAX_ARRAYS + 1:
        raise CheckpointError(f"it has {len(infos)} members, over {MAX_ARRAYS + 1}")
    members = {info.filename: info for info in infos}
    if len(members) != len(infos):
        raise CheckpointError("it has two members of the same name")
    for info in infos:
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise CheckpointError(f"member {info.filename!r} uses compression method "
                                  f"{info.compress_type}; only stored and deflated are read")
        if info.flag_bits & 0x1:
            raise CheckpointError(f"member {info.filename!r} is encrypted")
    if _META not in members:
        raise CheckpointError(f"it has no {_META}")
    return members


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """A whole member of at most `limit` bytes, decompressed in bounded steps."""
    if info.file_size > limit:
        raise CheckpointError(f"member {info.filename!r} declares {info.file_size} bytes, "
                              f"over the {limit} allowed")
    with archive.open(info) as member:
        data = member.read(info.file_size)  # stops at the declared size; the CRC is checked
    if len(data) != info.file_size:
        raise CheckpointError(f"member {info.filename!r} is truncated")
    return data


def _check_meta_text(text: str) -> None:
    """Refuse metadata whose parsing could exhaust memory or the stack, before parsing it."""
    size = len(text.encode("utf-8")) if not text.isascii() else len(text)
    if size > MAX_META_BYTES:
        raise CheckpointError(f"its metadata is {size} bytes, over the {MAX_META_BYTES} allowed")
    skeleton = _JSON_STRING.sub("0", text)  # brackets and commas inside strings do not count
    opening = skeleton.count("[") + skeleton.count("{")
    values = opening + skeleton.count(",") + skeleton.count(":") + 1
    if values > MAX_META_VALUES:
        raise CheckpointError(
            f"its metadata holds about {values} values, over the {MAX_META_VALUES} allowed")
    if skeleton.count("]") + skeleton.count("}") != opening:
        raise CheckpointError("its metadata is not valid JSON (unbalanced brackets)")
    brackets = np.frombuffer(_NOT_BRACKET.sub("", skeleton).encode("ascii"), np.uint8)
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1).astype(np.int32)
    depth = int(np.cumsum(steps).max(initial=0))
    if depth > MAX_META_DEPTH:
        raise CheckpointError(
            f"its metadata is nested {depth} deep, over the {MAX_META_DEPTH} allowed")


def _no_constant(name: str):
    raise CheckpointError(f"its metadata holds {name}, which JSON does not allow")


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent; one beyond a float's range (1e999) would
    parse as infinity, which `dumps` never writes."""
    value = float(text)
    if not math.isfinite(value):
        raise CheckpointError(f"its metadata holds the number {text[:40]}, beyond a float's "
                              "range")
    return value


def _parse_meta(raw: bytes) -> tuple[dict, dict[str, tuple[np.dtype, tuple, int]]]:
    """The metadata, validated, and each array's dtype, shape and size in bytes."""
    text = raw.decode("utf-8")
    _check_meta_text(text)
    meta = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError("it is not a river-advsvm checkpoint")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"its format version {meta.get('version')!r} is not supported "
                              f"(this river-advsvm reads version {VERSION})")
    table = meta.get("arrays")
    if not isinstance(table, dict) or len(table) > MAX_ARRAYS:
        raise CheckpointError("its metadata lacks a valid array table")
    return meta, {name: _array_spec(name, spec) for name, spec in table.items()}


def _array_spec(name, spec) -> tuple[np.dtype, tuple, int]:
    if not _ARRAY_NAME.match(name):
        raise CheckpointError(f"array name {name[:70]!r} is not an identifier")
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape"}:
        raise CheckpointError(f"array {name!r} has an invalid description")
    dtype, shape = spec["dtype"], spec["shape"]
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise CheckpointError(f"array {name!r} has dtype {str(dtype)[:20]!r}; "
                              f"only {', '.join(sorted(_DTYPES))} are read")
    if (not isinstance(shape, list) or len(shape) > _MAX_NDIM
            or not all(type(s) is int and s >= 0 for s in shape)):
        raise CheckpointError(f"array {name!r} has an invalid shape")
    dtype = np.dtype(dtype)
    return dtype, tuple(shape), dtype.itemsize * math.prod(shape)


def _read_exact(member: typing.BinaryIO, n: int, what: str) -> bytes:
    data = member.read(n)
    if len(data) != n:
        raise CheckpointError(f"{what} is truncated")
    return data


def _read_array(archive: zipfile.ZipFile, info: zipfile.ZipInfo, dtype: np.dtype, shape: tuple,
                nbytes: int) -> np.ndarray:
    """One array, decompressed chunk by chunk straight into its preallocated memory."""
    name = info.filename
    if info.compress_type != zipfile.ZIP_STORED:
        raise CheckpointError(f"member {name!r} is compressed; arrays are stored uncompressed "
                              "(a small file must not unpack into a large array)")
    if info.file_size > nbytes + len(_NPY_PREFIX) + 2 + _MAX_NPY_HEADER:
        raise CheckpointError(f"member {name!r} declares {info.file_size} bytes, more than its "
                              f"array needs")
    with archive.open(info) as member:
        prefix = _read_exact(member, len(_NPY_PREFIX) + 2, f"member {name!r}")
        if not prefix.startswith(_NPY_PREFIX):
            raise CheckpointError(f"member {name!r} is not a version 1.0 .npy array")
        header_size = int.from_bytes(prefix[-2:], "little")
        if header_size > _MAX_NPY_HEADER:
            raise CheckpointError(f"member {name!r} has a {header_size}-byte .npy header")
        if info.file_size != len(prefix) + header_size + nbytes:
            raise CheckpointError(f"member {name!r} is {info.file_size} bytes; its metadata "
                                  f"implies {len(prefix) + header_size + nbytes}")
        header = _read_exact(member, header_size, f"member {name!r}")
        npy_shape, fortran_order, npy_dtype = np.lib.format.read_array_header_1_0(
            io.BytesIO(prefix[-2:] + header), max_header_size=_MAX_NPY_HEADER)
        if npy_dtype != dtype or tuple(npy_shape) != shape or fortran_order:
            raise CheckpointError(f"member {name!r} holds {npy_dtype}{tuple(npy_shape)}, the "
                                  f"metadata says {dtype}{shape}")
        array = np.empty(shape, dtype)
        # Pages of the empty array are only touched as data arrives: a member that ends early
        # costs what it delivered, not what it declared.
        view = memoryview(array.reshape(-1).view(np.uint8))
        position = 0
        while position < nbytes:
            chunk = member.read(min(_CHUNK, nbytes - position))
            if not chunk:
                raise CheckpointError(f"member {name!r} is truncated")
            view[position:position + len(chunk)] = chunk
            position += len(chunk)
    if dtype.kind == "b" and array.size and array.view(np.uint8).max() > 1:
        raise CheckpointError(f"boolean array {name!r} holds values other than 0 and 1")
    return array
