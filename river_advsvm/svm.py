"""`AdvKernelSVM`: adversarial training of a kernel SVM by doubly stochastic gradients (adv-SVM)."""

from __future__ import annotations

import math
import random

import numpy as np

from river_advsvm import certify, kernels
from river_advsvm.budget import POLICIES, FeatureStore, make_store
from river_advsvm.margin import ROWS_PER_CHUNK, MarginClassifier

__all__ = ["AdvKernelSVM"]

_SQRT2 = math.sqrt(2.0)


class AdvKernelSVM(MarginClassifier):
    """Adversarially robust kernel SVM trained online by doubly stochastic gradients.

    Each `learn_one` is one step of adv-SVM (Wu et al., AAAI 2021) on the per-sample objective

        (λ/2) ||f||² + [1 - y (f(x) + b) + ε' ||f||]₊

    where `ε' = sqrt(2 - 2 min κ(δ))` over the threat ball `||δ|| <= epsilon` is the radius in
    kernel space that covers every input-space attack (Theorem 1), so the bracket is the hinge
    loss under the worst attack on the kernel-space ball (Theorem 2). `epsilon = 0` is natural
    DSG. `f` is a sum of random Fourier features regenerated from seeds; the budget policy keeps
    their number bounded on an endless stream (see `river_advsvm.budget`).

    The step (MATH.md §3): with `m = y g(x)` and `active = 1 - m + ε' ||f|| > 0`, shrink
    `f <- (1 - η λ) f`; if active, add `η y k(x, .)` (through the policy), `b <- b + η_b y`,
    and take the exact proximal step of `η ε' ||f||`: `f <- f max(0, 1 - η ε' / ||f||)`.

    Parameters
    ----------
    epsilon
        Radius of the attacks to be robust to, in input space. 0 trains the natural SVM.
    norm
        Norm of the threat ball: 'l2' or 'linf'.
    kernel
        'rbf' (`exp(-gamma ||x - x'||_2^2)`) or 'laplacian' (`exp(-gamma ||x - x'||_1)`).
    gamma
        Kernel bandwidth, or 'scale' to fix it at the first learned sample `x` to
        `1 / ||x||_2^2` (`1 / d` if that is not a positive finite number): like scikit-learn's 'scale', it makes
        `gamma ||x - x'||^2` of order 1 between typical samples. To pick it by hand, aim for
        `gamma ~ 1 / E||x - x'||^2` (RBF) and search a factor of 4 either way.
    regularization
        `λ`, the weight of `(λ/2) ||f||²` per sample. The paper writes `½||f||² + C loss`; that
        is the same problem with `λ = 1 / C` and steps scaled by `C`. With a constant step, a
        sample's influence halves after about `0.7 / (step_size λ)` steps, so `λ` also sets how
        fast a drifting stream is forgotten: the default keeps ~10⁴ samples.
    step_size
        `η` with the 'constant' schedule; the first step with 'diminishing'.
    schedule
        'constant' (`η_t = step_size`, adv-SVM(C)) or 'diminishing'
        (`η_t = step_size / (1 + step_size λ t)`, adv-SVM(D)).
    bias_step_size
        Step of the unregularised bias; kept well below `step_size` so that `b` does not swamp
        `f` early on. Follows the same schedule.
    budget
        Number of random features kept (`B`).
    budget_policy
        'compact' (default), 'compact_slot', 'truncate' or 'grow': see `river_advsvm.budget`.
        'grow' is the paper's unbounded DSG, for finite data only.
    seed
        Seed of the random features. Models with the same seed and gamma (and 'compact') share
        their features, so their coefficients can be averaged.

    Attributes
    ----------
    kernel_radius
        `ε'` for the current number of inputs.

    Examples
    --------

    >>> from river import datasets, evaluate, metrics
    >>> from river_advsvm import AdvKernelSVM

    >>> model = AdvKernelSVM(epsilon=0.05, seed=42)
    >>> metric = metrics.Accuracy()
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metric)
    Accuracy: 89.04%

    >>> x, y = next(iter(datasets.Phishing()))
    >>> model.predict_one(x), y
    (True, True)
    >>> round(model.decision_one(x), 3)
    3.543
    >>> round(model.predict_proba_one(x)[True], 3)
    0.995

    The margin's gradient is what white-box attacks use:

    >>> gradient = model.decision_gradient_one(x)
    >>> sorted(gradient)[:2]
    ['age_of_domain', 'anchor_from_other_domain']

    """

    def __init__(
        self,
        epsilon: float = 0.0,
        norm: str = "l2",
        kernel: str = "rbf",
        gamma: float | str = "scale",
        regularization: float = 1e-4,
        step_size: float = 0.5,
        schedule: str = "constant",
        bias_step_size: float = 0.05,
        budget: int = 1024,
        budget_policy: str = "compact",
        seed: int | None = None,
    ):
        super().__init__(
            epsilon=epsilon,
            norm=norm,
            regularization=regularization,
            step_size=step_size,
            schedule=schedule,
            bias_step_size=bias_step_size,
        )
        self.kernel = kernel
        self.gamma = gamma
        self.budget = budget
        self.budget_policy = budget_policy
        self.seed = seed
        if kernel not in kernels.KERNELS:
            raise ValueError(f"kernel must be one of {kernels.KERNELS}, got {kernel!r}")
        if not (gamma == "scale" or (isinstance(gamma, (int, float)) and 0 < gamma < math.inf)):
            raise ValueError(f"gamma must be 'scale' or a positive number, got {gamma!r}")
        if not (isinstance(budget, int) and budget >= 1):
            raise ValueError(f"budget must be a positive int, got {budget!r}")
        if budget_policy not in POLICIES:
            raise ValueError(
                f"budget_policy must be one of {tuple(POLICIES)}, got {budget_policy!r}"
            )
        # An unseeded model draws its seed now; the seed is state, saved with the model.
        self._seed = seed if seed is not None else random.getrandbits(63)
        self._gamma = None if gamma == "scale" else float(gamma)
        self._store: FeatureStore | None = None
        self.kernel_radius = 0.0

    @property
    def _is_stochastic(self) -> bool:
        return self.seed is None

    # -- hooks ----------------------------------------------------------------------------------

    def _start(self, first):
        if self._gamma is None:
            squared = float(first @ first)
            finite = 0.0 < squared < math.inf
            self._gamma = 1.0 / squared if finite else 1.0 / max(len(first), 1)
        self._store = make_store(
            self.budget_policy, self.kernel, self._gamma, self._seed, self.budget
        )
        self._store.start()

    def _add_inputs(self, hashes):
        self._store.add_inputs(hashes)
        self.kernel_radius = kernels.adversarial_radius(
            self.kernel, self._gamma, self.epsilon, self.norm, len(self._index)
        )

    def _decision_dense(self, V, extra_hashes, U):
        store = self._store
        Z = store.projections(V, store.weights_for(extra_hashes), U)
        return _SQRT2 * np.cos(Z) @ store.coefficients + self._bias

    def _gradient_dense(self, V, extra_hashes, U):
        # d/dx sum_i a_i sqrt(2) cos(w_i . x + u_i) = -sqrt(2) sum_i a_i sin(.) w_i  (MATH.md §5)
        store = self._store
        W_extra = store.weights_for(extra_hashes)
        S = -_SQRT2 * np.sin(store.projections(V, W_extra, U)) * store.coefficients
        return S @ store.omega.T, (S @ W_extra.T if W_extra is not None else U[:, :0])

    def _learn_dense(self, V, signs):
        store = self._store
        lam, radius = self.regularization, self.kernel_radius
        margins = np.empty(len(V))
        # A fixed pool's features for a chunk of rows are one BLAS call; a policy that changes
        # the features while learning needs them row by row.
        block = ROWS_PER_CHUNK if store.fixed_pool else 1
        for start in range(0, len(V), block):
            Phi = store.features(V[start : start + block])
            for i, phi in enumerate(Phi, start):
                y = signs[i]
                eta, eta_bias = self._step_sizes(self._n_learned + i)
                f_value = float(store.coefficients @ phi)
                g = f_value + self._bias
                margins[i] = g
                active = 1.0 - y * g + radius * store.norm > 0.0
                rho = 1.0 - eta * lam
                store.scale(rho)
                if active:
                    store.add(phi, V[i], eta * y)
                    self._bias += eta_bias * y
                    if radius > 0.0 and store.norm > 0.0:
                        store.scale(max(0.0, 1.0 - eta * radius / store.norm))
        return margins

    def _certified_radii(self, names, margins, norm):
        if self._store is None:  # a constant model: its prediction never changes
            return np.where(margins > 0, math.inf, 0.0)
        unknown = [n for n, p in zip(names, self._index.positions(names)) if p < 0]
        extra = self._store.weights_for(self._index.hash_names(unknown)) if unknown else None
        return certify.kernel_radii(self._store, margins, len(names), norm, extra)

    def _negate(self):
        if self._store is not None:
            self._store.negate()
        self._bias = -self._bias

    def _model_state(self):
        scalars = {"seed": self._seed, "gamma": self._gamma, "kernel_radius": self.kernel_radius}
        arrays = {}
        if self._store is not None:
            store_scalars, arrays = self._store.state()
            scalars["store"] = store_scalars
        return scalars, arrays

    def _restore_model_state(self, scalars, arrays):
        self._seed = int(scalars["seed"])
        self._gamma = None if scalars["gamma"] is None else float(scalars["gamma"])
        if "store" in scalars:
            if self._gamma is None or not self._gamma > 0:
                raise ValueError("a started model needs a positive gamma")
            self._store = make_store(
                self.budget_policy, self.kernel, self._gamma, self._seed, self.budget
            )
            self._store.restore(scalars["store"], arrays, self._index.hashes)
            self.kernel_radius = kernels.adversarial_radius(
                self.kernel, self._gamma, self.epsilon, self.norm, len(self._index)
            )

    # -- introspection --------------------------------------------------------------------------

    @property
    def n_features(self) -> int:
        """Number of random features currently in the model."""
        return 0 if self._store is None else self._store.size

    @property
    def rkhs_norm(self) -> float:
        """`||f||_H` as the adversarial term uses it (which norm: see `river_advsvm.budget`)."""
        return 0.0 if self._store is None else self._store.norm

