"""AdvKernelSVM against the adv-SVM step computed by hand and against an exact kernel SVM."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.datasets import make_moons
from sklearn.svm import SVC

from river_advsvm import AdvKernelSVM, collapse, inputs, kernels, svm

POLICIES = ["compact", "compact_slot", "truncate", "grow"]


def features_at(model, X):
    """phi_j(x) for the model's current features, recomputed from its seeds (brute force)."""
    store = model._store
    seeds = kernels.feature_seeds(model._seed, store.ids[: store.size])
    hashes = np.array([inputs.key_hash(i) for i in range(X.shape[1])], dtype=np.uint64)
    W = kernels.spectral_weights(model.kernel, model._gamma, seeds, hashes)
    return math.sqrt(2) * np.cos(X @ W + kernels.phases(seeds))


@pytest.fixture
def small_data():
    rng = np.random.default_rng(0)
    X = rng.random((60, 4))
    y = X[:, 0] + 0.3 * rng.normal(size=60) > 0.5
    return X, y


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("epsilon", [0.0, 0.2])
def test_one_step_equals_the_step_by_hand(small_data, policy, epsilon):
    """The adv-SVM step, recomputed with numpy from the model's state before the step."""
    X, y = small_data
    model = AdvKernelSVM(
        adversary="closed_form", epsilon=epsilon, budget=16, budget_policy=policy,
        regularization=0.05, seed=4,
        step_size=0.5, bias_step_size=0.1, gamma=0.5, dtype="float64", averaging=None,
    )
    for xi, yi in zip(X[:25], y[:25]):  # long enough for truncate to wrap its 16 slots
        model.learn_one(dict(enumerate(xi)), bool(yi))

    store = model._store
    a, b, norm = store.coefficients.copy(), model._bias, store.norm
    # The bias step shrinks with the share of recent samples that were active (this one is).
    share = model._active_share + (1.0 - model._active_share) / svm.ACTIVE_WINDOW
    damping = min(1.0, (1.0 - share) / (1.0 - svm.FLAT_BIAS_SHARE))
    eta, eta_b, lam = 0.5, 0.1 * damping, 0.05
    radius = kernels.adversarial_radius("rbf", model._gamma, epsilon, "l2", 4)
    # The first later sample that triggers the full step (hinge active).
    for i in range(25, len(X)):
        x, label = X[i], bool(y[i])
        yy = 1.0 if label else -1.0
        phi = features_at(model, x[None])[0]
        g = a @ phi + b
        if 1 - yy * g + radius * norm > 0:
            break
    else:
        pytest.fail("no active sample")
    assert model.decision_one(dict(enumerate(x))) == pytest.approx(g, rel=1e-12)
    rho = 1 - eta * lam
    a_expected = rho * a
    slot = store.n_added % store.budget
    if policy == "compact":
        a_expected += eta * yy * phi / store.size
        norm_expected = math.sqrt(store.size) * np.linalg.norm(a_expected)
    else:
        if policy == "compact_slot":
            a_expected[slot] += eta * yy * phi[slot]
        else:
            # A fresh feature from seed n_added: in slot n_added mod B, or appended.
            new_seed = kernels.feature_seeds(model._seed, np.array([store.n_added]))
            hashes = np.array([inputs.key_hash(i) for i in range(4)], dtype=np.uint64)
            w_new = kernels.spectral_weights("rbf", model._gamma, new_seed, hashes)[:, 0]
            phi_new = math.sqrt(2) * math.cos(x @ w_new + kernels.phases(new_seed)[0])
            if policy == "grow":
                a_expected = np.append(a_expected, eta * yy * phi_new)
            else:
                a_expected[slot] = eta * yy * phi_new
        # ||h|| from the sketch: a fixed pool of P probe features, updated like `compact`.
        sketch = store._sketch
        columns = model._index.names  # the model's column order
        probes = math.sqrt(2) * np.cos(x[columns] @ sketch.omega + sketch.phase[: sketch.size])
        s_new = rho * sketch.coefficients + eta * yy * probes / sketch.size
        norm_expected = math.sqrt(sketch.size) * np.linalg.norm(s_new)
    if radius > 0 and norm_expected > 0:
        factor = max(0.0, 1 - eta * radius / norm_expected)
        a_expected *= factor
        norm_expected *= factor

    model.learn_one(dict(enumerate(x)), label)
    np.testing.assert_allclose(store.coefficients, a_expected, rtol=1e-12, atol=1e-15)
    assert model._bias == pytest.approx(b + eta_b * yy, rel=1e-12)
    assert store.norm == pytest.approx(norm_expected, rel=1e-12)


def test_inactive_step_only_shrinks(small_data):
    X, y = small_data
    model = AdvKernelSVM(regularization=0.1, step_size=1.0, gamma=4.0, dtype="float64",
                         budget_policy="compact", seed=0, averaging=None)
    for _ in range(30):
        for xi, yi in zip(X[:10], y[:10]):
            model.learn_one(dict(enumerate(xi)), bool(yi))
    margins = model.decision_many(X[:10]) * np.where(y[:10], 1, -1)
    i = int(np.argmax(margins))
    assert margins[i] > 1, "need a sample beyond the margin"
    a, b = model._store.coefficients.copy(), model._bias
    model.learn_one(dict(enumerate(X[i])), bool(y[i]))
    np.testing.assert_allclose(model._store.coefficients, 0.9 * a, rtol=1e-13)
    assert model._bias == b


def test_compact_norm_is_the_exact_rkhs_norm_of_the_deployed_model(small_data):
    """||f||_H of f = sum_i beta_i k_B(x_i, .) is sqrt(beta^T K_B beta), K_B = Phi Phi^T / B."""
    X, y = small_data
    lam, eta, radius_eps = 0.05, 0.5, 0.1
    model = AdvKernelSVM(adversary="closed_form", epsilon=radius_eps, budget=64,
                         budget_policy="compact",
                         regularization=lam, step_size=eta,
                         gamma=0.5, dtype="float64", seed=2)
    betas = np.zeros(0)
    for xi, yi in zip(X, y):
        coef_before = None if model._store is None else model._store.coefficients.copy()
        model.learn_one(dict(enumerate(xi)), bool(yi))
        store = model._store
        phi = features_at(model, xi[None])[0]
        if coef_before is None:
            coef_before = np.zeros(store.size)
        # after = s * (rho * before + [active] (c / B) phi): solve for s and the new weight.
        A = np.column_stack([coef_before, phi / store.size])
        (scale_old, new_weight), *_ = np.linalg.lstsq(A, store.coefficients, rcond=None)
        if not coef_before.any():
            scale_old = 0.0
        betas = np.append(betas * scale_old, new_weight)
    Phi = features_at(model, X)
    K_B = Phi @ Phi.T / model._store.size
    np.testing.assert_allclose(Phi.T @ betas / model._store.size, model._store.coefficients,
                               rtol=1e-8, atol=1e-12)
    assert model.rkhs_norm == pytest.approx(math.sqrt(betas @ K_B @ betas), rel=1e-9)
    assert model.rkhs_norm == pytest.approx(
        math.sqrt(model._store.size) * np.linalg.norm(model._store.coefficients), rel=1e-12
    )


@pytest.mark.parametrize("policy", ["grow", "truncate", "compact_slot"])
def test_fresh_feature_norm_is_the_kernel_norm(policy):
    """||h|| of h = sum_i beta_i k(x_i, .): the sketch equals its brute-force value over the
    sketch's own features exactly, and the exact-kernel sqrt(beta^T K beta) within 8%."""
    rng = np.random.default_rng(0)
    X = rng.random((400, 4))
    y = X[:, 0] + 0.3 * rng.normal(size=400) > 0.5
    lam, eta, gamma = 0.01, 0.2, 2.0
    model = AdvKernelSVM(budget_policy=policy, budget=128, regularization=lam, step_size=eta,
                         gamma=gamma, dtype="float64", seed=5)
    betas = np.zeros(len(X))
    for t, (xi, yi) in enumerate(zip(X, y)):
        added = model._store.n_added if model._store is not None else 0
        model.learn_one(dict(enumerate(xi)), bool(yi))
        betas *= 1 - eta * lam
        if model._store.n_added > added:  # active step: h gets eta y k(x, .)
            betas[t] = eta * (1.0 if yi else -1.0)
    K = np.exp(-gamma * ((X[:, None] - X[None]) ** 2).sum(-1))
    assert model.rkhs_norm == pytest.approx(math.sqrt(betas @ K @ betas), rel=0.08)

    sketch = model._store._sketch
    columns = model._index.names  # the model's column order
    Psi = math.sqrt(2) * np.cos(X[:, columns] @ sketch.omega + sketch.phase[: sketch.size])
    sketched = np.linalg.norm(betas @ Psi) / math.sqrt(sketch.size)
    assert model.rkhs_norm == pytest.approx(sketched, rel=1e-9)


def test_label_orientation_is_exact():
    """Labels 1/7 seen in any order give the model trained with bools 7 -> True."""
    rng = np.random.default_rng(1)
    X = rng.random((80, 3))
    y = np.where(X[:, 0] > 0.5, 7, 1)
    y[:5] = 7  # the first label seen is the positive one...
    reference = AdvKernelSVM(adversary="closed_form", epsilon=0.1, seed=3)
    for xi, yi in zip(X, y):
        reference.learn_one(dict(enumerate(xi)), bool(yi == 7))
    for labels in (y, np.where(y == 7, 1, 7)):  # ...and then the negative one
        model = AdvKernelSVM(adversary="closed_form", epsilon=0.1, seed=3)
        for xi, yi in zip(X, labels):
            model.learn_one(dict(enumerate(xi)), int(yi))
        assert model.classes == (1, 7)
        sign = 1 if labels is y else -1
        np.testing.assert_allclose(model.decision_many(X), sign * reference.decision_many(X))


@pytest.fixture(scope="module")
def moons():
    X, y = make_moons(260, noise=0.2, random_state=0)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return X[:200], np.where(y[:200] == 1, 1.0, -1.0), X[200:]


def exact_adversarial_svm(X, y, gamma, lam, radius):
    """argmin (lam/2)||f||^2 + mean [1 - y(f(x)+b) + radius ||f||]_+ over the RKHS, offline.

    By the representer theorem f = sum_j beta_j k(x_j, .); with K = L L^T and w = L^T beta,
    ||f|| = ||w|| and f(x_i) = (L w)_i. The hinge is smoothed (softplus of width tau) and tau
    taken down to 3e-4, so the objective is within 3e-4 log 2 of the exact one.
    """
    n = len(X)
    K = np.exp(-gamma * ((X[:, None] - X[None]) ** 2).sum(-1))
    L = np.linalg.cholesky(K + 1e-10 * np.eye(n))
    z = np.zeros(n + 1)
    for tau in [0.1, 0.03, 0.01, 0.003, 0.001, 3e-4]:

        def objective(z, tau=tau):
            w, b = z[:n], z[n]
            length = math.sqrt(w @ w + 1e-18)
            u = 1 - y * (L @ w + b) + radius * length
            s = 0.5 * (1 + np.tanh(0.5 * u / tau))
            value = 0.5 * lam * w @ w + (tau * np.logaddexp(0, u / tau)).mean()
            grad_w = lam * w - L.T @ (s * y) / n + radius * s.mean() * w / length
            return value, np.append(grad_w, -(s * y).mean())

        z = minimize(objective, z, jac=True, method="L-BFGS-B",
                     options=dict(maxiter=5000, gtol=1e-10)).x
    beta = np.linalg.solve(L.T, z[:n])
    decision = lambda A: np.exp(-gamma * ((A[:, None] - X[None]) ** 2).sum(-1)) @ beta + z[n]  # noqa: E731
    return decision, float(np.linalg.norm(z[:n]))


def test_reference_solver_matches_libsvm(moons):
    X, y, X_test = moons
    gamma, lam = 4.0, 0.01
    decision, _ = exact_adversarial_svm(X, y, gamma, lam, radius=0.0)
    K = lambda A: np.exp(-gamma * ((A[:, None] - X[None]) ** 2).sum(-1))  # noqa: E731
    svc = SVC(C=1 / (lam * len(X)), kernel="precomputed", tol=1e-8).fit(K(X), y)
    np.testing.assert_allclose(decision(X_test), svc.decision_function(K(X_test)), atol=5e-3)


@pytest.mark.parametrize("policy", ["compact", "merge"])
@pytest.mark.parametrize("epsilon", [0.0, 0.1])
def test_dsg_approaches_the_exact_solution(moons, epsilon, policy):
    """Budget 4096 (random features, or support vectors never merged), 60 shuffled passes with
    Pegasos steps: decision values within 0.05 on average (0.15 at worst) of the offline
    optimum of the same objective, and the same ||f|| within 5%."""
    X, y, X_test = moons
    gamma, lam = 4.0, 0.01
    radius = kernels.adversarial_radius("rbf", gamma, epsilon, "l2", 2)
    decision, norm = exact_adversarial_svm(X, y, gamma, lam, radius)
    model = AdvKernelSVM(
        adversary="closed_form", epsilon=epsilon, gamma=gamma, regularization=lam,
        step_size=1.0,
        schedule="diminishing", bias_step_size=1.0, budget=4096, budget_policy=policy, seed=1,
        # Plain SGD: reprocessing revisits the stored vectors more often than the other
        # samples, which weights their loss more than the objective's mean does.
        reprocess=0,
    )
    rng = np.random.default_rng(0)
    for _ in range(60):
        order = rng.permutation(len(X))
        model.learn_many(X[order], y[order] > 0)
    ours, exact = model.decision_many(X_test), decision(X_test)
    assert np.abs(ours - exact).mean() < 0.05
    assert np.abs(ours - exact).max() < 0.15
    assert np.mean(np.sign(ours) == np.sign(exact)) >= 0.95
    assert model.rkhs_norm == pytest.approx(norm, rel=0.05)


def test_a_group_worker_steps_rate_times_the_schedule_at_the_groups_count(small_data):
    """`group_steps(r)` from `n` learned: the step at this model's sample `n + j` is `r` times
    the diminishing schedule's at the group's count `n + r j` (seen in the bias, which moves by
    exactly its step on an active sample); `r = 1` learns bit for bit as the model alone; a
    checkpoint keeps the clock."""
    X, y = small_data
    params = dict(schedule="diminishing", regularization=0.05, step_size=0.5,
                  bias_step_size=0.1, gamma=0.5, dtype="float64", budget=16, seed=4,
                  reprocess=0, averaging=None)
    alone, same, worker = (AdvKernelSVM(**params) for _ in range(3))
    for model in (alone, same, worker):
        for xi, yi in zip(X[:20], y[:20]):
            model.learn_one(dict(enumerate(xi)), bool(yi))
    same.group_steps(1)
    worker.group_steps(3)
    meta, arrays = worker.to_checkpoint()
    assert meta["state"]["group_clock"] == [20, 3.0]
    reloaded = AdvKernelSVM.from_checkpoint(meta, arrays)
    moved = 0
    for j, (xi, yi) in enumerate(zip(X[20:], y[20:])):
        x, sign = dict(enumerate(xi)), 1.0 if yi else -1.0
        before, active = worker._bias, sign * worker.decision_one(x) < 1.0
        # The bias step shrinks with the share of recent samples that were active.
        share = worker._active_share + (active - worker._active_share) / svm.ACTIVE_WINDOW
        damping = min(1.0, (1.0 - share) / (1.0 - svm.FLAT_BIAS_SHARE))
        for model in (alone, same, worker, reloaded):
            model.learn_one(x, bool(yi))
        expected = 3 * 0.1 / (1 + 0.5 * 0.05 * (20 + 3 * j)) * sign * damping if active else 0.0
        assert worker._bias - before == pytest.approx(expected, rel=1e-12, abs=1e-15)
        moved += active and damping > 0
        assert same.decision_one(x) == alone.decision_one(x)
        assert reloaded.decision_one(x) == worker.decision_one(x)
    assert moved >= 5 and worker.group_rate == 3.0 and alone.group_rate == 1.0
    for rate in (0.5, float("nan"), True, 2e6, np.float64(0.5), np.bool_(True), "2"):
        with pytest.raises(ValueError, match="rate"):
            worker.group_steps(rate)
    # A number of workers counted by numpy (it said "rate must be a number in [1, 1e+06], got
    # np.int64(3)"); the clock holds a float either way, as a checkpoint does.
    for rate in (np.int64(3), np.float32(2.5)):
        worker.group_steps(rate)
        assert type(worker._schedule.group_clock[1]) is float
        assert worker.group_rate == float(rate)


@pytest.mark.parametrize("reprocess", [1, 2])
def test_group_workers_revisit_consecutive_shares_of_the_vectors(small_data, reprocess):
    """`group_revisits(N + r n)`: worker `r` of a group learning `n` samples a round each starts
    its revisits at vector `reprocess (N + r n)` mod the number of vectors, where one model
    learning the whole stream would revisit on its sample `N + r n`."""
    X, y = small_data
    model = AdvKernelSVM(gamma=0.5, budget=16, seed=4, reprocess=reprocess)
    for xi, yi in zip(X[:40], y[:40]):
        model.learn_one(dict(enumerate(xi)), bool(yi))
    size = model.n_support_vectors
    assert size == 16

    def cursor(m):
        return m.to_checkpoint()[0]["state"]["model"]["store"]["cursor"]

    workers = [copy.deepcopy(model) for _ in range(3)]
    for rank, worker in enumerate(workers):
        worker.group_revisits(40 + rank * 5)
    assert [cursor(w) for w in workers] == [reprocess * (40 + r * 5) % size for r in range(3)]
    before = model.to_checkpoint()[0]
    for position in (-1, 2.0, True, None):
        with pytest.raises(ValueError, match="position"):
            model.group_revisits(position)
    assert model.to_checkpoint()[0] == before
    features = AdvKernelSVM(gamma=0.5, budget=16, budget_policy="compact", seed=4)
    features.learn_one({0: 1.0}, True)
    features.group_revisits(7)  # random features keep no vectors to revisit: nothing changes


def test_a_tiny_step_learns_the_same_compact_pool_scaled():
    """With no regularization nor bias step, a step of `2^-700` learns `2^-690` times the
    model a step of `2^-10` learns (float64). The pool's norm squared its coefficients, to 0
    below 1e-154: the closed form's term vanished and the model learned another `f`."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    y = X[:, 0] > 0
    models = {}
    for step in (2.0**-10, 2.0**-700):
        model = AdvKernelSVM(gamma=1.0, step_size=step, bias_step_size=0.0, regularization=0.0,
                             budget=32, budget_policy="compact", dtype="float64", seed=1,
                             epsilon=0.1, adversary="closed_form")
        model.learn_many(X, y)
        models[step] = model
    big, tiny = models[2.0**-10], models[2.0**-700]
    assert big.rkhs_norm > 1e-3
    assert tiny.rkhs_norm * 2.0**690 == pytest.approx(big.rkhs_norm, rel=1e-12)
    np.testing.assert_allclose(tiny.decision_many(X) * 2.0**690, big.decision_many(X),
                               rtol=1e-9, atol=1e-12)


# -- the step schedule and the labels: exact values and refusals -----------------------------------


def test_the_schedule_refuses_what_would_flip_or_divide_by_zero():
    from river_advsvm.schedule import StepSchedule

    with pytest.raises(ValueError, match="must be < 1"):  # a shrink factor of 0
        StepSchedule("constant", 1.0, 0.1, 1.0)
    with pytest.raises(ValueError, match="needs regularization > 0"):
        StepSchedule("diminishing", 0.5, 0.05, 0.0)
    schedule = StepSchedule("constant", 0.5, 0.05, 0.1)
    with pytest.raises(ValueError, match="starts at a sample learned"):
        schedule.join_group(start=5, rate=2.0, n_learned=3)


def test_a_group_workers_step_is_the_rate_times_its_own_capped_at_half_over_lambda():
    """`rate` samples of the group per own sample: `rate` times the step, but the shrink
    factor `1 - eta lambda` stays at least 1/2 (eta at most 0.5 / lambda = 5 here); the bias
    step is not capped."""
    from river_advsvm.schedule import StepSchedule

    schedule = StepSchedule("constant", 0.5, 0.05, 0.1)
    schedule.join_group(0, 4.0, 0)
    assert schedule.sizes(7) == (2.0, 0.2)
    schedule.join_group(0, 100.0, 0)
    assert schedule.sizes(7) == (5.0, 5.0)


def test_the_negative_class_is_the_smaller_label_whichever_came_first():
    """River's binary convention for orderable labels: `classes` sorted, the margin positive
    for the larger one, whichever label the stream brought first."""
    for first, second in (("b", "a"), ("a", "b"), (7, 3)):
        model = AdvKernelSVM(gamma=1.0, seed=0)
        for _ in range(20):
            model.learn_one({"u": 1.0}, first)
            model.learn_one({"u": -1.0}, second)
        assert model.classes == tuple(sorted((first, second)))
        larger = max(first, second)
        x = {"u": 1.0} if larger == first else {"u": -1.0}
        assert model.decision_one(x) > 0 and model.predict_one(x) == larger


@pytest.mark.parametrize("label", [math.inf, -math.inf, math.nan])
def test_a_label_that_is_not_a_finite_number_is_refused(label):
    model = AdvKernelSVM(gamma=1.0, seed=0)
    with pytest.raises(inputs.InvalidInput) as caught:
        model.learn_one({"u": 1.0}, label)
    assert caught.value.code == "bad_label" and model.n_learned == 0


def _samples_far_apart(n: int, positive_share: float, seed: int):
    """Samples no two of which are near at gamma=1e4: f learns nothing (every sample active
    while |b| < 1), labels True with `positive_share`."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3)) * 10.0
    return X, rng.random(n) < positive_share


def test_a_damped_bias_step_follows_the_labels_balance_past_its_slack():
    """With every sample active the bias' steps are damped to 0; on a stream of 3 True to 1
    False where f learns nothing, b stayed at 0 and the model decided False (the minority)
    for ever. The damped part of the step follows the labels' balance past BALANCE_SLACK:
    checked step by step against the state before it, then b decides for the majority."""
    X, y = _samples_far_apart(1500, 0.75, seed=3)
    model = AdvKernelSVM(gamma=1e4, seed=0, averaging=None, bias_step_size=0.01,
                         dtype="float64")
    model.learn_one(dict(enumerate(X[0])), bool(y[0]))
    model.learn_one(dict(enumerate(X[1])), bool(not y[0]))  # both labels: no negation later
    for i, (x, label) in enumerate(zip(X[2:], y[2:])):
        if i == 300:  # (f held nothing: the collapse is reported, b or not)
            assert model.collapsed
        row, sign = dict(enumerate(x)), 1.0 if label else -1.0
        g, b = model.decision_one(row), model._bias
        active = 1.0 - sign * g > 0.0
        share = model._active_share + (active - model._active_share) / svm.ACTIVE_WINDOW
        balance = model._label_balance + (sign - model._label_balance) / svm.LABEL_WINDOW
        damping = min(1.0, (1.0 - share) / (1.0 - svm.FLAT_BIAS_SHARE))
        drift = math.copysign(max(0.0, abs(balance) - svm.BALANCE_SLACK), balance)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", collapse.CollapseWarning)
            model.learn_one(row, bool(label))
        assert model._label_balance == pytest.approx(balance, abs=1e-15)
        expected = b + 0.01 * (damping * sign + (1 - damping) * drift) if active else b
        assert model._bias == pytest.approx(expected, abs=1e-15)
    assert model._bias > 0.5
    X_test, _ = _samples_far_apart(50, 0.5, seed=4)
    assert all(model.predict_one(dict(enumerate(x))) is True for x in X_test)


def test_on_a_balanced_stream_where_every_sample_is_active_the_bias_stays_put():
    """The damping's purpose: balanced labels with every sample active leave b where it is
    (their balance stays inside the slack), not a random walk of full steps."""
    X, _ = _samples_far_apart(600, 0.5, seed=5)
    model = AdvKernelSVM(gamma=1e4, seed=0, averaging=None, dtype="float64")
    with pytest.warns(collapse.CollapseWarning):  # (f holds nothing)
        for i, x in enumerate(X):
            model.learn_one(dict(enumerate(x)), i % 2 == 0)
    assert abs(model._label_balance) < svm.BALANCE_SLACK
    assert model._active_share > 0.99 and abs(model._bias) < 1e-3


def test_the_labels_balance_turns_with_the_labels_when_the_model_negates():
    """A stream that brings its larger label first is learned with it provisionally positive,
    then negated: the labels' balance (-1 and +1 by the final orientation) turns with it."""
    model = AdvKernelSVM(gamma=1.0, seed=0, averaging=None)
    labels = ["b"] * 30 + ["a"] * 10
    for i, label in enumerate(labels):
        model.learn_one({"u": float(i)}, label)
    balance = 0.0
    for label in labels:
        balance += ((1.0 if label == "b" else -1.0) - balance) / svm.LABEL_WINDOW
    assert model.classes == ("a", "b")
    assert model._label_balance == pytest.approx(balance, rel=1e-12)
