"""Batches never change the arithmetic: learn_one loops, learn_many in any batches and the
batched test-then-train API give bit-identical models and predictions; the warm-up of
gamma='scale' learns every sample once, in order."""

from __future__ import annotations

import itertools
import math
import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from river import datasets, evaluate, metrics, preprocessing
from test_validation import fingerprint

from river_advsvm import AdvKernelSVM, AdvLinearSVM
from river_advsvm.inputs import InvalidInput, key_hash

MODELS = {
    "merge": lambda: AdvKernelSVM(epsilon=0.1, budget=64, warm_up=20, seed=1),
    "compact": lambda: AdvKernelSVM(epsilon=0.1, budget=64, budget_policy="compact", warm_up=20,
                                    seed=1),
    "compact-linf-float64": lambda: AdvKernelSVM(epsilon=0.05, norm="linf", budget=32,
                                                 dtype="float64", gamma=0.7, seed=2),
    "laplacian": lambda: AdvKernelSVM(kernel="laplacian", budget=32, warm_up=10, seed=3),
    "truncate": lambda: AdvKernelSVM(epsilon=0.1, budget=16, budget_policy="truncate",
                                     warm_up=10, seed=4),
    "grow": lambda: AdvKernelSVM(budget_policy="grow", schedule="diminishing", gamma=2.0,
                                 seed=5),
    "linear": lambda: AdvLinearSVM(epsilon=0.1, norm="linf"),
}


def stream(n=600, seed=0):
    """Dict rows whose keys come and go, with zeros, new names mid-stream and unlabelled rows."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i in range(n):
        x = {f"f{j}": float(v) for j, v in enumerate(rng.random(4))}
        if i % 7 == 0:
            x["rare"] = float(rng.normal())
        if i % 11 == 0:
            x["zero"] = 0.0
        if i > n // 2:
            x[("late", i % 3)] = float(rng.random())
        keys = list(x)
        rng.shuffle(keys)
        rows.append({k: x[k] for k in keys})
        labels.append(bool(x["f0"] + 0.3 * x.get("rare", 0.0) > 0.5))
    return rows, labels


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_learn_one_and_every_batching_give_the_identical_model(make):
    rows, labels = stream()
    reference = make()
    for x, y in zip(rows, labels):
        reference.learn_one(x, y)
    for size in (1, 7, 500):
        model = make()
        for start in range(0, len(rows), size):
            model.learn_many(rows[start : start + size], labels[start : start + size])
        assert fingerprint(model) == fingerprint(reference), size
    assert reference.n_learned == len(rows)


@pytest.mark.parametrize("make", [MODELS["merge"], MODELS["linear"]], ids=["merge", "linear"])
def test_learn_one_takes_a_usual_sample_straight_to_its_step(make, monkeypatch):
    """A known label over inputs the model knows, or 0 under names it checked before: no
    batch machinery (`_run`); a new input, a new label or a refusal go through it. The model
    is the bits of a `learn_many` twin either way."""
    rng = np.random.default_rng(0)
    rows = [{"a": float(v), "b": float(w), "dark": 0.0} for v, w in rng.random((120, 2))]
    labels = [x["a"] > 0.5 for x in rows]
    model, twin = make(), make()
    model.learn_many(rows[:60], labels[:60])
    twin.learn_many(rows[:60], labels[:60])
    # (The first row after the model took its inputs: their names are checked against them.)
    model.learn_one(rows[60], labels[60])
    twin.learn_many(rows[60:61], labels[60:61])
    batched = []
    run = type(model)._run
    monkeypatch.setattr(model, "_run", lambda *a, **k: batched.append(1) or run(model, *a, **k))
    for x, y in zip(rows[61:], labels[61:]):
        model.learn_one(x, y)
    twin.learn_many(rows[61:], labels[61:])
    assert not batched and fingerprint(model) == fingerprint(twin)
    before = fingerprint(model)
    with pytest.raises(InvalidInput):
        model.learn_one(rows[0], math.nan)
    assert fingerprint(model) == before
    model.learn_one({**rows[0], "new": 1.0}, labels[0])  # a new input: checked in `_run`
    twin.learn_many([{**rows[0], "new": 1.0}], [labels[0]])
    assert batched == [1] and fingerprint(model) == fingerprint(twin)


def test_a_warm_up_row_under_the_names_of_the_latest_held_is_held_straight_away(monkeypatch):
    """gamma='scale' holds its first rows: one under the names of the latest held row (a
    stream repeating its keys) is held without the batch machinery, and the warm-up ends as a
    `learn_many` twin's does, bit for bit; a row with other names goes through `_run`."""
    rng = np.random.default_rng(1)
    rows = [{"a": float(v), "b": float(w)} for v, w in rng.random((60, 2))]
    labels = [x["a"] > 0.5 for x in rows]
    model, twin = AdvKernelSVM(warm_up=30, seed=0), AdvKernelSVM(warm_up=30, seed=0)
    model.learn_one(rows[0], labels[0])
    model.learn_one(rows[1], labels[1])
    batched = []
    run = type(model)._run
    monkeypatch.setattr(model, "_run", lambda *a, **k: batched.append(1) or run(model, *a, **k))
    for x, y in zip(rows[2:29], labels[2:29]):
        model.learn_one(x, y)
    assert not batched and model.n_held == 29
    model.learn_one({"b": rows[29]["b"], "a": rows[29]["a"]}, labels[29])  # other names: the
    assert batched == [1] and model.n_held == 0  # batch machinery, and the warm-up ends
    for x, y in zip(rows[30:], labels[30:]):
        model.learn_one(x, y)
    twin.learn_many(rows[:29] + [{"b": rows[29]["b"], "a": rows[29]["a"]}] + rows[30:], labels)
    assert fingerprint(model) == fingerprint(twin)


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_frames_and_arrays_learn_as_their_rows(make):
    rng = np.random.default_rng(1)
    X = rng.random((300, 5))
    y = X[:, 0] + X[:, 1] > 1
    one = make()
    for row, label in zip(X.tolist(), y.tolist()):
        one.learn_one(dict(enumerate(row)), label)
    arrays, frames = make(), make()
    for start in range(0, 300, 70):
        arrays.learn_many(X[start : start + 70], y[start : start + 70])
        frames.learn_many(pd.DataFrame(X[start : start + 70]), pd.Series(y[start : start + 70]))
    assert fingerprint(arrays) == fingerprint(one) == fingerprint(frames)


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_column_major_frames_learn_as_their_rows(make):
    """A frame built column by column (as pandas reads a file) hands over a column-major
    matrix: a row whose columns are the model's, in its order, was used as it came, strided,
    and its dot product with the weights rounded otherwise than the same row from a dict."""
    rng = np.random.default_rng(3)
    # In the order of their hashes, the model's own: its rows are then used as they come.
    names = sorted([f"f{j}" for j in range(6)], key=key_hash)
    columns = {name: rng.normal(size=400) for name in names}
    columns[names[2]] = columns[names[2]].astype(np.float32)  # two dtypes: two blocks
    frame = pd.DataFrame(columns)
    y = (frame[names[0]] + frame[names[1]] > 0).to_numpy()
    one = make()
    for row, label in zip(frame.to_dict("records"), y.tolist()):
        one.learn_one(row, label)
    frames = make()
    frames.learn_many(frame, y)
    assert fingerprint(frames) == fingerprint(one)


#: Labels as booleans, and as strings whose second class sorts after or before the first one
#: (the model flips its sign when the label it took for positive turns out negative).
LABELINGS = {"bool": None, "str-second-after": {False: "a", True: "b"},
             "str-second-before": {False: "b", True: "a"}}


@pytest.mark.parametrize("labeling", LABELINGS.values(), ids=LABELINGS.keys())
@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_batched_test_then_train_is_the_loop_of_predict_then_learn(make, labeling):
    rows, labels = stream(400, seed=2)
    labels = [None if i % 5 == 3 else y for i, y in enumerate(labels)]  # some only predicted
    if labeling is not None:
        labels = [None if y is None else labeling[y] for y in labels]
    loop, batched = make(), make()
    margins, probas = [], []
    for x, y in zip(rows, labels):
        margins.append(loop.decision_one(x))
        probas.append(loop.predict_proba_one(x))
        if y is not None:
            loop.learn_one(x, y)
    got_margins, got_probas = [], []
    for start in range(0, len(rows), 33):
        chunk = slice(start, start + 33)
        if start % 66 == 0:  # the first rows, where the classes become known, by their margins
            got_margins.extend(batched.decision_then_learn_many(rows[chunk], labels[chunk]))
        else:
            frame = batched.predict_proba_then_learn_many(rows[chunk], labels[chunk])
            got_probas.extend(frame.to_dict("records"))
            got_margins.extend([math.nan] * len(frame))
    assert fingerprint(batched) == fingerprint(loop)
    for i, got in enumerate(got_margins):
        if not math.isnan(got):
            assert got == margins[i]  # bit for bit
    expected = [p for i, p in enumerate(probas) if (i // 33) % 2 == 1]
    for want, got in zip(expected, got_probas):
        if not set(want) <= set(got):  # predicted before any label: even odds on the classes
            want = dict.fromkeys(got, 0.5)
        assert {k: v for k, v in got.items() if v or k in want} == want


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_inputs_the_model_does_not_know_weigh_in_whatever_the_order_of_the_keys(make):
    """`decision_one` of a row with several inputs the model never learned gives the margin
    `decision_then_learn_many` gives it, bit for bit, and one that does not depend on the
    order of the row's keys (it summed over them in the order they came)."""
    rows, labels = stream(100, seed=3)
    model = make()
    model.learn_many(rows, labels)
    rng = np.random.default_rng(4)
    for _ in range(20):
        x = {f"new{j}": float(v) for j, v in enumerate(rng.normal(size=6))}
        x["f0"] = float(rng.random())
        keys = list(x)
        rng.shuffle(keys)
        shuffled = {k: x[k] for k in keys}
        margin = model.decision_one(x)
        assert model.decision_one(shuffled) == margin
        assert model.decision_then_learn_many([shuffled], [None]).tolist() == [margin]


def test_unlabelled_rows_are_not_learned():
    rows, labels = stream(100)
    model = AdvLinearSVM()
    model.decision_then_learn_many(rows, [None] * 100)
    assert model.n_learned == 0 and model.n_inputs == 0
    model.decision_then_learn_many(rows, labels[:50] + [None] * 50)
    assert model.n_learned == 50


@pytest.mark.parametrize("dtype, make", [
    ("str", pd.Series), (object, pd.Series), ("float64", pd.Series),
    # (A pandas array or a Categorical: its NA was "a NAType, not supported", its NaN "nan is
    # not allowed", where the same values in a Series meant predict only.)
    ("string", pd.array), ("boolean", pd.array), ("category", pd.Categorical)])
def test_a_missing_label_in_a_pandas_series_means_predict_only(dtype, make):
    """pandas keeps a None among str (or number) labels as NaN: in a Series it is a missing
    label, as None is in a list, and learning it says so."""
    X = pd.DataFrame({"a": [0.1, 0.9, 0.2, 0.8]})
    labels = ([0.0, 1.0, None, 1.0] if dtype == "float64" else [False, True, None, True]
              if dtype == "boolean" else ["no", "yes", None, "yes"])

    def pandas_labels():
        return make(labels) if dtype == "category" else make(labels, dtype=dtype)
    listed, series = AdvKernelSVM(gamma=1.0, seed=0), AdvKernelSVM(gamma=1.0, seed=0)
    expected = listed.decision_then_learn_many(X, labels)
    margins = series.decision_then_learn_many(X, pandas_labels())
    assert margins.tolist() == expected.tolist() and series.n_learned == 3
    assert fingerprint(series) == fingerprint(listed)
    # (Which row, and where such a row goes: the message said only that None is no label.)
    with pytest.raises(InvalidInput, match=r"^row 2 of the batch \(counting from 0\): label None "
                                           r"\(no label\) cannot be learned: .*"
                                           r"predict_proba_then_learn_many"):
        AdvKernelSVM(gamma=1.0, seed=0).learn_many(X, pandas_labels())


def test_labels_whose_index_is_not_the_frames_are_refused():
    """Rows and labels are matched by position: a Series whose index says otherwise (the frame
    shuffled, the labels not) is refused rather than learned scrambled."""
    from river_advsvm.multiclass import OneVsRest

    X = pd.DataFrame({"a": np.r_[np.zeros(5), np.ones(5)]})
    y = pd.Series([False] * 5 + [True] * 5)
    shuffled = X.sample(frac=1, random_state=0)
    for model in (AdvKernelSVM(gamma=1.0, seed=0), OneVsRest(AdvKernelSVM(gamma=1.0, seed=0))):
        before = pickle.dumps(model)
        for call in (model.learn_many, model.decision_then_learn_many
                     if hasattr(model, "decision_then_learn_many") else model.learn_many):
            with pytest.raises(InvalidInput, match="y's index is not X's") as refused:
                call(shuffled, y)
            assert refused.value.code == "bad_shape" and pickle.dumps(model) == before
        model.learn_many(shuffled, y.loc[shuffled.index])  # aligned: learned
        model.learn_many(X.to_numpy(), y)  # an array has no index to match
        assert model.predict_many(pd.DataFrame({"a": [0.0, 1.0]})).tolist() == [False, True]


@pytest.mark.parametrize("labels", [{"yes", "no"}, frozenset({"yes", "no"})])
def test_labels_without_an_order_are_refused(labels):
    """A set was learned in its hash order: which row got which label changed with
    PYTHONHASHSEED."""
    X = pd.DataFrame({"a": [1.0, -1.0], "b": [0.5, -0.5]})
    for model in (AdvLinearSVM(), AdvKernelSVM(seed=0)):
        before = pickle.dumps(model)
        with pytest.raises(InvalidInput, match="which has no order: pass a list") as refused:
            model.learn_many(X, labels)
        assert refused.value.code == "bad_shape" and pickle.dumps(model) == before


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_a_numpy_matrix_is_a_batch_of_its_rows(make):
    """A np.matrix (what scipy's todense returns) learned as its rows, then predicting from it
    multiplied matrices (a shape error) or returned a matrix of one row."""
    X = np.random.default_rng(0).normal(size=(60, 3))
    y = X[:, 0] > 0
    from_matrix, from_array = make(), make()
    from_matrix.learn_many(np.asmatrix(X), y)
    from_array.learn_many(X, y)
    assert fingerprint(from_matrix) == fingerprint(from_array)
    margins = from_matrix.decision_many(np.asmatrix(X))
    assert type(margins) is np.ndarray and margins.shape == (60,)
    np.testing.assert_array_equal(margins, from_array.decision_many(X))
    assert from_matrix.predict_many(np.asmatrix(X)).tolist() == from_array.predict_many(X).tolist()


def test_a_batch_error_names_the_row_and_the_name_twice():
    X = pd.DataFrame({"a": [0.1, 0.2, 0.3], "b": [1.0, 2.0, 3.0]}).astype(object)
    X.iloc[2, 1] = "x"
    for data in (X, X.to_numpy()):
        with pytest.raises(InvalidInput, match=r"^row 2 of the batch \(counting from 0\): "
                                               r"feature (1|'b') is 'x' \(a str\)"):
            AdvLinearSVM().learn_many(data, [True, False, True])
    with pytest.raises(InvalidInput, match="^feature names \\(columns\\) must be unique: 'a' is "
                                           "there twice$"):
        AdvLinearSVM().learn_many(pd.DataFrame([[1, 2, 3]], columns=["a", "b", "a"]), [True])


def test_a_batch_of_more_rows_than_labels_is_a_shape_error_for_every_model():
    from river_advsvm.multiclass import OneVsRest

    for model in (AdvKernelSVM(seed=0), OneVsRest(AdvKernelSVM(seed=0))):
        with pytest.raises(InvalidInput, match="4 samples but 3 labels") as refused:
            model.learn_many(pd.DataFrame({"a": [0.1, 0.2, 0.3, 0.4]}), ["a", "b", "a"])
        assert refused.value.code == "bad_shape"


def test_predict_one_knows_nothing_before_a_label():
    model = AdvKernelSVM(seed=0)
    assert model.predict_one({"a": 1.0}) is None
    assert model.predict_proba_one({"a": 1.0}) == {False: 0.5, True: 0.5}
    model.learn_one({"a": 1.0}, "cat")
    assert model.predict_one({"a": 1.0}) == "cat"


@pytest.mark.parametrize("make", [MODELS["merge"], MODELS["linear"]])
@pytest.mark.parametrize("as_frame", [False, True])
def test_predict_proba_many_before_a_label_is_predict_proba_one_row_by_row(make, as_frame):
    """Before any label the frame had no columns, and for an array no rows either: an attack
    asking a model for scores (ZOO) then failed with an IndexError."""
    X = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]])
    if as_frame:
        X = pd.DataFrame(X, columns=["a", "b"], index=[7, 8, 9])
    model = make()
    proba = model.predict_proba_many(X)
    assert proba.to_dict("records") == [{False: 0.5, True: 0.5}] * 3
    assert list(proba.index) == ([7, 8, 9] if as_frame else [0, 1, 2])
    model.learn_one({0: 1.0, "a": 1.0}, "cat")
    assert model.predict_proba_many(X).to_dict("records") == [{"cat": 1.0}] * 3


def test_the_warm_up_learns_every_sample_once_in_order():
    rows, labels = stream(300, seed=3)
    model = AdvKernelSVM(epsilon=0.1, warm_up=40, seed=7)
    for i, (x, y) in enumerate(zip(rows, labels)):
        model.learn_one(x, y)
        if i < 39:
            assert model.n_learned == 0 and model.fitted_gamma is None
    assert model.n_learned == 300
    # A model given the fitted bandwidths from the start learns the same stream identically.
    explicit = AdvKernelSVM(epsilon=0.1, gamma=model.fitted_gamma, seed=7)
    for x, y in zip(rows, labels):
        explicit.learn_one(x, y)
    assert explicit.decision_one(rows[0]) == model.decision_one(rows[0])
    meta, _ = model.to_checkpoint()
    explicit_meta, _ = explicit.to_checkpoint()
    assert meta["state"]["model"]["store"] == explicit_meta["state"]["model"]["store"]
    np.testing.assert_array_equal(model._store.coefficients, explicit._store.coefficients)


def test_a_checkpoint_taken_during_the_warm_up_holds_its_samples(tmp_path):
    rows, labels = stream(200, seed=4)
    uninterrupted = AdvKernelSVM(warm_up=50, seed=1)
    for x, y in zip(rows, labels):
        uninterrupted.learn_one(x, y)
    model = AdvKernelSVM(warm_up=50, seed=1)
    for x, y in zip(rows[:30], labels[:30]):
        model.learn_one(x, y)
    model.save(tmp_path / "warm.ckpt")
    resumed = AdvKernelSVM.load(tmp_path / "warm.ckpt")
    for x, y in zip(rows[30:], labels[30:]):
        resumed.learn_one(x, y)
    assert fingerprint(resumed) == fingerprint(uninterrupted)


def test_the_warm_up_predicts_with_a_vote_and_certifies_nothing():
    model = AdvKernelSVM(warm_up=100, seed=0)
    for i in range(20):
        model.learn_one({"a": float(i % 2), "b": 0.5}, bool(i % 2))
    assert model.n_learned == 0
    assert model.predict_one({"a": 1.0, "b": 0.5}) is True
    assert model.predict_one({"a": 0.0, "b": 0.5}) is False
    assert model.certified_radius_one({"a": 1.0, "b": 0.5}, True) == 0.0


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_an_empty_batch_during_the_warm_up_has_no_margins(kernel):
    """The Laplacian vote stacked one row of distances per sample: with no sample, numpy's
    'need at least one array to stack'."""
    model = AdvKernelSVM(kernel=kernel, warm_up=10, seed=0)
    model.learn_one({"a": 1.0}, True)
    model.learn_one({"a": 0.0}, False)
    assert model.decision_many(pd.DataFrame({"a": []})).shape == (0,)
    assert model.predict_proba_many(np.zeros((0, 1))).shape == (0, 2)
    assert len(model.predict_many(pd.DataFrame({"a": [], "b": []}))) == 0


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_the_warm_up_vote_of_a_large_batch_is_computed_in_chunks(kernel):
    """During the warm-up, decision_many voted on the whole batch at once: a (rows x held rows)
    matrix, 360 MB for 20,000 rows and 1,500 held ones; batches are evaluated in chunks of
    ROWS_PER_CHUNK rows, as once the model has started."""
    import tracemalloc

    rng = np.random.default_rng(0)
    model = AdvKernelSVM(kernel=kernel, warm_up=1000, seed=0)
    X = rng.random((500, 3))
    model.learn_many(X, X[:, 0] > 0.5)
    Q = rng.random((10_000, 3))
    tracemalloc.start()
    try:
        margins = model.decision_many(Q)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 25e6  # the whole vote at once: over 100 MB
    assert margins[:3] == pytest.approx([model.decision_one(dict(enumerate(q))) for q in Q[:3]],
                                        rel=1e-6)


def test_min_max_scaler_pipelines_run_on_streams_whose_features_appear_late():
    """River's MinMaxScaler emits NaN for a feature it has not learned: missing, not an error."""

    def appearing(dataset, n):
        for i, (x, y) in enumerate(itertools.islice(dataset, n)):
            yield ({k: v for k, v in x.items() if i > 100 or k != "x2"}), y

    scores = []
    for model in (AdvKernelSVM(seed=0), AdvLinearSVM()):
        pipeline = preprocessing.MinMaxScaler() | model
        metric = metrics.Accuracy()
        evaluate.progressive_val_score(appearing(datasets.Bananas(), 1500), pipeline, metric)
        scores.append(metric.get())
    assert scores[0] > 0.8  # non-linear data: the kernel model learns it, the linear one cannot
    assert scores[0] > scores[1] + 0.15


def test_the_model_page_says_which_batch_methods_take_lists_of_dicts():
    """docs/model.md names the `*_many` methods that take a list of feature dicts; each one it
    names takes one, and every other refuses it with `bad_shape`."""
    import pathlib
    import re

    from river_advsvm import InvalidInput

    page = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "model.md").read_text()
    bullet = " ".join(next(b for b in page.split("\n- ") if b.startswith("**Inputs**")).split())
    named = set(re.findall(r"`(\w+_many)`", bullet.split("lists of feature dicts", 1)[1]))
    rows, labels = stream(40)
    model = AdvKernelSVM(gamma=1.0, seed=0)
    model.learn_one(rows[0], True)
    model.learn_one(rows[1], False)
    calls = {
        "learn_many": lambda X: model.learn_many(X, labels[:2]),
        "decision_then_learn_many": lambda X: model.decision_then_learn_many(X, labels[:2]),
        "predict_proba_then_learn_many":
            lambda X: model.predict_proba_then_learn_many(X, labels[:2]),
        "predict_many": model.predict_many,
        "predict_proba_many": model.predict_proba_many,
        "decision_many": model.decision_many,
        "decision_gradient_many": model.decision_gradient_many,
        "certified_radius_many": lambda X: model.certified_radius_many(X, labels[:2]),
    }
    assert {n for n in dir(model) if n.endswith("_many") and not n.startswith("_")} == set(calls)
    taken = set()
    for name, call in calls.items():
        try:
            call(rows[2:4])
            taken.add(name)
        except InvalidInput as error:
            assert error.code == "bad_shape", name
    assert named == taken



def kernel_expansion(samples, gamma_of, kernel, regularization, step, bias_step):
    """`g` of the natural kernel SVM (epsilon 0, no budget, no reprocessing) learned on
    `samples` one at a time, as `AdvKernelSVM` documents its step, by brute force over dicts
    (absent inputs are 0): every sample kept, every kernel value, the bias step damped as the
    share of the last ~64 samples that were active nears 1."""
    stored, bias, share = [], 0.0, 1.0

    def f(x):
        total = 0.0
        for a, z in stored:
            gaps = [(gamma_of(k), x.get(k, 0.0) - z.get(k, 0.0)) for k in set(x) | set(z)]
            if kernel == "rbf":
                total += a * math.exp(-sum(g * gap * gap for g, gap in gaps))
            else:
                total += a * math.exp(-sum(g * abs(gap) for g, gap in gaps))
        return total

    for x, y in samples:
        sign = 1.0 if y else -1.0
        active = 1.0 - sign * (f(x) + bias) > 0.0
        share += (active - share) / 64
        stored = [(a * (1.0 - step * regularization), z) for a, z in stored]
        if active:
            stored.append((step * sign, dict(x)))
            bias += bias_step * sign * min(1.0, (1.0 - share) / 0.1)
    return lambda x: f(x) + bias


SPARSE_ROWS = st.dictionaries(st.integers(0, 3), st.sampled_from([0.0, 0.5, -1.0, 2.0, 1e-3]),
                              max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(schedule=st.lists(st.tuples(st.sampled_from(["one", "dicts", "frame", "array", "test"]),
                                   st.lists(st.tuples(SPARSE_ROWS, st.booleans()), min_size=1,
                                            max_size=5)), min_size=1, max_size=6),
       gamma=st.sampled_from([0.7, {0: 0.3, 1: 2.0, 2: 0.5}, "scale"]),
       kernel=st.sampled_from(["rbf", "laplacian"]), seed=st.integers(0, 2**16),
       probes=st.lists(st.dictionaries(st.integers(0, 6), st.sampled_from([0.0, 0.5, -2.0]),
                                       max_size=6), min_size=1, max_size=3))
def test_any_schedule_of_sparse_batches_is_the_loop_and_the_kernel_expansion(
        schedule, gamma, kernel, seed, probes):
    """Sparse rows whose keys come and go, learned in any mix of learn_one, learn_many of dicts,
    of frames (each batch its own columns, in any order) and of arrays, and test-then-train
    batches: the model a learn_one loop of the same rows makes, bit for bit (its margins too),
    and the exact kernel expansion of those rows (inputs never learned included, at the median
    bandwidth)."""
    rng = np.random.default_rng(seed)
    params = dict(gamma=gamma, kernel=kernel, budget=None, seed=0, dtype="float64",
                  reprocess=0, warm_up=3, regularization=0.01, step_size=0.5,
                  bias_step_size=0.05, averaging=None)
    model, loop = AdvKernelSVM(**params), AdvKernelSVM(**params)
    samples = []
    for kind, batch in schedule:
        rows, labels = [x for x, _ in batch], [y for _, y in batch]
        if kind in ("frame", "array"):  # the rows as the batch holds them, zeros included
            columns = (rng.permutation(sorted(set().union(*rows))).tolist() if kind == "frame"
                       else list(range(4)))
            values = [[x.get(c, 0.0) for c in columns] for x in rows]
            rows = [dict(zip(columns, v)) for v in values]
            model.learn_many(pd.DataFrame(values, columns=columns) if kind == "frame"
                             else np.array(values).reshape(len(rows), 4), labels)
        elif kind == "one":
            for x, y in batch:
                model.learn_one(x, y)
        elif kind == "dicts":
            model.learn_many(rows, labels)
        else:
            labels = [None if rng.random() < 0.3 else y for y in labels]
            margins = model.decision_then_learn_many(rows, labels).tolist()
        for i, (x, y) in enumerate(zip(rows, labels)):
            if kind == "test":
                assert margins[i] == loop.decision_one(x)
            if y is not None:
                loop.learn_one(dict(reversed(list(x.items()))), y)  # the keys in another order
                samples.append((x, y))
    for x in probes:
        assert model.decision_one(x) == loop.decision_one(x)
    fitted = model.fitted_gamma
    if fitted is None or len({y for _, y in samples}) < 2:
        return
    if isinstance(fitted, dict):
        median = float(np.median(list(fitted.values())))
        expansion = kernel_expansion(samples, lambda k: fitted.get(k, median), kernel, 0.01,
                                     0.5, 0.05)
    else:
        expansion = kernel_expansion(samples, lambda k: fitted, kernel, 0.01, 0.5, 0.05)
    for x in probes:
        assert model.decision_one(x) == pytest.approx(expansion(x), rel=1e-9, abs=1e-9)


def test_a_sample_with_no_input_the_model_learned_is_named_once():
    """A model learned from a DataFrame's named columns, asked about an array (columns 0..d-1):
    every input unknown, decided as if every learned one were 0, 0.60 accurate against 0.98,
    without a word. A warning names both sets of inputs, once per model, at the user's line;
    rows sharing any input with the model are not warned about."""
    import warnings

    from river_advsvm import AdvKernelSVM

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = X[:, 0] + X[:, 1] > 0
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(5)])
    model = AdvKernelSVM(seed=0)
    model.learn_many(frame, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.predict_many(frame)
        model.predict_one({"c0": 1.0, "new": 2.0})  # (one input known)
        assert not caught
        model.predict_many(X)
        model.predict_one(dict(enumerate(X[0])))
        model.decision_gradient_many(X)
    assert len(caught) == 1 and caught[0].filename == __file__
    message = str(caught[0].message)
    assert "none of the inputs given (0, 1, 2, ...)" in message and "'c" in message
    assert "An array's columns are named 0..d-1" in message
    # Names that are not an array's (words, on a stream of text): no hint about arrays.
    words = AdvKernelSVM(gamma=1.0, seed=0)
    words.learn_one({"cat": 1.0, "dog": 1.0}, True)
    words.learn_one({"cat": 1.0, "eel": 1.0}, False)
    # A sample refused for its names is no sample decided: the warning is kept for one that is.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in (None, float("nan"), b"fox"):
            for predict in (lambda: words.predict_one({name: 1.0}),
                            lambda: words.predict_many(pd.DataFrame({name: [1.0]}))):
                with pytest.raises(InvalidInput) as refused:
                    predict()
                assert refused.value.code == "bad_name"
    with pytest.warns(UserWarning, match="none of the inputs given") as record:
        words.predict_one({"fox": 1.0})
    assert "array" not in str(record[0].message)
