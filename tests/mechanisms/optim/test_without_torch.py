"""Every DP-SGD class imports, and DP-SGD runs on its default engine, where torch and opacus are not installed.

A fresh interpreter with a ``sys.meta_path`` finder that refuses ``torch`` and ``opacus``
(as an interpreter without them does: ``import torch`` raises ModuleNotFoundError).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

_SCRIPT = r'''
import json, sys

class _NoTorch:
    """Refuses torch and opacus as if they were not installed."""
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "opacus"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoTorch())
import numpy as np
import mechanisms.optim as optim
from accounting import ApproxDP, Ledger, ZCDP
from audits.dpsgd import DPSGDAudit
from audits.poisson_dpsgd import PoissonDPSGDAudit

out = {"names": sorted(name for name in optim.__all__ if getattr(optim, name) is not None)}
account = Ledger(ZCDP(1e9)).root
optimiser = optim.DPSGD(account, "logistic", np.random.default_rng(0), clip=1.0)
out["engine"] = optimiser.engine
X, y = np.eye(3), np.array([1.0, 0.0, 1.0])
out["fit"] = optimiser.fit(X, y, noise_multiplier=2.0, steps=3, lr=0.5,
                           projection=optim.BallProjection(1.0)).value.shape[0]
poisson = optim.PoissonDPSGD(Ledger(ApproxDP(9, 1e-5), relation="add_remove").root, "logistic",
                             np.random.default_rng(0), clip=1.0)
out["poisson"] = poisson.fit(X, y, sample_rate=0.5, noise_multiplier=2.0, steps=3, lr=0.5, delta=1e-6,
                             projection=optim.BallProjection(1.0), normalizer=2.0).value.shape[0]
out["audits"] = [DPSGDAudit(1.0, steps=2).engine, PoissonDPSGDAudit.__name__]
try:
    optim.DPSGD(account, "logistic", np.random.default_rng(0), clip=1.0, engine="opacus")
except ImportError as error:
    out["opacus"] = str(error)
out["loaded"] = sorted({name.split(".")[0] for name in sys.modules} & {"torch", "opacus"})
print(json.dumps(out))
'''


def test_every_dpsgd_class_imports_and_runs_without_torch():
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["names"] == sorted(["DPSGD", "DPSGDPlan", "BallProjection", "EllipsoidProjection", "MetricProjection",
                                   "PoissonDPSGD", "ShufflePGD"])
    assert out["engine"] == "numpy" and out["fit"] == 3 and out["poisson"] == 3
    assert out["audits"] == ["numpy", "PoissonDPSGDAudit"]
    assert 'pip install "dpglm[opacus]"' in out["opacus"]
    assert out["loaded"] == []
