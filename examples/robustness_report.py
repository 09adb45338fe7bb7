"""Robustness of natural vs adversarially trained AdvKernelSVM on 1 vs 7, attacked and certified.

    python examples/robustness_report.py digits
    python examples/robustness_report.py mnist --mnist /path/to/mnist.npz

For each model: clean accuracy; FGSM and PGD-10 (L-inf at 8/255 and 0.1, L2 at 0.5 and 1.0);
C&W-L2 and ZOO (L2 at 0.5 and 1.0); and the certified accuracy at every radius. Attack
accuracies are upper bounds on the robust accuracy, certified ones lower bounds. C&W and ZOO
cost far more than the rest (ZOO sees scores only: 2 queries per coordinate per step), so they
run on the first `--cw-samples` / `--zoo-samples` test points; every row says on how many, and
how many seconds 1,000 samples would take.

`mnist.npz` holds uint8 arrays X_train, y_train, X_test, y_test (pixels are divided by 255).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from river_advsvm import AdvKernelSVM
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


def report(model, X, y, cw_samples: int, zoo_samples: int, seed: int = 0) -> pd.DataFrame:
    """One table per model: the cheap attacks on all of X, C&W and ZOO on the first points."""
    runs = [
        ({"FGSM": FGSM(), "FGSM-L2": FGSM(norm="l2"), "PGD-10": PGD(), "PGD-10-L2": PGD(norm="l2")},
         len(X), True),
        ({"C&W-L2": CarliniWagnerL2()}, min(cw_samples, len(X)), False),
        ({"ZOO": ZOO(seed=seed)}, min(zoo_samples, len(X)), False),
    ]
    tables = []
    for attacks, n, certified in runs:
        table = robustness_report(model, X[:n], y[:n], attacks, EPSILONS, certified=certified)
        if tables:  # the clean row comes once, from the full set
            table = table[table.attack != "clean"]
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
    parser.add_argument("data", choices=["digits", "mnist"])
    parser.add_argument("--mnist", default="mnist.npz", help="path of mnist.npz")
    parser.add_argument("--test-samples", type=int, default=2000)
    parser.add_argument("--cw-samples", type=int, default=500)
    parser.add_argument("--zoo-samples", type=int, default=40)
    parser.add_argument("--adv-epsilon", type=float, default=None,
                        help="radius of adversarial training (default: 0.1 digits, 8/255 MNIST)")
    parser.add_argument("--adv-norm", default="linf", choices=["linf", "l2"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    epsilon = args.adv_epsilon or (0.1 if args.data == "digits" else 8 / 255)

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
    for name, model in models.items():
        start = time.perf_counter()
        train(model, X_train, y_train)
        print(f"\n{args.data} 1 vs 7, {name}: trained on {len(X_train)} in "
              f"{time.perf_counter() - start:.1f} s")
        table = report(model, X_test, y_test, args.cw_samples, args.zoo_samples, args.seed)
        columns = ["attack", "norm", "epsilon", "samples", "accuracy", "mean_perturbation",
                   "no_gradient", "seconds_per_1000"]
        print(table[columns].round(3).to_string(index=False))


if __name__ == "__main__":
    with threadpool_limits(1):  # comparable timings, and fair on a shared machine
        main()
