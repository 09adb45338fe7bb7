"""What a certificate of the support-vector model works on: the model in float64 (`Model`),
the threat ball around the points (`Ball`), the points relative to the stored vectors (`Chunk`),
and how far the store's computed `f` can be from the exact one there (`Rounding`)."""

from __future__ import annotations

import functools
import math

import numpy as np

from river_advsvm.support_store import _BLOCK, _padded

U = 2.0**-53  # unit roundoff of float64
ETA = 2.0**-1074  # the smallest positive float64
# Rows of a block of the kernel matrix in `norm_upper_bound`.
_NORM_ROWS = 128
# Steps of a bisection: enough to reach a float64's precision from any bracket.
BISECTION_STEPS = 60


def gamma_n(n: int, u: float) -> float:
    """The classic bound on the relative error of a sum of `n` products rounded at `u`."""
    return n * u / (1.0 - n * u)


def pairwise_sums(X, S, *terms):
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


def l1_distances(X, S, weights=None):
    """`sum_j w_j |X_ij - S_kj|` per row `i` of `X` and vector `k` of `S` (`w` = 1 if None)."""
    if weights is None:
        return pairwise_sums(X, S, lambda gap, rows: np.abs(gap))[0]
    return pairwise_sums(X, S, lambda gap, rows: np.abs(gap) * weights)[0]


class Model:
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
        self.norm_bound = norm_upper_bound(store)
        self.column_min = S.min(axis=0)
        self.column_max = S.max(axis=0)
        # Columns some vector is nonzero in.
        self.used = (self.column_min != 0) | (self.column_max != 0)


def norm_upper_bound(store) -> float:
    """An upper bound of `||f||`: `s^2 a^T K a` in float64 from the stored vectors, plus its
    rounding (each squared distance within `gamma_n (||s_i||^2 + ||s_j||^2)`, each kernel value
    within `gamma` times that, and the sums within `gamma_B`)."""
    size, n = store.size, store.n_inputs
    S = store._S[:size, :n].astype(np.float64)
    a = store._a[:size]
    # In units of a power of 2 near the largest |a_i| (an exact division): the products of
    # two coefficients below 1e-154 are 0 in float64, and so was the bound (radii unsound).
    unit = math.ldexp(1.0, math.frexp(float(np.abs(a).max(initial=0.0)))[1] - 1)
    a = a / unit
    squared = np.einsum("ij,ij->i", S, S)
    total = 0.0
    # K is symmetric: each block of rows against the vectors from its own first row on, the
    # pairs past the block counted twice (about half the work of the whole matrix).
    step = max(1, min(_NORM_ROWS, _BLOCK // max(1, size)))
    for start in range(0, size, step):
        rows = slice(start, start + step)
        if store.kernel == "rbf":
            E = S[rows] @ S[start:].T
            E *= -2.0
            E += squared[rows, None] + squared[None, start:]
            np.maximum(E, 0.0, out=E)
        else:
            E = l1_distances(S[rows], S[start:])
        E *= -store.gamma
        np.exp(E, out=E)
        k = E.shape[0]
        total += float(a[rows] @ (E[:, :k] @ a[rows]))
        total += 2.0 * float(a[rows] @ (E[:, k:] @ a[start + k:]))
    weight = float(np.abs(a).sum())
    if store.kernel == "rbf":
        distance_error = 2.1 * (gamma_n(n + 3, U) + 2 * U)
        kernel_error = store.gamma * distance_error * 2 * weight * float(np.abs(a) @ squared)
    else:
        kernel_error = 1.01 * gamma_n(n + 2, U) * weight * weight
    rounding = kernel_error + (5 * U + 2.02 * gamma_n(size + 2, U)) * weight * weight
    return abs(store._scale) * unit * math.sqrt(max(total + rounding, 0.0)) * (1 + 4 * U)


# -- the threat set -------------------------------------------------------------------------------


class Ball:
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
            self.room += 4 * U * (np.abs(raw) + abs(lo) + abs(hi))

    def reach(self, idx, r):
        """At points `idx`: max ||delta~||_2^2 and max ||delta~||_1 over the ball of radius `r`."""
        q = self.q
        widen = 1.0 + gamma_n(len(q) + 4, U)
        # (A reach past the float range is +inf: the ball covers everything, as it does.)
        with np.errstate(over="ignore"):
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
        for _ in range(BISECTION_STEPS):
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
        slack = 4 * U * (np.abs(raw) + r[:, None] + np.abs(lo) + np.abs(hi))
        lo, hi = (lo - slack) * q, (hi + slack) * q
        lo -= 2 * U * np.abs(lo)
        hi += 2 * U * np.abs(hi)
        center, width = (lo + hi) / 2, (hi - lo) / 2
        return center, width + 2 * U * (np.abs(lo) + np.abs(hi))


# -- the points and the store's rounding ----------------------------------------------------------


class Rounding:
    """`err(r)`: how far the store's computed `f` can be from the exact one, anywhere in the
    ball of radius `r` (fact 1 of `support_radii`).

    Rounding of the deployed arithmetic: `u_s` of the storage, `ux` of a scaled input. A squared
    distance is `||x||^2 + ||s||^2 - 2 x . s`: the product in storage precision (error
    `gamma_n sum |x_j s_j|`), the norms summed in float64, then assembled (many rows: in storage
    precision, one row: in float64); `exp` in storage precision.
    """

    def __init__(self, model: Model, q):
        store = model.store
        size, n, d = store.size, store.n_inputs, len(q)
        u_s = float(np.finfo(store.dtype).eps) / 2
        ux = u_s + 2 * U
        terms = _padded(n) + (d - n) + 2
        self.model = model
        self.u_s, self.ux = u_s, ux
        self.storage_sum = gamma_n(terms + 1, u_s)
        self.c_input = 2.1 * ux + 1.1 * gamma_n(d + 1, U) + 3.1 * u_s + 2.1 * U
        self.c_vector = 1.1 * gamma_n(d + 1, U) + 3.1 * u_s + 2.1 * U
        self.c_product = 2.1 * gamma_n(terms, u_s) + 2.1 * ux + 4.2 * u_s + 4.2 * U
        self.sum_error = (gamma_n(size + 2, U) + 2 * U) * 1.01 * model.abs_a
        self.q_dot_abs = np.abs(model.S) @ q

    def __call__(self, chunk: Chunk, r, idx):
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


class Chunk:
    """Points to certify, with their margins, and where they are relative to the vectors:
    `near` and `far` bound each exact distance (L2 for RBF, L1 for Laplacian) from below and
    above, rounding of this float64 computation included."""

    def __init__(self, model: Model, ball: Ball, rounding: Rounding, x, margins):
        self.model, self.ball, self.x = model, ball, x
        x_squared = np.einsum("ij,ij->i", x, x)
        self.x_squared = x_squared
        if model.rbf:
            distances = x_squared[:, None] + model.squared[None] - 2.0 * (x @ model.S.T)
            np.maximum(distances, 0.0, out=distances)
            self.distances = distances
            exact_error = relative_distance_error(len(ball.q))
            slack = exact_error * (x_squared[:, None] + model.squared[None])
            self.near = np.sqrt(np.maximum(distances - slack, 0.0))
            self.far = np.sqrt(distances + slack) * (1 + 2 * U)
            self.near *= 1 - 2 * U
            self.products = np.abs(x) @ np.abs(model.S).T
            self.x_length = np.sqrt(x_squared)
        else:
            l1 = l1_distances(x, model.S)
            self.x_l1 = np.abs(x).sum(axis=1)
            slack = 1.01 * gamma_n(x.shape[1] + 2, U) * l1 + 2 * U * self.x_l1[:, None]
            self.near = np.maximum(l1 - slack, 0.0)
            self.far = l1 + slack
        self.rounding = rounding
        self.error_at_x = rounding(self, np.zeros(len(x)), np.arange(len(x)))
        self.margins = margins * (1 - 4 * U)

    def err(self, r, idx):
        return self.rounding(self, r, idx)

    @functools.cached_property
    def signs(self):
        """The sign of the computed `g` at each point (the label it is certified for)."""
        store, x = self.model.store, self.x
        n = store.n_inputs
        return np.sign(store.values(x[:, :n], x[:, n:]) + self.model.bias)


def relative_distance_error(d: int) -> float:
    """Relative error of a float64 squared distance `||x||^2 + ||s||^2 - 2 x . s` over `d`
    columns, in units of `||x||^2 + ||s||^2`."""
    return 2.1 * (gamma_n(d + 3, U) + 3 * U)

