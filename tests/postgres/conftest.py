"""Fixtures of the PostgreSQL journal tests: one throwaway server per session (``accounting.journal._pgserver``).

The tests skip, saying why, when the server binaries (Debian: ``postgresql-15``) or psycopg (the
``postgres`` extra) are missing; ``.ci/run`` installs both.
"""

import uuid

import pytest

from accounting.journal._pgserver import TemporaryServer, find_bin


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server on 127.0.0.1 for the whole session, stopped and deleted at its end."""
    if find_bin() is None:
        pytest.skip("PostgreSQL server binaries not found: apt-get install postgresql-15 (or set DPGLM_PG_BIN)")
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    server = TemporaryServer().start()
    yield server
    server.stop()


@pytest.fixture
def anchors(tmp_path, monkeypatch):
    """This test's client-side anchor directory (``DPGLM_ANCHOR_DIR``), inherited by worker processes."""
    folder = tmp_path / "anchors"
    monkeypatch.setenv("DPGLM_ANCHOR_DIR", str(folder))
    return folder


@pytest.fixture
def pg_url(pg_server, anchors):
    """A fresh journal name on the session's server."""
    return f"{pg_server.url}?journal=t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def sql(pg_server):
    """Run one SQL statement on the server as its superuser, as a database administrator would."""
    import psycopg

    def run(statement, params=(), url=None):
        with psycopg.connect(url or pg_server.url, autocommit=True) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description is not None else None

    return run
