"""`advsvm serve --metrics-port` against the bundled broker: the scraped counters against the
stream, readiness around the partition assignment, liveness while the broker is away and while
the service itself is frozen (SIGSTOP) or stuck, and JSON logs that say the same as a scrape.

Every wait is on something observable (a scrape, a probe, the process); the only stretches of
time are the liveness threshold itself, which is what is under test.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

import kafka_helpers as kh  # noqa: E402
from river_advsvm.streams import clients, state  # noqa: E402
from river_advsvm.streams.broker import free_port  # noqa: E402

pytestmark = pytest.mark.kafka

#: Invalid messages of known reason codes, appended to the valid stream.
INVALID = [b"not json", b'{"x": "a"}', b"[1, 2", b'{"y": 1}', b"\xff\xfe"]


def probe(port: int, path: str, timeout: float = 5.0) -> tuple[int | None, dict | str]:
    """(HTTP status, JSON body) of one request; (None, the error) if no answer in time."""
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read().decode()
            return response.status, json.loads(body) if path != "/metrics" else body
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read().decode())
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        return None, repr(error)


def scrape(port: int) -> dict:
    """{name: value} and {name: {labels: value}} of one scrape (counters by their _total)."""
    status, text = probe(port, "/metrics")
    assert status == 200, text
    samples: dict = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            if sample.labels:
                key = tuple(sample.labels[k] for k in sorted(sample.labels))
                samples.setdefault(sample.name, {})[key] = sample.value
            else:
                samples[sample.name] = sample.value
    return samples


def expected_counters(values: list[bytes]) -> dict:
    """What the service must count for `values`: decoded by the message schema alone."""
    from river_advsvm.streams import kafka as kafka_io

    labelled = unlabelled = 0
    codes: dict = {}
    for value in values:
        try:
            sample = kafka_io.decode(value, max_bytes=2**20)
        except kafka_io.InvalidMessage as error:
            codes[error.code] = codes.get(error.code, 0) + 1
            continue
        labelled += sample.labelled
        unlabelled += not sample.labelled
    return {"consumed": len(values), "learned": labelled, "predicted": labelled + unlabelled,
            "dead_letters": codes}


def processed(port: int) -> int:
    """Messages consumed whose batch is done (consumed counts the batch in hand already)."""
    samples = scrape(port)
    done = samples["advsvm_messages_predicted_total"] + sum(
        samples.get("advsvm_dead_letters_total", {}).values())
    return samples["advsvm_messages_consumed_total"] if done == samples[
        "advsvm_messages_consumed_total"] else -1


def assert_counts(samples: dict, expected: dict) -> None:
    assert samples["advsvm_messages_consumed_total"] == expected["consumed"]
    assert samples["advsvm_messages_learned_total"] == expected["learned"]
    assert samples["advsvm_messages_predicted_total"] == expected["predicted"]
    assert {code: n for code, n in samples["advsvm_dead_letters_total"].items() if n} == {
        (code,): n for code, n in expected["dead_letters"].items()}


def test_metrics_count_the_stream_and_readiness_waits_for_the_assignment(own_broker, tmp_path):
    """The broker is frozen while the service starts: not ready, but live (it waits for the
    broker on purpose) past the liveness threshold. Once the broker is back and the partitions
    are assigned, ready; scrapes during and after the stream count exactly what was produced,
    dead letters by code included, and the final checkpoint holds the same numbers."""
    topic = "ops-counted"
    bootstrap = own_broker.bootstrap_servers
    clients.create_topics(bootstrap, {topic: 2, f"{topic}-predictions": 1, f"{topic}-dead": 1})
    X, y = kh.stream(600, seed=11)
    values = kh.messages(X, y, unlabelled_every=5)
    first, second = values[:300] + INVALID[:3], values[300:] + INVALID[3:] + INVALID[:1]
    kh.produce(bootstrap, topic, first, partition=[0, 1])
    own_broker.pause()

    # Above the longest single wait of the start-up (a connection check: 5 s at most).
    port, liveness = free_port(), 8.0
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(bootstrap, topic, "ops-counted-group", directory,
                               "--predictions-topic", f"{topic}-predictions",
                               "--dead-letter-topic", f"{topic}-dead",
                               "--metrics-port", str(port), "--liveness-timeout", str(liveness),
                               "--connect-timeout", "120", "--log-format", "json")
    process = kh.start_service(command, log)
    try:
        kh.wait_until(lambda: probe(port, "/readyz")[0] is not None, 60,
                      "the metrics endpoint", process, log)
        # Waiting for the broker, past the liveness threshold: alive, not ready.
        started = time.monotonic()
        while time.monotonic() - started < 1.5 * liveness:
            ready, why = probe(port, "/readyz")
            live, body = probe(port, "/healthz")
            assert ready == 503 and why["reason"] == (
                "starting: waiting for a Kafka broker to answer"), why
            assert live == 200 and body["seconds_since_last_poll"] <= liveness, body
        assert "waiting for a Kafka broker" in kh.tail(log)
    finally:
        own_broker.resume()

    kh.wait_until(lambda: probe(port, "/readyz")[0] == 200, 60, "readiness", process, log)
    assert probe(port, "/readyz")[1] == {"ready": True, "assigned_partitions": 2}

    # During the stream: the first part, counted exactly once it is all consumed.
    kh.wait_until(lambda: processed(port) >= len(first), 60, "the first part", process, log)
    during = scrape(port)
    assert_counts(during, expected_counters(first))
    assert during["advsvm_assigned_partitions"] == 2 and during["advsvm_ready"] == 1
    assert set(during["advsvm_consumer_lag_messages"]) == {("0", topic), ("1", topic)}

    kh.produce(bootstrap, topic, second, partition=[0, 1])
    everything = first + second
    kh.wait_until(lambda: processed(port) >= len(everything), 60, "the whole stream", process,
                  log)
    # After the stream: once a poll found nothing new, no partition lags.
    kh.wait_until(lambda: set(scrape(port)["advsvm_consumer_lag_messages"].values()) == {0}, 30,
                  "the lag to settle at 0", process, log)
    after = scrape(port)
    expected = expected_counters(everything)
    assert expected["dead_letters"] == {"not_json": 3, "bad_x": 1, "missing_x": 1,
                                        "not_utf8": 1}
    assert_counts(after, expected)
    assert after["advsvm_model_inputs"] == 8 and after["advsvm_model_random_features"] == 0
    support_vectors = after["advsvm_model_support_vectors"]  # the default model's, checked below
    assert after["advsvm_model_samples"] == expected["learned"]
    assert after["advsvm_processing_rate_messages_per_second"] > 0
    assert "advsvm_monitor_clean_accuracy_ratio" not in after  # no monitor: absent, not 0
    assert "advsvm_group_syncs_total" not in after

    assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)
    saved = state.load(directory).counters
    assert state.load(directory).model.n_support_vectors == support_vectors > 0
    assert saved["consumed"] == len(everything) and saved["learned"] == expected["learned"]
    assert saved["dead_letters_by_code"] == expected["dead_letters"]
    # The JSON log's checkpoint lines carry the same numbers under the metric names.
    lines = [json.loads(line) for line in open(log) if line.startswith("{")]
    final = [line for line in lines if line["message"].startswith("checkpoint ")][-1]
    assert final["messages_consumed_total"] == len(everything)
    assert final["dead_letters_total"] == expected["dead_letters"]
    assert final["consumer_lag_messages"] == {f"{topic}[0]": 0, f"{topic}[1]": 0}


def test_monitor_metrics_match_the_alerts_topic_and_the_checkpoint(broker, tmp_path):
    """Alerts by kind on /metrics are the alerts published, and the monitor's rolling clean
    accuracy is the one its checkpointed window gives."""
    total, flip = 1600, 800
    topic = "ops-watched"
    clients.create_topics(broker.bootstrap_servers, {topic: 1, f"{topic}-alerts": 1})
    X, y = kh.stream(total, seed=5)
    y[flip:] = 1 - y[flip:]  # every label flips: the clean accuracy collapses
    kh.produce(broker.bootstrap_servers, topic, kh.messages(X, y), partition=0)
    port = free_port()
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "ops-watched-group", directory,
                               "--alerts-topic", f"{topic}-alerts", "--monitor-sample-rate",
                               "0.1", "--monitor-epsilon", "0.05", "--metrics-port", str(port))
    process = kh.start_service(command, log)
    kh.wait_until(lambda: probe(port, "/readyz")[0] == 200 and scrape(port)[
        "advsvm_messages_learned_total"] == total, 120, "the stream", process, log)
    samples = scrape(port)
    assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)

    published = [json.loads(r.value) for r in kh.read_topic(
        broker.bootstrap_servers, f"{topic}-alerts", 1)]
    by_kind: dict = {}
    for alert in published:
        by_kind[(alert["kind"],)] = by_kind.get((alert["kind"],), 0) + 1
    assert by_kind.get(("clean_drift",), 0) >= 1
    assert {kind: n for kind, n in samples["advsvm_monitor_alerts_total"].items() if n} == by_kind
    assert len(samples["advsvm_monitor_alerts_total"]) == 4  # every kind, from the start
    monitor = state.load(directory).monitor
    window = monitor["clean"]
    assert samples["advsvm_monitor_clean_accuracy_ratio"] == pytest.approx(
        sum(label == predicted for label, predicted in window) / len(window), abs=1e-12)
    robust = monitor["robust"]
    assert samples["advsvm_monitor_robust_accuracy_ratio"] == pytest.approx(
        sum(robust) / len(robust), abs=1e-12)
    assert 0.0 <= samples["advsvm_monitor_certified_accuracy_ratio"] <= 1.0


def test_liveness_of_a_frozen_service(broker, tmp_path):
    """SIGSTOP freezes the whole process, its HTTP thread too: every probe past the liveness
    threshold times out (what a Kubernetes probe counts as a failure), none answers 200. After
    SIGCONT the service is live again and finishes the stream, each message learned once."""
    topic = "ops-frozen"
    clients.create_topics(broker.bootstrap_servers, {topic: 1})
    X, y = kh.stream(400, seed=12)
    values = kh.messages(X, y)
    kh.produce(broker.bootstrap_servers, topic, values, partition=0)
    port, liveness = free_port(), 2.0
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "ops-frozen-group", directory,
                               "--metrics-port", str(port), "--liveness-timeout", str(liveness),
                               "--exit-when-idle", "3")
    process = kh.start_service(command, log)
    kh.wait_until(lambda: probe(port, "/readyz")[0] == 200, 60, "readiness", process, log)
    assert probe(port, "/healthz")[0] == 200
    os.kill(process.pid, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        answers = []
        while time.monotonic() - stopped < 2 * liveness:
            answers.append(probe(port, "/healthz", timeout=1.0))
        assert answers and all(status is None and "timed out" in str(error)
                               for status, error in answers), answers
    finally:
        os.kill(process.pid, signal.SIGCONT)
    kh.wait_until(lambda: probe(port, "/healthz")[0] == 200, 30, "liveness again", process, log)
    assert kh.exit_status(process, 90, log) == 0, kh.tail(log)
    assert kh.learned(directory) == len(values)
    kh.assert_same_model(state.load(directory).model, kh.reference_model(values))


class _StuckMonitor:
    """A monitor whose first update blocks until released: the loop is stuck, the process not."""

    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()
        self.model = None

    def update(self, x, y, y_pred=None):
        if not self.entered.is_set():
            self.entered.set()
            self.release.wait(120)
        return []


def test_liveness_fails_while_the_loop_is_stuck_and_the_process_answers(broker, tmp_path):
    """The loop blocked in a step (here the monitor): /healthz answers 503 once it has not
    polled for longer than the threshold, /metrics still answers; 200 again once it moves."""
    from river_advsvm import AdvLinearSVM
    from river_advsvm.streams.metrics import MetricsServer
    from river_advsvm.streams.service import Service, ServiceConfig

    topic = "ops-stuck"
    clients.create_topics(broker.bootstrap_servers, {topic: 1})
    X, y = kh.stream(50, seed=13)
    kh.produce(broker.bootstrap_servers, topic, kh.messages(X, y), partition=0)
    monitor = _StuckMonitor()
    config = ServiceConfig(bootstrap_servers=broker.bootstrap_servers, topic=topic,
                           group="ops-stuck-group", checkpoint_dir=str(tmp_path / "ckpt"),
                           exit_when_idle=3.0, session_timeout_ms=1500)
    service = Service(config, AdvLinearSVM, monitor)
    server = MetricsServer(service.session.reading, liveness_timeout=1.0).start()
    statuses = []
    runner = threading.Thread(target=lambda: statuses.append(service.run()))
    runner.start()
    try:
        assert monitor.entered.wait(60), "the loop never reached the monitor"
        kh.wait_until(lambda: probe(server.port, "/healthz")[0] == 503, 30, "liveness to fail")
        status, body = probe(server.port, "/healthz")
        assert status == 503 and body["seconds_since_last_poll"] > 1.0 and not body["live"]
        assert scrape(server.port)["advsvm_seconds_since_last_poll"] > 1.0
        monitor.release.set()
        kh.wait_until(lambda: probe(server.port, "/healthz")[0] == 200, 30, "liveness again")
    finally:
        monitor.release.set()
        runner.join(60)
        server.stop()
    assert statuses == [0]
    assert service.state.counters["learned"] == 50


def test_group_metrics_of_two_workers(broker, tmp_path):
    """Two workers of a group: their consumed and learned counters add up to the stream, each
    one's syncs are the snapshots in its checkpoint, and the folds and peers show that they
    averaged each other's models in."""
    topic = "ops-group"
    clients.create_topics(broker.bootstrap_servers, {topic: 2})
    X, y = kh.stream(800, seed=14)
    values = kh.messages(X, y, unlabelled_every=4)
    expected = expected_counters(values)
    ports, processes, directories = [], [], []
    for worker in ("w0", "w1"):
        ports.append(free_port())
        directories.append(tmp_path / worker)
        command = kh.serve_command(broker.bootstrap_servers, topic, "ops-group-group",
                                   directories[-1], "--sync-every", "100", "--gamma", "0.1",
                                   "--worker-id", worker, "--checkpoint-interval", "0.5",
                                   "--metrics-port", str(ports[-1]))
        processes.append(kh.start_service(command, tmp_path / f"{worker}.log"))
    for port, process, worker in zip(ports, processes, ("w0", "w1")):
        kh.wait_until(lambda: probe(port, "/readyz")[0] == 200, 60, f"{worker} ready", process,
                      tmp_path / f"{worker}.log")
    kh.produce(broker.bootstrap_servers, topic, values, partition=[0, 1])

    def settled():
        """Both scrapes, once the stream is consumed and each worker's last sync is on disk."""
        scrapes = [scrape(port) for port in ports]
        if sum(s["advsvm_messages_consumed_total"] for s in scrapes) != len(values):
            return None
        for samples, directory in zip(scrapes, directories):
            saved = state.load(directory)
            if saved is None or samples["advsvm_group_syncs_total"] != saved.group["seq"] or \
                    saved.counters["consumed"] != samples["advsvm_messages_consumed_total"]:
                return None
        return scrapes

    scrapes = kh.wait_until(settled, 120, "both workers to sync the whole stream")
    assert sum(s["advsvm_messages_learned_total"] for s in scrapes) == expected["learned"]
    assert all(s["advsvm_group_syncs_total"] >= 1 for s in scrapes)
    assert sum(s["advsvm_assigned_partitions"] for s in scrapes) == 2
    folded = [s for s in scrapes if s["advsvm_group_folds_total"] >= 1]
    assert folded and all(s["advsvm_group_peers"] == 1 for s in folded)
    for process in processes:
        assert kh.stop_service(process) == 0


def test_a_collapse_is_a_json_log_line_and_a_metric(broker, tmp_path):
    """The paper's closed form at a radius the data cannot pay collapses (as in
    test_adversarial_training): the service logs the model's CollapseWarning as a JSON line
    of its log, every line of which stays JSON, and exposes the verdict as a gauge."""
    from test_adversarial_training import blobs

    topic = "ops-collapse"
    bootstrap = broker.bootstrap_servers
    clients.create_topics(bootstrap, {topic: 1})
    X, y = blobs(n=900, d=50, seed=5, separation=0.2)
    values = kh.messages(X, y.astype(int))
    kh.produce(bootstrap, topic, values, partition=0)
    port = free_port()
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(bootstrap, topic, "ops-collapse-group", directory,
                               "--adversary", "closed_form", "--norm", "linf",
                               # (the last iterate predicts: the average of the crushed
                               # iterates decides well, test_an_average_that_decides_well...)
                               "--averaging", "0",
                               "--budget", "1024", "--metrics-port", str(port),
                               "--log-format", "json")
    process = kh.start_service(command, log)
    try:
        kh.wait_until(lambda: probe(port, "/readyz")[0] == 200, 60, "readiness", process, log)
        kh.wait_until(lambda: processed(port) >= len(values), 60, "the stream", process, log)
        assert scrape(port)["advsvm_model_collapsed"] in (0.0, 1.0)
    finally:
        assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)
    lines = [json.loads(line) for line in log.read_text().splitlines()]  # all of them JSON
    warned = [line for line in lines if line["logger"] == "py.warnings"]
    assert warned and all(line["level"] == "warning" for line in warned)
    assert all(line["message"].startswith("CollapseWarning: AdvKernelSVM predicts a constant")
               for line in warned), warned


def test_a_broker_gone_while_the_service_idles_is_said_and_makes_it_not_ready(own_broker,
                                                                              tmp_path):
    """With the broker killed, an idle service logged nothing and stayed ready (it polls on:
    live). After 10 s without a connection to any broker it warns and is not ready; when the
    broker is back (here empty: memory storage), a line says so and it is ready again."""
    topic = "ops-away"
    bootstrap = own_broker.bootstrap_servers
    clients.create_topics(bootstrap, {topic: 1})
    X, y = kh.stream(50, seed=13)
    kh.produce(bootstrap, topic, kh.messages(X, y), partition=0)
    port = free_port()
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(bootstrap, topic, "ops-away-group", directory,
                               "--metrics-port", str(port), *kh.CHECKPOINT_SOON)
    process = kh.start_service(command, log)
    try:
        kh.wait_until(lambda: kh.learned(directory) == 50, 60, "the messages", process, log)
        kh.wait_until(lambda: probe(port, "/readyz")[0] == 200, 60, "readiness", process, log)
        own_broker.kill()
        kh.wait_until(lambda: "no connection to any Kafka broker for" in log.read_text(), 60,
                      "the warning", process, log)
        ready, why = probe(port, "/readyz")
        assert ready == 503 and why["reason"] == "no connection to any Kafka broker", why
        assert probe(port, "/healthz")[0] == 200  # polling on: alive
        own_broker.start()
        kh.wait_until(lambda: "connected to the Kafka cluster again after" in log.read_text(),
                      60, "the line saying it is back", process, log)
        kh.wait_until(lambda: probe(port, "/readyz")[0] == 200, 60, "readiness again", process,
                      log)
    finally:
        assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)


def test_a_checkpoint_deleted_while_the_service_runs_stops_it_at_the_next_assignment(broker,
                                                                                   tmp_path):
    """Every assignment reloads the checkpoint. Deleted while the service ran, it was taken for
    a new start: a new model replaced all it had learned, went on from the group's committed
    offsets, and the service exited 0 later. It now stops with status 2, naming the file."""
    from kafka import KafkaConsumer

    topic, group = "ops-gone", "ops-gone-group"
    bootstrap = broker.bootstrap_servers
    clients.create_topics(bootstrap, {topic: 1})
    X, y = kh.stream(200, seed=21)
    kh.produce(bootstrap, topic, kh.messages(X, y), partition=0)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    process = kh.start_service(kh.serve_command(bootstrap, topic, group, directory,
                                                *kh.CHECKPOINT_SOON), log)
    kh.wait_until(lambda: kh.learned(directory) == 200, 60, "the messages", process, log)
    os.unlink(state.checkpoint_path(directory))
    # Another member joins the group: a rebalance, whose assignment reloads the checkpoint.
    member = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                           enable_auto_commit=False, session_timeout_ms=1500,
                           heartbeat_interval_ms=500)
    try:
        kh.wait_until(lambda: member.poll(timeout_ms=200) is not None
                      and process.poll() is not None, 60, "the service to stop", log_path=log)
    finally:
        member.close()
    assert process.returncode == 2, kh.tail(log)
    assert "the checkpoint this service wrote or read is gone" in log.read_text(), kh.tail(log)
    assert kh.checkpoint_info(directory) is None  # nothing written over it


def test_a_checkpoint_past_the_end_of_its_log_resumes_from_the_end(broker, tmp_path):
    """A checkpoint whose offset lies past the end of the log it names (the broker lost the
    log's tail, or the file is of another log): the service waited at that offset for ever,
    `--exit-when-idle` took it for caught up, and every message that came meanwhile went
    unlearned. It resumes from the end its first fetch found, says so, counts a
    `topic_resets`, and learns and predicts each message from there once, those that came
    while it made sure of the end included."""
    bootstrap = broker.bootstrap_servers
    topic = "pastend"
    clients.create_topics(bootstrap, {topic: 1, f"{topic}-predictions": 1})
    X, y = kh.stream(460, seed=12)
    values = kh.messages(X, y)
    kh.produce(bootstrap, topic, values[:400], partition=0)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    options = ("--predictions-topic", f"{topic}-predictions")
    command = kh.serve_command(bootstrap, topic, "pastend-group", directory, *options,
                               "--exit-when-idle", "1")
    assert kh.exit_status(kh.start_service(command, log), 90, log) == 0, kh.tail(log)
    saved = state.load(directory)
    assert saved.offsets == {topic: {0: 400}}
    saved.offsets[topic][0] = 100_000
    state.save(directory, saved)

    port = free_port()
    command = kh.serve_command(bootstrap, topic, "pastend-group", directory, *options,
                               "--checkpoint-interval", "0.5", "--exit-when-idle", "60",
                               "--metrics-port", str(port))
    process = kh.start_service(command, log)
    # The lag of a partition is reported once a fetch reported the end of its log.
    kh.wait_until(lambda: probe(port, "/readyz")[0] == 200
                  and ("0", topic) in scrape(port).get("advsvm_consumer_lag_messages", {}),
                  60, "the first fetch", process, log)
    kh.produce(bootstrap, topic, values[400:420], partition=0)  # while it makes sure
    kh.wait_until(lambda: "ends at offset 400, before offset 100000" in log.read_text(), 60,
                  "the service to resume from the log's end", process, log)
    kh.produce(bootstrap, topic, values[420:], partition=0)
    kh.wait_until(lambda: kh.checkpoint_info(directory)["offsets"] == {topic: {"0": 460}}, 60,
                  "the new messages", process, log)
    assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)

    info = kh.checkpoint_info(directory)
    assert info["counters"]["topic_resets"] == 1
    assert info["samples_learned"] == 460
    predictions = kh.read_topic(bootstrap, f"{topic}-predictions", 460)
    offsets = sorted(json.loads(r.value)["offset"] for r in predictions)
    assert offsets == list(range(460))  # each message's prediction once


def test_messages_since_the_checkpoint_are_what_a_crash_would_learn_again(broker, tmp_path):
    """`advsvm_messages_since_checkpoint`: every message processed while no checkpoint was
    written (what tells a quiet topic from unsaved work)."""
    topic = "ops-unsaved"
    clients.create_topics(broker.bootstrap_servers, {topic: 1})
    X, y = kh.stream(200, seed=17)
    kh.produce(broker.bootstrap_servers, topic, kh.messages(X, y), partition=0)
    port = free_port()
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "ops-unsaved-group", directory,
                               "--metrics-port", str(port), "--checkpoint-every", "1000000",
                               "--checkpoint-interval", "1000000")
    process = kh.start_service(command, log)
    kh.wait_until(lambda: probe(port, "/readyz")[0] == 200 and processed(port) == 200, 60,
                  "the stream", process, log)
    assert scrape(port)["advsvm_messages_since_checkpoint"] == 200
    assert kh.checkpoint_info(directory) is None
    assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)
    assert kh.learned(directory) == 200
