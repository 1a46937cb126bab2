"""Gaussian and Laplace mechanisms, and the exact calibration of their noise to a cost.

Every release charges the account first and draws noise only once the charge
is granted (docs/design.md, mechanisms/). Calibration rounds the noise UP: the
privacy loss of the noise actually drawn never exceeds the cost charged,
checked in exact rational arithmetic on the floats that are used.

Costs (docs/references.md, "Privacy definitions and composition"): the Gaussian mechanism with
L2 sensitivity Δ and standard deviation σ is Δ²/(2σ²)-zCDP (Bun & Steinke
2016, Prop. 1.6); k of them composed are kΔ²/(2σ²)-zCDP. The Laplace mechanism
with L1 sensitivity Δ and scale b is (Δ/b)-DP (Dwork & Roth 2014, Thm 3.6).
"""

from __future__ import annotations

import abc
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from accounting import GDP, ZCDP, Chargeable, Cost, PureDP

# The Gaussian calibration lives in accounting.convert (which owns calibration); the
# names below are the ones mechanisms and their importers have always used.
from accounting.convert import gaussian_rho_exact as gaussian_rho
from accounting.convert import gaussian_sigma as gaussian_sigma_for
from accounting.validation import check_text
from mechanisms.base import Mechanism
from mechanisms.lattice import GaussianLattice, LaplaceLattice, gdp_mu_squared
from mechanisms.release import (
    Release,
    check_account,
    check_generator,
    check_positive,
    check_relation,
)

__all__ = [
    "GaussianMechanism",
    "LaplaceMechanism",
    "element_bound",
    "gaussian_rho",
    "gaussian_sigma_for",
    "laplace_epsilon",
    "laplace_scale_for",
    "round_up",
]

_DIGITS = 15

FloatArray = npt.NDArray[np.float64]


def round_up(value: Fraction, digits: int = _DIGITS) -> Fraction:
    """Round a positive rational UP to ``digits`` significant decimal digits.

    Used to state a charge as a short decimal that is never below the exact loss.
    """
    value = Fraction(value)
    if value <= 0:
        raise ValueError(f"value must be > 0, got {value}")
    exponent = 0  # the decimal exponent e with 10**e <= value < 10**(e + 1)
    while value >= Fraction(10) ** (exponent + 1):
        exponent += 1
    while value < Fraction(10) ** exponent:
        exponent -= 1
    scaled = value * Fraction(10) ** (digits - 1 - exponent)
    return Fraction(-(-scaled.numerator // scaled.denominator)) / Fraction(10) ** (digits - 1 - exponent)


def laplace_epsilon(scale: float, sensitivity: float) -> Fraction:
    """Exact pure ε of the Laplace mechanism: ε = Δ₁/b (Dwork & Roth 2014, Thm 3.6)."""
    return Fraction(sensitivity) / Fraction(scale)


def laplace_scale_for(epsilon: Fraction, sensitivity: float) -> float:
    """Smallest float b (to one ulp) with Δ₁/b ≤ ε exactly: the Laplace scale for a cost, rounded up."""
    epsilon = Fraction(epsilon)
    if epsilon <= 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    scale = float(sensitivity) / float(epsilon)
    while laplace_epsilon(scale, sensitivity) > epsilon:
        scale = float(np.nextafter(scale, np.inf))
    return scale


def _as_statistic(x: object, name: str = "x") -> FloatArray:
    """A statistic's public checks: a real scalar or a non-empty rectangular real array (``name`` in messages).

    Its values are private: whether they are finite is :func:`_finite_problem`'s, checked
    after the charge (docs/mechanisms.md, "Refusals that depend on the data").
    """
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number or a real array, got a bool")
    try:
        array = np.asarray(x)
    except (TypeError, ValueError):  # ragged nested sequences
        raise TypeError(f"{name} must be a real number or a rectangular real array, got a ragged "
                        f"{type(x).__name__}") from None
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise TypeError(f"{name} must be a real number or a real array, got dtype {array.dtype}")
    if array.size == 0:
        raise ValueError(f"{name} must not be empty")
    statistic: FloatArray = array.astype(np.float64)
    return statistic


def _finite_problem(statistic: FloatArray, name: str) -> str | None:
    """What is wrong with the private values of ``statistic`` (NaN or infinity), or None."""
    return None if np.all(np.isfinite(statistic)) else f"{name} must be finite (no NaN or infinity)"


def element_bound(
    sensitivity: float, relation: str, *, order: int = 2, nonnegative: bool = False, scalar: bool = False
) -> float:
    """Largest norm B of one user's element that certifies sensitivity Δ of a sum of elements.

    Every pair a, a' of admissible elements (‖·‖ ≤ B) must satisfy ‖a − a'‖ ≤ Δ.

    - ``"add_remove"``: the neighbour has nothing (0) in place of a, so B = Δ.
    - ``"replace_one"``, general elements: ‖a − a'‖ ≤ ‖a‖ + ‖a'‖ (triangle
      inequality, tight for a' = −a), so B = Δ/2.
    - ``"replace_one"``, ``nonnegative`` with ``order=2``: elements with
      ⟨a, a'⟩ ≥ 0 for every admissible pair — coordinate-wise non-negative
      vectors, or PSD matrices in the Frobenius inner product (tr(AA') ≥ 0) —
      have ‖a − a'‖₂² = ‖a‖² + ‖a'‖² − 2⟨a, a'⟩ ≤ 2B², so B = Δ/√2 (tight for
      orthogonal supports; rounded down one ulp so that √2·B ≤ Δ holds in floats).
    - ``"replace_one"``, ``nonnegative`` and ``scalar`` (one entry per element,
      e.g. a reward or a bit in [0, B]): |a − a'| ≤ max(a, a') ≤ B, so B = Δ in
      any norm.
    - ``"replace_one"``, ``nonnegative`` with ``order=1`` and more than one entry:
      NO saving. ‖a − a'‖₁ = Σᵢ|aᵢ − a'ᵢ| ≤ ‖a‖₁ + ‖a'‖₁ = 2B is attained by
      disjoint supports (a = B e₁, a' = B e₂), so B = Δ/2 as in general.

    Parameters
    ----------
    sensitivity : float
        Δ > 0.
    relation : {"replace_one", "add_remove"}
    order : {1, 2}
        The norm (1: L1 for Laplace; 2: L2, or Frobenius for matrices).
    nonnegative : bool
        Every admissible pair has a non-negative inner product (see above).
    scalar : bool
        Elements have a single entry.
    """
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order!r}")
    if relation == "add_remove":
        return sensitivity
    if nonnegative and scalar:
        return sensitivity
    if nonnegative and order == 2:
        return float(np.nextafter(sensitivity / np.sqrt(2.0), 0.0))
    return sensitivity / 2.0


def _checked_sum(
    contributions: object, sensitivity: float, relation: str, order: int, nonnegative: bool = False
) -> tuple[FloatArray, str | None]:
    """The sum of per-user rows and what is wrong with the rows' private values (None if nothing).

    The public checks (kind, shape, ``nonnegative`` a bool) raise here. Each row's
    L``order`` norm is checked against the bound that certifies Δ, :func:`element_bound`:
    Δ/2 (replace-one), Δ (add/remove); with ``nonnegative`` rows (every entry ≥ 0) Δ for
    single-entry rows and Δ/√2 for L2 rows under replace-one. A failure of those, which
    depend on the data, is returned for the caller to raise after its charge.
    """
    rows = _as_statistic(contributions, "contributions")
    if rows.ndim < 1:
        raise ValueError("contributions must have shape (n_users, ...), one row per user, got a scalar")
    if not isinstance(nonnegative, bool):
        raise TypeError(f"nonnegative must be a bool, got {type(nonnegative).__name__}")
    flat = rows.reshape(rows.shape[0], -1)
    total: FloatArray = rows.sum(axis=0)
    problem = _finite_problem(rows, "contributions")
    if problem is not None:
        return total, problem
    if nonnegative and np.any(flat < 0):
        negative = int(np.argmax(np.any(flat < 0, axis=1)))
        return total, f"contributions[{negative}] has a negative entry; nonnegative=True needs every entry >= 0"
    bound = element_bound(sensitivity, relation, order=order, nonnegative=nonnegative, scalar=flat.shape[1] == 1)
    norms = np.linalg.norm(flat, ord=order, axis=1)
    worst = int(np.argmax(norms))
    if norms[worst] > bound:
        rows_kind = " for non-negative rows" if nonnegative else ""
        return total, (f"contributions[{worst}] has L{order} norm {float(norms[worst])!r} > {bound!r}, the bound "
                       f"certified by sensitivity={sensitivity!r} under relation={relation!r}{rows_kind}")
    return total, None


class _AdditiveNoiseMechanism(Mechanism):
    """Charge first, then add fresh noise: what the Gaussian and Laplace mechanisms share.

    A subclass names itself in ``_MECHANISM`` (recorded with every charge) and the
    norm of its sensitivity in ``_ORDER`` (2 or 1); its ``__init__`` calls
    :meth:`_check_common` and sets ``self.cost``; it draws its noise in
    ``_add_noise(statistic)`` (float-safe, ``mechanisms.lattice``) and describes
    it for the charge note in ``_describe()``.
    """

    _MECHANISM: str
    _ORDER: int
    cost: Cost

    def _check_common(
        self, account: Chargeable, sensitivity: float, rng: np.random.Generator, relation: str,
        currencies: tuple[str, ...], purpose: str,
    ) -> None:
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.rng = check_generator(rng)
        self.relation = check_relation(relation)
        self.account = check_account(account, currencies, purpose)

    def release(self, x: float | npt.ArrayLike, *, partition: str | None = None, note: str = "") -> Release:
        """Charge one release, then return x + noise (N(0, σ² I), or Lap(b) on every coordinate).

        Parameters
        ----------
        x : float or numpy.ndarray
            The exact statistic f(D), finite.
        partition : str, optional
            Partition key for parallel composition over disjoint data (see ``Account.charge``).
        note : str
            Free text recorded with the charge.

        Raises
        ------
        TypeError, ValueError
            Before the charge: ``x`` is not a non-empty real array, a bad ``note`` or
            ``partition`` (public). After the charge, which stays spent: ``x`` is not
            finite or too large for the noise grid (private: refusing for free would
            tell the caller about the data; docs/mechanisms.md).
        accounting.BudgetExceeded
            If the account cannot pay; no noise is drawn and nothing is released.
        """
        statistic = _as_statistic(x)
        return self._charge_then_release(statistic, _finite_problem(statistic, "x"), partition, note)

    def _charge_then_release(self, statistic: FloatArray, problem: str | None, partition: str | None,
                             note: str) -> Release:
        """Charge, then refuse if the private values had a ``problem``, else add the noise and release."""
        note = check_text("note", note, required=False)
        receipt = self._charge(
            self._cost_for(statistic),
            mechanism=self._MECHANISM,
            relation=self.relation,
            partition=partition,
            note=f"{self._describe()}. {note}".strip(),
        )
        if problem is not None:
            raise ValueError(f"{problem} (refused after the charge, which stays spent: the check depends on the data)")
        noisy = self._add_noise(statistic)
        return self._release(float(noisy) if noisy.ndim == 0 else noisy, receipt)

    @abc.abstractmethod
    def _add_noise(self, statistic: FloatArray) -> FloatArray:
        """``statistic`` plus fresh float-safe noise (called only after the charge was granted)."""

    @abc.abstractmethod
    def _describe(self) -> str:
        """The noise and sensitivity, for the charge note."""

    def _cost_for(self, statistic: FloatArray) -> Cost:
        """The charge of one release of ``statistic`` (the fixed ``cost``; a GDP account's depends on its size)."""
        return self.cost

    def release_sum(self, contributions: npt.ArrayLike, *, partition: str | None = None, note: str = "",
                    nonnegative: bool = False) -> Release:
        """Release the sum of per-user rows + noise, each row's norm (L2 Gaussian, L1 Laplace) checked first.

        Each row must have ‖row‖ ≤ Δ/2 (``"replace_one"``) or ≤ Δ (``"add_remove"``),
        which certifies the declared sensitivity of the sum; then as :meth:`release`.
        With ``nonnegative=True`` (every entry ≥ 0, checked) the replace-one bound is
        Δ for single-entry rows (rewards or bits in [0, Δ]: |a − a'| ≤ max(a, a'))
        and, in L2 only, Δ/√2 for longer rows (⟨a, a'⟩ ≥ 0); longer rows gain nothing
        in L1 (disjoint supports reach ‖a‖₁ + ‖a'‖₁). Derivation in :func:`element_bound`.

        Raises
        ------
        TypeError, ValueError
            Before the charge: ``contributions`` is not a rectangular real array with a
            row per user, ``nonnegative`` is not a bool. After the charge, which stays
            spent: a row is not finite, too long or, with ``nonnegative``, has a negative
            entry (the message names its index): these depend on the private rows.
        """
        total, problem = _checked_sum(contributions, self.sensitivity, self.relation, self._ORDER, nonnegative)
        return self._charge_then_release(total, problem, partition, note)


class GaussianMechanism(_AdditiveNoiseMechanism):
    """Release f(D) + N(0, σ² I) for a statistic of L2 sensitivity Δ, charged in zCDP first.

    Sensitivity: ``sensitivity`` is Δ = max ‖f(D) − f(D')‖₂ over neighbouring D, D'
    under ``relation`` (``"replace_one"`` by default: one user's data replaced).
    ``release(x)`` cannot check this bound on a statistic it sees for one data
    set only (the caller states it, the charge records it); ``release_sum(rows)``
    checks every user's row against the bound that certifies it. Cost per release:
    ρ = Δ²/(2σ²) zCDP (Bun & Steinke 2016, Prop. 1.6).

    Parameters
    ----------
    account : accounting.Account
        Account charged before every release; currency ``"zcdp"`` (ρ = Δ²/(2σ²)) or
        ``"gdp"``: each release then charges GDP(μ′), μ′ of the float-safe discrete
        noise on its grid for the release's m entries (:func:`mechanisms.lattice.gdp_mu_squared`,
        ≈ Δ/σ·(1 + 2⁻²⁷√m σ/Δ); the discrete Gaussian is not exactly Δ/σ-GDP). A gdp
        account needs ``sigma``.
    sensitivity : float
        L2 sensitivity Δ > 0 under ``relation``.
    rng : numpy.random.Generator
        Source of the noise.
    sigma : float, optional
        Noise standard deviation; each release then costs Δ²/(2σ²), rounded up to
        15 significant digits.
    cost : accounting.ZCDP, optional
        Cost of one release (``delta`` = 0); σ is then the smallest float with
        Δ²/(2σ²) ≤ ρ, and each release charges exactly ``cost``.
        Exactly one of ``sigma`` and ``cost`` must be given.
    relation : {"replace_one", "add_remove"}
        Neighbouring relation under which ``sensitivity`` holds.
    """

    _MECHANISM = "GaussianMechanism"
    _ORDER = 2
    cost: ZCDP

    def __init__(
        self,
        account: Chargeable,
        sensitivity: float,
        rng: np.random.Generator,
        *,
        sigma: float | None = None,
        cost: ZCDP | None = None,
        relation: str = "replace_one",
    ) -> None:
        self._check_common(account, sensitivity, rng, relation, ("zcdp", "gdp"), "a Gaussian mechanism (zCDP or GDP)")
        if self.account.currency == "gdp" and sigma is None:
            raise ValueError("a gdp account needs sigma (the GDP of a release depends on its size; give sigma > 0)")
        if (sigma is None) == (cost is None):
            raise ValueError("give exactly one of sigma (noise std > 0) and cost (a ZCDP per release)")
        if sigma is not None:
            self.sigma = check_positive("sigma", sigma)
            self.cost = ZCDP(round_up(gaussian_rho(self.sigma, self.sensitivity)))
        else:
            if not isinstance(cost, ZCDP):
                raise TypeError(f"cost must be an accounting.ZCDP, got {type(cost).__name__}")
            if cost.delta != 0 or cost.rho <= 0:
                raise ValueError(f"cost must be ZCDP(rho > 0, delta=0) for Gaussian noise, got {cost}")
            self.cost = cost
            self.sigma = gaussian_sigma_for(cost.rho, self.sensitivity)

    def _cost_for(self, statistic: FloatArray) -> Cost:
        if self.account.currency == "gdp":
            return GDP.from_mu_squared(gdp_mu_squared(self.sigma, self.sensitivity, max(1, statistic.size)))
        return self.cost

    def _add_noise(self, statistic: FloatArray) -> FloatArray:
        """Float-safe: round to the grid, add discrete Gaussian noise there (``mechanisms.lattice``).

        Chosen over snapping because ρ-zCDP of the discrete Gaussian is exact
        (Canonne, Kamath & Steinke 2020, Thm 4) and the charge then needs no change:
        the rounding's L2 inflation g√m is absorbed by a relative 2⁻²⁸(σ/Δ)√m more noise.
        """
        return self._lattice(statistic.size).add(self.rng, statistic)

    def _lattice(self, entries: int) -> GaussianLattice:
        key = (self.sigma, self.sensitivity, entries)
        if getattr(self, "_lattice_key", None) != key:
            self._cached_lattice, self._lattice_key = GaussianLattice(self.sigma, self.sensitivity, entries), key
        return self._cached_lattice

    def _describe(self) -> str:
        return f"sigma={self.sigma!r}, L2 sensitivity={self.sensitivity!r}"


class LaplaceMechanism(_AdditiveNoiseMechanism):
    """Release f(D) + Lap(b)^k for a statistic of L1 sensitivity Δ, charged in pure ε-DP first.

    Sensitivity: ``sensitivity`` is Δ = max ‖f(D) − f(D')‖₁ over neighbouring D, D'
    under ``relation``; stated by the caller and recorded with the charge
    (``release_sum(rows)`` checks every user's row against it).
    Cost per release: ε = Δ/b (Dwork & Roth 2014, Thm 3.6). A pure-DP charge is
    accepted by pure accounts, and converted by the ledger for zCDP (ε²/2) and
    approximate-DP (ε, 0) accounts.

    Parameters
    ----------
    account : accounting.Account
        Account charged before every release, in any currency ("pure", "approx"
        or "zcdp"); checked at construction.
    sensitivity : float
        L1 sensitivity Δ > 0 under ``relation``.
    rng : numpy.random.Generator
        Source of the noise.
    scale : float, optional
        Laplace scale b; each release then costs Δ/b, rounded up to 15 significant digits.
    cost : accounting.PureDP, optional
        Cost of one release; b is then the smallest float with Δ/b ≤ ε and each
        release charges exactly ``cost``. Exactly one of ``scale`` and ``cost``.
    relation : {"replace_one", "add_remove"}
        Neighbouring relation under which ``sensitivity`` holds.
    """

    _MECHANISM = "LaplaceMechanism"
    _ORDER = 1
    cost: PureDP

    def __init__(
        self,
        account: Chargeable,
        sensitivity: float,
        rng: np.random.Generator,
        *,
        scale: float | None = None,
        cost: PureDP | None = None,
        relation: str = "replace_one",
    ) -> None:
        # A pure-DP charge converts into every currency (ε → (ε, 0); ε → ε²/2 zCDP).
        self._check_common(account, sensitivity, rng, relation, ("pure", "approx", "zcdp"),
                           "a Laplace mechanism (pure-DP cost)")
        if (scale is None) == (cost is None):
            raise ValueError("give exactly one of scale (Laplace b > 0) and cost (a PureDP per release)")
        if scale is not None:
            self.scale = check_positive("scale", scale)
            self.cost = PureDP(round_up(laplace_epsilon(self.scale, self.sensitivity)))
        else:
            if not isinstance(cost, PureDP):
                raise TypeError(f"cost must be an accounting.PureDP, got {type(cost).__name__}")
            self.cost = cost
            self.scale = laplace_scale_for(cost.eps, self.sensitivity)

    def _add_noise(self, statistic: FloatArray) -> FloatArray:
        """Float-safe: round to the grid, add discrete Laplace noise there (``mechanisms.lattice``).

        Chosen over snapping (Mironov 2012) because the discrete Laplace is exactly
        ε-DP for integer shifts with no clamping bound to choose, and its sampler is
        exact in integers; the rounding costs m grid steps of L1 sensitivity, absorbed
        by a relative 2⁻⁴⁰(b/Δ)·m more noise, so the charge ε = Δ/b is unchanged.
        """
        lattice = LaplaceLattice(self.cost.eps, self.scale, self.sensitivity, statistic.size)
        return lattice.add(self.rng, statistic)

    def _describe(self) -> str:
        return f"scale={self.scale!r}, L1 sensitivity={self.sensitivity!r}"
