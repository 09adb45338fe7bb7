"""Checkpoints of the margin classifiers: the model's state as JSON metadata and arrays.

`CheckpointMixin` gives `MarginClassifier` (and so `AdvKernelSVM` and `AdvLinearSVM`) its
`save`/`load` and `to_checkpoint`/`from_checkpoint`. It writes what the base class holds (input
names, labels, bias, counts, calibration, held-back rows) and asks the model for the rest
through two hooks: `_model_state()` returns `(scalars, arrays)`, `_restore_model_state` takes
them back and checks them. `_max_state_bytes()` bounds the arrays a checkpoint of a model with
given parameters may hold, so that a hostile file is refused before it is read. The file format
itself is `river_advsvm.checkpoint`'s.

"""

from __future__ import annotations

import math
import typing

from river_advsvm import checkpoint, inputs
from river_advsvm.labels import as_label

__all__ = ["MAX_ABS_BIAS", "CheckpointMixin"]

#: The largest bias a checkpoint may hold: a bias beyond any input's magnitude is not one
#: learning reaches, and far below it margins and their gradients stay finite.
MAX_ABS_BIAS = inputs.MAX_ABS_VALUE
# More held-back rows than any warm-up holds.
_MAX_HELD_ROWS = 1_000_000


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
        """The model as checkpoint metadata and arrays (see `save`)."""
        scalars, arrays = self._model_state()
        state = {
            "names": [inputs.encode_name(n) for n in self._index.names],
            "labels": list(self._labels),
            "bias": self._bias,
            "n_learned": self._n_learned,
            "started": self._started,
            "temperature": [self._calibration.scale, self._calibration.grad_squares],
            "held": [[[inputs.encode_name(n) for n in names], row.tolist(), y]
                     for names, row, y in self._held],
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
        try:
            model = cls._unlearned(meta)
            state = meta["state"]
            names = [inputs.decode_name(n) for n in state["names"]]
            if len(names) > model.max_features:
                raise ValueError(f"{len(names)} inputs, more than max_features")
            if len(set(names)) != len(names):
                raise ValueError("duplicate feature names")
            labels = [as_label(y) for y in state["labels"]]
            if len(labels) > 2 or len(set(labels)) != len(labels):
                raise ValueError(f"bad labels {labels!r}")
            model._labels = labels
            model._bias = float(state["bias"])
            model._n_learned = int(state["n_learned"])
            model._started = state["started"]
            if type(model._started) is not bool:
                raise ValueError(f"started must be true or false, got {model._started!r:.40}")
            model._calibration.scale, model._calibration.grad_squares = map(
                float, state["temperature"]
            )
            hashes = model._index.hash_names(names)
            model._index.add(names, hashes)
            model._held = [model._held_row(*row) for row in state.get("held", [])]
            if "collapse" in state:  # (not in checkpoints from before it was saved)
                model._collapse.restore(state["collapse"])
            if "group_clock" in state:
                model._schedule.join_group(*state["group_clock"], n_learned=model._n_learned)
            model._restore_model_state(state["model"], arrays)
            numbers_ok = [model._bias, model._calibration.scale, model._calibration.grad_squares]
            if not all(math.isfinite(v) for v in numbers_ok) or model._n_learned < 0:
                raise ValueError("non-finite or negative state")
            if abs(model._bias) > MAX_ABS_BIAS or model._n_learned > 2**63 - 1:
                raise ValueError(f"bias {model._bias:g} or samples {model._n_learned} out of "
                                 f"range (|bias| <= {MAX_ABS_BIAS:g})")
            if not (model._calibration.scale > 0 and model._calibration.grad_squares >= 0):
                raise ValueError("invalid temperature")
        except checkpoint.CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
                RecursionError) as error:
            raise checkpoint.CheckpointError(f"invalid {cls.__name__} checkpoint: {error}") from None
        return model

    @classmethod
    def _unlearned(cls, meta: dict) -> typing.Self:
        """A new model with the checkpoint's parameters (`CheckpointError` if the checkpoint is
        of another class; `KeyError`, `TypeError` or `ValueError` for bad parameters)."""
        if not isinstance(meta, dict) or meta.get("class") != cls.__name__:
            found = meta.get("class") if isinstance(meta, dict) else None
            raise checkpoint.CheckpointError(f"checkpoint holds a {found!r}, not a {cls.__name__}")
        params = meta["params"]
        if not isinstance(params, dict):
            raise TypeError("params must be a mapping")
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

    def _max_state_bytes(self) -> int:
        """The most bytes of arrays a checkpoint of a model with these parameters can hold."""
        raise NotImplementedError

    @classmethod
    def checkpoint_array_bytes(cls, meta: dict) -> int:
        """The most array bytes a checkpoint with this metadata may hold, from its parameters
        alone: `checkpoint.read` refuses a file declaring more before reading any array."""
        try:
            return cls._unlearned(meta)._max_state_bytes()
        except (KeyError, TypeError, ValueError) as error:
            raise checkpoint.CheckpointError(
                f"invalid {cls.__name__} checkpoint parameters: {error}") from None

    def save(self, path, extra: dict | None = None) -> None:
        """Write the model to `path` atomically, in the safe format of `checkpoint`.

        `extra` is JSON metadata stored alongside (a service's offsets, say).
        """
        checkpoint.write(path, *self.to_checkpoint(extra))

    @classmethod
    def load(cls, path) -> typing.Self:
        """Read a model written by `save`. It predicts and learns exactly as the saved one."""
        return cls.from_checkpoint(
            *checkpoint.read(path, max_array_bytes=cls.checkpoint_array_bytes))
