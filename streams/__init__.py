"""Streams for `river_advsvm`: Parquet files and Kafka topics, behind optional extras.

- `river_advsvm.streams.parquet` (extra `parquet`): stream a file, directory or dataset batch by
  batch, and write `.npz` arrays or River data sets as Parquet.
- `river_advsvm.streams.kafka` (extra `kafka`): the message schema, its validation and dead letters.
- `river_advsvm.streams.service`: `advsvm serve`, test-then-train on a topic, exactly once across
  crashes; its parts: `river_advsvm.streams.config` (settings), `river_advsvm.streams.learner`
  (validation, prediction, learning; no Kafka), `river_advsvm.streams.outputs` (predictions, alerts,
  dead letters), `river_advsvm.streams.sink` (outputs that are never lost),
  `river_advsvm.streams.clients` (every Kafka client, from one place),
  `river_advsvm.streams.session` (what the loop shares with the checkpoints, and its progress),
  `river_advsvm.streams.standalone` and `river_advsvm.streams.worker` (the checkpoints of a service
  alone or in a group), `river_advsvm.streams.model_calls` (the batched model call),
  `river_advsvm.streams.lifecycle` (signals, lock, BLAS), `river_advsvm.streams.cli` and
  `river_advsvm.streams.serve_parser` (the command line of `advsvm serve`).
- `river_advsvm.streams.state`: the service's checkpoint layout (read by `advsvm inspect`; no Kafka
  needed).
- `river_advsvm.streams.group`: several `advsvm serve --sync-every` workers learning one model (the
  snapshot-topic protocol); its parts: `river_advsvm.streams.snapshot` (the topic's records),
  `river_advsvm.streams.snapshot_topic` (reading it), `river_advsvm.streams.group_state` (claims,
  totals, the group's model); `river_advsvm.streams.merge`: averaging models (support vectors in
  function space, or the coefficients of a shared feature pool).
- `river_advsvm.streams.broker`: the bundled local broker (tansu, loopback, memory only) for demos
  and tests.
- `river_advsvm.streams.local`: `advsvm serve --local-broker`, the whole Kafka path with one
  command.

This package depends on `river_advsvm`, never the reverse; importing it imports nothing heavy.
"""


def missing_extra(error: ModuleNotFoundError, module: str, extra: str) -> ModuleNotFoundError:
    """The error for `module` importing without its optional `extra`: it names the extra to
    install, and keeps the missing module's `name` (the CLI words its own hint from it)."""
    return ModuleNotFoundError(
        f"No module named {error.name!r}: {module} needs the {extra} extra (pip install "
        f"'river-advsvm[{extra}]'; in a clone: pip install -e '.[{extra}]')", name=error.name)
