"""The rows of a file journal: the format, the hash chain, and reading rows back verified.

Format ``dpglm-ledger-journal-3`` (docs/threat-model.md, docs/accounting.md):
a ``header`` table with one row (format, journal id, meta = budget and
relation as canonical JSON, origin = the real path the journal was created at,
hash) and an ``events`` table (seq, kind, account, payload, prev, hash). The
header's hash is SHA-256 over ``[format, journal_id, meta, origin]``; row k's is
SHA-256 over ``[prev, seq, kind, account, payload]`` with ``prev`` the hash of
row k − 1 (of the header for row 1), each list as compact, key-sorted JSON.
:class:`ChainReader` checks every row the first time this process reads it; at
open it starts from the last snapshot row (:mod:`accounting.journal.snapshot`),
checked against its own contents, and chains the rows after it from there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from typing import Any

from accounting.journal.errors import (
    JournalBusyError,
    JournalCorruptError,
    JournalDiskFullError,
    JournalPathError,
    JournalReadOnlyError,
)
from accounting.journal.store import Event

SNAPSHOT = "snapshot"
"""The kind of a snapshot row: the state the rows before it build (:mod:`accounting.journal.snapshot`)."""

__all__ = ["FORMAT", "SNAPSHOT", "Chain", "ChainReader", "canonical", "checked", "header_hash", "row_hash",
           "sqlite_failure"]

FORMAT = "dpglm-ledger-journal-3"
_OLDER = ("dpglm-ledger-journal-2",)


def canonical(value: object) -> str:
    """Compact, key-sorted JSON: the text every hash is taken over."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _sha256(value: object) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()


def header_hash(journal_id: str, meta_text: str, origin: str | None = None) -> str:
    """Hash of the header row (format, journal id, budget and relation, and a file journal's creation path)."""
    return _sha256([FORMAT, journal_id, meta_text] + ([] if origin is None else [origin]))


def row_hash(previous: str, seq: int, kind: str, account: str, payload_text: str) -> str:
    """Hash of one row, chained to ``previous``."""
    return _sha256([previous, seq, kind, account, payload_text])


def sqlite_failure(path: str, error: sqlite3.Error, after: int | None = None) -> Exception:
    """The one-line journal error for a raw SQLite error at ``path``."""
    message = str(error)
    if "disk is full" in message or "database or disk is full" in message:
        return JournalDiskFullError(f"journal {path}: the disk is full (SQLite says {message!r}): charge refused, "
                                    "nothing was granted; free some space and charge again")
    if "locked" in message or "busy" in message:
        return JournalBusyError(f"journal {path} is busy: another program held SQLite's write lock for too long")
    if "readonly" in message or "read-only" in message:
        return JournalReadOnlyError(f"journal {path} is read-only ({message}): it cannot be charged")
    if "file is not a database" in message:
        return JournalCorruptError(f"journal {path} is not a dpglm journal (not an SQLite file)")
    where = "" if after is None else f" after row {after} (rows 1..{after} read back intact)"
    return JournalCorruptError(f"journal {path} is damaged or not a dpglm journal{where}: SQLite says {message!r}")


def checked(path: str, row: tuple[Any, ...], expected: str, first: int = 1) -> Event:
    """Row ``(seq, kind, account, payload text, prev, hash)`` as an event, if its hash matches its contents and its
    ``prev`` is ``expected`` (the hash of the row before it); rows ``first``..seq − 1 were read back intact."""
    seq, kind, account, payload_text, previous, digest = row
    intact = f"; rows {first}..{seq - 1} read back intact" if seq > first else ""
    damaged = JournalCorruptError(f"journal {path}: row {seq} is damaged (its hash does not match its contents or "
                                  f"the row before it){intact}; refusing to reopen — restore an intact copy")
    if not (isinstance(kind, str) and isinstance(account, str) and isinstance(payload_text, str)
            and isinstance(previous, str) and isinstance(digest, str)):
        raise damaged
    if previous != expected or digest != row_hash(previous, seq, kind, account, payload_text):
        raise damaged
    try:
        payload = json.loads(payload_text)
    except ValueError:
        raise damaged from None
    return seq, kind, account, payload


class Chain:
    """Where a verified chain ends (``seq``, ``digest``), and checking the next row against it."""

    def __init__(self, path: str, seq: int = 0, digest: str = "") -> None:
        self.path = path
        self.seq = seq
        self.digest = digest
        self.first = seq + 1  # the first row this chain checked (for messages)

    def advance(self, seq: int, digest: str) -> None:
        """This store appended (and committed) rows up to ``seq``, ending in ``digest``."""
        self.seq, self.digest = seq, digest

    def start(self, seq: int, digest: str) -> None:
        """Check the rows after row ``seq`` (the header: 0), whose hash is ``digest``, from now on."""
        self.seq, self.digest, self.first = seq, digest, seq + 1

    def take(self, row: tuple[Any, ...]) -> Event:
        """Check row ``(seq, kind, account, payload text, prev, hash)`` follows the chain, and advance past it."""
        seq, digest = row[0], row[5]
        if seq != self.seq + 1:
            raise JournalCorruptError(f"journal {self.path}: row {self.seq + 1} is missing (the next row is {seq})")
        event = checked(self.path, row, self.digest, self.first)
        self.seq, self.digest = seq, digest
        return event


class ChainReader(Chain):
    """The chain of one file journal: its header, and reading its rows on from where the chain ends."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.wanted: dict[int, str] = {}  # the hashes of the rows asked for by read_rows(want=...)
        self.origin = ""  # the real path the journal was created at (its header)
        self.header_digest = ""

    def read_header(self, conn: sqlite3.Connection, check_origin: str | None) -> tuple[dict[str, Any], str]:
        """The verified header: (meta, journal id); with ``check_origin``, the journal must have been created there."""
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "header" not in tables or "events" not in tables:
            if "meta" in tables:
                raise JournalCorruptError(f"journal {self.path} has the old unchained format dpglm-ledger-journal-1; "
                                          f"this dpglm reads {FORMAT} only")
            raise JournalCorruptError(f"journal {self.path} is not a dpglm journal (an SQLite file without its header)")
        columns = [row[1] for row in conn.execute("PRAGMA table_info(header)")]
        if "origin" not in columns:
            found = conn.execute("SELECT format FROM header").fetchall()
            old = found[0][0] if len(found) == 1 and found[0][0] in _OLDER else None
            raise JournalCorruptError(f"journal {self.path} has " + (f"the older format {old}" if old else
                                      "a damaged or foreign header") + f"; this dpglm reads {FORMAT} only")
        rows = conn.execute("SELECT format, journal_id, meta, origin, hash FROM header").fetchall()
        if len(rows) != 1 or rows[0][0] != FORMAT:
            raise JournalCorruptError(f"journal {self.path} has a damaged or foreign header "
                                      f"(expected one {FORMAT} row)")
        _, journal_id, meta_text, origin, digest = rows[0]
        if not all(isinstance(v, str) for v in rows[0]) or digest != header_hash(journal_id, meta_text, origin):
            raise JournalCorruptError(f"journal {self.path}: the header (budget, relation, journal id) is damaged "
                                      "(its hash does not match its contents)")
        try:
            meta = json.loads(meta_text)
        except ValueError:
            raise JournalCorruptError(f"journal {self.path}: the header is not valid JSON") from None
        if check_origin is not None and origin != check_origin:
            raise JournalPathError(
                f"journal {self.path} was created at {origin}: it is a copy or was moved, and charging it here could "
                f"fork its budget; move it back to {origin} to charge it, or open it read-only to show it "
                f"(dpglm ledger show {self.path})"
            )
        self.start(0, digest)
        self.origin, self.header_digest = origin, digest
        return meta, journal_id

    def last_snapshot(self, conn: sqlite3.Connection) -> int | None:
        """The seq of the last snapshot row, or None; found scanning back from the end (the rows after it only)."""
        try:
            found = conn.execute("SELECT seq FROM events WHERE kind = ? ORDER BY seq DESC LIMIT 1",
                                 (SNAPSHOT,)).fetchone()
        except sqlite3.Error as error:
            raise sqlite_failure(self.path, error) from None
        return None if found is None else int(found[0])

    def row(self, conn: sqlite3.Connection, seq: int) -> tuple[Event, str]:
        """Row ``seq`` and its hash, checked against its own contents (not against the rows before it)."""
        try:
            found = conn.execute("SELECT seq, kind, account, payload, prev, hash FROM events WHERE seq = ?",
                                 (seq,)).fetchone()
        except sqlite3.Error as error:
            raise sqlite_failure(self.path, error) from None
        if found is None:
            raise JournalCorruptError(f"journal {self.path}: row {seq} is missing")
        return checked(self.path, found, found[4], seq), found[5]

    def start_at(self, conn: sqlite3.Connection, seq: int, want: frozenset[int] = frozenset()) -> Event:
        """Start the chain at row ``seq`` (a snapshot): its own hash checked; ``wanted`` for the rows of ``want``
        up to it (each checked against its own contents; the rows before a snapshot are ``dpglm ledger verify``'s)."""
        event, digest = self.row(conn, seq)
        for wanted in want:
            if wanted == 0:
                self.wanted[0] = self.header_digest
            elif wanted < seq:
                self.wanted[wanted] = self.row(conn, wanted)[1]
        self.start(seq, digest)
        if seq in want:
            self.wanted[seq] = digest
        return event

    def read_rows(self, conn: sqlite3.Connection, want: frozenset[int] = frozenset()) -> list[Event]:
        """Rows after ``seq``, each checked against the chain; ``wanted[k]`` becomes the hash of row k in ``want``."""
        return list(self.stream(conn, want))

    def stream(self, conn: sqlite3.Connection, want: frozenset[int] = frozenset(),
               upto: int | None = None) -> Iterator[Event]:
        """:meth:`read_rows` one row at a time (up to row ``upto``, if given), advancing as each is checked."""
        if self.seq in want:
            self.wanted[self.seq] = self.digest
        query = "SELECT seq, kind, account, payload, prev, hash FROM events WHERE seq > ?"
        cursor = conn.execute(query + " ORDER BY seq" if upto is None else query + " AND seq <= ? ORDER BY seq",
                              (self.seq,) if upto is None else (self.seq, upto))
        try:
            while True:
                try:
                    row = cursor.fetchone()
                except sqlite3.Error as error:
                    raise sqlite_failure(self.path, error, self.seq) from None
                if row is None:
                    return
                event = self.take(row)
                if self.seq in want:
                    self.wanted[self.seq] = self.digest
                yield event
        finally:
            cursor.close()  # an unfinalised statement would keep the connection's read lock

    def between(self, conn: sqlite3.Connection, start: tuple[int, str], end: tuple[int, str]) -> Iterator[Event]:
        """The rows after ``start`` up to ``end`` (each (seq, hash)), checked, read again: they must end at ``end``."""
        self.start(*start)
        yield from self.stream(conn, upto=end[0])
        if (self.seq, self.digest) != end:
            raise JournalCorruptError(f"journal {self.path}: rows {start[0] + 1}..{end[0]} changed after they were "
                                      "checked at open")

    def history(self, conn: sqlite3.Connection, at_least: int) -> Iterator[Event]:
        """Every row from the header, checked, in one read transaction, then SQLite's ``quick_check`` of the file;
        the rows must reach row ``at_least`` (where they ended at open)."""
        try:
            conn.execute("BEGIN")
            self.read_header(conn, check_origin=None)
            yield from self.stream(conn)
            problem = conn.execute("PRAGMA quick_check").fetchall()[0][0]
            if problem != "ok":
                raise JournalCorruptError(f"journal {self.path} is damaged (SQLite quick_check: {problem}); "
                                          f"rows 1..{self.seq} read back intact")
            conn.execute("COMMIT")
        except sqlite3.Error as error:
            raise sqlite_failure(self.path, error, self.seq) from None
        finally:
            with contextlib.suppress(sqlite3.Error):  # the journal may have been closed meanwhile
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        if self.seq < at_least:
            raise JournalCorruptError(f"journal {self.path} now ends at row {self.seq}, before row {at_least} "
                                      "it held at open")

    def check_size(self, conn: sqlite3.Connection, size: int) -> None:
        """With no ``-wal`` left, the file is as long as SQLite's page count says (a cut after the last row read)."""
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        if size < page_size * pages:
            raise JournalCorruptError(f"journal {self.path} is truncated ({size} bytes, its SQLite header says "
                                      f"{page_size * pages}): cut after row {self.seq} or inside it")
