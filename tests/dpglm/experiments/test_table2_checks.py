"""Table 2's checks: a miss says why (BETTER, WITHIN NOISE, EXPECTED with its cause) or is a FAIL.

The cells are written here by hand around the paper's numbers (``PAPER_TABLE2``), each meant to land in
one status; the full run's 16 FAIL rows (10 runs, measured) were 6 falls with κ, 1 rise within noise and
9 paper-simulation rows 16-22% above the paper.
"""

import math

from dpglm.experiments.table2 import PAPER_KAPPA, PAPER_TABLE2, _checks, format_table


def _cell(preset, eps, S, regret, se=5.0):
    paper = PAPER_TABLE2[("Private-GLM", eps)][S]
    return {"algorithm": "Private-GLM", "preset": preset, "epsilon": eps, "S": S, "runs": 10, "regret": regret,
            "se": se, "kappa": PAPER_KAPPA[S], "paper": paper, "diff": regret / paper - 1, "seconds": 1.0,
            "criterion_I": None, "criterion_II": None, "guarantee_epsilon": eps * 0.9, "guarantee_delta": 0.02}


def _by_name(checks):
    return {c["check"]: c for c in checks}


def test_each_status_and_its_reason():
    cells = [
        # calibrated: S=2 rises 2.8 from ε=4 to 6 with s.e. 6.6/6.4 (within noise), 20% fall with κ (better)
        _cell("calibrated", 4.0, 2.0, 346.6, 6.6), _cell("calibrated", 6.0, 2.0, 349.4, 6.4),
        _cell("calibrated", 4.0, 3.0, 279.0), _cell("calibrated", 6.0, 3.0, 266.8),
        # paper-simulation: +20% above the paper (expected, documented), and +40% (a real failure)
        _cell("paper-simulation", 4.0, 2.0, 811.2), _cell("paper-simulation", 6.0, 2.0, 516.58 * 1.40),
        # theory: a significant rise in ε (fail), and regret rising 30% with κ (fail)
        _cell("theory", 4.0, 2.0, 600.0, 2.0), _cell("theory", 6.0, 2.0, 700.0, 2.0),
        _cell("theory", 4.0, 3.0, 780.0, 2.0), _cell("theory", 6.0, 3.0, 650.0, 2.0),
    ]
    checks = _by_name(_checks(cells))
    noise = checks["Private-GLM[calibrated] decreasing in ε at S=2.0"]
    assert noise["status"] == "within noise" and noise["pass"]
    assert "+2.8 < 2 s.e. 18.4" in noise["detail"]  # 2·√(6.6² + 6.4²) = 18.39
    fall = checks["Private-GLM[calibrated] ε=4 changes < 15% from S=2.0 to S=3.0"]
    assert fall["status"] == "better" and fall["pass"] and "falls 20%" in fall["detail"]
    below = checks["Private-GLM[calibrated] ε=4 S=2.0 within 15% of the paper or below"]
    assert below["status"] == "better" and below["detail"] == "-49%" and "calibrated:" in below["cause"]
    expected = checks["Private-GLM[paper-simulation] ε=4 S=2.0 within 15% of the paper or below"]
    assert expected["status"] == "expected" and not expected["pass"] and "4ε/3" in expected["cause"]
    assert checks["Private-GLM[paper-simulation] ε=6 S=2.0 within 15% of the paper or below"]["status"] == "fail"
    assert checks["Private-GLM[theory] decreasing in ε at S=2.0"]["status"] == "fail"  # +100 ≫ 2·√8
    assert checks["Private-GLM[theory] ε=4 changes < 15% from S=2.0 to S=3.0"]["status"] == "fail"  # +30%
    assert checks["Private-GLM[theory] ε=6 changes < 15% from S=2.0 to S=3.0"]["status"] == "pass"  # -7%
    text = format_table({"cells": cells, "checks": list(checks.values())})
    assert "[WITHIN NOISE] Private-GLM[calibrated] decreasing in ε at S=2.0" in text
    assert "[EXPECTED] Private-GLM[paper-simulation] ε=4 S=2.0" in text and "[FAIL] Private-GLM[theory]" in text
    notes = [line for line in text.splitlines() if line.startswith("[") and line[1].isdigit()]
    assert len(notes) == len({c["cause"] for c in checks.values() if c["cause"]})  # each cause printed once
    # by hand: theory ε=6 sits +35% and +16% above the paper, its S=2 column rises 100, its ε=4 row +30% with κ
    assert "paper checks: 22; 9 PASS, 6 BETTER, 1 WITHIN NOISE, 1 EXPECTED, 5 FAIL" in text


def test_an_expected_row_beyond_its_measured_range_fails():
    within = _checks([_cell("paper-simulation", 8.0, 2.5, 445.27 * 1.25)])
    beyond = _checks([_cell("paper-simulation", 8.0, 2.5, 445.27 * 1.26)])
    assert [c["status"] for c in within if "paper or below" in c["check"]] == ["expected"]
    assert [c["status"] for c in beyond if "paper or below" in c["check"]] == ["fail"]
    assert not math.isnan(within[0]["values"][0])
