"""What the averages of a model's iterates share: the weight of each new iterate and the
averaged bias.

`fbar_t = (1 - rho_t) fbar_{t-1} + rho_t f_t` with `rho_t = max(2 / (t + 1), 1 / horizon)`:
first the polynomial-decay average of Shamir and Zhang (iterate `t` weighs in proportion to
`t`, so the early, poor iterates fade as the stream goes on), from `t = 2 horizon` an
exponential average of that horizon (a stream that drifts is followed). How `fbar` itself is
kept depends on the representation: `river_advsvm.support_average` (support vectors) and
`river_advsvm.feature_average` (random features).

"""

from __future__ import annotations

import math

__all__ = ["IterateAverage"]


class IterateAverage:
    """The schedule and the bias of an average of a store's iterates.

    Parameters
    ----------
    store
        The store whose `f` is averaged, from now on.
    horizon
        The horizon of the exponential average, in learned samples.

    """

    def __init__(self, store, horizon: int):
        self.store = store
        self.horizon = horizon
        self.count = 0  # samples averaged
        self.bias = 0.0

    def _next_weight(self, bias: float) -> float:
        """One more learned sample: its iterate's weight `rho_t`; the bias is averaged now."""
        self.count += 1
        rho = max(2.0 / (self.count + 1), 1.0 / self.horizon)
        self.bias += rho * (bias - self.bias)
        return rho

    def _scalars(self) -> dict:
        return {"horizon": self.horizon, "count": self.count, "bias": self.bias}

    @staticmethod
    def _checked_scalars(scalars: dict) -> tuple[int, int, float]:
        """The saved `(horizon, count, bias)`; `ValueError` if they are not valid."""
        if not isinstance(scalars, dict):
            raise ValueError("the average's state must be a dict")
        horizon, count, bias = (scalars.get(k) for k in ("horizon", "count", "bias"))
        if not (type(horizon) is int and 1 <= horizon and type(count) is int and count >= 0
                and type(bias) is float and math.isfinite(bias)):
            raise ValueError("the average's horizon, count or bias is not valid")
        return horizon, count, bias

    @classmethod
    def _restored(cls, store, scalars: tuple[int, int, float]):
        """An average over `store` with the checked scalars (its arrays are the subclass')."""
        horizon, count, bias = scalars
        average = cls(store, horizon)
        average.count, average.bias = count, bias
        return average
