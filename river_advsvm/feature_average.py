"""The average of the random-feature model's `f` over its recent steps.

The average of `river_advsvm.iterate_average`, for `f = sum_j a_j phi_j` over the features of
a `river_advsvm.budget.FeatureStore`: the average is `sum_j abar_j phi_j` over the same
features, with averaged coefficients `abar`. A feature that leaves the store (`truncate` gives
its slot to a new one) leaves the average too: by then its coefficient has been shrunk
`budget` times.

The average's decision at the row the store's latest `value` computed is its cached row of
features times `abar`: no projection is computed twice.

"""

from __future__ import annotations

import copy
import math

import numpy as np

from river_advsvm.iterate_average import IterateAverage

__all__ = ["AveragedFeatures"]

_SQRT2 = math.sqrt(2.0)


class AveragedFeatures(IterateAverage):
    """`fbar`, the average of a `FeatureStore`'s `f` over its recent steps (see the module).

    Parameters
    ----------
    store
        The `FeatureStore` whose `f` is averaged, from now on (the first `update` sets the
        average to `f`).
    horizon
        The horizon of the exponential average, in learned samples.

    """

    def __init__(self, store, horizon: int):
        super().__init__(store, horizon)
        # Averaged coefficients, slot by slot (entries past the store's size are stale).
        self._coef = np.zeros(max(len(store.coef), 1))

    @property
    def coefficients(self) -> np.ndarray:
        return self._coef[: self.store.size]

    # -- the store's events ---------------------------------------------------------------------

    def replaced(self, slot: int) -> None:
        """Slot `slot` of the store holds a new feature: its averaged coefficient starts at 0
        (the feature it held, if any, has left `f`)."""
        if slot >= len(self._coef):
            extra = max(slot + 1, 2 * len(self._coef)) - len(self._coef)
            self._coef = np.concatenate([self._coef, np.zeros(extra)])
        self._coef[slot] = 0.0

    def negate(self) -> None:
        """`fbar <- -fbar` with `f` (the model's labels swapped sides)."""
        self._coef[: self.store.size] *= -1.0
        self.bias = -self.bias

    # -- averaging ------------------------------------------------------------------------------

    def update(self, bias: float, samples: float = 1.0) -> None:
        """One learned sample, standing for `samples` of the stream (see
        `river_advsvm.iterate_average`): `fbar <- (1 - rho) fbar + rho f` and the same for the
        bias."""
        rho = self._next_weight(bias, samples)
        store = self.store
        if store.size > len(self._coef):
            self.replaced(store.size - 1)
        average = self._coef[: store.size]
        average *= 1.0 - rho
        average += rho * store.coefficients

    # -- f at rows ------------------------------------------------------------------------------

    def value_at_latest_row(self, given_up: bool = True) -> float:
        """`fbar` at the row of the store's latest `value`: its features times `abar`
        (`given_up` is the support vectors' average's: features keep nothing given up)."""
        return _SQRT2 * float(self.coefficients @ self.store._cos)

    def expansion(self):
        """`fbar` as a store of its own: the store's features with the averaged coefficients
        (a shallow copy, for values, gradients and certificates)."""
        whole = copy.copy(self.store)
        whole.coef = self._coef
        whole.averaged = None
        return whole

    def values(self, V: np.ndarray, U: np.ndarray | None = None, extra_hashes=None) -> np.ndarray:
        return self.expansion().values(V, U, extra_hashes)

    def gradients(self, V: np.ndarray, U: np.ndarray | None = None, extra_hashes=None):
        return self.expansion().gradients(V, U, extra_hashes)

    # -- persistence ----------------------------------------------------------------------------

    def state(self) -> tuple[dict, dict]:
        """JSON scalars and numpy arrays from which `restore` rebuilds this average."""
        return self._scalars(), {"average_coefficients": self.coefficients.copy()}

    @classmethod
    def restore(cls, store, scalars: dict, arrays: dict) -> AveragedFeatures:
        """The average `state` saved, over the restored `store`; `ValueError` if it is not one
        this store can have (checked before anything is built)."""
        checked = cls._checked_scalars(scalars)
        if set(arrays) & {"average_orphans", "average_heirs"}:
            raise ValueError("the average's state is one of support vectors")
        coef = arrays.get("average_coefficients")
        if coef is None:
            raise ValueError("the average's state lacks 'average_coefficients'")
        if not (coef.dtype == np.float64 and coef.shape == (store.size,)):
            raise ValueError("the average's arrays do not fit the store")
        if not np.isfinite(coef).all():
            raise ValueError("the average's values are not finite")
        average = cls._restored(store, checked)
        average._coef[: store.size] = coef
        return average
