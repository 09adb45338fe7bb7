"""gamma='scale': the running statistics of the warm-up fit what the dense formula fits, in
any order of a sample's keys, and the vote predicts from them."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from test_validation import fingerprint

from river_advsvm import AdvKernelSVM, bandwidth, kernels


def dense_fit(X: np.ndarray, other_units: bool = True, kernel: str = "rbf") -> np.ndarray:
    """gamma='scale' on a dense matrix, as the docs define it (absent inputs are 0): an input
    whose mean is more than `FAR_FROM_ZERO` of its ranges from 0 is measured about its mean
    (the vote, `other_units=False`, measures every input about its mean); an input of range
    `s` gets `c / s^2`, or `c / s` for the Laplacian."""
    spread = X.max(axis=0) - X.min(axis=0)
    median = float(np.median(spread[spread > 0]))
    dense = 2 * np.count_nonzero(X, axis=0) >= len(X)
    # ... but not an image's background: one value in more than half the rows, far from 0.
    modes = [np.unique(column, return_counts=True) for column in X.T]
    background = np.array([2 * counts.max() > len(X)
                           and abs(values[counts.argmax()]) > bandwidth.FAR_FROM_ZERO * s
                           for (values, counts), s in zip(modes, spread)])
    own = (other_units & dense & (spread > 0) & (bandwidth.OTHER_UNITS * spread < median)
           & ~background)
    if own.sum() > math.sqrt(X.shape[1]):  # many: inputs of one kind that barely vary
        own[:] = False
    spread = np.where(own, spread, np.maximum(spread, median))
    means = X.mean(axis=0)
    far = np.abs(means) > bandwidth.FAR_FROM_ZERO * spread if other_units else True
    centred = X - np.where(far, means, 0.0)
    power = 2 if kernel == "rbf" else 1
    return bandwidth.SCALE_FACTOR / (X.shape[1] * float((centred / spread).var()) * spread**power)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
@pytest.mark.parametrize("seed", range(4))
def test_the_running_statistics_fit_what_the_dense_matrix_does(seed, kernel):
    rng = np.random.default_rng(seed)
    n, d = 60, 12
    # Inputs far from 0 with small ranges (the shifted sums keep their digits), inputs that
    # appear late or are often absent.
    X = rng.random((n, d)) * rng.uniform(0.01, 100.0, d) + rng.uniform(-1e6, 1e6, d)
    X[rng.random((n, d)) < 0.2] = 0.0
    X[: n // 2, -3:] = 0.0
    # Three inputs always present: two far from 0 (measured about their means), one about
    # 1.3 of its ranges from it (about 0).
    X[:, :3] = rng.random((n, 3)) * [0.5, 3.0, 1.0] + [-4e5, 7e3, 0.8]
    # A pixel of a white background (0.9 but in a few rows) keeps the median range.
    X[:, 3] = np.where(rng.random(n) < 0.1, rng.uniform(0.85, 0.95, n), 0.9)
    rows = bandwidth.HeldRows(kernel)
    hashes = {j: int(h) for j, h in enumerate(rng.integers(0, 2**63, d))}
    for x in X:
        present = np.flatnonzero(x != 0)
        rows.append(present.tolist(), x[present], hashes)
    columns = [rows.names.index(j) for j in range(d)]
    assert rows.fitted()[2].keys() == {0, 1}  # the centred inputs
    spread = X.max(axis=0) - X.min(axis=0)
    median = float(np.median(spread))
    assert spread[3] * bandwidth.OTHER_UNITS < median
    for other_units in (True, False):
        fitted, why = rows.gammas(other_units)
        assert why is None
        np.testing.assert_allclose(fitted[columns], dense_fit(X, other_units, kernel),
                                   rtol=1e-9)
        # The background pixel takes the median range, as inputs of one kind do.
        power = 2 if kernel == "rbf" else 1
        widest = int(np.argmax(spread))
        assert fitted[columns[3]] * median**power == pytest.approx(
            fitted[columns[widest]] * spread[widest] ** power, rel=1e-9)


@pytest.mark.parametrize("faint", [3, 4, 5])
def test_inputs_in_other_units_are_a_few(faint):
    """Inputs nonzero in most rows with ranges below a tenth of the median keep their own
    (an indicator that is mostly 1 beside inputs of range 100 too) while they are at most
    sqrt(d) of them; more are inputs of one kind with the others that barely vary (a noisy
    background), floored at the median range with the rest."""
    rng = np.random.default_rng(faint)
    n, d = 80, 16
    X = rng.uniform(0.0, 100.0, (n, d))
    X[:, 0] = rng.random(n) < 0.8  # an indicator, mostly 1
    X[:, 1:faint] = rng.uniform(0.0, 0.01, (n, faint - 1))  # faint noise
    rows = bandwidth.HeldRows()
    hashes = {j: j for j in range(d)}
    for x in X:
        present = np.flatnonzero(x != 0)
        rows.append(present.tolist(), x[present], hashes)
    fitted = rows.gammas()[0][[rows.names.index(j) for j in range(d)]]
    np.testing.assert_allclose(fitted, dense_fit(X), rtol=1e-9)
    spread = X.max(axis=0) - X.min(axis=0)
    if faint <= math.sqrt(d):  # c / s_j^2 with their own s_j, as the widest input's
        widest = int(np.argmax(spread))
        np.testing.assert_allclose(fitted[:faint] * spread[:faint] ** 2,
                                   fitted[widest] * spread[widest] ** 2, rtol=1e-9)
    else:
        np.testing.assert_allclose(fitted[:faint], fitted[faint:].max(), rtol=1e-9)


def vote_gammas(X: np.ndarray, kernel: str = "rbf") -> np.ndarray:
    """The vote's bandwidths over the dense rows `X`, as the module defines them: fitted on the
    rows held when they last reached a power of two (every range floored at the median), and
    the median of those for an input first held since."""
    fitted_on = X[: 1 << (len(X).bit_length() - 1)]
    held = np.flatnonzero((fitted_on != 0).any(axis=0))
    gammas = np.empty(X.shape[1])
    gammas[held] = dense_fit(fitted_on[:, held], other_units=False, kernel=kernel)
    gammas[np.setdiff1d(np.arange(X.shape[1]), held)] = np.median(gammas[held])
    return gammas


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n", [32, 40])
def test_the_vote_over_inputs_that_arrive_late_is_the_dense_vote(seed, n):
    # Inputs appear in later rows (their columns move in among the others), one after the
    # vote's last fit, and are often absent; the vote is the kernel vote over the dense rows.
    rng = np.random.default_rng(seed)
    d = 9
    X = rng.random((n, d)) * rng.uniform(0.5, 4.0, d)
    X[rng.random((n, d)) < 0.2] = 0.0
    X[: n // 2, -3:] = 0.0
    X[: n - 4, -1] = 0.0
    rows = bandwidth.HeldRows()
    hashes = {j: int(h) for j, h in enumerate(rng.integers(0, 2**63, d))}
    for x in X:
        present = np.flatnonzero(x != 0)
        rows.append(present.tolist(), x[present], hashes)
    signs = np.where(X[:, 0] > np.median(X[:, 0]), 1.0, -1.0)
    Q = rng.random((3, d))
    gammas = vote_gammas(X)
    expected = np.exp(-(((X[None] - Q[:, None]) ** 2) @ gammas)) @ signs / n
    votes = rows.vote(list(range(d)), Q, signs, "rbf")
    np.testing.assert_allclose(votes, expected, rtol=1e-5, atol=1e-7)  # (float32 rows)


def test_the_fit_does_not_depend_on_the_order_of_the_keys():
    rng = np.random.default_rng(5)
    rows = [{f"x{j}": float(v) for j, v in enumerate(rng.random(40) * rng.uniform(1, 9, 40))}
            for _ in range(60)]
    labels = [bool(r["x0"] > r["x1"]) for r in rows]
    models, votes = [], []
    for shuffle in (False, True):
        model = AdvKernelSVM(warm_up=50, seed=0)
        for i, (x, y) in enumerate(zip(rows, labels)):
            if shuffle:
                keys = list(x)
                rng.shuffle(keys)
                x = {k: x[k] for k in keys}
            if i < 50:  # the warm-up's vote, at a sample not held yet
                votes.append(model.decision_one(x))
            model.learn_one(x, y)
        models.append(model)
    assert votes[:50] == votes[50:]
    # To the bit: the bandwidths, and so the whole model.
    assert models[0].fitted_gamma == models[1].fitted_gamma
    assert list(models[0].fitted_gamma) == list(models[1].fitted_gamma)
    assert fingerprint(models[0]) == fingerprint(models[1])


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_the_vote_is_the_kernel_vote_of_the_held_rows(kernel):
    rng = np.random.default_rng(2)
    X = rng.random((30, 5))
    names = [f"x{j}" for j in range(5)]
    model = AdvKernelSVM(kernel=kernel, warm_up=100, seed=0)
    for x in X:
        model.learn_one(dict(zip(names, x.tolist())), bool(x[0] > 0.5))
    assert model.n_held == 30 and model.n_learned == 0
    z = {**dict(zip(names, rng.random(5).tolist())), "new": 0.3}
    gammas = vote_gammas(X, kernel)
    q = np.array([z[n] for n in names])
    if kernel == "rbf":
        distances = ((X - q) ** 2) @ gammas + 0.3**2 * np.median(gammas)
    else:
        distances = np.abs(X - q) @ gammas + 0.3 * np.median(gammas)
    signs = np.where(X[:, 0] > 0.5, 1.0, -1.0)
    expected = np.exp(-distances) @ signs / len(signs)
    # (The held rows are float32 in the vote.)
    assert model.decision_one(z) == pytest.approx(expected, rel=1e-5, abs=1e-7)


def test_inputs_in_small_units_take_the_largest_width_not_one_over_d():
    """Inputs of ranges about 5e-6 call for widths past the largest accepted (1e10): the fit
    fell back to 1/d, a kernel of about 1 everywhere, and the model predicted at chance (43%
    here, 98% on the same data in units of 1). They now take the largest width, with a
    warning."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = X[:, 0] + 0.5 * X[:, 1] > 0
    model = AdvKernelSVM(seed=0)
    with pytest.warns(UserWarning, match="takes at most the largest width"):
        model.learn_many(X[:500] * 1e-6, y[:500])
    assert model.fitted_gamma == dict.fromkeys(range(3), kernels.MAX_GAMMA)
    assert np.mean(model.predict_many(X[500:] * 1e-6).to_numpy() == y[500:]) > 0.9


@pytest.mark.filterwarnings("ignore::river_advsvm.support.PrecisionWarning")  # (gamma 1e10 at 1)
def test_a_gamma_dict_is_refused_where_an_inputs_factor_would_be_0():
    """1e-320 beside 1e10 was taken: the input's factor `sqrt(gamma_j / gamma)` was 0, and the
    certificate raised an internal error about a `scale` the user never passed."""
    with pytest.raises(ValueError, match=r"gamma\['a'\] must be a number in \[1e-300, 1e\+10\]"):
        AdvKernelSVM(gamma={"a": 1e-320, "b": 1e10})
    for kernel in ("rbf", "laplacian"):
        model = AdvKernelSVM(gamma={"a": 1e-300, "b": 1e10}, kernel=kernel, seed=0)
        model.learn_one({"a": 0.0, "b": 0.0}, True)
        model.learn_one({"a": 1.0, "b": 1.0}, False)
        for norm in ("l2", "linf"):
            radius = model.certified_radius_one({"a": 0.0, "b": 0.0}, True, norm=norm)
            assert radius >= 0 and not math.isnan(radius)


def test_inputs_whose_median_range_squares_to_0_fall_back_to_one_over_d():
    # A median range of 1e-256 squares to 0 in float64: the check that the fit is not absurd
    # divided by it (ZeroDivisionError, and every later sample raised it again).
    tiny = 1e-256
    model = AdvKernelSVM(gamma="scale", warm_up=3, seed=1, budget=4)
    with pytest.warns(UserWarning, match="vary by too little"):
        for x, y in [({"a": 0.0}, True), ({"a": tiny, "b": 0.0}, False),
                     ({"b": tiny, "c": -1.0}, True)]:
            model.learn_one(x, y)
    assert model.fitted_gamma == 1 / 3
    model.learn_one({"a": 1.0}, False)
    assert model.n_learned == 4 and np.isfinite(model.decision_one({"a": tiny, "c": 1.0}))


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_the_vote_over_inputs_the_held_rows_lack_does_not_depend_on_the_order_of_the_keys(kernel):
    # The distance such inputs add was summed in the order of the sample's keys.
    rng = np.random.default_rng(6)
    model = AdvKernelSVM(kernel=kernel, warm_up=50, seed=0)
    for i in range(10):
        model.learn_one({"a": float(rng.random()), "b": float(rng.random())}, i % 2 == 0)
    for _ in range(50):
        x = {f"new{j}": float(v) for j, v in enumerate(rng.normal(size=5))}
        x["a"] = float(rng.random())
        keys = list(x)
        rng.shuffle(keys)
        assert model.decision_one({k: x[k] for k in keys}) == model.decision_one(x)


@pytest.mark.parametrize("tiny", [1e-100, 1e-160, 1e-200, 1e-300])
def test_an_input_of_tiny_values_is_measured_in_its_own_units(tiny):
    # The sums of squares of an input below 1e-154 underflowed to 0 (or lost their digits):
    # it added nothing to the variance, and the other inputs' bandwidths came out up to 3
    # times too large.
    rng = np.random.default_rng(7)
    n, d = 40, 5
    X = rng.random((n, d)) * [1.0, 3.0, 0.5, 2.0, tiny]
    X[:, 3] += 0.5  # mostly nonzero, as the tiny input is: it keeps its own units
    X[rng.random((n, d)) < 0.1] = 0.0
    X[: n // 2, 2] = 0.0  # one arrives late
    rows = bandwidth.HeldRows()
    hashes = {j: int(h) for j, h in enumerate(rng.integers(0, 2**63, d))}
    for x in X:
        present = np.flatnonzero(x != 0)
        rows.append(present.tolist(), x[present], hashes)
    columns = [rows.names.index(j) for j in range(d)]
    for other_units in (True, False):
        fitted, why = rows.gammas(other_units)
        assert why is None
        with np.errstate(over="ignore", divide="ignore"):  # (its own 1 / s_j^2: inf, capped)
            expected = np.minimum(dense_fit(X, other_units), kernels.MAX_GAMMA)
        np.testing.assert_allclose(fitted[columns], expected, rtol=1e-9)


def test_an_input_that_varies_by_less_than_the_smallest_normal_float_counts_as_constant():
    # A range in float64's subnormals (below 2.2e-308) has no reciprocal: numpy warned of an
    # overflow and of invalid values, and the fit fell back to 1/d for every input ('vary by
    # too little (median range 1.08)', which they did not).
    rng = np.random.default_rng(8)
    X = rng.random((12, 3)) * [1.0, 2.0, 0.0]
    fits = []
    for tiny in (0.0, 5e-324, 3e-310):
        X[:, 2] = tiny * np.arange(12)
        model = AdvKernelSVM(warm_up=12, seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for i, x in enumerate(X):
                model.learn_one({"a": x[0], "b": x[1], "c": x[2]}, i % 2 == 0)
        fits.append(model.fitted_gamma)
    assert isinstance(fits[0], dict)
    assert fits[1] == pytest.approx(fits[0], rel=1e-12) and fits[2] == pytest.approx(fits[0],
                                                                                     rel=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_gamma_scale_fits_the_same_kernel_in_any_unit(kernel):
    # The same samples in millimetres instead of metres: 'scale' measures each input in units of
    # its range, so the fitted kernel, and every margin, is the same. (The Laplacian's
    # exponent is linear in the differences: its bandwidths go as 1 / range, the RBF's as
    # 1 / range^2.)
    rng = np.random.default_rng(0)
    X = rng.random((300, 6)) * [1.0, 0.5, 2.0, 1.0, 0.3, 1.0]
    y = X[:, 0] + np.sin(4 * X[:, 1]) - X[:, 2] * X[:, 3] > 0.3
    Z = rng.random((40, 6))
    margins, votes = [], []
    for unit in (1.0, 1000.0):
        model = AdvKernelSVM(kernel=kernel, dtype="float64", budget=None, seed=0)
        model.learn_many(X[:70] * unit, y[:70])  # held: the warm-up's vote predicts
        votes.append(model.decision_many(Z * unit))
        model.learn_many(X[70:] * unit, y[70:])
        margins.append(model.decision_many(Z * unit))
        power = 2 if kernel == "rbf" else 1  # (the exponent of the differences)
        fitted = {n: g * unit**power for n, g in model.fitted_gamma.items()}
        if unit == 1.0:
            reference = fitted
    np.testing.assert_allclose(list(fitted.values()), list(reference.values()), rtol=1e-9)
    np.testing.assert_allclose(margins[1], margins[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(votes[1], votes[0], rtol=1e-4, atol=1e-9)  # (float32 rows)


def test_an_input_whose_range_calls_for_a_width_past_the_largest_is_named():
    """A constant input with rounding noise (River's AdaptiveStandardScaler gives 0.0 and
    1.05e-08 for one) takes the largest width and counts as an input of its own: on Phishing
    it moved progressive accuracy by 6 points, silently. The warning names it."""
    rng = np.random.default_rng(0)
    model = AdvKernelSVM(warm_up=40, seed=0)
    with pytest.warns(UserWarning, match=r"hold 1 input \('noise'\) whose range calls for a "
                                         r"width past the largest"):
        for i in range(60):
            x = {"a": float(rng.random()), "b": float(rng.random()),
                 "noise": 1.05e-8 * (i % 2)}
            model.learn_one(x, x["a"] > 0.5)
    assert model.fitted_gamma["noise"] == kernels.MAX_GAMMA
    assert model.fitted_gamma["a"] < kernels.MAX_GAMMA
    quiet = AdvKernelSVM(warm_up=40, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for i in range(60):
            x = {"a": float(rng.random()), "b": float(rng.random())}
            quiet.learn_one(x, x["a"] > 0.5)
