"""Contextual GLM bandit environments and their expected (pseudo-)regret.

Each round t = 0, …, T−1 the environment shows an arm set X_t of K contexts in the unit
ball, the policy picks one, and the environment draws its reward with mean
μ(⟨x_t, θ*⟩). Regret is the paper's pseudo-regret (§4, Problems M1/M2):

    R_T = Σ_t max_{x ∈ X_t} μ(⟨x, θ*⟩) − μ(⟨x_t, θ*⟩).

The environment's randomness (θ* direction, contexts, rewards) comes from its own
streams spawned from the Generator it is given, never from the policy's (the
stochastic one draws them in blocks from counter-addressed seeds, memory
O(block·K·d)), and rewards are coupled across arms (one uniform U_{t,k} per round and arm: r = 1[U_{t,k} < μ]),
so two policies run on environments built from the same seed see the same contexts and
the same reward for the same choice.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from accounting.validation import check_array, check_generator, check_int, check_memory, check_positive, check_size
from dpglm._validation import check_dimension
from dpglm.glm import GLMFamily, get_family, kappa, kappa_star

__all__ = ["BLOCK_ROUNDS", "NORM_TOLERANCE", "AdversarialContextEnv", "ContextualGLMEnv", "StochasticContextEnv"]

NORM_TOLERANCE = 1e-9
"""Contexts may exceed the unit norm by this relative amount (floating-point slack)."""

BLOCK_ROUNDS = 1024
"""Rounds per block of :class:`StochasticContextEnv` (part of its definition: another
block length gives other, equally distributed, numbers)."""

Adversary = Callable[[int, np.ndarray, np.ndarray], np.ndarray]
"""``adversary(t, past_actions, past_rewards) -> (K, d)`` contexts of round t."""

RewardModel = Callable[[int, int, float], float]
"""``reward_model(t, index, mean) -> reward`` in [0, R]."""


def validate_contexts(arms: np.ndarray, n_arms: int, d: int, *, name: str = "arms") -> np.ndarray:
    """Return ``arms`` as a float array after checking shape (..., K, d), finiteness, ‖x‖ ≤ 1.

    Raises ``ValueError`` naming ``name`` and the allowed range (paper §4.1: ‖x‖ ≤ 1).
    """
    arms = check_array(name, arms)
    if arms.ndim < 2 or arms.shape[-2:] != (n_arms, d):
        raise ValueError(f"{name} must have shape (..., {n_arms}, {d}), got {arms.shape}")
    if not np.all(np.isfinite(arms)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    norms = np.sqrt(np.einsum("...i,...i->...", arms, arms))
    worst = float(np.max(norms)) if norms.size else 0.0
    if worst > 1.0 + NORM_TOLERANCE:
        raise ValueError(f"{name} must lie in the unit ball (‖x‖ ≤ 1), got a norm of {worst:.6g}")
    return arms


def sample_unit_ball(rng: np.random.Generator, size: tuple[int, ...], d: int) -> np.ndarray:
    """Points uniform in the d-dimensional unit ball: Gaussian direction × U^{1/d}."""
    g = rng.standard_normal(size + (d,))
    g /= np.linalg.norm(g, axis=-1, keepdims=True)
    radius = rng.random(size + (1,)) ** (1.0 / d)
    return g * radius


class ContextualGLMEnv:
    """A GLM contextual bandit with given contexts, θ*, and a reward model.

    Parameters
    ----------
    family : GLMFamily or str
    theta_star : ndarray, shape (d,)
    contexts : ndarray (T, K, d) or callable ``adversary(t, past_actions, past_rewards)``
        Either the whole context sequence, or an adaptive adversary returning the (K, d)
        arm set of round t from the actions and rewards of rounds < t.
    rng : numpy.random.Generator
        Source of the reward stream (independent of any policy).
    horizon : int, optional
        Required with a callable adversary; with an array it must equal T if given.
    n_arms : int, optional
        Required with a callable adversary.
    rewards : None, ndarray (T, K) or callable ``reward_model(t, index, mean)``
        None: Bernoulli(μ(⟨x, θ*⟩)) rewards. An array or callable gives rewards directly;
        they must lie in [0, R] with R = ``family.reward_bound``.
    """

    def __init__(
        self,
        family: GLMFamily | str,
        theta_star: np.ndarray,
        contexts: np.ndarray | Adversary,
        rng: np.random.Generator,
        *,
        horizon: int | None = None,
        n_arms: int | None = None,
        rewards: None | np.ndarray | RewardModel = None,
    ) -> None:
        self.family = get_family(family)
        check_generator(rng)
        theta_star = np.array(check_array("theta_star", theta_star))
        if theta_star.ndim != 1 or theta_star.size == 0 or not np.all(np.isfinite(theta_star)):
            raise ValueError(f"theta_star must be a finite 1-D array (d,), got shape {theta_star.shape}")
        theta_star.setflags(write=False)
        self.theta_star = theta_star
        self.d = theta_star.shape[0]
        self.R = float(self.family.reward_bound)

        if callable(contexts):
            if horizon is None or n_arms is None:
                raise ValueError("horizon and n_arms are required with an adversary callback")
            self._adversary: Adversary | None = contexts
            self._contexts: np.ndarray | None = None
        else:
            arr = check_array("contexts", contexts)
            if arr.ndim != 3 or arr.shape[-1] != self.d:
                raise ValueError(f"contexts must have shape (T, K, d), d = len(theta_star) = {self.d}, got {arr.shape}")
            if horizon is not None and int(horizon) != arr.shape[0]:
                raise ValueError(f"horizon must equal len(contexts) = {arr.shape[0]}, got {horizon}")
            if n_arms is not None and int(n_arms) != arr.shape[1]:
                raise ValueError(f"n_arms must equal contexts.shape[1] = {arr.shape[1]}, got {n_arms}")
            horizon, n_arms = arr.shape[0], arr.shape[1]
            arr = validate_contexts(arr, n_arms, self.d, name="contexts").copy()
            arr.setflags(write=False)
            self._adversary = None
            self._contexts = arr
        if int(horizon) < 1 or int(n_arms) < 1:
            raise ValueError(f"horizon and n_arms must be >= 1, got {horizon} and {n_arms}")
        self.horizon = int(horizon)
        self.n_arms = int(n_arms)

        self._reward_model: RewardModel | None = None
        self._reward_table: np.ndarray | None = None
        if rewards is None:
            # One uniform per round and arm, drawn up front: coupled across policies.
            self._uniforms = rng.random((self.horizon, self.n_arms))
        elif callable(rewards):
            self._reward_model = rewards
        else:
            table = check_array("rewards", rewards)
            if table.shape != (self.horizon, self.n_arms):
                raise ValueError(f"rewards must have shape ({self.horizon}, {self.n_arms}), got {table.shape}")
            self._check_reward_values(table)
            self._reward_table = table

        if self._contexts is not None:
            means = self.family.mu(self._contexts @ self.theta_star)
            self._means: np.ndarray | None = means
            self._best: np.ndarray | None = means.max(axis=1)
        else:
            self._means = self._best = None
        self.reset()

    # -- bookkeeping ------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the played rounds (contexts and reward uniforms are kept)."""
        self.t = 0
        self._shown: np.ndarray | None = None
        self.actions = np.full(self.horizon, -1, dtype=np.int64)
        self.rewards = np.full(self.horizon, np.nan)
        self.instant_regret = np.full(self.horizon, np.nan)
        if self._adversary is not None:
            self._seen = np.full((self.horizon, self.n_arms, self.d), np.nan)

    def _check_reward_values(self, r: np.ndarray | float) -> None:
        r = np.asarray(r, dtype=float)
        if not np.all(np.isfinite(r)) or np.any(r < 0.0) or np.any(r > self.R):
            raise ValueError(f"rewards must lie in [0, R] = [0, {self.R}], got {r!r}")

    # -- the protocol -----------------------------------------------------------------
    def contexts(self, t: int) -> np.ndarray:
        """The (K, d) arm set of round t (read-only). Rounds are played in order."""
        if t != self.t:
            raise ValueError(f"t must be the current round {self.t}, got {t}")
        if t >= self.horizon:
            raise ValueError(f"horizon exceeded: t must be < {self.horizon}, got {t}")
        arms = self._arms(t)
        self._shown = arms
        return arms

    def _arms(self, t: int) -> np.ndarray:
        """The arm set of round t (checked to be the current round)."""
        if self._contexts is not None:
            arms = self._contexts[t]
        else:
            assert self._adversary is not None  # __init__ sets one of the two
            arms = validate_contexts(
                self._adversary(t, self.actions[:t].copy(), self.rewards[:t].copy()),
                self.n_arms,
                self.d,
                name=f"adversary contexts at round {t}",
            ).copy()
            arms.setflags(write=False)
            self._seen[t] = arms
        return arms

    def pull(self, t: int, index: int) -> float:
        """Play arm ``index`` of round t's arm set; return its reward, record regret."""
        check_int("t", t, 0)
        if t != self.t or self._shown is None:
            raise ValueError(f"call contexts({self.t}) before pull; got t = {t}")
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"index must be an int, got {type(index).__name__}")
        if not 0 <= index < self.n_arms:
            raise ValueError(f"index must be in [0, {self.n_arms}), got {index}")
        index = int(index)
        means, best = self._round_means(t)
        mean = means[index]
        if self._reward_table is not None:
            reward = float(self._reward_table[t, index])
        elif self._reward_model is not None:
            reward = float(self._reward_model(t, index, float(mean)))
            self._check_reward_values(reward)
        else:
            reward = float(self._round_uniforms(t)[index] < mean) * self.R
        self.actions[t] = index
        self.rewards[t] = reward
        self.instant_regret[t] = best - mean
        self.t += 1
        self._shown = None
        return reward

    def _round_means(self, t: int) -> tuple[np.ndarray, float]:
        """μ(⟨x, θ*⟩) of every arm of round t (shown), and their max."""
        if self._means is not None and self._best is not None:
            return self._means[t], self._best[t]
        assert self._shown is not None  # pull checked that round t's arms were shown
        means = self.family.mu(self._shown @ self.theta_star)
        return means, means.max()

    def _round_uniforms(self, t: int) -> np.ndarray:
        """The K reward uniforms of round t (coupled across policies)."""
        return self._uniforms[t]

    # -- results ----------------------------------------------------------------------
    @property
    def regret(self) -> np.ndarray:
        """Cumulative pseudo-regret of the rounds played so far, shape (t,)."""
        return np.cumsum(self.instant_regret[: self.t])

    @property
    def context_sequence(self) -> np.ndarray:
        """Every arm set, shape (T, K, d), read-only (with an adversary: the rounds seen)."""
        if self._contexts is not None:
            return self._contexts
        if self.t == 0:
            raise ValueError("no contexts seen yet: play at least one round first")
        return self._seen[: self.t]

    def context_window(self, start: int, stop: int) -> np.ndarray:
        """The arm sets of rounds start..stop−1 (with an adversary: of the rounds seen)."""
        if not 0 <= start <= stop <= self.horizon:
            raise ValueError(f"need 0 <= start <= stop <= {self.horizon}, got {start}, {stop}")
        return self.context_sequence[start:stop]

    @property
    def kappa(self) -> float:
        """Oracle κ over every context of the run (paper §4.1; what Table 2 reports)."""
        return kappa(self.family, self.theta_star, self.context_sequence)

    @property
    def kappa_star(self) -> float:
        """Oracle κ* over every context of the run (paper §4.1)."""
        return kappa_star(self.family, self.theta_star, self.context_sequence)


class StochasticContextEnv(ContextualGLMEnv):
    """The paper's §8 instance (model M1): θ* on the sphere of radius S, K fresh arms
    uniform in the unit ball every round, Bernoulli rewards with mean μ(⟨x, θ*⟩).

    Contexts and reward uniforms are drawn in blocks of :data:`BLOCK_ROUNDS` rounds,
    block b from its own counter-based seed (child b of the context or reward stream's
    ``SeedSequence``), so memory is O(block·K·d) whatever T, and a block's numbers
    depend only on the environment's seed and b — not on the policy, nor on which
    rounds were played before (docs/engine.md, "environments"). Two environments
    built from the same seed therefore show every policy the same contexts and the
    same reward for the same choice.

    Parameters
    ----------
    family : GLMFamily or str
    d, n_arms, horizon : int >= 1
    S : float > 0
        ‖θ*‖; θ* = S·u with u uniform on the sphere unless ``theta_star`` is given
        (then ‖theta_star‖ ≤ S is required).
    rng : numpy.random.Generator
        Spawned into three independent streams: θ*, contexts, rewards.
    theta_star : ndarray (d,), optional
    """

    def __init__(
        self,
        family: GLMFamily | str,
        d: int,
        n_arms: int,
        S: float,
        horizon: int,
        rng: np.random.Generator,
        *,
        theta_star: np.ndarray | None = None,
    ) -> None:
        d, n_arms, horizon = check_dimension(d, 1), check_size("n_arms", n_arms), check_size("horizon", horizon)
        check_memory("n_arms", n_arms, 8 * BLOCK_ROUNDS * n_arms * (d + 2), "a block of arm sets")
        check_memory("horizon", horizon, 8 * 8 * horizon, "the per-round records")
        S = check_positive("S", S)
        check_generator(rng)
        theta_rng, context_rng, reward_rng = rng.spawn(3)
        if theta_star is None:
            u = theta_rng.standard_normal(d)
            theta_star = S * u / np.linalg.norm(u)
        else:
            theta_star = check_array("theta_star", theta_star)
            if theta_star.shape != (d,):
                raise ValueError(f"theta_star must have shape ({d},), got {theta_star.shape}")
            if np.linalg.norm(theta_star) > S * (1.0 + NORM_TOLERANCE):
                raise ValueError(f"theta_star must satisfy ‖θ*‖ ≤ S = {S}, got {np.linalg.norm(theta_star):.6g}")
        self.S = S
        self.family = get_family(family)
        theta_star = np.array(theta_star, dtype=float)
        theta_star.setflags(write=False)
        self.theta_star = theta_star
        self.d, self.n_arms, self.horizon = int(d), int(n_arms), int(horizon)
        self.R = float(self.family.reward_bound)
        self._adversary = None
        self._contexts = self._means = self._best = None
        self._reward_model = self._reward_table = None
        self._context_seed = _seed_sequence(context_rng)
        self._reward_seed = _seed_sequence(reward_rng)
        self._block_index = -1
        self._block: tuple[np.ndarray, ...] = ()
        self._kappas: tuple[float, float] | None = None
        self.reset()

    # -- blocks -----------------------------------------------------------------------
    def _draw(self, block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Contexts (n, K, d), means, best means and reward uniforms (n, K) of ``block``."""
        rounds = min(BLOCK_ROUNDS, self.horizon - block * BLOCK_ROUNDS)
        contexts = sample_unit_ball(_block_stream(self._context_seed, block), (rounds, self.n_arms), self.d)
        contexts.setflags(write=False)
        means = self.family.mu(contexts @ self.theta_star)
        uniforms = _block_stream(self._reward_seed, block).random((rounds, self.n_arms))
        return contexts, means, means.max(axis=1), uniforms

    def _at(self, t: int) -> tuple[tuple[np.ndarray, ...], int]:
        block, offset = divmod(t, BLOCK_ROUNDS)
        if block != self._block_index:
            self._block_index, self._block = block, self._draw(block)
        return self._block, offset

    def _arms(self, t: int) -> np.ndarray:
        block, offset = self._at(t)
        return block[0][offset]

    def _round_means(self, t: int) -> tuple[np.ndarray, float]:
        block, offset = self._at(t)
        return block[1][offset], block[2][offset]

    def _round_uniforms(self, t: int) -> np.ndarray:
        block, offset = self._at(t)
        return block[3][offset]

    def context_window(self, start: int, stop: int) -> np.ndarray:
        """The arm sets of rounds start..stop−1, shape (stop − start, K, d), read-only.

        A window inside one block is a view of that block, which becomes the env's current
        one (the rounds it shows then draw nothing again: a batched policy planning a block
        ahead costs no second draw, issue 32); a longer window is drawn again.
        """
        if not 0 <= start <= stop <= self.horizon:
            raise ValueError(f"need 0 <= start <= stop <= {self.horizon}, got {start}, {stop}")
        if start < stop and start // BLOCK_ROUNDS == (stop - 1) // BLOCK_ROUNDS:
            block, offset = self._at(start)
            return block[0][offset: offset + stop - start]
        blocks = range(start // BLOCK_ROUNDS, -(-stop // BLOCK_ROUNDS))
        parts = [self._draw(b)[0] for b in blocks]
        if not parts:
            return np.zeros((0, self.n_arms, self.d))
        first = blocks[0] * BLOCK_ROUNDS
        window = np.concatenate(parts)[start - first: stop - first]
        window.setflags(write=False)
        return window

    @property
    def context_sequence(self) -> np.ndarray:
        """Every arm set, shape (T, K, d): O(T·K·d) memory, drawn on demand (prefer :meth:`context_window`)."""
        return self.context_window(0, self.horizon)

    def _kappa_pair(self) -> tuple[float, float]:
        """(κ, κ*) over every context of the run, one block at a time (exact: a min/max of block min/max)."""
        if self._kappas is None:
            low, high = np.inf, -np.inf
            for block in range(-(-self.horizon // BLOCK_ROUNDS)):
                slopes = self.family.dmu(self._draw(block)[0] @ self.theta_star)
                low, high = min(low, float(slopes.min())), max(high, float(slopes.max()))
            self._kappas = (1.0 / low, 1.0 / high)
        return self._kappas

    @property
    def kappa(self) -> float:
        """Oracle κ over every context of the run (paper §4.1; what Table 2 reports)."""
        return self._kappa_pair()[0]

    @property
    def kappa_star(self) -> float:
        """Oracle κ* over every context of the run (paper §4.1)."""
        return self._kappa_pair()[1]


def _seed_sequence(rng: np.random.Generator) -> np.random.SeedSequence:
    """The ``SeedSequence`` a generator made by ``spawn`` was seeded from (its blocks are its children)."""
    seed = rng.bit_generator.seed_seq
    if not isinstance(seed, np.random.SeedSequence):
        raise TypeError(f"rng must be seeded from a numpy.random.SeedSequence, got {type(seed).__name__}")
    return seed


def _block_stream(seed: np.random.SeedSequence, block: int) -> np.random.Generator:
    """Generator of ``block``: child ``block`` of ``seed`` (what ``seed.spawn`` would give), counter-addressed."""
    return np.random.default_rng(np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key + (block,),
                                                        pool_size=seed.pool_size))


class AdversarialContextEnv(ContextualGLMEnv):
    """Model M2 (paper §4): any context sequence, or an adaptive adversary callback.

    Same parameters as :class:`ContextualGLMEnv`; ``S`` (default ‖θ*‖) is the known
    bound on ‖θ*‖ that policies may be given.
    """

    def __init__(
        self,
        family: GLMFamily | str,
        theta_star: np.ndarray,
        contexts: np.ndarray | Adversary,
        rng: np.random.Generator,
        *,
        horizon: int | None = None,
        n_arms: int | None = None,
        rewards: None | np.ndarray | RewardModel = None,
        S: float | None = None,
    ) -> None:
        super().__init__(
            family, theta_star, contexts, rng, horizon=horizon, n_arms=n_arms, rewards=rewards
        )
        norm = float(np.linalg.norm(self.theta_star))
        self.S = norm if S is None else float(S)
        if not np.isfinite(self.S) or self.S <= 0 or norm > self.S * (1.0 + NORM_TOLERANCE):
            raise ValueError(f"S must be finite, > 0 and >= ‖θ*‖ = {norm:.6g}, got {S}")
