"""What the averages of a model's iterates share: the weight of each new iterate and the
averaged bias.

`fbar_t = (1 - rho_t) fbar_{t-1} + rho_t f_t` with `rho_t = max(2 / (t + 1), 1 / horizon)`:
first the polynomial-decay average of Shamir and Zhang (iterate `t` weighs in proportion to
`t`, so the early, poor iterates fade as the stream goes on), from `t = 2 horizon` an
exponential average of that horizon (a stream that drifts is followed). A worker of a group
whose models are averaged learns samples that each stand for several samples of the group's
stream (`AdvKernelSVM.group_steps`): its iterate then takes the weight of that many steps of
the schedule at once, so that its average, like its steps, follows one model learning the
whole stream (the count is then in the group's samples, and need not be whole). How `fbar`
itself is kept depends on the representation: `river_advsvm.support_average` (support
vectors) and `river_advsvm.feature_average` (random features).

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
        self.count: int | float = 0  # samples averaged (of a group's stream: see the module)
        self.bias = 0.0

    def _next_weight(self, bias: float, samples: float = 1.0) -> float:
        """One more learned sample, standing for `samples` of the stream: its iterate's weight,
        `rho_t` (`1 - prod (1 - rho_t)` over the `samples` steps it stands for); the bias is
        averaged now."""
        before = self.count
        self.count = before + samples
        if samples == 1.0:
            rho = max(2.0 / (self.count + 1), 1.0 / self.horizon)
        else:
            # prod (1 - 2 / (t + 1)) = c (c + 1) / (t (t + 1)) from c to t, while 2 / (t + 1)
            # is above 1 / horizon (up to t = 2 horizon - 1); then (1 - 1 / horizon) per step.
            turn = 2.0 * self.horizon - 1.0
            c, t = min(before, turn), min(self.count, turn)
            kept = c * (c + 1.0) / (t * (t + 1.0))
            kept *= (1.0 - 1.0 / self.horizon) ** (max(self.count, turn) - max(before, turn))
            rho = 1.0 - kept
        self.bias += rho * (bias - self.bias)
        return rho

    def _scalars(self) -> dict:
        return {"horizon": self.horizon, "count": self.count, "bias": self.bias}

    @staticmethod
    def _checked_scalars(scalars: dict) -> tuple[int, int | float, float]:
        """The saved `(horizon, count, bias)`; `ValueError` if they are not valid."""
        if not isinstance(scalars, dict):
            raise ValueError("the average's state must be a dict")
        horizon, count, bias = (scalars.get(k) for k in ("horizon", "count", "bias"))
        if not (type(horizon) is int and 1 <= horizon and type(count) in (int, float)
                and 0 <= count < math.inf and type(bias) is float and math.isfinite(bias)):
            raise ValueError("the average's horizon, count or bias is not valid")
        return horizon, count, bias

    @classmethod
    def _restored(cls, store, scalars: tuple[int, int | float, float]):
        """An average over `store` with the checked scalars (its arrays are the subclass')."""
        horizon, count, bias = scalars
        average = cls(store, horizon)
        average.count, average.bias = count, bias
        return average
