"""The seam between a :class:`~accounting.ledger.Ledger` and the durable journal behind it.

A ledger depends on the small :class:`JournalStore` protocol below, not on a
storage engine. Two stores implement it: the SQLite file journal
(:class:`accounting.journal.sqlite.Journal`, one host) and the PostgreSQL journal
(``accounting.journal.postgres.PostgresJournal``, many hosts; imported lazily,
only when a ``postgresql://`` or ``postgres://`` URL is given).
:func:`open_journal` picks one. docs/accounting.md ("The journal") and
docs/threat-model.md describe the guarantees.

The contract a store keeps (every store, every method):

- ``path`` (str): what errors name: the file path, or the URL with any password removed.
- ``journal_id`` (str): the random id fixed when the journal was created.
- ``read_only`` (bool): if true, :meth:`Transaction.append` raises
  :class:`~accounting.journal.JournalReadOnlyError`.
- ``read_meta() -> dict``: the header's ``{"budget": ..., "relation": ...}``, verified.
- ``snapshot() -> Event | None``: the last ``"snapshot"`` row present when the
  store was opened (:mod:`accounting.journal.snapshot`), checked against its own
  contents, or None; an :data:`Event` is ``(seq, kind, account, payload)`` with
  ``seq`` 1, 2, 3, ...
- ``tail() -> Iterator[Event]``: the rows after that snapshot (every row if there
  is none) present at open, chain-verified from it, in seq order, one at a time.
  The ledger loads the snapshot and replays these at open: opening costs the
  state and the rows since the last snapshot, not the history, and holds no
  list of rows. The store checked them at open (and the anchor and witness
  against them); a store may read them again here, and must then refuse rows
  that changed since.
- ``history() -> Iterator[Event]``: every row from row 1, chain-verified from
  the header, one at a time, in one consistent read (``dpglm ledger verify``:
  :mod:`accounting.journal.verify`); rows before the last snapshot are read
  only here. Consume it before the store's next transaction.
- ``transaction()``: a context manager. On entry it takes the journal's
  cross-process lock (a read-only store may take none) and yields a
  :class:`Transaction`, whose ``new_events`` are the rows committed *by others*
  since this store last looked (chain-verified, in seq order, continuing from
  the last seq this store has seen). Those rows count as seen once yielded,
  whatever happens next: the ledger replays them before anything else.
  ``append(kind, account, payload) -> seq`` adds one hash-chained row.
  A clean exit commits durably (and, for a file journal, advances the anchor)
  and then releases the lock; an exception rolls back and releases the lock.
  If the exit raises after the commit took effect (the anchor write failed, or
  the connection died during COMMIT and could not be read back), the row is not
  treated as this store's: it comes back in a later ``new_events``, so a row
  that is in the journal is always counted, at worst without a receipt.
  Transactions on one store are not nested and not shared across threads: the
  ledger holds its own lock around each one.
- ``catch_up() -> list[Event]``: rows committed by others that the store has
  already read and verified *outside* the lock — after its last commit (issue
  32) — and not yet handed out, in seq order, continuing from the last seq
  handed out; they count as seen once returned, like ``new_events``. The
  ledger replays them before it starts a transaction, so that the rows it must
  replay while holding the lock are only those committed since. A store may
  always return ``[]``; ``new_events`` then carries every row.
- ``close()``: idempotent; the store refuses further transactions.

Errors are the classes of :mod:`accounting.journal` (``JournalCorruptError``,
``JournalMismatchError``, ``JournalReadOnlyError``, ``JournalReplacedError``,
``JournalDiskFullError``, ``JournalBusyError``), one line each, naming ``path``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

__all__ = ["Event", "JournalStore", "Transaction", "is_postgres_url", "open_journal"]

Event = tuple[int, str, str, dict[str, Any]]
"""One journal row: (seq, kind, account path, payload)."""

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class Transaction(Protocol):
    """What :meth:`JournalStore.transaction` yields: rows others added, and a way to add one."""

    @property
    def new_events(self) -> Sequence[Event]:
        """Rows committed by others since this store last looked, verified, in seq order."""
        ...

    def append(self, kind: str, account: str, payload: dict[str, Any]) -> int:
        """Add one chained row (committed when the transaction exits cleanly); return its seq."""
        ...


@runtime_checkable
class JournalStore(Protocol):
    """A durable, hash-chained event log shared by every ledger opened on it (see the module docstring)."""

    @property
    def path(self) -> str: ...

    @property
    def journal_id(self) -> str: ...

    @property
    def read_only(self) -> bool: ...

    def read_meta(self) -> dict[str, Any]: ...

    def snapshot(self) -> Event | None: ...

    def tail(self) -> Iterator[Event]: ...

    def history(self) -> Iterator[Event]: ...

    def catch_up(self) -> list[Event]: ...

    def transaction(self) -> AbstractContextManager[Transaction]: ...

    def close(self) -> None: ...


def is_postgres_url(journal: object) -> bool:
    """Whether ``journal`` is a PostgreSQL connection URL (``postgresql://`` or ``postgres://``)."""
    return isinstance(journal, str) and journal.startswith(_POSTGRES_SCHEMES)


def open_journal(journal: str | os.PathLike[str], *, create: dict[str, Any] | None = None,
                 read_only: bool = False) -> JournalStore:
    """Open (or, with ``create``, create) the store named by ``journal``.

    A ``postgresql://`` or ``postgres://`` URL opens
    ``accounting.journal.postgres.PostgresJournal(url, create=..., read_only=...)``;
    anything else is a file path for :class:`accounting.journal.Journal`.
    ``create`` is the header (``{"budget": ..., "relation": ...}``) of a journal
    that does not exist yet; None: it must exist.
    """
    if is_postgres_url(journal):
        import importlib

        module = importlib.import_module("accounting.journal.postgres")  # lazily: psycopg only when asked
        store: JournalStore = module.PostgresJournal(journal, create=create, read_only=read_only)
        return store
    from accounting.journal.sqlite import Journal

    return Journal(journal, create=create, read_only=read_only)
