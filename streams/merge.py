"""Sample-weighted averaging of `AdvKernelSVM` models that share a random-feature pool.

Models built with the same `seed`, `gamma`, `kernel`, `budget` and the 'compact' budget policy
hold their coefficients over the same `B` random features (feature `i` is regenerated from
`(seed, i)`, whatever the order in which inputs were first seen), so

    merged coefficients = sum_k n_k a_k / sum_k n_k

is a model in the same coordinates: parallel SGD's model averaging. The bias and the
calibration temperature are averaged with the same weights; the input names are the union.
Everything works on the checkpoint form of the models (`to_checkpoint` / `from_checkpoint`,
metadata and arrays), which is also what workers publish, so no private state is touched.

Only models whose parameters are all equal are averaged (`incompatibility` says why not). Two
models that saw their labels in another order are aligned first: the update is odd in the
label, so a model whose provisional positive class is the other model's negative one is
negated exactly.

Examples
--------

>>> from river_advsvm import AdvKernelSVM
>>> from streams import merge
>>> a, b = AdvKernelSVM(gamma=0.5, budget=8, seed=0), AdvKernelSVM(gamma=0.5, budget=8, seed=0)
>>> a.learn_one({"u": 1.0}, True); b.learn_one({"v": -1.0}, False)
>>> merged = merge.average([(*a.to_checkpoint(), 3.0), (*b.to_checkpoint(), 1.0)], n_learned=2)
>>> model = merge.to_model(*merged)
>>> model.n_learned, model.classes, model.n_features
(2, (False, True), 8)
>>> merge.incompatibility(a.to_checkpoint()[0], AdvKernelSVM(gamma=0.5, budget=8, seed=1)
...                       .to_checkpoint()[0])
'params differ: seed 0 != 1'

"""

from __future__ import annotations

import copy
import math

import numpy as np

from river_advsvm import AdvKernelSVM
from river_advsvm.checkpoint import CheckpointError

__all__ = ["IncompatibleModels", "average", "check_mergeable_params", "incompatibility",
           "to_model"]


class IncompatibleModels(ValueError):
    """Models that cannot be averaged: another pool, other parameters, other classes."""


def check_mergeable_params(params: dict) -> None:
    """Raise `ValueError` unless models with these parameters can be averaged across workers.

    Averaging needs the 'compact' policy (a fixed pool of features shared by every worker) and
    a numeric `gamma`: 'scale' would be fixed from each worker's own first sample, giving each
    worker another pool.
    """
    if params.get("budget_policy") != "compact":
        raise ValueError("workers that sync need budget_policy 'compact' (a shared feature pool), "
                         f"got {params.get('budget_policy')!r}")
    if not isinstance(params.get("gamma"), (int, float)) or isinstance(params.get("gamma"), bool):
        raise ValueError(
            "workers that sync need a numeric gamma (--gamma 0.05, say): 'scale' is fixed from "
            "each worker's first sample, so every worker would have its own feature pool"
        )
    if params.get("seed") is None:
        raise ValueError("workers that sync need an explicit seed: it fixes the feature pool")


def incompatibility(meta_a: dict, meta_b: dict) -> str | None:
    """Why two models (checkpoint metadata) cannot be averaged, or None if they can."""
    if meta_a.get("class") != AdvKernelSVM.__name__ or meta_b.get("class") != meta_a["class"]:
        return f"only AdvKernelSVM models are averaged ({meta_a.get('class')}, {meta_b.get('class')})"
    params_a, params_b = meta_a.get("params", {}), meta_b.get("params", {})
    for key in sorted(set(params_a) | set(params_b)):
        if params_a.get(key) != params_b.get(key):
            return f"params differ: {key} {params_a.get(key)!r} != {params_b.get(key)!r}"
    try:
        check_mergeable_params(params_a)
    except ValueError as error:
        return str(error)
    model_a = meta_a["state"]["model"]
    model_b = meta_b["state"]["model"]
    for key in ("seed", "gamma"):
        if model_a.get(key) is not None and model_b.get(key) is not None \
                and model_a[key] != model_b[key]:
            return f"pools differ: {key} {model_a[key]!r} != {model_b[key]!r}"
    try:
        _target_classes([list(meta_a["state"]["labels"]), list(meta_b["state"]["labels"])])
    except IncompatibleModels as error:
        return str(error)
    return None


def _target_classes(label_lists: list[list]) -> list:
    """The classes the merged model has, in the model's (negative, positive) order."""
    for labels in label_lists:
        if len(labels) == 2:
            target = list(labels)
            break
    else:
        distinct = list(dict.fromkeys(y for labels in label_lists for y in labels))
        if len(distinct) <= 1:
            return distinct
        target = distinct[:2]
        try:
            target.sort()  # the order MarginClassifier gives two labels
        except TypeError:
            pass  # unorderable: the first one seen (the base model's) is the negative class
    for labels in label_lists:
        if any(y not in target for y in labels):
            raise IncompatibleModels(f"classes {labels} do not fit {target}")
    return target


def _sign(labels: list, target: list) -> float:
    """+1 if a model with these labels has the target's orientation, -1 if it is negated."""
    if len(labels) == 2:
        return 1.0 if labels == target else -1.0
    if len(labels) == 1 and len(target) == 2:
        # A single label is provisionally positive: right only if it is the positive class.
        return 1.0 if labels[0] == target[1] else -1.0
    return 1.0


def average(members: list[tuple[dict, dict, float]], n_learned: int) -> tuple[dict, dict]:
    """Average models given as `(meta, arrays, weight)`; the first one is the base.

    The result keeps the base's parameters, extra metadata and input order (other inputs are
    appended), and has `n_learned` samples. Weights are non-negative; members of weight 0 only
    contribute their input names and labels. If every weight is 0, the base is returned as is
    (with `n_learned`). Raises `IncompatibleModels` if a member cannot be averaged with the base.
    """
    base_meta, base_arrays, _ = members[0]
    for meta, _, weight in members[1:]:
        reason = incompatibility(base_meta, meta)
        if reason is not None:
            raise IncompatibleModels(reason)
        if not (weight >= 0 and math.isfinite(weight)):
            raise ValueError(f"weights must be finite and >= 0, got {weight!r}")
    meta = copy.deepcopy(base_meta)
    arrays = {name: np.array(a, copy=True) for name, a in base_arrays.items()}
    state = meta["state"]
    state["n_learned"] = int(n_learned)

    target = _target_classes([list(m["state"]["labels"]) for m, _, _ in members])
    state["labels"] = target
    names = list(state["names"])
    known = {repr(n) for n in names}
    for m, _, _ in members[1:]:
        for name in m["state"]["names"]:
            if repr(name) not in known:
                known.add(repr(name))
                names.append(name)
    state["names"] = names

    active = [(m, a, w) for m, a, w in members if w > 0 and m["state"]["started"]]
    total = sum(w for _, _, w in active)
    if total <= 0:
        if _sign(list(base_meta["state"]["labels"]), target) < 0:
            _negate(meta, arrays)
        return meta, arrays

    first_meta, first_arrays, _ = active[0]
    ids = first_arrays["ids"]
    coef = np.zeros(len(ids))
    bias = scale = grad_squares = 0.0
    for m, a, w in active:
        if not np.array_equal(a["ids"], ids):
            raise IncompatibleModels("the models hold different random features")
        sign = _sign(list(m["state"]["labels"]), target)
        share = w / total
        coef += (share * sign) * np.asarray(a["coef"], dtype=np.float64)
        bias += share * sign * float(m["state"]["bias"])
        t_scale, t_squares = m["state"]["temperature"]
        scale += share * float(t_scale)
        grad_squares += share * float(t_squares)
    arrays["ids"], arrays["coef"] = np.array(ids, copy=True), coef
    state["bias"] = bias
    state["temperature"] = [scale, grad_squares]
    state["started"] = True
    store = dict(first_meta["state"]["model"]["store"])
    store["size"] = len(ids)
    store["norm"] = math.sqrt(len(ids)) * float(np.sqrt(coef @ coef))  # exact for 'compact'
    store["n_added"] = max(int(m["state"]["model"]["store"]["n_added"]) for m, _, _ in active)
    model = dict(first_meta["state"]["model"])
    model["store"] = store
    state["model"] = model
    return meta, arrays


def _negate(meta: dict, arrays: dict) -> None:
    state = meta["state"]
    state["bias"] = -float(state["bias"])
    if "coef" in arrays:
        arrays["coef"] = -np.asarray(arrays["coef"], dtype=np.float64)


def to_model(meta: dict, arrays: dict) -> AdvKernelSVM:
    """The model of a checkpoint's metadata and arrays (`CheckpointError` if invalid)."""
    if meta.get("class") != AdvKernelSVM.__name__:
        raise CheckpointError(f"expected an AdvKernelSVM, got {meta.get('class')!r}")
    return AdvKernelSVM.from_checkpoint(meta, arrays)
