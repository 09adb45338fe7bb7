"""The search for the largest radius at which a bound holds: only radii at which the bound was
checked are returned, so rounding in the search cannot make a certificate unsound."""

from __future__ import annotations

import math

import numpy as np

from river_advsvm.support_certificate.points import BISECTION_STEPS, Ball

# Bisection stops when the bracket is this tight, relative to its upper end.
_RADIUS_PRECISION = 1e-6


def largest(slack, ball: Ball, idx, upper, start, at_start):
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
    for _ in range(BISECTION_STEPS):
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


def beyond(slack, ball: Ball, idx, radii):
    """Per point, the largest radius above `radii` at which `slack > 0` (else 0)."""
    out = np.zeros(len(idx))
    candidates = np.flatnonzero(np.isfinite(radii) & (radii > 0))
    if candidates.size:
        at_start = slack(radii[candidates], idx[candidates])
        holds = at_start > 0
        candidates, at_start = candidates[holds], at_start[holds]
    if candidates.size:
        upper = np.full(len(candidates), math.inf)
        out[candidates] = largest(slack, ball, idx[candidates], upper, radii[candidates],
                                   at_start)
    return out
