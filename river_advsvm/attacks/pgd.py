"""PGD: K projected steps against the margin's gradient (Madry et al. 2018)."""

from __future__ import annotations

import numpy as np

from river_advsvm import inputs
from river_advsvm.attacks.base import (
    Attack, check_seed, project, steepest_direction,
    unusable_gradients,
)

__all__ = ["PGD"]


class PGD(Attack):
    """Projected gradient descent on the margin `y g(x)` over the ball and the box.

    Each of the `steps` iterations moves by `step_size` along the steepest descent direction of
    the norm (the gradient's sign for L-inf, the normalised gradient for L2) and projects back
    onto the threat set: exactly for L-inf; for L2 with a box, onto the ball and then into the
    box, a point of the set but not always the nearest, so the iterates can stop short of the
    worst point where many inputs sit at the box's edge (pixels at 0 or 1: on MNIST 4 vs 9 at
    L2 1.0 the exact projection left 0.2 to 0.6 points fewer samples right). The point
    returned is the iterate with the smallest margin (the start included), so a step that
    overshoots never makes the attack weaker. With `restarts`, the
    same iterations run again from that many uniform random points of the ball (projected onto
    the box), and each sample gets the point of smallest margin over all runs: never weaker
    than one run, and on models whose margin has flat regions or several valleys in the ball
    (a kernel machine on few inputs) much stronger.

    Parameters
    ----------
    epsilon
        Radius of the threat ball (the paper's 8/255 by default).
    norm
        'linf' or 'l2'.
    steps
        Number of iterations `K` (the paper's 10).
    step_size
        Step `s`; `None` means `epsilon / 4` (the paper's choice).
    random_start
        Start from a uniform random point of the ball (then projected onto the box) instead
        of the input itself.
    restarts
        Further runs from random starts (Madry et al. use several); the attack costs
        `restarts + 1` times as much.
    seed
        Seed of the random starts. Every call draws from it afresh, so the same batch gets the
        same starts each time.
    bounds
        `(lo, hi)` box of the inputs, or `None`.

    Examples
    --------

    >>> from river_advsvm import AdvLinearSVM
    >>> from river_advsvm.attacks import PGD

    >>> model = AdvLinearSVM()
    >>> for _ in range(50):
    ...     model.learn_one({"a": 0.2, "b": 0.3}, False)
    ...     model.learn_one({"a": 0.9, "b": 0.7}, True)

    >>> x = {"a": 0.6, "b": 0.5}
    >>> x_adv = PGD(epsilon=0.1, steps=10).perturb_one(model, x, True)
    >>> {k: round(v, 6) for k, v in x_adv.items()}
    {'a': 0.5, 'b': 0.4}

    """

    def __init__(
        self,
        epsilon: float = 8 / 255,
        norm: str = "linf",
        steps: int = 10,
        step_size: float | None = None,
        random_start: bool = False,
        seed: int | None = None,
        bounds: tuple[float, float] | None = (0.0, 1.0),
        restarts: int = 0,
    ):
        super().__init__(epsilon=epsilon, norm=norm, bounds=bounds)
        # Numpy numbers (np.int64(3), taken from an array) as the plain ones they hold.
        self.steps = inputs.check_count("steps", steps)
        self.step_size = step_size
        self.random_start = inputs.check_flag("random_start", random_start)
        self.seed = check_seed(seed)
        if not (inputs.is_whole(restarts) and 0 <= restarts <= 1000):
            raise ValueError(f"restarts must be an int in [0, 1000], got {restarts!r}")
        self.restarts = int(restarts)
        if step_size is not None:
            inputs.check_number("step_size", step_size, lambda v: v > 0, "> 0 (or None)")

    def _random_start(self, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, d = X.shape
        if self.norm == "linf":
            # Scaled after the draw: uniform(-epsilon, epsilon) overflows its range's width
            # for an epsilon past half the largest float.
            delta = self.epsilon * rng.uniform(-1.0, 1.0, size=(n, d))
        else:
            # Uniform in the L2 ball: a uniform direction, radius epsilon U^(1/d).
            direction = rng.normal(size=(n, d))
            direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True), 1e-300)
            delta = direction * self.epsilon * rng.random((n, 1)) ** (1.0 / max(d, 1))
        return project(X + delta, X, self.epsilon, self.norm, self.bounds)

    def _progress_total(self):
        return self.steps * (self.restarts + 1)

    def _evaluations(self, n_inputs):
        # (each run ends with one margin-only evaluation; the result's check is one more)
        return self.steps * (self.restarts + 1), self.restarts + 2

    def _attack(self, oracle, X, bar):
        rng = np.random.default_rng(self.seed)
        best, best_margins, no_gradient = None, None, np.zeros(len(X), dtype=bool)
        for run in range(self.restarts + 1):
            start = self._random_start(X, rng) if run or self.random_start else X.copy()
            X_adv, margins, stuck = self._one_run(oracle, X, start, bar)
            if best is None:
                best, best_margins = X_adv, margins
            else:
                better = margins < best_margins
                best[better] = X_adv[better]
                best_margins = np.where(better, margins, best_margins)
            # (A sample counts as without a usable gradient when every run met none.)
            no_gradient = stuck if run == 0 else no_gradient & stuck
        return best, no_gradient

    def _one_run(self, oracle, X, X_adv, bar):
        """One run of the iterations from `X_adv`: the point of smallest margin for each row,
        that margin, and the rows that met no usable gradient."""
        step = self.epsilon / 4 if self.step_size is None else self.step_size
        best, best_margins = X_adv.copy(), None
        no_gradient = np.zeros(len(X), dtype=bool)
        for k in range(self.steps + 1):
            if k < self.steps:
                margins, G = oracle.margins_and_gradients(X_adv)
            else:
                margins = oracle.margins(X_adv)
            if best_margins is None:
                best_margins = margins
            else:
                better = margins < best_margins
                best[better] = X_adv[better]
                best_margins = np.where(better, margins, best_margins)
            if k == self.steps:
                break
            no_gradient |= unusable_gradients(G, margins, X) & (margins > 0)
            bar.update()
            X_adv = project(
                X_adv - step * steepest_direction(G, self.norm), X, self.epsilon, self.norm,
                self.bounds,
            )
        return best, best_margins, no_gradient
