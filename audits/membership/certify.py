"""From a membership attack's statistics to a certified ε lower bound: one-run guesses on target models.

The models of a membership audit are split before anything is trained: the first R are
*reference* models (their masks known to the attacker), the other t are *targets*. The
joint release of the t targets is one run of a mechanism whose canaries are the pairs
(example i, target j), each included in j's training set by its own fair coin; flipping
one coin adds or removes one row of one target's training set. If ``fit`` is (ε, δ)-DP
under add/remove, that joint release is (ε, δ)-DP with respect to each coin (the other
targets do not move, and the other coins and seeds are internal randomness of a mixture,
which keeps (ε, δ)-DP), so the one-run theorems apply with m = t·K canaries
(docs/audits.md, "Membership inference: what is certified"):

* Steinke, Nasr & Jagielski (2023), Thm. 5.2 and the f-DP recursion of Mahloujifar,
  Melis & Chaudhuri (2025) against the (ε, δ) curve — assumption-free, each at α/2;
* the same recursion against the Gaussian curves: a μ and its ε at δ that assume a
  Gaussian tradeoff, labelled so.

Everything the guesses depend on is chosen from the reference models alone (attacked
leave-one-out among themselves as held-out stand-ins for targets): the K canary
examples (the most separable ones, K chosen by cross-fitting), and the two thresholds ("in" when the statistic is
at least τ_in, "out" when at most τ_out, abstain otherwise). The targets' coins are
never looked at before the guesses are fixed. Examples outside the K canaries are
included by coins too; they are internal randomness of the mechanism, not canaries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from audits.bounds import (
    gdp_epsilon,
    one_run_epsilon_lower_bound,
    one_run_fdp_epsilon_lower_bound,
    one_run_gdp_mu_lower_bound,
)

__all__ = ["GuessRule", "OneRunBounds", "choose_rule", "count_guesses", "one_run_bounds"]

#: Fractions of the held-out statistics guessed "in" (above τ_in) and "out" (below τ_out).
FRACTIONS = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.25, 0.5)
#: Fractions of the examples kept as canaries (the most separable on the reference models).
CANARY_FRACTIONS = (1.0, 0.5, 0.25, 0.125, 0.0625)
#: The quantile of the held-out precision (Jeffreys posterior) the candidates are compared at.
PRECISION_QUANTILE = 0.05
#: Candidates per canary count whose exact bound is evaluated (the rest are ranked by a closed form).
SHORTLIST = 3


@dataclass(frozen=True)
class GuessRule:
    """The guesses, fixed on the reference models: canary examples and the two thresholds.

    "In" where the statistic is ≥ ``threshold_in``; "out" where it is ≤ ``threshold_out`` and not "in".
    """

    canaries: np.ndarray
    threshold_in: float
    threshold_out: float


@dataclass(frozen=True)
class OneRunBounds:
    """The one-run readings of (m, r, v) at ``delta`` and ``confidence``, each with its ceiling (all r right).

    ``epsilon`` is the larger assumption-free bound (Steinke; f-DP against the (ε, δ) curve), each at
    α/2; ``mu`` and ``gaussian_epsilon`` assume a Gaussian tradeoff (level α).
    """

    delta: float
    confidence: float
    canaries: int
    guesses: int
    correct: int
    steinke: float
    fdp: float
    mu: float
    gaussian_epsilon: float
    steinke_ceiling: float
    fdp_ceiling: float
    mu_ceiling: float
    gaussian_epsilon_ceiling: float

    @property
    def epsilon(self) -> float:
        return max(self.steinke, self.fdp)

    def summary(self) -> str:
        """One line: each bound with its ceiling beside it, and the counts."""
        return (f"certified ε ≥ {self.steinke:.3f} [Steinke, ceiling {self.steinke_ceiling:.3f}], "
                f"≥ {self.fdp:.3f} [f-DP (ε, δ) curve, ceiling {self.fdp_ceiling:.3f}]; "
                f"μ ≥ {self.mu:.3f} (ceiling {self.mu_ceiling:.3f}): ε ≥ {self.gaussian_epsilon:.3f} assuming a "
                f"Gaussian tradeoff (ceiling {self.gaussian_epsilon_ceiling:.3f}); "
                f"{self.correct}/{self.guesses} guesses right on m={self.canaries} canaries, δ={self.delta:g}, "
                f"at {100 * self.confidence:.4g}%")


def one_run_bounds(canaries: int, guesses: int, correct: int, delta: float, confidence: float) -> OneRunBounds:
    """Every reading of (m, r, v) and of (m, r, r), the ceiling: the most r guesses can certify."""
    split = 1.0 - (1.0 - confidence) / 2

    def readings(v: int) -> tuple[float, float, float, float]:
        if guesses == 0:
            return 0.0, 0.0, 0.0, 0.0
        steinke = one_run_epsilon_lower_bound(canaries, guesses, v, delta=delta, confidence=split)
        fdp = one_run_fdp_epsilon_lower_bound(canaries, guesses, v, delta=delta, confidence=split)
        mu = one_run_gdp_mu_lower_bound(canaries, guesses, v, confidence=confidence)
        return steinke, fdp, mu, gdp_epsilon(mu, delta) if delta > 0 else math.inf

    steinke, fdp, mu, gaussian = readings(correct)
    top = readings(guesses)
    return OneRunBounds(delta=delta, confidence=confidence, canaries=canaries, guesses=guesses, correct=correct,
                        steinke=steinke, fdp=fdp, mu=mu, gaussian_epsilon=gaussian, steinke_ceiling=top[0],
                        fdp_ceiling=top[1], mu_ceiling=top[2], gaussian_epsilon_ceiling=top[3])


def _separation(statistics: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Per example: (mean statistic in − mean out) / pooled sd over the held-out models (0 when a side is empty)."""
    inside = masks.astype(float)
    count_in, count_out = inside.sum(axis=0), (1.0 - inside).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_in = (inside * statistics).sum(axis=0) / count_in
        mean_out = ((1.0 - inside) * statistics).sum(axis=0) / count_out
        spread = np.sqrt(np.nanmean((statistics - np.where(masks, mean_in, mean_out)) ** 2, axis=0)) + 1e-12
        gap = (mean_in - mean_out) / spread
    return np.where(np.isfinite(gap), gap, 0.0)


def _thresholds(ordered: np.ndarray, f_in: float, f_out: float) -> tuple[float, float]:
    """(τ_in, τ_out): the ⌈f_in·size⌉-th largest and the ⌈f_out·size⌉-th smallest of the sorted values (±∞ for 0)."""
    size = ordered.size
    top, bottom = int(round(f_in * size)), int(round(f_out * size))
    high = float(ordered[size - top]) if top > 0 else math.inf
    low = float(ordered[bottom - 1]) if bottom > 0 else -math.inf
    return high, low


def _held_out_counts(values: np.ndarray, labels: np.ndarray) -> list[tuple[float, float, float, float]]:
    """(f_in, f_out, r, v) of the guesses at :func:`_thresholds`, as :func:`count_guesses` makes them (ties and all)."""
    order = np.argsort(values, kind="stable")
    ordered, labels = values[order], labels[order]
    size = ordered.size
    ins = np.concatenate([[0], np.cumsum(labels)])  # ins[k]: members among the k smallest
    rows = []
    for f_in in FRACTIONS:
        for f_out in FRACTIONS:
            if f_in + f_out == 0 or f_in + f_out > 1:
                continue
            high, low = _thresholds(ordered, f_in, f_out)
            first_in = int(np.searchsorted(ordered, high, side="left"))  # values ≥ τ_in from here
            last_out = min(int(np.searchsorted(ordered, low, side="right")), first_in)  # values ≤ τ_out, < τ_in
            right = (ins[size] - ins[first_in]) + (last_out - ins[last_out])
            rows.append((f_in, f_out, float(size - first_in + last_out), float(right)))
    return rows


def _proxy(guesses: float, correct: float, alpha: float) -> float:
    """The δ = 0 one-run bound in closed form: logit of the Clopper–Pearson lower bound on the precision."""
    if guesses < 1 or correct < 1:
        return 0.0
    low = float(stats.beta.ppf(alpha, correct, guesses - correct + 1))
    return max(0.0, float(special.logit(low))) if low > 0 else 0.0


def choose_rule(held: np.ndarray, held_masks: np.ndarray, targets: int, delta: float,
                confidence: float) -> GuessRule:
    """The canaries and thresholds that maximise the Steinke bound the targets would give at the held-out rates.

    ``held`` (R, n) are the reference models' statistics, each attacked by the others.
    Cross-fitted: the examples are ranked by separation on one half of the reference
    models and the guesses counted on the other, both ways, so that examples that look
    separable by chance do not inflate their own precision. The counts on t = ``targets``
    models are extrapolated as t/R times the held-out ones, at a low quantile of the
    held-out precision (:data:`PRECISION_QUANTILE`); a closed form (:func:`_proxy`) shortlists
    candidates, their exact bound decides.
    The final canaries are ranked on every reference model. Only power depends on this
    choice, never validity: the targets' coins are not read.
    """
    alpha = (1.0 - confidence) / 2  # the level Steinke's bound is certified at in one_run_bounds
    models, n = held.shape
    halves = [np.arange(models)[0::2], np.arange(models)[1::2]] if models > 1 else [np.arange(models)] * 2
    ranks = [np.argsort(-_separation(held[half], held_masks[half]), kind="stable") for half in halves]
    final_rank = np.argsort(-_separation(held, held_masks), kind="stable")
    best, choice = -1.0, GuessRule(final_rank, math.inf, -math.inf)
    for fraction in CANARY_FRACTIONS:
        size = max(1, int(round(fraction * n)))
        if fraction < 1.0 and size < 16:
            continue
        counts: dict[tuple[float, float], list[float]] = {}
        evaluated = 0
        for rank, half in zip(ranks, halves[::-1], strict=True):
            canaries = rank[:size]
            evaluated += half.size * size
            for f_in, f_out, r, v in _held_out_counts(held[half][:, canaries].ravel(),
                                                      held_masks[half][:, canaries].ravel()):
                total = counts.setdefault((f_in, f_out), [0.0, 0.0])
                total[0], total[1] = total[0] + r, total[1] + v
        scale = targets * size / max(evaluated, 1)
        rows = []
        for (f_in, f_out), (r, v) in counts.items():
            guesses = int(round(r * scale))
            # A low quantile of the held-out precision (Jeffreys), not its estimate: a small held-out
            # count that looks precise by chance does not win over a large one that is.
            correct = int(round(guesses * float(stats.beta.ppf(PRECISION_QUANTILE, v + 0.5, r - v + 0.5))))
            rows.append((_proxy(guesses, correct, alpha), f_in, f_out, guesses, correct))
        rows = sorted({(guesses, correct): row for row in rows for _, _, _, guesses, correct in [row]}.values(),
                      key=lambda row: -row[0])  # distinct (r, v) only: ties give equal guesses
        canaries = np.sort(final_rank[:size])
        ordered = np.sort(held[:, canaries].ravel())
        for _, f_in, f_out, guesses, correct in rows[:SHORTLIST]:
            if guesses < 1:
                continue
            bound = one_run_epsilon_lower_bound(targets * size, guesses, min(correct, guesses), delta=delta,
                                                confidence=1.0 - alpha)
            if bound > best:
                best, choice = bound, GuessRule(canaries, *_thresholds(ordered, f_in, f_out))
    return choice


def count_guesses(rule: GuessRule, statistics: np.ndarray, masks: np.ndarray) -> tuple[int, int, int]:
    """(m, r, v): canaries, guesses and right guesses of ``rule`` on the targets' statistics (t, n) and masks."""
    values, labels = statistics[:, rule.canaries], masks[:, rule.canaries]
    guess_in = values >= rule.threshold_in
    guess_out = (values <= rule.threshold_out) & ~guess_in
    right = int(np.count_nonzero(guess_in & labels) + np.count_nonzero(guess_out & ~labels))
    return int(values.size), int(np.count_nonzero(guess_in | guess_out)), right
