"""One anchor per journal whatever the path: symlinks, hard links, copies, moves, rollbacks (issue 21).

On main (format 2) the anchor was ``PATH + ".anchor"`` for whatever PATH the
caller gave: charging through a symlink or a hard link and then restoring an
older copy reopened through the real path with 0.2 spent instead of 0.4, no
warning. Here the anchor is bound to the real path and the journal id, a
journal with two hard links is refused, and a journal is charged only at the
real path it was created at.
"""

import os
import shutil
import warnings
from fractions import Fraction

import pytest

from accounting import (
    BudgetExceeded,
    JournalAnchorWarning,
    JournalCorruptError,
    JournalPathError,
    Ledger,
    NetworkFilesystemError,
    PureDP,
)
from accounting.journal.sidelock import filesystem_type


def _charge(path: str | os.PathLike[str], times: int, eps: float = 0.1) -> None:
    with Ledger(PureDP(1), journal=path) as ledger:
        for _ in range(times):
            ledger.charge(PureDP(eps), mechanism="Laplace")


def test_a_symlink_reaches_the_one_anchor_and_a_rollback_through_it_is_refused(tmp_path):
    real = tmp_path / "real.db"
    link = tmp_path / "link.db"
    other = tmp_path / "other.db"
    _charge(real, 2)  # 0.2
    shutil.copy(real, tmp_path / "old.db")  # a backup at 0.2
    link.symlink_to(real)
    other.symlink_to(link)  # a chain of links
    _charge(link, 2)  # 0.4 through the link
    assert not (tmp_path / "link.db.anchor").exists() and (tmp_path / "real.db.anchor").exists()
    shutil.copy(tmp_path / "old.db", real)  # the backup restored over the real file
    for path in (real, link, other):  # main: opened with 0.2 spent, no warning
        with pytest.raises(JournalCorruptError, match=r"ends at row 2 but its anchor records row 4"):
            Ledger(PureDP(1), journal=path)
        with pytest.raises(JournalCorruptError, match=r"ends at row 2 but its anchor records row 4"):
            Ledger.from_journal(path, read_only=True)


def test_an_anchor_left_at_the_unresolved_path_is_checked(tmp_path, monkeypatch):
    real = tmp_path / "real.db"
    link = tmp_path / "link.db"
    _charge(real, 1)
    backup = {name: (tmp_path / name).read_bytes() for name in ("real.db", "real.db.anchor")}
    _charge(real, 1)
    shutil.copy(tmp_path / "real.db.anchor", tmp_path / "link.db.anchor")  # as an older dpglm left it
    for name, data in backup.items():  # the journal and its anchor rolled back together
        (tmp_path / name).write_bytes(data)
    link.symlink_to(real)
    with pytest.raises(JournalCorruptError, match=r"ends at row 1 but this host's witness .* records row 2"):
        Ledger(PureDP(1), journal=real)
    # with this host's state directory rolled back too, nothing beside the real path can tell (documented)
    monkeypatch.setenv("DPGLM_ANCHOR_DIR", str(tmp_path / "restored-state"))
    with pytest.warns(JournalAnchorWarning, match="no witness"), Ledger(PureDP(1), journal=real) as ledger:
        assert ledger.root.spent == PureDP(Fraction(1, 10))
    with pytest.raises(JournalCorruptError, match=r"ends at row 1 but its anchor records row 2: .*link\.db\.anchor"):
        Ledger(PureDP(1), journal=link)


def test_a_journal_with_two_hard_links_is_refused_and_shown(tmp_path):
    path = tmp_path / "run.db"
    _charge(path, 2)
    os.link(path, tmp_path / "second.db")
    for name in ("run.db", "second.db"):
        with pytest.raises(JournalPathError, match="has 2 hard links"):
            Ledger(PureDP(1), journal=tmp_path / name)
    with pytest.warns(JournalAnchorWarning):  # the anchor is beside the name that opened the journal
        shown = Ledger.from_journal(tmp_path / "second.db", read_only=True)
    with shown:
        assert shown.root.spent == PureDP(Fraction(2, 10))
    os.remove(tmp_path / "second.db")
    with Ledger(PureDP(1), journal=path) as held:  # a link made while a ledger holds the journal
        os.link(path, tmp_path / "third.db")
        with pytest.raises(JournalPathError, match="has 2 hard links"):
            held.charge(PureDP(0.1), mechanism="Laplace")
        os.remove(tmp_path / "third.db")
        held.charge(PureDP(0.1), mechanism="Laplace")
    with Ledger(PureDP(1), journal=path) as ledger:  # one name again: charged as before
        assert ledger.root.spent == PureDP(Fraction(3, 10))


def test_a_crash_while_creating_leaves_a_second_link_that_the_next_open_removes(tmp_path):
    path = tmp_path / "run.db"
    _charge(path, 1)
    os.link(path, tmp_path / "run.db.new-0123abcd")  # killed between os.link and the unlink of the temporary name
    with Ledger(PureDP(1), journal=path) as ledger:
        assert ledger.root.spent == PureDP(Fraction(1, 10))
    assert not (tmp_path / "run.db.new-0123abcd").exists() and os.stat(path).st_nlink == 1


def test_a_copy_is_shown_never_charged_so_the_budget_cannot_fork(tmp_path):
    path = tmp_path / "run.db"
    _charge(path, 9)  # 0.9 of 1
    (tmp_path / "copy").mkdir()
    for suffix in ("", ".anchor"):  # cp with its anchor, to another directory
        shutil.copy(f"{path}{suffix}", tmp_path / "copy" / f"run.db{suffix}")
    shutil.copy(path, tmp_path / "run-copy.db")  # cp beside it, without its anchor
    for copy in (tmp_path / "copy" / "run.db", tmp_path / "run-copy.db"):
        with pytest.raises(JournalPathError, match=f"was created at {path}: it is a copy or was moved"):
            Ledger(PureDP(1), journal=copy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", JournalAnchorWarning)  # run-copy.db has no anchor beside it
            shown = Ledger.from_journal(copy, read_only=True)
        with shown:
            assert shown.root.spent == PureDP(Fraction(9, 10))
    with Ledger(PureDP(1), journal=path) as ledger:  # the original is charged; 0.1 left in all, not 0.1 per copy
        ledger.charge(PureDP(0.1), mechanism="Laplace")
        with pytest.raises(BudgetExceeded):
            ledger.charge(PureDP(0.1), mechanism="Laplace")


def test_a_moved_journal_is_shown_and_charged_again_once_moved_back(tmp_path):
    path = tmp_path / "run.db"
    _charge(path, 3)
    (tmp_path / "elsewhere").mkdir()
    moved = tmp_path / "elsewhere" / "run.db"
    for suffix in ("", ".anchor"):
        os.rename(f"{path}{suffix}", f"{moved}{suffix}")
    with pytest.raises(JournalPathError, match="move it back"):
        Ledger(PureDP(1), journal=moved)
    with Ledger.from_journal(moved, read_only=True) as shown:
        assert shown.root.spent == PureDP(Fraction(3, 10))
    with pytest.raises(FileNotFoundError):
        Ledger.from_journal(path)
    for suffix in ("", ".anchor"):
        os.rename(f"{moved}{suffix}", f"{path}{suffix}")
    _charge(path, 1)
    with Ledger.from_journal(path, read_only=True) as shown:
        assert shown.root.spent == PureDP(Fraction(4, 10))


def test_network_filesystems_are_refused_by_their_mount_type(tmp_path, monkeypatch):
    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/vda / ext4 rw 0 0\nserver:/export {tmp_path}/my\\040share nfs4 rw 0 0\n"
                      f"host:/x {tmp_path}/ss fuse.sshfs rw 0 0\n")
    assert filesystem_type(str(tmp_path / "my share" / "run.db"), str(mounts)) == "nfs4"
    assert filesystem_type(str(tmp_path / "ss" / "a" / "run.db"), str(mounts)) == "fuse.sshfs"
    assert filesystem_type(str(tmp_path / "my"), str(mounts)) == "ext4"  # a prefix of a mount point is not in it
    assert filesystem_type(str(tmp_path), str(tmp_path / "missing")) is None
    monkeypatch.setattr("accounting.journal.sidelock.filesystem_type", lambda path: "nfs4")
    with pytest.raises(NetworkFilesystemError, match=r"run\.db is on a network filesystem \(nfs4\)"):
        Ledger(PureDP(1), journal=tmp_path / "run.db")
    assert not (tmp_path / "run.db").exists()
