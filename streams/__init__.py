"""Streams for `river_advsvm`: Parquet files and Kafka topics, behind optional extras.

- `streams.parquet` (extra `parquet`): stream a file, directory or dataset batch by batch,
  and write `.npz` arrays or River data sets as Parquet.
- `streams.kafka` (extra `kafka`): the message schema, its validation and dead letters, and
  the kafka-python adapters.
- `streams.service`: `advsvm serve`, test-then-train on a topic, exactly once across crashes.
- `streams.state`: the service's checkpoint layout (read by `advsvm inspect`; no Kafka needed).
- `streams.group`: several `advsvm serve --sync-every` workers learning one model (the
  snapshot-topic protocol); `streams.merge`: averaging models that share a feature pool.
- `streams.broker`: the bundled local broker (tansu, loopback, memory only) for demos and tests.
- `streams.local`: `advsvm serve --local-broker`, the whole Kafka path with one command.

This package depends on `river_advsvm`, never the reverse; importing it imports nothing heavy.
"""
