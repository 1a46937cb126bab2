"""Import cost: the bandit import against numpy + scipy.linalg + scipy.special, in fresh processes.

Run: ``python -m benchmarks.imports [--runs N]``. Each run starts two fresh Python
processes in turn (A B A B ...): A imports the bandits
(``from dpglm.policies import RSGLinUCB, JointDPGLMBandit; from dpglm.envs import
StochasticContextEnv``), B imports the floor every bandit needs anyway
(``import numpy, scipy.linalg, scipy.special``). It reports each process's CPU time
(user + system, from ``os.wait4``), the median of each and the median of the
pairwise ratios A/B, which holds when the machine's speed drifts between pairs
(issue 26: the target is a ratio <= 1.5). It also prints which heavy modules the
bandit import pulled in (none is the goal: docs/design.md, "imports").
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

BANDITS = ("from dpglm.policies import RSGLinUCB, JointDPGLMBandit; "
           "from dpglm.envs import StochasticContextEnv")
FLOOR = "import numpy, scipy.linalg, scipy.special"
#: Modules that a bandit or ledger run must not import unless it uses them.
HEAVY = ("dp_accounting", "scipy.signal", "scipy.stats", "scipy.optimize", "torch", "opacus", "pandas",
         "matplotlib")


def cpu_seconds(code: str) -> float:
    """User + system CPU seconds of a fresh ``python -c code`` (its children included)."""
    process = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ))
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"python -c {code!r} failed")
    return usage.ru_utime + usage.ru_stime


def heavy_modules(code: str) -> list[str]:
    """The :data:`HEAVY` modules (or their submodules) in ``sys.modules`` after ``code``."""
    probe = (f"{code}\nimport sys\nprint(' '.join(sorted(m for m in sys.modules "
             f"if any(m == h or m.startswith(h + '.') for h in {HEAVY!r}))))")
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    return sorted({name.split(".")[0] if not name.startswith("scipy") else ".".join(name.split(".")[:2])
                   for name in out.split()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="pairs of fresh processes (default 7)")
    args = parser.parse_args()
    cpu_seconds(BANDITS), cpu_seconds(FLOOR)  # warm the file cache for both
    bandits, floor = [], []
    for _ in range(args.runs):
        bandits.append(cpu_seconds(BANDITS))
        floor.append(cpu_seconds(FLOOR))
    ratios = [a / b for a, b in zip(bandits, floor, strict=True)]
    print(f"bandit import : {statistics.median(bandits):.3f} CPU s (median of {args.runs} fresh processes)")
    print(f"numpy + scipy.linalg + scipy.special: {statistics.median(floor):.3f} CPU s")
    print(f"ratio (median of pairs): {statistics.median(ratios):.2f}  (min {min(ratios):.2f}, max {max(ratios):.2f})")
    heavy = heavy_modules(BANDITS)
    print("heavy modules imported by the bandit import:", ", ".join(heavy) if heavy else "none")


if __name__ == "__main__":
    main()
