"""Streams for `river_advsvm`: Parquet files and Kafka topics, behind optional extras.

- `streams.parquet` (extra `parquet`): stream a file, directory or dataset batch by batch,
  and write `.npz` arrays or River data sets as Parquet.
- `streams.kafka` (extra `kafka`): the message schema, its validation and dead letters.
- `streams.service`: `advsvm serve`, test-then-train on a topic, exactly once across crashes;
  its parts: `streams.config` (settings), `streams.learner` (validation, prediction, learning;
  no Kafka), `streams.outputs` (predictions, alerts, dead letters), `streams.sink` (outputs
  that are never lost), `streams.clients` (every Kafka client, from one place),
  `streams.session` (what the loop shares with the checkpoints, and its progress),
  `streams.standalone` and `streams.worker` (the checkpoints of a service alone or in a group),
  `streams.model_calls` (the batched model call), `streams.lifecycle` (signals, lock, BLAS),
  `streams.cli` and `streams.serve_parser` (the command line of `advsvm serve`).
- `streams.state`: the service's checkpoint layout (read by `advsvm inspect`; no Kafka needed).
- `streams.group`: several `advsvm serve --sync-every` workers learning one model (the
  snapshot-topic protocol); its parts: `streams.snapshot` (the topic's records),
  `streams.snapshot_topic` (reading it), `streams.group_state` (claims, totals, the group's
  model); `streams.merge`: averaging models (support vectors in function space, or the
  coefficients of a shared feature pool).
- `streams.broker`: the bundled local broker (tansu, loopback, memory only) for demos and tests.
- `streams.local`: `advsvm serve --local-broker`, the whole Kafka path with one command.

This package depends on `river_advsvm`, never the reverse; importing it imports nothing heavy.
"""
