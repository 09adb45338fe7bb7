"""`AdvKernelSVM`: adversarial training of a kernel SVM, one sample at a time (adv-SVM)."""

from __future__ import annotations

import math
import random
import typing

import numpy as np

from river_advsvm import (adversary, bandwidth, certify, checkpoint, input_advice, inputs,
                          kernels)
from river_advsvm import budget as rf
from river_advsvm.average_lag import LENGTHEN, RESTART, LagWatch
from river_advsvm.feature_average import AveragedFeatures
from river_advsvm.given_up_estimate import GivenUpEstimate
from river_advsvm.input_advice import InputAdvice
from river_advsvm.input_scales import InputScales, as_pairs, from_pairs, reference_gamma
from river_advsvm.margin import MarginClassifier
from river_advsvm.model_checkpoint import MAX_ABS_BIAS, MAX_ABS_MARGIN
from river_advsvm.support import SupportVectors
from river_advsvm.support_average import AveragedVectors, orphan_capacity
from river_advsvm.warn import warn_caller

__all__ = ["AdvKernelSVM"]

#: Budget policies of the support-vector representation (`river_advsvm.support`).
SUPPORT_POLICIES = ("merge", "remove")
POLICIES = (*SUPPORT_POLICIES, *rf.POLICIES)
#: The factor of an input with its own bandwidth is `(gamma_j / gamma)^power` (`InputScales`).
SCALE_POWERS = {"rbf": 0.5, "laplacian": 1.0}
#: How the worst case of an attack is found while learning (see `AdvKernelSVM`).
ADVERSARIES = ("pgd", "closed_form")
#: Once the average keeps vectors f gave up, its exact decisions (for lagging behind the
#: stream, and for a collapse) are those of every this-many learned samples (`_deployed_margin`).
DEPLOYED_EVERY = 16
#: The shortest horizon an average that keeps starting over comes down to, halving at each
#: restart (see `river_advsvm.average_lag`), or `averaging` where that is shorter.
SHORTEST_HORIZON = 16
#: Samples over which the share of active ones is averaged (an exponential moving average).
ACTIVE_WINDOW = 64
#: The share of active samples above which the bias step shrinks, to 0 at a share of 1.
FLAT_BIAS_SHARE = 0.9
#: Samples over which the balance of the labels (the mean of y in {-1, +1}) is averaged.
LABEL_WINDOW = 1024
#: The part of the labels' balance that a damped bias step still follows starts past this
#: (a balanced stream's average over LABEL_WINDOW samples stays within 0.03 or so of 0).
BALANCE_SLACK = 0.1


class AdvKernelSVM(MarginClassifier):
    """Adversarially robust kernel SVM trained online (adv-SVM).

    Each `learn_one` is one stochastic step on the hinge loss at the worst point an attacker
    can reach within `epsilon` of the sample,

        (λ/2) ||f||² + max_{||δ|| <= ε} [1 - y (f(x + δ) + b)]₊

    and `epsilon = 0` is the natural kernel SVM. The step: with `m = y g(x')` the margin at
    the attacker's point `x'`, shrink `f <- (1 - η λ) f`; if `m < 1`, add `η y k(x', .)` and
    `b <- b + η_b y`. With support vectors, `reprocess` such steps on stored vectors follow
    (see below).

    How the point learned is found, chosen by `adversary`:

    - 'pgd' (default): `adversary_steps` projected gradient steps on the model's own margin,
      from the sample, with the exact input gradient of `f`, stopped where the sample is
      misclassified: each step is cut where the margin, linearised, reaches 0, and the first
      iterate with `y g < 0` is learned, else the one of lowest margin (early-stopped,
      "friendly" PGD, Zhang et al.; see `adversary.attacker_point`). A sample already
      misclassified is learned as it is. Where the two classes' threat balls overlap, the worst
      point of the ball lies inside the other class and learning it drags the boundary across
      that class; where they do not, it is the worst point found. The attacker stays in the
      threat ball (and in `bounds`, if given) and moves only the sample's own inputs. With
      support vectors, a sample whose margin, lowered by the closed form's bound below (sound
      for every attack on the exact kernel expansion), is still above 1 is not attacked: it
      cannot be active. Random features attack every sample (the bound is the exact kernel's,
      not the features').
    - 'closed_form': the paper's bound, `[1 - y g(x) + ε' ||f||]₊`, where `ε' = sqrt(2 - 2
      min κ(δ))` over the threat ball is the radius in kernel space that covers every
      input-space attack; its step adds `η y k(x, .)` and takes the exact proximal step of
      `η ε' ||f||`, `f <- f max(0, 1 - η ε' / ||f||)`. It covers the whole kernel-space ball,
      far more than the inputs an attacker reaches in many dimensions: once `ε' ||f||` exceeds
      what the data's margins pay, every sample is active and `f` shrinks to a constant (see
      `collapsed`); at small radii it is cheap and certifies well.

    `f` has two representations, chosen by `budget_policy`:

    - support vectors ('merge', 'remove'): stored examples with exact kernel values. When the
      `budget` is full, 'merge' replaces two vectors by one on the segment between them
      (BSGD), 'remove' drops the one of smallest weight. `budget=None` keeps every vector
      (kernel SGD, for finite data only).
    - random Fourier features ('compact', 'compact_slot', 'truncate', 'grow'): the paper's
      doubly stochastic gradients, features regenerated from seeds; see `river_advsvm.budget`.

    Parameters
    ----------
    epsilon
        Radius of the attacks to be robust to, in input space. 0 trains the natural SVM.
    norm
        Norm of the threat ball: 'l2' or 'linf'.
    kernel
        'rbf' (`exp(-gamma ||x - x'||_2^2)`) or 'laplacian' (`exp(-gamma ||x - x'||_1)`).
    gamma
        Kernel bandwidth: a number in (0, 1e10]; a dict of one bandwidth per feature name,
        each in [1e-300, 1e10] (the kernel is then `exp(-sum_j gamma_j (x_j - x'_j)^2)`, or
        `exp(-sum_j gamma_j |x_j - x'_j|)` for 'laplacian', and features the dict lacks take
        its median); or 'scale', which fits
        such a dict on the first `warm_up` labelled samples: each input is measured in units
        of its range over the warm-up (floored at the median range, so that an input that
        barely varies is not blown up, except for a mostly nonzero input whose range is below
        a tenth of the median: another unit, an age beside amounts of money; not a pixel of
        a background that is not 0, one value in most samples, and none when more than
        `sqrt(d)` inputs would be: inputs of one kind that barely vary), and twice
        scikit-learn's 'scale', `2 / (d Var X)` over all `d` inputs, is taken in those units
        (an input of range `s` gets `c / s^2`, or `c / s` for 'laplacian', whose exponent is
        linear in the differences).
        Raw inputs of different units (a salary and an age) are thus put on one footing, as a
        scaler in front would (twice 'scale': one online pass learns better with a kernel
        narrower than an offline SVM's). An input whose warm-up
        mean is more than 2 of its ranges from 0 (a year, a temperature in kelvin) is
        measured about that mean, and stored minus it: in float32 a value far from 0 keeps
        too few digits for the kernel to see its differences. Centre such inputs yourself
        (a `preprocessing.StandardScaler` in front) when `gamma` is a number or a dict. The
        warm-up samples are learned in order once it ends; nothing is lost. `fitted_gamma`
        shows the result.
    regularization
        `λ`, the weight of `(λ/2) ||f||²` per sample. The paper writes `½||f||² + C loss`;
        that is the same problem with `λ = 1 / C` and steps scaled by `C`. With a constant
        step, a sample's influence halves after about `0.7 / (step_size λ)` steps, so `λ` also
        sets how fast a drifting stream is forgotten.
    step_size
        `η` with the 'constant' schedule; the first step with 'diminishing'. At most 1e6, as
        is `bias_step_size`, and below `1 / regularization` (the shrink `1 - η λ` of each
        step stays positive).
    schedule
        'constant' (`η_t = step_size`, adv-SVM(C)) or 'diminishing'
        (`η_t = step_size / (1 + step_size λ t)`, adv-SVM(D)).
    bias_step_size
        Step of the unregularised bias; kept well below `step_size` so that `b` does not swamp
        `f` early on. Follows the same schedule. As the share of the last ~64 samples that
        were active goes from 90% to 100%, the step `η_b y` gives way to `η_b` times the
        labels' balance (the mean of `y` in {-1, +1} over the last ~1,000 samples) beyond
        0.1: with nearly every sample active the hinge loss moves with `b` at the rate of
        that balance, and steps of `η_b y` only make `b` wander; a balanced stream leaves
        `b` where it is, an unbalanced one on which `f` learns nothing moves it towards the
        majority.
    budget
        Most support vectors, or number of random features (`B`); 'grow' adds a feature at
        every active step without bound, whatever the budget (for finite data only).
    budget_policy
        'merge', 'remove', 'compact', 'compact_slot', 'truncate' or 'grow' (see above).
    dtype
        'float32' or 'float64': how stored vectors or feature weights are kept and multiplied.
        Weights, norms and the bias are float64 either way; certificates account for the
        rounding.
    max_features
        The most inputs (feature names) the model will learn (`n_inputs` counts them): a sample that
        would add more is refused with `InvalidInput`. Memory is at most about
        `max_features x budget` stored numbers, whatever arrives (and, during a warm-up,
        `warm_up x max_features`): 1.5 times that with support vectors and `averaging` (the
        vectors its average keeps), and `max_features x (budget + 256)` for 'compact_slot' and
        'truncate' (their norm sketch); without a bound for 'grow' and `budget=None`.
    warm_up
        Number of labelled samples `gamma='scale'` fits the bandwidths on; they are held back
        until then.
    seed
        Seed of the random features. Models with the same seed and gamma (and 'compact') share
        their features, so their coefficients can be averaged.
    adversary
        'pgd' or 'closed_form': how the worst case within `epsilon` is found while learning
        (see above). Used only when `epsilon > 0`.
    adversary_steps
        Gradient steps of the 'pgd' adversary; each costs about one more kernel row per
        attacked sample. Each step moves by at most `epsilon` for one step, `2.5 epsilon /
        steps` for more.
    bounds
        `(low, high)`: the box every input of the attacker's point stays in (pixels: (0, 1)),
        as for the attacks of `river_advsvm.attacks`; None for no box. An L-inf `epsilon` of
        at least half the box's width warns: every input can then be moved to the box's
        centre, and no classifier does better than one class under the attack (an L2 one of
        half the box's diagonal over a sample's inputs warns as the model learns it).
    reprocess
        Support vectors only (random features store no examples): after each sample's step,
        this many hinge steps on vectors already stored, visited in turn (LaSVM's reprocess,
        as in Vowpal Wabbit's `--ksvm`). A stored vector keeps the label it was added with;
        if its margin is in [0, 1), its coefficient grows by `η y`, with no shrink, no bias
        step and no new vector. One the model now gets wrong is left alone (on a drifting
        stream it is of the old concept, on a noisy one likely mislabelled). Its margin is one
        dot product with its row of the kernel exponents the store keeps (with at least 128
        inputs; below, one pass over the vectors), so a step costs far less than a sample's.
        One pass then comes close to the exact SVM: on MNIST 8 vs 9, 99.48% clean (mean of 3
        stream orders) against 99.08% with 0 and 99.55% for scikit-learn's `SVC(C=1)` with
        the same kernel. The stored vectors' loss then weighs more than the other samples',
        so many passes no longer converge to the objective above: 0 is plain SGD.
    averaging
        The model predicts with an average of its iterates `f_t` and `b_t` over its recent
        steps (iterate `t` weighed in proportion to `t` at first, then, from `2 averaging`
        samples on, an exponential average of horizon `averaging`), and learns with the last
        iterate as without it. Decisions, probabilities, gradients, attacks and certificates
        are the average's. With a constant step, the last iterate moves by up to `step_size`
        near each new sample; the average keeps what the steps agree on. With support vectors
        it shares the vectors of `f` and keeps, up to half the budget, vectors `f` gave up in
        merges (memory and prediction cost up to 1.5 times), and test-then-train costs one
        more kernel row over those vectors; random features keep one averaged coefficient per
        feature, and each learned sample costs them one more pass over the coefficients (with
        support vectors, over those of the vectors given up alone). After
        `group_steps(rate)` it weighs as the `rate` samples of the group's stream it stands
        for. The average starts over from the last iterate when that has clearly been the
        better of the two on the samples learned lately where they disagreed
        (`river_advsvm.average_lag`: the stream changed, and the average would take about
        `averaging` samples to follow; `average_restarts` counts them), with half its
        horizon (down to 16 samples), which doubles back, up to `averaging`, when the average
        has clearly been the better one: on a stream whose concept moves at every sample
        the horizon comes down to one that follows it. None: the last iterate predicts.

    Attributes
    ----------
    kernel_radius
        `ε'` for the inputs of the last sample learned (its feature names, zero-valued ones
        included: the coordinates an attacker may move).
    collapsed
        True when, over the last two blocks of 128 samples in which both labels came, the
        decisions were those of a constant (one class, or `f` flat and no better than a
        guess; a `CollapseWarning` is issued when it happens).

    Examples
    --------

    >>> from river import datasets, evaluate, metrics
    >>> from river_advsvm import AdvKernelSVM

    >>> model = AdvKernelSVM(epsilon=0.05, seed=42)
    >>> metric = metrics.Accuracy()
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metric)
    Accuracy: ...

    >>> x, y = next(iter(datasets.Phishing()))
    >>> model.predict_one(x), y
    (True, True)

    The margin and its gradient are what white-box attacks use:

    >>> model.decision_one(x) > 0
    True
    >>> sorted(model.decision_gradient_one(x))[:2]
    ['age_of_domain', 'anchor_from_other_domain']

    References
    ----------
    Wu, Hu & Gu. Fast and scalable adversarial training of kernel SVM via doubly stochastic
    gradients. AAAI 2021.
    Wang, Crammer & Vucetic. Breaking the curse of kernelization: budgeted stochastic gradient
    descent for large-scale SVM training. JMLR 13, 2012.
    Madry, Makelov, Schmidt, Tsipras & Vladu. Towards deep learning models resistant to
    adversarial attacks. ICLR 2018.
    Zhang, Xu, Han, Niu, Cui, Sugiyama & Kankanhalli. Attacks which do not kill training make
    adversarial learning stronger. ICML 2020.

    """

    # Saved before these parameters existed (0.1.0), a model learned at the closed form's bound,
    # did not reprocess and predicted with its last iterate.
    _PARAMS_BEFORE_THEY_EXISTED: typing.ClassVar[dict] = {
        "adversary": "closed_form", "adversary_steps": 1, "bounds": None, "reprocess": 0,
        "averaging": None}

    def __init__(
        self,
        epsilon: float = 0.0,
        norm: str = "l2",
        kernel: str = "rbf",
        gamma: float | str | dict = "scale",
        regularization: float = 1e-4,
        step_size: float = 0.5,
        schedule: str = "constant",
        bias_step_size: float = 0.05,
        budget: int | None = 1024,
        budget_policy: str = "merge",
        dtype: str = "float32",
        max_features: int = 10_000,
        warm_up: int = 100,
        seed: int | None = None,
        adversary: str = "pgd",
        adversary_steps: int = 1,
        bounds: tuple[float, float] | None = None,
        reprocess: int = 1,
        averaging: int | None = 1000,
    ):
        if isinstance(gamma, dict):  # (see MarginClassifier: parameters are saved as JSON)
            gamma = {n: inputs.plain_number(g) for n, g in gamma.items()}
        gamma = inputs.plain_number(gamma)
        super().__init__(
            epsilon=epsilon,
            norm=norm,
            regularization=regularization,
            step_size=step_size,
            schedule=schedule,
            bias_step_size=bias_step_size,
            max_features=max_features,
        )
        # A count taken from a numpy array is the int it holds (see MarginClassifier).
        budget, warm_up, seed, adversary_steps, reprocess, averaging = map(
            inputs.plain_number, (budget, warm_up, seed, adversary_steps, reprocess, averaging))
        self.kernel = kernel
        self.gamma = gamma
        self.budget = budget
        self.budget_policy = budget_policy
        self.dtype = dtype
        self.warm_up = warm_up
        self.seed = seed
        self.adversary = adversary
        self.adversary_steps = adversary_steps
        self.bounds = bounds
        self.reprocess = reprocess
        self.averaging = averaging
        if kernel not in kernels.KERNELS:
            raise ValueError(f"kernel must be one of {kernels.KERNELS}, got {kernel!r}")
        by_name = bandwidth.check_gamma(gamma)
        if by_name is not None and len(by_name) > max_features:
            # More bandwidths than the model can have inputs: some could never be used.
            raise ValueError(f"gamma names {len(by_name)} inputs, more than "
                             f"max_features={max_features}")
        if budget_policy not in POLICIES:
            raise ValueError(f"budget_policy must be one of {POLICIES}, got {budget_policy!r}")
        unbounded_ok = budget_policy in SUPPORT_POLICIES
        if not ((budget is None and unbounded_ok)
                or (inputs.is_whole(budget) and 1 <= budget <= 1_000_000)):
            allowed = "a positive int (at most 10^6)" + (" or None" if unbounded_ok else "")
            raise ValueError(f"budget must be {allowed}, got {budget!r}")
        if dtype not in rf.DTYPES:
            raise ValueError(f"dtype must be one of {rf.DTYPES}, got {dtype!r}")
        if not (inputs.is_whole(warm_up) and 1 <= warm_up <= 10_000):
            raise ValueError(f"warm_up must be an int in [1, 10000], got {warm_up!r}")
        if seed is not None and not inputs.is_whole(seed):
            raise ValueError(f"seed must be an int or None, got {seed!r}")
        if adversary not in ADVERSARIES:
            raise ValueError(f"adversary must be one of {ADVERSARIES}, got {adversary!r}")
        if not (inputs.is_whole(adversary_steps) and 1 <= adversary_steps <= 100):
            raise ValueError(f"adversary_steps must be an int in [1, 100], got {adversary_steps!r}")
        if not (inputs.is_whole(reprocess) and 0 <= reprocess <= 100):
            raise ValueError(f"reprocess must be an int in [0, 100], got {reprocess!r}")
        if averaging is not None:
            if not (inputs.is_whole(averaging) and 1 <= averaging <= 1_000_000):
                raise ValueError(f"averaging must be an int in [1, 1000000] or None, "
                                 f"got {averaging!r}")
        self.bounds = inputs.check_box(bounds)
        self._advice = InputAdvice(type(self).__name__)
        if self.bounds is not None and self.norm == "linf":
            self._advice.box_reached(self.epsilon, self.norm, self.bounds, 1)
        # An unseeded model draws its seed now; the seed is state, saved with the model.
        self._seed = seed if seed is not None else random.getrandbits(63)
        # The bandwidth the store keeps (the median of per-input ones, or above it where they
        # span too much: see InputScales; None until 'scale' fitted it) and the per-input
        # bandwidths as factors on the inputs, relative to it.
        power = SCALE_POWERS[kernel]
        reference = (None if isinstance(gamma, str)
                     else reference_gamma(by_name or gamma, max_features, power))
        self._input_scales = InputScales(by_name, reference, max_features, power)
        self._store = None
        # (a row, the same scaled): see _row_margin
        self._scaled_row: tuple | None = None
        # (the row, the average and its count, and the margin of the latest decision with an
        # average: see _deployed_margin)
        self._decided: tuple | None = None
        # Whether the average lags behind the stream (see _follow), and the horizon of the
        # average a restart starts (set by the restart, taken by the step that follows it).
        self._lag = LagWatch()
        self._restart_horizon: int | None = None
        # The average's margin between its exact ones (see _deployed_margin).
        self._given_up = GivenUpEstimate()
        self.kernel_radius = 0.0
        self._radius_names: list | None = None
        # The recent share of active samples; no sample has shown the hinge is not flat yet.
        self._active_share = 1.0
        # The recent mean of the labels (-1 and +1): what a damped bias step follows.
        self._label_balance = 0.0
        # The held rows with what gamma='scale' fits on them, and their signs.
        self._warm_rows = bandwidth.WarmUpRows(kernel)

    def __getstate__(self) -> dict:
        # Not state: the scaled copy of the row being learned (it serves within one call),
        # and the warm-up's held rows laid out for its vote (rebuilt from the held rows,
        # in their order, when next asked).
        return {**self.__dict__, "_scaled_row": None, "_decided": None,
                "_warm_rows": bandwidth.WarmUpRows(self.kernel)}

    def __setstate__(self, state: dict) -> None:
        # A model pickled before the average could start over has no lag watch, nor one
        # pickled before the average's estimate: fresh ones.
        self.__dict__.update({"_decided": None, "_lag": LagWatch(), "_restart_horizon": None,
                              "_given_up": GivenUpEstimate(), "_label_balance": 0.0, **state})

    @property
    def _gamma(self) -> float | None:
        """The bandwidth the store uses: the number given, or `reference_gamma` of the
        per-input ones; None until `gamma='scale'` fitted them."""
        return self._input_scales.gamma

    @property
    def _is_stochastic(self) -> bool:
        return self.seed is None

    def _store_type(self) -> type:
        """What holds `f`: the support vectors or a pool of random features. Everything else
        asks the store (`reprocess`, `maintenance`, `restore`, the sizes), whichever it is."""
        if self.budget_policy in SUPPORT_POLICIES:
            return SupportVectors
        return rf.POLICIES[self.budget_policy]

    # -- the bandwidth --------------------------------------------------------------------------

    def _holds_back(self) -> bool:
        return self._gamma is None and len(self._held) < self.warm_up

    def _rows_to_hold(self) -> int:
        return self.warm_up - len(self._held) if self._gamma is None else 0

    def _fit_gamma(self) -> None:
        """`gamma='scale'`: the bandwidths, from the held-back warm-up rows."""
        fitted, why, centres, floored = self._warm_rows.rows(self._held,
                                                             self._held_inputs).fitted()
        if floored:
            warn_caller(f"gamma='scale': {floored} inputs, mostly nonzero, "
                        "varied by less than a tenth of the median range over the warm-up; so "
                        "many are taken for inputs of the others' kind that barely vary (the "
                        "pixels of a noisy background) and measured in the median range. If "
                        "they are in other units than the rest (counts beside amounts of "
                        "money), put River's preprocessing.StandardScaler in front or pass "
                        "gamma", UserWarning)
        if why:
            taken = (f"each input takes at most the largest width, gamma = "
                     f"{kernels.MAX_GAMMA:g}: rescale the inputs (to [0, 1], say) for the kernel "
                     f"to see them in units of their ranges" if isinstance(fitted, dict)
                     else f"falling back to gamma = 1/d = {fitted:.6g} for every input")
            warn_caller(f"gamma='scale': the {len(self._held)} warm-up samples {why}; {taken}",
                        UserWarning)
        # (The names were validated when they arrived, the bandwidths when they were fitted;
        # no input has a column yet: the model starts after the fit.)
        power = SCALE_POWERS[self.kernel]
        self._input_scales = InputScales(
            fitted if isinstance(fitted, dict) else None,
            reference_gamma(fitted, self.max_features, power), self.max_features,
            power, centres)
        self._warm_rows = bandwidth.WarmUpRows(self.kernel)

    def _unstarted_margins(self, names, values):
        """During the warm-up, a kernel vote of the rows held so far (`sum_i y_i k(x, x_i)`,
        bandwidths fitted on them): a prediction better than a constant, that changes nothing."""
        if not self._held or len(self._labels) < 2:
            return super()._unstarted_margins(names, values)
        return self._warm_rows.vote(self._held, self._held_inputs, self._labels[-1], names,
                                    values, self.kernel) + self._bias

    @property
    def fitted_gamma(self) -> float | dict | None:
        """The bandwidth in use: the number given, or one per feature name (what
        `gamma='scale'` fitted, or the dict given); None until it is known. Passing it as
        `gamma` makes a model that learns exactly as this one, unless the warm-up centred an
        input far from 0 (see `gamma`): a model given its bandwidths stores it uncentred."""
        if self._gamma is None:
            return None
        by_name = self._input_scales.by_name
        return dict(by_name) if by_name is not None else self._gamma

    # -- hooks ----------------------------------------------------------------------------------

    def _start(self):
        if self._gamma is None:
            self._fit_gamma()
        store_type = self._store_type()
        if store_type is SupportVectors:
            self._store = SupportVectors(self.kernel, self._gamma, self.budget,
                                         self.budget_policy, self.dtype)
        else:  # random features are drawn from the model's seed
            self._store = store_type(self.kernel, self._gamma, self._seed, self.budget,
                                     self.dtype, self.max_features)
        self._store.start()

    def _add_inputs(self, names, hashes, values=None):
        self._input_scales.add(names, len(self._index))
        self._store.add_inputs(hashes)
        if values is not None and self._input_scales.by_name is not None:
            self._advice.late_and_wide(names, values, self._input_scales, len(self._index),
                                       fitted=self.gamma == "scale")

    def _collapse_advice(self, v: np.ndarray) -> str:
        if self.gamma == "scale" and isinstance(self._store, SupportVectors):
            # An input that alone keeps the sample from every stored vector, with a width
            # fitted to its range (a time, a counter): no width helps, the input must go.
            # (With a width given, a kernel too narrow does the same to bounded inputs.)
            far = input_advice.out_of_reach(self._input_scales.row(v), self._store.vectors,
                                            self._store.gamma, self.kernel)
            if far is not None:
                j, ranges = far
                return (f". Input {inputs.shown_name(self._index.names[j])} alone puts the "
                        "latest sample out of the kernel's reach of every stored vector (it is "
                        f"{ranges:.3g} times the kernel's width from the nearest one): an input "
                        "that keeps growing (a time, a counter, an id) cannot be learned by a "
                        "kernel; drop it, or pass what repeats (an hour of the day, a "
                        "difference)")
        if self.epsilon > 0:
            # A kernel too narrow collapses learning at any radius: the model without it tells.
            return (super()._collapse_advice(v) + "; if that one collapses too, the kernel "
                    "is too narrow for the inputs (a smaller gamma)")
        # Natural learning that collapses is most often a kernel too narrow for its inputs:
        # every sample is far from the stored ones, so f is near 0 everywhere.
        return (". Learning without a threat, that is most often a kernel too narrow for the "
                "inputs (each sample far from all others): a smaller gamma, or inputs on one "
                "scale (a StandardScaler in front; one-hot indicators weigh more than "
                "standardised numbers under gamma='scale')")

    def _kernel_radius_for(self, names: list) -> float:
        """`eps'` for a sample over these inputs (the ones an attacker may move), cached for
        streams that repeat their feature names."""
        if names != self._radius_names:
            self._radius_names = names
            if self.norm == "l2" and self.bounds is not None:
                self._advice.box_reached(self.epsilon, self.norm, self.bounds, len(names))
            input_scales = self._input_scales
            scales = len(names) if input_scales.uniform else input_scales.of(names)
            self.kernel_radius = kernels.adversarial_radius(
                self.kernel, self._gamma, self.epsilon, self.norm, scales)
        return self.kernel_radius

    def _row_margin(self, v, u, u_names, u_hashes):
        if self._input_scales.centres is not None:
            self._advice.off_centre(v, self._input_scales, self._index.names)
        scaled, u = self._input_scales.scaled(v, u, u_names)
        # The step that follows on the same row reuses its scaled copy (see _step).
        self._scaled_row = (v, scaled)
        return self._store.value(scaled, u, u_hashes) + self._bias

    def _step(self, v, y, g, t, names):
        store = self._store
        q = self._input_scales.columns(len(v))
        eta, eta_bias = self._step_sizes(t)
        radius = self._kernel_radius_for(names) if self.epsilon > 0 else 0.0
        if self.epsilon > 0 and self.adversary == "pgd":
            # The attacker's point replaces the sample, unless the closed form's bound already
            # shows the sample inactive: sound for every attack on the exact kernel expansion
            # of support vectors, not for random features (it is the exact kernel's bound, and
            # PGD beats it on the deployed features), which attack every sample.
            if not isinstance(store, SupportVectors) or y * g - radius * store.norm < 1.0:
                v, g = self._attacked(v, y, g, names)
            radius = 0.0
        if q is not None:
            # The margin's scaled row when it is of this row (no input added since): `add`
            # then knows it for the row `value` got, and does not check it again.
            given, scaled = self._scaled_row or (None, None)
            v = scaled if given is v else self._input_scales.row(v)
        self._scaled_row = None
        active = 1.0 - y * g + radius * store.norm > 0.0
        self._active_share += (active - self._active_share) / ACTIVE_WINDOW
        self._label_balance += (y - self._label_balance) / LABEL_WINDOW
        store.scale(1.0 - eta * self.regularization)
        if active:
            store.add(eta * y, v)
            rounding = getattr(store, "rounding", None)
            if rounding:
                self._advice.rounding_swamps(rounding, self.gamma, self.dtype)
            self._bias += eta_bias * self._bias_direction(y)
            if radius > 0.0 and store.norm > 0.0:
                store.scale(max(0.0, 1.0 - eta * radius / store.norm))
        self._reprocess_stored(eta, radius)
        if self.averaging is not None:
            if store.averaged is None:  # (restarted; a new store; or one loaded or folded
                # without an average)
                horizon, self._restart_horizon = self._restart_horizon or self.averaging, None
                store.averaged = _average_type(store)(store, horizon)
            store.averaged.update(self._bias, self.group_rate)

    def _bias_direction(self, y: float) -> float:
        """The bias step of an active sample, in units of `eta_bias`: its label, damped once
        nearly every sample is active. Then the hinge loss is flat in b and its steps are a
        random walk (on CIFAR at L-inf 0.1, where every attacked sample is active, b wandered
        between -1 and +1 while f varied by 0.3: every decision one class for hundreds of
        samples). What they average to, the labels' balance, is kept past `BALANCE_SLACK`: an
        unbalanced stream on which f learns nothing (every sample active, f near 0) moves b
        towards the majority instead of leaving it at 0, where it decides for the negative
        class whichever is more frequent."""
        damping = min(1.0, (1.0 - self._active_share) / (1.0 - FLAT_BIAS_SHARE))
        balance = self._label_balance
        drift = math.copysign(max(0.0, abs(balance) - BALANCE_SLACK), balance)
        return damping * y + (1.0 - damping) * drift

    def _reprocess_stored(self, eta: float, radius: float) -> None:
        """`reprocess` hinge steps on stored vectors, after the sample's own step: the same step
        size, the margin lowered by the closed form's `radius` term as the sample's was. No
        shrink (they are not new samples: the regularization per sample, and so how fast the
        model forgets, stay as they were) and no bias step: the bias is not regularised, and
        the stored vectors' labels are not the stream's balance (measured: with bias steps,
        Bananas lost 1 point, the digits' adversarial example its robustness)."""
        store = self._store  # (random features keep no vectors: their `reprocess` does nothing)
        for _ in range(self.reprocess):
            if store.reprocess(self._bias, eta, radius * store.norm) and radius > 0.0 \
                    and store.norm > 0.0:
                store.scale(max(0.0, 1.0 - eta * radius / store.norm))

    def group_revisits(self, position: int) -> None:
        """In a group whose models are averaged (see `group_steps`): revisit stored vectors
        (`reprocess`) from where one model learning the group's whole stream would be at its
        sample `position`.

        A fold gives every worker the same model, revisit cursor included: each would revisit
        the same vectors with its group-sized step, from the first again after every fold.
        The worker ranked `r` in a group learning `n` samples a round each, after a fold that
        holds `N` samples, takes `position = N + r n`: the workers revisit consecutive shares
        of the vectors, and move on round after round, as one model would.
        """
        if not (inputs.is_whole(position) and position >= 0):
            raise ValueError(f"position must be an int >= 0, got {position!r}")
        if self._store is not None:
            self._store.revisit_from(self.reprocess * position)

    def _attacked(self, v: np.ndarray, y: float, g: float, names: list) -> tuple[np.ndarray, float]:
        """The attacker's point in the threat ball around `v` that is learned
        (`adversary.attacker_point`), and its margin; the store's latest `value` is of that
        point (what `add` stores)."""
        store, input_scales = self._store, self._input_scales
        q = input_scales.columns(len(v))

        def margin(x):
            return store.value(input_scales.row(x)) + self._bias

        def gradient(x):  # at the point of the latest `value`, chained through x -> q (x - c)
            return store.gradient(x) if q is None else store.gradient(input_scales.row(x)) * q

        return adversary.attacker_point(margin, gradient, v, g, y, self.epsilon, self.norm,
                                        self.adversary_steps, self.bounds, self._movable(names))

    def _movable(self, names: list) -> np.ndarray | None:
        """The inputs an attacker may move in a sample with these names (None: all of them)."""
        columns = self._index.lookup(names)
        if columns.complete and len(names) == len(self._index):
            return None
        movable = np.zeros(len(self._index), dtype=bool)
        movable[columns.known_columns] = True
        return movable

    def _predicting(self) -> tuple:
        """What predicts: `f` and `b`, or with `averaging` their average (once a step was
        averaged)."""
        average = getattr(self._store, "averaged", None)
        return (self._store, self._bias) if average is None else (average, average.bias)

    def _row_decision(self, v, u, u_names, u_hashes, margin=None):
        average, bias = self._predicting()
        if average is self._store:
            return super()._row_decision(v, u, u_names, u_hashes, margin)
        if margin is None:  # the store's kernel row, which the average shares
            self._row_margin(v, u, u_names, u_hashes)
        decision = average.value_at_latest_row() + bias
        if getattr(average, "orphans", None) is not None:
            self._decided = (self._store.latest_row(), average, average.count, decision)
        return decision

    def _follow(self, sign, g, deployed):
        if deployed is None or not deployed[2]:  # (an estimate does not decide a restart)
            return
        verdict = self._lag.update((g > 0) == (sign > 0), (deployed[0] > 0) == (sign > 0))
        average = self._store.averaged
        if verdict == RESTART:
            # The step about to be taken starts a new average at the last iterate, over half
            # the horizon: the stream moved faster than this one followed.
            self._restart_horizon = max(average.horizon // 2,
                                        min(SHORTEST_HORIZON, average.horizon))
            self._store.averaged = None
            self._given_up.reset()
        elif verdict == LENGTHEN:
            average.horizon = min(self.averaging, 2 * average.horizon)

    def _deployed_margin(self):
        average, bias = self._predicting()
        if average is self._store:
            return None
        orphans = getattr(average, "orphans", None)
        keeps_given_up = orphans is not None and orphans.size > 0
        # Without vectors f gave up, the row learning computed gives the average whole. Those
        # need a product of their own: at every DEPLOYED_EVERY-th learned sample (at every one
        # it would cost about a fifth of the step), the same bits whether the sample was just
        # predicted or not (predicting changes nothing the model keeps); in between, an
        # estimate for the collapse watch alone (`river_advsvm.given_up_estimate`).
        held = average.value_at_latest_row(given_up=False) + bias
        if not keeps_given_up:
            return held, bias, True
        if self._n_learned % DEPLOYED_EVERY:
            estimate = self._given_up.of(held)
            return None if estimate is None else (estimate, bias, False)
        decided = self._decided
        if (decided is not None and decided[0] is self._store.latest_row()
                and decided[1] is average and decided[2] == average.count):
            exact = decided[3]  # (the decision just made on this row)
        else:
            exact = average.value_at_latest_row() + bias
        self._given_up.exact(held, exact)
        return exact, bias, True

    def _decision_block(self, V, U, u_names, u_hashes):
        if self._input_scales.centres is not None:
            self._advice.off_centre(V, self._input_scales, self._index.names)
        V, U = self._input_scales.scaled(V, U, u_names)
        expansion, bias = self._predicting()
        return expansion.values(V, U, u_hashes) + bias

    def _gradient_block(self, V, U, u_names, u_hashes):
        input_scales = self._input_scales
        expansion, _ = self._predicting()
        GV, GU = expansion.gradients(*input_scales.scaled(V, U, u_names), u_hashes)
        return input_scales.chained(GV, GU, u_names)

    def _certified_radii(self, names, values, margins, norm, bounds):
        if self._store is None:
            if self._held and len(self._labels) == 2:
                return np.zeros(len(margins))  # the warm-up's provisional vote: no certificate
            return np.where(margins > 0, math.inf, 0.0)  # a constant model never changes
        V, U, u_names, u_hashes = self._with_named_inputs(
            names, *self._dense(names, values, keep_zero=True))
        input_scales = self._input_scales
        Vs, Us = input_scales.scaled(V, U, u_names)
        q = input_scales.columns(V.shape[1])
        q = np.ones(V.shape[1]) if q is None else q
        q_u = input_scales.of(u_names)
        if bounds is not None and input_scales.centres is not None:
            # The rows are taken about the centres: so is the box, column by column.
            centres = np.concatenate([input_scales.column_centres(V.shape[1]),
                                      input_scales.centres_of(u_names)])
            bounds = (bounds[0] - centres, bounds[1] - centres)
        if isinstance(self._store, SupportVectors):
            expansion, bias = self._predicting()
            if expansion is not self._store:  # the average, as one expansion
                expansion = expansion.expansion()
            return certify.support_radii(expansion, margins, np.hstack([Vs, Us]), norm,
                                         bias=bias, scale=np.concatenate([q, q_u]),
                                         bounds=bounds)
        # Every input may move, the ones the sample lacks (0) too: the store's and its own.
        average, _ = self._predicting()  # (the store's features, the average's coefficients)
        return certify.kernel_radii(self._store, margins, norm, Vs, Us, u_hashes, q, q_u,
                                    n_inputs=V.shape[1] + len(u_names),
                                    coefficients=average.coefficients)

    def _with_named_inputs(self, names: list, V, U, u_names: list, u_hashes: list) -> tuple:
        """`_dense`'s `(V, U, u_names, u_hashes)` of rows over `names`, with the inputs the
        bandwidths name that the model has not learned and the rows lack, at 0: an attacker may
        move those too, each at its own bandwidth (they are inputs of the model like the ones
        it learned; at most `max_features`, checked when the model was made, so not counted
        against the rows' own unknown inputs)."""
        by_name = self._input_scales.by_name
        if not by_name:
            return V, U, u_names, u_hashes
        given, known = set(names), self._index.position
        absent = [n for n in by_name if n not in known and n not in given]
        if not absent:
            return V, U, u_names, u_hashes
        return (V, np.hstack([U, np.zeros((len(U), len(absent)))]), u_names + absent,
                u_hashes + self._unknown_hashes(absent))

    def _max_state_bytes(self):
        most = self._store_type().max_state_bytes(self.budget, self.max_features, self.dtype)
        if self.averaging is None:
            return most
        if self._store_type() is SupportVectors:  # the average's weights, orphans, heirs
            most += SupportVectors.max_state_bytes(orphan_capacity(self.budget),
                                                   self.max_features, self.dtype)
            return most + 16 * (self.budget or 0)  # (its coefficients, and their base)
        # The average's coefficients: one per feature.
        return most + 8 * (checkpoint.MAX_ARRAY_BYTES // 16 if self._store_type().unbounded
                           else self.budget)

    def _margin_reach(self):
        # A kernel value is at most 1, a random feature sqrt(2) cos(.): at most sqrt(2) each.
        if self._store is None:
            return 0.0
        # (with `averaging`, the average's too: one learns, the other predicts)
        reaches = [np.abs(e.coefficients).sum() for e in (self._store, self._predicting()[0])]
        return math.sqrt(2.0) * float(max(reaches))

    def _named_value_bounds(self):
        # A gamma dict names its inputs, maybe others than the model's. 'scale' fits a
        # bandwidth, and maybe a centre, per input of the warm-up (at most max_features), some
        # of which may never get a column (zero in every held row).
        if isinstance(self.gamma, dict):
            return len(self.gamma), len(self.gamma)
        if isinstance(self.gamma, str):
            return self.max_features, 2 * self.max_features
        return 0, 0

    def _negate(self):
        if self._decided is not None:  # (negating every term negates the sum exactly)
            row, average, count, decision = self._decided
            self._decided = (row, average, count, -decision)
        self._given_up.negate()
        if self._store is not None:
            self._store.negate()
        self._bias = -self._bias
        self._label_balance = -self._label_balance

    def _checkpoint_params(self):
        params = super()._checkpoint_params()
        gamma = params["gamma"]
        # JSON keys are strings: a dict of bandwidths for inputs 0, 1 (an array's columns) would
        # come back naming '0' and '1', and one with tuple names could not be written. Such a
        # dict is saved as [name's encoding, bandwidth] pairs, as fitted bandwidths are.
        if isinstance(gamma, dict) and not all(isinstance(n, str) for n in gamma):
            params["gamma"] = as_pairs(gamma)
        return params

    @classmethod
    def _params_from_checkpoint(cls, params):
        gamma = params.get("gamma")
        if isinstance(gamma, list):
            params = {**params, "gamma": from_pairs(gamma)}
        return params

    def _model_state(self):
        scalars = {"seed": self._seed, "kernel_radius": self.kernel_radius,
                   "active_share": self._active_share, "label_balance": self._label_balance,
                   "average_lag": self._lag.state(),
                   "given_up_estimate": self._given_up.state(),
                   **self._input_scales.state(fitted=isinstance(self.gamma, str))}
        arrays = {}
        if self._store is not None:
            store_scalars, arrays = self._store.state()
            scalars["store"] = store_scalars
            average = getattr(self._store, "averaged", None)
            if average is not None:
                scalars["average"], average_arrays = average.state()
                arrays = {**arrays, **average_arrays}
        return scalars, arrays

    def _restore_model_state(self, scalars, arrays):
        self._seed = int(scalars["seed"])
        # A seed given is the seed of the features: state of another is a model that does not
        # learn as its parameters say (random features keep no bandwidth of their own to tell).
        if self.seed is not None and self._seed != self.seed:
            raise ValueError(f"the saved seed {self._seed!r} is not the seed parameter "
                             f"{self.seed!r}")
        self._input_scales = InputScales.restored(scalars, self.gamma, self._input_scales.by_name,
                                                  self.max_features, SCALE_POWERS[self.kernel])
        if self._held and self._gamma is not None:
            # Rows are held back only until 'scale' fits the bandwidth, then learned at once:
            # a model with both would never learn them, and could not be saved and read back.
            raise ValueError("the model holds warm-up rows back and already has its bandwidth")
        self.kernel_radius = float(scalars.get("kernel_radius", 0.0))
        if not 0.0 <= self.kernel_radius < math.inf:  # NaN fails too
            raise ValueError(f"kernel_radius {self.kernel_radius!r} is out of range")
        # Saved before the bias step was damped: full steps until nearly every sample is active.
        self._active_share = float(scalars.get("active_share", 0.0))
        if not 0.0 <= self._active_share <= 1.0:
            raise ValueError(f"active_share {self._active_share!r} is out of range")
        self._label_balance = float(scalars.get("label_balance", 0.0))
        if not -1.0 <= self._label_balance <= 1.0:
            raise ValueError(f"label_balance {self._label_balance!r} is out of range")
        if "average_lag" in scalars:  # (not in checkpoints of models that never kept it)
            self._lag.restore(scalars["average_lag"])
            if self._lag.restarts > self._n_learned:  # (each restart follows a learned sample)
                raise ValueError(f"{self._lag.restarts} restarts of the average, more than the "
                                 f"{self._n_learned} samples learned")
        if "given_up_estimate" in scalars:  # (not in checkpoints of models that never kept it)
            self._given_up.restore(scalars["given_up_estimate"], MAX_ABS_MARGIN)
        if ("store" in scalars) != self._started:
            # A model starts its store as it starts learning: one without the other would
            # predict from the bias alone, then start a second store over no inputs.
            raise ValueError("a started model has a store, and only a started one")
        if "store" in scalars:
            if self._gamma is None:
                raise ValueError("a started model needs its gamma")
            self._start()
            self._input_scales.rebuild(self._index.names)
            self._store.restore(scalars["store"], arrays, self._index.hashes)
            if "average" in scalars:
                average = None if self.averaging is None else \
                    _average_type(self._store).restore(self._store, scalars["average"], arrays)
                # (its horizon is shorter than `averaging` after restarts, never longer)
                if average is None or average.horizon > self.averaging:
                    raise ValueError("the saved average is not one of averaging="
                                     f"{self.averaging!r}")
                if not abs(average.bias) <= MAX_ABS_BIAS:
                    raise ValueError(f"the average's bias {average.bias:g} is out of range "
                                     f"(|bias| <= {MAX_ABS_BIAS:g})")
                self._store.averaged = average

    # -- introspection --------------------------------------------------------------------------

    @property
    def n_features(self) -> int:
        """Number of random features in the model (0 for support vectors; the inputs it knows
        are `n_inputs`)."""
        return 0 if self._store is None else self._store.n_features

    @property
    def n_support_vectors(self) -> int:
        """Number of stored support vectors (0 for random features)."""
        return 0 if self._store is None else self._store.n_support_vectors

    @property
    def budget_maintenance(self) -> dict:
        """What keeping the support vectors within the budget has cost so far: merges,
        removals and the summed `||f_before - f_after||^2` of those events (empty for random
        features, and before the model's first step: during a warm-up)."""
        return {} if self._store is None else dict(self._store.maintenance)

    @property
    def average_restarts(self) -> int:
        """How many times the average of the iterates (`averaging`) started over from the last
        iterate, which had clearly been deciding better: most often, the stream changed."""
        return self._lag.restarts

    @property
    def rkhs_norm(self) -> float:
        """`||f||_H` as the adversarial term uses it (see `river_advsvm.budget` for the random
        features; exact for support vectors)."""
        return 0.0 if self._store is None else self._store.norm


def _average_type(store) -> type:
    """The average of the iterates a store of this representation keeps."""
    return AveragedVectors if isinstance(store, SupportVectors) else AveragedFeatures
