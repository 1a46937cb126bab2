"""``dpglm reproduce fig1``: the paper's Figure 1, regret curves with bands.

Paper Appendix B, Figure 1: K = 20 arms uniform in the unit ball, θ* on a sphere, 10 runs.
(a) logistic, d = 5, S = 3.5, T = 15000: Private-GLM vs RS-GLinUCB, ECOLog, GLOC;
(b) probit, d = 5, S = 3, T = 5000: Private-GLM vs RS-GLinUCB, GLM-UCB, GLOC;
Private-GLM at ε ∈ {2, 4, 8}. Curves are the mean cumulative regret over runs with a
band of ± one standard error. Runs are sweep cells (``fig1_<panel>.csv``); the figure is
``fig1.png`` and the final regrets ``fig1.json``.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

PANELS = {
    "logistic": {"family": "logistic", "d": 5, "S": 3.5, "T": 15000,
                 "baselines": ("RS-GLinUCB", "ECOLog", "GLOC")},
    "probit": {"family": "probit", "d": 5, "S": 3.0, "T": 5000,
               "baselines": ("RS-GLinUCB", "GLM-UCB", "GLOC")},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=10, help="runs per curve (default 10)")
    parser.add_argument("--quick", action="store_true", help="smoke test: T=300, 1 run")
    parser.add_argument("--panels", nargs="+", default=list(PANELS), choices=list(PANELS),
                        help="which panels (default both)")
    parser.add_argument("--epsilons", nargs="+", type=float, default=[2.0, 4.0, 8.0],
                        help="ε of Private-GLM (default 2 4 8)")
    parser.add_argument("--preset", default="calibrated", choices=("calibrated", "paper-simulation", "theory"),
                        help="Private-GLM preset (default calibrated)")
    parser.add_argument("--n-jobs", type=int, default=2, help="joblib workers (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    parser.add_argument("--out", default="results/fig1", help="output directory (default results/fig1)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def build_sweep(panel: str, args: argparse.Namespace):
    """The sweep of one panel."""
    from dpglm.experiments.sweep import Instance, Sweep

    if args.runs < 1:
        raise ValueError(f"--runs must be >= 1, got {args.runs}")
    spec = PANELS[panel]
    horizon = 300 if args.quick else spec["T"]
    return Sweep(
        algorithms=(f"Private-GLM:{args.preset}",) + spec["baselines"],
        instances=(Instance(spec["family"], spec["d"], 20, spec["S"], horizon),),
        epsilons=tuple(args.epsilons),
        delta=0.02,
        seeds=1 if args.quick else args.runs,
        root_seed=args.seed,
        record_every=max(1, horizon // 100),
    )


def curves(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Mean and standard error of cumulative regret per curve, on the recorded t grid."""
    by: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        eps = float(r["epsilon"])
        label = r["algorithm"] + (f" ε={eps:g}" if math.isfinite(eps) else "")
        by[label][float(r["t"])].append(float(r["regret"]))
    out = {}
    for label, grid in by.items():
        ts = sorted(grid)
        means, ses = [], []
        for t in ts:
            v = grid[t]
            m = sum(v) / len(v)
            means.append(m)
            ses.append(math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v)) if len(v) > 1 else 0.0)
        out[label] = {"t": ts, "mean": means, "se": ses}
    return out


def run(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpglm.experiments.sweep import run_sweep

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(args.panels), figsize=(6 * len(args.panels), 4.2), squeeze=False)
    summary = {}
    for ax, panel in zip(axes[0], args.panels):
        sweep = build_sweep(panel, args)
        rows = run_sweep(sweep, out / f"fig1_{panel}.csv", n_jobs=args.n_jobs, progress=not args.no_progress)
        panel_curves = curves(rows)
        spec, horizon = PANELS[panel], sweep.instances[0].horizon
        summary[panel] = {label: {"final": c["mean"][-1], "se": c["se"][-1]} for label, c in panel_curves.items()}
        print(f"Figure 1 ({panel}, d={spec['d']}, S={spec['S']}, K=20, T={horizon}, {sweep.seeds} run(s)):")
        for label, c in sorted(panel_curves.items()):
            ax.plot(c["t"], c["mean"], label=label)
            ax.fill_between(c["t"], [m - s for m, s in zip(c["mean"], c["se"])],
                            [m + s for m, s in zip(c["mean"], c["se"])], alpha=0.2)
            print(f"  {label:<22} regret at T: {c['mean'][-1]:8.1f} ± {c['se'][-1]:.1f}")
        ax.set_title(f"{panel}: d={spec['d']}, S={spec['S']}, K=20")
        ax.set_xlabel("round t")
        ax.set_ylabel("cumulative regret")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "fig1.png", dpi=120)
    plt.close(fig)
    (out / "fig1.json").write_text(json.dumps(summary, indent=2))
    print(f"saved {out / 'fig1.png'}, {out / 'fig1.json'} and the per-panel CSVs in {out}")
    return 0
