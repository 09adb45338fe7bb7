"""Robustness reports on digits 1 vs 7: attacks against each other and against the certificate."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import learn_stream

from river_advsvm import AdvKernelSVM
from river_advsvm.attacks import FGSM, PGD, ZOO, CarliniWagnerL2
from river_advsvm.evaluate import REPORT_COLUMNS, robustness_report

EPSILONS = {"linf": [8 / 255, 0.1, 0.2], "l2": [0.5, 1.0]}


@pytest.fixture(scope="module")
def natural(digits_1v7):
    X_train, _, y_train, _ = digits_1v7
    return learn_stream(AdvKernelSVM(seed=0), X_train, y_train)


@pytest.fixture(scope="module")
def adversarial(digits_1v7):
    X_train, _, y_train, _ = digits_1v7
    return learn_stream(AdvKernelSVM(epsilon=0.1, norm="linf", seed=0), X_train, y_train)


@pytest.fixture(scope="module")
def natural_report(natural, digits_1v7):
    _, X_test, _, y_test = digits_1v7
    attacks = {
        "FGSM-linf": FGSM(),
        "FGSM-l2": FGSM(norm="l2"),
        "PGD-linf": PGD(),
        "PGD-l2": PGD(norm="l2"),
        "C&W": CarliniWagnerL2(),
        # Black box and costly: a short run (its accuracy is then a looser upper bound).
        "ZOO": ZOO(steps=40, search_steps=2, coordinates=16, learning_rate=0.05, seed=0),
    }
    return robustness_report(natural, X_test, y_test, attacks, EPSILONS)


def accuracy(report, attack, norm, epsilon):
    at = (report.attack == attack) & (report.norm == norm) & np.isclose(report.epsilon, epsilon)
    row = report[at]
    assert len(row) == 1, (attack, norm, epsilon)
    return float(row.accuracy.iloc[0])


def test_report_has_a_row_per_attack_and_radius(natural_report, digits_1v7):
    report = natural_report
    assert list(report.columns) == REPORT_COLUMNS
    assert report.attack.iloc[0] == "clean"
    # FGSM and PGD run in both norms, C&W and ZOO in L2; certified rows for both norms.
    assert len(report) == 1 + 2 * 5 + 2 * 2 + 5
    attacked = report[~report.attack.isin(["clean", "certified"])]
    assert (attacked.max_perturbation <= attacked.epsilon * (1 + 1e-9)).all()
    assert (attacked.seconds > 0).all()
    # An RBF model always has a gradient; ZOO, which sees probabilities only, can meet one
    # that has saturated (its finite differences are then 0), and says so.
    white_box = report[~report.attack.isin(["ZOO"])]
    assert (white_box.no_gradient == 0).all()
    assert (report.no_gradient <= 0.05 * len(digits_1v7[1])).all()


def test_clean_fgsm_pgd_ordering_on_the_natural_model(natural_report):
    clean = accuracy(natural_report, "clean", "", 0.0)
    for norm, radii in EPSILONS.items():
        for epsilon in radii:
            fgsm = accuracy(natural_report, f"FGSM-{norm}", norm, epsilon)
            pgd = accuracy(natural_report, f"PGD-{norm}", norm, epsilon)
            assert clean >= fgsm >= pgd, (norm, epsilon)
    # The radii are large enough that the attacks bite.
    assert accuracy(natural_report, "PGD-l2", "l2", 1.0) < clean - 0.3


def test_certified_accuracy_is_below_every_attack(natural_report):
    report = natural_report
    for norm, radii in EPSILONS.items():
        for epsilon in radii:
            certified = accuracy(report, "certified", norm, epsilon)
            same = report[(report.norm == norm) & np.isclose(report.epsilon, epsilon)]
            attacks = same[same.attack != "certified"]
            assert len(attacks) >= 2
            assert (certified <= attacks.accuracy).all(), (norm, epsilon)
    # ... and it certifies something: a lower bound of 0 everywhere would pass the above.
    assert accuracy(report, "certified", "linf", 8 / 255) > 0.5


def test_carlini_wagner_is_at_least_as_strong_as_pgd_in_l2(natural_report):
    # Minimal-norm search against 10 fixed-size steps: C&W may lose a little to PGD on a point
    # or two, never more.
    for epsilon in EPSILONS["l2"]:
        cw = accuracy(natural_report, "C&W", "l2", epsilon)
        pgd = accuracy(natural_report, "PGD-l2", "l2", epsilon)
        assert cw <= pgd + 0.03


def test_adversarial_training_helps_where_the_natural_model_is_broken(
    natural, adversarial, digits_1v7
):
    _, X_test, _, y_test = digits_1v7

    def pgd_accuracy(model):
        report = robustness_report(model, X_test, y_test, [PGD()], {"linf": [0.3]})
        return accuracy(report, "PGD", "linf", 0.3)

    nat, adv = pgd_accuracy(natural), pgd_accuracy(adversarial)
    assert nat < 0.2  # broken
    assert adv > nat + 0.1


def test_any_river_classifier_gets_a_report_without_certificate(digits_1v7):
    from river import compose, linear_model, preprocessing

    X_train, X_test, y_train, y_test = digits_1v7
    model = compose.Pipeline(preprocessing.StandardScaler(), linear_model.LogisticRegression())
    for xi, yi in zip(X_train.tolist(), y_train.tolist()):
        model.learn_one(dict(enumerate(xi)), yi == 7)  # (a binary River model learns bools)
    report = robustness_report(model, X_test[:20], (y_test[:20] == 7).tolist(),
                               [FGSM(epsilon=0.2)], [0.2])
    assert list(report.attack) == ["clean", "FGSM"]  # no certificate for a black box
    assert report.accuracy.iloc[1] < report.accuracy.iloc[0]


def _small_linear():
    import pandas as pd

    from river_advsvm import AdvLinearSVM

    model = AdvLinearSVM()
    for _ in range(50):
        model.learn_one({"a": 0.2, "b": 0.3}, False)
        model.learn_one({"a": 0.9, "b": 0.7}, True)
    return model, pd.DataFrame({"a": [0.1, 0.6], "b": [0.2, 0.5]}), [False, True]


def test_one_radius_and_one_attack_need_no_list():
    model, X, y = _small_linear()
    listed = robustness_report(model, X, y, [FGSM()], [0.1], progress=False)
    for attacks, epsilons in [(FGSM(), 0.1), ([FGSM()], np.float64(0.1)),
                              ([FGSM()], {"linf": 0.1})]:
        report = robustness_report(model, X, y, attacks, epsilons, progress=False)
        assert report.drop(columns="seconds").equals(listed.drop(columns="seconds"))


@pytest.mark.parametrize("epsilons, match", [
    (["0.1"], "radius"), ([-0.1], "radius"), ([float("nan")], "radius"), ([True], "radius"),
    ({"l1": [0.1]}, "norm"), ({"linf": [0.1], "L2": [0.5]}, "norm"), (None, "radius"),
])
def test_radii_that_are_not_radii_are_refused_before_any_attack_runs(epsilons, match):
    """A norm the report does not know dropped every attack silently; a negative or NaN radius
    gave rows of nonsense; a string ended in a numpy ufunc error after the attacks ran."""
    model, X, y = _small_linear()
    with pytest.raises(ValueError, match=match):
        robustness_report(model, X, y, [CarliniWagnerL2(steps=2, search_steps=1)], epsilons,
                          progress=False)


def test_a_label_a_black_box_never_names_is_refused():
    """A River model whose probabilities name False and True, attacked with labels 1 and 7:
    every sample counted as fooled before any attack (a report of nothing); refused as a
    margin model refuses an unknown label."""
    from river import linear_model

    from river_advsvm import InvalidInput

    model = linear_model.LogisticRegression()
    for x, label in [({0: 0.1}, True), ({0: 0.9}, False)] * 20:
        model.learn_one(x, label)
    X = np.array([[0.2], [0.8]])
    with pytest.raises(InvalidInput) as caught:
        FGSM(epsilon=0.1, bounds=None).run(model, X, [1, 7], progress=False)
    assert caught.value.code == "unknown_label" and "7" in str(caught.value)
    result = FGSM(epsilon=0.1, bounds=None).run(model, X, [True, False], progress=False)
    assert not result.fooled.all()


def test_a_nan_input_is_refused_in_the_reports_words():
    """A NaN input was refused saying "learning needs finite values": a report learns
    nothing."""
    from river_advsvm import InvalidInput

    model, X, y = _small_linear()
    X = X.copy()
    X.loc[1, "b"] = float("nan")
    with pytest.raises(InvalidInput, match="feature 'b' is nan; robustness_report needs finite "
                                           "values$"):
        robustness_report(model, X, y, [FGSM()], [0.1], progress=False)


@pytest.mark.parametrize("attacks, epsilons, norm, given", [
    ([PGD(norm="l2")], {"linf": [0.1]}, "l2", "linf"),
    ([CarliniWagnerL2()], {"linf": 0.1}, "l2", "linf"),
    ([FGSM()], [], "linf", "none"),
])
def test_an_attack_without_a_radius_of_its_norm_is_refused(attacks, epsilons, norm, given):
    """Such an attack was left out of the report without a word (its docstring: every attack
    is run at every radius of its norm)."""
    model, X, y = _small_linear()
    with pytest.raises(ValueError, match=f"is in the {norm} norm, and epsilons gives no radius "
                                         rf"of that norm \(it gives {given}\)"):
        robustness_report(model, X, y, attacks, epsilons, progress=False)


def test_certified_at_radius_zero_is_the_clean_accuracy(natural, digits_1v7):
    """At radius 0 the certificate vouches for exactly the right predictions: a wrong one has
    radius 0 too, and must not count."""
    _, X_test, _, y_test = digits_1v7
    y = np.array(y_test)
    y[:5] = np.where(y[:5] == 7, 1, 7)  # five labels the model gets wrong: the case that matters
    report = robustness_report(natural, X_test, y, [PGD(norm="l2")], {"l2": [0.0, 0.5]})
    clean = accuracy(report, "clean", "", 0.0)
    assert clean < 1.0
    assert accuracy(report, "certified", "l2", 0.0) == clean
    assert accuracy(report, "certified", "l2", 0.5) <= clean
