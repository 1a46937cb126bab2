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
- **Parallel composition.** ``spent = Σ(charges and allocations with
  partition=None) + max over keys k of Σ(charges and allocations with
  partition=k)`` component-wise (ε and δ, or ρ and δ; order by order for an
  RDP curve). An allocation is a split's children's shares
  (``split(..., partition=k)`` funds them from :meth:`Account.remaining_in`);
  what such a child really used counts in bucket k of its parent. Charges and
  child accounts with different keys must touch disjoint users; the caller
  asserts that by choosing the keys (McSherry 2009; docs/accounting.md, "Parallel composition").
- **Splits** divide the account's *remaining* budget in proportion to the
  weights, exactly; the allocation counts as spent on the parent. How a child
  of another currency is funded: :mod:`accounting.split`.
- **Relations.** A ledger's guarantee is stated for one neighbouring relation
  (default ``"replace_one"``); a charge under the other one is restated by
  group privacy or refused (:mod:`accounting.restate`).
- **Currencies.** Each account spends in one currency, kept as an exact
  spend vector (:mod:`accounting.spend`).
- **Charging is a transaction.** Each charge or split runs, under this
  ledger's own lock, inside one transaction of its journal store
  (:mod:`accounting.journal.store`): replay the rows other ledgers (in this or
  other processes) committed that the store already read without a lock, take
  the journal's cross-process lock, replay the rows committed since, check the
  budget, append the hash-chained row, commit, release, and wait until the row
  is durable. The in-memory spend changes only after that, so a charge that is
  not durably journalled is not granted, and any number of ledgers may share
  one journal without overspending it. Reading a ledger
  (``remaining``, ``spent``, ``report()``, ``guarantee()``, ...) first
  replays what others committed (:meth:`Ledger.refresh`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from accounting.account import Account
from accounting.chargeable import Budgeted, BudgetExceeded, EventChargeable, PartitionKey, Receipt
from accounting.costs import (
    ORDERS,
    RDP,
    ApproxDP,
    Cost,
    Number,
    Relation,
    check_cost,
    check_relation,
    cost_from_dict,
    cost_to_dict,
)
from accounting.journal.errors import JournalReadOnlyError
from accounting.journal.persistence import SNAPSHOT, replay, restore
from accounting.journal.snapshot import interval as snapshot_interval
from accounting.journal.snapshot import payload as snapshot_payload
from accounting.journal.snapshot import size
from accounting.journal.store import JournalStore, Transaction, open_journal
from accounting.ladder import ODOMETER_ORDERS
from accounting.spend import CURRENCIES, Currency, currency_of, exhausted, in_currency
from accounting.split import tracked_orders
from accounting.uncopyable import Uncopyable
from accounting.validation import check_exact

__all__ = ["CURRENCIES", "Account", "BudgetExceeded", "Currency", "Ledger", "PartitionKey", "Receipt"]


class Ledger(Uncopyable):
    """One total privacy budget and the tree of accounts that spend it.

    A ledger cannot be copied or pickled, not even a fresh one: each copy would
    be a whole new budget (:mod:`accounting.uncopyable`, docs/threat-model.md).

    Parameters
    ----------
    budget : PureDP, ApproxDP or ZCDP
        Total budget; must be positive (ε > 0, or ρ > 0).
    journal : str, os.PathLike, journal store or None
        SQLite journal file, hash-chained and anchored
        (:mod:`accounting.journal`), or a ``postgresql://`` /
        ``postgres://`` URL (:mod:`accounting.journal.store`); None or ``":memory:"``:
        in memory only. Opening an existing journal with the same budget
        restores every split and charge; any number of ledgers, in any
        processes, may share one journal, each charge a transaction on it.
        Another budget or relation raises
        :class:`~accounting.journal.JournalMismatchError`, a damaged, empty or
        truncated file :class:`~accounting.journal.JournalCorruptError`.
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

    def __init__(self, budget: Cost, journal: str | os.PathLike[str] | JournalStore | None = None, *,
                 relation: Relation = "replace_one") -> None:
        check_cost(budget, "budget")
        check_relation(relation)
        currency = currency_of(budget)
        orders = budget.orders if isinstance(budget, RDP) else ORDERS
        vector = in_currency(budget, currency, "", orders)
        # An RDP budget also keeps its spend at the rung orders its claim reads (accounting.claims.native_ladder).
        tracked = tracked_orders(orders, ODOMETER_ORDERS) if currency == "rdp" else ORDERS
        if exhausted(vector, currency, orders):
            raise ValueError(f"budget must be positive (eps > 0, rho > 0, mu > 0 or an RDP curve > 0 at every order), "
                             f"got {budget}")
        self.relation = relation
        self._lock = threading.RLock()
        self._seq = 0
        self._snapshot = (0, 0)  # (seq, size in entries) of the journal's last snapshot row (journal/snapshot.py)
        self._snapshot_pending: int | None = None  # the seq of a snapshot appended in the open transaction
        self._nonadaptive_cache: tuple[tuple[int, Any], Any] | None = None  # accounting.nonadaptive, per row and δ
        self._closed = False
        self._in_transaction = False
        self._accounts: dict[str, Account] = {}
        self.service_rows: list[tuple[int, str, dict[str, Any]]] = []
        """The journal's ``"stopped"``/``"restored"`` rows (seq, kind, payload), in order (docs/service.md)."""
        self.root = Account(self, "", currency, vector, None, vector, orders, tracked=tracked)
        self._journal: JournalStore | None = None
        self.journal_path: str | None = None
        if journal is not None and not _in_memory(journal):
            wanted = {"budget": cost_to_dict(budget), "relation": self.relation}
            opened = journal if isinstance(journal, JournalStore) else _open(journal, create=wanted)
            restore(self, opened, budget, wanted)
            self._journal = opened
            self.journal_path = opened.path

    @classmethod
    def from_journal(cls, journal: str | os.PathLike[str], *, read_only: bool = False) -> Ledger:
        """Open an existing journal with the budget and relation it was written for.

        ``journal`` is a file path or a ``postgresql://`` URL (:mod:`accounting.journal.store`).
        With ``read_only=True`` (``dpglm ledger show``) the ledger reports, and
        every charge or new split raises
        :class:`~accounting.journal.JournalReadOnlyError`.
        """
        if _in_memory(journal):
            raise ValueError("journal: ':memory:' has nothing to open; Ledger(budget) is an in-memory ledger")
        opened = _open(journal, read_only=read_only)
        try:
            meta = opened.read_meta()
            budget = cost_from_dict(meta["budget"])
            relation = meta["relation"]
        except BaseException:
            opened.close()
            raise
        return cls(budget, opened, relation=relation)

    @property
    def read_only(self) -> bool:
        """Whether the journal was opened read-only (charges and new splits are refused)."""
        return self._journal is not None and self._journal.read_only

    @contextmanager
    def _transaction(self) -> Iterator[Transaction | None]:
        """One journal transaction with the rows of others replayed (None without a journal).

        The caller holds ``self._lock``; transactions are not nested.
        """
        self._check_open()
        if self._journal is None:
            yield None
            return
        try:
            try:  # rows the store read after its last commit, outside the lock: replayed before taking it
                replay(self, self._journal.catch_up())
            except BaseException:
                self._closed = True  # half-replayed: this ledger's view cannot be trusted any more
                raise
            self._snapshot_pending = None
            with self._journal.transaction() as transaction:
                self._in_transaction = True
                try:
                    try:
                        replay(self, transaction.new_events)
                    except BaseException:
                        self._closed = True
                        raise
                    yield transaction
                finally:
                    self._in_transaction = False
            if self._snapshot_pending is not None:  # committed with the row after it
                self._snapshot = (self._snapshot_pending, size(self))
        finally:
            self._snapshot_pending = None
            if self._closed:
                self.close()

    def _append(self, transaction: Transaction | None, kind: str, path: str,
                 payload: Callable[[], dict[str, Any]]) -> int:
        """The seq of a new row (journalled in ``transaction``; counted in memory without a journal).

        A transaction's first row is preceded by a snapshot row when one is due
        (:mod:`accounting.journal.snapshot`): the state now is the replay of every
        row before it, since nothing is applied before the commit.
        """
        if transaction is None:
            return self._seq + 1
        last, entries = self._snapshot
        if self._snapshot_pending is None and self._seq - last >= snapshot_interval(entries):
            self._snapshot_pending = transaction.append(SNAPSHOT, "", snapshot_payload(self))
        return transaction.append(kind, path, payload())

    def record_service_row(self, kind: str, payload: Callable[[list[tuple[int, str, dict[str, Any]]]], dict[str, Any]],
                           ) -> int:
        """Append a ``"stopped"`` or ``"restored"`` row (docs/service.md); its seq.

        ``payload`` is called inside the journal transaction with every service row
        committed so far (others' included) and returns the row, or raises to refuse: a
        restore checks "never restored before" and writes its row atomically. The row
        is counted only once durably journalled. Without a journal it is kept in memory.
        """
        from accounting.journal.persistence import SERVICE_KINDS

        if kind not in SERVICE_KINDS:
            raise ValueError(f"kind must be one of {SERVICE_KINDS}, got {kind!r}")
        with self._lock, self._transaction() as transaction:
            row = payload(list(self.service_rows))
            seq = self._append(transaction, kind, "", lambda: row)
            self.service_rows.append((seq, kind, dict(row)))
            self._seq = seq
            return seq

    @property
    def journal_id(self) -> str | None:
        """The random id of the journal (None in memory): what a checkpoint is bound to."""
        return None if self._journal is None else self._journal.journal_id

    @property
    def seq(self) -> int:
        """The last journal row this ledger has seen (after :meth:`refresh`)."""
        self.refresh()
        return self._seq

    def refresh(self) -> None:
        """Replay the rows other ledgers committed to the journal since this one last looked.

        Charges and splits do this inside their transaction; ``remaining``,
        ``spent``, ``used``, ``usage()``, ``report()``, ``to_json()``,
        ``guarantee()`` and ``to_dp_event()`` call it first, so what they show
        includes every charge committed before the call. Without a journal, or
        once closed, it does nothing.
        """
        with self._lock:
            if self._journal is not None and not self._closed and not self._in_transaction:
                with self._transaction():
                    pass

    @contextmanager
    def _fresh(self) -> Iterator[None]:
        """Hold this ledger's lock with its view refreshed from the journal."""
        with self._lock:
            self.refresh()
            yield

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("ledger is closed")

    def _check_writable(self) -> None:
        """Refuse a charge or split on a journal opened read-only, before any budget question is asked."""
        if self.read_only:
            raise JournalReadOnlyError(f"journal {self.journal_path} was opened read-only: it can be shown, "
                                       "not charged (open it with Ledger.from_journal(path) to charge)")

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
              curves: Mapping[str, RDP] | None = None, *, partition: PartitionKey = None) -> dict[str, Account]:
        """Split the total budget (under ``partition``, what fits under that key); see :meth:`Account.split`."""
        return self.root.split(weights, currency, curves, partition=partition)

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

    def guarantee(self, delta: Number | None = None) -> Claim:
        """The claim: (ε, δ)-DP of everything charged so far, valid however the charges were chosen.

        It holds under fully adaptive composition (mechanisms *and* their costs
        chosen from earlier releases), ex post: the ε is read off the run's own
        transcript (:mod:`accounting.claims`; the theorem and its conditions:
        docs/accounting.md, "Claims"). It never exceeds the budget. Its parts
        say which account contributed what, and on which basis: the realised ε
        of pure and approx charges, each zCDP/GDP/RDP account's odometer ladder
        (:mod:`accounting.ladder`), or a plan declared before an account's first
        charge (:meth:`Account.plan`).

        Parameters
        ----------
        delta : real in (0, 1), optional
            For a pure or approx budget the claim is stated at the budget's δ (0
            for pure); a larger ``delta`` is accepted (the claim implies it), a
            smaller one refused. For a zCDP, GDP or RDP budget ``delta`` is
            required and must be fixed without looking at the data (the ladder is
            built from it).

        Returns
        -------
        Claim
            ``eps``, ``delta``, ``parts``; ``claim.cost`` as an ApproxDP/PureDP.
        """
        from accounting.claims import ledger_claim

        exact = None if delta is None else check_exact("delta", delta, 0, 1, low_open=True, high_open=True)
        with self._fresh():
            return ledger_claim(self, exact)

    def nonadaptive_figure(self, delta: Number | None = None) -> ApproxDP:
        """Every recorded charge composed as one mechanism, converted once: NOT a claim under adaptivity.

        Valid only if the sequence of charges was fixed before any data were
        seen (:mod:`accounting.nonadaptive`); a charge without a curve raises
        ``TypeError`` naming it. ``delta`` defaults, for a pure or approx budget,
        to the δ the charges spent. To claim a figure like this one for a run
        whose costs are fixed in advance, declare them with :meth:`Account.plan`
        before the first charge.
        """
        from accounting.nonadaptive import composed_figure

        with self._fresh():
            if delta is None:
                if self.currency not in ("pure", "approx"):
                    raise ValueError(f"delta is required for the non-adaptive figure of a {self.currency} budget")
                target = self.root._used_vector()[1]  # the δ the charges (and the children's shares in use) spent
                if target == 0:
                    raise ValueError("delta is required: the charges spent no delta (pass delta in (0, 1))")
            else:
                target = check_exact("delta", delta, 0, 1, low_open=True, high_open=True)
            cached = self._nonadaptive_cache
            if cached is not None and cached[0] == (self._seq, target):
                result: ApproxDP = cached[1]
                return result
            result = ApproxDP(composed_figure(self._charge_list(), target), target)
            self._nonadaptive_cache = ((self._seq, target), result)
            return result

    def _charge_list(self) -> list[tuple[int, str, Cost, Any, bool, int]]:
        """Every account's distinct charges with their counts, in the order first made (caller holds the lock)."""
        return sorted(((seq, account.path, charged, event, from_event, count) for account in self.accounts()
                       for seq, charged, event, from_event, count in account._record.counts()),
                      key=lambda entry: entry[0])

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
        from accounting.events import charges_as_event

        with self._fresh():
            return charges_as_event(self._charge_list())

    def report(self) -> str:
        """The budget tree as a text table (see :mod:`accounting.report`)."""
        from accounting.report import render_text

        with self._fresh():
            return render_text(self)

    def to_json(self) -> str:
        """The budget tree as JSON (see :mod:`accounting.report`)."""
        from accounting.report import render_json

        with self._fresh():
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


def _in_memory(journal: object) -> bool:
    """``":memory:"`` means what it means to SQLite: no file, an in-memory ledger."""
    return isinstance(journal, str) and journal == ":memory:"


def _open(journal: object, *, create: dict[str, Any] | None = None, read_only: bool = False) -> JournalStore:
    if not isinstance(journal, (str, os.PathLike)):
        raise TypeError("journal must be a file path (str or PathLike), a postgresql:// URL, a journal store or "
                        f"None, got {type(journal).__name__}")
    return open_journal(journal, create=create, read_only=read_only)


if TYPE_CHECKING:
    from accounting.claims import Claim

if TYPE_CHECKING:  # mypy proves that accounts and ledgers are what mechanisms need (accounting.chargeable)
    _ACCOUNT_HAS_BUDGET: type[Budgeted] = Account
    _ACCOUNT_TAKES_EVENTS: type[EventChargeable] = Account
    _LEDGER_HAS_BUDGET: type[Budgeted] = Ledger
    _LEDGER_TAKES_EVENTS: type[EventChargeable] = Ledger
