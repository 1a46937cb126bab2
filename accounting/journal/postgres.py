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
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from accounting.journal.anchor import Anchor
from accounting.journal.errors import JournalCorruptError, JournalReadOnlyError, JournalReplacedError
from accounting.journal.pg_session import JournalNotDurableError, JournalUnavailableError, PgSession, parse_url
from accounting.journal.rows import FORMAT, SNAPSHOT, Chain, canonical, checked, header_hash, row_hash
from accounting.journal.store import Event
from accounting.journal.witness import RecentHashes, Witness, default_anchor_dir

__all__ = ["JournalNotDurableError", "JournalUnavailableError", "PostgresJournal", "PostgresTransaction", "parse_url"]

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
_ROWS_UPTO = ("SELECT seq, kind, account, payload, prev, hash FROM dpglm_rows WHERE journal_id = %s AND seq > %s "
              "AND seq <= %s ORDER BY seq")
_ROW = "SELECT seq, kind, account, payload, prev, hash FROM dpglm_rows WHERE journal_id = %s AND seq = %s"
#: the last snapshot row, found by scanning the primary key back from the end (the rows after it only)
_LAST_SNAPSHOT = (f"SELECT seq, kind, account, payload, prev, hash FROM dpglm_rows WHERE journal_id = %s "
                  f"AND kind = '{SNAPSHOT}' ORDER BY seq DESC LIMIT 1")
_BATCH = 2000  # rows read per round trip (opening and verifying hold no list of every row)
_HEAD = "SELECT seq, hash FROM dpglm_heads WHERE journal_id = %s"
#: a transaction that writes one WAL record and commits with the session's (durable) synchronous_commit:
#: its commit returns once the server's WAL is flushed past it, so past every commit before it
_BARRIER = "SELECT pg_logical_emit_message(true, 'dpglm', '')"
#: a store that last read the rows longer ago than this (and saw others' rows then) reads them again without the
#: lock before a charge, so that the rows replayed under the lock are only those committed meanwhile
_STALE_SECONDS = 0.1
_SERVER_LOST = "an older database image restored, or an asynchronous failover"


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


class PostgresJournal(PgSession):
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
        super().__init__(url, read_only, reconnect_seconds)
        self._closed = False
        #: lost COMMIT answers read back (granted, refused)
        self.read_backs = [0, 0]
        self.anchors: Witness | None = None
        self._unreturned: list[Event] = []  # rows read after this store's last commit, not yet handed out
        self._looked = time.monotonic()  # when this store last read the rows
        self._others = False  # whether that read found rows of others
        self._durable_seq = 0  # the last row known flushed when this store relied on it
        self._snapshot: Event | None = None  # the last snapshot row at open (accounting.journal.snapshot)
        self._tail_from = (0, "")  # (seq, hash) the rows after the snapshot chain from
        self._opened = (0, "")  # (seq, hash) of the last row at open
        self._tail: list[Event] | None = None  # the rows after the snapshot, if they were one batch
        self._hashes = RecentHashes("")  # for this host's witness checks (accounting.journal.witness)
        try:
            self._conn = self._connect()
            info = self._conn.info
            location = f"{info.host}:{info.port}/{info.dbname}?journal={self.name}"
            self.anchors = Witness(anchor_dir or default_anchor_dir(), location, self.path)
            self._open(self._conn, create)
            # read the witness before the rows: it then records nothing the snapshot below cannot see
            witnessed = self.anchors.read(self.journal_id)
            self._read_open(self._conn)
            flushed = not self.read_only and self._flush(self._conn)
            self._durable_seq = self._last_seq if flushed else 0
            self._check_anchor(witnessed, record=flushed)
        except BaseException:
            self.close()
            raise

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
        self._hashes = RecentHashes(digest)

    def _find(self, conn: psycopg.Connection[Any]) -> tuple[str, str, str, str] | None:
        if not self._execute(conn, "SELECT to_regclass('dpglm_journals') IS NOT NULL")[0][0]:
            return None
        rows = self._execute(conn, "SELECT journal_id, format, meta, hash FROM dpglm_journals WHERE name = %s",
                             (self.name,))
        return None if not rows else (rows[0][0], rows[0][1], rows[0][2], rows[0][3])

    def _read_open(self, conn: psycopg.Connection[Any]) -> None:
        """The last snapshot row and the rows after it, chain-checked against the head, in one consistent snapshot.

        The rows are checked a batch at a time; a tail of one batch is kept for :meth:`tail`, a longer one (a journal
        without snapshots) is read again there.
        """
        try:
            _, head, last = self._run(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; " + _HEAD + "; "
                                      + _LAST_SNAPSHOT, (self.journal_id, self.journal_id))
            if last:
                self._snapshot = checked(self.path, tuple(last[0]), last[0][4], int(last[0][0]))
                self._last_seq, self._last_hash = self._snapshot[0], last[0][5]
            self._tail_from = (self._last_seq, self._last_hash)
            kept: list[Event] | None = None  # the tail, if it is one batch
            for number, rows in enumerate(self._batches(conn, self._last_seq, None)):
                events = self._chain(rows, opening=True)
                kept = events if number == 0 and len(rows) < _BATCH else None
            self._tail = [] if self._last_seq == self._tail_from[0] else kept
            self._check_head(head)
            self._execute(conn, "COMMIT")
        except BaseException:
            self._rollback(conn)
            raise
        self._opened = (self._last_seq, self._last_hash)

    def _batches(self, conn: psycopg.Connection[Any], after: int, upto: int | None) -> Iterator[list[Any]]:
        """The rows after row ``after`` (up to row ``upto``), :data:`_BATCH` at a time, one round trip each (inside
        the caller's transaction: one consistent read)."""
        while True:
            if upto is None:
                rows = self._execute(conn, _ROWS + " LIMIT %s", (self.journal_id, after, _BATCH))
            else:
                rows = self._execute(conn, _ROWS_UPTO + " LIMIT %s", (self.journal_id, after, upto, _BATCH))
            if rows:
                yield rows
            if len(rows) < _BATCH:
                return
            after = int(rows[-1][0])

    def _row(self, conn: psycopg.Connection[Any], seq: int) -> tuple[Event, str]:
        """Row ``seq`` and its hash, checked against its own contents (not against the rows before it)."""
        found = self._execute(conn, _ROW, (self.journal_id, seq))
        if not found:
            raise JournalCorruptError(f"journal {self.path}: row {seq} is missing")
        return checked(self.path, tuple(found[0]), found[0][4], seq), found[0][5]

    def _check_witness(self, conn: psycopg.Connection[Any], witnessed: Anchor | None) -> None:
        """Refuse rows that end before ``witnessed`` (read before them) or hold another row where it points."""
        assert self.anchors is not None
        if witnessed is None or witnessed.seq > self._last_seq:
            self.anchors.check(witnessed, self._last_seq, None, _SERVER_LOST)
            return
        digest = self._hashes.digest_at(witnessed.seq, (self._last_seq, self._last_hash),
                                        lambda seq: self._row(conn, seq)[1])
        self.anchors.check(witnessed, self._last_seq, {witnessed.seq: digest}, _SERVER_LOST)
        self._hashes.checked(witnessed.seq, digest)

    def _verify(self, rows: list[Any], head: list[Any]) -> list[Event]:
        """Check ``rows`` (after this store's last seq) chain on from it and end at the head row; advance."""
        if len(head) != 1:
            raise JournalCorruptError(f"journal {self.path}: its head row is missing")
        head_seq, head_hash = int(head[0][0]), head[0][1]
        if head_seq < self._last_seq or (head_seq == self._last_seq and head_hash != self._last_hash):
            self._went_back(head_seq)
        events = self._chain(rows)
        self._check_head(head)
        return events

    def _check_head(self, head: list[Any]) -> None:
        """The rows read must end at the head row."""
        if len(head) != 1:
            raise JournalCorruptError(f"journal {self.path}: its head row is missing")
        head_seq, head_hash = int(head[0][0]), head[0][1]
        if (self._last_seq, self._last_hash) != (head_seq, head_hash):
            raise JournalCorruptError(f"journal {self.path}: its head records row {head_seq} but the rows end at "
                                      f"row {self._last_seq}")

    def _chain(self, rows: list[Any], *, opening: bool = False) -> list[Event]:
        """Check that ``rows`` chain on from the last row this store read; advance past them."""
        chain = Chain(self.path, self._last_seq, self._last_hash)
        if (not opening and rows and rows[0][4] != self._last_hash
                and rows[0][0] == self._last_seq + 1 > self._durable_seq + 1):
            self._went_back(self._last_seq - 1)  # our last row was replaced: it was lost before it was flushed
        events: list[Event] = []
        for row in rows:
            events.append(chain.take(tuple(row)))
            self._hashes.remember(chain.seq, chain.digest)
        self._last_seq, self._last_hash = chain.seq, chain.digest
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
        assert self.anchors is not None and self._conn is not None
        self.anchors.check_replaced(self.journal_id)
        self._check_witness(self._conn, witnessed)
        if record:
            self.anchors.record_id(self.journal_id)
            self.anchors.advance(Anchor(self.journal_id, self._last_seq, self._last_hash))

    # ----- reading and charging ------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any]:
        """The header's budget and relation (verified at open)."""
        return dict(self.meta)

    def snapshot(self) -> Event | None:
        """The last snapshot row present at open (checked against its own contents), or None."""
        return self._snapshot

    def tail(self) -> Iterator[Event]:
        """The rows after :meth:`snapshot` present at open: those read at open if they were one batch, else read
        again and checked against the chain, a batch at a time (one consistent read)."""
        kept, self._tail = self._tail, None
        if kept is not None:
            yield from kept
            return
        yield from self._read_chain(Chain(self.path, *self._tail_from), self._opened[0])

    def history(self) -> Iterator[Event]:
        """Every row from row 1, checked against the chain from the header, a batch at a time (one consistent read:
        ``dpglm ledger verify``)."""
        yield from self._read_chain(Chain(self.path, 0, self._hashes.header), None)

    def _read_chain(self, chain: Chain, upto: int | None) -> Iterator[Event]:
        """The rows after ``chain``'s end, checked, in one consistent read: up to row ``upto``, where they must end
        as they did at open, or (None) to the head, which they must reach."""
        conn = self._conn
        if self._closed or conn is None or conn.closed or conn.broken:
            raise RuntimeError(f"journal {self.path} is closed")
        self._execute(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            head = self._execute(conn, _HEAD, (self.journal_id,))
            for rows in self._batches(conn, chain.seq, upto):
                for row in rows:
                    yield chain.take(tuple(row))
            self._execute(conn, "COMMIT")
        except BaseException:
            self._rollback(conn)
            raise
        if upto is not None and (chain.seq, chain.digest) != self._opened:
            raise JournalCorruptError(f"journal {self.path}: rows {self._tail_from[0] + 1}..{upto} changed after "
                                      "they were checked at open")
        if upto is None and (len(head) != 1 or (chain.seq, chain.digest) != (int(head[0][0]), head[0][1])
                             or chain.seq < self._opened[0]):
            raise JournalCorruptError(f"journal {self.path}: its rows end at row {chain.seq}, not at its head row or "
                                      f"after row {self._opened[0]}, where they ended at open")

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
                self._check_witness(conn, witnessed)
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
        for row in tx.pending:
            self._hashes.remember(row[0], row[5])
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

    def close(self) -> None:
        """Close the connection and flush this host's witness; later charges raise ``RuntimeError``."""
        self._closed = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self.anchors is not None:
            self.anchors.close()

