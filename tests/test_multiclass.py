"""OneVsRest: the multi-class certificate is sound, and 0 where it should be."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from river_advsvm import AdvKernelSVM
from river_advsvm.attacks import PGD, NoGradientWarning
from river_advsvm.multiclass import OneVsRest


@pytest.fixture(scope="module")
def digits_ovr():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    model = OneVsRest(AdvKernelSVM(seed=0))
    model.learn_many(*_frame(X[:600], y[:600]))
    return model, X[600:640], y[600:640]


def _frame(X, y):
    import pandas as pd

    return pd.DataFrame(X), pd.Series(y)


def test_no_attack_changes_a_certified_prediction(digits_ovr):
    model, X, y = digits_ovr
    radii = model.certified_radius_many(X, y, norm="l2")
    one = [model.certified_radius_one(dict(enumerate(x)), t, norm="l2") for x, t in zip(X, y)]
    assert radii == pytest.approx(one, rel=1e-4)  # float32 margins: one and many round apart
    predictions = model.predict_many(_frame(X, y)[0]).to_numpy()
    assert ((radii > 0) <= (predictions == y)).all()  # certified implies right
    certified = np.flatnonzero(radii > 0)
    assert len(certified) >= 10
    rng = np.random.default_rng(0)
    for i in certified[:10]:
        x, label, radius = X[i], y[i], radii[i]
        # Random directions on the sphere of the certified radius...
        directions = rng.normal(size=(200, X.shape[1]))
        directions *= radius / np.linalg.norm(directions, axis=1, keepdims=True)
        moved = model.predict_many(_frame(x + directions, None)[0]).to_numpy()
        assert (moved == label).all()
        # ...and the black-box attack at that radius (no box: the certificate ignores it).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoGradientWarning)
            attacked = PGD(epsilon=radius, norm="l2", bounds=None).perturb_one(
                model, dict(enumerate(x)), label)
        assert model.predict_one(attacked) == label


def test_labels_it_cannot_vouch_for_get_zero(digits_ovr):
    model, X, y = digits_ovr
    x = dict(enumerate(X[0]))
    wrong = next(t for t in range(10) if t != y[0])
    assert model.certified_radius_one(x, wrong) == 0.0
    assert model.certified_radius_one(x, "never seen") == 0.0
    assert OneVsRest(AdvKernelSVM()).certified_radius_one(x, y[0]) == 0.0  # knows no label


def test_nan_is_a_missing_input_for_the_certificate_as_for_the_binary_models(digits_ovr):
    """`certified_radius_many` refused NaN ('learning needs finite values') where each binary
    model, and `certified_radius_one`, read it as a missing input."""
    model, X, y = digits_ovr
    X = X[:5].copy()
    X[:, 3] = np.nan
    radii = model.certified_radius_many(X, y[:5])
    one = [model.certified_radius_one({j: v for j, v in enumerate(x) if j != 3}, t)
           for x, t in zip(X, y[:5])]
    assert radii == pytest.approx(one, rel=1e-4)


def test_the_box_is_each_binary_models_and_a_sample_outside_it_is_refused(digits_ovr):
    from river_advsvm.inputs import InvalidInput

    model, X, y = digits_ovr
    box = (0.0, 1.0)
    radii = model.certified_radius_many(X, y, norm="linf", bounds=box)
    by_hand = np.min([m.certified_radius_many(X, y == label, "linf", box)
                      for label, m in model.classifiers.items()], axis=0)
    assert np.array_equal(radii, by_hand)
    # The box can only make a radius larger, and here it does for some sample.
    free = model.certified_radius_many(X, y, norm="linf")
    assert (radii >= free).all() and (radii > free).any()
    one = [model.certified_radius_one(dict(enumerate(x)), t, "linf", box) for x, t in zip(X, y)]
    assert radii == pytest.approx(one, rel=1e-4)
    outside = X[:2].copy()
    outside[0, 5] = 1.5
    with pytest.raises(InvalidInput, match="outside bounds"):
        model.certified_radius_many(outside, y[:2], bounds=box)
    with pytest.raises(InvalidInput, match="outside bounds"):  # even for a label it never saw
        model.certified_radius_one(dict(enumerate(outside[0])), "never seen", bounds=box)
    with pytest.raises(ValueError, match="bounds must be"):
        model.certified_radius_one(dict(enumerate(X[0])), y[0], bounds=(1.0, 0.0))


def test_only_certifiable_models_are_accepted():
    from river import linear_model

    with pytest.raises(TypeError, match="no certified radius"):
        OneVsRest(linear_model.LogisticRegression())


def _three_labels():
    from river_advsvm import AdvLinearSVM

    model = OneVsRest(AdvLinearSVM())
    for _ in range(100):
        model.learn_one({"a": 0.1, "b": 0.1}, "low")
        model.learn_one({"a": 0.9, "b": 0.1}, "right")
        model.learn_one({"a": 0.1, "b": 0.9}, "up")
    return model


@pytest.mark.parametrize("label", [float("nan"), np.float64("nan"), None, ["low"]])
def test_a_label_that_is_no_label_is_refused_and_adds_no_class(label):
    """A pandas column of labels holds NaN where one is missing: each NaN (never equal to
    another) became a class of its own, a new binary model per sample, without bound."""
    from river_advsvm import InvalidInput

    model = _three_labels()
    for _ in range(3):
        with pytest.raises(InvalidInput, match="label"):
            model.learn_one({"a": 0.5, "b": 0.5}, label)
    assert list(model.classifiers) == ["low", "right", "up"]


def test_a_sample_without_a_label_is_refused_saying_to_predict_it():
    """A None label said "label None is not supported: use a bool, a number or a str" (the
    binary models say a sample without a label is to be predicted), in a row and in a batch
    (naming its row)."""
    import pandas as pd

    from river_advsvm import InvalidInput

    model = _three_labels()
    with pytest.raises(InvalidInput, match=r"^label None \(no label\) cannot be learned: "
                                           r"predict such a sample \(predict_one"):
        model.learn_one({"a": 0.5, "b": 0.5}, None)
    with pytest.raises(InvalidInput, match=r"^row 1 of the batch \(counting from 0\): label "
                                           r"None \(no label\) cannot be learned"):
        model.learn_many(pd.DataFrame({"a": [0.5, 0.2], "b": [0.5, 0.1]}), ["up", None])
    assert list(model.classifiers) == ["low", "right", "up"]


@pytest.mark.parametrize("classifier, message", [
    (AdvKernelSVM, r"not the class AdvKernelSVM: OneVsRest\(AdvKernelSVM\(\)\)"),
    (None, "NoneType has no certified radius"),
])
def test_a_classifier_that_is_no_model_is_refused_when_made(classifier, message):
    """A class given for a model was taken, and its first sample failed on `clone()`."""
    with pytest.raises(TypeError, match=message):
        OneVsRest(classifier)


def test_a_refused_sample_of_a_new_label_leaves_no_class_behind():
    """The new label's model was added before the sample was refused: an untrained model then
    took a share of every prediction, and zeroed every certificate."""
    from river_advsvm import InvalidInput

    model = _three_labels()
    x = {"a": 0.15, "b": 0.1}
    before = (model.predict_proba_one(x), model.certified_radius_one(x, "low"))
    with pytest.raises(InvalidInput):
        model.learn_one({"a": "high", "b": 0.1}, "new")
    assert list(model.classifiers) == ["low", "right", "up"]
    assert (model.predict_proba_one(x), model.certified_radius_one(x, "low")) == before
    assert before[1] > 0


def test_a_refused_batch_of_new_labels_leaves_no_class_behind():
    import pandas as pd

    from river_advsvm import InvalidInput

    model = _three_labels()
    X = pd.DataFrame({"a": [0.5, float("inf")], "b": [0.5, 0.5]})
    with pytest.raises(InvalidInput):
        model.learn_many(X, pd.Series(["new", "newer"]))
    with pytest.raises(InvalidInput, match="label"):
        model.learn_many(X.iloc[:1], pd.Series([float("nan")]))
    assert list(model.classifiers) == ["low", "right", "up"]


def test_a_refused_batch_leaves_the_name_of_the_labels_as_it_was():
    """`learn_many` took the name of the labels' Series (saved with the model) before the
    binary models checked the rows: a refused batch changed the checkpoint."""
    import pandas as pd

    from river_advsvm import InvalidInput

    model = _three_labels()
    model.learn_many(pd.DataFrame({"a": [0.2], "b": [0.1]}), pd.Series(["low"], name="kind"))
    before = _ovr_bytes(model)
    X = pd.DataFrame({"a": [0.5, float("inf")], "b": [0.5, 0.5]})
    with pytest.raises(InvalidInput):
        model.learn_many(X, pd.Series(["low", "up"], name="other"))
    assert _ovr_bytes(model) == before
    assert model.predict_many(X.iloc[:1]).name == "kind"
    # ... and one refused for its sample weights, after the rows were checked.
    with pytest.raises(TypeError):
        model.learn_many(X.iloc[:1], pd.Series(["low"], name="other"), w=2.0)
    assert _ovr_bytes(model) == before
    assert model.predict_many(X.iloc[:1]).name == "kind"


@pytest.mark.parametrize("name", ["kind", 0, 7, -2.5, True, ("a", 1), None, np.int64(3)])
def test_the_name_of_the_labels_is_saved_when_json_holds_it(tmp_path, name):
    """Only a str name was saved: a loaded model named its predictions None where the saved
    one said 0. A str, bool, int or float is kept as it is; a tuple is not (None)."""
    import pandas as pd

    from river_advsvm import AdvLinearSVM

    X = pd.DataFrame({"a": [0.0, 1.0, 2.0]})
    model = OneVsRest(AdvLinearSVM())
    model.learn_many(X, pd.Series(["x", "y", "z"], name=name))
    model.save(tmp_path / "m.ckpt")
    loaded = OneVsRest.load(tmp_path / "m.ckpt")
    got = loaded.predict_many(X).name
    kept = name.item() if isinstance(name, np.generic) else name
    assert (got is None) if isinstance(name, tuple) else (got == kept and type(got) is type(kept))


@pytest.mark.parametrize("gamma", ["scale", 0.5, {"a": 0.5, "b": 2.0}])
def test_a_saved_model_loads_as_it_was_whatever_its_gamma(tmp_path, gamma):
    """A dict of bandwidths is named in the stored parameters ("per-input") and listed in the
    binary models' own: comparing the two forms refused every such file."""
    from river_advsvm import load

    rng = np.random.default_rng(0)
    model = OneVsRest(AdvKernelSVM(gamma=gamma, warm_up=20, seed=0))
    for i in range(90):
        model.learn_one({"a": float(rng.random()), "b": float(rng.random())}, "xyz"[i % 3])
    model.save(tmp_path / "m.ckpt")
    for loaded in (OneVsRest.load(tmp_path / "m.ckpt"), load(tmp_path / "m.ckpt")):
        assert _ovr_bytes(loaded) == _ovr_bytes(model)


@pytest.mark.parametrize("batch", [False, True])
def test_a_sample_one_labels_model_refuses_changes_no_other_model(batch):
    """The model of 'y' is still in its warm-up: it counts the zero-valued inputs of its held
    rows against max_features, the started model of 'x' does not. 'x' learned the sample
    before 'y' refused it."""
    import pandas as pd

    from river_advsvm import InvalidInput

    model = OneVsRest(AdvKernelSVM(epsilon=0.1, seed=0, warm_up=5, max_features=3))
    for i in range(10):
        model.learn_one({"a": i / 10, "b": 1 - i / 10}, "x")
    model.learn_one({"a": 0.5, "b": 0.5}, "y")
    before = _ovr_bytes(model)
    x = {"a": 0.3, "b": 0.2, "c": 0.0, "d": 0.0}
    with pytest.raises(InvalidInput, match="max_features=3"):
        if batch:
            model.learn_many(pd.DataFrame([x, x]), pd.Series(["x", "z"]))
        else:
            model.learn_one(x, "x")
    assert _ovr_bytes(model) == before


def test_arrays_are_taken_as_the_binary_models_take_them(digits_ovr):
    """An array's columns are features 0..d-1 for every batch method, as for the binary
    models: the same model and the same answers as from a DataFrame. Anything else, or labels
    of another length, is refused before any model changes."""
    import pandas as pd
    from sklearn.datasets import load_digits

    from river_advsvm import InvalidInput

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    from_arrays = OneVsRest(AdvKernelSVM(seed=0))
    from_arrays.learn_many(X[:600], y[:600])
    from_frame, X_test, _ = digits_ovr
    assert list(from_arrays.classifiers) == list(from_frame.classifiers)
    np.testing.assert_array_equal(from_arrays.predict_many(X_test),
                                  from_frame.predict_many(pd.DataFrame(X_test)))
    np.testing.assert_array_equal(from_arrays.predict_proba_many(X_test).to_numpy(),
                                  from_frame.predict_proba_many(pd.DataFrame(X_test)).to_numpy())
    fresh = OneVsRest(AdvKernelSVM(seed=0))
    for X_bad, y_bad in [(X[:5].tolist(), y[:5]), (X[0], y[:1]), (X[:5], y[:4])]:
        with pytest.raises(InvalidInput):
            fresh.learn_many(X_bad, y_bad)
    assert not fresh.classifiers
    with pytest.raises(InvalidInput):
        from_arrays.predict_many(X_test.tolist())


# -- saving and loading ---------------------------------------------------------------------------


def _stream(n=160, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    labels = np.array(["low", "mid", "high", 7, True], dtype=object)
    y = labels[(X[:, 0] * 2.99 + (X[:, 1] > 0.9) * 2).astype(int) % 5]
    return [(dict(enumerate(row.tolist())), label) for row, label in zip(X, y)]


def _ovr_bytes(model) -> bytes:
    from river_advsvm import checkpoint

    return checkpoint.dumps(*model.to_checkpoint())


@pytest.mark.parametrize("make", [lambda: AdvKernelSVM(seed=0, budget=32),
                                  lambda: AdvKernelSVM(seed=0, warm_up=300),  # rows held
                                  lambda: __import__("river_advsvm").AdvLinearSVM(epsilon=0.1)])
def test_a_saved_model_predicts_and_learns_on_as_the_one_saved(make, tmp_path):
    import river_advsvm

    samples = _stream()
    model = OneVsRest(make())
    for x, y in samples[:100]:
        model.learn_one(x, y)
    model.save(tmp_path / "ovr.ckpt")
    again = river_advsvm.load(tmp_path / "ovr.ckpt")
    assert isinstance(again, OneVsRest) and list(again.classifiers) == list(model.classifiers)
    for x, y in samples[100:]:
        assert again.predict_proba_one(x) == model.predict_proba_one(x)
        again.learn_one(x, y)
        model.learn_one(x, y)
    assert _ovr_bytes(again) == _ovr_bytes(model)
    assert OneVsRest.load(tmp_path / "ovr.ckpt").classifier._get_params() == \
        model.classifier._get_params()


@pytest.mark.parametrize("make", [
    lambda: AdvKernelSVM(epsilon=0.1, norm="linf", seed=0, budget=16, warm_up=20),
    lambda: __import__("river_advsvm").AdvLinearSVM(epsilon=0.3, norm="linf")])
def test_learn_many_is_a_learn_one_loop_when_labels_arrive_mid_batch(make):
    """A `learn_one` loop makes a label's model at the label's first sample; River's
    `learn_many` gave it the rows before that too (other models, other predictions)."""
    import pandas as pd

    samples = _stream()
    one, many = OneVsRest(make()), OneVsRest(make())
    for x, y in samples:
        one.learn_one(x, y)
    frame = pd.DataFrame([x for x, _ in samples])
    labels = pd.Series([y for _, y in samples], dtype=object)
    for start in range(0, len(samples), 70):  # labels new to the model in every batch
        many.learn_many(frame.iloc[start:start + 70], labels.iloc[start:start + 70])
    assert list(many.classifiers) == list(one.classifiers)
    assert _ovr_bytes(many) == _ovr_bytes(one)


def _hostile_checkpoints():
    """(what, meta, arrays) a reader must refuse, from a good checkpoint."""
    model = OneVsRest(AdvKernelSVM(seed=0, budget=16))
    for x, y in _stream(60):
        model.learn_one(x, y)
    meta, arrays = model.to_checkpoint()
    other = OneVsRest(AdvKernelSVM(seed=0, budget=17))
    other.learn_one(*_stream(1)[0])
    other_meta, other_arrays = other.to_checkpoint()
    data, lengths = arrays["models"], arrays["model_bytes"]
    flipped = data.copy()
    flipped[int(lengths[0]) + 40] ^= 1
    # The first label's model swapped for one of other parameters (budget 17).
    first_other = other_arrays["models"][int(other_arrays["model_bytes"][0]):int(
        other_arrays["model_bytes"][:2].sum())]
    start, end = int(lengths[0]), int(lengths[:2].sum())
    swapped = np.concatenate([data[:start], first_other, data[end:]])
    swapped_lengths = lengths.copy()
    swapped_lengths[1] = len(first_other)
    return [
        ("unknown binary model", {**meta, "classifier": "Pickle"}, arrays, "unknown binary"),
        ("labels not a list", {**meta, "labels": "abc"}, arrays, "list of labels"),
        ("a label twice", {**meta, "labels": [*meta["labels"][:-1], meta["labels"][0]]},
         arrays, "a label twice"),
        ("a label no model takes", {**meta, "labels": [*meta["labels"][:-1], None]}, arrays,
         "label None"),
        ("lengths that do not add up", meta, {**arrays, "model_bytes": lengths + 1},
         "do not match"),
        ("one length fewer", meta, {**arrays, "model_bytes": lengths[:-1]}, "do not match"),
        ("a flipped byte in a nested model", meta, {**arrays, "models": flipped}, "checksum"),
        ("a model of other parameters", meta,
         {"models": swapped, "model_bytes": swapped_lengths}, "other parameters"),
        ("more bytes than its parameters allow", *_oversized(), "over the"),
        # The file said budget 16 (`read_meta`, and the bound on its arrays), its models 10**5.
        ("binary models of a larger budget than it says", meta, _lifted(arrays, 10**5),
         "a binary model has other parameters than the checkpoint's"),
        # Loaded, it stopped learning at the next sample ("label True would be a third class").
        ("a label's model of other classes", meta, _relabelled(arrays, ["no", "yes"]),
         r"the model of label 'mid' has the classes \['no', 'yes'\], not True and False"),
        ("a label's model of classes 0 and 1", meta, _relabelled(arrays, [0, 1]),
         r"the model of label 'mid' has the classes \[0, 1\], not True and False"),
    ]


def _relabelled(arrays, labels):
    """The arrays of a OneVsRest checkpoint whose first label's model has these classes."""
    from river_advsvm import checkpoint, model_checkpoint

    data, lengths = arrays["models"].tobytes(), arrays["model_bytes"].tolist()
    ends = np.cumsum(lengths).tolist()
    nested = [data[start:end] for start, end in zip([0, *ends[:-1]], ends)]
    meta, binary = model_checkpoint.loads(nested[1])
    meta = {key: value for key, value in meta.items() if key not in ("format", "version",
                                                                       "arrays")}
    old, state = meta["state"]["labels"], meta["state"]
    state["held"] = [[names, values, labels[old.index(y)]] for names, values, y in state["held"]]
    state["labels"] = labels
    nested[1] = checkpoint.dumps(*model_checkpoint.pack(meta, binary))
    return {"models": np.frombuffer(b"".join(nested), dtype=np.uint8),
            "model_bytes": np.array([len(part) for part in nested], dtype=np.int64)}


def _lifted(arrays, budget):
    """The arrays of a OneVsRest checkpoint whose binary models all have this budget."""
    from river_advsvm import checkpoint, model_checkpoint

    data, lengths = arrays["models"].tobytes(), arrays["model_bytes"].tolist()
    ends = np.cumsum(lengths).tolist()
    nested = []
    for start, end in zip([0, *ends[:-1]], ends):
        meta, binary = model_checkpoint.loads(data[start:end])
        meta = {key: value for key, value in meta.items()
                if key not in ("format", "version", "arrays")}
        meta["params"]["budget"] = budget  # (the models are still in their warm-up: no store)
        nested.append(checkpoint.dumps(*model_checkpoint.pack(meta, binary)))
    return {"models": np.frombuffer(b"".join(nested), dtype=np.uint8),
            "model_bytes": np.array([len(part) for part in nested], dtype=np.int64)}


def _oversized():
    """A checkpoint of one label declaring one byte more than two binary checkpoints of its
    parameters may hold (small ones: 4 inputs at most)."""
    model = OneVsRest(AdvKernelSVM(seed=0, budget=4, max_features=4))
    model.learn_one({0: 0.5}, "a")
    meta, _ = model.to_checkpoint()
    size = OneVsRest.checkpoint_array_bytes(meta) - 16 + 1  # (16: the lengths' bytes)
    return meta, {"models": np.zeros(size, dtype=np.uint8),
                  "model_bytes": np.array([size, 0], dtype=np.int64)}


HOSTILE = _hostile_checkpoints()


@pytest.mark.parametrize("what, meta, arrays, message", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_a_hostile_checkpoint_is_refused(what, meta, arrays, message, tmp_path):
    from river_advsvm import CheckpointError, checkpoint

    path = tmp_path / "ovr.ckpt"
    checkpoint.write(path, meta, arrays)
    with pytest.raises(CheckpointError, match=message):
        OneVsRest.load(path)


def test_a_certified_label_wins_where_two_margins_are_all_but_zero():
    """Where one label's model has `g` just above 0 and another's just below, the computed
    probabilities both rounded to 1/2 (with a temperature at its floor, below |g| of 5e-14):
    River's one-vs-rest took the first label, and the certificate vouched for the other."""
    from river_advsvm import AdvLinearSVM
    from river_advsvm.collapse import CollapseWarning

    rng = np.random.default_rng(0)
    model = OneVsRest(AdvLinearSVM())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CollapseWarning)  # (no better than a guess: it is one)
        for _ in range(3000):  # labels that are a coin toss: the temperature falls to its floor
            x = rng.random(2)
            model.learn_one({"p": x[0], "q": x[1]}, "a" if rng.random() < 0.5 else "b")
    a, b = model.classifiers["a"], model.classifiers["b"]
    W = np.array([[m.weights["p"], m.weights["q"]] for m in (a, b)])
    for g_a, g_b in rng.uniform(5e-15, 3e-14, (20, 2)) * [-1.0, 1.0]:
        x = dict(zip("pq", np.linalg.solve(W, [g_a - a._bias, g_b - b._bias]).tolist()))
        if not a.decision_one(x) < 0 < b.decision_one(x):
            continue
        assert model.certified_radius_one(x, "b") > 0
        proba = model.predict_proba_one(x)
        assert proba["b"] > proba["a"]
        assert model.predict_one(x) == "b"
        assert list(model.predict_many(_frame(np.array([[x["p"], x["q"]]]), ["b"])[0])) == ["b"]
        for m in (a, b):  # each binary model: the most probable label is its margin's sign
            p = m.predict_proba_one(x)
            assert max(p, key=p.get) == m.predict_one(x)


def test_batch_probabilities_are_each_rows_own_where_every_label_rounds_to_zero():
    """Where every label's probability rounds to 0 (unscaled salaries on Agrawal make margins
    of thousands), River's batch divided 0 by 0 (NaN rows); each row gets what
    predict_proba_one gives it."""
    import itertools

    from river.datasets import synth

    from river_advsvm import AdvLinearSVM

    model = OneVsRest(AdvLinearSVM())
    data = list(itertools.islice(synth.Agrawal(seed=1), 400))
    for x, y in data:
        model.learn_one(x, y)
    rows = [x for x, _ in data[:200]]
    batch = model.predict_proba_many(pd.DataFrame(rows))
    zero = [all(m.predict_proba_one(x)[True] == 0.0 for m in model.classifiers.values())
            for x in rows]
    assert any(zero)  # (the case itself)
    assert not batch.isna().any().any()
    for i, x in enumerate(rows):
        assert batch.iloc[i].to_dict() == pytest.approx(model.predict_proba_one(x))


@pytest.mark.parametrize("y", [pd.DataFrame({"target": ["cat"]}), "c", {"cat": 1}, "cat",
                               np.array([["cat"]])])
def test_batch_labels_are_one_per_row(y):
    """A DataFrame's column name, a str's characters or a dict's keys are not labels."""
    from river_advsvm import AdvLinearSVM
    from river_advsvm.inputs import InvalidInput

    model = OneVsRest(AdvLinearSVM())
    X = pd.DataFrame({"a": [0.1]})
    with pytest.raises(InvalidInput, match="one label per row"):
        model.learn_many(X, y)
    with pytest.raises(InvalidInput, match="one label per row"):
        model.certified_radius_many(X, y)
    assert not model.classifiers


@pytest.mark.parametrize("make", ["pgd", "cw", "zoo"])
def test_an_attack_on_many_labels_is_fooled_only_where_another_label_is_predicted(make):
    """The black-box margin was `log p(y) - log(1 - p(y))`: with more than two labels that
    is below 0 wherever p(y) < 1/2, also where y is still the likeliest label. 35 of 40
    digits C&W called fooled were predicted right, and its smallest flips were no flips.
    The margin is now against the likeliest other label."""
    from sklearn.datasets import load_digits

    from river_advsvm import AdvLinearSVM
    from river_advsvm.attacks import ZOO, CarliniWagnerL2

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    model = OneVsRest(AdvLinearSVM())
    model.learn_many(*_frame(X[:600], y[:600]))
    attack = {"pgd": PGD(epsilon=0.5, norm="l2"), "cw": CarliniWagnerL2(search_steps=4, steps=30),
              "zoo": ZOO(steps=40, search_steps=2, seed=0)}[make]
    X_test, y_test = X[600:630], y[600:630]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoGradientWarning)
        result = attack.run(model, X_test, y_test)
    wrong = model.predict_many(pd.DataFrame(result.adversarial)).to_numpy() != y_test
    np.testing.assert_array_equal(result.fooled, wrong)
    assert wrong.any()


def test_a_tie_of_probabilities_is_won_by_the_label_river_predicts():
    """River's `predict_one` takes the first label of the highest probability: a black box at
    1/2 each is not fooled for that label, and is for the other."""
    from river import linear_model

    from river_advsvm.attacks import Oracle

    model = linear_model.LogisticRegression()  # untrained: {False: 0.5, True: 0.5}
    first = model.predict_one({"a": 0.3})
    for label in (False, True):
        oracle = Oracle(model, ["a"], [label])
        assert oracle.fooled(np.array([[0.3]]))[0] == (label != first)


@pytest.mark.parametrize("label", [[1], None, float("nan")])
def test_a_label_no_model_takes_is_refused_by_the_certificate_as_by_a_binary_model(label):
    """`certified_radius_one` and `_many` of a one-vs-rest model said 0.0 for None or NaN and
    raised Python's TypeError for a list, where its binary models refuse them all with
    `InvalidInput`; a valid label it never saw is still certified 0."""
    import pandas as pd

    from river_advsvm import AdvLinearSVM, InvalidInput

    model = OneVsRest(AdvLinearSVM())
    model.learn_many(pd.DataFrame({"a": [0.0, 1.0, 2.0]}), pd.Series(["x", "y", "z"]))
    with pytest.raises(InvalidInput):
        model.certified_radius_one({"a": 0.5}, label)
    with pytest.raises(InvalidInput):
        model.certified_radius_many(pd.DataFrame({"a": [0.5]}), [label])
    assert model.certified_radius_one({"a": 0.5}, "never") == 0.0


def test_a_label_never_seen_gets_zero_in_a_batch_too():
    """Where every binary margin is negative (x between the classes), the largest of them
    still gives a positive radius; a label the model never saw must get 0 there, in
    `certified_radius_many` as in `certified_radius_one`."""
    model = OneVsRest(AdvKernelSVM(gamma=5.0, seed=0))
    centres = {"A": (0.1, 0.1), "B": (0.9, 0.1), "C": (0.1, 0.9)}
    for _ in range(30):
        for label, (u, v) in centres.items():
            model.learn_one({0: u, 1: v}, label)
    X = np.array([[0.5, 0.5], [0.1, 0.1]])
    radii = model.certified_radius_many(X, ["Z", "Z"], norm="l2")
    assert radii.tolist() == [0.0, 0.0]
    assert model.certified_radius_one({0: 0.5, 1: 0.5}, "Z", norm="l2") == 0.0
    assert model.certified_radius_many(X[1:], ["A"], norm="l2")[0] > 0


def test_a_rare_labels_model_deciding_one_class_is_no_collapse_one_that_holds_nothing_is():
    """A label's model in a one-vs-rest is not the prediction (the label of the highest
    probability is): the model of a rare, noisy label decides "not mine" at every sample by
    right. On LED with 10% noise the models of labels 8 and 9 were reported collapsed (with a
    warning naming no label) while they ranked (ROC AUC 0.90-0.92) and the one-vs-rest was
    77.8% right. They are judged by whether f ranks; a model that holds nothing is still a
    collapse, and its warning names its label. So after a checkpoint."""
    from river.datasets import synth
    from river_advsvm import AdvLinearSVM
    from river_advsvm.collapse import CollapseWarning

    data = list(synth.LED(seed=1, noise_percentage=0.1).take(3000))
    model = OneVsRest(AdvLinearSVM())
    with warnings.catch_warnings():
        warnings.simplefilter("error", CollapseWarning)
        for x, y in data[:2000]:
            model.learn_one(x, y)
    assert sum(model.predict_one(x) == y for x, y in data[2000:]) > 700
    assert not any(m.collapsed for m in model.classifiers.values())
    loaded = OneVsRest.from_checkpoint(*model.to_checkpoint())
    assert all(m._collapse.by_ranking for m in loaded.classifiers.values())

    crushed = OneVsRest(AdvKernelSVM(epsilon=3.0, norm="l2", adversary="closed_form", seed=0))
    with pytest.warns(CollapseWarning, match=r"the model of label \d in a OneVsRest"):
        for x, y in data[:1500]:
            crushed.learn_one(x, y)
    assert all(m.collapsed for m in crushed.classifiers.values())


def test_a_bad_label_of_a_batch_names_its_row():
    """As the binary models' errors do (the row was not named)."""
    from river_advsvm import AdvLinearSVM
    from river_advsvm.inputs import InvalidInput

    X = pd.DataFrame({"a": [0.1, 0.2, 0.3], "b": [1.0, 2.0, 3.0]})
    model = OneVsRest(AdvLinearSVM())
    with pytest.raises(InvalidInput, match=r"^row 2 of the batch \(counting from 0\): label nan"):
        model.learn_many(X, ["r", "g", float("nan")])
    assert not model.classifiers


def test_a_model_of_one_label_certifies_it_everywhere_as_a_binary_model_does():
    """Having learned one label, a one-vs-rest model predicts it everywhere: its certificate
    is infinite for it (it was the binary margin's, finite) and 0 for any other; a norm that
    is none is refused before either."""
    model = OneVsRest(AdvKernelSVM(gamma=1.0, seed=0))
    for i in range(20):
        model.learn_one({"a": i / 20}, "x")
    X = pd.DataFrame({"a": [0.3, 5.0]})
    assert model.predict_many(X).tolist() == ["x", "x"]
    assert model.certified_radius_one({"a": 0.3}, "x") == np.inf
    assert model.certified_radius_one({"a": 0.3}, "y") == 0.0
    assert model.certified_radius_many(X, ["x", "y"], norm="linf").tolist() == [np.inf, 0.0]
    for radius in (lambda: model.certified_radius_one({"a": 0.3}, "x", norm="l1"),
                   lambda: model.certified_radius_one({"a": 0.3}, "never", norm="l1"),
                   lambda: model.certified_radius_many(X, ["x", "y"], norm="l1")):
        with pytest.raises(ValueError, match="norm must be one of"):
            radius()
    model.learn_one({"a": 0.9}, "y")
    assert model.certified_radius_one({"a": 0.3}, "x") < np.inf
