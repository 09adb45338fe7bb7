"""Per-input kernel bandwidths as factors on the inputs.

With a bandwidth `gamma_j` per input, the RBF kernel `exp(-sum_j gamma_j (x_j - x'_j)^2)` is
the kernel of one bandwidth `gamma` on rescaled inputs, `exp(-gamma ||q x - q x'||^2)` with
`q_j = sqrt(gamma_j / gamma)`. So the stores of `AdvKernelSVM` keep one bandwidth, the median
`gamma` (the factors stay near 1), and the model multiplies its rows by `q` before handing them
over. The chain rule through `x -> q x` is the same multiplication: the gradient of `f(q x)` is
`q f'(q x)`. The Laplacian kernel `exp(-sum_j gamma_j |x_j - x'_j|)` is `exp(-gamma |q x -
q x'|_1)` with `q_j = gamma_j / gamma`: the factor is `(gamma_j / gamma)^power`, with `power`
1/2 for RBF and 1 for Laplacian.

`InputScales` keeps the factors of the model's input columns, in their order, grown with spare
room as inputs arrive; an input the bandwidths do not name takes the median. When every input
has the same bandwidth there are no factors at all: rows pass through untouched, with no copy.

Two guards keep the stored rows' arithmetic finite and precise in float32:

- no factor exceeds `max_factor(max_features)`: where the bandwidths span more than that, the
  reference is raised above the median (`reference_gamma`), so that a squared distance over
  inputs of at most `inputs.MAX_ABS_VALUE` stays below float32's largest number;
- an input whose values sit far from 0 next to its kernel width (centred by `gamma='scale'`,
  see `bandwidth.FAR_FROM_ZERO`) is stored as `q_j (x_j - c_j)`, its centre subtracted: the
  squared distances from cached norms would otherwise lose every digit of its differences.
  The kernel only sees differences, so nothing else changes; gradients take the factors only.

A checkpoint keeps the reference bandwidth, and the bandwidths and centres `gamma='scale'`
fitted (`state`); `InputScales.restored` reads them back, checked against the model's own
parameters: a saved factor past what the model's `max_features` allows is refused.

Examples
--------

>>> import numpy as np
>>> from river_advsvm.input_scales import InputScales

>>> scales = InputScales({"age": 4.0, "pixel": 1.0, "salary": 0.25}, gamma=1.0, max_features=10)
>>> scales.add(["salary", "age"], 2)
>>> scales.columns(2).tolist()
[0.5, 2.0]
>>> scales.of(["pixel", "height"]).tolist()  # "height" has no bandwidth of its own: the median's
[1.0, 1.0]
>>> V, U = scales.scaled(np.array([[4.0, 3.0]]), np.array([[5.0]]), ["age"])
>>> V.tolist(), U.tolist()
([[2.0, 6.0]], [[10.0]])

>>> centred = InputScales({"year": 1.0, "pixel": 1.0}, gamma=1.0, max_features=10,
...                       centres={"year": 2000.0})
>>> centred.add(["year", "pixel"], 2)
>>> centred.scaled(np.array([[2003.0, 0.5]]), np.zeros((1, 0)), [])[0].tolist()
[[3.0, 0.5]]

>>> uniform = InputScales(None, gamma=0.1, max_features=10)
>>> uniform.columns(2) is None, uniform.scaled(V, U, ["age"])[0] is V
(True, True)

"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm import bandwidth, inputs, kernels

__all__ = ["InputScales", "as_pairs", "from_pairs", "max_factor", "reference_gamma"]

#: Columns of room to begin with.
_ROOM = 16


def max_factor(max_features: int, power: float = 0.5) -> float:
    """The largest factor an input may have. With `|x_j - c_j| <= 2e15` over `d <= max_features`
    inputs, the norms `||q (x - c)||^2` of two rows (RBF's squared distances) sum to at most
    `8e30 d q^2`, an L1 distance (Laplacian's) is at most `4e15 d q`: kept below half of
    float32's largest number (3.4e38)."""
    if power == 1.0:
        return 4e22 / max_features
    return math.sqrt(2e7 / max_features)


def reference_gamma(gamma: float | dict, max_features: int, power: float = 0.5) -> float:
    """The one bandwidth a store keeps for these per-input ones: their median, raised where
    needed so that no factor `(gamma_j / gamma)^power` exceeds `max_factor`."""
    if not isinstance(gamma, dict):
        return float(gamma)
    values = np.array(list(gamma.values()), dtype=np.float64)
    return max(float(np.median(values)),
               float(values.max()) / max_factor(max_features, power) ** (1.0 / power))


def as_pairs(by_name: dict) -> list:
    """Numbers by input name as JSON holds them: [name's encoding, number] pairs (JSON's keys
    are strings only)."""
    return [[inputs.encode_name(n), g] for n, g in by_name.items()]


def from_pairs(pairs) -> dict:
    """The numbers `as_pairs` wrote, by input name."""
    return {inputs.decode_name(n): g for n, g in pairs}


class InputScales:
    """The factors `q_j = (gamma_j / gamma)^power` of a model's input columns.

    Parameters
    ----------
    by_name
        One bandwidth per input name, or None when every input has the bandwidth `gamma`.
    gamma
        The bandwidth the factors are relative to (the median of `by_name`; a restored model's
        is the one it saved).
    max_features
        The most input columns there will be: the room never grows past it.
    power
        1/2 for a kernel of squared distances (RBF), 1 for one of L1 distances (Laplacian).
    centres
        The inputs stored about a centre, by name, or None (only with `by_name`).

    """

    def __init__(self, by_name: dict | None, gamma: float | None, max_features: int,
                 power: float = 0.5, centres: dict | None = None):
        self.by_name = by_name
        self.gamma = gamma
        self.max_features = max_features
        self.power = power
        self.centres = centres if by_name is not None and centres else None
        # What an input the bandwidths do not name takes.
        self._median = (float(np.median(np.array(list(by_name.values()), dtype=np.float64)))
                        if by_name else gamma)
        self._factors = np.ones(min(_ROOM, max_features))  # one per column, with spare room
        self._centres = np.zeros(len(self._factors))

    @property
    def uniform(self) -> bool:
        """True when every input has scale 1."""
        return self.by_name is None

    def of(self, names: list) -> np.ndarray:
        """The factor of each of these inputs."""
        if self.by_name is None:
            return np.ones(len(names))
        median, by_name = self._median, self.by_name
        ratios = np.array([by_name.get(n, median) for n in names]) / self.gamma
        return np.sqrt(ratios) if self.power == 0.5 else ratios ** self.power

    def centres_of(self, names: list) -> np.ndarray:
        """The centre of each of these inputs (0 for one stored as it is)."""
        if self.centres is None:
            return np.zeros(len(names))
        return np.array([self.centres.get(n, 0.0) for n in names], dtype=np.float64)

    def columns(self, d: int) -> np.ndarray | None:
        """The factors of the first `d` columns, or None when every input has scale 1."""
        return None if self.by_name is None else self._factors[:d]

    def column_centres(self, d: int) -> np.ndarray | None:
        """The centres of the first `d` columns, or None when no input is centred."""
        return None if self.centres is None else self._centres[:d]

    def row(self, v: np.ndarray) -> np.ndarray:
        """A row over the first columns as the store sees it: `q (v - c)` (`v` itself when
        every input has scale 1)."""
        if self.by_name is None:
            return v
        q = self._factors[: v.shape[-1]]
        if self.centres is None:
            return v * q
        return (v - self._centres[: v.shape[-1]]) * q

    def add(self, names: list, d: int) -> None:
        """The last `len(names)` of `d` columns are these new inputs."""
        if self.by_name is None:
            return
        if d > self.max_features:
            raise ValueError(f"{d} input columns, more than max_features={self.max_features}")
        if d > len(self._factors):
            room = min(max(d, 2 * len(self._factors)), self.max_features)
            grown, centres = np.ones(room), np.zeros(room)
            grown[: len(self._factors)] = self._factors
            centres[: len(self._centres)] = self._centres
            self._factors, self._centres = grown, centres
        self._factors[d - len(names) : d] = self.of(names)
        self._centres[d - len(names) : d] = self.centres_of(names)

    def rebuild(self, names: list) -> None:
        """The factors of these columns afresh (a restored model's, from its inputs' names)."""
        self._factors = np.ones(min(_ROOM, self.max_features))
        self._centres = np.zeros(len(self._factors))
        self.add(names, len(names))

    def scaled(self, V: np.ndarray, U: np.ndarray, u_names: list) -> tuple[np.ndarray, np.ndarray]:
        """Rows `V` over the first columns and `U` over the inputs `u_names` as the store sees
        them, `q (x - c)`; the same arrays when every input has scale 1."""
        if self.by_name is None:
            return V, U
        if len(u_names) and self.centres is not None:
            U = U - self.centres_of(u_names)
        return self.row(V), (U * self.of(u_names) if len(u_names) else U)

    def chained(self, GV: np.ndarray, GU: np.ndarray,
                u_names: list) -> tuple[np.ndarray, np.ndarray]:
        """Gradients with respect to the store's rows, as gradients with respect to the inputs
        (the chain rule through `x -> q (x - c)`: times `q`)."""
        if self.by_name is None:
            return GV, GU
        q = self._factors[: GV.shape[-1]]
        return GV * q, (GU * self.of(u_names) if len(u_names) else GU)

    # -- saved state -------------------------------------------------------------------------

    def state(self, fitted: bool) -> dict:
        """What a checkpoint keeps: the reference bandwidth and the power, and, when the
        bandwidths were `fitted` (by `gamma='scale'`, not given as the model's `gamma`), them
        and the centres."""
        state = {"gamma": self.gamma, "gamma_by_name": None, "scale_power": self.power}
        if fitted and self.by_name is not None:
            state["gamma_by_name"] = as_pairs(self.by_name)
            if self.centres is not None:
                state["input_centres"] = as_pairs(self.centres)
        return state

    @classmethod
    def restored(cls, state: dict, gamma, by_name: dict | None, max_features: int,
                 power: float) -> InputScales:
        """The scales a checkpoint's `state` saved, checked against the model's `gamma`
        parameter (`by_name`: the bandwidths it names), its `max_features` and its kernel's
        `power`; `ValueError` for state no such model could have written."""
        fitted = isinstance(gamma, str)
        if fitted and state.get("gamma_by_name") is not None:
            pairs = state["gamma_by_name"]
            if len(pairs) > max_features:
                raise ValueError("too many fitted bandwidths")
            by_name = bandwidth.check_gamma(from_pairs(pairs))
        centres = _centres_from_state(state.get("input_centres"), by_name if fitted else None)
        reference = state["gamma"]
        if reference is not None and not inputs.is_number(reference):
            raise ValueError(f"the saved bandwidth {reference!r:.40} is not a number")
        reference = None if reference is None else float(reference)
        if reference is not None and not 0 < reference <= kernels.MAX_GAMMA:
            raise ValueError(f"gamma {reference!r} is out of range")
        # A number given as gamma is the bandwidth the store uses: state of another is a model
        # that does not learn as its parameters say.
        if inputs.is_number(gamma) and reference != float(gamma):
            raise ValueError(f"the saved bandwidth {reference!r} is not the gamma parameter "
                             f"{gamma!r}")
        # Saved before a Laplacian model's factors were gamma_j / gamma: its vectors were
        # stored with the square roots, and it goes on with them.
        saved_power = state.get("scale_power", 0.5)
        if type(saved_power) is not float or saved_power not in (0.5, power):
            raise ValueError(f"scale_power {saved_power!r} is not one of this kernel's")
        # (Relative to the saved reference, as the saved model's were; never a factor past the
        # bound this model's max_features sets.)
        if by_name is not None and reference is not None:
            largest = (max(by_name.values()) / reference) ** saved_power
            limit = max_factor(max_features, saved_power)
            if not largest <= limit * (1 + 1e-9):
                raise ValueError(f"the saved bandwidths give an input the factor {largest:.3g}, "
                                 f"above {limit:.3g} for max_features={max_features}")
        return cls(by_name, reference, max_features, saved_power, centres)


def _centres_from_state(pairs, by_name: dict | None) -> dict | None:
    """The saved centres of inputs far from 0, checked: inputs `gamma='scale'` fitted
    (`by_name`, None when nothing was fitted) only, finite numbers within the inputs' bound."""
    if pairs is None:
        return None
    if by_name is None or not isinstance(pairs, list) or not all(
            isinstance(p, list) and len(p) == 2 for p in pairs):
        raise ValueError("input_centres must be [name, centre] pairs of fitted inputs")
    centres = from_pairs(pairs)
    for name, centre in centres.items():
        if name not in by_name:
            raise ValueError(f"input_centres names {name!r}, which has no fitted bandwidth")
        if type(centre) is not float or not abs(centre) <= inputs.MAX_ABS_VALUE:
            raise ValueError(f"the centre of {name!r} is {centre!r}, not a number within "
                             f"+-{inputs.MAX_ABS_VALUE:g}")
    return centres
