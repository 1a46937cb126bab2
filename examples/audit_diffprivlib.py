"""Audit another library's mechanisms through the public API: diffprivlib's Laplace and analytic Gaussian.

Run ``python examples/audit_diffprivlib.py`` (needs the ``audit-others`` extra). Each mechanism is
audited on the pair 0 vs 1 (sensitivity 1) against the (ε, δ) it is built with, the score being
its output (monotone likelihood ratio), Clopper–Pearson, 95 %. A threshold test on the output probes
the noise law, not floating-point porosity: "consistent" here says the noise is as wide as claimed.
"""

import time

import numpy as np

from audits import MechanismAudit


def _seeded(build):
    """``mechanism(value, rng)``: a diffprivlib mechanism seeded from the audit's generator (one per generator)."""
    cache: dict[int, object] = {}

    def mechanism(value, rng):
        key = id(rng)
        if key not in cache:
            cache.clear()
            cache[key] = (rng, build(np.random.RandomState(int(rng.integers(2**31)))))
        return cache[key][1].randomise(value)
    return mechanism


def laplace_audit(epsilon=1.0):
    from diffprivlib.mechanisms import Laplace

    return MechanismAudit(_seeded(lambda state: Laplace(epsilon=epsilon, sensitivity=1.0, random_state=state)),
                          (0.0, 1.0), claim=(epsilon, 0.0), name=f"diffprivlib-laplace-eps{epsilon:g}")


def gaussian_audit(epsilon=1.0, delta=1e-5):
    from diffprivlib.mechanisms import GaussianAnalytic

    build = lambda state: GaussianAnalytic(epsilon=epsilon, delta=delta, sensitivity=1.0,  # noqa: E731
                                           random_state=state)
    return MechanismAudit(_seeded(build), (0.0, 1.0), claim=(epsilon, delta),
                          name=f"diffprivlib-gaussian-eps{epsilon:g}")


def main(runs=100_000, epsilons=(0.5, 1.0, 2.0, 4.0), seed=0):
    results = []
    for epsilon in epsilons:
        for audit in (laplace_audit(epsilon), gaussian_audit(epsilon)):
            results.append(audit.run(runs, seed=seed))
    return results


if __name__ == "__main__":
    start = time.perf_counter()
    for result in main():
        print(result.summary(), f"{result.seconds:.0f} s", flush=True)
    print(f"{time.perf_counter() - start:.0f} s")
