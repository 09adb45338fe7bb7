"""Properties every attack keeps on any input: the box, the ball, and the caller's data."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from river_advsvm import AdvKernelSVM, AdvLinearSVM, InvalidInput
from river_advsvm.inputs import MAX_ABS_VALUE
from river_advsvm.attacks import FGSM, PGD, ZOO, CarliniWagnerL2, NoGradientWarning
from river_advsvm.attacks.cw import MAX_CONST, ConstantSearch

D = 4


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    X = rng.random((150, D))
    y = np.sin(5 * X[:, 0]) + X[:, 1] > 0.8
    model = AdvKernelSVM(budget=64, seed=0)
    model.learn_many(X, y)
    return model


def make_attack(kind: str, epsilon: float, norm: str, bounds):
    """Each attack, cheap enough for property tests (few steps)."""
    if kind == "fgsm":
        return FGSM(epsilon=epsilon, norm=norm, bounds=bounds)
    if kind == "pgd":
        return PGD(epsilon=epsilon, norm=norm, steps=3, random_start=True, seed=1, bounds=bounds)
    if kind == "cw":
        return CarliniWagnerL2(epsilon=epsilon, steps=8, search_steps=2, bounds=bounds)
    return ZOO(epsilon=epsilon, steps=4, search_steps=2, coordinates=2, seed=1, bounds=bounds)


KINDS = ["fgsm", "pgd", "cw", "zoo"]
NORM_OF = {"cw": ["l2"], "zoo": ["l2"], "fgsm": ["linf", "l2"], "pgd": ["linf", "l2"]}


@st.composite
def problems(draw):
    kind = draw(st.sampled_from(KINDS))
    norm = draw(st.sampled_from(NORM_OF[kind]))
    boxed = draw(st.booleans())
    lo = draw(st.floats(-2, 0.5)) if boxed else -3.0
    hi = lo + draw(st.floats(0.05, 3.0)) if boxed else 3.0
    n = draw(st.integers(1, 5))
    X = draw(hnp.arrays(np.float64, (n, D), elements=st.floats(lo, hi)))
    y = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    epsilon = draw(st.sampled_from([0.0, 1e-3, 0.05, 0.3, 1.0, 4.0]))
    return kind, norm, ((lo, hi) if boxed else None), X, y, epsilon


def assert_in_threat_set(X_adv, X, epsilon, norm, bounds):
    assert X_adv.shape == X.shape
    assert np.isfinite(X_adv).all()
    if bounds is not None:
        assert X_adv.min() >= bounds[0] and X_adv.max() <= bounds[1]
    delta = X_adv - X
    size = np.abs(delta).max(axis=1) if norm == "linf" else np.linalg.norm(delta, axis=1)
    assert (size <= epsilon * (1 + 1e-9) + 1e-12).all(), (size, epsilon)


@settings(max_examples=150, deadline=None)
@given(problem=problems())
def test_batch_attacks_stay_in_box_and_ball_and_leave_inputs_alone(model, problem):
    kind, norm, bounds, X, y, epsilon = problem
    attack = make_attack(kind, epsilon, norm, bounds)
    original = X.copy()
    frame = pd.DataFrame(X, index=np.arange(len(X)) + 7)  # an index of its own
    frame_copy = frame.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoGradientWarning)
        from_array = attack.perturb_many(model, X, y)
        from_frame = attack.perturb_many(model, frame, y)
    np.testing.assert_array_equal(X, original)
    pd.testing.assert_frame_equal(frame, frame_copy)
    assert_in_threat_set(from_array, original, epsilon, norm, bounds)
    np.testing.assert_allclose(from_frame.to_numpy(), from_array)  # deterministic
    # A frame in, a frame out: the same columns and index, so the model reads it as it read X.
    assert list(from_frame.columns) == list(frame.columns)
    assert from_frame.index.equals(frame.index)
    assert from_array is not X


@settings(max_examples=80, deadline=None)
@given(problem=problems())
def test_one_sample_attacks_stay_in_box_and_ball_and_leave_inputs_alone(model, problem):
    kind, norm, bounds, X, y, epsilon = problem
    attack = make_attack(kind, epsilon, norm, bounds)
    # Features in another order and under names of another type than the model learned
    # (unknown ones): the attack must keep each value under its own name.
    x = {i: float(v) for i, v in reversed(list(enumerate(X[0])))}
    x["extra"] = float(X[0, 0])
    original = dict(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoGradientWarning)
        x_adv = attack.perturb_one(model, x, y[0])
    assert x == original
    assert list(x_adv) == list(x)
    names = list(x)
    assert_in_threat_set(
        np.array([[x_adv[k] for k in names]]), np.array([[x[k] for k in names]]), epsilon, norm,
        bounds,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_inputs_outside_the_box_are_refused(model, kind):
    attack = make_attack(kind, 0.1, NORM_OF[kind][0], (0.0, 1.0))
    with pytest.raises(InvalidInput, match="outside bounds"):
        attack.perturb_many(model, np.full((2, D), 1.5), [True, False])


@pytest.mark.parametrize("kind", KINDS)
def test_inputs_past_the_box_by_rounding_are_attacked_from_its_edge(model, kind):
    """A min-max scaler's output holds 1.0000000000000002 for 1: it was refused, with a
    message that printed it as 1, inside the bounds it named. Past the box by rounding (at
    most 1e-9 of its width) an input is taken on the edge; further out the message shows the
    value as it is."""
    rng = np.random.default_rng(3)
    X = rng.random((6, D))
    X[:, 1] = np.nextafter(1.0, 2.0)
    X[2, 0] = -1e-12
    y = [bool(v) for v in model.predict_many(X)]
    norm = NORM_OF[kind][0]
    attack = make_attack(kind, 0.2, norm, (0.0, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoGradientWarning)
        X_adv = attack.perturb_many(model, X, y)
        twin = attack.perturb_many(model, np.clip(X, 0.0, 1.0), y)
    assert X[0, 1] > 1.0  # (the caller's data untouched)
    assert_in_threat_set(X_adv, np.clip(X, 0.0, 1.0), 0.2, norm, (0.0, 1.0))
    np.testing.assert_array_equal(X_adv, twin)
    X[3, 2] = 1.000001
    with pytest.raises(InvalidInput, match=r"range over \[.*, 1\.000001\], outside bounds"):
        attack.perturb_many(model, X, y)


@pytest.mark.parametrize("kind", KINDS)
def test_invalid_values_are_refused_by_the_models_validation(model, kind):
    attack = make_attack(kind, 0.1, NORM_OF[kind][0], None)
    with pytest.raises(InvalidInput):
        attack.perturb_one(model, {0: 0.5, 1: float("nan")}, True)
    with pytest.raises(InvalidInput):
        attack.perturb_many(model, np.zeros((3, D)), [True, False])


@pytest.mark.parametrize("kind", KINDS)
def test_samples_without_inputs_come_back_unchanged(model, kind):
    """A sample of no features (an empty dict, a frame of no columns) has nothing to move; ZOO
    divided its queries per call by the number of coordinates and raised ZeroDivisionError."""
    attack = make_attack(kind, 0.1, NORM_OF[kind][0], (0.0, 1.0))
    X = pd.DataFrame(index=["a", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoGradientWarning)  # (no inputs, no gradient)
        out = attack.perturb_many(model, X, [True, False], progress=False)
        assert out.shape == (2, 0) and list(out.index) == ["a", "b"]
        assert attack.perturb_one(model, {}, True) == {}
    assert attack.last_result.norms.tolist() == [0.0]


def test_constructors_refuse_bad_threat_sets():
    with pytest.raises(ValueError):
        FGSM(epsilon=-0.1)
    with pytest.raises(ValueError):
        PGD(epsilon=None)
    with pytest.raises(ValueError):
        FGSM(norm="l1")
    with pytest.raises(ValueError):
        PGD(bounds=(1.0, 0.0))
    CarliniWagnerL2(epsilon=None)  # minimum-norm attacks need no radius


@pytest.mark.parametrize("make, name", [
    *((attack, "epsilon") for attack in (FGSM, PGD, CarliniWagnerL2, ZOO)),
    (PGD, "step_size"), (PGD, "seed"), (ZOO, "seed"),
    *((attack, name) for attack in (CarliniWagnerL2, ZOO)
      for name in ("confidence", "initial_const", "learning_rate")),
    *((ZOO, name) for name in ("beta1", "beta2", "difference_step")),
])
@pytest.mark.parametrize("value", [True, "0.1", float("inf"), float("nan"), -1, 0.5 + 0j])
def test_a_parameter_that_is_not_a_number_in_range_is_refused_by_name(make, name, value):
    """One sentence naming the parameter, at construction: not a comparison's TypeError, not a
    NaN point or a numpy seed error once the attack runs."""
    if name == "seed" and value == -1:
        value = 1.5  # -1 is refused too; 1.5 is the seed numpy would refuse later
    with pytest.raises(ValueError, match=name):
        make(**{name: value})


@pytest.mark.parametrize("make", [CarliniWagnerL2, ZOO])
def test_the_constant_of_the_search_stays_where_adam_cannot_overflow(make):
    """A first constant of 1e160 was taken: Adam's second moment overflowed, every step went to
    NaN, and every sample read as robust, none as without a gradient (19 of 20 fooled with
    1). The first constant is at most 1e10; from there the search finds the flips, and it never
    raises the constant past 1e10 however many steps fail."""
    with pytest.raises(ValueError, match="initial_const"):
        make(initial_const=1e160)
    rng = np.random.default_rng(7)
    X = rng.uniform(size=(150, 3))
    y = X[:, 0] + X[:, 1] > 1
    model = AdvKernelSVM(seed=0, gamma=3.0)
    model.learn_many(X, y)
    low = make(initial_const=1.0, search_steps=2).run(model, X[:20], y[:20])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow on the way
        high = make(initial_const=MAX_CONST, search_steps=2).run(model, X[:20], y[:20])
    assert high.fooled.sum() >= low.fooled.sum() - 2 and high.fooled.sum() > 10
    search = ConstantSearch(3, 1.0)
    for _ in range(30):
        search.update(np.zeros(3, dtype=bool))
    assert (search.const == MAX_CONST).all()


def test_a_numpy_seed_is_the_number_it_holds():
    assert PGD(seed=np.int64(3)).seed == 3 and type(ZOO(seed=np.uint8(3)).seed) is int


@pytest.mark.parametrize("kind", KINDS)
def test_a_numpy_radius_is_the_number_it_holds(model, kind):
    """`PGD(epsilon=np.float32(...))`, a radius computed from a float32 array, was refused as
    'epsilon must be a finite number >= 0'; the models take such parameters."""
    norm = NORM_OF[kind][0]
    X = np.random.default_rng(3).random((5, D))
    y = [True, False, True, False, True]
    given = make_attack(kind, np.float32(0.25), norm, (0.0, 1.0))
    plain = make_attack(kind, float(np.float32(0.25)), norm, (0.0, 1.0))
    assert type(given.epsilon) is float
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoGradientWarning)
        np.testing.assert_array_equal(given.perturb_many(model, X, y, progress=False),
                                      plain.perturb_many(model, X, y, progress=False))


@pytest.mark.parametrize("kind", ["fgsm", "pgd"])
def test_without_a_box_a_huge_radius_stays_within_what_the_models_accept(model, kind):
    """With `bounds=None` and a radius of 1e20, the attacked point (-1e20, ...) was refused by
    the model's own input check, as 'feature 0 is -1e+20 ... rescale the input': a value the
    user never gave. The models accept inputs up to MAX_ABS_VALUE: the attack stays there."""
    X = np.full((2, D), 0.5)
    attack = make_attack(kind, 1e20, "linf", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoGradientWarning)
        result = attack.run(model, X, [True, False], progress=False)
    assert (np.abs(result.adversarial) <= MAX_ABS_VALUE).all()
    assert (result.norms <= 1e20).all() and np.isfinite(result.adversarial).all()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bounds", [(-1e300, 1e300), (0.0, 1e18)])
def test_a_box_wider_than_the_models_accept_is_cut_to_what_they_accept(model, kind, bounds):
    """As without a box: a box past MAX_ABS_VALUE let a radius of 1e20 reach (-1e20, ...), and
    ZOO query points as far, which the model refused as 'feature 0 is -1e+20 ... rescale the
    input'."""
    X = np.full((2, D), 0.5)
    attack = make_attack(kind, 1e20, NORM_OF[kind][0], bounds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoGradientWarning)
        result = attack.run(model, X, [True, False], progress=False)
    assert (np.abs(result.adversarial) <= MAX_ABS_VALUE).all()
    assert (result.adversarial >= bounds[0]).all() and (result.adversarial <= bounds[1]).all()


@pytest.mark.parametrize("kind, norm", [(kind, norm) for kind in KINDS for norm in NORM_OF[kind]])
def test_next_to_large_inputs_rounding_does_not_leave_the_ball(kind, norm):
    """Near 1e15 representable numbers are 0.125 apart: FGSM's `x - 0.07` rounded to
    `x - 0.125`, and the attack returned (and counted as within the budget) a point 0.125
    away for a radius of 0.07. Every attacked point is within epsilon, as measured."""
    model = AdvLinearSVM()
    for i in range(50):
        model.learn_one({"a": 1e15 - 1 + i % 2, "b": 0.3 * (i % 2)}, bool(i % 2))
    X = pd.DataFrame({"a": [999999999999999.0, 1e15 - 2], "b": [0.0, 0.1]})
    attack = make_attack(kind, 0.07, norm, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoGradientWarning)
        result = attack.run(model, X, [True, True], progress=False)
    delta = result.adversarial - X.to_numpy()
    size = np.abs(delta).max(axis=1) if norm == "linf" else np.linalg.norm(delta, axis=1)
    assert (size <= 0.07).all() and (result.norms <= 0.07).all(), size


@pytest.mark.parametrize("kind", KINDS)
def test_a_label_the_model_does_not_know_is_refused_by_every_attack(model, kind):
    """ZOO (scores only) returned the sample unchanged and counted it as fooled: the unknown
    label has no probability. The white-box attacks refused it; every attack does now, as a
    model that has learned nothing."""
    attack = make_attack(kind, 0.1, NORM_OF[kind][0], (0.0, 1.0))
    with pytest.raises(InvalidInput, match="label 'cat'"):
        attack.perturb_one(model, {0: 0.5, 1: 0.5}, "cat")
    with pytest.raises(InvalidInput, match="has not learned any label"):
        attack.perturb_one(AdvKernelSVM(seed=0), {0: 0.5}, True)


@pytest.mark.parametrize("kind, norm", [(kind, norm) for kind in KINDS for norm in NORM_OF[kind]])
@pytest.mark.parametrize("make", [AdvLinearSVM, lambda: AdvKernelSVM(
    gamma=1.0, budget=16, budget_policy="compact", seed=0)])
def test_a_model_of_one_class_is_never_fooled(kind, norm, make):
    """A model that has seen one label predicts it whatever the input, so no attack flips it;
    its margin still goes below 0 far from the data, which white-box attacks counted as fooled
    (and C&W returned as a flip)."""
    rng = np.random.default_rng(0)
    model = make()
    model.learn_many(rng.random((30, 2)), ["a"] * 30)
    X = np.array([[0.5, 0.5], [0.0, 0.0], [1.0, 1.0], [3.0, -2.0]])
    assert model.decision_many(rng.uniform(-60, 60, (200, 2))).min() <= 0  # it changes sign
    attack = make_attack(kind, 60.0, norm, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoGradientWarning)
        result = attack.run(model, X, ["a"] * 4)
    assert not result.fooled.any()
    assert list(model.predict_many(result.adversarial)) == ["a"] * 4
    np.testing.assert_array_equal(result.adversarial, X)


@pytest.mark.parametrize("kind, norm", [(kind, norm) for kind in KINDS for norm in NORM_OF[kind]])
def test_fooled_is_what_the_model_predicts_at_a_margin_of_zero(kind, norm):
    """`g = 0` predicts the negative class. A sample of that class at `g = 0` was counted as
    fooled, by every attack and at epsilon 0 too, while the model predicted it right."""
    model = AdvLinearSVM()
    model.learn_one({0: 0.5, 1: 0.2}, True)
    model.learn_one({0: 0.1, 1: 0.9}, False)  # the bias is back to 0 exactly
    X = np.array([[0.0, 0.0], [0.0, 0.0], [0.1, 0.9], [0.5, 0.2]])
    y = [False, True, False, True]
    assert model.decision_many(X[:2]).tolist() == [0.0, 0.0]
    attack = make_attack(kind, 0.0, norm, (0.0, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoGradientWarning)
        result = attack.run(model, X, y)
    wrong = np.array(list(model.predict_many(result.adversarial))) != np.array(y)
    np.testing.assert_array_equal(result.fooled, wrong)
    assert result.fooled.tolist() == [False, True, False, False]


@pytest.mark.parametrize("attack", [FGSM, PGD])
def test_an_l2_radius_past_the_box_is_the_box_however_large(model, attack):
    """Any L2 radius beyond the box's diameter lets the attacker reach the same points: at
    1e200 and 1e300 the squared steps overflowed, every step looked infinitely long and was cut
    to nothing (100% robust, silently)."""
    rng = np.random.default_rng(3)
    X = rng.random((60, D))
    y = list(model.predict_many(X))
    fooled = {eps: attack(epsilon=eps, norm="l2", bounds=(0.0, 1.0)).run(
        model, X, y, progress=False).fooled for eps in (1e3, 1e200, 1e300)}
    assert fooled[1e3].any()
    np.testing.assert_array_equal(fooled[1e200], fooled[1e3])
    np.testing.assert_array_equal(fooled[1e300], fooled[1e3])


# -- parameters from numpy, and how a refused one is shown ---------------------------------------

NUMPY_INTEGERS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                  np.uint64]
COUNTS = [(PGD, "steps"), (CarliniWagnerL2, "steps"), (CarliniWagnerL2, "search_steps"),
          (ZOO, "steps"), (ZOO, "search_steps"), (ZOO, "coordinates")]


def numpy_repr_free(message: str) -> bool:
    return "np." not in message and "array(" not in message and "\n" not in message


@pytest.mark.parametrize("make, name", COUNTS)
@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(NUMPY_INTEGERS), count=st.integers(1, 127))
def test_a_numpy_count_is_the_int_it_holds(make, name, kind, count):
    """`PGD(steps=np.int64(3))` was refused as "got np.int64(3)", while epsilon and seed took
    numpy scalars."""
    value = getattr(make(**{name: kind(count)}), name)
    assert type(value) is int and value == count


# Values no count, flag, seed or box is: numpy's scalars and arrays among them.
refused_values = st.one_of(
    st.builds(lambda kind, v: kind(v), st.sampled_from([np.int8, np.int64]), st.integers(-9, 0)),
    st.builds(np.float64, st.floats(allow_nan=True)),
    st.builds(np.float32, st.floats(0.5, 9.5).filter(lambda v: v != int(v))),
    st.sampled_from([np.bool_(True), np.str_("3"), np.array(3), np.array([3]), np.array([0.0, 1.0]),
                     "3", None, 2.5, [3]]),
)


@pytest.mark.parametrize("make, name", [*COUNTS, (PGD, "random_start"), (PGD, "seed"),
                                        (ZOO, "seed"), (FGSM, "bounds"), (PGD, "bounds")])
@settings(max_examples=25, deadline=None)
@given(value=refused_values)
def test_a_refused_parameter_is_named_and_shown_without_numpy_reprs(make, name, value):
    """`FGSM(bounds=np.array([0., 1.]))` said "got array([0., 1.])"."""
    if value is None and name in ("seed", "bounds"):
        return  # (no seed, no box)
    if name == "seed" and isinstance(value, np.integer) and value == 0:
        return  # (a seed)
    if name == "random_start" and isinstance(value, np.bool_):
        return  # (numpy's True is true)
    with pytest.raises(ValueError, match=name) as refused:
        make(**{name: value})
    assert numpy_repr_free(str(refused.value)), str(refused.value)


@pytest.mark.parametrize("bounds", [(0.0, 1.0), None])
def test_a_random_start_of_any_radius_is_a_point(bounds):
    """`uniform(-epsilon, epsilon)` overflowed its width for an epsilon past 9e307."""
    model = AdvLinearSVM()
    model.learn_one({"a": 0.0}, True)
    model.learn_one({"a": 1.0}, False)
    attack = PGD(epsilon=1e308, random_start=True, restarts=1, bounds=bounds)
    x_adv = attack.perturb_one(model, {"a": 0.5}, True)
    assert np.isfinite(x_adv["a"]) and (bounds is None or 0.0 <= x_adv["a"] <= 1.0)


@pytest.mark.parametrize("value", ["yes", "no", 1, 0, None, [True]])
def test_random_start_is_a_bool(value):
    """`PGD(random_start="no")` was taken, and started at random."""
    with pytest.raises(ValueError, match="random_start must be True or False"):
        PGD(random_start=value)
    assert PGD(random_start=np.bool_(True)).random_start is True


@pytest.mark.parametrize("value", ["no", 2, None])
def test_progress_is_a_bool(model, value):
    """`perturb_many(..., progress="no")` was taken as true, and `progress=None` as false."""
    from river_advsvm import evaluate

    X, y = np.full((2, D), 0.5), [True, False]
    with pytest.raises(ValueError, match="progress must be True or False"):
        PGD().perturb_many(model, X, y, progress=value)
    with pytest.raises(ValueError, match="progress must be True or False"):
        PGD().run(model, X[:0], [], progress=value)
    with pytest.raises(ValueError, match="progress must be True or False"):
        evaluate.progressive_robust_val([], model, PGD(), progress=value)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["one", "many", "frame", "estimate"])
def test_a_nan_input_is_refused_in_the_attacks_words(model, kind, how):
    """An attack refused NaN saying "learning needs finite values (at prediction time NaN
    counts as a missing feature)": nothing is learned there, and nothing counts as missing."""
    attack = make_attack(kind, 0.1, NORM_OF[kind][0], None)
    X = np.full((2, D), 0.5)
    X[1, 2] = np.nan
    calls = {
        "one": lambda: attack.perturb_one(model, {0: 0.5, 1: float("nan")}, True),
        "many": lambda: attack.perturb_many(model, X, [True, False], progress=False),
        "frame": lambda: attack.run(model, pd.DataFrame(X, columns=list("abcd")),
                                    [True, False], progress=False),
        "estimate": lambda: attack.estimate_seconds(model, X, [True, False]),
    }
    with pytest.raises(InvalidInput) as refused:
        calls[how]()
    message = str(refused.value)
    assert refused.value.code == "not_finite"
    assert f"is nan; the attack {type(attack).__name__} needs finite values" in message
    assert "learning" not in message and "\n" not in message


def test_pgd_with_restarts_is_never_weaker_and_finds_what_one_run_misses():
    """Each sample gets the lowest margin over the run from the sample and the runs from
    random starts: never above one run's, inside the ball and the box, the same for the same
    seed. On a kernel model over 2 inputs (valleys and flat regions in the ball) the random
    starts fool samples the run from the sample does not."""
    from sklearn.datasets import make_moons

    X, y = make_moons(600, noise=0.25, random_state=1)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    model = AdvKernelSVM(gamma=30.0, budget=128, seed=0)
    model.learn_many(X[:400], y[:400])
    X_test, y_test = X[400:], y[400:]
    one = PGD(epsilon=0.15, norm="linf", bounds=(0.0, 1.0))
    more = PGD(epsilon=0.15, norm="linf", bounds=(0.0, 1.0), restarts=4, seed=7)
    X_one, X_more = one.perturb_many(model, X_test, y_test), more.perturb_many(model, X_test,
                                                                                y_test)
    sign = np.where(y_test == 1, 1.0, -1.0)
    m_one = sign * model.decision_many(X_one)
    m_more = sign * model.decision_many(X_more)
    assert (m_more <= m_one + 1e-12).all()
    assert (np.abs(X_more - X_test).max(axis=1) <= 0.15 + 1e-12).all()
    assert X_more.min() >= 0.0 and X_more.max() <= 1.0
    assert (m_more < 0).sum() > (m_one < 0).sum()
    np.testing.assert_array_equal(X_more, more.perturb_many(model, X_test, y_test))
    with pytest.raises(ValueError, match="restarts"):
        PGD(restarts=-1)


def test_the_attacks_find_the_same_flips_whatever_the_units_of_the_inputs():
    """One problem in units of 1, 1e6 and 1e9: with gamma='scale' the models are the same up
    to the units, and so are the flips. C&W counted distances in raw units, whose squares
    (1e11) outweighed c times the margin at every c: 1 flip of 40 at 1e6 against 31 at 1; and
    a gradient of 1e-9 per unit at 1e9 units, steep there, was taken for a vanishing one
    (PGD warned that most samples had none)."""
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(400, 2))
    labels = Z[:, 0] + Z[:, 1] > 0
    fooled = {}
    for unit in (1.0, 1e6, 1e9):
        model = AdvKernelSVM(seed=0)
        model.learn_many(Z * unit, labels)
        X = Z[:40] * unit
        with warnings.catch_warnings():
            warnings.simplefilter("error", NoGradientWarning)
            pgd = PGD(epsilon=0.5 * unit, norm="l2", bounds=None).run(model, X, labels[:40],
                                                                     progress=False)
            cw = CarliniWagnerL2(bounds=None).run(model, X, labels[:40], progress=False)
        assert pgd.n_no_gradient == cw.n_no_gradient == 0
        fooled[unit] = (pgd.fooled, cw.fooled, cw.norms / unit)
    pgd, cw, norms = fooled[1.0]
    assert cw.sum() >= 30
    for unit in (1e6, 1e9):
        np.testing.assert_array_equal(fooled[unit][0], pgd)
        # C&W's steps are not the same in every unit (the unit it counts in is at least 1):
        # about as many flips within each radius.
        for radius in (0.25, 0.5, 1.0, np.inf):
            within = lambda flips, found: int((flips & (found <= radius)).sum())  # noqa: E731
            assert abs(within(*fooled[unit][1:]) - within(cw, norms)) <= 2, radius
