"""An on-disk cache of shuffle noise calibrations, verified on every load (issue 26).

Calibrating a shuffle protocol's noise bits searches over PLD accountings (seconds per
search at d = 10), and every process of a sweep repeats it. Results are kept as one JSON
file per search under the cache directory: ``$DPGLM_CACHE_DIR`` if set (an empty value
turns the cache off), else ``$XDG_CACHE_HOME/dpglm``, else ``~/.cache/dpglm``.

The cache is on the privacy path: a stale or damaged entry could mean too little noise.
So an entry is keyed by the search's exact arguments plus the versions of dpglm and
dp-accounting (the whole key is stored in the file and compared, not only its hash), and
a loaded value is used only after ONE forward accounting call confirms it meets the
target (``verify``); any failure (missing, unreadable, truncated, another key, a value
that does not verify) recomputes and rewrites the entry. Writes go to a temporary file
in the same directory, fsynced, then ``os.replace``: concurrent workers each write a
whole file and the last rename wins, so a reader never sees half an entry. A cache that
cannot be written is skipped silently (the calibration itself never fails because of it).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ENV_VAR", "cache_dir", "cached_calibration"]

ENV_VAR = "DPGLM_CACHE_DIR"


def cache_dir() -> Path | None:
    """The cache directory (``None``: caching turned off by an empty ``$DPGLM_CACHE_DIR``)."""
    explicit = os.environ.get(ENV_VAR)
    if explicit is not None:
        return Path(explicit) if explicit else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dpglm"


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for package in ("dpglm", "dp-accounting"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "unknown"
    return out


def _load(path: Path, key: str) -> int | None:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    value = entry.get("value")
    return value if type(value) is int else None


def _store(directory: Path, path: Path, key: str, value: int) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"key": key, "value": value}, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError:
        return


def cached_calibration(name: str, arguments: dict[str, Any], compute: Callable[[], int],
                       verify: Callable[[int], bool]) -> int:
    """``compute()``, or the cached value for (``name``, ``arguments``, versions) if ``verify`` accepts it.

    ``arguments`` must be JSON values (floats are written as their shortest repr, so the
    key is exact). ``verify(value)`` is one forward accounting call: True only if the
    value meets the calibration's target. A value that fails it is recomputed, never used.
    """
    directory = cache_dir()
    if directory is None:
        return compute()
    key = json.dumps({"name": name, "arguments": arguments, "versions": _versions()}, sort_keys=True)
    path = directory / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:40]}.json"
    value = _load(path, key)
    if value is not None and verify(value):
        return value
    value = compute()
    _store(directory, path, key, value)
    return value
