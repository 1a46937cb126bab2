"""The host's witness (issue 30): a backup of ``.db``, ``-wal`` and ``.anchor`` restored together is refused.

On main the docs advised backing the three files up together, and putting such a
backup back reopened the journal with the later charges gone: charging on, one
trial granted 170 units of a budget of 100. The witness is the journal's head kept
in this host's state directory (``DPGLM_ANCHOR_DIR``), outside the journal's
directory (docs/threat-model.md, "Restores: what is detected").
"""

import multiprocessing
import os
import shutil
import warnings
from fractions import Fraction
from pathlib import Path

import pytest

import accounting.journal.anchor as anchor_module
import accounting.journal.sqlite as sqlite_module
from accounting import BudgetExceeded, JournalAnchorWarning, JournalCorruptError, Ledger, PureDP
from accounting.journal import Journal
from accounting.journal.anchor import read_anchor

FILES = ("run.db", "run.db-wal", "run.db.anchor")


@pytest.fixture
def state(tmp_path, monkeypatch):
    """This test's state directory (the witness), outside the journal's directory."""
    folder = tmp_path / "state"
    monkeypatch.setenv("DPGLM_ANCHOR_DIR", str(folder))
    return folder


def _backup(folder: Path) -> dict[str, bytes]:
    """The journal's three files as they are now (a ledger may hold it: the docs' advice)."""
    return {name: (folder / name).read_bytes() for name in FILES if (folder / name).exists()}


def _restore(folder: Path, backup: dict[str, bytes]) -> None:
    for name in FILES + ("run.db-shm",):
        if (folder / name).exists():
            os.remove(folder / name)
    for name, data in backup.items():
        (folder / name).write_bytes(data)


def _spend(path: Path, budget: int) -> int:
    """Charge units until the budget refuses; how many were granted."""
    granted = 0
    with Ledger(PureDP(budget), journal=path) as ledger:
        while True:
            try:
                ledger.charge(PureDP(1), mechanism="Laplace")
            except BudgetExceeded:
                return granted
            granted += 1


def test_a_backup_of_the_three_files_restored_together_is_refused_in_one_line(tmp_path, state):
    journal = tmp_path / "journal"
    journal.mkdir()
    path = journal / "run.db"
    with Ledger(PureDP(100), journal=path) as ledger:
        for _ in range(30):
            ledger.charge(PureDP(1), mechanism="Laplace")
        backup = _backup(journal)  # .db, -wal and .anchor taken together, while the ledger holds the journal
        assert set(backup) == set(FILES)
    assert _spend(path, 100) == 70
    _restore(journal, backup)
    with pytest.raises(JournalCorruptError) as refused:
        Ledger(PureDP(100), journal=path)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and str(state) in message
    assert "ends at row 30 but this host's witness" in message and "records row 100: rows 31..100 were lost" in message
    with pytest.raises(JournalCorruptError, match="records row 100"):
        Ledger.from_journal(path, read_only=True)  # `dpglm ledger show` refuses it too


def test_restoring_the_state_directory_too_is_not_detected(tmp_path, state):
    """The documented limit (docs/threat-model.md): roll the witness back with the journal: 170 of 100 granted."""
    journal = tmp_path / "journal"
    journal.mkdir()
    path = journal / "run.db"
    with Ledger(PureDP(100), journal=path) as ledger:
        for _ in range(30):
            ledger.charge(PureDP(1), mechanism="Laplace")
    backup = _backup(journal)
    shutil.copytree(state, tmp_path / "state-backup")
    assert _spend(path, 100) == 70
    _restore(journal, backup)
    shutil.rmtree(state)
    shutil.copytree(tmp_path / "state-backup", state)  # a whole-machine snapshot, or $HOME restored with it
    assert _spend(path, 100) == 70  # 30 + 70 + 70 = 170 granted of 100: undetectable from this host
    assert read_anchor(str(state / f"{Journal(path, read_only=True).journal_id}.anchor")).seq == 100


def test_a_fresh_journal_opens_without_a_warning_and_is_witnessed(tmp_path, state):
    path = tmp_path / "run.db"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Ledger(PureDP(1), journal=path) as ledger:
            ledger.charge(PureDP(0.25), mechanism="Laplace")
            journal_id = ledger.journal_id
        with Ledger(PureDP(1), journal=path) as ledger:
            assert ledger.remaining == PureDP(Fraction(3, 4))
    witnessed = read_anchor(str(state / f"{journal_id}.anchor"))
    assert witnessed is not None and witnessed.seq == 1
    assert [entry.name for entry in (state / "by-location").iterdir()]  # the path -> journal id record


def test_a_moved_state_directory_is_found_again(tmp_path, state, monkeypatch):
    journal = tmp_path / "journal"
    journal.mkdir()
    path = journal / "run.db"
    with Ledger(PureDP(10), journal=path) as ledger:
        ledger.charge(PureDP(1), mechanism="Laplace")
    backup = _backup(journal)
    moved = tmp_path / "elsewhere" / "witness"
    moved.parent.mkdir()
    shutil.move(state, moved)
    monkeypatch.setenv("DPGLM_ANCHOR_DIR", str(moved))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # found by journal id: no "no witness" warning
        assert _spend(path, 10) == 9
    _restore(journal, backup)
    with pytest.raises(JournalCorruptError, match=f"ends at row 1 but this host's witness {moved}"):
        Ledger(PureDP(10), journal=path)


def test_a_missing_witness_warns_once_and_the_journal_is_witnessed_from_then_on(tmp_path, state):
    journal = tmp_path / "journal"
    journal.mkdir()
    path = journal / "run.db"
    with Ledger(PureDP(10), journal=path) as ledger:
        ledger.charge(PureDP(1), mechanism="Laplace")
    shutil.rmtree(state)  # a new container, or a deleted state directory
    with pytest.warns(JournalAnchorWarning, match=r"no witness of it in .* a backup of its directory restored "
                                                  "before now cannot be detected"):
        ledger = Ledger(PureDP(10), journal=path)
    backup = _backup(journal)
    with ledger:
        ledger.charge(PureDP(1), mechanism="Laplace")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Ledger(PureDP(10), journal=path).close()
    _restore(journal, backup)
    with pytest.raises(JournalCorruptError, match="ends at row 1 but this host's witness"):
        Ledger(PureDP(10), journal=path)


def test_a_deleted_journal_and_anchor_are_not_recreated_as_a_fresh_budget(tmp_path, state):
    path = tmp_path / "run.db"
    with Ledger(PureDP(1), journal=path) as ledger:
        ledger.charge(PureDP(1), mechanism="Laplace")
        journal_id = ledger.journal_id
    for name in ("run.db", "run.db.anchor"):
        os.remove(tmp_path / name)  # or a backup from before the journal existed put back
    witness = state / f"{journal_id}.anchor"
    with pytest.raises(JournalCorruptError, match=f"is missing, but this host's witness {witness} records rows 1..1"):
        Ledger(PureDP(1), journal=path)
    os.remove(witness)  # the operator's decision: a new budget
    with Ledger(PureDP(1), journal=path) as ledger:
        assert ledger.remaining == PureDP(1)


def test_a_copy_shown_elsewhere_is_not_judged_by_the_witness(tmp_path, state):
    path = tmp_path / "run.db"
    with Ledger(PureDP(1), journal=path) as ledger:
        ledger.charge(PureDP(0.25), mechanism="Laplace")
    shutil.copy(path, tmp_path / "backup.db")
    shutil.copy(str(path) + ".anchor", tmp_path / "backup.db.anchor")
    assert _spend(path, 1) == 0 and Ledger.from_journal(path, read_only=True).remaining == PureDP(Fraction(3, 4))
    with Ledger.from_journal(tmp_path / "backup.db", read_only=True) as shown:  # older than the witness: a backup
        assert shown.remaining == PureDP(Fraction(3, 4))


def test_a_charge_flushes_the_wal_once_and_the_side_files_later(tmp_path, state, monkeypatch):
    """One flush per charge (the -wal, outside the side lock); the anchor and the witness at close."""
    flushed = []

    def counting(fd):
        flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
        os.fdatasync(fd)

    monkeypatch.setattr(sqlite_module, "_datasync", counting)
    monkeypatch.setattr(anchor_module, "_datasync", counting)
    monkeypatch.setattr(anchor_module, "SYNC_SECONDS", 3600.0)
    path = tmp_path / "run.db"
    Ledger(PureDP(1), journal=path).close()
    flushed.clear()
    with Ledger(PureDP(1), journal=path) as ledger:
        for _ in range(10):
            ledger.charge(PureDP(Fraction(1, 20)), mechanism="Laplace")
        assert flushed == [str(path) + "-wal"] * 10
        journal_id = ledger.journal_id
    assert sorted(flushed[10:]) == sorted([str(path) + ".anchor", str(state / f"{journal_id}.anchor")])


def _charge_many(path: str, count: int) -> None:
    with Ledger.from_journal(path) as ledger:
        for _ in range(count):
            ledger.charge(PureDP(Fraction(1, 1000)), mechanism="Laplace")


def test_processes_charging_together_leave_the_witness_at_the_last_row(tmp_path, state):
    path = tmp_path / "run.db"
    Ledger(PureDP(1), journal=path).close()
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_charge_many, args=(str(path), 25)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    journal = Journal(path, read_only=True)
    (last, *_), digest = list(journal.history())[-1], journal._chain.digest
    witnessed = read_anchor(str(state / f"{journal.journal_id}.anchor"))
    journal.close()
    assert last == 100 and witnessed is not None and (witnessed.seq, witnessed.digest) == (100, digest)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Ledger(PureDP(1), journal=path) as ledger:
            assert ledger.root.spent == PureDP(Fraction(1, 10))
