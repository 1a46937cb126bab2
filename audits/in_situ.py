"""In-situ, white-box audit of a private policy: the mechanisms a real run instantiates, audited as instantiated.

A policy is run once on a synthetic GLM bandit inside :func:`recording`, which
hooks the two seams every mechanism goes through — construction (the
``mechanisms.base.Mechanism`` metaclass) and the public methods that release
(``append``, ``release``, ``fit``, wrapped on each new instance) — so it sees
every mechanism the policy builds, whatever its preset, plan or internal
layout, with the arguments the policy gave and every release it made.

Each recorded mechanism is then audited as the policy instantiated it: its
own class (a planted subclass included), its horizon, shape, PSD bound and
sensitivity, and the cost its charge paid (σ follows from those, and is
checked equal to the σ the policy's instance drew with):

* continual counters (the joint-DP bandit's V- and H-trees):
  :class:`audits.tree.TreeAudit` on the 2×2 PSD matrix path;
* DP-SGD refits: :class:`audits.dpsgd.DPSGDAudit` with the refit's steps,
  cost, engine and public normaliser;
* shuffled vector sums (the shuffle bandit's V/H_k): :class:`audits.shuffle_vector.ShuffleVectorSumAudit`
  for the smallest and the largest batch;
* P_GD fits (the shuffle bandit's θ̂_k): :class:`audits.shuffle_vector.ShufflePGDAudit`
  with the fit's rounds, (ε₀, δ₀) and users, when it has ≥ 2 rounds (with one,
  its output is θ₀ and reveals nothing).

White-box check of the run itself: for every recorded binary tree, the node
noises are recovered exactly from its releases and the leaves it was fed
(noise_t = y_t − S_t; the node completed at t holds noise_t − noise_{t − lowbit(t)}),
standardised by the σ the charge paid for (:func:`charged_sigma`; diagonal σ,
off-diagonal σ/√2),
and their mean square N·v̂ is tested against χ²_N (one-sided: noise smaller
than charged). This needs no re-instantiation: it is the noise the policy drew.

Verdict: "violated" if any row is; each of the m rows is certified at level
α/m (Bonferroni), so a correct policy comes out consistent with probability
≥ 1 − α.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from accounting.validation import check_int, check_positive, check_probability
from audits.base import summary_text

if TYPE_CHECKING:
    from audits.base import Audit
    from dpglm.policies.base import Policy
    from mechanisms.base import _Constructed
    from mechanisms.optim.dpsgd import DPSGD
    from mechanisms.optim.shuffle_pgd import ShufflePGD
    from mechanisms.shuffle import ShuffleVectorSum
    from mechanisms.tree import ContinualRelease

__all__ = ["InSituAudit", "InSituReport", "Recorded", "charged_sigma", "node_noise", "recording"]

_METHODS = ("append", "release", "fit")


@dataclass
class Recorded:
    """One mechanism a run built: its class, constructor arguments, the instance and its calls.

    ``calls`` holds ``(method, args, kwargs, result)`` for every release-making call.
    """

    cls: type
    args: tuple[Any, ...]  # a call's arguments, as recorded: their types are the mechanism's business
    kwargs: dict[str, Any]
    instance: object
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any], Any]] = field(default_factory=list)


@contextlib.contextmanager
def recording() -> Iterator[list[Recorded]]:
    """Record every mechanism constructed inside the block, and its releases (module docstring).

    The hook is the ``Mechanism`` metaclass's ``__call__`` (every construction,
    subclasses included) and a per-instance wrapper of its public release
    methods, which ``mechanisms.base`` permits (methods may be wrapped on an
    instance). Restored on exit.
    """
    from mechanisms.base import _Constructed

    records: list[Recorded] = []
    original = _Constructed.__call__

    def construct(cls: _Constructed, *args: object, **kwargs: object) -> object:
        instance = original(cls, *args, **kwargs)
        record = Recorded(cls, args, kwargs, instance)
        records.append(record)
        for method in _METHODS:
            bound = getattr(instance, method, None)
            if callable(bound):
                setattr(instance, method, _recorder(record, method, bound))
        return instance

    _Constructed.__call__ = construct  # type: ignore[method-assign]
    try:
        yield records
    finally:
        _Constructed.__call__ = original  # type: ignore[method-assign]


def _recorder(record: Recorded, method: str, bound: Callable) -> Callable:
    def call(*args: object, **kwargs: object) -> object:
        result = bound(*args, **kwargs)
        record.calls.append((method, args, kwargs, result))
        return result
    return call


def charged_sigma(tree: ContinualRelease) -> float:
    """The node σ a binary tree's charge pays for, from its cost and horizon alone: Δ·√(L/(2ρ)).

    L = ⌊log₂T⌋ + 1 and Δ the charged sensitivity (mechanisms/tree.py); computed
    here, not read from the instance, so a tree that draws less noise than it
    charged for is measured against what it charged.
    """
    from audits.noise import as_zcdp

    depth = int(tree.horizon).bit_length()
    return float(tree.charged_sensitivity) * math.sqrt(depth / (2.0 * float(as_zcdp(tree.cost).rho)))


def node_noise(record: Recorded) -> np.ndarray:
    """The node noises of a recorded binary tree's run over the charged σ (module docstring): N(0, 1) if as charged."""
    from mechanisms.tree import ContinualRelease

    tree = record.instance
    if not isinstance(tree, ContinualRelease):
        raise TypeError(f"node noise is read from a recorded tree, got {record.cls.__name__}")
    sigma = charged_sigma(tree)
    leaves = [_leaf(args, kwargs) for method, args, kwargs, _ in record.calls if method == "append"]
    values = [np.asarray(result.value, dtype=float) for method, _, _, result in record.calls if method == "append"]
    if not leaves:
        return np.zeros(0)
    leaves_array = np.stack(leaves)
    if leaves_array.ndim == 3:
        leaves_array = (leaves_array + np.swapaxes(leaves_array, 1, 2)) / 2
    noise = np.stack(values) - np.cumsum(leaves_array, axis=0)
    noise = np.concatenate([np.zeros((1, *noise.shape[1:])), noise])  # noise_0 = 0
    t = np.arange(1, len(values) + 1)
    nodes = noise[t] - noise[t - (t & -t)]
    if nodes.ndim == 2:
        return (nodes / sigma).reshape(-1)
    rows, cols = np.triu_indices(nodes.shape[1])
    scale = np.where(rows == cols, sigma, sigma / math.sqrt(2))
    return (nodes[:, rows, cols] / scale).reshape(-1)


def _leaf(args: tuple[Any, ...], kwargs: dict[str, Any]) -> np.ndarray:
    """The element an ``append`` call added: ``x``, or ``weight·x xᵀ`` for ``append(x, weight)``."""
    x = np.asarray(args[0], dtype=float)
    weight = args[1] if len(args) > 1 else kwargs.get("weight")
    return x if weight is None else float(weight) * np.outer(x, x)


@dataclass(frozen=True)
class InSituReport:
    """Result of :class:`InSituAudit`: one row per audited mechanism and per white-box noise check."""

    audit: str
    mechanism: str
    claimed_epsilon: float
    claimed_delta: float
    rows: tuple
    epsilon_lower_bound: float
    verdict: str
    seed: int
    seconds: float
    parameters: dict
    confidence: float = 0.95
    method: str = "in situ (mechanisms as the policy built them)"
    statistic: str = "per mechanism"

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str)

    def summary(self) -> str:
        """The headline, then each recorded mechanism's row: its label and verdict, its details indented."""
        details = [f"for the whole policy; {len(self.rows)} rows at level α/{len(self.rows)} each"]
        for row in self.rows:
            details.append(f"{row['label']}: {row['verdict']}")
            details += [f"    {line}" for line in row["summary"].splitlines()]
        return summary_text(self.audit, self.claimed_epsilon, self.claimed_delta,
                            f"at {100 * self.confidence:.4g}% overall: {self.verdict}", details)


def _play(policy: Policy, horizon: int, d: int, rng: np.random.Generator, arms: int = 5) -> None:
    """A logistic bandit: fresh unit-norm arms each round, θ* of norm ½, Bernoulli rewards."""
    theta = rng.normal(size=d)
    theta *= 0.5 / np.linalg.norm(theta)
    for _ in range(horizon):
        x = rng.normal(size=(arms, d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        choice = policy.choose(x)
        policy.observe(float(rng.random() < 1.0 / (1.0 + math.exp(-float(x[choice] @ theta)))))


class InSituAudit:
    """Run a private policy once, record its mechanisms, audit each as instantiated (module docstring).

    Parameters
    ----------
    epsilon, delta : float
        The policy's (ε, δ) (its whole-run claim; each row's claim is its own charge).
    policy : {"joint", "shuffle"}
        ``JointDPGLMBandit`` (logistic, d = 2, its default preset) or ``ShuffleDPGLMBandit``.
    horizon : int
        Rounds of the recorded run.
    policy_class : type, optional
        The policy class or a subclass (a planted bug).
    runs_per_row : int
        Main runs per neighbour of each row's audit (the white-box check uses the run's own draws).
    preset : str, optional
        The joint-DP bandit's preset (default: its own default); the recording does not depend on it.
    """

    def __init__(self, epsilon: float, delta: float = 0.01, *, policy: str = "joint", horizon: int = 400,
                 policy_class: type[Policy] | None = None, runs_per_row: int | None = None, preset: str | None = None,
                 name: str = "in-situ") -> None:
        if policy not in ("joint", "shuffle"):
            raise ValueError(f"policy must be 'joint' or 'shuffle', got {policy!r}")
        self.epsilon, self.delta = check_positive("epsilon", epsilon), check_probability("delta", delta)
        self.policy, self.horizon = policy, check_int("horizon", horizon, 2)
        if policy_class is None:
            from dpglm.policies.batched import ShuffleDPGLMBandit
            from dpglm.policies.joint_dp import JointDPGLMBandit

            policy_class = JointDPGLMBandit if policy == "joint" else ShuffleDPGLMBandit
        self.policy_class, self.runs_per_row, self.name, self.preset = policy_class, runs_per_row, name, preset
        self.mechanism = policy_class.__name__

    def _build(self, rng: np.random.Generator) -> Policy:
        # The two policies' constructors take (ε, δ) differently: positional (joint), keywords (shuffle).
        build: Callable[..., Policy] = self.policy_class
        if self.policy == "joint":
            preset = {} if self.preset is None else {"preset": self.preset}
            return build("logistic", 2, self.horizon, 1.0, self.epsilon, self.delta, rng, **preset)
        return build("logistic", 2, self.horizon, 1.0, rng, epsilon=self.epsilon, delta=self.delta)

    def record(self, seed: int = 0) -> list[Recorded]:
        """One run of the policy under :func:`recording`; the mechanisms it built, in order."""
        policy_rng, env_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[0]), \
            np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
        with recording() as records:
            policy = self._build(policy_rng)
            _play(policy, self.horizon, 2, env_rng)
        return records

    def audits(self, records: list[Recorded]) -> list[tuple[str, Audit, int]]:
        """(label, audit, runs) for every recorded mechanism that can be audited (module docstring)."""
        from mechanisms.optim.dpsgd import DPSGD
        from mechanisms.optim.shuffle_pgd import ShufflePGD
        from mechanisms.shuffle import ShuffleVectorSum
        from mechanisms.tree import ContinualRelease

        out: list[tuple[str, Audit, int]] = []
        seen: set[object] = set()
        users = {id(r): r.instance.n_users for r in records if isinstance(r.instance, ShuffleVectorSum) and r.calls}
        # The recorded vector sums with the fewest and the most users.
        by_users = sorted(users, key=users.__getitem__)
        vector_sums = {by_users[0], by_users[-1]} if by_users else set()
        for index, record in enumerate(records):
            mechanism = record.instance
            label = f"#{index} {record.cls.__name__}"
            if isinstance(mechanism, ContinualRelease):
                out.append((label + f" {mechanism.shape}, T={mechanism.horizon}, Δ={mechanism.sensitivity:.4g}",
                            self._tree_audit(record, mechanism), self.runs_per_row or 50_000))
            elif isinstance(mechanism, DPSGD):
                for method, _args, kwargs, _ in record.calls:
                    key = (id(mechanism), kwargs.get("steps"), str(kwargs.get("cost")),
                           kwargs.get("normalizer") is None)
                    if method != "fit" or key in seen:
                        continue
                    seen.add(key)
                    out.append((label + f" fit: {kwargs.get('steps')} steps, {kwargs.get('cost')}",
                                self._dpsgd_audit(mechanism, kwargs), self.runs_per_row or 50_000))
            elif isinstance(mechanism, ShuffleVectorSum) and id(record) in vector_sums:
                out.append((label + f" n={mechanism.n_users}, {mechanism.shape}", self._vector_audit(mechanism),
                            self.runs_per_row or 10_000))
            elif isinstance(mechanism, ShufflePGD):
                for method, args, kwargs, _ in record.calls:
                    if method == "fit" and kwargs.get("iterations", 1) >= 2 and "pgd" not in seen:
                        seen.add("pgd")
                        out.append((label + f" fit: T={kwargs['iterations']}, n={np.shape(args[0])[0]}",
                                    self._pgd_audit(mechanism, args, kwargs), self.runs_per_row or 5_000))
        return out

    def _tree_audit(self, record: Recorded, tree: ContinualRelease) -> Audit:
        from audits.tree import TreeAudit

        if tree.relation != "replace_one":
            raise ValueError(f"in-situ tree audit supports relation 'replace_one', got {tree.relation!r}")
        audit = TreeAudit(None, 1e-5, horizon=tree.horizon, sensitivity=tree.sensitivity,
                          shape="matrix" if len(tree.shape) == 2 else "vector",
                          psd=bool(record.kwargs.get("psd", False)), mechanism_class=type(tree), cost=tree.cost,
                          name="in-situ tree")
        # Equal to 1e-9 for a zCDP charge; a GDP charge's lattice σ is up to ~1e-5 above the continuous one.
        if not (audit._single.sigma <= tree.sigma * (1 + 1e-9) and math.isclose(audit._single.sigma, tree.sigma,
                                                                               rel_tol=1e-4)):
            raise RuntimeError(f"re-instantiated {type(tree).__name__} has σ {audit._single.sigma!r}, the policy's "
                               f"{tree.sigma!r}: the audit would not replicate it")
        return audit

    def _dpsgd_audit(self, optimiser: DPSGD, kwargs: dict[str, Any]) -> Audit:
        from audits.dpsgd import DPSGDAudit

        return DPSGDAudit(None, 1e-5, steps=int(kwargs["steps"]), engine=optimiser.engine,
                          normalizer=kwargs.get("normalizer") is not None, mechanism_class=type(optimiser),
                          cost=kwargs["cost"], name="in-situ dpsgd")

    def _vector_audit(self, vector_sum: ShuffleVectorSum) -> Audit:
        from audits.shuffle_vector import ShuffleVectorSumAudit

        return ShuffleVectorSumAudit(vector_sum.epsilon, vector_sum.delta, n_users=vector_sum.n_users,
                                     d=vector_sum.shape[0], bound=vector_sum.bound, mechanism_class=type(vector_sum),
                                     name="in-situ vector sum")

    def _pgd_audit(self, pgd: ShufflePGD, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Audit:
        from audits.shuffle_vector import ShufflePGDAudit

        if kwargs.get("noise_bits") is not None:  # the exact composition of the rounds (ShufflePGD.fit)
            privacy: dict[str, Any] = {"noise_bits": int(kwargs["noise_bits"]), "composition": "exact"}
        else:
            privacy = {"round_epsilon": float(kwargs["round_epsilon"]), "round_delta": float(kwargs["round_delta"]),
                       "composition": "rounds"}
        return ShufflePGDAudit(1.0, kwargs["delta"], n_users=int(np.shape(args[0])[0]),
                               iterations=int(kwargs["iterations"]), clip=pgd.clip,
                               mechanism_class=type(pgd), name="in-situ P_GD", **privacy)

    def run(self, runs: int = 1, seed: int = 0, *, confidence: float = 0.95) -> InSituReport:
        """Record one run (``runs`` must be 1: the point is the run's own mechanisms) and audit each row."""
        from mechanisms.tree import BinaryTreeMechanism

        if runs != 1:
            raise ValueError(f"an in-situ audit records exactly one policy run, got runs={runs!r}")
        start = time.perf_counter()
        records = self.record(seed)
        planned = self.audits(records)
        trees = [r for r in records if isinstance(r.instance, BinaryTreeMechanism) and r.calls]
        rows_count = len(planned) + len(trees)
        if rows_count == 0:
            raise RuntimeError(f"{self.policy_class.__name__} built no auditable mechanism in {self.horizon} rounds")
        level = 1.0 - (1.0 - confidence) / rows_count
        rows, violated, best = [], False, 0.0
        for row_seed, (label, audit, row_runs) in zip(np.random.SeedSequence(seed).generate_state(len(planned)),
                                                      planned, strict=True):
            result = audit.run(row_runs, seed=int(row_seed), confidence=level)
            violated |= result.verdict == "violated"
            best = max(best, result.epsilon_lower_bound_clopper_pearson)
            rows.append({"label": label, "summary": "\n".join(result.details()),
                         "verdict": result.verdict, "claimed_epsilon": result.claimed_epsilon,
                         "epsilon_lower_bound": result.epsilon_lower_bound, "method": result.method,
                         "mu_lower_bound": result.mu_lower_bound, "claimed_mu": result.claimed_mu,
                         "parameters": result.parameters})
        for record in trees:
            z = node_noise(record)
            count = z.size
            ratio = float(np.sqrt(np.mean(z**2)))
            p_value = float(stats.chi2.cdf(count * ratio**2, count))
            small = p_value < 1.0 - level
            violated |= small
            rows.append({"label": f"{record.cls.__name__} node noise drawn in the run",
                         "summary": f"{count} standardised node-noise entries: rms {ratio:.3f} (1 if as charged)\n"
                                    f"P[χ²_N ≤ observed] = {p_value:.3g}",
                         "verdict": "violated" if small else "consistent", "rms": ratio, "p_value": p_value,
                         "entries": count})
        return InSituReport(
            audit=self.name, mechanism=self.mechanism, claimed_epsilon=self.epsilon, claimed_delta=self.delta,
            rows=tuple(rows), epsilon_lower_bound=best, verdict="violated" if violated else "consistent",
            seed=seed, seconds=time.perf_counter() - start, confidence=confidence,
            parameters={"policy_class": self.policy_class.__name__, "horizon": self.horizon,
                        "mechanisms_recorded": [r.cls.__name__ for r in records], "level_per_row": level},
        )
