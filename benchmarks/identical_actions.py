"""Actions and regret of fixed-seed runs, saved from one checkout and compared with another's.

    python -m benchmarks.identical_actions save FILE.npz [--seeds 20] [--horizon 3000] [--d 5] [--K 20]
    python -m benchmarks.identical_actions compare BEFORE.npz AFTER.npz

``save`` plays RS-GLinUCB, Private-GLM (``JointDPGLMBandit``, preset ``tight``) and
ShuffleDP-GLM (``run_batched_policy``) on the probit instance of ``benchmarks.rounds``,
seed s for the environment and s + 1 for the policy's noise, and stores every run's
actions and final regret. ``compare`` counts, per policy, the runs whose actions differ,
the rounds that differ in all, and the first round of each divergence, and compares the
mean final regret (± its standard error) before and after.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

POLICIES = ("RS-GLinUCB", "Private-GLM", "ShuffleDP-GLM")


def save(path: str, seeds: int, horizon: int, d: int, k: int) -> None:
    from benchmarks.rounds import FAMILY, S, make_policy
    from dpglm.envs import StochasticContextEnv
    from dpglm.policies import run_policy_record

    out: dict[str, np.ndarray] = {}
    for name in POLICIES:
        for seed in range(seeds):
            env = StochasticContextEnv(FAMILY, d, k, S, horizon, np.random.default_rng(seed))
            record = run_policy_record(make_policy(name, d, horizon, seed, env), env)
            out[f"{name}/{seed}/actions"] = record.actions
            out[f"{name}/{seed}/regret"] = np.array(record.regret[-1])
    np.savez_compressed(path, **out)


def compare(before_path: str, after_path: str) -> None:
    before, after = np.load(before_path), np.load(after_path)
    print(f"{'policy':<15} {'runs':>4} {'runs differing':>14} {'rounds differing':>16} {'first divergences':<24} "
          f"{'regret before':>16} {'regret after':>16}")
    for name in POLICIES:
        seeds = sorted({int(key.split("/")[1]) for key in before.files if key.startswith(name + "/")})
        differing, rounds, firsts, regrets = 0, 0, [], ([], [])
        for seed in seeds:
            a, b = before[f"{name}/{seed}/actions"], after[f"{name}/{seed}/actions"]
            diff = np.flatnonzero(a != b)
            if diff.size:
                differing += 1
                rounds += diff.size
                firsts.append(int(diff[0]) + 1)
            regrets[0].append(float(before[f"{name}/{seed}/regret"]))
            regrets[1].append(float(after[f"{name}/{seed}/regret"]))
        summary = [f"{np.mean(r):.1f} ± {np.std(r, ddof=1) / math.sqrt(len(r)):.1f}" for r in regrets]
        total = len(seeds) * len(before[f"{name}/{seeds[0]}/actions"])
        print(f"{name:<15} {len(seeds):>4} {differing:>14} {f'{rounds}/{total}':>16} {str(firsts)[:24]:<24} "
              f"{summary[0]:>16} {summary[1]:>16}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("save")
    s.add_argument("path")
    s.add_argument("--seeds", type=int, default=20)
    s.add_argument("--horizon", type=int, default=3000)
    s.add_argument("--d", type=int, default=5)
    s.add_argument("--K", type=int, default=20)
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = parser.parse_args(argv)
    if args.command == "save":
        save(args.path, args.seeds, args.horizon, args.d, args.K)
    else:
        compare(args.before, args.after)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
