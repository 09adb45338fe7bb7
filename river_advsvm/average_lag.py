"""When the average of a model's iterates lags behind a stream that changes.

An average of the iterates over a horizon of `H` samples follows a change of the stream over
about `H` samples: after a sudden one (the labels swapped, a new concept), the average keeps
deciding by the old rule while the latest iterate has learned the new one; on a stream whose
concept moves at every sample, it stays behind for good. `LagWatch` compares the two on the
samples the model learns where they disagree (exactly one of them is right there): a one-sided
CUSUM (Page 1954) of the samples the iterate won, less those the average won, less an
`allowance` per disagreement, and the same with the roles swapped. Past `threshold`, the first
says the average should start over from the iterate with half its horizon (it lagged: the
stream moves faster than that horizon follows); the second, that the average decides better,
so that a horizon shortened so may grow back (twice as long, up to the model's `averaging`).

While the stream does not change, the average is the better of the two (that is what it is
for): the first sum stays near 0, pulled back by the allowance at each disagreement.

Examples
--------

>>> from river_advsvm.average_lag import LagWatch

>>> watch = LagWatch(allowance=0.1, threshold=5.0)
>>> [watch.update(iterate_right=True, average_right=False) for _ in range(6)]
[None, None, None, None, None, 'restart']
>>> watch.restarts, watch.total
(1, 0.0)

A sample both decided alike says nothing; the average's own lead is summed as well:

>>> watch.update(iterate_right=True, average_right=True), watch.total
(None, 0.0)
>>> [watch.update(iterate_right=False, average_right=True) for _ in range(6)][-1]
'lengthen'

"""

from __future__ import annotations

__all__ = ["ALLOWANCE", "LENGTHEN", "LagWatch", "RESTART", "THRESHOLD"]

#: Subtracted from each sum at each disagreement: a lead below this share of the
#: disagreements is none.
ALLOWANCE = 0.2
#: The sum past which the average starts over (or its horizon grows back). Where the two are
#: as good as each other, each sum is a walk pulled to 0 by the allowance, and it reaches this
#: rarely; after a swap of the labels, within a few dozen disagreements.
THRESHOLD = 20.0
#: What `LagWatch.update` answers when the average should start over with half its horizon,
#: and when its horizon may grow back.
RESTART, LENGTHEN = "restart", "lengthen"


class LagWatch:
    """Two one-sided CUSUMs over the samples on which the latest iterate and the average
    disagree: `total`, the iterate's lead, and `ahead`, the average's.

    Parameters
    ----------
    allowance
        Subtracted from each sum at each disagreement.
    threshold
        The sum past which the watch says so.

    """

    def __init__(self, allowance: float = ALLOWANCE, threshold: float = THRESHOLD):
        self.allowance = allowance
        self.threshold = threshold
        self.total = 0.0
        self.ahead = 0.0
        self.restarts = 0

    def update(self, iterate_right: bool, average_right: bool) -> str | None:
        """One learned sample on which both decided: `RESTART` if the average should start
        over now, `LENGTHEN` if its horizon may grow back, else None (both sums start again
        at 0 after either)."""
        if iterate_right == average_right:
            return None
        lead = 1.0 if iterate_right else -1.0
        self.total = max(0.0, self.total + lead - self.allowance)
        self.ahead = max(0.0, self.ahead - lead - self.allowance)
        if self.total > self.threshold:
            self.total = self.ahead = 0.0
            self.restarts += 1
            return RESTART
        if self.ahead > self.threshold:
            self.total = self.ahead = 0.0
            return LENGTHEN
        return None

    def __setstate__(self, state: dict) -> None:
        # A watch pickled when it summed every sample (no `ahead`): this kind, with its count.
        if "ahead" not in state:
            self.__init__()
            self.restarts = state.get("restarts", 0)
            return
        self.__dict__.update(state)

    def state(self) -> dict:
        return {"total": self.total, "ahead": self.ahead, "restarts": self.restarts}

    def restore(self, state: dict) -> None:
        """Take back `state()`; `ValueError` (nothing changed) unless it is one of a watch. A
        state without `ahead` is of a watch that summed every sample, not the disagreements:
        its count of restarts is kept, its sum is not evidence for this watch (0)."""
        if not isinstance(state, dict):
            raise ValueError("the average's lag watch must be a dict")
        total, restarts = state.get("total"), state.get("restarts")
        ahead = state.get("ahead", 0.0)
        if not (all(type(v) in (int, float) and 0.0 <= v <= self.threshold
                    for v in (total, ahead))
                and type(restarts) is int and restarts >= 0):
            raise ValueError(f"the average's lag watch {state!r:.80} is not one of a watch")
        if "ahead" not in state:
            total = 0.0
        self.total, self.ahead, self.restarts = float(total), float(ahead), restarts
