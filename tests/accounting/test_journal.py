"""The SQLite journal: restore on reopen, refuse a foreign journal, survive kill -9."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from fractions import Fraction

import pytest

from accounting import (
    ApproxDP,
    BudgetExceeded,
    JournalBusyError,
    JournalMismatchError,
    Ledger,
    PureDP,
    ZCDP,
)

PAPER_WEIGHTS = {"tree": 1, "switching": 1, "optimizer": 1}
PAPER_CURRENCY = {"tree": "zcdp", "optimizer": "zcdp"}


def test_journal_is_wal_with_one_row_per_charge(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger(PureDP(1), journal=path) as ledger:
        ledger.charge(PureDP(0.25), mechanism="Laplace", partition="a", note="x")
        ledger.charge(PureDP(0.25), mechanism="Laplace")
        with pytest.raises(BudgetExceeded):
            ledger.charge(PureDP(0.8), mechanism="Laplace")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    rows = conn.execute("SELECT seq, kind, account FROM events ORDER BY seq").fetchall()
    conn.close()
    assert rows == [(1, "charge", ""), (2, "charge", "")]  # the refused charge left no row


def test_reopening_restores_splits_and_spending(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger(ApproxDP(4, 0.02), journal=path) as ledger:
        accounts = ledger.split(PAPER_WEIGHTS, currency=PAPER_CURRENCY)
        accounts["tree"].charge(ZCDP(0.1), mechanism="BinaryTreeMechanism")
        accounts["switching"].charge_analysis(ApproxDP(1, 0.005), reason="paper Lemma 6.1")
        nested = accounts["optimizer"].split({"c1": 1, "c2": 3})
        nested["c2"].charge(PureDP(0.2), mechanism="Laplace", partition=7)
        receipt = nested["c2"].charge(ZCDP(0.01), mechanism="DPSGD", partition=8)
        before_json, before_guarantee = ledger.to_json(), ledger.guarantee()
    assert receipt.seq == 6  # 2 splits + 4 charges
    with Ledger(ApproxDP(4, 0.02), journal=path) as ledger:
        # restored before any split call ...
        assert ledger.account("tree").spent == ZCDP(Fraction(1, 10))
        assert ledger.to_json() == before_json and ledger.guarantee() == before_guarantee
        # ... and the same split returns the same accounts
        accounts = ledger.split(PAPER_WEIGHTS, currency=PAPER_CURRENCY)
        nested = accounts["optimizer"].split({"c1": 1, "c2": 3})
        assert nested["c2"] is ledger.account("optimizer/c2")
        assert nested["c2"].spent == ZCDP(Fraction(1, 50))  # max(0.2²/2, 0.01) over partitions 7, 8
        assert nested["c2"].charge(ZCDP(0.01), mechanism="DPSGD").seq == 7


def test_a_journal_for_another_budget_or_relation_is_refused(tmp_path):
    path = tmp_path / "ledger.db"
    Ledger(ApproxDP(4, 0.02), journal=path).close()
    with pytest.raises(JournalMismatchError, match="budget"):
        Ledger(ApproxDP(4, 0.03), journal=path)
    with pytest.raises(JournalMismatchError, match="budget"):
        Ledger(ZCDP(4), journal=path)
    with pytest.raises(JournalMismatchError, match="replace_one"):
        Ledger(ApproxDP(4, 0.02), journal=path, relation="add_remove")
    Ledger(ApproxDP(4.0, 0.02), journal=path).close()  # the same budget, spelled as floats, is fine


def test_a_journal_for_another_split_is_refused(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger(ApproxDP(4, 0.02), journal=path) as ledger:
        ledger.split(PAPER_WEIGHTS, currency=PAPER_CURRENCY)
    with Ledger(ApproxDP(4, 0.02), journal=path) as ledger:
        with pytest.raises(JournalMismatchError, match="split #1"):
            ledger.split({"tree": 1, "switching": 1, "optimizer": 2}, currency=PAPER_CURRENCY)
    with Ledger(ApproxDP(4, 0.02), journal=path) as ledger:
        with pytest.raises(JournalMismatchError, match="split #1"):
            ledger.split(PAPER_WEIGHTS)  # same weights, other currencies


def test_not_a_journal_and_a_busy_journal(tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(JournalMismatchError, match="not a dpglm ledger journal"):
        Ledger(PureDP(1), journal=garbage)
    path = tmp_path / "ledger.db"
    with Ledger(PureDP(1), journal=path):
        with pytest.raises(JournalBusyError, match="held by another"):
            Ledger(PureDP(1), journal=path)
    with pytest.raises(FileNotFoundError):
        Ledger.from_journal(tmp_path / "missing.db")
    with pytest.raises(TypeError, match="journal"):
        Ledger(PureDP(1), journal=3)


def test_from_journal_reads_the_budget(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger(ZCDP(0.5), journal=path, relation="add_remove") as ledger:
        ledger.charge(ZCDP(0.125), mechanism="Gaussian", relation="add_remove")
    with Ledger.from_journal(path) as ledger:
        assert ledger.budget == ZCDP(Fraction(1, 2)) and ledger.relation == "add_remove"
        assert ledger.root.spent == ZCDP(Fraction(1, 8))


def test_closed_ledger_refuses_charges(tmp_path):
    ledger = Ledger(PureDP(1), journal=tmp_path / "ledger.db")
    ledger.close()
    with pytest.raises(RuntimeError, match="closed"):
        ledger.charge(PureDP(0.1), mechanism="m")


CHILD = textwrap.dedent(
    """
    import sys
    from accounting import Ledger, PureDP
    ledger = Ledger(PureDP(1000), journal=sys.argv[1])
    account = ledger.split({"a": 1, "b": 1})["a"]
    while True:
        receipt = account.charge(PureDP(0.001), mechanism="Laplace")
        print(receipt.seq, flush=True)
    """
)


def test_a_killed_process_loses_no_granted_charge(tmp_path):
    path = tmp_path / "ledger.db"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    granted = []
    try:
        for line in child.stdout:
            granted.append(int(line))
            if len(granted) == 40:
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    # what is durably on disk, read with plain sqlite3 (recovers the WAL of the killed writer)
    conn = sqlite3.connect(path)
    on_disk = conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'charge' AND account = 'a'").fetchone()[0]
    conn.close()
    with Ledger(PureDP(1000), journal=path) as ledger:
        account = ledger.split({"a": 1, "b": 1})["a"]
        restored = account.usage()[0]["count"]
        # every receipt the child printed is in the journal; at most one more was committed unprinted
        # (or, between commit and print, a few more while the kill signal was in flight).
        assert restored == on_disk >= len(granted)
        assert granted == list(range(2, 2 + len(granted)))  # seq 1 is the split
        assert account.spent == PureDP(Fraction(restored, 1000))


def test_racing_threads_with_a_journal_get_exactly_the_budget(tmp_path):
    import threading

    path = tmp_path / "ledger.db"
    granted = []
    with Ledger(PureDP(2), journal=path) as ledger:
        barrier = threading.Barrier(8)

        def worker() -> None:
            barrier.wait()
            for _ in range(6):
                try:
                    granted.append(ledger.charge(PureDP(0.1), mechanism="m").seq)
                except BudgetExceeded:
                    pass

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(granted) == list(range(1, 21))
    with Ledger(PureDP(2), journal=path) as ledger:
        assert ledger.root.remaining == PureDP(0)
