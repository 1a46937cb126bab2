"""Client-side anchors of PostgreSQL journals: what this host has seen committed, kept off the server.

A PostgreSQL server cannot tell that it *is* an older image of itself — a
restored backup, or an asynchronous standby promoted after the primary died,
holds a consistent database that simply lacks the last commits. Those lost
rows are spent budget. Each client host therefore keeps, per journal, the last
row it saw committed (journal id, seq, hash), and refuses a database that ends
before it or holds a different row there (docs/threat-model.md, "The
PostgreSQL journal").

Layout of the anchor directory (``DPGLM_ANCHOR_DIR``, default
``$XDG_STATE_HOME/dpglm/anchors``, i.e. ``~/.local/state/dpglm/anchors``):

- ``<journal id>.anchor``: the file journal's anchor format
  (:mod:`accounting.journal.anchor`), advanced after every commit this host makes or
  sees, never moved back: processes of one host serialise on ``flock``, which
  (unlike a POSIX lock) no other descriptor's close releases.
- ``by-location/<sha256 of server:port/db?journal=name>``: the journal id
  first opened at that location, written once. A journal missing at the
  location, or replaced by another id, while the anchor of the recorded id
  holds rows, is refused: it is a database restored from before the journal
  existed, and a new journal there would grant the spent budget again.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager

from accounting.journal.anchor import Anchor, AnchorFile, read_anchor
from accounting.journal.errors import JournalCorruptError, JournalDiskFullError, JournalReadOnlyError

__all__ = ["ClientAnchors", "default_anchor_dir"]


def default_anchor_dir() -> str:
    """``$DPGLM_ANCHOR_DIR``, else ``$XDG_STATE_HOME/dpglm/anchors`` (``~/.local/state`` when unset)."""
    chosen = os.environ.get("DPGLM_ANCHOR_DIR")
    if chosen:
        return chosen
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "dpglm", "anchors")


class ClientAnchors:
    """The anchors of one journal at one location, in ``directory`` (see the module docstring).

    ``shown`` is what errors name (the journal URL without its password).
    """

    def __init__(self, directory: str, location: str, shown: str) -> None:
        self.directory = os.path.abspath(directory)
        self.shown = shown
        self.location = location
        digest = hashlib.sha256(location.encode()).hexdigest()[:32]
        self._index = os.path.join(self.directory, "by-location", digest)

    def path(self, journal_id: str) -> str:
        """The anchor file of ``journal_id``."""
        return os.path.join(self.directory, f"{journal_id}.anchor")

    def read(self, journal_id: str) -> Anchor | None:
        """The anchor of ``journal_id`` on this host, or None if this host never anchored it."""
        path = self.path(journal_id)
        try:
            return read_anchor(path)
        except (ValueError, OSError) as error:
            if os.path.exists(path) and os.path.getsize(path) == 0:
                return None  # created, killed before its first record: nothing anchored yet
            raise JournalCorruptError(f"journal {self.shown}: its anchor {path} is unreadable ({error})") from None

    def recorded_id(self) -> str | None:
        """The journal id this host first opened at this location, if any."""
        try:
            with open(self._index, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise JournalCorruptError(f"journal {self.shown}: its anchor index {self._index} is unreadable "
                                      f"({error})") from None
        return lines[1] if len(lines) == 2 and lines[0] == self.location else None

    def check_missing(self) -> None:
        """Refuse to create a journal where this host saw one with charged rows."""
        known = self.recorded_id()
        anchored = None if known is None else self.read(known)
        if anchored is not None and anchored.seq > 0:
            raise JournalCorruptError(
                f"journal {self.shown} is missing from the database, but this host's anchor {self.path(known or '')} "
                f"records rows 1..{anchored.seq} of journal {known} there: the database was restored from before "
                "the journal, or the journal was dropped, and a new one would grant its spent budget again; restore "
                "it, or delete the anchor to start a new budget"
            )

    def check_replaced(self, journal_id: str) -> None:
        """Refuse a journal at this location whose id differs from the one this host recorded with rows."""
        known = self.recorded_id()
        if known is None or known == journal_id:
            return
        anchored = self.read(known)
        if anchored is not None and anchored.seq > 0:
            raise JournalCorruptError(
                f"journal {self.shown} is journal {journal_id}, but this host's anchor records rows "
                f"1..{anchored.seq} of journal {known} there: the journal was replaced (dropped and created again, "
                "or an older database image restored), which would grant its spent budget again; delete "
                f"{self.path(known)} to start a new budget"
            )

    def record_id(self, journal_id: str) -> None:
        """Remember ``journal_id`` as this location's journal (atomically; the first id with rows wins)."""
        if self.recorded_id() == journal_id:
            return
        with self._writing(self._index):
            self._record_id(journal_id)

    def _record_id(self, journal_id: str) -> None:
        folder = os.path.dirname(self._index)
        self._makedirs(folder)
        temporary = f"{self._index}.new-{os.getpid()}"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(f"{self.location}\n{journal_id}\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self._index)
        _fsync_directory(folder)

    def advance(self, anchor: Anchor) -> None:
        """Record ``anchor`` if it is beyond the recorded row; fsync'd before returning; never moves back."""
        with self._writing(self.path(anchor.journal_id)):
            self._advance(anchor)

    @contextmanager
    def _writing(self, path: str) -> Iterator[None]:
        """Turn a failed anchor write into the journal's one-line errors (disk full, read-only)."""
        try:
            yield
        except (JournalDiskFullError, JournalReadOnlyError, JournalCorruptError):
            raise
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise JournalDiskFullError(f"journal {self.shown}: the disk holding its anchor {path} is full "
                                           f"({error.strerror}): charge refused") from None
            raise JournalReadOnlyError(f"journal {self.shown}: cannot write its anchor {path} "
                                       f"({error.strerror}): charge refused") from None

    def _advance(self, anchor: Anchor) -> None:
        self._makedirs(self.directory)
        path = self.path(anchor.journal_id)
        created = not os.path.exists(path)
        lock = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one writer per host at a time; released when ``lock`` closes
            current = self.read(anchor.journal_id)
            if current is not None and current.seq >= anchor.seq:
                return
            record = AnchorFile(path)
            try:
                if current is None:
                    record.reset(anchor)
                else:
                    record.write(anchor)
            finally:
                record.close()
        finally:
            os.close(lock)
        if created:
            _fsync_directory(self.directory)

    def _makedirs(self, folder: str) -> None:
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as error:
            raise JournalReadOnlyError(
                f"journal {self.shown}: cannot create the anchor directory {folder} ({error.strerror}); "
                "set DPGLM_ANCHOR_DIR to a writable directory on this host"
            ) from None


def _fsync_directory(folder: str) -> None:
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
