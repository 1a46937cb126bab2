"""What a run keeps between rounds, kept compactly: refit rows and exact design sums (issue 26, memory flat in T).

A GLM refit has no fixed-size summary: the regularised MLE on T_o (or [t−1]∖T_o) needs its
rows. :class:`Rows` stores them as they arrive, 8·(d + 1) bytes a row (a float64 context
and reward), in preallocated buffers that double when full, instead of a list of per-round
arrays (a Python list entry and a small ndarray cost over 100 bytes of overhead a round).
:class:`ExactDesign` is the exact running sum ``λI + Σ w_s x_s x_sᵀ`` of the non-private
RS-GLinCB (Sawarni et al. 2024): O(d²) memory, its leaves added a block at a time.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ExactDesign", "Rows"]

_BLOCK = 32  # leaves an ExactDesign collects before adding them to its sum in one product


class Rows:
    """The rows (x_s, y_s) of one refit set, in doubling float64 buffers: 8·(d + 1) bytes a row.

    A round *stages* its context when the policy chooses (:meth:`stage`, a copy into the
    next free row) and *commits* it with the reward (:meth:`commit`); a staged row that is
    never committed is overwritten by the next one. :meth:`arrays` gives read-only views of
    the committed rows (valid after later appends: a full buffer is replaced, never
    written over).
    """

    def __init__(self, d: int, capacity: int = 256) -> None:
        self._x = np.empty((capacity, d))
        self._y = np.empty(capacity)
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def stage(self, x: np.ndarray) -> np.ndarray:
        """Copy ``x`` into the next free row (growing the buffers if full); returns that row."""
        n = self.n
        if n == self._y.shape[0]:
            self._grow()
        row = self._x[n]
        row[:] = x
        return row

    def commit(self, y: float) -> None:
        """Keep the staged row with its reward ``y``."""
        self._y[self.n] = y
        self.n += 1

    def _grow(self) -> None:
        n = self.n
        x, y = np.empty((2 * n, self._x.shape[1])), np.empty(2 * n)
        x[:n], y[:n] = self._x[:n], self._y[:n]
        self._x, self._y = x, y

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Read-only views ``(X, y)`` of the committed rows, shapes (n, d) and (n,)."""
        X, y = self._x[: self.n], self._y[: self.n]
        X.flags.writeable = False
        y.flags.writeable = False
        return X, y

    @property
    def nbytes(self) -> int:
        """Bytes held by the buffers (capacity, not rows used)."""
        return int(self._x.nbytes + self._y.nbytes)


class ExactDesign:
    """Exact ``λI + Σ_s w_s x_s x_sᵀ`` (non-private RS-GLinCB, Sawarni et al. 2024): a DesignStatistic.

    :meth:`add_outer` collects up to 32 leaves ``(x, w)`` and adds them to the sum in one
    product ``AᵀA`` with rows ``√w·x`` (exactly symmetric: numpy forms ``AᵀA`` by a
    symmetric rank-k update); :attr:`matrix` adds what is collected before it answers.
    :attr:`version` counts every leaf, so a policy caching on it sees each change.
    :meth:`append` takes any symmetric PSD leaf (an :class:`mechanisms.tree.OuterProduct`
    goes through :meth:`add_outer`).
    """

    def __init__(self, d: int, lam: float) -> None:
        self._sum = lam * np.eye(d)
        self._rows = np.empty((_BLOCK, d))
        self._weights = np.empty(_BLOCK)
        self._pending = 0
        self._matrix = self._sum.copy()
        self._matrix.setflags(write=False)
        self._fresh = True
        self.version = 0

    @property
    def matrix(self) -> np.ndarray:
        """The current sum, read-only."""
        if not self._fresh:
            self._flush()
            matrix = self._sum.copy()
            matrix.setflags(write=False)
            self._matrix, self._fresh = matrix, True
        return self._matrix

    def _flush(self) -> None:
        k = self._pending
        if k:
            a = self._rows[:k] * np.sqrt(self._weights[:k])[:, None]
            self._sum += a.T @ a
            self._pending = 0

    def add_outer(self, x: np.ndarray, weight: float) -> None:
        """Add the leaf ``weight·x xᵀ`` (``weight ≥ 0``, x finite: the policy's own clipped context)."""
        if self._pending == _BLOCK:
            self._flush()
        k = self._pending
        self._rows[k] = x
        self._weights[k] = weight
        self._pending = k + 1
        self._fresh = False
        self.version += 1

    def append(self, leaf: np.ndarray | None) -> None:
        """Add a symmetric PSD ``leaf`` (``None``: nothing this round)."""
        if leaf is None:
            return
        vector, weight = getattr(leaf, "vector", None), getattr(leaf, "weight", None)
        if vector is not None and weight is not None and math.isfinite(weight):
            self.add_outer(vector, weight)
            return
        self._flush()
        self._sum += np.asarray(leaf, dtype=float)
        self._fresh = False
        self.version += 1
