"""A saved support-vector store (`SupportVectors.state()`), checked before any of it is loaded.

A checkpoint, a file or a peer's snapshot is input: `checked_state` accepts a store's state
only if its parameters are the loading store's own, its arrays have the types and shapes that
store keeps, its vectors are small enough for their kernel values to be computed, its
coefficients are finite and bounded, and its squared norm (and its matrix of kernel exponents,
when it has one) matches what the vectors give, within their rounding. The parameters and
shapes are checked first, so that what the checks allocate is bounded by the loading store's
own budget and inputs; nothing of the store changes before every check passed.

"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm import inputs
from river_advsvm.support_store import (SCALE_RANGE, _quadratic_form, _squared_norms,
                                        exponent_rounding)

__all__ = ["checked_state", "max_saved_size", "vector_sizes"]

# Restoring a store re-checks its norm against a^T K a up to this many vectors.
_CHECKED_NORM_SIZE = 4096
# ... within its relative tolerance, or this much (the smallest normal float64).
_SUBNORMAL_SLACK = float(np.finfo(np.float64).tiny)
# The most a restored store's coefficients may add up to (in units of its scale, itself at
# most 1e64): far past any model's, and small enough that the square checking the norm against
# them is finite.
MAX_SAVED_WEIGHT = 1e150
# A restored exponent matrix may differ from the one recomputed from the vectors by this much,
# relative to 1 + gamma (||x_i||^2 + ||x_j||^2): the rounding of merged vectors to the storage
# precision.
_GRAM_TOLERANCE = 1e-3


def vector_sizes(kernel: str, vectors: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """What a kernel exponent between stored vectors grows with, per vector: the squared norm
    (RBF: `||x_i||^2 + ||x_j||^2 - 2 x_i . x_j`) or the L1 norm (Laplacian: `|x_i - x_j|_1`;
    +inf where the squared norm the store keeps beside it overflows)."""
    if kernel == "rbf":
        return norms
    return np.where(np.isfinite(norms), np.abs(vectors).sum(axis=1, dtype=np.float64), np.inf)


def max_saved_size(kernel: str, dtype: str) -> float:
    """The largest `vector_sizes` of a restored support vector kept in `dtype`: two of them
    (and, RBF, twice their dot product) computed in `dtype` stay within its range."""
    return float(np.finfo(dtype).max) / (4 if kernel == "rbf" else 2)


def checked_state(store, scalars: dict, arrays: dict, n_inputs: int):
    """`(vectors, alpha, norms, gram)` of a saved state that `store` (a `SupportVectors`) may
    load over `n_inputs` input columns: the saved arrays, the vectors' squared norms, and the
    matrix of kernel exponents to keep (None when the store keeps none, or has to rebuild it
    from the vectors when first needed); `ValueError` if the state is not one of this store."""
    _check_scalars_and_shapes(store, scalars, arrays, n_inputs)
    vectors, alpha = arrays["vectors"], arrays["alpha"]
    size = scalars["size"]
    # A saved exponent matrix is used if this store keeps one (otherwise it is rebuilt from the
    # vectors when first needed); checked against the vectors below.
    saved_gram = arrays.get("gram") if store._keeps_gram(n_inputs) else None
    gram = None
    if saved_gram is not None:
        _check_gram(saved_gram, size, store.dtype)
        gram = store._new_gram()
    norms = _squared_norms(vectors)
    sizes = vector_sizes(store.kernel, vectors, norms)
    if not (sizes <= max_saved_size(store.kernel, store.dtype)).all():
        # Past it (RBF: ~1e154 in float64, ~1e19 per entry in float32) a squared norm or a dot
        # product overflows, and the kernel values the vector takes part in are NaN (an
        # exponent inf - inf): no input the model takes is stored that large.
        raise ValueError("the saved support vectors are too large for their kernel values to "
                         "be computed")
    # The running norm summed kernel values computed row by row, a check sums them in blocks:
    # they differ by rounding, which on inputs far from 0 (exponents taken from squared norms
    # far larger than the distances) can put the running a^T K a below 0.
    rounding = exponent_rounding(store.kernel, store.gamma, vectors, norms)
    with np.errstate(over="ignore"):  # (a sum past float64's range is said below)
        weight = float(np.abs(alpha).sum())
    if not weight <= MAX_SAVED_WEIGHT:  # (its square bounds the norm's check, below)
        raise ValueError(f"the saved coefficients are too large: their magnitudes add up to "
                         f"{weight:.3g}, over {MAX_SAVED_WEIGHT:g}")
    # Below float64's normal range (coefficients under about 1e-154) the norm's updates round
    # to the subnormal spacing, and the relative tolerance squares to 0.
    tolerance = (1e-6 + rounding) * weight ** 2 + _SUBNORMAL_SLACK
    if scalars["squared_norm"] < -tolerance:
        raise ValueError("saved squared norm is negative")
    if size <= _CHECKED_NORM_SIZE or gram is not None:  # (a kept matrix has fewer rows)
        exact = _quadratic_form(store.kernel, store.gamma, vectors, norms, alpha, gram)
        if not abs(scalars["squared_norm"] - exact) <= tolerance:
            raise ValueError("the saved norm does not match the saved support vectors")
        if gram is not None:
            scale = 1.0 + store.gamma * (sizes[:, None] + sizes[None, :])
            # An exponent past the dtype's range is +inf (a kernel value of 0), in the saved
            # matrix and in its recomputation alike: compared at the range's end.
            top = np.finfo(store.dtype).max
            saved = np.minimum(saved_gram, top, dtype=np.float64)
            kept = np.minimum(gram[:size, :size], top, dtype=np.float64)
            if not (np.abs(saved - kept) <= _GRAM_TOLERANCE * scale).all():
                raise ValueError("the saved kernel exponents do not match the saved support "
                                 "vectors")
            gram[:size, :size] = saved_gram
    return vectors, alpha, norms, gram


def _check_scalars_and_shapes(store, scalars: dict, arrays: dict, n_inputs: int) -> None:
    if not isinstance(scalars, dict) or not isinstance(arrays, dict):
        raise ValueError("support vector state must be a dict of scalars and a dict of arrays")
    for key in ("kernel", "gamma", "budget", "policy", "dtype"):
        if key not in scalars or scalars[key] != getattr(store, key):
            raise ValueError(
                f"the saved support vectors have {key} {scalars.get(key)!r}, "
                f"this model has {getattr(store, key)!r}"
            )
    counts = ("size", "n_inputs", "stored_since_norm", "n_merges", "n_removals")
    for key in counts:
        if not inputs.is_whole(scalars.get(key)) or scalars[key] < 0:
            raise ValueError(f"saved support vector field {key!r} must be an int >= 0")
    for key in ("scale", "squared_norm", "degradation", "total_degradation"):
        value = scalars.get(key)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number and math.isfinite(value)):
            raise ValueError(f"saved support vector field {key!r} must be a finite number")
    size = scalars["size"]
    cursor = scalars.get("cursor", 0)
    if not (inputs.is_whole(cursor) and 0 <= cursor < max(size, 1)):
        raise ValueError(f"saved reprocess cursor {cursor!r} is not a vector's index")
    if store.budget is not None and size > store.budget:
        raise ValueError(f"{size} saved support vectors exceed the budget of {store.budget}")
    if scalars["n_inputs"] != n_inputs:
        raise ValueError(
            f"the saved support vectors have {scalars['n_inputs']} input columns, "
            f"the model has {n_inputs}"
        )
    if not SCALE_RANGE[0] <= abs(scalars["scale"]) <= SCALE_RANGE[1]:
        raise ValueError("saved support vector scale is out of range")
    if min(scalars["degradation"], scalars["total_degradation"]) < 0:
        raise ValueError("saved weight degradation is negative")
    vectors, alpha = arrays.get("vectors"), arrays.get("alpha")
    if not isinstance(vectors, np.ndarray) or not isinstance(alpha, np.ndarray):
        raise ValueError("saved support vectors need the arrays 'vectors' and 'alpha'")
    if vectors.dtype != np.dtype(store.dtype) or vectors.shape != (size, n_inputs):
        raise ValueError(
            f"saved support vectors must be {store.dtype} of shape ({size}, {n_inputs}), "
            f"got {vectors.dtype} of shape {vectors.shape}"
        )
    if alpha.dtype != np.float64 or alpha.shape != (size,):
        raise ValueError(f"saved coefficients must be float64 of shape ({size},)")
    if not (np.isfinite(vectors).all() and np.isfinite(alpha).all()):
        raise ValueError("saved support vectors or coefficients are not finite")
    mixed = arrays.get("mixed")
    if mixed is not None and not (isinstance(mixed, np.ndarray) and mixed.dtype == bool
                                  and mixed.shape == (size,)):
        raise ValueError(f"saved flags 'mixed' must be bool of shape ({size},)")


def _check_gram(gram, size: int, dtype: str) -> None:
    """Refuse a saved exponent matrix that is not one (`checked_state` checks its values)."""
    if not isinstance(gram, np.ndarray) or gram.dtype != dtype or gram.shape != (size, size):
        raise ValueError(f"saved kernel exponents must be {dtype} of shape ({size}, {size})")
    # (+inf is an exponent past the dtype's range: a kernel value of 0.)
    if not ((gram >= 0).all() and not gram.diagonal().any()):
        raise ValueError("saved kernel exponents must be >= 0 (or +inf) and 0 on the diagonal")
