"""Budget plans: how a split divides an account's remaining budget among its children.

:meth:`accounting.ledger.Account.split` checks its arguments here, and plans
the children's budgets here, before it takes the ledger's lock to journal and
apply the plan (docs/accounting.md; the ledger's rules: :mod:`accounting.ledger`).

- Shares are exact: child k gets ``remaining · w_k / Σw`` component-wise, so the
  children never sum past what the parent had left. ``remaining`` is the
  parent's :attr:`~accounting.ledger.Account.remaining`, or, for a split under a
  partition key, what still fits under that key
  (:meth:`~accounting.ledger.Account.remaining_in`).
- A child of the parent's currency gets its share as its budget. A pure child
  of an (ε, δ) share gets (ε, 0) and the δ stays with the parent.
- A zCDP, GDP or RDP child of an (ε, δ) share gets the largest budget certified
  to convert to at most the share's ε at the filter's δ_F = (1 − λ)δ
  (:func:`accounting.ladder.filter_delta`), and an odometer ladder fixed from the
  share (:mod:`accounting.ladder`; the other λδ is its rungs'): ρ_max of the best
  Rényi order (:func:`accounting.ladder.zcdp_ladder`), μ_max of the exact Gaussian
  tradeoff (:func:`accounting.gdp.approx_to_gdp_certified`), or, for RDP, one held
  order with its rung's budget (:func:`accounting.ladder.rdp_ladder`) unless a
  budget curve is given (it holds the orders it lists), which must itself
  convert to at most ε at δ_F. An rdp child keeps its spend at its held orders
  and at the ladder's rung orders (its *tracked* orders).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import NamedTuple

from accounting import gdp, ladder, rdp
from accounting.chargeable import PartitionKey
from accounting.costs import ORDERS, RDP, as_fraction
from accounting.ladder import Ladder
from accounting.spend import CURRENCIES, FUNDABLE, Currency, Vector, is_currency

__all__ = ["Allocation", "Allocations", "check_curves", "check_weights", "child_budget", "describe_split",
           "plan_split", "tracked_orders"]


class Allocation(NamedTuple):
    """What one child of a split gets (the module docstring's rules)."""

    share: Vector
    """Taken from the parent, in the parent's currency."""
    budget: Vector
    """The child's budget in its currency (rdp: one entry per held order)."""
    orders: tuple[Fraction, ...]
    """The orders an rdp child holds (:data:`accounting.costs.ORDERS` for the others)."""
    tracked: tuple[Fraction, ...]
    """The orders an rdp child keeps its spend at (held ∪ rung orders); ``orders`` for the others."""
    ladder: Ladder | None
    """Its odometer ladder: a zCDP, GDP or RDP child of an (ε, δ) share; None for a child of its parent's currency."""


#: Child name → its allocation, in the order of the split's weights.
Allocations = dict[str, Allocation]


def tracked_orders(held: tuple[Fraction, ...], rungs: tuple[Fraction, ...]) -> tuple[Fraction, ...]:
    """The held orders and a ladder's rung orders, sorted (what an rdp account keeps its spend at)."""
    return tuple(sorted(set(held) | set(rungs)))


def check_weights(weights: object, currency: object,
                  parent: Currency) -> tuple[dict[str, Fraction], dict[str, Currency]]:
    """Exact positive weights by child name, and each child's currency (default: the parent's ``parent``)."""
    if not isinstance(weights, Mapping) or not weights:
        raise ValueError("weights must be a non-empty mapping of child name to positive weight")
    exact: dict[str, Fraction] = {}
    for name, weight in weights.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"weights: child names must be non-empty strings without '/', got {name!r}")
        value = as_fraction(weight, f"weights[{name!r}]")
        if value <= 0:
            raise ValueError(f"weights[{name!r}] must be > 0, got {weight}")
        exact[name] = value
    if currency is None:
        currency = {}
    if not isinstance(currency, Mapping):
        raise TypeError(f"currency must be a mapping of child name to currency, got {type(currency).__name__}")
    unknown = [name for name in currency if name not in exact]
    if unknown:
        raise ValueError(f"currency names children not in weights: {unknown}")
    currencies: dict[str, Currency] = {}
    for name in exact:
        chosen = currency.get(name, parent)
        if not is_currency(chosen):
            raise ValueError(f"currency[{name!r}] must be one of {CURRENCIES}, got {chosen!r}")
        if chosen not in FUNDABLE[parent]:
            raise TypeError(f"currency[{name!r}]: a {parent} account can fund {FUNDABLE[parent]} children, "
                            f"not {chosen!r}")
        currencies[name] = chosen
    return exact, currencies


def check_curves(curves: Mapping[str, RDP] | None, currencies: Mapping[str, Currency],
                 parent: Currency) -> dict[str, RDP]:
    """The budget curves by child name; only rdp children of an approx account take one."""
    exact = {} if curves is None else dict(curves)
    unknown = [n for n in exact if currencies.get(n) != "rdp" or parent != "approx"]
    if unknown:
        raise ValueError(f"curves: only rdp children of an approx account take a budget curve, not {unknown}")
    return exact


def plan_split(remaining: Vector, weights: Mapping[str, Fraction], currencies: Mapping[str, Currency], parent: Currency,
               curves: Mapping[str, RDP], orders: tuple[Fraction, ...] = ORDERS,
               tracked: tuple[Fraction, ...] = ORDERS) -> Allocations:
    """Each child's exact share of ``remaining`` (in proportion to ``weights``), its budget, orders and ladder.

    ``remaining`` is at the parent's held ``orders``; an rdp parent's children
    hold the same orders and track the parent's ``tracked`` ones.
    """
    total = sum(weights.values())
    planned: Allocations = {}
    for name, weight in weights.items():
        share = tuple(part * weight / total for part in remaining)
        planned[name] = child_budget(name, share, currencies[name], parent, curves.get(name), orders, tracked)
    return planned


def child_budget(name: str, share: Vector, currency: Currency, parent: Currency, curve: RDP | None = None,
                 orders: tuple[Fraction, ...] = ORDERS, tracked: tuple[Fraction, ...] = ORDERS) -> Allocation:
    """One child's :class:`Allocation`: the module docstring's rules."""
    if currency == parent:
        return Allocation(share, share, orders, tracked if currency == "rdp" else orders, None)
    if currency == "pure":  # pure child of an approx account: delta stays with the parent
        return Allocation((share[0], Fraction(0)), (share[0], Fraction(0)), ORDERS, ORDERS, None)
    # zCDP, GDP or RDP child of an approx account.
    eps, delta = share[0], share[1]
    if delta <= 0:
        raise ValueError(f"currency[{name!r}]={currency!r} needs a delta > 0 in its (eps, delta) share")
    if currency == "gdp":  # the largest μ meeting the share at δ_F, exactly (certified: its top rung is ε)
        mu_max = gdp.approx_to_gdp_certified(eps, ladder.filter_delta(delta))
        return Allocation(share, (mu_max * mu_max, Fraction(0)), ORDERS, ORDERS, ladder.gdp_ladder(eps, delta, eps))
    if currency == "zcdp":
        rungs, rho_max = ladder.zcdp_ladder(eps, delta)
        return Allocation(share, (rho_max, Fraction(0)), ORDERS, ORDERS, rungs)
    if curve is None:
        held = rdp.held_for_share(eps, ladder.filter_delta(delta)).orders[0]
        rungs = ladder.rdp_ladder(eps, delta, held)
        budget = (rungs.budgets[rungs.orders.index(held)],)
        return Allocation(share, budget, (held,), tracked_orders((held,), rungs.orders), rungs)
    if not isinstance(curve, RDP):
        raise TypeError(f"curves[{name!r}] must be an accounting.RDP, got {type(curve).__name__}")
    if min(curve.epsilons) <= 0:
        raise ValueError(f"curves[{name!r}] must be > 0 at every order it lists (drop the orders it does not hold)")
    if len(curve.orders) == 1:  # one held order: its own continuous rung, if the curve is that rung's budget or less
        rungs = ladder.rdp_ladder(eps, delta, curve.orders[0])
        if curve.epsilons[0] <= rungs.budgets[rungs.orders.index(curve.orders[0])]:
            return Allocation(share, curve.epsilons, curve.orders, tracked_orders(curve.orders, rungs.orders), rungs)
    converted = rdp.curve_to_approx_certified(curve.epsilons, ladder.filter_delta(delta), curve.orders)
    if converted > eps:
        raise ValueError(f"curves[{name!r}] converts to eps={float(converted):.6g} at the filter's "
                         f"delta={float(ladder.filter_delta(delta)):.3g} (the share's delta less the odometer's "
                         f"{float(ladder.LADDER_SHARE):g}), above its share eps={float(eps):.6g}: scale it with "
                         "accounting.rdp.scaled_to_share(curve, eps, accounting.ladder.filter_delta(delta))")
    rungs = ladder.curve_ladder(eps, delta, curve.epsilons, curve.orders)
    return Allocation(share, curve.epsilons, curve.orders, tracked_orders(curve.orders, rungs.orders), rungs)


def describe_split(weights: Mapping[str, Fraction], currencies: Mapping[str, str],
                   partition: PartitionKey = None) -> str:
    """``{name: weight (currency), ...}`` and its partition key, for a journal mismatch message."""
    under = "" if partition is None else f" under partition {partition!r}"
    return "{" + ", ".join(f"{n}: {w} ({currencies[n]})" for n, w in weights.items()) + "}" + under
