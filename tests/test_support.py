"""The support-vector store: exact values, norm, gradients, budget maintenance, averaging,
determinism and persistence, each against a brute-force reference on small data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_advsvm import support, support_budget, support_store
from river_advsvm.support import SupportVectors


def kernel_matrix(kernel, gamma, X, Y):
    X, Y = np.asarray(X, dtype=float), np.asarray(Y, dtype=float)
    if kernel == "rbf":
        return np.exp(-gamma * ((X[:, None, :] - Y[None]) ** 2).sum(axis=2))
    return np.exp(-gamma * np.abs(X[:, None, :] - Y[None]).sum(axis=2))


def exact_values(store, X):
    """f at the rows of X from the stored vectors and coefficients, in float64."""
    return kernel_matrix(store.kernel, store.gamma, X, store.vectors) @ store.coefficients


def exact_norm(store):
    S, a = store.vectors, store.coefficients
    return math.sqrt(max(a @ kernel_matrix(store.kernel, store.gamma, S, S) @ a, 0.0))


def learn(store, X, y, step=0.5, shrink=0.999, seed=None):
    """A hinge-loss SGD loop like the model's: value, shrink, add when active."""
    for x, label in zip(X, y):
        margin = label * store.value(x)
        store.scale(shrink)
        if margin < 1:
            store.add(step * label)


def stream(n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y = np.where(np.sin(5 * X[:, 0]) + X[:, 1] > 0.8, 1.0, -1.0)
    return X, y


def new_store(kernel="rbf", gamma=2.0, budget=None, policy="merge", dtype="float64", d=3):
    store = SupportVectors(kernel, gamma, budget, policy, dtype)
    store.start()
    store.add_inputs(d)
    return store


KINDS = [
    (kernel, policy, dtype)
    for kernel in ("rbf", "laplacian")
    for policy in ("merge", "remove")
    for dtype in ("float32", "float64")
]


# -- values, norm, gradients ----------------------------------------------------------------------


@pytest.mark.parametrize("kernel,policy,dtype", KINDS)
def test_values_and_norm_match_brute_force_after_merges_and_removals(kernel, policy, dtype):
    X, y = stream()
    store = new_store(kernel, budget=25, policy=policy, dtype=dtype)
    learn(store, X, y)
    assert store.size == 25
    assert store.n_merges + store.n_removals > 100
    if policy == "merge":
        assert store.n_merges > 0
    else:
        assert store.n_merges == 0
    Q = np.random.default_rng(1).random((50, 3))
    rtol = 1e-5 if dtype == "float32" else 1e-12
    scale = np.abs(store.coefficients).sum()
    np.testing.assert_allclose(store.values(Q), exact_values(store, Q), rtol=0, atol=rtol * scale)
    one = np.array([store.value(q) for q in Q])
    np.testing.assert_allclose(one, exact_values(store, Q), rtol=0, atol=rtol * scale)
    assert store.norm == pytest.approx(exact_norm(store), rel=1e-6 if dtype == "float32" else 1e-9)


@pytest.mark.parametrize("factor", [1e-70, 1e70, -1e-70])
def test_a_scale_folded_into_the_coefficients_keeps_the_norm(factor):
    """Past `SCALE_RANGE` the global scale is folded into the coefficients (and into the
    running `a^T K a`, by its square): the norm is `|factor|` times the one before, and the
    brute-force one over the folded coefficients, with no recomputation."""
    X, y = stream(n=60)
    store = new_store(budget=None)
    learn(store, X, y)
    before = store.norm
    store.scale(factor)
    assert store._scale == 1.0  # (folded)
    assert store.norm == pytest.approx(abs(factor) * before, rel=1e-12, abs=0)
    assert store.norm == pytest.approx(exact_norm(store), rel=1e-9, abs=0)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_tracked_norm_stays_exact_without_recomputation(kernel, monkeypatch):
    monkeypatch.setitem(support._RECOMPUTE_AFTER, kernel, 10**9)
    X, y = stream(n=1500, seed=3)
    for policy in ("merge", "remove"):
        store = new_store(kernel, budget=40, policy=policy)
        learn(store, X, y, shrink=0.995)
        assert store.n_merges + store.n_removals > 500
        # Merges store z rounded to the storage precision; the drift stays tiny anyway.
        assert store.norm == pytest.approx(exact_norm(store), rel=1e-8)
        store32 = new_store(kernel, budget=40, policy=policy, dtype="float32")
        learn(store32, X, y, shrink=0.995)
        assert store32.norm == pytest.approx(exact_norm(store32), rel=1e-4)


def test_global_scale_is_folded_before_it_underflows():
    store = new_store(budget=None)
    X, y = stream(n=30)
    learn(store, X, y)
    before = store.values(X[:5])
    for _ in range(40):
        store.scale(1e-10)
        store.scale(1e10)
    for _ in range(20):  # 1e-200 overall: the scale must have been folded into a
        store.scale(1e-10)
    assert 1e-64 <= abs(store._scale) <= 1e64
    np.testing.assert_allclose(store.values(X[:5]), before * 1e-200, rtol=1e-9)
    assert store.norm == pytest.approx(exact_norm(store), rel=1e-9)
    store.negate()
    np.testing.assert_allclose(store.values(X[:5]), -before * 1e-200, rtol=1e-9)
    store.scale(0.0)
    assert store.size == 0 and store.norm == 0.0
    assert store.value(X[0]) == 0.0


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_gradients_match_finite_differences(kernel):
    X, y = stream(n=200)
    store = new_store(kernel, budget=30)
    learn(store, X, y)
    rng = np.random.default_rng(5)
    V, U = rng.random((6, 3)), rng.random((6, 2))
    G, GU = store.gradients(V, U)
    step = 1e-6
    for j in range(5):
        E = np.zeros((6, 5))
        E[:, j] = step
        full_plus, full_minus = np.hstack([V, U]) + E, np.hstack([V, U]) - E
        f_plus = store.values(full_plus[:, :3], full_plus[:, 3:])
        f_minus = store.values(full_minus[:, :3], full_minus[:, 3:])
        expected = (f_plus - f_minus) / (2 * step)
        got = G[:, j] if j < 3 else GU[:, j - 3]
        # The Laplacian kernel has kinks where a coordinate equals a vector's: none here.
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_unknown_columns_count_as_zero_in_the_vectors():
    X, y = stream(n=100)
    for kernel in ("rbf", "laplacian"):
        store = new_store(kernel)
        learn(store, X, y)
        U = np.random.default_rng(2).random((4, 2))
        V = X[:4]
        wide = np.hstack([V, U])
        padded = np.hstack([store.vectors, np.zeros((store.size, 2))])
        expected = kernel_matrix(kernel, store.gamma, wide, padded) @ store.coefficients
        np.testing.assert_allclose(store.values(V, U), expected, rtol=1e-12)


def test_the_same_input_twice_is_stored_once():
    store = new_store()
    x = np.array([0.1, 0.2, 0.3])
    store.value(x)
    store.add(1.0)
    store.value(x)
    store.add(0.5)
    assert store.size == 1
    assert store.coefficients.tolist() == [1.5]
    assert store.norm == pytest.approx(1.5)


def test_protocol_misuse_is_refused():
    store = new_store()
    with pytest.raises(RuntimeError):
        store.add(1.0)
    store.value(np.zeros(3))
    store.add_inputs(1)  # the remembered row no longer has all columns
    with pytest.raises(RuntimeError):
        store.add(1.0)
    with pytest.raises(ValueError):
        store.value(np.zeros(3))
    store.value(np.zeros(4))
    with pytest.raises(ValueError):
        store.add(math.nan)
    with pytest.raises(ValueError):
        store.scale(math.inf)
    with pytest.raises(ValueError):
        store.values(np.zeros((2, 3)))
    for bad in [
        dict(kernel="poly"),
        dict(gamma=0.0),
        dict(gamma=math.inf),
        dict(budget=0),
        dict(budget=2.5),
        dict(policy="drop"),
        dict(dtype="float16"),
    ]:
        kwargs = dict(kernel="rbf", gamma=1.0, budget=4) | bad
        with pytest.raises(ValueError):
            SupportVectors(**kwargs)


# -- budget maintenance ---------------------------------------------------------------------------


def dense_best_merge(kernel, gamma, x_m, a_m, x_n, a_n):
    """The smallest weight degradation over a dense grid of h, by brute force in the kernel."""
    hs = np.linspace(0.0, 1.0, 20001)
    Z = hs[:, None] * x_m + (1 - hs[:, None]) * x_n
    k_m = kernel_matrix(kernel, gamma, Z, x_m[None])[:, 0]
    k_n = kernel_matrix(kernel, gamma, Z, x_n[None])[:, 0]
    a_z = a_m * k_m + a_n * k_n
    kappa = kernel_matrix(kernel, gamma, x_m[None], x_n[None])[0, 0]
    loss = a_m**2 + a_n**2 + 2 * a_m * a_n * kappa - a_z**2
    best = int(np.argmin(loss))
    return loss[best], hs[best], a_z[best]


def degradation_of(store_before, store_after):
    """||f_before - f_after||^2 by brute force over both sets of vectors."""
    S = np.vstack([store_before.vectors, store_after.vectors]).astype(float)
    a = np.concatenate([store_before.coefficients, -store_after.coefficients])
    return float(a @ kernel_matrix(store_before.kernel, store_before.gamma, S, S) @ a)


def clone(store):
    scalars, arrays = store.state()
    twin = SupportVectors(store.kernel, store.gamma, store.budget, store.policy, store.dtype)
    twin.restore(scalars, arrays, store.n_inputs)
    return twin


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
@pytest.mark.parametrize("seed", range(6))
def test_merge_picks_the_partner_and_point_a_dense_search_would(kernel, seed):
    rng = np.random.default_rng(seed)
    gamma = [0.3, 1.0, 4.0][seed % 3]
    store = new_store(kernel, gamma=gamma, budget=8, d=2)
    for _ in range(8):
        store.value(rng.random(2))
        store.add(rng.choice([-1, 1]) * rng.uniform(0.5, 2.0))
    before = clone(store)
    x, c = rng.random(2), 0.05 * np.sign(before.coefficients[0])
    store.value(x)
    store.add(c)  # the smallest coefficient: it is merged
    assert store.n_merges == 1 and store.size == 8
    # Every same-sign partner, searched densely.
    S = np.vstack([before.vectors, x[None]])
    a = np.append(before.coefficients, c)
    m = int(np.argmin(np.abs(a)))
    losses = [
        dense_best_merge(kernel, gamma, S[m], a[m], S[n], a[n])[0]
        for n in range(len(a))
        if n != m and a[n] * a[m] > 0
    ]
    assert store.degradation <= min(losses) + 1e-9 * a[m] ** 2
    assert store.degradation >= min(losses) - 1e-6 * a[m] ** 2
    # What the store reports is what really changed.
    after_exact = clone(store)
    full_before = new_store(kernel, gamma=gamma, budget=None, d=2)
    for row, coefficient in zip(S, a):
        full_before.value(row)
        full_before.add(coefficient)
    assert degradation_of(full_before, after_exact) == pytest.approx(store.degradation, rel=1e-6)
    assert store.norm == pytest.approx(exact_norm(store), rel=1e-10)


def test_merge_search_finds_the_best_h_for_every_partner():
    rng = np.random.default_rng(7)
    A = 0.7
    B = rng.uniform(0.7, 3.0, 200)
    D = np.concatenate([rng.uniform(0, 0.5, 50), rng.uniform(0.5, 5, 100), rng.uniform(5, 40, 50)])
    h, p = support_budget.merge_points("rbf", A, B, D)
    hs = np.linspace(0, 1, 20001)
    P = A * np.exp(-D[:, None] * (1 - hs) ** 2) + B[:, None] * np.exp(-D[:, None] * hs**2)
    best = P.max(axis=1)
    # Every partner that could win is refined to the dense optimum; the others are within
    # the grid's bound of it.
    constant = A * A + B * B + 2 * A * B * np.exp(-D)
    winner = int(np.argmin(constant - best**2))
    assert p[winner] == pytest.approx(best[winner], rel=1e-9)
    assert (p <= best * (1 + 1e-8)).all()  # (the grid's max is a little below the true one)
    np.testing.assert_allclose(
        p, A * np.exp(-D * (1 - h) ** 2) + B * np.exp(-D * h * h), rtol=1e-12
    )


def test_laplacian_merge_point_is_the_best_anywhere():
    """For the Laplacian kernel no point beats the larger vector (proved in the module docs)."""
    rng = np.random.default_rng(3)
    gamma = 1.5
    for _ in range(20):
        x_m, x_n = rng.random(3), rng.random(3)
        a_m, a_n = rng.uniform(0.1, 1.0), rng.uniform(1.0, 2.0)
        _, p = support_budget.merge_points(
            "laplacian", a_m, np.array([a_n]), gamma * np.array([np.abs(x_m - x_n).sum()])
        )
        around = rng.random((4000, 3)) * 1.4 - 0.2
        Z = np.vstack([around, x_m + (x_n - x_m) * rng.random((1000, 1))])
        values = a_m * kernel_matrix("laplacian", gamma, Z, x_m[None])[:, 0]
        values += a_n * kernel_matrix("laplacian", gamma, Z, x_n[None])[:, 0]
        assert values.max() <= p[0] * (1 + 1e-12)


def test_remove_drops_the_smallest_coefficient_exactly():
    rng = np.random.default_rng(4)
    store = new_store(budget=5, policy="remove", d=2)
    for _ in range(5):
        store.value(rng.random(2))
        store.add(rng.uniform(0.5, 1.0) * rng.choice([-1, 1]))
    before = clone(store)
    x = rng.random(2)
    store.value(x)
    store.add(0.01)
    # The newcomer had the smallest coefficient: f is what it was, scaled coefficients intact.
    assert store.n_removals == 1
    np.testing.assert_array_equal(np.sort(store.coefficients), np.sort(before.coefficients))
    assert store.degradation == pytest.approx(0.01**2)
    store.scale(0.5)
    store.value(rng.random(2))
    store.add(2.0)
    smallest = np.min(np.abs(before.coefficients)) * 0.5
    assert store.degradation == pytest.approx(smallest**2)
    assert store.total_degradation == pytest.approx(0.01**2 + smallest**2)
    assert store.norm == pytest.approx(exact_norm(store), rel=1e-10)


def dense_merge_points(A, B, D, n=200001):
    """max over a dense grid of h of A exp(-D (1 - h)^2) + B exp(-D h^2), per partner."""
    hs = np.linspace(0.0, 1.0, n)
    P = A * np.exp(-D[:, None] * (1 - hs) ** 2) + B[:, None] * np.exp(-D[:, None] * hs**2)
    return P.max(axis=1)


@pytest.mark.parametrize("A", [0.05, 0.7, 1.0, 2.5])
def test_merge_points_reach_the_maximum_whichever_coefficient_is_larger(A):
    rng = np.random.default_rng(11)
    B = np.concatenate([rng.uniform(0.05, 3.0, 150), [A, A, A]])
    D = np.concatenate([rng.uniform(0, 3, 100), rng.uniform(3, 60, 50), [0.0, 2.0, 2.5]])
    h, p = support_budget.merge_points("rbf", A, B, D)
    best = dense_merge_points(A, B, D)
    assert (p >= best * (1 - 1e-14)).all()  # never below a dense search
    np.testing.assert_allclose(
        p, A * np.exp(-D * (1 - h) ** 2) + B * np.exp(-D * h * h), rtol=1e-14
    )
    # A maximum, not merely a value: no point of the segment is higher.
    assert (p <= best * (1 + 1e-9)).all()


@pytest.mark.parametrize("A", [0.5, 1.0, 2.0])
def test_a_partner_infinitely_far_merges_at_the_larger_vector(A):
    """An exponent past float32's range is kept as +inf (a kernel value of 0): the merge point
    is then the larger vector, exactly, as for any exponent far past 745, in the vectorised
    search and in the one for a single partner."""
    B = np.array([0.25, 1.0, 3.0])
    for D in (np.full(3, np.inf), np.full(3, 1e6)):
        h, p = support_budget.merge_points("rbf", A, B, D)
        np.testing.assert_array_equal(h, np.where(B < A, 1.0, 0.0))
        np.testing.assert_array_equal(p, np.maximum(A, B))
        for j in range(3):
            assert support_budget._merge_point(A, float(B[j]), float(D[j]))[:2] == (h[j], p[j])


@pytest.fixture(params=["exhaustive", "pruned"])
def partner_search(request, monkeypatch):
    """best_merge solving every partner, or only those its bound says can win."""
    if request.param == "pruned":
        monkeypatch.setattr(support_budget, "EXHAUSTIVE_PARTNERS", 0)


@pytest.mark.parametrize("seed", range(8))
def test_best_merge_is_the_best_of_an_exhaustive_search(seed, partner_search):
    rng = np.random.default_rng(seed)
    A = rng.uniform(0.01, 1.0)
    n = [3, 9, 40, 300][seed % 4]
    B = A * rng.uniform(1.0, [1.05, 3.0, 30.0, 1.3][seed // 2 % 4], n)
    D = rng.uniform(0.0, [0.5, 3.0, 8.0, 1.5][seed % 4], n)
    if seed % 3 == 0:
        D[rng.integers(n)] = D.min()  # a tie in distance
    index, h, p, loss = support_budget.best_merge("rbf", A, B, D)
    hs, ps = support_budget.merge_points("rbf", A, B, D)
    losses = np.maximum(A * A + B * B + 2 * A * B * np.exp(-D) - ps * ps, 0.0)
    assert loss <= losses.min() + 1e-12 * (A + B[index]) ** 2
    assert index == int(np.argmin(losses)) or losses[index] <= losses.min() * (1 + 1e-9)
    assert p == pytest.approx(ps[index], rel=1e-12) and h == pytest.approx(hs[index], abs=1e-6)


def test_best_merge_finds_a_partner_beyond_the_nearest_ones(partner_search):
    """Near partners with large coefficients lose more than a farther one of equal weight."""
    A = 0.2
    D = np.concatenate([np.linspace(0.10, 0.12, 30), [0.13], np.linspace(0.5, 4.0, 100)])
    B = np.concatenate([np.full(30, 100 * A), [A], np.full(100, A)])
    index, h, p, loss = support_budget.best_merge("rbf", A, B, D)
    assert index == 30 and h == pytest.approx(0.5)
    assert loss == pytest.approx(2 * A * A * np.expm1(-0.065) ** 2, rel=1e-9)


def test_folding_the_scale_between_value_and_add_keeps_the_norm_exact():
    store = new_store(budget=None, d=2)
    rng = np.random.default_rng(0)
    for _ in range(5):
        store.value(rng.random(2))
        store.add(1.0)
    store.scale(1e-60)
    store.value(rng.random(2))
    store.scale(1e-10)  # beyond the range: folded into the coefficients, between value and add
    store.add(1e-70)
    assert store.norm == pytest.approx(exact_norm(store), rel=1e-9)


def test_merge_without_a_same_sign_partner_removes():
    store = new_store(budget=2, d=1)
    for x, c in [(0.0, 1.0), (1.0, 1.0), (0.5, -0.1)]:
        store.value(np.array([x]))
        store.add(c)
    assert (store.n_merges, store.n_removals) == (0, 1)
    assert sorted(store.coefficients.tolist()) == [1.0, 1.0]


# -- averaging ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_average_is_the_weighted_sum_of_functions(kernel):
    stores = []
    for seed in range(3):
        X, y = stream(n=120, seed=seed)
        store = new_store(kernel, budget=1000, d=3)
        learn(store, X, y, shrink=0.99)
        stores.append(store)
    stores[1].negate()
    stores[2].add_inputs(1)  # a worker that knows one more column
    weights = [0.5, 0.3, 0.2]
    shared = clone(stores[0])  # the same vectors in two workers combine exactly
    merged = SupportVectors.average(stores + [shared], weights + [0.25])
    Q = np.random.default_rng(9).random((30, 4))
    # Columns a worker does not know are 0 in its vectors, not absent from the input.
    expected = sum(
        w * s.values(Q[:, : s.n_inputs], Q[:, s.n_inputs :]) for s, w in zip(stores, weights)
    )
    expected += 0.25 * shared.values(Q[:, :3], Q[:, 3:])
    assert merged.size <= sum(s.size for s in stores)
    np.testing.assert_allclose(merged.values(Q), expected, rtol=1e-12, atol=1e-12)
    assert merged.norm == pytest.approx(exact_norm(merged), rel=1e-10)
    # Down to a smaller budget: maintenance runs, the norm stays exact.
    for s in stores:
        s.budget = 40
    small = SupportVectors.average(stores, weights)
    assert small.size == 40 and small.n_merges > 0
    assert small.norm == pytest.approx(exact_norm(small), rel=1e-9)


def test_average_combines_equal_vectors_and_orders_them_whatever_the_stores_order():
    """Equal vectors are one, -0.0 and 0.0 equal as numbers; the fold's vectors come in one
    order whatever the order of its stores (a model learning on depends on that order)."""
    a, b = new_store(budget=None, d=2), new_store(budget=None, d=2)
    for store, rows in ((a, [[0.0, 1.0], [3.0, 0.5], [1.0, 2.0]]),
                        (b, [[1.0, 2.0], [-0.0, 1.0], [2.0, 2.0]])):
        for row in rows:
            store.value(np.array(row))
            store.add(1.0)
    folds = [SupportVectors.average([a, b], [0.5, 0.25]),
             SupportVectors.average([b, a], [0.25, 0.5])]
    for fold in folds:
        by_row = {tuple(v.tolist()): c for v, c in zip(fold.vectors + 0.0, fold.coefficients)}
        assert by_row == pytest.approx({(0.0, 1.0): 0.75, (3.0, 0.5): 0.5, (1.0, 2.0): 0.75,
                                        (2.0, 2.0): 0.25}, rel=1e-12)
    assert np.array_equal(folds[0].vectors, folds[1].vectors)
    assert np.array_equal(folds[0].coefficients, folds[1].coefficients)


def test_average_refuses_mismatched_stores():
    a, b = new_store(gamma=1.0), new_store(gamma=2.0)
    with pytest.raises(ValueError):
        SupportVectors.average([a, b], [0.5, 0.5])
    with pytest.raises(ValueError):
        SupportVectors.average([a], [0.5, 0.5])
    with pytest.raises(ValueError):
        SupportVectors.average([a], [math.nan])


# -- determinism ----------------------------------------------------------------------------------


def test_value_is_bitwise_reproducible_at_any_alignment():
    X, y = stream(n=300, d=37)
    store = new_store(budget=64, d=37, dtype="float32")
    learn(store, X, y)
    reference = [store.value(x) for x in X[:20]]
    buffer = np.zeros(37 * 40 + 8)
    for offset in range(1, 8):
        rows = [buffer[offset + 37 * i : offset + 37 * (i + 1)] for i in range(20)]
        for row, x in zip(rows, X[:20]):
            row[:] = x
        assert [store.value(row) for row in rows] == reference
    # values() of a single row is value(), bit for bit.
    assert [float(store.values(x[None])[0]) for x in X[:20]] == reference


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_state_is_the_same_whether_columns_arrive_late_or_at_once(dtype):
    d = 40
    X, y = stream(n=300, d=d, seed=2)
    X[:100, 25:] = 0.0  # the first rows do not have the last 15 inputs
    at_once = new_store(budget=50, d=d, dtype=dtype)
    learn(at_once, X, y)
    grown = new_store(budget=50, d=25, dtype=dtype)
    learn(grown, X[:100, :25], y[:100])
    for j in range(25, d):  # the columns as a model registers them, one by one
        grown.add_inputs(1)
    learn(grown, X[100:], y[100:])
    for name, value in at_once.state()[0].items():
        assert grown.state()[0][name] == value, name
    for name, array in at_once.state()[1].items():
        np.testing.assert_array_equal(grown.state()[1][name], array)
    assert [grown.value(x) for x in X[:10]] == [at_once.value(x) for x in X[:10]]


def test_a_row_scored_with_unknown_columns_gets_the_bits_it_gets_once_they_are_known():
    X, y = stream(n=200, d=20)
    store = new_store(budget=50, d=20, dtype="float32")
    learn(store, X, y)
    row = np.random.default_rng(1).random(23)
    before = float(store.values(row[None, :20], row[None, 20:])[0])
    store.add_inputs(3)
    assert store.value(row) == before



@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(-1e6, 1e6, width=32, allow_subnormal=False), min_size=0,
                       max_size=300),
       zeros=st.lists(st.integers(0, 300), max_size=40),
       dtype=st.sampled_from(["float32", "float64"]))
def test_squared_norm_keeps_its_bits_whatever_zeros_the_row_has(values, zeros, dtype):
    # A vector's norm is computed once, when it is stored; its restored copy, the same row in a
    # wider batch of learn_many, and the row once the model knows more columns must agree.
    row = np.array(values, dtype=dtype)
    padded = row.tolist()
    for position in zeros:
        padded.insert(min(position, len(padded)), 0.0)
    padded = np.array(padded, dtype=dtype)
    norm = support_store._squared_norms(row)
    assert support_store._squared_norms(padded) == norm
    assert math.isclose(norm, float(np.square(row, dtype=np.float64).sum()), rel_tol=1e-12,
                        abs_tol=1e-300)
    matrix = np.zeros((3, len(padded) + 2), dtype=dtype)
    matrix[1, : len(padded)] = padded
    assert support_store._squared_norms(matrix).tolist() == [0.0, norm, 0.0]

# -- persistence ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel,policy,dtype", KINDS)
def test_restored_store_continues_bit_for_bit(kernel, policy, dtype):
    X, y = stream(n=600)
    store = new_store(kernel, budget=20, policy=policy, dtype=dtype)
    learn(store, X[:300], y[:300])
    twin = clone(store)
    learn(store, X[300:], y[300:])
    learn(twin, X[300:], y[300:])
    assert store.state()[0] == twin.state()[0]
    for name, array in store.state()[1].items():
        np.testing.assert_array_equal(twin.state()[1][name], array)
    assert store.norm == twin.norm


def hostile_states(store):
    """(description, scalars, arrays, n_inputs) that must all be refused."""
    scalars, arrays = store.state()
    n = store.n_inputs
    size = scalars["size"]
    out = []

    def variant(label, n_inputs=n, **changes):
        s = dict(scalars)
        a = dict(arrays)
        for key, value in changes.items():
            (a if key in ("vectors", "alpha") else s)[key] = value
        out.append((label, s, a, n_inputs))

    vectors, alpha = arrays["vectors"], arrays["alpha"]
    variant("size beyond the budget", size=store.budget + 1)
    variant("size does not match the arrays", size=size - 1)
    variant("vectors of the wrong width", vectors=vectors[:, :-1])
    variant("vectors of the wrong dtype", vectors=vectors.astype(np.float16))
    variant("coefficients of the wrong length", alpha=alpha[:-1])
    variant("coefficients as ints", alpha=alpha.astype(np.int64))
    poisoned = vectors.copy()
    poisoned[1, 1] = np.nan
    variant("NaN vector", vectors=poisoned)
    variant("inf coefficient", alpha=np.where(np.arange(size) == 1, np.inf, alpha))
    variant("NaN scale", scale=math.nan)
    variant("zero scale", scale=0.0)
    variant("huge scale", scale=1e200)
    variant("NaN norm", squared_norm=math.nan)
    variant("norm inconsistent with the vectors", squared_norm=scalars["squared_norm"] * 2 + 1)
    variant("negative norm", squared_norm=-1.0)
    variant("another kernel", kernel="laplacian" if store.kernel == "rbf" else "rbf")
    variant("another gamma", gamma=store.gamma * 2)
    variant("another budget", budget=store.budget + 1)
    variant("another policy", policy="remove" if store.policy == "merge" else "merge")
    variant("size as a bool", size=True)
    variant("size as a float", size=float(size))
    variant("negative count", n_merges=-1)
    variant("count as a string", n_merges="3")
    variant("missing field", degradation=None)
    variant("negative degradation", degradation=-1.0)
    variant("reprocess cursor past the vectors", cursor=size)
    variant("negative reprocess cursor", cursor=-1)
    variant("reprocess cursor as a float", cursor=1.0)
    variant("more input columns than the model", n_inputs=n + 1)
    variant("a million columns claimed", n_inputs=10**6)
    out.append(("missing arrays", dict(scalars), {}, n))
    as_lists = {"vectors": vectors.tolist(), "alpha": alpha}
    out.append(("arrays not numpy", dict(scalars), as_lists, n))
    out.append(("scalars not a dict", [1, 2], arrays, n))
    return out


def test_hostile_states_are_refused_before_any_change():
    X, y = stream(n=200)
    store = new_store(budget=20)
    learn(store, X, y)
    for label, scalars, arrays, n_inputs in hostile_states(store):
        target = new_store(budget=20)
        target_state = target.state()
        with pytest.raises(ValueError):
            target.restore(scalars, arrays, n_inputs)
            pytest.fail(label)
        assert target.state()[0] == target_state[0], label


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(0, 30),
    n_inputs=st.integers(0, 6),
    claimed=st.integers(-3, 10**7),
    value=st.floats(allow_nan=True, allow_infinity=True),
)
def test_restore_never_accepts_an_inconsistent_size(size, n_inputs, claimed, value):
    store = SupportVectors("rbf", 1.0, 20, "merge", "float32")
    rng = np.random.default_rng(size)
    vectors = rng.random((size, n_inputs)).astype(np.float32)
    alpha = rng.normal(size=size)
    scalars = {
        "kernel": "rbf", "gamma": 1.0, "budget": 20, "policy": "merge", "dtype": "float32",
        "size": claimed, "n_inputs": n_inputs, "scale": 1.0, "squared_norm": value,
        "stored_since_norm": 0, "n_merges": 0, "n_removals": 0, "degradation": 0.0,
        "total_degradation": 0.0,
    }
    try:
        store.restore(scalars, {"vectors": vectors, "alpha": alpha}, n_inputs)
    except ValueError:
        return
    # Accepted: then everything was consistent.
    assert claimed == size <= 20 and math.isfinite(value)
    assert store.norm == pytest.approx(exact_norm(store), rel=1e-5, abs=1e-6)


# -- the kept kernel exponents ------------------------------------------------------------------


@pytest.fixture
def kept_exponents(monkeypatch):
    """Stores keep the exponent matrix whatever their number of inputs."""
    monkeypatch.setattr(support_store, "GRAM_MIN_INPUTS", 0)


def exact_exponents(store):
    S = store.vectors.astype(np.float64)
    if store.kernel == "rbf":
        return store.gamma * ((S[:, None, :] - S[None]) ** 2).sum(axis=2)
    return store.gamma * np.abs(S[:, None, :] - S[None]).sum(axis=2)


@pytest.mark.parametrize("kernel,policy,dtype", KINDS)
def test_kept_exponents_follow_the_vectors_through_merges(kernel, policy, dtype, kept_exponents,
                                                          monkeypatch):
    monkeypatch.setitem(support._RECOMPUTE_AFTER, kernel, 10**9)  # no refresh from the vectors
    X, y = stream(n=600, d=4)
    store = new_store(kernel, budget=20, policy=policy, dtype=dtype, d=4)
    learn(store, X, y)
    assert store.n_merges + store.n_removals > 200
    gram = store.state()[1]["gram"]
    tolerance = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(gram, exact_exponents(store), rtol=0, atol=tolerance)
    assert store.norm == pytest.approx(exact_norm(store), rel=1e-5 if dtype == "float32" else 1e-9)


def test_a_store_keeps_the_exponents_only_with_many_inputs():
    X, y = stream(n=300, d=support.GRAM_MIN_INPUTS)
    narrow = new_store(budget=20, d=support.GRAM_MIN_INPUTS - 1, dtype="float32")
    learn(narrow, X[:, :-1], y)
    wide = new_store(budget=20, d=support.GRAM_MIN_INPUTS, dtype="float32")
    learn(wide, X, y)
    assert "gram" not in narrow.state()[1]
    assert wide.state()[1]["gram"].shape == (20, 20)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_a_store_restored_without_its_exponents_rebuilds_them(kernel, kept_exponents):
    X, y = stream(n=400)
    store = new_store(kernel, budget=20, dtype="float32")
    learn(store, X[:200], y[:200])
    scalars, arrays = store.state()
    twin = SupportVectors(kernel, store.gamma, 20, "merge", "float32")
    twin.restore(scalars, {"vectors": arrays["vectors"], "alpha": arrays["alpha"]}, 3)
    learn(twin, X[200:], y[200:])
    assert twin.size == 20 and twin.n_merges > store.n_merges
    np.testing.assert_allclose(twin.state()[1]["gram"], exact_exponents(twin), rtol=0,
                               atol=1e-4)


def test_saved_exponents_that_do_not_fit_the_vectors_are_refused(kept_exponents):
    X, y = stream(n=200)
    store = new_store(budget=20)
    learn(store, X, y)
    scalars, arrays = store.state()
    gram = arrays["gram"]
    far = gram.copy()
    far[2, 5] = far[5, 2] = gram[2, 5] + 1.0
    negative = gram.copy()
    negative[1, 3] = -1.0
    diagonal = gram.copy()
    diagonal[4, 4] = 0.5
    poisoned = gram.copy()
    poisoned[0, 1] = np.nan
    overflowed = gram.copy()  # +inf stands for an exponent past the range, not a finite one
    overflowed[0, 1] = overflowed[1, 0] = np.inf
    for bad in [far, negative, diagonal, poisoned, overflowed, gram[:-1], gram.astype(np.float32),
                gram.tolist()]:
        target = new_store(budget=20)
        before = target.state()
        with pytest.raises(ValueError):
            target.restore(scalars, {**arrays, "gram": bad}, 3)
        assert target.state()[0] == before[0]


@pytest.mark.parametrize("A", [0.05, 0.7, 2.5])
def test_one_partner_in_floats_is_the_vectorised_solve(A):
    """best_merge solves a handful of partners one by one in Python floats: the same point."""
    rng = np.random.default_rng(12)
    B = np.concatenate([rng.uniform(0.05, 3.0, 60), [A, A, A, 1e-320]])
    D = np.concatenate([rng.uniform(0, 3, 30), rng.uniform(3, 800, 30), [0.0, 2.0, 2.5, 1.0]])
    hs, ps = support_budget.merge_points("rbf", A, B, D)
    losses = np.maximum(A * A + B * B + 2 * A * B * np.exp(-D) - ps * ps, 0.0)
    for b, d, h, p, loss in zip(B, D, hs, ps, losses):
        h1, p1, loss1 = support_budget._merge_point(A, float(b), float(d))
        if not (b == A and d == 2.0):  # (the double zero: p is flat, h converges slowly)
            assert h1 == pytest.approx(h, abs=1e-6)
        assert p1 == pytest.approx(p, rel=1e-12)
        assert loss1 == pytest.approx(loss, rel=1e-9, abs=1e-12 * (A + b) ** 2)


# -- reprocess -------------------------------------------------------------------------------------


def learn_and_reprocess(store, X, y, step=0.5, shrink=0.999, repeats=2):
    """`learn`, with `repeats` reprocess steps after each sample (bias fixed at 0)."""
    for x, label in zip(X, y):
        margin = label * store.value(x)
        store.scale(shrink)
        if margin < 1:
            store.add(step * label)
        for _ in range(repeats):
            store.reprocess(0.0, step)


@pytest.mark.parametrize("kernel,policy,dtype", KINDS)
@pytest.mark.parametrize("d", [3, support.GRAM_MIN_INPUTS])
def test_reprocess_steps_where_the_brute_force_margin_says(kernel, policy, dtype, d):
    """Each call visits the next stored vector, and grows its coefficient by `step y_j` exactly
    when the margin recomputed from all vectors is in [floor, 1); the norm follows."""
    X, y = stream(n=300, d=d)
    gamma = 2.0 * 3 / d
    store = new_store(kernel, gamma=gamma, budget=25, policy=policy, dtype=dtype, d=d)
    learn_and_reprocess(store, X[:200], y[:200])
    assert store.size == 25 and store.n_merges + store.n_removals > 0
    assert ("gram" in store.state()[1]) == (d >= support.GRAM_MIN_INPUTS)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    bias, step = 0.1, 0.25
    outcomes = set()
    for slack in np.resize([-0.2, 0.5, 2.5], 3 * store.size + 1):
        j = store._cursor if store._cursor < store.size else 0
        before = store.coefficients
        x_j = store.vectors[j].astype(np.float64)
        y_j = math.copysign(1.0, before[j])
        margin = y_j * (exact_values(store, x_j[None])[0] + bias) - slack
        tie = rtol * np.abs(before).sum()  # a tie within rounding may go either way
        got = store.reprocess(bias, step, slack)
        expected = before.copy()
        floor = support._REPROCESS_FLOOR
        if got:
            assert got == y_j and floor - tie <= margin < 1.0 + tie
            expected[j] += step * y_j
            outcomes.add("stepped")
        else:
            assert margin < floor + tie or margin >= 1.0 - tie
            outcomes.add("too wrong" if margin < floor else "beyond the margin")
        np.testing.assert_allclose(store.coefficients, expected, rtol=1e-12,
                                   atol=1e-12 * np.abs(before).sum())
        assert store.norm == pytest.approx(exact_norm(store), rel=1e-5 if dtype == "float32"
                                           else 1e-9)
    assert outcomes == {"stepped", "too wrong", "beyond the margin"}


def test_reprocess_visits_every_vector_in_turn_and_keeps_the_label_of_its_sign():
    store = new_store(budget=None)
    # Far apart (k = exp(-18) between them): each margin is its own coefficient.
    points = [([0.0, 0.0, 0.0], 1.0), ([3.0, 0.0, 0.0], -1.0), ([0.0, 3.0, 0.0], 1.0)]
    for x, c in points:
        store.value(np.array(x))
        store.add(0.01 * c)
    store.negate()  # f <- -f: the labels flip with the sign of s a_j
    labels = [store.reprocess(0.0, 0.5) for _ in range(9)]
    assert labels == [-1.0, 1.0, -1.0] * 2 + [0.0] * 3  # margins 0.01, 0.51, then 1.01
    np.testing.assert_allclose(store.coefficients, [-1.01, 1.01, -1.01])
    assert store.norm == pytest.approx(exact_norm(store), rel=1e-12)
    assert new_store().reprocess(0.0, 0.5) == 0.0


def test_revisits_start_where_they_are_pointed():
    store = new_store(budget=None)
    for x, c in [([0.0, 0.0, 0.0], 1.0), ([3.0, 0.0, 0.0], -1.0), ([0.0, 3.0, 0.0], 1.0)]:
        store.value(np.array(x))
        store.add(0.01 * c)
    store.revisit_from(7)  # 7 mod 3: the second vector, then the third
    assert [store.reprocess(0.0, 0.5) for _ in range(2)] == [-1.0, 1.0]
    np.testing.assert_allclose(store.coefficients, [0.01, -0.51, 0.51])
    empty = new_store()
    empty.revisit_from(5)
    assert empty.reprocess(0.0, 0.5) == 0.0


def test_value_then_reprocess_refuses_a_stale_add():
    """`add` after a reprocess step would use the sum over the old coefficients."""
    X, y = stream(n=20)
    store = new_store()
    learn(store, X, y)
    store.value(X[0])
    # Until the first step: a visit that takes none changes nothing, and `add` may follow it.
    steps = [store.reprocess(0.0, 0.5, slack) for slack in np.linspace(-2, 2, 4 * store.size)]
    assert any(steps)
    with pytest.raises(RuntimeError):
        store.add(1.0)
    store.value(X[0])
    store.add(1.0)


@pytest.mark.parametrize("kernel,policy,dtype", KINDS)
def test_restored_store_reprocesses_bit_for_bit(kernel, policy, dtype):
    X, y = stream(n=600)
    store = new_store(kernel, budget=20, policy=policy, dtype=dtype)
    learn_and_reprocess(store, X[:301], y[:301], repeats=3)
    assert store.state()[0]["cursor"] != 0
    twin = clone(store)
    learn_and_reprocess(store, X[301:], y[301:], repeats=3)
    learn_and_reprocess(twin, X[301:], y[301:], repeats=3)
    assert store.state()[0] == twin.state()[0]
    for name, array in store.state()[1].items():
        np.testing.assert_array_equal(twin.state()[1][name], array)


@settings(max_examples=40, deadline=None)
@given(
    A=st.floats(0.01, 2.0),
    ratios=st.lists(st.floats(1.0, 50.0), min_size=1, max_size=40),
    distances=st.lists(st.floats(0.0, 30.0), min_size=40, max_size=40),
)
def test_the_tabulated_bound_is_below_every_degradation(A, ratios, distances):
    """The bound `best_merge` prunes with: degradation >= A^2 L(D), L read on its grid at or
    below D (L grows with D); and the closed form it has up to D = 2, a merge loses at least
    what two equal coefficients would: A^2 l(min(D, 2))."""
    B = A * np.array(ratios)
    D = np.array(distances[: len(B)])
    _, p = support_budget.merge_points("rbf", A, B, D)
    best = np.maximum(dense_merge_points(A, B, D, 20001), p)
    loss = A * A + B * B + 2 * A * B * np.exp(-D) - best**2
    bound = 2 * A * A * np.expm1(-np.minimum(D, 2.0) / 2) ** 2
    assert (loss >= bound * (1 - 1e-9) - 1e-12 * (A + B) ** 2).all()
    grid, L = map(np.array, support_budget._equal_losses())
    below = L[np.searchsorted(grid, D, side="right") - 1]
    assert (loss >= A * A * (below - 1e-9) - 1e-12 * (A + B) ** 2).all()


def test_the_tabulated_bound_is_the_equal_coefficient_merge():
    grid, L = map(np.array, support_budget._equal_losses())
    assert (np.diff(L) >= 0).all() and L[0] == 0.0 and L[-1] == pytest.approx(1.0)
    small = grid <= 2.0  # the midpoint, in closed form
    np.testing.assert_allclose(L[small], 2 * np.expm1(-grid[small] / 2) ** 2, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(st.tuples(st.lists(st.floats(-1e6, 1e6), min_size=3, max_size=3),
                            st.booleans()), min_size=1, max_size=60),
    repeats=st.integers(0, 5),
    gamma=st.floats(1e-3, 1e3),
    step=st.floats(1e-3, 10.0),
)
def test_learning_with_reprocess_stays_finite(rows, repeats, gamma, step):
    store = new_store(gamma=gamma, budget=8, dtype="float32")
    X = np.array([r for r, _ in rows])
    y = np.array([1.0 if label else -1.0 for _, label in rows])
    learn_and_reprocess(store, X, y, step=step, repeats=repeats)
    assert np.isfinite(store.coefficients).all() and math.isfinite(store.norm)
    assert np.isfinite(store.values(X)).all()
    assert store.size <= 8


def test_a_vector_whose_input_came_with_both_labels_is_not_reprocessed():
    """Its coefficient is the net of both labels and its sign no label: steps by that sign
    pushed f towards whichever label led, for ever. One input with both labels is `mixed`,
    the others not; reprocess leaves it alone and steps the others."""
    store = new_store(budget=None)
    for x, c in [([0.0, 0.0, 0.0], 1.0), ([3.0, 0.0, 0.0], -1.0), ([0.0, 0.0, 0.0], -0.5)]:
        store.value(np.array(x))
        store.add(0.01 * c)
    assert store.size == 2 and store.mixed.tolist() == [True, False]
    assert [store.reprocess(0.0, 0.5) for _ in range(4)] == [0.0, -1.0, 0.0, -1.0]
    np.testing.assert_allclose(store.coefficients, [0.005, -1.01])
    twin = clone(store)  # kept in its state
    assert twin.mixed.tolist() == [True, False] and twin.reprocess(0.0, 0.5) == 0.0
    same = new_store(budget=None)
    for c in (1.0, 0.5):  # the same label again: its coefficient grows, it is no mix
        same.value(np.zeros(3))
        same.add(0.01 * c)
    assert same.mixed.tolist() == [False] and "mixed" not in same.state()[1]


@pytest.mark.parametrize("policy", ["merge", "remove"])
def test_the_mixed_flags_follow_their_vectors_through_maintenance_and_folds(policy):
    """Budget maintenance moves vectors (the last into a dropped one's place) and merges two
    into one (mixed if either was); a fold of stores combines equal vectors (mixed if a copy
    was, or their signs differ). Checked against the flags recomputed from the inputs."""
    X, y = stream(n=300)
    X = np.round(X * 3) / 3  # a few distinct inputs, many with both labels
    store = new_store(gamma=0.5, budget=12, policy=policy)
    seen: dict = {}
    for x, label in zip(X, y):
        margin = label * store.value(x)
        store.scale(0.999)
        if margin < 1:
            store.add(0.5 * label)
            seen.setdefault(x.tobytes(), set()).add(label)
            held = {v.astype(np.float64).tobytes() for v in store.vectors}
            seen = {v: labels for v, labels in seen.items() if v in held}  # (since stored)
    assert store.n_merges + store.n_removals > 0 and store.mixed.any()
    if policy == "remove":  # (each vector is an input as given: its labels are known)
        expected = [len(seen[v.astype(np.float64).tobytes()]) == 2 for v in store.vectors]
        assert store.mixed.tolist() == expected
    a, b = new_store(budget=None), new_store(budget=None)
    for s, c in ((a, 1.0), (b, -1.0)):
        s.value(np.zeros(3))
        s.add(c)
        s.value(np.ones(3))
        s.add(c)
    b.value(np.full(3, 2.0))
    b.add(1.0)
    b.value(np.full(3, 2.0))
    b.add(-0.5)
    fold = SupportVectors.average([a, b], [0.5, 0.25])
    flags = {tuple(v.astype(float)): m for v, m in zip(fold.vectors, fold.mixed)}
    assert flags == {(0.0,) * 3: True, (1.0,) * 3: True, (2.0,) * 3: True}
    assert not SupportVectors.average([a], [1.0]).mixed.any()


def test_saved_mixed_flags_of_another_shape_or_type_are_refused():
    store = new_store(budget=None)
    for c in (1.0, -0.5):
        store.value(np.zeros(3))
        store.add(c)
    scalars, arrays = store.state()
    for bad in (np.array([1]), np.array([True, False]), np.ones(1, dtype=np.float64)):
        twin = SupportVectors(store.kernel, store.gamma, store.budget, store.policy, store.dtype)
        with pytest.raises(ValueError, match="mixed"):
            twin.restore(scalars, {**arrays, "mixed": bad}, store.n_inputs)
