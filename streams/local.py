"""`advsvm serve --local-broker`: the whole Kafka path on one machine, with one command.

Starts the bundled broker on a free loopback port, creates the topics, replays a data set
into the input topic (every `unlabelled_every`-th message without its label, to exercise the
prediction-only path), runs the service until it has been idle for a few seconds, prints what
it did and stops the broker. Everything stays on 127.0.0.1 and in memory.

Replay sources: 'phishing' (River's bundled Phishing data set, no download), a Parquet file
(read with `streams.parquet`, label column `y` unless told otherwise) or an `.npz` file with
`X_train`/`y_train` (e.g. the project's MNIST).

"""

from __future__ import annotations

import itertools
import json
import logging
import tempfile
import typing

from streams import kafka as kafka_io
from streams import state as state_io
from streams.broker import LocalBroker
from streams.service import Service, ServiceConfig

__all__ = ["replay", "replay_samples", "run_local"]

log = logging.getLogger(__name__)


def replay_samples(source: str, target: str = "y", limit: int | None = None,
                   pair: tuple | None = None) -> typing.Iterator[tuple[typing.Any, typing.Any]]:
    """`(x, y)` pairs from 'phishing', a Parquet file, or an `.npz` with X_train/y_train.

    `pair` keeps only the samples of these two labels (for multi-class data like MNIST);
    `.npz` pixels are scaled to [0, 1] and sent as arrays.
    """
    if source == "phishing":
        from river import datasets

        samples = iter(datasets.Phishing())
    elif source.endswith(".npz"):
        import numpy as np

        with np.load(source, allow_pickle=False) as archive:
            X, y = archive["X_train"], archive["y_train"]
        X = X.reshape(len(X), -1)
        scale = 255.0 if X.dtype == np.uint8 else 1.0
        samples = ((row / scale, label) for row, label in zip(X, y.tolist()))
    else:
        from streams import parquet

        samples = parquet.iter_rows(source, target=target)
    if pair is not None:
        samples = ((x, y) for x, y in samples if y in pair)
    return itertools.islice(samples, limit)


def replay(bootstrap_servers: str, topic: str, samples, unlabelled_every: int = 0) -> int:
    """Produce `samples` as input messages (ids 0, 1, ...); returns how many were sent."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=20,
                             enable_idempotence=False)
    count = 0
    try:
        for count, (x, y) in enumerate(samples, start=1):
            unlabelled = unlabelled_every and count % unlabelled_every == 0
            x = x if isinstance(x, dict) else list(map(float, x))
            producer.send(topic, kafka_io.encode(x, None if unlabelled else y, id=count - 1))
        producer.flush()
    finally:
        producer.close()
    return count


def run_local(config_overrides: dict, model_factory, source: str = "phishing",
              target: str = "y", limit: int | None = None, pair: tuple | None = None,
              partitions: int = 1, unlabelled_every: int = 10, monitor=None) -> int:
    """Broker, topics, replay, service, summary; returns the service's exit status."""
    checkpoint_dir = config_overrides.get("checkpoint_dir") or tempfile.mkdtemp(
        prefix="advsvm-local-"
    )
    with LocalBroker() as broker:
        config = ServiceConfig(**{
            "topic": "advsvm-input",
            "group": "advsvm",
            "predictions_topic": "advsvm-predictions",
            "alerts_topic": "advsvm-alerts",
            "dead_letter_topic": "advsvm-dead-letters",
            "exit_when_idle": 5.0,
            "session_timeout_ms": 2000,
            **{k: v for k, v in config_overrides.items() if v is not None},
            "bootstrap_servers": broker.bootstrap_servers,
            "checkpoint_dir": checkpoint_dir,
        })
        print(f"local broker (tansu, memory only) on {broker.bootstrap_servers}", flush=True)
        outputs = [config.predictions_topic, config.alerts_topic, config.dead_letter_topic]
        kafka_io.create_topics(broker.bootstrap_servers,
                               {config.topic: partitions, **{t: 1 for t in outputs if t}})
        sent = replay(broker.bootstrap_servers, config.topic,
                      replay_samples(source, target, limit, pair), unlabelled_every)
        print(f"replayed {sent} messages from {source} into {config.topic!r}; serving "
              f"(stops after {config.exit_when_idle:g}s without messages)", flush=True)
        status = Service(config, model_factory, monitor).run()
    summary = state_io.describe(checkpoint_dir)
    print(json.dumps({k: summary[k] for k in (
        "samples_learned", "test_then_train_accuracy", "offsets", "counters", "path")}, indent=2))
    print(f"inspect it again with: advsvm inspect {checkpoint_dir}")
    return status

