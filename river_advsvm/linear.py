"""`AdvLinearSVM`: the adversarially trained linear SVM baseline (Zhou et al. 2012)."""

from __future__ import annotations

import numpy as np

from river_advsvm import certify, inputs
from river_advsvm.kernels import l2_length
from river_advsvm.margin import MarginClassifier
from river_advsvm.margin_predict import ROWS_PER_CHUNK

__all__ = ["AdvLinearSVM"]


class AdvLinearSVM(MarginClassifier):
    """Linear SVM trained online against the worst attack in an ε-ball, in closed form.

    For `g(x) = w . x + b`, `max_{||δ|| <= ε} [1 - y g(x + δ)]₊ = [1 - y g(x) + ε ||w||_*]₊`
    with `||.||_*` the dual norm (L2 for an L2 ball, L1 for an L-inf ball). Each `learn_one` is
    one stochastic step on `(λ/2) ||w||² + [1 - y g(x) + ε ||w||_*]₊`: shrink
    `w <- (1 - η λ) w`; if the bracket is positive, `w <- w + η y x`, `b <- b + η_b y`, then
    the exact proximal step of `η ε ||w||_*` (a uniform shrink for L2, soft-thresholding for L1).
    Inputs far from 0 slow these steps (an image's background at 1: centre them in front with
    River's `preprocessing.StandardScaler(with_std=False)`).

    Parameters
    ----------
    epsilon
        Radius of the attacks to be robust to. 0 trains the natural linear SVM.
    norm
        Norm of the threat ball: 'l2' or 'linf'.
    regularization
        `λ`, the weight of `(λ/2) ||w||²` per sample (`λ = 1 / C` for the paper's C).
    step_size
        `η` with the 'constant' schedule; the first step with 'diminishing'. At most 1e6, as
        is `bias_step_size`, and below `1 / regularization` (the shrink `1 - η λ` of each
        step stays positive).
    schedule
        'constant' or 'diminishing' (`η_t = step_size / (1 + step_size λ t)`).
    bias_step_size
        Step of the unregularised bias; follows the same schedule.
    max_features
        The most inputs (feature names) the model will learn; a sample that would add more is
        refused with `InvalidInput`. Memory is at most `max_features` weights.

    Examples
    --------

    >>> from river import datasets, evaluate, metrics
    >>> from river_advsvm import AdvLinearSVM

    >>> model = AdvLinearSVM(epsilon=0.05)
    >>> metric = metrics.Accuracy()
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metric)
    Accuracy: 86.79%

    """

    def __init__(
        self,
        epsilon: float = 0.0,
        norm: str = "l2",
        regularization: float = 1e-4,
        step_size: float = 0.05,
        schedule: str = "constant",
        bias_step_size: float = 0.1,
        max_features: int = 10_000,
    ):
        super().__init__(
            epsilon=epsilon,
            norm=norm,
            regularization=regularization,
            step_size=step_size,
            schedule=schedule,
            bias_step_size=bias_step_size,
            max_features=max_features,
        )
        self._capacity = np.zeros(16)  # spare room, so that new inputs never copy all weights

    @property
    def _weights(self) -> np.ndarray:
        return self._capacity[: len(self._index)]

    @_weights.setter
    def _weights(self, weights: np.ndarray) -> None:
        self._capacity = np.zeros(max(len(weights), 16))
        self._capacity[: len(weights)] = weights

    @property
    def weights(self) -> dict:
        """The current weights, by feature name."""
        return dict(zip(self._index.names, self._weights.tolist()))

    def _dual_norm(self, w: np.ndarray) -> float:
        return l2_length(w) if self.norm == "l2" else float(np.abs(w).sum())

    # -- hooks ----------------------------------------------------------------------------------

    def _add_inputs(self, names, hashes, values=None):
        if len(self._index) > len(self._capacity):
            grown = np.zeros(min(max(len(self._index), 2 * len(self._capacity)), self.max_features))
            grown[: len(self._capacity)] = self._capacity
            self._capacity = grown

    def _row_margin(self, v, u, u_names, u_hashes):
        # Inputs the model has never learned from have weight 0.
        return float(v @ self._weights) + self._bias

    def _decision_block(self, V, U, u_names, u_hashes):
        return V @ self._weights + self._bias

    def _gradient_block(self, V, U, u_names, u_hashes):
        return np.broadcast_to(self._weights, V.shape).copy(), np.zeros_like(U)

    def _step(self, v, y, g, t, names):
        w = self._weights
        eta, eta_bias = self._step_sizes(t)
        active = 1.0 - y * g + self.epsilon * self._dual_norm(w) > 0.0
        w *= 1.0 - eta * self.regularization
        if active:
            w += (eta * y) * v
            self._bias += eta_bias * y
            if self.epsilon > 0.0:
                self._shrink_dual_norm(w, eta * self.epsilon)

    def _shrink_dual_norm(self, w: np.ndarray, threshold: float) -> None:
        """In place, the proximal operator of `threshold ||w||_*`."""
        if self.norm == "l2":
            length = self._dual_norm(w)
            w *= max(0.0, 1.0 - threshold / length) if length > 0 else 0.0
        else:
            np.copysign(np.maximum(np.abs(w) - threshold, 0.0), w, out=w)

    def _certified_radii(self, names, values, margins, norm, bounds):
        # Exact without a box: every input may move, the ones the sample lacks too (absent is
        # 0, a value an attacker may change), and inputs never learned weigh 0. A box could
        # only make the radius larger; it is not used.
        # The margins as computed are within rounding of the exact ones, which matters next to
        # the boundary: that rounding grows with `sum_j |x_j w_j| + |b|`.
        w = np.abs(self._weights)
        magnitudes = np.concatenate([
            np.abs(self._dense(names, values[i : i + ROWS_PER_CHUNK])[0]) @ w
            for i in range(0, max(len(values), 1), ROWS_PER_CHUNK)]) + abs(self._bias)
        return certify.linear_radii(self._weights, margins, norm, magnitudes)

    def _max_state_bytes(self):
        return 8 * self.max_features

    def _margin_reach(self):
        return float(np.abs(self._weights).sum()) * inputs.MAX_ABS_VALUE

    def _negate(self):
        self._weights *= -1.0
        self._bias = -self._bias

    def _model_state(self):
        return {}, {"weights": self._weights.copy()}

    def _restore_model_state(self, scalars, arrays):
        weights = np.asarray(arrays["weights"], dtype=np.float64)
        if weights.shape != (len(self._index),) or not np.isfinite(weights).all():
            raise ValueError("weights do not match the feature names or are not finite")
        self._capacity = np.zeros(max(len(weights), 16))
        self._capacity[: len(weights)] = weights
