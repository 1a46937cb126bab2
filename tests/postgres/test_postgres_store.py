"""The PostgreSQL journal store (accounting.journal.postgres) on a real server: chain, anchors, refusals."""

import errno
import os
import subprocess

import pytest

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from accounting.journal import JournalCorruptError, JournalDiskFullError, JournalReadOnlyError  # noqa: E402
from accounting.journal.anchor import AnchorFile  # noqa: E402
from accounting.journal.postgres import (  # noqa: E402
    JournalNotDurableError,
    JournalUnavailableError,
    PostgresJournal,
    parse_url,
)

HEADER = {"units": 5}


def charge(store, n, **payload):
    seqs = []
    for i in range(n):
        with store.transaction() as tx:
            seqs.append(tx.append("charge", "", {"i": i, **payload}))
    return seqs


def test_rows_written_by_one_store_are_new_events_for_another_and_replayed_at_open(pg_url):
    first = PostgresJournal(pg_url, create=HEADER)
    second = PostgresJournal(pg_url, create={"units": 999})  # exists: its header is the journal's, not this one
    assert second.read_meta() == HEADER and second.journal_id == first.journal_id
    assert charge(first, 3) == [1, 2, 3]
    with second.transaction() as tx:
        assert [(seq, payload["i"]) for seq, _, _, payload in tx.new_events] == [(1, 0), (2, 1), (3, 2)]
        assert tx.append("charge", "a", {"by": "second"}) == 4
    with first.transaction() as tx:
        assert tx.new_events == [(4, "charge", "a", {"by": "second"})]
    reopened = PostgresJournal(pg_url, read_only=True)
    assert [seq for seq, *_ in reopened.history()] == [1, 2, 3, 4]
    charge(second, 1)
    with reopened.transaction() as tx:  # a read-only store sees new rows, and cannot append
        assert [seq for seq, *_ in tx.new_events] == [5]
        with pytest.raises(JournalReadOnlyError, match="opened read-only"):
            tx.append("charge", "", {})
    for store in (first, second, reopened):
        store.close()


def test_rows_of_others_are_caught_up_without_the_head_lock_and_not_handed_out_twice(pg_url, monkeypatch):
    """issue 32: rows others commit are read outside the lock (with the flush barrier's answer, or one lock-free
    round trip when the last read is old) and replayed before the next transaction locks the head."""
    from accounting.journal import postgres

    first, second = PostgresJournal(pg_url, create=HEADER), PostgresJournal(pg_url)
    charge(first, 1)
    charge(second, 1)  # its locked read finds row 1: others are charging
    charge(first, 2)
    monkeypatch.setattr(postgres, "_STALE_SECONDS", 0.0)
    assert [seq for seq, *_ in second.catch_up()] == [3, 4]
    with second.transaction() as tx:
        assert tx.new_events == []  # already handed out, outside the lock
        assert tx.append("charge", "", {"i": "second"}) == 5
    monkeypatch.setattr(postgres, "_STALE_SECONDS", 3600.0)
    assert first.catch_up() == []  # read recently: no round trip; the rows come in the transaction
    with first.transaction() as tx:
        assert [seq for seq, *_ in tx.new_events] == [5]
    first.close()
    second.close()


def test_an_exception_in_the_block_rolls_back_and_appends_nothing(pg_url, sql):
    store = PostgresJournal(pg_url, create=HEADER)
    with pytest.raises(KeyError), store.transaction() as tx:
        tx.append("charge", "", {"i": 0})
        raise KeyError("budget check failed")
    assert charge(store, 1) == [1]  # seq 1 again: the first one never committed
    assert sql("SELECT count(*) FROM dpglm_rows WHERE journal_id = %s", (store.journal_id,)) == [(1,)]
    store.close()


def test_a_missing_journal_and_a_bad_url_are_one_line_errors(pg_url, pg_server):
    with pytest.raises(FileNotFoundError, match=r"journal postgresql://dpglm@127\.0\.0\.1:\d+/postgres\?journal=t-"):
        PostgresJournal(pg_url)
    with pytest.raises(ValueError, match="journal must be a postgresql:// URL"):
        PostgresJournal("mysql://u@h/db")
    with pytest.raises(JournalUnavailableError, match="cannot connect"):
        PostgresJournal(f"postgresql://dpglm@127.0.0.1:{pg_server.port}/no_such_database", create=HEADER)
    conninfo, shown, name = parse_url("postgresql://me:secret@db.example:5433/budgets?journal=team-a&sslmode=require")
    assert "secret" not in shown and "secret" in conninfo and "journal" not in conninfo
    assert (shown, name) == ("postgresql://me@db.example:5433/budgets?journal=team-a&sslmode=require", "team-a")


def test_a_damaged_row_is_refused_naming_it(pg_url, sql):
    store = PostgresJournal(pg_url, create=HEADER)
    charge(store, 3)
    store.close()
    sql("UPDATE dpglm_rows SET payload = '{\"i\": 9}' WHERE journal_id = %s AND seq = 2", (store.journal_id,))
    with pytest.raises(JournalCorruptError, match=r"row 2 is damaged .* rows 1\.\.1 read back intact"):
        PostgresJournal(pg_url)


def test_an_edited_header_and_a_missing_row_are_refused(pg_url, sql):
    store = PostgresJournal(pg_url, create=HEADER)
    charge(store, 3)
    store.close()
    sql("DELETE FROM dpglm_rows WHERE journal_id = %s AND seq = 2", (store.journal_id,))
    with pytest.raises(JournalCorruptError, match="row 2 is missing"):
        PostgresJournal(pg_url)
    sql("UPDATE dpglm_journals SET meta = '{\"units\":50}' WHERE journal_id = %s", (store.journal_id,))
    with pytest.raises(JournalCorruptError, match="header .* is damaged"):
        PostgresJournal(pg_url)


def test_rows_lost_by_the_server_are_refused_by_this_hosts_anchor(pg_url, sql, tmp_path):
    """A consistent older image (last rows gone, head moved back) passes the chain; the anchor refuses it."""
    store = PostgresJournal(pg_url, create=HEADER)
    charge(store, 4)
    rows = sql("SELECT seq, hash FROM dpglm_rows WHERE journal_id = %s ORDER BY seq", (store.journal_id,))
    sql("DELETE FROM dpglm_rows WHERE journal_id = %s AND seq > 2", (store.journal_id,))
    sql("UPDATE dpglm_heads SET seq = 2, hash = %s WHERE journal_id = %s", (rows[1][1], store.journal_id))
    # the open store notices the head moving back, without reading any anchor
    with pytest.raises(JournalCorruptError, match="went back from row 4 to row 2"), store.transaction():
        pass
    with pytest.raises(JournalCorruptError, match=r"ends at row 2 but this host's witness .* records row 4"):
        PostgresJournal(pg_url)
    # a host that never saw rows 3..4 cannot know: that is the limit of client-side anchors
    other = PostgresJournal(pg_url, anchor_dir=str(tmp_path / "other-host"))
    assert len(list(other.history())) == 2
    # a write there diverges from this host's anchor at row 4 (other hashes): refused here too
    charge(other, 3, by="other host")
    with pytest.raises(JournalCorruptError, match="row 4 is not the row this host's witness recorded"):
        PostgresJournal(pg_url)


def test_a_database_restored_from_before_the_journal_does_not_recreate_it(pg_server, anchors):
    url = pg_server.schema("before_journal")
    store = PostgresJournal(url, create=HEADER)
    charge(store, 2)
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:  # the image from before: no dpglm tables at all
        conn.execute("DROP TABLE dpglm_rows, dpglm_heads, dpglm_journals")
    with pytest.raises(JournalCorruptError, match=r"is missing, but this host's witness .* rows 1\.\.2"):
        PostgresJournal(url, create=HEADER)
    # another host, without that anchor, creates a new journal there; this host refuses it
    other = PostgresJournal(url, create=HEADER, anchor_dir=str(anchors.parent / "other-host"))
    other.close()
    with pytest.raises(JournalCorruptError, match="the journal was replaced"):
        PostgresJournal(url, create=HEADER)


def test_restoring_a_pg_dump_taken_before_the_last_charges_does_not_regrant(pg_server, anchors, tmp_path):
    url = pg_server.schema("dumped")
    store = PostgresJournal(url, create=HEADER)
    charge(store, 2)
    dump = tmp_path / "journal.dump"
    done = subprocess.run([os.path.join(pg_server.bin_dir, "pg_dump"), "-Fc", "-h", "127.0.0.1", "-p",
                           str(pg_server.port), "-U", "dpglm", "-d", "postgres", "-n", "dumped", "-f", str(dump)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    charge(store, 3)  # spent after the backup
    store.close()
    subprocess.run([os.path.join(pg_server.bin_dir, "pg_restore"), "--clean", "-h", "127.0.0.1", "-p",
                    str(pg_server.port), "-U", "dpglm", "-d", "postgres", str(dump)], check=True)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT seq FROM dpglm_heads").fetchall() == [(2,)]  # the image is consistent
    with pytest.raises(JournalCorruptError, match=r"ends at row 2 but this host's witness .* row 5: rows 3\.\.5"):
        PostgresJournal(url)


def test_a_server_that_may_lose_acknowledged_commits_is_refused(pg_server, anchors, sql):
    lazy = pg_server.url + "?options=-csynchronous_commit%3Doff"  # what ALTER ROLE/DATABASE ... SET would do
    with pytest.raises(JournalNotDurableError, match="synchronous_commit = off"):
        PostgresJournal(lazy, create=HEADER)
    sql("ALTER SYSTEM SET fsync = off")
    sql("SELECT pg_reload_conf()")
    try:
        with pytest.raises(JournalNotDurableError, match="fsync = off"):
            PostgresJournal(pg_server.url + "?journal=fsync", create=HEADER)
    finally:
        sql("ALTER SYSTEM RESET fsync")
        sql("SELECT pg_reload_conf()")


def _lose_the_answer(store, commit):
    """Round trip 2 (insert, COMMIT, flush barrier) is made (or not), then the socket dies before its answer."""
    real = store._run

    def run(conn, query, params=()):
        if query.startswith("INSERT INTO dpglm_rows"):
            if commit:
                real(conn, query, params)
            conn.close()
            raise store._failure(conn, psycopg.OperationalError("server closed the connection unexpectedly"))
        return real(conn, query, params)

    store._run = run


@pytest.mark.parametrize("committed", [True, False])
def test_a_lost_commit_answer_is_resolved_by_reading_the_charge_id_back(pg_url, sql, committed):
    store = PostgresJournal(pg_url, create=HEADER)
    charge(store, 1)
    _lose_the_answer(store, committed)
    if committed:
        assert charge(store, 1) == [2]
    else:
        with pytest.raises(JournalUnavailableError, match="lost during COMMIT .* not in the journal: charge refused"):
            charge(store, 1)
    assert store.read_backs == ([1, 0] if committed else [0, 1])
    count = sql("SELECT count(*) FROM dpglm_rows WHERE journal_id = %s", (store.journal_id,))[0][0]
    assert count == (2 if committed else 1)
    del store._run
    assert charge(store, 1) == [count + 1]  # the store goes on, on a new connection
    store.close()


def test_a_connection_cut_while_it_is_being_checked_is_unavailable_and_tried_again(pg_url, pg_server, monkeypatch):
    """A server restarting between the handshake and the durability checks (CI saw it: a psycopg traceback)."""
    store = PostgresJournal(pg_url, create=HEADER)
    real_connect = psycopg.connect
    to_cut = [1]

    def connect_then_cut(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        if to_cut[0]:
            to_cut[0] -= 1
            with real_connect(pg_server.url, autocommit=True) as admin:  # waits until the backend is gone
                admin.execute("SELECT pg_terminate_backend(%s, 10000)", (conn.info.backend_pid,))
        return conn

    monkeypatch.setattr(psycopg, "connect", connect_then_cut)
    with pytest.raises(JournalUnavailableError, match="server connection was lost"):
        PostgresJournal(pg_url)  # an open: one line, the caller may try again
    to_cut[0] = 1
    with real_connect(pg_server.url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (store._conn.info.backend_pid,))
    assert charge(store, 1) == [1]  # a charge: its first new connection is cut too, its second is used
    assert store.reconnects == 1 and to_cut == [0]
    store.close()


def test_a_committed_row_whose_anchor_write_failed_comes_back_as_a_new_event(pg_url, monkeypatch):
    """The store contract (accounting/journal/store.py): a row committed but not acknowledged is counted later."""
    store = PostgresJournal(pg_url, create=HEADER)

    def full(self, anchor):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(AnchorFile, "advance", full)
        with pytest.raises(JournalDiskFullError, match="disk holding its witness .* is full .*charge refused"), \
                store.transaction() as tx:
            tx.append("charge", "", {"i": 0})
    with store.transaction() as tx:
        assert tx.new_events == [(1, "charge", "", {"i": 0})]
        assert tx.append("charge", "", {"i": 1}) == 2
    store.close()


def test_a_role_that_may_only_read_is_refused_as_read_only(pg_url, sql):
    store = PostgresJournal(pg_url, create=HEADER)
    charge(store, 1)
    sql("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reader') THEN "
        "CREATE ROLE reader LOGIN; END IF; END $$")
    sql("GRANT SELECT ON dpglm_journals, dpglm_heads, dpglm_rows TO reader")
    reader = PostgresJournal(pg_url.replace("dpglm@", "reader@"))
    assert [seq for seq, *_ in reader.history()] == [1]
    with pytest.raises(JournalReadOnlyError, match="cannot be written by this role .*permission denied"):
        charge(reader, 1)
    reader.close()
    store.close()


def test_a_full_server_disk_is_reported_as_such(pg_url):
    store = PostgresJournal(pg_url, create=HEADER)
    full = psycopg.errors.DiskFull('could not extend file "base/5/16390": No space left on device')
    error = store._failure(store._conn, full)  # what the server answers when its disk is full (SQLSTATE 53100)
    assert isinstance(error, JournalDiskFullError)
    assert "disk is full" in str(error) and "charge refused" in str(error)
    store.close()
