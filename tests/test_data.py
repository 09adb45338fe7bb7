"""`river_advsvm.data` / `advsvm data fetch`, offline: small generated IDX files and CIFAR
tarballs served by a mocked `download`, with their checksums put in the source table."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import struct
import subprocess
import sys
import tarfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_advsvm import cli, data


def idx_bytes(array: np.ndarray) -> bytes:
    """`array` (uint8) as a gzipped IDX file, as MNIST distributes them."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return gzip.compress(header + array.tobytes())


def mnist_like(n_train=50, n_test=20, seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"X_train": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
            "y_train": rng.integers(0, 10, n_train, dtype=np.uint8),
            "X_test": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
            "y_test": rng.integers(0, 10, n_test, dtype=np.uint8)}


class Mirrors:
    """A fake internet: url -> bytes (or an exception to raise), and a log of what was asked."""

    def __init__(self):
        self.files: dict[str, object] = {}
        self.requests: list[str] = []

    def __call__(self, url, destination):
        self.requests.append(url)
        content = self.files.get(url)
        if content is None:
            raise OSError(f"<urlopen error [Errno -2] Name or service not known: {url}>")
        if isinstance(content, Exception):
            raise content
        with open(destination, "wb") as f:
            f.write(content[: len(content) // 2])  # written in two parts, as a stream is
            f.write(content[len(content) // 2:])


@pytest.fixture
def mirrors(monkeypatch):
    fake = Mirrors()
    monkeypatch.setattr(data, "download", fake)
    monkeypatch.setattr(data, "DATASETS", {k: dict(v) for k, v in data.DATASETS.items()})
    return fake


def serve(mirrors, dataset: str, contents: dict[str, bytes], broken_first_mirror=False):
    """Put `contents` (key -> bytes) on two mirrors and their SHA-256 in the source table."""
    for key, content in contents.items():
        name = data.DATASETS[dataset][key].name
        urls = (f"https://mirror-a.invalid/{name}", f"https://mirror-b.invalid/{name}")
        data.DATASETS[dataset][key] = data.Download(name, urls,
                                                    hashlib.sha256(content).hexdigest())
        mirrors.files[urls[1]] = content
        if broken_first_mirror:  # serves a damaged copy
            mirrors.files[urls[0]] = content[:-1] + bytes([content[-1] ^ 1])
        else:
            mirrors.files[urls[0]] = content


@pytest.mark.parametrize("dataset", ["mnist", "fashion-mnist"])
def test_fetch_writes_the_npz_the_benchmarks_read(tmp_path, mirrors, dataset):
    arrays = mnist_like()
    serve(mirrors, dataset, {k: idx_bytes(v) for k, v in arrays.items()})
    logged = []
    paths = data.fetch(dataset, tmp_path, log=logged.append)
    assert paths == [tmp_path / f"{dataset}.npz"]
    with np.load(paths[0]) as written:
        assert sorted(written.files) == ["X_test", "X_train", "y_test", "y_train"]
        for key, array in arrays.items():
            assert written[key].dtype == np.uint8
            np.testing.assert_array_equal(written[key], array.reshape(len(array), -1)
                                          if key.startswith("X") else array)
        assert written["X_train"].shape == (50, 784) and written["y_test"].shape == (20,)
    assert not (tmp_path / "downloads").exists()  # deleted once converted
    assert len(mirrors.requests) == 4 and any("downloading" in m for m in logged)
    # A second fetch finds the file and downloads nothing; --force downloads again.
    data.fetch(dataset, tmp_path, log=logged.append)
    assert len(mirrors.requests) == 4 and logged[-1] == f"{dataset}: already in {tmp_path}"
    data.fetch(dataset, tmp_path, force=True, log=logged.append)
    assert len(mirrors.requests) == 8


def test_the_benchmarks_load_what_fetch_wrote(tmp_path, mirrors):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    try:
        import common
    finally:
        sys.path.pop(0)
    arrays = mnist_like(n_train=200, n_test=80, seed=3)
    serve(mirrors, "mnist", {k: idx_bytes(v) for k, v in arrays.items()})
    data.fetch("mnist", tmp_path, log=lambda m: None)
    pair = common.load_pair(common.data_file(str(tmp_path), "mnist.npz"), 1, 7)
    mask = np.isin(arrays["y_train"], [1, 7])
    np.testing.assert_array_equal(pair["X_train"],
                                  arrays["X_train"][mask].reshape(mask.sum(), -1) / 255.0)
    assert pair["exact_train"].all() and len(pair["y_test"]) == np.isin(arrays["y_test"],
                                                                        [1, 7]).sum()


@pytest.mark.parametrize("damage", ["truncated", "empty", "an npy array", "an npy bomb"])
def test_a_damaged_npz_in_the_directory_is_fetched_again(tmp_path, mirrors, capsys, damage):
    arrays = mnist_like()
    serve(mirrors, "mnist", {k: idx_bytes(v) for k, v in arrays.items()})
    assert cli.main(["data", "fetch", "mnist", "--out", str(tmp_path)]) == 0
    path = tmp_path / "mnist.npz"
    whole = path.read_bytes()
    if damage == "truncated":  # a copy cut short: np.load raised zipfile.BadZipFile
        path.write_bytes(whole[: len(whole) // 2])
    elif damage == "empty":  # EOFError
        path.write_bytes(b"")
    elif damage == "an npy array":  # np.load returns the array, no context manager (TypeError)
        with open(path, "wb") as f:
            np.save(f, np.zeros(3))
    else:  # an array declaring 8 TB over 64 bytes: np.load allocated them (MemoryError)
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
            f.write(bytes(64))
    capsys.readouterr()
    assert cli.main(["data", "fetch", "mnist", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [str(path)]
    assert len(mirrors.requests) == 8 and path.read_bytes() == whole


def test_a_damaged_mirror_is_skipped_and_no_mirror_means_a_clear_error(tmp_path, mirrors):
    arrays = mnist_like()
    serve(mirrors, "mnist", {k: idx_bytes(v) for k, v in arrays.items()},
          broken_first_mirror=True)
    data.fetch("mnist", tmp_path, log=lambda m: None)
    assert len(mirrors.requests) == 8  # each file: the damaged copy, then the good one
    with np.load(tmp_path / "mnist.npz") as written:
        np.testing.assert_array_equal(written["y_test"], arrays["y_test"])

    mirrors.files.clear()
    with pytest.raises(data.DataError) as error:
        data.fetch("mnist", tmp_path / "elsewhere", log=lambda m: None)
    message = str(error.value)
    assert "could not download train-images-idx3-ubyte.gz" in message
    assert "mirror-a.invalid" in message and "mirror-b.invalid" in message
    assert "\n" not in message
    assert not (tmp_path / "elsewhere").exists()  # no partial file, nor folders left empty


def test_a_checksum_mismatch_on_every_mirror_is_refused(tmp_path, mirrors):
    arrays = mnist_like()
    serve(mirrors, "mnist", {k: idx_bytes(v) for k, v in arrays.items()},
          broken_first_mirror=True)
    url = data.DATASETS["mnist"]["y_test"].urls[1]
    mirrors.files[url] = mirrors.files[url] + b"\0"
    with pytest.raises(data.DataError, match="gave SHA-256 .* not "):
        data.fetch("mnist", tmp_path, log=lambda m: None)
    assert not (tmp_path / "mnist.npz").exists()


@pytest.mark.parametrize(
    "content, message",
    [(b"not gzip", "not a valid gzip file"),
     (gzip.compress(bytes([0, 0, 0x08, 3]) + struct.pack(">3I", 5, 28, 28) + bytes(100)),
      "holds 100 bytes of values, its header says 3920"),
     (gzip.compress(bytes([0, 0, 0x08, 3]) + struct.pack(">3I", 1, 28, 28) + bytes(785)),
      "holds 785\\+ bytes"),
     (gzip.compress(bytes([0, 0, 0x0D, 3]) + struct.pack(">3I", 1, 28, 28) + bytes(784)),
      "not an IDX file of 3-D unsigned bytes"),
     (gzip.compress(bytes([0, 0, 0x08, 3]) + struct.pack(">3I", 2**20, 2**20, 28)),
      "declares")],
    ids=["not-gzip", "short", "long", "not-bytes", "huge"],
)
def test_bad_idx_files_are_data_errors(tmp_path, mirrors, content, message):
    arrays = mnist_like()
    contents = {k: idx_bytes(v) for k, v in arrays.items()}
    contents["X_train"] = content
    serve(mirrors, "mnist", contents)
    with pytest.raises(data.DataError, match=message):
        data.fetch("mnist", tmp_path, log=lambda m: None)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.integers(1, 3))
def test_read_idx_on_arbitrary_content(tmp_path_factory, content, ndim):
    path = tmp_path_factory.mktemp("idx") / "x.gz"
    path.write_bytes(gzip.compress(bytes([0, 0, 0x08, ndim]) + content))
    try:
        array = data.read_idx(path, ndim)
    except data.DataError:
        return
    shape = struct.unpack(f">{ndim}I", content[:4 * ndim])
    assert array.shape == shape and array.tobytes() == content[4 * ndim:]


# -- CIFAR-10 ------------------------------------------------------------------------------------


def py2_pickle(batch: dict) -> bytes:
    """A CIFAR-10 batch pickled as Python 2's cPickle wrote the real ones: protocol 2, str as
    BINSTRING, the uint8 array through numpy.core.multiarray._reconstruct."""
    P = pickle

    def string(b: bytes) -> bytes:
        if len(b) < 256:
            return P.SHORT_BINSTRING + bytes([len(b)]) + b
        return P.BINSTRING + struct.pack("<i", len(b)) + b

    def integer(n: int) -> bytes:
        return P.BININT + struct.pack("<i", n)

    def array(a: np.ndarray) -> bytes:
        return (P.GLOBAL + b"numpy.core.multiarray\n_reconstruct\n"
                + P.GLOBAL + b"numpy\nndarray\n" + integer(0) + P.TUPLE1 + string(b"b")
                + P.TUPLE3 + P.REDUCE
                + P.MARK + integer(1) + integer(a.shape[0]) + integer(a.shape[1]) + P.TUPLE2
                + P.GLOBAL + b"numpy\ndtype\n" + string(b"u1") + integer(0) + integer(1)
                + P.TUPLE3 + P.REDUCE
                + P.MARK + integer(3) + string(b"|") + P.NONE + P.NONE + P.NONE + integer(-1)
                + integer(-1) + integer(0) + P.TUPLE + P.BUILD
                + P.NEWFALSE + string(a.tobytes()) + P.TUPLE + P.BUILD)

    out = P.PROTO + b"\x02" + P.EMPTY_DICT + P.MARK
    out += string(b"batch_label") + string(batch["batch_label"])
    out += string(b"labels") + P.EMPTY_LIST + P.MARK
    out += b"".join(integer(v) for v in batch["labels"]) + P.APPENDS
    out += string(b"data") + array(batch["data"])
    out += string(b"filenames") + P.EMPTY_LIST + P.MARK
    out += b"".join(string(f) for f in batch["filenames"]) + P.APPENDS
    return out + P.SETITEMS + P.STOP


def cifar_tarball(per_batch=12, seed=0, replace: dict | None = None) -> tuple[bytes, dict]:
    rng = np.random.default_rng(seed)
    members, full = {}, {"X_train": [], "y_train": [], "X_test": [], "y_test": []}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        X = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        y = rng.integers(0, 10, per_batch).tolist()
        members[name] = py2_pickle({"batch_label": name.encode(), "labels": y, "data": X,
                                    "filenames": [f"{name}_{i}.png".encode()
                                                  for i in range(per_batch)]})
        part = "test" if name == "test_batch" else "train"
        full[f"X_{part}"].append(X)
        full[f"y_{part}"].append(np.array(y, np.uint8))
    members["batches.meta"] = pickle.dumps({b"label_names": [b"airplane"]}, protocol=2)
    members.update(replace or {})
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in members.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue(), {k: np.concatenate(v) for k, v in full.items()}


def test_cifar10_full_and_pairs(tmp_path, mirrors):
    archive, full = cifar_tarball()
    serve(mirrors, "cifar10", {"archive": archive})
    paths = data.fetch("cifar10", tmp_path, log=lambda m: None)
    assert paths == [tmp_path / "cifar10.npz", tmp_path / "cifar10_pairs.npz"]
    with np.load(paths[0]) as written:
        for key, array in full.items():
            assert written[key].dtype == np.uint8
            np.testing.assert_array_equal(written[key], array)  # CIFAR layout, row order kept
    with np.load(paths[1]) as pairs:
        for part in ("train", "test"):
            index = pairs[f"idx_{part}"]
            assert index.dtype == np.int32 and (np.diff(index) > 0).all()
            assert set(pairs[f"y_{part}"].tolist()) <= {1, 5, 7, 9}
            expected = np.flatnonzero(np.isin(full[f"y_{part}"], [1, 5, 7, 9]))
            np.testing.assert_array_equal(index, expected)
            np.testing.assert_array_equal(pairs[f"X_{part}"], full[f"X_{part}"][index])
            np.testing.assert_array_equal(pairs[f"y_{part}"], full[f"y_{part}"][index])
            assert pairs[f"exact_{part}"].dtype == bool and pairs[f"exact_{part}"].all()


class Boom:
    def __reduce__(self):
        return (os.system, ("touch /tmp/river-advsvm-data-pwned",))


@pytest.mark.parametrize(
    "replace, message",
    [({"data_batch_3": pickle.dumps(Boom(), protocol=2)}, "posix.system is not allowed"),
     ({"test_batch": b"\x80\x02garbage"}, "not a CIFAR-10 batch"),
     ({"data_batch_1": pickle.dumps({b"data": [1, 2], b"labels": [1]}, protocol=4)},
      "does not hold uint8 data")],
)
def test_a_hostile_or_broken_batch_is_refused_unexecuted(tmp_path, mirrors, replace, message):
    archive, _ = cifar_tarball(replace=replace)
    serve(mirrors, "cifar10", {"archive": archive})
    with pytest.raises(data.DataError, match=message):
        data.fetch("cifar10", tmp_path, log=lambda m: None)
    assert not os.path.exists("/tmp/river-advsvm-data-pwned")
    assert not (tmp_path / "cifar10.npz").exists()


def test_a_tarball_without_its_batches_is_refused(tmp_path, mirrors):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("cifar-10-batches-py/readme.html")
        archive.addfile(info, io.BytesIO(b""))
    serve(mirrors, "cifar10", {"archive": buffer.getvalue()})
    with pytest.raises(data.DataError, match="lacks"):
        data.fetch("cifar10", tmp_path, log=lambda m: None)


# -- the command and the benchmarks' pointer to it -----------------------------------------------


def test_the_command_writes_into_out_or_the_default_cache(tmp_path, mirrors, monkeypatch,
                                                          capsys):
    serve(mirrors, "mnist", {k: idx_bytes(v) for k, v in mnist_like().items()})
    assert cli.main(["data", "fetch", "mnist", "--out", str(tmp_path / "here")]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [str(tmp_path / "here" / "mnist.npz")]
    assert "downloading https://mirror-a.invalid/" in err

    monkeypatch.setenv("ADVSVM_DATA", str(tmp_path / "cache"))
    assert data.default_dir() == tmp_path / "cache"
    assert cli.main(["data", "fetch", "mnist"]) == 0
    assert (tmp_path / "cache" / "mnist.npz").exists()
    monkeypatch.delenv("ADVSVM_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data.default_dir() == tmp_path / "home" / ".cache" / "river-advsvm"


def test_a_tilde_in_the_directory_is_the_home_directory(tmp_path, mirrors, monkeypatch, capsys):
    """`--out=~/data` and `ADVSVM_DATA=~/d` (which no shell expands) write under $HOME, not
    into a directory named `~`; `--out` naming a file is refused in one line."""
    serve(mirrors, "mnist", {k: idx_bytes(v) for k, v in mnist_like().items()})
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["data", "fetch", "mnist", "--out=~/data"]) == 0
    assert (tmp_path / "home" / "data" / "mnist.npz").exists()
    monkeypatch.setenv("ADVSVM_DATA", "~/cache")
    assert data.default_dir() == tmp_path / "home" / "cache"
    assert not (tmp_path / "~").exists()
    capsys.readouterr()
    (tmp_path / "file").write_text("")
    assert cli.main(["data", "fetch", "mnist", "--out", str(tmp_path / "file")]) == 2
    assert capsys.readouterr().err.strip().endswith("is not a directory")


def test_the_command_fails_in_one_line(tmp_path, mirrors, capsys):
    assert cli.main(["data", "fetch", "mnist", "--out", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith("downloading https://") for line in lines[:-1])  # progress
    assert lines[-1].startswith("advsvm data fetch: could not download train-images-idx3")


def test_missing_benchmark_data_names_the_command(tmp_path):
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "budget_policies.py")
    done = subprocess.run([sys.executable, script, "--data", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "advsvm data fetch mnist --out" in done.stderr and str(tmp_path) in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("link", ["loop", "dangling"])
def test_an_out_link_that_leads_nowhere_is_refused_in_one_line(tmp_path, capsys, link):
    """`advsvm data fetch --out` a link in a loop, or to a path that does not exist, said
    `[Errno 17] File exists`: the link exists where the fetch made its directory."""
    out = tmp_path / "data"
    os.symlink(out if link == "loop" else tmp_path / "gone" / "data", out)
    assert cli.main(["data", "fetch", "mnist", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{out} is a link to" in err and "leads to no directory" in err
    assert "File exists" not in err


def test_a_download_left_by_an_earlier_run_is_used_only_if_its_bytes_are_right(tmp_path,
                                                                              mirrors):
    """A file left in `downloads/` by a run that failed later is taken as it is only when its
    SHA-256 is the source's; a damaged one is downloaded again."""
    contents = {k: idx_bytes(v) for k, v in mnist_like().items()}
    serve(mirrors, "mnist", contents)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    names = {key: data.DATASETS["mnist"][key].name for key in contents}
    for key, content in contents.items():  # one right, the others damaged
        damaged = content[:-1] + bytes([content[-1] ^ 1])
        (downloads / names[key]).write_bytes(content if key == "X_train" else damaged)
    data.fetch("mnist", tmp_path, log=lambda message: None)
    asked = {url.rsplit("/", 1)[1] for url in mirrors.requests}
    assert asked == {names[key] for key in contents if key != "X_train"}
    with np.load(tmp_path / "mnist.npz") as arrays:
        np.testing.assert_array_equal(arrays["y_test"], mnist_like()["y_test"])
