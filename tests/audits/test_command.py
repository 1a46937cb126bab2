"""`dpglm audit`: prints, saves JSON + PNG + summary, exit status reflects expected verdicts."""

import json
import math

import pytest

from audits.bounds import epsilon_lower_bound
from dpglm.cli import main


def test_audit_command_saves_results_and_plot(tmp_path, capsys):
    status = main(["audit", "laplace", "--epsilon", "1", "--runs", "2000", "--out", str(tmp_path)])
    assert status == 0
    record = json.loads((tmp_path / "laplace" / "laplace-eps1.json").read_text())
    assert record["verdict"] == "consistent" and record["claimed_epsilon"] == 1.0
    # The stored bound is the Clopper–Pearson bound of the stored counts.
    assert record["epsilon_lower_bound"] == pytest.approx(epsilon_lower_bound(
        record["false_positives"], record["runs"], record["false_negatives"], record["runs"]))
    assert (tmp_path / "laplace" / "laplace-eps1.png").stat().st_size > 1000
    summary = json.loads((tmp_path / "laplace" / "summary.json").read_text())
    assert [row["audit"] for row in summary["rows"]] == ["laplace"]
    out = capsys.readouterr().out
    assert "[real]    laplace" in out and "at 95%: consistent" in out


def test_planted_bug_found_is_success(tmp_path, capsys):
    assert main(["audit", "tree-depth-unscaled", "--quick", "--no-plots", "--out", str(tmp_path)]) == 0
    assert "[planted] tree-depth-unscaled" in capsys.readouterr().out
    record = tmp_path / "tree-depth-unscaled-quick" / "tree-depth-unscaled-eps1.json"
    assert json.loads(record.read_text())["verdict"] == "violated"


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
    record = json.loads((tmp_path / "bandit-switch-exact-gram" / "bandit-switch-exact-gram-eps1.json").read_text())
    assert record["verdict"] == "violated" and record["runs"] == runs and record["holdout_runs"] == 10
    # Perfect separation: each rate's Clopper–Pearson upper bound at α/2 = 0.025 is 1 − 0.025^{1/n}.
    p = 1 - 0.025 ** (1 / runs)
    assert record["epsilon_lower_bound"] == pytest.approx(math.log((1 - 0.01 - p) / p), rel=1e-9)
    assert (tmp_path / "bandit-switch-exact-gram" / "bandit-switch-exact-gram-eps1.png").stat().st_size > 1000


def test_each_command_writes_its_own_subfolder(tmp_path):
    main(["audit", "laplace", "--epsilon", "1", "--runs", "200", "--no-plots", "--out", str(tmp_path)])
    main(["audit", "laplace", "--epsilon", "1", "--runs", "200", "--quick", "--no-plots", "--out", str(tmp_path)])
    main(["audit", "gaussian", "--epsilon", "1", "--runs", "200", "--no-plots", "--out", str(tmp_path)])
    rows = {folder: json.loads((tmp_path / folder / "summary.json").read_text())["rows"]
            for folder in ("laplace", "laplace-quick", "gaussian")}
    assert [row["audit"] for row in rows["gaussian"]] == ["gaussian"]
    assert [row["audit"] for row in rows["laplace"]] == ["laplace"] and rows["laplace-quick"][0]["audit"] == "laplace"


USER_MODULE = """
import numpy as np
from audits import MechanismAudit

def randomized_response(bit, rng, p=0.75):       # ε = ln 3
    return bit if rng.random() < p else 1 - bit

def leaky(bit, rng):                             # the planted bug: truthful
    return bit

audit = MechanismAudit(randomized_response, (0, 1), claim=(np.log(3), 0.0), planted=leaky, name="rr")

def nan_scores():
    return MechanismAudit(randomized_response, (0, 1), claim=(1.0, 0.0), score=lambda out: float("nan"),
                          name="nan")

not_an_audit = 3
"""


def test_a_user_mechanism_runs_from_the_command_line(tmp_path, capsys):
    module = tmp_path / "usermech.py"
    module.write_text(USER_MODULE)
    out = tmp_path / "out"
    assert main(["audit", "--mechanism", f"{module}:audit", "--runs", "2000", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "[real]    rr " in printed and "[planted] rr-planted " in printed
    assert json.loads((out / "rr" / "rr.json").read_text())["verdict"] == "consistent"
    assert json.loads((out / "rr" / "rr-planted.json").read_text())["verdict"] == "violated"
    assert (out / "rr" / "rr.png").stat().st_size > 1000


@pytest.mark.parametrize("attribute, message", [
    ("nan_scores", "scores contain NaN"),
    ("not_an_audit", "is of type int, not an audits.MechanismAudit"),
    ("randomized_response", "is a function of (bit, rng, p=0.75), which needs arguments: a mechanism, not an audit"),
    ("missing", "has no attribute 'missing'"),
])
def test_user_mechanism_mistakes_are_one_line(tmp_path, capsys, attribute, message):
    module = tmp_path / "usermech.py"
    module.write_text(USER_MODULE)
    assert main(["audit", "--mechanism", f"{module}:{attribute}", "--runs", "100", "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("dpglm:")]  # beside the progress bar
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in captured.err
    assert "certified" not in captured.out
