"""Sample-weighted averaging of `AdvKernelSVM` models across the workers of a group.

The merged model is the weighted average of the models' decision functions,

    f = sum_k w_k f_k,   b = sum_k w_k b_k,   w_k = n_k / sum_j n_j,

which is parallel SGD's model averaging. How `f` is formed depends on the representation:

- Support vectors ('merge', 'remove'): `f` is a sum of kernels centred on stored vectors, so the
  average is taken in function space: the union of every model's vectors, each coefficient
  multiplied by its model's weight (equal vectors are combined exactly), then the usual budget
  maintenance merges or removes vectors until at most `budget` remain. Before maintenance the
  average is exact; each maintenance step moves `f` by the square root of the weight
  degradation it records, so `|f(x) - sum_k w_k f_k(x)|` is at most the sum of those square
  roots (the kernel is at most 1). The norm is recomputed exactly, cross terms included.
- Random features ('compact'): models with the same `seed`, `gamma` and `budget` hold their
  coefficients over the same `B` features (feature `i` is regenerated from `(seed, i)`), so the
  coefficients themselves are averaged.

- Support vectors over a basis the group shares (`river_advsvm.support_basis`): each model is
  first projected onto the basis by `project` (the closest function of its span, in the
  kernel's space, with the exact loss), then the coefficients are averaged (`average(...,
  basis=basis)`): B numbers per model, no maintenance, and the result is a support-vector model
  whose vectors are the basis, with its exact norm.

Models that predict with the average of their iterates (`averaging`) fold those averages with
the same weights: coefficient by coefficient for random features and over a basis (where each
member's average is projected onto the basis as its `f` is, `over_basis`), and by the union
projected onto the fold's vectors (the closest function of their span in the kernel's space);
the folded average keeps no vectors of its own.

The calibration temperature, the share of recent samples inside the margin
(`active_share`, which damps the bias' steps) and the labels' balance (which a damped bias step
follows) are averaged with the same weights; the input
names are the union (the base's first, in its order; over a basis, the basis' first).
Everything works on the checkpoint form of the models (`to_checkpoint` / `from_checkpoint`,
metadata and arrays), which is also what workers publish.

What can be averaged (`incompatibility` says why not; `options_incompatibility`, why no group
can average a model whatever its peers): two `AdvKernelSVM` whose parameters are all equal
(kernel, gamma, budget, budget policy, dtype, epsilon, ...), with a policy that has a
shared representation ('merge', 'remove' or 'compact') and a fixed `gamma`, a number or a dict
of per-feature bandwidths: 'scale' is fitted by each model on its own first samples, and two
models of different bandwidths live in different spaces (`check_mergeable_params`). Models
that saw their labels in another order are aligned first: the update is odd in the label, so a
model whose provisional positive class is the other model's negative one is negated exactly.

Examples
--------

>>> from river_advsvm import AdvKernelSVM
>>> from river_advsvm.streams import merge
>>> a, b = AdvKernelSVM(gamma=0.5, budget=8, seed=0), AdvKernelSVM(gamma=0.5, budget=8, seed=0)
>>> a.learn_one({"u": 1.0}, True); b.learn_one({"v": -1.0}, False)
>>> merged = merge.average([(*a.to_checkpoint(), 3.0), (*b.to_checkpoint(), 1.0)], n_learned=2)
>>> model = merge.to_model(*merged)
>>> model.n_learned, model.classes, model.n_support_vectors
(2, (False, True), 2)
>>> x = {"u": 0.5, "v": 0.5}
>>> abs(model.decision_one(x) - (0.75 * a.decision_one(x) + 0.25 * b.decision_one(x))) < 1e-9
True
>>> merge.incompatibility(a.to_checkpoint()[0], AdvKernelSVM(gamma=0.6, budget=8, seed=0)
...                       .to_checkpoint()[0])
'params differ: gamma 0.5 != 0.6'

"""

from __future__ import annotations

import copy
import math

import numpy as np

from river_advsvm import AdvKernelSVM, inputs
from river_advsvm.checkpoint import CheckpointError
from river_advsvm.support import SupportVectors
from river_advsvm.support_average import saved_expansion, saved_without_orphans
from river_advsvm.support_basis import SharedBasis
from river_advsvm.support_saved import MAX_SAVED_WEIGHT
from river_advsvm.support_store import row_groups

__all__ = ["IncompatibleModels", "POLICIES", "average", "check_mergeable_params",
           "check_over_basis", "incompatibility", "options_incompatibility", "over_basis",
           "project", "to_model"]

#: Budget policies whose models can be averaged: support vectors (any two models share the
#: input space) and 'compact' random features (a pool fixed by the seed).
SUPPORT_VECTOR_POLICIES = ("merge", "remove")
POLICIES = (*SUPPORT_VECTOR_POLICIES, "compact")


class IncompatibleModels(ValueError):
    """Models that cannot be averaged: other parameters, another pool, other classes."""


def check_mergeable_params(params: dict) -> None:
    """Raise `ValueError` unless models with these parameters can be averaged across workers.

    Averaging needs a shared representation: support vectors ('merge', 'remove') or the
    'compact' random features with an explicit seed (the pool); and a fixed `gamma`: 'scale'
    is fitted by each worker on its own first samples, and models of different bandwidths
    cannot be averaged.
    """
    policy = params.get("budget_policy")
    if policy not in POLICIES:
        raise ValueError(f"workers that sync need budget_policy 'merge', 'remove' or 'compact' "
                         f"(a representation they share), got {policy!r}")
    gamma = params.get("gamma")
    # (A checkpoint holds a dict naming inputs other than by str as a list of pairs.)
    fixed = isinstance(gamma, (dict, list)) or inputs.is_number(gamma)
    if not fixed:
        raise ValueError(
            "workers that sync need a numeric gamma, the same for every worker (--gamma 0.05, "
            "say; 2/(d Var x) over a sample of inputs on one scale is what 'scale' fits): with "
            "'scale' each worker would fit its own from its first samples, and models of "
            "different bandwidths cannot be averaged"
        )
    if policy == "compact" and params.get("seed") is None:
        raise ValueError("workers that sync with budget_policy 'compact' need an explicit seed: "
                         "it fixes the feature pool")


def options_incompatibility(meta: dict) -> str | None:
    """Why no group can average a model (checkpoint metadata), whatever its peers: another
    class than `AdvKernelSVM`, or options `check_mergeable_params` refuses; None if a group
    of models with its options can be averaged."""
    if meta.get("class") != AdvKernelSVM.__name__:
        return _only_kernel_models(meta.get("class"))
    try:
        check_mergeable_params(meta.get("params", {}))
    except ValueError as error:
        return str(error)
    return None


def incompatibility(meta_a: dict, meta_b: dict) -> str | None:
    """Why two models (checkpoint metadata) cannot be averaged, or None if they can."""
    if meta_a.get("class") != AdvKernelSVM.__name__ or meta_b.get("class") != meta_a["class"]:
        return _only_kernel_models(meta_a.get("class"), meta_b.get("class"))
    params_a, params_b = meta_a.get("params", {}), meta_b.get("params", {})
    differ = [f"{key} {params_a.get(key)!r} != {params_b.get(key)!r}"
              for key in sorted(set(params_a) | set(params_b))
              if params_a.get(key) != params_b.get(key)]
    if differ:
        return f"params differ: {', '.join(differ)}"
    reason = options_incompatibility(meta_a)  # equal options: the one check serves both
    if reason is not None:
        return reason
    model_a = meta_a["state"]["model"]
    model_b = meta_b["state"]["model"]
    # The features of 'compact' come from the seed; support vectors need the bandwidth only.
    keys = ("gamma",) if _support_vectors(meta_a) else ("seed", "gamma")
    for key in keys:
        if model_a.get(key) is not None and model_b.get(key) is not None \
                and model_a[key] != model_b[key]:
            what = "bandwidths" if key == "gamma" else "pools"
            return f"{what} differ: {key} {model_a[key]!r} != {model_b[key]!r}"
    try:
        _target_classes([list(meta_a["state"]["labels"]), list(meta_b["state"]["labels"])])
    except IncompatibleModels as error:
        return str(error)
    return None


def _only_kernel_models(*classes) -> str:
    return f"only AdvKernelSVM models are averaged ({', '.join(str(c) for c in classes)})"


def _support_vectors(meta: dict) -> bool:
    return meta["params"].get("budget_policy") in SUPPORT_VECTOR_POLICIES


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


def average(members: list[tuple[dict, dict, float]], n_learned: int,
            basis: SharedBasis | None = None) -> tuple[dict, dict]:
    """Average models given as `(meta, arrays, weight)`; the first one is the base.

    With a `basis` (support vectors only, with `names`), each member's arrays hold only
    `alpha`, its coefficients over the basis, and `average_alpha` if it has an average of its
    iterates (`over_basis`): the average is the weighted sum of the coefficients, O(B) per
    member, and the result is a model whose support vectors are the basis (inputs: the basis'
    names, then the members' others), with its exact norm.

    The result keeps the base's parameters, extra metadata and input order (other inputs are
    appended), and has `n_learned` samples. Models that predict with the average of their
    iterates (`averaging`) fold those averages with the same weights (their biases and counts
    too; a member holding none stands for its `f`): over a basis and for random features
    exactly, by the union projected onto the fold's vectors (the average of the models keeps
    no vectors of its own). Weights are non-negative; members of weight 0 only
    contribute their input names and labels. If every weight is 0, the base is returned as is
    (with `n_learned`; by the union, its average of the iterates projected onto its vectors, as
    in any fold). Raises `IncompatibleModels` if a member cannot be averaged with the base.
    The base's group clock (`AdvKernelSVM.group_steps`), if any, restarts at `n_learned` at its
    rate (unless `n_learned` is the base's own count).

    Support vectors: the budget maintenance of the average continues the base's counters
    (`n_merges`, `n_removals`, `total_degradation` of the store grow by the average's own).
    """
    base_meta, base_arrays, _ = members[0]
    for meta, _, weight in members[1:]:
        reason = incompatibility(base_meta, meta)
        if reason is not None:
            raise IncompatibleModels(reason)
    for _, _, weight in members:
        if not (weight >= 0 and math.isfinite(weight)):
            raise ValueError(f"weights must be finite and >= 0, got {weight!r}")
    meta = copy.deepcopy(base_meta)
    arrays = {name: np.array(a, copy=True) for name, a in base_arrays.items()}
    state = meta["state"]
    if "group_clock" in state and int(n_learned) != state["n_learned"]:
        # The base's group clock maps its own count to the group's from the count of its last
        # fold; the average's count is `n_learned`: the clock restarts there, at the same rate
        # (kept, a start past `n_learned` would make a model that cannot be loaded).
        state["group_clock"] = [int(n_learned), state["group_clock"][1]]
    state["n_learned"] = int(n_learned)

    target = _target_classes([list(m["state"]["labels"]) for m, _, _ in members])
    state["labels"] = target
    names = list(state["names"] if basis is None else basis.names)
    known = {repr(n) for n in names}
    if basis is not None:
        _check_basis(members, basis)
    for m, _, _ in members:
        for name in m["state"]["names"]:
            if repr(name) not in known:
                known.add(repr(name))
                names.append(name)
    max_features = meta["params"].get("max_features")
    if max_features is not None and len(names) > max_features:
        raise IncompatibleModels(f"the models have {len(names)} inputs together, more than "
                                 f"max_features ({max_features})")
    state["names"] = names

    active = [(m, a, w) for m, a, w in members if w > 0 and m["state"]["started"]]
    # Shares of the largest weight first: the sum of weights near float64's largest would
    # overflow to inf, and every share with it to 0.
    top = max((w for _, _, w in active), default=0.0)
    active = [(m, a, w / top) for m, a, w in active]
    total = sum(w for _, _, w in active)
    support_vectors = _support_vectors(base_meta)
    if total <= 0:
        if not state["started"]:
            state["names"] = list(base_meta["state"]["names"])  # nothing learned: no inputs
        sign = _sign(list(base_meta["state"]["labels"]), target)
        if basis is not None and state["started"]:
            state["bias"] = sign * float(state["bias"])
            _average_over_basis(meta, arrays, [(base_meta, base_arrays, 1.0)], [sign], basis)
        elif support_vectors and state["started"]:
            # The base alone (aligned), its vectors over the union of the inputs.
            state["bias"] = sign * float(state["bias"])
            _average_support_vectors(meta, arrays, [(base_meta, base_arrays, 1.0)], [sign],
                                     names)
        elif sign < 0:
            _negate(meta, arrays)
        model_state = state.get("model", {})
        if sign < 0 and "label_balance" in model_state:
            model_state["label_balance"] = -float(model_state["label_balance"])
        return meta, arrays

    shares = [w / total for _, _, w in active]
    signs = [_sign(list(m["state"]["labels"]), target) for m, _, _ in active]
    state["bias"] = sum(share * sign * float(m["state"]["bias"])
                        for (m, _, _), share, sign in zip(active, shares, signs))
    state["temperature"] = [
        sum(share * float(m["state"]["temperature"][i]) for (m, _, _), share in zip(active, shares))
        for i in range(2)
    ]
    state["started"] = True
    weights = [share * sign for share, sign in zip(shares, signs)]
    if basis is not None:
        _average_over_basis(meta, arrays, active, weights, basis)
    elif support_vectors:
        _average_support_vectors(meta, arrays, active, weights, names)
    else:
        _average_features(meta, arrays, active, weights)
    # The share of recent samples inside the margin (it damps the bias' steps): averaged as
    # the rest, not the first member's (the average would depend on the members' order).
    meta["state"]["model"]["active_share"] = min(1.0, sum(
        share * float(m["state"]["model"].get("active_share", 0.0))
        for (m, _, _), share in zip(active, shares)))
    # The labels' balance (what a damped bias step follows), in the fold's orientation.
    meta["state"]["model"]["label_balance"] = max(-1.0, min(1.0, sum(
        weight * float(m["state"]["model"].get("label_balance", 0.0))
        for (m, _, _), weight in zip(active, weights))))
    return meta, arrays


def _folded_model_state(first: dict, average: dict | None) -> dict:
    """The model state of a fold, from its first member's, with the fold's average of the
    iterates (`_average_scalars`), if any. What the first member's watches of its own average
    gathered is not the fold's: the evidence that the average lags starts again at 0 (its
    count of restarts, a counter, is kept), and the estimate of the part of the average made
    of vectors f gave up (the fold's average holds none) starts afresh."""
    model = {key: value for key, value in first.items()
             if key not in ("average", "given_up_estimate")}
    lag = first.get("average_lag")
    if isinstance(lag, dict):
        model["average_lag"] = {**lag, "total": 0.0, "ahead": 0.0}
    if average is not None:
        model["average"] = average
    return model


def _average_scalars(active: list, weights: list[float]) -> dict | None:
    """The scalars of the fold's average of the iterates (models with `averaging`): the
    members' averages are averaged as their `f` (a member that holds none, as a model folded
    since it last learned, stands for its `f`: the average it would start), and so are their
    biases and counts. None if no member holds an average."""
    held = [m["state"]["model"].get("average") for m, _, _ in active]
    if all(h is None for h in held):
        return None
    horizon = next(h["horizon"] for h in held if h is not None)
    count = sum(abs(w) * (0 if h is None else h["count"]) for h, w in zip(held, weights))
    bias = sum(w * float(m["state"]["bias"] if h is None else h["bias"])
               for (m, _, _), h, w in zip(active, held, weights))
    return {"horizon": horizon, "count": count, "bias": bias}


def _drop_average(arrays: dict) -> None:
    """Remove the base's average of its iterates from the fold's arrays (it is not the
    group's): the fold writes its own, if any."""
    for name in [name for name in arrays if name.startswith("average_")]:
        del arrays[name]


def _average_features(meta: dict, arrays: dict, active: list, weights: list[float]) -> None:
    """'compact': the weighted mean of the coefficients over the shared pool."""
    first_meta, first_arrays, _ = active[0]
    ids = first_arrays["ids"]
    coef = np.zeros(len(ids))
    for (m, a, _), weight in zip(active, weights):
        if not np.array_equal(a["ids"], ids):
            raise IncompatibleModels("the models hold different random features")
        coef += weight * np.asarray(a["coef"], dtype=np.float64)
    arrays["ids"], arrays["coef"] = np.array(ids, copy=True), coef
    _drop_average(arrays)
    average = _average_scalars(active, weights)
    if average is not None:  # (the members' averages are over the same features too)
        arrays["average_coefficients"] = sum(
            weight * np.asarray(a.get("average_coefficients", a["coef"]), dtype=np.float64)
            for (_, a, _), weight in zip(active, weights))
    store = dict(first_meta["state"]["model"]["store"])
    store["size"] = len(ids)
    store["norm"] = math.sqrt(len(ids)) * float(np.sqrt(coef @ coef))  # exact for 'compact'
    store["n_added"] = max(int(m["state"]["model"]["store"]["n_added"]) for m, _, _ in active)
    model = _folded_model_state(first_meta["state"]["model"], average)
    model["store"] = store
    meta["state"]["model"] = model


def _average_support_vectors(meta: dict, arrays: dict, active: list, weights: list[float],
                             names: list) -> None:
    """Support vectors: `sum_k weights_k f_k` over the inputs `names`, then maintenance."""
    position = {repr(n): j for j, n in enumerate(names)}
    stores = [_store(m, a, position) for m, a, _ in active]
    merged = SupportVectors.average(stores, weights)
    average = _average_scalars(active, weights)
    _drop_average(arrays)
    if average is not None:
        coefficients = _average_over_vectors(merged, active, weights, position)
        if coefficients is None:
            average = None
        else:
            arrays.update(saved_without_orphans(coefficients, merged.n_inputs, merged.dtype))
    scalars, merged_arrays = merged.state()
    first = active[0][0]["state"]["model"]
    before = first["store"]
    scalars["n_merges"] += before["n_merges"]
    scalars["n_removals"] += before["n_removals"]
    scalars["total_degradation"] += before["total_degradation"]
    if merged.n_merges + merged.n_removals == 0:
        scalars["degradation"] = before["degradation"]
    # The base's kernel exponents and flags: the average keeps its own, if any.
    arrays.pop("gram", None)
    arrays.pop("mixed", None)
    arrays.update(merged_arrays)
    model = _folded_model_state(first, average)
    model["store"] = scalars
    meta["state"]["model"] = model


def _average_over_vectors(merged: SupportVectors, active: list, weights: list[float],
                          position: dict) -> np.ndarray | None:
    """The fold's average of the iterates over the vectors of its `f` (`merged`): the
    members' averages, weighted as their `f`, projected onto those vectors (the closest
    function of their span in the kernel's space, `SharedBasis.closest`). None if they span
    nothing that can be solved for (no vectors, or vectors too close together): the average
    then starts again from the fold's `f`."""
    if not merged.size:
        return None
    try:
        basis = SharedBasis(merged.kernel, merged.gamma, merged.vectors)
    except ValueError:
        return None
    vectors, coefficients = [], []
    for (m, a, _), weight in zip(active, weights):
        if "average_coefficients" in a:
            V, c = saved_expansion(a)
        else:  # (no average: its `f`)
            V = a["vectors"]
            c = float(m["state"]["model"]["store"]["scale"]) * np.asarray(a["alpha"], np.float64)
        vectors.append(_widened(m, V, position))
        coefficients.append(weight * np.asarray(c, dtype=np.float64))
    # The members' averages share most of their rows: each row once, its coefficients summed.
    groups, rows = row_groups(np.concatenate(vectors))
    return basis.closest(rows, np.bincount(groups, weights=np.concatenate(coefficients),
                                           minlength=len(rows)))


def project(meta: dict, arrays: dict, basis: SharedBasis) -> tuple[np.ndarray, float]:
    """A support-vector model's coefficients over `basis` (the projection of its `f` in the
    kernel's space), and what the projection loses, `||f - f_a||_H^2`.

    The model's input columns are matched to the basis' `names`; inputs the basis lacks (0 in
    every basis vector) only add to the distances.
    """
    member, loss = over_basis(meta, {"vectors": arrays["vectors"], "alpha": arrays["alpha"]},
                              basis)
    return member["alpha"], loss


def over_basis(meta: dict, arrays: dict, basis: SharedBasis) -> tuple[dict, float]:
    """A support-vector model as a member of a fold over `basis` (`average(..., basis=)`):
    `alpha`, its `f` projected (`project`), and, if it predicts with the average of its
    iterates, `average_alpha`, that average projected the same way; and the loss of `f`'s
    projection."""
    store = _projected_store(meta, basis)
    if store is None:  # nothing learned yet: f = 0
        return {"alpha": np.zeros(basis.size)}, 0.0
    own = np.asarray(arrays["vectors"])
    alpha = np.asarray(arrays["alpha"], dtype=np.float64)
    # The average's vectors are f's, then the ones it keeps: one kernel matrix serves both.
    averaged = "average_coefficients" in arrays
    vectors, average = saved_expansion(arrays) if averaged else (own, None)
    if alpha.shape != (len(own),) or (averaged and average.shape != (len(vectors),)):
        raise ValueError("one coefficient per vector is needed")
    scale = float(store["scale"])
    f = np.zeros(len(vectors))
    f[: len(alpha)] = scale * alpha
    K = basis.cross_kernels(*_in_basis_columns(meta, np.asarray(vectors), basis))
    member = {}
    member["alpha"], loss = basis.fit(K @ f, scale * scale * float(store["squared_norm"]))
    if averaged:
        member["average_alpha"] = basis.fit(K @ average, 0.0)[0]
    return member, loss


def _projected_store(meta: dict, basis: SharedBasis) -> dict | None:
    """The store scalars of a model that can be projected onto `basis` (None: it learned
    nothing); `IncompatibleModels` or `ValueError` if it cannot be."""
    if not _support_vectors(meta):
        raise IncompatibleModels("only support vectors can be projected onto a basis")
    store = meta["state"]["model"].get("store")
    if store is None:
        return None
    if (store["kernel"], float(store["gamma"])) != (basis.kernel, basis.gamma):
        raise IncompatibleModels(f"the basis is for {basis.kernel} at gamma {basis.gamma!r}, "
                                 f"the model has {store['kernel']} at {store['gamma']!r}")
    if basis.names is None:
        raise ValueError("projecting a model needs a basis with the names of its columns")
    return store


def _in_basis_columns(meta: dict, vectors: np.ndarray, basis: SharedBasis
                      ) -> tuple[np.ndarray, np.ndarray]:
    """A model's vectors over the basis' columns, and what the model's inputs the basis lacks
    add to their distances (see `SharedBasis.cross_kernels`)."""
    own = meta["state"]["names"]
    if vectors.ndim != 2 or vectors.shape[1] != len(own):
        raise CheckpointError(f"{vectors.shape[1]} columns of support vectors, {len(own)} inputs")
    position = {repr(n): j for j, n in enumerate(basis.names)}
    columns = [position.get(repr(n), -1) for n in own]
    inside = [i for i, j in enumerate(columns) if j >= 0]
    mapped = np.zeros((len(vectors), basis.vectors.shape[1]), dtype=basis.vectors.dtype)
    mapped[:, [columns[i] for i in inside]] = vectors[:, inside]
    beyond = np.asarray(vectors[:, [i for i, j in enumerate(columns) if j < 0]], np.float64)
    outside = (beyond ** 2 if basis.kernel == "rbf" else np.abs(beyond)).sum(axis=1)
    return mapped, outside


def _check_basis(members: list, basis: SharedBasis) -> None:
    """`IncompatibleModels` unless every model can be averaged over `basis`."""
    base = members[0][0]
    if not _support_vectors(base):
        raise IncompatibleModels("only support vectors can be averaged over a basis")
    if basis.names is None:
        raise ValueError("averaging over a basis needs the names of its columns")
    budget, dtype = base["params"].get("budget"), base["params"].get("dtype")
    if budget is not None and basis.size > budget:
        raise IncompatibleModels(f"a basis of {basis.size} vectors exceeds the budget ({budget})")
    if basis.vectors.dtype != np.dtype(dtype):
        raise IncompatibleModels(f"the basis holds {basis.vectors.dtype}, the models {dtype}")
    for meta, arrays, _ in members:
        if not meta["state"]["started"]:
            continue
        store = meta["state"]["model"]["store"]
        if (store["kernel"], float(store["gamma"])) != (basis.kernel, basis.gamma):
            raise IncompatibleModels(f"the basis is for {basis.kernel} at gamma {basis.gamma!r}, "
                                     f"a model has {store['kernel']} at {store['gamma']!r}")
        try:
            check_over_basis(meta, arrays, basis.size)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise IncompatibleModels(f"a model's coefficients over the basis: {error}") from None
        if len(arrays["alpha"]) != basis.size:
            raise IncompatibleModels(f"expected {basis.size} coefficients over the basis, got "
                                     f"{len(arrays['alpha'])}")


def check_over_basis(meta: dict, arrays: dict, most: int | None) -> None:
    """`ValueError` unless `arrays` are a model's coefficients over a basis, as `over_basis`
    makes them: `alpha`, at most `most` finite float64 coefficients whose magnitudes add up to
    at most `MAX_SAVED_WEIGHT` (as a store's), and `average_alpha`, as many, exactly when the
    model (`meta`) holds an average of its iterates."""
    names = {"alpha", "average_alpha"} if "average" in meta["state"].get("model", {}) \
        else {"alpha"}
    if set(arrays) != names:
        raise ValueError(f"expected the arrays {sorted(names)}, got {sorted(arrays)}")
    size = arrays["alpha"].shape
    for name, a in sorted(arrays.items()):
        if a.ndim != 1 or a.dtype != np.float64:
            raise ValueError(f"{name} is not a row of float64 coefficients")
        if a.shape != size:
            raise ValueError(f"{name} has {len(a)} coefficients, alpha {size[0]}")
        if most is not None and len(a) > most:
            raise ValueError(f"{name} has {len(a)} coefficients, over {most}")
        # Finite but huge ones overflowed the group's average: the fold of every peer failed.
        with np.errstate(over="ignore"):
            weight = float(np.abs(a).sum())
        if not weight <= MAX_SAVED_WEIGHT:
            raise ValueError(f"the coefficients of {name} are not finite or too large: their "
                             f"magnitudes add up to {weight:.3g}, over {MAX_SAVED_WEIGHT:g}")


def _average_over_basis(meta: dict, arrays: dict, active: list, weights: list[float],
                        basis: SharedBasis) -> None:
    """Support vectors over a shared basis: `sum_k weights_k a_k`, exactly."""
    alpha = np.zeros(basis.size)
    for (_, a, _), weight in zip(active, weights):
        alpha += weight * np.asarray(a["alpha"], dtype=np.float64)
    first = active[0][0]["state"]["model"]
    store = dict(first["store"])
    # (The base's reprocess cursor, where the basis has that many vectors; else the first.)
    cursor = store.get("cursor", 0)
    store.update(size=basis.size, scale=1.0, squared_norm=basis.squared_norm(alpha),
                 stored_since_norm=0, cursor=cursor if cursor < basis.size else 0)
    vectors = np.zeros((basis.size, len(meta["state"]["names"])), dtype=basis.vectors.dtype)
    vectors[:, : basis.vectors.shape[1]] = basis.vectors  # the other inputs are 0 in each
    arrays.pop("gram", None)  # the base's kernel exponents are not the basis'
    arrays.pop("mixed", None)  # nor are its flags of vectors that came with both labels
    arrays["vectors"], arrays["alpha"] = vectors, alpha
    _drop_average(arrays)
    average = _average_scalars(active, weights)
    if average is not None:  # (a member without one: its `f`, `alpha`)
        coefficients = sum(weight * np.asarray(a.get("average_alpha", a["alpha"]), np.float64)
                           for (_, a, _), weight in zip(active, weights))
        arrays.update(saved_without_orphans(coefficients, vectors.shape[1], vectors.dtype))
    store["n_inputs"] = vectors.shape[1]
    model = _folded_model_state(first, average)
    model["store"] = store
    meta["state"]["model"] = model


def _store(meta: dict, arrays: dict, position: dict) -> SupportVectors:
    """A model's support vectors, with its input columns moved to where `position` puts them
    (inputs it never saw are 0, as River's sparse features are)."""
    scalars = dict(meta["state"]["model"]["store"])
    widened = _widened(meta, arrays["vectors"], position)
    scalars["n_inputs"] = len(position)
    store = SupportVectors(scalars["kernel"], scalars["gamma"], scalars["budget"],
                           scalars["policy"], scalars["dtype"])
    saved = {"vectors": widened, "alpha": arrays["alpha"]}
    if "mixed" in arrays:
        saved["mixed"] = arrays["mixed"]
    store.restore(scalars, saved, len(position))
    return store


def _widened(meta: dict, vectors: np.ndarray, position: dict) -> np.ndarray:
    """A model's vectors with its input columns moved to where `position` puts them."""
    own = meta["state"]["names"]
    if vectors.shape[1] != len(own):
        raise CheckpointError(f"{vectors.shape[1]} columns of support vectors, {len(own)} inputs")
    widened = np.zeros((vectors.shape[0], len(position)), dtype=vectors.dtype)
    widened[:, [position[repr(n)] for n in own]] = vectors
    return widened


def _negate(meta: dict, arrays: dict) -> None:
    state = meta["state"]
    state["bias"] = -float(state["bias"])
    if "coef" in arrays:
        arrays["coef"] = -np.asarray(arrays["coef"], dtype=np.float64)
    average = state.get("model", {}).get("average")
    if average is not None and "average_coefficients" in arrays:  # (random features)
        average["bias"] = -float(average["bias"])
        arrays["average_coefficients"] = -np.asarray(arrays["average_coefficients"],
                                                     dtype=np.float64)


def to_model(meta: dict, arrays: dict) -> AdvKernelSVM:
    """The model of a checkpoint's metadata and arrays (`CheckpointError` if invalid)."""
    if meta.get("class") != AdvKernelSVM.__name__:
        raise CheckpointError(f"expected an AdvKernelSVM, got {meta.get('class')!r}")
    return AdvKernelSVM.from_checkpoint(meta, arrays)
