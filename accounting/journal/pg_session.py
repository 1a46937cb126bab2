"""The connection of a PostgreSQL journal to its server (:mod:`accounting.journal.postgres`).

:class:`PgSession` is what a :class:`~accounting.journal.postgres.PostgresJournal`
talks to the server through: a connection made and checked to commit durably
(``fsync``, ``synchronous_commit`` and ``full_page_writes`` on; refused with
:class:`JournalNotDurableError` otherwise), made again after a loss (a restart, a
failover) until a deadline, and statements whose psycopg errors become the
journal's one-line errors (:class:`JournalUnavailableError` for a lost server;
docs/threat-model.md, "The PostgreSQL journal"). :func:`parse_url` reads a
journal URL.
"""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

import psycopg

from accounting.journal.errors import JournalCorruptError, JournalDiskFullError, JournalReadOnlyError

__all__ = ["JournalNotDurableError", "JournalUnavailableError", "PgSession", "first_line", "parse_url"]

_CAN_BARRIER = "SELECT has_function_privilege('pg_logical_emit_message(boolean, text, text)', 'EXECUTE')"
#: settings a durable commit needs, and the values that are not durable
_DURABILITY = {"fsync": ("off",), "synchronous_commit": ("off",), "full_page_writes": ("off",)}


class JournalUnavailableError(ConnectionError):
    """The PostgreSQL server cannot be reached, or the connection died before the charge committed: refused."""


class JournalNotDurableError(RuntimeError):
    """The server would acknowledge commits it has not made durable (``fsync`` or ``synchronous_commit`` off)."""


def parse_url(url: str) -> tuple[str, str, str]:
    """``(conninfo, shown, name)``: what to connect with, the URL without its password, the journal name."""
    if not isinstance(url, str):
        raise TypeError(f"journal must be a postgresql:// URL string, got {type(url).__name__}")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"journal must be a postgresql:// URL, got {url.split('@')[-1]!r}")
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    names = [value for key, value in query if key == "journal"]
    name = names[-1] if names else "default"
    if not name or len(name) > 200 or not name.isprintable():
        raise ValueError(f"journal name (?journal=) must be 1 to 200 printable characters, got {name!r}")
    rest = [(key, value) for key, value in query if key != "journal"]
    conninfo = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, urllib.parse.urlencode(rest), ""))
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    visible = [(key, value) for key, value in query if key != "password"]
    shown = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, urllib.parse.urlencode(visible), ""))
    return conninfo, shown, name


class PgSession:
    """One connection to a journal's server at ``url`` (see the module docstring).

    ``path`` is the URL without its password (what errors name), ``name`` the
    journal's name; with ``read_only`` every transaction is read-only.
    ``grouped``: whether this role may run the flush barrier
    (:mod:`accounting.journal.postgres`); ``reconnects``: connections made again
    after one was lost.
    """

    def __init__(self, url: str, read_only: bool, reconnect_seconds: float) -> None:
        self._conninfo, self.path, self.name = parse_url(url)
        self.read_only = bool(read_only)
        self.reconnect_seconds = float(reconnect_seconds)
        self._conn: psycopg.Connection[Any] | None = None
        #: whether the flush barrier may be used (else each commit is synchronous and holds the lock for its flush)
        self.grouped = False
        self.reconnects = 0

    def _connect(self) -> psycopg.Connection[Any]:
        """One connection, checked to commit durably; a one-line error if it cannot be made."""
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=10, application_name="dpglm")
        except psycopg.Error as error:
            raise JournalUnavailableError(f"journal {self.path}: cannot connect ({first_line(error)})") from None
        try:
            for setting, unsafe in _DURABILITY.items():
                value = conn.execute("SELECT current_setting(%s)", (setting,)).fetchone()
                if value is None or value[0] in unsafe:
                    raise JournalNotDurableError(
                        f"journal {self.path}: the server has {setting} = {None if value is None else value[0]}, so a "
                        "commit it acknowledges can be lost in a crash and its budget granted again; turn it on"
                    )
            # a client stopped inside a charge must not hold the head lock for ever
            conn.execute("SET idle_in_transaction_session_timeout = '60s'")
            if self.read_only:
                conn.execute("SET default_transaction_read_only = on")
            else:
                allowed = conn.execute(_CAN_BARRIER).fetchone()
                self.grouped = bool(allowed and allowed[0])
        except psycopg.Error as error:
            # the server went away between the handshake and these checks (a restart, a failover)
            failure = self._failure(conn, error)
            conn.close()
            raise failure from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _reconnect(self, deadline: float) -> psycopg.Connection[Any]:
        """A fresh connection, retried until ``deadline`` (a server restarting, a failover)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        while True:
            try:
                self._conn = self._connect()
                self.reconnects += 1
                return self._conn
            except JournalUnavailableError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def _execute(self, conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """Run one statement; psycopg errors become the journal's one-line errors."""
        try:
            cursor = conn.execute(query, params)
            return cursor.fetchall() if cursor.description is not None else []
        except psycopg.Error as error:
            raise self._failure(conn, error) from None

    def _run(self, conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] = ()) -> list[list[Any]]:
        """Run ``;``-separated statements in one round trip (parameters bound here); each statement's rows.

        The simple query protocol runs them in order and stops at the first
        error; psycopg errors become the journal's one-line errors.
        """
        try:
            with psycopg.ClientCursor(conn) as cursor:
                cursor.execute(query, params)
                results = []
                while True:
                    results.append(cursor.fetchall() if cursor.description is not None else [])
                    if not cursor.nextset():
                        return results
        except psycopg.Error as error:
            raise self._failure(conn, error) from None

    def _failure(self, conn: psycopg.Connection[Any], error: psycopg.Error) -> Exception:
        """The one-line journal error for a psycopg error (the charge it interrupts is refused)."""
        text = first_line(error)
        if conn.closed or conn.broken or isinstance(error, psycopg.OperationalError) and error.sqlstate is None:
            return JournalUnavailableError(f"journal {self.path}: the server connection was lost ({text}): "
                                           "charge refused")
        state = error.sqlstate or ""
        if state == "53100":
            return JournalDiskFullError(f"journal {self.path}: the server's disk is full ({text}): charge refused")
        if state in ("42501", "25006"):
            return JournalReadOnlyError(f"journal {self.path} cannot be written by this role ({text}): "
                                        "it cannot be charged")
        return JournalCorruptError(f"journal {self.path}: the server refused a journal statement ({text})")

    def _rollback(self, conn: psycopg.Connection[Any]) -> None:
        """Roll back if the connection still lives (a dead one has rolled back on the server)."""
        if conn.closed or conn.broken:
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            conn.close()


def first_line(error: BaseException) -> str:
    """The first line of an error's message (psycopg's are several)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
