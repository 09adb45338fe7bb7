"""Budget maintenance of the support vectors: what goes when a `(B + 1)`-th vector arrives.

The vector `m` with the smallest `|a_m|` is merged into a same-sign partner `n` (policy
'merge', as in budgeted SGD, Wang, Crammer and Vucetic 2012) or dropped ('remove'; also 'merge'
when no vector has the sign of `a_m`). A merge replaces `a_m k(x_m, .) + a_n k(x_n, .)` by the
single `a_z k(z, .)` closest to it in the kernel's space: for a fixed `z` the best `a_z` is the
projection `a_m k(x_m, z) + a_n k(x_n, z)`, and what is lost, the weight degradation
`||a_m k(x_m, .) + a_n k(x_n, .) - a_z k(z, .)||^2 = a_m^2 + a_n^2 + 2 a_m a_n k(x_m, x_n) -
a_z^2`, is smallest where `|a_z|` is largest. The partner with the smallest degradation wins.
Only the kernel row of `m` (and of the chosen `n`) is needed, never the full kernel matrix.

Where `z` goes:

- RBF: on the segment `z = h x_m + (1 - h) x_n` (moving off it shrinks both kernel values).
  Squared distances scale quadratically along it, `k(x_m, z) = kappa^((1-h)^2)` and
  `k(x_n, z) = kappa^(h^2)` with `kappa = k(x_m, x_n)`; `h` maximises `|a_z|`, found by a coarse
  grid and a golden-section search, vectorised over all candidates.
- Laplacian: the L1 distances of any `z` in the box spanned by `x_m` and `x_n` add up to
  `||x_m - x_n||_1`, so `|a_z|` depends on `T = ||x_m - z||_1` alone:
  `A exp(-gamma T) + B exp(-gamma (L - T))`, a convex function of `T`, largest at an end. The
  best merge point in the whole input space is therefore one of the two vectors: the larger one
  (`|a_n| >= |a_m|`) absorbs `a_m k(x_m, x_n)`, and the degradation is `a_m^2 (1 - kappa^2)`,
  smallest for the nearest same-sign vector. No interior point of the segment (nor any other
  point) does better.

`plan` decides; the store (`river_advsvm.support.SupportVectors`) applies the decision to its
vectors.

"""

from __future__ import annotations

import math
import typing

import numpy as np

__all__ = ["POLICIES", "Maintenance", "merge_points", "plan"]

POLICIES = ("merge", "remove")

# The merge search: a grid over h, then golden-section steps around its best point.
_GRID = 9
_GOLDEN_STEPS = 30


class Maintenance(typing.NamedTuple):
    """One maintenance event: vector `m` leaves; with a `partner`, it is merged into it."""

    m: int
    partner: int | None
    h: float  # z = h x_m + (1 - h) x_partner
    coefficient: float  # a_z, the partner's new coefficient
    squared_norm_change: float  # of a^T K a
    loss: float  # the weight degradation, in the units of `a`


def plan(kernel: str, policy: str, a: np.ndarray, row) -> Maintenance:
    """The maintenance event for the coefficients `a` (one per stored vector).

    `row(i)` returns `gamma * dist(x_i, x_j)` for every stored `j` (0 at `j = i`: squared L2
    distances for RBF, L1 for Laplacian). The change of `a^T K a` is exact up to rounding: the
    removed terms' cross products come from the rows of `m`, of the partner and (RBF) of `z`,
    whose squared distances to every vector are exact combinations of the first two.
    """
    m = int(np.argmin(np.abs(a)))
    a_m = a[m]
    exponents_m = row(m)
    value_m = float(np.exp(-exponents_m) @ a)
    partners = np.flatnonzero(a * a_m > 0.0)
    partners = partners[partners != m]
    if policy == "merge" and partners.size:
        A, B, D = abs(a_m), np.abs(a[partners]), exponents_m[partners]
        h, p = merge_points(kernel, A, B, D)
        loss = np.maximum(A * A + B * B + 2.0 * A * B * np.exp(-D) - p * p, 0.0)
        best = int(np.argmin(loss))
        n, h, a_z = int(partners[best]), float(h[best]), math.copysign(p[best], a_m)
        exponents_n = row(n)
        value_n = float(np.exp(-exponents_n) @ a)
        if kernel == "rbf":
            # Squared distances from a point of the segment, exactly.
            exponents_z = h * exponents_m + (1.0 - h) * exponents_n - h * (1.0 - h) * D[best]
            np.maximum(exponents_z, 0.0, out=exponents_z)
        else:
            exponents_z = exponents_m if h == 1.0 else exponents_n
        value_z = float(np.exp(-exponents_z) @ a)
        change = 2.0 * (a_z * value_z - a_m * value_m - a[n] * value_n) + float(loss[best])
        return Maintenance(m, n, h, a_z, change, float(loss[best]))
    return Maintenance(m, None, 1.0, 0.0, a_m * (a_m - 2.0 * value_m), a_m * a_m)


def merge_points(kernel: str, A: float, B: np.ndarray, D: np.ndarray):
    """For each partner: the `h` that maximises `p(h) = A k(x_m, z) + B k(x_n, z)`, and `p(h)`.

    `A = |a_m|`, `B = |a_n|`, `D = gamma dist(x_m, x_n)` (squared L2 for RBF, L1 for Laplacian),
    `z = h x_m + (1 - h) x_n`.
    """
    if kernel == "laplacian":
        at_m, at_n = A + B * np.exp(-D), A * np.exp(-D) + B
        return np.where(at_m > at_n, 1.0, 0.0), np.maximum(at_m, at_n)

    def p(h, A, B, D):
        return A * np.exp(-D * (1.0 - h) ** 2) + B * np.exp(-D * h * h)

    grid = np.linspace(0.0, 1.0, _GRID)
    P = p(grid, A, B[:, None], D[:, None])
    best = P.argmax(axis=1)
    h, value = grid[best], P[np.arange(len(B)), best]
    # The best point is within half a grid step of a grid point, and |p'| <= (A + B) sqrt(2D/e):
    # partners whose bound cannot beat the best value found so far need no refinement.
    spacing = 1.0 / (_GRID - 1)
    bound = value + (A + B) * np.sqrt(2.0 * D / math.e) * (spacing / 2)
    constant = A * A + B * B + 2.0 * A * B * np.exp(-D)
    refine = np.flatnonzero(constant - bound * bound <= (constant - value * value).min())
    if refine.size:
        Br, Dr = B[refine], D[refine]
        lo = np.maximum(h[refine] - spacing, 0.0)
        hi = np.minimum(h[refine] + spacing, 1.0)
        ratio = (math.sqrt(5.0) - 1.0) / 2.0
        c, d = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        pc, pd = p(c, A, Br, Dr), p(d, A, Br, Dr)
        for _ in range(_GOLDEN_STEPS):
            left = pc >= pd
            hi = np.where(left, d, hi)
            lo = np.where(left, lo, c)
            new = np.where(left, hi - ratio * (hi - lo), lo + ratio * (hi - lo))
            pn = p(new, A, Br, Dr)
            c, pc, d, pd = (
                np.where(left, new, d),
                np.where(left, pn, pd),
                np.where(left, c, new),
                np.where(left, pc, pn),
            )
        found = np.where(pc >= pd, c, d)
        found_value = np.maximum(pc, pd)
        better = found_value > value[refine]
        h[refine[better]] = found[better]
        value[refine[better]] = found_value[better]
    return h, value
