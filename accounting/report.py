"""The budget tree as a text table and as JSON: what "auditing a budget split" reads.

Per account: budget, what was allocated to sub-accounts (their shares, in this
account's currency), what was charged to the account itself (sequential
charges plus the max over partition keys), remaining, what was really used
(charges of the account and its descendants), the currency, the converted
(ε, δ) of that use, and per mechanism the number of its charges and their
total, composed like the account (partitions by max). Analysis-only charges (a
theorem, not noise, e.g. paper Lemma 6.1) are marked ``[analysis]`` with their
reason. An account its parent split off under a partition key is labelled
``[partition k]`` (JSON ``"partition"``, null otherwise); its parent's
allocated column composes the keys by max. The root account is named ``<root>`` everywhere. Below the table: the
filter (the claim), the odometer, and the non-adaptive figure
(:mod:`accounting.nonadaptive`), each labelled with when it is valid.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from accounting.chargeable import account_name
from accounting.costs import GDP, RDP, ZCDP, ApproxDP, Cost, PureDP

if TYPE_CHECKING:
    from accounting.ledger import Account, Ledger
    from accounting.pooling import Pool


def format_cost(cost: Cost | None) -> str:
    """Short human form: ``ε=1.333``, ``ε=1.333 δ=0.006667``, ``ρ=0.1457``."""
    if cost is None:
        return "-"
    if isinstance(cost, PureDP):
        return f"ε={float(cost.eps):.6g}"
    if isinstance(cost, ApproxDP):
        return f"ε={float(cost.eps):.6g} δ={float(cost.delta):.4g}"
    if isinstance(cost, GDP):
        return f"μ={cost.mu:.6g}"
    if isinstance(cost, RDP):
        shown = [o for o in (Fraction(2), Fraction(32)) if o in cost.orders] if len(cost.orders) > 3 else []
        return "RDP " + " ".join(f"ε({float(o):g})={float(cost.at(o) or 0):.4g}" for o in (shown or cost.orders))
    text = f"ρ={float(cost.rho):.6g}"
    return text + (f" δ={float(cost.delta):.4g}" if cost.delta else "")


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


def _guarantee(ledger: Ledger) -> Cost | None:
    return ledger.guarantee() if ledger.currency in ("pure", "approx") else None


def _pools(ledger: Ledger) -> list[Pool]:
    from accounting.pooling import pools

    if ledger.currency != "approx":
        return []
    with ledger._lock:
        return pools(ledger)[1]


_FILTER = "filter (the budget: the claim under adaptively chosen costs)"
_ODOMETER = "odometer (realised spend, composed then converted: a claim only if the costs were fixed in advance)"


def _nonadaptive(ledger: Ledger) -> tuple[Cost | None, str]:
    """The non-adaptive figure at the δ spent (pure/approx budgets), or None and why not."""
    from accounting.nonadaptive import LABEL

    if ledger.currency not in ("pure", "approx"):
        return None, f"{LABEL}: ledger.guarantee(delta, nonadaptive=True)"
    try:
        return ledger.guarantee(nonadaptive=True), LABEL
    except (TypeError, ValueError) as why:
        return None, f"{LABEL}: none ({why})"


def _mechanism_line(account: Account, use: dict[str, Any]) -> str:
    tag = "[analysis] " if use["analysis"] else ""
    what = use["reason"] if use["analysis"] else use["mechanism"]
    keys = f", {use['partitions']} partitions composed by max" if use["partitions"] > 1 else ""
    return f"  {account_name(account.path)}: {tag}{what} ×{use['count']}{keys}: {format_cost(use['total'])}"


def render_text(ledger: Ledger) -> str:
    """Fixed-width table of the budget tree, then the filter, odometer and non-adaptive figures."""
    header = ("account", "currency", "budget", "allocated to sub-accounts", "charged", "remaining", "used",
              "used as (ε, δ)")
    rows: list[tuple[str, ...]] = []
    details: list[str] = []
    for account in ledger.accounts():
        depth = account.path.count("/") + (1 if account.path else 0)
        label = "  " * depth + (account.name if account.path else account_name(""))
        if account.partition is not None:
            label += f" [partition {account.partition!r}]"
        allocated = format_cost(account.allocated) if account.children else "-"
        rows.append((label, account.currency, format_cost(account.budget), allocated, format_cost(account.charged),
                     format_cost(account.remaining), format_cost(account.used), format_cost(account.converted())))
        details.extend(_mechanism_line(account, use) for use in account.usage())
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
    lines.append(f"{_FILTER}: {format_cost(ledger.budget)}")
    guarantee = _guarantee(ledger)
    if guarantee is not None:
        lines.append(f"{_ODOMETER}: {format_cost(guarantee)}")
    for pool in _pools(ledger):
        lines.append(f"  pooled {pool.currency} [{', '.join(pool.accounts)}]: {format_cost(pool.used)} at "
                     f"δ={float(pool.delta):.4g} → ε={float(pool.eps_pooled):.6g} "
                     f"(converted one by one: ε={float(pool.eps_separately):.6g})")
    figure, label = _nonadaptive(ledger)
    lines.append(f"{label}: {format_cost(figure)}" if figure is not None else label)
    if ledger.service_rows:
        lines.append("")
        lines.append("stops and restores (spend nothing; docs/service.md):")
        lines.extend(f"  #{seq} {kind}: checkpoint {row.get('checkpoint', '?')} written at seq {row.get('at_seq', '?')}"
                     + (f", seed {row['seed']}" if "seed" in row else "") for seq, kind, row in ledger.service_rows)
    return "\n".join(lines)


def _account_json(account: Account) -> dict[str, Any]:
    return {
        "path": account.path,
        "name": account_name(account.path) if not account.path else account.name,
        "partition": account.partition,
        "currency": account.currency,
        "budget": cost_json(account.budget),
        "allocated": cost_json(account.allocated),
        "charged": cost_json(account.charged),
        "spent": cost_json(account.spent),
        "remaining": cost_json(account.remaining),
        "used": cost_json(account.used),
        "converted": cost_json(account.converted()),
        "charges": [
            {"mechanism": use["mechanism"], "analysis": use["analysis"], "reason": use["reason"],
             "count": use["count"], "partitions": use["partitions"], "total": cost_json(use["total"])}
            for use in account.usage()
        ],
        "children": [_account_json(child) for child in account.children.values()],
    }


def render_json(ledger: Ledger) -> str:
    """JSON document: budget, relation, guarantee and the account tree (exact and float fields)."""
    figure, label = _nonadaptive(ledger)
    document = {
        "budget": cost_json(ledger.budget),
        "relation": ledger.relation,
        "journal": ledger.journal_path,
        "guarantee": cost_json(_guarantee(ledger)),
        "claim": {"filter": cost_json(ledger.budget), "odometer": cost_json(_guarantee(ledger)),
                  "nonadaptive": cost_json(figure), "filter_means": _FILTER, "odometer_means": _ODOMETER,
                  "nonadaptive_means": label},
        "pools": [{"currency": p.currency, "accounts": p.accounts, "used": cost_json(p.used),
                   "delta": float(p.delta), "eps_pooled": float(p.eps_pooled),
                   "eps_separately": float(p.eps_separately), "eps": float(p.eps)} for p in _pools(ledger)],
        "accounts": _account_json(ledger.root),
        "service_rows": [{"seq": seq, "kind": kind, **row} for seq, kind, row in ledger.service_rows],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)
