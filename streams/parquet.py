"""Parquet in and out: stream a file, a directory or a pyarrow dataset batch by batch.

Reading never loads a whole file: each file is read `batch_size` rows at a time, its pages
through a small buffer with no read-ahead, so memory is bounded by the batch, not by the file
or its row groups. Before the first batch, every file's schema and the sizes its metadata
declares are checked (`MAX_ROW_BYTES`, `MAX_LIST_BYTES`): a bad file is named before anything
is learned from the others. Each batch becomes either `(X, y)` for `learn_many` (a DataFrame
and a Series) or, through `iter_rows`, `(x, y)` pairs for `learn_one`.

Feature columns are numeric scalars (a "wide" table, one column per feature) or lists of
numbers of a fixed length (an image as one column of 784 values). Feature names:

- a scalar column is named by the column;
- the elements of a list column `c` are named `0..d-1` when `c` is the only feature column,
  as `river.stream.iter_array` and the Kafka service's list form name them, and `"c_0"..`
  otherwise.

Values are validated by `river_advsvm.inputs` at this boundary: a null, NaN, infinite, too
large or non-numeric feature raises `river_advsvm.InvalidInput` naming the file and row, as
does a label the models do not take (NaN, a list, a timestamp...: `river_advsvm.labels`); a
null label is None, a row without a label (the Kafka replay sends it unlabelled; a model
refuses to learn it). A file that cannot be read raises `ParquetError`, naming it and the row;
a column it lacks, `MissingColumnError` (a `ParquetError`, and a `KeyError`).

Writing (`write`, `from_npz`, `from_river`) goes chunk by chunk with one row group per chunk,
into a temporary file beside the path, renamed into place once the last chunk is written.

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

import collections
import numbers
import os
import re
import stat
import typing
import uuid

import numpy as np
from river_advsvm.streams import missing_extra

try:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
except ModuleNotFoundError as error:
    raise missing_extra(error, __name__, "parquet") from None

from river_advsvm import inputs, npz
from river_advsvm.labels import MAX_LABEL_LENGTH, as_label
from river_advsvm.margin import MAX_FEATURES_LIMIT

__all__ = ["MAX_LIST_BYTES", "MAX_ROW_BYTES", "MissingColumnError", "ParquetError", "from_npz",
           "from_river", "iter_batches", "iter_rows", "write"]

Source = typing.Union[str, os.PathLike, ds.Dataset]


def _is_list(arrow_type: pa.DataType) -> bool:
    return (
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
    )


def _is_text(arrow_type: pa.DataType) -> bool:
    return any(check(arrow_type) for check in (
        pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
        pa.types.is_large_binary))


def _is_numeric(arrow_type: pa.DataType) -> bool:
    if pa.types.is_dictionary(arrow_type):  # numbers stored once each: numbers still
        arrow_type = arrow_type.value_type
    return (
        pa.types.is_integer(arrow_type)
        or pa.types.is_floating(arrow_type)
        or pa.types.is_boolean(arrow_type)
        or pa.types.is_decimal(arrow_type)
    )


class _Layout:
    """Which columns are features and what their elements are called, fixed by the schema."""

    def __init__(self, schema: pa.Schema, target: str | None, features: list[str] | None,
                 where: str = "the source"):
        if target is not None and target not in schema.names:
            raise MissingColumnError(
                where, f"target column {target!r} is not in {schema.names}")
        if features is None:
            # pandas' `to_parquet` stores a DataFrame's index as a column its metadata names:
            # the row's label in the frame, not an input.
            index = _pandas_index_columns(schema)
            features = [name for name in schema.names if name != target and name not in index]
        # (pyarrow says a column that appears twice "does not exist in schema".)
        twice = [name for name, count in collections.Counter(schema.names).items()
                 if count > 1 and (name == target or name in features)]
        if twice:
            raise ParquetError(f"{where}: the column name {twice[0]!r} appears "
                               f"{schema.names.count(twice[0])} times; a column read must have "
                               "a name of its own (rename the others, or choose the features)")
        present = set(schema.names)  # (`schema.names` is a new list at each call)
        missing = [name for name in features if name not in present]
        if missing:
            raise MissingColumnError(
                where, f"feature columns {missing} are not in {schema.names}")
        if target is not None and target in features:
            raise ValueError(f"{target!r} is both the target and a feature")
        if not features:
            raise ParquetError(f"{where}: no feature columns (it holds {schema.names})")
        for name in features:
            arrow_type = schema.field(name).type
            value_type = arrow_type.value_type if _is_list(arrow_type) else arrow_type
            if not _is_numeric(value_type):
                raise inputs.InvalidInput(
                    f"{where}: feature column {name!r} has type {arrow_type}; numbers or lists "
                    "of numbers are expected"
                )
        self.target = target
        # Labels that are strings (or bytes) are read as a dictionary (see `_open`).
        self.text_target = target is not None and _is_text(schema.field(target).type)
        self.features = list(features)
        self.is_list = [_is_list(schema.field(name).type) for name in features]
        # A fixed-size list's width is in the schema; a variable list's is its first batch's.
        self.widths: list[int | None] = [
            schema.field(name).type.list_size
            if pa.types.is_fixed_size_list(schema.field(name).type) else None
            for name in features]
        self.names: list | None = None
        # Lists of any length: their width is the data's (each row group's declared values).
        self.variable = [is_list and width is None
                         for is_list, width in zip(self.is_list, self.widths)]
        # Values a row holds by the schema, variable lists aside.
        self.fixed_values = sum(width or 1 for width, variable in zip(self.widths, self.variable)
                                if not variable)

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
            twice = sorted(n for n, count in collections.Counter(names).items() if count > 1)
            raise ParquetError(f"its list columns expand to feature names other columns have "
                               f"({', '.join(twice[:5])}): rename those columns or choose the "
                               "features")
        self.names = names

    def matrix(self, batch: pa.RecordBatch, path: str, first: int) -> np.ndarray:
        """The batch's features as one float64 matrix, validated; the batch is the rows of the
        file `path` from row `first` (for the errors)."""
        where = f"{path} (rows from {first})"
        n = batch.num_rows
        blocks = []
        for i, name in enumerate(self.features):
            column = batch.column(name)
            if self.is_list[i]:
                block = self._list_block(column, name, n, i, where)
            else:
                block = _to_float(column)[:, None]
            blocks.append(block)
        width = sum(block.shape[1] for block in blocks)
        if 8 * width > MAX_ROW_BYTES:  # variable lists: their width is known only now
            raise ParquetError(f"its rows hold {width} values, over the {MAX_ROW_BYTES // 8} "
                               "a row may hold")  # (the caller names the file)
        self._fix_names()
        X = blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=1)
        if not X.shape[1]:  # empty lists: rows without a feature (the Kafka service's empty_x)
            raise inputs.InvalidInput(f"{where}: the feature columns {self.features} hold no "
                                      "values (empty lists); a row needs at least one")
        try:
            inputs.frame_values(X)  # NaN, inf, nulls (as NaN) and huge values are refused here
        except inputs.InvalidInput:
            # (NaN fails the comparison too.)
            bad = np.flatnonzero(~(np.abs(X) <= inputs.MAX_ABS_VALUE).all(axis=1))
            row = int(bad[0]) if len(bad) else 0
            try:  # that row alone, as a sample of named inputs: its error names the column
                inputs.dict_values(dict(zip(self.names, X[row].tolist())))
            except inputs.InvalidInput as named:
                raise inputs.InvalidInput(f"{path}, row {first + row}: {named}", named.code) \
                    from None
            raise  # (not a value of one row)
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
                    f"{where}: column {name!r} holds lists of lengths "
                    f"{sorted(set(lengths.tolist()))}; "
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

    def labels(self, batch: pa.RecordBatch, path: str, first_row: int) -> list | None:
        """The batch's labels as Python values, a null as None (a row without a label);
        `InvalidInput` naming the file and the row for a value that is no label the models
        take (NaN, a list, a timestamp...)."""
        if self.target is None:
            return None
        column = batch.column(self.target)
        if pa.types.is_dictionary(column.type):
            column = self._expanded(column, path, first_row)
        labels = column.to_pylist()
        if not _plain_labels(column):
            for row, label in enumerate(labels):
                if label is None:
                    continue
                self._check_label(label, path, first_row + row)
        return labels

    def _check_label(self, label, path: str, row: int) -> None:
        """`InvalidInput` naming the file and the row unless `label` is a label."""
        try:
            as_label(label)
        except inputs.InvalidInput as error:
            raise inputs.InvalidInput(f"{path}: row {row} of the label column "
                                      f"{self.target!r}: {error}", error.code) from None

    def _expanded(self, column: pa.DictionaryArray, path: str, first_row: int) -> pa.Array:
        """The labels of a dictionary column, once no distinct label is longer than a label
        may be: a label repeated over a row group is stored once, and expanding it first
        could take the row group's rows times its length."""
        dictionary = column.dictionary
        if pa.types.is_string(dictionary.type) or pa.types.is_large_string(dictionary.type):
            lengths = pc.utf8_length(dictionary)
        else:
            lengths = pc.binary_length(dictionary)
        long = np.flatnonzero(lengths.to_numpy(zero_copy_only=False) > MAX_LABEL_LENGTH)
        if long.size:
            rows = np.flatnonzero(np.isin(column.indices.fill_null(-1).to_numpy(), long))
            if rows.size:
                row = int(rows[0])
                self._check_label(column[row].as_py(), path, first_row + row)
        return column.dictionary_decode()


#: Label types whose every value is a label the models take (`as_label`), or null: ints of 64
#: bits at most, and no float (NaN).
_PLAIN_LABELS = (pa.null(), pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(),
                 pa.uint8(), pa.uint16(), pa.uint32())


def _plain_labels(column: pa.Array) -> bool:
    """Whether every value of a label column is a label or null, known without looking at
    each: a type of `_PLAIN_LABELS`, or a float type without NaN or infinities."""
    if column.type in _PLAIN_LABELS:
        return True
    # (`all` skips nulls: None for a column of nulls only.)
    return pa.types.is_floating(column.type) and pc.all(pc.is_finite(column)).as_py() in (
        True, None)


def _to_float(array: pa.Array) -> np.ndarray:
    if array.type != pa.float64():
        # Unchecked: an integer over 2**53 becomes the nearest float, over the magnitude
        # limit, and `matrix` names its row (a checked cast failed as an unreadable file).
        array = pc.cast(array, pa.float64(), safe=False)
    return array.to_numpy(zero_copy_only=False)


#: The most bytes one row may declare, as the float64 values it becomes (over the columns read):
#: a million values, the most inputs a model takes. Rows of variable-length lists, whose width the
#: schema does not say, are held to it as their first batch is read.
MAX_ROW_BYTES = 8 * MAX_FEATURES_LIMIT
#: The most bytes of values a variable-length list column may declare in one row group, as
#: float64. One row of such a column may hold all of them, so this is what reading one row of
#: it can cost; scalar and fixed-size list columns declare their row size in the schema
#: instead, and stream in `batch_size` rows whatever the size of their row groups.
MAX_LIST_BYTES = 2**28
#: Bytes the reader buffers from the file per column: pages are read through it, never a whole
#: column chunk.
_READ_BUFFER = 2**20
#: `iter_rows` reads at most this many bytes of rows (as float64) at a time, whatever
#: `batch_size`, and turns at most `_ROWS_PYTHON_VALUES` values at a time into Python floats
#: (about 32 bytes each in a list and a dict).
_ROWS_READ_BYTES = 2**25
_ROWS_PYTHON_VALUES = 2**16


class ParquetError(ValueError):
    """A Parquet source that cannot be read (a corrupt file, a schema that differs from the
    first file's, a declared size over the limits); the message names the file and the row."""


class MissingColumnError(ParquetError, KeyError):
    """A column asked for (the target, a feature) that the first file of the source does not
    have (a later file lacking it is a plain `ParquetError`); the message names the file. A
    `KeyError` too, as it was before it named the file: its `args[0]` is the message without
    the file, for callers that name the source themselves."""

    def __init__(self, where: str, message: str):
        super().__init__(message)
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.args[0]}"

    def __reduce__(self):
        return type(self), (self.where, self.args[0])


def _files(source: Source) -> tuple[list, typing.Any]:
    """The files of a source and the filesystem to open them with (None: the local one); no
    files for a dataset that is not made of files."""
    if isinstance(source, ds.FileSystemDataset):
        # Its files are streamed whole, through the reader's own checks; a filter set with
        # `Dataset.filter` (kept in its scan options) would be ignored, and the rows it
        # excludes learned.
        condition = (getattr(source, "_scan_options", None) or {}).get("filter")
        if condition is not None:
            raise ParquetError(f"the dataset has a filter ({condition}), which is not applied "
                               "when its files are streamed: filter the rows this yields, or "
                               "write the rows to learn to files of their own")
        return list(source.files), source.filesystem
    if isinstance(source, ds.Dataset):
        return [], None
    path = os.fspath(source)
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    if not os.path.isdir(path):
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):  # (a FIFO would block the read until a writer comes)
            raise ParquetError(f"{path}: not a regular file")
        return [path], None
    try:
        dataset = ds.dataset(path, format="parquet")
    except (pa.ArrowException, OSError) as error:
        # pyarrow names the first file that is not Parquet deep in its own words.
        found = re.search(r"Could not open Parquet input source '(.+?)'", str(error))
        if found:
            raise ParquetError(f"{path}: a directory is read as Parquet files, and "
                               f"{found.group(1)} is not one: give a Parquet file, or a "
                               "directory of Parquet files only") from None
        raise ParquetError(f"{path}: {_one_line(error)}") from None
    # pyarrow follows links: a link to a file of the directory (or to a directory above it, a
    # loop it follows as deep as paths go) would have the same rows learned again.
    seen: dict = {}
    for file in dataset.files:
        try:
            info = os.stat(file)
        except OSError as error:
            raise ParquetError(f"{file}: {_one_line(error)}") from None
        first = seen.setdefault((info.st_dev, info.st_ino), file)
        if first != file:
            raise ParquetError(f"{path}: {file} is {first} again (through a link): its rows "
                               "would be read twice (remove the link)")
    return list(dataset.files), dataset.filesystem


def _pandas_index_columns(schema: pa.Schema) -> set:
    """The columns pandas stored a DataFrame's index in (named in the file's pandas metadata;
    a RangeIndex is stored as no column)."""
    try:
        index = (schema.pandas_metadata or {}).get("index_columns", [])
    except (ValueError, TypeError):  # (metadata that is not JSON: no index named)
        return set()
    return {name for name in index if isinstance(name, str)}


def _open(path: str, filesystem, target: str | None = None):
    """A `pq.ParquetFile` that reads pages through a small buffer (no pre-buffering) and
    checks the checksum of every page that has one (a page without one is read unchecked).
    A `target` column of strings is read as a dictionary: each distinct label once, as a
    dictionary-encoded column stores it, checked before the batch is expanded."""
    source = path if filesystem is None else filesystem.open_input_file(path)
    return pq.ParquetFile(source, buffer_size=_READ_BUFFER, pre_buffer=False,
                          page_checksum_verification=True,
                          read_dictionary=None if target is None else [target])


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300] or type(error).__name__


def _check_declared(path: str, metadata: pq.FileMetaData, layout: _Layout, schema: pa.Schema,
                    max_list_bytes: int) -> list[tuple[int, int]]:
    """Refuse a file whose metadata declares rows, or rows of a variable-length list, larger
    than the limits, before anything of it is read. Returns, for each row group when the
    features hold variable-length lists, its rows and the values they declare in them."""
    row_bytes = 0
    for name, is_list in zip(layout.features, layout.is_list):
        arrow_type = schema.field(name).type
        row_bytes += 8 * (arrow_type.list_size if pa.types.is_fixed_size_list(arrow_type)
                          else 0 if is_list else 1)
    if row_bytes > MAX_ROW_BYTES:
        raise ParquetError(f"{path}: its rows hold {row_bytes // 8} values, over the "
                           f"{MAX_ROW_BYTES // 8} a row may hold")
    variable = {name for name, is_list in zip(layout.features, layout.is_list)
                if is_list and not pa.types.is_fixed_size_list(schema.field(name).type)}
    if layout.target is not None and not _is_numeric(schema.field(layout.target).type):
        variable.add(layout.target)  # a string label may be as long as its row group
    # The column each leaf belongs to, by position: a path in the schema joins its names with
    # dots, and a column may have dots in its name ("x.y" would be column "x").
    owners = [field.name for field in schema for _ in range(_leaves(field.type))]
    if metadata.num_row_groups and len(owners) != metadata.row_group(0).num_columns:
        raise ParquetError(f"{path}: its schema has {len(owners)} leaf columns, its row groups "
                           f"{metadata.row_group(0).num_columns}")
    # Only the columns whose rows have no fixed size are looked at: with pyarrow 26, a column
    # chunk's metadata whose size statistics are corrupt ends the process when it is read
    # (its accessor lets the exception through), where the reader raises for it.
    checked = [c for c, owner in enumerate(owners) if owner in variable]
    declared_values = []
    for g in range(metadata.num_row_groups if checked else 0):
        group = metadata.row_group(g)
        if group.num_columns != len(owners):
            raise ParquetError(f"{path}: row group {g} has {group.num_columns} leaf columns, "
                               f"its schema {len(owners)}")
        values = 0
        for c in checked:
            column = group.column(c)
            owner = owners[c]
            declared = 8 * max(column.num_values, 0) if owner != layout.target \
                else max(column.total_uncompressed_size, 0)
            if owner != layout.target:
                values += declared // 8
            if declared > max_list_bytes:
                raise ParquetError(
                    f"{path}: row group {g} declares {declared} bytes of column "
                    f"{column.path_in_schema!r}, over the {max_list_bytes} allowed for a column "
                    "whose rows have no fixed size (max_list_bytes; or write the file with "
                    "smaller row groups, or as a fixed-size list)")
        declared_values.append((max(group.num_rows, 0), values))
    return declared_values if any(layout.variable) else []


def _leaves(arrow_type: pa.DataType) -> int:
    """How many Parquet leaf columns a column of `arrow_type` is stored as."""
    if _is_list(arrow_type) or pa.types.is_dictionary(arrow_type):
        return _leaves(arrow_type.value_type)
    if pa.types.is_map(arrow_type):
        return _leaves(arrow_type.key_type) + _leaves(arrow_type.item_type)
    if pa.types.is_struct(arrow_type):
        return sum(_leaves(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if isinstance(arrow_type, pa.BaseExtensionType):  # (canonical ones too: tensors, uuid)
        return _leaves(arrow_type.storage_type)
    return 1


def _plan(source: Source, target, features, max_list_bytes: int):
    """The layout and the files of a source, every file's schema and declared sizes checked
    before any row is read: a bad file is named before the model learns from the good ones."""
    files, filesystem = _files(source)
    if isinstance(source, ds.Dataset) and not isinstance(source, ds.FileSystemDataset):
        return _Layout(source.schema, target, features, where="the dataset"), [], None, {}
    if not files:
        name = "the dataset" if isinstance(source, ds.Dataset) else os.fspath(source)
        raise ParquetError(f"{name} holds no Parquet file")
    layout = None
    label_kind = None
    declared: dict = {}  # path -> `_check_declared`'s rows and values of each row group
    for path in files:
        try:
            with _open(path, filesystem) as reader:
                schema, metadata = reader.schema_arrow, reader.metadata
        except (pa.ArrowException, OSError) as error:
            raise ParquetError(f"{path}: not a readable Parquet file: {_one_line(error)}") \
                from None
        try:
            mine = _Layout(schema, target, features, where=path)
        except MissingColumnError as error:
            if layout is None:
                raise  # (it names the file)
            raise ParquetError(f"{path}: {error.args[0]}") from None
        if layout is None:
            layout = mine
        elif (mine.features, mine.is_list) != (layout.features, layout.is_list):
            raise ParquetError(f"{path}: its feature columns {mine.features} differ from those "
                               f"of {files[0]} ({layout.features})")
        else:
            for name, first, width in zip(mine.features, layout.widths, mine.widths):
                if None not in (first, width) and first != width:
                    raise ParquetError(f"{path}: its list column {name!r} holds {width} values "
                                       f"a row, {first} in {files[0]}")
        if target is not None:
            kind = _label_kind(schema.field(target).type)
            if label_kind is None:
                label_kind = kind
            elif kind not in (label_kind, None):
                raise ParquetError(f"{path}: its label column {target!r} holds {kind}, "
                                   f"{label_kind} in {files[0]}: a label written both ways "
                                   "would be two classes (1 and '1')")
        declared[path] = _check_declared(path, metadata, mine, schema, max_list_bytes)
    return layout, files, filesystem, declared


def _label_kind(arrow_type: pa.DataType) -> str | None:
    """What a label column holds, as far as equal labels go: 1, 1.0 and True are one label in
    Python, 1 and "1" are two. None for a column of nulls only (rows without a label), which
    goes with any other."""
    if pa.types.is_null(arrow_type):
        return None
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if _is_numeric(arrow_type):
        return "numbers"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "strings"
    return str(arrow_type)


def _batches(source, target, features, batch_size, max_list_bytes=MAX_LIST_BYTES,
             max_read_bytes=None):
    """`(names, X, labels)` per batch of at most `batch_size` rows; with `max_read_bytes`, of
    at most as many rows as fit in it (as float64, by the row size the schema declares)."""
    # (At most: a batch past what pyarrow counts in is the whole file, as a smaller one is.)
    batch_size = min(inputs.check_count("batch_size", batch_size), 2**31 - 1)
    max_list_bytes = inputs.check_count("max_list_bytes", max_list_bytes)
    features = _checked_features(features)
    layout, files, filesystem, declared = _plan(source, target, features, max_list_bytes)

    def rows_per_batch(row_values: int) -> int:
        if max_read_bytes is None:
            return batch_size
        return min(batch_size, max(1, max_read_bytes // (8 * max(row_values, 1))))

    if isinstance(source, ds.Dataset) and not isinstance(source, ds.FileSystemDataset):
        yield from _file_batches("dataset", source.to_batches(
            columns=layout.columns(),
            batch_size=rows_per_batch(layout.fixed_values + sum(layout.variable))), layout)
        return
    for path in files:
        try:
            reader = _open(path, filesystem, layout.target if layout.text_target else None)
        except (pa.ArrowException, OSError) as error:
            raise ParquetError(f"{path}: not a readable Parquet file: {_one_line(error)}") \
                from None
        with reader:
            if not declared[path]:
                batches = reader.iter_batches(batch_size=rows_per_batch(layout.fixed_values),
                                              columns=layout.columns(), use_threads=False)
            else:
                # Lists of any length: a row group at a time (a batch of pyarrow's would run
                # on into the next), as many rows a batch as that row group's declare.
                batches = (batch for g, (rows, values) in enumerate(declared[path])
                           for batch in reader.iter_batches(
                               batch_size=rows_per_batch(
                                   layout.fixed_values + -(-values // max(rows, 1))),
                               row_groups=[g], columns=layout.columns(), use_threads=False))
            yield from _file_batches(path, batches, layout)


def _checked_features(features) -> list | None:
    """`features` as a list of column names, each once; a str is refused, not read as its
    letters ("ab" as the columns a and b)."""
    if features is None:
        return None
    if isinstance(features, (str, bytes)):
        raise TypeError(f"features must be a list of column names, got "
                        f"{inputs.describe(features)} (for one column: [{features!r}])")
    try:
        features = list(features)
    except TypeError:
        raise TypeError(f"features must be a list of column names, got "
                        f"{inputs.describe(features)}") from None
    twice = [name for name, count in collections.Counter(features).items() if count > 1]
    if twice:
        raise ValueError(f"features names the column {twice[0]!r} twice: each feature column is "
                         "read once")
    return features


def _file_batches(path: str, batches, layout: _Layout):
    """One file's batches as `(names, X, labels)`; every error names the file and the row."""
    row = 0
    while True:
        where = f"{path} (rows from {row})"
        try:
            batch = next(batches, None)
            if batch is None:
                return
            if batch.num_rows == 0:
                continue
            X = layout.matrix(batch, path, row)
            labels = layout.labels(batch, path, row)
        except inputs.InvalidInput:
            raise
        except ParquetError as error:  # (a schema the file's rows cannot be named by)
            raise ParquetError(f"{path}: {error}") from None
        except MemoryError:
            raise ParquetError(f"{where}: not enough memory to decode the batch") from None
        except Exception as error:  # noqa: BLE001 - corrupt pages reach Arrow's decoders
            raise ParquetError(f"{where}: cannot be read: {_one_line(error)}") from None
        yield layout.names, X, labels
        row += batch.num_rows


def iter_batches(
    source: Source,
    target: str | None = None,
    features: list[str] | None = None,
    batch_size: int = 1024,
    max_list_bytes: int = MAX_LIST_BYTES,
) -> typing.Iterator[tuple[pd.DataFrame, pd.Series | None]]:
    """Yield `(X, y)` batches for `learn_many`, one Parquet read at a time.

    Parameters
    ----------
    source
        A Parquet file, a directory of Parquet files, or a `pyarrow.dataset.Dataset`.
    target
        The label column; `y` is None when no target is given (for prediction).
    features
        The feature columns, in order: a list of column names, each once (a str is refused,
        not read as its letters); by default every column but the target.
    batch_size
        Rows per batch, a whole number >= 1 (at most: a batch never spans two files, nor two
        row groups of a list column without a fixed size). Memory is about this many rows,
        whatever the size of the file's row groups.
    max_list_bytes
        The most bytes (as float64) a row group of a list column without a fixed size may
        declare: one of its rows may hold them all. A file declaring more is refused with
        `ParquetError` before any of it is read.

    Raises
    ------
    ParquetError
        Naming the file (and the row) for a file that cannot be read. The schema and declared
        sizes of every file are checked before the first batch. `MissingColumnError`, a
        `ParquetError` and a `KeyError`, for a target or feature column the first file lacks.
    river_advsvm.InvalidInput
        Naming the file and the row for a bad value: a feature that is no finite number in
        bounds, a label that is no label (a null label is None: a row without a label).
    ValueError, TypeError
        For a `batch_size` or `features` that is none, before anything is read.

    """
    for names, X, labels in _batches(source, target, features, batch_size, max_list_bytes):
        frame = pd.DataFrame(X, columns=names, copy=False)
        # A null label is None, beside the labels as written (pandas would make 0 and 1 floats).
        kind = object if labels is not None and None in labels else None
        yield frame, (None if labels is None else pd.Series(labels, name=target, dtype=kind))


def iter_rows(
    source: Source,
    target: str | None = None,
    features: list[str] | None = None,
    batch_size: int = 1024,
    max_list_bytes: int = MAX_LIST_BYTES,
) -> typing.Iterator[tuple[dict, typing.Any]]:
    """Yield `(x, y)` pairs for `learn_one`, reading `batch_size` rows at a time.

    Same parameters as `iter_batches`; `y` is None when no target is given. Rows are read as
    many at a time as fit in `_ROWS_READ_BYTES` too, and become Python numbers a few at a
    time: wide rows (an image of 100,000 pixels) cost a few rows' memory, not a batch's.
    """
    for names, X, labels in _batches(source, target, features, batch_size, max_list_bytes,
                                     max_read_bytes=_ROWS_READ_BYTES):
        labels = labels if labels is not None else [None] * len(X)
        step = max(1, _ROWS_PYTHON_VALUES // max(X.shape[1], 1))
        for start in range(0, len(X), step):
            for values, label in zip(X[start:start + step].tolist(),
                                     labels[start:start + step]):
                yield dict(zip(names, values)), label


# -- writing ----------------------------------------------------------------------------------


def _feature_columns(X: np.ndarray, layout: str, feature_name: str, y,
                     target_name: str) -> list[str]:
    """The names of the columns `write` writes for `X`; ValueError for a layout it does not
    know or a feature column named like the target (its own reader refuses such a file)."""
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    if layout == "list":
        names = [feature_name]
    elif layout == "wide":
        names = [f"{feature_name}_{j}" for j in range(X.shape[1])]
    else:
        raise ValueError(f"layout must be 'list' or 'wide', got {inputs.describe(layout)}")
    if y is not None and target_name in names:
        raise ValueError(f"the feature column {target_name!r} would have the name of the target "
                         f"column (feature_name={feature_name!r}, target_name="
                         f"{target_name!r}): choose names that differ")
    return names


def _feature_table(X: np.ndarray, y: pa.Array | None, layout: str, names: list[str],
                   target_name: str):
    """A chunk of `write` as a table whose feature columns are `names` (`_feature_columns`)
    and, with labels `y` (`_label_array`'s, sliced), a target column."""
    names = list(names)
    if layout == "list":
        flat = pa.array(np.ascontiguousarray(X).reshape(-1))
        arrays = [pa.FixedSizeListArray.from_arrays(flat, X.shape[1])]
    else:
        arrays = [pa.array(X[:, j]) for j in range(X.shape[1])]
    if y is not None:
        arrays.append(y)
        names.append(target_name)
    return pa.Table.from_arrays(arrays, names=names)


#: The column type of each kind of label a file holds.
_LABEL_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def _label(y, sample: int, kind: type | None) -> tuple:
    """`(label, kind)`: `y` as `as_label` takes it (None stays None: a row without a label),
    or `ValueError` naming the sample. A label of another kind than `kind` (the first label's)
    is refused: a column holds one type, and in it "1" would become 1, or 2 become True."""
    if y is None:
        return None, kind
    try:
        y = as_label(y)
    except inputs.InvalidInput as error:
        raise ValueError(f"sample {sample}: {error}") from None
    if kind is not None and type(y) is not kind:
        raise ValueError(f"sample {sample} has label {inputs.describe(y)}, another kind than "
                         f"the labels before it ({kind.__name__}): a label column holds labels "
                         "of one kind")
    return y, type(y)


def _label_array(y) -> pa.Array:
    """The labels `y` (None: no label) as one column, of the type of their kind."""
    kind = None
    labels = []
    for i, value in enumerate(y.tolist() if isinstance(y, np.ndarray) else y):
        value, kind = _label(value, i, kind)
        labels.append(value)
    return pa.array(labels, type=_LABEL_TYPES.get(kind, pa.null()))


def _written(path, write_to: typing.Callable[[str], typing.Any]):
    """`write_to(a file beside path)`, then that file renamed to `path`: a write that fails
    leaves no file behind (a partial Parquet file reads as a whole, shorter one)."""
    path = os.fspath(path)
    head, tail = os.path.split(os.path.abspath(path))
    partial = os.path.join(head, f".{tail}.{uuid.uuid4().hex[:12]}.partial")
    try:
        result = write_to(partial)
        if os.path.exists(partial):  # (nothing to write makes no file)
            os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        raise
    return result


def _check_row_group_size(row_group_size) -> None:
    # (With a negative size `write` would write no file, and `from_river` would hold every row
    # in memory until the end.)
    inputs.check_count("row_group_size", row_group_size)


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

    Every page carries a checksum, which the readers of this module check.

    Parameters
    ----------
    path
        The file to write (replaced if it exists).
    X
        The samples, a 2-D array of numbers (bool, int or float), one row each.
    y
        Their labels, one per row, or None for a file of unlabelled samples.
    layout
        'list': one fixed-size-list column `feature_name` holding each row (images);
        'wide': one column per feature, `feature_name_0`, `feature_name_1`, ...
    feature_name
        The name of the features' column ('list'), or the prefix of their columns ('wide').
    target_name
        The name of the labels' column.
    row_group_size
        Rows per row group: what a reader must decode at once.
    compression
        Parquet's compression codec for every column ('zstd', 'snappy', 'gzip', 'none', ...).

    """
    _check_row_group_size(row_group_size)
    X = np.asarray(X)
    names = _feature_columns(X, layout, feature_name, y, target_name)  # before any writing
    if X.dtype.kind not in "biuf":
        raise ValueError("X must be an array of numbers (bool, int or float)")
    if not X.shape[1]:
        raise ValueError("X has no columns: a sample needs at least one input")
    if y is not None and len(y) != len(X):
        raise ValueError(f"{len(X)} samples but {len(y)} labels")
    labels = None if y is None else _label_array(y)

    def write_to(sink: str) -> None:
        with pq.ParquetWriter(sink, _feature_table(X[:0], None if labels is None else
                                                   labels[:0], layout, names,
                                                   target_name).schema,
                              compression=compression, write_page_checksum=True) as writer:
            for start in range(0, max(len(X), 1), row_group_size):
                stop = start + row_group_size
                chunk = None if labels is None else labels[start:stop]
                writer.write_table(_feature_table(X[start:stop], chunk, layout, names,
                                                  target_name), row_group_size=row_group_size)

    _written(path, write_to)


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
    _check_row_group_size(row_group_size)  # before the archive is read
    arrays = npz.read_arrays(npz_path, [x_key] + ([y_key] if y_key is not None else []),
                             inputs=[x_key])
    X, y = arrays[x_key], arrays.get(y_key)
    X = npz.flat_samples(npz_path, X, y, x_key, y_key)
    write(path, X, y, layout=layout, row_group_size=row_group_size)
    return len(X)


def _column_names(names: list, target_name: str) -> dict:
    """Each feature name's column: its text (a `str` subclass such as a `(str, Enum)` member
    is the text it holds, not its `str()`); two names of one text cannot both be columns."""
    columns: dict = {}
    named: dict = {}  # column -> the feature name it holds
    for name in names:
        column = str.__str__(name) if isinstance(name, str) else str(name)
        if column == target_name:
            raise ValueError(f"a feature is named like the target {target_name!r}")
        if column in named:
            raise ValueError(f"features {named[column]!r} and {name!r} would both be the "
                             f"column {column!r}")
        named[column] = name
        columns[name] = column
    return columns


def from_river(
    dataset: typing.Iterable[tuple[dict, typing.Any]],
    path: str | os.PathLike,
    *,
    target_name: str = "y",
    row_group_size: int = 1024,
    compression: str = "zstd",
) -> int:
    """Write a River dataset (an iterable of `(x, y)`) as a wide table, one column per feature.

    The columns are the features of the first sample, each named by its text (`ValueError` if
    two features have one text, such as 1 and '1'), each of float64 values (a bool as 0 or 1);
    a later sample with another feature raises `ValueError`, a missing one is written as null
    (which the readers refuse as a feature value). A value that is no number, or a label of
    another kind than the first (1 beside "1" or True), raises `ValueError` naming the sample;
    a label None is a row without a label. Nothing is left at `path` after an error. Returns
    the number of rows written.
    """
    _check_row_group_size(row_group_size)

    def write_to(sink: str) -> int:
        writer = None
        names: dict | None = None
        rows: list = []
        labels: list = []
        kind = None
        count = 0

        def flush():
            nonlocal writer
            columns = {column: pa.array([row.get(name) for row in rows], type=pa.float64())
                       for name, column in names.items()}
            columns[target_name] = pa.array(labels, type=_LABEL_TYPES.get(kind, pa.null()))
            table = pa.table(columns)
            if writer is None:
                writer = pq.ParquetWriter(sink, table.schema, compression=compression,
                                          write_page_checksum=True)
            elif table.schema != writer.schema:  # (only the label's type can differ)
                first = count - len(rows) + next(i for i, y in enumerate(labels) if y is not None)
                raise ValueError(f"sample {first} is the first with a label, after a row group "
                                 "of rows without one: the row group sets the label column's "
                                 "type (give a larger row_group_size)")
            writer.write_table(table, row_group_size=row_group_size)
            rows.clear()
            labels.clear()

        try:
            for x, y in dataset:
                if names is None:
                    names = _column_names(list(x), target_name)
                unknown = [name for name in x if name not in names]
                if unknown:
                    raise ValueError(f"sample {count} has features {unknown} the first one lacks")
                rows.append({name: _feature_value(value, count, name)
                             for name, value in x.items()})
                y, kind = _label(y, count, kind)
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

    return _written(path, write_to)


def _feature_value(value, sample: int, name) -> float | None:
    """A feature's value as written (None: null), or `ValueError` naming the sample."""
    if value is None:
        return None
    what = "a feature is a number (or None: missing)"
    if isinstance(value, (numbers.Real, np.bool_)):
        try:
            return float(value)
        except OverflowError:  # (an int past float's range)
            what = "too large for a float"
    raise ValueError(f"sample {sample}: feature {inputs.shown_name(name)} is "
                     f"{inputs.describe(value)}: {what}")
