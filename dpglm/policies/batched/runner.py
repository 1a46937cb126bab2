"""Running a batched policy: the shared run path, with each batch's arm sets planned at its first round.

Within a batch the rule is fixed and the contexts are i.i.d., so the batch's designs can
be computed for all its rounds in one vectorised call (:meth:`BatchedGLMBandit.plan`).
:class:`PlannedBatches` gives the policy each batch's arm sets (``env.context_window``)
at the batch's first round and is otherwise the policy itself, so
:func:`dpglm.policies.run_policy_record` plays it like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpglm.envs import ContextualGLMEnv
from dpglm.policies.base import Policy
from dpglm.policies.batched.loop import BatchedGLMBandit

if TYPE_CHECKING:
    from dpglm.policies import RunRecord

__all__ = ["PlannedBatches", "run_batched_policy"]


class PlannedBatches(Policy):
    """``policy`` shown, at each batch's first round, the arm sets of the whole batch.

    Parameters
    ----------
    policy : BatchedGLMBandit
    env : ContextualGLMEnv
        The environment it plays (same horizon); read through ``context_window`` only.
    """

    def __init__(self, policy: BatchedGLMBandit, env: ContextualGLMEnv) -> None:
        if not isinstance(policy, BatchedGLMBandit):
            raise TypeError(f"policy must be a BatchedGLMBandit, got {type(policy).__name__}")
        if not isinstance(env, ContextualGLMEnv):
            raise TypeError(f"env must be a dpglm.envs.ContextualGLMEnv, got {type(env).__name__}")
        if env.horizon != policy.horizon:
            raise ValueError(f"env.horizon must equal the policy's horizon {policy.horizon}, got {env.horizon}")
        super().__init__(policy.d, reward_bound=policy.reward_bound)
        self.policy, self.env = policy, env
        self.name = policy.name

    def choose(self, arms: np.ndarray) -> int:
        """Plan the batch if it has just begun, then the policy's choice."""
        policy = self.policy
        if not policy.planned:
            stop = min(self.env.horizon, policy.t + policy.rounds_left_in_batch)
            policy.plan(self.env.context_window(policy.t, stop))
        return policy.choose(arms)

    def observe(self, reward: float) -> None:
        """The policy's observation."""
        self.policy.observe(reward)

    def diagnostics(self) -> dict[str, Any]:
        """The policy's diagnostics."""
        return self.policy.diagnostics()


def run_batched_policy(policy: BatchedGLMBandit, env: ContextualGLMEnv, progress: bool = False) -> RunRecord:
    """Play a batched policy on ``env`` through :func:`dpglm.policies.run_policy_record`, planning each batch.

    Same protocol and result as playing ``policy`` itself (the env is reset first;
    ``choose``/``observe`` every round); only the designs are computed a batch at a time
    (:class:`PlannedBatches`).
    """
    from dpglm.policies import run_policy_record

    return run_policy_record(PlannedBatches(policy, env), env, progress=progress)
