"""The River boundary: feature dicts and frames in, validated dense numpy arrays out.

Models keep one `FeatureIndex` that gives every feature name a column, in order of first
appearance. Column order is bookkeeping only: nothing random depends on it (see `kernels`).
Validation happens here, before a model changes any state.

"""

from __future__ import annotations

import numbers
import typing

import numpy as np

from river_advsvm import kernels

__all__ = ["FeatureIndex", "InvalidInput", "dict_values", "frame_values"]


class InvalidInput(ValueError):
    """A sample the model refuses: non-numeric or non-finite values, unusable names or labels."""


def _check_values(values: np.ndarray, names: typing.Sequence) -> np.ndarray:
    if values.dtype.kind not in "biuf":
        bad = _first_non_numeric(values, names)
        raise InvalidInput(f"feature values must be numbers; {bad}")
    values = values.astype(np.float64, copy=False)
    if not np.isfinite(values).all():
        flat = np.flatnonzero(~np.isfinite(values))[0]
        column = flat % len(names) if values.ndim == 2 else flat
        raise InvalidInput(
            f"feature values must be finite; {names[column]!r} is {values.flat[flat]}"
        )
    return values


def _first_non_numeric(values: np.ndarray, names: typing.Sequence) -> str:
    flat = values.reshape(-1)
    for i, v in enumerate(flat):  # error path only
        if isinstance(v, (bool, np.bool_)) or (
            isinstance(v, numbers.Real) and not isinstance(v, str)
        ):
            continue
        return f"{names[i % len(names)]!r} is {v!r} ({type(v).__name__})"
    return f"got dtype {values.dtype}"


def dict_values(x: dict) -> tuple[list, np.ndarray]:
    """Names and float values of a feature dict, or `InvalidInput`."""
    if not isinstance(x, dict):
        raise InvalidInput(f"x must be a dict of features, got {type(x).__name__}")
    names = list(x)
    # np.asarray rather than np.fromiter: it keeps strings and None visible in the dtype instead
    # of quietly turning "1.5" into 1.5.
    raw = list(x.values())
    try:
        values = np.asarray(raw)
    except (ValueError, TypeError):  # ragged sequences among the values
        values = None
    if values is None or values.ndim != 1:
        values = np.empty(len(raw), dtype=object)
        values[:] = raw
    return names, _check_values(values, names)


def frame_values(X) -> tuple[list, np.ndarray]:
    """Column names and a float matrix from a pandas DataFrame or a 2-D numpy array.

    A numpy array's columns are named 0..d-1, as `river.stream.iter_array` names them.

    """
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise InvalidInput(f"expected a 2-D array of samples, got shape {X.shape}")
        names = list(range(X.shape[1]))
        return names, _check_values(X, names)
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):
        names = list(X.columns)
        if len(set(names)) != len(names):
            raise InvalidInput("feature names (columns) must be unique")
        values = X.to_numpy()
        return names, _check_values(values, names)
    raise InvalidInput(f"expected a pandas DataFrame or a 2-D numpy array, got {type(X).__name__}")


_NO_HASHES = np.empty(0, dtype=np.uint64)


class FeatureIndex:
    """Columns for feature names, in order of first appearance, with their stable hashes."""

    def __init__(self):
        self.names: list = []
        self.position: dict = {}
        self.hashes = np.empty(0, dtype=np.uint64)
        self._last_names: list | None = None
        self._last_positions = np.empty(0, dtype=np.intp)
        self._last_identity = False

    def __len__(self) -> int:
        return len(self.names)

    def _lookup(self, names: list) -> tuple[np.ndarray, bool]:
        """The column of each name (-1 if unknown), and whether they are exactly 0..D-1."""
        # Streams usually repeat the same names in the same order: one list comparison then
        # replaces a dict lookup per feature.
        if names == self._last_names:
            return self._last_positions, self._last_identity
        get = self.position.get
        positions = np.fromiter((get(n, -1) for n in names), dtype=np.intp, count=len(names))
        identity = len(names) == len(self.names) and bool(
            (positions == np.arange(len(names))).all()
        )
        if (positions >= 0).all():
            self._last_names, self._last_positions = names, positions
            self._last_identity = identity
        return positions, identity

    def positions(self, names: list) -> np.ndarray:
        """The column of each name, -1 where the name is unknown."""
        return self._lookup(names)[0]

    def unknown(self, names: list) -> list:
        """The names among `names` that have no column yet, without repeats."""
        if names == self._last_names:
            return []
        return [n for n in dict.fromkeys(names) if n not in self.position]

    @staticmethod
    def hash_names(names: list) -> np.ndarray:
        """Stable hashes of `names`; raises `InvalidInput` for a name that cannot be hashed."""
        if not names:
            return _NO_HASHES
        try:
            return np.asarray([kernels.key_hash(n) for n in names], dtype=np.uint64)
        except TypeError as error:
            raise InvalidInput(str(error)) from None

    def add(self, names: list, hashes: np.ndarray) -> None:
        """Give a column to each of `names` (unknown ones, as returned by `unknown`)."""
        for n in names:
            self.position[n] = len(self.names)
            self.names.append(n)
        self.hashes = np.concatenate([self.hashes, hashes])
        self._last_names = None

    def dense(self, names: list, values: np.ndarray) -> tuple[np.ndarray, list, np.ndarray]:
        """Split samples into a dense matrix over the known columns and the unknown remainder.

        Returns `(V, unknown_names, U)`: `V` has one column per known name (0 where a sample
        lacks it), `U` holds the values of the names the index does not know.

        """
        values = np.atleast_2d(values)
        positions, identity = self._lookup(names)
        n = values.shape[0]
        if identity:
            return values, [], np.empty((n, 0))
        known = positions >= 0
        V = np.zeros((n, len(self.names)))
        V[:, positions[known]] = values[:, known]
        if known.all():
            return V, [], np.empty((n, 0))
        unknown = [name for name, k in zip(names, known) if not k]
        return V, unknown, values[:, ~known]
