"""ECOLog (Faury, Abeille, Jun, Calauzènes 2022, "Jointly efficient and optimal
algorithms for logistic bandits", AISTATS): the adaptive, warm-up-free OFU variant
("adaECOLog") with the data-dependent confidence radius, a baseline of the paper's
Fig. 1(a) (paper Appendix B).

Online estimator: one proximal Newton-type step per round,

    θ_{t+1} = argmin_{‖θ‖≤S} ℓ(θ; x_t, r_t) + ½ ‖θ − θ_t‖²_{W_t},
    W_{t+1} = W_t + μ̇(⟨x_t, θ_{t+1}⟩) x_t x_tᵀ,   W_1 = λI,

and the comparison point θ̄_{t+1} = argmin_{‖θ‖≤S} ℓ(θ; x_t, 0) + ℓ(θ; x_t, 1)
+ ½ ‖θ − θ_{t+1}‖²_{W_t}, which drives the data-dependent radius

    L_t = Σ_s [2(1 + S)(ℓ(θ̄_{s+1}; x_s, r_s) − ℓ(θ_{s+1}; x_s, r_s)) − ½ ‖θ_{s+1} − θ̄_{s+1}‖_{W_s}],
    γ_t = √λ/2 + (2/√λ) log(2 √(1 + t/(4λ)) / δ),
    β_t² = 2λS² + (1 + S)² γ_t + L_t,

and the arm maximises μ(⟨x, θ_t⟩) + β_t ‖x‖_{W_t⁻¹} (the bonus form of the authors'
public implementation). Each proximal problem depends on θ only through ⟨x, θ⟩, so it
is solved exactly: θ = θ_c − a W⁻¹x with a scalar root a = ℓ'(⟨x, θ_c⟩ − a‖x‖²_{W⁻¹}),
and, when that leaves the ball, with a Lagrange multiplier ν for ‖θ‖ = S. ECOLog's
analysis is for the logistic link; other families are accepted (same formulas).
The authors' code stops with an error when the data-dependent condition
μ̇(⟨x, θ̄⟩) ≤ 2 μ̇(⟨x, θ⟩) fails; here such rounds are counted in ``diagnostics()``.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from dpglm._validation import check_positive, check_probability, check_round_order
from dpglm.glm import GLMFamily, get_family
from dpglm.policies.base import Policy

__all__ = ["ECOLog", "prox_step"]


def _scalar_root(family: GLMFamily, z0: float, q: float, r: float, scale: float) -> float:
    """Root a of h(a) = a − scale·(μ(z0 − a q) − r), increasing in a (safeguarded Newton).

    ``scale``·(μ − r) is the derivative of the per-sample loss in z: ℓ(·; r) has
    scale = 1; ℓ(·; 0) + ℓ(·; 1) = 2ℓ(·; ½) has scale = 2, r = ½.
    """
    mu, dmu = family.mu, family.dmu
    # μ ∈ (0, R): the root lies in [scale·(0 − r), scale·(R − r)].
    lo, hi = -scale * r - 1e-12, scale * (family.reward_bound - r) + 1e-12
    a = min(max(scale * (float(mu(np.asarray(z0, dtype=np.float64))) - r), lo), hi)
    for _ in range(100):
        z = z0 - a * q
        h = a - scale * (float(mu(np.asarray(z, dtype=np.float64))) - r)
        if h > 0:
            hi = a
        else:
            lo = a
        if abs(h) <= 1e-13:
            break
        a_new = a - h / (1.0 + scale * q * float(dmu(np.asarray(z, dtype=np.float64))))
        a = a_new if lo < a_new < hi else 0.5 * (lo + hi)
        if hi - lo <= 1e-15:
            break
    return a


def prox_step(
    family: GLMFamily,
    x: np.ndarray,
    center: np.ndarray,
    W: np.ndarray,
    W_inv: np.ndarray,
    radius: float,
    *,
    reward: float,
    scale: float = 1.0,
) -> np.ndarray:
    """argmin_{‖θ‖≤radius} scale·ℓ(θ; x, reward) + ½‖θ − center‖²_W, exactly.

    Unconstrained, θ = center − a W⁻¹x with the scalar root a. Outside the ball, the
    KKT point is θ(ν) = (W + νI)⁻¹(W·center − a x) with ‖θ(ν)‖ = radius; ‖θ(ν)‖ is
    non-increasing in ν, found by bisection on log ν in the eigenbasis of W.
    """
    Wx = W_inv @ x
    q = float(x @ Wx)
    a = _scalar_root(family, float(x @ center), q, reward, scale)
    theta = center - a * Wx
    if theta @ theta <= radius * radius:
        return theta
    lam, Q = np.linalg.eigh(W)
    xt, wc = Q.T @ x, lam * (Q.T @ center)

    def solve(nu: float) -> np.ndarray:
        inv = 1.0 / (lam + nu)
        a_nu = _scalar_root(family, float(xt @ (wc * inv)), float(xt @ (xt * inv)), reward, scale)
        return (wc - a_nu * xt) * inv

    lo, hi = 0.0, 1.0
    t_hi = solve(hi)
    while t_hi @ t_hi > radius * radius:
        lo, hi = hi, 10.0 * hi
        t_hi = solve(hi)
    for _ in range(200):
        mid = math.sqrt(lo * hi) if lo > 0 else 0.5 * hi
        t_mid = solve(mid)
        if t_mid @ t_mid > radius * radius:
            lo = mid
        else:
            hi, t_hi = mid, t_mid
        if hi - lo <= 1e-12 * hi:
            break
    return Q @ t_hi


class ECOLog(Policy):
    """adaECOLog of Faury et al. (2022): O(d²) per round (a d×d eigh only on the sphere).

    Parameters
    ----------
    family : GLMFamily or str
        The logistic link is the one ECOLog is analysed for.
    d : int
    S : float > 0
        Known bound on ‖θ*‖ (the estimator's constraint set).
    delta : float in (0, 1)
    lam : float > 0
        λ of W_1 = λI; default 10, the value in the code the paper's comparison builds on
        (the authors' own default is 1).
    reward_bound : float
    """

    name = "ECOLog"

    def __init__(
        self,
        family: GLMFamily | str,
        d: int,
        *,
        S: float,
        delta: float,
        lam: float = 10.0,
        reward_bound: float = 1.0,
    ) -> None:
        super().__init__(d, reward_bound=reward_bound)
        self.family = get_family(family)
        S = check_positive("S", S)
        delta = check_probability("delta", delta)
        lam = check_positive("lam", lam)
        self.S, self.delta, self.lam = float(S), float(delta), float(lam)
        self.W = self.lam * np.eye(self.d)
        self.W_inv = np.eye(self.d) / self.lam
        self.theta = np.zeros(self.d)
        self.cum_loss = 0.0
        self.t = 0  # rounds chosen so far
        self.condition_failures = 0
        self._last: np.ndarray | None = None

    def radius(self) -> float:
        """β_t (Faury et al. 2022, data-dependent radius of the no-warm-up algorithm)."""
        lam, t = self.lam, self.t
        gamma = math.sqrt(lam) / 2.0 + 2.0 / math.sqrt(lam) * math.log(
            2.0 * math.sqrt(1.0 + t / (4.0 * lam)) / self.delta
        )
        beta2 = 2.0 * lam * self.S**2 + (1.0 + self.S) ** 2 * gamma + self.cum_loss
        return math.sqrt(max(beta2, 0.0))

    def choose(self, arms: np.ndarray) -> int:
        """argmax μ(⟨x, θ_t⟩) + β_t ‖x‖_{W_t⁻¹}."""
        arms = self._check_arms(arms)
        check_round_order(self._last, "choose")
        self.t += 1
        widths = np.sqrt(np.einsum("ki,ki->k", arms @ self.W_inv, arms))
        index = self.family.mu(arms @ self.theta) + self.radius() * widths
        choice = int(np.argmax(index))
        self._last = arms[choice].copy()
        return choice

    def _loss(self, theta: np.ndarray, x: np.ndarray, r: float) -> float:
        z = np.asarray(x @ theta, dtype=np.float64)
        return float(self.family.log_partition(z) - r * z)

    def observe(self, reward: float) -> None:
        """Online step for θ_{t+1}, θ̄_{t+1}, radius statistics, and W_{t+1}."""
        check_round_order(self._last, "observe")
        r = self._check_reward(reward)
        x, self._last = cast(np.ndarray, self._last), None  # not None: check_round_order
        half = 0.5 * self.reward_bound
        theta = prox_step(self.family, x, self.theta, self.W, self.W_inv, self.S, reward=r)
        theta_bar = prox_step(
            self.family, x, theta, self.W, self.W_inv, self.S, reward=half, scale=2.0
        )
        diff = theta - theta_bar
        disc = math.sqrt(max(float(diff @ self.W @ diff), 0.0))
        self.cum_loss += 2.0 * (1.0 + self.S) * (
            self._loss(theta_bar, x, r) - self._loss(theta, x, r)
        ) - 0.5 * disc
        sens = float(self.family.dmu(np.asarray(x @ theta, dtype=np.float64)))
        if float(self.family.dmu(np.asarray(x @ theta_bar, dtype=np.float64))) > 2.0 * sens:
            self.condition_failures += 1
        Wx = self.W_inv @ x
        self.W_inv -= sens * np.outer(Wx, Wx) / (1.0 + sens * (x @ Wx))
        self.W += sens * np.outer(x, x)
        self.theta = theta

    def diagnostics(self) -> dict[str, int]:
        """Rounds where the data-dependent condition μ̇(⟨x, θ̄⟩) ≤ 2μ̇(⟨x, θ⟩) failed."""
        return {"condition_failures": self.condition_failures}
