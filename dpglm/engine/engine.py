"""Where work runs: one engine for every sweep and audit (docs/engine.md).

An :class:`Engine` maps a picklable function over independent tasks and yields
``(index, result)`` pairs *as they complete*, so callers write results as they
arrive. Engines:

``local``
    ``jobs == 1``: this process, task after task. ``jobs > 1``: a pool of
    ``jobs`` worker processes (``concurrent.futures``, spawn start method),
    shut down when the engine closes, so no worker outlives the command.
``dask``
    ``dask.distributed``: the cluster at ``address`` (``tcp://HOST:PORT``) or
    named by ``scheduler_file``, else a local cluster of ``jobs``
    single-threaded workers started for the engine's lifetime (and closed with
    it). dask is an extra: ``pip install "dpglm[dask]"``.

Every worker runs with BLAS/OpenMP/torch pinned to one thread, so the numbers
are bitwise the same on every engine. A task that raises, or whose worker is
lost, is retried once; if it fails again its error is recorded once in
:attr:`Engine.failures` and the other tasks go on.

This module imports nothing heavy at import time (it is imported by the command
line before any numerical library).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

__all__ = ["DASK_INSTALL", "ENGINES", "Engine", "EngineSpec", "TaskFailures", "add_engine_arguments", "current_engine",
           "engine_from_args", "group_tasks", "pin_threads", "require_engine"]

#: Execution engines.
ENGINES: tuple[str, ...] = ("local", "dask")
#: What to install for ``engine="dask"``.
DASK_INSTALL = 'pip install "dpglm[dask]"  (or: pip install "dask[distributed]")'
#: Environment variables that pin numerical libraries to one thread in a worker.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                    "NUMEXPR_NUM_THREADS")
#: Attempts per task (the first run and one retry).
ATTEMPTS = 2


class TaskFailures(RuntimeError):
    """Some tasks failed twice; the others finished (and were saved). The command exits 1."""

    def __init__(self, what: str, failures: list[str]) -> None:
        self.failures = list(failures)
        super().__init__(f"{len(failures)} {what} failed twice (rerun with the same --out to retry only them); "
                         f"first: {failures[0]}")


def pin_threads() -> None:
    """One thread for BLAS, OpenMP and torch in this process (a worker's first act).

    Environment variables only take effect before the libraries load; torch, if
    already loaded, is told directly.
    """
    for name in THREAD_VARIABLES:
        os.environ[name] = "1"
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def require_engine(engine: str) -> None:
    """Check that ``engine`` is known and importable; ``ImportError`` naming the extra otherwise."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if engine == "dask":
        try:
            importlib.import_module("dask.distributed")
        except ImportError as error:
            raise ImportError(f"engine 'dask' needs dask.distributed, which is not installed: "
                              f"{DASK_INSTALL} (or use --engine local)") from error


@dataclass(frozen=True)
class EngineSpec:
    """Where to run: engine name, worker count, and (dask) the cluster to join."""

    engine: str = "local"
    jobs: int = 1
    address: str | None = None
    scheduler_file: str | None = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {self.engine!r}")
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 1:
            raise ValueError(f"jobs must be an int >= 1, got {self.jobs!r}")
        if self.address is not None and self.scheduler_file is not None:
            raise ValueError("give at most one of address and scheduler_file")
        if (self.address is not None or self.scheduler_file is not None) and self.engine != "dask":
            raise ValueError("address and scheduler_file need engine 'dask'")
        if self.address is not None and "://" not in self.address:
            raise ValueError(f"address must look like tcp://HOST:PORT, got {self.address!r}")
        if self.scheduler_file is not None and not os.path.isfile(self.scheduler_file):
            raise ValueError(f"scheduler_file {self.scheduler_file!r} does not exist")


def _call(function: Callable[[Any], Any], task: Any) -> tuple[Any, int]:
    """Run one task in a worker: pinned threads, result and the worker's process id."""
    pin_threads()
    return function(task), os.getpid()


@dataclass
class Engine:
    """A running engine (a context manager); see the module docstring.

    Attributes
    ----------
    failures : list of (index, message)
        Tasks that failed twice, each recorded once.
    pids : set of int
        Process ids the tasks ran in (the cluster test checks ≥ 2 workers).
    """

    spec: EngineSpec = field(default_factory=EngineSpec)
    failures: list[tuple[int, str]] = field(default_factory=list)
    pids: set[int] = field(default_factory=set)
    _pool: Any = None
    _client: Any = None
    _cluster: Any = None

    @property
    def workers(self) -> int:
        """Parallel slots: ``jobs`` locally, the cluster's total worker threads on dask."""
        if self.spec.engine == "local":
            return self.spec.jobs
        return max(1, sum(self._dask_client().nthreads().values()))

    def summary(self) -> str:
        """One line: where the work ran, in how many processes, and what failed."""
        spec = self.spec
        where = spec.address or (f"scheduler file {spec.scheduler_file}" if spec.scheduler_file else None)
        if spec.engine == "local":
            place = "this process" if spec.jobs == 1 else f"{spec.jobs} local worker processes"
        else:
            place = f"dask at {where}" if where else f"a local dask cluster of {spec.jobs} workers"
        failed = f"; {len(self.failures)} task(s) failed twice" if self.failures else ""
        if not self.pids and not self.failures:
            return f"engine: {place}; no task was sent to it (all the work fitted in this process)"
        return f"engine: {place}; tasks ran in {len(self.pids)} process(es){failed}"

    # -- lifetime ----------------------------------------------------------------------------
    def __enter__(self) -> Self:
        require_engine(self.spec.engine)
        _STACK.append(self)
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        _STACK.remove(self)
        self.close(abort=kind is not None)

    def close(self, abort: bool = False) -> None:
        """Stop every worker this engine started (an external cluster is only disconnected).

        ``abort`` (an exception or Ctrl-C is unwinding): local workers are terminated
        instead of being waited for, so an interrupted command stops at once (its
        finished cells are already in the manifest).
        """
        if self._pool is not None:
            if abort:
                for process in list(getattr(self._pool, "_processes", {}).values()):
                    process.terminate()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def _local_pool(self, restart: bool = False):
        if restart and self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(self.spec.jobs, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=pin_threads)
        return self._pool

    def _dask_client(self):
        if self._client is None:
            from dask.distributed import Client, LocalCluster

            if self.spec.address is not None:
                self._client = Client(self.spec.address)
            elif self.spec.scheduler_file is not None:
                self._client = Client(scheduler_file=self.spec.scheduler_file)
            else:
                self._cluster = LocalCluster(n_workers=self.spec.jobs, threads_per_worker=1, processes=True,
                                             dashboard_address=None, env={v: "1" for v in THREAD_VARIABLES})
                self._client = Client(self._cluster)
        return self._client

    # -- mapping -----------------------------------------------------------------------------
    def imap(self, function: Callable[[Any], Any], tasks: Sequence[Any], *,
             parallel: bool = True) -> Iterator[tuple[int, Any]]:
        """``(i, function(tasks[i]))`` for every task that succeeds, in completion order.

        ``parallel=False`` (or one task, or local with ``jobs == 1``) computes in
        this process. ``function`` must be picklable (module level) otherwise.
        """
        tasks = list(tasks)
        if not tasks:
            return
        if self.spec.engine == "local" and (self.spec.jobs == 1 or not parallel or len(tasks) == 1):
            yield from self._serial(function, tasks)
        elif self.spec.engine == "local":
            yield from self._processes(function, tasks)
        else:
            yield from self._dask(function, tasks)

    def map(self, function: Callable[[Any], Any], tasks: Sequence[Any], **kwargs: Any) -> list[Any]:
        """``[function(t) for t in tasks]`` in task order; raises if a task failed twice."""
        tasks = list(tasks)
        before = len(self.failures)
        results = dict(self.imap(function, tasks, **kwargs))
        if len(self.failures) > before:
            index, message = self.failures[before]
            raise RuntimeError(f"task {index} failed twice: {message}")
        return [results[i] for i in range(len(tasks))]

    def _serial(self, function: Callable[[Any], Any], tasks: list[Any]) -> Iterator[tuple[int, Any]]:
        for index, task in enumerate(tasks):
            for attempt in range(ATTEMPTS):
                try:
                    result = function(task)
                except Exception as error:  # noqa: BLE001 - recorded, retried once
                    if attempt + 1 == ATTEMPTS:
                        self.failures.append((index, f"{type(error).__name__}: {error}"))
                    continue
                self.pids.add(os.getpid())
                yield index, result
                break

    def _processes(self, function: Callable[[Any], Any], tasks: list[Any]) -> Iterator[tuple[int, Any]]:
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        attempts = [0] * len(tasks)
        pending: dict[Any, int] = {}
        queue = list(range(len(tasks)))
        while queue or pending:
            pool = self._local_pool()
            for index in queue:
                attempts[index] += 1
                pending[pool.submit(_call, function, tasks[index])] = index
            queue = []
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            broken = False
            for future in done:
                index = pending.pop(future)
                try:
                    result, pid = future.result()
                except BrokenProcessPool as error:  # a worker died: every pending task is lost
                    broken = True
                    self._retry_or_record(index, attempts, queue, error)
                    continue
                except Exception as error:  # noqa: BLE001 - recorded, retried once
                    self._retry_or_record(index, attempts, queue, error)
                    continue
                self.pids.add(pid)
                yield index, result
            if broken:
                for index in list(pending.values()):
                    self._retry_or_record(index, attempts, queue, RuntimeError("worker lost"))
                pending.clear()
                self._local_pool(restart=True)

    def _dask(self, function: Callable[[Any], Any], tasks: list[Any]) -> Iterator[tuple[int, Any]]:
        from dask.distributed import as_completed

        client = self._dask_client()
        # retries=1: dask reruns a task that raised once; a task on a lost worker is rescheduled by the scheduler.
        futures = client.map(_call, [function] * len(tasks), tasks, pure=False, retries=ATTEMPTS - 1)
        index_of = {future.key: index for index, future in enumerate(futures)}
        for future in as_completed(futures):
            index = index_of[future.key]
            try:
                result, pid = future.result()
            except Exception as error:  # noqa: BLE001 - failed twice: recorded once
                self.failures.append((index, f"{type(error).__name__}: {error}"))
                continue
            finally:
                future.release()
            self.pids.add(pid)
            yield index, result

    def _retry_or_record(self, index: int, attempts: list[int], queue: list[int], error: BaseException) -> None:
        if attempts[index] < ATTEMPTS:
            queue.append(index)
        else:
            self.failures.append((index, f"{type(error).__name__}: {error}"))


_STACK: list[Engine] = []


def current_engine() -> Engine | None:
    """The innermost engine opened with ``with Engine(...)`` in this process, if any."""
    return _STACK[-1] if _STACK else None


@contextlib.contextmanager
def open_engine(spec: EngineSpec) -> Iterator[Engine]:
    """``with open_engine(spec) as engine``: the engine, closed (workers stopped) on exit."""
    with Engine(spec) as engine:
        yield engine


def group_tasks(costs: Sequence[float], workers: int, *, target_seconds: float = 1.0) -> list[list[int]]:
    """Consecutive groups of item indices, each of estimated cost ≥ ``target_seconds`` where possible.

    The target shrinks when the whole job is too small to give every worker a
    group (total / workers), so parallelism is never thrown away for the sake of
    the target; every item lands in exactly one group, in order.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    total = float(sum(costs))
    target = min(target_seconds, total / workers) if total > 0 else 0.0
    groups: list[list[int]] = []
    current: list[int] = []
    load = 0.0
    for index, cost in enumerate(costs):
        current.append(index)
        load += cost
        if load >= target:
            groups.append(current)
            current, load = [], 0.0
    if current:
        groups.append(current)
    return groups


def add_engine_arguments(parser: argparse.ArgumentParser, *, jobs: int = 2) -> None:
    """``--engine``, ``--jobs``, ``--address``, ``--scheduler-file``: the same on every command."""
    group = parser.add_argument_group("where work runs (docs/engine.md)")
    group.add_argument("--engine", choices=ENGINES, default="local",
                       help="'local': this process (--jobs 1) or --jobs worker processes; 'dask': "
                            f"dask.distributed ({DASK_INSTALL}); default local")
    group.add_argument("--jobs", type=int, default=jobs,
                       help=f"worker processes, or workers of a new local dask cluster (default {jobs})")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--address", default=None, metavar="tcp://HOST:PORT",
                       help="a running dask scheduler to send the work to (implies --engine dask)")
    where.add_argument("--scheduler-file", default=None, metavar="FILE",
                       help="a dask scheduler file (dask scheduler --scheduler-file FILE; implies --engine dask)")


def engine_from_args(args: argparse.Namespace) -> EngineSpec:
    """The :class:`EngineSpec` of parsed :func:`add_engine_arguments` flags.

    ``--address`` or ``--scheduler-file`` implies dask; ``--engine dask`` without
    either joins ``DASK_SCHEDULER_ADDRESS`` when that is set, else starts a local
    cluster of ``--jobs`` workers.
    """
    engine, address = args.engine, args.address
    if engine == "dask" and address is None and args.scheduler_file is None:
        address = os.environ.get("DASK_SCHEDULER_ADDRESS") or None  # dask's own convention
    if address is not None or args.scheduler_file is not None:
        engine = "dask"
    if isinstance(args.jobs, bool) or args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    spec = EngineSpec(engine, args.jobs, address, args.scheduler_file)
    require_engine(spec.engine)
    return spec


def run_tasks(function: Callable[[Any], Any], tasks: Iterable[Any], spec: EngineSpec | None = None) -> list[Any]:
    """``[function(t) for t in tasks]`` on the current engine, or on a new one from ``spec`` (local serial)."""
    engine = current_engine()
    if engine is not None:
        return engine.map(function, list(tasks))
    with Engine(spec or EngineSpec()) as engine:
        return engine.map(function, list(tasks))
