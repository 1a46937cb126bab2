"""A full disk refuses the charge and says so; ':memory:' is in memory; guarantee(delta) honours or refuses delta.

On main a full disk read "journal is damaged or not a dpglm journal: SQLite
says 'database or disk is full'", ``Ledger(journal=":memory:")`` created a file
named ``:memory:``, and ``guarantee(delta)`` of an (ε, δ) budget ignored delta.
"""

import errno
import os
import sqlite3
import subprocess
import uuid
from fractions import Fraction

import pytest

from accounting import ApproxDP, JournalDiskFullError, Ledger, PureDP
from accounting.journal import Journal
from accounting.journal.anchor import AnchorFile


class _FullOnCommit:
    """A connection whose COMMIT fails as SQLite fails when the disk is full (SQLITE_FULL)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql == "COMMIT":
            raise sqlite3.OperationalError("database or disk is full")
        return self.conn.execute(sql, *args)


def _rows(path: str) -> list[str]:
    journal = Journal(path, read_only=True)
    notes = [payload["note"] for _, _, _, payload in journal.history()]
    journal.close()
    return notes


def test_a_full_disk_at_commit_refuses_the_charge_naming_the_path(tmp_path):
    path = str(tmp_path / "run.db")
    with Ledger(PureDP(1), journal=path) as ledger:
        ledger.charge(PureDP(0.25), mechanism="Laplace", note="granted")
        store = ledger._journal
        assert isinstance(store, Journal)
        real, store._conn = store._conn, _FullOnCommit(store._conn)  # type: ignore[assignment]
        with pytest.raises(JournalDiskFullError, match=f"journal {path}: the disk is full .*charge refused") as error:
            ledger.charge(PureDP(0.25), mechanism="Laplace", note="refused")
        assert "\n" not in str(error.value) and "damaged" not in str(error.value)
        store._conn = real
        assert ledger.remaining == PureDP(Fraction(3, 4))  # nothing granted, nothing counted
        ledger.charge(PureDP(0.25), mechanism="Laplace", note="after")  # space again: charging goes on
    assert _rows(path) == ["granted", "after"]


def test_a_full_disk_at_the_anchor_refuses_the_receipt_but_counts_the_committed_row(tmp_path, monkeypatch):
    path = str(tmp_path / "run.db")
    with Ledger(PureDP(1), journal=path) as ledger:
        ledger.charge(PureDP(0.25), mechanism="Laplace", note="granted")

        def full(self: AnchorFile, anchor: object) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(AnchorFile, "write", full)
        with pytest.raises(JournalDiskFullError, match=f"journal {path}: the disk is full"):
            ledger.charge(PureDP(0.25), mechanism="Laplace", note="committed, no receipt")
        monkeypatch.undo()
        # the row is in the journal, so it is spent: over-counting a refused charge is the safe side
        assert ledger.remaining == PureDP(Fraction(1, 2))
        assert ledger.charge(PureDP(0.5), mechanism="Laplace", note="last").seq == 3
    assert _rows(path) == ["granted", "committed, no receipt", "last"]
    with Ledger.from_journal(path) as ledger:  # the anchor was one behind, then caught up: reopens
        assert ledger.remaining == PureDP(0)


def test_a_failed_flush_of_the_wal_refuses_the_receipt_but_counts_the_committed_row(tmp_path, monkeypatch):
    """The flush after the commit, outside the side lock (issue 32): the row is in the journal, not granted."""
    import accounting.journal.sqlite as sqlite_module

    path = str(tmp_path / "run.db")
    with Ledger(PureDP(1), journal=path) as ledger:
        ledger.charge(PureDP(0.25), mechanism="Laplace", note="granted")

        def full(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(sqlite_module, "_datasync", full)
        with pytest.raises(JournalDiskFullError, match=f"journal {path}: the disk is full"):
            ledger.charge(PureDP(0.25), mechanism="Laplace", note="committed, no receipt")
        monkeypatch.undo()
        assert ledger.remaining == PureDP(Fraction(1, 2))  # counted: over-counting a refused charge is safe
        assert ledger.charge(PureDP(0.5), mechanism="Laplace", note="last").seq == 3
    assert _rows(path) == ["granted", "committed, no receipt", "last"]


@pytest.fixture
def tiny_filesystem(tmp_path):
    """A 256 KiB tmpfs (root only: mount(2) needs CAP_SYS_ADMIN); skipped where it cannot be mounted."""
    where = tmp_path / "tiny"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root): the disk-full tests above cover the mapping")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_really_full_disk_refuses_and_recovers(tiny_filesystem):
    path = str(tiny_filesystem / "run.db")
    granted = []
    note = uuid.UUID(int=0).hex * 64  # 2 KiB a row
    with Ledger(PureDP(10**6), journal=path) as ledger:
        filler = tiny_filesystem / "filler"
        with pytest.raises(JournalDiskFullError, match=f"journal {path}: the disk is full"):
            with open(filler, "wb") as handle:  # leave ~40 KiB, then charge until it runs out
                handle.write(b"\0" * (os.statvfs(tiny_filesystem).f_bavail * os.statvfs(tiny_filesystem).f_frsize
                                      - 40 * 1024))
            for k in range(1000):
                granted.append(ledger.charge(PureDP(1), mechanism="Laplace", note=f"{k}:{note}").seq)
        assert 0 < len(granted) < 1000
        assert ledger.root.spent == PureDP(len(granted))
        os.remove(filler)
        granted.append(ledger.charge(PureDP(1), mechanism="Laplace", note="after").seq)
    assert list(range(1, len(granted) + 1)) == granted
    assert len(_rows(path)) == len(granted)


def test_memory_means_in_memory():
    before = set(os.listdir("."))
    ledger = Ledger(PureDP(1), journal=":memory:")
    ledger.charge(PureDP(0.5), mechanism="Laplace")
    assert ledger.journal_path is None and ledger.remaining == PureDP(Fraction(1, 2))
    assert set(os.listdir(".")) == before  # main: a file named ':memory:' in the working directory
    with pytest.raises(ValueError, match="':memory:' has nothing to open"):
        Ledger.from_journal(":memory:")


def test_guarantee_honours_delta_or_refuses_it():
    ledger = Ledger(ApproxDP(1, 1e-5))
    ledger.charge(ApproxDP(0.5, 1e-6), mechanism="Gaussian")
    # stated at the budget's δ: adaptively chosen δs are capped by the filter, not summed (docs/accounting.md)
    assert ledger.guarantee().cost == ApproxDP(Fraction(1, 2), Fraction(1, 10**5))
    assert ledger.guarantee(1e-4).cost == ApproxDP(Fraction(1, 2), Fraction(1, 10**4))  # a larger δ is implied
    with pytest.raises(ValueError, match=r"delta must lie in \[1e-05, 1\)"):  # a smaller one is refused
        ledger.guarantee(1e-6)
    pure = Ledger(PureDP(1))
    pure.charge(PureDP(0.5), mechanism="Laplace")
    assert pure.guarantee().cost == PureDP(Fraction(1, 2))
    assert pure.guarantee(0.01).cost == ApproxDP(Fraction(1, 2), 0.01)
    with pytest.raises(ValueError, match="delta"):
        pure.guarantee(1)
