"""The outcome of a membership audit: the attack's ROC and the one-run ε lower bounds.

Two views of the same trained models (docs/audits.md, "Membership inference"):

* the **ROC** (:meth:`MembershipResult.roc`, :meth:`~MembershipResult.tpr_at`,
  :attr:`~MembershipResult.auc`): every model attacked in turn by the others
  (leave-one-out, Carlini et al. 2022, §V-A), over all (example, model) pairs. It
  measures the attack; the pairs share models and thresholds, so it is not a sample of
  independent trials and no confidence interval on it is a privacy certificate;
* the **certificate** (:meth:`~MembershipResult.epsilon_lower_bound`): the one-run
  guesses on the target models, fixed on the reference models (:mod:`audits.membership.certify`).

What is saved (CSV, JSON, PNG) are aggregates of attacks on the audited records:
meant for the data's owner, not for publication — they are not releases of a ledger.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from accounting.validation import check_real
from audits.base import Claim
from audits.bounds import check_confidence
from audits.membership.certify import OneRunBounds, one_run_bounds

__all__ = ["MembershipResult"]


@dataclass(frozen=True)
class MembershipResult:
    """One attack on one set of trained models: ROC, the one-run counts, costs.

    Attributes
    ----------
    attack : str
        The attack (``"lira"``, ``"lira-offline"``, ``"rmia"``, ``"loss"``), ``fixed_variance`` its LiRA option.
    models, references, targets, examples : int
        Models trained (M = R + t) and examples n.
    canaries, guesses, correct : int
        m = t·K canaries, r guesses, v right (the certificate's counts).
    delta, confidence : float
        Those of :attr:`bound` (``epsilon_lower_bound`` recomputes at others).
    training_cpu_seconds, attack_cpu_seconds, seconds : float
        CPU time of fitting and scoring all models (summed over workers), of the attack, and wall time.
    claim : Claim or None
        What the models' training claims, if given; ``verdict`` compares the certified ε with it.
    """

    attack: str
    fixed_variance: bool
    models: int
    references: int
    targets: int
    examples: int
    canaries: int
    guesses: int
    correct: int
    threshold_in: float
    threshold_out: float
    delta: float
    confidence: float
    training_cpu_seconds: float
    attack_cpu_seconds: float
    seconds: float
    seed: int
    name: str
    claim: Claim | None
    statistics: np.ndarray = field(repr=False, compare=False)
    masks: np.ndarray = field(repr=False, compare=False)

    # -- the attack's ROC (leave-one-out over every model) -----------------------------------------
    @cached_property
    def _curve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        values, labels = self.statistics.ravel(), self.masks.ravel()
        order = np.argsort(-values, kind="stable")
        values, labels = values[order], labels[order]
        last = np.flatnonzero(np.diff(values) != 0)  # the last index of each run of equal statistics
        ends = np.concatenate([last, [values.size - 1]]) if values.size else np.array([], dtype=int)
        true_positives = np.cumsum(labels)[ends]
        false_positives = (ends + 1) - true_positives
        positives, negatives = max(int(labels.sum()), 1), max(int(labels.size - labels.sum()), 1)
        fpr = np.concatenate([[0.0], false_positives / negatives])
        tpr = np.concatenate([[0.0], true_positives / positives])
        thresholds = np.concatenate([[math.inf], values[ends]])
        return fpr, tpr, thresholds

    def roc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(FPR, TPR, thresholds): "member" when the statistic is at least the threshold; ties step together."""
        fpr, tpr, thresholds = self._curve
        return fpr.copy(), tpr.copy(), thresholds.copy()

    def tpr_at(self, fpr: float) -> float:
        """The highest TPR of a threshold whose FPR is at most ``fpr`` (Carlini et al. 2022's TPR at low FPR)."""
        fpr = check_real("fpr", fpr, 0.0, 1.0)
        rates, tpr, _ = self._curve
        return float(tpr[rates <= fpr].max())

    @cached_property
    def auc(self) -> float:
        """Area under the ROC: P[a member's statistic > a non-member's], ties counted ½ (Mann–Whitney)."""
        values, labels = self.statistics.ravel(), self.masks.ravel()
        ranks = _average_ranks(values)
        positives = int(labels.sum())
        negatives = labels.size - positives
        if positives == 0 or negatives == 0:
            return math.nan
        return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))

    # -- the certificate ---------------------------------------------------------------------------
    @cached_property
    def bound(self) -> OneRunBounds:
        """The one-run bounds at the audit's δ and confidence."""
        return one_run_bounds(self.canaries, self.guesses, self.correct, self.delta, self.confidence)

    def epsilon_lower_bound(self, delta: float | None = None, confidence: float = 0.95) -> OneRunBounds:
        """The one-run bounds of the fixed guesses at ``delta`` (default the audit's) and ``confidence``.

        Each call is valid on its own; reporting the best of many calls is a choice made
        after seeing the counts, which the stated confidence does not cover.
        """
        delta = self.delta if delta is None else check_real("delta", delta, 0.0, 1.0, high_open=True)
        confidence = check_confidence(confidence)
        if delta == self.delta and confidence == self.confidence:
            return self.bound
        return one_run_bounds(self.canaries, self.guesses, self.correct, delta, confidence)

    @property
    def verdict(self) -> str | None:
        """"violated" if the assumption-free bound exceeds the claimed ε, else "consistent"; None without a claim."""
        if self.claim is None:
            return None
        return "violated" if self.bound.epsilon > self.claim.epsilon else "consistent"

    # -- output ------------------------------------------------------------------------------------
    def summary(self) -> str:
        """Two lines: the attack's ROC numbers and cost, then the certificate beside its ceilings (and the verdict)."""
        variant = " (fixed variance)" if self.fixed_variance else ""
        head = (f"{self.name}: {self.attack}{variant}, {self.models} models ({self.references} reference + "
                f"{self.targets} target), {self.examples} examples: TPR {self.tpr_at(0.001):.4f} at 0.1% FPR, "
                f"{self.tpr_at(0.01):.4f} at 1% FPR, AUC {self.auc:.4f}; CPU {self.training_cpu_seconds:.2f} s "
                f"training, {self.attack_cpu_seconds:.2f} s attack")
        claim = "" if self.claim is None else f"claimed ε={self.claim.epsilon:g} (δ={self.claim.delta:g}): "
        verdict = "" if self.verdict is None else f": {self.verdict}"
        return f"{head}\n  {claim}{self.bound.summary()}{verdict}"

    def to_dict(self) -> dict:
        """Every number, JSON-ready (the arrays stay out; :meth:`save` writes the ROC as CSV)."""
        bound = self.bound
        return {
            "name": self.name, "attack": self.attack, "fixed_variance": self.fixed_variance, "models": self.models,
            "references": self.references, "targets": self.targets, "examples": self.examples, "seed": self.seed,
            "tpr_at_0.1%_fpr": self.tpr_at(0.001), "tpr_at_1%_fpr": self.tpr_at(0.01), "auc": self.auc,
            "canaries": self.canaries, "guesses": self.guesses, "correct": self.correct,
            "threshold_in": self.threshold_in, "threshold_out": self.threshold_out,
            "delta": self.delta, "confidence": self.confidence,
            "epsilon_lower_bound": bound.epsilon, "steinke": bound.steinke, "steinke_ceiling": bound.steinke_ceiling,
            "fdp": bound.fdp, "fdp_ceiling": bound.fdp_ceiling, "mu_lower_bound_gaussian": bound.mu,
            "mu_ceiling_gaussian": bound.mu_ceiling, "epsilon_assuming_gaussian": bound.gaussian_epsilon,
            "epsilon_assuming_gaussian_ceiling": bound.gaussian_epsilon_ceiling,
            "claimed_epsilon": None if self.claim is None else self.claim.epsilon,
            "claimed_delta": None if self.claim is None else self.claim.delta, "verdict": self.verdict,
            "training_cpu_seconds": self.training_cpu_seconds, "attack_cpu_seconds": self.attack_cpu_seconds,
            "seconds": self.seconds,
        }

    def save(self, folder: str) -> list[str]:
        """Write ``ATTACK.json`` (:meth:`to_dict`) and ``ATTACK-roc.csv`` (fpr, tpr, threshold) under ``folder``."""
        from dpglm.engine.results import strict_json

        os.makedirs(folder, exist_ok=True)
        stem = os.path.join(folder, self.attack + ("-fixed-variance" if self.fixed_variance else ""))
        with open(stem + ".json", "w", encoding="utf-8") as handle:
            handle.write(strict_json(self.to_dict(), indent=2, sort_keys=True))
        fpr, tpr, thresholds = self.roc()
        with open(stem + "-roc.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["fpr", "tpr", "threshold"])
            writer.writerows(zip(fpr.tolist(), tpr.tolist(), thresholds.tolist(), strict=True))
        return [stem + ".json", stem + "-roc.csv"]

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str)

    def plot(self, path: str) -> None:
        """The ROC on log–log axes (Carlini et al. 2022's convention), the chance line, the bound in the title."""
        from matplotlib.figure import Figure

        fpr, tpr, _ = self.roc()
        keep = (fpr > 0) & (tpr > 0)
        figure = Figure(figsize=(5.2, 4.6))
        axes = figure.subplots()
        floor = 1.0 / max(int((~self.masks).sum()), 1)
        axes.plot([floor, 1], [floor, 1], color="0.6", linestyle="--", linewidth=1, label="chance")
        axes.plot(fpr[keep], tpr[keep], linewidth=1.6, label=f"{self.attack} (AUC {self.auc:.3f})")
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlim(floor, 1)
        axes.set_ylim(floor, 1)
        axes.set_xlabel("false-positive rate")
        axes.set_ylabel("true-positive rate")
        axes.legend(loc="lower right")
        bound = self.bound
        axes.set_title(f"{self.name}: {self.attack}, {self.models} models\ncertified ε≥{bound.epsilon:.3g} "
                       f"(ceiling {max(bound.steinke_ceiling, bound.fdp_ceiling):.3g}) at δ={self.delta:g}",
                       fontsize=9)
        figure.tight_layout()
        figure.savefig(path, dpi=120)


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.concatenate([[0], np.flatnonzero(np.diff(ordered) != 0) + 1])
    ends = np.concatenate([starts[1:], [ordered.size]])
    average = (starts + ends + 1) / 2.0
    ranks = np.empty(values.size)
    ranks[order] = np.repeat(average, ends - starts)
    return ranks
