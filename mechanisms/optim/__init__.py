"""Private convex optimisers for GLM losses: projected DP-SGD, shuffle-private P_GD, and their constraint sets."""

from mechanisms.optim.dpsgd import DPSGD, DPSGDPlan
from mechanisms.optim.projection import BallProjection, EllipsoidProjection, MetricProjection
from mechanisms.optim.shuffle_pgd import ShufflePGD

__all__ = ["DPSGD", "DPSGDPlan", "BallProjection", "EllipsoidProjection", "MetricProjection", "ShufflePGD"]
