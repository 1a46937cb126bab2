"""Shuffle accountant and calibration at n = 10^4: timings, and calibrated vs closed-form noise.

Run: ``python -m benchmarks.shuffle``. Prints three small tables:

1. bit sum: certified eps (and the exact-count eps for the all-zeros configuration, and
   the Feldman–McMillan–Talwar closed form) at a few gamma, with accountant timings;
   gamma calibration timing;
2. vector summation: calibrated noise bits b per user and coordinate versus the
   recalled closed form b = 24e4 g^2 ln^2(4 d^2/delta)/(eps^2 n), and the sd of each
   released coordinate sum against the central analytic-Gaussian sd at the same
   (eps, delta) and l2 sensitivity 2L sqrt(m) (the shuffle protocol's price);
3. ShufflePGD composition: per-round eps0 for a total budget, PLD vs advanced composition.
"""

from __future__ import annotations

import math
import os
import sys
import time

# Run as a script, this folder is sys.path[0] and benchmarks/mechanisms.py would shadow the package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

from accounting import convert  # noqa: E402
from mechanisms import shuffle_accountant as acc  # noqa: E402
from mechanisms.optim.shuffle_pgd import calibrate_round_epsilon, composed_epsilon  # noqa: E402

N = 10_000
DELTA = 1e-5


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def bitsum_table() -> None:
    print(f"Bit sum, n = {N}, delta = {DELTA}")
    print(f"{'gamma*n':>8} {'eps certified':>14} {'s':>6} {'eps count(k=0)':>15} {'eps0 local':>10} {'FMT eps':>8}")
    for gamma_n in (60, 200, 1000):
        gamma = gamma_n / N
        eps, seconds = _timed(acc.bitsum_epsilon, N, gamma, DELTA)
        lo, hi = 0.0, eps
        while hi - lo > 1e-5:  # eps of the exact count law when all others hold 0
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if acc.bitsum_delta_for_configuration(N, gamma, mid, 0) > DELTA else (lo, mid)
        local = acc.bitsum_local_epsilon(gamma)
        fmt = acc.fmt_epsilon(local, N, DELTA) if local <= acc.fmt_max_local_epsilon(N, DELTA) else float("nan")
        print(f"{gamma_n:>8} {eps:>14.4f} {seconds:>6.2f} {hi:>15.4f} {local:>10.3f} {fmt:>8.4f}")
    for eps in (0.5, 1.0, 2.0):
        acc.calibrate_bitsum_gamma.cache_clear()
        gamma, seconds = _timed(acc.calibrate_bitsum_gamma, N, eps, DELTA)
        print(f"calibrate gamma for eps={eps}: gamma*n = {gamma * N:.1f} in {seconds:.2f} s")
    print()


def vector_table() -> None:
    print(f"Vector summation, n = {N}, delta = {DELTA}, g = max(ceil(2 sqrt n), d, 4), coordinates bounded by L")
    header = (
        f"{'input':>10} {'m':>3} {'eps':>4} {'g':>4} {'b calibrated':>12} {'s':>6} "
        f"{'b paper':>10} {'paper/ours':>10} {'sd/L':>8} {'central sd/L':>12}"
    )
    print(header)
    for d in (3, 5, 10):
        for kind, m in (("vector", d), ("matrix", d * (d + 1) // 2)):
            for eps in (0.5, 1.0, 2.0):
                g = acc.default_levels(N, d)
                acc.calibrate_noise_bits.cache_clear()
                bits, seconds = _timed(acc.calibrate_noise_bits, N, eps, DELTA, g, m)
                paper = acc.paper_noise_bits(N, eps, DELTA, d)
                sd = (1.0 / g) * math.sqrt(N * (1 + bits) / 4.0)  # per coordinate, in units of L
                central = convert.analytic_gaussian_sigma(eps, DELTA, 2.0 * math.sqrt(m))
                print(
                    f"{kind + ' d=' + str(d):>10} {m:>3} {eps:>4} {g:>4} {bits:>12} {seconds:>6.2f} "
                    f"{paper:>10.3g} {paper / bits:>10.3g} {sd:>8.2f} {central:>12.2f}"
                )
    print()


def pgd_table() -> None:
    print(f"ShufflePGD: per-round eps0 (delta0 = delta/(2T)) meeting a total (eps, delta = {DELTA})")
    print(f"{'T':>5} {'eps':>4} {'eps0':>8} {'PLD eps':>8} {'advanced-composition eps':>25} {'s':>6}")
    for T in (10, 50, 200):
        for eps in (1.0, 4.0):
            eps0, seconds = _timed(calibrate_round_epsilon, eps, DELTA, T)
            d0 = DELTA / (2 * T)
            total = composed_epsilon(eps0, d0, T, DELTA)
            advanced = eps0 * math.sqrt(2 * T * math.log(1 / (DELTA - T * d0))) + T * eps0 * math.expm1(eps0)
            print(f"{T:>5} {eps:>4} {eps0:>8.4f} {total:>8.4f} {advanced:>25.4f} {seconds:>6.2f}")


if __name__ == "__main__":
    bitsum_table()
    vector_table()
    pgd_table()
