"""Private convex optimisers for GLM losses: projected DP-SGD, shuffle-private P_GD, and their constraint sets.

:class:`DPSGD` and :class:`PoissonDPSGD` (Poisson batches, amplified accounting) run on torch and opacus,
which are imported when a run starts (``mechanisms/optim/dpsgd.py``); the numpy-only optimisers
(:class:`ShufflePGD`, the projections) and DP-SGD's planning load without them.
"""

from mechanisms.optim.projection import BallProjection, EllipsoidProjection, MetricProjection
from mechanisms.optim.shuffle_pgd import ShufflePGD

__all__ = ["DPSGD", "DPSGDPlan", "BallProjection", "EllipsoidProjection", "MetricProjection", "PoissonDPSGD",
           "ShufflePGD"]


def __getattr__(name: str) -> object:
    if name in ("DPSGD", "DPSGDPlan"):
        from mechanisms.optim import dpsgd

        return getattr(dpsgd, name)
    if name == "PoissonDPSGD":
        from mechanisms.optim.poisson_dpsgd import PoissonDPSGD

        return PoissonDPSGD
    raise AttributeError(f"module 'mechanisms.optim' has no attribute {name!r}")
