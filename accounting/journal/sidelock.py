"""The file journal's cross-process lock, and the check that the journal's filesystem is local.

Every charge on a file journal (:mod:`accounting.journal.sqlite`) is one transaction
taken under an exclusive ``flock`` on a side file, ``REALPATH.lock``
(docs/threat-model.md, "Charging is a transaction"):

- ``flock`` locks belong to the open file description, not to the process:
  closing some *other* descriptor of the file never releases them (a plain
  ``fcntl``/POSIX lock is released by any close of any descriptor of the file
  in the process, which is how issue 21's overspend happened). Each
  :class:`SideLock` opens its own description, so two ledgers in one process,
  or in two threads, exclude each other as two processes do.
- It is what makes waiting fair: a process waiting here sleeps in the kernel
  and is woken when the holder releases, where SQLite's busy handler polls and
  starves the slow. SQLite's own write lock (``BEGIN IMMEDIATE``) is still
  taken inside, so correctness never rests on this lock alone.
- A lock file deleted or replaced while held is noticed after locking (the
  path no longer names the locked file) and the lock is taken again on the
  file the path now names.

A file journal serves one host: locks and SQLite's shared memory are not
reliable on network filesystems, so :func:`refuse_network_filesystem` refuses
NFS, SMB/CIFS, sshfs and the like by the filesystem type ``/proc/mounts`` gives.
"""

from __future__ import annotations

import fcntl
import os

__all__ = ["NETWORK_FILESYSTEMS", "SideLock", "filesystem_type", "refuse_network_filesystem"]

NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb", "smb2", "smb3", "smbfs", "ncpfs", "afs", "coda", "9p", "ceph", "glusterfs",
    "lustre", "gfs2", "ocfs2", "beegfs", "gpfs", "fuse.sshfs", "fuse.glusterfs", "fuse.cephfs", "fuse.s3fs",
    "fuse.gcsfuse", "fuse.rclone", "fuse.davfs", "davfs", "fuse.juicefs", "fuse.lizardfs", "fuse.moosefs",
})


class NetworkFilesystemError(OSError):
    """A file journal on a network filesystem, where its locks are not reliable."""


def _unescape(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def filesystem_type(path: str, mounts: str = "/proc/mounts") -> str | None:
    """The type of the filesystem holding ``path`` (the longest mount point above it), None if unknown."""
    try:
        with open(mounts, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    best, found = -1, None
    target = os.path.realpath(path)
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _unescape(fields[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, found = len(point), fields[2]
    return found


def refuse_network_filesystem(path: str, what: str) -> None:
    """Raise :class:`NetworkFilesystemError` if ``path``'s directory is on a network filesystem."""
    kind = filesystem_type(os.path.dirname(os.path.realpath(path)) or ".")
    if kind is not None and (kind in NETWORK_FILESYSTEMS or kind.split(".")[0] in ("nfs", "cifs", "smb3")):
        raise NetworkFilesystemError(
            f"{what} {path} is on a network filesystem ({kind}): a file journal serves one host, and its locks are "
            "not reliable there; put it on a local disk, or use a postgresql:// journal for many hosts"
        )


class SideLock:
    """An exclusive ``flock`` on ``path`` (created if missing), taken and released per transaction."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def acquire(self) -> None:
        """Block until this description holds the lock on the file ``path`` names now."""
        while True:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            held = os.fstat(self._fd)
            try:
                now = os.stat(self.path)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                return
            # deleted or replaced while we waited: lock the file the path names now
            os.close(self._fd)
            self._fd = -1
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
