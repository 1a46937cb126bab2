"""`dpglm audit`: prints, saves JSON + PNG + summary, exit status reflects expected verdicts."""

import json
import math

import pytest

from audits.bounds import epsilon_lower_bound
from dpglm.cli import main


def test_audit_command_saves_results_and_plot(tmp_path, capsys):
    status = main(["audit", "laplace", "--epsilon", "1", "--runs", "2000", "--out", str(tmp_path)])
    assert status == 0
    record = json.loads((tmp_path / "laplace-eps1.json").read_text())
    assert record["verdict"] == "consistent" and record["claimed_epsilon"] == 1.0
    # The stored bound is the Clopper–Pearson bound of the stored counts.
    assert record["epsilon_lower_bound"] == pytest.approx(epsilon_lower_bound(
        record["false_positives"], record["runs"], record["false_negatives"], record["runs"]))
    assert (tmp_path / "laplace-eps1.png").stat().st_size > 1000
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [row["audit"] for row in summary["rows"]] == ["laplace"]
    assert "laplace" in capsys.readouterr().out


def test_planted_bug_found_is_success(tmp_path):
    assert main(["audit", "tree-depth-unscaled", "--quick", "--no-plots", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "tree-depth-unscaled-eps1.json").read_text())["verdict"] == "violated"


def test_unknown_audit_is_refused(tmp_path, capsys):
    assert main(["audit", "nonsense", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown audit" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(ValueError, match="unknown audit"):  # --debug: the exception itself
        main(["--debug", "audit", "nonsense", "--out", str(tmp_path)])


def test_bandit_first_switch_audit_runs_from_the_command_line(tmp_path):
    runs = 16
    status = main(["audit", "bandit-switch-exact-gram", "--runs", str(runs), "--engine", "local", "--jobs", "1",
                   "--out", str(tmp_path)])
    assert status == 0
    record = json.loads((tmp_path / "bandit-switch-exact-gram-eps1.json").read_text())
    assert record["verdict"] == "violated" and record["runs"] == runs and record["holdout_runs"] == 10
    # Perfect separation: each rate's Clopper–Pearson upper bound at α/2 = 0.025 is 1 − 0.025^{1/n}.
    p = 1 - 0.025 ** (1 / runs)
    assert record["epsilon_lower_bound"] == pytest.approx(math.log((1 - 0.01 - p) / p), rel=1e-9)
    assert (tmp_path / "bandit-switch-exact-gram-eps1.png").stat().st_size > 1000
