"""AdvKernelSVM as a River user meets it: progressive validation on River's binary streams.

    python benchmarks/river_streams.py [--quick] [--out FILE]

Progressive validation (`river.evaluate.progressive_val_score`: predict each sample, then
learn it; accuracy) on Phishing, Bananas, and 20,000 samples each of Hyperplane(10 features),
Agrawal, SEA, SEA with a concept drift at 10,000 (`ConceptDriftStream` of SEA variants 0 and
1), Sine and Mixed, seed 42 everywhere. Each stream is drawn once into memory, so that the
samples/s are the models' own; they are CPU seconds of this process (BLAS on one thread), so
that time the scheduler gives to other jobs on a shared machine does not count.

Models, all in the same run: `AdvKernelSVM` with its default parameters (only the seed fixed,
for reproducibility) raw, behind `preprocessing.StandardScaler()` and behind
`preprocessing.MinMaxScaler()`, with random features (`compact`) and, when installed, support
vectors (`merge`), and the support-vector model predicting with its last iterate
(`averaging=None`, raw and behind each scaler; the default predicts with the average of its
iterates); River's
`forest.ARFClassifier(n_models=10, seed=42)`,
`tree.HoeffdingAdaptiveTreeClassifier(seed=42)`, `StandardScaler() | neighbors.KNNClassifier()`
and `StandardScaler() | linear_model.LogisticRegression()`. Reported: accuracy per stream and
its mean over the 8, samples/s over all of them, and memory (River's `_raw_memory_usage` of the
model at the end of each stream, the largest over the streams).

"""

from __future__ import annotations

import importlib.util
import itertools
import statistics
import sys
import time

import common
from river_advsvm import AdvKernelSVM, progress

SEED = 42
LENGTH = 20_000
#: Issue 15's targets.
AGRAWAL_RAW = 0.80
BANANAS_SCALED = 0.87
ARF_SLACK = 0.005
ARF_SPEEDUP = 5.0
#: Within this of the majority class's share, a model has learned nothing.
MAJORITY_MARGIN = 0.01


def has_support_vectors() -> bool:
    return importlib.util.find_spec("river_advsvm.support") is not None


# -- the streams ----------------------------------------------------------------------------------


def streams(length: int) -> dict:
    """Name -> a function returning the stream's samples as a list."""
    from river import datasets
    from river.datasets import synth

    def first(stream):
        return lambda: list(itertools.islice(stream(), length))

    return {
        "Phishing": first(datasets.Phishing),
        "Bananas": first(datasets.Bananas),
        "Hyperplane": first(lambda: synth.Hyperplane(seed=SEED, n_features=10)),
        "Agrawal": first(lambda: synth.Agrawal(seed=SEED)),
        "SEA": first(lambda: synth.SEA(seed=SEED)),
        "SEA-drift": first(lambda: synth.ConceptDriftStream(
            synth.SEA(seed=SEED, variant=0), synth.SEA(seed=SEED, variant=1),
            position=length // 2, seed=SEED)),
        "Sine": first(lambda: synth.Sine(seed=SEED)),
        "Mixed": first(lambda: synth.Mixed(seed=SEED)),
    }


def majority_share(samples: list) -> float:
    counts: dict = {}
    for _, y in samples:
        counts[y] = counts.get(y, 0) + 1
    return max(counts.values()) / len(samples)


# -- the models -----------------------------------------------------------------------------------

PIPELINES = ("raw", "StandardScaler", "MinMaxScaler")


def piped(pipeline: str, model):
    from river import preprocessing

    if pipeline == "StandardScaler":
        return preprocessing.StandardScaler() | model
    if pipeline == "MinMaxScaler":
        return preprocessing.MinMaxScaler() | model
    return model


def ours(policies: list) -> list:
    """(name, family, pipeline, policy, factory) for AdvKernelSVM with its defaults."""
    return [(f"AdvKernelSVM({policy}) {pipeline}", "AdvKernelSVM", pipeline, policy,
             lambda pipeline=pipeline, policy=policy: piped(
                 pipeline, AdvKernelSVM(budget_policy=policy, seed=SEED)))
            for policy in policies for pipeline in PIPELINES]


def last_iterate() -> list:
    """(name, family, pipeline, policy, factory) for the support-vector model predicting with
    its last iterate (`averaging=None`), its other parameters at their defaults."""
    return [(f"AdvKernelSVM(merge, averaging=None) {pipeline}", "AdvKernelSVM",
             pipeline, "merge", lambda pipeline=pipeline: piped(
                 pipeline, AdvKernelSVM(seed=SEED, averaging=None)))
            for pipeline in PIPELINES]


def river_models() -> list:
    from river import forest, linear_model, neighbors, preprocessing, tree

    return [
        ("ARF(10)", "river", None, None,
         lambda: forest.ARFClassifier(n_models=10, seed=SEED)),
        ("HoeffdingAdaptiveTree", "river", None, None,
         lambda: tree.HoeffdingAdaptiveTreeClassifier(seed=SEED)),
        ("StandardScaler | KNN", "river", "StandardScaler", None,
         lambda: preprocessing.StandardScaler() | neighbors.KNNClassifier()),
        ("StandardScaler | LogisticRegression", "river", "StandardScaler", None,
         lambda: preprocessing.StandardScaler() | linear_model.LogisticRegression()),
    ]


# -- one run --------------------------------------------------------------------------------------


def run(model, samples: list) -> dict:
    """Progressive validation of `model` over `samples`: accuracy, seconds, memory, or the
    error if it raised."""
    import warnings

    from river import evaluate, metrics

    start = time.process_time()  # CPU seconds: other jobs on a shared machine do not count
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            metric = evaluate.progressive_val_score(samples, model, metrics.Accuracy())
    except Exception as error:  # a crash is a result here: recorded, the run goes on
        return {"accuracy": None, "seconds": time.process_time() - start,
                "error": f"{type(error).__name__}: {error}"}
    seconds = time.process_time() - start
    return {"accuracy": metric.get(), "seconds": seconds, "error": None,
            "memory_kb": model._raw_memory_usage / 1024,
            "warnings": "; ".join(sorted({str(w.message) for w in caught}))[:300] or None}


def run_all(models: list, data: dict, show_progress: bool) -> list:
    """Every model on every stream, the models taking turns on each stream: the rates that are
    compared (ours against ARF's) are measured close in time, not an hour apart."""
    records = []
    runs = [(stream, model) for stream in data for model in models]
    for stream, (name, family, pipeline, policy, factory) in progress.bar(
            runs, desc="river_streams", unit="run", progress=show_progress):
        samples = data[stream]
        result = run(factory(), samples["samples"])
        records.append({"kind": "run", "model": name, "family": family,
                        "pipeline": pipeline, "policy": policy, "stream": stream,
                        "samples": len(samples["samples"]),
                        "samples_per_s": len(samples["samples"]) / result["seconds"],
                        "majority": samples["majority"], **result})
    for name, *_ in models:
        summary = summarise(records, name)
        progress.write(f"{name:40s} " + " ".join(
            "crash" if r["accuracy"] is None else f"{100 * r['accuracy']:5.1f}"
            for r in records if r["model"] == name)
            + f"  mean {fmt(summary['mean_accuracy'], 100, '.2f')}"
            f"  {summary['samples_per_s']:>9,.0f}/s")
        records.append(summary)
    return records


def fmt(value, scale=1.0, spec=".2f") -> str:
    return "-" if value is None else format(scale * value, spec)


def summarise(records: list, name: str) -> dict:
    rows = [r for r in records if r["kind"] == "run" and r["model"] == name]
    crashed = [r["stream"] for r in rows if r["accuracy"] is None]
    accuracies = [r["accuracy"] for r in rows if r["accuracy"] is not None]
    seconds = sum(r["seconds"] for r in rows)
    summary = {"kind": "summary", "model": name, "family": rows[0]["family"],
               "pipeline": rows[0]["pipeline"], "policy": rows[0]["policy"],
               "streams": len(rows), "crashed": ",".join(crashed) or None,
               "mean_accuracy": None if crashed else statistics.mean(accuracies),
               "samples_per_s": sum(r["samples"] for r in rows) / seconds,
               "memory_kb_max": max((r.get("memory_kb") or 0.0) for r in rows),
               "at_majority": ",".join(r["stream"] for r in rows if r["accuracy"] is not None
                                       and r["accuracy"] <= r["majority"] + MAJORITY_MARGIN)
               or None}
    for r in rows:
        summary[f"accuracy_{r['stream']}"] = r["accuracy"]
    return summary


# -- targets --------------------------------------------------------------------------------------


def targets(records: list, policy: str) -> list:
    summaries = {r["model"]: r for r in records if r["kind"] == "summary"}
    arf = summaries["ARF(10)"]
    name = {p: f"AdvKernelSVM({policy}) {p}" for p in PIPELINES}
    out = []

    def target(text, value, threshold, met):
        out.append({"kind": "target", "policy": policy, "target": text, "value": value,
                    "threshold": threshold, "met": bool(met)})

    for pipeline in PIPELINES:
        s = summaries[name[pipeline]]
        target(f"{pipeline}: no crash", s["streams"] - len((s["crashed"] or "").split(",")
                                                          if s["crashed"] else []),
               s["streams"], s["crashed"] is None)
        target(f"{pipeline}: no stream at majority-class level (+{MAJORITY_MARGIN:.0%})",
               None, None, s["at_majority"] is None)
    agrawal = summaries[name["raw"]]["accuracy_Agrawal"]
    target("raw: Agrawal >= 80%", agrawal, AGRAWAL_RAW, agrawal is not None
           and agrawal >= AGRAWAL_RAW)
    for pipeline in ("StandardScaler", "MinMaxScaler"):
        bananas = summaries[name[pipeline]]["accuracy_Bananas"]
        target(f"{pipeline}: Bananas >= 87%", bananas, BANANAS_SCALED,
               bananas is not None and bananas >= BANANAS_SCALED)
    std = summaries[name["StandardScaler"]]
    if std["mean_accuracy"] is not None and arf["mean_accuracy"] is not None:
        target("StandardScaler: mean over the 8 >= ARF's mean - 0.5 points",
               std["mean_accuracy"] - arf["mean_accuracy"], -ARF_SLACK,
               std["mean_accuracy"] >= arf["mean_accuracy"] - ARF_SLACK)
    speedup = std["samples_per_s"] / arf["samples_per_s"]
    target("StandardScaler: samples/s >= 5x ARF's", speedup, ARF_SPEEDUP, speedup >= ARF_SPEEDUP)
    return out


# -- output ---------------------------------------------------------------------------------------


def table_rows(records: list, names: list) -> list:
    summaries = {r["model"]: r for r in records if r["kind"] == "summary"}
    rows = []
    for name in names:
        s = summaries[name]
        row = {"model": name}
        for stream in names_of_streams(records):
            a = s.get(f"accuracy_{stream}")
            row[stream] = "crash" if a is None else f"{100 * a:.1f}"
        row["mean"] = fmt(s["mean_accuracy"], 100)
        row["samples/s"] = f"{s['samples_per_s']:,.0f}"
        row["memory"] = f"{s['memory_kb_max']:,.0f} KB"
        rows.append(row)
    return rows


def names_of_streams(records: list) -> list:
    return list(dict.fromkeys(r["stream"] for r in records if r["kind"] == "run"))


def markdown(records: list, quick: bool) -> str:
    machine = common.machine()
    streams_ = names_of_streams(records)
    models = list(dict.fromkeys(r["model"] for r in records if r["kind"] == "summary"))
    columns = [("model", "model", "")] + [(s, s, "") for s in streams_] + [
        ("mean", "mean", ""), ("samples/s", "samples/s", ""), ("memory", "memory", "")]
    runs = [r for r in records if r["kind"] == "run"]
    majority = {r["stream"]: r["majority"] for r in runs}
    lengths = {r["stream"]: r["samples"] for r in runs}
    lines = ["# River's binary streams (`benchmarks/river_streams.py`)", "",
             f"{common.machine_line(machine)}."
             + (" Quick smoke run." if quick else ""), "",
             "Progressive validation accuracy (%), its mean over the streams, samples/s over "
             "all of them, and the largest memory at the end of a stream (River's "
             "`_raw_memory_usage`). AdvKernelSVM with its defaults (seed fixed), by "
             "representation (`compact` random features, `merge` support vectors), and with "
             "support vectors predicting with their last iterate (`averaging=None`; the "
             "default predicts with the average of its iterates).", "",
             "Streams (samples, majority class %): " + ", ".join(
                 f"{s} ({lengths[s]:,}, {100 * majority[s]:.1f})" for s in streams_), "",
             common.markdown_table(table_rows(records, models), columns)]
    speeds = []
    for model in models:
        row = {"model": model}
        for r in runs:
            if r["model"] == model:
                row[r["stream"]] = f"{r['samples_per_s']:,.0f}"
        speeds.append(row)
    lines += ["", "Samples per CPU-second of each model on each stream (progressive validation: "
                  "one prediction and one step per sample):", "",
              common.markdown_table(speeds, [("model", "model", "")]
                                    + [(s, s, "") for s in streams_])]
    errors = [r for r in runs if r["error"]]
    if errors:
        lines += ["", "Crashes: " + "; ".join(f"{r['model']} on {r['stream']}: {r['error']}"
                                              for r in errors)]
    lines += common.targets_markdown(records, [
        ("policy", "representation", ""), ("target", "target", ""),
        ("value", "measured", ".3f"), ("met", "", "")])
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--policy", action="append", choices=["compact", "merge"],
                        help="AdvKernelSVM representation(s) to run (default: every one "
                             "installed)")
    args = parser.parse_args(argv)
    length = 250 if args.quick else LENGTH
    data = {}
    for name, draw in streams(length).items():
        samples = draw()
        data[name] = {"samples": samples, "majority": majority_share(samples)}
    policies = args.policy or ["compact"] + (["merge"] if has_support_vectors() else [])
    with common.one_blas_thread():
        extra = last_iterate() if "merge" in policies else []
        records = run_all(ours(policies) + extra + river_models(), data, not args.no_progress)
        for policy in policies:
            records += targets(records, policy)
        print(common.format_table([r for r in records if r["kind"] == "target"], [
            ("policy", "policy", ""), ("target", "target", ""), ("value", "measured", ".3f"),
            ("met", "met", "")]))
        name = "river_streams"
        text = markdown(records, args.quick)
    machine = common.machine()
    for r in records:
        r.update(machine, quick=args.quick)
    common.write_records(records, args.out, name, args.quick)
    common.write_markdown(text, args.out, name, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
