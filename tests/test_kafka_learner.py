"""The service's decoding and batched test-then-train, without a broker: hostile and random
messages (hypothesis), batch boundaries, the monitor's view, strict JSON outputs."""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import numpy as np
import pytest

pytest.importorskip("kafka")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from river_advsvm import AdvKernelSVM, AdvLinearSVM  # noqa: E402
from river_advsvm.attacks import PGD  # noqa: E402
from river_advsvm.monitor import RobustnessMonitor  # noqa: E402
from river_advsvm.streams import cli  # noqa: E402
from river_advsvm.streams import kafka as kafka_io  # noqa: E402
from river_advsvm.streams import metrics  # noqa: E402
from river_advsvm.streams import outputs  # noqa: E402
from river_advsvm.streams import state  # noqa: E402
from river_advsvm.streams.learner import Learner  # noqa: E402

import kafka_helpers as kh  # noqa: E402

# -- decoding ---------------------------------------------------------------------------------

numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False), st.integers(-10**30, 10**30), st.booleans(),
)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=6)
names = st.text(max_size=6)


@st.composite
def message_texts(draw) -> bytes:
    """Messages as a producer might write them: mostly valid, some not, some odd JSON."""
    parts = []
    if draw(st.booleans()):
        parts.append(("id", draw(st.one_of(st.integers(-2**70, 2**70), st.text(max_size=4),
                                            json_values))))
    x = draw(st.one_of(
        st.lists(st.one_of(numbers, json_values), max_size=6),
        st.dictionaries(names, st.one_of(numbers, json_values), max_size=6),
        json_values))
    if draw(st.integers(0, 9)):
        parts.append(("x", x))
    if draw(st.booleans()):
        parts.append(("y", draw(st.one_of(json_scalars, json_values))))
    if draw(st.integers(0, 5)) == 0:  # a repeated key, or an extra one
        parts.append((draw(st.sampled_from(["x", "y", "id", "extra", "a:b"])), draw(json_values)))
    text = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in parts) + "}"
    for literal in ["NaN", "Infinity", "1e999", "9" * 500]:  # numbers strict JSON refuses
        if draw(st.integers(0, 15)) == 0:
            text = text.replace("0", literal, 1)
    return text.encode()


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message_texts())
def test_fast_decoding_agrees_with_the_strict_decoder(value):
    """msgspec's typed pass (taken when it accepts) and the standard library's strict pass
    give the same sample, or the same refusal."""
    try:
        fast = kafka_io.decode(value, max_bytes=2**20)
    except kafka_io.InvalidMessage as error:
        fast = error.code
    try:
        strict = kafka_io._decode_strictly(value)
    except kafka_io.InvalidMessage as error:
        strict = error.code
    assert fast == strict
    if isinstance(fast, kafka_io.Sample):
        assert all(type(v) in (float, bool) and math.isfinite(v) for v in
                   (fast.features.values() if isinstance(fast.features, dict)
                    else fast.features))


# -- batched test-then-train ------------------------------------------------------------------

def _stream_values(draw_ints, n: int) -> list[bytes]:
    X, y = kh.stream(n, d=4, seed=draw_ints[0])
    values = kh.messages(X, y, unlabelled_every=5)
    hostile = [b"", b"{", b'{"x": [1, 2]}', b'{"x": [1e999, 0, 0, 0], "y": 1}',
               b'{"x": [0.1, 0.2, 0.3, 0.4], "y": 9}', b'{"x": {"a": 1}, "y": 0}',
               b'{"x": [0.1, "a", 0.3, 0.4], "y": 1}', b'{"x": [0.5, 0.5, 0.5, 0.5]}',
               b'{"id": ' + b"7" * 5000 + b', "x": [1, 1, 1, 1]}']
    for k, position in enumerate(draw_ints[1:]):
        values.insert(position % (len(values) + 1), hostile[k % len(hostile)])
    return values


def _run(values, cuts, model, monitor=None):
    learner = Learner(state.ServiceState(model=model), max_message_bytes=2**20, monitor=monitor)
    outcomes, start = [], 0
    for cut in [*sorted(cuts), len(values)]:
        outcomes += learner.process_many(values[start:max(start, cut)])
        start = max(start, cut)
    summary = [(o.error.code, None) if o.error else (o.label, o.probability, o.alerts)
               for o in outcomes]
    return learner, summary


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=2, max_size=12),
       st.lists(st.integers(0, 400), max_size=6), st.sampled_from(["kernel", "linear"]))
def test_batches_give_the_model_and_outputs_of_one_message_at_a_time(draws, cuts, kind):
    """Poll boundaries never change a result: the model (bit for bit), every prediction and
    every dead letter are those of a loop over single messages."""
    values = _stream_values(draws, 300)

    def model():
        return AdvKernelSVM(epsilon=0.1, budget=16, seed=0) if kind == "kernel" else \
            AdvLinearSVM(epsilon=0.1)

    one_by_one, expected = _run(values, range(len(values)), model())
    batched, got = _run(values, cuts, model())
    assert got == expected
    kh.assert_same_model(batched.state.model, one_by_one.state.model)
    assert batched.state.counters == one_by_one.state.counters
    counters = batched.state.counters
    assert counters["consumed"] == len(values)
    assert counters["predicted"] + counters["dead_letters"] == len(values)


@pytest.mark.parametrize("offset, spread, gamma", [(1e4, 3.0, "0.05"), (-1e4, 1.0, "0.05"),
                                                    (1e6, 1.0, "1")])
def test_inputs_far_from_zero_restore_from_the_services_own_checkpoint(tmp_path, offset, spread,
                                                                       gamma):
    """With a numeric --gamma the support vectors hold the inputs as they come: far from 0 the
    kernel's exponents round by more than the distances between inputs, and the running
    ||f||^2 fell below 0. The service then refused its own checkpoint at the next start (exit
    status 2, 'saved squared norm is negative'); it must resume from it as if never stopped."""
    X, y = kh.stream(800, d=6, seed=1)
    _restores_as_never_stopped(tmp_path, ["--gamma", gamma], kh.messages(offset + spread * X, y))


@pytest.mark.parametrize("d, gamma", [(128, "1e10"), (400, "1e7")])
def test_inputs_near_the_bound_restore_from_the_services_own_checkpoint(tmp_path, d, gamma):
    """Inputs near the documented bound (1e15) with a large numeric --gamma: the exponents
    gamma ||x - x'||^2 the model keeps between its vectors (float32) pass float32's range, +inf
    (a kernel value of 0); the checkpoint holding them was refused at the next start (exit
    status 2, 'saved kernel exponents must be finite')."""
    X, y = kh.stream(300, d=d, seed=2)
    _restores_as_never_stopped(tmp_path, ["--gamma", gamma],
                               kh.messages(9.9e14 * np.tanh(X), y))


def _restores_as_never_stopped(tmp_path, argv: list, values: list) -> None:
    """The service's checkpoint after the first 3/4 of `values` (under the options `argv`)
    loads back, as the operator's limits allow, into the model it saved, which then learns the
    rest as the uninterrupted one does."""
    make = cli._model_factory(cli.build_parser().parse_args(argv))
    cut = 3 * len(values) // 4
    learner = Learner(state.ServiceState(model=make()), max_message_bytes=2**20)
    learner.process_many(values[:cut])
    state.save(tmp_path, learner.state)
    restored = Learner(state.load(tmp_path, state.Limits.of(make())), max_message_bytes=2**20)
    kh.assert_same_model(restored.state.model, learner.state.model)
    for run in (learner, restored):
        run.process_many(values[cut:])
    kh.assert_same_model(restored.state.model, learner.state.model)
    assert restored.state.counters["learned"] == len(values)


def _monitor():
    # (The learner points the monitor at the model it serves before each update.)
    return RobustnessMonitor(AdvKernelSVM(), attack=PGD(epsilon=0.1, norm="l2", bounds=None),
                             sample_rate=0.3, window_size=50, min_sampled=5)


@settings(max_examples=5, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=2, max_size=6),
       st.lists(st.integers(0, 400), max_size=6))
def test_the_monitor_sees_each_message_with_the_model_just_before_it(draws, cuts):
    """With a monitor that attacks 30% of the messages, batches still give the alerts, the
    monitor's state and the model of a loop over single messages."""
    values = _stream_values(draws, 300)
    one_monitor, batch_monitor = _monitor(), _monitor()
    one_by_one, expected = _run(values, range(len(values)),
                                AdvKernelSVM(epsilon=0.1, budget=16, seed=0), one_monitor)
    batched, got = _run(values, cuts, AdvKernelSVM(epsilon=0.1, budget=16, seed=0),
                        batch_monitor)
    assert got == expected
    timeless = [{**m.state(), "attack_seconds": None} for m in (batch_monitor, one_monitor)]
    assert timeless[0] == timeless[1]
    assert one_monitor.n_sampled > 10  # the attacks did run
    kh.assert_same_model(batched.state.model, one_by_one.state.model)


def test_the_monitor_attacks_at_the_radius_of_the_model_served(caplog):
    """A checkpoint's model wins over --epsilon and --norm, and so does its radius for the
    monitor's attack unless --monitor-epsilon and --monitor-norm are given: a restart with
    another --epsilon continues the monitor's windows (it started them over, attacking at a
    radius the model served was not trained for)."""
    parser = cli.build_parser()

    def served(*flags):
        args = parser.parse_args(["--alerts-topic", "alerts", "--monitor-sample-rate", "0.5",
                                  "--gamma", "1.0", *flags])
        model = cli._model_factory(args)()
        monitor, attack_for = cli._monitor(args, model)
        return Learner(state.ServiceState(model=model), 2**20, monitor, attack_for)

    first = served("--epsilon", "0.1", "--norm", "linf")
    assert (first.monitor.attack.epsilon, first.monitor.attack.norm) == (0.1, "linf")
    X, y = kh.stream(60, d=4)
    first.process_many(kh.messages(X, y))
    first.save_monitor()
    assert first.monitor.n_sampled > 0
    saved = first.state

    restarted = served()  # the options' model: epsilon 0, so 8/255 in their norm (L2)
    assert (restarted.monitor.attack.epsilon, restarted.monitor.attack.norm) == (
        pytest.approx(8 / 255), "l2")
    with caplog.at_level("WARNING"):
        restarted.state = saved
    assert not caplog.records
    assert (restarted.monitor.attack.epsilon, restarted.monitor.attack.norm) == (0.1, "linf")
    assert restarted.monitor.state() == {**saved.monitor}

    # A monitor that attacked at the options' radius already, then given the model of
    # another radius with no saved monitor: it starts fresh at the model's radius.
    used = served()
    used.process_many(kh.messages(X, y))
    assert used.monitor.n_sampled > 0
    used.state = state.ServiceState(model=saved.model)
    assert (used.monitor.attack.epsilon, used.monitor.attack.norm) == (0.1, "linf")
    assert used.monitor.n_sampled == 0

    given = served("--monitor-epsilon", "0.2", "--monitor-norm", "linf")
    with caplog.at_level("WARNING"):
        given.state = copy.deepcopy(saved)  # (a checkpoint read at start, then again at the
        given.state = copy.deepcopy(saved)  # first assignment: said once)
        given.state = saved
        given.state = saved  # (taken again: said once)
    assert (given.monitor.attack.epsilon, given.monitor.attack.norm) == (0.2, "linf")
    assert given.monitor.n_sampled == 0
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "the monitor starts over"]


def test_messages_outside_the_monitors_box_are_learned_counted_and_logged_sparsely(caplog):
    """A box (--monitor-bounds) the stream leaves: those messages are learned as any other;
    the monitor skips them, the counter says how many, and the log has a line at the 1st, 2nd,
    4th, ... one, not one a message."""
    X, y = kh.stream(100, d=4, seed=3)
    X = np.clip(X, -1.0, 1.0)
    X[::2, 0] = 5.0  # every other message outside the box [-1, 1]
    values = kh.messages(X, y)
    monitor = RobustnessMonitor(AdvKernelSVM(), sample_rate=0.5, window_size=20, min_sampled=2,
                                attack=PGD(epsilon=0.1, norm="l2", bounds=(-1.0, 1.0)))
    bare = Learner(state.ServiceState(model=AdvKernelSVM(seed=0)), max_message_bytes=2**20)
    bare.process_many(values)
    with caplog.at_level("WARNING", logger="river_advsvm.streams.learner"):
        learner, _ = _run(values, [], AdvKernelSVM(seed=0), monitor)
    counters = learner.state.counters
    assert counters["monitor_skipped"] == 50 and counters["learned"] == 100
    assert monitor.n_seen == 50
    kh.assert_same_model(learner.state.model, bare.state.model)
    skipped = [r for r in caplog.records if "monitor skipped" in r.getMessage()]
    assert [int(r.getMessage().split()[3]) for r in skipped] == [1, 2, 4, 8, 16, 32]
    assert all(r.exc_info is None for r in skipped)
    assert metrics.log_fields(metrics.Reading.from_state(learner.state))[
        "monitor_skipped_total"] == 50


class _Delegating:
    """A linear model behind the calls the learner makes, for a test to break some of them."""

    def __init__(self):
        self.model = AdvLinearSVM()
        self.classes = self.model.classes

    def predict_proba_one(self, x):
        return self.model.predict_proba_one(x)

    def learn_one(self, x, y):
        self.model.learn_one(x, y)
        self.classes = self.model.classes

    def predict_proba_then_learn_many(self, X, y):
        out = self.model.predict_proba_then_learn_many(X, y)
        self.classes = self.model.classes
        return out


def test_an_unexpected_error_is_a_dead_letter_logged_once(caplog):
    class Fragile(_Delegating):
        """A model with a bug on one input: a batch holding it fails as a whole, then each
        message is tried on its own."""

        def learn_one(self, x, y):
            if x.get(0) == 13.0:
                raise ZeroDivisionError("a bug")
            super().learn_one(x, y)

        def predict_proba_then_learn_many(self, X, y):
            if any(np.asarray(X)[:, 0] == 13.0):
                raise ZeroDivisionError("a bug")
            return super().predict_proba_then_learn_many(X, y)

    learner = Learner(state.ServiceState(model=Fragile()), max_message_bytes=1000)
    good = [b'{"x": [1], "y": true}', b'{"x": [2], "y": false}']
    outcomes = learner.process_many([*good, b'{"x": [13], "y": true}', b'{"x": [3], "y": true}',
                                     b'{"x": [13], "y": false}'])
    codes = [o.error.code if o.error else None for o in outcomes]
    assert codes == [None, None, "internal_error", None, "internal_error"]
    assert "ZeroDivisionError: a bug" in str(outcomes[2].error)
    assert learner.state.counters["learned"] == 3
    assert sum("Traceback" in r.exc_text for r in caplog.records if r.exc_text) == 1


def test_outputs_are_strict_json_even_for_non_finite_numbers():
    @dataclasses.dataclass
    class Alert:
        gap: float
        step: object

    sample = kafka_io.decode(b'{"id": 1, "x": [1], "y": 2.5}', 100)
    outcome = type("O", (), {"sample": sample, "label": 2.5, "probability": math.nan})()
    record = type("R", (), {"topic": "t", "partition": 0, "offset": 3})()
    for value in [outputs.prediction_json(outcome, record, 1),
                  outputs.alert_json(Alert(math.inf, object()), outcome, record)]:
        parsed = json.loads(value, parse_constant=lambda c: pytest.fail(f"{c} in {value}"))
        assert None in parsed.values()


@pytest.mark.parametrize("where", ["batch", "one", "monitor"])
def test_out_of_memory_stops_the_learner_and_is_no_dead_letter(where):
    """A MemoryError is a fault of the machine (exit status 5, the last checkpoint intact),
    not of the message: dead-lettering it would drop a valid message from learning (and could
    checkpoint a model left half-updated)."""

    class Starved(_Delegating):
        def learn_one(self, x, y):
            if where == "one":
                raise MemoryError()
            super().learn_one(x, y)

        def predict_proba_then_learn_many(self, X, y):
            if where in ("batch", "one"):
                raise MemoryError()
            return super().predict_proba_then_learn_many(X, y)

    class Monitor:
        model = None

        def update(self, x, y, y_pred=None):
            raise MemoryError()

    learner = Learner(state.ServiceState(model=Starved()), max_message_bytes=1000,
                      monitor=Monitor() if where == "monitor" else None)
    with pytest.raises(MemoryError):
        learner.process_many([b'{"x": [1], "y": true}', b'{"x": [2], "y": false}'])
    assert learner.state.counters["dead_letters"] == 0


def test_failed_outputs_are_logged_once_per_round_not_once_each(caplog):
    """A broker refusing every output (a missing ACL, say) logged one warning per pending
    output at every resend: thousands of lines every few seconds, for as long as it lasts."""
    from kafka.errors import TopicAuthorizationFailedError

    from river_advsvm.streams.sink import OutputSink

    class Failed:
        is_done = True
        exception = TopicAuthorizationFailedError("not allowed")

    class Refusing:
        def send(self, topic, value=None, key=None):
            return Failed()

        def flush(self, timeout=None):
            pass

        def close(self, timeout=None):
            pass

    sink = OutputSink(Refusing)
    for i in range(500):
        sink.send("predictions", b"{}")
    with caplog.at_level("WARNING", logger="river_advsvm.streams.sink"):
        for _ in range(3):  # three rounds of resending
            assert sink.flush(timeout=0) is False
    assert sink.pending == 500  # nothing is dropped: they wait for the broker
    lines = [r for r in caplog.records if r.name == "river_advsvm.streams.sink"]
    assert 1 <= len(lines) <= 3, len(lines)
    assert "500 outputs to predictions failed" in lines[0].getMessage()
    assert "TopicAuthorizationFailedError" in lines[0].getMessage()


def test_outputs_do_not_each_wait_for_a_broker_that_is_away(monkeypatch):
    """With no broker to make a producer, each output of a batch tried again, each for the
    bootstrap timeout (5 s): the service saw no stop signal for minutes. One attempt now, the
    outputs wait; once a producer is made they go out first, in their order, each once."""
    from kafka.errors import KafkaTimeoutError

    from river_advsvm.streams import sink as sink_module
    from river_advsvm.streams.sink import OutputSink

    import types

    class Future:
        is_done, exception = True, None

        def __init__(self, offset):
            self.value = types.SimpleNamespace(topic="predictions", partition=0, offset=offset)

    sent = []

    class Producer:
        def send(self, topic, value=None, key=None):
            sent.append(value)
            return Future(len(sent) - 1)

        def flush(self, timeout=None):
            pass

        def close(self, timeout=None):
            pass

    attempts, broker = [], {"up": False}

    def factory():
        attempts.append(1)
        if not broker["up"]:
            raise KafkaTimeoutError("Unable to bootstrap")
        return Producer()

    clock = [1000.0]
    monkeypatch.setattr(sink_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(sink_module.time, "sleep", lambda seconds: None)
    sink = OutputSink(factory)
    for i in range(300):
        sink.send("predictions", b"%d" % i)
    assert len(attempts) == 1 and sink.pending == 300 and not sent
    assert sink.flush(timeout=0) is False  # one more attempt in the round, then it gives up
    assert len(attempts) == 2
    clock[0] += sink_module.UNMADE_RETRY_SECONDS
    broker["up"] = True
    sink.send("predictions", b"300")
    assert len(attempts) == 3 and sent == [b"%d" % i for i in range(301)]
    assert sink.flush(timeout=1) is True and sink.pending == 0 and len(sent) == 301
    assert sink.acknowledged_ends == {("predictions", 0): 301}


def test_a_producer_that_cannot_flush_is_closed_without_a_traceback_at_exit():
    """kafka-python's close flushes first and raises when that times out, leaving the producer
    open for its `__del__` to raise the same again at exit: a traceback after the service's
    last log line. It is closed anyway; what it held is still pending in the sink."""
    from kafka.errors import KafkaTimeoutError

    from river_advsvm.streams.sink import close_producer

    class Sender:
        forced = False

        def force_close(self):
            self.forced = True

    class Stuck:
        _closed = False

        def __init__(self):
            self._sender = Sender()

        def close(self, timeout=None, null_logger=False):
            if not self._closed:
                raise KafkaTimeoutError("Timeout waiting for future")

    producer = Stuck()
    close_producer(producer, timeout=0.1)
    assert producer._sender.forced and producer._closed
    producer.close(timeout=1)  # what __del__ does: nothing left to raise
