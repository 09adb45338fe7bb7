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
  `k(x_n, z) = kappa^(h^2)` with `kappa = k(x_m, x_n)`; `h` maximises `|a_z|`, the one zero of
  the derivative in the half of the segment nearer the larger vector, found by Newton's method
  (`merge_points`), for every partner at once; past `EXHAUSTIVE_PARTNERS` partners only the
  ones that can win are solved: those whose lower bound on the degradation, a function of
  its distance alone, is below an upper bound on the winner's (`best_merge`). The result is
  the exhaustive search's.
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

import bisect
import functools
import math
import typing

import numpy as np

__all__ = ["EXHAUSTIVE_PARTNERS", "POLICIES", "Maintenance", "best_merge", "merge_points", "plan"]

POLICIES = ("merge", "remove")

# The merge point: Newton steps on the logit of h, until they move it by less than this (the
# error left is then of the order of its square, and p is at its maximum to rounding).
_NEWTON_TOLERANCE = 1e-7
_NEWTON_STEPS = 100
# Up to this many partners, every one is solved in one vectorised pass (a pass costs mostly
# its fixed overhead, about 60 numpy calls); beyond, only those whose bound says they can win
# (see best_merge).
EXHAUSTIVE_PARTNERS = 16
# The grid of `_equal_losses` (its last point: where L is 1 to double precision), and the
# room left for rounding when a partner is judged by it (in units of A^2).
_GRID_STEP, _GRID_END = 1.0 / 64.0, 24.0
_BOUND_SLACK = 1e-9
# Up to this many partners left to solve, they are solved one by one in Python floats.
_ONE_BY_ONE = 4
#: The smallest coefficient ratio A / B the merge search works with (see merge_points).
_SMALLEST_RATIO = 1e-300
#: The largest exponent the merge search works with: a float32 matrix of exponents holds +inf
#: past its range (a kernel value of 0), where Newton's step would be inf * 0. Any exponent
#: past about 745 gives a kernel value of 0 to double precision, so the merge point is the
#: same (at the larger vector, exactly).
_LARGEST_EXPONENT = 1e300


class Maintenance(typing.NamedTuple):
    """One maintenance event: vector `m` leaves; with a `partner`, it is merged into it."""

    m: int
    partner: int | None
    h: float  # z = h x_m + (1 - h) x_partner
    coefficient: float  # a_z, the partner's new coefficient
    squared_norm_change: float  # of a^T K a
    loss: float  # the weight degradation, in the units of `a`
    partner_exponents: np.ndarray | None = None  # gamma dist(z, x_j) for every stored j


def plan(kernel: str, policy: str, a: np.ndarray, row) -> Maintenance:
    """The maintenance event for the coefficients `a` (one per stored vector).

    `row(i, out)` writes `gamma * dist(x_i, x_j)` for every stored `j` into `out` (0 at
    `j = i`: squared L2 distances for RBF, L1 for Laplacian). The change of `a^T K a` is exact
    up to rounding: the removed terms' cross products come from the rows of `m`, of the partner
    and (RBF) of `z`, whose squared distances to every vector are exact combinations of the
    first two. The three rows share one buffer, so that their kernel sums are one product.
    """
    m = int(np.abs(a).argmin())
    a_m = float(a[m])
    if a_m * a_m == 0.0:  # nothing to carry over (to double precision): a removal is exact
        return Maintenance(m, None, 1.0, 0.0, 0.0, 0.0)
    rows = np.empty((3, len(a)))  # the exponents of m, of its partner and of z
    exponents_m = rows[0]
    row(m, exponents_m)
    same_sign = a > 0.0 if a_m > 0.0 else a < 0.0
    same_sign[m] = False
    partners = same_sign.nonzero()[0] if policy == "merge" else ()
    if not len(partners):
        value_m = float(np.exp(-exponents_m) @ a)
        return Maintenance(m, None, 1.0, 0.0, a_m * (a_m - 2.0 * value_m), a_m * a_m)
    D = exponents_m[partners]
    best, h, p, loss = best_merge(kernel, abs(a_m), np.abs(a[partners]), D)
    n, a_z = int(partners[best]), math.copysign(p, a_m)
    exponents_n, exponents_z = rows[1], rows[2]
    row(n, exponents_n)
    if kernel == "rbf" and 0.0 < h < 1.0:
        # Squared distances from a point of the segment, exactly. (Inside the segment, an
        # infinite exponent of m or n stays infinite: the other end is as far, or D is.)
        np.multiply(exponents_m, h, out=exponents_z)
        exponents_z += (1.0 - h) * exponents_n
        exponents_z -= h * (1.0 - h) * float(D[best])
        np.maximum(exponents_z, 0.0, out=exponents_z)
    else:  # z is one of the two vectors (the same bits as the sum: no 0 * inf there)
        exponents_z[:] = exponents_m if h == 1.0 else exponents_n
    kernels = np.negative(rows)
    value_m, value_n, value_z = (np.exp(kernels, out=kernels) @ a).tolist()
    change = 2.0 * (a_z * value_z - a_m * value_m - float(a[n]) * value_n) + loss
    return Maintenance(m, n, h, a_z, change, loss, exponents_z)


def best_merge(kernel: str, A: float, B: np.ndarray, D: np.ndarray):
    """The partner whose merge loses least: `(its index, h, p(h), the weight degradation)`.

    `A = |a_m|` is the smallest magnitude of all (`B >= A`, the partners'; otherwise every
    partner is solved), and `D` as in `merge_points`. The degradation of a partner is
    `A^2 + B^2 + 2 A B exp(-D) - p^2` at its best `h`.

    RBF: with more than `EXHAUSTIVE_PARTNERS` partners, only partners that can win are
    searched. A partner's degradation is at least `A^2 L(D)`, with `L(D)` the degradation of
    merging two equal coefficients 1 at distance `D` (`2 (1 - exp(-D/2))^2` when `D <= 2`,
    where the best point is the midpoint):

    - It grows with `B` (`B = r A`, `r >= 1`): `p*(r) = max_h p(h)` is a maximum of functions
      linear in `r`, so its derivative is `exp(-D h*^2)` (almost everywhere), and the
      derivative of the degradation is `2 A^2 (r (1 - e2^2) - (e1 e2 - kappa))` with
      `e1 = exp(-D (1 - h*)^2)`, `e2 = exp(-D h*^2)`. With `p'(h*) = 0`, `r = (1 - h*) e1 /
      (h* e2)`, and with `a = 2 D h*^2`, `b = 2 D h* (1 - h*)` (so `b / a = (1 - h*) / h*`),
      that is nonnegative iff `(b / a) (1 - e^-a) >= e^-a (1 - e^-b)`: true, as
      `(1 - e^-a) / a >= e^-a` and `b >= 1 - e^-b`.
    - For `A = B` it grows with `D`: at the best point `e1 = h t`, `e2 = (1 - h) t` with
      `t = p*`, and its derivative in `D` is `-2 kappa + 2 t^2 h (1 - h) = 2 e1 e2 - 2 kappa
      >= 0`, as `e1 e2 = kappa exp(2 D h (1 - h))`.

    `L` is tabulated once (`_equal_losses`); as it grows with `D`, the table's value at the
    grid point below a partner's `D` bounds that partner's degradation from below. The
    nearest partner is solved first: its degradation bounds the winner's from above. Only
    partners whose lower bound is below it are solved (on a stream whose distances
    concentrate, as in many dimensions, a handful), the rest cannot win. Ties go to the first
    partner, as `np.argmin` would.

    """
    if kernel == "laplacian" or len(D) <= EXHAUSTIVE_PARTNERS or B.min() < A:
        h, p, loss = _merges(kernel, A, B, D)
        best = int(loss.argmin())
        return best, float(h[best]), float(p[best]), float(loss[best])
    # The nearest partner's degradation bounds the winner's.
    A, nearest = float(A), int(D.argmin())
    solved = {nearest: _merge_point(A, float(B[nearest]), float(D[nearest]))}
    # The first grid point from which L exceeds it (with room for rounding): no partner from
    # there on can win.
    grid, losses = _equal_losses()
    bound = solved[nearest][2] / (A * A) + _BOUND_SLACK
    reach = bisect.bisect_right(losses, bound)
    chosen = (D < grid[reach]).nonzero()[0] if reach < len(grid) else np.arange(len(D))
    if len(chosen) <= _ONE_BY_ONE:
        # A handful of partners (the usual case): each in Python floats, as a vectorised solve
        # costs about 90 numpy calls of a microsecond each whatever its length.
        for j in chosen.tolist():
            if j not in solved:
                solved[j] = _merge_point(A, float(B[j]), float(D[j]))
        best = min(sorted(solved), key=lambda j: solved[j][2])  # the first of equals
        return (best, *solved[best])
    h, p, loss = _merges(kernel, A, B[chosen], D[chosen])
    best = int(loss.argmin())
    return int(chosen[best]), float(h[best]), float(p[best]), float(loss[best])


def _merge_point(A: float, B: float, D: float) -> tuple[float, float, float]:
    """`_merges` for one RBF partner, in Python floats: the same Newton iteration as
    `merge_points` (see there), stopped when its own step is small enough."""
    swap = B < A
    ratio = max(min(A, B) / max(A, B), _SMALLEST_RATIO)
    log_ratio = math.log(ratio)
    D = min(D, _LARGEST_EXPONENT)
    c = log_ratio - D
    u = max(c, log_ratio / (1.0 - 0.5 * D)) if D < 2.0 else c
    D2 = D + D
    for _ in range(_NEWTON_STEPS):
        s = _sigmoid(u)
        t = D2 * s
        step = (u - c - t) / (1.0 - t * (1.0 - s))
        u -= step
        if abs(step) <= _NEWTON_TOLERANCE:
            break
    h = _sigmoid(u)
    if swap:
        h = 1.0 - h
    p = A * math.exp(-D * (1.0 - h) ** 2) + B * math.exp(-D * h * h)
    return h, p, max(A * A + B * B + 2.0 * A * B * math.exp(-D) - p * p, 0.0)


def _sigmoid(u: float) -> float:
    """`1 / (1 + exp(-u))`, 0 where `exp(-u)` overflows (as numpy's inf gives)."""
    return 0.0 if u < -700.0 else 1.0 / (1.0 + math.exp(-u))


@functools.cache
def _equal_losses() -> tuple[list[float], list[float]]:
    """`(D, L(D))` on a grid: the degradation of merging two equal coefficients 1 at distance
    `D`, made nonincreasing from the right (so that it never exceeds the value at any larger
    `D` of the grid, whatever the rounding of the Newton solve). Python lists: one partner's
    look-up is a `bisect`, cheaper than a numpy call."""
    grid = np.arange(0.0, _GRID_END, _GRID_STEP)
    _, p = merge_points("rbf", 1.0, np.ones(len(grid)), grid)
    losses = 2.0 + 2.0 * np.exp(-grid) - p * p
    return grid.tolist(), np.minimum.accumulate(losses[::-1])[::-1].tolist()


def _merges(kernel, A, B, D):
    """`merge_points` and the weight degradation of each merge."""
    h, p = merge_points(kernel, A, B, D)
    return h, p, np.maximum(A * A + B * B + 2.0 * A * B * np.exp(-D) - p * p, 0.0)


def merge_points(kernel: str, A: float, B: np.ndarray, D: np.ndarray):
    """For each partner: the `h` that maximises `p(h) = A k(x_m, z) + B k(x_n, z)`, and `p(h)`.

    `A = |a_m|`, `B = |a_n|`, `D = gamma dist(x_m, x_n)` (squared L2 for RBF, L1 for Laplacian),
    `z = h x_m + (1 - h) x_n`, for positive `A` and `B`.

    RBF: `p(h) = A exp(-D (1 - h)^2) + B exp(-D h^2)`. Say `A <= B` (otherwise swap the roles
    and measure `h` from the other end). Then `p(h) >= p(1 - h)` for `h <= 1/2`, as
    `p(h) - p(1 - h) = (B - A) (exp(-D h^2) - exp(-D (1 - h)^2))`, so a maximum lies in
    `[0, 1/2]`; `p'(0) > 0`, so it is a zero of `p'` there. In the logit `u = log(h / (1 - h))`,
    `p'(h) = 0` reads `F(u) = u - c - 2 D sigma(u) = 0` with `c = log(A / B) - D` and `sigma`
    the logistic function. On `u <= 0` (`h <= 1/2`), `F` is concave (`F'' = -2 D sigma
    (1 - sigma) (1 - 2 sigma)`). `F` has exactly one zero `u*` below 0, or `u* = 0` (where
    `A = B`, `D <= 2`): `F(u) = 0` means `A/B = r(h) = h / (1 - h) exp(D (1 - 2h))`, and
    `log r` increases up to `h (1 - h) = 1 / (2D)` (or up to 1/2), then decreases to
    `r(1/2) = 1 >= A/B`; `F' > 0` on `(-inf, u*)` for the same reason. Newton's method on a
    concave increasing function started left of its zero never overshoots: the iterates
    increase to `u*`, quadratically (linearly only at the double zero `A = B`, `D = 2`, where
    `p` is flat). So `h = sigma(u*)` is the maximiser, to rounding, for every partner at once.
    Two starting points are left of `u*`: `c`, as `F(c) = -2 D sigma(c) < 0`, and, for
    `D < 2`, `log(A / B) / (1 - D / 2)`, where `F <= 0` because `sigma(u) >= 1/2 + u/4` on
    `u <= 0` (`sigma` is convex there); the larger one is used.

    Laplacian: one of the two vectors (see the module's notes).
    """
    if kernel == "laplacian":
        at_m, at_n = A + B * np.exp(-D), A * np.exp(-D) + B
        return np.where(at_m > at_n, 1.0, 0.0), np.maximum(at_m, at_n)
    A, B = float(A), np.asarray(B, dtype=np.float64)
    D = np.minimum(D, _LARGEST_EXPONENT, dtype=np.float64)
    swap = B < A
    ratio = np.minimum(A, B) / np.maximum(A, B) if swap.any() else A / B
    # A ratio that underflows to 0 would make log(ratio) = -inf and Newton's step inf - inf:
    # below this floor the merge point is at the partner to double precision anyway.
    ratio = np.maximum(ratio, _SMALLEST_RATIO)
    # exp(-u) = inf for far partners gives sigma(u) = 0, exactly; D = 2 divides by 0 in the
    # branch not taken.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        log_ratio = np.log(ratio)
        c = log_ratio - D
        u = np.maximum(c, np.where(D < 2.0, log_ratio / (1.0 - 0.5 * D), c))
        D2 = D + D
        for _ in range(_NEWTON_STEPS):
            s = 1.0 / (1.0 + np.exp(-u))
            t = D2 * s
            step = (u - c - t) / (1.0 - t * (1.0 - s))
            u -= step
            if np.abs(step).max() <= _NEWTON_TOLERANCE:
                break
        h = 1.0 / (1.0 + np.exp(-u))
    if swap.any():
        h = np.where(swap, 1.0 - h, h)
    return h, A * np.exp(-D * (1.0 - h) ** 2) + B * np.exp(-D * h * h)
