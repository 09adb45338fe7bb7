"""A basis the group shares: the projection onto it, and the O(B) average of models over it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_advsvm import AdvKernelSVM, checkpoint, inputs
from river_advsvm.streams import merge
from river_advsvm.support_basis import SharedBasis

KERNELS = ["rbf", "laplacian"]
PARAMS = dict(gamma=0.3, budget=60, budget_policy="merge", dtype="float64", seed=3,
              averaging=None)  # (the fold is of the last iterates: they predict here)


def brute_kernels(kernel: str, gamma: float, S, T) -> np.ndarray:
    S, T = np.asarray(S, dtype=np.float64), np.asarray(T, dtype=np.float64)
    if kernel == "rbf":
        return np.exp(-gamma * ((S[:, None, :] - T[None]) ** 2).sum(axis=2))
    return np.exp(-gamma * np.abs(S[:, None, :] - T[None]).sum(axis=2))


def squared_distance(kernel, gamma, X, c, Z, a) -> float:
    """`||sum_i c_i k(x_i, .) - sum_j a_j k(z_j, .)||_H^2` by brute force."""
    V, w = np.concatenate([X, Z]), np.concatenate([c, -a])
    return float(w @ brute_kernels(kernel, gamma, V, V) @ w)


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 12), d=st.integers(1, 5))
def test_a_function_in_the_span_is_found_exactly(kernel, seed, size, d):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(size, d)) * 2.0
    basis = SharedBasis(kernel, 0.5, Z)
    a = rng.normal(size=size)
    order = rng.permutation(size)
    found, loss = basis.project(Z[order], a[order], squared_norm=None)
    # Exact up to the ridge, amplified by the kernel matrix's condition number.
    slack = 1e-9 + basis.ridge * np.linalg.cond(basis.gram)
    np.testing.assert_allclose(found, a, atol=slack * (1 + np.abs(a).max()))
    assert loss == pytest.approx(0.0, abs=1e-9 * (1 + a @ a))


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 10), n=st.integers(1, 10))
def test_the_projection_is_the_closest_function_and_reports_its_loss_exactly(kernel, seed,
                                                                             size, n):
    rng = np.random.default_rng(seed)
    Z, X = rng.normal(size=(size, 3)) * 2.0, rng.normal(size=(n, 3))
    c = rng.normal(size=n)
    basis = SharedBasis(kernel, 0.4, Z)
    a, loss = basis.project(X, c, squared_norm=None)
    exact = squared_distance(kernel, 0.4, X, c, Z, a)
    assert loss == pytest.approx(exact, rel=1e-6, abs=1e-9)
    # The residual is orthogonal to every basis function: nothing in the span does better.
    residual_inner = brute_kernels(kernel, 0.4, Z, X) @ c - basis.gram @ a
    np.testing.assert_allclose(residual_inner, 0.0, atol=1e-6 * (1 + np.abs(c).sum()))
    for _ in range(3):
        other = a + 0.01 * rng.normal(size=size)
        assert squared_distance(kernel, 0.4, X, c, Z, other) >= exact - 1e-9


def test_rows_shared_with_the_basis_reuse_its_kernel_matrix():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(8, 4)).astype(np.float32)
    basis = SharedBasis("rbf", 0.25, Z)
    X = np.concatenate([Z[[5, 1]], rng.normal(size=(2, 4)).astype(np.float32)])
    np.testing.assert_allclose(basis.cross_kernels(X), brute_kernels("rbf", 0.25, Z, X),
                               rtol=1e-6)
    np.testing.assert_array_equal(basis.cross_kernels(X)[:, :2], basis.gram[:, [5, 1]])


def test_a_basis_refuses_bad_vectors_with_a_reason():
    with pytest.raises(ValueError, match="distinct"):
        SharedBasis("rbf", 1.0, np.array([[1.0, 2.0], [1.0, 2.0]]))
    with pytest.raises(ValueError, match="finite"):
        SharedBasis("rbf", 1.0, np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="gamma"):
        SharedBasis("rbf", 0.0, np.ones((1, 2)))
    basis = SharedBasis("rbf", 1.0, np.eye(3))
    with pytest.raises(ValueError, match="3 inputs"):
        basis.project(np.ones((1, 2)), np.ones(1), None)
    with pytest.raises(ValueError, match="finite coefficient"):
        basis.project(np.ones((1, 3)), np.array([np.inf]), None)


@pytest.mark.parametrize("epoch, refused", [(1, False), (2**63 - 1, False), (2**63, True),
                                            (10**30, True), (0, True)])
def test_a_basis_record_of_an_epoch_past_the_range_is_refused(epoch, refused):
    """A writer of the snapshot topic pushed every worker's epochs to 10**30 and beyond."""
    from river_advsvm.streams import group_basis

    names = [inputs.encode_name("a"), inputs.encode_name("b")]
    record = group_basis.basis_record(epoch, "w", "rbf", 0.5, np.eye(2), names)
    if refused:
        with pytest.raises(checkpoint.CheckpointError, match="invalid epoch"):
            group_basis.parse_basis(*record)
    else:
        assert group_basis.parse_basis(*record)[2].size == 2


@pytest.mark.parametrize("magnitude", [1e155, 1e300])
def test_a_basis_record_whose_kernel_values_overflow_is_refused(magnitude):
    # Finite vectors whose squared norms overflow: the RBF kernel matrix was NaN, the basis
    # accepted, and every projection onto it NaN (a group then folded nothing, on and on).
    from river_advsvm.streams import group_basis

    vectors = np.array([[0.0, 1.0], [magnitude, 0.0], [0.5, -magnitude]])
    names = [inputs.encode_name("a"), inputs.encode_name("b")]
    key, value = group_basis.basis_record(3, "w", "rbf", 0.5, vectors, names)
    message = ("^basis record 'basis/3/w': the basis' vectors are too large for their kernel "
               "values to be computed$")
    with pytest.raises(checkpoint.CheckpointError, match=message):
        group_basis.parse_basis(key, value)
    scaled = group_basis.basis_record(3, "w", "rbf", 0.5, vectors / magnitude, names)
    assert group_basis.parse_basis(*scaled)[2].size == 3  # the same vectors, within range


def test_a_nearly_singular_basis_gives_finite_coefficients_and_their_exact_loss():
    Z = np.array([[0.0, 0.0], [1e-7, 0.0], [1.0, 1.0]])  # K has an eigenvalue of ~1e-14
    basis = SharedBasis("rbf", 1.0, Z)
    X, c = np.array([[0.5, 0.2]]), np.array([2.0])
    a, loss = basis.project(X, c, squared_norm=4.0)
    assert np.isfinite(a).all()
    assert loss == pytest.approx(squared_distance("rbf", 1.0, X, c, Z, a), rel=1e-6, abs=1e-9)


# -- averaging over a basis (river_advsvm.streams.merge) --------------------------------------


def trained(n: int, seed: int, labels=(0, 1), **params) -> AdvKernelSVM:
    rng = np.random.default_rng(seed)
    model = AdvKernelSVM(**{**PARAMS, **params})
    X = rng.normal(size=(n, 3))
    y = [labels[int(x[0] + 0.5 * x[1] > 0)] for x in X]
    model.learn_many(X, y)
    return model


def in_model_order(meta: dict, X: np.ndarray, names=(0, 1, 2)) -> np.ndarray:
    """The columns of `X` (inputs `names`) in the order the model's vectors hold them."""
    held = [inputs.decode_name(n) for n in meta["state"]["names"]]
    return X[:, [list(names).index(n) for n in held]]


def basis_of(model: AdvKernelSVM) -> SharedBasis:
    meta, arrays = model.to_checkpoint()
    store = meta["state"]["model"]["store"]
    return SharedBasis(store["kernel"], store["gamma"], arrays["vectors"],
                       meta["state"]["names"])  # as checkpoints name them


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_average_over_a_basis_is_the_weighted_sum_of_the_projections(kernel):
    models = [trained(200, seed, kernel=kernel) for seed in (1, 2, 3)]
    basis = basis_of(models[0])
    weights = np.array([2.0, 1.0, 5.0])
    members, projections = [], []
    for model, w in zip(models, weights):
        meta, arrays = model.to_checkpoint()
        alpha, loss = merge.project(meta, arrays, basis)
        projections.append(alpha)
        members.append((meta, {"alpha": alpha}, w))
    meta, arrays = merge.average(members, n_learned=600, basis=basis)
    merged = merge.to_model(meta, arrays)
    shares = weights / weights.sum()
    np.testing.assert_array_equal(arrays["vectors"], basis.vectors)
    # Each projection alone, as a model over the basis; the average is their weighted mean.
    alone = [merge.to_model(*merge.average([member], n_learned=200, basis=basis))
             for member in members]
    X = np.random.default_rng(9).normal(size=(20, 3))
    expected = sum(s * m.decision_many(X) for s, m in zip(shares, alone))
    np.testing.assert_allclose(merged.decision_many(X), expected, rtol=1e-9, atol=1e-9)
    for model, projection in zip(alone, projections):  # f_a by brute force (and the bias)
        X_held = in_model_order(model.to_checkpoint()[0], X)
        f = brute_kernels(kernel, basis.gamma, X_held, basis.vectors) @ projection
        sign = 1.0 if model.classes == tuple(model.to_checkpoint()[0]["state"]["labels"]) else -1
        np.testing.assert_allclose(model.decision_many(X), sign * f + model._bias, rtol=1e-9,
                                   atol=1e-9)
    expected_alpha = arrays["alpha"]
    # Exact norm, as for any support-vector model (what the certificate relies on).
    exact = expected_alpha @ brute_kernels(kernel, basis.gamma, basis.vectors,
                                           basis.vectors) @ expected_alpha
    assert merged.rkhs_norm ** 2 == pytest.approx(exact, rel=1e-9)
    assert merged.n_learned == 600 and merged.n_support_vectors == basis.size
    # The base projects onto its own vectors exactly (in function space: its kernel matrix is
    # ill-conditioned, so the coefficients themselves move with the ridge).
    meta0, arrays0 = models[0].to_checkpoint()
    assert merge.project(meta0, arrays0, basis)[1] <= 1e-8 * models[0].rkhs_norm ** 2
    np.testing.assert_allclose(alone[0].decision_many(X), models[0].decision_many(X), atol=1e-6)
    again = AdvKernelSVM.from_checkpoint(*checkpoint.loads(checkpoint.dumps(meta, arrays)))
    np.testing.assert_array_equal(again.decision_many(X), merged.decision_many(X))
    merged.learn_one(dict(enumerate(X[0])), 1)
    assert merged.n_learned == 601


def test_the_average_over_a_basis_aligns_labels_and_certifies():
    a = trained(150, 1, labels=("x", "y"))
    b = trained(150, 2, labels=("y", "x"))  # the same classes, met in the other order
    basis = basis_of(a)
    members = [(m, {"alpha": merge.project(m, arr, basis)[0]}, 1.0)
               for m, arr in (a.to_checkpoint(), b.to_checkpoint())]
    merged = merge.to_model(*merge.average(members, n_learned=300, basis=basis))
    assert merged.classes == a.classes
    alone = [merge.to_model(*merge.average([member], n_learned=150, basis=basis))
             for member in members]
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 3))
    np.testing.assert_allclose(merged.decision_many(X),
                               (alone[0].decision_many(X) + alone[1].decision_many(X)) / 2,
                               rtol=1e-9, atol=1e-9)
    # The certificate rests on the exact norm: nothing within a certified radius flips.
    y = merged.predict_many(X).to_numpy()
    radii = merged.certified_radius_many(X, y, norm="l2")
    assert (radii > 0).any()
    for x, label, radius in zip(X, y, radii):
        directions = rng.normal(size=(50, 3))
        moved = x + radius * directions / np.linalg.norm(directions, axis=1, keepdims=True)
        assert (merged.predict_many(moved).to_numpy() == label).all()


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_model_over_other_inputs_is_projected_by_name(kernel):
    """Inputs in another order, and one the basis lacks (0 in every basis vector)."""
    basis = basis_of(trained(100, 1, kernel=kernel))
    rng = np.random.default_rng(5)
    other = AdvKernelSVM(**{**PARAMS, "kernel": kernel})
    for x in rng.normal(size=(80, 4)):
        other.learn_one({"extra": x[3], 2: x[2], 0: x[0], 1: x[1]}, int(x[0] > 0))
    meta, arrays = other.to_checkpoint()
    alpha, loss = merge.project(meta, arrays, basis)
    # The same projection by brute force, both functions over the inputs 0, 1, 2, "extra".
    held = [inputs.decode_name(n) for n in meta["state"]["names"]]
    order = [*(inputs.decode_name(n) for n in basis.names), "extra"]
    X = arrays["vectors"][:, [held.index(n) for n in order]]
    Z = np.concatenate([basis.vectors, np.zeros((basis.size, 1))], axis=1)
    c = meta["state"]["model"]["store"]["scale"] * arrays["alpha"]
    expected = np.linalg.solve(brute_kernels(kernel, basis.gamma, Z, Z) + basis.ridge
                               * np.eye(basis.size), brute_kernels(kernel, basis.gamma, Z, X) @ c)
    np.testing.assert_allclose(alpha, expected, rtol=1e-6, atol=1e-8)
    assert loss == pytest.approx(squared_distance(kernel, basis.gamma, X, c, Z, alpha),
                                 rel=1e-6, abs=1e-9)
    # Averaged over the basis, the model keeps the input the basis lacks (0 in every vector).
    merged = merge.to_model(*merge.average([(meta, {"alpha": alpha}, 1.0)], 80, basis=basis))
    x = {0: 0.2, 1: -0.1, 2: 0.4, "extra": 1.5}
    query = np.array([[x[n] for n in order]])
    Zx = brute_kernels(kernel, basis.gamma, Z, query)[:, 0]
    assert merged.decision_one(x) == pytest.approx(
        alpha @ Zx + meta["state"]["bias"], rel=1e-9, abs=1e-12)


def test_models_over_another_basis_are_refused():
    a = trained(100, 1)
    basis = basis_of(a)
    other = trained(100, 1, gamma=0.5)
    with pytest.raises(merge.IncompatibleModels, match="gamma"):
        merge.project(*other.to_checkpoint(), basis)
    meta, arrays = a.to_checkpoint()
    short = (meta, {"alpha": np.zeros(basis.size - 1)}, 1.0)
    with pytest.raises(merge.IncompatibleModels, match="coefficients"):
        merge.average([(meta, {"alpha": merge.project(meta, arrays, basis)[0]}, 1.0), short],
                      n_learned=2, basis=basis)


def test_an_average_over_a_basis_the_models_cannot_hold_is_refused_up_front():
    a = trained(100, 1)
    meta, arrays = a.to_checkpoint()
    basis = basis_of(a)
    member = (meta, {"alpha": merge.project(meta, arrays, basis)[0]}, 1.0)
    small = AdvKernelSVM(**{**PARAMS, "budget": basis.size - 1})
    small.learn_many(np.random.default_rng(1).normal(size=(5, 3)), [0, 1, 0, 1, 0])
    with pytest.raises(merge.IncompatibleModels, match="exceeds the budget"):
        merge.average([(*small.to_checkpoint()[:1], member[1], 1.0)], 1, basis=basis)
    single = SharedBasis(basis.kernel, basis.gamma, basis.vectors.astype(np.float32), basis.names)
    with pytest.raises(merge.IncompatibleModels, match="float32"):
        merge.average([member], 1, basis=single)
    wider = SharedBasis(basis.kernel, 2 * basis.gamma, basis.vectors, basis.names)
    with pytest.raises(merge.IncompatibleModels, match="gamma"):
        merge.average([member], 1, basis=wider)
    pool = AdvKernelSVM(gamma=0.3, budget=64, budget_policy="compact", seed=0)
    pool.learn_one({0: 1.0}, 1)
    with pytest.raises(merge.IncompatibleModels, match="only support vectors"):
        merge.average([(pool.to_checkpoint()[0], member[1], 1.0)], 1, basis=basis)


def test_a_model_whose_reprocess_cursor_is_past_the_basis_averages_over_it():
    """The base's reprocess cursor pointed past the basis (a worker with more vectors than the
    group's basis, its cursor near its last ones): the average kept it, and the merged model
    was refused ("saved reprocess cursor ... is not a vector's index"), so the fold was not
    made (`advsvm serve` logged "not averaging"). Past the basis, it starts again at 0."""
    model, other = trained(200, 1), trained(200, 2)
    size = model.n_support_vectors
    meta, arrays = other.to_checkpoint()
    store = meta["state"]["model"]["store"]
    basis = SharedBasis(store["kernel"], store["gamma"], arrays["vectors"][: size // 2],
                        meta["state"]["names"])
    model._store.revisit_from(size - 1)
    meta, arrays = model.to_checkpoint()
    assert meta["state"]["model"]["store"]["cursor"] == size - 1 >= basis.size
    alpha, _ = merge.project(meta, arrays, basis)
    merged = merge.to_model(*merge.average([(meta, {"alpha": alpha}, 1.0)], 200, basis=basis))
    assert merged.n_support_vectors == basis.size
    assert merged.to_checkpoint()[0]["state"]["model"]["store"]["cursor"] == 0


def test_averages_fold_over_a_basis_and_travel_in_coefficient_snapshots():
    """Models that predict with the average of their iterates carry it over the basis
    (`average_alpha`, projected as `f` is): a fold over a basis that spans the averages
    predicts with their weighted average; a coefficient snapshot holds it, is checked
    with it, and its whole checkpoint predicts as the model projected."""
    from river_advsvm.streams import group, group_basis
    from river_advsvm.streams import state as state_io

    # (below the budget: no vector given up, so the averages are in the span of the vectors)
    a, b = trained(25, 1, averaging=20), trained(25, 2, averaging=20)
    vectors = np.concatenate([m.to_checkpoint()[1]["vectors"] for m in (a, b)])
    meta_a = a.to_checkpoint()[0]
    assert meta_a["state"]["names"] == b.to_checkpoint()[0]["state"]["names"]
    basis = SharedBasis("rbf", meta_a["state"]["model"]["store"]["gamma"],
                        np.unique(vectors, axis=0), meta_a["state"]["names"])
    members = [(meta, merge.over_basis(meta, arrays, basis)[0], w)
               for (meta, arrays), w in ((a.to_checkpoint(), 1.0), (b.to_checkpoint(), 3.0))]
    assert all(set(m) == {"alpha", "average_alpha"} for _, m, _ in members)
    merged = merge.to_model(*merge.average(members, 50, basis=basis))
    X = np.random.default_rng(5).normal(size=(20, 3))
    np.testing.assert_allclose(merged.decision_many(X),
                               0.25 * a.decision_many(X) + 0.75 * b.decision_many(X),
                               rtol=1e-6, atol=1e-6)

    extra = state_io.ServiceState(model=a, group=group.new_bookkeeping("w0")).extra()
    meta, arrays = group_basis.coefficient_snapshot(*a.to_checkpoint(extra), basis, 1)
    assert set(arrays) == {"alpha", "average_alpha"}
    group_basis.check_coefficients(meta, arrays, basis, "snapshot")
    whole = merge.to_model(*group_basis.expanded(meta, arrays, basis))
    np.testing.assert_allclose(whole.decision_many(X), a.decision_many(X), rtol=1e-6, atol=1e-6)
    bad = [{"alpha": arrays["alpha"]},  # the model holds an average: its coefficients too
           {**arrays, "average_alpha": arrays["average_alpha"][:-1]},
           {**arrays, "average_alpha": np.full_like(arrays["average_alpha"], np.nan)},
           {**arrays, "other": arrays["alpha"]}]
    for wrong in bad:
        with pytest.raises(checkpoint.CheckpointError):
            group_basis.check_coefficients(meta, wrong, basis, "snapshot")
    plain = dict(meta, state=dict(meta["state"], model={
        k: v for k, v in meta["state"]["model"].items() if k != "average"}))
    with pytest.raises(checkpoint.CheckpointError):  # coefficients of an average it lacks
        group_basis.check_coefficients(plain, arrays, basis, "snapshot")
    group_basis.check_coefficients(plain, {"alpha": arrays["alpha"]}, basis, "snapshot")


def test_a_model_and_its_average_are_projected_as_each_would_be_alone():
    """`over_basis` projects `f` and the average (its vectors and the ones it keeps, past the
    budget) through one kernel matrix: the same coefficients and loss as projecting each on
    its own; `fit` refuses inner products that are not one finite number per basis vector."""
    from river_advsvm.support_average import saved_expansion

    model = trained(300, 4, budget=12, averaging=30)
    meta, arrays = model.to_checkpoint()
    assert len(arrays["average_orphans"])  # the average keeps vectors the store gave up
    basis = basis_of(trained(60, 5, budget=20, averaging=30))
    member, loss = merge.over_basis(meta, arrays, basis)
    alpha, alone_loss = merge.project(meta, arrays, basis)
    vectors, coefficients = saved_expansion(arrays)
    mapped, outside = merge._in_basis_columns(meta, vectors, basis)
    average = basis.closest(mapped, coefficients, outside)
    np.testing.assert_allclose(member["alpha"], alpha, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(member["average_alpha"], average, rtol=1e-12, atol=1e-12)
    assert loss == pytest.approx(alone_loss, rel=1e-12, abs=1e-12)
    for inner in (np.full(basis.size, np.nan), np.zeros(basis.size + 1)):
        with pytest.raises(ValueError, match="one finite inner product"):
            basis.fit(inner, 1.0)
