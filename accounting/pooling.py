"""Composition before conversion: a ledger's accounts pooled by currency, each pool converted once.

A ledger's transcript is the composition of every account's charges (children
run sequentially with their parent). Direct charges of pure and approx
accounts compose by the basic theorem (Σε, Σδ). The accounts of each other
currency compose in that currency first (zCDP: ρ add, Bun & Steinke 2016,
Lemma 2.3; GDP: μ² add, Dong, Roth & Su 2022, Cor. 3.3; RDP: curves add order
by order, Mironov 2017, Prop. 1) and the pool is converted to (ε, δ) once, at
the sum of the δ shares of its accounts with any use. Converting each account
on its own and adding the (ε, δ) also bounds the same composition, so a pool
keeps the smaller ε of the two. The result is the realised spend converted as
if every cost had been fixed in advance: *not* a claim under adaptivity
(docs/accounting.md, "Claims"); the non-adaptive figure
(:mod:`accounting.nonadaptive`) keeps the smaller of it and its own
composition, valid under the same condition.

Children that a pure or approx account split off under a partition key
(``split(..., partition=k)``, disjoint users) are not pooled with the rest:
each one's subtree is composed and converted on its own (pooled inside it),
added to the account's charges under the same key, and the keys compose by
max, ε and δ each (parallel composition, McSherry 2009). Zero-use children
count as nothing. The pools listed are those outside such subtrees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from accounting.costs import RDP, ApproxDP, Cost, Number, PureDP, as_fraction
from accounting.rdp import curve_to_approx_certified
from accounting.spend import ZERO, Vector, add, as_cost, as_curve, is_zero, to_approx, widest

if TYPE_CHECKING:
    from accounting.account import Account
    from accounting.ledger import Ledger

__all__ = ["Pool", "pooled_guarantee", "pools"]

POOLED = ("zcdp", "gdp", "rdp")


@dataclass
class Pool:
    """The accounts of one currency funded by (ε, δ) accounts, composed in that currency.

    ``used`` is their summed spend (a cost in ``currency``), ``delta`` the sum of
    their δ shares, ``eps_pooled`` the conversion of ``used`` at ``delta``,
    ``eps_separately`` the sum of their own conversions; ``eps`` the smaller.
    """

    currency: str
    accounts: list[str] = field(default_factory=list)
    used: Cost | None = None
    delta: Fraction = Fraction(0)
    eps_pooled: Fraction = Fraction(0)
    eps_separately: Fraction = Fraction(0)

    @property
    def eps(self) -> Fraction:
        return min(self.eps_pooled, self.eps_separately)


def pools(ledger: Ledger) -> tuple[tuple[Fraction, Fraction], list[Pool]]:
    """The direct (ε, δ) of pure/approx accounts, and the pools of the other currencies.

    Only for a ledger whose budget is pure or approx (other budgets are one
    pool already). Caller holds the ledger's lock.
    """
    return _pools_under(ledger.root)


def _sequential_subtree(top: Account) -> list[Account]:
    """``top`` and its descendants, depth first, without the partitioned children of pure/approx accounts."""
    out = [top]
    for child in top.children.values():
        if child.partition is None or top.currency not in ("pure", "approx"):
            out.extend(_sequential_subtree(child))
    return out


def _keyed(account: Account) -> Vector:
    """A pure/approx account's max over partition keys of its charges plus its children's (ε, δ) there."""
    if not account._funded:
        return account._widest
    keyed = dict(account._partitions)
    for child in account.children.values():
        if child.partition is not None:
            keyed[child.partition] = add(keyed.get(child.partition, ZERO), _figure(child))
    top = ZERO
    for vector in keyed.values():
        top = widest(top, vector)
    return top


def _figure(child: Account) -> Vector:
    """(ε, δ) of a partitioned child's subtree, composed and converted on its own."""
    if child.currency in ("pure", "approx"):
        (eps, delta), found = _pools_under(child)
        return (eps + sum((p.eps for p in found), Fraction(0)), delta + sum((p.delta for p in found), Fraction(0)))
    return ZERO if is_zero(child._used_vector()) else child._used_in_parent()


def _pools_under(top: Account) -> tuple[tuple[Fraction, Fraction], list[Pool]]:
    """:func:`pools` of the pure/approx account ``top``'s subtree."""
    direct: Vector = ZERO
    vectors: dict[str, Vector] = {}
    curves: list[RDP] = []  # rdp accounts may hold different orders: pooled at the orders all of them hold
    found: dict[str, Pool] = {}
    for account in _sequential_subtree(top):
        if account.currency in ("pure", "approx"):
            direct = add(direct, add(account._sequential, _keyed(account)))
            continue
        if account.parent is None or account.parent.currency in POOLED:
            continue  # inside a pool already: counted in its top account's use
        used = account._used_vector()
        if is_zero(used):
            continue
        pool = found.setdefault(account.currency, Pool(account.currency))
        pool.accounts.append(account.path)
        vectors[account.currency] = add(vectors.get(account.currency, ZERO), used)
        if account.currency == "rdp":
            curves.append(as_curve(used, account.orders))
        pool.delta += account._share[1]
        pool.eps_separately += account._used_in_parent()[0]
    for currency, pool in found.items():
        if currency == "rdp":
            pool.used, pool.eps_pooled = _pooled_curves(curves, pool)
            continue
        pool.used = as_cost(vectors[currency], currency)
        pool.eps_pooled = to_approx(vectors[currency], currency, pool.delta)
    return (direct[0], direct[1]), list(found.values())


def _pooled_curves(curves: list[RDP], pool: Pool) -> tuple[RDP | None, Fraction]:
    """The sum of the rdp accounts' curves at the orders all of them hold, and its conversion at the pool's δ.

    With no order in common there is no pooled curve: the pool's ε is the sum of the separate conversions.
    """
    common = [o for o in curves[0].orders if all(c.at(o) is not None for c in curves[1:])]
    if not common:
        return None, pool.eps_separately
    orders = tuple(common)
    summed = tuple(sum((c.at(o) or Fraction(0) for c in curves), Fraction(0)) for o in orders)
    return RDP(summed, orders), curve_to_approx_certified(summed, pool.delta, orders)


def pooled_guarantee(ledger: Ledger, delta: Number | None) -> ApproxDP | PureDP:
    """:meth:`accounting.ledger.Ledger.guarantee` (caller holds the lock)."""
    if ledger.currency in ("pure", "approx"):
        if ledger.currency == "pure":
            stated: ApproxDP | PureDP = PureDP(ledger.root._used_vector()[0])
        else:
            (eps, spent_delta), found = pools(ledger)
            for pool in found:
                eps += pool.eps
                spent_delta += pool.delta
            stated = ApproxDP(eps, spent_delta)
        return stated if delta is None else _at_delta(stated, delta)
    if delta is None:
        raise ValueError(f"delta is required for the guarantee of a {ledger.currency} budget: pass delta in (0, 1)")
    target = as_fraction(delta, "delta")
    used = ledger.root._used_vector()
    spent_delta = used[1] if ledger.currency == "zcdp" and len(used) > 1 else Fraction(0)
    if not spent_delta < target < 1:
        raise ValueError(f"delta must lie in ({float(spent_delta)}, 1) (above the zCDP delta spent), got {delta}")
    return ApproxDP(to_approx(used, ledger.currency, target - spent_delta, ledger.root.orders), target)


def _at_delta(stated: ApproxDP | PureDP, delta: Number) -> ApproxDP:
    """(ε, δ_spent) holds at any larger δ too; a smaller δ than was spent is refused, not silently ignored."""
    target = as_fraction(delta, "delta")
    spent_delta = stated.delta if isinstance(stated, ApproxDP) else Fraction(0)
    if not 0 < target < 1 or target < spent_delta:
        raise ValueError(f"delta must lie in [{float(spent_delta)}, 1) for this budget (its charges spent "
                         f"delta={float(spent_delta)}; a pure/approx guarantee is not re-converted), got {delta}")
    return ApproxDP(stated.eps, target)
