"""Test-then-train on message values, with no Kafka: validation, prediction, learning.

`Learner.process_many` takes the values of one poll (bytes) and returns one `Outcome` each: a
prediction (and the monitor's alerts) for a valid message, which is learned if it has a label,
or a dead-letter reason. It gives exactly what a loop of `predict_proba_one` + `learn_one` over
the messages in order would, with one batched model call per run of messages:

- every message is decoded and checked on its own: a bad one is a dead letter and the others
  of its batch still learn, in order. Any exception while processing one message makes it a
  dead letter (`internal_error` when it is not a refusal; the traceback goes to the log once
  per place it was raised, never to an output topic).
- the valid messages go to the model in runs (`model.predict_proba_then_learn_many`). A run
  ends after a message that changes what the next ones are checked against (the first two
  classes, the width of arrays), and a new run starts at each labelled message the monitor
  will attack, so that the attack sees the model just before that message is learned.
- if the model refuses a run, it is unchanged: the run is then replayed one message at a time
  to find the refused ones.
- a `MemoryError` is a fault of the machine, not of a message: it is raised, not dead-lettered
  (the service stops with exit status 5, its last checkpoint intact, and learns the messages
  again after the restart).

Which batch a message arrives in never changes a result: a replay after a crash (other poll
boundaries) gives the model bit for bit.

"""

from __future__ import annotations

import dataclasses
import logging
import time
import traceback
import typing

from river_advsvm import inputs
from river_advsvm.streams import kafka as kafka_io
from river_advsvm.streams import model_calls
from river_advsvm.streams import state as state_io

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


def _refusal(error: Exception) -> kafka_io.InvalidMessage:
    """The dead-letter reason of a model refusal (`InvalidInput`), with the model's code."""
    return kafka_io.InvalidMessage(getattr(error, "code", None) or "invalid_input", str(error))


class Learner:
    """Test-then-train on message values; see the module docs.

    Parameters
    ----------
    state
        The model and its bookkeeping (a `river_advsvm.streams.state.ServiceState`); counters are
        updated in place, and the service replaces `state` when a checkpoint is reloaded.
    max_message_bytes
        Larger values are refused (`message_too_large`).
    monitor
        Optional, e.g. a `river_advsvm.monitor.RobustnessMonitor`: before a labelled message is
        learned, its `model` is set to the current model and `monitor.update(x, y, y_pred=...)`
        returns a list of alerts (dataclasses). With `upcoming(n)` (which of its next `n`
        updates it will attack) the runs are cut there; without it, at every labelled message.
    monitor_attack
        Optional: the monitor's attack for the model served (a function of the model), set
        whenever the state's model comes from elsewhere (a checkpoint's model wins over the
        options, so the radius it was trained at does too).

    Examples
    --------

    >>> from river_advsvm import AdvLinearSVM
    >>> from river_advsvm.streams.learner import Learner
    >>> from river_advsvm.streams.state import ServiceState
    >>> learner = Learner(ServiceState(model=AdvLinearSVM()), max_message_bytes=1024)
    >>> learner.process(b'{"x": [1.0, 0.0], "y": "cat"}').label  # no class known yet
    >>> outcomes = learner.process_many([b'{"x": [0.0, 1.0], "y": "dog"}',
    ...                                  b'{"x": [1.0, 0.0], "y": "cow"}', b'{"x": [1.0]}'])
    >>> [o.error.code if o.error else o.sample.y for o in outcomes]
    ['dog', 'unknown_label', 'wrong_width']
    >>> learner.state.counters["learned"], learner.state.counters["dead_letters"]
    (2, 2)

    """

    def __init__(self, state: state_io.ServiceState, max_message_bytes: int, monitor=None,
                 monitor_attack=None):
        self.max_message_bytes = max_message_bytes
        self.monitor = monitor
        self._monitor_attack = monitor_attack
        saves = monitor is not None and hasattr(monitor, "state") and hasattr(monitor, "restore")
        self._fresh_monitor = monitor.state() if saves else None
        self._tracebacks_logged: set = set()
        self.seconds = {"decode": 0.0, "model": 0.0}  # where `process_many` spent its time
        self._monitor_refused: str | None = None  # (why a saved monitor was not taken, last)
        self.state = state

    @property
    def state(self) -> state_io.ServiceState:
        return self._state

    @state.setter
    def state(self, state: state_io.ServiceState) -> None:
        """Take a state (a checkpoint reloaded, say): the monitor continues from the one saved
        with it, or starts over if there is none."""
        self._state = state
        if self._fresh_monitor is None:
            return
        if self._monitor_attack is not None:
            self._attack_at(self._monitor_attack(state.model))
        try:
            self.monitor.restore(state.monitor if state.monitor is not None
                                 else self._fresh_monitor)
        except ValueError as error:
            if str(error) != self._monitor_refused:  # (a checkpoint reloaded holds it again)
                log.warning("the monitor starts over: its saved state does not fit (%s)", error)
            self._monitor_refused = str(error)
            self.monitor.restore(self._fresh_monitor)
            state.monitor = None  # (said once: the same state may be taken again)

    def _attack_at(self, attack) -> None:
        """Make a fresh monitor attack with `attack` from now on."""
        if attack._get_params() == self.monitor.attack._get_params():
            return
        self.monitor.restore(self._fresh_monitor)
        self.monitor.attack = attack
        self._fresh_monitor = self.monitor.state()

    def save_monitor(self) -> None:
        """Put the monitor's state into `state`, for the next checkpoint."""
        if self._fresh_monitor is not None:
            self._state.monitor = self.monitor.state()

    def process(self, value: bytes | None) -> Outcome:
        """The outcome of one message value."""
        return self.process_many([value])[0]

    def process_many(self, values: list) -> list[Outcome]:
        """The outcome of each message value, learning the valid labelled ones in order."""
        self.state.counters["consumed"] += len(values)
        started = time.perf_counter()
        outcomes = [self._decode(value) for value in values]
        decoded = time.perf_counter()
        self.seconds["decode"] += decoded - started
        pending = [i for i, outcome in enumerate(outcomes) if outcome.error is None]
        start, plan = 0, None
        while start < len(pending):
            if plan is None and self.monitor is not None:
                plan = _MonitorPlan(self.monitor, len(pending) - start)
            run, start = self._next_run(outcomes, pending, start, plan)
            if run and not self._learn_run(outcomes, run, plan):
                plan = None  # the monitor's updates no longer follow the plan: ask it again
        for outcome in outcomes:
            if outcome.error is not None:
                self._count_dead_letter(outcome.error)
        self.seconds["model"] += time.perf_counter() - decoded
        return outcomes

    # -- steps ----------------------------------------------------------------------------------

    def _decode(self, value) -> Outcome:
        try:
            return Outcome(kafka_io.decode(value, self.max_message_bytes))
        except kafka_io.InvalidMessage as error:
            return Outcome(error=error)
        except Exception as error:  # noqa: BLE001 - a message must never stop the service
            return Outcome(error=self._internal_error(error))

    def _classes(self) -> tuple:
        if self.state.labels is not None:
            return tuple(self.state.labels)
        return tuple(self.state.model.classes)

    def _next_run(self, outcomes, pending, start, plan) -> tuple[list, int]:
        """The next run of messages to learn in one call (their indices), and where the one
        after it starts. Messages refused by `check_against` get their dead letter here."""
        model_classes = list(self.state.model.classes)
        classes = self._classes()
        width = self.state.width
        run: list = []
        watched = 0  # labelled messages in the run: the monitor's updates
        position = start
        while position < len(pending):
            index = pending[position]
            sample = outcomes[index].sample
            try:
                kafka_io.check_against(sample, classes, width)
            except kafka_io.InvalidMessage as error:
                outcomes[index] = Outcome(error=error)
                position += 1
                continue
            except Exception as error:  # noqa: BLE001
                outcomes[index] = Outcome(error=self._internal_error(error))
                position += 1
                continue
            if sample.labelled and self.monitor is not None and run:
                # The monitor needs the model as it is just before this message: a new run.
                if len(model_classes) < 2 or plan.attacks(watched):
                    break
            run.append(index)
            position += 1
            if sample.labelled:
                watched += 1
                changes = False
                if len(model_classes) < 2 and sample.y not in model_classes:
                    changes = True
                if sample.width is not None and width is None:
                    changes = True
                if changes:  # the next messages are checked against other classes or width
                    break
        return run, position

    def _learn_run(self, outcomes, run: list, plan) -> bool:
        """Predict and learn one run; False if it had to be replayed message by message."""
        samples = [outcomes[i].sample for i in run]
        first = samples[0]
        watched = self.monitor is not None and first.labelled
        if watched:
            # The first message of a run may be one the monitor attacks: it sees the model as
            # it is now, after checking that the model accepts the message.
            try:
                (proba,) = self._test_then_train([first], [None])
            except Exception as error:  # noqa: BLE001 - a refusal, or worse
                outcomes[run[0]] = Outcome(error=_refusal(error) if isinstance(
                    error, inputs.InvalidInput) else self._internal_error(error))
                self._one_by_one(outcomes, run[1:], first_watched=False)
                return False
            outcomes[run[0]].alerts = self._watch(first, _label_of(proba))
        try:
            probas = self._test_then_train(samples, [s.y for s in samples])
        except inputs.InvalidInput:
            self._one_by_one(outcomes, run, first_watched=watched)
            return False
        except Exception as error:  # noqa: BLE001
            self._internal_error(error)  # logged; each message is then tried on its own
            self._one_by_one(outcomes, run, first_watched=watched)
            return False
        for position, (index, proba) in enumerate(zip(run, probas)):
            outcome = outcomes[index]
            self._predicted(outcome, proba)
            if position and outcome.sample.labelled and self.monitor is not None:
                outcome.alerts = self._watch(outcome.sample, outcome.label)
        if plan is not None:
            plan.advance(sum(s.labelled for s in samples))
        return True

    def _one_by_one(self, outcomes, run: list, first_watched: bool) -> None:
        """Replay a refused run message by message, as a loop of predict + learn would."""
        for position, index in enumerate(run):
            sample = outcomes[index].sample
            try:
                kafka_io.check_against(sample, self._classes(), self.state.width)
                if sample.labelled and self.monitor is not None and not (
                        position == 0 and first_watched):
                    (proba,) = self._test_then_train([sample], [None])
                    outcomes[index].alerts = self._watch(sample, _label_of(proba))
                (proba,) = self._test_then_train([sample], [sample.y])
            except kafka_io.InvalidMessage as error:
                outcomes[index] = Outcome(error=error)
                continue
            except inputs.InvalidInput as error:
                outcomes[index] = Outcome(error=_refusal(error))
                continue
            except Exception as error:  # noqa: BLE001
                outcomes[index] = Outcome(error=self._internal_error(error))
                continue
            self._predicted(outcomes[index], proba)

    def _test_then_train(self, samples: list, labels: list) -> list[dict]:
        return model_calls.test_then_train(self.state, samples, labels)

    def _predicted(self, outcome: Outcome, proba: dict) -> None:
        """Record the prediction of an accepted message (and its learning, if labelled)."""
        sample, counters = outcome.sample, self.state.counters
        outcome.label = _label_of(proba)
        outcome.probability = proba[outcome.label] if proba else None
        counters["predicted"] += 1
        if not sample.labelled:
            counters["unlabelled"] += 1
            return
        counters["learned"] += 1
        counters["learned_correct"] += int(outcome.label is not None and outcome.label == sample.y)
        if sample.width is not None and self.state.width is None:
            self.state.width = sample.width

    def _watch(self, sample, y_pred) -> list:
        """The monitor's alerts for a labelled message, the model as it is before learning it."""
        try:
            # Reloads and merges replace the model object: watch the one that learns.
            self.monitor.model = self.state.model
            return list(self.monitor.update(sample.x, sample.y, y_pred=y_pred) or [])
        except inputs.InvalidInput as error:
            # A sample the model takes but the monitor's attack does not (outside the box of
            # --monitor-bounds): counted, and logged at the 1st, 2nd, 4th, 8th... such message,
            # not at every one.
            counters = self.state.counters
            counters["monitor_skipped"] += 1
            skipped = counters["monitor_skipped"]
            if skipped & (skipped - 1) == 0:
                log.warning("the monitor skipped %d labelled message(s) it cannot attack, the "
                            "latest %r: %s", skipped, sample.id, _one_line(error))
            return []
        except Exception as error:  # noqa: BLE001 - a monitor bug must not stop learning
            self._log_once(error, f"the monitor failed on message {sample.id!r}")
            return []

    def _count_dead_letter(self, error: kafka_io.InvalidMessage) -> None:
        counters = self.state.counters
        counters["dead_letters"] += 1
        by_code = counters["dead_letters_by_code"]
        by_code[error.code] = by_code.get(error.code, 0) + 1

    def _internal_error(self, error: Exception) -> kafka_io.InvalidMessage:
        """An unexpected error on one message: logged (the traceback once per place it was
        raised), and the message's dead-letter reason. A `MemoryError` is raised again."""
        self._log_once(error, "unexpected error on a message (a dead letter, code "
                              "internal_error)")
        return kafka_io.InvalidMessage("internal_error", _one_line(error))

    def _log_once(self, error: Exception, what: str) -> None:
        """The traceback the first time an error comes from a place, one line after that; a
        `MemoryError` is raised again (out of memory, the model may be half-updated: the
        service must stop and restart from its last checkpoint, not carry on)."""
        if isinstance(error, MemoryError):
            raise error
        frames = traceback.extract_tb(error.__traceback__)
        where = (what.split(" on ")[0], type(error).__name__,
                 *((frames[-1].filename, frames[-1].lineno) if frames else ()))
        if where not in self._tracebacks_logged and len(self._tracebacks_logged) < 100:
            self._tracebacks_logged.add(where)
            log.error("%s", what, exc_info=error)
        else:
            log.warning("%s: %s", what, _one_line(error))


def _label_of(proba: dict):
    # Ties go to the first (negative) class, as `predict_one` does for a zero margin.
    return max(proba, key=proba.get) if proba else None


def _one_line(error: Exception) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}"


class _MonitorPlan:
    """Which of the monitor's next updates attack the model (so must see it as it is)."""

    def __init__(self, monitor, count: int):
        self._flags = None  # unknown: every labelled message may be attacked
        self._used = 0
        upcoming = getattr(monitor, "upcoming", None)
        if upcoming is not None:
            try:
                self._flags = list(upcoming(count))
            except MemoryError:
                raise
            except Exception:  # noqa: BLE001 - a monitor bug must not stop learning
                log.warning("the monitor could not say which messages it attacks", exc_info=True)

    def attacks(self, offset: int) -> bool:
        """Whether the monitor's update `offset` places after the planned ones attacks."""
        if self._flags is None:
            return True
        k = self._used + offset
        return k >= len(self._flags) or self._flags[k]

    def advance(self, count: int) -> None:
        self._used += count
