"""Accuracy of each budget policy against the unbounded `grow` on the same MNIST stream, per budget.

    python benchmarks/budget_policies.py [--data PATH] [--quick] [--out FILE] [--seeds N]

MNIST 1 vs 7 (pixels / 255). For each seed the training set is shuffled into one stream, and
every policy learns that same stream in one pass of `learn_many(500)`: `compact`,
`compact_slot` and `truncate` at budgets B ∈ {256, 1024, 4096}, and `grow` (unbounded, the
paper's DSG: one row, with the number of features it ended with). Each is trained natural
(ε = 0) and adversarially (L-inf ε = 8/255, the paper's radius); everything else is the
default (`regularization` 1e-4, `step_size` 0.5) with γ = 1 / (d Var(X_train)) as in
`paper_tables.py`. Scores: clean accuracy on the whole test set, PGD-10 (L-inf 8/255, steps of
ε/4) on a fixed random subset of it, the training time, the features kept and the model's size.
Every accuracy is also reported as its difference to `grow` on the same stream and seed.

"""

from __future__ import annotations

import sys
import time

import numpy as np

import common
from river_advsvm import progress

EPSILON = common.EPSILON
BOUNDED = ("compact", "compact_slot", "truncate")


def run(data: dict, budgets, seeds: int, pgd_points: int,
        show_progress: bool = False) -> list[dict]:
    from river_advsvm import AdvKernelSVM

    X_train, y_train = data["X_train"], data["y_train"]
    X_test, y_test = data["X_test"], data["y_test"]
    n, d = X_train.shape
    gamma = 1.0 / (d * X_train.var())
    pgd_idx = np.random.default_rng(1).permutation(len(y_test))[:pgd_points]
    X_pgd, y_pgd = X_test[pgd_idx], y_test[pgd_idx]
    configs = [(p, b) for p in BOUNDED for b in budgets] + [("grow", None)]
    records = []
    bar = progress.bar(total=seeds * 2 * len(configs), desc="budget policies", unit="model",
                       progress=show_progress)
    for seed in range(seeds):
        order = np.random.default_rng(seed).permutation(n)
        Xs, ys = X_train[order], y_train[order]
        for epsilon in (0.0, EPSILON):
            for policy, budget in configs:
                model = AdvKernelSVM(epsilon=epsilon, norm="linf", gamma=gamma,
                                     budget=budget or 1024, budget_policy=policy, seed=seed)
                seconds = common.train(model, Xs, ys)
                record = {"kind": "run", "policy": policy, "budget": budget, "epsilon": epsilon,
                          "seed": seed, "d": d, "n_train": n, "n_test": len(y_test),
                          "pgd_points": len(y_pgd), "gamma": gamma,
                          "clean": float(common.right(model, X_test, y_test).mean()),
                          "pgd": float(common.pgd_right(model, X_pgd, y_pgd)[0].mean()),
                          "train_seconds": seconds, "features": model.n_features,
                          "model_mb": model._raw_memory_usage / 2**20}
                records.append(record)
                progress.write(
                    f"seed {seed} ε={epsilon * 255:.0f}/255 {policy:12s} B={budget or '-':>5} "
                    f"clean {record['clean']:.4f} PGD {record['pgd']:.4f} "
                    f"features {record['features']:6d} {seconds:6.2f} s")
                bar.update()
    bar.close()
    for r in records:
        grow = next(g for g in records if g["policy"] == "grow" and g["seed"] == r["seed"]
                    and g["epsilon"] == r["epsilon"])
        r["clean_vs_grow"] = r["clean"] - grow["clean"]
        r["pgd_vs_grow"] = r["pgd"] - grow["pgd"]
    return records + summarise(records, configs)


def summarise(records: list[dict], configs) -> list[dict]:
    out = []
    for epsilon in (0.0, EPSILON):
        for policy, budget in configs:
            runs = [r for r in records if r["policy"] == policy and r["budget"] == budget
                    and r["epsilon"] == epsilon]
            row = {"kind": "summary", "policy": policy, "budget": budget, "epsilon": epsilon,
                   "seeds": len(runs), "features": max(r["features"] for r in runs),
                   "pgd_points": runs[0]["pgd_points"], "n_test": runs[0]["n_test"]}
            for key in ("clean", "pgd", "clean_vs_grow", "pgd_vs_grow", "train_seconds",
                        "model_mb"):
                values = [r[key] for r in runs]
                row[key] = float(np.mean(values))
                row[f"{key}_std"] = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
            out.append(row)
    return out


def pick(summaries: list[dict]) -> dict:
    """The bounded policy with the best mean of clean and PGD accuracy over both trainings, at
    the default budget 1024 (or the largest one run)."""
    budgets = sorted({r["budget"] for r in summaries if r["budget"] is not None})
    budget = 1024 if 1024 in budgets else budgets[-1]
    scores = {}
    for policy in BOUNDED:
        rows = [r for r in summaries if r["policy"] == policy and r["budget"] == budget]
        scores[policy] = float(np.mean([(r["clean"] + r["pgd"]) / 2 for r in rows]))
    best = max(scores, key=scores.get)
    return {"kind": "pick", "policy": best, "budget": budget, "score": scores[best],
            **{f"score_{p}": s for p, s in scores.items()}}


def main(argv=None) -> int:
    p = common.parser(__doc__.split("\n\n")[0], data=True)
    p.add_argument("--seeds", type=int, default=None, help="default 3 (1 with --quick)")
    args = p.parse_args(argv)
    if args.quick:
        data, budgets, seeds, pgd_points = common.digits_pair(1, 7), (64,), 1, 40
    else:
        path = common.data_file(args.data, "mnist.npz")
        data, budgets, seeds, pgd_points = common.load_pair(path, 1, 7), (256, 1024, 4096), 3, 1000
    seeds = args.seeds or seeds
    start = time.perf_counter()
    with common.one_blas_thread():
        records = run(data, budgets, seeds, pgd_points, not args.no_progress)
    summaries = [r for r in records if r["kind"] == "summary"]
    choice = pick(summaries)
    records.append(choice)
    machine = common.machine()
    for r in records:
        r.update(machine, quick=args.quick, run_seconds=time.perf_counter() - start)
    rows = []
    for r in summaries:
        row = dict(r)
        row["eps"] = f"{r['epsilon'] * 255:.0f}/255"
        for key in ("clean", "pgd", "clean_vs_grow", "pgd_vs_grow"):
            row[key] = 100 * r[key]
        row["clean_pm"] = f"{100 * r['clean']:.2f}±{100 * r['clean_std']:.2f}"
        row["pgd_pm"] = f"{100 * r['pgd']:.2f}±{100 * r['pgd_std']:.2f}"
        rows.append(row)
    print()
    print(common.format_table(rows, [
        ("policy", "policy", ""), ("budget", "B", "d"), ("eps", "train ε", ""),
        ("clean_pm", "clean %", ""), ("clean_vs_grow", "vs grow", "+.2f"),
        ("pgd_pm", "PGD %", ""), ("pgd_vs_grow", "vs grow", "+.2f"),
        ("features", "features", "d"), ("model_mb", "MB", ".2f"),
        ("train_seconds", "train s", ".2f")]))
    print(f"\ndefault by mean of clean and PGD accuracy at B={choice['budget']}: "
          f"{choice['policy']} ({100 * choice['score']:.2f}%)")
    common.write_records(records, args.out, "budget_policies", args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
