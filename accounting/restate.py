"""Restating a cost under the ledger's neighbouring relation (group privacy with k = 2).

A ledger states its guarantee under one relation (:data:`accounting.costs.RELATIONS`;
docs/accounting.md). Replace-one neighbours are two add/remove steps apart, so a
cost stated under ``"add_remove"`` holds under ``"replace_one"`` for a group of
k = 2 (group privacy; docs/accounting.md, "Neighbouring relations"):

- pure ε → 2ε;
- (ε, δ) → (2ε, (1 + e^ε)·δ), δ' rounded *up* (:func:`group_delta`);
- ρ-zCDP → 4ρ = k²ρ (Bun & Steinke 2016, Prop. 1.9); approximate zCDP is refused;
- μ-GDP → 2μ, i.e. μ² → 4μ² (Dong, Roth & Su 2022, §2);
- an RDP curve is refused (group privacy changes the orders).

A replace-one cost in an add/remove ledger is refused: replace-one privacy does
not imply add/remove privacy.
"""

from __future__ import annotations

import math
from fractions import Fraction

from accounting.costs import GDP, RDP, ZCDP, ApproxDP, Cost, PureDP

__all__ = ["Unpayable", "ceil_fraction", "exp_upper", "group_delta", "restate"]


def ceil_fraction(x: float) -> Fraction:
    """An exact rational at or above the real number that ``x`` approximates."""
    return Fraction(math.nextafter(x * (1.0 + 1e-12), math.inf))


def restate(cost: Cost, relation: str, ledger_relation: str) -> Cost:
    """Restate ``cost`` (given under ``relation``) under the ledger's relation (module docstring).

    Raises
    ------
    ValueError
        A replace-one cost in an add/remove ledger, approximate zCDP or an RDP curve under add/remove.
    Unpayable
        An (ε, δ) cost whose restated δ' is ≥ 1 (no budget can pay it).
    """
    if relation == ledger_relation:
        return cost
    if ledger_relation == "add_remove":
        raise ValueError(
            "relation='replace_one' charge in an add_remove ledger: replace-one privacy does not imply "
            "add/remove privacy; state the cost under relation='add_remove'"
        )
    # add_remove → replace_one: group privacy with k = 2.
    if isinstance(cost, PureDP):
        return PureDP(2 * cost.eps)
    if isinstance(cost, GDP):  # group privacy for GDP: k·μ (Dong, Roth & Su 2022, §2)
        return GDP.from_mu_squared(4 * cost.mu_squared)
    if isinstance(cost, ZCDP):
        if cost.delta:
            raise ValueError("approximate zCDP (delta > 0) under add_remove cannot be restated as replace_one")
        return ZCDP(4 * cost.rho)
    if isinstance(cost, RDP):
        raise ValueError("an RDP curve under add_remove cannot be restated as replace_one (RDP group privacy "
                         "changes the orders); state it under replace_one, or use Account.charge_event")
    return ApproxDP(2 * cost.eps, group_delta(cost))


#: A rational above e = 2.718281828459045235…
_E_UPPER = Fraction(271828182845904524, 10**17)


def exp_upper(x: Fraction) -> Fraction:
    """A rational ≥ e^x for x ≥ 0, exact for any size of x (no float overflow).

    e^x = e^⌊x⌋·e^{x−⌊x⌋}: the first factor from a decimal upper bound of e, the
    second from the float exp of a float at or above the fractional part,
    rounded up past its error.
    """
    whole = math.floor(x)
    fractional = float(x - whole)
    if Fraction(fractional) < x - whole:
        fractional = math.nextafter(fractional, math.inf)
    return _E_UPPER**whole * ceil_fraction(math.exp(fractional))


class Unpayable(ValueError):
    """A charge no budget can pay (raised inside the ledger, refused as :class:`BudgetExceeded`)."""


def group_delta(cost: ApproxDP) -> Fraction:
    """δ' ≥ (1 + e^ε)·δ of an add/remove (ε, δ) charge restated under replace-one (group privacy, k = 2).

    Raises :class:`Unpayable` when δ' ≥ 1: the restated guarantee is vacuous
    and no (ε, δ) budget (δ < 1) can pay it (the charge is refused as
    :class:`BudgetExceeded`). Decided in log space first, so a huge ε neither
    overflows a float nor builds a huge rational; ε > 10³⁰⁰ with δ > 0 is
    vacuous for every δ a Fraction can hold (it would need δ < e^(−10³⁰⁰)).
    """
    if cost.delta == 0:
        return Fraction(0)
    vacuous = Unpayable(
        "restated under replace_one (group privacy, k = 2) it has delta' = (1 + e^eps) * delta >= 1: "
        "no guarantee, no budget can pay it; lower eps or delta"
    )
    if cost.eps > 10**300:
        raise vacuous
    eps = float(cost.eps)
    log_factor = eps + math.log1p(math.exp(-eps))  # ln(1 + e^ε), stable for large ε
    log_delta = math.log(cost.delta.numerator) - math.log(cost.delta.denominator)
    if log_factor + log_delta > 1e-6:
        raise vacuous
    restated = (1 + exp_upper(cost.eps)) * cost.delta
    if restated >= 1:
        raise vacuous
    return restated
