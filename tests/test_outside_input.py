"""Property tests of the entry points that take outside input: labels and batches of any kind
for learning and predicting, attacks of any settings on any sample, certificates, the monitor.
Each is refused with `InvalidInput` (or, for settings, `ValueError`/`TypeError`) with the model
unchanged, or gives finite numbers."""

from __future__ import annotations

import json
import math
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
from conftest import assert_finite, fingerprint
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from river import drift, linear_model

from river_advsvm import AdvKernelSVM, AdvLinearSVM, InvalidInput
from river_advsvm.attacks import FGSM, PGD, ZOO, CarliniWagnerL2
from river_advsvm.monitor import RobustnessMonitor
from river_advsvm.multiclass import OneVsRest

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))


def trained(model, n=40, seed=0):
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n):
            x = {"a": float(rng.random()), "b": float(rng.random())}
            model.learn_one(x, x["a"] > 0.5)
    return model


labels = st.one_of(
    st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=3),
    st.sampled_from([None, b"a", (1, 2), [1], {1: 2}, 1 + 2j, Decimal("1.5"), Decimal("NaN"),
                     Fraction(1, 3), np.float64(np.nan), np.int64(1), np.bool_(True),
                     np.str_("a"), "x" * 1001, np.array(1), np.array([True]),
                     pd.NA, pd.NaT, np.datetime64(1, "s"), float("inf")]))


REFUSED = object()


def learned_or_refused(model, learn):
    """`learn(model)`'s result, or `REFUSED` when it raised `InvalidInput` and left the model
    as it was; either way the model stays finite."""
    before = fingerprint(model)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = learn(model)
        event("learned")
    except InvalidInput as error:
        event(error.code)
        assert fingerprint(model) == before, error
        result = REFUSED
    assert_finite(model)
    return result


def models():
    return [trained(AdvKernelSVM(budget=16, warm_up=3, seed=0), n=8),
            AdvKernelSVM(budget=16, warm_up=30, seed=0),  # still in its warm-up
            trained(AdvLinearSVM(), n=8),
            AdvLinearSVM()]


@settings(max_examples=50, **SETTINGS)
@given(y=labels, x=st.sampled_from([{"a": 0.2, "b": 0.7}, {"c": 1.0}, {}]))
def test_learn_one_any_label(y, x):
    for model in models():
        learned_or_refused(model, lambda m: m.learn_one(x, y))


@settings(max_examples=37, **SETTINGS)
@given(ys=st.lists(labels, min_size=1, max_size=4))
def test_one_vs_rest_any_labels(ys):
    model = OneVsRest(AdvLinearSVM())
    for i, y in enumerate(ys):
        x = {"a": i / 4, "b": 1 - i / 4}
        try:
            model.learn_one(x, y)
        except InvalidInput:
            pass
        except (TypeError, ValueError) as error:  # not InvalidInput: not the package's type
            raise AssertionError(f"{type(error).__name__}: {error}")
    for classifier in model.classifiers.values():
        assert_finite(classifier)
    proba = model.predict_proba_one({"a": 0.5, "b": 0.5})
    assert all(math.isfinite(p) for p in proba.values())


dtypes = st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.uint64, np.int8,
                          np.bool_, np.complex128, object, "U2", "datetime64[s]"])
arrays = st.one_of(
    hnp.arrays(dtypes, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4)),
    hnp.arrays(np.float64, st.tuples(st.integers(0, 5), st.integers(0, 4)),
               elements=st.floats(width=64)),
)
dict_rows = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c", 0, 1]),
                                     st.one_of(st.floats(), st.integers(-2**70, 2**70)),
                                     max_size=3), max_size=5)


def frame_of(values):
    """A DataFrame of `values`, or `values` themselves where pandas refuses them (its string
    columns cannot hold a lone surrogate): a batch either way."""
    try:
        return pd.DataFrame(values)
    except UnicodeEncodeError:
        return values


batches = st.one_of(arrays, dict_rows,
                    hnp.arrays(dtypes, hnp.array_shapes(min_dims=2, max_dims=2, max_side=4)).map(
                        frame_of),
                    dict_rows.map(pd.DataFrame))
label_batches = st.one_of(
    st.lists(labels, max_size=6), st.lists(st.booleans(), max_size=6),
    st.lists(st.booleans(), max_size=6).map(np.array),
    st.lists(st.one_of(st.booleans(), st.none()), max_size=6).map(pd.Series),
    labels)


def n_rows(X):
    try:
        return len(X)
    except TypeError:
        return 1


@st.composite
def batch_and_labels(draw):
    X = draw(batches)
    n = n_rows(X)
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return X, draw(label_batches)
    elements = labels if kind == 1 else st.one_of(st.booleans(), st.none()) if kind == 2 \
        else st.sampled_from([1, 7, 1.0, 7.0, np.int64(7)]) if kind == 3 else st.booleans()
    y = draw(st.lists(elements, min_size=n, max_size=n))
    wrap = draw(st.sampled_from([list, tuple, np.array, pd.Series]))
    try:
        y = wrap(y) if wrap is not pd.Series else pd.Series(y, index=getattr(X, "index", None),
                                                            dtype=object)
    except Exception:  # noqa: BLE001 - labels a container refuses stay a list
        pass
    return X, y


@settings(max_examples=75, **SETTINGS)
@given(Xy=batch_and_labels())
def test_learn_many_any_batch(Xy):
    X, y = Xy
    for model in models():
        learned_or_refused(model, lambda m: m.learn_many(X, y))


@settings(max_examples=75, **SETTINGS)
@given(X=batches)
def test_predictions_of_any_batch(X):
    for model in models():
        before = fingerprint(model)
        for call in ("decision_many", "predict_proba_many", "predict_many",
                     "decision_gradient_many"):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = getattr(model, call)(X)
            except InvalidInput:
                continue
            if call == "decision_gradient_many":
                out = out[1] if isinstance(out, tuple) else out
            if call != "predict_many":
                values = np.asarray(out, dtype=float)
                assert np.isfinite(values).all(), (call, out)
        assert fingerprint(model) == before


@settings(max_examples=50, **SETTINGS)
@given(Xy=batch_and_labels())
def test_test_then_train_any_batch(Xy):
    X, y = Xy
    for model in models():
        margins = learned_or_refused(model, lambda m: m.decision_then_learn_many(X, y))
        if margins is not REFUSED:
            assert np.isfinite(np.asarray(margins, dtype=float)).all()


def ovr():
    model = OneVsRest(AdvLinearSVM())
    rng = np.random.default_rng(0)
    for i in range(12):
        model.learn_one({"a": float(rng.random()), "b": float(rng.random())},
                        ["x", "y", 3][i % 3])
    return model


def ovr_fingerprint(model):
    meta, arrays = model.to_checkpoint()
    return json.dumps(meta, sort_keys=True) + arrays["models"].tobytes().hex()


@settings(max_examples=50, **SETTINGS)
@given(Xy=batch_and_labels())
def test_one_vs_rest_any_batch(Xy):
    X, y = Xy
    model = ovr()
    before = ovr_fingerprint(model)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.learn_many(X, y)
        event("ovr learned")
    except InvalidInput:
        assert ovr_fingerprint(model) == before
    except (ValueError, TypeError, KeyError) as error:
        raise AssertionError(f"not InvalidInput: {type(error).__name__}: {error}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            proba = model.predict_proba_many(X)
        assert np.isfinite(proba.to_numpy(dtype=float)).all()
        r = model.certified_radius_many(X, model.predict_many(X))
        assert not np.isnan(r).any()
    except InvalidInput:
        pass
    except (ValueError, TypeError, KeyError) as error:
        raise AssertionError(f"not InvalidInput: {type(error).__name__}: {error}")


_MODELS = {}


def model(kind):
    if kind not in _MODELS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if kind == "kernel":
                _MODELS[kind] = trained(AdvKernelSVM(budget=16, warm_up=3, seed=0))
            elif kind == "linear":
                _MODELS[kind] = trained(AdvLinearSVM())
            else:
                m = linear_model.LogisticRegression()
                rng = np.random.default_rng(0)
                for _ in range(40):
                    x = {"a": float(rng.random()), "b": float(rng.random())}
                    m.learn_one(x, x["a"] > 0.5)
                _MODELS[kind] = m
    return _MODELS[kind]


values = st.one_of(st.floats(), st.floats(-2, 2), st.integers(-2**70, 2**70),
                   st.sampled_from([None, "x", 1e308, -1e308, 5e-324, 1e15, np.float32(0.5),
                                    True, [1.0], 1 + 1j]))
xs = st.dictionaries(st.sampled_from(["a", "b", "c", 0, None, b"a", math.nan]), values,
                     max_size=3)
ys = st.one_of(st.booleans(), st.sampled_from([None, 1, 0, 2, "a", math.nan, math.inf, 1.5,
                                               np.bool_(True), b"x", (True,)]))
eps = st.one_of(st.floats(0, 1e308), st.floats(0, 2),
                st.sampled_from([0.0, 1e-300, 1e10, 1e154, 1e200, 1e308, math.inf, math.nan,
                                 -1.0, None]))
boxes = st.one_of(st.none(), st.tuples(st.floats(-1e308, 1), st.floats(1, 1e308)),
                  st.sampled_from([(0.0, 1.0), (0.0, 0.0), (1.0, 0.0), (-1e308, 1e308)]))


@st.composite
def attacks(draw):
    kind = draw(st.sampled_from(["fgsm", "pgd", "cw", "zoo"]))
    e, b = draw(eps), draw(boxes)
    norm = draw(st.sampled_from(["l2", "linf"]))
    try:
        if kind == "fgsm":
            return FGSM(epsilon=e, norm=norm, bounds=b)
        if kind == "pgd":
            return PGD(epsilon=e, norm=norm, steps=draw(st.integers(1, 4)),
                       step_size=draw(st.one_of(st.none(), eps)), random_start=draw(st.booleans()),
                       seed=1, bounds=b, restarts=draw(st.integers(0, 1)))
        if kind == "cw":
            return CarliniWagnerL2(epsilon=e, steps=4, search_steps=2, bounds=b,
                                   confidence=draw(st.one_of(st.floats(0, 1e6), eps)),
                                   initial_const=draw(st.one_of(st.floats(1e-6, 1e6), eps)),
                                   learning_rate=draw(st.one_of(st.floats(1e-6, 10), eps)))
        return ZOO(epsilon=e, steps=3, search_steps=2, coordinates=2, seed=1, bounds=b)
    except (ValueError, TypeError):
        return None


def finite_dict(d):
    return all(isinstance(v, float) and math.isfinite(v) for v in d.values())


@settings(max_examples=75, **SETTINGS)
@given(attack=attacks(), kind=st.sampled_from(["kernel", "linear", "river"]), x=xs, y=ys)
def test_perturb_one_any_input(attack, kind, x, y):
    if attack is None:
        return
    m = model(kind)
    before, original = fingerprint(m) if kind != "river" else None, dict(x)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = attack.perturb_one(m, x, y)
        event("attacked")
    except InvalidInput:
        event("refused")
        return
    finally:
        assert x.keys() == original.keys()
        if before is not None:
            assert fingerprint(m) == before
    assert list(out) == list(x)
    assert finite_dict(out), (x, out)


@settings(max_examples=50, **SETTINGS)
@given(attack=attacks(), kind=st.sampled_from(["kernel", "linear", "river"]),
       X=hnp.arrays(np.float64, st.tuples(st.integers(1, 3), st.just(2)),
                    elements=st.one_of(st.floats(-2, 2), st.floats(),
                                       st.sampled_from([1e308, -1e308, 1e200]))))
def test_perturb_many_any_array(attack, kind, X):
    if attack is None:
        return
    m = model(kind)
    Xf = pd.DataFrame(X, columns=["a", "b"])
    y = [True] * len(X)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = attack.perturb_many(m, Xf, y, progress=False)
        event("attacked")
    except InvalidInput:
        event("refused")
        return
    assert np.isfinite(out.to_numpy()).all(), (X, out)


@settings(max_examples=75, **SETTINGS)
@given(kind=st.sampled_from(["kernel", "linear"]), x=xs, y=ys,
       norm=st.sampled_from([None, "l2", "linf", "l1", 2]), bounds=boxes)
def test_certified_radius_one_any_input(kind, x, y, norm, bounds):
    m = model(kind)
    before = fingerprint(m)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = m.certified_radius_one(x, y, norm=norm, bounds=bounds)
        event("certified")
    except (InvalidInput, ValueError) as error:
        event(type(error).__name__)
        return
    finally:
        assert fingerprint(m) == before
    assert isinstance(r, float) and not math.isnan(r) and r >= 0, (x, y, r)


@settings(max_examples=50, **SETTINGS)
@given(kind=st.sampled_from(["kernel", "linear"]),
       X=hnp.arrays(np.float64, st.tuples(st.integers(1, 3), st.just(2)),
                    elements=st.one_of(st.floats(-2, 2), st.floats(),
                                       st.sampled_from([1e308, -1e308, 1e200, 1e15]))),
       norm=st.sampled_from([None, "l2", "linf"]), bounds=boxes)
def test_certified_radius_many_any_array(kind, X, norm, bounds):
    m = model(kind)
    Xf = pd.DataFrame(X, columns=["a", "b"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = m.certified_radius_many(Xf, [True] * len(X), norm=norm, bounds=bounds)
        event("certified")
    except (InvalidInput, ValueError) as error:
        event(type(error).__name__)
        return
    assert not np.isnan(r).any() and (r >= 0).all(), (X, r)


def monitor_state(mon):
    return json.dumps(mon.state(), sort_keys=True, default=repr)


@settings(max_examples=50, **SETTINGS)
@given(kind=st.sampled_from(["linear", "kernel", "river"]),
       samples=st.lists(st.tuples(xs, ys, st.one_of(st.none(), ys)), min_size=1, max_size=6),
       attack=attacks())
def test_monitor_update_any_input(kind, samples, attack):
    m = model(kind)
    try:  # (it refuses an attack of no finite radius)
        mon = RobustnessMonitor(m, attack=attack or FGSM(epsilon=0.1), sample_rate=1,
                                detector=drift.NoDrift(), window_size=3, min_sampled=1, seed=0)
    except ValueError:
        return
    for x, y, y_pred in samples:
        before = monitor_state(mon)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mon.check(x, y)
        except InvalidInput:
            assert monitor_state(mon) == before
            check_refused = True
        else:
            check_refused = False
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mon.update(x, y, y_pred=y_pred)
            event("updated")
            assert not check_refused, ("check refused but update took", x, y)
        except InvalidInput:
            event("refused")
            assert monitor_state(mon) == before
        state = mon.state()
        json.dumps(state, allow_nan=False)
        snap = mon.snapshot()
        for k, v in snap.items():
            if isinstance(v, float):
                assert not math.isnan(v), (k, snap)
