"""What a ledger writes to its journal, and how a reopened ledger reads it back.

The journal (:mod:`accounting.journal`) stores JSON payloads; this module owns
their form. Every number is an exact ``"num/den"`` string, so replaying a
journal restores the very same spend (docs/accounting.md, docs/threat-model.md):

- ``"split"``: the exact weights, the children's currencies, and each child's
  share and budget as planned (:mod:`accounting.split`), and for an rdp child
  the orders it holds (``"orders"``, journal format 3); for a split under a
  partition key, the key (``"partition"``, a str or an int, journal format 3;
  a row without it is a partition=None split); replay applies the recorded plan
  rather than planning again.
- ``"charge"`` / ``"analysis"``: the cost as requested, the cost as charged (in
  the account's currency, under the ledger's relation), mechanism, relation,
  partition key, note, and, for a dp-accounting event, its pair form
  (:mod:`accounting.events`).
- ``"stopped"`` / ``"restored"`` (journal format 3, issue 24; docs/service.md): a
  policy's clean stop after its checkpoint (checkpoint id, the seq it was written
  at, its SHA-256) and the one restore a checkpoint may have. They spend nothing;
  replay keeps them in ``ledger.service_rows`` so a restore can refuse a checkpoint
  restored before, or an older one.
- ``"snapshot"`` (issue 32): the state rows 1..s − 1 build
  (:mod:`accounting.journal.snapshot`). A ledger opens from the last one and
  replays the rows after it; replay skips the ones others write meanwhile.

A journal written for another budget or relation, naming an unknown account or
an unknown kind of event, raises :class:`~accounting.journal.JournalMismatchError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from accounting.chargeable import PartitionKey, check_partition
from accounting.costs import ORDERS, Cost, check_orders, cost_from_dict, cost_to_dict
from accounting.journal.errors import JournalMismatchError
from accounting.journal.rows import SNAPSHOT
from accounting.ladder import Ladder, legacy_ladder
from accounting.spend import CURRENCIES, Currency, in_currency, is_currency
from accounting.split import Allocation, Allocations

if TYPE_CHECKING:
    from accounting.journal.store import Event, JournalStore
    from accounting.ledger import Ledger

__all__ = ["SERVICE_KINDS", "SNAPSHOT", "charge_payload", "child_payload", "read_child", "read_split", "replay",
           "restore", "split_payload"]

SERVICE_KINDS = ("stopped", "restored")
"""Rows that spend nothing: a policy's clean stop and its restore (docs/service.md)."""


def child_payload(currency: str, allocation: Allocation) -> dict[str, Any]:
    """One child of a split row: share, budget, held and tracked orders (rdp), ladder (accounting.ladder)."""
    out: dict[str, Any] = {"share": [str(x) for x in allocation.share], "budget": [str(x) for x in allocation.budget]}
    if currency == "rdp":
        out["orders"] = [str(x) for x in allocation.orders]
        if allocation.tracked != allocation.orders:
            out["tracked"] = [str(x) for x in allocation.tracked]
    if allocation.ladder is not None:
        out["ladder"] = allocation.ladder.to_dict()
    return out


def split_payload(weights: Mapping[str, Fraction], currencies: Mapping[str, Currency], planned: Allocations,
                  partition: PartitionKey = None) -> dict[str, Any]:
    """The journal form of a split: exact weights, currencies, each child's allocation, its partition key."""
    return {
        "weights": {name: str(w) for name, w in weights.items()},
        "currency": dict(currencies),
        "children": {name: child_payload(currencies[name], allocation) for name, allocation in planned.items()},
    } | ({} if partition is None else {"partition": partition})


def read_child(child: Mapping[str, Any], currency: str, parent: str) -> Allocation:
    """Inverse of :func:`child_payload`; a top account journalled before ladders gets the filter-only ladder."""
    share = tuple(Fraction(x) for x in child["share"])
    budget = tuple(Fraction(x) for x in child["budget"])
    orders = check_orders([Fraction(x) for x in child["orders"]]) if "orders" in child else ORDERS
    tracked = check_orders([Fraction(x) for x in child["tracked"]]) if "tracked" in child else orders
    ladder: Ladder | None = None
    if "ladder" in child:
        ladder = Ladder.from_dict(child["ladder"])
    elif currency in ("zcdp", "gdp", "rdp") and parent in ("pure", "approx"):
        ladder = legacy_ladder(share[0], share[1])
    return Allocation(share, budget, orders, tracked, ladder)


def read_split(payload: Mapping[str, Any], seq: int,
               parent: str) -> tuple[dict[str, Fraction], dict[str, Currency], Allocations, PartitionKey]:
    """Inverse of :func:`split_payload` for a split of a ``parent``-currency account (``seq`` names the row)."""
    weights = {name: Fraction(w) for name, w in payload["weights"].items()}
    currencies: dict[str, Currency] = {}
    for name, chosen in payload["currency"].items():
        if not is_currency(chosen):
            raise JournalMismatchError(f"journal event {seq}: currency of {name!r} must be one of {CURRENCIES}, "
                                       f"got {chosen!r}")
        currencies[name] = chosen
    planned: Allocations = {name: read_child(c, currencies[name], parent) for name, c in payload["children"].items()}
    try:
        partition = check_partition(payload.get("partition"))
    except TypeError as why:
        raise JournalMismatchError(f"journal event {seq}: {why}") from None
    return weights, currencies, planned, partition


def charge_payload(cost: Cost, charged: Cost, mechanism: str, relation: str, partition: PartitionKey, note: str,
                   event: Any = None, from_event: bool = False,
                   position: tuple[int, ...] | None = None) -> dict[str, Any]:
    """The journal form of a granted charge (an event's pair form only if it came from ``charge_event``; the
    plan position after it, on a planned account)."""
    data: dict[str, Any] = {"cost": cost_to_dict(cost), "charged": cost_to_dict(charged), "mechanism": mechanism,
                            "relation": relation, "partition": partition, "note": note}
    if position is not None:
        data["plan_position"] = list(position)
    if from_event:
        from accounting.events import event_to_dict

        data["event"] = None if event is None else event_to_dict(event)
    return data


def restore(ledger: Ledger, journal: JournalStore, budget: Cost, wanted: dict[str, Any]) -> None:
    """Bring the fresh ``ledger`` to the end of ``journal``: its last snapshot, then the rows after it, streamed.

    Close the journal if anything fails.
    """
    try:
        meta = journal.read_meta()
        if meta != wanted:
            raise JournalMismatchError(
                f"journal {journal.path} was written for budget {cost_from_dict(meta['budget'])} "
                f"({meta['relation']}), not {budget} ({ledger.relation}); refusing to start over"
            )
        snapshot = journal.snapshot()
        if snapshot is not None:
            from accounting.journal import snapshot as snapshots

            ledger.journal_path = journal.path
            snapshots.load(ledger, snapshot[0], snapshot[3])
        replay(ledger, journal.tail())
    except BaseException:
        journal.close()
        raise


def replay(ledger: Ledger, events: Iterable[Event]) -> None:
    """Apply journalled rows (at open, or committed by other ledgers since) to ``ledger``'s accounts."""
    for seq, kind, path, payload in events:
        if seq != ledger._seq + 1:
            raise JournalMismatchError(f"journal {ledger.journal_path}: row {seq} follows row {ledger._seq}; "
                                       "the store skipped or repeated rows")
        _replay(ledger, seq, kind, path, payload)


def _replay(ledger: Ledger, seq: int, kind: str, path: str, payload: dict[str, Any]) -> None:
    account = ledger._accounts.get(path) if path else ledger.root
    if account is None:
        raise JournalMismatchError(f"journal event {seq} names unknown account {path!r}")
    if kind == "split":
        account._apply_split(*read_split(payload, seq, account.currency))
    elif kind in ("charge", "analysis"):
        charged = cost_from_dict(payload["charged"])
        vector = in_currency(charged, account.currency, path, account._orders, account._held)
        note = payload["note"]
        event = None
        if payload.get("event") is not None:
            from accounting.events import event_from_dict

            event = event_from_dict(payload["event"])
        position = payload.get("plan_position")
        account._apply(vector, payload["partition"], payload["mechanism"], note, kind == "analysis",
                       (seq, charged, event, "event" in payload),
                       None if position is None else tuple(int(p) for p in position))
    elif kind == "hold":
        from accounting.ladder import rdp_ladder

        order = Fraction(payload["order"])
        if account.ladder is None:
            raise JournalMismatchError(f"journal event {seq}: account {path!r} holds no ladder to move")
        account._rehold(order, rdp_ladder(account.ladder.eps, account.ladder.delta, order))
    elif kind == "plan":
        from accounting.plans import Plan

        account._plan = Plan.from_dict(payload)
    elif kind in SERVICE_KINDS:
        ledger.service_rows.append((seq, kind, dict(payload)))
    elif kind == SNAPSHOT:
        from accounting.journal.snapshot import size

        ledger._snapshot = (seq, size(ledger))
    else:
        raise JournalMismatchError(f"journal event {seq} has unknown kind {kind!r}")
    ledger._seq = seq
