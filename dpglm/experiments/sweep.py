"""Declarative sweeps: algorithms × instances × ε × seeds, one tidy table out.

A :class:`Sweep` names what to run; :func:`run_sweep` expands it into cells (one run
each), runs them locally through joblib (``n_jobs``) with a tqdm bar, and appends each
finished cell's rows to a CSV as it arrives. Every cell draws its randomness from
``numpy.random.SeedSequence(root_seed, spawn_key=...)``:

* the environment (θ*, contexts, rewards) from ``spawn_key=(0, instance, seed)``, so every
  algorithm and ε of one (instance, seed) sees the same problem (common random numbers);
* the policy from ``spawn_key=(1, instance, seed, algorithm, ε)`` with stable integer
  keys (CRC-32 of the algorithm name, ε in thousandths),

so results never depend on scheduling, the number of workers, or which other cells run.

Rows (one per recorded round t of each run): ``algorithm, preset, epsilon, delta, family,
d, K, T, S, kappa, seed, t, regret, criterion_I, criterion_II, refits_o, refits_tau,
refused_o, refused_tau, guarantee_epsilon, guarantee_delta, seconds``. Non-private
algorithms have ``epsilon = inf`` and empty guarantee columns.
"""

from __future__ import annotations

import csv
import math
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Instance",
    "Sweep",
    "Cell",
    "COLUMNS",
    "ALGORITHMS",
    "PRIVATE_ALGORITHMS",
    "build_policy",
    "split_label",
    "run_cell",
    "run_sweep",
    "read_results",
]

COLUMNS = (
    "algorithm", "preset", "epsilon", "delta", "family", "d", "K", "T", "S", "kappa", "seed", "t",
    "regret", "criterion_I", "criterion_II", "refits_o", "refits_tau", "refused_o", "refused_tau",
    "guarantee_epsilon", "guarantee_delta", "seconds",
)

PRIVATE_ALGORITHMS = ("Private-GLM",)
ALGORITHMS = ("Private-GLM", "RS-GLinUCB", "GLOC", "GLM-UCB", "ECOLog")


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
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if not (math.isfinite(self.S) and self.S > 0):
            raise ValueError(f"S must be a finite number > 0, got {self.S!r}")


@dataclass(frozen=True)
class Sweep:
    """What to run.

    Parameters
    ----------
    algorithms : sequence of labels
        A name in :data:`ALGORITHMS`, optionally with a preset after a colon
        (``"Private-GLM:calibrated"``, ``"RS-GLinUCB:theory"``).
    instances : sequence of :class:`Instance`
    epsilons : sequence of ε > 0, applied to the private algorithms (non-private ones run
        once per instance and seed)
    delta : float in (0, 1)
        δ of the private algorithms and the confidence level of all of them.
    seeds : int
        Runs per (algorithm, instance, ε).
    root_seed : int
    record_every : int
        The table keeps rounds t = record_every, 2·record_every, …, and always T.
    options : mapping algorithm → keyword arguments
        E.g. ``{"Private-GLM": {"preset": "calibrated"}}``.
    """

    algorithms: tuple[str, ...]
    instances: tuple[Instance, ...]
    epsilons: tuple[float, ...] = (4.0,)
    delta: float = 0.02
    seeds: int = 10
    root_seed: int = 0
    record_every: int = 100
    options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [a for a in self.algorithms if split_label(a)[0] not in ALGORITHMS]
        if unknown or not self.algorithms:
            raise ValueError(f"algorithms must be a non-empty subset of {ALGORITHMS}, got {self.algorithms}")
        if not self.instances:
            raise ValueError("instances must not be empty")
        if any(not (math.isfinite(e) and e > 0) for e in self.epsilons):
            raise ValueError(f"epsilons must be finite numbers > 0, got {self.epsilons}")
        if not self.epsilons and any(a in PRIVATE_ALGORITHMS for a in self.algorithms):
            raise ValueError("epsilons must not be empty when a private algorithm is swept")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must lie in (0, 1), got {self.delta}")
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or self.seeds < 1:
            raise ValueError(f"seeds must be an int >= 1, got {self.seeds!r}")
        if isinstance(self.record_every, bool) or not isinstance(self.record_every, int) or self.record_every < 1:
            raise ValueError(f"record_every must be an int >= 1, got {self.record_every!r}")

    def cells(self) -> list[Cell]:
        """Every run of the sweep, in a fixed order."""
        out = []
        for i, instance in enumerate(self.instances):
            for seed in range(self.seeds):
                for label in self.algorithms:
                    algorithm, preset = split_label(label)
                    epsilons = self.epsilons if algorithm in PRIVATE_ALGORITHMS else (math.inf,)
                    options = dict(self.options.get(label, {}))
                    if preset:
                        options["preset"] = preset
                    for eps in epsilons:
                        out.append(Cell(label, instance, i, eps, self.delta, seed, self.root_seed,
                                        self.record_every, options))
        return out


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
    instance_index: int
    epsilon: float
    delta: float
    seed: int
    root_seed: int
    record_every: int
    options: dict[str, Any]

    @property
    def algorithm(self) -> str:
        return split_label(self.label)[0]

    def env_seed(self) -> np.random.SeedSequence:
        return np.random.SeedSequence(self.root_seed, spawn_key=(0, self.instance_index, self.seed))

    def policy_seed(self) -> np.random.SeedSequence:
        eps_key = 0 if math.isinf(self.epsilon) else int(round(self.epsilon * 1000))
        algo_key = zlib.crc32(self.label.encode())
        return np.random.SeedSequence(
            self.root_seed, spawn_key=(1, self.instance_index, self.seed, algo_key, eps_key)
        )


def build_policy(cell: Cell, env: Any) -> Any:
    """The policy of a cell. Non-private baselines GLOC and GLM-UCB get the oracle κ of
    the run's contexts, as in the paper's simulations; the rarely-switching ones use the
    public bound from S."""
    from dpglm.policies import ECOLog, GLMUCB, GLOC
    from dpglm.policies.rarely_switching import RSGLinUCB

    inst, opts = cell.instance, cell.options
    if cell.algorithm == "Private-GLM":
        from dpglm.policies.joint_dp import JointDPGLMBandit

        return JointDPGLMBandit(inst.family, inst.d, inst.horizon, inst.S, cell.epsilon, cell.delta,
                                np.random.default_rng(cell.policy_seed()), **opts)
    if cell.algorithm == "RS-GLinUCB":
        return RSGLinUCB(inst.family, inst.d, inst.horizon, inst.S, delta=cell.delta, **opts)
    if cell.algorithm == "GLOC":
        return GLOC(inst.family, inst.d, S=inst.S, delta=cell.delta, kappa=env.kappa,
                    **{"preset": "paper-simulation", **opts})
    if cell.algorithm == "GLM-UCB":
        return GLMUCB(inst.family, inst.d, horizon=inst.horizon, delta=cell.delta, kappa=env.kappa, **opts)
    if cell.algorithm == "ECOLog":
        return ECOLog(inst.family, inst.d, S=inst.S, delta=cell.delta, **opts)
    raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {cell.algorithm!r}")


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """Run one cell; its rows of the tidy table."""
    from dpglm.envs import StochasticContextEnv
    from dpglm.policies import run_policy_record

    inst = cell.instance
    env = StochasticContextEnv(inst.family, inst.d, inst.n_arms, inst.S, inst.horizon,
                               np.random.default_rng(cell.env_seed()))
    policy = build_policy(cell, env)
    start = time.process_time()
    record = run_policy_record(policy, env)
    seconds = time.process_time() - start
    diag = record.diagnostics
    ts = list(range(cell.record_every, inst.horizon + 1, cell.record_every))
    if not ts or ts[-1] != inst.horizon:
        ts.append(inst.horizon)
    private = cell.algorithm in PRIVATE_ALGORITHMS
    base = {
        "algorithm": cell.algorithm,
        "preset": getattr(policy, "preset", ""),
        "epsilon": cell.epsilon,
        "delta": cell.delta,
        "family": inst.family,
        "d": inst.d,
        "K": inst.n_arms,
        "T": inst.horizon,
        "S": inst.S,
        "kappa": env.kappa,
        "seed": cell.seed,
        **{k: diag.get(k, "") for k in ("criterion_I", "criterion_II", "refits_o", "refits_tau",
                                         "refused_o", "refused_tau")},
        "guarantee_epsilon": diag.get("guarantee_epsilon", "") if private else "",
        "guarantee_delta": diag.get("guarantee_delta", "") if private else "",
        "seconds": seconds,
    }
    return [{**base, "t": t, "regret": float(record.regret[t - 1])} for t in ts]


def _indexed(index: int, cell: Cell) -> tuple[int, list[dict[str, Any]]]:
    return index, run_cell(cell)


def _run_parallel(cells: Sequence[Cell], n_jobs: int) -> Iterable[tuple[int, list[dict[str, Any]]]]:
    if n_jobs == 1:
        return (_indexed(i, c) for i, c in enumerate(cells))
    from joblib import Parallel, delayed

    return Parallel(n_jobs=n_jobs, return_as="generator_unordered")(
        delayed(_indexed)(i, c) for i, c in enumerate(cells)
    )


def run_sweep(
    sweep: Sweep,
    out: str | Path | None = None,
    *,
    n_jobs: int = 1,
    progress: bool = True,
    on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every cell of ``sweep`` and return the tidy rows (sorted by cell, then t).

    Parameters
    ----------
    out : path, optional
        CSV written as cells finish (header first; one flush per cell).
    n_jobs : int
        joblib workers (1: in-process, no pool).
    progress : bool
        tqdm bar over cells.
    on_rows : callable, optional
        Called with each finished cell's rows (e.g. to print a running summary).
    """
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1:
        raise ValueError(f"n_jobs must be an int >= 1 or -1, got {n_jobs!r}")
    cells = sweep.cells()
    finished: list[tuple[int, list[dict[str, Any]]]] = []
    handle = writer = None
    if out is not None:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "w", newline="")
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        handle.flush()
    results = _run_parallel(cells, n_jobs)
    if progress:
        from tqdm import tqdm

        results = tqdm(results, total=len(cells), desc="sweep", unit="run")
    try:
        for index, cell_rows in results:
            finished.append((index, cell_rows))
            if writer is not None:
                writer.writerows(cell_rows)
                handle.flush()
            if on_rows is not None:
                on_rows(cell_rows)
    finally:
        if handle is not None:
            handle.close()
    finished.sort(key=lambda item: item[0])
    return [row for _, cell_rows in finished for row in cell_rows]


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a sweep CSV with numbers parsed back (empty cells stay ``""``)."""
    numeric = set(COLUMNS) - {"algorithm", "preset", "family"}
    out = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            out.append({k: (float(v) if k in numeric and v != "" else v) for k, v in row.items()})
    return out
