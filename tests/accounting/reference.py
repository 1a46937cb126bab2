"""Slow reference implementations shared by the accounting tests (independent of accounting.convert)."""

import math

import numpy as np


def cks_by_dense_grid(rho: float, delta: float) -> float:
    """Slow reference: CKS Cor. 13 minimised over a dense grid of real orders, refined twice."""
    low, high = 1e-4, 1e5
    for _ in range(3):
        alpha = 1.0 + np.geomspace(low, high, 100_001)
        eps = alpha * rho + np.log1p(-1.0 / alpha) - np.log(alpha * delta) / (alpha - 1.0)
        best = int(np.argmin(eps))
        low, high = alpha[max(best - 2, 0)] - 1.0, alpha[min(best + 2, alpha.size - 1)] - 1.0
    return float(max(0.0, eps.min()))


# ----- the ledger's claim (docs/accounting.md, "Claims"), written out in floats -----------------------------------
LADDER_SHARE = 0.1
RUNG_ORDERS = (2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 32.0)
GRID = [k / 10 for k in range(11, 110)] + [float(k) for k in range(11, 64)] + [128.0, 256.0, 512.0, 1024.0]


def _offset(alpha, delta):
    """g_α(δ) = ln(1 − 1/α) − (ln δ + ln α)/(α − 1): the CKS conversion adds it to an RDP value at α."""
    return math.log(1 - 1 / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)


def best_order(eps, delta):
    """The grid order maximising the Gaussian budget (ε − g_α(δ))/α meeting (ε, δ)."""
    return max(GRID, key=lambda a: (eps - _offset(a, delta)) / a)


def claim_reference(divergence, eps, delta, held=None, top=None):
    """ε of an account's claim: min over its rungs of D(α) + g_α(δ_α), capped by ε (and ``top``), 0 if unspent.

    ``divergence(α)`` is the spend's Rényi bound at α; ``held`` a rung at δ_F = 0.9δ (rdp, zCDP), ``top`` a constant
    rung (GDP: the budget's own conversion at δ_F); the other rung orders share 0.1δ.
    """
    if all(divergence(a) == 0 for a in RUNG_ORDERS + ((held,) if held else ())):
        return 0.0
    others = [a for a in RUNG_ORDERS if a != held]
    rungs = [(a, LADDER_SHARE * delta / len(others)) for a in others]
    if held is not None:
        rungs.append((held, (1 - LADDER_SHARE) * delta))
    best = eps if top is None else min(eps, top)
    for alpha, rung_delta in rungs:
        if eps - _offset(alpha, rung_delta) > 0:  # a rung with no budget says nothing
            best = min(best, divergence(alpha) + _offset(alpha, rung_delta))
    return max(best, 0.0)
