"""The batched GLM bandit: B-GLinCB (Sawarni et al. 2024) and the shuffle-DP Algorithm 1.

One core, :class:`BatchedGLMBandit`, runs the batched loop of paper §5 (Algorithm 1) /
Sawarni et al. (2024, B-GLinCB) on a known horizon cut, before the first round, into
at most ``⌈ln ln T⌉ + 1`` batches (:func:`batch_schedule`):

* **batch 1 (warm-up)** plays, every round, an arm drawn from the G-optimal design of
  that round's arm set (paper §4.2); at its end it forms ``V = Σ_{B₁} x xᵀ + λI`` and the
  estimate ``θ̂₁`` from batch-1 data only;
* **batch k ≥ 2** first eliminates, in each arm set, every arm whose ``UCB_j`` falls
  below the best ``LCB_j`` for some earlier batch j (paper §5 "Confidence bounds"),
  then scales the survivors ``x ↦ √(μ̇(⟨x, θ̂₁⟩)/β(x))·x`` with
  ``β(x) = exp(R·min(2S, w₁(x)))`` (paper §5 "Arm scaling") and plays an arm drawn from
  the G-optimal design of the scaled survivors, so that the design's outer products
  are exactly the leaves ``μ̇(⟨x, θ̂₁⟩)/β(x)·x xᵀ`` of ``H_k`` (paper eq. (10), App. F.1);
  at its end it forms ``H_k = Σ_{B_k} leaves + λI`` and ``θ̂_k`` from batch-k data only.

The two policies differ only in where ``V``/``H_k`` and ``θ̂_k`` come from — the two
pluggable ingredients below: exact sums (:class:`ExactDesignSum`) or shuffled vector
summation (:class:`ShuffledDesignSum`, paper App. T); the regularised MLE
(:class:`MLEBatchEstimator`) or a shuffle-private optimiser (paper App. U).
:class:`BGLinCB` is the non-private baseline; :class:`ShuffleDPGLMBandit` the paper's
Algorithm 1 with its budget split in halves (covariance, parameter estimation; §5
"Protocol instantiation") and every batch charged under its own partition key: the
batches hold disjoint users, so they compose in parallel.

Choices we had to make (the algorithm box of Algorithm 1 did not survive extraction;
these are reconstructed from §5, App. E–F and Sawarni et al. 2024):

1. *Number of batches* ``M = ⌈ln ln T⌉ + 1`` (natural logarithms, as Sawarni et al.'s
   code), at least 2; batches that would be empty are dropped.
2. *Schedule* ``B₁ = (c₁α)^{2/3}`` with ``c₁ = κ e^{3S} d² γ²/S``, ``B₂ = α``,
   ``B_k = α√B_{k−1}`` (paper §5 "Batch structure"), α found by bisection so the real
   lengths sum to T, then rounded down at the cumulative end points (the last batch takes
   the remainder, so the integer lengths sum to T exactly). With any realistic κ the
   formula asks ``B₁ > T`` (``e^{3S}`` alone is 8103 at S = 3), so ``B₁`` is **capped**
   at ``⌈T^{2/3}⌉`` by default (a sublinear warm-up; Sawarni et al.'s code uses ``√T``);
   :class:`BatchSchedule` records whether the cap bound.
3. *Confidence widths* ``w₁(x) = γ√κ_w‖x‖_{V⁻¹}`` and ``w_j(x) = γ‖x‖_{H_j⁻¹}`` (j ≥ 2),
   ``β(x) = exp(R·min(2S, w₁(x)))``. The paper's Corollary writes ``κ‖x‖_{V⁻¹}`` with its
   norm defined without the square root (§4); with ``H* ⪰ V/κ`` the square-rooted norm
   gives ``√κ`` (as in Sawarni et al.). γ and κ_w are hyperparameters (the paper's §8
   treats γ, β, λ so): the theory values (App. E.1 ``γ = CRSλ + 4RSν``, κ_w = κ ≈ 226
   for probit at S = 3) make ``β = e^{2S}`` for every arm after a capped warm-up, so
   ``H_k`` is ``λI`` plus leaves ~1/400 of their size and nothing is ever eliminated
   (measured: regret ≈ 0.47 per round, linear). The ``"simulation"`` preset uses γ = 2
   (a two-sigma band per arm) and κ_w = 1; ``"union"`` the union-bound width
   ``γ = √(2 ln(2MT/δ))`` (≈ 5.6 at T = 20000) with κ_w = 1; ``"theory"`` that γ with
   κ_w = κ. Measured (probit, d = 5, T = 20000, 3 runs): B-GLinCB regret 460 at γ = 2
   vs 1200 at γ = 5.6 — the wider band leaves many arms alive, and the G-optimal design
   keeps paying for them in the last batch.
4. *κ* is the public bound ``1/min_{|z|≤S} μ̇(z)``, never the oracle κ of θ*.
5. *Elimination* applies the earlier batches j (those whose releases were granted) in
   order, each comparing ``UCB_j`` with the largest ``LCB_j`` among the arms still alive:
   the arm attaining it survives, so a set is never emptied by disagreeing noisy
   confidence sets (against the whole set, two sets could eliminate every arm).
6. *The last batch* releases nothing and fits nothing: nothing would use it.
7. *Released matrices* get ``(λ + shift)I`` added, ``shift`` a high-probability bound on
   the operator norm of the release noise, ``σ(2√d + √(2 ln(2M/δ)))`` (Gaussian
   symmetric-matrix bound; the paper's E.1 uses the looser ``σ̃(4d + 2 ln(2dMT/δ))``),
   and eigenvalues floored at λ before inversion (post-processing; Assumption E.1).
8. *Leaf bound* of ``H_k`` is the public ``max_{|z|≤S} μ̇(z)`` (β ≥ 1), so the
   summation's privacy holds unconditionally; the paper conditions on the event
   ``μ̇/β ≤ 1/κ*`` of probability ``1 − 1/T²`` (App. E.3).
9. *Refusals*: if a batch's covariance or estimate is refused by the ledger, that batch
   adds no confidence set and the policy keeps the estimates it had. If the warm-up's are
   refused, the policy keeps playing the warm-up design, and the next batch's statistics
   (``V`` and ``θ̂``, from that batch's own users) take the warm-up's role.

Speed: within a batch the rule is fixed and contexts are i.i.d., so :meth:`plan` takes
the batch's arm sets up front and computes every round's design in one vectorised
:func:`dpglm.design.g_optimal_design` call (:func:`run_batched_policy` does this);
:meth:`choose` falls back to the single-set computation for arm sets it was not given.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from accounting import ApproxDP, BudgetExceeded, Ledger
from dpglm._validation import check_horizon_left, check_round_order
from dpglm.design import g_optimal_design
from dpglm.envs import ContextualGLMEnv
from dpglm.glm import GLMFamily, get_family, kappa_support
from dpglm.policies.base import Policy, clip_to_unit_ball

__all__ = [
    "BGLinCB",
    "BatchEstimator",
    "BatchSchedule",
    "BatchedGLMBandit",
    "BatchedParameters",
    "DesignSum",
    "ExactDesignSum",
    "MLEBatchEstimator",
    "ShuffleDPGLMBandit",
    "ShufflePGDEstimator",
    "ShuffledDesignSum",
    "batch_partition",
    "batch_schedule",
    "batched_parameters",
    "max_batches",
    "pgd_iterations",
    "run_batched_policy",
]


# -- the schedule -------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchSchedule:
    """Batch lengths fixed before the first round (paper §5 "Batch structure").

    Attributes
    ----------
    lengths : tuple of int
        ``B₁, …, B_M``; they sum to the horizon.
    alpha : float
        The α solving ``Σ_k B_k(α) = T`` (real lengths).
    warmup_formula : float
        ``(c₁α)^{2/3}`` before the cap.
    warmup_capped : bool
        Whether the cap on ``B₁`` bound.
    """

    lengths: tuple[int, ...]
    alpha: float
    warmup_formula: float
    warmup_capped: bool

    @property
    def ends(self) -> np.ndarray:
        """Cumulative end points: batch k holds rounds ``ends[k−1] ≤ t < ends[k]`` (0-based)."""
        return np.cumsum(self.lengths)


def max_batches(horizon: int) -> int:
    """``⌈ln ln T⌉ + 1`` (at least 2): the batch budget of paper §5 / Sawarni et al. (2024)."""
    return max(2, math.ceil(math.log(math.log(max(int(horizon), 3)))) + 1)


def _real_lengths(alpha: float, n_batches: int, warmup_scale: float, warmup_cap: float) -> list[float]:
    lengths = [min((warmup_scale * alpha) ** (2.0 / 3.0), warmup_cap), alpha]
    while len(lengths) < n_batches:
        lengths.append(alpha * math.sqrt(lengths[-1]))
    return lengths[:n_batches]


def batch_schedule(
    horizon: int, *, warmup_scale: float, warmup_cap: float | None = None, n_batches: int | None = None
) -> BatchSchedule:
    """The batch lengths ``B₁ = min((c₁α)^{2/3}, cap)``, ``B₂ = α``, ``B_k = α√B_{k−1}``.

    Parameters
    ----------
    horizon : int >= 1
        T.
    warmup_scale : float > 0
        c₁ (paper §5: ``κ e^{3S} d² γ²/S``).
    warmup_cap : float >= 1, optional
        Upper bound on ``B₁``; default ``⌈T^{2/3}⌉`` (module docstring, choice 2).
    n_batches : int >= 1, optional
        M; default :func:`max_batches`.

    Returns
    -------
    BatchSchedule
        α solved by bisection so the real lengths sum to T; integer lengths are the
        differences of the rounded-down cumulative end points, empty batches dropped.
    """
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise ValueError(f"horizon must be an int >= 1, got {horizon!r}")
    horizon = int(horizon)
    warmup_scale = float(warmup_scale)
    if not (math.isfinite(warmup_scale) and warmup_scale > 0):
        raise ValueError(f"warmup_scale must be a finite number > 0, got {warmup_scale}")
    cap = float(math.ceil(horizon ** (2.0 / 3.0))) if warmup_cap is None else float(warmup_cap)
    if not (math.isfinite(cap) and cap >= 1):
        raise ValueError(f"warmup_cap must be a finite number >= 1, got {warmup_cap}")
    m = max_batches(horizon) if n_batches is None else n_batches
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"n_batches must be an int >= 1, got {n_batches!r}")
    m = int(m)
    if m == 1:
        return BatchSchedule((horizon,), float(horizon), float(horizon), False)
    lo, hi = 0.0, float(horizon)  # Σ lengths(α) is increasing in α and ≥ T at α = T
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if sum(_real_lengths(mid, m, warmup_scale, cap)) < horizon:
            lo = mid
        else:
            hi = mid
    alpha = hi
    real = _real_lengths(alpha, m, warmup_scale, cap)
    ends = np.minimum(np.floor(np.cumsum(real) + 1e-9).astype(np.int64), horizon)
    ends[-1] = horizon
    lengths = np.diff(np.concatenate([[0], ends]))
    formula = (warmup_scale * alpha) ** (2.0 / 3.0)
    return BatchSchedule(tuple(int(b) for b in lengths if b > 0), alpha, formula, formula > cap)


# -- parameters ---------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchedParameters:
    """Every constant the batched loop decides with (paper §5, App. E.1; module docstring).

    Parameters
    ----------
    lam : float > 0
        λ: ridge of ``V``, ``H_k`` and of every fit.
    gamma : float > 0
        γ in the widths ``w₁ = γ√κ‖x‖_{V⁻¹}``, ``w_j = γ‖x‖_{H_j⁻¹}``.
    kappa : float >= 1
        Public κ bound (``1/min_{|z|≤S} μ̇(z)``); enters the schedule's c₁.
    width_kappa : float >= 1
        κ_w in the warm-up width ``w₁ = γ√κ_w‖x‖_{V⁻¹}`` and in β (choice 3).
    radius : float > 0
        S: fits are constrained to ``‖θ‖ ≤ S``; β's cap is ``2S``.
    design_ridge : float > 0
        ε of the regularised Kiefer–Wolfowitz lemma (paper §4.2).
    design_tol : float > 0
        Stop the design once ``max ‖x‖²_{A⁻¹} ≤ d(1 + tol)``.
    warmup_scale : float > 0
        c₁ of ``B₁ = (c₁α)^{2/3}``.
    warmup_cap : float >= 1 or None
        Cap on ``B₁`` (None: ``⌈T^{2/3}⌉``).
    """

    lam: float
    gamma: float
    kappa: float
    width_kappa: float
    radius: float
    design_ridge: float = 1e-6
    design_tol: float = 1e-2
    warmup_scale: float = 1.0
    warmup_cap: float | None = None

    def __post_init__(self) -> None:
        for name in ("lam", "gamma", "radius", "design_ridge", "design_tol", "warmup_scale"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        for name in ("kappa", "width_kappa"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 1):
                raise ValueError(f"{name} must be a finite number >= 1, got {value!r}")

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (for results files)."""
        return asdict(self)


def batched_parameters(
    family: GLMFamily | str, d: int, horizon: int, S: float, *, delta: float = 0.02, gamma: float | None = None,
    lam: float = 1.0, preset: str = "simulation",
) -> BatchedParameters:
    """Constants of the batched loop (paper §8 treats λ, γ, β as hyperparameters).

    ``preset="simulation"``: γ = 2, κ_w = 1. ``"union"``: γ a Gaussian width with a union
    bound over the T rounds and M batches, ``√(2 ln(2MT/δ))`` (≈ 5.6 at T = 20000,
    δ = 0.02), κ_w = 1. ``"theory"``: that γ and κ_w = κ (module docstring, choice 3).
    ``gamma`` overrides the preset's γ. Always λ = 1 (unless given), κ the public bound,
    ``c₁ = κ e^{3S} d² γ²/S`` (paper §5), which the default cap then overrides.
    """
    family = get_family(family)
    for name, value in (("d", d), ("horizon", horizon)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    S = float(S)
    if not (math.isfinite(S) and S > 0):
        raise ValueError(f"S must be a finite number > 0, got {S}")
    delta = float(delta)
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    kappa = kappa_support(family, S)
    if preset not in ("simulation", "union", "theory"):
        raise ValueError(f"preset must be 'simulation', 'union' or 'theory', got {preset!r}")
    if gamma is None:
        gamma = 2.0 if preset == "simulation" else math.sqrt(2.0 * math.log(2.0 * max_batches(horizon) * horizon / delta))
    warmup_scale = kappa * math.exp(3.0 * S) * d**2 * gamma**2 / S
    return BatchedParameters(lam=float(lam), gamma=float(gamma), kappa=kappa,
                             width_kappa=kappa if preset == "theory" else 1.0, radius=S,
                             warmup_scale=warmup_scale)


# -- pluggable ingredients ------------------------------------------------------------------
class DesignSum(Protocol):
    """Forms a batch's design matrix ``Σ leaves + λI`` (exact) or releases it (private)."""

    def matrix(self, leaves: np.ndarray, batch: int, bound: float) -> np.ndarray | None:
        """``Σ_t leaves[t]`` plus the ridge, or ``None`` if the release was refused.

        ``leaves`` has shape (n, d, d), entries in ``[−bound, bound]``; ``batch`` is the
        1-based batch index (the parallel-composition key of a private release).
        """


class BatchEstimator(Protocol):
    """Estimates θ* from one batch's data alone, over ``‖θ‖ ≤ S``."""

    def fit(self, X: np.ndarray, y: np.ndarray, batch: int) -> np.ndarray | None:
        """The estimate, or ``None`` if it was refused (budget)."""


def _floored_inverse(matrix: np.ndarray, floor: float) -> np.ndarray:
    """Inverse after flooring the eigenvalues at ``floor`` (post-processing, Assumption E.1)."""
    w, q = np.linalg.eigh(0.5 * (matrix + matrix.T))
    return (q / np.maximum(w, floor)) @ q.T


class ExactDesignSum:
    """Exact ``Σ leaves + λI`` (non-private B-GLinCB, Sawarni et al. 2024)."""

    def __init__(self, lam: float) -> None:
        self.lam = float(lam)

    def matrix(self, leaves: np.ndarray, batch: int, bound: float) -> np.ndarray:
        d = leaves.shape[-1]
        return leaves.sum(axis=0) + self.lam * np.eye(d)


class MLEBatchEstimator:
    """Regularised MLE ``argmin_{‖θ‖≤S} L(θ; λ)`` on one batch (paper §4 loss; non-private)."""

    def __init__(self, family: GLMFamily, lam: float, radius: float) -> None:
        self.family, self.lam, self.radius = family, float(lam), float(radius)

    def fit(self, X: np.ndarray, y: np.ndarray, batch: int) -> np.ndarray:
        return self.family.fit_mle(X, y, lam=self.lam, radius=self.radius)


@functools.lru_cache(maxsize=256)
def _round_epsilon(epsilon: float, delta: float, iterations: int, round_delta: float) -> float:
    """Cached :func:`mechanisms.optim.shuffle_pgd.calibrate_round_epsilon`."""
    from mechanisms.optim.shuffle_pgd import calibrate_round_epsilon

    return calibrate_round_epsilon(epsilon, delta, iterations, round_delta=round_delta, tol=1e-4)


def batch_partition(batch: int) -> str:
    """The parallel-composition key of batch ``batch`` (1-based)."""
    return f"batch-{batch}"


class ShuffledDesignSum:
    """``V`` / ``H_k`` by shuffled vector summation of the leaves (paper §5, App. T).

    Each batch's release costs the whole account budget ``ApproxDP(ε, δ)`` under the
    partition key ``batch-k``: batches hold disjoint users, so the ledger composes them
    by max. The protocol's noise is calibrated by the exact shuffle accountant
    (:class:`mechanisms.shuffle.ShuffleVectorSum`); the released sum gets
    ``(λ + shift)I`` added, ``shift = σ(2√d + √(2 ln(2M/δ_w)))`` with σ the per-entry
    noise bound (module docstring, choice 7).

    Parameters
    ----------
    account : accounting.Account
        ``"approx"`` currency; its budget is the per-batch cost.
    lam : float > 0
    rng : numpy.random.Generator
    n_batches : int
        M (enters the shift's union bound).
    width_delta : float in (0, 1)
        δ_w of the shift's high-probability bound.
    levels : int, optional
        Rounding resolution g of the protocol (default: the protocol's).
    """

    def __init__(self, account, lam: float, rng: np.random.Generator, *, n_batches: int, width_delta: float,
                 levels: int | None = None) -> None:
        budget = account.budget
        if not isinstance(budget, ApproxDP):
            raise TypeError(f"account must hold an ApproxDP budget, got {type(budget).__name__}")
        self.account, self.lam, self.rng = account, float(lam), rng
        self.epsilon, self.delta = float(budget.eps), float(budget.delta)
        self.n_batches, self.width_delta, self.levels = int(n_batches), float(width_delta), levels
        self.releases: dict[int, Any] = {}
        self.noise_sd: dict[int, float] = {}

    def matrix(self, leaves: np.ndarray, batch: int, bound: float) -> np.ndarray | None:
        from mechanisms.shuffle import ShuffleVectorSum

        n, d = leaves.shape[0], leaves.shape[-1]
        mechanism = ShuffleVectorSum(  # noise bits: the accountant's (cached) calibration
            self.account, max(n, 2), (d, d), bound, self.rng, epsilon=self.epsilon, delta=self.delta,
            levels=self.levels,
        )
        if n < 2:  # the protocol needs two users; a zero dummy leaf changes no one's data
            leaves = np.concatenate([leaves, np.zeros((2 - n, d, d))])
        try:
            release = mechanism.release(leaves, partition=batch_partition(batch))
        except BudgetExceeded:
            return None
        sd = math.sqrt(mechanism.variance_bound())
        shift = sd * (2.0 * math.sqrt(d) + math.sqrt(2.0 * math.log(2.0 * self.n_batches / self.width_delta)))
        self.releases[batch], self.noise_sd[batch] = release, sd
        return np.asarray(release.value) + (self.lam + shift) * np.eye(d)


def pgd_iterations(n: int, epsilon: float, delta: float, d: int, *, max_iterations: int = 300) -> int:
    """P_GD's iteration count ``ε²n²/(d ln³(nd/δ))`` (paper §5 "Protocol instantiation"), in [1, max]."""
    iterations = epsilon**2 * n**2 / (d * math.log(n * d / delta) ** 3)
    return int(min(max(1, math.floor(iterations)), max_iterations))


NOISE_TARGET = 0.03
"""Noise level (in θ units) the preconditioned P_GD's damping aims at (ShufflePGDEstimator)."""


class ShufflePGDEstimator:
    """``θ̂_k`` by shuffle-private projected gradient descent on batch k (paper §5, App. U).

    Runs :class:`mechanisms.optim.shuffle_pgd.ShufflePGD` on the per-sample loss
    ``ℓ(θ, x, r) + λ/(2n)‖θ‖²`` (App. E "Convention bridging P_GD"), over ``‖θ‖ ≤ S``,
    charging the whole account budget under the batch's partition key. Choices: the
    clip is the exact gradient bound ``R + λS/n`` (``|μ − r| ≤ R``, ‖x‖ ≤ 1), so clipping
    never binds (the paper's ``L = RS + S + Sλ/B_k``, App. E.4, is looser); iterations
    :func:`pgd_iterations` capped at ``max_iterations`` (compute); per-round δ₀ =
    δ/(2·iterations) and ε₀ the largest whose PLD composition meets (ε, δ); start at
    the previous estimate (public: a release) or 0.

    Convergence (``precondition=True``, default). The mean objective's Hessian is
    ``(1/n)Σ μ̇(⟨x, θ⟩) x xᵀ + λ/n``, whose condition number (up to κ·d) made plain P_GD
    with the subgradient step ``2S/(L√T)`` stop far from the MLE (0.85–1.5 at
    ε = 2·10⁴ after 300 iterations). The batch's released design matrix ``D`` (V with
    unit leaves in the warm-up batch, ``H_k`` with leaves ``μ̇(⟨x, θ_w⟩)/β`` after it) is
    public once released, so P_GD is run preconditioned by ``M = n·(cD)⁻¹`` (c = max μ̇
    for unit leaves, so ``M^{1/2}∇²M^{1/2} ⪯ I``; c = 1 for H_k, whose leaves carry μ̇),
    step η = 1 (Newton-like), warm-started at the previous batch's estimate, and the
    output is the average of the second half of the iterates (the first half converges,
    the second averages the summation noise). Post-processing: privacy is unchanged.

    Parameters
    ----------
    family : GLMFamily
    lam, radius : float
    account : accounting.Account
        ``"approx"`` currency; its budget is each batch's cost.
    rng : numpy.random.Generator
    max_iterations : int
    """

    def __init__(self, family: GLMFamily, lam: float, radius: float, account, rng: np.random.Generator, *,
                 max_iterations: int = 300, precondition: bool = True, noise_target: float = NOISE_TARGET) -> None:
        self.uses_design = bool(precondition)
        self.noise_target = float(noise_target)
        budget = account.budget
        if not isinstance(budget, ApproxDP):
            raise TypeError(f"account must hold an ApproxDP budget, got {type(budget).__name__}")
        self.family, self.lam, self.radius = family, float(lam), float(radius)
        self.account, self.rng, self.max_iterations = account, rng, int(max_iterations)
        self.epsilon, self.delta = float(budget.eps), float(budget.delta)
        self.releases: dict[int, Any] = {}
        self._last: np.ndarray | None = None

    def fit(self, X: np.ndarray, y: np.ndarray, batch: int, *, design: np.ndarray | None = None,
            unit_leaves: bool = False) -> np.ndarray | None:
        from mechanisms.optim.shuffle_pgd import ShufflePGD

        n, d = X.shape
        if n < 2:
            return None
        lam_n = self.lam / n
        family = self.family

        def gradient(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
            return (family.mu(X @ theta) - y)[:, None] * X + lam_n * theta

        iterations = pgd_iterations(n, self.epsilon, self.delta, d, max_iterations=self.max_iterations)
        round_delta = self.delta / (2.0 * iterations)
        round_epsilon = _round_epsilon(self.epsilon, self.delta, iterations, round_delta)
        pgd = ShufflePGD(self.account, gradient, self.rng,
                         clip=float(family.reward_bound) + lam_n * self.radius, radius=self.radius)
        options: dict[str, Any] = {}
        if design is not None:
            from mechanisms.shuffle_accountant import calibrate_noise_bits, default_levels

            curvature = float(np.max(family.dmu(np.linspace(-self.radius, self.radius, 20001)))) if unit_leaves else 1.0
            w, q = np.linalg.eigh(0.5 * (design + design.T))
            w = curvature * np.maximum(w, self.lam)
            # Damping ν from the public noise level: the averaged iterate's noise is about
            # √(v·d/K)/(λ_min(cD) + ν) (v the summation's per-coordinate noise variance of
            # the gradient sum, K the iterates averaged); ν keeps it at most NOISE_TARGET.
            levels = default_levels(n, d)
            bits = calibrate_noise_bits(n, float(round_epsilon), float(round_delta), levels, coordinates=d)
            clip = float(family.reward_bound) + lam_n * self.radius
            variance = (clip / levels) ** 2 * n * (1.0 + bits) / 4.0
            kept = iterations - iterations // 2
            nu = max(0.0, math.sqrt(variance * d / kept) / self.noise_target - float(w.min()))
            options = {"preconditioner": n * ((q / (w + nu)) @ q.T), "lr": 1.0, "average": "suffix"}
        try:
            release = pgd.fit(X, y, iterations=iterations, round_epsilon=round_epsilon, round_delta=round_delta,
                              delta=self.delta, theta0=self._last, partition=batch_partition(batch), **options)
        except BudgetExceeded:
            return None
        self.releases[batch] = release
        self._last = np.asarray(release.value, dtype=float)
        return self._last


# -- the loop -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _ConfidenceSet:
    """``⟨x, θ_j⟩ ± multiplier·‖x‖_{M_j⁻¹}`` of one granted batch."""

    theta: np.ndarray
    inverse: np.ndarray
    multiplier: float

    def bounds(self, arms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        centre = arms @ self.theta
        width = self.multiplier * np.sqrt(np.maximum(np.einsum("...kd,de,...ke->...k", arms, self.inverse, arms), 0))
        return centre - width, centre + width


class BatchedGLMBandit(Policy):
    """The batched loop of paper Alg. 1 / Sawarni et al.'s B-GLinCB (module docstring).

    Parameters
    ----------
    family : GLMFamily or str
    d, horizon : int
    params : BatchedParameters
    design_sum : DesignSum
        Source of ``V`` and ``H_k``.
    estimator : BatchEstimator
        Source of ``θ̂_k``.
    rng : numpy.random.Generator
        Draws the arm from each round's design (one uniform per round).
    """

    name = "batched"

    def __init__(self, family: GLMFamily | str, d: int, horizon: int, params: BatchedParameters, *,
                 design_sum: DesignSum, estimator: BatchEstimator, rng: np.random.Generator) -> None:
        self.family = get_family(family)
        super().__init__(d, reward_bound=self.family.reward_bound)
        if not isinstance(params, BatchedParameters):
            raise TypeError(f"params must be BatchedParameters, got {type(params).__name__}")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        self.params = params
        self.horizon = int(horizon)
        self.schedule = batch_schedule(horizon, warmup_scale=params.warmup_scale, warmup_cap=params.warmup_cap)
        self._ends = self.schedule.ends
        self.design_sum, self.estimator, self._rng = design_sum, estimator, rng
        grid = np.linspace(-params.radius, params.radius, 20001)
        self.leaf_bound = float(np.max(self.family.dmu(grid)))  # public sup of μ̇ (choice 8)
        self.t = 0
        self.batch = 1
        self.theta_warmup: np.ndarray | None = None
        self._v_inverse: np.ndarray | None = None
        self.confidence_sets: list[tuple[int, _ConfidenceSet]] = []
        self.estimates: dict[int, np.ndarray] = {}
        self._x: list[np.ndarray] = []
        self._y: list[float] = []
        self._w: list[float] = []
        self._pending: tuple[np.ndarray, float] | None = None
        self._plan: tuple[int, np.ndarray, np.ndarray] | None = None  # (start t, arm sets, weights)
        self.counts = {"granted": 0, "refused": 0, "planned_rounds": 0, "unplanned_rounds": 0}

    # -- the batch's rule, vectorised over arm sets ----------------------------------------------
    @property
    def rounds_left_in_batch(self) -> int:
        """Rounds from the current one to the end of the current batch."""
        return int(self._ends[self.batch - 1] - self.t)

    def _scaled_design(self, arm_sets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The design weights ``(n, K)`` of the current rule and the leaf weights ``(n, K)``."""
        p = self.params
        n, k, _ = arm_sets.shape
        if self.theta_warmup is None:  # warm-up rule (batch 1, or every batch after a refused warm-up)
            weights = np.ones((n, k))
            design = g_optimal_design(arm_sets, ridge=p.design_ridge, tol=p.design_tol)
            return design.weights, weights
        alive = np.ones((n, k), dtype=bool)
        for _, cs in self.confidence_sets:  # elimination (paper §5 "Confidence bounds")
            lcb, ucb = cs.bounds(arm_sets)
            alive &= ucb >= np.where(alive, lcb, -np.inf).max(axis=-1, keepdims=True)
        warm_width = p.gamma * math.sqrt(p.width_kappa) * np.sqrt(
            np.maximum(np.einsum("nkd,de,nke->nk", arm_sets, self._v_inverse, arm_sets), 0))
        beta = np.exp(self.reward_bound * np.minimum(2.0 * p.radius, warm_width))
        weights = self.family.dmu(arm_sets @ self.theta_warmup) / beta  # paper §5 "Arm scaling"
        design = g_optimal_design(np.sqrt(weights)[..., None] * arm_sets, available=alive,
                                  ridge=p.design_ridge, tol=p.design_tol)
        return design.weights, weights

    def plan(self, arm_sets: np.ndarray) -> None:
        """Precompute the designs of the next rounds of the current batch (one vectorised call).

        ``arm_sets`` (n, K, d) are the arm sets of rounds ``t, …, t+n−1``, all in the current
        batch (n ≤ :attr:`rounds_left_in_batch`). :meth:`choose` uses them when it is shown
        the same arm set at the same round.
        """
        arm_sets = np.asarray(arm_sets, dtype=float)
        if arm_sets.ndim != 3 or arm_sets.shape[-1] != self.d or len(arm_sets) < 1:
            raise ValueError(f"arm_sets must have shape (n, K, {self.d}) with n >= 1, got {arm_sets.shape}")
        if len(arm_sets) > self.rounds_left_in_batch:
            raise ValueError(f"arm_sets must cover at most the {self.rounds_left_in_batch} rounds left in batch "
                             f"{self.batch}, got {len(arm_sets)}")
        design, weights = self._scaled_design(arm_sets)
        self._plan = (self.t, arm_sets, np.stack([design, weights], axis=1))

    def choose(self, arms: np.ndarray) -> int:
        """Draw an arm from this round's (scaled, eliminated) G-optimal design (paper Alg. 1)."""
        arms = self._check_arms(arms)
        check_round_order(self._pending, "choose")
        check_horizon_left(self.t, self.horizon)
        row = None
        if self._plan is not None:
            start, planned, table = self._plan
            i = self.t - start
            if 0 <= i < len(planned) and planned[i].shape == arms.shape and np.array_equal(planned[i], arms):
                row = table[i]
                self.counts["planned_rounds"] += 1
        if row is None:
            design, weights = self._scaled_design(arms[None])
            row = np.stack([design[0], weights[0]])
            self.counts["unplanned_rounds"] += 1
        cdf = np.cumsum(row[0])
        index = min(int(np.searchsorted(cdf, self._rng.random() * cdf[-1], side="right")), len(arms) - 1)
        self._pending = (clip_to_unit_ball(arms[index]), float(row[1][index]))
        return index

    def observe(self, reward: float) -> None:
        """Record the round; at a batch's end, form its statistics (paper Alg. 1, batch end)."""
        if self._pending is None:
            raise ValueError("choose(arms) must be called before observe(reward)")
        r = self._check_reward(reward)
        x, w = self._pending
        self._pending = None
        self._x.append(x)
        self._y.append(r)
        self._w.append(w)
        self.t += 1
        if self.t == self._ends[self.batch - 1]:
            if self.batch < len(self._ends):  # the last batch's statistics would never be used
                self._end_batch()
            self.batch += 1
            self._x, self._y, self._w, self._plan = [], [], [], None

    def _end_batch(self) -> None:
        """``V`` (batch 1) or ``H_k`` and ``θ̂_k`` from this batch's data alone; refusals keep the old state."""
        X, y = np.array(self._x), np.array(self._y)
        warm = self.theta_warmup is None
        leaf_weights = np.ones(len(X)) if warm else np.array(self._w)
        bound = 1.0 if warm else self.leaf_bound
        matrix = self.design_sum.matrix(leaf_weights[:, None, None] * np.einsum("ni,nj->nij", X, X), self.batch, bound)
        theta = None
        if matrix is not None:
            if getattr(self.estimator, "uses_design", False):  # the batch's release, a public preconditioner
                theta = self.estimator.fit(X, y, self.batch, design=matrix, unit_leaves=warm)
            else:
                theta = self.estimator.fit(X, y, self.batch)
        if matrix is None or theta is None:
            self.counts["refused"] += 1
            return
        self.counts["granted"] += 1
        theta = np.asarray(theta, dtype=float)
        self.estimates[self.batch] = theta
        inverse = _floored_inverse(matrix, self.params.lam)
        p = self.params
        if warm:
            self.theta_warmup, self._v_inverse = theta, inverse
            self.confidence_sets.append((self.batch, _ConfidenceSet(theta, inverse, p.gamma * math.sqrt(p.width_kappa))))
        else:
            self.confidence_sets.append((self.batch, _ConfidenceSet(theta, inverse, p.gamma)))

    def diagnostics(self) -> dict[str, Any]:
        """Batch lengths, granted/refused batch statistics, planned vs unplanned rounds."""
        out: dict[str, Any] = dict(self.counts)
        out["batch_lengths"] = list(self.schedule.lengths)
        out["warmup_capped"] = self.schedule.warmup_capped
        return out


class BGLinCB(BatchedGLMBandit):
    """Non-private B-GLinCB (Sawarni et al. 2024) on the paper's schedule: exact sums, MLE.

    Parameters
    ----------
    family : GLMFamily or str
    d, horizon : int
    S : float
        Known bound on ‖θ*‖.
    rng : numpy.random.Generator
        Spawned into two streams: the arm draws use the first (the second is what the
        private policy gives its mechanisms), so both policies draw the same uniforms.
    delta : float
    params : BatchedParameters, optional
        Overrides :func:`batched_parameters`.
    """

    name = "B-GLinCB"

    def __init__(self, family: GLMFamily | str, d: int, horizon: int, S: float, rng: np.random.Generator, *,
                 delta: float = 0.02, params: BatchedParameters | None = None) -> None:
        family = get_family(family)
        if params is None:
            params = batched_parameters(family, d, horizon, S, delta=delta)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        choice_rng, _ = rng.spawn(2)
        super().__init__(family, d, horizon, params, design_sum=ExactDesignSum(params.lam),
                         estimator=MLEBatchEstimator(family, params.lam, params.radius), rng=choice_rng)


class ShuffleDPGLMBandit(BatchedGLMBandit):
    """Paper Algorithm 1: the batched loop with shuffled ``V``/``H_k`` and a shuffle-private ``θ̂_k``.

    The ledger is split in halves (paper §5 "Protocol instantiation"): ``covariance``
    (every ``V``/``H_k`` release, ApproxDP(ε/2, δ/2) each) and ``parameter`` (every
    ``θ̂_k``); each batch charges under its own key ``batch-k`` (disjoint users, parallel
    composition), so the whole run is (ε, δ)-shuffle DP.

    Parameters
    ----------
    family : GLMFamily or str
    d, horizon : int
    S : float
    rng : numpy.random.Generator
        Spawned into (arm draws, mechanism noise).
    ledger : accounting.Ledger, optional
        With an ApproxDP budget; default a fresh in-memory ``Ledger(ApproxDP(epsilon, delta))``.
    epsilon, delta : float
        The budget when no ledger is given.
    estimator : callable ``(family, params, account, rng) -> BatchEstimator``, optional
        Builds the parameter estimator on the ``parameter`` account (each fit must charge
        under :func:`batch_partition` of its batch); default :class:`ShufflePGDEstimator`
        (paper App. U).
    params : BatchedParameters, optional
    levels : int, optional
        Rounding resolution of the summation protocol.
    """

    name = "ShuffleDP-GLM"

    def __init__(self, family: GLMFamily | str, d: int, horizon: int, S: float, rng: np.random.Generator, *,
                 estimator=None, ledger: Ledger | None = None, epsilon: float | None = None,
                 delta: float | None = None, params: BatchedParameters | None = None,
                 levels: int | None = None) -> None:
        family = get_family(family)
        if ledger is None:
            if epsilon is None or delta is None:
                raise ValueError("give a ledger, or both epsilon and delta")
            ledger = Ledger(ApproxDP(epsilon, delta))
        elif epsilon is not None or delta is not None:
            raise ValueError("give either a ledger or (epsilon, delta), not both")
        budget = ledger.budget
        if not isinstance(budget, ApproxDP):
            raise TypeError(f"ledger must hold an ApproxDP budget, got {type(budget).__name__}")
        if params is None:
            params = batched_parameters(family, d, horizon, S, delta=float(budget.delta))
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        choice_rng, noise_rng = rng.spawn(2)
        if estimator is None:
            def estimator(family, params, account, rng):
                return ShufflePGDEstimator(family, params.lam, params.radius, account, rng)
        self.ledger = ledger
        self.accounts = ledger.split({"covariance": 1, "parameter": 1},
                                     currency={"covariance": "approx", "parameter": "approx"})
        covariance = ShuffledDesignSum(self.accounts["covariance"], params.lam, noise_rng,
                                       n_batches=max_batches(horizon), width_delta=float(budget.delta),
                                       levels=levels)
        super().__init__(family, d, horizon, params, design_sum=covariance,
                         estimator=estimator(family, params, self.accounts["parameter"], noise_rng), rng=choice_rng)

    def diagnostics(self) -> dict[str, Any]:
        """Those of the loop plus the ledger's guarantee and the per-batch noise of ``V``/``H_k``."""
        out = super().diagnostics()
        guarantee = self.ledger.guarantee()
        out["guarantee_eps"] = float(guarantee.eps)
        out["guarantee_delta"] = float(getattr(guarantee, "delta", 0))
        out["covariance_noise_sd"] = {str(k): v for k, v in self.design_sum.noise_sd.items()}
        return out


# -- running ------------------------------------------------------------------------------------
def run_batched_policy(policy: BatchedGLMBandit, env: ContextualGLMEnv, progress: bool = False):
    """Play a batched policy on ``env``, planning each batch's designs in one vectorised call.

    Same protocol and result as :func:`dpglm.policies.run_policy_record` (the env is reset
    first; ``choose``/``observe`` every round); at each batch start the policy is given
    the batch's arm sets (``env.context_window``), which i.i.d. contexts make
    legitimate: the batch's rule is fixed before the batch begins.
    """
    from dpglm.policies import RunRecord

    if not isinstance(policy, BatchedGLMBandit):
        raise TypeError(f"policy must be a BatchedGLMBandit, got {type(policy).__name__}")
    if not isinstance(env, ContextualGLMEnv):
        raise TypeError(f"env must be a dpglm.envs.ContextualGLMEnv, got {type(env).__name__}")
    if env.horizon != policy.horizon:
        raise ValueError(f"env.horizon must equal the policy's horizon {policy.horizon}, got {env.horizon}")
    env.reset()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=env.horizon, desc=policy.name, leave=False)
    start = time.perf_counter()
    for t in range(env.horizon):
        if policy._plan is None:
            policy.plan(env.context_window(t, min(env.horizon, t + policy.rounds_left_in_batch)))
        policy.observe(env.pull(t, policy.choose(env.contexts(t))))
        if bar is not None:
            bar.update()
    seconds = time.perf_counter() - start
    if bar is not None:
        bar.close()
    return RunRecord(regret=env.regret, instant_regret=env.instant_regret.copy(), actions=env.actions.copy(),
                     rewards=env.rewards.copy(), seconds=seconds, diagnostics=dict(policy.diagnostics()))
