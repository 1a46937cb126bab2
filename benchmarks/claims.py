"""The ledger's claim beside the figures it is compared with, and what per-step charging costs.

Run by hand: ``python -m benchmarks.claims`` (a few minutes on a shared 2-core machine; ``--quick`` for
two DP-SGD rows). Prints, side by side in one run:

1. DP-SGD charged one Poisson step at a time (q = 0.01, add/remove) into a default rdp share of
   ApproxDP(8, 10⁻⁵): the ledger's claim (no plan: its odometer ladder), dp-accounting's non-adaptive
   PLD and RdpAccountant ε of the same run, and the claim with the run declared as a plan first.
2. ``dpglm demo``'s bandit (tight preset, T = 2000, ε = 4, δ = 0.02, seed 0): its claim, and the
   non-adaptive figure of its charges; then the same charges replayed into an account that declared
   the tight plan's horizon first (the tree and every planned refit, in any order: a GDP plan).
3. A mixed ledger (a DP-SGD run in an rdp share, a Laplace in a pure share, a Gaussian in a gdp
   share, a tree in a zcdp share): the claim, its parts, the non-adaptive figure.
4. 1000 per-step charges on an in-memory ledger plus one claim, against opacus's RDPAccountant
   (1000 ``step()`` calls and one ``get_epsilon``), timed alternately, medians and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from accounting import GDP, ZCDP, ApproxDP, Ledger

DELTA = 1e-5


def sgd(q: float, z: float, steps: int = 1) -> dp_event.DpEvent:
    step = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z))
    return step if steps == 1 else dp_event.SelfComposedDpEvent(step, steps)


def reference(event: dp_event.DpEvent, delta: float) -> tuple[float, float]:
    """dp-accounting's (PLD ε, RDP ε) of ``event`` at ``delta``, both non-adaptive."""
    pld = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(event)
    rdp = rdp_privacy_accountant.RdpAccountant()
    rdp.compose(event)
    return pld.get_epsilon(delta), rdp.get_epsilon(delta)


def dpsgd_rows(cases: list[tuple[float, int]]) -> None:
    print("1. DP-SGD, q = 0.01, charged step by step into an rdp share of ApproxDP(8, 1e-5), add/remove")
    print(f"   {'z':>4} {'T':>5} {'claim':>7} {'PLD':>7} {'RDP acct':>8} {'claim/RDP':>9} {'plan claim':>10} "
          f"{'plan/PLD':>8}")
    for z, steps in cases:
        ledger = Ledger(ApproxDP(8, DELTA), relation="add_remove")
        account = ledger.split({"sgd": 1}, currency={"sgd": "rdp"})["sgd"]
        for _ in range(steps):
            account.charge_event(sgd(0.01, z), mechanism="DP-SGD", relation="add_remove")
        claim = float(ledger.guarantee().eps)
        planned = Ledger(ApproxDP(8, DELTA), relation="add_remove")
        plan_account = planned.split({"sgd": 1}, currency={"sgd": "rdp"})["sgd"]
        plan_account.plan([sgd(0.01, z, steps)], relation="add_remove")
        plan_account.charge_event(sgd(0.01, z, steps), mechanism="DP-SGD", relation="add_remove")
        plan_claim = float(planned.guarantee().eps)
        pld, rdp = reference(sgd(0.01, z, steps), DELTA)
        print(f"   {z:>4} {steps:>5} {claim:7.3f} {pld:7.3f} {rdp:8.3f} {claim / rdp:9.2f} {plan_claim:10.3f} "
              f"{plan_claim / pld:8.3f}")


def demo_rows() -> None:
    import numpy as np

    from dpglm.envs import StochasticContextEnv
    from dpglm.policies import run_policy_record
    from dpglm.policies.joint_dp import JointDPGLMBandit

    horizon = 2000
    env = StochasticContextEnv("probit", 3, 20, 2.5, horizon, np.random.default_rng([0, 1]))
    policy = JointDPGLMBandit("probit", 3, horizon, 2.5, 4.0, 0.02, np.random.default_rng([0, 2]))
    run_policy_record(policy, env)
    ledger = policy.ledger
    claim = ledger.guarantee()
    figure = ledger.nonadaptive_figure(claim.delta)
    print("2. the demo's bandit (tight preset, probit, d = 3, K = 20, T = 2000, ApproxDP(4, 0.02))")
    print(f"   claim (no plan) ε = {float(claim.eps):.4f} at δ = {float(claim.delta):g}; non-adaptive figure of the "
          f"same charges (not a claim) ε = {float(figure.eps):.4f}")
    tight = policy.joint_plan.tight
    assert tight is not None and not tight.exploration  # the demo's setting: the H tree and θ̂_τ refits only
    charges = [(charged, count) for _, charged, _, _, count in ledger.account("pool").charge_counts()]
    (tree, _), (refit, _) = charges  # the H tree once, then θ̂_τ refits of one cost each, as charged
    horizon_plan = [tree] + [refit] * tight.refits_tau
    replay = Ledger(ApproxDP(4, 0.02))
    planned = replay.split({"pool": 1}, currency={"pool": "gdp"})["pool"]
    planned.plan(horizon_plan)
    for charged, count in charges:
        for _ in range(count):
            planned.charge(charged, mechanism="replayed")
    print(f"   with the horizon declared as a plan (tree + {tight.refits_tau} refits, GDP, any order): claim "
          f"ε = {float(replay.guarantee().eps):.4f}")


def mixed_rows() -> None:
    ledger = Ledger(ApproxDP(8, DELTA), relation="add_remove")
    parts = ledger.split({"sgd": 2, "pure": 1, "gdp": 1, "zcdp": 1},
                         currency={"sgd": "rdp", "pure": "pure", "gdp": "gdp", "zcdp": "zcdp"})
    parts["sgd"].charge_event(sgd(0.01, 1.0, 500), mechanism="DP-SGD", relation="add_remove")
    parts["pure"].charge_event(dp_event.LaplaceDpEvent(2.0), mechanism="Laplace", relation="add_remove")
    parts["gdp"].charge(GDP(0.2), mechanism="Gaussian", relation="add_remove")
    parts["zcdp"].charge(ZCDP(0.02), mechanism="tree", relation="add_remove")
    claim = ledger.guarantee()
    print("3. a mixed ledger, ApproxDP(8, 1e-5) add/remove")
    print(f"   claim ε = {float(claim.eps):.4f} at δ = {float(claim.delta):g}: "
          + "; ".join(f"{p.path} {float(p.eps):.3f} ({p.basis})" for p in claim.parts))
    try:
        figure = f"ε = {float(ledger.nonadaptive_figure(claim.delta).eps):.4f}"
    except TypeError as why:
        figure = f"none ({why})"
    print(f"   non-adaptive figure of the same charges (not a claim): {figure}")


def timing_rows(repeats: int) -> None:
    from opacus.accountants import RDPAccountant

    def ours() -> float:
        ledger = Ledger(ApproxDP(8, DELTA), relation="add_remove")
        account = ledger.split({"sgd": 1}, currency={"sgd": "rdp"})["sgd"]
        start = time.perf_counter()
        for _ in range(1000):
            account.charge_event(sgd(0.01, 1.0), mechanism="DP-SGD", relation="add_remove")
        ledger.guarantee()
        return time.perf_counter() - start

    def theirs() -> float:
        start = time.perf_counter()
        accountant = RDPAccountant()
        for _ in range(1000):
            accountant.step(noise_multiplier=1.0, sample_rate=0.01)
        accountant.get_epsilon(DELTA)
        return time.perf_counter() - start

    ours()  # the step's curve is costed once per process (cached): warm it, as opacus's import is warm
    pairs = [(ours(), theirs()) for _ in range(repeats)]
    a, b = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
    ratio = statistics.median(p[0] / p[1] for p in pairs)
    print(f"4. 1000 per-step charges + one claim: {a * 1e3:.1f} ms; opacus RDPAccountant 1000 steps + "
          f"get_epsilon: {b * 1e3:.1f} ms; ratio {ratio:.1f} (median of {repeats} alternating pairs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two DP-SGD rows, no bandit")
    args = parser.parse_args()
    cases = [(1.0, 1000), (0.8, 100)] if args.quick else [(z, t) for z in (0.8, 1.0) for t in (100, 300, 1000, 3000)]
    dpsgd_rows(cases)
    if not args.quick:
        demo_rows()
    mixed_rows()
    timing_rows(3 if args.quick else 7)


if __name__ == "__main__":
    main()
