"""Robustness of natural vs adversarially trained AdvKernelSVM on 1 vs 7, attacked and certified.

    python examples/robustness_report.py digits
    python examples/robustness_report.py mnist [--mnist PATH]   # after: advsvm data fetch mnist

For each model: clean accuracy; FGSM and PGD-10 (L-inf at 8/255 and 0.1, L2 at 0.5 and 1.0);
C&W-L2 and ZOO (L2 at 0.5 and 1.0); and the certified accuracy at every radius. Attack
accuracies are upper bounds on the robust accuracy, certified ones lower bounds. C&W and ZOO
cost far more than the rest (ZOO sees scores only: 2 queries per coordinate per step), so they
run on the first `--cw-samples` / `--zoo-samples` test points (0 skips them); every row says on
how many, and how many seconds 1,000 samples would take. On a terminal, stderr shows an upper
bound of the whole run's cost once the models are trained, then progress bars and the cost of
each attack (`--no-progress` switches them off).

`mnist.npz` holds uint8 arrays X_train, y_train, X_test, y_test (pixels are divided by 255);
`advsvm data fetch mnist` downloads it into the directory `--mnist` defaults to.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from river_advsvm import AdvKernelSVM, progress
from river_advsvm import data as datasets
from river_advsvm.attacks import FGSM, PGD, ZOO, CarliniWagnerL2
from river_advsvm.evaluate import robustness_report

EPSILONS = {"linf": [8 / 255, 0.1], "l2": [0.5, 1.0]}


def load_pair(data: str, mnist_path: str, first: int = 1, second: int = 7):
    """(X_train, y_train, X_test, y_test) for two classes, pixels scaled to [0, 1]."""
    if data == "digits":
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        X, y = load_digits(return_X_y=True)
        mask = (y == first) | (y == second)
        X_train, X_test, y_train, y_test = train_test_split(
            X[mask] / 16.0, y[mask], test_size=0.3, random_state=0, stratify=y[mask]
        )
        return X_train, y_train, X_test, y_test
    if not pathlib.Path(mnist_path).is_file():
        raise SystemExit(f"robustness_report.py: {mnist_path} not found; download it with: "
                         f"{datasets.fetch_command('mnist.npz')} (or pass --mnist PATH)")
    arrays = np.load(mnist_path)
    pair = []
    for part in ("train", "test"):
        X, y = arrays[f"X_{part}"], arrays[f"y_{part}"]
        mask = (y == first) | (y == second)
        pair += [X[mask] / 255.0, y[mask].astype(int)]
    return tuple(pair)


def train(model, X, y, batch: int = 500):
    for start in range(0, len(X), batch):
        model.learn_many(X[start : start + batch], y[start : start + batch])
    return model


def report_runs(n_samples: int, cw_samples: int, zoo_samples: int, zoo: ZOO) -> list:
    """`(attacks, samples, certified)` of each `robustness_report` call of one model's table:
    the cheap attacks on every sample, C&W and ZOO on the first ones (none for 0)."""
    runs = [
        ({"FGSM": FGSM(), "FGSM-L2": FGSM(norm="l2"), "PGD-10": PGD(), "PGD-10-L2": PGD(norm="l2")},
         n_samples, True),
        ({"C&W-L2": CarliniWagnerL2()}, min(cw_samples, n_samples), False),
        ({"ZOO": zoo}, min(zoo_samples, n_samples), False),
    ]
    return [run for run in runs if run[1] > 0]


def estimate_seconds(models, X, y, cw_samples: int, zoo_samples: int, zoo: ZOO) -> dict:
    """An upper bound of what every attack of every model's table will cost, in seconds, by
    attack (`Attack.estimate_seconds`: the model's cost per query, timed on a few rows, times
    the queries each attack makes at most)."""
    costs: dict[str, float] = {}
    for model in models:
        for attacks, n, _ in report_runs(len(X), cw_samples, zoo_samples, zoo):
            for name, attack in attacks.items():
                runs = 1 if attack.minimizes_norm else len(EPSILONS[attack.norm])
                seconds = runs * attack.estimate_seconds(model, X[:n], y[:n])
                name = name.removesuffix("-L2") if name != "C&W-L2" else name
                costs[name] = costs.get(name, 0.0) + seconds
    return costs


def report(model, X, y, cw_samples: int, zoo_samples: int, zoo: ZOO,
           show_progress: bool = True) -> pd.DataFrame:
    """One table per model: the cheap attacks on all of X, C&W and ZOO on the first points
    (each run with its own clean row, so that every attack is compared on its samples)."""
    tables = []
    for attacks, n, certified in report_runs(len(X), cw_samples, zoo_samples, zoo):
        table = robustness_report(model, X[:n], y[:n], attacks, EPSILONS, certified=certified,
                                  progress=show_progress)
        table.insert(3, "samples", n)
        tables.append(table)
    table = pd.concat(tables, ignore_index=True)
    certified = table[table.attack == "certified"]
    table = pd.concat([table[table.attack != "certified"], certified], ignore_index=True)
    table["seconds_per_1000"] = 1000 * table.seconds / table.samples
    table["attack"] = table.attack.replace({"FGSM-L2": "FGSM", "PGD-10-L2": "PGD-10"})
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", choices=["digits", "mnist"],
                        help="scikit-learn's bundled digits, or MNIST (advsvm data fetch mnist)")
    parser.add_argument("--mnist", default=str(datasets.default_dir() / "mnist.npz"),
                        help="path of mnist.npz (default: where advsvm data fetch puts it)")
    parser.add_argument("--test-samples", type=int, default=2000,
                        help="held-out samples the models are attacked on (default 2000)")
    parser.add_argument("--cw-samples", type=int, default=500,
                        help="of those, how many C&W-L2 attacks (default 500: it is slow)")
    parser.add_argument("--zoo-samples", type=int, default=40,
                        help="of those, how many ZOO attacks, black box (default 40: slower)")
    parser.add_argument("--zoo-learning-rate", type=float, default=0.01,
                        help="ZOO-ADAM's step (the paper's 0.01 needs many steps in 784-d)")
    parser.add_argument("--zoo-search-steps", type=int, default=4,
                        help="ZOO's binary search steps over its constant (default 4)")
    parser.add_argument("--adv-epsilon", type=float, default=None,
                        help="radius of adversarial training (default: 0.1 digits, 8/255 MNIST)")
    parser.add_argument("--adv-norm", default="linf", choices=["linf", "l2"],
                        help="norm of that radius (default linf)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the models and the attacks (default 0)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bars or cost estimates on stderr")
    args = parser.parse_args()
    epsilon = args.adv_epsilon
    if epsilon is None:
        epsilon = 0.1 if args.data == "digits" else 8 / 255

    X_train, y_train, X_test, y_test = load_pair(args.data, args.mnist)
    X_test, y_test = X_test[: args.test_samples], y_test[: args.test_samples]
    models = {
        "natural": AdvKernelSVM(seed=args.seed),
        f"adversarial ({args.adv_norm} {epsilon:.4g})": AdvKernelSVM(
            epsilon=epsilon, norm=args.adv_norm, seed=args.seed
        ),
    }
    pd.set_option("display.width", 160)
    pd.set_option("display.max_columns", 20)
    show_progress = not args.no_progress
    zoo = ZOO(learning_rate=args.zoo_learning_rate, search_steps=args.zoo_search_steps,
              seed=args.seed)
    trained = {}
    for name, model in progress.bar(models.items(), total=len(models), desc="training",
                                    unit="model", progress=show_progress):
        start = time.perf_counter()
        train(model, X_train, y_train)
        trained[name] = time.perf_counter() - start
    if progress.enabled(show_progress):
        costs = estimate_seconds(models.values(), X_test, y_test, args.cw_samples,
                                 args.zoo_samples, zoo)
        parts = ", ".join(f"{name} ~{progress.duration(s)}" for name, s in costs.items())
        progress.note(f"robustness_report.py {args.data}: the attacks of {len(models)} models "
                      f"should take at most ~{progress.duration(sum(costs.values()))} "
                      f"({parts}; --cw-samples and --zoo-samples make C&W and ZOO shorter)")
    for name, model in models.items():
        progress.write(f"\n{args.data} 1 vs 7, {name}: trained on {len(X_train)} samples in "
                       f"{trained[name]:.2g} s")
        table = report(model, X_test, y_test, args.cw_samples, args.zoo_samples, zoo,
                       show_progress)
        columns = ["attack", "norm", "epsilon", "samples", "accuracy", "mean_perturbation",
                   "no_gradient", "seconds_per_1000"]
        progress.write(table[columns].round(3).to_string(index=False))


if __name__ == "__main__":
    with threadpool_limits(1):  # comparable timings, and fair on a shared machine
        main()
