"""Parquet streaming: layouts, names, sources, validation, writers, and the memory bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.dataset as ds  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from river_advsvm import AdvKernelSVM, InvalidInput  # noqa: E402
from river_advsvm.streams import parquet  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def images(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(50, 784), dtype=np.uint8)
    y = rng.integers(0, 2, size=50)
    path = tmp_path / "images.parquet"
    parquet.write(path, X, y, layout="list", row_group_size=16)
    return path, X, y


def test_list_column_streams_as_named_features(images):
    path, X, y = images
    assert pq.ParquetFile(path).metadata.num_row_groups == 4
    batches = list(parquet.iter_batches(path, target="y", batch_size=10))
    assert [len(b) for b, _ in batches] == [10, 6, 10, 6, 10, 6, 2]  # never across row groups
    frame = np.concatenate([b.to_numpy() for b, _ in batches])
    assert list(batches[0][0].columns) == list(range(784))
    assert frame.dtype == np.float64 and np.array_equal(frame, X)
    assert np.concatenate([labels.to_numpy() for _, labels in batches]).tolist() == y.tolist()
    rows = list(parquet.iter_rows(path, target="y", batch_size=7))
    assert len(rows) == 50 and rows[3][0] == dict(enumerate(X[3].astype(float).tolist()))
    assert rows[3][1] == y[3] and type(rows[3][1]) is int


def test_wide_table_and_column_choice(tmp_path):
    X = np.arange(30, dtype=np.float32).reshape(10, 3)
    path = tmp_path / "wide.parquet"
    parquet.write(path, X, np.arange(10) % 2, layout="wide", feature_name="f")
    X_batch, y_batch = next(parquet.iter_batches(path, target="y"))
    assert list(X_batch.columns) == ["f_0", "f_1", "f_2"] and y_batch.name == "y"
    x, label = next(parquet.iter_rows(path, target="y", features=["f_2", "f_0"]))
    assert x == {"f_2": 2.0, "f_0": 0.0} and label == 0
    unlabelled = next(parquet.iter_rows(path))  # no target: every column is a feature
    assert unlabelled == ({"f_0": 0.0, "f_1": 1.0, "f_2": 2.0, "y": 0.0}, None)
    with pytest.raises(KeyError):
        next(parquet.iter_rows(path, target="label"))
    with pytest.raises(KeyError):
        next(parquet.iter_rows(path, target="y", features=["nope"]))


def test_mixed_list_and_scalar_columns(tmp_path):
    table = pa.table({
        "pixels": pa.array([[1, 2], [3, 4]], type=pa.list_(pa.uint8())),
        "age": [30, 40],
        "label": ["a", "b"],
    })
    path = tmp_path / "mixed.parquet"
    pq.write_table(table, path)
    x, y = next(parquet.iter_rows(path, target="label"))
    assert x == {"pixels_0": 1.0, "pixels_1": 2.0, "age": 30.0} and y == "a"


def test_directory_and_dataset_sources(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    X = np.arange(40, dtype=float).reshape(20, 2)
    parquet.write(folder / "a.parquet", X[:12], np.zeros(12, int), row_group_size=5)
    parquet.write(folder / "b.parquet", X[12:], np.ones(8, int), row_group_size=5)
    from_dir = np.concatenate([b.to_numpy() for b, _ in parquet.iter_batches(folder, "y")])
    assert np.array_equal(from_dir, X)
    dataset = ds.dataset(str(folder), format="parquet")
    assert len(list(parquet.iter_rows(dataset, "y"))) == 20
    memory = ds.dataset(pa.table({"a": [1.0, 2.0], "y": [0, 1]}))
    assert list(parquet.iter_rows(memory, "y")) == [({"a": 1.0}, 0), ({"a": 2.0}, 1)]


@pytest.mark.parametrize("table, message", [
    (pa.table({"a": [1.0, None], "y": [0, 1]}), "row 1"),
    (pa.table({"a": [1.0, float("nan")], "y": [0, 1]}), "finite"),
    (pa.table({"a": pa.array([[1.0], [1.0, 2.0]]), "y": [0, 1]}), "lengths"),
    (pa.table({"a": pa.array([[1.0], None]), "y": [0, 1]}), "null list"),
    (pa.table({"a": ["x", "y"], "y": [0, 1]}), "numbers"),
])
def test_bad_values_raise_invalid_input_with_their_place(tmp_path, table, message):
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path)
    with pytest.raises(InvalidInput, match=message):
        list(parquet.iter_rows(path, target="y"))


def test_learn_many_on_batches_matches_learn_one_on_rows(images):
    path, _, _ = images
    one, many = (AdvKernelSVM(budget=64, warm_up=20, seed=1) for _ in range(2))
    for x, y in parquet.iter_rows(path, target="y"):
        one.learn_one({k: v / 255 for k, v in x.items()}, y)
    for X, y in parquet.iter_batches(path, target="y", batch_size=16):
        many.learn_many(X / 255, y)
    assert one.n_learned == many.n_learned == 50
    x = {i: 0.5 for i in range(784)}
    assert one.decision_one(x) == pytest.approx(many.decision_one(x), rel=1e-9, abs=1e-12)


def test_from_npz_and_from_river(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.integers(0, 256, size=(30, 4, 4), dtype=np.uint8)  # images keep their shape here
    np.savez_compressed(tmp_path / "d.npz", X_train=X, y_train=np.arange(30) % 3)
    assert parquet.from_npz(tmp_path / "d.npz", tmp_path / "d.parquet", row_group_size=8) == 30
    schema = pq.read_schema(tmp_path / "d.parquet")
    assert schema.field("x").type == pa.list_(pa.uint8(), 16)  # uint8 stays uint8
    back = np.concatenate([b.to_numpy() for b, _ in parquet.iter_batches(tmp_path / "d.parquet",
                                                                           "y")])
    assert np.array_equal(back, X.reshape(30, 16))

    from river import datasets

    phishing = list(datasets.Phishing())
    assert parquet.from_river(phishing, tmp_path / "p.parquet", row_group_size=100) == 1250
    rows = list(parquet.iter_rows(tmp_path / "p.parquet", target="y"))
    assert len(rows) == 1250
    for (x, y), (x0, y0) in zip(rows[:50], phishing[:50]):
        assert y == y0 and x == pytest.approx({k: float(v) for k, v in x0.items()})
    with pytest.raises(ValueError, match="features"):
        parquet.from_river([({"a": 1}, 0), ({"b": 1}, 1)], tmp_path / "q.parquet")


_MEASURE = textwrap.dedent("""
    import json, sys, tracemalloc
    import pyarrow as pa
    from river_advsvm.streams import parquet
    path, batch_size = sys.argv[1], int(sys.argv[2])
    pool = pa.default_memory_pool()
    tracemalloc.start()
    rows = 0
    for X, y in parquet.iter_batches(path, target="y", batch_size=batch_size):
        rows += len(X)
    print(json.dumps({
        "rows": rows,
        "arrow_max": pool.max_memory(),
        "python_peak": tracemalloc.get_traced_memory()[1],
    }))
""")


def _write_random_images(path, rows, width, row_group_size, seed):
    rng = np.random.default_rng(seed)
    writer = None
    for start in range(0, rows, 4096):  # written in chunks: the writer is bounded too
        n = min(4096, rows - start)
        X = rng.integers(0, 256, size=(n, width), dtype=np.uint8)
        table = parquet._feature_table(X, rng.integers(0, 2, n), "list", "x", "y")
        writer = writer or pq.ParquetWriter(path, table.schema, compression="zstd")
        writer.write_table(table, row_group_size=row_group_size)
    writer.close()


def _measure(path, batch):
    result = subprocess.run([sys.executable, "-c", _MEASURE, str(path), str(batch)],
                            capture_output=True, text=True, check=True, cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=REPO))
    return json.loads(result.stdout)


def test_memory_is_bounded_by_the_batch_not_the_file(tmp_path):
    """A file 48 batches long streams with peak memory a small multiple of one batch, and the
    same peak as a file 12 batches long: memory does not grow with the file.

    Measured in fresh processes: Arrow's pool peak (every buffer the reader, the casts and the
    float64 batches allocate) and Python's traced peak (numpy temporaries).
    """
    batch, width = 512, 784
    batch_bytes = batch * width * 8  # one float64 batch: 3.2 MB
    peaks = {}
    for n_batches in (12, 48):
        path = tmp_path / f"images-{n_batches}.parquet"
        _write_random_images(path, batch * n_batches, width, batch, seed=n_batches)
        numbers = peaks[n_batches] = _measure(path, batch)
        assert numbers["rows"] == batch * n_batches
        print(f"\nparquet memory, {n_batches} batches of {batch_bytes / 1e6:.1f} MB "
              f"(file: {batch_bytes * n_batches / 1e6:.0f} MB as float64, "
              f"{os.path.getsize(path) / 1e6:.0f} MB on disk): arrow peak "
              f"{numbers['arrow_max'] / 1e6:.1f} MB, python peak "
              f"{numbers['python_peak'] / 1e6:.1f} MB")
    big, small = peaks[48], peaks[12]
    # Two float64 batches alive at once (the caller's and the one being built) plus the
    # decoding buffers of one row group: about 4.5 batches, whatever the file's length.
    assert big["arrow_max"] <= 6 * batch_bytes
    assert big["arrow_max"] <= 1.5 * small["arrow_max"]  # 4x the file, the same peak +- noise
    assert big["python_peak"] <= 2 * batch_bytes
