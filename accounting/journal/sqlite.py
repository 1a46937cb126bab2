"""The file journal: an append-only, hash-chained SQLite file shared by every ledger on one host.

:class:`Journal` implements the store contract of :mod:`accounting.journal.store`
(read that first: ``path``, ``journal_id``, ``read_only``, ``read_meta()``,
``events()``, ``transaction()``, ``close()``). What it guarantees
(docs/threat-model.md has the whole argument, and the tests):

- **Charging is a transaction, not a held lock.** Any number of ledgers, in
  any number of processes and threads, may have one journal open. Each charge
  is: ``flock`` on ``REALPATH.lock`` (:mod:`accounting.journal.sidelock`; FIFO-like
  waiting, never released by an unrelated close) → ``BEGIN IMMEDIATE`` → read
  the rows others added since this store last looked, checking their chain →
  (the ledger replays them and checks its budget) → ``INSERT`` the chained row
  → ``COMMIT`` (WAL, ``synchronous=FULL``: the ``-wal`` is fsync'd) → write
  the anchor if its seq is greater than the anchored one, ``fdatasync`` →
  release the lock. Two flushes per charge, plus a share of SQLite's
  checkpoints.
- **No descriptor of ours on the database.** SQLite's locks are POSIX locks,
  which the kernel releases when the process closes *any* descriptor of the
  file; that is how a failed second open let issue 21's overspend through.
  This module never opens the ``.db``, ``-wal`` or ``-shm`` itself: identity
  checks use ``os.stat``, and only a file under 512 bytes (never a journal) is
  read directly, to say what it is. User code in the same process that opens
  and closes the ``.db`` (``open()``, ``sqlite3.connect``) can still drop
  SQLite's locks; the side lock still serialises ledgers, and the PRIMARY KEY
  on ``seq`` refuses a second row with the same number.
- **Never reopened as fresh.** A path that exists is a journal or an error: an
  empty, truncated, foreign or damaged file is refused with a one-line
  :class:`JournalCorruptError` naming the path. A new journal appears with its
  header already in it (written to a temporary file, then hard-linked into
  place, under the side lock).
- **Chained rows.** The header holds the format, a random journal id, the
  budget and the relation, the real path the journal was created at, and a hash
  of them; each row holds the hash of the previous row (the header's for row 1)
  and SHA-256 over that hash, its seq and its stored text. Every row is checked
  when it is first read, at open or inside a transaction.
- **One anchor per journal** (:mod:`accounting.journal.anchor`): ``REALPATH.anchor``,
  symlinks resolved, holding the journal id and the last row. A database ahead
  of its anchor (a crash between commit and anchor) is re-anchored; an anchor
  ahead of the database (rows lost: a cut, an older copy, a lost ``-wal``) is
  refused, at open and in every transaction.
- **Copies and moves.** A journal may be charged only at the real path it was
  created at, and only while it has one hard link (:class:`JournalPathError`):
  ``cp`` makes a read-only backup, ``mv`` makes a journal that can be shown but
  not charged until it is moved back; a copy can never fork the budget.
- **Local disks only**: a journal on NFS, SMB or sshfs is refused for charging.
- **Read-only.** ``Journal(path, read_only=True)`` opens with SQLite's
  ``mode=ro`` (``immutable=1`` when the file or directory is not writable and
  no ``-wal`` is left), takes no lock, writes nothing, and refuses appends.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import stat
import urllib.parse
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from accounting.journal.anchor import Anchor, AnchorFile, _identity, anchor_path, read_anchor
from accounting.journal.errors import (
    JournalAnchorWarning,
    JournalBusyError,
    JournalCorruptError,
    JournalDiskFullError,
    JournalMismatchError,
    JournalPathError,
    JournalReadOnlyError,
    JournalReplacedError,
    NetworkFilesystemError,
)
from accounting.journal.rows import (
    FORMAT,
    ChainReader,
    canonical,
    header_hash,
    row_hash,
    sqlite_failure,
)
from accounting.journal.sidelock import SideLock, refuse_network_filesystem
from accounting.journal.store import Event

__all__ = [
    "FORMAT",
    "Journal",
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

_SQLITE_MAGIC = b"SQLite format 3\x00"
# the chain's hashes under the names other stores import (accounting.journal.postgres)
_canonical, _header_hash, _row_hash = canonical, header_hash, row_hash
_BUSY_TIMEOUT = 30.0  # seconds SQLite waits for a writer that does not take the side lock


def _writable(path: str) -> bool:
    """Whether ``path`` may be written: a write permission bit is set and ``os.access`` agrees.

    Root passes ``os.access`` on any file, so the mode bits are read too: a
    journal its owner made read-only (``chmod a-w``) is treated as read-only
    even for root.
    """
    return bool(os.stat(path).st_mode & 0o222) and os.access(path, os.W_OK)


def _disk_full(path: str, error: OSError) -> Exception:
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return JournalDiskFullError(f"journal {path}: the disk is full ({error.strerror}): charge refused")
    return error


class _Transaction:
    """What :meth:`Journal.transaction` yields (:class:`accounting.journal.store.Transaction`)."""

    def __init__(self, journal: Journal, new_events: list[Event]) -> None:
        self._journal = journal
        self.new_events = new_events
        self.last: tuple[int, str] | None = None  # (seq, hash) of the last row appended here

    def append(self, kind: str, account: str, payload: dict[str, Any]) -> int:
        journal = self._journal
        if journal.read_only:
            raise JournalReadOnlyError(f"journal {journal.path} was opened read-only: it can be shown, not charged")
        seq, previous = self.last if self.last is not None else (journal._chain.seq, journal._chain.digest)
        seq += 1
        text = json.dumps(payload)
        digest = row_hash(previous, seq, kind, account, text)
        assert journal._conn is not None
        try:
            journal._conn.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)",
                                  (seq, kind, account, text, previous, digest))
        except sqlite3.Error as error:
            raise sqlite_failure(journal.path, error) from None
        self.last = (seq, digest)
        return seq


class Journal:
    """The durable, chained event log of a file journal; see the module docstring.

    Parameters
    ----------
    path : str or os.PathLike
        SQLite file. If it does not exist it is created with ``create`` as its
        header; if it exists it must be an intact dpglm journal.
    create : dict, optional
        Header (budget, relation) of a new journal; None: the file must exist.
    read_only : bool
        Open with SQLite's ``mode=ro`` (no lock taken, nothing written);
        appends raise :class:`JournalReadOnlyError`.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: dict[str, Any] | None = None,
                 read_only: bool = False) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"journal must be a file path (str or PathLike) or None, got {type(path).__name__}")
        self.path = os.fspath(path)
        self.real_path = os.path.realpath(self.path)
        self.anchor_path = anchor_path(self.real_path)
        self.read_only = bool(read_only)
        self._conn: sqlite3.Connection | None = None
        self._lock: SideLock | None = None
        self._anchor: AnchorFile | None = None
        self._identity: tuple[int, int] | None = None
        self._wal_identity: tuple[int, int] | None = None
        self._chain = ChainReader(self.path)
        try:
            self._open_or_create(create)
        except BaseException:
            self.close()
            raise

    # ----- opening and creating ------------------------------------------------------------------
    def _open_or_create(self, create: dict[str, Any] | None) -> None:
        folder = os.path.dirname(self.real_path)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"journal {self.path}: its directory {folder} does not exist")
        exists = os.path.lexists(self.real_path)
        if not exists and (create is None or self.read_only):
            raise FileNotFoundError(f"journal {self.path!r} does not exist")
        if self.read_only:
            self._open()
            return
        refuse_network_filesystem(self.path, "journal")
        if exists:
            self._refuse_read_only()
        elif not _writable(folder):
            raise JournalReadOnlyError(f"journal {self.path}: its directory {folder} is read-only, cannot create it")
        try:
            self._lock = SideLock(self.real_path + ".lock")
            self._lock.acquire()
        except OSError as error:
            raise _disk_full(self.path, error) from None
        try:
            if not os.path.lexists(self.real_path):
                assert create is not None
                self._create(create)
            self._open()
        finally:
            self._lock.release()

    def _create(self, meta: dict[str, Any]) -> None:
        """Write a new journal with its header to a temporary file, then link it into place (under the lock)."""
        anchored = self._read_anchor(self.anchor_path)
        if anchored is not None and anchored.seq > 0:
            raise JournalCorruptError(
                f"journal {self.path} is missing but its anchor {self.anchor_path} records rows 1..{anchored.seq} "
                f"of journal {anchored.journal_id}: it was deleted or moved, and a new journal there would grant "
                "its spent budget again; restore it, or delete the anchor too to start a new budget"
            )
        journal_id = uuid.uuid4().hex
        meta_text = canonical(meta)
        digest = header_hash(journal_id, meta_text, self.real_path)
        temporary = f"{self.real_path}.new-{journal_id}"
        try:
            conn = sqlite3.connect(temporary, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("CREATE TABLE header (format TEXT NOT NULL, journal_id TEXT NOT NULL, "
                             "meta TEXT NOT NULL, origin TEXT NOT NULL, hash TEXT NOT NULL)")
                conn.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, account TEXT NOT NULL, "
                             "payload TEXT NOT NULL, prev TEXT NOT NULL, hash TEXT NOT NULL)")
                conn.execute("INSERT INTO header VALUES (?, ?, ?, ?, ?)",
                             (FORMAT, journal_id, meta_text, self.real_path, digest))
                conn.execute("COMMIT")
            finally:
                conn.close()  # the last connection: checkpointed into the file, -wal removed
            os.link(temporary, self.real_path)  # never replaces; we hold the side lock
            anchor = AnchorFile(self.anchor_path)
            try:
                anchor.reset(Anchor(journal_id, 0, digest))
            finally:
                anchor.close()
        except sqlite3.Error as error:
            raise sqlite_failure(self.path, error) from None
        except OSError as error:
            raise _disk_full(self.path, error) from None
        finally:
            for leftover in (temporary, temporary + "-wal", temporary + "-shm", temporary + "-journal"):
                if os.path.lexists(leftover):
                    os.unlink(leftover)
        directory = os.open(os.path.dirname(self.real_path), os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def _stat(self) -> os.stat_result:
        status = os.stat(self.real_path)
        if not stat.S_ISREG(status.st_mode):
            raise JournalCorruptError(f"journal {self.path} is not a dpglm journal (not a regular file)")
        size = status.st_size
        if size == 0:
            raise JournalCorruptError(
                f"journal {self.path} is empty (0 bytes): not a dpglm journal, and never reopened as a fresh budget; "
                f"restore it, or delete it (and {os.path.basename(self.anchor_path)}) to start over"
            )
        if size < 512:  # smaller than one SQLite page: never a journal, so reading it cannot drop a live lock
            with open(self.real_path, "rb") as handle:
                first = handle.read(100)
            cut = first == _SQLITE_MAGIC[: len(first)] or first.startswith(_SQLITE_MAGIC)
            what = f"truncated to {size} byte{'s' if size > 1 else ''}" if cut else "not an SQLite file"
            raise JournalCorruptError(f"journal {self.path} is not a dpglm journal ({what})")
        return status

    def _check_links(self, status: os.stat_result) -> None:
        if status.st_nlink > 1:
            raise JournalPathError(
                f"journal {self.path} has {status.st_nlink} hard links: each name could be restored or copied "
                "apart from the others and fork the budget; remove the other links (find -samefile) to charge it"
            )

    def _remove_creation_leftovers(self, status: os.stat_result) -> bool:
        """Unlink ``REALPATH.new-*`` names of this very file: a crash between link and unlink while creating.

        Called under the side lock, when no creation can be in progress.
        """
        folder, name = os.path.split(self.real_path)
        removed = False
        for entry in os.scandir(folder):
            if entry.name.startswith(name + ".new-") and _identity(entry.stat(follow_symlinks=False)) == _identity(
                    status):
                os.unlink(entry.path)
                removed = True
        return removed

    def _connect(self) -> sqlite3.Connection:
        if not self.read_only:
            return sqlite3.connect(self.real_path, timeout=_BUSY_TIMEOUT, isolation_level=None,
                                   check_same_thread=False)
        uri = f"file:{urllib.parse.quote(self.real_path)}?mode=ro"
        folder = os.path.dirname(self.real_path)
        wal = self.real_path + "-wal"
        if not (_writable(self.real_path) and _writable(folder)) and not (
                os.path.exists(wal) and os.path.getsize(wal) > 0):
            uri += "&immutable=1"  # nothing can write it, and no -wal is left: read the file as it is
        return sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)

    def _open(self) -> None:
        status = self._stat()
        if not self.read_only:
            if status.st_nlink > 1 and self._remove_creation_leftovers(status):
                status = self._stat()
            self._check_links(status)
        wal = self.real_path + "-wal"
        checkpointed = not os.path.exists(wal) or os.path.getsize(wal) == 0
        anchored = self._read_anchor(self.anchor_path)
        try:
            self._conn = self._connect()
            self._conn.execute("BEGIN")
            self.meta, self.journal_id = self._chain.read_header(self._conn, check_origin=(
                None if self.read_only else self.real_path))
            at = anchored.seq if anchored is not None and anchored.journal_id == self.journal_id else None
            self._events = self._chain.read_rows(self._conn, want=at)
            if checkpointed:
                self._chain.check_size(self._conn, status.st_size)
            problem = self._conn.execute("PRAGMA quick_check").fetchall()[0][0]
            if problem != "ok":
                raise JournalCorruptError(f"journal {self.path} is damaged (SQLite quick_check: {problem}); "
                                          f"rows 1..{self._chain.seq} read back intact")
            self._conn.execute("COMMIT")
            if not self.read_only:
                if self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    raise JournalCorruptError(f"journal {self.path} is not in WAL mode: not a {FORMAT} journal")
                self._conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as error:
            raise sqlite_failure(self.path, error, self._chain.seq) from None
        after = os.stat(self.real_path)
        if _identity(after) != _identity(status):
            raise JournalReplacedError(f"journal {self.path} was replaced while it was being opened; open it again")
        self._identity = _identity(status)
        if not self.read_only and os.path.exists(self.real_path + "-wal"):  # kept until the last connection closes
            self._wal_identity = _identity(os.stat(self.real_path + "-wal"))
        self._check_anchor(anchored)
        self._check_unresolved_anchor()

    def _refuse_read_only(self) -> None:
        hint = (f"show it with `dpglm ledger show {self.path}` (Ledger.from_journal(path, read_only=True)); "
                "it cannot be charged")
        if not _writable(self.real_path):
            mode = stat.S_IMODE(os.stat(self.real_path).st_mode)
            raise JournalReadOnlyError(f"journal {self.path} is read-only (file mode {mode:04o}): {hint}")
        folder = os.path.dirname(self.real_path)
        if not _writable(folder):
            raise JournalReadOnlyError(f"journal {self.path} is in a read-only directory ({folder}): {hint}")

    # ----- the anchor ----------------------------------------------------------------------------
    def _read_anchor(self, where: str) -> Anchor | None:
        try:
            return read_anchor(where)
        except (ValueError, OSError) as error:
            raise JournalCorruptError(f"journal {self.path}: its anchor is unreadable ({error})") from None

    def _lost(self, anchored: Anchor, where: str) -> JournalCorruptError:
        return JournalCorruptError(
            f"journal {self.path} ends at row {self._chain.seq} but its anchor records row {anchored.seq}: "
            f"rows {self._chain.seq + 1}..{anchored.seq} were lost (cut at a row boundary, an older copy restored, or "
            f"its -wal lost; anchor {where}); they are spent budget, so it is not reopened"
        )

    def _check_anchor(self, anchored: Anchor | None) -> None:
        """The journal must hold the row its anchor recorded; a journal ahead of its anchor is re-anchored."""
        current = Anchor(self.journal_id, self._chain.seq, self._chain.digest)
        if anchored is None:
            warnings.warn(f"journal {self.path} has no anchor {self.anchor_path}: a rollback to an older copy "
                          "cannot be detected this time" + ("" if self.read_only else "; a new anchor is written"),
                          JournalAnchorWarning, stacklevel=6)
        elif anchored.journal_id != self.journal_id:
            raise JournalCorruptError(f"journal {self.path}: its anchor {self.anchor_path} belongs to another "
                                      f"journal ({anchored.journal_id}, this is {self.journal_id}): the file was "
                                      "replaced by another journal")
        elif anchored.seq > self._chain.seq:
            raise self._lost(anchored, self.anchor_path)
        elif self._chain.wanted != anchored.digest:
            raise JournalCorruptError(f"journal {self.path}: row {anchored.seq} is not the row its anchor recorded: "
                                      "this is another copy of the journal, which has diverged")
        if self.read_only:
            return
        try:
            self._anchor = AnchorFile(self.anchor_path)
            if anchored is None or anchored.seq < self._chain.seq:
                self._anchor.reset(current)
        except OSError as error:
            raise _disk_full(self.path, error) from None

    def _check_unresolved_anchor(self) -> None:
        """An anchor left at the path as given (through a symlink) must not record rows this journal lacks."""
        given = anchor_path(os.path.abspath(self.path))
        if given == self.anchor_path or not os.path.lexists(given):
            return
        stray = self._read_anchor(given)
        if stray is not None and stray.journal_id == self.journal_id and stray.seq > self._chain.seq:
            raise self._lost(stray, given)

    # ----- the store contract --------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any]:
        """The header's budget and relation (verified at open)."""
        return dict(self.meta)

    def events(self) -> list[Event]:
        """Every row present at open, verified: (seq, kind, account path, payload)."""
        return list(self._events)

    def _check_identity(self) -> None:
        """Refuse if the path no longer names the file opened (deleted or replaced), or has gained a hard link.

        The ``-wal`` too: SQLite keeps it while any connection is open, so one
        deleted under us would take the next commits with it when it closes.
        """
        for path, held, what in ((self.real_path, self._identity, "journal"),
                                 (self.anchor_path, self._anchor.identity if self._anchor else None, "anchor"),
                                 (self.real_path + "-wal", self._wal_identity, "write-ahead log")):
            if held is None:
                continue
            try:
                now = os.stat(path)
            except FileNotFoundError:
                raise JournalReplacedError(
                    f"{what} {path} was deleted while this ledger held it: charge refused (a new ledger there "
                    "could grant the spent budget again); restore the file, or close this ledger"
                ) from None
            if _identity(now) != held:
                raise JournalReplacedError(f"{what} {path} was replaced by another file while this ledger held "
                                           "it: charge refused; close this ledger")
            if what == "journal":
                self._check_links(now)

    def _check_anchored(self) -> None:
        """Inside a transaction: the anchor must not be ahead of the rows committed."""
        assert self._anchor is not None
        try:
            anchored = self._anchor.read()
        except ValueError as error:
            raise JournalCorruptError(f"journal {self.path}: its anchor is unreadable ({error})") from None
        if anchored is not None and anchored.journal_id != self.journal_id:
            raise JournalCorruptError(f"journal {self.path}: its anchor {self.anchor_path} now belongs to another "
                                      f"journal ({anchored.journal_id})")
        if anchored is not None and anchored.seq > self._chain.seq:
            raise self._lost(anchored, self.anchor_path)

    @contextmanager
    def transaction(self) -> Iterator[_Transaction]:
        """:meth:`accounting.journal.store.JournalStore.transaction`: lock, read new rows, append, commit, anchor."""
        conn = self._conn
        if conn is None:
            raise RuntimeError(f"journal {self.path} is closed")
        if self.read_only:
            try:
                conn.execute("BEGIN")
                new = self._chain.read_rows(conn)
                conn.execute("COMMIT")
            except sqlite3.Error as error:
                raise sqlite_failure(self.path, error, self._chain.seq) from None
            yield _Transaction(self, new)
            return
        assert self._lock is not None and self._anchor is not None
        self._lock.acquire()
        try:
            self._check_identity()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as error:
                raise sqlite_failure(self.path, error) from None
            committed = False
            try:
                transaction = _Transaction(self, self._chain.read_rows(conn))
                self._check_anchored()
                yield transaction
                conn.execute("COMMIT")
                committed = True
                if transaction.last is not None:
                    seq, digest = transaction.last
                    self._anchor.write(Anchor(self.journal_id, seq, digest))
                    self._chain.advance(seq, digest)
            except sqlite3.Error as error:
                raise sqlite_failure(self.path, error, self._chain.seq) from None
            except OSError as error:
                raise _disk_full(self.path, error) from None
            finally:
                if not committed:
                    with contextlib.suppress(sqlite3.Error):  # a failed COMMIT may have rolled back already
                        conn.execute("ROLLBACK")
        finally:
            self._lock.release()

    def close(self) -> None:
        """Close the connection (under the side lock) and the side files; the journal stays as it is on disk.

        The last connection to close checkpoints the ``-wal`` into the file and
        deletes it; under the side lock that never happens in the middle of
        another ledger's transaction.
        """
        if self._conn is not None:
            if self._lock is not None:
                self._lock.acquire()
            try:
                self._conn.close()
            finally:
                if self._lock is not None:
                    self._lock.release()
            self._conn = None
        for side in (self._anchor, self._lock):
            if side is not None:
                side.close()
        self._anchor = None
        self._lock = None

