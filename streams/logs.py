"""The service's log format: plain lines for people (the default), or one JSON object per line
for log collectors (`--log-format json`).

A JSON line holds `time` (UTC, RFC 3339), `level`, `logger` and `message`, the traceback as
`exception` when there is one, and the fields the call passed with `extra=fields(...)`:

    log.info("checkpoint %d", n, extra=logs.fields(**metrics.log_fields(reading)))

gives `{"time": ..., "level": "info", ..., "messages_consumed_total": 1000, ...}`: the
service's numbers under the same names as its Prometheus metrics. The plain format shows
the message only, as before.

Examples
--------

>>> import io, json, logging
>>> from river_advsvm.streams import logs
>>> stream = io.StringIO()
>>> logs.configure("info", "json", stream=stream)
>>> logging.getLogger("river_advsvm.streams.service").info("checkpoint %d", 3,
...                                           extra=logs.fields(learned_total=7))
>>> line = json.loads(stream.getvalue())
>>> line["message"], line["level"], line["learned_total"]
('checkpoint 3', 'info', 7)
>>> logs.reset()

"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import logging
import math
import sys
import warnings

from river_advsvm.collapse import CollapseWarning

__all__ = ["FORMATS", "JsonFormatter", "add_arguments", "configure", "fields", "reset"]

FORMATS = ("plain", "json")
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Libraries whose retry chatter during a broker outage would drown the service's own lines.
QUIET = ("kafka",)

_FIELDS = "advsvm_fields"
_RESERVED = ("time", "level", "logger", "message", "exception")


def fields(**values) -> dict:
    """`extra=` for a log call: these key/values become fields of the JSON line."""
    return {_FIELDS: values}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line. The record's fields (from `fields`) follow
    the fixed keys; a field named like a fixed key is renamed `field_<name>`."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
            .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in getattr(record, _FIELDS, {}).items():
            line[f"field_{key}" if key in _RESERVED else key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["exception"] = self.formatStack(record.stack_info)
        return json.dumps(_finite(line), default=str, ensure_ascii=False, allow_nan=False)


def _finite(value):
    """NaN and infinities are not JSON: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


_installed: logging.Handler | None = None
_previous_levels: dict[str, int] = {}  # logger name ("" for the root) -> level before configure
_warnings = contextlib.ExitStack()  # the warning filters and display before configure
#: Python warnings are logged by this logger (the name `logging.captureWarnings` uses).
WARNINGS_LOGGER = "py.warnings"


def _log_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """`warnings.showwarning` while configured: a warning (a model's `CollapseWarning`, say)
    becomes a line of the log's format, its category and message (not the source line Python
    prints)."""
    logging.getLogger(WARNINGS_LOGGER).warning("%s: %s", category.__name__, message)


def configure(level: str = "info", log_format: str = "plain", stream=None) -> None:
    """Send the process's logs to `stream` (stderr) in `log_format`, at `level` and above.

    Replaces the handler a previous call installed (and only that one), so it can be called
    again. Kafka's client library is silent unless `level` is debug: its messages repeat what
    the service says itself (connection attempts during an outage, say). Python warnings
    become warning lines of the same format, and a model's `CollapseWarning` is logged each
    time the model collapses (the model warns as it turns constant; Python's default would
    show only the first time).
    """
    global _installed
    if log_format not in FORMATS:
        raise ValueError(f"the log format is one of {', '.join(FORMATS)}, not {log_format!r}")
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter() if log_format == "json"
                         else logging.Formatter(PLAIN_FORMAT))
    root = logging.getLogger()
    reset()
    for name in ("", *QUIET):
        _previous_levels[name] = logging.getLogger(name).level
    root.addHandler(handler)
    root.setLevel(level.upper())
    _installed = handler
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.DEBUG if level == "debug" else logging.CRITICAL)
    _warnings.enter_context(warnings.catch_warnings())  # what `reset` puts back
    warnings.showwarning = _log_warning
    warnings.simplefilter("always", CollapseWarning)


def reset() -> None:
    """Remove the handler `configure` installed, and put the levels and the handling of
    warnings it set back."""
    global _installed
    if _installed is not None:
        logging.getLogger().removeHandler(_installed)
        _installed = None
    for name, level in _previous_levels.items():
        logging.getLogger(name).setLevel(level)
    _previous_levels.clear()
    _warnings.close()


def fatal_line(program: str, message: str, log_format: str, status: int) -> str:
    """The line a command prints as it stops with exit status `status`: `program: message`,
    or in the json format one object (level "critical", the status in `exit_status`), so that
    a log collector parses the last line as it parsed the others."""
    if log_format != "json":
        return f"{program}: {message}"
    record = logging.LogRecord(program, logging.CRITICAL, "", 0, message, None, None)
    setattr(record, _FIELDS, {"exit_status": status})
    return JsonFormatter().format(record)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `--log-format plain|json`."""
    parser.add_argument("--log-format", choices=FORMATS, default="plain",
                        help="plain lines (default) or one JSON object per line, with the "
                        "service's numbers under the names of its metrics")
