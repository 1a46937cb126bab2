"""CPU seconds per run of every Table 2 algorithm: the paper's public code beside dpglm, in one run.

    python -m benchmarks.compare_reference --reference DIR [--seeds 1] [--horizon 5000] [--S 2.5]
                                           [--algorithms Private-GLM RS-GLinUCB GLOC GLM-UCB]

``DIR`` is a checkout of the authors' public repository (Sahasrajit123/
Shuffle_joint_dp_generalized_linear_contextual_bandits on GitHub; the numbers in
README were measured at commit d9c93e1) that *you* fetched: nothing of it is
vendored here, it is imported from ``DIR`` at run time. On the paper's Table 2
instance (probit, d = 3, K = 20, δ = 0.02, ε = 4 for Private-GLM) every
(algorithm, seed) is run once by the reference and once by dpglm, interleaved
(reference, dpglm, reference, dpglm, …) so that load on a shared machine hits
both sides alike.

Columns:

* ``run`` — CPU seconds (``time.process_time``) of one run inside a warm process:
  building the environment and the policy, then T rounds. Imports are excluded.
* ``import`` — CPU seconds of a fresh interpreter that only imports what the run
  needs (measured in a child process, ``RUSAGE_CHILDREN``).
* ``whole`` = ``import`` + ``run``: what one run costs as its own process.

The ratios are reference / dpglm. No constant of the reference's speed is kept
anywhere: every number is measured by this script.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The reference's class (module, name) per Table 2 algorithm, and how it is built.
REFERENCE = {
    "Private-GLM": "private_rs_glinucb.Private_RS_GLinUCB",
    "RS-GLinUCB": "rs_glinucb.RS_GLinUCB",
    "GLOC": "gloc.Gloc",
    "GLM-UCB": "glm_ucb.GlmUCB",
}
#: dpglm's label per algorithm (the Table 2 default preset of Private-GLM).
DPGLM = {"Private-GLM": "Private-GLM", "RS-GLinUCB": "RS-GLinUCB", "GLOC": "GLOC", "GLM-UCB": "GLM-UCB"}
EPSILON, DELTA, D, K = 4.0, 0.02, 3, 20


def _reference_run(folder: Path, algorithm: str, S: float, horizon: int, seed: int) -> tuple[float, float]:
    """(CPU seconds, final regret) of one reference run in this process."""
    import importlib

    import numpy as np

    environment = importlib.import_module("environment")
    module, name = REFERENCE[algorithm].rsplit(".", 1)
    cls = getattr(importlib.import_module(f"glmbanditexp.algorithms.{module}"), name)
    start = time.process_time()
    env = environment.GLMBandit(config={"full_norm": True, "seed": seed, "model": "Probit", "theta_dim": D,
                                        "num_arms": K, "theta_norm": S, "horizon_length": horizon})
    rng = np.random.default_rng(seed + 1)
    first = env.get_first_action_set()
    if algorithm == "Private-GLM":
        algo = cls(first, env.kappa, env.kappa_star, env.R, env.S, env.model, env.T, DELTA, EPSILON, 2e-2, rng=rng,
                   save_privacy_search_log="never")
    elif algorithm == "RS-GLinUCB":  # as the authors' Table 2 ran it (legacy determinant switching)
        algo = cls(first, env.kappa, env.R, env.S, env.model, env.T, DELTA, rng=rng, use_sgd_optimizer=False,
                   use_max_det_switch=False)
    elif algorithm == "GLM-UCB":
        algo = cls(first, env.kappa, env.R, env.S, env.model, env.T, DELTA, rng=rng)
    else:
        algo = cls(first, env.kappa, env.R, env.S, env.model, DELTA, rng=rng)
    regret = 0.0
    for _ in range(env.T):
        rewards, regrets, next_arms = env.step([algo.play_arm()])
        algo.update(rewards[0], regrets[0], next_arms)
        regret += regrets[0]
    return time.process_time() - start, regret


def _dpglm_run(algorithm: str, S: float, horizon: int, seed: int) -> tuple[float, float]:
    """(CPU seconds, final regret) of one dpglm run in this process (environment + policy + T rounds)."""
    import numpy as np

    from dpglm.envs import StochasticContextEnv
    from dpglm.experiments.sweep import Instance, Sweep, build_policy
    from dpglm.policies import run_policy_record

    sweep = Sweep(algorithms=(DPGLM[algorithm],), instances=(Instance("probit", D, K, S, horizon),),
                  epsilons=(EPSILON,), delta=DELTA, seeds=seed + 1, record_every=horizon)
    cell = sweep.cells()[-1]
    start = time.process_time()
    env = StochasticContextEnv("probit", D, K, S, horizon, np.random.default_rng(cell.env_seed()))
    record = run_policy_record(build_policy(cell, env), env)
    return time.process_time() - start, float(record.regret[-1])


IMPORTS = {
    "reference": {
        "Private-GLM": "import numpy, environment, glmbanditexp.algorithms.private_rs_glinucb",
        "RS-GLinUCB": "import numpy, environment, glmbanditexp.algorithms.rs_glinucb",
        "GLOC": "import numpy, environment, glmbanditexp.algorithms.gloc",
        "GLM-UCB": "import numpy, environment, glmbanditexp.algorithms.glm_ucb",
    },
    "dpglm": {
        "Private-GLM": "import dpglm.envs, dpglm.experiments.sweep, dpglm.policies, dpglm.policies.joint_dp",
        "RS-GLinUCB": "import dpglm.envs, dpglm.experiments.sweep, dpglm.policies, dpglm.policies.rarely_switching",
        "GLOC": "import dpglm.envs, dpglm.experiments.sweep, dpglm.policies, dpglm.policies.gloc",
        "GLM-UCB": "import dpglm.envs, dpglm.experiments.sweep, dpglm.policies, dpglm.policies.glm_ucb",
    },
}


def _import_seconds(statement: str, path: Path, repeat: int = 3) -> float:
    """Smallest CPU seconds of a fresh interpreter running ``statement`` (``RUSAGE_CHILDREN``)."""
    best = float("inf")
    env = {**os.environ, "PYTHONPATH": str(path)}
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", statement], check=True, env=env, cwd=path)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, type=Path,
                        help="checkout of the paper's public code (you fetch it; it is never vendored)")
    parser.add_argument("--seeds", type=int, default=1, help="runs per algorithm and side (default 1)")
    parser.add_argument("--horizon", type=int, default=5000, help="T (default 5000, Table 2)")
    parser.add_argument("--S", type=float, default=2.5, help="‖θ*‖ (default 2.5, the middle Table 2 column)")
    parser.add_argument("--algorithms", nargs="+", default=list(REFERENCE), choices=list(REFERENCE))
    args = parser.parse_args()
    folder = args.reference.resolve()
    if not (folder / "environment.py").is_file() or not (folder / "glmbanditexp").is_dir():
        print(f"compare_reference: {folder} does not hold the paper's code (environment.py, glmbanditexp/)",
              file=sys.stderr)
        return 2
    if args.seeds < 1 or args.horizon < 1:
        print("compare_reference: --seeds and --horizon must be >= 1", file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(folder), str(root)]
    # The reference writes log folders into its working directory: give it a scratch one.
    os.chdir(tempfile.mkdtemp(prefix="compare_reference_"))
    # Warm both sides (imports, first-call caches) on a short run; not timed.
    for algorithm in args.algorithms:
        _reference_run(folder, algorithm, args.S, 50, 0)
        _dpglm_run(algorithm, args.S, 50, 0)
    imports = {side: {a: _import_seconds(IMPORTS[side][a], folder if side == "reference" else root)
                      for a in args.algorithms} for side in IMPORTS}
    runs: dict[str, dict[str, list[tuple[float, float]]]] = {"reference": {}, "dpglm": {}}
    for seed in range(args.seeds):
        for algorithm in args.algorithms:  # interleaved: reference then dpglm, per algorithm and seed
            runs["reference"].setdefault(algorithm, []).append(_reference_run(folder, algorithm, args.S,
                                                                              args.horizon, seed))
            runs["dpglm"].setdefault(algorithm, []).append(_dpglm_run(algorithm, args.S, args.horizon, seed))
            print(f"  seed {seed} {algorithm}: reference {runs['reference'][algorithm][-1][0]:.2f} s, "
                  f"dpglm {runs['dpglm'][algorithm][-1][0]:.3f} s", file=sys.stderr, flush=True)
    print(f"probit d={D} K={K} T={args.horizon} S={args.S:g} δ={DELTA}, ε={EPSILON:g} for Private-GLM, "
          f"{args.seeds} run(s) per side; reference = {folder}")
    head = (f"{'algorithm':<12} {'ref run s':>9} {'dpglm run s':>11} {'run ×':>7} | {'ref import':>10} "
            f"{'dpglm import':>12} | {'ref whole':>9} {'dpglm whole':>11} {'whole ×':>7} | {'ref regret':>10} "
            f"{'dpglm regret':>12}")
    print(head)
    print("-" * len(head))
    for algorithm in args.algorithms:
        ref = sum(r[0] for r in runs["reference"][algorithm]) / args.seeds
        ours = sum(r[0] for r in runs["dpglm"][algorithm]) / args.seeds
        ref_regret = sum(r[1] for r in runs["reference"][algorithm]) / args.seeds
        our_regret = sum(r[1] for r in runs["dpglm"][algorithm]) / args.seeds
        ref_import, our_import = imports["reference"][algorithm], imports["dpglm"][algorithm]
        print(f"{algorithm:<12} {ref:>9.2f} {ours:>11.3f} {ref / ours:>6.0f}× | {ref_import:>10.2f} "
              f"{our_import:>12.2f} | {ref + ref_import:>9.2f} {ours + our_import:>11.2f} "
              f"{(ref + ref_import) / (ours + our_import):>6.1f}× | {ref_regret:>10.1f} {our_regret:>12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
