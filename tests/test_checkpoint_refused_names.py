"""A checkpoint cannot give a model an input name the model refuses when learning.

Learning refuses a name with a NUL or a lone surrogate, or longer than 1000 characters once
encoded (`margin._check_names`). A checkpoint is input too: such a name in it, as one of the
model's inputs or in a held warm-up row, is a `CheckpointError` when it is read, not a model
that fails at its next sample or at its next save.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from river_advsvm import AdvKernelSVM, AdvLinearSVM, CheckpointError, checkpoint, model_checkpoint

BAD_NAMES = {
    "nul": ["s", "b\0"],
    "surrogate": ["s", "\ud800"],
    "too_long": ["s", "x" * 1500],
    "nul_in_tuple": ["t", [["s", "t"], ["s", "\0"]]],
}


def _learned(model):
    model.learn_one({"a": 1.0, "b": 2.0}, True)
    model.learn_one({"a": 0.5, "b": 1.0}, False)
    return model


def _read(meta, arrays, cls, form):
    """The model of a checkpoint as written by earlier versions (names in the metadata) or as
    stored now (names in arrays)."""
    if form == "written":
        return cls.from_checkpoint(copy.deepcopy(meta), arrays)
    data = model_checkpoint.dumps(copy.deepcopy(meta), arrays)
    return cls.from_checkpoint(*checkpoint.loads(data, max_array_bytes=cls.checkpoint_array_bytes))


# (A lone surrogate has no UTF-8: no name table holds one.)
CASES = [(bad, form) for bad in BAD_NAMES for form in ("written", "stored")
         if (bad, form) != ("surrogate", "stored")]


@pytest.mark.parametrize(("bad", "form"), CASES)
@pytest.mark.parametrize("cls", [AdvLinearSVM, AdvKernelSVM])
def test_an_input_name_learning_refuses_is_refused_in_a_checkpoint(cls, bad, form):
    model = _learned(cls(seed=0, gamma=0.5) if cls is AdvKernelSVM else cls())
    meta, arrays = model.to_checkpoint()
    meta["state"]["names"][-1] = BAD_NAMES[bad]
    with pytest.raises(CheckpointError):
        _read(meta, arrays, cls, form)


@pytest.mark.parametrize(("bad", "form"), CASES)
def test_a_held_row_name_learning_refuses_is_refused_in_a_checkpoint(bad, form):
    model = _learned(AdvKernelSVM(seed=0, warm_up=5))
    meta, arrays = model.to_checkpoint()
    meta["state"]["held"][0][0][-1] = BAD_NAMES[bad]
    with pytest.raises(CheckpointError):
        _read(meta, arrays, AdvKernelSVM, form)


@pytest.mark.parametrize("form", ["written", "stored"])
def test_a_model_that_has_not_started_has_no_inputs(form):
    """A model gets its inputs as it learns its first sample; one mid-warm-up (holding rows)
    or fresh has none. A checkpoint giving it some was read, then predicting raised KeyError."""
    model = _learned(AdvKernelSVM(seed=0, warm_up=5))
    meta, arrays = model.to_checkpoint()
    assert not meta["state"]["started"] and meta["state"]["held"]
    meta["state"]["names"] = [["s", "a"]]
    with pytest.raises(CheckpointError, match="has not started learning"):
        _read(meta, arrays, AdvKernelSVM, form)
    meta, arrays = AdvLinearSVM().to_checkpoint()
    meta["state"]["names"] = [["s", "a"]]
    with pytest.raises(CheckpointError, match="has not started learning"):
        _read(meta, arrays, AdvLinearSVM, form)


@pytest.mark.parametrize(("bad", "form"), CASES)
def test_a_basis_record_naming_an_input_learning_refuses_is_refused(bad, form):
    """A group's basis names the inputs of every model averaged over it: one a model refuses
    made each fold over it fail (the merged model is refused), until a newer basis."""
    from river_advsvm.streams import group_basis

    names = [["s", "a"], BAD_NAMES[bad]]
    if form == "stored":
        key, value = group_basis.basis_record(1, "w0", "rbf", 0.5, np.eye(2), names)
    else:  # as written before the names' table
        key = b"basis/1/w0"
        value = checkpoint.dumps({"basis": {"epoch": 1, "kernel": "rbf", "gamma": 0.5,
                                            "names": names}}, {"vectors": np.eye(2)})
    with pytest.raises(CheckpointError, match="basis record"):
        group_basis.parse_basis(key, value)
