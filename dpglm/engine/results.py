"""Result files of the experiments: tables (CSV or Parquet), strict JSON, the resume manifest.

* Tables have the same columns in both formats; CSV is the default, Parquet needs
  pyarrow (``pip install "dpglm[parquet]"``). Empty cells (a guarantee of a
  non-private run) are empty in CSV and null in Parquet.
* JSON is strict (RFC 8259): NaN and ±inf, which Python's ``json`` would write as
  the non-JSON ``NaN``/``Infinity``, become ``null``.
* The manifest (``<stem>.manifest.jsonl``) has one line per finished cell — its key
  and its rows — appended and flushed as the cell arrives; a rerun in the same
  folder computes only the cells whose keys it lacks (docs/engine.md, "resume").
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

__all__ = ["FORMATS", "Manifest", "prepare_output", "read_table", "strict_json", "table_path", "write_table"]

FORMATS = ("csv", "parquet")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        try:
            return _finite(value.item())
        except (TypeError, ValueError):
            return str(value)
    return value


def strict_json(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` with NaN/±inf as ``null`` and ``allow_nan=False`` (other objects as ``str``)."""
    return json.dumps(_finite(value), allow_nan=False, default=str, **kwargs)


def table_path(stem: str | Path, fmt: str) -> Path:
    """``stem`` with the suffix of ``fmt`` (``.csv`` or ``.parquet``)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    return Path(stem).with_suffix("." + fmt)


def write_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], path: str | Path) -> Path:
    """Write ``rows`` with ``columns`` to ``path`` (format from its suffix), atomically (temp + rename)."""
    path = Path(path)
    fmt = path.suffix.lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"table path must end in .csv or .parquet, got {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    if fmt == "csv":
        with open(temporary, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    else:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as error:
            raise ImportError('--format parquet needs pyarrow: pip install "dpglm[parquet]"') from error
        data = {c: [None if r.get(c, "") == "" else r.get(c) for r in rows] for c in columns}
        pq.write_table(pa.table(data), temporary)
    os.replace(temporary, path)
    return path


def prepare_output(out: str | Path, fmt: str | None = None, *, flag: str = "--out") -> Path:
    """Check a command's output arguments before any work, and make the directory ``out``.

    ``fmt`` (``--format``) must be one of :data:`FORMATS`, and ``parquet`` needs pyarrow
    importable; ``out`` must be a directory or creatable as one, and writable. Each error
    is one line naming the flag (``--out: results/x exists and is a file``), raised before a
    single run is computed (issue 26).
    """
    if fmt is not None:
        if fmt not in FORMATS:
            raise ValueError(f"--format: must be one of {', '.join(FORMATS)}, got {fmt!r}")
        if fmt == "parquet":
            try:
                import pyarrow.parquet  # noqa: F401  # only to check that it can be written
            except ImportError:
                raise ImportError('--format parquet needs pyarrow: pip install "dpglm[parquet]"') from None
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{flag}: {path} exists and is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"{flag}: cannot create the directory {path}: {error.strerror or error}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"{flag}: the directory {path} is not writable")
    return path


def read_table(path: str | Path, numeric: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Rows of a table written by :func:`write_table`; CSV values in ``numeric`` parsed as floats."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return [{k: ("" if v is None else v) for k, v in row.items()} for row in pq.read_table(path).to_pylist()]
    numeric = set(numeric)
    with open(path, newline="", encoding="utf-8") as handle:
        return [{k: (float(v) if k in numeric and v != "" else v) for k, v in row.items()}
                for row in csv.DictReader(handle)]


class Manifest:
    """The finished cells of a sweep in ``path`` (JSON Lines: ``{"key", "rows", "extra"}``).

    Loading ignores a last line cut by a kill (the cell is simply rerun); each
    key is recorded once (a retried task that finishes twice is kept once).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.done: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            with open(self.path, encoding="utf-8") as handle:
                for line in handle:
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line cut by a kill
                    self.done.setdefault(entry["key"], entry)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - open for the sweep, closed by close()

    def add(self, key: str, rows: list[dict[str, Any]], extra: Any = None) -> bool:
        """Record a finished cell (flushed before returning); False if ``key`` was already there."""
        if key in self.done:
            return False
        entry = {"key": key, "rows": rows, "extra": extra}
        self._handle.write(json.dumps(entry) + "\n")  # internal: keeps inf exactly (read back by Python)
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.done[key] = entry
        return True

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
