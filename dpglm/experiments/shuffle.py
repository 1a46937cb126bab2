"""``dpglm reproduce shuffle``: the shuffle-DP batched bandit (paper Alg. 1) on stochastic contexts.

Grid (issue 5): probit (S = 3) and logistic (S = 3.5) rewards, d ∈ {3, 5}, K = 20 arms
uniform in the unit ball, T ∈ {5000, 20000}, ε ∈ {2, 4, 8}, δ = 0.02; algorithms
``ShuffleDP-GLM`` (:class:`dpglm.policies.batched.ShuffleDPGLMBandit`), the non-private
``B-GLinCB`` on the same schedule, ``RS-GLinUCB`` and the joint-DP ``Private-GLM``
(paper Alg. 2, ``tight`` preset). Seeds follow :class:`dpglm.experiments.cells.Cell`
(the environment of an (instance, seed) is shared by every algorithm and ε).

Outputs in ``--out``: ``shuffle_runs.csv`` (one row per run and recorded round: algorithm,
ε, instance, seed, t, regret, seconds, guarantee), ``shuffle_table.csv`` (final regret, mean
and standard error per algorithm × instance × ε, and the ratio R(20000)/R(5000)),
``shuffle_<family>_d<d>.png`` (mean regret curves), and ``ledgers/<run>.json`` (each
private run's ledger: the budget tree, its guarantee against the asked (ε, δ), and for
ShuffleDP-GLM the receipt of every per-batch release with its partition key).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from accounting.validation import check_int, check_positive
from dpglm.experiments.cells import Cell, Instance
from dpglm.experiments.registry import REGISTRY

FAMILIES = {"probit": 3.0, "logistic": 3.5}
ALGORITHMS = ("ShuffleDP-GLM", "B-GLinCB", "RS-GLinUCB", "Private-GLM")
PRIVATE = tuple(a for a in ALGORITHMS if REGISTRY[a].private)
COLUMNS = ("algorithm", "epsilon", "delta", "family", "d", "K", "horizon", "S", "seed", "t", "regret", "seconds",
           "guarantee_epsilon", "guarantee_delta", "batch_lengths")
DELTA = 0.02


QUICK = {"families": ["probit"], "dims": [3], "horizons": [500, 2000], "epsilons": [8.0], "runs": 1,
         "algorithms": [a for a in ALGORITHMS if a != "Private-GLM"]}
"""The defaults of ``--quick`` (each only where the user gave no flag)."""
FULL = {"families": list(FAMILIES), "dims": [3, 5], "horizons": [5000, 20000], "epsilons": [2.0, 4.0, 8.0],
        "runs": 5, "algorithms": list(ALGORITHMS)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dpglm.engine.engine import add_engine_arguments
    from dpglm.engine.results import FORMATS

    parser.add_argument("--runs", type=int, default=None, help="runs per configuration (default 5; 1 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test defaults: probit, d=3, T in {500, 2000}, eps=8, 1 run, no Private-GLM "
                             "(flags you give still win)")
    parser.add_argument("--families", nargs="+", default=None, choices=list(FAMILIES))
    parser.add_argument("--dims", nargs="+", type=int, default=None, help="d values (default 3 5)")
    parser.add_argument("--horizons", nargs="+", type=int, default=None, help="T values (default 5000 20000)")
    parser.add_argument("--epsilons", nargs="+", type=float, default=None, help="ε values (default 2 4 8)")
    parser.add_argument("--algorithms", nargs="+", default=None, choices=list(ALGORITHMS))
    parser.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    parser.add_argument("--out", default="results/shuffle",
                        help="output directory (default results/shuffle); a rerun resumes the runs it lacks")
    parser.add_argument("--format", choices=FORMATS, default="csv", help="table format (default csv)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_engine_arguments(parser, jobs=1)


def _setting(args: argparse.Namespace, name: str) -> Any:
    given = getattr(args, name)
    return given if given is not None else (QUICK if args.quick else FULL)[name]


def build_cells(args: argparse.Namespace) -> list[Cell]:
    """Every run, as :class:`dpglm.experiments.cells.Cell` (for its seeding convention)."""
    families, dims, horizons, epsilons, runs, algorithms = (
        _setting(args, name) for name in ("families", "dims", "horizons", "epsilons", "runs", "algorithms"))
    check_int("--runs", runs)
    for name, values in (("--dims", dims), ("--horizons", horizons)):
        for value in values:
            check_int(name, value)
    for eps in epsilons:
        check_positive("--epsilons", eps)
    check_int("--seed", args.seed, 0)
    cells = []
    for family in families:
        for d in dims:
            for T in horizons:
                instance = Instance(family, int(d), 20, FAMILIES[family], int(T))
                for seed in range(runs):
                    for algorithm in algorithms:
                        options = {"preset": "tight"} if algorithm == "Private-GLM" else {}
                        for eps in (epsilons if algorithm in PRIVATE else [math.inf]):
                            cells.append(Cell(algorithm, instance, float(eps), DELTA, seed, args.seed,
                                              max(1, int(T) // 100), options))
    return cells


def _ledger_record(policy: Any, cell: Any) -> dict[str, Any]:
    """The run's ledger as JSON, plus (ShuffleDP-GLM) each per-batch receipt with its partition."""
    guarantee = policy.ledger.guarantee()
    record = {
        "algorithm": cell.algorithm,
        "asked": {"epsilon": cell.epsilon, "delta": cell.delta},
        "guaranteed": {"epsilon": float(guarantee.eps), "delta": float(getattr(guarantee, "delta", 0))},
        "report": policy.ledger.report(),
        "ledger": json.loads(policy.ledger.to_json()),
    }
    if cell.algorithm == "ShuffleDP-GLM":
        receipts = []
        for half, releases in (("covariance", policy.design_sum.releases), ("parameter", policy.estimator.releases)):
            for batch, release in sorted(releases.items()):
                r = release.receipt
                receipts.append({"half": half, "batch": batch, "partition": r.partition, "mechanism": r.mechanism,
                                 "charged_epsilon": float(r.charged.eps), "charged_delta": float(r.charged.delta),
                                 "note": r.note})
        record["batch_lengths"] = list(policy.schedule.lengths)
        record["per_batch_receipts"] = receipts
        record["covariance_noise_sd"] = {str(k): v for k, v in policy.design_sum.noise_sd.items()}
    return record


def run_cell(cell: Cell) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """One run (:func:`dpglm.experiments.registry.play_cell`): its rows and (private runs) its ledger record."""
    from dpglm.experiments.registry import entry, play_cell

    run = play_cell(cell)
    return run.rows(COLUMNS), (_ledger_record(run.policy, cell) if entry(cell.algorithm).private else None)


def _run_name(cell: Any) -> str:
    inst = cell.instance
    eps = "" if math.isinf(cell.epsilon) else f"_eps{cell.epsilon:g}"
    return f"{cell.algorithm}_{inst.family}_d{inst.d}_T{inst.horizon}{eps}_seed{cell.seed}"


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Final regret per (algorithm, family, d, T, ε): mean, standard error, runs; plus R(T)/R(T_min)."""
    final: dict[tuple, list[float]] = defaultdict(list)
    for row in rows:
        if row["t"] == row["horizon"]:
            final[(row["algorithm"], row["family"], row["d"], row["horizon"], row["epsilon"])].append(row["regret"])
    table = []
    for key in sorted(final, key=lambda k: (k[1], k[2], k[0], k[4], k[3])):
        values = final[key]
        n = len(values)
        mean = sum(values) / n
        se = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else float("nan")
        table.append({"algorithm": key[0], "family": key[1], "d": key[2], "horizon": key[3], "epsilon": key[4],
                      "runs": n, "regret_mean": mean, "regret_se": se})
    smallest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for entry in table:
        k = (entry["algorithm"], entry["family"], entry["d"], entry["epsilon"])
        if k not in smallest or entry["horizon"] < smallest[k]["horizon"]:
            smallest[k] = entry
    for entry in table:
        base = smallest[(entry["algorithm"], entry["family"], entry["d"], entry["epsilon"])]
        entry["ratio_to_smallest_T"] = entry["regret_mean"] / base["regret_mean"] if base["regret_mean"] > 0 else ""
    return table


def plot(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """One PNG per (family, d): mean regret curves per algorithm (and ε), one panel per T."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves: dict[tuple[str, int], dict[tuple[int, str], dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for row in rows:
        label = row["algorithm"] if math.isinf(row["epsilon"]) else f"{row['algorithm']} ε={row['epsilon']:g}"
        curves[(row["family"], row["d"])][(row["horizon"], label)][row["t"]].append(row["regret"])
    paths = []
    for (family, d), by_curve in sorted(curves.items()):
        horizons = sorted({T for T, _ in by_curve})
        fig, axes = plt.subplots(1, len(horizons), figsize=(6 * len(horizons), 4.5), squeeze=False)
        for ax, T in zip(axes[0], horizons, strict=True):
            for (T2, label), points in sorted(by_curve.items()):
                if T2 != T:
                    continue
                ts = sorted(points)
                ax.plot(ts, [sum(points[t]) / len(points[t]) for t in ts], label=label)
            ax.set_title(f"{family}, d={d}, K=20, T={T}")
            ax.set_xlabel("round t")
            ax.set_ylabel("mean cumulative regret")
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / f"shuffle_{family}_d{d}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def run(args: argparse.Namespace) -> int:
    from dpglm.engine.engine import engine_from_args
    from dpglm.engine.results import prepare_output, strict_json, table_path, write_table
    from dpglm.experiments.sweep import run_cells

    cells = build_cells(args)
    engine = engine_from_args(args)  # a spec only: every flag checked before any work
    out = prepare_output(args.out, args.format)  # errors name the flag
    (out / "ledgers").mkdir(parents=True, exist_ok=True)
    runs_path = table_path(out / "shuffle_runs", args.format)
    ordered, failures = run_cells(cells, run_cell, COLUMNS, runs_path, engine=engine,
                                  progress=not args.no_progress, desc="shuffle")
    rows: list[dict[str, Any]] = []
    for cell, cell_rows, ledger in ordered:
        rows.extend(cell_rows)
        if ledger is not None:
            (out / "ledgers" / f"{_run_name(cell)}.json").write_text(strict_json(ledger, indent=1))
    if failures:
        from dpglm.engine.engine import TaskFailures

        raise TaskFailures("run(s)", failures)
    table = summarise(rows)
    write_table(table, list(table[0]), table_path(out / "shuffle_table", args.format))
    figures = plot(rows, out)
    for entry in table:
        eps = "" if math.isinf(entry["epsilon"]) else f" ε={entry['epsilon']:g}"
        ratio = entry["ratio_to_smallest_T"]
        print(f"{entry['family']:8s} d={entry['d']} T={entry['horizon']:6d} {entry['algorithm']}{eps}: "
              f"regret {entry['regret_mean']:.1f} ± {entry['regret_se']:.1f}"
              + (f"  (×{ratio:.2f} of the smallest T)" if isinstance(ratio, float) else ""))
    print(f"wrote {runs_path}, {table_path(out / 'shuffle_table', args.format)}, {len(figures)} figure(s), "
          f"{len(list((out / 'ledgers').glob('*.json')))} ledger(s)")
    return 0
