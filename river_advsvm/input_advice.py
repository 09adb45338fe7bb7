"""Warnings, once per model each, about inputs and settings a kernel model cannot learn from as
the user meant, each with the change that helps.

`InputAdvice` holds which warnings a model has given; `AdvKernelSVM` asks it at the points where
each case shows: a radius as the model is made and as a sample's inputs are known, a row as it
is scored, inputs as they get their columns, the store after a step.

"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm import inputs
from river_advsvm.support import PrecisionWarning
from river_advsvm.warn import warn_caller

__all__ = ["LATE_EXPONENT", "InputAdvice", "out_of_reach"]

#: An input first learned after the warm-up of gamma='scale' whose value alone adds more than
#: this to the kernel's exponent (a factor below 2e-9) is warned about (`late_and_wide`).
LATE_EXPONENT = 20.0


def out_of_reach(row: np.ndarray, vectors: np.ndarray, gamma: float,
                 kernel: str) -> tuple[int, float] | None:
    """The input (its column) whose value, past every stored value of it, puts `row` by its
    difference alone beyond the kernel's reach of every vector in `vectors` (the exponent past
    `LATE_EXPONENT`), with that difference in kernel widths (`1 / sqrt(gamma)`, `1 / gamma`
    for the Laplacian); None if there is none, or more than a tenth of the inputs are such.
    `row` and `vectors` as the store holds them."""
    d = min(len(row), vectors.shape[1])
    if not len(vectors) or not d:
        return None
    S, x = vectors[:, :d], row[:d].astype(vectors.dtype)
    nearest = np.abs(S - x).min(axis=0).astype(np.float64)
    exponents = gamma * (nearest * nearest if kernel == "rbf" else nearest)
    # Past every stored value, as a time is: a value in a gap between stored ones is a kernel
    # too narrow for the input instead.
    exponents[(x <= S.max(axis=0)) & (x >= S.min(axis=0))] = 0.0
    # A few such inputs: many are a kernel too narrow for every input instead.
    if not 0 < np.count_nonzero(exponents > LATE_EXPONENT) <= max(1, d // 10):
        return None
    j = int(exponents.argmax())
    return j, float(exponents[j] ** (0.5 if kernel == "rbf" else 1.0))


class InputAdvice:
    """Which of its warnings a model has given (each at most once), and the checks that give
    them. `model` names the model in the messages."""

    def __init__(self, model: str):
        self.model = model
        self.box_warned = False
        self.off_centre_warned = False
        self.late_and_wide_warned = False
        self.rounding_warned = False

    def box_reached(self, epsilon: float, norm: str, bounds: tuple, d: int) -> None:
        """An `epsilon` whose threat ball holds the box's centre, from any point of the box
        over `d` inputs (a radius in the wrong units: 8 for 8/255 on pixels in (0, 1)). L-inf:
        half the box's width, whatever `d` (checked when the model is made); L2: half its
        diagonal over a sample's `d` inputs (checked as one is learned)."""
        linf = norm == "linf"
        if self.box_warned or not (linf or d):  # (a sample of no input: nothing can move)
            return
        low, high = bounds
        if epsilon >= (1.0 if linf else math.sqrt(d)) * (high - low) / 2:
            self.box_warned = True
            reach = ("half the width of the box" if linf else
                     f"half the diagonal of the box over a sample's {d} inputs")
            warn_caller(f"epsilon={epsilon:g} is at least {reach} ({low:g}, {high:g}): "
                        f"its {'L-inf' if linf else 'L2'} threat ball holds the box's centre, "
                        "so under attack no classifier does better than predicting one class; "
                        "is epsilon in the inputs' units?", UserWarning)

    def off_centre(self, V: np.ndarray, scales, names: list) -> None:
        """A sample (or rows `V`, scored over the model's columns, named `names`) in which an
        input that `gamma='scale'` centred (`scales`, the model's `InputScales`: an input far
        from 0, as a year) is 0, absent or NaN: it is decided as if that input were 0, far
        outside the values learned, which is almost never what was meant."""
        if self.off_centre_warned:
            return
        centres = scales.column_centres(V.shape[-1])
        columns = np.flatnonzero(centres)
        zero = (np.atleast_2d(V)[:, columns] == 0).any(axis=0)
        if zero.any():
            self.off_centre_warned = True
            j = int(columns[zero][0])
            warn_caller(f"{self.model}: input {inputs.shown_name(names[j])} is 0, absent or NaN "
                        f"in a sample, but its values are far from 0 (gamma='scale' measures "
                        f"it about {centres[j]:g}): the sample is decided as if it were 0. "
                        "Fill in missing values first (River's preprocessing.StatImputer), or "
                        "put a StandardScaler in front", UserWarning)

    def late_and_wide(self, names: list, values: np.ndarray, scales, n_columns: int,
                      fitted: bool = True) -> None:
        """Inputs `names` (with the `values` of the sample that brought them) just given the
        last columns of `n_columns`, by `scales` (the model's `InputScales`: fitted by
        `gamma='scale'`, or a `gamma` dict when not `fitted`). One that came after the warm-up
        (or that the dict does not name) takes the median of the widths; one whose value alone
        puts the sample beyond the kernel's reach of every vector (a factor below
        exp(-LATE_EXPONENT)) is in other units than the inputs the widths are for."""
        if self.late_and_wide_warned:
            return
        late = np.fromiter((n not in scales.by_name for n in names), bool, len(names))
        factors = scales.columns(n_columns)[-len(names):]  # (the columns just added)
        exponents = scales.gamma * np.abs(factors * values) ** (1.0 / scales.power)
        exponents[~late] = 0.0  # (the warm-up's own inputs, held until it ended, have widths)
        if exponents.max(initial=0.0) > LATE_EXPONENT:
            self.late_and_wide_warned = True
            j = int(exponents.argmax())
            name = inputs.shown_name(names[j])
            if not fitted:
                warn_caller(f"{self.model}: input {name} is not named in the gamma dict, so it "
                            f"takes the median of the dict's widths, and at its value "
                            f"{values[j]:g} the sample is out of the kernel's reach of every "
                            "other: give it a width in the dict (under the feature's own name), "
                            "or put a StandardScaler in front", UserWarning)
                return
            warn_caller(f"{self.model}: input {name} came after the "
                        "warm-up, so gamma='scale' gave it the median of the widths it "
                        f"fitted, and at its value {values[j]:g} the sample is out of the "
                        "kernel's reach of every other: set gamma yourself (a dict with a width "
                        "for it), put a StandardScaler in front, or raise warm_up so that the "
                        "warm-up sees it", UserWarning)

    def rounding_swamps(self, rounding: float | None, gamma, dtype: str) -> None:
        """Inputs so far from 0 that float rounding swamps their distances (the store's
        `rounding`, the relative error of its kernel values, `gamma ||x||^2` times the dtype's
        epsilon; None if small)."""
        if self.rounding_warned or not rounding:
            return
        self.rounding_warned = True
        off = "wholly" if rounding >= 1.0 else f"by about {rounding:.0%}"
        # gamma='scale' centres the inputs of its warm-up, not those that arrive after it.
        remedies = ["centre them (preprocessing.StandardScaler)"]
        if gamma != "scale":
            remedies.append("use gamma='scale', which centres inputs far from 0")
        if dtype != "float64":
            remedies.append("use dtype='float64'")
        exponent = rounding / float(np.finfo(dtype).eps)
        # Inputs near 0 with a gamma this large: the kernel is too narrow, whatever the dtype.
        narrow = "" if gamma == "scale" else (
            f"; if they are near 0 already, gamma is too large for them (gamma ||x||^2 is "
            f"{exponent:.3g} at one: two inputs that differ at all have a kernel value near 0)")
        warn_caller(
            f"{self.model}: inputs this far from 0 lose their differences in {dtype} at this "
            f"gamma (kernel values off {off}); {', or '.join(remedies)}{narrow}",
            PrecisionWarning)
