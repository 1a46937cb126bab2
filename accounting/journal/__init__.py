"""The journal: where a ledger's charges are made durable before they are granted.

One room for one subsystem (docs/design.md, "accounting/journal/"):

- :mod:`~accounting.journal.store`: the store contract a ledger sees
  (``JournalStore``, ``Transaction``, ``Event``) and ``open_journal``, which
  picks a store from what the user passed;
- :mod:`~accounting.journal.sqlite`: the file journal, one host
  (:class:`Journal`), with its chained rows (:mod:`~accounting.journal.rows`),
  its side lock and local-disk check (:mod:`~accounting.journal.sidelock`), the
  checks of what its path holds (:mod:`~accounting.journal.paths`) and its
  anchor (:mod:`~accounting.journal.anchor`);
- :mod:`~accounting.journal.postgres`: the PostgreSQL journal, many hosts
  (imported only when a ``postgresql://`` URL is opened: it needs psycopg;
  its connection to the server: :mod:`~accounting.journal.pg_session`),
  with a throwaway server for tests and examples (:mod:`~accounting.journal._pgserver`);
- :mod:`~accounting.journal.witness`: this host's witness of every journal,
  kept outside the journal's directory or server, so that a restored backup is
  refused (``accounting.journal.pg_anchor``, its name when it served PostgreSQL
  journals only, is an alias);
- :mod:`~accounting.journal.persistence`: what a ledger writes into a journal
  and how it replays it; :mod:`~accounting.journal.snapshot`: the snapshot rows
  a ledger opens from (its state, not its history);
  :mod:`~accounting.journal.verify`: ``dpglm ledger verify``, every row and
  snapshot checked;
- :mod:`~accounting.journal.errors`: the errors every store raises, one line
  each (docs/threat-model.md says which fault raises which).

This package exports what the single module ``accounting/journal.py`` exported
before the journal had a room of its own.
"""

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
)
from accounting.journal.rows import FORMAT
from accounting.journal.sqlite import Journal

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
