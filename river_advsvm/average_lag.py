"""When the average of a model's iterates lags behind a stream that changed.

An average of the iterates over a horizon of `H` samples follows a change of the stream over
about `H` samples: after a sudden one (the labels swapped, a new concept), the average keeps
deciding by the old rule while the latest iterate has learned the new one. `LagWatch` compares
the two on the samples the model learns, where both decided: a one-sided CUSUM (Page 1954) of
the samples the iterate decided right and the average wrong, less those the other way round,
less an `allowance` per sample. It rises only while the iterate is clearly the better of the
two; past `threshold` the average should start over from the iterate (the model then averages
afresh: its first iterates weigh most, so the new average follows within a few hundred
samples).

While the stream does not change, the average is the better of the two (that is what it is
for), so the sum stays near 0: each sample on which they disagree moves it by 1, and without a
lead of the iterate the allowance pulls it back.

Examples
--------

>>> from river_advsvm.average_lag import LagWatch

>>> watch = LagWatch(allowance=0.1, threshold=5.0)
>>> [watch.update(iterate_right=True, average_right=False) for _ in range(6)]
[False, False, False, False, False, True]
>>> watch.restarts, watch.total
(1, 0.0)
>>> watch.update(iterate_right=False, average_right=True), watch.total
(False, 0.0)

"""

from __future__ import annotations

__all__ = ["ALLOWANCE", "LagWatch", "THRESHOLD"]

#: Subtracted at each sample: a lead of the iterate below this share of the samples is none.
ALLOWANCE = 0.1
#: The sum past which the average starts over. On the samples where the two disagree at random
#: (the iterate no better than the average), the sum is a walk pulled to 0 by the allowance:
#: it reaches this rarely (about once in tens of thousands of samples where they disagree
#: half the time); after a swap of the labels it does within about 30.
THRESHOLD = 20.0


class LagWatch:
    """The one-sided CUSUM of the samples the latest iterate decided right and the average
    wrong, less the others.

    Parameters
    ----------
    allowance
        Subtracted at each sample.
    threshold
        The sum past which the average should start over.

    """

    def __init__(self, allowance: float = ALLOWANCE, threshold: float = THRESHOLD):
        self.allowance = allowance
        self.threshold = threshold
        self.total = 0.0
        self.restarts = 0

    def update(self, iterate_right: bool, average_right: bool) -> bool:
        """One learned sample on which both decided; whether the average should start over
        now (the sum then starts again at 0)."""
        self.total = max(0.0, self.total + (iterate_right - average_right) - self.allowance)
        if self.total <= self.threshold:
            return False
        self.total = 0.0
        self.restarts += 1
        return True

    def state(self) -> dict:
        return {"total": self.total, "restarts": self.restarts}

    def restore(self, state: dict) -> None:
        """Take back `state()`; `ValueError` (nothing changed) unless it is one of a watch."""
        if not isinstance(state, dict):
            raise ValueError("the average's lag watch must be a dict")
        total, restarts = state.get("total"), state.get("restarts")
        if not (type(total) in (int, float) and 0.0 <= total <= self.threshold
                and type(restarts) is int and restarts >= 0):
            raise ValueError(f"the average's lag watch {state!r:.80} is not one of a watch")
        self.total, self.restarts = float(total), restarts
