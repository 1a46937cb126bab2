"""A ledger that uses every part of the state a snapshot holds, and its state read through the public API.

Shared by tests/accounting/test_journal_snapshot.py and tests/postgres/test_postgres_snapshot.py (loaded by
tests/conftest.py as the ``snapshot_workload`` fixture). The reference for "the state a journal's rows build" is
:func:`replayed`: a fresh in-memory ledger fed every row from row 1, the path a journal took before snapshots.
"""

import contextlib
import json
from fractions import Fraction

from dp_accounting import dp_event

from accounting import GDP, ZCDP, ApproxDP, BudgetExceeded, Ledger, PureDP
from accounting.costs import cost_from_dict
from accounting.journal.persistence import replay
from accounting.journal.store import open_journal

BUDGET = ApproxDP(40, Fraction(1, 1000))
RELATION = "add_remove"


def sgd(q, z, steps=1):
    step = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z))
    return step if steps == 1 else dp_event.SelfComposedDpEvent(step, steps)


def setup(ledger):
    """The tree: approx, pure, zCDP, GDP, two rdp accounts (one holding another order, one planned), a partitioned
    split and a nested one; a service row."""
    top = ledger.split({"a": 3, "n": 1, "p": 1, "z": 1, "g": 1, "r": 1, "plan": 1},
                       currency={"p": "pure", "z": "zcdp", "g": "gdp", "r": "rdp", "plan": "rdp"})
    top["r"].hold(8)
    top["plan"].plan([sgd(0.01, 1.0, 40), sgd(0.02, 2.0, 20)], relation=RELATION)
    users = top["n"].split({"u1": 1, "u2": 1}, partition="epoch-1")
    users["u2"].split({"deep": 1})
    ledger.record_service_row("stopped", lambda rows: {"checkpoint": "c1", "lineage": "L", "at_seq": 3,
                                                       "sha256": "0" * 64})


def step(ledger, k):
    """Charge number ``k``: cycles through every account and kind of charge."""
    a, p, z, g, r, planned = (ledger.account(name) for name in ("a", "p", "z", "g", "r", "plan"))
    which = k % 8
    if which == 0:
        a.charge(ApproxDP(Fraction(1, 1000), Fraction(1, 10**9)), mechanism="laplace", partition=k % 5,
                 relation=RELATION)
    elif which == 1:
        a.charge_analysis(PureDP(Fraction(1, 500)), reason="switching times", relation=RELATION)
    elif which == 2:
        ledger.account("n/u1").charge(PureDP(Fraction(1, 1000)), mechanism="laplace", relation=RELATION)
        ledger.account("n/u2/deep").charge(PureDP(Fraction(1, 1000)), mechanism="laplace", relation=RELATION)
        ledger.account("n").charge(PureDP(Fraction(1, 1000)), mechanism="laplace", partition=k % 3, relation=RELATION)
    elif which == 3:
        p.charge(PureDP(Fraction(1, 200)), mechanism="laplace", partition="x" if k % 3 else None, relation=RELATION)
    elif which == 4:
        z.charge_event(dp_event.GaussianDpEvent(20.0 + k % 3), mechanism="gauss", relation=RELATION)
    elif which == 5:
        g.charge(GDP(Fraction(1, 20)), mechanism="gauss", relation=RELATION)
        z.charge(ZCDP(Fraction(1, 10**4)), mechanism="tree", relation=RELATION)
    elif which == 6:
        r.charge_event(sgd(0.01, 1.0 + (k // 8) % 2), mechanism="DP-SGD", relation=RELATION)
    else:
        planned.charge_event(sgd(0.01, 1.0) if k < 200 else sgd(0.02, 2.0), mechanism="DP-SGD", relation=RELATION)
    if k == 30:
        ledger.record_service_row("restored", lambda rows: {"checkpoint": "c1", "lineage": "L", "at_seq": 3,
                                                            "stopped_seq": rows[0][0]})


def state(ledger):
    """Everything a reader sees, as plain data: report JSON, claim, non-adaptive figure, per account its remaining,
    spend, usage, distinct charges with counts and plan position, the service rows and the last seq."""
    document = json.loads(ledger.to_json())
    document.pop("journal")
    claim = ledger.guarantee()
    accounts = {}
    for account in ledger.accounts():
        plan = account.declared_plan
        accounts[account.path] = {
            "remaining": account.remaining, "spent": account.spent, "used": account.used,
            "remaining_in": [account.remaining_in(key) for key in (0, 1, "x", "epoch-1", "epoch-2")],
            "usage": account.usage(), "counts": account.charge_counts(),
            "plan": None if plan is None else (plan.position, plan.steps_left),
            "orders": (account.orders, account.tracked_orders), "ladder": account.ladder,
        }
    return {"report": document, "claim": (claim.eps, claim.delta, claim.parts), "accounts": accounts,
            "service": ledger.service_rows, "seq": ledger.seq}


def replayed(journal):
    """The reference: a fresh in-memory ledger fed every row of ``journal`` from row 1 (snapshot rows skipped)."""
    store = open_journal(journal, read_only=True)
    try:
        meta = store.read_meta()
        fresh = Ledger(cost_from_dict(meta["budget"]), relation=meta["relation"])
        replay(fresh, store.history())
    finally:
        store.close()
    return fresh


def run(ledger, start, stop):
    """Steps ``start`` .. ``stop`` − 1; a refused charge (the plan's second block before its turn) is skipped."""
    for k in range(start, stop):
        with contextlib.suppress(BudgetExceeded):
            step(ledger, k)
