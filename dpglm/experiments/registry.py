"""One policy registry for every experiment runner: how to build, play and read each algorithm.

Each :class:`PolicyEntry` says how to build an algorithm on an :class:`~dpglm.experiments.cells.Instance`
(with its ε, δ, generator, environment and options), whether it is private (its guarantee
is read from its ledger), which diagnostics it must report (:class:`RunDiagnostics`) and
whether it is batched (then it plays a batch at a time, :func:`dpglm.policies.batched.run_batched_policy`;
every policy plays through :func:`dpglm.policies.run_policy_record`). :func:`play_cell`
runs one :class:`~dpglm.experiments.cells.Cell` and :meth:`Run.rows` turns it into table rows:
the sweeps (:mod:`dpglm.experiments.sweep`), the shuffle experiment and ``dpglm demo`` all
build and play policies through here.

Policies are imported when built, so ``dpglm --help`` never loads torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from dpglm.experiments.cells import Cell, Instance
from dpglm.experiments.diagnostics import COUNTERS, PUBLISHABLE, RELEASED_COUNTERS, RunDiagnostics

if TYPE_CHECKING:
    from dpglm.envs import ContextualGLMEnv
    from dpglm.policies import Policy, RunRecord

__all__ = ["REGISTRY", "PolicyEntry", "Request", "Run", "build_policy", "entry", "play", "play_cell"]

@dataclass(frozen=True)
class Request:
    """What a builder is given: the problem, the privacy parameters, the policy's generator, the environment.

    ``epsilon`` is ``inf`` for a non-private algorithm; ``env`` is there for the baselines
    that take the oracle κ of the run's contexts (GLOC, GLM-UCB, as in the paper's §8).
    """

    instance: Instance
    epsilon: float
    delta: float
    rng: np.random.Generator
    env: ContextualGLMEnv
    options: Mapping[str, Any]


#: Builds an algorithm's policy from a :class:`Request`.
Builder = Callable[[Request], "Policy"]


@dataclass(frozen=True)
class PolicyEntry:
    """One algorithm of the registry.

    Parameters
    ----------
    name : str
        The label the experiments use (``"Private-GLM"``, ``"B-GLinCB"``).
    build : Builder
    private : bool
        Whether runs are charged to a ledger (``policy.ledger``) at a given ε.
    reports : tuple of str
        :class:`RunDiagnostics` fields the policy's ``diagnostics()`` must hold; a private
        entry only fields of :data:`~dpglm.experiments.diagnostics.PUBLISHABLE` (released, or
        functions of the releases: docs/service.md, "What a run publishes").
    batched : bool
        Play a batch at a time (same numbers, vectorised designs).
    seconds_per_round : float
        CPU seconds per round at d = 3, K = 20, measured on a full Table 2 (only used to
        group cells into tasks of about a second: a wrong guess changes speed, never a number).
    """

    name: str
    build: Builder
    private: bool = False
    reports: tuple[str, ...] = ()
    batched: bool = False
    seconds_per_round: float = 2e-4

    def __post_init__(self) -> None:
        known = {f.name for f in fields(RunDiagnostics)}
        unknown = [name for name in self.reports if name not in known]
        if unknown:
            raise ValueError(f"reports must name RunDiagnostics fields {sorted(known)}, got {unknown}")
        unreleased = [name for name in self.reports if self.private and name not in PUBLISHABLE]
        if unreleased:
            raise ValueError(f"reports of a private algorithm must be released quantities {PUBLISHABLE}, "
                             f"got {unreleased}")


def _private_glm(r: Request) -> Policy:
    from dpglm.policies.joint_dp import JointDPGLMBandit

    inst = r.instance
    return JointDPGLMBandit(inst.family, inst.d, inst.horizon, inst.S, r.epsilon, r.delta, r.rng, **r.options)


def _rs_glinucb(r: Request) -> Policy:
    from dpglm.policies.rarely_switching import RSGLinUCB

    inst = r.instance
    return RSGLinUCB(inst.family, inst.d, inst.horizon, inst.S, delta=r.delta, **r.options)


def _gloc(r: Request) -> Policy:
    """GLOC with the oracle κ of the run's contexts, as in the paper's simulations."""
    from dpglm.policies import GLOC

    options = {"preset": "paper-simulation", **r.options}
    return GLOC(r.instance.family, r.instance.d, S=r.instance.S, delta=r.delta, kappa=r.env.kappa, **options)


def _glm_ucb(r: Request) -> Policy:
    """GLM-UCB with the oracle κ of the run's contexts, as in the paper's simulations."""
    from dpglm.policies import GLMUCB

    inst = r.instance
    return GLMUCB(inst.family, inst.d, horizon=inst.horizon, delta=r.delta, kappa=r.env.kappa, **r.options)


def _ecolog(r: Request) -> Policy:
    from dpglm.policies import ECOLog

    return ECOLog(r.instance.family, r.instance.d, S=r.instance.S, delta=r.delta, **r.options)


def _shuffle_dp(r: Request) -> Policy:
    from dpglm.policies.batched import ShuffleDPGLMBandit

    inst = r.instance
    return ShuffleDPGLMBandit(inst.family, inst.d, inst.horizon, inst.S, r.rng, epsilon=r.epsilon, delta=r.delta,
                              **r.options)


def _bglincb(r: Request) -> Policy:
    from dpglm.policies.batched import BGLinCB

    inst = r.instance
    return BGLinCB(inst.family, inst.d, inst.horizon, inst.S, r.rng, delta=r.delta, **r.options)


REGISTRY: dict[str, PolicyEntry] = {e.name: e for e in (
    PolicyEntry("Private-GLM", _private_glm, private=True, reports=RELEASED_COUNTERS, seconds_per_round=1.1e-4),
    PolicyEntry("RS-GLinUCB", _rs_glinucb, reports=COUNTERS, seconds_per_round=4e-5),
    PolicyEntry("GLOC", _gloc, seconds_per_round=4e-5),
    PolicyEntry("GLM-UCB", _glm_ucb, seconds_per_round=2.2e-4),
    PolicyEntry("ECOLog", _ecolog, seconds_per_round=1.5e-4),
    PolicyEntry("ShuffleDP-GLM", _shuffle_dp, private=True, reports=("batch_lengths",), batched=True,
                seconds_per_round=1e-4),
    PolicyEntry("B-GLinCB", _bglincb, reports=("batch_lengths",), batched=True, seconds_per_round=1e-4),
)}
"""Every algorithm an experiment can run, by label."""


def entry(name: str) -> PolicyEntry:
    """The registry entry of ``name``; ``ValueError`` naming the known ones otherwise."""
    if name not in REGISTRY:
        raise ValueError(f"algorithm must be one of {tuple(REGISTRY)}, got {name!r}")
    return REGISTRY[name]


def build_policy(cell: Cell, env: ContextualGLMEnv) -> Policy:
    """The policy of ``cell`` on ``env``, its generator from the cell's policy seed (:meth:`Cell.policy_seed`)."""
    rng = np.random.default_rng(cell.policy_seed())
    return entry(cell.algorithm).build(Request(cell.instance, cell.epsilon, cell.delta, rng, env, cell.options))


def play(name: str, policy: Policy, env: ContextualGLMEnv) -> RunRecord:
    """Play ``policy`` (built for ``name``) on ``env`` for the whole horizon (the env is reset first)."""
    if entry(name).batched:
        from dpglm.policies.batched import run_batched_policy

        return run_batched_policy(policy, env)  # type: ignore[arg-type]  # the entry builds a BatchedGLMBandit
    from dpglm.policies import run_policy_record

    return run_policy_record(policy, env)


@dataclass(frozen=True)
class Run:
    """One played cell: the policy, its environment, what it produced and its typed diagnostics."""

    cell: Cell
    policy: Policy
    env: ContextualGLMEnv
    record: RunRecord
    seconds: float
    """CPU seconds (``time.process_time``) of building and playing the policy."""
    diagnostics: RunDiagnostics

    def rows(self, columns: Sequence[str]) -> list[dict[str, Any]]:
        """One row per recorded round (:meth:`Cell.recorded_rounds`) with exactly ``columns``."""
        cell, inst = self.cell, self.cell.instance
        values: dict[str, Any] = {
            "algorithm": cell.algorithm, "preset": getattr(self.policy, "preset", ""), "epsilon": cell.epsilon,
            "delta": cell.delta, "family": inst.family, "d": inst.d, "K": inst.n_arms, "horizon": inst.horizon,
            "S": inst.S, "seed": cell.seed, "seconds": self.seconds, **self.diagnostics.columns(),
        }
        if "kappa" in columns:
            values["kappa"] = self.env.kappa
        unknown = [c for c in columns if c not in values and c not in ("t", "regret")]
        if unknown:
            raise ValueError(f"columns {unknown} are not known to a run (known: {sorted(values)}, t, regret)")
        base = {c: values[c] for c in columns if c not in ("t", "regret")}
        return [{**base, "t": t, "regret": float(self.record.regret[t - 1])} for t in cell.recorded_rounds()]


def play_cell(cell: Cell) -> Run:
    """Build the cell's environment and policy from its seeds (:class:`Cell`) and play it."""
    from dpglm.envs import StochasticContextEnv

    inst, spec = cell.instance, entry(cell.algorithm)
    env = StochasticContextEnv(inst.family, inst.d, inst.n_arms, inst.S, inst.horizon,
                               np.random.default_rng(cell.env_seed()))
    start = time.process_time()
    policy = build_policy(cell, env)
    record = play(cell.algorithm, policy, env)
    seconds = time.process_time() - start
    diagnostics = RunDiagnostics.of(policy, reports=spec.reports, private=spec.private)
    return Run(cell, policy, env, record, seconds, diagnostics)
