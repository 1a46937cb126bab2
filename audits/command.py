"""``dpglm audit NAME|all``: run privacy audits, print the table, save JSON and score plots.

For every audit and ε it prints the claimed (ε, δ), the certified lower bound
at 95 %, the runs used and the verdict; it writes ``NAME-epsE.json`` (the full
result record) and ``NAME-epsE.png`` (histograms of the chosen statistic on
the two neighbours, with the threshold) under ``--out``, and a summary
``summary.json`` / ``summary.csv`` (JSON strict: an infinite bound is ``null``).
The bandit coupling audits have no score distribution (their output is two
action sequences) and no plot. ``--engine``, ``--jobs``, ``--address`` choose
where the independent run-chunks are computed (:mod:`audits.engine`). The exit
status is 0 when every real mechanism is "consistent" and every planted bug
"violated", 1 otherwise; a user error is one line on stderr and status 2.
The real-mechanism rows are certified at a Bonferroni-corrected confidence
(:func:`audits.catalogue.family_confidence`), so a correct table exits 0 with
probability ≥ 95 %; planted-bug rows keep 95 % each. Both levels are printed.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time

from audits.base import Audit
from audits.catalogue import CATALOGUE, family_confidence, get_spec
from audits.engine import engine_session
from dpglm.engine.engine import add_engine_arguments, engine_from_args
from dpglm.engine.results import strict_json

SUMMARY_FIELDS = ("audit", "expected", "verdict", "claimed_epsilon", "claimed_delta", "epsilon_lower_bound",
                  "ratio", "method", "statistic", "runs", "holdout_runs", "confidence", "seed", "seconds")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="MECHANISM",
                        help=f"an audit name or 'all': {', '.join(sorted(CATALOGUE))}")
    parser.add_argument("--runs", type=int, default=None,
                        help="main runs per neighbour (default: the audit's own, see audits/catalogue.py)")
    parser.add_argument("--epsilon", type=float, action="append", default=None,
                        help="target ε (repeatable; default 0.5, 1, 2, 4 for mechanisms, 1 for planted bugs)")
    parser.add_argument("--quick", action="store_true", help="small run counts and sizes (about a minute for all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every audit's generator (default 0)")
    parser.add_argument("--out", default=os.path.join("results", "audits"),
                        help="directory for JSON results and PNG plots (default results/audits)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG score plots")
    add_engine_arguments(parser, jobs=2)


def _plot(result, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    null, alternative = result.scores_null, result.scores_alternative
    pooled = np.concatenate([null, alternative])
    low, high = np.quantile(pooled, [0.001, 0.999])
    integer = np.all(pooled == np.round(pooled)) and high - low <= 200
    edges = np.arange(low - 0.5, high + 1.5) if integer else np.linspace(low, high, 80)
    bins: list[float] = edges.tolist()
    figure, axis = plt.subplots(figsize=(6.4, 3.8))
    axis.hist(null, bins=bins, alpha=0.55, density=True, label="D0 (null)")
    axis.hist(alternative, bins=bins, alpha=0.55, density=True, label="D1 (alternative)")
    axis.axvline(result.threshold, color="black", linestyle="--", linewidth=1, label="threshold")
    axis.set_xlabel(result.statistic)
    axis.set_ylabel("density")
    axis.set_title(f"{result.audit}: claimed ε={result.claimed_epsilon:.3g}, "
                   f"certified ε≥{result.epsilon_lower_bound:.3g} ({result.verdict})", fontsize=9)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def run(args: argparse.Namespace) -> int:
    names = sorted(CATALOGUE, key=lambda n: (CATALOGUE[n].expected, n)) if args.name == "all" else [args.name]
    specs = [get_spec(name) for name in names]
    if args.runs is not None and args.runs < 10:
        raise ValueError(f"--runs must be ≥ 10, got {args.runs}")
    if args.epsilon is not None and not all(e > 0 for e in args.epsilon):
        raise ValueError(f"--epsilon must be > 0, got {args.epsilon}")
    if args.seed < 0:
        raise ValueError(f"--seed must be ≥ 0, got {args.seed}")
    engine = engine_from_args(args)  # an optional engine that is not installed: ImportError naming it
    args.engine = engine.engine
    os.makedirs(args.out, exist_ok=True)
    tasks = [(spec, eps) for spec in specs for eps in (args.epsilon or spec.epsilons)]
    with engine_session(engine) as running:
        rows, failures, elapsed = _run_tasks(tasks, args)
        print(running.summary(), file=sys.stderr)
    levels = family_confidence(tasks)
    real = [level for (spec, _), level in zip(tasks, levels, strict=True) if spec.expected == "consistent"]
    family = (f"family-wise: {len(real)} real-mechanism rows at confidence {real[0]:.5f} each (Bonferroni: a correct "
              f"table is all consistent w.p. ≥ 95%); planted-bug rows at 0.95 each") if real else \
        "planted-bug rows at 0.95 each"
    print(family)
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as handle:
        handle.write(strict_json({"rows": rows, "seconds": elapsed, "quick": args.quick, "family_wise": family,
                                  "real_row_confidence": real[0] if real else None,
                                  "planted_row_confidence": 0.95}, indent=2))
    with open(os.path.join(args.out, "summary.csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=SUMMARY_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} audits in {elapsed:.1f} s; {len(rows) - failures} as expected, {failures} not; "
          f"results in {args.out}")
    return 1 if failures else 0


def _run_tasks(tasks: list, args: argparse.Namespace) -> tuple[list[dict], int, float]:
    """Run every (spec, ε) task, save its JSON (and plot), print its line; rows, failures, seconds."""
    from tqdm import tqdm

    rows, failures, start = [], 0, time.perf_counter()
    levels = family_confidence(tasks)  # Bonferroni over the real-mechanism rows (audits.catalogue)
    for (spec, eps), level in tqdm(list(zip(tasks, levels, strict=True)), desc="audits", unit="audit", file=sys.stderr):
        audit = spec.build(eps, args.quick)
        if isinstance(audit, Audit):
            audit.compute_engine, audit.n_jobs = args.engine, args.jobs
        runs = args.runs or (spec.quick_runs if args.quick else spec.runs)
        result = audit.run(runs, seed=args.seed, confidence=level)
        stem = os.path.join(args.out, f"{spec.name}-eps{eps:g}")
        with open(stem + ".json", "w", encoding="utf-8") as handle:
            record = result.to_dict() if hasattr(result, "to_dict") else json.loads(result.to_json())
            handle.write(strict_json(record, indent=2, sort_keys=True))
        if not args.no_plots and hasattr(result, "scores_null"):
            _plot(result, stem + ".png")
        ok = result.verdict == spec.expected
        failures += not ok
        row = {field: getattr(result, field, None) for field in SUMMARY_FIELDS}
        row["expected"], row["confidence"] = spec.expected, level
        rows.append(row)
        tqdm.write(result.summary() + ("" if ok else f"   <-- expected {spec.expected}"), file=sys.stdout)
    return rows, failures, time.perf_counter() - start
