"""Shift-invariant kernels, their random Fourier features, and the kernel-space attack radius.

A random feature is `phi_w(x) = sqrt(2) * cos(w . x + u)` with `w` drawn from the kernel's
spectral measure and `u ~ U[0, 2pi)`, so that `E[phi_w(x) phi_w(x')] = k(x, x')` .

Every number here is a pure function of `(seed, feature id, input key)`: the weight of input key
`k` in feature `i` is drawn from a counter-based generator keyed by those three values. Hence a
feature can be regenerated from its seed alone, and the weights of a key do not depend on the
order in which keys were first seen. Both properties are what let a checkpoint hold seeds and
coefficients only.

"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "KERNELS",
    "NORMS",
    "ROUNDING_LIMIT",
    "adversarial_radius",
    "check_norm",
    "feature_seeds",
    "kernel_value",
    "l2_lengths",
    "largest_distance",
    "min_kernel_value",
    "phases",
    "spectral_weights",
]

KERNELS = ("rbf", "laplacian")
NORMS = ("l2", "linf")


def check_norm(norm) -> None:
    """`ValueError` unless `norm` names a threat norm."""
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


#: Largest accepted kernel bandwidth: with inputs bounded by `inputs.MAX_ABS_VALUE` and at most
#: 10^6 of them, a random-feature projection stays below 1e37, finite in float32.
MAX_GAMMA = 1e10
#: Bound on the standard Cauchy samples behind the Laplacian kernel's features.
CAUCHY_CAP = 1e6
#: The rounding past which a kernel model warns that its inputs lose their differences: of a
#: kernel exponent (support vectors: gamma ||x||^2 times the dtype's eps) or of a random
#: feature's phase, in radians. Kernel values are off by about that much (1%).
ROUNDING_LIMIT = 0.01
# `l2_lengths` measures float64 rows shorter than this scaled: their squares would be subnormal
# or 0.
_SHORTEST_PLAIN_LENGTH = 1e-150

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
# Independent streams drawn from the same (feature, key) counter.
_STREAM_UNIFORM_A = np.uint64(1)
_STREAM_UNIFORM_B = np.uint64(2)
_STREAM_PHASE = np.uint64(3)


def l2_lengths(rows: np.ndarray) -> np.ndarray:
    """`||row||_2` of each row of a 2-d array, finite for every finite row and nonzero for every
    nonzero one: a row past about 1e154 squares to inf (a radius of 1e200 made every attacker's
    step look infinitely long and cut it to nothing), one below about 1e-154 to 0 or to a few
    digits (the gradient of a model learned with a step of 1e-200 had no length: certified
    radii were infinite), so such rows are measured scaled by their largest entry."""
    lengths = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    odd = np.isinf(lengths) | (lengths < _SHORTEST_PLAIN_LENGTH)
    if odd.any():
        odd &= np.isfinite(rows).all(axis=1) & (rows != 0).any(axis=1)
    if odd.any():
        scaled = rows[odd]
        scale = np.abs(scaled).max(axis=1, keepdims=True)
        scaled = scaled / scale
        lengths[odd] = scale[:, 0] * np.sqrt(np.einsum("ij,ij->i", scaled, scaled))
    return lengths


def l2_length(vector: np.ndarray) -> float:
    """`||vector||_2` as `sqrt(v . v)`, or as `l2_lengths` measures it where that square is
    past float64's range or below its normal numbers."""
    length = math.sqrt(float(vector @ vector))
    if _SHORTEST_PLAIN_LENGTH <= length < math.inf or not vector.any():
        return length
    return float(l2_lengths(vector[None])[0])


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective, well-mixed hash of 64-bit integers (wraps mod 2^64)."""
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def _to_unit_interval(bits: np.ndarray) -> np.ndarray:
    """Map 64 random bits to a float in the open interval (0, 1)."""
    return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def feature_seeds(seed: int, feature_ids: np.ndarray) -> np.ndarray:
    """The seed of each random feature: a function of the model's seed and the feature's id."""
    ids = np.asarray(feature_ids, dtype=np.uint64)
    return _splitmix64(_splitmix64(np.full(ids.shape, seed % 2**64, dtype=np.uint64)) + ids)


def _uniform(seeds: np.ndarray, hashes: np.ndarray, stream: np.uint64) -> np.ndarray:
    """Uniforms in (0, 1), shape (len(hashes), len(seeds)): one per (input key, feature)."""
    keyed = _splitmix64(np.asarray(hashes, dtype=np.uint64) + stream)
    return _to_unit_interval(_splitmix64(keyed[:, None] ^ seeds[None, :]))


def spectral_weights(
    kernel: str, gamma: float, seeds: np.ndarray, hashes: np.ndarray
) -> np.ndarray:
    """Spectral samples `w[k, i]` for input keys `hashes` (rows) and features `seeds` (columns).

    RBF `exp(-gamma ||d||_2^2)`: each `w ~ N(0, 2 gamma)`.
    Laplacian `exp(-gamma ||d||_1)`: each `w ~ Cauchy(0, gamma)`.

    """
    seeds = np.asarray(seeds, dtype=np.uint64)
    u = _uniform(seeds, hashes, _STREAM_UNIFORM_A)
    if kernel == "rbf":
        v = _uniform(seeds, hashes, _STREAM_UNIFORM_B)
        # Box-Muller: one standard normal from two independent uniforms.
        return math.sqrt(2.0 * gamma) * np.sqrt(-2.0 * np.log(u)) * np.cos(2.0 * np.pi * v)
    if kernel == "laplacian":
        # Capped at CAUCHY_CAP (probability 6e-7 per weight): keeps every projection finite
        # for the inputs `inputs` accepts, at no measurable cost to the kernel approximation.
        cauchy = np.clip(np.tan(np.pi * (u - 0.5)), -CAUCHY_CAP, CAUCHY_CAP)
        return gamma * cauchy
    raise ValueError(f"unknown kernel {kernel!r}: expected one of {KERNELS}")


def phases(seeds: np.ndarray) -> np.ndarray:
    """The phase `u ~ U[0, 2pi)` of each feature."""
    seeds = np.asarray(seeds, dtype=np.uint64)
    return 2.0 * np.pi * _uniform(seeds, np.zeros(1, dtype=np.uint64), _STREAM_PHASE)[0]


def kernel_value(kernel: str, gamma: float, delta: np.ndarray) -> np.ndarray:
    """`k(x, x + delta) = kappa(delta)` for each row of `delta`."""
    delta = np.atleast_2d(delta)
    if kernel == "rbf":
        return np.exp(-gamma * np.sum(delta**2, axis=1))
    if kernel == "laplacian":
        return np.exp(-gamma * np.sum(np.abs(delta), axis=1))
    raise ValueError(f"unknown kernel {kernel!r}: expected one of {KERNELS}")


def _scale_sums(scales) -> tuple[float, float, float]:
    """`(max q^2, sum q^2, sum q)` of the per-input scales (an int d means d ones)."""
    if isinstance(scales, (int, np.integer)):
        return (1.0 if scales else 0.0), float(scales), float(scales)
    q = np.asarray(scales, dtype=np.float64)
    if not q.size:
        return 0.0, 0.0, 0.0
    return float(np.max(q * q)), float(q @ q), float(q.sum())


def largest_distance(kernel: str, epsilon: float, norm: str, scales) -> float:
    """The largest distance the kernel sees between `x` and `x + delta`, `||delta|| <= epsilon`.

    The kernel is applied to `x * q` (`scales` q, one per input; an int d means d ones), and the
    distance is the one it uses: squared L2 for RBF, L1 for Laplacian. Both are largest at
    the edge of the ball: for an L2 ball along the input with the largest `q`
    (`eps^2 max q^2`, or `eps ||q||_2` in L1 by Cauchy-Schwarz); for an L-inf ball at a
    corner (`eps^2 sum q^2`, `eps sum q`).
    """
    check_norm(norm)
    max_sq, sum_sq, total = _scale_sums(scales)
    if kernel == "rbf":
        # (A product, not epsilon**2, which raises OverflowError past 1e154 where this is inf.)
        return epsilon * (epsilon * (max_sq if norm == "l2" else sum_sq))
    if kernel == "laplacian":
        return epsilon * (math.sqrt(sum_sq) if norm == "l2" else total)
    raise ValueError(f"unknown kernel {kernel!r}: expected one of {KERNELS}")


def min_kernel_value(kernel: str, gamma: float, epsilon: float, norm: str, scales) -> float:
    """`min kappa(delta)` over the threat ball `||delta|| <= epsilon` (see `largest_distance`)."""
    return math.exp(-gamma * largest_distance(kernel, epsilon, norm, scales))


def adversarial_radius(kernel: str, gamma: float, epsilon: float, norm: str, scales) -> float:
    """The radius `eps'` in kernel space that covers every attack of radius `epsilon` in input
    space.

    `||phi(x + delta) - phi(x)||_H^2 = 2 kappa(0) - 2 kappa(delta)` for a shift-invariant kernel
    with `kappa(0) = 1`, hence `eps' = sqrt(2 - 2 min kappa)` over the threat ball. `scales` are
    the per-input scales (an int d: d inputs of scale 1).

    """
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    if epsilon == 0:
        return 0.0
    return math.sqrt(max(0.0, 2.0 - 2.0 * min_kernel_value(kernel, gamma, epsilon, norm, scales)))
