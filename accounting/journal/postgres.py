"""A PostgreSQL journal: one budget charged by processes on many hosts (docs/threat-model.md, docs/accounting.md).

``Ledger(budget, journal="postgresql://user@host:port/db")`` opens this store;
``?journal=NAME`` picks one of several journals in a database (default
``default``). It keeps the file journal's rows and refusals
(:mod:`accounting.journal.sqlite`: the same header and row hashes, the same chain
check at open) and replaces its file lock by a server transaction:

- **Schema.** ``dpglm_journals`` (name, journal id, format, header, header
  hash), ``dpglm_heads`` (one row per journal: the last seq and its hash) and
  ``dpglm_rows`` (journal id, seq, kind, account, payload text, previous hash,
  hash, and a client-made ``charge_id`` under a UNIQUE constraint).
- **One transaction per charge.** ``BEGIN`` → ``SELECT … FOR UPDATE`` of the
  head row (waiters queue on the row lock in arrival order: no serialisation
  failures to retry, no polling) → read the rows others committed since this
  store last looked and check their chain → the caller checks the budget and
  appends → update the head → ``COMMIT`` (durable: ``fsync`` and
  ``synchronous_commit`` are checked at every connect).
- **A commit whose answer is lost** (the connection died during ``COMMIT``):
  reconnect, wait for the head lock (so the old transaction has ended), and
  look the charge id up: present, the charge is granted; absent, refused.
  If the server does not come back in time the charge is refused and its row,
  if committed, is spent but never granted (over-counting is safe).
- **Rollbacks of the server** (an older image restored, an asynchronous
  failover) are caught by client-side anchors (:mod:`accounting.journal.pg_anchor`)
  and, while a store is open, by the head moving back under it.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from accounting.journal.anchor import Anchor
from accounting.journal.errors import JournalCorruptError, JournalDiskFullError, JournalReadOnlyError
from accounting.journal.pg_anchor import ClientAnchors, default_anchor_dir
from accounting.journal.rows import FORMAT, canonical, header_hash, row_hash
from accounting.journal.store import Event

__all__ = ["JournalNotDurableError", "JournalUnavailableError", "PostgresJournal", "PostgresTransaction"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS dpglm_journals (name TEXT PRIMARY KEY, journal_id TEXT NOT NULL UNIQUE, "
    "format TEXT NOT NULL, meta TEXT NOT NULL, hash TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dpglm_heads (journal_id TEXT PRIMARY KEY REFERENCES dpglm_journals (journal_id), "
    "seq BIGINT NOT NULL, hash TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dpglm_rows (journal_id TEXT NOT NULL REFERENCES dpglm_journals (journal_id), "
    "seq BIGINT NOT NULL, kind TEXT NOT NULL, account TEXT NOT NULL, payload TEXT NOT NULL, prev TEXT NOT NULL, "
    "hash TEXT NOT NULL, charge_id UUID NOT NULL UNIQUE, PRIMARY KEY (journal_id, seq))",
)
_SCHEMA_LOCK = 0x6470676C6D  # pg_advisory_xact_lock key: one schema creator at a time ("dpglm")
_ROWS = "SELECT seq, kind, account, payload, prev, hash FROM dpglm_rows WHERE journal_id = %s AND seq > %s ORDER BY seq"
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


class PostgresTransaction:
    """One charge's transaction (yielded by :meth:`PostgresJournal.transaction`).

    ``new_events`` are the rows other stores committed since this one last
    looked, chain-checked, in seq order; :meth:`append` adds rows that commit
    when the ``with`` block exits cleanly.
    """

    def __init__(self, store: PostgresJournal, conn: psycopg.Connection[Any], new_events: list[Event]) -> None:
        self.new_events = new_events
        self._store = store
        self._conn = conn
        self._seq = store._last_seq
        self._hash = store._last_hash
        self.pending: list[tuple[int, str, uuid.UUID]] = []

    def append(self, kind: str, account: str, payload: dict[str, Any]) -> int:
        """Insert one chained row (committed at the end of the block) and return its seq."""
        if self._store.read_only:
            raise JournalReadOnlyError(f"journal {self._store.path} was opened read-only: it can be shown, "
                                       "not charged")
        text = json.dumps(payload)
        seq = self._seq + 1
        digest = row_hash(self._hash, seq, kind, account, text)
        charge_id = uuid.uuid4()
        self._store._execute(self._conn, "INSERT INTO dpglm_rows VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                             (self._store.journal_id, seq, kind, account, text, self._hash, digest, charge_id))
        self.pending.append((seq, digest, charge_id))
        self._seq, self._hash = seq, digest
        return seq


class PostgresJournal:
    """The hash-chained journal of one ledger budget in a PostgreSQL database.

    Parameters
    ----------
    url : str
        ``postgresql://user[:password]@host[:port]/db[?journal=NAME&…]``;
        libpq parameters other than ``journal`` are passed through.
    create : dict, optional
        Header (budget, relation) of a new journal; None: it must exist.
    read_only : bool
        Read and check, never write (not even the anchor); charging raises
        :class:`~accounting.journal.JournalReadOnlyError`.
    anchor_dir : str, optional
        This host's anchor directory (default :func:`accounting.journal.pg_anchor.default_anchor_dir`).
    reconnect_seconds : float
        How long a charge waits for a lost server to come back before it is refused.
    """

    def __init__(self, url: str, *, create: dict[str, Any] | None = None, read_only: bool = False,
                 anchor_dir: str | None = None, reconnect_seconds: float = 30.0) -> None:
        self._conninfo, self.path, self.name = parse_url(url)
        self.read_only = bool(read_only)
        self.reconnect_seconds = float(reconnect_seconds)
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        #: connections made again after one was lost, and lost COMMIT answers read back (granted, refused)
        self.reconnects = 0
        self.read_backs = [0, 0]
        try:
            self._conn = self._connect()
            info = self._conn.info
            location = f"{info.host}:{info.port}/{info.dbname}?journal={self.name}"
            self.anchors = ClientAnchors(anchor_dir or default_anchor_dir(), location, self.path)
            self._open(self._conn, create)
            # read the anchor before the rows: it then records nothing the snapshot below cannot see
            anchored = self.anchors.read(self.journal_id)
            self._events = self._read_all(self._conn)
            self._check_anchor(anchored)
        except BaseException:
            self.close()
            raise

    # ----- connecting ----------------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        """One connection, checked to commit durably; a one-line error if it cannot be made."""
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=10, application_name="dpglm")
        except psycopg.Error as error:
            raise JournalUnavailableError(f"journal {self.path}: cannot connect ({_first_line(error)})") from None
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

    def _failure(self, conn: psycopg.Connection[Any], error: psycopg.Error) -> Exception:
        """The one-line journal error for a psycopg error (the charge it interrupts is refused)."""
        text = _first_line(error)
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

    # ----- opening -------------------------------------------------------------------------------
    def _open(self, conn: psycopg.Connection[Any], create: dict[str, Any] | None) -> None:
        """Find the journal named ``self.name`` (creating it from ``create`` if allowed) and check its header."""
        found = self._find(conn)
        if found is None:
            if create is None or self.read_only:
                raise FileNotFoundError(f"journal {self.path} does not exist")
            self.anchors.check_missing()
            self._execute(conn, "BEGIN")
            try:
                self._execute(conn, "SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in _SCHEMA:
                    self._execute(conn, statement)
                journal_id = uuid.uuid4().hex
                meta_text = canonical(create)
                digest = header_hash(journal_id, meta_text)
                inserted = self._execute(conn, "INSERT INTO dpglm_journals VALUES (%s, %s, %s, %s, %s) "
                                               "ON CONFLICT (name) DO NOTHING RETURNING journal_id",
                                         (self.name, journal_id, FORMAT, meta_text, digest))
                if inserted:  # else another client created it first: theirs is the journal
                    self._execute(conn, "INSERT INTO dpglm_heads VALUES (%s, 0, %s)", (journal_id, digest))
                self._execute(conn, "COMMIT")
            except BaseException:
                self._rollback(conn)
                raise
            found = self._find(conn)
            assert found is not None
        journal_id, form, meta_text, digest = found
        if form != FORMAT:
            raise JournalCorruptError(f"journal {self.path} has format {form}; this dpglm reads {FORMAT} only")
        if digest != header_hash(journal_id, meta_text):
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

    def _find(self, conn: psycopg.Connection[Any]) -> tuple[str, str, str, str] | None:
        if not self._execute(conn, "SELECT to_regclass('dpglm_journals') IS NOT NULL")[0][0]:
            return None
        rows = self._execute(conn, "SELECT journal_id, format, meta, hash FROM dpglm_journals WHERE name = %s",
                             (self.name,))
        return None if not rows else (rows[0][0], rows[0][1], rows[0][2], rows[0][3])

    def _read_all(self, conn: psycopg.Connection[Any]) -> list[Event]:
        """Every row, chain-checked against the head, in one consistent snapshot."""
        self._execute(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            head = self._execute(conn, "SELECT seq, hash FROM dpglm_heads WHERE journal_id = %s", (self.journal_id,))
            events = self._verify(self._execute(conn, _ROWS, (self.journal_id, 0)), head)
            self._execute(conn, "COMMIT")
        except BaseException:
            self._rollback(conn)
            raise
        return events

    def _verify(self, rows: list[Any], head: list[Any]) -> list[Event]:
        """Check ``rows`` (after this store's last seq) chain on from it and end at the head row; advance."""
        if len(head) != 1:
            raise JournalCorruptError(f"journal {self.path}: its head row is missing")
        head_seq, head_hash = int(head[0][0]), head[0][1]
        if head_seq < self._last_seq or (head_seq == self._last_seq and head_hash != self._last_hash):
            raise JournalCorruptError(
                f"journal {self.path} went back from row {self._last_seq} to row {head_seq} under an open ledger: "
                "the server lost committed rows (an older image restored, or an asynchronous failover); they are "
                "spent budget, so nothing more is charged"
            )
        events: list[Event] = []
        hashes: list[str] = []
        seq, digest = self._last_seq, self._last_hash
        for row_seq, kind, account, text, previous, stored in rows:
            if row_seq != seq + 1:
                raise JournalCorruptError(f"journal {self.path}: row {seq + 1} is missing (the next row is {row_seq})")
            if previous != digest or stored != row_hash(digest, row_seq, kind, account, text):
                raise JournalCorruptError(f"journal {self.path}: row {row_seq} is damaged (its hash does not match "
                                          f"its contents or the previous row); rows 1..{seq} read back intact")
            try:
                payload = json.loads(text)
            except ValueError:
                raise JournalCorruptError(f"journal {self.path}: row {row_seq} is not valid JSON") from None
            events.append((row_seq, kind, account, payload))
            seq, digest = row_seq, stored
            hashes.append(stored)
        if (seq, digest) != (head_seq, head_hash):
            raise JournalCorruptError(f"journal {self.path}: its head records row {head_seq} but the rows end at "
                                      f"row {seq}")
        self._hashes.extend(hashes)
        self._last_seq, self._last_hash = seq, digest
        return events

    def _check_anchor(self, anchored: Anchor | None) -> None:
        """Refuse a database behind this host's anchor; record and advance the anchor (unless read-only)."""
        self.anchors.check_replaced(self.journal_id)
        if anchored is not None:
            if anchored.seq > self._last_seq:
                raise JournalCorruptError(
                    f"journal {self.path} ends at row {self._last_seq} but this host's anchor "
                    f"{self.anchors.path(self.journal_id)} records row {anchored.seq}: rows "
                    f"{self._last_seq + 1}..{anchored.seq} were lost (an older database image restored, or an "
                    "asynchronous failover); they are spent budget, so it is not charged"
                )
            if self._hashes[anchored.seq] != anchored.digest:
                raise JournalCorruptError(f"journal {self.path}: row {anchored.seq} is not the row this host's "
                                          "anchor recorded: the database is another copy of the journal, which "
                                          "has diverged")
        if not self.read_only:
            self.anchors.record_id(self.journal_id)
            self.anchors.advance(Anchor(self.journal_id, self._last_seq, self._last_hash))

    # ----- reading and charging ------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any]:
        """The header's budget and relation (verified at open)."""
        return dict(self.meta)

    def events(self) -> list[Event]:
        """The rows read at open, verified: (seq, kind, account path, payload)."""
        return list(self._events)

    @contextmanager
    def transaction(self) -> Iterator[PostgresTransaction]:
        """Lock the head row, read what others committed, let the caller append; COMMIT on a clean exit.

        On an exception in the block the transaction rolls back and the
        exception propagates: nothing is appended. A read-only store takes no
        lock (a read-only transaction) and its ``append`` raises
        :class:`~accounting.journal.JournalReadOnlyError`.
        """
        if self._closed:
            raise RuntimeError(f"journal {self.path} is closed")
        conn, new_events = self._begin()
        tx = PostgresTransaction(self, conn, new_events)
        try:
            yield tx
        except BaseException:
            self._rollback(conn)
            raise
        self._commit(conn, tx)

    def _begin(self) -> tuple[psycopg.Connection[Any], list[Event]]:
        """BEGIN, lock the head, read and check the new rows and this host's anchor (reconnecting if needed)."""
        deadline = time.monotonic() + self.reconnect_seconds
        while True:
            conn = self._conn
            if conn is None or conn.closed or conn.broken:
                conn = self._reconnect(deadline)
            try:
                self._execute(conn, "BEGIN READ ONLY" if self.read_only else "BEGIN")
                head = self._execute(conn, "SELECT seq, hash FROM dpglm_heads WHERE journal_id = %s"
                                     + ("" if self.read_only else " FOR UPDATE"), (self.journal_id,))
                rows = self._execute(conn, _ROWS, (self.journal_id, self._last_seq))
            except JournalUnavailableError:
                if time.monotonic() < deadline and (conn.closed or conn.broken):
                    continue  # nothing was written: start again on a new connection
                self._rollback(conn)
                raise
            except BaseException:
                self._rollback(conn)
                raise
            try:
                new_events = self._verify(rows, head)
                self._check_live_anchor()
            except BaseException:
                self._rollback(conn)
                raise
            return conn, new_events

    def _check_live_anchor(self) -> None:
        anchored = self.anchors.read(self.journal_id)
        if anchored is not None and (anchored.seq > self._last_seq or self._hashes[anchored.seq] != anchored.digest):
            raise JournalCorruptError(
                f"journal {self.path} ends at row {self._last_seq} but this host's anchor records row "
                f"{anchored.seq} (hash {anchored.digest[:12]}…): the server lost or replaced committed rows (an older "
                "image restored, or an asynchronous failover); they are spent budget, so nothing more is charged"
            )

    def _commit(self, conn: psycopg.Connection[Any], tx: PostgresTransaction) -> None:
        """Update the head and COMMIT; if the answer is lost, read the charge id back before granting."""
        if not tx.pending:
            self._rollback(conn)  # read-only transaction: nothing to make durable
            return
        seq, digest, charge_id = tx.pending[-1]
        try:
            self._execute(conn, "UPDATE dpglm_heads SET seq = %s, hash = %s WHERE journal_id = %s",
                          (seq, digest, self.journal_id))
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except psycopg.Error as error:
            if not (conn.closed or conn.broken):
                self._rollback(conn)
                raise self._failure(conn, error) from None
            self._read_back(seq, digest, charge_id, _first_line(error))
        # the rows become this store's only once anchored: if the anchor write fails, the caller is refused and
        # the committed rows come back in a later ``new_events`` (counted, never granted)
        self.anchors.advance(Anchor(self.journal_id, seq, digest))
        self._hashes.extend(pending_hash for _, pending_hash, _ in tx.pending)
        self._last_seq, self._last_hash = seq, digest

    def _read_back(self, seq: int, digest: str, charge_id: uuid.UUID, why: str) -> None:
        """After a lost COMMIT answer: return if the row committed, raise (charge refused) if not or unknown."""
        deadline = time.monotonic() + self.reconnect_seconds
        try:
            conn = self._reconnect(deadline)
            self._execute(conn, "BEGIN")
            # wait for the head lock: the interrupted transaction has then committed or rolled back for good
            self._execute(conn, "SELECT seq FROM dpglm_heads WHERE journal_id = %s FOR UPDATE", (self.journal_id,))
            found = self._execute(conn, "SELECT seq, hash FROM dpglm_rows WHERE charge_id = %s", (charge_id,))
            self._rollback(conn)
        except JournalUnavailableError:
            raise JournalUnavailableError(
                f"journal {self.path}: the connection was lost during COMMIT ({why}) and the server did not come "
                f"back within {self.reconnect_seconds:g} s: charge refused (if it committed, it is spent, not granted)"
            ) from None
        self.read_backs[0 if found else 1] += 1
        if not found:
            raise JournalUnavailableError(f"journal {self.path}: the connection was lost during COMMIT ({why}); "
                                          "the charge is not in the journal: charge refused")
        if (int(found[0][0]), found[0][1]) != (seq, digest):
            raise JournalCorruptError(f"journal {self.path}: charge {charge_id} is row {found[0][0]}, not the row "
                                      f"{seq} it was written as")

    def _rollback(self, conn: psycopg.Connection[Any]) -> None:
        """Roll back if the connection still lives (a dead one has rolled back on the server)."""
        if conn.closed or conn.broken:
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            conn.close()

    def close(self) -> None:
        """Close the connection; later charges raise ``RuntimeError``."""
        self._closed = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
