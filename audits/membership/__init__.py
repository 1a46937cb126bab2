"""Membership-inference audits of trained models (docs/audits.md, "Membership inference").

- :mod:`audits.membership.audit` — :class:`MembershipAudit`: train M models on random halves, attack, certify.
- :mod:`audits.membership.training` — masks, one fit per model on the engine, the resumable store.
- :mod:`audits.membership.attacks` — LiRA (online, offline, fixed variance), RMIA, the loss threshold.
- :mod:`audits.membership.certify` — one-run guesses fixed on reference models, their ε lower bounds.
- :mod:`audits.membership.result` — :class:`MembershipResult`: ROC, TPR at low FPR, AUC, bounds, plot, files.
- :mod:`audits.membership.models` — fit/score pairs: numpy and scikit-learn logistic regression, an MLP, DP-SGD.
- :mod:`audits.membership.data` — scikit-learn's bundled sets and generated data (no download).
"""

from audits.membership.attacks import ATTACKS
from audits.membership.audit import MembershipAudit
from audits.membership.result import MembershipResult

__all__ = ["ATTACKS", "MembershipAudit", "MembershipResult"]
