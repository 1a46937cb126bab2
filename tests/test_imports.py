"""Light imports (issue 26): a bandit or ledger run imports no heavy library it does not use.

Each check runs in a fresh interpreter (the test process itself has imported everything) and
reads ``sys.modules`` at the end: dp-accounting, scipy.signal/stats/optimize, torch, opacus,
pandas and matplotlib must be absent (and scipy from ``import accounting``). The demo
imports matplotlib but not pyplot. A private bandit run includes DP-SGD refits, which run on
the numpy engine by default (``mechanisms/optim/dpsgd_steps.py``). A run that splits an (ε, δ)
budget into zCDP or GDP shares uses scipy.optimize (the conversions' root finders in
``accounting/convert.py`` and ``accounting/gdp.py``), so runs may import that one, imports may not.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("dp_accounting", "scipy.signal", "scipy.stats", "scipy.optimize", "torch", "opacus", "pandas", "matplotlib")

PRIVATE_RUN = """
import numpy as np
from dpglm.envs import StochasticContextEnv
from dpglm.policies import JointDPGLMBandit, run_policy_record
env = StochasticContextEnv("probit", 3, 10, 2.0, 300, np.random.default_rng(0))
policy = JointDPGLMBandit("probit", 3, 300, 2.0, 4.0, 0.02, np.random.default_rng(1))
run_policy_record(policy, env)
assert policy.diagnostics()["refits_tau"] > 0  # the DP-SGD refits ran
"""


#: What a run uses: scipy.optimize, for the budget conversions (module docstring).
USED_BY_RUNS = ("scipy.optimize",)


def _heavy_after(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    probe = code + (f"\nimport sys\nprint(' '.join(m for m in sys.modules "
                    f"if any(m == h or m.startswith(h + '.') for h in {heavy!r})))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    return out.stdout.split()


IMPORTS = {
    "bandit-import": "from dpglm.policies import RSGLinUCB, JointDPGLMBandit\n"
                     "from dpglm.envs import StochasticContextEnv",
    "packages": "import accounting, dpglm, dpglm.cli, mechanisms, mechanisms.optim",
}
RUNS = {
    "ledger": "from accounting import Ledger, ApproxDP\n"
              "ledger = Ledger(ApproxDP(4, 0.02))\n"
              "ledger.split({'tree': 1, 'opt': 1, 'g': 1}, currency={'tree': 'zcdp', 'opt': 'zcdp', 'g': 'gdp'})",
    "private-run": PRIVATE_RUN,
}


@pytest.mark.parametrize("name", sorted(IMPORTS))
def test_a_bandit_or_ledger_import_imports_no_heavy_module(name):
    assert _heavy_after(IMPORTS[name]) == []


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_bandit_or_ledger_run_imports_only_what_it_uses(name):
    unused = [m for m in _heavy_after(RUNS[name]) if not any(m == u or m.startswith(u + ".") for u in USED_BY_RUNS)]
    assert unused == []


def test_the_ledger_import_imports_no_scipy():
    """``import accounting`` needs numpy only: scipy.special is imported where a GDP conversion uses it."""
    assert _heavy_after("import accounting", heavy=("scipy",)) == []


def test_the_demo_draws_its_plot_without_pyplot(tmp_path):
    """The demo uses matplotlib's Figure (no pyplot: no backend switch, no global figure) and nothing else heavy."""
    code = ("import contextlib, io\nfrom dpglm.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['demo', '--out', {str(tmp_path / 'demo')!r}, '--horizon', '200']) == 0")
    heavy = _heavy_after(code)
    assert "matplotlib.figure" in heavy and "matplotlib.pyplot" not in heavy
    assert [m for m in heavy if not m.startswith(("matplotlib", "scipy.optimize"))] == []
