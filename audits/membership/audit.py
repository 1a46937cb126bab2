"""Membership-inference audit of a training procedure on real records (docs/audits.md, "Membership inference").

``MembershipAudit(fit, score, X, y)`` trains M models, each on its own random half of
the records (:mod:`audits.membership.training`), attacks them (:mod:`audits.membership.attacks`)
and returns a :class:`~audits.membership.result.MembershipResult`: the attack's ROC
(every model attacked by the others), and a certified ε lower bound from the one-run
theorems on the target models with guesses fixed on the reference models
(:mod:`audits.membership.certify`). Bad input is refused in one line naming the argument
before anything is certified.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from accounting.validation import check_int, check_real
from audits.bounds import check_confidence
from audits.custom import as_claim
from audits.membership.attacks import ATTACKS, REFERENCE_ATTACKS, attack_statistics
from audits.membership.certify import choose_rule, count_guesses
from audits.membership.result import MembershipResult
from audits.membership.training import ScoreTable, check_callable, fingerprint, train_models

__all__ = ["MembershipAudit"]

#: δ of the bound when neither ``delta=`` nor a claim gives one.
DEFAULT_DELTA = 1e-5


def _seed(rng: object) -> int:
    """The audit's seed: an int ≥ 0 as given, or one drawn from a numpy Generator."""
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(2**63))
    return check_int("rng", rng, 0)


class MembershipAudit:
    """Train ``models`` models on random halves of (X, y), attack them, certify an ε lower bound.

    Parameters
    ----------
    fit : callable or str
        ``fit(X, y, rng)`` returns a trained model (``rng`` a numpy Generator); a
        top-level function or ``"MODULE:ATTR"``, so that it pickles to worker processes.
    score : callable or str
        ``score(model, X, y)`` returns one finite number per example, higher when the
        model fits it better — e.g. the logit of the true label's probability
        (Carlini et al. 2022, §IV-B); RMIA reads it as that logit.
    X, y : array_like
        The records (n rows) and labels; fit sees the rows of a mask, score all of them.
    attack : {"lira", "lira-offline", "rmia", "loss"}
    models : int
        M ≥ 2 models (≥ 3 for the attacks that read reference models).
    rng : int or numpy.random.Generator
        The seed (an int ≥ 0, or drawn from the Generator): masks and model generators derive from it.
    fixed_variance : bool
        LiRA with one global variance (Carlini et al. 2022, §IV-C).
    references : int, optional
        R, models whose masks the certificate's attacker knows (default ⌈M/2⌉); the other M − R are targets.
    claim : optional
        What ``fit`` claims under add/remove: anything :func:`audits.custom.as_claim` reads.
    delta : float, optional
        δ of the certified bound (default the claim's, else 10⁻⁵).
    gamma : float
        RMIA's γ.
    store : str, optional
        A ``.npz`` file that keeps masks and scores as models finish; an audit given the
        same file resumes (docs/audits.md).
    compute_engine, n_jobs : where models train (``"local"`` or ``"dask"``; docs/engine.md).
    progress : bool
        A progress bar on stderr.
    """

    def __init__(self, fit: Callable[..., Any] | str, score: Callable[..., Any] | str, X: Any, y: Any, *,
                 attack: str = "lira", models: int = 64, rng: int | np.random.Generator = 0,
                 fixed_variance: bool = False, references: int | None = None, claim: object = None,
                 delta: float | None = None, gamma: float = 1.0, store: str | None = None,
                 compute_engine: str = "local", n_jobs: int = 1, progress: bool = True,
                 name: str = "membership") -> None:
        if attack not in ATTACKS:
            raise ValueError(f"attack must be one of {', '.join(ATTACKS)}, got {attack!r}")
        self.n_jobs = check_int("n_jobs", n_jobs)
        self.compute_engine = compute_engine
        parallel = compute_engine != "local" or self.n_jobs > 1
        check_callable(fit, "fit", pickled=parallel)
        check_callable(score, "score", pickled=parallel)
        self.fit, self.score, self.attack = fit, score, attack
        self.X, self.y = self._check_data(X, y)
        least = 3 if attack in REFERENCE_ATTACKS else 2
        self.models = check_int("models", models, 2)
        if self.models < least:
            raise ValueError(f"models must be ≥ {least} for the {attack} attack (reference models to fit and a "
                             f"target), got {self.models}")
        default = math.ceil(self.models / 2)
        self.references = default if references is None else check_int("references", references, least - 1,
                                                                         self.models - 1)
        self.seed = _seed(rng)
        self.fixed_variance = bool(fixed_variance)
        self.claim = None if claim is None else as_claim(claim, delta)
        fallback = self.claim.delta if self.claim is not None and self.claim.delta > 0 else DEFAULT_DELTA
        self.delta = fallback if delta is None else check_real("delta", delta, 0.0, 1.0, high_open=True)
        self.gamma = check_real("gamma", gamma, 0.0, low_open=True)
        self.store, self.progress, self.name = store, bool(progress), str(name)

    @staticmethod
    def _check_data(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        X, y = np.asarray(X), np.asarray(y)
        if X.ndim < 1 or X.shape[0] < 2:
            raise ValueError(f"X must hold at least 2 records (rows), got shape {X.shape}")
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
        return X, y

    def table(self) -> ScoreTable:
        """Every model trained and scored (or read from the store): the masks and scores the attacks read."""
        table = ScoreTable(self.models, self.X.shape[0], self.seed, fingerprint(self.X, self.y, self.fit, self.score),
                           self.store)
        train_models(table, self.fit, self.score, self.X, self.y, compute_engine=self.compute_engine,
                     n_jobs=self.n_jobs, progress=self.progress, name=self.name)
        return table

    def _statistics(self, targets: np.ndarray, scores: np.ndarray, masks: np.ndarray,
                    exclude: np.ndarray | None = None) -> np.ndarray:
        return attack_statistics(self.attack, targets, scores, masks, exclude=exclude,
                                 fixed_variance=self.fixed_variance, gamma=self.gamma)

    def run(self, confidence: float = 0.95) -> MembershipResult:
        """Train (or resume), attack, certify: the result holds the ROC and the one-run counts.

        ``confidence`` is the probability that the certified bound is valid (over the
        masks and the training randomness).
        """
        confidence = check_confidence(confidence)
        start = time.perf_counter()
        table = self.table()
        attack_start = time.process_time()
        scores, masks, count = table.scores, table.masks, self.models
        everyone = self._statistics(scores, scores, masks, exclude=np.arange(count))
        references = self.references
        reference_scores, reference_masks = scores[:references], masks[:references]
        held = self._statistics(reference_scores, reference_scores, reference_masks, exclude=np.arange(references))
        targets = self._statistics(scores[references:], reference_scores, reference_masks)
        rule = choose_rule(held, reference_masks, count - references, self.delta, confidence)
        canaries, guesses, correct = count_guesses(rule, targets, masks[references:])
        attack_seconds = time.process_time() - attack_start
        return MembershipResult(
            attack=self.attack, fixed_variance=self.fixed_variance, models=count, references=references,
            targets=count - references, examples=self.X.shape[0], canaries=canaries, guesses=guesses,
            correct=correct, threshold_in=rule.threshold_in, threshold_out=rule.threshold_out, delta=self.delta,
            confidence=confidence, training_cpu_seconds=float(table.cpu.sum()), attack_cpu_seconds=attack_seconds,
            seconds=time.perf_counter() - start, seed=self.seed, name=self.name, claim=self.claim,
            statistics=everyone, masks=masks.copy(),
        )
