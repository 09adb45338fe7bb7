"""Support vectors: `f(x) = s sum_i a_i k(x, x_i)` over stored examples, with exact kernels.

The other representation of `AdvKernelSVM` (beside the random features of
`river_advsvm.budget`): every active step stores its input `x_i` with a coefficient `a_i`, and
`f` is evaluated with the exact kernel, RBF `exp(-gamma ||x - x'||_2^2)` or Laplacian
`exp(-gamma ||x - x'||_1)`. Nothing is approximated, so the norm `||f||_H` the adversarial term
and the certificate use is the norm of the deployed model.

How it stays cheap:

- The shrink `f <- rho f` of every step multiplies a global scale `s` (O(1)); `s` is folded
  into the `a_i` before it under- or overflows.
- One matrix-vector product `S @ x` per step gives every RBF distance at once, as
  `||x - x_i||^2 = ||x||^2 + ||x_i||^2 - 2 x_i . x`. Vectors are stored in `float32` by default
  (half the memory traffic); a learned row's distances, `a`, `s` and the norm are `float64`.
  Predictions on many rows are one matrix product, with the kernel values in the storage
  precision and the sum over vectors in float64.
- `||f||^2` is tracked exactly: adding `c k(x, .)` changes it by `2 c f(x) + c^2` (as
  `k(x, x) = 1`), and `f(x)` is what the step computed anyway. It is recomputed from scratch
  every few thousand stored vectors, so that rounding cannot drift.
- The budget: when a `(B + 1)`-th vector arrives, the vector `m` with the smallest `|a_m|` is
  merged into a same-sign partner `n` (policy 'merge', as in budgeted SGD, Wang, Crammer and
  Vucetic 2012) or dropped ('remove'). A merge replaces `a_m k(x_m, .) + a_n k(x_n, .)` by the
  single `a_z k(z, .)` closest to it in the kernel's space: for a fixed `z` the best `a_z` is the
  projection `a_m k(x_m, z) + a_n k(x_n, z)`, and what is lost, the weight degradation
  `||a_m k(x_m, .) + a_n k(x_n, .) - a_z k(z, .)||^2 = a_m^2 + a_n^2 + 2 a_m a_n k(x_m, x_n) -
  a_z^2`, is smallest where `|a_z|` is largest. The partner with the smallest degradation wins.
  Only the kernel row of `m` (and of the chosen `n`) is needed, never the full kernel matrix.

Where `z` goes:

- RBF: on the segment `z = h x_m + (1 - h) x_n` (moving off it shrinks both kernel values).
  Squared distances scale quadratically along it, `k(x_m, z) = kappa^((1-h)^2)` and
  `k(x_n, z) = kappa^(h^2)` with `kappa = k(x_m, x_n)`; `h` maximises `|a_z|`, found by a coarse
  grid and a golden-section search, vectorised over all candidates.
- Laplacian: the L1 distances of any `z` in the box spanned by `x_m` and `x_n` add up to
  `||x_m - x_n||_1`, so `|a_z|` depends on `T = ||x_m - z||_1` alone:
  `A exp(-gamma T) + B exp(-gamma (L - T))`, a convex function of `T`, largest at an end. The
  best merge point in the whole input space is therefore one of the two vectors: the larger one
  (`|a_n| >= |a_m|`) absorbs `a_m k(x_m, x_n)`, and the degradation is `a_m^2 (1 - kappa^2)`,
  smallest for the nearest same-sign vector. No interior point of the segment (nor any other
  point) does better.

Rows are learned one at a time through `value` (caches the kernel row), `scale` and `add`; the
arithmetic of a row depends on the store's state only, never on the batch it came in. On
OpenBLAS, a row's value does not change either when the row gains zero-valued columns that the
stored vectors do not have (RBF; for the Laplacian kernel, within a block of 16 columns).

"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm.kernels import KERNELS, NORMS
from river_advsvm.margin import ROWS_PER_CHUNK

__all__ = ["DTYPES", "POLICIES", "SupportVectors", "support_radii"]

POLICIES = ("merge", "remove")
DTYPES = ("float32", "float64")

# The global scale is folded into the coefficients outside this range; within it, a_i = c / s
# and a^T K a stay far from the float64 limits for any sane budget.
_SCALE_RANGE = (1e-64, 1e64)
# ||f||^2 is recomputed from the vectors after this many stored vectors per vector held (RBF:
# one product S S^T; the Laplacian kernel's pairwise L1 distances cost more).
_RECOMPUTE_AFTER = {"rbf": 4, "laplacian": 32}
# The merge search: a grid over h, then golden-section steps around its best point.
_GRID = 9
_GOLDEN_STEPS = 30
# Elements of the (rows x vectors x inputs) temporaries of the Laplacian kernel.
_BLOCK = 1 << 21
_COLUMN_BLOCK = 16


def _padded(n: int) -> int:
    return -(-n // _COLUMN_BLOCK) * _COLUMN_BLOCK


def _squared_norms(X: np.ndarray) -> np.ndarray:
    """`||x||^2` per row (of the last axis) in float64, summed left to right.

    A sequential sum does not change when zero-valued columns are appended, so a row scored
    before and after the model learns a new column gets the same bits.
    """
    squares = np.square(X, dtype=np.float64)
    if squares.shape[-1] == 0:
        return np.zeros(squares.shape[:-1])
    return np.cumsum(squares, axis=-1)[..., -1]


class SupportVectors:
    """The support vectors, their coefficients and the exact norm of `AdvKernelSVM`'s `f`.

    Parameters
    ----------
    kernel
        'rbf' or 'laplacian'.
    gamma
        Kernel bandwidth.
    budget
        Maximum number of support vectors, or `None` for no limit (plain kernel SGD: memory and
        prediction cost grow with every active step, so for finite data only).
    policy
        What happens to the `(budget + 1)`-th vector: 'merge' (two vectors become one) or
        'remove' (the smallest coefficient is dropped).
    dtype
        Storage of the vectors: 'float32' (default) or 'float64'.
    max_inputs
        The most input columns there will be (the model's `max_features`), if known: spare
        capacity for new columns never goes beyond it.

    Attributes
    ----------
    size
        Number of support vectors.
    n_inputs
        Number of input columns the vectors have.
    version
        Bumped whenever stored vectors change.
    n_merges, n_removals
        Budget maintenance events so far.
    degradation
        `||f_before - f_after||^2` of the latest maintenance event.
    total_degradation
        The sum of `degradation` over all events.

    Examples
    --------

    >>> import numpy as np
    >>> from river_advsvm.support import SupportVectors

    >>> store = SupportVectors("rbf", gamma=0.5, budget=2)
    >>> store.start()
    >>> store.add_inputs(2)
    >>> for x, c in [([0.0, 0.0], 1.0), ([1.0, 0.0], 0.5), ([0.0, 0.2], 0.25)]:
    ...     _ = store.value(np.array(x))
    ...     store.add(c)

    The third vector arrived over the budget: the smallest coefficient (0.25) was merged into
    its same-sign neighbour at the origin, on the segment between them.

    >>> store.size, store.n_merges
    (2, 1)
    >>> store.vectors.astype(float).round(3).tolist()
    [[0.0, 0.04], [1.0, 0.0]]
    >>> store.coefficients.round(3).tolist()
    [1.246, 0.5]
    >>> round(store.value(np.array([0.0, 0.1])), 4)
    1.5455
    >>> round(store.norm, 4), f"{store.degradation:.1e}"
    (1.5993, '3.1e-05')

    """

    def __init__(
        self,
        kernel: str,
        gamma: float,
        budget: int | None,
        policy: str = "merge",
        dtype: str = "float32",
        max_inputs: int | None = None,
    ):
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        if not (isinstance(gamma, (int, float)) and 0 < gamma < math.inf):
            raise ValueError(f"gamma must be a positive number, got {gamma!r}")
        if budget is not None and not (isinstance(budget, int) and budget >= 1):
            raise ValueError(f"budget must be a positive int or None, got {budget!r}")
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        if max_inputs is not None and not (isinstance(max_inputs, int) and max_inputs >= 0):
            raise ValueError(f"max_inputs must be an int >= 0 or None, got {max_inputs!r}")
        self.kernel = kernel
        self.gamma = float(gamma)
        self.budget = budget
        self.policy = policy
        self.dtype = dtype
        self.max_inputs = max_inputs
        self.size = 0
        self.n_inputs = 0
        self.version = 0
        self.n_merges = 0
        self.n_removals = 0
        self.degradation = 0.0
        self.total_degradation = 0.0
        # f = s * sum_i a_i k(x_i, .); q = a^T K a, so ||f||^2 = s^2 q.
        self._scale = 1.0
        self._q = 0.0
        self._stored_since_norm = 0
        self._S = np.zeros((0, 0), dtype=dtype)
        self._norms = np.zeros(0)
        self._a = np.zeros(0)
        self._x = np.zeros(0, dtype=dtype)
        self._pending = None
        self._edits = 0

    # -- read-only views ------------------------------------------------------------------------

    @property
    def norm(self) -> float:
        """`||f||_H = |s| sqrt(a^T K a)`."""
        return abs(self._scale) * math.sqrt(max(self._q, 0.0))

    @property
    def coefficients(self) -> np.ndarray:
        """The coefficient of each support vector in `f` (`s a_i`), a copy."""
        return self._scale * self._a[: self.size]

    @property
    def vectors(self) -> np.ndarray:
        """The support vectors, one per row (a read-only view)."""
        view = self._S[: self.size, : self.n_inputs]
        view.flags.writeable = False
        return view

    # -- capacity -------------------------------------------------------------------------------

    def _reserve(self, rows: int, columns: int) -> None:
        old_rows, old_columns = self._S.shape
        if rows <= old_rows and _padded(columns) <= old_columns:
            return
        if rows > old_rows:
            doubled = 2 * old_rows if self.budget is None else min(2 * old_rows, self.budget + 1)
            rows = max(rows, doubled)
        rows = max(rows, old_rows)
        if _padded(columns) > old_columns:
            doubled = 2 * old_columns
            if self.max_inputs is not None:
                doubled = min(doubled, _padded(self.max_inputs))
            columns = max(_padded(columns), doubled)
        columns = max(columns, old_columns)
        S = np.zeros((rows, columns), dtype=self.dtype)
        S[: self.size, : self.n_inputs] = self._S[: self.size, : self.n_inputs]
        self._S = S
        for name in ("_norms", "_a"):
            grown = np.zeros(rows)
            grown[: self.size] = getattr(self, name)[: self.size]
            setattr(self, name, grown)
        x = np.zeros(columns, dtype=self.dtype)
        x[: self.n_inputs] = self._x[: self.n_inputs]
        self._x = x

    def start(self) -> None:
        """Allocate the initial buffers."""
        rows = 64 if self.budget is None else min(64, self.budget + 1)
        self._reserve(rows, _COLUMN_BLOCK)

    def add_inputs(self, new) -> None:
        """Extend every stored vector with new input columns, all 0: `new` is their number, or
        any sequence with one entry per column (the model passes their hashes).

        `f` does not change, so a row given to `value` can still be added, over the wider
        columns.
        """
        n_new = new if isinstance(new, (int, np.integer)) else len(new)
        if not n_new >= 0:
            raise ValueError(f"cannot add {n_new!r} input columns")
        self._reserve(max(self._S.shape[0], 1), self.n_inputs + int(n_new))
        self.n_inputs += int(n_new)
        self.version += 1

    # -- kernel rows ----------------------------------------------------------------------------

    def _exponents(self, x: np.ndarray, extra: float) -> np.ndarray:
        """`gamma * dist(x, x_i)` for every stored vector; `x` is a padded row of `dtype`.

        `extra` is `||x||^2` (RBF, unknown columns included) or the L1 norm of the unknown
        columns (Laplacian).
        """
        S = self._S[: self.size, : len(x)]
        if self.kernel == "rbf":
            distances = self._norms[: self.size] + extra
            distances -= 2.0 * (S @ x).astype(np.float64)
            np.maximum(distances, 0.0, out=distances)
        else:
            distances = np.abs(S - x).sum(axis=1).astype(np.float64)
            distances += extra
        distances *= self.gamma
        return distances

    def _row(self, row: np.ndarray, extra: float) -> tuple[np.ndarray, float]:
        """Exponents and `sum_i a_i k(x, x_i)` for one padded row."""
        if not self.size:
            return np.zeros(0), 0.0
        exponents = self._exponents(row, extra)
        return exponents, float(np.exp(-exponents) @ self._a[: self.size])

    def _load_row(self, x: np.ndarray, v, u: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """Copy `v` into the buffer `x`; the padded row and its `extra` for `_exponents`."""
        n = self.n_inputs
        v = np.asarray(v, dtype=np.float64)
        if v.shape != (n,):
            raise ValueError(f"expected a row of {n} values, got shape {v.shape}")
        x[:n] = v
        row = x[: _padded(n)]
        if self.kernel == "laplacian":
            return row, 0.0 if u is None else float(np.abs(u.astype(self.dtype)).sum())
        if u is None or not u.size:
            return row, float(_squared_norms(x[:n]))
        return row, float(_squared_norms(np.concatenate([x[:n], u.astype(self.dtype)])))

    def _stored_exponents(self, i: int) -> np.ndarray:
        """`gamma * dist(x_i, x_j)` for every stored `j` (0 at `j = i`)."""
        extra = self._norms[i] if self.kernel == "rbf" else 0.0
        exponents = self._exponents(self._S[i, : _padded(self.n_inputs)], extra)
        exponents[i] = 0.0
        return exponents

    # -- learning, one row at a time ------------------------------------------------------------

    def value(self, v: np.ndarray, u: np.ndarray | None = None, extra_hashes=None) -> float:
        """`f(v)` for a row over the known input columns (and `u`, the values of inputs the
        store does not know: its vectors are 0 there); remembers the row for `add`.
        `extra_hashes` (the names of `u`) is not needed: a support vector has 0 for every
        input it never saw."""
        u = None if u is None else np.asarray(u, dtype=np.float64)
        row, extra = self._load_row(self._x, v, u)
        exponents, total = self._row(row, extra)
        self._pending = (self._edits, self.n_inputs, exponents, total)
        return self._scale * total

    def scale(self, factor: float) -> None:
        """`f <- factor * f` (0 empties the store)."""
        factor = float(factor)
        if not math.isfinite(factor):
            raise ValueError(f"scale factor must be finite, got {factor!r}")
        if factor == 0.0:
            self.size = 0
            self._scale, self._q = 1.0, 0.0
            self._changed()
            return
        self._scale *= factor
        if not _SCALE_RANGE[0] <= abs(self._scale) <= _SCALE_RANGE[1]:
            self._a[: self.size] *= self._scale
            self._q *= self._scale * self._scale
            self._scale = 1.0

    def negate(self) -> None:
        """`f <- -f`."""
        self._scale = -self._scale

    def add(self, c: float, v: np.ndarray | None = None) -> None:
        """`f <- f + c k(x, .)` for the row `x` of the latest `value`, then keep to the budget.

        `v` is that row over every input column, including ones added since `value` (what the
        model passes); without it, the row as `value` got it.
        """
        pending = self._pending
        if pending is None or pending[0] != self._edits:
            raise RuntimeError("add() must follow value() of the same row, with no change between")
        c = float(c)
        if not math.isfinite(c):
            raise ValueError(f"coefficient must be finite, got {c!r}")
        _, known, exponents, total = pending
        n = self.n_inputs
        x = self._x[:n]
        if v is not None:
            v = np.asarray(v, dtype=np.float64)
            if v.shape != (n,):
                raise ValueError(f"expected a row of {n} values, got shape {v.shape}")
            row = v.astype(self.dtype)
            if not np.array_equal(row[:known], x[:known]):
                raise RuntimeError("add() got another row than the one given to value()")
            x[known:] = row[known:]
        elif known != n:
            raise RuntimeError("add() needs the row over the new input columns")
        self._pending = None
        if c == 0.0:
            return
        a_new = c / self._scale
        q = self._q + 2.0 * a_new * total + a_new * a_new
        if self.size:
            nearest = int(np.argmin(exponents))
            if np.array_equal(self._S[nearest, :n], x):
                # The same input again: its coefficient grows, nothing new is stored.
                self._a[nearest] += a_new
                self._q = q
                return
        self._reserve(self.size + 1, n)
        slot = self.size
        self._S[slot, :n] = x
        self._norms[slot] = _squared_norms(x)
        self._a[slot] = a_new
        self.size += 1
        self._changed()
        self._q = q
        if self.budget is not None and self.size > self.budget:
            self._maintain(np.append(exponents, 0.0))
        self._stored_since_norm += 1
        if self._stored_since_norm >= _RECOMPUTE_AFTER[self.kernel] * max(self.size, 64):
            self.recompute_norm()

    # -- budget maintenance ---------------------------------------------------------------------

    def _maintain(self, newest: np.ndarray | None = None) -> None:
        """Merge or remove the smallest coefficient; `newest` is the last vector's row, if known."""
        size = self.size
        a = self._a[:size]

        def row(i):
            return newest if newest is not None and i == size - 1 else self._stored_exponents(i)

        m = int(np.argmin(np.abs(a)))
        a_m = a[m]
        exponents_m = row(m)
        value_m = float(np.exp(-exponents_m) @ a)
        partners = np.flatnonzero(a * a_m > 0.0)
        partners = partners[partners != m]
        if self.policy == "merge" and partners.size:
            A, B, D = abs(a_m), np.abs(a[partners]), exponents_m[partners]
            h, p = _merge_points(self.kernel, A, B, D)
            loss = np.maximum(A * A + B * B + 2.0 * A * B * np.exp(-D) - p * p, 0.0)
            best = int(np.argmin(loss))
            n, h, a_z = int(partners[best]), float(h[best]), math.copysign(p[best], a_m)
            exponents_n = row(n)
            value_n = float(np.exp(-exponents_n) @ a)
            if self.kernel == "rbf":
                # Squared distances from a point of the segment, exactly.
                exponents_z = h * exponents_m + (1.0 - h) * exponents_n - h * (1.0 - h) * D[best]
                np.maximum(exponents_z, 0.0, out=exponents_z)
            else:
                exponents_z = exponents_m if h == 1.0 else exponents_n
            value_z = float(np.exp(-exponents_z) @ a)
            self._q += 2.0 * (a_z * value_z - a_m * value_m - a[n] * value_n) + float(loss[best])
            k = self.n_inputs
            z = h * self._S[m, :k].astype(np.float64) + (1.0 - h) * self._S[n, :k]
            self._S[n, :k] = z
            self._norms[n] = _squared_norms(self._S[n, :k])
            self._a[n] = a_z
            self.n_merges += 1
            self._record(float(loss[best]))
        else:
            self._q += a_m * (a_m - 2.0 * value_m)
            self.n_removals += 1
            self._record(a_m * a_m)
        self._drop(m)
        self._changed()

    def _changed(self) -> None:
        """Stored vectors changed: caches keyed on `version`, and the row `value` remembered,
        are stale."""
        self.version += 1
        self._edits += 1
        self._pending = None

    def _record(self, loss: float) -> None:
        self.degradation = self._scale * self._scale * loss
        self.total_degradation += self.degradation

    def _drop(self, i: int) -> None:
        last = self.size - 1
        k = self.n_inputs
        if i != last:
            self._S[i, :k] = self._S[last, :k]
            self._norms[i] = self._norms[last]
            self._a[i] = self._a[last]
        self.size = last

    def recompute_norm(self) -> None:
        """Set `||f||^2` to `s^2 a^T K a` computed from the vectors (rounding cannot drift)."""
        size = self.size
        S, norms = self._S[:size, : self.n_inputs], self._norms[:size]
        self._q = _quadratic_form(self.kernel, self.gamma, S, norms, self._a[:size])
        self._stored_since_norm = 0

    # -- inference on many rows -----------------------------------------------------------------

    def _check_rows(self, V, U):
        V = np.asarray(V, dtype=np.float64)
        if V.ndim != 2 or V.shape[1] != self.n_inputs:
            raise ValueError(f"expected rows of {self.n_inputs} values, got shape {V.shape}")
        if U is not None:
            U = np.asarray(U, dtype=np.float64)
            if U.ndim != 2 or len(U) != len(V):
                raise ValueError(f"unknown-column values of shape {U.shape} for {len(V)} rows")
            if not U.shape[1]:
                U = None
        return V, U

    def _kernels_many(self, V: np.ndarray, U: np.ndarray | None) -> np.ndarray:
        """`k(v, x_i)` for rows of at most `ROWS_PER_CHUNK`, computed in the storage precision
        (one row goes through `_row` instead, like `value`, in float64 after the product)."""
        dtype = np.dtype(self.dtype)
        X = V.astype(dtype)
        S = self._S[: self.size, : self.n_inputs]
        if self.kernel == "rbf":
            squared = np.einsum("ij,ij->i", X, X, dtype=np.float64)
            if U is not None:
                U32 = U.astype(dtype)
                squared += np.einsum("ij,ij->i", U32, U32, dtype=np.float64)
            E = X @ S.T
            E *= -2.0
            E += self._norms[: self.size].astype(dtype)
            E += squared.astype(dtype)[:, None]
            np.maximum(E, 0.0, out=E)
        else:
            E = np.empty((len(X), self.size), dtype=dtype)
            step = max(1, _BLOCK // max(1, self.size * self.n_inputs))
            for start in range(0, len(X), step):
                block = X[start : start + step, None, :] - S[None]
                E[start : start + step] = np.abs(block).sum(axis=2)
            if U is not None:
                E += np.abs(U.astype(dtype)).sum(axis=1)[:, None]
        E *= dtype.type(-self.gamma)
        return np.exp(E, out=E)

    def values(self, V: np.ndarray, U: np.ndarray | None = None, extra_hashes=None) -> np.ndarray:
        """`f` at each row of `V` (known columns), with `U` the values of columns the store does
        not know (its vectors are 0 there). A single row gets the bits `value` would give."""
        V, U = self._check_rows(V, U)
        out = np.zeros(len(V))
        if not self.size:
            return out
        if len(V) == 1:
            # A fresh buffer: the row remembered for add() stays as it is.
            x = np.zeros(_padded(self.n_inputs), dtype=self.dtype)
            row, extra = self._load_row(x, V[0], None if U is None else U[0])
            out[0] = self._scale * self._row(row, extra)[1]
            return out
        a = self._a[: self.size]
        for start in range(0, len(V), ROWS_PER_CHUNK):
            chunk = slice(start, start + ROWS_PER_CHUNK)
            K = self._kernels_many(V[chunk], None if U is None else U[chunk])
            out[chunk] = self._scale * (K.astype(np.float64) @ a)
        return out

    def gradients(self, V: np.ndarray, U: np.ndarray | None = None, extra_hashes=None):
        """`df/dv` and `df/du` at each row (a subgradient for the Laplacian kernel).

        RBF: `-2 gamma s sum_i a_i k(x, x_i) (x - x_i)`; Laplacian:
        `-gamma s sum_i a_i k(x, x_i) sign(x - x_i)`.
        """
        V, U = self._check_rows(V, U)
        G = np.zeros(V.shape)
        GU = np.zeros((len(V), 0 if U is None else U.shape[1]))
        if not self.size:
            return G, GU
        S = self._S[: self.size, : self.n_inputs].astype(np.float64)
        a = self._a[: self.size]
        for start in range(0, len(V), ROWS_PER_CHUNK):
            chunk = slice(start, start + ROWS_PER_CHUNK)
            W = self._kernels_many(V[chunk], None if U is None else U[chunk]) * a
            total = W.sum(axis=1)[:, None]
            if self.kernel == "rbf":
                factor = -2.0 * self.gamma * self._scale
                G[chunk] = factor * (total * V[chunk] - W @ S)
                if U is not None:
                    GU[chunk] = factor * total * U[chunk]
                continue
            factor = -self.gamma * self._scale
            rows = V[chunk]
            step = max(1, _BLOCK // max(1, self.size * self.n_inputs))
            for i in range(0, len(rows), step):
                signs = np.sign(rows[i : i + step, None, :] - S[None])
                block = slice(start + i, start + i + step)
                G[block] = factor * np.einsum("rb,rbn->rn", W[i : i + step], signs)
            if U is not None:
                GU[chunk] = factor * total * np.sign(U[chunk])
        return G, GU

    # -- persistence ----------------------------------------------------------------------------

    def state(self) -> tuple[dict, dict]:
        """JSON scalars and numpy arrays from which `restore` rebuilds this store exactly."""
        scalars = {
            "kernel": self.kernel,
            "gamma": self.gamma,
            "budget": self.budget,
            "policy": self.policy,
            "dtype": self.dtype,
            "size": self.size,
            "n_inputs": self.n_inputs,
            "scale": self._scale,
            "squared_norm": self._q,
            "stored_since_norm": self._stored_since_norm,
            "n_merges": self.n_merges,
            "n_removals": self.n_removals,
            "degradation": self.degradation,
            "total_degradation": self.total_degradation,
        }
        arrays = {
            "vectors": self._S[: self.size, : self.n_inputs].copy(),
            "alpha": self._a[: self.size].copy(),
        }
        return scalars, arrays

    def restore(self, scalars: dict, arrays: dict, n_inputs: int) -> None:
        """Rebuild from `state()` over `n_inputs` input columns; `ValueError` if inconsistent.

        Everything is checked against this store's own parameters and the arrays' shapes before
        anything is allocated or changed.
        """
        _check_state(self, scalars, arrays, n_inputs)
        size = scalars["size"]
        vectors, alpha = arrays["vectors"], arrays["alpha"]
        norms = _squared_norms(vectors)
        if size <= _CHECKED_NORM_SIZE:
            exact = _quadratic_form(self.kernel, self.gamma, vectors, norms, alpha)
            tolerance = 1e-6 * float(np.abs(alpha).sum()) ** 2
            if not abs(scalars["squared_norm"] - exact) <= tolerance:
                raise ValueError("the saved norm does not match the saved support vectors")
        self.size = self.n_inputs = 0
        self._S = np.zeros((0, 0), dtype=self.dtype)
        self._reserve(max(size, 1), n_inputs)
        self._S[:size, :n_inputs] = vectors
        self._norms[:size] = norms
        self._a[:size] = alpha
        self.size, self.n_inputs = size, n_inputs
        self._scale = float(scalars["scale"])
        self._q = float(scalars["squared_norm"])
        self._stored_since_norm = scalars["stored_since_norm"]
        self.n_merges, self.n_removals = scalars["n_merges"], scalars["n_removals"]
        self.degradation = float(scalars["degradation"])
        self.total_degradation = float(scalars["total_degradation"])
        self._changed()

    # -- scale-out ------------------------------------------------------------------------------

    @classmethod
    def average(cls, stores: list, weights: list[float]) -> SupportVectors:
        """`sum_k w_k f_k` as one store: the union of the vectors with `a <- w_k s_k a`.

        Equal vectors are combined first (exactly); then the budget is restored by the usual
        maintenance. The norm is computed from scratch, cross terms included. Input column `j`
        must mean the same input in every store (a store with fewer columns has 0 beyond them).
        """
        stores, weights = list(stores), [float(w) for w in weights]
        if not stores or len(stores) != len(weights):
            raise ValueError("average needs one weight per store, and at least one store")
        if not all(math.isfinite(w) for w in weights):
            raise ValueError("weights must be finite")
        first = stores[0]
        for other in stores[1:]:
            if (other.kernel, other.gamma, other.dtype) != (first.kernel, first.gamma, first.dtype):
                raise ValueError("only stores of the same kernel, gamma and dtype can be averaged")
        n = max(store.n_inputs for store in stores)
        total = sum(store.size for store in stores)
        vectors = np.zeros((total, n), dtype=first.dtype)
        alpha = np.zeros(total)
        at = 0
        for store, w in zip(stores, weights):
            vectors[at : at + store.size, : store.n_inputs] = store.vectors
            alpha[at : at + store.size] = w * store.coefficients
            at += store.size
        if total:
            vectors, inverse = np.unique(vectors, axis=0, return_inverse=True)
            alpha = np.bincount(inverse.ravel(), weights=alpha, minlength=len(vectors))
            keep = alpha != 0.0
            vectors, alpha = vectors[keep], alpha[keep]
        merged = cls(first.kernel, first.gamma, first.budget, first.policy, first.dtype,
                     first.max_inputs)
        merged.start()
        merged._reserve(max(len(vectors), 1), n)
        merged.n_inputs = n
        merged.size = len(vectors)
        merged._S[: merged.size, :n] = vectors
        merged._norms[: merged.size] = _squared_norms(vectors)
        merged._a[: merged.size] = alpha
        merged.recompute_norm()
        while merged.budget is not None and merged.size > merged.budget:
            merged._maintain()
        return merged


# Restoring a store re-checks its norm against a^T K a up to this many vectors.
_CHECKED_NORM_SIZE = 4096


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_state(store: SupportVectors, scalars: dict, arrays: dict, n_inputs: int) -> None:
    if not isinstance(scalars, dict) or not isinstance(arrays, dict):
        raise ValueError("support vector state must be a dict of scalars and a dict of arrays")
    for key in ("kernel", "gamma", "budget", "policy", "dtype"):
        if key not in scalars or scalars[key] != getattr(store, key):
            raise ValueError(
                f"the saved support vectors have {key} {scalars.get(key)!r}, "
                f"this model has {getattr(store, key)!r}"
            )
    counts = ("size", "n_inputs", "stored_since_norm", "n_merges", "n_removals")
    for key in counts:
        if not _is_int(scalars.get(key)) or scalars[key] < 0:
            raise ValueError(f"saved support vector field {key!r} must be an int >= 0")
    for key in ("scale", "squared_norm", "degradation", "total_degradation"):
        value = scalars.get(key)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number and math.isfinite(value)):
            raise ValueError(f"saved support vector field {key!r} must be a finite number")
    size = scalars["size"]
    if store.budget is not None and size > store.budget:
        raise ValueError(f"{size} saved support vectors exceed the budget of {store.budget}")
    if scalars["n_inputs"] != n_inputs:
        raise ValueError(
            f"the saved support vectors have {scalars['n_inputs']} input columns, "
            f"the model has {n_inputs}"
        )
    if not _SCALE_RANGE[0] <= abs(scalars["scale"]) <= _SCALE_RANGE[1]:
        raise ValueError("saved support vector scale is out of range")
    if scalars["squared_norm"] < -1e-9 * max(1.0, abs(scalars["squared_norm"])):
        raise ValueError("saved squared norm is negative")
    if min(scalars["degradation"], scalars["total_degradation"]) < 0:
        raise ValueError("saved weight degradation is negative")
    vectors, alpha = arrays.get("vectors"), arrays.get("alpha")
    if not isinstance(vectors, np.ndarray) or not isinstance(alpha, np.ndarray):
        raise ValueError("saved support vectors need the arrays 'vectors' and 'alpha'")
    if vectors.dtype != np.dtype(store.dtype) or vectors.shape != (size, n_inputs):
        raise ValueError(
            f"saved support vectors must be {store.dtype} of shape ({size}, {n_inputs}), "
            f"got {vectors.dtype} of shape {vectors.shape}"
        )
    if alpha.dtype != np.float64 or alpha.shape != (size,):
        raise ValueError(f"saved coefficients must be float64 of shape ({size},)")
    if not (np.isfinite(vectors).all() and np.isfinite(alpha).all()):
        raise ValueError("saved support vectors or coefficients are not finite")


def _quadratic_form(kernel: str, gamma: float, S: np.ndarray, norms: np.ndarray, a) -> float:
    """`a^T K a` over the vectors `S` (squared norms `norms`), in blocks of rows (no full kernel
    matrix in memory)."""
    size, n = S.shape
    if not size:
        return 0.0
    total = 0.0
    step = max(1, _BLOCK // max(1, size * (n if kernel == "laplacian" else 1)))
    for start in range(0, size, step):
        rows = slice(start, start + step)
        if kernel == "rbf":
            E = (S[rows] @ S.T).astype(np.float64)
            E *= -2.0
            E += norms
            E += norms[rows, None]
            np.maximum(E, 0.0, out=E)
        else:
            E = np.abs(S[rows, None, :] - S[None]).sum(axis=2).astype(np.float64)
        E *= -gamma
        total += float(a[rows] @ (np.exp(E, out=E) @ a))
    return total


def _merge_points(kernel: str, A: float, B: np.ndarray, D: np.ndarray):
    """For each partner: the `h` that maximises `p(h) = A k(x_m, z) + B k(x_n, z)`, and `p(h)`.

    `A = |a_m|`, `B = |a_n|`, `D = gamma dist(x_m, x_n)` (squared L2 for RBF, L1 for Laplacian),
    `z = h x_m + (1 - h) x_n`.
    """
    if kernel == "laplacian":
        at_m, at_n = A + B * np.exp(-D), A * np.exp(-D) + B
        return np.where(at_m > at_n, 1.0, 0.0), np.maximum(at_m, at_n)

    def p(h, A, B, D):
        return A * np.exp(-D * (1.0 - h) ** 2) + B * np.exp(-D * h * h)

    grid = np.linspace(0.0, 1.0, _GRID)
    P = p(grid, A, B[:, None], D[:, None])
    best = P.argmax(axis=1)
    h, value = grid[best], P[np.arange(len(B)), best]
    # The best point is within half a grid step of a grid point, and |p'| <= (A + B) sqrt(2D/e):
    # partners whose bound cannot beat the best value found so far need no refinement.
    spacing = 1.0 / (_GRID - 1)
    bound = value + (A + B) * np.sqrt(2.0 * D / math.e) * (spacing / 2)
    constant = A * A + B * B + 2.0 * A * B * np.exp(-D)
    refine = np.flatnonzero(constant - bound * bound <= (constant - value * value).min())
    if refine.size:
        Br, Dr = B[refine], D[refine]
        lo = np.maximum(h[refine] - spacing, 0.0)
        hi = np.minimum(h[refine] + spacing, 1.0)
        ratio = (math.sqrt(5.0) - 1.0) / 2.0
        c, d = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        pc, pd = p(c, A, Br, Dr), p(d, A, Br, Dr)
        for _ in range(_GOLDEN_STEPS):
            left = pc >= pd
            hi = np.where(left, d, hi)
            lo = np.where(left, lo, c)
            new = np.where(left, hi - ratio * (hi - lo), lo + ratio * (hi - lo))
            pn = p(new, A, Br, Dr)
            c, pc, d, pd = (
                np.where(left, new, d),
                np.where(left, pn, pd),
                np.where(left, c, new),
                np.where(left, pc, pn),
            )
        found = np.where(pc >= pd, c, d)
        found_value = np.maximum(pc, pd)
        better = found_value > value[refine]
        h[refine[better]] = found[better]
        value[refine[better]] = found_value[better]
    return h, value


# -- the certificate ------------------------------------------------------------------------------

_U = 2.0**-53  # unit roundoff of float64
# Bisection stops when the bracket is this tight, relative to its upper end.
_RADIUS_PRECISION = 1e-6
_BISECTION_STEPS = 60
# Points certified at once (their per-vector temporaries are points x vectors).
_CERTIFY_ROWS = 256
# Bounds evaluated in float64 from non-negative terms are inflated by this factor: far more
# than their rounding (a relative `gamma_n` for n terms), so the checks stay sound.
_BOUND_SLACK = 1 + 1e-9


def _gamma_n(n: int, u: float) -> float:
    """The classic bound on the relative error of a sum of `n` products rounded at `u`."""
    return n * u / (1.0 - n * u)


def support_radii(
    store: SupportVectors,
    margins: np.ndarray,
    X: np.ndarray,
    norm: str,
    *,
    bias: float = 0.0,
    scale: np.ndarray | None = None,
    bounds: tuple[float, float] | None = None,
) -> np.ndarray:
    """Certified radii of the support-vector model `g = f + bias` at the rows of `X`.

    Within the returned radius (in input units, in `norm`), no perturbation of the input,
    intersected with the box `bounds`, changes the sign of `g` as the store computes it.
    0 where the margin is not positive, `inf` where no perturbation can change it.

    Parameters
    ----------
    store
        The model's `SupportVectors`.
    margins
        `y g(x)` per row, as the model computed it.
    X
        The rows as the model feeds them to the store: inputs multiplied by `scale`. Columns
        past `store.n_inputs` are inputs the store does not know (its vectors are 0 there).
    norm
        'l2' or 'linf': the threat ball, in input units.
    bias
        The model's bias.
    scale
        `q`, the positive factor of each column (1 if None). An input ball of radius `r`
        becomes `|q_j delta_j| <= r q_j` (L-inf) or `||q * delta||_2 <= r max q` (L2).
    bounds
        `(lo, hi)`, the box every input lives in (for L-inf only; ignoring it is sound).

    Why it is sound. Let `x'` be any point of the threat set and `x~ = q x`, `x~' = q x'` the
    rows the store sees; let `g` be the model in exact arithmetic over the stored vectors and
    `g^` what the store computes. Four facts:

    1. Rounding: `|g^(x') - g(x')| <= err(x')`. Each distance is a dot product computed in the
       storage precision, off by at most `gamma_n sum_j |x~_j s_j|` (`gamma_n = n u / (1 - n u)`,
       any summation order), plus the rounding of `x~` to storage and of the few other
       operations; `|exp(-a) - exp(-b)| <= exp(-min(a, b)) (1 - exp(-|a - b|))` carries that
       to each kernel value, and the weighted sum adds `gamma_B sum |a_i|`. Every term grows
       with the radius, so its value at the ball's worst case, `err(r)`, bounds it.
    2. The kernel-norm bound: `f(x') - f(x) = <f, k(x~', .) - k(x~, .)>` (reproducing
       property), so by Cauchy-Schwarz `|f(x') - f(x)| <= ||f|| ||k(x~', .) - k(x~, .)|| =
       ||f|| sqrt(2 - 2 kappa(x~' - x~))`, and `kappa` only decreases with the distance, whose
       largest value over the ball is a closed form (or a sum over coordinates within the box).
       `||f||` here is an upper bound of `s^2 a^T K a` recomputed from the vectors in float64,
       with its own rounding added.
    3. The interval bound: the exact distance from `x~'` to each stored vector lies in an
       interval (the triangle inequality for an L2 ball; for an L-inf ball in the box, each
       coordinate independently, which is exact), so `f(x')` is at least the sum of the
       positive terms at their smallest kernel value and the negative ones at their largest.
    4. The first-order bound (RBF): by Taylor's theorem `f(x~') = f(x~) + grad f(x~) . d +
       d' H(xi) d / 2` with `d = x~' - x~` and `xi` on the segment, inside the ball. The
       linear term's worst case over the ball is exact (a dual norm, or per coordinate in the
       box), with the rounding of the computed gradient added; each vector's part of the
       curvature term is bounded over the ball (see `_taylor_slack`). Unlike (3), the linear
       term keeps the cancellation between vectors of both signs.

    With `m^ = y g^(x)` the margin the model computed, (1) and (2) give
    `y g^(x') >= m^ - err(0) - ||f|| sqrt(2 - 2 min kappa) - err(r)`, (1) and (3) give
    `y g^(x') >= y bias + (interval bound of y f) - err(r)`, and (1) and (4) give
    `y g^(x') >= m^ - err(0) - (linear worst case) - (curvature bound) - err(r)`: where one of
    them is positive for radius `r`, no point of the ball changes the computed prediction. Each
    bound grows with `r`; its radius is found by a bracketed search that only ever returns a
    radius at which the inequality was checked (so rounding in the search cannot make it
    unsound), and the largest of the three is returned. Sums of non-negative terms evaluated in
    float64 are inflated by a relative 1e-9, far more than their own rounding.

    """
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    X = np.asarray(X, dtype=np.float64)
    margins = np.asarray(margins, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] < store.n_inputs or margins.shape != (len(X),):
        raise ValueError(
            f"expected {len(margins)} rows of at least {store.n_inputs} columns, got {X.shape}"
        )
    q = np.ones(X.shape[1]) if scale is None else np.asarray(scale, dtype=np.float64)
    if q.shape != (X.shape[1],) or not (np.isfinite(q).all() and (q > 0).all()):
        raise ValueError(f"scale must hold {X.shape[1]} positive finite factors")
    if bounds is not None:
        lo, hi = bounds
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"bounds must be (lo, hi) with finite lo < hi, got {bounds!r}")
    if not np.isfinite(X).all():
        raise ValueError("rows to certify must be finite")
    radii = np.zeros(len(X))
    positive = margins > 0
    if not store.size:
        # f is 0: the prediction is the bias, which no input changes.
        radii[positive] = math.inf
        return radii
    certificate = _Certificate(store, q, norm, bounds, bias)
    for start in range(0, len(X), _CERTIFY_ROWS):
        rows = slice(start, start + _CERTIFY_ROWS)
        radii[rows] = certificate.radii(X[rows], margins[rows])
    return np.where(positive, radii, 0.0)


class _Certificate:
    """The pieces of `support_radii` that depend on the store, the threat and the scale only."""

    def __init__(self, store: SupportVectors, q, norm, bounds, bias):
        self.store, self.q, self.norm, self.bounds, self.bias = store, q, norm, bounds, bias
        self.rbf = store.kernel == "rbf"
        self.gamma = store.gamma
        size, n, d = store.size, store.n_inputs, len(q)
        S = np.zeros((size, d))
        S[:, :n] = store._S[:size, :n]
        self.S = S
        self.squared = np.einsum("ij,ij->i", S, S)
        self.a = store._a[:size].copy()
        self.s = store._scale
        self.abs_a = float(np.abs(self.a).sum())
        self.norm_bound = _norm_upper_bound(store)
        # Rounding of the deployed arithmetic: `u_s` of the storage, `ux` of a scaled input.
        # A squared distance is `||x||^2 + ||s||^2 - 2 x . s`: the product in storage precision
        # (error `gamma_n sum |x_j s_j|`), the norms summed in float64, then assembled (many
        # rows: in storage precision, one row: in float64); `exp` in storage precision.
        u_s = float(np.finfo(store.dtype).eps) / 2
        ux = u_s + 2 * _U
        terms = _padded(n) + (d - n) + 2
        self.u_s, self.ux = u_s, ux
        self.storage_sum = _gamma_n(terms + 1, u_s)
        self.c_input = 2.1 * ux + 1.1 * _gamma_n(d + 1, _U) + 3.1 * u_s + 2.1 * _U
        self.c_vector = 1.1 * _gamma_n(d + 1, _U) + 3.1 * u_s + 2.1 * _U
        self.c_product = 2.1 * _gamma_n(terms, u_s) + 2.1 * ux + 4.2 * u_s + 4.2 * _U
        self.sum_error = (_gamma_n(size + 2, _U) + 2 * _U) * 1.01 * self.abs_a
        self.exact_error = 2.1 * (_gamma_n(d + 3, _U) + 3 * _U)
        self.lengths = np.sqrt(self.squared)
        self.q_dot_abs = np.abs(S) @ q
        self.q_max = float(q.max())
        self.q_l2 = float(np.sqrt(q @ q))
        self.column_min = S.min(axis=0)
        self.column_max = S.max(axis=0)

    # -- the threat set -------------------------------------------------------------------------

    def _reach(self, idx, r):
        """At points `idx`: max ||delta~||_2^2 and max ||delta~||_1 over the ball of radius `r`."""
        q = self.q
        widen = 1.0 + _gamma_n(len(q) + 4, _U)
        if self.norm == "l2":
            return (r * self.q_max) ** 2 * widen, r * self.q_l2 * widen
        if self.bounds is None:
            return r * r * float(q @ q) * widen, r * float(q.sum()) * widen
        moves = np.minimum(r[:, None], self.room[idx]) * q
        return np.square(moves).sum(axis=1) * widen, moves.sum(axis=1) * widen

    def _saturation(self, idx):
        """The radius beyond which the ball covers the whole box (inf without a box)."""
        if self.norm == "l2" or self.bounds is None:
            return np.full(len(idx), math.inf)
        return self.room[idx].max(axis=1, initial=0.0)

    # -- per chunk of points --------------------------------------------------------------------

    def radii(self, x, margins):
        self.x = x
        if self.bounds is not None and self.norm == "linf":
            # How far each input can move within the box (raw units, rounded up).
            lo, hi = self.bounds
            raw = x / self.q
            self.room = np.maximum(np.abs(raw - lo), np.abs(hi - raw))
            self.room += 4 * _U * (np.abs(raw) + abs(lo) + abs(hi))
        x_squared = np.einsum("ij,ij->i", x, x)
        if self.rbf:
            distances = x_squared[:, None] + self.squared[None] - 2.0 * (x @ self.S.T)
            np.maximum(distances, 0.0, out=distances)
            slack = self.exact_error * (x_squared[:, None] + self.squared[None])
            self.near = np.sqrt(np.maximum(distances - slack, 0.0))
            self.far = np.sqrt(distances + slack) * (1 + 2 * _U)
            self.near *= 1 - 2 * _U
            self.products = np.abs(x) @ np.abs(self.S).T
            self.x_length = np.sqrt(x_squared)
        else:
            l1 = np.empty((len(x), self.store.size))
            step = max(1, _BLOCK // max(1, l1.shape[1] * x.shape[1]))
            for i in range(0, len(x), step):
                l1[i : i + step] = np.abs(x[i : i + step, None, :] - self.S[None]).sum(axis=2)
            self.x_l1 = np.abs(x).sum(axis=1)
            slack = 1.01 * _gamma_n(x.shape[1] + 2, _U) * l1 + 2 * _U * self.x_l1[:, None]
            self.near = np.maximum(l1 - slack, 0.0)
            self.far = l1 + slack
        self.error_at_x = self._rounding(np.zeros(len(x)), np.arange(len(x)))
        self.margins = margins * (1 - 4 * _U)
        radii = np.zeros(len(x))
        ok = np.flatnonzero(self.margins - 2 * self.error_at_x > 0)
        if not ok.size:
            return radii
        found = self._norm_radii(ok)
        n = self.store.n_inputs
        self.signs = np.sign(self.store.values(x[:, :n], x[:, n:]) + self.bias)
        found = np.maximum(found, self._beyond(self._interval_slack, ok, found))
        if self.rbf:
            self._prepare_taylor(x, x_squared, distances)
            found = np.maximum(found, self._beyond(self._taylor_slack, ok, found))
        radii[ok] = found
        return radii

    def _beyond(self, slack, idx, radii):
        """Per point, the largest radius above `radii` at which `slack > 0` (else 0)."""
        out = np.zeros(len(idx))
        candidates = np.flatnonzero(np.isfinite(radii) & (radii > 0))
        if candidates.size:
            at_start = slack(radii[candidates], idx[candidates])
            holds = at_start > 0
            candidates, at_start = candidates[holds], at_start[holds]
        if candidates.size:
            upper = np.full(len(candidates), math.inf)
            out[candidates] = self._largest(
                slack, idx[candidates], upper, radii[candidates], at_start
            )
        return out

    def _rounding(self, r, idx):
        """`err(r)`: the deployed model's rounding error anywhere in the ball, per point."""
        reach2, reach1 = self._reach(idx, r)
        gamma = self.gamma
        if self.rbf:
            rho = np.sqrt(reach2)[:, None]
            spread = rho * self.lengths[None]
            if self.norm == "linf":
                spread = np.minimum(spread, r[:, None] * self.q_dot_abs[None])
            x2 = np.square(self.x_length[idx][:, None] + rho)
            E = self.c_input * x2 + self.c_vector * self.squared[None]
            E += self.c_product * (self.products[idx] + spread)
            closest = np.square(np.maximum(self.near[idx] - rho, 0.0))
        else:
            reach = reach1[:, None]
            x1 = self.x_l1[idx][:, None] + reach
            E = 1.01 * self.storage_sum * (self.far[idx] + reach + self.ux * x1) + self.ux * x1
            closest = np.maximum(self.near[idx] - reach, 0.0)
        per_vector = np.exp(-gamma * np.maximum(closest - E, 0.0)) * -np.expm1(-gamma * E)
        per_vector += 10 * self.u_s  # the exponent's rounding and exp's own
        return abs(self.s) * (per_vector @ np.abs(self.a) + self.sum_error)

    # -- the kernel-norm bound ------------------------------------------------------------------

    def _norm_bound(self, r, idx):
        reach2, reach1 = self._reach(idx, r)
        reach = reach2 if self.rbf else reach1
        return self.norm_bound * np.sqrt(2.0 * -np.expm1(-self.gamma * reach)) * (1 + 8 * _U)

    def _norm_slack(self, r, idx):
        bound = self._norm_bound(r, idx) + self.error_at_x[idx] + self._rounding(r, idx)
        return self.margins[idx] - bound

    def _norm_radii(self, idx):
        """Largest radius at which the kernel-norm bound holds, per point (inf if every one)."""
        room = self.margins[idx] - 2 * self.error_at_x[idx]
        # Beyond this radius the bound fails even without the rounding's growth with r.
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = room / (self.norm_bound * (1 + 8 * _U))
            target = np.where(ratio**2 < 2, -np.log1p(-0.5 * ratio**2) / self.gamma, math.inf)
        upper = self._radius_for_reach(idx, target)
        return self._largest(self._norm_slack, idx, upper, np.zeros(len(idx)), room)

    def _radius_for_reach(self, idx, target):
        """The largest radius whose reach (squared L2 for RBF, L1 for Laplacian) is <= target."""
        ones = np.ones(len(idx))
        reach2, reach1 = self._reach(idx, ones)
        unit = reach2 if self.rbf else reach1
        if self.norm == "l2" or self.bounds is None:
            with np.errstate(divide="ignore", invalid="ignore"):
                radius = np.sqrt(target / unit) if self.rbf else target / unit
            return np.where(unit > 0, radius, math.inf)
        # Within the box the reach is piecewise in r: bisect it (cheap, no kernel values).
        saturation = self._saturation(idx)
        lo, hi = np.zeros(len(idx)), saturation.copy()
        for _ in range(_BISECTION_STEPS):
            mid = (lo + hi) / 2
            reach2, reach1 = self._reach(idx, mid)
            below = (reach2 if self.rbf else reach1) <= target
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        reach2, reach1 = self._reach(idx, saturation)
        return np.where((reach2 if self.rbf else reach1) <= target, math.inf, hi)

    # -- search ---------------------------------------------------------------------------------

    def _largest(self, slack, idx, upper, start, at_start):
        """Per point `idx`, the largest checked radius in `[start, upper]` where `slack > 0`.

        `slack(r, i)` is how much room the bound leaves at radii `r` for the points `i`
        (positive: certified), nonincreasing in `r`; it is positive at `start` (`at_start`).
        `upper` is a radius where it may fail (inf: search upwards, up to the box). The search
        is regula falsi with the Illinois fix, safeguarded by bisection. Only radii at which
        `slack > 0` was computed are returned (`inf` if it is over the whole box).
        """
        n = len(idx)
        lo, f_lo = start.astype(float), at_start.astype(float)
        hi, f_hi = upper.astype(float), np.full(n, -math.inf)
        everything = np.zeros(n, dtype=bool)
        saturation = self._saturation(idx)
        # Where the upper end is not known: double the radius until the bound fails, or the
        # ball covers the whole box.
        j = np.flatnonzero(~np.isfinite(hi))
        guess = np.minimum(np.maximum(2 * lo[j], 1e-6), saturation[j])
        for _ in range(200):
            if not j.size:
                break
            f = slack(guess, idx[j])
            holds = f > 0
            lo[j[holds]], f_lo[j[holds]] = guess[holds], f[holds]
            hi[j[~holds]], f_hi[j[~holds]] = guess[~holds], f[~holds]
            whole = holds & (guess >= saturation[j])
            everything[j[whole]] = True
            keep = holds & ~whole
            j, guess = j[keep], np.minimum(2 * guess[keep], saturation[j[keep]])
        everything[j] = True
        ends = np.flatnonzero(~everything & np.isinf(f_hi) & (hi > lo))
        if ends.size:
            f = slack(hi[ends], idx[ends])
            f_hi[ends] = f
            holds = f > 0
            everything[ends[holds & (hi[ends] == saturation[ends])]] = True
            lo[ends[holds]], f_lo[ends[holds]] = hi[ends[holds]], f[holds]
        side = np.zeros(n)
        for _ in range(_BISECTION_STEPS):
            search = np.flatnonzero(~everything & (hi - lo > _RADIUS_PRECISION * hi))
            if not search.size:
                break
            a, b, fa, fb = lo[search], hi[search], f_lo[search], f_hi[search]
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                guess = a + (b - a) * fa / (fa - fb)
            # Never closer to an end than half the precision wanted: a root that close is
            # then bracketed at once.
            nudge = np.minimum(0.5 * _RADIUS_PRECISION * b, (b - a) / 4)
            guess = np.where(np.isfinite(fb) & np.isfinite(guess), guess, (a + b) / 2)
            guess = np.clip(guess, a + nudge, b - nudge)
            f = slack(guess, idx[search])
            holds = f > 0
            up, down = search[holds], search[~holds]
            # Illinois: the end kept twice in a row counts half, so both ends keep moving.
            f_hi[up[side[up] > 0]] /= 2
            f_lo[down[side[down] < 0]] /= 2
            lo[up], f_lo[up], side[up] = guess[holds], f[holds], 1.0
            hi[down], f_hi[down], side[down] = guess[~holds], f[~holds], -1.0
        return np.where(everything, math.inf, lo)

    # -- the interval bound ---------------------------------------------------------------------

    def _interval_slack(self, r, idx):
        """How much room the per-vector interval bound leaves at radius `r` (points `idx`).

        RBF in an L-inf ball: each coordinate's range within the box, exactly (after a cheap
        screen). Otherwise the distance moves by at most the ball's reach (its L2 radius for
        RBF, its largest L1 length for the Laplacian kernel: exact for the largest L1
        distance without a box, loose for the smallest; exact ranges there would cost
        points x vectors x inputs per step of the search).
        """
        signs = self.signs[idx]
        x = self.x[idx]
        w = signs[:, None] * (self.s * self.a)[None]
        exact = self.norm == "linf" and self.rbf
        if exact:
            screened = self._screen(r, x, w, signs, idx)
            near = np.zeros((len(x), len(self.a)))
            far = np.full((len(x), len(self.a)), math.inf)
            keep = np.flatnonzero(screened)
            if keep.size:
                near[keep], far[keep] = self._coordinate_ranges(r[keep], x[keep])
        else:
            reach2, reach1 = self._reach(idx, r)
            reach = (np.sqrt(reach2) if self.rbf else reach1)[:, None]
            near = np.maximum(self.near[idx] - reach, 0.0)
            far = self.far[idx] + reach
            if self.rbf:
                near, far = np.square(near), np.square(far)
        smallest = np.exp(-self.gamma * far) * (1 - 5 * _U)
        largest = np.minimum(np.exp(-self.gamma * near) * (1 + 5 * _U), 1.0)
        lower = np.where(w > 0, w * smallest, w * largest).sum(axis=1)
        total = np.abs(w).sum(axis=1)
        lower -= _gamma_n(len(self.a) + 2, _U) * total
        base = signs * self.bias
        value = base + lower - 2 * _U * (np.abs(base) + total) - self._rounding(r, idx)
        if exact:
            value[~screened] = -math.inf
        return value

    # -- the first-order bound with a curvature remainder (RBF) ---------------------------------

    def _prepare_taylor(self, x, x_squared, distances):
        """The gradient of `f` at each point, and how far rounding can have moved it."""
        k = np.exp(-self.gamma * distances)
        W = k * (self.s * self.a)
        self.gradient = -2.0 * self.gamma * (W.sum(axis=1)[:, None] * x - W @ self.S)
        exact_error = self.exact_error * (x_squared[:, None] + self.squared[None])
        off = np.exp(-self.gamma * self.near**2) * -np.expm1(-self.gamma * exact_error) + 5 * _U
        sums = _gamma_n(len(self.a) + x.shape[1] + 4, _U)
        spread = off * self.far + sums * k * (np.sqrt(x_squared)[:, None] + self.lengths[None])
        self.gradient_error = 2.02 * self.gamma * abs(self.s) * (spread @ np.abs(self.a))

    def _taylor_slack(self, r, idx):
        """The room `f(x) + grad f(x) . delta - (curvature bound) ||delta||^2 / 2` leaves at `r`.

        Taylor's theorem: `f(x + delta) = f(x) + grad f(x) . delta + delta' H(xi) delta / 2` for
        some `xi` on the segment, inside the ball. For RBF, `delta' H_i delta = k_i(xi)
        (4 gamma^2 ((xi - s_i) . delta)^2 - 2 gamma ||delta||^2)` lies in
        `[-2 gamma k_i ||delta||^2, ||delta||^2 h(||xi - s_i||^2)]`, `h(t) = exp(-gamma t)
        (4 gamma^2 t - 2 gamma)`, which is largest at `t = 1.5 / gamma` (clipped to the
        distances the ball allows). The first-order term keeps the cancellation between
        vectors that the interval bound loses.
        """
        signs, x = self.signs[idx], self.x[idx]
        G = self.gradient[idx] * signs[:, None]
        reach2, _ = self._reach(idx, r)
        rho = np.sqrt(reach2)
        if self.norm == "l2":
            first = r * np.sqrt(np.square(G * self.q).sum(axis=1))
        elif self.bounds is None:
            first = r * (np.abs(G) @ self.q)
        else:
            center, width = self._box(r, x)
            low, high = center - width - x, center + width - x
            first = np.maximum(-G * low, -G * high).sum(axis=1)
        first = first * _BOUND_SLACK + self.gradient_error[idx] * rho
        near = np.maximum(self.near[idx] - rho[:, None], 0.0)
        far = self.far[idx] + rho[:, None]
        largest = np.minimum(np.exp(-self.gamma * near**2), 1.0)
        t = np.clip(1.5 / self.gamma, near**2, far**2)
        h = np.maximum(np.exp(-self.gamma * t) * (4 * self.gamma**2 * t - 2 * self.gamma), 0.0)
        w = signs[:, None] * (self.s * self.a)[None]
        bend = np.where(w > 0, 2 * self.gamma * w * largest, -w * h).sum(axis=1)
        curvature = 0.5 * reach2 * bend * _BOUND_SLACK
        room = self.margins[idx] - self.error_at_x[idx] - first - curvature
        return room - self._rounding(r, idx)

    def _box(self, r, x):
        """Per point and coordinate: the scaled interval `[c - w, c + w]` the input can reach."""
        q = self.q
        raw = x / q
        lo, hi = raw - r[:, None], raw + r[:, None]
        if self.bounds is not None:
            lo, hi = np.maximum(lo, self.bounds[0]), np.minimum(hi, self.bounds[1])
            lo, hi = np.minimum(lo, raw), np.maximum(hi, raw)
        slack = 4 * _U * (np.abs(raw) + r[:, None] + np.abs(lo) + np.abs(hi))
        lo, hi = (lo - slack) * q, (hi + slack) * q
        lo -= 2 * _U * np.abs(lo)
        hi += 2 * _U * np.abs(hi)
        center, width = (lo + hi) / 2, (hi - lo) / 2
        return center, width + 2 * _U * (np.abs(lo) + np.abs(hi))

    def _coordinate_ranges(self, r, x):
        """Exact smallest and largest squared distance to each vector over the box."""
        center, width = self._box(r, x)
        near = np.empty((len(x), len(self.a)))
        far = np.empty_like(near)
        step = max(1, _BLOCK // max(1, near.shape[1] * x.shape[1]))
        for i in range(0, len(x), step):
            rows = slice(i, i + step)
            gap = np.abs(center[rows, None, :] - self.S[None])
            w = width[rows, None, :]
            far[rows] = np.square(gap + w).sum(axis=2)
            near[rows] = np.square(np.maximum(gap - w, 0.0)).sum(axis=2)
        widen = _gamma_n(x.shape[1] + 5, _U)
        return near * (1 - widen), far * (1 + widen)

    def _screen(self, r, x, w, signs, idx):
        """A cheap necessary condition for the exact L-inf interval bound (skips hopeless points).

        Lower bounds of each largest distance and upper bounds of each smallest one from
        `sum_j w_j |c_j - s_j| >= max(|w . (c - s)|, sum_j (w_j / R_j) (c_j - s_j)^2)`, with
        `R_j >= |c_j - s_j|`; an optimistic bound, rounding does not matter here.
        """
        center, width = self._box(r, x)
        S = self.S
        c2 = np.einsum("ij,ij->i", center, center)
        cs = center @ S.T
        gap2 = np.maximum(c2[:, None] + self.squared[None] - 2 * cs, 0.0)
        linear = np.abs(np.einsum("ij,ij->i", width, center)[:, None] - width @ S.T)
        reach = np.maximum(np.abs(center - self.column_min), np.abs(center - self.column_max))
        ratio = np.divide(width, reach, out=np.zeros_like(width), where=reach > 0)
        quadratic = (
            np.einsum("ij,ij->i", ratio, center * center)[:, None]
            - 2 * (ratio * center) @ S.T
            + ratio @ np.square(S).T
        )
        spread = np.maximum(linear, quadratic)
        w2 = np.einsum("ij,ij->i", width, width)[:, None]
        far = gap2 + 2 * spread + w2
        near = np.maximum(np.minimum(self.far[idx] ** 2, gap2 - 2 * spread + w2), 0.0)
        optimistic = np.where(w > 0, w * np.exp(-self.gamma * far), w * np.exp(-self.gamma * near))
        total = signs * self.bias + optimistic.sum(axis=1)
        return total > -1e-9 * (np.abs(w).sum(axis=1) + abs(self.bias))


def _norm_upper_bound(store: SupportVectors) -> float:
    """An upper bound of `||f||`: `s^2 a^T K a` in float64 from the stored vectors, plus its
    rounding (each squared distance within `gamma_n (||s_i||^2 + ||s_j||^2)`, each kernel value
    within `gamma` times that, and the sums within `gamma_B`)."""
    size, n = store.size, store.n_inputs
    S = store._S[:size, :n].astype(np.float64)
    a = store._a[:size]
    squared = np.einsum("ij,ij->i", S, S)
    total = 0.0
    step = max(1, _BLOCK // max(1, size * (n if store.kernel == "laplacian" else 1)))
    for start in range(0, size, step):
        rows = slice(start, start + step)
        if store.kernel == "rbf":
            E = squared[rows, None] + squared[None] - 2.0 * (S[rows] @ S.T)
            np.maximum(E, 0.0, out=E)
        else:
            E = np.abs(S[rows, None, :] - S[None]).sum(axis=2)
        total += float(a[rows] @ (np.exp(-store.gamma * E) @ a))
    weight = float(np.abs(a).sum())
    if store.kernel == "rbf":
        distance_error = 2.1 * (_gamma_n(n + 3, _U) + 2 * _U)
        kernel_error = store.gamma * distance_error * 2 * weight * float(np.abs(a) @ squared)
    else:
        kernel_error = 1.01 * _gamma_n(n + 2, _U) * weight * weight
    rounding = kernel_error + (5 * _U + 2.02 * _gamma_n(size + 2, _U)) * weight * weight
    return abs(store._scale) * math.sqrt(max(total + rounding, 0.0)) * (1 + 4 * _U)
