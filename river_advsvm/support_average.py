"""The average of the support-vector model's `f` over its recent steps.

SGD with a constant step ends each sample at a noisy iterate `f_t`: the last steps move `f` by
up to `step_size` near their samples. The average of the iterates
(`river_advsvm.iterate_average`) keeps what the steps agree on.

`f_t` changes its vectors as it learns (a new vector, a merge, a removal). The average shares
the vectors `f_t` holds, with averaged coefficients of its own, and keeps the vectors `f_t`
gave up ("orphans"), whose averaged coefficients decay as `f_t` no longer feeds them:

    fbar = sum_i c_i k(x_i, .) + sum_o a_o k(x_o, .)

over the store's vectors `x_i` and the orphans `x_o`. Each orphan remembers the vector that
replaced it in a merge (its "heir", `z`, a vector of the store or by then an orphan itself) and
their kernel value. Past `orphan_capacity` orphans, the one with the smallest averaged
coefficient leaves and its coefficient goes to its heir, projected: `a_o k(x_o, .) ~ a_o
k(x_o, z) k(z, .)`, the best multiple of `k(z, .)`. By then it has decayed (an orphan lives
for about `orphan_capacity / 2` maintenance events), so little is lost.

Sharing the vectors makes the average's decision at a row the store's own kernel row (which
`SupportVectors.value` computes, and learning reuses) times `c`, plus one row over the
orphans: predicting then learning a sample costs the store's row and the orphans' (at most
half the budget); no kernel is computed otherwise.

The averaged coefficients are kept as `c = A c_base + B a` over the store's own coefficients
`a` (its `f = s sum_i a_i k(x_i, .)`), with two scalars: a step `c <- (1 - rho) c + rho s a`
is `A <- (1 - rho) A`, `B <- (1 - rho) B + rho s`, whatever the number of vectors, and a change
of one `a_i` (a new vector, a revisit, a merge) moves `c_base_i` so that `c_i` stays (the
averaged SGD of Xu 2011 and Bottou 2012, for a kernel expansion). When `A` becomes too small to
divide by (its first step has `rho = 1`), `c` is written out into `c_base` again.

The store of `f_t` (`river_advsvm.support.SupportVectors`) reports its events: `appended`,
`maintaining` (before a merge or removal), `emptying`, `negate` and `add_inputs`; the model
calls `update` once per learned sample.

"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm.iterate_average import IterateAverage
from river_advsvm.support_predict import KernelExpansion
from river_advsvm.support_saved import max_saved_size, vector_sizes
from river_advsvm.support_store import _squared_norms

#: Below this `|A|` the averaged coefficients are written out (`c_base <- c`, `A = 1`, `B = 0`):
#: `c_base` holds `(c - B a) / A`, which must stay far from float64's range. With
#: `rho = 1 / horizon` that is once in about 230 horizons.
_SMALLEST_BASE_WEIGHT = 1e-100
#: ... and past this `|B / s|`. `B` follows the store's scale `s` over the horizon, so `B a` is
#: about `f`'s coefficients (and `c` rounds as they do) while `s` shrinks slowly; where `s`
#: shrinks faster than the average forgets (a diminishing step, the closed form's shrink), `B a`
#: would grow past `c`, and `c = A c_base + B a` lose its digits to their difference.
_LARGEST_STORE_WEIGHT = 4.0

__all__ = ["AveragedVectors", "orphan_capacity", "saved_expansion", "saved_without_orphans"]


def orphan_capacity(budget: int | None) -> int | None:
    """How many vectors given up by a store with this budget its average keeps: half the
    budget (at least 1); no bound without a budget."""
    return None if budget is None else max(1, budget // 2)


def saved_expansion(arrays: dict) -> tuple[np.ndarray, np.ndarray]:
    """`fbar` of a saved model (the arrays of its checkpoint: the store's `vectors` and the
    average's `state`): its vectors, the store's then the orphans, and their averaged
    coefficients."""
    vectors = np.concatenate([arrays["vectors"], arrays["average_orphans"]])
    return vectors, np.concatenate([arrays["average_coefficients"],
                                    arrays["average_orphan_coefficients"]])


def saved_without_orphans(coefficients: np.ndarray, n_inputs: int, dtype) -> dict:
    """The arrays of `AveragedVectors.state` for an average whose coefficients over the
    store's vectors are `coefficients` and that keeps no vectors of its own (a group's fold,
    whose vectors are the store's)."""
    return {"average_coefficients": np.asarray(coefficients, dtype=np.float64),
            "average_orphans": np.zeros((0, n_inputs), dtype=dtype),
            "average_orphan_coefficients": np.zeros(0),
            "average_heirs": np.zeros(0, dtype=np.int64),
            "average_heir_kernels": np.zeros(0)}


def _store_heir(slot: int) -> int:
    """The heir code of the store's vector `slot` (codes >= 0 are orphans, -1 is none)."""
    return -2 - slot


class AveragedVectors(IterateAverage):
    """`fbar`, the average of a `SupportVectors` store's `f` over its recent steps (see the
    module): averaged coefficients of the store's vectors, and orphans.

    Parameters
    ----------
    store
        The `SupportVectors` whose `f` is averaged, from now on (its vectors start with
        averaged coefficients 0: the first `update` sets them to `f`'s).
    horizon
        The horizon of the exponential average, in learned samples.

    """

    def __init__(self, store, horizon: int):
        super().__init__(store, horizon)
        # The averaged coefficients of the store's vectors are `A c_base + B a` (see the
        # module; entries past its size are stale); they start at 0.
        self._base = np.zeros(max(store.size, 1))
        self._base_weight, self._store_weight = 1.0, 0.0
        # The store's vector added since the last step (its averaged coefficient is 0), or -1.
        self._fresh = -1
        capacity = orphan_capacity(store.budget)
        # (room for the two vectors a merge gives up before one leaves)
        self.orphans = KernelExpansion(store.kernel, store.gamma,
                                       None if capacity is None else capacity + 1,
                                       store.dtype)
        self.orphans.start()
        self.orphans.add_inputs(store.n_inputs)
        self.capacity = capacity
        # Per orphan: its heir (a code: >= 0 an orphan, `_store_heir(slot)` a vector of the
        # store, -1 none) and their kernel value.
        self._heir = np.zeros(0, dtype=np.intp)
        self._heir_kernel = np.zeros(0)

    @property
    def coefficients(self) -> np.ndarray:
        """The averaged coefficients of the store's vectors, then of the orphans."""
        return np.concatenate([self.shared, self.orphans._a[: self.orphans.size]])

    @property
    def shared(self) -> np.ndarray:
        """The averaged coefficients of the store's vectors (a new array)."""
        size = self.store.size
        c = _written_out(self._base[:size], self._base_weight, self._store_weight,
                         self.store._a[:size])
        if 0 <= self._fresh < size:
            c[self._fresh] = 0.0
        return c

    def _shared_one(self, j: int) -> float:
        """The averaged coefficient of the store's vector `j`."""
        if j == self._fresh:  # (0 exactly: the written-out form rounds)
            return 0.0
        return self._base_weight * float(self._base[j]) + self._store_weight * float(
            self.store._a[j])

    def _keep_form(self) -> None:
        """Write `c` out (`c_base <- c`, `A = 1`, `B = 0`) if `B` outgrew the store's scale
        since the last step (a shrink within a step, as the closed form's, before a change of
        `a`): a change then moves `c_base` by `B / A` times it, which `B a` would cancel."""
        if abs(self._store_weight) > _LARGEST_STORE_WEIGHT * abs(self.store._scale):
            self._write_out()

    def _write_out(self) -> None:
        size = self.store.size
        self._base[:size] = self.shared
        self._base_weight, self._store_weight = 1.0, 0.0

    def _set_shared(self, j: int, value: float, a_j: float) -> None:
        """Make the averaged coefficient of the store's vector `j` `value`, where its
        coefficient in the store is (or is about to be) `a_j`."""
        self._base[j] = (value - self._store_weight * a_j) / self._base_weight

    def _add_to_shared(self, j: int, value: float) -> None:
        """Add `value` to the averaged coefficient of the store's vector `j`."""
        if j == self._fresh:
            self._fresh = -1
        self._base[j] += value / self._base_weight

    # -- the store's events ---------------------------------------------------------------------

    def appended(self, slot: int) -> None:
        """The store's vector `slot` is new: its averaged coefficient starts at 0."""
        if slot >= len(self._base):
            self._base = np.concatenate([self._base, np.zeros(max(slot + 1, len(self._base)))])
        self._keep_form()  # (the new slot's entry is set next, whatever it held)
        self._set_shared(slot, 0.0, float(self.store._a[slot]))
        self._fresh = slot

    def coefficient_added(self, j: int, change: float) -> None:
        """The store is about to add `change` to its coefficient `a_j`: the averaged
        coefficient stays."""
        self._keep_form()
        self._base[j] -= self._store_weight * change / self._base_weight

    def rescaled(self, factor: float) -> None:
        """The store is about to multiply its coefficients by `factor` (taking its global
        scale into them): the averaged coefficients stay."""
        self._store_weight /= factor

    def maintaining(self, m: int, partner: int | None, last: int,
                    partner_exponents: np.ndarray | None, coefficient: float = 0.0) -> None:
        """The store is about to merge its vector `m` into `partner` (at `z`, whose coefficient
        in the store becomes `coefficient`) or remove it, and then to move its vector `last` to
        slot `m`. `partner_exponents` are `z`'s kernel exponents to the vectors as they are
        now."""
        self._keep_form()
        before = self.orphans.size
        z = None if partner is None else (m if partner == last else partner)
        # The vectors f_t gives up: m and the partner. The vector just added (usually m) has
        # no averaged weight yet and no orphan follows it: as an orphan it would be the first
        # to leave, passing nothing on.
        leaving = [j for j in (m, partner)
                   if j is not None and not (j == m == last and m == self._fresh)]
        weights = [self._shared_one(j) for j in leaving]
        kernels = [1.0 if z is None else math.exp(-float(partner_exponents[j])) for j in leaving]
        passed = self._leaving_at_once(before, weights)
        # Where the orphans that followed each leaving vector go: its orphan's row, or, for a
        # vector that leaves at once, its heir (with their kernel value).
        heir = -1 if z is None else _store_heir(z)
        gone: dict = {}
        for j, weight, kernel, at_once in zip(leaving, weights, kernels, passed):
            if at_once:
                gone[_store_heir(j)] = (heir, kernel)
            else:
                row = self._orphan(self.store._S[j, : self.store.n_inputs],
                                   self.store._norms[j], weight)
                self._heir[row], self._heir_kernel[row] = heir, kernel
                gone[_store_heir(j)] = row
        # The orphans before these: those whose heir leaves the store follow it, and those
        # whose heir is the store's last vector follow it to slot m.
        if last not in (m, partner):
            gone[_store_heir(last)] = _store_heir(m)
        heirs, heir_kernels = self._heir[:before], self._heir_kernel[:before]
        followers = np.zeros(before, dtype=bool)
        for code in gone:
            followers |= heirs == code
        for o in np.flatnonzero(followers).tolist():
            target = gone[int(heirs[o])]
            if isinstance(target, tuple):
                heirs[o] = target[0]
                heir_kernels[o] *= target[1]
            else:
                heirs[o] = target
        # (A vector and its coefficient in the store move together: so does c_base. The one
        # added last keeps no weight until the next step, unless it is merged or leaves.)
        if self._fresh in (m, partner):
            self._fresh = -1
        elif self._fresh == last:
            self._fresh = m
        if m != last:
            self._base[m] = self._base[last]
        if z is not None:
            self._set_shared(z, 0.0, coefficient)
            for weight, kernel, at_once in zip(weights, kernels, passed):
                if at_once:
                    self._add_to_shared(z, weight * kernel)
        self._evict()

    def _leaving_at_once(self, before: int, weights: list[float]) -> list[bool]:
        """Which of the vectors leaving the store, with these averaged weights (in the order
        they would become orphans), would be the next orphans `_evict` drops: those skip
        being orphans (the same arithmetic, without copying a vector in and out). With a full
        capacity that is the usual case, as the vector merged away has the smallest
        coefficient of the store."""
        at_once = [False] * len(weights)
        if self.capacity is None or not weights:
            return at_once
        evictions = before + len(weights) - self.capacity
        if evictions <= 0:
            return at_once
        existing = self.orphans._a[:before]
        smallest = float(np.abs(existing).min()) if before else math.inf
        sizes = [abs(w) for w in weights]
        # `_evict` takes the first smallest: the existing orphans come before the new ones.
        if sizes[0] < smallest and all(sizes[0] <= s for s in sizes[1:]):
            at_once[0] = True
            if evictions > 1 and len(sizes) > 1 and sizes[1] < smallest:
                at_once[1] = True
        return at_once

    def emptying(self) -> None:
        """The store's `f` is about to become 0: its vectors become orphans, with no heir."""
        store = self.store
        before = self.orphans.size
        shared = self.shared  # (the vector added last: 0)
        for i in range(store.size):  # (vector i becomes orphan `before + i`)
            self._orphan(store._S[i, : store.n_inputs], store._norms[i], float(shared[i]))
        heirs = self._heir[:before]
        in_store = heirs < -1
        heirs[in_store] = before + (-2 - heirs[in_store])
        self._fresh = -1
        self._evict()

    def negate(self) -> None:
        """`fbar <- -fbar` with `f` (the model's labels swapped sides)."""
        self._base_weight, self._store_weight = -self._base_weight, -self._store_weight
        self.orphans._a[: self.orphans.size] *= -1.0
        self.bias = -self.bias

    def add_inputs(self, new) -> None:
        self.orphans.add_inputs(new)

    # -- averaging ------------------------------------------------------------------------------

    def update(self, bias: float, samples: float = 1.0) -> None:
        """One learned sample, standing for `samples` of the stream (see
        `river_advsvm.iterate_average`): `fbar <- (1 - rho) fbar + rho f` and the same for the
        bias."""
        store = self.store
        rho = self._next_weight(bias, samples)
        kept = 1.0 - rho
        base_weight = self._base_weight * kept
        store_weight = self._store_weight * kept + rho * store._scale
        self._base_weight, self._store_weight = base_weight, store_weight
        self._fresh = -1
        if abs(base_weight) < _SMALLEST_BASE_WEIGHT:  # (0 at the first step)
            self._write_out()
        else:
            self._keep_form()
        orphans = self.orphans._a[: self.orphans.size]
        orphans *= kept
        if self.capacity is None and len(orphans):
            # Without a budget no orphan leaves for room, and the closed form's shrink may
            # empty f at every sample (more orphans each time, for ever): an orphan leaves
            # once its weight is below the rounding of the sum of them all.
            total = float(np.abs(self.shared).sum() + np.abs(orphans).sum())
            self._evict(below=np.finfo(np.float64).eps * total)

    # -- f at rows ------------------------------------------------------------------------------

    def value_at_latest_row(self, given_up: bool = True) -> float:
        """`fbar` at the row of the store's latest `value`: its kernel row times the averaged
        coefficients, plus the orphans' row over the row the store loaded (the bits `values`
        gives the same row); without `given_up`, the first part alone."""
        store = self.store
        (_, _, extra), row, _, kernels = store.latest_row()
        total = (self._base_weight * float(kernels @ self._base[: len(kernels)])
                 + self._store_weight * store.latest_sum())
        orphans = self.orphans
        if orphans.size and given_up:
            total += orphans._scale * orphans._kernel_row(row, extra)[2]
        return total

    def values(self, V: np.ndarray, U: np.ndarray | None = None, extra_hashes=None) -> np.ndarray:
        """`fbar` at each row (see `KernelExpansion.values`)."""
        out = self.store.values(V, U, weights=self.shared)
        if self.orphans.size:
            out += self.orphans.values(V, U)
        return out

    def gradients(self, V: np.ndarray, U: np.ndarray | None = None, extra_hashes=None):
        """`dfbar/dv` and `dfbar/du` at each row (see `KernelExpansion.gradients`)."""
        G, GU = self.store.gradients(V, U, weights=self.shared)
        if self.orphans.size:
            G_o, GU_o = self.orphans.gradients(V, U)
            G += G_o
            GU += GU_o
        return G, GU

    def expansion(self) -> KernelExpansion:
        """`fbar` as one kernel expansion (a copy of the vectors: for certificates)."""
        store, orphans = self.store, self.orphans
        n, size = store.n_inputs, store.size
        whole = KernelExpansion(store.kernel, store.gamma, None, store.dtype)
        whole.start()
        whole._load(np.concatenate([store._S[:size, :n], orphans._S[: orphans.size, :n]]),
                    self.coefficients, n,
                    np.concatenate([store._norms[:size], orphans._norms[: orphans.size]]))
        return whole

    # -- persistence ----------------------------------------------------------------------------

    def state(self) -> tuple[dict, dict]:
        """JSON scalars and numpy arrays from which `restore` rebuilds this average (beside the
        store's own state)."""
        orphans = self.orphans
        n = orphans.size
        scalars = {**self._scalars(), "base_weight": self._base_weight,
                   "store_weight": self._store_weight, "fresh": self._fresh}
        arrays = {"average_coefficients": self.shared,
                  "average_coefficient_base": self._base[: self.store.size].copy(),
                  "average_orphans": orphans._S[:n, : orphans.n_inputs].copy(),
                  "average_orphan_coefficients": orphans._a[:n].copy(),
                  "average_heirs": self._heir[:n].astype(np.int64),
                  "average_heir_kernels": self._heir_kernel[:n].copy()}
        return scalars, arrays

    @classmethod
    def restore(cls, store, scalars: dict, arrays: dict) -> AveragedVectors:
        """The average `state` saved, over the restored `store`; `ValueError` if it is not one
        this store can have (checked before anything is built)."""
        checked = cls._checked_scalars(scalars)
        try:
            shared, vectors, a, heirs, kernels = (arrays[k] for k in (
                "average_coefficients", "average_orphans", "average_orphan_coefficients",
                "average_heirs", "average_heir_kernels"))
        except KeyError as missing:
            raise ValueError(f"the average's state lacks {missing}") from None
        n = len(a)
        capacity = orphan_capacity(store.budget)
        if not (vectors.dtype == np.dtype(store.dtype) and vectors.shape == (n, store.n_inputs)
                and a.shape == heirs.shape == kernels.shape == (n,)
                and shared.shape == (store.size,)
                and shared.dtype == a.dtype == kernels.dtype == np.float64
                and heirs.dtype == np.int64 and (capacity is None or n <= capacity)):
            raise ValueError("the average's arrays do not fit the store")
        if not (np.isfinite(vectors).all() and np.isfinite(a).all() and np.isfinite(shared).all()
                and ((kernels >= 0.0) & (kernels <= 1.0)).all()):
            raise ValueError("the average's values are not finite, or its kernels not in [0, 1]")
        norms = _squared_norms(vectors)
        if not (vector_sizes(store.kernel, vectors, norms)
                <= max_saved_size(store.kernel, store.dtype)).all():
            # As for the store's vectors: past this, the kernel values an orphan takes part in
            # are NaN (an exponent inf - inf), or 1 far from it.
            raise ValueError("the average's vectors are too large for their kernel values to be "
                             "computed")
        if not ((heirs >= _store_heir(store.size - 1)) & (heirs < n)
                & (heirs != np.arange(n))).all():
            raise ValueError("the average's heirs are out of range")
        # Each chain of heirs between orphans ends (an eviction passes an orphan's heir to the
        # orphans whose heir it was): after 2^k >= n steps, by pointer doubling, every orphan
        # is past its chain's end.
        ahead = heirs
        for _ in range(n.bit_length()):
            ahead = np.where(ahead >= 0, ahead[np.maximum(ahead, 0)], ahead)
        if (ahead >= 0).any():
            raise ValueError("the average's heirs go round in a cycle")
        average = cls._restored(store, checked)
        average._base = np.concatenate([shared, np.zeros(1)])
        if "average_coefficient_base" in arrays:  # (a model's own; a group's fold has only c)
            average._restore_base(scalars, arrays["average_coefficient_base"], shared)
        average.orphans._load(vectors, a, store.n_inputs, norms)
        average._heir = heirs.astype(np.intp)
        average._heir_kernel = kernels.copy()
        return average

    def _restore_base(self, scalars: dict, base, shared: np.ndarray) -> None:
        """Take the saved `c_base`, `A` and `B` (see the module), which must give the saved
        averaged coefficients `shared` to the bit, as they did when saved; `ValueError`
        otherwise."""
        size = self.store.size
        weights = (scalars.get("base_weight"), scalars.get("store_weight"))
        fresh = scalars.get("fresh", -1)
        if not (isinstance(base, np.ndarray) and base.dtype == np.float64
                and base.shape == (size,) and all(type(w) is float for w in weights)
                and type(fresh) is int and -1 <= fresh < size):
            raise ValueError("the average's coefficient base does not fit the store")
        base_weight, store_weight = weights
        if not (abs(base_weight) >= _SMALLEST_BASE_WEIGHT and math.isfinite(base_weight)
                and math.isfinite(store_weight) and np.isfinite(base).all()):
            raise ValueError("the average's coefficient base does not give its coefficients")
        written = _written_out(base, base_weight, store_weight, self.store._a[:size])
        if fresh >= 0:
            written[fresh] = 0.0
        if not np.array_equal(written, shared):
            raise ValueError("the average's coefficient base does not give its coefficients")
        self._base = np.concatenate([base, np.zeros(1)])
        self._base_weight, self._store_weight, self._fresh = base_weight, store_weight, fresh

    # -- orphans --------------------------------------------------------------------------------

    def _orphan(self, x: np.ndarray, norm: float, a: float) -> int:
        """A vector the store gives up, with averaged coefficient `a` and no heir: its row."""
        orphans = self.orphans
        row = orphans.size
        orphans._append(x, a, norm)
        if row >= len(self._heir):
            extra = max(row + 1, 2 * len(self._heir)) - len(self._heir)
            self._heir = np.concatenate([self._heir, np.full(extra, -1, dtype=np.intp)])
            self._heir_kernel = np.concatenate([self._heir_kernel, np.ones(extra)])
        self._heir[row], self._heir_kernel[row] = -1, 1.0
        return row

    def _evict(self, below: float | None = None) -> None:
        """Past the capacity, the orphan with the smallest averaged coefficient leaves; its
        coefficient goes to its heir, projected. Without a capacity, orphans whose averaged
        coefficient is at most `below` leave."""
        orphans = self.orphans
        while orphans.size and (below is not None
                                or (self.capacity is not None and orphans.size > self.capacity)):
            size = orphans.size
            a = orphans._a
            j = int(np.abs(a[:size]).argmin())
            if below is not None and not abs(a[j]) <= below:
                return
            heir, kernel = int(self._heir[j]), float(self._heir_kernel[j])
            if heir >= 0:
                a[heir] += a[j] * kernel
            elif heir != -1:
                self._add_to_shared(-2 - heir, a[j] * kernel)
            # Orphans whose heir was j inherit j's heir, through j; then the last orphan moves
            # to row j, and those whose heir it was follow it (usually neither kind exists).
            heirs, heir_kernels = self._heir, self._heir_kernel
            last = size - 1
            linked = np.flatnonzero((heirs[:size] == j) | (heirs[:size] == last)).tolist()
            for o in linked:
                if heirs[o] == j:
                    heir_kernels[o] *= kernel
                    heirs[o] = heir
            orphans._drop(j)
            if j != last:
                heirs[j], heir_kernels[j] = heirs[last], heir_kernels[last]
                for o in linked:
                    if o < last and heirs[o] == last:
                        heirs[o] = j
            heirs[last] = -1


def _written_out(base: np.ndarray, base_weight: float, store_weight: float,
                 a: np.ndarray) -> np.ndarray:
    """The averaged coefficients `A c_base + B a` (a new array; the same bits wherever they
    are written out)."""
    c = base * base_weight
    c += store_weight * a
    return c
