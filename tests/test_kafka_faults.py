"""Crash tests that aim: the service kills or freezes itself at a named point
(`river_advsvm.streams.faults`), each point leaves a mark, and the test asserts it was reached
before it checks that every message still counts exactly once.

Random kills mostly land while nothing is at stake (joining the group, waiting for a poll);
these land inside a checkpoint write, between a delivery and the checkpoint that covers it,
between a published snapshot and its local copy, and in a worker holding unpublished work.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess

import pytest

import kafka_helpers as kh
from river_advsvm.streams import clients
from river_advsvm.streams import group as group_io
from river_advsvm.streams import state

pytestmark = pytest.mark.kafka


def _start(command, log, marks, fault):
    """Start a service that dies, freezes or is stopped at `fault` ("POINT:kill|stop|term:N");
    its mark goes to `marks`."""
    marks.mkdir(exist_ok=True)
    env = dict(os.environ, ADVSVM_FAULTS=fault, ADVSVM_FAULT_MARKS=str(marks),
               PYTHONPATH=kh.REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   cwd=kh.REPO)
    kh.STARTED.append(process)
    return process


def _mark(marks, point) -> dict:
    return json.loads((marks / point).read_text())


def _one_partition(broker, tmp_path, topic: str, n: int, seed: int) -> tuple:
    """A topic of one partition holding `n` messages; the service's checkpoint directory, log
    and fault marks."""
    clients.create_topics(broker.bootstrap_servers, {topic: 1})
    X, y = kh.stream(n, seed=seed)
    kh.produce(broker.bootstrap_servers, topic, kh.messages(X, y), partition=0)
    return tmp_path / "ckpt", tmp_path / "service.log", tmp_path / "marks"


def _killed_at(command, log, marks, point: str, n: int) -> dict:
    """Run the service until it kills itself the `n`-th time it reaches `point`; its mark."""
    process = _start(command, log, marks, f"{point}:kill:{n}")
    assert kh.exit_status(process, 180, log) == -signal.SIGKILL, kh.tail(log)
    mark = _mark(marks, point)
    assert mark["reached"] == n
    return mark


def test_kills_inside_a_write_and_between_delivery_and_checkpoint_lose_nothing(broker,
                                                                               tmp_path):
    total = 8_000
    topic = "aimed"
    clients.create_topics(broker.bootstrap_servers, {topic: 1})
    X, y = kh.stream(total, seed=21)
    values = kh.messages(X, y)
    kh.produce(broker.bootstrap_servers, topic, values, partition=0)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "aimed-group", directory,
                               "--checkpoint-every", "500", "--checkpoint-interval", "60",
                               "--max-poll-records", "100")
    plan = [("outputs.flushed", 2), ("checkpoint.temp-written", 3), ("checkpoint.written", 2),
            ("batch.learned", 4)]
    seen = []
    for point, n in plan:
        marks = tmp_path / f"marks-{point}"
        before = kh.learned(directory)
        mark = _killed_at(command, log, marks, point, n)
        after = kh.checkpoint_info(directory)  # whatever the point, the checkpoint reads
        temporaries = list(directory.glob(".tmp-*.ckpt"))
        if point == "checkpoint.temp-written":
            assert len(temporaries) == 1  # killed inside the write: the new file not renamed
        if point == "batch.learned":
            assert mark["unpublished"] > 0 and mark["learned"] > after["samples_learned"]
        if point in ("checkpoint.written", "outputs.flushed", "checkpoint.temp-written"):
            assert after["samples_learned"] > before
        seen.append((point, after["samples_learned"]))
    assert kh.learned(directory) < total, "the kills came too late to test anything"
    process = kh.start_service(command + ["--exit-when-idle", "2"], log)
    assert kh.exit_status(process, 180, log) == 0, kh.tail(log)
    print(f"\naimed kills (point, learned after it): {seen}")
    info = kh.checkpoint_info(directory)
    assert info["samples_learned"] == info["counters"]["consumed"] == total
    assert info["offsets"] == {topic: {"0": total}}
    assert not list(directory.glob(".tmp-*.ckpt"))  # the restart removed the leftover
    kh.assert_same_model(state.load(directory).model, kh.reference_model(values))


def test_offsets_a_kill_kept_from_the_group_are_committed_at_the_next_start(broker,
                                                                              tmp_path):
    """Killed between a checkpoint and its commit, the service left the group's committed
    offsets behind the checkpoint; the next run, with nothing new to learn, commits what the
    checkpoint says (lag tools read the group's offsets), and stops cleanly."""
    from kafka import KafkaConsumer, TopicPartition

    topic, group = "aimed-commit", "aimed-commit-group"
    directory, log, marks = _one_partition(broker, tmp_path, topic, 300, seed=23)
    command = kh.serve_command(broker.bootstrap_servers, topic, group, directory,
                               "--checkpoint-every", "300")
    process = _start(command, log, marks, "checkpoint.written:kill:1")
    assert kh.exit_status(process, 120, log) == -signal.SIGKILL, kh.tail(log)
    assert _mark(marks, "checkpoint.written")["reached"] == 1

    def committed():
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                 enable_auto_commit=False)
        try:
            return consumer.committed(TopicPartition(topic, 0))
        finally:
            consumer.close()

    assert committed() is None  # the kill came before the commit
    process = kh.start_service(command + ["--exit-when-idle", "1"], log)
    assert kh.exit_status(process, 120, log) == 0, kh.tail(log)
    assert kh.checkpoint_info(directory)["offsets"] == {topic: {"0": 300}}
    assert committed() == 300


def test_a_partition_handed_back_resumes_where_the_group_got_to(broker, tmp_path):
    """Another service of the group learned a partition past this checkpoint's offset (the
    partition went to it and came back): its messages were learned and published again from
    the stale checkpoint (18,000 predictions for 16,000 messages in one run). A committed
    offset behind the checkpoint (a kill between a checkpoint and its commit) changes
    nothing: the checkpoint's is committed."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic, group = "handed-back", "handed-back-group"
    partition = TopicPartition(topic, 0)
    clients.create_topics(broker.bootstrap_servers, {topic: 1, f"{topic}-predictions": 1})
    X, y = kh.stream(400, seed=41)
    values = kh.messages(X, y)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, group, directory,
                               "--predictions-topic", f"{topic}-predictions",
                               "--exit-when-idle", "1")

    def committed(offset=None):
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                 enable_auto_commit=False)
        try:
            if offset is not None:  # another service's commit
                consumer.commit({partition: OffsetAndMetadata(offset, "", -1)})
            return consumer.committed(partition)
        finally:
            consumer.close()

    def run(messages):
        kh.produce(broker.bootstrap_servers, topic, messages, partition=0)
        assert kh.exit_status(kh.start_service(command, log), 120, log) == 0, kh.tail(log)
        return kh.checkpoint_info(directory)

    assert run(values[:100])["counters"]["learned"] == 100
    committed(50)  # behind the checkpoint
    info = run(values[100:200])
    assert info["offsets"] == {topic: {"0": 200}} and info["counters"]["learned"] == 200
    assert committed() == 200
    committed(300)  # the other service learned 200..299 and published their outputs
    info = run(values[200:])
    assert info["offsets"] == {topic: {"0": 400}} and info["counters"]["learned"] == 300
    ids = sorted(json.loads(r.value)["id"] for r in kh.read_topic(
        broker.bootstrap_servers, f"{topic}-predictions", 300, drain=True))
    assert ids == list(range(200)) + list(range(300, 400))
    assert "resuming handed-back[0] at 300 (checkpoint: 200)" in log.read_text()


def test_a_stop_while_the_group_answers_the_join_leaves_the_group_joinable(broker, tmp_path):
    """SIGTERM while the consumer's JoinGroup waited for the broker: kafka-python left the
    group, then answered the join as the leader of the member that had left, and the broker
    kept that member: every later member of the group waited for good (the restart consumed
    nothing). The stop now waits for the join to end, then leaves."""
    topic, group = "aimed-join", "aimed-join-group"
    directory, log, marks = _one_partition(broker, tmp_path, topic, 200, seed=31)
    command = kh.serve_command(broker.bootstrap_servers, topic, group, directory)
    process = _start(command, log, marks, "group.joining:term")
    assert kh.exit_status(process, 120, log) == 0, kh.tail(log)
    assert _mark(marks, "group.joining")["reached"] == 1
    process = kh.start_service(command + ["--exit-when-idle", "1"], log)
    kh.wait_until(lambda: kh.learned(directory) == 200, 90, "the restart to learn the stream",
                  process, log)
    assert kh.exit_status(process, 120, log) == 0, kh.tail(log)


def test_a_second_sigterm_while_the_clients_close_keeps_the_clean_status(broker, tmp_path):
    """The default handlers came back before the Kafka clients closed (up to a second): a
    second SIGTERM then killed the process after its clean stop (status 143 for a supervisor,
    a failure)."""
    topic, group = "aimed-closing", "aimed-closing-group"
    directory, log, marks = _one_partition(broker, tmp_path, topic, 50, seed=37)
    command = kh.serve_command(broker.bootstrap_servers, topic, group, directory,
                               "--exit-when-idle", "1")
    process = _start(command, log, marks, "service.closing:term")
    assert kh.exit_status(process, 120, log) == 0, kh.tail(log)
    assert _mark(marks, "service.closing")["reached"] == 1
    assert kh.learned(directory) == 50


def test_outputs_are_published_once_across_kills_that_make_the_service_learn_again(
        broker, tmp_path):
    """Killed after its outputs were delivered but before the checkpoint that covers them (and
    with outputs handed over but not yet delivered), the service learns those messages again;
    it reads back what the killed run had published and sends only the rest: every valid
    message has exactly one prediction, every invalid one exactly one dead letter."""
    total, topic = 3_000, "aimed-outputs"
    predictions, dead = f"{topic}-predictions", f"{topic}-dead"
    clients.create_topics(broker.bootstrap_servers, {topic: 1, predictions: 2, dead: 1})
    X, y = kh.stream(total, seed=29)
    values = kh.messages(X, y)
    invalid = set(range(7, total, 331))
    for i in invalid:
        values[i] = b"not json"
    kh.produce(broker.bootstrap_servers, topic, values, partition=0)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    command = kh.serve_command(broker.bootstrap_servers, topic, "aimed-outputs-group", directory,
                               "--checkpoint-every", "400", "--checkpoint-interval", "60",
                               "--max-poll-records", "100", "--predictions-topic", predictions,
                               "--dead-letter-topic", dead)
    relearned = 0
    for point, n in [("outputs.flushed", 2), ("batch.learned", 3), ("outputs.flushed", 2)]:
        before = kh.learned(directory)
        mark = _killed_at(command, log, tmp_path / f"marks-{relearned}", point, n)
        if point == "batch.learned":
            assert mark["unpublished"] > 0
        relearned += mark.get("unpublished", 0) + (400 if point == "outputs.flushed" else 0)
        assert kh.learned(directory) >= before
    assert kh.learned(directory) < total, "the kills came too late to test anything"
    process = kh.start_service(command + ["--exit-when-idle", "2"], log)
    assert kh.exit_status(process, 180, log) == 0, kh.tail(log)
    read = kh.read_topic(broker.bootstrap_servers, predictions, total - len(invalid), drain=True)
    offsets = sorted(json.loads(r.value)["offset"] for r in read)
    assert offsets == sorted(set(range(total)) - invalid), \
        f"{len(offsets)} predictions for {total - len(invalid)} messages"
    letters = kh.read_topic(broker.bootstrap_servers, dead, len(invalid), drain=True)
    assert sorted(json.loads(r.value)["offset"] for r in letters) == sorted(invalid)
    print(f"\nkilled 3 times with about {relearned} messages to learn again; "
          f"{len(offsets)} predictions, {len(letters)} dead letters")


class _Member:
    """A plain member of a consumer group, on a thread of its own: it holds the partitions the
    group gives it (paused: it reads and commits nothing) until `leave()`, as a killed service
    holds its own until its session times out."""

    def __init__(self, bootstrap: str, topic: str, group: str):
        import threading

        from kafka import KafkaConsumer

        self.held: set = set()
        self._leave = threading.Event()
        # (Its member id, which starts with its client id, sorts after the service's
        # "advsvm-serve-...": the range assignment gives it the last of two partitions.)
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                       client_id="zz-stand-in", enable_auto_commit=False,
                                       session_timeout_ms=1500, heartbeat_interval_ms=300)
        self._consumer.subscribe([topic])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        consumer = self._consumer
        while not self._leave.is_set():
            consumer.poll(timeout_ms=100)
            if consumer.assignment():
                consumer.pause(*consumer.assignment())
            self.held = {tp.partition for tp in consumer.assignment()}
        consumer.close()  # (leaves the group: a rebalance hands its partitions over)

    def leave(self) -> None:
        self._leave.set()
        self._thread.join(30)


@pytest.mark.parametrize("checkpointed", [
    pytest.param((0, 1), id="both-checkpointed"),
    pytest.param((0,), id="one-without-an-offset", marks=pytest.mark.slow)])
def test_outputs_of_a_partition_held_elsewhere_at_the_restart_are_not_sent_twice(
        broker, tmp_path, checkpointed):
    """Killed after publishing outputs past its checkpoint for two partitions, the service
    restarts while another member holds one of them (as the killed member does until its
    session times out): it reads back the outputs of the partition it gets, checkpoints, and
    gets the other one later. The checkpoint had moved the output ends past the killed run's
    outputs of that partition, which were then published again (199 duplicate predictions in
    the report of the run this reproduces); so too for a partition the checkpoint had no
    offset of (the killed run had its first messages)."""
    bootstrap = broker.bootstrap_servers
    topic = f"held-elsewhere-{len(checkpointed)}"
    group = f"{topic}-group"
    predictions = f"{topic}-predictions"
    clients.create_topics(bootstrap, {topic: 2, predictions: 1})
    X, y = kh.stream(600, seed=31)
    values = kh.messages(X, y)
    directory, log = tmp_path / "ckpt", tmp_path / "service.log"
    options = [bootstrap, topic, group, directory, "--predictions-topic", predictions,
               "--max-poll-records", "50"]
    # A checkpoint of both partitions, then a run that learns and publishes 200 more of each
    # and is killed once those outputs are delivered, before any checkpoint.
    first = {0: values[:100], 1: values[300:400]}
    for partition in checkpointed:
        kh.produce(bootstrap, topic, first[partition], partition=partition)
    process = kh.start_service(kh.serve_command(*options, "--exit-when-idle", "1"), log)
    assert kh.exit_status(process, 120, log) == 0, kh.tail(log)
    offsets = {str(p): 100 for p in checkpointed}
    assert kh.checkpoint_info(directory)["offsets"][topic] == offsets
    kh.produce(bootstrap, topic, values[100:300], partition=0)
    kh.produce(bootstrap, topic, values[300 + 100 * (1 in checkpointed):], partition=1)
    process = kh.start_service(kh.serve_command(*options, "--checkpoint-every", "100000",
                                                "--checkpoint-interval", "600"), log)
    kh.read_topic(bootstrap, predictions, 600)  # (waits for them)
    kh.kill_service(process)
    assert kh.checkpoint_info(directory)["offsets"][topic] == offsets

    member = _Member(bootstrap, topic, group)
    kh.wait_until(lambda: member.held == {0, 1}, 60, "the other member holds both partitions")
    process = kh.start_service(kh.serve_command(*options, "--checkpoint-every", "20",
                                                "--checkpoint-interval", "0.3"), log)
    try:
        kh.wait_until(lambda: len(member.held) == 1, 60, "a partition each", process, log)
        assert member.held == {1}
        mine = 0
        kh.wait_until(lambda: (kh.checkpoint_info(directory)["offsets"][topic]
                               .get(str(mine)) == 300), 60, "its partition learned", process,
                      log)
        member.leave()
        kh.wait_until(lambda: kh.checkpoint_info(directory)["offsets"][topic]
                      == {"0": 300, "1": 300}, 60, "the other partition learned", process, log)
        read = kh.read_topic(bootstrap, predictions, 600, drain=True)
        outputs = sorted((json.loads(r.value)["partition"], json.loads(r.value)["offset"])
                         for r in read)
        assert outputs == [(p, o) for p in (0, 1) for o in range(300)], \
            f"{len(outputs)} predictions for 600 messages"
    finally:
        member.leave()
        assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)


def _worker(broker, topic, group, directory, worker, *extra):
    from test_kafka_group import worker_command

    return worker_command(broker, topic, group, directory, worker, "--sync-every", "1000",
                          "--checkpoint-interval", "0.3", *extra)


def _summary(broker, sync_topic, total):
    snapshots = kh.wait_until(
        lambda: (s := group_io.read_group(broker.bootstrap_servers, sync_topic, timeout=30))
        and group_io.totals(s.values())["consumed"] >= total and s,
        180, "the whole stream", poll=0.5)
    return snapshots, group_io.totals(snapshots.values())


def test_a_worker_frozen_with_unpublished_work_is_a_zombie_that_counts_nothing(broker,
                                                                              tmp_path):
    total, partitions = 12_000, 4
    topic, group = "aimed-zombie", "aimed-zombie-group"
    clients.create_topics(broker.bootstrap_servers, {topic: partitions})
    X, y = kh.stream(total, d=16, seed=22)
    directories = {w: tmp_path / w for w in ("w0", "w1")}
    logs = {w: tmp_path / f"{w}.log" for w in directories}
    marks = tmp_path / "marks"
    processes = {
        # w0 freezes itself after its 6th batch of at most 100 messages: before its first
        # sync at 1,000, so the work it holds is not in any snapshot.
        "w0": _start(_worker(broker, topic, group, directories["w0"], "w0",
                             "--max-poll-records", "100"), logs["w0"], marks,
                     "batch.learned:stop:6"),
        "w1": kh.start_service(_worker(broker, topic, group, directories["w1"], "w1"),
                               logs["w1"]),
    }
    try:
        kh.wait_until(lambda: all(re.search(r"assigned \[", logs[w].read_text(errors="replace"))
                                  for w in processes if logs[w].exists()) and
                      all(logs[w].exists() for w in processes), 60, "two workers assigned")
        kh.produce(broker.bootstrap_servers, topic, kh.messages(X, y),
                   partition=list(range(partitions)))
        kh.wait_until(lambda: (marks / "batch.learned").exists(), 120, "w0 to freeze",
                      processes["w0"], logs["w0"])
        mark = _mark(marks, "batch.learned")
        assert mark["unpublished"] > 0
        try:
            kh.wait_until(lambda: any(len(re.findall(rf"'{topic}', \d\)", line)) == partitions
                                      for line in re.findall(r"assigned \[.*", logs["w1"]
                                                             .read_text(errors="replace"))),
                          60, "w1 to take every partition over", processes["w1"], logs["w1"])
        finally:
            os.kill(processes["w0"].pid, signal.SIGCONT)
        snapshots, summary = _summary(broker, f"{topic}-{group}-snapshots", total)
        for worker in list(processes):
            status = kh.stop_service(processes.pop(worker), log_path=logs[worker])
            assert status == 0, kh.tail(logs[worker])
    finally:
        for process in processes.values():
            kh.kill_service(process)
    snapshots = group_io.read_group(broker.bootstrap_servers, f"{topic}-{group}-snapshots")
    summary = group_io.totals(snapshots.values())
    assert summary["consumed"] == summary["claimed_messages"] == total
    assert summary["samples_learned"] == total
    assert group_io.group_model(snapshots.values()).n_learned == total
    w0_log = logs["w0"].read_text(errors="replace")
    rolled_back = [int(n) for n in re.findall(r"rolling back (\d+) messages", w0_log)]
    print(f"\naimed zombie: froze holding {mark['unpublished']} unpublished messages; "
          f"rolled back {rolled_back}")
    # What it held when it froze was never counted: dropped when it woke up.
    assert ("no longer counts worker w0" in w0_log or "not publishing at shutdown" in w0_log
            or (rolled_back and max(rolled_back) >= mark["unpublished"]))


def test_a_worker_that_learns_the_group_dropped_it_predicts_nothing_more(broker, tmp_path):
    """A worker frozen past the session timeout learns at its next sync that the group gave
    its partitions to another (its commit is refused). It went on learning and predicting the
    rest of the records its poll had returned, and the new owner predicted them too: each
    was published twice (100 to 352 in streams of 6,000). Now it stops there until the group
    places it again, and only the batch it froze in (predicted before it could know) may be
    published twice."""
    total, partitions = 4_000, 4
    topic, group = "dropped", "dropped-group"
    predictions = f"{topic}-predictions"
    clients.create_topics(broker.bootstrap_servers, {topic: partitions, predictions: 1})
    X, y = kh.stream(total, d=16, seed=24)
    # Produced first, so that polls come back full: the freeze leaves records of its poll.
    kh.produce(broker.bootstrap_servers, topic, kh.messages(X, y),
               partition=list(range(partitions)))
    directories = {w: tmp_path / w for w in ("w0", "w1")}
    logs = {w: tmp_path / f"{w}.log" for w in directories}
    marks = tmp_path / "marks"

    def command(worker):
        from test_kafka_group import worker_command

        return worker_command(broker, topic, group, directories[worker], worker,
                              "--sync-every", "100", "--checkpoint-interval", "0.3",
                              "--max-poll-records", "500", "--predictions-topic", predictions)
    processes = {"w0": _start(command("w0"), logs["w0"], marks, "batch.learned:stop:7"),
                 "w1": kh.start_service(command("w1"), logs["w1"])}
    # (A failure leaves no process behind: the suite's fixture kills what a test started.)
    sync_topic = f"{topic}-{group}-snapshots"
    kh.wait_until(lambda: (marks / "batch.learned").exists(), 120, "w0 to freeze",
                  processes["w0"], logs["w0"])
    mark = _mark(marks, "batch.learned")
    try:
        # w1 takes the partitions over and predicts the rest of the stream, the records left
        # in w0's poll included, before w0 wakes up.
        _summary(broker, sync_topic, total)
    finally:
        os.kill(processes["w0"].pid, signal.SIGCONT)
    kh.wait_until(lambda: "rolling back" in logs["w0"].read_text(errors="replace"), 60,
                  "w0 to be placed again", processes["w0"], logs["w0"])
    kh.stop_when_consumed(processes, logs, lambda: group_io.read_group(
        broker.bootstrap_servers, sync_topic, timeout=30), total)
    summary = group_io.totals(group_io.read_group(broker.bootstrap_servers, sync_topic).values())
    assert summary["consumed"] == summary["claimed_messages"] == total
    assert summary["samples_learned"] == total
    records = kh.read_topic(broker.bootstrap_servers, predictions, total, drain=True)
    sent = collections.Counter((p["partition"], p["offset"])
                               for p in (json.loads(r.value) for r in records))
    twice = sum(n - 1 for n in sent.values())
    w0_log = logs["w0"].read_text(errors="replace")
    print(f"\ndropped worker: froze with {mark['unpublished']} unpublished and {mark['left']} "
          f"more records of its poll; {twice} predictions sent twice")
    assert len(sent) == total
    assert mark["left"] > 0  # (records of its poll were left to predict after the freeze)
    assert "no longer counts worker w0" in w0_log, kh.tail(logs["w0"])
    assert twice <= mark["unpublished"]


def test_a_worker_killed_between_its_snapshot_and_its_local_copy_resumes_exactly(broker,
                                                                                  tmp_path):
    total, partitions = 8_000, 2
    topic, group = "aimed-publish", "aimed-publish-group"
    clients.create_topics(broker.bootstrap_servers, {topic: partitions})
    X, y = kh.stream(total, d=16, seed=23)
    kh.produce(broker.bootstrap_servers, topic, kh.messages(X, y),
               partition=list(range(partitions)))
    directory, log = tmp_path / "w0", tmp_path / "w0.log"
    command = _worker(broker, topic, group, directory, "w0")
    for point, n in [("snapshot.published", 2), ("checkpoint.temp-written", 3)]:
        marks = tmp_path / f"marks-{point}"
        local_before = kh.checkpoint_info(directory)
        process = _start(command, log, marks, f"{point}:kill:{n}")
        assert kh.exit_status(process, 180, log) == -signal.SIGKILL, kh.tail(log)
        assert _mark(marks, point)["reached"] == n
        local = kh.checkpoint_info(directory)
        published = group_io.read_group(broker.bootstrap_servers,
                                        f"{topic}-{group}-snapshots")["w0"]
        if point == "snapshot.published":
            # The broker has a snapshot the local copy does not: the restart must take it.
            assert local is None or local["group"]["seq"] < published.seq
        else:
            assert len(list(directory.glob(".tmp-*.ckpt"))) == 1
            assert local_before is None or local["group"]["seq"] >= local_before["group"]["seq"]
    process = kh.start_service(command, log)
    try:
        snapshots, summary = _summary(broker, f"{topic}-{group}-snapshots", total)
        assert kh.stop_service(process, log_path=log) == 0, kh.tail(log)
    finally:
        if process.poll() is None:
            kh.kill_service(process)
    snapshots = group_io.read_group(broker.bootstrap_servers, f"{topic}-{group}-snapshots")
    summary = group_io.totals(snapshots.values())
    assert summary["consumed"] == summary["claimed_messages"] == total
    assert summary["samples_learned"] == total


def test_a_full_disk_exits_with_the_status_a_supervisor_restarts(broker, tmp_path, capsys,
                                                                 monkeypatch):
    import errno

    from river_advsvm import cli
    from river_advsvm.streams import lifecycle

    topic = "full-disk"
    clients.create_topics(broker.bootstrap_servers, {topic: 1})
    X, y = kh.stream(60, seed=24)
    kh.produce(broker.bootstrap_servers, topic, kh.messages(X, y), partition=0)
    directory = tmp_path / "ckpt"

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)  # every checkpoint write fails as on a full disk
    status = cli.main(["serve", "--bootstrap-servers", broker.bootstrap_servers, "--topic",
                       topic, "--group", "full-disk-group", "--checkpoint-dir", str(directory),
                       "--checkpoint-every", "20", *kh.SERVICE_ARGS, *kh.MODEL_ARGS])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert status == lifecycle.ENVIRONMENT_FAULT, err
    assert err.startswith(f"advsvm serve: {directory / state.CHECKPOINT_FILE}: No space left")
    assert not list(directory.glob("*.ckpt")) and not list(directory.glob(".tmp-*"))
