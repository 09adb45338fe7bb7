"""The coefficient store of `AdvKernelSVM` and the budget policies that keep it bounded.

The model is `f(x) = sum_j a_j phi_j(x)` over the features held in the store. A DSG step asks
the store to add `c * k(x, .)` (with `c = eta * y`); how it does so is the policy:

| policy         | what an active step adds                          | features      | `norm`    |
|----------------|---------------------------------------------------|---------------|-----------|
| `compact`      | `(c / B) phi(x)` into every slot of a fixed pool  | `B`, fixed    | RF space  |
| `compact_slot` | `c phi_j(x)` into slot `j = i mod B` (DSG, cyclic)| `B`, fixed    | kernel    |
| `truncate`     | a fresh feature with `c phi_new(x)`; oldest drops | `<= B`        | kernel    |
| `grow`         | a fresh feature with `c phi_new(x)`               | unbounded     | kernel    |

`norm` is the `||f||_H` the adversarial term uses (MATH.md §3). "RF space" is the exact norm
of the deployed model in the RKHS of its own `B` features, `sqrt(B sum a_j^2)`. "kernel" is the
norm of the kernel expansion `h = sum_i beta_i k(x_i, .)` that DSG approximates with one fresh
feature per step. MATH.md suggests the recursion `||rho h + c k(x,.)||^2 = rho^2 ||h||^2 +
2 rho c h(x) + c^2` fed with the model's own `f(x)`; measured, that is biased low (0.1 against an
exact 6.1 after 1,500 steps): a step is active exactly when the model's noisy `f(x)` makes
`y f(x)` small, so the cross term is selected to be negative. These policies therefore track
`h` in a separate sketch of `NORM_PROBES` independent features (a `Compact` pool updated like
the model but never used to predict): `||sketch||` estimates `||h||` within about
`1/sqrt(NORM_PROBES)` without that bias. `truncate` keeps what it drops in the sketch (with a
constant step that mass is below `(1 - eta lambda)^B`).

`compact` is the default: its full-pool update has the expectation of the one-slot update at no
extra cost (predicting already computes `phi(x)` over the pool), memory is flat from the first
sample, and models with the same seed and gamma share coordinates, so they can be averaged.

"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm import kernels

__all__ = [
    "NORM_PROBES",
    "POLICIES",
    "Compact",
    "CompactSlot",
    "FeatureStore",
    "Grow",
    "Truncate",
    "make_store",
]

_SQRT2 = math.sqrt(2.0)
NORM_PROBES = 256
# The norm sketch draws its features from a seed unrelated to the model's (digits of sqrt(2)).
_SKETCH_SEED_MASK = 0x6A09E667F3BCC908


class FeatureStore:
    """Random features (regenerated from their ids) and their coefficients.

    Parameters
    ----------
    kernel
        'rbf' or 'laplacian'.
    gamma
        Kernel bandwidth.
    seed
        The model's seed; feature `i` is drawn from `kernels.feature_seeds(seed, i)`.
    budget
        Maximum number of features (ignored by `Grow`).

    """

    #: True when the set of features never changes while learning, so that a batch's features
    #: can be computed once before its sequential steps.
    fixed_pool = True
    #: True when `norm` is the kernel-expansion norm kept in a sketch (see the module docs).
    sketches_norm = True

    def __init__(self, kernel: str, gamma: float, seed: int, budget: int):
        self.kernel = kernel
        self.gamma = gamma
        self.seed = seed
        self.budget = budget
        self.ids = np.empty(0, dtype=np.int64)
        self.coef = np.empty(0)
        self.phase = np.empty(0)
        self._omega = np.empty((0, 0))
        self.hashes = np.empty(0, dtype=np.uint64)
        self.size = 0
        self.norm = 0.0
        self.n_added = 0
        # Bumped whenever a feature's weights or phase change (not its coefficient), so that
        # what depends on the features alone (the certificate's sigma_max(Omega)) can be cached.
        self.version = 0
        self._sketch: Compact | None = None

    # -- features -------------------------------------------------------------------------------

    @property
    def omega(self) -> np.ndarray:
        """The spectral weights, one row per input column and one column per feature."""
        return self._omega[:, : self.size]

    def _weights(self, ids: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        seeds = kernels.feature_seeds(self.seed, ids)
        return kernels.spectral_weights(self.kernel, self.gamma, seeds, hashes)

    def _set_features(self, slots: np.ndarray, ids: np.ndarray) -> None:
        self.version += 1
        self.ids[slots] = ids
        self.phase[slots] = kernels.phases(kernels.feature_seeds(self.seed, ids))
        self._omega[:, slots] = self._weights(ids, self.hashes)

    def _allocate(self, capacity: int) -> None:
        old = self._omega.shape[1]
        grow = capacity - old
        self.ids = np.concatenate([self.ids, np.zeros(grow, dtype=np.int64)])
        self.coef = np.concatenate([self.coef, np.zeros(grow)])
        self.phase = np.concatenate([self.phase, np.zeros(grow)])
        omega = np.zeros((len(self.hashes), capacity))
        omega[:, :old] = self._omega
        self._omega = omega

    def add_inputs(self, hashes: np.ndarray) -> None:
        """Extend every feature with the weights of new input columns."""
        rows = np.zeros((len(hashes), self._omega.shape[1]))
        rows[:, : self.size] = self._weights(self.ids[: self.size], hashes)
        self._omega = np.vstack([self._omega, rows])
        self.version += 1
        self.hashes = np.concatenate([self.hashes, hashes])
        if self._sketch is not None:
            self._sketch.add_inputs(hashes)

    def weights_for(self, hashes: np.ndarray) -> np.ndarray | None:
        """Weights of input keys the store has no rows for, without storing them."""
        if not len(hashes):
            return None
        return self._weights(self.ids[: self.size], hashes)

    def projections(
        self, V: np.ndarray, W_extra: np.ndarray | None = None, U: np.ndarray | None = None
    ) -> np.ndarray:
        """`Z = V Omega + u`, plus `U W_extra` for inputs given by `weights_for`."""
        Z = V @ self.omega + self.phase[: self.size]
        if W_extra is not None:
            Z += U @ W_extra
        return Z

    def features(self, V: np.ndarray) -> np.ndarray:
        """`phi(x) = sqrt(2) cos(Omega^T x + u)` for each row of `V`."""
        return _SQRT2 * np.cos(self.projections(V))

    # -- coefficients ---------------------------------------------------------------------------

    @property
    def coefficients(self) -> np.ndarray:
        return self.coef[: self.size]

    def scale(self, factor: float) -> None:
        """`f <- factor * f`."""
        self.coef[: self.size] *= factor
        self.norm *= factor
        if self._sketch is not None:
            self._sketch.scale(factor)

    def negate(self) -> None:
        """`f <- -f` (the norm is unchanged)."""
        self.coef[: self.size] *= -1.0
        if self._sketch is not None:
            self._sketch.negate()

    def add(self, phi: np.ndarray, v: np.ndarray, c: float) -> None:
        """`f <- f + c k(x, .)`, approximated as the policy says; `phi` is the pool at `x = v`."""
        raise NotImplementedError

    def _add_to_sketch(self, v: np.ndarray, c: float) -> None:
        sketch = self._sketch
        sketch.add(sketch.features(v[None])[0], v, c)
        self.norm = sketch.norm

    # -- life cycle and persistence -------------------------------------------------------------

    def _initial_capacity(self) -> int:
        return self.budget

    def start(self) -> None:
        """Allocate the initial pool (before any input column is known)."""
        self._allocate(self._initial_capacity())
        if self.sketches_norm:
            sketch_seed = (self.seed ^ _SKETCH_SEED_MASK) % 2**64
            self._sketch = Compact(self.kernel, self.gamma, sketch_seed, NORM_PROBES)
            self._sketch.start()

    def state(self) -> tuple[dict, dict]:
        """Scalars and arrays from which `restore` rebuilds this store exactly."""
        scalars = {"size": self.size, "norm": self.norm, "n_added": self.n_added}
        arrays = {"ids": self.ids[: self.size].copy(), "coef": self.coef[: self.size].copy()}
        if self._sketch is not None:
            scalars["sketch_norm"] = self._sketch.norm
            arrays["sketch"] = self._sketch.coefficients.copy()
        return scalars, arrays

    def restore(self, scalars: dict, arrays: dict, hashes: np.ndarray) -> None:
        """Rebuild from `state()` over input columns with these `hashes`; `ValueError` if invalid."""
        size, n_added = int(scalars["size"]), int(scalars["n_added"])
        ids = np.asarray(arrays["ids"])
        coef = np.asarray(arrays["coef"])
        if ids.dtype.kind not in "iu" or ids.shape != (size,) or coef.shape != (size,):
            raise ValueError("feature ids and coefficients do not match the stored size")
        if not 0 <= size <= max(self._initial_capacity(), n_added) or (ids < 0).any():
            raise ValueError("stored features exceed the budget or have negative ids")
        if not np.isfinite(coef).all() or not math.isfinite(scalars["norm"]):
            raise ValueError("non-finite coefficients")
        self.hashes = np.empty(0, dtype=np.uint64)
        self._omega = np.zeros((0, 0))
        self.ids, self.coef, self.phase = np.empty(0, np.int64), np.empty(0), np.empty(0)
        self.start()
        if self._omega.shape[1] < size:
            self._allocate(size)
        self.size = 0  # features are generated once, below, over all input columns
        self.add_inputs(np.asarray(hashes, dtype=np.uint64))
        self.size = size
        self._set_features(np.arange(size), ids.astype(np.int64))
        self.coef[:size] = coef
        self.norm = float(scalars["norm"])
        self.n_added = n_added
        if self._sketch is not None:
            sketch = np.asarray(arrays["sketch"], dtype=np.float64)
            if sketch.shape != (NORM_PROBES,) or not np.isfinite(sketch).all():
                raise ValueError("invalid norm sketch")
            self._sketch.coefficients[:] = sketch
            self._sketch.norm = float(scalars["sketch_norm"])


class Compact(FeatureStore):
    """A fixed pool of `budget` features, every coefficient updated on each active step.

    `a <- a + (c / B) phi(x)` is SGD on the model restricted to the pool's random-feature
    kernel `k_B(x, x') = phi(x) . phi(x') / B`; in expectation over which slot a fresh DSG
    feature would have used, it is the one-slot update. `norm` is exact for the deployed model.

    """

    sketches_norm = False

    def start(self) -> None:
        super().start()
        self.size = self.budget
        self._set_features(np.arange(self.budget), np.arange(self.budget))

    def add(self, phi, v, c):
        coef = self.coef[: self.size]
        coef += (c / self.size) * phi
        self.norm = math.sqrt(self.size) * float(np.sqrt(coef @ coef))
        self.n_added += 1


class CompactSlot(Compact):
    """A fixed pool of `budget` features; active step `i` adds `c phi_j(x)` into slot `j = i mod B`.

    This is DSG whose i-th feature is drawn from seed `i mod B`: paper-faithful for the first
    `B` active steps, then reusing the pool. It needs many more samples than `Compact`.

    """

    sketches_norm = True

    def add(self, phi, v, c):
        j = self.n_added % self.size
        self.coef[j] += c * phi[j]
        self._add_to_sketch(v, c)
        self.n_added += 1


class Grow(FeatureStore):
    """Paper-faithful DSG: every active step adds a fresh feature. Memory grows without bound.

    For finite data only: on a stream, prediction cost and memory are O(steps x inputs).

    """

    fixed_pool = False

    def _initial_capacity(self) -> int:
        return 64

    def _slot_for_new_feature(self) -> int:
        if self.size == self._omega.shape[1]:
            self._allocate(2 * self.size)
        return self.size

    def add(self, phi, v, c):
        slot = self._slot_for_new_feature()
        self._set_features(np.array([slot]), np.array([self.n_added]))
        value = _SQRT2 * math.cos(float(v @ self._omega[:, slot]) + self.phase[slot])
        self.coef[slot] = c * value
        self.size = max(self.size, slot + 1)
        self._add_to_sketch(v, c)
        self.n_added += 1


class Truncate(Grow):
    """DSG that keeps the `budget` newest features: feature `i` replaces feature `i - B`.

    With a constant step a feature of age `a` has been shrunk by `(1 - eta lambda)^a`, so what is
    dropped is small when `eta lambda B` is large: the model forgets old concepts on purpose.
    With a diminishing step every coefficient stays of order `1/t` and truncation loses most of
    the model; use `Compact` there.

    """

    def _initial_capacity(self) -> int:
        return self.budget

    def _slot_for_new_feature(self) -> int:
        return self.n_added % self.budget


POLICIES: dict[str, type[FeatureStore]] = {
    "compact": Compact,
    "compact_slot": CompactSlot,
    "truncate": Truncate,
    "grow": Grow,
}


def make_store(policy: str, kernel: str, gamma: float, seed: int, budget: int) -> FeatureStore:
    if policy not in POLICIES:
        raise ValueError(f"unknown budget_policy {policy!r}: expected one of {tuple(POLICIES)}")
    return POLICIES[policy](kernel=kernel, gamma=gamma, seed=seed, budget=budget)
