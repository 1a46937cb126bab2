"""Anytime (horizon=None, doubling epochs) against the known-horizon Private-GLM on the Table 2 cell.

The cell of README "Table 2, `tight` preset": probit, d = 3, K = 20, S = 2, ε = 4,
δ = 0.02, arms uniform in the unit ball. For each T and seed, the known-horizon policy and
the anytime policy under both epoch budgets (``"parallel"``: each epoch the whole budget
under its partition key; ``"sequential"``: epoch k the share 1/(k(k+1))) play the same
environment; prints mean final regret ± s.e., the ratio anytime / known horizon (mean of
the per-seed ratios), the number of epochs, and each ledger's total spend (its odometer
guarantee, the largest over seeds). docs/service.md, section 4, quotes the numbers.

    python examples/anytime_regret.py --horizons 5000 20000 --seeds 3
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from dpglm.envs import StochasticContextEnv
from dpglm.policies import JointDPGLMBandit, run_policy_record

KINDS = ("known T", "parallel", "sequential")


def _run(T: int, seed: int, kind: str, first_horizon: int) -> tuple[float, float, float, int]:
    env = StochasticContextEnv("probit", 3, 20, 2.0, T, np.random.default_rng([seed, 1]))
    rng = np.random.default_rng([seed, 2])
    if kind == "known T":
        policy = JointDPGLMBandit("probit", 3, T, 2.0, 4.0, 0.02, rng)
    else:
        policy = JointDPGLMBandit("probit", 3, None, 2.0, 4.0, 0.02, rng, first_horizon=first_horizon,
                                  epoch_budget=kind)
    regret = float(run_policy_record(policy, env).regret[-1])
    g = policy.ledger.guarantee()
    return regret, float(g.eps), float(getattr(g, "delta", 0.0)), int(getattr(policy, "epoch", 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizons", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-horizon", type=int, default=1000)
    args = parser.parse_args()
    for T in args.horizons:
        out = {}
        for kind in KINDS:
            runs = [_run(T, s, kind, args.first_horizon) for s in range(args.seeds)]
            r = np.array([x[0] for x in runs])
            se = float(r.std(ddof=1) / math.sqrt(len(r))) if len(r) > 1 else float("nan")
            out[kind] = r
            print(f"T={T} {kind:10s} regret {r.mean():8.1f} ± {se:5.1f}   spend ε={max(x[1] for x in runs):.4f} "
                  f"δ={max(x[2] for x in runs):.4g}   epochs {max(x[3] for x in runs)}", flush=True)
        for kind in KINDS[1:]:
            ratio = out[kind] / out["known T"]
            print(f"T={T} ratio {kind}/known: {ratio.mean():.3f} (per seed {', '.join(f'{x:.2f}' for x in ratio)})",
                  flush=True)


if __name__ == "__main__":
    main()
