"""The charging interface: what a mechanism needs of an account, and what a charge returns.

A mechanism never sees a ledger, only an account it charges before it draws noise
(docs/accounting.md, "What a mechanism sees"; docs/mechanisms.md). This module names
that contract:

- :class:`Chargeable` — an account a cost can be charged to, in one currency
  (``currency`` and ``charge``, all that ``mechanisms.release.check_account`` asks):
  :class:`~accounting.ledger.Account`, a :class:`~accounting.ledger.Ledger` (its root
  account), or any view forwarding to one (e.g. one fixing a partition key).
- :class:`Budgeted` — a :class:`Chargeable` that shows its ``budget`` and ``remaining``
  (a mechanism may spend all that is left).
- :class:`EventChargeable` — a :class:`Chargeable` that also takes a dp-accounting
  event (:meth:`~accounting.ledger.Account.charge_event`) and states its ledger's
  neighbouring relation, which DP-SGD and the Opacus adapter need.
- :class:`Receipt` — proof that a charge was granted (and journalled);
  :class:`BudgetExceeded` — the refusal, after which nothing changed and the mechanism
  must not draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from accounting.costs import Cost, Number, Relation

__all__ = ["ROOT", "BudgetExceeded", "Budgeted", "Chargeable", "EventChargeable", "PartitionKey", "Receipt",
           "account_name", "check_partition"]

#: How the root account (path ``""``) is named in every message, report and JSON document.
ROOT = "<root>"


def account_name(path: str) -> str:
    """``path``, or :data:`ROOT` for the root account."""
    return path or ROOT


#: A parallel-composition key: charges under different keys touch disjoint users (docs/accounting.md).
PartitionKey = str | int | None


def check_partition(partition: object) -> PartitionKey:
    """Return ``partition`` if it is a :data:`PartitionKey` (None, a str or an int, not a bool), else ``TypeError``."""
    if partition is None or isinstance(partition, str):
        return partition
    if isinstance(partition, int) and not isinstance(partition, bool):
        return partition
    raise TypeError(f"partition must be None, a str or an int, got {type(partition).__name__}")


class BudgetExceeded(Exception):
    """A charge did not fit; nothing was changed.

    Attributes
    ----------
    account : str
        Path of the refusing account.
    requested : Cost
        The charge, in the account's currency.
    remaining : Cost
        What the account had left.
    """

    def __init__(self, account: str, requested: Cost, remaining: Cost, why: str = "") -> None:
        self.account = account
        self.requested = requested
        self.remaining = remaining
        super().__init__(f"account {account_name(account)!r}: requested {requested} exceeds remaining {remaining}"
                         + (f": {why}" if why else ""))


@dataclass(frozen=True)
class Receipt:
    """Proof that a charge was granted (and journalled, if the ledger has a journal).

    ``cost`` is the charge as requested; ``charged`` is what was added to the
    account, in its currency and under the ledger's relation; ``remaining`` is
    the account's remaining budget right after the charge.
    """

    seq: int
    account: str
    cost: Cost
    charged: Cost
    mechanism: str
    relation: str
    partition: PartitionKey
    note: str
    analysis: bool
    remaining: Cost

    def __str__(self) -> str:
        what = f"[analysis] {self.note}" if self.analysis else self.mechanism
        key = "" if self.partition is None else f" [partition {self.partition!r}]"
        return (f"Receipt(#{self.seq} {account_name(self.account)}{key}: {what} charged {self.charged}, "
                f"remaining {self.remaining})")

    __repr__ = __str__  # every field is an attribute; the journal row holds them exactly


@runtime_checkable
class Chargeable(Protocol):
    """An account a mechanism can charge: its currency and ``charge``.

    ``currency`` is one of ``"pure"``, ``"approx"``, ``"zcdp"``, ``"gdp"``,
    ``"rdp"``; a mechanism checks it can state its cost there
    (``mechanisms.release.check_account``). ``charge`` either grants the whole
    cost and returns a :class:`Receipt`, or raises :class:`BudgetExceeded`
    having changed nothing; noise is drawn only after it returns
    (docs/accounting.md).
    """

    @property
    def currency(self) -> str: ...

    def charge(self, cost: Cost, *, mechanism: str, relation: Relation = ..., partition: PartitionKey = ...,
               note: str = ...) -> Receipt: ...


@runtime_checkable
class Budgeted(Chargeable, Protocol):
    """A :class:`Chargeable` that also shows its budget and what is left of it.

    ``remaining`` is the largest partition-free charge that still fits (a
    mechanism told to spend "all that is left" charges exactly it).
    """

    @property
    def budget(self) -> Cost: ...

    @property
    def remaining(self) -> Cost: ...


@runtime_checkable
class EventChargeable(Chargeable, Protocol):
    """A :class:`Chargeable` that also takes a dp-accounting ``DpEvent`` and states its ledger's relation.

    ``relation`` is the neighbouring relation the ledger's guarantee is stated
    under; ``charge_event`` costs the event in the account's currency
    (:mod:`accounting.events`).
    """

    @property
    def relation(self) -> str: ...

    def charge_event(self, event: Any, *, mechanism: str, relation: Relation, delta: Number | None = ...,
                     partition: PartitionKey = ..., note: str = ...) -> Receipt: ...
