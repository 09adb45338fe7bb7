"""Hostile and careless input: a clear error before any state changes, or a model that stays
finite; NaN at prediction time is a missing feature."""

from __future__ import annotations

import enum
import json
import math
import pickle
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from conftest import assert_finite, fingerprint
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from river_advsvm import (AdvKernelSVM, AdvLinearSVM, InvalidInput, checkpoint, inputs,
                          schedule)
from river_advsvm.attacks import PGD, ZOO, CarliniWagnerL2
from river_advsvm.inputs import MAX_ABS_VALUE
from river_advsvm.monitor import RobustnessMonitor
from river_advsvm.multiclass import OneVsRest


def trained(model, n=80):
    rng = np.random.default_rng(0)
    for _ in range(n):
        x = {"a": float(rng.random()), "b": float(rng.random())}
        model.learn_one(x, x["a"] > 0.5)
    return model


MODELS = {
    "rf": lambda: trained(AdvKernelSVM(epsilon=0.1, budget=64, seed=1)),
    "truncate": lambda: trained(AdvKernelSVM(budget=16, budget_policy="truncate", seed=1)),
    "linear": lambda: trained(AdvLinearSVM(epsilon=0.1)),
}

BAD_SAMPLES = [
    ({"a": math.nan, "b": 0.1}, True, "not_finite", "'a' is nan"),
    ({"a": math.inf, "b": 0.1}, True, "not_finite", "'a' is inf"),
    ({"a": -math.inf, "new": 1.0}, True, "not_finite", "'a' is -inf"),
    ({"a": 2e15, "b": 0.1}, True, "too_large", "'a' is 2000000000000000.0"),
    ({"a": 10**5000, "b": 0.1}, True, "too_large", "about 5000 digits"),
    ({"a": 1.0, "b": "x"}, True, "not_a_number", "'b' is 'x' (a str)"),
    ({"a": np.str_("0.5"), "b": 0.1}, True, "not_a_number", "'a' is '0.5' (a str)"),
    ({"a": None, "b": 0.1}, True, "not_a_number", "'a' is None"),
    ({"a": [1.0], "b": 0.1}, True, "not_a_number", "'a' is [1.0] (a list)"),
    ({"a": {"nested": 1.0}}, True, "not_a_number", "'a' is {'nested': 1.0} (a dict)"),
    ({"a": 1 + 2j}, True, "not_a_number", "(a complex)"),
    # numpy's own objects in plain words, not in numpy's repr
    ({"a": np.array([1.0]), "b": 0.1}, True, "not_a_number", "'a' is an array of shape (1,);"),
    ({"a": np.datetime64("2020-01-01")}, True, "not_a_number",
     "'a' is 2020-01-01 (a numpy datetime64)"),
    ({"a": 0.5, object(): 0.1}, True, "bad_name", "feature name"),
    ({"a": 0.5, math.nan: 0.1}, True, "bad_name", "feature name nan"),
    ({"a": 0.5, "x" * 5000: 0.1}, True, "bad_name", "longer than"),
    # ints Python refuses to write out (past 4,300 digits), alone and in a tuple
    ({"a": 0.5, 10**5000: 0.1}, True, "bad_name", "about 5000 digits is too long"),
    ({"a": 0.5, (1, -(10**5000)): 0.1}, True, "bad_name", "about 5000 digits is too long"),
    ([0.5, 0.1], True, "bad_shape", "dict"),
    ({"a": 0.5, "b": 0.1}, "maybe", "third_class", "third class"),
    ({"a": 0.5, "b": 0.1}, None, "bad_label", "label None"),
    ({"a": 0.5, "b": 0.1}, math.nan, "bad_label", "label nan"),
    ({"a": 0.5, "b": 0.1}, [True], "bad_label", "label [True]"),
    # Labels a checkpoint could not hold (a str of megabytes, an int JSON cannot write).
    ({"a": 0.5, "b": 0.1}, "y" * 1001, "bad_label", "longer than 1000 characters"),
    ({"a": 0.5, "b": 0.1}, 2**63, "bad_label", "must fit in 64 bits"),
    ({"a": 0.5, "b": 0.1}, -2**63 - 1, "bad_label", "must fit in 64 bits"),
    ({"a": 0.5, "b": 0.1}, 10**500, "bad_label", "must fit in 64 bits"),
]


class Mail(str, enum.Enum):  # a str Enum, whose str() is 'Mail.SPAM', not 'spam'
    SPAM = "spam"
    HAM = "ham"
    EGGS = "eggs"


@pytest.mark.parametrize("make", [AdvLinearSVM, lambda: AdvKernelSVM(warm_up=5, seed=0),
                                  lambda: OneVsRest(AdvLinearSVM())])
def test_str_enum_labels_are_the_strings_they_are(make):
    """A label that is a str (a `(str, Enum)` member) is the text it holds: str() of such a
    member is its qualified name, which the model took as the label, and predicted
    'Mail.SPAM' for Mail.SPAM (equal to 'spam'): accuracy 0."""
    model = make()
    labels = list(Mail) if isinstance(model, OneVsRest) else [Mail.SPAM, Mail.HAM]
    for i in range(60):
        model.learn_one({i % len(labels): 1.0}, labels[i % len(labels)])
    for i, label in enumerate(labels):
        predicted = model.predict_one({i: 1.0})
        assert predicted == label and type(predicted) is str


@pytest.mark.parametrize("labels", [("n" * 1000, "p" * 1000), (-(2**63), 2**63 - 1)])
def test_the_longest_labels_learn_save_and_load(labels, tmp_path):
    """A label at the bound is learned, saved and read back: a model that learned never makes
    a checkpoint that cannot be written or read."""
    model = AdvKernelSVM(seed=0, warm_up=5, budget=16)
    for i in range(12):
        model.learn_one({"a": i / 12, "b": (i % 3) / 3}, labels[i % 2])
    model.save(tmp_path / "m.ckpt")
    again = AdvKernelSVM.load(tmp_path / "m.ckpt")
    assert again.classes == model.classes == tuple(sorted(labels))
    assert again.predict_one({"a": 0.5, "b": 0.3}) == model.predict_one({"a": 0.5, "b": 0.3})


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
@pytest.mark.parametrize("x, y, code, message", BAD_SAMPLES)
def test_learn_one_refuses_bad_input_and_changes_nothing(make, x, y, code, message):
    model = make()
    before, pickled = fingerprint(model), pickle.dumps(model)
    with pytest.raises(InvalidInput) as error:
        model.learn_one(x, y)
    assert error.value.code == code
    assert message in str(error.value)
    assert "np." not in str(error.value)  # no numpy reprs in messages
    assert fingerprint(model) == before
    assert pickle.dumps(model) == pickled  # nothing else either, a lookup's cache included


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_learn_many_refuses_a_batch_with_one_bad_row(make):
    model = make()
    before = fingerprint(model)
    X = pd.DataFrame({"a": [0.1, 0.2, np.nan], "b": [0.3, 0.4, 0.5], "c": [1.0, 2.0, 3.0]})
    # (Which row, by position: a batch of thousands was refused naming the feature alone.)
    with pytest.raises(InvalidInput, match=r"^row 2 of the batch \(counting from 0\): "
                                           "feature 'a' is nan"):
        model.learn_many(X, pd.Series([True, False, True]))
    with pytest.raises(InvalidInput, match="'b' is 'y'"):
        model.learn_many(pd.DataFrame({"a": [0.1, 0.2], "b": [1.0, "y"]}), [True, False])
    with pytest.raises(InvalidInput, match="labels"):
        model.learn_many(pd.DataFrame({"a": [0.1]}), pd.Series([True, False]))
    with pytest.raises(InvalidInput, match="third class"):
        model.learn_many(pd.DataFrame({"a": [0.1, 0.2]}), pd.Series([True, "other"]))
    # (A list of dicts names the row too.)
    with pytest.raises(InvalidInput, match=r"^row 1 of the batch \(counting from 0\): "
                                           "feature 'q' is inf"):
        model.learn_many([{"a": 0.1}, {"q": math.inf}], [True, False])
    assert fingerprint(model) == before


BATCH_LABELS = {  # what is not one label per row, and what `list(y)` made of it
    "a one-column DataFrame": pd.DataFrame({"label": [True]}),  # its column name, 'label'
    "a str": "ab",  # its characters
    "a bool": True,  # 'bool' object is not iterable (TypeError)
    "a 2-d array": np.array([[True]]),
    "a dict": {True: 1},  # its keys
}


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
@pytest.mark.parametrize("what", BATCH_LABELS)
@pytest.mark.parametrize("method", ["learn_many", "decision_then_learn_many",
                                    "predict_proba_then_learn_many", "certified_radius_many"])
def test_batch_labels_must_be_a_sequence_of_labels(make, what, method):
    """`y` of a batch is one label per row (a list, a 1-d array, a Series). A one-column
    DataFrame was read as its column names: one row learned the label 'label'; a str was
    read as its characters."""
    model = make()
    before = fingerprint(model)
    y = BATCH_LABELS[what]
    n = len(y) if isinstance(y, str) else 1
    X = pd.DataFrame({"a": [0.1] * n, "b": [0.9] * n})
    with pytest.raises(InvalidInput, match="one label per row") as error:
        getattr(model, method)(X, y)
    assert error.value.code == "bad_shape"
    assert fingerprint(model) == before


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_nan_at_prediction_time_is_a_missing_feature(make):
    model = make()
    x = {"a": 0.7, "b": math.nan}
    assert model.decision_one(x) == model.decision_one({"a": 0.7})
    assert model.predict_proba_one(x) == model.predict_proba_one({"a": 0.7})
    assert model.decision_gradient_one(x).keys() == {"a"}
    frame = pd.DataFrame({"a": [0.7, 0.2], "b": [math.nan, 0.4]})
    filled = pd.DataFrame({"a": [0.7, 0.2], "b": [0.0, 0.4]})
    np.testing.assert_array_equal(model.decision_many(frame), model.decision_many(filled))
    before = fingerprint(model)
    model.predict_one(x)
    assert fingerprint(model) == before
    for method in (model.predict_one, model.predict_proba_one, model.decision_one):
        with pytest.raises(InvalidInput, match="'a' is inf"):
            method({"a": math.inf})
    with pytest.raises(InvalidInput, match="finite"):
        model.decision_many(np.array([[0.1, np.inf]]))


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_inputs_at_the_bound_keep_every_number_finite(make):
    model = make()
    for sign in (1, -1):
        for _ in range(20):
            x = {"a": sign * MAX_ABS_VALUE, "b": -sign * MAX_ABS_VALUE, "c": 5e-324}
            model.learn_one(x, True)
            model.learn_one({"a": 0.1, "b": 0.2}, False)
    checks = [model.decision_one({"a": MAX_ABS_VALUE}), model.decision_one({"a": 0.3})]
    checks += list(model.predict_proba_one({"a": -MAX_ABS_VALUE, "b": 1.0}).values())
    assert all(math.isfinite(v) for v in checks)
    assert "NaN" not in fingerprint(model) and "Infinity" not in fingerprint(model)


@pytest.mark.parametrize("cls", [AdvKernelSVM, AdvLinearSVM])
def test_the_largest_steps_keep_every_number_finite_and_larger_are_refused(cls):
    big = schedule.MAX_STEP
    for name in ("step_size", "bias_step_size"):
        with pytest.raises(ValueError, match=f"{name} must be at most"):
            cls(**{name: big * 1.01})
    model = cls(step_size=big, bias_step_size=big, regularization=1e-300, epsilon=0.1)
    rng = np.random.default_rng(0)
    for _ in range(400):
        x = {"a": float(rng.random()) * MAX_ABS_VALUE ** 0.5, "b": float(rng.random())}
        model.learn_one(x, bool(x["b"] > 0.5))
    assert math.isfinite(model.decision_one({"a": 1.0, "b": 0.5}))
    assert "NaN" not in fingerprint(model) and "Infinity" not in fingerprint(model)


@pytest.mark.parametrize("make, name", [
    *((AdvKernelSVM, name) for name in ("budget", "warm_up", "seed", "adversary_steps",
                                        "reprocess", "max_features", "epsilon", "step_size",
                                        "bias_step_size", "regularization")),
    *((AdvLinearSVM, name) for name in ("max_features", "epsilon", "step_size")),
    *((attack, "steps") for attack in (PGD, CarliniWagnerL2)),
    (ZOO, "coordinates"),
    *((lambda **kw: RobustnessMonitor(AdvLinearSVM(), **kw), name)
      for name in ("window_size", "min_sampled", "max_alerts", "sample_rate")),
])
def test_true_is_not_a_number_of_anything(make, name):
    """`True == 1` to Python; as a count or a radius it is a mistake, refused by name."""
    with pytest.raises((ValueError, TypeError), match=name):
        make(**{name: True})


def test_max_features_refuses_the_sample_that_would_exceed_it():
    model = AdvKernelSVM(budget=8, max_features=5, gamma=1.0, seed=0)
    model.learn_one({"a": 1.0, "b": 1.0}, True)
    before = fingerprint(model)
    with pytest.raises(InvalidInput) as error:
        model.learn_one({f"x{i}": 1.0 for i in range(4)}, False)
    assert error.value.code == "too_many_features"
    assert "FeatureHasher" in str(error.value)  # (what to do on a stream of words)
    assert fingerprint(model) == before
    # Zero values cost nothing: names that only ever come with 0 are never stored...
    model.learn_one({**{f"zero{i}": 0.0 for i in range(100)}, "a": 0.5}, False)
    assert model.n_inputs == 2
    # ... and neither are names seen only at prediction time...
    model.predict_one({f"p{i}": 1.0 for i in range(5)})
    assert model.n_inputs == 2
    # ... of which one sample may bring at most max_features, as in learning.
    with pytest.raises(InvalidInput, match="6 inputs the model does not know"):
        model.predict_one({f"p{i}": 1.0 for i in range(6)})


@pytest.mark.parametrize("make", [lambda: AdvLinearSVM(max_features=3),
                                  lambda: AdvKernelSVM(gamma=1.0, max_features=3, seed=0),
                                  lambda: AdvKernelSVM(max_features=3, warm_up=5, seed=0)])
def test_a_batch_with_a_predicted_row_over_max_features_changes_nothing(make):
    """decision_then_learn_many learned (or held) the rows before a row only predicted that
    brought more than max_features unknown inputs, then refused that row: the batch is refused
    whole, before anything changes, as its docstring says."""
    model = make()
    model.learn_one({"a": 1.0}, True)
    model.learn_one({"a": 0.0}, False)
    before = fingerprint(model)
    rows = [{"a": 0.5}, {f"x{i}": 1.0 for i in range(4)}]
    for call in (model.decision_then_learn_many, model.predict_proba_then_learn_many):
        with pytest.raises(InvalidInput, match="4 inputs the model does not know"):
            call(rows, [True, None])
        assert fingerprint(model) == before


@pytest.mark.parametrize("make", [lambda: AdvLinearSVM(max_features=3),
                                  lambda: AdvKernelSVM(gamma=1.0, max_features=3, seed=0),
                                  lambda: AdvKernelSVM(gamma=1.0, max_features=3, seed=0,
                                                       budget_policy="compact"),
                                  lambda: AdvKernelSVM(max_features=3, warm_up=5, seed=0)])
def test_max_features_bounds_the_unknown_inputs_of_each_row_of_a_batch(make):
    """A batch's rows may each bring other inputs the model does not know: the bound is on
    each sample, as `decision_one` applies it, not on all of a batch's (a frame of two rows of
    two unknown inputs each was refused, 'the sample has 4 inputs'). A sample over the bound
    is refused before the model starts as after, as `decision_then_learn_many` refuses it."""
    model = make()
    over = {f"x{i}": 1.0 for i in range(4)}
    for call in (model.decision_one, model.predict_one, model.predict_proba_one):
        with pytest.raises(InvalidInput, match="4 inputs the model does not know"):
            call(over)
    model.learn_one({"a": 1.0}, True)
    model.learn_one({"a": -1.0}, False)
    with pytest.raises(InvalidInput, match="4 inputs the model does not know"):
        model.decision_one(over)
    frame = pd.DataFrame({"w": [1.0, 0.0], "x": [1.0, 0.0], "y": [0.0, 1.0], "z": [0.0, 1.0],
                          "a": [0.5, -0.5]})
    rows = frame.to_dict("records")
    one_by_one = [model.decision_one(x) for x in rows]
    np.testing.assert_allclose(model.decision_many(frame), one_by_one, rtol=1e-6)
    assert model.predict_many(frame).tolist() == [model.predict_one(x) for x in rows]
    assert len(model.predict_proba_many(frame)) == 2
    with pytest.raises(InvalidInput, match="4 inputs the model does not know"):
        model.decision_many(pd.DataFrame([over]))


@pytest.mark.parametrize("make", [lambda: AdvLinearSVM(),
                                  lambda: AdvKernelSVM(gamma=0.5, seed=0),
                                  lambda: AdvKernelSVM(warm_up=4, seed=0)])
@pytest.mark.parametrize("as_frame", [False, True])
def test_nan_in_a_row_only_predicted_is_a_missing_input_as_in_decision_one(make, as_frame):
    """In a test-then-train batch, a row with label None is only predicted: its NaN is a
    missing input, as `decision_one` reads it, and each margin is the one a
    decision_one-then-learn_one loop gives. In a row to learn, NaN is refused, with nothing
    changed."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(12, 3))
    labels = [bool(v) for v in X[:, 0] > 0]
    labels[2] = labels[7] = None
    X[2, 1] = X[7, 0] = X[7, 2] = np.nan
    batched, looped = make(), make()
    rows = [{f"x{j}": float(v) for j, v in enumerate(row)} for row in X]
    batch = pd.DataFrame(X, columns=["x0", "x1", "x2"]) if as_frame else rows
    got = batched.decision_then_learn_many(batch, labels)
    want = []
    for x, label in zip(rows, labels):
        want.append(looped.decision_one(x))
        if label is not None:
            looped.learn_one(x, label)
    assert got.tolist() == want
    assert fingerprint(batched) == fingerprint(looped)
    probabilities = make().predict_proba_then_learn_many(batch, labels)
    assert np.isfinite(probabilities.to_numpy()).all()

    before = fingerprint(batched)
    X[4, 1] = np.nan  # a labelled row
    batch = (pd.DataFrame(X, columns=["x0", "x1", "x2"]) if as_frame else
             [{f"x{j}": float(v) for j, v in enumerate(row)} for row in X])
    for call in (batched.decision_then_learn_many, batched.predict_proba_then_learn_many):
        with pytest.raises(InvalidInput, match="x1"):
            call(batch, labels)
        assert fingerprint(batched) == before


@pytest.mark.parametrize("batch", [False, True])
def test_the_warm_up_counts_every_input_it_holds_against_max_features(batch):
    """gamma='scale' fits a bandwidth for every input of the rows it holds, zero-valued ones
    too, but only nonzero inputs were counted against max_features while the rows were taken:
    a batch of rows with 5 inputs each (2 nonzero) passed max_features=3 and made a model whose
    own checkpoint was refused ('too many fitted bandwidths'); one row at a time, the first row
    passed and the second, the same, was refused. Every input of a row to be held counts."""
    model = AdvKernelSVM(max_features=3, warm_up=3, seed=0)
    rows = [{"a": float(i), "e": float(i * i), "b": 0.0, "c": 0.0, "d": 0.0} for i in range(1, 5)]
    before = fingerprint(model)
    with pytest.raises(InvalidInput, match="5 inputs") as error:
        if batch:
            model.learn_many(rows, [True, False, True, False])
        else:
            model.learn_one(rows[0], True)
    assert error.value.code == "too_many_features"
    assert fingerprint(model) == before
    # Within the bound, the model and its checkpoint are whole.
    model = AdvKernelSVM(max_features=5, warm_up=3, seed=0)
    if batch:
        model.learn_many(rows, [True, False, True, False])
    else:
        for row, y in zip(rows, [True, False, True, False]):
            model.learn_one(row, y)
    assert len(model.fitted_gamma) == 5 and model.n_inputs == 2
    restored = AdvKernelSVM.from_checkpoint(*checkpoint.loads(checkpoint.dumps(
        *model.to_checkpoint())))
    assert fingerprint(restored) == fingerprint(model)


@pytest.mark.parametrize("extra, accepted", [(1.0, True), (2.0, False)])
def test_a_batch_that_ends_the_warm_up_counts_inputs_as_a_learn_one_loop_does(extra, accepted):
    """Held rows count every input against max_features, but when the warm-up ends only their
    nonzero ones take a column: a later row may bring others. `learn_many` counted the held
    rows' zero-valued inputs for the rows after the warm-up too, and refused a batch that a
    `learn_one` loop learns (the loop refuses the same row, and learn_many the batch, when it
    brings one input too many)."""
    rows = [{"a": 1.0, "b": 0.0, "c": 0.0}, {"a": 2.0, "b": 0.0, "c": 0.0}, {"a": 0.5},
            {"a": 1.0, "d": 1.0, "e": 1.0}, {"a": 1.0, "f": extra - 1.0}]
    labels = [True, False, True, False, True]
    make = lambda: AdvKernelSVM(max_features=3, warm_up=3, seed=0, budget=4)  # noqa: E731
    looped, batched = make(), make()
    for row, y in zip(rows[:4], labels[:4]):
        looped.learn_one(row, y)
    before = fingerprint(batched)
    if accepted:
        looped.learn_one(rows[4], labels[4])
        batched.learn_many(rows, labels)
        assert looped.n_inputs == 3 and fingerprint(batched) == fingerprint(looped)
    else:
        for learn, model, x, y in [(AdvKernelSVM.learn_one, looped, rows[4], labels[4]),
                                   (AdvKernelSVM.learn_many, batched, rows, labels)]:
            with pytest.raises(InvalidInput, match="4 inputs, more than max_features=3"):
                learn(model, x, y)
        assert fingerprint(batched) == before


@pytest.mark.parametrize("policy", ["merge", "compact"])
def test_many_fresh_names_in_one_sample_cost_memory_only_within_the_bound(policy):
    model = AdvKernelSVM(budget=32, max_features=1000, budget_policy=policy, gamma=1.0, seed=0)
    model.learn_one({"a": 1.0}, True)
    hostile = {f"n{i}": 1.0 for i in range(100_000)}
    with pytest.raises(InvalidInput, match="max_features=1000"):
        model.learn_one(hostile, False)
    with pytest.raises(InvalidInput, match="100000 inputs the model does not know"):
        model.predict_one(hostile)
    # Inference on up to max_features unknown inputs is allowed, in bounded memory, and stores
    # nothing (the random features weigh them a chunk at a time).
    assert math.isfinite(model.decision_one({f"n{i}": 1.0 for i in range(1000)}))
    assert model.n_inputs == 1
    for i in range(999):  # up to the bound, one fresh name per sample
        model.learn_one({f"m{i}": 1.0}, i % 2 == 0)
    stored = model._store._S if policy == "merge" else model._store._omega
    assert stored.shape[1 if policy == "merge" else 0] <= 1024  # max_features, padded


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_tiny_first_samples_fall_back_to_a_sane_gamma_with_a_warning(kernel):
    model = AdvKernelSVM(kernel=kernel, warm_up=5, seed=0)
    with pytest.warns(UserWarning, match="falling back to gamma = 1/d"):
        for i in range(5):
            model.learn_one({"a": 1e-160 * (i % 2)}, bool(i % 2))
    assert model.fitted_gamma == pytest.approx(1.0)
    assert math.isfinite(model.decision_one({"a": 1e-160}))
    assert math.isfinite(model.decision_one({"a": 3.0}))


def test_scale_keeps_the_own_range_of_an_input_in_other_units():
    """An age beside amounts of money keeps its own range (the label depends on it); a pixel
    lit now and then is floored at the median range, as are inputs of the same kind."""
    rng = np.random.default_rng(0)
    n = 1600
    X = pd.DataFrame({"age": rng.integers(20, 81, n).astype(float),
                      "salary": rng.uniform(2e4, 1.5e5, n), "loan": rng.uniform(0, 5e5, n),
                      "pixel": np.where(rng.random(n) < 0.1, 0.004, 0.0)})
    y = (X["age"] < 40) | (X["age"] >= 60)
    model = AdvKernelSVM(seed=0)
    margins = model.decision_then_learn_many(X, y)
    warm = X.iloc[:100]
    ranges = warm.max() - warm.min()
    median = float(np.median(ranges))
    fitted = model.fitted_gamma
    # gamma_j is proportional to 1 / (range_j)^2, the range floored where the rule says so.
    salary = ranges["salary"]
    assert fitted["age"] / fitted["salary"] == pytest.approx((salary / ranges["age"]) ** 2)
    assert fitted["pixel"] / fitted["salary"] == pytest.approx((salary / median) ** 2)
    assert fitted["loan"] / fitted["salary"] == pytest.approx((salary / ranges["loan"]) ** 2)
    last = slice(n // 2, None)  # the label is learned from the age alone
    assert ((margins[last] > 0) == y[last]).mean() > 0.9


def test_many_inputs_in_small_units_take_the_median_range_and_say_so():
    """More than sqrt(d) inputs in small units beside amounts of money are measured as inputs
    of one kind that barely vary (a noisy background's pixels), with a warning that says what
    to do if they are in other units."""
    rng = np.random.default_rng(0)
    X = np.hstack([rng.uniform(0, 50, (150, 8)), rng.uniform(0, 1e5, (150, 12))])
    model = AdvKernelSVM(seed=0)
    with pytest.warns(UserWarning, match="8 inputs, mostly nonzero, varied by less than a tenth"
                                         ".*StandardScaler in front or pass gamma"):
        model.learn_many(X, X[:, 0] > 25)
    widths = np.array([model.fitted_gamma[j] for j in range(20)])
    spread = np.ptp(X[:100], axis=0)
    np.testing.assert_allclose(widths[:8], (widths * spread**2)[8:].max() / np.median(spread)**2,
                               rtol=1e-9)


@pytest.mark.parametrize("scaled", ["inverted", "to [-1, 1]"])
def test_images_on_a_background_not_at_0_learn_the_same_model(digits_1v7, scaled):
    """Pixels inverted (white paper: the background is 1) or scaled to [-1, 1] (the
    background is -1) are the same images to an RBF kernel with the same widths in units of
    the pixels' range, so gamma='scale' learns the same model. A border pixel that a few
    warm-up strokes touched is nonzero in most samples there, as an input in other units is:
    taking its small range as its unit gave it a width 256 times the others' on these digits
    (and on MNIST, a model an attack of 0.1 on those pixels defeated)."""
    X_train, X_test, y_train, _ = digits_1v7
    X_train = X_train.copy()
    X_train[[3, 40, 77], 0] = 1 / 16  # a corner pixel, 0 in every digit, touched 3 times
    scale = 1.0 if scaled == "inverted" else 2.0

    def transformed(X):
        return 1.0 - X if scaled == "inverted" else 2.0 * X - 1.0

    plain, other = AdvKernelSVM(seed=0), AdvKernelSVM(seed=0)
    plain.learn_many(X_train, y_train)
    other.learn_many(transformed(X_train), y_train)
    widths = np.array(list(other.fitted_gamma.values()))
    np.testing.assert_allclose(widths * scale**2, list(plain.fitted_gamma.values()), rtol=1e-6)
    np.testing.assert_allclose(other.decision_many(transformed(X_test)),
                               plain.decision_many(X_test), rtol=1e-4, atol=1e-5)


def test_a_constant_warm_up_falls_back_with_a_warning():
    model = AdvKernelSVM(warm_up=4, seed=0)
    with pytest.warns(UserWarning, match="do not vary"):
        for i in range(4):
            model.learn_one({"a": 2.0, "b": 0.0}, bool(i % 2))
    assert model.fitted_gamma == pytest.approx(0.5)  # 1/d over the two inputs seen


# -- fuzzing ----------------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)
values = st.one_of(
    finite, st.floats(), st.integers(), st.integers(min_value=-(10**40), max_value=10**40),
    st.booleans(), st.none(), st.text(max_size=3), st.just(-0.0), st.just(5e-324),
    st.sampled_from([1e308, -1e308, 1e-310, MAX_ABS_VALUE, np.float32(1.5), np.int64(7),
                     np.bool_(True), np.float64(np.nan)]),
    st.lists(finite, max_size=2), st.dictionaries(st.text(max_size=2), finite, max_size=2),
)
names = st.one_of(
    st.text(max_size=5), st.integers(min_value=-5, max_value=50), st.booleans(), finite,
    st.just(math.nan), st.just(math.inf), st.tuples(st.text(max_size=2), st.integers(0, 3)),
    st.just(np.int64(3)), st.just(np.str_("np")), st.just(b"bytes"), st.just(None),
)
samples = st.dictionaries(names, values, max_size=6)


def kernel_model():
    model = AdvKernelSVM(budget=16, warm_up=3, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trained(model, n=6)
    return model


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(x=samples, y=st.sampled_from([True, False]))
def test_fuzzed_dicts_are_refused_cleanly_or_learned_finitely(x, y):
    for model in (kernel_model(), trained(AdvLinearSVM())):
        before = fingerprint(model)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.learn_one(x, y)
        except InvalidInput as error:
            assert error.code in {"not_a_number", "not_finite", "too_large", "bad_name"}
            assert fingerprint(model) == before
        assert_finite(model)
        try:
            model.predict_proba_one(x)  # at prediction time NaN is allowed, as missing
        except InvalidInput:
            pass


# Values the shortcut of `dict_values` must treat exactly as the general path: numbers of every
# kind Python and numpy have, and things that only look like numbers.
odd_values = st.sampled_from([
    Decimal("1.5"), Fraction(1, 3), np.array(2.0), np.array([2.0]), np.array(True),
    np.array("a"), np.array(Decimal(1), dtype=object), 1 + 2j, np.complex128(1),
    np.float16(0.5), np.longdouble(2.5), np.uint8(200), np.str_("1.5"), "1.5", b"1", None,
    10**400, -(10**400), 2**70, float("inf"), np.datetime64(1, "s"),
])
numpy_values = st.one_of(
    finite.map(np.float64), st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.floats(width=32, allow_nan=False).map(np.float32), st.integers(0, 255).map(np.uint8),
    st.sampled_from([np.float64(np.inf), np.float64(2e15), np.int64(2**62 + 1)]))
shortcut_values = st.one_of(values, odd_values, numpy_values)


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(x=st.dictionaries(st.text(max_size=3), shortcut_values, max_size=8),
       missing_ok=st.booleans())
@example(x={"a": -0.0, "b": np.array(2.0), "c": Fraction(1, 3)}, missing_ok=False)
def test_the_dict_shortcut_accepts_and_converts_exactly_as_the_general_path(x, missing_ok):
    names = list(x)
    try:
        expected = inputs._checked_values(names, list(x.values()), missing_ok)
    except InvalidInput:
        expected = None
    fast = inputs._plain_floats(x)
    if fast is not None:  # the shortcut only ever takes what the general path accepts as is
        assert expected is not None and expected[0] == names
        assert fast.dtype == np.float64 and fast.tobytes() == expected[1].tobytes()
    got = None
    try:
        got = inputs.dict_values(x, missing_ok)
    except InvalidInput:
        assert expected is None
    if got is not None:
        assert expected is not None and got[0] == expected[0]
        assert got[1].tobytes() == expected[1].tobytes()


frames = st.integers(min_value=1, max_value=4).flatmap(
    lambda width: st.lists(st.lists(st.one_of(finite, st.floats(), st.sampled_from(
        [1e300, -1e-300, 2e15, 0.0, -0.0])), min_size=width, max_size=width),
        min_size=1, max_size=5))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=frames)
def test_fuzzed_frames_are_refused_cleanly_or_learned_finitely(rows):
    X = pd.DataFrame(rows, columns=[f"c{j}" for j in range(len(rows[0]))])
    y = [i % 2 == 0 for i in range(len(rows))]
    for model in (kernel_model(), trained(AdvLinearSVM())):
        before = fingerprint(model)
        try:
            model.learn_many(X, y)
        except InvalidInput as error:
            assert error.code in {"not_finite", "too_large"}
            assert fingerprint(model) == before
        assert_finite(model)


NOT_NUMBERS = {  # a column of each, and how its first value is shown
    "complex": (lambda n: np.full(n, 1 + 2j), "(1+2j) (a complex)"),
    "str": (lambda n: pd.Series(["x"] * n, dtype=object), "'x' (a str)"),
    "Timestamp": (lambda n: pd.Series(pd.Timestamp("2020-01-01"), index=range(n)),
                  "Timestamp('2020-01-01 00:00:00') (a Timestamp)"),
    "Decimal": (lambda n: pd.Series([Decimal("1.5")] * n, dtype=object),
                "Decimal('1.5') (a Decimal)"),
}


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(kinds=st.lists(st.sampled_from(["float", "int", "bool", "Int64"]), min_size=1, max_size=4),
       at=st.integers(0, 4), bad=st.sampled_from(sorted(NOT_NUMBERS)), rows=st.integers(1, 4))
def test_a_frame_refuses_its_non_number_column_by_its_own_name(kinds, at, bad, rows):
    """A frame of numbers and one complex column was refused with `feature 'c0' is (0.5+0j) (a
    complex)`: its matrix made every column complex, and the first column was named."""
    columns = {f"c{j}": pd.Series(np.arange(rows) % 2).astype(kind)
               for j, kind in enumerate(kinds)}
    make, shown = NOT_NUMBERS[bad]
    items = list(columns.items())
    items.insert(min(at, len(items)), ("bad", make(rows)))
    X = pd.DataFrame(dict(items))
    model = trained(AdvLinearSVM())
    before = fingerprint(model)
    for call in (lambda: model.learn_many(X, [True] * rows), lambda: model.predict_many(X)):
        with pytest.raises(InvalidInput) as refused:
            call()
        assert refused.value.code == "not_a_number"
        # (Every value of the column is bad: the first row is named.)
        assert str(refused.value).startswith(
            f"row 0 of the batch (counting from 0): feature 'bad' is {shown};"), str(refused.value)
    assert fingerprint(model) == before


# -- the feature index ------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(known=st.lists(st.integers(0, 12), unique=True, max_size=8),
       rows=st.lists(st.dictionaries(st.integers(0, 12), st.sampled_from([0.0, 1.5, -2.0]),
                                     max_size=10), min_size=1, max_size=4))
def test_split_row_matches_a_lookup_name_by_name_also_when_cached(known, rows):
    index = inputs.FeatureIndex()
    index.add(known, index.hash_names(known))
    # Every list of names twice (the second lookup comes from the cache), then again once the
    # index has learned every name (the cache must not answer for the smaller index).
    later = [n for x in rows for n in x if n not in index.position]
    later = list(dict.fromkeys(later))
    for x in rows * 2 + [None] + rows:
        if x is None:
            index.add(later, index.hash_names(later))
            continue
        names, row = list(x), np.array(list(x.values()))
        v, u, u_names = index.split_row(names, row)
        expected_v = np.zeros(len(index))
        for name, value in x.items():
            if name in index.position:
                expected_v[index.position[name]] = value
        unknown = [(n, value) for n, value in x.items() if n not in index.position and value]
        assert v.tolist() == expected_v.tolist()
        assert u_names == [n for n, _ in unknown] and u.tolist() == [value for _, value in unknown]
        V, all_unknown, U = index.dense(names, row)
        assert V[0].tolist() == expected_v.tolist()
        assert all_unknown == [n for n in x if n not in index.position]
        assert U[0].tolist() == [x[n] for n in all_unknown]


def test_pandas_na_is_a_missing_value_as_nan_is():
    """A nullable column's `pd.NA` is NaN: a missing input at prediction time (in a dict and in
    a frame of pandas' nullable Float64), refused when learning, with the model unchanged. It
    was refused as 'not a number' at prediction time too."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.random(200), "b": rng.random(200)})
    model = AdvKernelSVM(seed=0)
    model.learn_many(X, X["a"] > 0.5)
    with_na = X.head(4).astype("Float64")
    with_na.iloc[0, 0] = pd.NA
    with_nan = X.head(4).copy()
    with_nan.iloc[0, 0] = np.nan
    pd.testing.assert_frame_equal(model.predict_proba_many(with_na),
                                  model.predict_proba_many(with_nan))
    assert (model.predict_proba_one({"a": pd.NA, "b": 0.3})
            == model.predict_proba_one({"a": np.nan, "b": 0.3}))
    before = fingerprint(model)
    for learn in (lambda: model.learn_one({"a": pd.NA, "b": 0.3}, True),
                  lambda: model.learn_many(with_na, [True] * 4)):
        with pytest.raises(InvalidInput) as caught:
            learn()
        assert caught.value.code == "not_finite"
    assert fingerprint(model) == before


def test_a_masked_array_entry_is_a_missing_value_as_nan_is():
    """A numpy masked array's masked entries are missing: NaN at prediction time, refused when
    learning with the model unchanged. The mask was ignored (the hidden value learned) or
    failed inside numpy."""
    rng = np.random.default_rng(0)
    X = rng.random((200, 3))
    model = AdvKernelSVM(seed=0)
    model.learn_many(X, X[:, 0] > 0.5)
    mask = np.zeros((4, 3), dtype=bool)
    mask[0, 1] = mask[2, 0] = True
    masked = np.ma.array(X[:4], mask=mask)
    with_nan = np.where(mask, np.nan, X[:4])
    assert model.decision_many(masked).tolist() == model.decision_many(with_nan).tolist()
    assert model.decision_many(np.ma.array(X[:4])).tolist() == model.decision_many(X[:4]).tolist()
    before = pickle.dumps(model)
    with pytest.raises(InvalidInput) as caught:
        model.learn_many(masked, [True] * 4)
    assert caught.value.code == "not_finite"
    assert pickle.dumps(model) == before


@pytest.mark.parametrize("name", [None, b"x", math.nan, ("a", None)])
def test_a_name_the_model_cannot_hold_is_refused_in_the_warm_up_as_after_it(name):
    """`predict_one({None: 1.0})` gave a prediction during the warm-up (a vote over the held
    rows) and `bad_name` once the model had started: refused in both, and a zero-valued input
    of that name (absent, for the model) in neither."""
    rng = np.random.default_rng(0)
    warming = AdvKernelSVM(seed=0)
    warming.learn_one({"a": 0.2}, True)
    started = AdvKernelSVM(seed=0)
    for _ in range(150):
        a = float(rng.random())
        started.learn_one({"a": a}, a > 0.5)
    assert not warming._started and started._started
    for model in (warming, started):
        with pytest.raises(InvalidInput) as caught:
            model.predict_one({"a": 0.3, name: 1.0})
        assert caught.value.code == "bad_name"
        with pytest.raises(InvalidInput):
            model.predict_proba_many(pd.DataFrame([[0.3, 1.0]], columns=["a", name]))
        model.predict_one({"a": 0.3, name: 0.0})


def _batch_decisions_with_a_large_gamma():
    model = AdvKernelSVM(gamma=1e10, warm_up=1)
    model.learn_one({0: 1e15, 1: 0.0}, True)
    model.learn_one({0: -1e15, 1: 0.0}, False)
    assert np.isfinite(model.decision_many(np.array([[0.0, 0.0], [1.0, 2.0]]))).all()


def _a_warm_up_beside_a_constant_input_far_from_0():
    model = AdvKernelSVM(warm_up=2)
    model.learn_one({"a": -1e-300, "b": 1e15}, False)
    model.learn_one({"a": 1e-300, "b": 1e15}, True)


def _a_far_row_after_a_clustered_warm_up():
    rng = np.random.default_rng(2)
    centre = rng.normal(size=18) * 1e9
    model = AdvKernelSVM(warm_up=5)
    for i in range(4):
        model.learn_one({j: float(centre[j] + rng.normal() * 5e-6) for j in range(18)}, i % 2 == 0)
    model.learn_one({j: 5e14 for j in range(18)}, True)


def _certificates_of_a_laplacian_model_with_a_tiny_gamma():
    rng = np.random.default_rng(0)
    model = AdvKernelSVM(kernel="laplacian", gamma=1e-200, warm_up=1)
    for i in range(20):
        model.learn_one({0: float(rng.normal()), 1: float(rng.normal())}, i % 2 == 0)
    x = {0: 0.3, 1: -0.2}
    for norm in ("l2", "linf"):
        assert model.certified_radius_one(x, model.predict_one(x), norm=norm) > 0


def _linf_certificates_of_inputs_near_the_smallest_floats():
    rng = np.random.default_rng(0)
    model = AdvKernelSVM(gamma=0.01, warm_up=1, budget=1, bias_step_size=1e6, step_size=5000.0,
                         schedule="diminishing", dtype="float64")
    X = rng.normal(size=(60, 2)) * 1e-294
    for x in X:
        model.learn_one({0: x[0], 1: x[1]}, bool(x[0] > 0))
    for x in X[:6]:
        model.certified_radius_one({0: x[0], 1: x[1]}, bool(x[0] > 0), norm="linf")


def _cw_in_a_box_cut_to_one_point():
    from river_advsvm.attacks import CarliniWagnerL2

    model = AdvKernelSVM(gamma=1.0, warm_up=1, dtype="float64")
    for i in range(10):
        model.learn_one({0: 0.0 if i % 2 else 1e15}, i % 2 == 0)
    result = CarliniWagnerL2(bounds=(1e15, 2e15), steps=10).run(
        model, np.array([[1e15]]), [True], progress=False)
    assert np.array_equal(result.adversarial, [[1e15]])


@pytest.mark.parametrize("case", [
    _batch_decisions_with_a_large_gamma, _a_warm_up_beside_a_constant_input_far_from_0,
    _a_far_row_after_a_clustered_warm_up, _certificates_of_a_laplacian_model_with_a_tiny_gamma,
    _linf_certificates_of_inputs_near_the_smallest_floats, _cw_in_a_box_cut_to_one_point],
    ids=lambda case: case.__name__.strip("_"))
def test_values_at_the_ends_of_the_float_range_raise_no_numpy_warning(case):
    """Exponents, squares and ratios past a float's range are +inf where that is the answer
    (a kernel value of 0, a ball that covers everything); numpy's overflow warnings about them
    reached the user."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)  # (the package's own: precision, fallbacks)
        case()


numpy_names = st.one_of(
    st.builds(np.str_, st.text("ab", min_size=1, max_size=3)),
    st.builds(lambda kind, v: kind(v), st.sampled_from([np.int8, np.int64, np.uint16]),
              st.integers(0, 100)),
    st.builds(lambda a, b: (np.str_(a), np.int64(b)), st.text("ab", min_size=1, max_size=2),
              st.integers(0, 9)),
)


@settings(max_examples=60, deadline=None)
@given(name=numpy_names, value=st.sampled_from(["x", None, math.nan, math.inf, 10**16]))
def test_a_numpy_feature_name_is_shown_as_the_name_it_is(name, value):
    """`learn_one({np.str_("a"): "x"}, True)` said "feature np.str_('a') is ...": a numpy
    name is shown as the plain name it equals ('a', 3), as the model holds it."""
    plain = tuple(v.item() for v in name) if isinstance(name, tuple) else name.item()
    with pytest.raises(InvalidInput) as refused:
        AdvLinearSVM().learn_one({name: value}, True)
    message = str(refused.value)
    assert message.startswith(f"feature {plain!r} is "), message
    assert "np." not in message and "\n" not in message


@pytest.mark.parametrize("make", [lambda: AdvKernelSVM(gamma=1.0, seed=0), AdvLinearSVM,
                                  lambda: OneVsRest(AdvKernelSVM(gamma=1.0, seed=0))])
def test_a_sample_weight_is_refused_plainly_and_changes_nothing(make):
    """A weighted stream's `w`, passed on by River's ensembles and one-vs-rest, failed as an
    unexpected argument of an internal base class (after one-vs-rest had made a new label's
    model): every sample weighs the same, said in the model's own name, nothing changed."""
    model = trained(make())
    before = fingerprint(model)
    X = pd.DataFrame({"x0": [0.5, 0.1], "x1": [0.2, 0.9]})
    name = type(model.classifier if isinstance(model, OneVsRest) else model).__name__
    for call in (lambda: model.learn_one({"x0": 0.5, "x1": 0.2}, "new", w=2.0),
                 lambda: model.learn_many(X, pd.Series(["new", True]), w=2.0)):
        with pytest.raises(TypeError, match=f"^{name} learns every sample with the same "
                                            "weight: it takes no 'w' argument other than 1; "
                                            "drop 'w' from the stream"):
            call()
        assert fingerprint(model) == before
    with pytest.raises(TypeError, match=f"^{name}: unexpected argument 'n_samples_seen'$"):
        model.learn_one({"x0": 0.5, "x1": 0.2}, True, n_samples_seen=3)
    assert fingerprint(model) == before


@pytest.mark.parametrize("make", [lambda: AdvKernelSVM(gamma=1.0, seed=0), AdvLinearSVM,
                                  lambda: OneVsRest(AdvKernelSVM(gamma=1.0, seed=0))])
def test_a_weight_of_one_is_every_samples_and_changes_nothing(make):
    """River's progressive validation passes a stream's `w` to a model whose `learn_one`
    takes keywords: a stream weighing every sample 1 stopped the evaluation at its first
    sample. Learned with `w=1` (or a batch of ones), the model is the one learned without."""
    weighted, plain = trained(make()), trained(make())
    X = pd.DataFrame({"x0": [0.5, 0.1], "x1": [0.2, 0.9]})
    weighted.learn_one({"x0": 0.3, "x1": 0.7}, True, w=1.0)
    plain.learn_one({"x0": 0.3, "x1": 0.7}, True)
    weighted.learn_many(X, pd.Series([False, True]), w=pd.Series([1, 1]))
    plain.learn_many(X, pd.Series([False, True]))
    weighted.learn_one({"x0": 0.2, "x1": 0.4}, False, w=None)
    plain.learn_one({"x0": 0.2, "x1": 0.4}, False)
    assert fingerprint(weighted) == fingerprint(plain)
    # Not a weight of 1 for each row: refused, nothing changed.
    for w, batch in [(True, False), ("1", False), ([1, 1], False), ([], True), ([1, 1, 1], True),
                     (np.ones((2, 1)), True), (["1", "1"], True)]:
        with pytest.raises(TypeError, match="takes no 'w' argument other than 1"):
            if batch:
                weighted.learn_many(X, pd.Series([False, True]), w=w)
            else:
                weighted.learn_one({"x0": 0.3, "x1": 0.7}, True, w=w)
    assert fingerprint(weighted) == fingerprint(plain)


@pytest.mark.parametrize("bounds", [(0.5, 0.5), (1, 1), (2.0, 1.0)])
def test_a_box_without_room_is_refused(bounds):
    """`bounds=(a, a)` (a box of width 0: no input could move, every attack and certificate
    divides by its width) is refused as `(lo, hi)` with `lo > hi` is, by the model and the
    attacks alike."""
    from river_advsvm.attacks import PGD
    from river_advsvm.inputs import check_box

    for make in (lambda: check_box(bounds), lambda: AdvKernelSVM(bounds=bounds),
                 lambda: PGD(epsilon=0.1, bounds=bounds)):
        with pytest.raises(ValueError, match="finite lo < hi"):
            make()


def test_a_decimal_feature_is_refused_with_the_conversion_that_helps():
    model = AdvKernelSVM(seed=0)
    for call in (lambda: model.learn_one({"a": Decimal("0.5")}, True),
                 lambda: model.learn_many(pd.DataFrame({"a": [Decimal("0.5")]}), [True])):
        with pytest.raises(InvalidInput, match=r"convert Decimal values with float\(\)$"):
            call()
    assert model.n_learned == 0


def test_an_empty_frame_predicts_nothing_without_a_warning():
    """A DataFrame of no rows and no columns was warned about as a sample with none of the
    learned inputs: it holds no sample."""
    model = AdvKernelSVM(seed=0)
    model.learn_many(pd.DataFrame({"a": np.arange(200) % 5 * 1.0, "b": 1.0}),
                     pd.Series(np.arange(200) % 2 == 0))  # (past the warm-up)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(model.predict_many(pd.DataFrame())) == 0
        assert model.predict_proba_many(pd.DataFrame()).shape == (0, 2)
    with pytest.warns(UserWarning, match="none of the inputs"):  # (a row of them still is)
        model.predict_many(pd.DataFrame({"z": [1.0]}))


def test_a_batch_past_max_features_names_the_first_input_past_it():
    """A batch is refused whole when its rows would take the model past `max_features`; the
    error named neither the row nor the input, where a `learn_one` loop stops at the row."""
    model = AdvKernelSVM(max_features=50, gamma=1.0, seed=0)
    for i in range(43):
        model.learn_one({f"w{i}": 1.0}, i % 2 == 0)
    rows = [{f"w{i}": 1.0} for i in range(43, 53)]
    with pytest.raises(InvalidInput, match=r"53 inputs, more than max_features=50 \(the first "
                                           r"past it: 'w50'\)"):
        model.learn_many(rows, [True] * 10)
    assert model.n_inputs == 43


# -- any parameter value: refused when the model is made, or a model that stays finite -----------

_EXTREME = st.one_of(st.floats(0, 1e308), st.floats(0, 10),
                     st.sampled_from([1e-300, 5e-324, 1e-8, 1e6, 1e10, 1e100]))
_COUNTS = st.one_of(st.integers(0, 1000), st.sampled_from([10**6, 10**6 + 1]))
_GARBAGE = st.one_of(st.floats(), st.integers(-5, 2000),
                     st.sampled_from([math.inf, math.nan, True, None, "x", np.float32(0.5),
                                      np.int64(3), np.array(1.0)]))
_VALUES = {
    "epsilon": _EXTREME, "regularization": _EXTREME, "step_size": _EXTREME,
    "bias_step_size": _EXTREME,
    "gamma": st.one_of(_EXTREME, st.just("scale"),
                       st.dictionaries(st.sampled_from(["a", "b", "c"]), _EXTREME, max_size=3)),
    "budget": _COUNTS, "warm_up": _COUNTS, "adversary_steps": _COUNTS, "reprocess": _COUNTS,
    "averaging": st.one_of(st.none(), _COUNTS), "max_features": _COUNTS,
    "bounds": st.one_of(st.none(), st.tuples(st.floats(-1e308, 0), st.floats(1, 1e308))),
    "norm": st.sampled_from(["l2", "linf"]), "kernel": st.sampled_from(["rbf", "laplacian"]),
    "budget_policy": st.sampled_from(["merge", "truncate", "compact", "compact_slot", "grow"]),
    "schedule": st.sampled_from(["constant", "diminishing"]),
    "adversary": st.sampled_from(["pgd", "closed_form"]),
    "dtype": st.sampled_from(["float32", "float64"]),
}
_LINEAR = ["epsilon", "regularization", "step_size", "bias_step_size", "max_features", "norm",
           "schedule"]


@st.composite
def _parameters(draw, names):
    """One to three parameters at extreme values, and now and then one at any value."""
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    params = {name: draw(_VALUES[name]) for name in chosen}
    if draw(st.integers(0, 4)) == 0:
        params[draw(st.sampled_from(names))] = draw(_GARBAGE)
    return params


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(kind=st.sampled_from(["kernel", "linear"]), data=st.data(),
       scale=st.sampled_from([1.0, 1e3]), seed=st.integers(0, 3))
def test_any_parameters_are_refused_up_front_or_learn_a_finite_model(kind, data, scale, seed):
    if kind == "linear":
        cls, params = AdvLinearSVM, data.draw(_parameters(_LINEAR))
    else:
        cls, params = AdvKernelSVM, {"budget": 32, "seed": 0,
                                     **data.draw(_parameters(list(_VALUES)))}
    try:
        model = cls(**params)
    except (ValueError, TypeError):
        return
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(60):
            x = {"a": float(rng.random() * scale), "b": float(rng.random() * scale)}
            try:
                model.learn_one(x, x["a"] > 0.5 * scale)
            except InvalidInput as error:  # outside the bounds given, or past max_features
                assert error.code in ("invalid_input", "too_many_features"), error.code
        for x in ({"a": 0.3, "b": 0.9}, {"a": -2.0}, {"a": 0.5}):
            try:
                assert math.isfinite(model.decision_one(x))
            except InvalidInput as error:
                assert error.code in ("too_many_features", "invalid_input"), error.code
    meta, arrays = model.to_checkpoint()
    json.dumps(meta, allow_nan=False)
    assert all(np.isfinite(a).all() for a in arrays.values() if a.dtype.kind == "f")
