"""The four bounds of `support_radii`, each proved where it is computed: `slack(r, idx)` is
how much room a bound leaves at radius `r` for the points `idx` (positive: certified)."""

from __future__ import annotations

import math

import numpy as np

from river_advsvm.kernels import l2_lengths
from river_advsvm.support_certificate.points import (
    ETA, U, Chunk, gamma_n, l1_distances, pairwise_sums, relative_distance_error,
)
from river_advsvm.support_certificate.search import largest

# The second-order remainder's eigenvalue problem, at most columns x vectors x min(columns,
# vectors) (about 0.1 s a point at 784 x 1024 x 784 on one core): beyond it, the exponential
# remainder alone.
_SECOND_ORDER_WORK = 2**30
# Bounds evaluated in float64 from non-negative terms are inflated by this factor: far more
# than their rounding (a relative `gamma_n` for n terms), so the checks stay sound.
_BOUND_SLACK = 1 + 1e-9


class NormBound:
    """The kernel-norm bound (fact 2 of `support_radii`): `|f(x') - f(x)| <= ||f||
    sqrt(2 - 2 kappa)`, with `kappa` the kernel at the ball's largest reach."""

    def __init__(self, chunk: Chunk):
        self.chunk = chunk

    def bound(self, r, idx):
        model = self.chunk.model
        reach2, reach1 = self.chunk.ball.reach(idx, r)
        reach = reach2 if model.rbf else reach1
        return model.norm_bound * np.sqrt(2.0 * -np.expm1(-model.gamma * reach)) * (1 + 8 * U)

    def slack(self, r, idx):
        chunk = self.chunk
        bound = self.bound(r, idx) + chunk.error_at_x[idx] + chunk.err(r, idx)
        return chunk.margins[idx] - bound

    def radii(self, idx):
        """Largest radius at which the kernel-norm bound holds, per point (inf if every one)."""
        chunk, model = self.chunk, self.chunk.model
        room = chunk.margins[idx] - 2 * chunk.error_at_x[idx]
        # Beyond this radius the bound fails even without the rounding's growth with r.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # (inf: every radius)
            ratio = room / (model.norm_bound * (1 + 8 * U))
            target = np.where(ratio**2 < 2, -np.log1p(-0.5 * ratio**2) / model.gamma, math.inf)
        upper = chunk.ball.radius_for_reach(idx, target)
        return largest(self.slack, chunk.ball, idx, upper, np.zeros(len(idx)), room)


class IntervalBound:
    """The per-vector interval bound (fact 3 of `support_radii`)."""

    def __init__(self, chunk: Chunk):
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
        smallest = np.exp(-model.gamma * far) * (1 - 5 * U)
        largest = np.minimum(np.exp(-model.gamma * near) * (1 + 5 * U), 1.0)
        lower = np.where(w > 0, w * smallest, w * largest).sum(axis=1)
        total = np.abs(w).sum(axis=1)
        lower -= gamma_n(len(model.a) + 2, U) * total
        base = signs * model.bias
        value = base + lower - 2 * U * (np.abs(base) + total) - chunk.err(r, idx)
        if exact:
            value[~screened] = -math.inf
        return value

    def _coordinate_ranges(self, r, x):
        """Exact smallest and largest squared distance to each vector over the box."""
        S = self.chunk.model.S
        center, width = self.chunk.ball.box(r, x)
        near, far = pairwise_sums(
            center, S,
            lambda gap, rows: np.square(np.maximum(np.abs(gap) - width[rows, None, :], 0.0)),
            lambda gap, rows: np.square(np.abs(gap) + width[rows, None, :]),
        )
        widen = gamma_n(x.shape[1] + 5, U)
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
        with np.errstate(over="ignore"):
            ratio = np.divide(width, reach, out=np.zeros_like(width), where=reach > 0)
        # A ratio past the float range (a reach of almost 0) has its terms, at most w_j R_j,
        # left out: the quadratic sum stays a lower bound.
        ratio[~np.isfinite(ratio)] = 0.0
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


class TaylorBound:
    """The first-order bound with a curvature remainder, RBF (fact 4 of `support_radii`).

    Built with the gradient of `f` at each point, and how far rounding can have moved it.
    """

    def __init__(self, chunk: Chunk):
        self.chunk = chunk
        model, x = chunk.model, chunk.x
        gamma, S = model.gamma, model.S
        k = np.exp(-gamma * chunk.distances)
        W = k * (model.s * model.a)
        self.gradient = -2.0 * gamma * (W.sum(axis=1)[:, None] * x - W @ S)
        exact_error = relative_distance_error(x.shape[1])
        exact_error *= chunk.x_squared[:, None] + model.squared[None]
        off = np.exp(-gamma * chunk.near**2) * -np.expm1(-gamma * exact_error) + 5 * U
        sums = gamma_n(len(model.a) + x.shape[1] + 4, U)
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
            first = r * l2_lengths(G * ball.q)
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


class ExponentialBound:
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
    verified by a Cholesky factorisation (`verified_lowest_eigenvalue`). Where that is more
    than `_SECOND_ORDER_WORK` (CIFAR's 3,072 inputs with 1,024 vectors: seconds a point), the
    exponential remainder is used alone.
    """

    def __init__(self, chunk: Chunk, taylor: TaylorBound):
        self.chunk, self.taylor = chunk, taylor
        model, ball, x = chunk.model, chunk.ball, chunk.x
        self.spread = None
        if ball.norm == "linf":
            # Per point and vector, the largest |(x - s_i) . delta| in the ball of radius 1
            # (the box ignored, which only widens it): sum_j q_j |x_j - s_ij|, rounded up.
            spread = l1_distances(x, model.S, ball.q)
            self.spread = spread * (1 + gamma_n(x.shape[1] + 4, U)) * _BOUND_SLACK
        # The smallest and largest kernel value each vector can have at the point itself.
        self.kernel_up = np.minimum(np.exp(-model.gamma * chunk.near**2) * (1 + 5 * U), 1.0)
        self.kernel_down = np.exp(-model.gamma * chunk.far**2) * (1 - 5 * U)
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
            A = 2 * gamma * spread * (1 + 4 * U)
            weight = np.abs(v) * self.kernel_up[idx]
            remainder = np.full(len(idx), math.inf)
            if "exponential" in remainders:
                # e^A - 1 - A, rounded up: expm1 is within a few ulps, taken off before the
                # cancellation.
                excess = np.maximum((np.expm1(A) * (1 + 8 * U) - A) * (1 + 2 * U), 0.0)
                remainder = np.where(v < 0, weight * excess, 0.0).sum(axis=1)
            if "second order" in remainders and self.second_order:
                cubic = A**3 / 6 + np.where(v < 0, A**4 * np.exp(A) / 24, 0.0)
                second = (weight * cubic).sum(axis=1) * (1 + 16 * U)
                # Only where it can be the smaller: the quadratic term is never negative.
                maybe = np.flatnonzero(second < remainder)
                if maybe.size:
                    lowest = self._lowest(idx[maybe])
                    second[maybe] += (2 * gamma**2 * np.maximum(-lowest, 0.0) * reach2[maybe]
                                      * (1 + 8 * U))
                remainder = np.fmin(remainder, second)
            remainder *= _BOUND_SLACK
            low = margins - error - base - first - remainder
            low -= 4 * U * (np.abs(margins) + error + np.abs(base) + first + remainder)
            shrink = np.exp(-gamma * reach2 * (1 + 2 * U)) * (1 - 4 * U)
            low = np.where(low > 0, shrink * low * (1 - 2 * U), low)
            value = base + low - 2 * U * (np.abs(base) + np.abs(low)) - chunk.err(r, idx)
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
        relative = gamma_n(len(c) + 4, U) + 4 * U
        if len(columns) <= len(c):
            M = D.T @ (D * c[:, None])
        else:
            R = np.linalg.qr(D.T, mode="r")
            M = (R * c[None]) @ R.T
            relative += 3 * gamma_n(16 * D.size, U) * (1 + 4 * U)
        far2 = chunk.far[i] ** 2
        off = np.abs(w) * (self.kernel_up[i] - self.kernel_down[i]) * (1 + 4 * U)
        error = (off + relative * np.abs(c)) @ far2
        return verified_lowest_eigenvalue(M) - error * (1 + 8 * U)


def verified_lowest_eigenvalue(M) -> float:
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
        shift = 2 * gamma_n(n + 2, U) * float(diagonal.sum()) * (1 + 4 * U)
        shift += 8 * (n + 1 + float(diagonal.max())) * ETA
        A[np.diag_indices(n)] -= shift
        try:
            np.linalg.cholesky(A)
        except np.linalg.LinAlgError:
            continue
        return mu - 2 * U * float(np.abs(np.diagonal(M) - mu).max())
    return -math.inf
