"""Checkpoints of the margin classifiers: the model's state as JSON metadata and arrays.

`CheckpointMixin` gives `MarginClassifier` (and so `AdvKernelSVM` and `AdvLinearSVM`) its
`save`/`load` and `to_checkpoint`/`from_checkpoint`. It writes what the base class holds (input
names, labels, bias, counts, calibration, held-back rows) and asks the model for the rest
through two hooks: `_model_state()` returns `(scalars, arrays)`, `_restore_model_state` takes
them back and checks them. `_max_state_bytes()` bounds the arrays a checkpoint of a model with
given parameters may hold, so that a hostile file is refused before it is read. The file format
itself is `river_advsvm.checkpoint`'s.

A checkpoint has two forms. `to_checkpoint` returns the one that names inputs in its metadata
(what `river_advsvm.streams.merge` edits): the input names (`state.names`, each as
`inputs.encode_name` encodes it), the held-back rows of a warm-up (`state.held`, each
`[names, values, label]`) and an `AdvKernelSVM`'s numbers by input name (the `gamma` parameter
when it is a dict, `state.model.gamma_by_name` and `state.model.input_centres`, as
`[name, number]` pairs; a `gamma` dict naming only str inputs as a JSON object). All of these
grow with the inputs, a million names of up to 1000 characters, held rows of as many: far past
what a file's metadata may hold (`checkpoint.MAX_META_BYTES`). So a file holds the *stored*
form (`pack`), where each of them is a number in the metadata and plain numeric arrays:

- `names_text`, `names_lengths`: every input name the checkpoint refers to, once
  (`river_advsvm.name_table`); the model's inputs first, in the order of their columns
  (`state.names` is their number), then the other names of the held rows and of the numbers
  by name;
- `held_lengths` (int32), `held_names` (int32), `held_values` (float64), `held_labels`
  (uint8): the held rows (`state.held` is their number): how many inputs each has, their names
  (positions in the table) and values, and its label (a position in `state.labels`);
- `gamma_names`, `gamma_values`, and the same for `gamma_by_name` and `input_centres`:
  positions in the table (int32) and numbers (float64). Those two fields hold their number; a
  `gamma` dict parameter reads `"per-input"`.

`unpack` turns the stored form back into `to_checkpoint`'s, checking every array;
`from_checkpoint` takes either, and a checkpoint written before names were stored in arrays is
read as it always was. The bound on a checkpoint's arrays covers the tables: it is what a model
with its parameters can hold, computed before any array is read.

"""

from __future__ import annotations

import contextlib
import math
import typing

import numpy as np

from river_advsvm import checkpoint, inputs, name_table
from river_advsvm.labels import as_label

__all__ = ["GAMMA_IN_ARRAYS", "MAX_ABS_BIAS", "MAX_ABS_MARGIN", "CheckpointMixin", "dumps",
           "input_count", "loads", "pack", "unpack"]

#: The largest bias a checkpoint may hold: a bias beyond any input's magnitude is not one
#: learning reaches, and far below it margins and their gradients stay finite.
MAX_ABS_BIAS = inputs.MAX_ABS_VALUE
#: The largest margin a restored model's weights may give an input within
#: `inputs.MAX_ABS_VALUE`: learning adds at most `MAX_STEP` times an input to a weight per
#: sample, never near it; past ~1e154 the calibration's squared gradient overflows, and the
#: model can no longer be saved.
MAX_ABS_MARGIN = 1e100
# More held-back rows than any warm-up holds.
_MAX_HELD_ROWS = 1_000_000
#: A stored checkpoint's `gamma` parameter when it is a dict: its bandwidths are in arrays.
GAMMA_IN_ARRAYS = "per-input"
# The fields of numbers by input name, and where the metadata holds them.
_BY_NAME = {"gamma": ("params", "gamma"),
            "gamma_by_name": ("state", "model", "gamma_by_name"),
            "input_centres": ("state", "model", "input_centres")}
_HELD_ARRAYS = ("held_lengths", "held_names", "held_values", "held_labels")
_TABLE_ARRAYS = frozenset(["names_text", "names_lengths", *_HELD_ARRAYS,
                           *(f"{field}_{part}" for field in _BY_NAME
                             for part in ("names", "values"))])
# Bytes of one number by name (an int32 position and a float64 value), and of a held row's
# length (int32) and label (uint8).
_PAIR_BYTES = 12
_ROW_BYTES = 5


class CheckpointMixin:
    """`save`, `load` and their in-memory forms, for a `MarginClassifier`."""

    #: Parameters added after a model's first release, with the value that makes a model saved
    #: without them learn as it did (the default may differ).
    _PARAMS_BEFORE_THEY_EXISTED: typing.ClassVar[dict] = {}

    def _model_state(self) -> tuple[dict, dict]:
        """The subclass' own state: JSON scalars and numpy arrays."""
        raise NotImplementedError

    def _restore_model_state(self, scalars: dict, arrays: dict) -> None:
        """Take back `_model_state`'s output, checking it (`ValueError` if it is invalid)."""
        raise NotImplementedError

    def to_checkpoint(self, extra: dict | None = None) -> tuple[dict, dict]:
        """The model as checkpoint metadata and arrays, its input names in the metadata (see
        the module's docs); `pack` gives the form `save` writes."""
        scalars, arrays = self._model_state()
        # Held rows repeat their names (rows of one batch share the list): each is encoded
        # once, and `pack` meets the same objects again. (Exact str and int only: 1, 1.0 and
        # True are one key to a dict, three names to the model.)
        by_name: dict = {}
        by_list: dict[int, list] = {}

        def encode_one(name):
            if type(name) is not str and type(name) is not int:
                return inputs.encode_name(name)
            if name not in by_name:
                by_name[name] = inputs.encode_name(name)
            return by_name[name]

        def encode(names: list) -> list:
            if id(names) not in by_list:  # (the lists live on in the held rows)
                by_list[id(names)] = [encode_one(n) for n in names]
            return by_list[id(names)]

        state = {
            "names": [encode_one(n) for n in self._index.names],
            "labels": list(self._labels),
            "bias": self._bias,
            "n_learned": self._n_learned,
            "started": self._started,
            "temperature": [self._calibration.scale, self._calibration.grad_squares],
            "held": [[encode(names), row.tolist(), y] for names, row, y in self._held],
            "collapse": self._collapse.state(),
            "model": scalars,
        }
        if self._schedule.group_clock[1] != 1.0:  # a worker of a group (`group_steps`)
            state["group_clock"] = list(self._schedule.group_clock)
        meta = {
            "class": type(self).__name__,
            "params": self._checkpoint_params(),
            "state": state,
            "extra": extra or {},
        }
        return meta, arrays

    @classmethod
    def from_checkpoint(cls, meta: dict, arrays: dict) -> typing.Self:
        """Rebuild a model from `to_checkpoint`'s output; raises `CheckpointError` if invalid.

        Every parameter and size is checked against the bounds the model enforces while
        learning before anything large is allocated, so a hostile checkpoint cannot make the
        reader allocate more than a model could legitimately hold.
        """
        meta, arrays = unpack(meta, arrays)
        with _invalid_as_checkpoint_error(cls.__name__):
            model = cls._unlearned(meta)
            state = meta["state"]
            names = [inputs.decode_name(n) for n in state["names"]]
            if len(names) > model.max_features:
                raise ValueError(f"{len(names)} inputs, more than its model's "
                                 f"max_features={model.max_features}")
            if len(set(names)) != len(names):
                raise ValueError("duplicate feature names")
            inputs.check_name_texts(names)  # (their encodings are checked as they are hashed)
            model._labels = _labels(state)
            numbers = [state["bias"], *state["temperature"]]
            if not (inputs.is_whole(state["n_learned"]) and len(numbers) == 3
                    and all(inputs.is_number(v) for v in numbers)):
                # (float() and int() would take "1", true or 2.5 as a bias or a count)
                raise ValueError("n_learned must be an int, and the bias and temperature "
                                 "numbers")
            model._bias = float(state["bias"])
            model._n_learned = state["n_learned"]
            model._started = state["started"]
            if type(model._started) is not bool:
                raise ValueError(f"started must be true or false, got {model._started!r:.40}")
            if names and not model._started:  # (inputs come with the first sample learned)
                raise ValueError(f"{len(names)} inputs, but the model has not started learning")
            model._calibration.scale, model._calibration.grad_squares = map(
                float, state["temperature"]
            )
            hashes = model._index.hash_names(names)
            model._index.add(names, hashes)
            room = model._rows_to_hold()  # a warm-up's rows (0 without one), none held yet
            model._held = [model._held_row(*row) for row in state.get("held", [])]
            model._check_held(names, room)
            if "collapse" in state:  # (not in checkpoints from before it was saved)
                model._collapse.restore(state["collapse"])
            if "group_clock" in state:
                model._schedule.join_group(*state["group_clock"], n_learned=model._n_learned)
            model._restore_model_state(state["model"], arrays)
            reach = model._margin_reach()
            if not reach <= MAX_ABS_MARGIN:
                raise ValueError(f"its weights give margins up to {reach:.3g}, past the "
                                 f"{MAX_ABS_MARGIN:g} a model may reach")
            numbers_ok = [model._bias, model._calibration.scale, model._calibration.grad_squares]
            if not all(math.isfinite(v) for v in numbers_ok) or model._n_learned < 0:
                raise ValueError("non-finite or negative state")
            if abs(model._bias) > MAX_ABS_BIAS or model._n_learned > 2**63 - 1:
                raise ValueError(f"bias {model._bias:g} or samples {model._n_learned} out of "
                                 f"range (|bias| <= {MAX_ABS_BIAS:g})")
            if not (model._calibration.scale > 0 and model._calibration.grad_squares >= 0):
                raise ValueError("invalid temperature")
        return model

    @classmethod
    def check_meta(cls, meta: dict) -> None:
        """`CheckpointError` unless the metadata's class, parameters and labels are a model's:
        what a reader compares of a checkpoint whose arrays it does not read."""
        with _invalid_as_checkpoint_error(cls.__name__):
            cls._unlearned(meta, sizing=True)
            _labels(meta["state"])
            if not isinstance(meta["state"]["model"], dict):
                raise TypeError("the model's state must be a mapping")

    @classmethod
    def _unlearned(cls, meta: dict, sizing: bool = False) -> typing.Self:
        """A new model with the checkpoint's parameters (`CheckpointError` if the checkpoint is
        of another class; `KeyError`, `TypeError` or `ValueError` for bad parameters).

        With `sizing`, the model is only asked for the sizes its parameters allow, and the
        metadata may be of the stored form before its arrays are read: a `gamma` dict kept in
        them counts as 'scale', whose model may hold the most names (`_named_value_bounds`).
        """
        if not isinstance(meta, dict) or meta.get("class") != cls.__name__:
            found = meta.get("class") if isinstance(meta, dict) else None
            raise checkpoint.CheckpointError(f"checkpoint holds a {found!r}, not a {cls.__name__} "
                                             "(river_advsvm.load reads any model of the package)")
        params = meta["params"]
        if not isinstance(params, dict):
            raise TypeError("params must be a mapping")
        if sizing and params.get("gamma") == GAMMA_IN_ARRAYS:
            params = {**params, "gamma": "scale"}
        # A checkpoint written before a parameter existed learns as it did then.
        return cls(**cls._params_from_checkpoint({**cls._PARAMS_BEFORE_THEY_EXISTED, **params}))

    def _checkpoint_params(self) -> dict:
        """The parameters as the checkpoint's JSON holds them (`_params_from_checkpoint` reads
        them back)."""
        return self._get_params()

    @classmethod
    def _params_from_checkpoint(cls, params: dict) -> dict:
        """The parameters `_checkpoint_params` wrote, as the constructor takes them."""
        return params

    def _held_row(self, names, values, y) -> tuple:
        names = [inputs.decode_name(n) for n in names]
        if len(names) > self.max_features or len(self._held) >= _MAX_HELD_ROWS:
            raise ValueError("a held-back row is larger than the model allows")
        names, row = inputs.dict_values(dict(zip(names, values, strict=True)))
        return names, row, as_label(y)

    def _check_held(self, names: list, room: int) -> None:
        """`ValueError` unless the held rows are ones the model could hold: fewer than its
        warm-up's `room`, only before it started, and with the inputs within `max_features`."""
        if not self._held:
            return
        if self._started:
            raise ValueError("a model that started learning holds no rows back")
        if len(self._held) >= room:
            raise ValueError(f"{len(self._held)} held-back rows, but this model holds "
                             + (f"at most {room - 1}" if room else "none (it has no warm-up)"))
        # Each held row is learned as one of the classes once the warm-up ends (`sign_of`):
        # any other label would be learned as the negative class (and refused at the next save).
        stray = [y for _, _, y in self._held if y not in self._labels]
        if stray:
            raise ValueError(f"a held row's label {stray[0]!r:.40} is not one of the model's "
                             f"classes {self._labels!r:.80}")
        held = {n for row_names, _, _ in self._held for n in row_names}
        inputs.check_storable_names(list(held))  # inputs once the warm-up ends
        if len(held.union(names)) > self.max_features:
            raise ValueError(f"the held rows and the model have {len(held.union(names))} "
                             f"inputs, more than max_features={self.max_features}")

    def _max_state_bytes(self) -> int:
        """The most bytes of arrays a checkpoint of a model with these parameters can hold."""
        raise NotImplementedError

    def _margin_reach(self) -> float:
        """A bound on `|f(x)|` over the inputs learning takes (`MAX_ABS_MARGIN` bounds it in
        a checkpoint)."""
        raise NotImplementedError

    def _named_value_bounds(self) -> tuple[int, int]:
        """The most input names a checkpoint of this model holds beyond its inputs (and the
        inputs of its held rows), and the most numbers by input name: none by default (see
        `AdvKernelSVM`'s bandwidths)."""
        return 0, 0

    def _max_table_bytes(self) -> int:
        """The most bytes of the arrays that hold a stored checkpoint's names (see the module's
        docs), for a new model (its parameters), in either state it may be saved in: holding
        rows back (fewer than its warm-up, each of at most `max_features` inputs, all of them
        at most `max_features`), or not (its inputs, and names and numbers by name,
        `_named_value_bounds`)."""
        rows = max(self._rows_to_hold() - 1, 0)  # of a new model: its whole warm-up, but one
        holding = rows * (_ROW_BYTES + _PAIR_BYTES * self.max_features)
        beyond, by_name = self._named_value_bounds()
        named = name_table.max_bytes(beyond) + _PAIR_BYTES * by_name
        return name_table.max_bytes(self.max_features) + max(holding, named)

    @classmethod
    def checkpoint_array_bytes(cls, meta: dict) -> int:
        """The most array bytes a checkpoint with this metadata may hold, from its parameters
        alone: `checkpoint.read` refuses a file declaring more before reading any array. The
        names' arrays count only in the stored form (`pack`'s, a file's): `to_checkpoint`'s
        own output keeps the names in the metadata."""
        try:
            model = cls._unlearned(meta, sizing=True)
            return model._max_state_bytes() + (model._max_table_bytes() if _is_stored(meta)
                                                else 0)
        except checkpoint.CheckpointError:
            raise  # another class's checkpoint: its parameters are not the matter
        except (KeyError, TypeError, ValueError) as error:
            raise checkpoint.CheckpointError(
                f"invalid {cls.__name__} checkpoint parameters: {error}") from None

    def save(self, path, extra: dict | None = None) -> None:
        """Write the model to `path` atomically, in the safe format of `checkpoint`.

        `extra` is JSON metadata stored alongside (a service's offsets, say). The input names
        are stored in arrays (`pack`), however many and long they are.
        """
        checkpoint.write(path, *pack(*self.to_checkpoint(extra)))

    @classmethod
    def load(cls, path) -> typing.Self:
        """Read a model written by `save`. It predicts and learns exactly as the saved one."""
        return cls.from_checkpoint(
            *checkpoint.read(path, max_array_bytes=cls.checkpoint_array_bytes))


# -- the stored form ------------------------------------------------------------------------------


@contextlib.contextmanager
def _invalid_as_checkpoint_error(class_name: str):
    """What malformed metadata makes the reading code raise, as one `CheckpointError` (a
    `CheckpointError` raised inside passes as it is)."""
    try:
        yield
    except checkpoint.CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
            RecursionError) as error:
        raise checkpoint.CheckpointError(f"invalid {class_name} checkpoint: {error}") from None


def _labels(state: dict) -> list:
    """The model's labels in a checkpoint's state: at most two, distinct."""
    labels = [as_label(y) for y in state["labels"]]
    if len(labels) > 2 or len(set(labels)) != len(labels):
        raise ValueError(f"bad labels {labels!r}")
    return labels


def dumps(meta: dict, arrays: dict) -> bytes:
    """Checkpoint bytes of `to_checkpoint`'s output (or of its stored form): `checkpoint.dumps`
    of `pack`. Deterministic: the same state, the same bytes."""
    return checkpoint.dumps(*pack(meta, arrays))


def loads(data: bytes, *, max_array_bytes: checkpoint.ArrayBudget = checkpoint.MAX_ARRAY_BYTES
          ) -> tuple[dict, dict]:
    """`to_checkpoint`'s form of checkpoint bytes: `unpack` of `checkpoint.loads`
    (`CheckpointError` if they are not a valid checkpoint)."""
    return unpack(*checkpoint.loads(data, max_array_bytes=max_array_bytes))


def input_count(meta: dict) -> int | None:
    """The number of inputs of the model in checkpoint metadata of either form, without its
    arrays; None if the metadata names none."""
    state = meta.get("state") if isinstance(meta, dict) else None
    names = state.get("names") if isinstance(state, dict) else None
    if type(names) is int:
        return names
    return len(names) if isinstance(names, list) else None


def _is_stored(meta) -> bool:
    state = meta.get("state") if isinstance(meta, dict) else None
    return isinstance(state, dict) and type(state.get("names")) is int


def pack(meta: dict, arrays: dict) -> tuple[dict, dict]:
    """The stored form of `to_checkpoint`'s output, with every name in arrays (see the module's
    docs): what a file holds. A stored form is returned as it is. `ValueError` for metadata
    that is neither."""
    if _is_stored(meta):
        return meta, arrays
    state = meta["state"]
    if not isinstance(state.get("names"), list):
        raise ValueError("the checkpoint's input names are not a list")
    clash = _TABLE_ARRAYS & set(arrays)
    if clash:
        raise ValueError(f"the model's arrays {sorted(clash)} have the names of the tables'")
    table = _Table()
    if len(table.ids(state["names"])) != table.size:
        raise ValueError("the checkpoint names an input twice")
    meta = {**meta, "params": dict(meta["params"]),
            "state": {**state, "names": len(state["names"])}}
    if isinstance(state.get("model"), dict):
        meta["state"]["model"] = dict(state["model"])
    arrays = dict(arrays)
    held = state.get("held", [])
    meta["state"]["held"] = len(held)
    if held:
        arrays.update(_packed_rows(held, state["labels"], table))
    for field, path in _BY_NAME.items():
        parent = _parent(meta, path)
        value = None if parent is None else parent.get(path[-1])
        if field == "gamma":
            if isinstance(value, dict):  # str names, as given
                value = [[inputs.encode_name(n), g] for n, g in value.items()]
            if not isinstance(value, list):
                continue  # a number or 'scale'
            parent[path[-1]] = GAMMA_IN_ARRAYS
        elif value is None:
            continue
        else:
            parent[path[-1]] = len(value)
        if not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
            raise ValueError(f"{field} is not a list of [name, number] pairs")
        arrays[f"{field}_names"] = table.ids([n for n, _ in value])
        arrays[f"{field}_values"] = np.array([v for _, v in value], dtype=np.float64)
    arrays["names_text"], arrays["names_lengths"] = name_table.to_arrays(table.texts)
    return meta, arrays


class _Table:
    """The name table being built: each name's position, by its entry's text."""

    def __init__(self):
        self.texts: list[str] = []
        self.position: dict[str, int] = {}
        # Positions of a list of names already seen, and texts of encoded names (held rows
        # share both: see `to_checkpoint`), by the object: each kept alive by the metadata.
        self._lists: dict[int, tuple[list, np.ndarray]] = {}
        self._texts: dict[int, tuple[list, str]] = {}

    @property
    def size(self) -> int:
        return len(self.texts)

    def ids(self, encoded: list) -> np.ndarray:
        """The positions of these encoded names, added to the table where they are new."""
        known = self._lists.get(id(encoded))
        if known is not None and known[0] is encoded:
            return known[1]
        ids = np.empty(len(encoded), dtype=np.int32)
        texts = self._texts
        for i, name in enumerate(encoded):
            seen = texts.get(id(name))
            if seen is not None and seen[0] is name:
                text = seen[1]
            else:
                text = name_table.entry(name)
                texts[id(name)] = (name, text)
            position = self.position.get(text)
            if position is None:
                position = self.position[text] = len(self.texts)
                self.texts.append(text)
            ids[i] = position
        self._lists[id(encoded)] = (encoded, ids)
        return ids


def _packed_rows(held: list, labels: list, table: _Table) -> dict:
    """The arrays of the held rows `[names, values, label]`."""
    lengths = np.empty(len(held), dtype=np.int32)
    label_ids = np.empty(len(held), dtype=np.uint8)
    ids, values = [], []
    for i, (names, row, y) in enumerate(held):
        ids.append(table.ids(names))
        values.append(np.asarray(row, dtype=np.float64))
        if values[-1].shape != (len(names),):
            raise ValueError("a held row has not one value per input name")
        lengths[i] = len(names)
        label_ids[i] = _label_id(labels, y)
    return {"held_lengths": lengths, "held_names": np.concatenate(ids),
            "held_values": np.concatenate(values), "held_labels": label_ids}


def _label_id(labels: list, y) -> int:
    """The position in `labels` of a held row's label (the class it is, as `==` says)."""
    equal = [i for i, label in enumerate(labels) if label == y]
    exact = [i for i in equal if type(labels[i]) is type(y)]
    if not equal:
        raise ValueError(f"a held row's label {y!r:.40} is not one of the model's classes")
    return (exact or equal)[0]


def _parent(meta: dict, path: tuple) -> dict | None:
    """The mapping holding the field at `path` in the metadata, if there is one."""
    node = meta
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def unpack(meta: dict, arrays: dict) -> tuple[dict, dict]:
    """`to_checkpoint`'s form of a checkpoint: the names a stored form keeps in arrays back in
    its metadata, every array checked (`CheckpointError` if one is invalid). Any other
    metadata (an older checkpoint, `to_checkpoint`'s own form) is returned as it is."""
    if not _is_stored(meta):
        stray = _TABLE_ARRAYS & set(arrays)
        if stray:
            raise checkpoint.CheckpointError(
                f"its arrays {sorted(stray)} hold names, but its metadata names its inputs")
        return meta, arrays
    try:
        return _unpacked(meta, dict(arrays))
    except checkpoint.CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
            RecursionError) as error:
        detail = f"{error} is missing" if isinstance(error, KeyError) else error
        raise checkpoint.CheckpointError(f"invalid names in its arrays: {detail}") from None


def _take(arrays: dict, name: str, dtype) -> np.ndarray:
    """The array `name`, removed from `arrays`: one dimension of `dtype`."""
    if name not in arrays:
        raise ValueError(f"it lacks the array {name}")
    array = arrays.pop(name)
    if array.dtype != np.dtype(dtype) or array.ndim != 1:
        raise ValueError(f"{name} is not one dimension of {np.dtype(dtype).name}")
    return array


def _unpacked(meta: dict, arrays: dict) -> tuple[dict, dict]:
    state = meta["state"]
    encoded = name_table.from_arrays(_take(arrays, "names_text", np.uint8),
                                     _take(arrays, "names_lengths", np.uint16))
    n_inputs = state["names"]
    if not 0 <= n_inputs <= len(encoded):
        raise ValueError(f"{n_inputs} inputs, but {len(encoded)} names in the table")
    used = np.zeros(len(encoded), dtype=bool)
    used[:n_inputs] = True
    meta = {**meta, "state": {**state, "names": encoded[:n_inputs]}}
    if isinstance(meta.get("params"), dict):
        meta["params"] = dict(meta["params"])
    if isinstance(state.get("model"), dict):
        meta["state"]["model"] = dict(state["model"])
    rows = state.get("held", 0)
    if type(rows) is not int or rows < 0:
        raise ValueError(f"held is {str(rows)[:40]!r}, not a number of rows")
    if rows:
        meta["state"]["held"] = _unpacked_rows(arrays, rows, encoded, used, state["labels"])
    else:
        if any(name in arrays for name in _HELD_ARRAYS):
            raise ValueError("it has arrays of held rows, and no held row")
        meta["state"]["held"] = []
    for field, path in _BY_NAME.items():
        parent = _parent(meta, path)
        value = None if parent is None else parent.get(path[-1])
        stored = value == GAMMA_IN_ARRAYS if field == "gamma" else type(value) is int
        if not stored:
            if f"{field}_names" in arrays or f"{field}_values" in arrays:
                raise ValueError(f"it has arrays of {field}, and its metadata does not say so")
            if isinstance(value, list) or (field == "gamma" and isinstance(value, dict)):
                raise ValueError(f"{field} names inputs in its metadata, the others in arrays")
            continue
        ids = _take(arrays, f"{field}_names", np.int32)
        values = _take(arrays, f"{field}_values", np.float64)
        if values.shape != ids.shape or (field != "gamma" and len(ids) != value):
            raise ValueError(f"{field} has {len(ids)} names and {len(values)} numbers"
                             + ("" if field == "gamma" else f", its metadata says {value}"))
        _check_ids(ids, len(encoded), field)
        if len(np.unique(ids)) != len(ids):
            raise ValueError(f"{field} names an input twice")
        used[ids] = True
        pairs = [[encoded[i], v] for i, v in zip(ids.tolist(), values.tolist())]
        if field == "gamma":
            names = [inputs.decode_name(n) for n, _ in pairs]
            if all(isinstance(n, str) for n in names):  # as `to_checkpoint` writes them
                pairs = dict(zip(names, values.tolist()))
        parent[path[-1]] = pairs
    if not used.all():
        raise ValueError(f"{int((~used).sum())} names of its table are not used")
    leftover = _TABLE_ARRAYS & set(arrays)
    if leftover:
        raise ValueError(f"the arrays {sorted(leftover)} are not expected")
    return meta, arrays


def _check_ids(ids: np.ndarray, size: int, what: str) -> None:
    if ids.size and not (ids.min() >= 0 and ids.max() < size):
        raise ValueError(f"{what} refers to names beyond the {size} of the table")


def _unpacked_rows(arrays: dict, rows: int, encoded: list, used: np.ndarray,
                   labels: list) -> list:
    """The held rows `[names, values, label]` of their arrays."""
    lengths = _take(arrays, "held_lengths", np.int32)
    ids = _take(arrays, "held_names", np.int32)
    values = _take(arrays, "held_values", np.float64)
    label_ids = _take(arrays, "held_labels", np.uint8)
    if lengths.shape != (rows,) or label_ids.shape != (rows,):
        raise ValueError(f"{rows} held rows, but {len(lengths)} lengths and {len(label_ids)} "
                         "labels")
    if lengths.min() < 0 or int(lengths.sum(dtype=np.int64)) != len(ids) \
            or values.shape != ids.shape:
        raise ValueError(f"the held rows' lengths add up to {int(lengths.sum(dtype=np.int64))}, "
                         f"for {len(ids)} names and {len(values)} values")
    _check_ids(ids, len(encoded), "a held row")
    if not isinstance(labels, list) or label_ids.max() >= len(labels):
        raise ValueError("a held row's label is not one of the model's classes")
    row_of = np.repeat(np.arange(rows), lengths)
    order = np.lexsort((ids, row_of))
    same_row, same_name = np.diff(row_of[order]) == 0, np.diff(ids[order]) == 0
    if (same_row & same_name).any():
        raise ValueError("a held row names an input twice")
    used[ids] = True
    ends = np.cumsum(lengths, dtype=np.int64).tolist()
    id_list, value_list = ids.tolist(), values.tolist()
    held, start = [], 0
    for end, label in zip(ends, label_ids.tolist()):
        held.append([[encoded[i] for i in id_list[start:end]], value_list[start:end],
                     labels[label]])
        start = end
    return held
