"""`InputScales`: the factors `sqrt(gamma_j / gamma)` of a model's input columns, grown as inputs
arrive, the same when rebuilt from the names, and no copy when every input has scale 1."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_advsvm import AdvKernelSVM
from river_advsvm.input_scales import InputScales


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


def test_the_room_grows_past_its_start_and_never_past_max_features():
    scales = InputScales({"x0": 4.0}, gamma=1.0, max_features=40)
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
                         reprocess=0)
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
