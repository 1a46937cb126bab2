"""Declarative sweeps: algorithms × instances × ε × seeds, one tidy table out.

A :class:`Sweep` names what to run; :func:`run_sweep` expands it into cells (one run
each), groups them into tasks of about a second, runs them on an engine
(:mod:`dpglm.experiments.engine`: this process, worker processes or dask) with a tqdm
bar, and appends each finished cell's rows to the table and to a resume manifest as it
arrives (:func:`run_cells`). Every cell draws its randomness from
``numpy.random.SeedSequence(root_seed, spawn_key=...)`` with a key hashed from the
cell's own parameters (:mod:`dpglm.experiments.seeds`):

* the environment (θ*, contexts, rewards) from the instance's parameters and the seed
  index, so every algorithm and ε of one (instance, seed) sees the same problem
  (common random numbers);
* the policy from everything the cell is (instance, seed index, label, ε, δ, options),

so results never depend on scheduling, the number of workers, or which other cells run.

Rows (one per recorded round t of each run): ``algorithm, preset, epsilon, delta, family,
d, K, horizon, S, kappa, seed, t, regret, criterion_I, criterion_II, refits_o, refits_tau,
refused_o, refused_tau, guarantee_epsilon, guarantee_delta, seconds``. Non-private
algorithms have ``epsilon = inf`` and empty guarantee columns.
"""

from __future__ import annotations

import contextlib
import csv
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpglm.experiments.seeds import cell_key, cell_seed

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
    "run_cells",
    "run_sweep",
    "read_results",
]

COLUMNS = (
    "algorithm", "preset", "epsilon", "delta", "family", "d", "K", "horizon", "S", "kappa", "seed", "t",
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
        for instance in self.instances:
            for seed in range(self.seeds):
                for label in self.algorithms:
                    algorithm, preset = split_label(label)
                    epsilons = self.epsilons if algorithm in PRIVATE_ALGORITHMS else (math.inf,)
                    options = dict(self.options.get(label, {}))
                    if preset:
                        options["preset"] = preset
                    for eps in epsilons:
                        out.append(Cell(label, instance, eps, self.delta, seed, self.root_seed,
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
    epsilon: float
    delta: float
    seed: int
    root_seed: int
    record_every: int
    options: dict[str, Any]

    @property
    def algorithm(self) -> str:
        return split_label(self.label)[0]

    def _instance_key(self) -> tuple:
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
        "horizon": inst.horizon,
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


#: CPU seconds per round of each algorithm at d = 3, K = 20, as measured on a full Table 2
#: (used only to group cells into tasks of about a second: a wrong guess changes speed, never
#: a number).
PER_ROUND_SECONDS = {"Private-GLM": 1.1e-4, "RS-GLinUCB": 4e-5, "GLOC": 4e-5, "GLM-UCB": 2.2e-4, "ECOLog": 1.5e-4,
                     "ShuffleDP-GLM": 1e-4, "B-GLinCB": 1e-4}


def estimated_seconds(cell: Cell) -> float:
    """A guess of the CPU time of ``cell`` (for grouping cells into tasks)."""
    inst = cell.instance
    scale = max(1.0, inst.d * inst.n_arms / 60)
    return PER_ROUND_SECONDS.get(cell.algorithm, 2e-4) * inst.horizon * scale


def _run_group(task: tuple[Callable[[Cell], Any], list[Cell]]) -> list[tuple[str, Any]]:
    """A worker's task: every cell of the group, ``(key, result)`` each."""
    function, cells = task
    return [(cell.key(), function(cell)) for cell in cells]


def _rows_and_extra(result: Any) -> tuple[list[dict[str, Any]], Any]:
    return result if isinstance(result, tuple) else (result, None)


def run_cells(
    cells: Sequence[Cell],
    function: Callable[[Cell], Any],
    columns: Sequence[str],
    out: str | Path | None = None,
    *,
    engine: Any = None,
    progress: bool = True,
    desc: str = "sweep",
    on_result: Callable[[Cell, list[dict[str, Any]], Any], None] | None = None,
) -> tuple[list[tuple[Cell, list[dict[str, Any]], Any]], list[str]]:
    """Run ``function`` on every cell, through ``engine``, resuming from ``out``'s manifest.

    ``function(cell)`` returns the cell's rows, or ``(rows, extra)`` with JSON-ready
    ``extra``. With ``out`` (a ``.csv`` or ``.parquet`` path), cells already in
    ``<out>.manifest.jsonl`` are not rerun; new cells are appended to the manifest
    (and, for CSV, to the table) as they arrive; at the end the table is rewritten
    in cell order. Returns ``[(cell, rows, extra)]`` in cell order, and the failures
    (cells whose task failed twice), each recorded once.
    """
    from dpglm.experiments.engine import Engine, EngineSpec, current_engine, group_tasks
    from dpglm.experiments.results import Manifest, write_table

    spec = engine if isinstance(engine, EngineSpec) else EngineSpec()
    keys = [cell.key() for cell in cells]
    if len(set(keys)) != len(keys):
        raise ValueError("cells must be distinct (two cells have the same parameters)")
    manifest = handle = writer = None
    path = Path(out) if out is not None else None
    if path is not None:
        manifest = Manifest(path.with_suffix(".manifest.jsonl"))
    done = dict(manifest.done) if manifest is not None else {}
    results: dict[str, tuple[list[dict[str, Any]], Any]] = {k: (e["rows"], e.get("extra")) for k, e in done.items()}
    todo = [cell for cell, key in zip(cells, keys) if key not in results]
    if path is not None and path.suffix == ".csv":
        write_table([row for key in keys if key in results for row in results[key][0]], columns, path)
        handle = open(path, "a", newline="", encoding="utf-8")
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
    by_key = dict(zip(keys, cells))
    for key in keys:
        if key in results and on_result is not None:
            on_result(by_key[key], *results[key])
    running = current_engine()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(cells), initial=len(cells) - len(todo), desc=desc, unit="run")
    failures: list[str] = []
    context = contextlib.nullcontext(running) if running is not None else Engine(spec)
    try:
        with context as active:
            groups = group_tasks([estimated_seconds(c) for c in todo], active.workers) if todo else []
            tasks = [(function, [todo[i] for i in group]) for group in groups]
            before = len(active.failures)
            for _, group_results in active.imap(_run_group, tasks):
                for key, result in group_results:
                    rows, extra = _rows_and_extra(result)
                    if key in results:
                        continue
                    results[key] = (rows, extra)
                    if writer is not None:
                        writer.writerows(rows)
                        handle.flush()
                    if manifest is not None:
                        manifest.add(key, rows, extra)
                    if on_result is not None:
                        on_result(by_key[key], rows, extra)
                    if bar is not None:
                        bar.update()
            for index, message in active.failures[before:]:
                names = ", ".join(_cell_name(c) for c in tasks[index][1])
                failures.append(f"{names}: {message}")
            if path is not None:  # a command writing its table: say where the work ran
                print(f"{desc}: {len(todo)} of {len(cells)} run(s) computed ({len(cells) - len(todo)} from the "
                      f"manifest); {active.summary()}", file=sys.stderr)
    finally:
        if bar is not None:
            bar.close()
        if handle is not None:
            handle.close()
        if manifest is not None:
            manifest.close()
    ordered = [(cell, *results[key]) for cell, key in zip(cells, keys) if key in results]
    if path is not None:
        write_table([row for _, rows, _ in ordered for row in rows], columns, path)
    return ordered, failures


def _cell_name(cell: Cell) -> str:
    inst = cell.instance
    eps = "" if math.isinf(cell.epsilon) else f" ε={cell.epsilon:g}"
    return f"{cell.label}{eps} {inst.family} d={inst.d} S={inst.S:g} T={inst.horizon} seed={cell.seed}"


def run_sweep(
    sweep: Sweep,
    out: str | Path | None = None,
    *,
    engine: Any = None,
    jobs: int = 1,
    progress: bool = True,
    on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every cell of ``sweep`` and return the tidy rows (sorted by cell, then t).

    Parameters
    ----------
    out : path, optional
        Table (``.csv``, written as cells finish, or ``.parquet``) with its resume
        manifest beside it (:func:`run_cells`).
    engine : EngineSpec, optional
        Where to run (:mod:`dpglm.experiments.engine`); default local with ``jobs`` workers.
    jobs : int
        Local worker processes when ``engine`` is not given (1: in this process).
    progress : bool
        tqdm bar over cells.
    on_rows : callable, optional
        Called with each finished cell's rows (e.g. to print a running summary).

    Raises ``RuntimeError`` naming the cells that failed twice (after the others finished
    and were saved, so a rerun resumes them).
    """
    from dpglm.experiments.engine import EngineSpec

    if engine is None:
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"jobs must be an int >= 1, got {jobs!r}")
        engine = EngineSpec("local", jobs)
    callback = None if on_rows is None else (lambda cell, rows, extra: on_rows(rows))
    ordered, failures = run_cells(sweep.cells(), run_cell, COLUMNS, out, engine=engine, progress=progress,
                                  on_result=callback)
    if failures:
        from dpglm.experiments.engine import TaskFailures

        raise TaskFailures("cell(s)", failures)
    return [row for _, rows, _ in ordered for row in rows]


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a sweep table (CSV or Parquet) with numbers parsed back (empty cells stay ``""``)."""
    from dpglm.experiments.results import read_table

    return read_table(path, numeric=set(COLUMNS) - {"algorithm", "preset", "family"})
