"""What an account was charged, by whom: per mechanism totals and the distinct charges with their counts.

The spend vectors an account's filter and claim read live on the account
(:mod:`accounting.account`); this module keeps the *record* the report and the
non-adaptive figure read (docs/accounting.md, "The report", "Claims"): per
mechanism (or analysis reason) the number of charges and their total, composed
like the account (partition=None charges add, keys compose by max), and each
distinct charge once with how often it was made, so memory grows with the
kinds of charges, not their number (a million identical DP-SGD steps are one
entry).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accounting.chargeable import PartitionKey
from accounting.costs import Cost
from accounting.spend import ZERO, Vector, add, widest

__all__ = ["ChargeRecord", "MechanismUse", "charge_key"]


@dataclass
class MechanismUse:
    """Spends of one mechanism (or one analysis reason) on one account, composed like the account."""

    count: int = 0
    sequential: Vector = ZERO
    partitions: dict[PartitionKey, Vector] = field(default_factory=dict)
    widest: Vector = ZERO
    repeated: tuple[Vector, int] | None = None  # the last partition=None vector and how often, not yet summed

    def add(self, vector: Vector, partition: PartitionKey, zero: Vector) -> None:
        """Count one charge; a run of the same partition=None vector object is summed once (DP-SGD's steps)."""
        self.count += 1
        if partition is not None:
            grown = add(self.partitions.get(partition, zero), vector)
            self.partitions[partition] = grown
            self.widest = widest(self.widest, grown)
        elif self.repeated is not None and self.repeated[0] is vector:
            self.repeated = (vector, self.repeated[1] + 1)
        else:
            self.flush()
            self.repeated = (vector, 1)

    def flush(self) -> None:
        """Sum a pending run of repeated partition=None charges into ``sequential`` (the total is unchanged)."""
        if self.repeated is not None:
            vector, times = self.repeated
            self.sequential = add(self.sequential, tuple(times * x for x in vector) if times > 1 else vector)
            self.repeated = None

    @property
    def total(self) -> Vector:
        """Sequential charges plus the max over partition keys."""
        self.flush()
        return add(self.sequential, self.widest)


def charge_key(charged: Cost, event: Any, from_event: bool) -> tuple[Cost, Any, bool]:
    """What makes two charges the same distinct charge: the cost charged, the pair-form event (a hashable stand-in:
    itself, or its repr when a composition holds a list), whether it came from an event."""
    try:
        hash(event)
    except TypeError:
        return charged, repr(event), from_event
    return charged, event, from_event


class ChargeRecord:
    """The record of one account's charges (module docstring)."""

    def __init__(self, zero: Vector) -> None:
        self._zero = zero
        self.uses: dict[tuple[bool, str], MechanismUse] = {}
        self._charges: dict[tuple[Cost, Any, bool], list[Any]] = {}  # → [first seq, count, pair-form event]

    def add(self, vector: Vector, partition: PartitionKey, mechanism: str, note: str, analysis: bool, seq: int,
            charged: Cost, event: Any, from_event: bool) -> None:
        """Record one granted charge."""
        key = charge_key(charged, event, from_event)
        counted = self._charges.get(key)
        if counted is None:
            counted = self._charges[key] = [seq, 0, event]
        counted[1] += 1
        use = self.uses.setdefault((analysis, note if analysis else mechanism),
                                   MechanismUse(sequential=self._zero, widest=self._zero))
        use.add(vector, partition, self._zero)

    def __bool__(self) -> bool:
        return bool(self._charges)

    def counts(self) -> list[tuple[int, Cost, Any, bool, int]]:
        """Each distinct charge once, in the order first made: (first seq, charged, pair-form event, from an event,
        count)."""
        return sorted(((seq, charged, event, from_event, count)
                       for (charged, _, from_event), (seq, count, event) in self._charges.items()),
                      key=lambda entry: entry[0])
