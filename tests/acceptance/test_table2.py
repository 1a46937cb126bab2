"""Paper Table 2 (probit, d = 3, K = 20, T = 5000, δ = 0.02): smoke test and full replay."""

from __future__ import annotations

import json

import pytest

from dpglm.cli import main
from dpglm.experiments.sweep import read_results
from dpglm.experiments.table2 import PAPER_TABLE2


def test_table2_quick_smoke(tmp_path, capsys):
    out = tmp_path / "t2"
    code = main(["reproduce", "table2", "--quick", "--presets", "calibrated", "--jobs", "1",
                 "--no-progress", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "Private-GLM ε=4 [calibrated]" in printed and "RS-GLinUCB" in printed
    rows = read_results(out / "table2.csv")
    finals = [r for r in rows if r["t"] == r["horizon"] == 300]
    # 3 instances × (2 ε private + RS-GLinUCB + GLOC), one run each.
    assert len(finals) == 12
    assert {r["S"] for r in finals} == {2.0, 2.5, 3.0}
    for r in finals:
        assert 0 <= r["regret"] <= 300  # pseudo-regret per round is at most R = 1
        if r["algorithm"] == "Private-GLM":
            assert r["guarantee_epsilon"] <= r["epsilon"] and r["guarantee_delta"] <= 0.02
    summary = json.loads((out / "table2.json").read_text())
    assert any(c["check"].endswith("within the asked (ε, δ)") and c["pass"] for c in summary["checks"])
    assert (out / "table2_kappa.png").stat().st_size > 0


def _weighted_slope(groups: list[list[tuple[float, float, float]]]) -> tuple[float, float]:
    """Slope b of regret on ε and its standard error, by weighted least squares (weights 1/s.e.²) with an
    intercept of its own for each group (an S): each group's points (ε, mean regret, s.e.) centred on their
    weighted means. Var(b) = 1/Σ w(ε − ε̄)² for independent cell means."""
    num = den = 0.0
    for points in groups:
        w = [1.0 / se**2 for _, _, se in points]
        e_bar = sum(wi * e for wi, (e, _, _) in zip(w, points, strict=True)) / sum(w)
        r_bar = sum(wi * r for wi, (_, r, _) in zip(w, points, strict=True)) / sum(w)
        num += sum(wi * (e - e_bar) * (r - r_bar) for wi, (e, r, _) in zip(w, points, strict=True))
        den += sum(wi * (e - e_bar) ** 2 for wi, (e, _, _) in zip(w, points, strict=True))
    return num / den, den**-0.5


def test_weighted_slope_is_the_least_squares_line():
    # Equal s.e.: the ordinary least-squares slope; ε = 4, 6, 8 and regret 10 − ε/2 + a group offset.
    slope, se = _weighted_slope([[(4, 8.0, 1.0), (6, 7.0, 1.0), (8, 6.0, 1.0)],
                                 [(4, 18.0, 1.0), (6, 17.0, 1.0), (8, 16.0, 1.0)]])
    assert slope == pytest.approx(-0.5) and se == pytest.approx((2 * 8) ** -0.5)  # Σ(ε − 6)² = 8 per group


@pytest.mark.slow
def test_table2_full_private_glm_meets_the_paper(tmp_path):
    """The full replay (10 runs, T = 5000): minutes on 2 cores.

    The calibrated preset's noise is small, so its regret moves little with ε (at S = 2 one run gave
    346.6 ± 7 at ε = 4 and 349.4 at ε = 6): a strict order of the three means is inside the noise of
    10 runs and is not asserted. What is asserted is the trend with its standard errors: within each S
    the weighted slope of regret on ε does not rise by more than 3 s.e. (three one-sided checks), and
    over all S together it does not rise by more than 2 s.e.
    """
    out = tmp_path / "t2"
    assert main(["reproduce", "table2", "--presets", "calibrated", "--no-progress", "--out", str(out)]) == 0
    summary = json.loads((out / "table2.json").read_text())
    cells = {(c["algorithm"], c["preset"], c["epsilon"], c["S"]): c for c in summary["cells"]}
    groups = []
    for S in (2.0, 2.5, 3.0):
        private = [cells[("Private-GLM", "calibrated", e, S)] for e in (4.0, 6.0, 8.0)]
        points = [(c["epsilon"], c["regret"], c["se"]) for c in private]
        for e, regret, _ in points:
            assert regret <= 1.15 * PAPER_TABLE2[("Private-GLM", e)][S]
        slope, se = _weighted_slope([points])
        assert slope <= 3 * se, (S, points)  # more privacy never significantly less regret
        groups.append(points)
        for e in (4.0, 6.0, 8.0):
            g = cells[("Private-GLM", "calibrated", e, S)]
            assert g["guarantee_epsilon"] <= e and g["guarantee_delta"] <= 0.02
    slope, se = _weighted_slope(groups)
    assert slope <= 2 * se, groups
    glm_ucb = [cells[("GLM-UCB", "", None, S)]["regret"] for S in (2.0, 3.0)]
    assert glm_ucb[1] > 1.5 * glm_ucb[0]  # κ-dependent baseline degrades
