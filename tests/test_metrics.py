"""The metrics endpoint and health checks, scraped over HTTP against a counter source of the
test's own (the service-level scrape comes with the service's wiring)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import urllib.error
import urllib.request
import uuid

import pytest

pytest.importorskip("prometheus_client")

from hypothesis import given, settings, strategies as st  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from river_advsvm import AdvKernelSVM, AdvLinearSVM  # noqa: E402
from river_advsvm.alerts import ALERT_KINDS  # noqa: E402
from river_advsvm.streams.kafka import REASONS  # noqa: E402
from river_advsvm.streams import metrics  # noqa: E402
from river_advsvm.streams.metrics import MetricsServer, Reading  # noqa: E402
from river_advsvm.streams.state import ServiceState  # noqa: E402


class Source:
    """A service stand-in: a reading the test changes between scrapes, and a count of reads."""

    def __init__(self, **fields):
        self.reading = Reading(**fields)
        self.reads = 0

    def __call__(self) -> Reading:
        self.reads += 1
        return self.reading


@pytest.fixture
def serve():
    servers = []

    def start(source, **options) -> MetricsServer:
        server = MetricsServer(source, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def scrape(server: MetricsServer) -> dict:
    """{(sample name, sorted labels): value} of one scrape."""
    status, text = get(server.url + "/metrics")
    assert status == 200
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_a_scrape_reports_the_counters_of_the_source(serve):
    source = Source(messages=10, learned=6, correct=4, predicted=2, checkpoints=3,
                    dead_letters={"not_json": 1, "wrong_width": 1}, alerts={"robust_gap": 2},
                    lag={("digits", 0): 5, ("digits", 1): 0}, assigned_partitions=2,
                    last_checkpoint_age_seconds=1.5, processing_rate=250.0,
                    support_vectors=40, inputs=8, model_samples=6, clean_accuracy=0.75,
                    seconds_since_poll=0.2, ready=True)
    server = serve(source)
    samples = scrape(server)
    assert samples == {
        ("advsvm_messages_consumed_total", ()): 10,
        ("advsvm_messages_learned_total", ()): 6,
        ("advsvm_messages_predicted_total", ()): 2,
        ("advsvm_predictions_correct_total", ()): 4,
        ("advsvm_dead_letters_total", (("code", "not_json"),)): 1,
        ("advsvm_dead_letters_total", (("code", "wrong_width"),)): 1,
        ("advsvm_checkpoints_written_total", ()): 3,
        ("advsvm_topic_resets_total", ()): 0,
        ("advsvm_monitor_skipped_total", ()): 0,
        ("advsvm_monitor_alerts_total", (("kind", "robust_gap"),)): 2,
        ("advsvm_last_checkpoint_age_seconds", ()): 1.5,
        ("advsvm_messages_since_checkpoint", ()): 0,
        ("advsvm_consumer_lag_messages", (("partition", "0"), ("topic", "digits"))): 5,
        ("advsvm_consumer_lag_messages", (("partition", "1"), ("topic", "digits"))): 0,
        ("advsvm_assigned_partitions", ()): 2,
        ("advsvm_processing_rate_messages_per_second", ()): 250.0,
        ("advsvm_model_support_vectors", ()): 40,
        ("advsvm_model_inputs", ()): 8,
        ("advsvm_model_samples", ()): 6,
        ("advsvm_monitor_clean_accuracy_ratio", ()): 0.75,
        ("advsvm_seconds_since_last_poll", ()): 0.2,
        ("advsvm_ready", ()): 1,
    }  # absent: what the source does not have (no group, no random features, ...)
    # Nothing is counted by the server: a later scrape shows the source's new numbers.
    source.reading.messages, source.reading.dead_letters["empty"] = 12, 1
    samples = scrape(server)
    assert samples[("advsvm_messages_consumed_total", ())] == 12
    assert samples[("advsvm_dead_letters_total", (("code", "empty"),))] == 1
    assert source.reads == 2


def test_every_metric_follows_the_naming_conventions():
    names = [m.name for m in metrics.METRICS]
    assert len(set(names)) == len(names)
    for metric in metrics.METRICS:
        assert metric.name.startswith("advsvm_")
        assert metric.name.endswith("_total") == (metric.kind == "counter"), metric.name
        assert metric.help.endswith(".")


@pytest.fixture(scope="module")
def shared():
    """One server for many readings (starting one per hypothesis example is slow)."""
    source = Source()
    server = MetricsServer(source).start()
    yield source, server
    server.stop()


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=20), st.integers(0, 10**12), max_size=5),
       st.dictionaries(st.tuples(st.text(min_size=1, max_size=20), st.integers(0, 1000)),
                       st.integers(0, 10**9), max_size=5))
def test_any_label_values_survive_the_text_format(shared, codes, lag):
    source, server = shared
    source.reading = Reading(dead_letters=codes, lag=lag)
    samples = scrape(server)
    assert {labels[0][1]: value for (name, labels), value in samples.items()
            if name == "advsvm_dead_letters_total"} == codes
    assert {(dict(labels)["topic"], int(dict(labels)["partition"])): value
            for (name, labels), value in samples.items()
            if name == "advsvm_consumer_lag_messages"} == lag


def test_liveness_fails_once_the_loop_has_not_polled_for_too_long(serve):
    source = Source(seconds_since_poll=None)
    server = serve(source, liveness_timeout=30.0)
    status, body = get(server.url + "/healthz")
    assert status == 200 and json.loads(body)["live"]  # starting: nothing polled yet
    source.reading.seconds_since_poll = 30.0
    assert get(server.url + "/healthz")[0] == 200
    source.reading.seconds_since_poll = 30.5
    status, body = get(server.url + "/healthz")
    assert status == 503
    assert json.loads(body) == {"live": False, "seconds_since_last_poll": 30.5,
                                "liveness_timeout_seconds": 30.0}
    source.reading.seconds_since_poll = 0.1
    assert get(server.url + "/healthz")[0] == 200


def test_readiness_flips_when_the_service_says_so(serve):
    source = Source(ready=False, not_ready_reason="waiting for a partition assignment")
    server = serve(source)
    status, body = get(server.url + "/readyz")
    assert status == 503
    assert json.loads(body)["reason"] == "waiting for a partition assignment"
    source.reading.ready, source.reading.assigned_partitions = True, 3
    status, body = get(server.url + "/readyz")
    assert status == 200 and json.loads(body) == {"ready": True, "assigned_partitions": 3}


def test_a_failing_source_is_an_error_answer_not_a_dead_server(serve):
    calls = []

    def broken():
        calls.append(1)
        raise RuntimeError("boom")

    server = serve(broken)
    assert get(server.url + "/metrics")[0] == 500
    assert get(server.url + "/healthz")[0] == 503
    assert get(server.url + "/readyz")[0] == 503
    assert get(server.url + "/nothing-here")[0] == 404
    assert len(calls) == 3  # the 404 did not read the service


def test_each_server_has_its_own_registry(serve):
    a = serve(Source(messages=1))
    b = serve(Source(messages=2))
    assert a.port != b.port
    assert scrape(a)[("advsvm_messages_consumed_total", ())] == 1
    assert scrape(b)[("advsvm_messages_consumed_total", ())] == 2


def test_flags_off_by_default_loopback_by_default_and_a_busy_port_is_one_line(serve):
    parser = argparse.ArgumentParser()
    metrics.add_arguments(parser)
    assert metrics.from_args(parser.parse_args([]), Source()) is None
    busy = serve(Source())
    args = parser.parse_args(["--metrics-port", str(busy.port), "--liveness-timeout", "5"])
    assert args.metrics_host == "127.0.0.1" and args.liveness_timeout == 5.0
    with pytest.raises(ValueError, match=f"cannot serve metrics on 127.0.0.1:{busy.port}: "):
        metrics.from_args(args, Source())
    with pytest.raises(SystemExit):
        parser.parse_args(["--metrics-port", "70000"])


@pytest.mark.parametrize("host", ["\udcff", "local\x00host"])
def test_a_metrics_host_that_is_no_host_name_is_named_in_one_line(host):
    # A non-UTF-8 byte of --metrics-host (a lone surrogate) or a NUL was the socket module's
    # TypeError, "encoding of hostname failed", naming neither the flag nor the value.
    with pytest.raises(ValueError, match=re.escape(f"cannot serve metrics on {host!r}: not a "
                                                   "host name or address")):
        MetricsServer(Source(), host=host).start()


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan")])
def test_a_liveness_timeout_that_no_age_can_meet_is_refused(timeout):
    # NaN was taken: `age <= nan` is false, so /healthz answered 503 from the first poll on
    # and a liveness probe restarted the service forever.
    with pytest.raises(ValueError, match="the liveness timeout must be > 0 seconds"):
        MetricsServer(Source(), liveness_timeout=timeout)


def test_log_fields_carry_the_metric_names():
    reading = Reading(messages=5, dead_letters={"empty": 2}, lag={("t", 3): 7},
                      clean_accuracy=float("nan"), ready=True)
    fields = metrics.log_fields(reading)
    assert fields["messages_consumed_total"] == 5
    assert fields["dead_letters_total"] == {"empty": 2}
    assert fields["consumer_lag_messages"] == {"t[3]": 7}
    assert "monitor_clean_accuracy_ratio" not in fields and "model_inputs" not in fields
    assert set(fields) <= {m.name[len("advsvm_"):] for m in metrics.METRICS}


def test_a_reading_of_a_service_state_and_a_monitor():
    from river_advsvm.attacks import PGD
    from river_advsvm.monitor import RobustnessMonitor

    model = AdvKernelSVM(epsilon=0.1, gamma=0.5, budget=16, seed=0)
    state = ServiceState(model=model)
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.1), sample_rate=1.0, seed=0)
    for i in range(20):
        x, y = {0: float(i % 2), 1: (i % 3) / 2}, i % 2
        monitor.update(x, y)
        model.learn_one(x, y)
        state.counters["consumed"] += 1
        state.counters["learned"] += 1
    state.counters["dead_letters_by_code"]["empty"] = 3
    reading = Reading.from_state(state, monitor=monitor, processing_rate=9.0)
    # Every code and kind from the start: an alert on a counter's increase misses the first
    # count of a series that appears with it.
    assert (reading.messages, reading.learned) == (20, 20)
    assert reading.dead_letters == {**dict.fromkeys(REASONS, 0), "empty": 3}
    assert reading.alerts == dict.fromkeys(ALERT_KINDS, 0)
    assert Reading.from_state(state).alerts == {}  # no monitor, no alerts to count
    assert metrics.log_fields(reading)["dead_letters_total"] == {"empty": 3}
    assert reading.model_samples == model.n_learned == 20
    assert reading.random_features == model.n_features
    now = monitor.snapshot()
    assert (reading.clean_accuracy, reading.robust_accuracy, reading.certified_accuracy) == (
        now["clean_accuracy"], now["robust_accuracy"], now["certified_accuracy"])
    assert reading.processing_rate == 9.0 and reading.group_syncs is None
    # The reading is a copy: the service counting on does not change a reading taken.
    state.counters["dead_letters_by_code"]["empty"] = 4
    assert reading.dead_letters["empty"] == 3


@pytest.mark.kafka
def test_partition_lag_of_a_real_consumer(broker):
    from kafka import KafkaConsumer, TopicPartition

    from kafka_helpers import produce

    topic = f"lag-{uuid.uuid4().hex[:8]}"
    produce(broker.bootstrap_servers, topic, [b"m%d" % i for i in range(30)], partition=0)
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                             enable_auto_commit=False, max_poll_records=10)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        assert metrics.partition_lag(consumer, {}, [tp]) == {}  # no fetch yet
        read = []
        for _ in range(100):
            read += consumer.poll(timeout_ms=100).get(tp, [])
            if read:
                break
        processed = {topic: {0: read[-1].offset + 1}}
        assert metrics.partition_lag(consumer, processed, [tp]) == {(topic, 0): 30 - len(read)}
        assert metrics.partition_lag(consumer, {}, [tp]) == {
            (topic, 0): 30 - consumer.position(tp)}
    finally:
        consumer.close()


def test_a_collapsed_model_shows_in_the_metrics(serve):
    """`advsvm_model_collapsed` follows the model's own verdict: 0 while it learns, 1 once its
    decisions turned constant (the closed form at a radius the data cannot pay, as in
    test_adversarial_training), absent for a model that has no verdict."""
    from river_advsvm.collapse import CollapseWarning

    from test_adversarial_training import blobs

    X, y = blobs(n=900, d=50, seed=5, separation=0.2)
    # (predicting with the last iterate: the average of the crushed iterates decides well)
    model = AdvKernelSVM(epsilon=0.1, norm="linf", adversary="closed_form", seed=0,
                         averaging=None)
    state = ServiceState(model=model)
    assert metrics.log_fields(Reading.from_state(state))["model_collapsed"] == 0
    with pytest.warns(CollapseWarning):
        for row, label in zip(X, y):
            model.learn_one(dict(enumerate(row)), label)
            if model.collapsed:
                break
    reading = Reading.from_state(state)
    assert reading.collapsed is True and metrics.log_fields(reading)["model_collapsed"] == 1
    server = serve(Source(**dataclasses.asdict(reading)))
    assert scrape(server)[("advsvm_model_collapsed", ())] == 1.0
    state.model = object()  # a model without the verdict
    reading = Reading.from_state(state)
    assert reading.collapsed is None and "model_collapsed" not in metrics.log_fields(reading)


class _Consumer:
    """What `partition_lag` asks of a consumer: the high watermark and the position of each
    partition after its last fetch."""

    def __init__(self, highwater: dict, position: dict):
        self._highwater, self._position = highwater, position

    def highwater(self, tp):
        return self._highwater.get(tp)

    def position(self, tp, timeout_ms=None):
        return self._position.get(tp)


def test_the_lag_counts_from_the_furthest_of_the_checkpoint_and_the_consumer():
    """Lag = high watermark - the next offset to process: the checkpoint's, or the consumer's
    position where it is further (offsets past a transaction's marker hold no message), never
    below 0; a partition without a fetch is left out."""
    from kafka import TopicPartition

    from river_advsvm.streams.metrics import partition_lag

    a, b, c, d = (TopicPartition("t", p) for p in range(4))
    consumer = _Consumer(highwater={a: 10, b: 10, c: 4}, position={a: 8, b: 3, c: 6, d: 1})
    offsets = {"t": {0: 5, 1: 5, 2: 6, 3: 0}}
    assert partition_lag(consumer, offsets, [a, b, c, d]) == {("t", 0): 2, ("t", 1): 5,
                                                              ("t", 2): 0}


def test_the_processing_rate_leaves_the_idle_time_out(monkeypatch):
    """It counted from the first message to the last: after five idle minutes it fell from
    235 to 152 messages/s and stayed there, what came in rather than what the service can do."""
    from river_advsvm.streams import session

    clock = [0.0]
    monkeypatch.setattr(session.time, "monotonic", lambda: clock[0])
    progress = session.Progress()
    assert progress.throughput() == 0.0
    progress.polled(5)
    progress.record(5)
    clock[0] = 2.0
    progress.worked()
    clock[0] = 300.0
    progress.polled(0)  # idle
    progress.polled(5)
    progress.record(5)
    clock[0] = 300.5
    assert progress.throughput() == 10 / 2.5  # the records in hand count as busy
    clock[0] = 301.0
    progress.worked()
    clock[0] = 900.0
    assert progress.throughput() == 10 / 3


def test_the_averages_restarts_are_a_counter(serve):
    """`advsvm_model_average_restarts_total` is the model's `average_restarts`: 0 on a fresh
    model, the restarts after its labels swap; absent for a model without one."""
    from test_average_lag import progressive, swapped

    model = AdvKernelSVM(seed=0)
    state = ServiceState(model=model)
    assert metrics.log_fields(Reading.from_state(state))["model_average_restarts_total"] == 0
    xs, ys = swapped(2500, 1500)
    progressive(model, xs, ys)
    reading = Reading.from_state(state)
    assert reading.average_restarts == model.average_restarts >= 1
    server = serve(Source(**dataclasses.asdict(reading)))
    assert scrape(server)[("advsvm_model_average_restarts_total", ())] == model.average_restarts
    state.model = AdvLinearSVM()
    assert "model_average_restarts_total" not in metrics.log_fields(Reading.from_state(state))
