"""Membership-inference audits on scikit-learn's digits: four attacks, three models, DP-SGD at ε = 1, 4, 10.

Run ``python examples/membership_digits.py [MODELS]`` (needs the ``membership`` extra; about 4 CPU-minutes at
64 models). For each training procedure it trains MODELS models once (each on its own random half of the
1797 digits, stored under ``results/membership-digits/``, so a rerun resumes), then runs LiRA (online, its
fixed-variance variant, offline), RMIA and the loss attack on them, and prints per attack the TPR at 0.1%
and 1% FPR, the AUC, the certified one-run ε lower bounds beside their ceilings and the CPU time:

* a weakly regularised logistic regression (scikit-learn, C = 100) and a small MLP (64 hidden units);
* the project's DP-SGD (binary task "digit ≥ 5", full batch, public normaliser) at ε = 1, 4, 10 (δ = 1e-5):
  every certified bound must stay at or below the claim (docs/audits.md, "Membership inference").
"""

import os
import sys
import time

from audits.membership import MembershipAudit
from audits.membership.data import load
from audits.membership.models import DPSGDLogistic, logistic_fit, logit_score, mlp_fit

ATTACKS = (("lira", False), ("lira", True), ("lira-offline", False), ("rmia", False), ("loss", False))
OUT = os.path.join("results", "membership-digits")


def procedures():
    """(label, fit, data set, claim) of every audited training procedure."""
    yield "logistic", logistic_fit, "digits", None
    yield "mlp", mlp_fit, "digits", None
    for epsilon in (1.0, 4.0, 10.0):
        fit = DPSGDLogistic(epsilon)
        yield f"dpsgd-eps{epsilon:g}", fit, "digits-binary", fit.claim


def main(models=64, seed=0):
    os.makedirs(OUT, exist_ok=True)
    rows = []
    for label, fit, data, claim in procedures():
        X, y = load(data)
        for attack, fixed in ATTACKS:
            audit = MembershipAudit(fit, logit_score, X, y, attack=attack, models=models, rng=seed,
                                    fixed_variance=fixed, claim=claim, store=os.path.join(OUT, f"{label}-{models}.npz"),
                                    name=label, progress=False)
            result = audit.run()
            result.plot(os.path.join(OUT, f"{label}-{attack}{'-fixed' * fixed}-roc.png"))
            print(result.summary(), flush=True)
            rows.append(result)
    return rows


if __name__ == "__main__":
    start = time.perf_counter()
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
    print(f"{time.perf_counter() - start:.0f} s wall")
