"""Resume: a sweep killed halfway and rerun computes only its missing cells, and its final table
equals an uninterrupted run's."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# T = 2000 (not --quick's 300): the engine groups cells into tasks of >= 1 estimated CPU second, so at
# T = 300 the whole sweep (~0.5 s) is one task and the manifest jumps from 0 to every cell at once —
# there is no "halfway" to kill at. At T = 2000 it is ~4 tasks, a second apart.
COMMAND = ["-m", "dpglm.cli", "reproduce", "table2", "--quick", "--horizon", "2000", "--runs", "2",
           "--presets", "calibrated", "--jobs", "1", "--no-progress"]


def _run(out: Path) -> int:
    from dpglm.cli import main

    return main([*COMMAND[2:], "--out", str(out)])


def _table(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]


def _lines(path: Path) -> int:
    return sum(1 for _ in open(path)) if path.exists() else 0


def test_a_killed_sweep_resumes_only_its_missing_cells(tmp_path):
    whole = tmp_path / "whole"
    assert _run(whole) == 0
    cells = _lines(whole / "table2.manifest.jsonl")
    assert cells == 3 * 2 * (2 + 2)  # 3 S × 2 runs × (Private-GLM at ε 4, 8; RS-GLinUCB; GLOC)

    cut = tmp_path / "cut"
    process = subprocess.Popen([sys.executable, *COMMAND, "--out", str(cut)], cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    manifest = cut / "table2.manifest.jsonl"
    deadline = time.monotonic() + 300
    while _lines(manifest) < cells // 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done = _lines(manifest)
    assert 0 < done < cells, f"the kill came at {done} of {cells} cells"
    print(f"killed after {done} of {cells} cells; the rerun computes the other {cells - done}")

    assert _run(cut) == 0
    assert _lines(manifest) == cells  # only the missing cells were added, each once
    assert _table(cut / "table2.csv") == _table(whole / "table2.csv")
    assert _same_json_but_seconds(cut / "table2.json", whole / "table2.json")


def _same_json_but_seconds(a: Path, b: Path) -> bool:
    import json

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "seconds"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads(a.read_text())) == strip(json.loads(b.read_text()))
