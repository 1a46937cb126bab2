"""What one run of an experiment is: a problem :class:`Instance` and a seeded :class:`Cell`.

Every runner (the declarative sweeps of :mod:`dpglm.experiments.sweep`, the shuffle
experiment of :mod:`dpglm.experiments.shuffle`) describes its runs as cells and plays
them through one policy registry (:mod:`dpglm.experiments.registry`). A cell draws its
randomness from ``SeedSequence(root_seed, spawn_key=...)`` with a key hashed from its own
parameters (:mod:`dpglm.experiments.seeds`, ``docs/engine.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from accounting.validation import check_int, check_positive
from dpglm.experiments.seeds import cell_key, cell_seed

__all__ = ["Cell", "Instance", "split_label"]


@dataclass(frozen=True)
class Instance:
    """A stochastic-context GLM problem (paper §8): θ* on the sphere of radius S, K arms
    uniform in the unit ball each round."""

    family: str
    d: int
    n_arms: int
    S: float
    horizon: int

    def __post_init__(self) -> None:
        for name in ("d", "n_arms", "horizon"):
            object.__setattr__(self, name, check_int(name, getattr(self, name)))
        check_positive("S", self.S)


def split_label(label: str) -> tuple[str, str]:
    """``"Private-GLM:calibrated"`` → ``("Private-GLM", "calibrated")``; no colon → preset ``""``."""
    if not isinstance(label, str):
        raise TypeError(f"algorithm labels must be str, got {type(label).__name__}")
    name, _, preset = label.partition(":")
    return name, preset


@dataclass(frozen=True)
class Cell:
    """One run: an algorithm (label) on one instance at one ε with one seed."""

    label: str
    instance: Instance
    epsilon: float
    delta: float
    seed: int
    root_seed: int
    record_every: int
    options: dict[str, Any]

    @property
    def algorithm(self) -> str:
        """The registry name of the label (before the colon)."""
        return split_label(self.label)[0]

    def _instance_key(self) -> tuple[str, int, int, float, int]:
        inst = self.instance
        return (inst.family, int(inst.d), int(inst.n_arms), float(inst.S), int(inst.horizon))

    def env_seed(self) -> np.random.SeedSequence:
        """The environment's seed: the instance and the seed index only (common random numbers)."""
        return cell_seed(self.root_seed, "environment", *self._instance_key(), self.seed)

    def policy_seed(self) -> np.random.SeedSequence:
        """The policy's seed: a hash of everything the cell is (:mod:`dpglm.experiments.seeds`)."""
        return cell_seed(self.root_seed, "policy", *self._instance_key(), self.seed, self.label,
                         float(self.epsilon), float(self.delta), self.options)

    def key(self) -> str:
        """A stable name of everything that determines the cell's rows: what the resume manifest records."""
        inst = self.instance
        words = cell_key("cell", self.root_seed, self.record_every, *self._instance_key(), self.seed, self.label,
                         float(self.epsilon), float(self.delta), self.options)
        return f"{self.label}|{inst.family}|{inst.horizon}|{self.seed}|" + "".join(f"{w:08x}" for w in words)

    def recorded_rounds(self) -> list[int]:
        """The rounds a table keeps: ``record_every, 2·record_every, …``, and always T."""
        horizon = self.instance.horizon
        rounds = list(range(self.record_every, horizon + 1, self.record_every))
        if not rounds or rounds[-1] != horizon:
            rounds.append(horizon)
        return rounds
