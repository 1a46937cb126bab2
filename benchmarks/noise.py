"""Noise values per second: the exact discrete samplers beside numpy's continuous ones, in one run.

    python -m benchmarks.noise [--size 1000000] [--repeat 5]

One core (the samplers are single-threaded numpy). Each row is the best of
``--repeat`` timings (the machine is shared: other jobs only ever add time).
The discrete Gaussian is timed at σ² = 2^56 (σ = 2^28 grid units: what every
Gaussian mechanism draws, ``mechanisms.lattice.GAUSSIAN_BITS``) and at small σ;
the discrete Laplace at t = 2^40 (``LAPLACE_BITS``) and t = 1.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mechanisms.discrete import discrete_gaussian, discrete_laplace


def _best(draw, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        draw()
        best = min(best, time.process_time() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.size
    rows = [
        ("numpy normal (float, not DP-safe)", lambda: rng.normal(0.0, 1.0, n)),
        ("discrete Gaussian, sigma^2 = 2^56", lambda: discrete_gaussian(rng, 2**56, n)),
        ("discrete Gaussian, sigma^2 = 4", lambda: discrete_gaussian(rng, 4, n)),
        ("numpy laplace (float, not DP-safe)", lambda: rng.laplace(0.0, 1.0, n)),
        ("discrete Laplace, t = 2^40", lambda: discrete_laplace(rng, 2**40, n)),
        ("discrete Laplace, t = 1", lambda: discrete_laplace(rng, 1, n)),
    ]
    print(f"{n} values per call, best CPU time of {args.repeat}")
    print(f"{'sampler':<38} {'values/s':>12}")
    for name, draw in rows:
        print(f"{name:<38} {n / _best(draw, args.repeat):>12.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
