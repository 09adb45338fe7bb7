"""The settings of `advsvm serve` besides the model: `ServiceConfig`.

Examples
--------

>>> from river_advsvm.streams.config import ServiceConfig
>>> config = ServiceConfig(bootstrap_servers="127.0.0.1:9092", topic="digits", group="svm",
...                        checkpoint_dir="/tmp/svm", sync_every=500)
>>> config.sync_topic, config.grouped
('digits-svm-snapshots', True)

"""

from __future__ import annotations

import dataclasses
import math
import re

from river_advsvm import inputs, margin
from river_advsvm.labels import as_label
from river_advsvm.streams import state as state_io
from river_advsvm.streams.clients import MAX_SESSION_TIMEOUT_MS, MIN_HEARTBEAT_MS, Clients
from river_advsvm.streams.security import SecuritySettings

__all__ = ["MAX_BLAS_THREADS", "ServiceConfig"]

#: The most BLAS threads `blas_threads` (`--blas-threads`) asks for: beyond any machine's cores.
MAX_BLAS_THREADS = 4096


@dataclasses.dataclass
class ServiceConfig:
    """Everything `advsvm serve` needs besides the model.

    Parameters
    ----------
    bootstrap_servers
        The brokers to connect to: `HOST:PORT[,HOST:PORT]`.
    topic
        The input topic.
    group
        The Kafka consumer group.
    checkpoint_dir
        Directory of the checkpoint file (created if missing).
    predictions_topic
        Where each valid message's prediction goes; None drops them.
    alerts_topic
        Where the alerts of the service's monitor go (`Service(..., monitor=...)`); None drops
        them.
    dead_letter_topic
        Where invalid messages go, with the reason; None drops them (they are still counted
        and logged).
    checkpoint_every
        Checkpoint after this many messages.
    checkpoint_interval
        Checkpoint after this many seconds with progress, whatever the count.
    exit_when_idle
        Stop cleanly (final checkpoint) after this many seconds without a message, counted
        from the first partition assignment, once no assigned partition has messages left
        to read; None runs until SIGTERM.
    max_message_bytes
        Larger messages are dead letters.
    width
        Number of features of array-form `x`; None takes it from the first learned array.
    labels
        Pin the two classes; any other label is a dead letter. None: the first two labels seen.
    session_timeout_ms
        The consumer group's session timeout: a worker silent for this long loses its
        partitions. A short one makes restarts rejoin faster.
    max_poll_records
        Records per poll, learned as one batch.
    poll_timeout_ms
        How long one poll waits for records.
    shutdown_timeout
        How long the stop may wait for the broker, all told: the final flush and checkpoint,
        leaving the consumer group, closing the producer.
    connect_timeout
        At start-up, how long to wait for a first broker to answer before giving up
        (`river_advsvm.streams.service.BrokerUnreachable`). Later outages are waited out.
    sync_every
        None: a standalone service. A number: this service is one worker of the group; every
        `sync_every` messages (or `checkpoint_interval` seconds with progress) it averages its
        peers' snapshots in and publishes its own (this replaces `checkpoint_every`).
    sync_topic
        The group's snapshot topic; by default `<topic>-<group>-snapshots`.
    worker_id
        This worker's key in the snapshot topic; by default kept in `checkpoint_dir/worker-id`.
    group_model
        How a worker folds its peers' support vectors: 'basis' (coefficients over the basis
        the group shares, `river_advsvm.streams.group_basis`) or 'union' (their vectors, then
        budget maintenance). 'compact' random features average their coefficients either way.
    basis_refresh_every
        With 'basis': a worker proposes a new basis after this many of its folds on one.
    blas_threads
        BLAS threads in the service (threadpoolctl); None or 0 leaves BLAS as it is.
    security
        TLS and SASL settings of every Kafka client
        (`river_advsvm.streams.security.SecuritySettings`; plaintext by default). At start-up the
        service checks them against the cluster (`river_advsvm.streams.connection_check`) and stops
        with `river_advsvm.streams.lifecycle.SettingsRefused` if the cluster refuses them.
    client_settings
        Other extra kafka-python settings for every Kafka client of the service: see
        `river_advsvm.streams.clients.Clients` (security settings go in `security`).

    """

    bootstrap_servers: str
    topic: str
    group: str
    checkpoint_dir: str
    predictions_topic: str | None = None
    alerts_topic: str | None = None
    dead_letter_topic: str | None = None
    checkpoint_every: int = 1000
    checkpoint_interval: float = 10.0
    exit_when_idle: float | None = None
    max_message_bytes: int = 2**20
    width: int | None = None
    labels: list | None = None
    session_timeout_ms: int = 10000
    max_poll_records: int = 500
    poll_timeout_ms: int = 200
    shutdown_timeout: float = 30.0
    connect_timeout: float = 30.0
    sync_every: int | None = None
    sync_topic: str | None = None
    worker_id: str | None = None
    group_model: str = "basis"
    basis_refresh_every: int = 1
    blas_threads: int | None = 1
    security: SecuritySettings = dataclasses.field(default_factory=SecuritySettings)
    client_settings: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        Clients(self.bootstrap_servers, self.client_settings, security=self.security)  # checks
        # `not x > 0` rather than `x <= 0`: NaN is refused too.
        if self.checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1, got {self.checkpoint_every!r}")
        if not self.checkpoint_interval > 0:
            raise ValueError(f"checkpoint_interval must be > 0, got {self.checkpoint_interval!r}")
        if self.max_message_bytes < 1:
            raise ValueError(f"max_message_bytes must be >= 1, got {self.max_message_bytes!r}")
        if not self.connect_timeout > 0:
            raise ValueError(f"connect_timeout must be > 0, got {self.connect_timeout!r}")
        if not 0 <= self.shutdown_timeout < math.inf:  # (the clients take whole milliseconds)
            raise ValueError(f"shutdown_timeout must be a finite number >= 0, got "
                             f"{self.shutdown_timeout}")
        if self.exit_when_idle is not None and not self.exit_when_idle >= 0:
            raise ValueError(f"exit_when_idle must be >= 0, got {self.exit_when_idle}")
        if self.max_poll_records < 1:
            raise ValueError(f"max_poll_records must be >= 1, got {self.max_poll_records}")
        # At most a Java int, as Kafka's max.poll.records: past sys.maxsize the client failed at
        # the first poll, after joining the group.
        if self.max_poll_records > 2**31 - 1:
            raise ValueError(f"max_poll_records must be at most {2**31 - 1}, got "
                             f"{self.max_poll_records}")
        if self.session_timeout_ms <= MIN_HEARTBEAT_MS:
            raise ValueError(f"session_timeout_ms must be > {MIN_HEARTBEAT_MS} (the shortest "
                             f"heartbeat interval), got {self.session_timeout_ms}")
        if self.session_timeout_ms > MAX_SESSION_TIMEOUT_MS:
            # (The Kafka client refused it only once a broker answered, naming its own settings.)
            raise ValueError(f"session_timeout_ms must be at most {MAX_SESSION_TIMEOUT_MS} (the "
                             "Kafka client's requests wait 5 s longer, and it closes connections "
                             f"idle for 9 minutes), got {self.session_timeout_ms}")
        if self.blas_threads is not None and self.blas_threads < 0:
            raise ValueError(f"blas_threads must be >= 0, got {self.blas_threads}")
        if self.blas_threads is not None and self.blas_threads > MAX_BLAS_THREADS:
            # (BLAS takes a C int: a larger number failed in ctypes at start-up, exit status 1.)
            raise ValueError(f"blas_threads must be at most {MAX_BLAS_THREADS}, got "
                             f"{self.blas_threads}")
        # What the checkpoint holds is checked as it will be when read back.
        if self.width is not None and not 1 <= self.width <= margin.MAX_FEATURES_LIMIT:
            raise ValueError(f"width must be in [1, {margin.MAX_FEATURES_LIMIT}], "
                             f"got {self.width}")
        if self.labels is not None:
            # (each label as written, cut short: one of a thousand characters made a line
            # of two thousand)
            shown = " ".join(text if len(text := repr(y)) <= 40 else text[:37] + "..."
                             for y in list(self.labels)[:3])
            try:  # numpy scalars (np.unique's) as the Python labels the checkpoint holds
                self.labels = state_io.check_labels([as_label(y) for y in self.labels])
            except ValueError as error:
                raise ValueError(f"labels {shown}: {error}") from None
            for y in self.labels:  # a message is UTF-8 JSON: it cannot carry a lone surrogate
                if type(y) is str and not inputs.is_utf8(y):
                    raise ValueError(f"labels {shown}: label {inputs.describe(y)} is not a label "
                                     "the service takes: not valid UTF-8 text (a non-UTF-8 byte "
                                     "of the command line?)")
        # The client encodes the group as UTF-8: a group it cannot encode never found its
        # coordinator (the service waited, silent, for ever).
        if not (isinstance(self.group, str) and self.group and inputs.is_utf8(self.group)):
            raise ValueError(f"group {self.group!r} is not a consumer group name: non-empty "
                             "UTF-8 text (a non-UTF-8 byte of the command line?)")
        outputs = [self.predictions_topic, self.alerts_topic, self.dead_letter_topic]
        # A name the broker refuses would be retried for ever as an output (a non-retriable
        # InvalidTopicError at every flush); an empty output topic is no output.
        for what, name in [("topic", self.topic), ("predictions_topic", self.predictions_topic),
                           ("alerts_topic", self.alerts_topic),
                           ("dead_letter_topic", self.dead_letter_topic),
                           ("sync_topic", self.sync_topic)]:
            if (name or what == "topic") and not _is_topic_name(name):
                raise ValueError(f"{what} {name!r} is not a Kafka topic name: 1 to "
                                 f"{state_io.MAX_NAME} of A-Z a-z 0-9 . _ - (and not . or ..)")
        if self.topic in outputs:
            raise ValueError(f"the input topic {self.topic!r} cannot also be an output topic")
        if self.sync_every is not None:
            if self.sync_every < 1:
                raise ValueError("sync_every must be >= 1")
            if self.sync_topic is None:
                name = f"{self.topic}-{self.group}-snapshots"
                self.sync_topic = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:249]
            if self.sync_topic in [self.topic, *outputs]:
                raise ValueError(
                    f"the snapshot topic {self.sync_topic!r} must be a topic of its own")
            self.checkpoint_every = self.sync_every
        if self.group_model not in ("basis", "union"):
            raise ValueError(f"group_model must be 'basis' or 'union', got {self.group_model!r}")
        if self.basis_refresh_every < 1:
            raise ValueError("basis_refresh_every must be >= 1")

    @property
    def grouped(self) -> bool:
        """True when this service is one worker of a group that syncs its model."""
        return self.sync_every is not None


_TOPIC_NAME = re.compile(rf"[A-Za-z0-9._-]{{1,{state_io.MAX_NAME}}}\Z")


def _is_topic_name(name) -> bool:
    """Whether Kafka takes `name` as a topic name (its `Topic.validate`)."""
    return isinstance(name, str) and bool(_TOPIC_NAME.match(name)) and name not in (".", "..")
