"""Kafka message values are outside input: any batch of them, through the service's Learner
(decode, validate, predict, learn; a monitor watching), gives each message a prediction with a
finite probability or a dead letter of a specific reason, never `internal_error`, and leaves a
finite model whose checkpoint can be written."""

from __future__ import annotations

import json
import math
import warnings

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

pytest.importorskip("kafka")
from river import drift  # noqa: E402

from river_advsvm import AdvKernelSVM, AdvLinearSVM  # noqa: E402
from river_advsvm.attacks import PGD  # noqa: E402
from river_advsvm.monitor import RobustnessMonitor  # noqa: E402
from river_advsvm.streams import state  # noqa: E402
from river_advsvm.streams.learner import Learner  # noqa: E402

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))
nums = st.one_of(st.floats(-3, 3), st.floats(allow_nan=False), st.integers(-2**70, 2**70),
                 st.booleans(), st.sampled_from([1e308, -1e308, 1e16, 5e-324, 0, -0.0]))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=False), st.text(max_size=4),
                    st.sampled_from(["a", "b", 0, 1, True, "\x00", "\ud800"]))
json_values = st.recursive(
    scalars, lambda i: st.one_of(st.lists(i, max_size=3),
                                 st.dictionaries(st.text(max_size=2), i, max_size=3)),
    max_leaves=5)


@st.composite
def message(draw):
    kind = draw(st.integers(0, 9))
    if kind >= 5:  # a valid message
        x = draw(st.lists(st.floats(-3, 3), min_size=3, max_size=3))
        y = draw(st.sampled_from([0, 1, None, "a", "b"]))
        if draw(st.booleans()):
            x = dict(zip("abc", x))
        body = {"x": x} if y is None else {"x": x, "y": y}
        return json.dumps(body).encode()
    if kind == 0:
        return draw(st.one_of(st.none(), st.binary(max_size=40)))
    body = {}
    if draw(st.booleans()):
        body["id"] = draw(st.one_of(st.integers(-2**70, 2**70), st.text(max_size=4), json_values))
    shape = draw(st.integers(0, 3))
    if shape == 0:
        body["x"] = draw(st.lists(nums, min_size=3, max_size=3))
    elif shape == 1:
        body["x"] = draw(st.lists(st.one_of(nums, json_values), max_size=5))
    elif shape == 2:
        body["x"] = draw(st.dictionaries(
            st.sampled_from(["a", "b", "c", "0", "", "\ud800", "x" * 300]), nums, max_size=4))
    else:
        body["x"] = draw(json_values)
    if draw(st.integers(0, 3)):
        body["y"] = draw(st.one_of(st.sampled_from([0, 1, "a", "b", True, False, None, 1.0]),
                                   scalars, json_values))
    try:
        text = json.dumps(body)
    except (UnicodeEncodeError, ValueError):
        return b"{}"
    for literal in ["NaN", "Infinity", "-Infinity", "1e999"]:
        if draw(st.integers(0, 20)) == 0:
            text = text.replace("0", literal, 1)
    return text.encode("utf-8", "surrogatepass")


MODELS = {
    "linear": lambda: AdvLinearSVM(epsilon=0.1),
    "kernel": lambda: AdvKernelSVM(budget=16, warm_up=4, seed=0, epsilon=0.1),
}


@settings(max_examples=80, **SETTINGS)
@given(kind=st.sampled_from(sorted(MODELS)), batches=st.lists(st.lists(message(), max_size=8),
                                                                min_size=1, max_size=4),
       watched=st.booleans(), labels=st.sampled_from([None, [0, 1], ["a", "b"]]),
       width=st.sampled_from([None, 3]))
def test_any_messages_through_the_learner(kind, batches, watched, labels, width):
    model = MODELS[kind]()
    monitor = (RobustnessMonitor(model, attack=PGD(epsilon=0.1, norm="l2", steps=2, bounds=None),
                                 sample_rate=2, detector=drift.NoDrift(), seed=0)
               if watched else None)
    learner = Learner(state.ServiceState(model=model, labels=labels, width=width),
                      max_message_bytes=4096, monitor=monitor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for values in batches:
            outcomes = learner.process_many(values)
            assert len(outcomes) == len(values)
            for o in outcomes:
                if o.error is not None:
                    event(o.error.code)
                    assert o.error.code != "internal_error", str(o.error)
                elif o.probability is not None:
                    event("predicted" + (" learned" if o.sample.labelled else ""))
                    assert math.isfinite(o.probability) and 0 <= o.probability <= 1
        model = learner.state.model
        for x in ({"a": 0.3, "b": 0.9, "c": 0.1}, {0: 0.3, 1: -2.0, 2: 0.5}):
            assert math.isfinite(model.decision_one(x))
        learner.save_monitor()
        state.to_bytes(learner.state)   # the checkpoint of it can be written
