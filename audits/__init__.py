"""Empirical privacy audits: certified lower bounds on ε from many runs of the real mechanisms.

- :mod:`audits.bounds` — Clopper–Pearson, Gaussian-DP and one-run ε lower bounds.
- :mod:`audits.base` — the audit game (held-out threshold, certification, verdict) and its result record.
- :mod:`audits.noise`, :mod:`audits.tree` (binary tree and square-root factorization, vector and
  matrix paths), :mod:`audits.geometric`, :mod:`audits.shuffle` (bit sum, message level and release),
  :mod:`audits.shuffle_vector` (vector sum, P_GD), :mod:`audits.dpsgd` — one audit per mechanism
  family, each with its worst-case pair and statistic, driving the mechanism's public API.
- :mod:`audits.one_run` — the Gaussian mechanism audited in a single release with canaries.
- :mod:`audits.bandit` — the noise-coupling audit of the joint-DP bandit.
- :mod:`audits.bandit_switch` — a certified ε lower bound for the joint-DP bandit (first-switch game).
- :mod:`audits.engine` — where the independent run-chunks are computed (``--engine local|dask``).
- :mod:`audits.planted` — deliberately broken variants that the audits must refute.
- :mod:`audits.catalogue`, :mod:`audits.command` — ``dpglm audit NAME|all``.
"""
