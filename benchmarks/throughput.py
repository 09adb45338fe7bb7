"""Samples per second of AdvKernelSVM next to reference implementations, in the same process.

    python benchmarks/throughput.py [--quick] [--out FILE]

For each input width `d` and budget `B` it times learn_one, learn_many (batches of 500) and
predict_one for:

- `river-advsvm`: AdvKernelSVM (compact policy), dict samples for the *_one modes, numpy batches
  for learn_many (River's DataFrame path is measured too, as `river-advsvm (DataFrame)`).
- `numpy loop`: the same arithmetic written by hand on numpy arrays (no dicts, no validation):
  the ceiling the one-sample API can approach. For learn_many its row is the batch floor: one
  GEMM and one cosine for the whole batch, nothing sequential.
- `river RBFSampler|LogReg`: River's own `feature_extraction.RBFSampler(n_components=B) |
  linear_model.LogisticRegression`. It expands each input into d x B features per sample, so its
  run is capped in time.
- `sklearn RBFSampler+SGD`: scikit-learn's `RBFSampler(n_components=B)` and
  `SGDClassifier(loss="hinge").partial_fit`, one sample (or one batch) per call.

BLAS is pinned to one thread (the machine is shared; a second thread has been seen to slow
down 90x under load) and every number is reported with its ratio to the numpy loop measured in
the same run, which is what to compare across machines.

"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

import common
from river_advsvm import AdvKernelSVM, progress

BATCH = 500


def make_data(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    w = rng.normal(size=d)
    y = X @ w > np.median(X @ w)
    return X, y


def timed(run, n_samples: int, budget_seconds: float) -> float:
    """Samples per second of `run(i)` over up to `n_samples` calls or `budget_seconds`."""
    run(0)  # warm-up: first-touch allocations, input registration
    done, start = 0, time.perf_counter()
    while done < n_samples:
        run(done + 1)
        done += 1
        if time.perf_counter() - start > budget_seconds:
            break
    return done / (time.perf_counter() - start)


# -- the hand-written reference -----------------------------------------------------------------


class HandLoop:
    """The compact-policy DSG step on numpy arrays, with nothing else around it."""

    def __init__(self, model: AdvKernelSVM, d: int):
        # Borrow the model's own random features so both compute exactly the same thing.
        model.learn_one(dict(enumerate(np.ones(d).tolist())), True)
        self.omega = model._store.omega.copy()
        self.phase = model._store.phase[: model._store.size].copy()
        self.coef = np.zeros(self.omega.shape[1])
        self.bias, self.norm = 0.0, 0.0
        self.eta, self.lam, self.eta_b = model.step_size, model.regularization, model.bias_step_size

    def learn(self, x: np.ndarray, y: float) -> None:
        phi = math.sqrt(2) * np.cos(x @ self.omega + self.phase)
        g = float(self.coef @ phi) + self.bias
        self.coef *= 1 - self.eta * self.lam
        if 1 - y * g > 0:
            self.coef += (self.eta * y / len(self.coef)) * phi
            self.norm = math.sqrt(len(self.coef)) * float(np.sqrt(self.coef @ self.coef))
            self.bias += self.eta_b * y

    def predict(self, x: np.ndarray) -> bool:
        return float(self.coef @ (math.sqrt(2) * np.cos(x @ self.omega + self.phase))) > -self.bias

    def batch_floor(self, X: np.ndarray) -> np.ndarray:
        return math.sqrt(2) * np.cos(X @ self.omega + self.phase)


# -- one configuration --------------------------------------------------------------------------


def bench_config(d: int, budget: int, n_one: int, n_many: int, seconds: float) -> list[dict]:
    import pandas as pd

    X, y = make_data(max(n_one, n_many) + BATCH + 1, d)
    dicts = [dict(enumerate(row)) for row in X[: n_one + 2].tolist()]
    labels = y.tolist()
    signs = np.where(y, 1.0, -1.0)
    records = []

    def record(system, mode, rate):
        records.append({"system": system, "d": d, "budget": budget, "mode": mode,
                        "samples_per_s": rate})

    # river-advsvm
    model = AdvKernelSVM(budget=budget, seed=0)
    record("river-advsvm", "learn_one",
           timed(lambda i: model.learn_one(dicts[i], labels[i]), n_one, seconds))
    record("river-advsvm", "predict_one",
           timed(lambda i: model.predict_one(dicts[i]), n_one, seconds))
    model = AdvKernelSVM(budget=budget, seed=0)
    n_batches = max(1, n_many // BATCH)
    record("river-advsvm", "learn_many", BATCH * timed(
        lambda i: model.learn_many(X[(i % n_batches) * BATCH:][:BATCH],
                                   y[(i % n_batches) * BATCH:][:BATCH]), n_batches, seconds))
    frames = [pd.DataFrame(X[i * BATCH:(i + 1) * BATCH]) for i in range(n_batches)]
    series = [pd.Series(y[i * BATCH:(i + 1) * BATCH]) for i in range(n_batches)]
    model = AdvKernelSVM(budget=budget, seed=0)
    record("river-advsvm (DataFrame)", "learn_many", BATCH * timed(
        lambda i: model.learn_many(frames[i % n_batches], series[i % n_batches]),
        n_batches, seconds))

    # numpy hand loop and batch floor
    hand = HandLoop(AdvKernelSVM(budget=budget, gamma=1.0 / d, seed=0), d)
    record("numpy loop", "learn_one", timed(lambda i: hand.learn(X[i], signs[i]), n_one, seconds))
    record("numpy loop", "predict_one", timed(lambda i: hand.predict(X[i]), n_one, seconds))
    record("numpy loop", "learn_many", BATCH * timed(
        lambda i: hand.batch_floor(X[(i % n_batches) * BATCH:][:BATCH]), n_batches, seconds))

    # scikit-learn
    from sklearn.kernel_approximation import RBFSampler as SkRBF
    from sklearn.linear_model import SGDClassifier

    sampler = SkRBF(n_components=budget, gamma=1.0 / d, random_state=0).fit(X[:2])
    sgd = SGDClassifier(loss="hinge", alpha=1e-4)
    classes = np.array([False, True])
    record("sklearn RBFSampler+SGD", "learn_one", timed(
        lambda i: sgd.partial_fit(sampler.transform(X[i : i + 1]), y[i : i + 1], classes),
        n_one, seconds))
    record("sklearn RBFSampler+SGD", "predict_one", timed(
        lambda i: sgd.predict(sampler.transform(X[i : i + 1])), n_one, seconds))
    sgd = SGDClassifier(loss="hinge", alpha=1e-4)
    record("sklearn RBFSampler+SGD", "learn_many", BATCH * timed(
        lambda i: sgd.partial_fit(sampler.transform(X[(i % n_batches) * BATCH:][:BATCH]),
                                  y[(i % n_batches) * BATCH:][:BATCH], classes),
        n_batches, seconds))

    # River's own pipeline: d x B output features per sample, so a short capped run.
    from river import feature_extraction, linear_model

    pipeline = feature_extraction.RBFSampler(
        gamma=1.0 / d, n_components=budget, seed=0
    ) | linear_model.LogisticRegression()
    cap = max(3, min(n_one, int(2e6 // (d * budget))))
    record("river RBFSampler|LogReg", "learn_one",
           timed(lambda i: pipeline.learn_one(dicts[i], labels[i]), cap, seconds))
    record("river RBFSampler|LogReg", "predict_one",
           timed(lambda i: pipeline.predict_one(dicts[i]), cap, seconds))

    reference = {r["mode"]: r["samples_per_s"] for r in records if r["system"] == "numpy loop"}
    for r in records:
        r["ratio_to_numpy"] = r["samples_per_s"] / reference[r["mode"]]
    return records


def format_table(records: list[dict]) -> str:
    lines = [f"{'system':28s} {'d':>5s} {'B':>5s} {'mode':12s} {'samples/s':>12s} {'x numpy':>8s}"]
    for r in records:
        lines.append(
            f"{r['system']:28s} {r['d']:5d} {r['budget']:5d} {r['mode']:12s} "
            f"{r['samples_per_s']:12,.0f} {r['ratio_to_numpy']:8.3f}"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    args = common.parser(__doc__.split("\n\n")[0]).parse_args(argv)
    if args.quick:
        grid, n_one, n_many, seconds = [(64, 256)], 200, 1000, 0.5
    else:
        grid = [(d, b) for d in (64, 784, 3072) for b in (256, 1024, 4096)]
        n_one, n_many, seconds = 3000, 10_000, 4.0
    records = []
    with common.one_blas_thread():
        for d, budget in progress.bar(grid, desc="throughput", unit="config",
                                      progress=not args.no_progress):
            rows = bench_config(d, budget, n_one, n_many, seconds)
            progress.write(format_table(rows) + "\n")
            records.extend(rows)
    machine = common.machine()
    for r in records:
        r.update(machine, quick=args.quick)
    common.write_records(records, args.out, "throughput", args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
