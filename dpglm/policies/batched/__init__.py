"""The batched GLM bandit: B-GLinCB (Sawarni et al. 2024) and the shuffle-DP Algorithm 1.

One core, :class:`BatchedGLMBandit` (:mod:`.loop`), runs the batched loop of paper §5 (Algorithm 1) /
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

Speed and memory (issue 32): within a batch the rule is fixed and contexts are i.i.d., so
:meth:`plan` takes the arm sets of the coming rounds (up to 1024, :func:`run_batched_policy`
does this) and computes their designs in one vectorised
:func:`dpglm.design.g_optimal_design` call, on ``matmul``; :meth:`choose` falls back to the
single-set computation for arm sets it was not given, with the same result (a set's design
depends on that set alone). A batch keeps its rows in arrays doubling up to its public length (the last
batch keeps none), and its leaves ``w x xᵀ`` are formed from them a chunk at a time when it
ends, so a run's memory does not grow with the batch lengths beyond 8·(d + 2) bytes a
round of one non-final batch.

Modules, one concept each: :mod:`.schedule` (the batch lengths), :mod:`.parameters` and
:mod:`.presets` (the constants and their presets), :mod:`.protocols` (the two pluggable
ingredients), :mod:`.exact` and :mod:`.private` (their exact and shuffle-private
implementations), :mod:`.loop` (the batched loop), :mod:`.bglincb` and
:mod:`.shuffle_dp` (the two policies), :mod:`.runner` (playing a policy a chunk of rounds at a time).
"""

from dpglm.policies.batched.bglincb import BGLinCB
from dpglm.policies.batched.exact import ExactDesignSum, MLEBatchEstimator
from dpglm.policies.batched.loop import BatchedGLMBandit
from dpglm.policies.batched.parameters import BatchedParameters
from dpglm.policies.batched.presets import PRESETS, batched_parameters
from dpglm.policies.batched.private import (
    NOISE_TARGET,
    ShuffledDesignSum,
    ShufflePGDEstimator,
    batch_partition,
    pgd_iterations,
)
from dpglm.policies.batched.protocols import BatchEstimator, DesignSum, PreconditionedEstimator
from dpglm.policies.batched.runner import PlannedBatches, run_batched_policy
from dpglm.policies.batched.schedule import BatchSchedule, batch_schedule, max_batches
from dpglm.policies.batched.shuffle_dp import EstimatorFactory, ShuffleDPGLMBandit

__all__ = [
    "BGLinCB",
    "BatchEstimator",
    "BatchSchedule",
    "BatchedGLMBandit",
    "BatchedParameters",
    "DesignSum",
    "EstimatorFactory",
    "ExactDesignSum",
    "MLEBatchEstimator",
    "NOISE_TARGET",
    "PRESETS",
    "PlannedBatches",
    "PreconditionedEstimator",
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
