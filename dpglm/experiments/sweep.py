"""Declarative sweeps: algorithms × instances × ε × seeds, one tidy table out.

A :class:`Sweep` names what to run; :func:`run_sweep` expands it into cells (one run
each), groups them into tasks of about a second, runs them on an engine
(:mod:`dpglm.engine.engine`: this process, worker processes or dask) with a tqdm
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
algorithms have ``epsilon = inf`` and empty guarantee columns; private ones an empty
``criterion_I`` (computed from users' own arms and released by no mechanism: only the
non-private RS-GLinUCB reports it). ``regret`` and ``kappa`` are the simulation's
evaluation against its known θ* and ``seconds`` its CPU time, not outputs of the policy
(docs/service.md, "What a run publishes").
"""

from __future__ import annotations

import contextlib
import csv
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from accounting.validation import check_int, check_probability
from dpglm.experiments.cells import Cell, Instance, split_label
from dpglm.experiments.registry import REGISTRY, build_policy, play_cell

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

#: Every algorithm a sweep can run: the registry's (:mod:`dpglm.experiments.registry`).
ALGORITHMS = tuple(REGISTRY)
#: Those charged to a ledger at each swept ε.
PRIVATE_ALGORITHMS = tuple(name for name, spec in REGISTRY.items() if spec.private)


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
        if not self.epsilons and any(split_label(a)[0] in PRIVATE_ALGORITHMS for a in self.algorithms):
            raise ValueError("epsilons must not be empty when a private algorithm is swept")
        check_probability("delta", self.delta)
        check_int("seeds", self.seeds)
        check_int("record_every", self.record_every)

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


def run_cell(cell: Cell) -> list[dict[str, Any]]:
    """Run one cell (:func:`dpglm.experiments.registry.play_cell`); its rows of the tidy table."""
    return play_cell(cell).rows(COLUMNS)


def estimated_seconds(cell: Cell) -> float:
    """A guess of the CPU time of ``cell`` (for grouping cells into tasks)."""
    inst = cell.instance
    scale = max(1.0, inst.d * inst.n_arms / 60)
    spec = REGISTRY.get(cell.algorithm)
    return (spec.seconds_per_round if spec is not None else 2e-4) * inst.horizon * scale


def _run_group(task: tuple[Callable[[Cell], Any], list[Cell]]) -> list[tuple[str, Any]]:
    """A worker's task: every cell of the group, ``(key, result)`` each."""
    function, cells = task
    return [(cell.key(), function(cell)) for cell in cells]


def _rows_and_extra(result: Any) -> tuple[list[dict[str, Any]], Any]:
    return result if isinstance(result, tuple) else (result, None)


class _Results:
    """Where finished cells go: kept in memory, appended to the CSV table and the manifest, passed on.

    Opening loads the cells ``out``'s manifest already has (and rewrites the CSV from
    them); :meth:`add` records a new one; :meth:`close` closes the files.
    """

    def __init__(self, cells: Sequence[Cell], keys: list[str], columns: Sequence[str], path: Path | None,
                 on_result: Callable[[Cell, list[dict[str, Any]], Any], None] | None) -> None:
        from dpglm.engine.results import Manifest, write_table

        self.by_key, self.on_result = dict(zip(keys, cells, strict=True)), on_result
        self.manifest = Manifest(path.with_suffix(".manifest.jsonl")) if path is not None else None
        done = dict(self.manifest.done) if self.manifest is not None else {}
        self.results: dict[str, tuple[list[dict[str, Any]], Any]] = {
            k: (e["rows"], e.get("extra")) for k, e in done.items()}
        self.handle: IO[str] | None = None
        self.writer: csv.DictWriter[str] | None = None
        if path is not None and path.suffix == ".csv":
            write_table([row for key in keys if key in self.results for row in self.results[key][0]], columns, path)
            self.handle = open(path, "a", newline="", encoding="utf-8")  # noqa: SIM115 - closed by close()
            self.writer = csv.DictWriter(self.handle, fieldnames=list(columns), extrasaction="ignore")
        for key in keys:
            if key in self.results and on_result is not None:
                on_result(self.by_key[key], *self.results[key])

    def add(self, key: str, result: Any) -> bool:
        """Record a finished cell; False if it was already recorded (a retried task finishing twice)."""
        if key in self.results:
            return False
        rows, extra = _rows_and_extra(result)
        self.results[key] = (rows, extra)
        if self.writer is not None and self.handle is not None:
            self.writer.writerows(rows)
            self.handle.flush()
        if self.manifest is not None:
            self.manifest.add(key, rows, extra)
        if self.on_result is not None:
            self.on_result(self.by_key[key], rows, extra)
        return True

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
        if self.manifest is not None:
            self.manifest.close()


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
    from dpglm.engine.engine import Engine, EngineSpec, current_engine, group_tasks
    from dpglm.engine.results import write_table

    spec = engine if isinstance(engine, EngineSpec) else EngineSpec()
    keys = [cell.key() for cell in cells]
    if len(set(keys)) != len(keys):
        raise ValueError("cells must be distinct (two cells have the same parameters)")
    path = Path(out) if out is not None else None
    store = _Results(cells, keys, columns, path, on_result)
    todo = [cell for cell, key in zip(cells, keys, strict=True) if key not in store.results]
    bar = None
    if progress:
        from dpglm.engine.progress import progress as progress_bar

        bar = progress_bar(total=len(cells), initial=len(cells) - len(todo), desc=desc, unit="run")
    failures: list[str] = []
    running = current_engine()
    try:
        with contextlib.nullcontext(running) if running is not None else Engine(spec) as active:
            groups = group_tasks([estimated_seconds(c) for c in todo], active.workers) if todo else []
            tasks = [(function, [todo[i] for i in group]) for group in groups]
            before = len(active.failures)
            for _, group_results in active.imap(_run_group, tasks):
                for key, result in group_results:
                    if store.add(key, result) and bar is not None:
                        bar.update()
            for index, message in active.failures[before:]:
                failures.append(f"{', '.join(_cell_name(c) for c in tasks[index][1])}: {message}")
            if path is not None:  # a command writing its table: say where the work ran
                print(f"{desc}: {len(todo)} of {len(cells)} run(s) computed ({len(cells) - len(todo)} from the "
                      f"manifest); {active.summary()}", file=sys.stderr)
    finally:
        if bar is not None:
            bar.close()
        store.close()
    ordered = [(cell, *store.results[key]) for cell, key in zip(cells, keys, strict=True) if key in store.results]
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
        Where to run (:mod:`dpglm.engine.engine`); default local with ``jobs`` workers.
    jobs : int
        Local worker processes when ``engine`` is not given (1: in this process).
    progress : bool
        tqdm bar over cells.
    on_rows : callable, optional
        Called with each finished cell's rows (e.g. to print a running summary).

    Raises ``RuntimeError`` naming the cells that failed twice (after the others finished
    and were saved, so a rerun resumes them).
    """
    from dpglm.engine.engine import EngineSpec

    if engine is None:
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"jobs must be an int >= 1, got {jobs!r}")
        engine = EngineSpec("local", jobs)
    callback = None if on_rows is None else (lambda cell, rows, extra: on_rows(rows))
    ordered, failures = run_cells(sweep.cells(), run_cell, COLUMNS, out, engine=engine, progress=progress,
                                  on_result=callback)
    if failures:
        from dpglm.engine.engine import TaskFailures

        raise TaskFailures("cell(s)", failures)
    return [row for _, rows, _ in ordered for row in rows]


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a sweep table (CSV or Parquet) with numbers parsed back (empty cells stay ``""``)."""
    from dpglm.engine.results import read_table

    return read_table(path, numeric=set(COLUMNS) - {"algorithm", "preset", "family"})
