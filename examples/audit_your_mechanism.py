"""Audit a mechanism that is not in dpglm: a clipped mean with numpy Laplace noise (docs/audits.md).

Run ``python examples/audit_your_mechanism.py`` (about 10 s), or from the command line
``dpglm audit --mechanism examples/audit_your_mechanism.py:audit``.
"""

import numpy as np

from audits import MechanismAudit


def noisy_mean(data, rng, epsilon=1.0):
    """Mean of values clipped to [0, 1] plus Laplace(1/(nε)) noise: ε-DP when one value is replaced."""
    return np.clip(data, 0.0, 1.0).mean() + rng.laplace(0.0, 1.0 / (len(data) * epsilon))


def unclipped_mean(data, rng, epsilon=1.0):
    """The planted bug: forgets to clip, so one user moves the mean by up to 5/n, not 1/n."""
    return np.mean(data) + rng.laplace(0.0, 1.0 / (len(data) * epsilon))


d0 = np.zeros(100)
d1 = d0.copy()
d1[0] = 5.0  # user 0 replaced by an out-of-range value
audit = MechanismAudit(noisy_mean, (d0, d1), claim=(1.0, 0.0), planted=unclipped_mean, name="noisy-mean")


def main(runs=20_000, seed=0, plot=None):
    result = audit.run(runs, seed=seed)
    power = audit.run_planted(runs, seed=seed)
    if plot:
        result.plot(plot)
    return result, power


if __name__ == "__main__":
    result, power = main(plot="noisy-mean.png")
    print(result.summary())
    print(power.summary())
