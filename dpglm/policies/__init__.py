"""Bandit policies (one file per algorithm) and the loop that runs one on an environment.

The paper's private policies — :class:`JointDPGLMBandit` (Algorithm 2) and
:class:`ShuffleDPGLMBandit` (Algorithm 1) — their non-private cores RS-GLinUCB
(:class:`RSGLinUCB`) and B-GLinCB (:class:`BGLinCB`), and the baselines GLM-UCB,
GLOC and ECOLog are exported here (``docs/design.md``, policies).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpglm.envs import ContextualGLMEnv
from dpglm.policies.base import Policy
from dpglm.policies.batched import BatchedGLMBandit, BGLinCB, ShuffleDPGLMBandit
from dpglm.policies.ecolog import ECOLog
from dpglm.policies.glm_ucb import GLMUCB
from dpglm.policies.gloc import GLOC
from dpglm.policies.joint_dp import JointDPGLMBandit
from dpglm.policies.rarely_switching import RarelySwitchingBandit, RSGLinUCB

__all__ = [
    "GLMUCB",
    "GLOC",
    "BGLinCB",
    "BatchedGLMBandit",
    "ECOLog",
    "JointDPGLMBandit",
    "Policy",
    "RSGLinUCB",
    "RarelySwitchingBandit",
    "RunRecord",
    "ShuffleDPGLMBandit",
    "run_policy",
    "run_policy_record",
]


@dataclass(frozen=True)
class RunRecord:
    """Everything one run produced, per round (arrays of length T)."""

    regret: np.ndarray
    """Cumulative pseudo-regret Σ_{s≤t} max_x μ(⟨x, θ*⟩) − μ(⟨x_s, θ*⟩)."""
    instant_regret: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    seconds: float
    diagnostics: dict[str, Any] = field(default_factory=dict)


def run_policy_record(
    policy: Policy, env: ContextualGLMEnv, progress: bool = False
) -> RunRecord:
    """Play ``policy`` on ``env`` for the whole horizon (the env is reset first).

    The env is reset first, so one env can replay the same contexts and reward
    uniforms for several policies. ``progress`` shows a tqdm bar (lines in a log:
    :mod:`dpglm.engine.progress`). The record takes the env's per-round arrays as they
    are, without copies (24 bytes a round less at the run's peak; docs/design.md, memory
    flat in T): a played-out env writes them no more, and its next
    :meth:`~dpglm.envs.ContextualGLMEnv.reset` allocates new ones.
    """
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a dpglm.policies.Policy, got {type(policy).__name__}")
    if not isinstance(env, ContextualGLMEnv):
        raise TypeError(f"env must be a dpglm.envs.ContextualGLMEnv, got {type(env).__name__}")
    env.reset()
    rounds = range(env.horizon)
    if progress:
        from dpglm.engine.progress import progress as progress_bar

        rounds = progress_bar(rounds, desc=getattr(policy, "name", type(policy).__name__), unit="round", leave=False)
    start = time.perf_counter()
    contexts, pull, choose, observe = env.contexts, env.pull, policy.choose, policy.observe
    for t in rounds:
        observe(pull(t, choose(contexts(t))))
    seconds = time.perf_counter() - start
    return RunRecord(
        regret=env.regret,
        instant_regret=env.instant_regret,
        actions=env.actions,
        rewards=env.rewards,
        seconds=seconds,
        diagnostics=dict(policy.diagnostics()),
    )


def run_policy(policy: Policy, env: ContextualGLMEnv, progress: bool = False) -> np.ndarray:
    """Play ``policy`` on ``env`` for the whole horizon; cumulative regret, shape (T,)."""
    return run_policy_record(policy, env, progress=progress).regret
