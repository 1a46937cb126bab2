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

from accounting import GDP, RDP, ZCDP, ApproxDP, Cost, Ledger
from accounting.costs import ORDERS


def charges_per_second(n_charges: int, journal: str | None, partitions: int, currency: str = "zcdp") -> float:
    """Time ``n_charges`` granted charges on the paper's optimizer account in ``currency`` (zcdp, gdp, rdp).

    gdp charges a pre-built GDP cost and rdp a pre-built RDP cost (a DP-SGD step's curve on the whole grid; the
    default rdp account holds one order of it), so the two rows compare the charge paths side by side.
    """
    ledger = Ledger(ApproxDP(4, 0.02), journal=journal)
    accounts = ledger.split({"tree": 1, "switching": 1, "optimizer": 1},
                            currency={"tree": "zcdp", "optimizer": currency})
    optimizer = accounts["optimizer"]
    cost: Cost
    if currency == "gdp":  # a pre-built GDP cost
        cost = GDP.from_mu_squared(optimizer.budget.mu_squared / Fraction(n_charges + 1))
    elif currency == "rdp":  # a pre-built RDP cost: one DP-SGD step's curve on the whole grid, scaled to fit
        cost = rdp_step_cost(optimizer.budget, n_charges)
    else:
        cost = ZCDP(optimizer.budget.rho / Fraction(n_charges + 1))
    start = time.perf_counter()
    for k in range(n_charges):
        optimizer.charge(cost, mechanism="DPSGD", partition=(k % partitions) if partitions else None)
    elapsed = time.perf_counter() - start
    ledger.close()
    return n_charges / elapsed


def rdp_step_cost(budget: Cost, n_charges: int) -> RDP:
    """One Poisson-subsampled Gaussian step (q = 0.01, z = 1) on the 156-order grid, small enough to fit n times."""
    assert isinstance(budget, RDP)
    from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant([float(o) for o in ORDERS])
    accountant.compose(PoissonSampledDpEvent(0.01, GaussianDpEvent(1.0)))
    step = RDP.from_floats_up(accountant._rdp)
    scale = min(b / step.at(o) for o, b in zip(budget.orders, budget.epsilons, strict=True)) / (n_charges + 1)
    return RDP([e * scale for e in step.epsilons])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory", type=int, default=20000, help="charges timed in memory (default 20000)")
    parser.add_argument("--journal", type=int, default=500, help="charges timed with a journal (default 500)")
    args = parser.parse_args()
    rows = [
        ("in memory", args.memory, charges_per_second(args.memory, None, 0)),
        ("in memory, 16 partitions", args.memory, charges_per_second(args.memory, None, 16)),
        ("in memory, gdp account", args.memory, charges_per_second(args.memory, None, 0, "gdp")),
        ("in memory, rdp account", args.memory, charges_per_second(args.memory, None, 0, "rdp")),
    ]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "bench.db")
        rows.append(("SQLite journal (chained)", args.journal, charges_per_second(args.journal, path, 0)))
    print(f"{'mode':<28} {'charges':>8} {'charges/s':>12}")
    for mode, count, rate in rows:
        print(f"{mode:<28} {count:>8} {rate:>12,.0f}")
    print(f"rdp (pre-built 156-order RDP cost, one held order) / gdp (pre-built GDP cost): "
          f"{rows[3][2] / rows[2][2]:.2f}x")


if __name__ == "__main__":
    main()
