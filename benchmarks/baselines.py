"""Seconds per run and mean final regret of the non-private baselines on the paper's
Table 2 instances (probit, d = 3, K = 20, T = 5000, δ = 0.02, S ∈ {2, 2.5, 3}).

    python -m benchmarks.baselines [--seeds 3] [--horizon 5000] [--algorithms GLM-UCB GLOC ECOLog]

Each run uses StochasticContextEnv(seed) so every algorithm sees the same contexts and
reward uniforms; κ passed to GLM-UCB and GLOC is the oracle κ over the run's contexts,
as in the paper's simulations. Prints wall and CPU seconds per run (the machine may be
shared: CPU seconds are the fairer speed figure) and the paper's row beside ours.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpglm.envs import StochasticContextEnv
from dpglm.policies import run_policy_record
from dpglm.policies.ecolog import ECOLog
from dpglm.policies.glm_ucb import GLMUCB
from dpglm.policies.gloc import GLOC

PAPER_TABLE2 = {  # paper Table 2 (docs/references.md)
    "GLM-UCB": {2.0: 1400.27, 2.5: 1943.23, 3.0: 2323.06},
    "GLOC": {2.0: 384.68, 2.5: 631.60, 3.0: 1346.59},
}
PAPER_CODE_SECONDS = {"GLM-UCB": "80-135", "GLOC": "8-12", "ECOLog": "-"}


def make_policy(name: str, env: StochasticContextEnv, horizon: int, delta: float):
    if name == "GLM-UCB":
        return GLMUCB(env.family, env.d, horizon=horizon, delta=delta, kappa=env.kappa)
    if name == "GLOC":
        return GLOC(env.family, env.d, S=env.S, delta=delta, kappa=env.kappa, preset="paper-simulation")
    if name == "GLOC-theory":
        return GLOC(env.family, env.d, S=env.S, delta=delta, kappa=env.kappa, preset="theory")
    if name == "ECOLog":
        return ECOLog(env.family, env.d, S=env.S, delta=delta)
    raise ValueError(f"unknown algorithm {name!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--horizon", type=int, default=5000)
    parser.add_argument("--delta", type=float, default=0.02)
    parser.add_argument("--algorithms", nargs="+", default=["GLM-UCB", "GLOC", "GLOC-theory", "ECOLog"])
    parser.add_argument("--S", nargs="+", type=float, default=[2.0, 2.5, 3.0])
    args = parser.parse_args()

    header = (f"{'algorithm':<12} {'S':>4} {'kappa':>7} {'regret':>9} {'± sd':>7} {'paper':>8} {'diff':>7} "
              f"{'wall s/run':>10} {'cpu s/run':>9} {'paper s/run':>11}")
    print(f"probit d=3 K=20 T={args.horizon} delta={args.delta}, {args.seeds} seeds per cell")
    print(header)
    print("-" * len(header))
    for name in args.algorithms:
        for S in args.S:
            finals, walls, cpus, kappas = [], [], [], []
            for seed in range(args.seeds):
                env = StochasticContextEnv("probit", 3, 20, S, args.horizon, np.random.default_rng(seed))
                policy = make_policy(name, env, args.horizon, args.delta)
                cpu0 = time.process_time()
                record = run_policy_record(policy, env)
                cpus.append(time.process_time() - cpu0)
                walls.append(record.seconds)
                finals.append(record.regret[-1])
                kappas.append(env.kappa)
            paper = PAPER_TABLE2.get(name, {}).get(S) if args.horizon == 5000 else None
            diff = f"{100 * (np.mean(finals) / paper - 1):+.1f}%" if paper else "-"
            print(
                f"{name:<12} {S:>4} {np.mean(kappas):>7.2f} {np.mean(finals):>9.1f} {np.std(finals):>7.1f} "
                f"{paper if paper else '-':>8} {diff:>7} {np.mean(walls):>10.2f} {np.mean(cpus):>9.2f} "
                f"{PAPER_CODE_SECONDS.get(name.split('-theory')[0], '-'):>11}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
