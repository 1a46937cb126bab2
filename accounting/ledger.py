"""The privacy ledger: one total budget, a tree of named accounts, exact spends.

Rules (docs/design.md, accounting/; docs/references.md, "Privacy definitions and composition"):

- **Exact arithmetic.** Budgets and spends are :class:`fractions.Fraction`; a
  float is read as the decimal it prints as (``0.1`` is 1/10), so ten charges
  of 0.1 fit in a budget of 1 and the eleventh is refused. Mechanisms that
  calibrate noise from a charged value round the noise up
  (:func:`accounting.convert.gaussian_sigma`), so the real loss never exceeds
  the exact charge.
- **Filters.** Refusal is a privacy filter valid under fully adaptive
  composition: zCDP accounts halt before Σρ exceeds ρ_max (Feldman–Zrnic 2021;
  Whitehouse et al. 2023); pure/approx accounts use the basic filter Σε ≤ ε,
  Σδ ≤ δ (Rogers et al. 2016).
- **Parallel composition.** ``spent = Σ(charges with partition=None) +
  max over keys k of Σ(charges with partition=k)`` component-wise (ε and δ,
  or ρ and δ). Charges with different keys must touch disjoint users; the
  caller asserts that by choosing the keys.
- **Splits** divide the account's *remaining* budget in proportion to the
  weights, exactly; the allocation counts as spent on the parent. How a child
  of another currency is funded: :mod:`accounting.split`.
- **Relations.** A ledger's guarantee is stated for one neighbouring relation
  (default ``"replace_one"``); a charge under the other one is restated by
  group privacy or refused (:mod:`accounting.restate`).
- **Currencies.** Each account spends in one currency, kept as an exact
  spend vector (:mod:`accounting.spend`).
- **Atomic reserve-and-commit.** One lock per ledger covers check, journal
  write and in-memory update, so racing threads never both pass a check that
  only one fits. With a journal the charge is committed before the receipt
  is returned; a charge that is not durably journalled is not granted.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from accounting.chargeable import Budgeted, BudgetExceeded, EventChargeable, PartitionKey, Receipt, check_partition
from accounting.costs import (
    RDP,
    ApproxDP,
    Cost,
    Number,
    PureDP,
    Relation,
    check_cost,
    check_relation,
    cost_from_dict,
    cost_to_dict,
)
from accounting.journal import Journal, JournalMismatchError
from accounting.persistence import charge_payload, restore, split_payload
from accounting.restate import Unpayable, restate
from accounting.spend import (
    CURRENCIES,
    ZERO,
    Currency,
    Vector,
    add,
    as_cost,
    currency_of,
    exhausted,
    fits,
    in_currency,
    is_zero,
    sub,
    to_approx,
    widest,
)
from accounting.split import Plan, check_curves, check_weights, describe_split, plan_split
from accounting.uncopyable import Uncopyable
from accounting.validation import check_text

__all__ = ["CURRENCIES", "Account", "BudgetExceeded", "Currency", "Ledger", "PartitionKey", "Receipt"]


@dataclass
class _Usage:
    """Spends of one mechanism (or one analysis reason) on one account."""

    count: int = 0
    total: Vector = ZERO


class Account(Uncopyable):
    """A named budget in one currency; made by :meth:`Ledger.split` or :meth:`Account.split`.

    ``budget``, ``spent`` and ``remaining`` are costs in :attr:`currency`;
    ``spent`` counts both charges (parallel composition across partition keys)
    and the budgets allocated to child accounts. An account cannot be copied
    or pickled (:mod:`accounting.uncopyable`).
    """

    _what = "ledger Account"

    def __init__(self, ledger: Ledger, path: str, currency: Currency, budget: Vector, parent: Account | None,
                 share: Vector) -> None:
        self._ledger = ledger
        self.path = path
        self.name = path.rsplit("/", 1)[-1] if path else ""
        self.currency: Currency = currency
        self.parent = parent
        self._budget = budget
        self._share = share  # what the parent gave, in the parent's currency
        self._sequential: Vector = ZERO  # partition=None charges (excluding allocations)
        self._allocated: Vector = ZERO  # budgets handed to children
        self._partitions: dict[PartitionKey, Vector] = {}
        self._widest: Vector = ZERO  # component-wise max over self._partitions (sums only grow)
        self._splits: list[tuple[dict[str, Fraction], dict[str, Currency], dict[str, Account]]] = []
        self._splits_claimed = 0
        self.children: dict[str, Account] = {}
        self._usage: dict[tuple[bool, str], _Usage] = {}
        self._history: list[tuple[int, Cost, Any, bool]] = []  # (seq, charged, pair-form event, from an event)

    # ----- state -------------------------------------------------------------------------------
    def _spent_vector(self, partition: PartitionKey = None, extra: Vector = ZERO) -> Vector:
        """Σ(partition=None charges) + allocations + max over keys of Σ(charges with that key).

        With ``extra``, the spend as it would be after charging ``extra`` under ``partition``.
        """
        sequential = add(self._sequential, self._allocated)
        if partition is None:
            return add(add(sequential, extra), self._widest)
        grown = add(self._partitions.get(partition, ZERO), extra)
        return add(sequential, widest(self._widest, grown))

    @property
    def budget(self) -> Cost:
        """The account's total budget."""
        return as_cost(self._budget, self.currency)

    @property
    def spent(self) -> Cost:
        """Charges (sequential + max over partitions) plus child allocations."""
        with self._ledger._lock:
            return as_cost(self._spent_vector(), self.currency)

    @property
    def remaining(self) -> Cost:
        """``budget − spent``: the largest partition=None charge that still fits."""
        with self._ledger._lock:
            return as_cost(sub(self._budget, self._spent_vector()), self.currency)

    def remaining_in(self, partition: PartitionKey) -> Cost:
        """The largest charge that still fits under ``partition``."""
        partition = check_partition(partition)
        with self._ledger._lock:
            if partition is None:
                return self.remaining
            # max(other keys, this key + x) <= budget - sequential  <=>  x <= budget - sequential - this key
            # (the other keys already fit).
            spent = add(add(self._sequential, self._allocated), self._partitions.get(partition, ZERO))
            return as_cost(sub(self._budget, spent), self.currency)

    @property
    def relation(self) -> Relation:
        """The neighbouring relation of the ledger's guarantee (charges are restated to it)."""
        return self._ledger.relation

    def __repr__(self) -> str:
        return f"Account({self.path!r}, {self.currency}, budget={self.budget}, remaining={self.remaining})"

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

        rdp: its RDP curve on the grid; gdp: μ² of unsubsampled Gaussian events
        only; zcdp: Gaussian and ZCDp events; pure: Laplace events; approx: the
        PLD ε of this one pre-declared composition at ``delta`` (required there,
        refused elsewhere). ``relation`` is the relation the event's
        sensitivities are stated for; in a ledger of the other relation the
        event is restated soundly or refused (:mod:`accounting.events`). An
        unsupported combination raises ``TypeError`` naming it. The event is
        journalled and returned by :meth:`Ledger.to_dp_event`.
        """
        from accounting.events import charge_event

        check_text("mechanism", mechanism)
        return charge_event(self, event, mechanism=mechanism, relation=relation, delta=delta, partition=partition,
                            note=note)

    def _charge(self, cost: Cost, mechanism: str, relation: str, partition: PartitionKey, note: str,
                *, analysis: bool, event: Any = None, from_event: bool = False) -> Receipt:
        check_cost(cost)
        check_relation(relation)
        partition = check_partition(partition)
        check_text("note", note, required=False)
        ledger = self._ledger
        try:
            restated = restate(cost, relation, ledger.relation)
        except Unpayable as unpayable:
            raise BudgetExceeded(self.path, cost, self.remaining_in(partition), str(unpayable)) from None
        vector = in_currency(restated, self.currency, self.path)
        charged = as_cost(vector, self.currency)
        with ledger._lock:
            ledger._check_open()
            spent_after = self._spent_vector(partition, vector)
            if not fits(spent_after, self._budget):
                raise BudgetExceeded(self.path, charged, self.remaining_in(partition))

            seq = ledger._record("analysis" if analysis else "charge", self.path,
                                 lambda: charge_payload(cost, charged, mechanism, relation, partition, note, event,
                                                        from_event))
            self._apply(vector, partition, mechanism, note, analysis, (seq, charged, event, from_event))
            return Receipt(seq, self.path, cost, charged, mechanism, relation, partition, note, analysis,
                           as_cost(sub(self._budget, spent_after), self.currency))

    def _apply(self, vector: Vector, partition: PartitionKey, mechanism: str, note: str, analysis: bool,
               record: tuple[int, Cost, Any, bool]) -> None:
        self._history.append(record)
        if partition is None:
            self._sequential = add(self._sequential, vector)
        else:
            grown = add(self._partitions.get(partition, ZERO), vector)
            self._partitions[partition] = grown
            self._widest = widest(self._widest, grown)
        usage = self._usage.setdefault((analysis, note if analysis else mechanism), _Usage())
        usage.count += 1
        usage.total = add(usage.total, vector)

    # ----- splitting ---------------------------------------------------------------------------
    def split(self, weights: Mapping[str, Number], currency: Mapping[str, Currency] | None = None,
              curves: Mapping[str, RDP] | None = None) -> dict[str, Account]:
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
            Budget curve of an RDP child of an (ε, δ) share, fixed now; it must
            convert to at most the share (checked). Default: the Gaussian curve
            αρ with the largest ρ whose conversion on the grid meets the share.

        Returns
        -------
        dict[str, Account]
            The children, in the order of ``weights``. With a journal, the
            k-th ``split`` call on an account replays the k-th recorded split
            (same names, weights and currencies) instead of allocating again.
        """
        exact_weights, currencies = check_weights(weights, currency, self.currency)
        exact_curves = check_curves(curves, currencies, self.currency)
        ledger = self._ledger
        with ledger._lock:
            ledger._check_open()
            if self._splits_claimed < len(self._splits):
                return self._claim_split(exact_weights, currencies)
            clash = [name for name in exact_weights if name in self.children]
            if clash:
                raise ValueError(f"weights: account {self.path or '<root>'!r} already has children {clash}")
            remaining = sub(self._budget, self._spent_vector())
            if exhausted(remaining, self.currency):
                raise ValueError(f"account {self.path or '<root>'!r} has no budget left to split")
            planned = plan_split(remaining, exact_weights, currencies, self.currency, exact_curves)
            payload = split_payload(exact_weights, currencies, planned)
            ledger._record("split", self.path, lambda: payload)
            children = self._apply_split(exact_weights, currencies, planned)
            self._splits_claimed += 1
            return dict(children)

    def _claim_split(self, weights: dict[str, Fraction], currencies: dict[str, Currency]) -> dict[str, Account]:
        """The next split replayed from the journal, if it was made with these weights and currencies."""
        recorded_weights, recorded_currencies, children = self._splits[self._splits_claimed]
        if recorded_weights != weights or recorded_currencies != currencies:
            raise JournalMismatchError(
                f"journal {self._ledger.journal_path}: split #{self._splits_claimed + 1} of account "
                f"{self.path or '<root>'!r} was {describe_split(recorded_weights, recorded_currencies)}, "
                f"now {describe_split(weights, currencies)}"
            )
        self._splits_claimed += 1
        return dict(children)

    def _apply_split(self, weights: dict[str, Fraction], currencies: dict[str, Currency],
                     planned: Plan) -> dict[str, Account]:
        children = {}
        for name, (share, budget) in planned.items():
            path = f"{self.path}/{name}" if self.path else name
            child = Account(self._ledger, path, currencies[name], budget, self, share)
            self.children[name] = child
            self._ledger._accounts[path] = child
            self._allocated = add(self._allocated, share)
            children[name] = child
        self._splits.append((weights, currencies, children))
        return children

    # ----- what was really used -----------------------------------------------------------------
    def _used_vector(self) -> Vector:
        """Charges plus what the children really used, converted to this currency."""
        used = add(self._sequential, self._widest)
        for child in self.children.values():
            used = add(used, child._used_in_parent())
        return used

    def _used_in_parent(self) -> Vector:
        used = self._used_vector()
        parent = self.parent
        assert parent is not None
        if self.currency == parent.currency or self.currency == "pure":
            return used
        # zCDP (GDP) child of an approx account: CKS (exact tradeoff) conversion at the child's delta
        # share, capped by the eps share (the budget was certified to meet it).
        if is_zero(used):
            return ZERO
        eps = min(self._share[0], to_approx(used, self.currency, self._share[1]))
        return (eps, self._share[1])

    @property
    def used(self) -> Cost:
        """What charges on this account and its descendants really spent (allocations excluded)."""
        with self._ledger._lock:
            return as_cost(self._used_vector(), self.currency)

    def converted(self) -> ApproxDP | PureDP | None:
        """(ε, δ) (or pure ε) of :attr:`used`, as this account's parent counts it.

        A pure or approx account reports its own spend; a zCDP child of an
        (ε, δ) account its CKS conversion at its δ share; a zCDP account with a
        zCDP parent has no δ of its own and returns None.
        """
        with self._ledger._lock:
            if self.currency == "pure":
                return PureDP(self._used_vector()[0])
            if self.currency == "approx":
                used = self._used_vector()
                return ApproxDP(used[0], used[1])
            if self.parent is None or self.parent.currency in ("zcdp", "gdp", "rdp"):
                return None
            eps, delta = self._used_in_parent()
            return ApproxDP(eps, delta)

    def usage(self) -> list[dict[str, Any]]:
        """Per mechanism (or analysis reason): count and total charged, in this currency."""
        with self._ledger._lock:
            return [
                {"analysis": analysis, "mechanism": "analysis" if analysis else label,
                 "reason": label if analysis else None, "count": use.count,
                 "total": as_cost(use.total, self.currency)}
                for (analysis, label), use in self._usage.items()
            ]

    def walk(self) -> Iterator[Account]:
        """This account and all descendants, depth first."""
        yield self
        for child in self.children.values():
            yield from child.walk()


class Ledger(Uncopyable):
    """One total privacy budget and the tree of accounts that spend it.

    A ledger cannot be copied or pickled, not even a fresh one: each copy would
    be a whole new budget (:mod:`accounting.uncopyable`, docs/threat-model.md).

    Parameters
    ----------
    budget : PureDP, ApproxDP or ZCDP
        Total budget; must be positive (ε > 0, or ρ > 0).
    journal : str, os.PathLike or None
        SQLite journal file (None: in memory only), hash-chained and anchored
        (:mod:`accounting.journal`). Reopening the same file with the same
        budget restores every split and charge; another budget or relation
        raises :class:`~accounting.journal.JournalMismatchError`, a damaged,
        empty or truncated file :class:`~accounting.journal.JournalCorruptError`.
    relation : {"replace_one", "add_remove"}
        Neighbouring relation the guarantee is stated under.

    Examples
    --------
    The paper's Algorithm-2 split (paper §6, "privacy guarantee": three thirds):

    >>> ledger = Ledger(ApproxDP(4, 0.02))
    >>> accounts = ledger.split({"tree": 1, "switching": 1, "optimizer": 1},
    ...                         currency={"tree": "zcdp", "optimizer": "zcdp"})
    """

    _what = "Ledger"

    def __init__(self, budget: Cost, journal: str | os.PathLike[str] | Journal | None = None, *,
                 relation: Relation = "replace_one") -> None:
        check_cost(budget, "budget")
        check_relation(relation)
        currency = currency_of(budget)
        vector = in_currency(budget, currency, "")
        if exhausted(vector, currency):
            raise ValueError(f"budget must be positive (eps > 0, rho > 0, mu > 0 or an RDP curve > 0 at every order), "
                             f"got {budget}")
        self.relation = relation
        self._lock = threading.RLock()
        self._seq = 0
        self._closed = False
        self._accounts: dict[str, Account] = {}
        self.root = Account(self, "", currency, vector, None, vector)
        self._journal: Journal | None = None
        self.journal_path: str | None = None
        if journal is not None:
            wanted = {"budget": cost_to_dict(budget), "relation": self.relation}
            opened = journal if isinstance(journal, Journal) else Journal(journal, create=wanted)
            restore(self, opened, budget, wanted)
            self._journal = opened
            self.journal_path = opened.path

    @classmethod
    def from_journal(cls, journal: str | os.PathLike[str], *, read_only: bool = False) -> Ledger:
        """Open an existing journal with the budget and relation it was written for.

        With ``read_only=True`` the file is opened with SQLite's ``mode=ro``
        (``dpglm ledger show``): the ledger reports, and every charge or new
        split raises :class:`~accounting.journal.JournalReadOnlyError`.
        """
        opened = Journal(journal, read_only=read_only)
        try:
            budget = cost_from_dict(opened.meta["budget"])
            relation = opened.meta["relation"]
        except BaseException:
            opened.close()
            raise
        return cls(budget, opened, relation=relation)

    @property
    def read_only(self) -> bool:
        """Whether the journal was opened read-only (charges and new splits are refused)."""
        return self._journal is not None and self._journal.read_only

    def _record(self, kind: str, path: str, payload: Callable[[], dict[str, Any]]) -> int:
        """Next sequence number; with a journal, durably append the event first (caller holds the lock)."""
        if self._journal is not None:
            self._seq = self._journal.append(kind, path, payload())
        else:
            self._seq += 1
        return self._seq

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("ledger is closed")

    # ----- public API ---------------------------------------------------------------------------
    @property
    def budget(self) -> Cost:
        """The total budget."""
        return self.root.budget

    @property
    def currency(self) -> Currency:
        """Currency of the total budget."""
        return self.root.currency

    @property
    def remaining(self) -> Cost:
        """What the root account has left (:attr:`Account.remaining`)."""
        return self.root.remaining

    def split(self, weights: Mapping[str, Number], currency: Mapping[str, Currency] | None = None,
              curves: Mapping[str, RDP] | None = None) -> dict[str, Account]:
        """Split the total budget; see :meth:`Account.split`."""
        return self.root.split(weights, currency, curves)

    def charge(self, cost: Cost, *, mechanism: str, relation: Relation = "replace_one",
               partition: PartitionKey = None, note: str = "") -> Receipt:
        """Charge the root account directly; see :meth:`Account.charge`."""
        return self.root.charge(cost, mechanism=mechanism, relation=relation, partition=partition, note=note)

    def charge_event(self, event: Any, *, mechanism: str, relation: Relation, delta: Number | None = None,
                     partition: PartitionKey = None, note: str = "") -> Receipt:
        """Charge a dp-accounting event to the root account; see :meth:`Account.charge_event`."""
        return self.root.charge_event(event, mechanism=mechanism, relation=relation, delta=delta,
                                      partition=partition, note=note)

    def account(self, path: str) -> Account:
        """The account at ``path`` (``"optimizer"`` or ``"optimizer/refits"``; ``""`` is the root)."""
        if path == "":
            return self.root
        try:
            return self._accounts[path]
        except KeyError:
            raise KeyError(f"no account {path!r}; accounts: {sorted(self._accounts)}") from None

    def accounts(self) -> list[Account]:
        """Every account, root first, depth first."""
        return list(self.root.walk())

    def guarantee(self, delta: Number | None = None) -> ApproxDP | PureDP:
        """The privacy of everything spent so far, as (ε, δ) (or pure ε): an odometer figure.

        Composition comes before conversion: pure and approx charges add; the
        accounts of each other currency are pooled and each pool is converted
        once (:mod:`accounting.pooling`, ``docs/accounting.md``).

        This is the realised spend; it is a valid claim when the costs were
        fixed in advance. Under adaptively chosen costs the valid claim is the
        budget (the filter), :attr:`budget`.

        Parameters
        ----------
        delta : real in (0, 1), optional
            Needed (only) for a zCDP, GDP or RDP budget: the δ of the stated
            guarantee (for zCDP it must exceed the δ of approximate-zCDP charges).
        """
        from accounting.pooling import pooled_guarantee

        with self._lock:
            return pooled_guarantee(self, delta)

    def to_dp_event(self) -> Any:
        """Everything charged so far as one dp-accounting ``ComposedDpEvent``, in pair form.

        Each charge's own event where it came from one (restated to the
        ledger's relation), ``GaussianDpEvent(1/μ)`` for a GDP charge,
        ``ZCDpEvent(ρ)`` for a zCDP charge. Pure and approximate charges, RDP
        curves charged directly and events costed by PLD under replace-one have
        no event in dp-accounting 0.6.0 and raise ``TypeError`` naming the
        charge. Read the result with an ``ADD_OR_REMOVE_ONE`` accountant: the
        RDP accountant composes all of these; the PLD accountant refuses
        ``ZCDpEvent``. Parallel partitions are composed sequentially (an upper
        bound).
        """
        from accounting.events import to_dp_event

        return to_dp_event(self)

    def report(self) -> str:
        """The budget tree as a text table (see :mod:`accounting.report`)."""
        from accounting.report import render_text

        return render_text(self)

    def to_json(self) -> str:
        """The budget tree as JSON (see :mod:`accounting.report`)."""
        from accounting.report import render_json

        return render_json(self)

    def close(self) -> None:
        """Close the journal (if any); later charges raise ``RuntimeError``."""
        with self._lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None
            self._closed = True

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if TYPE_CHECKING:  # mypy proves that accounts and ledgers are what mechanisms need (accounting.chargeable)
    _ACCOUNT_HAS_BUDGET: type[Budgeted] = Account
    _ACCOUNT_TAKES_EVENTS: type[EventChargeable] = Account
    _LEDGER_HAS_BUDGET: type[Budgeted] = Ledger
    _LEDGER_TAKES_EVENTS: type[EventChargeable] = Ledger
