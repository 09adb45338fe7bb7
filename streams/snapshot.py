"""The records of a group's snapshot topic: snapshots, fences, and how they are parsed.

A record keyed by a worker id holds that worker's *snapshot*: its service checkpoint
(`river_advsvm.streams.state`, the package's safe format, as bytes) with the `group` bookkeeping
(`new_bookkeeping`), including the consumer group generation the worker published it in. A
record whose key starts with `fence/` is a *fence*: written by a reader to learn where the end
of the topic is. A worker's fence (`fence/<worker>`) also names the generation it was assigned
its partitions in (`fence_value`); readers use those to ignore a zombie's late snapshots
(`river_advsvm.streams.snapshot_topic`). The protocol that writes and reads these records is
`river_advsvm.streams.group`.

Examples
--------

>>> from river_advsvm.streams.snapshot import fence_key, fence_value, parse_fence
>>> parse_fence(fence_key("w1"), fence_value(7))
('w1', 7)
>>> parse_fence(fence_key("read-1f2e"), b"fence")  # a reader's fence: no generation
('read-1f2e', None)
>>> parse_fence(b"w1", b"...") is None  # a snapshot
True

"""

from __future__ import annotations

import dataclasses
import json

from river_advsvm.checkpoint import CheckpointError
from river_advsvm.streams import group_basis, merge
from river_advsvm.streams import state as state_io
from river_advsvm.support_basis import SharedBasis

__all__ = ["FENCE_PREFIX", "Snapshot", "fence_key", "fence_value", "new_bookkeeping", "newer",
           "parse_fence", "parse_snapshot"]

FENCE_PREFIX = b"fence/"


@dataclasses.dataclass
class Snapshot:
    """One published worker state, as read from the snapshot topic."""

    worker: str
    position: int  # offset in the snapshot topic
    meta: dict
    arrays: dict
    fields: dict  # `river_advsvm.streams.state.parse_extra`
    generation: int | None = None  # the consumer group generation it was published in
    # A coefficient snapshot's basis, `(epoch, key)` (`river_advsvm.streams.group_basis`), and
    # that basis if the reader holds it; its `arrays` are then the coefficients alone.
    over_basis: tuple[int, str] | None = None
    basis: SharedBasis | None = None
    # Why its model is beyond the reader's limits (a larger --budget or --max-features), if
    # it is: then only its metadata was read (`meta` in the stored form, no arrays).
    beyond_limits: str | None = None
    _whole: tuple[dict, dict] | None = dataclasses.field(default=None, repr=False)

    @property
    def coefficients_only(self) -> bool:
        """True for a snapshot over a basis the reader does not hold."""
        return self.over_basis is not None and self.basis is None

    @property
    def model_unread(self) -> str | None:
        """Why the reader cannot have this snapshot's model (its basis is not held, or it is
        beyond the reader's limits), or None. Such a snapshot counts for the claims and the
        totals (its worker did consume those messages), and its model is not folded."""
        if self.beyond_limits is not None:
            return f"its model is beyond this worker's limits: {self.beyond_limits}"
        if self.coefficients_only:
            return (f"its coefficients are over basis {self.over_basis[0]}, which this reader "
                    "does not hold")
        return None

    def whole(self) -> tuple[dict, dict]:
        """The checkpoint's metadata and arrays, support vectors included (a coefficient
        snapshot gets its basis' vectors back, once, when first asked)."""
        if self.model_unread is not None:
            raise CheckpointError(f"the snapshot {self.seq} of {self.worker}: "
                                  f"{self.model_unread}")
        if self.over_basis is None:
            return self.meta, self.arrays
        if self._whole is None:
            self._whole = group_basis.expanded(self.meta, self.arrays, self.basis)
        return self._whole

    @property
    def group(self) -> dict:
        return self.fields["group"]

    @property
    def seq(self) -> int:
        return self.group["seq"]

    @property
    def learned(self) -> int:
        return self.fields["counters"]["learned"]

    @property
    def consumed(self) -> int:
        return self.fields["counters"]["consumed"]

    @property
    def offsets(self) -> dict:
        return self.fields["offsets"]

    @property
    def folded(self) -> dict:
        return self.group["folded"]

    def state(self) -> state_io.ServiceState:
        """The full service state (the model is rebuilt: slower than reading the fields).
        `CheckpointError` for a snapshot of coefficients only (its basis was not held)."""
        return state_io.from_checkpoint(*self.whole(), f"snapshot of {self.worker}")


def new_bookkeeping(worker: str) -> dict:
    return {"worker": worker, "seq": 0, "folded": {}, "self_at_fold": 0,
            "run": {"first": None, "last": None, "processed": 0}}


def fence_key(name: str) -> bytes:
    """The key of a fence record written by `name`."""
    return FENCE_PREFIX + name.encode()


def fence_value(generation: int | None) -> bytes:
    """The value of a worker's fence: the consumer group generation it was assigned in."""
    return b"fence" if generation is None else json.dumps({"generation": generation}).encode()


def parse_fence(key: bytes | None, value: bytes | None) -> tuple[str, int | None] | None:
    """`(writer, generation)` of a fence record (generation None if it names none, as a
    reader's fences); None if the record is not a fence."""
    if key is None or not key.startswith(FENCE_PREFIX):
        return None
    writer = key[len(FENCE_PREFIX):].decode("utf-8", "replace")
    try:
        generation = json.loads(value)["generation"]
    except (TypeError, ValueError, KeyError):
        return writer, None
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        return writer, None
    return writer, generation


def parse_snapshot(key: bytes | None, value: bytes | None, position: int,
                   limits: state_io.Limits | None = None, held=None) -> Snapshot | None:
    """The snapshot in a record of the snapshot topic; None for fences and foreign records.
    With `limits` (the reader's), a snapshot beyond them is read as its metadata alone, its
    arrays never (`Snapshot.beyond_limits`: its claims count, its model is not read).

    A coefficient snapshot is checked against its basis if `held(epoch, key)` (a
    `group_basis.BasisChoice.held`) returns it (`group_basis.check_coefficients`: O(B + d),
    the vectors are put back only when asked, `Snapshot.whole`); otherwise it is kept as
    coefficients only (`Snapshot.coefficients_only`)."""
    if key is None or key.startswith(FENCE_PREFIX) or not value:
        return None
    worker = key.decode("utf-8", "replace")
    from river_advsvm import checkpoint, model_checkpoint

    where = f"snapshot {position} of {worker}"
    bound = checkpoint.MAX_ARRAY_BYTES if limits is None else limits.array_bytes()
    try:  # (with the input names back in the metadata, where merging reads them)
        meta, arrays = model_checkpoint.loads(value, max_array_bytes=bound)
    except CheckpointError as error:  # "checkpoint of N bytes: ...": say whose
        beyond = _beyond_limits(value, limits)
        if beyond is None:
            raise CheckpointError(f"{where}: {error}") from None
        # Its model stays unread, but not its offsets: the partitions it learned are handed
        # over from them (read as nothing, every message of them would be learned and
        # published again).
        meta, excess = beyond
        fields, generation = _group_fields(meta, worker, position, where)
        state_io.check_model_meta(meta, where)
        return Snapshot(worker, position, meta, {}, fields, generation, beyond_limits=excess)
    fields, generation = _group_fields(meta, worker, position, where)
    over_basis = _over_basis(meta, arrays, where, limits)
    basis = None if over_basis is None or held is None else held(*over_basis)
    if over_basis is None:
        state_io.from_checkpoint(meta, arrays, where, limits)  # a model can be made of it
    elif basis is not None:
        group_basis.check_coefficients(meta, arrays, basis, where)
    else:
        state_io.check_model_meta(meta, where)
    return Snapshot(worker, position, meta, arrays, fields, generation, over_basis, basis)


def _beyond_limits(value: bytes, limits) -> tuple[dict, str] | None:
    """`(metadata, what is over the limits)` of a sealed snapshot whose model is beyond
    `limits`; None for anything else (a corrupt record, or no limits)."""
    if limits is None:
        return None
    from river_advsvm import checkpoint

    try:
        meta = checkpoint.loads_meta(value)
    except CheckpointError:
        return None
    excess = limits.excess(meta)
    return None if excess is None else (meta, excess)


def _group_fields(meta: dict, worker: str, position: int, where: str) -> tuple[dict, int | None]:
    """The service fields of a snapshot's metadata and the generation it was published in,
    checked to be `worker`'s."""
    fields = state_io.parse_extra(meta, where)
    if fields["group"] is None or fields["group"]["worker"] != worker:
        raise CheckpointError(f"snapshot {position} keyed {worker!r} is not that worker's")
    # Not among the fields `river_advsvm.streams.state` parses: read from the metadata as written.
    generation = meta["extra"]["group"].get("generation")
    if generation is not None and (not isinstance(generation, int) or isinstance(generation, bool)
                                   or generation < 0):
        raise CheckpointError(f"{where}: invalid generation {generation!r}")
    return fields, generation


def _over_basis(meta: dict, arrays: dict, where: str, limits) -> tuple[int, str] | None:
    """`(epoch, key)` of a coefficient snapshot's basis, its coefficients checked as far as
    they can be without the basis; None for a whole snapshot."""
    marker = meta["extra"]["group"].get("basis")
    if marker is None:
        return None
    epoch = marker.get("epoch") if isinstance(marker, dict) else None
    key = marker.get("key") if isinstance(marker, dict) else None
    if type(epoch) is not int or epoch < 1 or not isinstance(key, str) or len(key) != 64:
        raise CheckpointError(f"{where}: invalid basis {str(marker)[:80]!r}")
    if limits is not None:
        limits.check(meta, where)
    try:
        merge.check_over_basis(meta, arrays, None if limits is None else limits.budget)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise CheckpointError(f"{where}: a snapshot over a basis: {error}") from None
    return epoch, key


def newer(a: Snapshot | None, b: Snapshot) -> bool:
    """True if `b` replaces `a` as its worker's latest: a higher seq, or the same seq later."""
    return a is None or (b.seq, b.position) > (a.seq, a.position)
