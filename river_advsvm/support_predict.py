"""`f` of the support-vector representation, and its gradient, at many rows at once.

`KernelExpansion` evaluates `f = s sum_i a_i k(x_i, .)` over the vectors of a
`river_advsvm.support_store.VectorStore` for a batch of rows: the kernel values of a chunk of
rows are one matrix product, computed in the storage precision, and the sum over vectors is in
float64. One row goes through the store's own row path instead, so that it gets the bits
`SupportVectors.value` gives it.

"""

from __future__ import annotations

import numpy as np

from river_advsvm.margin_predict import ROWS_PER_CHUNK
from river_advsvm.support_store import _BLOCK, VectorStore, _padded

__all__ = ["KernelExpansion"]


class KernelExpansion(VectorStore):
    """A `VectorStore` whose `f` and gradient can be read at many rows (`values`,
    `gradients`)."""

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
        with np.errstate(over="ignore"):  # (past the dtype's range: -inf, a kernel value of 0)
            E *= dtype.type(-self.gamma)
        return np.exp(E, out=E)


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

    def values(self, V: np.ndarray, U: np.ndarray | None = None, extra_hashes=None,
               weights: np.ndarray | None = None) -> np.ndarray:
        """`f` at each row of `V` (known columns), with `U` the values of columns the store does
        not know (its vectors are 0 there). A single row gets the bits `value` would give.
        `weights`, one per vector, replace `s a` (another function of the same vectors)."""
        V, U = self._check_rows(V, U)
        out = np.zeros(len(V))
        if not self.size:
            return out
        a, scale = (self._a[: self.size], self._scale) if weights is None else (weights, 1.0)
        if len(V) == 1:
            # A fresh buffer: the row remembered for add() stays as it is.
            x = np.zeros(_padded(self.n_inputs), dtype=self.dtype)
            row, extra = self._load_row(x, V[0], None if U is None else U[0])
            kernels = self._kernel_row(row, extra)[1]
            out[0] = scale * float(kernels @ a)
            return out
        for start in range(0, len(V), ROWS_PER_CHUNK):
            chunk = slice(start, start + ROWS_PER_CHUNK)
            K = self._kernels_many(V[chunk], None if U is None else U[chunk])
            out[chunk] = scale * (K.astype(np.float64) @ a)
        return out

    def gradients(self, V: np.ndarray, U: np.ndarray | None = None, extra_hashes=None,
                  weights: np.ndarray | None = None):
        """`df/dv` and `df/du` at each row (a subgradient for the Laplacian kernel); `weights`
        as for `values`.

        RBF: `-2 gamma s sum_i a_i k(x, x_i) (x - x_i)`; Laplacian:
        `-gamma s sum_i a_i k(x, x_i) sign(x - x_i)`.
        """
        V, U = self._check_rows(V, U)
        G = np.zeros(V.shape)
        GU = np.zeros((len(V), 0 if U is None else U.shape[1]))
        if not self.size:
            return G, GU
        S = self._S[: self.size, : self.n_inputs].astype(np.float64)
        a, scale = (self._a[: self.size], self._scale) if weights is None else (weights, 1.0)
        for start in range(0, len(V), ROWS_PER_CHUNK):
            chunk = slice(start, start + ROWS_PER_CHUNK)
            W = self._kernels_many(V[chunk], None if U is None else U[chunk]) * a
            total = W.sum(axis=1)[:, None]
            if self.kernel == "rbf":
                factor = -2.0 * self.gamma * scale
                G[chunk] = factor * (total * V[chunk] - W @ S)
                if U is not None:
                    GU[chunk] = factor * total * U[chunk]
                continue
            factor = -self.gamma * scale
            rows = V[chunk]
            step = max(1, _BLOCK // max(1, self.size * self.n_inputs))
            for i in range(0, len(rows), step):
                signs = np.sign(rows[i : i + step, None, :] - S[None])
                block = slice(start + i, start + i + step)
                G[block] = factor * np.einsum("rb,rbn->rn", W[i : i + step], signs)
            if U is not None:
                GU[chunk] = factor * total * np.sign(U[chunk])
        return G, GU
