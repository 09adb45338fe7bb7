"""Whether a binary classifier has collapsed to a constant on the stream it learns from.

A model whose decisions no longer depend on the input predicts no better than a constant: an
over-regularised step (or an adversarial term too large for the data) flattens `f`, and the
bias, which wanders with the labels, sets the decisions. `CollapseWatch` keeps, for the last
`window` learned samples, each label's sign, its decision `g(x)` and whether its sign was right,
as running sums (O(1) a sample). It calls it a collapse when each label is at least `min_share`
of the window and both hold:

- the decisions barely tell the labels apart: the mean decision of one label is within
  `MIN_GAP` (a quarter of the unit margin the hinge loss asks of each side) of the other's; a
  model that learns anything separates them by far more;
- the decisions are right no more often than always predicting the window's majority label
  (with `SLACK`): an input-independent guess would do as well.

Examples
--------

>>> from river_advsvm.collapse import CollapseWatch

>>> watch = CollapseWatch(window=4, min_share=0.25)
>>> for label, margin in [(1, -0.35), (-1, -0.45), (1, -0.30), (-1, -0.40)]:
...     watch.update(label, margin)
>>> watch.collapsed
True
>>> watch.update(1, 0.8)
>>> watch.collapsed
False

"""

from __future__ import annotations

__all__ = ["MIN_GAP", "SLACK", "CollapseWarning", "CollapseWatch"]

#: Mean decisions of the two labels closer than this do not tell them apart.
MIN_GAP = 0.25
#: How much better than the majority label a window's accuracy must be to show learning.
SLACK = 0.05


class CollapseWarning(RuntimeWarning):
    """A model's decisions have not told the labels apart over a window in which both labels
    arrived: it predicts no better than a constant."""


class CollapseWatch:
    """Running sums over the last `window` samples: labels, decisions by label, right signs.

    Parameters
    ----------
    window
        How many of the latest learned samples are watched.
    min_share
        The least share of the window each label must have for a collapse to be called.

    """

    def __init__(self, window: int = 256, min_share: float = 0.1):
        self.window = window
        self.min_share = min_share
        self._entries: list[tuple[bool, float, bool]] = [(False, 0.0, False)] * window
        self._seen = 0
        self._right = 0
        self._count = {True: 0, False: 0}
        self._total = {True: 0.0, False: 0.0}

    def update(self, label: float, margin: float) -> None:
        """Record one learned sample: the sign of its label and its decision `margin`."""
        slot = self._seen % self.window
        if self._seen >= self.window:
            old_label, old_margin, old_right = self._entries[slot]
            self._count[old_label] -= 1
            self._total[old_label] -= old_margin
            self._right -= old_right
        positive = label > 0
        right = (margin > 0) == positive
        self._entries[slot] = (positive, margin, right)
        self._count[positive] += 1
        self._total[positive] += margin
        self._right += right
        self._seen += 1

    @property
    def collapsed(self) -> bool:
        """True when the window is full, each label is at least `min_share` of it, the mean
        decisions of the labels are within `MIN_GAP`, and the window's accuracy is at most the
        majority label's share plus `SLACK`."""
        count, total = self._count, self._total
        if self._seen < self.window or min(count.values()) < self.min_share * self.window:
            return False
        gap = abs(total[True] / count[True] - total[False] / count[False])
        return gap < MIN_GAP and self._right <= max(count.values()) + SLACK * self.window
