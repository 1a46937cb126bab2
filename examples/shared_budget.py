"""Worker processes on a dask cluster train DP-SGD on one dataset, all charging one PostgreSQL budget.

Run ``python examples/shared_budget.py [postgresql://user@host:port/db]`` (needs the ``postgres`` and
``dask`` extras). Without a URL it starts a throwaway PostgreSQL server (``accounting.journal._pgserver``;
Debian's ``postgresql-15`` binaries) and a temporary anchor directory, and removes both at the end.

Each task opens its own ``Ledger(ZCDP(rho), journal=URL)`` in its worker process (ledgers cannot be
pickled: each worker builds its own, on its own connection) and fits a logistic regression with
``mechanisms.optim.DPSGD``, which charges the whole run before it draws any noise. The budget affords
``floor(rho / cost)`` runs; the tasks race for it, and the one that would overspend is refused with
``BudgetExceeded`` — its generator untouched, so no noise was drawn (docs/accounting.md, "The
PostgreSQL journal").
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from fractions import Fraction

import numpy as np


def dataset(seed: int = 0, n: int = 2000, d: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic logistic-regression dataset (rows of norm <= 1, labels from a fixed direction)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    theta = np.ones(d) * 2.0
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ theta))).astype(float)
    return X, y


def train(task: int, url: str, rho: str, cost: str, seed: int) -> dict[str, object]:
    """One worker's run: open the shared budget, charge and train, or be refused before any noise."""
    from accounting import ZCDP, BudgetExceeded, Ledger
    from mechanisms.optim import DPSGD, BallProjection

    X, y = dataset()
    rng = np.random.default_rng([seed, task])
    before = rng.bit_generator.state
    with Ledger(ZCDP(Fraction(rho)), journal=url) as ledger:
        optimizer = DPSGD(ledger.root, "logistic", rng, clip=1.0, engine="vectorised")
        try:
            release = optimizer.fit(X, y, steps=60, lr=1.0, projection=BallProjection(5.0),
                                    cost=ZCDP(Fraction(cost)), note=f"task {task}")
        except BudgetExceeded as refused:
            return {"task": task, "pid": os.getpid(), "granted": False, "refusal": str(refused),
                    "noise_drawn": rng.bit_generator.state != before}
        theta = np.asarray(release.value)
        accuracy = float(np.mean((X @ theta > 0) == (y > 0.5)))
        return {"task": task, "pid": os.getpid(), "granted": True, "seq": release.receipt.seq,
                "accuracy": accuracy, "noise_drawn": rng.bit_generator.state != before}


def main(url: str | None = None, tasks: int = 4, rho: str = "1", cost: str = "0.3", seed: int = 0,
         workers: int = 2) -> dict[str, object]:
    """Run ``tasks`` trainings on a local dask cluster of ``workers`` processes; return what happened."""
    from dask.distributed import Client, LocalCluster

    from accounting import ZCDP, Ledger
    from accounting.journal.postgres import parse_url

    server = None
    anchors = None
    saved = os.environ.get("DPGLM_ANCHOR_DIR")
    if url is None:
        from accounting.journal._pgserver import TemporaryServer

        server = TemporaryServer().start()
        anchors = tempfile.TemporaryDirectory(prefix="dpglm-anchors-")
        os.environ["DPGLM_ANCHOR_DIR"] = anchors.name  # this host's anchors, for this throwaway server only
        url = f"{server.url}?journal=shared-budget"
    try:
        Ledger(ZCDP(Fraction(rho)), journal=url).close()  # create the journal (or check an existing one's budget)
        env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        if anchors is not None:
            env["DPGLM_ANCHOR_DIR"] = anchors.name
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                          env=env, silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
            futures = [client.submit(train, task, url, rho, cost, seed, pure=False) for task in range(tasks)]
            runs = sorted(client.gather(futures), key=lambda run: run["task"])
        shown = Ledger.from_journal(url, read_only=True)
        spent = str(shown.root.spent.rho)
        shown.close()
        return {"url": parse_url(url)[1], "budget_rho": rho, "cost_rho": cost, "spent_rho": spent,
                "runs": runs}
    finally:
        if server is not None:
            server.stop()
        if anchors is not None:
            anchors.cleanup()
            if saved is None:
                del os.environ["DPGLM_ANCHOR_DIR"]
            else:
                os.environ["DPGLM_ANCHOR_DIR"] = saved


if __name__ == "__main__":
    result = main(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else None)
    if "--json" in sys.argv:
        print(json.dumps(result))
    else:
        for run in result["runs"]:
            if run["granted"]:
                print(f"task {run['task']} (pid {run['pid']}): granted as row {run['seq']}, "
                      f"training accuracy {run['accuracy']:.3f}")
            else:
                print(f"task {run['task']} (pid {run['pid']}): refused before any noise "
                      f"(noise drawn: {run['noise_drawn']}): {run['refusal']}")
        print(f"spent rho = {result['spent_rho']} of {result['budget_rho']} (each run costs {result['cost_rho']})")
