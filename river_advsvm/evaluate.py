"""Evaluating models under attack: robustness reports and progressive validation.

- `robustness_report`: accuracy on a fixed set, clean, under attacks and certified.
- `iter_progressive_robust_val` / `progressive_robust_val`: River's progressive validation
  (test, then train) with each sample, or a share of them, also attacked and certified against
  the model as it is just before it learns that sample.

Every robust accuracy here comes with its two sides: an attack's accuracy is an upper bound on
the true robust accuracy (a stronger attack could only lower it), the certified accuracy a
lower bound (no attack can go below it). Reporting both shows how tight the evaluation is.

"""

from __future__ import annotations

import collections
import itertools
import math
import time
import typing
import warnings

import numpy as np
from river import metrics

from river_advsvm import inputs
from river_advsvm import progress as progress_
from river_advsvm.attacks.base import NOTE_SECONDS, Attack, NoGradientWarning, has_margin_api
from river_advsvm.kernels import NORMS
from river_advsvm.margin_predict import batch_labels

__all__ = ["iter_progressive_robust_val", "progressive_robust_val", "robustness_report"]

#: Samples of a stream read ahead of the model by progressive validation.
CHUNK = 1024

REPORT_COLUMNS = [
    "attack",
    "norm",
    "epsilon",
    "accuracy",
    "mean_perturbation",
    "max_perturbation",
    "no_gradient",
    "seconds",
]


def _predictions(model, names: list, values: np.ndarray) -> list:
    # This package's models predict batches as they predict samples (but for a margin within
    # rounding of 0); for any other model, predict_one is the contract (some River pipelines
    # fail on integer column names).
    if has_margin_api(model):
        import pandas as pd

        return list(model.predict_many(pd.DataFrame(values, columns=names)))
    return [model.predict_one(dict(zip(names, row))) for row in values.tolist()]


def _named(attacks) -> dict:
    if isinstance(attacks, dict):
        return dict(attacks)
    if isinstance(attacks, Attack):
        attacks = [attacks]
    named = {}
    for attack in attacks:
        name = type(attack).__name__
        if name in named:
            raise ValueError(f"two {name} attacks: pass a dict to name them")
        named[name] = attack
    return named


def _radii_by_norm(epsilons) -> dict[str, list[float]]:
    """The radii of each norm: `epsilons` checked, before any attack runs (a norm misspelt
    would drop its attacks from the report, a negative radius give rows of nonsense)."""
    if isinstance(epsilons, dict):
        unknown = [norm for norm in epsilons if norm not in NORMS]
        if unknown:
            raise ValueError(f"epsilons names the norm {unknown[0]!r}; the norms are {NORMS}")
        given = epsilons
    else:
        given = dict.fromkeys(NORMS, epsilons)
    radii = {}
    for norm, values in given.items():
        values = inputs.plain_number(values)
        values = [values] if isinstance(values, (int, float, str)) else values
        try:
            values = [inputs.plain_number(r) for r in values]
        except TypeError:
            values = [values]  # not a list either: refused below, as a radius
        for r in values:
            if not (inputs.is_number(r) and 0 <= r < math.inf):
                raise ValueError(f"a radius in epsilons must be a finite number >= 0, got "
                                 f"{inputs.describe(r)}")
        radii[norm] = values
    return radii


def robustness_report(
    model,
    X,
    y: typing.Sequence,
    attacks: dict | typing.Sequence | Attack,
    epsilons: dict | typing.Sequence[float] | float,
    certified: bool = True,
    progress: bool = True,
):
    """Accuracy of `model` on `(X, y)` clean, under each attack at each radius, and certified.

    Parameters
    ----------
    model
        A fitted binary classifier: one of this package's models (attacked white box, and
        certified) or any River classifier (attacked through its probabilities).
    X
        Samples: a DataFrame, or an array whose columns are features 0..d-1.
    y
        Their labels.
    attacks
        `river_advsvm.attacks` instances, as a list (named by class) or a dict of names to
        attacks, or one attack. Each is run at every radius of its norm, its own `epsilon`
        ignored (`ValueError` if `epsilons` gives its norm none).
    epsilons
        Radii: a list (or one radius) used for every attack in its own norm, or a dict from
        norm ('l2', 'linf') to a list of radii (or one). Radii of a norm no attack is in give
        no rows (one dict can serve reports of different attacks).
    certified
        Add the certified accuracy at every (norm, radius) of the report, for models that have
        `certified_radius_many`: within the attacks' box when every attack of that norm keeps
        to one (`bounds`), as their threat is.
    progress
        Show a progress bar per run on stderr, and first an estimate of what each attack will
        cost when the whole report may take more than a few seconds (only when stderr is a
        terminal and tqdm is installed). `False` switches both off.

    Returns
    -------
    A pandas DataFrame, one row per (attack, radius): the accuracy of the model's predictions on
    the attacked points, the mean and max perturbation norm (in the attack's norm), the number of
    samples the attack did not fool that got no usable gradient (see `attacks.AttackResult`),
    and the wall time in seconds. It starts with the clean row and ends with the certified rows.
    The accuracies of an empty batch are NaN (no sample, no share of them).
    Minimum-norm attacks (C&W, ZOO) run once; their row at radius `r` counts a sample as fooled
    when the smallest flip found is within `r`, and every row shows the time of that one run.

    Examples
    --------

    >>> from river_advsvm import AdvLinearSVM
    >>> from river_advsvm.attacks import FGSM, PGD
    >>> from river_advsvm.evaluate import robustness_report

    >>> model = AdvLinearSVM()
    >>> for _ in range(50):
    ...     model.learn_one({"a": 0.2, "b": 0.3}, False)
    ...     model.learn_one({"a": 0.9, "b": 0.7}, True)

    >>> import pandas as pd
    >>> X = pd.DataFrame({"a": [0.1, 0.2, 0.7, 0.9], "b": [0.2, 0.4, 0.5, 0.9]})
    >>> y = [False, False, True, True]
    >>> report = robustness_report(model, X, y, [FGSM(), PGD()], epsilons=[0.05, 0.2])
    >>> report[["attack", "norm", "epsilon", "accuracy", "max_perturbation"]]
          attack  norm  epsilon  accuracy  max_perturbation
    0      clean           0.00       1.0              0.00
    1       FGSM  linf     0.05       1.0              0.05
    2       FGSM  linf     0.20       0.5              0.20
    3        PGD  linf     0.05       1.0              0.05
    4        PGD  linf     0.20       0.5              0.20
    5  certified  linf     0.05       1.0              0.00
    6  certified  linf     0.20       0.5              0.00

    The linear model's certificate is exact, so certified and attacked accuracies meet.

    """
    import pandas as pd

    names, values = inputs.frame_values(X, needs="robustness_report")
    labels = batch_labels(y, X, len(values))

    def right_at(points: np.ndarray) -> np.ndarray:
        predictions = _predictions(model, names, points)
        return np.fromiter((p == t for p, t in zip(predictions, labels)), bool, len(labels))

    named = _named(attacks)
    radii_of = _radii_by_norm(epsilons)
    for name, attack in named.items():
        if not isinstance(attack, Attack):
            raise TypeError(f"{name!r} is not a river_advsvm.attacks.Attack")
        if not radii_of.get(attack.norm):  # (it would leave the report without a word)
            given = [norm for norm, radii in radii_of.items() if radii]
            raise ValueError(f"the attack {name!r} is in the {attack.norm} norm, and epsilons "
                             f"gives no radius of that norm (it gives "
                             f"{' and '.join(given) or 'none'})")
    runs = {name: (1 if attack.minimizes_norm else len(radii_of.get(attack.norm, [])))
            for name, attack in named.items()}
    if progress_.enabled(progress):
        _note_estimate(model, X, labels, named, runs)

    bar = progress_.bar(total=sum(runs.values()), desc="robustness_report", unit="run",
                        progress=progress and sum(runs.values()) > 1)
    start = time.perf_counter()
    clean_right = right_at(values)
    rows = [_row("clean", "", 0.0, clean_right, np.zeros(len(labels)), 0,
                 time.perf_counter() - start)]

    norms_used = []
    for name, attack in named.items():
        radii = radii_of.get(attack.norm, [])
        if radii and attack.norm not in norms_used:
            norms_used.append(attack.norm)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoGradientWarning)
            if attack.minimizes_norm:
                result = attack.clone({"epsilon": None}).run(model, X, labels, progress)
                bar.update(runs[name])
                adversarial_right = right_at(result.adversarial)
                for radius in radii:
                    within = result.norms <= radius
                    right = np.where(within, adversarial_right, clean_right)
                    norms = np.where(within, result.norms, 0.0)
                    rows.append(_row(name, attack.norm, radius, right, norms,
                                     result.n_no_gradient, result.seconds))
            else:
                for radius in radii:
                    result = attack.clone({"epsilon": radius}).run(model, X, labels, progress)
                    rows.append(_row(name, attack.norm, radius, right_at(result.adversarial),
                                     result.norms, result.n_no_gradient, result.seconds))
                    bar.update()
    bar.close()

    if certified and hasattr(model, "certified_radius_many"):
        norms = norms_used or [n for n in ("linf", "l2") if radii_of.get(n)]
        for norm in norms:
            # Within the box the attacks of this norm keep to, when they all keep to one (as
            # the threat they measure is); else in the whole space (smaller radii, still sound).
            boxes = [attack.bounds for attack in named.values() if attack.norm == norm]
            box = boxes[0] if boxes and all(b == boxes[0] for b in boxes) else None
            start = time.perf_counter()
            radii_found = model.certified_radius_many(X, labels, norm=norm, bounds=box)
            seconds = time.perf_counter() - start
            for radius in radii_of.get(norm, []):
                # A positive radius means a right prediction (the margin y g(x) > 0).
                right = (radii_found > 0) & (radii_found >= radius)
                rows.append(_row("certified", norm, radius, right, np.zeros(len(labels)), 0,
                                 seconds))
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)


def _note_estimate(model, X, labels: list, named: dict, runs: dict) -> None:
    """One line on stderr with what each attack of a report should cost, if it adds up to
    more than a few seconds."""
    costs = {name: runs[name] * attack.estimate_seconds(model, X, labels)
             for name, attack in named.items() if runs[name]}
    total = sum(costs.values())
    if total >= NOTE_SECONDS:
        parts = ", ".join(f"{name} ~{progress_.duration(seconds)}"
                          for name, seconds in costs.items())
        if len(costs) > 1:
            parts += f"; at most ~{progress_.duration(total)} in all"
        progress_.note(f"robustness_report on {len(labels):,} samples: {parts}")


def _row(attack, norm, radius, right, norms, no_gradient, seconds) -> dict:
    return dict(
        attack=attack,
        norm=norm,
        epsilon=float(radius),
        accuracy=float(right.mean()) if len(right) else float("nan"),
        mean_perturbation=float(norms.mean()) if len(norms) else 0.0,
        max_perturbation=float(norms.max()) if len(norms) else 0.0,
        no_gradient=int(no_gradient),
        seconds=float(seconds),
    )


# -- progressive validation under attack ----------------------------------------------------------


def iter_progressive_robust_val(
    dataset: typing.Iterable,
    model,
    attack: Attack | None = None,
    step: int = 100,
    sample_rate: float | int | None = None,
    monitor=None,
) -> typing.Iterator[dict]:
    """Progressive validation under attack: test, attack and certify each sample, then learn it.

    In the style of River's `evaluate.iter_progressive_val_score`: for each `(x, y)` of
    `dataset` the model predicts `x`, then learns `(x, y)`. Before it learns, sampled samples
    are also attacked and certified against the model as it is at that moment, by a
    `river_advsvm.monitor.RobustnessMonitor` (which does the per-sample work). A checkpoint is
    yielded every `step` samples, and after the last sample (for an empty stream, one at step
    0).

    Parameters
    ----------
    dataset
        An iterable of `(x, y)` pairs (a River dataset, `river.stream.iter_array`, ...).
    model
        The classifier: it is trained as the stream goes.
    attack
        A `river_advsvm.attacks.Attack` with a finite epsilon (default `PGD()`); certificates
        are at its radius, in its norm.
    step
        Samples between checkpoints.
    sample_rate
        Share of the samples attacked (a float in (0, 1], drawn at random with seed 0) or every
        N-th (an int); default 1.0, every sample.
    monitor
        A `RobustnessMonitor` of `model` to use instead (with its own attack, sample rate,
        detectors and alerts); `attack` and `sample_rate` must then be left out.

    Yields
    ------
    dict
        `step` (samples seen); `clean_accuracy` over all of them (`None` before the first);
        `robust_accuracy` and `certified_accuracy` over the attacked ones (`None` before the
        first, and certified for models that cannot be certified); `n_attacked`; `seconds`
        since the start and `attack_seconds` of them spent attacking and certifying; `alerts`
        raised since the previous checkpoint (the latest `max_alerts` of the monitor's, if
        there were more); `window`, the monitor's rolling accuracies
        (`snapshot()`).
        Accuracies are floats, not River metric objects, so that a list of checkpoints keeps
        the value each one had.

    Examples
    --------

    >>> from river import stream
    >>> from river_advsvm import AdvKernelSVM
    >>> from river_advsvm.attacks import PGD
    >>> from river_advsvm.evaluate import iter_progressive_robust_val
    >>> from sklearn.datasets import load_digits

    >>> X, y = load_digits(return_X_y=True)
    >>> ones_and_sevens = (y == 1) | (y == 7)
    >>> digits = stream.iter_array(X[ones_and_sevens] / 16, y[ones_and_sevens])

    >>> checkpoints = iter_progressive_robust_val(
    ...     digits, AdvKernelSVM(seed=0), PGD(epsilon=0.5, norm="l2"), step=120
    ... )
    >>> for c in checkpoints:
    ...     print(c["step"], f"{c['clean_accuracy']:.3f} {c['robust_accuracy']:.3f} "
    ...           f"{c['certified_accuracy']:.3f}")
    120 0.975 0.992 0.169
    240 0.988 0.958 0.525
    360 0.992 0.961 0.642
    361 0.992 0.961 0.643

    """
    from river_advsvm.monitor import RobustnessMonitor

    stream = _stream_of(dataset, model)
    if monitor is None:
        from river import drift  # loads river.stream, hence scikit-learn: only when needed

        # Evaluation only: no drift detection and no gap alerts.
        monitor = RobustnessMonitor(
            model, attack=attack, sample_rate=1.0 if sample_rate is None else sample_rate,
            detector=drift.NoDrift(), gap_threshold=None,
        )
    elif attack is not None or sample_rate is not None:
        raise ValueError("pass either a monitor or an attack and a sample_rate, not both")
    elif monitor.model is not model:
        raise ValueError("the monitor watches another model")
    step = inputs.check_count("step", step)  # (a count taken from an array: np.int64(100))

    clean, robust, certified = metrics.Accuracy(), metrics.Accuracy(), metrics.Accuracy()
    n_attacked = n_certified = 0
    # The latest alerts since the previous checkpoint, as many as the monitor keeps: a list
    # of them all grew with the stream between rare checkpoints.
    alerts: collections.deque = collections.deque(maxlen=getattr(monitor, "max_alerts", None))
    start = time.perf_counter()
    attack_seconds_before = monitor.attack_seconds

    def checkpoint() -> dict:
        report = {
            "step": n_seen,
            "clean_accuracy": clean.get() if n_seen else None,
            "robust_accuracy": robust.get() if n_attacked else None,
            "certified_accuracy": certified.get() if n_certified else None,
            "n_attacked": n_attacked,
            "seconds": time.perf_counter() - start,
            "attack_seconds": monitor.attack_seconds - attack_seconds_before,
            "alerts": list(alerts),
            "window": monitor.snapshot(),
        }
        alerts.clear()
        return report

    n_seen = 0
    # At most CHUNK samples read ahead of the model, whatever `step`: a checkpoint's samples
    # read whole held all of a stream checkpointed rarely (`progressive_robust_val` without
    # `print_every`: every 2**62 samples) in memory, and never started on an endless one.
    while chunk := list(itertools.islice(stream, min(step - n_seen % step, CHUNK))):
        _check_pairs(chunk, n_seen)  # before the model learns any sample of the chunk
        for x, y, y_pred in _test_then_train(model, monitor, chunk):
            alerts.extend(monitor.update(x, y, y_pred=y_pred))
            n_seen += 1
            clean.update(y, y_pred)
            seen = monitor.last
            if seen.sampled:
                n_attacked += 1
                robust.update(True, seen.robust_correct)
                if seen.certified is not None:
                    n_certified += 1
                    certified.update(True, seen.certified)
        if n_seen % step == 0:
            yield checkpoint()
    if n_seen % step or not n_seen:  # (an empty stream: one checkpoint, of nothing)
        yield checkpoint()


def _stream_of(dataset, model) -> typing.Iterator:
    """An iterator over `dataset`, once it and `model` are checked: TypeError for a model
    without learn_one or predict_one, or a dataset that is no iterable (they failed later as
    an AttributeError or a TypeError from inside)."""
    missing = [m for m in ("learn_one", "predict_one") if not callable(getattr(model, m, None))]
    if missing:
        raise TypeError(f"model must be a River classifier, with learn_one and predict_one; "
                        f"{inputs.describe(model)} has no {' or '.join(missing)}")
    try:
        return iter(dataset)
    except TypeError:
        raise TypeError(f"dataset must be an iterable of (x, y) pairs, got "
                        f"{inputs.describe(dataset)}") from None


def _check_pairs(chunk: list, start: int) -> None:
    """TypeError naming the first item of `chunk` (the items from `start` of the dataset) that
    is not an `(x, y)` pair: unpacking it failed deep inside, or took a str's two letters."""
    for i, item in enumerate(chunk):
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise TypeError(f"dataset item {start + i} is {inputs.describe(item)}, not an "
                            "(x, y) pair")


def _test_then_train(model, monitor, chunk: list) -> typing.Iterator[tuple]:
    """`(x, y, y_pred)` for each sample of `chunk`, the model having predicted `y_pred` just
    before it learned `(x, y)`, and the monitor's `update` due before the next sample is learned.

    Runs of samples the monitor will not attack go through `decision_then_learn_many` (one call,
    the same predictions and model, bit for bit, as a loop); a sample it attacks is predicted,
    handed over and learned alone, so that the attack meets the model as it was.
    """
    batched = hasattr(model, "decision_then_learn_many") and all(
        hasattr(monitor, method) for method in ("upcoming", "check"))
    attacked = monitor.upcoming(len(chunk)) if batched else [True] * len(chunk)
    # What the model will refuse to learn (an input that is NaN, a third class), refused
    # before the monitor counts the sample: the model learns exactly the samples counted.
    check_learn = getattr(model, "_check_learn_one", None)
    i = 0
    while i < len(chunk):
        if attacked[i] or len(getattr(model, "classes", ())) != 2:
            x, y = chunk[i]
            if check_learn is not None:
                if hasattr(monitor, "check"):
                    monitor.check(x, y)  # (its own words first, as for the samples of a run)
                check_learn(x, y)
            y_pred = model.predict_one(x)
            yield x, y, y_pred  # the monitor attacks here, before the model learns x
            model.learn_one(x, y)
            i += 1
            continue
        end = attacked.index(True, i) if True in attacked[i:] else len(chunk)
        end = min(end, i + _steady_collapse(model))
        if end == i:  # learning this sample may change `collapsed`: alone, as in a hand loop
            attacked[i] = True
            continue
        rows = chunk[i:end]
        # What the monitor will refuse, refused before the model learns the run: as for a
        # sample learned alone, which the monitor sees first.
        for x, y in rows:
            monitor.check(x, y)
        margins = model.decision_then_learn_many([x for x, _ in rows], [y for _, y in rows])
        negative, positive = model.classes
        for (x, y), margin in zip(rows, margins.tolist()):
            yield x, y, positive if margin > 0 else negative
        i = end


def _steady_collapse(model) -> int:
    """How many samples `model` can learn before its `collapsed` may change (the last of
    them not included): the monitor reads it before each sample, and a run learned at once
    must not show it a collapse that comes with a later sample of the run (its alert at the
    run's first sample, up to a whole run early)."""
    if not hasattr(model, "samples_before_collapse_check"):
        return 1 << 62
    return model.samples_before_collapse_check() - 1


def progressive_robust_val(
    dataset: typing.Iterable,
    model,
    attack: Attack | None = None,
    sample_rate: float | int | None = None,
    monitor=None,
    print_every: int = 0,
    progress: bool = True,
    **print_kwargs,
) -> dict:
    """Run `iter_progressive_robust_val` to the end; return its final checkpoint.

    With `print_every`, a line per `print_every` samples is printed (`print_kwargs` go to
    `print`, e.g. `file=`): `[100] clean 96.00% – robust 96.00% – certified 0.00% (25
    attacked) – 00:00:01`, the last field being the time elapsed. A progress bar over the
    samples is shown on stderr when it is a terminal and tqdm is installed; `progress=False`
    switches it off.

    Examples
    --------

    >>> from river import stream
    >>> from river_advsvm import AdvKernelSVM
    >>> from river_advsvm.attacks import PGD
    >>> from river_advsvm.evaluate import progressive_robust_val
    >>> from sklearn.datasets import load_digits

    >>> X, y = load_digits(return_X_y=True)
    >>> ones_and_sevens = (y == 1) | (y == 7)
    >>> digits = stream.iter_array(X[ones_and_sevens] / 16, y[ones_and_sevens])

    >>> final = progressive_robust_val(digits, AdvKernelSVM(seed=0), PGD(epsilon=0.5, norm="l2"),
    ...                                sample_rate=4)
    >>> final["step"], final["n_attacked"], f"{final['certified_accuracy']:.2%}"
    (361, 90, '62.22%')

    """
    print_every = inputs.plain_number(print_every)
    if not (inputs.is_whole(print_every) and print_every >= 0):
        raise ValueError(f"print_every must be an int >= 0 (0: print nothing), got "
                         f"{inputs.describe(print_every)}")
    stream = _stream_of(dataset, model)  # (before the bar)
    last = None
    step = print_every if print_every > 0 else 1 << 62
    with progress_.bar(total=_length(dataset), desc="progressive validation", unit="sample",
                       progress=progress) as bar:

        def counted(pairs):
            for pair in pairs:
                yield pair
                bar.update()

        for last in iter_progressive_robust_val(counted(stream), model, attack, step,
                                                sample_rate, monitor):
            if print_every > 0 and progress_.enabled(progress):
                progress_.write(_progress_line(last), file=print_kwargs.get("file"))
            elif print_every > 0:
                print(_progress_line(last), **print_kwargs)
    return last


def _length(dataset) -> int | None:
    """The number of samples of a sized iterable or a River dataset, if it says."""
    try:
        return len(dataset)
    except TypeError:
        return getattr(dataset, "n_samples", None)


def _progress_line(checkpoint: dict) -> str:
    def percent(value):
        return "n/a" if value is None else f"{value:.2%}"

    hours, rest = divmod(int(checkpoint["seconds"]), 3600)  # past 24 hours, not a clock time
    return (
        f"[{checkpoint['step']:,}] clean {percent(checkpoint['clean_accuracy'])} – robust "
        f"{percent(checkpoint['robust_accuracy'])} – certified "
        f"{percent(checkpoint['certified_accuracy'])} ({checkpoint['n_attacked']:,} attacked) – "
        f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    )
