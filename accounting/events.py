"""dp-accounting ``DpEvent`` in and out of the ledger: costing an event in an account's currency, and
the ledger's whole spend as one ``ComposedDpEvent``.

Relations (``docs/accounting.md``, "Neighbouring relations" and "dp-accounting events"). A ``DpEvent`` carries
no neighbouring relation: ``GaussianDpEvent(z)`` is σ/Δ for the sensitivity Δ
the caller means. ``relation=`` says which relation that Δ is for. Internally
every event is brought to *pair form*: an event whose add/remove-one reading by
dp-accounting (the pair of output laws at distance Δ) is the privacy of the
mechanism under the ledger's relation.

- same relation, add/remove: the event is already in pair form;
- same relation, replace-one: an event without sampling is in pair form (its
  Δ is the replace-one sensitivity); a sampled one is refused (dp-accounting's
  sampled accountants read z against the add/remove sensitivity);
- add/remove event in a replace-one ledger: without sampling it is restated
  exactly, Δ' ≤ 2Δ (z → z/2, Laplace b → b/2, zCDP ρ → 4ρ); with sampling only
  an approx account can take it, through dp-accounting's PLD accountant under
  ``REPLACE_ONE`` (which supports Poisson sampling). Its RDP accountant under
  ``REPLACE_ONE`` refuses Poisson-sampled Gaussians and reads an unsampled
  ``GaussianDpEvent`` like add/remove (ε 5.22 at z = 1 for both, where PLD
  gives 4.89 and 11.00), so it is never used: the add/remove figure is never
  charged in a replace-one ledger;
- replace-one event in an add/remove ledger: refused (``ValueError``), as for
  :meth:`~accounting.ledger.Account.charge`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from functools import lru_cache
from typing import Any

import dp_accounting
from dp_accounting import dp_event

from accounting import rdp
from accounting.chargeable import account_name
from accounting.costs import (
    GDP,
    ORDERS,
    RDP,
    ZCDP,
    ApproxDP,
    Cost,
    Number,
    PureDP,
    as_fraction,
    check_relation,
)
from accounting.event_check import checked_event, gaussian_event, gaussian_mu_squared, gaussian_parts

__all__ = ["charges_as_event", "cost_of_event", "event_from_dict", "event_to_dict", "finite_curve", "planned_curve"]

_UNSAMPLED = (dp_event.GaussianDpEvent, dp_event.LaplaceDpEvent, dp_event.ZCDpEvent, dp_event.NoOpDpEvent)
_ADD_REMOVE = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
_PLD_INTERVAL = 1e-4  # value discretisation of the PLD accountant (its estimates stay pessimistic)


def _children(event: dp_event.DpEvent) -> list[tuple[dp_event.DpEvent, int]] | None:
    """(sub-event, multiplicity) of a composition, or None for a leaf."""
    if isinstance(event, dp_event.ComposedDpEvent):
        return [(e, 1) for e in event.events]
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return [(event.event, int(event.count))]
    return None


def _leaves(event: dp_event.DpEvent, count: int = 1) -> Iterator[tuple[dp_event.DpEvent, int]]:
    """Yield (leaf event, count) of a tree of Composed / SelfComposed events."""
    children = _children(event)
    if children is None:
        yield event, count
        return
    for child, times in children:
        yield from _leaves(child, count * times)


def _unsampled(event: dp_event.DpEvent) -> bool:
    return all(isinstance(leaf, _UNSAMPLED) for leaf, _ in _leaves(event))


def _doubled(event: dp_event.DpEvent) -> dp_event.DpEvent:
    """The unsampled ``event`` with its sensitivity doubled (add/remove → replace-one, Δ' ≤ 2Δ)."""
    if isinstance(event, dp_event.ComposedDpEvent):
        return dp_event.ComposedDpEvent([_doubled(e) for e in event.events])
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return dp_event.SelfComposedDpEvent(_doubled(event.event), event.count)
    if isinstance(event, dp_event.GaussianDpEvent):
        return dp_event.GaussianDpEvent(event.noise_multiplier / 2)  # exact in binary floats
    if isinstance(event, dp_event.LaplaceDpEvent):
        return dp_event.LaplaceDpEvent(event.noise_multiplier / 2)
    if isinstance(event, dp_event.ZCDpEvent):
        if event.xi:
            raise TypeError(f"ZCDpEvent with xi={event.xi} under add_remove cannot be restated as replace_one")
        return dp_event.ZCDpEvent(4 * event.rho)  # group privacy, k = 2: k²ρ (Bun & Steinke 2016, Prop. 1.9)
    if isinstance(event, dp_event.NoOpDpEvent):
        return event
    raise TypeError(f"{type(event).__name__} cannot be restated from add_remove to replace_one")


def _pair_form(event: dp_event.DpEvent, relation: str, ledger_relation: str,
               currency: str) -> tuple[dp_event.DpEvent, Any, dp_event.DpEvent | None]:
    """(event, accountant relation, pair form or None): see the module docstring."""
    add_remove = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    event = _trees_as_gaussians(event, relation, ledger_relation)
    if relation == ledger_relation == "add_remove":
        return event, add_remove, event
    if relation == "replace_one" and ledger_relation == "add_remove":
        raise ValueError("relation='replace_one' event in an add_remove ledger: replace-one privacy does not imply "
                         "add/remove privacy; state the event under relation='add_remove'")
    unsampled = _unsampled(event)
    if relation == "replace_one":
        if not unsampled:
            raise TypeError(f"a sampled event ({type(event).__name__}) stated under replace_one: dp-accounting's "
                            "sampled accountants read noise multipliers against the add/remove sensitivity; "
                            "state it with relation='add_remove'")
        return event, add_remove, event
    if unsampled:
        doubled = _doubled(event)
        return doubled, add_remove, doubled
    if currency == "approx":
        return event, dp_accounting.NeighboringRelation.REPLACE_ONE, None
    raise TypeError(f"a sampled add_remove event in a replace_one ledger cannot be costed in {currency}: "
                    "dp-accounting's RdpAccountant(REPLACE_ONE) refuses Poisson-sampled Gaussians; charge it in an "
                    "approx account (PLD under replace-one) or use an add_remove ledger")


def _trees_as_gaussians(event: dp_event.DpEvent, relation: str, ledger_relation: str) -> dp_event.DpEvent:
    """``event`` with each unsampled ``SingleEpochTreeAggregationDpEvent`` replaced by its Gaussian.

    dp-accounting defines the tree event only under ``REPLACE_SPECIAL`` (a
    record replaced by a special zero record), where it is the Gaussian with
    μ² = ⌈log₂(T + 1)⌉/z² for the longest epoch of T steps (each record enters
    that many nodes; Kairouz et al. 2021, App. D). Replacing one record by
    another is two such steps (Δ' ≤ 2Δ in every node), so in a replace-one
    ledger the tree is charged as the Gaussian with z/2, μ² = 4⌈log₂(T + 1)⌉/z²,
    whatever ``relation`` says (with ``"add_remove"`` the doubling is done by
    the add/remove restatement). An add/remove ledger refuses it: a special
    replacement says nothing about adding a record (it shifts the stream).
    """
    if not _has_tree(event):
        return event
    if ledger_relation == "add_remove":
        raise ValueError("SingleEpochTreeAggregationDpEvent is stated under REPLACE_SPECIAL (dp-accounting), which "
                         "implies no add/remove guarantee: charge it in a replace_one ledger (as the Gaussian tree "
                         "with doubled sensitivity)")
    factor = 4 if relation == "replace_one" else 1

    def swap(node: dp_event.DpEvent) -> dp_event.DpEvent:
        if isinstance(node, dp_event.SingleEpochTreeAggregationDpEvent):
            counts = node.step_counts if isinstance(node.step_counts, list) else [node.step_counts]
            depth = max(counts).bit_length()  # ⌈log₂(T + 1)⌉, exactly
            z = node.noise_multiplier / 2 if factor == 4 else node.noise_multiplier  # z/2 is exact in binary
            return dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(z), depth)  # μ² = depth/z², exactly
        if isinstance(node, dp_event.ComposedDpEvent):
            return dp_event.ComposedDpEvent([swap(e) for e in node.events])
        if isinstance(node, dp_event.SelfComposedDpEvent):
            return dp_event.SelfComposedDpEvent(swap(node.event), node.count)
        if _has_tree(node):
            raise TypeError("a sampled SingleEpochTreeAggregationDpEvent is not costed (dp-accounting defines the "
                            "tree only unsampled)")
        return node

    return checked_event(swap(event))


def _has_tree(event: dp_event.DpEvent) -> bool:
    if isinstance(event, dp_event.SingleEpochTreeAggregationDpEvent):
        return True
    if isinstance(event, dp_event.ComposedDpEvent):
        return any(_has_tree(e) for e in event.events)
    inner = getattr(event, "event", None)
    return isinstance(inner, dp_event.DpEvent) and _has_tree(inner)


def _gaussian_mu_squared(event: dp_event.DpEvent, currency: str) -> Fraction:
    """Σ count/z² over the Gaussian leaves of an unsampled event (exact in the binary z)."""
    total = Fraction(0)
    for leaf, count in _leaves(event):
        if isinstance(leaf, dp_event.NoOpDpEvent):
            continue
        if not isinstance(leaf, dp_event.GaussianDpEvent):
            raise TypeError(f"a {currency} account takes only unsubsampled Gaussian events, got {type(leaf).__name__}")
        total += count * gaussian_mu_squared(leaf.noise_multiplier)  # z > 0: checked_event
    return total


def _round_up(x: float) -> Fraction:
    return Fraction(0) if x <= 0 else Fraction(math.nextafter(x * (1 + 1e-12), math.inf))


def cost_of_event(event: dp_event.DpEvent, currency: str, relation: str, ledger_relation: str,
                  delta: Fraction | None = None) -> tuple[Cost, dp_event.DpEvent | None]:
    """The event's cost in ``currency`` under the ledger's relation, and its pair form (None if it has none).

    rdp: the RDP curve on :data:`accounting.rdp.ORDERS` by dp-accounting's
    ``RdpAccountant`` (rounded up); gdp: μ² = Σ 1/z² of unsubsampled Gaussians;
    zcdp: Σ 1/(2z²) and ZCDp ρ; pure: Σ 1/b of Laplace events; approx: the ε at
    ``delta`` of dp-accounting's PLD of this one composition (rounded up).

    A repeated event (DP-SGD charging one step at a time) is costed once: the
    result is cached by the event's value (dp-accounting events are immutable
    values; one holding a list, a composition, is costed afresh each time).
    """
    try:
        return _cached_cost(event, currency, relation, ledger_relation, delta)
    except TypeError as why:
        if "unhashable" not in str(why):
            raise
    return _cost_of_event(event, currency, relation, ledger_relation, delta)


@lru_cache(maxsize=1024)
def _cached_cost(event: dp_event.DpEvent, currency: str, relation: str, ledger_relation: str,
                 delta: Fraction | None) -> tuple[Cost, dp_event.DpEvent | None]:
    return _cost_of_event(event, currency, relation, ledger_relation, delta)


def _cost_of_event(event: dp_event.DpEvent, currency: str, relation: str, ledger_relation: str,
                   delta: Fraction | None) -> tuple[Cost, dp_event.DpEvent | None]:
    """:func:`cost_of_event`, uncached."""
    event = checked_event(event)
    check_relation(relation)
    if (delta is None) != (currency != "approx"):
        raise TypeError("delta is required for an approx account and refused elsewhere"
                        f" (account currency {currency!r}, delta={delta})")
    costed, neighbours, pair = _pair_form(event, relation, ledger_relation, currency)
    if delta is not None:  # an approx account (checked above)
        mu_squared = gaussian_parts(costed) if neighbours is _ADD_REMOVE else None
        if mu_squared is not None:
            return _gaussian_approx_cost(mu_squared, delta), pair
        if delta >= _never_sampled_bound(costed):
            return ApproxDP(0, delta), pair
        return _pld_cost(event, costed, neighbours, delta), pair
    if currency == "rdp":
        mu_squared = gaussian_parts(costed) if neighbours is _ADD_REMOVE else None
        if mu_squared is not None:  # the Gaussian pair at distance μ: αμ²/2 at every order, exactly
            return RDP._exact(rdp.gaussian_curve(mu_squared / 2), ORDERS), pair
        return _rdp_cost(event, costed, neighbours), pair
    if currency == "gdp":
        return GDP.from_mu_squared(_gaussian_mu_squared(costed, currency)), pair
    if currency == "zcdp":
        rho = Fraction(0)
        for leaf, count in _leaves(costed):
            if isinstance(leaf, dp_event.ZCDpEvent) and leaf.xi == 0:
                rho += count * _round_up(float(leaf.rho))
            elif not isinstance(leaf, dp_event.NoOpDpEvent):
                rho += _gaussian_mu_squared(leaf, currency) * count / 2
        return ZCDP(rho), pair
    eps = Fraction(0)
    for leaf, count in _leaves(costed):
        if isinstance(leaf, dp_event.LaplaceDpEvent) and leaf.noise_multiplier > 0:
            eps += count / Fraction(float(leaf.noise_multiplier))
        elif not isinstance(leaf, dp_event.NoOpDpEvent):
            raise TypeError(f"a pure account takes only Laplace events, got {type(leaf).__name__}")
    return PureDP(eps), pair


def _rdp_cost(event: dp_event.DpEvent, costed: dp_event.DpEvent, neighbours: Any) -> RDP:
    """The RDP curve of ``costed`` on the grid by dp-accounting's ``RdpAccountant``, rounded up."""
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant([float(o) for o in ORDERS], neighbours)
    if not accountant.supports(costed):
        raise TypeError(f"dp-accounting's RdpAccountant does not support {costed}")
    accountant.compose(costed)
    return finite_curve(accountant._rdp, type(event).__name__)  # dp-accounting 0.6 keeps the composed curve in _rdp


def finite_curve(values: Any, what: str) -> RDP:
    """The RDP curve of computed values on :data:`ORDERS`, rounded up, with every non-finite value replaced soundly.

    dp-accounting 0.6 returns ∞ at some low orders of some subsampled Gaussians
    ("_compute_log_a_frac failed to converge": (q, σ) = (0.25, 3) at α = 1.1–1.2,
    (0.5, 4) at 1.1–1.9). RDP is non-decreasing in α (van Erven & Harremoës
    2014, Thm 3), so the value of the next higher order with a finite value is
    a valid bound there. Orders above the last finite value are dropped: the
    curve claims nothing at them, and an account holding one refuses it.
    """
    floats = [float(x) for x in values]
    filled: list[float] = []
    bound = math.inf
    for x in reversed(floats):
        if math.isfinite(x) and x >= 0:
            bound = x
        filled.append(bound)
    filled.reverse()
    keep = [i for i, x in enumerate(filled) if math.isfinite(x)]
    if not keep:
        raise TypeError(f"{what} has no finite RDP value at any order of the grid")
    if len(keep) == len(ORDERS):
        return RDP.from_floats_up(filled)
    return RDP.from_floats_up([filled[i] for i in keep], [ORDERS[i] for i in keep])


#: Largest μ² of an unsampled Gaussian composition costed in (ε, δ) (ε > 5·10⁷ beyond it at any δ < 1/2).
MAX_GAUSSIAN_MU_SQUARED = Fraction(10**8)
#: Largest RDP ε (at the account's δ) of an event whose PLD is built: its PLD spans about ε/10⁻⁴ points.
MAX_PLD_EPSILON = 100.0


def _gaussian_approx_cost(mu_squared: Fraction, delta: Fraction) -> ApproxDP:
    """(ε, δ) of the Gaussian pair at distance μ, exactly (δ_μ(ε) of Dong, Roth & Su 2022, Cor. 2.13; certified).

    An unsampled Gaussian composition is one Gaussian (:mod:`accounting.event_check`), whose PLD dp-accounting
    would only discretise: the closed form is exact and takes no memory whatever μ is.
    """
    from accounting.gdp import gdp_to_approx_certified

    if mu_squared > MAX_GAUSSIAN_MU_SQUARED:
        raise ValueError(f"the event is a Gaussian with mu^2 = {float(mu_squared):.4g} > "
                         f"{float(MAX_GAUSSIAN_MU_SQUARED):.0e} (eps > {float(MAX_GAUSSIAN_MU_SQUARED) / 2:.0e}): "
                         "refused without costing it")
    return ApproxDP(gdp_to_approx_certified(mu_squared, delta) if mu_squared else Fraction(0), delta)


def _check_pld_work(costed: dp_event.DpEvent, neighbours: Any, delta: Fraction) -> None:
    """Refuse (``ValueError``) an event whose PLD would be too large to build (see :data:`MAX_PLD_EPSILON`).

    The PLD's size is about its ε range over the discretisation interval; the RDP ε of the add/remove event
    (cheap: one curve, whatever the counts) estimates it, doubled for replace-one. Only the work is estimated
    here; the charge is the PLD's ε.
    """
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant([float(o) for o in ORDERS])
    if not accountant.supports(costed):
        total = sum(count for _, count in _leaves(costed))
        if total > 10**6:
            raise ValueError(f"the event composes {total} mechanisms and has no RDP estimate of its PLD's size: "
                             "refused without costing it (bound 10^6)")
        return
    accountant.compose(costed)
    estimate = float(accountant.get_epsilon(float(delta)))
    if neighbours is dp_accounting.NeighboringRelation.REPLACE_ONE:
        estimate *= 2
    if not estimate <= MAX_PLD_EPSILON:
        raise ValueError(f"the event's RDP epsilon at delta={float(delta):.3g} is {estimate:.4g} > "
                         f"{MAX_PLD_EPSILON:g}: its PLD would span ~{estimate / _PLD_INTERVAL:.2g} points; "
                         "refused without costing it")


def _never_sampled_bound(event: dp_event.DpEvent) -> Fraction:
    """1 − Π(1 − qᵢ)^{nᵢ} for an event made only of Poisson-sampled parts, else 1 (no bound).

    A record outside every sampled batch leaves the output's law unchanged, so the total variation between
    neighbours is at most the chance it is ever sampled: the event is (0, that)-DP, under either relation.
    Each qᵢ is read as the chance a float sampler realises (:func:`_realised_rate`), not the real number the
    float stands for. Exact (in fractions) for up to :data:`_EXACT_SAMPLES` sampled steps, so a bound equal to δ
    is seen as equal (q = 0.5 once at δ = 0.5); above that, by floats rounded up.
    """
    leaves = list(_leaves(event))
    if not all(isinstance(leaf, dp_event.PoissonSampledDpEvent) and leaf.sampling_probability < 1
               for leaf, _ in leaves):
        return Fraction(1)
    rates = [(_realised_rate(leaf.sampling_probability), count) for leaf, count in leaves]
    if sum(count for _, count in rates) <= _EXACT_SAMPLES:
        survive = Fraction(1)
        for rate, count in rates:
            survive *= (1 - rate) ** count
        return 1 - survive
    log_survive = sum(count * math.log1p(-math.nextafter(float(rate), 1.0)) for rate, count in rates)
    return _round_up(-math.expm1(log_survive))  # rounded up: never a smaller bound than the real one


def _realised_rate(q: float) -> Fraction:
    """The chance a record is kept by ``random() < q`` with a uniform on the 2⁵³-grid (numpy's ``random()``
    draws k/2⁵³): ⌈q·2⁵³⌉/2⁵³, which is q when q·2⁵³ is whole (q = 0.5) and at most 2⁻⁵³ above q otherwise."""
    return Fraction(math.ceil(Fraction(q) * 2**53), 2**53)


_EXACT_SAMPLES = 1024  # sampled steps up to which the never-sampled bound is a fraction (53 bits a step)


def _pld_cost(event: dp_event.DpEvent, costed: dp_event.DpEvent, neighbours: Any, delta: Fraction) -> ApproxDP:
    """The ε at ``delta`` of dp-accounting's PLD of ``costed`` (rounded up), as an (ε, δ) cost.

    Where the PLD would be too large to build (:func:`_check_pld_work`) or cannot resolve ``delta``
    (dp-accounting truncates its tails near 10⁻¹⁵), the event's RDP conversion at ``delta`` is charged
    instead: a valid bound on the same event's ε (any order's CKS conversion is, docs/accounting.md
    "Rényi DP"), looser than the PLD, so the charge is never refused for want of a PLD.
    """
    from dp_accounting.pld import pld_privacy_accountant

    try:
        _check_pld_work(costed, neighbours, delta)
    except ValueError:
        return _rdp_approx_cost(event, costed, neighbours, delta, "its PLD would be too large to build")
    accountant = pld_privacy_accountant.PLDAccountant(neighbours, value_discretization_interval=_PLD_INTERVAL)
    if not accountant.supports(costed):
        raise TypeError(f"dp-accounting's PLDAccountant does not support {costed}")
    accountant.compose(costed)
    eps = float(accountant.get_epsilon(float(delta)))
    if math.isfinite(eps):
        return ApproxDP(_round_up(eps), delta)
    return _rdp_approx_cost(event, costed, neighbours, delta, "its PLD does not resolve that delta")


def _rdp_approx_cost(event: dp_event.DpEvent, costed: dp_event.DpEvent, neighbours: Any, delta: Fraction,
                     why: str) -> ApproxDP:
    """The RDP conversion at ``delta`` of the event, where its PLD cannot be used (``why``)."""
    from accounting.rdp import curve_to_approx_certified

    try:
        curve = _rdp_cost(event, costed, neighbours)
    except TypeError:
        raise ValueError(f"{type(event).__name__} cannot be costed at delta={float(delta)}: {why}, and it has no "
                         "RDP curve") from None
    return ApproxDP(curve_to_approx_certified(curve.epsilons, delta, curve.orders), delta)


def planned_curve(event: dp_event.DpEvent, eps: Number, delta: Number, *, relation: str = "add_remove",
                  ledger_relation: str = "add_remove") -> RDP:
    """The budget of an rdp account of share (ε, δ) that declares the workload ``event``: one held order.

    Pass it as ``split(..., curves={name: planned_curve(plan, ε_share, δ_share)})``
    where ``plan`` is the composition one expects to run: the account holds the
    order at which the most copies of the plan fit the share
    (:func:`accounting.rdp.held_for_workload`), with the budget there that
    converts to exactly the share. The plan fits iff its own conversion at that
    order is ≤ ε. The budget meets ε at the filter's δ_F = (1 − λ)δ
    (:func:`accounting.ladder.filter_delta`: the rest is the odometer's). For a
    budget curve over many orders instead, scale the plan's curve with
    :func:`accounting.rdp.scaled_to_share` to (ε, δ_F).
    """
    from accounting.ladder import filter_delta
    from accounting.rdp import held_for_workload

    event = checked_event(event)
    check_relation(relation)
    costed, neighbours, _ = _pair_form(event, relation, ledger_relation, "rdp")
    curve = _rdp_cost(event, costed, neighbours)
    return held_for_workload(curve, as_fraction(eps, "eps"), filter_delta(as_fraction(delta, "delta")))


# ----- the ledger as one event -------------------------------------------------------------------
def _charge_event(seq: int, path: str, charged: Cost, event: dp_event.DpEvent | None,
                  from_event: bool) -> dp_event.DpEvent:
    where = f"charge #{seq} on account {account_name(path)!r} ({charged})"
    if from_event:
        if event is None:
            raise TypeError(f"{where}: was costed by PLD under replace-one and has no add/remove pair form")
        return event
    if isinstance(charged, GDP):
        if charged.mu_squared == 0:
            return dp_event.NoOpDpEvent()
        return gaussian_event(charged.mu_squared)  # z ≤ 1/μ: never less privacy loss
    if isinstance(charged, ZCDP) and charged.delta == 0:
        rho = float(charged.rho)
        if Fraction(rho) < charged.rho:
            rho = math.nextafter(rho, math.inf)
        return dp_event.ZCDpEvent(rho)
    if isinstance(charged, RDP):
        raise TypeError(f"{where}: an RDP curve charged directly has no DpEvent")
    raise TypeError(f"{where}: dp-accounting {getattr(dp_accounting, '__version__', '')} has no event for pure or "
                    "approximate DP (no EpsilonDeltaDpEvent)")


def charges_as_event(charges: list[tuple[int, str, Cost, Any, bool, int]]) -> dp_event.ComposedDpEvent:
    """:meth:`accounting.ledger.Ledger.to_dp_event` of the ledger's distinct charges with their counts."""
    return dp_event.ComposedDpEvent([_repeated(_charge_event(seq, path, charged, event, from_event), count)
                                     for seq, path, charged, event, from_event, count in charges])


def _repeated(event: dp_event.DpEvent, count: int) -> dp_event.DpEvent:
    """``event`` composed ``count`` times (itself once)."""
    return event if count == 1 else dp_event.SelfComposedDpEvent(event, count)


# ----- journal form ------------------------------------------------------------------------------
def event_to_dict(event: dp_event.DpEvent) -> dict[str, Any]:
    """JSON-ready form of a dp-accounting event tree (class name and fields, recursively)."""
    import attr

    def encode(value: Any) -> Any:
        if isinstance(value, dp_event.DpEvent):
            return {"class": type(value).__name__,
                    "fields": {f.name: encode(getattr(value, f.name)) for f in attr.fields(type(value))}}
        if isinstance(value, (list, tuple)):
            return [encode(v) for v in value]
        if isinstance(value, float):
            return {"float": value.hex()}
        return value

    encoded: dict[str, Any] = encode(event)
    return encoded


def event_from_dict(data: dict[str, Any]) -> dp_event.DpEvent:
    """Inverse of :func:`event_to_dict`."""

    def decode(value: Any) -> Any:
        if isinstance(value, dict) and "class" in value:
            cls = getattr(dp_event, value["class"], None)
            if not (isinstance(cls, type) and issubclass(cls, dp_event.DpEvent)):
                raise ValueError(f"unknown DpEvent class {value['class']!r}")
            return cls(**{k: decode(v) for k, v in value["fields"].items()})
        if isinstance(value, dict) and "float" in value:
            return float.fromhex(value["float"])
        if isinstance(value, list):
            return [decode(v) for v in value]
        return value

    return decode(data)
