"""The log formats: plain lines as before, or one JSON object per line."""

from __future__ import annotations

import argparse
import io
import json
import logging
import warnings

import pytest
from hypothesis import given, settings, strategies as st

from river_advsvm.collapse import CollapseWarning
from river_advsvm.streams import logs, metrics


@pytest.fixture
def output():
    stream = io.StringIO()
    yield stream
    logs.reset()


def lines(stream) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_the_metric_fields(output):
    logs.configure("info", "json", stream=output)
    reading = metrics.Reading(messages=12, learned=10, dead_letters={"not_json": 2},
                              lag={("digits", 0): 4}, processing_rate=812.5)
    log = logging.getLogger("river_advsvm.streams.service")
    log.info("checkpoint %d", 3, extra=logs.fields(checkpoint=3, **metrics.log_fields(reading)))
    log.debug("not shown at info")
    (line,) = lines(output)
    assert line["message"] == "checkpoint 3" and line["level"] == "info"
    assert line["logger"] == "river_advsvm.streams.service" and line["time"].endswith("Z")
    assert line["messages_consumed_total"] == 12 and line["messages_learned_total"] == 10
    assert line["dead_letters_total"] == {"not_json": 2}
    assert line["consumer_lag_messages"] == {"digits[0]": 4}
    assert line["processing_rate_messages_per_second"] == 812.5 and line["checkpoint"] == 3


def test_an_exception_stays_on_its_line(output):
    logs.configure("info", "json", stream=output)
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        logging.getLogger("x").exception("failed on %r", "message 7")
    (line,) = lines(output)
    assert line["level"] == "error" and line["message"] == "failed on 'message 7'"
    assert line["exception"].startswith("Traceback")
    assert "ValueError: bad\nthing" in line["exception"]


def test_fields_never_overwrite_the_fixed_keys_nor_break_json(output):
    logs.configure("debug", "json", stream=output)
    logging.getLogger("x").warning("m", extra=logs.fields(message="not this", level=1,
                                                          rate=float("nan"), big=float("inf"),
                                                          obj=object, nested={"a": [1.5]}))
    (line,) = lines(output)
    assert line["message"] == "m" and line["level"] == "warning"
    assert line["field_message"] == "not this" and line["field_level"] == 1
    assert line["rate"] is None and line["big"] is None
    assert line["obj"] == str(object) and line["nested"] == {"a": [1.5]}


def test_plain_stays_the_default_format(output):
    parser = argparse.ArgumentParser()
    logs.add_arguments(parser)
    args = parser.parse_args([])
    assert args.log_format == "plain"
    logs.configure("info", args.log_format, stream=output)
    logger = logging.getLogger("river_advsvm.streams.service")
    logger.info("assigned %s", [0], extra=logs.fields(n=1))
    text = output.getvalue()
    assert text.endswith(" INFO river_advsvm.streams.service: assigned [0]\n") and "{" not in text


def test_configure_replaces_its_own_handler_only(output):
    other = logging.StreamHandler(io.StringIO())
    root = logging.getLogger()
    original = root.level, logging.getLogger("kafka").level
    root.addHandler(other)
    try:
        logs.configure("info", "plain", stream=output)
        logs.configure("info", "json", stream=output)
        assert other in root.handlers
        assert sum(isinstance(h.formatter, logs.JsonFormatter) for h in root.handlers) == 1
        assert logging.getLogger("kafka").level == logging.CRITICAL
        assert root.level == logging.INFO
        logs.configure("debug", "json", stream=output)
        assert logging.getLogger("kafka").level == logging.DEBUG
    finally:
        root.removeHandler(other)
    logs.reset()
    assert (root.level, logging.getLogger("kafka").level) == original
    with pytest.raises(ValueError, match="plain, json"):
        logs.configure("info", "xml")


def test_warnings_are_log_lines_and_every_collapse_is_logged(output):
    """A model's CollapseWarning (and any other warning) is a line of the log's format, with
    its category and message and no source line; each collapse is logged, not just the first;
    `reset` puts Python's own handling back."""
    before = warnings.showwarning
    logs.configure("info", "json", stream=output)
    for _ in range(2):  # the same warning from the same line: a model collapsing again
        warnings.warn("AdvKernelSVM predicts a constant", CollapseWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # shown once per line, as Python's default
        for _ in range(2):
            warnings.warn("overflow in exp", RuntimeWarning)
    assert [(line["level"], line["logger"], line["message"]) for line in lines(output)] == [
        ("warning", "py.warnings", "CollapseWarning: AdvKernelSVM predicts a constant"),
        ("warning", "py.warnings", "CollapseWarning: AdvKernelSVM predicts a constant"),
        ("warning", "py.warnings", "RuntimeWarning: overflow in exp")]
    logs.reset()
    assert warnings.showwarning is before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("after reset", CollapseWarning)
    assert [str(w.message) for w in caught] == ["after reset"] and len(lines(output)) == 3


@settings(max_examples=100, deadline=None)
@given(message=st.text(), values=st.dictionaries(
    st.text(min_size=1, max_size=10).filter(lambda k: not k.startswith("field_")),
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text()), max_size=5))
def test_any_message_and_fields_make_one_json_line(message, values):
    formatter = logs.JsonFormatter()
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s", (message,), None)
    record.__dict__.update(logs.fields(**values))
    text = formatter.format(record)
    assert "\n" not in text
    line = json.loads(text)
    assert line["message"] == message
    for key, value in values.items():
        got = line["field_" + key if key in ("time", "level", "logger", "message", "exception")
                   else key]
        if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
            assert got is None
        else:
            assert got == value


@pytest.mark.parametrize("log_format", ["plain", "json"])
def test_the_line_a_failed_serve_stops_with_is_in_the_log_format(tmp_path, capsys, log_format):
    """The one line of a status 2 to 5 was plain text under `--log-format json`, the only line
    of the log a collector could not parse."""
    from river_advsvm.streams import cli

    corrupt = tmp_path / "ckpt"
    corrupt.mkdir()
    (corrupt / "checkpoint.ckpt").write_bytes(b"not a checkpoint")
    status = cli.main(["--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--group", "g",
                       "--checkpoint-dir", str(corrupt), "--log-format", log_format])
    assert status == 2
    last = capsys.readouterr().err.splitlines()[-1]
    if log_format == "plain":
        assert last.startswith("advsvm serve: ") and "checkpoint.ckpt" in last
    else:
        line = json.loads(last)
        assert line["level"] == "critical" and line["exit_status"] == 2
        assert line["logger"] == "advsvm serve" and "checkpoint.ckpt" in line["message"]
