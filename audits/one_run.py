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

The same (m, r, v) is also read through Mahloujifar, Melis & Chaudhuri's f-DP
analysis (2025): against the (ε, δ) tradeoff curve (assumption-free, like
Steinke's) and against the Gaussian curves (an ε that assumes a Gaussian
tradeoff, labelled so). The verdict is "violated" when either assumption-free
reading exceeds the claim, each certified at level α/2 (Bonferroni over the two);
"μ-GDP refuted" when only the Gaussian reading does.

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
from audits.base import huge_budget_account, summary_text
from audits.bounds import (
    gdp_epsilon,
    gdp_mu_for_epsilon,
    one_run_epsilon_lower_bound,
    one_run_fdp_epsilon_lower_bound,
    one_run_gdp_mu_lower_bound,
)

__all__ = ["OneRunGaussianAudit", "OneRunReport", "planned_guesses"]


@dataclass(frozen=True)
class OneRunReport:
    """Claim, the three one-run readings and canary counts of one one-run audit.

    ``epsilon_lower_bound`` is the larger of the two assumption-free bounds
    (Steinke et al.; f-DP against the (ε, δ) curve), each at level α/2;
    ``epsilon_lower_bound_gdp`` assumes a Gaussian tradeoff (μ-GDP refuted
    when ``mu_lower_bound`` exceeds ``claimed_mu``).
    """

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
    epsilon_lower_bound_steinke: float = 0.0
    epsilon_lower_bound_fdp: float = 0.0
    epsilon_lower_bound_gdp: float = 0.0
    mu_lower_bound: float = 0.0
    claimed_mu: float = 0.0
    confidence: float = 0.95
    refuted_by: str | None = None
    method: str = "one run (Steinke et al. 2023; f-DP, Mahloujifar et al. 2025)"
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
        """The headline and three lines of detail (:func:`audits.base.summary_text`)."""
        return summary_text(self.audit, self.claimed_epsilon, self.claimed_delta,
                            f"at {100 * self.confidence:.4g}%: {self._verdict()}", [
                                f"certified ε ≥ {self.epsilon_lower_bound_steinke:.4f} [Steinke], "
                                f"≥ {self.epsilon_lower_bound_fdp:.4f} [f-DP, (ε, δ) curve]",
                                f"μ ≥ {self.mu_lower_bound:.4f} vs claimed {self.claimed_mu:.4f}: "
                                f"ε ≥ {self.epsilon_lower_bound_gdp:.4f} assuming a Gaussian tradeoff",
                                f"one run: m={self.canaries} canaries, {self.correct}/{self.guesses} guesses right"])

    def _verdict(self) -> str:
        return "μ-GDP refuted" if self.refuted_by == "μ-GDP" else self.verdict

    def title(self) -> str:
        return (f"{self.audit}: claimed ε={self.claimed_epsilon:.3g}, certified ε≥{self.epsilon_lower_bound:.3g}; "
                f"ε≥{self.epsilon_lower_bound_gdp:.3g} assuming a Gaussian tradeoff ({self._verdict()})")


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
        return planned_guesses(self.canaries, mu, self.delta)[0]

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
        k = self.planned_half_guesses(math.sqrt(2 * float(self.rho)))
        coins = rng.random(self.canaries) < 0.5
        release = mechanism.release(coins.astype(float), note="audit: one-run canaries")
        rho = float(release.receipt.cost.rho)
        claimed = gdp_epsilon(math.sqrt(2 * rho), self.delta)
        order = np.argsort(np.asarray(release.value))
        correct = int(coins[order[-k:]].sum() + (~coins[order[:k]]).sum())
        readings = _readings(self.canaries, 2 * k, correct, self.delta, confidence)
        mu_claimed = math.sqrt(2 * rho)
        certified = max(readings["steinke"], readings["fdp"])
        refuted_by = ("certified" if certified > claimed else
                      "μ-GDP" if readings["mu"] > mu_claimed else None)
        return OneRunReport(
            audit=self.name, mechanism=self.mechanism, claimed_epsilon=claimed, claimed_delta=self.delta,
            claimed_cost=str(release.receipt.cost), epsilon_lower_bound=certified, runs=1, canaries=self.canaries,
            guesses=2 * k, correct=correct, verdict="consistent" if refuted_by is None else "violated", seed=seed,
            seconds=time.perf_counter() - start,
            parameters={"target_epsilon": self.epsilon, "rho": float(self.rho),
                        "mechanism_class": self.mechanism_class.__name__},
            epsilon_lower_bound_steinke=readings["steinke"], epsilon_lower_bound_fdp=readings["fdp"],
            epsilon_lower_bound_gdp=gdp_epsilon(readings["mu"], self.delta), mu_lower_bound=readings["mu"],
            claimed_mu=mu_claimed, confidence=confidence, refuted_by=refuted_by,
        )


def planned_guesses(canaries: int, mu: float, delta: float) -> tuple[int, int]:
    """(k, expected right of the 2k guesses): the k maximising Steinke's bound at its expected count under μ.

    Canary outputs are N(μ, 1) ("in", probability ½) or N(0, 1) ("out"), in units of σ;
    the k largest are guessed "in" and the k smallest "out". The top-k threshold c
    solves m·P[Y > c] = k, and a top guess is right with probability P[in | Y > c] (by
    symmetry the bottom k likewise). Public: it reads μ, never the coins.
    """
    best, choice = -1.0, (1, 1)
    for k in np.unique(np.geomspace(10, max(canaries // 2, 10), 24).astype(int)):
        if 2 * k > canaries:
            continue

        def tail(c: float) -> float:
            return 0.5 * (stats.norm.sf(c - mu) + stats.norm.sf(c))
        c = float(stats.norm.isf(k / canaries) + mu)
        for _ in range(60):
            c += (tail(c) - k / canaries) / (0.5 * (stats.norm.pdf(c - mu) + stats.norm.pdf(c)))
        precision = 0.5 * stats.norm.sf(c - mu) / tail(c)
        expected = round(2 * k * precision)
        bound = one_run_epsilon_lower_bound(canaries, int(2 * k), expected, delta=delta)
        if bound > best:
            best, choice = bound, (int(k), int(expected))
    return choice


def _readings(canaries: int, guesses: int, correct: int, delta: float, confidence: float) -> dict[str, float]:
    """The two assumption-free bounds at level α/2 each (Bonferroni) and the Gaussian-curve μ at level α."""
    split = 1.0 - (1.0 - confidence) / 2
    return {"steinke": one_run_epsilon_lower_bound(canaries, guesses, correct, delta=delta, confidence=split),
            "fdp": one_run_fdp_epsilon_lower_bound(canaries, guesses, correct, delta=delta, confidence=split),
            "mu": one_run_gdp_mu_lower_bound(canaries, guesses, correct, confidence=confidence)}
