"""The main job: natural vs adversarially trained AdvKernelSVM on a stream of digits."""

from __future__ import annotations

import time

import numpy as np
from river import metrics

from river_advsvm.svm import AdvKernelSVM

__all__ = ["load_digits_pair", "run_demo"]


def load_digits_pair(first: int = 1, second: int = 7, seed: int = 0):
    """scikit-learn's bundled digits for two classes, pixels / 16, shuffled with `seed`."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    mask = (y == first) | (y == second)
    X, y = X[mask] / 16.0, y[mask]
    order = np.random.default_rng(seed).permutation(len(y))
    return X[order], y[order]


def run_demo(pair: tuple[int, int] = (1, 7), epsilon: float = 0.3, seed: int = 0) -> list[dict]:
    """One pass of progressive validation (test, then train) per model; returns table rows."""
    from tqdm import tqdm

    X, y = load_digits_pair(*pair, seed=seed)
    models = {
        "natural (epsilon=0)": AdvKernelSVM(seed=seed),
        f"adversarial (L2 epsilon={epsilon})": AdvKernelSVM(epsilon=epsilon, seed=seed),
    }
    rows = []
    for name, model in models.items():
        accuracy = metrics.Accuracy()
        start = time.perf_counter()
        for xi, yi in tqdm(list(zip(X.tolist(), y.tolist())), desc=name, unit=" samples"):
            x = dict(enumerate(xi))
            accuracy.update(yi, model.predict_one(x))
            model.learn_one(x, yi)
        seconds = time.perf_counter() - start
        rows.append(
            {
                "model": name,
                "samples": len(y),
                "progressive accuracy": accuracy.get(),
                "samples/s": len(y) / seconds,
            }
        )
    return rows


def format_table(rows: list[dict]) -> str:
    """A plain-text table, numbers right-aligned."""
    columns = list(rows[0])
    cells = [
        [f"{v:.4f}" if isinstance(v, float) and v < 10 else
         f"{v:,.0f}" if isinstance(v, (int, float)) else str(v) for v in row.values()]
        for row in rows
    ]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for r in cells:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                               for i, (v, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)
