"""Adversarially robust kernel SVMs for data that never stops arriving."""

from __future__ import annotations

from river_advsvm.checkpoint import CheckpointError
from river_advsvm.inputs import InvalidInput
from river_advsvm.linear import AdvLinearSVM
from river_advsvm.svm import AdvKernelSVM

__all__ = ["AdvKernelSVM", "AdvLinearSVM", "CheckpointError", "InvalidInput", "load"]

__version__ = "0.1.0"

_MODELS = {cls.__name__: cls for cls in (AdvKernelSVM, AdvLinearSVM)}


def load(path):
    """Load any model of this package written by its `save` (`multiclass.OneVsRest` too)."""
    from river_advsvm import checkpoint
    from river_advsvm.multiclass import OneVsRest

    models = {**_MODELS, OneVsRest.__name__: OneVsRest}

    def bound(meta: dict) -> int:
        cls = models.get(meta.get("class"))
        if cls is None:
            raise CheckpointError(f"unknown model class {meta.get('class')!r} in {path!r}")
        return cls.checkpoint_array_bytes(meta)

    meta, arrays = checkpoint.read(path, max_array_bytes=bound)
    return models[meta["class"]].from_checkpoint(meta, arrays)
