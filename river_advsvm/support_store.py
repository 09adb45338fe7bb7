"""The stored vectors of the support-vector representation, and their kernel exponents.

`VectorStore` holds the vectors `x_i` (rows of one matrix in `float32` by default, half the
memory traffic of float64; padded with zero columns to blocks of 16), their squared norms, their
coefficients `a_i` and a global scale `s` of `f = s sum_i a_i k(x_i, .)`, and computes a row's
kernel exponents against them: for RBF, one matrix-vector product gives every distance, as
`||x - x_i||^2 = ||x||^2 + ||x_i||^2 - 2 x_i . x`.

With many inputs (at least `GRAM_MIN_INPUTS`) and a budget of at most `GRAM_MAX_BUDGET`, the
store also keeps the matrix of the exponents `gamma dist(x_i, x_j)` between its vectors
(`(B + 1)^2` entries in the storage precision), so that budget maintenance and reprocessing read
a vector's row instead of passing over the vectors. Only its rows are read; a vector's column
is written when the vector stays (see `river_advsvm.support.SupportVectors`).

The learning step is `river_advsvm.support.SupportVectors`; `f` at many rows is
`river_advsvm.support_predict.KernelExpansion`.

"""

from __future__ import annotations

import numpy as np

__all__ = ["DTYPES", "GRAM_MAX_BUDGET", "GRAM_MIN_INPUTS", "SCALE_RANGE", "VectorStore",
           "row_groups"]

DTYPES = ("float32", "float64")

#: The store's global scale is folded into its coefficients outside this range; within it,
#: `a_i = c / s` and `a^T K a` stay far from the float64 limits for any sane budget.
SCALE_RANGE = (1e-64, 1e64)

# Elements of the (rows x vectors x inputs) temporaries of the Laplacian kernel.
_BLOCK = 1 << 21
_COLUMN_BLOCK = 16
#: The exponent matrix between stored vectors is kept for budgets up to this (16 MB in float32)
#: and at least this many inputs: below, a pass over the vectors costs less than keeping it.
GRAM_MAX_BUDGET = 2048
GRAM_MIN_INPUTS = 128

def keeps_gram(budget: int | None, n_inputs: int) -> bool:
    """Whether a store of this budget over this many inputs keeps the exponents between its
    vectors in a `(budget + 1)^2` matrix (see `GRAM_MAX_BUDGET`)."""
    return budget is not None and budget <= GRAM_MAX_BUDGET and n_inputs >= GRAM_MIN_INPUTS


def _padded(n: int) -> int:
    return -(-n // _COLUMN_BLOCK) * _COLUMN_BLOCK


def column_count(columns) -> int:
    """How many input columns `columns` means: a number, or a sequence with one entry per
    column (the model passes their hashes)."""
    return columns if isinstance(columns, (int, np.integer)) else len(columns)


def row_groups(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Equal rows of `vectors` as one: each row's group, and the groups' rows in np.unique's
    order (as numbers: -0.0 and 0.0 are one). The rows are matched by their bytes first and
    only the distinct ones sorted: the models of a group share most of their vectors, and
    sorting every row cost more than the rest of their fold.

    >>> groups, rows = row_groups(np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 0.0], [-0.0, 2.0]]))
    >>> groups.tolist(), rows.tolist()
    ([1, 0, 1, 0], [[0.0, 2.0], [1.0, 0.0]])
    """
    seen: dict[bytes, int] = {}
    first = np.fromiter((seen.setdefault(row.tobytes(), len(seen)) for row in vectors),
                        dtype=np.intp, count=len(vectors))
    distinct = vectors[np.unique(first, return_index=True)[1]]  # (numbered in order)
    rows, order = np.unique(distinct, axis=0, return_inverse=True)
    return order.ravel()[first], rows


def _squared_norms(X: np.ndarray):
    """`||x||^2` of a row (a float), or of each row of a matrix (an array), in float64.

    The row's nonzero values, in their order, go through one float64 dot product: zero-valued
    columns, wherever they are, do not change the bits, so a row scored before and after the
    model learns a new column, a vector and its restored copy, and a row in `learn_one` and in
    a batch of `learn_many` (which knows more columns) all get the same norm.
    """
    if X.ndim == 2:
        return np.array([_squared_norms(row) for row in X], dtype=np.float64).reshape(len(X))
    nonzero = X[X != 0].astype(np.float64)
    return float(nonzero @ nonzero)


class VectorStore:
    """`f = s sum_i a_i k(x_i, .)` over stored vectors: their storage, and kernel exponents
    against them.

    The vectors are the rows of `_S` (in `dtype`), padded with zero columns to blocks of 16 and
    with spare rows (capacity doubles, up to `budget + 1`); `_norms` holds their squared norms,
    `_a` their coefficients and `_scale` the global scale `s`, in float64. Input columns are
    only ever added, 0 in every vector stored before.
    """

    #: The arrays with one entry per stored vector, besides the vectors.
    _row_arrays = ("_norms", "_a")

    def __init__(self, kernel, gamma, budget, dtype):
        self.kernel = kernel
        self.gamma = float(gamma)
        self.budget = budget
        self.dtype = dtype
        self.size = 0
        self.n_inputs = 0
        self.version = 0
        self._S = np.zeros((0, 0), dtype=dtype)
        self._norms = np.zeros(0)
        self._a = np.zeros(0)
        self._x = np.zeros(0, dtype=dtype)
        self._scale = 1.0  # f = s * sum_i a_i k(x_i, .)
        # gamma * dist(x_i, x_j) between stored vectors, when kept (see `_keeps_gram`).
        self._gram: np.ndarray | None = None

    def __getstate__(self) -> dict:
        # `_x` only carries a row within one call (`value`, then `add`): not state.
        return {**self.__dict__, "_x": np.zeros_like(self._x)}

    @property
    def vectors(self) -> np.ndarray:
        """The support vectors, one per row (a read-only view)."""
        view = self._S[: self.size, : self.n_inputs]
        view.flags.writeable = False
        return view

    @property
    def coefficients(self) -> np.ndarray:
        """The coefficient of each support vector in `f` (`s a_i`), a copy."""
        return self._scale * self._a[: self.size]

    def negate(self) -> None:
        """`f <- -f`."""
        self._scale = -self._scale

    # -- capacity -------------------------------------------------------------------------------

    def _reserve(self, rows: int, columns: int) -> None:
        old_rows, old_columns = self._S.shape
        if rows <= old_rows and _padded(columns) <= old_columns:
            return
        if rows > old_rows:
            doubled = 2 * old_rows if self.budget is None else min(2 * old_rows, self.budget + 1)
            rows = max(rows, doubled)
        rows = max(rows, old_rows)
        # Columns grow by blocks of 16, or by a 16th past 256 columns, with no more spare: the
        # vectors' rows stay (nearly) contiguous, which the kernel row's matrix-vector product
        # reads about 15% faster than rows with a spare tail (1,024 vectors of 608 inputs in
        # 832 columns). Inputs that keep arriving one at a time cost a copy of the vectors
        # every 16 of them, or every 6% more past 256: about 6% of learning's time on a stream
        # bringing a new input with every sample.
        if _padded(columns) > old_columns:
            columns = max(_padded(columns), _padded(old_columns + old_columns // 16))
        columns = max(columns, old_columns)
        S = np.zeros((rows, columns), dtype=self.dtype)
        S[: self.size, : self.n_inputs] = self._S[: self.size, : self.n_inputs]
        self._S = S
        for name in self._row_arrays:
            kept = getattr(self, name)
            grown = np.zeros(rows, dtype=kept.dtype)
            grown[: self.size] = kept[: self.size]
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
        n_new = column_count(new)
        if not n_new >= 0:
            raise ValueError(f"cannot add {n_new!r} input columns")
        self._reserve(max(self._S.shape[0], 1), self.n_inputs + int(n_new))
        self.n_inputs += int(n_new)
        self.version += 1

    def _append(self, x: np.ndarray, a: float, norm: float | None = None) -> None:
        """Store the vector `x` (over the known columns) with coefficient `a` (and squared
        norm `norm`, if known)."""
        n = self.n_inputs
        self._reserve(self.size + 1, n)
        slot = self.size
        self._S[slot, :n] = x
        self._norms[slot] = _squared_norms(x) if norm is None else norm
        self._a[slot] = a
        self.size += 1

    def _drop(self, i: int) -> None:
        last = self.size - 1
        k = self.n_inputs
        if i != last:
            self._S[i, :k] = self._S[last, :k]
            self._norms[i] = self._norms[last]
            self._a[i] = self._a[last]
            G = self._gram
            if G is not None:  # (the column from the row: a strided read less)
                G[i, :last] = G[last, :last]
                G[:last, i] = G[last, :last]
                G[i, i] = 0.0
        self.size = last

    def _load(self, vectors: np.ndarray, alpha: np.ndarray, n_inputs: int,
              norms: np.ndarray | None = None) -> None:
        """Hold exactly these vectors (over `n_inputs` columns) and coefficients (and squared
        norms, when already computed)."""
        size = len(vectors)
        self._reserve(max(size, 1), n_inputs)
        self._S[:size, :n_inputs] = vectors
        self._norms[:size] = _squared_norms(vectors) if norms is None else norms
        self._a[:size] = alpha
        self.size, self.n_inputs = size, n_inputs
        self._gram = None

    # -- kernel exponents -----------------------------------------------------------------------

    def _exponents(self, x: np.ndarray, extra: float) -> np.ndarray:
        """`gamma * dist(x, x_i)` for every stored vector; `x` is a padded row of `dtype`.

        `extra` is `||x||^2` (RBF, unknown columns included) or the L1 norm of the unknown
        columns (Laplacian).
        """
        S = self._S[: self.size, : len(x)]
        if self.kernel == "rbf":
            distances = self._norms[: self.size] + extra
            distances -= np.multiply(S @ x, 2.0, dtype=np.float64)
            np.maximum(distances, 0.0, out=distances)
        else:
            distances = np.abs(S - x).sum(axis=1).astype(np.float64)
            distances += extra
        distances *= self.gamma
        return distances

    def _kernel_row(self, row: np.ndarray, extra: float) -> tuple[np.ndarray, np.ndarray, float]:
        """Exponents, kernel values and `sum_i a_i k(x, x_i)` for one padded row."""
        if not self.size:
            return np.zeros(0), np.zeros(0), 0.0
        exponents = self._exponents(row, extra)
        kernels = np.negative(exponents)
        np.exp(kernels, out=kernels)
        return exponents, kernels, float(kernels @ self._a[: self.size])

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

    # -- the kept exponent matrix ---------------------------------------------------------------

    def _keeps_gram(self, n_inputs: int | None = None) -> bool:
        """Whether the exponents between stored vectors are kept in a matrix (see the module)."""
        return keeps_gram(self.budget, self.n_inputs if n_inputs is None else n_inputs)

    def _new_gram(self) -> np.ndarray:
        return np.zeros((self.budget + 1, self.budget + 1), dtype=self.dtype)

    def _started_gram(self) -> np.ndarray | None:
        """The kept matrix of kernel exponents, started now if this store keeps one and has
        none yet (the first merge or reprocess step needs it; `add` then fills in each new
        row); None if it keeps none."""
        size = self.size
        if self._gram is None and self._keeps_gram() and size <= self.budget + 1:
            self._gram = self._new_gram()  # (not in `average`, past the budget)
            _quadratic_form(self.kernel, self.gamma, self._S[:size, : self.n_inputs],
                            self._norms[:size], self._a[:size], self._gram)
        return self._gram


def _quadratic_form(kernel: str, gamma: float, S: np.ndarray, norms: np.ndarray, a,
                    gram: np.ndarray | None = None) -> float:
    """`a^T K a` over the vectors `S` (squared norms `norms`), in blocks of rows (no full kernel
    matrix in memory); the exponents `gamma dist(x_i, x_j)` are written into `gram` if given
    (0 on the diagonal)."""
    size, n = S.shape
    if not size:
        return 0.0
    total = 0.0
    step = max(1, _BLOCK // max(1, size * (n if kernel == "laplacian" else 1)))
    for start in range(0, size, step):
        rows = slice(start, min(start + step, size))
        if kernel == "rbf":
            E = (S[rows] @ S.T).astype(np.float64)
            E *= -2.0
            E += norms
            E += norms[rows, None]
            np.maximum(E, 0.0, out=E)
        else:
            E = np.abs(S[rows, None, :] - S[None]).sum(axis=2).astype(np.float64)
        E *= gamma
        # dist(x_i, x_i) = 0 exactly: the float32 products of large inputs would leave a
        # rounding error there that no kernel value of the model has.
        E[np.arange(len(E)), np.arange(start, start + len(E))] = 0.0
        if gram is not None:
            with np.errstate(over="ignore"):  # (past float32's range: +inf, a kernel value of 0)
                gram[rows, :size] = E
        np.negative(E, out=E)
        total += float(a[rows] @ (np.exp(E, out=E) @ a))
    return total


def exponent_rounding(kernel: str, gamma: float, S: np.ndarray, norms: np.ndarray) -> float:
    """A bound on how far two computations of one exponent `gamma dist(x_i, x_j)` over the
    rows `S` can differ by rounding in their dtype (a product with one row and one with a block
    of rows round differently): a sum of `n` terms rounds by at most `n u` times their absolute
    sum, `u` the dtype's unit roundoff. A kernel value differs by no more than its exponent."""
    size, n = S.shape
    if not size or not np.issubdtype(S.dtype, np.floating):
        return 0.0
    u = float(np.finfo(S.dtype).eps) / 2
    # |x_i . x_j| <= max ||x||^2 (RBF); |x_i - x_j|_1 <= 2 max |x|_1 (Laplacian)
    terms = 2.0 * (float(norms.max()) if kernel == "rbf" else float(np.abs(S).sum(axis=1).max()))
    return 2.0 * gamma * n * u * terms
