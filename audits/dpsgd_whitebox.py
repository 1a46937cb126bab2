"""DP-SGD on a real data set audited white-box in two training runs (docs/audits.md, "DP-SGD on real data").

Each run trains on the real rows plus m crafted canaries (:func:`audits.dpsgd_canary.canary_rows`:
canary i is a·e_i in a column of its own, which no real row and no other canary touches),
each set by its own fair coin: its label 0 or 1 for the project's ``DPSGD`` (replace-one,
clipped gradient ±C), present or absent for opacus (add/remove, C or nothing). White box:
the auditor sees every iterate — the projection each engine applies after every step
records it — so step t of canary i gives the observation ``o = (θ_{t+1} − θ_t)_i · N/η``,
the clipped gradient's sign and the noise along e_i in gradient units. Two readings:

* **Gaussian DP across steps** (Nasr et al. 2023, §5: each step is a Gaussian mechanism,
  and T steps of μ_s-GDP compose to exactly √T·μ_s-GDP, Dong, Roth & Su 2022, Cor. 3.3):
  the test "coin = 1 iff o ≥ τ" (τ public: 0 for ±C, C/2 for C or 0) over the m·T
  observations of every run certifies μ_s by Clopper–Pearson, and μ ≥ √T·μ_s_LB.
  It **assumes** every (canary, step) observation is an independent trial of the same
  Gaussian mechanism; labelled so.
* **Assumption-free, one run** (Steinke, Nasr & Jagielski 2023, Thm. 5.2; the f-DP
  recursion of Mahloujifar et al. 2025): the joint release of the runs is (ε, δ)-DP with
  respect to each canary's coin if one training run is, so the per-canary sums Σ_t o
  (the final model's coordinate) give r = 2k guesses on M = m·runs canaries, k planned
  from the claimed μ (:func:`audits.one_run.planned_guesses`); each bound at α/2, and its
  ceiling: the same bound at the number of right guesses expected under the claim.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import stats

from accounting.validation import check_int, check_positive, check_probability
from audits.base import huge_budget_account
from audits.bounds import gdp_epsilon, gdp_mu_for_epsilon, gdp_mu_lower_bound
from audits.dpsgd_canary import CANARY_NORM, canary_rows, opacus_train, real_data, stable_lr
from audits.membership.certify import one_run_bounds
from audits.one_run import planned_guesses

__all__ = ["DPSGDWhiteBoxAudit", "WhiteBoxReport"]


@dataclass(frozen=True)
class WhiteBoxReport:
    """The claim, both readings with their ceilings, and what the audit cost."""

    audit: str
    mechanism: str
    claimed_epsilon: float
    claimed_delta: float
    claimed_mu: float
    claimed_cost: str
    runs: int
    canaries: int
    steps: int
    mu_step_lower_bound: float
    mu_lower_bound: float
    epsilon_assuming_gaussian: float
    mu_ceiling: float
    guesses: int
    correct: int
    steinke: float
    fdp: float
    steinke_ceiling: float
    fdp_ceiling: float
    confidence: float
    verdict: str
    refuted_by: str | None
    seconds: float
    cpu_seconds: float
    parameters: dict

    @property
    def epsilon_lower_bound(self) -> float:
        """The assumption-free bound: the larger of Steinke's and the f-DP one."""
        return max(self.steinke, self.fdp)

    def to_dict(self) -> dict:
        return {**asdict(self), "epsilon_lower_bound": self.epsilon_lower_bound}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str)

    def summary(self) -> str:
        verdict = "μ-GDP refuted" if self.refuted_by == "μ-GDP" else self.verdict
        return (f"{self.audit}: claimed ε={self.claimed_epsilon:.4f} (δ={self.claimed_delta:g}, "
                f"μ={self.claimed_mu:.4f}); "
                f"μ ≥ {self.mu_lower_bound:.4f} (ceiling {self.mu_ceiling:.4f}): ε ≥ "
                f"{self.epsilon_assuming_gaussian:.4f} assuming each step the same Gaussian mechanism; certified "
                f"ε ≥ {self.steinke:.4f} [Steinke, ceiling {self.steinke_ceiling:.4f}], ≥ {self.fdp:.4f} "
                f"[f-DP, ceiling {self.fdp_ceiling:.4f}] ({self.correct}/{self.guesses} right on "
                f"{self.runs * self.canaries} canaries); {self.runs} runs × {self.steps} steps, "
                f"{self.cpu_seconds:.1f} CPU s, at {100 * self.confidence:.4g}%: {verdict}")


class _Recorder:
    """A ``BallProjection`` (subclassed lazily) that keeps the canary coordinates of every projected iterate."""

    @staticmethod
    def build(columns: slice) -> Any:
        from mechanisms.optim import BallProjection

        class Recorder(BallProjection):
            def __init__(self) -> None:
                super().__init__(1e9)
                self.trace: list[np.ndarray] = []

            def __call__(self, theta: Any) -> Any:
                projected = super().__call__(theta)
                self.trace.append(np.array(projected[columns]))
                return projected

        return Recorder()


class DPSGDWhiteBoxAudit:
    """Two white-box training runs with m crafted canaries each (module docstring).

    Parameters
    ----------
    epsilon, delta : float
        The run is calibrated to the Gaussian parameter μ of (ε, δ): the project's ``DPSGD``
        is charged ρ = μ²/2 (replace-one), opacus runs at z = √T/μ (add/remove).
    data : str or (X, y)
        A binary set of :mod:`audits.membership.data` or arrays.
    canaries, steps, clip : int, int, float
        m canaries per run, T full-batch steps, clipping norm C.
    engine : {"numpy", "opacus", "vectorised", "opacus-ledger"}
        An engine of the project's ``DPSGD``, or ``"opacus-ledger"``: opacus's own
        ``PrivacyEngine`` charged through :func:`mechanisms.optim.opacus_adapter.charge_training`.
    mechanism_class : type
        ``DPSGD`` or a subclass (planted bugs); not for ``"opacus-ledger"``.
    """

    def __init__(self, epsilon: float, delta: float = 1e-5, *, data: object = "digits-binary", canaries: int = 1000,
                 steps: int = 20, clip: float = 1.0, lr: float | None = None, engine: str = "numpy",
                 mechanism_class: type | None = None, name: str = "dpsgd-whitebox") -> None:
        from mechanisms.optim.dpsgd import DPSGD

        self.epsilon, self.delta = check_positive("epsilon", epsilon), check_probability("delta", delta)
        self.canaries, self.steps = check_int("canaries", canaries, 10), check_int("steps", steps)
        self.clip, self.engine, self.name = check_positive("clip", clip), engine, name
        self.X, self.y = real_data(data)
        self.mechanism_class = DPSGD if mechanism_class is None else mechanism_class
        self.add_remove = engine == "opacus-ledger"
        self.mu = gdp_mu_for_epsilon(self.epsilon, self.delta)
        # Noise std on a step's clipped sum: replace-one charges sensitivity 2C, add/remove C.
        self.sigma = (1.0 if self.add_remove else 2.0) * self.clip * math.sqrt(self.steps) / self.mu
        rows = len(self.y) + self.canaries
        self.lr = stable_lr(rows, self.steps, self.sigma, self.clip) if lr is None else check_positive("lr", lr)

    def _run(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, Any]:
        """One training run: (coins, observations (T, m) in gradient units, receipt)."""
        from accounting import ZCDP

        coins = rng.random(self.canaries) < 0.5
        labels = np.where(coins, 1.0, math.nan if self.add_remove else 0.0)
        X, y = canary_rows(self.X, self.y, labels, self.clip)
        columns = slice(self.X.shape[1], self.X.shape[1] + self.canaries)
        if self.add_remove:
            _, trace, receipt = opacus_train(X, y, rng, steps=self.steps, noise_multiplier=self.sigma / self.clip,
                                             lr=self.lr, clip=self.clip, record=True)
            iterates = [step[columns] for step in trace]
        else:
            recorder = _Recorder.build(columns)
            optimiser = self.mechanism_class(huge_budget_account("zcdp"), "logistic", rng, clip=self.clip,
                                             engine=self.engine)
            release = optimiser.fit(X, y, steps=self.steps, lr=self.lr, projection=recorder,
                                    cost=ZCDP(Fraction(self.mu**2 / 2)), theta0=np.zeros(X.shape[1]),
                                    note="audit: white-box canaries")
            iterates, receipt = recorder.trace, release.receipt
        if len(iterates) != self.steps:
            raise RuntimeError(f"{self.name}: recorded {len(iterates)} iterates of {self.steps} steps")
        path = np.vstack([np.zeros(self.canaries), *iterates])
        return coins, np.diff(path, axis=0) * len(y) / self.lr, receipt

    def _claim(self, receipt: Any) -> tuple[float, float, str]:
        """(ε, μ, cost) of one run, read from its receipt."""
        from audits.custom import as_claim
        from audits.noise import gaussian_claim

        claim = as_claim(receipt, self.delta, gaussian=True) if self.add_remove else gaussian_claim(receipt,
                                                                                                     self.delta)
        assert claim.mu is not None
        return claim.epsilon, claim.mu, claim.cost

    def run(self, runs: int = 2, seed: int = 0, *, confidence: float = 0.95) -> WhiteBoxReport:
        """``runs`` white-box training runs (2 by default), both readings; ``confidence`` their level."""
        runs, confidence = check_int("runs", runs), check_probability("confidence", confidence)
        start, cpu = time.perf_counter(), time.process_time()
        coins, observations, receipts = [], [], []
        for rng in (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(runs)):
            run_coins, run_observations, receipt = self._run(rng)
            coins.append(run_coins)
            observations.append(run_observations)
            receipts.append(receipt)
        claimed_epsilon, claimed_mu, cost = self._claim(receipts[0])
        inside, steps = np.concatenate(coins), np.hstack(observations)
        # Gaussian DP across steps: "in" iff the step's observation is at least the public midpoint.
        midpoint = self.clip / 2 if self.add_remove else 0.0
        trials_in, trials_out = self.steps * int(inside.sum()), self.steps * int((~inside).sum())
        false_positives = int(np.count_nonzero(steps[:, ~inside] >= midpoint))
        false_negatives = int(np.count_nonzero(steps[:, inside] < midpoint))
        mu_step = gdp_mu_lower_bound(false_positives, trials_out, false_negatives, trials_in, confidence=confidence)
        mu_lower = math.sqrt(self.steps) * mu_step
        half = claimed_mu / math.sqrt(self.steps) / 2  # the claimed per-step μ_s over 2, in σ units
        mu_ceiling = math.sqrt(self.steps) * gdp_mu_lower_bound(
            round(trials_out * stats.norm.sf(half)), trials_out, round(trials_in * stats.norm.sf(half)), trials_in,
            confidence=confidence)
        # One run, assumption-free: per-canary sums, top k "in", bottom k "out", k from the claimed μ.
        total = steps.sum(axis=0)
        k, expected = planned_guesses(total.size, claimed_mu, self.delta)
        order = np.argsort(total, kind="stable")
        correct = int(inside[order[-k:]].sum() + (~inside[order[:k]]).sum())
        bounds = one_run_bounds(total.size, 2 * k, correct, self.delta, confidence)
        ceiling = one_run_bounds(total.size, 2 * k, expected, self.delta, confidence)
        certified = max(bounds.steinke, bounds.fdp)
        refuted_by = "certified" if certified > claimed_epsilon else "μ-GDP" if mu_lower > claimed_mu else None
        return WhiteBoxReport(
            audit=self.name, mechanism="opacus DP-SGD" if self.add_remove else self.mechanism_class.__name__,
            claimed_epsilon=claimed_epsilon, claimed_delta=self.delta, claimed_mu=claimed_mu, claimed_cost=cost,
            runs=runs, canaries=self.canaries, steps=self.steps, mu_step_lower_bound=mu_step, mu_lower_bound=mu_lower,
            epsilon_assuming_gaussian=gdp_epsilon(mu_lower, self.delta), mu_ceiling=mu_ceiling, guesses=2 * k,
            correct=correct, steinke=bounds.steinke, fdp=bounds.fdp, steinke_ceiling=ceiling.steinke,
            fdp_ceiling=ceiling.fdp, confidence=confidence,
            verdict="consistent" if refuted_by is None else "violated", refuted_by=refuted_by,
            seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu,
            parameters={"engine": self.engine, "lr": self.lr, "clip": self.clip, "sigma": self.sigma,
                        "canary_norm": CANARY_NORM * self.clip, "rows": len(self.y), "seed": seed},
        )
