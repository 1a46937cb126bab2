"""Per-sample GLM losses ℓ(z, y) of the linear predictor z = ⟨x, θ⟩ for DP-SGD, in torch.

:class:`mechanisms.optim.dpsgd.DPSGD` clips per-sample gradients, which bounds the
sensitivity of a step only if ℓ_i depends on row i alone; :func:`check_per_sample`
refuses a user loss that mixes rows. Both built-in losses have ℓ' = μ(z) − y ∈ [−1, 1]
for y ∈ [0, 1], so with ‖x‖ ≤ 1 the per-sample gradient norm is at most 1 (paper §4;
``docs/references.md``, "GLM bandits").
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

__all__ = ["LOSSES", "PerSampleLoss", "check_per_sample", "logistic_loss", "probit_loss"]

PerSampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def logistic_loss(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample logistic GLM loss ℓ(z, y) = b(z) − yz with b(z) = log(1 + eᶻ) (paper §4).

    For y ∈ {0, 1} this is the Bernoulli negative log-likelihood. Its derivative
    μ(z) − y lies in [−1, 1] for y ∈ [0, 1], so with ‖x‖ ≤ 1 the per-sample
    gradient norm is at most 1 (clip = 1 then never binds). torch's ``softplus``
    returns z itself above z = 20 (relative error below 10⁻¹⁰).
    """
    return torch.nn.functional.softplus(z) - y * z


def probit_loss(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample probit GLM loss ℓ(z, y) = b(z) − yz with b(z) = zΦ(z) + φ(z) (paper §4).

    b' = Φ = μ, so ℓ' = Φ(z) − y ∈ [−1, 1] for y ∈ [0, 1] and the per-sample
    gradient (Φ(z) − y)x has norm at most ‖x‖: the same objective as
    :data:`dpglm.glm.PROBIT` and the non-private refits, and clip = 1 never binds
    for ‖x‖ ≤ 1. (The Bernoulli negative log-likelihood −y log Φ(z) − (1 − y) log Φ(−z)
    is a different objective whose gradient grows like |z|, so clipping biases it.)
    """
    cdf: torch.Tensor = torch.special.ndtr(z)  # torch.special's functions are unannotated
    return z * cdf + torch.exp(-0.5 * z * z) * _INV_SQRT_2PI - y * z


LOSSES: dict[str, PerSampleLoss] = {"logistic": logistic_loss, "probit": probit_loss}


def check_per_sample(loss: PerSampleLoss) -> None:
    """Reject a loss that is not per-sample: ℓ_i must depend on (z_i, y_i) only.

    Per-sample clipping bounds the sensitivity only if changing row j leaves every
    other row's gradient unchanged; a loss mixing rows (e.g. through a batch mean)
    would void the privacy analysis. Probed on fixed public inputs.

    Raises
    ------
    ValueError
        If ``loss`` does not map shape (b,) to shape (b,), or a changed (z_j, y_j)
        moves another row's loss.
    """
    z = torch.tensor([-1.5, -0.2, 0.4, 2.0], dtype=torch.float64)
    y = torch.tensor([0.0, 1.0, 0.3, 1.0], dtype=torch.float64)
    base = loss(z, y)
    if not isinstance(base, torch.Tensor) or base.shape != (4,):
        raise ValueError("loss must map (z, y) tensors of shape (b,) to per-sample losses of shape (b,)")
    for j in range(4):
        z_changed, y_changed = z.clone(), y.clone()
        z_changed[j] += 0.7
        y_changed[j] = 1.0 - y_changed[j]
        others = [i for i in range(4) if i != j]
        for changed in (loss(z_changed, y), loss(z, y_changed)):
            if not torch.equal(changed[others], base[others]):
                raise ValueError("loss must be per-sample: loss(z, y)[i] may depend on z[i] and y[i] only")
