"""The SQLite journal: restore on reopen, refuse a foreign journal; the fault tests of docs/threat-model.md.

Each fault below was reproduced on the unchained WAL journal first (outcomes in
the commit message): a file truncated to 0 or 1 byte reopened as a fresh, fully
funded ledger; a flipped byte replayed silently; a deleted journal let a second
ledger grant again; a copy of the .db alone after kill -9 held none of the last
charges (they lived in -wal); a 0444 journal was charged.
"""

import contextlib
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

from accounting import (
    ZCDP,
    ApproxDP,
    BudgetExceeded,
    JournalAnchorWarning,
    JournalCorruptError,
    JournalMismatchError,
    JournalReadOnlyError,
    JournalReplacedError,
    Ledger,
    PureDP,
)
from dpglm.cli import main

PAPER_WEIGHTS = {"tree": 1, "switching": 1, "optimizer": 1}
PAPER_CURRENCY = {"tree": "zcdp", "optimizer": "zcdp"}


def sha256(value: object) -> str:
    """The chain's hash, written out here independently: SHA-256 of compact, key-sorted JSON."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def test_rows_are_chained_in_a_wal_journal_file(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger(PureDP(1), journal=path) as ledger:
        ledger.charge(PureDP(0.25), mechanism="Laplace", partition="a", note="x")
        ledger.charge(PureDP(0.25), mechanism="Laplace")
        with pytest.raises(BudgetExceeded):
            ledger.charge(PureDP(0.8), mechanism="Laplace")
        assert (tmp_path / "ledger.db-wal").exists()  # the rows live in -wal until a checkpoint
    assert not (tmp_path / "ledger.db-wal").exists()  # the last close checkpointed them into the .db
    assert path.read_bytes()[18:20] == b"\x02\x02"  # SQLite file format 2: WAL
    conn = sqlite3.connect(path)
    (fmt, journal_id, meta, origin, digest), = conn.execute(
        "SELECT format, journal_id, meta, origin, hash FROM header").fetchall()
    rows = conn.execute("SELECT seq, kind, account, payload, prev, hash FROM events ORDER BY seq").fetchall()
    conn.close()
    assert fmt == "dpglm-ledger-journal-3" and origin == os.path.realpath(path)
    assert json.loads(meta) == {"budget": {"type": "pure", "eps": "1"}, "relation": "replace_one"}
    assert digest == sha256([fmt, journal_id, meta, origin]) and len(journal_id) == 32
    assert [row[:3] for row in rows] == [(1, "charge", ""), (2, "charge", "")]  # the refused charge left no row
    previous = digest
    for seq, kind, account, payload, prev, row_hash in rows:
        assert prev == previous and row_hash == sha256([prev, seq, kind, account, payload])
        previous = row_hash
    anchor = (tmp_path / "ledger.db.anchor").read_bytes().split()
    assert anchor[1:4] == [journal_id.encode(), b"2", previous.encode()]


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
    with Ledger(ApproxDP(4, 0.02), journal=path) as ledger, pytest.raises(JournalMismatchError, match="split #1"):
        ledger.split({"tree": 1, "switching": 1, "optimizer": 2}, currency=PAPER_CURRENCY)
    with Ledger(ApproxDP(4, 0.02), journal=path) as ledger, pytest.raises(JournalMismatchError, match="split #1"):
        ledger.split(PAPER_WEIGHTS)  # same weights, other currencies


def test_not_a_journal(tmp_path):
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")  # the unchained format 1
    conn.commit()
    conn.close()
    with pytest.raises(JournalCorruptError, match="old unchained format"):
        Ledger(PureDP(1), journal=foreign)
    conn = sqlite3.connect(foreign)
    conn.execute("DROP TABLE meta")
    conn.execute("CREATE TABLE x (a)")
    conn.commit()
    conn.close()
    with pytest.raises(JournalMismatchError, match="not a dpglm journal .an SQLite file without its header"):
        Ledger(PureDP(1), journal=foreign)  # on the WAL journal: reopened as a fresh budget
    with pytest.raises(FileNotFoundError):
        Ledger.from_journal(tmp_path / "missing.db")
    with pytest.raises(TypeError, match="journal"):
        Ledger(PureDP(1), journal=3)
    with pytest.raises(JournalCorruptError, match="not a regular file"):
        Ledger(PureDP(1), journal=tmp_path)
    with pytest.raises(FileNotFoundError, match="directory .* does not exist"):
        Ledger(PureDP(1), journal=tmp_path / "missing" / "ledger.db")


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


def _journal(tmp_path, charges: int = 3) -> str:
    path = str(tmp_path / "run.db")
    with Ledger(ApproxDP(1, 1e-5), journal=path) as ledger:
        for _ in range(charges):
            ledger.charge(PureDP(0.1), mechanism="Laplace")
    return path


def _flip(path: str, needle: bytes, occurrence: int = -1, offset: int = 1) -> None:
    data = bytearray(Path(path).read_bytes())
    starts = [i for i in range(len(data)) if data.startswith(needle, i)]
    data[starts[occurrence] + offset] ^= 0x08  # "1/10" -> "9/10" for the digit 1
    Path(path).write_bytes(data)


def _truncate(path: str, size: int) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(size)


def _cut_inside_the_last_row(path: str) -> None:
    """SQLite stores a page's cells from its end backwards: row 1 is last in the file."""
    _truncate(path, Path(path).read_bytes().rindex(b'"Laplace"'))


FAULTS = {
    "empty": (lambda p: _truncate(p, 0), r"is empty \(0 bytes\).*never reopened as a fresh budget"),
    "one byte": (lambda p: _truncate(p, 1), r"not a dpglm journal \(truncated to 1 byte\)"),
    "inside the SQLite header": (lambda p: _truncate(p, 60), r"truncated to 60 bytes"),
    "cut inside the last row": (_cut_inside_the_last_row, r"row 1 is damaged"),
    "flipped byte in a payload": (lambda p: _flip(p, b'"1/10"', 0), r"row \d is damaged"),
    "flipped byte in the header": (lambda p: _flip(p, b"1/100000", offset=7), r"header .* is damaged"),
    "not SQLite": (lambda p: Path(p).write_bytes(b"not a database" * 100),
                   r"not a dpglm journal \(not an SQLite file\)"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_damaged_journal_is_refused_naming_the_path(tmp_path, fault):
    path = _journal(tmp_path)
    damage, message = FAULTS[fault]
    damage(path)
    for opening in (lambda: Ledger(ApproxDP(1, 1e-5), journal=path), lambda: Ledger.from_journal(path),
                    lambda: Ledger.from_journal(path, read_only=True)):
        with pytest.raises(JournalCorruptError, match=message) as refused:
            opening()
        assert path in str(refused.value) and "\n" not in str(refused.value)
    assert os.path.getsize(path) < 100 or fault != "empty"  # nothing was written back


def test_rows_removed_or_rolled_back_are_refused_by_the_chain_or_the_anchor(tmp_path):
    path = _journal(tmp_path, 3)
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM events WHERE seq = 2")  # a row removed from the middle: the chain sees it
    conn.commit()
    conn.close()
    with pytest.raises(JournalCorruptError, match="row 2 is missing"):
        Ledger(ApproxDP(1, 1e-5), journal=path)

    (tmp_path / "b").mkdir()
    path = _journal(tmp_path / "b", 1)
    shutil.copy(path, path + ".old")
    with Ledger(ApproxDP(1, 1e-5), journal=path) as ledger:
        ledger.charge(PureDP(0.5), mechanism="Laplace")
    shutil.copy(path, path + ".new")
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM events WHERE seq = 2")  # cut at a row boundary: a valid chain, one row short
    conn.commit()
    conn.close()
    with pytest.raises(JournalCorruptError, match=r"ends at row 1 but its anchor records row 2: rows 2\.\.2 were lost"):
        Ledger(ApproxDP(1, 1e-5), journal=path)
    shutil.copy(path + ".old", path)  # an older complete copy restored
    with pytest.raises(JournalCorruptError, match="ends at row 1 but its anchor records row 2"):
        Ledger.from_journal(path, read_only=True)
    shutil.copy(path + ".new", path)  # the newest copy is accepted again: 0.1 + 0.5 spent
    with Ledger(ApproxDP(1, 1e-5), journal=path) as ledger:
        assert ledger.root.spent == ApproxDP(Fraction(6, 10), 0)


def test_the_anchor_of_another_journal_or_of_a_diverged_copy_is_refused(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = _journal(tmp_path / "a", 1), _journal(tmp_path / "b", 1)
    shutil.copy(second + ".anchor", first + ".anchor")
    with pytest.raises(JournalCorruptError, match="belongs to another journal"):
        Ledger(ApproxDP(1, 1e-5), journal=first)
    # one journal charged twice from the same row 1 (a rollback of the .db and its anchor together in between,
    # and of this host's state directory, or the host's witness would refuse it): same row 1, different row 2;
    # the anchor of the first row 2 refuses the second
    for name in (second, second + ".anchor"):
        shutil.copy(name, name + ".old")
    with Ledger(ApproxDP(1, 1e-5), journal=second) as ledger:
        ledger.charge(PureDP(0.1), mechanism="Laplace")
    shutil.copy(second + ".anchor", second + ".anchor.first")
    for name in (second, second + ".anchor"):
        shutil.copy(name + ".old", name)
    monkeypatch.setenv("DPGLM_ANCHOR_DIR", str(tmp_path / "restored-state"))
    with pytest.warns(JournalAnchorWarning, match="no witness"), \
            Ledger(ApproxDP(1, 1e-5), journal=second) as ledger:
        ledger.charge(PureDP(0.2), mechanism="Laplace")
    shutil.copy(second + ".anchor.first", second + ".anchor")
    with pytest.raises(JournalCorruptError, match="row 2 is not the row its anchor recorded"):
        Ledger(ApproxDP(1, 1e-5), journal=second)


def test_a_journal_without_its_anchor_warns_and_is_anchored_again(tmp_path):
    path = _journal(tmp_path, 2)
    os.remove(path + ".anchor")
    with pytest.warns(JournalAnchorWarning, match="rollback to an older copy cannot be detected"), \
            Ledger(ApproxDP(1, 1e-5), journal=path) as ledger:
        assert ledger.root.spent == ApproxDP(Fraction(2, 10), 0)
    assert os.path.exists(path + ".anchor")
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM events WHERE seq = 2")
    conn.commit()
    conn.close()
    with pytest.raises(JournalCorruptError, match="anchor records row 2"):  # checked again from now on
        Ledger(ApproxDP(1, 1e-5), journal=path)


def test_a_crash_between_commit_and_anchor_or_a_torn_anchor_slot_loses_nothing(tmp_path):
    path = _journal(tmp_path, 1)
    anchor = Path(path + ".anchor")
    stale = anchor.read_bytes()
    with Ledger(ApproxDP(1, 1e-5), journal=path) as ledger:
        ledger.charge(PureDP(0.1), mechanism="Laplace")
    anchor.write_bytes(stale)  # the row committed, the anchor still one behind: accepted
    with Ledger(ApproxDP(1, 1e-5), journal=path) as ledger:
        assert ledger.root.spent == ApproxDP(Fraction(2, 10), 0)
        ledger.charge(PureDP(0.1), mechanism="Laplace")  # row 3 goes to slot 1
    data = bytearray(anchor.read_bytes())
    data[256 + 40] ^= 1  # tear slot 1: the reader falls back to slot 0 (row 2), one behind: accepted
    anchor.write_bytes(data)
    with Ledger(ApproxDP(1, 1e-5), journal=path) as ledger:
        assert ledger.root.spent == ApproxDP(Fraction(3, 10), 0)


def test_a_journal_deleted_while_held_refuses_the_next_charge_and_is_not_recreated(tmp_path):
    """On the WAL journal: 0.4 + 0.4 granted of a budget of 0.5 (a second ledger at the path, and the first)."""
    path = str(tmp_path / "run.db")
    ledger = Ledger(PureDP(0.5), journal=path)
    ledger.charge(PureDP(0.4), mechanism="Laplace")
    os.remove(path)
    with pytest.raises(JournalReplacedError, match=f"journal {path} was deleted while this ledger held it"):
        ledger.charge(PureDP(0.05), mechanism="Laplace")
    with pytest.raises(JournalCorruptError, match=r"is missing but its anchor .* records rows 1\.\.1"):
        Ledger(PureDP(0.5), journal=path)
    with pytest.raises(JournalReplacedError, match="was deleted"):  # its view cannot be refreshed either
        _ = ledger.remaining
    ledger.close()
    assert ledger.root.spent == PureDP(Fraction(2, 5))  # the refused charge changed nothing


def test_a_wal_deleted_while_held_refuses_the_next_charge(tmp_path):
    path = str(tmp_path / "run.db")
    with Ledger(PureDP(1), journal=path) as ledger:
        ledger.charge(PureDP(0.25), mechanism="Laplace")
        os.remove(path + "-wal")  # the committed row lives only there until a checkpoint
        with pytest.raises(JournalReplacedError, match=r"write-ahead log .*run\.db-wal was deleted"):
            ledger.charge(PureDP(0.25), mechanism="Laplace")


@pytest.mark.parametrize("replaced", ["journal", "anchor"])
def test_a_journal_or_anchor_replaced_while_held_refuses_the_next_charge(tmp_path, replaced):
    path = str(tmp_path / "run.db")
    with Ledger(PureDP(0.5), journal=path) as ledger:
        ledger.charge(PureDP(0.4), mechanism="Laplace")
        target = path if replaced == "journal" else path + ".anchor"
        shutil.copy(target, target + ".copy")
        os.replace(target + ".copy", target)  # same content, another file
        with pytest.raises(JournalReplacedError, match=f"{replaced} .* was replaced by another file"):
            ledger.charge(PureDP(0.05), mechanism="Laplace")
    if replaced == "anchor":
        with Ledger(PureDP(0.5), journal=path) as ledger:  # the copied anchor is the same record: accepted
            os.remove(path + ".anchor")
            with pytest.raises(JournalReplacedError, match="anchor .* was deleted while this ledger held it"):
                ledger.charge(PureDP(0.05), mechanism="Laplace")


def test_an_anchor_left_by_a_crash_while_creating_does_not_block_a_new_journal(tmp_path):
    path = _journal(tmp_path, 0)  # a header and a seq-0 anchor
    os.remove(path)
    with Ledger(PureDP(1), journal=path) as ledger:  # nothing was spent: starting afresh loses nothing
        ledger.charge(PureDP(1), mechanism="Laplace")


@pytest.mark.parametrize("where", ["file", "directory"])
def test_a_read_only_journal_is_shown_and_refused_for_charging(tmp_path, where, capsys):
    path = _journal(tmp_path, 2)
    with Ledger.from_journal(path) as ledger:
        expected = ledger.to_json()
    locked = path if where == "file" else str(tmp_path)
    os.chmod(locked, 0o444 if where == "file" else 0o555)
    try:
        for opening in (lambda: Ledger(ApproxDP(1, 1e-5), journal=path), lambda: Ledger.from_journal(path)):
            with pytest.raises(JournalReadOnlyError, match=f"{path} (is read-only|is in a read-only directory).*"
                                                           "dpglm ledger show"):
                opening()
        with Ledger.from_journal(path, read_only=True) as ledger:
            assert ledger.read_only and ledger.to_json() == expected
            with pytest.raises(JournalReadOnlyError, match="opened read-only: it can be shown, not charged"):
                ledger.charge(PureDP(0.1), mechanism="Laplace")
            with pytest.raises(JournalReadOnlyError, match="opened read-only"):
                ledger.split({"a": 1})
            # SQLite itself holds it read-only (mode=ro), even for root, who may write any file:
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                ledger._journal._conn.execute("DELETE FROM events")
            assert ledger.root.spent == ApproxDP(Fraction(2, 10), 0)
        assert main(["ledger", "show", "--json", path]) == 0
        assert json.loads(capsys.readouterr().out) == json.loads(expected)
    finally:
        os.chmod(locked, 0o644 if where == "file" else 0o755)
    with Ledger.from_journal(path) as ledger:  # writable again: the file is unchanged
        assert ledger.to_json() == expected


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


def test_after_kill_9_the_db_with_its_wal_holds_every_granted_charge_and_the_db_alone_is_refused(tmp_path):
    """Format 2 (rollback journal) kept every charge in the .db; format 3 (WAL) keeps them in .db + -wal.

    What replaces the old guarantee (docs/threat-model.md): a copy of the .db
    with its -wal holds every receipt; the .db alone (its -wal lost) put back at
    the journal's path is refused by the anchor, never opened with charges missing.
    """
    path = tmp_path / "ledger.db"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    granted = []
    try:
        for line in child.stdout:
            granted.append(int(line))
            if len(granted) == 30:
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    assert granted == list(range(2, 2 + len(granted)))  # seq 1 is the split
    (tmp_path / "copy").mkdir()
    (tmp_path / "alone").mkdir()
    for suffix in ("", "-wal"):
        shutil.copy(str(path) + suffix, tmp_path / "copy" / ("ledger.db" + suffix))
    shutil.copy(path, tmp_path / "alone" / "ledger.db")
    with pytest.warns(JournalAnchorWarning):  # the anchor was not copied: show the copy all the same
        ledger = Ledger.from_journal(tmp_path / "copy" / "ledger.db", read_only=True)
    with ledger:
        restored = ledger.account("a").usage()[0]["count"]
        # every receipt the child printed is there; at most one more was committed unprinted
        assert len(granted) <= restored <= len(granted) + 1
        assert ledger.account("a").spent == PureDP(Fraction(restored, 1000))
    with pytest.warns(JournalAnchorWarning):
        Ledger.from_journal(tmp_path / "alone" / "ledger.db", read_only=True).close()  # a valid journal ...
    conn = sqlite3.connect(tmp_path / "alone" / "ledger.db")
    (alone,), = conn.execute("SELECT count(*) FROM events").fetchall()
    conn.close()
    assert alone < len(granted)  # the .db alone lacks the rows still in -wal (none checkpointed yet)
    os.remove(str(path) + "-wal")
    for leftover in ("-shm",):
        with contextlib.suppress(FileNotFoundError):
            os.remove(str(path) + leftover)
    shutil.copy(tmp_path / "alone" / "ledger.db", path)  # the .db alone put back: its -wal is lost
    # the anchor holds the last receipt's row, or the unprinted one after it if its anchor write finished
    with pytest.raises(JournalCorruptError, match=rf"ends at row {alone} but its anchor records row "
                                                  rf"({granted[-1]}|{restored + 1}):.*-wal lost"):
        Ledger(PureDP(1000), journal=path)


def test_racing_threads_with_a_journal_get_exactly_the_budget(tmp_path):
    import threading

    path = tmp_path / "ledger.db"
    granted = []
    with Ledger(PureDP(2), journal=path) as ledger:
        barrier = threading.Barrier(8)

        def worker() -> None:
            barrier.wait()
            for _ in range(6):
                with contextlib.suppress(BudgetExceeded):
                    granted.append(ledger.charge(PureDP(0.1), mechanism="m").seq)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(granted) == list(range(1, 21))
    with Ledger(PureDP(2), journal=path) as ledger:
        assert ledger.root.remaining == PureDP(0)
