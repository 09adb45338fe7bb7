"""Test-then-train on message values, with no Kafka: validation, prediction, learning.

`Learner.process` takes one consumed value (bytes) and returns its `Outcome`: a prediction
(and the monitor's alerts) for a valid message, which is learned if it has a label, or a
dead-letter reason. The service feeds it consumed values; tests and replays can feed it bytes
directly.

"""

from __future__ import annotations

import dataclasses
import logging
import typing

from river_advsvm import inputs
from streams import kafka as kafka_io
from streams import state as state_io

__all__ = ["Learner", "Outcome"]

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Outcome:
    """What one message led to: a prediction (and alerts), or a dead-letter reason."""

    sample: kafka_io.Sample | None = None
    label: typing.Any = None
    probability: float | None = None
    alerts: list = dataclasses.field(default_factory=list)
    error: kafka_io.InvalidMessage | None = None


class Learner:
    """Test-then-train on message values, with no Kafka: validation, prediction, learning.

    The service feeds it consumed values; tests and replays can feed it bytes directly.
    `state` (a `streams.state.ServiceState`) is replaced when a checkpoint is reloaded.

    Parameters
    ----------
    state
        The model and its bookkeeping; counters are updated in place.
    max_message_bytes
        Larger values are refused (`too_large`).
    monitor
        Optional, e.g. a `river_advsvm.monitor.RobustnessMonitor`: before each `learn_one` its
        `model` is set to the current model and `monitor.update(x, y, y_pred=...)` returns a
        list of alerts (dataclasses).

    Examples
    --------

    >>> from river_advsvm import AdvLinearSVM
    >>> from streams.learner import Learner
    >>> from streams.state import ServiceState
    >>> learner = Learner(ServiceState(model=AdvLinearSVM()), max_message_bytes=1024)
    >>> learner.process(b'{"x": [1.0, 0.0], "y": "cat"}').label  # no class known yet
    >>> learner.process(b'{"x": [0.0, 1.0], "y": "dog"}').sample.labelled
    True
    >>> learner.process(b'{"x": [1.0, 0.0], "y": "cow"}').error.code
    'unknown_label'
    >>> learner.process(b'{"x": [1.0]}').error.code
    'wrong_width'
    >>> learner.state.counters["learned"], learner.state.counters["dead_letters"]
    (2, 2)

    """

    def __init__(self, state: state_io.ServiceState, max_message_bytes: int, monitor=None):
        self.state = state
        self.max_message_bytes = max_message_bytes
        self.monitor = monitor

    def _classes(self) -> tuple:
        if self.state.labels is not None:
            return tuple(self.state.labels)
        return tuple(self.state.model.classes)

    def process(self, value: bytes | None) -> Outcome:
        counters = self.state.counters
        counters["messages"] += 1
        try:
            sample = kafka_io.decode(value, self.max_message_bytes)
            kafka_io.check_against(sample, self._classes(), self.state.width)
            outcome = self._test_then_train(sample)
        except kafka_io.InvalidMessage as error:
            counters["dead_letters"] += 1
            by_code = counters["dead_letters_by_code"]
            by_code[error.code] = by_code.get(error.code, 0) + 1
            return Outcome(error=error)
        return outcome

    def _test_then_train(self, sample: kafka_io.Sample) -> Outcome:
        model, counters = self.state.model, self.state.counters
        try:
            proba = model.predict_proba_one(sample.x) if model.classes else {}
        except inputs.InvalidInput as error:
            raise kafka_io.InvalidMessage("model_refused", str(error)) from None
        # Ties go to the first (negative) class, as `predict_one` does for a zero margin.
        label = max(proba, key=proba.get) if proba else None
        outcome = Outcome(sample, label, proba.get(label) if proba else None)
        if not sample.labelled:
            counters["predicted"] += 1
            return outcome
        if self.monitor is not None:
            try:
                # Reloads and merges replace the model object: watch the one that learns.
                self.monitor.model = model
                outcome.alerts = list(self.monitor.update(sample.x, sample.y, y_pred=label) or [])
            except Exception:  # noqa: BLE001 - a monitor bug must not stop learning
                log.exception("the monitor failed on message %r", sample.id)
        try:
            model.learn_one(sample.x, sample.y)
        except inputs.InvalidInput as error:  # the model is unchanged when it refuses
            raise kafka_io.InvalidMessage("model_refused", str(error)) from None
        if sample.width is not None and self.state.width is None:
            self.state.width = sample.width
        counters["learned"] += 1
        counters["correct"] += int(label is not None and label == sample.y)
        return outcome
