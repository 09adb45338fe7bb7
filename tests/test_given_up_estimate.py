"""The average's margin between its exact ones (`river_advsvm.given_up_estimate`): the collapse
watch of a model that predicts with an average keeping vectors f gave up judges it on an
estimate, corrected by the recent part of those vectors, and on exact margins alone where the
estimate misses signs."""

from __future__ import annotations

import copy
import math
import random

import pytest

from river_advsvm import AdvKernelSVM
from river_advsvm.checkpoint import CheckpointError
from river_advsvm.given_up_estimate import MAX_MISSES, GivenUpEstimate


def word_counts(n: int, vocabulary: int, seed: int = 0):
    """Bags of 5 words: 3 from the label's half of the vocabulary, 2 from all of it."""
    rng = random.Random(seed)
    samples = []
    for _ in range(n):
        y = rng.random() < 0.5
        half = range(vocabulary // 2) if y else range(vocabulary // 2, vocabulary)
        words = rng.sample(half, 3) + rng.sample(range(vocabulary), 2)
        samples.append(({f"w{w}": 1.0 for w in words}, y))
    return samples


def test_the_part_is_the_mean_of_the_exact_ones_and_the_misses_their_share():
    estimate = GivenUpEstimate(horizon=4)
    parts = [0.5, -1.0, 2.0, 0.25]
    part = misses = 0.0
    for held, given_up in zip([0.1, -0.2, 0.3, -0.4], parts):
        missed = (held + part > 0) != (held + given_up > 0)
        estimate.exact(held, held + given_up)
        misses += (missed - misses) / 4
        part += (given_up - part) / 4
        assert math.isclose(estimate.part, part) and math.isclose(estimate.misses, misses)
    assert estimate.of(1.0) == (None if misses > MAX_MISSES else 1.0 + part)
    estimate.negate()
    assert estimate.part == -part
    estimate.reset()
    assert estimate.part == 0.0 and estimate.misses == misses


@pytest.mark.parametrize("state", [
    None, [0.1], [0.1, 0.2, 0.3], [math.nan, 0.0], [0.0, math.inf], [2.0, 0.0], [0.0, -0.1],
    [0.0, 1.5], ["0", 0.0], (0.0, 0.0),
])
def test_a_bad_saved_estimate_is_refused_and_changes_nothing(state):
    estimate = GivenUpEstimate()
    estimate.exact(0.2, -0.3)
    before = estimate.state()
    with pytest.raises(ValueError, match="estimate"):
        estimate.restore(state, max_part=1.0)
    assert estimate.state() == before


def test_on_sparse_word_counts_a_model_deciding_both_ways_is_not_collapsed():
    """Vectors of sparse inputs are mostly given up, and each is near few others: the average
    over the vectors f holds decided one way there while the average decided both, and
    `collapsed` stayed true."""
    samples = word_counts(2600, 5000)
    model = AdvKernelSVM(seed=0, budget=256)
    right, positive = 0, 0
    for i, (x, y) in enumerate(samples):
        if i >= 2100:
            decision = model.predict_one(x)
            right += decision == y
            positive += decision
        model.learn_one(x, y)
    assert model._store.averaged.orphans.size > 0
    assert 50 < positive < 450 and right / 500 > 0.6  # (it decides both ways, and rightly)
    assert not model.collapsed


def test_a_checkpoint_keeps_the_estimate_and_refuses_a_bad_one():
    samples = word_counts(700, 1000)
    model = AdvKernelSVM(seed=0, budget=64)
    for x, y in samples:
        model.learn_one(x, y)
    assert model._given_up.part != 0.0
    state, arrays = model.to_checkpoint()
    assert AdvKernelSVM.from_checkpoint(state, arrays)._given_up.state() == model._given_up.state()
    edited = copy.deepcopy(state)
    edited["state"]["model"]["given_up_estimate"] = [1e300, 0.0]
    with pytest.raises(CheckpointError, match="estimate"):
        AdvKernelSVM.from_checkpoint(edited, arrays)
