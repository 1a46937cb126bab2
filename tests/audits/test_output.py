"""What ``dpglm audit`` prints: short lines (the full record is the JSON), clean progress lines in a log,
and the engine's line only when work left this process."""

import io
import json

import pytest

from dpglm.cli import main
from dpglm.engine.progress import LineProgress, progress

#: Every printed line fits here, its [real]/[planted] tag included (they were 250-400 characters wide).
WIDTH = 100


@pytest.mark.parametrize("name", ["laplace", "gaussian", "gaussian-one-run", "bandit-coupling", "in-situ"])
def test_audit_lines_are_short_and_the_json_keeps_every_digit(name, tmp_path, capsys):
    # the format is under test, not the verdict (exit 1 if a row misses its expected verdict)
    assert main(["audit", name, "--quick", "--epsilon", "1", "--no-plots", "--engine", "local", "--jobs", "1",
                 "--out", str(tmp_path)]) in (0, 1)
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[-1] == f"results in {tmp_path / (name + '-quick')}"  # a path: as long as it is
    lines = lines[:-1]
    assert max(len(line) for line in lines) <= WIDTH, max(lines, key=len)
    assert lines[0].startswith("[real]    " + name)
    assert all(line.startswith(" " * 10) for line in lines[1:lines.index(next(x for x in lines
                                                                             if x.startswith("family-wise")))])
    record = json.loads((tmp_path / f"{name}-quick" / f"{name}-eps1.json").read_text())
    assert record["verdict"] in lines[0] and abs(record["claimed_epsilon"] - 1.0) < 1e-9  # at full precision
    # a log, not a terminal: whole progress lines, no carriage returns, no engine line (nothing left this process)
    assert "\r" not in captured.err and "audits: 1/1 audits (100%)" in captured.err
    assert "engine:" not in captured.err


def test_the_engine_line_is_printed_when_work_went_to_workers(tmp_path, capsys):
    assert main(["audit", "laplace", "--epsilon", "1", "--runs", "120000", "--no-plots", "--engine", "local",
                 "--jobs", "2", "--out", str(tmp_path)]) == 0
    assert "engine: 2 local worker processes; tasks ran in" in capsys.readouterr().err


def test_line_progress_writes_a_line_per_tenth_and_one_at_the_end():
    log = io.StringIO()  # not a terminal
    bar = progress(range(20), desc="cells", unit="run", file=log)
    assert isinstance(bar, LineProgress)
    assert list(bar) == list(range(20))
    lines = log.getvalue().splitlines()
    assert len(lines) == 10 and "\r" not in log.getvalue()
    assert lines[0].startswith("cells: 2/20 runs (10%) after ") and lines[-1].startswith("cells: 20/20 runs (100%)")
    silent = io.StringIO()
    assert list(progress([1, 2], desc="x", disable=True, file=silent)) == [1, 2] and silent.getvalue() == ""


def test_a_terminal_gets_tqdm():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    bar = progress(range(3), desc="cells", file=Terminal())
    assert type(bar).__name__ == "tqdm"
    assert list(bar) == [0, 1, 2]
