"""Noise-coupling audit of a joint-DP bandit policy: does any decision bypass the releases?

Joint DP (Kearns et al. 2014; paper §3): neighbours differ in the user of
round 1 (its arm set and reward); the output is the actions at every other
round, for arm sets and rewards the auditor controls. A policy that decides
only from mechanism releases is post-processing of them, so couple the two
neighbours' mechanisms: give both runs the same noise, shifted on the
``D1`` run by the difference of the exact statistics,

    Z¹ = Z⁰ + (S⁰ − S¹)   ⇒   release¹ = S¹ + Z¹ = S⁰ + Z⁰ = release⁰,

for every tree release and every DP-SGD refit. Under this coupling a policy
that reads only releases takes bit-identical actions at every round ≥ 2;
any difference is a decision that used the data outside the releases (an
exact Gram matrix, a raw reward, ...). The shift is realised exactly: the
``D1`` run still calls the real mechanism — which charges its account and
draws its noise, keeping the generator streams aligned — and is handed the
``D0`` release, which is what ``S¹ + Z¹`` equals.

Mechanisms are found where ``RarelySwitchingBandit`` keeps them:
``design_v.tree`` / ``design_h.tree`` (binary trees, method ``append``) and
``estimator_o.dpsgd`` / ``estimator_tau.dpsgd`` (DP-SGD, method ``fit``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from accounting.validation import check_int, check_positive, check_probability
from audits.base import summary_text

if TYPE_CHECKING:
    from dpglm.policies.base import Policy
    from dpglm.policies.joint_dp import JointDPGLMBandit

__all__ = [
    "BanditCouplingAudit",
    "CouplingReport",
    "CouplingResult",
    "NoiseCoupling",
    "couple_policy",
    "coupled_actions",
]


class NoiseCoupling:
    """Wrap one mechanism method: record its releases (``D0``) or replay them shifted (``D1``).

    Every other attribute is forwarded to the wrapped mechanism. Once the
    ``D1`` run calls more often than ``D0`` did (the paths have already
    diverged), the coupling is undefined and the real release is returned;
    such calls are counted in ``uncoupled``.
    """

    def __init__(self, mechanism: object, method: str, log: list, replay: bool) -> None:
        self._mechanism, self._method, self._log, self._replay = mechanism, method, log, replay
        self._calls = 0
        self.uncoupled = 0

    def __getattr__(self, name: str) -> object:
        if name == self.__dict__.get("_method"):
            return self._call
        return getattr(self._mechanism, name)

    def _call(self, *args: object, **kwargs: object) -> object:
        release = getattr(self._mechanism, self._method)(*args, **kwargs)
        index, self._calls = self._calls, self._calls + 1
        if not self._replay:
            self._log.append(release)
            return release
        if index >= len(self._log):
            self.uncoupled += 1
            return release
        return self._log[index]


def couple_policy(policy: object, logs: dict[str, list], replay: bool) -> list[NoiseCoupling]:
    """Wrap every mechanism the policy holds (in place); returns the wrappers."""
    wrappers = []
    for holder_name, attribute, method in (("design_v", "tree", "append"), ("design_h", "tree", "append"),
                                           ("estimator_o", "dpsgd", "fit"), ("estimator_tau", "dpsgd", "fit")):
        holder = getattr(policy, holder_name, None)
        mechanism = getattr(holder, attribute, None) if holder is not None else None
        if mechanism is None:
            continue
        wrapper = NoiseCoupling(mechanism, method, logs.setdefault(f"{holder_name}.{attribute}", []), replay)
        setattr(holder, attribute, wrapper)
        wrappers.append(wrapper)
    return wrappers


def _play(policy: Policy, arms: np.ndarray, rewards: np.ndarray) -> np.ndarray:
    actions = np.empty(arms.shape[0], dtype=np.int64)
    for t in range(arms.shape[0]):
        actions[t] = policy.choose(arms[t])
        policy.observe(float(rewards[t, actions[t]]))
    return actions


@dataclass(frozen=True)
class CouplingResult:
    """Actions of the two coupled runs and whether they agree after round 1."""

    actions_null: np.ndarray
    actions_alternative: np.ndarray
    slots: tuple[str, ...]
    coupled_calls: int
    uncoupled_calls: int

    @property
    def identical(self) -> bool:
        """Bit-identical actions at every round ≥ 2 (the joint-DP output)."""
        return bool(np.array_equal(self.actions_null[1:], self.actions_alternative[1:]))

    @property
    def first_divergence(self) -> int | None:
        """First round (1-based) ≥ 2 whose actions differ, or None."""
        differ = np.flatnonzero(self.actions_null[1:] != self.actions_alternative[1:])
        return None if differ.size == 0 else int(differ[0]) + 2


def coupled_actions(make_policy: Callable[[], Policy], arms: np.ndarray, rewards: np.ndarray,
                    first_arms: np.ndarray, first_rewards: np.ndarray) -> CouplingResult:
    """Run ``D0`` (``arms``, ``rewards``) and ``D1`` (round 1 replaced) under the noise coupling.

    Parameters
    ----------
    make_policy : callable
        Builds a fresh policy; must build the same one (same seed) on every call.
    arms : numpy.ndarray of shape (T, K, d)
        Arm sets of every round, chosen by the auditor.
    rewards : numpy.ndarray of shape (T, K)
        Reward of each arm at each round (the users' responses), in the policy's range.
    first_arms, first_rewards : numpy.ndarray of shape (K, d) and (K,)
        The ``D1`` user of round 1.

    Returns
    -------
    CouplingResult
        Both action sequences, the coupled mechanism slots, and how many
        ``D1`` calls were replayed (coupled) or, past a divergence, not.
    """
    arms = np.asarray(arms, dtype=float)
    rewards = np.asarray(rewards, dtype=float)
    if arms.ndim != 3 or rewards.shape != arms.shape[:2]:
        raise ValueError(f"arms must have shape (T, K, d) and rewards (T, K); got {arms.shape} and {rewards.shape}")
    if np.shape(first_arms) != arms.shape[1:] or np.shape(first_rewards) != arms.shape[1:2]:
        raise ValueError("first_arms and first_rewards must match one round of arms and rewards")
    logs: dict[str, list] = {}
    null_policy = make_policy()
    couple_policy(null_policy, logs, replay=False)
    actions_null = _play(null_policy, arms, rewards)
    alternative_arms, alternative_rewards = arms.copy(), rewards.copy()
    alternative_arms[0], alternative_rewards[0] = first_arms, first_rewards
    alternative_policy = make_policy()
    wrappers = couple_policy(alternative_policy, logs, replay=True)
    actions_alternative = _play(alternative_policy, alternative_arms, alternative_rewards)
    uncoupled = sum(w.uncoupled for w in wrappers)
    coupled = sum(w._calls for w in wrappers) - uncoupled
    return CouplingResult(actions_null, actions_alternative, tuple(sorted(logs)), coupled, uncoupled)


@dataclass(frozen=True)
class CouplingReport:
    """Result of :class:`BanditCouplingAudit`: a verdict over several coupled pairs of runs."""

    audit: str
    mechanism: str
    claimed_epsilon: float
    claimed_delta: float
    runs: int
    identical_pairs: int
    pairs_with_both_arms_played: int
    first_divergences: tuple[int | None, ...]
    coupled_calls: int
    verdict: str
    seed: int
    seconds: float
    parameters: dict
    method: str = "noise coupling"
    statistic: str = "actions at rounds ≥ 2"

    def to_dict(self) -> dict:
        """Every field, JSON-ready (``dpglm audit`` writes it)."""
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str)

    def summary(self) -> str:
        """The headline and one line of detail (:func:`audits.base.summary_text`)."""
        diverged = [d for d in self.first_divergences if d is not None]
        detail = "all bit-identical" if not diverged else f"diverged in {len(diverged)} (first at round {diverged[0]})"
        return summary_text(self.audit, self.claimed_epsilon, self.claimed_delta,
                            f"exact: {self.verdict}", [f"coupled pairs={self.runs}: {detail} (no sampling error)"])


class BanditCouplingAudit:
    """The noise-coupling audit of a joint-DP policy over ``runs`` seeds (verdict "violated" on any divergence).

    The game: arms e₁, e₂ at every round ≥ 2 with fixed Bernoulli(0.3 / 0.6)
    rewards drawn once from the seed; round 1 offers only e₁ with reward 0
    (``D0``) or only e₂ with reward 1 (``D1``), so whichever arm the policy
    pulls, user 1's data differs.

    Parameters
    ----------
    epsilon, delta : float
        The policy's (ε, δ) (its ledger's total budget: the claim).
    horizon : int
        Rounds T per run.
    policy_class : type
        ``dpglm.policies.joint_dp.JointDPGLMBandit`` or a subclass (planted bugs).
    """

    mechanism = "JointDPGLMBandit"

    def __init__(self, epsilon: float, delta: float = 0.01, *, horizon: int = 300,
                 policy_class: type[JointDPGLMBandit] | None = None, preset: str = "calibrated",
                 name: str = "bandit-coupling") -> None:
        from dpglm.policies.joint_dp import JointDPGLMBandit

        self.epsilon, self.delta = check_positive("epsilon", epsilon), check_probability("delta", delta)
        self.horizon, self.preset = check_int("horizon", horizon, 2), preset
        self.policy_class = JointDPGLMBandit if policy_class is None else policy_class
        self.name = name

    def game(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(arms, rewards, first_arms, first_rewards) of the coupling game."""
        arms = np.tile(np.eye(2), (self.horizon, 1, 1))
        arms[0] = [[1.0, 0.0], [1.0, 0.0]]
        rewards = (rng.random((self.horizon, 2)) < [0.3, 0.6]).astype(float)
        rewards[0] = 0.0
        return arms, rewards, np.array([[0.0, 1.0], [0.0, 1.0]]), np.ones(2)

    def run(self, runs: int = 5, seed: int = 0, *, confidence: float = 0.95) -> CouplingReport:
        """Play ``runs`` coupled pairs, each with its own policy seed.

        ``confidence`` is accepted for the command's interface and unused: the
        verdict is not statistical (a policy that reads only releases is
        bit-identical under the coupling on every seed).
        """
        runs = check_int("runs", runs)
        start = time.perf_counter()
        game = self.game(np.random.default_rng(seed))
        divergences, calls, varied = [], 0, 0
        for policy_seed in np.random.SeedSequence(seed).generate_state(runs):
            def make_policy(policy_seed: int = int(policy_seed)) -> Policy:
                return self.policy_class("logistic", 2, self.horizon, 1.0, self.epsilon, self.delta,
                                         np.random.default_rng(policy_seed), preset=self.preset)
            result = coupled_actions(make_policy, *game)
            divergences.append(result.first_divergence)
            calls += result.coupled_calls
            varied += np.unique(result.actions_null[1:]).size > 1
        identical = sum(d is None for d in divergences)
        return CouplingReport(
            audit=self.name, mechanism=self.mechanism, claimed_epsilon=self.epsilon, claimed_delta=self.delta,
            runs=runs, identical_pairs=identical, pairs_with_both_arms_played=varied,
            first_divergences=tuple(divergences), coupled_calls=calls,
            verdict="consistent" if identical == runs else "violated", seed=seed,
            seconds=time.perf_counter() - start,
            parameters={"horizon": self.horizon, "preset": self.preset, "policy_class": self.policy_class.__name__},
        )
