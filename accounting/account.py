"""Accounts: named budgets in one currency, the nodes of a :class:`~accounting.ledger.Ledger`'s tree.

The rules they enforce (exact arithmetic, filters, parallel composition,
splits, relations, currencies) are listed in :mod:`accounting.ledger`; this
module holds the per-account state and the charge and split paths. Every
charge and split runs inside the ledger's journal transaction
(:meth:`accounting.ledger.Ledger._transaction`, :mod:`accounting.journal.store`): the
rows other processes added are replayed first, then the budget is checked and
the row appended; the in-memory spend changes only after the row committed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from accounting.chargeable import BudgetExceeded, PartitionKey, Receipt, account_name, check_partition
from accounting.costs import (
    ORDERS,
    RDP,
    ApproxDP,
    Cost,
    Number,
    PureDP,
    Relation,
    check_cost,
    check_relation,
)
from accounting.journal.errors import JournalMismatchError
from accounting.journal.persistence import charge_payload, split_payload
from accounting.ladder import Ladder
from accounting.plans import OffPlan, Plan, steps_of
from accounting.restate import Unpayable, restate
from accounting.spend import (
    ZERO,
    Currency,
    Vector,
    add,
    as_cost,
    exhausted,
    in_currency,
    is_zero,
    sub,
    to_approx,
    widest,
)
from accounting.split import Allocations, check_curves, check_weights, describe_split, plan_split
from accounting.uncopyable import Uncopyable
from accounting.usage import ChargeRecord
from accounting.validation import check_exact, check_text

if TYPE_CHECKING:
    from accounting.ledger import Ledger


def _at(vector: Vector, i: int) -> Fraction:
    """Entry ``i`` of a spend vector (vectors shorter than their currency's are zero-padded)."""
    return vector[i] if i < len(vector) else Fraction(0)


__all__ = ["Account"]


@dataclass
class _Split:
    """One journalled split of an account; ``claimed`` once this ledger's ``split`` call has returned it."""

    weights: dict[str, Fraction]
    currencies: dict[str, Currency]
    children: dict[str, Account]
    partition: PartitionKey = None
    claimed: bool = False


class Account(Uncopyable):
    """A named budget in one currency; made by :meth:`Ledger.split` or :meth:`Account.split`.

    ``budget``, ``spent`` and ``remaining`` are costs in :attr:`currency`;
    ``spent`` counts both charges and the budgets allocated to child accounts.
    Charges and allocations under one partition key share that key's bucket;
    buckets of distinct keys compose by max, and partition=None charges and
    allocations add to all (:mod:`accounting.ledger`, "Parallel composition").
    :attr:`partition` is the key this account was allocated under by its
    parent (None: sequentially). An account cannot be copied or pickled
    (:mod:`accounting.uncopyable`).
    """

    _what = "ledger Account"

    def __init__(self, ledger: Ledger, path: str, currency: Currency, budget: Vector, parent: Account | None,
                 share: Vector, orders: tuple[Fraction, ...] = ORDERS, partition: PartitionKey = None, *,
                 tracked: tuple[Fraction, ...] | None = None, ladder: Ladder | None = None) -> None:
        self._ledger = ledger
        self.path = path
        self.name = path.rsplit("/", 1)[-1] if path else ""
        self.currency: Currency = currency
        self.parent = parent
        self.partition: PartitionKey = partition  # the parent's bucket this account's share was taken from
        self._budget = budget  # the filter's budget (rdp: at the held orders)
        self._share = share  # what the parent gave, in the parent's currency
        self.ladder = ladder  # how its claim is read (accounting.ladder); None: its parent's claim covers it
        self._held = orders if currency == "rdp" else ORDERS  # the Rényi orders an rdp account holds
        # Spend vectors of an rdp account list its tracked orders (held ∪ rung orders); the filter reads the held ones.
        self._orders = (tracked or orders) if currency == "rdp" else ORDERS
        self._held_index: tuple[int, ...] | None = (
            tuple(self._orders.index(o) for o in self._held) if self._orders != self._held else None)
        self._zero: Vector = tuple(Fraction(0) for _ in self._orders) if currency == "rdp" else ZERO
        self._sequential: Vector = self._zero  # partition=None charges (excluding allocations)
        self._allocated: Vector = self._zero  # budgets handed to children sequentially (partition=None)
        self._partitions: dict[PartitionKey, Vector] = {}  # charges by partition key
        self._widest: Vector = self._zero  # component-wise max over self._partitions (sums only grow)
        self._funded: dict[PartitionKey, Vector] = {}  # budgets handed to children under a partition key
        self._bucket_widest: Vector = self._zero  # component-wise max over keys of charges + funded (sums only grow)
        self._splits: list[_Split] = []  # journalled splits of this account, in seq order
        self._split_of: dict[str, int] = {}  # child name -> index in _splits of the first split naming it
        self.children: dict[str, Account] = {}
        self._record = ChargeRecord(self._zero)  # by mechanism, and each distinct charge with its count
        self._plan: Plan | None = None  # declared with plan() before the first charge (accounting.plans)
        self._last_stated: tuple[Cost, Vector, Cost] | None = None  # _stated's last answer (repeated charges)

    # ----- state -------------------------------------------------------------------------------
    def _held_part(self, vector: Vector) -> Vector:
        """The entries of a tracked-orders vector at the held orders (what the filter compares)."""
        if self._held_index is None:
            return vector
        return tuple(vector[i] if i < len(vector) else Fraction(0) for i in self._held_index)

    def _at_tracked(self, held: Vector) -> Vector:
        """A held-orders vector (an allocation) laid out at the tracked orders, zero elsewhere."""
        if self._held_index is None:
            return held
        out = list(self._zero)
        for value, i in zip(held, self._held_index, strict=True):
            out[i] = value
        return tuple(out)

    def _bucket(self, partition: PartitionKey) -> Vector:
        """Charges plus allocations under the key ``partition`` (not None)."""
        return add(self._partitions.get(partition, self._zero), self._funded.get(partition, self._zero))

    def _spent_vector(self, partition: PartitionKey = None, extra: Vector | None = None) -> Vector:
        """Σ(partition=None charges and allocations) + max over keys k of Σ(charges and allocations under k).

        With ``extra``, the spend as it would be after charging ``extra`` under ``partition``.
        """
        sequential = add(self._sequential, self._allocated)
        extra = self._zero if extra is None else extra
        if partition is None:
            return add(add(sequential, extra), self._bucket_widest)
        grown = add(self._bucket(partition), extra)
        return add(sequential, widest(self._bucket_widest, grown))

    def _room(self, partition: PartitionKey) -> Vector:
        """The largest charge (or allocation) that fits under ``partition``, as a vector.

        max(other keys, this key + x) <= budget - sequential  <=>  x <= budget - sequential - this key
        (the other keys already fit).
        """
        if partition is None:
            return sub(self._budget, self._held_part(self._spent_vector()))
        return sub(self._budget, self._held_part(add(add(self._sequential, self._allocated), self._bucket(partition))))

    @property
    def orders(self) -> tuple[Fraction, ...]:
        """The Rényi orders an rdp account holds (fixed when it was made; docs/accounting.md "Rényi DP")."""
        return self._held

    @property
    def tracked_orders(self) -> tuple[Fraction, ...]:
        """The orders an rdp account keeps its spend at: the held ones and its ladder's rungs (accounting.ladder)."""
        return self._orders

    @property
    def budget(self) -> Cost:
        """The account's total budget (its filter; rdp: at the held orders)."""
        return as_cost(self._budget, self.currency, self._held)

    @property
    def spent(self) -> Cost:
        """Charges (sequential + max over partitions) plus child allocations, as the filter counts them."""
        with self._ledger._fresh():
            return as_cost(self._held_part(self._spent_vector()), self.currency, self._held)

    @property
    def remaining(self) -> Cost:
        """``budget − spent``: the largest partition=None charge that still fits."""
        with self._ledger._fresh():
            return as_cost(self._room(None), self.currency, self._held)

    def remaining_in(self, partition: PartitionKey) -> Cost:
        """The largest charge that still fits under ``partition``."""
        partition = check_partition(partition)
        with self._ledger._fresh():
            return as_cost(self._room(partition), self.currency, self._held)

    @property
    def relation(self) -> Relation:
        """The neighbouring relation of the ledger's guarantee (charges are restated to it)."""
        return self._ledger.relation

    def __repr__(self) -> str:
        name = account_name(self.path)
        return f"Account({name!r}, {self.currency}, budget={self.budget}, remaining={self.remaining})"

    # ----- charging ----------------------------------------------------------------------------
    def charge(self, cost: Cost, *, mechanism: str, relation: Relation = "replace_one",
               partition: PartitionKey = None, note: str = "") -> Receipt:
        """Charge a mechanism's cost; return the receipt, or raise :class:`BudgetExceeded`.

        Parameters
        ----------
        cost : PureDP, ApproxDP or ZCDP
            Converted to the account's currency where the math allows: pure →
            zCDP (ε²/2), pure → approx (ε, 0); zCDP into a pure/approx account
            and (ε, δ > 0) into a pure/zCDP account raise ``TypeError``.
        mechanism : str
            Name of the mechanism (shown in the report).
        relation : {"replace_one", "add_remove"}
            Neighbouring relation the cost is stated under.
        partition : None, str or int
            Parallel-composition key: charges under different keys must touch
            disjoint users; the same key (and None) compose sequentially.
        note : str
            Free text kept in the journal.
        """
        check_text("mechanism", mechanism)
        return self._charge(cost, mechanism, relation, partition, note, analysis=False)

    def charge_analysis(self, cost: Cost, *, reason: str, relation: Relation = "replace_one",
                        partition: PartitionKey = None) -> Receipt:
        """Record a cost that a theorem, not noise, incurs (e.g. paper Lemma 6.1, switching times).

        Same rules as :meth:`charge`; the report marks it as analysis-only with
        its ``reason``.
        """
        check_text("reason", reason)
        return self._charge(cost, "analysis", relation, partition, reason, analysis=True)

    def charge_event(self, event: Any, *, mechanism: str, relation: Relation, delta: Number | None = None,
                     partition: PartitionKey = None, note: str = "") -> Receipt:
        """Charge a dp-accounting ``DpEvent``, costed in this account's currency by dp-accounting.

        rdp: its RDP curve on the grid; gdp: μ² of unsubsampled Gaussians; zcdp: Gaussian and ZCDp events; pure:
        Laplace events; approx: the PLD ε of this one composition at ``delta`` (required there, refused elsewhere).
        ``relation``: the relation its sensitivities are stated for, restated soundly to the ledger's or refused
        (:mod:`accounting.events`); an unsupported combination raises ``TypeError`` naming it.
        """
        from accounting.events import cost_of_event

        check_text("mechanism", mechanism)
        exact_delta = None if delta is None else check_exact("delta", delta, 0, 1, low_open=True, high_open=True)
        cost, pair = cost_of_event(event, self.currency, relation, self.relation, exact_delta)
        return self._charge(cost, mechanism, self.relation, partition, note, analysis=False, event=pair,
                            from_event=True, requested=(relation, event))

    def _charge(self, cost: Cost, mechanism: str, relation: str, partition: PartitionKey, note: str,
                *, analysis: bool, event: Any = None, from_event: bool = False, requested: Any = None) -> Receipt:
        """Check, journal and apply one charge. ``requested``: the event as the caller stated it (plans match it)."""
        check_cost(cost)
        check_relation(relation)
        partition = check_partition(partition)
        check_text("note", note, required=False)
        ledger = self._ledger
        ledger._check_writable()
        try:
            restated = restate(cost, relation, ledger.relation)
        except Unpayable as unpayable:
            raise BudgetExceeded(self.path, cost, self.remaining_in(partition), str(unpayable)) from None
        vector, charged = self._stated(restated)
        with ledger._lock:
            with ledger._transaction() as transaction:  # others' rows are replayed before the check
                position = None
                if self._plan is not None:  # a declared plan replaces the filter (accounting.plans)
                    stated_relation, stated = (relation, cost) if requested is None else requested
                    position = self._plan.advance(steps_of(stated, stated_relation, "charge"))
                    if position is None:
                        raise OffPlan(self.path, charged, self.remaining_in(partition),
                                      f"not the next step of the plan declared on this account "
                                      f"({self._plan.describe()})")
                elif not self._fits_after(partition, vector):
                    raise BudgetExceeded(self.path, charged, self.remaining_in(partition))
                seq = ledger._append(transaction, "analysis" if analysis else "charge", self.path,
                                     lambda: charge_payload(cost, charged, mechanism, relation, partition, note,
                                                            event, from_event, position))
            # committed durably: only now is the charge granted and counted here
            ledger._seq = seq
            self._apply(vector, partition, mechanism, note, analysis, (seq, charged, event, from_event), position)
            return Receipt(seq, self.path, cost, charged, mechanism, relation, partition, note, analysis,
                           as_cost(self._room(partition), self.currency, self._held))

    def _stated(self, cost: Cost) -> tuple[Vector, Cost]:
        """(spend vector, cost as charged) of a restated cost; the same cost object as last time reuses both."""
        last = self._last_stated
        if last is not None and last[0] is cost:
            return last[1], last[2]
        vector = in_currency(cost, self.currency, self.path, self._orders, self._held)
        charged = as_cost(vector, self.currency, self._orders)
        self._last_stated = (cost, vector, charged)
        return vector, charged

    def _fits_after(self, partition: PartitionKey, extra: Vector) -> bool:
        """Whether the filter holds after charging ``extra`` under ``partition``: its held entries only."""
        positions = range(len(self._budget)) if self._held_index is None else self._held_index
        seq, alloc, top = self._sequential, self._allocated, self._bucket_widest
        bucket = None if partition is None else self._bucket(partition)
        for limit, i in zip(self._budget, positions, strict=True):
            grown = _at(extra, i)
            if bucket is None:
                spent = _at(seq, i) + _at(alloc, i) + grown + _at(top, i)
            else:
                spent = _at(seq, i) + _at(alloc, i) + max(_at(top, i), _at(bucket, i) + grown)
            if spent > limit:
                return False
        return True

    def _apply(self, vector: Vector, partition: PartitionKey, mechanism: str, note: str, analysis: bool,
               record: tuple[int, Cost, Any, bool], position: tuple[int, ...] | None = None) -> None:
        seq, charged, event, from_event = record
        if self._plan is not None and position is not None:
            self._plan.position = position
        self._record.add(vector, partition, mechanism, note, analysis, seq, charged, event, from_event)
        if partition is None:
            self._sequential = add(self._sequential, vector)
        else:
            grown = add(self._partitions.get(partition, self._zero), vector)
            self._partitions[partition] = grown
            self._widest = widest(self._widest, grown)
            self._bucket_widest = widest(self._bucket_widest, self._bucket(partition))

    # ----- plans --------------------------------------------------------------------------------
    def plan(self, items: Any, *, relation: Relation = "replace_one") -> Fraction:
        """Declare, before this account's first charge, the charges it will make; return the claim's ε they allow.

        ``items``: a sequence of dp-accounting events and cost values, stated
        under ``relation`` (e.g. ``[SelfComposedDpEvent(step, 1000)]`` for a
        DP-SGD run charged step by step). From now on a charge must be the
        plan's next step (steps may be skipped, not reordered) or it is refused
        with :class:`~accounting.plans.OffPlan`; the filter no longer decides.
        The account's claim becomes the plan's non-adaptive figure at its δ,
        whatever prefix runs (:mod:`accounting.plans`, docs/accounting.md).
        Only a zCDP, GDP or RDP account funded by an (ε, δ) share takes a plan,
        once, before any charge or split; the plan must fit its share.
        """
        from accounting.plans import declare

        return declare(self, items, relation)

    def hold(self, order: Number) -> None:
        """Hold ``order`` instead of the one this rdp account was given, before its first charge.

        :func:`accounting.calibrate_noise_multiplier` moves a fresh rdp account's held order to the one best for the
        public workload it calibrates; budget and ladder are rebuilt from the share, journalled
        (:func:`accounting.plans.hold`). Refused once anything was charged, split or planned.
        """
        from accounting.plans import hold

        hold(self, order)

    def _rehold(self, order: Fraction, rungs: Ladder) -> None:
        """Rebuild the held order, budget, tracked orders and ladder of an uncharged rdp account."""
        from accounting.split import tracked_orders

        self.ladder = rungs
        self._held = (order,)
        self._budget = (rungs.budgets[rungs.orders.index(order)],)
        self._orders = tracked_orders(self._held, rungs.orders)
        self._held_index = tuple(self._orders.index(o) for o in self._held) if self._orders != self._held else None
        self._zero = tuple(Fraction(0) for _ in self._orders)
        self._sequential = self._allocated = self._widest = self._bucket_widest = self._zero
        self._record = ChargeRecord(self._zero)
        self._last_stated = None

    @property
    def planned(self) -> bool:
        """Whether a plan was declared on this account (:meth:`plan`)."""
        return self._plan is not None

    @property
    def declared_plan(self) -> Plan | None:
        """The declared plan, with how far the charges went in it (None without one)."""
        return self._plan

    # ----- splitting ---------------------------------------------------------------------------
    def split(self, weights: Mapping[str, Number], currency: Mapping[str, Currency] | None = None,
              curves: Mapping[str, RDP] | None = None, *, partition: PartitionKey = None) -> dict[str, Account]:
        """Divide the remaining budget into named child accounts, in proportion to ``weights``.

        Parameters
        ----------
        weights : mapping name → positive real
            Child names (non-empty, no ``/``) and their weights.
        currency : mapping name → {"pure", "approx", "zcdp", "gdp"}, optional
            Per-child currency; default is this account's currency. An approx
            account funds approx, pure, zCDP and GDP children; a pure account pure
            ones; a zCDP account zCDP ones; a GDP account GDP ones. A GDP child
            of an (ε, δ) share gets the largest μ meeting it (certified), μ_max².
            An approx account also funds RDP children (:mod:`accounting.rdp`).
        curves : mapping name → RDP, optional
            Budget of an RDP child of an (ε, δ) share, fixed now: the child
            holds the orders it lists; it must convert to at most the share
            (checked). Default: one held order from the share
            (:func:`accounting.rdp.held_for_share`, docs/accounting.md).
        partition : None, str or int
            Parallel-composition key of the allocation. None: the children divide
            :attr:`remaining` and the allocation adds to every key's spend. A key:
            the children divide :meth:`remaining_in` ``(partition)`` and the
            allocation counts in this account's bucket for that key, so children
            (and charges) under distinct keys compose by max. The caller asserts
            that what is charged under distinct keys, here or in the children,
            touches disjoint users (docs/accounting.md, "Parallel composition").

        Returns
        -------
        dict[str, Account]
            The children, in the order of ``weights``. With a journal, a split
            already journalled on this account with the same names (at open, or
            by another process) is returned instead of allocating again, if its
            weights and currencies match; a conflicting one raises
            :class:`~accounting.journal.JournalMismatchError`. The lookup and
            the new row happen inside one journal transaction.
        """
        exact_weights, currencies = check_weights(weights, currency, self.currency)
        exact_curves = check_curves(curves, currencies, self.currency)
        partition = check_partition(partition)
        ledger = self._ledger
        ledger._check_writable()
        with ledger._lock:
            with ledger._transaction() as transaction:  # others' splits are replayed before the lookup
                recorded = self._recorded_split(exact_weights, currencies, partition)
                if recorded is not None:
                    return recorded
                remaining = self._room(partition)
                if exhausted(remaining, self.currency, self._orders):
                    under = "" if partition is None else f" under partition {partition!r}"
                    raise ValueError(f"account {account_name(self.path)!r} has no budget left to split{under}")
                planned = plan_split(remaining, exact_weights, currencies, self.currency, exact_curves, self._held,
                                     self._orders)
                seq = ledger._append(transaction, "split", self.path,
                                     lambda: split_payload(exact_weights, currencies, planned, partition))
            ledger._seq = seq
            children = self._apply_split(exact_weights, currencies, planned, partition)
            self._splits[-1].claimed = True
            return dict(children)

    def _recorded_split(self, weights: dict[str, Fraction], currencies: dict[str, Currency],
                        partition: PartitionKey) -> dict[str, Account] | None:
        """The journalled split with these names, claimed by this call; None if the names are new.

        A split is identified by (this account, names, weights, currencies,
        partition key). A journalled split with the same names that this ledger
        has not returned yet (replayed at open, or made by another process) is
        returned if the rest matches and refused with
        :class:`~accounting.journal.JournalMismatchError` if not; names this
        ledger already split off are a ``ValueError``.
        """
        found = [self._split_of[name] for name in weights if name in self._split_of]
        if not found:
            return None
        number = min(found) + 1  # the earliest split naming any of them, as a scan in seq order finds it
        split = self._splits[number - 1]
        if split.claimed:
            clash = [name for name in weights if name in split.weights]
            raise ValueError(f"weights: account {account_name(self.path)!r} already has children {clash}")
        if (set(weights) != set(split.weights) or split.weights != weights or split.currencies != currencies
                or split.partition != partition):
            raise JournalMismatchError(
                f"journal {self._ledger.journal_path}: split #{number} of account {account_name(self.path)!r} "
                f"was {describe_split(split.weights, split.currencies, split.partition)}, "
                f"now {describe_split(weights, currencies, partition)}"
            )
        split.claimed = True
        return dict(split.children)

    def _apply_split(self, weights: dict[str, Fraction], currencies: dict[str, Currency], planned: Allocations,
                     partition: PartitionKey = None) -> dict[str, Account]:
        children = {}
        for name, allocation in planned.items():
            path = f"{self.path}/{name}" if self.path else name
            child = Account(self._ledger, path, currencies[name], allocation.budget, self, allocation.share,
                            allocation.orders, partition, tracked=allocation.tracked, ladder=allocation.ladder)
            self.children[name] = child
            self._ledger._accounts[path] = child
            share = self._at_tracked(allocation.share)
            if partition is None:
                self._allocated = add(self._allocated, share)
            else:
                self._funded[partition] = add(self._funded.get(partition, self._zero), share)
            children[name] = child
        if partition is not None:
            self._bucket_widest = widest(self._bucket_widest, self._bucket(partition))
        for name in weights:
            self._split_of.setdefault(name, len(self._splits))
        self._splits.append(_Split(weights, currencies, children, partition))
        return children

    # ----- what was really used -----------------------------------------------------------------
    def _used_vector(self) -> Vector:
        """Charges plus what the children really used, converted to this currency.

        Like the spend: the use under each partition key (its charges and its
        children's use) composes by max across keys; the rest adds.
        """
        used = self._sequential
        keyed = dict(self._partitions)
        for child in self.children.values():
            child_used = child._used_in_parent()
            if child.partition is None:
                used = add(used, child_used)
            else:
                keyed[child.partition] = add(keyed.get(child.partition, self._zero), child_used)
        if not self._funded:
            return add(used, self._widest)
        top = self._zero
        for vector in keyed.values():
            top = widest(top, vector)
        return add(used, top)

    def _used_in_parent(self) -> Vector:
        """What this account really used, in its parent's currency: the realised spend, converted (not a claim)."""
        used = self._used_vector()
        parent = self.parent
        assert parent is not None
        if self.currency == parent.currency or self.currency == "pure":
            return used
        # zCDP (GDP, RDP) child of an approx account: the spend converted at the child's delta share, capped by
        # the eps share. Valid only if the costs were fixed in advance: the claim is claim_epsilon().
        if is_zero(used):
            return ZERO
        eps = min(self._share[0], to_approx(self._held_part(used), self.currency, self._share[1], self._held))
        return (eps, self._share[1])

    def claim_epsilon(self) -> Fraction:
        """ε of this account's claim at its ladder's δ, valid however its charges were chosen (accounting.claims)."""
        from accounting.claims import account_epsilon

        return account_epsilon(self)

    @property
    def used(self) -> Cost:
        """What charges on this account and its descendants really spent (allocations excluded)."""
        with self._ledger._fresh():
            return as_cost(self._used_vector(), self.currency, self._orders)

    def converted(self) -> ApproxDP | PureDP | None:
        """This account's claim: (ε, δ) valid however its charges were chosen (docs/accounting.md, "Claims").

        A pure account states its realised ε; an approx account its realised ε
        at its budget's δ (a fixed δ: the δs of adaptively chosen charges are not
        summed into the claim); a zCDP, GDP or RDP child of an (ε, δ) share its
        ladder's reading at its δ share. An account inside another's currency
        (a zCDP child of a zCDP account) has no claim of its own: None.
        """
        from accounting.claims import subtree_claim

        with self._ledger._fresh():
            return subtree_claim(self)

    @property
    def allocated(self) -> Cost:
        """The budgets handed to child accounts by :meth:`split` (in this account's currency).

        Allocations under distinct partition keys compose by max.
        """
        with self._ledger._fresh():
            top = self._zero
            for vector in self._funded.values():
                top = widest(top, vector)
            return as_cost(add(self._allocated, top), self.currency, self._orders)

    @property
    def charged(self) -> Cost:
        """This account's own charges: sequential ones plus the max over partition keys (no allocations)."""
        with self._ledger._fresh():
            return as_cost(add(self._sequential, self._widest), self.currency, self._orders)

    def usage(self) -> list[dict[str, Any]]:
        """Per mechanism (or analysis reason): count, partition keys and total (partitions composed by max)."""
        with self._ledger._fresh():
            return [
                {"analysis": analysis, "mechanism": "analysis" if analysis else label,
                 "reason": label if analysis else None, "count": use.count, "partitions": len(use.partitions),
                 "total": as_cost(use.total, self.currency, self._orders)}
                for (analysis, label), use in self._record.uses.items()
            ]

    def charge_counts(self) -> list[tuple[int, Cost, Any, bool, int]]:
        """Each distinct charge once, in the order first made: (first seq, charged, pair-form event, from an event,
        count): what the non-adaptive figure and :meth:`Ledger.to_dp_event` compose."""
        with self._ledger._fresh():
            return self._record.counts()

    def walk(self) -> Iterator[Account]:
        """This account and all descendants, depth first."""
        yield self
        for child in self.children.values():
            yield from child.walk()
