"""A reference for `one_pass.py`: LaSVM's exact dual steps under the model's budget.

LaSVM (Bordes, Ertekin, Weston and Bottou 2005) learns the SVM's dual online: each sample is
PROCESSed (it enters with coefficient 0 and takes one SMO step with the most violating stored
vector of the other side), then one REPROCESS step works on the most violating pair of stored
vectors and drops the vectors at 0 that cannot become violators. Steps are exact: the largest
the box `0 <= y_s a_s <= C` allows along the pair's direction, no step size. Unbounded, one
pass of it reaches the exact SVC (Vowpal Wabbit's `--ksvm` is this algorithm).

To compare optimisers at the same memory, this reference keeps at most `budget` vectors: past
it, a vector at 0 leaves (exactly), else the smallest `|a_m|` is merged into the same-label
partner of smallest weight degradation, as the package's budget does (`best_merge`: BSGD's
merge, `z` on the segment). The merged vector stands for the samples of both, its box
`0 <= y a <= C (c_m + c_n)`, and every stored gradient `g_s = y_s - sum_j a_j k(x_s, x_j)`
moves by the merge's change of `f` at `x_s`, exactly (the kernel row of `z` is the rows of `m`
and `n` combined, as for the package's merge). A plain numpy loop, float64, RBF kernel of
bandwidth 1 on inputs the caller scales; no averaging, no adversarial term.
"""

from __future__ import annotations

import math

import numpy as np

from river_advsvm.support_budget import best_merge

__all__ = ["BudgetedLaSVM"]


class BudgetedLaSVM:
    """Online LaSVM with at most `budget` vectors (see the module); labels are +1 / -1."""

    def __init__(self, d: int, budget: int, C: float = 1.0, tau: float = 1e-3):
        self.budget, self.C, self.tau = budget, C, tau
        room = budget + 2
        self.S = np.zeros((room, d))
        self.norms = np.zeros(room)
        self.y = np.zeros(room)
        self.a = np.zeros(room)
        self.g = np.zeros(room)  # y_s - sum_j a_j k(x_s, x_j)
        self.count = np.zeros(room)  # samples a vector stands for
        self.E = np.zeros((room, room))  # squared distances between stored vectors
        self.K = np.zeros((room, room))  # their kernel values
        self.size = 0
        self.merges = 0

    # -- f ----------------------------------------------------------------------------------------

    @property
    def bias(self) -> float:
        i, j = self._violating_pair()
        return 0.0 if i is None or j is None else (self.g[i] + self.g[j]) / 2.0

    def decision(self, X: np.ndarray) -> np.ndarray:
        n = self.size
        E = (X * X).sum(axis=1)[:, None] + self.norms[:n] - 2.0 * (X @ self.S[:n].T)
        return np.exp(-np.maximum(E, 0.0)) @ self.a[:n] + self.bias

    # -- learning ---------------------------------------------------------------------------------

    def learn(self, x: np.ndarray, y: float) -> None:
        k = self._append(x, y)
        if y > 0:
            self._step(k, self._violating_pair()[1])
        else:
            self._step(self._violating_pair()[0], k)
        self._reprocess()
        while self.size > self.budget:
            self._maintain()

    def finish(self, max_steps: int = 100_000) -> int:
        """REPROCESS until no pair violates by more than `tau` (LaSVM's finishing); the
        number of steps taken."""
        for steps in range(max_steps):
            if not self._step(*self._violating_pair()):
                return steps
        return max_steps

    def _append(self, x: np.ndarray, y: float) -> int:
        n = self.size
        xx = float(x @ x)
        e = np.maximum(self.norms[:n] + xx - 2.0 * (self.S[:n] @ x), 0.0)
        k = np.exp(-e)
        self.S[n], self.norms[n], self.y[n], self.a[n], self.count[n] = x, xx, y, 0.0, 1.0
        self.g[n] = y - float(k @ self.a[:n])
        self._set_rows(n, e, k)
        self.size += 1
        return n

    def _set_rows(self, i: int, e: np.ndarray, k: np.ndarray) -> None:
        n = len(e)
        self.E[i, :n] = e
        self.E[:n, i] = e
        self.K[i, :n] = k
        self.K[:n, i] = k
        self.E[i, i], self.K[i, i] = 0.0, 1.0

    def _violating_pair(self):
        """`(i, j)`: the largest gradient among vectors that may go up, the smallest among
        those that may go down (None where there is none)."""
        n = self.size
        if not n:
            return None, None
        bound = self.C * self.count[:n] * self.y[:n]
        a, g = self.a[:n], self.g[:n]
        up, down = a < np.maximum(bound, 0.0), a > np.minimum(bound, 0.0)
        i = int(np.where(up, g, -np.inf).argmax())
        j = int(np.where(down, g, np.inf).argmin())
        return (i if up[i] else None), (j if down[j] else None)

    def _step(self, i, j) -> bool:
        """The SMO step on the pair `(i, j)`, if it violates by more than `tau`."""
        if i is None or j is None or self.g[i] - self.g[j] <= self.tau:
            return False
        K = self.K
        curvature = max(K[i, i] + K[j, j] - 2.0 * K[i, j], 1e-12)
        up = max(0.0, self.C * self.count[i] * self.y[i]) - self.a[i]
        down = self.a[j] - min(0.0, self.C * self.count[j] * self.y[j])
        step = min((self.g[i] - self.g[j]) / curvature, up, down)
        self.a[i] += step
        self.a[j] -= step
        n = self.size
        self.g[:n] -= step * (K[i, :n] - K[j, :n])
        return True

    def _reprocess(self) -> None:
        self._step(*self._violating_pair())
        i, j = self._violating_pair()
        if i is None or j is None:
            return
        n = self.size
        y, g = self.y[:n], self.g[:n]
        idle = (self.a[:n] == 0.0) & (((y > 0) & (g <= g[j])) | ((y < 0) & (g >= g[i])))
        for r in sorted(np.flatnonzero(idle).tolist(), reverse=True):
            self._drop(r)

    def _drop(self, r: int) -> None:
        last = self.size - 1
        if r != last:
            for array in (self.S, self.norms, self.y, self.a, self.g, self.count):
                array[r] = array[last]
            self._set_rows(r, self.E[last, :last].copy(), self.K[last, :last].copy())
        self.size = last

    def _maintain(self) -> None:
        """One vector fewer: a vector at 0 leaves, else BSGD's merge (see the module)."""
        n = self.size
        a = self.a[:n]
        idle = np.flatnonzero(a == 0.0)
        if len(idle):
            self._drop(int(idle[0]))
            return
        m = int(np.abs(a).argmin())
        partners = np.flatnonzero(self.y[:n] == self.y[m])
        partners = partners[partners != m]
        if not len(partners):  # no vector of its label: it leaves, g as if it never was
            self.g[:n] += a[m] * self.K[m, :n]
            self._drop(m)
            return
        D = self.E[m, partners]
        best, h, p, _ = best_merge("rbf", abs(a[m]), np.abs(a[partners]), D)
        partner = int(partners[best])
        a_m, a_n, a_z = float(a[m]), float(a[partner]), math.copysign(p, a[m])
        # z = h x_m + (1 - h) x_n: its squared distances from those of m and n, exactly.
        e_z = np.maximum(h * self.E[m, :n] + (1.0 - h) * self.E[partner, :n]
                         - h * (1.0 - h) * float(D[best]), 0.0)
        k_z = np.exp(-e_z)
        f_z = float(k_z @ a)  # f at z before the merge
        change = a_z * k_z - a_m * self.K[m, :n] - a_n * self.K[partner, :n]
        self.g[:n] -= change
        z = h * self.S[m] + (1.0 - h) * self.S[partner]
        self.S[partner], self.norms[partner] = z, float(z @ z)
        self.a[partner] = a_z
        self.count[partner] += self.count[m]
        self.g[partner] = self.y[partner] - (f_z + a_z - a_m * k_z[m] - a_n * k_z[partner])
        self._set_rows(partner, e_z, k_z)
        self.a[m] = 0.0
        self._drop(m)
        self.merges += 1
