"""Progressive validation under attack: checkpoints, agreement with a hand-written loop."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import stream
from river.datasets import synth

from river_advsvm import AdvKernelSVM, InvalidInput
from river_advsvm.attacks import PGD
from river_advsvm.evaluate import (
    _progress_line, iter_progressive_robust_val, progressive_robust_val,
)
from river_advsvm.monitor import RobustnessMonitor

ATTACK = dict(epsilon=0.5, norm="l2")


@pytest.fixture(scope="module")
def digits_stream():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    mask = (y == 1) | (y == 7)
    return list(stream.iter_array(X[mask] / 16.0, y[mask]))


def hand_written(samples, model, attack, every):
    """Test-then-train by hand, with the attack and the certificate called directly."""
    clean = robust = certified = attacked = 0
    for i, (x, y) in enumerate(samples, 1):
        right = model.predict_one(x) == y
        clean += right
        if i % every == 0 and len(model.classes) == 2:
            attacked += 1
            if right:
                robust += model.predict_one(attack.perturb_one(model, x, y)) == y
                radius = model.certified_radius_one(x, y, norm=attack.norm)
                certified += radius >= attack.epsilon
        model.learn_one(x, y)
    n = len(samples)
    return clean / n, robust / attacked, certified / attacked, attacked


def test_checkpoints_match_a_hand_written_loop(digits_stream):
    checkpoints = list(iter_progressive_robust_val(
        digits_stream, AdvKernelSVM(seed=0), PGD(**ATTACK), step=100, sample_rate=3,
    ))
    assert [c["step"] for c in checkpoints] == [100, 200, 300, 361]
    final = checkpoints[-1]
    expected = hand_written(digits_stream, AdvKernelSVM(seed=0), PGD(**ATTACK), every=3)
    got = (final["clean_accuracy"], final["robust_accuracy"], final["certified_accuracy"],
           final["n_attacked"])
    assert got == pytest.approx(expected)
    # Sound bounds, sample by sample: certified <= robust <= clean.
    for c in checkpoints:
        assert c["certified_accuracy"] <= c["robust_accuracy"] <= 1.0
        assert 0.0 < c["attack_seconds"] < c["seconds"]
    # Each checkpoint kept its own values (floats, not shared metric objects).
    assert checkpoints[0]["clean_accuracy"] != final["clean_accuracy"]
    assert [c["n_attacked"] for c in checkpoints] == [33, 66, 100, 120]


def test_every_sample_is_attacked_by_default(digits_stream):
    (final,) = iter_progressive_robust_val(digits_stream[:50], AdvKernelSVM(seed=0),
                                           PGD(**ATTACK), step=1000)
    # The first two samples meet a model that knows fewer than two classes: no margin to attack.
    assert final["n_attacked"] == 48
    assert final["alerts"] == []  # evaluation only: no detectors


def test_a_monitor_brings_its_attack_and_its_alerts(digits_stream):
    model = AdvKernelSVM(seed=0)
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=1.0, norm="l2"), sample_rate=1,
                                window_size=50, gap_threshold=0.2)
    checkpoints = list(iter_progressive_robust_val(digits_stream, model, monitor=monitor,
                                                   step=50))
    alerts = [a for c in checkpoints for a in c["alerts"]]
    # The natural model loses about half of its samples to PGD at L2 radius 1: a gap alert
    # first (ADWIN may add a robust_drift as the robust accuracy falls further).
    assert [a.kind for a in alerts] == [a.kind for a in monitor.alerts]
    assert alerts[0].kind == "robust_gap"
    assert checkpoints[-1]["window"] == monitor.snapshot()
    assert checkpoints[-1]["robust_accuracy"] < 0.75
    with pytest.raises(ValueError, match="not both"):
        next(iter_progressive_robust_val(digits_stream, model, PGD(), monitor=monitor))
    with pytest.raises(ValueError, match="another model"):
        next(iter_progressive_robust_val(digits_stream, AdvKernelSVM(), monitor=monitor))


def test_progressive_robust_val_prints_and_returns_the_last_checkpoint():
    dataset = synth.Hyperplane(seed=0, n_features=5).take(250)
    out = io.StringIO()
    final = progressive_robust_val(dataset, AdvKernelSVM(seed=0), PGD(epsilon=0.05),
                                   sample_rate=0.2, print_every=100, file=out)
    lines = out.getvalue().splitlines()
    assert [line.split("]")[0] for line in lines] == ["[100", "[200", "[250"]
    assert lines[-1].startswith(f"[250] clean {final['clean_accuracy']:.2%} – robust ")
    assert final["step"] == 250 and 30 < final["n_attacked"] < 70


@pytest.mark.parametrize("seconds, shown", [(59.9, "00:00:59"), (3_725, "01:02:05"),
                                            (90_000, "25:00:00"), (200_000.5, "55:33:20")])
def test_the_elapsed_time_of_a_run_longer_than_a_day_counts_its_days(seconds, shown):
    line = _progress_line({"step": 10, "clean_accuracy": 1.0, "robust_accuracy": None,
                           "certified_accuracy": None, "n_attacked": 0, "seconds": seconds})
    assert line.endswith(f"(0 attacked) – {shown}")


@pytest.mark.parametrize("sample_rate", [1.0, 100])
def test_a_sample_the_monitor_refuses_is_refused_before_the_model_learns_it(sample_rate):
    """Samples the monitor does not attack are learned in runs (`decision_then_learn_many`),
    and the monitor saw them only after: a sample outside the attack's box was refused once
    the model had learned it and the rest of its run, none of them counted. The run is
    checked first now: the model learned exactly the samples the checkpoints counted."""
    rng = np.random.default_rng(0)
    data = [({"a": float(rng.random()), "b": float(rng.random())}, bool(i % 2))
            for i in range(40)]
    data[25] = ({"a": 1.5, "b": 0.5}, True)
    model = AdvKernelSVM(seed=0, warm_up=5)
    checkpoints = iter_progressive_robust_val(data, model, PGD(epsilon=0.05, steps=2), step=10,
                                              sample_rate=sample_rate)
    steps = []
    with pytest.raises(InvalidInput, match="outside bounds"):
        for checkpoint in checkpoints:
            steps.append(checkpoint["step"])
    assert steps == [10, 20]
    # Alone, the samples before the refused one are learned; in a run, none of the run's.
    assert model.n_learned == (25 if sample_rate == 1.0 else 20)


def test_an_empty_stream_gives_one_checkpoint_of_nothing(capsys):
    """`progressive_robust_val` returns its final checkpoint: for an empty stream it returned
    None; now a checkpoint at step 0 whose accuracies are None (not 0%), printed as n/a."""
    model = AdvKernelSVM(seed=0)
    checkpoints = list(iter_progressive_robust_val([], model, PGD(epsilon=0.1, norm="l2")))
    assert [c["step"] for c in checkpoints] == [0]
    final = progressive_robust_val([], model, PGD(epsilon=0.1, norm="l2"), print_every=1,
                                   progress=False)
    assert final["step"] == final["n_attacked"] == 0
    assert all(final[k] is None
               for k in ("clean_accuracy", "robust_accuracy", "certified_accuracy"))
    assert "clean n/a" in capsys.readouterr().out
    assert model.n_learned == 0


def _collapsing_model():
    """A linear model whose collapse watch judges blocks of 4 (not 128): on a stream whose
    inputs barely vary, its decisions are one class and it reports a collapse within 20
    samples."""
    from river_advsvm import AdvLinearSVM
    from river_advsvm.collapse import CollapseWatch

    model = AdvLinearSVM()
    model._collapse = CollapseWatch(block=4, blocks=2, min_share=0.25)
    return model


def _watching(model):
    """A monitor that only reports a collapse: it attacks one sample in 1,000 and has no drift
    or gap alerts."""
    from river import drift

    from river_advsvm.attacks import FGSM

    return RobustnessMonitor(model, attack=FGSM(epsilon=0.01), sample_rate=1000,
                             detector=drift.NoDrift(), gap_threshold=None)


def _alerts_by_hand(model, data):
    """The alerts of a test-then-train loop over `data` watched by `_watching`, and its
    monitor."""
    monitor = _watching(model)
    alerts = []
    for x, y in data:
        alerts += monitor.update(x, y)
        model.learn_one(x, y)
    return alerts, monitor


@pytest.mark.parametrize("step", [7, 50, 1000])
@pytest.mark.filterwarnings("ignore::river_advsvm.collapse.CollapseWarning")
def test_a_collapse_alert_comes_at_the_step_a_hand_loop_raises_it(step):
    """Samples the monitor does not attack are learned in runs; the monitor read the model's
    `collapsed` after the whole run, and a collapse that came with the 17th sample was
    reported at step 2. Runs end where the model's collapse may change now."""
    rng = np.random.default_rng(0)
    data = [({"a": 0.5, "b": 0.5 + 0.01 * (i % 3)}, bool(rng.random() < 0.5))
            for i in range(300)]
    model = _collapsing_model()
    by_hand, monitor = _alerts_by_hand(model, data)
    assert by_hand and by_hand[0].kind == "collapsed" and by_hand[0].step > 8

    other = _collapsing_model()
    checkpoints = list(iter_progressive_robust_val(data, other, monitor=_watching(other),
                                                   step=step))
    assert [a for c in checkpoints for a in c["alerts"]] == by_hand
    assert other.n_learned == model.n_learned == len(data)
    assert checkpoints[-1]["clean_accuracy"] == monitor.snapshot()["clean_accuracy"]


@pytest.mark.parametrize("print_every", [0, 5000])
def test_the_stream_is_read_as_it_is_learned_not_all_at_once(print_every):
    """Without `print_every`, `progressive_robust_val` asked for checkpoints every 2**62
    samples, and each checkpoint's samples were read into a list before the first was
    learned: the whole stream held in memory (an endless one never started), and the
    progress bar at 100% before any work. The stream is now read a bounded chunk ahead of
    the model."""
    from river_advsvm import AdvLinearSVM
    from river_advsvm.evaluate import CHUNK

    model = AdvLinearSVM()
    rng = np.random.default_rng(0)
    ahead = []

    def samples(n):
        for i in range(n):
            ahead.append(i - model.n_learned)
            x = {"a": float(rng.random()), "b": float(rng.random())}
            yield x, x["a"] > x["b"]

    final = progressive_robust_val(samples(3 * CHUNK + 10), model, PGD(epsilon=0.05),
                                   sample_rate=1000, print_every=print_every, progress=False)
    assert final["step"] == model.n_learned == 3 * CHUNK + 10
    assert max(ahead) <= CHUNK


@pytest.mark.parametrize("step", [0, -3, 2.5, True, "10", None])
def test_a_step_that_is_no_count_is_refused_by_name(step):
    model = AdvKernelSVM(seed=0)
    with pytest.raises(ValueError, match="step"):
        next(iter_progressive_robust_val([({"a": 0.5}, True)], model, step=step))
    assert model.n_learned == 0


def test_a_numpy_step_is_the_count_it_holds():
    """`np.int64(2)` was refused as "step must be a positive int, got 2"."""
    data = [({"a": 0.1 * i}, i % 2 == 0) for i in range(5)]
    steps = [c["step"] for c in iter_progressive_robust_val(
        data, AdvKernelSVM(seed=0), PGD(epsilon=0.05), step=np.int64(2))]
    assert steps == [2, 4, 5] and all(type(s) is int for s in steps)


@pytest.mark.parametrize("print_every", [-1, 2.5, True, "10", None])
def test_a_print_every_that_is_no_count_is_refused_by_name(print_every):
    """"10" raised "'>' not supported between 'str' and 'int'", 2.5 "step must be a positive
    int", and True printed a line per sample."""
    model = AdvKernelSVM(seed=0)
    with pytest.raises(ValueError, match="print_every"):
        progressive_robust_val([({"a": 0.5}, True)], model, print_every=print_every,
                               progress=False)
    assert model.n_learned == 0


@pytest.mark.filterwarnings("ignore::river_advsvm.collapse.CollapseWarning")
def test_the_alerts_a_checkpoint_holds_are_bounded_like_the_monitors():
    """A checkpoint held every alert raised since the previous one: with `step` large (as
    `progressive_robust_val` without `print_every` has it) the list grew with the stream.
    It keeps the latest `max_alerts` now, as the monitor does."""
    from river import drift

    from river_advsvm import AdvLinearSVM
    from river_advsvm.attacks import FGSM

    rng = np.random.default_rng(0)
    data = []
    for i in range(6000):
        x = {"a": float(rng.random()), "b": float(rng.random())}
        data.append((x, (x["a"] > x["b"]) != bool((i // 300) % 2)))
    model = AdvLinearSVM()
    received = []
    monitor = RobustnessMonitor(model, attack=FGSM(epsilon=0.01), sample_rate=1000,
                                detector=drift.ADWIN(), gap_threshold=None, max_alerts=3,
                                on_alert=received.append)
    (final,) = iter_progressive_robust_val(data, model, monitor=monitor, step=10_000)
    assert len(received) > 3
    assert final["alerts"] == received[-3:] == monitor.alerts


def _model_of(kind: str):
    from river import preprocessing

    from river_advsvm import AdvLinearSVM
    from river_advsvm.multiclass import OneVsRest

    return {"linear": lambda: AdvLinearSVM(),
            "kernel": lambda: AdvKernelSVM(seed=0, warm_up=3, budget=20),
            "pipeline": lambda: preprocessing.StandardScaler() | AdvKernelSVM(seed=0, warm_up=3),
            "one-vs-rest": lambda: OneVsRest(AdvLinearSVM())}[kind]()


def _by_hand(data, model, attack, every: int, step: int) -> list:
    """The checkpoints of test-then-train written out: predict, attack and certify the sampled
    samples the model knows the label of, learn; a checkpoint every `step` and at the end."""
    out = []
    right = robust = certified = attacked = n_certified = 0
    can_certify = hasattr(model, "certified_radius_one")
    for i, (x, y) in enumerate(data, 1):
        correct = model.predict_one(x) == y
        right += correct
        classes = getattr(model, "classes", None)
        if i % every == 0 and (classes is None or (len(classes) == 2 and y in classes)):
            attacked += 1
            if correct:
                robust += model.predict_one(attack.perturb_one(model, x, y)) == y
                if can_certify:
                    radius = model.certified_radius_one(x, y, norm=attack.norm,
                                                        bounds=attack.bounds)
                    certified += radius > 0 and radius >= attack.epsilon
            n_certified += can_certify
        model.learn_one(x, y)
        if i % step == 0 or i == len(data):
            out.append((i, right / i, robust / attacked if attacked else None,
                        certified / n_certified if n_certified else None, attacked))
    return out or [(0, None, None, None, 0)]


@pytest.mark.filterwarnings("ignore::river_advsvm.attacks.NoGradientWarning")
@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(["linear", "kernel", "pipeline", "one-vs-rest"]),
       n=st.integers(0, 50), every=st.integers(1, 5), step=st.integers(1, 20),
       seed=st.integers(0, 2**32), n_labels=st.sampled_from([1, 2, 3]))
def test_checkpoints_are_what_a_hand_loop_computes(kind, n, every, step, seed, n_labels):
    """Binary models (learned in runs between attacks), a River pipeline, one-vs-rest, streams
    of one label, empty streams: each checkpoint is what test-then-train by hand gives."""
    from river_advsvm.attacks import FGSM

    rng = np.random.default_rng(seed)
    data = []
    for _ in range(n):
        a, b = rng.random(2).tolist()
        if kind == "one-vs-rest":
            y = int((a + b) * n_labels / 2) % n_labels
        else:
            y = bool(a > b) if n_labels > 1 else "only"
        data.append(({"a": a, "b": b}, y))
    attack = FGSM(epsilon=0.05)
    expected = _by_hand(data, _model_of(kind), attack, every, step)
    got = [(c["step"], c["clean_accuracy"], c["robust_accuracy"], c["certified_accuracy"],
            c["n_attacked"])
           for c in iter_progressive_robust_val(data, _model_of(kind), attack, step=step,
                                                sample_rate=every)]
    assert got == expected


@pytest.mark.parametrize("sample_rate", [1, 7, 1000])
@pytest.mark.parametrize("where", [0, 5, 13, 29])
def test_a_none_label_is_refused_before_the_model_learns_it(sample_rate, where):
    """A stream with a missing label: refused in words, alone or in a run, and the model has
    learned exactly the samples the monitor counted (none of the refused one's run)."""
    from river_advsvm import AdvLinearSVM

    rng = np.random.default_rng(where)
    data = [({"a": float(rng.random()), "b": float(rng.random())}, bool(i % 2))
            for i in range(30)]
    data[where] = (data[where][0], None)
    model = AdvLinearSVM()
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05, steps=2),
                                sample_rate=sample_rate)
    steps = []
    with pytest.raises(InvalidInput, match="label None"):
        for checkpoint in iter_progressive_robust_val(data, model, monitor=monitor, step=10):
            steps.append(checkpoint["step"])
    assert steps == list(range(10, where + 1, 10))
    assert model.n_learned == monitor.n_seen <= where


@pytest.mark.parametrize("sample_rate", [1, 1000])
@pytest.mark.parametrize("bad", ["nan input", "third class"])
def test_a_sample_the_model_refuses_to_learn_is_not_counted(sample_rate, bad):
    """The monitor takes NaN as a missing input and any label; the model refuses to learn
    either. A sample handed over alone (attacked, or before the model knows two classes) was
    counted by the monitor, then refused by `learn_one`: the monitor had counted a sample the
    model never learned. It is refused before the monitor counts it now, as in a run."""
    from river_advsvm import AdvLinearSVM

    rng = np.random.default_rng(1)
    data = [({"a": float(rng.random()), "b": float(rng.random())}, bool(i % 2))
            for i in range(30)]
    for where in (3, 17):
        stream_ = list(data)
        x, y = stream_[where]
        stream_[where] = ({**x, "a": float("nan")}, y) if bad == "nan input" else (x, "third")
        model = AdvLinearSVM()
        monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05, steps=2),
                                    sample_rate=sample_rate)
        with pytest.raises(InvalidInput):
            for _ in iter_progressive_robust_val(stream_, model, monitor=monitor, step=10):
                pass
        assert model.n_learned == monitor.n_seen <= where


@pytest.mark.parametrize("warm_up", [10, 19, 41])
@pytest.mark.filterwarnings("ignore::river_advsvm.collapse.CollapseWarning")
@pytest.mark.filterwarnings("ignore:gamma='scale'")
def test_a_collapse_judged_as_the_warm_up_ends_comes_at_its_step(warm_up):
    """A kernel model holds its warm-up samples back and learns them all with the sample that
    ends it, which is when its collapse watch judges them: a run that crossed the end of the
    warm-up showed the monitor a collapse up to 7 samples early (step 35 for 42)."""
    from river_advsvm.collapse import CollapseWatch

    def collapsing():
        model = AdvKernelSVM(seed=0, warm_up=warm_up)
        model._collapse = CollapseWatch(block=4, blocks=2, min_share=0.25)
        return model

    rng = np.random.default_rng(0)
    data = [({"a": 0.5, "b": 0.5}, bool(rng.random() < 0.5)) for _ in range(120)]
    by_hand, _ = _alerts_by_hand(collapsing(), data)
    assert by_hand and by_hand[0].kind == "collapsed"
    for step in (7, 1000):
        other = collapsing()
        checkpoints = iter_progressive_robust_val(data, other, monitor=_watching(other),
                                                  step=step)
        assert [a for c in checkpoints for a in c["alerts"]] == by_hand


not_pairs = st.one_of(
    st.integers(), st.none(), st.text(max_size=3), st.floats(allow_nan=False),
    st.dictionaries(st.text(max_size=2), st.floats(0, 1), max_size=3),
    st.tuples(st.just({"a": 0.5})), st.tuples(st.just({"a": 0.5}), st.booleans(), st.integers()),
    st.builds(np.array, st.lists(st.floats(0, 1), min_size=2, max_size=2)),
)


@settings(max_examples=40, deadline=None)
@given(item=not_pairs, where=st.integers(0, 29), step=st.sampled_from([1, 7, 100]))
def test_an_item_that_is_no_pair_is_refused_naming_its_position(item, where, step):
    """`iter_progressive_robust_val([1, 2], ...)` failed with "cannot unpack non-iterable int
    object" from inside; the item is named, before the model learns anything of its chunk."""
    from river_advsvm import AdvLinearSVM

    data = [({"a": (i % 10) / 10, "b": 0.5}, bool(i % 2)) for i in range(30)]
    data[where] = item
    model = AdvLinearSVM()
    monitor = RobustnessMonitor(model, attack=PGD(epsilon=0.05, steps=2), sample_rate=3)
    with pytest.raises(TypeError, match=rf"^dataset item {where} is .*, not an \(x, y\) pair$") \
            as refused:
        for _ in iter_progressive_robust_val(data, model, monitor=monitor, step=step):
            pass
    assert "np." not in str(refused.value) and "array(" not in str(refused.value)
    assert model.n_learned == monitor.n_seen <= where


@pytest.mark.parametrize("run", [iter_progressive_robust_val, progressive_robust_val])
@pytest.mark.parametrize("dataset, model, match", [
    ([({"a": 0.5}, True)], None, "model must be a River classifier, with learn_one and "
                                 "predict_one; None has no learn_one or predict_one"),
    ([({"a": 0.5}, True)], object(), "has no learn_one or predict_one"),
    (None, "model", r"dataset must be an iterable of \(x, y\) pairs, got None"),
    (3, "model", r"dataset must be an iterable of \(x, y\) pairs, got 3"),
])
def test_a_model_or_a_dataset_of_the_wrong_kind_is_refused_up_front(run, dataset, model,
                                                                      match):
    """`model=None` failed as "'NoneType' object has no attribute 'predict_one'", and
    `dataset=None` as "'NoneType' object is not iterable", from inside."""
    from river_advsvm import AdvLinearSVM

    model = AdvLinearSVM() if model == "model" else model
    with pytest.raises(TypeError, match=match):
        result = run(dataset, model, PGD(epsilon=0.05))
        list(result) if run is iter_progressive_robust_val else None
