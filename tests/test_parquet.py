"""Parquet streaming: layouts, names, sources, validation, writers, and the memory bound."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    assert [len(b) for b, _ in batches] == [10] * 5  # full batches, across row groups
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


def test_null_labels_are_none_beside_the_labels_as_written(tmp_path):
    # An int label column with nulls: its labels stay ints in a batch, as row by row (pandas
    # alone makes them floats, and the model's classes 0.0 and 1.0).
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"a": [0.1, 0.2, 0.3], "y": pa.array([0, None, 1], pa.int64())}),
                   path)
    (_, y_batch), = parquet.iter_batches(path, target="y")
    rows = [y for _, y in parquet.iter_rows(path, target="y")]
    assert y_batch.tolist() == rows == [0, None, 1]
    assert [type(y) for y in rows] == [int, type(None), int]


def test_list_columns_expanding_to_another_columns_name_are_refused_naming_it(tmp_path):
    path = tmp_path / "clash.parquet"
    pq.write_table(pa.table({"c": pa.array([[1.0, 2.0]], pa.list_(pa.float64(), 2)),
                             "c_0": [0.5], "y": [1]}), path)
    with pytest.raises(parquet.ParquetError, match=r"clash.parquet: its list columns expand to "
                       r"feature names other columns have \(c_0\): rename"):
        next(parquet.iter_rows(path, target="y"))
    x, _ = next(parquet.iter_rows(path, target="y", features=["c"]))
    assert x == {0: 1.0, 1: 2.0}


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
    # The lengths as numbers, not numpy's repr (np.int32(1)).
    (pa.table({"a": pa.array([[1.0], [1.0, 2.0]]), "y": [0, 1]}), r"lengths \[1, 2\];"),
    (pa.table({"a": pa.array([[1.0], None]), "y": [0, 1]}), "null list"),
    (pa.table({"a": ["x", "y"], "y": [0, 1]}), "numbers"),
    # Rows of no feature at all: they reached the model (or the demo's scaling, which failed
    # with numpy's "zero-size array to reduction operation minimum").
    (pa.table({"a": pa.array([[], []], pa.list_(pa.float64())), "y": [0, 1]}),
     r"the feature columns \['a'\] hold no values \(empty lists\)"),
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


# -- hostile files: declared sizes, corrupt pages, mixed directories ------------------------------

_RSS = textwrap.dedent("""
    import json, resource, sys
    from river_advsvm.streams import parquet
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rows = 0
    for X, y in parquet.iter_batches(sys.argv[1], target="y", batch_size=1024):
        rows += len(X)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rows": rows, "growth_kb": after - before}))
""")


@pytest.mark.slow
def test_one_huge_row_group_streams_in_the_memory_of_a_batch(tmp_path):
    """10 million rows in one row group (80 MB as float64, a few KB on disk): the process's peak
    grows by far less than the row group, because the reader asks for 1,024 rows at a time."""
    n = 10_000_000
    path = tmp_path / "one-group.parquet"
    pq.write_table(pa.table({"x": np.zeros(n), "y": np.zeros(n, np.int8)}), path,
                   row_group_size=n)
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    result = subprocess.run([sys.executable, "-c", _RSS, str(path)], capture_output=True,
                            text=True, check=True, cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=REPO))
    numbers = json.loads(result.stdout)
    assert numbers["rows"] == n
    assert numbers["growth_kb"] * 1024 < 8 * n / 4  # under a quarter of the row group


def _variable_lists(path, lengths):
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = pa.array(np.zeros(int(offsets[-1])))
    column = pa.ListArray.from_arrays(pa.array(offsets), values)
    pq.write_table(pa.table({"x": column, "y": np.zeros(len(lengths), np.int8)}), path)


def test_a_variable_list_column_declaring_more_than_the_limit_is_refused_before_reading(
        tmp_path):
    path = tmp_path / "lists.parquet"
    _variable_lists(path, [3000, 1, 1])  # 3002 values: 24,016 bytes as float64
    with pytest.raises(parquet.ParquetError, match=r"lists\.parquet: row group 0 declares "
                                                   r"24016 bytes .*max_list_bytes"):
        next(parquet.iter_batches(path, target="y", max_list_bytes=24015))
    # The caller may raise the limit; here the lengths differ, so the values are refused.
    with pytest.raises(InvalidInput, match="lengths"):
        list(parquet.iter_batches(path, target="y", max_list_bytes=24016))


def test_a_row_wider_than_any_model_is_refused_from_the_schema(tmp_path):
    path = tmp_path / "wide.parquet"
    width = parquet.MAX_ROW_BYTES // 8 + 1
    column = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(width, np.uint8)), width)
    pq.write_table(pa.table({"x": column, "y": [0]}), path)
    with pytest.raises(parquet.ParquetError, match=f"wide.parquet: its rows hold {width} values"):
        next(parquet.iter_batches(path, target="y"))


@pytest.mark.parametrize("values", [pa.array([1, 2**60], pa.int64()),
                                    pa.array([1, 2**64 - 1], pa.uint64()),
                                    pa.array([[1, 1], [1, -2**63]], pa.list_(pa.int64(), 2))])
def test_an_integer_beyond_a_floats_exact_range_is_a_value_beyond_the_limit(tmp_path, values):
    """An integer column holding a value that no float64 holds exactly (over 2**53, so over the
    magnitude limit too): the bad value named with its row, as for a float, not a file that
    "cannot be read"."""
    path = tmp_path / "big-int.parquet"
    pq.write_table(pa.table({"a": values, "y": [0, 1]}), path)
    with pytest.raises(InvalidInput, match=r"big-int\.parquet, row 1: feature ('a'|1) is "
                                           r".*beyond the accepted magnitude"):
        list(parquet.iter_rows(path, target="y"))


@pytest.mark.parametrize("row", [0, 777, 1499])
def test_a_value_beyond_the_magnitude_limit_names_its_file_and_row(tmp_path, row):
    X = np.ones((1500, 3))
    X[row, 1] = 1e20
    path = tmp_path / "big-value.parquet"
    parquet.write(path, X, np.arange(1500) % 2, layout="wide", row_group_size=500)
    batch = 512
    with pytest.raises(InvalidInput, match=rf"big-value\.parquet, row {row}: feature 'x_1' is "
                                           r"1e\+20"):
        list(parquet.iter_batches(path, target="y", batch_size=batch))


def _corrupt(source, target, start, length, mask=0x5A):
    data = bytearray(source.read_bytes())
    for i in range(start, min(start + length, len(data))):
        data[i] ^= mask
    target.write_bytes(bytes(data))


def test_a_corrupt_page_names_the_file_and_the_rows(tmp_path):
    good = tmp_path / "good.parquet"
    X = np.random.default_rng(0).random((3000, 4))
    parquet.write(good, X, np.arange(3000) % 2, layout="wide", row_group_size=500,
                  compression="none")
    page = pq.ParquetFile(good).metadata.row_group(3).column(1).data_page_offset
    bad = tmp_path / "bad.parquet"
    _corrupt(good, bad, page, 60)
    rows = 0
    with pytest.raises(parquet.ParquetError, match=r"bad\.parquet \(rows from \d+\): cannot be "
                                                   r"read"):
        for X_batch, _ in parquet.iter_batches(bad, target="y"):
            rows += len(X_batch)
    assert rows <= 1500  # what came before row group 3, at most


@pytest.mark.parametrize("writer", ["write", "from_river"])
def test_a_flipped_bit_in_a_page_of_values_is_refused_by_its_checksum(tmp_path, writer):
    """The writers add a checksum to every page and the readers check it: a bit flipped in a
    value is refused, where it would read as another value (as it does unchecked)."""
    good = tmp_path / "good.parquet"
    X = np.random.default_rng(0).random((2000, 3))
    if writer == "write":
        parquet.write(good, X, np.arange(2000) % 2, layout="wide", row_group_size=500,
                      compression="none")
    else:
        parquet.from_river(([{"a": a, "b": b, "c": c}, i % 2] for i, (a, b, c) in enumerate(X)),
                           good, row_group_size=500, compression="none")
    column = pq.ParquetFile(good).metadata.row_group(2).column(1)
    bad = tmp_path / "bad.parquet"
    # A byte in the middle of the column chunk: past the first page's header, among the 500
    # values it holds (in its dictionary page, or its data page when it has none).
    start = column.dictionary_page_offset if column.has_dictionary_page \
        else column.data_page_offset
    _corrupt(good, bad, start + column.total_compressed_size // 2, 1, 0x01)
    unchecked = pq.read_table(bad).column(1).to_numpy()
    assert (unchecked != X[:, 1]).sum() == 1  # a value changed, nothing else
    rows = 0
    with pytest.raises(parquet.ParquetError, match=r"bad\.parquet \(rows from \d+\): cannot be "
                                                   r"read: .*checksum"):
        for X_batch, _ in parquet.iter_batches(bad, target="y", batch_size=100):
            rows += len(X_batch)
    assert rows == 1000  # the row groups before it


@settings(max_examples=40, deadline=None)
@given(start=st.integers(0, 5000), length=st.integers(1, 64), mask=st.integers(1, 255))
def test_any_flipped_bytes_raise_one_of_the_documented_errors(tmp_path_factory, start, length,
                                                              mask):
    folder = tmp_path_factory.mktemp("flips")
    good = folder / "good.parquet"
    parquet.write(good, np.random.default_rng(1).random((400, 3)), np.arange(400) % 2,
                  layout="wide", row_group_size=100, compression="none")
    bad = folder / "bad.parquet"
    _corrupt(good, bad, start % good.stat().st_size, length, mask)
    try:
        for _ in parquet.iter_rows(bad, target="y"):
            pass
    except (parquet.ParquetError, InvalidInput) as error:
        assert "bad.parquet" in str(error) and "\n" not in str(error)


def test_a_directory_with_a_bad_file_is_refused_before_the_first_batch(tmp_path):
    X = np.random.default_rng(2).random((3000, 4))
    for name, content in [("not-parquet", b"PAR1 but not really" * 8), ("other-schema", None),
                          ("other-width", "list")]:
        folder = tmp_path / name
        folder.mkdir()
        layout = "list" if content == "list" else "wide"
        parquet.write(folder / "1.parquet", X, np.arange(3000) % 2, layout=layout)
        if content is None:
            parquet.write(folder / "2.parquet", X, np.arange(3000) % 2, layout="list")
        elif content == "list":  # images of another size: the schema says so
            parquet.write(folder / "2.parquet", X[:, :3], np.arange(3000) % 2, layout="list")
        else:
            (folder / "2.parquet").write_bytes(content)
        batches = parquet.iter_batches(folder, target="y")
        with pytest.raises(parquet.ParquetError, match=r"2\.parquet: "):
            next(batches)  # not one batch of 1.parquet first


def test_a_directory_of_other_files_first_is_refused_in_the_users_words(tmp_path):
    """A directory whose first file is not Parquet (`advsvm demo --data .` in a working
    directory) was refused in pyarrow's words: "Error creating dataset. Could not read schema
    ... Parquet magic bytes not found in footer"."""
    X = np.random.default_rng(2).random((30, 4))
    parquet.write(tmp_path / "b.parquet", X, np.arange(30) % 2)
    (tmp_path / "a.txt").write_text("notes")
    with pytest.raises(parquet.ParquetError) as caught:
        next(parquet.iter_batches(tmp_path, target="y"))
    assert str(caught.value) == (f"{tmp_path}: a directory is read as Parquet files, and "
                                 f"{tmp_path / 'a.txt'} is not one: give a Parquet file, or a "
                                 "directory of Parquet files only")


@pytest.mark.parametrize("names, features, twice", [
    (["a", "a", "y"], None, "a"),  # two feature columns named alike
    (["a", "y", "y"], None, "y"),  # two label columns
    (["a", "b", "b", "y"], ["a", "b"], "b"),
])
def test_a_column_name_that_appears_twice_is_refused_naming_it(tmp_path, names, features,
                                                                twice):
    """pyarrow reports a duplicated column as one that "does not exist in schema" (a KeyError,
    which the demo turned into "name the label column with --target")."""
    path = tmp_path / "twice.parquet"
    arrays = [pa.array([0.5, 0.25]) if name != "y" else pa.array([0, 1]) for name in names]
    pq.write_table(pa.Table.from_arrays(arrays, names=names), path)
    with pytest.raises(parquet.ParquetError, match=rf"twice\.parquet: the column name '{twice}' "
                                                   r"appears 2 times"):
        next(parquet.iter_rows(path, target="y", features=features))


def test_duplicated_columns_that_are_not_read_do_not_matter(tmp_path):
    path = tmp_path / "twice.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([0.5]), pa.array([1.5]), pa.array([2.5]),
                                         pa.array([1])], names=["a", "b", "b", "y"]), path)
    assert list(parquet.iter_rows(path, target="y", features=["a"])) == [({"a": 0.5}, 1)]


@pytest.mark.parametrize("extra", [0, 1])
def test_a_variable_list_row_wider_than_any_model_is_refused_like_a_fixed_size_one(tmp_path,
                                                                                   extra):
    """A fixed-size list of a million and one values is refused from the schema; a variable
    list of as many (under max_list_bytes) was read, a row no model takes. With `extra`, a
    scalar column adds the value over the limit."""
    path = tmp_path / "wide-lists.parquet"
    width = parquet.MAX_ROW_BYTES // 8 + 1 - extra
    column = pa.ListArray.from_arrays(pa.array(np.array([0, width], np.int32)),
                                      pa.array(np.zeros(width, np.uint8)))
    table = {"x": column, "y": [0]}
    if extra:
        table["z"] = [1.0]
    pq.write_table(pa.table(table), path)
    with pytest.raises(parquet.ParquetError) as error:
        next(parquet.iter_batches(path, target="y"))
    assert str(error.value) == (f"{path}: its rows hold {parquet.MAX_ROW_BYTES // 8 + 1} values, "
                                f"over the {parquet.MAX_ROW_BYTES // 8} a row may hold")


@pytest.mark.parametrize("features", [None, []])
def test_a_file_of_the_label_column_alone_is_refused_naming_it(tmp_path, features):
    """It was a bare ValueError("no feature columns"): `advsvm demo --data` and `advsvm serve
    --replay` said neither which file nor what it holds."""
    path = tmp_path / "labels-only.parquet"
    pq.write_table(pa.table({"y": [0, 1]}), path)
    with pytest.raises(parquet.ParquetError) as error:
        next(parquet.iter_rows(path, target="y", features=features))
    assert str(error.value) == f"{path}: no feature columns (it holds ['y'])"


def test_dictionary_encoded_numbers_are_numbers(tmp_path):
    """A dataset of dictionary-encoded numbers (pandas categoricals, `dictionary_encode()`) was
    refused: 'feature column 'a' has type dictionary<values=double, ...>; numbers or lists of
    numbers are expected'. Nulls among them are still refused with their row."""
    table = pa.table({"a": pa.array([0.5, 0.25, 0.5]).dictionary_encode(),
                      "b": pa.ListArray.from_arrays(  # lists of dictionary-encoded numbers
                          pa.array([0, 2, 4, 6], pa.int32()),
                          pa.array([1, 2, 3, 4, 1, 2], pa.int8()).dictionary_encode()),
                      "y": [0, 1, 0]})
    assert list(parquet.iter_rows(ds.dataset(table), target="y")) == [
        ({"a": 0.5, "b_0": 1.0, "b_1": 2.0}, 0), ({"a": 0.25, "b_0": 3.0, "b_1": 4.0}, 1),
        ({"a": 0.5, "b_0": 1.0, "b_1": 2.0}, 0)]
    nulls = pa.table({"a": pa.array([1, None]).dictionary_encode(), "y": [0, 1]})
    with pytest.raises(InvalidInput, match=r"row 1: feature 'a' is nan"):
        list(parquet.iter_rows(ds.dataset(nulls), target="y"))
    words = pa.table({"a": pa.array(["u", "v"]).dictionary_encode(), "y": [0, 1]})
    with pytest.raises(InvalidInput, match="numbers or lists of numbers are expected"):
        list(parquet.iter_rows(ds.dataset(words), target="y"))


@pytest.mark.parametrize("link", ["b.parquet", "sub/up"])
def test_a_directory_reaching_one_file_twice_through_a_link_is_refused(tmp_path, link):
    """pyarrow lists a link to a file of the directory as a file of its own, and follows a link
    to a directory above as deep as paths go: the same rows were learned twice, or 40 times."""
    folder = tmp_path / "parts"
    folder.mkdir()
    parquet.write(folder / "a.parquet", np.ones((3, 2)), np.array([0, 1, 0]))
    if link == "b.parquet":
        (folder / "b.parquet").symlink_to("a.parquet")
    else:
        (folder / "sub").mkdir()
        (folder / "sub" / "up").symlink_to("..")
    with pytest.raises(parquet.ParquetError, match=r"a\.parquet again \(through a link\): its "
                                                   r"rows would be read twice"):
        next(parquet.iter_rows(folder, target="y"))


@pytest.mark.parametrize("name", ["x.y", "a.b.c"])
def test_a_dotted_column_name_does_not_escape_the_declared_size_check(tmp_path, name):
    """The check took a leaf's column from its path in the schema, cut at the first dot: a list
    column named "x.y" was taken for a column "x" and never checked, so a row group declaring
    any size was read (here a struct column before it shifts the leaves too)."""
    path = tmp_path / "dotted.parquet"
    offsets = np.array([0, 3000, 3001, 3002], np.int32)
    column = pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.zeros(3002)))
    pq.write_table(pa.table({"s": pa.array([{"u": 1, "v": [1.0]}] * 3), name: column,
                             "y": np.zeros(3, np.int8)}), path)
    with pytest.raises(parquet.ParquetError, match=rf"dotted\.parquet: row group 0 declares 24016 "
                                                   rf"bytes of column '{name}\.list\.element'"):
        next(parquet.iter_batches(path, target="y", features=[name], max_list_bytes=24015))


def test_a_filtered_dataset_of_files_is_refused_not_read_whole(tmp_path):
    """`Dataset.filter` on a dataset of files: its files were streamed whole and the rows the
    filter excludes were learned, silently. (A dataset in memory applies its filter.)"""
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"a": [1.0, 2.0, 3.0, 4.0], "y": [0, 1, 0, 1]}), path)
    filtered = ds.dataset(path).filter(ds.field("y") == 1)
    assert filtered.count_rows() == 2
    with pytest.raises(parquet.ParquetError, match=r"the dataset has a filter \(\(y == 1\)\), "
                                                   r"which is not applied"):
        next(parquet.iter_rows(filtered, target="y"))
    assert len(list(parquet.iter_rows(ds.dataset(path), target="y"))) == 4
    memory = ds.dataset(pa.table({"a": [1.0, 2.0], "y": [0, 1]})).filter(ds.field("y") == 1)
    assert list(parquet.iter_rows(memory, target="y")) == [({"a": 2.0}, 1)]


# -- arbitrary tables: every column type Arrow writes, plain, dictionary-encoded or in lists ----

_TYPES = [pa.int8(), pa.uint64(), pa.int64(), pa.float16(), pa.float32(), pa.float64(),
          pa.bool_(), pa.decimal128(12, 3), pa.string(), pa.binary(), pa.null(),
          pa.timestamp("s"), pa.date32(), pa.struct([("u", pa.float64())])]


def _values(arrow_type, n, draw):
    """`n` values of `arrow_type` (None: a null), NaN, infinities and extremes included."""
    if pa.types.is_null(arrow_type):
        return [None] * n
    if pa.types.is_integer(arrow_type):
        info = np.iinfo(arrow_type.to_pandas_dtype())
        values = st.integers(int(info.min), int(info.max))
    elif pa.types.is_floating(arrow_type):
        values = st.floats(width=min(arrow_type.bit_width, 64))
    else:
        values = {"bool": st.booleans(), "decimal128(12, 3)": st.decimals(
                      -10**8, 10**8, places=3, allow_nan=False),
                  "string": st.text(max_size=3), "binary": st.binary(max_size=3),
                  "timestamp[s]": st.datetimes(), "date32[day]": st.dates(),
                  "struct<u: double>": st.fixed_dictionaries({"u": st.floats()})}[str(arrow_type)]
    return draw(st.lists(st.none() | values, min_size=n, max_size=n))


def _array(arrow_type, values):
    if pa.types.is_floating(arrow_type) and arrow_type.bit_width == 16:
        return pa.array(np.array([np.nan if v is None else v for v in values], np.float16))
    return pa.array(values, type=arrow_type)


@st.composite
def _columns(draw, n):
    arrow_type = draw(st.sampled_from(_TYPES))
    form = draw(st.sampled_from(["plain", "dictionary", "list", "fixed", "large"]))
    if form == "plain" or not n:
        return _array(arrow_type, _values(arrow_type, n, draw))
    if form == "dictionary":
        array = _array(arrow_type, _values(arrow_type, n, draw))
        return array if pa.types.is_null(arrow_type) or pa.types.is_struct(arrow_type) \
            else array.dictionary_encode()
    width = draw(st.integers(1, 3))
    flat = _array(arrow_type, _values(arrow_type, n * width, draw))
    if form == "fixed":
        return pa.FixedSizeListArray.from_arrays(flat, width)
    lengths = draw(st.lists(st.integers(0, width), min_size=n, max_size=n))  # ragged too
    offsets = np.minimum(np.concatenate([[0], np.cumsum(lengths)]), n * width)
    kind, dtype = (pa.ListArray, np.int32) if form == "list" else (pa.LargeListArray, np.int64)
    return kind.from_arrays(pa.array(offsets.astype(dtype)), flat)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_table_is_read_or_refused_with_a_documented_error(tmp_path_factory, data):
    """Columns of any type and form, nulls, NaN and infinities among them, duplicate and
    dotted names, zero rows: every outcome is rows of finite numbers or `ParquetError`,
    `InvalidInput` or `KeyError` (a missing label column) in one line naming the file."""
    n = data.draw(st.integers(0, 5))
    k = data.draw(st.integers(1, 3))
    names = data.draw(st.lists(st.sampled_from(["a", "b.c", "y", "é"]), min_size=k, max_size=k))
    table = pa.Table.from_arrays([data.draw(_columns(n)) for _ in range(k)], names=names)
    path = tmp_path_factory.mktemp("any") / "any.parquet"
    pq.write_table(table, path, row_group_size=data.draw(st.integers(1, 6)))
    batch_size = data.draw(st.integers(1, 4))
    try:
        for X, _ in parquet.iter_batches(path, target="y", batch_size=batch_size):
            assert np.isfinite(X.to_numpy()).all()
        rows = list(parquet.iter_rows(path, target="y", batch_size=batch_size))
        assert all(np.isfinite(list(x.values())).all() for x, _ in rows)
    except (parquet.ParquetError, InvalidInput) as error:
        assert "any.parquet" in str(error) and "\n" not in str(error)
    except KeyError as error:
        assert "y" not in names and "target column 'y'" in str(error)


@pytest.mark.parametrize("size", [0, -1, 2.5, True])
def test_a_row_group_size_that_is_no_whole_number_is_refused_before_writing(tmp_path, size):
    """-1 wrote no file while `from_npz` returned the number of rows "written", and made
    `from_river` hold every row in memory; 0 and 2.5 failed in Python's words."""
    np.savez(tmp_path / "d.npz", X_train=np.ones((4, 2)), y_train=np.arange(4) % 2)
    calls = [lambda: parquet.write(tmp_path / "w.parquet", np.ones((4, 2)), np.arange(4) % 2,
                                   row_group_size=size),
             lambda: parquet.from_npz(tmp_path / "d.npz", tmp_path / "n.parquet",
                                      row_group_size=size),
             lambda: parquet.from_river([({"a": 1.0}, 0)] * 4, tmp_path / "r.parquet",
                                        row_group_size=size)]
    for call in calls:
        with pytest.raises(ValueError, match=rf"row_group_size must be a whole number >= 1, "
                                             rf"got {size!r}"):
            call()
    assert sorted(os.listdir(tmp_path)) == ["d.npz"]


def test_an_extension_column_of_several_leaves_beside_the_features_is_counted_right(tmp_path):
    """A column of a canonical extension type stored as a struct (two Parquet leaves) is not a
    feature here; counting it as one leaf shifted every later column in the size check."""
    storage = pa.array([{"p": 1.0, "q": 2.0}] * 3)
    shapes = pa.ExtensionArray.from_storage(pa.opaque(storage.type, "shape", "vendor"), storage)
    path = tmp_path / "extension.parquet"
    pq.write_table(pa.table({"g": shapes, "a": [0.5, 0.25, 0.125], "y": [0, 1, 0]}), path)
    assert list(parquet.iter_rows(path, target="y", features=["a"])) == [
        ({"a": 0.5}, 0), ({"a": 0.25}, 1), ({"a": 0.125}, 0)]


class _CountingSchema:
    """A schema that counts how often its list of names is built (once per access)."""

    def __init__(self, schema):
        self._schema, self.names_built = schema, 0

    @property
    def names(self):
        self.names_built += 1
        return self._schema.names

    def field(self, name):
        return self._schema.field(name)

    @property
    def pandas_metadata(self):
        return self._schema.pandas_metadata


@pytest.mark.parametrize("features", [None, "all"])
def test_planning_a_wide_table_takes_time_linear_in_its_columns(features):
    """Each feature's presence was checked against `schema.names`, a new list of every name at
    each access: quadratic, 13 s for 8,000 columns and hours for the million a row may hold.
    The list is now built a fixed number of times, whatever the width."""
    width = 3000
    schema = pa.schema([(f"c{i}", pa.float64()) for i in range(width)] + [("y", pa.int8())])
    counting = _CountingSchema(schema)
    chosen = [f"c{i}" for i in range(width)] if features == "all" else None
    layout = parquet._Layout(counting, "y", chosen)
    assert len(layout.features) == width
    assert counting.names_built <= 4


def test_a_directory_whose_files_write_the_labels_differently_is_refused_up_front(tmp_path):
    """A file of labels 0 and 1 beside one of "0" and "1": four classes, and a binary model
    refused the third one only after learning the first file. Ints, floats and booleans are
    one kind (1 == 1.0 == True is one label)."""
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(pa.table({"a": [0.5, 0.25], "y": pa.array([0, 1], pa.int8())}),
                   folder / "1.parquet")
    pq.write_table(pa.table({"a": [0.5, 0.25], "y": [0.0, 1.0]}), folder / "2.parquet")
    # Rows without labels (a column of nulls only) go with any labels.
    pq.write_table(pa.table({"a": [0.5], "y": pa.array([None], pa.null())}),
                   folder / "2b.parquet")
    assert [y for _, y in parquet.iter_rows(folder, target="y")] == [0, 1, 0, 1, None]
    pq.write_table(pa.table({"a": [0.5, 0.25], "y": ["0", "1"]}), folder / "3.parquet")
    with pytest.raises(parquet.ParquetError, match=r"3\.parquet: its label column 'y' holds "
                                                   r"strings, numbers in .*1\.parquet"):
        next(parquet.iter_rows(folder, target="y"))
    assert len(list(parquet.iter_rows(folder, features=["a"]))) == 7  # no target: no labels


_MEASURE_ROWS = textwrap.dedent("""
    import json, sys, tracemalloc
    import pyarrow as pa
    from river_advsvm.streams import parquet
    parquet._ROWS_READ_BYTES = 2**20  # (small, for a small test: 1 MB of rows per read)
    parquet._ROWS_PYTHON_VALUES = 2**14
    pool = pa.default_memory_pool()
    tracemalloc.start()
    rows = 0
    for x, y in parquet.iter_rows(sys.argv[1], target="y"):
        rows += 1
    print(json.dumps({"rows": rows, "arrow_max": pool.max_memory(),
                      "python_peak": tracemalloc.get_traced_memory()[1]}))
""")


@pytest.mark.parametrize("lists", ["fixed size", "any length"])
def test_iter_rows_of_wide_rows_holds_a_few_rows_not_a_batch(tmp_path, lists):
    """Rows of 10,000 values: `iter_rows` read `batch_size` (1,024) of them at once and made
    every value of the batch a Python float before yielding the first row (for 1,024 rows of
    100,000 values, a 5 KB file, the process grew by 5.7 GB). It now reads as many rows as fit
    in `_ROWS_READ_BYTES` (1 MB here) and converts a few at a time. Lists of any length have
    no width in the schema: each row group's declared values give it (a batch of pyarrow's
    runs on across row groups: 130 of 8 rows of a million values each took 8 GB)."""
    width, n = 10_000, 256
    path = tmp_path / "wide-rows.parquet"
    values = pa.array(np.zeros(width * n, np.uint8))
    column = (pa.FixedSizeListArray.from_arrays(values, width) if lists == "fixed size"
              else pa.ListArray.from_arrays(pa.array(np.arange(n + 1) * width, pa.int32()),
                                            values))
    pq.write_table(pa.table({"x": column, "y": np.zeros(n, np.int8)}), path, row_group_size=64)
    result = subprocess.run([sys.executable, "-c", _MEASURE_ROWS, str(path)],
                            capture_output=True, text=True, check=True, cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=REPO))
    numbers = json.loads(result.stdout)
    assert numbers["rows"] == n
    batch_bytes = 8 * width * n  # 20 MB: the float64 batch read at once
    assert numbers["arrow_max"] <= batch_bytes / 4
    assert numbers["python_peak"] <= batch_bytes / 4  # (its Python floats: 80 MB)


_MEASURE_LABELS = textwrap.dedent("""
    import json, sys
    import pyarrow as pa
    from river_advsvm import InvalidInput
    from river_advsvm.streams import parquet
    pool = pa.default_memory_pool()
    try:
        for X, y in parquet.iter_batches(sys.argv[1], target="y", batch_size=1024):
            pass
        error = None
    except InvalidInput as refused:
        error = str(refused)
    print(json.dumps({"error": error, "arrow_max": pool.max_memory()}))
""")


def test_a_long_label_stored_once_is_refused_before_it_is_repeated(tmp_path):
    """A string label of 100,000 characters on 2,000 rows, stored once in a dictionary page
    (pyarrow's default): the column declares about 100 kB, under `max_list_bytes`, and each
    batch became 1,024 copies of it (100 MB; 4,096 rows of 4 MB took 3.6 GB) before the
    length of a label was checked. The dictionary's labels are checked first now."""
    path = tmp_path / "long-label.parquet"
    n = 2_000
    pq.write_table(pa.table({"x": np.zeros(n), "y": ["A" * 100_000] * n}), path)
    result = subprocess.run([sys.executable, "-c", _MEASURE_LABELS, str(path)],
                            capture_output=True, text=True, check=True, cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=REPO))
    numbers = json.loads(result.stdout)
    assert numbers["error"].startswith(f"{path}: row 0 of the label column 'y': label 'AAA")
    assert "longer than 1000 characters" in numbers["error"]
    assert numbers["arrow_max"] < 10 * 100_000
    # Short labels from a dictionary are read as they are.
    pq.write_table(pa.table({"x": np.arange(6.0), "y": ["a", "b", None] * 2}), path)
    assert [y for _, y in parquet.iter_rows(path, target="y")] == ["a", "b", None] * 2


@pytest.mark.parametrize("make, message", [
    # numpy allocated what the header declared (a MemoryError for a few bytes), loaded object
    # arrays as "Object arrays cannot be loaded", and took a text file for a pickle.
    ("declares", "X_train declares 8,000,000,000,000 bytes of values"),
    ("objects", "X_train holds Python objects, which are never loaded"),
    ("text", "is not an .npz archive"),
    ("strings", "X_train holds strings (<U1); inputs must be numbers"),
    ("labels", "X_train has 40 samples but y_train (40, 2) labels"),
])
def test_from_npz_reads_the_archive_without_trusting_it(tmp_path, make, message):
    from tests.test_demo_cli import _npz_declaring

    source = tmp_path / "bad.npz"
    if make == "declares":
        _npz_declaring(source, (10**12, 1))
    elif make == "objects":
        np.savez(source, X_train=np.array([[1.0], [None]], dtype=object), y_train=[1, 2])
    elif make == "text":
        source.write_text("x,y\n1,2\n")
    elif make == "strings":
        np.savez(source, X_train=np.full((40, 2), "a"), y_train=np.arange(40))
    else:
        np.savez(source, X_train=np.zeros((40, 3)), y_train=np.zeros((40, 2)))
    with pytest.raises(ValueError, match=re.escape(message)):
        parquet.from_npz(source, tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists()


def test_from_river_names_each_column_by_the_text_of_its_feature(tmp_path):
    """A `(str, Enum)` member's column was its str(), 'Colour.RED', and a feature 1 beside a
    feature '1' wrote one column, the second feature's values silently replacing the first's."""
    import enum

    class Colour(str, enum.Enum):
        RED = "red"

    path = tmp_path / "e.parquet"
    assert parquet.from_river([({Colour.RED: 0.5, "blue": 1.0}, 1)] * 3, path) == 3
    assert pq.read_schema(path).names == ["red", "blue", "y"]
    with pytest.raises(ValueError, match=re.escape("features 1 and '1' would both be the "
                                                   "column '1'")):
        parquet.from_river([({1: 0.5, "1": 0.7}, 1)], tmp_path / "c.parquet")
    with pytest.raises(ValueError, match="a feature is named like the target 'y'"):
        parquet.from_river([({"y": 0.5}, 1)], tmp_path / "t.parquet")
    assert not (tmp_path / "c.parquet").exists() and not (tmp_path / "t.parquet").exists()


@settings(max_examples=40, deadline=None)
@given(data=st.data(), n=st.integers(1, 12), row_group_size=st.integers(1, 5),
       kind=st.sampled_from([bool, int, str]))
def test_from_river_writes_every_value_and_label_as_given(tmp_path_factory, data, n,
                                                          row_group_size, kind):
    """Values of any number type, in any row group, read back as the floats they are, and
    labels as themselves. A column's type was the first row group's: a bool column turned a
    later 3 into 1.0, a later 0.5 into an error after a partial file was written."""
    value = st.one_of(st.booleans(), st.integers(-10**6, 10**6),
                      st.floats(-1e6, 1e6, allow_nan=False))
    label = {bool: st.booleans(), int: st.integers(-5, 5), str: st.sampled_from(["a", "1"])}
    samples = data.draw(st.lists(st.tuples(st.fixed_dictionaries({"a": value, 2: value}),
                                           label[kind]), min_size=n, max_size=n))
    path = tmp_path_factory.mktemp("river") / "r.parquet"
    assert parquet.from_river(samples, path, row_group_size=row_group_size) == n
    rows = list(parquet.iter_rows(path, target="y"))
    assert [x for x, _ in rows] == [{"a": float(x["a"]), "2": float(x[2])} for x, _ in samples]
    assert [y for _, y in rows] == [y for _, y in samples]
    assert all(type(y) is kind for _, y in rows)


def test_the_writers_refuse_what_they_cannot_write_and_leave_no_file(tmp_path):
    """Raw pyarrow errors came out of `write` and `from_river` after a partial file was written
    (one that reads back as a whole, shorter file), and mixed labels became strings."""
    path = tmp_path / "w.parquet"
    path.write_bytes(b"what was there")
    cases = [
        (lambda: parquet.from_river([({"a": 0.1}, True), ({"a": 0.2}, False), ({"a": 0.3}, 2)],
                                    path, row_group_size=2),
         "sample 2 has label 2, another kind than the labels before it (bool)"),
        (lambda: parquet.from_river([({"a": 0.1}, 0), ({"a": "x"}, 1)], path),
         "sample 1: feature 'a' is 'x' (a str): a feature is a number"),
        (lambda: parquet.from_river([({"a": 0.1}, None), ({"a": 0.2}, None), ({"a": 0.3}, None),
                                     ({"a": 0.4}, 1)], path, row_group_size=2),
         "sample 3 is the first with a label, after a row group of rows without one"),
        (lambda: parquet.from_river([({"a": 0.1}, np.nan)], path), "sample 0: label nan"),
        (lambda: parquet.write(path, np.ones((2, 2)), [1, "a"]),
         "sample 1 has label 'a' (a str), another kind than the labels before it (int)"),
        (lambda: parquet.write(path, np.ones((3, 0)), [1, 0, 1]), "X has no columns"),
        (lambda: parquet.write(path, np.array([["a", "b"]]), [1]), "X must be an array of numbers"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            call()
        assert sorted(os.listdir(tmp_path)) == ["w.parquet"]
        assert path.read_bytes() == b"what was there"


def test_the_writers_take_a_column_that_is_null_at_first(tmp_path):
    """A feature missing from every sample of the first row group, or labels missing there,
    failed on the next row group ('Unsupported cast from double to null', 'Table schema does
    not match')."""
    assert parquet.from_river([({"a": 0.1, "b": None}, 0), ({"a": 0.2, "b": None}, 1),
                               ({"a": 0.3, "b": 1.0}, 0)], tmp_path / "r.parquet",
                              row_group_size=2) == 3
    assert pq.read_table(tmp_path / "r.parquet")["b"].to_pylist() == [None, None, 1.0]
    parquet.write(tmp_path / "w.parquet", np.ones((4, 2)), [None, None, 1, 0], row_group_size=2)
    assert [y for _, y in parquet.iter_rows(tmp_path / "w.parquet", target="y")] == [None, None,
                                                                                    1, 0]


# -- arguments, missing columns and labels ---------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(layout=st.sampled_from(["list", "wide"]), d=st.integers(1, 4),
       feature_name=st.sampled_from(["x", "y", "y_0", "y_1", "x_2"]),
       target_name=st.sampled_from(["y", "y_0", "y_3", "x", "x_0"]))
def test_write_refuses_a_feature_column_named_like_the_target_before_writing(
        tmp_path_factory, layout, d, feature_name, target_name):
    """`write(path, X, y, feature_name="y")` wrote two columns y (and, wide, y_0 beside a
    target y_0): a file its own reader refuses. Any other names read back."""
    path = tmp_path_factory.mktemp("w") / "w.parquet"
    X, y = np.arange(3 * d, dtype=float).reshape(3, d), np.array([0, 1, 0])
    columns = [feature_name] if layout == "list" else [f"{feature_name}_{j}" for j in range(d)]
    if target_name in columns:
        with pytest.raises(ValueError, match=rf"the feature column '{target_name}' would have "
                                             r"the name of the target column"):
            parquet.write(path, X, y, layout=layout, feature_name=feature_name,
                          target_name=target_name)
        assert not path.exists()
    else:
        parquet.write(path, X, y, layout=layout, feature_name=feature_name,
                      target_name=target_name)
        rows = list(parquet.iter_rows(path, target=target_name))
        assert [label for _, label in rows] == [0, 1, 0]
    parquet.write(path, X, None, layout=layout, feature_name=feature_name)  # no target: no clash


@pytest.mark.parametrize("reader", [parquet.iter_batches, parquet.iter_rows])
@pytest.mark.parametrize("target, features, message", [
    ("y", None, r"target column 'y' is not in \['a'\]"),
    (None, ["a", "b"], r"feature columns \['b'\] are not in \['a'\]"),
])
def test_a_column_a_single_file_lacks_is_a_parquet_error_naming_the_file(
        tmp_path, reader, target, features, message):
    """A missing label column was a bare `KeyError: "target column 'y' is not in ['a']"`; a
    later file of a directory was already named. Still a KeyError too, as it was."""
    path = tmp_path / "nolabel.parquet"
    pq.write_table(pa.table({"a": [1.0, 2.0]}), path)
    with pytest.raises(parquet.ParquetError, match=rf"^{re.escape(str(path))}: {message}$"):
        next(reader(path, target=target, features=features))
    with pytest.raises(KeyError) as refused:
        next(reader(path, target=target, features=features))
    assert isinstance(refused.value, parquet.MissingColumnError)
    assert re.fullmatch(message, refused.value.args[0])  # (the file named once by the demo)


def test_a_feature_named_twice_is_refused_as_such(tmp_path):
    """`features=["a", "a"]` said "its list columns expand to feature names other columns have
    (a)", of a file without a list column."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1.0], "b": [2.0], "y": [1]}), path)
    with pytest.raises(ValueError, match="^features names the column 'a' twice: each feature "
                                         "column is read once$"):
        next(parquet.iter_batches(path, target="y", features=["a", "b", "a"]))


@pytest.mark.parametrize("features", ["a", "ab", b"a", 3])
def test_features_must_be_a_list_of_names_not_a_string(tmp_path, features):
    """`features="ab"` was read as the columns a and b, silently."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1.0], "b": [2.0]}), path)
    with pytest.raises(TypeError, match="^features must be a list of column names, got "):
        next(parquet.iter_rows(path, features=features))
    assert next(parquet.iter_rows(path, features=("b",))) == ({"b": 2.0}, None)


not_batch_sizes = st.one_of(
    st.integers(max_value=0), st.floats(), st.builds(np.float64, st.floats(0.5, 9)),
    st.builds(lambda kind, v: kind(v), st.sampled_from([np.int8, np.int64]), st.integers(-9, 0)),
    st.sampled_from(["3", None, True, np.bool_(True), np.array(3), np.array([3]), [3]]),
)


@settings(max_examples=60, deadline=None)
@given(batch_size=not_batch_sizes)
def test_a_batch_size_that_is_no_whole_number_is_refused_by_name(tmp_path_factory, batch_size):
    """`batch_size="3"` or `None` failed as a comparison's TypeError, and 1.5 was taken."""
    path = tmp_path_factory.mktemp("b") / "t.parquet"
    pq.write_table(pa.table({"a": [1.0, 2.0, 3.0]}), path)
    for reader in (parquet.iter_batches, parquet.iter_rows):
        with pytest.raises(ValueError, match="^batch_size must be a whole number >= 1, got ") \
                as refused:
            next(reader(path, batch_size=batch_size))
        message = str(refused.value)
        assert "np." not in message and "array(" not in message and "\n" not in message


@settings(max_examples=20, deadline=None)
@given(kind=st.sampled_from([np.int8, np.int32, np.int64, np.uint8, np.uint64]),
       size=st.integers(1, 4))
def test_a_numpy_batch_size_is_the_count_it_holds(tmp_path_factory, kind, size):
    path = tmp_path_factory.mktemp("b") / "t.parquet"
    pq.write_table(pa.table({"a": [1.0, 2.0, 3.0, 4.0, 5.0]}), path)
    shapes = [len(X) for X, _ in parquet.iter_batches(path, batch_size=kind(size))]
    assert shapes == [len(X) for X, _ in parquet.iter_batches(path, batch_size=size)]


@pytest.mark.parametrize("batch_size", [2**31, 2**63, 10**30])
def test_a_batch_size_past_the_file_is_the_whole_file(tmp_path, batch_size):
    """(pyarrow raised its OverflowError for a count past 64 bits.)"""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1.0, 2.0, 3.0]}), path)
    assert [len(X) for X, _ in parquet.iter_batches(path, batch_size=batch_size)] == [3]
    assert len(list(parquet.iter_rows(path, batch_size=batch_size))) == 3


@pytest.mark.parametrize("column, bad_row, shown", [
    (pa.array([1.0, 0.0, float("nan"), 1.0, 0.0]), 2, "label nan is not allowed"),
    (pa.array([1.0, 0.0, 1.0, float("-inf"), 0.0]), 3, "label -inf is not allowed"),
    (pa.array([[1], [0], [1], [1], [0]]), 0, "label [1] (a list) is not supported"),
    (pa.array([0, 1, 2, 1, 0], pa.timestamp("s")), 0, "label datetime.datetime("),
    (pa.array([0, 1, 1, 0, 2**64 - 1], pa.uint64()), 4, "an int label must fit in 64 bits"),
    (pa.array(["0", "1", "n" * 1001, "1", "0"]), 2, "is longer than 1000 characters"),
    (pa.array([{"u": 1}] * 5), 0, "(a dict) is not supported"),
])
@pytest.mark.parametrize("batch_size", [1, 2, 1024])
@pytest.mark.parametrize("reader", [parquet.iter_batches, parquet.iter_rows])
def test_a_value_that_is_no_label_is_refused_naming_the_file_and_the_row(
        tmp_path, column, bad_row, shown, batch_size, reader):
    """NaN, lists and timestamps in the label column were passed on (nan, [1], a Timestamp),
    for the model to refuse them later without naming the file or the row."""
    path = tmp_path / "labels.parquet"
    pq.write_table(pa.table({"a": [0.1, 0.2, 0.3, 0.4, 0.5], "y": column}), path)
    with pytest.raises(InvalidInput) as refused:
        for _ in reader(path, target="y", batch_size=batch_size):
            pass
    message = str(refused.value)
    assert message.startswith(f"{path}: row {bad_row} of the label column 'y': "), message
    assert shown in message and "\n" not in message


def test_a_fifo_is_refused_rather_than_waited_on(tmp_path):
    """A FIFO named as the source blocked the read until a writer came (for ever)."""
    path = tmp_path / "rows.parquet"
    os.mkfifo(path)
    with pytest.raises(parquet.ParquetError, match="not a regular file"):
        next(parquet.iter_batches(path, target="y"))


def test_a_pandas_index_stored_in_the_file_is_not_a_feature(tmp_path):
    """`DataFrame.to_parquet` stores a frame's index (here not a range) as a column its
    metadata names: the row numbers were learned as an input."""
    import pandas as pd

    frame = pd.DataFrame({"a": [0.1, 0.2, 0.3, 0.4], "y": [True, False, True, False]})
    frame = frame[frame.a != 0.2]
    frame.to_parquet(tmp_path / "rows.parquet")
    assert "__index_level_0__" in pq.read_schema(tmp_path / "rows.parquet").names
    X, y = next(parquet.iter_batches(tmp_path / "rows.parquet", target="y"))
    assert list(X.columns) == ["a"] and X["a"].tolist() == [0.1, 0.3, 0.4]
    # Named, it is read as any column.
    X, _ = next(parquet.iter_batches(tmp_path / "rows.parquet", target="y",
                                     features=["a", "__index_level_0__"]))
    assert X["__index_level_0__"].tolist() == [0, 2, 3]


@pytest.mark.parametrize("bound", [None, "1e9", -1, 2.5, True])
def test_a_max_list_bytes_that_is_no_count_is_refused_naming_it(tmp_path, bound):
    parquet.write(tmp_path / "rows.parquet", np.ones((3, 2)), np.array([0, 1, 0]))
    with pytest.raises(ValueError, match="max_list_bytes must be a whole number >= 1"):
        next(parquet.iter_batches(tmp_path / "rows.parquet", target="y", max_list_bytes=bound))


class _NoColumnChunks:
    """File metadata whose column chunks fail the test when read."""

    def __init__(self, metadata):
        self._metadata = metadata
        self.num_row_groups = metadata.num_row_groups

    def row_group(self, g):
        group = self._metadata.row_group(g)

        class Group:
            num_columns = group.num_columns

            def column(self, c):
                raise AssertionError(f"column chunk {c} of row group {g} was read")

        return Group()


def test_the_size_check_reads_no_column_chunk_of_fixed_size_columns(tmp_path):
    """With pyarrow 26, reading a column chunk's metadata whose size statistics are corrupt
    ends the process (SIGABRT) rather than raising; the reader itself raises for them. The
    check of declared sizes concerns columns without a fixed row size only, so a file of
    fixed-size lists and numbers (what `write` makes) has none of its chunks read by it."""
    path = tmp_path / "rows.parquet"
    parquet.write(path, np.ones((50, 4)), np.arange(50) % 2, row_group_size=10)
    reader = pq.ParquetFile(path)
    layout = parquet._Layout(reader.schema_arrow, "y", None)
    parquet._check_declared(str(path), _NoColumnChunks(reader.metadata), layout,
                            reader.schema_arrow, parquet.MAX_LIST_BYTES)
    # A column of lists of any length is checked: its chunks are read.
    table = pa.table({"x": pa.array([[1.0], [2.0, 3.0]]), "y": [0, 1]})
    pq.write_table(table, tmp_path / "varying.parquet")
    reader = pq.ParquetFile(tmp_path / "varying.parquet")
    layout = parquet._Layout(reader.schema_arrow, "y", None)
    with pytest.raises(AssertionError, match="column chunk 0 of row group 0 was read"):
        parquet._check_declared(str(path), _NoColumnChunks(reader.metadata), layout,
                                reader.schema_arrow, parquet.MAX_LIST_BYTES)


def test_without_its_extra_the_module_names_the_extra_to_install():
    code = "import sys\nsys.modules['pandas'] = None\nimport river_advsvm.streams.parquet"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: No module named 'pandas': ")
    assert "needs the parquet extra (pip install 'river-advsvm[parquet]'" in last
