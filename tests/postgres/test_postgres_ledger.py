"""Ledger(budget, journal="postgresql://...") has the file journal's API, semantics and refusals."""

import json
from fractions import Fraction

import pytest

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from accounting import ZCDP, ApproxDP, BudgetExceeded, Ledger, PureDP  # noqa: E402
from accounting.journal import JournalCorruptError, JournalMismatchError, JournalReadOnlyError  # noqa: E402


def test_reopening_restores_the_spend_and_the_split(pg_url):
    with Ledger(ApproxDP(4, 0.02), journal=pg_url) as ledger:
        accounts = ledger.split({"tree": 1, "rest": 3}, currency={"tree": "zcdp"})
        accounts["tree"].charge(ZCDP(0.05), mechanism="tree")
        accounts["rest"].charge(ApproxDP(0.5, 0.001), mechanism="laplace")
        spent = (accounts["tree"].spent, accounts["rest"].spent)
    with Ledger(ApproxDP(4, 0.02), journal=pg_url) as again:
        accounts = again.split({"tree": 1, "rest": 3}, currency={"tree": "zcdp"})  # replayed, not planned anew
        expected = (ZCDP(Fraction(1, 20)), ApproxDP(Fraction(1, 2), Fraction(1, 1000)))
        assert (accounts["tree"].spent, accounts["rest"].spent) == spent == expected
        with Ledger(ApproxDP(4, 0.02), journal=pg_url) as third, pytest.raises(JournalMismatchError, match="split"):
            third.split({"tree": 1, "rest": 1})  # the same names with other weights: a conflicting split
    shown = Ledger.from_journal(pg_url, read_only=True)
    assert shown.read_only and shown.account("tree").spent == ZCDP(Fraction(1, 20))
    with pytest.raises(JournalReadOnlyError, match="read-only"):
        shown.account("tree").charge(ZCDP(0.01), mechanism="tree")
    shown.close()


def test_two_ledgers_on_one_url_share_the_budget_exactly(pg_url):
    first, second = Ledger(PureDP(1), journal=pg_url), Ledger(PureDP(1), journal=pg_url)
    granted = 0
    for i in range(12):  # alternate: each sees the other's charges before checking the budget
        try:
            (first if i % 2 else second).charge(PureDP(0.1), mechanism="m")
            granted += 1
        except BudgetExceeded:
            pass
    assert granted == 10  # ten charges of 0.1 fit in 1, the eleventh is refused (exact rationals)
    assert first.root.spent == second.root.spent == PureDP(1)  # each replays the other's rows first
    with pytest.raises(BudgetExceeded):
        first.charge(PureDP(Fraction(1, 10**9)), mechanism="m")
    first.close()
    second.close()


def test_a_wrong_budget_or_relation_is_refused(pg_url):
    Ledger(PureDP(1), journal=pg_url).close()
    with pytest.raises(JournalMismatchError, match=r"written for budget PureDP\(eps=1\) .* not PureDP\(eps=2\)"):
        Ledger(PureDP(2), journal=pg_url)
    with pytest.raises(JournalMismatchError, match="add_remove"):
        Ledger(PureDP(1), journal=pg_url, relation="add_remove")


def test_a_damaged_row_is_refused_by_the_ledger(pg_url, sql):
    with Ledger(PureDP(1), journal=pg_url) as ledger:
        for _ in range(3):
            ledger.charge(PureDP(0.3), mechanism="m")
    # an administrator "fixes" the second charge to 0.0 in place
    sql("UPDATE dpglm_rows SET payload = replace(payload, '3/10', '0/1') WHERE seq = 2 AND journal_id = "
        "(SELECT journal_id FROM dpglm_journals WHERE name = %s)", (pg_url.split("journal=")[1],))
    with pytest.raises(JournalCorruptError, match="row 2 is damaged"):
        Ledger(PureDP(1), journal=pg_url)


def test_a_restored_older_image_does_not_regrant(pg_url, sql):
    """Copy the rows of an older moment, charge on, put the old rows back: the anchor refuses."""
    with Ledger(PureDP(1), journal=pg_url) as ledger:
        ledger.charge(PureDP(0.5), mechanism="m")
        name = pg_url.split("journal=")[1]
        sql("CREATE TABLE snapshot_rows AS SELECT r.* FROM dpglm_rows r JOIN dpglm_journals j USING (journal_id) "
            "WHERE j.name = %s", (name,))
        sql("CREATE TABLE snapshot_head AS SELECT h.* FROM dpglm_heads h JOIN dpglm_journals j USING (journal_id) "
            "WHERE j.name = %s", (name,))
        ledger.charge(PureDP(0.5), mechanism="m")  # the budget is spent
    journal_id = sql("SELECT journal_id FROM snapshot_head")[0][0]
    sql("DELETE FROM dpglm_rows WHERE journal_id = %s", (journal_id,))
    sql("INSERT INTO dpglm_rows SELECT * FROM snapshot_rows")
    sql("UPDATE dpglm_heads h SET seq = s.seq, hash = s.hash FROM snapshot_head s WHERE h.journal_id = s.journal_id")
    sql("DROP TABLE snapshot_rows, snapshot_head")
    with pytest.raises(JournalCorruptError, match=r"ends at row 1 but this host's witness .* records row 2"):
        Ledger(PureDP(1), journal=pg_url)


def test_dpglm_ledger_show_reads_a_postgresql_journal(pg_url, capsys):
    from dpglm.cli import main

    with Ledger(PureDP(1), journal=pg_url) as ledger:
        ledger.charge(PureDP(0.25), mechanism="laplace")
        ledger.charge(PureDP(0.5), mechanism="laplace")
    assert main(["ledger", "show", pg_url, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["budget"]["exact"] == {"eps": "1"}
    assert document["accounts"]["spent"]["exact"] == {"eps": "3/4"}
    assert main(["ledger", "show", pg_url.replace("journal=t-", "journal=missing-")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dpglm ledger show: journal postgresql://") and "does not exist" in err and "\n" not in err
