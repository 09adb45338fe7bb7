"""Online temperature scaling: probabilities from SVM margins.

`P(positive | x) = sigmoid(s * g(x))` with a single temperature `s > 0` fitted online by
AdaGrad on the log loss, each sample scored by the margin the model gave it *before* learning
from it (test-then-train, so the fit is on held-out margins). This is Platt scaling without its
offset: the map stays monotone and `P = 0.5` exactly at `g = 0`, so the most probable label is
always the sign of the margin, which is what attacks and certificates reason about (for margins
so small that the sigmoid rounds to 1/2, `probability` keeps `P` on the margin's side).

"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["Temperature", "probability", "probability_one", "sigmoid"]

#: How far from 1/2 the probability of a margin's own class is kept, at the least.
_SIDE = 2.0**-48


def sigmoid(z):
    # exp(-log(1 + e^-z)) keeps its relative precision far into both tails (tanh rounds to +-1).
    return np.exp(-np.logaddexp(0.0, -z))


def probability(scale: float, margins):
    """`sigmoid(scale * margins)`, kept on the side of 1/2 that the margin's sign says.

    `sigmoid(z)` rounds to exactly 1/2 for `|z|` below about 1e-16 (5e-14 for a margin, at the
    smallest temperature): both labels of a binary model would get 1/2, and a one-vs-rest
    model take the first of two labels whose margins are of opposite signs. A positive margin
    gets at least `1/2 + 2^-48` and a negative one at most `1/2 - 2^-48`, far more apart than
    the rounding of a one-vs-rest model's normalisation; elsewhere this is the sigmoid.
    """
    margins = np.asarray(margins, dtype=float)
    p = sigmoid(scale * margins)
    return np.where(margins > 0, np.maximum(p, 0.5 + _SIDE),
                    np.where(margins < 0, np.minimum(p, 0.5 - _SIDE), p))


def probability_one(scale: float, margin: float) -> float:
    """`probability` of one margin, as a float (without the arrays, several times faster)."""
    p = float(sigmoid(scale * margin))
    if margin > 0:
        return max(p, 0.5 + _SIDE)
    return min(p, 0.5 - _SIDE) if margin < 0 else p


class Temperature:
    """`sigmoid(scale * margin)`, `scale` fitted by AdaGrad on the log loss.

    Parameters
    ----------
    learning_rate
        AdaGrad's base step.
    min_scale
        Lower bound on the temperature, which keeps the map strictly increasing.

    """

    def __init__(self, learning_rate: float = 0.5, min_scale: float = 1e-3):
        self.learning_rate = learning_rate
        self.min_scale = min_scale
        self.scale = 1.0
        self.grad_squares = 0.0

    def proba(self, margins):
        """Probability of the positive class for each margin (see `probability`)."""
        return probability(self.scale, margins)

    def update_one(self, g: float, y: float) -> None:
        """One AdaGrad step on a pre-update margin `g` and a label sign `y` in {-1, +1}."""
        target = 0.5 * (y + 1.0)
        p = 0.5 * (1.0 + math.tanh(0.5 * self.scale * g))
        grad = (p - target) * g
        self.grad_squares += grad * grad
        if self.grad_squares > 0.0:
            step = self.learning_rate * grad / math.sqrt(self.grad_squares)
            self.scale = max(self.min_scale, self.scale - step)

    def update(self, margins: np.ndarray, signs: np.ndarray) -> None:
        """`update_one` for each (margin, sign), in order."""
        for g, y in zip(margins.tolist(), signs.tolist()):
            self.update_one(g, y)
