"""The file journal: an append-only, hash-chained SQLite file shared by every ledger on one host.

:class:`Journal` implements the store contract of :mod:`accounting.journal.store`
(read that first: ``path``, ``journal_id``, ``read_only``, ``read_meta()``,
``snapshot()``, ``tail()``, ``history()``, ``transaction()``, ``close()``). What it guarantees
(docs/threat-model.md has the whole argument, and the tests):

- **Charging is a transaction, not a held lock.** Any number of ledgers, in
  any number of processes and threads, may have one journal open. Each charge
  is: ``flock`` on ``REALPATH.lock`` (:mod:`accounting.journal.sidelock`; FIFO-like
  waiting, never released by an unrelated close) → ``BEGIN IMMEDIATE`` → read
  the rows others added since this store last looked, checking their chain →
  (the ledger replays them and checks its budget) → ``INSERT`` the chained row
  → ``COMMIT`` (WAL, ``synchronous=NORMAL``: the frames are written, not yet
  flushed) → release the lock → ``fdatasync`` the ``-wal`` → advance the
  anchor and the host's witness (written, flushed about once a second:
  :data:`~accounting.journal.anchor.SYNC_SECONDS`) → the receipt. One
  flush per charge, outside the lock, so the flushes of several processes
  overlap (the kernel groups them), plus a share of SQLite's checkpoints.
- **One descriptor of ours, on the ``-wal`` only.** SQLite's locks are POSIX
  locks, which the kernel releases when the process closes *any* descriptor of
  the locked file; that is how a failed second open let issue 21's overspend
  through. This module never opens the ``.db`` or ``-shm`` (where SQLite's
  locks are) itself: identity checks use ``os.stat``, and only a file under
  512 bytes (never a journal) is read directly, to say what it is. It keeps
  one descriptor of the ``-wal``, on which SQLite takes no lock, to flush it.
  User code in the same process that opens and closes the ``.db`` (``open()``,
  ``sqlite3.connect``) can still drop SQLite's locks; the side lock still
  serialises ledgers, and the PRIMARY KEY on ``seq`` refuses a second row with
  the same number.
- **Never reopened as fresh.** A path that exists is a journal or an error: an
  empty, truncated, foreign or damaged file is refused with a one-line
  :class:`JournalCorruptError` naming the path. A new journal appears with its
  header already in it (written to a temporary file, then hard-linked into
  place, under the side lock).
- **Chained rows.** The header holds the format, a random journal id, the
  budget and the relation, the real path the journal was created at, and a hash
  of them; each row holds the hash of the previous row (the header's for row 1)
  and SHA-256 over that hash, its seq and its stored text. Opening reads the
  header, the last snapshot row (checked against its own contents) and the rows
  after it, chained from it (:mod:`accounting.journal.snapshot`); every row is
  checked when it is first read, at open or inside a transaction.
  :meth:`Journal.history` reads and checks every row from the header, and runs
  SQLite's ``quick_check`` (``dpglm ledger verify``).
- **One anchor per journal** (:mod:`accounting.journal.anchor`): ``REALPATH.anchor``,
  symlinks resolved, holding the journal id and the last durable row. A
  database ahead of its anchor (a crash between commit and anchor) is
  re-anchored; an anchor ahead of the database (rows lost: a cut, an older
  copy, a lost ``-wal``) is refused, at open and in every transaction.
- **The host's witness** (:mod:`accounting.journal.witness`): the same record
  kept outside the journal's directory, in ``DPGLM_ANCHOR_DIR``, so that a
  backup of ``.db``, ``-wal`` and ``.anchor`` restored together is refused too.
  A journal with rows and no witness on this host is opened with a
  :class:`JournalAnchorWarning` and witnessed from then on.
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
import json
import os
import sqlite3
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from accounting.journal.anchor import Anchor, AnchorFile, _datasync, _identity, anchor_path, read_anchor
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
    warn_anchor,
)
from accounting.journal.paths import (
    check_links,
    disk_full,
    refuse_read_only,
    remove_creation_leftovers,
    stat_journal,
    writable,
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
from accounting.journal.witness import Witness, default_anchor_dir

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

# the chain's hashes under the names other stores import (accounting.journal.postgres)
_canonical, _header_hash, _row_hash = canonical, header_hash, row_hash
_BUSY_TIMEOUT = 30.0  # seconds SQLite waits for a writer that does not take the side lock
_KEEP = 2000  # rows after the last snapshot kept from the open for the ledger's replay (more: read again)


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
    anchor_dir : str, optional
        This host's witness directory (default :func:`accounting.journal.witness.default_anchor_dir`).
    """

    def __init__(self, path: str | os.PathLike[str], *, create: dict[str, Any] | None = None,
                 read_only: bool = False, anchor_dir: str | None = None) -> None:
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
        self._wal = -1  # our descriptor of the -wal, flushed after each commit (SQLite locks nothing there)
        self._chain = ChainReader(self.path)
        self._snapshot: Event | None = None  # the last snapshot row at open
        self._tail_from = (0, "")  # (seq, hash) the rows after the snapshot chain from
        self._opened = (0, "")  # (seq, hash) of the last row at open
        self._tail: list[Event] | None = None  # the rows after the snapshot, if at most _KEEP
        self.witness = Witness(anchor_dir or default_anchor_dir(), "file:" + self.real_path, self.path)
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
            refuse_read_only(self.path, self.real_path)
        elif not writable(folder):
            raise JournalReadOnlyError(f"journal {self.path}: its directory {folder} is read-only, cannot create it")
        try:
            self._lock = SideLock(self.real_path + ".lock")
            self._lock.acquire()
        except OSError as error:
            raise disk_full(self.path, error) from None
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
        self.witness.check_missing()
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
            raise disk_full(self.path, error) from None
        finally:
            for leftover in (temporary, temporary + "-wal", temporary + "-shm", temporary + "-journal"):
                if os.path.lexists(leftover):
                    os.unlink(leftover)
        directory = os.open(os.path.dirname(self.real_path), os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def _connect(self) -> sqlite3.Connection:
        if not self.read_only:
            return sqlite3.connect(self.real_path, timeout=_BUSY_TIMEOUT, isolation_level=None,
                                   check_same_thread=False)
        uri = f"file:{urllib.parse.quote(self.real_path)}?mode=ro"
        folder = os.path.dirname(self.real_path)
        wal = self.real_path + "-wal"
        if not (writable(self.real_path) and writable(folder)) and not (
                os.path.exists(wal) and os.path.getsize(wal) > 0):
            uri += "&immutable=1"  # nothing can write it, and no -wal is left: read the file as it is
        return sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)

    def _open(self) -> None:
        status = stat_journal(self.path, self.real_path)
        if not self.read_only:
            if status.st_nlink > 1 and remove_creation_leftovers(self.real_path, status):
                status = stat_journal(self.path, self.real_path)
            check_links(self.path, status)
        wal = self.real_path + "-wal"
        checkpointed = not os.path.exists(wal) or os.path.getsize(wal) == 0
        anchored = self._read_anchor(self.anchor_path)
        try:
            self._conn = self._connect()
            self._conn.execute("BEGIN")
            self.meta, self.journal_id = self._chain.read_header(self._conn, check_origin=(
                None if self.read_only else self.real_path))
            # the witness of a journal at the path it was created at (a copy elsewhere is a backup: older is fine)
            witnessed_here = self._chain.origin == self.real_path
            witnessed = self.witness.read(self.journal_id) if witnessed_here else None
            want = frozenset(a.seq for a in (anchored, witnessed) if a is not None and a.journal_id == self.journal_id)
            last = self._chain.last_snapshot(self._conn)
            if last is not None:
                self._snapshot = self._chain.start_at(self._conn, last, want)
            self._tail_from = (self._chain.seq, self._chain.digest)
            kept: list[Event] | None = []
            for event in self._chain.stream(self._conn, want):  # a tail of more than _KEEP rows: read again by tail()
                if kept is not None and len(kept) < _KEEP:
                    kept.append(event)
                else:
                    kept = None
            self._tail = kept
            if checkpointed:
                self._chain.check_size(self._conn, status.st_size)
            self._conn.execute("COMMIT")
            if not self.read_only:
                if self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    raise JournalCorruptError(f"journal {self.path} is not in WAL mode: not a {FORMAT} journal")
                # commits write the -wal without flushing it; the transaction flushes it outside the side lock
                self._conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as error:
            raise sqlite_failure(self.path, error, self._chain.seq) from None
        after = os.stat(self.real_path)
        if _identity(after) != _identity(status):
            raise JournalReplacedError(f"journal {self.path} was replaced while it was being opened; open it again")
        self._identity = _identity(status)
        if not self.read_only and os.path.exists(self.real_path + "-wal"):  # kept until the last connection closes
            try:
                self._wal = os.open(self.real_path + "-wal", os.O_RDWR | os.O_CLOEXEC)
            except OSError as error:
                raise disk_full(self.path, error) from None
            self._wal_identity = _identity(os.fstat(self._wal))
        self._opened = (self._chain.seq, self._chain.digest)
        self._check_anchor(anchored)
        self._check_unresolved_anchor()
        if witnessed_here:
            self._check_witness(witnessed)

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
            warn_anchor(f"journal {self.path} has no anchor {self.anchor_path}: a rollback to an older copy "
                        "cannot be detected this time" + ("" if self.read_only else "; a new anchor is written"))
        elif anchored.journal_id != self.journal_id:
            raise JournalCorruptError(f"journal {self.path}: its anchor {self.anchor_path} belongs to another "
                                      f"journal ({anchored.journal_id}, this is {self.journal_id}): the file was "
                                      "replaced by another journal")
        elif anchored.seq > self._chain.seq:
            raise self._lost(anchored, self.anchor_path)
        elif self._chain.wanted.get(anchored.seq) != anchored.digest:
            raise JournalCorruptError(f"journal {self.path}: row {anchored.seq} is not the row its anchor recorded: "
                                      "this is another copy of the journal, which has diverged")
        if self.read_only:
            return
        try:
            self._anchor = AnchorFile(self.anchor_path)
            if anchored is None or anchored.seq < self._chain.seq:
                self._anchor.reset(current)
        except OSError as error:
            raise disk_full(self.path, error) from None

    def _check_unresolved_anchor(self) -> None:
        """An anchor left at the path as given (through a symlink) must not record rows this journal lacks."""
        given = anchor_path(os.path.abspath(self.path))
        if given == self.anchor_path or not os.path.lexists(given):
            return
        stray = self._read_anchor(given)
        if stray is not None and stray.journal_id == self.journal_id and stray.seq > self._chain.seq:
            raise self._lost(stray, given)

    def _check_witness(self, witnessed: Anchor | None) -> None:
        """The journal must hold the row this host's witness recorded; a journal without one is witnessed now.

        ``witnessed`` was read before the rows. A missing witness (a new
        container, a deleted or moved state directory) only means that a
        restore of this journal's directory before now cannot be detected: the
        journal is opened with a :class:`JournalAnchorWarning` (refusing would
        strand every journal whose state directory is not kept; docs/threat-model.md).
        """
        self.witness.check_replaced(self.journal_id)
        if witnessed is not None and witnessed.journal_id == self.journal_id:
            self.witness.check(witnessed, self._chain.seq, self._chain.wanted,
                               "a backup of its directory restored, or an older copy")
        if self.read_only:
            return
        if witnessed is None and self._chain.seq > 0:
            warn_anchor(f"journal {self.path}: this host has no witness of it in {self.witness.directory} (a new "
                        "container, or a deleted or moved state directory: set DPGLM_ANCHOR_DIR): a backup of its "
                        "directory restored before now cannot be detected; it is witnessed from now on")
        try:
            self.witness.record_id(self.journal_id)
            self.witness.advance(Anchor(self.journal_id, self._chain.seq, self._chain.digest))
        except OSError as error:
            raise disk_full(self.path, error) from None

    # ----- the store contract --------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any]:
        """The header's budget and relation (verified at open)."""
        return dict(self.meta)

    def snapshot(self) -> Event | None:
        """The last snapshot row present at open (checked against its own contents), or None."""
        return self._snapshot

    def tail(self) -> Iterator[Event]:
        """The rows after :meth:`snapshot` present at open: kept from the open if at most ``_KEEP``, else read again
        and checked against the chain, one at a time."""
        kept, self._tail = self._tail, None
        if self._conn is None:
            raise RuntimeError(f"journal {self.path} is closed")
        yield from kept if kept is not None else ChainReader(self.path).between(self._conn, self._tail_from,
                                                                                  self._opened)

    def history(self) -> Iterator[Event]:
        """Every row from row 1, checked against the chain from the header, one at a time; then SQLite's
        ``quick_check`` of the whole file (what ``dpglm ledger verify`` reads; docs/threat-model.md)."""
        if self._conn is None:
            raise RuntimeError(f"journal {self.path} is closed")
        yield from ChainReader(self.path).history(self._conn, self._opened[0])

    def catch_up(self) -> list[Event]:
        """The rows others committed since this store last looked, read without the side lock (a WAL reader).

        Anything wrong here is left for the next transaction, which reads the
        same rows again under the lock and refuses them there.
        """
        conn = self._conn
        if conn is None or self.read_only:
            return []
        saved = (self._chain.seq, self._chain.digest)
        try:
            conn.execute("BEGIN")
            rows = self._chain.read_rows(conn)
            conn.execute("COMMIT")
        except (sqlite3.Error, JournalCorruptError):
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self._chain.advance(*saved)
            return []
        return rows

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
                check_links(self.path, now)

    def _check_anchored(self) -> None:
        """Inside a transaction: neither the anchor nor this host's witness may be ahead of the rows committed.

        Both are advanced only after a commit, by a ledger that held the side
        lock when it committed, so everything they record was committed before
        this transaction took the lock.
        """
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
        self.witness.check(self.witness.read(self.journal_id), self._chain.seq, None,
                           "a backup of its directory restored, or an older copy")

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
        committed: tuple[int, str] | None = None
        self._lock.acquire()
        try:
            self._check_identity()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as error:
                raise sqlite_failure(self.path, error) from None
            done = False
            try:
                transaction = _Transaction(self, self._chain.read_rows(conn))
                self._check_anchored()
                yield transaction
                conn.execute("COMMIT")
                done = True
                committed = transaction.last
            except sqlite3.Error as error:
                raise sqlite_failure(self.path, error, self._chain.seq) from None
            finally:
                if not done:
                    with contextlib.suppress(sqlite3.Error):  # a failed COMMIT may have rolled back already
                        conn.execute("ROLLBACK")
        finally:
            self._lock.release()
        if committed is not None:
            self._settle(*committed)

    def _settle(self, seq: int, digest: str) -> None:
        """After the lock is released: flush the ``-wal``, then let the anchor and the witness record the row.

        The commit wrote the row's frames to the ``-wal`` (``synchronous=NORMAL``);
        ``fdatasync`` makes them durable (every frame written before it, others'
        too), and only then may the anchor and the witness record the row, so
        neither is ever ahead of what a power loss keeps. If anything here
        fails, the row is committed but not this store's: the caller's receipt
        is refused and the row comes back in the next transaction's
        ``new_events``, counted (over-counting is the safe side).
        """
        assert self._anchor is not None
        try:
            if self._wal < 0:  # the -wal first appeared with this commit
                self._wal = os.open(self.real_path + "-wal", os.O_RDWR | os.O_CLOEXEC)
                self._wal_identity = _identity(os.fstat(self._wal))
            _datasync(self._wal)
            anchor = Anchor(self.journal_id, seq, digest)
            self._anchor.advance(anchor)
            self.witness.advance(anchor)
        except OSError as error:
            raise disk_full(self.path, error) from None
        self._chain.advance(seq, digest)

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
        for side in (self._anchor, self._lock, self.witness):
            if side is not None:
                side.close()
        self._anchor = None
        self._lock = None
        if self._wal >= 0:
            os.close(self._wal)
            self._wal = -1

