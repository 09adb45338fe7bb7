"""`InputScales`: the factors `sqrt(gamma_j / gamma)` of a model's input columns, grown as inputs
arrive, the same when rebuilt from the names, and no copy when every input has scale 1."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_advsvm import AdvKernelSVM, CheckpointError, kernels
from river_advsvm.attacks import PGD
from river_advsvm.input_scales import InputScales, max_factor
from river_advsvm.support import PrecisionWarning


def test_the_factors_of_known_and_unknown_names():
    by_name = {"a": 2.0, "b": 0.5, "c": 8.0}
    scales = InputScales(by_name, gamma=2.0, max_features=10)
    expected = [1.0, math.sqrt(0.25), 2.0, 1.0]  # "z" has no bandwidth: the median's, 1
    np.testing.assert_array_equal(scales.of(["a", "b", "c", "z"]), expected)
    scales.add(["c", "a"], 2)
    scales.add(["z"], 3)
    np.testing.assert_array_equal(scales.columns(3), [2.0, 1.0, 1.0])
    V, U = scales.scaled(np.array([[1.0, 3.0, 5.0]]), np.array([[4.0, 1.0]]), ["b", "c"])
    np.testing.assert_array_equal(V, [[2.0, 3.0, 5.0]])
    np.testing.assert_array_equal(U, [[2.0, 2.0]])


def test_saved_scales_come_back_the_same_and_a_bound_is_not_lifted():
    """What a checkpoint keeps of fitted scales gives the same rows back; a model of a smaller
    max_features refuses the factors it could never have made."""
    by_name = {"year": 4.0, ("t", 1): 1.0, 3: 0.25}
    scales = InputScales(by_name, gamma=1.0, max_features=10, centres={"year": 2000.0})
    state = scales.state(fitted=True)
    back = InputScales.restored(state, "scale", None, 10, 0.5)
    names = [3, "year", ("t", 1), "other"]
    for s in (scales, back):
        s.add(names, 4)
    row = np.array([1.0, 2003.0, 5.0, 7.0])
    np.testing.assert_array_equal(back.row(row), scales.row(row))
    assert back.row(row).tolist() == [0.5, 6.0, 5.0, 7.0]
    # A given dict is the model's parameter, not state: nothing of it is saved.
    assert scales.state(fitted=False)["gamma_by_name"] is None
    with pytest.raises(ValueError, match="factor"):
        InputScales.restored({**state, "gamma": 1e-7}, "scale", None, 10, 0.5)
    with pytest.raises(ValueError, match="not the gamma parameter"):
        InputScales.restored(scales.state(fitted=False), 0.5, None, 10, 0.5)


def test_the_room_grows_past_its_start_and_never_past_max_features():
    scales = InputScales({"x0": 4.0, "y": 1.0, "z": 1.0}, gamma=1.0, max_features=40)
    names = [f"x{j}" for j in range(40)]
    for d in range(1, 41):
        scales.add(names[d - 1 : d], d)
        assert d <= len(scales._factors) <= 40
    expected = np.ones(40)
    expected[0] = 2.0
    np.testing.assert_array_equal(scales.columns(40), expected)
    with pytest.raises(ValueError, match="max_features"):
        scales.add(["one too many"], 41)
    assert len(InputScales(None, None, max_features=3)._factors) == 3


def test_uniform_scales_hand_back_the_same_arrays():
    scales = InputScales(None, gamma=0.3, max_features=10)
    scales.add(["a", "b"], 2)
    V, U = np.ones((2, 2)), np.ones((2, 1))
    scaled_V, scaled_U = scales.scaled(V, U, ["c"])
    assert scaled_V is V and scaled_U is U
    assert scales.uniform and scales.columns(2) is None
    np.testing.assert_array_equal(scales.of(["a", "c"]), [1.0, 1.0])


@settings(max_examples=60, deadline=None)
@given(
    gammas=st.lists(st.floats(1e-6, 1e6), min_size=1, max_size=60),
    chunks=st.lists(st.integers(1, 9), min_size=1, max_size=20),
)
def test_a_rebuild_is_the_incremental_build(gammas, chunks):
    # Some names have their own bandwidth, the rest take the median; inputs arrive in chunks.
    names = list(range(len(gammas) + 5))
    by_name = {n: g for n, g in zip(names[::2], gammas)}
    gamma = float(np.median(list(by_name.values())))
    incremental = InputScales(by_name, gamma, max_features=len(names))
    d = 0
    for size in chunks:
        new = names[d : d + size]
        d += len(new)
        incremental.add(new, d)
    rebuilt = InputScales(by_name, gamma, max_features=len(names))
    rebuilt.rebuild(names[:d])
    np.testing.assert_array_equal(incremental.columns(d), rebuilt.columns(d))
    # Each factor carries the input's bandwidth: gamma q^2 = gamma_j.
    np.testing.assert_allclose(gamma * incremental.columns(d) ** 2,
                               [by_name.get(n, gamma) for n in names[:d]], rtol=1e-12)


def test_a_restored_model_has_the_factors_it_learned():
    rng = np.random.default_rng(0)
    model = AdvKernelSVM(gamma="scale", warm_up=10, budget=16, seed=0)
    for i in range(60):  # new inputs keep arriving: past the room of 16 columns
        x = {f"x{j}": float(v) * (j + 1) for j, v in zip(rng.choice(30, 4), rng.random(4))}
        model.learn_one(x, i % 2 == 0)
    restored = AdvKernelSVM.from_checkpoint(*model.to_checkpoint())
    d = len(model._index)
    assert d > 16
    assert not model._input_scales.uniform
    np.testing.assert_array_equal(restored._input_scales.columns(d),
                                  model._input_scales.columns(d))


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_per_input_bandwidths_give_the_kernel_they_name(kernel):
    """A dict of bandwidths means `exp(-sum_j gamma_j d(x_j, z_j))`, squared differences for
    RBF and absolute ones for Laplacian: the model's margin is that expansion, brute force."""
    by_name = {"a": 0.5, "b": 4.0, "c": 0.02}
    model = AdvKernelSVM(kernel=kernel, gamma=by_name, budget=None, dtype="float64", seed=0,
                         reprocess=0, averaging=None)
    rng = np.random.default_rng(0)
    rows = [dict(zip("abc", rng.normal(size=3).tolist())) for _ in range(12)]
    for j, x in enumerate(rows):
        model.learn_one(x, j % 2 == 0)
    store = model._store
    S = store._S[: store.size, :3] / model._input_scales.columns(3)  # back to the inputs
    alpha = store._scale * store._a[: store.size]
    gammas = np.array([by_name[n] for n in model._index.names])
    z = dict(zip("abc", rng.normal(size=3).tolist()))
    x = np.array([z[n] for n in model._index.names])
    distance = np.abs(S - x) if kernel == "laplacian" else (S - x) ** 2
    expected = float(alpha @ np.exp(-(distance @ gammas))) + model._bias
    assert model.decision_one(z) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_a_laplacian_checkpoint_saved_with_square_root_factors_goes_on_with_them():
    model = AdvKernelSVM(kernel="laplacian", gamma={"a": 0.5, "b": 4.0}, seed=0)
    for j in range(20):
        model.learn_one({"a": j / 20, "b": (j % 3) / 3}, j % 2 == 0)
    meta, arrays = model.to_checkpoint()
    assert meta["state"]["model"]["scale_power"] == 1.0
    del meta["state"]["model"]["scale_power"]  # as a checkpoint of an earlier version
    restored = AdvKernelSVM.from_checkpoint(meta, arrays)
    np.testing.assert_allclose(restored._input_scales.columns(2),
                               np.sqrt(model._input_scales.columns(2)))


# -- inputs far from 0, bandwidths far apart --------------------------------------------------


def far_stream(n: int, offset: float, spread: float, seed: int = 0):
    """Five inputs `offset + spread z`, labelled by the signs of two of the `z` (XOR)."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 5))
    rows = [{f"x{j}": offset + spread * float(v) for j, v in enumerate(z)} for z in Z]
    return rows, (Z[:, 0] * Z[:, 1] > 0).tolist()


def raw_kernel_decision(model, x: dict) -> float:
    """The model's margin from its raw inputs, brute force in float64: the stored vectors
    mapped back to input space, `exp(-sum_j gamma_j (x_j - s_j)^2)` with the fitted bandwidths."""
    store, scales, names = model._store, model._input_scales, model._index.names
    d = len(names)
    q = scales.columns(d)
    centres = scales.column_centres(d)
    S = store._S[: store.size, :d].astype(np.float64) / q
    gammas = np.array([model.fitted_gamma[n] for n in names])
    v = np.array([x[n] for n in names], dtype=np.float64)
    if centres is not None:
        v = v - centres  # (the same shift on both sides: differences are what the kernel sees)
    alpha = store._scale * store._a[: store.size]
    return float(alpha @ np.exp(-(((S - v) ** 2) @ gammas))) + model._bias


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inputs_far_from_zero_learn_as_inputs_near_it(dtype):
    """The kernel only sees differences: five inputs 1e3 or 1e6 away from 0 give the model the
    same decisions (rounding aside) and the accuracy of inputs around 0. Without the warm-up
    measuring them about their mean, the offset swamped the fitted variance (a kernel 40 times
    too wide at an offset of 100); without centring, float32 kept no digit of their
    differences: chance accuracy either way."""
    rows, labels = far_stream(1500, 0.0, 1.0)
    test_rows, test_labels = far_stream(300, 0.0, 1.0, seed=1)
    accuracies, decisions = [], []
    # (The last: inputs 8 and 1,000 ranges above 0, one 2,000 below, one around 0.)
    for offset in (0.0, 1e3, 1e6, np.array([40.0, 5e3, -1e4, 0.0, 0.0])):
        model = AdvKernelSVM(seed=0, dtype=dtype)
        for x, y in zip(rows, labels):
            model.learn_one(dict(zip(x, np.array(list(x.values())) + offset)), y)
        shifted = [dict(zip(x, np.array(list(x.values())) + offset)) for x in test_rows]
        decisions.append(np.array([model.decision_one(x) for x in shifted]))
        accuracies.append(np.mean((decisions[-1] > 0) == np.array(test_labels)))
    assert accuracies[0] > 0.85
    assert min(accuracies[1:]) >= accuracies[0] - 0.02
    np.testing.assert_allclose(decisions[1], decisions[2], atol=1e-3)


def test_a_sample_without_a_centred_input_is_warned_about_once():
    """A year beside a number that decides the label: a sample without the year (absent, NaN
    or 0) is decided as if the year were 0, thousands of ranges from what was learned, so
    every such decision is the same; said once, naming the input and its centre."""
    rng = np.random.default_rng(0)
    model = AdvKernelSVM(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for a, year in zip(rng.normal(size=600), rng.integers(1995, 2006, size=600)):
            model.learn_one({"a": a, "year": float(year)}, bool(a > 0))
        model.predict_one({"a": 1.0, "year": 2001.0})
        model.predict_many(pd.DataFrame({"a": [1.0, -1.0], "year": [2000.0, 2003.0]}))
    for sample in ({"a": 2.0}, {"a": -2.0, "year": float("nan")}):
        with pytest.warns(UserWarning, match=r"input 'year' is 0, absent or NaN .* about 200"):
            copy.deepcopy(model).predict_one(sample)  # (each copy not warned yet)
    with pytest.warns(UserWarning, match="input 'year'") as caught:
        model.predict_many(pd.DataFrame({"a": [2.0, -2.0], "year": [float("nan"), 2000.0]}))
        model.predict_one({"a": 2.0})
        model.learn_one({"a": 2.0}, True)
    mine = [w for w in caught if "input 'year'" in str(w.message)]
    assert len(mine) == 1 and mine[0].filename == __file__


def test_an_input_after_the_warm_up_far_wider_than_the_fitted_ones_is_warned_about():
    """It takes the median of the fitted widths: at +-1,000 beside inputs of range 4 the
    sample is out of every vector's reach. Said once; an input of the fitted inputs' scale
    arriving late (a new word counted 1, 2, 3) is not."""
    rng = np.random.default_rng(0)
    model = AdvKernelSVM(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i, (a, b) in enumerate(rng.normal(size=(400, 2))):
            model.learn_one({"a": a} if i < 200 else {"a": a, "b": 3.0 * b}, bool(a > 0))
    with pytest.warns(UserWarning, match="input 'c' came after the warm-up") as caught:
        for a, c in rng.normal(size=(50, 2)):
            model.learn_one({"a": a, "c": 1000.0 * c}, bool(c > 0))
    assert sum("came after the warm-up" in str(w.message) for w in caught) == 1


def test_an_input_a_gamma_dict_does_not_name_is_warned_about_as_the_dicts():
    """A dict whose names are not the stream's (a typo: 'Long_URL' for 'long_url') leaves
    every input at the median of its widths; the warning spoke of gamma='scale' and a warm-up,
    which this model has not."""
    model = AdvKernelSVM(gamma={"HTTPS": 50.0, "Long_URL": 0.02}, seed=0)
    with pytest.warns(UserWarning, match="input 'long_url' is not named in the gamma dict, so "
                                         "it takes the median of the dict's widths") as caught:
        model.learn_one({"https": 0.0, "long_url": 1.0}, True)
    assert not any("warm-up" in str(w.message) for w in caught)


@settings(max_examples=40, deadline=None)
@given(spread=st.floats(1e-3, 1e3), ratio=st.floats(-1e7, 1e7))
def test_a_centred_model_is_the_kernel_of_its_raw_inputs(spread, ratio):
    """Whatever the offset and the spread, the float32 model's margin is the kernel expansion
    over its inputs as they came, brute force in float64 (to float32's rounding: an input less
    than 2 ranges from 0 is stored uncentred, a few 1e-4 of the exponent at worst)."""
    rows, labels = far_stream(60, ratio * spread, spread)
    model = AdvKernelSVM(seed=0, warm_up=30, budget=16, averaging=None)
    for x, y in zip(rows, labels):
        model.learn_one(x, y)
    for x in far_stream(5, ratio * spread, spread, seed=2)[0]:
        expected = raw_kernel_decision(model, x)
        assert model.decision_one(x) == pytest.approx(expected, rel=2e-3, abs=2e-3)


def test_bandwidths_far_apart_keep_every_factor_bounded():
    """Bandwidths 300 orders apart (a dict the model accepts) gave an input the factor 1e150:
    every stored row overflowed float32 and the first margin was not finite. The store's
    bandwidth is raised until no factor passes `max_factor`; the kernel is the one named."""
    by_name = {"a": 1.0, "b": 1e-300, "c": 1e-300}
    model = AdvKernelSVM(gamma=by_name, seed=0, dtype="float32", averaging=None)
    rng = np.random.default_rng(0)
    rows = [{"a": float(v), "b": 0.5, "c": 1.0} for v in rng.normal(size=40)]
    for x in rows:
        model.learn_one(x, x["a"] > 0)
    q = model._input_scales.columns(3)
    assert q.max() <= max_factor(model.max_features) * (1 + 1e-12)
    for x in rows[:5]:
        assert model.decision_one(x) == pytest.approx(raw_kernel_decision(model, x), rel=1e-5)
    assert np.mean([model.predict_one(x) == (x["a"] > 0) for x in rows]) > 0.9


def test_an_input_of_tiny_warm_up_range_beside_huge_ones_stays_finite():
    """An input that barely moved in the warm-up (an age of 30 +- 0.001) beside amounts near
    1e15: its own bandwidth is 1e36 times theirs. Its factor used to be 1e18 and its squared
    norms overflowed float32, so every margin came out as the bias alone."""
    rng = np.random.default_rng(0)
    rows = [{"m1": rng.random() * 1e15, "m2": rng.random() * 1e15,
             "age": 30 + 1e-3 * rng.random()} for _ in range(20)]
    rows += [{"m1": rng.random() * 1e15, "m2": rng.random() * 1e15,
              "age": float(rng.integers(20, 80))} for _ in range(40)]
    model = AdvKernelSVM(warm_up=20, seed=0, budget=8, averaging=None)
    for x in rows:
        model.learn_one(x, x["m1"] > 5e14)
    assert model._input_scales.columns(3).max() <= max_factor(model.max_features) * (1 + 1e-12)
    for x in rows[-10:]:
        assert model.decision_one(x) == pytest.approx(raw_kernel_decision(model, x),
                                                      rel=1e-4, abs=1e-6)


def test_centres_are_saved_and_a_checkpoint_never_lifts_the_factor_bound():
    rows, labels = far_stream(150, 1e4, 1.0)
    model = AdvKernelSVM(seed=0, warm_up=50)
    for x, y in zip(rows, labels):
        model.learn_one(x, y)
    assert model._input_scales.centres is not None and len(model._input_scales.centres) == 5
    meta, arrays = model.to_checkpoint()
    restored = AdvKernelSVM.from_checkpoint(meta, arrays)
    for x in rows[:10]:
        assert restored.decision_one(x) == model.decision_one(x)
    state = meta["state"]["model"]

    def refused(edit, match):
        edited = copy.deepcopy(meta)
        edit(edited["state"]["model"])
        with pytest.raises(CheckpointError, match=match):
            AdvKernelSVM.from_checkpoint(edited, arrays)

    name = state["input_centres"][0][0]
    refused(lambda s: s["input_centres"].append([["s", "nobody"], 1.0]), "no fitted bandwidth")
    refused(lambda s: s["input_centres"].__setitem__(0, [name, 1e300]), "not a number within")
    refused(lambda s: s["input_centres"].__setitem__(0, [name, "7"]), "not a number within")
    refused(lambda s: s.update(input_centres={"x0": 1.0}), "pairs")
    # A saved store bandwidth far below the fitted ones would give factors past the bound.
    refused(lambda s: s.update(gamma=s["gamma"] * 1e-12), "factor")
    # Only gamma='scale' centres: a model given its bandwidths has no centre to restore.
    given = AdvKernelSVM(seed=0, gamma=model.fitted_gamma)
    given.learn_one(rows[0], labels[0])
    meta, arrays = given.to_checkpoint()
    meta["state"]["model"]["input_centres"] = state["input_centres"]
    with pytest.raises(CheckpointError, match="pairs of fitted inputs"):
        AdvKernelSVM.from_checkpoint(meta, arrays)


def test_no_attack_in_the_box_flips_a_point_certified_about_centres():
    """The box of a centred model is taken about the same centres: the radii within the box
    are those of the same model learned near 0, and PGD in the box at a point's radius never
    flips it."""
    rng = np.random.default_rng(0)
    Z = rng.uniform(-1, 1, size=(340, 3))
    y = Z[:, 0] + 0.5 * Z[:, 1] > 0
    radii = {}
    for offset in (0.0, 1e4):
        X, box = offset + Z, (offset - 1.0, offset + 1.0)
        model = AdvKernelSVM(seed=0, warm_up=50, dtype="float64", averaging=None)
        for row, label in zip(X[:300], y[:300]):
            model.learn_one(dict(enumerate(row.tolist())), bool(label))
        radii[offset] = model.certified_radius_many(X[300:], y[300:], norm="linf", bounds=box)
    assert model._input_scales.centres is not None
    np.testing.assert_allclose(radii[1e4], radii[0.0], rtol=0.05)
    X_test, y_test = X[300:], y[300:]
    certified = np.flatnonzero(radii[1e4] > 0)
    assert len(certified) >= 10
    for i in certified:
        r = float(radii[1e4][i])
        attack = PGD(epsilon=r, norm="linf", steps=40, step_size=r / 8, bounds=box)
        assert not attack.run(model, X_test[i : i + 1], y_test[i : i + 1]).fooled[0]


def test_the_warm_up_vote_does_not_depend_on_where_the_inputs_sit():
    """The vote that predicts during the warm-up measures each input about its mean, and holds
    its rows less each input's first value: moved by a few of their ranges or by a million,
    the inputs get the same votes. Measured about 0, the offsets widened its kernel
    (scikit-learn's wine, whose inputs sit up to 3.4 ranges from 0: 71% progressive accuracy
    over the warm-up, 95% measured about the means); held as they came, inputs near 1e4 lost
    their differences in float32 (57% against 86% on the same stream near 0)."""
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(90, 4)) * np.array([1.0, 3.0, 0.5, 2.0])
    y = Z[:, 0] + Z[:, 1] / 3 > 0
    votes = []
    for offset in (0.0, np.array([3.0, -20.0, 2.0, 12.0]), np.array([1e6, -3e4, 5e3, 0.0])):
        model = AdvKernelSVM(seed=0, warm_up=1000)
        for z, label in zip(Z[:60] + offset, y[:60]):
            model.learn_one(dict(enumerate(z.tolist())), bool(label))
        votes.append([model.decision_one(dict(enumerate(z.tolist()))) for z in Z[60:] + offset])
    np.testing.assert_allclose(votes[1], votes[0], rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(votes[2], votes[0], rtol=1e-3, atol=1e-5)


def test_one_input_in_micro_units_does_not_throw_the_fit_away():
    """An input whose warm-up range asks for a bandwidth past the largest accepted (1e10) takes
    that one, with a warning naming it; the other inputs keep theirs. Before, the whole fit
    fell back to 1/d: on inputs of a thousand units that kernel is far too narrow."""
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(2000, 3))
    y = (Z[:, 1:] ** 2).sum(axis=1) < 1.4
    X = Z * np.array([1e-7, 1e3, 1e3])
    accuracies = []
    for columns in ([0, 1, 2], [1, 2]):
        model = AdvKernelSVM(seed=0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.learn_many(X[:1500, columns], y[:1500])
        # No fallback to 1/d; the input in micro-units named.
        assert [str(w.message)[:85] for w in caught] == (
            ["gamma='scale': the 100 warm-up samples hold 1 input (0) whose range calls for a "
             "width"] if len(columns) == 3 else [])
        accuracies.append(np.mean(model.predict_many(X[1500:, columns]) == y[1500:]))
        if len(columns) == 3:
            assert model.fitted_gamma[0] == kernels.MAX_GAMMA
    assert accuracies[1] > 0.9 and accuracies[0] >= accuracies[1] - 0.02


def _precision_warnings(model, X_batch, y_batch, X_rows, y_rows) -> list:
    """The PrecisionWarnings of `learn_many` on a batch, then of `learn_one` on each row
    (named 0..d-1, as the batch's columns are)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.learn_many(X_batch, y_batch)
        for x, label in zip(X_rows, y_rows):
            model.learn_one(dict(enumerate(x)), label)
    return [w for w in caught if issubclass(w.category, PrecisionWarning)]


def test_inputs_whose_distances_float32_loses_are_warned_of_once():
    # Two readings of 10,000 +- a few with a numeric gamma: float32 keeps about 7 digits, so
    # the kernel values are rounding noise (a model no better than a guess). The model says
    # so, once; centred inputs, gamma='scale' (which centres them) and float64 do not warn.
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(400, 2))
    y = (Z**2).sum(axis=1) < 1.4
    cases = [(10_000.0, {"gamma": 0.5}, 1), (0.0, {"gamma": 0.5}, 0), (10_000.0, {}, 0),
             (10_000.0, {"gamma": 0.5, "dtype": "float64"}, 0)]
    for offset, params, expected in cases:
        model = AdvKernelSVM(seed=0, **params)
        precision = _precision_warnings(model, Z + offset, y, Z[:50] + offset, y[:50])
        assert len(precision) == expected, (offset, params)
        if expected:
            assert "lose their differences in float32" in str(precision[0].message)
            assert "gamma='scale'" in str(precision[0].message)
            assert precision[0].filename == __file__  # where learn_many was called


def test_a_precision_warning_from_learn_one_points_at_its_caller():
    # learn_one takes a usual sample straight to its step: the warning arises fewer frames
    # deep than through a batch, and still names the line that called learn_one.
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(100, 2)) + 10_000.0
    model = AdvKernelSVM(gamma=0.5, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for z in Z:
            model.learn_one({0: z[0], 1: z[1]}, bool(z[0] > 10_000.0))
    precision = [w for w in caught if issubclass(w.category, PrecisionWarning)]
    assert len(precision) == 1 and precision[0].filename == __file__


def test_a_scale_model_warned_of_inputs_after_its_warm_up_is_not_told_to_use_scale():
    # gamma='scale' centres the inputs of its warm-up; two inputs that first arrive after it,
    # at 10,000 +- a few, are stored as they come.
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(400, 2))
    y = (Z**2).sum(axis=1) < 1.4
    model = AdvKernelSVM(seed=0)
    model.learn_many(pd.DataFrame(Z[:200], columns=["a", "b"]), y[:200])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for z, label in zip(Z[200:] + 10_000.0, y[200:]):
            model.learn_one({"c": z[0], "d": z[1]}, label)
    precision = [w for w in caught if issubclass(w.category, PrecisionWarning)]
    assert len(precision) == 1
    assert "gamma='scale'" not in str(precision[0].message)
    assert "StandardScaler" in str(precision[0].message)
    assert precision[0].filename == __file__  # where learn_one was called


@pytest.mark.parametrize("value", [-1, 0, "wide", None, 1e11, float("nan")])
def test_a_bad_width_in_a_gamma_dict_is_refused_naming_its_input(value):
    with pytest.raises(ValueError, match=r"gamma\['b'\] must be a number in \[1e-300, "):
        AdvKernelSVM(gamma={"a": 0.5, "b": value})


@pytest.mark.parametrize("policy", ["compact", "compact_slot", "truncate", "grow"])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_random_features_warn_when_their_phases_lose_their_digits(policy, kernel):
    """Random features on inputs near 1e15 at gamma 1e10 (float64): each phase `w . x`, about
    1e20 radians, keeps no digit below a thousand radians, so a sample's margin from one row
    and from a batch differ in sign for many samples; the support vectors warned of such
    inputs and random features did not. They warn once; on inputs of 1 with gamma='scale'
    they do not."""
    rng = np.random.default_rng(0)
    X = rng.random((120, 5))
    y = X[:, 0] > 0.5
    for scale, gamma, expected in [(1e15, 1e10, 1), (1.0, "scale", 0)]:
        model = AdvKernelSVM(kernel=kernel, gamma=gamma, budget=64, budget_policy=policy,
                             dtype="float64", seed=0)
        precision = _precision_warnings(model, X[:60] * scale, y[:60], X[60:] * scale, y[60:])
        assert len(precision) == expected, (scale, gamma)
        if expected:
            assert "lose their differences in float64" in str(precision[0].message)
            assert "off wholly" in str(precision[0].message)
