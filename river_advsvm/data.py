"""The benchmark data sets, downloaded from their public sources into a local cache.

`fetch("mnist")` (or `advsvm data fetch mnist`) downloads a data set, checks each file's
SHA-256 against the published one, and writes the `.npz` archives the benchmarks read into a
directory: `$ADVSVM_DATA`, or `~/.cache/river-advsvm` (`default_dir`).

- `mnist.npz`, `fashion-mnist.npz`: uint8 `X_train` (60000, 784), `y_train` (60000,),
  `X_test` (10000, 784), `y_test` (10000,), rows in the original order, pixels row-major,
  from the four gzipped IDX files of each data set;
- `cifar10.npz`: uint8 `X_train` (50000, 3072), `y_train`, `X_test` (10000, 3072), `y_test`,
  each row an image in CIFAR's layout (the red, green and blue 32 x 32 planes, row-major),
  from the python tarball of CIFAR-10;
- `cifar10_pairs.npz`: its classes 1, 5, 7, 9 (automobile, dog, horse, truck: the paper's
  two CIFAR pairs) with `idx_train` / `idx_test` (int32 indices of the rows in the original
  sets, increasing) and `exact_train` / `exact_test` (bool: lossless pixels, all True here).

Labels are the original ones. Downloads go to `DIR/downloads` and are deleted once
converted; a data set whose files are already in `DIR` is not downloaded again.

Nothing is unpickled but CIFAR-10's own batches, after their archive's SHA-256 matched, and
even then only dicts, lists, strings, numbers and numpy arrays are accepted.

"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import http.client
import io
import math
import os
import pathlib
import pickle
import shutil
import struct
import sys
import tarfile
import typing
import urllib.request
import zipfile
import zlib

import numpy as np

__all__ = ["DATASETS", "FILES", "DataError", "Download", "default_dir", "download", "fetch",
           "fetch_command"]

ENV = "ADVSVM_DATA"


class DataError(OSError):
    """A data set could not be downloaded or its files are not what they should be."""


@dataclasses.dataclass(frozen=True)
class Download:
    """One file to download: its name, its mirrors (tried in order) and its SHA-256."""

    name: str
    urls: tuple[str, ...]
    sha256: str
    size: int | None = None


def _idx_files(mirrors: tuple[str, ...], sizes_and_hashes: dict) -> dict[str, Download]:
    names = {"X_train": "train-images-idx3-ubyte.gz", "y_train": "train-labels-idx1-ubyte.gz",
             "X_test": "t10k-images-idx3-ubyte.gz", "y_test": "t10k-labels-idx1-ubyte.gz"}
    return {key: Download(name, tuple(m + name for m in mirrors), *sizes_and_hashes[key][::-1])
            for key, name in names.items()}


#: Every file of every data set. The SHA-256 of the MNIST and Fashion-MNIST files are those of
#: the gzipped files as their authors distribute them, CIFAR-10's that of its python tarball.
DATASETS: dict[str, dict[str, Download]] = {
    "mnist": _idx_files(
        ("https://ossci-datasets.s3.amazonaws.com/mnist/",
         "https://storage.googleapis.com/cvdf-datasets/mnist/"),
        {"X_train": (9_912_422,
                     "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"),
         "y_train": (28_881, "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"),
         "X_test": (1_648_877,
                    "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"),
         "y_test": (4_542, "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6")},
    ),
    "fashion-mnist": _idx_files(
        ("https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
         "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"),
        {"X_train": (26_421_880,
                     "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"),
         "y_train": (29_515, "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845"),
         "X_test": (4_422_102,
                    "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073"),
         "y_test": (5_148, "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5")},
    ),
    "cifar10": {
        "archive": Download(
            "cifar-10-python.tar.gz", ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
            "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce", 170_498_071),
    },
}
#: The `.npz` files each data set writes.
FILES = {"mnist": ("mnist.npz",), "fashion-mnist": ("fashion-mnist.npz",),
         "cifar10": ("cifar10.npz", "cifar10_pairs.npz")}
#: The arrays each of them holds.
ARRAYS = {
    "mnist.npz": ("X_train", "y_train", "X_test", "y_test"),
    "fashion-mnist.npz": ("X_train", "y_train", "X_test", "y_test"),
    "cifar10.npz": ("X_train", "y_train", "X_test", "y_test"),
    "cifar10_pairs.npz": ("X_train", "y_train", "X_test", "y_test", "idx_train", "idx_test",
                          "exact_train", "exact_test"),
}
#: CIFAR-10's classes in `cifar10_pairs.npz`: automobile, dog, horse, truck.
CIFAR_PAIR_CLASSES = (1, 5, 7, 9)
_CIFAR_BATCHES = {"train": [f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)],
                  "test": ["cifar-10-batches-py/test_batch"]}


def default_dir() -> pathlib.Path:
    """`$ADVSVM_DATA` (with `~` expanded), or `~/.cache/river-advsvm`."""
    return pathlib.Path(os.environ.get(ENV) or pathlib.Path.home() / ".cache" / "river-advsvm"
                        ).expanduser()


def fetch_command(filename: str, directory=None) -> str | None:
    """The command that writes `filename` (into `directory`, if not the default one)."""
    for name, files in FILES.items():
        if filename in files:
            out = "" if directory is None else f" --out {directory}"
            return f"advsvm data fetch {name}{out}"
    return None


def download(url: str, destination: pathlib.Path) -> None:
    """Copy `url` to `destination`: the only function here that touches the network."""
    from river_advsvm import __version__

    request = urllib.request.Request(url, headers={"User-Agent": f"river-advsvm/{__version__}"})
    with urllib.request.urlopen(request, timeout=60) as response, open(destination, "wb") as f:
        shutil.copyfileobj(response, f, 2**20)


def fetch(name: str, directory=None, *, force: bool = False,
          log: typing.Callable[[str], None] | None = None) -> list[pathlib.Path]:
    """Download data set `name` and write its `.npz` files into `directory` (default:
    `default_dir()`); returns their paths. Files already there are kept unless `force`."""
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; choose from {sorted(DATASETS)}")
    log = log or (lambda message: print(message, file=sys.stderr))
    directory = pathlib.Path(default_dir() if directory is None else directory).expanduser()
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{directory} is not a directory")
    if directory.is_symlink() and not directory.exists():  # (mkdir would say "File exists")
        raise ValueError(f"{directory} is a link to {os.readlink(directory)}, which leads to no "
                         "directory (it does not exist, or the links make a loop)")
    paths = [directory / file for file in FILES[name]]
    if not force and all(_is_complete(path) for path in paths):
        log(f"{name}: already in {directory}")
        return paths
    made = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    try:
        downloads = {key: _fetch_file(source, directory / "downloads", log)
                     for key, source in DATASETS[name].items()}
    except BaseException:
        # Files that came whole stay for the next try; folders left empty go.
        with contextlib.suppress(OSError):
            (directory / "downloads").rmdir()
            if made:
                directory.rmdir()
        raise
    log(f"{name}: converting")
    if name == "cifar10":
        full = _read_cifar(downloads["archive"])
        outputs = {"cifar10.npz": full, "cifar10_pairs.npz": cifar_pairs(full)}
    else:
        outputs = {f"{name}.npz": _read_idx_set(downloads)}
    for file, arrays in outputs.items():
        _write_npz(directory / file, arrays)
    for path in downloads.values():
        path.unlink()
    with contextlib.suppress(OSError):
        (directory / "downloads").rmdir()  # only when empty
    return paths


def _is_complete(path: pathlib.Path) -> bool:
    """Whether `path` is an `.npz` holding the arrays of its name: not if it is absent, empty,
    a damaged zip, or another kind of file (written over, or copied in half), which a fetch
    then writes again."""
    try:
        # (mmap_mode: a single .npy array is mapped, not read: one declaring terabytes over a
        # few bytes is refused by the mapping instead of allocated.)
        archive = np.load(path, mmap_mode="r")
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return False
    if not isinstance(archive, np.lib.npyio.NpzFile):  # a single .npy array
        return False
    with archive:
        return set(ARRAYS[path.name]) <= set(archive.files)


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(2**20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fetch_file(source: Download, directory: pathlib.Path, log) -> pathlib.Path:
    """`source`, from the first mirror that gives the right bytes."""
    path = directory / source.name
    if path.exists() and _sha256(path) == source.sha256:
        return path  # left by an earlier run that failed later
    directory.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    failures = []
    for url in source.urls:
        size = f" ({source.size / 1e6:.1f} MB)" if source.size else ""
        log(f"downloading {url}{size}")
        try:
            download(url, partial)
            digest = _sha256(partial)
            if digest != source.sha256:
                failures.append(f"{url} gave SHA-256 {digest[:16]}..., not {source.sha256[:16]}...")
                continue
            os.replace(partial, path)
            return path
        except (OSError, http.client.HTTPException, ValueError) as error:
            failures.append(f"{url}: {' '.join(str(error).split()) or type(error).__name__}")
        finally:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
    raise DataError(f"could not download {source.name}: {'; '.join(failures)}")


def _write_npz(path: pathlib.Path, arrays: dict[str, np.ndarray]) -> None:
    """`np.savez_compressed`, atomically: a crash leaves the old file or none."""
    partial = path.with_name(path.name + ".part")
    try:
        with open(partial, "wb") as f:
            np.savez_compressed(f, **arrays)
        os.replace(partial, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()


# -- MNIST and Fashion-MNIST: gzipped IDX files ---------------------------------------------------


def read_idx(path: pathlib.Path, ndim: int) -> np.ndarray:
    """The uint8 array of a gzipped IDX file with `ndim` dimensions; `DataError` otherwise."""
    try:
        with gzip.open(path, "rb") as f:
            magic = f.read(4)
            if magic != bytes([0, 0, 0x08, ndim]):
                raise DataError(f"{path.name} is not an IDX file of {ndim}-D unsigned bytes")
            dims = f.read(4 * ndim)
            if len(dims) != 4 * ndim:
                raise DataError(f"{path.name} is truncated")
            shape = struct.unpack(f">{ndim}I", dims)
            size = math.prod(shape)
            if size > 2**31:
                raise DataError(f"{path.name} declares {size} values, too many for this data")
            data = f.read(size + 1)
    except DataError:
        raise
    except (OSError, EOFError, zlib.error) as error:
        raise DataError(f"{path.name} is not a valid gzip file: {error}") from None
    if len(data) != size:
        raise DataError(f"{path.name} holds {len(data)}{'+' if len(data) > size else ''} "
                        f"bytes of values, its header says {size}")
    return np.frombuffer(data, np.uint8).reshape(shape)


def _read_idx_set(files: dict[str, pathlib.Path]) -> dict[str, np.ndarray]:
    arrays = {}
    for part in ("train", "test"):
        images, labels = read_idx(files[f"X_{part}"], 3), read_idx(files[f"y_{part}"], 1)
        if len(images) != len(labels) or images.shape[1:] != (28, 28):
            raise DataError(f"{part}: {len(images)} images of {images.shape[1:]} pixels but "
                            f"{len(labels)} labels")
        arrays[f"X_{part}"] = images.reshape(len(images), -1)
        arrays[f"y_{part}"] = labels
    return arrays


# -- CIFAR-10: the python tarball ----------------------------------------------------------------


def _reconstruct():
    try:
        from numpy._core.multiarray import _reconstruct as function
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct as function
    return function


class _BatchUnpickler(pickle.Unpickler):
    """Unpickles what CIFAR-10's batches hold (dicts, lists, strings, numbers, numpy arrays)
    and nothing else: any other global is refused."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"),
                ("numpy._core.multiarray", "_reconstruct"),
                ("numpy", "ndarray"), ("numpy", "dtype")}

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR-10 batch")
        return {"_reconstruct": _reconstruct(), "ndarray": np.ndarray, "dtype": np.dtype}[name]


def _read_batch(f: typing.BinaryIO, name: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        batch = _BatchUnpickler(io.BytesIO(f.read()), encoding="bytes").load()
    except Exception as error:  # noqa: BLE001 - whatever a corrupt pickle raises
        raise DataError(f"{name} is not a CIFAR-10 batch: {type(error).__name__}: {error}"
                        ) from None
    data = batch.get(b"data") if isinstance(batch, dict) else None
    labels = batch.get(b"labels") if isinstance(batch, dict) else None
    if (not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2
            or data.shape[1] != 3072 or not isinstance(labels, list)
            or len(labels) != len(data)
            or not all(type(v) is int and 0 <= v <= 9 for v in labels)):
        raise DataError(f"{name} does not hold uint8 data (n, 3072) and n labels 0-9")
    return data, np.array(labels, dtype=np.uint8)


def _read_cifar(archive_path: pathlib.Path) -> dict[str, np.ndarray]:
    wanted = {name for names in _CIFAR_BATCHES.values() for name in names}
    batches = {}
    try:
        with tarfile.open(archive_path, "r|gz") as archive:
            for member in archive:
                if member.name in wanted and member.isfile():
                    batches[member.name] = _read_batch(archive.extractfile(member), member.name)
    except DataError:
        raise
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise DataError(f"{archive_path.name} is not a readable tarball: {error}") from None
    missing = sorted(wanted - set(batches))
    if missing:
        raise DataError(f"{archive_path.name} lacks {missing}")
    arrays = {}
    for part, names in _CIFAR_BATCHES.items():
        arrays[f"X_{part}"] = np.concatenate([batches[name][0] for name in names])
        arrays[f"y_{part}"] = np.concatenate([batches[name][1] for name in names])
    return arrays


def cifar_pairs(full: dict[str, np.ndarray], classes=CIFAR_PAIR_CLASSES) -> dict[str, np.ndarray]:
    """The rows of `classes` of the full CIFAR-10 arrays, in their order, with their indices."""
    pairs = {}
    for part in ("train", "test"):
        index = np.flatnonzero(np.isin(full[f"y_{part}"], classes)).astype(np.int32)
        pairs[f"X_{part}"] = full[f"X_{part}"][index]
        pairs[f"y_{part}"] = full[f"y_{part}"][index]
        pairs[f"idx_{part}"] = index
        pairs[f"exact_{part}"] = np.ones(len(index), dtype=bool)  # a lossless download
    return pairs
