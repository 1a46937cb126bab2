"""Where an audit's independent run-chunks are computed: the project's one engine.

An audit splits its runs into chunks, each with its own generator spawned from
the audit's seed (:meth:`audits.base.Audit.sample`), so the chunks are
independent and the numbers do not depend on where they are computed.
:func:`map_chunks` is the one seam between the audits and
:mod:`dpglm.engine.engine` (``local``: this process or worker processes;
``dask``: dask.distributed, local or at an address). Inside
:func:`engine_session` (a whole ``dpglm audit`` command) every call uses the
session's engine; outside, a call opens an engine for itself and stops its
workers before returning. A task carries the audit's recipe, never a ledger
(docs/engine.md, "what a task carries").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from accounting.validation import check_int
from dpglm.engine.engine import (
    DASK_INSTALL,
    ENGINES,
    Engine,
    EngineSpec,
    current_engine,
    require_engine,
)

__all__ = ["DASK_INSTALL", "ENGINES", "engine_session", "map_chunks", "require_engine"]

Chunk = TypeVar("Chunk")
Result = TypeVar("Result")


@contextlib.contextmanager
def engine_session(engine: str | EngineSpec, n_jobs: int = 1) -> Iterator[Engine]:
    """Keep one engine up across many :func:`map_chunks` calls; its workers stop on exit."""
    spec = engine if isinstance(engine, EngineSpec) else EngineSpec(engine, n_jobs)
    with Engine(spec) as running:
        yield running


def map_chunks(function: Callable[[Chunk], Result], chunks: Sequence[Chunk], *, engine: str = "local",
               n_jobs: int = 1) -> list[Result]:
    """``[function(chunk) for chunk in chunks]``, computed by the session's engine (else ``engine``), in order.

    Parameters
    ----------
    function : callable
        Picklable for ``n_jobs > 1`` and for dask (a module-level function, or a
        ``functools.partial`` of a method of an audit, which pickles as its recipe).
    chunks : sequence
        Independent work items (each carries its own generator).
    engine : {"local", "dask"}
    n_jobs : int
        Worker processes (local) or workers of a new local dask cluster; ≥ 1.
    """
    require_engine(engine)
    check_int("n_jobs", n_jobs)
    chunks = list(chunks)
    running = current_engine()
    if running is not None:
        return running.map(function, chunks)
    with Engine(EngineSpec(engine, n_jobs)) as running:
        return running.map(function, chunks)
