"""The leaf ``w·x xᵀ`` formed by the mechanism from (x, w): PSD by construction (mechanisms/tree.py's fast path).

Split from :mod:`mechanisms.tree` (re-exported there); the stream's element checks accept
it without an eigenvalue test, and :mod:`mechanisms.stream_elements`' docstring gives the
tolerance argument.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from accounting.validation import check_real

__all__ = ["OuterProduct"]

FloatArray = npt.NDArray[np.float64]
_FLOAT64 = np.dtype(np.float64)


class OuterProduct(np.ndarray):
    """The matrix w·x xᵀ, formed here from a vector x and a checked weight w ≥ 0: PSD by construction.

    A (d, d) read-only array (usable wherever the matrix is: exact designs, sums)
    that also remembers x and w. A ``psd=True`` stream given an ``OuterProduct``
    re-forms w·x xᵀ from x and w itself and needs no eigenvalue check: w·xᵢxⱼ in
    floats is symmetric exactly and within 2⁻⁵² relative of the PSD matrix
    w·x xᵀ entrywise, so its smallest eigenvalue is ≥ −2⁻⁵²‖A‖_F, inside the
    tolerance τ = 10⁻¹² the charge already pays for (module docstring). Arrays
    derived from it (slices, sums, views) are plain arrays and checked as such.

    Parameters
    ----------
    x : array_like
        A finite real vector of shape (d,).
    weight : float
        w, finite and ≥ 0 (e.g. μ̇(xᵀθ)/e in the H-tree).
    """

    vector: FloatArray | None
    weight: float | None

    def __new__(cls, x: object, weight: float = 1.0) -> OuterProduct:
        if type(x) is np.ndarray and x.dtype == _FLOAT64 and x.ndim == 1 and x.size and type(weight) is float \
                and weight >= 0.0 and weight != math.inf:  # the policies' own leaves: same checks, fewer calls
            vector = x.copy()
            if not math.isfinite(float(vector.dot(vector))):
                raise ValueError("x must be finite (no NaN or infinity), with ‖x‖² finite")
            return cls._formed(vector, weight)
        if isinstance(x, (bool, np.bool_)):
            raise TypeError("x must be a real vector, got a bool")
        vector = np.asarray(x)
        if vector.dtype.kind not in "fiu":
            raise TypeError(f"x must be a real vector, got dtype {vector.dtype}")
        if vector.ndim != 1 or vector.size < 1:
            raise ValueError(f"x must have shape (d,) with d >= 1, got {vector.shape}")
        vector = np.array(vector, dtype=float)
        if not math.isfinite(float(vector.dot(vector))):  # finite iff every entry is (and ‖x‖² fits a float)
            raise ValueError("x must be finite (no NaN or infinity), with ‖x‖² finite")
        return cls._formed(vector, check_real("weight", weight, 0.0))

    @classmethod
    def _formed(cls, vector: FloatArray, weight: float) -> OuterProduct:
        """w·x xᵀ from a finite float64 vector (owned, not shared) and a checked weight w ≥ 0."""
        matrix = weight * (vector[:, None] * vector)
        matrix.setflags(write=False)
        vector.setflags(write=False)
        obj: OuterProduct = matrix.view(cls)
        obj.vector, obj.weight = vector, weight
        return obj

    def __array_finalize__(self, obj: object) -> None:
        self.vector, self.weight = None, None  # only __new__ vouches for the content

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: object, **kwargs: object) -> object:
        plain = tuple(np.asarray(i) if isinstance(i, OuterProduct) else i for i in inputs)
        return getattr(ufunc, method)(*plain, **kwargs)

    def __reduce__(self) -> str | tuple[Any, ...]:
        if self.vector is not None:
            return OuterProduct, (np.asarray(self.vector), self.weight)
        return np.asarray(self).__reduce__()
