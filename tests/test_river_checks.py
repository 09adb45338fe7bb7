"""River's own conventions, checked by River's own estimator checks."""

from __future__ import annotations

import pytest
from river import datasets, evaluate, linear_model, metrics, multiclass, preprocessing
from river.checks import check_estimator, yield_checks

from river_advsvm import AdvKernelSVM, AdvLinearSVM
from river_advsvm.multiclass import OneVsRest

MODELS = [
    AdvKernelSVM(),
    # The paper's closed form: River's shuffled-keys check compares to 1e-6, and the L-inf
    # attacker's steps can grow rounding-level differences of the gamma='scale' warm-up
    # (summed in the keys' order) on Phishing's few-valued inputs.
    AdvKernelSVM(epsilon=0.1, norm="linf", kernel="laplacian", budget=64, seed=3,
                 adversary="closed_form"),
    AdvKernelSVM(epsilon=0.1, norm="l2", budget=64, seed=3),
    AdvKernelSVM(epsilon=0.1, budget=32, budget_policy="truncate", schedule="diminishing"),
    AdvKernelSVM(budget=32, budget_policy="compact_slot"),
    AdvKernelSVM(budget_policy="grow"),
    AdvKernelSVM(budget=16, averaging=50),
    AdvLinearSVM(),
    AdvLinearSVM(epsilon=0.05, norm="linf", schedule="diminishing"),
]


@pytest.mark.parametrize("model", MODELS, ids=repr)
def test_check_estimator(model):
    check_estimator(model)


@pytest.mark.parametrize("params", list(OneVsRest._unit_test_params()), ids=repr)
def test_check_estimator_one_vs_rest(params):
    """River's checks build the estimator from `_unit_test_params`: River's own yields a
    LogisticRegression, which a one-vs-rest of certifiable models refuses."""
    check_estimator(OneVsRest(**params))


def test_no_check_is_skipped():
    """Every River check applies, including learn_many == a learn_one loop."""
    for model in (AdvKernelSVM(), AdvLinearSVM()):
        names = {check.__name__ for check in yield_checks(model)}
        assert "check_learn_many_matches_learn_one" in names
        assert not model._unit_test_skips()


def test_one_vs_rest_multiclass_beats_river_logistic_regression():
    """Ten-class digits-like data through OneVsRestClassifier, against River's own baseline."""

    def score(classifier, scaler):
        model = scaler | multiclass.OneVsRestClassifier(classifier)
        return evaluate.progressive_val_score(datasets.ImageSegments(), model, metrics.Accuracy())

    ours = score(AdvKernelSVM(seed=1), preprocessing.MinMaxScaler())
    river = score(linear_model.LogisticRegression(), preprocessing.StandardScaler())
    assert ours.get() > river.get()
    assert ours.get() > 0.8
