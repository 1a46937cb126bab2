"""The charging protocols (accounting.chargeable): what a mechanism needs of an account."""

from types import SimpleNamespace

import pytest

from accounting import ZCDP, ApproxDP, Budgeted, BudgetExceeded, Chargeable, EventChargeable, Ledger, PureDP


def test_accounts_and_ledgers_are_chargeable_with_budget_and_events():
    ledger = Ledger(ApproxDP(1, 1e-6), relation="add_remove")
    child = ledger.split({"a": 1}, currency={"a": "zcdp"})["a"]
    for account in (ledger, ledger.root, child):
        assert isinstance(account, Chargeable)
        assert isinstance(account, Budgeted)
        assert isinstance(account, EventChargeable)
    assert child.relation == ledger.relation == "add_remove"
    assert ledger.remaining == ledger.root.remaining == ApproxDP(0, 0)  # all of it went to the child
    assert child.remaining == child.budget


def test_a_view_needs_only_currency_and_charge():
    ledger = Ledger(PureDP(1))
    view = SimpleNamespace(currency="pure", charge=lambda cost, **kw: ledger.charge(cost, partition="k", **kw))
    assert isinstance(view, Chargeable)
    assert not isinstance(view, Budgeted)
    assert not isinstance(view, EventChargeable)
    assert not isinstance(object(), Chargeable)
    receipt = view.charge(PureDP(0.75), mechanism="m")
    assert receipt.partition == "k" and receipt.remaining == PureDP(0.25)
    with pytest.raises(BudgetExceeded):
        view.charge(PureDP(0.5), mechanism="m")


def test_ledger_remaining_follows_the_root():
    ledger = Ledger(ZCDP(1))
    ledger.charge(ZCDP(0.25), mechanism="m")
    assert ledger.remaining == ledger.root.remaining == ZCDP(0.75)
