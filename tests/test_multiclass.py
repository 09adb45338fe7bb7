"""OneVsRest: the multi-class certificate is sound, and 0 where it should be."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from river_advsvm import AdvKernelSVM
from river_advsvm.attacks import PGD, NoGradientWarning
from river_advsvm.multiclass import OneVsRest


@pytest.fixture(scope="module")
def digits_ovr():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    model = OneVsRest(AdvKernelSVM(seed=0))
    model.learn_many(*_frame(X[:600], y[:600]))
    return model, X[600:640], y[600:640]


def _frame(X, y):
    import pandas as pd

    return pd.DataFrame(X), pd.Series(y)


def test_no_attack_changes_a_certified_prediction(digits_ovr):
    model, X, y = digits_ovr
    radii = model.certified_radius_many(X, y, norm="l2")
    one = [model.certified_radius_one(dict(enumerate(x)), t, norm="l2") for x, t in zip(X, y)]
    assert radii == pytest.approx(one, rel=1e-4)  # float32 margins: one and many round apart
    predictions = model.predict_many(_frame(X, y)[0]).to_numpy()
    assert ((radii > 0) <= (predictions == y)).all()  # certified implies right
    certified = np.flatnonzero(radii > 0)
    assert len(certified) >= 10
    rng = np.random.default_rng(0)
    for i in certified[:10]:
        x, label, radius = X[i], y[i], radii[i]
        # Random directions on the sphere of the certified radius...
        directions = rng.normal(size=(200, X.shape[1]))
        directions *= radius / np.linalg.norm(directions, axis=1, keepdims=True)
        moved = model.predict_many(_frame(x + directions, None)[0]).to_numpy()
        assert (moved == label).all()
        # ...and the black-box attack at that radius (no box: the certificate ignores it).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoGradientWarning)
            attacked = PGD(epsilon=radius, norm="l2", bounds=None).perturb_one(
                model, dict(enumerate(x)), label)
        assert model.predict_one(attacked) == label


def test_labels_it_cannot_vouch_for_get_zero(digits_ovr):
    model, X, y = digits_ovr
    x = dict(enumerate(X[0]))
    wrong = next(t for t in range(10) if t != y[0])
    assert model.certified_radius_one(x, wrong) == 0.0
    assert model.certified_radius_one(x, "never seen") == 0.0
    assert OneVsRest(AdvKernelSVM()).certified_radius_one(x, y[0]) == 0.0  # knows no label


def test_nan_is_a_missing_input_for_the_certificate_as_for_the_binary_models(digits_ovr):
    """`certified_radius_many` refused NaN ('learning needs finite values') where each binary
    model, and `certified_radius_one`, read it as a missing input."""
    model, X, y = digits_ovr
    X = X[:5].copy()
    X[:, 3] = np.nan
    radii = model.certified_radius_many(X, y[:5])
    one = [model.certified_radius_one({j: v for j, v in enumerate(x) if j != 3}, t)
           for x, t in zip(X, y[:5])]
    assert radii == pytest.approx(one, rel=1e-4)


def test_the_box_is_each_binary_models_and_a_sample_outside_it_is_refused(digits_ovr):
    from river_advsvm.inputs import InvalidInput

    model, X, y = digits_ovr
    box = (0.0, 1.0)
    radii = model.certified_radius_many(X, y, norm="linf", bounds=box)
    by_hand = np.min([m.certified_radius_many(X, y == label, "linf", box)
                      for label, m in model.classifiers.items()], axis=0)
    assert np.array_equal(radii, by_hand)
    # The box can only make a radius larger, and here it does for some sample.
    free = model.certified_radius_many(X, y, norm="linf")
    assert (radii >= free).all() and (radii > free).any()
    one = [model.certified_radius_one(dict(enumerate(x)), t, "linf", box) for x, t in zip(X, y)]
    assert radii == pytest.approx(one, rel=1e-4)
    outside = X[:2].copy()
    outside[0, 5] = 1.5
    with pytest.raises(InvalidInput, match="outside bounds"):
        model.certified_radius_many(outside, y[:2], bounds=box)
    with pytest.raises(InvalidInput, match="outside bounds"):  # even for a label it never saw
        model.certified_radius_one(dict(enumerate(outside[0])), "never seen", bounds=box)
    with pytest.raises(ValueError, match="bounds must be"):
        model.certified_radius_one(dict(enumerate(X[0])), y[0], bounds=(1.0, 0.0))


def test_only_certifiable_models_are_accepted():
    from river import linear_model

    with pytest.raises(TypeError, match="no certified radius"):
        OneVsRest(linear_model.LogisticRegression())


def _three_labels():
    from river_advsvm import AdvLinearSVM

    model = OneVsRest(AdvLinearSVM())
    for _ in range(100):
        model.learn_one({"a": 0.1, "b": 0.1}, "low")
        model.learn_one({"a": 0.9, "b": 0.1}, "right")
        model.learn_one({"a": 0.1, "b": 0.9}, "up")
    return model


@pytest.mark.parametrize("label", [float("nan"), np.float64("nan"), None, ["low"]])
def test_a_label_that_is_no_label_is_refused_and_adds_no_class(label):
    """A pandas column of labels holds NaN where one is missing: each NaN (never equal to
    another) became a class of its own, a new binary model per sample, without bound."""
    from river_advsvm import InvalidInput

    model = _three_labels()
    for _ in range(3):
        with pytest.raises(InvalidInput, match="label"):
            model.learn_one({"a": 0.5, "b": 0.5}, label)
    assert list(model.classifiers) == ["low", "right", "up"]


def test_a_refused_sample_of_a_new_label_leaves_no_class_behind():
    """The new label's model was added before the sample was refused: an untrained model then
    took a share of every prediction, and zeroed every certificate."""
    from river_advsvm import InvalidInput

    model = _three_labels()
    x = {"a": 0.15, "b": 0.1}
    before = (model.predict_proba_one(x), model.certified_radius_one(x, "low"))
    with pytest.raises(InvalidInput):
        model.learn_one({"a": "high", "b": 0.1}, "new")
    assert list(model.classifiers) == ["low", "right", "up"]
    assert (model.predict_proba_one(x), model.certified_radius_one(x, "low")) == before
    assert before[1] > 0


def test_a_refused_batch_of_new_labels_leaves_no_class_behind():
    import pandas as pd

    from river_advsvm import InvalidInput

    model = _three_labels()
    X = pd.DataFrame({"a": [0.5, float("inf")], "b": [0.5, 0.5]})
    with pytest.raises(InvalidInput):
        model.learn_many(X, pd.Series(["new", "newer"]))
    with pytest.raises(InvalidInput, match="label"):
        model.learn_many(X.iloc[:1], pd.Series([float("nan")]))
    assert list(model.classifiers) == ["low", "right", "up"]


def test_arrays_are_taken_as_the_binary_models_take_them(digits_ovr):
    """An array's columns are features 0..d-1 for every batch method, as for the binary
    models: the same model and the same answers as from a DataFrame. Anything else, or labels
    of another length, is refused before any model changes."""
    import pandas as pd
    from sklearn.datasets import load_digits

    from river_advsvm import InvalidInput

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    from_arrays = OneVsRest(AdvKernelSVM(seed=0))
    from_arrays.learn_many(X[:600], y[:600])
    from_frame, X_test, _ = digits_ovr
    assert list(from_arrays.classifiers) == list(from_frame.classifiers)
    np.testing.assert_array_equal(from_arrays.predict_many(X_test),
                                  from_frame.predict_many(pd.DataFrame(X_test)))
    np.testing.assert_array_equal(from_arrays.predict_proba_many(X_test).to_numpy(),
                                  from_frame.predict_proba_many(pd.DataFrame(X_test)).to_numpy())
    fresh = OneVsRest(AdvKernelSVM(seed=0))
    for X_bad, y_bad in [(X[:5].tolist(), y[:5]), (X[0], y[:1]), (X[:5], y[:4])]:
        with pytest.raises(InvalidInput):
            fresh.learn_many(X_bad, y_bad)
    assert not fresh.classifiers
    with pytest.raises(InvalidInput):
        from_arrays.predict_many(X_test.tolist())
