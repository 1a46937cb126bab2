"""Statistical ε lower bound for the joint-DP bandit: the first-switch game.

Joint DP (Kearns et al. 2014; paper §3): neighbouring data sets differ in the user
of round 1 (arm set and reward); the output is the actions at every other round,
whose arm sets and rewards the auditor chooses. The auditor here makes the round-1
difference propagate as far as it can, into the time of the first Criterion II
switch (paper Alg. 2, line 11), and makes that time visible in the actions.

The game (logistic, d = 2, K = 2, S = 1, preset ``"calibrated"``, whose Criterion I
cannot fire at these sizes — checked — so θ̂_o = 0 and every round feeds the H-tree):

* round 1: ``D0`` offers e₁ twice with reward 0, ``D1`` offers e₂ twice with reward 1,
  so user 1's H-leaf is ``w e₁e₁ᵀ`` or ``w e₂e₂ᵀ`` (``w = μ̇(0)/e``) and its (x, y) in the
  θ̂_τ refits differ;
* rounds ≥ 2: arms ``(e₂, (1 − η) e₁)``, reward ½ for either.

Until the first switch θ̂_τ = 0 and ``H_τ = λ_H I``, so ``UCB(x) = β‖x‖/√λ_H``: the
policy plays e₂ every round and every leaf is ``w e₂e₂ᵀ``. The switch fires once
``λ_max(H_τ^{-1/2} H_t H_τ^{-1/2}) > c``; then ``H_τ`` has grown ≈ c-fold along e₂, the
width of e₂ shrinks by ≈ 1/√c and the longer-width arm ``(1 − η) e₁`` wins (the refit
on rewards ½ keeps θ̂_τ small). The observable is R, the first round at which arm 1
(``(1 − η) e₁``) is played (``T + 1`` if never), a function of the actions at rounds
≥ 2; ``D1``'s H is one e₂-leaf ahead of ``D0``'s, so ``D1`` switches no later.

* A policy deciding from the exact H (:class:`audits.planted.ExactGramBandit`)
  switches at a deterministic round: ``D1`` at ``s = n* + 1`` and ``D0`` at ``s + 1``, with
  ``n* = ⌊(c − 1) λ_H / w⌋ + 1`` e₂-leaves needed. R separates the neighbours perfectly,
  and ``n`` runs per side certify ``ln((1 − δ − p)/p)``, ``p = 1 − (α/2)^{1/n}``
  (≈ ln(n/3.7)).
* The real policy's released H carries tree noise far larger than one leaf ``w``; R
  barely depends on user 1 and the certified bound is small, as it must be. A ceiling:
  user 1's leaf sits in L tree nodes of noise σ, so every H release together is μ-GDP
  with ``μ = Δ_H√L/σ`` (``h_tree_mu`` in the result's parameters: ≈ 0.16 at ε = 1,
  T = 400 and ≈ 0.50 at ε = 4, T = 200), and even the best test on all of them has
  TPR − FPR = 2Φ(μ/2) − 1 ≈ 0.06 / 0.20; one switch decision reads a single release.
  A few hundred runs per side certify ε > 0 only past an advantage of ≈ 0.1.

Scores (higher = evidence for ``D1``), a likelihood-ratio-style pair whose choice and
threshold the held-out runs make (:class:`audits.base.Audit`): ``−R`` (earlier switch),
and ``−|R − s|`` (closeness to the exact-H switch round of ``D1``, a public function of
the policy's constants λ_H, c, w). Certified by Clopper–Pearson (Jagielski et al. 2020)
against the policy's ledger guarantee. A run stops at R: the later actions are not
used by the statistics, so not computing them changes nothing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from accounting import ApproxDP
from accounting.validation import check_int, check_positive, check_probability
from audits.base import CLOPPER_PEARSON, Audit, AuditResult, Claim, _check_runs

if TYPE_CHECKING:
    from dpglm.policies.joint_dp import JointDPGLMBandit

__all__ = ["BanditSwitchAudit"]

_D = 2
_S = 1.0


class BanditSwitchAudit(Audit):
    """The first-switch game of the joint-DP bandit (module docstring), Clopper–Pearson certified.

    Parameters
    ----------
    epsilon : float > 0
    delta : float in (0, 1)
        The policy's (ε, δ): its ledger's budget, read back as the claim.
    horizon : int, optional
        Rounds T per run. Default: the smallest multiple of 100 whose exact-H switch
        round of ``D0`` is at most ``T − 10`` (λ_H depends on T only through logs).
    eta : float in (0, 1)
        Arm 1 is ``(1 − η) e₁``: shorter than e₂ before the switch, wider after it.
    policy_class : type, optional
        ``JointDPGLMBandit`` (default) or a subclass (a planted bug).
    name : str
        Name in the result record.
    """

    mechanism = "JointDPGLMBandit"
    method = CLOPPER_PEARSON
    statistics = ("-first round playing (1-eta) e1", "-|first round playing (1-eta) e1 - exact-H D1 switch round|")
    chunk = 10

    def __init__(self, epsilon: float, delta: float = 0.01, *, horizon: int | None = None, eta: float = 0.01,
                 policy_class: type[JointDPGLMBandit] | None = None, name: str = "bandit") -> None:
        from dpglm.policies.joint_dp import JointDPGLMBandit, TreeDesign

        self.epsilon, self.delta = check_positive("epsilon", epsilon), check_probability("delta", delta)
        self.eta, self.name = check_probability("eta", eta), name
        if horizon is not None:
            horizon = check_int("horizon", horizon, 2)
        self.policy_class = JointDPGLMBandit if policy_class is None else policy_class
        if horizon is None:
            horizon = 100
            while self._constants(horizon)[-1] + 1 > horizon - 10:
                horizon += 100
        self.horizon = horizon
        self.lam_h, self.switch_factor, self.leaf_weight, self.exact_switch_round = self._constants(horizon)
        design_h = self._policy(np.random.default_rng(0)).design_h
        if not isinstance(design_h, TreeDesign):
            raise TypeError(f"the first-switch game audits a tree-released H, got {type(design_h).__name__}")
        tree = design_h.tree
        self.h_tree_mu = float(tree.sensitivity * math.sqrt(tree.depth) / tree.sigma)

    def _policy(self, rng: np.random.Generator, horizon: int | None = None) -> JointDPGLMBandit:
        return self.policy_class("logistic", _D, self.horizon if horizon is None else horizon, _S, self.epsilon,
                                 self.delta, rng, preset="calibrated")

    def _constants(self, horizon: int) -> tuple[float, float, float, int]:
        """(λ_H, c, w, s): the public constants and the exact-H switch round of ``D1`` at ``horizon``."""
        policy = self._policy(np.random.default_rng(0), horizon)
        if policy.exploration_possible:
            raise ValueError("the first-switch game needs a policy whose Criterion I cannot fire (θ̂_o = 0)")
        params = policy.params
        weight = float(policy.family.dmu(np.zeros(()))) / math.e
        needed = math.floor((params.switch_factor - 1) * params.lam_h / weight) + 1
        return float(params.lam_h), float(params.switch_factor), weight, needed + 1

    def claim(self) -> Claim:
        """The policy's promise: (ε, δ)-joint DP for the whole run, its ledger's budget."""
        budget = self._policy(np.random.default_rng(0)).ledger.root.budget
        if not isinstance(budget, ApproxDP):
            raise TypeError(f"the joint-DP bandit's ledger is in (ε, δ), got {type(budget).__name__}")
        epsilon, delta = float(budget.eps), float(budget.delta)
        return Claim(epsilon=epsilon, delta=delta, cost=str(budget), ledger_epsilon=epsilon)

    def first_round(self, neighbour: int, rng: np.random.Generator) -> int:
        """R: the first round (1-based) at which arm 1 is played on ``D{neighbour}``, or T + 1."""
        policy = self._policy(rng)
        first = np.eye(_D)[neighbour]
        policy.choose(np.stack([first, first]))
        policy.observe(float(neighbour))
        arms = np.array([[0.0, 1.0], [1.0 - self.eta, 0.0]])
        for t in range(2, self.horizon + 1):
            if policy.choose(arms) == 1:
                return t
            policy.observe(0.5)
        return self.horizon + 1

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        rounds = np.array([self.first_round(neighbour, child) for child in rng.spawn(runs)], dtype=float)
        return np.column_stack([-rounds, -np.abs(rounds - self.exact_switch_round)])

    def parameters(self) -> dict:
        return {"horizon": self.horizon, "d": _D, "arms": 2, "eta": self.eta, "lam_h": self.lam_h,
                "switch_factor": self.switch_factor, "leaf_weight": self.leaf_weight,
                "exact_switch_round_D1": self.exact_switch_round, "h_tree_mu": self.h_tree_mu,
                "policy_class": self.policy_class.__name__}

    def run(self, runs: int = 300, seed: int = 0, *, holdout_runs: int | None = None,
            confidence: float = 0.95) -> AuditResult:
        """:meth:`audits.base.Audit.run` with ``holdout_runs`` defaulting to ``max(10, runs // 2)`` (runs are slow)."""
        holdout = max(10, _check_runs(runs) // 2) if holdout_runs is None else holdout_runs
        return super().run(runs, seed, holdout_runs=holdout, confidence=confidence)
