"""Simulate a PostgreSQL journal charged by many hosts: what this 2-core machine cannot run (docs/scale.md).

Run: ``python -m benchmarks.scale_sim [--hosts 50] [--per-day 1e6] [--peak 4] [--rtt-ms 0.5] [--flush-ms 2] ...``.

A discrete-event simulation of the charge path of accounting/journal/postgres.py
(docs/threat-model.md, "Granted means durable"): each host charges at the times
of a Poisson process (rate per-day / 86,400 / hosts, times ``--peak`` for the
busiest hour); a charge

1. replays, without the lock, the rows committed since its host last looked
   (one lock-free round trip if that was more than 0.1 s ago, as
   ``PostgresJournal.catch_up`` does);
2. waits for the head lock, which is served in arrival order (PostgreSQL's lock
   queue), and holds it for one round trip plus the server's statements, the
   client's own check, and the replay of the rows committed while it waited;
3. waits for its flush barrier: the server flushes the WAL in batches, a flush
   of ``--flush-ms`` covering every commit made before it starts (group commit).

The costs are this machine's measurements (``--replay-us`` per row replayed and
chain-checked by a client, ``--client-ms`` and ``--server-ms`` per charge:
``python -m benchmarks.pg_scale`` and docs/scale.md say where each comes from);
the network round trip and the flush time are the deployment's, given as
options. Printed: the lock's utilisation, charge latency (median, p99), how
many charges per second the lock could serve at most, and the daily costs
(client and server CPU, storage, network) that follow from the row counts.
Same seed, same numbers.
"""

from __future__ import annotations

import argparse

import numpy as np

DAY = 86_400.0


def simulate(hosts: int, rate: float, seconds: float, rtt: float, flush: float, replay: float, client: float,
             server: float, rng: np.random.Generator) -> dict[str, float]:
    """Charges of ``hosts`` hosts at ``rate`` charges/s in all for ``seconds``; latency and lock statistics.

    Times are in seconds. ``server`` is the server's time per charge spent while the lock is held,
    ``client`` the client's own check and row (in the lock), ``replay`` per row replayed. ``capacity`` is
    the lock's rate when no row is replayed in it; a saturated lock is slower (every waiter replays the
    rows committed while it waited, in the lock).
    """
    count = rng.poisson(rate * seconds)
    arrivals = np.sort(rng.uniform(0.0, seconds, count))
    owners = rng.integers(0, hosts, count)
    looked = np.zeros(hosts)  # when each host last read the rows
    seen = np.zeros(hosts, dtype=np.int64)  # how many rows it had read then
    commits = np.empty(count)  # commit times, in order (the journal's rows): the first k are filled
    lock_free_at = 0.0
    busy = 0.0
    latency = np.empty(count)
    in_lock_rows = np.empty(count)
    flush_end = 0.0
    for k in range(count):
        host, start = owners[k], arrivals[k]
        t = start
        if t - looked[host] > 0.1:  # catch_up: one lock-free round trip, then replay outside the lock
            t += rtt
            rows_now = int(np.searchsorted(commits[:k], t))
            t += replay * (rows_now - seen[host])
            seen[host], looked[host] = rows_now, t
        t += rtt / 2  # BEGIN; SELECT ... FOR UPDATE reaches the server
        acquired = max(t, lock_free_at)
        waited_rows = int(np.searchsorted(commits[:k], acquired)) - seen[host]
        hold = rtt + client + server + replay * waited_rows
        released = acquired + hold
        busy += hold
        lock_free_at = released
        commits[k] = released
        in_lock_rows[k] = waited_rows
        seen[host], looked[host] = k + 1, released
        # the barrier: covered by the first flush that starts after the commit (flushes run back to back)
        flush_start = max(released, flush_end)
        flush_end = flush_start + flush
        latency[k] = flush_end + rtt / 2 - start
    return {"charges": float(count), "utilisation": busy / seconds, "median_ms": float(np.median(latency)) * 1e3,
            "p99_ms": float(np.quantile(latency, 0.99)) * 1e3, "in_lock_rows": float(in_lock_rows.mean()),
            "capacity": 1.0 / (rtt + client + server)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--per-day", type=float, default=1e6, help="charges a day, all hosts together")
    parser.add_argument("--peak", type=float, default=4.0, help="busiest hour's rate / the day's mean rate")
    parser.add_argument("--seconds", type=float, default=600.0, help="simulated seconds of each regime")
    parser.add_argument("--rtt-ms", type=float, default=0.5, help="client-server round trip (a LAN: 0.2-1 ms)")
    parser.add_argument("--flush-ms", type=float, default=2.0, help="the server's WAL flush (this disk: 0.1-5 ms)")
    parser.add_argument("--replay-us", type=float, default=38.0, help="client CPU per row replayed and checked")
    parser.add_argument("--client-ms", type=float, default=0.6, help="client CPU of its own charge")
    parser.add_argument("--server-ms", type=float, default=0.66, help="server CPU per charge (barrier included)")
    parser.add_argument("--server-lock-ms", type=float, default=0.4,
                        help="server time per charge while the head lock is held (its statements up to COMMIT)")
    parser.add_argument("--row-bytes", type=float, default=630.0, help="server storage per row, indexes included")
    parser.add_argument("--seed", type=int, default=32)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    mean = args.per_day / DAY
    rtt, flush, replay = args.rtt_ms / 1e3, args.flush_ms / 1e3, args.replay_us / 1e6
    client, server, server_lock = args.client_ms / 1e3, args.server_ms / 1e3, args.server_lock_ms / 1e3
    print(f"{args.hosts} hosts, {args.per_day:,.0f} charges a day ({mean:.1f}/s mean, {mean * args.peak:.1f}/s at "
          f"the peak), round trip {args.rtt_ms:g} ms, flush {args.flush_ms:g} ms")
    print(f"{'regime':>8} {'charges/s':>10} {'lock busy':>10} {'median ms':>10} {'p99 ms':>8} "
          f"{'rows replayed in lock':>22}")
    for name, rate in (("mean", mean), ("peak", mean * args.peak), ("5x peak", mean * args.peak * 5),
                       ("10x peak", mean * args.peak * 10)):
        out = simulate(args.hosts, rate, args.seconds, rtt, flush, replay, client, server_lock, rng)
        print(f"{name:>8} {rate:>10.1f} {out['utilisation']:>10.1%} {out['median_ms']:>10.2f} {out['p99_ms']:>8.2f} "
              f"{out['in_lock_rows']:>22.2f}")
    print(f"the lock serves at most {out['capacity']:,.0f} charges/s (1 / (round trip + client + server in the lock))")
    rows = args.per_day
    print(f"a day: {rows * args.row_bytes / 1e9:.2f} GB of rows on the server; each host replays every row: "
          f"{rows * replay:.0f} CPU-s a host, {rows * replay * args.hosts / 60:.0f} CPU-min in all; server "
          f"{rows * server / 60:.0f} CPU-min; rows sent to hosts {rows * args.hosts * 0.52e3 / 1e9:.0f} GB")


if __name__ == "__main__":
    main()
