"""Turning attack outcomes into certified lower bounds on ε.

An audit runs a mechanism many times on each of two neighbouring inputs
``D0`` and ``D1``, applies a test "say D1 when the score is at least a
threshold", and counts false positives (``D0`` runs called ``D1``) and false
negatives (``D1`` runs called ``D0``). Three ways to certify a lower bound:

* Clopper–Pearson (Jagielski, Ullman, Oprea 2020, "Auditing differentially
  private machine learning", §4): any (ε, δ)-DP mechanism satisfies
  ``FPR + e^ε FNR ≥ 1 − δ`` and ``FNR + e^ε FPR ≥ 1 − δ``; upper confidence
  bounds on both rates turn this into a lower bound on ε. Assumption-free.
* Gaussian DP (Nasr et al. 2023, "Tight auditing of differentially private
  machine learning", §4): a μ-GDP mechanism has ``FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ)``
  for every test, so ``μ_LB = Φ⁻¹(1 − FPR_ub) − Φ⁻¹(FNR_ub)`` bounds its GDP
  parameter; read as (ε, δ) through the Gaussian privacy curve
  ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` (Dong, Roth, Su 2022, Cor. 2.13).
  Exact for mechanisms whose privacy loss is Gaussian (Gaussian noise).
* One run (Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1)
  training run", Thm. 5.2): m canaries each included with probability ½, r
  guesses, v of them right; an (ε, δ)-DP mechanism gives
  ``P[W ≥ v] ≤ P[Bin(r, q) ≥ v] + 2mδ max_{1≤i≤v} P[v − i ≤ Bin(r, q) < v]/i``
  with ``q = e^ε/(1 + e^ε)``.
* One run, f-DP (Mahloujifar, Melis, Chaudhuri 2025, "Auditing f-differential
  privacy in one run", ICML): the same guesses tested against a whole tradeoff
  curve f through a recursion on f's inverse blow-up (:func:`one_run_fdp_rejects`,
  docs/audits.md). Against the (ε, δ) curve it is assumption-free like
  Steinke's; against the Gaussian curves it assumes a Gaussian tradeoff.

Confidence: the two rates are bounded each at level ``α/2`` (union bound), so
the certified statement holds with probability at least ``1 − α``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from statistics import NormalDist

import numpy as np
from scipy import optimize, special, stats

from accounting.validation import check_int, check_positive, check_probability, check_real

__all__ = [
    "ceiling_from_tails",
    "check_confidence",
    "clopper_pearson_upper",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu_for_epsilon",
    "gdp_mu_from_rates",
    "gdp_mu_lower_bound",
    "one_run_epsilon_lower_bound",
    "one_run_fdp_epsilon_lower_bound",
    "one_run_fdp_rejects",
    "one_run_gdp_epsilon_lower_bound",
    "one_run_gdp_mu_lower_bound",
    "one_run_p_value",
]


def check_confidence(confidence: float) -> float:
    return check_probability("confidence", confidence)


def _bound_delta(delta: float) -> float:
    """δ of a bound, in [0, 1): 0 (pure DP) is allowed here, unlike a mechanism's δ in (0, 1)."""
    return check_real("delta", delta, 0.0, 1.0, high_open=True)


def _check_rate(name: str, rate: float) -> float:
    return check_real(name, rate, 0.0, 1.0)


def _check_counts(k: int, n: int, name: str) -> None:
    if isinstance(k, (bool, np.bool_)) or isinstance(n, (bool, np.bool_)) or not isinstance(k, numbers.Integral) \
            or not isinstance(n, numbers.Integral):
        raise TypeError(f"{name} count and runs must be integers, got {k!r} and {n!r}")
    check_int(f"runs for {name}", n)
    check_int(f"{name} count", k, 0, int(n))


def clopper_pearson_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson upper bound on a binomial rate.

    ``P[p > bound] ≤ alpha`` for ``k`` successes in ``n`` trials:
    ``Beta⁻¹(1 − alpha; k + 1, n − k)``, and 1 when ``k = n``
    (Clopper & Pearson 1934; Jagielski et al. 2020, §4.1).

    Parameters
    ----------
    k, n : int
        Successes and trials, ``0 ≤ k ≤ n``, ``n ≥ 1``.
    alpha : float
        One-sided error probability in (0, 1).
    """
    _check_counts(k, n, "rate")
    check_probability("alpha", alpha)
    if k == n:
        return 1.0
    return float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))


def epsilon_from_rates(fpr: float, fnr: float, delta: float = 0.0) -> float:
    """Largest ε ruled out by a test with these error rates (Jagielski et al. 2020, Eq. 2).

    ``max{ln((1 − δ − FNR)/FPR), ln((1 − δ − FPR)/FNR), 0}``: an (ε, δ)-DP
    mechanism cannot be distinguished with better rates. Used with upper
    confidence bounds on the rates this is the certified bound; used with
    exact rates it is the ε the test reveals.
    """
    delta = _bound_delta(delta)
    fpr, fnr = _check_rate("fpr", fpr), _check_rate("fnr", fnr)
    best = 0.0
    for numerator_rate, denominator_rate in ((fnr, fpr), (fpr, fnr)):
        numerator = 1.0 - delta - numerator_rate
        if numerator <= 0.0:
            continue
        if denominator_rate == 0.0:
            return math.inf
        best = max(best, math.log(numerator / denominator_rate))
    return best


def epsilon_lower_bound(false_positives: int, runs_null: int, false_negatives: int,
                        runs_alternative: int, *, delta: float = 0.0,
                        confidence: float = 0.95) -> float:
    """Certified ε lower bound from false-positive / false-negative counts.

    Clopper–Pearson upper bounds at level ``α/2`` each on FPR and FNR, then
    :func:`epsilon_from_rates` (Jagielski et al. 2020, §4.1). With n runs per
    side it can never exceed about ``ln(n / 3.7)`` at 95 %.

    Parameters
    ----------
    false_positives, runs_null : int
        Runs on ``D0`` called ``D1``, out of ``runs_null``.
    false_negatives, runs_alternative : int
        Runs on ``D1`` called ``D0``, out of ``runs_alternative``.
    delta : float
        The δ of the claim being tested, in [0, 1).
    confidence : float
        Probability, over the audit's runs, that the bound is valid.
    """
    alpha = 1.0 - check_confidence(confidence)
    _check_counts(false_positives, runs_null, "false positive")
    _check_counts(false_negatives, runs_alternative, "false negative")
    fpr_ub = clopper_pearson_upper(int(false_positives), int(runs_null), alpha / 2)
    fnr_ub = clopper_pearson_upper(int(false_negatives), int(runs_alternative), alpha / 2)
    return epsilon_from_rates(fpr_ub, fnr_ub, delta)


def gdp_mu_from_rates(fpr: float, fnr: float) -> float:
    """GDP parameter a test with these rates reveals: ``Φ⁻¹(1 − FPR) − Φ⁻¹(FNR)``, floored at 0.

    (Dong, Roth, Su 2022, Def. 2.6: μ-GDP means the trade-off curve is at
    least ``Φ(Φ⁻¹(1 − α) − μ)``.)
    """
    fpr, fnr = _check_rate("fpr", fpr), _check_rate("fnr", fnr)
    return max(0.0, float(-special.ndtri(fpr) - special.ndtri(fnr)))


def gdp_mu_lower_bound(false_positives: int, runs_null: int, false_negatives: int,
                       runs_alternative: int, *, confidence: float = 0.95) -> float:
    """Certified lower bound on the Gaussian-DP parameter μ (Nasr et al. 2023, §4).

    ``μ_LB = Φ⁻¹(1 − FPR_ub) − Φ⁻¹(FNR_ub)`` with Clopper–Pearson upper
    bounds at level ``α/2`` each. A mechanism that is μ-GDP for ``μ < μ_LB``
    would, with probability ≥ ``confidence``, not have produced these counts.
    """
    alpha = 1.0 - check_confidence(confidence)
    _check_counts(false_positives, runs_null, "false positive")
    _check_counts(false_negatives, runs_alternative, "false negative")
    fpr_ub = clopper_pearson_upper(int(false_positives), int(runs_null), alpha / 2)
    fnr_ub = clopper_pearson_upper(int(false_negatives), int(runs_alternative), alpha / 2)
    return gdp_mu_from_rates(fpr_ub, fnr_ub)


def _check_mu(mu: float) -> float:
    return check_real("mu", mu, 0.0)


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP: ``Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` (Dong, Roth, Su 2022, Cor. 2.13).

    Evaluated in log space so that large ε does not overflow.
    """
    mu = _check_mu(mu)
    epsilon = check_real("epsilon", epsilon, 0.0)
    if mu == 0.0:
        return 0.0
    first = special.ndtr(-epsilon / mu + mu / 2)
    second = math.exp(epsilon + special.log_ndtr(-epsilon / mu - mu / 2))
    return max(0.0, float(first - second))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε with μ-GDP ⇒ (ε, δ)-DP: solves ``gdp_delta(mu, ε) = delta``.

    This is also the exact (ε, δ) of the Gaussian mechanism with
    ``sensitivity/σ = μ`` (Balle & Wang 2018, Thm. 8).
    """
    mu = _check_mu(mu)
    delta = check_probability("delta", delta)
    if mu == 0.0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    upper = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1.0
    while gdp_delta(mu, upper) > delta:
        upper *= 2
    return float(optimize.brentq(lambda eps: gdp_delta(mu, eps) - delta, 0.0, upper,
                                 xtol=1e-12, rtol=1e-12))


def gdp_mu_for_epsilon(epsilon: float, delta: float) -> float:
    """The μ whose Gaussian privacy curve passes through (ε, δ): inverse of :func:`gdp_epsilon`.

    Equivalently the ``sensitivity/σ`` of the analytic Gaussian mechanism
    (Balle & Wang 2018, Thm. 8) that is exactly (ε, δ)-DP.
    """
    epsilon, delta = check_positive("epsilon", epsilon), check_probability("delta", delta)
    upper = 1.0
    while gdp_delta(upper, epsilon) < delta:
        upper *= 2
    return float(optimize.brentq(lambda mu: gdp_delta(mu, epsilon) - delta, 1e-12, upper,
                                 xtol=1e-14, rtol=1e-13))


def one_run_p_value(canaries: int, guesses: int, correct: int, epsilon: float,
                    delta: float) -> float:
    """Bound on ``P[W ≥ correct]`` for an (ε, δ)-DP mechanism, one-run audit.

    Steinke, Nasr, Jagielski 2023, Thm. 5.2 (and Prop. 5.7 for the max):
    ``P[Bin(r, q) ≥ v] + 2mδ · max_{1≤i≤v} P[v − i ≤ Bin(r, q) < v] / i``,
    ``q = e^ε / (1 + e^ε)``; capped at 1.

    Parameters
    ----------
    canaries : int
        m, canaries each included independently with probability ½.
    guesses : int
        r ≤ m, canaries on which the auditor did not abstain.
    correct : int
        v ≤ r, correct guesses.
    epsilon, delta : float
        The null hypothesis: the mechanism is (ε, δ)-DP.
    """
    _check_one_run(canaries, guesses, correct)
    delta = _bound_delta(delta)
    epsilon = check_real("epsilon", epsilon, 0.0)
    q = special.expit(epsilon)
    tail = float(stats.binom.sf(correct - 1, guesses, q))
    if delta == 0.0 or correct == 0:
        return min(1.0, tail)
    # window(i) = P[v - i ≤ B < v] / i = (F(v-1) - F(v-1-i)) / i, F the Bin(r, q) cdf. Below
    # lo = mean - 40 sd the cdf is < 1e-300, so i only runs to v - lo; every longer window is
    # at most F(v-1)/(v - lo + 1), added as one more candidate so the max is never underestimated.
    sd = math.sqrt(guesses * q * (1 - q))
    lo = int(min(max(0.0, math.floor(guesses * q - 40 * sd) - 1), correct - 1))
    cdf = stats.binom.cdf(np.arange(lo - 1, correct), guesses, q)  # F(lo-1), ..., F(v-1)
    i = np.arange(1, correct - lo + 1)
    window = (cdf[-1] - cdf[correct - lo - i]) / i
    worst = float(window.max())
    if lo > 0:
        worst = max(worst, float(cdf[-1]) / (correct - lo + 1))
    return min(1.0, tail + 2 * canaries * delta * worst)


def _check_one_run(canaries: int, guesses: int, correct: int) -> None:
    for name, value in (("canaries", canaries), ("guesses", guesses), ("correct", correct)):
        check_int(name, value, low=0)
    if not 0 <= correct <= guesses <= canaries or canaries < 1:
        raise ValueError("need 0 ≤ correct ≤ guesses ≤ canaries and canaries ≥ 1, got "
                         f"correct={correct}, guesses={guesses}, canaries={canaries}")


def one_run_epsilon_lower_bound(canaries: int, guesses: int, correct: int, *,
                                delta: float = 0.0, confidence: float = 0.95) -> float:
    """Certified ε lower bound from one run with canaries (Steinke et al. 2023, Alg. 3).

    ``sup{ε : p(ε) ≤ 1 − confidence}`` with ``p`` from :func:`one_run_p_value`.
    Rejecting (ε', δ)-DP rejects every (ε, δ)-DP with ε ≤ ε', so the supremum
    is valid even where ``p`` is not monotone; it is located by a grid scan
    and refined by bisection.
    """
    alpha = 1.0 - check_confidence(confidence)
    _check_one_run(canaries, guesses, correct)
    delta = _bound_delta(delta)

    def rejected(eps: float) -> bool:
        return one_run_p_value(canaries, guesses, correct, eps, delta) <= alpha

    if not rejected(0.0):
        return 0.0
    # With all r guesses right and δ = 0 the bound is logit(α^{1/r}) ≈ ln(r / ln(1/α));
    # past a few times that the binomial tail is ≈ 1 and nothing is rejected.
    upper = 2.0 * math.log(max(guesses, 2) / math.log(1 / alpha) + 1.0) + 2.0
    grid = np.linspace(0.0, upper, 41)
    flags = np.array([rejected(float(eps)) for eps in grid])
    last = int(np.flatnonzero(flags)[-1])
    if last == grid.size - 1:
        raise RuntimeError("one-run bound search range too small; report this as a bug")
    low, high = float(grid[last]), float(grid[last + 1])
    for _ in range(40):
        middle = (low + high) / 2
        if rejected(middle):
            low = middle
        else:
            high = middle
    return low


def ceiling_from_tails(null_tail: np.ndarray, alternative_tail: np.ndarray, runs: int, *, delta: float = 0.0,
                       confidence: float = 0.95) -> tuple[float, int]:
    """(bound, index): the best Clopper–Pearson bound of a test "score ≥ cᵢ" at its expected counts.

    ``null_tail[i] = P₀[score ≥ cᵢ]`` and ``alternative_tail[i] = P₁[score ≥ cᵢ]`` for
    candidate thresholds cᵢ; with ``runs`` per side the expected false positives are
    ``runs·null_tail[i]`` and false negatives ``runs·(1 − alternative_tail[i])``
    (rounded), turned into :func:`epsilon_lower_bound`. The maximum over i is what
    that family of tests typically certifies at this run count — the ceiling an
    audit of the pair is measured against — and i is the threshold to plan.
    """
    null_tail = np.clip(np.asarray(null_tail, dtype=float), 0.0, 1.0)
    alternative_tail = np.clip(np.asarray(alternative_tail, dtype=float), 0.0, 1.0)
    if null_tail.shape != alternative_tail.shape or null_tail.ndim != 1 or null_tail.size == 0:
        raise ValueError("null_tail and alternative_tail must be 1-D arrays of the same, non-zero length")
    best, index = 0.0, 0
    for i, (p0, p1) in enumerate(zip(null_tail, alternative_tail, strict=True)):
        false_positives = round(runs * p0)
        false_negatives = round(runs * (1.0 - p1))
        bound = epsilon_lower_bound(false_positives, runs, false_negatives, runs, delta=delta, confidence=confidence)
        if bound > best:
            best, index = bound, i
    return best, index


def _approx_dp_inverse_blow_up(epsilon: float, delta: float) -> Callable[[float], float]:
    """y ↦ the least P-mass of an event whose Q-mass may be y under (ε, δ)-DP.

    The (ε, δ) tradeoff curve is ``f(x) = max(0, 1 − δ − e^ε x, e^{−ε}(1 − δ − x))``
    (Dong, Roth, Su 2022, Prop. 2.5); its blow-up ``1 − f`` is the minimum of three
    increasing pieces, so its inverse is the maximum of theirs:
    ``max(0, (y − δ)e^{−ε}, 1 − δ − e^{ε}(1 − y))``.
    """
    grow, shrink = math.exp(epsilon), math.exp(-epsilon)

    def inverse(y: float) -> float:
        return max(0.0, (y - delta) * shrink, 1.0 - delta - grow * (1.0 - y))
    return inverse


def _gaussian_inverse_blow_up(mu: float) -> Callable[[float], float]:
    """y ↦ ``Φ(Φ⁻¹(y) − μ)``: the inverse blow-up of μ-GDP (tradeoff ``Φ(Φ⁻¹(1 − x) − μ)``)."""
    normal = NormalDist()

    def inverse(y: float) -> float:
        if y <= 0.0:
            return 0.0
        if y >= 1.0:
            return 1.0
        return normal.cdf(normal.inv_cdf(y) - mu)
    return inverse


def one_run_fdp_rejects(inverse_blow_up: Callable[[float], float], canaries: int, guesses: int, correct: int,
                        alpha: float) -> bool:
    """Whether ``correct`` right out of ``guesses`` on ``canaries`` rejects the tradeoff curve at level ``alpha``.

    Mahloujifar, Melis & Chaudhuri (2025), the one-run bound for an f-DP
    mechanism (membership guesses, alphabet of 2): starting from
    ``r_v = α v/m`` and ``h_v = α (r − v)/m`` (m canaries, r guesses, v right),
    for i = v − 1, …, 0::

        h_i = max(h_{i+1}, f̄⁻¹(r_{i+1})),      r_i = r_{i+1} + i/(r − i) · (h_i − h_{i+1}),

    with ``f̄⁻¹`` the inverse blow-up of the curve (``inverse_blow_up``). If the
    mechanism were f-DP and ``P[≥ v right] ≥ α``, then ``r_0 + h_0 ≤ r/m``; so
    ``r_0 + h_0 > r/m`` rejects f-DP at level α. ``r_i`` is capped at 1 (it
    bounds a probability mass; the cap only shrinks it, so it is conservative).
    A step that leaves h unchanged leaves every later step unchanged: the loop stops there.
    """
    _check_one_run(canaries, guesses, correct)
    check_probability("alpha", alpha)
    if correct == 0:
        return False
    r = alpha * correct / canaries
    h = alpha * (guesses - correct) / canaries
    for i in range(correct - 1, -1, -1):
        h_next = max(h, inverse_blow_up(r))
        if h_next == h:
            break
        r = min(1.0, r + i / (guesses - i) * (h_next - h))
        h = h_next
    return r + h > guesses / canaries


def _supremum_rejected(rejected: Callable[[float], bool], upper: float, steps: int = 40) -> float:
    """``sup{x ≥ 0 : rejected(x)}``: a grid over [0, upper] (doubled until its end is not rejected), then bisection.

    Rejecting the hypothesis at x rejects every stronger one (smaller x), so
    the supremum is valid even where the test is not monotone.
    """
    if not rejected(0.0):
        return 0.0
    while rejected(upper):
        upper *= 2.0
    grid = np.linspace(0.0, upper, 25)
    flags = [rejected(float(x)) for x in grid]
    last = max(i for i, flag in enumerate(flags) if flag)
    low, high = float(grid[last]), float(grid[last + 1])
    for _ in range(steps):
        middle = (low + high) / 2
        if rejected(middle):
            low = middle
        else:
            high = middle
    return low


def one_run_fdp_epsilon_lower_bound(canaries: int, guesses: int, correct: int, *, delta: float = 0.0,
                                    confidence: float = 0.95) -> float:
    """Certified ε lower bound from one run, against the (ε, δ) tradeoff curve (Mahloujifar et al. 2025).

    The largest ε whose (ε, δ)-DP curve :func:`one_run_fdp_rejects` rejects at
    level ``1 − confidence``. Assumption-free, on the same (m, r, v) as
    :func:`one_run_epsilon_lower_bound` (Steinke et al.), and at least as high
    up to the search's resolution (docs/audits.md has the table).
    """
    alpha = 1.0 - check_confidence(confidence)
    _check_one_run(canaries, guesses, correct)
    delta = _bound_delta(delta)
    upper = 2.0 * math.log(max(guesses, 2) / math.log(1 / alpha) + 1.0) + 2.0
    return _supremum_rejected(
        lambda eps: one_run_fdp_rejects(_approx_dp_inverse_blow_up(eps, delta), canaries, guesses, correct, alpha),
        upper)


def one_run_gdp_mu_lower_bound(canaries: int, guesses: int, correct: int, *, confidence: float = 0.95) -> float:
    """The largest μ whose μ-GDP curve the one-run guesses reject (Mahloujifar et al. 2025): a Gaussian tradeoff."""
    alpha = 1.0 - check_confidence(confidence)
    _check_one_run(canaries, guesses, correct)
    return _supremum_rejected(
        lambda mu: one_run_fdp_rejects(_gaussian_inverse_blow_up(mu), canaries, guesses, correct, alpha), 4.0)


def one_run_gdp_epsilon_lower_bound(canaries: int, guesses: int, correct: int, *, delta: float,
                                    confidence: float = 0.95) -> float:
    """ε at ``delta`` of the weakest Gaussian mechanism the one-run guesses refute: ASSUMES a Gaussian tradeoff.

    :func:`one_run_gdp_mu_lower_bound` read through the Gaussian privacy curve
    (:func:`gdp_epsilon`). Valid only for mechanisms whose tradeoff curve is
    Gaussian (the Gaussian mechanism); not comparable with the assumption-free bounds.
    """
    delta = check_probability("delta", delta)
    mu = one_run_gdp_mu_lower_bound(canaries, guesses, correct, confidence=confidence)
    return gdp_epsilon(mu, delta)
