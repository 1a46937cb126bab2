"""Append-only, hash-chained SQLite journal of a ledger's splits and charges.

What a journal guarantees (docs/threat-model.md has the whole argument):

- **Never reopened as fresh.** A path that exists is a journal or an error: an
  empty, truncated, foreign or damaged file is refused with a one-line
  :class:`JournalCorruptError` naming the path. A new journal appears with its
  header already in it (written to a temporary file, then hard-linked into
  place), so a crash while creating one never leaves a headerless file.
- **Chained rows.** The header holds the format, a random journal id, the
  budget and the relation, and a hash of them; each row holds the hash of the
  previous row (the header's for row 1) and a hash of itself
  (SHA-256 over the previous hash, its sequence number and its stored text).
  At open every row is checked, so one flipped byte or a cut inside a row is
  refused with an error naming the row. Splits are rows of the chain too.
- **The anchor** (:mod:`accounting.anchor`): the last row's seq and hash,
  kept in ``PATH.anchor`` and fsync'd with every row, catch what a chain
  cannot — a cut at a row boundary, an older complete copy restored.
- **In the main file when granted.** Rollback-journal mode
  (``journal_mode=TRUNCATE``, ``synchronous=FULL``): a commit writes and
  fsyncs the ``.db`` itself before it returns, so a copy of the ``.db`` alone
  after ``kill -9`` holds every granted charge (WAL mode left the last ones in
  ``-wal`` only).
- **The lock protects the path.** SQLite's exclusive locking mode keeps a
  second ledger out while this one is open; before each row the path's
  (device, inode) is compared with the open file's, so a journal deleted or
  replaced under a running ledger refuses the next charge
  (:class:`JournalReplacedError`), and a journal missing while its anchor
  records rows is not recreated.
- **Read-only.** ``Journal(path, read_only=True)`` opens with SQLite's
  ``mode=ro`` (what ``dpglm ledger show`` uses) and refuses appends; a file or
  directory without write permission is refused for charging
  (:class:`JournalReadOnlyError`), also for root, who could write it anyway.
"""

from __future__ import annotations

import hashlib
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

from accounting.anchor import Anchor, AnchorFile, _identity, anchor_path, read_anchor

FORMAT = "dpglm-ledger-journal-2"
_SQLITE_MAGIC = b"SQLite format 3\x00"

Event = tuple[int, str, str, dict[str, Any]]


class JournalMismatchError(ValueError):
    """The journal was written for another budget, relation or split, or is not a ledger journal."""


class JournalCorruptError(JournalMismatchError):
    """The file is empty, truncated, damaged, not a dpglm journal, or has lost rows (its anchor says so)."""


class JournalBusyError(RuntimeError):
    """Another open ledger holds the journal."""


class JournalReadOnlyError(PermissionError):
    """The journal is read-only (file, directory, or opened for showing): it cannot be charged."""


class JournalReplacedError(RuntimeError):
    """The journal file was deleted or replaced while a ledger held it."""


class JournalAnchorWarning(UserWarning):
    """A journal was opened without its anchor: a rollback to an older copy could not be checked."""


def _canonical(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _sha256(value: object) -> str:
    return hashlib.sha256(_canonical(value).encode()).hexdigest()


def _header_hash(journal_id: str, meta_text: str) -> str:
    return _sha256([FORMAT, journal_id, meta_text])


def _row_hash(previous: str, seq: int, kind: str, account: str, payload_text: str) -> str:
    return _sha256([previous, seq, kind, account, payload_text])


def _writable(path: str) -> bool:
    """Whether ``path`` may be written: a write permission bit is set and ``os.access`` agrees.

    Root passes ``os.access`` on any file, so the mode bits are read too: a
    journal its owner made read-only (``chmod a-w``) is treated as read-only
    even for root.
    """
    return bool(os.stat(path).st_mode & 0o222) and os.access(path, os.W_OK)


def _sqlite_failure(path: str, error: sqlite3.Error, after: int | None = None) -> Exception:
    """The one-line journal error for a raw SQLite error at ``path``."""
    message = str(error)
    if "locked" in message:
        return JournalBusyError(f"journal {path} is held by another open ledger")
    if "readonly" in message or "read-only" in message:
        return JournalReadOnlyError(f"journal {path} is read-only ({message}): it cannot be charged")
    where = "" if after is None else f" after row {after} (rows 1..{after} read back intact)"
    return JournalCorruptError(f"journal {path} is damaged or not a dpglm journal{where}: SQLite says {message!r}")


class _Transaction:
    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self.new_events: list[Event] = []

    def append(self, kind: str, account: str, payload: dict[str, Any]) -> int:
        return self._journal.append(kind, account, payload)


class Journal:
    """The durable, chained event log behind a :class:`~accounting.ledger.Ledger`.

    Parameters
    ----------
    path : str or os.PathLike
        SQLite file. If it does not exist it is created with ``create`` as its
        header; if it exists it must be an intact dpglm journal.
    create : dict, optional
        Header (budget, relation) of a new journal; None: the file must exist.
    read_only : bool
        Open with SQLite's ``mode=ro`` (no lock taken, nothing written);
        :meth:`append` raises :class:`JournalReadOnlyError`.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: dict[str, Any] | None = None,
                 read_only: bool = False) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"journal must be a file path (str or PathLike) or None, got {type(path).__name__}")
        self.path = os.fspath(path)
        self.anchor_path = anchor_path(self.path)
        self.read_only = bool(read_only)
        self._conn: sqlite3.Connection | None = None
        self._fd = -1
        self._anchor: AnchorFile | None = None
        try:
            if not os.path.lexists(self.path):
                if create is None or self.read_only:
                    raise FileNotFoundError(f"journal {self.path!r} does not exist")
                self._create(create)
            self._open()
        except BaseException:
            self.close()
            raise

    # ----- creating ------------------------------------------------------------------------------
    def _create(self, meta: dict[str, Any]) -> None:
        """Write a new journal with its header to a temporary file, then link it into place."""
        anchored = self._read_anchor()
        if anchored is not None and anchored.seq > 0:
            raise JournalCorruptError(
                f"journal {self.path} is missing but its anchor {self.anchor_path} records rows 1..{anchored.seq} "
                f"of journal {anchored.journal_id}: it was deleted or moved, and a new journal there would grant "
                "its spent budget again; restore it, or delete the anchor too to start a new budget"
            )
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"journal {self.path}: its directory {folder} does not exist")
        if not _writable(folder):
            raise JournalReadOnlyError(f"journal {self.path}: its directory {folder} is read-only, cannot create it")
        journal_id = uuid.uuid4().hex
        meta_text = _canonical(meta)
        temporary = f"{self.path}.new-{journal_id}"
        try:
            conn = sqlite3.connect(temporary, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=TRUNCATE")
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("CREATE TABLE header (format TEXT NOT NULL, journal_id TEXT NOT NULL, "
                             "meta TEXT NOT NULL, hash TEXT NOT NULL)")
                conn.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, account TEXT NOT NULL, "
                             "payload TEXT NOT NULL, prev TEXT NOT NULL, hash TEXT NOT NULL)")
                conn.execute("INSERT INTO header VALUES (?, ?, ?, ?)",
                             (FORMAT, journal_id, meta_text, _header_hash(journal_id, meta_text)))
                conn.execute("COMMIT")
            finally:
                conn.close()
            try:
                os.link(temporary, self.path)  # never replaces: a journal created meanwhile wins
            except FileExistsError:
                return
            anchor = AnchorFile(self.anchor_path)
            try:
                anchor.reset(Anchor(journal_id, 0, _header_hash(journal_id, meta_text)))
            finally:
                anchor.close()
        finally:
            for leftover in (temporary, temporary + "-journal"):
                if os.path.exists(leftover):
                    os.unlink(leftover)
        directory = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    # ----- opening -------------------------------------------------------------------------------
    def _open(self) -> None:
        status = os.stat(self.path)
        if not stat.S_ISREG(status.st_mode):
            raise JournalCorruptError(f"journal {self.path} is not a dpglm journal (not a regular file)")
        size = status.st_size
        if size == 0:
            raise JournalCorruptError(
                f"journal {self.path} is empty (0 bytes): not a dpglm journal, and never reopened as a fresh budget; "
                f"restore it, or delete it (and {os.path.basename(self.anchor_path)}) to start over"
            )
        self._fd = os.open(self.path, os.O_RDONLY)
        first = os.pread(self._fd, 100, 0)
        if not first.startswith(_SQLITE_MAGIC[: len(first)]) or len(first) < len(_SQLITE_MAGIC):
            cut = first == _SQLITE_MAGIC[: len(first)]
            what = f"truncated to {size} byte{'s' if size > 1 else ''}" if cut else "not an SQLite file"
            raise JournalCorruptError(f"journal {self.path} is not a dpglm journal ({what})")
        if len(first) < 100:
            raise JournalCorruptError(f"journal {self.path} is truncated to {size} bytes: not a complete journal")
        if not self.read_only:
            self._refuse_read_only()
        try:
            if self.read_only:
                uri = f"file:{urllib.parse.quote(os.path.abspath(self.path))}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, timeout=1.0, isolation_level=None,
                                             check_same_thread=False)
            else:
                self._conn = sqlite3.connect(self.path, timeout=1.0, isolation_level=None, check_same_thread=False)
                self._conn.execute("PRAGMA locking_mode=EXCLUSIVE")
            self._conn.execute("BEGIN EXCLUSIVE" if not self.read_only else "BEGIN")
            self._read_header()
            self._events = self._read_events()
            self._check_size()
            problem = self._conn.execute("PRAGMA quick_check").fetchall()[0][0]
            if problem != "ok":
                raise JournalCorruptError(f"journal {self.path} is damaged (SQLite quick_check: {problem}); "
                                          f"rows 1..{self._last_seq} read back intact")
            self._conn.execute("COMMIT")
            if not self.read_only:
                self._conn.execute("PRAGMA journal_mode=TRUNCATE")
                self._conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as error:
            raise _sqlite_failure(self.path, error, getattr(self, "_last_seq", None)) from None
        self._check_anchor()
        self._check_identity()

    def _refuse_read_only(self) -> None:
        hint = (f"show it with `dpglm ledger show {self.path}` (Ledger.from_journal(path, read_only=True)); "
                "it cannot be charged")
        if not _writable(self.path):
            mode = stat.S_IMODE(os.stat(self.path).st_mode)
            raise JournalReadOnlyError(f"journal {self.path} is read-only (file mode {mode:04o}): {hint}")
        folder = os.path.dirname(os.path.abspath(self.path))
        if not _writable(folder):
            raise JournalReadOnlyError(f"journal {self.path} is in a read-only directory ({folder}): {hint}")

    def _read_header(self) -> None:
        assert self._conn is not None
        tables = {name for (name,) in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "header" not in tables or "events" not in tables:
            if "meta" in tables:
                raise JournalCorruptError(f"journal {self.path} has the old unchained format dpglm-ledger-journal-1; "
                                          f"this dpglm reads {FORMAT} only")
            raise JournalCorruptError(f"journal {self.path} is not a dpglm journal (an SQLite file without its header)")
        rows = self._conn.execute("SELECT format, journal_id, meta, hash FROM header").fetchall()
        if len(rows) != 1 or rows[0][0] != FORMAT:
            raise JournalCorruptError(f"journal {self.path} has a damaged or foreign header "
                                      f"(expected one {FORMAT} row)")
        _, journal_id, meta_text, digest = rows[0]
        if digest != _header_hash(journal_id, meta_text):
            raise JournalCorruptError(f"journal {self.path}: the header (budget, relation, journal id) is damaged "
                                      "(its hash does not match its contents)")
        try:
            self.meta: dict[str, Any] = json.loads(meta_text)
        except ValueError:
            raise JournalCorruptError(f"journal {self.path}: the header is not valid JSON") from None
        self.journal_id: str = journal_id
        self._last_seq = 0
        self._last_hash: str = digest
        self._hashes = [digest]  # hash of row k at index k (0: the header)

    def _read_events(self) -> list[Event]:
        assert self._conn is not None
        cursor = self._conn.execute("SELECT seq, kind, account, payload, prev, hash FROM events ORDER BY seq")
        try:
            return self._verify_rows(cursor)
        finally:
            cursor.close()  # an unfinalised statement would keep the closed connection (and its lock) alive

    def _verify_rows(self, cursor: sqlite3.Cursor) -> list[Event]:
        events: list[Event] = []
        while True:
            try:
                row = cursor.fetchone()
            except sqlite3.Error as error:
                raise _sqlite_failure(self.path, error, self._last_seq) from None
            if row is None:
                return events
            seq, kind, account, payload_text, previous, digest = row
            expected = self._last_seq + 1
            if seq != expected:
                raise JournalCorruptError(f"journal {self.path}: row {expected} is missing (the next row is {seq})")
            damaged = JournalCorruptError(
                f"journal {self.path}: row {seq} is damaged (its hash does not match its contents or the row before "
                "it); refusing to reopen — restore an intact copy"
            )
            if not all(isinstance(v, str) for v in (kind, account, payload_text, previous, digest)):
                raise damaged
            if previous != self._last_hash or digest != _row_hash(previous, seq, kind, account, payload_text):
                raise damaged
            try:
                payload = json.loads(payload_text)
            except ValueError:
                raise damaged from None
            events.append((seq, kind, account, payload))
            self._last_seq, self._last_hash = seq, digest
            self._hashes.append(digest)

    def _check_size(self) -> None:
        """The file is as long as its SQLite header says (a cut after the last row read is still a cut)."""
        header = os.pread(self._fd, 100, 0)
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        size = os.fstat(self._fd).st_size
        if header[24:28] == header[92:96] and size < page_size * pages:
            raise JournalCorruptError(f"journal {self.path} is truncated ({size} bytes, its SQLite header says "
                                      f"{page_size * pages}): cut after row {self._last_seq} or inside it")

    def _read_anchor(self) -> Anchor | None:
        try:
            return read_anchor(self.anchor_path)
        except (ValueError, OSError) as error:
            raise JournalCorruptError(f"journal {self.path}: its anchor is unreadable ({error})") from None

    def _check_anchor(self) -> None:
        """The journal must hold the row its anchor recorded; a journal ahead of its anchor is re-anchored."""
        anchored = self._read_anchor()
        current = Anchor(self.journal_id, self._last_seq, self._last_hash)
        if anchored is None:
            warnings.warn(f"journal {self.path} has no anchor {self.anchor_path}: a rollback to an older copy "
                          "cannot be detected this time" + ("" if self.read_only else "; a new anchor is written"),
                          JournalAnchorWarning, stacklevel=4)
        elif anchored.journal_id != self.journal_id:
            raise JournalCorruptError(f"journal {self.path}: its anchor {self.anchor_path} belongs to another "
                                      f"journal ({anchored.journal_id}, this is {self.journal_id}): the file was "
                                      "replaced by another journal")
        elif anchored.seq > self._last_seq:
            raise JournalCorruptError(
                f"journal {self.path} ends at row {self._last_seq} but its anchor records row {anchored.seq}: rows "
                f"{self._last_seq + 1}..{anchored.seq} were lost (cut at a row boundary, or an older copy restored); "
                "they are spent budget, so it is not reopened"
            )
        elif self._hashes[anchored.seq] != anchored.digest:
            raise JournalCorruptError(f"journal {self.path}: row {anchored.seq} is not the row its anchor recorded: "
                                      "this is another copy of the journal, which has diverged")
        if self.read_only:
            return
        self._anchor = AnchorFile(self.anchor_path)
        if anchored is None or anchored.seq < self._last_seq:
            self._anchor.reset(current)

    def _check_identity(self) -> None:
        """Refuse if the path no longer names the file this journal holds (deleted or replaced)."""
        for path, held, what in ((self.path, _identity(os.fstat(self._fd)), "journal"),
                                 (self.anchor_path, self._anchor.identity if self._anchor else None, "anchor")):
            if held is None:
                continue
            try:
                now = _identity(os.stat(path))
            except FileNotFoundError:
                raise JournalReplacedError(
                    f"{what} {path} was deleted while this ledger held it: charge refused (a new ledger there could "
                    "grant the spent budget again); restore the file, or close this ledger"
                ) from None
            if now != held:
                raise JournalReplacedError(f"{what} {path} was replaced by another file while this ledger held it: "
                                           "charge refused; close this ledger")

    # ----- reading and appending -----------------------------------------------------------------
    def read_meta(self) -> dict[str, Any]:
        """The header's budget and relation (verified at open)."""
        return dict(self.meta)

    def events(self) -> list[Event]:
        """All events in order, verified at open: (seq, kind, account path, payload)."""
        return list(self._events)

    def append(self, kind: str, account: str, payload: dict[str, Any]) -> int:
        """Durably append one chained row and return its sequence number.

        The row is in the main file (committed and fsync'd, rollback-journal
        mode) and the anchor is fsync'd before this returns; on any error
        nothing is returned and the caller does not grant the charge.
        """
        if self.read_only:
            raise JournalReadOnlyError(f"journal {self.path} was opened read-only: it can be shown, not charged")
        if self._conn is None:
            raise RuntimeError(f"journal {self.path} is closed")
        self._check_identity()
        text = json.dumps(payload)
        seq = self._last_seq + 1
        digest = _row_hash(self._last_hash, seq, kind, account, text)
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)",
                                   (seq, kind, account, text, self._last_hash, digest))
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        except sqlite3.Error as error:
            raise _sqlite_failure(self.path, error) from None
        self._last_seq, self._last_hash = seq, digest
        assert self._anchor is not None
        self._anchor.write(Anchor(self.journal_id, seq, digest))
        return seq

    @contextmanager
    def transaction(self) -> Iterator[_Transaction]:
        """:meth:`accounting.store.JournalStore.transaction` (this ledger holds the file exclusively: no new rows)."""
        if self._conn is None:
            raise RuntimeError(f"journal {self.path} is closed")
        yield _Transaction(self)

    def close(self) -> None:
        """Close the connection (releases the exclusive lock) and the files."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._anchor is not None:
            self._anchor.close()
            self._anchor = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
