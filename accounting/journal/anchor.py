"""The anchor: the last row of a journal, recorded outside the journal file.

A hash chain (:mod:`accounting.journal.rows`) proves that the rows of a journal are
the rows that were written, in order; it cannot see rows that are *missing at
the end* — a file cut at a row boundary, or an older complete copy restored
over a newer one. The anchor closes that gap: a small file holds the journal
id, the sequence number and the hash of the last durable row. At open, the
journal must contain the anchored row with the anchored hash; a journal that
ends before it has lost granted charges and is refused. Two anchors of this
format exist: ``PATH.anchor`` beside a file journal, and the host's witness of
every journal (:mod:`accounting.journal.witness`). docs/threat-model.md says
what each covers.

Format: two fixed 256-byte slots; row ``seq`` is written to slot ``seq % 2``
with a checksum, so a torn write leaves the other slot (the previous row)
readable. The valid slot with the larger ``seq`` is the anchor.

When it is written (docs/threat-model.md, "How often the anchor and the witness
are written"): :meth:`AnchorFile.advance` after every charge, once the charge's
row is durable, and never backwards; it is a ``pwrite`` into the page cache,
visible at once to every process of the host, and flushed to disk by the next
advance of a process whose last flush is :data:`SYNC_SECONDS` old, at close,
or else by the kernel's writeback. An anchor is
therefore never ahead of the durable journal — a power loss can leave it
behind, never ahead, so it never refuses a journal that lost nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from dataclasses import dataclass

__all__ = ["SYNC_SECONDS", "Anchor", "AnchorFile", "anchor_path"]

SYNC_SECONDS = 1.0
"""A process flushes an anchor it advanced if its last flush of it is this old (docs/threat-model.md)."""

_SLOT = 256
_MAGIC = "dpglm-anchor-1"


def anchor_path(journal_path: str) -> str:
    """Where the anchor of ``journal_path`` lives: ``journal_path + ".anchor"``.

    The journal passes its *real* path (symlinks resolved), so every path that
    reaches one journal file finds the one anchor (docs/threat-model.md).
    """
    return journal_path + ".anchor"


@dataclass(frozen=True)
class Anchor:
    """The journal id and the last row (``seq``, ``digest``); seq 0 is the header."""

    journal_id: str
    seq: int
    digest: str


def _encode(anchor: Anchor) -> bytes:
    body = f"{_MAGIC} {anchor.journal_id} {anchor.seq} {anchor.digest}"
    check = hashlib.sha256(body.encode()).hexdigest()[:16]
    line = f"{body} {check}\n".encode()
    if len(line) > _SLOT:
        raise ValueError(f"anchor record is {len(line)} bytes, more than a slot ({_SLOT})")
    return line.ljust(_SLOT, b" ")


def _decode(slot: bytes) -> Anchor | None:
    try:
        magic, journal_id, seq, digest, check = slot.decode().split()
    except (UnicodeDecodeError, ValueError):
        return None
    body = f"{magic} {journal_id} {seq} {digest}"
    if magic != _MAGIC or hashlib.sha256(body.encode()).hexdigest()[:16] != check or not seq.isdigit():
        return None
    return Anchor(journal_id, int(seq), digest)


def read_anchor(path: str) -> Anchor | None:
    """The anchor stored at ``path``, or None if the file is missing; ``ValueError`` if unreadable."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(2 * _SLOT)
    except FileNotFoundError:
        return None
    return _best(path, data)


def _best(path: str, data: bytes) -> Anchor:
    slots = [_decode(data[i * _SLOT:(i + 1) * _SLOT]) for i in range(2)]
    valid = [slot for slot in slots if slot is not None]
    if not valid:
        raise ValueError(f"anchor {path} holds no valid record ({len(data)} bytes)")
    return max(valid, key=lambda slot: slot.seq)


class AnchorFile:
    """An open anchor: read, advanced after every durable row, flushed about once every :data:`SYNC_SECONDS`.

    The anchor's size never changes after :meth:`reset`, so ``fdatasync``
    (data only, where the platform has it) is as durable as ``fsync`` here.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.identity = _identity(os.fstat(self._fd))
        self._bytes = b""
        self._last: Anchor | None = None
        self._synced = time.monotonic()
        self._dirty = False

    def read(self) -> Anchor | None:
        """The anchor as the file holds it now (None if empty); ``ValueError`` if no slot is valid.

        The bytes last read or written are remembered, so an anchor no other
        process has rewritten since is not decoded again.
        """
        data = os.pread(self._fd, 2 * _SLOT, 0)
        if data != self._bytes:
            self._bytes, self._last = data, (_best(self.path, data) if data else None)
        return self._last

    def write(self, anchor: Anchor) -> None:
        """Record ``anchor`` in slot ``seq % 2`` (a ``pwrite``; :meth:`advance` decides when it is flushed)."""
        record, at = _encode(anchor), (anchor.seq % 2) * _SLOT
        os.pwrite(self._fd, record, at)
        self._dirty = True
        if len(self._bytes) == 2 * _SLOT:
            self._bytes, self._last = self._bytes[:at] + record + self._bytes[at + _SLOT:], anchor

    def advance(self, anchor: Anchor) -> bool:
        """Record ``anchor`` if it is beyond the anchor recorded for the same journal; never move back.

        Writers of one file (every process of the host) take turns on its
        ``flock``, so the larger row always wins. An anchor of another journal
        id is left alone (the next check refuses the journal). Flushed if the
        last flush by this process is :data:`SYNC_SECONDS` old. Returns whether
        it wrote.
        """
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            current = self.read()
            wrote = current is None or (current.journal_id == anchor.journal_id and current.seq < anchor.seq)
            if wrote:
                if current is None:
                    self.reset(anchor)
                else:
                    self.write(anchor)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        if self._dirty and time.monotonic() - self._synced >= SYNC_SECONDS:
            self.sync()
        return wrote

    def sync(self) -> None:
        """Flush what this process wrote (``fdatasync``)."""
        _datasync(self._fd)
        self._synced, self._dirty = time.monotonic(), False

    def reset(self, anchor: Anchor) -> None:
        """Write ``anchor`` to both slots and flush (a new journal, or re-anchoring a journal that had none)."""
        record = _encode(anchor)
        os.pwrite(self._fd, record + record, 0)
        os.ftruncate(self._fd, 2 * _SLOT)
        os.fsync(self._fd)
        self._bytes, self._last = record + record, anchor
        self._synced, self._dirty = time.monotonic(), False

    def close(self) -> None:
        """Flush anything written since the last flush, and close."""
        if self._fd >= 0:
            try:
                if self._dirty:
                    with contextlib.suppress(OSError):  # unflushed, it can only lag behind: never refuses
                        self.sync()
            finally:
                os.close(self._fd)
                self._fd = -1


_datasync = getattr(os, "fdatasync", os.fsync)


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return (stat.st_dev, stat.st_ino)
