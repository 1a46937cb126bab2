"""Non-private B-GLinCB (Sawarni et al. 2024) on the paper's batch schedule: the batched loop on exact ingredients."""

from __future__ import annotations

import numpy as np

from accounting.validation import check_generator
from dpglm.glm import GLMFamily, get_family
from dpglm.policies.batched.exact import ExactDesignSum, MLEBatchEstimator
from dpglm.policies.batched.loop import BatchedGLMBandit
from dpglm.policies.batched.parameters import BatchedParameters
from dpglm.policies.batched.presets import batched_parameters

__all__ = ["BGLinCB"]


class BGLinCB(BatchedGLMBandit):
    """Non-private B-GLinCB (Sawarni et al. 2024) on the paper's schedule: exact sums, MLE.

    Parameters
    ----------
    family : GLMFamily or str
    d, horizon : int
    S : float
        Known bound on ‖θ*‖.
    rng : numpy.random.Generator
        Spawned into two streams: the arm draws use the first (the second is what the
        private policy gives its mechanisms), so both policies draw the same uniforms.
    delta : float
    params : BatchedParameters, optional
        Overrides :func:`batched_parameters`.
    """

    name = "B-GLinCB"

    def __init__(self, family: GLMFamily | str, d: int, horizon: int, S: float, rng: np.random.Generator, *,
                 delta: float = 0.02, params: BatchedParameters | None = None) -> None:
        family = get_family(family)
        if params is None:
            params = batched_parameters(family, d, horizon, S, delta=delta)
        check_generator(rng)
        choice_rng, _ = rng.spawn(2)
        super().__init__(family, d, horizon, params, design_sum=ExactDesignSum(params.lam),
                         estimator=MLEBatchEstimator(family, params.lam, params.radius), rng=choice_rng)
