"""GLOC (Jun, Bhargava, Nowak, Willett 2017, "Scalable generalized linear bandits:
online computation and hashing", NeurIPS): generalized linear online-to-confidence-set
conversion of the Online Newton Step, a κ-dependent baseline of the paper's Table 2.

Online learner (GLM-ONS, Jun et al. Alg. 2): with A_t = λI + Σ_{s≤t} x_s x_sᵀ and the
loss gradient g_t = (μ(⟨x_t, θ_t⟩) − r_t) x_t,

    θ_{t+1} = Π^{A_t}_{‖θ‖≤S}(θ_t − (1/c_μ) A_t⁻¹ g_t),    c_μ = 1/κ,
    B_t = 2 c_μ S² λ + (1/(2c_μ)) Σ_{s≤t} ‖g_s‖²_{A_s⁻¹}      (its OCO regret bound).

Conversion (Jun et al. Alg. 1, Thm 1/2): z_s = ⟨x_s, θ_s⟩, θ̂_t = V_t⁻¹ Σ_s z_s x_s with
V_t = A_t, and

    α(B) = 1 + (4/c_μ) B + (8σ²/c_μ²) log((2/δ) √(1 + (2/c_μ) B + 4σ⁴/(c_μ⁴ δ²))),
    β_t = α(B_t) + λS² − (Σ_s z_s² − θ̂_tᵀ Σ_s z_s x_s),

choose argmax ⟨x, θ̂_t⟩ + √β_t ‖x‖_{V_t⁻¹}; σ is the sub-Gaussian constant of the reward
noise (1/2 for Bernoulli rewards).

Two presets:

- ``"theory"`` — the algorithm above.
- ``"paper-simulation"`` — the variant the paper's simulations ran (the public GLOC code
  the paper builds on): the ONS iterate is rescaled onto the sphere ‖θ‖ = S (instead of
  the A_t-norm projection onto the ball), σ is replaced by k_μ² (k_μ = sup μ̇), β_t is
  α(B_t) alone, and arms are ranked by μ(⟨x, θ_t⟩) + √β_t ‖x‖_{V_t⁻¹} with the ONS
  iterate θ_t. This is the preset that reproduces the GLOC row of Table 2.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from dpglm._validation import check_positive, check_round_order
from dpglm.glm import GLMFamily, get_family
from dpglm.policies.base import Policy
from dpglm.policies.glm_ucb import kappa_baseline_constants, link_lipschitz

__all__ = ["GLOC", "project_ball_in_norm"]

PRESETS = ("theory", "paper-simulation")


def project_ball_in_norm(u: np.ndarray, A: np.ndarray, radius: float) -> np.ndarray:
    """argmin_{‖θ‖ ≤ radius} ‖θ − u‖_A for a positive definite A (the ONS projection).

    Outside the ball the KKT point is θ(ν) = (A + νI)⁻¹ A u with ‖θ(ν)‖ = radius, ν > 0;
    in the eigenbasis A = Q diag(a) Qᵀ, ‖θ(ν)‖² = Σ (a_i c_i / (a_i + ν))², c = Qᵀu, is
    decreasing in ν: solved by Newton on 1/‖θ(ν)‖ (concave, monotone) from ν = 0.
    """
    if u @ u <= radius * radius:
        return u
    a, Q = np.linalg.eigh(A)
    w = a * (Q.T @ u)
    nu = 0.0
    for _ in range(100):
        denom = a + nu
        norm = np.sqrt(np.sum((w / denom) ** 2))
        if abs(norm - radius) <= 1e-12 * radius:
            break
        dnorm = -np.sum(w * w / denom**3) / norm
        # Newton on φ(ν) = 1/radius − 1/‖θ(ν)‖ (concave increasing: iterates stay below root).
        phi = 1.0 / radius - 1.0 / norm
        dphi = dnorm / norm**2
        nu = max(nu - phi / dphi, 0.0)
    return Q @ (w / (a + nu))


class GLOC(Policy):
    """GLOC with the GLM-ONS learner (Jun et al. 2017), O(d²) per round.

    Parameters
    ----------
    family : GLMFamily or str
    d : int
    S : float > 0
        Known bound on ‖θ*‖.
    delta : float in (0, 1)
    kappa : float >= 1
        κ = 1/c_μ (paper §4.1; the paper's simulations pass the oracle κ).
    lam : float > 0, optional
        λ of A_t = V_t (default d, as in the paper's simulations).
    noise_subgaussian : float, optional
        σ of the reward noise (default R/2, the Bernoulli value) — ``"theory"`` only.
    preset : {"theory", "paper-simulation"}
    reward_bound : float
    """

    name = "GLOC"

    def __init__(
        self,
        family: GLMFamily | str,
        d: int,
        *,
        S: float,
        delta: float,
        kappa: float,
        lam: float | None = None,
        noise_subgaussian: float | None = None,
        preset: str = "theory",
        reward_bound: float = 1.0,
    ) -> None:
        super().__init__(d, reward_bound=reward_bound)
        self.family = get_family(family)
        if preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
        S = check_positive("S", S)
        self.delta, self.kappa, lam = kappa_baseline_constants(self.d, delta, kappa, lam)
        self.preset = preset
        self.S, self.lam = float(S), lam
        self.c_mu = 1.0 / self.kappa
        if preset == "paper-simulation":
            self.sigma2 = link_lipschitz(self.family) ** 4
        else:
            sigma = 0.5 * self.reward_bound if noise_subgaussian is None else check_positive(
                "noise_subgaussian", noise_subgaussian)
            self.sigma2 = sigma * sigma
        self.A = lam * np.eye(self.d)
        self.A_inv = np.eye(self.d) / lam
        self.theta = np.zeros(self.d)  # ONS iterate θ_t
        self.theta_hat = np.zeros(self.d)  # confidence-set centre
        self.xz = np.zeros(self.d)  # Σ z_s x_s
        self.zz = 0.0  # Σ z_s²
        try:
            self.oco_bound = 2.0 * self.c_mu * self.S**2 * lam  # B_0
        except OverflowError:
            self.oco_bound = np.inf
        if not np.isfinite(self.oco_bound):  # so is S²: the confidence width below stays a float
            raise ValueError(f"S={S!r} is too large: the online learner's bound 2·c_μ·S²·λ overflows a float")
        self._last: np.ndarray | None = None

    def alpha(self, B: float) -> float:
        """α(B) of Jun et al. (2017), Theorem 1."""
        c, s2, dl = self.c_mu, self.sigma2, self.delta
        inner = 1.0 + 2.0 * B / c + 4.0 * s2 * s2 / (c**4 * dl * dl)
        return float(1.0 + 4.0 * B / c + 8.0 * s2 / (c * c) * np.log(2.0 / dl * np.sqrt(inner)))

    def beta(self) -> float:
        """β_t: squared confidence radius around θ̂_t (Jun et al. 2017, Theorem 2)."""
        a = self.alpha(self.oco_bound)
        if self.preset == "paper-simulation":
            return a
        return float(a + self.lam * self.S**2 - (self.zz - self.theta_hat @ self.xz))

    def choose(self, arms: np.ndarray) -> int:
        """argmax of the optimistic index (Jun et al. 2017, Alg. 1, line 3)."""
        arms = self._check_arms(arms)
        check_round_order(self._last, "choose")
        widths = np.sqrt(np.einsum("ki,ki->k", arms @ self.A_inv, arms))
        radius = np.sqrt(max(self.beta(), 0.0))
        if self.preset == "paper-simulation":
            index = self.family.mu(arms @ self.theta) + radius * widths
        else:
            index = arms @ self.theta_hat + radius * widths
        choice = int(np.argmax(index))
        self._last = arms[choice].copy()
        return choice

    def observe(self, reward: float) -> None:
        """GLM-ONS step and the online-to-confidence-set statistics (O(d²) + a d×d eigh
        only when the ONS step leaves the ball)."""
        check_round_order(self._last, "observe")
        r = self._check_reward(reward)
        x, self._last = cast(np.ndarray, self._last), None  # not None: check_round_order
        Ax = self.A_inv @ x
        self.A_inv -= np.outer(Ax, Ax) / (1.0 + x @ Ax)
        self.A += np.outer(x, x)
        z = float(x @ self.theta)
        g = (float(self.family.mu(np.array(z))) - r) * x
        Ag = self.A_inv @ g
        self.oco_bound += 0.5 / self.c_mu * float(g @ Ag)
        self.xz += z * x
        self.zz += z * z
        self.theta_hat = self.A_inv @ self.xz
        step = self.theta - Ag / self.c_mu
        if self.preset == "paper-simulation":
            norm = np.linalg.norm(step)
            self.theta = step * (self.S / norm) if norm > 0 else step
        else:
            self.theta = project_ball_in_norm(step, self.A, self.S)
