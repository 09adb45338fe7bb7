"""Certified radii: how far an input can move before the prediction can change (MATH.md §7).

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

`sigma_max(Omega)` costs an SVD; it depends on the features alone, so it is cached per feature
store and recomputed only when the store's `version` changes (never after the inputs are
registered, for the fixed pool of `compact`).

For a linear model `g(x) = w . x + b` the certificate is exact: `|g(x)| / ||w||_*`.

"""

from __future__ import annotations

import math
import weakref

import numpy as np

from river_advsvm.kernels import NORMS

__all__ = ["certified_accuracy", "kernel_radii", "linear_radii"]

# Radii are shrunk by this relative amount, so that rounding in the margin or in the bounds
# can never turn a certified radius into an unsound one.
_SAFETY = 1e-9

_spectra: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _check_norm(norm: str) -> None:
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


def _spectrum(store) -> dict:
    """`sigma_max(Omega)` and each feature's L1 and L2 weight norm, cached per store version."""
    key = (store.version, store.size, store.omega.shape)
    cached = _spectra.get(store)
    if cached is not None and cached["key"] == key:
        return cached
    cached = {"key": key, **_weight_norms(store.omega)}
    _spectra[store] = cached
    return cached


def _weight_norms(omega: np.ndarray) -> dict:
    if omega.size == 0:
        return {"sigma": 0.0, "l1": np.zeros(omega.shape[1]), "l2": np.zeros(omega.shape[1])}
    sigma = float(np.linalg.svd(omega, compute_uv=False)[0])
    return {
        # SVD is backward stable: a relative error of a few ulps, covered generously here.
        "sigma": sigma * (1.0 + 1e-12),
        "l1": np.abs(omega).sum(axis=0),
        "l2": np.sqrt(np.einsum("ij,ij->j", omega, omega)),
    }


def _invert_saturating_bound(weights: np.ndarray, slopes: np.ndarray, margins: np.ndarray):
    """The radius `r` at which `sum_i weights_i min(2, slopes_i r)` reaches each margin.

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
    rising = np.concatenate([np.cumsum((weights * slopes)[::-1])[::-1], [0.0]])
    at_kinks = saturated[:-1] + kinks * rising[:-1]
    segment = np.searchsorted(at_kinks, margins, side="left")
    with np.errstate(divide="ignore", invalid="ignore"):
        radii = (margins - saturated[segment]) / rising[segment]
    return np.where(segment == len(kinks), math.inf, radii)


def kernel_radii(
    store,
    margins: np.ndarray,
    n_inputs: int,
    norm: str,
    extra_weights: np.ndarray | None = None,
) -> np.ndarray:
    """Certified radii of a random-feature model at points with the given margins `|g(x)|`.

    Parameters
    ----------
    store
        The model's `budget.FeatureStore` (features `omega`, `phase`, `coefficients`).
    margins
        `y g(x)` per point; points with a margin <= 0 get radius 0.
    n_inputs
        Number of input coordinates an attacker may change (`d` in the L-inf bound).
    norm
        'l2' or 'linf'.
    extra_weights
        Weights of inputs the store has no rows for (`store.weights_for`), if any.

    """
    _check_norm(norm)
    margins = np.asarray(margins, dtype=float)
    coefficients = math.sqrt(2.0) * np.abs(store.coefficients)
    if extra_weights is not None and extra_weights.size:
        spectrum = _weight_norms(np.vstack([store.omega, extra_weights]))
    else:
        spectrum = _spectrum(store)
    lipschitz = float(np.sqrt(coefficients @ coefficients)) * spectrum["sigma"]
    if norm == "linf":
        lipschitz *= math.sqrt(n_inputs)
    with np.errstate(divide="ignore"):
        first = margins / lipschitz if lipschitz > 0 else np.full(margins.shape, math.inf)
    dual = spectrum["l2"] if norm == "l2" else spectrum["l1"]
    second = _invert_saturating_bound(coefficients, dual, margins)
    radii = np.maximum(first, second) * (1.0 - _SAFETY)
    return np.where(margins > 0, radii, 0.0)


def linear_radii(weights: np.ndarray, margins: np.ndarray, norm: str) -> np.ndarray:
    """Exact radii `y g(x) / ||w||_*` of a linear model (0 where the margin is <= 0)."""
    _check_norm(norm)
    margins = np.asarray(margins, dtype=float)
    dual = float(np.sqrt(weights @ weights)) if norm == "l2" else float(np.abs(weights).sum())
    with np.errstate(divide="ignore"):
        radii = margins / dual if dual > 0 else np.full(margins.shape, math.inf)
    return np.where(margins > 0, radii * (1.0 - _SAFETY), 0.0)


def certified_accuracy(model, X, y, epsilon: float, norm: str | None = None) -> float:
    """Fraction of samples predicted correctly with a certified radius of at least `epsilon`.

    A lower bound on the accuracy under any attack of radius `epsilon` in `norm` (the model's
    by default). With `epsilon = 0` it is the clean accuracy.

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
    radii = model.certified_radius_many(X, y, norm=norm)
    if not len(radii):
        return float("nan")
    # The radius is positive exactly where the prediction is right (the margin y g(x) > 0).
    return float(np.mean((radii > 0) & (radii >= epsilon)))
