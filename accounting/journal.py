"""Append-only SQLite journal of a ledger's splits and charges.

One event per row; each append is its own transaction, committed (WAL mode,
``synchronous=FULL``) before it returns, so a charge whose receipt was handed
out survives a crash or a ``kill -9``. The file is held with SQLite's
exclusive locking mode: a second ledger (in this or another process) cannot
open the same journal while the first is open, because it would not see the
first one's charges and could overspend.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

FORMAT = "dpglm-ledger-journal-1"


class JournalMismatchError(ValueError):
    """The journal was written for another budget, relation or split, or is not a ledger journal."""


class JournalBusyError(RuntimeError):
    """Another open ledger holds the journal."""


class Journal:
    """The durable event log behind a :class:`~accounting.ledger.Ledger`.

    Parameters
    ----------
    path : str or os.PathLike
        SQLite file; created if missing.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"journal must be a file path (str or PathLike) or None, got {type(path).__name__}")
        self.path = os.fspath(path)
        try:
            self._conn = sqlite3.connect(self.path, timeout=1.0, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA locking_mode=EXCLUSIVE")
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, "
                "account TEXT NOT NULL, payload TEXT NOT NULL)"
            )
            self._conn.execute("COMMIT")
        except sqlite3.OperationalError as error:
            if "locked" in str(error):
                raise JournalBusyError(f"journal {self.path} is held by another open ledger") from error
            raise
        except sqlite3.DatabaseError as error:
            raise JournalMismatchError(f"journal {self.path} is not a dpglm ledger journal: {error}") from error
        if mode.lower() != "wal":
            raise RuntimeError(f"journal {self.path}: SQLite refused WAL mode (got {mode!r})")

    def read_meta(self) -> dict[str, Any] | None:
        """The stored budget/relation header, or None for a fresh journal."""
        rows = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        if not rows:
            return None
        if rows.get("format") != FORMAT:
            raise JournalMismatchError(f"journal {self.path} has format {rows.get('format')!r}, expected {FORMAT!r}")
        return {key: json.loads(value) for key, value in rows.items() if key != "format"}

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Write the header of a fresh journal (one transaction)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
            self._conn.executemany(
                "INSERT INTO meta VALUES (?, ?)", [(key, json.dumps(value)) for key, value in meta.items()]
            )
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def events(self) -> list[tuple[int, str, str, dict[str, Any]]]:
        """All events in order: (seq, kind, account path, payload)."""
        rows = self._conn.execute("SELECT seq, kind, account, payload FROM events ORDER BY seq").fetchall()
        return [(seq, kind, account, json.loads(payload)) for seq, kind, account, payload in rows]

    def append(self, kind: str, account: str, payload: dict[str, Any]) -> int:
        """Durably append one event and return its sequence number.

        The row is committed (fsync'd under ``synchronous=FULL``) before this
        returns; on any error the transaction is rolled back and re-raised.
        """
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = self._conn.execute(
                "INSERT INTO events (kind, account, payload) VALUES (?, ?, ?)",
                (kind, account, json.dumps(payload)),
            )
            seq = int(cursor.lastrowid)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        return seq

    def close(self) -> None:
        """Close the connection (releases the exclusive lock)."""
        self._conn.close()
