"""Deliberately broken variants of the real mechanisms, for showing that the audits catch bugs.

Each variant subclasses or wraps the production class and changes one thing
— the noise actually drawn — while the charge on the ledger, and hence the
claim, stays what the correct mechanism would charge. An audit must call
these "violated" and the unmodified classes "consistent" (docs/audits.md).
None of these is exported to the rest of the project.

Test seams. A planted bug never assigns to a mechanism's noise parameters
after construction (they are read-only). It goes through one of two seams:

* a protected method the mechanism's constructor calls, overridden in a
  subclass (``ContinualRelease._plan``: the weight k of ρ = k·Δ²/(2σ²));
* :func:`miscalibrated` / :func:`replaced`: for the duration of the
  constructor (or ``fit``), a calibration function (or noise-lattice class)
  the mechanism's module imported is replaced by a wrapper that scales its
  answer (γ, a noise-bit count, the lattice's ε). The charge is computed from
  the cost, not from that answer, so it stays.

Both leave the sampling code itself untouched, so the planted variants keep
working whatever sampler the mechanisms use.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import numpy as np

from accounting import Chargeable
from dpglm.policies.joint_dp import JointDPGLMBandit, TreeDesign
from dpglm.policies.tree_pair import PartitionedTree
from mechanisms.factorization import SquareRootFactorizationMechanism
from mechanisms.geometric import GeometricBatchMean
from mechanisms.noise import GaussianMechanism, LaplaceMechanism
from mechanisms.optim.dpsgd import DPSGD, DPSGDPlan
from mechanisms.optim.poisson_dpsgd import PoissonDPSGD
from mechanisms.optim.shuffle_pgd import ShufflePGD
from mechanisms.release import Release
from mechanisms.shuffle import ShuffleBitSum, ShuffleVectorSum
from mechanisms.tree import BinaryTreeMechanism

__all__ = [
    "AddRemoveNoiseDPSGD",

    "DepthUnscaledTree",
    "ExactGramBandit",
    "ExactGramDesign",
    "HalvedHTreeBandit",
    "HalvedCountNoiseBitSum",
    "HalvedNoiseFactorization",
    "HalvedNoisePartitionedTree",
    "HalvedNoiseTree",
    "HalvedNoiseVectorisedDPSGD",
    "HalvedScaleGeometricMean",
    "HalvedSensitivityGaussian",
    "HalvedSensitivityLaplace",
    "NearlyNoiselessBitSum",
    "NoiselessPGD",
    "QuarterGammaBitSum",
    "QuarterNoiseBitsPGD",
    "QuarterNoiseBitsVectorSum",
    "ReusedSampleGeometricMean",
    "UnsampledPoissonDPSGD",

    "identity_shuffler",
    "miscalibrated",
    "replaced",
]


@contextlib.contextmanager
def replaced(module: str, name: str, wrap: Callable[[Callable], Callable]) -> Iterator[None]:
    """Within the block, ``module.name`` is ``wrap(original)``.

    Raises ``AttributeError`` if the module no longer has that name, so a
    renamed calibration breaks the planted bug loudly instead of silently
    planting nothing.
    """
    target = importlib.import_module(module)
    original: Callable = getattr(target, name)
    setattr(target, name, wrap(original))
    try:
        yield
    finally:
        setattr(target, name, original)


def miscalibrated(module: str, name: str, factor: float, *, integer: bool = False) -> contextlib.AbstractContextManager:
    """Within the block, ``module.name(...)`` returns ``factor`` times its correct answer.

    ``integer`` rounds the scaled answer up to an int ≥ 1 (noise-bit counts).
    """
    def wrap(original: Callable) -> Callable:
        def scaled(*args: Any, **kwargs: Any) -> object:
            value = original(*args, **kwargs)
            return max(1, math.ceil(value * factor)) if integer else value * factor
        return scaled
    return replaced(module, name, wrap)


class HalvedSensitivityGaussian(GaussianMechanism):
    """Bug: calibrates σ (and its charge) for Δ/2 while the statistic moves by Δ."""

    def __init__(self, account: Chargeable, sensitivity: float, rng: np.random.Generator, **kwargs: Any) -> None:
        super().__init__(account, sensitivity / 2, rng, **kwargs)


class HalvedSensitivityLaplace(LaplaceMechanism):
    """Bug: calibrates the Laplace scale for Δ/2 while the statistic moves by Δ."""

    def __init__(self, account: Chargeable, sensitivity: float, rng: np.random.Generator, **kwargs: Any) -> None:
        super().__init__(account, sensitivity / 2, rng, **kwargs)


class _ScaledPlan:
    """Mixin: the constructor's σ is calibrated for ``_WEIGHT`` times the true weight of the charge.

    ``ContinualRelease`` calibrates σ from the cost and the weight k that ``_plan``
    returns; scaling k by ¼ halves σ while the charge (the cost) is unchanged.
    """

    _WEIGHT: Fraction | None = Fraction(1, 4)

    def _plan(self) -> tuple[Fraction, str, str]:
        weight, detail, label = super()._plan()  # type: ignore[misc]
        return (weight * self._WEIGHT if self._WEIGHT is not None else Fraction(1)), detail, label


class HalvedNoiseTree(_ScaledPlan, BinaryTreeMechanism):
    """Bug: charges the whole horizon's ρ but draws node noise of σ/2 (weight L/4 in place of L)."""


class HalvedNoisePartitionedTree(_ScaledPlan, PartitionedTree):
    """:class:`HalvedNoiseTree` as one tree of the joint-DP bandit's V/H pair."""


class DepthUnscaledTree(_ScaledPlan, BinaryTreeMechanism):
    """Bug: charges ρ = L·Δ²/(2σ²) for the horizon but draws node noise calibrated for one node.

    The σ actually used is the one a single Gaussian release of cost ρ would
    need, √L times too small (the "missing √L" of docs/references.md).
    """

    _WEIGHT = None


class HalvedNoiseFactorization(_ScaledPlan, SquareRootFactorizationMechanism):
    """Bug: charges ρ = (Σ c_k²)Δ²/(2σ²) but draws white noise of σ/2 (weight Σc_k²/4)."""


class AddRemoveNoiseDPSGD(DPSGD):
    """Bug: noise for sensitivity C (add/remove) while replace-one moves a clipped sum by 2C.

    The charge stays ρ = E·(2C)²/(2σ²) for the σ of the correct plan; the noise
    drawn is half of it (the authors' code, docs/references.md). Both engines
    (``"opacus"``, ``"vectorised"``, ``"numpy"``) draw their noise from the plan's σ.
    """

    def plan(self, n: int, **kwargs: Any) -> DPSGDPlan:
        correct = super().plan(n, **kwargs)
        return dataclasses.replace(correct, noise_multiplier=correct.noise_multiplier / 2,
                                   sigma=correct.sigma / 2)


class HalvedNoiseVectorisedDPSGD(DPSGD):
    """Bug in one engine: ``engine="vectorised"`` adds half of each step's noise (σ/2); the charge is unchanged.

    The noise table is drawn and charged as the plan says; during ``fit`` the vectorised
    engine's loop (``mechanisms.optim.dpsgd_loops._loop_vectorised``) is handed the same
    rule with every noise row halved. The numpy and opacus engines are untouched, so
    only an audit that runs the vectorised engine can see it (issue 33).
    """

    def fit(self, *args: Any, **kwargs: Any) -> Release:
        def wrap(loop: Callable) -> Callable:
            def halved(rule: Any, metric: Any, batches: Any, theta_start: np.ndarray) -> object:
                noise = dataclasses.replace(rule.noise, rows=rule.noise.rows / 2)
                return loop(dataclasses.replace(rule, noise=noise), metric, batches, theta_start)
            return halved
        if self.engine != "vectorised":
            return super().fit(*args, **kwargs)
        with replaced("mechanisms.optim.dpsgd_loops", "_loop_vectorised", wrap):
            return super().fit(*args, **kwargs)


class UnsampledPoissonDPSGD(PoissonDPSGD):
    """Bug: charges the Poisson-amplified event but puts every row in every step (no sampling)."""

    def _blocks(self, n: int, plan: DPSGDPlan) -> Iterator[np.ndarray]:
        for _ in range(plan.steps):
            yield np.arange(n)


class HalvedScaleGeometricMean(GeometricBatchMean):
    """Bug: each batch charged ``PureDP(ε)`` but noised at half the scale (its noise lattice built for 2ε)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        def wrap(lattice: Callable) -> Callable:
            def doubled(epsilon: Fraction, scale: float, *rest: object) -> object:
                return lattice(2 * epsilon, scale / 2, *rest)
            return doubled
        with replaced("mechanisms.geometric", "LaplaceLattice", wrap):
            super().__init__(*args, **kwargs)


class ReusedSampleGeometricMean(GeometricBatchMean):
    """Bug: a completed batch's rewards are not cleared, so every later batch sum re-uses them.

    Each release is still charged ε on its own (arm, batch) partition, as if
    the batches were disjoint; a reward now enters every later batch.
    """

    def observe(self, counts: np.ndarray, reward_sums: np.ndarray) -> list:
        sums = np.asarray(reward_sums, dtype=float).reshape(self._pending.shape)
        carried = self._pending + sums
        released = super().observe(counts, reward_sums)
        self._pending = carried
        return released


class QuarterGammaBitSum(ShuffleBitSum):
    """Bug: charges the calibrated (ε, δ) but randomizes with probability γ/4."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with miscalibrated("mechanisms.shuffle", "calibrate_bitsum_gamma", 0.25):
            super().__init__(*args, **kwargs)


class HalvedCountNoiseBitSum(ShuffleBitSum):
    """Bug on the default counts path: the count is drawn with flip probability γ/8 (noise sd about halved).

    Its public γ, its debiasing and its (ε, δ) charge are the correct ones; only
    the sampled count is less noisy. True ε at n = 1000, claimed (1, 1e-5): 4.89
    (the exact hockey-stick divergence of the two count laws at δ = 1e-5).
    """

    def _flip_probability(self) -> float:
        return super()._flip_probability() / 4


class NearlyNoiselessBitSum(ShuffleBitSum):
    """Bug: charges the calibrated (ε, δ) but randomizes with probability 10⁻⁹γ (the raw sum, nearly always)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with miscalibrated("mechanisms.shuffle", "calibrate_bitsum_gamma", 1e-9):
            super().__init__(*args, **kwargs)


class QuarterNoiseBitsVectorSum(ShuffleVectorSum):
    """Bug: charges the calibrated (ε, δ) but sends a quarter of the fair noise bits (noise sd halved)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with miscalibrated("mechanisms.shuffle", "calibrate_noise_bits", 0.25, integer=True):
            super().__init__(*args, **kwargs)


class QuarterNoiseBitsPGD(ShufflePGD):
    """Bug: charges the PLD-composed (ε, δ) of its rounds but each round sends a quarter of the noise bits (sd/2).

    Not refutable through P_GD's output at T = 2 (audits.shuffle_vector): kept to measure that.
    """

    def fit(self, *args: Any, **kwargs: Any) -> Release:
        with miscalibrated("mechanisms.optim.shuffle_pgd", "calibrate_noise_bits", 0.25, integer=True):
            return super().fit(*args, **kwargs)


class NoiselessPGD(ShufflePGD):
    """Bug: charges the PLD-composed (ε, δ) of its rounds but each round sends one noise bit per user."""

    def fit(self, *args: Any, **kwargs: Any) -> Release:
        with miscalibrated("mechanisms.optim.shuffle_pgd", "calibrate_noise_bits", 0.0, integer=True):
            return super().fit(*args, **kwargs)


def identity_shuffler(messages: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bug: a "shuffler" that returns the messages in user order (same signature as the real one)."""
    return np.asarray(messages)


class ExactGramDesign(TreeDesign):
    """Bug: feeds (and pays for) the binary tree, but hands the policy λI + the exact Σ leaves."""

    def __init__(self, tree: BinaryTreeMechanism, lam: float) -> None:
        super().__init__(tree, lam)
        self._exact = self._lam_eye.copy()

    def append(self, leaf: np.ndarray | None) -> None:
        super().append(leaf)
        if leaf is not None:
            self._exact = self._exact + leaf
        self._hand_exact()

    def add_outer(self, x: np.ndarray, weight: float) -> None:
        super().add_outer(x, weight)
        self._exact = self._exact + weight * np.outer(x, x)
        self._hand_exact()

    def _hand_exact(self) -> None:
        matrix = self._exact.copy()
        matrix.setflags(write=False)
        self._matrix = matrix


class ExactGramBandit(JointDPGLMBandit):
    """Bug: the joint-DP bandit deciding (Criterion II, UCB widths) from the exact Gram matrix H."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.design_h, TreeDesign):
            raise TypeError(f"the joint-DP bandit's H is a TreeDesign, got {type(self.design_h).__name__}")
        self.design_h = ExactGramDesign(self.design_h.tree, self.params.lam_h)


class HalvedHTreeBandit(JointDPGLMBandit):
    """Bug: the joint-DP bandit's H-tree charges its share of ρ but draws node noise of σ/2.

    Whatever the preset, the H-tree is the tree whose leaves are scaled by
    μ̇/e < 1, so its sensitivity is below the V-tree's √2; during construction
    that tree is a :class:`HalvedNoiseTree` and the V-tree is left correct.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        def wrap(original: Callable[..., BinaryTreeMechanism]) -> Callable[..., BinaryTreeMechanism]:
            halved = HalvedNoiseTree if original is BinaryTreeMechanism else HalvedNoisePartitionedTree

            def tree(account: Chargeable, horizon: int, shape: object, sensitivity: float, *rest: Any,
                     **tree_kwargs: Any) -> BinaryTreeMechanism:
                cls = halved if sensitivity < math.sqrt(2) else original
                return cls(account, horizon, shape, sensitivity, *rest, **tree_kwargs)
            return tree

        # The H-tree alone (no exploration) or as half of the V/H pair (dpglm.policies.tree_pair).
        with replaced("dpglm.policies.joint_dp_plan", "BinaryTreeMechanism", wrap), \
                replaced("dpglm.policies.tree_pair", "PartitionedTree", wrap):
            super().__init__(*args, **kwargs)
