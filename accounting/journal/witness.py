"""The host's witness: each journal's last durable row, kept outside the journal's directory and server.

An anchor kept *with* a journal (``PATH.anchor`` beside a file, or the server's
own head row) is restored together with it: put back a backup of ``.db``,
``-wal`` and ``.anchor`` taken together, or an older image of a database, and
the journal and its anchor agree on an older head — the charges made since are
gone, and their budget would be granted again (issue 30). The witness is the
same record kept where such a backup does not reach: in this host's state
directory, one file per journal id (docs/threat-model.md, "Restores: what is
detected"). A journal that ends before its witness, or holds another row
there, is refused at open and in every transaction.

Layout of the directory (``DPGLM_ANCHOR_DIR``, default
``$XDG_STATE_HOME/dpglm/anchors``, i.e. ``~/.local/state/dpglm/anchors``):

- ``<journal id>.anchor``: the anchor format (:mod:`accounting.journal.anchor`),
  advanced after every charge this host makes once its row is durable, never
  moved back (the processes of the host take turns on its ``flock``), flushed
  as :class:`~accounting.journal.anchor.AnchorFile` says (about once a second
  of charging, and at close).
- ``by-location/<sha256 of the location>``: the journal id first seen at a
  location (a file journal's real path, or server:port/db?journal=name),
  written once. A journal missing at its location, or replaced there by another
  id, while the witness of the recorded id holds rows, is refused: it was
  deleted, or an image from before it existed was restored, and a new journal
  there would grant the spent budget again.

Keyed by journal id, a witness is found again if the directory moves (set
``DPGLM_ANCHOR_DIR`` to its new place) and whatever path or URL reaches the
journal. It covers what a restore of the journal's own directory or server
cannot rewind; a restore of this directory too (a whole-machine snapshot, a
home directory restored with the journal) is not detected.
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from accounting.journal.anchor import Anchor, AnchorFile, read_anchor
from accounting.journal.errors import JournalCorruptError, JournalDiskFullError, JournalReadOnlyError

__all__ = ["RecentHashes", "Witness", "default_anchor_dir"]


def default_anchor_dir() -> str:
    """``$DPGLM_ANCHOR_DIR``, else ``$XDG_STATE_HOME/dpglm/anchors`` (``~/.local/state`` when unset)."""
    chosen = os.environ.get("DPGLM_ANCHOR_DIR")
    if chosen:
        return chosen
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "dpglm", "anchors")


class Witness:
    """This host's witness of the journal at one location, in ``directory`` (see the module docstring).

    ``location`` identifies where the journal lives (``"file:" + real path``,
    or ``host:port/db?journal=name``); ``shown`` is what errors name (the path,
    or the URL without its password).
    """

    def __init__(self, directory: str, location: str, shown: str) -> None:
        self.directory = os.path.abspath(directory)
        self.shown = shown
        self.location = location
        digest = hashlib.sha256(location.encode()).hexdigest()[:32]
        self._index = os.path.join(self.directory, "by-location", digest)
        self._file: AnchorFile | None = None

    def path(self, journal_id: str) -> str:
        """The witness file of ``journal_id``."""
        return os.path.join(self.directory, f"{journal_id}.anchor")

    def read(self, journal_id: str) -> Anchor | None:
        """The witness of ``journal_id`` on this host, or None if this host never recorded it."""
        path = self.path(journal_id)
        try:
            if self._file is not None and self._file.path == path:
                return self._file.read()
            return read_anchor(path)
        except (ValueError, OSError) as error:
            if os.path.exists(path) and os.path.getsize(path) == 0:
                return None  # created, killed before its first record: nothing recorded yet
            raise JournalCorruptError(f"journal {self.shown}: its witness {path} is unreadable ({error})") from None

    def recorded_id(self) -> str | None:
        """The journal id this host first recorded at this location, if any."""
        try:
            with open(self._index, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise JournalCorruptError(f"journal {self.shown}: its witness index {self._index} is unreadable "
                                      f"({error})") from None
        return lines[1] if len(lines) == 2 and lines[0] == self.location else None

    def check_missing(self) -> None:
        """Refuse to create a journal where this host witnessed one with charged rows."""
        known = self.recorded_id()
        witnessed = None if known is None else self.read(known)
        if witnessed is not None and witnessed.seq > 0:
            raise JournalCorruptError(
                f"journal {self.shown} is missing, but this host's witness {self.path(known or '')} records rows "
                f"1..{witnessed.seq} of journal {known} there: it was deleted, or restored from before it existed, "
                "and a new journal there would grant its spent budget again; restore it, or delete the witness to "
                "start a new budget"
            )

    def check_replaced(self, journal_id: str) -> None:
        """Refuse a journal at this location whose id differs from the one this host recorded with rows."""
        known = self.recorded_id()
        if known is None or known == journal_id:
            return
        witnessed = self.read(known)
        if witnessed is not None and witnessed.seq > 0:
            raise JournalCorruptError(
                f"journal {self.shown} is journal {journal_id}, but this host's witness records rows "
                f"1..{witnessed.seq} of journal {known} there: the journal was replaced (deleted and created "
                "again, or an older image restored), which would grant its spent budget again; delete "
                f"{self.path(known)} to start a new budget"
            )

    def check(self, witnessed: Anchor | None, seq: int, digest_at: dict[int, str] | list[str] | None,
              how: str) -> None:
        """Refuse a journal that ends at ``seq`` before ``witnessed``, or holds another row where it points.

        ``witnessed`` is :meth:`read` taken *before* the rows were read (a later
        read could see rows committed since). ``digest_at[k]`` is the hash of
        row k (None: only the end is checked). ``how`` says how rows get lost there.
        """
        if witnessed is None:
            return
        if witnessed.seq > seq:
            raise JournalCorruptError(
                f"journal {self.shown} ends at row {seq} but this host's witness {self.path(witnessed.journal_id)} "
                f"records row {witnessed.seq}: rows {seq + 1}..{witnessed.seq} were lost ({how}); they are spent "
                "budget, so it is not charged"
            )
        if digest_at is not None and digest_at[witnessed.seq] != witnessed.digest:
            raise JournalCorruptError(f"journal {self.shown}: row {witnessed.seq} is not the row this host's "
                                      "witness recorded: this is another copy of the journal, which has diverged")

    def record_id(self, journal_id: str) -> None:
        """Remember ``journal_id`` as this location's journal (atomically; written once)."""
        if self.recorded_id() == journal_id:
            return
        with self._writing(self._index):
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
        """Record ``anchor`` (a durable row) if it is beyond the recorded one; never move back.

        The file stays open for the next advance; it is flushed about once a
        second of charging (:data:`~accounting.journal.anchor.SYNC_SECONDS`) and at :meth:`close`.
        """
        path = self.path(anchor.journal_id)
        with self._writing(path):
            if self._file is None or self._file.path != path:
                self._makedirs(self.directory)
                created = not os.path.exists(path)
                if self._file is not None:
                    self._file.close()
                    self._file = None
                self._file = AnchorFile(path)
                if created:
                    _fsync_directory(self.directory)
            self._file.advance(anchor)

    def close(self) -> None:
        """Flush what was written since the last flush, and close the witness file."""
        if self._file is not None:
            self._file.close()
            self._file = None

    @contextmanager
    def _writing(self, path: str) -> Iterator[None]:
        """Turn a failed witness write into the journal's one-line errors (disk full, read-only)."""
        try:
            yield
        except (JournalDiskFullError, JournalReadOnlyError, JournalCorruptError):
            raise
        except ValueError as error:  # no valid slot left in the file
            raise JournalCorruptError(f"journal {self.shown}: its witness {path} is unreadable ({error})") from None
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise JournalDiskFullError(f"journal {self.shown}: the disk holding its witness {path} is full "
                                           f"({error.strerror}): charge refused") from None
            raise JournalReadOnlyError(f"journal {self.shown}: cannot write its witness {path} "
                                       f"({error.strerror}): charge refused; set DPGLM_ANCHOR_DIR to a writable "
                                       "directory on this host") from None

    def _makedirs(self, folder: str) -> None:
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as error:
            raise JournalReadOnlyError(
                f"journal {self.shown}: cannot create the witness directory {folder} ({error.strerror}); "
                "set DPGLM_ANCHOR_DIR to a writable directory on this host"
            ) from None


def _fsync_directory(folder: str) -> None:
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


class RecentHashes:
    """The hashes a store's next witness checks may ask for, without keeping one per row of the journal.

    A witness read before the rows points at a row at or after the one it
    pointed at last time (it never moves back): ``witnessed`` is that row and
    its hash, ``recent`` the hashes of the rows read or appended after it (the
    oldest dropped past ``limit``). :meth:`digest_at` answers from them, and
    otherwise reads the row from the journal (``fetch``): a row before the
    snapshot a store opened from, or one dropped.
    """

    def __init__(self, header: str, limit: int = 10_000) -> None:
        self.header = header
        self.witnessed = (0, header)
        self.limit = limit
        self.recent: OrderedDict[int, str] = OrderedDict()

    def remember(self, seq: int, digest: str) -> None:
        """Row ``seq`` (read or appended) has hash ``digest``."""
        if seq > self.witnessed[0]:
            self.recent[seq] = digest
            if len(self.recent) > self.limit:
                self.recent.popitem(last=False)

    def digest_at(self, seq: int, last: tuple[int, str], fetch: Callable[[int], str]) -> str:
        """The hash of row ``seq`` (at most ``last``, the last row read: (seq, hash))."""
        if seq == last[0]:
            return last[1]
        if seq == self.witnessed[0]:
            return self.witnessed[1]
        if seq in self.recent:
            return self.recent[seq]
        return self.header if seq == 0 else fetch(seq)

    def checked(self, seq: int, digest: str) -> None:
        """The witness pointed at row ``seq`` (hash ``digest``) and was found there: forget the rows up to it."""
        self.witnessed = (seq, digest)
        while self.recent and next(iter(self.recent)) <= seq:
            self.recent.popitem(last=False)
