"""Every Kafka client the service uses is made here, from one `Clients` object.

A `Clients` holds the bootstrap servers, the security settings (`river_advsvm.streams.security`: TLS
and SASL) and a dict of other extra kafka-python settings; all of them reach every client it makes
(the service's consumer and producer, the admin client that creates topics, the group's snapshot
reader, `advsvm inspect --bootstrap-servers`, the local broker's replay producer, the benchmarks'
producer). A setting a method fixes for the service's guarantees (`enable_auto_commit`, `acks`, ...)
cannot be overridden: `Clients` refuses such a key, and a security setting goes in `security`, not
among the extra settings.

Examples
--------

>>> from river_advsvm.streams.clients import Clients
>>> from river_advsvm.streams.security import SecuritySettings
>>> clients = Clients("127.0.0.1:9092", {"linger_ms": 20},
...                   security=SecuritySettings(security_protocol="SSL", ssl_cafile="ca.pem"))
>>> clients.settings["security_protocol"], clients.settings["linger_ms"]
('SSL', 20)
>>> Clients("127.0.0.1:9092", {"acks": 0})
Traceback (most recent call last):
...
ValueError: the Kafka client setting 'acks' is fixed by the service and cannot be set
>>> Clients("127.0.0.1:9092", {"ssl_cafile": "ca.pem"})
Traceback (most recent call last):
...
ValueError: the Kafka client setting 'ssl_cafile' is a security setting: give it in security=SecuritySettings(...)

"""

from __future__ import annotations

import dataclasses

from river_advsvm.streams.security import CLIENT_KEYS, SecuritySettings

__all__ = ["BOOTSTRAP_TIMEOUT_MS", "FIXED_SETTINGS", "MAX_SESSION_TIMEOUT_MS",
           "METADATA_MAX_AGE_MS", "MIN_HEARTBEAT_MS", "Clients", "create_topics", "topic_id",
           "topic_known"]

#: Clients give up bootstrapping after this long and the service retries with backoff, so that a
#: SIGTERM during an outage is answered within seconds.
BOOTSTRAP_TIMEOUT_MS = 5000
#: The service's consumer refreshes its cluster metadata this often (Kafka's default: 5 minutes).
#: A topic deleted and created again is known by its new id there: until then its offsets are
#: taken for the old log's, and what is learned past them is learned again once the id is seen.
#: Partitions added to the input topic are found there too.
METADATA_MAX_AGE_MS = 5000
#: The shortest heartbeat interval of the service's consumer: its session timeout must be longer.
MIN_HEARTBEAT_MS = 100
#: The consumer's requests may take this much longer than its session timeout.
_REQUEST_MARGIN_MS = 5000
#: The longest session timeout the service's consumer takes: kafka-python refuses a request
#: timeout (the session's plus the margin) that is not below its idle-connection limit (9 min).
MAX_SESSION_TIMEOUT_MS = 9 * 60 * 1000 - _REQUEST_MARGIN_MS - 1

#: Settings the service chooses itself: changing them would break exactly-once or the outputs'
#: guarantees, so `Clients` refuses them as extra settings.
FIXED_SETTINGS = frozenset({
    "bootstrap_servers", "group_id", "enable_auto_commit", "auto_offset_reset",
    "allow_auto_create_topics", "isolation_level", "acks", "enable_idempotence",
    "key_deserializer", "value_deserializer", "key_serializer", "value_serializer",
})


@dataclasses.dataclass
class Clients:
    """Makes the Kafka clients of one service, all with the same servers and settings.

    Parameters
    ----------
    bootstrap_servers
        `HOST:PORT[,HOST:PORT]`.
    settings
        Extra kafka-python settings given to every client (e.g. TLS and SASL ones).
    bootstrap_timeout_ms
        How long a client waits for a first broker before raising `NoBrokersAvailable`.
    security
        TLS and SASL (`river_advsvm.streams.security.SecuritySettings`); plaintext by default.

    `settings` is, after construction, everything the clients get besides what each method
    fixes: the security settings as kafka-python names them, then the extra ones.
    """

    bootstrap_servers: str
    settings: dict = dataclasses.field(default_factory=dict)
    bootstrap_timeout_ms: int = BOOTSTRAP_TIMEOUT_MS
    security: SecuritySettings = dataclasses.field(default_factory=SecuritySettings)

    def __post_init__(self):
        extra = dict(self.settings or {})
        for key in sorted(extra):
            if key in FIXED_SETTINGS:
                raise ValueError(
                    f"the Kafka client setting {key!r} is fixed by the service and cannot be set"
                )
            if key in CLIENT_KEYS:
                raise ValueError(f"the Kafka client setting {key!r} is a security setting: give "
                                 "it in security=SecuritySettings(...)")
        self.settings = {**self.security.client_kwargs(), **extra}

    def _common(self, client_id: str, bootstrap_timeout_ms: int | None) -> dict:
        return {
            "reconnect_backoff_max_ms": 2000,
            **self.settings,
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": client_id,
            "bootstrap_timeout_ms": bootstrap_timeout_ms or self.bootstrap_timeout_ms,
        }

    def consumer_config(self, group: str, *, session_timeout_ms: int = 10000,
                        max_poll_records: int = 500, client_id: str = "advsvm-serve",
                        bootstrap_timeout_ms: int | None = None) -> dict:
        """The settings of `consumer`: a group consumer that never commits on its own, starts
        at the earliest offset and reads committed messages only.

        Offsets are the checkpoint's business: auto-commit is off, and a partition the
        checkpoint does not know starts at the group's committed offset, else at the beginning.
        The messages of an upstream's transaction are read once it commits (`read_committed`):
        until then it may yet be aborted.
        """
        return {
            "session_timeout_ms": session_timeout_ms,
            "heartbeat_interval_ms": max(MIN_HEARTBEAT_MS,
                                         min(3000, session_timeout_ms // 5)),
            "max_poll_records": max_poll_records,
            "request_timeout_ms": max(30000, session_timeout_ms + _REQUEST_MARGIN_MS),
            "metadata_max_age_ms": METADATA_MAX_AGE_MS,
            **self._common(client_id, bootstrap_timeout_ms),
            "group_id": group,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "allow_auto_create_topics": False,
            "isolation_level": "read_committed",
        }

    def consumer(self, group: str, **options):
        """A KafkaConsumer with `consumer_config(group, **options)`."""
        from kafka import KafkaConsumer

        return _made(KafkaConsumer, self.consumer_config(group, **options))

    def reader_config(self, *, client_id: str, max_fetch_bytes: int) -> dict:
        """The settings of `reader`: a consumer outside any group (assigned by hand), e.g. for
        the snapshot topic."""
        return {
            "max_partition_fetch_bytes": max_fetch_bytes,
            "fetch_max_bytes": max_fetch_bytes,
            **self._common(client_id, None),
            "group_id": None,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "allow_auto_create_topics": False,
        }

    def reader(self, **options):
        """A KafkaConsumer with `reader_config(**options)`."""
        from kafka import KafkaConsumer

        return _made(KafkaConsumer, self.reader_config(**options))

    def producer_config(self, *, max_request_size: int = 4 * 2**20,
                        client_id: str = "advsvm-serve", linger_ms: int = 5,
                        bootstrap_timeout_ms: int | None = None) -> dict:
        """The settings of `producer`: acks from all replicas, retries, and no idempotence.

        Idempotence is off because an idempotent producer does not survive a restart of the
        bundled broker; `river_advsvm.streams.sink.OutputSink` resends what fails, and what a
        crashed run delivered is read back (`river_advsvm.streams.output_log`).
        """
        return {
            "linger_ms": linger_ms,
            "max_block_ms": 5000,
            "request_timeout_ms": 10000,
            "delivery_timeout_ms": 60000,
            "max_request_size": max_request_size,
            **self._common(client_id, bootstrap_timeout_ms),
            "acks": "all",
            "enable_idempotence": False,
        }

    def producer(self, **options):
        """A KafkaProducer with `producer_config(**options)`."""
        from kafka import KafkaProducer

        return _made(KafkaProducer, self.producer_config(**options))

    def admin_config(self, client_id: str = "advsvm-admin",
                     bootstrap_timeout_ms: int | None = None) -> dict:
        """The settings of `admin`."""
        return self._common(client_id, bootstrap_timeout_ms)

    def admin(self, **options):
        """A KafkaAdminClient with `admin_config(**options)` (it reaches a broker at once)."""
        from kafka import KafkaAdminClient

        return _made(KafkaAdminClient, self.admin_config(**options))

    def create_topics(self, topics: dict[str, int], configs: dict | None = None,
                      bootstrap_timeout_ms: int | None = None, admin=None) -> None:
        """Create each topic (name -> partitions) unless it exists already; with an open
        `admin` client (the caller closes it), through that one."""
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        own = admin is None
        if own:
            admin = self.admin(bootstrap_timeout_ms=bootstrap_timeout_ms)  # reaches a broker
        try:
            for name, partitions in topics.items():
                try:
                    topic = NewTopic(name, partitions, 1, topic_configs=configs or {})
                    admin.create_topics([topic])
                except TopicAlreadyExistsError:
                    pass
        finally:
            if own:
                admin.close()


def create_topics(bootstrap_servers: str, topics: dict[str, int], settings: dict | None = None,
                  security: SecuritySettings | None = None):
    """Create each topic (name -> partitions) unless it exists already."""
    Clients(bootstrap_servers, settings or {},
            security=security or SecuritySettings()).create_topics(topics)


def _cluster(consumer):
    """kafka-python's cluster metadata of a consumer, which it does not expose publicly."""
    cluster = getattr(consumer, "_cluster", None)
    if cluster is None:
        cluster = getattr(getattr(consumer, "_client", None), "cluster", None)
    return cluster


def topic_known(consumer, topic: str) -> bool | None:
    """Whether `topic` is in the cluster metadata the consumer last received (None if
    kafka-python keeps no such view). No request is made: a consumer subscribed to `topic`
    refreshes its metadata on its own, and a request naming a missing topic may create it on a
    cluster that creates topics on first use.
    """
    try:
        return _cluster(consumer).partitions_for_topic(topic) is not None
    except Exception:  # noqa: BLE001 - another kafka-python's metadata
        return None


def topic_id(consumer, topic: str) -> str | None:
    """The broker's id of `topic` as the consumer last saw it (None if unknown).

    A topic that is deleted and created again gets a new id: the checkpoint's offsets then
    belong to a log that no longer exists. kafka-python keeps the ids in its cluster metadata,
    hence the defensive lookup.
    """
    cluster = _cluster(consumer)
    try:
        value = cluster.topic_id(topic)
    except Exception:  # noqa: BLE001 - an older kafka-python without topic ids
        return None
    return None if value is None else str(value)


def _made(kind, config: dict):
    """`kind(**config)`; settings kafka-python refuses (one this kind of client does not take,
    timeouts that contradict each other) are a usage error (`ValueError`): no retry mends
    them."""
    from kafka.errors import KafkaConfigurationError

    try:
        return kind(**config)
    except KafkaConfigurationError as error:
        raise ValueError(f"the Kafka client settings are refused: {error}") from None
