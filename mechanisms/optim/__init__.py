"""Private convex optimisers for GLM losses: projected DP-SGD, shuffle-private P_GD, and their constraint sets.

:class:`DPSGD` runs on numpy (``engine="numpy"``) or on torch and opacus (``"opacus"``,
``"vectorised"``), which are imported only when such a run starts (``mechanisms/optim/dpsgd.py``);
:class:`PoissonDPSGD` (Poisson batches, amplified accounting) and :class:`ShufflePGD` need
dp-accounting. All three load on first use, so importing the projections (or a bandit) imports
none of torch, opacus or dp-accounting (issue 26).
"""

from typing import TYPE_CHECKING

from mechanisms.optim.projection import BallProjection, EllipsoidProjection, MetricProjection

if TYPE_CHECKING:
    from mechanisms.optim.dpsgd import DPSGD, DPSGDPlan
    from mechanisms.optim.poisson_dpsgd import PoissonDPSGD
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
    if name == "ShufflePGD":
        from mechanisms.optim.shuffle_pgd import ShufflePGD

        return ShufflePGD
    raise AttributeError(f"module 'mechanisms.optim' has no attribute {name!r}")
