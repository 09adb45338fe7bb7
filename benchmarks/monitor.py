"""What the RobustnessMonitor costs a test-then-train loop, in samples per second.

    python benchmarks/monitor.py [--quick] [--out FILE] [--rounds N]

For input widths 64 (digits) and 784 (MNIST), on a learnable synthetic stream in [0, 1]^d, it
times the loop `predict_one; learn_one` (AdvKernelSVM, B = 1024, natural) alone and with a
monitor called before each `learn_one`:

- `monitor, no attack`: the monitor's bookkeeping only (rolling metrics, two ADWINs), the
  prediction passed in as `y_pred` (the loop has it already);
- `monitor, no attack, own predict`: the same, but the monitor predicts again itself;
- `monitor, PGD-10 on 10%`: the default sample rate, PGD-10 at L2 radius 1 plus a certificate
  on each sampled sample (skipped when the clean prediction is already wrong).

Every number comes with its ratio to the bare loop of the same width. BLAS is pinned to one
thread, as in the demo.

"""

from __future__ import annotations

import json
import time

import numpy as np
from threadpoolctl import threadpool_limits

import common
from river_advsvm import AdvKernelSVM, progress
from river_advsvm.attacks import PGD
from river_advsvm.monitor import RobustnessMonitor

NEVER = 1 << 62  # a sample rate of "every 2^62-th sample": the monitor never attacks


def make_stream(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    w = rng.normal(size=d)
    y = (X @ w > np.median(X @ w)).tolist()
    return [(dict(enumerate(row)), label) for row, label in zip(X.tolist(), y)]


def run(stream, monitor_for, pass_prediction: bool) -> tuple[float, dict]:
    model = AdvKernelSVM(seed=0, averaging=None)  # (its results: the last iterate predicting)
    monitor = monitor_for(model)
    start = time.perf_counter()
    for x, y in stream:
        y_pred = model.predict_one(x)
        if monitor is not None:
            monitor.update(x, y, y_pred=y_pred if pass_prediction else None)
        model.learn_one(x, y)
    seconds = time.perf_counter() - start
    extra = {}
    if monitor is not None:
        extra = {"attacked": monitor.n_sampled, "attack_seconds": round(monitor.attack_seconds, 3)}
    return len(stream) / seconds, extra


SETTINGS = {
    "bare loop": (lambda model: None, True),
    "monitor, no attack": (lambda model: RobustnessMonitor(model, sample_rate=NEVER), True),
    "monitor, no attack, own predict": (
        lambda model: RobustnessMonitor(model, sample_rate=NEVER), False),
    "monitor, PGD-10 on 10%": (
        lambda model: RobustnessMonitor(model, attack=PGD(epsilon=1.0, norm="l2"),
                                        sample_rate=0.1), True),
}


COLUMNS = [("d", "inputs", ""), ("setting", "loop", ""), ("samples_per_s", "samples/s", ",.0f"),
           ("ratio_to_bare", "ratio to the bare loop", ".3f"),
           ("ratio_range", "(runs)", "")]


def markdown(records: list[dict], host: dict) -> str:
    return "\n".join([
        "# What the robustness monitor costs (`benchmarks/monitor.py`)", "",
        common.machine_line(host) + ".", "",
        "Samples per second of `predict_one; monitor.update; learn_one` (`AdvKernelSVM`, B = 1024, "
        "the last iterate predicting) on a learnable synthetic stream: the median of "
        f"{records[0]['rounds']} runs interleaved with the bare loop's; the ratio is the median "
        "of each run's ratio to the bare loop's run next to it.", "",
        common.markdown_table(records, COLUMNS)])


def main():
    parser = common.parser(__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of every setting, interleaved (default 3)")
    args = parser.parse_args()
    sizes = {64: 300, 784: 200} if args.quick else {64: 6000, 784: 3000}
    rounds = 1 if args.quick else args.rounds
    records = []
    bar = progress.bar(total=len(sizes) * len(SETTINGS) * rounds, desc="monitor cost",
                       unit="run", progress=not args.no_progress)
    for d, n in sizes.items():
        stream = make_stream(n, d)
        speeds = {setting: [] for setting in SETTINGS}
        extras = {}
        for _ in range(rounds):  # (interleaved: each round runs every setting once)
            for setting, (monitor_for, pass_prediction) in SETTINGS.items():
                samples_per_s, extras[setting] = run(stream, monitor_for, pass_prediction)
                speeds[setting].append(samples_per_s)
                bar.update()
        bare = speeds["bare loop"]
        for setting, runs in speeds.items():
            ratios = [s / b for s, b in zip(runs, bare)]
            records.append({"d": d, "samples": n, "setting": setting, "rounds": rounds,
                            "samples_per_s": round(float(np.median(runs)), 1),
                            "ratio_to_bare": round(float(np.median(ratios)), 3),
                            "ratio_range": f"{min(ratios):.2f}-{max(ratios):.2f}",
                            **extras[setting]})
            progress.write(json.dumps(records[-1]))
    bar.close()
    common.save_run(records, args.out, "monitor", args.quick, markdown)


if __name__ == "__main__":
    with threadpool_limits(1):
        main()
