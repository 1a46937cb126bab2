"""``dpglm audit --membership FIT,SCORE --data NAME``: a membership-inference audit from the command line.

``FIT,SCORE`` is two ``MODULE:ATTR`` names (MODULE dotted, found from the current
directory too) or one built-in training procedure of :mod:`audits.membership.models`:
``logistic``, ``mlp`` (scikit-learn), ``numpy-logistic`` (numpy only) or ``dpsgd`` (the
project's DP-SGD at each ``--epsilon``, δ = 10⁻⁵, the claim set accordingly). ``--data`` is
a set of :mod:`audits.membership.data` or a ``PATH.npz`` holding ``X`` and ``y``.

Every ``--attack`` (default: all four) runs on the same trained models: they are trained
once into ``OUT/membership-DATA-MODEL[-epsE]/scores.npz``, and a rerun with the same
``--out`` resumes from that store. Per attack it prints the ROC numbers and the certified
bounds beside their ceilings, and writes ``ATTACK.json``, ``ATTACK-roc.csv`` and
``ATTACK-roc.png`` (log–log ROC); ``summary.json`` and ``summary.csv`` hold every row.
Exit status 1 when a claimed ε is refuted, else 0; a user error is one line, status 2.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from audits.membership.attacks import ATTACKS

__all__ = ["BUILT_IN", "add_arguments", "run"]

#: Built-in training procedures: name → (fit, score) as MODULE:ATTR.
BUILT_IN = {
    "logistic": ("audits.membership.models:logistic_fit", "audits.membership.models:logit_score"),
    "mlp": ("audits.membership.models:mlp_fit", "audits.membership.models:logit_score"),
    "numpy-logistic": ("audits.membership.models:numpy_logistic_fit", "audits.membership.models:logit_score"),
}
SUMMARY_FIELDS = ("name", "attack", "fixed_variance", "models", "examples", "tpr_at_0.1%_fpr", "tpr_at_1%_fpr", "auc",
                  "canaries", "guesses", "correct", "epsilon_lower_bound", "steinke", "steinke_ceiling", "fdp",
                  "fdp_ceiling", "mu_lower_bound_gaussian", "epsilon_assuming_gaussian", "claimed_epsilon",
                  "claimed_delta", "verdict", "training_cpu_seconds", "attack_cpu_seconds")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The membership flags of ``dpglm audit``."""
    group = parser.add_argument_group("membership inference (docs/audits.md, 'Membership inference')")
    group.add_argument("--membership", metavar="FIT,SCORE", default=None,
                       help="audit a training procedure: MODULE:FIT,MODULE:SCORE, or one of "
                            f"{', '.join([*BUILT_IN, 'dpsgd'])}")
    group.add_argument("--data", default=None, help="digits, digits-binary, breast-cancer, generated or PATH.npz")
    group.add_argument("--attack", action="append", choices=ATTACKS, default=None,
                       help="repeatable; default all four")
    group.add_argument("--models", type=int, default=None, help="models to train (default 64; 16 with --quick)")
    group.add_argument("--fixed-variance", action="store_true", help="LiRA with one global variance")
    group.add_argument("--claim", metavar="EPS,DELTA", default=None,
                       help="what FIT claims under add/remove (dpsgd: its --epsilon and δ = 1e-5)")


def _procedures(args: argparse.Namespace) -> list[tuple[str, Callable[..., Any] | str, str,
                                                       tuple[float, float] | None]]:
    """(label, fit, score, claim) per audit the flags ask for."""
    from audits.membership.models import DPSGDLogistic

    target = args.membership.strip()
    claim = _claim(args.claim)
    if target == "dpsgd":
        if claim is not None:
            raise ValueError("--claim: the dpsgd model's claim is its --epsilon (δ = 1e-5)")
        return [(f"dpsgd-eps{eps:g}", DPSGDLogistic(eps), "audits.membership.models:logit_score",
                 DPSGDLogistic(eps).claim) for eps in (args.epsilon or [4.0])]
    if args.epsilon is not None:
        raise ValueError("--epsilon applies to --membership dpsgd only (use --claim EPS,DELTA for your own fit)")
    if target in BUILT_IN:
        fit, score = BUILT_IN[target]
        return [(target, fit, score, claim)]
    parts = [part.strip() for part in target.split(",")]
    if len(parts) != 2 or not all(":" in part for part in parts):
        raise ValueError(f"--membership must be MODULE:FIT,MODULE:SCORE or one of {', '.join([*BUILT_IN, 'dpsgd'])}, "
                         f"got {target!r}")
    return [(parts[0].rpartition(":")[2], parts[0], parts[1], claim)]


def _claim(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    parts = text.split(",")
    try:
        epsilon, delta = (float(parts[0]), float(parts[1]) if len(parts) > 1 else 0.0)
    except ValueError:
        raise ValueError(f"--claim must be EPS or EPS,DELTA (numbers), got {text!r}") from None
    if len(parts) > 2:
        raise ValueError(f"--claim must be EPS or EPS,DELTA, got {text!r}")
    return epsilon, delta


def run(args: argparse.Namespace) -> int:
    """Train once per procedure, run every attack, print, save; exit status as the module docstring says."""
    from audits.engine import engine_session
    from audits.membership.audit import MembershipAudit
    from audits.membership.data import load
    from dpglm.engine.engine import engine_from_args
    from dpglm.engine.results import prepare_output

    if args.name is not None or args.mechanism is not None:
        raise ValueError("--membership audits a training procedure: give it without an audit name or --mechanism")
    procedures = _procedures(args)
    if args.data is None:
        raise ValueError("--membership needs --data (digits, digits-binary, breast-cancer, generated or PATH.npz)")
    if args.runs is not None:
        raise ValueError("--runs does not apply to --membership: its size is --models")
    if args.seed < 0:
        raise ValueError(f"--seed must be ≥ 0, got {args.seed}")
    models = args.models if args.models is not None else 16 if args.quick else 64
    attacks = list(dict.fromkeys(args.attack or ATTACKS))
    X, y = load(args.data)
    engine = engine_from_args(args)
    data_label = os.path.splitext(os.path.basename(args.data))[0]
    refuted, start = 0, time.perf_counter()
    with engine_session(engine) as running:
        for label, fit, score, claim in procedures:
            folder = str(prepare_output(os.path.join(args.out, f"membership-{data_label}-{label}"
                                                     + ("-quick" if args.quick else ""))))
            rows = []
            for attack in attacks:
                audit = MembershipAudit(fit, score, X, y, attack=attack, models=models, rng=args.seed,
                                        fixed_variance=args.fixed_variance, claim=claim,
                                        store=os.path.join(folder, "scores.npz"), compute_engine=engine.engine,
                                        n_jobs=engine.jobs, name=f"{data_label}-{label}")
                result = audit.run()
                result.save(folder)
                if not args.no_plots:
                    result.plot(os.path.join(folder, f"{attack}{'-fixed-variance' * result.fixed_variance}-roc.png"))
                print(result.summary(), flush=True)
                refuted += result.verdict == "violated"
                record = result.to_dict()
                rows.append({key: record[key] for key in SUMMARY_FIELDS})
            _write_summary(folder, rows, time.perf_counter() - start)
            print(f"results in {folder}", file=sys.stderr)
        if running.pids or running.failures:  # where the work ran, said only when some left this process
            print(running.summary(), file=sys.stderr)
    return 1 if refuted else 0


def _write_summary(folder: str, rows: list[dict], seconds: float) -> None:
    from dpglm.engine.results import strict_json

    with open(os.path.join(folder, "summary.json"), "w", encoding="utf-8") as handle:
        handle.write(strict_json({"rows": rows, "seconds": seconds}, indent=2))
    with open(os.path.join(folder, "summary.csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=SUMMARY_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
