"""Support vectors a group of models shares: models over one basis average in O(B).

A *basis* is a set of `B` vectors `z_1..z_B` that every worker of a group holds. A model over
it is `f = sum_j a_j k(z_j, .)`, so the weighted average of such models is the weighted average
of their coefficient vectors: `B` numbers per model, no kernel evaluation, no budget maintenance.
The result is an ordinary support-vector model (its vectors are the basis), so its norm
`||f||_H^2 = a^T K a` is exact and the certificate works on it as on any other.

A model that has learned since (new vectors, vectors moved by merges) is brought back onto
the basis by the projection in the kernel's space, `project`: the `a` whose `f_a` is closest
to `f` in `||.||_H`, the solution of `K a = K_zx c` (`K` the basis' kernel matrix, `c` the
model's coefficients over its vectors `x_i`). What it loses, `||f - f_a||_H^2`, is returned
exactly, and bounds how far any value moves: `|f(x) - f_a(x)| <= ||f - f_a||_H` (a kernel
value is at most 1). Rows the model shares with the basis reuse columns of `K`, so the cost is
one kernel row per vector that changed, plus one `B x B` product.

`K` can be close to singular (vectors a merge put close together); a small ridge `mu` is added
until its Cholesky factorisation succeeds, and `a = (K + mu I)^-1 K_zx c`. That is the
projection up to `mu`; the loss returned is that of the `a` returned, whatever `mu` was.

Examples
--------

>>> import numpy as np
>>> from river_advsvm.support_basis import SharedBasis, kernel_matrix

>>> Z = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
>>> basis = SharedBasis("rbf", 0.5, Z)

A model over two of the basis' vectors lies in its span: the projection finds it exactly.

>>> a, loss = basis.project(Z[[2, 0]], np.array([0.5, -1.0]), squared_norm=None)
>>> (a.round(6) + 0.0).tolist(), round(loss, 9)
([-1.0, 0.0, 0.5], 0.0)

A vector outside the span loses the part of `k(x, .)` that the basis cannot express.

>>> x, c = np.array([[0.5, 0.5]]), np.array([1.0])
>>> a, loss = basis.project(x, c, squared_norm=1.0)
>>> f_a = kernel_matrix("rbf", 0.5, np.array([[0.5, 0.5]]), Z) @ a
>>> 0 < loss < 1, bool(np.isclose(1.0 - 2 * f_a[0] + a @ basis.gram @ a, loss))
(True, True)

"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from river_advsvm.kernels import KERNELS

__all__ = ["SharedBasis", "kernel_matrix"]

# The ridge starts here (relative to k(z, z) = 1) and grows tenfold until K + mu I factorises.
_RIDGE = 1e-10
_MAX_RIDGE = 1e-2
# Elements of the (rows x vectors x inputs) temporaries of the Laplacian kernel.
_BLOCK = 1 << 21


def kernel_matrix(kernel: str, gamma: float, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """`k(a_i, b_j)` for every row of `A` and of `B`, in float64."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if kernel == "rbf":
        E = A @ B.T
        E *= -2.0
        E += np.einsum("ij,ij->i", A, A)[:, None]
        E += np.einsum("ij,ij->i", B, B)[None, :]
        np.maximum(E, 0.0, out=E)
    else:
        E = np.empty((len(A), len(B)))
        step = max(1, _BLOCK // max(1, len(B) * A.shape[1]))
        for start in range(0, len(A), step):
            E[start : start + step] = np.abs(A[start : start + step, None, :] - B[None]).sum(axis=2)
    E *= -gamma
    return np.exp(E, out=E)


class SharedBasis:
    """The vectors a group shares, their kernel matrix, and the projection onto their span.

    Parameters
    ----------
    kernel
        'rbf' or 'laplacian', as the models'.
    gamma
        The models' kernel bandwidth (of their stores: inputs already scaled).
    vectors
        The basis, one vector per row (the models' storage dtype; kept as given).
    names
        What each column is (the models' input names), if the caller needs them: a model over
        other inputs is mapped onto these columns by name (`river_advsvm.streams.merge`).

    Attributes
    ----------
    gram
        `K`, the kernel matrix of the basis (float64, `B x B`).
    ridge
        The `mu` that made `K + mu I` positive definite.
    key
        A digest of the kernel, gamma and the vectors' bytes: two workers hold the same basis
        exactly when their keys are equal.

    """

    def __init__(self, kernel: str, gamma: float, vectors: np.ndarray, names: list | None = None):
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        if not (isinstance(gamma, (int, float)) and 0 < gamma < math.inf):
            raise ValueError(f"gamma must be a positive number, got {gamma!r}")
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or not len(vectors) or not np.isfinite(vectors).all():
            raise ValueError("a basis needs at least one finite vector, one per row")
        if names is not None and len(names) != vectors.shape[1]:
            raise ValueError(f"{len(names)} names for {vectors.shape[1]} columns")
        self.kernel, self.gamma = kernel, float(gamma)
        self.vectors = np.array(vectors, copy=True)
        self.vectors.flags.writeable = False
        self.names = None if names is None else list(names)
        digest = hashlib.sha256(f"{kernel}/{self.gamma!r}/{vectors.dtype}/{vectors.shape}/"
                                f"{self.names!r}".encode())
        digest.update(np.ascontiguousarray(self.vectors).tobytes())
        self.key = digest.hexdigest()
        self._rows = {row.tobytes(): j for j, row in enumerate(self.vectors)}
        if len(self._rows) != len(self.vectors):
            raise ValueError("the vectors of a basis must be distinct")
        with np.errstate(over="ignore", invalid="ignore"):
            self.gram = kernel_matrix(kernel, self.gamma, self.vectors, self.vectors)
        if not np.isfinite(self.gram).all():
            # Squared norms past a float's range (vectors of 1e160, beyond any model's inputs)
            # make kernel values NaN, and every projection onto the basis NaN with them.
            raise ValueError("the basis' vectors are too large for their kernel values to be "
                             "computed")
        self.ridge, self._inverse = _regularised_inverse(self.gram)

    @property
    def size(self) -> int:
        return len(self.vectors)

    def cross_kernels(self, vectors: np.ndarray, outside: np.ndarray | None = None) -> np.ndarray:
        """`k(z_j, x_i)` (`B x n`): columns of `gram` for rows equal to a basis vector, kernel
        evaluations for the others.

        `outside` is, for each `x_i`, what its columns beyond the basis' add to its distance
        from every basis vector (0 there): the squared L2 norm of those values (RBF) or their
        L1 norm (Laplacian).
        """
        vectors = np.asarray(vectors, dtype=self.vectors.dtype)
        if vectors.ndim != 2 or vectors.shape[1] != self.vectors.shape[1]:
            raise ValueError(f"expected vectors of {self.vectors.shape[1]} inputs, got shape "
                             f"{vectors.shape}")
        found = np.array([self._rows.get(row.tobytes(), -1) for row in vectors], dtype=np.intp)
        K = np.empty((self.size, len(vectors)))
        shared = found >= 0
        K[:, shared] = self.gram[:, found[shared]]
        if not shared.all():
            K[:, ~shared] = kernel_matrix(self.kernel, self.gamma, self.vectors,
                                          vectors[~shared])
        if outside is not None:
            K *= np.exp(-self.gamma * np.asarray(outside, dtype=np.float64))[None, :]
        return K

    def project(self, vectors: np.ndarray, coefficients: np.ndarray,
                squared_norm: float | None, outside: np.ndarray | None = None
                ) -> tuple[np.ndarray, float]:
        """The coefficients `a` over the basis closest to `f = sum_i c_i k(x_i, .)`, and the
        squared distance `||f - f_a||_H^2` (`squared_norm` is `||f||^2`; None: computed here
        from the vectors, one `n x n` kernel matrix, `outside` ignored). `outside`: see
        `cross_kernels`."""
        coefficients = _checked_coefficients(vectors, coefficients)
        if squared_norm is None:
            V = np.asarray(vectors, dtype=self.vectors.dtype)
            squared_norm = float(coefficients @ kernel_matrix(self.kernel, self.gamma, V, V)
                                 @ coefficients)
        return self.fit(self.cross_kernels(vectors, outside) @ coefficients, squared_norm)

    def fit(self, inner: np.ndarray, squared_norm: float) -> tuple[np.ndarray, float]:
        """`project` from the inner products `<k(z_j, .), f>` (`cross_kernels` times the
        coefficients: one kernel matrix can serve several functions of the same vectors)."""
        inner = np.asarray(inner, dtype=np.float64)
        if inner.shape != (self.size,) or not np.isfinite(inner).all():
            raise ValueError("one finite inner product per basis vector is needed")
        a = self._inverse @ inner
        loss = squared_norm - 2.0 * float(a @ inner) + self.squared_norm(a)
        return a, max(loss, 0.0)

    def closest(self, vectors: np.ndarray, coefficients: np.ndarray,
                outside: np.ndarray | None = None) -> np.ndarray:
        """The coefficients of `project`, without the loss (which needs `||f||^2`)."""
        coefficients = _checked_coefficients(vectors, coefficients)
        return self._inverse @ (self.cross_kernels(vectors, outside) @ coefficients)

    def squared_norm(self, a: np.ndarray) -> float:
        """`||sum_j a_j k(z_j, .)||_H^2 = a^T K a`."""
        return float(a @ self.gram @ a)


def _checked_coefficients(vectors: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    coefficients = np.asarray(coefficients, dtype=np.float64)
    if coefficients.shape != (len(vectors),) or not np.isfinite(coefficients).all():
        raise ValueError("one finite coefficient per vector is needed")
    return coefficients


def _regularised_inverse(gram: np.ndarray) -> tuple[float, np.ndarray]:
    """The smallest ridge of the sequence for which `gram + ridge I` factorises, and the
    inverse of that matrix (symmetric)."""
    ridge = _RIDGE
    eye = np.eye(len(gram))
    while True:
        try:
            np.linalg.cholesky(gram + ridge * eye)
            break
        except np.linalg.LinAlgError:
            if ridge >= _MAX_RIDGE:
                raise ValueError("the basis' kernel matrix is not positive definite "
                                 "(vectors too close together)") from None
            ridge *= 10.0
    inverse = np.linalg.inv(gram + ridge * eye)
    inverse += inverse.T
    inverse *= 0.5
    return ridge, inverse
