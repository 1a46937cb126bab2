"""Splits under a partition key: children funded from ``remaining_in(key)``, composed by max across keys.

Numbers come from the composition rule worked by hand, or from a slow reference written
here that recomputes every spend from the full list of events (docs/accounting.md,
"Parallel composition"; McSherry 2009).
"""

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting import ZCDP, ApproxDP, BudgetExceeded, JournalMismatchError, Ledger, PureDP
from accounting.journal.persistence import replay

F = Fraction


def test_epochs_under_distinct_keys_each_get_the_whole_budget_and_a_sequential_charge_is_then_refused():
    ledger = Ledger(ApproxDP(4, F(1, 50)))
    epoch1 = ledger.split({"epoch-1": 1}, partition=1)["epoch-1"]
    assert epoch1.budget == ApproxDP(4, F(1, 50)) and epoch1.partition == 1
    epoch1.charge(ApproxDP(3, F(1, 100)), mechanism="m")
    epoch2 = ledger.split({"epoch-2": 1}, partition=2)["epoch-2"]
    assert epoch2.budget == ApproxDP(4, F(1, 50))  # epoch 1's spend does not reach key 2
    epoch2.charge(ApproxDP(4, F(1, 50)), mechanism="m")
    # spend = 0 sequential + max(bucket 1 = (4, 1/50), bucket 2 = (4, 1/50)): nothing fits sequentially
    assert ledger.root.spent == ApproxDP(4, F(1, 50)) and ledger.remaining == ApproxDP(0, 0)
    with pytest.raises(BudgetExceeded):
        ledger.charge(PureDP(F(1, 10)), mechanism="m")
    with pytest.raises(ValueError, match="no budget left to split under partition 1"):
        ledger.split({"epoch-1b": 1}, partition=1)  # key 1 gave all it had
    assert ledger.root.remaining_in(3) == ApproxDP(4, F(1, 50))  # a new key still has it all
    # the claim: max over the keys of the realised ε (3 ≤ 4), at the budget's δ
    assert ledger.guarantee().cost == ApproxDP(4, F(1, 50))
    assert ledger.root.allocated == ApproxDP(4, F(1, 50))


def test_a_sequential_charge_first_shrinks_every_key_and_a_keyed_charge_shares_its_bucket():
    ledger = Ledger(PureDP(4))
    ledger.charge(PureDP(1), mechanism="m")  # adds to every key
    a = ledger.split({"a": 1, "b": 3}, partition="x")  # divides 4 − 1 = 3 in 1 : 3
    assert (a["a"].budget, a["b"].budget) == (PureDP(F(3, 4)), PureDP(F(9, 4)))
    ledger.charge(PureDP(F(1, 2)), mechanism="m", partition="y")  # key y: room 3
    c = ledger.split({"c": 1}, partition="y")["c"]  # key y has 3 − 1/2 left
    assert c.budget == PureDP(F(5, 2))
    with pytest.raises(BudgetExceeded):
        ledger.charge(PureDP(F(1, 100)), mechanism="m", partition="x")  # bucket x is full
    a["a"].charge(PureDP(F(1, 2)), mechanism="m")
    c.charge(PureDP(2), mechanism="m")
    # used = 1 + max(x: 1/2 + 0, y: 1/2 + 2) = 7/2
    assert ledger.guarantee().cost == PureDP(F(7, 2))
    assert ledger.root.charged == PureDP(F(3, 2)) and ledger.root.allocated == PureDP(F(3))


def test_zcdp_children_under_two_keys_claim_on_their_own_and_compose_by_max(claims):
    ledger = Ledger(ApproxDP(4, F(1, 50)))
    one = ledger.split({"one": 1}, currency={"one": "zcdp"}, partition=1)["one"]
    two = ledger.split({"two": 1}, currency={"two": "zcdp"}, partition=2)["two"]
    one.charge(ZCDP(F(1, 2)), mechanism="m")
    two.charge(ZCDP(F(1, 5)), mechanism="m")
    claim = ledger.guarantee()
    # each child is a share (4, 1/50) with its own ladder; the larger ρ decides (docs/accounting.md, "Claims")
    held = claims.best_order(4, 0.9 * 0.02)
    assert float(claim.eps) == pytest.approx(claims.claim_reference(lambda a: 0.5 * a, 4, 0.02, held), rel=1e-6)
    assert claim.delta == F(1, 50) and [part.partition for part in claim.parts] == [1, 2]


def test_a_bad_key_is_refused_in_one_line():
    ledger = Ledger(PureDP(1))
    for key, name in ((1.5, "float"), (True, "bool"), ((1,), "tuple")):
        with pytest.raises(TypeError, match=f"^partition must be None, a str or an int, got {name}$"):
            ledger.split({"a": 1}, partition=key)
    assert ledger.accounts() == [ledger.root]  # nothing was split


def test_a_journal_row_with_a_bad_key_is_refused_naming_the_row():
    ledger = Ledger(PureDP(1))
    payload = {"weights": {"a": "1"}, "currency": {"a": "pure"}, "children": {"a": {"share": ["1", "0"],
                                                                                   "budget": ["1", "0"]}},
               "partition": [1]}
    with pytest.raises(JournalMismatchError, match="^journal event 1: partition must be None, a str or an int"):
        replay(ledger, [(1, "split", "", payload)])


SECOND_PROCESS = textwrap.dedent(
    """
    import json, sys
    from accounting import Ledger
    with Ledger.from_journal(sys.argv[1], read_only=True) as ledger:
        epoch = ledger.account("epoch-2")
        print(json.dumps([epoch.partition, str(epoch.budget.eps), str(ledger.root.spent.eps),
                          str(ledger.root.remaining_in(3).eps), str(ledger.guarantee().eps)]))
    """
)


def test_the_journal_records_the_key_and_replay_in_this_and_another_process_gives_the_same_spend(tmp_path):
    path = tmp_path / "j.db"
    with Ledger(PureDP(2), journal=path) as ledger:
        watcher = Ledger.from_journal(path)  # opened before the splits: sees them by replay
        ledger.charge(PureDP(F(1, 2)), mechanism="m")
        rest = ledger.split({"rest": 1}, partition=1)["rest"]  # room under key 1: 2 − 1/2
        rest.split({"e1": 1}, partition=1)["e1"].charge(PureDP(F(1, 2)), mechanism="m")
        e2 = ledger.split({"epoch-2": 1}, partition=2)["epoch-2"]
        e2.charge(PureDP(F(1, 4)), mechanism="m", partition="inner")
        e2.split({"x": 1, "y": 1})  # a partition=None split: its row has no key, as rows before this change
        before = ledger.to_json()
    rows = sqlite3.connect(path).execute("SELECT kind, account, payload FROM events ORDER BY seq").fetchall()
    payloads = [json.loads(p) for _, _, p in rows]
    assert [(k, a) for k, a, _ in rows] == [("charge", ""), ("split", ""), ("split", "rest"), ("charge", "rest/e1"),
                                            ("split", ""), ("charge", "epoch-2"), ("split", "epoch-2")]
    assert [p.get("partition", "absent") for p in payloads] == [None, 1, 1, None, 2, "inner", "absent"]
    tree = json.loads(before)["accounts"]
    assert [(c["name"], c["partition"]) for c in tree["children"]] == [("rest", 1), ("epoch-2", 2)]
    assert [c["partition"] for c in tree["children"][1]["children"]] == [None, None]
    reopened = Ledger.from_journal(path)
    assert "  rest [partition 1]  " in reopened.report() and "  epoch-2 [partition 2]  " in reopened.report()
    assert reopened.to_json() == before and reopened.account("rest/e1").partition == 1
    assert reopened.account("epoch-2/x").partition is None
    assert watcher.to_json() == before
    with pytest.raises(JournalMismatchError, match="under partition 1"):  # the same names under another key
        reopened.split({"epoch-2": 1}, partition=1)
    assert reopened.split({"epoch-2": 1}, partition=2)["epoch-2"] is reopened.account("epoch-2")
    shown = subprocess.run([sys.executable, "-c", SECOND_PROCESS, str(path)], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert shown.returncode == 0, shown.stderr
    # epoch-2 gets 2 − 1/2; spent = 1/2 + max(3/2, 3/2); a new key has 2 − 1/2; used = 1/2 + max(1/2, 1/4)
    assert json.loads(shown.stdout) == [2, "3/2", "2", "3/2", "1"]
    watcher.close()
    reopened.close()


# ----- a random mix of sequential and keyed charges and splits, against a slow reference --------------------------
class RefAccount:
    """One account as a list of events; every figure recomputed from the whole list (the composition rule)."""

    def __init__(self, budget):
        self.budget = budget
        self.events = []  # (key, vector, "charge" | "alloc")
        self.children = []  # (key, RefAccount)

    @staticmethod
    def _compose(events):
        sequential, buckets = (F(0), F(0)), {}
        for key, vec, _ in events:
            if key is None:
                sequential = (sequential[0] + vec[0], sequential[1] + vec[1])
            else:
                old = buckets.get(key, (F(0), F(0)))
                buckets[key] = (old[0] + vec[0], old[1] + vec[1])
        top = (max((b[0] for b in buckets.values()), default=F(0)), max((b[1] for b in buckets.values()), default=F(0)))
        return sequential[0] + top[0], sequential[1] + top[1]

    def spent(self, key=None, extra=None):
        return self._compose(self.events + ([(key, extra, "charge")] if extra else []))

    def room(self, key):
        spent = self._compose([e for e in self.events if key is None or e[0] is None or e[0] == key])
        return self.budget[0] - spent[0], self.budget[1] - spent[1]

    def used(self):
        events = [e for e in self.events if e[2] == "charge"]
        events += [(key, child.used(), "charge") for key, child in self.children]
        return self._compose(events)


def _vector(cost):
    if isinstance(cost, PureDP):
        return (cost.eps, F(0))
    if isinstance(cost, ApproxDP):
        return (cost.eps, cost.delta)
    return (cost.rho, cost.delta)


KEYS = [None, None, 1, 2, "a"]
mix_op = st.tuples(st.sampled_from(["split", "charge", "charge"]), st.integers(0, 40), st.sampled_from(KEYS),
                   st.integers(1, 60), st.lists(st.integers(1, 4), min_size=1, max_size=3))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([PureDP(3), ApproxDP(4, F(1, 50)), ZCDP(1, F(1, 10**5))]), st.lists(mix_op, max_size=30))
def test_random_sequential_and_keyed_mixes_match_the_slow_reference(budget, operations):
    ledger = Ledger(budget)
    refs = {"": RefAccount(_vector(budget))}
    made = 0
    for op, index, key, size, weights in operations:
        accounts = ledger.accounts()
        account = accounts[index % len(accounts)]
        ref = refs[account.path]
        if op == "split":
            names = [f"c{made + i}" for i in range(len(weights))]
            made += len(weights)
            room = ref.room(key)
            if room[0] <= 0:
                with pytest.raises(ValueError, match="no budget left to split"):
                    account.split(dict(zip(names, weights, strict=True)), partition=key)
                continue
            children = account.split(dict(zip(names, weights, strict=True)), partition=key)
            for name, weight in zip(names, weights, strict=True):
                share = (room[0] * weight / sum(weights), room[1] * weight / sum(weights))
                assert _vector(children[name].budget) == share and children[name].partition == key
                ref.events.append((key, share, "alloc"))
                refs[children[name].path] = child = RefAccount(share)
                ref.children.append((key, child))
        else:
            scale = F(size, 100)
            first, second = (x * scale for x in _vector(account.budget))  # a share of the budget, in its currency
            if isinstance(account.budget, PureDP):
                cost = PureDP(first)
            else:
                cost = ApproxDP(first, second) if isinstance(account.budget, ApproxDP) else ZCDP(first, second)
            vec = _vector(cost)
            after = ref.spent(key, vec)
            fits = after[0] <= ref.budget[0] and after[1] <= ref.budget[1]
            try:
                account.charge(cost, mechanism="m", partition=key)
            except BudgetExceeded:
                assert not fits
                continue
            assert fits
            ref.events.append((key, vec, "charge"))
        for acct in ledger.accounts():
            r = refs[acct.path]
            assert _vector(acct.spent) == r.spent()
            assert _vector(acct.used) == r.used()
            for k in (None, 1, 2, "a", "new"):
                room = r.room(k)
                assert _vector(acct.remaining_in(k)) == room
    if not isinstance(budget, ZCDP):  # the claim: the realised ε used, at the budget's δ
        used = refs[""].used()
        assert _vector(ledger.guarantee().cost) == (used[0], _vector(budget)[1])
        assert used[0] <= _vector(budget)[0] and used[1] <= _vector(budget)[1]
