"""What the robustness monitor records and raises: `Alert`, `Observation`, and `Worsening`, a
River drift detector on an error stream that reports increases of the error only; and the
checks of its settings that a service makes without loading the monitor (which imports River's
metrics, and with them SciPy's statistics)."""

from __future__ import annotations

import collections
import dataclasses
import itertools

from river_advsvm import inputs

__all__ = ["ALERT_KINDS", "Alert", "Observation", "Worsening", "check_sample_rate"]

ALERT_KINDS = ("clean_drift", "robust_drift", "robust_gap", "collapsed")

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
        'clean_drift', 'robust_drift', 'robust_gap' or 'collapsed'.
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


class Worsening:
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


def check_detector(detector) -> None:
    if isinstance(detector, type):  # `drift.ADWIN`: a class has the methods, unbound
        raise TypeError(f"detector must be a River drift detector, got the class "
                        f"{detector.__name__}: pass one, {detector.__name__}()")
    if not (hasattr(detector, "update") and hasattr(detector, "drift_detected")
            and hasattr(detector, "clone")):
        raise TypeError(
            f"detector must be a River drift detector (update, drift_detected, clone), "
            f"got {detector!r}"
        )


def check_sample_rate(sample_rate) -> float | int:
    """`sample_rate` as the monitor takes it (a float in (0, 1], or every N-th sample for an
    int N >= 1), a numpy number as the Python number it equals; TypeError or ValueError."""
    sample_rate = inputs.plain_number(sample_rate)
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, float)):
        raise TypeError(f"sample_rate must be a float in (0, 1] or an int >= 1, "
                        f"got {inputs.describe(sample_rate)}")
    if isinstance(sample_rate, int) and sample_rate < 1:
        raise ValueError(f"every N-th sample needs N >= 1, got {sample_rate}")
    if isinstance(sample_rate, float) and not 0.0 < sample_rate <= 1.0:
        raise ValueError(f"a sample rate must be in (0, 1], got {sample_rate}")
    return sample_rate
