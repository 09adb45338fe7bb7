"""A model that predicts with the average of its iterates (`averaging`): against the average of
the iterates computed by brute force from a twin that learns the same way, its bookkeeping
through merges and removals, test-then-train, and checkpoints."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_advsvm import AdvKernelSVM
from river_advsvm.support_average import orphan_capacity


def stream(n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    return X, X[:, 0] + 0.3 * rng.standard_normal(n) > 0.5


def iterate_average(model, twin, X, y, probe, horizon):
    """Both models learn row by row; the weighted mean of the twin's decisions on `probe` after
    each row (weights in proportion to t, then exponential), by brute force."""
    mean = None
    for t, (row, label) in enumerate(zip(X, y), start=1):
        positive = twin.classes[-1] if twin.classes else None
        model.learn_many(row[None, :], [label])
        twin.learn_many(row[None, :], [label])
        if mean is not None and twin.classes[-1] != positive:
            mean = -mean  # the second label sorts above the first: the margin's sign flips
        decisions = twin.decision_many(probe)
        rho = max(2.0 / (t + 1), 1.0 / horizon)
        mean = decisions if mean is None else (1.0 - rho) * mean + rho * decisions
    return mean


@settings(max_examples=25, deadline=None)
@given(horizon=st.integers(1, 60), seed=st.integers(0, 2**16), reprocess=st.integers(0, 2),
       epsilon=st.sampled_from([0.0, 0.05]), first_smaller=st.booleans())
def test_without_a_budget_the_model_predicts_with_the_mean_of_its_iterates(
        horizon, seed, reprocess, epsilon, first_smaller):
    X, y = stream(120, 3, seed)
    # Labels 1 and 7: when the first is 1, the model's sign flips as 7 arrives (and the
    # average's with it).
    y = np.where(y == y[0], 1 if first_smaller else 7, 7 if first_smaller else 1)
    params = dict(gamma=2.0, budget=None, reprocess=reprocess, epsilon=epsilon, seed=0)
    model, twin = AdvKernelSVM(averaging=horizon, **params), AdvKernelSVM(averaging=None, **params)
    expected = iterate_average(model, twin, X[:100], y[:100], X[100:], horizon)
    # (rounding of the many terms of a decision near 0 is relative to the largest)
    np.testing.assert_allclose(model.decision_many(X[100:]), expected, rtol=1e-9,
                               atol=1e-9 * np.abs(expected).max())
    # It learns as the twin does, bit for bit.
    assert model.rkhs_norm == twin.rkhs_norm


@settings(max_examples=25, deadline=None)
@given(horizon=st.integers(2, 60), seed=st.integers(0, 2**16),
       schedule=st.sampled_from(["constant", "diminishing"]),
       epsilon=st.sampled_from([0.0, 0.05, 0.4]), regularization=st.sampled_from([1e-4, 0.3]),
       repeats=st.booleans())
def test_the_averages_two_scalar_form_is_the_mean_of_the_iterates(
        horizon, seed, schedule, epsilon, regularization, repeats):
    """The averaged coefficients are kept as `A c_base + B a`: through the store folding its
    scale into `a` (a strong shrink), the closed form emptying `f` (a large radius), a
    diminishing step (the scale shrinking faster than the average forgets, where the form is
    written out), and inputs that come again (a coefficient grows in place), the decisions are
    the brute-force mean of the iterates'."""
    X, y = stream(120, 3, seed)
    if repeats:  # (12 distinct inputs, each coming back)
        X, y = X[np.arange(120) % 12], y[np.arange(120) % 12]
    params = dict(gamma=2.0, budget=None, epsilon=epsilon, adversary="closed_form",
                  schedule=schedule, regularization=regularization, step_size=0.5, seed=0)
    model, twin = AdvKernelSVM(averaging=horizon, **params), AdvKernelSVM(averaging=None, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a large radius collapses the model: it says so)
        expected = iterate_average(model, twin, X[:100], y[:100], X[100:], horizon)
    # (Where the closed form empties f at most steps, the vectors it gives up carry the average
    # through many small sums: up to 2e-7 of the largest decision, as summed one per vector.)
    np.testing.assert_allclose(model.decision_many(X[100:]), expected, rtol=1e-6,
                               atol=1e-6 * np.abs(expected).max(initial=1e-300))


@pytest.mark.parametrize("policy", ["merge", "remove"])
@pytest.mark.parametrize("first_smaller", [True, False])
def test_through_merges_the_orphans_carry_the_exact_average(policy, first_smaller, monkeypatch):
    """With no orphan ever leaving, the vectors the model gives up keep their averaged
    coefficients exactly: the decisions are the brute-force average of the iterates'."""
    from river_advsvm import support_average

    monkeypatch.setattr(support_average, "orphan_capacity", lambda budget: None)
    X, y = stream(300, 3, 11)
    y = np.where(y == y[0], 1 if first_smaller else 7, 7 if first_smaller else 1)
    params = dict(gamma=3.0, budget=6, budget_policy=policy, reprocess=1, seed=0)
    model, twin = AdvKernelSVM(averaging=40, **params), AdvKernelSVM(averaging=None, **params)
    expected = iterate_average(model, twin, X[:250], y[:250], X[250:], 40)
    assert sum(model.budget_maintenance[k] for k in ("merges", "removals")) > 50
    np.testing.assert_allclose(model.decision_many(X[250:]), expected, rtol=1e-9,
                               atol=1e-9 * np.abs(expected).max())


@pytest.mark.parametrize("policy", ["merge", "remove"])
def test_a_horizon_of_one_predicts_as_the_last_iterate_through_merges(policy):
    X, y = stream(400, 4, 1)
    params = dict(gamma=3.0, budget=12, budget_policy=policy, seed=0)
    model, twin = AdvKernelSVM(averaging=1, **params), AdvKernelSVM(averaging=None, **params)
    model.learn_many(X[:300], y[:300])
    twin.learn_many(X[:300], y[:300])
    assert sum(model.budget_maintenance[k] for k in ("merges", "removals")) > 100
    np.testing.assert_allclose(model.decision_many(X[300:]), twin.decision_many(X[300:]),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.decision_gradient_many(X[300:310]),
                               twin.decision_gradient_many(X[300:310]),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("policy", ["merge", "remove"])
@pytest.mark.parametrize("budget", [1, 2, 9])
def test_the_averages_orphans_stay_within_their_capacity_with_heirs_that_exist(policy, budget):
    X, y = stream(300, 3, 2)
    model = AdvKernelSVM(gamma=3.0, budget=budget, budget_policy=policy, averaging=40, seed=0)
    for i in range(0, 300, 7):
        model.learn_many(X[i:i + 7], y[i:i + 7])
        store = model._store
        average = store.averaged
        n = average.orphans.size
        assert n <= orphan_capacity(budget)
        # Heirs: -1, an orphan other than itself, or a vector the store holds (-2 - slot).
        heirs = average._heir[:n]
        assert ((heirs >= -1 - store.size) & (heirs < n) & (heirs != np.arange(n))).all()
        assert np.isfinite(average.coefficients).all()
        assert len(average.coefficients) == store.size + n


def test_the_average_steadies_the_last_iterate_on_a_noisy_stream():
    """A long horizon against the last iterate of a constant step: the decisions move less
    from one block of the stream to the next."""
    X, y = stream(3000, 2, 3)
    model = AdvKernelSVM(gamma=2.0, budget=64, averaging=500, seed=0)
    twin = AdvKernelSVM(gamma=2.0, budget=64, seed=0, averaging=None)
    probe = X[:200]
    moves, averaged_moves, before = [], [], None
    for i in range(1000, 3000, 250):
        model.learn_many(X[i:i + 250], y[i:i + 250])
        twin.learn_many(X[i:i + 250], y[i:i + 250])
        now = (twin.decision_many(probe), model.decision_many(probe))
        if before is not None:
            moves.append(np.abs(now[0] - before[0]).mean())
            averaged_moves.append(np.abs(now[1] - before[1]).mean())
        before = now
    assert np.mean(averaged_moves) < 0.5 * np.mean(moves)


@pytest.mark.parametrize("policy", ["merge", "compact", "truncate"])
def test_batches_and_test_then_train_give_the_bits_of_a_one_by_one_loop(policy):
    """(Both representations.)"""
    X, y = stream(300, 3, 4)
    params = dict(gamma=3.0, budget=10, budget_policy=policy, averaging=25, seed=0)
    batched = AdvKernelSVM(**params)
    margins = batched.decision_then_learn_many(X, y)
    one = AdvKernelSVM(**params)
    expected = []
    for row, label in zip(X, y):
        x = dict(enumerate(row))
        expected.append(one.decision_one(x))
        one.learn_one(x, label)
    np.testing.assert_array_equal(margins, expected)
    probe = X[:50]
    np.testing.assert_array_equal(one.decision_many(probe), batched.decision_many(probe))
    np.testing.assert_array_equal(one.decision_gradient_many(probe),
                                  batched.decision_gradient_many(probe))
    # One row and a batch: the same function (the vectors the average gave up included), up
    # to the rounding of a matrix product.
    if policy == "merge":
        assert one._store.averaged.orphans.size > 0
    np.testing.assert_allclose([one.decision_one(dict(enumerate(r))) for r in probe],
                               one.decision_many(probe), rtol=2e-5, atol=1e-9)  # (float32)


@pytest.mark.parametrize("policy", ["merge", "compact", "truncate", "grow"])
def test_a_loaded_model_predicts_and_learns_on_as_the_saved_one(policy, tmp_path):
    """(Both representations.)"""
    X, y = stream(400, 3, 5)
    model = AdvKernelSVM(gamma=3.0, budget=10, budget_policy=policy, averaging=100, seed=0)
    model.learn_many(X[:200], y[:200])
    path = tmp_path / "model.ckpt"
    model.save(path)
    loaded = AdvKernelSVM.load(path)
    probe = X[350:]
    np.testing.assert_array_equal(loaded.decision_many(probe), model.decision_many(probe))
    loaded.learn_many(X[200:350], y[200:350])
    model.learn_many(X[200:350], y[200:350])
    np.testing.assert_array_equal(loaded.decision_many(probe), model.decision_many(probe))


def test_a_saved_average_that_is_not_the_stores_is_refused(tmp_path):
    from river_advsvm.support_average import AveragedVectors

    X, y = stream(200, 3, 6)
    model = AdvKernelSVM(gamma=3.0, budget=10, averaging=100, seed=0)
    model.learn_many(X, y)
    scalars, arrays = model._model_state()
    assert model._store.averaged.orphans.size >= 2
    first, second = 0, 1

    def two_orphans_each_others_heir(heirs):
        # (an eviction passes a row's heir to its children: one became its own heir, and the
        # model's next checkpoint was refused)
        heirs = heirs.copy()
        heirs[first], heirs[second] = second, first
        return heirs

    for key, bad in [("average_coefficients", lambda a: a[:-1].copy()),
                     ("average_heirs", lambda a: a - 100),
                     ("average_heirs", lambda a: a + 100),
                     ("average_heirs", lambda a: np.arange(len(a), dtype=np.int64)),
                     ("average_heirs", two_orphans_each_others_heir),
                     ("average_heir_kernels", lambda a: a + 2.0),
                     ("average_coefficients", lambda a: a * np.nan),
                     ("average_orphan_coefficients", lambda a: a * np.inf),
                     ("average_orphans", lambda a: a[:, :-1].copy()),
                     # (the base that gives the coefficients, which must give them exactly)
                     ("average_coefficient_base", lambda a: a * (1.0 + 1e-15)),
                     ("average_coefficient_base", lambda a: a[:-1].copy()),
                     ("average_coefficient_base", lambda a: a.astype(np.float32))]:
        with pytest.raises(ValueError, match="average"):
            AveragedVectors.restore(model._store, scalars["average"],
                                    {**arrays, key: bad(arrays[key])})
    for key, bad in [("base_weight", 0.0), ("base_weight", math.nan), ("store_weight", 1),
                     ("store_weight", math.inf)]:
        with pytest.raises(ValueError, match="coefficient base"):
            AveragedVectors.restore(model._store, {**scalars["average"], key: bad}, arrays)
    other = AdvKernelSVM(gamma=3.0, budget=10, averaging=50, seed=0)
    other.learn_many(X[:20], y[:20])
    with pytest.raises(ValueError, match="averaging=50"):
        other._restore_model_state(scalars, arrays)


@pytest.mark.parametrize("policy, budget, certified", [("merge", 20, 20), ("compact", 64, 10)])
def test_certified_radii_are_the_averages(policy, budget, certified):
    """The certificate is of the function that predicts: no PGD attack inside it flips a
    decision (both representations)."""
    from river_advsvm.attacks import PGD

    X, y = stream(600, 3, 7)
    model = AdvKernelSVM(gamma=3.0, budget=budget, budget_policy=policy, averaging=200, seed=0)
    model.learn_many(X[:500], y[:500])
    radii = model.certified_radius_many(X[500:540], y[500:540], norm="l2")
    assert (radii > 0).sum() > certified
    for radius in sorted(set(np.round(radii[radii > 0], 6)))[:5]:
        inside = np.round(radii, 6) >= radius
        result = PGD(epsilon=0.99 * radius, norm="l2", steps=20).run(
            model, X[500:540][inside], y[500:540][inside])
        assert not result.fooled.any()


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", True, 10**7])
def test_bad_averaging_is_refused(bad):
    with pytest.raises(ValueError, match="averaging"):
        AdvKernelSVM(averaging=bad)


@pytest.mark.parametrize("change", ["coefficients", "bias"])
def test_an_average_past_the_checkpoint_limits_is_refused(change):
    """The average decides too: its weights and bias are held to the limits of the model's."""
    from river_advsvm.checkpoint import CheckpointError

    X, y = stream(200, 3, 8)
    model = AdvKernelSVM(gamma=3.0, budget=10, averaging=100, seed=0)
    model.learn_many(X, y)
    meta, arrays = model.to_checkpoint()
    AdvKernelSVM.from_checkpoint(meta, arrays)  # as saved: loads
    if change == "coefficients":  # (as a group's fold writes them: without their base)
        arrays = {k: v for k, v in arrays.items() if k != "average_coefficient_base"}
        arrays["average_coefficients"] = arrays["average_coefficients"] * 1e200
    else:
        meta["state"]["model"]["average"]["bias"] = 1e300
    with pytest.raises(CheckpointError, match="margins up to|bias"):
        AdvKernelSVM.from_checkpoint(meta, arrays)


@pytest.mark.parametrize("dtype, large", [("float64", 1e300), ("float32", 1e20)])
def test_a_saved_orphan_too_large_for_its_kernel_values_is_refused(dtype, large):
    """An orphan's vector is held to the store's bound: past it its squared norm or a dot
    product overflows, and it took part in every decision with a kernel value of 1 (or NaN)."""
    from river_advsvm.checkpoint import CheckpointError

    X, y = stream(200, 3, 6)
    model = AdvKernelSVM(gamma=3.0, budget=10, averaging=100, seed=0, dtype=dtype)
    model.learn_many(X, y)
    assert model._store.averaged.orphans.size
    meta, arrays = model.to_checkpoint()
    vectors = arrays["average_orphans"].copy()
    vectors[0] = large
    with pytest.raises(CheckpointError, match="average's vectors are too large"):
        AdvKernelSVM.from_checkpoint(meta, {**arrays, "average_orphans": vectors})


def test_without_a_budget_orphans_that_weigh_nothing_leave():
    """The closed form's shrink empties f at every sample here: each sample's vector was an
    orphan at once, of weight 0, and none ever left (3000 rows after 3000 samples, f holding
    none). One leaves once its weight is below the rounding of the sum."""
    X, y = stream(600, 3, 9)
    params = dict(gamma=3.0, budget=None, epsilon=1.0, adversary="closed_form", seed=0)
    model = AdvKernelSVM(averaging=20, **params)
    model.learn_many(X, y)
    assert model._store.size == 0
    assert model._store.averaged.orphans.size == 0


def test_a_checkpoint_saved_before_averaging_existed_predicts_with_its_last_iterate():
    """Models saved without the parameter predicted with their last iterate: they load so,
    whatever the default."""
    X, y = stream(200, 3, 9)
    model = AdvKernelSVM(gamma=3.0, budget=10, seed=0, averaging=None)
    model.learn_many(X, y)
    meta, arrays = model.to_checkpoint()
    del meta["params"]["averaging"]
    loaded = AdvKernelSVM.from_checkpoint(meta, arrays)
    assert loaded.averaging is None and AdvKernelSVM().averaging is not None
    np.testing.assert_array_equal(loaded.decision_many(X[:20]), model.decision_many(X[:20]))


def reference_evictions(heirs, kernels, a, shared, capacity):
    """Orphans leave down to `capacity`, smallest averaged coefficient first, by the rule
    written out with whole-array masks: the coefficient goes to the heir, projected; the
    children of the one leaving inherit its heir through it; the last row moves to its place."""
    heirs, kernels, a, shared = heirs.copy(), kernels.copy(), a.copy(), shared.copy()
    size = len(a)
    while size > capacity:
        j = int(np.abs(a[:size]).argmin())
        heir, kernel = int(heirs[j]), kernels[j]
        if heir >= 0:
            a[heir] += a[j] * kernel
        elif heir != -1:
            shared[-2 - heir] += a[j] * kernel
        children = heirs[:size] == j
        kernels[:size][children] *= kernel
        heirs[:size][children] = heir
        last = size - 1
        a[j] = a[last]
        if j != last:
            heirs[j], kernels[j] = heirs[last], kernels[last]
            heirs[:last][heirs[:last] == last] = j
        heirs[last] = -1
        size -= 1
    return heirs[:size], kernels[:size], a[:size], shared


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), budget=st.integers(2, 12), keep=st.integers(0, 5))
def test_evictions_follow_the_rule_through_chains_of_heirs(seed, budget, keep):
    X, y = stream(300, 3, seed)
    model = AdvKernelSVM(gamma=3.0, budget=budget, averaging=30, seed=0)
    model.learn_many(X, y)
    average = model._store.averaged
    n = average.orphans.size
    keep = min(keep, n)
    expected = reference_evictions(average._heir[:n], average._heir_kernel[:n],
                                   average.orphans._a[:n], average.shared, keep)
    average.capacity = keep
    average._evict()
    assert average.orphans.size == keep
    for got, want in zip((average._heir[:keep], average._heir_kernel[:keep],
                          average.orphans._a[:keep]), expected):
        np.testing.assert_array_equal(got, want)
    # (The store's averaged coefficients are kept as A c_base + B a: a share added to one
    # rounds in c_base's units.)
    np.testing.assert_allclose(average.shared, expected[3], rtol=1e-12,
                               atol=1e-12 * np.abs(expected[3]).max(initial=0.0))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), budget=st.integers(1, 12),
       policy=st.sampled_from(["merge", "remove"]), epsilon=st.sampled_from([0.0, 0.05]))
def test_a_vector_that_would_leave_first_as_an_orphan_goes_to_its_heir_at_once(
        seed, budget, policy, epsilon):
    """The shortcut past the orphans (`_leaving_at_once`) gives the bits of becoming an orphan
    and being evicted, which a twin without it does."""
    X, y = stream(400, 3, seed)
    params = dict(gamma=3.0, budget=budget, budget_policy=policy, epsilon=epsilon,
                  averaging=30, seed=0)
    model, twin = AdvKernelSVM(**params), AdvKernelSVM(**params)
    model.learn_many(X[:5], y[:5])
    twin.learn_many(X[:5], y[:5])
    fast = model._store.averaged
    slow = twin._store.averaged
    taken = []

    def counted(before, weights, leaving=type(fast)._leaving_at_once.__get__(fast)):
        taken.extend(leaving(before, weights))
        return taken[len(taken) - len(weights):]

    fast._leaving_at_once = counted
    slow._leaving_at_once = lambda before, weights: [False] * len(weights)
    model.learn_many(X[5:350], y[5:350])
    twin.learn_many(X[5:350], y[5:350])
    n = slow.orphans.size
    assert fast.orphans.size == n
    for got, want in [(fast.shared, slow.shared),
                      (fast.orphans._a[:n], slow.orphans._a[:n]),
                      (fast.orphans._S[:n], slow.orphans._S[:n]),
                      (fast._heir[:n], slow._heir[:n]),
                      (fast._heir_kernel[:n], slow._heir_kernel[:n])]:
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(model.decision_many(X[350:]), twin.decision_many(X[350:]))


def test_at_full_capacity_the_vector_merged_away_usually_skips_being_an_orphan():
    """On a stream where almost every sample merges, the vector merged away (the smallest
    coefficient of the store) is the next orphan to leave: it goes to its heir at once."""
    rng = np.random.default_rng(0)
    X = rng.random((3000, 100))
    y = X[:, :20].sum(axis=1) > 10.0  # uniform inputs: almost every sample is a new vector
    model = AdvKernelSVM(gamma=2.0 / (100 * X.var()), budget=40, averaging=100, seed=0)
    model.learn_many(X[:1000], y[:1000])
    average = model._store.averaged
    assert average.orphans.size == average.capacity
    taken = []
    leaving = average._leaving_at_once

    def counted(before, weights):
        taken.append(leaving(before, weights))
        return taken[-1]

    average._leaving_at_once = counted
    model.learn_many(X[1000:], y[1000:])
    assert len(taken) > 1500  # (merges)
    assert sum(at_once[0] for at_once in taken if at_once) > 0.5 * len(taken)


@settings(max_examples=50, deadline=None)
@given(horizon=st.integers(1, 50), before=st.integers(0, 200), samples=st.integers(2, 120))
def test_a_sample_that_stands_for_several_weighs_as_that_many_steps(horizon, before, samples):
    """A group worker's sample stands for `samples` of the stream (`group_steps`): its iterate
    takes the weight of that many steps of the schedule at once, across the turn from the
    polynomial to the exponential average."""
    from river_advsvm.iterate_average import IterateAverage

    one, many = IterateAverage(None, horizon), IterateAverage(None, horizon)
    one.count = many.count = before
    kept = 1.0
    for _ in range(samples):
        kept *= 1.0 - one._next_weight(0.0)
    rho = many._next_weight(1.0, float(samples))
    assert many.count == one.count
    assert rho == pytest.approx(1.0 - kept, rel=1e-9, abs=1e-12)
    assert many.bias == pytest.approx(rho)


def test_a_group_worker_averages_its_iterates_on_the_groups_clock():
    """After `group_steps(W)` each learned sample moves the average as `W` steps would."""
    X, y = stream(300, 3, 2)
    model = AdvKernelSVM(gamma=2.0, budget=None, seed=0, averaging=400)
    model.learn_many(X[:100], y[:100])
    model.group_steps(8.0)
    model.learn_many(X[100:150], y[100:150])
    assert model._store.averaged.count == pytest.approx(100 + 8 * 50)


def test_an_average_saved_as_its_coefficients_alone_loads_and_learns_on():
    """A checkpoint whose average has its coefficients and not the base that gives them (a
    group's fold; a model saved before the base was kept) predicts as the one saved and learns
    on; its next checkpoint has the base."""
    X, y = stream(400, 3, 4)
    model = AdvKernelSVM(gamma=3.0, budget=12, averaging=50, seed=0)
    model.learn_many(X[:300], y[:300])
    meta, arrays = model.to_checkpoint()
    del arrays["average_coefficient_base"]
    for key in ("base_weight", "store_weight"):
        del meta["state"]["model"]["average"][key]
    loaded = AdvKernelSVM.from_checkpoint(meta, arrays)
    np.testing.assert_array_equal(loaded.decision_many(X[300:]), model.decision_many(X[300:]))
    loaded.learn_many(X[300:], y[300:])
    model.learn_many(X[300:], y[300:])
    np.testing.assert_allclose(loaded.decision_many(X[:50]), model.decision_many(X[:50]),
                               rtol=1e-9, atol=1e-12)
    assert "average_coefficient_base" in loaded.to_checkpoint()[1]


def test_a_strong_shrink_within_a_step_before_a_revisit_keeps_the_average_exact():
    """A shrink of f by 1e-12 within a step (the closed form's, when eta r nears ||f||), then
    revisits changing stored coefficients: the two-scalar form is written out before each
    change (B far above the store's scale would cancel it), so the averaged coefficients stay
    those of the explicit rule c <- (1 - rho) c + rho f's."""
    from river_advsvm.support import SupportVectors
    from river_advsvm.support_average import AveragedVectors

    rng = np.random.default_rng(5)
    store = SupportVectors("rbf", 1.0, None, "merge", "float64")
    store.start()
    store.add_inputs(2)
    store.averaged = AveragedVectors(store, 5)
    explicit = np.zeros(0)
    for t in range(1, 200):
        store.value(rng.random(2))
        store.scale(0.99)
        store.add(0.1 * rng.standard_normal())
        explicit = np.append(explicit, 0.0)[: store.size]
        if t % 10 == 0:
            store.scale(1e-12)
        for _ in range(2):
            store.reprocess(0.0, 0.1)
        store.averaged.update(0.0)
        rho = max(2.0 / (t + 1), 1.0 / 5)
        explicit = (1.0 - rho) * explicit + rho * store.coefficients
        np.testing.assert_allclose(store.averaged.shared, explicit, rtol=1e-9,
                                   atol=1e-9 * np.abs(explicit).max())


@pytest.mark.parametrize("policy", ["merge", "compact"])
@pytest.mark.parametrize("horizon", [0, -1, 1.5])
def test_a_saved_average_of_no_horizon_is_refused(policy, horizon):
    """A checkpoint is input: an average over a horizon of 0 would divide by it at the first
    step after the restore."""
    from river_advsvm import CheckpointError

    model = AdvKernelSVM(budget=8, budget_policy=policy, gamma=0.5, seed=0)
    model.learn_one({"a": 1.0}, True)
    model.learn_one({"a": -1.0}, False)
    meta, arrays = model.to_checkpoint()
    meta["state"]["model"]["average"]["horizon"] = horizon
    with pytest.raises(CheckpointError):
        AdvKernelSVM.from_checkpoint(meta, arrays)
