"""The service's checkpoint: one atomic file holding the model, the offsets and the counters.

`DIR/checkpoint.ckpt` is written by `river_advsvm`'s own `save` (temporary file, fsync,
rename), with the service's bookkeeping in the checkpoint's `extra` metadata. It is the single
source of truth: the model and the next offset of every partition it learned from change
together or not at all, which is what makes learning exactly-once across crashes.

`extra` holds::

    {"kind": "advsvm-serve", "version": 2, "created_at": "2025-01-01T12:00:00.000000Z",
     "samples_learned": 20000,
     "offsets": {"topic": {"0": 20000}},          # next offset to learn, per partition
     "topic_ids": {"topic": "0194...", ...},      # the topic incarnation those offsets are in
     "counters": {...}, "width": 8, "labels": null,
     "monitor": {...},                            # the robustness monitor's state, if any
     "group": {...}}                              # only for a worker of a group (below)

The counters (`new_counters`) are the one place where the service counts what it did; they are
saved with the model, so they are exact across crashes. Version 1 checkpoints (counters
`messages`, `correct`, and `predicted` for the unlabelled messages only) are read too.

A worker of a group (`advsvm serve --sync-every N`, see `river_advsvm.streams.group`) publishes this same
checkpoint as its snapshot, with `group`::

    {"worker": "host-1a2b3c4d", "seq": 12,        # who, and its 12th snapshot
     "folded": {"host-99ee00ff": 4000},          # peers' samples_learned already averaged in
     "self_at_fold": 3500,                       # own samples_learned at that averaging
     "run": {"first": 1700000000.1, "last": 1700000042.5, "processed": 21000}}

In a group, `samples_learned` and the counters are the worker's own (what it learned itself);
the model's `n_learned` is the merged model's sample count.

Nothing here needs Kafka: `advsvm inspect` reads checkpoints with this module alone.

Examples
--------

>>> import tempfile
>>> from river_advsvm import AdvLinearSVM
>>> from river_advsvm.streams import state
>>> directory = tempfile.mkdtemp()
>>> model = AdvLinearSVM()
>>> model.learn_one({"a": 1.0}, True)
>>> saved = state.ServiceState(model=model, offsets={"in": {0: 1}}, topic_ids={"in": None})
>>> saved.counters["learned"] = 1
>>> state.save(directory, saved)
>>> info = state.describe(directory)
>>> info["samples_learned"], info["offsets"], info["model"]["class"]
(1, {'in': {'0': 1}}, 'AdvLinearSVM')

"""

from __future__ import annotations

import dataclasses
import datetime
import glob
import os
import typing

import river_advsvm
from river_advsvm import checkpoint
from river_advsvm.checkpoint import CheckpointError

__all__ = ["CHECKPOINT_FILE", "ServiceState", "checkpoint_path", "describe", "from_checkpoint",
           "load", "parse_extra", "save", "save_bytes", "to_bytes"]

CHECKPOINT_FILE = "checkpoint.ckpt"
KIND = "advsvm-serve"
VERSION = 2
_MODELS = {cls.__name__: cls for cls in (river_advsvm.AdvKernelSVM, river_advsvm.AdvLinearSVM)}


def new_counters() -> dict:
    """Counters of a fresh service; all of them survive restarts in the checkpoint."""
    return {
        "consumed": 0,  # records consumed, valid or not
        "predicted": 0,  # messages the model predicted (every valid one, labelled or not)
        "unlabelled": 0,  # of those, the ones without a label (predicted only)
        "learned": 0,  # labelled messages learned (test-then-train)
        "learned_correct": 0,  # of those, how many were predicted right before being learned
        "dead_letters": 0,  # messages refused, each with a code
        "dead_letters_by_code": {},
        "alerts": 0,  # alerts the monitor raised
        "alerts_by_kind": {},  # of those, how many of each kind (clean_drift, ...)
        "topic_resets": 0,  # topics found recreated (the broker lost them)
        "checkpoints": 0,  # checkpoints (or, in a group, snapshots) written
    }


def _v1_counters(counters: dict) -> dict:
    """Version-1 counter names in today's: `messages` were the consumed records, `correct` the
    right predictions of learned messages, `predicted` the unlabelled messages."""
    renamed = {"messages": "consumed", "correct": "learned_correct", "predicted": "unlabelled"}
    counters = {renamed.get(key, key): value for key, value in counters.items()}
    counters["predicted"] = int(counters.get("learned", 0)) + int(counters.get("unlabelled", 0))
    return counters


@dataclasses.dataclass
class ServiceState:
    """What a checkpoint holds: the model and the service's bookkeeping around it."""

    model: typing.Any
    offsets: dict = dataclasses.field(default_factory=dict)  # topic -> {partition: next offset}
    topic_ids: dict = dataclasses.field(default_factory=dict)  # topic -> id or None
    counters: dict = dataclasses.field(default_factory=new_counters)
    width: int | None = None  # features of array-form x, once known
    labels: list | None = None  # the two classes, when pinned by the operator
    group: dict | None = None  # a group worker's bookkeeping (see the module docs)
    monitor: dict | None = None  # the monitor's state (`RobustnessMonitor.state()`)

    def extra(self) -> dict:
        extra = {
            "kind": KIND,
            "version": VERSION,
            "created_at": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ"
            ),
            "samples_learned": self.counters["learned"],
            "offsets": {
                topic: {str(p): int(o) for p, o in sorted(parts.items())}
                for topic, parts in sorted(self.offsets.items())
            },
            "topic_ids": dict(self.topic_ids),
            "counters": self.counters,
            "width": self.width,
            "labels": self.labels,
        }
        if self.monitor is not None:
            extra["monitor"] = self.monitor
        if self.group is not None:
            extra["group"] = {
                **self.group,
                "folded": dict(sorted(self.group["folded"].items())),
                "run": dict(self.group["run"]),
            }
        return extra


def checkpoint_path(directory: str | os.PathLike) -> str:
    return os.path.join(os.fspath(directory), CHECKPOINT_FILE)


def save(directory: str | os.PathLike, state: ServiceState) -> None:
    """Write `state` atomically to `directory/checkpoint.ckpt`."""
    state.counters["checkpoints"] += 1
    try:
        state.model.save(checkpoint_path(directory), extra=state.extra())
    except BaseException:
        state.counters["checkpoints"] -= 1
        raise


def remove_temporaries(directory: str | os.PathLike) -> list[str]:
    """Delete the temporary files a crash during a checkpoint write can leave behind."""
    removed = []
    for path in glob.glob(os.path.join(os.fspath(directory), ".tmp-*.ckpt")):
        os.unlink(path)
        removed.append(path)
    return removed


def to_bytes(state: ServiceState) -> bytes:
    """The checkpoint of `state` as bytes (what a group worker publishes)."""
    return checkpoint.dumps(*state.model.to_checkpoint(state.extra()))


def save_bytes(directory: str | os.PathLike, data: bytes) -> None:
    """Write checkpoint bytes made by `to_bytes` atomically to `directory/checkpoint.ckpt`."""
    checkpoint.write_bytes(checkpoint_path(directory), data)


def _service_extra(meta: dict, where: str) -> dict:
    extra = meta.get("extra")
    if not isinstance(extra, dict) or extra.get("kind") != KIND:
        raise CheckpointError(f"{where!r} is a model file, not a checkpoint of `advsvm serve`")
    if extra.get("version") not in (1, VERSION):
        raise CheckpointError(f"{where!r} has service checkpoint version {extra.get('version')!r}")
    return extra


def _parse_group(group) -> dict | None:
    if group is None:
        return None
    run = group.get("run") or {}
    parsed = {
        "worker": str(group["worker"]),
        "seq": int(group["seq"]),
        "folded": {str(k): int(v) for k, v in group["folded"].items()},
        "self_at_fold": int(group["self_at_fold"]),
        "run": {
            "first": None if run.get("first") is None else float(run["first"]),
            "last": None if run.get("last") is None else float(run["last"]),
            "processed": int(run.get("processed", 0)),
        },
    }
    if parsed["seq"] < 0 or parsed["self_at_fold"] < 0 or any(
            v < 0 for v in parsed["folded"].values()):
        raise ValueError("negative group counter")
    return parsed


def parse_extra(meta: dict, where: str) -> dict:
    """The service fields of a checkpoint's metadata, validated: offsets (partitions as ints),
    topic_ids, counters, width, labels, group; `CheckpointError` if they are invalid."""
    extra = _service_extra(meta, where)
    try:
        offsets = {
            str(topic): {int(p): int(o) for p, o in parts.items()}
            for topic, parts in extra["offsets"].items()
        }
        if any(o < 0 for parts in offsets.values() for o in parts.values()):
            raise ValueError("negative offset")
        saved = extra["counters"]
        if extra["version"] == 1:
            saved = _v1_counters(saved)
        counters = new_counters()
        for key, value in saved.items():
            if key in ("dead_letters_by_code", "alerts_by_kind"):
                counters[key] = {str(code): int(n) for code, n in value.items()}
            elif key in counters:
                counters[key] = int(value)
        monitor = extra.get("monitor")
        if monitor is not None and not isinstance(monitor, dict):
            raise ValueError("the monitor's state is not an object")
        topic_ids = {str(t): (None if i is None else str(i)) for t, i in extra["topic_ids"].items()}
        width = None if extra["width"] is None else int(extra["width"])
        labels = None if extra["labels"] is None else list(extra["labels"])
        group = _parse_group(extra.get("group"))
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise CheckpointError(f"invalid service metadata in {where!r}: {error!r}") from None
    return {"offsets": offsets, "topic_ids": topic_ids, "counters": counters, "width": width,
            "labels": labels, "group": group, "monitor": monitor}


def from_checkpoint(meta: dict, arrays: dict, where: str) -> ServiceState:
    """The `ServiceState` of a checkpoint's metadata and arrays; `CheckpointError` if invalid."""
    fields = parse_extra(meta, where)
    cls = _MODELS.get(meta.get("class"))
    if cls is None:
        raise CheckpointError(f"unknown model class {meta.get('class')!r} in {where!r}")
    return ServiceState(model=cls.from_checkpoint(meta, arrays), **fields)


def load(directory: str | os.PathLike) -> ServiceState | None:
    """The checkpoint in `directory`, or None if there is none; `CheckpointError` if invalid."""
    path = checkpoint_path(directory)
    try:
        meta, arrays = checkpoint.read(path)
    except FileNotFoundError:
        return None
    return from_checkpoint(meta, arrays, path)


def describe(path: str | os.PathLike) -> dict:
    """The checkpoint's metadata as plain JSON-able data (what `advsvm inspect` prints).

    `path` is the checkpoint directory or the checkpoint file itself.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = checkpoint_path(path)
    meta = checkpoint.read_meta(path)  # no array is decompressed
    extra = _service_extra(meta, path)
    counters = extra.get("counters", {})
    if isinstance(counters, dict) and extra.get("version") == 1:
        counters = _v1_counters(counters)
    learned = counters.get("learned", 0)
    state = meta.get("state", {})
    return {
        "path": os.path.abspath(path),
        "created_at": extra.get("created_at"),
        "samples_learned": extra.get("samples_learned"),
        "offsets": extra.get("offsets"),
        "topic_ids": extra.get("topic_ids"),
        "counters": counters,
        "test_then_train_accuracy": (counters.get("learned_correct", 0) / learned
                                     if learned else None),
        "width": extra.get("width"),
        "labels": extra.get("labels"),
        **({"group": extra["group"]} if extra.get("group") is not None else {}),
        "model": {
            "class": meta.get("class"),
            "params": meta.get("params"),
            "n_learned": state.get("n_learned"),
            "classes": state.get("labels"),
            "n_inputs": len(state.get("names", [])),
        },
        "file_bytes": os.path.getsize(path),
    }
