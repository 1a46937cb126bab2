"""Privacy costs as exact, immutable values, and the neighbouring relations.

A cost is what a mechanism (or a theorem) spends: ``PureDP(eps)``,
``ApproxDP(eps, delta)`` or ``ZCDP(rho, delta=0)`` (approximate zCDP, Bun &
Steinke 2016, Def. 1.2 / 8.1). Every field is a :class:`fractions.Fraction`
so that a ledger can add and compare spends exactly.

Exactness rule (read this before charging floats): a float argument is read
as the decimal it prints as, ``Fraction(repr(x))``; so ``0.1`` is exactly
1/10 and ten charges of ``0.1`` fit in a budget of ``1`` while the eleventh is
refused. Anything that calibrates noise *from* a charged value must round its
noise up (see :mod:`accounting.convert`) so the real privacy loss never
exceeds the exact charge. Zero is allowed in every field (it is how a ledger
reports "nothing spent"); a :class:`~accounting.ledger.Ledger` budget must be
positive.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal, TypeAlias

import numpy as np

from accounting.validation import check_exact, short_repr

Relation = Literal["add_remove", "replace_one"]
#: The neighbouring relations a charge may state: add/remove one user's data,
#: or replace one user's data (the project default).
RELATIONS: tuple[str, ...] = ("add_remove", "replace_one")

#: What a cost field, a budget or a weight accepts: an int, float, Fraction or Decimal, or a numpy integer or
#: floating scalar (any ``numbers.Real`` is read at run time). Every field *stores* a Fraction (:func:`as_fraction`).
Number: TypeAlias = int | float | Fraction | Decimal | np.integer[Any] | np.floating[Any]


def as_fraction(value: Number, name: str) -> Fraction:
    """Read ``value`` exactly; a float is read as the decimal it prints as.

    Parameters
    ----------
    value : int, float, Fraction, Decimal or numpy real scalar
        The number. ``bool`` and non-numbers raise ``TypeError``; NaN and
        infinities raise ``ValueError`` (:func:`accounting.validation.check_exact`).
    name : str
        Argument name used in error messages.
    """
    return check_exact(name, value)


def check_relation(relation: str) -> str:
    """Return ``relation`` if it is one of :data:`RELATIONS`, else raise ``ValueError``.

    ``"replace_one"`` (the project default): neighbouring data sets differ by one
    user's data replaced; ``"add_remove"``: by one user's data added or removed.
    ``mechanisms.release`` re-exports this function.
    """
    if not isinstance(relation, str) or relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {short_repr(relation)}")
    return relation


def show(value: Fraction, digits: int = 6) -> str:
    """``value`` to ``digits`` significant digits, like ``f"{float(value):.6g}"`` but never overflowing.

    A cost may be far beyond a float (``PureDP(10**400)``, a charge that must be
    refused with a readable message); those print through :class:`~decimal.Decimal`.
    """
    if value == 0 or Fraction(1, 10**300) < abs(value) < 10**300:
        return f"{float(value):.{digits}g}"
    return f"{(Decimal(value.numerator) / Decimal(value.denominator)).normalize():.{digits}g}"


@dataclass(frozen=True, init=False, repr=False)
class PureDP:
    """Pure ε-differential privacy (Dwork et al. 2006). ``eps`` ∈ [0, ∞): any :data:`Number`, stored as a Fraction."""

    eps: Fraction

    def __init__(self, eps: Number) -> None:
        object.__setattr__(self, "eps", check_exact("eps", eps, 0))

    def __str__(self) -> str:
        return f"PureDP(eps={show(self.eps)})"

    __repr__ = __str__  # six significant digits; the exact value is the field (and the JSON's "exact")


@dataclass(frozen=True, init=False, repr=False)
class ApproxDP:
    """Approximate (ε, δ)-differential privacy. ``eps`` ∈ [0, ∞), ``delta`` ∈ [0, 1): :data:`Number`, stored exactly."""

    eps: Fraction
    delta: Fraction

    def __init__(self, eps: Number, delta: Number) -> None:
        object.__setattr__(self, "eps", check_exact("eps", eps, 0))
        object.__setattr__(self, "delta", check_exact("delta", delta, 0, 1, high_open=True))

    def __str__(self) -> str:
        return f"ApproxDP(eps={show(self.eps)}, delta={show(self.delta)})"

    __repr__ = __str__


@dataclass(frozen=True, init=False, repr=False)
class ZCDP:
    """(Approximate) ρ-zero-concentrated DP (Bun & Steinke 2016, Def. 1.1 and 8.1).

    ``rho`` ∈ [0, ∞); ``delta`` ∈ [0, 1) is the δ of approximate zCDP (0 for
    plain zCDP, e.g. the Gaussian mechanism). Both accept any :data:`Number`
    and are stored as Fractions.
    """

    rho: Fraction
    delta: Fraction = Fraction(0)

    def __init__(self, rho: Number, delta: Number = 0) -> None:
        object.__setattr__(self, "rho", check_exact("rho", rho, 0))
        object.__setattr__(self, "delta", check_exact("delta", delta, 0, 1, high_open=True))

    def __str__(self) -> str:
        if self.delta:
            return f"ZCDP(rho={show(self.rho)}, delta={show(self.delta)})"
        return f"ZCDP(rho={show(self.rho)})"

    __repr__ = __str__


class GDP:
    """μ-Gaussian differential privacy (Dong, Roth & Su 2022, §2). ``mu`` ∈ [0, ∞).

    Stored exactly as μ² (:attr:`mu_squared`, a Fraction), the quantity a gdp
    account sums (Σμᵢ² ≤ μ_max², Smith & Thakurta 2022); ``mu`` is read as
    printed like every cost field. A Gaussian mechanism with L2 sensitivity Δ
    and std σ is (Δ/σ)-GDP. :meth:`from_mu_squared` builds one from μ² (a
    sum of squares need not be a square of a rational).
    """

    __slots__ = ("mu_squared",)
    mu_squared: Fraction

    def __init__(self, mu: Number) -> None:
        exact = check_exact("mu", mu, 0)
        object.__setattr__(self, "mu_squared", exact * exact)

    @classmethod
    def from_mu_squared(cls, mu_squared: Number) -> GDP:
        """The μ-GDP cost with μ² = ``mu_squared`` (≥ 0, exact)."""
        cost = cls.__new__(cls)
        object.__setattr__(cost, "mu_squared", check_exact("mu_squared", mu_squared, 0))
        return cost

    @property
    def mu(self) -> float:
        """μ as a float (√μ², rounded to nearest)."""
        return math.sqrt(self.mu_squared)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("GDP is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GDP) and other.mu_squared == self.mu_squared

    def __hash__(self) -> int:
        return hash(("GDP", self.mu_squared))

    def __reduce__(self) -> tuple[Callable[[Number], GDP], tuple[Fraction]]:
        return (GDP.from_mu_squared, (self.mu_squared,))

    def __repr__(self) -> str:
        square = self.mu_squared
        if square == 0 or Fraction(1, 10**300) < square < 10**300:
            return f"GDP(mu={self.mu:.6g})"
        root = (Decimal(square.numerator) / Decimal(square.denominator)).sqrt()  # no float overflow
        return f"GDP(mu={root.normalize():.6g})"

    __str__ = __repr__


#: The fixed grid of Rényi orders every RDP cost and budget lives on (exact rationals): dp-accounting's
#: ``rdp_privacy_accountant.DEFAULT_RDP_ORDERS`` (1.1, 1.2, …, 10.9, then 11, …, 63, then 128, 256, 512,
#: 1024; 156 orders), written out so that importing the ledger does not import dp-accounting (issue 26);
#: ``tests/accounting/test_costs.py`` checks it equals dp-accounting's grid.
ORDERS: tuple[Fraction, ...] = (tuple(Fraction(k, 10) for k in range(11, 110))
                                + tuple(Fraction(k) for k in range(11, 64))
                                + tuple(Fraction(2**k) for k in range(7, 11)))


#: Position of each order in :data:`ORDERS`.
ORDER_INDEX: dict[Fraction, int] = {order: i for i, order in enumerate(ORDERS)}


def check_orders(orders: Sequence[Number]) -> tuple[Fraction, ...]:
    """``orders`` read exactly: a non-empty, strictly increasing selection of :data:`ORDERS`, else ``ValueError``."""
    exact = tuple(as_fraction(o, "orders") for o in orders)
    if exact == ORDERS:
        return ORDERS
    increasing = all(a < b for a, b in zip(exact, exact[1:], strict=False))
    if not exact or any(o not in ORDER_INDEX for o in exact) or not increasing:
        raise ValueError(f"orders must be a non-empty increasing selection of accounting.rdp.ORDERS "
                         f"({len(ORDERS)} orders, 1.1 … 1024), got {[float(o) for o in exact][:8]}")
    return exact


class RDP:
    """A Rényi-DP curve: ε(α) ≥ 0 at each order of a selection of the grid :data:`ORDERS` (Mironov 2017).

    The mechanism is (α, ε(α))-RDP at each listed order and nothing is claimed
    at the others. A cost usually lists the whole grid (the default); an rdp
    account's budget lists the orders it holds (:mod:`accounting.rdp`,
    docs/accounting.md "Rényi DP").

    Parameters
    ----------
    epsilons : sequence of reals, one per order
        Each read exactly (a float as the decimal it prints as); finite, ≥ 0.
    orders : sequence of reals, optional
        A strictly increasing selection of :data:`ORDERS` (default: all of them).
    """

    __slots__ = ("epsilons", "orders")
    epsilons: tuple[Fraction, ...]
    orders: tuple[Fraction, ...]

    def __init__(self, epsilons: Sequence[Number], orders: Sequence[Number] | None = None) -> None:
        exact_orders = ORDERS if orders is None else check_orders(orders)
        if isinstance(epsilons, (str, bytes)) or not isinstance(epsilons, Iterable):
            raise TypeError(f"epsilons must be a sequence of reals, one per order, got {type(epsilons).__name__}")
        values = tuple(epsilons)
        if len(values) != len(exact_orders):
            raise ValueError(f"epsilons must have one value per order ({len(exact_orders)}), got {len(values)}")
        exact = tuple(check_exact("epsilons", v, 0) for v in values)
        object.__setattr__(self, "epsilons", exact)
        object.__setattr__(self, "orders", exact_orders)

    @classmethod
    def _exact(cls, epsilons: tuple[Fraction, ...], orders: tuple[Fraction, ...]) -> RDP:
        """A curve from values already exact and ≥ 0 on checked orders (the ledger's own arithmetic)."""
        curve = cls.__new__(cls)
        object.__setattr__(curve, "epsilons", epsilons)
        object.__setattr__(curve, "orders", orders)
        return curve

    @classmethod
    def from_floats_up(cls, epsilons: Sequence[float], orders: Sequence[Number] | None = None) -> RDP:
        """The curve of computed floats, each rounded *up* past its float error (10⁻¹² relative)."""
        values = []
        for value in epsilons:
            x = float(value)
            if not math.isfinite(x):
                raise ValueError("epsilons must be finite at every order")
            values.append(Fraction(0) if x <= 0 else Fraction(math.nextafter(x * (1 + 1e-12), math.inf)))
        return cls(values, orders)

    def at(self, order: Fraction) -> Fraction | None:
        """ε at ``order``, or None if the curve does not list it."""
        if self.orders is ORDERS:
            index = ORDER_INDEX.get(order)
            return None if index is None else self.epsilons[index]
        try:
            return self.epsilons[self.orders.index(order)]
        except ValueError:
            return None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("RDP is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RDP) and other.epsilons == self.epsilons and other.orders == self.orders

    def __hash__(self) -> int:
        return hash((self.epsilons, self.orders))

    def __reduce__(self) -> tuple[type[RDP], tuple[tuple[Fraction, ...], tuple[Fraction, ...]]]:
        return (RDP, (self.epsilons, self.orders))  # pickle a slotted immutable value

    def __repr__(self) -> str:
        shown = [o for o in (Fraction(2), Fraction(32)) if o in self.orders] if len(self.orders) > 3 else []
        pairs = [(o, self.at(o)) for o in (shown or self.orders)]
        return "RDP(" + ", ".join(f"eps({float(o):g})={show(e)}" for o, e in pairs if e is not None) + ")"

    __str__ = __repr__


Cost: TypeAlias = PureDP | ApproxDP | ZCDP | GDP | RDP
COST_TYPES: tuple[type, ...] = (PureDP, ApproxDP, ZCDP, GDP, RDP)


def check_cost(cost: object, name: str = "cost") -> Cost:
    """Return ``cost`` if it is a PureDP, ApproxDP, ZCDP, GDP or RDP, else raise ``TypeError``."""
    if not isinstance(cost, COST_TYPES):
        raise TypeError(f"{name} must be PureDP, ApproxDP, ZCDP, GDP or RDP, got {type(cost).__name__}")
    return cost  # type: ignore[return-value]


def cost_to_dict(cost: Cost) -> dict[str, str | list[str]]:
    """Exact, JSON-ready form of a cost: fields as ``"num/den"`` strings."""
    if isinstance(cost, PureDP):
        return {"type": "pure", "eps": str(cost.eps)}
    if isinstance(cost, ApproxDP):
        return {"type": "approx", "eps": str(cost.eps), "delta": str(cost.delta)}
    if isinstance(cost, GDP):
        return {"type": "gdp", "mu_squared": str(cost.mu_squared)}
    if isinstance(cost, RDP):  # the orders listed (a selection of ORDERS, checked when read back)
        return {"type": "rdp", "orders": [str(o) for o in cost.orders], "epsilons": [str(e) for e in cost.epsilons]}
    return {"type": "zcdp", "rho": str(cost.rho), "delta": str(cost.delta)}


def cost_from_dict(data: Mapping[str, Any]) -> Cost:
    """Inverse of :func:`cost_to_dict`."""
    kind = data.get("type")
    if kind == "pure":
        return PureDP(Fraction(data["eps"]))
    if kind == "approx":
        return ApproxDP(Fraction(data["eps"]), Fraction(data["delta"]))
    if kind == "zcdp":
        return ZCDP(Fraction(data["rho"]), Fraction(data["delta"]))
    if kind == "gdp":
        return GDP.from_mu_squared(Fraction(data["mu_squared"]))
    if kind == "rdp":
        return RDP([Fraction(e) for e in data["epsilons"]], orders=[Fraction(o) for o in data["orders"]])
    raise ValueError(f"cost type must be 'pure', 'approx', 'zcdp', 'gdp' or 'rdp', got {kind!r}")
