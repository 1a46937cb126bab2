"""The audit game shared by every mechanism family, and its result record.

An :class:`Audit` knows a worst-case neighbouring pair ``(D0, D1)`` for one
mechanism, runs the mechanism on each many times (vectorised: one call of the
mechanism's noise path yields many runs), and reduces every run to a score
that is (close to) the likelihood ratio ``p1(output)/p0(output)``. The test
"say D1 when score ≥ c" then has false-positive and false-negative counts
that :mod:`audits.bounds` turns into a certified lower bound on ε. An audit may
offer several candidate statistics (e.g. the likelihood ratio of the correct
mechanism and one that catches a known failure mode); the held-out runs pick
one of them together with its threshold.

Procedure (Jagielski et al. 2020, §4; Nasr et al. 2023, §4):

1. Candidate tests (statistic, threshold) are fixed before the main runs:
   the one maximising the bound certified on held-out runs, plus any the
   audit plans from public information alone (:meth:`Audit.planned_thresholds`,
   e.g. the optimal threshold under the claimed law of the statistic).
2. Fresh main runs count false positives / negatives of every candidate; the
   k candidates do not depend on them, and each is bounded at level α/k
   (Bonferroni), so the best of them is valid simultaneously.
3. The primary bound is the one the audit declared before running. For
   Clopper–Pearson audits it is the certified (ε, δ) lower bound, valid
   whatever the mechanism's tradeoff curve. For Gaussian-noise mechanisms it
   is a certified lower bound on the Gaussian-DP μ: "violated" then means the
   μ-GDP claim is refuted, and the ε it is read as (through the Gaussian
   tradeoff curve) holds only assuming a Gaussian tradeoff; the
   assumption-free Clopper–Pearson ε of the same counts is reported beside it
   (docs/audits.md).
"""

from __future__ import annotations

import functools
import json
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Final, Literal

import numpy as np

from accounting.validation import check_int
from audits import bounds
from audits.engine import map_chunks, require_engine

if TYPE_CHECKING:
    from accounting import Account, Cost

__all__ = ["CLOPPER_PEARSON", "GAUSSIAN_DP", "Audit", "AuditResult", "Claim", "approx_accounts", "check_claim_number",
           "check_scores", "huge_budget_account", "summary_text"]

CLOPPER_PEARSON: Final = "clopper-pearson"
GAUSSIAN_DP: Final = "gaussian-dp"
Method = Literal["clopper-pearson", "gaussian-dp"]


@dataclass(frozen=True)
class Claim:
    """What a mechanism promises for the audited neighbouring pair.

    Attributes
    ----------
    epsilon, delta : float
        The (ε, δ) being tested. For Gaussian-noise mechanisms charged in zCDP
        this is the exact (ε, δ) of the Gaussian mechanism with ``mu`` at δ
        (Balle & Wang 2018) — what ρ-zCDP means for Gaussian noise.
    cost : str
        The ledger charge the claim is read from, as the receipt states it.
    mu : float or None
        Gaussian-DP parameter √(2ρ) implied by a zCDP charge on Gaussian
        noise (Dong, Roth, Su 2022, Cor. 2.13 read backwards), else None.
    ledger_epsilon : float
        The ε the ledger reports for the charge at ``delta`` (CKS conversion
        for zCDP; equal to ``epsilon`` for pure / approximate DP charges).
    """

    epsilon: float
    delta: float
    cost: str
    mu: float | None = None
    ledger_epsilon: float | None = None

    def __post_init__(self) -> None:
        """Refuse a claim no audit can test: ε negative or NaN, δ outside [0, 1), μ negative or NaN."""
        check_claim_number("claimed epsilon", self.epsilon)
        check_claim_number("claimed delta", self.delta, high=1.0)
        if self.mu is not None:
            check_claim_number("claimed mu", self.mu)


def check_claim_number(name: str, value: object, *, high: float | None = None) -> float:
    """``value`` as a float ≥ 0 (and < ``high``): a claim's ε, δ or μ; one line naming ``name`` otherwise.

    +∞ is allowed for ε and μ (a vacuous claim, never refuted); NaN, negatives,
    booleans and non-numbers are refused, so garbage never reaches a certificate.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating, Fraction)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    number = float(value)
    if math.isnan(number):
        raise ValueError(f"{name} is NaN")
    if number < 0:
        raise ValueError(f"{name} must be ≥ 0, got {number!r}")
    if high is not None and not number < high:
        raise ValueError(f"{name} must be < {high:g}, got {number!r}")
    return number


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit: the claim, the certified lower bound, the runs, the verdict.

    ``epsilon_lower_bound`` holds with probability ≥ ``confidence`` over the
    audit's runs. ``runs`` counts the main runs per neighbour; ``holdout_runs``
    the runs per neighbour spent choosing the threshold.
    """

    audit: str
    mechanism: str
    method: str
    statistic: str
    claimed_epsilon: float
    claimed_delta: float
    claimed_cost: str
    claimed_mu: float | None
    ledger_epsilon: float | None
    epsilon_lower_bound: float
    epsilon_lower_bound_clopper_pearson: float
    mu_lower_bound: float
    runs: int
    holdout_runs: int
    threshold: float
    false_positives: int
    false_negatives: int
    confidence: float
    verdict: str
    seed: int
    seconds: float
    parameters: dict
    scores_null: np.ndarray = field(repr=False, compare=False)
    scores_alternative: np.ndarray = field(repr=False, compare=False)
    candidates: int = 1
    ceiling: float | None = None
    observed_ceiling: float | None = None

    @property
    def bound_kind(self) -> str:
        """What ``epsilon_lower_bound`` is: a certified (ε, δ) bound, or ε assuming a Gaussian tradeoff."""
        return ("certified (ε, δ)" if self.method == CLOPPER_PEARSON
                else "μ-GDP bound, ε assuming a Gaussian tradeoff")

    @property
    def ratio(self) -> float:
        """Certified lower bound over claimed ε (1 = the claim is tight)."""
        return self.epsilon_lower_bound / self.claimed_epsilon if self.claimed_epsilon > 0 else math.inf

    def to_dict(self) -> dict:
        """Every field but the raw scores, JSON-ready."""
        data = asdict(self)
        data.pop("scores_null")
        data.pop("scores_alternative")
        data["ratio"] = self.ratio
        data["bound_kind"] = self.bound_kind
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str)

    def summary(self) -> str:
        """A few short lines (under 90 characters): the audit, its claim and verdict; then the bounds and runs.

        Every field, at full precision, is in :meth:`to_dict` (``dpglm audit`` saves it as JSON).
        """
        return summary_text(self.audit, self.claimed_epsilon, self.claimed_delta,
                            f"at {_percent(self.confidence)}: {self._verdict_text()}", self.details())

    def _verdict_text(self) -> str:
        return "μ-GDP refuted" if self.method != CLOPPER_PEARSON and self.verdict == "violated" else self.verdict

    def details(self) -> list[str]:
        """The lines under the headline: the certified bound with its ceilings and runs; the μ bound if Gaussian."""
        certified = (self.epsilon_lower_bound if self.method == CLOPPER_PEARSON
                     else self.epsilon_lower_bound_clopper_pearson)
        ceilings = [f"{label} {value:.3f}" for label, value in (("public", self.ceiling),
                                                                  ("held-out", self.observed_ceiling))
                    if value is not None]
        lines = [f"certified ε ≥ {certified:.4f}" + (f" (ceiling {', '.join(ceilings)})" if ceilings else "")
                 + f"; runs {self.runs}+{self.holdout_runs}/side"]
        if self.method != CLOPPER_PEARSON:
            lines.append(f"μ ≥ {self.mu_lower_bound:.4f} vs claimed {self.claimed_mu:.4f}: "
                         f"ε ≥ {self.epsilon_lower_bound:.4f} assuming a Gaussian tradeoff")
        return lines

    def plot(self, path: str) -> None:
        """Save the score plot (both neighbours' histograms, the threshold, :meth:`title`) as a PNG at ``path``."""
        from audits.plot import plot_result

        plot_result(self, path)

    def title(self) -> str:
        """A plot title that says "certified" only of the assumption-free bound (docs/audits.md)."""
        head = f"{self.audit}: claimed ε={self.claimed_epsilon:.3g} (δ={self.claimed_delta:g}), "
        if self.method == CLOPPER_PEARSON:
            body = f"certified ε≥{self.epsilon_lower_bound:.3g}"
        else:
            body = (f"certified ε≥{self.epsilon_lower_bound_clopper_pearson:.3g}; μ≥{self.mu_lower_bound:.3g} "
                    f"(claimed {self.claimed_mu:.3g}), ε≥{self.epsilon_lower_bound:.3g} assuming a Gaussian tradeoff")
        return f"{head}{body}\nat {_percent(self.confidence)} confidence: {self._verdict_text()}"


def summary_text(audit: str, claimed_epsilon: float, claimed_delta: float, verdict: str,
                 details: list[str]) -> str:
    """An audit's printed summary: one headline (name, claim, verdict), then ``details`` indented by four.

    Every result type prints this shape, so ``dpglm audit``'s lines stay under 100
    characters with its ``[real]``/``[planted]`` tag (the full record is its JSON).
    """
    headline = f"{audit:<28} claimed ε={claimed_epsilon:7.4f} (δ={claimed_delta:g})  {verdict}"
    return "\n".join([headline, *(f"    {line}" for line in details)])


def _percent(confidence: float) -> str:
    """``0.95`` as ``95%``, ``0.99926…`` as ``99.926%`` (enough digits to tell a Bonferroni level apart)."""
    text = f"{100 * confidence:.4g}"
    return f"{text}%"


def huge_budget_account(currency: str) -> Account:
    """A fresh account whose budget no audit run can exhaust, in ``currency``.

    Every real release charges a ledger (docs/design.md); an audit's bulk runs are
    charged to a throw-away ledger of ρ = 10¹² (or ε = 10¹²), so the mechanism
    code path — charge first, then sample — is the one exercised.
    """
    from accounting import ZCDP, ApproxDP, Ledger, PureDP

    huge = Fraction(10**12)
    budgets: dict[str, Cost] = {"zcdp": ZCDP(huge), "pure": PureDP(huge), "approx": ApproxDP(huge, Fraction(1, 2))}
    if currency not in budgets:
        raise ValueError(f"currency must be one of {sorted(budgets)}, got {currency!r}")
    return Ledger(budgets[currency]).root


#: Attributes an audit may be given after construction that a rebuilt copy keeps.
_SETTINGS = ("chunk", "compute_engine", "n_jobs", "name")


def _rebuild(cls: type[Audit], args: tuple[object, ...], kwargs: dict[str, object],
             settings: dict[str, object]) -> Audit:
    """An audit built afresh from its constructor arguments (its ledgers are new), then ``settings``."""
    audit = cls(*args, **kwargs)
    audit.__dict__.update(settings)
    return audit


def approx_accounts(delta: float) -> Iterator[Account]:
    """Huge-budget ``"approx"`` accounts, one charge of δ = ``delta`` at a time: ``next()`` per charge.

    The δ of an approximate-DP ledger composes additively and its budget is
    below 1, so an audit that charges many releases of δ moves to a fresh
    account before the current one runs out (each account takes ⌊0.4/δ⌋ charges).
    """
    per_account = max(1, int(0.4 / delta)) if delta > 0 else 1 << 62
    while True:
        account = huge_budget_account("approx")
        for _ in range(per_account):
            yield account


def check_scores(scores: object, runs: int, width: int, name: str = "audit") -> np.ndarray:
    """``scores`` of ``runs`` runs as a ``(runs, width)`` float array, or a one-line error naming the problem.

    Accepted: real numbers (bool and integer scores too) of shape ``(runs,)``
    when ``width == 1``, or ``(runs, width)``; ±∞ is allowed (an output that is
    impossible under one neighbour is how a porous mechanism shows). Refused:
    non-numeric or complex scores, any other shape (never reshaped to fit), NaN.
    """
    array = np.asarray(scores)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name}: scores must be real numbers, got an array of dtype {array.dtype} "
                        f"(from {type(scores).__name__})")
    if array.shape == (runs,) and width == 1:
        array = array.reshape(runs, 1)
    if array.shape != (runs, width):
        expected = f"({runs},) or ({runs}, 1)" if width == 1 else f"({runs}, {width})"
        raise ValueError(f"{name}: scores of {runs} runs must have shape {expected}, got {array.shape}")
    array = array.astype(float)
    nan = np.isnan(array)
    if nan.any():
        raise ValueError(f"{name}: scores contain NaN ({int(nan.sum())} of {array.size}, first at run "
                         f"{int(np.argwhere(nan)[0][0])}); a score must be a number or ±inf")
    return array


def _candidate_thresholds(null: np.ndarray, alternative: np.ndarray, candidates: int) -> np.ndarray:
    """The distinct scores, thinned to about ``candidates`` quantiles of the finite ones; ±∞ kept as they are."""
    values = np.unique(np.concatenate([null, alternative]))
    if values.size <= candidates:
        return values
    finite = values[np.isfinite(values)]
    thinned = np.quantile(finite, np.linspace(0.0, 1.0, candidates)) if finite.size else finite
    return np.unique(np.concatenate([thinned, values[~np.isfinite(values)]]))


def _check_runs(runs: object, name: str = "runs", minimum: int = 10) -> int:
    return check_int(name, runs, minimum)


class Audit(ABC):
    """One mechanism family's audit game: claim, worst-case pair, likelihood-ratio score.

    Subclasses set ``name``, ``mechanism``, ``method``, ``statistics`` (names of
    the candidate scores) and implement :meth:`claim` and :meth:`scores`.
    ``chunk`` bounds how many runs one call of :meth:`scores` produces
    (memory); the base class maps the chunks through :func:`audits.engine.map_chunks`
    with the audit's ``compute_engine`` (``"local"`` or ``"dask"``) and ``n_jobs``.
    """

    name: str = "audit"
    mechanism: str = ""
    method: Method = CLOPPER_PEARSON
    statistics: tuple[str, ...] = ("likelihood ratio",)
    chunk: int = 100_000
    compute_engine: str = "local"
    n_jobs: int = 1
    #: The constructor arguments, recorded by ``__new__`` (see ``__reduce__``).
    _recipe: tuple[tuple[object, ...], dict[str, object]]

    @abstractmethod
    def claim(self) -> Claim:
        """The privacy the mechanism claims for one run, read from its ledger receipt."""

    @abstractmethod
    def scores(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        """Scores of ``runs`` independent runs on ``D0`` (neighbour 0) or ``D1`` (neighbour 1).

        Shape ``(runs,)`` for one statistic or ``(runs, len(statistics))``;
        higher scores are evidence for ``D1``.
        """

    def __new__(cls, *args: object, **kwargs: object) -> Audit:
        audit = super().__new__(cls)
        audit._recipe = (args, kwargs)  # how to rebuild it in a worker (see __reduce__)
        return audit

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle the recipe, never the state (docs/engine.md, "what a task carries").

        An audit holds mechanisms charged to its own huge-budget ledger, and a
        ledger that has been charged must not be copied (two copies could each
        spend the same budget). A worker therefore rebuilds the audit from its
        constructor arguments, with fresh ledgers of its own, and gets back the
        engine settings set after construction (``chunk``, ``compute_engine``,
        ``n_jobs``, ``name``).
        """
        settings = {key: self.__dict__[key] for key in _SETTINGS if key in self.__dict__}
        return _rebuild, (type(self), *self._recipe, settings)

    def parameters(self) -> dict:
        """The audit's settings, recorded with its result."""
        return {}

    def planned_thresholds(self, claim: Claim, runs: int) -> list[tuple[int, float]]:
        """Tests (column, threshold) fixed from public information before any run (``runs`` per side); none by default.

        They join the held-out choice as candidates, all certified together
        with a Bonferroni correction (module docstring).
        """
        return []

    def ceiling(self, claim: Claim, runs: int, confidence: float) -> float | None:
        """The most any test of the audited pair can certify at ``runs`` per side, if known in closed form."""
        return None

    def sample(self, neighbour: int, runs: int, rng: np.random.Generator) -> np.ndarray:
        """:meth:`scores` in chunks of at most ``chunk`` runs, as a ``(runs, len(statistics))`` array.

        Several chunks each get their own generator spawned from ``rng``, so they
        are independent and :func:`audits.engine.map_chunks` may compute them
        anywhere (``compute_engine``, ``n_jobs``) with the same numbers. A single
        chunk has no parallelism to gain: it is computed here, on ``rng`` itself.
        """
        if neighbour not in (0, 1):
            raise ValueError(f"neighbour must be 0 or 1, got {neighbour!r}")
        sizes = [min(self.chunk, runs - start) for start in range(0, runs, self.chunk)]
        require_engine(self.compute_engine)
        if len(sizes) == 1:
            return self._chunk_scores(neighbour, (runs, rng))
        tasks = list(zip(sizes, rng.spawn(len(sizes)), strict=True))
        parts = map_chunks(functools.partial(self._chunk_scores, neighbour), tasks, engine=self.compute_engine,
                           n_jobs=self.n_jobs)
        return np.concatenate(parts)

    def _chunk_scores(self, neighbour: int, task: tuple[int, np.random.Generator]) -> np.ndarray:
        size, rng = task
        return check_scores(self.scores(neighbour, size, rng), size, len(self.statistics), self.name)

    def _bound(self, false_positives: int, runs_null: int, false_negatives: int, runs_alternative: int,
               delta: float, confidence: float) -> float:
        if self.method == GAUSSIAN_DP:
            return bounds.gdp_mu_lower_bound(false_positives, runs_null, false_negatives, runs_alternative,
                                             confidence=confidence)
        return bounds.epsilon_lower_bound(false_positives, runs_null, false_negatives, runs_alternative,
                                          delta=delta, confidence=confidence)

    def choose_threshold(self, null: np.ndarray, alternative: np.ndarray, delta: float,
                         confidence: float, candidates: int = 400) -> tuple[int, float]:
        """Statistic (column index) and threshold maximising the bound certified on held-out scores.

        Scoring candidates by their held-out *certified* bound (not by point
        estimates of the rates), at the stricter level α/50, penalises
        thresholds in thin tails, where held-out rates are noisy and the
        maximum over hundreds of candidates would otherwise chase noise
        (Nasr et al. 2023, §4: threshold from held-out runs). Ties in the
        held-out bound (all 0 when the held-out runs are few, as for the
        bandit) are broken by the point estimate of ε at smoothed rates. The
        level and the tie-break only affect which threshold is chosen, never
        the validity of the certified bound.
        """
        confidence = 1.0 - (1.0 - confidence) / 50
        best, choice = (-math.inf, -math.inf), (0, 0.0)
        for column in range(null.shape[1]):
            null_column, alternative_column = np.sort(null[:, column]), np.sort(alternative[:, column])
            values = _candidate_thresholds(null_column, alternative_column, candidates)
            false_positives = null_column.size - np.searchsorted(null_column, values, side="left")
            false_negatives = np.searchsorted(alternative_column, values, side="left")
            for value, a, b in zip(values, false_positives, false_negatives, strict=True):
                certified = self._bound(int(a), null_column.size, int(b), alternative_column.size, delta,
                                        confidence)
                # Ties (typically all 0 when the held-out runs are few) go to the better
                # point estimate, rates smoothed by ½ so that zero counts stay finite.
                estimate = bounds.epsilon_from_rates((a + 0.5) / (null_column.size + 1),
                                                     (b + 0.5) / (alternative_column.size + 1), delta)
                if (certified, estimate) > best:
                    best, choice = (certified, estimate), (column, float(value))
        return choice

    def observed_ceiling(self, null: np.ndarray, alternative: np.ndarray, runs: int, delta: float,
                         confidence: float, candidates: int = 200) -> float:
        """The most a test "score ≥ c" certifies at ``runs`` per side if the rates were the held-out ones.

        :func:`audits.bounds.ceiling_from_tails` at the empirical tails of the
        held-out scores, smoothed by ½ count (every statistic, up to ``candidates`` thresholds each):
        the ceiling as the data show it, not as the public parameters predict it
        (a bug that moves the output law moves this one, not :meth:`ceiling`).
        """
        best = 0.0
        for column in range(null.shape[1]):
            null_column, alternative_column = np.sort(null[:, column]), np.sort(alternative[:, column])
            values = _candidate_thresholds(null_column, alternative_column, candidates)
            # Rates smoothed by ½ (as in choose_threshold): a tail empty in the held-out runs is not
            # read as exactly 0, which would make the ceiling as large as the run count allows.
            above_null = null_column.size - np.searchsorted(null_column, values, side="left")
            below_alternative = np.searchsorted(alternative_column, values, side="left")
            null_tail = (above_null + 0.5) / (null_column.size + 1)
            alternative_tail = 1.0 - (below_alternative + 0.5) / (alternative_column.size + 1)
            bound, _ = bounds.ceiling_from_tails(null_tail, alternative_tail, runs, delta=delta, confidence=confidence)
            best = max(best, bound)
        return best

    def _certify(self, candidates: list[tuple[int, float]], null_all: np.ndarray, alternative_all: np.ndarray,
                 claim: Claim, level: float) -> tuple[float, int, float, int, int, float, float]:
        """The best candidate test on the main runs: (key, column, threshold, FP, FN, μ_LB, ε_CP), each at ``level``."""
        runs = null_all.shape[0]
        best: tuple[float, int, float, int, int, float, float] | None = None
        for column, threshold in candidates:
            null, alternative = null_all[:, column], alternative_all[:, column]
            false_positives = int(np.count_nonzero(null >= threshold))
            false_negatives = int(np.count_nonzero(alternative < threshold))
            mu_lb = bounds.gdp_mu_lower_bound(false_positives, runs, false_negatives, runs, confidence=level)
            eps_cp = bounds.epsilon_lower_bound(false_positives, runs, false_negatives, runs,
                                                delta=claim.delta, confidence=level)
            key = mu_lb if self.method == GAUSSIAN_DP else eps_cp
            if best is None or key > best[0]:
                best = (key, column, threshold, false_positives, false_negatives, mu_lb, eps_cp)
        assert best is not None  # candidates is never empty: the held-out choice is always one
        return best

    def run(self, runs: int = 100_000, seed: int = 0, *, holdout_runs: int | None = None,
            confidence: float = 0.95) -> AuditResult:
        """Play the audit: held-out runs pick a threshold, main runs certify the bound.

        The candidate tests are the held-out choice and any planned from public
        parameters (:meth:`planned_thresholds`), certified together (Bonferroni),
        so a bug that moves the output away from the public parameters is still
        tested where it shows (docs/audits.md, "Tests chosen where they have power").

        Parameters
        ----------
        runs : int
            Main runs per neighbour (≥ 10).
        seed : int
            Seed of the audit's generator; recorded with the result.
        holdout_runs : int, optional
            Runs per neighbour for choosing the threshold; default ``max(1000, runs // 5)``.
        confidence : float
            Probability that the certified bound is valid.
        """
        runs = _check_runs(runs)
        holdout_runs = max(1000, runs // 5) if holdout_runs is None else _check_runs(holdout_runs, "holdout_runs")
        seed = check_int("seed", seed, 0)
        confidence = bounds.check_confidence(confidence)
        start = time.perf_counter()
        claim = self.claim()
        if not isinstance(claim, Claim):
            raise TypeError(f"{self.name}: claim() must return an audits.Claim, got {type(claim).__name__}")
        holdout_rng, main_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(2))
        held_null = self.sample(0, holdout_runs, holdout_rng)
        held_alternative = self.sample(1, holdout_runs, holdout_rng)
        planned = [*self.planned_thresholds(claim, runs),
                   self.choose_threshold(held_null, held_alternative, claim.delta, confidence)]
        candidates = list(dict.fromkeys(planned))
        level = 1.0 - (1.0 - confidence) / len(candidates)
        null_all, alternative_all = self.sample(0, runs, main_rng), self.sample(1, runs, main_rng)
        _, column, threshold, false_positives, false_negatives, mu_lb, eps_cp = self._certify(
            candidates, null_all, alternative_all, claim, level)
        if self.method == GAUSSIAN_DP:
            if claim.mu is None:
                raise RuntimeError(f"{self.name}: the Gaussian-DP route needs a claimed mu")
            eps_lb = bounds.gdp_epsilon(mu_lb, claim.delta) if claim.delta > 0 else math.inf
            violated = mu_lb > claim.mu
        else:
            eps_lb = eps_cp
            violated = eps_cp > claim.epsilon
        return AuditResult(
            audit=self.name, mechanism=self.mechanism, method=self.method, statistic=self.statistics[column],
            claimed_epsilon=claim.epsilon, claimed_delta=claim.delta, claimed_cost=claim.cost,
            claimed_mu=claim.mu, ledger_epsilon=claim.ledger_epsilon,
            epsilon_lower_bound=eps_lb, epsilon_lower_bound_clopper_pearson=eps_cp, mu_lower_bound=mu_lb,
            runs=runs, holdout_runs=holdout_runs, threshold=threshold,
            false_positives=false_positives, false_negatives=false_negatives, confidence=confidence,
            verdict="violated" if violated else "consistent", seed=int(seed),
            seconds=time.perf_counter() - start, parameters=self.parameters(),
            scores_null=null_all[:, column], scores_alternative=alternative_all[:, column],
            candidates=len(candidates), ceiling=self.ceiling(claim, runs, confidence),
            observed_ceiling=self.observed_ceiling(held_null, held_alternative, runs, claim.delta, level),
        )
