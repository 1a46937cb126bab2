"""The errors and the warning every journal store raises (:mod:`accounting.journal.store`), one line each.

Each names the path it is about. They live here, apart from the SQLite code, so that every store (the file
journal, :mod:`accounting.journal.sqlite`; the PostgreSQL journal) raises the same
classes; :mod:`accounting.journal` and :mod:`accounting` re-export them.
docs/threat-model.md says which fault raises which.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

from accounting.journal.sidelock import NetworkFilesystemError

__all__ = [
    "JournalAnchorWarning",
    "JournalBusyError",
    "JournalCorruptError",
    "JournalDiskFullError",
    "JournalMismatchError",
    "JournalPathError",
    "JournalReadOnlyError",
    "JournalReplacedError",
    "NetworkFilesystemError",
]


class JournalMismatchError(ValueError):
    """The journal was written for another budget, relation or split, or is not a ledger journal."""


class JournalCorruptError(JournalMismatchError):
    """The file is empty, truncated, damaged, not a dpglm journal, or has lost rows (its anchor says so)."""


class JournalPathError(JournalMismatchError):
    """The journal is not where it was created (a copy or a moved file), or has more than one hard link.

    Charging it could fork the budget: the copy and the original would each
    grant the rest of it. It can still be opened read-only to show it.
    """


class JournalBusyError(RuntimeError):
    """Another program held the journal's write lock for longer than the journal waits."""


class JournalReadOnlyError(PermissionError):
    """The journal is read-only (file, directory, or opened for showing): it cannot be charged."""


class JournalReplacedError(RuntimeError):
    """The journal file was deleted or replaced while a ledger had it open."""


class JournalDiskFullError(OSError):
    """The disk (or the quota) holding the journal is full: the charge was refused, nothing was granted."""


class JournalAnchorWarning(UserWarning):
    """A journal was opened without its anchor: a rollback to an older copy could not be checked."""


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # accounting/


def warn_anchor(message: str) -> None:
    """Issue a :class:`JournalAnchorWarning` pointing at the first caller outside the accounting package.

    A journal is opened through several paths (``Ledger(...)``,
    ``Ledger.from_journal``, ``open_journal``), so no fixed ``stacklevel`` names
    the user's line for all of them.
    """
    level = 1
    frame: FrameType | None = sys._getframe(0)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, JournalAnchorWarning, stacklevel=level)
