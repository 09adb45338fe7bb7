"""The inputs a batch would add to a model, counted against its `max_features` before any row
is learned.

A model refuses a whole batch, learning none of it, if learning it would give the model more
than `max_features` inputs. The count covers the rows a warm-up holds back (`gamma='scale'`
fits its bandwidths on them first): every input of a held row, zero-valued ones too, takes a
column when the warm-up ends, so that a checkpoint can hold the rows. `NewInputs` keeps the
held rows' inputs up to date as rows are held, so that each held row is looked at once, and
remembers the names it validated last, so that a stream repeating its keys is validated once.

"""

from __future__ import annotations

import numpy as np

from river_advsvm import inputs

__all__ = ["NewInputs", "Rows"]

# What the refusal advises: a stream whose names never stop coming (words, ids) grows every
# stored vector by a column per name, so its cost and memory follow the names ever seen.
OPEN_VOCABULARY = ("; a stream whose input names keep coming (words, ids) needs them hashed "
                   "into a fixed number first, e.g. River's preprocessing.FeatureHasher")


class Rows:
    """Samples to learn or predict: runs of rows that share their feature names."""

    def __init__(self, runs: list[tuple[list, np.ndarray]]):
        self.runs = runs

    @classmethod
    def of(cls, X, missing_ok) -> Rows:
        """From a DataFrame, a 2-D array, or a list of feature dicts; `missing_ok`, one bool
        or one per row, says where NaN is a missing input rather than an error."""
        if isinstance(X, (list, tuple)):
            runs: list = []
            for names, values in inputs.rows_values(X, missing_ok):
                if runs and runs[-1][0] == names:
                    runs[-1][1].append(values)
                else:
                    runs.append((names, [values]))
            return cls([(names, np.array(rows).reshape(len(rows), len(names)))
                        for names, rows in runs])
        names, values = inputs.frame_values(X, missing_ok)
        # Rows of a C-ordered matrix: pandas hands over a column-major one, and a strided row
        # rounds its dot products otherwise than the same row from a dict (`learn_one`).
        return cls([(names, np.ascontiguousarray(values))])

    def __len__(self) -> int:
        return sum(len(values) for _, values in self.runs)

    def split(self, at: int) -> tuple[Rows, Rows]:
        """The first `at` rows and the others."""
        head, tail, i = [], [], 0
        for names, values in self.runs:
            cut = min(max(at - i, 0), len(values))
            if cut:
                head.append((names, values[:cut]))
            if cut < len(values):
                tail.append((names, values[cut:]))
            i += len(values)
        return Rows(head), Rows(tail)


class NewInputs:
    """The inputs rows bring to a model whose columns are `index`, at most `max_features`.

    `held` (the model's rows held back for a warm-up: `(names, row, label)`) is passed to each
    call: the model owns that list, and saves it.
    """

    def __init__(self, index: inputs.FeatureIndex, max_features: int):
        self.index = index
        self.max_features = max_features
        # (held rows looked at, their inputs the index does not know with hashes, the latest
        # names): see `held_inputs`.
        self._held_cache: tuple[int, dict, list | None] = (0, {}, None)
        # The lookup whose unknown names were last validated (see `check`).
        self.names_checked: inputs.Columns | None = None

    def __getstate__(self) -> dict:
        # Which lookup was checked last is a cache (set before a sample can be refused): not
        # state, as the index's own lookup is not.
        return {**self.__dict__, "names_checked": None}

    def check_unknown(self, n_unknown: int) -> None:
        """`InvalidInput` for a sample with more inputs the model does not know than
        `max_features`."""
        if n_unknown > self.max_features:
            raise inputs.InvalidInput(
                f"the sample has {n_unknown} inputs the model does not know, more than "
                f"max_features={self.max_features}{OPEN_VOCABULARY}", "too_many_features")

    def check(self, rows: Rows, labels: list, held: list, to_hold: int) -> dict:
        """The hashes of the inputs these rows bring (which validates their names), with the
        rows still to hold before the warm-up ends (`to_hold`); refuses the lot if learning
        them would make more than `max_features` inputs."""
        held_inputs = self.held_inputs(held) if held else {}
        labelled = [i for i, y in enumerate(labels) if y is not None] if to_hold else []
        if len(labelled) > to_hold:
            # The warm-up ends within the batch: then only the inputs nonzero in a held row
            # take a column, and the rows after it count from there, as in a learn_one loop.
            end = labelled[to_hold - 1] + 1
            warm_up, after = rows.split(end)
            hashes = self._count(warm_up, labels[:end], held_inputs, to_hold)
            started = {n: hashes[n]
                       for n in self._inputs_of_held_rows(warm_up, labels[:end], held)}
            return {**hashes, **self._count(after, labels[end:], started, 0)}
        return self._count(rows, labels, held_inputs, to_hold)

    def _inputs_of_held_rows(self, rows: Rows, labels: list, held: list) -> list:
        """The inputs the index does not know that are nonzero in a held row or in one of
        `rows` with a label (all of them held): those that take a column when the warm-up ends."""
        position = self.index.position
        runs = [(names, row[None, :]) for names, row, _ in held]
        i = 0
        for names, values in rows.runs:
            is_held = np.array([y is not None for y in labels[i : i + len(values)]], dtype=bool)
            runs.append((names, values[is_held]))
            i += len(values)
        found: dict = {}  # (an ordered set)
        for names, values in runs:
            nonzero = np.count_nonzero(values, axis=0).tolist()
            found.update(dict.fromkeys(n for n, k in zip(names, nonzero)
                                       if k and n not in position))
        return list(found)

    def _count(self, rows: Rows, labels: list, held: dict, to_hold: int) -> dict:
        """`check` with the inputs of the held rows (`held`, by name with their hashes) and the
        rows still to hold before the warm-up ends (`to_hold`) given."""
        index = self.index
        learned: dict = {}  # inputs of learned rows beyond the held ones
        predicted: dict = {}
        # A held row keeps all its inputs, zero-valued ones too (the warm-up fits on them):
        # they count as the held ones do, so that a checkpoint can hold the rows.
        holding: dict = {}
        i = 0
        for names, values in rows.runs:
            labelled = sum(y is not None for y in labels[i : i + len(values)]) if to_hold else 0
            if to_hold and held and names == self._held_cache[2]:
                # The keys of the latest held row: every input is held already.
                to_hold -= min(to_hold, labelled)
                i += len(values)
                continue
            if labelled:
                to_hold -= min(to_hold, labelled)
                holding.update(dict.fromkeys(n for n in names if n not in held
                                             and n not in index.position))
            columns = index.lookup(names)
            unknown = columns.unknown
            if len(unknown) and columns is not self.names_checked:
                # Every name a row carries may be kept (zero-valued ones too: the inputs an
                # attacker may move), so every new one must be one a checkpoint can hold.
                # The index hands back the same lookup while the names repeat and it learns
                # no input: names checked once are not checked again.
                inputs.check_storable_names([names[j] for j in unknown.tolist()])
                self.names_checked = columns
            # Inputs the model does not know are usually 0 (a pixel never lit in training).
            # (`take` and `count_nonzero`: a fancy index of a 2-D array and `any` cost several
            # times more.)
            if len(unknown) and np.count_nonzero(unknown_values := values.take(unknown, axis=1)):
                nonzero = unknown_values != 0
                # (A row only predicted may bring at most max_features unknown inputs too:
                # refused here, before any row of the batch is learned.)
                self.check_unknown(int(nonzero.sum(axis=1).max()))
                is_learned = np.fromiter((y is not None for y in labels[i : i + len(values)]),
                                         dtype=bool, count=len(values))
                for mask, found in [(is_learned, learned), (~is_learned, predicted)]:
                    columns = nonzero[mask].any(axis=0)
                    found.update(dict.fromkeys(n for j in unknown[columns].tolist()
                                               if (n := names[j]) not in held))
            i += len(values)
        new = {**holding, **learned}
        total = len(index) + len(held) + len(new)
        if total > self.max_features:
            past = list(new)[self.max_features - len(index) - len(held)]
            raise inputs.InvalidInput(
                f"learning this would give the model {total} inputs, more than "
                f"max_features={self.max_features} (the first past it: "
                f"{inputs.shown_name(past)}){OPEN_VOCABULARY}", "too_many_features")
        if not learned and not predicted:  # (a copy: the caller adds to it)
            return dict(held)
        names = [n for n in {**learned, **predicted} if n not in held]
        return {**held, **dict(zip(names, index.hash_names(names).tolist()))}

    def latest_held_names(self, held: list) -> list | None:
        """The names of the latest held row (whose inputs are hashed already), or None."""
        self.held_inputs(held)
        return self._held_cache[2]

    def held_inputs(self, held: list, hashes: dict | None = None) -> dict:
        """The inputs of the held rows that the index does not know, with their hashes; kept up
        to date as rows are held, so that each held row is looked at once. `hashes` may hold
        the hashes of new ones (what `check` returned)."""
        count, found, last = self._held_cache
        if count > len(held):  # the held rows were learned: start again
            count, found, last = 0, {}, None
        position = self.index.position
        for names, _, _ in held[count:]:
            if names == last:  # a stream repeating its keys: nothing new
                continue
            last = names
            new = list(dict.fromkeys(n for n in names if n not in position and n not in found))
            if hashes is not None and all(n in hashes for n in new):
                found.update((n, hashes[n]) for n in new)
            else:
                found.update(zip(new, self.index.hash_names(new).tolist()))
        self._held_cache = (len(held), found, last)
        return found
