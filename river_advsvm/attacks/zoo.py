"""ZOO-ADAM: Carlini & Wagner's objective from scores alone (Chen et al. 2017)."""

from __future__ import annotations

import numpy as np

from river_advsvm import inputs
from river_advsvm.attacks.base import (
    FINITE_DIFFERENCE_STEP, Attack, check_seed, unusable_gradients,
)
from river_advsvm.attacks.cw import BestFound, ConstantSearch, TanhBox, _check_search

__all__ = ["ZOO"]


class ZOO(Attack):
    """Zeroth-order optimisation attack (ZOO-ADAM): a black-box C&W-L2 attack.

    It sees the model's probabilities only (`predict_proba_*`, even for a model with the margin
    API) and attacks the log-odds of the true label against the likeliest other one,
    `m = log p(y|x) - log max_{y' != y} p(y'|x)`, which is negative exactly when another label
    is predicted. Each iteration picks `coordinates` random coordinates per sample, estimates
    `dm/dw` along them by symmetric finite differences (2 queries each), and takes a
    coordinate-wise Adam step on the C&W objective
    `||x' - x||_2^2 + c max(m(x') + confidence, 0)`, in the same tanh variables as
    `CarliniWagnerL2`; `c` follows the same binary search. The distance term is known to the
    attacker, so its gradient is exact; only the model's is estimated. As in ZOO's code, a
    sample stops early for the current `c` when its objective no longer decreases (checked
    every tenth of `steps`), which saves its queries.

    Parameters
    ----------
    epsilon
        `None` to return the smallest flip found at any distance; a radius to return the input
        unchanged where that flip is farther than `epsilon`.
    confidence
        `kappa`: how far past the decision boundary (in log-odds) the point must be.
    initial_const
        The first `c` of the binary search, at most 1e10 (as for `CarliniWagnerL2`).
    search_steps
        Number of values of `c` tried per sample.
    steps
        Coordinate-Adam iterations per value of `c`. With the paper's constant step of 0.01 a
        coordinate moves at most ~0.01 per update, hence more iterations than C&W's.
    coordinates
        Coordinates estimated per iteration and sample (ZOO's 128); all of them when the input
        has fewer.
    learning_rate
        Adam's `eta` (the paper's 0.01).
    beta1
        Adam's first-moment decay (the paper's 0.9).
    beta2
        Adam's second-moment decay (the paper's 0.999).
    difference_step
        The finite-difference step `h`, in the tanh variables.
    seed
        Seed of the coordinate draws. Every call draws from it afresh; the draws of a batch
        are shared by its rows, so a sample's result depends on the batch it is attacked in.
    bounds
        `(lo, hi)` box of the inputs, or `None`.

    Examples
    --------

    ZOO needs only `predict_proba_one`, so it attacks any River classifier:

    >>> from river import linear_model
    >>> from river_advsvm.attacks import ZOO

    >>> model = linear_model.LogisticRegression()
    >>> for _ in range(200):
    ...     model.learn_one({"a": 0.2, "b": 0.3}, False)
    ...     model.learn_one({"a": 0.9, "b": 0.7}, True)

    >>> x = {"a": 0.6, "b": 0.5}
    >>> attack = ZOO(learning_rate=0.05, seed=0)
    >>> x_adv = attack.perturb_one(model, x, True)
    >>> model.predict_one(x), model.predict_one(x_adv)
    (True, False)
    >>> round(float(attack.last_result.norms[0]), 2)
    0.49

    """

    minimizes_norm = True
    scores_only = True

    def __init__(
        self,
        epsilon: float | None = None,
        confidence: float = 0.0,
        initial_const: float = 1.0,
        search_steps: int = 4,
        steps: int = 300,
        coordinates: int = 128,
        learning_rate: float = 0.01,
        beta1: float = 0.9,
        beta2: float = 0.999,
        difference_step: float = FINITE_DIFFERENCE_STEP,
        seed: int | None = None,
        bounds: tuple[float, float] | None = (0.0, 1.0),
    ):
        super().__init__(epsilon=epsilon, norm="l2", bounds=bounds)
        self.confidence = confidence
        self.initial_const = initial_const
        self.learning_rate = learning_rate
        self.beta1 = beta1
        self.beta2 = beta2
        self.difference_step = difference_step
        # Numpy numbers (np.int64(3), taken from an array) as the plain ones they hold.
        self.search_steps, self.steps = _check_search(confidence, initial_const, search_steps,
                                                      steps, learning_rate)
        self.coordinates = inputs.check_count("coordinates", coordinates)
        for name, beta in (("beta1", beta1), ("beta2", beta2)):
            inputs.check_number(name, beta, lambda v: 0 <= v < 1, "in [0, 1)")
        inputs.check_number("difference_step", difference_step, lambda v: v > 0, "> 0")
        self.seed = check_seed(seed)

    def _coordinate_batches(self, rng, n: int, d: int) -> np.ndarray:
        if self.coordinates >= d:
            return np.broadcast_to(np.arange(d), (n, d))
        # k distinct random coordinates per row: the k smallest of d uniforms.
        return np.argpartition(rng.random((n, d)), self.coordinates - 1, axis=1)[
            :, : self.coordinates
        ]

    def _progress_total(self):
        return self.search_steps * self.steps

    def _evaluations(self, n_inputs):
        queries = 2 * min(self.coordinates, n_inputs) + 1  # the estimates, then the new margin
        return 0, self.search_steps * self.steps * queries + 2

    def _attack(self, oracle, X, bar):
        rng = np.random.default_rng(self.seed)
        n, d = X.shape
        box = TanhBox(self.bounds)
        W0 = box.to_variables(X)
        margins0 = oracle.margins(X)
        best = BestFound(X, margins0, self.confidence)
        search = ConstantSearch(n, self.initial_const)
        no_gradient = np.zeros(n, dtype=bool)
        kappa = self.confidence
        # ZOO's early abort, per sample: every tenth of the steps, a sample whose objective has
        # not dropped by 0.01% since the last check stops querying until the next c.
        check_every = max(1, self.steps // 10)
        for _ in range(self.search_steps):
            W = W0.copy()
            M, V, T = np.zeros_like(W), np.zeros_like(W), np.zeros_like(W)
            margins = margins0.copy()  # to_inputs(W0) == X
            objective = search.const * np.maximum(margins + kappa, 0.0)
            at_last_check = np.full(n, np.inf)
            active = np.arange(n)
            succeeded = np.zeros(n, dtype=bool)
            for step in range(self.steps):
                if not active.size:
                    bar.update(self.steps - step)  # every sample stalled: this c is done
                    break
                bar.update()
                a = active[:, None]
                C = self._coordinate_batches(rng, active.size, d)
                G = oracle.finite_differences(
                    W[active], C, self.difference_step, box.to_inputs, rows=active
                )
                no_gradient[active] |= unusable_gradients(G, margins[active]) & (
                    margins[active] > -kappa
                )
                W_a = W[active]
                distance_grad = 2.0 * (box.to_inputs(W_a) - X[active]) * box.input_derivative(W_a)
                hinge_active = search.const[active] * (margins[active] + kappa > 0.0)
                grad = distance_grad[np.arange(active.size)[:, None], C] + hinge_active[:, None] * G
                # Adam on the chosen coordinates only, each with its own step count (ZOO).
                T[a, C] += 1.0
                M[a, C] = self.beta1 * M[a, C] + (1.0 - self.beta1) * grad
                V[a, C] = self.beta2 * V[a, C] + (1.0 - self.beta2) * grad * grad
                m_hat = M[a, C] / (1.0 - self.beta1 ** T[a, C])
                v_hat = V[a, C] / (1.0 - self.beta2 ** T[a, C])
                W[a, C] -= self.learning_rate * m_hat / (np.sqrt(v_hat) + 1e-8)
                X_t = box.to_inputs(W[active])
                margins[active] = oracle.margins(X_t, rows=active)
                succeeded[active] |= best.offer(X_t, margins[active], rows=active)
                delta = X_t - X[active]
                objective[active] = np.einsum("ij,ij->i", delta, delta) + search.const[
                    active
                ] * np.maximum(margins[active] + kappa, 0.0)
                if (step + 1) % check_every == 0:
                    stalled = objective[active] > 0.9999 * at_last_check[active]
                    at_last_check[active] = objective[active]
                    active = active[~stalled]
            search.update(succeeded)
        return best.points, no_gradient
