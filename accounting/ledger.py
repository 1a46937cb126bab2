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
  weights, exactly (children never sum past it). The allocation counts as
  spent on the parent. A zCDP child made from an (ε, δ) share gets
  ρ_max = :func:`accounting.convert.approx_to_zcdp_certified` (the CKS
  inverse rounded *down* to a rational); a pure child of an approximate
  account takes (ε_share, 0) and leaves the δ share with the parent.
- **Relations.** A ledger's guarantee is stated for one neighbouring relation
  (default ``"replace_one"``). A charge stated under ``"add_remove"`` is
  converted to replace-one by group privacy with k = 2 (pure 2ε; zCDP 4ρ,
  Bun–Steinke 2016 Prop. 1.9; approx (2ε, (1 + e^ε)δ)). A replace-one charge
  in an add/remove ledger is refused: it does not imply add/remove privacy.
- **Atomic reserve-and-commit.** One lock per ledger covers check, journal
  write and in-memory update, so racing threads never both pass a check that
  only one fits. With a journal the charge is committed before the receipt
  is returned; a charge that is not durably journalled is not granted.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from itertools import zip_longest
from typing import TYPE_CHECKING, Any, Literal

from accounting import convert, gdp, rdp
from accounting.costs import (
    GDP,
    ORDERS,
    RDP,
    ZCDP,
    ApproxDP,
    Cost,
    Number,
    PureDP,
    Relation,
    as_fraction,
    check_cost,
    check_relation,
    cost_from_dict,
    cost_to_dict,
)
from accounting.chargeable import BudgetExceeded, Budgeted, EventChargeable, PartitionKey, Receipt
from accounting.journal import Journal, JournalMismatchError
from accounting.uncopyable import Uncopyable

__all__ = ["CURRENCIES", "Account", "BudgetExceeded", "Currency", "Ledger", "PartitionKey", "Receipt"]

Currency = Literal["pure", "approx", "zcdp", "gdp", "rdp"]
CURRENCIES: tuple[str, ...] = ("pure", "approx", "zcdp", "gdp", "rdp")
Vector = tuple[Fraction, ...]
_ZERO: Vector = (Fraction(0), Fraction(0))

#: Which child currencies a parent currency can fund (see module docstring).
_FUNDABLE: dict[str, tuple[str, ...]] = {
    "pure": ("pure",),
    "approx": ("approx", "pure", "zcdp", "gdp", "rdp"),
    "zcdp": ("zcdp",),
    "gdp": ("gdp",),
    "rdp": ("rdp",),
}


# Spend vectors: (ε, δ), (ρ, δ), (μ², 0), or an RDP curve (one entry per order of rdp.ORDERS). _ZERO
# (two zeros) is the zero of every currency: shorter vectors are padded with zeros.
def _add(a: Vector, b: Vector) -> Vector:
    if len(a) == len(b) == 2:
        # Skipping zero components keeps the common (δ = 0) charge cheap: Fraction addition is slow.
        return (a[0] + b[0] if b[0] else a[0], a[1] + b[1] if b[1] else a[1])
    return tuple(x + y if y else x for x, y in zip_longest(a, b, fillvalue=Fraction(0)))


def _sub(a: Vector, b: Vector) -> Vector:
    return tuple(x - y for x, y in zip_longest(a, b, fillvalue=Fraction(0)))


def _max(a: Vector, b: Vector) -> Vector:
    return tuple(max(x, y) for x, y in zip_longest(a, b, fillvalue=Fraction(0)))


def _fits(a: Vector, b: Vector) -> bool:
    return all(x <= y for x, y in zip_longest(a, b, fillvalue=Fraction(0)))


def _is_zero(a: Vector) -> bool:
    return not any(a)


def _exhausted(remaining: Vector, currency: str) -> bool:
    """No charge can fit: ε (ρ, μ²) is used up, or, for an RDP curve, some order is."""
    if currency == "rdp":
        return min(remaining) <= 0
    return remaining[0] <= 0


def _as_cost(vector: Vector, currency: str) -> Cost:
    if currency == "pure":
        return PureDP(vector[0])
    if currency == "approx":
        return ApproxDP(vector[0], vector[1])
    if currency == "gdp":
        return GDP.from_mu_squared(vector[0])
    if currency == "rdp":
        return RDP(tuple(vector) + (Fraction(0),) * (len(ORDERS) - len(vector)))
    return ZCDP(vector[0], vector[1])


def _ceil_fraction(x: float) -> Fraction:
    """An exact rational at or above the real number that ``x`` approximates."""
    return Fraction(math.nextafter(x * (1.0 + 1e-12), math.inf))


def _currency_of(cost: Cost) -> Currency:
    if isinstance(cost, PureDP):
        return "pure"
    if isinstance(cost, ApproxDP):
        return "approx"
    if isinstance(cost, GDP):
        return "gdp"
    if isinstance(cost, RDP):
        return "rdp"
    return "zcdp"


def _to_relation(cost: Cost, relation: str, ledger_relation: str) -> Cost:
    """Restate ``cost`` (given under ``relation``) under the ledger's relation."""
    if relation == ledger_relation:
        return cost
    if ledger_relation == "add_remove":
        raise ValueError(
            "relation='replace_one' charge in an add_remove ledger: replace-one privacy does not imply "
            "add/remove privacy; state the cost under relation='add_remove'"
        )
    # add_remove → replace_one: group privacy with k = 2.
    if isinstance(cost, PureDP):
        return PureDP(2 * cost.eps)
    if isinstance(cost, GDP):  # group privacy for GDP: k·μ (Dong, Roth & Su 2022, §2)
        return GDP.from_mu_squared(4 * cost.mu_squared)
    if isinstance(cost, ZCDP):
        if cost.delta:
            raise ValueError("approximate zCDP (delta > 0) under add_remove cannot be restated as replace_one")
        return ZCDP(4 * cost.rho)
    if isinstance(cost, RDP):
        raise ValueError("an RDP curve under add_remove cannot be restated as replace_one (RDP group privacy "
                         "changes the orders); state it under replace_one, or use Account.charge_event")
    return ApproxDP(2 * cost.eps, _group_delta(cost))


#: A rational above e = 2.718281828459045235…
_E_UPPER = Fraction(271828182845904524, 10**17)


def _exp_upper(x: Fraction) -> Fraction:
    """A rational ≥ e^x for x ≥ 0, exact for any size of x (no float overflow).

    e^x = e^⌊x⌋·e^{x−⌊x⌋}: the first factor from a decimal upper bound of e, the
    second from the float exp of a float at or above the fractional part,
    rounded up past its error.
    """
    whole = math.floor(x)
    fractional = float(x - whole)
    if Fraction(fractional) < x - whole:
        fractional = math.nextafter(fractional, math.inf)
    return _E_UPPER**whole * _ceil_fraction(math.exp(fractional))


class _Unpayable(ValueError):
    """A charge no budget can pay (raised inside the ledger, refused as :class:`BudgetExceeded`)."""


def _group_delta(cost: ApproxDP) -> Fraction:
    """δ' ≥ (1 + e^ε)·δ of an add/remove (ε, δ) charge restated under replace-one (group privacy, k = 2).

    Raises :class:`_Unpayable` when δ' ≥ 1: the restated guarantee is vacuous
    and no (ε, δ) budget (δ < 1) can pay it (the charge is refused as
    :class:`BudgetExceeded`). Decided in log space first, so a huge ε neither
    overflows a float nor builds a huge rational; ε > 10³⁰⁰ with δ > 0 is
    vacuous for every δ a Fraction can hold (it would need δ < e^(−10³⁰⁰)).
    """
    if cost.delta == 0:
        return Fraction(0)
    vacuous = _Unpayable(
        "restated under replace_one (group privacy, k = 2) it has delta' = (1 + e^eps) * delta >= 1: "
        "no guarantee, no budget can pay it; lower eps or delta"
    )
    if cost.eps > 10**300:
        raise vacuous
    eps = float(cost.eps)
    log_factor = eps + math.log1p(math.exp(-eps))  # ln(1 + e^ε), stable for large ε
    log_delta = math.log(cost.delta.numerator) - math.log(cost.delta.denominator)
    if log_factor + log_delta > 1e-6:
        raise vacuous
    restated = (1 + _exp_upper(cost.eps)) * cost.delta
    if restated >= 1:
        raise vacuous
    return restated


def _in_currency(cost: Cost, currency: str, path: str) -> Vector:
    """The cost as a spend vector of ``currency``; TypeError where the math forbids it."""
    if isinstance(cost, ApproxDP) and cost.delta == 0:
        cost = PureDP(cost.eps)
    if currency == "rdp":
        return _rdp_curve(cost, path)
    if isinstance(cost, RDP):
        raise TypeError(f"account {path!r} ({currency}) cannot take an RDP charge ({cost}): an RDP curve on a grid "
                        "of orders implies no zCDP, GDP or (eps, delta) figure without choosing delta; use an rdp account")
    if isinstance(cost, GDP):
        if currency == "gdp":
            return (cost.mu_squared, Fraction(0))
        if currency == "zcdp":  # μ-GDP is dominated by a Gaussian pair, whose Rényi divergences are αμ²/2
            return (cost.mu_squared / 2, Fraction(0))
        raise TypeError(f"account {path!r} ({currency}) cannot take a GDP charge ({cost}): pick a point of its "
                        "(eps, delta) curve and charge ApproxDP, or charge it in a gdp or zcdp account")
    if isinstance(cost, PureDP):
        if currency == "zcdp":
            return (cost.eps * cost.eps / 2, Fraction(0))
        if currency == "gdp":
            mu = gdp.pure_to_gdp_certified(cost.eps)
            return (mu * mu, Fraction(0))
        return (cost.eps, Fraction(0))
    if isinstance(cost, ApproxDP):
        if currency == "approx":
            return (cost.eps, cost.delta)
        raise TypeError(f"account {path!r} ({currency}) cannot take an (eps, delta) charge: {cost}")
    if currency == "zcdp":
        return (cost.rho, cost.delta)
    raise TypeError(f"account {path!r} ({currency}) cannot take a zCDP charge ({cost}): zCDP does not imply {currency} DP")


def _rdp_curve(cost: Cost, path: str) -> Vector:
    """The exact RDP curve of a cost on the grid (:mod:`accounting.rdp`); approximate costs have none."""
    if isinstance(cost, RDP):
        return cost.epsilons
    if isinstance(cost, PureDP):
        return rdp.pure_curve(cost.eps)
    if isinstance(cost, GDP):
        return rdp.gaussian_curve(cost.mu_squared / 2)
    if isinstance(cost, ZCDP) and cost.delta == 0:
        return rdp.gaussian_curve(cost.rho)
    raise TypeError(f"account {path!r} (rdp) cannot take {cost}: an approximate (delta > 0) charge has no RDP curve")


def _to_approx(used: Vector, currency: str, delta: Fraction) -> Fraction:
    """Certified ε at ``delta`` of a zCDP (ρ), GDP (μ²) or RDP (curve) spend vector."""
    if currency == "zcdp":
        return convert.zcdp_to_approx_certified(used[0], delta)
    if currency == "gdp":
        return gdp.gdp_to_approx_certified(used[0], delta)
    return rdp.curve_to_approx_certified(_as_cost(used, "rdp").epsilons, delta)


def _check_partition(partition: object) -> PartitionKey:
    if partition is None or (isinstance(partition, (str, int)) and not isinstance(partition, bool)):
        return partition  # type: ignore[return-value]
    raise TypeError(f"partition must be None, a str or an int, got {type(partition).__name__}")


def _check_text(value: object, name: str, *, required: bool) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if required and not value.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return value


@dataclass
class _Usage:
    """Spends of one mechanism (or one analysis reason) on one account."""

    count: int = 0
    total: Vector = _ZERO


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
        self._sequential: Vector = _ZERO  # partition=None charges (excluding allocations)
        self._allocated: Vector = _ZERO  # budgets handed to children
        self._partitions: dict[PartitionKey, Vector] = {}
        self._widest: Vector = _ZERO  # component-wise max over self._partitions (sums only grow)
        self._splits: list[tuple[dict[str, Fraction], dict[str, str], dict[str, Account]]] = []
        self._splits_claimed = 0
        self.children: dict[str, Account] = {}
        self._usage: dict[tuple[bool, str], _Usage] = {}
        self._history: list[tuple[int, Cost, Any, bool]] = []  # (seq, charged, pair-form event, from an event)

    # ----- state -------------------------------------------------------------------------------
    def _spent_vector(self, partition: PartitionKey = None, extra: Vector = _ZERO) -> Vector:
        """Σ(partition=None charges) + allocations + max over keys of Σ(charges with that key).

        With ``extra``, the spend as it would be after charging ``extra`` under ``partition``.
        """
        sequential = _add(self._sequential, self._allocated)
        if partition is None:
            return _add(_add(sequential, extra), self._widest)
        grown = _add(self._partitions.get(partition, _ZERO), extra)
        return _add(sequential, _max(self._widest, grown))

    @property
    def budget(self) -> Cost:
        """The account's total budget."""
        return _as_cost(self._budget, self.currency)

    @property
    def spent(self) -> Cost:
        """Charges (sequential + max over partitions) plus child allocations."""
        with self._ledger._lock:
            return _as_cost(self._spent_vector(), self.currency)

    @property
    def remaining(self) -> Cost:
        """``budget − spent``: the largest partition=None charge that still fits."""
        with self._ledger._lock:
            return _as_cost(_sub(self._budget, self._spent_vector()), self.currency)

    def remaining_in(self, partition: PartitionKey) -> Cost:
        """The largest charge that still fits under ``partition``."""
        partition = _check_partition(partition)
        with self._ledger._lock:
            if partition is None:
                return self.remaining
            # max(other keys, this key + x) <= budget - sequential  <=>  x <= budget - sequential - this key
            # (the other keys already fit).
            spent = _add(_add(self._sequential, self._allocated), self._partitions.get(partition, _ZERO))
            return _as_cost(_sub(self._budget, spent), self.currency)

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
        _check_text(mechanism, "mechanism", required=True)
        return self._charge(cost, mechanism, relation, partition, note, analysis=False)

    def charge_analysis(self, cost: Cost, *, reason: str, relation: Relation = "replace_one",
                        partition: PartitionKey = None) -> Receipt:
        """Record a cost that a theorem, not noise, incurs (e.g. paper Lemma 6.1, switching times).

        Same rules as :meth:`charge`; the report marks it as analysis-only with
        its ``reason``.
        """
        _check_text(reason, "reason", required=True)
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

        _check_text(mechanism, "mechanism", required=True)
        return charge_event(self, event, mechanism=mechanism, relation=relation, delta=delta, partition=partition,
                            note=note)

    def _charge(self, cost: Cost, mechanism: str, relation: str, partition: PartitionKey, note: str,
                *, analysis: bool, event: Any = None, from_event: bool = False) -> Receipt:
        check_cost(cost)
        check_relation(relation)
        partition = _check_partition(partition)
        _check_text(note, "note", required=False)
        ledger = self._ledger
        try:
            restated = _to_relation(cost, relation, ledger.relation)
        except _Unpayable as unpayable:
            raise BudgetExceeded(self.path, cost, self.remaining_in(partition), str(unpayable)) from None
        vector = _in_currency(restated, self.currency, self.path)
        charged = _as_cost(vector, self.currency)
        with ledger._lock:
            ledger._check_open()
            spent_after = self._spent_vector(partition, vector)
            if not _fits(spent_after, self._budget):
                raise BudgetExceeded(self.path, charged, self.remaining_in(partition))

            def payload() -> dict[str, Any]:
                data = {"cost": cost_to_dict(cost), "charged": cost_to_dict(charged), "mechanism": mechanism,
                        "relation": relation, "partition": partition, "note": note}
                if from_event:
                    from accounting.events import event_to_dict

                    data["event"] = None if event is None else event_to_dict(event)
                return data

            seq = ledger._record("analysis" if analysis else "charge", self.path, payload)
            self._apply(vector, partition, mechanism, note, analysis, (seq, charged, event, from_event))
            return Receipt(seq, self.path, cost, charged, mechanism, relation, partition, note, analysis,
                           _as_cost(_sub(self._budget, spent_after), self.currency))

    def _apply(self, vector: Vector, partition: PartitionKey, mechanism: str, note: str, analysis: bool,
               record: tuple[int, Cost, Any, bool]) -> None:
        self._history.append(record)
        if partition is None:
            self._sequential = _add(self._sequential, vector)
        else:
            grown = _add(self._partitions.get(partition, _ZERO), vector)
            self._partitions[partition] = grown
            self._widest = _max(self._widest, grown)
        usage = self._usage.setdefault((analysis, note if analysis else mechanism), _Usage())
        usage.count += 1
        usage.total = _add(usage.total, vector)

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
        exact_weights, currencies = self._check_split(weights, currency)
        curves = {} if curves is None else dict(curves)
        unknown = [n for n in curves if currencies.get(n) != "rdp" or self.currency != "approx"]
        if unknown:
            raise ValueError(f"curves: only rdp children of an approx account take a budget curve, not {unknown}")
        ledger = self._ledger
        with ledger._lock:
            ledger._check_open()
            if self._splits_claimed < len(self._splits):
                recorded_weights, recorded_currencies, children = self._splits[self._splits_claimed]
                if recorded_weights != exact_weights or recorded_currencies != currencies:
                    raise JournalMismatchError(
                        f"journal {ledger.journal_path}: split #{self._splits_claimed + 1} of account "
                        f"{self.path or '<root>'!r} was {_describe(recorded_weights, recorded_currencies)}, "
                        f"now {_describe(exact_weights, currencies)}"
                    )
                self._splits_claimed += 1
                return dict(children)
            clash = [name for name in exact_weights if name in self.children]
            if clash:
                raise ValueError(f"weights: account {self.path or '<root>'!r} already has children {clash}")
            remaining = _sub(self._budget, self._spent_vector())
            if _exhausted(remaining, self.currency):
                raise ValueError(f"account {self.path or '<root>'!r} has no budget left to split")
            total = sum(exact_weights.values())
            plan = {}
            for name, weight in exact_weights.items():
                share = tuple(part * weight / total for part in remaining)
                plan[name] = self._child_budget(name, share, currencies[name], curves.get(name))
            payload = {
                "weights": {name: str(w) for name, w in exact_weights.items()},
                "currency": currencies,
                "children": {name: {"share": [str(x) for x in s], "budget": [str(x) for x in b]}
                             for name, (s, b) in plan.items()},
            }
            ledger._record("split", self.path, lambda: payload)
            children = self._apply_split(exact_weights, currencies, plan)
            self._splits_claimed += 1
            return dict(children)

    def _check_split(self, weights: object, currency: object) -> tuple[dict[str, Fraction], dict[str, str]]:
        if not isinstance(weights, Mapping) or not weights:
            raise ValueError("weights must be a non-empty mapping of child name to positive weight")
        exact: dict[str, Fraction] = {}
        for name, weight in weights.items():
            if not isinstance(name, str) or not name or "/" in name:
                raise ValueError(f"weights: child names must be non-empty strings without '/', got {name!r}")
            value = as_fraction(weight, f"weights[{name!r}]")
            if value <= 0:
                raise ValueError(f"weights[{name!r}] must be > 0, got {weight}")
            exact[name] = value
        if currency is None:
            currency = {}
        if not isinstance(currency, Mapping):
            raise TypeError(f"currency must be a mapping of child name to currency, got {type(currency).__name__}")
        unknown = [name for name in currency if name not in exact]
        if unknown:
            raise ValueError(f"currency names children not in weights: {unknown}")
        currencies = {}
        for name in exact:
            chosen = currency.get(name, self.currency)
            if chosen not in CURRENCIES:
                raise ValueError(f"currency[{name!r}] must be one of {CURRENCIES}, got {chosen!r}")
            if chosen not in _FUNDABLE[self.currency]:
                raise TypeError(
                    f"currency[{name!r}]: a {self.currency} account can fund {_FUNDABLE[self.currency]} children, "
                    f"not {chosen!r}"
                )
            currencies[name] = chosen
        return exact, currencies

    def _child_budget(self, name: str, share: Vector, currency: str, curve: RDP | None = None) -> tuple[Vector, Vector]:
        """(share taken from this account, child's budget in its currency)."""
        if currency == self.currency:
            return share, share
        if currency == "pure":  # pure child of an approx account: delta stays here
            return (share[0], Fraction(0)), (share[0], Fraction(0))
        # zCDP or GDP child of an approx account.
        if share[1] <= 0:
            raise ValueError(f"currency[{name!r}]={currency!r} needs a delta > 0 in its (eps, delta) share")
        if currency == "gdp":  # the largest μ meeting the share, exactly (certified)
            mu_max = gdp.approx_to_gdp_certified(share[0], share[1])
            return share, (mu_max * mu_max, Fraction(0))
        if currency == "rdp":
            if curve is None:
                return share, rdp.gaussian_curve(rdp.largest_gaussian_rho(share[0], share[1]))
            if not isinstance(curve, RDP):
                raise TypeError(f"curves[{name!r}] must be an accounting.RDP, got {type(curve).__name__}")
            eps = rdp.curve_to_approx_certified(curve.epsilons, share[1])
            if eps > share[0]:
                raise ValueError(f"curves[{name!r}] converts to eps={float(eps):.6g} at delta={float(share[1]):.3g}, "
                                 f"above its share eps={float(share[0]):.6g}")
            return share, curve.epsilons
        rho_max = convert.approx_to_zcdp_certified(share[0], share[1])
        return share, (rho_max, Fraction(0))

    def _apply_split(self, weights: dict[str, Fraction], currencies: dict[str, str],
                     plan: dict[str, tuple[Vector, Vector]]) -> dict[str, Account]:
        children = {}
        for name, (share, budget) in plan.items():
            path = f"{self.path}/{name}" if self.path else name
            child = Account(self._ledger, path, currencies[name], budget, self, share)
            self.children[name] = child
            self._ledger._accounts[path] = child
            self._allocated = _add(self._allocated, share)
            children[name] = child
        self._splits.append((weights, currencies, children))
        return children

    # ----- what was really used -----------------------------------------------------------------
    def _used_vector(self) -> Vector:
        """Charges plus what the children really used, converted to this currency."""
        used = _add(self._sequential, self._widest)
        for child in self.children.values():
            used = _add(used, child._used_in_parent())
        return used

    def _used_in_parent(self) -> Vector:
        used = self._used_vector()
        parent = self.parent
        assert parent is not None
        if self.currency == parent.currency or self.currency == "pure":
            return used
        # zCDP (GDP) child of an approx account: CKS (exact tradeoff) conversion at the child's delta
        # share, capped by the eps share (the budget was certified to meet it).
        if _is_zero(used):
            return _ZERO
        eps = min(self._share[0], _to_approx(used, self.currency, self._share[1]))
        return (eps, self._share[1])

    @property
    def used(self) -> Cost:
        """What charges on this account and its descendants really spent (allocations excluded)."""
        with self._ledger._lock:
            return _as_cost(self._used_vector(), self.currency)

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
                 "total": _as_cost(use.total, self.currency)}
                for (analysis, label), use in self._usage.items()
            ]

    def walk(self) -> Iterator[Account]:
        """This account and all descendants, depth first."""
        yield self
        for child in self.children.values():
            yield from child.walk()


def _describe(weights: dict[str, Fraction], currencies: dict[str, str]) -> str:
    return "{" + ", ".join(f"{n}: {w} ({currencies[n]})" for n, w in weights.items()) + "}"


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
        if isinstance(budget, RDP):
            positive = min(budget.epsilons) > 0
        else:
            positive = (budget.rho if isinstance(budget, ZCDP) else
                        budget.mu_squared if isinstance(budget, GDP) else budget.eps) > 0
        if not positive:
            raise ValueError(f"budget must be positive (eps > 0, rho > 0, mu > 0 or an RDP curve > 0 at every order), "
                             f"got {budget}")
        self.relation = relation
        self._lock = threading.RLock()
        self._seq = 0
        self._closed = False
        currency = _currency_of(budget)
        vector = _in_currency(budget, currency, "")
        self._accounts: dict[str, Account] = {}
        self.root = Account(self, "", currency, vector, None, vector)
        self._journal: Journal | None = None
        self.journal_path: str | None = None
        if journal is not None:
            wanted = {"budget": cost_to_dict(budget), "relation": self.relation}
            opened = journal if isinstance(journal, Journal) else Journal(journal, create=wanted)
            self._open_journal(opened, budget, wanted)

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

    def _open_journal(self, journal: Journal, budget: Cost, wanted: dict[str, Any]) -> None:
        try:
            meta = journal.read_meta()
            if meta != wanted:
                raise JournalMismatchError(
                    f"journal {journal.path} was written for budget {cost_from_dict(meta['budget'])} "
                    f"({meta['relation']}), not {budget} ({self.relation}); refusing to start over"
                )
            for seq, kind, path, payload in journal.events():
                self._replay(seq, kind, path, payload)
        except BaseException:
            journal.close()
            raise
        self._journal = journal
        self.journal_path = journal.path

    def _replay(self, seq: int, kind: str, path: str, payload: dict[str, Any]) -> None:
        account = self._accounts.get(path) if path else self.root
        if account is None:
            raise JournalMismatchError(f"journal event {seq} names unknown account {path!r}")
        if kind == "split":
            weights = {name: Fraction(w) for name, w in payload["weights"].items()}
            plan = {name: (tuple(Fraction(x) for x in c["share"]), tuple(Fraction(x) for x in c["budget"]))
                    for name, c in payload["children"].items()}
            account._apply_split(weights, dict(payload["currency"]), plan)
        elif kind in ("charge", "analysis"):
            charged = cost_from_dict(payload["charged"])
            vector = _in_currency(charged, account.currency, path)
            note = payload["note"]
            event = None
            if payload.get("event") is not None:
                from accounting.events import event_from_dict

                event = event_from_dict(payload["event"])
            account._apply(vector, payload["partition"], payload["mechanism"], note, kind == "analysis",
                           (seq, charged, event, "event" in payload))
        else:
            raise JournalMismatchError(f"journal event {seq} has unknown kind {kind!r}")
        self._seq = seq

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

        Composition comes before conversion: the direct charges of pure and
        approx accounts add by basic composition; the accounts of each other
        currency are pooled (zCDP: ρ add; GDP: μ² add; RDP: curves add order by
        order) and each pool is converted once, at the sum of its accounts' δ
        shares, keeping the smaller of that and the sum of its accounts'
        separate conversions (both bound the same composition). See
        :func:`accounting.pooling.pools` and ``docs/accounting.md``.

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
