"""The trained half of a membership audit: inclusion masks, one fit per model on the engine, the resumable store.

Model j is trained on the examples its mask holds; mask j includes each example
independently with probability ½ (not an exact half: with exact halves "in" and "out"
would be replace-one neighbours, and an add/remove claim could then be exceeded with no
bug present). Model j's mask and its generator come from ``SeedSequence(seed,
spawn_key=(0, j))`` and ``(1, j)``: they depend only on the seed and j, so more models
later extend the same table, and a resumed audit equals an uninterrupted one.

A task carries ``fit``, ``score`` (functions that pickle by reference, or ``"MODULE:ATTR"``
strings resolved in the worker), the data, j and the seed; it returns model j's scores,
never the model (docs/engine.md, "what a task carries"). The store (``.npz``) keeps the
masks, the scores and the CPU seconds of the finished models, written after each one;
it holds per-example scores of the audited records, so it is the auditor's private file.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = ["ScoreTable", "check_callable", "inclusion_mask", "model_generator", "train_models"]

FitRef = Callable[..., Any] | str


def inclusion_mask(seed: int, index: int, examples: int) -> np.ndarray:
    """Model ``index``'s mask: each example in with probability ½, from ``SeedSequence(seed, spawn_key=(0, index))``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, index))).random(examples) < 0.5


def model_generator(seed: int, index: int) -> np.random.Generator:
    """The generator handed to ``fit`` for model ``index``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1, index)))


def _resolve(reference: FitRef, name: str) -> Callable[..., Any]:
    """A callable, or the attribute named by ``"MODULE:ATTR"`` (MODULE dotted, found from the current directory too)."""
    if callable(reference):
        return reference
    if not isinstance(reference, str):
        raise TypeError(f"{name} must be a function or 'MODULE:ATTR', got {type(reference).__name__}")
    module_name, sep, attribute = reference.rpartition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{name} must be a function or 'MODULE:ATTR', got {reference!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: object = importlib.import_module(module_name)
    except ImportError as error:
        raise ImportError(f"{name}: cannot import {module_name!r} ({error})") from None
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ValueError(f"{name}: {module_name!r} has no attribute {attribute!r}")
        value = getattr(value, part)
    if not callable(value):
        raise TypeError(f"{name}: {reference} is a {type(value).__name__}, not a function")
    return value


def check_callable(reference: FitRef, name: str, *, pickled: bool) -> Callable[..., Any]:
    """``reference`` resolved; with ``pickled`` (worker processes, dask) it must also pickle."""
    function = _resolve(reference, name)
    if pickled and not isinstance(reference, str):
        try:
            pickle.dumps(reference)
        except Exception as error:  # noqa: BLE001 - any pickling failure is the same user error
            raise TypeError(f"{name}: must pickle to run on worker processes (a top-level function, or "
                            f"'MODULE:ATTR'): {type(error).__name__}: {error}") from None
    return function


def _train(task: tuple[FitRef, FitRef, np.ndarray, np.ndarray, int, int]) -> tuple[int, Any, float, str | None]:
    """(j, model j's scores or None, CPU seconds, error or None): fit on mask j, score every example."""
    fit_ref, score_ref, X, y, index, seed = task
    fit, score = _resolve(fit_ref, "fit"), _resolve(score_ref, "score")
    mask = inclusion_mask(seed, index, len(y))
    start = time.process_time()
    try:
        model = fit(X[mask], y[mask], model_generator(seed, index))
    except Exception as error:  # noqa: BLE001 - reported in one line naming fit
        return index, None, 0.0, f"fit: raised {type(error).__name__} on model {index}: {error}"
    try:
        values = np.asarray(score(model, X, y))
    except Exception as error:  # noqa: BLE001 - reported in one line naming score
        return index, None, 0.0, f"score: raised {type(error).__name__} on model {index}: {error}"
    return index, values, time.process_time() - start, None


def check_model_scores(values: np.ndarray, examples: int, index: int) -> np.ndarray:
    """Model ``index``'s scores as a finite float (n,) array, or a one-line error naming ``score``."""
    if values.dtype.kind not in "biuf":
        raise TypeError(f"score: must return real numbers, got an array of dtype {values.dtype} on model {index}")
    if values.size == 1 and examples > 1:
        raise ValueError(f"score: returned one value on model {index}; it must return one value per example, "
                         f"shape ({examples},)")
    if values.shape != (examples,):
        raise ValueError(f"score: must return one value per example, shape ({examples},), got {values.shape} "
                         f"on model {index}")
    values = values.astype(float)
    bad = ~np.isfinite(values)
    if bad.any():
        kind = "NaN" if np.isnan(values[bad]).any() else "±inf"
        raise ValueError(f"score: returned {kind} for {int(bad.sum())} of {examples} examples on model {index} "
                         f"(first at example {int(np.flatnonzero(bad)[0])}); a score must be a finite number")
    return values


class ScoreTable:
    """Scores and masks of models 0..M−1, filled by :func:`train_models`, kept in an optional ``.npz`` store."""

    def __init__(self, models: int, examples: int, seed: int, fingerprint: str, store: str | None) -> None:
        self.models, self.examples, self.seed, self.fingerprint, self.store = models, examples, seed, fingerprint, store
        self.masks = np.stack([inclusion_mask(seed, j, examples) for j in range(models)]) if models else \
            np.zeros((0, examples), bool)
        self.scores = np.full((models, examples), np.nan)
        self.cpu = np.zeros(models)
        self.done = np.zeros(models, bool)
        if store is not None and os.path.exists(store):
            self._load(store)

    def _load(self, path: str) -> None:
        try:
            with np.load(path, allow_pickle=False) as saved:
                fingerprint, seed = str(saved["fingerprint"]), int(saved["seed"])
                masks, scores, cpu, done = saved["masks"], saved["scores"], saved["cpu"], saved["done"]
        except (OSError, KeyError, ValueError) as error:
            raise ValueError(f"store: {path} is not a membership-audit store ({error})") from None
        if fingerprint != self.fingerprint or seed != self.seed or masks.shape[1:] != (self.examples,):
            raise ValueError(f"store: {path} holds another audit's models (other data, fit, score or seed); "
                             "give another path or remove it")
        kept = min(self.models, masks.shape[0])
        if not np.array_equal(masks[:kept], self.masks[:kept]):
            raise ValueError(f"store: {path} has masks that its seed does not give; give another path or remove it")
        self.scores[:kept], self.cpu[:kept], self.done[:kept] = scores[:kept], cpu[:kept], done[:kept]

    def save(self) -> None:
        """Write the store atomically (a temporary file, then a rename): an interrupted write leaves the old one."""
        if self.store is None:
            return
        temporary = self.store + ".tmp.npz"
        np.savez(temporary, fingerprint=np.str_(self.fingerprint), seed=np.int64(self.seed), masks=self.masks,
                 scores=self.scores, cpu=self.cpu, done=self.done)
        os.replace(temporary, self.store)


def fingerprint(X: np.ndarray, y: np.ndarray, fit: FitRef, score: FitRef) -> str:
    """BLAKE2b of the data's bytes, shapes and dtypes and the names of ``fit`` and ``score``: what a store matches."""
    digest = hashlib.blake2b(digest_size=16)
    for array in (X, y):
        digest.update(f"{array.shape}{array.dtype}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    for function in (fit, score):
        digest.update(_name(function).encode())
    return digest.hexdigest()


def _name(function: FitRef) -> str:
    """``MODULE:ATTR`` as given; a function's module and qualified name; an instance's class and, when it is
    informative (a dataclass's fields, not ``<... at 0x...>``), its repr."""
    if isinstance(function, str):
        return function
    if hasattr(function, "__qualname__"):
        return f"{function.__module__}.{function.__qualname__}"
    kind = type(function)
    text = repr(function)
    return f"{kind.__module__}.{kind.__qualname__}" + ("" if " at 0x" in text else text)


@contextlib.contextmanager
def _engine(compute_engine: str, n_jobs: int) -> Iterator[Any]:
    """The session's engine if one is running (``dpglm audit``), else a new one closed on exit."""
    from dpglm.engine.engine import Engine, EngineSpec, current_engine

    running = current_engine()
    if running is not None:
        yield running
        return
    with Engine(EngineSpec(compute_engine, n_jobs)) as engine:
        yield engine


def train_models(table: ScoreTable, fit: FitRef, score: FitRef, X: np.ndarray, y: np.ndarray, *,
                 compute_engine: str = "local", n_jobs: int = 1, progress: bool = True, name: str = "") -> None:
    """Fit and score every model the table lacks, on the engine, saving the store after each; errors in one line.

    Progress is a bar on a terminal and whole lines in a log (:func:`dpglm.engine.progress.progress`).
    """
    from dpglm.engine.progress import progress as progress_bar

    missing = [j for j in range(table.models) if not table.done[j]]
    if not missing:
        return
    tasks = [(fit, score, X, y, j, table.seed) for j in missing]
    with _engine(compute_engine, n_jobs) as engine, \
            progress_bar(total=table.models, initial=table.models - len(missing), desc=name or "models",
                         unit="model", file=sys.stderr, disable=not progress) as bar:
        for _, (index, values, cpu, error) in engine.imap(_train, tasks):
            if error is not None:
                raise ValueError(" ".join(error.split()))
            table.scores[index] = check_model_scores(values, table.examples, index)
            table.cpu[index], table.done[index] = cpu, True
            table.save()
            bar.update(1)
        if engine.failures:
            index, message = engine.failures[0]
            raise RuntimeError(f"model {missing[index]} failed twice on the engine: {message}")
