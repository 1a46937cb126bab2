"""Snapshot rows on a PostgreSQL journal (accounting/journal/snapshot.py, accounting/journal/postgres.py).

As for the file journal (tests/accounting/test_journal_snapshot.py): a ledger opened from the last snapshot equals the
replay of every row, a tampered snapshot is refused at open, a damaged row before it is found by
``dpglm ledger verify``; and this host's witness still checks a row before the snapshot.
"""

import json
from fractions import Fraction

import pytest

from accounting import JournalCorruptError, Ledger, PureDP
from accounting.journal import snapshot as snapshots
from accounting.journal.rows import row_hash
from accounting.journal.verify import verify

pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
from accounting.journal.postgres import PostgresJournal  # noqa: E402  (needs psycopg)


@pytest.fixture(autouse=True)
def _every_five(monkeypatch):
    monkeypatch.setattr(snapshots, "ROWS", 5)


def _journal_id(sql, url):
    return sql("SELECT journal_id FROM dpglm_journals WHERE name = %s", (url.split("journal=")[1],))[0][0]


def _snapshot_seqs(sql, journal_id):
    return [seq for (seq,) in sql("SELECT seq FROM dpglm_rows WHERE journal_id = %s AND kind = 'snapshot' "
                                  "ORDER BY seq", (journal_id,))]


def test_a_ledger_opened_from_a_snapshot_equals_the_replay_of_every_row(pg_url, sql, snapshot_workload):
    with Ledger(snapshot_workload.BUDGET, journal=pg_url, relation=snapshot_workload.RELATION) as ledger:
        snapshot_workload.setup(ledger)
        snapshot_workload.run(ledger, 0, 60)
        written = snapshot_workload.state(ledger)
    seqs = _snapshot_seqs(sql, _journal_id(sql, pg_url))
    with Ledger.from_journal(pg_url) as opened:
        assert len(seqs) >= 2 and opened._journal.snapshot()[0] == seqs[-1]
        assert snapshot_workload.state(opened) == snapshot_workload.state(snapshot_workload.replayed(pg_url)) == written
        snapshot_workload.run(opened, 60, 100)
        after = snapshot_workload.state(opened)
    assert after == snapshot_workload.state(snapshot_workload.replayed(pg_url))
    assert verify(pg_url).snapshots == len(_snapshot_seqs(sql, _journal_id(sql, pg_url)))


def test_a_tampered_snapshot_is_refused_and_a_damaged_row_before_it_is_found_by_verify(pg_url, sql):
    with Ledger(PureDP(10), journal=pg_url) as ledger:
        for k in range(20):
            ledger.charge(PureDP(0.1), mechanism="m", partition=k % 3)
    journal_id = _journal_id(sql, pg_url)
    last = _snapshot_seqs(sql, journal_id)[-1]
    sql("UPDATE dpglm_rows SET payload = replace(payload, '\"m\"', '\"n\"') WHERE journal_id = %s AND seq = 2",
        (journal_id,))  # a charge long before the last snapshot
    with Ledger.from_journal(pg_url) as opened:  # opening does not read row 2
        assert opened.root.spent == PureDP(Fraction(7, 10))  # the max over the three keys: 7 charges of 0.1
    with pytest.raises(JournalCorruptError, match="row 2 is damaged"):
        verify(pg_url)
    ((seq, kind, account, payload, previous),) = sql(
        "SELECT seq, kind, account, payload, prev FROM dpglm_rows WHERE journal_id = %s AND seq = %s",
        (journal_id, last))
    data = json.loads(payload)
    data["accounts"][0]["partitions"] = []  # forget every charge under a key
    text = json.dumps(data)
    sql("UPDATE dpglm_rows SET payload = %s, hash = %s WHERE journal_id = %s AND seq = %s",
        (text, row_hash(previous, seq, kind, account, text), journal_id, last))
    with pytest.raises(JournalCorruptError, match=f"row {last + 1} is damaged"):
        Ledger.from_journal(pg_url)


def test_the_witness_checks_a_row_before_the_snapshot(pg_url, sql, tmp_path):
    """This host charged up to row 3; another host charged on past several snapshots. Opening here reads row 3 from
    the server for the witness; a row 3 rewritten (another copy of the journal) is refused as diverged."""
    with Ledger(PureDP(10), journal=pg_url) as ledger:
        for _ in range(3):
            ledger.charge(PureDP(0.1), mechanism="m")
    other = PostgresJournal(pg_url, anchor_dir=str(tmp_path / "other-host"))
    with Ledger(PureDP(10), journal=other) as elsewhere:
        for _ in range(20):
            elsewhere.charge(PureDP(0.1), mechanism="m")
    journal_id = _journal_id(sql, pg_url)
    assert _snapshot_seqs(sql, journal_id)[0] > 3
    with Ledger.from_journal(pg_url, read_only=True) as here:  # checks the witness, does not advance it
        assert here.root.spent == PureDP(Fraction(23, 10))
    ((seq, kind, account, payload, previous),) = sql(
        "SELECT seq, kind, account, payload, prev FROM dpglm_rows WHERE journal_id = %s AND seq = 3", (journal_id,))
    text = payload.replace('"m"', '"n"')
    sql("UPDATE dpglm_rows SET payload = %s, hash = %s WHERE journal_id = %s AND seq = 3",
        (text, row_hash(previous, seq, kind, account, text), journal_id))
    with pytest.raises(JournalCorruptError, match="row 3 is not the row this host's witness recorded"):
        Ledger.from_journal(pg_url)


def test_a_long_tail_is_read_again_in_batches(pg_url, monkeypatch, snapshot_workload):
    """Rows after the snapshot beyond one batch are not kept from the open but read again, a batch at a time."""
    from accounting.journal import postgres

    monkeypatch.setattr(postgres, "_BATCH", 3)
    monkeypatch.setattr(snapshots, "ROWS", 10**9)
    with Ledger(snapshot_workload.BUDGET, journal=pg_url, relation=snapshot_workload.RELATION) as ledger:
        snapshot_workload.setup(ledger)
        snapshot_workload.run(ledger, 0, 20)
        written = snapshot_workload.state(ledger)
    store = PostgresJournal(pg_url, read_only=True)
    assert store.snapshot() is None and store._tail is None
    assert [seq for seq, *_ in store.tail()] == list(range(1, written["seq"] + 1))
    store.close()
    with Ledger.from_journal(pg_url) as opened:
        assert snapshot_workload.state(opened) == written
