"""The labels of a binary classifier: which values are labels, and which of two is positive.

The positive class is `True` for boolean labels, otherwise the larger of the two labels (7 in
1-vs-7); two labels that cannot be ordered keep the order in which they were seen.

Examples
--------

>>> from river_advsvm.labels import as_label, classes_after

>>> classes_after([], [7, 1, 7])
[1, 7]
>>> classes_after([], [True])
[False, True]
>>> as_label(3.0)
3.0

"""

from __future__ import annotations

import math
import numbers
import typing

import numpy as np

from river_advsvm import inputs

__all__ = ["as_label", "classes_after"]


def as_label(y):
    """`y` as a plain Python label (a numpy scalar becomes the value it holds); `InvalidInput`
    for anything that is not a bool, an int, a finite float or a str."""
    if isinstance(y, np.generic):
        y = y.item()
    if isinstance(y, bool) or isinstance(y, str):
        return y
    if isinstance(y, numbers.Integral):
        return int(y)
    if isinstance(y, numbers.Real):
        if math.isfinite(y):
            return float(y)
        raise inputs.InvalidInput(f"label {inputs.describe(y)} is not allowed: a number label "
                                  "must be finite", "bad_label")
    raise inputs.InvalidInput(
        f"label {inputs.describe(y)} is not supported: use a bool, a number or a str",
        "bad_label")


def classes_after(classes: list, labels: typing.Iterable) -> list:
    """`[negative, positive]` (or the one label seen) once `labels` join `classes`;
    `InvalidInput` if they would make a third class."""
    classes = list(classes)
    for y in dict.fromkeys(labels):
        if y in classes:
            continue
        if not classes:
            classes = [False, True] if isinstance(y, bool) else [y]
        elif len(classes) == 1:
            pair = [classes[0], y]
            try:
                pair.sort()
            except TypeError:
                pass  # unorderable labels: the first one seen is the negative class
            classes = pair
        else:
            raise inputs.InvalidInput(
                f"label {y!r} would be a third class, this binary classifier knows "
                f"{list(classes)}; for more classes, wrap it in river_advsvm.multiclass.OneVsRest",
                "third_class")
    return classes
