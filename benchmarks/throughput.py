"""Samples per second of AdvKernelSVM next to what numpy does on the same arithmetic, in one run.

    python benchmarks/throughput.py [--quick] [--data PATH] [--out FILE]

Every number is measured with BLAS on one thread, in CPU seconds of this process (so that time
the scheduler gives to other jobs on a shared machine does not count), and every rate is
judged by its ratio to a reference measured in the same process, interleaved with it: each
system and each reference runs a short chunk per round, for several rounds, and its rate is
the best round's (the median is recorded too). The references:

- `hand loop`: the random-feature step written by hand in float32 numpy, one sample at a time
  (`z = x W + u`, `cos z`, the margin, the coefficient update and its norm), on float32 rows
  prepared in advance: no dicts, no validation. The reference of `learn_one`; its prediction
  half (`z`, `cos`, the margin) is the reference of `predict_one`.
- `batch limit`: numpy's float32 `cos(X W + u)` for a batch of 500 rows, one matrix product and
  nothing sequential. The reference of `learn_many(500)` and `decision_then_learn_many(500)`.

AdvKernelSVM learns strictly row by row: a `learn_one` loop and any batching of `learn_many`
give the same model bit for bit, which is what exactly-once replay across crashes needs. BLAS
rounds a row's product differently by the shape of the batch it is in, so learning uses one
matrix-vector product per row, and a matrix-vector product streams the whole weight matrix
for one row. The batch limit is therefore out of reach of learning by construction; the
tables say by how much, and `hand loop` is the per-row ceiling.

Systems: AdvKernelSVM with random features (`compact`) in float32 and float64 and, when the
installed version has them, with support vectors (`merge`, float32, trained to its steady state
first; the table gives how many vectors it holds); scikit-learn's `RBFSampler` +
`SGDClassifier(loss="hinge").partial_fit`; River's `RBFSampler | LogisticRegression` (d x B
dict entries per sample: a short capped run, skipped past 4 million).

The support-vector model (the default) at full budget has its own reference, `HandSupportStep`:
the support-vector step by hand in float32 (squared distances from cached norms and one
matrix-vector product, `exp`, the margin, the update; and the same with BSGD's merge), on MNIST
8 vs 9 and on a noisy stream where almost every sample merges, with the merges per sample.
`--support-only` runs this part alone, with two more: the warm-up of `gamma='scale'` against
the same samples with a numeric gamma, and the service's model call (the default model's
`predict_proba_then_learn_many` on runs of messages, in process) in messages per second.

Also measured: one pass of `learn_many(500)` over MNIST 1 vs 7 (`--data`; `--quick` uses
scikit-learn's digits) with its test accuracy; where the time of `learn_one` and `predict_one`
goes at d = 784 (component timings and cProfile); candidate dict -> array conversions, each
checked to refuse strings, None, nested, Decimal and non-finite values; and whether BLAS gives a
row the same bits in batches of every size (it does not: the reason learning is per row).

"""

from __future__ import annotations

import array
import collections
import cProfile
import decimal
import importlib.util
import itertools
import math
import pathlib
import pstats
import statistics
import struct
import sys
import time
import warnings

import numpy as np

import common
from river_advsvm import AdvKernelSVM, inputs, progress, support_budget
from river_advsvm.collapse import CollapseWarning
from river_advsvm.svm import ACTIVE_WINDOW, FLAT_BIAS_SHARE

BATCH = common.BATCH
#: CPU seconds of this process: time the scheduler gives to other jobs on a shared machine is
#: not counted (BLAS runs on this one thread).
clock = time.process_time
SQRT2 = math.sqrt(2.0)
#: The configuration the targets are judged at.
TARGET_D, TARGET_BUDGET = 784, 1024
TARGETS = {"learn_one": 0.5, "predict_one": 0.6, "learn_many": 0.8}
MNIST_SECONDS = 0.4
#: Feature dicts held in memory per configuration (cycled): about 1.5 million entries.
DICT_ENTRIES = 1_500_000
#: River's pipeline builds d x B dict entries per sample; past this it is not run.
RIVER_MAX_ENTRIES = 4_000_000


def has_support_vectors() -> bool:
    """Whether the installed river_advsvm has the support-vector representation."""
    return importlib.util.find_spec("river_advsvm.support") is not None


def river_dicts(X: np.ndarray) -> list[dict]:
    """Rows as feature dicts the way `river.stream.iter_array` makes them: one list of names
    shared by every row, so rows share their key objects."""
    names = list(range(X.shape[1]))
    return [dict(zip(names, row)) for row in X.tolist()]


def make_data(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    w = rng.normal(size=d)
    y = X @ w > np.median(X @ w)
    return X, y


# -- timing ---------------------------------------------------------------------------------------


class Rounds:
    """Interleaved timing: each runner gets one chunk of calls per round; its rate is the best
    round's, the median is kept too."""

    def __init__(self, rounds: int, chunk_seconds: float):
        self.rounds = rounds
        self.chunk_seconds = chunk_seconds
        self.runners: dict = {}

    def add(self, key, call, samples_per_call: int = 1, prepare=None) -> None:
        """`call()` processes `samples_per_call` samples; `prepare(k)`, if given, readies the
        inputs of the next `k` calls before they are timed."""
        self.runners[key] = (call, samples_per_call, prepare)

    def run(self) -> dict:
        """`{key: (best samples/s, median samples/s)}`."""
        calls = {}
        for key, (call, _, prepare) in self.runners.items():
            call()  # first-touch allocations, input registration
            n, start = 0, clock()
            while n < 2 or clock() - start < self.chunk_seconds / 4:
                call()
                n += 1
            seconds = clock() - start
            calls[key] = max(1, round(self.chunk_seconds * n / seconds))
        rates: dict = {key: [] for key in self.runners}
        for _ in range(self.rounds):
            for key, (call, per_call, prepare) in self.runners.items():
                k = calls[key]
                if prepare is not None:
                    prepare(k)
                start = clock()
                for _ in range(k):
                    call()
                seconds = clock() - start
                rates[key].append(k * per_call / seconds)
        return {key: (max(r), statistics.median(r)) for key, r in rates.items()}


def cycling(items):
    """A function returning the next item of `items`, round and round."""
    return itertools.cycle(items).__next__


class FreshRows:
    """Rows of a stream a learner has not seen, for ever: a sample a model still holds comes
    back as a change of its coefficient rather than a new vector (no merge), so cycling over a
    pool times a lighter step than a stream's. One per learner (the runners of one model share
    it). Images (`d` a square) come back shifted, each pass over the pool by its own shift
    (none, then each of the 24 by up to two pixels); past those, `SystemExit` unless
    `repeat_ok` (a quick run). Other streams are drawn anew (`draw(n, seed)`)."""

    def __init__(self, X, y, draw=None, repeat_ok: bool = False):
        self.X, self.y, self.draw, self.repeat_ok = X, y, draw, repeat_ok
        self.position, self.passes = 0, 0

    def take(self, n: int):
        """The next `n` rows and labels."""
        if self.draw is not None:
            self.passes += 1
            return self.draw(n, 1000 + self.passes)
        X, y, out_X, out_y = self.X, self.y, [], []
        while n > 0:
            if self.passes >= len(common.SHIFTS) and not self.repeat_ok:
                raise SystemExit(f"the pool of {len(X)} samples ran out of unseen ones (every "
                                 "shift used): fewer rounds or shorter chunks")
            take = min(n, len(X) - self.position)
            rows = X[self.position:self.position + take]
            shift = common.SHIFTS[self.passes % len(common.SHIFTS)]
            if shift != (0, 0):
                rows = common.shifted(rows, shift)
            out_X.append(rows)
            out_y.append(y[self.position:self.position + take])
            self.position += take
            n -= take
            if self.position == len(X):
                self.position, self.passes = 0, self.passes + 1
        return np.concatenate(out_X), np.concatenate(out_y)


class FreshInputs:
    """One runner's inputs, from its learner's `FreshRows`, in the form `make(X, y)` gives (a
    list, one per call). `prepare(k)` (`Rounds.add`) makes the next `k` calls' before they
    are timed, and lets go of the ones used in the round before (freeing a dict of 784 floats
    costs about 15 µs, which the timed calls would otherwise pay); `next_call()` returns them
    in turn. A call with none prepared makes its own (the rate's calibration only)."""

    def __init__(self, rows: FreshRows, make, per_call: int = 1):
        self.rows, self.make, self.per_call = rows, make, per_call
        self.ready: collections.deque = collections.deque()
        self.used: list = []

    def prepare(self, k: int) -> None:
        self.used.clear()
        self.ready.extend(self.make(*self.rows.take(k * self.per_call)))

    def next_call(self):
        if not self.ready:
            self.ready.extend(self.make(*self.rows.take(self.per_call)))
        item = self.ready.popleft()
        self.used.append(item)
        return item


# -- the references -------------------------------------------------------------------------------


class HandLoop:
    """The `compact` random-feature step in float32 numpy, with nothing around it.

    Borrows the float32 model's own weights (rows in the order of the inputs 0..d-1), so it
    computes the same function with the same arithmetic: `W` and `x` float32, coefficients
    float64 as in the model.
    """

    def __init__(self, model: AdvKernelSVM, d: int):
        store = model._store
        rows = model._index.positions(list(range(d)))
        self.W = np.ascontiguousarray(store.omega[rows], dtype=np.float32)
        self.u = store.phase[: store.size].astype(np.float32)
        self.B = self.W.shape[1]
        self.coef = np.zeros(self.B)
        self.bias, self.norm = 0.0, 0.0
        self.eta, self.eta_b = model.step_size, model.bias_step_size
        self.rho = 1.0 - model.step_size * model.regularization
        self.share = model._active_share

    def learn(self, x: np.ndarray, y: float) -> None:
        z = x @ self.W
        z += self.u
        c = np.cos(z)
        g = SQRT2 * float(self.coef @ c) + self.bias
        self.coef *= self.rho
        active = 1.0 - y * g > 0.0
        self.share += (active - self.share) / ACTIVE_WINDOW
        if active:
            self.coef += (SQRT2 * self.eta * y / self.B) * c
            self.norm = math.sqrt(self.B) * math.sqrt(float(self.coef @ self.coef))
            self.bias += self.eta_b * y * min(1.0, (1.0 - self.share) / (1.0 - FLAT_BIAS_SHARE))

    def predict(self, x: np.ndarray) -> bool:
        z = x @ self.W
        z += self.u
        return SQRT2 * float(self.coef @ np.cos(z)) + self.bias > 0.0

    def batch_limit(self, X: np.ndarray) -> np.ndarray:
        Z = X @ self.W
        Z += self.u
        return np.cos(Z, out=Z)


def start_hand_loop(d: int, budget: int, gamma: float) -> HandLoop:
    model = AdvKernelSVM(gamma=gamma, budget=budget, budget_policy="compact", seed=0,
                         dtype="float32", **common.LAST_ITERATE)
    model.learn_one(dict.fromkeys(range(d), 1.0), True)  # every input registered
    return HandLoop(model, d)


# -- the support-vector step by hand --------------------------------------------------------------


class HandSupportStep:
    """The support-vector step at full budget in float32 numpy, with nothing around it.

    Starts from a copy of a model's vectors and coefficients (columns in the order of the inputs
    0..d-1), and does what the minimal step must: squared distances from cached squared norms
    and one matrix-vector product, `exp`, the margin, the shrink (a global scale) and, when the
    margin is violated, the new vector. With `merge`, a vector over the budget is merged as
    BSGD does: the smallest coefficient `m` into the same-sign partner of smallest weight
    degradation among its 8 nearest, at the best point of the segment (the package's
    `merge_points`, vectorised Newton); `m`'s squared distances are the new vector's own when
    `m` is the new vector, else one more matrix-vector product. No norm is tracked (the model
    tracks `||f||` exactly, for its adversarial term), nothing is validated.
    """

    def __init__(self, model: AdvKernelSVM, d: int, merge: bool):
        store = model._store
        columns = model._index.positions(list(range(d)))
        budget = store.budget
        self.S = np.zeros((budget + 1, d), dtype=np.float32)
        self.size = store.size
        self.S[: self.size] = store.vectors[:, columns]
        self.norms = np.zeros(budget + 1)
        self.norms[: self.size] = np.square(self.S[: self.size], dtype=np.float64).sum(axis=1)
        self.a = np.zeros(budget + 1)
        self.a[: self.size] = store.coefficients
        self.scale, self.bias = 1.0, model._bias
        self.gamma, self.budget, self.merge = store.gamma, budget, merge
        self.eta, self.eta_b = model.step_size, model.bias_step_size
        self.rho = 1.0 - model.step_size * model.regularization
        self.share = model._active_share
        self.n_merges = 0

    @classmethod
    def of_average(cls, model: AdvKernelSVM, d: int) -> HandSupportStep:
        """The hand predict of what a model with `averaging` predicts with: its vectors with
        their averaged coefficients and the vectors its average keeps (the same rows as the
        model's `predict_one`)."""
        hand = cls(model, d, merge=False)
        average = model._store.averaged
        whole = average.expansion()
        columns = model._index.positions(list(range(d)))
        hand.size = whole.size
        hand.S = np.ascontiguousarray(whole.vectors[:, columns], dtype=np.float32)
        hand.norms = np.square(hand.S, dtype=np.float64).sum(axis=1)
        hand.a = whole.coefficients
        hand.scale, hand.bias = 1.0, average.bias
        return hand

    def _exponents(self, x: np.ndarray, xx: float) -> np.ndarray:
        n = self.size
        e = (self.S[:n] @ x).astype(np.float64)
        e *= -2.0
        e += self.norms[:n]
        e += xx
        np.maximum(e, 0.0, out=e)
        e *= self.gamma
        return e

    def predict(self, x: np.ndarray) -> bool:
        e = self._exponents(x, float(np.dot(x, x)))
        return self.scale * float(np.exp(-e, out=e) @ self.a[: self.size]) + self.bias > 0.0

    def learn(self, x: np.ndarray, y: float) -> None:
        xx = float(np.dot(x, x))
        e = self._exponents(x, xx)
        g = self.scale * float(np.exp(-e) @ self.a[: self.size]) + self.bias
        self.scale *= self.rho
        if self.scale < 1e-60:
            self.a[: self.size] *= self.scale
            self.scale = 1.0
        active = 1.0 - y * g > 0.0
        self.share += (active - self.share) / ACTIVE_WINDOW
        if active:
            n = self.size
            self.S[n], self.norms[n], self.a[n] = x, xx, self.eta * y / self.scale
            self.size += 1
            self.bias += self.eta_b * y * min(1.0, (1.0 - self.share) / (1.0 - FLAT_BIAS_SHARE))
            if self.size > self.budget:
                if self.merge:
                    self._merge(e)
                else:
                    self._drop(int(np.abs(self.a[: self.size]).argmin()))

    def _merge(self, e_new: np.ndarray) -> None:
        size = self.size
        a = self.a[:size]
        m = int(np.abs(a).argmin())
        if m == size - 1:
            row = np.append(e_new, 0.0)
        else:
            row = self._exponents(self.S[m], self.norms[m])
            row[m] = 0.0
        same = a * a[m] > 0.0
        same[m] = False
        partners = np.flatnonzero(same)
        if not partners.size:
            self._drop(m)
            return
        if partners.size > 8:
            partners = partners[np.argpartition(row[partners], 8)[:8]]
        A, B, D = abs(a[m]), np.abs(a[partners]), row[partners]
        h, p = support_budget.merge_points("rbf", A, B, D)
        best = int((A * A + B * B + 2.0 * A * B * np.exp(-D) - p * p).argmin())
        n, h = int(partners[best]), float(h[best])
        z = h * self.S[m].astype(np.float64) + (1.0 - h) * self.S[n]
        self.S[n] = z
        self.norms[n] = np.square(self.S[n], dtype=np.float64).sum()
        self.a[n] = math.copysign(float(p[best]), a[m])
        self.n_merges += 1
        self._drop(m)

    def _drop(self, i: int) -> None:
        last = self.size - 1
        self.S[i], self.norms[i], self.a[i] = self.S[last], self.norms[last], self.a[last]
        self.size = last


def noisy_stream(n: int, d: int, seed: int = 0):
    """Uniform pixels, the label from 20 of them: almost every sample violates the margin."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    return X, X[:, :20].sum(axis=1) > 10.0


def fresh_draw(name: str, d: int):
    """`FreshRows`' `draw` for a stream of `support_streams`: new rows of the noisy stream; the
    others' (images) come back shifted."""
    return (lambda n, seed: noisy_stream(n, d, seed)) if name == "noisy" else None


def support_streams(data: str | None, quick: bool) -> dict:
    """Name -> (X, y) at d = 784 (smaller with `quick`): MNIST 8 vs 9, shuffled, and the noisy
    stream."""
    d = 64 if quick else TARGET_D
    streams = {"noisy": noisy_stream(2000 if quick else 12_000, d)}
    if quick:
        pair = common.digits_pair(8, 9)
        name = "digits 8 vs 9"
    else:
        pair = common.load_pair(common.data_file(data, "mnist.npz"), 8, 9)
        name = "MNIST 8 vs 9"
    order = np.random.default_rng(0).permutation(len(pair["X_train"]))
    streams[name] = (pair["X_train"][order], pair["y_train"][order])
    return streams


def support_step(streams: dict, budget: int, rounds: int, chunk: float,
                 prefill_seconds: float) -> list:
    """AdvKernelSVM ('merge', float32, defaults otherwise: predicting with the average of its
    iterates) at full budget against the hand support-vector step, on each stream: learn_one
    (dicts), learn_many (rows, batches of 100) against the minimal step, each learner on
    samples it has not seen (`FreshRows`), predict_one (dicts)
    against the hand predict over the same rows (the vectors and those the average keeps; and
    over the vectors alone); merges per learned sample of each. The same model predicting with
    its last iterate (`averaging=None`, learning the same samples) beside it, in the same
    rounds."""
    records = []
    for name, (X, y) in streams.items():
        d = X.shape[1]
        # What gamma='scale' picks for inputs of one range: twice scikit-learn's 'scale'.
        gamma = 2.0 / (d * float(X.var()))
        model = AdvKernelSVM(gamma=gamma, budget=budget, budget_policy="merge",
                             dtype="float32", seed=0)
        last = AdvKernelSVM(gamma=gamma, budget=budget, budget_policy="merge",
                            dtype="float32", seed=0, averaging=None)
        split = len(X) * 3 // 4  # the model fills its budget on the first part
        prefill(model, X[:split], y[:split], 8 * split, prefill_seconds)
        prefill(last, X[:split], y[:split], model.n_learned, math.inf)
        if model.n_support_vectors < budget:
            raise SystemExit(f"{name}: the budget did not fill while prefilling")
        X_run, y_run = X[split:], y[split:]
        X32 = X_run.astype(np.float32)
        minimal = HandSupportStep(model, d, merge=False)
        merging = HandSupportStep(model, d, merge=True)
        averaged = HandSupportStep.of_average(model, d)
        positive = y.max()
        draw = fresh_draw(name, d)

        # Every learner gets samples of the stream it has not seen (`FreshRows`, one per
        # learner: `learn_one` and `learn_many` of a model share its): rows of float32 for the
        # hand steps, dicts for `learn_one`, batches for `learn_many`.
        quick = len(X_run) < 1000
        rows_of = {learner: FreshRows(X_run, y_run, draw, repeat_ok=quick)
                   for learner in ("minimal", "merging", "model", "last")}

        def signed_rows(X, y):
            return list(zip(X.astype(np.float32), np.where(y == positive, 1.0, -1.0).tolist()))

        def labelled_dicts(X, y):
            return list(zip(river_dicts(X), y.tolist()))

        batch = 100 if len(X_run) >= 400 else len(X_run) // 4

        def batches_of(X, y):
            return [(X[i:i + batch], y[i:i + batch]) for i in range(0, len(X), batch)]

        dicts = river_dicts(X_run[: len(X_run) // 2])  # (predicting: the same pool, cycled)
        samples = {"learn_one": 0, "learn_many": 0, "hand merge": 0}
        merges = dict.fromkeys(samples, 0)

        def counted(key, call, n, merges_of):
            def run():
                before = merges_of()
                call()
                samples[key] += n
                merges[key] += merges_of() - before
            return run

        store_merges = lambda: model._store.n_merges  # noqa: E731
        bench = Rounds(rounds, chunk)
        for key, learner, counter, make, per_call, call, merges_of in [
            ("hand step", "minimal", None, signed_rows, 1, lambda s: minimal.learn(*s), None),
            ("hand step with merge", "merging", "hand merge", signed_rows, 1,
             lambda s: merging.learn(*s), lambda: merging.n_merges),
            ("learn_one", "model", "learn_one", labelled_dicts, 1,
             lambda s: model.learn_one(*s), store_merges),
            ("learn_many", "model", "learn_many", batches_of, batch,
             lambda s: model.learn_many(*s), store_merges),
            ("learn_one, last iterate", "last", None, labelled_dicts, 1,
             lambda s: last.learn_one(*s), None),
            ("learn_many, last iterate", "last", None, batches_of, batch,
             lambda s: last.learn_many(*s), None)]:
            source = FreshInputs(rows_of[learner], make, per_call)

            def run(call=call, source=source):
                call(source.next_call())
            if counter is not None:
                run = counted(counter, run, per_call, merges_of)
            bench.add(key, run, per_call, source.prepare)
        bench.add("hand predict", lambda it=cycling(list(X32)): minimal.predict(it()))
        bench.add("predict_one, last iterate", lambda it=cycling(dicts): last.predict_one(it()))
        bench.add("hand predict (average)",
                  lambda it=cycling(list(X32)): averaged.predict(it()))
        bench.add("predict_one", lambda it=cycling(dicts): model.predict_one(it()))
        rates = bench.run()
        reference = {"hand step with merge": "hand step", "learn_one": "hand step",
                     "learn_many": "hand step", "hand predict (average)": "hand predict",
                     "predict_one": "hand predict (average)",
                     "learn_one, last iterate": "hand step",
                     "learn_many, last iterate": "hand step",
                     "predict_one, last iterate": "hand predict"}
        per_sample = {"hand step with merge": "hand merge", "learn_one": "learn_one",
                      "learn_many": "learn_many"}
        for key, (best, median) in rates.items():
            record = {"kind": "support_step", "data": name, "d": d, "budget": budget,
                      "mode": key, "samples_per_s": best, "samples_per_s_median": median,
                      "us_per_sample": 1e6 / best, "n_support_vectors": model.n_support_vectors,
                      "averaged_rows": averaged.size}
            if key in reference:
                ref = rates[reference[key]]
                record.update(reference=reference[key], ratio=best / ref[0],
                              ratio_median=median / ref[1])
            if key in per_sample and samples[per_sample[key]]:
                record["merges_per_sample"] = merges[per_sample[key]] / samples[per_sample[key]]
            records.append(record)
    return records


SUPPORT_TARGETS = {"learn_one": 0.5, "learn_many": 0.7, "predict_one": 0.7}
#: gamma='scale' over its warm-up costs at most this many times the same samples with a
#: numeric gamma; the service's model path handles at least this many messages per second.
WARM_UP_TARGET, SERVE_TARGET = 1.5, 4000.0
#: The run of messages the service's model call gets at once, in `serve_path`.
SERVE_RUN = 100


def warm_up_cost(streams: dict, rounds: int, chunk: float) -> list:
    """gamma='scale' against a numeric gamma (what the support step uses) over the first
    `warm_up` samples of each stream, as dicts, a fresh model per pass: `learn_one` alone, and
    `predict_one` then `learn_one` (progressive validation, where the warm-up's vote predicts).
    Both models have learned every sample at the end of a pass (the held ones are learned when
    the warm-up ends)."""
    records = []
    for name, (X, y) in streams.items():
        d = X.shape[1]
        gamma = 2.0 / (d * float(X.var()))
        n = AdvKernelSVM().warm_up
        dicts, labels = river_dicts(X[:n]), y[:n].tolist()

        def one_pass(g, predict):
            def run():
                model = AdvKernelSVM(gamma=g, seed=0)
                for x, label in zip(dicts, labels):
                    if predict:
                        model.predict_one(x)
                    model.learn_one(x, label)
            return run

        modes = {False: "learn_one", True: "predict_one + learn_one"}
        bench = Rounds(rounds, chunk)
        for predict, mode in modes.items():
            bench.add((mode, "scale"), one_pass("scale", predict), n)
            bench.add((mode, "numeric"), one_pass(gamma, predict), n)
        rates = bench.run()
        for mode in modes.values():
            (scale, scale_median), (numeric, numeric_median) = (rates[(mode, "scale")],
                                                                rates[(mode, "numeric")])
            records.append({"kind": "warm_up", "data": name, "d": d, "samples": n, "mode": mode,
                            "us_per_sample": 1e6 / scale, "us_per_sample_numeric": 1e6 / numeric,
                            "cost_ratio": numeric / scale,
                            "cost_ratio_median": numeric_median / scale_median})
    return records


def serve_path(X: np.ndarray, y: np.ndarray, name: str, rounds: int, chunk: float,
               prefill_seconds: float, budget: int = 1024) -> list:
    """What `advsvm serve` asks of the model per message, in process: the default model
    (`AdvKernelSVM(seed=0)`: gamma='scale', budget 1,024, merge, float32, averaging 1,000) at
    full budget, and
    `predict_proba_then_learn_many` on runs of `SERVE_RUN` rows of floats, as
    `streams.model_calls` makes them for messages that are arrays. No broker, no JSON, no
    outputs: a bound on the service's rate with one worker, not the rate itself."""
    # (budget: the default, but in a quick run)
    model = AdvKernelSVM(seed=0, budget=budget)
    split = len(X) * 3 // 4
    prefill(model, X[:split], y[:split], 8 * split, prefill_seconds)
    if model.n_support_vectors < model.budget:
        raise SystemExit(f"{name}: the default model's budget did not fill while prefilling")
    def runs(X, y):
        return [(X[i:i + SERVE_RUN], y[i:i + SERVE_RUN].tolist())
                for i in range(0, len(X), SERVE_RUN)]

    # Messages it has not seen, as a stream's (see `FreshRows`).
    rows = FreshRows(X[split:], y[split:], fresh_draw(name, X.shape[1]),
                     repeat_ok=len(X) - split < 1000)
    source = FreshInputs(rows, runs, SERVE_RUN)
    bench = Rounds(rounds, chunk)
    bench.add("predict_proba_then_learn_many",
              lambda: model.predict_proba_then_learn_many(*source.next_call()), SERVE_RUN,
              source.prepare)
    best, median = bench.run()["predict_proba_then_learn_many"]
    return [{"kind": "serve_path", "data": name, "d": X.shape[1], "budget": model.budget,
             "run": SERVE_RUN, "messages_per_s": best, "messages_per_s_median": median,
             "us_per_message": 1e6 / best, "n_support_vectors": model.n_support_vectors}]
SUPPORT_COLUMNS = [("data", "data", ""), ("mode", "mode", ""), ("us_per_sample", "us", ".1f"),
                   ("ratio", "ratio", ".3f"), ("ratio_median", "(median)", ".3f"),
                   ("reference", "reference", ""), ("merges_per_sample", "merges/sample", ".3f")]


# -- the grid -------------------------------------------------------------------------------------


def prefill(model, X, y, samples: int, seconds: float) -> None:
    """Learn batches of `X` (round and round) until `samples` or `seconds`: the steady state
    of a support-vector model, whose cost grows with the vectors it holds."""
    start, i = time.perf_counter(), 0
    while model.n_learned < samples and time.perf_counter() - start < seconds:
        rows = slice(i % len(X), i % len(X) + BATCH)
        model.learn_many(X[rows], y[rows])
        i += BATCH


def bench_config(d: int, budget: int, rounds: int, chunk: float, prefill_seconds: float) -> list:
    n_pool = 4 * BATCH
    X, y = make_data(n_pool, d)
    X32 = X.astype(np.float32)
    gamma = 1.0 / (d * float(X.var()))
    n_dicts = max(50, min(n_pool, DICT_ENTRIES // d))
    dicts = river_dicts(X[:n_dicts])
    labels = y.tolist()
    signs = np.where(y, 1.0, -1.0).tolist()
    batches = [(X[i:i + BATCH], y[i:i + BATCH]) for i in range(0, n_pool, BATCH)]
    bench = Rounds(rounds, chunk)

    hand = start_hand_loop(d, budget, gamma)
    rows32 = list(X32)
    bench.add(("hand loop", "float32", "learn_one"),
              lambda it=cycling(list(zip(rows32, signs))): hand.learn(*it()))
    bench.add(("hand loop", "float32", "predict_one"),
              lambda it=cycling(rows32): hand.predict(it()))
    bench.add(("batch limit", "float32", "batch"),
              lambda it=cycling([X32[i:i + BATCH] for i in range(0, n_pool, BATCH)]):
              hand.batch_limit(it()), BATCH)

    models = {}
    systems = [("river-advsvm", "compact", "float32"), ("river-advsvm", "compact", "float64")]
    if has_support_vectors():
        systems.append(("river-advsvm", "merge", "float32"))
    for system, policy, dtype in systems:
        key = (f"{system} {policy}", dtype)
        model = models[key] = AdvKernelSVM(gamma=gamma, budget=budget, budget_policy=policy,
                                           dtype=dtype, seed=0, **common.LAST_ITERATE)
        model.learn_many(*batches[0])
        if policy != "compact":
            prefill(model, X, y, 2 * budget, prefill_seconds)
        bench.add((*key, "learn_one"),
                  lambda m=model, it=cycling(list(zip(dicts, labels))): m.learn_one(*it()))
        bench.add((*key, "predict_one"), lambda m=model, it=cycling(dicts): m.predict_one(it()))
        bench.add((*key, "learn_many"),
                  lambda m=model, it=cycling(batches): m.learn_many(*it()), BATCH)
        bench.add((*key, "decision_then_learn_many"),
                  lambda m=model, it=cycling(batches): m.decision_then_learn_many(*it()), BATCH)

    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import SGDClassifier

    sampler = RBFSampler(n_components=budget, gamma=gamma, random_state=0).fit(X[:2])
    sgd_one, sgd_many = SGDClassifier(loss="hinge"), SGDClassifier(loss="hinge")
    classes = np.array([False, True])
    sgd_one.partial_fit(sampler.transform(X[:BATCH]), y[:BATCH], classes)
    sgd_many.partial_fit(sampler.transform(X[:BATCH]), y[:BATCH], classes)
    rows = [(X[i:i + 1], y[i:i + 1]) for i in range(n_pool)]
    sk = ("sklearn RBFSampler+SGD", "float64")
    bench.add((*sk, "learn_one"), lambda it=cycling(rows): (
        lambda r: sgd_one.partial_fit(sampler.transform(r[0]), r[1], classes))(it()))
    bench.add((*sk, "predict_one"),
              lambda it=cycling(rows): sgd_one.predict(sampler.transform(it()[0])))
    bench.add((*sk, "learn_many"), lambda it=cycling(batches): (
        lambda b: sgd_many.partial_fit(sampler.transform(b[0]), b[1], classes))(it()), BATCH)

    rates = bench.run()

    reference = {"learn_one": rates[("hand loop", "float32", "learn_one")],
                 "predict_one": rates[("hand loop", "float32", "predict_one")],
                 "learn_many": rates[("batch limit", "float32", "batch")],
                 "decision_then_learn_many": rates[("batch limit", "float32", "batch")]}
    names = {"learn_one": "hand loop", "predict_one": "hand loop (predict)",
             "learn_many": "batch limit", "decision_then_learn_many": "batch limit"}
    records = []
    for (system, dtype, mode), (best, median) in rates.items():
        record = {"kind": "rate", "system": system, "dtype": dtype, "d": d, "budget": budget,
                  "mode": mode, "samples_per_s": best, "samples_per_s_median": median}
        # The references are random-feature steps: the support-vector model's is the hand
        # support-vector step of `--support-only` (`support_step`).
        if mode in reference and not system.endswith("merge"):
            record["reference"] = names[mode]
            record["ratio"] = best / reference[mode][0]
            record["ratio_median"] = median / reference[mode][1]
        model = models.get((system, dtype))
        if model is not None and model.n_support_vectors:
            record["n_support_vectors"] = model.n_support_vectors
        records.append(record)

    # River's own pipeline, on its own: d x B dict entries per sample.
    if d * budget <= RIVER_MAX_ENTRIES:
        from river import feature_extraction, linear_model

        pipeline = feature_extraction.RBFSampler(
            gamma=gamma, n_components=budget, seed=0) | linear_model.LogisticRegression()
        cap = max(3, min(200, RIVER_MAX_ENTRIES // 2 // (d * budget)))
        for mode, call in [("learn_one", lambda i: pipeline.learn_one(dicts[i], labels[i])),
                           ("predict_one", lambda i: pipeline.predict_one(dicts[i]))]:
            call(0)
            start = clock()
            for i in range(1, cap + 1):
                call(i % n_dicts)
            rate = cap / (clock() - start)
            records.append({"kind": "rate", "system": "river RBFSampler|LogReg",
                            "dtype": "float64", "d": d, "budget": budget, "mode": mode,
                            "samples_per_s": rate, "samples_per_s_median": rate,
                            "reference": names[mode], "ratio": rate / reference[mode][0],
                            "ratio_median": rate / reference[mode][1]})
    return records


# -- MNIST 1 vs 7 ---------------------------------------------------------------------------------


def same_model(a, b) -> bool:
    """Whether two models hold the same state, bit for bit (their checkpoints)."""
    meta_a, arrays_a = a.to_checkpoint()
    meta_b, arrays_b = b.to_checkpoint()
    return (meta_a["state"] == meta_b["state"] and arrays_a.keys() == arrays_b.keys()
            and all(np.array_equal(arrays_a[k], arrays_b[k]) for k in arrays_a))


def mnist_pass(pair: dict, name: str, budget: int, repeats: int) -> list:
    """One pass of learn_many(500), as `common.train` does, with test accuracy; the float32
    hand loop and batch limit over the same rows; and a learn_one loop compared bit for bit."""
    X, y, X_test, y_test = pair["X_train"], pair["y_train"], pair["X_test"], pair["y_test"]
    d = X.shape[1]
    gamma = 1.0 / (d * float(X.var()))
    systems = [("compact", "float32"), ("compact", "float64")]
    if has_support_vectors():
        systems += [("merge", "float32"), ("merge", "float64")]
    X32 = X.astype(np.float32)
    hand = start_hand_loop(d, budget, gamma)
    signs = np.where(y == y.max(), 1.0, -1.0).tolist()
    rows32 = list(X32)

    def hand_pass():
        start = clock()
        for x, s in zip(rows32, signs):
            hand.learn(x, s)
        return clock() - start

    def limit_pass():
        start = clock()
        for i in range(0, len(X32), BATCH):
            hand.batch_limit(X32[i:i + BATCH])
        return clock() - start

    seconds: dict = {key: [] for key in [*systems, "hand loop", "batch limit"]}
    models = {}
    for _ in range(repeats):  # interleaved; the best of the repeats
        seconds["hand loop"].append(hand_pass())
        seconds["batch limit"].append(limit_pass())
        for policy, dtype in systems:
            model = AdvKernelSVM(gamma=gamma, budget=budget, budget_policy=policy, dtype=dtype,
                                 seed=0, **common.LAST_ITERATE)
            start = clock()  # common.train's pass, on the CPU clock
            for i in range(0, len(X), BATCH):
                model.learn_many(X[i:i + BATCH], y[i:i + BATCH])
            seconds[(policy, dtype)].append(clock() - start)
            models[(policy, dtype)] = model
    records = []
    limit, loop = min(seconds["batch limit"]), min(seconds["hand loop"])
    for reference, best in [("hand loop", loop), ("batch limit", limit)]:
        records.append({"kind": "mnist", "data": name, "system": reference, "d": d,
                        "budget": budget, "samples": len(X), "pass_seconds": best,
                        "samples_per_s": len(X) / best})
    dicts = river_dicts(X)
    labels = y.tolist()
    for policy, dtype in systems:
        model = models[(policy, dtype)]
        best = min(seconds[(policy, dtype)])
        record = {"kind": "mnist", "data": name, "system": "river-advsvm", "policy": policy,
                  "dtype": dtype, "d": d, "budget": budget, "gamma": gamma,
                  "samples": len(X), "pass_seconds": best, "samples_per_s": len(X) / best,
                  "ratio_to_batch_limit": limit / best, "ratio_to_hand_loop": loop / best,
                  "accuracy": float(common.right(model, X_test, y_test).mean()),
                  "n_support_vectors": model.n_support_vectors if policy != "compact" else None}
        if dtype == "float32":
            one = AdvKernelSVM(gamma=gamma, budget=budget, budget_policy=policy, dtype=dtype,
                               seed=0, **common.LAST_ITERATE)
            for x, label in zip(dicts, labels):
                one.learn_one(x, label)
            record["same_as_learn_one_loop"] = same_model(model, one)
        records.append(record)
    float64 = {r["policy"]: r["accuracy"] for r in records
               if r.get("dtype") == "float64"}
    for r in records:
        if r.get("dtype") == "float32":
            r["accuracy_change_vs_float64"] = r["accuracy"] - float64[r["policy"]]
    return records


# -- where the time goes --------------------------------------------------------------------------


def profile_split(d: int, budget: int, rounds: int, chunk: float) -> list:
    """Component timings of `learn_one` and `predict_one` (float32 `compact`) on dicts.
    (Timing loops over a few samples again and again: a collapse warning says nothing here.)"""
    warnings.filterwarnings("ignore", category=CollapseWarning)
    X, y = make_data(4 * BATCH, d)
    gamma = 1.0 / (d * float(X.var()))
    model = AdvKernelSVM(gamma=gamma, budget=budget, budget_policy="compact", seed=0,
                         **common.LAST_ITERATE)
    model.learn_many(X[:BATCH], y[:BATCH])
    store = model._store
    n_dicts = max(50, min(1000, DICT_ENTRIES // d))
    dicts = river_dicts(X[:n_dicts])
    labels = y.tolist()
    parsed = [inputs.dict_values(x) for x in dicts]
    rows = [model._split(names, values)[0] for names, values in parsed]
    z = store._row_projection(rows[0])
    c = np.cos(z)
    rho = 1.0 - model.step_size * model.regularization

    def update(v):
        store.value(v)  # caches cos z for add(), as the model's step does
        store.scale(rho)
        store.add(model.step_size, v)

    bench = Rounds(rounds, chunk)
    pairs = list(zip(dicts, labels))
    bench.add(("learn_one", "today"), lambda it=cycling(pairs): model.learn_one(*it()))
    bench.add(("predict_one", "today"), lambda it=cycling(dicts): model.predict_one(it()))
    hand = start_hand_loop(d, budget, gamma)
    rows32 = [r.astype(np.float32) for r in X[:n_dicts]]
    signs = np.where(y, 1.0, -1.0).tolist()
    bench.add(("learn_one", "hand loop"),
              lambda it=cycling(list(zip(rows32, signs))): hand.learn(*it()))
    bench.add(("predict_one", "hand loop"), lambda it=cycling(rows32): hand.predict(it()))
    bench.add("dict -> array", lambda it=cycling(dicts): inputs.dict_values(it()))
    bench.add("name lookup", lambda it=cycling(parsed): model._split(*it()))
    bench.add("projection", lambda it=cycling(rows): store._row_projection(it()))
    bench.add("cos", lambda: np.cos(z))
    bench.add("margin", lambda: float(store.coefficients @ c))
    bench.add("value", lambda it=cycling(rows): store.value(it()))
    bench.add("update", lambda it=cycling(rows): update(it()))
    bench.add("harness", lambda it=cycling(rows): it())  # the cost of the timing loop itself
    us = {key: 1e6 / best for key, (best, _) in bench.run().items()}
    harness = us.pop("harness")
    us = {key: max(value - harness, 0.0) for key, value in us.items()}
    # `update` includes one `value` (projection, cos, margin) to set up the step.
    us["update"] = max(us["update"] - us["value"], 0.0)
    records = []
    for call in ("learn_one", "predict_one"):
        us[call] = us[(call, "today")]
    for call, parts in [("learn_one", ["dict -> array", "name lookup", "projection", "cos",
                                       "margin", "update"]),
                        ("predict_one", ["dict -> array", "name lookup", "projection", "cos",
                                         "margin"])]:
        total = us[call]
        split = {p: us[p] for p in parts}
        split["python overhead"] = max(total - sum(split.values()), 0.0)
        for part, value in split.items():
            records.append({"kind": "profile", "call": call, "d": d, "budget": budget,
                            "part": part, "us_per_call": value, "share": value / total,
                            "total_us": total})
    records += cprofile_top(model, dicts, labels, "compact")
    if has_support_vectors():
        svm = AdvKernelSVM(gamma=gamma, budget=budget, budget_policy="merge", seed=0,
                           **common.LAST_ITERATE)
        prefill(svm, X, y, 2 * budget, 60.0)
        records += cprofile_top(svm, dicts, labels, "merge")
    return records


def cprofile_top(model, dicts, labels, policy: str, top: int = 10) -> list:
    """cProfile's own time per function, per call, for learn_one and predict_one."""
    records = []
    for call, run in [("learn_one", lambda: [model.learn_one(x, y)
                                             for x, y in zip(dicts, labels)]),
                      ("predict_one", lambda: [model.predict_one(x) for x in dicts])]:
        profiler = cProfile.Profile()
        profiler.enable()
        run()
        profiler.disable()
        stats = pstats.Stats(profiler).stats
        rows = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
        for (file, line, function), (_, calls, own, cumulative, _) in rows:
            where = pathlib.Path(file).name if file != "~" else "builtin"
            records.append({"kind": "cprofile", "policy": policy, "call": call,
                            "n_support_vectors": model.n_support_vectors,
                            "function": f"{where}:{function}",
                            "calls_per_sample": calls / len(dicts),
                            "own_us_per_sample": 1e6 * own / len(dicts),
                            "cumulative_us_per_sample": 1e6 * cumulative / len(dicts)})
    return records


# -- dict -> array candidates ---------------------------------------------------------------------


def convert_general(x):
    """The general path of `dict_values` alone (what it did before the shortcut): `np.asarray`,
    whose dtype exposes strings and None, then the bounds."""
    return inputs._checked_values(list(x), list(x.values()), False)


_PACKERS: dict = {}


def convert_struct(x):
    """`struct.Struct(f"{n}d").pack_into` alone, without the `sum` guard of today's shortcut:
    it converts anything with `__float__` or `__index__` (a Decimal, a one-element array),
    which the general path refuses."""
    raw = list(x.values())
    packer = _PACKERS.get(len(raw))
    if packer is None:
        packer = _PACKERS[len(raw)] = struct.Struct(f"{len(raw)}d")
    values = np.empty(len(raw))
    try:
        packer.pack_into(values, 0, *raw)
    except (struct.error, TypeError, OverflowError):
        return convert_general(x)
    if not np.abs(values).max(initial=0.0) <= inputs.MAX_ABS_VALUE:
        return convert_general(x)
    return list(x), values


def convert_array_d(x):
    """`array.array('d', values)`: C doubles through `__float__`, like struct, one call slower."""
    try:
        values = np.frombuffer(array.array("d", list(x.values())))
    except (TypeError, OverflowError):
        return convert_general(x)
    if not np.abs(values).max(initial=0.0) <= inputs.MAX_ABS_VALUE:
        return convert_general(x)
    return list(x), values


NUMERIC_TYPES = frozenset({float, int, bool, np.float64, np.float32, np.int64, np.int32,
                           np.bool_})


def convert_type_set(x):
    """Check the set of value types against the numeric ones, then `np.fromiter`."""
    names, raw = list(x), list(x.values())
    if set(map(type, raw)) <= NUMERIC_TYPES:
        try:
            values = np.fromiter(raw, np.float64, len(raw))
        except OverflowError:  # an int beyond float64
            return convert_general(x)
        if np.abs(values).max(initial=0.0) <= inputs.MAX_ABS_VALUE:
            return names, values
    return convert_general(x)


def convert_fromiter(x):
    """`np.fromiter(values, float64)`: fast, but it parses "1.5" and turns None into NaN."""
    names = list(x)
    try:
        values = np.fromiter(x.values(), np.float64, len(names))
    except (TypeError, ValueError, OverflowError):
        return convert_general(x)
    if not np.abs(values).max(initial=0.0) <= inputs.MAX_ABS_VALUE:
        return convert_general(x)
    return names, values


CONVERSIONS = {"today: sum guard + struct": inputs.dict_values,
               "np.asarray (before)": convert_general, "struct alone": convert_struct,
               "array('d')": convert_array_d, "type set + fromiter": convert_type_set,
               "fromiter": convert_fromiter}
BASELINE = "np.asarray (before)"
BAD_VALUES = ["1.5", np.str_("1.5"), None, [1.0], (1.0,), {"v": 1.0}, b"1", 1j, float("nan"),
              float("inf"), 1e16, 10**400, np.float64("nan"), decimal.Decimal("1.5"),
              np.array([1.0])]


def refuses_bad_values(convert) -> bool:
    """Whether `convert` refuses every bad value, in any position, with InvalidInput (any
    other outcome, a value accepted or another exception, is a failure)."""
    for bad in BAD_VALUES:
        for x in ({"a": 1.0, "b": bad}, {"b": bad}):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    convert(x)
            except inputs.InvalidInput:
                continue
            except Exception:
                return False
            return False
    return True


def conversion_candidates(dims, rounds: int, chunk: float) -> list:
    records = []
    rng = np.random.default_rng(0)
    for d in dims:
        pool = river_dicts(rng.random((32, d)))
        for x in pool[:2]:
            reference = convert_general(x)
            for convert in CONVERSIONS.values():
                names, values = convert(x)
                assert names == reference[0] and np.array_equal(values, reference[1])
        bench = Rounds(rounds, chunk)
        for name, convert in CONVERSIONS.items():
            bench.add(name, lambda f=convert, it=cycling(pool): f(it()))
        rates = bench.run()
        before = 1e6 / rates[BASELINE][0]
        for name, convert in CONVERSIONS.items():
            us = 1e6 / rates[name][0]
            records.append({"kind": "conversion", "candidate": name, "d": d, "us_per_call": us,
                            "speedup_vs_before": before / us,
                            "refuses_bad_values": refuses_bad_values(convert)})
    return records


# -- does BLAS round a row by its batch? -----------------------------------------------------------


def batch_rounding(d: int, budget: int, sizes=(1, 2, 3, 7, 8, 16, 500)) -> list:
    """Whether numpy's BLAS gives a row of `X W` the same bits in batches of every size: for
    each size, the share of rows whose float32 product equals the one-row product (a
    matrix-vector product, what learning uses) and the share equal to the same row in a batch
    of 500. Any share below 1 means learning in batches would make the model depend on how the
    stream was cut."""
    rng = np.random.default_rng(0)
    W = rng.standard_normal((d, budget)).astype(np.float32)
    X = rng.standard_normal((1000, d)).astype(np.float32)
    one_row = np.stack([x @ W for x in X])
    in_500 = np.concatenate([X[i:i + 500] @ W for i in range(0, len(X), 500)])
    records = []
    for size in sizes:
        rows = np.concatenate([X[i:i + size] @ W for i in range(0, len(X), size)])
        records.append({"kind": "batch_rounding", "d": d, "budget": budget, "batch": size,
                        "same_as_one_row": float((rows == one_row).all(axis=1).mean()),
                        "same_as_batch_500": float((rows == in_500).all(axis=1).mean())})
    return records


# -- targets, tables ------------------------------------------------------------------------------


def targets(records: list, d: int, budget: int) -> list:
    out = []
    rates = {(r["system"], r["dtype"], r["mode"]): r for r in records
             if r["kind"] == "rate" and r["d"] == d and r["budget"] == budget}
    for system in ("river-advsvm compact",):  # (support vectors: `support_targets`)
        for mode, threshold in TARGETS.items():
            r = rates.get((system, "float32", mode))
            if r is not None:
                out.append({"kind": "target", "target": f"{mode} >= {threshold}x "
                                                        f"{r['reference']}, {system[13:]}",
                            "d": d, "budget": budget, "value": r["ratio"],
                            "value_median": r["ratio_median"], "threshold": threshold,
                            "met": r["ratio"] >= threshold})
    for r in records:
        if r["kind"] == "mnist" and r["system"] == "river-advsvm":
            out.append({"kind": "target",
                        "target": f"{r['data']} learn_many pass < {MNIST_SECONDS} s, "
                                  f"{r['policy']} {r['dtype']}",
                        "d": r["d"], "budget": r["budget"], "value": r["pass_seconds"],
                        "threshold": MNIST_SECONDS, "met": r["pass_seconds"] < MNIST_SECONDS})
    return out


RATE_COLUMNS = [("system", "system", ""), ("dtype", "dtype", ""), ("d", "d", "d"),
                ("budget", "B", "d"), ("mode", "mode", ""), ("samples_per_s", "samples/s", ",.0f"),
                ("ratio", "ratio", ".3f"), ("ratio_median", "(median)", ".3f"),
                ("n_support_vectors", "SVs", "d")]


def markdown(records: list, quick: bool) -> str:
    machine = common.machine()
    lines = ["# Throughput (`benchmarks/throughput.py`)", "",
             f"{common.machine_line(machine)}."
             + (" Quick smoke run." if quick else ""), "",
             "Samples/s (best round of interleaved rounds), and in parentheses the ratio to the "
             "reference measured in the same run: the float32 hand loop for `learn_one` (its "
             "prediction half for `predict_one`), the float32 batch limit `cos(X W + u)` for "
             "`learn_many(500)` and `decision_then_learn_many(500)`. These are random-feature "
             "steps: the support-vector model (`merge`) is shown without a ratio here, and "
             "against the hand support-vector step in `--support-only`.", ""]
    rates = [r for r in records if r["kind"] == "rate"]

    def cell(r):
        if r is None:
            return "-"
        ratio = f" ({r['ratio']:.2f}x)" if "ratio" in r else ""
        return f"{r['samples_per_s']:,.0f}{ratio}"

    configs = sorted({(r["d"], r["budget"]) for r in rates})
    systems = list(dict.fromkeys((r["system"], r["dtype"]) for r in rates
                                 if r["system"].startswith("river-advsvm")))
    index = {(r["system"], r["dtype"], r["d"], r["budget"], r["mode"]): r for r in rates}
    modes = ["learn_one", "predict_one", "learn_many", "decision_then_learn_many"]
    for system, dtype in systems:
        lines += [f"**{system}, {dtype}**", "",
                  "| d | B | " + " | ".join(modes) + " | SVs |", "|---" * (len(modes) + 3) + "|"]
        for d, b in configs:
            cells = [cell(index.get((system, dtype, d, b, m))) for m in modes]
            svs = index.get((system, dtype, d, b, "learn_one"), {}).get("n_support_vectors")
            lines.append(f"| {d} | {b} | " + " | ".join(cells) + f" | {svs or '-'} |")
        lines.append("")
    lines += ["**References and competitors** (samples/s)", "",
              "| d | B | hand loop | hand loop, predict | batch limit | sklearn one | "
              "sklearn predict | sklearn batch | River one | River predict |",
              "|---" * 10 + "|"]
    sk, rv = "sklearn RBFSampler+SGD", "river RBFSampler|LogReg"
    columns = [("hand loop", "float32", "learn_one"), ("hand loop", "float32", "predict_one"),
               ("batch limit", "float32", "batch"), (sk, "float64", "learn_one"),
               (sk, "float64", "predict_one"), (sk, "float64", "learn_many"),
               (rv, "float64", "learn_one"), (rv, "float64", "predict_one")]
    for d, b in configs:
        cells = []
        for system, dtype, mode in columns:
            r = index.get((system, dtype, d, b, mode))
            rate = None if r is None else r["samples_per_s"]
            cells.append("-" if rate is None else f"{rate:,.1f}" if rate < 10 else f"{rate:,.0f}")
        lines.append(f"| {d} | {b} | " + " | ".join(cells) + " |")
    mnist = [r for r in records if r["kind"] == "mnist"]
    if mnist:
        lines += ["", f"**One pass of `learn_many(500)` over {mnist[0]['data']}** "
                      f"({mnist[0]['samples']:,} samples, d = {mnist[0]['d']}, "
                      f"B = {mnist[0]['budget']}, gamma = 1/(d Var X))", "",
                  common.markdown_table(mnist, [
                      ("system", "system", ""), ("policy", "policy", ""), ("dtype", "dtype", ""),
                      ("pass_seconds", "seconds", ".3f"), ("samples_per_s", "samples/s", ",.0f"),
                      ("ratio_to_batch_limit", "x batch limit", ".2f"),
                      ("accuracy", "test accuracy", ".4f"),
                      ("accuracy_change_vs_float64", "vs float64", "+.4f"),
                      ("same_as_learn_one_loop", "= learn_one loop", ""),
                      ("n_support_vectors", "SVs", "d")])]
    profile = [r for r in records if r["kind"] == "profile"]
    if profile:
        lines += ["", f"**Where the time goes** (d = {profile[0]['d']}, "
                      f"B = {profile[0]['budget']}, float32, µs per call)", ""]
        for call in ("learn_one", "predict_one"):
            rows = [r for r in profile if r["call"] == call]
            lines.append(f"- `{call}` {rows[0]['total_us']:.0f} µs: " + ", ".join(
                f"{r['part']} {r['us_per_call']:.1f} ({r['share']:.0%})" for r in rows))
    conversions = [r for r in records if r["kind"] == "conversion"]
    if conversions:
        lines += ["", "**dict -> array candidates** (µs per call; speed-up against the "
                      "general path alone, `np.asarray`; whether str, None, nested, Decimal, "
                      "one-element arrays and non-finite values are all refused)", "",
                  common.markdown_table(conversions, [
                      ("candidate", "candidate", ""), ("d", "d", "d"),
                      ("us_per_call", "µs", ".2f"), ("speedup_vs_before", "speed-up", ".2f"),
                      ("refuses_bad_values", "refuses bad values", "")])]
    rounding = [r for r in records if r["kind"] == "batch_rounding"]
    if rounding:
        lines += ["", f"**Does BLAS round a row by its batch?** (float32 `x W`, d = "
                      f"{rounding[0]['d']}, B = {rounding[0]['budget']}, 1,000 rows cut into "
                      "batches of each size; share of rows with the same bits as the one-row "
                      "product learning uses, and as the same row in a batch of 500)", "",
                  common.markdown_table(rounding, BATCH_ROUNDING_COLUMNS)]
    lines += support_markdown(records)
    lines += common.targets_markdown(records, [
        ("target", "target", ""), ("d", "d", "d"), ("budget", "B", "d"),
        ("value", "measured", ".3f"), ("value_median", "(median)", ".3f"), ("met", "", "")])
    return "\n".join(lines)


BATCH_ROUNDING_COLUMNS = [("batch", "batch", "d"), ("same_as_one_row", "= one row", ".3f"),
                          ("same_as_batch_500", "= batch of 500", ".3f")]


def support_markdown(records: list) -> list:
    rows = [r for r in records if r["kind"] == "support_step"]
    if not rows:
        return []
    return ["", f"**The support-vector step at full budget** (d = {rows[0]['d']}, "
                f"B = {rows[0]['budget']}, float32, µs per sample; ratio to the hand step, "
                "or to the hand predict for `predict_one`; merges per learned sample; every "
                "learner on samples it has not seen: MNIST's shifted by up to two pixels at each "
                "pass, the noisy stream's drawn anew)", "",
            common.markdown_table(rows, SUPPORT_COLUMNS)]


WARM_UP_COLUMNS = [("data", "data", ""), ("mode", "mode", ""), ("samples", "samples", "d"),
                   ("us_per_sample", "scale us", ".1f"),
                   ("us_per_sample_numeric", "numeric us", ".1f"),
                   ("cost_ratio", "cost ratio", ".2f"), ("cost_ratio_median", "(median)", ".2f")]
SERVE_COLUMNS = [("data", "data", ""), ("run", "run", "d"),
                 ("messages_per_s", "messages/s", ",.0f"),
                 ("messages_per_s_median", "(median)", ",.0f"), ("us_per_message", "us", ".1f")]


def warm_up_markdown(records: list) -> list:
    rows = [r for r in records if r["kind"] == "warm_up"]
    serve = [r for r in records if r["kind"] == "serve_path"]
    out = []
    if rows:
        out += ["", f"**The warm-up of gamma='scale'** (its first {rows[0]['samples']} samples "
                    "as dicts, a fresh model per pass; cost ratio: its time over the same "
                    "samples with a numeric gamma, lower is better)", "",
                common.markdown_table(rows, WARM_UP_COLUMNS)]
    if serve:
        out += ["", f"**The service's model call** (the default model at full budget, "
                    f"`predict_proba_then_learn_many` on runs of {serve[0]['run']} rows, in "
                    "process: no broker, no JSON)", "",
                common.markdown_table(serve, SERVE_COLUMNS)]
    return out


def support_targets(records: list) -> list:
    out = []
    for r in records:
        if r["kind"] == "warm_up":
            out.append({"kind": "target", "target": f"{r['data']}: warm-up ({r['mode']}) <= "
                                                    f"{WARM_UP_TARGET}x a numeric gamma",
                        "d": r["d"], "value": r["cost_ratio"],
                        "value_median": r["cost_ratio_median"], "threshold": WARM_UP_TARGET,
                        "met": r["cost_ratio"] <= WARM_UP_TARGET})
        if r["kind"] == "serve_path":
            out.append({"kind": "target", "target": f"{r['data']}: serve model path >= "
                                                    f"{SERVE_TARGET:,.0f} messages/s",
                        "d": r["d"], "budget": r["budget"], "value": r["messages_per_s"],
                        "value_median": r["messages_per_s_median"], "threshold": SERVE_TARGET,
                        "met": r["messages_per_s"] >= SERVE_TARGET})
    for r in records:
        if r["kind"] == "support_step" and r["mode"] in SUPPORT_TARGETS:
            threshold = SUPPORT_TARGETS[r["mode"]]
            out.append({"kind": "target", "target": f"{r['data']}: {r['mode']} >= {threshold}x "
                                                    f"{r['reference']}",
                        "d": r["d"], "budget": r["budget"], "value": r["ratio"],
                        "value_median": r["ratio_median"], "threshold": threshold,
                        "met": r["ratio"] >= threshold})
    return out


def main_support(args) -> int:
    """`--support-only`: the support-vector step at full budget, the warm-up of gamma='scale'
    and the service's model call, nothing else."""
    rounds, chunk, prefill_seconds = (2, 0.03, 0.5) if args.quick else (6, 0.5, 240.0)
    budget = 48 if args.quick else TARGET_BUDGET
    # The noisy stream is made to be nearly unlearnable (every sample a margin violation), so
    # a model on it may well be flat: its collapse warning says nothing about the speed here.
    warnings.filterwarnings("ignore", category=CollapseWarning)
    with common.one_blas_thread():
        streams = support_streams(args.data, args.quick)
        records = support_step(streams, budget, rounds, chunk, prefill_seconds)
        print(common.format_table(records, SUPPORT_COLUMNS), flush=True)
        warm = warm_up_cost(streams, rounds, chunk)
        print(common.format_table(warm, WARM_UP_COLUMNS), flush=True)
        serve = serve_path(*streams["noisy"], "noisy", rounds, chunk, prefill_seconds / 4, budget)
        print(common.format_table(serve, SERVE_COLUMNS), flush=True)
    records += warm + serve
    goals = support_targets(records)
    print(common.format_table(goals, common.TARGET_COLUMNS))
    records += goals

    def text(records, host):
        return "\n".join(["# The support-vector step (`benchmarks/throughput.py --support-only`)",
                          "", f"{common.machine_line(host)}."
                          + (" Quick smoke run." if args.quick else "")]
                         + support_markdown(records) + warm_up_markdown(records)
                         + common.targets_markdown(records))

    common.save_run(records, args.out, "throughput_support", args.quick, text)
    return 0


def main(argv=None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0], data=True)
    parser.add_argument("--support-only", action="store_true",
                        help="only the support-vector step at full budget against the hand "
                             "step (MNIST 8 vs 9 and a noisy stream)")
    args = parser.parse_args(argv)
    if args.support_only:
        return main_support(args)
    if args.quick:
        grid, rounds, chunk, prefill_seconds = [(64, 256)], 2, 0.03, 0.5
        profile_at, dims, repeats = (64, 256), (16, 64), 1
        pair, pair_name = common.digits_pair(1, 7), "digits 1 vs 7"
    else:
        grid = [(d, b) for d in (16, 64, 784, 3072) for b in (256, 1024, 4096)]
        rounds, chunk, prefill_seconds = 5, 0.25, 60.0
        profile_at, dims, repeats = (TARGET_D, TARGET_BUDGET), (16, 64, 784, 3072), 3
        pair = common.load_pair(common.data_file(args.data, "mnist.npz"), 1, 7)
        pair_name = "MNIST 1 vs 7"
    records = []
    with common.one_blas_thread():
        for d, budget in progress.bar(grid, desc="throughput", unit="config",
                                      progress=not args.no_progress):
            # Twice the rounds where the targets are judged.
            more = 2 if (d, budget) == (TARGET_D, TARGET_BUDGET) else 1
            rows = bench_config(d, budget, more * rounds, chunk, prefill_seconds)
            progress.write(common.format_table(rows, RATE_COLUMNS) + "\n")
            records += rows
        rows = mnist_pass(pair, pair_name, TARGET_BUDGET, repeats)
        print(common.format_table(rows, [
            ("system", "system", ""), ("policy", "policy", ""), ("dtype", "dtype", ""),
            ("pass_seconds", "seconds", ".3f"), ("samples_per_s", "samples/s", ",.0f"),
            ("ratio_to_batch_limit", "x limit", ".2f"), ("accuracy", "accuracy", ".4f"),
            ("same_as_learn_one_loop", "= learn_one", ""), ("n_support_vectors", "SVs", "d")]),
            flush=True)
        records += rows
        rows = profile_split(*profile_at, 2 * rounds, chunk)
        print(common.format_table([r for r in rows if r["kind"] == "profile"], [
            ("call", "call", ""), ("part", "part", ""), ("us_per_call", "us", ".1f"),
            ("share", "share", ".1%")]))
        print(common.format_table([r for r in rows if r["kind"] == "cprofile"], [
            ("policy", "policy", ""), ("call", "call", ""), ("function", "function", ""),
            ("own_us_per_sample", "own us", ".1f"),
            ("cumulative_us_per_sample", "cumulative us", ".1f")]), flush=True)
        records += rows
        rows = conversion_candidates(dims, rounds, chunk / 2)
        print(common.format_table(rows, [
            ("candidate", "candidate", ""), ("d", "d", "d"), ("us_per_call", "us", ".2f"),
            ("speedup_vs_before", "speed-up", ".2f"), ("refuses_bad_values", "honest", "")]))
        records += rows
        rows = batch_rounding(*profile_at)
        print(common.format_table(rows, BATCH_ROUNDING_COLUMNS))
        records += rows
        rows = support_step(support_streams(args.data, args.quick),
                            48 if args.quick else TARGET_BUDGET, 2 * rounds, chunk,
                            prefill_seconds if args.quick else 240.0)
        print(common.format_table(rows, SUPPORT_COLUMNS), flush=True)
        records += rows
    target_at = (TARGET_D, TARGET_BUDGET) if not args.quick else grid[0]
    goals = targets(records, *target_at) + support_targets(records)
    print(common.format_table(goals, common.TARGET_COLUMNS))
    records += goals
    common.save_run(records, args.out, "throughput", args.quick,
                    lambda records, _: markdown(records, args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
