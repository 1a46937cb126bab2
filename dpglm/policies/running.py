"""What a run keeps between rounds, kept compactly: refit rows and exact design sums (issue 26, memory flat in T).

A GLM refit has no fixed-size summary: the regularised MLE on T_o (or [t−1]∖T_o) needs its
rows. :class:`Rows` stores them as they arrive, 8·(d + 1) bytes a row (a float64 context
and reward), in blocks of 16384 rows that are never copied once full (a doubling buffer
would copy on growth, its peak 1.5–2× the rows held), instead of a list of per-round
arrays (a Python list entry and a small ndarray cost over 100 bytes of overhead a round).
:class:`ExactDesign` is the exact running sum ``λI + Σ w_s x_s x_sᵀ`` of the non-private
RS-GLinCB (Sawarni et al. 2024): O(d²) memory, its leaves added a block at a time.
"""

from __future__ import annotations

import math

import numpy as np

from dpglm import glm_newton
from dpglm.glm_newton import RowBlocks

__all__ = ["ExactDesign", "Rows"]

_BLOCK = 32  # leaves an ExactDesign collects before adding them to its sum in one product


class Rows:
    """The rows (x_s, y_s) of one refit set in float64 blocks: 8·(d + 1) bytes a row, no copy once past one block.

    The first block doubles from ``capacity`` rows up to the GLM solver's block size (16384
    rows, :class:`dpglm.glm_newton.RowBlocks`); after that each full block is kept as it is
    and a new one started, so growth never copies more than one block and a refit sums the
    rows block by block with no contiguous copy (issue 26; docs/design.md, dpglm/, memory flat in T).
    A round *stages* its context when the policy chooses (:meth:`stage`, a copy into the
    next free row) and *commits* it with the reward (:meth:`commit`); a staged row that is
    never committed is overwritten by the next one. :meth:`blocks` gives read-only views of
    the committed rows (valid after later appends: a grown first block is replaced, never
    written over).
    """

    def __init__(self, d: int, capacity: int = 256) -> None:
        self._size = glm_newton._GRAM_CHUNK
        first = min(capacity, self._size)
        self._xs, self._ys = [np.empty((first, d))], [np.empty(first)]
        self._used = 0  # committed rows in the last block
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def stage(self, x: np.ndarray) -> np.ndarray:
        """Copy ``x`` into the next free row (growing if the last block is full); returns that row."""
        if self._used == self._ys[-1].shape[0]:
            self._grow()
        row = self._xs[-1][self._used]
        row[:] = x
        return row

    def commit(self, y: float) -> None:
        """Keep the staged row with its reward ``y``."""
        self._ys[-1][self._used] = y
        self._used += 1
        self.n += 1

    def _grow(self) -> None:
        n, size, d = self._used, self._size, self._xs[-1].shape[1]
        if n < size:  # the first block, below full size: double it (one copy of < 16384 rows)
            x, y = np.empty((min(2 * n, size), d)), np.empty(min(2 * n, size))
            x[:n], y[:n] = self._xs[0][:n], self._ys[0][:n]
            self._xs[0], self._ys[0] = x, y
            return
        self._xs.append(np.empty((size, d)))
        self._ys.append(np.empty(size))
        self._used = 0

    def blocks(self) -> RowBlocks:
        """Read-only views of the committed rows as :class:`RowBlocks` (every block but the last full)."""
        xs = [*self._xs[:-1], self._xs[-1][: self._used]]
        ys = [*self._ys[:-1], self._ys[-1][: self._used]]
        views_x, views_y = [], []
        for x, y in zip(xs, ys, strict=True):
            x, y = x[:], y[:]
            x.flags.writeable = False
            y.flags.writeable = False
            views_x.append(x)
            views_y.append(y)
        return RowBlocks(tuple(views_x), tuple(views_y))

    @property
    def nbytes(self) -> int:
        """Bytes held by the blocks (capacity, not rows used)."""
        return sum(int(x.nbytes + y.nbytes) for x, y in zip(self._xs, self._ys, strict=True))


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
