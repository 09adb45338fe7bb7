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

>>> uniform = InputScales(None, gamma=0.1, max_features=10)
>>> uniform.columns(2) is None, uniform.scaled(V, U, ["age"])[0] is V
(True, True)

"""

from __future__ import annotations

import numpy as np

__all__ = ["InputScales"]

#: Columns of room to begin with.
_ROOM = 16


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

    """

    def __init__(self, by_name: dict | None, gamma: float | None, max_features: int,
                 power: float = 0.5):
        self.by_name = by_name
        self.gamma = gamma
        self.max_features = max_features
        self.power = power
        self._factors = np.ones(min(_ROOM, max_features))  # one per column, with spare room

    @property
    def uniform(self) -> bool:
        """True when every input has scale 1."""
        return self.by_name is None

    def of(self, names: list) -> np.ndarray:
        """The factor of each of these inputs."""
        if self.by_name is None:
            return np.ones(len(names))
        median, by_name = self.gamma, self.by_name
        ratios = np.array([by_name.get(n, median) for n in names]) / median
        return np.sqrt(ratios) if self.power == 0.5 else ratios ** self.power

    def columns(self, d: int) -> np.ndarray | None:
        """The factors of the first `d` columns, or None when every input has scale 1."""
        return None if self.by_name is None else self._factors[:d]

    def add(self, names: list, d: int) -> None:
        """The last `len(names)` of `d` columns are these new inputs."""
        if self.by_name is None:
            return
        if d > self.max_features:
            raise ValueError(f"{d} input columns, more than max_features={self.max_features}")
        if d > len(self._factors):
            grown = np.ones(min(max(d, 2 * len(self._factors)), self.max_features))
            grown[: len(self._factors)] = self._factors
            self._factors = grown
        self._factors[d - len(names) : d] = self.of(names)

    def rebuild(self, names: list) -> None:
        """The factors of these columns afresh (a restored model's, from its inputs' names)."""
        self._factors = np.ones(min(_ROOM, self.max_features))
        self.add(names, len(names))

    def scaled(self, V: np.ndarray, U: np.ndarray, u_names: list) -> tuple[np.ndarray, np.ndarray]:
        """Rows `V` over the first columns and `U` over the inputs `u_names`, times their
        factors; the same arrays when every input has scale 1."""
        if self.by_name is None:
            return V, U
        q = self._factors[: V.shape[-1]]
        return V * q, (U * self.of(u_names) if len(u_names) else U)
