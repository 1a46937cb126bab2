"""Audit anyone's mechanism: two neighbouring inputs, a claim, a score (docs/audits.md, "Audit your own mechanism").

:class:`MechanismAudit` wraps a user's mechanism in the same audit game as the
built-in audits (:class:`audits.base.Audit`): held-out threshold choice,
Clopper–Pearson certification (or the μ-GDP route for Gaussian noise), the
same :class:`~audits.base.AuditResult`, summary line and plot. It never
reaches into the mechanism: it calls it, many times, on each neighbour.

What it refuses, in one line naming the problem (so garbage never prints a
certificate): a claim with ε or μ negative or NaN, δ outside [0, 1); a score
that is NaN, not a real number, or of the wrong shape. ±∞ scores are allowed:
an output impossible under one neighbour is exactly how a porous mechanism shows.

``planted=`` takes a variant of the mechanism with a known bug (the same
signature, the same claim): :meth:`MechanismAudit.run_planted` audits it against
the real mechanism's claim and should say "violated" — a check that the score
and run count have the power to catch that bug. Nothing can plant a bug in
arbitrary code; the user writes the variant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from audits.base import CLOPPER_PEARSON, GAUSSIAN_DP, Audit, AuditResult, Claim, check_claim_number
from audits.bounds import gdp_epsilon

__all__ = ["MechanismAudit", "as_claim"]


def _is_release(value: object) -> bool:
    from mechanisms.release import Release

    return isinstance(value, Release)


def as_claim(claim: object, delta: float | None = None, *, gaussian: bool = False) -> Claim:
    """A :class:`~audits.base.Claim` from what a user has: ``(ε, δ)``, a Claim, a cost, or a receipt.

    * ``(epsilon, delta)`` or ``epsilon`` alone (δ = 0);
    * an ``accounting`` cost: ``PureDP``, ``ApproxDP``, ``ZCDP`` or ``GDP`` (the last
      two read at ``delta``: CKS for zCDP, the Gaussian curve for GDP);
    * a ``Receipt`` (its ``cost``), as a ledger charge returns it.

    ``gaussian=True`` (a zCDP or GDP cost on Gaussian noise) fills in μ, so the
    audit may take the μ-GDP route; the ε is then the exact Gaussian ε at δ.
    """
    from accounting import GDP, ZCDP, ApproxDP, PureDP, convert
    from accounting.chargeable import Receipt

    if isinstance(claim, Claim):
        return claim
    if isinstance(claim, Receipt):
        claim = claim.cost
    if isinstance(claim, PureDP):
        return Claim(epsilon=float(claim.eps), delta=0.0, cost=str(claim), ledger_epsilon=float(claim.eps))
    if isinstance(claim, ApproxDP):
        return Claim(epsilon=float(claim.eps), delta=float(claim.delta), cost=str(claim),
                     ledger_epsilon=float(claim.eps))
    if isinstance(claim, (ZCDP, GDP)):
        if delta is None:
            raise ValueError(f"delta= is needed to read a {type(claim).__name__} claim as (ε, δ)")
        delta = check_claim_number("claimed delta", delta, high=1.0)
        mu = math.sqrt(2 * float(claim.rho)) if isinstance(claim, ZCDP) else float(claim.mu)
        ledger = float(convert.zcdp_to_approx(float(claim.rho), delta)) if isinstance(claim, ZCDP) else None
        exact = gdp_epsilon(mu, delta) if delta > 0 else math.inf
        return Claim(epsilon=exact if gaussian or ledger is None else ledger, delta=delta, cost=str(claim),
                     mu=mu if gaussian else None, ledger_epsilon=ledger)
    if isinstance(claim, tuple) and len(claim) == 2:
        epsilon, delta_ = claim
        return Claim(epsilon=check_claim_number("claimed epsilon", epsilon),
                     delta=check_claim_number("claimed delta", delta_, high=1.0), cost=f"claimed {claim!r}")
    if isinstance(claim, (int, float, np.integer, np.floating)) and not isinstance(claim, (bool, np.bool_)):
        return Claim(epsilon=check_claim_number("claimed epsilon", claim), delta=0.0, cost=f"claimed ε={claim!r}")
    raise TypeError("claim must be (epsilon, delta), epsilon, an audits.Claim, an accounting cost or a Receipt, "
                    f"got {type(claim).__name__}")


class MechanismAudit(Audit):
    """A user's mechanism in the audit game.

    Parameters
    ----------
    mechanism : callable
        ``mechanism(data, rng)`` runs the mechanism once on ``data`` with the
        generator ``rng`` and returns its output (or a ``mechanisms`` ``Release``).
        With ``batch=True``: ``mechanism(data, rng, runs)`` returns ``runs`` outputs.
    neighbours : (D0, D1)
        Two neighbouring inputs; scores should be higher on ``D1``.
    claim : optional
        What the mechanism promises for one run: anything :func:`as_claim` reads.
        ``None`` reads it from the ``Release`` receipt of one run on ``D0``.
    score : callable, optional
        ``score(output)`` → a number, or one number per statistic (``statistics``);
        with ``batch=True`` it gets the whole batch and returns ``(runs,)`` or
        ``(runs, k)``. Default: the output itself (a ``Release``'s ``value``).
    delta : float, optional
        δ at which a zCDP or GDP claim is read.
    gaussian : bool
        The noise is Gaussian and the claim a zCDP/GDP cost: certify μ (Gaussian-DP route).
    planted : callable, optional
        The mechanism with a known bug, same signature: :meth:`run_planted`.
    statistics : sequence of str
        Names of the score columns (default one, ``"score"``).
    name : str
        Name in summaries, files and plots.
    """

    mechanism = "user mechanism"
    chunk = 1 << 62  # one chunk: the user's callables need not pickle

    def __init__(self, mechanism: Callable[..., Any], neighbours: Sequence[Any], *, claim: object = None,
                 score: Callable[[Any], Any] | None = None, delta: float | None = None, gaussian: bool = False,
                 planted: Callable[..., Any] | None = None, statistics: Sequence[str] = ("score",),
                 batch: bool = False, name: str = "mechanism") -> None:
        if not callable(mechanism):
            raise TypeError(f"mechanism must be callable, got {type(mechanism).__name__}")
        if planted is not None and not callable(planted):
            raise TypeError(f"planted must be callable, got {type(planted).__name__}")
        if score is not None and not callable(score):
            raise TypeError(f"score must be callable, got {type(score).__name__}")
        if isinstance(neighbours, (str, bytes)) or len(neighbours) != 2:
            raise ValueError("neighbours must be a pair (D0, D1)")
        if isinstance(statistics, str) or not statistics or not all(isinstance(s, str) for s in statistics):
            raise TypeError("statistics must be a non-empty sequence of names (str)")
        self.run_mechanism, self.planted, self.score, self.batch = mechanism, planted, score, bool(batch)
        self.neighbours = (neighbours[0], neighbours[1])
        self.statistics, self.name = tuple(statistics), str(name)
        self.mechanism = getattr(mechanism, "__qualname__", type(mechanism).__name__)
        self._claim_source, self._delta, self._gaussian = claim, delta, bool(gaussian)
        self._claim: Claim | None = None
        self.method = GAUSSIAN_DP if gaussian else CLOPPER_PEARSON

    def parameters(self) -> dict:
        return {"mechanism": self.mechanism, "batch": self.batch, "statistics": list(self.statistics),
                "planted": None if self.planted is None else getattr(self.planted, "__qualname__", "planted")}

    def claim(self) -> Claim:
        """The claim as given, or read from the receipt of one run on ``D0`` (computed once)."""
        if self._claim is None:
            source = self._claim_source
            if source is None:
                output = self._call(self.neighbours[0], np.random.default_rng(0), 1)
                first = output[0] if self.batch else output
                if not _is_release(first):
                    raise ValueError(f"{self.name}: claim= is needed (the mechanism returns {type(first).__name__}, "
                                     "not a Release whose receipt states its charge)")
                source = first.receipt
            claim = as_claim(source, self._delta, gaussian=self._gaussian)
            if self._gaussian and claim.mu is None:
                raise ValueError(f"{self.name}: gaussian=True needs a zCDP or GDP claim (a μ to certify)")
            self._claim = claim
        return self._claim

    def _call(self, data: Any, rng: np.random.Generator, runs: int) -> Any:
        return self.run_mechanism(data, rng, runs) if self.batch else self.run_mechanism(data, rng)

    def _score(self, output: Any) -> Any:
        value = output.value if _is_release(output) else output
        return value if self.score is None else self.score(value)

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        data = self.neighbours[neighbour]
        try:
            if self.batch:
                outputs = self._call(data, rng, runs)
                values = [o.value if _is_release(o) else o for o in outputs] if isinstance(outputs, list) else outputs
                return np.asarray(values if self.score is None else self.score(values))
            return np.asarray([self._score(self._call(data, rng, 1)) for _ in range(runs)])
        except ValueError as error:
            if "inhomogeneous" in str(error) or "sequence" in str(error):
                raise ValueError(f"{self.name}: the scores of different runs have different lengths") from None
            raise

    def run_planted(self, runs: int = 10_000, seed: int = 0, *, holdout_runs: int | None = None,
                    confidence: float = 0.95) -> AuditResult:
        """Audit the ``planted`` variant against this mechanism's claim: a power check (expect "violated")."""
        if self.planted is None:
            raise ValueError(f"{self.name}: no planted= variant was given")
        variant = MechanismAudit(self.planted, self.neighbours, claim=self.claim(), score=self.score,
                                 gaussian=self._gaussian, statistics=self.statistics, batch=self.batch,
                                 name=f"{self.name}-planted")
        return variant.run(runs, seed, holdout_runs=holdout_runs, confidence=confidence)
