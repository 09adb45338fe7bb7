"""The tables, the Markdown summary and the Fig. 2 plot of `paper_tables.py`'s records."""

from __future__ import annotations

import math
import pathlib

import common

PAPER_COLUMNS = ["clean", "fgsm", "pgd", "cw", "zoo"]
STYLES = {"Natural": ("tab:blue", "-"), "Natural (PGD-selected)": ("tab:cyan", ":"),
          "adv-linear-SVM": ("tab:gray", "-"), "adv-SVM(D)": ("tab:orange", "-"),
          "adv-SVM(C)": ("tab:red", "-"), "SV Natural": ("tab:green", "-"),
          "SV adv L-inf 8/255": ("tab:purple", "-"), "SV adv L-inf 0.1": ("tab:purple", "--"),
          "SV adv L2 1.0": ("tab:purple", ":")}


def summaries(records: list[dict], dtype: str = "float32") -> list[dict]:
    return [r for r in records if r["kind"] == "summary" and r.get("dtype", dtype) == dtype]


def pm(row: dict, key: str, digits: int = 2) -> str:
    """`mean ± std` in percent, '-' when absent."""
    value = row.get(key)
    if value is None:
        return "-"
    std = row.get(f"{key}_std")
    return f"{100 * value:.{digits}f}" + (f" ± {100 * std:.{digits}f}" if std else "")


def pct(value, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}"


def num(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def pair_label(pair: str, jpeg: frozenset = frozenset()) -> str:
    label = pair + (" (JPEG)" if pair in jpeg else "")
    return label + (" ¹" if pair in ("mnist-0v4", "mnist-6v8") else "")


def jpeg_pairs(records: list[dict]) -> frozenset:
    """The pairs whose test rows were not all lossless (a CIFAR file of JPEG-decoded rows)."""
    return frozenset(r["pair"] for r in records if r["kind"] == "model"
                     and r.get("n_test_exact") is not None and r["n_test_exact"] < r["n_test"])


# -- console ---------------------------------------------------------------------------------------


def pair_table(records: list[dict], pair: str) -> str:
    rows = []
    for r in summaries(records):
        if r["pair"] != pair:
            continue
        row = dict(r)
        for key in ("fgsm", "pgd_01", "pgd_l2", "pgd_2", "cw", "zoo", "certified",
                    "certified_l2", "certified_2", "paper_clean", "paper_pgd"):
            row[key] = None if r.get(key) is None else 100 * r[key]
        row["clean_pm"], row["pgd_pm"] = pm(r, "clean"), pm(r, "pgd")
        rows.append(row)
    svc = [r for r in records if r["kind"] == "svc" and r["pair"] == pair]
    head = pair
    if svc:
        r = svc[0]
        head += (f"; exact SVC (C={r['C']:g}, {r['support_vectors']} SVs) clean "
                 f"{pct(r['clean'], 2)} PGD {pct(r['pgd'])} PGD 0.1 {pct(r['pgd_01'])} "
                 f"L2 {pct(r['pgd_l2'])}")
    columns = [("model", "model", ""), ("clean_pm", "clean", ""), ("fgsm", "FGSM", ".1f"),
               ("pgd_pm", "PGD 8/255", ""), ("pgd_01", "PGD .1", ".1f"),
               ("pgd_l2", "PGD L2 1", ".1f"), ("pgd_2", "PGD 2/255", ".1f"),
               ("cw", "C&W", ".1f"), ("zoo", "ZOO", ".0f"), ("certified", "cert", ".1f"),
               ("certified_l2", "cert L2", ".1f"), ("certified_2", "cert 2/255", ".1f"),
               ("train_seconds", "train s", ".2f"), ("predict_us", "µs/pred", ".1f"),
               ("support_vectors", "SVs", ".0f"), ("paper_clean", "| paper clean", ".2f"),
               ("paper_pgd", "PGD", ".2f")]
    return head + "\n" + common.format_table(rows, columns)


def target_line(t: dict) -> str:
    value, reference = t["value"], t["reference"]
    unit = t.get("unit")
    if unit == "s":
        detail = f"{value:.2f} s"
    elif unit == "ratio":
        detail = (f"{value:.2f}x (per seed {t['ratio_min']:.2f} to {t['ratio_max']:.2f}; "
                  f"limit {reference:g}x)")
    elif unit == "points":
        detail = f"{value} of {t['checked']} certified points flipped"
    else:
        detail = f"{100 * value:.2f}% vs {100 * reference:.2f}%"
    if "gain_min" in t:
        detail += (f" (per seed {100 * t['gain_min']:+.2f} to {100 * t['gain_max']:+.2f} "
                   "points")
        detail += f"; seed std {100 * t['noise']:.2f})" if "noise" in t else ")"
    if "clean_drop" in t:
        detail += (f"; clean {100 * t['clean_drop']:.2f} points lower; trained at "
                   f"r = {255 * t['train_epsilon']:.3g}/255")
    if "seed_min" in t:
        detail += f" (seeds {100 * t['seed_min']:.2f} to {100 * t['seed_max']:.2f})"
    return f"{'MET    ' if t['met'] else 'NOT MET'} {t['pair']:24s} {t['target']}: {detail}"


# -- Markdown --------------------------------------------------------------------------------------


def training_radius(selected: dict) -> str:
    """A `selected` record's training radius: in pixel levels for L-inf, as is for L2."""
    radius = selected["train_epsilon"]
    if selected["model"].startswith("SV adv L2"):
        return f"L2 {radius:g}"
    return f"{255 * radius:.3g}/255"


def grid(header: list[str], rows: list[list]) -> str:
    """A Markdown table of cells already formatted (None shows as '-')."""
    return common.markdown_table([dict(enumerate(row)) for row in rows],
                                 [(i, h, "") for i, h in enumerate(header)])


def markdown(records: list[dict]) -> str:
    """Every table of the run as Markdown, for the docs."""
    first = records[0]
    seeds = max((r["seeds"] for r in summaries(records)), default=0)
    minutes = first["run_seconds"] / 60
    pairs = list(dict.fromkeys(r["pair"] for r in summaries(records)))
    jpeg = jpeg_pairs(records)

    def label(pair):
        return pair_label(pair, jpeg)

    models = summaries(records)
    budgets = " or ".join(str(b) for b in sorted({r["budget"] for r in models if r.get("budget")}))
    dtypes = " and ".join(sorted({r["dtype"] for r in models if r.get("dtype")}))
    at_defaults = any(r["model"].startswith("SV adv") for r in models)
    out = [
        "# Paper tables: random features and support vectors",
        "",
        f"Measured on {common.machine_line(first)}; the run took {minutes:.0f} min with "
        f"{first['jobs']} job(s) (`{first.get('command', 'python benchmarks/paper_tables.py')}`). "
        f"Means ± standard deviations over {seeds} seeds, whole test sets, one pass of "
        f"`learn_many` in batches of 500, B = {budgets}, γ = 1/(d·Var X)"
        + (" (`SV adv`: the package's defaults, gamma='scale' included, but the threat"
           + (")" if "--averaging" in first.get("command", "") else
              " and averaging=None: they predict with their last iterate)")
           if at_defaults else "")
        + f", {dtypes}, hyper-parameters chosen on a validation split (the script's docstring "
        "says how). `¹`: the paper's pair comes from MNIST8M."
        + (" (JPEG): most of the pair's pixels are JPEG-decoded." if jpeg else ""),
        "",
        "#### Both representations",
        "",
        "Accuracy (%) clean, under PGD-10 (L∞ 8/255, L∞ 0.1, L2 1.0) and certified by the "
        "model's own certificate (L∞ 8/255, L2 1.0, in the pixel box); the seconds of one "
        "`learn_many` pass; the prediction cost per sample (`decision_many`, µs); support "
        "vectors kept. Exact SVC: scikit-learn's offline RBF SVC on the same data, attacked "
        "through its exact gradient.",
        "",
    ]
    svc = {r["pair"]: r for r in records if r["kind"] == "svc"}
    rows = []
    for pair in pairs:
        for r in summaries(records):
            if r["pair"] != pair or r["model"] == "Natural (PGD-selected)":
                continue
            sv = f"{r['support_vectors']:.0f}" if r.get("support_vectors") else None
            rows.append([label(pair), r["model"], pm(r, "clean"), pm(r, "pgd", 1),
                         pm(r, "pgd_01", 1), pm(r, "pgd_l2", 1), pm(r, "certified", 1),
                         pm(r, "certified_l2", 1), num(r.get("train_seconds"), ".2f"),
                         num(r.get("predict_us"), ".1f"), sv])
        if pair in svc:
            r = svc[pair]
            subset = ("" if r.get("attack_points", math.inf) >= r.get("n_test", 0)
                      else f"; attacked on {r['attack_points']} test points")
            rows.append([label(pair), f"exact SVC (C = {r['C']:g}{subset})",
                         pct(r["clean"], 2), pct(r["pgd"]), pct(r["pgd_01"]), pct(r["pgd_l2"]),
                         None, None, f"{r['fit_seconds'] + r['kernel_seconds']:.1f} ²",
                         num(r.get("predict_us"), ".1f"), r["support_vectors"]])
    out += [grid(["pair", "model", "clean", "PGD 8/255", "PGD L∞ 0.1", "PGD L2 1.0",
                  "cert. L∞ 8/255", "cert. L2 1.0", "train s", "µs / prediction", "SVs"], rows),
            "", "² offline: the kernel matrix and the fit, on the whole training set.", ""]

    small = [r for r in summaries(records)
             if r.get("pgd_2") is not None and r["model"] != "Natural (PGD-selected)"]
    if small:
        rows = [[label(r["pair"]), r["model"], pm(r, "clean"), pm(r, "pgd_2", 1),
                 pm(r, "certified_2", 1), pm(r, "pgd", 1), pm(r, "certified", 1)]
                for r in small]
        rows += [[label(pair), "exact SVC", pct(r["clean"], 2), pct(r["pgd_2"]), None,
                  pct(r["pgd"]), None] for pair, r in svc.items() if r.get("pgd_2") is not None]
        out += ["#### CIFAR at 2/255", "",
                "No random-feature model withstands PGD at 8/255 on CIFAR; at a quarter of the "
                "radius:", "",
                grid(["pair", "model", "clean", "PGD L∞ 2/255", "cert. L∞ 2/255",
                      "PGD L∞ 8/255", "cert. L∞ 8/255"], rows), ""]

    rows = [[label(r["pair"]), r["model"], pm(r, "clean"), pct(r["fgsm"], 2), pm(r, "pgd"),
             pct(r.get("cw")), pct(r.get("zoo"), 0), pct(r["certified"]),
             f"{r['train_seconds']:.2f}"]
            + [pct(r.get(f"paper_{k}"), 2) for k in PAPER_COLUMNS]
            + [num(r.get("paper_train_minutes"), ".1f")] for r in summaries(records)]
    out += ["#### Against the paper", "",
            "Ours (%) beside the paper's; C&W-L2 and ZOO on a subset of seed 0's test set, "
            "counted at the L2 radius √d·8/255; the paper's training time in minutes.", "",
            grid(["pair", "model", "clean", "FGSM", "PGD", "C&W", "ZOO", "cert.", "train s",
                  "paper: clean", "FGSM", "PGD", "C&W", "ZOO", "min"], rows)]

    rows = [[r["pair"], r["model"], f"{r['regularization']:g}", f"{r['step_size']:g}",
             training_radius(r), r["criterion"]]
            for r in records if r["kind"] == "selected"]
    out += ["", "#### Chosen hyper-parameters", "",
            grid(["pair", "model", "λ", "η", "training radius", "criterion"], rows)]

    gaps = [r for r in records if r["kind"] == "dtype_gap"]
    if gaps:
        within = sum(r["within_noise"] for r in gaps)
        worst = max(gaps, key=lambda r: abs(r["gap"]) - r["seed_std"])
        by = {(r["pair"], r["model"], r["metric"]): r for r in gaps}
        rows = []
        for pair, model in dict.fromkeys((r["pair"], r["model"]) for r in gaps):
            cells = []
            for metric in ("clean", "pgd", "pgd_01", "pgd_l2", "certified"):
                g = by.get((pair, model, metric))
                cells.append(None if g is None else
                             f"{100 * g['gap']:+.2f} ({100 * g['gap_min']:+.2f}…"
                             f"{100 * g['gap_max']:+.2f}; σ {100 * g['seed_std']:.2f})"
                             + ("" if g["within_noise"] else " **>σ**"))
            rows.append([label(pair), model] + cells)
        out += [
            "", "#### float32 against float64", "",
            "The same seeds and hyper-parameters with float64 features or vectors: the mean "
            "gap float32 − float64 in points (its range over seeds) against the seed noise σ "
            "(the larger standard deviation over seeds of the two). "
            f"{within} of {len(gaps)} gaps are within σ; the largest against its σ: "
            f"{worst['pair']} {worst['model']} {worst['metric']} "
            f"{100 * worst['gap']:+.2f} points (σ {100 * worst['seed_std']:.2f}).",
            "",
            grid(["pair", "model", "clean", "PGD 8/255", "PGD L∞ 0.1", "PGD L2 1.0",
                  "cert. L∞ 8/255"], rows)]

    checks = [r for r in records if r["kind"] == "flip_check" and r["certified_points"]]
    rows = [[r["pair"], r["model"],
             r["attack"] + (f" + {r['restarts']} random starts" if "restarts" in r else ""),
             r["column"], f"{r['certified_points']} of {r['points']}", r["flipped"]]
            for r in checks] or [[None, None, None, None, "no point certified", None]]
    out += ["", "#### Are certified points ever flipped?", "",
            "Seed 0: every certified point of a test subset attacked at the radius it is "
            "certified for by PGD-50 (from the point and from random starts), and every C&W-L2 "
            "flip compared with the point's certified L2 and L∞ radii.", "",
            grid(["pair", "model", "attack", "certified at", "points attacked", "flipped"],
                 rows)]

    merges = [r for r in summaries(records) if r.get("merges")]
    if merges:
        out += ["", "#### Budget maintenance of the support vectors", "",
                "Merges in one pass and the mean weight degradation ||f_before − f_after||² "
                "per merge (seed mean).", "",
                grid(["pair", "model", "merges", "degradation per merge"],
                     [[r["pair"], r["model"], f"{r['merges']:.0f}",
                       f"{r['degradation_per_merge']:.2e}"] for r in merges])]

    goals = [r for r in records if r["kind"] == "target"]
    out += ["", "#### Targets", "",
            grid(["", "pair", "target", "measured"],
                 [["met" if t["met"] else "**not met**", t["pair"], t["target"],
                   target_line(t).split(": ", 1)[1]] for t in goals])]
    return "\n".join(out) + "\n"


# -- the plot --------------------------------------------------------------------------------------


def plot(records: list[dict], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = list(dict.fromkeys(r["pair"] for r in records if r["kind"] == "sweep"))
    if not pairs:
        return
    fig, axes = plt.subplots(3, len(pairs), figsize=(max(6.6, 3.1 * len(pairs)), 10.0),
                             squeeze=False)
    for column, pair in enumerate(pairs):
        sweep = [r for r in records if r["kind"] == "sweep" and r["pair"] == pair]
        top, bottom = axes[0][column], axes[1][column]
        for name, (color, style) in STYLES.items():
            steps = sorted((r["steps"], r["pgd"]) for r in sweep
                           if r["model"] == name and r["sweep"] == "steps")
            eps = sorted((r["epsilon"], r["pgd"]) for r in sweep
                         if r["model"] == name and r["sweep"] == "epsilon")
            if steps:
                top.plot(*zip(*steps), style, color=color, marker="o", ms=3, label=name)
            if eps:
                bottom.plot(*zip(*eps), style, color=color, marker="o", ms=3, label=name)
        matched = sorted((r["epsilon"], r["pgd"]) for r in sweep
                         if r["model"].startswith("adv-SVM(C) at"))
        if matched:
            bottom.plot(*zip(*matched), "--", color="darkred", marker="s", ms=3,
                        label="adv-SVM(C) trained at the attack's ε")
        frontier = axes[2][column]
        for r in records:
            if r["kind"] == "grid" and r["pair"] == pair:
                color = STYLES[r["model"]][0]
                frontier.plot(r["val_clean"], r["val_pgd"], "o", color=color, ms=3, alpha=0.6)
            # (The model chosen for PGD at 0.1 has no point on this 8/255 frontier.)
            if r["kind"] == "selected" and r["pair"] == pair and "val_pgd" in r:
                color, _ = STYLES[r["model"]]
                frontier.plot(r["val_clean"], r["val_pgd"], "*", color=color, ms=11,
                              markeredgecolor="black", markeredgewidth=0.5)
        frontier.set_title("validation grid: clean vs PGD-10 8/255\n(★ chosen)", fontsize=9)
        frontier.set_xlabel("clean accuracy")
        frontier.grid(alpha=0.3)
        points = sweep[0]["points"]
        top.set_title(f"{pair}\nPGD, ε = 8/255 ({points} test points)", fontsize=9)
        top.set_xlabel("PGD steps K")
        bottom.set_title("PGD-10 against ε", fontsize=9)
        bottom.set_xlabel("ε (L∞)")
        bottom.set_xscale("log")
        for ax in (top, bottom):
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
        if column == 0:
            top.set_ylabel("accuracy under attack")
            bottom.set_ylabel("accuracy under attack")
            frontier.set_ylabel("PGD accuracy")
    handles, labels = axes[1][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")  # (the legend whole, however wide)
    plt.close(fig)
    print(f"wrote {path}")


def report(records: list[dict], json_path: pathlib.Path, plot_path: pathlib.Path | None) -> None:
    """Print every pair's table and the targets; write the Markdown summary next to the JSON
    (same name, .md) and the plot if asked."""
    for pair in dict.fromkeys(r["pair"] for r in summaries(records)):
        print(pair_table(records, pair), "\n")
    for t in (r for r in records if r["kind"] == "target"):
        print(target_line(t))
    common.write_markdown(markdown(records), str(json_path), "paper_tables", False)
    if plot_path is not None:
        plot(records, plot_path)
