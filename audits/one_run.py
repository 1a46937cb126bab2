"""One-run audit of the Gaussian mechanism (Steinke, Nasr, Jagielski 2023).

One release of an m-vector through the real ``GaussianMechanism``: canary i
is an individual who contributes Δ to coordinate i with probability ½
(independently, the auditor's secret coin Sᵢ) and nothing otherwise, so each
individual moves the statistic by at most Δ in L2 — the mechanism's stated
sensitivity, and its ρ-zCDP charge is that individual's privacy. The auditor
guesses "in" for the k largest outputs and "out" for the k smallest, abstains
on the rest (r = 2k guesses), and counts the correct guesses v; Theorem 5.2 of
the paper turns (m, r, v) into a certified ε lower bound
(:func:`audits.bounds.one_run_epsilon_lower_bound`).

k is chosen before the run from public information only: the value that
maximises the bound at the expected number of correct guesses under the
claimed Gaussian (it never looks at the coins).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np
from scipy import stats

from accounting.validation import check_int, check_positive, check_probability
from audits.base import huge_budget_account
from audits.bounds import gdp_epsilon, gdp_mu_for_epsilon, one_run_epsilon_lower_bound

__all__ = ["OneRunGaussianAudit", "OneRunReport"]


@dataclass(frozen=True)
class OneRunReport:
    """Claim, certified bound and canary counts of one one-run audit."""

    audit: str
    mechanism: str
    claimed_epsilon: float
    claimed_delta: float
    claimed_cost: str
    epsilon_lower_bound: float
    runs: int
    canaries: int
    guesses: int
    correct: int
    verdict: str
    seed: int
    seconds: float
    parameters: dict
    method: str = "one run (Steinke et al. 2023)"
    statistic: str = "k largest / k smallest outputs"

    @property
    def ratio(self) -> float:
        return self.epsilon_lower_bound / self.claimed_epsilon

    def to_dict(self) -> dict:
        """Every field and the ratio, JSON-ready (``dpglm audit`` writes it)."""
        return {**asdict(self), "ratio": self.ratio}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str)

    def summary(self) -> str:
        return (f"{self.audit:<28} claimed ε={self.claimed_epsilon:7.4f} (δ={self.claimed_delta:g})  "
                f"certified ε ≥ {self.epsilon_lower_bound:7.4f} [one run]  m={self.canaries} canaries, "
                f"{self.correct}/{self.guesses} right  {self.verdict}")


class OneRunGaussianAudit:
    """m canaries in one Gaussian release; ``run(runs=1)`` (the point is a single run).

    Parameters
    ----------
    epsilon, delta : float
        Target (ε, δ): the mechanism is charged ρ = μ²/2, μ the analytic-Gaussian parameter.
    canaries : int
        m, coordinates of the one release (≥ 10).
    mechanism_class : type
        ``mechanisms.noise.GaussianMechanism`` or a subclass (planted bugs).
    """

    mechanism = "GaussianMechanism"

    def __init__(self, epsilon: float, delta: float = 1e-5, *, canaries: int = 1_000_000,
                 mechanism_class: type | None = None, name: str = "gaussian-one-run") -> None:
        from mechanisms.noise import GaussianMechanism

        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_probability("delta", delta)
        self.canaries = check_int("canaries", canaries, 10)
        self.mechanism_class = GaussianMechanism if mechanism_class is None else mechanism_class
        self.name = name
        self.rho = Fraction(gdp_mu_for_epsilon(self.epsilon, self.delta) ** 2 / 2)

    def planned_half_guesses(self, mu: float) -> int:
        """k maximising the bound at the expected correct count under the claimed μ (no coins used)."""
        best, best_k = -1.0, 1
        for k in np.unique(np.geomspace(10, self.canaries // 2, 24).astype(int)):
            # Canary outputs: N(μ, 1) w.p. ½ and N(0, 1) w.p. ½ (in units of σ); the top-k
            # threshold c solves m·P[Y > c] = k, and a top guess is right w.p. P[in | Y > c].
            def tail(c: float) -> float:
                return 0.5 * (stats.norm.sf(c - mu) + stats.norm.sf(c))
            c = float(stats.norm.isf(k / self.canaries) + mu)
            for _ in range(60):
                c += (tail(c) - k / self.canaries) / (0.5 * (stats.norm.pdf(c - mu) + stats.norm.pdf(c)))
            precision = 0.5 * stats.norm.sf(c - mu) / tail(c)
            expected = round(2 * k * precision)
            bound = one_run_epsilon_lower_bound(self.canaries, int(2 * k), expected, delta=self.delta)
            if bound > best:
                best, best_k = bound, int(k)
        return best_k

    def run(self, runs: int = 1, seed: int = 0, *, confidence: float = 0.95) -> OneRunReport:
        """One release of the canary vector; ``runs`` must be 1 (kept for the command's interface).

        ``confidence`` is the probability that the certified bound is valid.
        """
        from accounting import ZCDP

        if runs != 1:
            raise ValueError(f"a one-run audit uses exactly one run, got runs={runs!r}")
        start = time.perf_counter()
        rng = np.random.default_rng(seed)
        mechanism = self.mechanism_class(huge_budget_account("zcdp"), 1.0, rng, cost=ZCDP(self.rho))
        mu_claimed = math.sqrt(2 * float(self.rho))
        k = self.planned_half_guesses(mu_claimed)
        coins = rng.random(self.canaries) < 0.5
        release = mechanism.release(coins.astype(float), note="audit: one-run canaries")
        rho = float(release.receipt.cost.rho)
        claimed = gdp_epsilon(math.sqrt(2 * rho), self.delta)
        order = np.argsort(np.asarray(release.value))
        correct = int(coins[order[-k:]].sum() + (~coins[order[:k]]).sum())
        bound = one_run_epsilon_lower_bound(self.canaries, 2 * k, correct, delta=self.delta, confidence=confidence)
        return OneRunReport(
            audit=self.name, mechanism=self.mechanism, claimed_epsilon=claimed, claimed_delta=self.delta,
            claimed_cost=str(release.receipt.cost), epsilon_lower_bound=bound, runs=1, canaries=self.canaries,
            guesses=2 * k, correct=correct, verdict="violated" if bound > claimed else "consistent", seed=seed,
            seconds=time.perf_counter() - start,
            parameters={"target_epsilon": self.epsilon, "rho": float(self.rho),
                        "mechanism_class": self.mechanism_class.__name__},
        )
