"""The random-feature stores of `AdvKernelSVM` and the budget policies that keep them bounded.

The model is `f(x) = sum_j a_j phi_j(x)` over the features held in the store. A DSG step asks
the store to add `c * k(x, .)` (with `c = eta * y`); how it does so is the policy:

| policy         | what an active step adds                          | features      | `norm`    |
|----------------|---------------------------------------------------|---------------|-----------|
| `compact`      | `(c / B) phi(x)` into every slot of a fixed pool  | `B`, fixed    | RF space  |
| `compact_slot` | `c phi_j(x)` into slot `j = i mod B` (DSG, cyclic)| `B`, fixed    | kernel    |
| `truncate`     | a fresh feature with `c phi_new(x)`; oldest drops | `<= B`        | kernel    |
| `grow`         | a fresh feature with `c phi_new(x)`               | unbounded     | kernel    |

`norm` is the `||f||_H` the adversarial term uses. "RF space" is the exact norm of the deployed
model in the RKHS of its own `B` features, `sqrt(B sum a_j^2)`. "kernel" is the norm of the
kernel expansion `h = sum_i beta_i k(x_i, .)` that DSG approximates with one fresh feature per
step. The recursion `||rho h + c k(x,.)||^2 = rho^2 ||h||^2 + 2 rho c h(x) + c^2` fed with the
model's own `f(x)` is biased low (measured: 0.1 against an exact 6.1 after 1,500 steps): a step
is active exactly when the model's noisy `f(x)` makes `y f(x)` small, so the cross term is
selected to be negative. These policies therefore track `h` in a separate sketch of
`NORM_PROBES` independent features (a `Compact` pool updated like the model but never used to
predict): `||sketch||` estimates `||h||` within about `1/sqrt(NORM_PROBES)` without that bias.

Every store speaks the same protocol to the model (`river_advsvm.support.SupportVectors`, the
support-vector representation, too): `value(v)` then, for a learned row, `scale` and `add`, one
row at a time. A row's arithmetic never depends on which batch it came in, so a `learn_one`
loop and any batching of `learn_many` give bit-identical models. The weights are stored in
`dtype` (float32 by default: the projection `x . w` is memory-bound, so it runs twice as fast);
coefficients and norms are float64.

"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm import checkpoint, inputs, kernels

__all__ = [
    "DTYPES",
    "NORM_PROBES",
    "POLICIES",
    "Compact",
    "CompactSlot",
    "FeatureStore",
    "Grow",
    "Truncate",
]

_SQRT2 = math.sqrt(2.0)
NORM_PROBES = 256
DTYPES = ("float32", "float64")
#: Inputs a store does not know are weighted this many at a time (see `_extra_weights`).
EXTRA_CHUNK = 256
#: The most features a store may have added (a checkpoint's `n_added`): far beyond any stream,
#: and the ids of the next ones stay int64.
MAX_ADDED = 2**62
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
    dtype
        'float32' or 'float64': storage and arithmetic of the weights and features.
    max_inputs
        The most input columns there will ever be (the model's `max_features`): the spare
        capacity for new inputs never goes beyond it, so memory stays within
        `max_inputs x budget` weights (and `max_inputs x NORM_PROBES` for a norm sketch).

    """

    #: True when `norm` is the kernel-expansion norm kept in a sketch (see the module docs).
    sketches_norm = True
    #: True when the number of features has no bound (`Grow`).
    unbounded = False

    def __init__(self, kernel: str, gamma: float, seed: int, budget: int, dtype: str = "float32",
                 max_inputs: int = 10_000):
        self.kernel = kernel
        self.max_inputs = max_inputs
        self.gamma = gamma
        self.seed = seed
        self.budget = budget
        self.dtype = np.dtype(dtype)
        self.ids = np.empty(0, dtype=np.int64)
        self.coef = np.empty(0)
        self.phase = np.empty(0, dtype=self.dtype)
        # Rows are input columns, columns are features; both have spare capacity so that new
        # inputs and features never copy the whole matrix.
        self._omega = np.empty((0, 0), dtype=self.dtype)
        self._hashes = np.empty(0, dtype=np.uint64)
        self.n_inputs = 0
        self.size = 0
        self.norm = 0.0
        self.n_added = 0
        # Bumped whenever a feature's weights or phase change (not its coefficient), so that
        # what depends on the features alone (the certificate's sigma_max(Omega)) can be cached.
        self.version = 0
        self._sketch: Compact | None = None
        self._cos = np.empty(0, dtype=self.dtype)  # cos(z) of the row last given to value()
        # The rounding of the phases w . x of the learned rows, in radians, once it passes
        # kernels.ROUNDING_LIMIT (None until then): the model warns (see `support.SupportVectors`).
        self.rounding: float | None = None
        # The average of f the model predicts with, if it keeps one (see
        # `river_advsvm.feature_average`): told when a slot gets a new feature and on negate.
        self.averaged = None

    def __getstate__(self) -> dict:
        # The latest row's cosines serve the step on that row, which computes them first: not
        # state (a pickle taken after a prediction equals one taken before it).
        return {**self.__dict__, "_cos": np.empty(0, dtype=self.dtype)}

    # -- features -------------------------------------------------------------------------------

    @property
    def omega(self) -> np.ndarray:
        """The spectral weights, one row per input column and one column per feature."""
        return self._omega[: self.n_inputs, : self.size]

    @property
    def hashes(self) -> np.ndarray:
        return self._hashes[: self.n_inputs]

    def _weights(self, ids: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        seeds = kernels.feature_seeds(self.seed, ids)
        return kernels.spectral_weights(self.kernel, self.gamma, seeds, hashes)

    def _set_features(self, slots: np.ndarray, ids: np.ndarray) -> None:
        self.version += 1
        self.ids[slots] = ids
        self.phase[slots] = kernels.phases(kernels.feature_seeds(self.seed, ids))
        self._omega[: self.n_inputs, slots] = self._weights(ids, self.hashes)

    def _reserve(self, inputs: int, features: int) -> None:
        """Make room for this many inputs and features, doubling what is short."""
        rows, columns = self._omega.shape
        if inputs <= rows and features <= columns:
            return
        if inputs > rows:
            rows = max(inputs, min(2 * rows, self.max_inputs), 16)
        if features > columns:
            columns = max(features, 2 * columns)
        omega = np.zeros((rows, columns), dtype=self.dtype)
        omega[: self.n_inputs, : self.size] = self.omega
        self._omega = omega
        hashes = np.zeros(rows, dtype=np.uint64)
        hashes[: self.n_inputs] = self.hashes
        self._hashes = hashes
        for name in ("ids", "coef", "phase"):
            old = getattr(self, name)
            if len(old) < columns:
                new = np.zeros(columns, dtype=old.dtype)
                new[: len(old)] = old
                setattr(self, name, new)

    def add_inputs(self, hashes: np.ndarray) -> None:
        """Extend every feature with the weights of new input columns."""
        start = self.n_inputs
        self._reserve(start + len(hashes), self.size)
        self._hashes[start : start + len(hashes)] = hashes
        self._omega[start : start + len(hashes), : self.size] = self._weights(
            self.ids[: self.size], hashes
        )
        self.n_inputs += len(hashes)
        self.version += 1
        if self._sketch is not None:
            self._sketch.add_inputs(hashes)

    def weights_for(self, hashes) -> np.ndarray | None:
        """Weights of input keys the store has no rows for, without storing them."""
        if hashes is None or not len(hashes):
            return None
        weights = self._weights(self.ids[: self.size], np.asarray(hashes, np.uint64))
        return weights.astype(self.dtype)

    def _extra_weights(self, hashes):
        """`(columns, weights)` for inputs the store does not know, a bounded chunk at a time:
        memory stays at `EXTRA_CHUNK x B` however many unknown inputs a sample brings."""
        for start in range(0, len(hashes), EXTRA_CHUNK):
            columns = slice(start, start + EXTRA_CHUNK)
            yield columns, self.weights_for(hashes[columns])

    def projections(self, V: np.ndarray, U=None, extra_hashes=None) -> np.ndarray:
        """`Z = V Omega + u`, plus `U W_extra` for inputs the store does not know; many rows."""
        Z = V.astype(self.dtype) @ self.omega + self.phase[: self.size]
        for columns, W in self._extra_weights(extra_hashes or ()):
            Z += U[:, columns].astype(self.dtype) @ W
        return Z

    def _row_projection(self, v: np.ndarray, u=None, extra_hashes=None) -> np.ndarray:
        # One row: a matrix-vector product whose rounding depends on the row and the store
        # alone, never on a batch.
        z = v.astype(self.dtype) @ self.omega
        z += self.phase[: self.size]
        for columns, W in self._extra_weights(extra_hashes or ()):
            z += u[columns].astype(self.dtype) @ W
        return z

    # -- the per-row protocol -------------------------------------------------------------------

    @property
    def coefficients(self) -> np.ndarray:
        return self.coef[: self.size]

    def value(self, v: np.ndarray, u=None, extra_hashes=None) -> float:
        """`f(x)` for one row `v` over the known inputs (and `u` over `extra_hashes`)."""
        self._cos = np.cos(self._row_projection(v, u, extra_hashes))
        return _SQRT2 * float(self.coefficients @ self._cos)

    def values(self, V: np.ndarray, U=None, extra_hashes=None) -> np.ndarray:
        """`f(x)` for each row of `V`."""
        return _SQRT2 * (np.cos(self.projections(V, U, extra_hashes)) @ self.coefficients)

    def gradients(self, V: np.ndarray, U=None, extra_hashes=None):
        """`(df/dv, df/du)` for each row: `-sqrt(2) sum_i a_i sin(w_i . x + u_i) w_i`."""
        S = -_SQRT2 * np.sin(self.projections(V, U, extra_hashes)) * self.coefficients
        S = S.astype(self.dtype)
        GV = (S @ self.omega.T).astype(np.float64)
        GU = np.zeros((len(V), len(extra_hashes or ())))
        for columns, W in self._extra_weights(extra_hashes or ()):
            GU[:, columns] = S @ W.T
        return GV, GU

    def gradient(self, v: np.ndarray) -> np.ndarray:
        """`df/dx` at the row `v` (over the known inputs)."""
        return self.gradients(v[None])[0][0]

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
        if self.averaged is not None:
            self.averaged.negate()

    def add(self, c: float, v: np.ndarray) -> None:
        """`f <- f + c k(x, .)`, approximated as the policy says, for the row `v` last given to
        `value` (here over every input column, new ones included)."""
        raise NotImplementedError

    def _note_rounding(self, v: np.ndarray) -> None:
        """Keep the phases' rounding for a learned row `v` once past `kernels.ROUNDING_LIMIT`:
        a phase `w . x` spreads about `sqrt(2 gamma) ||x||_2` (RBF; Laplacian: Cauchy weights,
        `gamma ||x||_1`) and is rounded by about eps times that; past a hundredth of a
        radian the cosines, and so the margins, are noise (one row and a batch disagree)."""
        if getattr(self, "rounding", None) is not None:  # (a pickle made before it existed)
            return
        with np.errstate(over="ignore"):
            spread = (math.sqrt(2.0 * self.gamma) * float(np.linalg.norm(v))
                      if self.kernel == "rbf" else self.gamma * float(np.abs(v).sum()))
        rounding = spread * float(np.finfo(self.dtype).eps)
        self.rounding = rounding if rounding > kernels.ROUNDING_LIMIT else None

    def _add_to_sketch(self, v: np.ndarray, c: float) -> None:
        sketch = self._sketch
        sketch.value(v)
        sketch.add(c, v)
        self.norm = sketch.norm

    # -- life cycle and persistence -------------------------------------------------------------

    def _initial_capacity(self) -> int:
        return self.budget

    # -- what the model asks of either representation (see `support.SupportVectors`) -------------

    @property
    def n_features(self) -> int:
        return self.size

    n_support_vectors = 0

    @property
    def maintenance(self) -> dict:
        """Random features drop nothing and merge nothing: no budget maintenance to report."""
        return {}

    def reprocess(self, bias: float, step: float, slack: float = 0.0) -> float:
        """Random features keep no samples to step on again: no step is taken (0)."""
        return 0.0

    def revisit_from(self, index: int) -> None:
        """Random features keep no samples to revisit: nothing to point at."""

    @classmethod
    def max_state_bytes(cls, budget: int | None, max_inputs: int, dtype: str) -> int:
        """The most bytes `state()` holds: feature ids and coefficients, and the norm sketch
        (the features' weights are regenerated from their ids, never saved). Without a
        budget, what one checkpoint may hold at all."""
        features = checkpoint.MAX_ARRAY_BYTES // 16 if cls.unbounded else budget
        return 16 * features + 8 * NORM_PROBES + 4096

    def start(self) -> None:
        """Allocate the initial pool (before any input column is known)."""
        self._reserve(0, self._initial_capacity())
        if self.sketches_norm:
            sketch_seed = (self.seed ^ _SKETCH_SEED_MASK) % 2**64
            self._sketch = Compact(self.kernel, self.gamma, sketch_seed, NORM_PROBES, self.dtype,
                                   self.max_inputs)
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
        """Rebuild from `state()` over input columns with these `hashes`; `ValueError` if
        invalid."""
        size, n_added, norm = scalars["size"], scalars["n_added"], scalars["norm"]
        if not (inputs.is_whole(size) and inputs.is_whole(n_added) and inputs.is_number(norm)):
            raise ValueError("the saved feature counts must be ints and the norm a number")
        if not 0 <= n_added <= MAX_ADDED:  # (feature ids are int64, and n_added the next one)
            raise ValueError(f"n_added {n_added} is out of range")
        ids, coef = arrays["ids"], arrays["coef"]
        if ids.dtype != np.int64 or coef.dtype != np.float64 or ids.shape != (size,) \
                or coef.shape != (size,):
            raise ValueError(f"feature ids and coefficients must be int64 and float64 of shape "
                             f"({size},), got {ids.dtype}{ids.shape} and {coef.dtype}{coef.shape}")
        if not np.isfinite(coef).all() or not (math.isfinite(norm) and norm >= 0):
            raise ValueError("non-finite coefficients or norm")
        # Which features a store holds follows from its policy and n_added alone: a store
        # holding others, or fewer, would learn another model (a pool of 0 divides by 0).
        if size != self._expected_size(n_added) \
                or not np.array_equal(ids, self._expected_ids(n_added)):
            raise ValueError(f"{size} saved features are not the ones this budget policy holds "
                             f"after adding {n_added}")
        # A pool's norm is exact: one the coefficients do not have would be a model's that
        # never learned them (and coefficients whose norm overflows predict infinities).
        with np.errstate(over="ignore"):  # (a file's coefficients may square past floats)
            saved_norm_fits = self.sketches_norm or _near(norm, _pool_norm(coef))
        if not saved_norm_fits:
            raise ValueError("the saved norm does not match the saved coefficients")
        sketch = None
        if self.sketches_norm:
            sketch, sketch_norm = arrays["sketch"], scalars["sketch_norm"]
            if sketch.dtype != np.float64 or sketch.shape != (NORM_PROBES,) \
                    or not np.isfinite(sketch).all():
                raise ValueError(f"the norm sketch must be {NORM_PROBES} finite float64 numbers")
            # The model's norm is the sketch's, which is the sketch's coefficients' own.
            with np.errstate(over="ignore"):
                sketch_fits = _near(norm, _pool_norm(sketch))
            if not (inputs.is_number(sketch_norm) and sketch_norm == norm and sketch_fits):
                raise ValueError("the saved norm does not match the saved norm sketch")
        self.start()
        self._reserve(len(hashes), size)
        self.size = 0  # features are generated once, below, over all input columns
        self.add_inputs(np.asarray(hashes, dtype=np.uint64))
        self.size = size
        self._set_features(np.arange(size), ids)
        self.coef[:size] = coef
        self.norm = float(norm)
        self.n_added = n_added
        if sketch is not None:
            self._sketch.coefficients[:] = sketch
            self._sketch.norm = float(norm)

    def _expected_size(self, n_added: int) -> int:
        """How many features the store holds after `n_added` additions: its whole pool."""
        return self.budget

    def _expected_ids(self, n_added: int) -> np.ndarray:
        """The ids of the features in slots 0, 1, ... after `n_added` additions: the pool's
        are 0 .. budget - 1 (see `Truncate` and `Grow` for theirs)."""
        return np.arange(self.budget)


def _pool_norm(coef: np.ndarray) -> float:
    """`sqrt(B sum a_j^2)`: the exact norm of a pool of features (`Compact.add` keeps it)."""
    return math.sqrt(len(coef)) * kernels.l2_length(coef)


def _near(saved: float, exact: float) -> bool:
    """Whether a saved norm is `exact`'s up to the rounding of the scalings applied since it
    was last computed: relative, but for norms so small that their squares underflow (a model
    shrunk for long), and never when `exact` overflowed."""
    return math.isfinite(exact) and abs(saved - exact) <= 1e-6 * exact + 1e-140


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

    def add(self, c, v):
        self._note_rounding(v)
        coef = self.coef[: self.size]
        coef += (_SQRT2 * c / self.size) * self._cos
        self.norm = _pool_norm(coef)
        self.n_added += 1


class CompactSlot(Compact):
    """A fixed pool of `budget` features; active step `i` adds `c phi_j(x)` into slot `j = i mod B`.

    This is DSG whose i-th feature is drawn from seed `i mod B`: paper-faithful for the first
    `B` active steps, then reusing the pool. It needs many more samples than `Compact`.

    """

    sketches_norm = True

    def add(self, c, v):
        self._note_rounding(v)
        j = self.n_added % self.size
        self.coef[j] += c * _SQRT2 * float(self._cos[j])
        self._add_to_sketch(v, c)
        self.n_added += 1


class Grow(FeatureStore):
    """Paper-faithful DSG: every active step adds a fresh feature. Memory grows without bound.

    For finite data only: on a stream, prediction cost and memory are O(steps x inputs).

    """

    unbounded = True

    def _initial_capacity(self) -> int:
        return 64

    def _slot_for_new_feature(self) -> int:
        self._reserve(self.n_inputs, self.size + 1)
        return self.size

    def _expected_size(self, n_added: int) -> int:
        return n_added

    def _expected_ids(self, n_added: int) -> np.ndarray:
        return np.arange(n_added)  # (called once the saved ids' shape says there are n_added)

    def add(self, c, v):
        self._note_rounding(v)
        slot = self._slot_for_new_feature()
        self._set_features(np.array([slot]), np.array([self.n_added]))
        if self.averaged is not None:
            self.averaged.replaced(slot)
        z = v.astype(self.dtype) @ self._omega[: self.n_inputs, slot] + self.phase[slot]
        self.coef[slot] = c * _SQRT2 * math.cos(float(z))
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

    unbounded = False

    def _initial_capacity(self) -> int:
        return self.budget

    def _slot_for_new_feature(self) -> int:
        return self.n_added % self.budget

    def _expected_size(self, n_added: int) -> int:
        return min(n_added, self.budget)

    def _expected_ids(self, n_added: int) -> np.ndarray:
        # Feature i is in slot i mod B: the newest B of them.
        newest = np.arange(max(n_added - self.budget, 0), n_added)
        ids = np.empty(len(newest), dtype=np.int64)
        ids[newest % self.budget] = newest
        return ids


POLICIES: dict[str, type[FeatureStore]] = {
    "compact": Compact,
    "compact_slot": CompactSlot,
    "truncate": Truncate,
    "grow": Grow,
}
