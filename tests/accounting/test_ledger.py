"""The in-memory ledger: exact budgets, splits, currencies, partitions, refusal, threads."""

import copy
import json
import math
import pickle
import threading
from fractions import Fraction

import dp_accounting
import pytest
from dp_accounting import rdp

from accounting import (
    GDP,
    ZCDP,
    Account,
    ApproxDP,
    BudgetExceeded,
    Ledger,
    PureDP,
    Receipt,
)


def paper_split(ledger: Ledger) -> dict[str, Account]:
    return ledger.split({"tree": 1, "switching": 1, "optimizer": 1}, currency={"tree": "zcdp", "optimizer": "zcdp"})


def test_ten_charges_of_a_tenth_fit_in_one_and_the_eleventh_is_refused():
    ledger = Ledger(PureDP(1.0))
    for _ in range(10):
        ledger.charge(PureDP(0.1), mechanism="Laplace")
    assert ledger.root.remaining == PureDP(0)
    with pytest.raises(BudgetExceeded) as refused:
        ledger.charge(PureDP(0.1), mechanism="Laplace")
    assert refused.value.account == ""
    assert refused.value.requested == PureDP(Fraction(1, 10))
    assert refused.value.remaining == PureDP(0)
    assert ledger.root.spent == PureDP(1)


def test_refusal_changes_nothing():
    ledger = Ledger(ApproxDP(1, 1e-6))
    ledger.charge(ApproxDP(0.5, 5e-7), mechanism="m")
    before = (ledger.root.spent, ledger.root.remaining, ledger.report())
    with pytest.raises(BudgetExceeded):
        ledger.charge(ApproxDP(0.4, 6e-7), mechanism="m")
    assert (ledger.root.spent, ledger.root.remaining, ledger.report()) == before
    receipt = ledger.charge(ApproxDP(0.5, 5e-7), mechanism="m")
    assert receipt.remaining == ApproxDP(0, 0)


def test_receipt_records_the_charge():
    ledger = Ledger(ZCDP(1))
    receipt = ledger.charge(PureDP(0.5), mechanism="Laplace", partition="users-a", note="first")
    assert isinstance(receipt, Receipt)
    assert receipt.cost == PureDP(0.5) and receipt.charged == ZCDP(Fraction(1, 8))
    assert (receipt.mechanism, receipt.relation, receipt.partition, receipt.note) == (
        "Laplace", "replace_one", "users-a", "first")
    assert receipt.analysis is False and receipt.seq == 1
    assert receipt.remaining == ZCDP(Fraction(7, 8))


def test_even_split_sums_exactly_to_the_total():
    ledger = Ledger(ApproxDP(4, 0.02))
    children = ledger.split({"a": 1, "b": 1, "c": 1})
    assert all(child.budget == ApproxDP(Fraction(4, 3), Fraction(1, 150)) for child in children.values())
    assert sum(c.budget.eps for c in children.values()) == 4
    assert sum(c.budget.delta for c in children.values()) == Fraction(1, 50)
    assert ledger.root.remaining == ApproxDP(0, 0)
    weighted = Ledger(PureDP(1)).split({"x": 2, "y": 0.5, "z": Fraction(1, 7)})
    assert sum(c.budget.eps for c in weighted.values()) == 1
    assert weighted["x"].budget.eps / weighted["y"].budget.eps == 4


def test_zcdp_child_gets_the_largest_rho_meeting_its_share(cks_by_dense_grid):
    ledger = Ledger(ApproxDP(4, 0.02))
    tree = paper_split(ledger)["tree"]
    rho_max = tree.budget.rho
    assert tree.currency == "zcdp" and isinstance(rho_max, Fraction)
    # the filter meets the share's ε at δ_F = 0.9·δ (the other tenth is the odometer's rungs')
    eps_share, delta_share = 4 / 3, 0.9 * 0.02 / 3
    # meets the share (dense-grid CKS reference and dp-accounting's RDP accountant) ...
    assert cks_by_dense_grid(float(rho_max), delta_share) <= eps_share
    accountant = rdp.RdpAccountant()
    accountant.compose(dp_accounting.ZCDpEvent(float(rho_max)))
    assert accountant.get_epsilon(delta_share) <= eps_share * (1 + 2e-3)
    # ... and is within a hair of the largest such rho (its best order lies on the grid of RDP orders)
    assert cks_by_dense_grid(float(rho_max) * (1 + 1e-3), delta_share) > eps_share
    # beats Bun-Steinke's inverse
    log_inv = math.log(1 / delta_share)
    assert float(rho_max) > (math.sqrt(eps_share + log_inv) - math.sqrt(log_inv)) ** 2


def test_currency_conversions_and_refusals():
    ledger = Ledger(ApproxDP(4, 0.02))
    accounts = ledger.split({"z": 1, "a": 1, "p": 1}, currency={"z": "zcdp", "p": "pure"})
    assert accounts["z"].charge(PureDP(0.2), mechanism="Laplace").charged == ZCDP(Fraction(1, 50))
    assert accounts["a"].charge(PureDP(0.2), mechanism="Laplace").charged == ApproxDP(Fraction(1, 5), 0)
    assert accounts["p"].charge(ApproxDP(0.2, 0), mechanism="Laplace").charged == PureDP(Fraction(1, 5))
    assert accounts["p"].budget == PureDP(Fraction(4, 3))
    with pytest.raises(TypeError, match="zCDP"):
        accounts["a"].charge(ZCDP(0.01), mechanism="Gaussian")
    with pytest.raises(TypeError, match="zCDP"):
        accounts["p"].charge(ZCDP(0.01), mechanism="Gaussian")
    with pytest.raises(TypeError, match="eps, delta"):
        accounts["z"].charge(ApproxDP(0.1, 1e-9), mechanism="Gaussian")
    with pytest.raises(TypeError, match="eps, delta"):
        accounts["p"].charge(ApproxDP(0.1, 1e-9), mechanism="Gaussian")


def test_children_currency_must_be_fundable():
    with pytest.raises(TypeError, match="currency"):
        Ledger(PureDP(1)).split({"z": 1}, currency={"z": "zcdp"})
    with pytest.raises(TypeError, match="currency"):
        Ledger(ZCDP(1)).split({"a": 1}, currency={"a": "approx"})
    with pytest.raises(ValueError, match="delta > 0"):
        Ledger(ApproxDP(1, 0)).split({"z": 1}, currency={"z": "zcdp"})


def test_parallel_composition_takes_the_max_over_partition_keys():
    ledger = Ledger(PureDP(1))
    ledger.charge(PureDP(0.6), mechanism="m", partition="batch-1")
    ledger.charge(PureDP(0.6), mechanism="m", partition="batch-2")
    assert ledger.root.spent == PureDP(Fraction(3, 5))
    with pytest.raises(BudgetExceeded):
        ledger.charge(PureDP(0.5), mechanism="m")  # 0.5 + max(0.6, 0.6) > 1
    with pytest.raises(BudgetExceeded):
        ledger.charge(PureDP(0.5), mechanism="m", partition="batch-1")  # same key is sequential
    ledger.charge(PureDP(0.4), mechanism="m", partition=3)  # a new key below the max is free
    assert ledger.root.spent == PureDP(Fraction(3, 5))
    ledger.charge(PureDP(0.4), mechanism="m")
    assert ledger.root.spent == PureDP(1)
    assert ledger.guarantee().cost == PureDP(1)


def test_approx_partitions_take_the_componentwise_max():
    ledger = Ledger(ApproxDP(1, 1e-5))
    ledger.charge(ApproxDP(0.5, 1e-6), mechanism="m", partition="a")
    ledger.charge(ApproxDP(0.1, 8e-6), mechanism="m", partition="b")
    assert ledger.root.spent == ApproxDP(Fraction(1, 2), Fraction(8, 10**6))
    assert ledger.root.remaining_in("a") == ApproxDP(Fraction(1, 2), Fraction(9, 10**6))
    assert ledger.root.remaining_in("b") == ApproxDP(Fraction(9, 10), Fraction(2, 10**6))


def test_add_remove_charges_are_restated_by_group_privacy():
    ledger = Ledger(ZCDP(1))
    assert ledger.charge(ZCDP(0.1), mechanism="Gaussian", relation="add_remove").charged == ZCDP(Fraction(2, 5))
    pure = Ledger(PureDP(1))
    assert pure.charge(PureDP(0.25), mechanism="Laplace", relation="add_remove").charged == PureDP(Fraction(1, 2))
    approx = Ledger(ApproxDP(2, 1e-3))
    charged = approx.charge(ApproxDP(0.5, 1e-6), mechanism="m", relation="add_remove").charged
    assert charged.eps == 1 and float(charged.delta) >= (1 + math.exp(0.5)) * 1e-6
    assert float(charged.delta) == pytest.approx((1 + math.exp(0.5)) * 1e-6, rel=1e-9)
    with pytest.raises(ValueError, match="replace_one"):
        Ledger(PureDP(1), relation="add_remove").charge(PureDP(0.1), mechanism="m", relation="replace_one")


def test_nested_splits_and_guarantee_of_the_paper_split(claims):
    ledger = Ledger(ApproxDP(4, 0.02))
    accounts = paper_split(ledger)
    tree, switching, optimizer = accounts["tree"], accounts["switching"], accounts["optimizer"]
    refits = optimizer.split({"criterion-1": 1, "criterion-2": 1})
    assert refits["criterion-1"].currency == "zcdp"
    assert refits["criterion-1"].budget.rho + refits["criterion-2"].budget.rho == optimizer.budget.rho
    assert ledger.account("optimizer/criterion-2") is refits["criterion-2"]
    tree.charge(tree.remaining, mechanism="BinaryTreeMechanism")
    switching.charge_analysis(switching.remaining, reason="paper Lemma 6.1: switching times")
    refits["criterion-1"].charge(ZCDP(0.01), mechanism="DPSGD")
    guarantee = ledger.guarantee()
    share_eps, share_delta = 4 / 3, 0.02 / 3
    # the claim adds its parts: the analysis charge's ε (its δ is within the budget's), and each zCDP account's
    # ladder reading of its own ρ (docs/accounting.md, "Claims"); the optimizer's children are inside its use
    held = claims.best_order(share_eps, 0.9 * share_delta)
    tree_claim = claims.claim_reference(lambda a: a * float(tree.budget.rho), share_eps, share_delta, held)
    optimizer_claim = claims.claim_reference(lambda a: a * 0.01, share_eps, share_delta, held)
    expected = share_eps + tree_claim + optimizer_claim
    assert guarantee.delta == Fraction(1, 50)
    assert float(guarantee.eps) == pytest.approx(expected, rel=1e-8)
    assert float(guarantee.eps) >= expected - 1e-9
    assert {part.path: part.basis for part in guarantee.parts} == {"tree": "odometer", "switching": "approx",
                                                                    "optimizer": "odometer"}
    assert guarantee.eps <= 4


def test_guarantee_of_a_zcdp_budget_needs_delta():
    ledger = Ledger(ZCDP(0.5))
    ledger.charge(ZCDP(0.5), mechanism="Gaussian")
    with pytest.raises(ValueError, match="delta"):
        ledger.guarantee()
    guarantee = ledger.guarantee(delta=1e-6)
    assert guarantee.delta == Fraction(1, 10**6)
    # the whole budget spent: the best-order rung at δ_F = 0.9·δ (5.2215 at the whole δ: docs/references.md)
    assert float(guarantee.eps) == pytest.approx(5.2430, abs=6e-5)
    assert 5.2215 < float(guarantee.eps) < 5.2215 + math.log(1 / 0.9) / 3


def test_analysis_charges_are_reported_with_their_reason(claims):
    ledger = Ledger(ApproxDP(4, 0.02))
    accounts = paper_split(ledger)
    accounts["switching"].charge_analysis(ApproxDP(Fraction(4, 3), Fraction(1, 150)), reason="paper Lemma 6.1")
    accounts["tree"].charge(ZCDP(0.1), mechanism="BinaryTreeMechanism")
    text = ledger.report()
    assert "[analysis] paper Lemma 6.1" in text and "BinaryTreeMechanism" in text
    document = json.loads(ledger.to_json())
    switching = [c for c in document["accounts"]["children"] if c["path"] == "switching"][0]
    assert switching["charges"] == [
        {"mechanism": "analysis", "analysis": True, "reason": "paper Lemma 6.1", "count": 1, "partitions": 0,
         "total": {"type": "approx", "eps": 4 / 3, "delta": 1 / 150, "exact": {"eps": "4/3", "delta": "1/150"}}}
    ]
    tree = [c for c in document["accounts"]["children"] if c["path"] == "tree"][0]
    assert tree["currency"] == "zcdp" and tree["spent"]["exact"]["rho"] == "1/10"
    assert tree["claim"]["delta"] == pytest.approx(1 / 150) and tree["claim_basis"] == "odometer"
    held = claims.best_order(4 / 3, 0.9 / 150)
    assert tree["claim"]["eps"] == pytest.approx(claims.claim_reference(lambda a: 0.1 * a, 4 / 3, 1 / 150, held),
                                                 rel=1e-8)


def test_racing_threads_get_exactly_the_budget():
    n_grants = 200
    ledger = Ledger(PureDP(Fraction(n_grants, 10)))
    account = ledger.split({"only": 1})["only"]
    granted = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        mine = 0
        for _ in range(60):
            try:
                account.charge(PureDP(0.1), mechanism="m")
                mine += 1
            except BudgetExceeded:
                pass
        granted.append(mine)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == n_grants
    assert account.remaining == PureDP(0)


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda: Ledger(PureDP(0)), ValueError, "budget"),
        (lambda: Ledger(0.5), TypeError, "budget"),
        (lambda: Ledger(PureDP(1), relation="swap"), ValueError, "relation"),
        (lambda: Ledger(PureDP(1)).split({}), ValueError, "weights"),
        (lambda: Ledger(PureDP(1)).split({"a": 0}), ValueError, "weights"),
        (lambda: Ledger(PureDP(1)).split({"a/b": 1}), ValueError, "weights"),
        (lambda: Ledger(PureDP(1)).split({"a": 1}, currency={"b": "pure"}), ValueError, "currency"),
        (lambda: Ledger(PureDP(1)).split({"a": 1}, currency={"a": "renyi"}), ValueError, "currency"),
        (lambda: Ledger(PureDP(1)).charge(PureDP(0.1), mechanism=""), ValueError, "mechanism"),
        (lambda: Ledger(PureDP(1)).charge(0.1, mechanism="m"), TypeError, "cost"),
        (lambda: Ledger(PureDP(1)).charge(PureDP(0.1), mechanism="m", relation="x"), ValueError, "relation"),
        (lambda: Ledger(PureDP(1)).charge(PureDP(0.1), mechanism="m", partition=1.5), TypeError, "partition"),
        (lambda: Ledger(PureDP(1)).root.charge_analysis(PureDP(0.1), reason=" "), ValueError, "reason"),
        (lambda: Ledger(PureDP(1)).account("nope"), KeyError, "nope"),
    ],
)
def test_bad_input(call, error, name):
    with pytest.raises(error, match=name):
        call()


def test_split_names_must_be_new_and_budget_left():
    ledger = Ledger(PureDP(1))
    ledger.split({"a": 1})
    with pytest.raises(ValueError, match="budget left"):
        ledger.split({"b": 1})
    other = Ledger(PureDP(1))
    other.split({"a": 1, "b": 1})["a"].split({"c": 1})
    with pytest.raises(ValueError, match="already has children"):
        other.account("a").split({"c": 1})


DUPLICATORS = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": pickle.dumps,
               "pickle-protocol-0": lambda obj: pickle.dumps(obj, protocol=0)}


@pytest.mark.parametrize("how", sorted(DUPLICATORS))
@pytest.mark.parametrize("state", ["fresh", "charged", "split", "refused-only"])
def test_no_ledger_or_account_can_be_copied_or_pickled(how, state):
    """Each copy would be a new budget: on main ``copy.copy(account)`` granted the whole budget twice."""
    ledger = Ledger(PureDP(1))
    if state == "charged":
        ledger.charge(PureDP(0.4), mechanism="Laplace")
    elif state == "split":
        ledger.split({"a": 1})
    elif state == "refused-only":
        with pytest.raises(BudgetExceeded):
            ledger.charge(PureDP(2), mechanism="Laplace")
    before = ledger.root.remaining
    for thing in (ledger, *ledger.accounts()):
        with pytest.raises(TypeError, match="whole new budget.*build Ledger\\(budget"):
            DUPLICATORS[how](thing)
    # Nothing was spent by the attempts, and the original still charges exactly its budget.
    assert ledger.root.remaining == before
    assert ledger.root.charge(before, mechanism="Laplace").remaining == PureDP(0)


def test_an_object_holding_an_account_cannot_be_pickled_either():
    account = Ledger(ZCDP(1)).root
    holder = {"mechanism": "Gaussian", "account": account}
    for duplicate in (copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="whole new budget"):
            duplicate(holder)
    assert copy.copy(holder)["account"] is account  # a shallow copy of the holder shares the one account


def test_the_pickling_message_names_journal_and_following_it_shares_one_budget(tmp_path):
    """The recipe the message gives (build Ledger(budget, journal=..., relation=...) in each worker)
    charges one budget; without journal= each ledger would be a full budget of its own, and it says so."""
    with pytest.raises(TypeError) as refused:
        pickle.dumps(Ledger(PureDP(1)).root)
    message = str(refused.value)
    assert "Ledger(budget, journal=PATH_OR_URL, relation=...)" in message
    assert "Without journal= each worker would get a fresh, full budget" in message
    spec = (PureDP(1), str(tmp_path / "shared.db"), "replace_one")
    pickle.loads(pickle.dumps(spec))  # what the message says to send does pickle
    budget, journal, relation = spec
    with Ledger(budget, journal=journal, relation=relation) as first, \
            Ledger(budget, journal=journal, relation=relation) as second:
        first.charge(PureDP(0.6), mechanism="Laplace")
        with pytest.raises(BudgetExceeded):
            second.charge(PureDP(0.6), mechanism="Laplace")
        assert second.root.remaining == PureDP(0.4)


def test_a_journalled_ledger_refuses_to_be_pickled(tmp_path):
    refused = pytest.raises(TypeError, match="cannot be copied or pickled")
    with Ledger(PureDP(1), journal=tmp_path / "j.db") as ledger, refused:
        pickle.dumps(ledger)


def test_add_remove_charge_with_a_huge_eps_is_restated_without_overflow():
    """Group privacy (k = 2): (ε, δ) add/remove → (2ε, (1 + e^ε)δ) replace-one; e^800 is beyond a float."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    ledger = Ledger(ApproxDP(2000, Fraction(1, 10**50)))
    receipt = ledger.charge(ApproxDP(800, Fraction(1, 10**400)), mechanism="m", relation="add_remove")
    assert receipt.charged.eps == 1600
    exact = (1 + Decimal(800).exp()) * Decimal(10) ** -400  # ≈ 2.726e-53
    charged = Decimal(receipt.charged.delta.numerator) / Decimal(receipt.charged.delta.denominator)
    assert exact <= charged <= exact * (1 + Decimal("1e-9"))
    remaining = ledger.root.remaining
    # A vacuous restatement is a charge no budget can pay: refused as over budget, like any other.
    with pytest.raises(BudgetExceeded, match=r"delta' = \(1 \+ e\^eps\) \* delta >= 1"):
        ledger.charge(ApproxDP(710, 1e-6), mechanism="m", relation="add_remove")  # (1 + e^710)·1e-6 ≫ 1
    with pytest.raises(BudgetExceeded, match="delta' "):
        ledger.charge(ApproxDP(Fraction(1, 2), Fraction(1, 2)), mechanism="m", relation="add_remove")  # 1.32 ≥ 1
    assert ledger.root.remaining == remaining


HUGE = 10**400  # beyond any float: on main these charges raised OverflowError (a float() in the message)


@pytest.mark.parametrize("budget, child, cost, relation", [
    (ApproxDP(1, 1e-5), None, PureDP(HUGE), "replace_one"),
    (ApproxDP(1, 1e-5), None, ApproxDP(HUGE, 0.5), "replace_one"),
    (ApproxDP(1, 1e-5), None, ApproxDP(HUGE, 0.5), "add_remove"),  # vacuous restatement: δ' ≥ 1
    (ApproxDP(1, 1e-5), None, PureDP(HUGE), "add_remove"),
    (ApproxDP(1, 1e-5), "zcdp", ZCDP(HUGE), "replace_one"),
    (ApproxDP(1, 1e-5), "zcdp", PureDP(HUGE), "replace_one"),  # ε²/2 = 5e799
    (ZCDP(1), None, ZCDP(HUGE), "add_remove"),
    (ZCDP(1), None, ZCDP(Fraction(HUGE, 3)), "replace_one"),
    (PureDP(1), None, PureDP(HUGE), "replace_one"),
    (ApproxDP(1, 1e-5), "gdp", GDP(HUGE), "add_remove"),
    (ApproxDP(1, 1e-5), "gdp", PureDP(HUGE), "replace_one"),  # μ ≤ 2√(2ε) = 2.8e200 beyond ε = 2000
    (ApproxDP(1, 1e-5), "rdp", ZCDP(HUGE), "replace_one"),  # the curve αρ
    (ApproxDP(1, 1e-5), "rdp", GDP(HUGE), "add_remove"),
])
def test_an_over_budget_charge_of_any_size_is_refused_as_budget_exceeded(budget, child, cost, relation):
    ledger = Ledger(budget)
    account = ledger.split({"c": 1}, currency={"c": child})["c"] if child else ledger.root
    before, root_before = account.remaining, ledger.root.remaining
    with pytest.raises(BudgetExceeded, match=r"e\+(200|399|400|401|799|800|801)"):  # a readable size in the message
        account.charge(cost, mechanism="m", relation=relation)
    assert account.remaining == before and ledger.root.remaining == root_before


def test_huge_and_tiny_costs_print_without_overflow():
    assert str(PureDP(HUGE)) == "PureDP(eps=1e+400)"
    assert str(ZCDP(Fraction(HUGE, 3), Fraction(1, 3 * HUGE))) == "ZCDP(rho=3.33333e+399, delta=3.33333e-401)"
    assert str(ApproxDP(Fraction(1, 3), 0)) == "ApproxDP(eps=0.333333, delta=0)"  # ordinary sizes print as floats do
    receipt = Ledger(PureDP(1)).charge(PureDP(Fraction(1, HUGE)), mechanism="m")  # a tiny charge is granted
    assert receipt.charged.eps == Fraction(1, HUGE)


@pytest.mark.parametrize("budget, cost", [(PureDP(1), ZCDP(0.1)), (ApproxDP(1, 1e-5), ZCDP(0.1)),
                                          (ZCDP(1), ApproxDP(0.1, 1e-6)), (PureDP(1), GDP(0.5))])
def test_a_currency_refusal_names_the_root_account_as_the_docs_do_and_says_where_to_charge(budget, cost):
    with pytest.raises(TypeError) as refused:
        Ledger(budget).charge(cost, mechanism="Laplace")
    message = str(refused.value)
    assert message.startswith("account '<root>' (") and "''" not in message  # ROOT, as the report prints it
    assert "charge it in a" in message and "split(weights, currency=" in message
    assert repr(Ledger(budget).root).startswith("Account('<root>', ")
