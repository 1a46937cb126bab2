"""The rows of a file journal: the format, the hash chain, and reading rows back verified.

Format ``dpglm-ledger-journal-3`` (docs/threat-model.md, docs/accounting.md):
a ``header`` table with one row (format, journal id, meta = budget and
relation as canonical JSON, origin = the real path the journal was created at,
hash) and an ``events`` table (seq, kind, account, payload, prev, hash). The
header's hash is SHA-256 over ``[format, journal_id, meta, origin]``; row k's is
SHA-256 over ``[prev, seq, kind, account, payload]`` with ``prev`` the hash of
row k − 1 (of the header for row 1), each list as compact, key-sorted JSON.
:class:`ChainReader` checks every row the first time this process reads it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

from accounting.journal.errors import (
    JournalBusyError,
    JournalCorruptError,
    JournalDiskFullError,
    JournalPathError,
    JournalReadOnlyError,
)
from accounting.journal.store import Event

__all__ = ["FORMAT", "ChainReader", "canonical", "header_hash", "row_hash", "sqlite_failure"]

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


class ChainReader:
    """Where the verified chain of one journal ends (``seq``, ``digest``), and reading on from there."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.seq = 0
        self.digest = ""
        self.wanted: dict[int, str] = {}  # the hashes of the rows asked for by read_rows(want=...)
        self.origin = ""  # the real path the journal was created at (its header)

    def advance(self, seq: int, digest: str) -> None:
        """This store appended (and committed) rows up to ``seq``, ending in ``digest``."""
        self.seq, self.digest = seq, digest

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
        self.seq, self.digest, self.origin = 0, digest, origin
        return meta, journal_id

    def read_rows(self, conn: sqlite3.Connection, want: frozenset[int] = frozenset()) -> list[Event]:
        """Rows after ``seq``, each checked against the chain; ``wanted[k]`` becomes the hash of row k in ``want``."""
        if self.seq in want:
            self.wanted[self.seq] = self.digest
        cursor = conn.execute("SELECT seq, kind, account, payload, prev, hash FROM events WHERE seq > ? ORDER BY seq",
                              (self.seq,))
        try:
            return self._verify(cursor, want)
        finally:
            cursor.close()  # an unfinalised statement would keep the connection's read lock

    def _verify(self, cursor: sqlite3.Cursor, want: frozenset[int]) -> list[Event]:
        events: list[Event] = []
        while True:
            try:
                row = cursor.fetchone()
            except sqlite3.Error as error:
                raise sqlite_failure(self.path, error, self.seq) from None
            if row is None:
                return events
            seq, kind, account, payload_text, previous, digest = row
            if seq != self.seq + 1:
                raise JournalCorruptError(f"journal {self.path}: row {self.seq + 1} is missing (the next row is {seq})")
            damaged = JournalCorruptError(
                f"journal {self.path}: row {seq} is damaged (its hash does not match its contents or the row before "
                "it); refusing to reopen — restore an intact copy"
            )
            if not all(isinstance(v, str) for v in (kind, account, payload_text, previous, digest)):
                raise damaged
            if previous != self.digest or digest != row_hash(previous, seq, kind, account, payload_text):
                raise damaged
            try:
                payload = json.loads(payload_text)
            except ValueError:
                raise damaged from None
            events.append((seq, kind, account, payload))
            self.seq, self.digest = seq, digest
            if seq in want:
                self.wanted[seq] = digest

    def check_size(self, conn: sqlite3.Connection, size: int) -> None:
        """With no ``-wal`` left, the file is as long as SQLite's page count says (a cut after the last row read)."""
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        if size < page_size * pages:
            raise JournalCorruptError(f"journal {self.path} is truncated ({size} bytes, its SQLite header says "
                                      f"{page_size * pages}): cut after row {self.seq} or inside it")
