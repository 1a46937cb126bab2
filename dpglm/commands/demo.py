"""``dpglm demo``: one short private bandit run, end to end, in a few seconds.

Plays the paper's joint-DP Algorithm 2 (:class:`dpglm.policies.joint_dp.JointDPGLMBandit`)
and the non-private RS-GLinUCB on the same probit instance (paper §8 setting, shorter
horizon), then prints the regret, the private run's released counts (Criterion II
switches, refits made and refused: functions of its releases; Criterion I's count is
computed from users' own arms and is not published) and the ledger report, and saves a
regret plot (PNG), the regret curves (CSV) and a summary with the ledger (JSON) into
``--out`` (docs/service.md, "What a run publishes").
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accounting.validation import check_int, check_positive, check_probability

if TYPE_CHECKING:
    from dpglm.policies import RunRecord

#: The demo's instance: probit, d = 3, K = 20 (paper §8 setting, shorter horizon).
D, N_ARMS = 3, 20


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


def _check(args: argparse.Namespace) -> None:
    """Every user error before any work (one line, naming the flag)."""
    check_int("--horizon", args.horizon)
    check_positive("--epsilon", args.epsilon)
    check_probability("--delta", args.delta)
    check_positive("--S", args.S)
    check_int("--seed", args.seed, 0)


def _play(args: argparse.Namespace) -> tuple[Any, Any, dict[str, RunRecord]]:
    """The environment, the private policy and both runs, built and played through the policy registry."""
    import numpy as np

    from dpglm.envs import StochasticContextEnv
    from dpglm.experiments.cells import Instance
    from dpglm.experiments.registry import Request, entry, play

    instance = Instance("probit", D, N_ARMS, args.S, args.horizon)
    env_seed, policy_seed = np.random.SeedSequence(args.seed).spawn(2)
    env = StochasticContextEnv("probit", D, N_ARMS, args.S, args.horizon, np.random.default_rng(env_seed))
    rng = np.random.default_rng(policy_seed)
    records = {}
    private = None
    for name, epsilon, options in (("Private-GLM", args.epsilon, {"preset": args.preset}),
                                   ("RS-GLinUCB", math.inf, {})):
        policy = entry(name).build(Request(instance, epsilon, args.delta, rng, env, options))
        records[name] = play(name, policy, env)
        private = policy if private is None else private
    return env, private, records


def _report(args: argparse.Namespace, env: Any, private: Any, records: dict[str, RunRecord]) -> None:
    """Regret, the private run's released counts (:meth:`JointDPGLMBandit.diagnostics`), the ledger report."""
    guarantee = private.ledger.guarantee()
    print(
        f"probit, d={D}, K={N_ARMS}, T={args.horizon}, S={args.S} (κ={env.kappa:.1f}), "
        f"ε={args.epsilon}, δ={args.delta}, preset={args.preset}"
    )
    for name, rec in records.items():
        print(f"{name:12s} cumulative regret {rec.regret[-1]:8.1f}   ({rec.seconds:.2f} s)")
    print(
        "released: Criterion II (switch) fired {criterion_II}×; refits θ̂_o {refits_o} (+{refused_o} refused), "
        "θ̂_τ {refits_tau} (+{refused_tau} refused); Criterion I's count is private (not published)".format(
            **records["Private-GLM"].diagnostics)
    )
    print()
    print(private.ledger.report())
    print(f"\nclaim (publish this; valid however the charges were chosen): ε={float(guarantee.eps):.4f}, "
          f"δ={float(guarantee.delta):.4g} (budget asked: ε={args.epsilon}, δ={args.delta})")


def _save(args: argparse.Namespace, out: Path, env: Any, private: Any, records: dict[str, RunRecord]) -> None:
    """``regret.csv``, ``summary.json`` (with the ledger) and ``regret.png`` in ``out``."""
    import numpy as np
    from matplotlib.figure import Figure  # no pyplot: no backend switch, no global figure (issue 26)

    from dpglm.engine.results import strict_json

    rounds = np.arange(1, args.horizon + 1)
    with open(out / "regret.csv", "w") as fh:
        fh.write("t," + ",".join(records) + "\n")
        for i, t in enumerate(rounds):
            fh.write(f"{t}," + ",".join(f"{rec.regret[i]:.6f}" for rec in records.values()) + "\n")
    guarantee = private.ledger.guarantee()
    summary = {
        "setting": {"family": "probit", "d": D, "K": N_ARMS, "horizon": args.horizon, "S": args.S,
                    "kappa": env.kappa, "epsilon": args.epsilon, "delta": args.delta,
                    "preset": args.preset, "seed": args.seed},
        "final_regret": {name: float(rec.regret[-1]) for name, rec in records.items()},
        "seconds": {name: rec.seconds for name, rec in records.items()},
        "criteria": records["Private-GLM"].diagnostics,
        "guarantee": {"epsilon": float(guarantee.eps), "delta": float(guarantee.delta),
                      "means": "the ledger's claim: (epsilon, delta)-DP ex post, valid under fully adaptive "
                               "composition (docs/accounting.md, Claims)", "bases": list(guarantee.bases)},
        "parameters": private.params.as_dict(),
        "ledger": json.loads(private.ledger.to_json()),
    }
    (out / "summary.json").write_text(strict_json(summary, indent=2))
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for name, rec in records.items():
        ax.plot(rounds, rec.regret, label=name)
    ax.set_xlabel("round t")
    ax.set_ylabel("cumulative regret")
    ax.set_title(f"probit d={D}, K={N_ARMS}, S={args.S}, ε={args.epsilon}, δ={args.delta}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "regret.png", dpi=120)  # PNG through matplotlib's Agg canvas


def run(args: argparse.Namespace) -> int:
    """Play both policies, print the report, save the files."""
    from dpglm.engine.results import prepare_output

    _check(args)
    out = prepare_output(args.out)  # before any work; errors name the flag
    env, private, records = _play(args)
    _report(args, env, private, records)
    _save(args, out, env, private, records)
    print(f"\nsaved {out / 'regret.png'}, {out / 'regret.csv'}, {out / 'summary.json'}")
    return 0
