"""The shuffle bandit's first run against a later one: the calibration disk cache, fresh processes.

    python -m benchmarks.calibration_cache [--dims 3 10] [--horizon 20000]

For each d, two fresh processes run ``ShuffleDPGLMBandit`` (probit, K = 20, S = 2.5,
ε = 4, δ = 0.02) through ``run_batched_policy`` with ``DPGLM_CACHE_DIR`` set to one new
empty directory: the first computes every noise calibration and stores it
(:mod:`mechanisms.calibration_cache`), the second loads and verifies them (one forward
accounting call each). CPU seconds of the run, imports excluded, policy construction
included (that is where the design sums calibrate).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time


def child(d: int, horizon: int) -> None:
    import numpy as np

    from dpglm.envs import StochasticContextEnv
    from dpglm.policies import ShuffleDPGLMBandit
    from dpglm.policies.batched import run_batched_policy

    start = time.process_time()
    env = StochasticContextEnv("probit", d, 20, 2.5, horizon, np.random.default_rng(0))
    policy = ShuffleDPGLMBandit("probit", d, horizon, 2.5, np.random.default_rng(1), epsilon=4.0, delta=0.02)
    record = run_batched_policy(policy, env)
    print(f"{time.process_time() - start:.2f} {float(record.regret[-1]):.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[3, 10])
    parser.add_argument("--horizon", type=int, default=20000)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.horizon)
        return 0
    print(f"ShuffleDP-GLM probit K=20 T={args.horizon} eps=4: CPU s of one run in a fresh process")
    print(f"{'d':>3} {'first run':>10} {'cached run':>11} {'ratio':>6} {'same regret':>12}")
    for d in args.dims:
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "DPGLM_CACHE_DIR": cache}
            runs = [subprocess.run([sys.executable, "-m", "benchmarks.calibration_cache", "--child", str(d),
                                    "--horizon", str(args.horizon)], env=env, capture_output=True, text=True,
                                   check=True).stdout.split() for _ in range(2)]
        (first, regret_first), (cached, regret_cached) = ((float(a), b) for a, b in runs)
        print(f"{d:>3} {first:>10.2f} {cached:>11.2f} {first / cached:>6.1f} {str(regret_first == regret_cached):>12}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
