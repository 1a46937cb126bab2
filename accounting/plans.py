"""What an account commits to before its first charge: a declared plan, or the Rényi order it holds.

A **held order** (:func:`hold`): a fresh rdp account may move the order its
filter holds to the one best for a public workload (the calibration does it),
its budget and ladder rebuilt from its share alone (:mod:`accounting.ladder`).

A **plan** (:func:`declare`, :meth:`accounting.ledger.Account.plan`) is a sequence of dp-accounting
events and cost values, each stated under a neighbouring relation. From then
on every charge of the account must be the plan's next steps: a charge is
matched, in order, against the plan's leaves (a ``SelfComposedDpEvent(e, n)``
is n steps ``e``; a ``ComposedDpEvent`` its parts in order); steps may be
skipped, never reordered, and a charge that is not the next planned step is
refused before anything is drawn (:class:`OffPlan`). The account's claim is
then the plan's non-adaptive figure at the account's δ
(:func:`accounting.nonadaptive.composed_figure` of the whole plan), whatever
prefix of it runs.

Why that is valid under adaptivity (docs/accounting.md, "Claims: plans"): the
costs were fixed before any data were seen, so the run is a post-processing of
the whole plan run in order — skipping a step is ignoring its output, stopping
early is ignoring the rest — and each planned step, given the past, is a
garbling of its dominating pair, whose composition the figure bounds (the
hockey-stick divergence of a stopped composition is at most the whole one's,
since e^{−L} is a martingale and the divergence a convex function of it).
The filter is not needed beside a plan; the plan must fit the share when it is
declared.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from accounting.chargeable import BudgetExceeded
from accounting.costs import Cost, check_cost, check_relation, cost_from_dict, cost_to_dict

if TYPE_CHECKING:
    from dp_accounting import dp_event

    from accounting.account import Account

__all__ = ["MAX_PLAN_BLOCKS", "OffPlan", "Plan", "Step", "declare", "steps_of"]

#: Largest number of distinct consecutive steps a plan (or one charge) may have.
MAX_PLAN_BLOCKS = 10_000

#: A planned step: (relation, a leaf dp-accounting event or a cost value).
Step = tuple[str, Any]


class OffPlan(BudgetExceeded):
    """A charge that is not the plan's next step: refused before anything was drawn (nothing changed)."""


def _leaf_blocks(event: dp_event.DpEvent, times: int) -> Iterator[tuple[Any, int]]:
    """(leaf, count) blocks of ``event`` in order: a self-composition of a leaf is one block."""
    from dp_accounting import dp_event

    if isinstance(event, dp_event.SelfComposedDpEvent):
        inner = event.event
        if not isinstance(inner, (dp_event.SelfComposedDpEvent, dp_event.ComposedDpEvent)):
            yield inner, int(event.count) * times
            return
        for _ in range(int(event.count) * times):
            yield from _leaf_blocks(inner, 1)
        return
    if isinstance(event, dp_event.ComposedDpEvent):
        for _ in range(times):
            for part in event.events:
                yield from _leaf_blocks(part, 1)
        return
    yield event, times


def steps_of(item: Any, relation: str, name: str) -> list[tuple[Step, int]]:
    """Run-length blocks ((relation, leaf), count) of one plan item or charge: an event or a cost value."""
    from accounting.costs import GDP, RDP, ZCDP, ApproxDP, PureDP

    if isinstance(item, (PureDP, ApproxDP, ZCDP, GDP, RDP)):
        return [((relation, item), 1)]
    from dp_accounting import dp_event

    if isinstance(item, dp_event.DpEvent):
        from accounting.event_check import checked_event

        checked_event(item)  # validated as every charged event is; compared in the form the caller wrote
        blocks: list[tuple[Step, int]] = []
        for leaf, count in _leaf_blocks(item, 1):
            if isinstance(leaf, dp_event.NoOpDpEvent) or count == 0:
                continue
            if blocks and blocks[-1][0] == (relation, leaf):
                blocks[-1] = (blocks[-1][0], blocks[-1][1] + count)
            else:
                blocks.append(((relation, leaf), count))
            if len(blocks) > MAX_PLAN_BLOCKS:
                raise ValueError(f"{name} has more than {MAX_PLAN_BLOCKS} distinct consecutive steps")
        return blocks
    return [((relation, check_cost(item, name)), 1)]


@dataclass
class Plan:
    """A declared plan and how far the account's charges went in it (``position``: block index, steps used)."""

    blocks: list[tuple[Step, int]]
    claim_eps: Fraction
    position: tuple[int, ...] = ()

    @classmethod
    def declare(cls, items: Sequence[Any], relation: str) -> list[tuple[Step, int]]:
        """The run-length steps of ``items`` under ``relation`` (merged where consecutive steps are equal)."""
        from dp_accounting import dp_event

        check_relation(relation)
        if isinstance(items, (dp_event.DpEvent, str, bytes)) or not isinstance(items, Sequence) or not items:
            raise TypeError("plan must be a non-empty sequence of dp-accounting events and cost values "
                            "(wrap a single event in a list)")
        blocks: list[tuple[Step, int]] = []
        for i, item in enumerate(items):
            for step, count in steps_of(item, relation, f"plan[{i}]"):
                if blocks and blocks[-1][0] == step:
                    blocks[-1] = (step, blocks[-1][1] + count)
                else:
                    blocks.append((step, count))
        if len(blocks) > MAX_PLAN_BLOCKS:
            raise ValueError(f"plan has more than {MAX_PLAN_BLOCKS} distinct consecutive steps")
        return blocks

    @property
    def order_free(self) -> bool:
        """Every step is a GDP cost value. The plan's figure is then the exact μ-GDP of Σμ² (Dong, Roth & Su 2022,
        Cor. 3.3), which holds for *any* order of its steps — it is the GDP filter of Σμ² ≤ the planned total
        (docs/accounting.md, "Claims", Theorem 2.3) — so charges may take the planned steps in any order."""
        from accounting.costs import GDP

        return all(isinstance(item, GDP) for (_, item), _ in self.blocks)

    def advance(self, charge: list[tuple[Step, int]]) -> tuple[int, ...] | None:
        """The position after ``charge`` if it is the plan's next steps (some may be skipped), else None.

        The position is (block index, steps used in it); for an :attr:`order_free` plan, the steps taken from
        each block.
        """
        if self.order_free:
            taken = list(self.position) if self.position else [0] * len(self.blocks)
            for step, count in charge:
                for i, (planned, planned_count) in enumerate(self.blocks):
                    if planned == step and planned_count - taken[i] >= count:
                        taken[i] += count
                        break
                else:
                    return None
            return tuple(taken)
        index, used = self.position or (0, 0)
        for step, count in charge:
            while index < len(self.blocks) and (self.blocks[index][0] != step
                                                or self.blocks[index][1] - used < count):
                index, used = index + 1, 0  # skipped: planned steps that will not run
            if index == len(self.blocks):
                return None
            used += count
        return index, used

    @property
    def steps_left(self) -> int:
        """Planned steps not yet charged (nor skipped)."""
        total = sum(count for _, count in self.blocks)
        if not self.position:
            return total
        if self.order_free:
            return total - sum(self.position)
        index, used = self.position
        return sum(count for _, count in self.blocks[index:]) - used

    def to_dict(self) -> dict[str, Any]:
        """The journal form of the declaration (steps, counts, the claim computed when it was declared)."""
        from dp_accounting import dp_event

        from accounting.events import event_to_dict

        def step(item: Any) -> dict[str, Any]:
            if isinstance(item, dp_event.DpEvent):
                return {"event": event_to_dict(item)}
            return {"cost": cost_to_dict(item)}

        return {"steps": [{"relation": relation, "count": count} | step(item)
                          for (relation, item), count in self.blocks], "claim_eps": str(self.claim_eps)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """Inverse of :meth:`to_dict` (a fresh position: the charges replayed after it advance it)."""
        from accounting.events import event_from_dict

        blocks: list[tuple[Step, int]] = []
        for entry in data["steps"]:
            item: Cost | Any = event_from_dict(entry["event"]) if "event" in entry else cost_from_dict(entry["cost"])
            blocks.append(((entry["relation"], item), int(entry["count"])))
        return cls(blocks, Fraction(data["claim_eps"]))

    def describe(self) -> str:
        """A short form: ``1000 × PoissonSampledDpEvent(...) (add_remove); 300 charged``."""
        total = sum(count for _, count in self.blocks)
        shown = "; ".join(f"{count} × {_short(item)} ({relation})" for (relation, item), count in self.blocks[:3])
        more = f"; … {len(self.blocks) - 3} more" if len(self.blocks) > 3 else ""
        return f"{shown}{more}: {total - self.steps_left} of {total} steps charged or skipped"


def _short(item: Any) -> str:
    text = str(item)
    return text if len(text) <= 60 else text[:57] + "..."


def declare(account: Account, items: Any, relation: str) -> Fraction:
    """:meth:`accounting.ledger.Account.plan`: check, cost, journal and install a plan; its claim's ε."""
    from accounting.chargeable import account_name

    check_relation(relation)
    ledger = account._ledger
    ledger._check_writable()
    if account.ladder is None:
        raise TypeError(f"account {account_name(account.path)!r} ({account.currency}) takes no plan: declare one on "
                        "a zcdp, gdp or rdp account funded by an (eps, delta) share")
    blocks = Plan.declare(items, relation)
    try:
        claim_eps = _figure(account, blocks)
    except (TypeError, ValueError) as why:
        raise ValueError(f"plan: its figure cannot be computed: {why}") from None
    if claim_eps > account.ladder.eps:
        raise ValueError(f"plan: its non-adaptive figure eps={float(claim_eps):.6g} at "
                         f"delta={float(account.ladder.delta):.3g} exceeds account {account_name(account.path)!r}'s "
                         f"share eps={float(account.ladder.eps):.6g}")
    declared = Plan(blocks, claim_eps)
    with ledger._lock:
        with ledger._transaction() as transaction:
            if account.planned or account.charge_counts() or account.children:
                raise ValueError(f"account {account_name(account.path)!r} has already been charged, split or "
                                 "planned: a plan is declared before the first charge")
            seq = ledger._append(transaction, "plan", account.path, declared.to_dict)
        ledger._seq = seq
        account._plan = declared
    return claim_eps


def _figure(account: Account, blocks: list[tuple[Step, int]]) -> Fraction:
    """The non-adaptive figure of the whole plan at the account's δ, each step costed as its charge would be."""
    from accounting.costs import GDP, RDP, ZCDP, ApproxDP, PureDP
    from accounting.events import cost_of_event
    from accounting.nonadaptive import composed_figure
    from accounting.restate import Unpayable, restate
    from accounting.spend import as_cost, in_currency

    assert account.ladder is not None
    ledger_relation = account.relation
    charges = []
    for (relation, item), count in blocks:
        if isinstance(item, (PureDP, ApproxDP, ZCDP, GDP, RDP)):  # a cost value
            try:
                restated = restate(item, relation, ledger_relation)
            except Unpayable as why:
                raise ValueError(f"{item} cannot be charged here: {why}") from None
            vector = in_currency(restated, account.currency, account.path, account.tracked_orders, account.orders)
            charges.append((0, account.path, as_cost(vector, account.currency, account.tracked_orders), None, False,
                            count))
        else:
            cost, pair = cost_of_event(item, account.currency, relation, ledger_relation, None)
            charges.append((0, account.path, cost, pair, True, count))
    return composed_figure(charges, account.ladder.delta)


def hold(account: Account, order: Any) -> None:
    """:meth:`accounting.ledger.Account.hold`: move an uncharged rdp account's held order, journalled."""
    from accounting.chargeable import account_name
    from accounting.costs import ORDERS, as_fraction
    from accounting.ladder import rdp_ladder

    exact = as_fraction(order, "order")
    ladder = account.ladder
    if account.currency != "rdp" or ladder is None or ladder.top is not None:
        raise TypeError(f"account {account_name(account.path)!r}: only an rdp account holding one order for an "
                        "(eps, delta) share can move its held order")
    if exact not in ORDERS:
        raise ValueError(f"order must be one of accounting.rdp.ORDERS (1.1 ... 1024), got {float(exact)}")
    ledger = account._ledger
    ledger._check_writable()
    rungs = rdp_ladder(ladder.eps, ladder.delta, exact)
    with ledger._lock:
        with ledger._transaction() as transaction:
            if account.charge_counts() or account.children or account.planned:
                raise ValueError(f"account {account_name(account.path)!r} has already been charged, split or "
                                 "planned: its held order is fixed")
            if account.orders == (exact,):
                return
            seq = ledger._append(transaction, "hold", account.path, lambda: {"order": str(exact)})
        ledger._seq = seq
        account._rehold(exact, rungs)
