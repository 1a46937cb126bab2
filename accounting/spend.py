"""Spend vectors: a cost as a vector in an account's currency, and their exact arithmetic.

An account keeps what it spent as a tuple of :class:`fractions.Fraction` in its
currency (docs/accounting.md; the ledger's rules: :mod:`accounting.ledger`):

- ``"pure"``: (ε, 0); ``"approx"``: (ε, δ); ``"zcdp"``: (ρ, δ) of approximate
  zCDP (Bun & Steinke 2016, Def. 8.1); ``"gdp"``: (μ², 0), since μ-GDP
  composes as √(Σμᵢ²) (Dong, Roth & Su 2022, Cor. 3.3); ``"rdp"``: an RDP curve
  with one entry per order the account holds (a selection of
  :data:`accounting.rdp.ORDERS`, Mironov 2017); the rdp helpers take those
  ``orders``.
- :data:`ZERO` (two zeros) is the zero of every currency: shorter vectors are
  padded with zeros, so component-wise sums, differences and maxima are exact.
- :func:`in_currency` states a cost in an account's currency where the math
  allows it (pure → zCDP is ε²/2, Bun & Steinke 2016, Prop. 1.4; GDP → zCDP is
  μ²/2; pure → GDP is certified, :func:`accounting.gdp.pure_to_gdp_certified`)
  and raises ``TypeError`` where it forbids it.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import zip_longest
from typing import Literal, TypeGuard

from accounting import convert, gdp, rdp
from accounting.chargeable import account_name
from accounting.costs import GDP, ORDERS, RDP, ZCDP, ApproxDP, Cost, PureDP

__all__ = [
    "CURRENCIES", "FUNDABLE", "UNBOUNDED", "ZERO", "Currency", "Vector", "add", "as_cost", "currency_of", "exhausted",
    "fits", "as_curve", "in_currency", "is_currency", "is_zero", "rdp_curve", "sub", "to_approx", "widest",
]

Currency = Literal["pure", "approx", "zcdp", "gdp", "rdp"]
CURRENCIES: tuple[str, ...] = ("pure", "approx", "zcdp", "gdp", "rdp")
Vector = tuple[Fraction, ...]
ZERO: Vector = (Fraction(0), Fraction(0))

#: Which child currencies a parent currency can fund (a split of an (ε, δ) share can fund any currency whose
#: budget is certified to meet it; :mod:`accounting.split`).
FUNDABLE: dict[str, tuple[str, ...]] = {
    "pure": ("pure",),
    "approx": ("approx", "pure", "zcdp", "gdp", "rdp"),
    "zcdp": ("zcdp",),
    "gdp": ("gdp",),
    "rdp": ("rdp",),
}



def is_currency(value: object) -> TypeGuard[Currency]:
    """Whether ``value`` is one of :data:`CURRENCIES`."""
    return value in CURRENCIES


def add(a: Vector, b: Vector) -> Vector:
    """``a + b`` component-wise."""
    if len(a) == len(b) == 2:
        # Skipping zero components keeps the common (δ = 0) charge cheap: Fraction addition is slow.
        return (a[0] + b[0] if b[0] else a[0], a[1] + b[1] if b[1] else a[1])
    return tuple(x + y if y else x for x, y in zip_longest(a, b, fillvalue=Fraction(0)))


def sub(a: Vector, b: Vector) -> Vector:
    """``a − b`` component-wise."""
    return tuple(x - y for x, y in zip_longest(a, b, fillvalue=Fraction(0)))


def widest(a: Vector, b: Vector) -> Vector:
    """``max(a, b)`` component-wise (parallel composition over partition keys)."""
    return tuple(max(x, y) for x, y in zip_longest(a, b, fillvalue=Fraction(0)))


def fits(a: Vector, b: Vector) -> bool:
    """``a ≤ b`` in every component (the filter's test)."""
    return all(x <= y for x, y in zip_longest(a, b, fillvalue=Fraction(0)))


def is_zero(a: Vector) -> bool:
    """Nothing spent."""
    return not any(a)


def exhausted(remaining: Vector, currency: str, orders: tuple[Fraction, ...] = ORDERS) -> bool:
    """No charge can fit: ε (ρ, μ²) is used up, or, for an RDP curve, some held order is."""
    if currency == "rdp":
        return min(remaining[:len(orders)]) <= 0
    return remaining[0] <= 0


def as_cost(vector: Vector, currency: str, orders: tuple[Fraction, ...] = ORDERS) -> Cost:
    """The cost of ``currency`` whose spend vector is ``vector`` (an rdp vector lists ``orders``)."""
    if currency == "pure":
        return PureDP(vector[0])
    if currency == "approx":
        return ApproxDP(vector[0], vector[1])
    if currency == "gdp":
        return GDP.from_mu_squared(vector[0])
    if currency == "rdp":
        return as_curve(vector, orders)
    return ZCDP(vector[0], vector[1])


def as_curve(vector: Vector, orders: tuple[Fraction, ...] = ORDERS) -> RDP:
    """The RDP curve of an rdp spend vector at ``orders`` (cut or padded with zeros to one entry per order)."""
    n = len(orders)
    values = tuple(vector[:n]) + (Fraction(0),) * (n - len(vector))
    if any(v < 0 for v in values):  # a remaining budget can be negative at no order of a granted account
        return RDP(values, orders)  # raises, naming the field
    return RDP._exact(values, orders)


def currency_of(cost: Cost) -> Currency:
    """The currency a cost is stated in (a ledger's root account takes its budget's)."""
    if isinstance(cost, PureDP):
        return "pure"
    if isinstance(cost, ApproxDP):
        return "approx"
    if isinstance(cost, GDP):
        return "gdp"
    if isinstance(cost, RDP):
        return "rdp"
    return "zcdp"


def _where(*currencies: str) -> str:
    """What to do with a charge an account's currency cannot take: where it can be charged."""
    kinds = " or ".join(currencies)
    return (f"charge it in a {kinds} account (a Ledger whose budget is one, or a child split off an approx "
            f"account: split(weights, currency={{name: {currencies[0]!r}}}))")


def in_currency(cost: Cost, currency: str, path: str, orders: tuple[Fraction, ...] = ORDERS,
                held: tuple[Fraction, ...] | None = None) -> Vector:
    """The cost as a spend vector of ``currency`` (rdp: at ``orders``, see :func:`rdp_curve`); TypeError where the
    math forbids it."""
    if isinstance(cost, ApproxDP) and cost.delta == 0:
        cost = PureDP(cost.eps)
    if currency == "rdp":
        return rdp_curve(cost, path, orders, held)
    if isinstance(cost, RDP):
        raise TypeError(f"account {account_name(path)!r} ({currency}) cannot take an RDP charge ({cost}): an RDP "
                        "curve on a grid of orders implies no zCDP, GDP or (eps, delta) figure without choosing delta; "
                        + _where("rdp"))
    if isinstance(cost, GDP):
        if currency == "gdp":
            return (cost.mu_squared, Fraction(0))
        if currency == "zcdp":  # μ-GDP is dominated by a Gaussian pair, whose Rényi divergences are αμ²/2
            return (cost.mu_squared / 2, Fraction(0))
        raise TypeError(f"account {account_name(path)!r} ({currency}) cannot take a GDP charge ({cost}): pick a "
                        "point of its (eps, delta) curve and charge ApproxDP, or " + _where("gdp", "zcdp"))
    if isinstance(cost, PureDP):
        if currency == "zcdp":
            return (cost.eps * cost.eps / 2, Fraction(0))
        if currency == "gdp":
            mu = gdp.pure_to_gdp_certified(cost.eps)
            return (mu * mu, Fraction(0))
        return (cost.eps, Fraction(0))
    if isinstance(cost, ApproxDP):
        if currency == "approx":
            return (cost.eps, cost.delta)
        raise TypeError(f"account {account_name(path)!r} ({currency}) cannot take an (eps, delta) charge ({cost}): "
                        "(eps, delta) with delta > 0 implies no pure, zCDP, GDP or RDP bound; " + _where("approx"))
    if currency == "zcdp":
        return (cost.rho, cost.delta)
    raise TypeError(f"account {account_name(path)!r} ({currency}) cannot take a zCDP charge ({cost}): zCDP does not "
                    f"imply {currency} DP; " + _where("zcdp", "rdp")
                    + (", or charge the ApproxDP it converts to (accounting.convert) at a delta you choose"
                       if currency == "approx" else ""))


#: The spend recorded at a tracked (not held) order where a charge's curve has no value at or above it: that rung
#: of the account's ladder reads nothing from then on (its reading exceeds any share).
UNBOUNDED = Fraction(10**12)


def rdp_curve(cost: Cost, path: str, orders: tuple[Fraction, ...] = ORDERS,
              held: tuple[Fraction, ...] | None = None) -> Vector:
    """The exact RDP curve of a cost at ``orders`` (:mod:`accounting.rdp`); approximate costs have none.

    An RDP cost must list every one of the ``held`` orders (default: all of
    ``orders``); a cost missing one is refused (``TypeError``), since nothing is
    known there. At a tracked order that is not held (a rung of the account's
    ladder) a missing value is bounded by the value at the next listed order
    above it (RDP is non-decreasing in α: van Erven & Harremoës 2014, Thm 3), or
    recorded as :data:`UNBOUNDED` if there is none.
    """
    if isinstance(cost, RDP):
        if cost.orders is orders or cost.orders == orders:
            return cost.epsilons
        values = tuple(cost.at(order) for order in orders)
        required = orders if held is None else held
        missing = [float(order) for order, value in zip(orders, values, strict=True)
                   if value is None and order in required]
        if missing:
            raise TypeError(f"account {account_name(path)!r} (rdp) holds orders {missing} where the RDP charge "
                            f"{cost} has no finite value: give the curve at every held order")
        if None in values:
            return tuple(value if value is not None else _bound_above(cost, order)
                         for order, value in zip(orders, values, strict=True))
        return values  # type: ignore[return-value]  # no None left
    if isinstance(cost, PureDP):
        return rdp.pure_curve(cost.eps, orders)
    if isinstance(cost, GDP):
        return rdp.gaussian_curve(cost.mu_squared / 2, orders)
    if isinstance(cost, ZCDP) and cost.delta == 0:
        return rdp.gaussian_curve(cost.rho, orders)
    raise TypeError(f"account {account_name(path)!r} (rdp) cannot take {cost}: an approximate (delta > 0) charge "
                    "has no RDP curve; " + _where("approx"))


def _bound_above(cost: RDP, order: Fraction) -> Fraction:
    """The curve's value at its next listed order above ``order`` (a valid bound there), else :data:`UNBOUNDED`."""
    above = [value for listed, value in zip(cost.orders, cost.epsilons, strict=True) if listed > order]
    return above[0] if above else UNBOUNDED


def to_approx(used: Vector, currency: str, delta: Fraction, orders: tuple[Fraction, ...] = ORDERS) -> Fraction:
    """Certified ε at ``delta`` of a zCDP (ρ), GDP (μ²) or RDP (curve at ``orders``) spend vector."""
    if currency == "zcdp":
        return convert.zcdp_to_approx_certified(used[0], delta)
    if currency == "gdp":
        return gdp.gdp_to_approx_certified(used[0], delta)
    return rdp.curve_to_approx_certified(as_curve(used, orders).epsilons, delta, orders)
