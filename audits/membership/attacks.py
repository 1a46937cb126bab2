"""Membership-inference attacks on a table of per-example scores: LiRA, RMIA and the loss threshold.

Every attack reads the same table: ``scores[k, i]``, the score of example i under
reference model k (higher = the model fits the example better, e.g. the logit of the
true label's probability), and ``masks[k, i]``, whether model k was trained on i. It
returns, for each *target* model j and example i, a statistic that is higher when the
attack believes i was in j's training set. A target's statistic uses the target's own
scores and the reference models only, never the target's mask (docs/audits.md,
"Membership inference: what is certified").

* ``"lira"`` — LiRA online (Carlini et al., S&P 2022, §IV-C, Alg. 1): per example, a
  Gaussian fit of the score over the reference models trained with it (μ_in, σ_in) and
  without it (μ_out, σ_out); the statistic is the log likelihood ratio
  ``log N(s; μ_in, σ_in²) − log N(s; μ_out, σ_out²)``.
* ``"lira-offline"`` — LiRA offline (§IV-D): the out-fit only, ``(s − μ_out)/σ_out``
  (a monotone transform of their one-sided p-value, kept on one scale across examples).
* ``fixed_variance=True`` — LiRA's global-variance variant (§IV-C, "fixed variance"):
  one σ for every example, the mean over examples of the per-example variances.
* ``"rmia"`` — RMIA (Zarifzadeh et al., ICML 2024, §3): p = expit(s) is the model's
  probability of the true label, ``Pr(x) = mean_k p_k(x)`` over the reference models
  (half of which hold x: their online estimate), ``LR_j(x) = p_j(x)/Pr(x)``, and the
  statistic is the fraction of population examples z ≠ x (here every other example of
  the table) with ``LR_j(x)/LR_j(z) ≥ γ``.
* ``"loss"`` — the loss threshold of Yeom et al. (CSF 2018): the target's score itself
  (for a score that decreases with the loss); no reference model is used.

Leave-one-out: with ``exclude[j] = k`` the reference k is left out of target j's fits
(each reference model attacked in turn by the others, the ROC protocol of Carlini et al.).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = ["ATTACKS", "REFERENCE_ATTACKS", "attack_statistics"]

#: The attacks, by the names ``MembershipAudit`` accepts.
ATTACKS = ("lira", "lira-offline", "rmia", "loss")
#: Attacks that read reference models (the loss attack reads none).
REFERENCE_ATTACKS = ("lira", "lira-offline", "rmia")


def attack_statistics(attack: str, target_scores: np.ndarray, ref_scores: np.ndarray, ref_masks: np.ndarray, *,
                      exclude: np.ndarray | None = None, fixed_variance: bool = False,
                      gamma: float = 1.0) -> np.ndarray:
    """The (targets, n) statistics of ``attack`` (module docstring).

    Parameters
    ----------
    attack : str
        One of :data:`ATTACKS`.
    target_scores : array of shape (t, n)
        The target models' scores.
    ref_scores, ref_masks : arrays of shape (R, n)
        The reference models' scores and inclusion masks.
    exclude : int array of shape (t,), optional
        Reference left out of target j's fits (−1: none).
    fixed_variance : bool
        LiRA with one global variance.
    gamma : float
        RMIA's γ > 0 (their Eq. 4; default 1).
    """
    if attack == "loss":
        return np.array(target_scores, dtype=float)
    exclude = np.full(target_scores.shape[0], -1) if exclude is None else np.asarray(exclude)
    if attack == "rmia":
        return _rmia(target_scores, ref_scores, exclude, gamma)
    fits = _gaussian_fits(ref_scores, ref_masks, exclude)
    return _lira(attack, target_scores, fits, fixed_variance)


def _leave_out(total: np.ndarray, rows: np.ndarray, exclude: np.ndarray) -> np.ndarray:
    """``total`` (n,) minus ``rows[exclude[j]]`` for each target j: shape (t, n) (nothing where exclude is −1)."""
    left = np.broadcast_to(total, (exclude.size, total.size)).copy()
    chosen = exclude >= 0
    left[chosen] -= rows[exclude[chosen]]
    return left


def _gaussian_fits(scores: np.ndarray, masks: np.ndarray, exclude: np.ndarray) -> dict[str, np.ndarray]:
    """Per target and example: mean and variance of the in- and out-scores over its reference models.

    Scores are centred per example first (the mean over every reference), so the sums of
    squares do not cancel. A group with no member borrows the other group's mean shifted by
    the global in/out gap; a group of fewer than two borrows the global variance.
    """
    centre = scores.mean(axis=0)
    centred = scores - centre
    inside = masks.astype(float)
    fits: dict[str, np.ndarray] = {}
    for name, weight in (("in", inside), ("out", 1.0 - inside)):
        count = _leave_out(weight.sum(axis=0), weight, exclude)
        total = _leave_out((weight * centred).sum(axis=0), weight * centred, exclude)
        squares = _leave_out((weight * centred**2).sum(axis=0), weight * centred**2, exclude)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = total / count
            variance = (squares - count * mean**2) / (count - 1)
        fits[f"count_{name}"], fits[f"mean_{name}"], fits[f"var_{name}"] = count, mean, variance
    pooled = float(np.var(centred)) if centred.size else 1.0
    global_gap = float(centred[masks].mean() - centred[~masks].mean()) if masks.any() and (~masks).any() else 0.0
    for name, sign in (("in", 1.0), ("out", -1.0)):
        other = "out" if name == "in" else "in"
        empty = fits[f"count_{name}"] < 1
        fits[f"mean_{name}"] = np.where(empty, fits[f"mean_{other}"] + sign * global_gap, fits[f"mean_{name}"])
        thin = fits[f"count_{name}"] < 2
        fits[f"var_{name}"] = np.where(thin, pooled, fits[f"var_{name}"])
    floor = 1e-9 * pooled + 1e-300
    for name in ("in", "out"):
        fits[f"var_{name}"] = np.maximum(fits[f"var_{name}"], floor)
        fits[f"mean_{name}"] = fits[f"mean_{name}"] + centre
    return fits


def _lira(attack: str, target: np.ndarray, fits: dict[str, np.ndarray], fixed_variance: bool) -> np.ndarray:
    var_in, var_out = fits["var_in"], fits["var_out"]
    if fixed_variance:  # one variance per target: the mean over examples of both groups' variances
        shared = 0.5 * (var_in.mean(axis=1, keepdims=True) + var_out.mean(axis=1, keepdims=True))
        var_in = var_out = np.broadcast_to(shared, var_in.shape)
    out_z = (target - fits["mean_out"]) / np.sqrt(var_out)
    if attack == "lira-offline":
        return out_z
    in_z = (target - fits["mean_in"]) / np.sqrt(var_in)
    return 0.5 * (out_z**2 - in_z**2) + 0.5 * (np.log(var_out) - np.log(var_in))


def _rmia(target: np.ndarray, scores: np.ndarray, exclude: np.ndarray, gamma: float) -> np.ndarray:
    """RMIA's pairwise score against every other example as the population (module docstring)."""
    probabilities = expit(scores)
    references = _leave_out(probabilities.sum(axis=0), probabilities, exclude)
    count = scores.shape[0] - (exclude >= 0).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        prior = references / count[:, None]
        ratio = expit(target) / prior
    ratio = np.where(np.isfinite(ratio), ratio, 0.0)
    population = np.sort(ratio, axis=1)
    n = target.shape[1]
    dominated = np.empty_like(ratio)
    for j in range(target.shape[0]):  # a sort per target: O(t · n log n)
        dominated[j] = np.searchsorted(population[j], ratio[j] / gamma, side="right")
    dominated -= gamma <= 1.0  # x itself is counted when γ ≤ 1 (LR(x)/LR(x) = 1 ≥ γ)
    return dominated / max(n - 1, 1)
