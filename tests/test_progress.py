"""Progress bars and cost estimates: shown on a terminal only, never changing a result."""

from __future__ import annotations

import io
import sys

import numpy as np
import pandas as pd
import pytest

from river_advsvm import AdvKernelSVM, AdvLinearSVM, progress
from river_advsvm.attacks import FGSM, PGD, ZOO, CarliniWagnerL2, Oracle, base
from river_advsvm.evaluate import progressive_robust_val, robustness_report


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


@pytest.fixture
def terminal(monkeypatch):
    """Call it to make stderr a terminal (inside the test: pytest's capture resets sys.stderr
    between setup and call); bars are then drawn at once and estimates noted however small."""
    pytest.importorskip("tqdm")
    monkeypatch.setattr(base, "BAR_DELAY", 0.0)
    monkeypatch.setattr(base, "NOTE_SECONDS", 0.0)
    monkeypatch.setattr("river_advsvm.evaluate.NOTE_SECONDS", 0.0)

    def attach() -> Terminal:
        stream = Terminal()
        monkeypatch.setattr(sys, "stderr", stream)
        return stream

    return attach


def small_problem(n=12, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n + 60, d))
    y = X[:, 0] + 0.5 * X[:, 1] > 0.75
    model = AdvKernelSVM(seed=0, gamma=1.0)
    model.learn_many(X[n:], y[n:])
    return model, X[:n], y[:n]


ATTACKS = [
    FGSM(epsilon=0.1),
    PGD(epsilon=0.1, steps=7),
    CarliniWagnerL2(search_steps=3, steps=11),
    ZOO(search_steps=2, steps=15, coordinates=2, seed=0),
]


class Counter:
    def __init__(self):
        self.n = 0

    def update(self, n=1):
        self.n += n


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: type(a).__name__)
def test_an_attack_reports_exactly_its_announced_steps(attack):
    model, X, y = small_problem()
    counter = Counter()
    attack._attack(Oracle(model, list(range(X.shape[1])), list(y)), X, counter)
    assert counter.n == attack._progress_total()


def test_zoo_counts_the_steps_it_skips_when_every_sample_stalled():
    # A constant-ish model: ZOO's objective stalls at once, so it stops early for each c.
    model, X, y = small_problem()
    attack = ZOO(search_steps=3, steps=40, coordinates=1, learning_rate=1e-9, seed=0)
    counter = Counter()
    oracle = Oracle(model, list(range(X.shape[1])), list(y))
    attack._attack(oracle, X, counter)
    assert counter.n == 3 * 40
    # it did stop early: far fewer queries than every step would have made
    assert oracle.n_queries < len(X) * 3 * 40 * 3


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: type(a).__name__)
def test_the_estimate_counts_at_least_every_query_the_attack_makes(attack):
    """`_evaluations` is an upper bound: the estimate never undercounts the model's work."""
    model, X, y = small_problem()
    d = X.shape[1]
    result = attack.run(model, X, y)
    gradients, margins = attack._evaluations(d)
    # a white-box gradient evaluation is also one margin query
    assert result.n_queries <= len(X) * (gradients + margins)
    assert attack.estimate_seconds(model, X, y) > 0


def test_black_box_gradients_are_estimated_as_finite_differences():
    from river import linear_model

    model = linear_model.LogisticRegression()
    rng = np.random.default_rng(0)
    X = rng.random((30, 3))
    for row, label in zip(X.tolist(), (X[:, 0] > 0.5).tolist()):
        model.learn_one(dict(enumerate(row)), label)
    attack = PGD(epsilon=0.1, steps=3)
    result = attack.run(model, X[:5], X[:5, 0] > 0.5)
    gradients, margins = attack._evaluations(3)
    assert result.n_queries <= 5 * (gradients * (2 * 3 + 1) + margins)


def test_nothing_is_written_when_stderr_is_not_a_terminal(capsys):
    model, X, y = small_problem()
    ZOO(search_steps=1, steps=10, coordinates=2, seed=0).run(model, X, y)
    robustness_report(model, X, y, [FGSM(), PGD()], epsilons=[0.05, 0.1])
    assert capsys.readouterr().err == ""


def test_a_terminal_gets_the_estimate_and_the_bars(terminal):
    stream = terminal()
    model, X, y = small_problem()
    robustness_report(model, X, y, {"PGD": PGD(steps=5), "ZOO": ZOO(steps=10, search_steps=1,
                                                                     coordinates=2, seed=0)},
                      epsilons={"linf": [0.05, 0.1], "l2": [0.5]})
    shown = stream.getvalue()
    assert "robustness_report on 12 samples: PGD ~" in shown and ", ZOO ~" in shown
    assert "ZOO on 12 samples: up to 10 steps, ~" in shown
    assert "robustness_report" in shown and "3/3" in shown  # the outer bar, finished
    assert "ZOO (12 samples)" in shown


def test_progress_false_is_silent_on_a_terminal(terminal):
    stream = terminal()
    model, X, y = small_problem()
    ZOO(search_steps=1, steps=10, coordinates=2, seed=0).run(model, X, y, progress=False)
    robustness_report(model, X, y, [PGD()], epsilons=[0.1], progress=False)
    assert stream.getvalue() == ""


def test_without_tqdm_there_is_no_bar_and_the_same_result(terminal, monkeypatch):
    stream = terminal()
    model, X, y = small_problem()
    with_bar = ZOO(search_steps=1, steps=10, coordinates=2, seed=0).run(model, X, y)
    assert stream.getvalue()
    stream.seek(0)
    stream.truncate()
    monkeypatch.setattr(progress, "_tqdm", lambda: None)
    assert not progress.enabled()
    without = ZOO(search_steps=1, steps=10, coordinates=2, seed=0).run(model, X, y)
    assert stream.getvalue() == ""
    np.testing.assert_array_equal(with_bar.adversarial, without.adversarial)
    assert with_bar.n_queries == without.n_queries


def test_the_bar_does_not_change_the_report(terminal):
    terminal()
    model, X, y = small_problem()
    attacks = [FGSM(), PGD(), CarliniWagnerL2(search_steps=2, steps=10)]
    shown = robustness_report(model, X, y, attacks, epsilons={"linf": [0.1], "l2": [0.5]})
    quiet = robustness_report(model, X, y, attacks, epsilons={"linf": [0.1], "l2": [0.5]},
                              progress=False)
    columns = ["attack", "norm", "epsilon", "accuracy", "mean_perturbation", "no_gradient"]
    pd.testing.assert_frame_equal(shown[columns], quiet[columns])


def test_progressive_validation_counts_the_samples_of_a_sized_stream(terminal):
    stream = terminal()
    rng = np.random.default_rng(1)
    X = rng.random((40, 3))
    pairs = list(zip((dict(enumerate(r)) for r in X.tolist()), (X[:, 0] > 0.5).tolist()))
    final = progressive_robust_val(pairs, AdvLinearSVM(), PGD(epsilon=0.05), sample_rate=5)
    assert final["step"] == 40
    assert "progressive validation" in stream.getvalue() and "40/40" in stream.getvalue()


def test_durations_read_like_a_person_would_say_them():
    assert progress.duration(0.04) == "0.0 s"
    assert progress.duration(9.94) == "9.9 s"
    assert progress.duration(59.4) == "59 s"
    assert progress.duration(61) == "1 min 01 s"
    assert progress.duration(3599) == "59 min 59 s"
    assert progress.duration(3600) == "1 h 00 min"
