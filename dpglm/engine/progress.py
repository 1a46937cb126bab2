"""Progress of a long command: a tqdm bar on a terminal, plain lines in a log.

tqdm redraws its bar with carriage returns; where stderr is a file or a pipe (a log, CI, ``2>&1 | tee``)
those redraws pile up on one line and run into the result lines printed beside them. :func:`progress`
returns a tqdm bar when its stream is a terminal and otherwise a :class:`LineProgress`, which writes one
complete line each time another tenth of the work is done (and at most every minute between), so a log
reads ``audits: 3/8 audits (38%) after 41 s``. Both iterate like the iterable given and have ``update``
and ``close``. The lines carry counts and times only, never a value computed from data.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Sized
from typing import Any, TextIO

__all__ = ["LineProgress", "progress"]

#: A line in a log at least this often (seconds) while the work goes on, even between tenths.
LINE_INTERVAL = 60.0


def progress(iterable: Iterable[Any] | None = None, *, total: int | None = None, initial: int = 0, desc: str = "",
             unit: str = "it", disable: bool = False, leave: bool = True, file: TextIO | None = None) -> Any:
    """A tqdm bar on ``file`` (default stderr) if it is a terminal, else a :class:`LineProgress`; nothing if
    ``disable``. ``total`` defaults to ``len(iterable)`` where it has one."""
    stream = sys.stderr if file is None else file
    if total is None and isinstance(iterable, Sized):
        total = len(iterable)
    if not disable and _is_terminal(stream):
        from tqdm import tqdm

        return tqdm(iterable, total=total, initial=initial, desc=desc, unit=unit, leave=leave, file=stream)
    return LineProgress(iterable, total=total, initial=initial, desc=desc, unit=unit, file=stream, silent=disable)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class LineProgress:
    """Progress as whole lines: ``desc: n/total units (p%) after s s`` at each tenth of ``total`` and the end."""

    def __init__(self, iterable: Iterable[Any] | None = None, *, total: int | None = None, initial: int = 0,
                 desc: str = "", unit: str = "it", file: TextIO | None = None, silent: bool = False) -> None:
        self.iterable, self.total, self.n = iterable, total, initial
        self.desc, self.unit, self.file, self.silent = desc, unit, sys.stderr if file is None else file, silent
        self._start = self._last = time.monotonic()
        self._tenths = self._tenth(initial)
        self._closed = False

    def _tenth(self, n: int) -> int:
        return 10 * n // self.total if self.total else 0

    def __iter__(self) -> Iterator[Any]:
        if self.iterable is None:
            raise TypeError("LineProgress was given no iterable to iterate over")
        try:
            for item in self.iterable:
                yield item
                self.update()
        finally:
            self.close()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more done; write a line if another tenth is done or a minute has passed since the last."""
        self.n += n
        now, tenths = time.monotonic(), self._tenth(self.n)
        if tenths > self._tenths or now - self._last >= LINE_INTERVAL:
            self._tenths = tenths
            if not (self.total and self.n >= self.total):  # the last line is close()'s
                self._write(now)

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Write the final line (once)."""
        if not self._closed:
            self._closed = True
            self._write(time.monotonic())

    def _write(self, now: float) -> None:
        self._last = now
        if self.silent:
            return
        share = f"/{self.total} {self.unit}s ({100 * self.n // self.total}%)" if self.total else f" {self.unit}s"
        print(f"{self.desc}: {self.n}{share} after {now - self._start:.0f} s", file=self.file, flush=True)
