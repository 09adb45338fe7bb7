"""Memory over a long synthetic stream, per budget policy: flat after warm-up, or not.

    python benchmarks/memory.py [--quick] [--samples N] [--out FILE]

Each policy learns the same drifting stream (a rotating concept, so that steps stay active
for ever) in batches of 500 drawn on the fly: the stream is never held in memory. At ten
checkpoints it records the process RSS (from /proc, Linux) and the model's own size
(River's `_raw_memory_usage`, which counts numpy buffers). 'grow' is run on a tenth of the
stream: it is unbounded by design and the point is to show the slope.

"""

from __future__ import annotations

import gc
import os
import sys
import time

import numpy as np

import common
from river_advsvm import AdvKernelSVM, progress

BATCH = 500


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def drifting_batches(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for start in range(0, n, BATCH):
        X = rng.random((min(BATCH, n - start), d))
        angle = 6 * np.pi * (start + np.arange(len(X))) / n
        y = np.sum((X[:, :2] - 0.5) * np.stack([np.cos(angle), np.sin(angle)], 1), 1) > 0
        yield X, y ^ (rng.random(len(X)) < 0.05)


def run(policy: str, n: int, d: int, budget: int, show_progress: bool = False) -> list[dict]:
    model = AdvKernelSVM(epsilon=0.05, budget=budget, budget_policy=policy, seed=0)
    checkpoints = set(np.linspace(n // 10, n, 10).astype(int) // BATCH * BATCH)
    records, seen, start = [], 0, time.perf_counter()
    batches = progress.bar(drifting_batches(n, d), total=-(-n // BATCH), desc=policy,
                           unit="batch", progress=show_progress)
    for X, y in batches:
        model.learn_many(X, y)
        seen += len(X)
        if seen in checkpoints:
            gc.collect()
            records.append({"policy": policy, "samples": seen, "d": d, "budget": budget,
                            "rss_mb": rss_bytes() / 2**20,
                            "model_mb": model._raw_memory_usage / 2**20,
                            "features": model.n_features,
                            "seconds": time.perf_counter() - start})
    first, last = records[0], records[-1]
    for r in records:
        r["rss_growth_after_warmup"] = r["rss_mb"] / first["rss_mb"] - 1
        r["model_growth_after_warmup"] = r["model_mb"] / first["model_mb"] - 1
    progress.write(
        f"{policy:13s} {last['samples']:>9,d} samples  features {last['features']:>6,d}  "
        f"RSS {first['rss_mb']:7.1f} -> {last['rss_mb']:7.1f} MB  "
        f"model {first['model_mb']:6.2f} -> {last['model_mb']:6.2f} MB  "
        f"({last['model_growth_after_warmup']:+.1%})  {last['seconds']:.0f} s")
    return records


def main(argv=None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else args.samples
    d, budget = 16, 1024
    records = []
    with common.one_blas_thread():
        show_progress = not args.no_progress
        for policy in ("compact", "compact_slot", "truncate"):
            records += run(policy, n, d, budget, show_progress)
        records += run("grow", max(n // 10, 10 * BATCH), d, budget, show_progress)
    machine = common.machine()
    for r in records:
        r.update(machine, quick=args.quick)
    common.write_records(records, args.out, "memory", args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
