"""What the benchmark scripts share: arguments, data, one BLAS thread, the machine, JSON, tables.

Every script is run as `python benchmarks/NAME.py [--data PATH] [--quick] [--out FILE]`, prints a
table and writes a JSON list of flat records (default `benchmarks/results/NAME.json`, or
`NAME_quick.json` for `--quick`). `--quick` is a smoke run of seconds that needs no downloaded data
(scikit-learn's digits or synthetic streams), which is what CI runs.

"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import platform
import sys
import time
import warnings

import numpy as np

from river_advsvm import data as datasets

BENCHMARKS = pathlib.Path(__file__).resolve().parent
RESULTS = BENCHMARKS / "results"
#: Where `advsvm data fetch` writes the data sets: $ADVSVM_DATA, or ~/.cache/river-advsvm.
DEFAULT_DATA = datasets.default_dir()
#: The paper's mini-batch size.
BATCH = 500
#: The paper's attack radius (L-inf, pixels in [0, 1]).
EPSILON = 8 / 255
#: The benchmarks whose committed results were measured with the last iterate predicting pass
#: this to the model (`averaging=None`); the default predicts with the average of the iterates.
LAST_ITERATE = {"averaging": None}


def add_averaging_option(p: argparse.ArgumentParser) -> None:
    """`--averaging H`, for the benchmarks that can measure the package's default as well as
    the last iterate their committed results hold; `averaging_of(args)` reads it."""
    p.add_argument("--averaging", type=int, default=0, metavar="H",
                   help="the models predict with the average of their iterates over about H "
                        "samples (the package's default: 1000); 0 (default here): the last "
                        "iterate")


def averaging_of(args: argparse.Namespace) -> dict:
    """The model parameter `--averaging` asks for."""
    return {"averaging": args.averaging or None}


def parser(description: str, data: bool = False) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark takes."""
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="tiny smoke run (seconds, no downloaded data needed)")
    p.add_argument("--out", default=None,
                   help="JSON output (default: benchmarks/results/NAME[_quick].json)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar on stderr (there is none when stderr is not a terminal)")
    if data:
        p.add_argument("--data", default=str(DEFAULT_DATA),
                       help="directory holding the data files (written by `advsvm data "
                            "fetch`), or the file itself (default: $ADVSVM_DATA, or "
                            "~/.cache/river-advsvm)")
    return p


def one_blas_thread():
    """A context that runs BLAS on one thread: comparable timings on a shared machine."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1)


# -- data ------------------------------------------------------------------------------------------


def data_file(data: str, name: str) -> pathlib.Path:
    """`name` inside the directory `data`, or `data` itself if it is an .npz file; exits with the
    command that downloads it when it is missing."""
    path = pathlib.Path(data)
    if path.suffix != ".npz":
        path = path / name
    if not path.is_file():
        command = datasets.fetch_command(
            name, None if path.parent == DEFAULT_DATA else path.parent)
        raise SystemExit(
            f"{pathlib.Path(sys.argv[0]).name}: data file {path} not found; download it with: "
            f"{command} (or pass --data with the directory that holds it; --quick runs "
            f"without it)"
        )
    return path


def load_pair(path: pathlib.Path, first: int, second: int, scale: float = 255.0,
              grey: bool = False) -> dict:
    """Two classes of an .npz with uint8 X_train, y_train, X_test, y_test, pixels / `scale`;
    with `grey`, colour images (CIFAR's) as grey ones cropped to 28 x 28 (`grey_crop`).

    Returns X_train, y_train, X_test, y_test, and exact_train / exact_test (all True when the
    file has no such arrays: CIFAR's say which rows are lossless, see DATA.md).
    """
    arrays = np.load(path)
    pair = {}
    for part in ("train", "test"):
        X, y = arrays[f"X_{part}"], arrays[f"y_{part}"]
        mask = (y == first) | (y == second)
        pair[f"X_{part}"] = (grey_crop(X[mask]) if grey else X[mask]) / scale
        pair[f"y_{part}"] = y[mask].astype(int)
        exact = arrays[f"exact_{part}"][mask] if f"exact_{part}" in arrays else None
        pair[f"exact_{part}"] = np.ones(mask.sum(), bool) if exact is None else exact
    return pair


def grey_crop(X: np.ndarray, side: int = 28) -> np.ndarray:
    """Rows of colour images (three planes of s x s pixels: CIFAR's layout) as grey-scale ones
    (ITU-R 601 luma, rounded to whole levels) cropped to their central `side` x `side`: images
    of the shape of MNIST's and of another kind (textures, grey backgrounds, classes that
    overlap), for pairs on which no setting of the package was chosen."""
    s = math.isqrt(X.shape[1] // 3)
    planes = X.reshape(len(X), 3, s, s).astype(np.float64)
    luma = np.rint(0.299 * planes[:, 0] + 0.587 * planes[:, 1] + 0.114 * planes[:, 2])
    start = (s - side) // 2
    return luma[:, start:start + side, start:start + side].reshape(len(X), side * side)


#: Shifts of an image by up to two pixels, none first: each gives MNIST images it has not seen.
SHIFTS = [(0, 0)] + [(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3) if (dy, dx) != (0, 0)]


def shifted(X: np.ndarray, shift: tuple[int, int]) -> np.ndarray:
    """Rows of square images, each moved by `shift` = (down, right) pixels (rolled round: a
    digit's border is 0)."""
    side = math.isqrt(X.shape[1])
    return np.roll(X.reshape(-1, side, side), shift, axis=(1, 2)).reshape(len(X), -1)


def digits_pair(first: int = 1, second: int = 7) -> dict:
    """scikit-learn's digits, two classes, pixels / 16, a stratified 70/30 split (seed 0)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    mask = (y == first) | (y == second)
    X_train, X_test, y_train, y_test = train_test_split(
        X[mask] / 16.0, y[mask], test_size=0.3, random_state=0, stratify=y[mask])
    return {"X_train": X_train, "y_train": y_train, "X_test": X_test, "y_test": y_test,
            "exact_train": np.ones(len(y_train), bool), "exact_test": np.ones(len(y_test), bool)}


# -- the machine -----------------------------------------------------------------------------------


def machine() -> dict:
    """CPU model, cores, RAM and library versions, as flat fields for the records."""
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram_gb = float("nan")
    try:
        with open("/proc/meminfo") as f:
            ram_gb = int(f.readline().split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": model, "cpus": os.cpu_count(), "ram_gb": round(ram_gb, 1),
            "python": sys.version.split()[0], "numpy": np.__version__, "blas_threads": 1}


# -- output ----------------------------------------------------------------------------------------


def _plain(value):
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN
    return value


def machine_line(machine: dict) -> str:
    """Where a result was measured, for the Markdown summaries (fields of `machine()`)."""
    return (f"{machine['cpu']}, {machine['cpus']} cores shared with other jobs, Python "
            f"{machine['python']}, numpy {machine['numpy']}, BLAS pinned to one thread")


#: The columns of a run's table of targets.
TARGET_COLUMNS = [("target", "target", ""), ("value", "measured", ".3f"), ("met", "met", "")]


def save_run(records: list[dict], out: str | None, name: str, quick: bool, markdown) -> None:
    """Write a run: each record gets the machine it ran on, then the records go to JSON and
    `markdown(records, host)` (`host` as `machine()` gives it) to Markdown."""
    host = machine()
    for r in records:
        r.update(host, quick=quick)
    write_records(records, out, name, quick)
    write_markdown(markdown(records, host), out, name, quick)


def write_records(records: list[dict], out: str | None, name: str, quick: bool) -> pathlib.Path:
    """Write flat records as JSON to `out` or `benchmarks/results/NAME[_quick].json`."""
    path = pathlib.Path(out) if out else RESULTS / f"{name}{'_quick' if quick else ''}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    plain = []
    for r in records:
        bad = [k for k, v in r.items() if isinstance(v, (dict, list, tuple))]
        if bad:
            raise ValueError(f"records must be flat; {bad} are not")
        plain.append({k: _plain(v) for k, v in r.items()})
    path.write_text(json.dumps(plain, indent=1) + "\n")
    print(f"wrote {path}")
    return path


def format_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """A fixed-width table: `columns` are (key, header, format spec); missing values print '-'."""
    cells = [[h for _, h, _ in columns]] + table_cells(rows, columns)
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in cells)


def table_cells(rows: list[dict], columns: list[tuple[str, str, str]]) -> list[list[str]]:
    """Each row's values formatted by `columns` ((key, header, format spec)); missing or
    non-finite values are '-'."""
    out = []
    for row in rows:
        line = []
        for key, _, spec in columns:
            value = row.get(key)
            missing = value is None or (isinstance(value, float) and not math.isfinite(value))
            line.append("-" if missing else format(value, spec))
        out.append(line)
    return out


# -- training and scoring --------------------------------------------------------------------------


def train(model, X, y) -> float:
    """One pass of learn_many in batches of BATCH; the seconds it took."""
    start = time.perf_counter()
    for i in range(0, len(X), BATCH):
        model.learn_many(X[i:i + BATCH], y[i:i + BATCH])
    return time.perf_counter() - start


def shuffled_test(data: dict) -> tuple[np.ndarray, np.ndarray]:
    """A pair's test set in an order of its own (seed 0), to be learned as a stream when a cost
    is measured: a test set in class order (CIFAR's, a split of Fashion-MNIST by class) would
    be a run of one label, few samples active, few merges."""
    order = np.random.default_rng(0).permutation(len(data["y_test"]))
    return data["X_test"][order], data["y_test"][order]


def right(model, X, y) -> np.ndarray:
    """Whether each prediction is right (the margin's sign against the positive class)."""
    return (np.asarray(model.decision_many(X)) > 0) == (y == model.classes[-1])


def attack(attack_, model, X, y, show_progress: bool = False):
    """`attack_.run`, without the per-batch warning about samples with no usable gradient (the
    result counts them); with its progress bar if `show_progress` (for the slow attacks)."""
    from river_advsvm.attacks import NoGradientWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoGradientWarning)
        return attack_.run(model, X, y, progress=show_progress)


def pgd_right(model, X, y, epsilon: float = EPSILON, steps: int = 10, norm: str = "linf"):
    """Whether each sample is still classified right under the paper's PGD (`steps` steps of
    epsilon / 4, no random start, L-inf unless `norm` says otherwise), and the attack's
    result."""
    from river_advsvm.attacks import PGD

    result = attack(PGD(epsilon=epsilon, norm=norm, steps=steps), model, X, y)
    return ~result.fooled, result


def predict_seconds(models: dict, X, rounds: int = 5) -> dict:
    """Seconds per sample of each model's `decision_many` over the rows of `X`. The models take
    turns for `rounds` rounds and each keeps its best round: models compared in one call share
    the machine's state (on a shared machine, timings taken minutes apart can differ by 2x)."""
    best = dict.fromkeys(models, math.inf)
    for _ in range(rounds):
        for name, model in models.items():
            start = time.perf_counter()
            model.decision_many(X)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: seconds / max(len(X), 1) for name, seconds in best.items()}


def model_size(model) -> dict:
    """Random features and support vectors a model holds, and for support vectors the budget's
    maintenance so far: merges, removals and the weight degradation `||f_before - f_after||^2`
    (in total and per event), as flat fields."""
    row = {"features": getattr(model, "n_features", 0),
           "support_vectors": getattr(model, "n_support_vectors", 0)}
    maintenance = getattr(model, "budget_maintenance", {})
    if maintenance:
        events = maintenance["merges"] + maintenance["removals"]
        row.update(merges=maintenance["merges"], removals=maintenance["removals"],
                   degradation_total=maintenance["degradation"],
                   degradation_per_merge=maintenance["degradation"] / events if events else 0.0)
    return row


# -- markdown summaries ----------------------------------------------------------------------------


def targets_markdown(records: list[dict], columns=TARGET_COLUMNS) -> list[str]:
    """The lines of a run's targets table ("met" or "not met"), none without targets."""
    goals = [{**r, "met": "met" if r["met"] else "not met"}
             for r in records if r["kind"] == "target"]
    return ["", "**Targets**", "", markdown_table(goals, columns)] if goals else []


def markdown_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """A Markdown table: `columns` are (key, header, format spec), as in `format_table`."""
    lines = ["| " + " | ".join(h for _, h, _ in columns) + " |",
             "|" + "---|" * len(columns)]
    # A '|' inside a cell (a River pipeline's name) would split it: escaped.
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
              for cells in table_cells(rows, columns)]
    return "\n".join(lines)


def write_markdown(text: str, out: str | None, name: str, quick: bool) -> pathlib.Path:
    """Write a Markdown summary next to the JSON: `out` with a .md suffix, or
    `benchmarks/results/NAME[_quick].md`."""
    path = (pathlib.Path(out).with_suffix(".md") if out
            else RESULTS / f"{name}{'_quick' if quick else ''}.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip() + "\n")
    print(f"wrote {path}")
    return path
