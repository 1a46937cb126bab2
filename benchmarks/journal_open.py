"""Opening a journal: time and resident memory against its history, from the last snapshot or from row 1.

Run: ``python -m benchmarks.journal_open [--sizes 2000 20000 100000] [--large 1000000] [--dir DIR]
[--old CHECKOUT] [--rounds 3] [--postgres]``.

For each size N it builds two journals of N charges with the same workload
(a DP-SGD rdp account charged one Poisson-sampled Gaussian step at a time, a
zCDP account, an approx account charged under 64 partition keys, a pure one):
one written by this dpglm, with its snapshot rows
(:mod:`accounting.journal.snapshot`), and one with snapshots turned off (the
rows a journal held before them). The builds charge a real ledger in a fresh
process, on ``--dir`` (default ``/dev/shm``: flushes cost nothing there, the
rows are the same) and are kept for the next run. Then, each in a fresh
process, alternating in ``--rounds`` rounds:

- ``snapshot``: ``Ledger.from_journal`` of the journal with snapshots (this
  dpglm: the header, the last snapshot, the rows after it);
- ``every row``: the same on the journal without snapshots (this dpglm
  replays every row, streamed, keeping none);
- ``old``: with ``--old CHECKOUT`` (e.g. ``git worktree add --detach /tmp/old
  44be360``, main before snapshots), that checkout's ``Ledger.from_journal``
  on the journal without snapshots: its open path, which kept every row;
- ``floor``: read every row of the journal without snapshots and check its
  hash and JSON, replaying nothing (issue 32's floor).

``--large`` sizes are built with snapshots only and measured ``snapshot`` and
``floor`` (of that journal): the other two would only repeat their per-row
cost at ten times the build.

Each reports the median seconds and the resident memory the open added (RSS
after minus before, the ledger alive) and its peak (``ru_maxrss`` minus the RSS
before), dp-accounting imported before (a service has imported it already; its
import alone takes seconds and 70 MB). ``--postgres`` does the same on a throwaway PostgreSQL server
(:mod:`accounting.journal._pgserver`), its journals copied from the file
journals' rows with the chain re-hashed from the server journal's header (the
payloads, snapshots included, unchanged). Finally it times a snapshot of the
workload's state against a charge and a row's replay: what
:data:`~accounting.journal.snapshot.ROWS` was chosen from.

Issue 32's targets: opening 2e4 rows ≤ 3× 2e3 rows and ≤ 15 MB more RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

BUILD = r"""
import os, sys
from fractions import Fraction
from dp_accounting import dp_event
from accounting import Ledger, ApproxDP, ZCDP, PureDP
import accounting.journal.snapshot as snapshots
path, n, with_snapshots = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
if not with_snapshots:
    snapshots.ROWS = 10**15
ledger = Ledger(ApproxDP(10**6, Fraction(1, 2)), journal=path, relation="add_remove")
top = ledger.split({"sgd": 1, "z": 1, "a": 1, "p": 1}, currency={"sgd": "rdp", "z": "zcdp", "p": "pure"})
step = dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.0))
rho, eps = ZCDP(Fraction(1, 10**6)), PureDP(Fraction(1, 10**6))
for k in range(n - 1):
    which = k % 8
    if which == 0:
        top["sgd"].charge_event(step, mechanism="DP-SGD", relation="add_remove")
    elif which in (1, 2, 3):
        top["z"].charge(rho, mechanism="gauss", relation="add_remove", note=f"release {k}")
    elif which in (4, 5, 6):
        top["a"].charge(ApproxDP(Fraction(1, 10**5), Fraction(1, 10**12)), mechanism="laplace", partition=k % 64,
                        relation="add_remove")
    else:
        top["p"].charge(eps, mechanism="count", relation="add_remove")
ledger.close()
"""

MEASURE = r"""
import gc, hashlib, json, os, resource, sys, time
from accounting import Ledger
import accounting.events, accounting.journal.sqlite, dp_accounting  # imported by any service before it opens
mode, target = sys.argv[1], sys.argv[2]
if target.startswith("postgres"):
    import accounting.journal.postgres


def rss():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


def canonical(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def floor():
    if target.startswith("postgres"):
        import psycopg
        from accounting.journal.postgres import parse_url
        conninfo, _, name = parse_url(target)
        conn = psycopg.connect(conninfo)
        journal_id, digest = conn.execute("SELECT journal_id, hash FROM dpglm_journals WHERE name = %s",
                                          (name,)).fetchone()
        cursor = conn.cursor(name="rows")
        cursor.execute("SELECT seq, kind, account, payload, prev, hash FROM dpglm_rows WHERE journal_id = %s "
                       "ORDER BY seq", (journal_id,))
    else:
        import sqlite3
        conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
        digest = conn.execute("SELECT hash FROM header").fetchone()[0]
        cursor = conn.execute("SELECT seq, kind, account, payload, prev, hash FROM events ORDER BY seq")
    rows = 0
    for seq, kind, account, payload, previous, stored in cursor:
        if previous != digest or stored != hashlib.sha256(canonical([previous, seq, kind, account, payload])
                                                           .encode()).hexdigest():
            raise SystemExit(f"row {seq} is damaged")
        json.loads(payload)
        digest, rows = stored, rows + 1
    conn.close()
    return rows


gc.collect()
before = rss()
start = time.perf_counter()
if mode == "floor":
    rows = floor()
else:
    ledger = Ledger.from_journal(target)
    rows = ledger.seq
seconds = time.perf_counter() - start
after = rss()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "added": after - before, "peak": peak - before, "rows": rows}))
"""

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code: str, *args: str, cwd: str = HERE, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": cwd, **(env or {})})
    if done.returncode != 0:
        raise RuntimeError(f"{code[:40]!r} {args} in {cwd} failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def build(folder: str, n: int, with_snapshots: bool) -> str:
    """A journal of ``n`` rows (built once, kept in ``folder``); its path."""
    path = os.path.join(folder, f"journal-{n}-{'snapshots' if with_snapshots else 'rows'}.db")
    if not os.path.exists(path):
        started = time.perf_counter()
        _python(BUILD, path, str(n), "1" if with_snapshots else "0")
        print(f"  built {os.path.basename(path)} in {time.perf_counter() - started:.0f} s", flush=True)
    return path


def copy_to_postgres(path: str, url: str) -> str:
    """The rows of file journal ``path`` as a PostgreSQL journal at ``url``, the chain re-hashed from its header."""
    import sqlite3

    import psycopg

    from accounting.journal.postgres import PostgresJournal, parse_url
    from accounting.journal.rows import row_hash

    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    meta = json.loads(source.execute("SELECT meta FROM header").fetchone()[0])
    store = PostgresJournal(url, create=meta, anchor_dir=os.path.join(os.path.dirname(path), "pg-build-anchors"))
    journal_id, previous, seq = store.journal_id, store._last_hash, 0
    store.close()
    conninfo, _, _ = parse_url(url)
    with psycopg.connect(conninfo) as conn, conn.cursor() as cursor:
        if conn.execute("SELECT seq FROM dpglm_heads WHERE journal_id = %s", (journal_id,)).fetchone()[0] == 0:
            with cursor.copy("COPY dpglm_rows (journal_id, seq, kind, account, payload, prev, hash, charge_id) "
                             "FROM STDIN") as copy:
                for seq, kind, account, payload in source.execute(
                        "SELECT seq, kind, account, payload FROM events ORDER BY seq"):
                    digest = row_hash(previous, seq, kind, account, payload)
                    copy.write_row((journal_id, seq, kind, account, payload, previous, digest, uuid.uuid4()))
                    previous = digest
            conn.execute("UPDATE dpglm_heads SET seq = %s, hash = %s WHERE journal_id = %s",
                         (seq, previous, journal_id))
    source.close()
    return url


def measure(mode: str, target: str, checkout: str, anchors: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(_python(MEASURE, mode, target, cwd=checkout,
                                                env={"DPGLM_ANCHOR_DIR": anchors}))
    return result


def compare(kinds: dict[str, tuple[str, str, str]], rounds: int, anchors: str) -> dict[str, dict[str, float]]:
    """Each kind (name → (mode, target, checkout)) ``rounds`` times, alternating; medians."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in kinds}
    for mode, target, checkout in kinds.values():  # first opens write the anchors and witnesses
        measure(mode, target, checkout, anchors)
    for _ in range(rounds):
        for name, (mode, target, checkout) in kinds.items():
            runs[name].append(measure(mode, target, checkout, anchors))
    return {name: {key: statistics.median(run[key] for run in found) for key in ("seconds", "added", "peak", "rows")}
            for name, found in runs.items()}


def _table(title: str, results: dict[int, dict[str, dict[str, float]]]) -> None:
    print(f"\n{title}")
    print(f"{'rows':>8} {'open':>12} {'seconds':>9} {'µs/row':>8} {'+RSS MB':>8} {'peak MB':>8}")
    for n, kinds in results.items():
        for name, got in kinds.items():
            print(f"{n:>8,} {name:>12} {got['seconds']:>9.3f} {got['seconds'] / n * 1e6:>8.1f} "
                  f"{got['added'] / 2**20:>8.1f} {got['peak'] / 2**20:>8.1f}")
    sizes = sorted(results)
    if len(sizes) >= 2:
        small, large = results[sizes[0]], results[sizes[1]]
        for name in small:
            print(f"  {name}: {sizes[1]:,} rows / {sizes[0]:,} rows = "
                  f"{large[name]['seconds'] / small[name]['seconds']:.2f}x the time, "
                  f"{(large[name]['added'] - small[name]['added']) / 2**20:+.1f} MB resident")


def snapshot_cost(folder: str, rows: int = 2000) -> None:
    """A snapshot of the workload's state against a charge and a row's replay, side by side in one process."""
    from accounting import Ledger
    from accounting.journal import snapshot as snapshots
    from accounting.journal.persistence import replay
    from accounting.journal.sqlite import Journal

    path = build(folder, rows, False)
    store = Journal(path, read_only=True)
    events = list(store.history())
    store.close()
    timings: dict[str, list[float]] = {"replay a row": [], "write a snapshot": []}
    ledger = None
    for _ in range(3):
        ledger = Ledger.from_journal(path, read_only=True)
        fresh = Ledger(ledger.budget, relation=ledger.relation)
        started = time.perf_counter()
        replay(fresh, events)
        timings["replay a row"].append((time.perf_counter() - started) / len(events))
        started = time.perf_counter()
        text = json.dumps(snapshots.payload(fresh))
        timings["write a snapshot"].append(time.perf_counter() - started)
        ledger.close()
    replayed = statistics.median(timings["replay a row"])
    written = statistics.median(timings["write a snapshot"])
    print(f"\nsnapshot of the workload's state: {len(text):,} bytes, {snapshots.size(fresh)} entries, "
          f"{written * 1e3:.2f} ms to write = {written / replayed:.0f} rows' replay ({replayed * 1e6:.1f} µs a row); "
          f"every {snapshots.ROWS} rows that is {written / snapshots.ROWS * 1e6:.2f} µs and "
          f"{len(text) / snapshots.ROWS:.0f} bytes a row")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 20_000, 100_000])
    parser.add_argument("--large", type=int, nargs="*", default=[],
                        help="sizes built with snapshots only, measured from the snapshot and by the floor")
    parser.add_argument("--dir", default="/dev/shm/dpglm-journal-open")
    parser.add_argument("--old", default=None, help="a checkout of dpglm before snapshots (its open path)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL server")
    args = parser.parse_args(argv)
    os.makedirs(args.dir, exist_ok=True)
    anchors = os.path.join(args.dir, "anchors")
    os.environ["DPGLM_ANCHOR_DIR"] = anchors
    journals = {n: (build(args.dir, n, True), build(args.dir, n, False)) for n in args.sizes}
    large = {n: build(args.dir, n, True) for n in args.large}
    stores: list[tuple[str, dict[int, tuple[str, str]]]] = [("file journal (SQLite)", journals)]
    from accounting.journal._pgserver import TemporaryServer

    server = TemporaryServer() if args.postgres else None
    try:
        if server is not None:
            server.start()
            stores.append(("PostgreSQL journal", {
                n: (copy_to_postgres(with_snapshots, f"{server.url}?journal=snapshots-{n}"),
                    copy_to_postgres(rows, f"{server.url}?journal=rows-{n}"))
                for n, (with_snapshots, rows) in journals.items()}))
        for title, targets in stores:
            results = {}
            for n, (with_snapshots, rows) in targets.items():
                kinds = {"snapshot": ("open", with_snapshots, HERE), "every row": ("open", rows, HERE)}
                if args.old:
                    kinds["old"] = ("open", rows, os.path.abspath(args.old))
                kinds["floor"] = ("floor", rows, HERE)
                results[n] = compare(kinds, args.rounds, anchors)
            _table(title, results)
        if large:
            _table("file journal (SQLite), built with snapshots only", {
                n: compare({"snapshot": ("open", path, HERE), "floor": ("floor", path, HERE)}, args.rounds, anchors)
                for n, path in large.items()})
    finally:
        if server is not None:
            server.stop()
    snapshot_cost(args.dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
