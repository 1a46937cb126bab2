"""Seconds per T = 5000 run of every Table 2 algorithm (dpglm alone).

    python -m benchmarks.bandits [--seeds 2] [--horizon 5000] [--S 2.5 ...] [--repeat 1]

One sweep cell per (algorithm, S, seed) on the paper's Table 2 instance (probit, d = 3,
K = 20, δ = 0.02), run in-process one after another (no pool), so the CPU seconds are
the policy's own. The machine is shared: ``--repeat N`` runs every cell N times and keeps
its smallest CPU time (other jobs only ever add time); the table shows the mean over
seeds and S of that minimum. Against the paper's own code, measured side by side in
one run, see ``python -m benchmarks.compare_reference --reference DIR``.
"""

from __future__ import annotations

import argparse
import time

from dpglm.experiments.sweep import Instance, Sweep, run_cell


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--horizon", type=int, default=5000)
    parser.add_argument("--S", type=float, nargs="+", default=[2.5])
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per cell; the smallest CPU time is kept (default 1)")
    parser.add_argument("--algorithms", nargs="+",
                        default=["Private-GLM", "Private-GLM:calibrated", "Private-GLM:paper-simulation", "RS-GLinUCB",
                                 "GLOC", "GLM-UCB"])
    args = parser.parse_args()
    if args.repeat < 1:
        raise ValueError(f"--repeat must be >= 1, got {args.repeat}")
    sweep = Sweep(algorithms=tuple(args.algorithms),
                  instances=tuple(Instance("probit", 3, 20, S, args.horizon) for S in args.S),
                  epsilons=(4.0,), seeds=args.seeds, record_every=args.horizon)
    run_cell(sweep.cells()[0])  # warm-up: imports (torch) and caches are not the policy's cost
    per_label: dict[str, list[tuple[float, float, float]]] = {}
    for cell in sweep.cells():
        best = None
        for _ in range(args.repeat):
            wall = time.perf_counter()
            rows = run_cell(cell)
            wall = time.perf_counter() - wall
            if best is None or rows[-1]["seconds"] < best[0]:
                best = (rows[-1]["seconds"], wall, rows[-1]["regret"])
        per_label.setdefault(cell.label, []).append(best)
    S_text = ", ".join(f"{S:g}" for S in args.S)
    print(f"probit d=3 K=20 T={args.horizon} S ∈ {{{S_text}}} δ=0.02, ε=4 for Private-GLM, "
          f"{args.seeds} seeds, min CPU of {args.repeat} repeat(s) per run")
    head = f"{'algorithm':<30} {'cpu s/run':>9} {'wall s/run':>10} {'regret':>8}"
    print(head)
    print("-" * len(head))
    for label, results in per_label.items():
        cpu = sum(r[0] for r in results) / len(results)
        wall = sum(r[1] for r in results) / len(results)
        regret = sum(r[2] for r in results) / len(results)
        print(f"{label:<30} {cpu:>9.2f} {wall:>10.2f} {regret:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
