"""The support-vector certificate: exact where the answer is known, never beaten by an attack,
and sound for the prediction as computed in float32."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from river_advsvm.attacks import PGD
from river_advsvm.certify import support_radii
from river_advsvm.support import SupportVectors


class Model:
    """A support-vector model over raw inputs, as the attacks see one: `g(x) = f(q x) + b`."""

    def __init__(self, store, bias, q):
        self.store, self.bias, self.q = store, bias, q

    def decision_many(self, X):
        return self.store.values(np.asarray(X, dtype=float) * self.q) + self.bias

    def decision_gradient_many(self, X):
        return self.store.gradients(np.asarray(X, dtype=float) * self.q)[0] * self.q

    def sign_of(self, y):
        return 1.0 if y > 0 else -1.0


def build(kernel, gamma, vectors, coefficients, dtype="float64"):
    store = SupportVectors(kernel, gamma, None, dtype=dtype)
    store.start()
    store.add_inputs(vectors.shape[1])
    for v, c in zip(vectors, coefficients):
        store.value(v)
        store.add(c)
    return store


def samples_in_ball(rng, x, r, norm, bounds, n=3000):
    """Points of the threat set around `x`: random inside, on the boundary and at the corners."""
    d = len(x)
    if norm == "linf":
        inside = x + rng.uniform(-r, r, (n, d))
        # On the faces: most coordinates at +-r, the others anywhere between.
        at_face = rng.random((n, d)) < 0.7
        signs = rng.choice([-1.0, 1.0], (n, d))
        faces = x + np.where(at_face, r * signs, rng.uniform(-r, r, (n, d)))
        corners = x + r * np.array(np.meshgrid(*[[-1.0, 1.0]] * d)).reshape(d, -1).T
        points = np.vstack([inside, faces, corners])
    else:
        direction = rng.normal(size=(2 * n, d))
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
        radius = r * np.concatenate([rng.random(n) ** (1 / d), np.ones(n)])
        points = x + direction * radius[:, None]
    if bounds is not None:
        points = np.clip(points, *bounds)
    return points


@st.composite
def small_models(draw):
    kernel = draw(st.sampled_from(["rbf", "laplacian"]))
    d = draw(st.integers(1, 3))
    n = draw(st.integers(1, 6))
    vectors = draw(hnp.arrays(np.float64, (n, d), elements=st.floats(0, 1)))
    magnitudes = draw(hnp.arrays(np.float64, n, elements=st.floats(1e-3, 3.0)))
    signs = draw(hnp.arrays(np.float64, n, elements=st.sampled_from([-1.0, 1.0])))
    norm = draw(st.sampled_from(["l2", "linf"]))
    q = draw(
        st.one_of(
            st.just(np.ones(d)), hnp.arrays(np.float64, d, elements=st.floats(0.25, 4.0))
        )
    )
    return dict(
        kernel=kernel,
        dtype=draw(st.sampled_from(["float32", "float64"])),
        gamma=draw(st.floats(0.3, 30.0)),
        vectors=vectors,
        coefficients=magnitudes * signs,
        bias=draw(st.floats(-1.0, 1.0)),
        norm=norm,
        bounds=draw(st.sampled_from([None, (0.0, 1.0)])) if norm == "linf" else None,
        q=q,
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def test_no_certified_point_is_ever_flipped():
    """50 random models here; 1,000 in the slow run."""
    settings(max_examples=50, deadline=None)(given(problem=small_models())(
        check_no_certified_point_is_flipped))()


@pytest.mark.slow
def test_no_certified_point_is_ever_flipped_1000_models():
    settings(max_examples=1000, deadline=None)(given(problem=small_models())(
        check_no_certified_point_is_flipped))()


def check_no_certified_point_is_flipped(problem):
    q, norm, bounds, bias = problem["q"], problem["norm"], problem["bounds"], problem["bias"]
    store = build(
        problem["kernel"], problem["gamma"], problem["vectors"] * q, problem["coefficients"],
        problem["dtype"],
    )
    model = Model(store, bias, q)
    rng = np.random.default_rng(problem["seed"])
    X = rng.random((10, len(q)))
    g = model.decision_many(X)
    y = np.where(g > 0, 1.0, -1.0)
    y[::4] *= -1  # some wrong labels: never certified
    margins = y * g
    radii = support_radii(store, margins, X * q, norm, bias=bias, scale=q, bounds=bounds)
    assert radii.shape == (10,)
    assert (radii[margins <= 0] == 0).all()
    assert (radii >= 0).all()
    event("some points certified" if (radii > 0).any() else "no point certified")
    for i in np.flatnonzero(radii > 0):
        r = min(float(radii[i]), 3.0)
        points = samples_in_ball(rng, X[i], r, norm, bounds)
        assert (y[i] * model.decision_many(points) > 0).all()
        if bounds is None and not math.isfinite(radii[i]):
            continue
        batch = np.repeat(X[i : i + 1], 9, axis=0)
        for attack in (
            PGD(epsilon=r, norm=norm, steps=30, step_size=r / 8, bounds=bounds),
            PGD(epsilon=r, norm=norm, steps=30, step_size=r / 8, bounds=bounds,
                random_start=True, seed=problem["seed"]),
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # flat spots of a tiny model are no failure
                result = attack.run(model, batch, np.repeat(y[i], 9))
            assert not result.fooled.any()


def exact_single_vector_radius(x, s, R, norm, inside, bounds=None):
    """The true radius for `g = a k(x, s) + b` with a > 0 > b: a sphere of radius R around s."""
    if norm == "l2":
        t = np.linalg.norm(x - s)
        return R - t if inside else t - R
    lo, hi = 0.0, 10.0
    for _ in range(200):
        r = (lo + hi) / 2
        low, high = x - r, x + r
        if bounds is not None:
            low, high = np.maximum(low, bounds[0]), np.minimum(high, bounds[1])
        if inside:  # the farthest point of the box from s
            reach = np.square(np.maximum(np.abs(low - s), np.abs(high - s))).sum()
            ok = reach < R * R
        else:  # the nearest point of the box to s
            reach = np.square(np.maximum(0.0, np.maximum(low - s, s - high))).sum()
            ok = reach > R * R
        lo, hi = (r, hi) if ok else (lo, r)
    return lo


@pytest.mark.parametrize("norm,bounds", [("l2", None), ("linf", None), ("linf", (0.0, 1.0))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_radius_is_exact_for_one_support_vector(norm, bounds, dtype):
    s = np.array([0.3, 0.6, 0.5])
    gamma, a, b = 3.0, 2.0, -0.5
    R = math.sqrt(math.log(a / -b) / gamma)
    store = build("rbf", gamma, s[None], [a], dtype)
    rng = np.random.default_rng(0)
    X = rng.random((40, 3))
    g = store.values(X) + b
    radii = support_radii(store, np.abs(g), X, norm, bias=b, bounds=bounds)
    # The search stops within a relative 1e-6; float32 rounding costs a little more.
    tolerance = 1e-4 if dtype == "float32" else 1e-9
    for x, gi, r in zip(X, g, radii):
        exact = exact_single_vector_radius(x, s, R, norm, gi > 0, bounds)
        if exact > 2:  # the box holds no point of the other class
            continue
        assert r <= exact * (1 + 1e-9)
        assert r >= exact * (1 - 2e-6) - tolerance


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_radius_does_not_depend_on_the_scale_of_the_coefficients(kernel, dtype):
    """`g` and `2^-700 g` change sign at the same points, so they have one radius. Products of
    two coefficients below 1e-154 (the norm's `a^T K a`, the gradient's squared length) were 0:
    the radii of a model learned with a step of 1e-200 were millions, and PGD beat them."""
    rng = np.random.default_rng(3)
    vectors, coefficients = rng.normal(size=(6, 3)), rng.normal(size=6)
    X = rng.normal(size=(40, 3))
    radii = {}
    for unit in (1.0, 2.0**-700):  # (a power of 2: the two models round alike)
        store = build(kernel, 0.7, vectors, unit * coefficients, dtype)
        g = store.values(X) - 0.1 * unit
        for norm in ("l2", "linf"):
            radii[unit, norm] = support_radii(store, np.abs(g), X, norm, bias=-0.1 * unit)
    for norm in ("l2", "linf"):
        assert (radii[1.0, norm] > 0).sum() > 20
        np.testing.assert_allclose(radii[2.0**-700, norm], radii[1.0, norm], rtol=1e-12)


def test_rounding_in_float32_is_never_certified_away():
    """With cancelling coefficients, float32 gets the sign of tiny margins wrong: such points
    must get no radius, and every certified point has the exact model's sign."""
    rng = np.random.default_rng(1)
    base = rng.random((20, 6))
    vectors = np.vstack([base, base + 1e-5])
    coefficients = np.concatenate([np.full(20, 3e7), np.full(20, -3e7)])
    store = build("rbf", 1.0, vectors, coefficients, "float32")
    X = rng.random((30000, 6))
    computed = store.values(X)
    S = store.vectors.astype(float)
    exact = np.exp(-((X[:, None] - S[None]) ** 2).sum(axis=2)) @ store.coefficients
    wrong = np.sign(computed) != np.sign(exact)
    assert wrong.any()  # float32 really does flip some of them
    radii = support_radii(store, np.abs(computed), X, "l2")
    assert (radii[wrong] == 0).all()
    assert (np.sign(computed) == np.sign(exact))[radii > 0].all()
    assert (radii > 0).any()


def test_margins_and_edge_cases():
    store = build("rbf", 1.0, np.array([[0.0, 0.0]]), [1.0])
    X = np.array([[0.0, 0.0], [0.1, 0.0], [3.0, 3.0]])
    radii = support_radii(store, np.array([0.5, 0.0, -0.1]), X, "l2", bias=-0.5)
    assert radii[0] > 0 and radii[1] == 0 and radii[2] == 0
    empty = SupportVectors("rbf", 1.0, 4)
    empty.start()
    empty.add_inputs(2)
    radii = support_radii(empty, np.array([0.3, -0.3]), X[:2], "linf", bias=0.3)
    assert radii.tolist() == [math.inf, 0.0]
    # Inputs the store does not know count as zero-valued columns of its vectors.
    wide = np.hstack([X, np.array([[0.0], [0.0], [0.0]])])
    narrow_radii = support_radii(store, np.array([0.5, 0.1, 0.1]), X, "l2", bias=-0.5)
    wide_radii = support_radii(store, np.array([0.5, 0.1, 0.1]), wide, "l2", bias=-0.5)
    np.testing.assert_allclose(wide_radii, narrow_radii, rtol=1e-6)


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_a_sample_without_inputs_is_certified_at_any_radius(norm):
    """A model that learned only empty samples stores vectors of no inputs; certifying an empty
    sample (which has nothing an attacker may move) raised numpy's 'zero-size array to
    reduction operation maximum'."""
    from river_advsvm import AdvKernelSVM

    model = AdvKernelSVM(gamma=2.0, budget=8, seed=1)
    for y in [True, False, True]:
        model.learn_one({}, y)
    assert model.n_support_vectors > 0 and model.decision_one({}) > 0
    assert model.certified_radius_one({}, True, norm=norm) == math.inf
    assert model.certified_radius_one({}, False, norm=norm) == 0.0
    assert model.certified_radius_one({}, True, norm=norm, bounds=(0.0, 1.0)) == math.inf
    import pandas as pd

    radii = model.certified_radius_many(pd.DataFrame(index=["a", "b"]), [True, False], norm=norm)
    assert radii.tolist() == [math.inf, 0.0]


@pytest.mark.parametrize(
    "bad",
    [
        dict(norm="l1"),
        dict(X=np.zeros((2, 1))),
        dict(margins=np.zeros(3)),
        dict(scale=np.array([1.0, 0.0])),
        dict(scale=np.array([1.0])),
        dict(scale=np.array([1.0, math.nan])),
        dict(bounds=(1.0, 0.0)),
        dict(X=np.array([[0.0, math.inf], [0.0, 0.0]])),
    ],
)
def test_bad_arguments_are_refused(bad):
    store = build("rbf", 1.0, np.array([[0.0, 0.0]]), [1.0])
    arguments = dict(margins=np.ones(2), X=np.zeros((2, 2)), norm="l2") | bad
    with pytest.raises(ValueError):
        support_radii(store, **arguments)


def bound_values(bound, store, X, margins, norm, r, bias=0.0, q=None, bounds=None):
    """One bound's lower bound of `y g` over the ball of radius `r` around each row of `X`
    (`bound`: 'taylor', or the remainders of the exponential bound: 'exponential', 'second
    order' or both in a tuple), as `support_radii` evaluates it."""
    from river_advsvm.support_certificate import bounds as sb
    from river_advsvm.support_certificate import points as sp

    q = np.ones(X.shape[1]) if q is None else q
    model = sp.Model(store, len(q), bias)
    ball = sp.Ball(norm, q, bounds, True, X)
    chunk = sp.Chunk(model, ball, sp.Rounding(model, q), X, margins)
    taylor = sb.TaylorBound(chunk)
    r = np.full(len(X), float(r))
    if bound == "taylor":
        return taylor.slack(r, np.arange(len(X)))
    remainders = (bound,) if isinstance(bound, str) else bound
    return sb.ExponentialBound(chunk, taylor).slack(r, np.arange(len(X)), remainders)


@settings(max_examples=200, deadline=None)
@given(
    d=st.integers(1, 8),
    n=st.integers(1, 8),
    gamma=st.floats(0.1, 30.0),
    radius=st.floats(1e-3, 0.5),
    norm=st.sampled_from(["l2", "linf"]),
    boxed=st.booleans(),
    scaled=st.booleans(),
    dtype=st.sampled_from(["float32", "float64"]),
    remainders=st.sampled_from(
        [("exponential",), ("second order",), ("exponential", "second order")]
    ),
    seed=st.integers(0, 2**31 - 1),
)
def test_the_exponential_bound_is_below_every_point_of_the_ball(
    d, n, gamma, radius, norm, boxed, scaled, dtype, remainders, seed
):
    """Facts 5 and 6 of `support_radii`: the bound's value at radius r, with either remainder
    or the smaller of the two, is a lower bound of the computed `y g` at every sampled point of
    the ball (and box), corners included."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.25, 4.0, d) if scaled else np.ones(d)
    bounds = (0.0, 1.0) if boxed and norm == "linf" else None
    store = build("rbf", gamma, rng.random((n, d)) * q, rng.normal(0, 2, n), dtype)
    bias = float(rng.normal(0, 0.5))
    model = Model(store, bias, q)
    X = rng.random((6, d))
    g = model.decision_many(X)
    y = np.where(g > 0, 1.0, -1.0)
    lower = bound_values(remainders, store, X * q, y * g, norm, radius, bias, q, bounds)
    assert not np.isnan(lower).any()
    event(f"{remainders}: " + ("some positive" if (lower > 0).any() else "none positive"))
    for i in range(len(X)):
        points = samples_in_ball(rng, X[i], radius, norm, bounds, n=500 if d > 4 else 2000)
        assert (y[i] * model.decision_many(points) >= lower[i]).all()
        assert lower[i] <= y[i] * g[i]


def test_the_exponential_bound_certifies_where_the_curvature_bound_cannot(digits_1v7):
    """A model learned on digits (64 pixels, ~700 vectors of both signs), L-inf 0.1 in the
    pixel box: the Taylor bound's curvature term (every vector at its worst over the ball)
    gives away more than twice what the exponential remainder does, which certifies most
    points (a reference run: 94.5% against 15.6%); no attack flips a certified point."""
    from conftest import learn_stream
    from river_advsvm import AdvKernelSVM, certify

    X_train, X_test, y_train, y_test = digits_1v7
    model = learn_stream(AdvKernelSVM(seed=0), X_train, y_train)
    seen = {}

    def spy(store, margins, X, norm, **kwargs):
        seen.update(store=store, margins=margins, X=X, **kwargs)
        return support_radii(store, margins, X, norm, **kwargs)

    certify.support_radii, original = spy, certify.support_radii
    try:
        radii = model.certified_radius_many(X_test, y_test, norm="linf", bounds=(0.0, 1.0))
    finally:
        certify.support_radii = original
    right = seen["margins"] > 0
    X, m = seen["X"][right], seen["margins"][right]
    arguments = (seen["store"], X, m, "linf", 0.1, seen["bias"], seen["scale"], (0.0, 1.0))
    exponential = bound_values(("exponential",), *arguments)
    taylor = bound_values("taylor", *arguments)
    assert np.median(m - taylor) > 2 * np.median(m - exponential)
    assert np.mean(exponential > 0) > 0.85 > 0.5 > np.mean(taylor > 0)
    assert np.mean(radii >= 0.1) >= np.mean(exponential > 0) * right.mean() - 1e-12
    certified = radii >= 0.1
    attack = PGD(epsilon=0.1, norm="linf", steps=20, step_size=0.025)
    fooled = attack.run(model, X_test[certified], y_test[certified]).fooled
    assert not fooled.any()


def test_the_second_order_remainder_keeps_vectors_of_both_signs_together():
    """Pairs of vectors of opposite sign a little apart (the shape adversarial training leaves
    near the boundary): the exponential remainder charges every vector that pulls the margin
    down, the second-order one lets the pairs cancel in `M`, and certifies where the former
    cannot; no attack flips a point within the radius `support_radii` returns."""
    rng = np.random.default_rng(3)
    d, pairs = 12, 30
    centers = rng.random((pairs, d))
    vectors = np.vstack([centers, np.clip(centers + rng.normal(0, 0.03, (pairs, d)), 0, 1)])
    coefficients = np.concatenate([np.full(pairs, 2.0), np.full(pairs, -1.8)])
    store = build("rbf", 0.5, vectors, coefficients, "float32")
    model = Model(store, -0.3, np.ones(d))
    X = np.clip(centers[:10] + rng.normal(0, 0.05, (10, d)), 0, 1)
    g = model.decision_many(X)
    y = np.where(g > 0, 1.0, -1.0)
    radius = 0.12
    arguments = (store, X, y * g, "linf", radius, -0.3, None, (0.0, 1.0))
    exponential = bound_values(("exponential",), *arguments)
    second = bound_values(("second order",), *arguments)
    both = bound_values(("exponential", "second order"), *arguments)
    np.testing.assert_array_equal(both, np.maximum(exponential, second))
    assert (second > exponential).all()
    assert (second > 0).all() and (exponential <= 0).all()
    radii = support_radii(store, y * g, X, "linf", bias=-0.3, bounds=(0.0, 1.0))
    assert (radii[second > 0] >= radius).all()
    for i in np.flatnonzero(radii > 0):
        r = float(radii[i])
        batch = np.repeat(X[i : i + 1], 4, axis=0)
        for start in (False, True):
            attack = PGD(epsilon=r, norm="linf", steps=100, step_size=r / 20,
                         random_start=start, seed=i)
            assert not attack.run(model, batch, np.repeat(y[i], 4)).fooled.any()


def test_the_verified_eigenvalue_is_a_lower_bound():
    """On an integer matrix (held exactly) with known eigenvalues: the tridiagonal 2, -1
    matrix minus 3 I has `lambda_min = -1 - 2 cos(pi / (n + 1))`."""
    from river_advsvm.support_certificate.bounds import verified_lowest_eigenvalue

    n = 60
    M = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1) - 3 * np.eye(n)
    exact = -1 - 2 * math.cos(math.pi / (n + 1))
    lower = verified_lowest_eigenvalue(M)
    assert exact - 1e-6 <= lower <= exact - 1e-12
    assert verified_lowest_eigenvalue(np.zeros((0, 0))) == 0.0
    assert verified_lowest_eigenvalue(np.array([[1.0, math.nan], [math.nan, 1.0]])) == -math.inf


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_the_radius_of_a_function_as_steep_as_its_norm_allows_is_within_the_exact_one(kernel):
    """`f = k(z1, .) - k(z0, .)` with `z0 = 0`, `z1 = 1` in one input: at `x = z0`, `f` changes
    by `2 (1 - kappa)` towards `z1`, which is `||f|| sqrt(2 - 2 kappa)` exactly (the kernel-norm
    bound is tight there), and `f` is 0 at the midpoint 0.5. The certified radius of `x` is at
    most 0.5 however the bounds combine (sound), and at least the norm bound's own radius
    (solved by hand)."""
    store = build(kernel, 1.0, np.array([[0.0], [1.0]]), [-1.0, 1.0])
    kappa = math.exp(-1.0)  # k(z0, z1): distance 1 (squared or not)
    margin = 1.0 - kappa  # y g(x) at x = z0, label negative
    norm = math.sqrt(2.0 - 2.0 * kappa)
    assert store.norm == pytest.approx(norm, rel=1e-12)
    # The norm bound's radius: margin = ||f|| sqrt(2 - 2 k(r)), k(r) = exp(-r^2) or exp(-r).
    k_r = 1.0 - (margin / norm) ** 2 / 2.0
    by_norm = math.sqrt(-math.log(k_r)) if kernel == "rbf" else -math.log(k_r)
    for ball in ("l2", "linf"):  # (one input: the two balls are one)
        (radius,) = support_radii(store, margins=np.array([margin]), X=np.array([[0.0]]),
                                  norm=ball)
        assert by_norm * (1 - 1e-6) <= radius <= 0.5


@pytest.mark.parametrize("size", [1, 2, 127, 128, 129, 300])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_the_norm_bound_is_the_norm_up_to_its_rounding(kernel, size):
    """`||f||` from the whole kernel matrix, each distance summed from its differences and the
    quadratic form with `math.fsum`, against the bound the certificate computes block by
    block (sizes around the block of rows, so that its triangle and its partial last block
    are both checked): never below, and above only by its rounding allowance."""
    from river_advsvm.support_certificate.points import norm_upper_bound

    rng = np.random.default_rng(size)
    vectors = rng.normal(size=(size, 5))
    coefficients = rng.normal(size=size)
    store = build(kernel, 0.3, vectors, coefficients)
    store.scale(0.75)
    S, a = store.vectors, store.coefficients
    gaps = S[:, None, :] - S[None, :, :]
    distances = (gaps**2).sum(axis=2) if kernel == "rbf" else np.abs(gaps).sum(axis=2)
    K = np.exp(-0.3 * distances)
    exact = math.sqrt(math.fsum((a[:, None] * K * a[None, :]).ravel()))
    weight = float(np.abs(a).sum())
    bound = norm_upper_bound(store)
    assert exact <= bound
    assert bound**2 - exact**2 <= 1e-12 * weight**2
