"""Accuracy and cost of each budget policy against the unbounded model of its representation.

    python benchmarks/budget_policies.py [--data PATH] [--quick] [--out FILE] [--seeds N]
                                         [--pairs NAME ...] [--dtypes DTYPE ...]

MNIST 1 vs 7 and 8 vs 9 (pixels / 255). For each seed the training set is shuffled into one
stream, and every policy learns that same stream in one pass of `learn_many(500)`:

- support vectors (exact kernel): `merge` (BSGD: the smallest-weight vector merged into its
  best same-sign partner) and `remove` (the smallest weight dropped) at budgets
  B ∈ {128, 256, 1024}, against the unbounded kernel SGD (`budget=None`, every active step kept:
  the model the budget approximates);
- random features (the paper's doubly stochastic gradients): `compact`, `compact_slot` and
  `truncate` at B ∈ {128, 256, 1024, 4096}, against `grow` (unbounded, one feature per step).

Each is trained natural (ε = 0) and adversarially (L-inf ε = 8/255, the paper's radius), with
float32 and float64 features or vectors (`--dtypes`); everything else is the default
(`regularization` 1e-4, `step_size` 0.5) with γ = 1 / (d Var(X_train)) given as a number, as in
`paper_tables.py`. Scores: clean accuracy on the whole test set, PGD-10 (steps of ε/4, in the
pixel box) at L-inf 8/255 and 0.1 on a fixed random subset of it, the training time, the
prediction cost per sample (`decision_many` over the test set; the models of one seed, dtype
and training radius take turns, 5 rounds, each keeps its best), the features or
vectors kept, the model's size, and for support vectors the budget's maintenance: merges,
removals and the weight degradation ||f_before - f_after||² per event. Every accuracy is also
reported as its difference to the unbounded model of its representation on the same stream,
seed, training radius and dtype (`*_vs_unbounded`).

`pick` says which bounded policy has the best mean of clean and PGD (8/255) accuracy over both
trainings at B = 1024 (float32), with its prediction cost.

"""

from __future__ import annotations

import sys
import time

import numpy as np

import common
from river_advsvm import progress

EPSILON = common.EPSILON
#: policy -> representation. The unbounded model of each representation is its reference.
POLICIES = {"merge": "support vectors", "remove": "support vectors",
            "compact": "random features", "compact_slot": "random features",
            "truncate": "random features"}
UNBOUNDED = {"support vectors": "unbounded", "random features": "grow"}
#: name: (file, first class, second class)
PAIRS = {"mnist-1v7": ("mnist.npz", 1, 7), "mnist-8v9": ("mnist.npz", 8, 9)}
SV_BUDGETS = (128, 256, 1024)
RF_BUDGETS = (128, 256, 1024, 4096)
PICK_BUDGET = 1024


def configs(sv_budgets, rf_budgets) -> list[tuple[str, int | None]]:
    """(policy, budget) pairs; the unbounded models have budget None."""
    out = [(p, b) for p in ("merge", "remove") for b in sv_budgets] + [("unbounded", None)]
    return out + [(p, b) for p in ("compact", "compact_slot", "truncate") for b in rf_budgets] \
        + [("grow", None)]


def representation(policy: str) -> str:
    return "support vectors" if policy == "unbounded" else POLICIES.get(policy, "random features")


def make_model(policy, budget, epsilon, gamma, dtype, seed):
    from river_advsvm import AdvKernelSVM

    if policy == "unbounded":  # kernel SGD: every support vector kept
        policy = "merge"
    elif policy == "grow":  # unbounded already; the budget is not used
        budget = 1024
    return AdvKernelSVM(epsilon=epsilon, norm="linf", gamma=gamma, budget=budget,
                        budget_policy=policy, dtype=dtype, seed=seed, **common.LAST_ITERATE)


def run(pair: str, data: dict, runs: list, dtypes, seeds: int, pgd_points: int,
        show_progress: bool = False) -> list[dict]:
    X_train, y_train = data["X_train"], data["y_train"]
    X_test, y_test = data["X_test"], data["y_test"]
    n, d = X_train.shape
    gamma = 1.0 / (d * X_train.var())
    pgd_idx = np.random.default_rng(1).permutation(len(y_test))[:pgd_points]
    X_pgd, y_pgd = X_test[pgd_idx], y_test[pgd_idx]
    records = []
    bar = progress.bar(total=seeds * len(dtypes) * 2 * len(runs), desc=pair, unit="model",
                       progress=show_progress)
    for seed in range(seeds):
        order = np.random.default_rng(seed).permutation(n)
        Xs, ys = X_train[order], y_train[order]
        for dtype in dtypes:
            for epsilon in (0.0, EPSILON):
                models, group = {}, []
                for policy, budget in runs:
                    model = make_model(policy, budget, epsilon, gamma, dtype, seed)
                    seconds = common.train(model, Xs, ys)
                    record = {"kind": "run", "pair": pair, "policy": policy,
                              "representation": representation(policy), "budget": budget,
                              "epsilon": epsilon, "dtype": dtype, "seed": seed, "d": d,
                              "n_train": n, "n_test": len(y_test), "pgd_points": len(y_pgd),
                              "gamma": gamma,
                              "clean": float(common.right(model, X_test, y_test).mean()),
                              "pgd": float(common.pgd_right(model, X_pgd, y_pgd)[0].mean()),
                              "pgd_01": float(common.pgd_right(model, X_pgd, y_pgd, 0.1)[0].mean()),
                              "train_seconds": seconds,
                              "model_mb": model._raw_memory_usage / 2**20,
                              **common.model_size(model)}
                    models[(policy, budget)] = model
                    group.append(record)
                    bar.update()
                # The prediction costs, the models taking turns on the same test set.
                costs = common.predict_seconds(models, X_test)
                for record in group:
                    record["predict_us"] = 1e6 * costs[(record["policy"], record["budget"])]
                    kept = record["support_vectors"] or record["features"]
                    progress.write(
                        f"{pair} seed {seed} {dtype} ε={epsilon * 255:.0f}/255 "
                        f"{record['policy']:12s} B={record['budget'] or '-':>5} clean "
                        f"{record['clean']:.4f} PGD {record['pgd']:.4f} PGD .1 "
                        f"{record['pgd_01']:.4f} kept {kept:6d} "
                        f"{record['train_seconds']:6.2f} s {record['predict_us']:6.1f} µs")
                records += group
    bar.close()
    for r in records:
        reference = next(
            u for u in records if u["policy"] == UNBOUNDED[r["representation"]]
            and (u["seed"], u["epsilon"], u["dtype"]) == (r["seed"], r["epsilon"], r["dtype"]))
        for key in ("clean", "pgd", "pgd_01"):
            r[f"{key}_vs_unbounded"] = r[key] - reference[key]
    return records


SUMMARY_KEYS = ("clean", "pgd", "pgd_01", "clean_vs_unbounded", "pgd_vs_unbounded",
                "pgd_01_vs_unbounded", "train_seconds", "predict_us", "model_mb",
                "support_vectors", "features", "merges", "removals", "degradation_per_merge")


def summarise(records: list[dict]) -> list[dict]:
    out = []
    groups = dict.fromkeys((r["pair"], r["dtype"], r["epsilon"], r["policy"], r["budget"])
                           for r in records if r["kind"] == "run")
    for pair, dtype, epsilon, policy, budget in groups:
        runs = [r for r in records if r["kind"] == "run" and r["pair"] == pair
                and r["dtype"] == dtype and r["epsilon"] == epsilon and r["policy"] == policy
                and r["budget"] == budget]
        row = {"kind": "summary", "pair": pair, "policy": policy,
               "representation": runs[0]["representation"], "budget": budget,
               "epsilon": epsilon, "dtype": dtype, "seeds": len(runs),
               "pgd_points": runs[0]["pgd_points"], "n_test": runs[0]["n_test"]}
        for key in SUMMARY_KEYS:
            if key in runs[0]:
                values = [r[key] for r in runs]
                row[key] = float(np.mean(values))
                row[f"{key}_std"] = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
        # The maintenance per event, over all events of all seeds.
        events = sum(r.get("merges", 0) + r.get("removals", 0) for r in runs)
        if "degradation_total" in runs[0]:
            row["degradation_per_event"] = (
                sum(r["degradation_total"] for r in runs) / events if events else 0.0)
            row["events"] = events / len(runs)
        out.append(row)
    return out


def dtype_gaps(records: list[dict]) -> list[dict]:
    """float32 - float64 per configuration, paired by seed, against the seed noise (the larger
    standard deviation over seeds of the two dtypes)."""
    out = []
    runs = [r for r in records if r["kind"] == "run"]
    keys = dict.fromkeys((r["pair"], r["epsilon"], r["policy"], r["budget"]) for r in runs)
    for pair, epsilon, policy, budget in keys:
        by = {(r["dtype"], r["seed"]): r for r in runs if r["pair"] == pair
              and r["epsilon"] == epsilon and r["policy"] == policy and r["budget"] == budget}
        seeds = sorted(seed for dtype, seed in by if dtype == "float64")
        if not seeds or not all(("float32", seed) in by for seed in seeds):
            continue
        for key in ("clean", "pgd", "pgd_01"):
            f32 = [by[("float32", s)][key] for s in seeds]
            f64 = [by[("float64", s)][key] for s in seeds]
            gaps = [a - b for a, b in zip(f32, f64)]
            noise = max(float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for v in (f32, f64))
            gap = float(np.mean(gaps))
            out.append({"kind": "dtype_gap", "pair": pair, "policy": policy, "budget": budget,
                        "epsilon": epsilon, "metric": key, "seeds": len(seeds),
                        "float32": float(np.mean(f32)), "float64": float(np.mean(f64)),
                        "gap": gap, "gap_min": min(gaps), "gap_max": max(gaps),
                        "seed_std": noise, "within_noise": abs(gap) <= noise})
    return out


def pick(summaries: list[dict]) -> dict:
    """The bounded policy with the best mean of clean and PGD accuracy over both trainings and
    every pair, at B = PICK_BUDGET (or the largest one run), float32."""
    rows = [r for r in summaries if r["budget"] is not None and r["dtype"] == "float32"]
    budgets = sorted({r["budget"] for r in rows})
    budget = PICK_BUDGET if PICK_BUDGET in budgets else budgets[-1]
    scores, costs = {}, {}
    for policy in POLICIES:
        mine = [r for r in rows if r["policy"] == policy and r["budget"] == budget]
        if mine:
            scores[policy] = float(np.mean([(r["clean"] + r["pgd"]) / 2 for r in mine]))
            costs[policy] = float(np.mean([r["predict_us"] for r in mine]))
    best = max(scores, key=scores.get)
    return {"kind": "pick", "policy": best, "budget": budget, "score": scores[best],
            "predict_us": costs[best], **{f"score_{p}": s for p, s in scores.items()},
            **{f"predict_us_{p}": c for p, c in costs.items()}}


def shown(r: dict) -> dict:
    """A summary row as the tables show it: points (%), mean ± std, the budget or ∞."""
    return {**r, "B": str(r["budget"] or "∞"), "eps": f"{r['epsilon'] * 255:.0f}/255",
            "kept": r["support_vectors"] or r["features"],
            "clean_pm": f"{100 * r['clean']:.2f} ± {100 * r['clean_std']:.2f}",
            "pgd_pm": f"{100 * r['pgd']:.2f} ± {100 * r['pgd_std']:.2f}",
            **{k: 100 * r[k] for k in ("clean_vs_unbounded", "pgd_vs_unbounded", "pgd_01")}}


def table(summaries: list[dict]) -> str:
    return common.format_table([shown(r) for r in summaries], [
        ("pair", "pair", ""), ("dtype", "dtype", ""), ("policy", "policy", ""),
        ("B", "B", ""), ("eps", "train ε", ""), ("clean_pm", "clean %", ""),
        ("clean_vs_unbounded", "vs unb.", "+.2f"), ("pgd_pm", "PGD %", ""),
        ("pgd_vs_unbounded", "vs unb.", "+.2f"), ("pgd_01", "PGD .1 %", ".1f"),
        ("kept", "kept", ".0f"), ("degradation_per_event", "degr./event", ".2e"),
        ("model_mb", "MB", ".2f"), ("train_seconds", "train s", ".2f"),
        ("predict_us", "µs/pred", ".1f")])


def markdown(records: list[dict]) -> str:
    """The summary and the dtype comparison as Markdown, for the docs."""
    first = records[0]
    summaries = [r for r in records if r["kind"] == "summary"]
    seeds = max(r["seeds"] for r in summaries)

    out = [
        "# Budget policies",
        "",
        f"Measured on {common.machine_line(first)}; the run took "
        f"{first['run_seconds'] / 60:.0f} min (`{first['command']}`). One pass "
        f"of `learn_many(500)`, λ = 1e-4, η = 0.5, γ = 1/(d·Var X), mean ± std over {seeds} "
        f"seeds; clean accuracy on the whole test set, PGD-10 on {first['pgd_points']} test "
        "points; `vs unb.`: the gap to the unbounded model of the same representation (kernel "
        "SGD for support vectors, `grow` for random features) on the same stream, in points. "
        "Degradation: the mean ||f_before − f_after||² per merge or removal.",
        "",
    ]
    columns = [("representation", "representation", ""), ("policy", "policy", ""),
               ("B", "B", ""), ("clean_pm", "clean", ""),
               ("clean_vs_unbounded", "vs unb.", "+.2f"),
               ("pgd_pm", "PGD 8/255", ""), ("pgd_vs_unbounded", "vs unb.", "+.2f"),
               ("pgd_01", "PGD 0.1", ".1f"), ("kept", "kept", ".0f"),
               ("degradation_per_event", "degradation / event", ".2e"),
               ("predict_us", "µs / prediction", ".1f"), ("train_seconds", "train s", ".2f")]
    for pair in dict.fromkeys(r["pair"] for r in summaries):
        for epsilon in (0.0, EPSILON):
            rows = [shown(r) for r in summaries
                    if r["pair"] == pair and r["epsilon"] == epsilon and r["dtype"] == "float32"]
            out += [f"#### {pair}, trained {'naturally' if epsilon == 0 else 'at L∞ 8/255'} "
                    "(float32)", "", common.markdown_table(rows, columns), ""]
    gaps = [r for r in records if r["kind"] == "dtype_gap"]
    if gaps:
        within = sum(r["within_noise"] for r in gaps)
        largest = max(gaps, key=lambda r: abs(r["gap"]))
        beyond = [{**r, "B": str(r["budget"] or "∞"), "eps": f"{255 * r['epsilon']:.0f}/255",
                   "gap_seeds": f"{100 * r['gap']:+.2f} "
                                f"({100 * r['gap_min']:+.2f}…{100 * r['gap_max']:+.2f})",
                   **{k: 100 * r[k] for k in ("float32", "float64", "seed_std")}}
                  for r in gaps if not r["within_noise"]]
        out += ["#### float32 against float64", "",
                f"Paired by seed, the same stream and features: {within} of {len(gaps)} gaps "
                "(float32 − float64, every configuration, clean, PGD 8/255 and PGD 0.1) are "
                "within the seed noise σ (the larger standard deviation over seeds of the two "
                f"dtypes); the largest gap is {100 * largest['gap']:+.2f} points "
                f"({largest['pair']} {largest['policy']} B={largest['budget'] or '∞'} "
                f"{largest['metric']}, ε = {255 * largest['epsilon']:.0f}/255, σ "
                f"{100 * largest['seed_std']:.2f}). "
                + ("Beyond σ:" if beyond else "None is beyond σ."), ""]
        if beyond:
            out += [common.markdown_table(beyond, [
                    ("pair", "pair", ""), ("policy", "policy", ""), ("B", "B", ""),
                    ("eps", "train ε", ""), ("metric", "metric", ""),
                    ("float32", "float32", ".2f"), ("float64", "float64", ".2f"),
                    ("gap_seeds", "gap (seeds)", ""), ("seed_std", "σ", ".2f")]), ""]
    choice = next(r for r in records if r["kind"] == "pick")
    out += [f"Best bounded policy at B = {choice['budget']} by the mean of clean and PGD "
            f"accuracy over both trainings: **{choice['policy']}** "
            f"({100 * choice['score']:.2f}%, {choice['predict_us']:.1f} µs per prediction).", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    p = common.parser(__doc__.split("\n\n")[0], data=True)
    p.add_argument("--seeds", type=int, default=None, help="default 3 (1 with --quick)")
    p.add_argument("--pairs", nargs="+", choices=list(PAIRS), default=list(PAIRS))
    p.add_argument("--dtypes", nargs="+", choices=("float32", "float64"),
                   default=["float32", "float64"])
    args = p.parse_args(argv)
    if args.quick:
        jobs = [("digits-1v7", common.digits_pair(1, 7))]
        runs, seeds, pgd_points = configs((16, 64), (64,)), 2, 40
    else:
        jobs = [(pair, common.load_pair(common.data_file(args.data, PAIRS[pair][0]),
                                        *PAIRS[pair][1:])) for pair in args.pairs]
        runs, seeds, pgd_points = configs(SV_BUDGETS, RF_BUDGETS), 3, 1000
    seeds = args.seeds or seeds
    start = time.perf_counter()
    records = []
    with common.one_blas_thread():
        for pair, data in jobs:
            records += run(pair, data, runs, args.dtypes, seeds, pgd_points,
                           not args.no_progress)
    summaries = summarise(records)
    records += summaries + dtype_gaps(records)
    records.append(pick(summaries))
    # How the run was asked for, without where the data lives.
    command = " ".join(["python benchmarks/budget_policies.py"]
                       + (["--quick"] if args.quick else ["--pairs", *args.pairs])
                       + ["--dtypes", *args.dtypes, "--seeds", str(seeds)])
    machine = common.machine()
    for r in records:
        r.update(machine, quick=args.quick, run_seconds=time.perf_counter() - start,
                 command=command)
    print()
    print(table(summaries))
    choice = records[-1]
    print(f"\nbest bounded policy at B={choice['budget']} by mean of clean and PGD accuracy: "
          f"{choice['policy']} ({100 * choice['score']:.2f}%)")
    common.write_records(records, args.out, "budget_policies", args.quick)
    common.write_markdown(markdown(records), args.out, "budget_policies", args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
