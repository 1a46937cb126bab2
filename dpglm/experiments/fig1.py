"""``dpglm reproduce fig1``: the paper's Figure 1, regret curves with bands.

Paper Appendix B, Figure 1: K = 20 arms uniform in the unit ball, θ* on a sphere, 10 runs.
(a) logistic, d = 5, S = 3.5, T = 15000: Private-GLM vs RS-GLinUCB, ECOLog, GLOC;
(b) probit, d = 5, S = 3, T = 5000: Private-GLM vs RS-GLinUCB, GLM-UCB, GLOC;
Private-GLM at ε ∈ {2, 4, 8}. Curves are the mean cumulative regret over runs with a
band of ± one standard error. Runs are sweep cells (``fig1_<panel>.csv``); the figure is
``fig1.png`` and the final regrets ``fig1.json``. ``--replot`` redraws both from the CSVs
already in ``--out`` without running anything.

Each algorithm keeps one colour and line style in both panels; Private-GLM's ε are
shades of one colour (darker = larger ε) and every legend entry ends with the curve's
final mean regret, so curves that overlap (ε = 4 and 8) stay tellable apart.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any, TypedDict

from accounting.validation import check_int, check_positive

if TYPE_CHECKING:
    from dpglm.experiments.sweep import Sweep

class Panel(TypedDict):
    """One panel of Figure 1: the instance, its horizon and its non-private curves."""

    family: str
    d: int
    S: float
    T: int
    baselines: tuple[str, ...]


PANELS: dict[str, Panel] = {
    "logistic": {"family": "logistic", "d": 5, "S": 3.5, "T": 15000,
                 "baselines": ("RS-GLinUCB", "ECOLog", "GLOC")},
    "probit": {"family": "probit", "d": 5, "S": 3.0, "T": 5000,
               "baselines": ("RS-GLinUCB", "GLM-UCB", "GLOC")},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dpglm.engine.engine import add_engine_arguments
    from dpglm.engine.results import FORMATS

    parser.add_argument("--runs", type=int, default=None, help="runs per curve (default 10; 1 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: defaults T=300, 1 run (flags you give still win)")
    parser.add_argument("--horizon", type=int, default=None,
                        help="T of every panel (default the paper's: 15000 logistic, 5000 probit; 300 with --quick)")
    parser.add_argument("--panels", nargs="+", default=list(PANELS), choices=list(PANELS),
                        help="which panels (default both)")
    parser.add_argument("--epsilons", nargs="+", type=float, default=[2.0, 4.0, 8.0],
                        help="ε of Private-GLM (default 2 4 8)")
    parser.add_argument("--preset", default="tight", choices=("tight", "calibrated", "paper-simulation", "theory"),
                        help="Private-GLM preset (default tight)")
    parser.add_argument("--baselines", nargs="+", default=None, choices=list(BASELINE_STYLE),
                        help="non-private curves to run (default: each panel's own; unknown to a panel: skipped)")
    parser.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    parser.add_argument("--out", default="results/fig1",
                        help="output directory (default results/fig1); a rerun resumes the runs it lacks")
    parser.add_argument("--format", choices=FORMATS, default="csv", help="table format (default csv)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--replot", action="store_true",
                        help="redraw fig1.png and fig1.json from the fig1_<panel>.csv files in --out (no runs)")
    add_engine_arguments(parser)


BASELINE_STYLE = {  # one colour and dash per algorithm, the same in both panels
    "RS-GLinUCB": ("black", "--"),
    "GLOC": ("tab:orange", "-."),
    "GLM-UCB": ("tab:green", ":"),
    "ECOLog": ("tab:purple", ":"),
}


def build_sweep(panel: str, args: argparse.Namespace) -> Sweep:
    """The sweep of one panel."""
    from dpglm.experiments.sweep import Instance, Sweep

    runs = check_int("--runs", args.runs if args.runs is not None else (1 if args.quick else 10))
    spec = PANELS[panel]
    horizon = check_int("--horizon", args.horizon if args.horizon is not None else (300 if args.quick else spec["T"]))
    if not args.epsilons:
        raise ValueError("--epsilons must name at least one ε > 0")
    for eps in args.epsilons:
        check_positive("--epsilons", eps)
    baselines = spec["baselines"]
    if getattr(args, "baselines", None) is not None:
        baselines = tuple(b for b in baselines if b in args.baselines)
    return Sweep(
        algorithms=(f"Private-GLM:{args.preset}",) + baselines,
        instances=(Instance(spec["family"], spec["d"], 20, spec["S"], horizon),),
        epsilons=tuple(args.epsilons),
        delta=0.02,
        seeds=runs,
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


def curve_order(label: str) -> tuple[int, float, str]:
    """Legend order: Private-GLM by increasing ε, then the baselines in :data:`BASELINE_STYLE` order."""
    name, _, eps = label.partition(" ε=")
    if eps:
        return (0, float(eps), name)
    order = list(BASELINE_STYLE)
    return (1, float(order.index(name) if name in order else len(order)), name)


def curve_style(label: str, epsilons: list[float]) -> dict[str, Any]:
    """Colour and dash of one curve: Private-GLM in blues (darker = larger ε), baselines fixed."""
    name, _, eps = label.partition(" ε=")
    if eps:
        import matplotlib

        rank = sorted(epsilons).index(float(eps)) if float(eps) in epsilons else 0
        shade = 0.45 + 0.5 * rank / max(1, len(epsilons) - 1)
        return {"color": matplotlib.colormaps["Blues"](shade), "linestyle": "-"}
    color, dash = BASELINE_STYLE.get(name, ("tab:gray", "-"))
    return {"color": color, "linestyle": dash}


def run(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpglm.engine.engine import engine_from_args
    from dpglm.engine.results import prepare_output, strict_json, table_path
    from dpglm.experiments.sweep import read_results, run_sweep

    if not args.replot:
        for panel in args.panels:
            build_sweep(panel, args)  # every user error before any run
    engine = None if args.replot else engine_from_args(args)
    out = prepare_output(args.out, args.format)  # errors name the flag
    fig, axes = plt.subplots(1, len(args.panels), figsize=(6.5 * len(args.panels), 4.8), squeeze=False)
    summary = {}
    for letter, ax, panel in zip("abcd", axes[0], args.panels, strict=False):
        csv_path = table_path(out / f"fig1_{panel}", args.format)
        if args.replot:
            if not csv_path.exists():
                raise ValueError(f"--replot needs {csv_path}; run without --replot first")
            rows = read_results(csv_path)
        else:
            rows = run_sweep(build_sweep(panel, args), csv_path, engine=engine, progress=not args.no_progress)
        panel_curves = curves(rows)
        spec = PANELS[panel]
        horizon = int(max(float(r["t"]) for r in rows))
        runs = len({r["seed"] for r in rows})
        epsilons = sorted({float(r["epsilon"]) for r in rows if math.isfinite(float(r["epsilon"]))})
        summary[panel] = {label: {"final": c["mean"][-1], "se": c["se"][-1]} for label, c in panel_curves.items()}
        print(f"Figure 1 ({panel}, d={spec['d']}, S={spec['S']}, K=20, T={horizon}, {runs} run(s)):")
        for label in sorted(panel_curves, key=curve_order):
            c = panel_curves[label]
            style = curve_style(label, epsilons)
            ax.plot(c["t"], c["mean"], linewidth=1.8, label=f"{label}  ({c['mean'][-1]:.0f})", **style)
            ax.fill_between(c["t"], [m - s for m, s in zip(c["mean"], c["se"], strict=True)],
                            [m + s for m, s in zip(c["mean"], c["se"], strict=True)], color=style["color"],
                            alpha=0.2, linewidth=0)
            print(f"  {label:<22} regret at T: {c['mean'][-1]:8.1f} ± {c['se'][-1]:.1f}")
        ax.set_title(f"({letter}) {panel}, d={spec['d']}, S={spec['S']}, K=20, T={horizon}")
        ax.set_xlabel("round t")
        ax.set_ylabel(f"cumulative regret (mean ± s.e., {runs} run{'s' if runs != 1 else ''})")
        ax.set_xlim(0, horizon)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8.5, title="curve (regret at T)", title_fontsize=8.5, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "fig1.png", dpi=150)
    plt.close(fig)
    (out / "fig1.json").write_text(strict_json(summary, indent=2))
    print(f"saved {out / 'fig1.png'}, {out / 'fig1.json'} and the per-panel CSVs in {out}")
    return 0
