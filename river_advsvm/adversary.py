"""The inner maximization of adversarial training: the attacker's point near one sample.

Adversarial training minimises the hinge loss at the worst point of the threat ball around each
sample. `AdvKernelSVM` finds that point the way the attacks of `river_advsvm.attacks` do, by
projected gradient steps on the model's own margin, with the exact input gradient of `f` (for
support vectors it costs one more product with the stored vectors, from the kernel row the
margin already computed). This module holds the geometry of one step: the steepest direction
for the norm, the projection onto the ball, the pixel box and the inputs the attacker may move.

Examples
--------

>>> import numpy as np
>>> from river_advsvm.adversary import ascent_step

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

"""

from __future__ import annotations

import numpy as np

__all__ = ["ascent_step", "step_length"]

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
    all of them if None; `bounds` the box every input stays in. A zero gradient leaves `x` where
    it is.
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
        length = float(np.linalg.norm(direction))
        if length > 0.0:
            direction /= length
    moved = x - (y * step) * direction
    delta = moved - x0
    if norm == "linf":
        np.clip(delta, -epsilon, epsilon, out=delta)
    else:
        length = float(np.linalg.norm(delta))
        if length > epsilon:
            delta *= epsilon / length
    moved = x0 + delta
    if bounds is not None:
        np.clip(moved, bounds[0], bounds[1], out=moved)
    return moved
