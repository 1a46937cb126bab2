"""The budget tree as a text table and as JSON: what "auditing a budget split" reads.

Per account: its currency, its budget in its own units beside the (ε, δ) share
it was given, what it allocated to sub-accounts, what was charged to it
(sequential charges plus the max over partition keys), what remains, and its
claim (ε, δ) with the basis it rests on (:mod:`accounting.claims`); per
mechanism the number of its charges and their total, composed like the account
(partitions by max). Analysis-only charges (a theorem, not noise, e.g. paper
Lemma 6.1) are marked ``[analysis]`` with their reason; an account split off
under a partition key is labelled ``[partition k]``. The root is ``<root>``.

Below the table, in this order: **the claim** (the number to publish, and why
it is valid), **the budget** (the filter, always valid), the declared plans, the
accounts that compose in parallel (with the disjointness rule), and — labelled
as *not* a claim — the non-adaptive figure of the same charges
(:mod:`accounting.nonadaptive`). Text shows 4 significant digits; the JSON
keeps floats and the exact ``num/den`` values.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from accounting.chargeable import account_name
from accounting.claims import BASES, Claim
from accounting.costs import GDP, RDP, ZCDP, ApproxDP, Cost, PureDP

if TYPE_CHECKING:
    from accounting.account import Account
    from accounting.ledger import Ledger

__all__ = ["cost_json", "format_cost", "render_json", "render_text"]

NONADAPTIVE = ("not a claim: the same charges composed as if every cost had been fixed in advance "
               "(declare a plan to claim such a figure)")
PARALLEL_RULE = ("charges and sub-accounts under distinct partition keys compose by max: everything under one key "
                 "must touch only users nothing under another key touches, and must not read their data")


def _num(value: Fraction | float, digits: int = 4) -> str:
    return f"{float(value):.{digits}g}"


def format_cost(cost: Cost | Claim | None) -> str:
    """Short human form, 4 significant digits: ``ε=1.333``, ``ε=1.333 δ=0.006667``, ``ρ=0.1457``, ``μ=1.6``."""
    if cost is None:
        return "-"
    if isinstance(cost, Claim):
        cost = cost.cost
    if isinstance(cost, PureDP):
        return f"ε={_num(cost.eps)}"
    if isinstance(cost, ApproxDP):
        return f"ε={_num(cost.eps)} δ={_num(cost.delta)}"
    if isinstance(cost, GDP):
        return f"μ={_num(cost.mu)}"
    if isinstance(cost, RDP):
        shown = [o for o in (Fraction(2), Fraction(32)) if o in cost.orders] if len(cost.orders) > 3 else []
        return "RDP " + " ".join(f"ε({float(o):g})={_num(cost.at(o) or 0)}" for o in (shown or cost.orders))
    text = f"ρ={_num(cost.rho)}"
    return text + (f" δ={_num(cost.delta)}" if cost.delta else "")


def cost_json(cost: Cost | None) -> dict[str, Any] | None:
    """A cost as floats plus its exact ``num/den`` fields."""
    if cost is None:
        return None
    if isinstance(cost, PureDP):
        fields = {"eps": cost.eps}
        kind = "pure"
    elif isinstance(cost, ApproxDP):
        fields = {"eps": cost.eps, "delta": cost.delta}
        kind = "approx"
    elif isinstance(cost, GDP):
        fields = {"mu_squared": cost.mu_squared}
        kind = "gdp"
    elif isinstance(cost, RDP):
        return {"type": "rdp", "orders": [float(o) for o in cost.orders], "epsilons": [float(e) for e in cost.epsilons],
                "exact": {"orders": [str(o) for o in cost.orders], "epsilons": [str(e) for e in cost.epsilons]}}
    else:
        assert isinstance(cost, ZCDP)
        fields = {"rho": cost.rho, "delta": cost.delta}
        kind = "zcdp"
    out: dict[str, Any] = {"type": kind}
    out.update({key: float(value) for key, value in fields.items()})
    if isinstance(cost, GDP):
        out["mu"] = cost.mu
    out["exact"] = {key: str(value) for key, value in fields.items()}
    return out


def _share(account: Account) -> ApproxDP | PureDP | None:
    """The (ε, δ) share an account was given (the root: its budget if that is one), or None."""
    if account.ladder is not None:
        return ApproxDP(account.ladder.eps, account.ladder.delta)
    if account.currency == "pure":
        return PureDP(account._budget[0])
    if account.currency == "approx":
        return ApproxDP(account._budget[0], account._budget[1])
    return None


def _basis(account: Account) -> str:
    if account.ladder is None:
        return "" if account.currency in ("pure", "approx") else "(in its parent's claim)"
    if account.planned:
        return "[plan]"
    return "[filter]" if account.ladder.top_delta == account.ladder.delta else "[odometer]"


def _claim(ledger: Ledger) -> tuple[Claim | None, str]:
    """The ledger's claim, or None and why (a zCDP/GDP/RDP budget states it at a δ the caller gives)."""
    if ledger.currency not in ("pure", "approx"):
        return None, f"claim: ledger.guarantee(delta) for a {ledger.currency} budget, at a delta fixed in advance"
    return ledger.guarantee(), ""


def _nonadaptive(ledger: Ledger, claim: Claim | None) -> tuple[ApproxDP | None, str]:
    """The non-adaptive figure at the claim's δ, or None and why not."""
    if claim is None or claim.delta == 0:
        return None, "none: a pure ledger's claim is already its realised ε" if claim is not None else "-"
    try:
        return ledger.nonadaptive_figure(claim.delta), ""
    except (TypeError, ValueError) as why:
        return None, f"none ({why})"


def _mechanism_line(account: Account, use: dict[str, Any]) -> str:
    tag = "[analysis] " if use["analysis"] else ""
    what = use["reason"] if use["analysis"] else use["mechanism"]
    keys = f", {use['partitions']} partitions composed by max" if use["partitions"] > 1 else ""
    return f"  {account_name(account.path)}: {tag}{what} ×{use['count']}{keys}: {format_cost(use['total'])}"


def _how(account: Account) -> str:
    """How an account's claim part is read: its plan, or its ladder's rungs and their δs."""
    ladder = account.ladder
    assert ladder is not None
    plan = account.declared_plan
    if plan is not None:
        return f"plan: {plan.describe()}"
    if ladder.top_delta == ladder.delta:
        return "its budget"
    rungs = list(zip(ladder.orders, ladder.deltas, strict=True))
    held = [f"α={float(o):g} at δ={_num(d)}" for o, d in rungs if d > ladder.delta / 2]
    others = [o for o, d in rungs if d <= ladder.delta / 2]
    top = [] if ladder.top is None else [f"budget ε={_num(ladder.top)} at δ={_num(ladder.top_delta)}"]
    lower = [f"α={', '.join(f'{float(o):g}' for o in others)} at δ={_num(rungs[-1][1])} each"] if others else []
    return "; ".join(top + held + lower)


def render_text(ledger: Ledger) -> str:
    """Fixed-width table of the budget tree, then the claim, the budget, plans, parallel keys, non-claims."""
    header = ("account", "currency", "budget", "its share (ε, δ)", "allocated", "charged", "remaining",
              "claim (ε, δ)")
    rows: list[tuple[str, ...]] = []
    details: list[str] = []
    parallel: list[str] = []
    for account in ledger.accounts():
        depth = account.path.count("/") + (1 if account.path else 0)
        label = "  " * depth + (account.name if account.path else account_name(""))
        if account.partition is not None and account.parent is not None:
            label += f" [partition {account.partition!r}]"
            parallel.append(f"  {account.path}: split off under key {account.partition!r} of "
                            f"{account_name(account.parent.path)}")
        allocated = format_cost(account.allocated) if account.children else "-"
        own = account.converted()
        rows.append((label, account.currency, format_cost(account.budget), format_cost(_share(account)), allocated,
                     format_cost(account.charged), format_cost(account.remaining),
                     (format_cost(own) + " " + _basis(account)).strip() if own is not None else _basis(account)))
        details.extend(_mechanism_line(account, use) for use in account.usage())
        keyed = sorted({str(k) for k in account._partitions})
        if len(keyed) > 1:
            parallel.append(f"  {account_name(account.path)}: charges under {len(keyed)} keys")
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
    lines = [f"Privacy ledger — budget {format_cost(ledger.budget)} ({ledger.currency}, relation {ledger.relation})"]
    if ledger.journal_path:
        lines.append(f"journal: {ledger.journal_path}")
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    lines.append("")
    lines.append("charges by mechanism:" if details else "charges by mechanism: none")
    lines.extend(details)
    lines.append("")
    claim, why_not = _claim(ledger)
    if claim is None:
        lines.append(why_not)
    else:
        lines.append(f"CLAIM (publish this): {format_cost(claim)}, valid however the charges were chosen "
                     "(docs/accounting.md, \"Claims\")")
        for part in claim.parts:
            account = ledger.account(part.path)
            how = f" ({_how(account)})" if account.ladder is not None else ""
            lines.append(f"  {account_name(part.path)}"
                         + (f" [partition {part.partition!r}]" if part.partition is not None else "")
                         + f": ε={_num(part.eps)}, {BASES[part.basis]}{how}")
    lines.append(f"budget (the filter: refuses charges past it): {format_cost(ledger.budget)}")
    if parallel:
        lines.append(f"parallel composition ({PARALLEL_RULE}):")
        lines.extend(parallel)
    figure, why = _nonadaptive(ledger, claim)
    lines.append(f"{NONADAPTIVE}: {format_cost(figure) if figure is not None else why}")
    if ledger.service_rows:
        lines.append("")
        lines.append("stops and restores (spend nothing; docs/service.md):")
        lines.extend(f"  #{seq} {kind}: checkpoint {row.get('checkpoint', '?')} written at seq {row.get('at_seq', '?')}"
                     + (f", seed {row['seed']}" if "seed" in row else "") for seq, kind, row in ledger.service_rows)
    return "\n".join(lines)


def _account_json(account: Account) -> dict[str, Any]:
    claim = account.converted()
    return {
        "path": account.path,
        "name": account_name(account.path) if not account.path else account.name,
        "partition": account.partition,
        "currency": account.currency,
        "budget": cost_json(account.budget),
        "share": cost_json(_share(account)),
        "allocated": cost_json(account.allocated),
        "charged": cost_json(account.charged),
        "spent": cost_json(account.spent),
        "remaining": cost_json(account.remaining),
        "used": cost_json(account.used),
        "claim": cost_json(claim),
        "claim_basis": _basis(account).strip("[]") or None,
        "ladder": None if account.ladder is None else account.ladder.to_dict(),
        "plan": None if account.declared_plan is None else account.declared_plan.to_dict(),
        "charges": [
            {"mechanism": use["mechanism"], "analysis": use["analysis"], "reason": use["reason"],
             "count": use["count"], "partitions": use["partitions"], "total": cost_json(use["total"])}
            for use in account.usage()
        ],
        "children": [_account_json(child) for child in account.children.values()],
    }


def claim_json(claim: Claim) -> dict[str, Any]:
    """A claim as JSON: ε and δ (floats and exact), what it means, and its parts with their bases."""
    return {"eps": float(claim.eps), "delta": float(claim.delta),
            "exact": {"eps": str(claim.eps), "delta": str(claim.delta)},
            "means": "(eps, delta)-DP ex post, valid under fully adaptive composition (docs/accounting.md, Claims)",
            "parts": [{"account": part.path, "partition": part.partition, "basis": part.basis,
                       "basis_means": BASES[part.basis], "eps": float(part.eps), "exact_eps": str(part.eps)}
                      for part in claim.parts]}


def render_json(ledger: Ledger) -> str:
    """JSON document: budget, relation, the claim and its parts, the non-claims, the account tree."""
    claim, why_not = _claim(ledger)
    figure, why = _nonadaptive(ledger, claim)
    document = {
        "budget": cost_json(ledger.budget),
        "relation": ledger.relation,
        "journal": ledger.journal_path,
        "claim": None if claim is None else claim_json(claim),
        "claim_missing": why_not or None,
        "filter": {"budget": cost_json(ledger.budget), "means": "the budget: refuses charges past it; always valid"},
        "not_claims": {"nonadaptive": cost_json(figure), "nonadaptive_means": NONADAPTIVE,
                       "nonadaptive_missing": why or None},
        "parallel_rule": PARALLEL_RULE,
        "accounts": _account_json(ledger.root),
        "service_rows": [{"seq": seq, "kind": kind, **row} for seq, kind, row in ledger.service_rows],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)
