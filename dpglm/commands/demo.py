"""``dpglm demo``: one short private bandit run, end to end, in a few seconds.

Plays the paper's joint-DP Algorithm 2 (:class:`dpglm.policies.joint_dp.JointDPGLMBandit`)
and the non-private RS-GLinUCB on the same probit instance (paper §8 setting, shorter
horizon), then prints the regret, how often each criterion fired and the ledger report
(the three thirds and the total (ε, δ)), and saves a regret plot (PNG), the regret
curves (CSV) and a summary with the ledger (JSON) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="results/demo", help="output directory (default: results/demo)")
    parser.add_argument("--epsilon", type=float, default=4.0, help="privacy budget ε (default 4)")
    parser.add_argument("--delta", type=float, default=0.02, help="privacy budget δ (default 0.02)")
    parser.add_argument("--horizon", type=int, default=2000, help="rounds T (default 2000)")
    parser.add_argument("--S", type=float, default=2.5, help="‖θ*‖ (default 2.5)")
    parser.add_argument(
        "--preset",
        default="tight",
        choices=("tight", "paper-simulation", "calibrated", "theory"),
        help="constants of Algorithm 2 (default tight: one Gaussian pool, RS-GLinUCB's constants + noise terms)",
    )
    parser.add_argument("--seed", type=int, default=0, help="root seed (default 0)")


def run(args: argparse.Namespace) -> int:
    import math

    if args.horizon < 1:
        raise ValueError(f"--horizon must be >= 1, got {args.horizon}")
    if not (math.isfinite(args.epsilon) and args.epsilon > 0):
        raise ValueError(f"--epsilon must be a finite number > 0, got {args.epsilon}")
    if not 0 < args.delta < 1:
        raise ValueError(f"--delta must lie in (0, 1), got {args.delta}")
    if not (math.isfinite(args.S) and args.S > 0):
        raise ValueError(f"--S must be a finite number > 0, got {args.S}")
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    import numpy as np

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpglm.envs import StochasticContextEnv
    from dpglm.experiments.results import strict_json
    from dpglm.policies import run_policy_record
    from dpglm.policies.joint_dp import JointDPGLMBandit
    from dpglm.policies.rarely_switching import RSGLinUCB

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    d, n_arms = 3, 20
    env_seed, policy_seed = np.random.SeedSequence(args.seed).spawn(2)
    env = StochasticContextEnv("probit", d, n_arms, args.S, args.horizon, np.random.default_rng(env_seed))
    private = JointDPGLMBandit(
        "probit", d, args.horizon, args.S, args.epsilon, args.delta,
        np.random.default_rng(policy_seed), preset=args.preset,
    )
    records = {
        "Private-GLM": run_policy_record(private, env),
        "RS-GLinUCB": run_policy_record(RSGLinUCB("probit", d, args.horizon, args.S, delta=args.delta), env),
    }
    guarantee = private.ledger.guarantee()
    print(
        f"probit, d={d}, K={n_arms}, T={args.horizon}, S={args.S} (κ={env.kappa:.1f}), "
        f"ε={args.epsilon}, δ={args.delta}, preset={args.preset}"
    )
    for name, rec in records.items():
        print(f"{name:12s} cumulative regret {rec.regret[-1]:8.1f}   ({rec.seconds:.2f} s)")
    counts = records["Private-GLM"].diagnostics
    print(
        "criteria: Criterion I (exploration) fired {criterion_I}×, Criterion II (switch) {criterion_II}×; "
        "refits θ̂_o {refits_o} (+{refused_o} refused), θ̂_τ {refits_tau} (+{refused_tau} refused)".format(**counts)
    )
    print()
    print(private.ledger.report())
    print(f"\ntotal guarantee: ε={float(guarantee.eps):.4f}, δ={float(guarantee.delta):.4g} "
          f"(asked ε={args.epsilon}, δ={args.delta})")

    rounds = np.arange(1, args.horizon + 1)
    with open(out / "regret.csv", "w") as fh:
        fh.write("t," + ",".join(records) + "\n")
        for i, t in enumerate(rounds):
            fh.write(f"{t}," + ",".join(f"{rec.regret[i]:.6f}" for rec in records.values()) + "\n")
    summary = {
        "setting": {"family": "probit", "d": d, "K": n_arms, "horizon": args.horizon, "S": args.S,
                    "kappa": env.kappa, "epsilon": args.epsilon, "delta": args.delta,
                    "preset": args.preset, "seed": args.seed},
        "final_regret": {name: float(rec.regret[-1]) for name, rec in records.items()},
        "seconds": {name: rec.seconds for name, rec in records.items()},
        "criteria": counts,
        "guarantee": {"epsilon": float(guarantee.eps), "delta": float(guarantee.delta)},
        "parameters": private.params.as_dict(),
        "ledger": json.loads(private.ledger.to_json()),
    }
    (out / "summary.json").write_text(strict_json(summary, indent=2))
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, rec in records.items():
        ax.plot(rounds, rec.regret, label=name)
    ax.set_xlabel("round t")
    ax.set_ylabel("cumulative regret")
    ax.set_title(f"probit d={d}, K={n_arms}, S={args.S}, ε={args.epsilon}, δ={args.delta}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "regret.png", dpi=120)
    plt.close(fig)
    print(f"\nsaved {out / 'regret.png'}, {out / 'regret.csv'}, {out / 'summary.json'}")
    return 0
