"""Where an audit's independent run-chunks are computed: in this process, or on a dask cluster.

An audit splits its runs into chunks, each with its own generator spawned from
the audit's seed (:meth:`audits.base.Audit.sample`), so the chunks are
independent and the numbers do not depend on where they are computed.
:func:`map_chunks` is the one seam between the audits and an execution
engine:

``"local"``
    This process, chunk after chunk (the vectorised mechanisms need nothing
    more); with ``n_jobs > 1``, joblib worker processes (the bandit audits,
    whose runs are Python loops over rounds).
``"dask"``
    ``dask.distributed``: the client already connected in this process
    (``dask.distributed.get_client``; :func:`engine_session` opens one for a
    whole command), else a local cluster of ``n_jobs`` single-threaded workers
    for the duration of the call. dask is not a dependency of dpglm; without it
    the call fails naming the package to install.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

__all__ = ["DASK_INSTALL", "ENGINES", "engine_session", "map_chunks", "require_engine"]

#: Execution engines known to :func:`map_chunks`.
ENGINES: tuple[str, ...] = ("local", "dask")
#: What to install for ``engine="dask"``.
DASK_INSTALL = 'pip install "dask[distributed]"'

Chunk = TypeVar("Chunk")
Result = TypeVar("Result")


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


@contextlib.contextmanager
def engine_session(engine: str, n_jobs: int = 1) -> Iterator[None]:
    """Keep one engine up across many :func:`map_chunks` calls (a whole ``dpglm audit`` command).

    ``"local"`` needs nothing (joblib reuses its worker pool by itself). ``"dask"``
    without a connected client starts one local cluster of ``n_jobs`` workers for
    the session, instead of one per call.
    """
    require_engine(engine)
    if engine == "local":
        yield
        return
    from dask.distributed import Client, get_client

    try:
        get_client()
    except ValueError:
        with Client(n_workers=n_jobs, threads_per_worker=1):
            yield
        return
    yield


def map_chunks(function: Callable[[Chunk], Result], chunks: Sequence[Chunk], *, engine: str = "local",
               n_jobs: int = 1) -> list[Result]:
    """``[function(chunk) for chunk in chunks]``, computed by ``engine``, in the order of ``chunks``.

    Parameters
    ----------
    function : callable
        Must be picklable for ``n_jobs > 1`` and for dask (a module-level
        function, or a ``functools.partial`` of a method of a picklable object).
    chunks : sequence
        Independent work items (each carries its own generator).
    engine : {"local", "dask"}
    n_jobs : int
        Worker processes (local, joblib) or workers of a new local dask cluster; ≥ 1.
    """
    require_engine(engine)
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise ValueError(f"n_jobs must be an int ≥ 1, got {n_jobs!r}")
    chunks = list(chunks)
    if engine == "local":
        if n_jobs == 1 or len(chunks) < 2:
            return [function(chunk) for chunk in chunks]
        from joblib import Parallel, delayed

        return list(Parallel(n_jobs=min(n_jobs, len(chunks)))(delayed(function)(chunk) for chunk in chunks))
    from dask.distributed import Client, get_client

    try:
        client = get_client()
    except ValueError:  # no client in this process: a local cluster for this call
        with Client(n_workers=n_jobs, threads_per_worker=1) as client:
            return list(client.gather(client.map(function, chunks, pure=False)))
    return list(client.gather(client.map(function, chunks, pure=False)))
