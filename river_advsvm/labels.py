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

__all__ = ["MAX_LABEL_LENGTH", "as_label", "classes_after"]

#: The longest str label (characters), as for a feature name: a model keeps its labels in its
#: checkpoint, as does a monitor the labels of its window.
MAX_LABEL_LENGTH = 1000
#: The int labels (and message ids) taken: 64-bit signed ones, as a checkpoint's JSON and Kafka's
#: clients hold them.
INT64 = range(-2**63, 2**63)


def as_label(y):
    """`y` as a plain Python label (a numpy scalar becomes the value it holds); `InvalidInput`
    for anything that is not a bool, an int of at most 64 bits, a finite float or a str of at
    most `MAX_LABEL_LENGTH` characters."""
    if isinstance(y, np.generic):
        y = y.item()
    if isinstance(y, bool):
        return y
    if isinstance(y, str):
        if len(y) > MAX_LABEL_LENGTH:
            raise inputs.InvalidInput(f"label {inputs.describe(y)} is longer than "
                                      f"{MAX_LABEL_LENGTH} characters", "bad_label")
        return str.__str__(y)  # the text itself (see `inputs.encode_name`)
    if isinstance(y, numbers.Integral):
        y = int(y)
        if y not in INT64:
            raise inputs.InvalidInput(f"label {inputs.describe(y)} is not allowed: an int "
                                      "label must fit in 64 bits", "bad_label")
        return y
    if isinstance(y, numbers.Real):
        if math.isfinite(y):
            return float(y)
        # (pandas stores a missing value as NaN, in a column of str labels too)
        missing = " (a missing label is None, not NaN)" if math.isnan(y) else ""
        raise inputs.InvalidInput(f"label {inputs.describe(y)} is not allowed: a number label "
                                  f"must be finite{missing}", "bad_label")
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
