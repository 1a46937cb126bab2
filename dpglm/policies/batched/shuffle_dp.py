"""Paper Algorithm 1, the shuffle-DP batched GLM bandit: the batched loop on shuffle-private ingredients.

The budget is split in halves (covariance, parameter estimation; paper §5 "Protocol
instantiation") and every batch charges under its own partition key: the batches
hold disjoint users, so they compose in parallel (``docs/shuffle-accounting.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from accounting import Account, ApproxDP, Ledger
from accounting.costs import as_fraction
from accounting.validation import check_generator, check_int, check_positive, check_probability, check_size
from dpglm._validation import check_dimension, check_horizon_left, check_round_order
from dpglm.glm import GLMFamily, get_family, kappa_support
from dpglm.policies.batched.loop import BatchedGLMBandit
from dpglm.policies.batched.parameters import BatchedParameters
from dpglm.policies.batched.presets import batched_parameters
from dpglm.policies.batched.private import ShuffledDesignSum, ShufflePGDEstimator
from dpglm.policies.batched.protocols import BatchEstimator
from dpglm.policies.batched.schedule import max_batches
from dpglm.policies.invalid import InvalidUsers, check_invalid, clip_arm_sets

__all__ = ["PUBLISHED_COUNTS", "EstimatorFactory", "ShuffleDPGLMBandit"]

PUBLISHED_COUNTS = ("granted", "refused")
"""The loop's counts ``diagnostics()`` publishes: batch statistics granted or refused by the ledger.

Both follow from the public schedule and budget (a batch charges a fixed cost under its
own key). ``planned_rounds`` / ``unplanned_rounds`` say whether a round's arm set was the
one planned for it, which a clipped or skipped user changes: not published
(docs/service.md, "What a run publishes")."""

#: Builds the parameter estimator on the ``parameter`` account: ``(family, params, account, rng)``.
EstimatorFactory = Callable[[GLMFamily, BatchedParameters, Account, np.random.Generator], BatchEstimator]


def _default_estimator(family: GLMFamily, params: BatchedParameters, account: Account,
                       rng: np.random.Generator) -> BatchEstimator:
    """:class:`ShufflePGDEstimator` (paper App. U) on the ``parameter`` account."""
    return ShufflePGDEstimator(family, params.lam, params.radius, account, rng)


class ShuffleDPGLMBandit(InvalidUsers, BatchedGLMBandit):
    """Paper Algorithm 1: the batched loop with shuffled ``V``/``H_k`` and a shuffle-private ``θ̂_k``.

    The ledger is split in halves (paper §5 "Protocol instantiation"): ``covariance``
    (every ``V``/``H_k`` release, ApproxDP(ε/2, δ/2) each) and ``parameter`` (every
    ``θ̂_k``); each batch charges under its own key ``batch-k`` (disjoint users, parallel
    composition), so the whole run is (ε, δ)-shuffle DP.

    Parameters
    ----------
    family : GLMFamily or str
    d, horizon : int
        ``horizon=None``: anytime doubling epochs (``first_horizon=1000``, ``epoch_budget="parallel"``:
        each epoch restarts and has the whole budget; :mod:`dpglm.policies.anytime`, docs/service.md).
    S : float
    rng : numpy.random.Generator
        Spawned into (arm draws, mechanism noise).
    ledger : accounting.Ledger, optional
        With an ApproxDP budget; default a fresh in-memory ``Ledger(ApproxDP(epsilon, delta))``.
    epsilon, delta : float
        The budget when no ledger is given.
    estimator : callable ``(family, params, account, rng) -> BatchEstimator``, optional
        Builds the parameter estimator on the ``parameter`` account (each fit must charge
        under :func:`batch_partition` of its batch); default :class:`ShufflePGDEstimator`
        (paper App. U).
    params : BatchedParameters, optional
    levels : int, optional
        Rounding resolution of the summation protocol.
    invalid : {"clip", "skip", "raise"}
        What an out-of-domain user (‖x‖ > 1, NaN, a reward outside [0, R]) gets
        (:mod:`dpglm.policies.invalid`, docs/service.md). A skipped user plays arm 0 and
        joins its batch as a zero row (x = 0, weight 0): the batch keeps its public size.
    """

    name = "ShuffleDP-GLM"

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        """``horizon=None``: an anytime :class:`~dpglm.policies.anytime.DoublingEpochs` of this policy."""
        horizon = args[2] if len(args) > 2 else kwargs.get("horizon", 0)
        if horizon is None and cls is ShuffleDPGLMBandit:
            return _anytime(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, family: GLMFamily | str, d: int, horizon: int | None, S: float, rng: np.random.Generator, *,
                 estimator: EstimatorFactory | None = None, ledger: Ledger | Account | None = None,
                 epsilon: float | None = None,
                 delta: float | None = None, params: BatchedParameters | None = None,
                 levels: int | None = None, invalid: str = "clip") -> None:
        family = get_family(family)
        self.invalid = check_invalid(invalid)
        self._skipping = False
        if ledger is None:
            if epsilon is None or delta is None:
                raise ValueError("give a ledger, or both epsilon and delta")
            check_positive("epsilon", epsilon)
            check_probability("delta", delta)
            ledger = Ledger(ApproxDP(as_fraction(epsilon, "epsilon"), as_fraction(delta, "delta")))
        elif epsilon is not None or delta is not None:
            raise ValueError("give either a ledger or (epsilon, delta), not both")
        if not isinstance(ledger, (Ledger, Account)):  # an Account: an anytime epoch's share
            raise TypeError(f"ledger must be an accounting.Ledger, got {type(ledger).__name__}")
        budget = ledger.budget
        if not isinstance(budget, ApproxDP):
            raise TypeError(f"ledger must hold an ApproxDP budget, got {type(budget).__name__}")
        # Every public argument is checked before the ledger is split (docs/mechanisms.md).
        d, horizon, S = check_dimension(d), check_size("horizon", horizon), check_positive("S", S)
        kappa_support(family, S)
        if levels is not None:
            levels = check_int("levels", levels)
        if params is not None and not isinstance(params, BatchedParameters):
            raise TypeError(f"params must be a BatchedParameters, got {type(params).__name__}")
        if estimator is not None and not callable(estimator):
            raise TypeError(f"estimator must be callable (family, params, account, rng) -> BatchEstimator, "
                            f"got {type(estimator).__name__}")
        if params is None:
            params = batched_parameters(family, d, horizon, S, delta=float(budget.delta))
        check_generator(rng)
        choice_rng, noise_rng = rng.spawn(2)
        if estimator is None:
            estimator = _default_estimator
        self.ledger: Any = ledger  # a Ledger; an Account for an anytime epoch (dpglm.policies.anytime)
        self.accounts = ledger.split({"covariance": 1, "parameter": 1},
                                     currency={"covariance": "approx", "parameter": "approx"})
        covariance = ShuffledDesignSum(self.accounts["covariance"], params.lam, noise_rng,
                                       n_batches=max_batches(horizon), width_delta=float(budget.delta),
                                       levels=levels)
        self.covariance = covariance
        super().__init__(family, d, horizon, params, design_sum=covariance,
                         estimator=estimator(family, params, self.accounts["parameter"], noise_rng), rng=choice_rng)

    def choose(self, arms: np.ndarray) -> int:
        """Screen the user's arms (``invalid=``, :mod:`dpglm.policies.invalid`), then Alg. 1's draw."""
        if self.invalid != "raise":
            screened = self._screen_arms(arms)
            if screened is None:  # skip: arm 0, a zero row
                check_round_order(self._pending, "choose")
                check_horizon_left(self.t, self.horizon)
                self._rng.random()  # the round's uniform, unused: later users' draws do not depend on this one
                self._pending = (np.zeros(self.d), 0.0)
                self._skipping = True
                return 0
            return self._choose_checked(screened)  # screened: the loop's own arm checks would repeat these
        return super().choose(arms)

    def plan(self, arm_sets: np.ndarray) -> None:
        """Plan the batch's designs on the arm sets as :meth:`choose` will see them (``invalid=``).

        A set outside the ball (or with a NaN) is clipped first (a skipped user's planned
        design is never used), so one user's bad data neither halts the plan nor enters
        another user's design.
        """
        arm_sets = np.asarray(arm_sets, dtype=float)
        if self.invalid != "raise" and arm_sets.ndim == 3 and arm_sets.shape[-1] == self.d:
            arm_sets = clip_arm_sets(arm_sets)
        super().plan(arm_sets)

    def observe(self, reward: float) -> None:
        """Screen the reward (``invalid=``); a skipped user's row is x = 0, weight 0, reward 0."""
        if self.invalid != "raise" and self._pending is not None:
            r = None if self._skipping else self._screen_reward(reward)
            self._skipping = False
            if r is None:
                self._pending = (np.zeros(self.d), 0.0)
                r = 0.0
            return self._observe_checked(r)
        return super().observe(reward)

    def diagnostics(self) -> dict[str, Any]:
        """:data:`PUBLISHED_COUNTS`, the public schedule, the guarantee, the per-batch noise of ``V``/``H_k``."""
        loop = super().diagnostics()
        out = {name: loop[name] for name in (*PUBLISHED_COUNTS, "batch_lengths", "warmup_capped")}
        guarantee = self.ledger.guarantee() if isinstance(self.ledger, Ledger) else self.ledger.converted()
        out["guarantee_epsilon"] = float(guarantee.eps)
        out["guarantee_delta"] = float(getattr(guarantee, "delta", 0))
        out["covariance_noise_sd"] = {str(k): v for k, v in self.covariance.noise_sd.items()}
        return out


def _anytime(family: GLMFamily | str, d: int, horizon: None, S: float, rng: np.random.Generator, *,
             ledger: Ledger | None = None, epsilon: float | None = None, delta: float | None = None,
             first_horizon: int = 1000, epoch_budget: str = "parallel", **kwargs: Any) -> Any:
    """``ShuffleDPGLMBandit(horizon=None)``: doubling epochs from ``first_horizon`` (:mod:`dpglm.policies.anytime`).

    Each epoch restarts from scratch, so ``epoch_budget="parallel"`` (each epoch the whole budget) applies;
    ``"sequential"`` gives epoch k the public share 1/(k(k+1)).
    """
    from dpglm.policies.anytime import DoublingEpochs, check_epoch_budget

    check_epoch_budget(epoch_budget)
    fam = get_family(family)
    check_generator(rng)
    # Every public argument checked now (a throwaway policy on an in-memory ledger), before any epoch's split.
    probe = ShuffleDPGLMBandit(fam, d, check_int("first_horizon", first_horizon), S, np.random.default_rng(0),
                               ledger=None if ledger is None else Ledger(ledger.remaining),
                               epsilon=epsilon, delta=delta, **kwargs)
    chosen = ledger if ledger is not None else Ledger(probe.ledger.budget)

    def build(epoch_horizon: int, account: Account, epoch_rng: np.random.Generator) -> ShuffleDPGLMBandit:
        return ShuffleDPGLMBandit(fam, d, epoch_horizon, S, epoch_rng, ledger=account, **kwargs)

    return DoublingEpochs(build, check_int("d", d), ledger=chosen, first_horizon=first_horizon, rng=rng,
                          epoch_budget=epoch_budget, reward_bound=fam.reward_bound, name="ShuffleDP-GLM (anytime)")
