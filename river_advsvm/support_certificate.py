"""Certified radii of the support-vector model (`river_advsvm.support.SupportVectors`).

`support_radii` (called as `river_advsvm.certify.support_radii`) takes the largest of four
sound bounds, each proved where it is computed:

- `_NormBound`, the kernel-norm bound `|f(x') - f(x)| <= ||f|| sqrt(2 - 2 min kappa)`;
- `_IntervalBound`, per-vector intervals of the distance to each stored vector;
- `_TaylorBound` (RBF), the first-order term with a curvature remainder;
- `_ExponentialBound` (RBF), the first-order term with the kernel's exact exponential
  factor and the smaller of two remainders: one paid only by the vectors that lower the
  margin, and a second-order one in which the vectors of both signs cancel.

All four hold for the prediction as the store computes it, in float32 or float64: `_Rounding`
bounds how far the computed `f` can be from the exact one anywhere in the ball, and every bound
takes it off. `_Ball` is the threat set around the points, as the store sees it; `_Chunk` the
points' positions relative to the vectors; `_largest` the search for the largest radius at
which a bound holds.

"""

from __future__ import annotations

import functools
import math

import numpy as np

from river_advsvm.kernels import NORMS
from river_advsvm.support_store import _BLOCK, _padded

__all__ = ["support_radii"]

_U = 2.0**-53  # unit roundoff of float64
_ETA = 2.0**-1074  # the smallest positive float64
# Bisection stops when the bracket is this tight, relative to its upper end.
_RADIUS_PRECISION = 1e-6
_BISECTION_STEPS = 60
# Points certified at once (their per-vector temporaries are points x vectors).
_CERTIFY_ROWS = 256
# The second-order remainder's eigenvalue problem, at most columns x vectors x min(columns,
# vectors) (about 0.1 s a point at 784 x 1024 x 784 on one core): beyond it, the exponential
# remainder alone.
_SECOND_ORDER_WORK = 2**30
# Bounds evaluated in float64 from non-negative terms are inflated by this factor: far more
# than their rounding (a relative `gamma_n` for n terms), so the checks stay sound.
_BOUND_SLACK = 1 + 1e-9


def _gamma_n(n: int, u: float) -> float:
    """The classic bound on the relative error of a sum of `n` products rounded at `u`."""
    return n * u / (1.0 - n * u)


def _pairwise_sums(X, S, *terms):
    """For each `term`: `sum_j term(X[i] - S[k], rows)_j` per row `i` of `X` and vector `k` of
    `S` (`term` maps a block of differences, rows x vectors x inputs, and the block's rows to
    values of the same shape). Computed over blocks of rows, which bounds the temporaries."""
    out = [np.empty((len(X), len(S))) for _ in terms]
    step = max(1, _BLOCK // max(1, len(S) * X.shape[1]))
    for i in range(0, len(X), step):
        rows = slice(i, i + step)
        gap = X[rows, None, :] - S[None]
        for sums, term in zip(out, terms):
            sums[rows] = term(gap, rows).sum(axis=2)
    return out


def _l1_distances(X, S, weights=None):
    """`sum_j w_j |X_ij - S_kj|` per row `i` of `X` and vector `k` of `S` (`w` = 1 if None)."""
    if weights is None:
        return _pairwise_sums(X, S, lambda gap, rows: np.abs(gap))[0]
    return _pairwise_sums(X, S, lambda gap, rows: np.abs(gap) * weights)[0]


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
        `(lo, hi)`, the box every input lives in (for L-inf only; ignoring it is sound).

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
       curvature term is bounded over the ball (see `_TaylorBound.slack`). Unlike (3), the
       linear term keeps the cancellation between vectors of both signs.
    5. The exponential bound (RBF): `k(x~', s_i) = k(x~, s_i) e^{-a_i} e^{-gamma ||d||^2}` with
       `a_i = 2 gamma (x~ - s_i) . d`, exactly; `e^{-a} >= 1 - a` for the vectors that raise
       `y g` and `e^{-a} <= 1 - a + e^A - 1 - A` (`|a| <= A`) for the ones that lower it give
       the linear term of (4) plus a remainder only the latter pay, and the common factor
       `e^{-gamma ||d||^2}` scales the sum (see `_ExponentialBound`). On MNIST at L-inf 8/255
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
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
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
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"bounds must be (lo, hi) with finite lo < hi, got {bounds!r}")
    if not np.isfinite(X).all():
        raise ValueError("rows to certify must be finite")
    radii = np.zeros(len(X))
    positive = margins > 0
    if not store.size:
        # f is 0: the prediction is the bias, which no input changes.
        radii[positive] = math.inf
        return radii
    model = _Model(store, len(q), bias)
    rounding = _Rounding(model, q)
    for start in range(0, len(X), _CERTIFY_ROWS):
        rows = slice(start, start + _CERTIFY_ROWS)
        ball = _Ball(norm, q, bounds, model.rbf, X[rows])
        chunk = _Chunk(model, ball, rounding, X[rows], margins[rows])
        radii[rows] = _chunk_radii(chunk)
    return np.where(positive, radii, 0.0)


def _chunk_radii(chunk: _Chunk) -> np.ndarray:
    """The largest radius of the bounds, per point of the chunk."""
    radii = np.zeros(len(chunk.x))
    ok = np.flatnonzero(chunk.margins - 2 * chunk.error_at_x > 0)
    if not ok.size:
        return radii
    found = _NormBound(chunk).radii(ok)
    found = np.maximum(found, _beyond(_IntervalBound(chunk).slack, chunk.ball, ok, found))
    if chunk.model.rbf:
        taylor = _TaylorBound(chunk)
        found = np.maximum(found, _beyond(taylor.slack, chunk.ball, ok, found))
        exponential = _ExponentialBound(chunk, taylor)
        found = np.maximum(found, _beyond(exponential.slack, chunk.ball, ok, found))
    radii[ok] = found
    return radii


class _Model:
    """The store as the certificate sees it: its vectors in float64 over every column (0 past
    the ones it knows), coefficients, scale, bias, and an upper bound of `||f||`."""

    def __init__(self, store, d: int, bias: float):
        self.store, self.bias = store, bias
        self.rbf = store.kernel == "rbf"
        self.gamma = store.gamma
        size, n = store.size, store.n_inputs
        S = np.zeros((size, d))
        S[:, :n] = store._S[:size, :n]
        self.S = S
        self.squared = np.einsum("ij,ij->i", S, S)
        self.lengths = np.sqrt(self.squared)
        self.a = store._a[:size].copy()
        self.s = store._scale
        self.abs_a = float(np.abs(self.a).sum())
        self.norm_bound = _norm_upper_bound(store)
        self.column_min = S.min(axis=0)
        self.column_max = S.max(axis=0)
        # Columns some vector is nonzero in.
        self.used = (self.column_min != 0) | (self.column_max != 0)


def _norm_upper_bound(store) -> float:
    """An upper bound of `||f||`: `s^2 a^T K a` in float64 from the stored vectors, plus its
    rounding (each squared distance within `gamma_n (||s_i||^2 + ||s_j||^2)`, each kernel value
    within `gamma` times that, and the sums within `gamma_B`)."""
    size, n = store.size, store.n_inputs
    S = store._S[:size, :n].astype(np.float64)
    a = store._a[:size]
    squared = np.einsum("ij,ij->i", S, S)
    total = 0.0
    step = max(1, _BLOCK // max(1, size))
    for start in range(0, size, step):
        rows = slice(start, start + step)
        if store.kernel == "rbf":
            E = squared[rows, None] + squared[None] - 2.0 * (S[rows] @ S.T)
            np.maximum(E, 0.0, out=E)
        else:
            E = _l1_distances(S[rows], S)
        total += float(a[rows] @ (np.exp(-store.gamma * E) @ a))
    weight = float(np.abs(a).sum())
    if store.kernel == "rbf":
        distance_error = 2.1 * (_gamma_n(n + 3, _U) + 2 * _U)
        kernel_error = store.gamma * distance_error * 2 * weight * float(np.abs(a) @ squared)
    else:
        kernel_error = 1.01 * _gamma_n(n + 2, _U) * weight * weight
    rounding = kernel_error + (5 * _U + 2.02 * _gamma_n(size + 2, _U)) * weight * weight
    return abs(store._scale) * math.sqrt(max(total + rounding, 0.0)) * (1 + 4 * _U)


# -- the threat set -------------------------------------------------------------------------------


class _Ball:
    """The threat ball of radius `r` around each point `x` (rows as the store sees them, inputs
    times `q`), intersected with the box `bounds` (L-inf only), in the store's coordinates."""

    def __init__(self, norm, q, bounds, rbf, x):
        self.norm, self.q, self.bounds, self.rbf = norm, q, bounds, rbf
        self.q_max = float(q.max())
        self.q_l2 = float(np.sqrt(q @ q))
        if bounds is not None and norm == "linf":
            # How far each input can move within the box (raw units, rounded up).
            lo, hi = bounds
            raw = x / q
            self.room = np.maximum(np.abs(raw - lo), np.abs(hi - raw))
            self.room += 4 * _U * (np.abs(raw) + abs(lo) + abs(hi))

    def reach(self, idx, r):
        """At points `idx`: max ||delta~||_2^2 and max ||delta~||_1 over the ball of radius `r`."""
        q = self.q
        widen = 1.0 + _gamma_n(len(q) + 4, _U)
        if self.norm == "l2":
            return (r * self.q_max) ** 2 * widen, r * self.q_l2 * widen
        if self.bounds is None:
            return r * r * float(q @ q) * widen, r * float(q.sum()) * widen
        moves = np.minimum(r[:, None], self.room[idx]) * q
        return np.square(moves).sum(axis=1) * widen, moves.sum(axis=1) * widen

    def saturation(self, idx):
        """The radius beyond which the ball covers the whole box (inf without a box)."""
        if self.norm == "l2" or self.bounds is None:
            return np.full(len(idx), math.inf)
        return self.room[idx].max(axis=1, initial=0.0)

    def radius_for_reach(self, idx, target):
        """The largest radius whose reach (squared L2 for RBF, L1 for Laplacian) is <= target."""
        ones = np.ones(len(idx))
        reach2, reach1 = self.reach(idx, ones)
        unit = reach2 if self.rbf else reach1
        if self.norm == "l2" or self.bounds is None:
            with np.errstate(divide="ignore", invalid="ignore"):
                radius = np.sqrt(target / unit) if self.rbf else target / unit
            return np.where(unit > 0, radius, math.inf)
        # Within the box the reach is piecewise in r: bisect it (cheap, no kernel values).
        saturation = self.saturation(idx)
        lo, hi = np.zeros(len(idx)), saturation.copy()
        for _ in range(_BISECTION_STEPS):
            mid = (lo + hi) / 2
            reach2, reach1 = self.reach(idx, mid)
            below = (reach2 if self.rbf else reach1) <= target
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        reach2, reach1 = self.reach(idx, saturation)
        return np.where((reach2 if self.rbf else reach1) <= target, math.inf, hi)

    def box(self, r, x):
        """Per point and coordinate: the scaled interval `[c - w, c + w]` the input can reach."""
        q = self.q
        raw = x / q
        lo, hi = raw - r[:, None], raw + r[:, None]
        if self.bounds is not None:
            lo, hi = np.maximum(lo, self.bounds[0]), np.minimum(hi, self.bounds[1])
            lo, hi = np.minimum(lo, raw), np.maximum(hi, raw)
        slack = 4 * _U * (np.abs(raw) + r[:, None] + np.abs(lo) + np.abs(hi))
        lo, hi = (lo - slack) * q, (hi + slack) * q
        lo -= 2 * _U * np.abs(lo)
        hi += 2 * _U * np.abs(hi)
        center, width = (lo + hi) / 2, (hi - lo) / 2
        return center, width + 2 * _U * (np.abs(lo) + np.abs(hi))


# -- the points and the store's rounding ----------------------------------------------------------


class _Rounding:
    """`err(r)`: how far the store's computed `f` can be from the exact one, anywhere in the
    ball of radius `r` (fact 1 of `support_radii`).

    Rounding of the deployed arithmetic: `u_s` of the storage, `ux` of a scaled input. A squared
    distance is `||x||^2 + ||s||^2 - 2 x . s`: the product in storage precision (error
    `gamma_n sum |x_j s_j|`), the norms summed in float64, then assembled (many rows: in storage
    precision, one row: in float64); `exp` in storage precision.
    """

    def __init__(self, model: _Model, q):
        store = model.store
        size, n, d = store.size, store.n_inputs, len(q)
        u_s = float(np.finfo(store.dtype).eps) / 2
        ux = u_s + 2 * _U
        terms = _padded(n) + (d - n) + 2
        self.model = model
        self.u_s, self.ux = u_s, ux
        self.storage_sum = _gamma_n(terms + 1, u_s)
        self.c_input = 2.1 * ux + 1.1 * _gamma_n(d + 1, _U) + 3.1 * u_s + 2.1 * _U
        self.c_vector = 1.1 * _gamma_n(d + 1, _U) + 3.1 * u_s + 2.1 * _U
        self.c_product = 2.1 * _gamma_n(terms, u_s) + 2.1 * ux + 4.2 * u_s + 4.2 * _U
        self.sum_error = (_gamma_n(size + 2, _U) + 2 * _U) * 1.01 * model.abs_a
        self.q_dot_abs = np.abs(model.S) @ q

    def __call__(self, chunk: _Chunk, r, idx):
        """`err(r)` at the points `idx` of the chunk."""
        model = self.model
        reach2, reach1 = chunk.ball.reach(idx, r)
        gamma = model.gamma
        if model.rbf:
            rho = np.sqrt(reach2)[:, None]
            spread = rho * model.lengths[None]
            if chunk.ball.norm == "linf":
                spread = np.minimum(spread, r[:, None] * self.q_dot_abs[None])
            x2 = np.square(chunk.x_length[idx][:, None] + rho)
            E = self.c_input * x2 + self.c_vector * model.squared[None]
            E += self.c_product * (chunk.products[idx] + spread)
            closest = np.square(np.maximum(chunk.near[idx] - rho, 0.0))
        else:
            reach = reach1[:, None]
            x1 = chunk.x_l1[idx][:, None] + reach
            E = 1.01 * self.storage_sum * (chunk.far[idx] + reach + self.ux * x1) + self.ux * x1
            closest = np.maximum(chunk.near[idx] - reach, 0.0)
        per_vector = np.exp(-gamma * np.maximum(closest - E, 0.0)) * -np.expm1(-gamma * E)
        per_vector += 10 * self.u_s  # the exponent's rounding and exp's own
        return abs(model.s) * (per_vector @ np.abs(model.a) + self.sum_error)


class _Chunk:
    """Points to certify, with their margins, and where they are relative to the vectors:
    `near` and `far` bound each exact distance (L2 for RBF, L1 for Laplacian) from below and
    above, rounding of this float64 computation included."""

    def __init__(self, model: _Model, ball: _Ball, rounding: _Rounding, x, margins):
        self.model, self.ball, self.x = model, ball, x
        x_squared = np.einsum("ij,ij->i", x, x)
        self.x_squared = x_squared
        if model.rbf:
            distances = x_squared[:, None] + model.squared[None] - 2.0 * (x @ model.S.T)
            np.maximum(distances, 0.0, out=distances)
            self.distances = distances
            exact_error = _exact_error(len(ball.q))
            slack = exact_error * (x_squared[:, None] + model.squared[None])
            self.near = np.sqrt(np.maximum(distances - slack, 0.0))
            self.far = np.sqrt(distances + slack) * (1 + 2 * _U)
            self.near *= 1 - 2 * _U
            self.products = np.abs(x) @ np.abs(model.S).T
            self.x_length = np.sqrt(x_squared)
        else:
            l1 = _l1_distances(x, model.S)
            self.x_l1 = np.abs(x).sum(axis=1)
            slack = 1.01 * _gamma_n(x.shape[1] + 2, _U) * l1 + 2 * _U * self.x_l1[:, None]
            self.near = np.maximum(l1 - slack, 0.0)
            self.far = l1 + slack
        self.rounding = rounding
        self.error_at_x = rounding(self, np.zeros(len(x)), np.arange(len(x)))
        self.margins = margins * (1 - 4 * _U)

    def err(self, r, idx):
        return self.rounding(self, r, idx)

    @functools.cached_property
    def signs(self):
        """The sign of the computed `g` at each point (the label it is certified for)."""
        store, x = self.model.store, self.x
        n = store.n_inputs
        return np.sign(store.values(x[:, :n], x[:, n:]) + self.model.bias)


def _exact_error(d: int) -> float:
    """Relative error of a float64 squared distance `||x||^2 + ||s||^2 - 2 x . s` over `d`
    columns, in units of `||x||^2 + ||s||^2`."""
    return 2.1 * (_gamma_n(d + 3, _U) + 3 * _U)


# -- the search -----------------------------------------------------------------------------------


def _largest(slack, ball: _Ball, idx, upper, start, at_start):
    """Per point `idx`, the largest checked radius in `[start, upper]` where `slack > 0`.

    `slack(r, i)` is how much room the bound leaves at radii `r` for the points `i`
    (positive: certified), nonincreasing in `r`; it is positive at `start` (`at_start`).
    `upper` is a radius where it may fail (inf: search upwards, up to the box). The search
    is regula falsi with the Illinois fix, safeguarded by bisection. Only radii at which
    `slack > 0` was computed are returned (`inf` if it is over the whole box).
    """
    n = len(idx)
    lo, f_lo = start.astype(float), at_start.astype(float)
    hi, f_hi = upper.astype(float), np.full(n, -math.inf)
    everything = np.zeros(n, dtype=bool)
    saturation = ball.saturation(idx)
    # Where the upper end is not known: double the radius until the bound fails, or the
    # ball covers the whole box.
    j = np.flatnonzero(~np.isfinite(hi))
    guess = np.minimum(np.maximum(2 * lo[j], 1e-6), saturation[j])
    for _ in range(200):
        if not j.size:
            break
        f = slack(guess, idx[j])
        holds = f > 0
        lo[j[holds]], f_lo[j[holds]] = guess[holds], f[holds]
        hi[j[~holds]], f_hi[j[~holds]] = guess[~holds], f[~holds]
        whole = holds & (guess >= saturation[j])
        everything[j[whole]] = True
        keep = holds & ~whole
        j, guess = j[keep], np.minimum(2 * guess[keep], saturation[j[keep]])
    everything[j] = True
    ends = np.flatnonzero(~everything & np.isinf(f_hi) & (hi > lo))
    if ends.size:
        f = slack(hi[ends], idx[ends])
        f_hi[ends] = f
        holds = f > 0
        everything[ends[holds & (hi[ends] == saturation[ends])]] = True
        lo[ends[holds]], f_lo[ends[holds]] = hi[ends[holds]], f[holds]
    side = np.zeros(n)
    for _ in range(_BISECTION_STEPS):
        search = np.flatnonzero(~everything & (hi - lo > _RADIUS_PRECISION * hi))
        if not search.size:
            break
        a, b, fa, fb = lo[search], hi[search], f_lo[search], f_hi[search]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            guess = a + (b - a) * fa / (fa - fb)
        # Never closer to an end than half the precision wanted: a root that close is
        # then bracketed at once.
        nudge = np.minimum(0.5 * _RADIUS_PRECISION * b, (b - a) / 4)
        guess = np.where(np.isfinite(fb) & np.isfinite(guess), guess, (a + b) / 2)
        guess = np.clip(guess, a + nudge, b - nudge)
        f = slack(guess, idx[search])
        holds = f > 0
        up, down = search[holds], search[~holds]
        # Illinois: the end kept twice in a row counts half, so both ends keep moving.
        f_hi[up[side[up] > 0]] /= 2
        f_lo[down[side[down] < 0]] /= 2
        lo[up], f_lo[up], side[up] = guess[holds], f[holds], 1.0
        hi[down], f_hi[down], side[down] = guess[~holds], f[~holds], -1.0
    return np.where(everything, math.inf, lo)


def _beyond(slack, ball: _Ball, idx, radii):
    """Per point, the largest radius above `radii` at which `slack > 0` (else 0)."""
    out = np.zeros(len(idx))
    candidates = np.flatnonzero(np.isfinite(radii) & (radii > 0))
    if candidates.size:
        at_start = slack(radii[candidates], idx[candidates])
        holds = at_start > 0
        candidates, at_start = candidates[holds], at_start[holds]
    if candidates.size:
        upper = np.full(len(candidates), math.inf)
        out[candidates] = _largest(slack, ball, idx[candidates], upper, radii[candidates],
                                   at_start)
    return out


# -- the bounds -----------------------------------------------------------------------------------


class _NormBound:
    """The kernel-norm bound (fact 2 of `support_radii`): `|f(x') - f(x)| <= ||f||
    sqrt(2 - 2 kappa)`, with `kappa` the kernel at the ball's largest reach."""

    def __init__(self, chunk: _Chunk):
        self.chunk = chunk

    def bound(self, r, idx):
        model = self.chunk.model
        reach2, reach1 = self.chunk.ball.reach(idx, r)
        reach = reach2 if model.rbf else reach1
        return model.norm_bound * np.sqrt(2.0 * -np.expm1(-model.gamma * reach)) * (1 + 8 * _U)

    def slack(self, r, idx):
        chunk = self.chunk
        bound = self.bound(r, idx) + chunk.error_at_x[idx] + chunk.err(r, idx)
        return chunk.margins[idx] - bound

    def radii(self, idx):
        """Largest radius at which the kernel-norm bound holds, per point (inf if every one)."""
        chunk, model = self.chunk, self.chunk.model
        room = chunk.margins[idx] - 2 * chunk.error_at_x[idx]
        # Beyond this radius the bound fails even without the rounding's growth with r.
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = room / (model.norm_bound * (1 + 8 * _U))
            target = np.where(ratio**2 < 2, -np.log1p(-0.5 * ratio**2) / model.gamma, math.inf)
        upper = chunk.ball.radius_for_reach(idx, target)
        return _largest(self.slack, chunk.ball, idx, upper, np.zeros(len(idx)), room)


class _IntervalBound:
    """The per-vector interval bound (fact 3 of `support_radii`)."""

    def __init__(self, chunk: _Chunk):
        self.chunk = chunk

    def slack(self, r, idx):
        """How much room the per-vector interval bound leaves at radius `r` (points `idx`).

        RBF in an L-inf ball: each coordinate's range within the box, exactly (after a cheap
        screen). Otherwise the distance moves by at most the ball's reach (its L2 radius for
        RBF, its largest L1 length for the Laplacian kernel: exact for the largest L1
        distance without a box, loose for the smallest; exact ranges there would cost
        points x vectors x inputs per step of the search).
        """
        chunk, model = self.chunk, self.chunk.model
        signs = chunk.signs[idx]
        x = chunk.x[idx]
        w = signs[:, None] * (model.s * model.a)[None]
        exact = chunk.ball.norm == "linf" and model.rbf
        if exact:
            screened = self._screen(r, x, w, signs, idx)
            near = np.zeros((len(x), len(model.a)))
            far = np.full((len(x), len(model.a)), math.inf)
            keep = np.flatnonzero(screened)
            if keep.size:
                near[keep], far[keep] = self._coordinate_ranges(r[keep], x[keep])
        else:
            reach2, reach1 = chunk.ball.reach(idx, r)
            reach = (np.sqrt(reach2) if model.rbf else reach1)[:, None]
            near = np.maximum(chunk.near[idx] - reach, 0.0)
            far = chunk.far[idx] + reach
            if model.rbf:
                near, far = np.square(near), np.square(far)
        smallest = np.exp(-model.gamma * far) * (1 - 5 * _U)
        largest = np.minimum(np.exp(-model.gamma * near) * (1 + 5 * _U), 1.0)
        lower = np.where(w > 0, w * smallest, w * largest).sum(axis=1)
        total = np.abs(w).sum(axis=1)
        lower -= _gamma_n(len(model.a) + 2, _U) * total
        base = signs * model.bias
        value = base + lower - 2 * _U * (np.abs(base) + total) - chunk.err(r, idx)
        if exact:
            value[~screened] = -math.inf
        return value

    def _coordinate_ranges(self, r, x):
        """Exact smallest and largest squared distance to each vector over the box."""
        S = self.chunk.model.S
        center, width = self.chunk.ball.box(r, x)
        near, far = _pairwise_sums(
            center, S,
            lambda gap, rows: np.square(np.maximum(np.abs(gap) - width[rows, None, :], 0.0)),
            lambda gap, rows: np.square(np.abs(gap) + width[rows, None, :]),
        )
        widen = _gamma_n(x.shape[1] + 5, _U)
        return near * (1 - widen), far * (1 + widen)

    def _screen(self, r, x, w, signs, idx):
        """A cheap necessary condition for the exact L-inf interval bound (skips hopeless points).

        Lower bounds of each largest distance and upper bounds of each smallest one from
        `sum_j w_j |c_j - s_j| >= max(|w . (c - s)|, sum_j (w_j / R_j) (c_j - s_j)^2)`, with
        `R_j >= |c_j - s_j|`; an optimistic bound, rounding does not matter here.
        """
        model = self.chunk.model
        center, width = self.chunk.ball.box(r, x)
        S = model.S
        c2 = np.einsum("ij,ij->i", center, center)
        cs = center @ S.T
        gap2 = np.maximum(c2[:, None] + model.squared[None] - 2 * cs, 0.0)
        linear = np.abs(np.einsum("ij,ij->i", width, center)[:, None] - width @ S.T)
        reach = np.maximum(np.abs(center - model.column_min), np.abs(center - model.column_max))
        ratio = np.divide(width, reach, out=np.zeros_like(width), where=reach > 0)
        quadratic = (
            np.einsum("ij,ij->i", ratio, center * center)[:, None]
            - 2 * (ratio * center) @ S.T
            + ratio @ np.square(S).T
        )
        spread = np.maximum(linear, quadratic)
        w2 = np.einsum("ij,ij->i", width, width)[:, None]
        far = gap2 + 2 * spread + w2
        near = np.maximum(np.minimum(self.chunk.far[idx] ** 2, gap2 - 2 * spread + w2), 0.0)
        optimistic = np.where(
            w > 0, w * np.exp(-model.gamma * far), w * np.exp(-model.gamma * near)
        )
        total = signs * model.bias + optimistic.sum(axis=1)
        return total > -1e-9 * (np.abs(w).sum(axis=1) + abs(model.bias))


class _TaylorBound:
    """The first-order bound with a curvature remainder, RBF (fact 4 of `support_radii`).

    Built with the gradient of `f` at each point, and how far rounding can have moved it.
    """

    def __init__(self, chunk: _Chunk):
        self.chunk = chunk
        model, x = chunk.model, chunk.x
        gamma, S = model.gamma, model.S
        k = np.exp(-gamma * chunk.distances)
        W = k * (model.s * model.a)
        self.gradient = -2.0 * gamma * (W.sum(axis=1)[:, None] * x - W @ S)
        exact_error = _exact_error(x.shape[1]) * (chunk.x_squared[:, None] + model.squared[None])
        off = np.exp(-gamma * chunk.near**2) * -np.expm1(-gamma * exact_error) + 5 * _U
        sums = _gamma_n(len(model.a) + x.shape[1] + 4, _U)
        spread = off * chunk.far + sums * k * (np.sqrt(chunk.x_squared)[:, None]
                                               + model.lengths[None])
        self.gradient_error = 2.02 * gamma * abs(model.s) * (spread @ np.abs(model.a))

    def first_order(self, r, idx):
        """At radius `r`: an upper bound of `-y grad f(x) . delta` over the ball (the linear
        term's worst case, exact but for the rounding of the computed gradient), and the
        ball's largest `||delta||^2`."""
        chunk, ball = self.chunk, self.chunk.ball
        signs, x = chunk.signs[idx], chunk.x[idx]
        G = self.gradient[idx] * signs[:, None]
        reach2, _ = ball.reach(idx, r)
        if ball.norm == "l2":
            first = r * np.sqrt(np.square(G * ball.q).sum(axis=1))
        elif ball.bounds is None:
            first = r * (np.abs(G) @ ball.q)
        else:
            center, width = ball.box(r, x)
            low, high = center - width - x, center + width - x
            first = np.maximum(-G * low, -G * high).sum(axis=1)
        return first * _BOUND_SLACK + self.gradient_error[idx] * np.sqrt(reach2), reach2

    def slack(self, r, idx):
        """The room `f(x) + grad f(x) . delta - (curvature bound) ||delta||^2 / 2` leaves at `r`.

        Taylor's theorem: `f(x + delta) = f(x) + grad f(x) . delta + delta' H(xi) delta / 2` for
        some `xi` on the segment, inside the ball. For RBF, `delta' H_i delta = k_i(xi)
        (4 gamma^2 ((xi - s_i) . delta)^2 - 2 gamma ||delta||^2)` lies in
        `[-2 gamma k_i ||delta||^2, ||delta||^2 h(||xi - s_i||^2)]`, `h(t) = exp(-gamma t)
        (4 gamma^2 t - 2 gamma)`, which is largest at `t = 1.5 / gamma` (clipped to the
        distances the ball allows). The first-order term keeps the cancellation between
        vectors that the interval bound loses.
        """
        chunk, model = self.chunk, self.chunk.model
        gamma = model.gamma
        signs = chunk.signs[idx]
        first, reach2 = self.first_order(r, idx)
        rho = np.sqrt(reach2)
        near = np.maximum(chunk.near[idx] - rho[:, None], 0.0)
        far = chunk.far[idx] + rho[:, None]
        largest = np.minimum(np.exp(-gamma * near**2), 1.0)
        t = np.clip(1.5 / gamma, near**2, far**2)
        h = np.maximum(np.exp(-gamma * t) * (4 * gamma**2 * t - 2 * gamma), 0.0)
        w = signs[:, None] * (model.s * model.a)[None]
        bend = np.where(w > 0, 2 * gamma * w * largest, -w * h).sum(axis=1)
        curvature = 0.5 * reach2 * bend * _BOUND_SLACK
        room = chunk.margins[idx] - chunk.error_at_x[idx] - first - curvature
        return room - chunk.err(r, idx)


class _ExponentialBound:
    """The first-order term with a remainder from the kernel's own exponential, RBF (facts 5
    and 6 of `support_radii`).

    `||x + delta - s_i||^2 = ||x - s_i||^2 + a_i / gamma + ||delta||^2` with `a_i = 2 gamma
    (x - s_i) . delta`, so `k(x + delta, s_i) = k_i e^{-a_i} c` with `k_i = k(x, s_i)` and `c =
    e^{-gamma ||delta||^2}`, the same for every vector. With `v_i = y w_i`,
    `y g(x + delta) = y b + c sum_i v_i k_i e^{-a_i}`, and for any remainder `R` with

        sum_i v_i k_i e^{-a_i} >= y f(x) + y grad f(x) . delta - R = L

    over the ball, `y g(x + delta) >= y b + min(L, c_min L)` with `c_min = e^{-gamma max
    ||delta||^2}`. `A_i` bounds `|a_i|` over the ball (about `2 gamma epsilon ||x - s_i||_1` in
    an L-inf ball). Two remainders hold, and the smaller is taken:

    - exponential: `e^{-a} >= 1 - a` (convexity) and `e^{-a} <= 1 - a + (e^A - 1 - A)` for
      `|a| <= A` give `R = sum_{v_i < 0} |v_i| k_i (e^{A_i} - 1 - A_i)`: only the vectors that
      pull the margin down pay, each by its own `A_i`;
    - second order: Taylor's theorem to the fourth term, `e^{-a} = 1 - a + a^2 / 2 - a^3 / 6 +
      a^4 e^{-xi} / 24`, keeps the quadratic term of every vector together: `sum_i v_i k_i
      a_i^2 / 2 = 2 gamma^2 delta' M delta` with `M = sum_i v_i k_i (x - s_i)(x - s_i)'`, which
      is at least `2 gamma^2 min(0, lambda_min(M)) max ||delta||^2`, and each vector pays its
      cubic term (`A_i^3 / 6`) and, if it pulls the margin down, the quartic one (`A_i^4
      e^{A_i} / 24`). The vectors of both signs near a point cancel in `M` where the
      exponential remainder charges every one that pulls down (on MNIST at L-inf 8/255, the
      latter is several times the former for a model trained at that radius).

    `lambda_min(M)` costs `M` (vectors x inputs^2) and its eigenvalues, once per point, and is
    verified by a Cholesky factorisation (`_verified_lowest_eigenvalue`). Where that is more
    than `_SECOND_ORDER_WORK` (CIFAR's 3,072 inputs with 1,024 vectors: seconds a point), the
    exponential remainder is used alone.
    """

    def __init__(self, chunk: _Chunk, taylor: _TaylorBound):
        self.chunk, self.taylor = chunk, taylor
        model, ball, x = chunk.model, chunk.ball, chunk.x
        self.spread = None
        if ball.norm == "linf":
            # Per point and vector, the largest |(x - s_i) . delta| in the ball of radius 1
            # (the box ignored, which only widens it): sum_j q_j |x_j - s_ij|, rounded up.
            spread = _l1_distances(x, model.S, ball.q)
            self.spread = spread * (1 + _gamma_n(x.shape[1] + 4, _U)) * _BOUND_SLACK
        # The smallest and largest kernel value each vector can have at the point itself.
        self.kernel_up = np.minimum(np.exp(-model.gamma * chunk.near**2) * (1 + 5 * _U), 1.0)
        self.kernel_down = np.exp(-model.gamma * chunk.far**2) * (1 - 5 * _U)
        # Per point, a lower bound of lambda_min(M) (nan: not computed yet).
        self.lowest = np.full(len(x), math.nan)
        columns, vectors = x.shape[1], len(model.a)
        self.second_order = columns * vectors * min(columns, vectors) <= _SECOND_ORDER_WORK

    def slack(self, r, idx, remainders=("exponential", "second order")):
        """The lower bound of `y g` over the ball of radius `r` at the points `idx`, rounding
        of the computed `g` included (positive: certified), with the smallest of the named
        remainders."""
        chunk, model = self.chunk, self.chunk.model
        gamma = model.gamma
        signs = chunk.signs[idx]
        first, reach2 = self.taylor.first_order(r, idx)
        # |(x - s_i) . delta| <= ||x - s_i|| ||delta|| always; L-inf: also r sum_j q_j |.|.
        spread = chunk.far[idx] * np.sqrt(reach2)[:, None]
        if self.spread is not None:
            spread = np.minimum(spread, r[:, None] * self.spread[idx])
        v = signs[:, None] * (model.s * model.a)[None]
        base = signs * model.bias
        margins, error = chunk.margins[idx], chunk.error_at_x[idx]
        # Huge radii (the search's doubling) overflow to inf and inf - inf: no certificate.
        with np.errstate(over="ignore", invalid="ignore"):
            A = 2 * gamma * spread * (1 + 4 * _U)
            weight = np.abs(v) * self.kernel_up[idx]
            remainder = np.full(len(idx), math.inf)
            if "exponential" in remainders:
                # e^A - 1 - A, rounded up: expm1 is within a few ulps, taken off before the
                # cancellation.
                excess = np.maximum((np.expm1(A) * (1 + 8 * _U) - A) * (1 + 2 * _U), 0.0)
                remainder = np.where(v < 0, weight * excess, 0.0).sum(axis=1)
            if "second order" in remainders and self.second_order:
                cubic = A**3 / 6 + np.where(v < 0, A**4 * np.exp(A) / 24, 0.0)
                second = (weight * cubic).sum(axis=1) * (1 + 16 * _U)
                # Only where it can be the smaller: the quadratic term is never negative.
                maybe = np.flatnonzero(second < remainder)
                if maybe.size:
                    lowest = self._lowest(idx[maybe])
                    second[maybe] += (2 * gamma**2 * np.maximum(-lowest, 0.0) * reach2[maybe]
                                      * (1 + 8 * _U))
                remainder = np.fmin(remainder, second)
            remainder *= _BOUND_SLACK
            low = margins - error - base - first - remainder
            low -= 4 * _U * (np.abs(margins) + error + np.abs(base) + first + remainder)
            shrink = np.exp(-gamma * reach2 * (1 + 2 * _U)) * (1 - 4 * _U)
            low = np.where(low > 0, shrink * low * (1 - 2 * _U), low)
            value = base + low - 2 * _U * (np.abs(base) + np.abs(low)) - chunk.err(r, idx)
        return np.where(np.isnan(value), -math.inf, value)

    def _lowest(self, idx):
        """A lower bound of `lambda_min(M)` at the points `idx`, exact `M` (computed once per
        point)."""
        todo = np.unique(idx[np.isnan(self.lowest[idx])])
        for i in todo:
            self.lowest[i] = self._lowest_at(i)
        return self.lowest[idx]

    def _lowest_at(self, i):
        """`lambda_min(M)` at point `i` of the chunk, from below.

        `M = D' C D` (`D` the rows `d_i = x - s_i`, `C` the weights `c_i = y w_i k_i`) is
        computed in float64 over the columns where the point or a vector is nonzero (the
        others are zero rows of `M`: eigenvalues 0, which the bound clips to anyway). With more
        columns than vectors, its nonzero eigenvalues are those of `R C R'` (vectors x
        vectors), `D' = Q R` by Householder QR, which is exact for rows `d_i + e_i` with
        `||e_i|| <= gamma~ ||d_i||` (Higham, Accuracy and Stability of Numerical Algorithms,
        Theorem 19.4; `gamma~ = 16 m n u / (1 - 16 m n u)` here), so that the matrix it
        describes is within `3 gamma~ sum_i |c_i| ||d_i||^2` of `M`. The computed matrix's
        distance to the exact `M` (exact kernel values and coefficients) is at most
        `sum_i |c_i - c^_i| ||d_i||^2 + gamma_{B+4} sum_i |c^_i| ||d_i||^2` more in spectral
        norm (every error term is bounded entrywise by a matrix `sum_i e_i |d_i| |d_i|'`, whose
        spectral norm is at most its trace), with `||d_i||` at most `far`.
        """
        chunk, model = self.chunk, self.chunk.model
        x = chunk.x[i]
        columns = np.flatnonzero(model.used | (x != 0))
        w = chunk.signs[i] * (model.s * model.a)
        c = w * np.exp(-model.gamma * chunk.distances[i])
        D = x[columns] - model.S[:, columns]
        relative = _gamma_n(len(c) + 4, _U) + 4 * _U
        if len(columns) <= len(c):
            M = D.T @ (D * c[:, None])
        else:
            R = np.linalg.qr(D.T, mode="r")
            M = (R * c[None]) @ R.T
            relative += 3 * _gamma_n(16 * D.size, _U) * (1 + 4 * _U)
        far2 = chunk.far[i] ** 2
        off = np.abs(w) * (self.kernel_up[i] - self.kernel_down[i]) * (1 + 4 * _U)
        error = (off + relative * np.abs(c)) @ far2
        return _verified_lowest_eigenvalue(M) - error * (1 + 8 * _U)


def _verified_lowest_eigenvalue(M) -> float:
    """A lower bound of the smallest eigenvalue of the symmetric float64 matrix `M` (`-inf` if
    none is verified).

    The estimate from `eigvalsh`, lowered a little to `mu`, is verified: if the Cholesky
    factorisation of `fl(fl(M - mu I) - t I)` succeeds with `t >= 2 gamma_{n+2} trace`, twice
    the shift Rump's theorem asks (S. M. Rump, Verification of positive definiteness, BIT 46,
    2006), then `fl(M - mu I)` is positive definite, and `M - mu I` is within `u max_j |M_jj
    - mu|` of it.
    """
    n = len(M)
    if not n:
        return 0.0
    if not np.isfinite(M).all():
        return -math.inf
    estimate = float(np.linalg.eigvalsh(M)[0])
    size = float(np.abs(M).max())
    for lower_by in (1e-9, 1e-5, 1e-2):
        mu = estimate - lower_by * size - 1e-300
        A = M.copy()
        A[np.diag_indices(n)] -= mu
        diagonal = np.diagonal(A)
        if (diagonal <= 0).any():
            continue
        shift = 2 * _gamma_n(n + 2, _U) * float(diagonal.sum()) * (1 + 4 * _U)
        shift += 8 * (n + 1 + float(diagonal.max())) * _ETA
        A[np.diag_indices(n)] -= shift
        try:
            np.linalg.cholesky(A)
        except np.linalg.LinAlgError:
            continue
        return mu - 2 * _U * float(np.abs(np.diagonal(M) - mu).max())
    return -math.inf
