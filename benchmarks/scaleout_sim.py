"""A group of workers in one process: what a fold costs and what the group's model is worth.

    python benchmarks/scaleout_sim.py --data DIR [--workers 2 4 8 16 32] [--sync-every 100]
    python benchmarks/scaleout_sim.py --data DIR --fold-only    # a fold of 16 full models
    python benchmarks/scaleout_sim.py --quick

W workers each learn their partition of a stream (sample i goes to worker i mod W, as a
round-robin producer spreads a topic over W partitions), in order, and sync every
`--sync-every` samples of their own: each publishes its model, and each averages the group's
models into its own with weights = samples learned since the last sync (the protocol of
`river_advsvm.streams.group`, in synchronous rounds, so every worker holds the group's model
after a sync). Between syncs each worker steps on the group's clock,
`AdvKernelSVM.group_steps(W)` as `advsvm serve` does (`--own-steps`: as if it learned alone,
which divides every sample's step by W in the average), and revisits its own share of the
stored vectors (`AdvKernelSVM.group_revisits`), as `advsvm serve` does. Two ways to average
support vectors, the two of `advsvm serve --group-model`:

- `union`: the union of every model's vectors, then budget maintenance (BSGD merges) back
  down to B (`river_advsvm.streams.merge.average`). Run for W <= `--union-max` (its cost grows
  with W^2 B^2 d).
- `basis` (the default of `advsvm serve`): every model is projected onto a basis the group
  shares (`river_advsvm.support_basis`); the average is the weighted sum of the coefficients
  (`merge.average(..., basis=...)`). The basis is refreshed at every sync until it holds B
  vectors, then every `--refresh-every` syncs, as `advsvm serve` proposes one
  (`river_advsvm.streams.group_basis.proposed_vectors`): one worker's current vectors
  (workers take turns), filled up with the others' of largest weight. `bytes/sync` counts the
  coefficients and the model's metadata; the fold timing also measures a service snapshot of
  coefficients (with the counters, offsets and group bookkeeping) against a whole one, and
  how long a reader takes to read each.

Reported per W and method: the seconds of one worker's fold per sync (the average, and
rebuilding the model from it), the seconds a worker spends projecting its model before it
publishes and a basis refresh, snapshot bytes per sync, and the group's final model's clean
and PGD accuracy on the test set, against one model trained on the whole stream in order:
that model's clean and PGD accuracy at its last iterates (every `--every` samples over the
last `--last` samples) give the spread the group's model should fall within. `served` is the
workers' test-then-train accuracy (each chunk of `--sync-every` predicted before it is
learned, by the worker's current model: what a worker would have published), against the one
model's over the same chunks.

Data: MNIST 8 vs 9 (`mnist.npz` in `--data`, pixels / 255, d = 784; `--shifted-copies K`
makes its training stream K + 1 times as long with copies of its images shifted by up to two
pixels, so that each of many workers learns as many samples as fewer would) and River's
Bananas (2 inputs scaled to [0, 1], shuffled, 30% held out); `--quick`: synthetic data (d = 4)
and small budgets. BLAS runs on one thread.

"""

from __future__ import annotations

import copy
import sys
import time

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))

import common  # noqa: E402

from river_advsvm import AdvKernelSVM, model_checkpoint  # noqa: E402
from river_advsvm.streams import merge  # noqa: E402
from river_advsvm.streams.group_basis import coefficient_snapshot, proposed_vectors  # noqa: E402
from river_advsvm.streams.snapshot import new_bookkeeping, parse_snapshot  # noqa: E402
from river_advsvm.streams.state import ServiceState  # noqa: E402
from river_advsvm.support_basis import SharedBasis  # noqa: E402


def mnist(data: str, shifted_copies: int = 0) -> dict:
    """MNIST 8 vs 9; with `shifted_copies`, its training images followed by that many copies
    of them, each moved by its own shift of up to two pixels, the whole stream shuffled (seed
    0): a longer stream of images no worker has seen, for the group and the one model alike."""
    if not 0 <= shifted_copies < len(common.SHIFTS):
        raise SystemExit(f"--shifted-copies: from 0 to {len(common.SHIFTS) - 1}")
    pair = common.load_pair(common.data_file(data, "mnist.npz"), 8, 9)
    if shifted_copies:
        X, y = pair["X_train"], pair["y_train"]
        shifts = common.SHIFTS[1:shifted_copies + 1]
        X = np.concatenate([X, *(common.shifted(X, shift) for shift in shifts)])
        order = np.random.default_rng(0).permutation(len(X))
        pair["X_train"], pair["y_train"] = X[order], np.tile(y, shifted_copies + 1)[order]
    return pair


def bananas() -> dict:
    from river import datasets

    rows = list(datasets.Bananas())
    X = np.array([[x[k] for k in sorted(x)] for x, _ in rows])
    y = np.array([int(label) for _, label in rows])
    X = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))  # into [0, 1], the attacks' box
    return _split(X, y, seed=1)


def synthetic(n: int = 3000, d: int = 4) -> dict:
    rng = np.random.default_rng(0)
    X = rng.random((n, d))
    y = ((X[:, 0] - 0.5) ** 2 + (X[:, 1] - 0.5) ** 2 < 0.15).astype(int)
    return _split(X, y, seed=0)


def _split(X, y, seed: int, test: float = 0.3) -> dict:
    order = np.random.default_rng(seed).permutation(len(X))
    cut = int(len(X) * (1 - test))
    return {"X_train": X[order[:cut]], "y_train": y[order[:cut]],
            "X_test": X[order[cut:]], "y_test": y[order[cut:]]}


#: What the models predict with (`--averaging`): by default the last iterate, as in the
#: committed results.
AVERAGING = dict(common.LAST_ITERATE)


def make_model(d: int, X: np.ndarray, budget: int) -> AdvKernelSVM:
    # The bandwidth every worker is given: what gamma='scale' fits, 2 / (d Var x).
    gamma = float(2.0 / (d * X.var()))
    return AdvKernelSVM(gamma=gamma, budget=budget, budget_policy="merge", seed=0,
                        schedule="diminishing", regularization=1e-3, **AVERAGING)


def scores(model, X, y, pgd_X, pgd_y, epsilon: float) -> tuple[float, float]:
    clean = float(common.right(model, X, y).mean())
    robust = float(common.pgd_right(model, pgd_X, pgd_y, epsilon=epsilon)[0].mean())
    return clean, robust


def single_model(data: dict, budget: int, args, evaluate) -> dict:
    """One model over the whole stream in order; its scores at the last iterates."""
    X, y = data["X_train"], data["y_train"]
    model = make_model(X.shape[1], X, budget)
    marks = sorted({len(X)} | set(range(len(X) - args.last, len(X), args.every)))
    done, clean, robust, served, seen = 0, [], [], 0, 0
    for mark in marks:
        for low in range(done, mark, args.sync_every):  # test then train, in the workers' chunks
            chunk = slice(low, min(low + args.sync_every, mark))
            if model.n_learned:
                served += int(common.right(model, X[chunk], y[chunk]).sum())
                seen += len(y[chunk])
            model.learn_many(X[chunk], y[chunk])
        done = mark
        c, r = evaluate(model)
        clean.append(c)
        robust.append(r)
    return {"clean_min": min(clean), "clean_max": max(clean), "clean_last": clean[-1],
            "pgd_min": min(robust), "pgd_max": max(robust), "pgd_last": robust[-1],
            "prequential": served / seen}


# -- a group ----------------------------------------------------------------------------------


class Group:
    """W models learning their partitions, averaged every `sync_every` samples of their own."""

    def __init__(self, data: dict, workers: int, budget: int, method: str, args):
        X, y = data["X_train"], data["y_train"]
        self.parts = [(X[w::workers], y[w::workers]) for w in range(workers)]
        self.models = [make_model(X.shape[1], X, budget) for _ in range(workers)]
        self.method, self.budget, self.args = method, budget, args
        self.basis: SharedBasis | None = None
        self.syncs = self.refreshes = 0
        self.learned = 0  # samples the group has learned (each worker's own, summed)
        self.served = self.seen = 0  # the workers' predictions before they learn: right, made
        self.seconds = {"fold": [], "rebuild": [], "project": [], "refresh": []}
        self.bytes: list[int] = []
        self.loss: list[float] = []

    def run(self) -> AdvKernelSVM:
        step = self.args.sync_every
        longest = max(len(part[1]) for part in self.parts)
        for start in range(0, longest, step):
            learned = []
            for model, (X, y) in zip(self.models, self.parts):
                if self.args.group_steps:
                    model.group_steps(len(self.models))  # as `advsvm serve` measures it
                chunk = slice(start, start + step)
                if model.n_learned:  # test then train: what the worker would have served
                    self.served += int(common.right(model, X[chunk], y[chunk]).sum())
                    self.seen += len(y[chunk])
                model.learn_many(X[chunk], y[chunk])
                learned.append(len(y[start:start + step]))
            self.sync(learned)
        return self.models[0]

    def sync(self, learned: list[int]) -> None:
        published = [model.to_checkpoint() for model in self.models]
        if self.method == "basis":
            published = self.onto_basis(published)
        self.bytes.append(int(np.mean([len(model_checkpoint.dumps(m, a)) for m, a in published])))
        members = [(m, a, float(n)) for (m, a), n in zip(published, learned)]
        self.learned += sum(learned)
        total = self.learned  # the group model's n_learned, which sets the diminishing step
        start = time.perf_counter()
        merged = merge.average(members, total, basis=self.basis)
        middle = time.perf_counter()
        model = merge.to_model(*merged)
        end = time.perf_counter()
        self.seconds["fold"].append(middle - start)
        self.seconds["rebuild"].append(end - middle)
        # Every worker ends the sync with the group's model (each would fold the same snapshots)
        # and revisits its share of the vectors, as `advsvm serve` does (workers ranked by id).
        self.models = [model] + [copy.deepcopy(model) for _ in self.models[1:]]
        for rank, (worker, own) in enumerate(zip(self.models, learned)):
            worker.group_revisits(self.learned + rank * own)
        self.syncs += 1

    def onto_basis(self, published: list) -> list:
        """Each model projected onto the group's basis (refreshed first when due)."""
        full = self.basis is None or self.basis.size < self.budget
        if full or self.syncs % self.args.refresh_every == 0:
            start = time.perf_counter()
            self.basis = self.refreshed_basis(published)
            self.seconds["refresh"].append(time.perf_counter() - start)
            self.refreshes += 1
        out = []
        for meta, arrays in published:
            start = time.perf_counter()
            member, loss = merge.over_basis(meta, arrays, self.basis)
            self.seconds["project"].append(time.perf_counter() - start)
            self.loss.append(loss)
            out.append((meta, member))
        return out

    def refreshed_basis(self, published: list) -> SharedBasis:
        """What `advsvm serve` proposes (`group_basis.proposed_vectors`): one worker's vectors
        (workers take turns), filled up to B with the others' it lacks, largest |coefficient|
        first."""
        turn = self.refreshes % len(published)
        others = published[:turn] + published[turn + 1:]
        meta = published[turn][0]
        store = meta["state"]["model"]["store"]
        return SharedBasis(store["kernel"], store["gamma"],
                           proposed_vectors(published[turn], others, self.budget),
                           meta["state"]["names"])


# -- the report -------------------------------------------------------------------------------


def run_stream(name: str, data: dict, budget: int, args, records: list) -> None:
    pgd = slice(0, args.pgd_samples)
    X_test, y_test = data["X_test"], data["y_test"]

    def evaluate(model):
        return scores(model, X_test, y_test, X_test[pgd], y_test[pgd], args.epsilon)

    start = time.perf_counter()
    single = single_model(data, budget, args, evaluate)
    print(f"{name}: one model, {len(data['y_train'])} samples, d = {data['X_train'].shape[1]}, "
          f"B = {budget}: clean {single['clean_min']:.2%}..{single['clean_max']:.2%} "
          f"(last {single['clean_last']:.2%}), PGD {single['pgd_min']:.2%}..{single['pgd_max']:.2%}"
          f" (last {single['pgd_last']:.2%}), test-then-train {single['prequential']:.2%} "
          f"[{time.perf_counter() - start:.0f}s]", flush=True)
    for workers in args.workers:
        for method in args.methods:
            if method == "union" and workers > args.union_max:
                continue
            start = time.perf_counter()
            group = Group(data, workers, budget, method, args)
            model = group.run()
            clean, robust = evaluate(model)
            s = group.seconds
            row = {
                "kind": "group", "stream": name, "d": data["X_train"].shape[1], "budget": budget,
                "workers": workers, "method": method, "sync_every": args.sync_every,
                "refresh_every": args.refresh_every if method == "basis" else None,
                "syncs": group.syncs, "refreshes": group.refreshes if method == "basis" else None,
                "fold_s": float(np.median(s["fold"])), "fold_max_s": float(np.max(s["fold"])),
                "rebuild_s": float(np.median(s["rebuild"])),
                "project_s": float(np.median(s["project"])) if s["project"] else None,
                "refresh_s": float(np.median(s["refresh"])) if s["refresh"] else None,
                "snapshot_bytes": int(np.median(group.bytes)),
                "projection_loss": float(np.median(group.loss)) if group.loss else None,
                "support_vectors": model.n_support_vectors,
                "clean": clean, "pgd": robust, "group_steps": args.group_steps,
                "prequential": group.served / max(group.seen, 1),
                "clean_in_spread": single["clean_min"] <= clean <= single["clean_max"]
                or clean > single["clean_max"],
                "pgd_in_spread": single["pgd_min"] <= robust <= single["pgd_max"]
                or robust > single["pgd_max"],
                **{f"single_{k}": v for k, v in single.items()},
                "seconds": time.perf_counter() - start,
            }
            records.append(row)
            print(common.format_table([row], COLUMNS).splitlines()[-1], flush=True)


def fold_timing(data: dict, budget: int, peers: int, records: list, args) -> None:
    """A fold of `peers` full models at the stream's d and B: the basis average and rebuild,
    against the union's (run only if `peers <= --union-max`)."""
    X, y = data["X_train"], data["y_train"]
    models = []
    for w in range(2):  # two full models; the others are copies with other weights
        model = make_model(X.shape[1], X, budget)
        model.learn_many(X[w::2], y[w::2])
        models.append(model)
    published = [models[w % 2].to_checkpoint() for w in range(peers + 1)]
    store = published[0][0]["state"]["model"]["store"]
    start = time.perf_counter()
    basis = SharedBasis(store["kernel"], store["gamma"], published[0][1]["vectors"],
                        published[0][0]["state"]["names"])
    refresh = time.perf_counter() - start
    start = time.perf_counter()
    projected = [(m, merge.over_basis(m, a, basis)[0], 1.0 + w)
                 for w, (m, a) in enumerate(published)]
    project = (time.perf_counter() - start) / len(published)
    timings = {"basis": [], "rebuild": [], "union": []}
    for _ in range(args.rounds):
        start = time.perf_counter()
        merged = merge.average(projected, 1, basis=basis)
        middle = time.perf_counter()
        folded = merge.to_model(*merged)
        timings["basis"].append(middle - start)
        timings["rebuild"].append(time.perf_counter() - middle)
    if peers <= args.union_max:
        start = time.perf_counter()
        merge.to_model(*merge.average([(m, a, 1.0 + w) for w, (m, a) in enumerate(published)],
                                      1))
        timings["union"].append(time.perf_counter() - start)
    row = {"kind": "fold", "peers": peers, "d": X.shape[1], "budget": budget,
           "support_vectors": store["size"], "basis_fold_s": min(timings["basis"]),
           "rebuild_s": min(timings["rebuild"]), "project_s": project, "refresh_s": refresh,
           "union_fold_s": timings["union"][0] if timings["union"] else None,
           "full_snapshot_bytes": len(model_checkpoint.dumps(*published[0])),
           "basis_snapshot_bytes": len(model_checkpoint.dumps(projected[0][0], projected[0][1])),
           # What `advsvm serve` publishes after a fold over the basis: the model, vectors and all.
           "service_snapshot_bytes": len(model_checkpoint.dumps(*folded.to_checkpoint()))}
    row.update(service_snapshots(folded, basis, peers, args.rounds))
    records.append(row)
    print(f"a worker's snapshot over the basis: {row['coefficient_snapshot_bytes']} bytes "
          f"(whole: {row['whole_snapshot_bytes']}); reading one {row['read_coefficients_s']:.3f}s"
          f" (whole: {row['read_whole_s']:.3f}s)", flush=True)
    print(f"fold of {peers} peers (d = {X.shape[1]}, {store['size']} vectors each): basis "
          f"{row['basis_fold_s']:.4f}s + rebuild {row['rebuild_s']:.3f}s; projecting one model "
          f"{project:.3f}s; a new basis {refresh:.2f}s; union "
          f"{'-' if row['union_fold_s'] is None else format(row['union_fold_s'], '.2f') + 's'}; "
          f"snapshot {row['full_snapshot_bytes']} bytes (vectors) vs "
          f"{row['basis_snapshot_bytes']} (over the basis; the service's model over it "
          f"{row['service_snapshot_bytes']})", flush=True)


def service_snapshots(model: AdvKernelSVM, basis: SharedBasis, peers: int, rounds: int) -> dict:
    """What `advsvm serve` publishes for `model` (a worker of `peers + 1`, one partition, its
    model over `basis` after a fold, plus 100 samples learned since), whole and as its
    coefficients over the basis, and the seconds a reader takes to read each (parse, validate,
    and for coefficients put the basis' vectors back): the best of `rounds`."""
    model = copy.deepcopy(model)
    X = basis.vectors[:100].astype(np.float64) * 0.9  # samples near the basis, not on it
    negative, positive = model.classes
    model.learn_many(X, np.where(X.mean(axis=1) > np.median(X.mean(axis=1)), positive, negative))
    state = ServiceState(model=model, offsets={"in": {0: 10_000}}, topic_ids={"in": None},
                         group=new_bookkeeping("worker-0"))
    state.group["folded"] = {f"worker-{k}": 10_000 for k in range(1, peers + 1)}
    meta, arrays = model.to_checkpoint(state.extra())
    whole = model_checkpoint.dumps(meta, arrays)
    coefficients = model_checkpoint.dumps(*coefficient_snapshot(meta, arrays, basis, 1))
    seconds = {"whole": [], "coefficients": []}
    for _ in range(rounds):
        for kind, value in (("whole", whole), ("coefficients", coefficients)):
            start = time.perf_counter()
            parse_snapshot(b"worker-0", value, 0, held=lambda epoch, key: basis)
            seconds[kind].append(time.perf_counter() - start)
    return {"whole_snapshot_bytes": len(whole), "coefficient_snapshot_bytes": len(coefficients),
            "read_whole_s": min(seconds["whole"]),
            "read_coefficients_s": min(seconds["coefficients"])}


COLUMNS = [("stream", "stream", ""), ("workers", "W", "d"), ("method", "fold", ""),
           ("syncs", "syncs", "d"), ("fold_s", "fold s", ".4f"), ("rebuild_s", "rebuild s", ".3f"),
           ("project_s", "project s", ".3f"), ("refresh_s", "refresh s", ".2f"),
           ("snapshot_bytes", "bytes/sync", ",d"), ("projection_loss", "proj. loss", ".2e"),
           ("clean", "clean", ".4f"), ("pgd", "PGD", ".4f"), ("prequential", "served", ".4f"),
           ("clean_in_spread", "clean ok", ""), ("pgd_in_spread", "PGD ok", ""),
           ("seconds", "run s", ".0f")]


def main() -> None:
    p = common.parser(__doc__, data=True)
    p.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    p.add_argument("--sync-every", type=int, default=100, help="samples per worker between syncs")
    p.add_argument("--refresh-every", type=int, default=1,
                   help="syncs between basis refreshes once the basis is full (1: every sync, "
                        "as `advsvm serve --basis-refresh-every` defaults to)")
    p.add_argument("--budget", type=int, default=1024)
    p.add_argument("--union-max", type=int, default=4, help="largest W run with the union fold")
    p.add_argument("--fold-peers", type=int, default=16, help="peers in the fold timing")
    p.add_argument("--rounds", type=int, default=5, help="repetitions of the fold timing")
    p.add_argument("--epsilon", type=float, default=0.1, help="PGD radius (L-inf)")
    p.add_argument("--pgd-samples", type=int, default=1000, help="test samples attacked")
    p.add_argument("--last", type=int, default=3000, help="the single model's last samples")
    p.add_argument("--every", type=int, default=500, help="between the scored last iterates")
    p.add_argument("--own-steps", dest="group_steps", action="store_false",
                   help="workers step as if alone (without `group_steps(W)`)")
    p.add_argument("--streams", nargs="+", default=["mnist", "bananas"])
    p.add_argument("--shifted-copies", type=int, default=0, metavar="K",
                   help="MNIST's training stream followed by K copies of it shifted by up to "
                        "two pixels, shuffled: K + 1 times the samples per worker")
    p.add_argument("--fold-only", action="store_true", help="only the fold timing (MNIST)")
    p.add_argument("--methods", nargs="+", default=["union", "basis"],
                   choices=["union", "basis"])
    common.add_averaging_option(p)
    args = p.parse_args()
    AVERAGING.update(common.averaging_of(args))
    records: list[dict] = []
    with common.one_blas_thread():
        if args.quick:
            data, budget = synthetic(), 64
            args.last, args.every, args.pgd_samples = 600, 200, 200
            args.workers = [w for w in args.workers if w <= 4]
            fold_timing(data, budget, min(args.fold_peers, 4), records, args)
            run_stream("synthetic", data, budget, args, records)
        else:
            for name in args.streams:
                data = mnist(args.data, args.shifted_copies) if name == "mnist" else bananas()
                if name == "mnist":
                    fold_timing(data, args.budget, args.fold_peers, records, args)
                if args.fold_only:
                    continue
                run_stream(name, data, args.budget if name == "mnist" else 256, args, records)
    print(common.format_table([r for r in records if "method" in r], COLUMNS))
    print(common.machine_line(common.machine()))
    for r in records:
        r.update(common.machine(), averaging=AVERAGING["averaging"])
    common.write_records(records, args.out, "scaleout_sim", args.quick)


if __name__ == "__main__":
    main()
