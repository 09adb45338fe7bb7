"""The basis a group's workers share, kept in the snapshot topic (`--group-model basis`).

With a basis `z_1..z_B` every worker holds, each worker's model is `f = sum_j a_j k(z_j, .)`
after a fold, and folding a peer costs `B` numbers (`river_advsvm.support_basis`): no union of
vectors, no budget maintenance, whatever the size of the group.

Records. A basis is a record of the snapshot topic keyed `basis/<epoch>/<worker>` (the worker
that proposed it); its value is checkpoint bytes (the package's safe format) holding the
kernel, gamma, the number of input names in its metadata, and the vectors and the names'
table (`river_advsvm.name_table`) in arrays (a record with the encoded names in its metadata,
written before, is read too). Epochs count up from 1.

Choice. The group's basis is the first valid record of the highest epoch read so far: the topic
has one partition, so every reader sees the records in the same order and holds the same basis.
A record is valid if its vectors are finite, distinct, one column per name, no more than the
operator's budget and inputs (`river_advsvm.streams.state.Limits`: a peer's record never lifts
them), and their kernel matrix factorises; anything else is logged and skipped. A record of an
epoch not above the current one is a proposal that lost (or an old one): skipped.

Refresh. A worker proposes epoch `e + 1` when the group has no basis, while the basis is
smaller than its model and its budget (the group's first syncs), and then after
`refresh_every` of its own folds on the same basis (1 by default: about one new basis per
round of the group's syncs, since a fold over a basis newer than the worker's last fold does
not count): its own model's vectors, filled up to its
budget with the vectors of the peers it is folding, largest coefficient first
(`proposed_vectors`). It proposes, then reads past its record; whichever record came first is
the group's new basis.

Projection. A snapshot whose vectors are the current basis is folded by its coefficients alone.
Any other (made on an older basis, or a model that learned since) is projected onto the current
one first (`river_advsvm.streams.merge.project`: exact in the kernel's space, loss reported).

Deletion. Each proposal also deletes the proposer's own records of epochs older than every
basis a reader keeps (records without a value, which compaction turns into deletions), so the
topic holds a bounded number of bases per worker.

Coefficient snapshots. Once a worker holds the group's basis, the snapshot it publishes carries
its model projected onto that basis, without the vectors (`coefficient_snapshot`): the `B`
coefficients, the bias and the rest of the model's and the service's metadata (counters,
offsets, the group bookkeeping), with the basis' epoch and key in `extra.group.basis`. A
reader that holds that basis (the current one or one of the `KEPT_EPOCHS` before it) checks
the snapshot against it (`check_coefficients`, O(B + d)), folds it by its coefficients, and
puts the basis' vectors back only when it needs the whole model (`expanded`); a snapshot over
a basis it does not hold still counts for the claims and totals, but its model is not folded.
The local checkpoint stays whole.

Examples
--------

>>> import numpy as np
>>> from river_advsvm import inputs
>>> from river_advsvm.streams.group_basis import BasisChoice, basis_record
>>> names = [inputs.encode_name(n) for n in ("a", "b", "c")]  # as checkpoints hold them
>>> key, value = basis_record(1, "w0", "rbf", 0.5, np.eye(3, dtype=np.float32), names)
>>> key
b'basis/1/w0'
>>> choice = BasisChoice()
>>> choice.take(key, value, position=7)
True
>>> choice.epoch, choice.basis.size, choice.proposer
(1, 3, 'w0')
>>> choice.take(*basis_record(1, "w1", "rbf", 0.5, 2 * np.eye(3, dtype=np.float32)[:2], names),
...             position=8)  # the same epoch again: the first record won
False

"""

from __future__ import annotations

import logging
import math

import numpy as np

from river_advsvm import checkpoint, inputs, name_table
from river_advsvm.checkpoint import CheckpointError
from river_advsvm.kernels import KERNELS
from river_advsvm.streams import merge
from river_advsvm.streams import state as state_io
from river_advsvm.support_average import saved_without_orphans
from river_advsvm.support_basis import SharedBasis

__all__ = ["BASIS_PREFIX", "KEPT_EPOCHS", "BasisChoice", "basis_record", "check_coefficients",
           "coefficient_snapshot", "expanded", "parse_basis", "proposed_vectors"]

log = logging.getLogger(__name__)

BASIS_PREFIX = b"basis/"
#: Bases a reader keeps before the current one: a snapshot is made over the basis its worker
#: held, which a newer proposal may have replaced by the time the snapshot is read.
KEPT_EPOCHS = 4
#: The largest epoch a basis record may name (as for offsets and counters): a record naming
#: more is refused, so that a writer cannot push the group's epochs out of that range.
MAX_EPOCH = 2**63 - 1


def basis_record(epoch: int, worker: str, kernel: str, gamma: float, vectors: np.ndarray,
                 names: list) -> tuple[bytes, bytes]:
    """The key and value of the record proposing `vectors` (columns: the encoded `names`) as
    the group's basis of `epoch`. The names are in arrays (a million of up to 1000
    characters is past what the metadata holds)."""
    meta = {"basis": {"epoch": int(epoch), "kernel": kernel, "gamma": float(gamma),
                      "names": len(names)}}
    text, lengths = name_table.to_arrays([name_table.entry(n) for n in names])
    return (BASIS_PREFIX + f"{int(epoch)}/{worker}".encode(),
            checkpoint.dumps(meta, {"vectors": np.ascontiguousarray(vectors),
                                    "names_text": text, "names_lengths": lengths}))


def parse_basis(key: bytes | None, value: bytes | None, limits=None
                ) -> tuple[int, str, SharedBasis] | None:
    """`(epoch, proposer, basis)` of a basis record; None if the record is not one.
    `CheckpointError` if it is one but invalid, or over `limits` (a `state.Limits`: at most
    `budget` vectors of at most `max_features` inputs)."""
    if key is None or not key.startswith(BASIS_PREFIX):
        return None
    where = f"basis record {key[:80].decode('utf-8', 'replace')!r}"
    budget = None if limits is None else limits.budget
    max_inputs = None if limits is None else limits.max_features

    def bound(meta: dict) -> int:
        names = meta.get("basis", {}).get("names") if isinstance(meta, dict) else None
        count = names if type(names) is int else len(names) if isinstance(names, list) else -1
        if count < 0:
            raise CheckpointError("no input names")
        if max_inputs is not None and count > max_inputs:
            raise CheckpointError(f"{count} inputs, over --max-features ({max_inputs})")
        rows = checkpoint.MAX_ARRAY_BYTES // 8 if budget is None else budget
        table = name_table.max_bytes(count) if type(names) is int else 0
        return 8 * rows * max(1, count) + table

    try:
        meta, arrays = checkpoint.loads(value or b"", max_array_bytes=bound)
        fields = meta["basis"]
        epoch, kernel, gamma, names = (fields["epoch"], fields["kernel"], fields["gamma"],
                                       fields["names"])
        if type(names) is int:  # in arrays, as `basis_record` writes them
            arrays = dict(arrays)
            text, lengths = arrays.pop("names_text", None), arrays.pop("names_lengths", None)
            if text is None or lengths is None:
                raise ValueError("its names' table is missing")
            names = name_table.from_arrays(text, lengths)
            if len(names) != fields["names"]:
                raise ValueError(f"{len(names)} names in its table, its metadata says "
                                 f"{fields['names']}")
        if type(epoch) is not int or not 1 <= epoch <= MAX_EPOCH:
            raise ValueError(f"invalid epoch {str(epoch)[:40]}")
        if key[len(BASIS_PREFIX):].split(b"/", 1)[0] != str(epoch).encode():
            raise ValueError("its key names another epoch")
        if kernel not in KERNELS or not isinstance(gamma, float) or not 0 < gamma < math.inf:
            raise ValueError(f"invalid kernel {kernel!r} or gamma {gamma!r}")
        decoded = [inputs.decode_name(n) for n in names]
        if len(set(map(repr, decoded))) != len(decoded):
            raise ValueError("duplicate input names")
        inputs.check_storable_names(decoded)  # the inputs of every model averaged over it
        vectors = arrays.get("vectors")
        if set(arrays) != {"vectors"} or vectors.ndim != 2 \
                or vectors.dtype not in (np.float32, np.float64):
            raise ValueError("expected one float32 or float64 array of vectors")
        if vectors.shape[1] != len(names):
            raise ValueError(f"{vectors.shape[1]} columns for {len(names)} input names")
        if budget is not None and len(vectors) > budget:
            raise ValueError(f"{len(vectors)} vectors, over --budget ({budget})")
        basis = SharedBasis(kernel, gamma, vectors, names)  # finite, distinct, factorises
    except CheckpointError as error:
        raise CheckpointError(f"{where}: {error}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise CheckpointError(f"{where}: {error}") from None
    proposer = key[len(BASIS_PREFIX):].split(b"/", 1)[-1].decode("utf-8", "replace")
    return epoch, proposer, basis


def proposed_vectors(own: tuple[dict, dict], peers: list[tuple[dict, dict]],
                     size: int) -> np.ndarray:
    """The vectors a worker proposes as the group's next basis: its own model's (checkpoint
    metadata and arrays), distinct, filled up to `size` with the vectors of the `peers` (the
    snapshots it is folding) that it lacks, largest `|coefficient|` first. The columns are the
    own model's inputs: a peer's other inputs are dropped, its missing ones are 0."""
    meta, arrays = own
    names = meta["state"]["names"]
    vectors = np.asarray(arrays["vectors"])
    _, first = np.unique(vectors, axis=0, return_index=True)
    vectors = vectors[np.sort(first)]  # distinct rows, in order
    known = {row.tobytes() for row in vectors}
    candidates, weights = [], []
    for peer_meta, peer_arrays in peers:
        store = peer_meta["state"]["model"].get("store")
        if store is None:
            continue
        rows = in_columns(peer_meta, np.asarray(peer_arrays["vectors"], vectors.dtype), names)
        candidates.append(rows)
        weights.append(np.abs(float(store["scale"]) * np.asarray(peer_arrays["alpha"])))
    chosen = []
    if candidates and len(vectors) < size:
        rows, weights = np.concatenate(candidates), np.concatenate(weights)
        for i in np.argsort(-weights, kind="stable"):
            key = rows[i].tobytes()
            if key not in known:
                known.add(key)
                chosen.append(rows[i])
                if len(vectors) + len(chosen) == size:
                    break
    return np.concatenate([vectors, np.array(chosen, dtype=vectors.dtype)]) if chosen else vectors


def coefficient_snapshot(meta: dict, arrays: dict, basis: SharedBasis, epoch: int
                         ) -> tuple[dict, dict]:
    """The snapshot of a support-vector checkpoint (metadata with a service's `extra.group`,
    and arrays) over the group's `basis` of `epoch`: the model projected onto the basis
    (`merge.project`), as its coefficients and metadata only. `ValueError` if the model cannot
    be projected onto it."""
    member, _ = merge.over_basis(meta, arrays, basis)
    meta, arrays = merge.average([(meta, member, 1.0)], meta["state"]["n_learned"], basis=basis)
    meta["extra"]["group"]["basis"] = {"epoch": int(epoch), "key": basis.key}
    coefficients = {"alpha": arrays["alpha"]}
    if "average_coefficients" in arrays:
        coefficients["average_alpha"] = arrays["average_coefficients"]
    return meta, coefficients


def check_coefficients(meta: dict, arrays: dict, basis: SharedBasis, where: str) -> None:
    """`CheckpointError` unless a coefficient snapshot (`coefficient_snapshot`) is one over
    `basis`: its key, one finite coefficient per vector, inputs that start with the basis',
    and metadata a model can be made of (checked on a model of the basis' first vector alone,
    with coefficient 0: O(d), where the model over the basis would cost O(B^2 d))."""
    try:
        _check_fit(meta, arrays, basis)
        store = dict(meta["state"]["model"]["store"], size=1, scale=1.0, squared_norm=0.0,
                     stored_since_norm=0, cursor=0)
        model = dict(meta["state"]["model"], store=store)
        vectors = np.zeros((1, len(meta["state"]["names"])), dtype=basis.vectors.dtype)
        vectors[0, : basis.vectors.shape[1]] = basis.vectors[0]
        one = {**meta, "state": {**meta["state"], "model": model}}
        one_arrays = {"vectors": vectors, "alpha": np.zeros(1)}
        if "average_alpha" in arrays:  # (its scalars are checked with the model's)
            one_arrays.update(saved_without_orphans(np.zeros(1), vectors.shape[1],
                                                    vectors.dtype))
        state_io.from_checkpoint(one, one_arrays, where)
    except (KeyError, TypeError, ValueError, AttributeError) as error:  # CheckpointError too
        raise CheckpointError(f"{where}: {error}") from None


def _check_fit(meta: dict, arrays: dict, basis: SharedBasis) -> None:
    """`ValueError` unless the coefficient snapshot `meta`, `arrays` is one over `basis`."""
    if meta["extra"]["group"]["basis"]["key"] != basis.key:
        raise ValueError("it was made over another basis")
    if list(meta["state"]["names"][: len(basis.names)]) != basis.names:
        raise ValueError("its inputs do not start with the basis'")
    merge.check_over_basis(meta, arrays, basis.size)
    if len(arrays["alpha"]) != basis.size:
        raise ValueError(f"expected {basis.size} coefficients, got {len(arrays['alpha'])}")
    if not meta["state"]["started"]:
        raise ValueError("a model that has learned nothing has no coefficients")
    store, params = meta["state"]["model"]["store"], meta["params"]
    if (store["kernel"], store["gamma"]) != (basis.kernel, basis.gamma) \
            or params.get("dtype") != basis.vectors.dtype.name \
            or (params.get("budget") is not None and params["budget"] < basis.size):
        raise ValueError("its kernel, gamma, dtype or budget do not fit the basis")


def expanded(meta: dict, arrays: dict, basis: SharedBasis) -> tuple[dict, dict]:
    """The whole checkpoint of a coefficient snapshot (`coefficient_snapshot`) over `basis`:
    its vectors are the basis' (0 in the inputs the basis lacks), its norm recomputed from the
    coefficients. `CheckpointError` if the snapshot does not fit the basis."""
    try:
        _check_fit(meta, arrays, basis)
        meta = {**meta, "extra": {**meta["extra"],
                                  "group": dict(meta["extra"]["group"])}}
        del meta["extra"]["group"]["basis"]
        return merge.average([(meta, dict(arrays), 1.0)], meta["state"]["n_learned"],
                             basis=basis)
    except (KeyError, TypeError, ValueError, AttributeError) as error:  # IncompatibleModels too
        raise CheckpointError(f"a snapshot over basis {basis.key[:12]}: {error}") from None


def in_columns(meta: dict, vectors: np.ndarray, names: list) -> np.ndarray:
    """A model's vectors over the inputs `names` (inputs it lacks are 0; others dropped)."""
    own = {repr(n): i for i, n in enumerate(meta["state"]["names"])}
    out = np.zeros((len(vectors), len(names)), dtype=vectors.dtype)
    for j, name in enumerate(names):
        i = own.get(repr(name))
        if i is not None:
            out[:, j] = vectors[:, i]
    return out


class BasisChoice:
    """The group's current basis, from the basis records read in the topic's order.

    Parameters
    ----------
    limits
        The reader's `river_advsvm.streams.state.Limits`: records beyond them are refused.

    """

    def __init__(self, limits=None):
        self.limits = limits
        self.basis: SharedBasis | None = None
        self.epoch = 0
        self.kept: dict[int, SharedBasis] = {}  # the current basis and up to KEPT_EPOCHS before
        self.proposer: str | None = None
        self.position: int | None = None
        self.invalid = 0
        # The basis records in the topic, by key: the epoch their key names (see `stale_keys`).
        self.records: dict[bytes, int] = {}

    def take(self, key: bytes | None, value: bytes | None, position: int) -> bool:
        """Read one record; True if it became the group's basis. A record without a value
        deletes its key (compaction then drops the record)."""
        if key is None or not key.startswith(BASIS_PREFIX):
            return False
        named = key[len(BASIS_PREFIX):].split(b"/", 1)[0]
        if value is None:
            self.records.pop(key, None)
            return False
        if named.isdigit() and len(named) < 19:
            self.records[key] = int(named)
        if named.isdigit() and len(named) < 19 and int(named) <= self.epoch:
            return False  # a proposal that lost, or an old basis: not even read
        try:
            parsed = parse_basis(key, value, self.limits)
        except CheckpointError as error:
            self.invalid += 1
            if self.invalid & (self.invalid - 1) == 0:  # (as the snapshots' reader does)
                log.error("ignoring record %d, not a usable basis (%d so far): %s", position,
                          self.invalid, " ".join(str(error).split())[:300])
            return False
        if parsed is None:
            return False
        epoch, proposer, basis = parsed
        if epoch <= self.epoch:
            return False  # a proposal that lost, or an old basis
        self.basis, self.epoch, self.proposer, self.position = basis, epoch, proposer, position
        self.kept[epoch] = basis
        for old in [e for e in self.kept if e < epoch - KEPT_EPOCHS]:
            del self.kept[old]
        log.info("basis %d of the group: %d vectors from %s", epoch, basis.size, proposer)
        return True

    def stale_keys(self, worker: str) -> list[bytes]:
        """The keys of `worker`'s basis records older than every basis a reader keeps: its
        own to delete (each record is a whole basis, and its key, unique to the epoch, is
        never compacted away otherwise)."""
        suffix = b"/" + worker.encode("utf-8")
        return [key for key, epoch in self.records.items()
                if key.endswith(suffix) and epoch < self.epoch - KEPT_EPOCHS]

    def held(self, epoch, key) -> SharedBasis | None:
        """The group's basis of `epoch` if this reader still holds it and its key is `key`."""
        basis = self.kept.get(epoch) if type(epoch) is int else None
        return basis if basis is not None and basis.key == key else None
