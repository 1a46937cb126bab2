"""Shuffle-private projected gradient descent P_GD (Cheu, Joseph, Mao & Peng 2022; seed paper App. U).

Every user takes part in every iteration. In iteration t each user clips its own
per-sample gradient at the current iterate to l2 norm ``clip`` (L); the gradient sum
goes through the shuffled vector summation (:func:`mechanisms.shuffle.run_vector_summation`)
calibrated to ``(round_epsilon, round_delta)``; the server steps
``theta <- Pi_{||theta|| <= S}(theta - eta * g_hat)`` with ``g_hat`` the estimated mean
gradient, and outputs the average of the iterates at which gradients were taken.

Step size. The seed paper prints ``eta = 2S/(LT)`` (Lemma under App. F) and
``2S/(RST)`` (Sec. 5); neither gives a vanishing error bound. Projected subgradient
descent on a convex ``G``-Lipschitz objective over a set of diameter ``D`` with the
average iterate satisfies ``f(avg) - f* <= D^2/(2 eta T) + eta G^2/2`` (Bubeck 2015,
Thm. 3.2), minimised at ``eta = D/(G sqrt T)``; with ``D = 2S`` and ``G = L`` (clipped
gradients) this is ``eta = 2S/(L sqrt T)`` and the bound ``2SL/sqrt T``. That is the
default; ``lr=`` overrides it.

Privacy. Neighbours replace one user's sample. Each round's summation is
``(round_epsilon, round_delta)``-DP for every iterate: its noise is calibrated by the
exact shuffle accountant for inputs of l2 norm at most ``clip`` (the clipped gradients;
the l2-aware composition of :mod:`mechanisms.shuffle_vector_accountant`, input set
``"l2_ball"``, or the coordinate-wise ``"box"`` with ``inputs="box"``), so the pessimistic
PLD built from those parameters (dp-accounting ``from_privacy_parameters``: the pair that dominates every
(eps0, delta0)-DP mechanism) self-composed ``iterations`` times bounds the whole run,
also under the adaptive choice of iterates. The run is charged once, before any
randomness is drawn, as ``ApproxDP(eps_total, delta)`` with ``eps_total`` that PLD's
epsilon at the requested total ``delta`` (rounded up to 1e-9). Not advanced composition.

Exact composition (``noise_bits=`` instead of ``round_epsilon``/``round_delta``). Every
round's summation, whatever the iterate, is dominated by the same pair: the accountant's
dominating PLD of the summation of ``n`` inputs in the clip ball
(:func:`mechanisms.shuffle_vector_accountant.vector_sum_pld`). The adaptive composition of
mechanisms each dominated by a pair is dominated by the product of the pairs (Zhu, Dong &
Wang 2022, Thm. 10), so the ``iterations``-fold self-composition of that PLD bounds the run;
its epsilon at ``delta`` is charged (:func:`run_epsilon`). This composes the summation's own
privacy loss instead of the generic (eps0, delta0) pair, which for ~Gaussian rounds is far
looser: :func:`calibrate_run_noise_bits` finds the fewest bits for a run's (eps, delta).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from dp_accounting.pld import common as dp_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from accounting import ApproxDP, Receipt, convert
from accounting.costs import as_fraction
from accounting.validation import check_array, check_int, check_real
from mechanisms.base import Mechanism
from mechanisms.calibration_cache import cached_calibration
from mechanisms.optim.projection import BallProjection, MetricProjection
from mechanisms.release import Release, check_generator
from mechanisms.shuffle import run_vector_summation
from mechanisms.shuffle_vector_accountant import (
    INPUT_SHIFTS,
    calibrate_noise_bits,
    default_levels,
    level_shifts,
    vector_sum_pld,
)

__all__ = ["ShufflePGD", "calibrate_round_epsilon", "calibrate_run_noise_bits", "composed_epsilon", "run_epsilon"]

GradientFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]

#: PLD discretization used for the composition over rounds (pessimistic rounding: the
#: charged epsilon exceeds the exact one by less than ``iterations`` bins).
_PLD_INTERVAL = 1e-4
#: Margin below the target epsilon the calibrated run keeps (its charge is rounded up to 1e-9).
_CHARGE_MARGIN = 1e-8
#: Most rounds one run composes (the composed PLD grid grows linearly: 18 GiB measured at 1.84e7, so ~1 GiB here).
MAX_ITERATIONS = 10**6
#: Largest per-round epsilon accepted (e^eps must stay a finite float in the PLD).
_MAX_ROUND_EPSILON = 100.0
#: The accountant's input set of the clipped gradients, by ``ShufflePGD(inputs=...)``.
_INPUT_SETS = {"l2": "l2_ball", "box": "box"}
#: Where each ``average`` option starts averaging, as a function of the iteration count.
_FIRST_KEPT: dict[str, Callable[[int], int]] = {"all": lambda t: 0, "suffix": lambda t: t // 2, "last": lambda t: t}


def _iterations(value: object) -> int:
    """A round count the exact PLD composition can hold (its grid grows linearly: 18 GiB measured at 1.84e7 rounds)."""
    return check_int("iterations", value, 1, MAX_ITERATIONS,
                     why="the composed privacy-loss grid grows linearly with the rounds: 18 GiB at 1.84e7")


def _real(name: str, value: object, *, low: float, high: float = math.inf, high_open: bool = True) -> float:
    """A finite real in ``(low, high)`` (or ``(low, high]``)."""
    return check_real(name, value, low, high, low_open=True, high_open=high_open and high < math.inf)


def composed_epsilon(round_epsilon: float, round_delta: float, iterations: int, delta: float) -> float:
    """Epsilon at total ``delta`` of ``iterations`` adaptive rounds, each (round_epsilon, round_delta)-DP.

    dp-accounting's pessimistic PLD ``from_privacy_parameters`` self-composed
    ``iterations`` times. Raises ValueError if ``delta`` does not exceed the
    composed infinity mass ``1 - (1 - round_delta)^iterations``.
    """
    round_epsilon = _real("round_epsilon", round_epsilon, low=0.0, high=_MAX_ROUND_EPSILON, high_open=False)
    round_delta = _real("round_delta", round_delta, low=0.0, high=1.0)
    iterations = _iterations(iterations)
    delta = _real("delta", delta, low=0.0, high=1.0)
    floor = -math.expm1(iterations * math.log1p(-round_delta))
    if delta <= floor:
        raise ValueError(f"delta must exceed 1 - (1 - round_delta)^iterations = {floor:.3g}, got {delta!r}")
    pld = pld_lib.from_privacy_parameters(
        dp_common.DifferentialPrivacyParameters(round_epsilon, round_delta), value_discretization_interval=_PLD_INTERVAL
    )
    return float(pld.self_compose(iterations).get_epsilon_for_delta(delta))


def calibrate_round_epsilon(
    epsilon: float, delta: float, iterations: int, *, round_delta: float | None = None, tol: float = 1e-6
) -> float:
    """Largest per-round epsilon whose ``iterations``-fold composition meets (epsilon, delta).

    ``round_delta`` defaults to ``delta / (2 * iterations)``; bisection on the
    per-round epsilon, returning the lower end of the final bracket (so the
    composition is within budget).
    """
    epsilon = _real("epsilon", epsilon, low=0.0)
    delta = _real("delta", delta, low=0.0, high=1.0)
    iterations = _iterations(iterations)
    if round_delta is None:
        round_delta = delta / (2.0 * iterations)
    round_delta = _real("round_delta", round_delta, low=0.0, high=1.0)
    lo, hi = 0.0, min(epsilon, _MAX_ROUND_EPSILON)
    if composed_epsilon(hi, round_delta, iterations, delta) <= epsilon:
        return hi
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if mid > 0 and composed_epsilon(mid, round_delta, iterations, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    if lo == 0.0:
        raise ValueError("no per-round epsilon > 0 meets the target; raise epsilon or delta")
    return lo


def _run_pld(n: int, d: int, iterations: int, noise_bits: int, levels: int,
             input_set: str) -> pld_lib.PrivacyLossDistribution:
    """The ``iterations``-fold self-composition of one round's dominating PLD (module docstring)."""
    max_shift, l2_shift = INPUT_SHIFTS[input_set]
    pld = vector_sum_pld(n, noise_bits, levels, d, interval=_PLD_INTERVAL, max_shift=max_shift, l2_shift=l2_shift)
    return pld if iterations == 1 else pld.self_compose(iterations)


def run_epsilon(n: int, d: int, iterations: int, noise_bits: int, delta: float, *, levels: int | None = None,
                input_set: str = "l2_ball") -> float:
    """Epsilon at ``delta`` of ``iterations`` rounds of ``n`` summed ``d``-vectors with ``noise_bits`` bits each.

    Exact composition of the rounds' dominating PLD (module docstring), for inputs in
    ``input_set`` (:data:`mechanisms.shuffle_vector_accountant.INPUT_SHIFTS`); ``levels``
    defaults to ``max(ceil(2 sqrt n), d, 4)``.
    """
    n, d = check_int("n", n, 2), check_int("d", d)
    iterations, noise_bits = _iterations(iterations), check_int("noise_bits", noise_bits)
    delta = _real("delta", delta, low=0.0, high=1.0)
    if input_set not in INPUT_SHIFTS:
        raise ValueError(f"input_set must be one of {tuple(INPUT_SHIFTS)}, got {input_set!r}")
    levels = default_levels(n, d) if levels is None else check_int("levels", levels)
    return _run_epsilon(n, d, iterations, noise_bits, delta, levels, input_set)


@functools.lru_cache(maxsize=1024)
def _run_epsilon(n: int, d: int, iterations: int, noise_bits: int, delta: float, levels: int, input_set: str) -> float:
    """:func:`run_epsilon` on checked arguments, cached: every fit charges it, and a bandit's
    or an audit's fits repeat the same (n, d, T, bits, δ), where composing the PLD costs ~0.1 s."""
    return float(_run_pld(n, d, iterations, noise_bits, levels, input_set).get_epsilon_for_delta(delta))


@functools.lru_cache(maxsize=256)
def calibrate_run_noise_bits(n: int, d: int, iterations: int, epsilon: float, delta: float, *,
                             levels: int | None = None, input_set: str = "l2_ball") -> int:
    """Fewest fair noise bits per user and coordinate with :func:`run_epsilon` ``<= epsilon`` at ``delta``.

    The run's epsilon decreases in the bits (more independent noise: post-processing), so
    the bracket from the analytic-Gaussian guess (the T rounds' shifts ``K_i`` as one Gaussian
    of sensitivity ``||K|| sqrt T``, Balle & Wang 2018) is searched by bisection. Cached in the
    process and on disk (:mod:`mechanisms.calibration_cache`, verified on load by one
    :func:`run_epsilon` call).
    """
    epsilon = _real("epsilon", epsilon, low=0.0)
    levels = default_levels(check_int("n", n, 2), check_int("d", d)) if levels is None else levels
    if input_set not in INPUT_SHIFTS:
        raise ValueError(f"input_set must be one of {tuple(INPUT_SHIFTS)}, got {input_set!r}")
    max_shift, l2_shift = INPUT_SHIFTS[input_set]

    def meets(bits: int) -> bool:
        spent = run_epsilon(n, d, iterations, bits, delta, levels=levels, input_set=input_set)
        return spent <= epsilon - _CHARGE_MARGIN

    def search() -> int:
        return _search_run_bits(meets, n, d, iterations, epsilon, delta, levels, max_shift, l2_shift)

    arguments = {"n": n, "d": d, "iterations": iterations, "epsilon": epsilon, "delta": delta, "levels": levels,
                 "input_set": input_set, "margin": _CHARGE_MARGIN}
    return cached_calibration("shuffle_pgd_run_noise_bits", arguments, search, meets)  # verified on load by meets


def _search_run_bits(meets: Callable[[int], bool], n: int, d: int, iterations: int, epsilon: float, delta: float,
                     levels: int, max_shift: float, l2_shift: float | None) -> int:
    """The bracketing and bisection of :func:`calibrate_run_noise_bits`."""
    shifts = level_shifts(levels, d, max_shift=max_shift, l2_shift=l2_shift)
    sensitivity = math.sqrt(sum(k * k for k in shifts) * iterations)
    guess = max(1, math.ceil(4.0 * convert.analytic_gaussian_sigma(epsilon, delta, sensitivity) ** 2 / n))
    lo, hi = 0, guess
    while not meets(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > max(1, hi // 1000):  # 0.1% in bits is 0.05% in noise sd
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _check_finite_after_charge(X: np.ndarray, y: np.ndarray) -> None:
    """X and y are private: whether they are finite is checked once the run is charged (docs/mechanisms.md)."""
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("X and y must be finite (no NaN or infinity) (refused after the charge, which stays "
                         "spent: the check depends on the data)")


class ShufflePGD(Mechanism):
    """Shuffle-private projected gradient descent (P_GD) charged once per run.

    paper: App. U (P_GD of Cheu et al. 2022); Sec. 5 (used by Algorithm 1 for theta_hat_k).

    Parameters
    ----------
    account : accounting.Account
        Account in the ``"approx"`` currency; charged ``ApproxDP(eps_total, delta)``
        per :meth:`fit`, before any randomness is drawn.
    per_sample_gradient : callable
        ``per_sample_gradient(theta, X, y) -> (n, d)`` gradients of the per-sample
        loss (include any regulariser in it, e.g. ``lambda/(2n) ||theta||^2``). They
        are clipped here to l2 norm ``clip``: clipping is the documented mechanism.
    rng : numpy.random.Generator
        Source of all randomness.
    clip : float
        L > 0, the l2 clipping norm of each per-sample gradient.
    radius : float
        S > 0, the constraint set is the ball ``{||theta|| <= S}``.
    inputs : {"l2", "box"}
        How each round's summation is accounted: ``"l2"`` (default) for the clipped
        gradients' l2 ball, or ``"box"`` (every coordinate moving fully: the
        coordinate-wise composition, for comparison). Module docstring.
    relation : str
        Only ``"replace_one"`` (one user's sample replaced).
    """

    def __init__(
        self,
        account: Any,
        per_sample_gradient: GradientFn,
        rng: np.random.Generator,
        *,
        clip: float,
        radius: float,
        inputs: str = "l2",
        relation: str = "replace_one",
    ) -> None:
        if not callable(per_sample_gradient):
            raise TypeError("per_sample_gradient must be callable: (theta, X, y) -> (n, d) array")
        if relation != "replace_one":
            raise ValueError(f"relation must be 'replace_one', got {relation!r}")
        if inputs not in _INPUT_SETS:
            raise ValueError(f"inputs must be one of {tuple(_INPUT_SETS)}, got {inputs!r}")
        self.account = account
        self.per_sample_gradient = per_sample_gradient
        self.rng = check_generator(rng)
        self.clip = _real("clip", clip, low=0.0)
        self.radius = _real("radius", radius, low=0.0)
        self.projection = BallProjection(self.radius)
        self.inputs = inputs
        self.relation = relation

    def step_size(self, iterations: int) -> float:
        """Default step ``eta = 2S / (L sqrt(T))`` (module docstring: derivation)."""
        return 2.0 * self.radius / (self.clip * math.sqrt(check_int("iterations", iterations)))

    def round_noise_bits(self, n: int, d: int, round_epsilon: float, round_delta: float,
                         levels: int | None = None) -> int:
        """Fair noise bits per user and coordinate of one round's summation of ``n`` clipped ``d``-gradients.

        The exact accountant's calibration to ``(round_epsilon, round_delta)`` for this
        optimiser's input set; ``levels`` defaults to ``max(ceil(2 sqrt n), d, 4)``.
        """
        levels = default_levels(n, d) if levels is None else check_int("levels", levels)
        max_shift, l2_shift = INPUT_SHIFTS[_INPUT_SETS[self.inputs]]
        return calibrate_noise_bits(n, float(round_epsilon), float(round_delta), levels, coordinates=d,
                                    max_shift=max_shift, l2_shift=l2_shift)

    def round_noise_variance(self, n: int, d: int, round_epsilon: float, round_delta: float) -> float:
        """Bound on each coordinate's variance of one round's gradient sum: ``(L/g)^2 n (1 + b)/4``.

        Rounding (at most 1/4 per user) and ``b`` fair bits per user
        (:meth:`mechanisms.shuffle.ShuffleVectorSum.variance_bound`); public, from the calibration.
        """
        levels = default_levels(n, d)
        bits = self.round_noise_bits(n, d, round_epsilon, round_delta, levels)
        return (self.clip / levels) ** 2 * n * (1.0 + bits) / 4.0

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        *,
        iterations: int,
        delta: float,
        round_epsilon: float | None = None,
        round_delta: float | None = None,
        noise_bits: int | None = None,
        lr: float | None = None,
        theta0: np.ndarray | None = None,
        levels: int | None = None,
        method: str = "counts",
        partition: str | None = None,
        preconditioner: np.ndarray | None = None,
        average: str = "all",
    ) -> Release:
        """Run P_GD on ``(X, y)``; the average iterate as a :class:`~mechanisms.Release`.

        Parameters
        ----------
        X, y : numpy.ndarray
            Shapes ``(n, d)`` and ``(n,)``, finite; one sample per user, n >= 2.
        iterations : int
            T >= 1 rounds, every user in every round.
        delta : float
            Total delta of the run; the charged epsilon is computed at it.
        round_epsilon, round_delta : float
            Privacy of one round's vector summation (eps0 > 0, delta0 in (0, 1)); the run is
            charged their generic PLD composition. Give these or ``noise_bits``.
        noise_bits : int
            Fair noise bits per user and coordinate of every round; the run is charged the
            exact composition of the rounds' dominating PLD (:func:`run_epsilon`; module
            docstring), e.g. with the bits of :func:`calibrate_run_noise_bits`.
        lr, theta0 : optional
            Step size (default ``2S / (L sqrt(T))``) and start (inside the ball; default 0).
        levels : int, optional
            Rounding resolution of the summation; default ``max(ceil(2 sqrt n), d, 4)``.
        method : str
            ``"counts"`` or ``"messages"`` (see :mod:`mechanisms.shuffle`).
        partition : str, optional
            Passed to the charge: runs on disjoint users under different keys compose
            by max in the ledger.
        preconditioner : numpy.ndarray of shape (d, d), optional
            A public symmetric positive definite M (e.g. ``n`` times the inverse of a released
            design matrix): steps ``θ ← Π_M(θ − ηMĝ)``, projected in the M⁻¹-norm
            (:class:`~mechanisms.optim.MetricProjection`). Post-processing: privacy unchanged.
        average : {"all", "suffix", "last"}
            Output the average of all iterates at which gradients were taken (the subgradient
            method's guarantee, default), of the second half of them (linear convergence kept,
            the last half's noise averaged), or the last iterate.
        """
        X, y, theta = self._check_data(X, y, theta0)
        n, d = X.shape
        iterations = _iterations(iterations)
        eta = self.step_size(iterations) if lr is None else _real("lr", lr, low=0.0)
        levels = default_levels(n, d) if levels is None else check_int("levels", levels)
        if method not in ("counts", "messages"):
            raise ValueError(f"method must be 'counts' or 'messages', got {method!r}")
        if average not in _FIRST_KEPT:
            raise ValueError(f"average must be 'all', 'suffix' or 'last', got {average!r}")
        projection: BallProjection | MetricProjection = self.projection
        if preconditioner is not None:
            projection = MetricProjection(self.projection, preconditioner)
        metric = projection.M if isinstance(projection, MetricProjection) else None
        noise_bits, total_eps, how = self._privacy(n, d, iterations, levels, delta, round_epsilon, round_delta,
                                                   noise_bits)
        receipt = self._charge_run(total_eps, delta, partition,
                                   f"P_GD: {how}; n={n}, d={d}, levels={levels}, noise_bits={noise_bits}")
        _check_finite_after_charge(X, y)
        first_kept = _FIRST_KEPT[average](iterations)
        iterate_sum = np.zeros(d)
        for it in range(iterations):
            if it >= first_kept:
                iterate_sum += theta
            g_hat = run_vector_summation(self._clipped_gradients(theta, X, y), self.clip, levels, noise_bits,
                                         self.rng, method=method) / n
            theta = projection(theta - eta * (g_hat if metric is None else metric @ g_hat))
        return self._release(theta if average == "last" else iterate_sum / (iterations - first_kept), receipt)

    def _privacy(self, n: int, d: int, iterations: int, levels: int, delta: float, round_epsilon: float | None,
                 round_delta: float | None, noise_bits: int | None) -> tuple[int, float, str]:
        """The rounds' noise bits, the run's epsilon at ``delta`` and how it was composed (``fit``'s two modes)."""
        if noise_bits is None:
            if round_epsilon is None or round_delta is None:
                raise ValueError("give either round_epsilon and round_delta, or noise_bits")
            return (self.round_noise_bits(n, d, round_epsilon, round_delta, levels),
                    composed_epsilon(round_epsilon, round_delta, iterations, delta),
                    f"T={iterations} rounds at (eps0={round_epsilon}, delta0={round_delta}) composed by PLD")
        if round_epsilon is not None or round_delta is not None:
            raise ValueError("give either round_epsilon and round_delta, or noise_bits, not both")
        noise_bits = check_int("noise_bits", noise_bits)
        total_eps = run_epsilon(n, d, iterations, noise_bits, delta, levels=levels, input_set=_INPUT_SETS[self.inputs])
        how = f"T={iterations} rounds, the summation's dominating PLD composed exactly"
        if not math.isfinite(total_eps):  # nothing charged yet: the composed loss has no finite ε at this δ
            raise ValueError(f"delta={delta!r} is too small: the run has no finite epsilon at it ({how})")
        return noise_bits, total_eps, how

    def _check_data(self, X: np.ndarray, y: np.ndarray,
                    theta0: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(X, y, theta0)`` as float arrays of shapes (n, d), (n,), (d,); theta0 finite, inside the ball (public)."""
        X, y = check_array("X", X), check_array("y", y)
        if X.ndim != 2 or X.shape[0] < 2:
            raise ValueError(f"X must have shape (n, d) with n >= 2, got {X.shape}")
        n, d = X.shape
        if y.shape != (n,):
            raise ValueError(f"y must have shape ({n},), got {y.shape}")
        theta = np.zeros(d) if theta0 is None else np.asarray(theta0, dtype=float).copy()
        if theta.shape != (d,) or not np.all(np.isfinite(theta)):
            raise ValueError(f"theta0 must be a finite vector of shape ({d},)")
        if np.linalg.norm(theta) > self.radius * (1 + 1e-12):
            raise ValueError(f"theta0 must lie in the ball of radius {self.radius}")
        return X, y, theta

    def _charge_run(self, total_eps: float, delta: float, partition: str | None, note: str) -> Receipt:
        """Charge ``ApproxDP(eps_total, delta)`` of the whole run, rounded up to 1e-9 (raises before any draw)."""
        return self._charge(
            ApproxDP(Fraction(math.ceil(total_eps * 1e9) + 1, 10**9), as_fraction(delta, "delta")),
            mechanism="ShufflePGD",
            relation=self.relation,
            partition=partition,
            note=f"{note}, clip={self.clip}, radius={self.radius}, inputs={_INPUT_SETS[self.inputs]}",
        )

    def _clipped_gradients(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-sample gradients at ``theta``, clipped to l2 norm ``clip`` (and each coordinate to [-L, L])."""
        n, d = X.shape
        grads = np.asarray(self.per_sample_gradient(theta, X, y), dtype=float)
        if grads.shape != (n, d) or not np.all(np.isfinite(grads)):
            raise ValueError(f"per_sample_gradient must return a finite array of shape ({n}, {d}), got {grads.shape}")
        norms = np.linalg.norm(grads, axis=1, keepdims=True)
        clipped = grads * np.minimum(1.0, self.clip / np.maximum(norms, 1e-300))
        return np.asarray(np.clip(clipped, -self.clip, self.clip))  # guards float overshoot of |coord| <= ||g|| <= L
