"""Private convex optimisers for GLM losses: projected DP-SGD and its constraint sets.

``ShufflePGD`` (the shuffle-model P_GD) lives in ``mechanisms.optim.shuffle_pgd``.
"""

from mechanisms.optim.dpsgd import DPSGD, DPSGDPlan
from mechanisms.optim.projection import BallProjection, EllipsoidProjection, MetricProjection

__all__ = ["DPSGD", "DPSGDPlan", "BallProjection", "EllipsoidProjection", "MetricProjection"]
