"""Certified radii of the support-vector model (`river_advsvm.support.SupportVectors`).

`support_radii` (called as `river_advsvm.certify.support_radii`) takes the largest of four
sound bounds, each proved where it is computed:

- `bounds.NormBound`, the kernel-norm bound `|f(x') - f(x)| <= ||f|| sqrt(2 - 2 min kappa)`;
- `bounds.IntervalBound`, per-vector intervals of the distance to each stored vector;
- `bounds.TaylorBound` (RBF), the first-order term with a curvature remainder;
- `bounds.ExponentialBound` (RBF), the first-order term with the kernel's exact exponential
  factor and the smaller of two remainders: one paid only by the vectors that lower the
  margin, and a second-order one in which the vectors of both signs cancel.

All four hold for the prediction as the store computes it, in float32 or float64:
`points.Rounding` bounds how far the computed `f` can be from the exact one anywhere in the
ball, and every bound takes it off. `points.Ball` is the threat set around the points, as the
store sees it; `points.Chunk` the points' positions relative to the vectors; `search.largest`
the search for the largest radius at which a bound holds.

"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm.kernels import check_norm
from river_advsvm.support_certificate.bounds import (
    ExponentialBound, IntervalBound, NormBound, TaylorBound,
)
from river_advsvm.support_certificate.points import Ball, Chunk, Model, Rounding
from river_advsvm.support_certificate.search import beyond

__all__ = ["support_radii"]

# Points certified at once (their per-vector temporaries are points x vectors).
_CERTIFY_ROWS = 256


def support_radii(
    store,
    margins: np.ndarray,
    X: np.ndarray,
    norm: str,
    *,
    bias: float = 0.0,
    scale: np.ndarray | None = None,
    bounds: tuple[float, float] | None = None,
) -> np.ndarray:
    """Certified radii of the support-vector model `g = f + bias` at the rows of `X`.

    Within the returned radius (in input units, in `norm`), no perturbation of the input,
    intersected with the box `bounds`, changes the sign of `g` as the store computes it.
    0 where the margin is not positive, `inf` where no perturbation can change it.

    Parameters
    ----------
    store
        The model's `SupportVectors`.
    margins
        `y g(x)` per row, as the model computed it.
    X
        The rows as the model feeds them to the store: inputs multiplied by `scale`. Columns
        past `store.n_inputs` are inputs the store does not know (its vectors are 0 there).
    norm
        'l2' or 'linf': the threat ball, in input units.
    bias
        The model's bias.
    scale
        `q`, the positive factor of each column (1 if None). An input ball of radius `r`
        becomes `|q_j delta_j| <= r q_j` (L-inf) or `||q * delta||_2 <= r max q` (L2).
    bounds
        `(lo, hi)`, the box every input lives in (for L-inf only; ignoring it is sound):
        numbers, or one per column for rows taken about centres (`q (x - c)`: the box of
        column `j` is then `(lo - c_j, hi - c_j)`).

    Notes
    -----
    Why it is sound. Let `x'` be any point of the threat set and `x~ = q x`, `x~' = q x'` the
    rows the store sees; let `g` be the model in exact arithmetic over the stored vectors and
    `g^` what the store computes. Six facts:

    1. Rounding: `|g^(x') - g(x')| <= err(x')`. Each distance is a dot product computed in the
       storage precision, off by at most `gamma_n sum_j |x~_j s_j|` (`gamma_n = n u / (1 - n u)`,
       any summation order), plus the rounding of `x~` to storage and of the few other
       operations; `|exp(-a) - exp(-b)| <= exp(-min(a, b)) (1 - exp(-|a - b|))` carries that
       to each kernel value, and the weighted sum adds `gamma_B sum |a_i|`. Every term grows
       with the radius, so its value at the ball's worst case, `err(r)`, bounds it.
    2. The kernel-norm bound: `f(x') - f(x) = <f, k(x~', .) - k(x~, .)>` (reproducing
       property), so by Cauchy-Schwarz `|f(x') - f(x)| <= ||f|| ||k(x~', .) - k(x~, .)|| =
       ||f|| sqrt(2 - 2 kappa(x~' - x~))`, and `kappa` only decreases with the distance, whose
       largest value over the ball is a closed form (or a sum over coordinates within the box).
       `||f||` here is an upper bound of `s^2 a^T K a` recomputed from the vectors in float64,
       with its own rounding added.
    3. The interval bound: the exact distance from `x~'` to each stored vector lies in an
       interval (the triangle inequality for an L2 ball; for an L-inf ball in the box, each
       coordinate independently, which is exact), so `f(x')` is at least the sum of the
       positive terms at their smallest kernel value and the negative ones at their largest.
    4. The first-order bound (RBF): by Taylor's theorem `f(x~') = f(x~) + grad f(x~) . d +
       d' H(xi) d / 2` with `d = x~' - x~` and `xi` on the segment, inside the ball. The
       linear term's worst case over the ball is exact (a dual norm, or per coordinate in the
       box), with the rounding of the computed gradient added; each vector's part of the
       curvature term is bounded over the ball (see `TaylorBound.slack`). Unlike (3), the
       linear term keeps the cancellation between vectors of both signs.
    5. The exponential bound (RBF): `k(x~', s_i) = k(x~, s_i) e^{-a_i} e^{-gamma ||d||^2}` with
       `a_i = 2 gamma (x~ - s_i) . d`, exactly; `e^{-a} >= 1 - a` for the vectors that raise
       `y g` and `e^{-a} <= 1 - a + e^A - 1 - A` (`|a| <= A`) for the ones that lower it give
       the linear term of (4) plus a remainder only the latter pay, and the common factor
       `e^{-gamma ||d||^2}` scales the sum (see `ExponentialBound`). On MNIST at L-inf 8/255
       its remainder is about a tenth of (4)'s curvature term.
    6. The second-order remainder (RBF): the same identity with `e^{-a}` expanded to its
       fourth term keeps the quadratic terms of all vectors in one form `2 gamma^2 delta' M
       delta`, `M = sum_i y w_i k(x~, s_i) (x~ - s_i)(x~ - s_i)'`, at least `2 gamma^2
       lambda_min(M) max ||d||^2` where `lambda_min(M) < 0`; each vector pays its cubic term
       (and, if it lowers the margin, the quartic one) at its own `A_i`. `lambda_min` is bounded
       from below by a Cholesky factorisation that verifies it, and the distance from the
       computed `M` to the exact one is taken off. Where vectors of both signs sit together
       (as adversarial training leaves them) this remainder is several times smaller than
       (5)'s; the bound uses the smaller of the two.

    With `m^ = y g^(x)` the margin the model computed, (1) and (2) give
    `y g^(x') >= m^ - err(0) - ||f|| sqrt(2 - 2 min kappa) - err(r)`, (1) and (3) give
    `y g^(x') >= y bias + (interval bound of y f) - err(r)`, (1) and (4) give
    `y g^(x') >= m^ - err(0) - (linear worst case) - (curvature bound) - err(r)`, and (1) and
    (5) or (6) give `y g^(x') >= y bias + min(L, c L) - err(r)` with `L = m^ - err(0) - y bias -
    (linear worst case) - (remainder)` and `c = e^{-gamma max ||d||^2}`: where one of them is
    positive for radius `r`, no point of the ball changes the computed prediction. Each
    bound grows with `r`; its radius is found by a bracketed search that only ever returns a
    radius at which the inequality was checked (so rounding in the search cannot make it
    unsound), and the largest of the four is returned. Sums of non-negative terms evaluated in
    float64 are inflated by a relative 1e-9, far more than their own rounding.

    """
    check_norm(norm)
    X = np.asarray(X, dtype=np.float64)
    margins = np.asarray(margins, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] < store.n_inputs or margins.shape != (len(X),):
        raise ValueError(
            f"expected {len(margins)} rows of at least {store.n_inputs} columns, got {X.shape}"
        )
    q = np.ones(X.shape[1]) if scale is None else np.asarray(scale, dtype=np.float64)
    if q.shape != (X.shape[1],) or not (np.isfinite(q).all() and (q > 0).all()):
        raise ValueError(f"scale must hold {X.shape[1]} positive finite factors")
    if bounds is not None:
        lo, hi = bounds
        if not (np.isfinite(lo).all() and np.isfinite(hi).all() and np.all(lo < hi)):
            raise ValueError(f"bounds must be (lo, hi) with finite lo < hi, got {bounds!r}")
    if not np.isfinite(X).all():
        raise ValueError("rows to certify must be finite")
    radii = np.zeros(len(X))
    positive = margins > 0
    if not store.size or not X.shape[1]:
        # f is 0, or the rows have no input to move (a model that learned empty samples
        # certifying one): nothing changes the prediction.
        radii[positive] = math.inf
        return radii
    model = Model(store, len(q), bias)
    rounding = Rounding(model, q)
    for start in range(0, len(X), _CERTIFY_ROWS):
        rows = slice(start, start + _CERTIFY_ROWS)
        ball = Ball(norm, q, bounds, model.rbf, X[rows])
        chunk = Chunk(model, ball, rounding, X[rows], margins[rows])
        radii[rows] = _chunk_radii(chunk)
    return np.where(positive, radii, 0.0)


def _chunk_radii(chunk: Chunk) -> np.ndarray:
    """The largest radius of the bounds, per point of the chunk."""
    radii = np.zeros(len(chunk.x))
    ok = np.flatnonzero(chunk.margins - 2 * chunk.error_at_x > 0)
    if not ok.size:
        return radii
    found = NormBound(chunk).radii(ok)
    found = np.maximum(found, beyond(IntervalBound(chunk).slack, chunk.ball, ok, found))
    if chunk.model.rbf:
        taylor = TaylorBound(chunk)
        found = np.maximum(found, beyond(taylor.slack, chunk.ball, ok, found))
        exponential = ExponentialBound(chunk, taylor)
        found = np.maximum(found, beyond(exponential.slack, chunk.ball, ok, found))
    radii[ok] = found
    return radii

