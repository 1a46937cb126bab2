"""Deliberately broken variants of the real mechanisms, for showing that the audits catch bugs.

Each variant subclasses or wraps the production class and changes one thing
— the noise actually drawn — while the charge on the ledger, and hence the
claim, stays what the correct mechanism would charge. An audit must call
these "violated" and the unmodified classes "consistent" (DESIGN.md, audits/).
None of these is exported to the rest of the project.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpglm.policies.joint_dp import JointDPGLMBandit, TreeDesign
from mechanisms.geometric import GeometricBatchMean
from mechanisms.noise import GaussianMechanism, LaplaceMechanism, gaussian_sigma_for
from mechanisms.optim.dpsgd import DPSGD, DPSGDPlan
from mechanisms.tree import BinaryTreeMechanism

__all__ = [
    "AddRemoveNoiseDPSGD",
    "DepthUnscaledTree",
    "ExactGramBandit",
    "ExactGramDesign",
    "HalvedSensitivityGaussian",
    "HalvedSensitivityLaplace",
    "ReusedSampleGeometricMean",
    "identity_shuffler",
]


class HalvedSensitivityGaussian(GaussianMechanism):
    """Bug: calibrates σ (and its charge) for Δ/2 while the statistic moves by Δ."""

    def __init__(self, account: object, sensitivity: float, rng: np.random.Generator, **kwargs: object) -> None:
        super().__init__(account, sensitivity / 2, rng, **kwargs)


class HalvedSensitivityLaplace(LaplaceMechanism):
    """Bug: calibrates the Laplace scale for Δ/2 while the statistic moves by Δ."""

    def __init__(self, account: object, sensitivity: float, rng: np.random.Generator, **kwargs: object) -> None:
        super().__init__(account, sensitivity / 2, rng, **kwargs)


class DepthUnscaledTree(BinaryTreeMechanism):
    """Bug: charges ρ = L·Δ²/(2σ²) for the horizon but draws node noise calibrated for one node.

    The σ actually used is the one a single Gaussian release of cost ρ would
    need, √L times too small (the "missing √L" of REFERENCES.md).
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.sigma = gaussian_sigma_for(self.cost.rho, self._elements.charged_sensitivity, 1)


class AddRemoveNoiseDPSGD(DPSGD):
    """Bug: noise for sensitivity C (add/remove) while replace-one moves a clipped sum by 2C.

    The charge stays ρ = E·(2C)²/(2σ²) for the σ of the correct plan; the noise
    drawn is half of it (the authors' code, REFERENCES.md).
    """

    def plan(self, n: int, **kwargs: object) -> DPSGDPlan:
        correct = super().plan(n, **kwargs)
        return dataclasses.replace(correct, noise_multiplier=correct.noise_multiplier / 2,
                                   sigma=correct.sigma / 2)


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


def identity_shuffler(messages: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bug: a "shuffler" that returns the messages in user order (same signature as the real one)."""
    return np.asarray(messages)


class ExactGramDesign(TreeDesign):
    """Bug: feeds (and pays for) the binary tree, but hands the policy λI + the exact Σ leaves."""

    def __init__(self, tree: object, lam: float) -> None:
        super().__init__(tree, lam)
        self._exact = self._lam_eye.copy()

    def append(self, leaf: np.ndarray | None) -> None:
        super().append(leaf)
        if leaf is not None:
            self._exact = self._exact + leaf
        matrix = self._exact.copy()
        matrix.setflags(write=False)
        self._matrix = matrix


class ExactGramBandit(JointDPGLMBandit):
    """Bug: the joint-DP bandit deciding (Criterion II, UCB widths) from the exact Gram matrix H."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.design_h = ExactGramDesign(self.design_h.tree, self.params.lam_h)
