"""``dpglm audit NAME|all`` and ``dpglm audit --mechanism MODULE:ATTRIBUTE``: run privacy audits, print, save.

For every audit and ε it prints the claimed (ε, δ), the certified lower bound,
its confidence level, the runs used and the verdict, each line tagged
``[real]`` or ``[planted]``; it writes ``NAME-epsE.json`` (the full result
record) and ``NAME-epsE.png`` (histograms of the chosen statistic on the two
neighbours, with the threshold, titled with the certified bound only) under
``--out``/FOLDER — FOLDER the audit's name, ``all``, or the user audit's name,
``-quick`` appended for ``--quick`` — so no command overwrites another's
results; and a summary
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
from audits.catalogue import CATALOGUE, AuditSpec, family_confidence, get_spec
from audits.custom import MechanismAudit
from audits.engine import engine_session
from audits.membership import command as membership_command
from audits.plot import plot_result
from dpglm.engine.engine import add_engine_arguments, engine_from_args
from dpglm.engine.results import prepare_output, strict_json

SUMMARY_FIELDS = ("audit", "planted", "expected", "verdict", "claimed_epsilon", "claimed_delta", "epsilon_lower_bound",
                  "ratio", "method", "statistic", "runs", "holdout_runs", "confidence", "ceiling", "observed_ceiling",
                  "seed", "seconds")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="MECHANISM", nargs="?", default=None,
                        help=f"an audit name or 'all': {', '.join(sorted(CATALOGUE))}")
    parser.add_argument("--mechanism", metavar="MODULE:ATTRIBUTE", default=None,
                        help="audit your own mechanism: an audits.MechanismAudit (or a function returning one) "
                             "at MODULE:ATTRIBUTE (MODULE a dotted name or a .py path); its planted= variant too")
    parser.add_argument("--runs", type=int, default=None,
                        help="main runs per neighbour (default: the audit's own, see audits/catalogue.py)")
    parser.add_argument("--epsilon", type=float, action="append", default=None,
                        help="target ε (repeatable; default 0.5, 1, 2, 4 for mechanisms, 1 for planted bugs)")
    parser.add_argument("--quick", action="store_true", help="small run counts and sizes (all: about 100 CPU-seconds)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every audit's generator (default 0)")
    parser.add_argument("--out", default=os.path.join("results", "audits"),
                        help="directory for JSON results and PNG plots, each command in its own subfolder: "
                             "OUT/NAME, OUT/all, OUT/NAME-quick, ... (default results/audits)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG score plots")
    add_engine_arguments(parser, jobs=2)
    membership_command.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.membership is not None:
        return membership_command.run(args)
    if (args.name is None) == (args.mechanism is None):
        raise ValueError("give an audit name (or 'all') or --mechanism MODULE:ATTRIBUTE, not both or neither")
    if args.mechanism is not None:
        specs = custom_specs(args.mechanism)
        folder = specs[0].name
    else:
        names = sorted(CATALOGUE, key=lambda n: (CATALOGUE[n].expected, n)) if args.name == "all" else [args.name]
        specs, folder = [get_spec(name) for name in names], args.name
    if args.runs is not None and args.runs < 10:
        raise ValueError(f"--runs must be ≥ 10, got {args.runs}")
    if args.epsilon is not None and not all(e > 0 for e in args.epsilon):
        raise ValueError(f"--epsilon must be > 0, got {args.epsilon}")
    if args.seed < 0:
        raise ValueError(f"--seed must be ≥ 0, got {args.seed}")
    # Every command writes into its own subfolder, so no command overwrites another's summary or plots.
    engine = engine_from_args(args)  # an optional engine that is not installed: ImportError naming it
    args.engine = engine.engine
    # Checked and made before any work (errors name --out).
    args.out = str(prepare_output(os.path.join(args.out, folder + ("-quick" if args.quick else ""))))
    tasks: list[tuple[AuditSpec, float | None]] = (
        [(spec, eps) for spec in specs for eps in (args.epsilon or spec.epsilons)] if args.mechanism is None
        else [(spec, None) for spec in specs])  # a user audit carries its own claim: no ε grid
    with engine_session(engine) as running:
        rows, failures, elapsed = _run_tasks(tasks, args)
        if running.pids or running.failures:  # where the work ran, said only when some left this process
            print(running.summary(), file=sys.stderr)
    levels = family_confidence(tasks)
    real = [level for (spec, _), level in zip(tasks, levels, strict=True) if spec.expected == "consistent"]
    family = (f"family-wise: {len(real)} real-mechanism rows at confidence {real[0]:.5f} each,\n"
              f"    so a correct table is all consistent w.p. ≥ 95% (Bonferroni); planted-bug rows at 0.95 each"
              ) if real else "planted-bug rows at 0.95 each"
    print(family)
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as handle:
        handle.write(strict_json({"rows": rows, "seconds": elapsed, "quick": args.quick, "family_wise": family,
                                  "real_row_confidence": real[0] if real else None,
                                  "planted_row_confidence": 0.95}, indent=2))
    with open(os.path.join(args.out, "summary.csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=SUMMARY_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} audits in {elapsed:.1f} s; {len(rows) - failures} as expected, {failures} not")
    print(f"results in {args.out}")
    return 1 if failures else 0


def _run_tasks(tasks: list, args: argparse.Namespace) -> tuple[list[dict], int, float]:
    """Run every (spec, ε) task, save its JSON (and plot), print its line; rows, failures, seconds."""
    from tqdm import tqdm

    from dpglm.engine.progress import progress

    rows, failures, start = [], 0, time.perf_counter()
    levels = family_confidence(tasks)  # Bonferroni over the real-mechanism rows (audits.catalogue)
    for (spec, eps), level in progress(list(zip(tasks, levels, strict=True)), desc="audits", unit="audit"):
        audit = spec.build(eps, args.quick)
        if isinstance(audit, Audit):
            audit.compute_engine, audit.n_jobs = args.engine, args.jobs
        runs = args.runs or (spec.quick_runs if args.quick else spec.runs)
        result = audit.run(runs, seed=args.seed, confidence=level)
        stem = os.path.join(args.out, spec.name if eps is None else f"{spec.name}-eps{eps:g}")
        with open(stem + ".json", "w", encoding="utf-8") as handle:
            record = result.to_dict() if hasattr(result, "to_dict") else json.loads(result.to_json())
            handle.write(strict_json(record, indent=2, sort_keys=True))
        if not args.no_plots and hasattr(result, "scores_null"):
            plot_result(result, stem + ".png")
        ok = result.verdict == spec.expected
        failures += not ok
        row = {field: getattr(result, field, None) for field in SUMMARY_FIELDS}
        row["expected"], row["confidence"] = spec.expected, level
        row["planted"] = spec.expected == "violated"
        rows.append(row)
        tag = "[planted] " if spec.expected == "violated" else "[real]    "
        head, *details = result.summary().splitlines()
        details = ([] if ok else [f"<-- expected {spec.expected}"]) + details
        lines = [tag + head, *(" " * len(tag) + line for line in details)]
        tqdm.write("\n".join(lines), file=sys.stdout)  # above a terminal's bar; a plain write in a log
    return rows, failures, time.perf_counter() - start


class _PlantedRun:
    """``run()`` audits a user audit's ``planted=`` variant (expected "violated"): the power check."""

    def __init__(self, audit: MechanismAudit) -> None:
        self.audit = audit

    def run(self, runs: int, seed: int = 0, *, confidence: float = 0.95) -> object:
        return self.audit.run_planted(runs, seed, confidence=confidence)


def load_audit(target: str) -> Audit:
    """The audit at ``MODULE:ATTRIBUTE`` (an :class:`audits.base.Audit`, or a function of no arguments returning one).

    ``MODULE`` is a dotted module name (found from the current directory too) or
    a path to a ``.py`` file. Every failure is one line naming what is wrong.
    """
    import importlib
    import importlib.util

    module_name, sep, attribute = target.rpartition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"--mechanism must be MODULE:ATTRIBUTE, got {target!r}")
    if module_name.endswith(".py"):
        if not os.path.isfile(module_name):
            raise ValueError(f"--mechanism: no file {module_name!r}")
        spec = importlib.util.spec_from_file_location(os.path.basename(module_name)[:-3], module_name)
        if spec is None or spec.loader is None:
            raise ImportError(f"--mechanism: cannot load {module_name!r}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            raise ImportError(f"--mechanism: no module {module_name!r} ({error})") from None
    value: object = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ValueError(f"--mechanism: {module_name!r} has no attribute {attribute!r}")
        value = getattr(value, part)
    if not isinstance(value, Audit) and callable(value) and not isinstance(value, type):
        _check_no_arguments(value, target)
        value = value()
    if not isinstance(value, Audit):
        raise TypeError(f"--mechanism: {target} is of type {type(value).__name__}, not an audits.MechanismAudit "
                        f"(or a function of no arguments returning one); {_HOW}")
    return value


#: What ``--mechanism`` needs, said by every refusal of :func:`load_audit` that is about the attribute's kind.
_HOW = ("build one in that file, e.g. audit = MechanismAudit(mechanism, (D0, D1), claim=(epsilon, delta)), and "
        "pass FILE:audit (docs/audits.md, \"Audit your own mechanism\")")


def _check_no_arguments(function: object, target: str) -> None:
    """Refuse, naming it, a callable that needs arguments: a mechanism (data, rng), not an audit factory."""
    import inspect

    try:
        signature = inspect.signature(function)  # type: ignore[arg-type]  # callable, checked by the caller
    except (TypeError, ValueError):
        return  # no signature to read (a builtin): call it and let its own error speak
    try:
        signature.bind()
    except TypeError:
        raise TypeError(f"--mechanism: {target} is a function of {signature}, which needs arguments: a mechanism, "
                        f"not an audit. --mechanism takes an audits.MechanismAudit (or a function of no arguments "
                        f"returning one); {_HOW}") from None


def custom_specs(target: str) -> list[AuditSpec]:
    """The user's audit as a real row (expected "consistent") and, with ``planted=``, a planted row."""
    audit = load_audit(target)
    specs = [AuditSpec(audit.name, lambda eps, quick: audit, 10_000, 2_000, "consistent", (), "user mechanism")]
    if isinstance(audit, MechanismAudit) and audit.planted is not None:
        specs.append(AuditSpec(f"{audit.name}-planted", lambda eps, quick: _PlantedRun(audit), 10_000, 2_000,
                               "violated", (), "user mechanism's planted variant"))
    return specs
