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
the recent samples is above the error before them (see `_Worsening`).

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
import dataclasses
import itertools
import math
import random
import time
import typing
import warnings

from river import metrics, utils

from river_advsvm.attacks import PGD, Attack, NoGradientWarning

__all__ = ["ALERT_KINDS", "Alert", "Observation", "RobustnessMonitor"]

ALERT_KINDS = ("clean_drift", "robust_drift", "robust_gap")

#: Samples of an error stream compared with the samples before them when a detector fires: short
#: enough that a change a detector caught after a few dozen samples is not diluted away.
RECENT_SAMPLES = 64
#: Inputs of a detector kept (one byte each) to rebuild it after a restore.
MAX_HISTORY = 100_000


@dataclasses.dataclass(frozen=True)
class Alert:
    """What the monitor saw when it raised an alert.

    Accuracies are over the monitor's rolling windows at the time of the alert (`None` while a
    window is empty, or for a model that cannot be certified). The fields are plain numbers and
    strings, so `dataclasses.asdict(alert)` is ready for JSON.

    Attributes
    ----------
    kind
        'clean_drift', 'robust_drift' or 'robust_gap'.
    step
        Number of labelled samples the monitor had seen, this one included.
    clean_accuracy
        Accuracy over the last `window_size` samples.
    robust_accuracy
        Accuracy on the attacked versions of the sampled samples in the robust window.
    certified_accuracy
        Share of the sampled samples in the robust window certified at the attack's radius.
    gap
        Accuracy of the sampled samples clean minus attacked, over the robust window.
    n_sampled
        Sampled (attacked) samples in the robust window.
    detector
        What fired: the detector's class name, or `gap > threshold`.

    """

    kind: str
    step: int
    clean_accuracy: float | None
    robust_accuracy: float | None
    certified_accuracy: float | None
    gap: float | None
    n_sampled: int
    detector: str

    def __str__(self) -> str:
        def percent(value):
            return "n/a" if value is None else f"{value:.1%}"

        return (
            f"{self.kind} at step {self.step:,}: clean {percent(self.clean_accuracy)}, "
            f"robust {percent(self.robust_accuracy)}, certified "
            f"{percent(self.certified_accuracy)} ({self.n_sampled} attacked) [{self.detector}]"
        )


@dataclasses.dataclass(frozen=True)
class Observation:
    """What the monitor recorded for one labelled sample (`RobustnessMonitor.last`).

    `robust_correct`, `certified` and `radius` are `None` when the sample was not sampled for
    an attack; `certified` and `radius` also for models without `certified_radius_one`.
    """

    step: int
    correct: bool
    sampled: bool
    robust_correct: bool | None = None
    certified: bool | None = None
    radius: float | None = None


class _Worsening:
    """A River drift detector on a 0/1 error stream that reports increases of the error only.

    When the detector fires, the error rate of the last `RECENT_SAMPLES` samples is compared
    with the rate of the samples before them since the previous detection (or, if there are
    none, with the whole previous segment's rate). Memory: `RECENT_SAMPLES` bits.
    """

    def __init__(self, detector):
        self.detector = detector
        self._recent: collections.deque[int] = collections.deque(maxlen=RECENT_SAMPLES)
        self._segment_errors = 0
        self._segment_samples = 0
        self._previous_rate: float | None = None
        # The detector's inputs since it last started over, as b"0" and b"1" (for `restore`).
        self.history = bytearray()

    def update(self, error: int) -> bool:
        self._recent.append(error)
        self._segment_errors += error
        self._segment_samples += 1
        self.detector.update(error)
        self.history.append(49 if error else 48)
        if len(self.history) > 2 * MAX_HISTORY:
            del self.history[:-MAX_HISTORY]
        if not self.detector.drift_detected:
            return False
        self.history.clear()  # the detector starts over at its next update
        n_recent = min(len(self._recent), self._segment_samples)
        recent_errors = sum(itertools.islice(reversed(self._recent), n_recent))
        n_before = self._segment_samples - n_recent
        if n_before > 0:
            before = (self._segment_errors - recent_errors) / n_before
        else:
            before = self._previous_rate
        self._previous_rate = self._segment_errors / self._segment_samples
        self._segment_errors = self._segment_samples = 0
        return before is not None and recent_errors / n_recent > before


def _check_detector(detector) -> None:
    if not (hasattr(detector, "update") and hasattr(detector, "drift_detected")
            and hasattr(detector, "clone")):
        raise TypeError(
            f"detector must be a River drift detector (update, drift_detected, clone), "
            f"got {detector!r}"
        )


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
        10 steps, inputs in [0, 1]). Certificates are at its `epsilon`, in its norm.
    sample_rate
        Which samples are attacked: a float in (0, 1] is the probability of each (drawn with
        `seed`, so that an adversary cannot predict which), an int `N >= 1` means every N-th.
    detector
        A River drift detector; two clones watch the clean and the robust error streams.
        Default `river.drift.ADWIN()`.
    window_size
        Samples in the rolling clean accuracy. The robust and certified windows hold the
        sampled samples of about as many stream samples: `ceil(window_size * rate)`.
    gap_threshold
        A `robust_gap` alert is raised when clean minus robust accuracy over the robust window
        rises above this; `None` turns gap alerts off.
    gap_hysteresis
        After a gap alert, the next one needs the gap to fall below
        `gap_threshold - gap_hysteresis` first, so that a gap near the threshold does not flap.
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

    An attacker with three times the budget flips some points: first the gap crosses its
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
        if detector is None:
            # Imported here: `river.drift` loads `river.stream`, which loads scikit-learn and
            # pandas when they are installed (seconds of start-up for every importer).
            from river import drift

            detector = drift.ADWIN()
        attack = PGD() if attack is None else attack
        if not isinstance(attack, Attack):
            raise TypeError(f"attack must be a river_advsvm.attacks.Attack, got {attack!r}")
        if attack.epsilon is None:
            raise ValueError("the monitor's attack needs a finite epsilon: robust at what radius?")
        _check_detector(detector)
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, float)):
            raise TypeError(f"sample_rate must be a float in (0, 1] or an int >= 1, "
                            f"got {sample_rate!r}")
        if isinstance(sample_rate, int) and sample_rate < 1:
            raise ValueError(f"every N-th sample needs N >= 1, got {sample_rate}")
        if isinstance(sample_rate, float) and not 0.0 < sample_rate <= 1.0:
            raise ValueError(f"a sample rate must be in (0, 1], got {sample_rate}")
        if not (isinstance(window_size, int) and window_size >= 1):
            raise ValueError(f"window_size must be a positive int, got {window_size!r}")
        if gap_threshold is not None and not 0.0 <= gap_threshold < 1.0:
            raise ValueError(f"gap_threshold must be in [0, 1) or None, got {gap_threshold!r}")
        if not gap_hysteresis >= 0.0:
            raise ValueError(f"gap_hysteresis must be >= 0, got {gap_hysteresis!r}")
        if not (isinstance(min_sampled, int) and min_sampled >= 1):
            raise ValueError(f"min_sampled must be a positive int, got {min_sampled!r}")
        if not (isinstance(max_alerts, int) and max_alerts >= 1):
            raise ValueError(f"max_alerts must be a positive int, got {max_alerts!r}")

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
        self.robust_window_size = max(1, math.ceil(window_size * rate))
        self._rng = random.Random(seed)
        self._clean = utils.Rolling(metrics.Accuracy, window_size=window_size)
        # The sampled samples, clean and attacked: their difference is the gap, on the same points.
        self._sampled_clean = utils.Rolling(metrics.Accuracy, window_size=self.robust_window_size)
        self._robust = utils.Rolling(metrics.Accuracy, window_size=self.robust_window_size)
        self._certified = utils.Rolling(metrics.Accuracy, window_size=self.robust_window_size)
        self._clean_drift = _Worsening(detector.clone())
        self._robust_drift = _Worsening(detector.clone())
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
        """
        self.n_seen += 1
        if y_pred is None:
            y_pred = self.model.predict_one(x)
        correct = y_pred == y
        self._clean.update(y, y_pred)
        alerts = []
        if self._clean_drift.update(int(not correct)):
            alerts.append(self._alert("clean_drift", type(self.detector).__name__))
        # A model that reports a collapse to one class (`AdvKernelSVM.collapsed`): once as it
        # happens, again only after it recovered.
        collapsed = getattr(self.model, "collapsed", False) is True
        if collapsed and not self._collapse_raised:
            alerts.append(self._alert("collapsed", "one-sign decisions"))
        self._collapse_raised = collapsed

        observation = Observation(step=self.n_seen, correct=correct, sampled=False)
        if self._is_sampled() and self._can_attack(y):
            observation = self._attack_and_certify(x, y, correct)
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

    def _is_sampled(self) -> bool:
        if isinstance(self.sample_rate, int):
            return self.n_seen % self.sample_rate == 0
        return self._rng.random() < self.sample_rate

    def _can_attack(self, y) -> bool:
        # A margin model knows its classes: until it has two, and this label among them, there
        # is no margin of `y` to attack (and no certificate). Other models are asked as they are.
        classes = getattr(self.model, "classes", None)
        return classes is None or (len(classes) == 2 and y in classes)

    def _attack_and_certify(self, x: dict, y, correct: bool) -> Observation:
        self.n_sampled += 1
        can_certify = hasattr(self.model, "certified_radius_one")
        if not correct:
            # Already wrong: wrong under attack too, certified at no radius. No attack needed.
            return Observation(self.n_seen, False, True, False, False if can_certify else None,
                               0.0 if can_certify else None)
        start = time.perf_counter()
        with warnings.catch_warnings():
            # Per-sample warnings would flood a stream's log: counted in n_no_gradient instead.
            warnings.simplefilter("ignore", NoGradientWarning)
            x_adv = self.attack.perturb_one(self.model, x, y)
        self.n_no_gradient += self.attack.n_no_gradient
        robust_correct = self.model.predict_one(x_adv) == y
        radius = certified = None
        if can_certify:
            radius = float(self.model.certified_radius_one(x, y, norm=self.attack.norm))
            certified = radius > 0.0 and radius >= self.attack.epsilon
        self.attack_seconds += time.perf_counter() - start
        return Observation(self.n_seen, True, True, bool(robust_correct), certified, radius)

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
        return {"window_size": self.window_size, "robust_window_size": self.robust_window_size,
                "sample_rate": [type(rate).__name__, rate], "max_alerts": self.max_alerts,
                "detector": type(self.detector).__name__}

    def state(self) -> dict:
        """The monitor's state as plain JSON-able data (numbers, strings, lists); see
        `restore`. Labels must be JSON scalars (str, int, float, bool)."""
        version, internal, gauss = self._rng.getstate()
        return {
            "params": self._params(),
            "n_seen": self.n_seen,
            "n_sampled": self.n_sampled,
            "n_no_gradient": self.n_no_gradient,
            "attack_seconds": self.attack_seconds,
            "rng": [version, list(internal), gauss],
            "clean": [list(args) for args, _ in self._clean.window],
            "sampled_clean": [args[1] for args, _ in self._sampled_clean.window],
            "robust": [args[1] for args, _ in self._robust.window],
            "certified": [args[1] for args, _ in self._certified.window],
            "gap_raised": self._gap_raised,
            "collapse_raised": self._collapse_raised,
            "clean_drift": _worsening_state(self._clean_drift),
            "robust_drift": _worsening_state(self._robust_drift),
            "alerts": [_finite(dataclasses.asdict(alert)) for alert in self._alerts],
            "last": None if self.last is None else _finite(dataclasses.asdict(self.last)),
        }

    def restore(self, state: dict) -> None:
        """Continue from a `state()`: the same windows, counters, alerts and sampling.

        Raises `ValueError` (and changes nothing) if `state` is not one this monitor can take:
        malformed, or saved by a monitor with other windows, sample rate or detector.
        """
        try:
            restored = self._restored(state)
        except (KeyError, TypeError, ValueError, OverflowError, IndexError) as error:
            raise ValueError(f"not a state of this monitor: {error}") from None
        self.__dict__.update(restored)

    def _restored(self, state: dict) -> dict:
        if state["params"] != self._params():
            raise ValueError(f"saved with {state['params']}, this monitor has {self._params()}")
        version, internal, gauss = state["rng"]
        rng = random.Random()
        rng.setstate((_integer(version, 0, 10), tuple(_integer(v, 0, 2**32 - 1)
                                                        for v in internal), _number_or_none(gauss)))
        clean = _window(state["clean"], self.window_size)
        for pair in clean:
            if len(pair) != 2 or not all(_is_label(v) for v in pair):
                raise ValueError("a clean-window entry is not a (label, prediction) pair")
        flags = {name: [_boolean(v) for v in _window(state[name], self.robust_window_size)]
                 for name in ("sampled_clean", "robust", "certified")}
        rolling = {}
        for name, entries in [("_clean", clean), *((f"_{k}", [(True, v) for v in flags[k]])
                                                   for k in flags)]:
            size = self.window_size if name == "_clean" else self.robust_window_size
            window = utils.Rolling(metrics.Accuracy, window_size=size)
            for y, y_pred in entries:
                window.update(y, y_pred)
            rolling[name] = window
        alerts = collections.deque(
            (_alert_of(a) for a in _window(state["alerts"], self.max_alerts)),
            maxlen=self.max_alerts)
        last = state["last"]
        return {
            **rolling,
            "_rng": rng,
            "n_seen": _integer(state["n_seen"], 0, 2**63),
            "n_sampled": _integer(state["n_sampled"], 0, 2**63),
            "n_no_gradient": _integer(state["n_no_gradient"], 0, 2**63),
            "attack_seconds": float(_number_or_none(state["attack_seconds"]) or 0.0),
            "_gap_raised": _boolean(state["gap_raised"]),
            "_collapse_raised": _boolean(state.get("collapse_raised", False)),
            "_clean_drift": _worsening_of(state["clean_drift"], self.detector),
            "_robust_drift": _worsening_of(state["robust_drift"], self.detector),
            "_alerts": alerts,
            "last": None if last is None else Observation(
                step=_integer(last["step"], 0, 2**63), correct=_boolean(last["correct"]),
                sampled=_boolean(last["sampled"]),
                robust_correct=_boolean_or_none(last["robust_correct"]),
                certified=_boolean_or_none(last["certified"]),
                radius=_number_or_none(last["radius"])),
        }


# -- plain data ---------------------------------------------------------------------------------


def _finite(fields: dict) -> dict:
    """`fields` with non-finite numbers (an infinite certified radius, say) as None: JSON has
    no infinity."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in fields.items()}


def _worsening_state(watch: _Worsening) -> dict:
    return {"recent": list(watch._recent), "segment_errors": watch._segment_errors,
            "segment_samples": watch._segment_samples, "previous_rate": watch._previous_rate,
            "history": watch.history[-MAX_HISTORY:].decode("ascii")}


def _worsening_of(state: dict, detector) -> _Worsening:
    watch = _Worsening(detector.clone())
    history = state["history"]
    if not isinstance(history, str) or len(history) > MAX_HISTORY or history.strip("01"):
        raise ValueError("a detector's history is a text of at most MAX_HISTORY 0s and 1s")
    for error in history.encode("ascii"):  # the detector sees its inputs again
        watch.detector.update(error - 48)
    watch.history = bytearray(history.encode("ascii"))
    watch._recent.extend(_integer(v, 0, 1) for v in _window(state["recent"], RECENT_SAMPLES))
    watch._segment_samples = _integer(state["segment_samples"], 0, 2**63)
    watch._segment_errors = _integer(state["segment_errors"], 0, watch._segment_samples)
    rate = _number_or_none(state["previous_rate"])
    if rate is not None and not 0.0 <= rate <= 1.0:
        raise ValueError(f"previous_rate {rate} is not a rate")
    watch._previous_rate = rate
    return watch


def _alert_of(fields: dict) -> Alert:
    alert = Alert(**fields)
    if not (isinstance(alert.kind, str) and isinstance(alert.detector, str)):
        raise ValueError("an alert's kind and detector are text")
    _integer(alert.step, 0, 2**63)
    _integer(alert.n_sampled, 0, 2**63)
    for value in (alert.clean_accuracy, alert.robust_accuracy, alert.certified_accuracy,
                  alert.gap):
        _number_or_none(value)
    return alert


def _window(values, size: int) -> list:
    if not isinstance(values, list) or len(values) > size:
        raise ValueError(f"expected a list of at most {size} entries")
    return values


def _integer(value, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"expected an integer in [{low}, {high}], got {value!r:.40}")
    return value


def _boolean(value) -> bool:
    if type(value) is not bool:
        raise ValueError(f"expected true or false, got {value!r:.40}")
    return value


def _boolean_or_none(value):
    return None if value is None else _boolean(value)


def _number_or_none(value):
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r:.40}")
    return value


def _is_label(value) -> bool:
    return value is None or type(value) in (str, int, bool) or (
        type(value) is float and math.isfinite(value))
