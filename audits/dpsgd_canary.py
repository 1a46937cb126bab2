"""DP-SGD on real data audited through its final model, with crafted canaries (docs/audits.md, "DP-SGD on real data").

A canary is an input the real rows never use: one extra feature column, zero in every
real row, and a canary row whose only non-zero entry is a = 5C in that column
(Annamalai & De Cristofaro 2024 and Nasr et al. 2023 craft worst-case canaries and
initial parameters; here the crafted input alone isolates the canary). For a linear
model the real rows' gradients are then exactly 0 in the canary's coordinate, and the
canary's own gradient there is ℓ'(a·θ_c, y)·a, clipped to norm C while
|σ(a·θ_c) − y|·a ≥ C, i.e. while |θ_c| ≤ logit(1 − C/a)/a (widest at a ≈ 5C). The
final model queried on the canary input returns a·θ_c, the sum of the canary's clipped
gradients and the noise of every step along it: a black-box query that reads the whole
privacy loss when the step size keeps θ_c in the clipped region (``lr`` is chosen so).

* The project's ``DPSGD`` (any engine, replace-one: the canary's label is 0 on ``D0`` and 1
  on ``D1``, clipped gradients +C and −C, the sensitivity 2C it charges for): its
  receipt's ρ gives μ = √(2ρ), read at δ; the audit is tight at μ in the clipped region.
* opacus (``OpacusBlackBoxAudit``, its own float Gaussian noise, charged through the
  ledger adapter ``charge_training`` on an add/remove GDP ledger, μ = √T/z): ``D1`` is the
  real rows plus the canary (label 1), ``D0`` the real rows alone.

Scores are the Gaussian-DP route of :class:`audits.base.Audit` (μ lower bound, and the
assumption-free Clopper–Pearson ε of the same counts beside it), with the threshold
planned at the midpoint of the claimed law (public: θ₀ = 0 and the real rows do not move
θ_c) beside the held-out one, and the ceiling of the assumption-free bound under the
claimed Gaussian law. Each run is one whole training run on the real data.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import stats

from accounting.validation import check_int, check_positive, check_probability
from audits.base import GAUSSIAN_DP, Audit, Claim, huge_budget_account
from audits.bounds import ceiling_from_tails, gdp_mu_for_epsilon

__all__ = ["CANARY_NORM", "DPSGDBlackBoxAudit", "OpacusBlackBoxAudit", "canary_rows", "gaussian_ceiling",
           "opacus_train", "real_data", "stable_lr"]

#: a/C of a canary row: logit(1 − C/a)/a, the half-width in θ_c of the region where its gradient is clipped, is
#: largest near a = 5C (0.277/C).
CANARY_NORM = 5.0


def real_data(data: object) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) with 0/1 labels: a name of :mod:`audits.membership.data` (binary sets) or an (X, y) pair."""
    from audits.membership.data import load

    X, y = load(data) if isinstance(data, str) else (np.asarray(data[0]), np.asarray(data[1]))  # type: ignore[index]
    labels = set(np.unique(y).tolist())
    if not labels <= {0, 1}:
        raise ValueError(f"data must have 0/1 labels (a binary task, e.g. digits-binary), got labels {sorted(labels)}")
    return np.asarray(X, dtype=float).reshape(len(X), -1), np.asarray(y, dtype=float)


def canary_rows(X: np.ndarray, y: np.ndarray, labels: np.ndarray, clip: float) -> tuple[np.ndarray, np.ndarray]:
    """The real rows with one zero column per canary appended, then the canary rows (a·e_c, label) for ``labels``.

    ``labels`` holds each canary's label, or NaN for a canary left out (add/remove).
    """
    count, present = labels.size, ~np.isnan(labels)
    features = np.hstack([X, np.zeros((len(X), count))])
    canaries = np.zeros((count, X.shape[1] + count))
    canaries[np.arange(count), X.shape[1] + np.arange(count)] = CANARY_NORM * clip
    return np.vstack([features, canaries[present]]), np.concatenate([y, labels[present]])


def stable_lr(divisor: float, steps: int, sigma: float, clip: float) -> float:
    """A step size that keeps θ_c in the clipped region: lr·(T·C + 3√T·σ)/N ≤ half-width (module docstring)."""
    half_width = math.log(CANARY_NORM - 1.0) / (CANARY_NORM * clip)
    return half_width * divisor / (steps * clip + 3.0 * math.sqrt(steps) * sigma)


def gaussian_ceiling(mu: float, runs: int, delta: float, confidence: float) -> float:
    """The best Clopper–Pearson bound of a threshold test at ``runs`` per side under N(0, 1) vs N(μ, 1)."""
    thresholds = np.linspace(-4.0, mu + 4.0, 241)
    return ceiling_from_tails(stats.norm.sf(thresholds), stats.norm.sf(thresholds - mu), runs, delta=delta,
                              confidence=confidence)[0]


class DPSGDBlackBoxAudit(Audit):
    """The project's DP-SGD on real data, a crafted canary, the final model's logit on it (module docstring).

    Parameters
    ----------
    epsilon, delta : float
        The fit is charged ρ = μ²/2 with μ the Gaussian parameter of (ε, δ) (replace-one).
    data : str or (X, y)
        A binary set of :mod:`audits.membership.data` (default ``digits-binary``) or arrays.
    steps, clip : int, float
        Full-batch steps T and clipping norm C.
    lr : float, optional
        Step size; default :func:`stable_lr` (θ_c stays in the clipped region w.h.p.).
    engine : {"numpy", "opacus", "vectorised"}
    mechanism_class : type
        ``DPSGD`` or a subclass (planted bugs).
    """

    mechanism = "DPSGD"
    method = GAUSSIAN_DP
    statistics = ("final model's logit on the canary",)

    def __init__(self, epsilon: float, delta: float = 1e-5, *, data: object = "digits-binary", steps: int = 20,
                 clip: float = 1.0, lr: float | None = None, engine: str = "numpy",
                 mechanism_class: type | None = None, name: str = "dpsgd-blackbox") -> None:
        from mechanisms.optim.dpsgd import DPSGD

        self.epsilon, self.delta = check_positive("epsilon", epsilon), check_probability("delta", delta)
        self.steps, self.clip, self.engine, self.name = check_int("steps", steps), check_positive("clip", clip), \
            engine, name
        self.X, self.y = real_data(data)
        self.data_name = data if isinstance(data, str) else "arrays"
        self.mechanism_class = DPSGD if mechanism_class is None else mechanism_class
        self.mu = gdp_mu_for_epsilon(self.epsilon, self.delta)
        self.rho = Fraction(self.mu**2 / 2)
        rows = len(self.y) + 1
        sigma = 2 * self.clip * math.sqrt(self.steps) / self.mu
        self.lr = stable_lr(rows, self.steps, sigma, self.clip) if lr is None else check_positive("lr", lr)
        self.chunk = 100  # whole training runs per chunk: the engine spreads chunks over workers

    def parameters(self) -> dict:
        return {"target_epsilon": self.epsilon, "delta": self.delta, "steps": self.steps, "clip": self.clip,
                "lr": self.lr, "engine": self.engine, "data": self.data_name, "rows": len(self.y),
                "canary_norm": CANARY_NORM * self.clip, "mechanism_class": self.mechanism_class.__name__}

    def _train(self, label: float, rng: np.random.Generator, account: Any) -> tuple[float, Any]:
        """One fit on the real rows and the canary with ``label``: (the final model's logit on the canary, receipt)."""
        from accounting import ZCDP
        from mechanisms.optim import BallProjection

        X, y = canary_rows(self.X, self.y, np.array([label]), self.clip)
        optimiser = self.mechanism_class(account, "logistic", rng, clip=self.clip, engine=self.engine)
        release = optimiser.fit(X, y, steps=self.steps, lr=self.lr, projection=BallProjection(1e9),
                                cost=ZCDP(self.rho), theta0=np.zeros(X.shape[1]), note="audit: crafted canary")
        return CANARY_NORM * self.clip * float(np.asarray(release.value)[-1]), release.receipt

    def claim(self) -> Claim:
        from audits.noise import gaussian_claim

        _, receipt = self._train(0.0, np.random.default_rng(0), huge_budget_account("zcdp"))
        return gaussian_claim(receipt, self.delta)

    def planned_thresholds(self, claim: Claim, runs: int) -> list[tuple[int, float]]:
        """0: the canary's logit starts at 0 and the two labels push it up and down alike (public)."""
        return [(0, 0.0)]

    def ceiling(self, claim: Claim, runs: int, confidence: float) -> float | None:
        return None if claim.mu is None else gaussian_ceiling(claim.mu, runs, claim.delta, confidence)

    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        account = huge_budget_account("zcdp")
        return np.array([self._train(float(neighbour), rng, account)[0] for _ in range(runs)])


def opacus_train(X: np.ndarray, y: np.ndarray, rng: np.random.Generator, *, steps: int, noise_multiplier: float,
                 lr: float, clip: float, record: bool = False) -> tuple[np.ndarray, list[np.ndarray], Any]:
    """Full-batch opacus DP-SGD from zero weights (no bias), charged first through ``charge_training``.

    opacus's own ``PrivacyEngine`` draws the noise (float Gaussian, seeded from ``rng``) and
    divides by the data set's size; the run is charged to a fresh add/remove GDP ledger
    (μ = √T/z). Returns the final weights, the weights after every step if ``record``
    (white box), and the receipt.
    """
    import warnings

    import torch
    from opacus import PrivacyEngine

    from accounting import GDP, Ledger
    from mechanisms.optim.opacus_adapter import charge_training

    seed = int(rng.integers(2**62))
    torch.manual_seed(seed)
    data = torch.utils.data.TensorDataset(torch.from_numpy(X), torch.from_numpy(y))
    loader = torch.utils.data.DataLoader(data, batch_size=len(X))
    model = torch.nn.Linear(X.shape[1], 1, bias=False, dtype=torch.float64)
    torch.nn.init.zeros_(model.weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    trace: list[np.ndarray] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # opacus: secure_mode and full-backward-hook notices
        model, optimizer, loader = PrivacyEngine().make_private(
            module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=noise_multiplier,
            max_grad_norm=clip, poisson_sampling=False, noise_generator=torch.Generator().manual_seed(seed))
        charge = charge_training(Ledger(GDP(10**6), relation="add_remove"), optimizer, sample_rate=1.0, steps=steps)
        weight = next(model.parameters())
        for _ in range(steps):
            for xb, yb in loader:
                optimizer.zero_grad()
                torch.nn.functional.binary_cross_entropy_with_logits(model(xb).view(-1), yb, reduction="mean") \
                    .backward()
                optimizer.step()
            if record:
                trace.append(weight.detach().numpy().reshape(-1).copy())
    return weight.detach().numpy().reshape(-1).copy(), trace, charge.receipt


class OpacusBlackBoxAudit(DPSGDBlackBoxAudit):
    """opacus through the ledger adapter, add/remove: ``D1`` = real rows + the canary (label 1), ``D0`` = real rows.

    Claimed μ = √T/z (opacus's add/remove accounting, full batch), z set from (ε, δ).
    """

    mechanism = "opacus DP-SGD"

    def __init__(self, epsilon: float, delta: float = 1e-5, *, data: object = "digits-binary", steps: int = 20,
                 clip: float = 1.0, lr: float | None = None, name: str = "opacus-blackbox") -> None:
        super().__init__(epsilon, delta, data=data, steps=steps, clip=clip, lr=1.0 if lr is None else lr,
                         engine="opacus", name=name)
        self.noise_multiplier = math.sqrt(self.steps) / self.mu
        if lr is None:
            self.lr = stable_lr(len(self.y) + 1, self.steps, self.noise_multiplier * self.clip, self.clip)

    def parameters(self) -> dict:
        return {**super().parameters(), "noise_multiplier": self.noise_multiplier, "mechanism_class": "opacus"}

    def _train(self, label: float, rng: np.random.Generator, account: Any) -> tuple[float, Any]:
        X, y = canary_rows(self.X, self.y, np.array([label if label else math.nan]), self.clip)
        weights, _, receipt = opacus_train(X, y, rng, steps=self.steps, noise_multiplier=self.noise_multiplier,
                                           lr=self.lr, clip=self.clip)
        return CANARY_NORM * self.clip * float(weights[self.X.shape[1]]), receipt

    def claim(self) -> Claim:
        from audits.custom import as_claim

        return as_claim(self._train(0.0, np.random.default_rng(0), None)[1], self.delta, gaussian=True)

    def planned_thresholds(self, claim: Claim, runs: int) -> list[tuple[int, float]]:
        """The midpoint of 0 (no canary) and the canary's T clipped steps, a·lr·T·C/(2(n + 1)) (public)."""
        shift = CANARY_NORM * self.clip * self.lr * self.steps * self.clip / (len(self.y) + 1)
        return [(0, shift / 2)]
