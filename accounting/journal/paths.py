"""What the file at a file journal's path is, and whether it may be charged (:mod:`accounting.journal.sqlite`).

Each check names the path it refuses (docs/threat-model.md, the fault table):
an empty, truncated or foreign file is never reopened as a fresh budget; a
journal with a second hard link could be restored or copied apart from its
other name and fork the budget; a journal its owner made read-only is read-only
even for root. Only a file under 512 bytes — never a journal — is ever read
here, so no check can drop one of SQLite's POSIX locks (docs/threat-model.md,
"No descriptor of ours where SQLite locks").
"""

from __future__ import annotations

import errno
import os
import stat

from accounting.journal.anchor import _identity
from accounting.journal.errors import (
    JournalCorruptError,
    JournalDiskFullError,
    JournalPathError,
    JournalReadOnlyError,
)

__all__ = ["check_links", "disk_full", "refuse_read_only", "remove_creation_leftovers", "stat_journal", "writable"]

_SQLITE_MAGIC = b"SQLite format 3\x00"


def writable(path: str) -> bool:
    """Whether ``path`` may be written: a write permission bit is set and ``os.access`` agrees.

    Root passes ``os.access`` on any file, so the mode bits are read too: a
    journal its owner made read-only (``chmod a-w``) is treated as read-only
    even for root.
    """
    return bool(os.stat(path).st_mode & 0o222) and os.access(path, os.W_OK)


def disk_full(path: str, error: OSError) -> Exception:
    """:class:`JournalDiskFullError` for ``ENOSPC``/``EDQUOT`` at ``path``; any other error as it is."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return JournalDiskFullError(f"journal {path}: the disk is full ({error.strerror}): charge refused")
    return error


def stat_journal(shown: str, real_path: str) -> os.stat_result:
    """``os.stat`` of the journal at ``real_path``, refusing what cannot be a journal (``shown`` in errors)."""
    status = os.stat(real_path)
    if not stat.S_ISREG(status.st_mode):
        raise JournalCorruptError(f"journal {shown} is not a dpglm journal (not a regular file)")
    size = status.st_size
    if size == 0:
        raise JournalCorruptError(
            f"journal {shown} is empty (0 bytes): not a dpglm journal, and never reopened as a fresh budget; "
            f"restore it, or delete it (and {os.path.basename(real_path)}.anchor) to start over"
        )
    if size < 512:  # smaller than one SQLite page: never a journal, so reading it cannot drop a live lock
        with open(real_path, "rb") as handle:
            first = handle.read(100)
        cut = first == _SQLITE_MAGIC[: len(first)] or first.startswith(_SQLITE_MAGIC)
        what = f"truncated to {size} byte{'s' if size > 1 else ''}" if cut else "not an SQLite file"
        raise JournalCorruptError(f"journal {shown} is not a dpglm journal ({what})")
    return status


def check_links(shown: str, status: os.stat_result) -> None:
    """Refuse a journal with more than one hard link (:class:`JournalPathError`)."""
    if status.st_nlink > 1:
        raise JournalPathError(
            f"journal {shown} has {status.st_nlink} hard links: each name could be restored or copied "
            "apart from the others and fork the budget; remove the other links (find -samefile) to charge it"
        )


def remove_creation_leftovers(real_path: str, status: os.stat_result) -> bool:
    """Unlink ``REALPATH.new-*`` names of this very file: a crash between link and unlink while creating.

    Called under the side lock, when no creation can be in progress.
    """
    folder, name = os.path.split(real_path)
    removed = False
    for entry in os.scandir(folder):
        if entry.name.startswith(name + ".new-") and _identity(entry.stat(follow_symlinks=False)) == _identity(status):
            os.unlink(entry.path)
            removed = True
    return removed


def refuse_read_only(shown: str, real_path: str) -> None:
    """Refuse to charge a journal whose file or directory is read-only (:class:`JournalReadOnlyError`)."""
    hint = f"show it with `dpglm ledger show {shown}` (Ledger.from_journal(path, read_only=True)); it cannot be charged"
    if not writable(real_path):
        mode = stat.S_IMODE(os.stat(real_path).st_mode)
        raise JournalReadOnlyError(f"journal {shown} is read-only (file mode {mode:04o}): {hint}")
    folder = os.path.dirname(real_path)
    if not writable(folder):
        raise JournalReadOnlyError(f"journal {shown} is in a read-only directory ({folder}): {hint}")
