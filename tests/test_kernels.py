"""Kernels, random features and the kernel-space radius against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from river_advsvm import InvalidInput, inputs, kernels


def brute_force_min_kernel(kernel, gamma, epsilon, norm, d, rng):
    """min kappa(delta) over many points of the ball, its boundary and (for L-inf) its corners."""
    if norm == "l2":
        directions = rng.normal(size=(20000, d))
        deltas = epsilon * directions / np.linalg.norm(directions, axis=1, keepdims=True)
        deltas = np.vstack([deltas, epsilon * np.eye(d)])
    else:
        corners = np.array(list(itertools.product([-1.0, 1.0], repeat=d)))
        deltas = np.vstack([epsilon * corners, rng.uniform(-epsilon, epsilon, size=(20000, d))])
    return kernels.kernel_value(kernel, gamma, deltas).min()


@pytest.mark.parametrize("kernel", kernels.KERNELS)
@pytest.mark.parametrize("norm", kernels.NORMS)
@pytest.mark.parametrize("d", [1, 3, 6])
def test_adversarial_radius_matches_brute_force(kernel, norm, d):
    rng = np.random.default_rng(d)
    gamma, epsilon = 0.7, 0.3
    brute = brute_force_min_kernel(kernel, gamma, epsilon, norm, d, rng)
    assert kernels.min_kernel_value(kernel, gamma, epsilon, norm, d) <= brute + 1e-12
    if not (kernel == "laplacian" and norm == "l2" and d > 1):
        # The minimum is attained on the sampled set (axis points, corners) exactly.
        assert kernels.min_kernel_value(kernel, gamma, epsilon, norm, d) == pytest.approx(brute)
    else:
        # L1 over an L2 ball peaks on the diagonal, which random directions only approach.
        assert kernels.min_kernel_value(kernel, gamma, epsilon, norm, d) == pytest.approx(
            brute, rel=0.02
        )
    expected = math.sqrt(2 - 2 * kernels.min_kernel_value(kernel, gamma, epsilon, norm, d))
    assert kernels.adversarial_radius(kernel, gamma, epsilon, norm, d) == pytest.approx(expected)


@pytest.mark.parametrize("norm", ["l2", "linf"])
@pytest.mark.parametrize("epsilon", [1e155, 1e308])
def test_a_radius_beyond_every_distance_covers_the_whole_kernel_ball(norm, epsilon):
    """An RBF model at epsilon=1e155 (accepted: finite) raised OverflowError at its first
    sample: epsilon**2 of a Python float raises where the product is inf. The kernel-space
    radius is then sqrt(2), the largest there is; over no input, 0."""
    assert kernels.adversarial_radius("rbf", 1.0, epsilon, norm, 3) == math.sqrt(2)
    assert kernels.adversarial_radius("rbf", 1.0, epsilon, norm, 0) == 0.0
    from river_advsvm import AdvKernelSVM

    model = AdvKernelSVM(epsilon=epsilon, norm=norm, gamma=1.0, seed=0)
    for i in range(6):
        model.learn_one({"a": i / 6, "b": 1.0}, i % 2 == 0)
    assert model.kernel_radius == math.sqrt(2)
    assert math.isfinite(model.decision_one({"a": 0.5})) and math.isfinite(model.rkhs_norm)


def test_radius_is_the_kernel_space_distance_of_the_worst_attack():
    """||phi(x+delta) - phi(x)||_H^2 = 2 - 2 kappa(delta), computed with explicit features."""
    rng = np.random.default_rng(0)
    seeds = kernels.feature_seeds(5, np.arange(200_000))
    hashes = np.array([inputs.key_hash(i) for i in range(2)], dtype=np.uint64)
    W = kernels.spectral_weights("rbf", 1.5, seeds, hashes)
    u = kernels.phases(seeds)
    x = rng.random(2)
    delta = np.array([0.3, 0.0])
    phi = lambda z: np.sqrt(2) * np.cos(z @ W + u) / np.sqrt(len(seeds))  # noqa: E731
    distance = np.linalg.norm(phi(x + delta) - phi(x))
    assert distance == pytest.approx(kernels.adversarial_radius("rbf", 1.5, 0.3, "l2", 2), rel=0.02)


@pytest.mark.parametrize("kernel", kernels.KERNELS)
def test_random_features_are_unbiased_for_the_kernel(kernel):
    rng = np.random.default_rng(1)
    n_features, gamma = 100_000, 0.8
    seeds = kernels.feature_seeds(11, np.arange(n_features))
    hashes = np.array([inputs.key_hash(k) for k in "abc"], dtype=np.uint64)
    W = kernels.spectral_weights(kernel, gamma, seeds, hashes)
    u = kernels.phases(seeds)
    for _ in range(5):
        x, z = rng.random(3), rng.random(3)
        products = 2 * np.cos(x @ W + u) * np.cos(z @ W + u)
        estimate, stderr = products.mean(), products.std() / math.sqrt(n_features)
        exact = kernels.kernel_value(kernel, gamma, x - z)[0]
        assert abs(estimate - exact) < 4 * stderr


def test_spectral_samples_have_the_right_distribution():
    seeds = kernels.feature_seeds(0, np.arange(50_000))
    gamma = 2.0
    rbf = kernels.spectral_weights("rbf", gamma, seeds, np.array([7], dtype=np.uint64))[0]
    assert rbf.mean() == pytest.approx(0.0, abs=0.03)
    assert rbf.var() == pytest.approx(2 * gamma, rel=0.03)
    lap = kernels.spectral_weights("laplacian", gamma, seeds, np.array([7], dtype=np.uint64))[0]
    # Cauchy(0, gamma): median 0, quartiles at +-gamma.
    assert np.quantile(lap, [0.25, 0.5, 0.75]) == pytest.approx([-gamma, 0.0, gamma], abs=0.06)
    phase = kernels.phases(seeds)
    assert phase.min() >= 0 and phase.max() < 2 * np.pi
    assert phase.mean() == pytest.approx(np.pi, rel=0.02)


def test_weights_of_a_key_do_not_depend_on_the_other_keys():
    seeds = kernels.feature_seeds(3, np.arange(16))
    keys = ["a", 2, ("t", 1), 1.5]
    hashes = np.array([inputs.key_hash(k) for k in keys], dtype=np.uint64)
    together = kernels.spectral_weights("rbf", 1.0, seeds, hashes)
    for i in range(len(keys)):
        alone = kernels.spectral_weights("rbf", 1.0, seeds, hashes[i : i + 1])
        np.testing.assert_array_equal(alone[0], together[i])
    # Features are functions of their own seed only.
    np.testing.assert_array_equal(
        kernels.spectral_weights("rbf", 1.0, seeds[5:6], hashes)[:, 0], together[:, 5]
    )


def test_key_hash_is_stable_and_type_aware():
    assert inputs.key_hash("x") == inputs.key_hash("x")
    assert inputs.key_hash(np.int64(3)) == inputs.key_hash(3)
    assert len({inputs.key_hash(k) for k in [1, 1.5, "1", ("1",), True]}) == 5
    # Injective: the parts of a tuple cannot be confused with a name that spells them out.
    assert inputs.key_hash(("a", "b")) != inputs.key_hash(('a", "s", "b',))
    assert inputs.key_hash(-0.0) == inputs.key_hash(0.0)  # equal as dict keys
    # Names equal as dict keys but of other types keep their own hashes, whichever came first.
    forward = [inputs.key_hash(k) for k in (7, True, 7.0, "7", 1)]
    backward = [inputs.key_hash(k) for k in (1, "7", 7.0, True, 7)][::-1]
    assert forward == backward and len(set(forward)) == 5
    for bad in [object(), math.nan, math.inf, (("a",),) * 1 + ((((("deep",),),),),), "x" * 2000]:
        with pytest.raises(InvalidInput) as error:
            inputs.key_hash(bad)
        assert error.value.code == "bad_name"


def test_l2_lengths_of_rows_whose_squares_under_or_overflow():
    """A row below about 1e-154 squared to 0 (or to a few digits): its length was 0."""
    rows = np.array([[3e-200, 4e-200], [3e-160, -4e-160], [3e200, 4e200], [3.0, 4.0], [0.0, 0.0],
                     [5e-324, 0.0]])
    lengths = [5e-200, 5e-160, 5e200, 5.0, 0.0, 5e-324]
    np.testing.assert_allclose(kernels.l2_lengths(rows), lengths, rtol=1e-15)
    np.testing.assert_allclose([kernels.l2_length(row) for row in rows], lengths, rtol=1e-15)
    # (rows of no entries, as the attacker's step of a sample with no inputs has)
    assert kernels.l2_lengths(np.zeros((2, 0))).tolist() == [0.0, 0.0]


def test_the_models_kernel_radius_follows_the_inputs_of_each_sample():
    """Under L-inf the kernel-space radius grows with the inputs an attacker may move (`d` in
    `eps' = sqrt(2 - 2 exp(-gamma d eps^2))`): on a stream whose samples bring more inputs, the
    model's radius is the one of each sample's inputs, not of the first sample's."""
    from river_advsvm import AdvKernelSVM

    gamma, epsilon = 0.5, 0.1
    model = AdvKernelSVM(epsilon=epsilon, norm="linf", gamma=gamma, adversary="closed_form",
                         seed=0)
    for d in (1, 2, 5, 5, 3):
        model.learn_one({f"x{j}": 0.1 * (j + 1) * (-1) ** d for j in range(d)}, d % 2 == 0)
        assert model.kernel_radius == pytest.approx(
            math.sqrt(2 - 2 * math.exp(-gamma * d * epsilon**2)), rel=1e-12)
