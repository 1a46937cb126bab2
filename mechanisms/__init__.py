"""Every noisy release in dpglm: each mechanism charges an ``accounting.Account`` before it samples.

The core exports are re-exported here; the other mechanism families are imported
from their own submodules (``mechanisms.shuffle``, ``mechanisms.geometric``,
``mechanisms.optim``).
"""

from mechanisms.base import Mechanism
from mechanisms.factorization import SquareRootFactorizationMechanism
from mechanisms.noise import GaussianMechanism, LaplaceMechanism
from mechanisms.release import Release
from mechanisms.tree import BinaryTreeMechanism

__all__ = [
    "BinaryTreeMechanism",
    "GaussianMechanism",
    "LaplaceMechanism",
    "Mechanism",
    "Release",
    "SquareRootFactorizationMechanism",
]
