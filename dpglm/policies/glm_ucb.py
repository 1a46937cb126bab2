"""GLM-UCB (Filippi, Cappé, Garivier, Szepesvári 2010, "Parametric bandits: the
generalized linear case", NeurIPS), the κ-dependent optimistic baseline of the paper's
Table 2 (paper §8).

Each round: θ̂_t is the (ridge-regularised) maximum-likelihood estimate on all past
pairs, and the arm maximises

    μ(⟨x, θ̂_t⟩) + ρ(t) ‖x‖_{V_t⁻¹},    V_t = λI + Σ_{s<t} x_s x_sᵀ,
    ρ(t) = (2 k_μ κ_F R / c_μ) √(2 d log t · log(2dT/δ)),   κ_F = √(3 + 2 log(1 + 2M²/λ))

(Filippi et al. 2010, Algorithm 1 and Theorem 1; M = 1 bounds ‖x‖, k_μ = sup μ̇ is the
Lipschitz constant of μ, c_μ = inf μ̇ = 1/κ). The projection step of Filippi et al.
(their eq. (7)) is not applied: the paper's simulations ran GLM-UCB without it.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from dpglm._validation import (
    check_horizon_left,
    check_positive,
    check_probability,
    check_real,
    check_round_order,
    check_size,
)
from dpglm.glm import GLMFamily, fit_mle, get_family
from dpglm.linalg import dmu_range
from dpglm.policies.base import Policy
from dpglm.policies.running import Rows

__all__ = ["GLMUCB", "kappa_baseline_constants", "link_lipschitz"]


def link_lipschitz(family: GLMFamily) -> float:
    """k_μ = sup_z μ̇(z), the largest μ̇ on [−50, 50] (:func:`dpglm.linalg.dmu_range`; 1/4 logistic, 1/√(2π) probit).

    The sup over the whole line, not over the ball |z| ≤ S of the policies' κ: μ̇ of both
    families peaks at z = 0, a point of the grid, so the value is exact for them.
    """
    return dmu_range(family, 50.0)[1]


def kappa_baseline_constants(
    d: int, delta: float, kappa: float, lam: float | None
) -> tuple[float, float, float]:
    """Checked (δ, κ, λ) of a κ-dependent baseline (GLM-UCB, GLOC); λ defaults to d.

    The default λ = d is the one of the paper's simulations (§8).

    Raises
    ------
    ValueError
        Unless δ ∈ (0, 1), κ ≥ 1 is finite and λ > 0 is finite.
    """
    delta, kappa = check_probability("delta", delta), check_real("kappa", kappa, 1.0)
    lam = check_positive("lam", d if lam is None else lam)
    return delta, kappa, lam


class GLMUCB(Policy):
    """GLM-UCB of Filippi et al. (2010) with an exact warm-started Newton MLE each round.

    Parameters
    ----------
    family : GLMFamily or str
    d : int
        Dimension.
    horizon : int
        T, enters ρ(t) through log(2dT/δ).
    delta : float in (0, 1)
        Failure probability δ.
    kappa : float >= 1
        κ = 1/c_μ (paper §4.1); the paper's simulations pass the instance's oracle κ.
    lam : float > 0, optional
        Ridge λ of V_t and of the MLE (loss L(θ; λ) of :mod:`dpglm.glm`). Default d, as in
        the paper's simulations.
    reward_bound : float
        R, the bound on rewards (1 for Bernoulli).
    """

    name = "GLM-UCB"

    def __init__(
        self,
        family: GLMFamily | str,
        d: int,
        *,
        horizon: int,
        delta: float,
        kappa: float,
        lam: float | None = None,
        reward_bound: float = 1.0,
    ) -> None:
        super().__init__(d, reward_bound=reward_bound)
        self.family = get_family(family)
        horizon = check_size("horizon", horizon)
        self.delta, self.kappa, lam = kappa_baseline_constants(self.d, delta, kappa, lam)
        self.horizon, self.lam = int(horizon), lam
        kappa_f = np.sqrt(3.0 + 2.0 * np.log(1.0 + 2.0 / lam))
        # ρ(t) = rho_const · √(log t)   (Filippi et al. 2010, Theorem 1).
        self.rho_const = (
            2.0 * link_lipschitz(self.family) * kappa_f * self.reward_bound * self.kappa
            * np.sqrt(2.0 * self.d * np.log(2.0 * self.d * self.horizon / self.delta))
        )
        self.V_inv = np.eye(self.d) / lam
        self.theta_hat = np.zeros(self.d)
        self._rows = Rows(self.d)  # grows with the rounds played, not preallocated for the horizon
        self.n = 0
        self._last: np.ndarray | None = None

    def bonus_width(self) -> float:
        """ρ(t) at the current round t = n + 1 (zero at t = 1)."""
        return self.rho_const * np.sqrt(np.log(self.n + 1.0))

    def choose(self, arms: np.ndarray) -> int:
        """argmax μ(⟨x, θ̂⟩) + ρ(t)‖x‖_{V⁻¹} (Filippi et al. 2010, Algorithm 1)."""
        arms = self._check_arms(arms)
        check_round_order(self._last, "choose")
        widths = np.sqrt(np.einsum("ki,ki->k", arms @ self.V_inv, arms))
        index = self.family.mu(arms @ self.theta_hat) + self.bonus_width() * widths
        choice = int(np.argmax(index))
        self._last = arms[choice].copy()
        return choice

    def observe(self, reward: float) -> None:
        """Sherman–Morrison update of V⁻¹, then the MLE refit warm-started at θ̂."""
        check_round_order(self._last, "observe")
        check_horizon_left(self.n, self.horizon)
        r = self._check_reward(reward)
        x, self._last = cast(np.ndarray, self._last), None  # not None: check_round_order
        Vx = self.V_inv @ x
        self.V_inv -= np.outer(Vx, Vx) / (1.0 + x @ Vx)
        self._rows.stage(x)
        self._rows.commit(r)
        self.n += 1
        self.theta_hat = fit_mle(self.family, self._rows.blocks(), None, lam=self.lam, theta0=self.theta_hat)
