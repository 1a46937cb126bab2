"""``dpglm reproduce bai``: stopping time of private best-arm identification vs ε.

Jourdan & Azize (2025), Figure 1: δ = 0.01, ε on the grid 10^{−3+2j/3}, j = 0..8,
Bernoulli instances μ1 = (0.95, 0.9, 0.9, 0.9, 0.5) and μ2 = (0.75, 0.625, 0.5,
0.375, 0.25) (``../shared/BAI.md``); algorithms DP-TT (provable threshold, and the
named heuristic threshold used to compare with the figure, with and without the
forced exploration of Garivier & Kaufmann 2016), AdaP-TT, AdaP-TT⋆,
DP-SE and the non-private EB-TCI; mean ± 2 std over runs with T*_ε·log(1/(3δ))
as the lower bound. Writes ``bai.csv`` (one row per instance × algorithm × ε,
with the error count and its Clopper–Pearson 95% interval and the privacy
ledgers' total), ``bai.png`` and ``bai_ledger_example.txt``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

INSTANCES = {
    "mu1": (0.95, 0.9, 0.9, 0.9, 0.5),
    "mu2": (0.75, 0.625, 0.5, 0.375, 0.25),
}
ALGORITHMS = ("DP-TT", "DP-TT (heuristic threshold)", "DP-TT (heuristic, forced exploration)",
              "AdaP-TT", "AdaP-TT*", "DP-SE", "EB-TCI")
DELTA = 0.01


def epsilon_grid(quick: bool = False) -> list[float]:
    """10^{−3 + 2j/3}, j = 0..8 (j = 3, 5, 8, i.e. ε ≈ 0.1, 2.15, 215, with ``quick``)."""
    js = (3, 5, 8) if quick else range(9)
    return [10 ** (-3 + 2 * j / 3) for j in js]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 3 ε values, 10 runs, runs cut at 1e6 steps (< 2 min)")
    parser.add_argument("--runs", type=int, default=None, help="runs per point (default 100; 10 with --quick)")
    parser.add_argument("--n-jobs", type=int, default=1, help="joblib worker processes (default 1)")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="cut a run after this many steps (default 1e8; 1e6 with --quick)")
    parser.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    parser.add_argument("--out", default="results/bai", help="output directory (default results/bai)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _make(name: str, mu, eps: float):
    from dpglm.bai.successive_elimination import DPSE
    from dpglm.bai.top_two import AdaPTT, AdaPTTStar, DPTopTwo, EBTopTwo

    if name == "DP-TT":
        return DPTopTwo(mu, eps, DELTA)
    if name == "DP-TT (heuristic threshold)":
        return DPTopTwo(mu, eps, DELTA, threshold="heuristic")
    if name == "DP-TT (heuristic, forced exploration)":
        return DPTopTwo(mu, eps, DELTA, threshold="heuristic", forced_exploration=True)
    if name == "AdaP-TT":
        return AdaPTT(mu, eps, DELTA)
    if name == "AdaP-TT*":
        return AdaPTTStar(mu, eps, DELTA)
    if name == "DP-SE":
        return DPSE(mu, eps, DELTA)
    if name == "EB-TCI":
        return EBTopTwo(mu, DELTA)
    raise ValueError(f"unknown algorithm {name!r}; allowed: {ALGORITHMS}")


def run_point(instance: str, algorithm: str, eps: float, runs: int, seed: tuple[int, ...],
              max_steps: int) -> dict[str, Any]:
    """Simulate ``runs`` runs of one (instance, algorithm, ε) point; return its CSV row."""
    import numpy as np
    from scipy.stats import beta as beta_dist

    mu = INSTANCES[instance]
    rng = np.random.default_rng(np.random.SeedSequence(list(seed)))
    start = time.perf_counter()
    res = _make(algorithm, mu, eps).run(runs, rng, max_steps=max_steps)
    seconds = time.perf_counter() - start
    tau = res.stopping_times.astype(float)
    err = res.errors
    lo = 0.0 if err == 0 else float(beta_dist.ppf(0.025, err, runs - err + 1))
    hi = 1.0 if err == runs else float(beta_dist.ppf(0.975, err + 1, runs - err))
    spent = [float(l.guarantee().eps) for l in res.ledgers]
    return {
        "instance": instance, "algorithm": algorithm, "epsilon": eps, "runs": runs,
        "mean": tau.mean(), "std": tau.std(ddof=1) if runs > 1 else 0.0, "median": float(np.median(tau)),
        "q90": float(np.quantile(tau, 0.9)), "cut": int(np.sum(~res.stopped)), "errors": err,
        "error_rate": err / runs, "error_cp95_low": lo, "error_cp95_high": hi,
        "ledger_eps_max": max(spent) if spent else float("nan"),
        "steps": int(tau.sum()), "seconds": seconds, "seed": "-".join(map(str, seed)),
        "ledger_example": res.ledgers[0].report() if res.ledgers else "",
    }


def _plot(rows: list[dict[str, Any]], bounds: dict[str, list[tuple[float, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(INSTANCES), figsize=(6 * len(INSTANCES), 4.5))
    for ax, inst in zip(axes, INSTANCES):
        for alg in ALGORITHMS:
            pts = sorted((r["epsilon"], r["mean"], r["std"]) for r in rows if r["instance"] == inst and r["algorithm"] == alg)
            if not pts:
                continue
            e, m, s = (list(x) for x in zip(*pts))
            line = ax.plot(e, m, marker="o", ms=3, label=alg)[0]
            lower = [max(mi - 2 * si, mi / 100) for mi, si in zip(m, s)]
            ax.fill_between(e, lower, [mi + 2 * si for mi, si in zip(m, s)], color=line.get_color(), alpha=0.12)
        be, bv = zip(*bounds[inst])
        ax.plot(be, bv, "k--", label="lower bound T*_ε log(1/(3δ))")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_ylabel("stopping time τ (mean ± 2 std)")
        ax.set_title(f"{inst} = {INSTANCES[inst]}, δ = {DELTA}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd
    from joblib import Parallel, delayed
    from tqdm import tqdm

    from dpglm.bai.characteristic_time import characteristic_time

    runs = args.runs if args.runs is not None else (10 if args.quick else 100)
    max_steps = args.max_steps if args.max_steps is not None else (10**6 if args.quick else 10**8)
    if runs < 2:
        raise ValueError(f"--runs must be >= 2, got {runs}")
    if max_steps < 10:
        raise ValueError(f"--max-steps must be >= 10, got {max_steps}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    grid = epsilon_grid(args.quick)
    tasks = []
    for i, inst in enumerate(INSTANCES):
        for a, alg in enumerate(ALGORITHMS):
            for j, eps in enumerate(grid if alg != "EB-TCI" else [float("inf")]):
                tasks.append((inst, alg, eps, runs, (args.seed, i, a, j), max_steps))
    tasks.sort(key=lambda t: t[2])  # the slow small-ε points first: better load balance
    start = time.perf_counter()
    it = Parallel(n_jobs=args.n_jobs, return_as="generator_unordered")(delayed(run_point)(*t) for t in tasks)
    rows = list(tqdm(it, total=len(tasks), desc="bai points", disable=args.no_progress))
    wall = time.perf_counter() - start
    example = next((r["ledger_example"] for r in rows if r["ledger_example"]), "")
    (out / "bai_ledger_example.txt").write_text(example)
    for r in [r for r in rows if r["algorithm"] == "EB-TCI"]:  # non-private: one row per ε
        rows.remove(r)
        rows += [{**r, "epsilon": eps} for eps in grid]
    bounds = {inst: [] for inst in INSTANCES}
    for inst, mu in INSTANCES.items():
        for eps in grid:
            ts = characteristic_time(mu, eps)
            bounds[inst].append((eps, ts.lower_bound(DELTA)))
            rows.append({"instance": inst, "algorithm": "lower bound", "epsilon": eps, "mean": ts.lower_bound(DELTA),
                         "T_star": ts.value})
    df = pd.DataFrame([{k: v for k, v in r.items() if k != "ledger_example"} for r in rows])
    df = df.sort_values(["instance", "algorithm", "epsilon"])
    df.to_csv(out / "bai.csv", index=False)
    _plot([r for r in rows if r["algorithm"] != "lower bound"], bounds, out / "bai.png")
    print(df[["instance", "algorithm", "epsilon", "mean", "median", "cut", "errors", "error_cp95_high"]]
          .to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    total = int(df["steps"].fillna(0).sum())
    print(f"wall time {wall:.1f} s for {total:.3g} simulated steps ({total / wall:.3g} steps/s), n_jobs={args.n_jobs}")
    print(f"wrote {out / 'bai.csv'}, {out / 'bai.png'}, {out / 'bai_ledger_example.txt'}")
    if not np.all(df["ledger_eps_max"].dropna() <= df.loc[df["ledger_eps_max"].notna(), "epsilon"] * (1 + 1e-12)):
        print("WARNING: a ledger reports more than ε")
        return 1
    return 0
