"""Every audit the command line knows: the correct mechanisms and their planted-bug variants.

Each entry builds an :class:`~audits.base.Audit` for a target ε, at full size
(the table in the report; run counts from REFERENCES.md or more) or quick
size (``dpglm audit all --quick``), and states the verdict a correct
implementation must get: ``"consistent"`` for the real mechanisms,
``"violated"`` for the planted bugs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from audits.base import Audit

__all__ = ["CATALOGUE", "EPSILONS", "AuditSpec", "get_spec"]

#: The ε grid of the audit table (issue 7).
EPSILONS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
DELTA = 1e-5


@dataclass(frozen=True)
class AuditSpec:
    """How to build and size one audit.

    Attributes
    ----------
    name : str
        Command-line name.
    build : callable
        ``build(epsilon, quick)``: an :class:`~audits.base.Audit` (among them
        :class:`~audits.bandit_switch.BanditSwitchAudit`), or a
        :class:`~audits.bandit.BanditCouplingAudit` or
        :class:`~audits.one_run.OneRunGaussianAudit` (same ``run(runs, seed)``).
    runs, quick_runs : int
        Main runs per neighbour at full and quick size (coupled pairs for
        the bandit coupling; policy runs of T rounds for the bandit first-switch game).
    expected : str
        ``"consistent"`` (real mechanism) or ``"violated"`` (planted bug).
    epsilons : tuple of float
        ε values audited by default.
    description : str
        One line for ``--help`` and the summary.
    """

    name: str
    build: Callable[[float, bool], object]
    runs: int
    quick_runs: int
    expected: str
    epsilons: tuple[float, ...]
    description: str


def _gaussian(mechanism_class: type | None, name: str) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.noise import GaussianAudit

        return GaussianAudit(epsilon, DELTA, mechanism_class=mechanism_class, name=name)
    return build


def _laplace(mechanism_class: type | None, name: str) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.noise import LaplaceAudit

        return LaplaceAudit(epsilon, mechanism_class=mechanism_class, name=name)
    return build


def _tree(mechanism_class: type | None, name: str) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.tree import TreeAudit

        return TreeAudit(epsilon, DELTA, horizon=32 if quick else 128, mechanism_class=mechanism_class,
                         name=name)
    return build


def _geometric(mechanism_class: type | None, name: str) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.geometric import GeometricBatchAudit

        return GeometricBatchAudit(epsilon, samples=8 if quick else 16, mechanism_class=mechanism_class,
                                   name=name)
    return build


def _shuffle(planted: bool, name: str) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.shuffle import ShuffleBitSumAudit

        shuffler = None
        if planted:
            from audits.planted import identity_shuffler as shuffler
        return ShuffleBitSumAudit(epsilon, DELTA, n_users=200 if quick else 1000, shuffler=shuffler, name=name)
    return build


def _dpsgd(mechanism_class: type | None, name: str) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.dpsgd import DPSGDAudit

        return DPSGDAudit(epsilon, DELTA, steps=5 if quick else 10, mechanism_class=mechanism_class, name=name)
    return build


def _bandit(policy_attribute: str | None, name: str) -> Callable[[float, bool], object]:
    def build(epsilon: float, quick: bool) -> object:
        from audits.bandit import BanditCouplingAudit

        policy_class = None if policy_attribute is None else _planted(policy_attribute)
        return BanditCouplingAudit(epsilon, horizon=300, policy_class=policy_class, name=name)
    return build


def _bandit_switch(policy_attribute: str | None, name: str) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.bandit_switch import BanditSwitchAudit

        policy_class = None if policy_attribute is None else _planted(policy_attribute)
        return BanditSwitchAudit(epsilon, policy_class=policy_class, name=name)
    return build


def _one_run(mechanism_class: str | None, name: str) -> Callable[[float, bool], object]:
    def build(epsilon: float, quick: bool) -> object:
        from audits.one_run import OneRunGaussianAudit

        planted = None if mechanism_class is None else _planted(mechanism_class)
        return OneRunGaussianAudit(epsilon, DELTA, canaries=100_000 if quick else 1_000_000,
                                   mechanism_class=planted, name=name)
    return build


def _planted(attribute: str) -> type:
    import audits.planted

    return getattr(audits.planted, attribute)


def _with_planted(factory: Callable[[type | None, str], Callable[[float, bool], Audit]], attribute: str,
                  name: str) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        return factory(_planted(attribute), name)(epsilon, quick)
    return build


CATALOGUE: dict[str, AuditSpec] = {spec.name: spec for spec in (
    AuditSpec("gaussian", _gaussian(None, "gaussian"), 100_000, 20_000, "consistent", EPSILONS,
              "Gaussian mechanism, statistic 0 vs Δ, Gaussian-DP route"),
    AuditSpec("laplace", _laplace(None, "laplace"), 100_000, 20_000, "consistent", EPSILONS,
              "Laplace mechanism, statistic 0 vs Δ, Clopper–Pearson route"),
    AuditSpec("tree", _tree(None, "tree"), 100_000, 20_000, "consistent", EPSILONS,
              "binary tree, x₁ = ∓Δ/2, score Σⱼ y_{2^j}"),
    AuditSpec("geometric", _geometric(None, "geometric"), 20_000, 3_000, "consistent", EPSILONS,
              "geometric-batch Laplace mean, first reward changed, all releases observed"),
    AuditSpec("shuffle", _shuffle(False, "shuffle"), 100_000, 20_000, "consistent", EPSILONS,
              "shuffled bit sum, one bit flipped, count and position-0 statistics"),
    AuditSpec("dpsgd", _dpsgd(None, "dpsgd"), 100_000, 20_000, "consistent", EPSILONS,
              "full-batch DP-SGD, Dirac gradient canary, last iterate"),
    AuditSpec("bandit-coupling", _bandit(None, "bandit-coupling"), 10, 2, "consistent", (1.0, 4.0),
              "joint-DP bandit, round-1 neighbours under noise coupling: actions must be bit-identical"),
    AuditSpec("bandit", _bandit_switch(None, "bandit"), 300, 40, "consistent", (1.0, 4.0),
              "joint-DP bandit, round-1 neighbours, first-switch game: round of the first wide-arm play"),
    AuditSpec("gaussian-one-run", _one_run(None, "gaussian-one-run"), 1, 1, "consistent", EPSILONS,
              "Gaussian mechanism audited in ONE release with m canaries (Steinke et al. 2023)"),
    AuditSpec("gaussian-one-run-halved-sensitivity",
              _one_run("HalvedSensitivityGaussian", "gaussian-one-run-halved-sensitivity"), 1, 1, "violated",
              (1.0,), "planted: Gaussian noise for Δ/2, audited in one release"),
    AuditSpec("gaussian-halved-sensitivity", _with_planted(_gaussian, "HalvedSensitivityGaussian",
                                                           "gaussian-halved-sensitivity"),
              20_000, 5_000, "violated", (1.0,), "planted: Gaussian noise for Δ/2"),
    AuditSpec("laplace-halved-sensitivity", _with_planted(_laplace, "HalvedSensitivityLaplace",
                                                          "laplace-halved-sensitivity"),
              20_000, 5_000, "violated", (1.0,), "planted: Laplace noise for Δ/2"),
    AuditSpec("tree-depth-unscaled", _with_planted(_tree, "DepthUnscaledTree", "tree-depth-unscaled"),
              20_000, 2_000, "violated", (1.0,), "planted: tree node noise not scaled by √L"),
    AuditSpec("geometric-reused-sample", _with_planted(_geometric, "ReusedSampleGeometricMean",
                                                       "geometric-reused-sample"),
              5_000, 1_000, "violated", (1.0,), "planted: batch rewards reused in later batches"),
    AuditSpec("shuffle-unshuffled", _shuffle(True, "shuffle-unshuffled"), 20_000, 2_000, "violated", (1.0,),
              "planted: a shuffler that does not shuffle"),
    AuditSpec("bandit-exact-gram", _bandit("ExactGramBandit", "bandit-exact-gram"), 10, 2, "violated", (4.0,),
              "planted: the joint-DP bandit deciding from the exact Gram matrix"),
    # n runs per side certify at most ln((1 - δ - p)/p), p = 1 - 0.025^(1/n): 2.3 at the quick 40
    # runs, 4.4 at 300; the planted policy is audited against ε = 1 so both sizes can refute it.
    AuditSpec("bandit-switch-exact-gram", _bandit_switch("ExactGramBandit", "bandit-switch-exact-gram"), 300, 40,
              "violated", (1.0,), "planted: the joint-DP bandit deciding from the exact Gram matrix, first-switch game"),
    AuditSpec("dpsgd-add-remove-noise", _with_planted(_dpsgd, "AddRemoveNoiseDPSGD", "dpsgd-add-remove-noise"),
              20_000, 10_000, "violated", (1.0,), "planted: DP-SGD noise for sensitivity C, not 2C"),
)}


def get_spec(name: str) -> AuditSpec:
    """The catalogue entry ``name``; ``ValueError`` listing the known names otherwise."""
    if name not in CATALOGUE:
        raise ValueError(f"unknown audit {name!r}; choose one of {sorted(CATALOGUE)} or 'all'")
    return CATALOGUE[name]
