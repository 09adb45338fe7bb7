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
- The budget: when a `(B + 1)`-th vector arrives, the smallest coefficient is merged into a
  same-sign partner or dropped (`river_advsvm.support_budget`), from the kernel rows of the
  vectors involved. With many inputs (at least `GRAM_MIN_INPUTS`) and a budget of at most
  `GRAM_MAX_BUDGET`, those rows are read from a maintained matrix of the exponents
  `gamma dist(x_i, x_j)` between stored vectors (`(B + 1)^2` entries in the storage
  precision): a new vector's row is the one its margin computed, a merged vector's row is an
  exact combination of the rows of the two it replaces, so a merge costs no pass over the
  vectors. The matrix is part of the store's state (a restored store continues bit for bit),
  and it is recomputed from the vectors with the norm, so that rounding cannot drift.

Rows are learned one at a time through `value` (caches the kernel row), `scale` and `add`; the
arithmetic of a row depends on the store's state only, never on the batch it came in. On
OpenBLAS, a row's value does not change either when the row gains zero-valued columns that the
stored vectors do not have (RBF; for the Laplacian kernel, within a block of 16 columns).

This module is the learning step (`SupportVectors`); the vectors, their exponents and the kept
matrix are stored by `river_advsvm.support_store`, `f` at many rows is
`river_advsvm.support_predict`, the budget's decisions are `river_advsvm.support_budget`, and
a saved store is checked by `river_advsvm.support_saved` before it is loaded. The certificate
of this representation is `river_advsvm.certify.support_radii`.

"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm import checkpoint, inputs, support_budget, support_saved
from river_advsvm.kernels import KERNELS, ROUNDING_LIMIT
from river_advsvm.support_budget import POLICIES
from river_advsvm.support_predict import KernelExpansion
from river_advsvm.support_store import (DTYPES, GRAM_MAX_BUDGET, GRAM_MIN_INPUTS, SCALE_RANGE,
                                        _quadratic_form, _squared_norms, column_count,
                                        row_groups)

__all__ = ["DTYPES", "GRAM_MAX_BUDGET", "GRAM_MIN_INPUTS", "POLICIES", "PrecisionWarning",
           "SupportVectors"]

# ||f||^2 is recomputed from the vectors after this many stored vectors per vector held (RBF:
# one product S S^T; the Laplacian kernel's pairwise L1 distances cost more).
_RECOMPUTE_AFTER = {"rbf": 4, "laplacian": 32}
# ... and at once, in a store of up to `_SMALL_STORE` vectors (where that costs about a few
# kernel rows), after an update whose terms cancel to less than `_CANCELLED` of their size. (In
# a larger store the tolerance of a restore, relative to the coefficients' total magnitude,
# is far wider than a few updates' rounding.)
_CANCELLED = 0.5
_SMALL_STORE = 16
# `reprocess` steps on a stored vector whose margin is at least this (and below 1).
_REPROCESS_FLOOR = 0.0


class PrecisionWarning(UserWarning):
    """Stored inputs so far from 0, for the dtype and the bandwidth, that rounding swamps their
    squared distances: the kernel values are noise (see `SupportVectors.rounding`)."""


def _norm_after_step(q: float, a_new: float, total: float) -> tuple[float, float]:
    """`a^T K a` after `a_new` is added for a vector `x` with `total = sum_i a_i k(x, x_i)`,
    and the magnitude of the terms added up (see `SupportVectors._norm_updated`)."""
    cross = 2.0 * a_new * total
    return q + cross + a_new * a_new, abs(q) + abs(cross) + a_new * a_new


class SupportVectors(KernelExpansion):
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
    ):
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        if not (isinstance(gamma, (int, float)) and 0 < gamma < math.inf):
            raise ValueError(f"gamma must be a positive number, got {gamma!r}")
        if budget is not None and not (inputs.is_whole(budget) and budget >= 1):
            raise ValueError(f"budget must be a positive int or None, got {budget!r}")
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        super().__init__(kernel, gamma, budget, dtype)
        self.policy = policy
        self.n_merges = 0
        self.n_removals = 0
        self.degradation = 0.0
        self.total_degradation = 0.0
        # q = a^T K a, so ||f||^2 = s^2 q.
        self._q = 0.0
        self._stored_since_norm = 0
        self._pending = None
        self._edits = 0
        self._cursor = 0  # the stored vector `reprocess` visits next
        # The relative rounding of a stored vector's kernel exponents, once it passed
        # `ROUNDING_LIMIT` (None until then): inputs far from 0 for the dtype and bandwidth.
        self.rounding: float | None = None
        self._eps = float(np.finfo(dtype).eps)
        # The latest row `value` computed: (vectors' version and size, extra), the row, its
        # exponents and kernel values.
        self._last_row = None
        #: The average of `f` over its recent steps, when the model keeps one (see
        #: `river_advsvm.support_average`): told of every change of the vectors.
        self.averaged = None
        # Per vector: the same input came again with the other label (see `reprocess`).
        self._mixed = np.zeros(0, dtype=bool)

    _row_arrays = ("_norms", "_a", "_mixed")

    def __getstate__(self) -> dict:
        # The latest row `value` computed, and what `add` takes of it, serve within one call
        # or the next on the same row (recomputed to the same bits without them): not state.
        return {**super().__getstate__(), "_last_row": None, "_pending": None}

    def __setstate__(self, state: dict) -> None:
        # A store pickled before it kept which vectors hold both labels: none known to.
        self.__dict__.update(state)
        if "_mixed" not in state:
            self._mixed = np.zeros(len(self._a), dtype=bool)

    def _append(self, x: np.ndarray, a: float, norm: float | None = None) -> None:
        super()._append(x, a, norm)
        self._mixed[self.size - 1] = False

    def _drop(self, i: int) -> None:
        self._mixed[i] = self._mixed[self.size - 1]
        super()._drop(i)

    def _load(self, vectors: np.ndarray, alpha: np.ndarray, n_inputs: int,
              norms: np.ndarray | None = None, mixed: np.ndarray | None = None) -> None:
        super()._load(vectors, alpha, n_inputs, norms)
        self._mixed[: self.size] = False if mixed is None else mixed

    @property
    def mixed(self) -> np.ndarray:
        """Per support vector: True when its input came with both labels (its coefficient is
        their net sum, and its sign no label of it; `reprocess` leaves it alone), a copy."""
        return self._mixed[: self.size].copy()

    @property
    def norm(self) -> float:
        """`||f||_H = |s| sqrt(a^T K a)`."""
        return abs(self._scale) * math.sqrt(max(self._q, 0.0))

    # -- what the model asks of either representation (see `budget.FeatureStore`) ---------------

    n_features = 0

    @property
    def n_support_vectors(self) -> int:
        return self.size

    @property
    def maintenance(self) -> dict:
        """What keeping within the budget has cost: merges, removals, summed degradation."""
        return {"merges": self.n_merges, "removals": self.n_removals,
                "degradation": self.total_degradation}

    @staticmethod
    def max_state_bytes(budget: int | None, max_inputs: int, dtype: str) -> int:
        """The most bytes `state()` holds: vectors over at most `max_inputs` columns, their
        weights and ids, and the kernel exponents between them when the store keeps those.
        Without a budget, what one checkpoint may hold at all."""
        if budget is None:
            return checkpoint.MAX_ARRAY_BYTES
        itemsize = np.dtype(dtype).itemsize
        gram = itemsize * budget**2 if budget <= GRAM_MAX_BUDGET else 0
        return budget * (max_inputs * itemsize + 32) + gram + 4096

    # -- learning, one row at a time ------------------------------------------------------------

    def value(self, v: np.ndarray, u: np.ndarray | None = None, extra_hashes=None) -> float:
        """`f(v)` for a row over the known input columns (and `u`, the values of inputs the
        store does not know: its vectors are 0 there); remembers the row for `add`.
        `extra_hashes` (the names of `u`) is not needed: a support vector has 0 for every
        input it never saw."""
        u = None if u is None or not len(u) else np.asarray(u, dtype=np.float64)
        row, extra = self._load_row(self._x, v, u)
        # The same row again with the same vectors (a prediction, then learning the sample):
        # its kernel values are those computed last time; only the sum over `a` is new.
        key = (self.version, self.size, extra)
        last = self._last_row
        if last is not None and last[0] == key and np.array_equal(last[1], row):
            exponents, kernels = last[2], last[3]
            total = float(kernels @ self._a[: self.size]) if self.size else 0.0
        else:
            exponents, kernels, total = self._kernel_row(row, extra)
            self._last_row = (key, row.copy(), exponents, kernels)
        # For add: the row as given (passing it back spares the check that it is the same) and
        # its squared norm, when `extra` is that.
        alone = self.kernel == "rbf" and (u is None or not u.size)
        self._pending = (self._edits, self.n_inputs, exponents, total, v, extra if alone else None)
        return self._scale * total

    def latest_sum(self) -> float:
        """`sum_i a_i k(x, x_i)` (in the units of `a`) at the row of the latest `value`, as it
        computed it (recomputed if a coefficient changed since)."""
        pending = self._pending
        if pending is not None and pending[0] == self._edits:
            return pending[3]
        kernels = self._last_row[3]
        return float(kernels @ self._a[: len(kernels)])

    def latest_row(self) -> tuple:
        """The latest `value`'s `((version, size, extra), padded row, exponents, kernels)`:
        what another store over the same input columns needs to take the same row."""
        return self._last_row

    def gradient(self, v: np.ndarray) -> np.ndarray:
        """`df/dx` at the row of the latest `value`, from the kernel values it computed: one
        more product with the stored vectors. `v` is that row over every input column (new
        ones included; the vectors are 0 there).

        RBF: `-2 gamma s (sum_i a_i k_i x - sum_i a_i k_i x_i)`; Laplacian (a subgradient):
        `-gamma s sum_i a_i k_i sign(x - x_i)`.
        """
        pending = self._pending
        if pending is None or pending[0] != self._edits:
            raise RuntimeError("gradient() must follow value() of the same row, with no change "
                               "between")
        exponents, total = pending[2], pending[3]
        v = np.asarray(v, dtype=np.float64)
        n = self.n_inputs
        if not self.size:
            return np.zeros(len(v))
        # The weights in f's own units before the cast: `a` alone may be far past float32's
        # range while the lazy scale is small (f shrinks, and is added to, for many steps).
        weights = np.exp(-exponents)
        weights *= self._a[: self.size] * self._scale
        total *= self._scale
        S = self._S[: self.size, :n]
        if self.kernel == "rbf":
            grad = total * v
            grad[:n] -= weights.astype(self.dtype) @ S
            grad *= -2.0 * self.gamma
            return grad
        grad = np.sign(v) * total  # columns the vectors do not have (they are 0 there)
        grad[:n] = weights @ np.sign(v[:n] - S)
        grad *= -self.gamma
        return grad

    def scale(self, factor: float) -> None:
        """`f <- factor * f` (0 empties the store)."""
        factor = float(factor)
        if not math.isfinite(factor):
            raise ValueError(f"scale factor must be finite, got {factor!r}")
        if factor == 0.0:
            if self.averaged is not None:
                self.averaged.emptying()
            self.size = 0
            self._scale, self._q = 1.0, 0.0
            self._changed()
            return
        self._scale *= factor
        if not SCALE_RANGE[0] <= abs(self._scale) <= SCALE_RANGE[1]:
            if self.averaged is not None:
                self.averaged.rescaled(self._scale)
            self._a[: self.size] *= self._scale
            self._q *= self._scale * self._scale
            if self._pending is not None:  # the remembered sum over a, in a's new units
                edits, known, exponents, total, given, norm = self._pending
                self._pending = (edits, known, exponents, total * self._scale, given, norm)
            self._scale = 1.0

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
        _, known, exponents, total, given, norm = pending
        n = self.n_inputs
        x = self._x[:n]
        if v is not None and not (v is given and known == n):
            norm = None  # (over the columns added since, if any)
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
        q, terms = _norm_after_step(self._q, a_new, total)
        norm = float(_squared_norms(x)) if norm is None else norm
        if self.rounding is None and self.kernel == "rbf":
            # A squared distance is a difference of squared norms and a dot product, each
            # rounded by about eps times the norm: far from 0 the differences are lost.
            rounding = self.gamma * norm * self._eps
            if rounding > ROUNDING_LIMIT:
                self.rounding = rounding
        if self.size:
            nearest = int(exponents.argmin())
            # Equal vectors have equal squared norms, to the bit (the same sum of the same
            # numbers): the norms rule most vectors out without comparing them.
            if self._norms[nearest] == norm and np.array_equal(self._S[nearest, :n], x):
                # The same input again: its coefficient grows, nothing new is stored. Its
                # kernel value with itself is 1, where the row's, from rounded distances, can
                # be 1 - 1e-7 (float32): on a stream repeating one input whose coefficient
                # nearly cancels, that rounding was the whole change of the norm, and the
                # running norm drifted from a^T K a (its checkpoint was then refused).
                a_n = float(self._a[nearest])
                if a_n != 0.0 and (a_n > 0.0) != (a_new > 0.0):
                    self._mixed[nearest] = True  # (the other label, on the same input)
                q += 2.0 * a_new * a_n * -math.expm1(-float(exponents[nearest]))
                if self.averaged is not None:
                    self.averaged.coefficient_added(nearest, a_new)
                self._a[nearest] = a_n + a_new
                self._norm_updated(q, terms)
                return
        self._append(x, a_new, norm)
        if self.averaged is not None:
            self.averaged.appended(self.size - 1)
        G = self._gram
        over = self.budget is not None and self.size > self.budget
        if G is not None:  # the new vector's row is the one its margin computed
            slot = self.size - 1
            # (An exponent past float32's range is kept as +inf: a kernel value of 0.)
            with np.errstate(over="ignore"):
                G[slot, :slot] = exponents
                G[slot, slot] = 0.0
                if not over:  # (over the budget, `_maintain` writes the column if it stays)
                    G[:slot, slot] = exponents
        self._changed()
        self._q = q
        if over:  # (its change of the norm counts as one more term)
            self._maintain(exponents, column_pending=G is not None)
            terms += abs(self._q - q)
        self._norm_updated(self._q, terms)

    def add_inputs(self, new) -> None:
        super().add_inputs(new)
        if self.averaged is not None:
            self.averaged.add_inputs(new)

    def negate(self) -> None:
        super().negate()
        if self.averaged is not None:
            self.averaged.negate()

    def revisit_from(self, index: int) -> None:
        """Point `reprocess`'s cursor at stored vector `index`, modulo their number."""
        self._cursor = index % self.size if self.size else 0

    def reprocess(self, bias: float, step: float, slack: float = 0.0) -> float:
        """One hinge step on a vector already stored, in place (LaSVM's reprocess, as SGD).

        The vector `x_j` under a round-robin cursor is taken with the label its coefficient
        was added with, `y_j = sign(s a_j)` (a merge joins vectors of one sign, so the sign
        holds), and its margin `m = y_j (f(x_j) + bias) - slack`. If `0 <= m < 1`, `f <- f +
        step y_j k(x_j, .)`: its coefficient grows, no vector is added or merged, and
        `||f||^2` changes by `2 c f(x_j) + c^2` as in `add`. A vector the model now gets wrong
        (`m < 0`) is left alone: on a drifting stream it is of the old concept, on a noisy one
        likely mislabelled, and pushing it back up would undo what the newer samples taught.
        So is a vector whose input came with both labels (`mixed`): its sign is the net of
        them, no label, and steps by it pushed `f` towards whichever label led, for ever (on a
        stream of one input, 70% True, a model whose first label was False decided False at
        every sample, its `f` and bias drifting apart without bound).

        The margin is one dot product with the vector's row of kernel exponents: read from the
        kept matrix (started here if the store keeps one), or computed from the vectors (one
        pass over them, as for a sample's margin). Returns `y_j` if the step was taken, else 0.
        """
        size = self.size
        if not size:
            return 0.0
        j = self._cursor if self._cursor < size else 0
        self._cursor = j + 1 if j + 1 < size else 0
        a_j = self._a[j]
        if a_j == 0.0 or self._mixed[j]:
            return 0.0
        y_j = 1.0 if (a_j > 0.0) == (self._scale > 0.0) else -1.0
        G = self._started_gram()
        if G is not None:  # (the cast and the negation in one pass: both exact)
            kernels = np.negative(G[j, :size], dtype=np.float64)
        else:
            kernels = np.negative(self._stored_exponents(j))
        np.exp(kernels, out=kernels)
        total = float(kernels @ self._a[:size])
        if not _REPROCESS_FLOOR <= y_j * (self._scale * total + bias) - slack < 1.0:
            return 0.0
        a_new = step * y_j / self._scale
        if self.averaged is not None:
            self.averaged.coefficient_added(j, a_new)
        self._a[j] += a_new
        # The row `value` remembered has a stale sum over a: `add` after this is refused.
        self._edits += 1
        self._pending = None
        self._norm_updated(*_norm_after_step(self._q, a_new, total))
        return y_j

    def _norm_updated(self, q: float, terms: float) -> None:
        """Take `q` as the running `a^T K a` after an update whose terms added up to `terms` in
        magnitude. Each update rounds by a little of its terms, so the norm is recomputed
        from the vectors every so many updates, and in a small store at once when the terms
        cancel (`q` below `_CANCELLED` of them): then their rounding is much of what is left,
        as when a stream repeating one input flips its coefficient's sign, and the running
        norm would drift from `a^T K a` past what a restore accepts."""
        self._q = q
        self._stored_since_norm += 1
        due = self._stored_since_norm >= _RECOMPUTE_AFTER[self.kernel] * max(self.size, 64)
        if due or (abs(q) < _CANCELLED * terms and self.size <= _SMALL_STORE):
            self.recompute_norm()

    def recompute_norm(self) -> None:
        """Set `||f||^2` to `s^2 a^T K a` computed from the vectors (rounding cannot drift)."""
        size = self.size
        S, norms = self._S[:size, : self.n_inputs], self._norms[:size]
        self._q = _quadratic_form(self.kernel, self.gamma, S, norms, self._a[:size], self._gram)
        self._stored_since_norm = 0

    def _changed(self) -> None:
        """Stored vectors changed: caches keyed on `version`, and the row `value` remembered,
        are stale."""
        self.version += 1
        self._edits += 1
        self._pending = None

    # -- budget maintenance ---------------------------------------------------------------------

    def _maintain(self, newest: np.ndarray | None = None, column_pending: bool = False) -> None:
        """Merge or remove the smallest coefficient; `newest` is the last vector's row of
        exponents, if known.

        With `column_pending`, the kept matrix has the last vector's row but not its column
        (strided, so the costly write). It is never needed: the rows read are `m`'s and the
        partner's (their entry for the last vector is taken from its row), the partner's column
        is rewritten, and the last vector either leaves (usually: it is `m`) or moves to `m`'s
        place, row and column from its row (`_drop`)."""
        size = self.size
        last = size - 1
        G = self._started_gram()

        def row(i, out):
            if G is not None:
                out[:] = G[i, :size]
                if column_pending and i != last:
                    out[last] = G[last, i]
            elif newest is not None and i == last:
                out[:last] = newest
                out[last] = 0.0
            else:
                out[:] = self._stored_exponents(i)

        event = support_budget.plan(self.kernel, self.policy, self._a[:size], row)
        if self.averaged is not None:  # (before the vectors given up are overwritten)
            self.averaged.maintaining(event.m, event.partner, last, event.partner_exponents,
                                      event.coefficient)
        self._q += event.squared_norm_change
        n = event.partner
        if n is not None:
            k, h = self.n_inputs, event.h
            z = h * self._S[event.m, :k].astype(np.float64) + (1.0 - h) * self._S[n, :k]
            self._S[n, :k] = z
            self._norms[n] = _squared_norms(self._S[n, :k])
            self._a[n] = event.coefficient
            self._mixed[n] |= self._mixed[event.m]
            if G is not None:  # z's row, from the rows of the two vectors it replaces
                G[n, :size] = event.partner_exponents
                G[:size, n] = event.partner_exponents
                G[n, n] = 0.0
            self.n_merges += 1
        else:
            self.n_removals += 1
        self.degradation = self._scale * self._scale * event.loss
        self.total_degradation += self.degradation
        self._drop(event.m)
        self._changed()

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
            # Past the last vector (after a merge) it means the first, as in `reprocess`.
            "cursor": self._cursor if self._cursor < self.size else 0,
        }
        arrays = {
            "vectors": self._S[: self.size, : self.n_inputs].copy(),
            "alpha": self._a[: self.size].copy(),
        }
        if self._gram is not None:
            arrays["gram"] = self._gram[: self.size, : self.size].copy()
        if self._mixed[: self.size].any():
            arrays["mixed"] = self.mixed
        return scalars, arrays

    def restore(self, scalars: dict, arrays: dict, inputs) -> None:
        """Rebuild from `state()` over the input columns `inputs` (their number, or one entry
        per column, as for `add_inputs`); `ValueError` if inconsistent.

        Everything is checked against this store's own parameters and the arrays' shapes before
        anything is allocated or changed (`river_advsvm.support_saved`).
        """
        n_inputs = column_count(inputs)
        vectors, alpha, norms, gram = support_saved.checked_state(self, scalars, arrays, n_inputs)
        self.size = self.n_inputs = 0
        self._S = np.zeros((0, 0), dtype=self.dtype)
        self._load(vectors, alpha, n_inputs, norms, arrays.get("mixed"))
        self._gram = gram
        self._scale = float(scalars["scale"])
        self._q = float(scalars["squared_norm"])
        self._stored_since_norm = scalars["stored_since_norm"]
        self.n_merges, self.n_removals = scalars["n_merges"], scalars["n_removals"]
        self.degradation = float(scalars["degradation"])
        self.total_degradation = float(scalars["total_degradation"])
        self._cursor = scalars.get("cursor", 0)  # (not in checkpoints from before reprocess)
        self.averaged = None  # (its own state: the model restores it, if it keeps one)
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
        mixed = np.zeros(total, dtype=bool)
        at = 0
        for store, w in zip(stores, weights):
            vectors[at : at + store.size, : store.n_inputs] = store.vectors
            alpha[at : at + store.size] = w * store.coefficients
            mixed[at : at + store.size] = store.mixed
            at += store.size
        if total:
            inverse, vectors = row_groups(vectors)
            rows = len(vectors)
            # A vector is mixed when one of its copies was, or its copies' signs differ.
            mixed = (np.bincount(inverse, weights=mixed, minlength=rows) > 0) | (
                (np.bincount(inverse, weights=alpha > 0, minlength=rows) > 0)
                & (np.bincount(inverse, weights=alpha < 0, minlength=rows) > 0))
            alpha = np.bincount(inverse, weights=alpha, minlength=rows)
            keep = alpha != 0.0
            vectors, alpha, mixed = vectors[keep], alpha[keep], mixed[keep]
        merged = cls(first.kernel, first.gamma, first.budget, first.policy, first.dtype)
        merged.start()
        merged._load(vectors, alpha, n, mixed=mixed)
        merged.recompute_norm()
        while merged.budget is not None and merged.size > merged.budget:
            merged._maintain()
        return merged
