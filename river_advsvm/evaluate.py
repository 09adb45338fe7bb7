"""Evaluating models under attack: robustness reports.

Every robust accuracy here comes with its two sides: an attack's accuracy is an upper bound on
the true robust accuracy (a stronger attack could only lower it), the certified accuracy a
lower bound (no attack can go below it). Reporting both shows how tight the evaluation is.

"""

from __future__ import annotations

import time
import typing
import warnings

import numpy as np

from river_advsvm import attacks as attacks_module
from river_advsvm import inputs
from river_advsvm.attacks.base import has_margin_api

__all__ = ["robustness_report"]

REPORT_COLUMNS = [
    "attack",
    "norm",
    "epsilon",
    "accuracy",
    "mean_perturbation",
    "max_perturbation",
    "no_gradient",
    "seconds",
]


def _predictions(model, names: list, values: np.ndarray) -> list:
    # This package's models predict batches exactly as they predict samples; for any other
    # model, predict_one is the contract (some River pipelines fail on integer column names).
    if has_margin_api(model):
        import pandas as pd

        return list(model.predict_many(pd.DataFrame(values, columns=names)))
    return [model.predict_one(dict(zip(names, row))) for row in values.tolist()]


def _named(attacks) -> dict:
    if isinstance(attacks, dict):
        return dict(attacks)
    named = {}
    for attack in attacks:
        name = type(attack).__name__
        if name in named:
            raise ValueError(f"two {name} attacks: pass a dict to name them")
        named[name] = attack
    return named


def _radii_for(epsilons, norm: str) -> list:
    if isinstance(epsilons, dict):
        return list(epsilons.get(norm, []))
    return list(epsilons)


def robustness_report(
    model,
    X,
    y: typing.Sequence,
    attacks: dict | typing.Sequence,
    epsilons: dict | typing.Sequence[float],
    certified: bool = True,
):
    """Accuracy of `model` on `(X, y)` clean, under each attack at each radius, and certified.

    Parameters
    ----------
    model
        A fitted binary classifier: one of this package's models (attacked white box, and
        certified) or any River classifier (attacked through its probabilities).
    X
        Samples: a DataFrame, or an array whose columns are features 0..d-1.
    y
        Their labels.
    attacks
        `river_advsvm.attacks` instances, as a list (named by class) or a dict of names to
        attacks. Each is run at every radius of its norm, its own `epsilon` ignored.
    epsilons
        Radii: a list used for every attack in its own norm, or a dict from norm ('l2',
        'linf') to a list of radii.
    certified
        Add the certified accuracy at every (norm, radius) of the report, for models that have
        `certified_radius_many`.

    Returns
    -------
    A pandas DataFrame, one row per (attack, radius): the accuracy of the model's predictions on
    the attacked points, the mean and max perturbation norm (in the attack's norm), the number of
    samples the attack did not fool that got no usable gradient (see `attacks.AttackResult`),
    and the wall time in seconds. It starts with the clean row and ends with the certified rows.
    Minimum-norm attacks (C&W, ZOO) run once; their row at radius `r` counts a sample as fooled
    when the smallest flip found is within `r`, and every row shows the time of that one run.

    Examples
    --------

    >>> from river_advsvm import AdvLinearSVM
    >>> from river_advsvm.attacks import FGSM, PGD
    >>> from river_advsvm.evaluate import robustness_report

    >>> model = AdvLinearSVM()
    >>> for _ in range(50):
    ...     model.learn_one({"a": 0.2, "b": 0.3}, False)
    ...     model.learn_one({"a": 0.9, "b": 0.7}, True)

    >>> import pandas as pd
    >>> X = pd.DataFrame({"a": [0.1, 0.2, 0.7, 0.9], "b": [0.2, 0.4, 0.5, 0.9]})
    >>> y = [False, False, True, True]
    >>> report = robustness_report(model, X, y, [FGSM(), PGD()], epsilons=[0.05, 0.2])
    >>> report[["attack", "norm", "epsilon", "accuracy", "max_perturbation"]]
          attack  norm  epsilon  accuracy  max_perturbation
    0      clean           0.00       1.0              0.00
    1       FGSM  linf     0.05       1.0              0.05
    2       FGSM  linf     0.20       0.5              0.20
    3        PGD  linf     0.05       1.0              0.05
    4        PGD  linf     0.20       0.5              0.20
    5  certified  linf     0.05       1.0              0.00
    6  certified  linf     0.20       0.5              0.00

    The linear model's certificate is exact, so certified and attacked accuracies meet.

    """
    import pandas as pd

    names, values = inputs.frame_values(X)
    labels = list(y)
    if len(labels) != len(values):
        raise inputs.InvalidInput(f"{len(values)} samples but {len(labels)} labels")

    def right_at(points: np.ndarray) -> np.ndarray:
        predictions = _predictions(model, names, points)
        return np.fromiter((p == t for p, t in zip(predictions, labels)), bool, len(labels))

    start = time.perf_counter()
    clean_right = right_at(values)
    rows = [_row("clean", "", 0.0, clean_right, np.zeros(len(labels)), 0,
                 time.perf_counter() - start)]

    norms_used = []
    for name, attack in _named(attacks).items():
        if not isinstance(attack, attacks_module.Attack):
            raise TypeError(f"{name!r} is not a river_advsvm.attacks.Attack")
        radii = _radii_for(epsilons, attack.norm)
        if radii and attack.norm not in norms_used:
            norms_used.append(attack.norm)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", attacks_module.NoGradientWarning)
            if attack.minimizes_norm:
                result = attack.clone({"epsilon": None}).run(model, X, labels)
                adversarial_right = right_at(result.adversarial)
                for radius in radii:
                    within = result.norms <= radius
                    right = np.where(within, adversarial_right, clean_right)
                    norms = np.where(within, result.norms, 0.0)
                    rows.append(_row(name, attack.norm, radius, right, norms,
                                     result.n_no_gradient, result.seconds))
            else:
                for radius in radii:
                    result = attack.clone({"epsilon": radius}).run(model, X, labels)
                    rows.append(_row(name, attack.norm, radius, right_at(result.adversarial),
                                     result.norms, result.n_no_gradient, result.seconds))

    if certified and hasattr(model, "certified_radius_many"):
        norms = norms_used or [n for n in ("linf", "l2") if _radii_for(epsilons, n)]
        for norm in norms:
            start = time.perf_counter()
            radii_found = model.certified_radius_many(X, labels, norm=norm)
            seconds = time.perf_counter() - start
            for radius in _radii_for(epsilons, norm):
                # A positive radius means a right prediction (the margin y g(x) > 0).
                right = (radii_found > 0) & (radii_found >= radius)
                rows.append(_row("certified", norm, radius, right, np.zeros(len(labels)), 0,
                                 seconds))
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)


def _row(attack, norm, radius, right, norms, no_gradient, seconds) -> dict:
    return dict(
        attack=attack,
        norm=norm,
        epsilon=float(radius),
        accuracy=float(right.mean()) if len(right) else float("nan"),
        mean_perturbation=float(norms.mean()) if len(norms) else 0.0,
        max_perturbation=float(norms.max()) if len(norms) else 0.0,
        no_gradient=int(no_gradient),
        seconds=float(seconds),
    )
