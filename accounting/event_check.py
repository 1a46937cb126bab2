"""dp-accounting events checked and reduced before the ledger costs them (docs/accounting.md, "Checked events").

dp-accounting 0.6 validates few fields: a ``SelfComposedDpEvent`` with count
−99 or 0.5, a ``ZCDpEvent(-1.0)`` or a ``GaussianDpEvent("1")`` are built and
costed, and undercharge (a negative count cut μ² from 100 to 1 in a gdp
ledger). :func:`checked_event` is the one gate every event passes through:

- **Checked.** Every field of every node is read with the project's rules
  (:mod:`accounting.validation`): counts, sizes and step counts are ints (not
  bools, not floats); noise multipliers, ρ, ξ and probabilities are finite real
  numbers of the right sign. Anything else raises a one-line ``TypeError`` or
  ``ValueError`` naming the field (``SelfComposedDpEvent.count``). Event kinds
  the ledger does not cost are refused by name.
- **Reduced where it composes exactly.** A count of 0 is a no-op and 1 the
  event itself; nested self-compositions multiply their counts; a composition's
  equal parts are grouped into one self-composition (so ``Composed([e] * n)``
  and ``SelfComposed(e, n)`` have one normal form and cost the same); and the
  unsampled Gaussian parts of a composition are one Gaussian: k Gaussians with
  noise multipliers zᵢ compose to the Gaussian with 1/z² = Σ 1/zᵢ² (the
  tradeoff curves G_{1/zᵢ} compose to G_μ with μ² = Σ μᵢ², Dong, Roth & Su
  2022, Cor. 3.3; the pair of n-dimensional Gaussians reduces to one
  dimension along the shift). So ``SelfComposed(Gaussian(z), n)`` is
  ``Gaussian(z/√n)``. Outside sampling the ledger costs such a part from its
  exact μ² = n/z² (:mod:`accounting.events`), so the normal form keeps it as
  ``SelfComposed(Gaussian(z), n)``; under sampling (where dp-accounting costs
  one mechanism) it becomes ``Gaussian(z')`` with z' ≤ z/√n rounded *down*
  (more noise is never claimed).
- **Bounded.** After reduction an event has at most :data:`MAX_PARTS` nodes;
  the costing helpers in :mod:`accounting.events` bound their own work (a PLD
  is built only when its size is bounded) and refuse past the bound.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

import numpy as np
from dp_accounting import dp_event

from accounting.validation import check_int, check_real

__all__ = ["MAX_PARTS", "checked_event", "gaussian_event", "gaussian_mu_squared", "gaussian_parts"]

#: Largest number of nodes an event may have after reduction (each is costed separately).
MAX_PARTS = 10_000


def _real(owner: str, field: str, value: object, low: float, *, low_open: bool, high: float = math.inf) -> float:
    """A finite real field (not a bool, not a string) in [low, high] (open at low if ``low_open``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}.{field} must be a real number, got {type(value).__name__} {value!r}")
    return check_real(f"{owner}.{field}", value, low, high, low_open=low_open)


def _count(owner: str, field: str, value: object, low: int = 0) -> int:
    return check_int(f"{owner}.{field}", value, low)


def _step_counts(value: object) -> int | list[int]:
    owner = "SingleEpochTreeAggregationDpEvent.step_counts"
    if isinstance(value, (list, tuple)):
        counts = [check_int(f"{owner}[{i}]", c, 0) for i, c in enumerate(value)]
        if not counts or max(counts) < 1:
            raise ValueError(f"{owner} must be an int >= 1 or a non-empty list of ints >= 0 with one >= 1, "
                             f"got {value!r}")
        return counts
    return check_int(owner, value, 1)


def gaussian_mu_squared(z: float) -> Fraction:
    """μ² = 1/z² of ``GaussianDpEvent(z)``, exact in the binary float z."""
    exact = Fraction(z)
    return 1 / (exact * exact)


def gaussian_event(mu_squared: Fraction) -> dp_event.GaussianDpEvent:
    """The ``GaussianDpEvent(z)`` with 1/z² ≥ ``mu_squared`` (z = 1/μ rounded down: never less privacy loss)."""
    z = 1 / math.sqrt(mu_squared)
    while Fraction(z) ** 2 * mu_squared > 1:
        z = math.nextafter(z, 0.0)
    return dp_event.GaussianDpEvent(z)


def _leaf(event: dp_event.DpEvent) -> dp_event.DpEvent:
    """A checked copy of a leaf event (fields in their canonical types)."""
    name = type(event).__name__
    if isinstance(event, dp_event.NoOpDpEvent):
        return event
    if isinstance(event, dp_event.GaussianDpEvent):
        return dp_event.GaussianDpEvent(_real(name, "noise_multiplier", event.noise_multiplier, 0, low_open=True))
    if isinstance(event, dp_event.LaplaceDpEvent):
        return dp_event.LaplaceDpEvent(_real(name, "noise_multiplier", event.noise_multiplier, 0, low_open=True))
    if isinstance(event, dp_event.ZCDpEvent):
        return dp_event.ZCDpEvent(_real(name, "rho", event.rho, 0, low_open=False),
                                  _real(name, "xi", event.xi, 0, low_open=False))
    if isinstance(event, dp_event.SingleEpochTreeAggregationDpEvent):
        return dp_event.SingleEpochTreeAggregationDpEvent(
            _real(name, "noise_multiplier", event.noise_multiplier, 0, low_open=True), _step_counts(event.step_counts))
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        return dp_event.RandomizedResponseDpEvent(_real(name, "noise_parameter", event.noise_parameter, 0,
                                                        low_open=False, high=1),
                                                  _count(name, "num_buckets", event.num_buckets, 2))
    raise TypeError(f"the ledger does not cost {name} (it takes Gaussian, Laplace, ZCDp, randomized-response and "
                    "tree-aggregation events, Poisson-sampled or sampled without replacement, composed)")


def checked_event(event: object) -> dp_event.DpEvent:
    """``event`` checked field by field and reduced to its normal form (module docstring)."""
    if not isinstance(event, dp_event.DpEvent):
        raise TypeError(f"event must be a dp_accounting.DpEvent, got {type(event).__name__}")
    reduced = _reduce(event, 0)
    parts = _size(reduced)
    if parts > MAX_PARTS:
        raise ValueError(f"event has {parts} parts after reduction, more than the ledger costs ({MAX_PARTS}): "
                         "compose equal parts with SelfComposedDpEvent")
    return reduced


def _reduce(event: dp_event.DpEvent, depth: int) -> dp_event.DpEvent:
    if depth > 100:
        raise ValueError("event is nested more than 100 levels deep")
    name = type(event).__name__
    if isinstance(event, dp_event.SelfComposedDpEvent):
        count = _count(name, "count", event.count)
        inner = _reduce(_checked_child(name, "event", event.event), depth + 1)
        return _self_composed(inner, count)
    if isinstance(event, dp_event.ComposedDpEvent):
        if not isinstance(event.events, (list, tuple)):
            raise TypeError(f"ComposedDpEvent.events must be a list of DpEvents, got {type(event.events).__name__}")
        parts = [_reduce(_checked_child(name, f"events[{i}]", e), depth + 1) for i, e in enumerate(event.events)]
        return _composed(parts)
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        q = _real(name, "sampling_probability", event.sampling_probability, 0, low_open=False, high=1)
        inner = _one_gaussian(_reduce(_checked_child(name, "event", event.event), depth + 1))
        if q == 0 or isinstance(inner, dp_event.NoOpDpEvent):
            return dp_event.NoOpDpEvent()
        return inner if q == 1 else dp_event.PoissonSampledDpEvent(q, inner)
    if isinstance(event, dp_event.SampledWithoutReplacementDpEvent):
        size = _count(name, "source_dataset_size", event.source_dataset_size, 1)
        sample = check_int(f"{name}.sample_size", event.sample_size, 0, size,
                           why="at most source_dataset_size")
        inner = _one_gaussian(_reduce(_checked_child(name, "event", event.event), depth + 1))
        if sample == 0 or isinstance(inner, dp_event.NoOpDpEvent):
            return dp_event.NoOpDpEvent()
        return dp_event.SampledWithoutReplacementDpEvent(size, sample, inner)
    return _leaf(event)


def _checked_child(owner: str, field: str, value: object) -> dp_event.DpEvent:
    if not isinstance(value, dp_event.DpEvent):
        raise TypeError(f"{owner}.{field} must be a dp_accounting.DpEvent, got {type(value).__name__}")
    return value


def _self_composed(inner: dp_event.DpEvent, count: int) -> dp_event.DpEvent:
    if count == 0 or isinstance(inner, dp_event.NoOpDpEvent):
        return dp_event.NoOpDpEvent()
    if count == 1:
        return inner
    if isinstance(inner, dp_event.SelfComposedDpEvent):
        return dp_event.SelfComposedDpEvent(inner.event, inner.count * count)
    if isinstance(inner, dp_event.ComposedDpEvent):  # (a + b)·n = a·n + b·n
        return _composed([_self_composed(part, count) for part in inner.events])
    return dp_event.SelfComposedDpEvent(inner, count)


def gaussian_parts(event: dp_event.DpEvent) -> Fraction | None:
    """μ² = Σ count/z² if the reduced ``event`` composes only unsampled Gaussians (and no-ops), else None."""
    if isinstance(event, dp_event.NoOpDpEvent):
        return Fraction(0)
    if isinstance(event, dp_event.GaussianDpEvent):
        return gaussian_mu_squared(event.noise_multiplier)
    if isinstance(event, dp_event.SelfComposedDpEvent):
        inner = gaussian_parts(event.event)
        return None if inner is None else event.count * inner
    if isinstance(event, dp_event.ComposedDpEvent):
        total = Fraction(0)
        for part in event.events:
            value = gaussian_parts(part)
            if value is None:
                return None
            total += value
        return total
    return None


def _one_gaussian(event: dp_event.DpEvent) -> dp_event.DpEvent:
    """A Gaussian-only composition as one ``GaussianDpEvent`` (z rounded down); anything else unchanged."""
    mu_squared = gaussian_parts(event)
    if mu_squared is None or isinstance(event, (dp_event.NoOpDpEvent, dp_event.GaussianDpEvent)):
        return event
    return gaussian_event(mu_squared)


def _composed(parts: list[dp_event.DpEvent]) -> dp_event.DpEvent:
    """Flatten, drop no-ops, group equal parts into self-compositions (in first-seen order)."""
    groups: dict[str, tuple[dp_event.DpEvent, int]] = {}
    pending = list(parts)
    while pending:
        part = pending.pop(0)
        if isinstance(part, dp_event.ComposedDpEvent):
            pending[:0] = list(part.events)
            continue
        if isinstance(part, dp_event.NoOpDpEvent):
            continue
        base, count = (part.event, part.count) if isinstance(part, dp_event.SelfComposedDpEvent) else (part, 1)
        key = repr(base)
        seen = groups.get(key)
        groups[key] = (base, count + (seen[1] if seen else 0))
    out: list[dp_event.DpEvent] = []
    out.extend(base if count == 1 else dp_event.SelfComposedDpEvent(base, count) for base, count in groups.values())
    if not out:
        return dp_event.NoOpDpEvent()
    return out[0] if len(out) == 1 else dp_event.ComposedDpEvent(out)


def _size(event: dp_event.DpEvent) -> int:
    inner: Any = getattr(event, "event", None)
    if isinstance(event, dp_event.ComposedDpEvent):
        return 1 + sum(_size(e) for e in event.events)
    return 1 + (_size(inner) if isinstance(inner, dp_event.DpEvent) else 0)
