"""Figure 1: the curve statistics, legend order and styles, and ``--replot`` from a CSV."""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics

import pytest

from dpglm.experiments import fig1
from dpglm.experiments.sweep import COLUMNS

# Final regrets by hand: three runs of each curve, recorded at t = 50 and t = 100.
REGRETS = {
    ("Private-GLM", 2.0): [(10.0, 30.0), (12.0, 36.0), (14.0, 33.0)],
    ("Private-GLM", 8.0): [(9.0, 20.0), (9.0, 22.0), (9.0, 27.0)],
    ("RS-GLinUCB", math.inf): [(5.0, 11.0), (6.0, 13.0), (7.0, 18.0)],
}


def _rows():
    rows = []
    for (algorithm, eps), runs in REGRETS.items():
        for seed, regrets in enumerate(runs):
            for t, regret in zip((50, 100), regrets, strict=False):
                row = dict.fromkeys(COLUMNS, "")
                row.update(algorithm=algorithm, epsilon=eps, family="probit", seed=seed, t=t, regret=regret)
                rows.append(row)
    return rows


def test_curves_are_mean_and_standard_error_over_runs():
    out = fig1.curves(_rows())
    assert set(out) == {"Private-GLM ε=2", "Private-GLM ε=8", "RS-GLinUCB"}
    for (algorithm, eps), runs in REGRETS.items():
        label = algorithm + (f" ε={eps:g}" if math.isfinite(eps) else "")
        finals = [r[1] for r in runs]
        assert out[label]["t"] == [50.0, 100.0]
        assert out[label]["mean"][-1] == pytest.approx(statistics.fmean(finals))
        assert out[label]["se"][-1] == pytest.approx(statistics.stdev(finals) / math.sqrt(3))


def test_legend_lists_private_by_epsilon_then_baselines_with_fixed_styles():
    labels = ["GLOC", "Private-GLM ε=8", "RS-GLinUCB", "Private-GLM ε=2", "ECOLog", "Private-GLM ε=4"]
    assert sorted(labels, key=fig1.curve_order) == [
        "Private-GLM ε=2", "Private-GLM ε=4", "Private-GLM ε=8", "RS-GLinUCB", "GLOC", "ECOLog"]
    eps = [2.0, 4.0, 8.0]
    shades = [fig1.curve_style(f"Private-GLM ε={e:g}", eps)["color"] for e in eps]
    assert len(set(shades)) == 3
    # darker = larger ε: the RGB sum decreases along ε
    assert sum(shades[0][:3]) > sum(shades[1][:3]) > sum(shades[2][:3])
    assert fig1.curve_style("GLOC", eps) == {"color": "tab:orange", "linestyle": "-."}


def _args(out, *extra):
    parser = argparse.ArgumentParser()
    fig1.add_arguments(parser)
    return parser.parse_args(["--out", str(out), "--panels", "probit", "--no-progress", *extra])


def test_replot_redraws_from_the_csv_without_running(tmp_path):
    with open(tmp_path / "fig1_probit.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(_rows())
    assert fig1.run(_args(tmp_path, "--replot")) == 0
    summary = json.loads((tmp_path / "fig1.json").read_text())["probit"]
    assert summary["RS-GLinUCB"]["final"] == pytest.approx(14.0)
    assert summary["Private-GLM ε=8"]["final"] == pytest.approx(23.0)
    assert summary["Private-GLM ε=2"]["se"] == pytest.approx(statistics.stdev([30.0, 36.0, 33.0]) / math.sqrt(3))
    assert (tmp_path / "fig1.png").stat().st_size > 0


def test_replot_without_a_csv_names_the_missing_file(tmp_path):
    with pytest.raises(ValueError, match="fig1_probit.csv"):
        fig1.run(_args(tmp_path, "--replot"))
