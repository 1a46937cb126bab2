"""``dpglm ledger verify``: the whole chain from row 1, and every snapshot against the replay of the rows before it.

Opening a ledger reads the header, the last snapshot row and the rows after it
(:mod:`accounting.journal.snapshot`), so a row damaged *before* the last
snapshot is not seen at open. :func:`verify` is where it is seen
(docs/threat-model.md, "Snapshots"): it opens the journal read-only as a
ledger does (header, last snapshot, rows after it, anchor and witness), then
reads every row from the header (:meth:`~accounting.journal.store.JournalStore.history`:
the hash chain, and a file journal's SQLite ``quick_check``), replays them into
a fresh in-memory ledger and, at each snapshot row s, checks that the snapshot
equals the state rows 1..s − 1 build, and that the ledger opened from the last
snapshot equals the replay of every row up to where it was opened. Any
difference is a one-line :class:`~accounting.journal.JournalCorruptError`
naming the row and the first account that differs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accounting.journal.errors import JournalCorruptError
from accounting.journal.rows import SNAPSHOT

if TYPE_CHECKING:
    from accounting.ledger import Ledger

__all__ = ["Verified", "verify"]


@dataclass(frozen=True)
class Verified:
    """What :func:`verify` checked: ``rows`` rows chained from the header, ``snapshots`` snapshot rows each equal to
    the replay before it, the ledger opened from the snapshot at ``opened_from`` (0: none) equal to the replay."""

    path: str
    rows: int
    snapshots: int
    opened_from: int


def _differs(expected: dict[str, Any], found: dict[str, Any]) -> str:
    """Which part of two snapshots differs first (an account's path, or the service rows)."""
    if expected.get("service") != found.get("service"):
        return "the service rows differ"
    want = {entry["path"]: entry for entry in expected["accounts"]}
    have = {entry.get("path"): entry for entry in found.get("accounts", [])}
    for path in list(want) + [p for p in have if p not in want]:
        if want.get(path) != have.get(path):
            name = "the root" if path == "" else repr(path)
            fields = sorted(key for key in set(want.get(path, {})) | set(have.get(path, {}))
                            if want.get(path, {}).get(key) != have.get(path, {}).get(key))
            return f"account {name} differs ({', '.join(fields)})"
    return "its form differs"


def _state(ledger: Ledger) -> dict[str, Any]:
    """The ledger's snapshot as it reads back from JSON (the form stored rows are compared in)."""
    from accounting.journal.snapshot import payload

    parsed: dict[str, Any] = json.loads(json.dumps(payload(ledger)))
    return parsed


def verify(journal: str | os.PathLike[str]) -> Verified:
    """Check every row of ``journal`` (a file path or a ``postgresql://`` URL), opened read-only; see the module.

    Raises
    ------
    JournalCorruptError
        A damaged, missing or reordered row anywhere, a file SQLite finds
        damaged, a snapshot that is not the replay of the rows before it.
    """
    from accounting.costs import cost_from_dict
    from accounting.journal.persistence import replay
    from accounting.ledger import Ledger

    opened = Ledger.from_journal(journal, read_only=True)
    with opened:
        store = opened._journal
        assert store is not None
        meta = store.read_meta()
        fresh = Ledger(cost_from_dict(meta["budget"]), relation=meta["relation"])
        at_open, snapshot = opened._seq, store.snapshot()
        opened_state = _state(opened)
        rows = snapshots = 0
        if at_open == 0 and _state(fresh) != opened_state:
            raise JournalCorruptError(f"journal {store.path}: the ledger opened from it is not the empty ledger")
        for event in store.history():
            seq, kind, _, stored = event
            if kind == SNAPSHOT:
                expected = _state(fresh)
                if stored != expected:
                    raise JournalCorruptError(
                        f"journal {store.path}: snapshot row {seq} is not the replay of rows 1..{seq - 1}: "
                        f"{_differs(expected, stored)}"
                    )
                snapshots += 1
            replay(fresh, [event])
            rows = seq
            if seq == at_open and _state(fresh) != opened_state:
                raise JournalCorruptError(
                    f"journal {store.path}: the ledger opened from "
                    f"{'snapshot row ' + str(snapshot[0]) if snapshot else 'its rows'} is not the replay of rows "
                    f"1..{seq}: {_differs(_state(fresh), opened_state)}"
                )
        return Verified(store.path, rows, snapshots, 0 if snapshot is None else snapshot[0])
