"""Seeds of experiment cells: a stable hash of the cell's own parameters.

Every cell of a sweep draws its randomness from
``numpy.random.SeedSequence(root, spawn_key=cell_key(...))``, where the key is a
hash of what the cell *is* (its algorithm, instance, ε, seed index, …), never its
position in a grid. So adding, removing or reordering cells changes no other
cell's numbers, and a cell gives the same numbers wherever and in whatever order
it runs (serial, worker processes, dask; docs/engine.md, "seeds").
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import numpy as np

__all__ = ["cell_key", "cell_seed"]


def _canonical(value: Any) -> Any:
    """A JSON-stable form: floats by their shortest repr (``2`` and ``2.0`` differ from each other
    only if their types do), non-finite floats as strings, mappings sorted, sequences as lists."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    raise TypeError(f"cell parameters must be numbers, strings, sequences or dicts, got {type(value).__name__}")


def cell_key(*parts: Any) -> tuple[int, ...]:
    """Four 32-bit words of BLAKE2b over the canonical JSON of ``parts``: a spawn key."""
    text = json.dumps(_canonical(list(parts)), sort_keys=True, separators=(",", ":"))
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
    return tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4))


def cell_seed(root: int, *parts: Any) -> np.random.SeedSequence:
    """``SeedSequence(root, spawn_key=cell_key(*parts))``."""
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or root < 0:
        raise ValueError(f"root seed must be an int >= 0, got {root!r}")
    return np.random.SeedSequence(int(root), spawn_key=cell_key(*parts))
