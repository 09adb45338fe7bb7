"""Where the training adversary stops: at the decision boundary (the model) or past it.

    python benchmarks/past_boundary.py [--data DIR] [--quick] [--out FILE] [--pairs NAME ...]
                                       [--seeds N] [--reach R ...] [--combine JSON ...]

`AdvKernelSVM` learns each attacked sample where its margin, linearised at the step's start,
reaches 0 (`river_advsvm.adversary.attacker_point` with `reach=1`). Learning a point past the
boundary instead (Zhang et al.'s friendly adversarial training with tau > 0) asks for more
margin where the classes' threat balls overlap. This benchmark trains the model as it is and
with each step continued to `reach` times the distance to that linearised boundary (the same
function, `reach` > 1, installed in place of the model's for the training pass), every other
parameter at its default: one pass of `learn_many` in batches of 500 over each stream order,
trained at each threat's radius (pixels / 255: L-inf 8/255, L-inf 0.1, L2 1.0), then clean
accuracy on the whole test set and PGD-10 at the threat (10 steps of eps / 4, no random start,
in the pixel box) on the same random `attack_points` test points for every model.

Records are written as JSON, with a Markdown summary (means over the stream orders, and each
reach's difference to the model's) next to them. Runs of different pairs can be made apart and
summarised together with `--combine`. `--quick` runs scikit-learn's digits.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
import sys
import warnings
from unittest import mock

import numpy as np

import common
import robust_training
from river_advsvm import adversary, progress
from river_advsvm.collapse import CollapseWarning

THREATS = robust_training.THREATS
DEFAULT_PAIRS = ["mnist-8v9", "mnist-1v7", "mnist-0v4", "mnist-6v8", "cifar-automobile-truck",
                 "cifar-dog-horse"]


@dataclasses.dataclass(frozen=True)
class Settings:
    seeds: int = 3
    attack_points: int = 500


FULL = Settings()
QUICK = Settings(seeds=2, attack_points=60)


def trained(X, y, seed: int, threat: str, reach: float):
    """The default model trained at `threat` in one pass (`common.train`), its adversary's
    steps reaching `reach` times the distance to the linearised boundary; and its training
    seconds."""
    norm, radius = THREATS[threat]
    from river_advsvm import AdvKernelSVM

    model = AdvKernelSVM(epsilon=radius, norm=norm, seed=seed)
    point = functools.partial(adversary.attacker_point, reach=reach)
    with mock.patch.object(adversary, "attacker_point", point):
        seconds = common.train(model, X, y)
    return model, seconds


def run_pair(name: str, data: dict, reaches: list[float], s: Settings, show: bool) -> list[dict]:
    X_test, y_test = data["X_test"], data["y_test"]
    attacked = np.random.default_rng(123).choice(len(y_test), min(s.attack_points, len(y_test)),
                                                 replace=False)
    records = []
    jobs = [(seed, threat, reach) for seed in range(s.seeds) for threat in THREATS
            for reach in reaches]
    for seed, threat, reach in progress.bar(jobs, desc=name, unit="model", progress=show):
        order = np.random.default_rng(seed).permutation(len(data["y_train"]))
        X, y = data["X_train"][order], data["y_train"][order]
        model, seconds = trained(X, y, seed, threat, reach)
        norm, radius = THREATS[threat]
        right = common.pgd_right(model, X_test[attacked], y_test[attacked], radius, norm=norm)[0]
        records.append({
            "kind": "model", "pair": name, "seed": seed, "threat": threat, "reach": reach,
            "clean": float(np.mean(model.predict_many(X_test).to_numpy() == y_test)),
            "pgd10": float(np.mean(right)), "attack_points": len(attacked),
            "collapsed": bool(model.collapsed), "train_seconds": seconds})
    return records


def summary(records: list[dict]) -> list[dict]:
    """Per pair, threat and reach: means over the stream orders, and the difference to the
    model's (reach 1) in points."""
    rows = []
    keys = sorted({(r["pair"], r["threat"]) for r in records},
                  key=lambda k: (k[0], list(THREATS).index(k[1])))
    for pair, threat in keys:
        group = [r for r in records if (r["pair"], r["threat"]) == (pair, threat)]
        means = {}
        for reach in sorted({r["reach"] for r in group}):
            runs = [r for r in group if r["reach"] == reach]
            means[reach] = (float(np.mean([r["clean"] for r in runs])),
                            float(np.mean([r["pgd10"] for r in runs])))
            row = {"kind": "summary", "pair": pair, "threat": threat, "reach": reach,
                   "orders": len(runs), "clean": means[reach][0], "pgd10": means[reach][1]}
            if reach != 1.0 and 1.0 in means:
                row.update(clean_change=100 * (means[reach][0] - means[1.0][0]),
                           pgd10_change=100 * (means[reach][1] - means[1.0][1]))
            rows.append(row)
    return rows


COLUMNS = [("pair", "pair", ""), ("threat", "threat", ""), ("reach", "reach", "g"),
           ("orders", "orders", "d"), ("clean", "clean", ".2%"), ("pgd10", "PGD-10", ".2%"),
           ("clean_change", "clean change (points)", "+.2f"),
           ("pgd10_change", "PGD-10 change (points)", "+.2f")]


def markdown(records: list[dict], host: dict, quick: bool) -> str:
    rows = [r for r in records if r["kind"] == "summary"]
    return "\n".join([
        "# Where the training adversary stops (`benchmarks/past_boundary.py`)", "",
        f"{common.machine_line(host)}." + (" Quick smoke run." if quick else ""), "",
        "Reach 1: the model as it is (each attacked sample learned where its linearised margin "
        "reaches 0); reach r: each step continued to r times that distance. Means over the "
        "stream orders; clean on the whole test set, PGD-10 at the training threat on the "
        "same test points for every model; changes against reach 1.", "",
        common.markdown_table(rows, COLUMNS)])


def main(argv=None) -> int:
    p = common.parser(__doc__.split("\n\n")[0], data=True)
    p.add_argument("--pairs", nargs="+", choices=list(robust_training.PAIRS),
                   default=DEFAULT_PAIRS)
    p.add_argument("--seeds", type=int, default=None, help="stream orders (default 3)")
    p.add_argument("--reach", type=float, nargs="+", default=[2.0], metavar="R",
                   help="the reaches to compare with the model's own (1); default 2")
    p.add_argument("--combine", nargs="+", default=None, metavar="JSON",
                   help="summarise the models of these result files together, training nothing")
    args = p.parse_args(argv)
    if args.combine:
        records = [r for path in args.combine for r in json.loads(pathlib.Path(path).read_text())
                   if r["kind"] == "model"]
        return save(records, args)
    s = QUICK if args.quick else FULL
    if args.seeds:
        s = dataclasses.replace(s, seeds=args.seeds)
    if any(not r > 1.0 for r in args.reach):
        raise SystemExit("--reach: every reach must be a number above 1")
    reaches = [1.0, *args.reach]
    if args.quick:
        pairs = {"digits 3 vs 8": common.digits_pair(3, 8)}
    else:
        pairs = {name: robust_training.load_pair(name, args.data) for name in args.pairs}
    records = []
    warnings.filterwarnings("ignore", category=CollapseWarning)  # recorded as `collapsed`
    with common.one_blas_thread():
        for name, data in pairs.items():
            records += run_pair(name, data, reaches, s, not args.no_progress)
    return save(records, args)


def save(records: list[dict], args) -> int:
    """Summarise the models' records, print the summary and write both."""
    rows = summary(records)
    print(common.format_table(rows, COLUMNS))
    records = records + rows
    common.save_run(records, args.out, "past_boundary", args.quick,
                    lambda records, host: markdown(records, host, args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
