"""The exponential average of the support-vector model's `f` over its recent steps.

SGD with a constant step ends each sample at a noisy iterate `f_t`: the last steps move `f` by
up to `step_size` near their samples. The average of the iterates, `fbar_t = (1 - rho_t)
fbar_{t-1} + rho_t f_t`, keeps what the steps agree on. `rho_t = max(2 / (t + 1), 1 / horizon)`:
first the polynomial-decay average of Shamir and Zhang (iterate `t` weighs in proportion to
`t`, so the early, poor iterates fade as the stream goes on), from `t = 2 horizon` an
exponential average of that horizon (a stream that drifts is followed).

`f_t` changes its vectors as it learns (a new vector, a merge, a removal), so the average keeps
vectors of its own: every vector of `f_t` (the same rows), and the vectors `f_t` gave up
("orphans"), whose averaged coefficients decay as `f_t` no longer feeds them. Each orphan
remembers the vector that replaced it in a merge (its "heir", `z`) and their kernel value.
Past `capacity` vectors, the orphan with the smallest averaged coefficient leaves and its
coefficient goes to its heir, projected: `a_o k(x_o, .) ~ a_o k(x_o, z) k(z, .)`, the best
multiple of `k(z, .)`. By then it has decayed (an orphan lives for about `capacity - budget`
maintenance events), so little is lost. Each learned sample costs one pass over the averaged
coefficients (O(capacity)), and a copied row per new vector of `f_t`; no kernel is computed.

The store of `f_t` (`river_advsvm.support.SupportVectors`) reports its events: `appended`,
`maintained`, `emptied`, `negate` and `add_inputs`; the model calls `update` once per learned
sample.

"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm.support import _MAX_SAVED_SQUARED_NORM
from river_advsvm.support_predict import KernelExpansion
from river_advsvm.support_store import _squared_norms

__all__ = ["AveragedVectors", "capacity_for"]


def capacity_for(budget: int | None) -> int | None:
    """How many vectors the average of a store with this budget keeps: half as many again
    (and at least one more, for the vector over the budget before a merge)."""
    return None if budget is None else budget + max(1, budget // 2)


class AveragedVectors(KernelExpansion):
    """`fbar = sum_i abar_i k(x_i, .)` over the vectors of a `SupportVectors` store and its
    orphans (see the module).

    Parameters
    ----------
    store
        The `SupportVectors` whose `f` is averaged; its vectors are taken as they are now, with
        averaged coefficients equal to theirs.
    horizon
        Samples over which the average runs as a mean, and then the horizon of the exponential
        average.

    """

    def __init__(self, store, horizon: int):
        super().__init__(store.kernel, store.gamma, capacity_for(store.budget), store.dtype,
                         store.max_inputs)
        self.horizon = horizon
        self.count = 0  # samples averaged
        self.bias = 0.0
        self.start()
        self.add_inputs(store.n_inputs)
        # Per vector of the store: its row here (entries past the store's size are stale). Per
        # row: whether a vector of the store is it, the row that replaced it in a merge (-1:
        # none) and their kernel value.
        self._row_of = np.zeros(0, dtype=np.intp)
        self._mapped = np.zeros(0, dtype=bool)
        self._heir = np.zeros(0, dtype=np.intp)
        self._heir_kernel = np.zeros(0)
        for i in range(store.size):
            self._append_row(store, i)

    # -- the store's events ---------------------------------------------------------------------

    def appended(self, store, slot: int) -> None:
        """The store's vector `slot` is new: a row of its own, at 0."""
        self._append_row(store, slot)
        self._evict()

    def maintained(self, store, m: int, partner: int | None, last: int,
                   partner_exponents: np.ndarray | None) -> None:
        """The store merged its vector `m` into `partner` (then at `z`) or removed it, and then
        moved its vector `last` to slot `m`. `partner_exponents` are `z`'s kernel exponents to
        the vectors before the move."""
        row_of = self._row_of
        row_m = int(row_of[m])
        self._mapped[row_m] = False
        if partner is not None:
            row_n = int(row_of[partner])
            self._mapped[row_n] = False
            row_z = self._append_row(store, m if partner == last else partner)
            for row, j in ((row_m, m), (row_n, partner)):
                self._heir[row] = row_z
                self._heir_kernel[row] = math.exp(-float(partner_exponents[j]))
            row_of[partner] = row_z
        if m != last:
            row_of[m] = row_of[last]
        self._evict()

    def emptied(self) -> None:
        """The store's `f` became 0: every row is an orphan, with no heir to go to."""
        self._mapped[: self.size] = False

    def negate(self) -> None:
        """`fbar <- -fbar` with `f` (the model's labels swapped sides): its coefficients and
        bias, in the units `update` adds to (the scale stays 1)."""
        self._a[: self.size] *= -1.0
        self.bias = -self.bias

    # -- averaging ------------------------------------------------------------------------------

    def update(self, store, bias: float) -> None:
        """One learned sample: `fbar <- (1 - rho) fbar + rho f` and the same for the bias."""
        self.count += 1
        rho = max(2.0 / (self.count + 1), 1.0 / self.horizon)
        a = self._a[: self.size]
        a *= 1.0 - rho
        size = store.size
        a[self._row_of[:size]] += (rho * store._scale) * store._a[:size]
        self.bias += rho * (bias - self.bias)
        if self.budget is None and self.size > size:
            # Without a budget no orphan leaves for room, and the closed form's shrink may
            # empty f at every sample (one orphan more each time, for ever): an orphan leaves
            # once its weight is below the rounding of the sum of them all.
            self._evict(below=np.finfo(np.float64).eps * float(np.abs(a).sum()))

    # -- persistence ----------------------------------------------------------------------------

    def state(self, store) -> tuple[dict, dict]:
        """JSON scalars and numpy arrays from which `restore` rebuilds this average (beside the
        store's own state)."""
        size = self.size
        scalars = {"horizon": self.horizon, "count": self.count, "bias": self.bias, "size": size}
        arrays = {"average_vectors": self._S[:size, : self.n_inputs].copy(),
                  "average_coefficients": self._a[:size].copy(),
                  "average_rows": self._row_of[: store.size].astype(np.int64),
                  "average_heirs": self._heir[:size].astype(np.int64),
                  "average_heir_kernels": self._heir_kernel[:size].copy()}
        return scalars, arrays

    @classmethod
    def restore(cls, store, scalars: dict, arrays: dict) -> AveragedVectors:
        """The average `state` saved, over the restored `store`; `ValueError` if it is not one
        this store can have (checked before anything is built)."""
        if not isinstance(scalars, dict):
            raise ValueError("the average's state must be a dict")
        horizon, count, bias = (scalars.get(k) for k in ("horizon", "count", "bias"))
        if not (type(horizon) is int and 1 <= horizon and type(count) is int and count >= 0
                and type(bias) is float and math.isfinite(bias)):
            raise ValueError("the average's horizon, count or bias is not valid")
        capacity = capacity_for(store.budget)
        try:
            vectors, a, rows, heirs, kernels = (arrays[k] for k in (
                "average_vectors", "average_coefficients", "average_rows", "average_heirs",
                "average_heir_kernels"))
        except KeyError as missing:
            raise ValueError(f"the average's state lacks {missing}") from None
        size = len(a)
        if not (vectors.dtype == np.dtype(store.dtype) and vectors.shape == (size, store.n_inputs)
                and a.shape == heirs.shape == kernels.shape == (size,)
                and rows.shape == (store.size,) and a.dtype == kernels.dtype == np.float64
                and rows.dtype == heirs.dtype == np.int64
                and (capacity is None or size <= capacity)):
            raise ValueError("the average's arrays do not fit the store")
        if not (np.isfinite(vectors).all() and np.isfinite(a).all()
                and ((kernels >= 0.0) & (kernels <= 1.0)).all()):
            raise ValueError("the average's values are not finite, or its kernels not in [0, 1]")
        norms = _squared_norms(vectors)
        if not (norms <= _MAX_SAVED_SQUARED_NORM).all():
            # As for the store's vectors: past this, the kernel values an orphan takes part in
            # are NaN (an exponent inf - inf), or 1 far from it.
            raise ValueError("the average's vectors are too large for their kernel values to be "
                             "computed")
        if not (((rows >= 0) & (rows < size)).all() and len(np.unique(rows)) == len(rows)
                and ((heirs >= -1) & (heirs < size) & (heirs != np.arange(size))).all()):
            raise ValueError("the average's rows or heirs are out of range")
        # Each chain of heirs ends (an eviction passes a row's heir to its children): after
        # 2^k >= size steps, by pointer doubling, every row is past its chain's end.
        ahead = heirs
        for _ in range(size.bit_length()):
            ahead = np.where(ahead >= 0, ahead[ahead], -1)
        if (ahead >= 0).any():
            raise ValueError("the average's heirs go round in a cycle")
        mapped = np.zeros(size, dtype=bool)
        mapped[rows] = True
        if (heirs[mapped] != -1).any() or not np.array_equal(vectors[rows], store.vectors):
            raise ValueError("the average's rows are not the store's vectors")
        average = cls(store, horizon)
        average.count, average.bias = count, bias
        average._load(vectors, a, store.n_inputs, norms)
        average._row_of = rows.astype(np.intp)
        average._mapped = mapped
        average._heir = heirs.astype(np.intp)
        average._heir_kernel = kernels.copy()
        return average

    # -- rows -----------------------------------------------------------------------------------

    def _append_row(self, store, slot: int) -> int:
        """A row for the store's vector `slot`, at 0; its index."""
        row = self.size
        self._append(store._S[slot, : self.n_inputs], 0.0, store._norms[slot])
        self._grow(row + 1)
        self._mapped[row], self._heir[row], self._heir_kernel[row] = True, -1, 1.0
        if slot >= len(self._row_of):
            grown = np.zeros(max(slot + 1, 2 * len(self._row_of)), dtype=np.intp)
            grown[: len(self._row_of)] = self._row_of
            self._row_of = grown
        self._row_of[slot] = row
        return row

    def _grow(self, rows: int) -> None:
        if rows > len(self._mapped):
            extra = max(rows, 2 * len(self._mapped)) - len(self._mapped)
            self._mapped = np.concatenate([self._mapped, np.zeros(extra, dtype=bool)])
            self._heir = np.concatenate([self._heir, np.full(extra, -1, dtype=np.intp)])
            self._heir_kernel = np.concatenate([self._heir_kernel, np.ones(extra)])

    def _evict(self, below: float | None = None) -> None:
        """Past the capacity, the orphan with the smallest averaged coefficient leaves; its
        coefficient goes to its heir, projected. Without a capacity, orphans whose averaged
        coefficient is at most `below` leave."""
        while (below is not None and self.size) or (
                self.budget is not None and self.size > self.budget):
            size = self.size
            orphans = (~self._mapped[:size]).nonzero()[0]
            if not len(orphans):
                return
            j = int(orphans[np.abs(self._a[orphans]).argmin()])
            if below is not None and not abs(self._a[j]) <= below:
                return
            heir = int(self._heir[j])
            if heir >= 0:
                self._a[heir] += self._a[j] * self._heir_kernel[j]
            # Rows whose heir was j inherit j's heir, through j.
            heirs = self._heir[:size]
            children = heirs == j
            self._heir_kernel[:size][children] *= self._heir_kernel[j]
            heirs[children] = heir
            last = size - 1
            self._drop(j)
            if j != last:
                self._mapped[j] = self._mapped[last]
                self._heir[j], self._heir_kernel[j] = self._heir[last], self._heir_kernel[last]
                heirs[:last][heirs[:last] == last] = j
                self._row_of[self._row_of == last] = j
            self._heir[last] = -1
