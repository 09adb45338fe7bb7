"""Certified radii: exact for linear models, sound for the deployed random-feature model."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import learn_stream
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from river_advsvm import AdvKernelSVM, AdvLinearSVM, certify
from river_advsvm.attacks import PGD


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_linear_certificate_is_exact(norm):
    rng = np.random.default_rng(0)
    X = rng.random((200, 5))
    y = X @ np.array([1.0, -2.0, 0.5, 0.0, 1.0]) > 0.2
    model = AdvLinearSVM()
    model.learn_many(X, y)
    w = np.array([model.weights[i] for i in range(5)])
    radii = model.certified_radius_many(X[:30], y[:30], norm=norm)
    margins = np.where(y[:30], 1, -1) * model.decision_many(X[:30])
    right = margins > 0
    np.testing.assert_array_equal(radii[~right], 0.0)
    # The worst direction of each norm: along w (L2), along sign(w) (L-inf).
    direction = w / np.linalg.norm(w) if norm == "l2" else np.sign(w)
    toward_boundary = -np.where(y[:30], 1.0, -1.0)[:, None] * direction
    for factor, flips in [(1 - 1e-6, False), (1 + 1e-6, True)]:
        moved = X[:30] + factor * radii[:, None] * toward_boundary
        still = np.where(y[:30], 1, -1) * model.decision_many(moved) > 0
        assert (still[right] != flips).all()


def test_a_linear_model_of_subnormal_weights_certifies_without_a_warning():
    """Its margin over its weights' norm is past float64: an infinite radius, and numpy's
    overflow warning came with it."""
    model = AdvLinearSVM()
    model.learn_one({"a": 1e-308}, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert model.certified_radius_one({"a": 1e-308}, False) == math.inf


@settings(max_examples=60, deadline=None)
@given(d=st.integers(1, 6), offset=st.sampled_from([0.0, 1.0, 100.0, 5000.0]),
       norm=st.sampled_from(["l2", "linf"]), seed=st.integers(0, 2**31 - 1))
def test_the_linear_certificate_holds_for_the_margin_as_computed(d, offset, norm, seed):
    """Next to the boundary the computed margin is mostly rounding: a point certified there
    must keep its prediction, as the model computes it, everywhere in its ball."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(100, d)) * (1.0 + offset / 10) + offset
    model = AdvLinearSVM()
    model.learn_many(X, (X - offset) @ rng.normal(size=d) > 0)
    w = np.array([model.weights[i] for i in range(d)])
    assume(np.linalg.norm(w) > 0)
    direction = w / np.linalg.norm(w) if norm == "l2" else np.sign(w)
    # Points on the boundary, then nudged by a few ulps of their largest term to either side.
    on = X[:20] - np.outer(model.decision_many(X[:20]), w) / (w @ w)
    scale = np.abs(on * w).sum(axis=1) + abs(model._bias)
    nudge = rng.choice([-1.0, 1.0], 20) * rng.uniform(0, 64, 20) * np.spacing(scale)
    points = on + (nudge / (w @ direction))[:, None] * direction
    labels = model.decision_many(points) > 0
    radii = model.certified_radius_many(points, labels, norm=norm)
    for x, label, r in zip(points, labels, radii.tolist()):
        if r <= 0.0:
            continue
        toward = -direction if label else direction
        ball = np.array([x + t * r * toward for t in (1.0, 1 - 1e-9, 1 - 1e-6, 0.5)])
        ball = ball[certify_distances(ball, x, norm) <= r]
        assert ((model.decision_many(ball) > 0) == label).all(), (x, r)


def certify_distances(points, x, norm):
    delta = points - x
    return np.abs(delta).max(axis=1) if norm == "linf" else np.sqrt((delta * delta).sum(axis=1))


def small_model(**kwargs):
    rng = np.random.default_rng(1)
    X = rng.random((300, 3))
    y = np.sin(6 * X[:, 0]) + X[:, 1] > 0.9
    model = AdvKernelSVM(budget=48, budget_policy="compact", seed=2, averaging=None, **kwargs)
    model.learn_many(X, y)
    return model, X[:40], y[:40]


@pytest.fixture(scope="module")
def small_kernel_model():
    """The defaults: float32 features and one bandwidth per input, fitted by 'scale'."""
    return small_model()


@pytest.fixture(scope="module")
def exact_kernel_model():
    """float64 and one bandwidth: the bounds can be recomputed by hand to many digits."""
    return small_model(gamma=3.0, dtype="float64")


def brute_force_radius_bounds(model, norm, d):
    """The two bounds recomputed from the store with numpy's own norms."""
    store = model._store
    c = math.sqrt(2) * np.abs(store.coefficients)
    omega = store.omega
    lipschitz = np.linalg.norm(c) * np.linalg.norm(omega, 2)
    if norm == "linf":
        lipschitz *= math.sqrt(d)
    dual = np.linalg.norm(omega, 2 if norm == "l2" else 1, axis=0)

    def second_bound(r):
        return float(np.sum(c * np.minimum(2.0, dual * r)))

    return lipschitz, second_bound


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_kernel_radius_is_the_larger_of_the_two_bounds_solved_exactly(exact_kernel_model, norm):
    model, X, y = exact_kernel_model
    radii = model.certified_radius_many(X, y, norm=norm)
    margins = np.where(y, 1, -1) * model.decision_many(X)
    lipschitz, second_bound = brute_force_radius_bounds(model, norm, X.shape[1])
    for r, m in zip(radii, margins):
        if m <= 0:
            assert r == 0
            continue
        # Bisection on the second bound, which is nondecreasing in r.
        lo, hi = 0.0, 1e3
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if second_bound(mid) < m else (lo, mid)
        expected = max(m / lipschitz, lo)
        assert r == pytest.approx(expected, rel=1e-7)


@pytest.mark.parametrize("norm", ["l2", "linf"])
@pytest.mark.parametrize("which", ["small_kernel_model", "exact_kernel_model"])
def test_no_attack_flips_a_point_inside_its_certified_radius(which, norm, request):
    """PGD with many steps and random restarts, right at the radius, never flips a point."""
    model, X, y = request.getfixturevalue(which)
    radii = model.certified_radius_many(X, y, norm=norm)
    certified = radii > 0
    assert certified.sum() >= 10
    for restart in range(5):
        for i in np.flatnonzero(certified):
            attack = PGD(epsilon=float(radii[i]), norm=norm, steps=50, step_size=radii[i] / 8,
                         random_start=restart > 0, seed=restart, bounds=None)
            result = attack.run(model, X[i : i + 1], y[i : i + 1])
            assert not result.fooled[0]
    # ... while at a few times the radius the same attack does flip some points: the test
    # above can fail.
    flipped = 0
    for i in np.flatnonzero(certified):
        attack = PGD(epsilon=float(6 * radii[i]), norm=norm, steps=50, bounds=None)
        flipped += attack.run(model, X[i : i + 1], y[i : i + 1]).fooled[0]
    assert flipped > 0


def test_radius_one_equals_many_and_accepts_frames(small_kernel_model):
    model, X, y = small_kernel_model
    many = model.certified_radius_many(X, y)
    frame = model.certified_radius_many(pd.DataFrame(X), y)
    one = [model.certified_radius_one(dict(enumerate(x)), label) for x, label in zip(X.tolist(), y)]
    np.testing.assert_allclose(frame, many)
    np.testing.assert_allclose(one, many, rtol=1e-4)  # float32: the margins round apart


def test_spectral_norm_is_cached_until_the_features_change():
    rng = np.random.default_rng(0)
    X = rng.random((50, 3))
    y = X[:, 0] > 0.5
    model = AdvKernelSVM(budget=32, budget_policy="compact", gamma=1.0, seed=0)
    model.learn_many(X, y)
    store = model._store
    version = store.version
    first = certify._spectrum(store, np.ones(3))
    model.learn_many(X, y)  # coefficients change, features do not (compact pool)
    assert store.version == version
    assert certify._spectrum(store, np.ones(3)) is first
    # A new input adds a row to every feature: the cache must not serve the old sigma_max.
    model.learn_one({0: 0.1, 1: 0.2, 2: 0.3, "new": 0.9}, True)
    assert store.version > version
    second = certify._spectrum(store, np.ones(4))
    assert second is not first
    assert second["sigma"] == pytest.approx(np.linalg.norm(store.omega, 2), rel=1e-10)
    assert second["sigma"] > first["sigma"]


def test_inputs_the_model_never_saw_count_in_the_certificate():
    """An unknown input still moves f (its weights are drawn on the fly): the radius shrinks."""
    rng = np.random.default_rng(0)
    X = rng.random((100, 3))
    model = AdvKernelSVM(budget=32, budget_policy="compact", seed=0)
    model.learn_many(X, X[:, 0] > 0.5)
    x = {0: 0.9, 1: 0.5, 2: 0.5}
    x_extra = dict(x, unseen=0.0)
    assert model.decision_one(x_extra) == pytest.approx(model.decision_one(x))
    assert model.certified_radius_one(x_extra, True) < model.certified_radius_one(x, True)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(0, 8), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_the_bounds_with_unknown_inputs_hold_for_the_stacked_weights(d, k, budget, seed):
    """The weights of inputs a model does not know are stacked under its own without an SVD
    of the stack: the column norms are the stack's, sigma_max at least its."""
    rng = np.random.default_rng(seed)
    own = rng.normal(size=(d, budget)) * rng.random((d, 1)) * 10.0 ** rng.integers(-3, 4)
    unknown = rng.normal(size=(k, budget)) * 10.0 ** rng.integers(-3, 4)
    bound = certify._with_rows(certify._weight_norms(own), own, unknown)
    stack = np.vstack([own, unknown])
    assert bound["sigma"] >= np.linalg.svd(stack, compute_uv=False)[0]
    np.testing.assert_allclose(bound["l1"], np.abs(stack).sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(bound["l2"], np.linalg.norm(stack, axis=0), rtol=1e-12)


def test_certified_accuracy_is_a_lower_bound_on_pgd_accuracy_on_digits(digits_1v7):
    X_train, X_test, y_train, y_test = digits_1v7
    model = learn_stream(AdvKernelSVM(seed=0), X_train, y_train)
    for epsilon in [0.1, 0.25, 0.5]:
        certified = certify.certified_accuracy(model, X_test, y_test, epsilon, norm="l2")
        attacked = 1 - PGD(epsilon=epsilon, norm="l2").run(model, X_test, y_test).fooled.mean()
        assert certified <= attacked
    assert certify.certified_accuracy(model, X_test, y_test, 0.0) == pytest.approx(
        np.mean(model.predict_many(X_test).to_numpy() == y_test)
    )
    # A reference run certified 79% at L2 radius 0.25 on this problem.
    assert certify.certified_accuracy(model, X_test, y_test, 0.25, norm="l2") > 0.5


def test_saturating_bound_is_inverted_exactly_across_its_kinks():
    rng = np.random.default_rng(3)
    weights = rng.random(30)
    slopes = np.concatenate([rng.exponential(size=28), [0.0, 0.0]])  # two features never move
    total = 2 * weights[slopes > 0].sum()
    margins = np.concatenate([rng.random(50) * total, [total * 1.01, 0.0]])

    def bound(r):
        return float(np.sum(weights * np.minimum(2.0, slopes * r)))

    radii = certify._invert_saturating_bound(weights, slopes, margins)
    assert radii[-2] == math.inf  # no radius makes the bound reach a margin above its maximum
    assert radii[-1] == 0.0
    for r, m in zip(radii[:-2], margins[:-2]):
        assert bound(r) == pytest.approx(m, rel=1e-10)
        assert bound(r * (1 - 1e-6)) < m


def _learned_in_the_unit_cube(make):
    """A model from `make` that learned 150 samples in [0, 1]^3, with the samples."""
    rng = np.random.default_rng(4)
    X = rng.random((150, 3))
    y = X[:, 0] > 0.5
    model = make()
    model.learn_many(X, y)
    return model, X, y


@pytest.mark.parametrize("norm", ["linf", "l2"])
@pytest.mark.parametrize("make", [lambda: AdvLinearSVM(), lambda: AdvKernelSVM(gamma=1.0, seed=0)])
def test_a_sample_past_the_box_by_rounding_is_certified_from_its_edge(make, norm):
    """An input past the box by rounding (a min-max scaler's 1.0000000000000002) was refused:
    the sample is certified as the one on the box's edge, less the move (sound: the ball around
    it lies in the one around the moved sample)."""
    model, X, y = _learned_in_the_unit_cube(make)
    rounded = X[:8].copy()
    rounded[:, 2] = np.nextafter(1.0, 2.0)
    edge = np.clip(rounded, 0.0, 1.0)
    got = model.certified_radius_many(rounded, y[:8], norm=norm, bounds=(0.0, 1.0))
    want = model.certified_radius_many(edge, y[:8], norm=norm, bounds=(0.0, 1.0))
    assert (want > 0).any()
    assert ((got <= want) & (got >= want - 1e-15)).all()
    one, want_one = (model.certified_radius_one(dict(enumerate(row)), y[0], norm=norm,
                                                bounds=(0.0, 1.0)) for row in (rounded[0], edge[0]))
    assert want_one - 1e-15 <= one <= want_one


@pytest.mark.parametrize("make", [lambda: AdvLinearSVM(), lambda: AdvKernelSVM(gamma=1.0, seed=0)])
def test_a_sample_outside_the_box_is_refused_as_the_attacks_refuse_it(make):
    """With `bounds`, the threat set is the ball intersected with the box; for a sample outside
    the box it would not even hold the sample, and the radius would say nothing. It is refused,
    with the attacks' words; inside the box, and without a box, the sample is certified."""
    from river_advsvm import InvalidInput

    model, X, y = _learned_in_the_unit_cube(make)
    outside = X[:5].copy()
    outside[2, 1] = 1.25
    with pytest.raises(InvalidInput, match="outside bounds"):
        model.certified_radius_many(outside, y[:5], norm="linf", bounds=(0.0, 1.0))
    with pytest.raises(InvalidInput, match="outside bounds"):
        model.certified_radius_one({0: 0.5, 1: -0.5}, True, norm="linf", bounds=(0.0, 1.0))
    with pytest.raises(ValueError, match="bounds must be"):
        model.certified_radius_many(X[:5], y[:5], norm="linf", bounds=(1.0, 0.0))
    assert (model.certified_radius_many(outside, y[:5], norm="linf") >= 0).all()
    inside = model.certified_radius_many(X[:5], y[:5], norm="linf", bounds=(0.0, 1.0))
    free = model.certified_radius_many(X[:5], y[:5], norm="linf")
    # A box can only make the true radius larger; the sound ones agree up to the search's step.
    assert (inside >= free * (1 - 1e-6)).all()


@pytest.mark.parametrize("epsilon", [float("nan"), -0.1, "0.1", None, True])
def test_certified_accuracy_refuses_a_radius_that_is_not_one(epsilon):
    """NaN gave an accuracy of 0.0 and a negative radius the clean accuracy, silently; a string
    ended in a numpy ufunc error."""
    model = AdvLinearSVM()
    for _ in range(20):
        model.learn_one({"a": 0.2}, False)
        model.learn_one({"a": 0.9}, True)
    with pytest.raises(ValueError, match="epsilon"):
        certify.certified_accuracy(model, pd.DataFrame({"a": [0.1, 0.9]}), [False, True], epsilon)


def test_a_missing_input_is_not_outside_the_box_in_a_frame_either():
    model = AdvKernelSVM(gamma=1.0, seed=0)
    for _ in range(30):
        model.learn_one({"a": 0.6, "b": 0.7}, False)
        model.learn_one({"a": 0.9, "b": 0.9}, True)
    one = model.certified_radius_one({"a": 0.9, "b": math.nan}, False, norm="linf",
                                     bounds=(0.5, 1.0))
    assert one > 0
    many = model.certified_radius_many(pd.DataFrame({"a": [0.9], "b": [math.nan]}), [False],
                                       norm="linf", bounds=(0.5, 1.0))
    assert many[0] == pytest.approx(one)


@pytest.mark.parametrize("make", [
    lambda: AdvLinearSVM(),
    lambda: AdvKernelSVM(seed=0, budget=64, budget_policy="compact", norm="linf"),
    lambda: AdvKernelSVM(seed=0, budget=64),
], ids=["linear", "random features", "support vectors"])
def test_an_absent_input_is_certified_as_the_zero_it_is(make):
    """The model reads an absent input as 0, and an attacker may change it: the radius of a
    sample lacking an input is the one of the sample with that input at 0, and a frame's NaN
    (missing) gives the same. The linear and random-feature certificates let only the sample's
    own inputs move: a point within their radius, the absent input set, flipped the model."""
    rng = np.random.default_rng(0)
    model = make()
    for _ in range(300):
        x = {f"x{j}": float(v) for j, v in enumerate(rng.random(4))}
        model.learn_one(x, x["x0"] + 0.5 * x["x1"] > 0.8)
    sparse = {"x0": 0.95}
    dense = {"x0": 0.95, "x1": 0.0, "x2": 0.0, "x3": 0.0}
    frame = pd.DataFrame({"x0": [0.95], "x1": [np.nan], "x2": [np.nan], "x3": [np.nan]})
    y = model.predict_one(dense)
    radius = model.certified_radius_one(sparse, y)
    assert radius == model.certified_radius_one(dense, y)
    assert model.certified_radius_many(frame, [y])[0] == pytest.approx(radius, rel=1e-12)
    if isinstance(model, AdvLinearSVM):  # exact: the worst point moves every input
        w = np.array([model.weights.get(f"x{j}", 0.0) for j in range(4)])
        sign = 1.0 if y == model.classes[-1] else -1.0
        step = -sign * w / np.linalg.norm(w)
        for factor, same in [(0.999, True), (1.01, False)]:
            moved = {f"x{j}": dense[f"x{j}"] + factor * radius * step[j] for j in range(4)}
            assert (model.predict_one(moved) == y) is same


@pytest.mark.parametrize("policy", ["merge", "compact"])
@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_an_input_the_bandwidths_name_moves_in_the_certificate_before_it_is_learned(policy,
                                                                                     norm):
    """`gamma` names an input of large bandwidth that was 0 in every sample learned: the model
    has no column for it, but an attacker may still set it, and the model then reads it at its
    own bandwidth. The radius of a sample lacking it is the one with it at 0 (it was the
    radius of the learned inputs alone, 100 times larger), and moving it alone within the
    radius, either way, keeps the prediction."""
    rng = np.random.default_rng(0)
    model = AdvKernelSVM(gamma={"a": 0.01, "b": 0.01, "c": 100.0}, budget_policy=policy,
                         budget=128, seed=0)
    for row in rng.normal(size=(300, 2)) * 10:
        model.learn_one({"a": row[0], "b": row[1], "c": 0.0}, bool((row**2).sum() < 100.0))
    assert "c" not in model._index.position  # (never nonzero: never learned)
    x = {"a": 0.0, "b": 0.0}
    y = model.predict_one(x)
    radius = model.certified_radius_one(x, y, norm=norm)
    assert 0.0 < radius == model.certified_radius_one({**x, "c": 0.0}, y, norm=norm)
    for move in (0.999 * radius, -0.999 * radius):
        assert model.predict_one({**x, "c": move}) == y


def test_the_inputs_the_bandwidths_name_do_not_count_as_the_samples_own():
    """The inputs a `gamma` dict names but the model has not learned are the model's, at most
    `max_features` (checked when it is made): certifying a sample that brings inputs of its
    own counted them as the sample's ("45 inputs the model does not know, more than
    max_features=40" for a sample of 15 such inputs) and refused a sample it predicts."""
    rng = np.random.default_rng(0)
    model = AdvKernelSVM(gamma={f"p{i}": 0.05 for i in range(40)}, max_features=40, seed=0)
    for row in rng.random((200, 10)):
        model.learn_one({f"p{i}": row[i] for i in range(10)}, bool(row[:5].sum() > 2.5))
    x = {**{f"p{i}": 0.5 for i in range(10)}, **{f"q{i}": 0.1 for i in range(15)}}
    y = model.predict_one(x)
    assert 0.0 < model.certified_radius_one(x, y) < math.inf


@pytest.fixture(scope="module")
def small_support_model():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (300, 2))
    model = AdvKernelSVM(gamma=20.0, seed=0, budget=8)
    model.learn_many(X, X[:, 0] > 0.2)
    return model


@settings(max_examples=30, deadline=None)
@given(x=st.tuples(st.floats(0, 1), st.floats(0, 1)), lo=st.floats(-8, 0), hi=st.floats(1, 8),
       norm=st.sampled_from(["linf", "l2"]))
def test_a_box_never_makes_the_radius_smaller_beyond_the_searchs_precision(
        small_support_model, x, lo, hi, norm):
    """What the docs say of `bounds`: a box only removes points from the ball, so the radius is
    never smaller with it, up to the radius search's relative precision (1e-6; the tester
    measured 5e-7 below, where the docs said "can only make the radius larger")."""
    point = {0: x[0], 1: x[1]}
    label = small_support_model.predict_one(point)
    free = small_support_model.certified_radius_one(point, label, norm=norm)
    boxed = small_support_model.certified_radius_one(point, label, norm=norm, bounds=(lo, hi))
    assert boxed >= free * (1 - 1e-6)


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_a_width_so_small_that_every_radius_is_infinite_says_nothing_of_an_overflow(norm):
    """At gamma = 5e-324 the largest radius of the kernel-norm bound overflowed to inf (the
    right answer) with numpy's RuntimeWarning on the way."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] > 0
    model = AdvKernelSVM(gamma=5e-324, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the model's own warnings about such a width)
        model.learn_many(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        radii = model.certified_radius_many(X[:20], y[:20], norm=norm)
    right = model.predict_many(X[:20]).to_numpy() == y[:20]
    assert (radii[right] == np.inf).all() and (radii[~right] == 0).all()


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_a_sample_certified_at_exactly_epsilon_counts(norm):
    """`certified_accuracy` counts a sample whose certified radius is the threat radius itself:
    no attack within epsilon flips it (the radius is the largest such, inclusive)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    y = X[:, 0] + 0.5 * X[:, 1] > 0
    model = AdvLinearSVM(norm=norm)
    for x, label in zip(X, y):
        model.learn_one(dict(enumerate(x)), bool(label))
    radii = model.certified_radius_many(X[:20], y[:20], norm=norm)
    j = int(np.argmax(radii))
    assert 0 < radii[j] < math.inf
    assert certify.certified_accuracy(model, X[j:j + 1], y[j:j + 1], float(radii[j]),
                                      norm=norm) == 1.0
    assert certify.certified_accuracy(model, X[j:j + 1], y[j:j + 1],
                                      float(np.nextafter(radii[j], math.inf)), norm=norm) == 0.0


@pytest.mark.parametrize("make", [AdvLinearSVM, lambda: AdvKernelSVM(gamma=1.0, seed=0)])
def test_a_model_of_one_label_is_certified_everywhere_for_it(make):
    """A model that has seen one label predicts it at every input, whatever its decision
    function says; its certificate followed the decision (0 at {a: -50} for the label it
    predicts there, 7.0 at {a: 5}): the exact radius is infinite."""
    model = make()
    model.learn_one({"a": 1.0}, 3)
    x_far, x_near = {"a": -50.0}, {"a": 5.0}
    assert model.predict_one(x_far) == model.predict_one(x_near) == 3
    assert model.certified_radius_one(x_far, 3) == model.certified_radius_one(x_near, 3) == math.inf
    X = pd.DataFrame({"a": [-50.0, 5.0]})
    np.testing.assert_array_equal(model.certified_radius_many(X, [3, 3], norm="linf"), math.inf)
    with pytest.raises(Exception, match="not one of"):  # a label it does not know is refused
        model.certified_radius_one(x_far, 4)
    model.learn_one({"a": -1.0}, 4)  # two labels: the decision decides again
    for x in (x_far, x_near):
        predicted = model.predict_one(x)
        other = 4 if predicted == 3 else 3
        assert model.certified_radius_one(x, predicted) < math.inf  # (sound, not tight)
        assert model.certified_radius_one(x, other) == 0.0
