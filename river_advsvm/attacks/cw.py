"""Carlini & Wagner's L2 attack: the smallest perturbation that flips the label (2017)."""

from __future__ import annotations

import math

import numpy as np

from river_advsvm import inputs
from river_advsvm.attacks.base import Attack, accepted_box, adam_step, unusable_gradients

__all__ = ["MAX_CONST", "CarliniWagnerL2"]

#: The largest `c` of the binary search (C&W's own bound): past it, `c` times the margin's
#: gradient squared in Adam's second moment can overflow, and a sample whose steps all went to
#: NaN would read as robust.
MAX_CONST = 1e10

# tanh(w) never reaches +-1: inputs on the box's faces start from atanh(+-(1 - _TANH_MARGIN)),
# +-2.65 rather than C&W's +-7.25 (margin 1e-6), so that Adam can move them off the face within
# a few dozen steps; `to_inputs` undoes the margin and clips, so the search still starts at x.
_TANH_MARGIN = 1e-2


class TanhBox:
    """The change of variables `x = lo + (hi - lo) (tanh(w) + 1) / 2` that keeps `x` in the box.

    With `bounds=None` it is the identity, within the inputs the models accept.
    `to_inputs(to_variables(x)) == x` up to rounding: the small margin that keeps `w` finite
    on the box's faces is undone on the way back (and the result clipped), so the search
    starts exactly at `x`.
    """

    def __init__(self, bounds):
        # (Cut to the inputs the models accept: points past them, finite differences too,
        # would be refused as if the user had given them.)
        self.bounds = None if bounds is None else accepted_box(bounds)

    def to_variables(self, X: np.ndarray) -> np.ndarray:
        if self.bounds is None:
            return X.copy()
        lo, hi = self.bounds
        if hi == lo:  # a box of one point (cut to the inputs the models accept): w = 0 there
            return np.zeros_like(X, dtype=np.float64)
        z = (X - lo) / (hi - lo) * 2.0 - 1.0
        return np.arctanh(z * (1.0 - _TANH_MARGIN))

    def to_inputs(self, W: np.ndarray) -> np.ndarray:
        if self.bounds is None:  # (Adam's steps may overshoot past what the models accept)
            return np.clip(W, *accepted_box(None))
        lo, hi = self.bounds
        z = np.tanh(W) / (1.0 - _TANH_MARGIN)
        return np.clip(lo + (hi - lo) * (z + 1.0) / 2.0, lo, hi)

    def input_derivative(self, W: np.ndarray) -> np.ndarray:
        """`dx / dw`, entry by entry."""
        if self.bounds is None:
            return np.ones_like(W)
        lo, hi = self.bounds
        return (hi - lo) / 2.0 / (1.0 - _TANH_MARGIN) * (1.0 - np.tanh(W) ** 2)


class ConstantSearch:
    """Per-sample binary search on the constant `c` that weighs the margin against `||delta||^2`.

    `c` grows tenfold (up to `MAX_CONST`) until an attack succeeds, then bisects between the
    largest `c` that failed and the smallest that succeeded (Carlini & Wagner's schedule).
    """

    def __init__(self, n: int, initial: float):
        self.const = np.full(n, float(initial))
        self.lower = np.zeros(n)
        self.upper = np.full(n, math.inf)

    def update(self, succeeded: np.ndarray) -> None:
        self.upper = np.where(succeeded, np.minimum(self.upper, self.const), self.upper)
        self.lower = np.where(succeeded, self.lower, np.maximum(self.lower, self.const))
        bracketed = np.isfinite(self.upper)
        self.const = np.where(bracketed, (self.lower + self.upper) / 2.0,
                              np.minimum(self.const * 10.0, MAX_CONST))


class BestFound:
    """The closest adversarial point found so far for each sample."""

    def __init__(self, X: np.ndarray, margins: np.ndarray, confidence: float):
        self.X = X
        self.confidence = confidence
        self.points = X.copy()
        fooled = margins <= -confidence
        self.squared = np.where(fooled, 0.0, math.inf)  # a misclassified input needs no change

    def offer(self, points: np.ndarray, margins: np.ndarray, rows: np.ndarray | None = None):
        """Keep the points that fool the model closer than before; return which ones fool it.

        `rows` says which samples `points` belong to (default: all, in order).
        """
        rows = np.arange(len(self.X)) if rows is None else rows
        fooled = margins <= -self.confidence
        delta = points - self.X[rows]
        squared = np.einsum("ij,ij->i", delta, delta)
        better = fooled & (squared < self.squared[rows])
        self.points[rows[better]] = points[better]
        self.squared[rows[better]] = squared[better]
        return fooled


class CarliniWagnerL2(Attack):
    """Carlini & Wagner's L2 attack on the margin `y g(x)`.

    Minimises `||x' - x||_2^2 / u^2 + c max(y g(x') + confidence, 0)` with Adam over `w`, where
    `x' = lo + (hi - lo) (tanh(w) + 1) / 2` keeps `x'` in the box (no change of variables when
    `bounds` is None), for each `c` of a per-sample binary search. `u`, the unit distances are
    counted in, is the one in which the problem linearised at `x` flips at `c = 1` (`u^2 = 2
    |g(x)| / ||grad g(x)||_2^2`), at least 1 and within a box at most its width: the search
    finds the same flips whatever the units of the inputs. Returns, per sample, the
    closest point found that the model misclassifies (with margin `<= -confidence`), or the
    input itself when none was found. On a linear model without a box it finds the exact
    minimum `|g(x)| / ||w||_2`.

    Robust accuracy at L2 radius `r` is the fraction of samples whose returned perturbation is
    larger than `r` or that were not fooled: pass `epsilon=r` to get the points that count.

    Parameters
    ----------
    epsilon
        `None` to return the smallest flip found at any distance; a radius to return the input
        unchanged where that flip is farther than `epsilon`.
    confidence
        `kappa`: how far past the decision boundary the point must be.
    initial_const
        The first `c` of the binary search, at most 1e10 (`MAX_CONST`, which the search
        never passes either). Margins and their gradients are of order 1 here (not the large
        logits of a deep network), so the search starts at 1, not at 1e-3.
    search_steps
        Number of values of `c` tried per sample (Carlini & Wagner's 9).
    steps
        Adam iterations per value of `c`.
    learning_rate
        Adam's initial step, in the variables `w`; it decays (cosine, to 1%) over the `steps`
        of each `c`, so that the search ends precisely on the decision boundary. Without a
        box the variables are the inputs, in the data's units: the step is then this many
        times the sample's linearised distance to the boundary, `|g(x)| / ||grad g(x)||_2`
        (at least 1), so that a flip far from the sample is within reach.
    bounds
        `(lo, hi)` box of the inputs, or `None`.

    Examples
    --------

    >>> from river_advsvm import AdvLinearSVM
    >>> from river_advsvm.attacks import CarliniWagnerL2

    >>> model = AdvLinearSVM()
    >>> for _ in range(50):
    ...     model.learn_one({"a": 0.2, "b": 0.3}, False)
    ...     model.learn_one({"a": 0.9, "b": 0.7}, True)

    >>> x = {"a": 0.6, "b": 0.5}
    >>> attack = CarliniWagnerL2(bounds=None)
    >>> x_adv = attack.perturb_one(model, x, True)
    >>> model.predict_one(x), model.predict_one(x_adv)
    (True, False)

    The distance found is the exact `|g(x)| / ||w||_2` up to the optimiser's precision:

    >>> w = model.weights
    >>> exact = abs(model.decision_one(x)) / (w["a"] ** 2 + w["b"] ** 2) ** 0.5
    >>> round(exact, 4), round(float(attack.last_result.norms[0]), 4)
    (0.332, 0.332)

    """

    minimizes_norm = True

    def __init__(
        self,
        epsilon: float | None = None,
        confidence: float = 0.0,
        initial_const: float = 1.0,
        search_steps: int = 9,
        steps: int = 100,
        learning_rate: float = 0.05,
        bounds: tuple[float, float] | None = (0.0, 1.0),
    ):
        super().__init__(epsilon=epsilon, norm="l2", bounds=bounds)
        self.confidence = confidence
        self.initial_const = initial_const
        self.learning_rate = learning_rate
        self.search_steps, self.steps = _check_search(confidence, initial_const, search_steps,
                                                      steps, learning_rate)

    def _progress_total(self):
        return self.search_steps * self.steps

    def _evaluations(self, n_inputs):
        return self.search_steps * self.steps, self.search_steps + 2

    def _attack(self, oracle, X, bar):
        box = TanhBox(self.bounds)
        W0 = box.to_variables(X)
        # Adam moves each variable by about its step: without a box, by the step in the data's
        # units, which must then reach the boundary (DeepFool's linearised distance to it).
        rate = np.full((len(X), 1), self.learning_rate)
        # The distance is counted in a unit `u` of the data: the one at which the problem
        # linearised at the sample flips at c = 1 (`u^2 = 2 |g| / ||grad g||^2`), at least 1
        # and within a box at most its width. In raw units, with inputs in units of 1e6, a
        # flip's squared distance outweighed c times the margin at every c the search may take.
        margins, G = oracle.margins_and_gradients(X)
        lengths = np.sqrt(np.einsum("ij,ij->i", G, G))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            reach = np.where(lengths > 0, np.abs(margins) / lengths, 1.0)
            flip_unit = np.where(lengths > 0, np.sqrt(2.0 * np.abs(margins)) / lengths, 1.0)
        widest = inputs.MAX_ABS_VALUE if self.bounds is None else box.bounds[1] - box.bounds[0]
        unit = np.clip(np.nan_to_num(flip_unit, nan=1.0), 1.0, max(1.0, widest))[:, None]
        if self.bounds is None:
            rate[:, 0] *= np.clip(np.nan_to_num(reach, nan=1.0), 1.0, inputs.MAX_ABS_VALUE)
        best = BestFound(X, margins, self.confidence)
        search = ConstantSearch(len(X), self.initial_const)
        no_gradient = np.zeros(len(X), dtype=bool)
        kappa = self.confidence
        # Cosine decay of the step within each c, from learning_rate to 1% of it: the early
        # steps explore, the last ones settle on the boundary instead of hopping across it.
        decay = 0.01 + 0.99 * 0.5 * (1.0 + np.cos(np.pi * np.arange(self.steps) / self.steps))
        for _ in range(self.search_steps):
            W, M, V = W0.copy(), np.zeros_like(W0), np.zeros_like(W0)
            succeeded = np.zeros(len(X), dtype=bool)
            for t in range(self.steps + 1):
                X_t = box.to_inputs(W)
                if t == self.steps:
                    succeeded |= best.offer(X_t, oracle.margins(X_t))
                    break
                margins, G = oracle.margins_and_gradients(X_t)
                succeeded |= best.offer(X_t, margins)
                no_gradient |= unusable_gradients(G, margins, X) & (margins > -kappa)
                hinge_active = (search.const * (margins + kappa > 0.0))[:, None]
                grad = (2.0 * (X_t - X) / unit**2 + hinge_active * G) * box.input_derivative(W)
                adam_step(W, grad, M, V, t + 1, rate * decay[t], 0.9, 0.999)
                bar.update()
            search.update(succeeded)
        return best.points, no_gradient


def _check_search(confidence, initial_const, search_steps, steps,
                  learning_rate) -> tuple[int, int]:
    """The parameters C&W and ZOO share checked; their counts `search_steps` and `steps` as
    plain ints."""
    inputs.check_number("confidence", confidence, lambda v: v >= 0, ">= 0")
    inputs.check_number("initial_const", initial_const, lambda v: 0 < v <= MAX_CONST,
                        f"in (0, {MAX_CONST:g}]")
    counts = (inputs.check_count("search_steps", search_steps),
              inputs.check_count("steps", steps))
    inputs.check_number("learning_rate", learning_rate, lambda v: v > 0, "> 0")
    return counts
