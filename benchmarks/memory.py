"""Peak RSS of one RS-GLinUCB run against its horizon, each in a fresh process.

    python -m benchmarks.memory [--horizons 20000 200000 1000000] [--d 10] [--K 20] [--policy RS-GLinUCB]
                                [--trees BEFORE_DIR AFTER_DIR]

Each horizon runs in its own ``python -m benchmarks.memory --child T`` process (probit,
S = 2.5, :class:`dpglm.envs.StochasticContextEnv`, ``run_policy_record``, the sweep's
path). The child reports its RSS after setup (imports, env and policy built, before
round 1) and its peak RSS (``ru_maxrss``) after the run; growth per round is
(peak − setup)/T. A run keeps, per round, its refit rows (8·(d + 1) bytes,
``dpglm.policies.running.Rows``) and the run record's arrays (actions, rewards, regret;
docs/design.md, memory flat in T). ``--trees`` runs each horizon in each given checkout
(its directory as the child's working directory and ``PYTHONPATH``), side by side, for a
before/after table from one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def child(horizon: int, d: int, k: int, policy_name: str) -> None:
    import numpy as np

    from benchmarks.rounds import make_policy
    from dpglm.envs import StochasticContextEnv
    from dpglm.policies import run_policy_record

    env = StochasticContextEnv("probit", d, k, 2.5, horizon, np.random.default_rng(0))
    policy = make_policy(policy_name, d, horizon, 0, env)
    setup = _rss_mb()
    start = time.process_time()
    record = run_policy_record(policy, env)
    seconds = time.process_time() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{setup:.1f} {peak:.1f} {seconds:.1f} {float(record.regret[-1]):.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizons", type=int, nargs="+", default=[20_000, 200_000, 1_000_000])
    parser.add_argument("--d", type=int, default=10)
    parser.add_argument("--K", type=int, default=20)
    parser.add_argument("--policy", default="RS-GLinUCB")
    parser.add_argument("--trees", nargs="+", default=None,
                        help="checkouts to measure side by side (default: this one)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.d, args.K, args.policy)
        return 0
    trees = args.trees or [os.getcwd()]
    for tree in trees:
        if not os.path.isdir(os.path.join(tree, "dpglm")):
            raise SystemExit(f"--trees: {tree!r} is not a dpglm checkout (no dpglm/ in it)")
    print(f"{args.policy}, probit d={args.d} K={args.K}; fresh process per horizon")
    head = (f"{'tree':<16} {'T':>9} {'setup MB':>9} {'peak MB':>8} {'growth B/round':>15} {'16(d+1)':>8} "
            f"{'CPU s':>7} {'regret':>8}")
    print(head)
    print("-" * len(head))
    for horizon in args.horizons:
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
            out = subprocess.run([sys.executable, "-m", "benchmarks.memory", "--child", str(horizon), "--d",
                                  str(args.d), "--K", str(args.K), "--policy", args.policy], capture_output=True,
                                 text=True, check=True, cwd=tree, env=env)
            setup, peak, seconds, regret = (float(v) for v in out.stdout.split())
            growth = (peak - setup) * 2**20 / horizon
            print(f"{os.path.basename(os.path.abspath(tree))[-16:]:<16} {horizon:>9} {setup:>9.1f} {peak:>8.1f} "
                  f"{growth:>15.1f} {16 * (args.d + 1):>8} {seconds:>7.1f} {regret:>8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
