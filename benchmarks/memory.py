"""Memory of AdvKernelSVM: float32 against float64, long drifting streams, hostile feature names.

    python benchmarks/memory.py [--quick] [--samples N] [--out FILE]

Three measurements, each policy in a fresh process so that its RSS is its own:

- `dtype`: the bytes a trained model holds (traced by `tracemalloc` from before it is built,
  with its data made beforehand; River's `_raw_memory_usage` beside it), float32 against
  float64, at d = 784, B = 1024, for random features and (when installed) support vectors.
- `stream`: every budget policy learns the same drifting stream (a rotating concept, so that
  steps stay active for ever) in batches of 500 drawn on the fly, the stream never held in
  memory. At ten checkpoints: the process RSS (from /proc, Linux) and the model's size as
  River counts it (`_raw_memory_usage`, numpy buffers included). 'grow' runs on a tenth of
  the stream: it is unbounded by design and the point is its slope.
- `hostile`: a stream in which three samples in four bring 20 fresh feature names (a user id
  as a key, say), half of them learned and half only predicted, against models with
  `max_features`.
  Learning a sample that would exceed `max_features` is refused (`InvalidInput`,
  `too_many_features`); unknown names at inference are never stored. The model's bytes must
  stay within `max_features x budget` stored numbers, with support vectors `(budget + 1)^2`
  more (the kernel exponents kept between them), plus the names themselves.

"""

from __future__ import annotations

import concurrent.futures
import gc
import importlib.util
import multiprocessing
import os
import sys
import time
import tracemalloc

import numpy as np

import common
from river_advsvm import AdvKernelSVM, inputs, progress, support_store

BATCH = common.BATCH
RF_POLICIES = ("compact", "compact_slot", "truncate")
SV_POLICIES = ("merge", "remove")
#: The dtype target: a float32 model is at most this fraction of the float64 one.
DTYPE_TARGET = 0.55
#: RSS growth from the first checkpoint to the last that still counts as flat.
FLAT = 0.05
#: Hostile names: the model's bytes over its bound (`hostile_bound`) may exceed 1 by the names
#: themselves, their index and the per-vector arrays (10% is ample).
HOSTILE_SLACK = 1.1


def has_support_vectors() -> bool:
    return importlib.util.find_spec("river_advsvm.support") is not None


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def in_fresh_process(function, *args):
    """`function(*args)` in a new interpreter: its RSS owes nothing to earlier runs."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(function, *args).result()


def import_lazily_loaded(policy: str) -> None:
    """Learn a few samples with a throwaway model over its budget, so that the modules a model
    imports on its first step, and the tables its first merge builds (one per process, shared
    by every model), are there before memory is traced: they are not the model's bytes."""
    rng = np.random.default_rng(0)
    X = rng.random((300, 4))
    model = AdvKernelSVM(gamma=1.0, budget=64, budget_policy=policy, seed=0, **common.LAST_ITERATE)
    model.learn_many(X, rng.random(300) < 0.5)  # (random labels: every step adds a vector)


def held_bytes(build) -> tuple[object, int]:
    """The model `build()` returns and the bytes still allocated for it once built."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        model = build()
        gc.collect()
        return model, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


# -- float32 against float64 ----------------------------------------------------------------------


def dtype_record(policy: str, dtype: str, d: int, budget: int, n: int) -> dict:
    with common.one_blas_thread():
        rng = np.random.default_rng(0)
        X = rng.random((n, d))
        # A linear concept with a fifth of the labels flipped: steps stay active, so that the
        # support vectors fill their budget, as they do on hard streams.
        y = (X @ rng.normal(size=d) > 0) ^ (rng.random(n) < 0.2)
        gamma = 1.0 / (d * float(X.var()))
        import_lazily_loaded(policy)

        def build():
            model = AdvKernelSVM(gamma=gamma, budget=budget, budget_policy=policy, dtype=dtype,
                                 seed=0, **common.LAST_ITERATE)
            for i in range(0, n, BATCH):
                model.learn_many(X[i:i + BATCH], y[i:i + BATCH])
            return model

        model, traced = held_bytes(build)
    return {"kind": "dtype", "policy": policy, "dtype": dtype, "d": d, "budget": budget,
            "samples": n, "model_mb": traced / 2**20,
            "river_memory_mb": model._raw_memory_usage / 2**20,
            "features": model.n_features, "support_vectors": model.n_support_vectors}


def dtype_comparison(d: int, budget: int, n: int) -> list:
    policies = ["compact"] + (["merge"] if has_support_vectors() else [])
    records = []
    for policy in policies:
        pair = {dtype: in_fresh_process(dtype_record, policy, dtype, d, budget, n)
                for dtype in ("float32", "float64")}
        for key in ("model_mb", "river_memory_mb"):
            pair["float32"][f"{key}_ratio_to_float64"] = (pair["float32"][key]
                                                          / pair["float64"][key])
        records += pair.values()
    return records


# -- long drifting streams ------------------------------------------------------------------------


def drifting_batches(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for start in range(0, n, BATCH):
        X = rng.random((min(BATCH, n - start), d))
        angle = 6 * np.pi * (start + np.arange(len(X))) / n
        y = np.sum((X[:, :2] - 0.5) * np.stack([np.cos(angle), np.sin(angle)], 1), 1) > 0
        yield X, y ^ (rng.random(len(X)) < 0.05)


def stream_records(policy: str, n: int, d: int, budget: int) -> list:
    """One policy on the drifting stream, in this process: RSS and traced model bytes."""
    with common.one_blas_thread():
        model = AdvKernelSVM(epsilon=0.05, gamma=1.0 / (d / 12), budget=budget,
                             budget_policy=policy, seed=0, **common.LAST_ITERATE)
        checkpoints = set(np.linspace(n // 10, n, 10).astype(int) // BATCH * BATCH)
        records, seen, start = [], 0, time.perf_counter()
        for X, y in drifting_batches(n, d):
            model.learn_many(X, y)
            seen += len(X)
            if seen in checkpoints:
                del X, y
                gc.collect()
                records.append({
                    "kind": "stream", "policy": policy, "samples": seen, "d": d,
                    "budget": budget, "rss_mb": rss_bytes() / 2**20,
                    "model_mb": model._raw_memory_usage / 2**20,
                    "features": model.n_features, "support_vectors": model.n_support_vectors,
                    "seconds": time.perf_counter() - start})
    first = records[0]
    for r in records:
        r["rss_growth_after_first"] = r["rss_mb"] / first["rss_mb"] - 1
        r["model_growth_after_first"] = r["model_mb"] / first["model_mb"] - 1
    return records


# -- hostile feature names ------------------------------------------------------------------------


def name_cache_bytes() -> int:
    """The bytes of `river_advsvm.inputs`' cache of name hashes: its table, names and hashes
    (names the model keeps too are counted here as well: an upper bound)."""
    cache = inputs._HASHES
    return sys.getsizeof(cache) + sum(sys.getsizeof(k) + sys.getsizeof(v)
                                      for k, v in cache.items())


def hostile_bound(policy: str, max_features: int, budget: int) -> float:
    """The model's bound in MB: max_features x budget numbers of the stored dtype (float32),
    the weights or the vectors, and with support vectors the kernel exponents kept between
    them ((budget + 1)^2 more, where the store keeps them); the names, their index and the
    model's small arrays come on top of it."""
    numbers = max_features * budget
    if policy in SV_POLICIES and support_store.keeps_gram(budget, max_features):
        numbers += (budget + 1) ** 2
    return numbers * 4 / 2**20


def hostile_records(policy: str, max_features: int, n: int, budget: int, fresh: int) -> list:
    """Samples of 16 steady features, three in four with `fresh` new names (nonzero values);
    even samples are learned, odd ones predicted. Learning is refused once it would exceed
    `max_features`; every fourth sample has known names only and is still learned."""
    with common.one_blas_thread():
        rng = np.random.default_rng(0)
        model = AdvKernelSVM(gamma=1.0, budget=budget, budget_policy=policy,
                             max_features=max_features, seed=0, **common.LAST_ITERATE)
        steady = [f"f{j}" for j in range(16)]
        checkpoints = set(np.linspace(n // 10, n, 10).astype(int))
        counts = {"learned": 0, "refused": 0, "predicted": 0}
        codes: dict = {}
        records, start = [], time.perf_counter()
        import_lazily_loaded(policy)
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for i in range(1, n + 1):
            x = dict(zip(steady, rng.random(16).tolist()))
            if i % 4:  # three samples in four bring fresh names
                x.update(zip((f"user-{i}-{k}" for k in range(fresh)),
                             rng.random(fresh).tolist()))
            label = bool(x["f0"] + x["f1"] > 1)
            if i % 2:
                model.predict_one(x)
                counts["predicted"] += 1
            else:
                try:
                    model.learn_one(x, label)
                    counts["learned"] += 1
                except inputs.InvalidInput as error:
                    counts["refused"] += 1
                    codes[error.code] = codes.get(error.code, 0) + 1
            if i in checkpoints:
                del x
                # The hashes of names seen lately are the process's, not the model's (a cache
                # of at most 65,536 names, emptied when full): counted apart, then emptied
                # so that `model_mb` is what the model holds.
                cache_mb = name_cache_bytes() / 2**20
                inputs._forget_hashes()
                gc.collect()
                records.append({
                    "kind": "hostile", "policy": policy, "max_features": max_features,
                    "budget": budget, "fresh_names_per_sample": fresh, "samples": i,
                    **counts, "refused_codes": ",".join(sorted(codes)),
                    "inputs": model.n_inputs, "rss_mb": rss_bytes() / 2**20,
                    "model_mb": (tracemalloc.get_traced_memory()[0] - base) / 2**20,
                    "name_cache_mb": cache_mb,
                    "seconds": time.perf_counter() - start})
        tracemalloc.stop()
    bound = hostile_bound(policy, max_features, budget)
    for r in records:
        r["bound_mb"] = bound
        r["model_over_bound"] = r["model_mb"] / bound
    return records


# -- output ---------------------------------------------------------------------------------------


def targets(records: list) -> list:
    out = []
    for r in records:
        if r["kind"] == "dtype" and r["dtype"] == "float32":
            out.append({"kind": "target", "target": f"float32 model <= {DTYPE_TARGET}x float64, "
                                                    f"{r['policy']}, d={r['d']}, B={r['budget']}",
                        "value": r["model_mb_ratio_to_float64"], "threshold": DTYPE_TARGET,
                        "met": r["model_mb_ratio_to_float64"] <= DTYPE_TARGET})
    for policy in dict.fromkeys(r["policy"] for r in records if r["kind"] == "stream"):
        if policy == "grow":
            continue
        last = [r for r in records if r["kind"] == "stream" and r["policy"] == policy][-1]
        out.append({"kind": "target", "target": f"RSS flat over {last['samples']:,} samples "
                                                f"(growth after the first tenth <= {FLAT:.0%}), "
                                                f"{policy}",
                    "value": last["rss_growth_after_first"], "threshold": FLAT,
                    "met": last["rss_growth_after_first"] <= FLAT})
    for key in dict.fromkeys((r["policy"], r["max_features"]) for r in records
                             if r["kind"] == "hostile"):
        rows = [r for r in records if r["kind"] == "hostile" and (r["policy"],
                                                                    r["max_features"]) == key]
        worst = max(r["model_over_bound"] for r in rows)
        out.append({"kind": "target",
                    "target": f"hostile names: model <= {HOSTILE_SLACK} x its bound, {key[0]}, "
                              f"max_features={key[1]:,}",
                    "value": worst, "threshold": HOSTILE_SLACK,
                    "met": worst <= HOSTILE_SLACK and max(r["inputs"] for r in rows) <= key[1]})
    return out


def markdown(records: list, quick: bool) -> str:
    machine = common.machine()
    lines = ["# Memory (`benchmarks/memory.py`)", "",
             f"{common.machine_line(machine)}; each run in a fresh process."
             + (" Quick smoke run." if quick else ""), "",
             "**float32 against float64** (bytes the trained model holds, traced by "
             "tracemalloc; River's `_raw_memory_usage` beside it)", "",
             common.markdown_table([r for r in records if r["kind"] == "dtype"], [
                 ("policy", "policy", ""), ("dtype", "dtype", ""), ("d", "d", "d"),
                 ("budget", "B", "d"), ("model_mb", "model MB", ".2f"),
                 ("model_mb_ratio_to_float64", "ratio", ".3f"),
                 ("river_memory_mb", "River's count, MB", ".2f"),
                 ("river_memory_mb_ratio_to_float64", "ratio", ".3f"),
                 ("features", "features", "d"), ("support_vectors", "SVs", "d")])]
    stream = [r for r in records if r["kind"] == "stream"]
    if stream:
        rows = []
        for policy in dict.fromkeys(r["policy"] for r in stream):
            mine = [r for r in stream if r["policy"] == policy]
            first, last = mine[0], mine[-1]
            rows.append({"policy": policy, "samples": last["samples"],
                         "size": f"{max(first['features'], first['support_vectors']):,} -> "
                                 f"{max(last['features'], last['support_vectors']):,}",
                         "rss": f"{first['rss_mb']:.1f} -> {last['rss_mb']:.1f}",
                         "growth": last["rss_growth_after_first"],
                         "model": f"{first['model_mb']:.2f} -> {last['model_mb']:.2f}",
                         "seconds": last["seconds"]})
        lines += ["", f"**A drifting stream** (d = {stream[0]['d']}, B = {stream[0]['budget']}, "
                      "epsilon = 0.05, batches of 500; from the first tenth to the end)", "",
                  common.markdown_table(rows, [
                      ("policy", "policy", ""), ("samples", "samples", ",d"),
                      ("size", "features / SVs", ""), ("rss", "RSS MB", ""),
                      ("growth", "RSS growth", "+.2%"), ("model", "model MB", ""),
                      ("seconds", "seconds", ".0f")])]
    hostile = [r for r in records if r["kind"] == "hostile"]
    if hostile:
        finals = []
        for key in dict.fromkeys((r["policy"], r["max_features"]) for r in hostile):
            finals.append([r for r in hostile if (r["policy"], r["max_features"]) == key][-1])
        lines += ["", f"**Hostile feature names** ({hostile[0]['fresh_names_per_sample']} fresh "
                      "names in three samples of four; even samples learned, odd ones "
                      "predicted; at the end of the stream)", "",
                  common.markdown_table(finals, [
                      ("policy", "policy", ""), ("max_features", "max_features", ",d"),
                      ("samples", "samples", ",d"), ("learned", "learned", ",d"),
                      ("refused", "refused", ",d"), ("refused_codes", "code", ""),
                      ("inputs", "inputs", ",d"), ("model_mb", "model MB", ".2f"),
                      ("bound_mb", "bound MB", ".2f"),
                      ("name_cache_mb", "name cache MB", ".2f"), ("rss_mb", "RSS MB", ".1f")]),
                  "", "The name cache is the process's (the hashes of at most 65,536 names seen "
                      "lately, emptied when full), not the model's: counted apart."]
    lines += common.targets_markdown(records, [("target", "target", ""),
                                               ("value", "measured", ".3f"), ("met", "", "")])
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    if args.quick:  # a small budget, so that the support vectors fill it early
        n, budget, hostile_n, dtype_at, dtype_n = 3_000, 128, 1_000, (64, 256), 500
        hostile_limits = [(200, 64)]
    else:
        n, budget, hostile_n, dtype_at, dtype_n = args.samples, 1024, 100_000, (784, 1024), 4_000
        hostile_limits = [(1_000, 1024), (10_000, 1024)]
    d = 16
    policies = list(RF_POLICIES) + (list(SV_POLICIES) if has_support_vectors() else [])
    records = dtype_comparison(*dtype_at, dtype_n)
    print(common.format_table(records, [
        ("policy", "policy", ""), ("dtype", "dtype", ""), ("model_mb", "model MB", ".2f"),
        ("model_mb_ratio_to_float64", "ratio", ".3f"), ("river_memory_mb", "River MB", ".2f")]),
        flush=True)
    for policy in progress.bar(policies, desc="memory", unit="policy",
                               progress=not args.no_progress):
        rows = in_fresh_process(stream_records, policy, n, d, budget)
        first, last = rows[0], rows[-1]
        progress.write(f"{policy:13s} {last['samples']:>9,d} samples  RSS "
                       f"{first['rss_mb']:7.1f} -> "
                       f"{last['rss_mb']:7.1f} MB ({last['rss_growth_after_first']:+.2%})  model "
                       f"{first['model_mb']:6.2f} -> {last['model_mb']:6.2f} MB  "
                       f"{last['seconds']:.0f} s")
        records += rows
    records += in_fresh_process(stream_records, "grow", max(n // 10, 10 * BATCH), d, budget)
    for policy in ["compact"] + (["merge"] if has_support_vectors() else []):
        for max_features, hostile_budget in hostile_limits:
            rows = in_fresh_process(hostile_records, policy, max_features, hostile_n,
                                    hostile_budget, 20)
            last = rows[-1]
            progress.write(f"hostile {policy:8s} max_features {max_features:>6,d}: learned "
                           f"{last['learned']:,}, refused {last['refused']:,}, inputs "
                           f"{last['inputs']:,}, model {last['model_mb']:.2f} MB (bound "
                           f"{last['bound_mb']:.2f})")
            records += rows
    goals = targets(records)
    print(common.format_table(goals, common.TARGET_COLUMNS))
    records += goals
    common.save_run(records, args.out, "memory", args.quick,
                    lambda records, _: markdown(records, args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
