"""The elements of a continual-release stream: their checks, their clipping, and the sensitivity they certify.

:class:`mechanisms.tree.ContinualRelease` (the binary tree and the square-root
factorization) checks every appended element here; the tree module's docstring
gives the privacy of the nodes, this one what one element may be.

Element bounds. ``sensitivity`` Δ bounds ‖x_s − x_s'‖. Each appended element is
checked against the norm bound B that makes this true for ANY two admissible
elements: B = Δ under ``"add_remove"`` (the neighbour has 0 in place of x_s);
B = Δ/2 under ``"replace_one"`` (triangle inequality); with ``psd=True``
(positive semidefinite matrices such as x xᵀ) B = Δ/√2 under ``"replace_one"``,
because ‖A − A'‖_F² = ‖A‖_F² + ‖A'‖_F² − 2 tr(AA') ≤ ‖A‖_F² + ‖A'‖_F² when
tr(AA') ≥ 0. The PSD test accepts a smallest eigenvalue ≥ −τ‖A‖_F (τ = 1e-12,
rounding of x xᵀ); writing A = A₊ − A₋ with ‖A₋‖_F ≤ √d τ‖A‖_F gives
tr(AA') ≥ −2√d τ ‖A‖_F ‖A'‖_F, so the charge uses Δ·√(1 + 2√d τ) in place of Δ.
An element given as :class:`OuterProduct` (x and a checked weight w ≥ 0) is formed
as w·x xᵀ by the mechanism itself: PSD up to 2⁻⁵²‖A‖_F by construction, inside τ,
so no eigenvalue test is run for it (the policies' V and H trees use this path).

Clipping instead of refusing (``invalid="clip"``). The norm, finiteness, symmetry
and PSD of an element are private: refusing an element after the up-front charge
tells the caller one bit outside the guarantee and leaves the stream waiting (the
default, ``invalid="raise"``). With ``invalid="clip"`` each element is first mapped
into the admissible set by a fixed function of that element alone — non-finite
entries become 0, a matrix is symmetrised, with ``psd`` its negative eigenvalues
are set to 0, and an element of norm above B is scaled to norm B — and then
released as usual. Every mapped element is admissible, so any two of them differ
by at most Δ and the charge holds for every input: the map is the same for all
data and is applied after the charge, before any noise touches the element
(docs/mechanisms.md, "The tree's norm bound"; the bandits' ``invalid="clip"``
does the same to contexts, ``dpglm/policies/invalid.py``).

Float slack on the norm. A unit vector normalised in floating point has
‖x‖² = 1 ± a few ulps (113 of 1000 random x xᵀ have ‖x xᵀ‖_F = 1 + 4e-16 > 1,
the bound for Δ = √2 with psd), while envs and policies accept ‖x‖ ≤ 1 + 1e-9.
Elements are therefore accepted up to B·(1 + η), η = 1e-9 (``NORM_SLACK``). An
element of norm ≤ B(1 + η) certifies sensitivity Δ(1 + η) by the same
arguments (they scale linearly), and the float norm we compute is within
n·2⁻⁵³ < η of the true one for n < 9·10⁶ entries (an :class:`OuterProduct`'s
norm is computed as w·(x·x), since ‖w x xᵀ‖_F = w‖x‖²: within (d + 4)·2⁻⁵³ of
the Frobenius norm of the formed w·xᵢxⱼ, for d < 9·10⁶); so the charge uses
Δ·(1 + 2η) (times the PSD factor above), rounded up: conservative, at most
2e-9 relative more ρ than Δ itself would cost.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from accounting.validation import check_array, check_int, short_repr
from mechanisms.noise import element_bound
from mechanisms.outer_product import OuterProduct
from mechanisms.release import check_positive, check_relation

__all__ = ["INVALID_CHOICES", "NORM_SLACK", "PSD_TOLERANCE", "StreamElements", "check_stream_shape"]

PSD_TOLERANCE = 1e-12
#: What an append does with an element whose private values break the bounds (module docstring).
INVALID_CHOICES = ("raise", "clip")
#: Relative slack η on the element norm bound (float-normalised unit vectors); the charge pays Δ(1 + 2η).
NORM_SLACK = 1e-9

FloatArray = npt.NDArray[np.float64]


def check_stream_shape(shape: object) -> tuple[int, ...]:
    """Return ``shape`` as a tuple if it is ``(d,)`` or square ``(d, d)`` with d ≥ 1.

    Raises
    ------
    TypeError, ValueError
        Naming ``shape`` and the allowed forms.
    """
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if not isinstance(shape, (tuple, list)) or not all(
        isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in shape
    ):
        raise TypeError(f"shape must be a tuple (d,) or (d, d) of ints, got {short_repr(shape)}")
    shape = tuple(int(n) for n in shape)
    if len(shape) not in (1, 2) or min(shape) < 1 or (len(shape) == 2 and shape[0] != shape[1]):
        raise ValueError(f"shape must be (d,) or square (d, d) with d >= 1, got {shape}")
    return shape


class StreamElements:
    """Boundary checks for the elements of a continual-release stream and the sensitivity they certify.

    Parameters
    ----------
    horizon : int
        Number T ≥ 1 of elements the stream may receive.
    shape : tuple
        ``(d,)`` for vectors or ``(d, d)`` for symmetric matrices.
    sensitivity : float
        Δ ≥ ‖x_s − x_s'‖ (L2, or Frobenius for matrices) under ``relation``.
    relation : {"replace_one", "add_remove"}
        Neighbouring relation under which ``sensitivity`` holds.
    psd : bool
        Matrix elements are positive semidefinite (see the module docstring: the
        element bound becomes Δ/√2 under replace-one).
    invalid : {"raise", "clip"}
        What :meth:`check` does with an element whose private values break the bounds
        (norm, finiteness, symmetry, PSD): refuse it (``ValueError``) or map it into the
        admissible set (module docstring, "Clipping instead of refusing").

    Attributes
    ----------
    element_bound : float
        The norm bound B (L2 or Frobenius) that certifies Δ; elements are accepted
        up to B·(1 + η), η = ``NORM_SLACK`` (module docstring, "Float slack").
    charged_sensitivity : float
        The sensitivity used in the charge: Δ·(1 + 2η), times √(1 + 2√d τ) with
        ``psd``, rounded up.
    """

    def __init__(self, horizon: int, shape: object, sensitivity: float, relation: str, psd: bool,
                 invalid: str = "raise") -> None:
        self.horizon = check_int("horizon", horizon, 1)
        if invalid not in INVALID_CHOICES:
            raise ValueError(f"invalid must be one of {INVALID_CHOICES}, got {short_repr(invalid)}")
        self.invalid = invalid
        self.shape = check_stream_shape(shape)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.relation = check_relation(relation)
        if not isinstance(psd, bool):
            raise TypeError(f"psd must be a bool, got {type(psd).__name__}")
        if psd and len(self.shape) != 2:
            raise ValueError(f"psd=True needs matrix elements of shape (d, d), got shape {self.shape}")
        self.psd = psd
        # Δ (add/remove), Δ/2 (replace-one), Δ/√2 (replace-one, psd: tr(AA') ≥ 0); see noise.element_bound.
        self.element_bound = element_bound(self.sensitivity, self.relation, order=2, nonnegative=psd)
        inflation = 1.0 + 2.0 * NORM_SLACK
        if psd:
            inflation *= math.sqrt(1.0 + 2.0 * math.sqrt(self.shape[0]) * PSD_TOLERANCE)
        # Two ulps up cover the rounding of the two products above.
        self.charged_sensitivity = float(np.nextafter(np.nextafter(self.sensitivity * inflation, np.inf), np.inf))
        self.accepted_norm = self.element_bound * (1.0 + NORM_SLACK)

    def _check_outer(self, vector: FloatArray, weight: float) -> FloatArray:
        """w·x xᵀ re-formed from (x, w): symmetric and PSD by construction (see :class:`OuterProduct`)."""
        if vector.shape != self.shape[:1]:
            raise ValueError(f"x must have shape {self.shape[:1]} for an OuterProduct element, got {vector.shape}")
        return self._formed(vector, weight, float(vector.dot(vector)))

    def _formed(self, vector: FloatArray, weight: float, squared: float, out: FloatArray | None = None) -> FloatArray:
        """w·x xᵀ (into ``out``) from a finite x, ``squared`` = x·x, checked as w·‖x‖² = ‖w x xᵀ‖_F (module doc).

        With ``invalid="clip"`` a norm above the bound lowers the weight to B/‖x‖² instead: the element scaled to B.
        """
        if weight * squared > self.accepted_norm:
            if self.invalid == "clip":
                weight = self.element_bound / squared
            else:
                self._check_norm(weight * squared)
        array: FloatArray = np.multiply.outer(vector, vector, out=out)
        array *= weight  # w·(xᵢxⱼ), the same products as weight * (x xᵀ)
        return array

    def outer(self, x: object, weight: float, t: int, out: FloatArray | None = None) -> FloatArray:
        """Element number ``t + 1`` given as (x, w): ``w·x xᵀ``, checked as ``check(OuterProduct(x, w), t)`` is.

        The policies' own leaves (a finite float64 vector of shape (d,), a float weight in
        [0, ∞), a psd stream) are formed and norm-checked directly, into ``out`` if given;
        anything else goes through :class:`OuterProduct` and :meth:`check`, which refuse it
        with their messages (and return a new array).
        """
        if (t < self.horizon and self.psd and type(x) is np.ndarray and x.dtype == np.float64
                and x.shape == self.shape[:1] and type(weight) is float and 0.0 <= weight < math.inf):
            squared = float(x.dot(x))
            if math.isfinite(squared):
                return self._formed(x, weight, squared, out)
            if self.invalid == "clip":  # non-finite entries become 0; a vector too large to square is scaled first
                x = _finite_scaled(x)
                return self._formed(x, weight, float(x.dot(x)), out)
        return self.check(OuterProduct(x, weight), t)

    def _check_norm(self, norm: float) -> None:
        if norm > self.accepted_norm:
            kind = "Frobenius" if len(self.shape) == 2 else "L2"
            raise ValueError(
                f"x has {kind} norm {norm!r} > {self.element_bound!r} (1 + {NORM_SLACK:g}), the bound certified by "
                f"sensitivity={self.sensitivity!r} under relation={self.relation!r}"
                + (" with psd=True" if self.psd else "")
            )

    def check(self, x: object, t: int) -> FloatArray:
        """Validate element number ``t + 1`` and return it as a float array (symmetrised if a matrix).

        Raises
        ------
        ValueError
            Horizon exceeded, wrong shape, NaN/inf, asymmetric or non-PSD matrix,
            or ‖x‖ above ``element_bound``·(1 + η); the message names the argument.
        """
        if t >= self.horizon:
            raise ValueError(f"horizon exceeded: all {self.horizon} elements (horizon={self.horizon}) already appended")
        if isinstance(x, OuterProduct) and x.vector is not None and x.weight is not None and self.psd:
            return self._check_outer(x.vector, x.weight)
        array = check_array("x", x)  # a rectangular real array (bools, strings, ragged lists refused)
        if array.shape != self.shape:
            raise ValueError(f"x must have shape {self.shape}, got {array.shape}")
        array = array.astype(np.float64)
        if self.invalid == "clip":
            return self._clipped(array)
        if not np.isfinite(array).all():
            raise ValueError("x must be finite (no NaN or infinity)")
        if len(self.shape) == 2:
            asymmetry = float(np.abs(array - array.T).max())
            if asymmetry > 1e-12 * float(np.abs(array).max()):
                raise ValueError("x must be a symmetric matrix (x == x.T up to 1e-12 relative)")
            array = (array + array.T) / 2.0
        norm = math.sqrt(float(np.vdot(array, array)))
        if self.psd and norm > 0:
            smallest = float(np.linalg.eigvalsh(array)[0])
            if smallest < -PSD_TOLERANCE * norm:
                raise ValueError(f"x must be positive semidefinite (psd=True), smallest eigenvalue {smallest:.3g}")
        self._check_norm(norm)
        return array


    def _clipped(self, array: FloatArray) -> FloatArray:
        """``array`` (of the stream's shape) mapped into the admissible set (module docstring, "Clipping").

        Non-finite entries become 0; a matrix is symmetrised and, with ``psd``, its negative
        eigenvalues set to 0; an element of norm above B is scaled to norm B. A fixed
        function of the element alone: the charge's sensitivity holds for every input.
        """
        array = _finite_scaled(array)
        if len(self.shape) == 2:
            array = (array + array.T) / 2.0
            if self.psd:
                values, vectors = np.linalg.eigh(array)
                if values[0] < 0:
                    array = (vectors * np.maximum(values, 0.0)) @ vectors.T
                    array = (array + array.T) / 2.0
        norm = math.sqrt(float(np.vdot(array, array)))
        if norm > self.element_bound:
            array *= self.element_bound / norm
        return array


def _finite_scaled(array: FloatArray) -> FloatArray:
    """A copy with non-finite entries set to 0, divided by its largest magnitude if its squared norm overflows."""
    out: FloatArray = np.where(np.isfinite(array), array, 0.0)
    if not math.isfinite(float(np.vdot(out, out))):
        out /= np.abs(out).max()
    return out
