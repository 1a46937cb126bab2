"""Policy-only µs per round of the GLM bandits, side by side with a plain numpy UCB round (the floor).

    python -m benchmarks.rounds [--horizon 5000] [--repeat 3] [--policies RS-GLinUCB Private-GLM ShuffleDP-GLM]
                                [--dims 3 5 10] [--arms 20 100] [--actions FILE.npz]

The floor is what any UCB round must do with numpy (:class:`FloorUCB`): the K means
``arms @ θ``, the K widths ``‖x‖_{V⁻¹}`` as one batched quadratic form, an argmax, and
a rank-one Sherman–Morrison update of ``V⁻¹`` (plus ``θ = V⁻¹ b``) after the reward. The
quadratic form is ``add.reduce((arms·V⁻¹) * arms, axis=1)``, the fastest plain form
measured (a three-operand ``einsum`` costs 3x at d = 3, K = 20 and 4x at d = 10, K = 100,
which would flatter every ratio).

Every policy plays the paper's §8 instance (probit, S = 2.5, K fresh arms uniform in the
unit ball, :class:`dpglm.envs.StochasticContextEnv`) through ``choose``/``observe``. The
environment's own time is subtracted: the same env replays the recorded actions with no
policy, and that loop's time (contexts, pull, the loop itself) is taken off. CPU time
(``time.process_time``), the smallest of ``--repeat`` runs (other jobs on a shared machine
only ever add time), the floor measured alternately with each policy (same load).
Policies are built outside the timed loop: setup (the ledger, a
shuffle calibration) is not a round's cost. ``Private-GLM`` is :class:`JointDPGLMBandit`
(preset ``tight``, ε = 4, δ = 0.02); ``ShuffleDP-GLM`` is :class:`ShuffleDPGLMBandit`
(ε = 4, δ = 0.02) played as ``run_batched_policy`` plays it (designs planned up to 1024 rounds
ahead within a batch, :class:`dpglm.policies.batched.PlannedBatches`). Its batch ends run the
shuffle accountant's calibrations: cached in the process after the first of the ``--repeat``
runs, so the minimum is the warm round; a fresh process verifies each cached calibration once.

``--actions FILE.npz`` also saves every run's actions (keys ``policy/d/K/seed``) so that
two checkouts can be compared action by action (``benchmarks/identical_actions.py``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpglm.envs import StochasticContextEnv

FAMILY, S, DELTA, EPSILON = "probit", 2.5, 0.02, 4.0


class FloorUCB:
    """A plain numpy linear UCB round: means, batched quadratic-form widths, argmax, rank-one inverse update."""

    def __init__(self, d: int, beta: float = 1.0, lam: float = 1.0) -> None:
        self.v_inv = np.eye(d) / lam
        self.b = np.zeros(d)
        self.theta = np.zeros(d)
        self.beta = beta
        self._x: np.ndarray | None = None

    def choose(self, arms: np.ndarray) -> int:
        widths = np.sqrt(np.add.reduce(arms.dot(self.v_inv) * arms, axis=1))  # the fastest plain form measured
        index = int((arms.dot(self.theta) + self.beta * widths).argmax())
        self._x = arms[index]
        return index

    def observe(self, reward: float) -> None:
        x = self._x
        vx = self.v_inv.dot(x)
        self.v_inv -= np.outer(vx, vx) / (1.0 + x.dot(vx))  # Sherman–Morrison
        self.b += reward * x
        self.theta = self.v_inv.dot(self.b)


def make_policy(name: str, d: int, horizon: int, seed: int, env: StochasticContextEnv):
    """A fresh policy ``name`` for the instance (probit, S = 2.5) at dimension d, playing ``env``."""
    if name == "floor":
        return FloorUCB(d)
    if name == "RS-GLinUCB":
        from dpglm.policies import RSGLinUCB

        return RSGLinUCB(FAMILY, d, horizon, S, delta=DELTA)
    if name == "Private-GLM":
        from dpglm.policies import JointDPGLMBandit

        return JointDPGLMBandit(FAMILY, d, horizon, S, EPSILON, DELTA, np.random.default_rng(seed + 1),
                                preset="tight")
    if name == "ShuffleDP-GLM":
        from dpglm.policies import ShuffleDPGLMBandit
        from dpglm.policies.batched import PlannedBatches

        policy = ShuffleDPGLMBandit(FAMILY, d, horizon, S, np.random.default_rng(seed + 1), epsilon=EPSILON,
                                    delta=DELTA)
        return PlannedBatches(policy, env)  # designs planned a chunk at a time, as run_batched_policy plays it
    raise ValueError(f"unknown policy {name!r}")


def _play(env: StochasticContextEnv, policy) -> tuple[float, np.ndarray]:
    env.reset()
    contexts, pull, choose, observe = env.contexts, env.pull, policy.choose, policy.observe
    start = time.process_time()
    for t in range(env.horizon):
        observe(pull(t, choose(contexts(t))))
    return time.process_time() - start, env.actions.copy()


def _replay(env: StochasticContextEnv, actions: np.ndarray) -> float:
    env.reset()
    contexts, pull = env.contexts, env.pull
    acts = actions.tolist()
    start = time.process_time()
    for t in range(env.horizon):
        contexts(t)
        pull(t, acts[t])
    return time.process_time() - start


def per_round(name: str, d: int, k: int, horizon: int, repeat: int, seed: int = 0) -> tuple[float, np.ndarray, float]:
    """(policy-only µs per round, the actions of the run, final regret), min CPU over ``repeat`` runs."""
    return _cell(name, d, k, horizon, repeat, seed)[1:]


def _one_run(name: str, env: StochasticContextEnv, d: int, horizon: int, seed: int) -> tuple[float, np.ndarray, float]:
    total, actions = _play(env, make_policy(name, d, horizon, seed, env))
    regret = float(env.regret[-1])
    env_only = min(_replay(env, actions) for _ in range(2))
    return (total - env_only) / horizon * 1e6, actions, regret


def _cell(name: str, d: int, k: int, horizon: int, repeat: int,
          seed: int = 0) -> tuple[float, float, np.ndarray, float]:
    """(floor µs, policy µs, actions, regret): the floor and the policy run alternately, each the min of ``repeat``.

    On a shared machine the load changes from second to second; alternating the two
    keeps each pair of runs under the same load, and the minimum of each is the least
    disturbed.
    """
    env = StochasticContextEnv(FAMILY, d, k, S, horizon, np.random.default_rng(seed))
    floor, best, actions, regret = np.inf, np.inf, np.zeros(0), np.nan
    for _ in range(repeat):
        floor = min(floor, _one_run("floor", env, d, horizon, seed)[0])
        us, actions, regret = _one_run(name, env, d, horizon, seed)
        best = min(best, us)
    return floor, best, actions, regret


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dims", type=int, nargs="+", default=[3, 5, 10])
    parser.add_argument("--arms", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--policies", nargs="+", default=["RS-GLinUCB", "Private-GLM", "ShuffleDP-GLM"])
    parser.add_argument("--seeds", type=int, default=1, help="seeds per cell for --actions (timing uses seed 0)")
    parser.add_argument("--actions", default=None, help="save every run's actions to this .npz")
    args = parser.parse_args(argv)
    for name in args.policies:  # warm-up: imports and one-off caches are not a round's cost
        per_round(name, 3, 20, 200, 1)
    saved: dict[str, np.ndarray] = {}
    print(f"probit S={S} T={args.horizon}, policy-only CPU µs/round (env subtracted), min of {args.repeat}")
    head = f"{'policy':<15} {'d':>3} {'K':>4} {'µs/round':>9} {'floor µs':>9} {'ratio':>6} {'regret':>8}"
    print(head)
    print("-" * len(head))
    for d in args.dims:
        for k in args.arms:
            for name in args.policies:
                floor, us, actions, regret = _cell(name, d, k, args.horizon, args.repeat)
                print(f"{name:<15} {d:>3} {k:>4} {us:>9.1f} {floor:>9.1f} {us / floor:>6.2f} {regret:>8.1f}",
                      flush=True)
                if args.actions:
                    saved[f"{name}/{d}/{k}/0"] = actions
                    for seed in range(1, args.seeds):
                        saved[f"{name}/{d}/{k}/{seed}"] = per_round(name, d, k, args.horizon, 1, seed)[1]
    if args.actions:
        np.savez_compressed(args.actions, **saved)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
