"""An estimate of the average's margin between its exact ones, for the collapse watch.

A model that predicts with the average of its iterates (`averaging`) keeps, besides the vectors
`f` holds, vectors `f` gave up that the average still weighs. The average's margin over the
vectors `f` holds comes with the kernel row learning computes anyway; the part of the others
needs a product of its own, so the model takes it at every few learned samples only. In
between, the collapse watch gets an estimate: the part over the vectors held plus the recent
mean of the part of the others (`GivenUpEstimate.part`).

Where that part varies with the input more than around its mean (sparse inputs, whose vectors
are mostly given up and each near few others), the estimate can decide one way where the
average decides both: at each exact margin the estimate is checked against it, and while the
recent share of the signs it got wrong is above `MAX_MISSES`, no estimate is given (the watch
then judges the exact margins alone, in blocks that take longer to fill).

Examples
--------

>>> from river_advsvm.given_up_estimate import GivenUpEstimate

>>> estimate = GivenUpEstimate(horizon=2)
>>> estimate.of(0.3)  # nothing seen yet: the held part alone
0.3
>>> estimate.exact(held=0.3, exact=-0.5)  # the vectors given up added -0.8
>>> estimate.part, estimate.misses
(-0.4, 0.5)
>>> estimate.of(0.3) is None  # wrong on half of the signs lately: no estimate
True

"""

from __future__ import annotations

import math

__all__ = ["HORIZON", "MAX_MISSES", "GivenUpEstimate"]

#: The exact margins the means run over (exponential means): with an exact margin every 16
#: learned samples, about 256 samples. (One sign missed alone keeps the share below
#: `MAX_MISSES`.)
HORIZON = 16
#: The largest recent share of wrong signs at which the estimate is still given.
MAX_MISSES = 0.1


class GivenUpEstimate:
    """The recent mean of the average's part from the vectors `f` gave up, and the recent share
    of the exact margins whose sign the estimate missed.

    Parameters
    ----------
    horizon
        The exact margins the two means run over.

    """

    def __init__(self, horizon: int = HORIZON):
        self.horizon = horizon
        self.part = 0.0
        self.misses = 0.0

    def of(self, held: float) -> float | None:
        """The estimate of a margin whose part over the vectors held is `held`; None while
        the estimate missed too many signs lately."""
        return held + self.part if self.misses <= MAX_MISSES else None

    def exact(self, held: float, exact: float) -> None:
        """An exact margin, `exact`, of which `held` is the part over the vectors held."""
        missed = (held + self.part > 0.0) != (exact > 0.0)
        self.misses += (missed - self.misses) / self.horizon
        self.part += (exact - held - self.part) / self.horizon

    def negate(self) -> None:
        """The model's margins changed sign (its labels swapped places)."""
        self.part = -self.part

    def reset(self) -> None:
        """The average started over: it keeps no vector given up."""
        self.part = 0.0

    def state(self) -> list[float]:
        return [self.part, self.misses]

    def restore(self, state, max_part: float) -> None:
        """Take back `state()`; `ValueError` (nothing changed) unless it is one of an estimate
        whose part is at most `max_part` in size."""
        if not (isinstance(state, list) and len(state) == 2
                and all(type(v) in (int, float) and math.isfinite(v) for v in state)
                and abs(state[0]) <= max_part and 0.0 <= state[1] <= 1.0):
            raise ValueError(f"the average's estimate {state!r:.80} is not one of an estimate")
        self.part, self.misses = map(float, state)
