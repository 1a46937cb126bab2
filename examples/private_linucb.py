"""Joint-DP LinUCB (Shariff & Sheffet 2018, Alg. 1) from the public ``accounting`` and ``mechanisms`` API only.

The proof that a user can plug the mechanisms into an algorithm of their own:
a ``Ledger`` holds the budget, one ``BinaryTreeMechanism`` releases
M_t = Σ_{s≤t} z_s z_sᵀ with z_s = (x_s, y_s) (Gram matrix and reward vector in
one symmetric matrix, Shariff & Sheffet 2018, §4.2), and the policy reads only
``Release`` values. Joint DP follows from the billboard lemma: the arm shown to
user t depends on other users only through the released M_{t−1}.

Run ``python examples/private_linucb.py`` for a short demo and the ledger report.
"""

from __future__ import annotations

import numpy as np

from accounting import Account, ApproxDP, Ledger
from mechanisms import BinaryTreeMechanism


def private_linucb(contexts, reward, account: Account, rng: np.random.Generator, *, alpha: float = 0.05) -> np.ndarray:
    """Play T rounds on ``contexts`` (T, K, d), ‖x‖ ≤ 1, rewards |y| ≤ 1, ‖θ*‖ ≤ 1; return the chosen arms (T,).

    ``reward(t, k)`` returns the reward of arm k at round t. ‖z zᵀ‖_F = ‖z‖² ≤ 2 and
    z zᵀ is PSD, so replace-one sensitivity is Δ = 2√2 (``psd=True``: elements up
    to Δ/√2). The tree spends all of ``account`` once, before the first round.
    """
    horizon, _, d = contexts.shape
    tree = BinaryTreeMechanism(account, horizon, (d + 1, d + 1), 2 * np.sqrt(2), rng, psd=True)
    scale = tree.sigma * np.sqrt(tree.depth)  # std bound of every entry of any prefix-sum noise
    log_term = np.log(2 * horizon / alpha)
    shift = scale * (4 * np.sqrt(d + 1) + 2 * log_term)  # ‖noise‖₂ ≤ shift w.p. 1 − α (paper §J.3)
    noise_u = scale * (np.sqrt(d) + np.sqrt(2 * log_term))  # ‖noise in u‖₂ bound
    released = np.zeros((d + 1, d + 1))
    chosen = np.empty(horizon, dtype=int)
    for t in range(horizon):
        v_inv = np.linalg.inv(released[:d, :d] + 2 * shift * np.eye(d))  # ⪰ shift·I w.p. 1 − α
        theta = v_inv @ released[:d, d]
        # Confidence radius in Shariff & Sheffet's (ρ_min, ρ_max, γ) form: ρ_min = shift, ρ_max = 3·shift,
        # γ = noise_u, ‖θ*‖ ≤ 1, reward noise ½-sub-Gaussian.
        beta = (0.5 * np.sqrt(2 * np.log(2 / alpha) + d * np.log(3 + t / (d * shift)))
                + np.sqrt(3 * shift) + noise_u / np.sqrt(shift))
        arms = contexts[t]
        width = np.sqrt(np.maximum(np.einsum("kd,de,ke->k", arms, v_inv, arms), 0.0))
        chosen[t] = int(np.argmax(arms @ theta + beta * width))
        z = np.append(arms[chosen[t]], reward(t, chosen[t]))
        released = np.asarray(tree.append(np.outer(z, z)).value)
    return chosen


def main(horizon: int = 2000, d: int = 3, n_arms: int = 10, epsilon: float = 4.0, delta: float = 1e-5,
         seed: int = 0) -> np.ndarray:
    """Demo: arms uniform in the unit ball, ‖θ*‖ = 1/2, y = ⟨θ*, x⟩ + U[−½, ½]; print regret and the ledger."""
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(horizon, n_arms, d))
    radii = rng.uniform(size=(horizon, n_arms, 1)) ** (1 / d)
    contexts = directions / np.linalg.norm(directions, axis=2, keepdims=True) * radii
    theta = rng.normal(size=d)
    theta *= 0.5 / np.linalg.norm(theta)
    means = contexts @ theta
    ledger = Ledger(ApproxDP(epsilon, delta))
    account = ledger.split({"linucb": 1}, currency={"linucb": "zcdp"})["linucb"]
    chosen = private_linucb(contexts, lambda t, k: means[t, k] + rng.uniform(-0.5, 0.5), account, rng)
    regret = np.cumsum(means.max(axis=1) - means[np.arange(horizon), chosen])
    print(f"T={horizon}: private LinUCB regret {regret[-1]:.1f}, "
          f"uniform play {np.sum(means.max(axis=1) - means.mean(axis=1)):.1f}")
    print(ledger.report())
    return regret


if __name__ == "__main__":
    main()
