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


@pytest.mark.slow
def test_table2_full_private_glm_meets_the_paper(tmp_path):
    """The full replay (10 runs, T = 5000): minutes on 2 cores."""
    out = tmp_path / "t2"
    assert main(["reproduce", "table2", "--presets", "calibrated", "--no-progress", "--out", str(out)]) == 0
    summary = json.loads((out / "table2.json").read_text())
    cells = {(c["algorithm"], c["preset"], c["epsilon"], c["S"]): c for c in summary["cells"]}
    for S in (2.0, 2.5, 3.0):
        regrets = [cells[("Private-GLM", "calibrated", e, S)]["regret"] for e in (4.0, 6.0, 8.0)]
        for e, regret in zip((4.0, 6.0, 8.0), regrets, strict=True):
            assert regret <= 1.15 * PAPER_TABLE2[("Private-GLM", e)][S]
        assert regrets[0] > regrets[1] > regrets[2]  # more privacy, more regret
        for e in (4.0, 6.0, 8.0):
            g = cells[("Private-GLM", "calibrated", e, S)]
            assert g["guarantee_epsilon"] <= e and g["guarantee_delta"] <= 0.02
    glm_ucb = [cells[("GLM-UCB", "", None, S)]["regret"] for S in (2.0, 3.0)]
    assert glm_ucb[1] > 1.5 * glm_ucb[0]  # κ-dependent baseline degrades
