"""Many processes, each with its own connection, charging one PostgreSQL budget: kills and a server restart."""

import collections
import multiprocessing
import os
import signal
import time

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from accounting.journal.postgres import PostgresJournal  # noqa: E402


def _charge_until_refused(url, name, count, receipts):
    """A worker: its own Ledger (its own connection) charging ``PureDP(1)`` up to COUNT times.

    Each granted charge's seq is written to RECEIPTS once its receipt is returned. An open or a charge refused for a
    lost connection is tried again; after a server crash that lost rows the ledger had read
    (``JournalReplacedError``) the ledger is opened again; the worker stops at the first ``BudgetExceeded`` and
    writes its counts to RECEIPTS.done.
    """
    from accounting import BudgetExceeded, JournalReplacedError, Ledger, PureDP
    from accounting.journal.postgres import JournalUnavailableError

    unavailable = refused = done = reopened = 0

    def open_ledger():
        nonlocal unavailable
        while True:  # a worker that starts while the server restarts opens again, as a user would
            try:
                return Ledger.from_journal(url)
            except JournalUnavailableError:
                unavailable += 1
                time.sleep(0.2)

    ledger = open_ledger()
    store = ledger._journal  # kept: a ledger that lost rows closes itself, and its store with it
    reconnects, read_backs = 0, [0, 0]
    with open(receipts, "a") as out:
        while done < count:
            try:
                receipt = ledger.charge(PureDP(1), mechanism="test", note=name)
            except JournalUnavailableError:
                unavailable += 1
                continue
            except JournalReplacedError:  # a crash lost rows this ledger had read but nobody was granted: reopen
                reopened += 1
                reconnects, read_backs = reconnects + store.reconnects, [a + b for a, b in zip(
                    read_backs, store.read_backs, strict=True)]
                ledger.close()
                ledger = open_ledger()
                store = ledger._journal
                continue
            except BudgetExceeded:
                refused += 1
                break
            done += 1
            out.write(f"{receipt.seq}\n")
            out.flush()
    with open(f"{receipts}.done", "w") as out:
        out.write(f"refused {refused} unavailable {unavailable} reconnects {reconnects + store.reconnects} "
                  f"read_back_granted {read_backs[0] + store.read_backs[0]} "
                  f"read_back_refused {read_backs[1] + store.read_backs[1]} reopened {reopened}")


def _start(url, name, count, receipts):
    """Fork a worker (the test process has imported everything already: no start-up cost)."""
    process = multiprocessing.get_context("fork").Process(target=_charge_until_refused,
                                                          args=(url, name, count, str(receipts)))
    process.start()
    return process


def _finish(process, receipts):
    process.join(120)
    assert not process.is_alive()
    done = f"{receipts}.done"
    return open(done).read() if os.path.exists(done) else ""


def _rows(url):
    store = PostgresJournal(url, read_only=True)
    try:
        return {seq: payload["note"] for seq, kind, _, payload in store.history() if kind == "charge"}
    finally:
        store.close()


def _create(url, budget):
    from accounting import Ledger, PureDP

    Ledger(PureDP(budget), journal=url).close()


def _receipts(path):
    return [int(line) for line in open(path).read().split()] if os.path.exists(path) else []


def _committed(sql, url):
    name = url.split("journal=")[1]
    found = sql("SELECT h.seq FROM dpglm_heads h JOIN dpglm_journals j USING (journal_id) WHERE j.name = %s", (name,))
    return found[0][0] if found else 0


def _check(url, workers, tmp_path, killed, interrupted=0):
    """The journal is exact (docs/threat-model.md): every receipt is its worker's row, and the rows without a
    receipt are at most one per killed worker (and one per interrupted charge: a lost answer not read back)."""
    rows = _rows(url)
    extra = {}
    for name in workers:
        receipts = _receipts(tmp_path / f"{name}.txt")
        assert len(set(receipts)) == len(receipts), f"{name}: a row was granted twice"
        assert all(rows.get(seq) == name for seq in receipts), f"{name}: a receipt is not its row in the journal"
        extra[name] = sum(1 for owner in rows.values() if owner == name) - len(receipts)
        assert 0 <= extra[name] <= (1 if name in killed else 0) + interrupted, (name, extra[name])
    return rows, extra


@pytest.mark.parametrize("budget, n_workers, n_killed, per_worker", [
    (60, 4, 2, 40),
    pytest.param(600, 8, 4, 150, marks=pytest.mark.slow),
])
def test_processes_killed_with_sigkill_never_overspend_and_every_receipt_is_journalled(
        pg_url, tmp_path, sql, budget, n_workers, n_killed, per_worker):
    workers = [f"w{i}" for i in range(n_workers)]  # n_workers * per_worker wanted, more than the budget
    _create(pg_url, budget)
    rng = np.random.default_rng(21)
    procs = {name: _start(pg_url, name, per_worker, tmp_path / f"{name}.txt") for name in workers}
    while _committed(sql, pg_url) < 2 * n_workers:  # everyone is connected and charging
        time.sleep(0.01)
    for name in workers[:n_killed]:
        # kills spread over about a fifth of the run; on an idle machine a worker may still have
        # finished first (the budget spent), so what counts as killed is read from the exit codes
        time.sleep(float(rng.uniform(0.0, 0.0005 * budget)))
        procs[name].kill()
    outputs = {name: _finish(proc, tmp_path / f"{name}.txt") for name, proc in procs.items()}
    killed = [name for name in workers[:n_killed] if procs[name].exitcode == -signal.SIGKILL]
    assert killed, "no worker was killed while it was charging: the test checked nothing about kills"
    for name in set(workers) - set(killed):
        assert procs[name].exitcode == 0
        assert outputs[name].startswith("refused 1")  # it stopped because the budget was spent
    rows, extra = _check(pg_url, workers, tmp_path, killed)
    assert len(rows) == budget  # the survivors spent it all, and not a unit more
    shares = collections.Counter(rows.values())
    print(f"\nshares of {budget}: {dict(sorted(shares.items()))}; committed unreturned: {extra}")


@pytest.mark.parametrize("budget, n_workers, per_worker, restarts, mode", [
    (90, 3, 40, 1, "fast"),
    pytest.param(600, 6, 150, 4, "fast", marks=pytest.mark.slow),
    pytest.param(600, 6, 150, 4, "immediate", marks=pytest.mark.slow),
])
def test_a_server_restart_during_commits_grants_nothing_twice_and_loses_no_receipt(
        pg_server, pg_url, tmp_path, sql, budget, n_workers, per_worker, restarts, mode):
    workers = [f"w{i}" for i in range(n_workers)]
    _create(pg_url, budget)
    procs = {name: _start(pg_url, name, per_worker, tmp_path / f"{name}.txt") for name in workers}
    at = []
    for k in range(restarts):
        while _committed(sql, pg_url) < (k + 1) * budget // (restarts + 3):
            time.sleep(0.01)
        # every connection cut, in-flight transactions rolled back; "immediate" stops like a crash: commits
        # whose flush barrier had not returned (no receipt yet) may be lost
        pg_server.restart(mode)
        at.append(_committed(sql, pg_url))
    outputs = {name: _finish(proc, tmp_path / f"{name}.txt") for name, proc in procs.items()}
    for proc in procs.values():
        assert proc.exitcode == 0
    rows, extra = _check(pg_url, workers, tmp_path, killed=[], interrupted=0)
    assert at[-1] < budget  # the restarts happened while they were charging
    assert len(rows) == budget
    words = {name: outputs[name].split() for name in workers}
    stats = {name: dict(zip(w[::2], map(int, w[1::2]), strict=True)) for name, w in words.items()}
    shares = collections.Counter(rows.values())
    print(f"\nrestarts after rows {at}; shares of {budget}: {dict(sorted(shares.items()))}; per worker: {stats}")
    # every worker lost its connection at each restart and made a new one (or opened its ledger again, after a
    # crash lost rows it had read)
    assert all(stats[name]["reconnects"] + stats[name]["reopened"] >= restarts for name in workers)
