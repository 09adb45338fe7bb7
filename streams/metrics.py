"""Prometheus metrics and health checks of `advsvm serve`, on one small HTTP port.

Nothing is counted here: at every scrape the server asks the service for a `Reading` (a
callback, run on the HTTP thread) and turns it into metrics, so the numbers are the service's
own counters, those its checkpoint keeps, and cannot drift from them. The same port answers

- `/metrics`: the Prometheus text format (names below);
- `/healthz`: liveness, 200 while the service's loop polled Kafka less than
  `liveness_timeout` seconds ago (503 otherwise: the loop is stuck);
- `/readyz`: readiness, 200 once the service has its partitions and its checkpoint
  restored, while it holds a connection to a broker (503 with the reason otherwise: after
  `session.BROKERS_AWAY_WARNING` seconds without one).

The callback must only read: it runs while the service works. Plain numbers and copies of
small dicts are safe to read from another thread; the monitor's rolling windows are read with
a retry (see `Reading.from_state`).

`log_fields` gives a reading under the metric names (without the `advsvm_` prefix), so a JSON
log line and a scrape say the same thing in the same words.

Metrics (counters end in `_total`; they come from the checkpoint, so they survive restarts):

========================================================  ======================================
advsvm_messages_consumed_total                            records read, valid or not
advsvm_messages_learned_total                             labelled messages learned
advsvm_messages_predicted_total                           messages predicted (every valid one)
advsvm_predictions_correct_total                          learned ones predicted right first
advsvm_dead_letters_total{code}                           invalid messages, by reason
advsvm_checkpoints_written_total                          checkpoints written
advsvm_topic_resets_total                                 topics recreated, logs ended early
advsvm_monitor_skipped_total                              messages the monitor cannot attack
advsvm_monitor_alerts_total{kind}                         monitor alerts since start, by kind
advsvm_group_syncs_total                                  snapshots published (one worker)
advsvm_group_folds_total                                  peer snapshots averaged in
advsvm_last_checkpoint_age_seconds                        since the last checkpoint
advsvm_messages_since_checkpoint                          processed since, learned again if lost
advsvm_consumer_lag_messages{topic,partition}             messages behind the high watermark
advsvm_assigned_partitions                                partitions this service reads
advsvm_processing_rate_messages_per_second                messages per second while busy
advsvm_model_support_vectors                              support vectors (kernel models)
advsvm_model_random_features                              random features (kernel models)
advsvm_model_inputs                                       input columns the model knows
advsvm_model_samples                                      samples in the model (group: merged)
advsvm_model_average_restarts_total                       the model's average started over
advsvm_model_collapsed                                    1 while its decisions are one class
advsvm_monitor_{clean,robust,certified}_accuracy_ratio    the monitor's rolling accuracies
advsvm_group_peers                                        peer snapshots seen
advsvm_seconds_since_last_poll                            what liveness looks at
advsvm_ready                                              1 when ready, else 0
========================================================  ======================================

A value the service does not have (no monitor, no group, a model without support vectors)
is left out rather than reported as 0.

Examples
--------

>>> import urllib.request
>>> from river_advsvm.streams.metrics import MetricsServer, Reading
>>> server = MetricsServer(lambda: Reading(messages=3, learned=2, dead_letters={"not_json": 1},
...                                        seconds_since_poll=0.1, ready=True)).start()
>>> page = urllib.request.urlopen(server.url + "/metrics").read().decode()
>>> [line for line in page.splitlines() if line.startswith("advsvm_dead_letters_total")]
['advsvm_dead_letters_total{code="not_json"} 1.0']
>>> urllib.request.urlopen(server.url + "/readyz").status
200
>>> server.stop()

"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import socket
import threading
import time
import typing
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from river_advsvm.alerts import ALERT_KINDS
from river_advsvm.streams.kafka import REASONS

__all__ = ["MetricsServer", "Reading", "ServiceCollector", "add_arguments", "from_args",
           "log_fields", "partition_lag", "read_session"]

log = logging.getLogger(__name__)

PREFIX = "advsvm_"


@dataclasses.dataclass
class Reading:
    """What the service reports at one instant. None: the service does not have that value.

    Counters (cumulative): `messages`, `learned`, `correct`, `predicted`, `checkpoints`,
    `topic_resets`, `monitor_skipped`, `dead_letters` (code -> count), `alerts` (kind -> count),
    `group_syncs`, `group_folds`. Gauges: everything else; `lag` maps (topic, partition) to messages
    behind. `seconds_since_poll` is counted from the service's start until its first poll.
    `collapsed` is the model's own verdict that its decisions have turned constant (`collapsed`).
    """

    messages: int = 0
    learned: int = 0
    correct: int = 0
    predicted: int = 0
    dead_letters: dict = dataclasses.field(default_factory=dict)
    checkpoints: int = 0
    topic_resets: int = 0
    monitor_skipped: int = 0
    alerts: dict = dataclasses.field(default_factory=dict)
    group_syncs: int | None = None
    group_folds: int | None = None
    last_checkpoint_age_seconds: float | None = None
    since_checkpoint: int = 0
    lag: dict = dataclasses.field(default_factory=dict)
    assigned_partitions: int = 0
    processing_rate: float | None = None
    support_vectors: int | None = None
    random_features: int | None = None
    inputs: int | None = None
    model_samples: int | None = None
    collapsed: bool | None = None
    average_restarts: int | None = None
    clean_accuracy: float | None = None
    robust_accuracy: float | None = None
    certified_accuracy: float | None = None
    group_peers: int | None = None
    seconds_since_poll: float | None = None
    ready: bool = False
    not_ready_reason: str = "starting"

    @classmethod
    def from_state(cls, state, monitor=None, **others) -> Reading:
        """A reading of a `river_advsvm.streams.state.ServiceState` (counters and model) and a
        `RobustnessMonitor` (rolling accuracies); `others` are the remaining fields."""
        counters = state.counters
        model = state.model
        fields = dict(
            messages=counters["consumed"], learned=counters["learned"],
            correct=counters["learned_correct"], predicted=counters["predicted"],
            # Every code (and, with a monitor, every kind) from the start, at 0: a series that
            # appears with its first count shows Prometheus no increase.
            dead_letters={**dict.fromkeys(REASONS, 0), **counters["dead_letters_by_code"]},
            alerts={**dict.fromkeys(ALERT_KINDS if monitor is not None else (), 0),
                    **counters.get("alerts_by_kind", {})},
            checkpoints=counters["checkpoints"], topic_resets=counters["topic_resets"],
            monitor_skipped=counters["monitor_skipped"],
            support_vectors=_count(model, "n_support_vectors"),
            random_features=_count(model, "n_features"),
            inputs=_count(model, "n_inputs"),
            model_samples=_count(model, "n_learned"),
            collapsed=_collapsed(model),
            average_restarts=_count(model, "average_restarts"),
        )
        if state.group is not None:
            fields["group_syncs"] = state.group["seq"]
        if monitor is not None:
            now = _monitor_snapshot(monitor)
            fields.update(clean_accuracy=now.get("clean_accuracy"),
                          robust_accuracy=now.get("robust_accuracy"),
                          certified_accuracy=now.get("certified_accuracy"))
        fields.update(others)
        return cls(**fields)


def _count(model, name: str) -> int | None:
    value = getattr(model, name, None)
    return None if value is None else int(value)


def _collapsed(model) -> bool | None:
    """The model's `collapsed` (None for a model without one; its verdicts are replaced whole,
    never changed in place, so a read while the service learns is safe)."""
    value = getattr(model, "collapsed", None)
    return None if value is None else bool(value)


def _monitor_snapshot(monitor) -> dict:
    snapshot = getattr(monitor, "snapshot", None)
    if snapshot is None:  # a monitor without rolling accuracies
        return {}
    # The service may be updating the windows right now: a read that raced a write is retried.
    for _ in range(3):
        try:
            return snapshot()
        except (RuntimeError, ValueError, ZeroDivisionError):
            continue
    return {}


class _Metric(typing.NamedTuple):
    name: str  # as exposed, counters with `_total`
    kind: str  # "counter" or "gauge"
    help: str
    value: typing.Callable[[Reading], typing.Any]  # a number, None, or {label values: number}
    labels: tuple = ()


def _labelled(mapping: dict) -> dict:
    return {(str(k),): v for k, v in sorted(mapping.items(), key=lambda kv: str(kv[0]))}


def _lag(reading: Reading) -> dict:
    return {(topic, str(partition)): lag for (topic, partition), lag in sorted(reading.lag.items())}


METRICS = [
    _Metric("advsvm_messages_consumed_total", "counter", "Records read from the input topic, "
            "valid or not.", lambda r: r.messages),
    _Metric("advsvm_messages_learned_total", "counter", "Labelled messages learned "
            "(each was predicted first).", lambda r: r.learned),
    _Metric("advsvm_messages_predicted_total", "counter", "Messages predicted (every valid "
            "one, labelled or not).", lambda r: r.predicted),
    _Metric("advsvm_predictions_correct_total", "counter", "Learned messages the model had "
            "predicted right before learning them.", lambda r: r.correct),
    _Metric("advsvm_dead_letters_total", "counter", "Invalid messages, by reason.",
            lambda r: _labelled(r.dead_letters), ("code",)),
    _Metric("advsvm_checkpoints_written_total", "counter", "Checkpoints written.",
            lambda r: r.checkpoints),
    _Metric("advsvm_topic_resets_total", "counter", "Input topics found recreated, and "
            "partitions whose log ended before the checkpointed offset.",
            lambda r: r.topic_resets),
    _Metric("advsvm_monitor_skipped_total", "counter", "Labelled messages the robustness "
            "monitor could not attack (outside the box of --monitor-bounds); they are learned.",
            lambda r: r.monitor_skipped),
    _Metric("advsvm_monitor_alerts_total", "counter", "Robustness monitor alerts since the "
            "service started, by kind.", lambda r: _labelled(r.alerts), ("kind",)),
    _Metric("advsvm_group_syncs_total", "counter", "Snapshots this worker published to its "
            "group.", lambda r: r.group_syncs),
    _Metric("advsvm_group_folds_total", "counter", "Peer snapshots averaged into this worker's "
            "model.", lambda r: r.group_folds),
    _Metric("advsvm_last_checkpoint_age_seconds", "gauge", "Seconds since the last checkpoint "
            "was written.", lambda r: r.last_checkpoint_age_seconds),
    _Metric("advsvm_messages_since_checkpoint", "gauge", "Messages processed since the last "
            "checkpoint (learned again after a crash).", lambda r: r.since_checkpoint),
    _Metric("advsvm_consumer_lag_messages", "gauge", "Messages between the service's position "
            "and the partition's high watermark.", _lag, ("topic", "partition")),
    _Metric("advsvm_assigned_partitions", "gauge", "Partitions assigned to this service.",
            lambda r: r.assigned_partitions),
    _Metric("advsvm_processing_rate_messages_per_second", "gauge", "Messages processed per "
            "second in this run, idle time excluded.", lambda r: r.processing_rate),
    _Metric("advsvm_model_support_vectors", "gauge", "Support vectors in the model.",
            lambda r: r.support_vectors),
    _Metric("advsvm_model_random_features", "gauge", "Random features in the model.",
            lambda r: r.random_features),
    _Metric("advsvm_model_inputs", "gauge", "Input columns the model knows.",
            lambda r: r.inputs),
    _Metric("advsvm_model_samples", "gauge", "Samples the model has learned (in a group, the "
            "merged model's).", lambda r: r.model_samples),
    _Metric("advsvm_model_collapsed", "gauge", "1 while the model's decisions have collapsed "
            "to one class, else 0.", lambda r: None if r.collapsed is None else int(r.collapsed)),
    _Metric("advsvm_model_average_restarts_total", "counter", "Times the average of the "
            "model's iterates started over from its last iterate, which had clearly been "
            "deciding better (the stream changed, or the average lagged for another reason).",
            lambda r: r.average_restarts),
    _Metric("advsvm_monitor_clean_accuracy_ratio", "gauge", "The monitor's rolling accuracy "
            "on the labelled messages.", lambda r: r.clean_accuracy),
    _Metric("advsvm_monitor_robust_accuracy_ratio", "gauge", "The monitor's rolling accuracy "
            "on attacked versions of the sampled messages.", lambda r: r.robust_accuracy),
    _Metric("advsvm_monitor_certified_accuracy_ratio", "gauge", "Share of the monitor's "
            "sampled messages certified at the attack radius.", lambda r: r.certified_accuracy),
    _Metric("advsvm_group_peers", "gauge", "Peer snapshots this worker has seen.",
            lambda r: r.group_peers),
    _Metric("advsvm_seconds_since_last_poll", "gauge", "Seconds since the service's loop last "
            "polled Kafka (since its start before the first poll).",
            lambda r: r.seconds_since_poll),
    _Metric("advsvm_ready", "gauge", "1 once partitions are assigned and the checkpoint "
            "restored, else 0.", lambda r: int(r.ready)),
]


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


class ServiceCollector:
    """A prometheus_client collector that turns one `read()` per scrape into the metrics."""

    def __init__(self, read: typing.Callable[[], Reading]):
        self.read = read

    def describe(self):
        # Names only, so that registering does not call `read` (the service may not be ready).
        for metric in METRICS:
            yield _family(metric)

    def collect(self):
        reading = self.read()
        for metric in METRICS:
            value = metric.value(reading)
            family = _family(metric)
            if isinstance(value, dict):
                for labels, number in value.items():
                    if _present(number):
                        family.add_metric(list(labels), float(number))
            elif _present(value):
                family.add_metric([], float(value))
            else:
                continue
            yield family


def _family(metric: _Metric):
    cls = CounterMetricFamily if metric.kind == "counter" else GaugeMetricFamily
    return cls(metric.name, metric.help, labels=list(metric.labels))


def log_fields(reading: Reading) -> dict:
    """The reading as log fields named like the metrics (`messages_consumed_total`, ...):
    labelled metrics become objects (`{"not_json": 3}`, lag as `{"topic[0]": 5}`); values the
    service does not have are left out."""
    fields = {}
    for metric in METRICS:
        value = metric.value(reading)
        name = metric.name[len(PREFIX):]
        if isinstance(value, dict):
            if len(metric.labels) == 2:  # topic, partition
                value = {f"{topic}[{partition}]": v for (topic, partition), v in value.items()}
            else:  # (the counts that are not 0: the series stand at 0 for Prometheus alone)
                value = {labels[0]: v for labels, v in value.items() if v}
            fields[name] = value
        elif _present(value):
            fields[name] = value
    return fields


def partition_lag(consumer, offsets: dict, assignment) -> dict:
    """Messages behind, per assigned (topic, partition): the high watermark the last fetch
    reported minus the next offset to process (`offsets`: topic -> {partition: offset}, as the
    checkpoint keeps them; the consumer's position where it has none, or where it is ahead:
    past offsets that hold no message, such as a transaction's commit marker). Partitions
    without a fetch yet are left out. Call it on the thread that polls: a consumer is not
    thread-safe."""
    from kafka.errors import KafkaError

    lag = {}
    for tp in sorted(assignment):
        try:
            high = consumer.highwater(tp)
            if high is None:
                continue
        except KafkaError:  # e.g. no longer assigned (a rebalance in between)
            continue
        position = offsets.get(tp.topic, {}).get(tp.partition)
        try:
            fetched = consumer.position(tp, timeout_ms=0)  # known once fetched: no request
        except KafkaError:
            fetched = None
        if fetched is not None and (position is None or fetched > position):
            position = fetched
        if position is not None:
            lag[(tp.topic, tp.partition)] = max(int(high) - int(position), 0)
    return lag


def read_session(session) -> Reading:
    """The reading of a running service's `river_advsvm.streams.session.Session`, from any thread.

    It only reads: the state's counters and model (replaced whole on a reload, so taken once),
    the run's `Progress` (the lag is replaced whole at each poll), the monitor's windows (read
    with a retry) and the checkpoint file's modification time (its age)."""
    import os
    import time

    from river_advsvm.streams import state as state_io

    state, progress = session.state, session.progress
    now = time.monotonic()
    try:
        written = os.stat(state_io.checkpoint_path(session.config.checkpoint_dir)).st_mtime
        age = max(0.0, time.time() - written)
    except OSError:
        age = None  # no checkpoint yet
    last_poll = progress.last_poll if progress.last_poll is not None else progress.started
    if session.stopping.is_set():
        reason = "stopping"
    elif session.consumer is None:  # (the start-up: a broker to answer, the checkpoint)
        reason = "starting: waiting for a Kafka broker to answer"
    elif progress.restoring:
        reason = "positioning the assigned partitions from the group's snapshots"
    elif not progress.assigned_once:
        reason = "waiting for the consumer group to assign partitions"
    elif progress.rebalancing_since is not None:
        reason = "the consumer group is rebalancing"
    elif progress.brokers_away_said:
        reason = "no connection to any Kafka broker"
    else:
        reason = ""
    return Reading.from_state(
        state, monitor=session.learner.monitor, group_folds=progress.group_folds,
        group_peers=progress.group_peers, lag=dict(progress.lag),
        assigned_partitions=len(session.assignment), processing_rate=progress.throughput(),
        last_checkpoint_age_seconds=age, since_checkpoint=progress.since_checkpoint,
        seconds_since_poll=now - last_poll,
        ready=not reason, not_ready_reason=reason or "ready")


# -- the HTTP server ------------------------------------------------------------------------------


#: Connections served at once (one thread each); more are closed at once, unanswered: a
#: flood of connections costs at most this many threads.
MAX_CONNECTIONS = 16
#: Connections the kernel queues while all of them are busy (the listen backlog).
LISTEN_BACKLOG = 128
#: A connection that sends nothing for this long is closed, and one whose request has not
#: arrived whole after `REQUEST_DEADLINE` (a client that trickles bytes holds no slot for long).
IDLE_TIMEOUT = 5.0
REQUEST_DEADLINE = 10.0
#: The most bytes of one request (request line and headers); a GET has no body.
MAX_REQUEST_BYTES = 16 * 2**10


class _Server(WSGIServer):
    """A WSGI server with at most `MAX_CONNECTIONS` connections at once, a thread each."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True  # a slow scraper never holds the service's exit

    def server_activate(self):
        super().server_activate()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            log.debug("metrics: %d connections already served; closing one from %s",
                      MAX_CONNECTIONS, client_address[0])
            self.shutdown_request(request)
            return
        threading.Thread(target=self._serve, args=(request, client_address), daemon=True,
                         name="metrics-connection").start()

    def _serve(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        except Exception as error:  # noqa: BLE001 - a connection's fault ends that connection
            self.handle_error(request, client_address, error)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def handle_error(self, request, client_address, error=None):
        # socketserver would print a traceback to stderr, into the service's log stream.
        log.debug("metrics: connection from %s ended: %s", client_address[0],
                  _one_line(error) if error is not None else "error")


class _IPv6Server(_Server):
    address_family = socket.AF_INET6


class _CappedReader:
    """The request's stream, ending after `MAX_REQUEST_BYTES` (the request is then answered
    431) and failing with `TimeoutError` after `REQUEST_DEADLINE` seconds."""

    def __init__(self, raw):
        self._raw, self._left = raw, MAX_REQUEST_BYTES
        self._deadline = time.monotonic() + REQUEST_DEADLINE

    @property
    def exhausted(self) -> bool:
        return self._left <= 0

    def readline(self, size: int = -1) -> bytes:
        return self._take(self._raw.readline, size)

    def read(self, size: int = -1) -> bytes:
        return self._take(self._raw.read, size)

    def _take(self, reader, size) -> bytes:
        """At most `size` bytes (all that is left if none) from `reader`, within the
        request's byte budget and deadline."""
        if time.monotonic() > self._deadline:
            raise TimeoutError(f"no whole request within {REQUEST_DEADLINE:g}s")
        size = self._left if size is None or size < 0 else min(size, self._left)
        data = reader(size) if size else b""
        self._left -= len(data)
        return data

    def __getattr__(self, name):
        return getattr(self._raw, name)


class _Quiet:
    """Where wsgiref writes the traceback of an application error: nowhere (the application
    logs its own errors, in one line)."""

    def write(self, text):
        pass

    def flush(self):
        pass


class _QuietHandler(WSGIRequestHandler):
    timeout = IDLE_TIMEOUT  # on the connection's socket: an idle client is dropped

    def setup(self):
        super().setup()
        self.rfile = _CappedReader(self.rfile)

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if self.rfile.exhausted:
            self.send_error(431, f"the request is over {MAX_REQUEST_BYTES} bytes")
            return False
        return True

    def get_stderr(self):
        return _Quiet()

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        log.debug("metrics: " + format, *args)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300] or type(error).__name__


class MetricsServer:
    """`/metrics`, `/healthz` and `/readyz` of one service, on a thread of its own.

    Parameters
    ----------
    read
        Returns the service's `Reading` now; called once per request.
    host
        Address to bind; loopback unless the metrics must be reachable from elsewhere (a
        container: 0.0.0.0).
    port
        TCP port; 0 picks a free one (see `port` after `start`).
    liveness_timeout
        `/healthz` fails once the loop has not polled for this many seconds.

    Each server has its own `CollectorRegistry`, so several services (or tests) in one process
    do not mix their metrics.
    """

    def __init__(self, read: typing.Callable[[], Reading], host: str = "127.0.0.1",
                 port: int = 0, liveness_timeout: float = 120.0):
        if not liveness_timeout > 0:  # NaN too: `age <= nan` would fail every probe
            raise ValueError("the liveness timeout must be > 0 seconds")
        self.read = read
        self.host = host
        self.port = port
        self.liveness_timeout = liveness_timeout
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(ServiceCollector(read))
        self._metrics_app = make_wsgi_app(self.registry)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> MetricsServer:
        """Bind and serve; `ValueError` with one line if the address cannot be bound."""
        server_class = _IPv6Server if ":" in self.host else _Server
        try:
            self._server = make_server(self.host, self.port, self._app, server_class,
                                       handler_class=_QuietHandler)
        except OSError as error:
            raise ValueError(f"cannot serve metrics on {self.host}:{self.port}: "
                             f"{error.strerror or error}") from None
        except (TypeError, ValueError) as error:  # a NUL, or not UTF-8: "encoding of hostname"
            raise ValueError(f"cannot serve metrics on {self.host!r}: not a host name or "
                             f"address ({error})") from None
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.25,),
                                        name="metrics", daemon=True)
        self._thread.start()
        log.info("metrics on %s/metrics, health on /healthz and /readyz", self.url)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(10)
            self._server = None

    def live(self, reading: Reading) -> tuple[bool, dict]:
        age = reading.seconds_since_poll
        ok = age is None or age <= self.liveness_timeout
        return ok, {"live": ok, "seconds_since_last_poll": age,
                    "liveness_timeout_seconds": self.liveness_timeout}

    @staticmethod
    def ready(reading: Reading) -> tuple[bool, dict]:
        body = {"ready": reading.ready, "assigned_partitions": reading.assigned_partitions}
        if not reading.ready:
            body["reason"] = reading.not_ready_reason
        return reading.ready, body

    def _app(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            try:
                return self._metrics_app(environ, start_response)
            except Exception as error:  # noqa: BLE001 - a failing read is a 500, not a dead thread
                log.error("metrics: the service could not be read: %s", _one_line(error))
                return _respond(start_response, 500, {"error": "the service could not be read"})
        if path in ("/healthz", "/readyz"):
            try:
                reading = self.read()
            except Exception as error:  # noqa: BLE001
                log.error("health: the service could not be read: %s", _one_line(error))
                return _respond(start_response, 503, {"error": _one_line(error)})
            ok, body = (self.live if path == "/healthz" else self.ready)(reading)
            return _respond(start_response, 200 if ok else 503, body)
        return _respond(start_response, 404, {"error": "not found: try /metrics, /healthz, "
                                                       "/readyz"})


def _respond(start_response, status: int, body: dict):
    reasons = {200: "OK", 404: "Not Found", 500: "Internal Server Error",
               503: "Service Unavailable"}
    data = (json.dumps(body) + "\n").encode()
    start_response(f"{status} {reasons[status]}", [("Content-Type", "application/json"),
                                                   ("Content-Length", str(len(data)))])
    return [data]


# -- command line ----------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `--metrics-port`, `--metrics-host` and `--liveness-timeout` in a group of their own."""
    group = parser.add_argument_group(
        "metrics and health (Prometheus)",
        "One HTTP port serves /metrics (Prometheus), /healthz (liveness: the loop polled "
        "Kafka, or waited for it on purpose, recently) and /readyz (readiness: partitions "
        "assigned and positioned from the checkpoint). Not with --workers (one port each).")
    group.add_argument("--metrics-port", type=_port, default=0, metavar="PORT",
                       help="serve metrics and health on this port (default 0: off)")
    group.add_argument("--metrics-host", default="127.0.0.1", metavar="ADDRESS",
                       help="address to bind (default 127.0.0.1; 0.0.0.0 in a container)")
    group.add_argument("--liveness-timeout", type=float, default=120.0, metavar="SECONDS",
                       help="/healthz answers 503 when the loop has not polled for this "
                       "long (default 120); a frozen process does not answer at all")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port < 65536:
        raise argparse.ArgumentTypeError(f"a port is 0..65535, not {port}")
    return port


def from_args(args: argparse.Namespace, read: typing.Callable[[], Reading]):
    """The started `MetricsServer` the flags ask for, or None with `--metrics-port 0`."""
    if not args.metrics_port:
        return None
    return MetricsServer(read, args.metrics_host, args.metrics_port,
                         args.liveness_timeout).start()
