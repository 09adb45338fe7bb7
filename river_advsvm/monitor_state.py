"""The robustness monitor's state as plain JSON-able data, and its validation when it comes
back: a saved state is input, checked whole before the monitor takes any of it."""

from __future__ import annotations

import collections
import dataclasses
import math
import random

from river import metrics, utils

from river_advsvm.alerts import (
    ALERT_KINDS, MAX_HISTORY, RECENT_SAMPLES, Alert, Observation, Worsening,
)
from river_advsvm.labels import as_label

__all__ = ["restored", "state_of"]


def state_of(monitor) -> dict:
    """`RobustnessMonitor.state()`: the monitor's state as plain JSON-able data.

    The clean window's `(label, prediction)` pairs are positions in `clean_labels`, each label
    written once: a label of 1000 characters (as many as a service's message may carry)
    written in each of the window's pairs made megabytes of a service's checkpoint metadata,
    past what it may hold.
    """
    version, internal, gauss = monitor._rng.getstate()
    labels, pairs = _positions(list(monitor._clean_pairs))
    return {
        "params": monitor._params(),
        "n_seen": monitor.n_seen,
        "n_sampled": monitor.n_sampled,
        "n_no_gradient": monitor.n_no_gradient,
        "attack_seconds": monitor.attack_seconds,
        "rng": [version, list(internal), gauss],
        "clean_labels": labels,
        "clean": pairs,
        "sampled_clean": [args[1] for args, _ in monitor._sampled_clean.window],
        "robust": [args[1] for args, _ in monitor._robust.window],
        "certified": [args[1] for args, _ in monitor._certified.window],
        "gap_raised": monitor._gap_raised,
        "collapse_raised": monitor._collapse_raised,
        "clean_drift": _worsening_state(monitor._clean_drift),
        "robust_drift": _worsening_state(monitor._robust_drift),
        "alerts": [_finite(dataclasses.asdict(alert)) for alert in monitor._alerts],
        "last": None if monitor.last is None else _finite(dataclasses.asdict(monitor.last)),
    }


def _differences(saved, mine: dict, most: int = 4) -> str:
    """The settings `saved` (a state's params: input, any shape) has other than `mine` (the
    monitor's), as `name saved (this monitor: value)`, at most `most` of them, each cut
    short."""
    if not isinstance(saved, dict):
        return "none readable"

    def pairs(params):  # (the sample rate and the attack are [type name, value] pairs)
        flat = {}
        for key, value in params.items():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[1], dict):
                flat[str(key)] = value[0]
                flat.update({f"{key}.{k}": v for k, v in value[1].items()})
            elif isinstance(value, list) and len(value) == 2 and key == "sample_rate":
                flat[str(key)] = value[1]
            else:
                flat[str(key)] = value
        return flat

    saved, mine = pairs(saved), pairs(mine)
    names = [n for n in sorted(set(saved) | set(mine), key=str) if saved.get(n) != mine.get(n)]
    if not names:
        return "the same values, of other types"
    said = [f"{n[:40]} {_short(saved.get(n))} (this monitor: {_short(mine.get(n))})"
            for n in names[:most]]
    return ", ".join(said) + (f", and {len(names) - most} more" if len(names) > most else "")


def _short(value, most: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def restored(monitor, state: dict) -> dict:
    """The attributes `monitor` takes from `state` (a `state_of` of a monitor with the same
    parameters); raises on anything malformed, before the monitor changes."""
    params = monitor._params()
    if state["params"] != params:
        raise ValueError(f"saved with other settings: {_differences(state['params'], params)}")
    version, internal, gauss = state["rng"]
    internal = tuple(_integer(v, 0, 2**32 - 1) for v in _window(internal, 625))
    if not (internal[:1] and internal[0] >= 2**31 or any(internal[1:624])):
        # A Mersenne Twister with its state's 19937 bits all 0 draws 0.0 for ever: the monitor
        # would attack every sample. No generator reaches it.
        raise ValueError("the sampling generator's state is all zeros")
    rng = random.Random()
    rng.setstate((_integer(version, 0, 10), internal, _number_or_none(gauss)))
    clean = _window(state["clean"], monitor.window_size)
    if "clean_labels" in state:  # (not in states from before it was written)
        clean = _labelled(clean, _window(state["clean_labels"], 2 * monitor.window_size))
    for pair in clean:
        if not (isinstance(pair, list) and len(pair) == 2 and all(map(_is_label, pair))):
            raise ValueError("a clean-window entry is not a (label, prediction) pair")
        if pair[0] is None:
            raise ValueError("a clean-window label is None")
        for value in pair:
            _check_label(value)
    flags = {name: [_boolean(v) for v in _window(state[name], monitor.robust_window_size)]
             for name in ("sampled_clean", "robust", "certified")}
    n_seen = _integer(state["n_seen"], 0, 2**63)
    n_sampled = _integer(state["n_sampled"], 0, n_seen)
    # The windows are the latest samples of what the counters counted: a clean window fuller
    # than the samples seen, or a robust window beside a clean twin of another length (their
    # difference is the gap), says what no monitor saw.
    if len(clean) != min(n_seen, monitor.window_size):
        raise ValueError(f"a clean window of {len(clean)} samples after {n_seen} seen")
    if not (len(flags["sampled_clean"]) == len(flags["robust"])
            == min(n_sampled, monitor.robust_window_size) >= len(flags["certified"])):
        raise ValueError(f"windows of {len(flags['sampled_clean'])}, {len(flags['robust'])} "
                         f"and {len(flags['certified'])} attacked samples after {n_sampled}")
    if any(robust and not right
           for right, robust in zip(flags["sampled_clean"], flags["robust"])):
        raise ValueError("an attacked sample is right under attack and wrong without it")
    rolling = {"_clean_pairs": collections.deque((tuple(pair) for pair in clean),
                                                 maxlen=monitor.window_size)}
    right = [(True, bool(y_pred == y)) for y, y_pred in clean]
    for name, entries in [("_clean", right), *((f"_{k}", [(True, v) for v in flags[k]])
                                               for k in flags)]:
        size = monitor.window_size if name == "_clean" else monitor.robust_window_size
        window = utils.Rolling(metrics.Accuracy, window_size=size)
        for y, y_pred in entries:
            window.update(y, y_pred)
        rolling[name] = window
    alerts = collections.deque(
        (_alert_of(a, n_seen, monitor.robust_window_size)
         for a in _window(state["alerts"], monitor.max_alerts)),
        maxlen=monitor.max_alerts)
    last = state["last"]
    if last is not None and (n_seen == 0 or _integer(last["step"], 0, 2**63) != n_seen):
        raise ValueError(f"the last observation is not of step {n_seen}")
    if last is not None and (_number_or_none(last["radius"]) or 0.0) < 0.0:
        raise ValueError("a certified radius is negative")
    seconds = float(_number_or_none(state["attack_seconds"]) or 0.0)
    if seconds < 0.0:
        raise ValueError(f"attack_seconds {seconds} is negative")
    return {
        **rolling,
        "_rng": rng,
        "n_seen": n_seen,
        "n_sampled": n_sampled,
        "n_no_gradient": _integer(state["n_no_gradient"], 0, n_sampled),
        "attack_seconds": seconds,
        "_gap_raised": _boolean(state["gap_raised"]),
        "_collapse_raised": _boolean(state.get("collapse_raised", False)),
        "_clean_drift": _worsening_of(state["clean_drift"], monitor.detector),
        "_robust_drift": _worsening_of(state["robust_drift"], monitor.detector),
        "_alerts": alerts,
        "last": None if last is None else Observation(
            step=_integer(last["step"], 0, 2**63), correct=_boolean(last["correct"]),
            sampled=_boolean(last["sampled"]),
            robust_correct=_boolean_or_none(last["robust_correct"]),
            certified=_boolean_or_none(last["certified"]),
            radius=_number_or_none(last["radius"])),
    }


def _label_key(label) -> tuple:
    """Labels `==` may not tell apart (1, 1.0 and True; 0.0 and -0.0) are written apart."""
    sign = math.copysign(1.0, label) if type(label) is float else 0.0
    return type(label), label, sign


def _positions(pairs: list) -> tuple[list, list]:
    """The distinct labels of `pairs` in order of appearance, and the pairs as their
    positions."""
    position: dict = {}
    labels: list = []
    out = []
    for pair in pairs:
        row = []
        for label in pair:
            key = _label_key(label)
            if key not in position:
                position[key] = len(labels)
                labels.append(label)
            row.append(position[key])
        out.append(row)
    return labels, out


def _labelled(pairs: list, labels: list) -> list:
    """The `(label, prediction)` pairs `_positions` wrote, checked."""
    if not all(_is_label(v) for v in labels):
        raise ValueError("a clean-window label is not a label")
    for label in labels:
        _check_label(label)
    out = []
    for pair in pairs:
        if not (isinstance(pair, list) and len(pair) == 2
                and all(type(i) is int and 0 <= i < len(labels) for i in pair)):
            raise ValueError("a clean-window entry is not a pair of positions of its labels")
        out.append([labels[pair[0]], labels[pair[1]]])
    return out


def _finite(fields: dict) -> dict:
    """`fields` with non-finite numbers (an infinite certified radius, say) as None: JSON has
    no infinity."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in fields.items()}


def _worsening_state(watch: Worsening) -> dict:
    return {"recent": list(watch._recent), "segment_errors": watch._segment_errors,
            "segment_samples": watch._segment_samples, "previous_rate": watch._previous_rate,
            "history": watch.history[-MAX_HISTORY:].decode("ascii")}


def _worsening_of(state: dict, detector) -> Worsening:
    watch = Worsening(detector.clone())
    history = state["history"]
    if not isinstance(history, str) or len(history) > MAX_HISTORY or history.strip("01"):
        raise ValueError("a detector's history is a text of at most MAX_HISTORY 0s and 1s")
    for error in history.encode("ascii"):  # the detector sees its inputs again
        watch.detector.update(error - 48)
    watch.history = bytearray(history.encode("ascii"))
    watch._recent.extend(_integer(v, 0, 1) for v in _window(state["recent"], RECENT_SAMPLES))
    watch._segment_samples = _integer(state["segment_samples"], 0, 2**63)
    watch._segment_errors = _integer(state["segment_errors"], 0, watch._segment_samples)
    # The latest errors are part of the segment's: a detection compares the two.
    n_recent = min(len(watch._recent), watch._segment_samples)
    recent_errors = sum(list(watch._recent)[len(watch._recent) - n_recent:])
    if not (recent_errors <= watch._segment_errors
            <= recent_errors + watch._segment_samples - n_recent):
        raise ValueError("a detector's recent errors are not among its segment's")
    rate = _number_or_none(state["previous_rate"])
    if rate is not None and not 0.0 <= rate <= 1.0:
        raise ValueError(f"previous_rate {rate} is not a rate")
    watch._previous_rate = rate
    return watch


def _alert_of(fields: dict, n_seen: int, robust_window_size: int) -> Alert:
    alert = Alert(**fields)
    if alert.kind not in ALERT_KINDS or not isinstance(alert.detector, str):
        raise ValueError(f"an alert's kind is one of {ALERT_KINDS} and its detector text")
    _integer(alert.step, 1, n_seen)
    _integer(alert.n_sampled, 0, robust_window_size)
    for value in (alert.clean_accuracy, alert.robust_accuracy, alert.certified_accuracy):
        if not 0.0 <= (_number_or_none(value) or 0.0) <= 1.0:
            raise ValueError(f"an alert's accuracy {value} is not in [0, 1]")
    if not -1.0 <= (_number_or_none(alert.gap) or 0.0) <= 1.0:
        raise ValueError(f"an alert's gap {alert.gap} is not in [-1, 1]")
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


def _check_label(value) -> None:
    """`ValueError` unless `value` is a label as `update` takes it (an int of at most 64 bits, a
    text of at most `MAX_LABEL_LENGTH` characters...) or None (a prediction that was none)."""
    if value is not None and as_label(value) != value:
        raise ValueError(f"a clean-window label {value!r:.40} is not a label")


def _is_label(value) -> bool:
    return value is None or type(value) in (str, int, bool) or (
        type(value) is float and math.isfinite(value))
