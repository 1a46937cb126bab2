"""Top Two algorithms for fixed-confidence best-arm identification, simulated in lockstep.

:class:`DPTopTwo` (DP-TT, Jourdan & Azize 2025, §5 and Alg. 1) and :class:`EBTopTwo`
(EB-TCI, non-private; Jourdan et al. 2022) share one engine, :class:`TopTwoEngine`,
with the AdaP-TT baselines of :mod:`dpglm.bai.adap_tt` (re-exported here).

Sampling rule (every step): leader B = empirical best of the (clipped) private
means with random tie-breaking (AdaP-TT: a private UCB index); TCI challenger C = argmin_{a≠B} cost(B, a, μ̃,
N) + log N_a with the true counts N; β-tracking: pull B if N^B_B ≤ β·L_B
(L_B: rounds B was leader, this one included), else C (paper Alg. 1 lines 5–9).
``beta="ids"``: information-directed selection instead of the fixed β (You et al.
2023): the leader's share β of the pair (B, C) is its part of the transport cost at
the minimiser (:func:`~dpglm.bai.divergences.ids_leader_share`, with the costs and
counts of the challenger keys), and B is pulled iff N^B_B ≤ the sum of β over the
rounds B led (:func:`~dpglm.bai.block_engine.credit_pulls`); ``docs/bai-threshold.md``, "IDS".

Simulation (a documented speed device, not part of the algorithm;
:mod:`dpglm.bai.block_engine`). Each run advances by *blocks* between two
refreshes of its estimator: the leader pulls follow from the tracking rule in
closed form, the challenger pulls are assigned by merging the TCI keys
linearised in N_a at the block start (slope ∂cost/∂w_a = d⁺_ε(μ̃_a, x*) by the
envelope theorem, plus 1/N_a), and a block ends exactly when some arm reaches
its next refresh point, or after at most ``block_fraction``·t steps. The
challenger split inside a block is thus an approximation of the per-step TCI
argmin (exact as ``block_fraction`` → 0 up to the N_B drift inside a block);
correctness (δ) and privacy (ε) do not depend on the sampling rule at all.

Forced exploration (``forced_exploration``): while the least pulled arm has
N_a below a floor f(t), it is pulled first (checked at block starts).
``True``/``"sqrt"``: f(t) = √t − K/2 (Garivier & Kaufmann 2016). ``"log-linear"``:
f(t) = t/(K(1 + log t)), DP-TT's default. This rate is matched to the refresh schedule. TCI
explores an arm whose private estimate came out badly low only at a log rate,
while the estimate refreshes only when the count doubles. A best arm stuck
below a tied sub-optimal one (μ1) then needs Θ(t) fresh pulls to be seen
again, and √t is far too slow for that (runs cut at 1e8 steps at small ε).
f(t) = o(t) keeps DP-TT's asymptotic guarantee. Once the allocation is
close to w*_{ε,β}, every arm has N_a ≥ w*_a t/2 > f(t) from some t on, so
the forcing stops acting. Before that, it only adds pulls to under-sampled
arms, which the sufficient-exploration step of the Top Two analysis allows.
``challenger_counts="phase"`` (DP-TT's default) computes the TCI keys with the
phase counts Ñ instead of N (keys then change only at refreshes; ``"true"`` is the
paper's rule); ``docs/bai-threshold.md``, "Sampling rule", says what this changes
and what it does not.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from accounting import Ledger
from accounting.validation import check_generator, check_positive, check_probability, check_real
from dpglm._validation import check_max_steps, check_n_runs, real_array
from dpglm.bai.block_engine import Block, exact_block, force_exploration, merged_ranks, private_block, tracking_pulls
from dpglm.bai.divergences import _d_plus, _ids_leader_share, _transport_cost
from dpglm.bai.estimators import (
    ExactEstimator,
    MeanEstimator,
    NoiselessBatchEstimator,
    PrivateEstimator,
    WeightedEstimator,
)
from dpglm.bai.mixture_threshold import ESTIMATORS, MixtureThreshold, discrete_laplace_log_mgf, laplace_log_mgf
from dpglm.bai.session import BAIResult, TopTwoSession, _Runs, check_session_ledger
from dpglm.bai.thresholds import ChernoffThreshold, GammaThreshold, HeuristicThreshold, LaplaceTailThreshold
from mechanisms.noise import laplace_scale_for

__all__ = ["BAIResult", "DPTopTwo", "EBTopTwo", "TopTwoEngine", "TopTwoSession", "check_mu",
           "eta_for_epsilon", "tracking_pulls"]

_merged_ranks = merged_ranks  # the former private name, kept for callers and tests


def eta_for_epsilon(epsilon: float, estimator: str = "cumulative") -> float:
    """DP-TT's default batch growth η(ε) = min(η₀, max(1/4, 2/ε)): public, a function of ε only.

    η₀ = 1 for the cumulative estimator, 3/4 for the weighted one, whose extra batches
    cost almost nothing at small ε (old batches weigh little): 8 runs at ε = 1e-3, medians,
    η = 0.75 / 1: μ1 4.15e6 / 4.29e6, μ2 9.6e5 / 1.09e6, (0.75, 0.7, …) 5.2e6 / 6.7e6,
    (0.75, 0.71875, …) 3.2e6 / 3.0e6 (docs/bai-threshold.md, "Weighted").

    With the data-dependent threshold (docs/bai-threshold.md) the noise costs almost
    nothing at large ε for means inside (0, 1), so finer batches win there: they
    test the stopping rule more often (refreshes at ⌈1.25^j⌉ instead of 2^j). At
    small ε every batch adds a Laplace term in nats, so η stays 1. Measured on μ1 / μ2
    (30 runs, medians): ε = 46, η = 1 → 1.28e4 / 4.1e3, η = 1/4 → 9.1e3 / 2.2e3.
    The asymptotic bound of DP-TT, 2(1 + η)T*_{ε,β}, improves from 4 T* to 2.5 T* as well.
    """
    return float(min(0.75 if estimator == "weighted" else 1.0, max(0.25, 2.0 / float(epsilon))))


def check_mu(mu: ArrayLike) -> np.ndarray:
    """The Bernoulli means of an instance: a 1-D array of ≥ 2 values in [0, 1] with a unique best arm."""
    mu = real_array("mu", mu)
    if mu.ndim != 1:
        raise ValueError(f"mu must be a 1-D array of >= 2 Bernoulli means in [0, 1], got shape {mu.shape}")
    if mu.size < 2 or np.any(~((mu >= 0) & (mu <= 1))):
        raise ValueError(f"mu must hold >= 2 Bernoulli means in [0, 1], got {mu!r}")
    if np.sum(mu == mu.max()) > 1:
        raise ValueError("mu must have a unique best arm")
    return mu


_check_mu = check_mu  # the former private name (dpglm.bai.successive_elimination, tests)


def _check_epsilon(epsilon: object) -> float:
    """ε in (0, ∞]: ∞ is the non-private limit (EB-TCI's costs)."""
    if isinstance(epsilon, (float, np.floating)) and epsilon == math.inf:
        return math.inf
    return check_positive("epsilon", epsilon)


def _check_forced_exploration(value: object) -> str | None:
    rule = {False: None, True: "sqrt"}[value] if isinstance(value, bool) else value
    if rule not in (None, "sqrt", "log-linear"):
        raise ValueError(f"forced_exploration must be False, True ('sqrt') or 'log-linear', got {value!r}")
    return None if rule is None else str(rule)


def _check_beta(beta: object) -> float | str:
    """β: a probability (fixed-β tracking) or ``"ids"`` (information-directed selection)."""
    if isinstance(beta, str) and beta == "ids":
        return "ids"
    if isinstance(beta, str):
        raise ValueError(f"beta must be a probability in [0, 1] or 'ids', got {beta!r}")
    return check_probability("beta", beta)


def _check_eta(eta: object, epsilon: float, estimator: str = "cumulative") -> float:
    if eta == "auto":
        return eta_for_epsilon(epsilon, estimator)
    if not (isinstance(eta, (int, float, np.floating)) and 0 < eta < np.inf):
        raise ValueError(f"eta must be a positive float or 'auto', got {eta!r}")
    return float(eta)


class TopTwoEngine:
    """Shared lockstep engine; subclasses set the estimator, costs and stopping rule."""

    private = True
    forget = False
    #: "provable" = "mixture" (time-uniform pair threshold, the default) for DP-TT; "phase-union" the
    #: per-arm union over phases; "gamma" its closed form; "heuristic" unproven (figure comparison)
    THRESHOLDS: tuple[str, ...] = ("provable", "mixture", "phase-union", "gamma", "heuristic")

    def __init__(
        self,
        mu: ArrayLike,
        epsilon: float,
        delta: float,
        *,
        beta: float | str = 0.5,
        eta: float | str = 1.0,
        threshold: str = "provable",
        block_fraction: float = 1 / 32,
        forced_exploration: bool | str = False,
        challenger_counts: str = "true",
        estimator: str = "cumulative",
    ) -> None:
        self.mu = check_mu(mu)
        if estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
        self.estimator = estimator
        self.forced_exploration = _check_forced_exploration(forced_exploration)
        if challenger_counts not in ("true", "phase"):
            raise ValueError(f"challenger_counts must be 'true' or 'phase', got {challenger_counts!r}")
        self.challenger_counts = challenger_counts
        self.epsilon = _check_epsilon(epsilon)
        self.delta = check_probability("delta", delta)
        self.beta = _check_beta(beta)
        self.block_fraction = check_real("block_fraction", block_fraction, 0.0, 1.0, low_open=True)
        if threshold not in self.THRESHOLDS:
            raise ValueError(f"threshold must be one of {self.THRESHOLDS}, got {threshold!r}")
        self.eta = _check_eta(eta, self.epsilon, self.estimator)
        self.threshold: Any = self._build_threshold(threshold)

    def _build_threshold(self, name: str) -> Any:
        """The stopping threshold named ``name`` (docs/bai-threshold.md); overridden by AdaP-TT."""
        k = self.mu.size
        if name in ("provable", "mixture") and self.private and not self.forget:
            if not np.isfinite(self.epsilon):  # no noise: the same mixture, λ unbounded (docs: "ε = ∞")
                return MixtureThreshold(k, self.delta, math.inf, self.eta, estimator=self.estimator)
            # the noise actually drawn: GeometricBatchMean's Laplace scale b ≥ 1/ε (κ = εb);
            # replaced at run() by the lattice's discrete Laplace (_match_threshold_to_noise)
            kappa = self.epsilon * laplace_scale_for(Fraction(repr(self.epsilon)), 1.0)
            return MixtureThreshold(k, self.delta, self.epsilon, self.eta, noise_log_mgf=laplace_log_mgf(kappa),
                                    estimator=self.estimator)
        return {"provable": LaplaceTailThreshold, "mixture": LaplaceTailThreshold,
                "phase-union": LaplaceTailThreshold, "gamma": GammaThreshold,
                "heuristic": HeuristicThreshold}[name](k, self.delta)

    # -- sampling and stopping rules (overridden by AdaP-TT) ---------------------------
    def _challenger_cost(self, m_lead: np.ndarray, m: np.ndarray, n_lead: np.ndarray,
                         n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """TCI cost C*_ε(B, a, μ̃, N) and its derivative in N_a (envelope theorem)."""
        cost, x = _transport_cost(m_lead, m, n_lead, n, self.epsilon, return_argmin=True)
        return cost, _d_plus(m, x, np.asarray(self.epsilon))

    def _challenger_keys(self, m: np.ndarray, n: np.ndarray, lead: np.ndarray,
                         t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-arm challenger key (argmin wins) and its slope in N_a: TCI, cost + log N_a."""
        i = np.arange(lead.size)
        cost, slope = self._challenger_cost(m[i, lead][:, None], m, n[i, lead][:, None], n)
        return cost + np.log(n), slope + 1.0 / n

    def _leaders(self, est: Any, rows: np.ndarray, best: np.ndarray) -> np.ndarray:
        """Sampling leader B: the empirical best ã (paper Alg. 1, line 4)."""
        return best[rows]

    def _should_stop(self, est: Any, rows: np.ndarray, lead: np.ndarray) -> np.ndarray:
        """GLR: C*_ε(ã, a, μ̃, Ñ) > c(ã, a) for every a ≠ ã (paper §4; docs/bai-threshold.md)."""
        m = est.means()[rows]
        nt = est.phase_counts[rows].astype(float)
        i = np.arange(len(rows))
        z = _transport_cost(m[i, lead][:, None], m, nt[i, lead][:, None], nt, self.epsilon)
        if getattr(self.threshold, "data_dependent", False):  # c(k_ã, k_a; μ̃), time-uniform
            # c ≥ log((K − 1)/δ) − 2·f_step since Ĝ(F) ≤ F (docs/bai-threshold.md): rows with some
            # z below that cannot stop, so only the others need the threshold (a speed device)
            z_other = np.where(np.arange(m.shape[1])[None, :] == lead[:, None], np.inf, z)
            near = np.nonzero(np.all(z_other > self.threshold.level - 1.0, axis=1))[0]
            margin = np.full(z.shape, -np.inf)
            if near.size:
                k = est.phases[rows][near]
                c = self.threshold.pair_data(k[np.arange(near.size), lead[near]], m[near, lead[near]], k, m[near],
                                             lead[near])
                margin[near] = z[near] - c
        elif getattr(self.threshold, "pairwise", False):
            k = est.phases[rows]
            margin = z - self.threshold(k[i, lead][:, None], k)
        else:
            c = self.threshold(est.phases[rows], nt)
            margin = z - c - c[i, lead][:, None]
        margin[i, lead] = np.inf
        return np.all(margin > 0, axis=1)

    # -- engine ---------------------------------------------------------------------------
    def run(self, n_runs: int, rng: np.random.Generator, *, max_steps: int = 10**8) -> BAIResult:
        """Simulate ``n_runs`` independent runs in lockstep (each with its own ledger).

        ``start(n_runs, rng, max_steps=max_steps).advance().result()`` (:mod:`dpglm.bai.session`).
        """
        return self.start(n_runs, rng, max_steps=max_steps).advance().result()

    def start(self, n_runs: int, rng: np.random.Generator, *, max_steps: int = 10**8,
              ledger: Ledger | None = None) -> TopTwoSession:
        """``n_runs`` runs pulled once per arm, to be advanced block by block (:class:`TopTwoSession`).

        ``ledger``: None (each run charges its own in-memory pure-ε ledger), or, for one run
        of a noisy engine, the pure-ε :class:`accounting.Ledger` it charges; on a journal,
        the session can then be checkpointed (docs/service.md, "DP-TT").
        """
        check_generator(rng)
        n_runs = check_n_runs(n_runs, self.mu.size)
        max_steps = check_max_steps(max_steps, self.mu.size)
        return TopTwoSession(self, n_runs, rng, max_steps, check_session_ledger(ledger, n_runs, self))

    def _estimator(self, n_runs: int, n_arms: int, noise_rng: np.random.Generator,
                   ledger: Ledger | None = None) -> MeanEstimator:
        """Geometric batches with Laplace noise (ε = ∞: without), optionally re-weighted; or exact means.

        ``ledger``: the one run's ledger (:meth:`start`); None: a new pure-ε ledger per run.
        """
        if not self.private:
            return ExactEstimator(n_runs, n_arms)
        inner: MeanEstimator = (NoiselessBatchEstimator(n_runs, n_arms, eta=self.eta) if not np.isfinite(self.epsilon)
                                else PrivateEstimator(n_runs, n_arms, self.epsilon, noise_rng, eta=self.eta,
                                                      forget=self.forget, ledger=ledger))
        return WeightedEstimator(inner, self.epsilon) if self.estimator == "weighted" else inner

    def _key_counts(self, est: MeanEstimator, runs: _Runs, rows: np.ndarray) -> np.ndarray:
        """The counts the challenger keys use: the phase counts Ñ (≥ 1) or the true counts N."""
        if self.challenger_counts == "phase":
            return np.maximum(est.phase_counts[rows], 1)
        return runs.pulls[rows]

    def _sampling_keys(self, est: MeanEstimator, runs: _Runs, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Challenger keys and their (strictly positive) slopes in N_a; the leader's key is +inf."""
        lead = runs.leader[rows]
        m = est.means()[rows]
        keys, slopes = self._challenger_keys(m, self._key_counts(est, runs, rows), lead, runs.t[rows])
        if self.challenger_counts == "phase":  # keys on Ñ: constant between refreshes
            slopes = np.zeros_like(slopes)
        # keys must grow visibly per pull for the merge: a key that does not grow (or
        # shrinks: AdaP-TT's challenger when μ̃_a > μ̃_B) gets a slope just above its ulp
        slopes = np.maximum(slopes, 1e-12 * np.maximum(1.0, np.abs(np.where(np.isfinite(keys), keys, 1.0))))
        keys[np.arange(rows.size), lead] = np.inf
        return keys, slopes

    def _plan_block(self, est: MeanEstimator, runs: _Runs, rows: np.ndarray, max_steps: int) -> Block:
        """The pulls of every active run until its next refresh (block_engine), forced exploration applied."""
        keys, slopes = self._sampling_keys(est, runs, rows)
        lead = runs.leader[rows]
        n_lead, l_lead = runs.leader_pulls[rows, lead], runs.leader_rounds[rows, lead]
        remaining = est.next_refresh[rows] - runs.pulls[rows]  # ≥ 1 for every arm
        t = runs.t[rows]
        budget = np.minimum(np.maximum(1, (self.block_fraction * t).astype(np.int64)), max_steps - t)
        budget = np.maximum(budget, 1)
        beta: float | np.ndarray = self.beta if isinstance(self.beta, float) else self._ids_beta(est, runs, rows, keys)
        credit = None if isinstance(self.beta, float) else runs.beta_credit[rows, lead]
        if est.private:
            block = private_block(keys, slopes, remaining, lead, budget, n_lead, l_lead, beta, credit)
        else:  # every pull refreshes: one-step blocks, plain TCI argmin
            block = exact_block(keys, lead, n_lead, l_lead, beta, credit)
        if self.forced_exploration:
            block = force_exploration(block, runs.pulls[rows], remaining, t, budget, self.forced_exploration)
        if np.any(block.pulls.sum(axis=1) != block.length):
            raise RuntimeError("block split does not add up; please report this bug")
        return block

    def _ids_beta(self, est: MeanEstimator, runs: _Runs, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """IDS share of each row's leader B against its challenger C = argmin of the keys at the block start.

        β = N_B d⁻_ε(μ̃_B, x*) / (N_B d⁻_ε(μ̃_B, x*) + N_C d⁺_ε(μ̃_C, x*)), x* the minimiser of
        C*_ε(B, C, μ̃, N), with the challenger keys' own costs and counts (You et al. 2023;
        ``docs/bai-threshold.md``, "IDS"). With the phase counts Ñ (DP-TT's default) the keys,
        hence C and β, are constant within a block; with the true counts this is C at the block start.
        """
        i = np.arange(rows.size)
        lead, challenger = runs.leader[rows], np.argmin(keys, axis=1)
        m, n = est.means()[rows], self._key_counts(est, runs, rows).astype(float)
        return np.asarray(_ids_leader_share(m[i, lead], m[i, challenger], n[i, lead], n[i, challenger],
                                            self.epsilon), dtype=float)

    @staticmethod
    def _advance(runs: _Runs, rows: np.ndarray, block: Block) -> None:
        lead = runs.leader[rows]
        runs.pulls[rows] += block.pulls
        runs.leader_pulls[rows, lead] += block.leader_pulls
        runs.leader_rounds[rows, lead] += block.length
        runs.beta_credit[rows, lead] += block.beta * block.length
        runs.t[rows] += block.length

    def _completed_batches(self, est: MeanEstimator, runs: _Runs, rows: np.ndarray,
                           env_rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Counts and Binomial reward sums of the batches the block completed (zero elsewhere)."""
        n_runs, n_arms = runs.pulls.shape
        due = runs.pulls[rows] == est.next_refresh[rows]
        batch = np.zeros((n_runs, n_arms), dtype=np.int64)
        batch[rows] = np.where(due, runs.pulls[rows] - est.counts[rows], 0)
        sums = np.zeros((n_runs, n_arms))
        sums[rows] = env_rng.binomial(batch[rows], self.mu).astype(float)
        return batch, sums

    def _match_threshold_to_noise(self, est: MeanEstimator) -> None:
        """The mixture threshold must use the noise the estimator actually draws (docs/bai-threshold.md).

        In order: a mechanism's own ``noise_log_mgf``; the discrete Laplace of its
        lattice (grid g, scale t in grid units: κ = εgt, :func:`discrete_laplace_log_mgf`);
        else continuous Laplace with κ = ε·``scale``.
        """
        mech = getattr(est, "mech", None)
        if not isinstance(self.threshold, MixtureThreshold) or mech is None:
            return
        phi = getattr(mech, "noise_log_mgf", None)
        lattice = getattr(mech, "_lattice", None)
        if phi is None and lattice is not None and hasattr(lattice, "scale_units"):
            t = int(lattice.scale_units)
            phi = discrete_laplace_log_mgf(t, self.epsilon * float(lattice.grid) * t)
        elif phi is None:
            phi = laplace_log_mgf(self.epsilon * float(mech.scale))
        self.threshold = MixtureThreshold(self.mu.size, self.delta, self.epsilon, self.eta, noise_log_mgf=phi,
                                          estimator=self.estimator)

    def _new_leaders(self, est: MeanEstimator, rows: np.ndarray, runs: _Runs, tie_rng: np.random.Generator) -> None:
        """ã: empirical best of the clipped private means, ties broken uniformly (paper §5); then B."""
        m = est.means()[rows]
        top = m == m.max(axis=1, keepdims=True)
        runs.best[rows] = np.argmax(np.where(top, 1.0 + tie_rng.random(m.shape), 0.0), axis=1)
        runs.leader[rows] = self._leaders(est, rows, runs.best)

    def _candidates(self, est: MeanEstimator, rows: np.ndarray, runs: _Runs) -> np.ndarray:
        """The arm the stopping rule tests: the empirical best ã (paper §4); AdaP-TT may test its UCB leader."""
        return runs.best[rows]

    def _check(self, est: MeanEstimator, rows: np.ndarray, runs: _Runs) -> np.ndarray:
        """Apply the stopping rule to ``rows``; the recommendation is ã. Returns the rows still running."""
        stop = self._should_stop(est, rows, self._candidates(est, rows, runs))
        done = rows[stop]
        runs.tau[done] = runs.t[done]
        runs.completed[done] = est.counts[done].sum(axis=1)
        runs.recommendation[done] = runs.best[done]
        runs.stopped[done] = True
        return rows[~stop]


_TopTwo = TopTwoEngine  # the former private name


class DPTopTwo(TopTwoEngine):
    """DP-TT: ε-global-DP Top Two with the GLR stopping rule (Jourdan & Azize 2025, Alg. 1).

    Geometric-batch Laplace estimator (cumulative; :class:`mechanisms.geometric.GeometricBatchMean`),
    EB leader, TCI challenger with C*_ε and true counts, β-tracking, GLR stopping
    with phase counts Ñ re-solved only at refreshes. ``threshold="provable"``
    (default) is the time-uniform pair threshold
    :class:`~dpglm.bai.mixture_threshold.MixtureThreshold` (``docs/bai-threshold.md``);
    ``"phase-union"`` the former per-arm union over phases
    (:class:`~dpglm.bai.thresholds.LaplaceTailThreshold`), ``"gamma"`` its looser
    closed form; ``"heuristic"`` is :class:`~dpglm.bai.thresholds.HeuristicThreshold`
    (figure comparison only). Each run holds a pure-ε :class:`accounting.Ledger`;
    its report shows ε in total. Forced exploration
    defaults to ``"log-linear"`` (module docstring), η to :func:`eta_for_epsilon` (``"auto"``),
    the challenger's counts to the phase counts Ñ (``challenger_counts="phase"``; the
    paper's true counts N: ``"true"``; ``docs/bai-threshold.md``, "Sampling rule").
    ``estimator="weighted"`` (default) weighs batch j's released sum by the public
    w_j = m_j/(m_j + 8/ε²) (:class:`~dpglm.bai.estimators.WeightedEstimator`, same releases,
    same privacy, its own threshold: ``docs/bai-threshold.md``, "Weighted"); ``"cumulative"``
    is the paper's estimator. ε = ∞ is allowed: the same batches without noise or ledger
    (``docs/bai-threshold.md``, "ε = ∞"), not EB-TCI.

    ``beta``: the paper's fixed leader share (default 1/2), or ``"ids"``: information-directed
    selection (You et al. 2023), the leader's share of the pair's transport cost at its
    minimiser, tracked by a β-sum (module docstring; ``docs/bai-threshold.md``, "IDS").
    Privacy is unchanged (the share reads released means and public counts:
    post-processing); δ-correctness is unchanged (the stopping threshold is time-uniform and
    holds for any sampling rule, ``docs/bai-threshold.md``, "Theorem"). IDS's asymptotic
    optimality is proven for Gaussian Top Two (You et al.), not for this private setting.
    """

    def __init__(self, mu: ArrayLike, epsilon: float, delta: float, *, forced_exploration: bool | str = "log-linear",
                 eta: float | str = "auto", challenger_counts: str = "phase", estimator: str = "weighted",
                 **kwargs: Any) -> None:
        super().__init__(mu, epsilon, delta, forced_exploration=forced_exploration, eta=eta,
                         challenger_counts=challenger_counts, estimator=estimator, **kwargs)


class EBTopTwo(TopTwoEngine):
    """EB-TCI: the non-private Top Two (Jourdan et al. 2022) with the kl GLR stopping rule.

    Means are exact empirical means updated every pull; costs use ε = ∞ (kl).
    The default threshold is the heuristic log((1 + log n)/δ) split over the two arms
    (Jourdan et al. 2022 experiments); ``threshold="provable"`` is
    :class:`~dpglm.bai.thresholds.ChernoffThreshold`; ``threshold="dp-tt"`` is DP-TT's
    pair mixture at ε = ∞ with every count a phase
    (:class:`~dpglm.bai.mixture_threshold.MixtureThreshold`, ``schedule="every-count"``):
    the same threshold family as provable DP-TT at ε = ∞, without its phase lag.
    """

    private = False
    THRESHOLDS = (*TopTwoEngine.THRESHOLDS, "dp-tt")

    def __init__(self, mu: ArrayLike, delta: float, *, beta: float = 0.5, threshold: str = "heuristic") -> None:
        super().__init__(mu, np.inf, delta, beta=beta, threshold=threshold, block_fraction=1.0)

    def _build_threshold(self, name: str) -> Any:
        if name == "provable":  # no Laplace noise; the estimate refreshes at every count
            return ChernoffThreshold(self.mu.size, self.delta)
        if name == "dp-tt":
            return MixtureThreshold(self.mu.size, self.delta, math.inf, schedule="every-count")
        return super()._build_threshold(name)


def __getattr__(name: str) -> Any:
    """AdaP-TT and AdaP-TT⋆ live in :mod:`dpglm.bai.adap_tt`; importable from here as before."""
    if name in ("AdaPTT", "AdaPTTStar"):
        from dpglm.bai import adap_tt

        return getattr(adap_tt, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
