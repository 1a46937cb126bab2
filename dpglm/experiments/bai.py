"""``dpglm reproduce bai``: stopping time of private best-arm identification vs ε.

Jourdan & Azize (2025), Figure 1: δ = 0.01, ε on the grid 10^{−3+2j/3}, j = 0..8,
Bernoulli instances μ1 = (0.95, 0.9, 0.9, 0.9, 0.5) and μ2 = (0.75, 0.625, 0.5,
0.375, 0.25) (``docs/references.md``); algorithms DP-TT (default: log-linear
forced exploration; also with the √t forced exploration of Garivier & Kaufmann
2016, and with the paper's true-count challenger), AdaP-TT, AdaP-TT⋆, DP-SE (as specified,
and as in the authors' public code: ``DPSE(mean="cumulative-count")``) and the
non-private EB-TCI; mean ± 2 std over runs with T*_ε·log(1/(3δ)) as the lower
bound. Two families of stopping rules, compared within each: ``provable``
(every rule proven δ-correct) and ``heuristic`` (the unproven thresholds of
experiments: ours for DP-TT, the AdaP-TT authors' for AdaP-TT, log((1 + log n)/δ)
for EB-TCI); DP-SE's rule is its own and appears in both.

Writes ``bai.csv`` (one row per family × instance × algorithm × ε, with the
error count and its Clopper–Pearson 95% interval and the privacy ledgers'
total), ``bai.png`` (a row of panels per family), ``bai_ledger_example.txt``,
and ``bai_paper_budget.csv``: DP-TT's sampling rule run on μ1 exactly to the
stopping time the paper reports at each ε, with the error of the arm it would
recommend there — a check of whether those times are reachable by a
δ-correct DP-TT.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

INSTANCES = {
    "mu1": (0.95, 0.9, 0.9, 0.9, 0.5),
    "mu2": (0.75, 0.625, 0.5, 0.375, 0.25),
    # Figure 2's μ3–μ6 are not printed in any text found here (the paper's appendix was not
    # reachable); these are the other instances of the authors' experiment code
    # (achraf-azize/DP-BAI, parallelized_experiment.py), in its order: an inference (README)
    "mu3": (0.75, 0.7, 0.7, 0.7, 0.7),
    "mu4": (0.75, 0.53125, 0.375, 0.28125, 0.25),
    "mu5": (0.75, 0.71875, 0.625, 0.46875, 0.25),
    "mu6": (1.0, 0.75, 0.5, 0.25, 0.0),  # linspace(0, 1, 5), best arm first
}
#: the paper's figures: which instances each shows
FIGURES = {1: ("mu1", "mu2"), 2: ("mu3", "mu4", "mu5", "mu6")}
ALGORITHMS = ("DP-TT", "DP-TT (sqrt forced exploration)", "AdaP-TT", "AdaP-TT*", "DP-SE", "EB-TCI",
              "DP-SE (cumulative count)", "DP-TT (true-count challenger)",
              "AdaP-TT (UCB-leader candidate)", "DP-TT (cumulative estimator)", "DP-TT (epsilon = inf)",
              "EB-TCI (DP-TT threshold)", "DP-TT (IDS)")  # seeds come from the names, not the order
#: what ``--quick`` runs: the paper's algorithms and the ε = ∞ limit, not the variants (a smoke run of every code
#: path the figure draws, within about a minute of CPU; ``--algorithms`` still picks any)
QUICK_ALGORITHMS = ("DP-TT", "AdaP-TT", "AdaP-TT*", "DP-SE", "EB-TCI", "DP-TT (epsilon = inf)")
#: algorithms whose stopping rule is their own: simulated once, drawn in both families
OWN_RULE = ("DP-SE", "DP-SE (cumulative count)")
#: non-private rows: simulated once at ε = ∞ and drawn flat over the grid
FLAT = ("EB-TCI", "DP-TT (epsilon = inf)", "EB-TCI (DP-TT threshold)")
#: rows of the provable family only (their rule is a provable one whatever the family)
PROVABLE_ONLY = ("DP-TT (epsilon = inf)", "EB-TCI (DP-TT threshold)", "DP-TT (cumulative estimator)", "DP-TT (IDS)")
STOPPING = ("provable", "heuristic")
DELTA = 0.01
#: the paper's DP-TT mean stopping times on μ1, read off its Figure 1 (``docs/references.md``)
PAPER_DPTT_MU1 = {1e-3: 4.1e5, 10 ** (-3 + 2 / 3): 1.36e5, 10 ** (-3 + 4 / 3): 3.2e4, 0.1: 1.14e4,
                  10 ** (-3 + 8 / 3): 6.9e3, 10 ** (-3 + 10 / 3): 6.9e3}


def epsilon_grid(quick: bool = False) -> list[float]:
    """10^{−3 + 2j/3}, j = 0..8 (j = 3, 5, 8, i.e. ε ≈ 0.1, 2.15, 215, with ``quick``)."""
    js = (3, 5, 8) if quick else range(9)
    return [10 ** (-3 + 2 * j / 3) for j in js]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="smoke run (about a minute of CPU): ε ∈ {0.1, 2.15, 215}, 10 runs per point, runs cut "
                             f"at 1e6 steps, the algorithms {', '.join(QUICK_ALGORITHMS)} in both stopping "
                             "families on mu1 and mu2, and DP-TT at the paper's stopping times with 10 runs; "
                             "flags you give still win")
    parser.add_argument("--runs", type=int, default=None, help="runs per point (default 100; 10 with --quick)")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="cut a run after this many steps (default 1e8; 1e6 with --quick)")
    parser.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    parser.add_argument("--figure", type=int, choices=sorted(FIGURES), default=1,
                        help="the paper's figure: 1 (mu1, mu2; default) or 2 (mu3-mu6)")
    parser.add_argument("--algorithms", default=None,
                        help="comma-separated subset of the algorithms (default: all)")
    parser.add_argument("--out", default="results/bai",
                        help="output directory (default results/bai); a rerun resumes the points it lacks")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    from dpglm.engine.engine import add_engine_arguments

    add_engine_arguments(parser, jobs=1)


def _make(name: str, mu, eps: float, stopping: str = "provable"):
    from dpglm.bai.adap_tt import AdaPTT, AdaPTTStar
    from dpglm.bai.successive_elimination import DPSE
    from dpglm.bai.top_two import DPTopTwo, EBTopTwo

    if stopping not in STOPPING:
        raise ValueError(f"unknown stopping family {stopping!r}; allowed: {STOPPING}")
    if name == "DP-TT":
        return DPTopTwo(mu, eps, DELTA, threshold=stopping)
    if name == "DP-TT (sqrt forced exploration)":  # Garivier & Kaufmann (2016) instead of the log-linear default
        return DPTopTwo(mu, eps, DELTA, threshold=stopping, forced_exploration="sqrt")
    if name == "DP-TT (cumulative estimator)":  # the paper's estimator (DP-TT's default weighs its batches)
        return DPTopTwo(mu, eps, DELTA, threshold=stopping, estimator="cumulative")
    if name == "DP-TT (epsilon = inf)":  # no noise, still geometric batches: the ε → ∞ limit
        return DPTopTwo(mu, math.inf, DELTA, threshold=stopping)
    if name == "EB-TCI (DP-TT threshold)":
        return EBTopTwo(mu, DELTA, threshold="dp-tt")
    if name == "DP-TT (IDS)":  # information-directed leader share instead of β = 1/2 (docs/bai-threshold.md, "IDS")
        return DPTopTwo(mu, eps, DELTA, threshold=stopping, beta="ids")
    if name == "DP-TT (true-count challenger)":  # the paper's TCI keys on N (DP-TT's default keys on Ñ)
        return DPTopTwo(mu, eps, DELTA, threshold=stopping, challenger_counts="true")
    if name == "AdaP-TT":
        return AdaPTT(mu, eps, DELTA, threshold=stopping)
    if name == "AdaP-TT (UCB-leader candidate)":  # the stopping test of the authors' code (AdaPTT docstring)
        return AdaPTT(mu, eps, DELTA, threshold=stopping, candidate="ucb-leader")
    if name == "AdaP-TT*":
        return AdaPTTStar(mu, eps, DELTA, threshold=stopping)
    if name == "DP-SE":
        return DPSE(mu, eps, DELTA)
    if name == "DP-SE (cumulative count)":  # the authors' public experiment code
        return DPSE(mu, eps, DELTA, mean="cumulative-count")
    if name == "EB-TCI":
        return EBTopTwo(mu, DELTA, threshold=stopping)
    raise ValueError(f"unknown algorithm {name!r}; allowed: {ALGORITHMS}")


def _clopper_pearson(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import beta as beta_dist

    lo = 0.0 if k == 0 else float(beta_dist.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta_dist.ppf(0.975, k + 1, n - k))
    return lo, hi


def _point_seed(seed: int | tuple[int, ...], *parts: Any):
    """``SeedSequence(seed, spawn_key=cell_key(*parts))``: the point's own parameters, not its grid position."""
    import numpy as np

    from dpglm.experiments.seeds import cell_key

    entropy = [int(s) for s in seed] if isinstance(seed, (tuple, list)) else int(seed)
    return np.random.SeedSequence(entropy, spawn_key=cell_key(*parts))


def _seed_label(seed: int | tuple[int, ...]) -> str:
    return "-".join(map(str, seed)) if isinstance(seed, (tuple, list)) else str(int(seed))


def _call_point(job: tuple) -> dict[str, Any]:
    """An engine task: ``(function, arguments)`` of one point."""
    function, arguments = job
    return function(*arguments)


def run_point(instance: str, algorithm: str, eps: float, runs: int, seed: int | tuple[int, ...],
              max_steps: int, stopping: str = "provable") -> dict[str, Any]:
    """Simulate ``runs`` runs of one (family, instance, algorithm, ε) point; return its CSV row."""
    import numpy as np

    mu = INSTANCES[instance]
    rng = np.random.default_rng(_point_seed(seed, "bai", stopping, instance, algorithm, float(eps)))
    start = time.perf_counter()
    res = _make(algorithm, mu, eps, stopping).run(runs, rng, max_steps=max_steps)
    seconds = time.perf_counter() - start
    tau = res.stopping_times.astype(float)
    err = res.errors
    lo, hi = _clopper_pearson(err, runs)
    spent = [float(ledger.guarantee().eps) for ledger in res.ledgers]
    return {
        "stopping": stopping, "instance": instance, "algorithm": algorithm, "epsilon": eps, "runs": runs,
        "mean": tau.mean(), "std": tau.std(ddof=1) if runs > 1 else 0.0, "median": float(np.median(tau)),
        "q90": float(np.quantile(tau, 0.9)), "q95": float(np.quantile(tau, 0.95)), "cut": int(np.sum(~res.stopped)),
        "errors": err,
        "error_rate": err / runs, "error_cp95_low": lo, "error_cp95_high": hi,
        "ledger_eps_max": max(spent) if spent else float("nan"),
        "mean_completed_pulls": (float(np.mean(res.completed_pulls)) if res.completed_pulls is not None
                                 else float("nan")),  # the AdaP-TT authors' counting (counts.sum())
        "steps": int(tau.sum()), "seconds": seconds, "seed": _seed_label(seed),
        "ledger_example": res.ledgers[0].report() if res.ledgers else "",
    }


def paper_budget_point(eps: float, runs: int, seed: int | tuple[int, ...],
                       forced_exploration: bool = False) -> dict[str, Any]:
    """DP-TT's sampling rule on μ1 run to the paper's reported mean τ at ε: how often is its best arm wrong?

    Runs that the provable rule stops earlier keep their (δ-correct)
    recommendation; the others are cut at the paper's τ and scored on the
    empirical best there. Evidence, not proof: a stopping rule with that mean
    stopping time may stop later on hard runs.
    """
    import numpy as np

    from dpglm.bai.top_two import DPTopTwo

    budget = int(PAPER_DPTT_MU1[eps])
    rng = np.random.default_rng(_point_seed(seed, "bai-paper-budget", float(eps), bool(forced_exploration)))
    res = DPTopTwo(INSTANCES["mu1"], eps, DELTA, forced_exploration=forced_exploration).run(runs, rng, max_steps=budget)
    wrong = int(np.sum(res.recommendations != res.best_arm))
    lo, hi = _clopper_pearson(wrong, runs)
    return {"instance": "mu1", "forced_exploration": forced_exploration, "epsilon": eps, "paper_tau": budget,
            "runs": runs, "stopped_before": int(res.stopped.sum()), "steps": int(res.stopping_times.sum()),
            "wrong": wrong, "error_rate": wrong / runs,
            "error_cp95_low": lo, "error_cp95_high": hi, "delta": DELTA, "seed": _seed_label(seed)}


def _plot(rows: list[dict[str, Any]], bounds: dict[str, list[tuple[float, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    instances = list(bounds)
    fig, axes = plt.subplots(len(STOPPING), len(instances), figsize=(6 * len(instances), 4.5 * len(STOPPING)),
                             squeeze=False)
    for (fam, inst), ax in zip([(f, i) for f in STOPPING for i in instances], axes.ravel(), strict=True):
        for alg in ALGORITHMS:
            pts = sorted((r["epsilon"], r["mean"], r["std"]) for r in rows
                         if r["instance"] == inst and r["algorithm"] == alg and r["stopping"] in (fam, "own"))
            if not pts:
                continue
            e, m, s = (list(x) for x in zip(*pts, strict=True))
            line = ax.plot(e, m, marker="o", ms=3, label=alg)[0]
            lower = [max(mi - 2 * si, mi / 100) for mi, si in zip(m, s, strict=True)]
            upper = [mi + 2 * si for mi, si in zip(m, s, strict=True)]
            ax.fill_between(e, lower, upper, color=line.get_color(), alpha=0.12)
        be, bv = zip(*bounds[inst], strict=True)
        ax.plot(be, bv, "k--", label="lower bound T*_ε log(1/(3δ))")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_ylabel("stopping time τ (mean ± 2 std)")
        ax.set_title(f"{fam} stopping — {inst} = {INSTANCES[inst]}, δ = {DELTA}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _jobs(grid: list[float], runs: int, seed: int, max_steps: int, instances: tuple[str, ...] = FIGURES[1],
          algorithms: tuple[str, ...] = ALGORITHMS,
          budget_runs: int | None = None) -> list[tuple[Any, tuple[Any, ...]]]:
    """Every point of the figure as an engine task, the slow small-ε points first (better load balance).

    The paper-budget points run ``budget_runs`` runs (default 10·``runs``: an error rate near δ needs them).
    """
    tasks = []
    for fam in STOPPING:
        for inst in instances:
            for alg in algorithms:
                if (alg in OWN_RULE or alg in PROVABLE_ONLY) and fam != STOPPING[0]:
                    continue  # its rule is its own (or provable): simulated once, in the first family
                for eps in grid if alg not in FLAT else [float("inf")]:
                    tasks.append((inst, alg, eps, runs, seed, max_steps, fam))
    tasks.sort(key=lambda t: t[2])
    jobs: list[tuple[Any, tuple[Any, ...]]] = [(run_point, t) for t in tasks]
    if "mu1" in instances and "DP-TT" in algorithms:
        budget_eps = [e for e in PAPER_DPTT_MU1 if any(math.isclose(e, g) for g in grid)]
        budget_runs = 10 * runs if budget_runs is None else budget_runs
        jobs += [(paper_budget_point, (e, budget_runs, seed, bool(fe))) for e in budget_eps for fe in (0, 1)]
    return jobs


def _run_jobs(jobs: list[tuple[Any, tuple[Any, ...]]], engine: Any, manifest_path: Path,
              progress: bool) -> list[dict[str, Any]]:
    """Run the jobs the manifest lacks on ``engine``; every finished point is appended to the manifest at once."""
    from dpglm.engine.engine import Engine, TaskFailures
    from dpglm.engine.progress import progress as progress_bar
    from dpglm.engine.results import Manifest

    keys = [repr((f.__name__, *a)) for f, a in jobs]
    with Manifest(manifest_path) as manifest:
        todo = [i for i, key in enumerate(keys) if key not in manifest.done]
        if len(todo) < len(jobs):
            print(f"resuming: {len(jobs) - len(todo)} of {len(jobs)} points already in {manifest_path}")
        with Engine(engine) as running:
            it = running.imap(_call_point, [jobs[i] for i in todo])
            for j, row in progress_bar(it, total=len(todo), desc="bai points", unit="point", disable=not progress):
                manifest.add(keys[todo[j]], [row])
            if running.failures:
                raise TaskFailures("point(s)", [f"{jobs[todo[i]][1][:3]}: {m}" for i, m in running.failures])
        return [manifest.done[key]["rows"][0] for key in keys]


def _table_rows(results: list[dict[str, Any]], grid: list[float], instances: tuple[str, ...]) -> tuple[
        list[dict[str, Any]], dict[str, list[tuple[float, float]]]]:
    """The figure's rows (flat rows copied over the grid, lower bounds added) and the lower-bound curves."""
    from dpglm.bai.characteristic_time import characteristic_time

    rows = [dict(r) for r in results if "algorithm" in r]
    for r in rows:
        if r["algorithm"] in OWN_RULE:
            r["stopping"] = "own"
    for r in [r for r in rows if r["algorithm"] in FLAT]:  # non-private: one row per ε
        rows.remove(r)
        rows += [{**r, "epsilon": eps} for eps in grid]
    bounds: dict[str, list[tuple[float, float]]] = {inst: [] for inst in instances}
    for inst in instances:
        for eps in grid:
            ts = characteristic_time(INSTANCES[inst], eps)
            bounds[inst].append((eps, ts.lower_bound(DELTA)))
            rows.append({"instance": inst, "algorithm": "lower bound", "epsilon": eps, "mean": ts.lower_bound(DELTA),
                         "T_star": ts.value})
    return rows, bounds


def _check_args(args: argparse.Namespace) -> tuple[int, int, tuple[str, ...]]:
    runs = args.runs if args.runs is not None else (10 if args.quick else 100)
    max_steps = args.max_steps if args.max_steps is not None else (10**6 if args.quick else 10**8)
    if runs < 2:
        raise ValueError(f"--runs must be >= 2, got {runs}")
    if max_steps < 10:
        raise ValueError(f"--max-steps must be >= 10, got {max_steps}")
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    # --quick runs the paper's algorithms only (QUICK_ALGORITHMS): the variants doubled its time, and
    # EB-TCI with DP-TT's threshold evaluates a data-dependent threshold at every pull (minutes)
    algorithms = QUICK_ALGORITHMS if args.quick else ALGORITHMS
    if getattr(args, "algorithms", None):
        algorithms = tuple(a.strip() for a in args.algorithms.split(","))
        unknown = [a for a in algorithms if a not in ALGORITHMS]
        if unknown:
            raise ValueError(f"--algorithms: unknown {unknown}; allowed: {', '.join(ALGORITHMS)}")
    return runs, max_steps, algorithms


def run(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from dpglm.engine.engine import engine_from_args

    runs, max_steps, algorithms = _check_args(args)
    figure = int(getattr(args, "figure", 1))
    instances = FIGURES[figure]
    stem = "bai" if figure == 1 else f"bai_fig{figure}"
    from dpglm.engine.results import prepare_output

    engine = engine_from_args(args)  # a spec only: every flag checked before any work
    out = prepare_output(args.out)  # errors name the flag
    grid = epsilon_grid(args.quick)
    jobs = _jobs(grid, runs, args.seed, max_steps, instances, algorithms, runs if args.quick else None)
    start = time.perf_counter()
    results = _run_jobs(jobs, engine, out / f"{stem}.manifest.jsonl", not args.no_progress)
    wall = time.perf_counter() - start
    rows, bounds = _table_rows(results, grid, instances)
    budget_rows = sorted((r for r in results if "paper_tau" in r),
                         key=lambda r: (r["forced_exploration"], r["epsilon"]))
    example = next((r["ledger_example"] for r in rows if r.get("ledger_example")), "")
    (out / f"{stem}_ledger_example.txt").write_text(example)
    df = pd.DataFrame([{k: v for k, v in r.items() if k != "ledger_example"} for r in rows])
    df = df.sort_values(["stopping", "instance", "algorithm", "epsilon"], na_position="last")
    df.to_csv(out / f"{stem}.csv", index=False)
    _plot([r for r in rows if r["algorithm"] != "lower bound"], bounds, out / f"{stem}.png")
    print(df[["stopping", "instance", "algorithm", "epsilon", "mean", "median", "q95", "cut", "errors",
              "error_cp95_high"]].to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    total = int(sum(r["steps"] for r in results))  # before the flat rows are copied over the grid
    if budget_rows:
        budget = pd.DataFrame(budget_rows)
        budget.to_csv(out / "bai_paper_budget.csv", index=False)
        print("\nDP-TT (provable rule) on mu1 cut at the paper's reported mean stopping time:")
        print(budget[["forced_exploration", "epsilon", "paper_tau", "runs", "stopped_before", "wrong", "error_rate",
                      "error_cp95_low"]]
              .to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print(f"wall time {wall:.1f} s for {total:.3g} simulated steps ({total / max(wall, 1e-9):.3g} steps/s), "
          f"engine {engine.engine}, jobs={engine.jobs} (points resumed from the manifest cost no time)")
    print(f"wrote {out / (stem + '.csv')}, {out / (stem + '.png')}, {out / (stem + '_ledger_example.txt')}"
          + (f", {out / 'bai_paper_budget.csv'}" if budget_rows else ""))
    eps_rows = df["ledger_eps_max"].notna()
    if not np.all(df.loc[eps_rows, "ledger_eps_max"] <= df.loc[eps_rows, "epsilon"] * (1 + 1e-12)):
        print("WARNING: a ledger reports more than ε")
        return 1
    return 0
