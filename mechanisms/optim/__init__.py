"""Private convex optimisers for GLM losses: projected DP-SGD, shuffle-private P_GD, and their constraint sets.

:class:`DPSGD` and :class:`PoissonDPSGD` (Poisson batches, amplified accounting) need torch and opacus; it is imported on first use so that the
numpy-only optimisers (:class:`ShufflePGD`, the projections) load without them.
"""

from mechanisms.optim.projection import BallProjection, EllipsoidProjection, MetricProjection
from mechanisms.optim.shuffle_pgd import ShufflePGD

__all__ = ["DPSGD", "DPSGDPlan", "BallProjection", "EllipsoidProjection", "MetricProjection", "PoissonDPSGD",
           "ShufflePGD"]


def __getattr__(name: str):
    if name in ("DPSGD", "DPSGDPlan"):
        from mechanisms.optim import dpsgd

        return getattr(dpsgd, name)
    if name == "PoissonDPSGD":
        from mechanisms.optim.poisson_dpsgd import PoissonDPSGD

        return PoissonDPSGD
    raise AttributeError(f"module 'mechanisms.optim' has no attribute {name!r}")
