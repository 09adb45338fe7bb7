"""RobustnessMonitor: drift scenarios with fixed seeds, false alarms, bounds, callbacks."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
import pickle
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import drift, linear_model
from river.datasets import synth

from river_advsvm import AdvKernelSVM, AdvLinearSVM, InvalidInput
from river_advsvm.attacks import FGSM, PGD
from river_advsvm.alerts import ALERT_KINDS, RECENT_SAMPLES, Alert, Worsening
from river_advsvm.monitor import RobustnessMonitor

#: The monitor's attack in the scenarios: L-inf PGD-10 at 0.02 on [0, 1]^10. On the stationary
#: hyperplane stream the default model's robust gap comes near the default threshold 0.2 (a
#: 100-sample window reached 0.21 once in 20,000 samples with seed 0).
EPSILON = 0.02
T = 3000
#: The detection tests' streams: one in the default run, all three in the slow one.
SEEDS = [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)]


def hyperplane(seed: int, n: int):
    """River's rotating-hyperplane generator with no rotation and no label noise: stationary,
    10 features in [0, 1]."""
    return synth.Hyperplane(seed=seed, n_features=10, noise_percentage=0.0).take(n)


def run_loop(stream, model, monitor, change=None):
    """The user's loop: predict, show the monitor, learn. `change(i, x, y)` alters sample i."""
    for i, (x, y) in enumerate(stream):
        if change is not None:
            x, y = change(i, x, y)
        y_pred = model.predict_one(x)
        monitor.update(x, y, y_pred=y_pred)
        model.learn_one(x, y)
    return monitor.alerts


def new_monitor(model, seed, **kwargs):
    return RobustnessMonitor(model, attack=PGD(epsilon=EPSILON), seed=seed, **kwargs)


# -- the three scenarios --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_label_flip_raises_clean_drift_within_100_samples(seed):
    """Abrupt concept drift: every label is flipped from step T on.

    Measured with these seeds: `clean_drift` 40 samples after T (ADWIN tests every 32 samples),
    then `robust_drift` 310-400 after T; nothing before T. Asserted: `clean_drift` within 100.
    """
    model = AdvKernelSVM(seed=seed)
    monitor = new_monitor(model, seed)

    def flip(i, x, y):
        return x, (not y) if i >= T else y

    alerts = run_loop(hyperplane(seed, T + 1000), model, monitor, flip)
    assert not [a for a in alerts if a.step <= T]
    first = next(a for a in alerts if a.kind == "clean_drift")
    assert T < first.step <= T + 100, alerts
    assert first.clean_accuracy < 0.97  # the window saw the flipped labels


def stealthy_pgd(model, adversary, x, y):
    """The adversary's PGD point, pulled back along the segment from `x` to the last point the
    model still classifies right: the sample keeps its clean prediction but sits at the
    decision boundary, so a clean-accuracy monitor does not see it."""
    x_adv = adversary.perturb_one(model, x, y)
    if model.predict_one(x_adv) == y:
        return x_adv
    right, wrong = 0.0, 1.0
    for _ in range(12):
        t = (right + wrong) / 2
        if model.predict_one({k: x[k] + t * (x_adv[k] - x[k]) for k in x}) == y:
            right = t
        else:
            wrong = t
    return {k: x[k] + right * (x_adv[k] - x[k]) for k in x}


@pytest.mark.parametrize("seed", SEEDS)
def test_adversary_from_step_t_raises_a_robust_alert_within_500_samples(seed):
    """From step T every sample is replaced by a stealthy PGD point (L-inf, radius 0.1, against
    the current model) on an otherwise stationary stream.

    Measured with these seeds: the first alert is `robust_gap` 177-264 samples after T (robust
    accuracy 0.69-0.75 against clean 0.93-0.95), `robust_drift` follows 312-394 after T, and
    `clean_drift` only 870-970 after T (when the model, trained on boundary points, starts to
    err) or not within 1,500; nothing before T. Asserted: a robust alert within 500 samples,
    before any clean one, none before T.
    """
    model = AdvKernelSVM(seed=seed)
    monitor = new_monitor(model, seed)
    adversary = PGD(epsilon=0.1)

    def inject(i, x, y):
        return (stealthy_pgd(model, adversary, x, y) if i >= T else x), y

    alerts = run_loop(hyperplane(seed, T + 500), model, monitor, inject)
    assert not [a for a in alerts if a.step <= T]
    assert alerts, "no alert"
    assert alerts[0].kind in ("robust_drift", "robust_gap"), alerts
    assert alerts[0].step <= T + 500
    assert alerts[0].robust_accuracy < alerts[0].clean_accuracy - 0.15


@pytest.mark.parametrize("seed, length",
                         [(0, 4_000), pytest.param(0, 20_000, marks=pytest.mark.slow)])
def test_a_stationary_stream_raises_no_alert(seed, length):
    """The false-alarm test: a stationary stream, default detectors (ADWIN), gap threshold and
    sample rate (10%: ~2,000 attacks in 20,000 samples, the slow case). At the other tests'
    radius the default model's robust gap on this stream sits at the threshold itself (0.2: a
    100-sample window crosses it by chance once in 20,000 samples with seed 0, not with seed
    1), so the attack here is at half that radius, where the gap is clearly below. Measured:
    no alert, seeds 0-1."""
    model = AdvKernelSVM(seed=seed)
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=EPSILON / 2), seed=seed)
    alerts = run_loop(hyperplane(seed, length), model, monitor)
    assert alerts == []
    assert monitor.n_seen == length
    assert 0.085 * length < monitor.n_sampled < 0.115 * length
    window = monitor.snapshot()
    assert window["clean_accuracy"] > 0.9
    assert window["gap"] < 0.2


# -- detectors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("detector", [drift.binary.DDM(), drift.PageHinkley(), drift.KSWIN(seed=0)],
                         ids=["DDM", "PageHinkley", "KSWIN"])
def test_any_river_detector_works(detector):
    """Other River detectors on the label-flip scenario, each cloned for the two streams."""
    model = AdvLinearSVM()
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=EPSILON), detector=detector,
                                gap_threshold=None)

    def flip(i, x, y):
        return x, (not y) if i >= T else y

    alerts = run_loop(hyperplane(0, T + 1500), model, monitor, flip)
    clean = [a for a in alerts if a.kind == "clean_drift"]
    assert clean and T < clean[0].step <= T + 1500, alerts
    assert clean[0].detector == type(detector).__name__
    assert monitor.detector is detector and not detector.drift_detected  # the prototype is unused


def test_detections_of_a_falling_error_are_not_alerts():
    """A detector fires on any change; only a rising error is reported."""
    falling, rising = Worsening(drift.ADWIN()), Worsening(drift.ADWIN())
    rng = random.Random(0)
    high = [int(rng.random() < 0.5) for _ in range(2000)]
    low = [int(rng.random() < 0.05) for _ in range(2000)]
    fired = 0
    for error in high + low:
        assert not falling.update(error)
        fired += falling.detector.drift_detected
    assert fired >= 1  # the detector did fire: the filter kept it quiet
    assert any(rising.update(error) for error in low + high)


# -- alerts ---------------------------------------------------------------------------------------


def flipping_every(period: int):
    def change(i, x, y):
        return x, (not y) if (i // period) % 2 else y

    return change


def test_alerts_go_to_the_callback_and_the_list_is_bounded():
    model = AdvLinearSVM()
    received = []
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=EPSILON), on_alert=received.append,
                                max_alerts=3, gap_threshold=None)
    returned = []
    for i, (x, y) in enumerate(hyperplane(0, 12_000)):
        x, y = flipping_every(1000)(i, x, y)
        returned += monitor.update(x, y)
        model.learn_one(x, y)
    assert len(received) > 3, received  # a clean_drift after most flips
    assert received == returned
    assert monitor.alerts == received[-3:]
    assert all(isinstance(a, Alert) and a.kind in ALERT_KINDS for a in received)


def test_alerts_are_ready_for_json():
    alert = Alert("robust_gap", 12, 0.9, 0.5, None, 0.4, 30, "gap > 0.2")
    assert json.loads(json.dumps(dataclasses.asdict(alert)))["kind"] == "robust_gap"
    assert str(alert) == ("robust_gap at step 12: clean 90.0%, robust 50.0%, certified n/a "
                          "(30 attacked) [gap > 0.2]")


def test_gap_alert_has_hysteresis_and_needs_min_sampled():
    """The gap flaps around the threshold: one alert until it has fallen below threshold -
    hysteresis, and none before `min_sampled` attacked samples."""
    model = _two_class_linear(rounds=200)
    near = ({"a": 0.55, "b": 0.45}, True)   # flipped by PGD at 0.3 (see below)
    far = ({"a": 0.95, "b": 0.95}, True)    # never flipped
    assert PGD(epsilon=0.3).perturb_one(model, *near) != near[0]
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.3), sample_rate=1, window_size=20,
                                gap_threshold=0.3, gap_hysteresis=0.2, min_sampled=10)
    kinds = []
    for _ in range(9):
        kinds += [a.kind for a in monitor.update(*near)]
    assert kinds == []  # the gap is 1.0 already, but only 9 attacked samples
    kinds += [a.kind for a in monitor.update(*near)]
    assert kinds == ["robust_gap"]
    # Gap around 0.3-0.5 (not below 0.1): no second alert.
    for i in range(60):
        kinds += [a.kind for a in monitor.update(*(near if i % 5 < 2 else far))]
    assert kinds.count("robust_gap") == 1
    # Down to 0.2, below the threshold but not below threshold - hysteresis, then up to 0.4
    # again: still the one alert.
    for i in range(40):
        kinds += [a.kind for a in monitor.update(*(near if i % 5 == 0 else far))]
    assert monitor.snapshot()["robust_accuracy"] == pytest.approx(0.8)
    for i in range(40):
        kinds += [a.kind for a in monitor.update(*(near if i % 5 < 2 else far))]
    assert kinds.count("robust_gap") == 1
    # Below 0.1 for a while, then up again: a second alert.
    for _ in range(20):
        monitor.update(*far)
    for _ in range(20):
        kinds += [a.kind for a in monitor.update(*near)]
    assert kinds.count("robust_gap") == 2


def test_the_gap_compares_the_attacked_samples_with_themselves():
    """The gap is the clean accuracy of the attacked samples less their robust accuracy: the
    samples not attacked never enter it. Here every attacked sample is misclassified (neither
    right nor robust: no gap) and every other one is right; the clean accuracy over all of
    them, 0.5, would make a gap of 0.5 and an alert."""
    model = _two_class_linear(rounds=200)
    wrong, right = ({"a": 0.9, "b": 0.9}, False), ({"a": 0.9, "b": 0.9}, True)
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=2, window_size=20,
                                gap_threshold=0.3, min_sampled=5)
    kinds = []
    for step in range(1, 61):  # (step 2, 4, ... is attacked)
        kinds += [a.kind for a in monitor.update(*(wrong if step % 2 == 0 else right))]
    snapshot = monitor.snapshot()
    assert snapshot["clean_accuracy"] == pytest.approx(0.5)
    assert snapshot["robust_accuracy"] == 0.0 and "robust_gap" not in kinds


class _Collapsing:
    """A model that says whether it has collapsed to one class (`collapsed`), as
    `AdvKernelSVM` does."""

    collapsed = False
    classes = (False, True)

    def predict_one(self, x, **kwargs):
        return True


def test_a_collapse_is_one_alert_until_the_model_recovers():
    model = _Collapsing()
    monitor = RobustnessMonitor(model, sample_rate=10**6)
    kinds = []
    for collapsed in [False] * 3 + [True] * 5 + [False] * 2 + [True] * 4:
        model.collapsed = collapsed
        kinds += [a.kind for a in monitor.update({"a": 1.0}, True)]
    assert kinds == ["collapsed", "collapsed"]


# -- what the monitor does and costs --------------------------------------------------------------


class CountingSVM(AdvLinearSVM):
    predictions = 0

    def predict_one(self, x, **kwargs):
        CountingSVM.predictions += 1
        return super().predict_one(x, **kwargs)


def test_an_unsampled_sample_costs_one_predict_or_none():
    model = CountingSVM()
    model.learn_one({"a": 0.1}, False)
    model.learn_one({"a": 0.9}, True)
    monitor = RobustnessMonitor(model, sample_rate=1_000)
    CountingSVM.predictions = 0
    monitor.update({"a": 0.2}, False)
    assert CountingSVM.predictions == 1
    monitor.update({"a": 0.2}, False, y_pred=False)
    assert CountingSVM.predictions == 1
    assert monitor.n_sampled == 0 and monitor.attack_seconds == 0.0


def test_sampling_every_n_and_at_a_rate():
    model = AdvLinearSVM()
    every = RobustnessMonitor(model, attack=FGSM(epsilon=0.01), sample_rate=7)
    rate = RobustnessMonitor(model, attack=FGSM(epsilon=0.01), sample_rate=0.25, seed=3)
    for x, y in hyperplane(0, 2000):
        every.update(x, y)
        rate.update(x, y)
        model.learn_one(x, y)
    assert every.n_sampled == 2000 // 7 - 1  # the first sample, seen before any class, is skipped
    assert abs(rate.n_sampled - 500) < 60
    assert every.robust_window_size == 143 and rate.robust_window_size == 250


def test_the_monitor_never_changes_the_model():
    model = AdvKernelSVM(seed=0)
    stream = list(hyperplane(0, 600))
    for x, y in stream[:500]:
        model.learn_one(x, y)
    before = model.to_checkpoint()
    margins = [model.decision_one(x) for x, _ in stream[500:]]
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=1)
    for x, y in stream[500:]:
        monitor.update(x, y)
    after = model.to_checkpoint()
    assert before[0] == after[0]
    assert all(np.array_equal(before[1][k], after[1][k]) for k in before[1])
    assert margins == [model.decision_one(x) for x, _ in stream[500:]]
    assert monitor.n_sampled == 100


def test_nan_is_refused_as_the_model_refuses_it_and_a_refused_sample_is_not_counted():
    """A model of this package refuses NaN when it learns, so `update` (just before) refuses
    it too; for any other model NaN is a missing input, dropped."""
    from river import linear_model

    stream = list(hyperplane(0, 300))
    model = AdvKernelSVM(seed=0)
    other = linear_model.LogisticRegression()
    for x, y in stream:
        model.learn_one(x, y)
        other.learn_one(x, y)
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=1)
    for x, y in stream[:50]:
        monitor.update(x, y)
    with pytest.raises(InvalidInput, match=r"feature 3 is nan; learning needs finite values"):
        monitor.update({**stream[50][0], 3: np.nan}, stream[50][1])
    with pytest.raises(InvalidInput):
        monitor.check({**stream[50][0], 7: np.float32("nan")}, stream[50][1])
    assert monitor.n_seen == monitor.n_sampled == 50

    with_nan = RobustnessMonitor(other, attack=PGD(epsilon=0.05), sample_rate=1)
    without = RobustnessMonitor(other, attack=PGD(epsilon=0.05), sample_rate=1)
    for x, y in stream[:50]:
        with_nan.update({**x, 3: np.nan, 7: np.float32("nan")}, y)
        without.update({k: v for k, v in x.items() if k not in (3, 7)}, y)
    assert with_nan.n_sampled == without.n_sampled == 50
    assert dataclasses.asdict(with_nan.last) == dataclasses.asdict(without.last)
    assert with_nan.snapshot() == without.snapshot()
    with pytest.raises(ValueError):
        with_nan.update({**stream[0][0], 2: "high"}, stream[0][1])
    with pytest.raises(ValueError, match="dict"):
        with_nan.update(list(stream[0][0].values()), stream[0][1])
    assert with_nan.n_seen == 50 and with_nan.n_sampled == 50


@pytest.mark.parametrize("binary", [AdvKernelSVM(gamma=1.0, seed=0), AdvLinearSVM()],
                         ids=["kernel", "linear"])
def test_a_one_vs_rest_model_has_nan_refused_as_it_refuses_it(binary):
    """A one-vs-rest model refuses NaN when it learns, as its binary models do: `update` and
    `check` took NaN for a missing input there, counting a sample the model then refused."""
    from river_advsvm.multiclass import OneVsRest

    model = OneVsRest(binary)
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.1), sample_rate=1)
    for i in range(40):
        x, y = {"a": (i % 3) / 3, "b": (i * 7 % 5) / 5}, i % 3
        monitor.update(x, y)
        model.learn_one(x, y)
    bad = {"a": math.nan, "b": 0.5}
    with pytest.raises(InvalidInput, match="nan"):
        model.learn_one(bad, 1)
    with pytest.raises(InvalidInput, match="nan"):
        monitor.update(bad, 1)
    with pytest.raises(InvalidInput, match="nan"):
        monitor.check(bad, 1)
    with pytest.raises(InvalidInput, match="no label"):
        monitor.update({"a": 0.5, "b": 0.5}, None)
    assert monitor.n_seen == 40
    monitor.update({"a": 0.5, "b": 0.5}, "a new label")  # (a new class, as for learn_one)
    assert monitor.n_seen == 41


def test_an_input_outside_the_attacks_box_is_refused_with_a_hint():
    model = AdvKernelSVM(seed=0)
    monitor = RobustnessMonitor(model)  # the default PGD(): inputs in [0, 1]
    with pytest.raises(InvalidInput, match="bounds=None"):
        monitor.update({"a": 2.5, "b": 0.5}, True)
    assert monitor.n_seen == 0


def test_memory_is_bounded_on_a_stream_of_ever_new_labels():
    """The clean window was River's rolling accuracy fed the labels, whose confusion matrix
    keeps a row for every label it ever saw: 450 bytes more a new label, with a window of 100
    (a model of open labels takes them; a binary model of this package refuses each, and so
    does the monitor). The window's accuracy and its saved state are those of the labels as
    before."""
    from river import dummy

    model = dummy.NoChangeClassifier()
    monitor = RobustnessMonitor(model, sample_rate=10**9, window_size=100)

    def windows_bytes():  # (ADWIN's own bounded growth, tested below, left out)
        return len(pickle.dumps({k: v for k, v in vars(monitor).items()
                                 if k not in ("model", "_clean_drift", "_robust_drift")}))

    sizes = []
    for i in range(1, 6_001):
        x, y = {"a": 0.5, "b": 0.25}, (f"even-{i % 2}" if i <= 100 else f"label-{i}")
        monitor.update(x, y, y_pred=model.predict_one(x))
        model.learn_one(x, y)
        if i in (2_000, 6_000):
            sizes.append(windows_bytes())
    assert sizes[1] < 1.05 * sizes[0], sizes
    assert monitor.snapshot()["clean_accuracy"] == 0.0  # no new label is ever predicted
    restored = RobustnessMonitor(model, sample_rate=10**9, window_size=100)
    restored.restore(json.loads(json.dumps(monitor.state())))
    assert restored.state() == monitor.state()


@pytest.mark.parametrize("label", ["cat", 3])
def test_a_label_the_binary_model_would_refuse_is_refused_before_anything_is_counted(label):
    """The monitor runs before `learn_one`: a third label, which the model would refuse, is
    not counted as a clean error first (nor put in the drift detector's window)."""
    model = AdvKernelSVM(gamma=1.0, seed=0)
    for i in range(20):
        model.learn_one({"a": i % 2, "b": 0.5}, bool(i % 2))
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.1), sample_rate=1)
    monitor.update({"a": 1, "b": 0.5}, True)
    before = json.dumps(monitor.state())
    with pytest.raises(InvalidInput, match="third class"):
        monitor.update({"a": 1, "b": 0.5}, label)
    with pytest.raises(InvalidInput, match="third class"):
        monitor.check({"a": 1, "b": 0.5}, label)
    assert json.dumps(monitor.state()) == before and monitor.n_seen == 1


def test_memory_is_bounded_on_a_long_stream():
    """Windows, alert list and detector state stop growing: the monitor's pickled state after
    40,000 samples is within 10% of its size after 10,000 (the model is left out)."""
    model = AdvLinearSVM()
    monitor = RobustnessMonitor(model, attack=FGSM(epsilon=EPSILON), sample_rate=10,
                                window_size=500, max_alerts=5)

    def state_size():
        state = {k: v for k, v in vars(monitor).items() if k != "model"}
        return len(pickle.dumps(state))

    sizes = []
    stream = iter(hyperplane(0, 40_000))
    change = flipping_every(3000)  # drifts now and then, so alerts keep coming
    for stop in (10_000, 40_000):
        while monitor.n_seen < stop:
            x, y = change(monitor.n_seen, *next(stream))
            monitor.update(x, y)
            model.learn_one(x, y)
        sizes.append(state_size())
    assert len(monitor._clean.window) == 500
    assert len(monitor._robust.window) == monitor.robust_window_size == 50
    assert len(monitor.alerts) == 5
    assert sizes[1] < 1.1 * sizes[0], sizes
    assert len(monitor._clean_drift._recent) == RECENT_SAMPLES


def test_a_model_without_margins_is_attacked_black_box_and_not_certified():
    model = linear_model.LogisticRegression()
    monitor = RobustnessMonitor(model, attack=FGSM(epsilon=0.05), sample_rate=5)
    for x, y in hyperplane(0, 1000):
        monitor.update(x, y)
        model.learn_one(x, y)
    window = monitor.snapshot()
    assert monitor.n_sampled == 200
    assert window["certified_accuracy"] is None
    assert window["robust_accuracy"] < window["clean_accuracy"]  # the attack does something
    assert monitor.last.certified is None and monitor.last.radius is None


def test_a_sample_is_only_attacked_once_the_model_knows_its_label():
    model = AdvKernelSVM(seed=0)
    monitor = RobustnessMonitor(model, sample_rate=1)
    monitor.update({"a": 0.5}, 1)
    model.learn_one({"a": 0.5}, 1)
    monitor.update({"a": 0.6}, 1)  # one class known: nothing to attack yet
    assert monitor.n_sampled == 0
    model.learn_one({"a": 0.1}, 0)
    monitor.update({"a": 0.6}, 1)
    assert monitor.n_sampled == 1 and monitor.last.sampled


@pytest.mark.parametrize(
    "kwargs",
    [dict(sample_rate=0), dict(sample_rate=1.5), dict(sample_rate=True), dict(window_size=0),
     dict(gap_threshold=1.0), dict(max_alerts=0), dict(detector=object()),
     dict(attack="pgd"), dict(gap_hysteresis=-0.1), dict(min_sampled=0),
     # past what River's rolling windows take (an OverflowError)
     dict(window_size=2**63), dict(min_sampled=10**8), dict(max_alerts=10**8)],
)
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises((ValueError, TypeError)):
        RobustnessMonitor(AdvLinearSVM(), **kwargs)


def _two_class_linear(rounds: int = 20):
    """A linear model of two classes: (0.2, 0.3) False, (0.8, 0.6) True, `rounds` each."""
    model = AdvLinearSVM()
    for _ in range(rounds):
        model.learn_one({"a": 0.2, "b": 0.3}, False)
        model.learn_one({"a": 0.8, "b": 0.6}, True)
    return model


@pytest.mark.parametrize("sample_rate", [1, 0.5])
def test_a_sample_the_attack_refuses_is_refused_before_anything_is_counted(sample_rate):
    model = _two_class_linear()
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=sample_rate)
    for _ in range(3):
        monitor.update({"a": 0.8, "b": 0.6}, True)
    saved = monitor.state()
    # Outside the attack's box [0, 1], and a value that is no number with the prediction given
    # (so the model is not asked): the attack would refuse both.
    with pytest.raises(ValueError, match="outside bounds"):
        monitor.update({"a": 2.0, "b": 0.6}, True)
    with pytest.raises(ValueError, match="must be numbers"):
        monitor.update({"a": "high", "b": 0.6}, True, y_pred=True)
    assert monitor.state() == saved
    # Past the box by rounding (a min-max scaler's 1.0000000000000002): attacked and
    # certified from its edge, as the sample on the edge.
    twin = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=sample_rate)
    twin.restore(saved)
    monitor.update({"a": 0.8, "b": float(np.nextafter(1.0, 2.0))}, True)
    twin.update({"a": 0.8, "b": 1.0}, True)
    assert monitor.snapshot() == twin.snapshot()


def test_numpy_labels_give_a_json_state_that_restores():
    """River's `stream.iter_array` gives numpy labels: the state is still plain JSON."""
    model = AdvLinearSVM()
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=1, window_size=10)
    for i in range(30):
        x, y = ({"a": 0.8, "b": 0.6}, np.int64(1)) if i % 2 else ({"a": 0.2, "b": 0.3}, np.int64(0))
        monitor.update(x, y, y_pred=None if i % 3 else np.int64(1))
        model.learn_one(x, y)
    saved = json.loads(json.dumps(monitor.state()))
    restored = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=1, window_size=10)
    restored.restore(saved)
    assert restored.state() == saved
    assert restored.snapshot() == monitor.snapshot()


@pytest.mark.parametrize("name, value", [("gap_threshold", "0.2"), ("gap_hysteresis", "0.1"),
                                         ("gap_hysteresis", True), ("gap_threshold", [0.2])])
def test_a_parameter_that_is_no_number_is_refused_by_name(name, value):
    with pytest.raises(ValueError, match=name):
        RobustnessMonitor(AdvLinearSVM(), **{name: value})


def test_numpy_parameters_are_the_numbers_they_hold():
    """A rate or a threshold taken from an array: `np.int64(3)` is every third sample."""
    given = RobustnessMonitor(AdvLinearSVM(), sample_rate=np.int64(3),
                              gap_threshold=np.float32(0.25), gap_hysteresis=np.float64(0.1))
    plain = RobustnessMonitor(AdvLinearSVM(), sample_rate=3, gap_threshold=0.25,
                              gap_hysteresis=0.1)
    assert given.state() == plain.state()
    assert RobustnessMonitor(AdvLinearSVM(), sample_rate=np.float32(0.5)).sample_rate == 0.5


@pytest.mark.parametrize("label", [float("nan"), np.float64("nan"), None, ("a", 1)])
def test_a_label_state_cannot_hold_is_refused_before_anything_is_counted(label):
    """A missing label read from pandas is NaN: the monitor counted it, the model then refused
    it, and the state saved from then on was refused by `restore` (and is not strict JSON)."""
    model = _two_class_linear()
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=0.5)
    monitor.update({"a": 0.8, "b": 0.6}, True)
    saved = monitor.state()
    with pytest.raises(ValueError, match="label"):
        monitor.update({"a": 0.8, "b": 0.6}, label)
    assert monitor.state() == saved
    RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=0.5).restore(
        json.loads(json.dumps(saved, allow_nan=False)))


@pytest.mark.parametrize("sample_rate", [1, 0.99])
def test_a_sample_the_model_refuses_under_attack_leaves_the_counts_as_they_were(sample_rate):
    """A name the model cannot hash (an infinite float) is no trouble to a prediction given by
    the caller, nor to `predict_one` when its value is 0, but the attack's gradient hashes it:
    the sample had been counted as clean and sampled by then. Only its draw is used up now."""
    model = _two_class_linear()
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=sample_rate)
    monitor.update({"a": 0.8, "b": 0.6}, True)
    saved = monitor.state()
    for x, y_pred in [({"a": 0.8, math.inf: 0.5}, True), ({"a": 0.8, math.inf: 0.0}, None)]:
        with pytest.raises(ValueError, match="inf"):
            monitor.update(x, True, y_pred=y_pred)
    assert {**monitor.state(), "rng": None} == {**saved, "rng": None}
    if isinstance(sample_rate, int):
        assert monitor.state() == saved


@pytest.mark.parametrize("y_pred", [math.inf, math.nan, ("a", 1), [True]])
def test_a_prediction_that_is_no_label_counts_as_wrong_and_the_state_still_restores(y_pred):
    """A model that predicts no label (a NaN) made every later state one that `restore`
    refused (and that strict JSON cannot write)."""
    model = _two_class_linear()
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=1, window_size=5)
    monitor.update({"a": 0.8, "b": 0.6}, True, y_pred=y_pred)
    assert monitor.last.correct is False and monitor.snapshot()["clean_accuracy"] == 0.0
    saved = json.loads(json.dumps(monitor.state(), allow_nan=False))
    restored = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=1, window_size=5)
    restored.restore(saved)
    assert restored.snapshot() == monitor.snapshot()


@pytest.mark.parametrize("on_alert", ["print", 3, [print]])
def test_an_on_alert_that_cannot_be_called_is_refused_when_the_monitor_is_made(on_alert):
    """It was taken, and the first alert raised `TypeError: 'str' object is not callable`
    from `update`, after the monitor had counted the sample and kept the alert."""
    with pytest.raises(TypeError, match="on_alert"):
        RobustnessMonitor(AdvLinearSVM(), on_alert=on_alert)


@pytest.mark.parametrize("model", [None, "svm", AdvLinearSVM])
def test_a_model_that_cannot_predict_is_refused_when_the_monitor_is_made(model):
    """(It was taken, and the first `update` raised `AttributeError: 'NoneType' object has
    no attribute 'predict_one'`.)"""
    with pytest.raises(TypeError, match=r"^model must be a River classifier \(with "
                                        r"predict_one\), got "):
        RobustnessMonitor(model)


def test_a_river_model_of_many_classes_is_attacked_through_its_probabilities():
    """River's Hoeffding tree keeps a set of its classes, as this package's binary models do:
    the monitor took it for one of those and, with more than two classes, never attacked a
    sample (`n_sampled` 0, robust accuracy None, no robust alert possible)."""
    from river import tree

    model = tree.HoeffdingTreeClassifier(grace_period=20)
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.3, norm="l2", steps=2),
                                sample_rate=4, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(200):
        label = int(rng.integers(3))
        x = {i: float(v) for i, v in enumerate(np.clip(rng.normal(label / 3, 0.1, 4), 0, 1))}
        monitor.update(x, label)
        model.learn_one(x, label)
    assert len(model.classes) == 3
    assert monitor.n_sampled == 50 and monitor.snapshot()["robust_accuracy"] is not None


# -- the counters, recounted by hand ------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::river_advsvm.attacks.NoGradientWarning")
@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 60), rate=st.one_of(st.integers(1, 4), st.sampled_from([0.3, 1.0])),
       window=st.integers(1, 12), seed=st.integers(0, 2**32), give_pred=st.booleans(),
       margins=st.booleans(), sampling_seed=st.sampled_from([0, 7]))
def test_the_counters_are_what_happened(n, rate, window, seed, give_pred, margins,
                                        sampling_seed):
    """Sampled, attacked, certified and the rolling accuracies, recounted by hand with a
    deterministic attack (FGSM) and the same draws, for a margin model (white box, certified)
    and a River model (black box, not certified)."""
    rng = random.Random(seed)
    model = AdvLinearSVM() if margins else linear_model.LogisticRegression()
    attack = FGSM(epsilon=0.1)
    monitor = RobustnessMonitor(model, attack=attack, sample_rate=rate, window_size=window,
                                seed=sampling_seed, detector=drift.NoDrift())
    draws = random.Random(sampling_seed)
    robust_size = max(monitor.min_sampled,
                      math.ceil(window * (1 / rate if isinstance(rate, int) else rate)))
    clean, sampled_clean, robust, certified = [], [], [], []
    for i in range(1, n + 1):
        x = {"a": rng.random(), "b": rng.random()}
        y = x["a"] + 0.3 * rng.random() > x["b"]
        y_pred = model.predict_one(x)
        right = y_pred == y
        drawn = i % rate == 0 if isinstance(rate, int) else draws.random() < rate
        classes = getattr(model, "classes", None)
        if drawn and (classes is None or (len(classes) == 2 and y in classes)):
            sampled_clean.append(right)
            robust.append(right and model.predict_one(attack.perturb_one(model, x, y)) == y)
            if margins:
                radius = model.certified_radius_one(x, y, norm="linf") if right else 0.0
                certified.append(radius > 0 and radius >= 0.1)
        clean.append(right)
        monitor.update(x, y, y_pred=y_pred if give_pred else None)
        model.learn_one(x, y)

    def mean(values):
        return sum(values) / len(values) if values else None

    assert monitor.n_seen == n and monitor.n_sampled == len(robust)
    got = monitor.snapshot()
    gap = mean(sampled_clean[-robust_size:])
    expected = {
        "step": n, "n_sampled": len(robust[-robust_size:]),
        "clean_accuracy": mean(clean[-window:]),
        "robust_accuracy": mean(robust[-robust_size:]),
        "certified_accuracy": mean(certified[-robust_size:]),
        "gap": None if gap is None else gap - mean(robust[-robust_size:]),
    }
    assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("threshold, hysteresis", [(0.05, None), (0.1, None), (0.3, 0.3),
                                                   (0.0, 0.0)])
def test_a_hysteresis_that_would_never_let_a_gap_alert_come_again_is_refused(threshold,
                                                                            hysteresis):
    """A gap alert re-arms once the gap falls below `gap_threshold - gap_hysteresis`, and a
    gap is never below 0 (a sample right under attack is right): `gap_threshold=0.05` with the
    default hysteresis 0.1 raised one gap alert in the monitor's life, however often the gap
    fell to 0 and rose again. Refused now, naming both."""
    kwargs = {} if hysteresis is None else {"gap_hysteresis": hysteresis}
    with pytest.raises(ValueError, match="gap_hysteresis.*gap_threshold"):
        RobustnessMonitor(AdvLinearSVM(), gap_threshold=threshold, **kwargs)
    RobustnessMonitor(AdvLinearSVM(), gap_threshold=None, **kwargs)  # no gap alerts: no matter
    RobustnessMonitor(AdvLinearSVM(), gap_threshold=threshold + 0.2, **kwargs)


def test_gap_alerts_come_again_after_the_gap_closed():
    """The other side: with a threshold above the hysteresis, a gap that closes and opens
    again raises a second alert."""
    model = _two_class_linear(rounds=200)
    near, far = ({"a": 0.55, "b": 0.45}, True), ({"a": 0.95, "b": 0.95}, True)
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.3), sample_rate=1, window_size=10,
                                gap_threshold=0.15, gap_hysteresis=0.1, min_sampled=10)
    kinds = []
    for sample in [near] * 10 + [far] * 10 + [near] * 10:
        kinds += [a.kind for a in monitor.update(*sample)]
    assert kinds == ["robust_gap", "robust_gap"]


@pytest.mark.parametrize("detector", [drift.ADWIN, drift.binary.DDM])
def test_a_detector_class_instead_of_a_detector_is_refused_in_words(detector):
    """`detector=drift.ADWIN` (no parentheses) passed the check and raised "Base.clone()
    missing 1 required positional argument: 'self'"."""
    with pytest.raises(TypeError, match=rf"detector .*{detector.__name__}\(\)"):
        RobustnessMonitor(AdvLinearSVM(), detector=detector)


def test_numpy_counts_are_the_counts_they_hold():
    """`window_size=np.int64(500)` was refused as "window_size must be a positive int, got
    np.int64(500)"; the rate and the thresholds were already taken as the numbers they hold."""
    given_ = RobustnessMonitor(AdvLinearSVM(), window_size=np.int64(500),
                               min_sampled=np.int32(20), max_alerts=np.uint8(7))
    plain = RobustnessMonitor(AdvLinearSVM(), window_size=500, min_sampled=20, max_alerts=7)
    assert given_.state() == plain.state()
    assert type(given_.window_size) is int and given_.min_sampled == 20
    assert json.dumps(given_.state())


def test_a_gap_alert_can_come_at_a_rate_whose_window_is_below_min_sampled():
    """At a rate of 0.02 a window of 1,000 samples held 20 sampled samples, fewer than the 30
    a gap alert needs: no gap alert could ever come. The window holds at least `min_sampled`."""
    model = _two_class_linear(rounds=200)
    near = ({"a": 0.55, "b": 0.45}, True)  # right, and fooled at epsilon 0.3
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.3), sample_rate=50,
                                window_size=1000, min_sampled=30)
    assert monitor.robust_window_size == 30
    steps = [monitor.n_seen for _ in range(50 * 30)
             if any(a.kind == "robust_gap" for a in monitor.update(*near))]
    assert steps == [50 * 30]


@pytest.mark.parametrize("seed", ["x", -1, 1.5, True, np.float64(2.0), np.array(3)])
def test_a_seed_is_checked_as_the_attacks_check_theirs(seed):
    """`seed="x"`, `-1` or `1.5` were taken (random.Random seeds with anything)."""
    with pytest.raises(ValueError, match="seed must be None or an int >= 0") as refused:
        RobustnessMonitor(AdvLinearSVM(), seed=seed)
    assert "np." not in str(refused.value) and "array(" not in str(refused.value)
    assert RobustnessMonitor(AdvLinearSVM(), seed=np.int64(3)).seed == 3
    assert RobustnessMonitor(AdvLinearSVM(), seed=None).seed is None


numpy_values = st.one_of(
    st.builds(np.array, st.floats(-2, 2)),
    st.builds(lambda v: np.array([v]), st.floats(-2, 2)),
    st.builds(np.float64, st.sampled_from([-0.5, 1.5, math.nan, math.inf])),
    st.builds(lambda kind, v: kind(v), st.sampled_from([np.int8, np.int64]), st.integers(-9, 0)),
    st.sampled_from([np.bool_(True), np.str_("0.5")]),
)


@pytest.mark.parametrize("name", ["sample_rate", "gap_threshold", "gap_hysteresis",
                                  "window_size", "min_sampled", "max_alerts"])
@settings(max_examples=25, deadline=None)
@given(value=numpy_values)
def test_a_refused_numpy_parameter_is_shown_without_its_numpy_repr(name, value):
    """`gap_threshold=np.array(0.5)` said "got array(0.5)", `sample_rate=np.array([.5])`
    "got array([0.5])"."""
    try:
        RobustnessMonitor(AdvLinearSVM(), **{name: value})
    except (TypeError, ValueError) as error:
        message = str(error)
        assert "np." not in message and "array(" not in message and "\n" not in message, message


def test_the_monitor_certifies_within_the_box_its_attack_keeps_to():
    """The threat the monitor measures is its attack's: within `bounds` when the attack has
    them. Its certificate is that of the same box (never smaller than the whole space's, and
    larger near the box's faces)."""
    rng = np.random.default_rng(3)
    model = AdvKernelSVM(gamma=3.0, budget=64, seed=0)
    box = (0.0, 1.0)
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.1, norm="linf", bounds=box),
                                sample_rate=1, detector=drift.NoDrift())
    larger = 0
    for _ in range(300):
        x = {"a": float(rng.random()) ** 4, "b": float(rng.random()) ** 4}
        y = x["a"] > x["b"]
        monitor.update(x, y)
        if monitor.last.radius:
            assert monitor.last.radius == model.certified_radius_one(x, y, norm="linf",
                                                                     bounds=box)
            larger += monitor.last.radius > model.certified_radius_one(x, y, norm="linf")
        model.learn_one(x, y)
    assert larger > 0


_MONITOR_VALUES = st.one_of(
    st.integers(-3, 50), st.floats(-1, 2), st.floats(),
    st.sampled_from([None, True, 0, 1, 2**63, 10**18, 1e-300, 5e-324, 0.999999, "1", [1],
                     np.int64(5), np.float32(0.5), math.nan, math.inf]))
_MONITOR_PARAMETERS = ["sample_rate", "window_size", "gap_threshold", "gap_hysteresis",
                       "min_sampled", "max_alerts", "seed"]


@settings(max_examples=100, deadline=None)
@given(params=st.dictionaries(st.sampled_from(_MONITOR_PARAMETERS), _MONITOR_VALUES, max_size=3),
       n=st.integers(1, 40))
def test_any_parameters_are_refused_up_front_or_watch_and_restore(params, n):
    """Refused with TypeError or ValueError as the monitor is made (window_size=2**63 raised
    River's OverflowError), or a monitor that watches a stream and restores from its JSON
    state to the same windows."""
    model = AdvLinearSVM()
    try:
        monitor = RobustnessMonitor(model, attack=FGSM(epsilon=0.1), detector=drift.NoDrift(),
                                    **params)
    except (TypeError, ValueError):
        return
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n):
            x = {"a": float(rng.random()), "b": float(rng.random())}
            monitor.update(x, x["a"] > x["b"])
            model.learn_one(x, x["a"] > x["b"])
    state = json.loads(json.dumps(monitor.state(), allow_nan=False))
    other = RobustnessMonitor(model, attack=FGSM(epsilon=0.1), detector=drift.NoDrift(),
                              **params)
    other.restore(state)
    assert other.snapshot() == monitor.snapshot()
