"""``dpglm ledger pgserver``: a throwaway server in one command, its printed commands work, Ctrl-C removes it."""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from accounting import ApproxDP, Ledger
from accounting.journal._pgserver import find_bin

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.skipif(find_bin() is None, reason="PostgreSQL server binaries not found (postgresql-15)")
@pytest.mark.parametrize("stop", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_pgserver_prints_a_url_that_works_until_it_is_stopped(stop, anchors, tmp_path):
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    # started as a shell starts a background job, with SIGINT ignored: the command must still answer it
    # (it hung there, so CI run from a background shell waited out the timeout)
    server = subprocess.Popen([sys.executable, "-m", "dpglm.cli", "ledger", "pgserver"], cwd=tmp_path, env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        printed = [server.stdout.readline() for _ in range(8)]  # the eight lines it prints, then it waits
        text = "".join(printed)
        url = re.search(r"a journal:\s+(\S+)", text).group(1)
        folder = re.search(r"deletes (\S+)\)", text).group(1)
        assert url.startswith("postgresql://dpglm@127.0.0.1:") and url.endswith("?journal=try")
        assert os.path.isdir(folder)
        # the printed commands, as a user would paste them
        demo = re.search(r"dpglm ledger demo --journal '(\S+)'", text).group(1)
        done = subprocess.run([sys.executable, "-m", "dpglm.cli", "ledger", "demo", "--journal", demo], env=ENV,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        shown = subprocess.run([sys.executable, "-m", "dpglm.cli", "ledger", "show", url], env=ENV, cwd=tmp_path,
                               capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0 and f"journal: {url}" in shown.stdout
        python = re.search(r'python -c "(.+)"', text).group(1)
        assert "ρ=1" in subprocess.run([sys.executable, "-c", python], env=ENV, cwd=tmp_path, capture_output=True,
                                        text=True, timeout=120, check=True).stdout
        with Ledger.from_journal(url, read_only=True) as ledger:  # what the demo charged is on the server
            assert ledger.budget == ApproxDP(4, 0.02) and ledger.root.remaining == ApproxDP(0, 0)
    finally:
        server.send_signal(stop)
        _, err = server.communicate(timeout=300)  # pg_ctl stop waits up to 60 s, longer on a loaded machine
    assert server.returncode == 0 and "Traceback" not in err
    assert not os.path.exists(folder)  # stopped and deleted
