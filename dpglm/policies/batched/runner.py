"""Running a batched policy: the shared run path, with each batch's arm sets planned a chunk at a time.

Within a batch the rule is fixed and the contexts are i.i.d., so the batch's designs can
be computed for many rounds in one vectorised call (:meth:`BatchedGLMBandit.plan`).
:class:`PlannedBatches` gives the policy the arm sets of the coming rounds
(``env.context_window``, up to 1024 rounds within the batch) whenever its plan runs out, and
is otherwise the policy itself, so :func:`dpglm.policies.run_policy_record` plays it like
any other. A round's design depends on its own arm set only (:func:`dpglm.design.g_optimal_design`),
so planned, chunked and unplanned rounds choose alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpglm.envs import BLOCK_ROUNDS, ContextualGLMEnv
from dpglm.policies.base import Policy
from dpglm.policies.batched.loop import BatchedGLMBandit

if TYPE_CHECKING:
    from dpglm.policies import RunRecord

__all__ = ["PlannedBatches", "run_batched_policy"]


class PlannedBatches(Policy):
    """``policy`` shown the arm sets of the coming rounds of its batch, a chunk at a time.

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
        """Plan the next chunk if the plan has run out, then the policy's choice.

        A chunk runs to the batch's end or the next multiple of :data:`dpglm.envs.BLOCK_ROUNDS`,
        whichever is first: the plan holds one env block of arm sets at most (memory flat in
        T), and a :class:`~dpglm.envs.StochasticContextEnv` shows the same block's arrays.
        """
        policy = self.policy
        if not policy.planned:
            t = policy.t
            stop = min(self.env.horizon, t + policy.rounds_left_in_batch, (t // BLOCK_ROUNDS + 1) * BLOCK_ROUNDS)
            policy.plan(self.env.context_window(t, stop))
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
    ``choose``/``observe`` every round); only the designs are computed a chunk at a time
    (:class:`PlannedBatches`).
    """
    from dpglm.policies import run_policy_record

    return run_policy_record(PlannedBatches(policy, env), env, progress=progress)
