"""Every audit the command line knows: the correct mechanisms and their planted-bug variants.

Each entry builds an :class:`~audits.base.Audit` for a target ε, at full size
(the table in the report; run counts from docs/references.md or more) or quick
size (``dpglm audit all --quick``), and states the verdict a correct
implementation must get: ``"consistent"`` for the real mechanisms,
``"violated"`` for the planted bugs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from accounting.validation import check_probability
from audits.base import Audit

__all__ = ["CATALOGUE", "EPSILONS", "AuditSpec", "family_confidence", "get_spec"]

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


def _tree(mechanism_class: type | str | None, name: str, *, shape: str = "vector",
          factorization: bool = False) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.tree import TreeAudit

        cls = _planted(mechanism_class) if isinstance(mechanism_class, str) else mechanism_class
        if cls is None and factorization:
            from mechanisms.factorization import SquareRootFactorizationMechanism as cls
        # The joint-DP bandit's trees: 2×2 PSD leaves of Frobenius sensitivity √2 (its V-tree's).
        sensitivity = 2**0.5 if shape == "matrix" else 1.0
        return TreeAudit(epsilon, DELTA, horizon=32 if quick else 128, shape=shape, psd=True,
                         sensitivity=sensitivity, mechanism_class=cls, name=name)
    return build


def _geometric(mechanism_class: type | str | None, name: str, *,
               forget: bool = False) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.geometric import GeometricBatchAudit

        cls = _planted(mechanism_class) if isinstance(mechanism_class, str) else mechanism_class
        # DP-TT's K arms: 2 at full size; --quick audits the one arm alone (same code path, half the charges).
        return GeometricBatchAudit(epsilon, samples=8 if quick else 16, arms=1 if quick else 2, forget=forget,
                                   mechanism_class=cls, name=name)
    return build


def _shuffle(planted: str | None, name: str, *, level: str = "messages") -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.shuffle import ShuffleBitSumAudit, ShuffleBitSumReleaseAudit

        n_users = 200 if quick else 1000
        if level == "release":
            return ShuffleBitSumReleaseAudit(epsilon, DELTA, n_users=n_users,
                                             mechanism_class=None if planted is None else _planted(planted), name=name)
        shuffler = cls = None
        if planted == "identity_shuffler":
            shuffler = _planted(planted)
        elif planted is not None:
            cls = _planted(planted)
        return ShuffleBitSumAudit(epsilon, DELTA, n_users=n_users, shuffler=shuffler, mechanism_class=cls, name=name)
    return build


def _shuffle_vector(planted: str | None, name: str, *, method: str = "counts") -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.shuffle_vector import ShuffleVectorSumAudit

        # The message path builds every message (n·c·(2g + b) of them): kept to 10 users.
        n_users = 10 if method == "messages" else 20 if quick else 50
        # Real rows: the bandit's input set (PSD, trace <= L). A planted noise-bit bug is audited on the
        # box inputs, whose pair is the accountant's dominating pair itself (the l2 pair is not attained).
        return ShuffleVectorSumAudit(epsilon, DELTA, n_users=n_users, d=2, method=method,
                                     inputs="l2" if planted is None else "box",
                                     mechanism_class=None if planted is None else _planted(planted), name=name)
    return build


def _shuffle_pgd(planted: str | None, name: str) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.shuffle_vector import ShufflePGDAudit

        # Real rows: the exact composition the bandit's estimator uses. The planted noise-bit bugs act on
        # the per-round calibration, i.e. on the generic (ε₀, δ₀) composition.
        return ShufflePGDAudit(epsilon, DELTA, n_users=20, iterations=2,
                               composition="exact" if planted is None else "rounds",
                               mechanism_class=None if planted is None else _planted(planted), name=name)
    return build


def _dpsgd(mechanism_class: type | str | None, name: str, *, engine: str = "opacus") -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.dpsgd import DPSGDAudit

        cls = _planted(mechanism_class) if isinstance(mechanism_class, str) else mechanism_class
        # The bandits' refits: numpy engine, public normaliser.
        return DPSGDAudit(epsilon, DELTA, steps=5 if quick else 10, engine=engine,
                          normalizer=engine == "numpy", mechanism_class=cls, name=name)
    return build


def _poisson_dpsgd(planted: str | None, name: str) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        from audits.poisson_dpsgd import PoissonDPSGDAudit

        return PoissonDPSGDAudit(epsilon, DELTA, steps=2 if quick else 3,
                                 mechanism_class=None if planted is None else _planted(planted), name=name)
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


def _in_situ(policy: str, policy_attribute: str | None, name: str) -> Callable[[float, bool], object]:
    def build(epsilon: float, quick: bool) -> object:
        from audits.in_situ import InSituAudit

        policy_class = None if policy_attribute is None else _planted(policy_attribute)
        return InSituAudit(epsilon, 0.01, policy=policy, horizon=100 if quick else 400, policy_class=policy_class,
                           runs_per_row=3_000 if quick else None, name=name)
    return build


def _planted(attribute: str) -> type:
    import audits.planted

    return getattr(audits.planted, attribute)


def _with_planted(factory: Callable[[type | None, str], Callable[[float, bool], Audit]], attribute: str,
                  name: str) -> Callable[[float, bool], Audit]:
    def build(epsilon: float, quick: bool) -> Audit:
        return factory(_planted(attribute), name)(epsilon, quick)
    return build


_REAL = "consistent"
_BUG = "violated"
_ONE = (1.0,)

CATALOGUE: dict[str, AuditSpec] = {spec.name: spec for spec in (
    # --- the real mechanisms, on the code paths the algorithms run -------------------------------
    AuditSpec("gaussian", _gaussian(None, "gaussian"), 100_000, 20_000, _REAL, EPSILONS,
          "Gaussian mechanism, statistic 0 vs Δ, Gaussian-DP route"),
    AuditSpec("laplace", _laplace(None, "laplace"), 100_000, 20_000, _REAL, EPSILONS,
          "Laplace mechanism, statistic 0 vs Δ, Clopper–Pearson route"),
    AuditSpec("tree", _tree(None, "tree"), 100_000, 20_000, _REAL, EPSILONS,
          "binary tree of vectors, x₁ = ∓Δ/2, score Σⱼ y_{2^j}"),
    AuditSpec("tree-matrix", _tree(None, "tree-matrix", shape="matrix"), 50_000, 10_000, _REAL, EPSILONS,
          "binary tree of 2×2 PSD leaves, (Z + Zᵀ)/2 node noise, as JointDPGLMBandit builds its trees"),
    AuditSpec("factorization", _tree(None, "factorization", factorization=True), 100_000, 20_000, _REAL, EPSILONS,
          "square-root factorization counter, x₁ = ∓Δ/2, score wᵀy (its likelihood ratio)"),
    AuditSpec("geometric", _geometric(None, "geometric"), 10_000, 1_000, _REAL, EPSILONS,
          "geometric-batch Laplace mean as DP-TT runs it (a ledger per run, 2 arms), first reward changed"),
    AuditSpec("geometric-forget", _geometric(None, "geometric-forget", forget=True), 10_000, 1_000, _REAL, EPSILONS,
          "geometric-batch Laplace mean as AdaP-TT runs it (forget=True: last batch only)"),
    AuditSpec("shuffle", _shuffle(None, "shuffle"), 100_000, 20_000, _REAL, EPSILONS,
          "shuffled bit sum at message level: one bit flipped, count and position-0 statistics"),
    AuditSpec("shuffle-release", _shuffle(None, "shuffle-release", level="release"), 100_000, 5_000, _REAL, EPSILONS,
          "shuffled bit sum through release() by its default method, count inverted from the release"),
    AuditSpec("shuffle-vector", _shuffle_vector(None, "shuffle-vector"), 20_000, 2_000, _REAL, EPSILONS,
          "shuffled vector sum of 2×2 symmetric leaves (the shuffle bandit's design sums), release() default method"),
    AuditSpec("shuffle-vector-messages", _shuffle_vector(None, "shuffle-vector-messages", method="messages"),
              1_000, 50, _REAL, (1.0,),
              "shuffled vector sum through release(method='messages'): every message built and shuffled"),
    AuditSpec("shuffle-pgd", _shuffle_pgd(None, "shuffle-pgd"), 10_000, 1_000, _REAL, EPSILONS,
          "shuffle-private P_GD, Dirac gradient canary, T = 2, average iterate"),
    AuditSpec("dpsgd", _dpsgd(None, "dpsgd"), 100_000, 20_000, _REAL, EPSILONS,
          "full-batch DP-SGD (opacus engine), Dirac gradient canary, last iterate"),
    AuditSpec("dpsgd-numpy", _dpsgd(None, "dpsgd-numpy", engine="numpy"), 100_000, 20_000, _REAL,
          EPSILONS, "full-batch DP-SGD, the bandits' numpy engine and public normaliser, Dirac canary"),
    AuditSpec("dpsgd-vectorised", _dpsgd(None, "dpsgd-vectorised", engine="vectorised"), 100_000, 20_000, _REAL,
          EPSILONS, "full-batch DP-SGD, the torch vectorised engine, Dirac gradient canary, last iterate"),
    AuditSpec("dpsgd-poisson", _poisson_dpsgd(None, "dpsgd-poisson"), 100_000, 20_000, _REAL, EPSILONS,
          "Poisson-subsampled DP-SGD (q = 0.2), one canary row per run, add/remove, last iterate"),
    AuditSpec("bandit-coupling", _bandit(None, "bandit-coupling"), 10, 2, _REAL, (1.0, 4.0),
          "joint-DP bandit, round-1 neighbours under noise coupling: actions must be bit-identical"),
    AuditSpec("bandit", _bandit_switch(None, "bandit"), 300, 40, _REAL, (1.0, 4.0),
          "joint-DP bandit, round-1 neighbours, first-switch game: round of the first wide-arm play"),
    AuditSpec("gaussian-one-run", _one_run(None, "gaussian-one-run"), 1, 1, _REAL, EPSILONS,
          "Gaussian mechanism audited in ONE release with m canaries (Steinke et al. 2023)"),
    AuditSpec("in-situ", _in_situ("joint", None, "in-situ"), 1, 1, _REAL, (1.0, 4.0),
          "joint-DP bandit (default preset): the trees and DP-SGD refits one run built, audited as built"),
    AuditSpec("in-situ-shuffle", _in_situ("shuffle", None, "in-situ-shuffle"), 1, 1, _REAL, (1.0,),
          "shuffle-DP bandit: the vector sums (and P_GD fits of ≥ 2 rounds) one run built, audited as built"),
    # --- planted bugs: the charge unchanged, the noise halved (or the sensitivity doubled) --------
    AuditSpec("gaussian-one-run-halved-sensitivity",
          _one_run("HalvedSensitivityGaussian", "gaussian-one-run-halved-sensitivity"), 1, 1, _BUG, _ONE,
          "planted: Gaussian noise for Δ/2, audited in one release"),
    AuditSpec("gaussian-halved-sensitivity",
          _with_planted(_gaussian, "HalvedSensitivityGaussian", "gaussian-halved-sensitivity"),
          20_000, 5_000, _BUG, _ONE, "planted: Gaussian noise for Δ/2"),
    AuditSpec("laplace-halved-sensitivity",
          _with_planted(_laplace, "HalvedSensitivityLaplace", "laplace-halved-sensitivity"),
          20_000, 5_000, _BUG, _ONE, "planted: Laplace noise for Δ/2"),
    AuditSpec("tree-depth-unscaled", _tree("DepthUnscaledTree", "tree-depth-unscaled"), 20_000, 2_000, _BUG, _ONE,
          "planted: tree node noise not scaled by √L"),
    AuditSpec("tree-halved-noise", _tree("HalvedNoiseTree", "tree-halved-noise"), 20_000, 5_000, _BUG, _ONE,
          "planted: vector tree charging ρ, node noise σ/2"),
    AuditSpec("tree-matrix-halved-noise", _tree("HalvedNoiseTree", "tree-matrix-halved-noise", shape="matrix"),
          20_000, 5_000, _BUG, _ONE, "planted: the bandit's matrix tree charging ρ, node noise σ/2"),
    AuditSpec("factorization-halved-noise", _tree("HalvedNoiseFactorization", "factorization-halved-noise"),
          20_000, 5_000, _BUG, _ONE, "planted: square-root factorization charging ρ, white noise σ/2"),
    AuditSpec("geometric-reused-sample", _geometric("ReusedSampleGeometricMean", "geometric-reused-sample"),
          5_000, 1_000, _BUG, _ONE, "planted: batch rewards reused in later batches"),
    AuditSpec("geometric-halved-scale", _geometric("HalvedScaleGeometricMean", "geometric-halved-scale"),
          5_000, 1_000, _BUG, _ONE, "planted: each batch charged ε, noised Lap(1/(2ε))"),
    AuditSpec("shuffle-unshuffled", _shuffle("identity_shuffler", "shuffle-unshuffled"), 20_000, 2_000, _BUG, _ONE,
          "planted: a shuffler that does not shuffle"),
    AuditSpec("shuffle-quarter-gamma", _shuffle("QuarterGammaBitSum", "shuffle-quarter-gamma"), 20_000, 5_000, _BUG,
          _ONE, "planted: bit sum charging (ε, δ), randomizing with γ/4 (message level)"),
    AuditSpec("shuffle-release-quarter-gamma",
          _shuffle("QuarterGammaBitSum", "shuffle-release-quarter-gamma", level="release"),
          20_000, 5_000, _BUG, _ONE, "planted: bit sum charging (ε, δ), default method with γ/4"),
    AuditSpec("shuffle-release-halved-count-noise",
          _shuffle("HalvedCountNoiseBitSum", "shuffle-release-halved-count-noise", level="release"),
          100_000, 20_000, _BUG, _ONE,
          "planted: bit sum charging (ε, δ) and debiasing with its public γ, counts drawn with γ/4 (sd halved)"),
    AuditSpec("shuffle-release-raw-sum",
          _shuffle("NearlyNoiselessBitSum", "shuffle-release-raw-sum", level="release"),
          5_000, 1_000, _BUG, _ONE, "planted: bit sum charging (ε, δ), default method releasing the raw sum"),
    AuditSpec("shuffle-vector-quarter-bits",
          _shuffle_vector("QuarterNoiseBitsVectorSum", "shuffle-vector-quarter-bits"),
          40_000, 20_000, _BUG, _ONE, "planted: vector sum charging (ε, δ) with a quarter of the noise bits (sd/2)"),
    AuditSpec("shuffle-pgd-noiseless", _shuffle_pgd("NoiselessPGD", "shuffle-pgd-noiseless"),
          2_000, 1_000, _BUG, _ONE, "planted: P_GD charging its rounds, each with one noise bit per user"),
    AuditSpec("dpsgd-add-remove-noise", _dpsgd("AddRemoveNoiseDPSGD", "dpsgd-add-remove-noise"),
          20_000, 10_000, _BUG, _ONE, "planted: DP-SGD (opacus) noise for sensitivity C, not 2C"),
    AuditSpec("dpsgd-numpy-add-remove-noise",
          _dpsgd("AddRemoveNoiseDPSGD", "dpsgd-numpy-add-remove-noise", engine="numpy"),
          20_000, 10_000, _BUG, _ONE, "planted: DP-SGD (numpy engine) noise for sensitivity C, not 2C"),
    AuditSpec("dpsgd-vectorised-halved-noise",
          _dpsgd("HalvedNoiseVectorisedDPSGD", "dpsgd-vectorised-halved-noise", engine="vectorised"),
          20_000, 10_000, _BUG, _ONE, "planted: DP-SGD's vectorised engine adding σ/2 per step at the same charge"),
    AuditSpec("in-situ-halved-h-tree", _in_situ("joint", "HalvedHTreeBandit", "in-situ-halved-h-tree"), 1, 1, _BUG,
          _ONE, "planted: the joint-DP bandit's H-tree charging its share, node noise σ/2 (in situ)"),
    AuditSpec("dpsgd-poisson-unsampled", _poisson_dpsgd("UnsampledPoissonDPSGD", "dpsgd-poisson-unsampled"),
          20_000, 10_000, _BUG, _ONE, "planted: Poisson DP-SGD charging amplification, every row in every step"),
    AuditSpec("bandit-exact-gram", _bandit("ExactGramBandit", "bandit-exact-gram"), 10, 2, _BUG, (4.0,),
          "planted: the joint-DP bandit deciding from the exact Gram matrix"),
    # n runs per side certify at most ln((1 - δ - p)/p), p = 1 - 0.025^(1/n): 2.3 at the quick 40
    # runs, 4.4 at 300; the planted policy is audited against ε = 1 so both sizes can refute it.
    AuditSpec("bandit-switch-exact-gram", _bandit_switch("ExactGramBandit", "bandit-switch-exact-gram"), 300, 40,
          _BUG, _ONE, "planted: the joint-DP bandit deciding from the exact Gram matrix, first-switch game"),
)}


def get_spec(name: str) -> AuditSpec:
    """The catalogue entry ``name``; ``ValueError`` listing the known names otherwise."""
    if name not in CATALOGUE:
        raise ValueError(f"unknown audit {name!r}; choose one of {sorted(CATALOGUE)} or 'all'")
    return CATALOGUE[name]


def family_confidence(tasks: Sequence[tuple[AuditSpec, float | None]], confidence: float = 0.95) -> list[float]:
    """The confidence each (spec, ε) task runs at: family-wise control over the real-mechanism rows.

    Bonferroni: with m tasks auditing a real mechanism (expected ``"consistent"``),
    each runs at ``1 − (1 − confidence)/m``, so a correct implementation comes out
    all consistent with probability ≥ ``confidence`` (union bound over the m
    rows' false "violated"). Planted-bug rows keep ``confidence`` each: their
    correction would only cost power, and a planted row called consistent is a
    failure of the audit, not a false alarm about a mechanism.
    """
    check_probability("confidence", confidence)
    real = sum(spec.expected == "consistent" for spec, _ in tasks)
    per_real = 1.0 - (1.0 - confidence) / max(real, 1)
    return [per_real if spec.expected == "consistent" else confidence for spec, _ in tasks]
