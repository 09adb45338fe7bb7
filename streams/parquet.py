"""Parquet in and out: stream a file, a directory or a pyarrow dataset batch by batch.

Reading never loads a whole file: batches come from the Parquet reader one row group at a
time with no read-ahead, so memory is bounded by the batch (and the row group being decoded),
not by the file. Each batch becomes either `(X, y)` for `learn_many` (a DataFrame and a
Series) or, through `iter_rows`, `(x, y)` pairs for `learn_one`.

Feature columns are numeric scalars (a "wide" table, one column per feature) or lists of
numbers of a fixed length (an image as one column of 784 values). Feature names:

- a scalar column is named by the column;
- the elements of a list column `c` are named `0..d-1` when `c` is the only feature column,
  as `river.stream.iter_array` and the Kafka service's list form name them, and `"c_0"..`
  otherwise.

Values are validated by `river_advsvm.inputs` at this boundary: a null, NaN, infinite or
non-numeric feature raises `river_advsvm.InvalidInput` naming the file and row.

Writing (`write`, `from_npz`, `from_river`) goes chunk by chunk with one row group per chunk,
so files written here stream back with memory bounded by `row_group_size`.

Examples
--------

>>> import tempfile, numpy as np
>>> from river_advsvm.streams import parquet
>>> X = np.arange(12, dtype=float).reshape(4, 3); y = np.array([0, 1, 0, 1])
>>> path = tempfile.mkdtemp() + "/toy.parquet"
>>> parquet.write(path, X, y, layout="list", row_group_size=2)
>>> for X_batch, y_batch in parquet.iter_batches(path, target="y", batch_size=2):
...     print(X_batch.shape, list(X_batch.columns), y_batch.tolist())
(2, 3) [0, 1, 2] [0, 1]
(2, 3) [0, 1, 2] [0, 1]
>>> next(parquet.iter_rows(path, target="y"))
({0: 0.0, 1: 1.0, 2: 2.0}, 0)

"""

from __future__ import annotations

import os
import typing

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from river_advsvm import inputs

__all__ = ["from_npz", "from_river", "iter_batches", "iter_rows", "write"]

Source = typing.Union[str, os.PathLike, ds.Dataset]


def _as_dataset(source: Source) -> ds.Dataset:
    if isinstance(source, ds.Dataset):
        return source
    path = os.fspath(source)
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    return ds.dataset(path, format="parquet")


def _is_list(arrow_type: pa.DataType) -> bool:
    return (
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
    )


def _is_numeric(arrow_type: pa.DataType) -> bool:
    return (
        pa.types.is_integer(arrow_type)
        or pa.types.is_floating(arrow_type)
        or pa.types.is_boolean(arrow_type)
        or pa.types.is_decimal(arrow_type)
    )


class _Layout:
    """Which columns are features and what their elements are called, fixed by the schema."""

    def __init__(self, schema: pa.Schema, target: str | None, features: list[str] | None):
        if target is not None and target not in schema.names:
            raise KeyError(f"target column {target!r} is not in {schema.names}")
        if features is None:
            features = [name for name in schema.names if name != target]
        missing = [name for name in features if name not in schema.names]
        if missing:
            raise KeyError(f"feature columns {missing} are not in {schema.names}")
        if target is not None and target in features:
            raise ValueError(f"{target!r} is both the target and a feature")
        if not features:
            raise ValueError("no feature columns")
        for name in features:
            arrow_type = schema.field(name).type
            value_type = arrow_type.value_type if _is_list(arrow_type) else arrow_type
            if not _is_numeric(value_type):
                raise inputs.InvalidInput(
                    f"feature column {name!r} has type {arrow_type}; numbers or lists of numbers "
                    "are expected"
                )
        self.target = target
        self.features = list(features)
        self.is_list = [_is_list(schema.field(name).type) for name in features]
        self.widths: list[int | None] = [None] * len(features)
        self.names: list | None = None

    def columns(self) -> list[str]:
        return self.features + ([self.target] if self.target is not None else [])

    def _fix_names(self) -> None:
        if self.names is not None:
            return
        if len(self.features) == 1 and self.is_list[0]:
            self.names = list(range(self.widths[0]))
            return
        names: list = []
        for name, is_list, width in zip(self.features, self.is_list, self.widths):
            names.extend([f"{name}_{i}" for i in range(width)] if is_list else [name])
        if len(set(names)) != len(names):
            raise ValueError(f"expanding list columns gives duplicate feature names: {names}")
        self.names = names

    def matrix(self, batch: pa.RecordBatch, where: str) -> np.ndarray:
        """The batch's features as one float64 matrix, validated."""
        n = batch.num_rows
        blocks = []
        for i, name in enumerate(self.features):
            column = batch.column(name)
            if self.is_list[i]:
                block = self._list_block(column, name, n, i, where)
            else:
                block = _to_float(column)[:, None]
            blocks.append(block)
        self._fix_names()
        X = blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=1)
        try:
            inputs.frame_values(X)  # NaN, inf, and nulls (which arrive as NaN) are refused here
        except inputs.InvalidInput as error:
            row = int(np.flatnonzero(~np.isfinite(X).all(axis=1))[0]) if X.size else 0
            raise inputs.InvalidInput(f"{where}, row {row} of the batch: {error}") from None
        return X

    def _list_block(self, column, name, n, i, where) -> np.ndarray:
        if column.null_count:
            raise inputs.InvalidInput(f"{where}: column {name!r} has a null list")
        if pa.types.is_fixed_size_list(column.type):
            width = column.type.list_size
        else:
            lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
            width = int(lengths[0]) if n else 0
            if n and (lengths != width).any():
                raise inputs.InvalidInput(
                    f"{where}: column {name!r} holds lists of lengths {sorted(set(lengths))}; "
                    "one fixed length is expected"
                )
        if self.widths[i] is None:
            self.widths[i] = width
        elif width != self.widths[i] and n:
            raise inputs.InvalidInput(
                f"{where}: column {name!r} changes from {self.widths[i]} to {width} values"
            )
        # flatten() honours the slice of the batch; nulls inside a list become NaN.
        return _to_float(column.flatten()).reshape(n, width)

    def labels(self, batch: pa.RecordBatch) -> list | None:
        if self.target is None:
            return None
        return batch.column(self.target).to_pylist()


def _to_float(array: pa.Array) -> np.ndarray:
    if array.type != pa.float64():
        array = pc.cast(array, pa.float64())
    return array.to_numpy(zero_copy_only=False)


def _record_batches(dataset: ds.Dataset, columns: list[str], batch_size: int):
    # No read-ahead, one thread, no pre-buffering: the point is a memory bound, not speed.
    for fragment in dataset.get_fragments():
        where = getattr(fragment, "path", "dataset fragment")
        options = {}
        if isinstance(fragment, ds.ParquetFileFragment):
            options["fragment_scan_options"] = ds.ParquetFragmentScanOptions(pre_buffer=False)
        for batch in fragment.to_batches(
            schema=dataset.schema,
            columns=columns,
            batch_size=batch_size,
            batch_readahead=0,
            fragment_readahead=0,
            use_threads=False,
            **options,
        ):
            yield where, batch


def _batches(source, target, features, batch_size):
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    dataset = _as_dataset(source)
    layout = _Layout(dataset.schema, target, features)
    row = 0
    for where, batch in _record_batches(dataset, layout.columns(), batch_size):
        if batch.num_rows == 0:
            continue
        X = layout.matrix(batch, f"{where} (rows from {row})")
        yield layout.names, X, layout.labels(batch)
        row += batch.num_rows


def iter_batches(
    source: Source,
    target: str | None = None,
    features: list[str] | None = None,
    batch_size: int = 1024,
) -> typing.Iterator[tuple[pd.DataFrame, pd.Series | None]]:
    """Yield `(X, y)` batches for `learn_many`, one Parquet read at a time.

    Parameters
    ----------
    source
        A Parquet file, a directory of Parquet files, or a `pyarrow.dataset.Dataset`.
    target
        The label column; `y` is None when no target is given (for prediction).
    features
        The feature columns, in order; by default every column but the target.
    batch_size
        Rows per batch (at most: a batch never spans two row groups).

    """
    for names, X, labels in _batches(source, target, features, batch_size):
        frame = pd.DataFrame(X, columns=names, copy=False)
        yield frame, (None if labels is None else pd.Series(labels, name=target))


def iter_rows(
    source: Source,
    target: str | None = None,
    features: list[str] | None = None,
    batch_size: int = 1024,
) -> typing.Iterator[tuple[dict, typing.Any]]:
    """Yield `(x, y)` pairs for `learn_one`, reading `batch_size` rows at a time.

    Same parameters as `iter_batches`; `y` is None when no target is given.
    """
    for names, X, labels in _batches(source, target, features, batch_size):
        labels = labels if labels is not None else [None] * len(X)
        for values, label in zip(X.tolist(), labels):
            yield dict(zip(names, values)), label


# -- writing ----------------------------------------------------------------------------------


def _feature_table(X: np.ndarray, y, layout: str, feature_name: str, target_name: str):
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    if layout == "list":
        flat = pa.array(np.ascontiguousarray(X).reshape(-1))
        arrays, names = [pa.FixedSizeListArray.from_arrays(flat, X.shape[1])], [feature_name]
    elif layout == "wide":
        arrays = [pa.array(X[:, j]) for j in range(X.shape[1])]
        names = [f"{feature_name}_{j}" for j in range(X.shape[1])]
    else:
        raise ValueError(f"layout must be 'list' or 'wide', got {layout!r}")
    if y is not None:
        arrays.append(pa.array(np.asarray(y)))
        names.append(target_name)
    return pa.Table.from_arrays(arrays, names=names)


def write(
    path: str | os.PathLike,
    X: np.ndarray,
    y: np.ndarray | None = None,
    *,
    layout: str = "list",
    feature_name: str = "x",
    target_name: str = "y",
    row_group_size: int = 1024,
    compression: str = "zstd",
) -> None:
    """Write samples (rows of `X`) and labels to one Parquet file, a row group per chunk.

    Parameters
    ----------
    layout
        'list': one fixed-size-list column `feature_name` holding each row (images);
        'wide': one column per feature, `feature_name_0`, `feature_name_1`, ...
    row_group_size
        Rows per row group: what a reader must decode at once.

    """
    X = np.asarray(X)
    if y is not None and len(y) != len(X):
        raise ValueError(f"{len(X)} samples but {len(y)} labels")
    writer = None
    try:
        for start in range(0, max(len(X), 1), row_group_size):
            stop = start + row_group_size
            table = _feature_table(
                X[start:stop], None if y is None else np.asarray(y)[start:stop],
                layout, feature_name, target_name,
            )
            if writer is None:
                writer = pq.ParquetWriter(os.fspath(path), table.schema, compression=compression)
            writer.write_table(table, row_group_size=row_group_size)
    finally:
        if writer is not None:
            writer.close()


def from_npz(
    npz_path: str | os.PathLike,
    path: str | os.PathLike,
    *,
    x_key: str = "X_train",
    y_key: str | None = "y_train",
    layout: str = "list",
    row_group_size: int = 1024,
) -> int:
    """Turn arrays of an `.npz` archive (e.g. `mnist.npz`) into a Parquet file.

    Returns the number of rows written. Pixels keep their dtype (uint8 stays uint8).
    """
    with np.load(npz_path, allow_pickle=False) as archive:
        X = archive[x_key]
        y = archive[y_key] if y_key is not None else None
    X = X.reshape(len(X), -1)
    write(path, X, y, layout=layout, row_group_size=row_group_size)
    return len(X)


def from_river(
    dataset: typing.Iterable[tuple[dict, typing.Any]],
    path: str | os.PathLike,
    *,
    target_name: str = "y",
    row_group_size: int = 1024,
    compression: str = "zstd",
) -> int:
    """Write a River dataset (an iterable of `(x, y)`) as a wide table, one column per feature.

    The columns are the features of the first sample (names as strings); a later sample with
    another feature raises `ValueError`, a missing one is written as null. Returns the number
    of rows written.
    """
    writer = None
    names: list | None = None
    known: set = set()
    rows: list = []
    labels: list = []
    count = 0

    def flush():
        nonlocal writer
        columns = {str(name): [row.get(name) for row in rows] for name in names}
        columns[target_name] = labels
        table = pa.table(columns)
        if writer is None:
            writer = pq.ParquetWriter(os.fspath(path), table.schema, compression=compression)
        writer.write_table(table.cast(writer.schema), row_group_size=row_group_size)
        rows.clear()
        labels.clear()

    try:
        for x, y in dataset:
            if names is None:
                names = list(x)
                known = set(names)
                if target_name in map(str, names):
                    raise ValueError(f"a feature is named like the target {target_name!r}")
            unknown = [name for name in x if name not in known]
            if unknown:
                raise ValueError(f"sample {count} has features {unknown} the first one lacks")
            rows.append(x)
            labels.append(y)
            count += 1
            if len(rows) == row_group_size:
                flush()
        if rows:
            flush()
    finally:
        if writer is not None:
            writer.close()
    return count
