"""A reader that closes the pipe early (``dpglm ... | head``) ends the command quietly: no traceback, status 141.

Every command runs inside :func:`dpglm.cli.main`, which catches the ``BrokenPipeError`` of the
first write after the reader has gone and points stdout and stderr at /dev/null, so the
interpreter's final flush finds no pipe either. Each case here runs the real console command
with its stdout (or, for the progress bars, stderr too) on a pipe whose reader is closed before
the command writes anything. The long commands' quick runs are under ``slow``.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _closed_reader(args: list[str], tmp_path: Path, both: bool = False) -> tuple[int, str]:
    """Run ``dpglm args`` in ``tmp_path`` with stdout (and stderr if ``both``) on a pipe whose reader is closed."""
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first byte
    try:
        done = subprocess.run([sys.executable, "-m", "dpglm.cli", *args], stdout=write,
                              stderr=write if both else subprocess.PIPE, cwd=tmp_path, timeout=900,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.close(write)
    return done.returncode, "" if both else done.stderr.decode()


#: What a traceback or an interpreter's complaint about the closed pipe would show on stderr.
NOISE = ("Traceback", "Broken pipe", "BrokenPipe", "Exception ignored", "Errno 32")

CASES = [
    ["ledger", "demo"],
    ["ledger", "demo", "--json"],  # its progress log goes to stderr, the JSON to the closed stdout
    ["audit", "laplace", "--epsilon", "1", "--runs", "200", "--no-plots", "--engine", "local", "--jobs", "1"],
]

SLOW_CASES = [
    ["demo"],
    ["reproduce", "table2", "--quick"],
    ["reproduce", "fig1", "--quick"],
    ["reproduce", "shuffle", "--quick"],
    ["reproduce", "bai", "--quick"],
]


@pytest.mark.parametrize("args", CASES, ids=" ".join)
def test_a_closed_pipe_ends_the_command_quietly(args, tmp_path):
    status, stderr = _closed_reader(args, tmp_path)
    assert status == 141 and not any(noise in stderr for noise in NOISE), stderr


def test_help_into_a_closed_pipe_is_quiet(tmp_path):
    """argparse's own printing ignores the closed pipe and exits 0; nothing is said about it."""
    assert _closed_reader(["--help"], tmp_path) == (0, "")


def test_a_closed_pipe_on_stdout_and_stderr_ends_quietly_too(tmp_path):
    """``dpglm ... 2>&1 | head``: the progress bar's writes to stderr meet the closed pipe as well."""
    status, _ = _closed_reader(CASES[-1], tmp_path, both=True)
    assert status == 141


def test_ledger_show_of_a_journal_ends_quietly(tmp_path):
    subprocess.run([sys.executable, "-m", "dpglm.cli", "ledger", "demo", "--journal", "run.db"], cwd=tmp_path,
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    status, stderr = _closed_reader(["ledger", "show", "run.db"], tmp_path)
    assert status == 141 and not any(noise in stderr for noise in NOISE), stderr


@pytest.mark.slow
@pytest.mark.parametrize("args", SLOW_CASES, ids=" ".join)
def test_a_closed_pipe_ends_every_long_command_quietly(args, tmp_path):
    status, stderr = _closed_reader(args, tmp_path)
    assert status == 141 and not any(noise in stderr for noise in NOISE), stderr
