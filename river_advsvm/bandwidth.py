"""The kernel bandwidth of `AdvKernelSVM`: a number, one per input, or `gamma='scale'`, fitted
on the first labelled samples (the warm-up), which a kernel vote of those samples predicts for
meanwhile.

The warm-up costs each sample about what a step of a model of that many support vectors
costs: the held rows keep running statistics per input (range, shifted sums of values and
squares, nonzero counts), from which the bandwidths follow in O(inputs), and the vote is a
float32 matrix-vector product with the held rows. The vote's bandwidths are fitted again each
time the held rows reach a power of two (1, 2, 4, ...; an input first held since gets their
median), so that a prediction costs that one product and not a fit and a product with every
row's squares: between two fits, each row's weighted squared norm is computed once, as it
arrives. Inputs are reduced over in the order of their name hashes, as the model stores them:
the fitted bandwidths, and the vote, do not depend on the order of a sample's keys.

"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm import inputs, kernels

__all__ = ["FAR_FROM_ZERO", "MAX_SHORTFALL", "MIN_INPUT_GAMMA", "OTHER_UNITS", "RANGE_POWERS",
           "SCALE_FACTOR", "HeldRows", "WarmUpRows", "check_gamma"]

#: `gamma='scale'` is this many times scikit-learn's `1 / (d Var X)` (see `AdvKernelSVM`).
SCALE_FACTOR = 2.0
#: `gamma='scale'`: an input whose range is this many times below the median range is in
#: other units than the rest (see `HeldRows.gammas`).
OTHER_UNITS = 10.0
#: `gamma='scale'`: an input whose warm-up mean is more than this many of its ranges from 0 (a
#: year, a temperature in kelvin) is measured about that mean, and centred on it (`centres`).
FAR_FROM_ZERO = 2.0
#: `gamma='scale'` gives input `j` of range `s_j` the bandwidth `c / s_j^p`: the RBF kernel's
#: exponent holds squared differences, the Laplacian's their absolute values, so that either
#: is then the same kernel of the inputs in units of their ranges, `c sum_j (Δ_j / s_j)^p`.
RANGE_POWERS = {"rbf": 2, "laplacian": 1}
#: `gamma='scale'`: inputs whose median range calls for a width up to this many times past the
#: largest accepted (`kernels.MAX_GAMMA`) take the largest (RBF: median ranges down to about
#: 1e-7, where it still tells samples apart); past that, the fit falls back to 1/d.
MAX_SHORTFALL = 1e4
#: The smallest width of one input in a `gamma` dict: an input's factor `(gamma_j / gamma)^p`
#: then stays a number the certificate can divide by (1e-320 beside 1e10 made it 0).
MIN_INPUT_GAMMA = 1e-300
#: The rows of `HeldRows._stats`: the running statistics kept per input.
_LOW, _HIGH, _SHIFT, _SUMS, _SQUARES, _NONZERO, _UNIT = range(7)
#: An input whose values lie within this of its shift sums its squares in its own units
#: (`_unit`): squared in float64, differences below 1e-154 lose their digits or vanish.
_TINY = 2.0**-400
_NORMAL = float(np.finfo(np.float64).tiny)  # the smallest normal float64, 2.2e-308


class HeldRows:
    """Held rows as a dense matrix over their inputs (absent inputs are 0), grown one row at a
    time with spare room, with what `gamma='scale'` fits on them kept up to date.

    Per input `j`: its lowest and highest value over the rows (absent counts as 0), how many
    rows have it nonzero, and the sums of `x_ij - c_j` and of `((x_ij - c_j) / u_j)^2`, shifted
    by `c_j`, the input's value in the row where it first appeared (so that an input far from
    0 with a small range keeps its digits), the squares in units `u_j`, 1 but for an input
    whose values all lie within `_TINY` of `c_j` (so that their squares do not underflow).
    These are the rows of one matrix, its columns in the order of the name hashes.

    The matrix, and the matrix of its squares, hold the rows less the shifts `c_j` (the vote's
    distances do not depend on them, and float32 keeps the digits of an input far from 0), and
    have their columns in the order of the name hashes, so that the vote's products do not
    depend on the order of the keys either (a row bringing new inputs lays the held rows out
    again: rare past the first rows). They are float32: only the vote reads them (the
    statistics are float64, from each row as it arrives), and a provisional vote does not need
    more (the support vectors are float32 by default too).
    """

    def __init__(self, kernel: str = "rbf"):
        self.kernel = kernel  # (what the bandwidths are for: see RANGE_POWERS)
        self.index = inputs.FeatureIndex()  # the inputs, with their columns and name hashes
        self._X = np.zeros((16, 16), dtype=np.float32)
        self._X2 = np.zeros((16, 16), dtype=np.float32)  # the squares
        self.size = 0
        # Per input: lowest, highest, shift c_j, sum_i (x_ij - c_j), sum_i ((x_ij - c_j) / u_j)^2,
        # rows with x_ij != 0, the unit u_j; rows of one matrix, so that the fit reorders them
        # in one call.
        self._stats = np.zeros((7, 16))
        self._units = False  # whether an input has a unit other than 1
        # other_units -> (rows, bandwidths, why): see gammas
        self._fitted: dict = {}
        # The vote's bandwidths over every held input (in the hashes' order), as float32 too,
        # their median (None until asked), and each held row's `sum_j g_j x_ij^2`: see _vote_fit.
        self._vote_gammas = np.empty(0)
        self._vote_gammas32 = np.empty(0, dtype=np.float32)
        self._vote_median: float | None = None
        self._vote_squares = np.zeros(16)
        # The inputs in the order of their name hashes, and the place of each in that order.
        self._order = np.empty(0, dtype=np.intp)
        self._rank = np.empty(0, dtype=np.intp)
        self._placed: tuple | None = None  # (a lookup, its places): see _places

    @property
    def names(self) -> list:
        """The inputs, in the order of their name hashes (the matrix's columns)."""
        names = self.index.names
        return [names[j] for j in self._order.tolist()]

    @property
    def matrix(self) -> np.ndarray:
        """The held rows less each input's shift (the vote's distances do not depend on it,
        and float32 keeps the digits of inputs far from 0), columns in the order of the name
        hashes."""
        return self._X[: self.size, : len(self.index)]

    def append(self, names: list, row: np.ndarray, hashes: dict) -> None:
        """Hold one more row: `row` over `names`; `hashes` gives the name hash of each input
        the rows hold (see `MarginClassifier._held_inputs`)."""
        columns = self.index.lookup(names)
        if len(columns.unknown):
            new = [names[j] for j in columns.unknown.tolist()]
            self._grow(len(self.index) + len(new))
            start = len(self.index)
            self.index.add(new, np.array([hashes[n] for n in new], dtype=np.uint64))
            # Until the next fit, the vote weighs a new input at the median bandwidth.
            median = self._median_vote_gamma() if start else 0.0
            vote_gammas = self._vote_gammas[self._rank]  # in the index's order, across the sort
            self._sort_columns(start)
            self._vote_gammas = np.empty(len(self.index))
            self._vote_gammas[self._rank[:start]] = vote_gammas
            self._vote_gammas[self._rank[start:]] = median
            self._vote_gammas32 = self._vote_gammas.astype(np.float32)
            self._vote_median = None
            # Earlier rows lack the new inputs (0); the shift is the value they first have.
            first = row.take(columns.unknown)
            stats = self._stats[:, self._rank[start:]]
            stats[_SHIFT] = first
            stats[_SUMS] = -self.size * first
            stats[_UNIT] = _unit(np.abs(first) if self.size else np.zeros(len(first)))
            self._units |= bool((stats[_UNIT] != 1.0).any())
            stats[_SQUARES] = self.size * np.square(first / stats[_UNIT])
            stats[_LOW] = first if not self.size else 0.0
            stats[_HIGH] = first if not self.size else 0.0
            self._stats[:, self._rank[start:]] = stats
            if self.size:  # the earlier rows' 0, less the shift
                placed = self._rank[start:]
                self._X[: self.size, placed] = -first
                self._X2[: self.size, placed] = first * first
                self._vote_squares[: self.size] = (self._X2[: self.size, : len(self.index)]
                                                   @ self._vote_gammas32)
            columns = self.index.lookup(names)
        d = len(self.index)
        if self.size == len(self._X):
            for name in ("_X", "_X2"):
                old = getattr(self, name)
                grown = np.zeros((2 * len(old), old.shape[1]), dtype=np.float32)
                grown[: self.size] = old[: self.size]
                setattr(self, name, grown)
            self._vote_squares = np.concatenate([self._vote_squares,
                                                 np.zeros(len(self._vote_squares))])
        x = np.zeros(d)  # the row over every input, in the hashes' order
        x[self._places(columns)] = row
        low, high, shift, sums, squares, nonzero, unit = self._stats[:, :d]
        np.minimum(low, x, out=low)
        np.maximum(high, x, out=high)
        shifted = x - shift
        sums += shifted
        squared = shifted * shifted
        # A nonzero difference below _TINY squares to below _TINY^2 (or to 0, as 0 does): more
        # squares below it than differences of 0.
        if self._units or (np.count_nonzero(squared < _TINY * _TINY)
                           > d - np.count_nonzero(shifted)):
            # Units that follow each input's reach; a unit only grows once set (a squared sum
            # is 0 until then), and the sums in the old one shrink to the new.
            self._units = True
            units = _unit(np.maximum(high - shift, shift - low))
            ratio = np.divide(unit, units, out=np.ones(d), where=squares != 0.0)
            squares *= ratio * ratio
            unit[:] = units
            squares += np.square(shifted / units)
        else:
            squares += squared
        nonzero += x != 0
        self._X[self.size, :d] = shifted
        # In float32 the vote's squares may pass its range: +inf, a kernel value of 0.
        with np.errstate(over="ignore"):
            self._X2[self.size, :d] = squared
            self.size += 1
            if self.size & (self.size - 1):
                self._vote_squares[self.size - 1] = float(self._X2[self.size - 1, :d]
                                                          @ self._vote_gammas32)
            else:
                self._vote_fit()

    def _vote_fit(self) -> None:
        """Fit the vote's bandwidths on the rows held (every range floored at the median: too
        few rows yet to tell an input in other units from a pixel barely lit), and every row's
        weighted squared norm with them."""
        fitted, why = self.gammas(other_units=False)
        d = len(self.index)
        self._vote_gammas = np.full(d, fitted) if np.ndim(fitted) == 0 else fitted
        self._vote_gammas32 = self._vote_gammas.astype(np.float32)
        self._vote_median = None
        squares = self._X2[: self.size, :d] @ self._vote_gammas32
        self._vote_squares[: self.size] = squares.astype(np.float64)

    def _median_vote_gamma(self) -> float:
        if self._vote_median is None:
            self._vote_median = _median(self._vote_gammas)
        return self._vote_median

    def _places(self, columns: inputs.Columns) -> np.ndarray:
        """Where each of a lookup's names goes among the inputs in the hashes' order; kept
        while the names repeat (the index hands back the same lookup)."""
        if self._placed is None or self._placed[0] is not columns:
            self._placed = (columns, self._rank[columns.positions])
        return self._placed[1]

    def _sort_columns(self, before: int) -> None:
        """The hash order over every input, the first `before` of which the matrices and the
        statistics hold in the previous one: their columns move to their new places."""
        old = self._order
        self._order = np.argsort(self.index.hashes, kind="stable")
        self._rank = np.empty_like(self._order)
        self._rank[self._order] = np.arange(len(self._order))
        self._placed = None
        if before:
            for M, rows in ((self._X, self.size), (self._X2, self.size),
                            (self._stats, len(self._stats))):
                held = M[:rows, :before].copy()
                M[:rows, : len(self._order)] = 0.0
                M[:rows, self._rank[old]] = held

    def _grow(self, d: int) -> None:
        """Room for `d` inputs."""
        if d <= self._X.shape[1]:
            return
        columns = max(d, 2 * self._X.shape[1])
        for name in ("_X", "_X2"):
            old = getattr(self, name)
            grown = np.zeros((len(old), columns), dtype=np.float32)
            grown[: self.size, : old.shape[1]] = old[: self.size]
            setattr(self, name, grown)
        grown = np.zeros((len(self._stats), columns))
        grown[:, : self._stats.shape[1]] = self._stats
        self._stats = grown

    def gammas(self, other_units: bool = True) -> tuple[np.ndarray | float, str | None]:
        """`gamma='scale'` on the rows held: one bandwidth per input (in the order of the name
        hashes, as the matrix's columns), or 1/d; and why they are not the widths the ranges
        call for (None when they are). Without `other_units`, every range is floored at the
        median. Cached until a row is added."""
        fitted = self._fitted_with_centres(other_units)
        return fitted[0], fitted[1]

    def _fitted_with_centres(self, other_units: bool) -> tuple:
        fitted = self._fitted.get(other_units)
        if fitted is None or fitted[0] != self.size:
            fitted = self._fitted[other_units] = (self.size, *self._fit(other_units))
        return fitted[1:]

    def _fit(self, other_units: bool) -> tuple[np.ndarray | float, str | None, np.ndarray, int]:
        d = len(self.index)
        # (Sums over inputs in the hashes' order do not depend on the order of the keys.)
        low, high, shift, sums, squares, nonzero, unit = self._stats[:, :d]
        # A range among float64's subnormals has no reciprocal: such an input is constant.
        spread = high - low
        spread[spread < _NORMAL] = 0.0
        median = _median(spread[spread > 0])
        d = max(d, 1)
        if median > 0:
            # Each input in units of its range, floored at the median range: inputs of
            # different units become comparable, and inputs of one kind (pixels) share one
            # scale, so that one that barely varied in the warm-up is not blown up. An input in
            # other units, mostly nonzero and with a range below a tenth of the median (an age
            # beside amounts of money), keeps its own, unless it is mostly one value far from
            # 0 (an image's background: see _backgrounds). Then twice scikit-learn's 1 / (d Var X)
            # over every entry: one online pass learns better with the narrower kernel
            # (measured on River's streams, digits and MNIST; see the gamma parameter of
            # AdvKernelSVM).
            floored = 0  # inputs in small units measured in the median range
            if other_units:
                dense = 2 * nonzero >= self.size
                own = dense & (spread > 0) & (OTHER_UNITS * spread < median)
                if own.any():
                    own[own] = ~self._backgrounds(np.flatnonzero(own), spread)
                # Inputs in other units are a few among the rest; past sqrt(d) of them, they
                # are inputs of the kind of the others that barely vary (pixels of a faintly
                # noisy background, each its own noise: taken as units, they weighed up to
                # 10^4 times a lit pixel, and the kernel measured the noise).
                kept = int(np.count_nonzero(own))
                if kept > math.sqrt(d):
                    floored = kept
                    own[:] = False
                spread = np.where(own, spread, np.maximum(spread, median))
            else:  # (the vote's fit, once per prediction of the warm-up)
                spread = np.maximum(spread, median)
            n = self.size
            inverse = 1.0 / spread  # 1 / s_j (every s_j >= some range > 0)
            # The kernel sees differences only: an input far from 0 next to its range counts
            # by its spread about its mean, not by its distance from 0 (which would swamp the
            # variance: inputs 100 +- 1 gave a kernel 40 times too wide, and chance accuracy).
            # (The vote measures every input about its mean: measured by progressive
            # validation over samples that never leave the warm-up, 5 of them per data set,
            # the vote's accuracy rose from 71% to 95% on scikit-learn's wine, from 76% to 87%
            # on iris and from 74.1% to 82.5% on its digits; the model's own fit keeps inputs
            # near 0 as they were.)
            means = shift + sums / n
            with np.errstate(over="ignore"):  # (an overflow is as far from 0 as can be)
                far = np.abs(means) * inverse > FAR_FROM_ZERO
            centres = np.where(far, means, 0.0) if other_units else means
            offset = (shift - centres) * inverse  # (c_j - centre_j) / s_j
            sums = sums * inverse
            mean = (sums.sum() / n + offset.sum()) / d
            # sum_ij (x_ij / s_j - mean)^2, from the shifted sums: sum_j of squares_j / s_j^2
            # + 2 (c_j / s_j - mean) sums_j / s_j + n (c_j / s_j - mean)^2.
            centre = offset - mean
            scaled = unit * inverse  # 1 / s_j in the units of the squares
            total = float((squares * scaled) @ scaled
                          + 2.0 * (centre @ sums) + n * (centre @ centre))
            variance = max(total / (n * d), 0.0)
            if variance > 0:
                # gamma_j = c / s_j^power (RANGE_POWERS): the smallest comes from the widest
                # s_j, the median's from the median range, so an absurd fit is refused before
                # any is formed. An input in its own units narrower still takes at most the
                # largest bandwidth accepted: one input in micro-units no longer throws the
                # whole fit away.
                c = SCALE_FACTOR / (d * variance)
                power = RANGE_POWERS[self.kernel]
                widest = float(inverse.min())
                # (Divided twice: a median range below 1e-154 squares to 0. Multiplied, not
                # raised to a power: a float's ** raises OverflowError where * gives inf.)
                squared = power == 2
                wanted = c / median / (median if squared else 1.0)  # the median input's
                if (c * (widest * widest if squared else widest) > 0
                        and wanted <= MAX_SHORTFALL * kernels.MAX_GAMMA):
                    with np.errstate(over="ignore"):  # (inf: capped just below)
                        if squared:
                            inverse *= inverse
                        inverse *= c
                    np.minimum(inverse, kernels.MAX_GAMMA, out=inverse)
                    # Inputs in small units (ranges of 1e-6) take the largest width: still
                    # narrow enough to tell their samples apart, where 1/d would not.
                    too_narrow = (f"vary by too little for their widths (median range "
                                  f"{median:.3g})" if wanted > kernels.MAX_GAMMA else None)
                    return inverse, too_narrow, centres, floored
        why = "do not vary" if median == 0 else f"vary by too little (median range {median:.3g})"
        return 1.0 / d, why, np.zeros(0), 0

    def _backgrounds(self, columns: np.ndarray, spread: np.ndarray) -> np.ndarray:
        """Whether each input of `columns` holds one value in more than half the rows, a value
        farther from 0 than `FAR_FROM_ZERO` of its range: the background of an image whose
        pixels are not 0 there (1 on white paper, -1 in pixels scaled to [-1, 1]). Such a
        pixel is nonzero in most rows like an input in other units, but its range in the
        warm-up is that of the few strokes that reached it, not a unit: taken as its own, it
        gave widths 10^4 times the other pixels', and a model that an attack moving those
        pixels by 0.1 defeated."""
        n = self.size
        X = self._X[:n, columns]  # (less the shifts: a value repeats where its row's does)
        # A value held by more than half the rows is the middle one in their order.
        middle = np.partition(X, n // 2, axis=0)[n // 2]
        majority = 2 * np.count_nonzero(X == middle, axis=0) > n
        value = self._stats[_SHIFT, columns] + middle
        return majority & (np.abs(value) > FAR_FROM_ZERO * spread[columns])

    def fitted(self) -> tuple[dict | float, str | None, dict | None, int]:
        """`gammas` as a dict of one bandwidth per input name, in the order of their hashes,
        the centres of the inputs far from 0 by name (None if there are none), and how many
        inputs in small units it measured in the median range as inputs of the others' kind
        that barely vary (more than sqrt(d) of them: see `_fit`; else 0)."""
        fitted, why, centres, floored = self._fitted_with_centres(True)
        if np.ndim(fitted) == 0:  # 1/d
            return fitted, why, None, floored
        far = {n: c for n, c in zip(self.names, centres.tolist()) if c != 0.0}
        by_name = dict(zip(self.names, fitted.tolist()))
        capped = [n for n, g in by_name.items() if g >= kernels.MAX_GAMMA]
        if capped and why is None:  # (some inputs only: their ranges, not the median, are tiny)
            shown = ", ".join(inputs.shown_name(n) for n in capped[:3])
            why = (f"hold {len(capped)} input{'s' if len(capped) > 1 else ''} ({shown}"
                   f"{', ...' if len(capped) > 3 else ''}) whose range calls for a width past "
                   "the largest; such an input counts as much as the others (one constant but "
                   "for rounding noise, as an adaptive scaler gives, is better dropped)")
        return by_name, why, far or None, floored

    def vote(self, names: list, values: np.ndarray, signs: np.ndarray, kernel: str) -> np.ndarray:
        """`sum_i y_i k(x, x_i) / n` over the held rows for each row of `values` (over
        `names`), with the vote's bandwidths (see the module)."""
        if not len(values):  # (no row to stack the Laplacian's distances of)
            return np.zeros(0)
        X = self.matrix
        gammas, squares = self._vote_gammas, self._vote_squares[: self.size]
        columns = self.index.lookup(names)
        if columns.identity:  # the held inputs in their order: to the hashes' order at once
            Z = values[:, self._order]
        else:
            Z = np.zeros((len(values), X.shape[1]))
            Z[:, self._rank[columns.known_columns]] = values[:, columns.known]
        Z -= self._stats[_SHIFT, : X.shape[1]]  # as the held rows are
        # Inputs the held rows never had add the same distance to every held row (at the
        # median bandwidth; with no input held yet, `_fit`'s fallback 1/1), summed in the
        # order of their values: not of the keys.
        spread = ((self._median_vote_gamma() if len(gammas) else 1.0) if len(columns.unknown)
                  else 0.0)
        extra = np.sort(np.abs(values[:, columns.unknown]), axis=1) if spread else None
        if kernel == "rbf":
            # ||z - x_i||^2 weighted: sum g z^2 + sum g x_i^2 - 2 sum g z x_i.
            weighted = Z * gammas
            distances = np.einsum("ij,ij->i", weighted, Z)[:, None]
            if spread:
                distances += ((extra * extra).sum(axis=1) * spread)[:, None]
            products = weighted.astype(np.float32) @ X.T
            products *= -2.0
            distances = distances + products
            distances += squares
            np.maximum(distances, 0.0, out=distances)
        else:
            distances = np.stack([np.abs(X - z) @ gammas for z in Z])
            if spread:
                distances += (extra.sum(axis=1) * spread)[:, None]
        np.negative(distances, out=distances)
        return np.exp(distances, out=distances) @ signs / len(signs)


class WarmUpRows:
    """What `gamma='scale'` keeps of a model's held rows (`(names, row, label)` in the order
    they arrived): them as `HeldRows`, each placed once, so that the warm-up stays linear in its
    length, and the signs of their labels for the kernel vote that predicts meanwhile. A list
    shorter than the rows placed (it was learned) starts them again."""

    def __init__(self, kernel: str = "rbf"):
        self.kernel = kernel
        self._rows: HeldRows | None = None
        self._signs: list[float] = []

    def rows(self, held: list, held_inputs) -> HeldRows:
        """The held rows, brought up to date; `held_inputs()` gives the hashes of their inputs
        that the model does not know (`MarginClassifier._held_inputs`)."""
        if self._rows is None or self._rows.size > len(held):
            self._rows, self._signs = HeldRows(self.kernel), []
        rows = self._rows
        if rows.size < len(held):
            hashes = held_inputs()
            for names, row, _ in held[rows.size :]:
                rows.append(names, row, hashes)
        return rows

    def vote(self, held: list, held_inputs, positive, names: list, values: np.ndarray,
             kernel: str) -> np.ndarray:
        """`sum_i y_i k(x, x_i)` over the held rows, `y_i` +1 for the label `positive`."""
        rows = self.rows(held, held_inputs)
        # The signs, kept as rows arrive (all again when the second label changes which one
        # is positive).
        signs = self._signs
        if signs and signs[0] != (1.0 if held[0][2] == positive else -1.0):
            signs.clear()
        signs.extend(1.0 if y == positive else -1.0 for _, _, y in held[len(signs) :])
        return rows.vote(names, values, np.array(signs), kernel)


def _unit(reach: np.ndarray) -> np.ndarray:
    """The units of the squares of inputs whose values lie within `reach` of their shifts: 1,
    but for a reach below `_TINY` (and not 0), the power of two at or below it."""
    exponent = np.frexp(reach)[1]
    return np.where((reach > 0.0) & (reach < _TINY), np.ldexp(0.5, exponent), 1.0)


def _median(values: np.ndarray) -> float:
    """`np.median` of a 1-D array (0 if empty), without its generic machinery: one partition."""
    n = len(values)
    if not n:
        return 0.0
    middle = [(n - 1) // 2, n // 2]
    low, high = np.partition(values, middle)[middle].tolist()
    return low if n % 2 else (low + high) / 2


def check_gamma(gamma) -> dict | None:
    """Validate `gamma`; the per-feature dict, or None for a number or 'scale'."""
    if gamma == "scale":
        return None
    if isinstance(gamma, dict):
        if not gamma:
            raise ValueError("a gamma dict needs at least one feature")
        for name, value in gamma.items():
            inputs.encode_name(name)
            if not (inputs.is_number(value) and MIN_INPUT_GAMMA <= value <= kernels.MAX_GAMMA):
                raise ValueError(f"gamma[{name!r}] must be a number in "
                                 f"[{MIN_INPUT_GAMMA:g}, {kernels.MAX_GAMMA:g}], got {value!r}")
        return {n: float(g) for n, g in gamma.items()}
    if not (inputs.is_number(gamma) and 0 < gamma <= kernels.MAX_GAMMA):
        raise ValueError(f"gamma must be 'scale', a dict of per-feature bandwidths or a number "
                         f"in (0, {kernels.MAX_GAMMA:g}], got {gamma!r}")
    return None
