"""FGSM: one step of size epsilon against the margin's gradient (Goodfellow et al. 2015)."""

from __future__ import annotations

from river_advsvm.attacks.base import Attack, steepest_direction, unusable_gradients

__all__ = ["FGSM"]


class FGSM(Attack):
    """Fast gradient sign method: `x' = x - epsilon y sign(grad g(x))`, clipped to the box.

    With `norm='l2'` the step is along the normalised gradient instead of its sign. On a linear
    model without a box this is the exact worst case: the margin drops by `epsilon ||w||_*`.

    Parameters
    ----------
    epsilon
        Radius of the threat ball (the paper's 8/255 by default).
    norm
        'linf' (the sign step) or 'l2'.
    bounds
        `(lo, hi)` box of the inputs, or `None`.

    Examples
    --------

    >>> from river_advsvm import AdvLinearSVM
    >>> from river_advsvm.attacks import FGSM

    >>> model = AdvLinearSVM()
    >>> for _ in range(50):
    ...     model.learn_one({"a": 0.2, "b": 0.3}, False)
    ...     model.learn_one({"a": 0.9, "b": 0.7}, True)

    >>> x = {"a": 0.6, "b": 0.5}
    >>> model.predict_one(x)
    True
    >>> x_adv = FGSM(epsilon=0.1).perturb_one(model, x, True)
    >>> {k: round(v, 6) for k, v in x_adv.items()}
    {'a': 0.5, 'b': 0.4}
    >>> model.decision_one(x) - model.decision_one(x_adv) > 0
    True

    """

    def __init__(
        self,
        epsilon: float = 8 / 255,
        norm: str = "linf",
        bounds: tuple[float, float] | None = (0.0, 1.0),
    ):
        super().__init__(epsilon=epsilon, norm=norm, bounds=bounds)

    def _evaluations(self, n_inputs):
        return 1, 1

    def _attack(self, oracle, X, bar):
        margins, G = oracle.margins_and_gradients(X)
        no_gradient = unusable_gradients(G, margins, X) & (margins > 0)
        bar.update()
        return X - self.epsilon * steepest_direction(G, self.norm), no_gradient
