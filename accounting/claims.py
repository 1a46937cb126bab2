"""The ledger's claim: the strongest (ε, δ) valid for how the charges were made, and why it is valid.

:meth:`accounting.ledger.Ledger.guarantee` returns a :class:`Claim`. It holds
*ex post*: for neighbouring inputs D, D′ and every set S of transcripts,
P[run(D) ∈ S] ≤ E[e^{E(run(D′))} 1_S(run(D′))] + δ, where E is the claim's ε
read off the run's own transcript — so on the event that the claim reads at
most e, the run is (e, δ)-indistinguishable. It is valid under fully adaptive
composition: the mechanisms *and their costs* may depend on earlier releases
(docs/accounting.md, "Claims"). Its parts, composed by adding their ε (the
ex-post hockey-stick is subadditive) and, across partition keys, by taking the
max:

- **realised ε** of pure and approx charges (their privacy loss is bounded
  charge by charge, except, for approx charges, on events whose probability
  sums to at most the δs charged; the account's filter caps those at its
  budget's δ, which is the part's δ — never the realised Σδᵢ, which adaptively
  chosen δᵢ do not bound);
- **an odometer** for each zCDP, GDP or RDP account funded by an (ε, δ) share:
  its ladder's reading (:mod:`accounting.ladder`), ≤ the share, at the share's δ;
- **a plan** for an account that declared one before its first charge
  (:meth:`accounting.ledger.Account.plan`): the plan's non-adaptive figure,
  whatever prefix of it ran.

The claim's δ is the budget's δ (a pure ledger: 0). A ledger whose budget is
zCDP, GDP or RDP states its claim at a δ the caller gives, which must be chosen
without looking at the data: its ladder is built from (budget, δ).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from accounting.chargeable import account_name
from accounting.costs import ApproxDP, PureDP
from accounting.ladder import Ladder, curve_ladder, filter_delta, gdp_ladder, rdp_ladder
from accounting.rdp import best_order, curve_to_approx_certified, gaussian_curve

if TYPE_CHECKING:
    from accounting.account import Account
    from accounting.ledger import Ledger

__all__ = ["Claim", "ClaimPart", "account_epsilon", "divergences", "ledger_claim", "native_ladder", "subtree_claim"]

#: What each basis means, as the report and the JSON say it.
BASES = {
    "pure": "the realised ε of pure charges",
    "approx": "the realised ε of (ε, δ) charges, at the budget's δ",
    "odometer": "its odometer ladder, fixed from its share",
    "plan": "the figure of the plan it declared before its first charge",
    "filter": "its budget (journalled before odometer ladders existed)",
}


@dataclass(frozen=True)
class ClaimPart:
    """One account's share of the claim: its path, basis (a key of :data:`BASES`), ε, δ and partition key."""

    path: str
    basis: str
    eps: Fraction
    delta: Fraction
    partition: object = None

    def __str__(self) -> str:
        where = "" if self.partition is None else f" [partition {self.partition!r}]"
        return f"{account_name(self.path)}{where}: ε={float(self.eps):.4g} ({self.basis})"


@dataclass(frozen=True)
class Claim:
    """The ledger's claim: (ε, δ)-DP ex post, valid however the charges were chosen (module docstring).

    ``eps`` and ``delta`` are exact; :attr:`cost` is the same as a cost value;
    ``parts`` say which account contributed what and on which basis.
    """

    eps: Fraction
    delta: Fraction
    parts: tuple[ClaimPart, ...] = ()

    @property
    def cost(self) -> ApproxDP | PureDP:
        """The claim as a cost value (PureDP when δ = 0)."""
        return PureDP(self.eps) if self.delta == 0 else ApproxDP(self.eps, self.delta)

    @property
    def bases(self) -> tuple[str, ...]:
        """The distinct bases of its parts, in order."""
        return tuple(dict.fromkeys(part.basis for part in self.parts))

    def __str__(self) -> str:
        delta = "" if self.delta == 0 else f", δ={float(self.delta):.4g}"
        how = ", ".join(self.bases) or "nothing charged"
        return f"ε={float(self.eps):.6g}{delta} (valid under adaptive charges: {how})"


def _approx_subtree(top: Account, parts: list[ClaimPart]) -> Fraction:
    """ε of the claim of a pure/approx account's subtree: its own charges and its children's claims.

    Partition=None charges and children add; under each partition key the
    charges and the children split off under it add, and the keys compose by max.
    """
    eps = top._sequential[0]
    keyed: dict[object, Fraction] = {key: vector[0] for key, vector in top._partitions.items()}
    if eps or keyed:
        parts.append(ClaimPart(top.path, top.currency, eps + max(keyed.values(), default=Fraction(0)),
                               top._budget[1] if top.currency == "approx" else Fraction(0), top.partition))
    for child in top.children.values():
        part = _child_epsilon(child, parts)
        if child.partition is None:
            eps += part
        else:
            keyed[child.partition] = keyed.get(child.partition, Fraction(0)) + part
    return eps + max(keyed.values(), default=Fraction(0))


def _child_epsilon(child: Account, parts: list[ClaimPart]) -> Fraction:
    """ε a child of a pure/approx account adds to its parent's claim."""
    if child.currency in ("pure", "approx"):
        return _approx_subtree(child, parts)
    assert child.ladder is not None
    eps = child.claim_epsilon()
    basis = "plan" if child.planned else "filter" if child.ladder.top_delta == child.ladder.delta else "odometer"
    parts.append(ClaimPart(child.path, basis, eps, child.ladder.delta, child.partition))
    return eps


def divergences(currency: str, used: tuple[Fraction, ...], tracked: tuple[Fraction, ...],
                orders: tuple[Fraction, ...]) -> list[Fraction]:
    """A spend's Rényi bound at each of ``orders`` (rdp: the curve kept at ``tracked``; zCDP αρ; GDP αμ²/2)."""
    if currency == "rdp":
        return [used[tracked.index(order)] for order in orders]
    scale = used[0] if currency == "zcdp" else used[0] / 2
    return [order * scale for order in orders]


def account_epsilon(account: Account) -> Fraction:
    """ε of an account's claim at its ladder's δ: its ladder's reading, or its plan's figure once charged."""
    ladder = account.ladder
    assert ladder is not None, "only an account with a ladder states a claim of its own"
    plan = account.declared_plan
    if plan is not None:
        return plan.claim_eps if account._record else Fraction(0)
    return ladder.read(divergences(account.currency, account._used_vector(), account.tracked_orders, ladder.orders))


def subtree_claim(account: Account) -> ApproxDP | PureDP | None:
    """The claim of ``account`` and everything below it (None inside another account's currency)."""
    if account.currency == "pure":
        return PureDP(_approx_subtree(account, []))
    if account.currency == "approx":
        return ApproxDP(_approx_subtree(account, []), account._budget[1])
    if account.ladder is None:
        return None
    return ApproxDP(account.claim_epsilon(), account.ladder.delta)


def native_ladder(ledger: Ledger, delta: Fraction) -> Ladder:
    """The ladder of a ledger whose budget is zCDP, GDP or RDP, at the claim's δ (built from (budget, δ) only)."""
    root = ledger.root
    if ledger.currency == "gdp":
        from accounting.gdp import gdp_to_approx_certified

        top = gdp_to_approx_certified(root._budget[0], filter_delta(delta))
        return gdp_ladder(top, delta, top)
    if ledger.currency == "zcdp":  # ρ-zCDP is (α, αρ)-RDP: the rung at its best order is the filter at δ_F
        curve = gaussian_curve(root._budget[0])
        top = curve_to_approx_certified(curve, filter_delta(delta))
        return rdp_ladder(top, delta, best_order(curve, filter_delta(delta)))
    return curve_ladder(curve_to_approx_certified(root._budget, filter_delta(delta), root._held), delta,
                        root._budget, root._held)


def ledger_claim(ledger: Ledger, delta: Fraction | None) -> Claim:
    """:meth:`accounting.ledger.Ledger.guarantee` (caller holds the ledger's lock)."""
    root = ledger.root
    parts: list[ClaimPart] = []
    if ledger.currency in ("pure", "approx"):
        eps = _approx_subtree(root, parts)
        stated = root._budget[1] if ledger.currency == "approx" else Fraction(0)
        if delta is not None:
            if delta < stated:
                raise ValueError(f"delta must lie in [{float(stated):g}, 1): the claim is stated at the budget's "
                                 f"delta={float(stated):g} (the deltas of adaptively chosen charges are capped by "
                                 f"it, not summed), got {float(delta):g}")
            stated = delta
        return Claim(eps, stated, tuple(parts))
    if delta is None:
        raise ValueError(f"delta is required for the claim of a {ledger.currency} budget: pass delta in (0, 1), "
                         "chosen without looking at the data")
    spent_delta = root._budget[1] if ledger.currency == "zcdp" else Fraction(0)
    if not spent_delta < delta < 1:
        raise ValueError(f"delta must lie in ({float(spent_delta):g}, 1) (above the budget's zCDP delta), "
                         f"got {float(delta):g}")
    rungs = native_ladder(ledger, delta - spent_delta)
    root = ledger.root
    eps = rungs.read(divergences(ledger.currency, root._used_vector(), root.tracked_orders, rungs.orders))
    parts.append(ClaimPart("", "odometer", eps, delta))
    return Claim(eps, delta, tuple(parts))
