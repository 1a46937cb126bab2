"""The non-adaptive figure: every recorded charge composed as one mechanism, then converted once.

Valid only if the sequence of charges was fixed before any data were seen
(docs/accounting.md, "Claims"): composing the realised costs of adaptively
chosen mechanisms and converting the result is not a valid odometer (Rogers,
Roth, Ullman & Vadhan 2016), so it is reported as *not* a claim; a run whose
costs are fixed in advance declares them as a plan (:mod:`accounting.plans`),
whose figure this module computes and which then is the claim. Where it is
valid, it is the tightest figure the ledger can state: two opacus runs charged
ε = 10.2 each at δ = 10⁻⁵ sum to ε = 20.43 at δ = 2·10⁻⁵, where one PLD of both
gives 14.59.

How the charges are composed (each charge as the ledger recorded it, under the
ledger's relation; partitions are composed sequentially, an upper bound):

- **GDP**, if every charge is a plain μ-GDP charge: exactly √(Σμᵢ²)-GDP
  (Dong, Roth & Su 2022, Corollary 3.3: G_μ₁ ⊗ G_μ₂ = G_√(μ₁²+μ₂²)), converted
  through the Gaussian tradeoff curve (:func:`accounting.gdp.gdp_to_approx_certified`),
  tighter than any discretised PLD of the same charges and with no dp-accounting import
  (a private bandit's pool charges only GDP).
- else **PLD** (dp-accounting, add/remove reading of the pair forms, discretisation
  10⁻⁴), if every charge has one: an event's pair form; GDP μ as
  ``GaussianDpEvent(1/μ)`` (z rounded down); pure ε and (ε, δ) charges
  through their privacy-parameter PLD (the worst pair with those parameters,
  Kairouz, Oh & Viswanath 2015).
- else **RDP**, if every charge has a curve: the events' curves on the grid,
  μ-GDP as αμ²/2, ρ-zCDP as αρ, ε-DP as min(ε, αε²/2), RDP charges at the
  orders they list; summed at the orders all of them list and converted as
  :func:`accounting.rdp.curve_to_approx_certified`.
- else none (``TypeError`` naming the first charge without a curve).

Pure functions of the charges (:data:`Charge`): the ledger gathers them
(:meth:`accounting.ledger.Ledger.nonadaptive_figure`), a plan lists its own
(:mod:`accounting.plans`).
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

from accounting.chargeable import account_name
from accounting.costs import GDP, ORDERS, RDP, ZCDP, ApproxDP, Cost, PureDP

__all__ = ["Charge", "composed_figure"]
_INTERVAL = 1e-4
_MAX_PARAMETER_PLDS = 200  # distinct (ε, δ) charges composed as privacy-parameter PLDs


#: A distinct charge and how often it was made: (first seq, account path, charged, pair-form event, from an event,
#: count). A plan's items take the same form (:mod:`accounting.plans`).
Charge = tuple[int, str, Cost, Any, bool, int]


def composed_figure(charges: list[Charge], delta: Fraction) -> Fraction:
    """ε at δ of ``charges`` composed as one mechanism: GDP, else one PLD, else RDP (module docstring)."""
    if not charges:
        return Fraction(0)
    figure = _gdp_figure(charges, delta)
    if figure is None:
        figure = _pld_figure(charges, delta)
    return _rdp_figure(charges, delta) if figure is None else figure


def _repeat(event: Any, count: int) -> Any:
    from dp_accounting import SelfComposedDpEvent

    return event if count == 1 else SelfComposedDpEvent(event, count)


def _where(seq: int, path: str, charged: Cost) -> str:
    return f"charge #{seq} on account {account_name(path)!r} ({charged})"


def _gdp_figure(charges: list[Charge], delta: Fraction) -> Fraction | None:
    """ε at δ of √(Σμᵢ²)-GDP if every charge is a plain GDP charge, else None (module docstring)."""
    if not all(isinstance(charged, GDP) and not (from_event and event is not None)
               for _seq, _path, charged, event, from_event, _count in charges):
        return None
    from accounting.gdp import gdp_to_approx_certified

    mu_squared = sum((count * charged.mu_squared for _seq, _path, charged, _event, _from, count in charges
                      if isinstance(charged, GDP)), Fraction(0))
    return gdp_to_approx_certified(mu_squared, delta)


def _pld_figure(charges: list[Charge], delta: Fraction) -> Fraction | None:
    """ε at δ of one PLD of every charge, or None if some charge has no PLD (module docstring)."""
    from dp_accounting import ComposedDpEvent, NeighboringRelation
    from dp_accounting.pld import common, pld_privacy_accountant, privacy_loss_distribution

    from accounting.event_check import checked_event, gaussian_event
    from accounting.events import _check_pld_work, _round_up

    events: list[Any] = []
    mu_squared = Fraction(0)
    parameters: Counter[tuple[Fraction, Fraction]] = Counter()
    for _seq, _path, charged, event, from_event, count in charges:
        if from_event and event is not None:
            events.append(_repeat(event, count))
        elif isinstance(charged, GDP):
            mu_squared += count * charged.mu_squared
        elif isinstance(charged, PureDP):
            parameters[(charged.eps, Fraction(0))] += count
        elif isinstance(charged, ApproxDP):
            parameters[(charged.eps, charged.delta)] += count
        else:
            return None
    if mu_squared:
        events.append(gaussian_event(mu_squared))
    if len(parameters) > _MAX_PARAMETER_PLDS:
        return None
    accountant = pld_privacy_accountant.PLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE,
                                                      value_discretization_interval=_INTERVAL)
    if events:
        composed = checked_event(ComposedDpEvent(events))
        _check_pld_work(composed, NeighboringRelation.ADD_OR_REMOVE_ONE, delta)
        if not accountant.supports(composed):
            return None
        accountant.compose(composed)
    pld = accountant._pld  # dp-accounting 0.6 keeps the composed PLD here
    for (eps, part_delta), count in parameters.items():
        if eps > 500:
            return None
        part = privacy_loss_distribution.from_privacy_parameters(
            common.DifferentialPrivacyParameters(float(eps), float(part_delta)),
            value_discretization_interval=_INTERVAL)
        pld = pld.compose(part.self_compose(count) if count > 1 else part)
    eps_float = float(pld.get_epsilon_for_delta(float(delta)))
    return _round_up(eps_float) if eps_float < float("inf") else None


def _rdp_figure(charges: list[Charge], delta: Fraction) -> Fraction:
    """ε at δ of the summed RDP curves of every charge (module docstring); TypeError if one has none."""
    from dp_accounting import ComposedDpEvent, NeighboringRelation

    from accounting import rdp
    from accounting.event_check import checked_event
    from accounting.events import _rdp_cost

    curves: list[RDP] = []
    events: list[Any] = []
    for seq, path, charged, event, from_event, count in charges:
        if from_event and event is not None:
            events.append(_repeat(event, count))
            continue
        if isinstance(charged, RDP):
            curve = charged
        elif isinstance(charged, GDP):
            curve = RDP._exact(rdp.gaussian_curve(charged.mu_squared / 2), ORDERS)
        elif isinstance(charged, ZCDP) and charged.delta == 0:
            curve = RDP._exact(rdp.gaussian_curve(charged.rho), ORDERS)
        elif isinstance(charged, PureDP) or (isinstance(charged, ApproxDP) and charged.delta == 0):
            curve = RDP._exact(rdp.pure_curve(charged.eps), ORDERS)
        else:
            raise TypeError(f"{_where(seq, path, charged)} has neither a PLD nor an RDP curve: no non-adaptive "
                            "figure composes it")
        curves.append(curve if count == 1 else RDP._exact(tuple(count * e for e in curve.epsilons), curve.orders))
    if events:
        composed = checked_event(ComposedDpEvent(events))
        curves.append(_rdp_cost(composed, composed, NeighboringRelation.ADD_OR_REMOVE_ONE))
    orders = [o for o in ORDERS if all(c.at(o) is not None for c in curves)]
    if not orders:
        raise TypeError("the charges' RDP curves have no order in common: no non-adaptive figure composes them")
    summed = tuple(sum((c.at(o) or Fraction(0) for c in curves), Fraction(0)) for o in orders)
    return rdp.curve_to_approx_certified(summed, delta, tuple(orders))
