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
- **One transaction per charge, two round trips, one flush shared by many.**
  Round trip 1: ``BEGIN``; ``SELECT … FOR UPDATE`` of the head row (waiters
  queue on the row lock in arrival order: no serialisation failures to retry,
  no polling); the rows others committed since this store last looked. The
  client checks their chain, the caller replays them, checks the budget and
  appends. Round trip 2: ``INSERT`` the rows, update the head, ``COMMIT``
  with ``synchronous_commit`` off for this transaction only — the head lock is
  released as soon as the commit record is in the server's WAL buffers, not
  after its flush — then, in the same message, a *flush barrier*: a one-row
  transaction that commits with the session's durable setting, so its commit
  waits until the WAL is flushed past it, and with it past the charge's own
  commit. The receipt is returned only after the barrier. Charges of many
  processes thus hold the lock for their round trip, not for a flush, and
  their barriers share the server's flushes (group commit). Why this is as
  durable as a synchronous commit: docs/threat-model.md, "Granted means durable".
- **A commit whose answer is lost** (the connection died during round trip 2):
  reconnect, wait for the head lock (so the old transaction has ended), look
  the charge id up and commit that transaction durably (a flush barrier
  itself): present, the charge is granted; absent, refused. If the server does
  not come back in time the charge is refused and its row, if committed, is
  spent but never granted (over-counting is safe).
- **Rollbacks of the server** (an older image restored, an asynchronous
  failover) are caught by the host's witness (:mod:`accounting.journal.witness`)
  and, while a store is open, by the head moving back under it.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from accounting.journal.anchor import Anchor
from accounting.journal.errors import (
    JournalCorruptError,
    JournalDiskFullError,
    JournalReadOnlyError,
    JournalReplacedError,
)
from accounting.journal.rows import FORMAT, canonical, header_hash, row_hash
from accounting.journal.store import Event
from accounting.journal.witness import Witness, default_anchor_dir

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
_HEAD = "SELECT seq, hash FROM dpglm_heads WHERE journal_id = %s"
#: a transaction that writes one WAL record and commits with the session's (durable) synchronous_commit:
#: its commit returns once the server's WAL is flushed past it, so past every commit before it
_BARRIER = "SELECT pg_logical_emit_message(true, 'dpglm', '')"
#: a store that last read the rows longer ago than this (and saw others' rows then) reads them again without the
#: lock before a charge, so that the rows replayed under the lock are only those committed meanwhile
_STALE_SECONDS = 0.1
_SERVER_LOST = "an older database image restored, or an asynchronous failover"
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


class PostgresTransaction:
    """One charge's transaction (yielded by :meth:`PostgresJournal.transaction`).

    ``new_events`` are the rows other stores committed since this one last
    looked, chain-checked, in seq order; :meth:`append` adds rows that commit
    when the ``with`` block exits cleanly.
    """

    def __init__(self, store: PostgresJournal, new_events: list[Event]) -> None:
        self.new_events = new_events
        self._store = store
        self._seq = store._last_seq
        self._hash = store._last_hash
        #: the rows to insert at commit: (seq, kind, account, payload text, previous hash, hash, charge id)
        self.pending: list[tuple[int, str, str, str, str, str, uuid.UUID]] = []

    def append(self, kind: str, account: str, payload: dict[str, Any]) -> int:
        """Chain one row (sent and committed at the end of the block, in one round trip) and return its seq."""
        if self._store.read_only:
            raise JournalReadOnlyError(f"journal {self._store.path} was opened read-only: it can be shown, "
                                       "not charged")
        text = json.dumps(payload)
        seq = self._seq + 1
        digest = row_hash(self._hash, seq, kind, account, text)
        self.pending.append((seq, kind, account, text, self._hash, digest, uuid.uuid4()))
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
        Read and check, never write (not even the witness); charging raises
        :class:`~accounting.journal.JournalReadOnlyError`.
    anchor_dir : str, optional
        This host's witness directory (default :func:`accounting.journal.witness.default_anchor_dir`).
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
        #: whether the flush barrier may be used (else each commit is synchronous and holds the lock for its flush)
        self.grouped = False
        #: connections made again after one was lost, and lost COMMIT answers read back (granted, refused)
        self.reconnects = 0
        self.read_backs = [0, 0]
        self.anchors: Witness | None = None
        self._unreturned: list[Event] = []  # rows read after this store's last commit, not yet handed out
        self._looked = time.monotonic()  # when this store last read the rows
        self._others = False  # whether that read found rows of others
        try:
            self._conn = self._connect()
            info = self._conn.info
            location = f"{info.host}:{info.port}/{info.dbname}?journal={self.name}"
            self.anchors = Witness(anchor_dir or default_anchor_dir(), location, self.path)
            self._open(self._conn, create)
            # read the witness before the rows: it then records nothing the snapshot below cannot see
            witnessed = self.anchors.read(self.journal_id)
            self._events = self._read_all(self._conn)
            flushed = not self.read_only and self._flush(self._conn)
            self._durable_seq = self._last_seq if flushed else 0
            self._check_anchor(witnessed, record=flushed)
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
        assert self.anchors is not None
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
            head = self._execute(conn, _HEAD, (self.journal_id,))
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
            self._went_back(head_seq)
        events = self._chain(rows)
        if (self._last_seq, self._last_hash) != (head_seq, head_hash):
            raise JournalCorruptError(f"journal {self.path}: its head records row {head_seq} but the rows end at "
                                      f"row {self._last_seq}")
        return events

    def _chain(self, rows: list[Any]) -> list[Event]:
        """Check that ``rows`` chain on from the last row this store read; advance past them."""
        events: list[Event] = []
        hashes: list[str] = []
        seq, digest = self._last_seq, self._last_hash
        for row_seq, kind, account, text, previous, stored in rows:
            if row_seq != seq + 1:
                raise JournalCorruptError(f"journal {self.path}: row {seq + 1} is missing (the next row is {row_seq})")
            if previous != digest and seq == self._last_seq > self._durable_seq:
                self._went_back(seq - 1)  # our last row was replaced: it was lost before it was flushed
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
        self._hashes.extend(hashes)
        self._last_seq, self._last_hash = seq, digest
        self._looked = time.monotonic()
        return events

    def _went_back(self, head_seq: int) -> None:
        """The head is behind what this store has read: rows the server had committed are gone.

        Rows up to ``_durable_seq`` were flushed before this store relied on
        them: losing one is a rollback of the server (an older image restored,
        an asynchronous failover). Rows after it may have been visible without
        being flushed yet — committed by another client whose flush barrier
        had not returned, so no receipt was given for them — and a crash of the
        server loses them; this store counted them, so it must be opened again.
        """
        lost = f"rows {head_seq + 1}..{self._last_seq}" if head_seq + 1 < self._last_seq else f"row {self._last_seq}"
        if head_seq < self._durable_seq or (head_seq == self._durable_seq and head_seq == self._last_seq):
            raise JournalCorruptError(
                f"journal {self.path} went back from row {self._last_seq} to row {head_seq} under an open ledger: "
                f"the server lost committed rows (an older image restored, or an asynchronous failover); they are "
                "spent budget, so nothing more is charged"
            )
        self._closed = True
        raise JournalReplacedError(
            f"journal {self.path}: the server came back without {lost}, which it had committed but not yet flushed "
            "when it stopped (a crash); no receipt was returned for them, but this ledger counted them: close it "
            "and open the journal again"
        )

    def _flush(self, conn: psycopg.Connection[Any]) -> bool:
        """Make every row read so far durable; False if this role may not (it cannot charge either).

        The rows read may include others' commits whose flush barrier has not
        returned yet: a durable commit after them (the head lock is a WAL
        record) flushes them, before the witness may record them.
        """
        try:
            self._run(conn, "BEGIN; " + _HEAD + " FOR UPDATE; COMMIT", (self.journal_id,))
        except JournalReadOnlyError:
            self._rollback(conn)
            return False
        return True

    def _check_anchor(self, witnessed: Anchor | None, *, record: bool) -> None:
        """Refuse a database behind this host's witness; with ``record``, record and advance the witness."""
        assert self.anchors is not None
        self.anchors.check_replaced(self.journal_id)
        self.anchors.check(witnessed, self._last_seq, self._hashes, _SERVER_LOST)
        if record:
            self.anchors.record_id(self.journal_id)
            self.anchors.advance(Anchor(self.journal_id, self._last_seq, self._last_hash))

    # ----- reading and charging ------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any]:
        """The header's budget and relation (verified at open)."""
        return dict(self.meta)

    def events(self) -> list[Event]:
        """The rows read at open, verified: (seq, kind, account path, payload)."""
        return list(self._events)

    def catch_up(self) -> list[Event]:
        """Rows others committed since this store last looked, read without the head lock.

        The rows committed during this store's last flush barrier come with its
        answer (no round trip). If that was longer than ``_STALE_SECONDS`` ago
        and others were charging then, one lock-free round trip reads the rest,
        so that the replay of a host that charges rarely, among many, happens
        here rather than while it holds the lock. Anything wrong here is left
        for the transaction, which reads the same rows under the lock.
        """
        conn = self._conn
        fresh: list[Event] = []
        if (not self._closed and not self.read_only and conn is not None and not conn.closed and not conn.broken
                and self._others and time.monotonic() - self._looked > _STALE_SECONDS):
            with contextlib.suppress(JournalUnavailableError, JournalCorruptError):
                (rows,) = self._run(conn, _ROWS, (self.journal_id, self._last_seq))
                fresh = self._chain(rows)
        caught, self._unreturned = self._unreturned + fresh, []
        return caught

    @contextmanager
    def transaction(self) -> Iterator[PostgresTransaction]:
        """Lock the head row, read what others committed, let the caller append; commit on a clean exit.

        On an exception in the block the transaction rolls back and the
        exception propagates: nothing is appended. A read-only store takes no
        lock (a read-only transaction) and its ``append`` raises
        :class:`~accounting.journal.JournalReadOnlyError`.
        """
        if self._closed:
            raise RuntimeError(f"journal {self.path} is closed")
        conn, new_events = self._begin()
        self._others = bool(new_events)
        caught, self._unreturned = self._unreturned, []
        tx = PostgresTransaction(self, caught + new_events)
        try:
            yield tx
        except BaseException:
            self._rollback(conn)
            raise
        self._commit(conn, tx)

    def _begin(self) -> tuple[psycopg.Connection[Any], list[Event]]:
        """Round trip 1: BEGIN, lock the head, read the new rows; check them and this host's witness."""
        assert self.anchors is not None
        deadline = time.monotonic() + self.reconnect_seconds
        query = ("BEGIN READ ONLY; " + _HEAD if self.read_only else "BEGIN; " + _HEAD + " FOR UPDATE") + "; " + _ROWS
        while True:
            conn = self._conn
            if conn is None or conn.closed or conn.broken:
                conn = self._reconnect(deadline)
            witnessed = self.anchors.read(self.journal_id)  # before the rows (a read-only store takes no lock)
            try:
                _, head, rows = self._run(conn, query, (self.journal_id, self.journal_id, self._last_seq))
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
                self.anchors.check(witnessed, self._last_seq, self._hashes, _SERVER_LOST)
            except BaseException:
                self._rollback(conn)
                raise
            return conn, new_events

    def _commit(self, conn: psycopg.Connection[Any], tx: PostgresTransaction) -> None:
        """Round trip 2: insert, update the head, COMMIT, flush barrier; a lost answer is read back."""
        if not tx.pending:
            self._rollback(conn)  # read-only transaction: nothing to make durable
            return
        seq, _, _, _, _, digest, charge_id = tx.pending[-1]
        inserts = "; ".join(["INSERT INTO dpglm_rows VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"] * len(tx.pending))
        ending = "SET LOCAL synchronous_commit TO off; COMMIT; " + _BARRIER if self.grouped else "COMMIT"
        params = tuple(value for row in tx.pending for value in (self.journal_id, *row))
        later: list[Any] = []
        try:
            # after the flush, in the same message: the rows others committed meanwhile, read without the lock
            *_, later = self._run(conn, f"{inserts}; UPDATE dpglm_heads SET seq = %s, hash = %s WHERE journal_id = "
                                  f"%s; {ending}; {_ROWS}", (*params, seq, digest, self.journal_id, self.journal_id,
                                                              seq))
        except JournalUnavailableError as error:
            # the answer was lost: whether the row committed (and was flushed) is read back
            self._read_back(seq, digest, charge_id, str(error))
        except Exception:
            if conn.closed or conn.broken or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                self._rollback(conn)  # failed before COMMIT: nothing was written
                raise
            # COMMIT took effect and the barrier failed: read back, which flushes
            self._read_back(seq, digest, charge_id, "the flush after COMMIT failed")
        except BaseException:
            self._rollback(conn)  # interrupted: no receipt; a row that committed comes back as a new event
            raise
        # durable: the rows become this store's only once witnessed; if the witness write fails, the caller is
        # refused and the committed rows come back in a later ``new_events`` (counted, never granted)
        assert self.anchors is not None
        self.anchors.advance(Anchor(self.journal_id, seq, digest))
        self._hashes.extend(row[5] for row in tx.pending)
        self._last_seq, self._last_hash = seq, digest
        self._durable_seq = seq
        with contextlib.suppress(JournalCorruptError):  # nothing advanced: read again under the lock, refused there
            self._unreturned = self._chain(later)
            self._others = self._others or bool(later)

    def _read_back(self, seq: int, digest: str, charge_id: uuid.UUID, why: str) -> None:
        """After a lost COMMIT answer: return if the row committed durably, raise (charge refused) if not or unknown.

        One transaction: wait for the head lock (the interrupted transaction has then committed or rolled back for
        good), look the charge id up, COMMIT. The lock is a WAL record, so this COMMIT waits for the flush like any
        durable commit: a row it finds is flushed when it returns.
        """
        deadline = time.monotonic() + self.reconnect_seconds
        try:
            conn = self._reconnect(deadline)
            _, _, found, _ = self._run(conn, "BEGIN; " + _HEAD + " FOR UPDATE; "
                                       "SELECT seq, hash FROM dpglm_rows WHERE charge_id = %s; COMMIT",
                                       (self.journal_id, charge_id))
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
        """Close the connection and flush this host's witness; later charges raise ``RuntimeError``."""
        self._closed = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self.anchors is not None:
            self.anchors.close()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
