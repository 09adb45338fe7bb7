"""Certified radii: how far an input can move before the prediction can change.

For the deployed random-feature model `f(x) = sum_i c_i cos(w_i . x + u_i)` (`c_i = sqrt(2)
a_i`, `Omega` the matrix of the `w_i`) and any perturbation `delta`, since
`|cos s - cos t| <= min(2, |s - t|)`:

1. `|f(x + delta) - f(x)| <= ||c||_2 ||Omega delta||_2 <= ||c||_2 sigma_max(Omega) ||delta||_2`
   (for an L-inf ball of radius r over d inputs, `||delta||_2 <= sqrt(d) r`);
2. `|f(x + delta) - f(x)| <= sum_i |c_i| min(2, ||w_i||_* r)` with `||.||_*` the dual norm
   (L2 for L2, L1 for L-inf).

The bias does not move, so the prediction at `x` cannot change within any radius `r` at which
a bound is below `|g(x)|`. Each bound is solved for `r` exactly (the second is piecewise linear
in `r`) and the larger radius is returned. Both are sound for the model as deployed, whatever
the attack, and make no claim about the ideal kernel machine it approximates. The box the
inputs live in is ignored, which can only make the radius smaller (still sound).

Inputs the model rescales (`gamma` per feature) enter through their input-space weights
`q_j w_ij`. The deployed model computes in float32 (or float64): the rounding of its projections,
cosines and sums is bounded (`_rounding`) and taken off the margin, at the point and anywhere
in the ball, so the radius holds for the prediction as computed, not only for exact arithmetic.

`sigma_max(Omega)` costs an SVD; it depends on the features alone, so it is cached per feature
store and recomputed only when the store's `version` changes (never after the inputs are
registered, for the fixed pool of `compact`). A sample's inputs the store does not know add
their weights to `Omega`: decomposed with it when that is small, else bounded without a new
SVD (`_with_rows`).

For a linear model `g(x) = w . x + b` the certificate is exact in the ball, `|g(x)| / ||w||_*`,
less what rounding in the margin's float64 dot product could take (`linear_radii`); it ignores
a box (`bounds`), within which it is sound but can be smaller than the exact radius.

For the support-vector model (`river_advsvm.support`), `support_radii` bounds the exact kernel
expansion instead (see `river_advsvm.support_certificate`, where each bound is proved). A box
(`bounds`) only removes points from the ball, so the largest radius a bound certifies with it is
never smaller than without it; the radius returned is found by a search to a relative
precision of 1e-6, and may come out below the one without the box by up to that much (measured:
5e-7).

"""

from __future__ import annotations

import math
import weakref

import numpy as np

from river_advsvm import inputs
from river_advsvm.kernels import check_norm, l2_length
from river_advsvm.support_certificate import support_radii

__all__ = ["certified_accuracy", "kernel_radii", "linear_radii", "support_radii"]

# Radii are shrunk by this relative amount, so that rounding in the margin or in the bounds
# can never turn a certified radius into an unsound one.
_SAFETY = 1e-9

_spectra: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: Spectra kept per store version with inputs it does not know (one per set of those inputs),
#: cleared when full.
_STACKS_PER_STORE = 64
#: Up to this `(d + k) B min(d + k, B)`, the weights of a sample's k unknown inputs are stacked
#: under the store's d and decomposed (a few ms); past it, bounded without (`_with_rows`).
_EXACT_STACK_WORK = 2 * 10**7


def _spectrum(store, scales: np.ndarray, unknown_hashes=(), unknown_scales=None,
              W_extra=None) -> dict:
    """Bounds on `sigma_max` and each feature's L1 and L2 norm of the input-space weights
    `q_j w_ij`, over the store's inputs and any it does not know (`W_extra`, those of
    `unknown_hashes`), cached per store version (the scales change only with the inputs,
    which bump it) and set of unknown inputs. The unknown inputs' weights are stacked under
    the store's and decomposed together when that is cheap, else bounded (`_with_rows`)."""
    version = (store.version, store.size, store.omega.shape)
    cached, own = _spectra.get(store), None
    if cached is None or cached[0] != version:
        own = scales[:, None] * store.omega
        cached = (version, _weight_norms(own), {})
        _spectra[store] = cached
    _, own_spectrum, stacks = cached
    if W_extra is None or not len(unknown_hashes):
        return own_spectrum
    key = tuple(unknown_hashes)
    if key not in stacks:
        if len(stacks) >= _STACKS_PER_STORE:
            stacks.clear()
        own = scales[:, None] * store.omega if own is None else own
        rows = unknown_scales[:, None] * W_extra
        height, width = own.shape[0] + len(rows), own.shape[1]
        if height * width * min(height, width) <= _EXACT_STACK_WORK:
            stacks[key] = _weight_norms(np.vstack([own, rows]))
        else:
            stacks[key] = _with_rows(own_spectrum, own, rows)
    return stacks[key]


def _with_rows(spectrum: dict, own: np.ndarray, rows: np.ndarray) -> dict:
    """The bounds of `spectrum` (those of the weights `own`, A) with `rows` (E) stacked under
    them, without a decomposition of the stack: the columns' L1 and L2 norms exactly, and
    `sigma_max^2`, the top eigenvalue of `[[A A', A E'], [E A', E E']]`, at most that of the
    2 x 2 matrix of its blocks' norms `[[sigma_A^2, b], [b, sigma_E^2]]` with `b = ||A E'||`
    (`x' G x <= sum_ij ||x_i|| ||G_ij|| ||x_j||`). O(d k B + k^2 B) for k rows, where the
    stack's SVD costs O((d + k) B min(d + k, B)) for every new set of rows."""
    rows = np.asarray(rows, dtype=np.float64)
    extra = _weight_norms(rows)
    a, c = spectrum["sigma"] ** 2, extra["sigma"] ** 2
    cross = np.asarray(own, dtype=np.float64) @ rows.T
    b = float(np.linalg.svd(cross, compute_uv=False)[0]) * (1.0 + 1e-12) if cross.size else 0.0
    # The product's rounding: each entry within gamma_B of |A| |E|', whose norm is at most
    # ||A||_F ||E||_F.
    terms = own.shape[1] + 2
    b += terms * 2.0**-52 * l2_length(spectrum["l2"]) * l2_length(extra["l2"])
    top = (a + c) / 2 + math.hypot((a - c) / 2, b)
    return {
        "sigma": math.sqrt(top) * (1.0 + 1e-12),
        "l1": spectrum["l1"] + extra["l1"],
        "l2": np.hypot(spectrum["l2"], extra["l2"]),
    }


def _weight_norms(omega: np.ndarray) -> dict:
    omega = np.asarray(omega, dtype=np.float64)
    if omega.size == 0:
        return {"sigma": 0.0, "l1": np.zeros(omega.shape[1]), "l2": np.zeros(omega.shape[1])}
    sigma = float(np.linalg.svd(omega, compute_uv=False)[0])
    return {
        # SVD is backward stable: a relative error of a few ulps, covered generously here.
        "sigma": sigma * (1.0 + 1e-12),
        "l1": np.abs(omega).sum(axis=0),
        "l2": np.sqrt(np.einsum("ij,ij->j", omega, omega)),
    }


def _invert_saturating_bound(weights: np.ndarray, slopes: np.ndarray, margins: np.ndarray,
                             linear: float = 0.0):
    """The radius `r` at which `linear r + sum_i weights_i min(2, slopes_i r)` reaches each
    margin.

    The bound is continuous, piecewise linear and nondecreasing in `r`, with a kink at each
    `2 / slopes_i`; margins it never reaches get `inf`.
    """
    moving = (slopes > 0) & (weights > 0)
    weights, slopes = weights[moving], slopes[moving]
    kinks = 2.0 / slopes
    order = np.argsort(kinks)
    weights, slopes, kinks = weights[order], slopes[order], kinks[order]
    # Between kinks k and k+1 the first k+1 features are saturated (they add 2 w_i each) and
    # the others grow linearly: bound(r) = saturated_k + r * rising_k.
    saturated = 2.0 * np.concatenate([[0.0], np.cumsum(weights)])
    rising = np.concatenate([np.cumsum((weights * slopes)[::-1])[::-1], [0.0]]) + linear
    at_kinks = saturated[:-1] + kinks * rising[:-1]
    segment = np.searchsorted(at_kinks, margins, side="left")
    with np.errstate(divide="ignore", invalid="ignore"):
        radii = (margins - saturated[segment]) / rising[segment]
    return np.where((segment == len(kinks)) & (linear == 0), math.inf, radii)


def _rounding(store, coefficients, V, U, W_extra, scales, unknown_scales,
              dual) -> tuple[np.ndarray, float]:
    """Bounds on how far the deployed model's computed `f` (`coefficients` over the store's
    features) can be from the exact one.

    The computed projection `z_i = x . w_i + u_i` (in the store's dtype, any summation order)
    is within `gamma_n (sum_j |x_j w_ij| + |u_i|)` of the exact one, `gamma_n = n u / (1 - n u)`
    with `n` the number of terms plus one for rounding the input itself and `u` the unit
    roundoff; `cos` adds at most a few ulps (8 u is allowed) and the float64 sum over the
    features `gamma_B sqrt(2) sum |a_i|`. At `x + delta` the first term grows by at most
    `gamma_n ||w_i||_* r`. Returns `(E0 per point, E1)`: the error is at most `E0 + E1 r` anywhere
    in the ball of radius `r`.
    """
    u = float(np.finfo(store.dtype).eps) / 2
    terms = V.shape[1] + U.shape[1] + 2
    gamma_n = terms * u / (1 - terms * u)
    a = np.abs(coefficients)
    magnitudes = np.abs(V) @ np.abs(store.omega).astype(np.float64)
    if W_extra is not None:
        magnitudes += np.abs(U) @ np.abs(W_extra).astype(np.float64)
    magnitudes += np.abs(store.phase[: store.size]).astype(np.float64)
    float64_sum = len(a) * 2.0**-53 / (1 - len(a) * 2.0**-53) * math.sqrt(2.0) * a.sum()
    e0 = math.sqrt(2.0) * (gamma_n * magnitudes + 8 * u) @ a + float64_sum
    e1 = math.sqrt(2.0) * gamma_n * float(a @ dual)
    return e0, e1


def kernel_radii(
    store,
    margins: np.ndarray,
    norm: str,
    V: np.ndarray,
    U: np.ndarray,
    unknown_hashes: list,
    scales: np.ndarray,
    unknown_scales: np.ndarray,
    n_inputs: int,
    coefficients: np.ndarray | None = None,
) -> np.ndarray:
    """Certified radii of a random-feature model at points with the given margins.

    Parameters
    ----------
    store
        The model's `budget.FeatureStore` (features `omega`, `phase`, `coefficients`).
    margins
        `y g(x)` per point, as the model computes it; a margin <= 0 gets radius 0.
    norm
        'l2' or 'linf'.
    V
        The points as the store sees them (each input multiplied by its scale), over the
        store's inputs.
    U
        The same points over the inputs the store does not know (`unknown_hashes`).
    unknown_hashes
        The hashes of the names of those inputs, in the columns' order of `U`: a random
        feature's weight for an input it never saw is drawn from its name's hash.
    scales
        The scale `q` of each of the store's inputs: an input-space change `delta` moves the
        point by `q * delta`, so the bounds use the input-space weights `q_j w_ij`.
    unknown_scales
        The scale `q` of each input the store does not know.
    n_inputs
        Number of input coordinates an attacker may change (`d` in the L-inf bound).
    coefficients
        The coefficients of the function certified over the store's features, if not the
        store's own (the average of its iterates).

    """
    check_norm(norm)
    margins = np.asarray(margins, dtype=float)
    own = store.coefficients if coefficients is None else coefficients
    # The weights of inputs the store does not know (bounded by the model's max_features).
    W_extra = store.weights_for(unknown_hashes) if len(unknown_hashes) else None
    spectrum = _spectrum(store, scales, unknown_hashes, unknown_scales, W_extra)
    dual = spectrum["l2"] if norm == "l2" else spectrum["l1"]
    e0, e1 = _rounding(store, own, V, U, W_extra, scales, unknown_scales, dual)
    coefficients = math.sqrt(2.0) * np.abs(own)
    margins = margins - 2.0 * e0  # the computed margin here and there, both within E0
    lipschitz = l2_length(coefficients) * spectrum["sigma"]
    if norm == "linf":
        lipschitz *= math.sqrt(n_inputs)
    lipschitz += e1
    with np.errstate(divide="ignore"):
        first = margins / lipschitz if lipschitz > 0 else np.full(margins.shape, math.inf)
    second = _invert_saturating_bound(coefficients, dual, margins, linear=e1)
    radii = np.maximum(first, second) * (1.0 - _SAFETY)
    return np.where(margins > 0, radii, 0.0)


def linear_radii(weights: np.ndarray, margins: np.ndarray, norm: str,
                 magnitudes: np.ndarray | None = None) -> np.ndarray:
    """Radii `y g(x) / ||w||_*` of a linear model (0 where the margin is <= 0).

    `magnitudes`, `sum_j |x_j w_j| + |b|` per point, makes the radii hold for the margin as
    computed in float64, not only for exact arithmetic: a dot product of `n` terms (any order)
    is within `gamma_n` times that sum of the exact one, and the sum grows by at most
    `||w||_* r` in the ball. Next to the boundary the computed margin is mostly rounding, and
    a radius taken from it alone can be beaten by a point the model rounds across.
    """
    check_norm(norm)
    margins = np.asarray(margins, dtype=float)
    dual = l2_length(weights) if norm == "l2" else float(np.abs(weights).sum())
    growth = 1.0
    if magnitudes is not None:
        terms = len(weights) + 2  # the products, the bias, and the input's own rounding
        gamma_n = terms * 2.0**-53 / (1 - terms * 2.0**-53)
        # The computed margin here and there, both within gamma_n (sum + ||w||_* r).
        margins = margins - 2.0 * gamma_n * np.asarray(magnitudes, dtype=float)
        growth += gamma_n
    with np.errstate(divide="ignore", over="ignore"):  # (a subnormal norm: radii past floats)
        radii = margins / (dual * growth) if dual > 0 else np.full(margins.shape, math.inf)
    return np.where(margins > 0, radii * (1.0 - _SAFETY), 0.0)


def certified_accuracy(model, X, y, epsilon: float, norm: str | None = None) -> float:
    """Fraction of samples predicted correctly with a certified radius of at least `epsilon`.

    A lower bound on the accuracy under any attack of radius `epsilon` in `norm` (the model's
    by default). With `epsilon = 0` it is the clean accuracy but for samples exactly on the
    boundary (`g(x) = 0`, predicted negative): right, with no radius to certify. NaN for an
    empty batch.

    Examples
    --------

    >>> from river_advsvm import AdvLinearSVM
    >>> from river_advsvm.certify import certified_accuracy

    >>> model = AdvLinearSVM()
    >>> for _ in range(50):
    ...     model.learn_one({"a": 0.2, "b": 0.3}, False)
    ...     model.learn_one({"a": 0.9, "b": 0.7}, True)

    >>> import pandas as pd
    >>> X = pd.DataFrame({"a": [0.1, 0.6, 0.9], "b": [0.2, 0.5, 0.9]})
    >>> model.certified_radius_many(X, [False, True, True]).round(3).tolist()
    [0.25, 0.332, 0.784]
    >>> certified_accuracy(model, X, [False, True, True], epsilon=0.3)
    0.6666666666666666

    """
    inputs.check_number("epsilon", epsilon, lambda v: v >= 0, ">= 0")
    radii = model.certified_radius_many(X, y, norm=norm)
    if not len(radii):
        return float("nan")
    # The radius is positive exactly where the prediction is right (the margin y g(x) > 0).
    return float(np.mean((radii > 0) & (radii >= epsilon)))
