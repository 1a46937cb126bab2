"""The typed diagnostics of one run: one field per results column, never a key looked up by spelling.

A policy's ``diagnostics()`` is a free-form dict. The results tables need a fixed set
of columns from it; reading them with ``dict.get(name, "")`` turned a key spelled
differently by one policy (``"guarantee_eps"`` beside ``"guarantee_epsilon"``) into a
silently blank column. :class:`RunDiagnostics` has one typed field per column;
:meth:`RunDiagnostics.of` takes the counters a registry entry declares and *fails* when
the policy does not report one, and takes a private policy's guarantee from its ledger
(``policy.ledger.guarantee()``), not from a dict key. A private run's record holds only
what its ledger released or what follows from the releases
(:data:`RELEASED_COUNTERS`, the batch schedule, the guarantee): Criterion I's count is
computed from each user's own arms, so its column is blank for a private run and filled
for the non-private RS-GLinUCB only (docs/service.md, "What a run publishes").
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["COUNTERS", "PUBLISHABLE", "RELEASED_COUNTERS", "RunDiagnostics"]

#: The Criterion I/II and refit counters of the rarely-switching policies (paper Algorithm 2).
COUNTERS = ("criterion_I", "criterion_II", "refits_o", "refits_tau", "refused_o", "refused_tau")
#: Those a private run publishes: functions of its releases (``dpglm.policies.joint_dp.RELEASED_COUNTS``).
RELEASED_COUNTERS = COUNTERS[1:]
#: Every field a private run's registry entry may declare (the guarantee is read from its ledger).
PUBLISHABLE = (*RELEASED_COUNTERS, "batch_lengths")


@dataclass(frozen=True)
class RunDiagnostics:
    """What a run reports beside its regret (``None``: the policy has no such quantity).

    Attributes
    ----------
    criterion_I, criterion_II : int or None
        How often Criterion I (exploration) and II (switch) fired (paper Algorithm 2);
        ``criterion_I`` is None for a private run (not released).
    refits_o, refits_tau, refused_o, refused_tau : int or None
        Refits of θ̂_o / θ̂_τ made and refused by the ledger.
    guarantee_epsilon, guarantee_delta : float or None
        The ledger's total guarantee of a private run.
    batch_lengths : tuple of int or None
        The batch schedule of a batched policy (paper §5).
    """

    criterion_I: int | None = None
    criterion_II: int | None = None
    refits_o: int | None = None
    refits_tau: int | None = None
    refused_o: int | None = None
    refused_tau: int | None = None
    guarantee_epsilon: float | None = None
    guarantee_delta: float | None = None
    batch_lengths: tuple[int, ...] | None = None

    @classmethod
    def of(cls, policy: Any, *, reports: tuple[str, ...] = (), private: bool = False) -> RunDiagnostics:
        """The diagnostics of a played ``policy``.

        Parameters
        ----------
        policy : dpglm.policies.Policy
        reports : tuple of field names
            The fields the policy's ``diagnostics()`` must hold (a counter, ``"batch_lengths"``).
        private : bool
            Take the guarantee from ``policy.ledger.guarantee()``.

        Raises
        ------
        KeyError
            If the policy's diagnostics lack a field it is declared to report.
        """
        raw = policy.diagnostics()
        missing = [name for name in reports if name not in raw]
        if missing:
            raise KeyError(f"{policy.name}'s diagnostics() lack {missing} (declared in its registry entry)")
        values: dict[str, Any] = {}
        for name in reports:
            values[name] = tuple(int(b) for b in raw[name]) if name == "batch_lengths" else int(raw[name])
        if private:
            guarantee = policy.ledger.guarantee()
            values["guarantee_epsilon"] = float(guarantee.eps)
            values["guarantee_delta"] = float(getattr(guarantee, "delta", 0.0))
        return cls(**values)

    def columns(self) -> dict[str, Any]:
        """Every field as a table cell: ``""`` where the run has none, batch lengths space-separated."""
        out: dict[str, Any] = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if value is None:
                out[field.name] = ""
            elif field.name == "batch_lengths":
                out[field.name] = " ".join(map(str, value))
            else:
                out[field.name] = value
        return out
