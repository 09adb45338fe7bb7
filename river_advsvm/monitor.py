"""A drift monitor for robustness: clean and attacked accuracy of the live model, and alerts.

`RobustnessMonitor` watches a test-then-train loop. Before the model learns each labelled
sample, `update(x, y)` records whether the current model predicts it right; on a share of the
samples it also attacks `x` (PGD by default) and certifies it, and records whether the attacked
point is still predicted right. The clean and the robust error streams feed River drift
detectors, and the gap between the two is watched against a threshold. Three kinds of alerts:

| kind           | raised when                                                                |
|----------------|----------------------------------------------------------------------------|
| `clean_drift`  | the detector on the clean error stream fires and the error went up          |
| `robust_drift` | the detector on the robust error stream (attacked samples) fires, error up |
| `robust_gap`   | clean minus robust accuracy over the window rises above `gap_threshold`    |
| `collapsed`    | the model's decisions turned constant while both labels arrive (`collapsed`) |

A detector says that the error rate changed, not which way. A model that is still learning
changes for the better all the time, so a detection only becomes an alert when the error over
the recent samples is above the error before them (see `river_advsvm.alerts.Worsening`).

The monitor never trains the model and never changes it. Its memory is bounded on an endless
stream: the rolling windows and the alert list have fixed sizes, and River's detectors keep
fixed-size state (ADWIN's compressed window grows with the log of its length at most, and is
dropped at each detection).

`state()` gives the monitor's state as plain JSON-able data and `restore(state)` takes it back
(a service saves it in its checkpoint): the windows, the counters, the alerts and the sampling
generator come back exactly. A River detector's own state (ADWIN's compressed window) has no
plain form, but it is a function of what the detector saw since it last started over (River's
detectors start over after each detection): the monitor keeps those inputs, up to the last
`MAX_HISTORY`, and a restore replays them into a new detector. The detectors come back exactly
unless one went more than `MAX_HISTORY` samples without a detection (it then sees only the
last `MAX_HISTORY` again).

"""

from __future__ import annotations

import collections
import math
import random
import time
import typing
import warnings

from river import metrics, utils

from river_advsvm import inputs, monitor_state
from river_advsvm.alerts import (
    ALERT_KINDS, MAX_HISTORY, RECENT_SAMPLES, Alert, Observation, Worsening, check_detector,
    check_sample_rate,
)
from river_advsvm.attacks import PGD, Attack, NoGradientWarning
from river_advsvm.attacks.base import check_seed, has_margin_api
from river_advsvm.labels import as_label

__all__ = ["ALERT_KINDS", "MAX_HISTORY", "RECENT_SAMPLES", "Alert", "Observation",
           "RobustnessMonitor"]


#: The most samples a window, `min_sampled` or `max_alerts` may count: far past any use, and
#: below what River's rolling windows and Python's deques can be given.
MAX_COUNT = 10_000_000


def _check_size(name: str, value) -> int:
    count = inputs.check_count(name, value)
    if count > MAX_COUNT:
        raise ValueError(f"{name} must be at most {MAX_COUNT:,}, got {count:,}")
    return count


def _label_or_none(y_pred):
    """A prediction as a plain label, or None for one that is no label (a NaN, say): it is
    wrong whatever the label, and `state()` can hold None."""
    try:
        return None if y_pred is None else as_label(y_pred)
    except inputs.InvalidInput:
        return None


class RobustnessMonitor:
    """Clean, robust and certified accuracy of a live model, with drift and gap alerts.

    Call `update(x, y)` with each labelled sample before `model.learn_one(x, y)`. Every call
    costs one `predict_one` (none if the prediction is passed as `y_pred`) and a few
    dictionary updates; a sampled call also runs the attack (PGD-10: 11 margin and gradient
    evaluations) and one certificate.

    Parameters
    ----------
    model
        The classifier to watch. Models with this package's margin API are attacked white box
        and certified; any other River classifier is attacked through `predict_proba_one` (see
        `river_advsvm.attacks`), and its certified accuracy is `None`.
    attack
        A `river_advsvm.attacks.Attack` with a finite `epsilon`; default `PGD()` (L-inf 8/255,
        10 steps, inputs in [0, 1]: a sample with an input outside its box is refused; for
        other data give an attack the data's box, or `bounds=None`). Certificates are at its
        `epsilon`, in its norm.
    sample_rate
        Which samples are attacked: a float in (0, 1] is the probability of each (drawn with
        `seed`, so that an adversary cannot predict which), an int `N >= 1` means every N-th.
    detector
        A River drift detector; two clones watch the clean and the robust error streams.
        Default `river.drift.ADWIN()`.
    window_size
        Samples in the rolling clean accuracy (at most 10,000,000, as `min_sampled` and
        `max_alerts`). The robust and certified windows hold the sampled samples of about as
        many stream samples, `ceil(window_size * rate)`, and at least `min_sampled` (at a low
        rate they span more of the stream).
    gap_threshold
        A `robust_gap` alert is raised when clean minus robust accuracy over the robust window
        rises above this; `None` turns gap alerts off.
    gap_hysteresis
        After a gap alert, the next one needs the gap to fall below
        `gap_threshold - gap_hysteresis` first, so that a gap near the threshold does not flap;
        below `gap_threshold` (a gap is never negative).
    min_sampled
        Sampled samples the robust window needs before a gap alert is possible.
    on_alert
        Called with each `Alert` as it is raised.
    max_alerts
        Alerts kept in `alerts` (the oldest are dropped).
    seed
        Seed of the sampling.

    Attributes
    ----------
    alerts
        The latest alerts, oldest first (at most `max_alerts`).
    last
        The `Observation` of the latest `update`.
    n_seen, n_sampled
        Labelled samples seen, and sampled for an attack, so far.
    n_no_gradient
        Attacked samples that met no usable gradient and were not fooled (their robustness may
        be overestimated; see `river_advsvm.attacks.AttackResult`).
    attack_seconds
        Wall time spent attacking and certifying so far.

    Examples
    --------

    >>> from river_advsvm import AdvLinearSVM
    >>> from river_advsvm.attacks import PGD
    >>> from river_advsvm.monitor import RobustnessMonitor

    >>> model = AdvLinearSVM()
    >>> monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05), sample_rate=1,
    ...                             window_size=100)
    >>> stream = [({"a": 0.2, "b": 0.3}, False), ({"a": 0.8, "b": 0.6}, True)] * 300
    >>> for x, y in stream:
    ...     alerts = monitor.update(x, y)   # test...
    ...     model.learn_one(x, y)           # ...then train

    >>> monitor.snapshot()  # doctest: +NORMALIZE_WHITESPACE
    {'step': 600, 'n_sampled': 100, 'clean_accuracy': 1.0, 'robust_accuracy': 1.0,
     'certified_accuracy': 1.0, 'gap': 0.0}
    >>> monitor.alerts
    []

    An attacker with six times the budget flips some points: first the gap crosses its
    threshold, then the drift detector on the robust error fires.

    >>> monitor.attack = PGD(epsilon=0.3)
    >>> for x, y in stream[:100]:
    ...     for alert in monitor.update(x, y):
    ...         print(alert)
    robust_gap at step 621: clean 100.0%, robust 79.0%, certified 79.0% (100 attacked) [gap > 0.2]
    robust_drift at step 641: clean 100.0%, robust 59.0%, certified 59.0% (100 attacked) [ADWIN]

    """

    def __init__(
        self,
        model,
        attack: Attack | None = None,
        sample_rate: float | int = 0.1,
        detector=None,
        window_size: int = 1000,
        gap_threshold: float | None = 0.2,
        gap_hysteresis: float = 0.1,
        min_sampled: int = 30,
        on_alert: typing.Callable[[Alert], typing.Any] | None = None,
        max_alerts: int = 100,
        seed: int | None = 0,
    ):
        if isinstance(model, type):
            raise TypeError(f"model must be a River classifier (with predict_one), got the "
                            f"class {model.__name__}: make one, {model.__name__}()")
        if not callable(getattr(model, "predict_one", None)):
            raise TypeError(f"model must be a River classifier (with predict_one), got "
                            f"{inputs.describe(model)}")
        if detector is None:
            # Imported here: `river.drift` loads `river.stream`, which loads scikit-learn and
            # pandas when they are installed (seconds of start-up for every importer).
            from river import drift

            detector = drift.ADWIN()
        attack = PGD() if attack is None else attack
        if not isinstance(attack, Attack):
            raise TypeError(f"attack must be a river_advsvm.attacks.Attack, got "
                            f"{inputs.describe(attack)}")
        if attack.epsilon is None:
            raise ValueError("the monitor's attack needs a finite epsilon: robust at what radius?")
        check_detector(detector)
        # Numpy numbers (a rate computed from an array, say) as the Python numbers they equal.
        # Values are described in plain terms (`inputs.describe`), never by numpy's reprs.
        sample_rate = check_sample_rate(sample_rate)
        gap_threshold, gap_hysteresis = map(inputs.plain_number, (gap_threshold, gap_hysteresis))
        window_size = _check_size("window_size", window_size)
        if gap_threshold is not None and not (inputs.is_number(gap_threshold)
                                              and 0.0 <= gap_threshold < 1.0):
            raise ValueError(f"gap_threshold must be in [0, 1) or None, got "
                             f"{inputs.describe(gap_threshold)}")
        if not (inputs.is_number(gap_hysteresis) and gap_hysteresis >= 0.0):
            raise ValueError(f"gap_hysteresis must be a number >= 0, got "
                             f"{inputs.describe(gap_hysteresis)}")
        if gap_threshold is not None and gap_hysteresis >= gap_threshold:
            # A gap is never below 0 (a sample right under attack is right without it).
            raise ValueError(
                f"gap_hysteresis ({gap_hysteresis:g}) must be below gap_threshold "
                f"({gap_threshold:g}): a gap alert comes again only once the gap has fallen "
                f"below gap_threshold - gap_hysteresis, and a gap is never below 0")
        min_sampled = _check_size("min_sampled", min_sampled)
        max_alerts = _check_size("max_alerts", max_alerts)
        if on_alert is not None and not callable(on_alert):
            # (else the first alert raised it from `update`, the sample counted by then)
            raise TypeError(f"on_alert must be a function of an Alert, or None, got "
                            f"{inputs.describe(on_alert)}")
        seed = check_seed(seed)  # (as the attacks check theirs: random.Random takes any)

        self.model = model
        self.attack = attack
        self.sample_rate = sample_rate
        self.detector = detector
        self.window_size = window_size
        self.gap_threshold = gap_threshold
        self.gap_hysteresis = gap_hysteresis
        self.min_sampled = min_sampled
        self.on_alert = on_alert
        self.max_alerts = max_alerts
        self.seed = seed

        rate = 1.0 / sample_rate if isinstance(sample_rate, int) else sample_rate
        # At least `min_sampled`: below, the window could never hold enough samples for a
        # gap alert (a rate of 0.02 over 1,000 samples samples 20, against 30).
        self.robust_window_size = max(min_sampled, math.ceil(window_size * rate))
        self._rng = random.Random(seed)
        # Fed whether each prediction was right, as the other windows are: fed the labels,
        # River's confusion matrix kept a row for every label it ever saw. The labels the
        # window's samples had are kept beside it, for `state()`.
        self._clean = utils.Rolling(metrics.Accuracy, window_size=window_size)
        self._clean_pairs: collections.deque = collections.deque(maxlen=window_size)
        # The sampled samples, clean and attacked: their difference is the gap, on the same points.
        self._sampled_clean = utils.Rolling(metrics.Accuracy, window_size=self.robust_window_size)
        self._robust = utils.Rolling(metrics.Accuracy, window_size=self.robust_window_size)
        self._certified = utils.Rolling(metrics.Accuracy, window_size=self.robust_window_size)
        self._clean_drift = Worsening(detector.clone())
        self._robust_drift = Worsening(detector.clone())
        self._gap_raised = False
        self._collapse_raised = False
        self._alerts: collections.deque[Alert] = collections.deque(maxlen=max_alerts)
        self.last: Observation | None = None
        self.n_seen = 0
        self.n_sampled = 0
        self.n_no_gradient = 0
        self.attack_seconds = 0.0

    def __repr__(self) -> str:
        return (f"RobustnessMonitor(attack={type(self.attack).__name__}({self.attack.norm}, "
                f"epsilon={self.attack.epsilon:g}), sample_rate={self.sample_rate!r}, "
                f"detector={type(self.detector).__name__}, n_seen={self.n_seen})")

    @property
    def alerts(self) -> list[Alert]:
        return list(self._alerts)

    # -- the per-sample step --------------------------------------------------------------------

    def update(self, x: dict, y, y_pred=None) -> list[Alert]:
        """Record how the current model does on `(x, y)`; return the alerts this raised.

        Call it before `model.learn_one(x, y)`. `y_pred` is the model's prediction for `x` if
        the caller already has it (a test-then-train loop does), which saves a `predict_one`.
        `y` is a bool, an int, a finite float or a str (`InvalidInput` otherwise), as the
        models of this package take it and as `state()` saves it.
        """
        x, y = self._checked(x, y)
        if y_pred is None:
            y_pred = self.model.predict_one(x)
        y_pred = _label_or_none(y_pred)
        correct = bool(y_pred == y)
        step = self.n_seen + 1
        observation = Observation(step=step, correct=correct, sampled=False)
        if self._is_sampled(step) and self._can_attack(y):
            # Before anything is counted: should the model refuse the sample there (a feature
            # name it cannot hash, say), only this sample's draw is used up.
            observation, no_gradient, seconds = self._attack_and_certify(x, y, correct, step)
            self.n_sampled += 1
            self.n_no_gradient += no_gradient
            self.attack_seconds += seconds

        self.n_seen = step
        self._clean.update(True, correct)
        self._clean_pairs.append((y, y_pred))
        alerts = []
        if self._clean_drift.update(int(not correct)):
            alerts.append(self._alert("clean_drift", type(self.detector).__name__))
        # A model that reports a collapse to one class (`AdvKernelSVM.collapsed`): once as it
        # happens, again only after it recovered.
        collapsed = getattr(self.model, "collapsed", False) is True
        if collapsed and not self._collapse_raised:
            alerts.append(self._alert("collapsed", "one-sign decisions"))
        self._collapse_raised = collapsed

        if observation.sampled:
            self._sampled_clean.update(True, correct)
            self._robust.update(True, observation.robust_correct)
            if observation.certified is not None:
                self._certified.update(True, observation.certified)
            if self._robust_drift.update(int(not observation.robust_correct)):
                alerts.append(self._alert("robust_drift", type(self.detector).__name__))
            if self._gap_crossed():
                alerts.append(self._alert("robust_gap", f"gap > {self.gap_threshold:g}"))
        self.last = observation

        for alert in alerts:
            self._alerts.append(alert)
            if self.on_alert is not None:
                self.on_alert(alert)
        return alerts

    def check(self, x: dict, y) -> None:
        """`InvalidInput` if `update(x, y)` would refuse the sample (a value that is no number,
        NaN for a model of this package, an input outside the attack's box, a label the models
        do not take); nothing changes.
        Lets a caller that learns samples before it hands them to `update` refuse them first."""
        self._checked(x, y)

    def _checked(self, x: dict, y) -> tuple[dict, typing.Any]:
        """The sample as `update` counts it, or `InvalidInput`."""
        # A model of this package refuses NaN when it learns (it is a missing input when it
        # predicts): so does `update`, which comes just before. For any other model NaN is a
        # missing input, dropped (the attacks refuse it). What the attack would refuse (a
        # value that is no number, an input outside its box) is refused here, for every
        # sample and before anything is counted, not only when drawn.
        check_label = getattr(self.model, "_check_label", None)
        names, values = inputs.dict_values(x, missing_ok=check_label is None)
        if len(names) != len(x):
            x = {name: x[name] for name in names}
        inputs.check_inside(values, self.attack.bounds)
        # A label as the models take it, a plain JSON scalar (River's iter_array gives numpy
        # ones; a missing one read from pandas is NaN): the windows go into `state()`.
        if y is None:
            raise inputs.InvalidInput("label None (no label): the monitor judges labelled "
                                      "samples only; pass it the ones whose label came",
                                      "bad_label")
        y = as_label(y)
        # A label the model would refuse to learn next (a third one for a binary model) is not
        # counted either.
        if check_label is not None:
            check_label(y)
        return x, y

    def _is_sampled(self, step: int) -> bool:
        if isinstance(self.sample_rate, int):
            return step % self.sample_rate == 0
        return self._rng.random() < self.sample_rate

    def _can_attack(self, y) -> bool:
        # A margin model of this package knows its classes: until it has two, and this label
        # among them, there is no margin of `y` to attack (and no certificate). Other models
        # (River's trees keep a set of classes too, of any number) are asked as they are.
        classes = getattr(self.model, "classes", None)
        if classes is None or not has_margin_api(self.model):
            return True
        return len(classes) == 2 and y in classes

    def _attack_and_certify(self, x: dict, y, correct: bool,
                            step: int) -> tuple[Observation, int, float]:
        """The observation of a sampled sample, the samples that met no usable gradient (0 or
        1) and the seconds spent; the monitor itself is left as it is."""
        can_certify = hasattr(self.model, "certified_radius_one")
        if not correct:
            # Already wrong: wrong under attack too, certified at no radius. No attack needed.
            return Observation(step, False, True, False, False if can_certify else None,
                               0.0 if can_certify else None), 0, 0.0
        start = time.perf_counter()
        with warnings.catch_warnings():
            # Per-sample warnings would flood a stream's log: counted in n_no_gradient instead.
            warnings.simplefilter("ignore", NoGradientWarning)
            x_adv = self.attack.perturb_one(self.model, x, y)
        no_gradient = self.attack.n_no_gradient
        robust_correct = self.model.predict_one(x_adv) == y
        radius = certified = None
        if can_certify:
            # Within the box the attack keeps to, as the threat it measures is.
            radius = float(self.model.certified_radius_one(x, y, norm=self.attack.norm,
                                                           bounds=self.attack.bounds))
            certified = radius > 0.0 and radius >= self.attack.epsilon
        observation = Observation(step, True, True, bool(robust_correct), certified, radius)
        return observation, no_gradient, time.perf_counter() - start

    def _gap_crossed(self) -> bool:
        """Whether the gap rose above the threshold now (with hysteresis; see the class doc)."""
        if self.gap_threshold is None:
            return False
        gap = self._sampled_clean.get() - self._robust.get()
        if self._gap_raised:
            if gap < self.gap_threshold - self.gap_hysteresis:
                self._gap_raised = False
            return False
        # Accuracies are ratios of counts: a tolerance keeps a gap of exactly the threshold
        # (0.93 - 0.73 = 0.20000000000000007) from counting as above it.
        if len(self._robust.window) >= self.min_sampled and gap > self.gap_threshold + 1e-9:
            self._gap_raised = True
            return True
        return False

    # -- reading it -----------------------------------------------------------------------------

    def snapshot(self) -> dict:
        """The rolling accuracies now (`None` for an empty window or no certificate)."""
        sampled = len(self._robust.window)
        return {
            "step": self.n_seen,
            "n_sampled": sampled,
            "clean_accuracy": self._clean.get() if self.n_seen else None,
            "robust_accuracy": self._robust.get() if sampled else None,
            "certified_accuracy": self._certified.get() if self._certified.window else None,
            "gap": self._sampled_clean.get() - self._robust.get() if sampled else None,
        }

    def _alert(self, kind: str, detector: str) -> Alert:
        now = self.snapshot()
        return Alert(
            kind=kind,
            step=self.n_seen,
            clean_accuracy=now["clean_accuracy"],
            robust_accuracy=now["robust_accuracy"],
            certified_accuracy=now["certified_accuracy"],
            gap=now["gap"],
            n_sampled=now["n_sampled"],
            detector=detector,
        )

    # -- saving it ------------------------------------------------------------------------------

    def upcoming(self, count: int) -> list[bool]:
        """Whether each of the next `count` calls of `update` samples its sample for an attack
        (the draws are not used up: `update` makes the same ones)."""
        if isinstance(self.sample_rate, int):
            return [(self.n_seen + k) % self.sample_rate == 0 for k in range(1, count + 1)]
        rng = random.Random()
        rng.setstate(self._rng.getstate())
        return [rng.random() < self.sample_rate for _ in range(count)]

    def _params(self) -> dict:
        rate = self.sample_rate
        # The attack too: robust flags measured by another attack must not fill these windows.
        # Numpy numbers (bounds taken from an array) as the plain ones they hold: JSON.
        def plain(value):
            if isinstance(value, (tuple, list)):
                return [plain(v) for v in value]
            return inputs.plain_number(value)

        attack = {k: plain(v) for k, v in self.attack._get_params().items()}
        return {"window_size": self.window_size, "robust_window_size": self.robust_window_size,
                "sample_rate": [type(rate).__name__, rate], "max_alerts": self.max_alerts,
                "detector": type(self.detector).__name__,
                "attack": [type(self.attack).__name__, attack]}

    def state(self) -> dict:
        """The monitor's state as plain JSON-able data (numbers, strings, lists); see
        `restore`. Labels must be JSON scalars (str, int, float, bool)."""
        return monitor_state.state_of(self)

    def restore(self, state: dict) -> None:
        """Continue from a `state()`: the same windows, counters, alerts and sampling.

        Raises `ValueError` (and changes nothing) if `state` is not one this monitor can take:
        malformed, or saved by a monitor with other windows, sample rate, detector or attack.
        """
        try:
            restored = monitor_state.restored(self, state)
        except (KeyError, TypeError, ValueError, OverflowError, IndexError) as error:
            raise ValueError(f"not a state of this monitor: {error}") from None
        self.__dict__.update(restored)
