"""Noise calibrated to what an account has left, against the costing the ledger will charge (docs/accounting.md).

:func:`calibrate_noise_multiplier` returns the smallest noise multiplier z
(to ~10⁻⁹ relative, a binary float) whose run of ``steps`` Poisson-sampled
Gaussian steps — dp-accounting's ``SelfComposedDpEvent(PoissonSampledDpEvent(q,
GaussianDpEvent(z)), steps)``, stated under add/remove as opacus and
:mod:`mechanisms.optim.opacus_adapter` state it — fits the account's remaining
budget; :func:`calibrate_gaussian_sigma` the smallest σ of one Gaussian release
of L2 sensitivity Δ (stated under the ledger's own relation). Each candidate is
costed exactly as :meth:`accounting.ledger.Account.charge_event` would cost it
(:func:`accounting.events.cost_of_event`): the PLD ε at the account's remaining
δ for approx (the closed-form Gaussian ε when unsampled), the held orders for
rdp, μ² = steps/z² for gdp (or a mechanism's own μ′ of σ, e.g. the lattice
noise of :func:`mechanisms.lattice.gdp_mu_squared`, passed as ``cost_of``),
ρ = steps/(2z²) for zcdp. So the run is never refused and never over; the
returned value is checked to fit before it is returned.

gdp and zcdp accounts refuse ``sample_rate < 1``: a subsampled Gaussian is not
μ-GDP with μ² = q²·steps/z² or any other closed form the filter could add, and
its zCDP is infinite. Search: the cost is decreasing in z; a bracket is found
from a guess by factors of 1.5, then narrowed by regula falsi on ln z, stopping
when the cost is ≥ 0.992 of what remains (the issue's target is 0.99) or the
bracket is 10⁻⁹ relative, or when, in a bracket of 10⁻³, a probe shows the cost
not decreasing (the PLD ε at a large δ jitters with z), returning the smallest
fitting z probed; an end costing nothing or refused is bisected. For a sampled
run in an approx account (each PLD costs about a second) the guess is the z
calibrated by the RDP conversion at the same δ, which the PLD's ε is below.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache
from typing import Any

from accounting.chargeable import account_name
from accounting.costs import GDP, RDP, ZCDP, ApproxDP, Cost, PureDP
from accounting.validation import check_int, check_positive, check_real

__all__ = ["calibrate_gaussian_sigma", "calibrate_noise_multiplier", "fraction_of_remaining"]

#: Stop once the run costs this fraction of what remains (binding component; the issue asks ≥ 0.99).
_GOOD_ENOUGH = 0.992


def fraction_of_remaining(cost: Cost, remaining: Cost) -> float:
    """How much of ``remaining`` ``cost`` uses: ε/ε_r (approx, pure), ρ/ρ_r, μ²/μ_r², or the binding held order."""
    if isinstance(cost, RDP) and isinstance(remaining, RDP):
        return max(float(cost.at(o) or 0) / float(r) for o, r in zip(remaining.orders, remaining.epsilons,
                                                                     strict=True))
    if isinstance(cost, GDP) and isinstance(remaining, GDP):
        return float(cost.mu_squared / remaining.mu_squared)
    if isinstance(cost, ZCDP) and isinstance(remaining, ZCDP):
        return float(cost.rho / remaining.rho)
    if isinstance(cost, (ApproxDP, PureDP)) and isinstance(remaining, (ApproxDP, PureDP)):
        return float(cost.eps / remaining.eps)
    raise TypeError(f"cannot compare {cost} with {remaining}")


def _fits(cost: Cost, remaining: Cost) -> bool:
    if isinstance(cost, RDP) and isinstance(remaining, RDP):
        values = [cost.at(o) for o in remaining.orders]
        return all(v is not None and v <= r for v, r in zip(values, remaining.epsilons, strict=True))
    if isinstance(cost, ApproxDP) and isinstance(remaining, ApproxDP):
        return cost.eps <= remaining.eps and cost.delta <= remaining.delta
    if isinstance(cost, GDP) and isinstance(remaining, GDP):
        return cost.mu_squared <= remaining.mu_squared
    if isinstance(cost, ZCDP) and isinstance(remaining, ZCDP):
        return cost.rho <= remaining.rho and cost.delta <= remaining.delta
    raise TypeError(f"cannot compare {cost} with {remaining}")


#: The cost fraction of a probe that cannot be costed: a noise so small that the costing refuses it (an RDP ε
#: past the PLD bound, no finite ε at δ) is taken not to fit (the costing refuses only costs far past any budget
#: it could fit); a cost of 0 is taken as this fraction of the budget, so that ln(fraction) stays finite.
_REFUSED, _NOTHING = 1e300, 1e-300


def _search(cost_of: Callable[[float], Cost], remaining: Cost, guess: float, what: str,
            used_of: Callable[[Cost], tuple[float, bool]] | None = None) -> float:
    """The smallest float x > 0 with cost_of(x) fitting ``remaining``, to a cost ≥ 0.992 of it (or 10⁻⁹ relative;
    10⁻³ where the fitting end costs nothing at all, so no budget is left unused).

    The cost decreases in x. A bracket [low (does not fit), high (fits)] is
    grown from ``guess`` by factors of 1.5, then narrowed by regula falsi
    (Illinois) on ln(cost fraction) against ln x: a few evaluations, which
    matters when each is a PLD; bisection next to an end costing nothing or
    refused (no slope to interpolate). Once the bracket is 10⁻³ relative, a probe
    costing less than a smaller x or more than a larger one ends the search at
    the smallest fitting x costed (a cost that jitters cannot be resolved more
    finely). A probe whose costing refuses it (``ValueError`` or ``TypeError``:
    too small a noise to cost) counts as not fitting.
    ``used_of(cost)`` gives (fraction, fits) for another fit rule than the
    component-wise one.
    """
    memo: dict[float, float] = {}

    def used(x: float) -> float:
        if x not in memo:
            try:
                cost = cost_of(x)
            except (ValueError, TypeError, OverflowError):
                memo[x] = _REFUSED
                return memo[x]
            if used_of is None:
                fraction, fit = fraction_of_remaining(cost, remaining), _fits(cost, remaining)
            else:
                fraction, fit = used_of(cost)
            fraction = max(fraction, _NOTHING)
            memo[x] = min(fraction, 1.0) if fit else max(fraction, 1.0 + 1e-12)  # the exact fit test decides
        return memo[x]

    low, high = guess, guess
    for _ in range(400):
        if used(high) <= 1:
            break
        low, high = high, high * 1.5
    else:
        raise ValueError(f"no {what} up to {high:.3g} fits the remaining budget {remaining}: nothing can be run")
    if low == high:
        for _ in range(400):
            low /= 1.5
            if used(low) > 1:
                break
            high = low
        else:
            raise ValueError(f"any {what} fits the remaining budget {remaining} (the run costs nothing down to "
                             f"{low:.3g}: no noise is needed at this delta), so there is no smallest one to return")
    f_low, f_high = math.log(used(low)), math.log(used(high))  # f_low > 0 >= f_high
    last = 0  # which end moved last (Illinois: halve the stale end's value when the same end moves twice)
    widths = [math.log(high) - math.log(low)]
    while used(high) < _GOOD_ENOUGH and high - low > (1e-3 if used(high) <= _NOTHING else 1e-9) * high:
        t = f_low / (f_low - f_high) if f_low > f_high else 0.5
        if len(widths) > 2 and widths[-1] > widths[-3] / 2:  # not halving (a cost that jumps): bisect
            t = 0.5
        if used(high) <= _NOTHING or used(low) >= _REFUSED:  # an end costing nothing or refused has no slope
            t = 0.5
        middle = math.exp(math.log(low) + min(max(t, 0.02), 0.98) * (math.log(high) - math.log(low)))
        f_middle = math.log(used(middle))
        if high - low <= 1e-3 * high and any((x < middle and u < used(middle)) or (x > middle and u > used(middle))
                                             for x, u in memo.items()):
            # within 10⁻³ the cost is seen not to decrease (dp-accounting's PLD ε at a large δ jitters with z):
            # the smallest fitting x is not defined more finely; return the smallest costed x that fits
            return min(x for x, u in memo.items() if u <= 1)
        if f_middle <= 0:
            high, f_high = middle, f_middle
            f_low = f_low / 2 if last == 1 else math.log(used(low))
            last = 1
        else:
            low, f_low = middle, f_middle
            f_high = f_high / 2 if last == -1 else math.log(used(high))
            last = -1
        widths.append(math.log(high) - math.log(low))
    return high


def _account_state(account: Any) -> tuple[str, Cost, str]:
    currency, remaining, relation = account.currency, account.remaining, account.relation
    if currency == "pure":
        raise TypeError("a pure account cannot pay for Gaussian noise (no pure epsilon-DP); use approx, rdp, gdp or "
                        "zcdp")
    exhausted = (remaining.eps if isinstance(remaining, (ApproxDP, PureDP)) else remaining.rho
                 if isinstance(remaining, ZCDP) else remaining.mu_squared if isinstance(remaining, GDP)
                 else min(remaining.epsilons))
    if exhausted <= 0 or (isinstance(remaining, ApproxDP) and remaining.delta <= 0 and currency == "approx"):
        raise ValueError(f"account {account_name(getattr(account, 'path', ''))!r} has nothing left: {remaining}")
    return currency, remaining, relation


def calibrate_noise_multiplier(account: Any, *, sample_rate: float, steps: int) -> float:
    """The smallest noise multiplier z whose DP-SGD run fits ``account``'s remaining budget (module docstring).

    A fresh rdp account (funded by an (ε, δ) share, nothing charged yet) is
    calibrated at every order of the grid and then *holds* the order the run
    fits best at (:meth:`accounting.ledger.Account.hold`, journalled): the held
    order is chosen from the public (sample rate, steps) before any charge.

    Parameters
    ----------
    account : accounting.Account or accounting.Ledger
        Its ``remaining`` budget is the target; approx accounts are costed at
        their remaining δ (charge the run with ``delta=account.remaining.delta``).
    sample_rate : float in (0, 1]
        Poisson rate q; gdp and zcdp accounts need q = 1 (full batch).
    steps : int >= 1
        Noisy steps of the run.
    """
    from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent

    from accounting.events import cost_of_event

    q = check_real("sample_rate", sample_rate, 0.0, 1.0, low_open=True)
    steps = check_int("steps", steps, 1)
    currency, remaining, relation = _account_state(account)
    if q < 1 and currency in ("gdp", "zcdp"):
        raise ValueError(f"sample_rate must be 1 for a {currency} account (a Poisson-subsampled Gaussian has no "
                         f"{currency} cost the filter can add); got {sample_rate!r}: use an rdp or approx account")
    delta = remaining.delta if isinstance(remaining, ApproxDP) else None

    def cost_of(z: float) -> Cost:
        step = GaussianDpEvent(z) if q == 1 else PoissonSampledDpEvent(q, GaussianDpEvent(z))
        return cost_of_event(SelfComposedDpEvent(step, steps), currency, "add_remove", relation, delta)[0]

    guess = math.sqrt(steps) * q + 0.5
    if currency == "rdp" and _fresh_rdp(account):
        return _calibrate_held_order(account, cost_of, remaining, guess)
    if currency == "approx" and q < 1 and isinstance(remaining, ApproxDP):
        from accounting.rdp import curve_to_approx_certified

        def rdp_eps(z: float) -> Cost:
            curve = cost_of_event(SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(z)), steps), "rdp",
                                  "add_remove", "add_remove", None)[0]
            assert isinstance(curve, RDP)
            return ApproxDP(curve_to_approx_certified(curve.epsilons, remaining.delta, curve.orders), remaining.delta)

        guess = 0.97 * _search(rdp_eps, remaining, guess, "noise multiplier")
    return _search(cost_of, remaining, guess, "noise multiplier")


def _fresh_rdp(account: Any) -> bool:
    """An rdp account holding one order for an (ε, δ) share, with nothing charged, split or planned yet."""
    ladder = getattr(account, "ladder", None)
    return (ladder is not None and ladder.top is None and hasattr(account, "hold") and not account.children
            and not account.planned and not account.charge_counts())


@lru_cache(maxsize=64)
def _order_budgets(eps: Fraction, delta: Fraction) -> tuple[tuple[Fraction, Fraction], ...]:
    """(order, budget) at every grid order where a budget meeting (ε, δ) is positive (:func:`rdp.order_budget`)."""
    from accounting.rdp import ORDERS, order_budget

    pairs = ((order, order_budget(order, eps, delta)) for order in ORDERS)
    return tuple((order, budget) for order, budget in pairs if budget > 0)


def _calibrate_held_order(account: Any, cost_of: Callable[[float], Cost], remaining: Cost, guess: float) -> float:
    """Calibrate a fresh rdp account over every grid order, then hold the order the run fits best at.

    The held order is chosen from public inputs (the sample rate, the steps and
    the share) before any charge (:meth:`accounting.ledger.Account.hold`), so the
    run is costed at the order best for it — the RDP calibration opacus and
    dp-accounting do over their grids, at the filter's δ_F.
    """
    from accounting.ladder import filter_delta

    budgets = _order_budgets(account.ladder.eps, filter_delta(account.ladder.delta))

    def fractions(cost: Cost) -> list[tuple[Fraction, Fraction, Fraction]]:
        assert isinstance(cost, RDP)
        return [(order, value, budget) for order, budget in budgets
                if (value := cost.at(order)) is not None]

    def used_of(cost: Cost) -> tuple[float, bool]:
        listed = fractions(cost)
        if not listed:
            return _REFUSED, False
        return min(float(value / budget) for _, value, budget in listed), any(v <= b for _, v, b in listed)

    z = _search(cost_of, remaining, guess, "noise multiplier", used_of)
    order = min(fractions(cost_of(z)), key=lambda entry: entry[1] / entry[2])[0]
    account.hold(order)
    return z


def calibrate_gaussian_sigma(account: Any, *, sensitivity: float,
                             cost_of: Callable[[float], Cost] | None = None) -> float:
    """The smallest σ of one Gaussian release of L2 ``sensitivity`` that fits ``account``'s remaining budget.

    ``sensitivity`` is stated under the ledger's relation. By default the
    release is costed as dp-accounting's ``GaussianDpEvent(σ/Δ)`` would be
    charged (module docstring); a mechanism whose noise costs more (the
    float-safe lattice Gaussian of ``mechanisms/lattice.py``, charged μ′ ≥ Δ/σ)
    passes its own ``cost_of(σ) -> Cost``.
    """
    from dp_accounting import GaussianDpEvent

    from accounting.events import cost_of_event

    delta_l2 = check_positive("sensitivity", sensitivity)
    currency, remaining, relation = _account_state(account)
    delta = remaining.delta if isinstance(remaining, ApproxDP) else None
    if cost_of is None:
        def event_cost(sigma: float) -> Cost:
            return cost_of_event(GaussianDpEvent(sigma / delta_l2), currency, relation, relation, delta)[0]
        cost_of = event_cost
    return _search(cost_of, remaining, delta_l2, "sigma")
