"""Snapshot rows: a ledger's derived state, journalled so that opening starts from it, not from row 1.

A ``"snapshot"`` row at seq s holds what replaying rows 1..s − 1 builds
(docs/accounting.md, "Snapshots"; docs/threat-model.md, "Snapshots"). It is a
row of the hash chain like any other: a snapshot edited and its hash
recomputed breaks the chain at the next row (a snapshot is always followed by
the row it was written with), or, the rows after it rewritten too, disagrees
with the anchor and the witness; it is refused at open like any damaged row.
Opening reads the header, the last snapshot row and the rows after it
(:func:`accounting.journal.persistence.restore`); ``dpglm ledger verify``
(:mod:`accounting.journal.verify`) re-checks the whole chain and that every
snapshot equals the replay of the rows before it.

The payload (every number an exact ``"num/den"`` string, as in every row):

- ``"snapshot"``: :data:`VERSION`; ``"service"``: the ledger's service rows
  (``[seq, kind, payload]``, docs/service.md);
- ``"accounts"``: every account, root first, depth first; each with its path,
  currency and partition key, its allocation as a split row writes a child's
  (share, budget, held and tracked orders, ladder: the form of
  :mod:`accounting.journal.persistence`), its spend vectors (sequential,
  allocated, per-key charges, their widest, per-key allocations, the widest
  bucket), its journalled splits (weights, currencies, children, partition key),
  its charge record (:mod:`accounting.usage`: per mechanism the count and the
  spend composed like the account; each distinct charge with its first seq and
  its count) and its declared plan with its position (:mod:`accounting.plans`).

Not in it: whether this process's ``split`` call has returned a split (its
``claimed`` flag, per process) and caches.

Who writes one, and when: the ledger that appends a row, inside that row's
transaction and just before it, once the rows since the last snapshot reach
:func:`interval` (:meth:`accounting.ledger.Ledger._append`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from accounting.chargeable import PartitionKey, check_partition
from accounting.costs import cost_from_dict, cost_to_dict
from accounting.journal.errors import JournalCorruptError, JournalMismatchError
from accounting.journal.persistence import child_payload, read_child
from accounting.spend import Vector, is_currency
from accounting.split import Allocation
from accounting.usage import ChargeRecord, MechanismUse, charge_key

if TYPE_CHECKING:
    from accounting.account import Account
    from accounting.ledger import Ledger

__all__ = ["ROWS", "VERSION", "interval", "load", "payload", "size"]

VERSION = 1
"""The snapshot payload's own format (a journal's format number stays ``dpglm-ledger-journal-3``)."""

ROWS = 1000
"""The fewest rows between two snapshots: opening replays at most about this many rows after the last one.

Chosen from ``python -m benchmarks.journal_open`` (docs/scale.md, "Opening";
docs/accounting.md, "Snapshots"): a snapshot of the benchmark's ledger costs
about as much as replaying 7–15 rows, so every 1,000 rows it adds about 0.1% to a
charge's time and 2% to a row's storage, and opening replays at most 1,000
rows.
"""


def size(ledger: Ledger) -> int:
    """The state's size in entries: accounts, partition keys, distinct charges, mechanisms, splits, service rows."""
    total = len(ledger.service_rows)
    for account in ledger.root.walk():
        total += (1 + len(account._partitions) + len(account._funded) + len(account._splits)
                  + len(account._record.uses) + len(account._record._charges))
    return total


def interval(entries: int) -> int:
    """Rows from a snapshot of ``entries`` entries to the next: :data:`ROWS`, or as many rows as entries.

    A large state (per-user accounts: one partition bucket per user) makes
    each snapshot cost O(state); spaced by its size, its cost per row stays
    about that of writing one entry (a fraction of a row's replay, measured by
    ``python -m benchmarks.journal_open``), and opening O(state) whatever the
    history.
    """
    return max(ROWS, entries)


# ----- writing -----------------------------------------------------------------------------------
def _vector(vector: Vector) -> list[str]:
    return [str(x) for x in vector]


def _keyed(buckets: Mapping[PartitionKey, Vector]) -> list[list[Any]]:
    return [[key, _vector(vector)] for key, vector in buckets.items()]


def _use(analysis: bool, label: str, use: MechanismUse) -> dict[str, Any]:
    use.flush()
    return {"analysis": analysis, "label": label, "count": use.count, "sequential": _vector(use.sequential),
            "partitions": _keyed(use.partitions), "widest": _vector(use.widest)}


def _record(record: ChargeRecord) -> dict[str, Any]:
    from accounting.events import event_to_dict

    charges = [{"seq": seq, "count": count, "charged": cost_to_dict(charged), "from_event": from_event,
                "event": None if event is None else event_to_dict(event)}
               for seq, charged, event, from_event, count in record.counts()]
    return {"uses": [_use(analysis, label, use) for (analysis, label), use in record.uses.items()],
            "charges": charges}


def _account(account: Account) -> dict[str, Any]:
    allocation = Allocation(account._share, account._budget, account._held, account._orders, account.ladder)
    out: dict[str, Any] = {
        "path": account.path, "currency": account.currency, "partition": account.partition,
        "allocation": child_payload(account.currency, allocation),
        "sequential": _vector(account._sequential), "allocated": _vector(account._allocated),
        "partitions": _keyed(account._partitions), "widest": _vector(account._widest),
        "funded": _keyed(account._funded), "bucket_widest": _vector(account._bucket_widest),
        "splits": [{"weights": {name: str(w) for name, w in split.weights.items()}, "currency": dict(split.currencies),
                    "children": list(split.children), "partition": split.partition} for split in account._splits],
        "record": _record(account._record),
    }
    if account._plan is not None:
        out["plan"] = account._plan.to_dict() | {"position": list(account._plan.position)}
    return out


def payload(ledger: Ledger) -> dict[str, Any]:
    """The snapshot of ``ledger``'s state now (JSON-ready: only dicts, lists, str, int, bool and None)."""
    return {"snapshot": VERSION,
            "service": [[seq, kind, dict(row)] for seq, kind, row in ledger.service_rows],
            "accounts": [_account(account) for account in ledger.root.walk()]}


# ----- reading -----------------------------------------------------------------------------------
def _read_vector(values: Iterable[str]) -> Vector:
    return tuple(Fraction(str(x)) for x in values)


def _read_keyed(pairs: Iterable[list[Any]]) -> dict[PartitionKey, Vector]:
    return {check_partition(key): _read_vector(vector) for key, vector in pairs}


def _read_record(record: ChargeRecord, data: Mapping[str, Any]) -> None:
    from accounting.events import event_from_dict

    for entry in data["uses"]:
        use = MechanismUse(int(entry["count"]), _read_vector(entry["sequential"]), _read_keyed(entry["partitions"]),
                           _read_vector(entry["widest"]))
        record.uses[(bool(entry["analysis"]), str(entry["label"]))] = use
    for entry in data["charges"]:
        event = None if entry["event"] is None else event_from_dict(entry["event"])
        charged = cost_from_dict(entry["charged"])
        from_event = bool(entry["from_event"])
        record._charges[charge_key(charged, event, from_event)] = [int(entry["seq"]), int(entry["count"]), event]


def _build(ledger: Ledger, entry: Mapping[str, Any], accounts: dict[str, Account]) -> Account:
    """One account from its entry (its parent already built); its splits are filled in by :func:`_fill`."""
    from accounting.account import Account

    path, currency = str(entry["path"]), entry["currency"]
    if not is_currency(currency):
        raise ValueError(f"account {path!r} has currency {currency!r}")
    parent = accounts[path.rsplit("/", 1)[0] if "/" in path else ""] if path else None
    allocation = read_child(entry["allocation"], currency, "" if parent is None else parent.currency)
    account = Account(ledger, path, currency, allocation.budget, parent, allocation.share, allocation.orders,
                      check_partition(entry["partition"]), tracked=allocation.tracked, ladder=allocation.ladder)
    account._sequential = _read_vector(entry["sequential"])
    account._allocated = _read_vector(entry["allocated"])
    account._partitions = _read_keyed(entry["partitions"])
    account._widest = _read_vector(entry["widest"])
    account._funded = _read_keyed(entry["funded"])
    account._bucket_widest = _read_vector(entry["bucket_widest"])
    _read_record(account._record, entry["record"])
    if "plan" in entry:
        from accounting.plans import Plan

        plan = Plan.from_dict(entry["plan"])
        plan.position = tuple(int(p) for p in entry["plan"]["position"])
        account._plan = plan
    return account


def _fill(account: Account, splits: Iterable[Mapping[str, Any]], accounts: dict[str, Account]) -> None:
    """The journalled splits of ``account`` and its children, in split order (:meth:`Account._apply_split`'s)."""
    from accounting.account import _Split

    for split in splits:
        weights = {str(name): Fraction(str(w)) for name, w in split["weights"].items()}
        currencies = {str(name): c for name, c in split["currency"].items() if is_currency(c)}
        if len(currencies) != len(split["currency"]):
            raise ValueError(f"a split of account {account.path!r} names an unknown currency")
        children = {str(name): accounts[f"{account.path}/{name}" if account.path else str(name)]
                    for name in split["children"]}
        for name in weights:
            account._split_of.setdefault(name, len(account._splits))
        account._splits.append(_Split(weights, currencies, children, check_partition(split["partition"])))
        account.children.update(children)


def load(ledger: Ledger, seq: int, data: Mapping[str, Any]) -> None:
    """Replace the state of the fresh ``ledger`` by the snapshot ``data`` of row ``seq``; its rows then follow.

    A snapshot of another format is a :class:`~accounting.journal.JournalMismatchError`; one that cannot be
    read (a row whose hash is right but whose content is not a snapshot) a
    :class:`~accounting.journal.JournalCorruptError`, naming the row.
    """
    if data.get("snapshot") != VERSION:
        raise JournalMismatchError(f"journal {ledger.journal_path}: snapshot row {seq} has format "
                                   f"{data.get('snapshot')!r}; this dpglm reads snapshot format {VERSION}")
    try:
        accounts: dict[str, Account] = {}
        for entry in data["accounts"]:
            account = _build(ledger, entry, accounts)
            if account.path in accounts:
                raise ValueError(f"account {account.path!r} appears twice")
            accounts[account.path] = account
        for entry in data["accounts"]:
            _fill(accounts[str(entry["path"])], entry["splits"], accounts)
        root = accounts[""]
        if (root.currency, root._budget) != (ledger.root.currency, ledger.root._budget):
            raise ValueError("its root is not the ledger's budget")
        service = [(int(row_seq), str(kind), dict(row)) for row_seq, kind, row in data["service"]]
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError, IndexError) as why:
        raise JournalCorruptError(f"journal {ledger.journal_path}: snapshot row {seq} is not a readable snapshot "
                                  f"({why})") from None
    ledger.root = root
    ledger._accounts = {path: account for path, account in accounts.items() if path}
    ledger.service_rows = service
    ledger._seq = seq
    ledger._snapshot = (seq, size(ledger))

