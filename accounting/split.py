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
  to convert to at most the share: ρ_max of the CKS conversion rounded down
  (:func:`accounting.convert.approx_to_zcdp_certified`), μ_max
  (:func:`accounting.gdp.approx_to_gdp_certified`), or, for RDP, one held order
  with the budget meeting the share there (:func:`accounting.rdp.held_for_share`)
  unless a budget curve is given (it holds the orders it lists), which must
  itself convert to at most the share.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from accounting import convert, gdp, rdp
from accounting.chargeable import PartitionKey
from accounting.costs import ORDERS, RDP, as_fraction
from accounting.spend import CURRENCIES, FUNDABLE, Currency, Vector, is_currency

__all__ = ["Plan", "check_curves", "check_weights", "child_budget", "describe_split", "plan_split"]

#: Child name → (share taken from the parent, in its currency; child's budget, in the child's; the orders an rdp
#: child holds, :data:`accounting.costs.ORDERS` for the others).
Plan = dict[str, tuple[Vector, Vector, tuple[Fraction, ...]]]


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
               curves: Mapping[str, RDP], orders: tuple[Fraction, ...] = ORDERS) -> Plan:
    """Each child's exact share of ``remaining`` (in proportion to ``weights``), its budget and held orders.

    ``orders`` are the parent's held orders (an rdp parent's children hold the same).
    """
    total = sum(weights.values())
    planned: Plan = {}
    for name, weight in weights.items():
        share = tuple(part * weight / total for part in remaining)
        planned[name] = child_budget(name, share, currencies[name], parent, curves.get(name), orders)
    return planned


def child_budget(name: str, share: Vector, currency: Currency, parent: Currency, curve: RDP | None = None,
                 orders: tuple[Fraction, ...] = ORDERS) -> tuple[Vector, Vector, tuple[Fraction, ...]]:
    """(share taken from the parent, child's budget in its currency, held orders): the module docstring's rules."""
    if currency == parent:
        return share, share, orders
    if currency == "pure":  # pure child of an approx account: delta stays with the parent
        return (share[0], Fraction(0)), (share[0], Fraction(0)), ORDERS
    # zCDP, GDP or RDP child of an approx account.
    if share[1] <= 0:
        raise ValueError(f"currency[{name!r}]={currency!r} needs a delta > 0 in its (eps, delta) share")
    if currency == "gdp":  # the largest μ meeting the share, exactly (certified)
        mu_max = gdp.approx_to_gdp_certified(share[0], share[1])
        return share, (mu_max * mu_max, Fraction(0)), ORDERS
    if currency == "rdp":
        if curve is None:
            curve = rdp.held_for_share(share[0], share[1])
        if not isinstance(curve, RDP):
            raise TypeError(f"curves[{name!r}] must be an accounting.RDP, got {type(curve).__name__}")
        eps = rdp.curve_to_approx_certified(curve.epsilons, share[1], curve.orders)
        if eps > share[0]:
            raise ValueError(f"curves[{name!r}] converts to eps={float(eps):.6g} at delta={float(share[1]):.3g}, "
                             f"above its share eps={float(share[0]):.6g}")
        if min(curve.epsilons) <= 0:
            raise ValueError(f"curves[{name!r}] must be > 0 at every order it lists (drop the orders it does not hold)")
        return share, curve.epsilons, curve.orders
    rho_max = convert.approx_to_zcdp_certified(share[0], share[1])
    return share, (rho_max, Fraction(0)), ORDERS


def describe_split(weights: Mapping[str, Fraction], currencies: Mapping[str, str],
                   partition: PartitionKey = None) -> str:
    """``{name: weight (currency), ...}`` and its partition key, for a journal mismatch message."""
    under = "" if partition is None else f" under partition {partition!r}"
    return "{" + ", ".join(f"{n}: {w} ({currencies[n]})" for n, w in weights.items()) + "}" + under
