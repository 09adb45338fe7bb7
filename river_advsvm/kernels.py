"""Shift-invariant kernels, their random Fourier features, and the kernel-space attack radius.

A random feature is `phi_w(x) = sqrt(2) * cos(w . x + u)` with `w` drawn from the kernel's
spectral measure and `u ~ U[0, 2pi)`, so that `E[phi_w(x) phi_w(x')] = k(x, x')` (MATH.md §1).

Every number here is a pure function of `(seed, feature id, input key)`: the weight of input key
`k` in feature `i` is drawn from a counter-based generator keyed by those three values. Hence a
feature can be regenerated from its seed alone, and the weights of a key do not depend on the
order in which keys were first seen. Both properties are what let a checkpoint hold seeds and
coefficients only.

"""

from __future__ import annotations

import hashlib
import math
import numbers

import numpy as np

__all__ = [
    "KERNELS",
    "NORMS",
    "adversarial_radius",
    "feature_seeds",
    "key_hash",
    "kernel_value",
    "min_kernel_value",
    "phases",
    "spectral_weights",
]

KERNELS = ("rbf", "laplacian")
NORMS = ("l2", "linf")

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
# Independent streams drawn from the same (feature, key) counter.
_STREAM_UNIFORM_A = np.uint64(1)
_STREAM_UNIFORM_B = np.uint64(2)
_STREAM_PHASE = np.uint64(3)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective, well-mixed hash of 64-bit integers (wraps mod 2^64)."""
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def _to_unit_interval(bits: np.ndarray) -> np.ndarray:
    """Map 64 random bits to a float in the open interval (0, 1)."""
    return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def _canonical(key) -> str:
    # Python's hash() of a str changes from one process to the next, so it cannot name a column
    # in a checkpoint. Numbers are normalised so that numpy scalars hash like the Python ones
    # they compare equal to (a dict cannot hold both anyway).
    if isinstance(key, (bool, np.bool_)):
        return f"b:{bool(key)}"
    if isinstance(key, numbers.Integral):
        return f"i:{int(key)}"
    if isinstance(key, numbers.Real):
        return f"f:{float(key)!r}"
    if isinstance(key, str):
        return f"s:{key}"
    if isinstance(key, tuple):
        return "t:(" + ",".join(_canonical(k) for k in key) + ")"
    raise TypeError(
        f"feature name {key!r} of type {type(key).__name__} is not supported: "
        "use str, int, float, bool or tuples of them"
    )


def key_hash(key) -> int:
    """A 64-bit hash of a feature name that is stable across processes and platforms."""
    digest = hashlib.blake2b(_canonical(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


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
        return gamma * np.tan(np.pi * (u - 0.5))
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


def min_kernel_value(kernel: str, gamma: float, epsilon: float, norm: str, n_inputs: int) -> float:
    """`min kappa(delta)` over the threat ball `||delta|| <= epsilon` in `n_inputs` dimensions.

    Both kernels decrease with the distance they use, so the minimum sits where that distance is
    largest over the ball: for a matching norm it is `epsilon`; for an L-inf ball it is the box
    corner (`sqrt(d) eps` in L2, `d eps` in L1); an L2 ball reaches `sqrt(d) eps` in L1.

    """
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}: expected one of {NORMS}")
    d = n_inputs
    if kernel == "rbf":
        squared = epsilon**2 if norm == "l2" else d * epsilon**2
        return math.exp(-gamma * squared)
    if kernel == "laplacian":
        l1 = math.sqrt(d) * epsilon if norm == "l2" else d * epsilon
        return math.exp(-gamma * l1)
    raise ValueError(f"unknown kernel {kernel!r}: expected one of {KERNELS}")


def adversarial_radius(
    kernel: str, gamma: float, epsilon: float, norm: str, n_inputs: int
) -> float:
    """The radius `eps'` in kernel space that covers every attack of radius `epsilon` in input space.

    `||phi(x + delta) - phi(x)||_H^2 = 2 kappa(0) - 2 kappa(delta)` for a shift-invariant kernel
    with `kappa(0) = 1`, hence `eps' = sqrt(2 - 2 min kappa)` over the threat ball (MATH.md §2).

    """
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    if epsilon == 0:
        return 0.0
    return math.sqrt(max(0.0, 2.0 - 2.0 * min_kernel_value(kernel, gamma, epsilon, norm, n_inputs)))
