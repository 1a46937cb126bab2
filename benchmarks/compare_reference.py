"""CPU seconds of every Table 2 algorithm (and ECOLog): the paper's public code beside dpglm, fresh processes.

    python -m benchmarks.compare_reference --reference DIR [--seeds 1] [--horizon 5000] [--S 2.5]
                                           [--algorithms Private-GLM RS-GLinUCB GLOC GLM-UCB ECOLog]

``DIR`` is a checkout of the authors' public repository (Sahasrajit123/
Shuffle_joint_dp_generalized_linear_contextual_bandits on GitHub; the numbers in
README were measured at commit d9c93e1) that *you* fetched: nothing of it is
vendored here, it is imported from ``DIR`` at run time. On the paper's Table 2
instance (probit, d = 3, K = 20, δ = 0.02, ε = 4 for Private-GLM) every
(algorithm, seed) is run by the reference and by dpglm, each in a fresh Python
process of its own, interleaved (reference, dpglm, reference, dpglm, …) so that
load on a shared machine hits both sides alike.

Columns:

* ``whole`` — CPU seconds (user + system, ``os.wait4``) of the whole process that
  imports what it needs and plays one run: what one run costs as its own job. No
  warm-up: a library that a run imports lazily (torch, before issue 26) is paid
  where it is used. (The previous version timed runs in a warm process whose
  warm-up had already paid for torch, and added only the eager imports.)
* ``run`` — CPU seconds (``time.process_time``) of building the environment and the
  policy and playing T rounds, inside that fresh process (lazy imports included).

The ratios are reference / dpglm. No constant of the reference's speed is kept
anywhere: every number is measured by this script.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
    "ECOLog": "ecolog.EcoLog",
}
#: dpglm's label per algorithm (the Table 2 default preset of Private-GLM).
DPGLM = {"Private-GLM": "Private-GLM", "RS-GLinUCB": "RS-GLinUCB", "GLOC": "GLOC", "GLM-UCB": "GLM-UCB",
         "ECOLog": "ECOLog"}
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
    else:  # GLOC, ECOLog
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


def _child(side: str, folder: Path, algorithm: str, S: float, horizon: int, seed: int) -> None:
    """One run in this (fresh) process; prints ``{"run": CPU s, "regret": R_T}`` as JSON on the last line."""
    if side == "reference":
        os.chdir(tempfile.mkdtemp(prefix="compare_reference_"))  # it writes log folders into its cwd
        seconds, regret = _reference_run(folder, algorithm, S, horizon, seed)
    else:
        seconds, regret = _dpglm_run(algorithm, S, horizon, seed)
    print(json.dumps({"run": seconds, "regret": regret}))


def _fresh(side: str, folder: Path, root: Path, algorithm: str, S: float, horizon: int,
           seed: int) -> tuple[float, float, float]:
    """(whole-process CPU s, in-process run CPU s, regret) of one run in a fresh interpreter."""
    path = [str(folder), str(root)] if side == "reference" else [str(root)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    argv = [str(Path(__file__).resolve()), "--child", side, "--reference", str(folder), "--dpglm", str(root),
            "--algorithms", algorithm, "--S", repr(S), "--horizon", str(horizon), "--seeds", str(seed)]
    # run this file by path from a scratch directory, so that only PYTHONPATH decides which dpglm is imported
    code = f"import runpy, sys; sys.argv = {argv!r}; runpy.run_path(sys.argv[0], run_name='__main__')"
    process = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tempfile.mkdtemp(prefix="compare_"),
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"compare_reference: {side} {algorithm} seed {seed} failed ({process.returncode})")
    result = json.loads(out.strip().splitlines()[-1])
    return usage.ru_utime + usage.ru_stime, float(result["run"]), float(result["regret"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, type=Path,
                        help="checkout of the paper's public code (you fetch it; it is never vendored)")
    parser.add_argument("--seeds", type=int, default=1, help="runs per algorithm and side (default 1)")
    parser.add_argument("--horizon", type=int, default=5000, help="T (default 5000, Table 2)")
    parser.add_argument("--S", type=float, default=2.5, help="‖θ*‖ (default 2.5, the middle Table 2 column)")
    parser.add_argument("--algorithms", nargs="+", default=list(REFERENCE), choices=list(REFERENCE))
    parser.add_argument("--dpglm", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the dpglm checkout to time (default this one; another commit's, for before/after)")
    parser.add_argument("--child", choices=("reference", "dpglm"), help=argparse.SUPPRESS)  # one run, internal
    args = parser.parse_args()
    folder = args.reference.resolve()
    root = args.dpglm.resolve()
    if args.child:  # --seeds is the seed itself here
        _child(args.child, folder, args.algorithms[0], args.S, args.horizon, args.seeds)
        return 0
    if not (folder / "environment.py").is_file() or not (folder / "glmbanditexp").is_dir():
        print(f"compare_reference: {folder} does not hold the paper's code (environment.py, glmbanditexp/)",
              file=sys.stderr)
        return 2
    if args.seeds < 1 or args.horizon < 1:
        print("compare_reference: --seeds and --horizon must be >= 1", file=sys.stderr)
        return 2
    runs: dict[str, dict[str, list[tuple[float, float, float]]]] = {"reference": {}, "dpglm": {}}
    for seed in range(args.seeds):
        for algorithm in args.algorithms:  # interleaved: reference then dpglm, per algorithm and seed
            for side in ("reference", "dpglm"):
                runs[side].setdefault(algorithm, []).append(
                    _fresh(side, folder, root, algorithm, args.S, args.horizon, seed))
            print(f"  seed {seed} {algorithm}: whole process reference {runs['reference'][algorithm][-1][0]:.2f} s, "
                  f"dpglm {runs['dpglm'][algorithm][-1][0]:.2f} s", file=sys.stderr, flush=True)
    print(f"probit d={D} K={K} T={args.horizon} S={args.S:g} δ={DELTA}, ε={EPSILON:g} for Private-GLM, "
          f"{args.seeds} fresh process(es) per side and algorithm (medians); reference = {folder}")
    head = (f"{'algorithm':<12} {'ref whole s':>11} {'dpglm whole s':>13} {'whole ×':>8} | {'ref run s':>9} "
            f"{'dpglm run s':>11} {'run ×':>7} | {'ref regret':>10} {'dpglm regret':>12}")
    print(head)
    print("-" * len(head))
    for algorithm in args.algorithms:
        ref, ours = runs["reference"][algorithm], runs["dpglm"][algorithm]
        whole_ratio = statistics.median(r[0] / o[0] for r, o in zip(ref, ours, strict=True))
        run_ratio = statistics.median(r[1] / o[1] for r, o in zip(ref, ours, strict=True))
        med = [statistics.median(x[i] for x in side) for side in (ref, ours) for i in range(3)]
        print(f"{algorithm:<12} {med[0]:>11.2f} {med[3]:>13.2f} {whole_ratio:>7.1f}× | {med[1]:>9.2f} "
              f"{med[4]:>11.3f} {run_ratio:>6.0f}× | {med[2]:>10.1f} {med[5]:>12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
