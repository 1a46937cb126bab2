"""A throwaway local PostgreSQL server for tests and examples (not for budgets that matter).

:class:`TemporaryServer` runs ``initdb`` into a temporary directory, starts
``postgres`` on 127.0.0.1 at a free port with a private unix-socket directory,
and removes everything on :meth:`TemporaryServer.stop`. ``initdb`` refuses to
run as root, so as root the server runs as an unprivileged user (``postgres``
if it exists, else ``nobody``) through ``runuser``. It keeps PostgreSQL's
durable defaults (``fsync``, ``synchronous_commit``, ``full_page_writes`` on):
the journal refuses a server without them (docs/threat-model.md).

The binaries are taken from ``$DPGLM_PG_BIN``, else the newest
``/usr/lib/postgresql/*/bin`` (Debian's ``postgresql-15`` package), else
``pg_ctl`` on ``PATH``; :func:`find_bin` returns None when there are none.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

__all__ = ["TemporaryServer", "find_bin"]


def find_bin() -> str | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or None if PostgreSQL is not installed."""
    chosen = os.environ.get("DPGLM_PG_BIN")
    candidates = [chosen] if chosen else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(os.path.dirname(on_path))
    for folder in candidates:
        if all(os.access(os.path.join(folder, name), os.X_OK) for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _version(folder: str) -> float:
    try:
        return float(folder.rstrip("/").split("/")[-2])
    except ValueError:
        return 0.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _run_user() -> str | None:
    """Whom the server runs as: None (this user) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root, and neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL as")


class TemporaryServer:
    """A PostgreSQL server in a temporary directory; ``url`` connects as the superuser ``dpglm``, no password.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, bin_dir: str | None = None) -> None:
        found = bin_dir or find_bin()
        if found is None:
            raise RuntimeError("PostgreSQL server binaries not found (install postgresql-15, or set DPGLM_PG_BIN)")
        self.bin_dir = found
        self.user = _run_user()
        self.root = ""
        self.port = 0
        self.url = ""

    @property
    def data(self) -> str:
        return os.path.join(self.root, "data")

    def run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``tool`` (a PostgreSQL binary) as the server's user; raise with its output if it fails."""
        command = [os.path.join(self.bin_dir, tool), *args]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.root or None)
        if check and done.returncode != 0:
            log = os.path.join(self.root, "log")
            tail = ""
            if os.path.exists(log):
                with open(log) as handle:
                    tail = handle.read()[-2000:]
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip()} {tail}")
        return done

    def start(self) -> TemporaryServer:
        """initdb and start the server; ``self.url`` is then ready."""
        self.root = tempfile.mkdtemp(prefix="dpglm-pg-")
        os.chmod(self.root, 0o700)
        sockets = os.path.join(self.root, "sockets")
        os.mkdir(sockets)
        if self.user is not None:
            record = pwd.getpwnam(self.user)
            for folder in (self.root, sockets):
                os.chown(folder, record.pw_uid, record.pw_gid)
        try:
            self.run("initdb", "-D", self.data, "-U", "dpglm", "-A", "trust", "-E", "UTF8", "--locale=C",
                     "--no-sync")
            for _ in range(5):  # a free port can be taken between the probe and the server's bind
                self.port = _free_port()
                options = f"-h 127.0.0.1 -p {self.port} -k {sockets} -c max_connections=60"
                started = self.run("pg_ctl", "-D", self.data, "-l", os.path.join(self.root, "log"), "-w", "-t", "60",
                                   "-o", options, "start", check=False)
                if started.returncode == 0:
                    break
            else:
                raise RuntimeError(f"pg_ctl could not start PostgreSQL: {started.stderr.strip()}")
        except BaseException:
            self.stop()
            raise
        self.url = f"postgresql://dpglm@127.0.0.1:{self.port}/postgres"
        return self

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m MODE``: open connections are cut, in-flight transactions roll back.

        ``"fast"`` shuts down cleanly (a checkpoint: every commit is kept); ``"immediate"`` stops like a
        crash, so commits not yet flushed to the WAL (``synchronous_commit = off``) are lost and the start
        runs crash recovery.
        """
        if mode not in ("fast", "immediate"):
            raise ValueError(f"mode must be 'fast' or 'immediate', got {mode!r}")
        self.run("pg_ctl", "-D", self.data, "-l", os.path.join(self.root, "log"), "-w", "-t", "60", "-m", mode,
                 "restart")

    def stop(self) -> None:
        """Stop the server (if running) and delete its directory."""
        if not self.root:
            return
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            self.run("pg_ctl", "-D", self.data, "-w", "-t", "60", "-m", "fast", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = ""

    def schema(self, name: str) -> str:
        """Create schema ``name`` (a letter, then letters, digits or ``_``) and return a URL that works in it.

        A schema is a cheap stand-in for a database of its own (``CREATE DATABASE`` copies and syncs a
        template of several MB); the URL sets ``search_path`` through libpq's ``options``.
        """
        import psycopg

        if not (name[:1].isalpha() and name.replace("_", "").isalnum() and name.isascii()):
            raise ValueError(f"schema name must be a letter then letters, digits or _, got {name!r}")
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}".encode())
        return f"{self.url}?options=-csearch_path%3D{name}"

    def __enter__(self) -> TemporaryServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
