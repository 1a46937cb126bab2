"""Ledger throughput: granted charges per second, in memory and with the SQLite journal.

Run: ``python -m benchmarks.ledger [--memory N] [--journal N]``. The journalled
case commits each chained row into the main file (rollback journal,
``synchronous=FULL``: the journal and the .db are fsync'd) and fsyncs the anchor
before each receipt (accounting/journal.py), so it measures the disk's fsync
rate more than the ledger. Before the chained journal (WAL, one fsync per
charge, the last charges only in -wal) the same machine did about 3-4x more.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from fractions import Fraction

from accounting import GDP, ZCDP, ApproxDP, Ledger


def charges_per_second(n_charges: int, journal: str | None, partitions: int, currency: str = "zcdp") -> float:
    """Time ``n_charges`` granted charges on the paper's optimizer account in ``currency`` (zcdp, gdp, rdp)."""
    ledger = Ledger(ApproxDP(4, 0.02), journal=journal)
    accounts = ledger.split({"tree": 1, "switching": 1, "optimizer": 1},
                            currency={"tree": "zcdp", "optimizer": currency})
    optimizer = accounts["optimizer"]
    if currency == "gdp":
        cost = GDP.from_mu_squared(optimizer.budget.mu_squared / Fraction(n_charges + 1))
    else:  # an rdp account prices ρ-zCDP at αρ on every order of its grid
        rho = optimizer.budget.rho if currency == "zcdp" else optimizer.budget.epsilons[9] / 2  # ORDERS[9] = 2
        cost = ZCDP(rho / Fraction(n_charges + 1))
    start = time.perf_counter()
    for k in range(n_charges):
        optimizer.charge(cost, mechanism="DPSGD", partition=(k % partitions) if partitions else None)
    elapsed = time.perf_counter() - start
    ledger.close()
    return n_charges / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory", type=int, default=20000, help="charges timed in memory (default 20000)")
    parser.add_argument("--journal", type=int, default=500, help="charges timed with a journal (default 500)")
    args = parser.parse_args()
    rows = [
        ("in memory", args.memory, charges_per_second(args.memory, None, 0)),
        ("in memory, 16 partitions", args.memory, charges_per_second(args.memory, None, 16)),
        ("in memory, gdp account", args.memory, charges_per_second(args.memory, None, 0, "gdp")),
        ("in memory, rdp account (156 orders)", args.memory // 10,
         charges_per_second(args.memory // 10, None, 0, "rdp")),
    ]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "bench.db")
        rows.append(("SQLite journal (chained)", args.journal, charges_per_second(args.journal, path, 0)))
    print(f"{'mode':<28} {'charges':>8} {'charges/s':>12}")
    for mode, count, rate in rows:
        print(f"{mode:<28} {count:>8} {rate:>12,.0f}")


if __name__ == "__main__":
    main()
