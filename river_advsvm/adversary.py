"""The inner maximization of adversarial training: the attacker's point near one sample.

Adversarial training minimises the hinge loss at the worst point of the threat ball around each
sample. `AdvKernelSVM` finds its point the way the attacks of `river_advsvm.attacks` do, by
projected gradient steps on the model's own margin, with the exact input gradient of `f` (for
support vectors it costs one more product with the stored vectors, from the kernel row the
margin already computed), and stops them where the sample crosses the decision boundary
(`attacker_point`). This module holds that loop and the geometry of one step: the steepest
direction for the norm, the projection onto the ball, the pixel box and the inputs the attacker
may move.

Why stop at the boundary: where the threat balls of the two classes overlap, the worst point of
a sample's ball lies deep inside the other class, and learning it pulls the boundary across that
class's own samples (the "cross-over mixture" of Zhang et al.); on CIFAR-10 automobile vs truck
at L-inf 0.1 a model learning the worst points was 61% accurate and 16% under attack, one
learning the crossing points 69% and 36%. Where the ball does not reach the boundary, the point
is the worst one found, as in Madry et al.'s training.

Examples
--------

>>> import numpy as np
>>> from river_advsvm.adversary import ascent_step, attacker_point

A margin `y g(x)` with `y = +1` is lowered by moving against the gradient; under L-inf every
coordinate moves by the step, then the ball of radius 0.1 and the box [0, 1] clip it:

>>> x0 = np.array([0.5, 0.05, 0.95])
>>> ascent_step(x0, x0, np.array([1.0, -2.0, 0.0]), y=1.0, step=0.25, epsilon=0.1,
...             norm="linf", bounds=(0.0, 1.0)).tolist()
[0.4, 0.15000000000000002, 0.95]

Under L2 the step follows the gradient's direction and the ball rescales it:

>>> ascent_step(x0, x0, np.array([3.0, 4.0, 0.0]), y=-1.0, step=1.0, epsilon=0.5,
...             norm="l2").round(3).tolist()
[0.8, 0.45, 0.95]

The point learned for a linear margin `g(x) = w.x - 0.5` and `y = +1`: at radius 0.1 the ball's
worst point keeps a margin of 0.3 - 0.1 ||w||_1 = 0.15; at radius 0.5 the step stops where the
margin reaches 0, a distance of 0.3 / ||w||_1 = 0.2 along the sign of `w`:

>>> w = np.array([1.0, -0.5])
>>> margin = lambda x: float(w @ x) - 0.5
>>> slope = lambda x: w
>>> x0 = np.array([0.8, 0.0])
>>> [(x.round(3).tolist(), round(g, 3)) for x, g in
...  (attacker_point(margin, slope, x0, 0.3, 1.0, epsilon, "linf") for epsilon in (0.1, 0.5))]
[([0.7, 0.1], 0.15), ([0.6, 0.2], 0.0)]

"""

from __future__ import annotations

import typing

import numpy as np

from river_advsvm.kernels import l2_lengths

__all__ = ["ascent_step", "attacker_point", "step_length"]

#: Gradient components below this share of the largest one count as 0 in an L-inf step.
_TIE = 1e-9


def step_length(epsilon: float, steps: int) -> float:
    """The length of each of `steps` ascent steps: the radius for one step (FGSM), `2.5 eps /
    steps` for more (Madry et al.), so that the iterates can reach the far side of the ball."""
    return epsilon * min(1.0, 2.5 / steps)


def ascent_step(
    x: np.ndarray,
    x0: np.ndarray,
    gradient: np.ndarray,
    y: float,
    step: float,
    epsilon: float,
    norm: str,
    bounds: tuple[float, float] | None = None,
    movable: np.ndarray | None = None,
) -> np.ndarray:
    """One projected step from `x` that lowers `y g`: the new point, within `epsilon` of `x0`.

    `gradient` is `dg/dx` at `x`; `movable` (a boolean mask) the inputs the attacker may change,
    all of them if None; `bounds` the box every input stays in (an input of `x0` outside it is
    not moved farther out). A zero gradient leaves `x` where it is.
    """
    direction = np.array(gradient, dtype=np.float64)
    if movable is not None:
        direction[~movable] = 0.0
    if norm == "linf":
        # A component within rounding of 0 does not move: terms that cancel exactly in one
        # summation order leave 1e-17 in another, and the sign of that must not decide the
        # point (nor make the model depend on the order of a sample's keys).
        tie = _TIE * float(np.abs(direction).max(initial=0.0))
        direction[np.abs(direction) <= tie] = 0.0
        np.sign(direction, out=direction)
    else:
        length = float(l2_lengths(direction[None])[0])
        if length > 0.0:
            direction /= length
    moved = x - (y * step) * direction
    delta = moved - x0
    if norm == "linf":
        np.clip(delta, -epsilon, epsilon, out=delta)
    else:
        length = float(l2_lengths(delta[None])[0])
        if length > epsilon:
            delta *= epsilon / length
    moved = x0 + delta
    if bounds is not None:
        # The box, widened to the sample: an input already outside it (or one the sample lacks,
        # 0, in a box without 0) is not pulled into it across the ball's edge.
        np.clip(moved, np.minimum(bounds[0], x0), np.maximum(bounds[1], x0), out=moved)
    return moved


def attacker_point(
    margin: typing.Callable[[np.ndarray], float],
    gradient: typing.Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    g0: float,
    y: float,
    epsilon: float,
    norm: str,
    steps: int = 1,
    bounds: tuple[float, float] | None = None,
    movable: np.ndarray | None = None,
    reach: float = 1.0,
) -> tuple[np.ndarray, float]:
    """The point adversarial training learns for the sample `x0` of sign `y` and margin
    `g0 = g(x0)`, and `g` there: the first iterate of `steps` projected gradient steps at which
    the sample is misclassified (`y g < 0`), else the one of lowest `y g`.

    Each step is shortened to where the margin, linearised at the step's start, reaches 0: the
    point learned is then near the decision boundary, not across it. With `reach` > 1 a step
    goes on to `reach` times that distance, past the boundary (`AdvKernelSVM` learns at
    `reach=1`). A sample already misclassified is learned as it is. `margin(x)` is `g(x)`;
    `gradient(x)` is `dg/dx` at the point of the latest `margin` call (and at `x0` before any),
    so that a kernel row computed for the margin serves the gradient; the last `margin` call is
    at the point returned (or none was made, when it is `x0`).
    """
    step = step_length(epsilon, steps)
    x, g = x0, g0
    best, best_g = x0, g0
    for _ in range(steps):
        if y * g < 0.0:
            return x, g  # the first misclassified iterate
        slope = gradient(x)
        moved = ascent_step(x, x0, slope, y, step, epsilon, norm, bounds, movable)
        # The step's straight segment stays in the ball and the box (both are convex).
        drop = y * float(slope @ (moved - x))
        if y * g + drop / reach < 0.0:
            moved = x + (reach * y * g / -drop) * (moved - x)
        x, g = moved, margin(moved)
        if y * g < y * best_g:
            best, best_g = x, g
    if best is not x:
        margin(best)  # the last call is at the point returned
    return best, best_g
