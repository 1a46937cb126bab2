"""DP-SGD on scikit-learn's digits audited at a claimed ApproxDP(10, 1e-5) (μ = 2.00): black box and white box.

Run ``python examples/audit_dpsgd_canaries.py [RUNS [OPACUS_RUNS]]`` (needs the ``membership`` and ``opacus``
extras). Binary task "digit ≥ 5", full batch, T = 20 steps, clip C = 1, crafted canaries in input columns no
digit uses (docs/audits.md, "DP-SGD on real data"), for the project's DPSGD on each engine and for opacus
through the ledger adapter:

* black box: RUNS training runs per neighbour (default 1000; OPACUS_RUNS, default 300, for opacus's own
  loop), only the final model, queried on the canary: μ lower bound (Gaussian reading) and the
  assumption-free Clopper–Pearson ε with its ceiling;
* white box: two training runs of 1000 canaries each, every step observed: μ across steps (Nasr et al.
  2023) and the one-run assumption-free bounds (Steinke et al. 2023; f-DP) with their ceilings.

Each line ends with the training runs and CPU seconds it took.
"""

import sys
import time

from audits.dpsgd_canary import DPSGDBlackBoxAudit, OpacusBlackBoxAudit
from audits.dpsgd_whitebox import DPSGDWhiteBoxAudit

ENGINES = ("numpy", "vectorised", "opacus")


def black_box(runs=1000, opacus_runs=300, epsilon=10.0, seed=0):
    audits = [(DPSGDBlackBoxAudit(epsilon, engine=engine, name=f"blackbox-{engine}"), runs) for engine in ENGINES]
    audits.append((OpacusBlackBoxAudit(epsilon, name="blackbox-opacus-ledger"), opacus_runs))
    results = []
    for audit, count in audits:
        holdout = max(20, count // 5)
        start = time.process_time()
        result = audit.run(count, seed=seed, holdout_runs=holdout)
        seconds = time.process_time() - start
        print(f"{result.summary()}  [{2 * (count + holdout) + 1} training runs, {seconds:.0f} CPU s]", flush=True)
        results.append((result, seconds))
    return results


def white_box(epsilon=10.0, canaries=1000, seed=0):
    reports = []
    for engine in (*ENGINES, "opacus-ledger"):
        report = DPSGDWhiteBoxAudit(epsilon, canaries=canaries, engine=engine, name=f"whitebox-{engine}").run(
            2, seed=seed)
        print(report.summary(), flush=True)
        reports.append(report)
    return reports


if __name__ == "__main__":
    arguments = [int(value) for value in sys.argv[1:3]]
    wall = time.perf_counter()
    white_box()
    black_box(*arguments)
    print(f"{time.perf_counter() - wall:.0f} s wall")
