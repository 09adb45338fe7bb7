"""One pass of the support-vector model against Vowpal Wabbit's online kernel SVM, in one process.

    python benchmarks/vw_ksvm.py [--data DIR] [--quick] [--out FILE] [--pairs NAME ...]
                                 [--seeds N] [--rounds N]

Vowpal Wabbit's `--ksvm` is LaSVM (Bordes et al. 2005): exact coordinate steps on the SVM's
dual, one PROCESS and `--reprocess` (1) REPROCESS steps per sample, every support vector kept
(no budget), no bias. Its `--l2 λ` makes it the SVM of `C = 1/λ`: `--l2 1` is `C = 1`. It needs
`pip install vowpalwabbit`, or the package's `peers` extra.

For each pair of `robust_training.py` (pixels / 255; MNIST 1 vs 7 and 8 vs 9 by default) and
each of `--seeds` stream orders, in this process with BLAS on one thread, on the same kernel
(RBF with one scalar `gamma = 2 / (d Var X)`, `--bandwidth` for VW):

- the model, `AdvKernelSVM(gamma=gamma)` with its defaults otherwise (B = 1,024, 'merge',
  `reprocess=1`, averaged iterates): one pass of `learn_one` over the rows (dicts of the
  nonzero pixels, as a River stream gives them) and one of `learn_many` in batches of 500;
- VW: one pass of `learn` over the same rows, parsed beforehand (`Workspace.parse`: the
  parsing is not timed, as the model's arrays are not);
- scikit-learn's exact `SVC(C=1)` on the same kernel, as the reference of accuracy.

Reported: test accuracy of each, the learning time (CPU seconds of this process; the two
learners take turns, `--rounds` passes each, and the fastest is kept), samples per second, the
ratio of VW's time to the model's, and the support vectors the model ends with (VW's Python
API does not expose its count).

`--quick` runs scikit-learn's digits (1 vs 7), one order, without downloaded data.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import common
import robust_training
from river_advsvm import AdvKernelSVM


def vw_rows(X: np.ndarray, y: np.ndarray) -> list[str]:
    """VW's text format: `label |f index:value` over the nonzero inputs."""
    lines = []
    for row, label in zip(X, y):
        nonzero = np.flatnonzero(row)
        features = " ".join(f"{j}:{row[j]:.9g}" for j in nonzero.tolist())
        lines.append(f"{1 if label else -1} |f {features}")
    return lines


class VowpalKSVM:
    """One `vw --ksvm` workspace: parse, learn, predict."""

    def __init__(self, gamma: float):
        from vowpalwabbit import Workspace

        self.workspace = Workspace(f"--ksvm --kernel rbf --bandwidth {gamma!r} --l2 1 "
                                   "--reprocess 1 -b 24 --quiet")

    def parse(self, lines: list[str]) -> list:
        return [self.workspace.parse(line) for line in lines]

    def learn(self, examples: list) -> float:
        start = time.process_time()
        for example in examples:
            self.workspace.learn(example)
        return time.process_time() - start

    def decisions(self, examples: list) -> np.ndarray:
        return np.array([self.workspace.predict(example) for example in examples])

    def finish(self, examples: list) -> None:
        for example in examples:
            self.workspace.finish_example(example)
        self.workspace.finish()


def model_pass(gamma: float, X: np.ndarray, y: np.ndarray, rows: list[dict], one: bool):
    """A fresh model and one pass over the stream (`learn_one` over `rows`, else
    `learn_many`); the CPU seconds."""
    model = AdvKernelSVM(gamma=gamma, seed=0)
    start = time.process_time()
    if one:
        for x, label in zip(rows, y.tolist()):
            model.learn_one(x, label)
    else:
        for i in range(0, len(X), common.BATCH):
            model.learn_many(X[i:i + common.BATCH], y[i:i + common.BATCH])
    return model, time.process_time() - start


def run_pair(pair: str, data: dict, seeds: int, rounds: int, log) -> list:
    X_train, y_train = data["X_train"], data["y_train"] == data["y_train"].max()
    X_test, y_test = data["X_test"], data["y_test"] == data["y_train"].max()
    d = X_train.shape[1]
    gamma = 2.0 / (d * float(X_train.var()))
    from sklearn.svm import SVC

    svc = SVC(C=1.0, gamma=gamma).fit(X_train, y_train)
    svc_accuracy = float((svc.predict(X_test) == y_test).mean())
    log(f"{pair}: exact SVC {100 * svc_accuracy:.2f}% ({int(svc.n_support_.sum())} vectors)")
    test_lines = vw_rows(X_test, y_test)
    records = []
    for seed in range(seeds):
        order = np.random.default_rng(seed).permutation(len(y_train))
        X, y = X_train[order], y_train[order]
        rows = [{int(j): float(row[j]) for j in np.flatnonzero(row)} for row in X]
        lines = vw_rows(X, y)
        times = {"learn_one": [], "learn_many": [], "vw": []}
        for _ in range(rounds):  # the contenders take turns
            vw = VowpalKSVM(gamma)
            examples = vw.parse(lines)
            times["vw"].append(vw.learn(examples))
            tests = vw.parse(test_lines)
            vw_accuracy = float(((vw.decisions(tests) > 0) == y_test).mean())
            vw.finish(examples + tests)
            for mode in ("learn_one", "learn_many"):
                model, seconds = model_pass(gamma, X, y, rows, mode == "learn_one")
                times[mode].append(seconds)
            accuracy = float(common.right(model, X_test, y_test).mean())
        best = {key: min(values) for key, values in times.items()}
        records.append({"kind": "pass", "pair": pair, "seed": seed, "samples": len(y),
                        "gamma": gamma, "svc": svc_accuracy, "model": accuracy, "vw": vw_accuracy,
                        "model_vectors": model.n_support_vectors,
                        "learn_one_s": best["learn_one"], "learn_many_s": best["learn_many"],
                        "vw_s": best["vw"],
                        "vw_over_learn_one": best["vw"] / best["learn_one"],
                        "vw_over_learn_many": best["vw"] / best["learn_many"]})
        log(f"{pair} order {seed}: model {100 * accuracy:.2f}% (learn_one {best['learn_one']:.2f}"
            f" s, learn_many {best['learn_many']:.2f} s), VW --ksvm {100 * vw_accuracy:.2f}% "
            f"({best['vw']:.2f} s), SVC {100 * svc_accuracy:.2f}%")
    return records


def summary(records: list) -> list:
    out = []
    for pair in dict.fromkeys(r["pair"] for r in records if r["kind"] == "pass"):
        runs = [r for r in records if r["kind"] == "pass" and r["pair"] == pair]
        mean = lambda key: statistics.mean(r[key] for r in runs)  # noqa: E731
        out.append({"kind": "summary", "pair": pair, "orders": len(runs), "svc": runs[0]["svc"],
                    "model": mean("model"), "vw": mean("vw"),
                    "model_gap": mean("model") - runs[0]["svc"],
                    "vw_gap": mean("vw") - runs[0]["svc"],
                    "learn_one_per_s": mean("samples") / mean("learn_one_s"),
                    "learn_many_per_s": mean("samples") / mean("learn_many_s"),
                    "vw_per_s": mean("samples") / mean("vw_s"),
                    "vw_over_learn_one": mean("vw_over_learn_one"),
                    "vw_over_learn_many": mean("vw_over_learn_many")})
    return out


def markdown(records: list, host: dict) -> str:
    pct = lambda v: 100 * v  # noqa: E731
    rows = [{**r, **{k: pct(r[k]) for k in ("svc", "model", "vw", "model_gap", "vw_gap")}}
            for r in records if r["kind"] == "summary"]
    return "\n".join([
        "# One pass against Vowpal Wabbit's kernel SVM (`benchmarks/vw_ksvm.py`)", "",
        common.machine_line(host) + ".", "",
        "Mean over the stream orders: test accuracy (%) after one pass, its gap to the exact SVC "
        "(C = 1, same kernel), samples learned per CPU second, and VW's learning time over the "
        "model's (above 1: the model is faster).", "",
        common.markdown_table(rows, [
            ("pair", "pair", ""), ("orders", "orders", "d"), ("svc", "exact SVC", ".2f"),
            ("model", "model", ".2f"), ("model_gap", "its gap", "+.2f"),
            ("vw", "VW --ksvm", ".2f"), ("vw_gap", "its gap", "+.2f"),
            ("learn_one_per_s", "learn_one /s", ",.0f"),
            ("learn_many_per_s", "learn_many /s", ",.0f"), ("vw_per_s", "VW /s", ",.0f"),
            ("vw_over_learn_one", "VW time / learn_one", ".2f"),
            ("vw_over_learn_many", "VW time / learn_many", ".2f")]), ""])


def main(argv=None) -> int:
    p = common.parser(__doc__.split("\n\n")[0], data=True)
    p.add_argument("--pairs", nargs="+", default=["mnist-1v7", "mnist-8v9"],
                   choices=list(robust_training.PAIRS))
    p.add_argument("--seeds", type=int, default=3, help="stream orders of each pair")
    p.add_argument("--rounds", type=int, default=2, help="timed passes of each contender")
    args = p.parse_args(argv)
    try:
        import vowpalwabbit  # noqa: F401
    except ImportError:
        print("vw_ksvm.py compares with Vowpal Wabbit: pip install vowpalwabbit", file=sys.stderr)
        return 2
    start = time.perf_counter()

    def log(message):
        print(f"[{time.perf_counter() - start:6.0f} s] {message}", flush=True)

    records = []
    with common.one_blas_thread():
        if args.quick:
            pairs = {"digits-1v7": common.digits_pair(1, 7)}
            seeds, rounds = 1, 1
        else:
            pairs = {pair: robust_training.load_pair(pair, args.data) for pair in args.pairs}
            seeds, rounds = args.seeds, args.rounds
        for pair, data in pairs.items():
            records += run_pair(pair, data, seeds, rounds, log)
        records += summary(records)
    common.save_run(records, args.out, "vw_ksvm", args.quick, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
