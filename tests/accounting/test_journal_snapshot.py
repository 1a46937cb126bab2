"""Snapshot rows (accounting/journal/snapshot.py; docs/accounting.md, "Snapshots"; docs/threat-model.md).

The reference for every equality is the replay of every row from row 1 into a fresh ledger (the open path before
snapshots, ``snapshot_workload.replayed``); the refusals are the chain's and ``dpglm ledger verify``'s.
"""

import argparse
import json
import sqlite3

import pytest

from accounting import ApproxDP, JournalCorruptError, Ledger, PureDP
from accounting.journal import Journal
from accounting.journal import snapshot as snapshots
from accounting.journal.rows import row_hash
from accounting.journal.verify import verify
from dpglm.commands import ledger as command


@pytest.fixture
def every(monkeypatch):
    """Snapshots every ``n`` rows (the default, 1,000, is more than these tests write)."""
    def set_rows(n):
        monkeypatch.setattr(snapshots, "ROWS", n)
    return set_rows


def _written(tmp_path, workload, steps=120):
    path = tmp_path / "run.db"
    with Ledger(workload.BUDGET, journal=path, relation=workload.RELATION) as ledger:
        workload.setup(ledger)
        workload.run(ledger, 0, steps)
        return path, workload.state(ledger)


def _snapshot_seqs(path):
    store = Journal(path, read_only=True)
    try:
        return [seq for seq, kind, _, _ in store.history() if kind == "snapshot"]
    finally:
        store.close()


def _cli(argv):
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.run(parser.parse_args(argv))


def test_a_ledger_opened_from_a_snapshot_equals_the_replay_of_every_row(tmp_path, every, snapshot_workload):
    every(7)
    path, written = _written(tmp_path, snapshot_workload)
    seqs = _snapshot_seqs(path)
    assert len(seqs) >= 3 and all(b - a >= 8 for a, b in zip(seqs, seqs[1:], strict=False))  # ≥ 7 rows between
    with Ledger.from_journal(path) as opened:
        last = opened._journal.snapshot()
        assert last is not None and last[0] == seqs[-1]  # opened from the last one, and the few rows after it
        assert opened._snapshot[0] == last[0] and opened.seq - last[0] <= snapshots.interval(opened._snapshot[1])
        reference = snapshot_workload.replayed(path)
        assert snapshot_workload.state(opened) == snapshot_workload.state(reference) == written
        # going on from the snapshot: the same splits are returned, the plan advances, distinct charges merge
        assert opened.account("n").split({"u1": 1, "u2": 1}, partition="epoch-1")["u1"] is opened.account("n/u1")
        snapshot_workload.run(opened, 120, 260)
        after = snapshot_workload.state(opened)
    assert after == snapshot_workload.state(snapshot_workload.replayed(path))
    assert len(after["accounts"]["r"]["counts"]) == 2 and after["accounts"]["plan"]["plan"][0][0] == 1
    assert len(after["service"]) == 2 and after["claim"][0] > written["claim"][0]


def test_a_snapshot_holds_no_per_process_claim(tmp_path, every, snapshot_workload):
    """Whether this process's split() returned a split is not state: a reopened ledger's split() returns it again."""
    every(3)
    path, _ = _written(tmp_path, snapshot_workload, steps=20)
    with Ledger.from_journal(path) as opened:
        assert opened._journal.snapshot() is not None
        assert set(opened.split({"a": 3, "n": 1, "p": 1, "z": 1, "g": 1, "r": 1, "plan": 1},
                                currency={"p": "pure", "z": "zcdp", "g": "gdp", "r": "rdp", "plan": "rdp"})) == {
            "a", "n", "p", "z", "g", "r", "plan"}
        with pytest.raises(ValueError, match="already has children"):
            opened.split({"a": 1})


def test_a_tampered_snapshot_is_refused_at_open(tmp_path, every, snapshot_workload):
    """Its spend edited and its hash recomputed: the next row's chain breaks; the chain after it rewritten too: the
    anchor holds another row."""
    every(5)
    path, _ = _written(tmp_path, snapshot_workload, steps=40)
    last = _snapshot_seqs(path)[-1]
    conn = sqlite3.connect(path)
    with conn:
        rows = conn.execute("SELECT seq, kind, account, payload, prev FROM events WHERE seq >= ? ORDER BY seq",
                            (last,)).fetchall()
        data = json.loads(rows[0][3])
        account = next(entry for entry in data["accounts"] if entry["path"] == "p")
        account["sequential"] = ["0", "0"]  # forget what p spent
        edited = [(rows[0][0], rows[0][1], rows[0][2], json.dumps(data), rows[0][4])] + rows[1:]
        seq, kind, name, payload, previous = edited[0]
        digest = row_hash(previous, seq, kind, name, payload)
        conn.execute("UPDATE events SET payload = ?, hash = ? WHERE seq = ?", (edited[0][3], digest, last))
    with pytest.raises(JournalCorruptError, match=f"row {last + 1} is damaged"):
        Ledger.from_journal(path)
    with conn:  # rewrite every row after it consistently: only the anchor (and the witness) can tell
        previous = digest
        for seq, kind, name, payload, _ in edited[1:]:
            digest = row_hash(previous, seq, kind, name, payload)
            conn.execute("UPDATE events SET prev = ?, hash = ? WHERE seq = ?", (previous, digest, seq))
            previous = digest
    conn.close()
    with pytest.raises(JournalCorruptError, match="not the row its anchor recorded"):
        Ledger.from_journal(path)


def test_a_damaged_row_before_the_snapshot_is_found_by_ledger_verify(tmp_path, every, snapshot_workload, capsys):
    every(5)
    path, written = _written(tmp_path, snapshot_workload, steps=40)
    assert _cli(["verify", str(path)]) == 0
    out = capsys.readouterr().out
    seqs = _snapshot_seqs(path)
    assert f"rows 1..{written['seq']} intact" in out and f"{len(seqs)} snapshot rows" in out
    assert f"opened from snapshot row {seqs[-1]}" in out
    conn = sqlite3.connect(path)
    with conn:  # row 4 (a split) edited, before the last snapshot: opening does not read it
        text = conn.execute("SELECT payload FROM events WHERE seq = 4").fetchone()[0]
        conn.execute("UPDATE events SET payload = ? WHERE seq = 4", (text.replace('"weights"', '"weightz"'),))
    conn.close()
    assert '"weights"' in text and seqs[-1] > 4
    with Ledger.from_journal(path, read_only=True) as opened:
        assert snapshot_workload.state(opened) == written  # opened from the snapshot: the damage is not read
    assert _cli(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dpglm ledger verify: journal {path}: row 4 is damaged") and "\n" not in err.strip()


def test_ledger_verify_finds_a_snapshot_that_is_not_the_replay(tmp_path, every, snapshot_workload, monkeypatch):
    """A snapshot written wrong (here a writer that forgets what account p spent) chains like any row: opening trusts
    it; verify compares it with the replay of the rows before it."""
    every(5)
    real = snapshots.payload

    def forgetful(ledger):
        data = real(ledger)
        for entry in data["accounts"]:
            if entry["path"] == "p" and entry["sequential"] != ["0", "0"]:
                entry["sequential"] = ["0", "0"]
        return data

    monkeypatch.setattr("accounting.ledger.snapshot_payload", forgetful)
    path, written = _written(tmp_path, snapshot_workload, steps=40)
    with Ledger.from_journal(path, read_only=True) as opened:
        assert opened.account("p").spent != written["accounts"]["p"]["spent"]  # opening trusts the snapshot
    with pytest.raises(JournalCorruptError, match=r"snapshot row \d+ is not the replay of rows 1\.\.\d+: account "
                                                  r"'p' differs \(sequential\)"):
        verify(path)


def test_a_journal_without_snapshots_opens_and_gets_one_at_the_next_charge(tmp_path, every):
    """Journals written before snapshots (or with fewer rows than the interval) open by replaying every row."""
    path = tmp_path / "old.db"
    every(10**9)
    with Ledger(PureDP(1), journal=path) as ledger:
        for _ in range(12):
            ledger.charge(PureDP(0.01), mechanism="m")
    every(5)
    with Ledger.from_journal(path) as ledger:
        assert ledger._journal.snapshot() is None and ledger.seq == 12
        assert ledger.charge(PureDP(0.01), mechanism="m").seq == 14  # row 13 is the snapshot
    assert _snapshot_seqs(path) == [13]
    with Ledger.from_journal(path) as ledger:
        assert ledger._journal.snapshot()[0] == 13 and ledger.root.spent == PureDP(0.13)


def test_ledgers_sharing_a_journal_replay_each_others_snapshots(tmp_path, every):
    every(4)
    path = tmp_path / "shared.db"
    with Ledger(ApproxDP(1, 1e-6), journal=path) as a, Ledger(ApproxDP(1, 1e-6), journal=path) as b:
        for k in range(60):
            (a if k % 3 else b).charge(ApproxDP(0.001, 0), mechanism="m", partition=k % 4)
        assert a.report() == b.report() and a.seq == b.seq
    seqs = _snapshot_seqs(path)
    # one writer each time: at least 4 rows between two snapshots, whichever ledger wrote them
    assert len(seqs) >= 4 and all(b - a >= 5 for a, b in zip(seqs, seqs[1:], strict=False))


def test_a_large_state_is_snapshotted_less_often(tmp_path, every):
    """Per-user buckets make the state large: snapshots are spaced by its size (journal/snapshot.py, interval)."""
    every(2)
    path = tmp_path / "users.db"
    with Ledger(PureDP(10), journal=path) as ledger:
        for user in range(200):
            ledger.charge(PureDP(0.001), mechanism="m", partition=user)
    seqs = _snapshot_seqs(path)
    gaps = [b - a - 1 for a, b in zip(seqs, seqs[1:], strict=False)]
    # the state at snapshot s holds about s partition keys: the rows to the next one are at least that many
    assert all(gap >= max(2, a // 2) for a, gap in zip(seqs, gaps, strict=False))
    assert len(seqs) <= 10


def test_a_long_tail_is_read_again_at_replay_and_checked_again(tmp_path, every, monkeypatch):
    """The rows after the snapshot are kept from the open only up to _KEEP; more are read again for the replay, and
    checked again: a row changed between the two reads is refused."""
    from accounting.journal import sqlite as store_module

    monkeypatch.setattr(store_module, "_KEEP", 5)
    every(10**9)
    path = tmp_path / "long.db"
    with Ledger(PureDP(1), journal=path) as ledger:
        for k in range(30):
            ledger.charge(PureDP(0.01), mechanism="m", note=str(k))
    with Ledger.from_journal(path) as ledger:
        assert ledger.root.spent == PureDP(0.3) and ledger.seq == 30
    store = Journal(path, read_only=True)
    assert store._tail is None
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE events SET payload = replace(payload, '\"note\": \"19\"', '\"note\": \"91\"') "
                     "WHERE seq = 20")
    conn.close()
    with pytest.raises(JournalCorruptError, match="row 20 is damaged"):
        list(store.tail())
    store.close()
