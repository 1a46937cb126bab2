"""Charges per second on one PostgreSQL journal from 1, 4 and 8 processes, beside plain INSERT+COMMIT.

Run: ``python -m benchmarks.pg_scale [--seconds S] [--rounds R] [--processes 1,4,8] [--url URL]``.

Without ``--url`` a throwaway server is started on this machine
(:mod:`accounting.journal._pgserver`, PostgreSQL's durable defaults), as issue 32
asks: the server shares the machine's cores with the clients. For each process
count P, P forked processes each open their own ``Ledger`` on one journal (and
their own plain connection), wait at a barrier, charge ``ZCDP(1e-9)`` for S
seconds, wait again, then each run ``INSERT INTO plain_P VALUES (...)`` in
autocommit (one durable commit per row, the floor of a durable append) for S
seconds. The process counts and the two kinds alternate in R rounds (A B A B),
so every rate is measured beside the others on the same loaded machine.

Printed per P: charges/s and plain commits/s (summed over processes, over the
rounds), the ratio, each process's share of the grants, and the ratio to one
process's charges/s. Then the journal is checked *exact*
(docs/threat-model.md, "The journal is exact"): the rows in each journal are
exactly the receipts the workers counted, and what they spend is within the
budget.

Issue 32's target: 8 processes together >= 3x one process's charges/s, each
process >= 5% of the grants, the journal exact.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
import uuid
from fractions import Fraction
from typing import Any

from accounting import ZCDP, Ledger

BUDGET = ZCDP(1)
COST = ZCDP(Fraction(1, 10**9))


def _worker(url: str, table: str, seconds: float, start: Any, results: Any) -> None:
    """Open a ledger and a plain connection; after the barrier charge for ``seconds``, then insert for ``seconds``."""
    import psycopg

    ledger = Ledger.from_journal(url)
    plain = psycopg.connect(url.split("?")[0], autocommit=True)
    pid = os.getpid()
    for kind in ("ledger", "plain"):
        start.wait()
        began = time.perf_counter()
        count = 0
        while time.perf_counter() - began < seconds:
            if kind == "ledger":
                ledger.charge(COST, mechanism="bench", note=str(count))
            else:
                plain.execute(f"INSERT INTO {table} (pid, k) VALUES (%s, %s)", (pid, count))
            count += 1
        results.put((kind, pid, count, time.perf_counter() - began))
    ledger.close()
    plain.close()


def measure(url: str, table: str, processes: int, seconds: float) -> list[tuple[str, int, int, float]]:
    """One round of ``processes`` forked workers: their (kind, pid, count, seconds) for each kind."""
    context = multiprocessing.get_context("fork")
    start, results = context.Barrier(processes + 1), context.Queue()
    workers = [context.Process(target=_worker, args=(url, table, seconds, start, results)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    done = []
    for _ in range(2):
        start.wait(timeout=600)
        done.extend(results.get(timeout=600) for _ in workers)
    for worker in workers:
        worker.join(60)
    return done


def _rows(url: str) -> tuple[int, Fraction]:
    """(rows, spent) of the journal at ``url``, read back by a read-only ledger (chain and anchors checked)."""
    ledger = Ledger.from_journal(url, read_only=True)
    try:
        rows = (sum(1 for _, kind, _, _ in ledger._journal.history() if kind == "charge")
                if ledger._journal is not None else 0)
        spent = ledger.root.spent
        assert isinstance(spent, ZCDP)
        return rows, spent.rho
    finally:
        ledger.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds per kind, process count and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--processes", default="1,4,8", help="process counts (default 1,4,8)")
    parser.add_argument("--url", default=None, help="postgresql:// URL of a server to use (default: a throwaway "
                                                    "local server)")
    args = parser.parse_args()
    counts = [int(p) for p in args.processes.split(",")]
    os.environ.setdefault("DPGLM_ANCHOR_DIR", tempfile.mkdtemp(prefix="dpglm-bench-anchors-"))
    server = None
    if args.url is None:
        from accounting.journal._pgserver import TemporaryServer

        server = TemporaryServer().start()
        base = server.url
    else:
        base = args.url
    try:
        import psycopg

        tag = uuid.uuid4().hex[:8]
        urls = {p: f"{base}?journal=bench-{tag}-{p}" for p in counts}
        tables = {p: f"dpglm_bench_plain_{tag}_{p}" for p in counts}
        with psycopg.connect(base, autocommit=True) as conn:
            for p in counts:
                conn.execute(f"CREATE TABLE {tables[p]} (seq BIGSERIAL PRIMARY KEY, pid INT, k INT)")
        for p in counts:
            Ledger(BUDGET, journal=urls[p]).close()
        done: dict[int, list[list[tuple[str, int, int, float]]]] = {p: [] for p in counts}
        for _ in range(args.rounds):
            for p in counts:
                done[p].append(measure(urls[p], tables[p], p, args.seconds))
        print(f"PostgreSQL journal, {'throwaway local server' if server else base.split('@')[-1]}; "
              f"{args.rounds} rounds of {args.seconds:g} s per kind; {os.cpu_count()} cores")
        print(f"{'processes':>9} {'plain INSERT+COMMIT/s':>22} {'charges/s':>10} {'ratio':>6} {'vs 1 process':>13}"
              "  shares of the grants")
        rates = {}
        for p in counts:
            out = {}
            for kind in ("ledger", "plain"):
                rounds = [[entry for entry in entries if entry[0] == kind] for entries in done[p]]
                total = sum(count for mine in rounds for _, _, count, _ in mine)
                wall = sum(elapsed for mine in rounds for *_, elapsed in mine) / p
                # each worker's share of its round's grants (a round's workers run side by side)
                shares = [count / sum(c for _, _, c, _ in mine) for mine in rounds for _, _, count, _ in mine]
                out[kind] = (total / wall, shares, total)
            rates[p] = out
            (plain, _, _), (ledger, shares, _) = out["plain"], out["ledger"]
            print(f"{p:>9} {plain:>22,.0f} {ledger:>10,.0f} {ledger / plain:>6.2f} "
                  f"{ledger / rates[counts[0]]['ledger'][0]:>12.2f}x  "
                  + (f"{min(shares):.1%} .. {max(shares):.1%} (each worker in its round)" if p > 1 else ""))
        for p in counts:
            rows, spent = _rows(urls[p])
            granted = rates[p]["ledger"][2]
            exact = rows == granted and spent == granted * COST.rho and spent <= BUDGET.rho
            print(f"journal of {p} processes: {rows} rows, {granted} receipts, spent {float(spent):.3g} of "
                  f"{float(BUDGET.rho):g}: {'exact' if exact else 'NOT EXACT'}")
        with psycopg.connect(base, autocommit=True) as conn:
            found = conn.execute("SELECT pg_total_relation_size('dpglm_rows'), count(*) FROM dpglm_rows").fetchone()
        if found is not None and found[1]:
            print(f"dpglm_rows: {found[1]} rows, {found[0] / found[1]:.0f} bytes a row on disk, indexes included")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
