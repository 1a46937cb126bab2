"""Empirical privacy audits: certified lower bounds on ε from many runs of the real mechanisms.

- :mod:`audits.bounds` — Clopper–Pearson, Gaussian-DP and one-run ε lower bounds.
- :mod:`audits.custom` — :class:`MechanismAudit`: audit anyone's mechanism (two neighbours, a claim, a score).
- :mod:`audits.base` — the audit game (held-out threshold, certification, verdict) and its result record.
- :mod:`audits.noise`, :mod:`audits.tree` (binary tree and square-root factorization, vector and
  matrix paths), :mod:`audits.geometric`, :mod:`audits.shuffle` (bit sum, message level and release),
  :mod:`audits.shuffle_vector` (vector sum, P_GD), :mod:`audits.dpsgd` — one audit per mechanism
  family, each with its worst-case pair and statistic, driving the mechanism's public API.
- :mod:`audits.one_run` — the Gaussian mechanism audited in a single release with canaries.
- :mod:`audits.membership` — membership-inference audits of a training procedure on real records (LiRA,
  RMIA, the loss attack; ROC and a one-run ε lower bound).
- :mod:`audits.dpsgd_canary`, :mod:`audits.dpsgd_whitebox` — DP-SGD on real data with crafted canaries:
  black box (final model) and white box in two runs.
- :mod:`audits.bandit` — the noise-coupling audit of the joint-DP bandit.
- :mod:`audits.bandit_switch` — a certified ε lower bound for the joint-DP bandit (first-switch game).
- :mod:`audits.engine` — where the independent run-chunks are computed (``--engine local|dask``).
- :mod:`audits.planted` — deliberately broken variants that the audits must refute.
- :mod:`audits.catalogue`, :mod:`audits.command` — ``dpglm audit NAME|all``.
"""

from audits.bandit import BanditCouplingAudit
from audits.bandit_switch import BanditSwitchAudit
from audits.base import Audit, AuditResult, Claim
from audits.bounds import (
    epsilon_lower_bound,
    gdp_mu_lower_bound,
    one_run_epsilon_lower_bound,
    one_run_fdp_epsilon_lower_bound,
    one_run_gdp_epsilon_lower_bound,
)
from audits.catalogue import CATALOGUE, AuditSpec, get_spec
from audits.custom import MechanismAudit, as_claim
from audits.dpsgd import DPSGDAudit
from audits.geometric import GeometricBatchAudit
from audits.in_situ import InSituAudit
from audits.noise import GaussianAudit, LaplaceAudit
from audits.one_run import OneRunGaussianAudit
from audits.poisson_dpsgd import PoissonDPSGDAudit
from audits.shuffle import ShuffleBitSumAudit, ShuffleBitSumReleaseAudit
from audits.shuffle_vector import ShufflePGDAudit, ShuffleVectorSumAudit
from audits.tree import TreeAudit

__all__ = [
    "CATALOGUE",
    "DPSGDAudit",
    "Audit",
    "AuditResult",
    "AuditSpec",
    "BanditCouplingAudit",
    "BanditSwitchAudit",
    "Claim",
    "GaussianAudit",
    "GeometricBatchAudit",
    "InSituAudit",
    "LaplaceAudit",
    "MechanismAudit",
    "OneRunGaussianAudit",
    "PoissonDPSGDAudit",
    "ShuffleBitSumAudit",
    "ShuffleBitSumReleaseAudit",
    "ShufflePGDAudit",
    "ShuffleVectorSumAudit",
    "TreeAudit",
    "as_claim",
    "epsilon_lower_bound",
    "gdp_mu_lower_bound",
    "get_spec",
    "one_run_epsilon_lower_bound",
    "one_run_fdp_epsilon_lower_bound",
    "one_run_gdp_epsilon_lower_bound",
]
