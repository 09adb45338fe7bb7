"""The service's checkpoint: one atomic file holding the model, the offsets and the counters.

`DIR/checkpoint.ckpt` is written by `river_advsvm`'s own `save` (temporary file, fsync,
rename), with the service's bookkeeping in the checkpoint's `extra` metadata. It is the single
source of truth: the model and the next offset of every partition it learned from change
together or not at all, which is what makes learning exactly-once across crashes.

`extra` holds::

    {"kind": "advsvm-serve", "version": 2, "created_at": "2025-01-01T12:00:00.000000Z",
     "samples_learned": 20000,
     "offsets": {"topic": {"0": 20000}},          # next offset to learn, per partition
     "output_ends": {"preds": {"0": 19990}},      # where the output topics ended then
     "output_ids": {"preds": "0195...", ...},     # the output topics' incarnation, then
     "held_output_ends": {"topic": {"1": {"preds": {"0": 19000}}}},  # older ends of a
                                                  # partition elsewhere when those moved on
     "topic_ids": {"topic": "0194...", ...},      # the topic incarnation those offsets are in
     "counters": {...}, "width": 8, "labels": null,
     "monitor": {...},                            # the robustness monitor's state, if any
     "group": {...}}                              # only for a worker of a group (below)

The counters (`new_counters`) are the one place where the service counts what it did; they are
saved with the model, so they are exact across crashes. Version 1 checkpoints (counters
`messages`, `correct`, and `predicted` for the unlabelled messages only) are read too.

A worker of a group (`advsvm serve --sync-every N`, see `river_advsvm.streams.group`) publishes this
same checkpoint as its snapshot, with `group`::

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
import math
import os
import typing

import numpy as np

import river_advsvm
from river_advsvm import _MODELS, checkpoint, margin, model_checkpoint
from river_advsvm.checkpoint import CheckpointError
from river_advsvm.labels import INT64
from river_advsvm.streams import faults
from river_advsvm.streams.kafka import MAX_TEXT_CHARS

__all__ = ["CHECKPOINT_FILE", "MAX_COUNT", "MAX_NAME", "Limits", "ServiceState",
           "check_labels", "check_model", "check_model_meta", "check_writable",
           "checkpoint_path", "describe", "from_checkpoint", "load", "overridden", "parse_extra",
           "save", "save_bytes", "to_bytes"]

CHECKPOINT_FILE = "checkpoint.ckpt"
KIND = "advsvm-serve"
VERSION = 2
#: The largest offset, counter or sequence number a checkpoint may hold: Kafka's offsets are
#: signed 64-bit integers, and no count of messages gets near them.
MAX_COUNT = 2**63 - 1


@dataclasses.dataclass(frozen=True)
class Limits:
    """The most a model loaded from a checkpoint or a peer's snapshot may hold.

    They are the operator's (`--budget`, `--max-features`, `--averaging`), or the library's defaults
    where none was given: what a file says is data, and never lifts them. A checkpoint whose model
    was made with a larger budget, more inputs, or no bound at all is refused before any of its
    arrays is read. `budget` None allows any budget (the operator chose an unbounded model). So is
    one whose model is still in a longer warm-up than the operator's model (`gamma='scale'`): it
    would hold back that many rows of up to `max_features` inputs each. So is one that keeps an
    average of its iterates (`averaging`) when the operator's model does not: with support vectors,
    up to half the budget in vectors of its own. So is one whose vectors take more bytes a number
    than the operator's (`--dtype`): float64 vectors under float32 take twice the memory.
    """

    budget: int | None = river_advsvm.AdvKernelSVM().budget
    max_features: int = river_advsvm.AdvKernelSVM().max_features
    warm_up: int = river_advsvm.AdvKernelSVM().warm_up
    averaging: bool = river_advsvm.AdvKernelSVM().averaging is not None
    dtype: str = river_advsvm.AdvKernelSVM().dtype

    #: The flag that raises each limit, named in the error.
    FLAGS: typing.ClassVar[dict] = {"budget": "--budget", "max_features": "--max-features"}

    @classmethod
    def of(cls, model) -> Limits:
        """The limits a model made by the operator's options implies; a linear model has no
        budget, warm-up or average, so a kernel checkpoint keeps the library's."""
        budget = getattr(model, "budget", cls.budget)
        if getattr(model, "budget_policy", None) == "grow":  # random features without bound
            budget = None
        averaging = model.averaging is not None if hasattr(model, "averaging") else cls.averaging
        return cls(budget=budget, max_features=model.max_features,
                   warm_up=getattr(model, "warm_up", cls.warm_up), averaging=averaging,
                   dtype=getattr(model, "dtype", cls.dtype))

    def check(self, meta: dict, where: str) -> None:
        """`CheckpointError` (one line naming the limit and its flag) if the model in the
        checkpoint metadata `meta` may hold more than these limits allow."""
        excess = self.excess(meta)
        if excess is not None:
            raise CheckpointError(f"{where}: {excess}")

    def excess(self, meta: dict) -> str | None:
        """What in the checkpoint metadata `meta` is over the limits, or None."""
        cls = _MODELS.get(meta.get("class")) if isinstance(meta, dict) else None
        if cls is None:
            return "unknown model class " + (repr(str(meta.get("class"))[:40])
                                             if isinstance(meta, dict) else "(no metadata)")
        try:
            # The parameters in effect, defaults included (of either form: see sizing).
            model = cls._unlearned(meta, sizing=True)
        except (KeyError, TypeError, ValueError) as error:
            return f"invalid {cls.__name__} parameters: {' '.join(str(error).split())[:200]}"
        held = {"max_features": model.max_features}
        if hasattr(model, "budget"):
            held["budget"] = None if (model.budget is None or model.budget_policy == "grow") \
                else model.budget
        for name, value in held.items():
            limit = getattr(self, name)
            if limit is not None and value is None:  # (only --budget-policy grow holds it)
                return (f"its model has no bound on its budget, over this service's limit "
                        f"{name}={limit}; to load it, start the service with --budget-policy "
                        f"grow")
            if limit is not None and value > limit:
                return (f"its model has {name}={value}, over this service's limit "
                        f"{name}={limit}; to load it, raise {self.FLAGS[name]}")
        dtype = getattr(model, "dtype", None)
        if dtype is not None and np.dtype(dtype).itemsize > np.dtype(self.dtype).itemsize:
            return (f"its model stores its vectors in {dtype}, more memory than this service's "
                    f"{self.dtype}; to load it, pass --dtype {dtype}")
        averaging = getattr(model, "averaging", None)
        if averaging is not None and not self.averaging:
            return (f"its model keeps an average of its iterates (averaging={averaging}), which "
                    f"this service's does not; to load it, leave out --averaging 0")
        state = meta.get("state")
        # A model whose gamma='scale' is not fitted yet holds back up to `warm_up` rows (a
        # finished warm-up holds none): rows of up to max_features inputs, laid out densely.
        in_warm_up = getattr(model, "gamma", None) == "scale" and isinstance(state, dict) \
            and isinstance(state.get("model"), dict) and state["model"].get("gamma") is None
        if in_warm_up and model.warm_up > self.warm_up:
            return (f"its model is in a warm-up of warm_up={model.warm_up} samples, over this "
                    f"service's warm_up={self.warm_up}; to serve it, let it finish its warm-up "
                    f"first")
        return None

    def array_bytes(self):
        """The `max_array_bytes` argument of `checkpoint.read` / `loads` under these limits:
        checks the metadata (as `check` does) before any array is read."""
        def bound(meta: dict) -> int:
            excess = self.excess(meta)
            if excess is not None:
                raise CheckpointError(excess)  # the reader says where
            return _MODELS[meta["class"]].checkpoint_array_bytes(meta)
        return bound


def check_model(model) -> None:
    """`ValueError` unless `model` is one a checkpoint holds: an `AdvKernelSVM` or an
    `AdvLinearSVM` (binary), not a subclass (saved under its own name, it would not load)."""
    if _MODELS.get(type(model).__name__) is not type(model):
        raise ValueError(f"the service serves an AdvKernelSVM or an AdvLinearSVM (one binary "
                         f"model, which its checkpoint holds), not a {type(model).__name__}")


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
        "topic_resets": 0,  # topics found recreated, partitions whose log ended before the offset
        "monitor_skipped": 0,  # labelled messages the monitor's attack refuses (outside its box)
        "checkpoints": 0,  # checkpoints (or, in a group, snapshots) written
    }


def _saturated(counters: dict) -> dict:
    """The counters as a checkpoint holds them: each at most `MAX_COUNT` (a checkpoint with a
    larger one is refused as out of range; past 2**63 - 1 messages a counter stops there)."""
    return {key: ({code: min(n, MAX_COUNT) for code, n in value.items()}
                  if isinstance(value, dict) else min(value, MAX_COUNT))
            for key, value in counters.items()}


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
    # output topic -> {partition: end offset} once the outputs before this state were
    # delivered (`river_advsvm.streams.output_log`), and the id of the topic those ends are in
    output_ends: dict = dataclasses.field(default_factory=dict)
    output_ids: dict = dataclasses.field(default_factory=dict)  # output topic -> id or None
    # input topic -> {partition: output ends}: for an input partition this service did not
    # hold when the output ends moved on, the older ends its outputs are read back from when
    # it comes back (a run killed before its checkpoint published outputs for it past them)
    held_output_ends: dict = dataclasses.field(default_factory=dict)

    def extra(self) -> dict:
        extra = {
            "kind": KIND,
            "version": VERSION,
            "created_at": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ"
            ),
            "samples_learned": min(self.counters["learned"], MAX_COUNT),
            "offsets": _by_partition(self.offsets),
            "topic_ids": dict(self.topic_ids),
            "output_ends": _by_partition(self.output_ends),
            "output_ids": dict(self.output_ids),
            "held_output_ends": {topic: {str(p): _by_partition(ends)
                                         for p, ends in sorted(parts.items())}
                                 for topic, parts in sorted(self.held_output_ends.items())},
            "counters": _saturated(self.counters),
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
        save_bytes(directory, to_bytes(state))
    except BaseException:
        state.counters["checkpoints"] -= 1
        raise


def remove_temporaries(directory: str | os.PathLike) -> list[str]:
    """Delete the temporary files a crash during a checkpoint write can leave behind."""
    removed = []
    for path in glob.glob(os.path.join(os.fspath(directory), ".tmp-*.ckpt")):
        try:
            os.unlink(path)
        except OSError as error:
            raise OSError(error.errno, f"{error.strerror or error} ({_NOT_REMOVABLE})",
                          path) from None
        removed.append(path)
    return removed


# Why a file the service made cannot be removed matters: a checkpoint replaces the previous one
# by a rename, which an append-only or sticky directory of another owner refuses too.
_NOT_REMOVABLE = ("a temporary file of a checkpoint write that cannot be removed: no checkpoint "
                  "can replace the previous one in this directory")


def check_writable(directory: str | os.PathLike) -> None:
    """`OSError` (its errno kept: a full disk is a fault of the machine, a permission a usage
    error) unless a checkpoint can be written in `directory`: a file is made there under a
    temporary checkpoint's name (`remove_temporaries` deletes it after a crash), then removed."""
    import tempfile

    try:
        fd, path = tempfile.mkstemp(prefix=".tmp-", suffix=".ckpt", dir=os.fspath(directory))
    except OSError as error:
        raise OSError(error.errno, f"{error.strerror or error} (a checkpoint cannot be written "
                                   "in this directory)", os.fspath(directory)) from None
    os.close(fd)
    try:
        os.unlink(path)
    except OSError as error:
        raise OSError(error.errno, f"{error.strerror or error} ({os.path.basename(path)}, "
                      f"{_NOT_REMOVABLE})", os.fspath(directory)) from None


def to_bytes(state: ServiceState) -> bytes:
    """The checkpoint of `state` as bytes (what a group worker publishes), its input names in
    arrays (`model_checkpoint.pack`)."""
    return model_checkpoint.dumps(*state.model.to_checkpoint(state.extra()))


def save_bytes(directory: str | os.PathLike, data: bytes) -> None:
    """Write checkpoint bytes made by `to_bytes` atomically to `directory/checkpoint.ckpt`."""
    checkpoint.write_bytes(checkpoint_path(directory), data,
                           before_rename=lambda: faults.reach("checkpoint.temp-written"))


def _service_extra(meta: dict, where: str) -> dict:
    extra = meta.get("extra")
    if not isinstance(extra, dict) or extra.get("kind") != KIND:
        raise CheckpointError(f"{where!r} is a model file, not a checkpoint of `advsvm serve`")
    if extra.get("version") not in (1, VERSION):
        raise CheckpointError(f"{where!r} has service checkpoint version {extra.get('version')!r}")
    return extra


def _count(value, what: str) -> int:
    """A JSON integer in [0, MAX_COUNT]: an offset, a counter or a sequence number."""
    if type(value) is not int:
        raise ValueError(f"{what} is {str(value)[:40]!r}, not an integer")
    if not 0 <= value <= MAX_COUNT:
        raise ValueError(f"{what} {str(value)[:40]} is out of range [0, 2**63 - 1]")
    return value


def _time(value, what: str) -> float | None:
    """An epoch time in seconds, or None."""
    if value is None:
        return None
    if type(value) not in (int, float) or not 0 <= value <= _MAX_EPOCH:
        raise ValueError(f"{what} {str(value)[:40]!r} is not a time in seconds")
    return float(value)


#: Year 9999 in epoch seconds: a later time in a checkpoint is not one a clock wrote.
_MAX_EPOCH = 253_402_300_799
#: Longest topic name Kafka allows; worker ids and topic ids are held to it too.
MAX_NAME = 249


def _name(value, what: str) -> str:
    if type(value) is not str or not 0 < len(value) <= MAX_NAME:
        raise ValueError(f"{what} {str(value)[:40]!r} is not a name of 1 to {MAX_NAME} "
                         "characters")
    return value


def _parse_group(group) -> dict | None:
    if group is None:
        return None
    group = _object(group, "group")
    run = _object(group.get("run") or {}, "the group's run")
    if len(_object(group["folded"], "the group's folded")) > _MAX_WORKERS:
        raise ValueError(f"{len(group['folded'])} peers folded in, over {_MAX_WORKERS}")
    return {
        "worker": _name(group["worker"], "worker id"),
        "seq": _count(group["seq"], "snapshot seq"),
        "folded": {_name(k, "peer id"): _count(v, f"samples of peer {k[:40]!r}")
                   for k, v in group["folded"].items()},
        "self_at_fold": _count(group["self_at_fold"], "self_at_fold"),
        "run": {
            "first": _time(run.get("first"), "run start"),
            "last": _time(run.get("last"), "run end"),
            "processed": _count(run.get("processed", 0), "messages processed"),
        },
    }


#: The most peers a snapshot may name (a group of more workers than this is not one machine
#: room's worth of consumers of one topic).
_MAX_WORKERS = 10_000
#: The most partitions a checkpoint may name, over all its topics.
_MAX_PARTITIONS = 100_000


def _partition(key) -> int:
    if type(key) is not str or not key.isascii() or not key.isdigit() or len(key) > 10:
        raise ValueError(f"partition {str(key)[:40]!r} is not a partition number")
    return int(key)


def check_labels(labels) -> list:
    """The two classes pinned by the operator: distinct labels of the message format
    (`ValueError` otherwise; `ServiceConfig` checks `--labels` with it, so that the service
    never writes a checkpoint it would refuse to read back)."""
    if not isinstance(labels, list) or len(labels) != 2 or labels[0] == labels[1]:
        raise ValueError("labels are not two distinct labels")
    for y in labels:
        if not (type(y) in (str, bool) or (type(y) is int and y in INT64)
                or (type(y) is float and math.isfinite(y))) or (
                type(y) is str and len(y) > MAX_TEXT_CHARS):
            raise ValueError(f"label {str(y)[:40]!r} is not a label the service takes (a "
                             f"string of at most {MAX_TEXT_CHARS} characters, a 64-bit integer, a "
                             "boolean or a finite number)")
    return labels


def parse_extra(meta: dict, where: str) -> dict:
    """The service fields of a checkpoint's metadata, validated: offsets and output ends
    (partitions as ints), topic_ids and output_ids, counters, width, labels, group;
    `CheckpointError` if they are invalid."""
    extra = _service_extra(meta, where)
    try:
        offsets = _parsed_offsets(_object(extra["offsets"], "offsets"), "offset")
        output_ends = _parsed_offsets(_object(extra.get("output_ends", {}), "output_ends"),
                                      "output end")
        held_output_ends = _parsed_held_ends(extra.get("held_output_ends", {}))
        saved = _object(extra["counters"], "counters")
        if extra["version"] == 1:
            saved = _v1_counters(saved)
        counters = new_counters()
        for key, value in saved.items():
            if key in ("dead_letters_by_code", "alerts_by_kind"):
                if len(value) > 100:
                    raise ValueError(f"{len(value)} kinds of {key}")
                counters[key] = {_name(code, "code"): _count(n, f"{key} {code[:40]}")
                                 for code, n in value.items()}
            elif key in counters:
                counters[key] = _count(value, f"counter {key}")
        monitor = extra.get("monitor")
        if monitor is not None and not isinstance(monitor, dict):
            raise ValueError("the monitor's state is not an object")
        topic_ids = _topic_ids(extra["topic_ids"], "topic_ids", "topic ids")
        # (optional: ids unknown read as unknown)
        output_ids = _topic_ids(extra.get("output_ids", {}), "output_ids", "output topic ids")
        width = extra["width"]
        if width is not None and (type(width) is not int
                                  or not 1 <= width <= margin.MAX_FEATURES_LIMIT):
            raise ValueError(f"width {str(width)[:40]!r} is out of range "
                             f"[1, {margin.MAX_FEATURES_LIMIT}]")
        labels = None if extra["labels"] is None else check_labels(extra["labels"])
        group = _parse_group(extra.get("group"))
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        detail = (f"{str(error.args[0])[:40]} is missing" if isinstance(error, KeyError)
                  else " ".join(str(error).split())[:200] or type(error).__name__)
        raise CheckpointError(f"invalid service metadata in {where}: {detail}") from None
    return {"offsets": offsets, "topic_ids": topic_ids, "counters": counters, "width": width,
            "labels": labels, "group": group, "monitor": monitor, "output_ends": output_ends,
            "output_ids": output_ids, "held_output_ends": held_output_ends}


def _topic_ids(saved, field: str, what: str) -> dict:
    """`{topic: id or None}` as saved in `field`, checked (`ValueError`): at most
    `_MAX_PARTITIONS` of them (`what`, in the error)."""
    if len(_object(saved, field)) > _MAX_PARTITIONS:
        raise ValueError(f"{len(saved)} {what}")
    return {_name(t, "topic"): (None if i is None else _name(i, "topic id"))
            for t, i in saved.items()}


def _object(value, what: str) -> dict:
    """`value` if it is a JSON object, else `ValueError` naming `what`."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} is a {type(value).__name__}, not an object")
    return value


def _by_partition(offsets: dict) -> dict:
    """`{topic: {partition: offset}}` as JSON: partitions as strings, in order."""
    return {topic: {str(p): int(o) for p, o in sorted(parts.items())}
            for topic, parts in sorted(offsets.items())}


def _parsed_offsets(saved, what: str) -> dict:
    """`_by_partition`'s JSON back, checked (`ValueError`): at most `_MAX_PARTITIONS`."""
    if sum(len(parts) for parts in saved.values()) > _MAX_PARTITIONS:
        raise ValueError(f"{what}s of over {_MAX_PARTITIONS} partitions")
    return {_name(topic, "topic"): {_partition(p): _count(o, f"{what} of {topic[:40]}[{p}]")
                                    for p, o in parts.items()}
            for topic, parts in saved.items()}


def _parsed_held_ends(saved) -> dict:
    """`held_output_ends` as saved, checked (`ValueError`): at most `_MAX_PARTITIONS` ends in
    all (optional: none in older checkpoints)."""
    held, count = {}, 0
    for topic, parts in _object(saved, "held_output_ends").items():
        for p, ends in _object(parts, "held_output_ends").items():
            ends = _parsed_offsets(_object(ends, "held_output_ends"), "held output end")
            count += 1 + sum(len(ends_of) for ends_of in ends.values())
            if count > _MAX_PARTITIONS:
                raise ValueError(f"held output ends of over {_MAX_PARTITIONS} partitions")
            held.setdefault(_name(topic, "topic"), {})[_partition(p)] = ends
    return held


def from_checkpoint(meta: dict, arrays: dict, where: str, limits: Limits | None = None
                    ) -> ServiceState:
    """The `ServiceState` of a checkpoint's metadata and arrays; `CheckpointError` if invalid
    or (with `limits`) beyond the operator's limits."""
    if limits is not None:
        limits.check(meta, where)
    fields = parse_extra(meta, where)
    cls = _model_class(meta, where)
    try:
        model = cls.from_checkpoint(meta, arrays)
    except CheckpointError as error:  # (a file's path, or a peer's snapshot, says which one)
        raise CheckpointError(f"{where}: {error}") from None
    if fields["width"] is not None and fields["width"] > model.max_features:
        # Arrays of that width hold more inputs than the model learns: every array message
        # would be a dead letter (the service refuses `--features` past `--max-features` too).
        raise CheckpointError(f"invalid service metadata in {where}: width {fields['width']} "
                              f"is more inputs than its model learns (max_features="
                              f"{model.max_features})")
    labels = fields["labels"]
    if labels is not None and not all(y in labels for y in model.classes):
        # A model under pinned labels learns those alone: one of other classes would refuse
        # every message the pinned labels let through, and they every one it knows.
        raise CheckpointError(f"invalid service metadata in {where}: its model's classes "
                              f"{list(model.classes)!r:.80} are not among its pinned labels "
                              f"{labels!r:.80}")
    return ServiceState(model=model, **fields)


def check_model_meta(meta: dict, where: str) -> None:
    """`CheckpointError` unless the metadata of a checkpoint whose arrays are not read (a
    peer's snapshot beyond the reader's limits, or over a basis it does not hold) is a
    model's: its class, options and labels, which a group compares with the others'."""
    cls = _model_class(meta, where)
    try:
        cls.check_meta(meta)
    except CheckpointError as error:
        raise CheckpointError(f"{where}: {error}") from None


def _model_class(meta: dict, where: str) -> type:
    """The model class a checkpoint's metadata names (`CheckpointError` if none)."""
    cls = _MODELS.get(meta.get("class"))
    if cls is None:
        raise CheckpointError(f"{where}: unknown model class {str(meta.get('class'))[:40]!r}")
    return cls


def load(directory: str | os.PathLike, limits: Limits | None = None) -> ServiceState | None:
    """The checkpoint in `directory`, or None if there is none; `CheckpointError` if invalid,
    or beyond `limits` (by default the library's: see `Limits`)."""
    path = checkpoint_path(directory)
    limits = Limits() if limits is None else limits
    try:
        meta, arrays = checkpoint.read(path, max_array_bytes=limits.array_bytes())
    except FileNotFoundError:
        if os.path.islink(path):  # a checkpoint elsewhere, out of reach: never start over
            raise CheckpointError(f"cannot read {path}: it is a symbolic link to "
                                  f"{os.readlink(path)}, which does not exist") from None
        return None
    return from_checkpoint(meta, arrays, path, limits)


def overridden(state: ServiceState, labels, width: int | None,
               topic: str | None = None, model=None, source: str = "checkpoint") -> list[str]:
    """What a restored checkpoint (or a group worker's own snapshot: `source`) overrides of
    the labels and the width the operator pinned (`--labels`, `--features`) and of the model
    the options make (`model`, a fresh one): the checkpoint wins, and the operator should
    hear so; and whether its model learned from another topic than `topic` (it goes on
    learning there)."""
    notes = []
    the = f"the {source}'s"
    if model is not None:
        kept = state.model
        if type(kept) is not type(model):
            notes.append(f"{the} model is an {type(kept).__name__}, kept: the model "
                         f"options make an {type(model).__name__}")
        else:
            given, saved = model._get_params(), kept._get_params()
            differ = [f"{name}={saved[name]!r} (the options: {given[name]!r})"
                      for name in given if name in saved and saved[name] != given[name]]
            if differ:
                notes.append(f"{the} model is kept with {', '.join(differ)}")
    if topic is not None and state.offsets and topic not in state.offsets:
        learned = ", ".join(repr(t) for t in sorted(state.offsets))
        notes.append(f"{the} model learned from {learned}, not from --topic "
                     f"{topic!r}: it goes on learning there")
    if labels is not None and list(labels) != state.labels:
        notes.append(f"--labels {' '.join(map(str, labels))} is ignored: {the} pinned "
                     f"labels are {state.labels!r}")
    if width is not None and width != state.width:
        notes.append(f"--features {width} is ignored: {the} width is {state.width!r}")
    return notes


def describe(path: str | os.PathLike) -> dict:
    """The checkpoint's metadata as plain JSON-able data (what `advsvm inspect` prints).

    `path` is the checkpoint directory or the checkpoint file itself.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = checkpoint_path(path)
    meta = checkpoint.read_meta(path)  # no array is decompressed
    extra = _service_extra(meta, path)
    # What the service would refuse, inspect refuses too (the arrays aside): a figure it
    # printed from such a file (a negative count, an accuracy past 100%) is none the service
    # resumes from.
    fields = parse_extra(meta, path)
    try:
        state = _object(meta.get("state", {}), "its state")
        n_learned = _count(state.get("n_learned", 0), "the model's n_learned")
    except ValueError as error:
        raise CheckpointError(f"invalid model state in {path}: {error}") from None
    counters = fields["counters"]
    learned = counters["learned"]
    return {
        "path": os.path.abspath(path),
        "created_at": extra.get("created_at"),
        "samples_learned": learned,
        "offsets": _by_partition(fields["offsets"]),
        "output_ends": _by_partition(fields["output_ends"]),
        "topic_ids": fields["topic_ids"],
        "counters": counters,
        "test_then_train_accuracy": counters["learned_correct"] / learned if learned else None,
        "width": fields["width"],
        "labels": fields["labels"],
        **({"group": extra["group"]} if fields["group"] is not None else {}),
        "model": {
            "class": meta.get("class"),
            "params": meta.get("params"),
            "n_learned": n_learned,
            "classes": state.get("labels"),
            "n_inputs": model_checkpoint.input_count(meta) or 0,
        },
        "file_bytes": os.path.getsize(path),
    }
