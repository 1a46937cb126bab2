"""Odometer ladders: how an account's claim is read from its spend, with rungs fixed from its share alone.

An account funded by an (ε, δ) share (a zCDP, GDP or RDP child of a pure or
approx account, or a ledger whose own budget is zCDP, GDP or RDP, at a δ the
user fixes) states, at any time, a claim (E, δ): the run so far is (E, δ)-DP
*ex post*, valid however its charges were chosen (fully adaptive composition;
docs/accounting.md, "Claims"). The construction, fixed when the account is made
and never from its charges:

- δ is divided once: the **filter** (the account's budget, which refuses
  charges) gets δ_F = (1 − λ)·δ with λ = :data:`LADDER_SHARE`, and the budget is
  the largest one that converts to ε at δ_F (this is what the split costs in
  noise); the **rungs** below it share λ·δ equally.
- Each rung is one Rényi order α with its own δ_α. Its reading is the
  Canonne–Kamath–Steinke conversion of the *realised* Rényi spend S(α):
  S(α) + ln(1 − 1/α) − (ln δ_α + ln α)/(α − 1). Written with the rung's budget
  B_α = ε − ln(1 − 1/α) + (ln δ_α + ln α)/(α − 1) (rounded down, certified by
  :func:`accounting.rdp.order_budget`), the reading is ε + S(α) − B_α, an upper
  bound of that conversion.
- The claim is the smallest reading, and 0 while nothing was spent. It never
  exceeds ε: the held order of an rdp account and the best order of a zCDP
  budget are rungs at δ_F whose reading is ≤ ε whenever the filter holds; a
  GDP account (whose filter is the exact Gaussian tradeoff, not a Rényi bound)
  and an account holding a user's budget curve have a constant top rung, the
  filter's own conversion at δ_F.

Why a rung reading is valid for adaptively chosen costs at one fixed order α:
the product over steps of e^{(α−1)(ℓᵢ − εᵢ(α))} is a nonnegative
supermartingale (each step is (α, εᵢ(α))-RDP given the past), so
E[e^{(α−1)(L − S(α))}] ≤ 1 at any stopping time, and (1 − e^{E − L})⁺ ≤
κ_α e^{(α−1)(L − E)} pointwise (κ_α = (1 − 1/α)^{α−1}/α) turns that into an
ex-post hockey-stick bound of δ_α at E = S(α) + g_α(δ_α). Several rungs (and
the filter) need their δs summed: the readings' minimum is valid at Σδ ≤ δ.
The theorem, its conditions and the numerical checks: docs/accounting.md.

:data:`ODOMETER_ORDERS` are the rung orders besides the held one; they and λ
were chosen once (docs/accounting.md: the DP-SGD runs of issue 30 read within
1.57× of dp-accounting's non-adaptive RdpAccountant with λ = 1/10 and these
seven orders).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from accounting.rdp import curve_to_approx_certified, held_for_share, order_budget

__all__ = ["LADDER_SHARE", "ODOMETER_ORDERS", "Ladder", "curve_ladder", "filter_delta", "gdp_ladder", "legacy_ladder",
           "rdp_ladder", "zcdp_ladder"]

#: λ: the part of an account's δ its rungs below the filter share (the filter keeps 1 − λ).
LADDER_SHARE = Fraction(1, 10)
#: Rung orders besides the held one (a selection of :data:`accounting.costs.ORDERS`).
ODOMETER_ORDERS: tuple[Fraction, ...] = tuple(Fraction(a) for a in (2, 3, 5, 8, 12, 20, 32))


def filter_delta(delta: Fraction) -> Fraction:
    """δ_F = (1 − λ)·δ: the δ at which an account's budget (its filter) converts to its ε."""
    return (1 - LADDER_SHARE) * delta


@dataclass(frozen=True)
class Ladder:
    """The rungs an account reads its claim from (module docstring); immutable, fixed from the share alone.

    Parameters
    ----------
    eps, delta : Fraction
        The share: the claim is stated at ``delta`` and never exceeds ``eps``.
    orders : tuple of Fraction
        One continuous rung per order.
    budgets : tuple of Fraction
        B_α per order: the reading at α is ``eps + S(α) − B_α``.
    deltas : tuple of Fraction
        δ_α per order (shown in reports; Σ deltas + top_delta ≤ delta).
    top : Fraction or None
        A constant rung (the filter's own conversion at ``top_delta``), or None.
    top_delta : Fraction
        The δ the constant rung uses (0 without one).
    """

    eps: Fraction
    delta: Fraction
    orders: tuple[Fraction, ...] = ()
    budgets: tuple[Fraction, ...] = ()
    deltas: tuple[Fraction, ...] = ()
    top: Fraction | None = None
    top_delta: Fraction = Fraction(0)

    def read(self, divergences: Sequence[Fraction]) -> Fraction:
        """The claim's ε for a spend whose Rényi bound at ``self.orders[i]`` is ``divergences[i]``.

        0 while nothing was spent (no mechanism ran: no loss at all), else the
        smallest rung reading, never above :attr:`eps`.
        """
        if not any(divergences):
            return Fraction(0)
        best = self.eps if self.top is None else min(self.eps, self.top)
        for spent, budget in zip(divergences, self.budgets, strict=True):
            reading = self.eps + spent - budget
            if reading < best:
                best = reading
        return max(best, Fraction(0))

    def to_dict(self) -> dict[str, object]:
        """The journal form (exact ``num/den`` strings)."""
        return {"eps": str(self.eps), "delta": str(self.delta), "orders": [str(o) for o in self.orders],
                "budgets": [str(b) for b in self.budgets], "deltas": [str(d) for d in self.deltas],
                "top": None if self.top is None else str(self.top), "top_delta": str(self.top_delta)}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Ladder:
        """Inverse of :meth:`to_dict`."""
        def exact(values: object) -> tuple[Fraction, ...]:
            assert isinstance(values, list)
            return tuple(Fraction(str(v)) for v in values)

        top = data.get("top")
        return cls(Fraction(str(data["eps"])), Fraction(str(data["delta"])), exact(data["orders"]),
                   exact(data["budgets"]), exact(data["deltas"]), None if top is None else Fraction(str(top)),
                   Fraction(str(data["top_delta"])))


def _rungs(eps: Fraction, delta: Fraction, held: Fraction | None) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...],
                                                                           tuple[Fraction, ...]]:
    """Orders, budgets and δs of the continuous rungs: ``held`` at δ_F, the others sharing λ·δ; useless ones dropped."""
    others = [o for o in ODOMETER_ORDERS if o != held]
    share = LADDER_SHARE * delta / len(others)
    wanted = sorted([(held, filter_delta(delta))] if held is not None else [], key=lambda x: x[0])
    wanted = sorted(wanted + [(o, share) for o in others], key=lambda x: x[0])
    orders, budgets, deltas = [], [], []
    for order, rung_delta in wanted:
        budget = order_budget(order, eps, rung_delta)
        if budget > 0:  # a rung whose reading is ≥ ε at any spend says nothing
            orders.append(order)
            budgets.append(budget)
            deltas.append(rung_delta)
    return tuple(orders), tuple(budgets), tuple(deltas)


@lru_cache(maxsize=512)
def rdp_ladder(eps: Fraction, delta: Fraction, held: Fraction) -> Ladder:
    """The ladder of an rdp account holding one order ``held`` for the share (ε, δ); its budget is that rung's B."""
    orders, budgets, deltas = _rungs(eps, delta, held)
    if held not in orders:
        raise ValueError(f"no RDP budget at order {float(held)} meets (eps={float(eps)}, "
                         f"delta={float(filter_delta(delta))})")
    return Ladder(eps, delta, orders, budgets, deltas)


def curve_ladder(eps: Fraction, delta: Fraction, curve: Sequence[Fraction], held: tuple[Fraction, ...]) -> Ladder:
    """The ladder of an rdp account holding a budget curve (its orders ``held``): a constant top rung at δ_F.

    The top is the curve's own conversion at δ_F (≤ ε, checked by the caller);
    the other orders share λ·δ.
    """
    top = curve_to_approx_certified(tuple(curve), filter_delta(delta), held)
    orders, budgets, deltas = _rungs(eps, delta, None)
    return Ladder(eps, delta, orders, budgets, deltas, top, filter_delta(delta))


@lru_cache(maxsize=512)
def zcdp_ladder(eps: Fraction, delta: Fraction) -> tuple[Ladder, Fraction]:
    """The ladder of a zCDP account of share (ε, δ), and its budget ρ_max (the best order's rung at δ_F).

    The best order α* maximises B_α(ε, δ_F)/α over the grid (the order of
    :func:`accounting.rdp.held_for_share` at δ_F) and ρ_max = B_α*/α* exactly, so
    the zCDP filter Σρ ≤ ρ_max is that order's rung and reads ≤ ε when it holds.
    A share so small that no grid order has a positive budget (ε = 0.0067 at
    δ = 6·10⁻⁸ wants α near 3000) takes the real optimum of the CKS inverse
    (:func:`accounting.convert.approx_to_zcdp_order`), rounded to a rational: αρ
    is a zCDP account's Rényi bound at every order, not only the grid's.
    """
    try:
        best = held_for_share(eps, filter_delta(delta)).orders[0]
    except ValueError:
        from accounting.convert import approx_to_zcdp_order

        best = Fraction(approx_to_zcdp_order(eps, filter_delta(delta))).limit_denominator(1000)
    ladder = rdp_ladder(eps, delta, best)
    return ladder, ladder.budgets[ladder.orders.index(best)] / best


@lru_cache(maxsize=512)
def gdp_ladder(eps: Fraction, delta: Fraction, top: Fraction) -> Ladder:
    """The ladder of a GDP account of share (ε, δ): a constant top ``top`` (the filter's exact-GDP conversion at δ_F).

    Below it, Rényi rungs read μ²α/2 (μ-GDP is (α, αμ²/2)-RDP) at the other orders, sharing λ·δ.
    """
    orders, budgets, deltas = _rungs(eps, delta, None)
    return Ladder(eps, delta, orders, budgets, deltas, top, filter_delta(delta))


def legacy_ladder(eps: Fraction, delta: Fraction) -> Ladder:
    """An account journalled before ladders existed (its budget meets the share at the whole δ): the filter only."""
    return Ladder(eps, delta, top=eps, top_delta=delta)
