"""``dpglm demo`` as a whole process: CPU seconds and peak memory, optionally side by side with another checkout.

Run: ``python -m benchmarks.demo [--runs N] [--against DIR]``. Each run starts
``python -m dpglm.cli demo --out <fresh folder>`` (the demo's default workload) as a
fresh process with this checkout on ``PYTHONPATH`` and reads its CPU time (user +
system) and peak resident memory from ``os.wait4``: imports, the run, the files and
the interpreter's exit all count (issue 26: the target is <= 1.5 CPU s). With
``--against DIR`` (another checkout of the project, e.g. ``git worktree add DIR
main``) the two run in turn (A = this checkout, B = DIR, A B A B ...) and the median
of the pairwise ratios A/B is printed, which holds when the machine's speed drifts
between pairs. One uncounted run of each comes first.

Python writes no ``__pycache__`` when ``PYTHONDONTWRITEBYTECODE`` is set: each run
then compiles the project's own modules from source (about 0.1 CPU s of the demo's);
the first lines say whether it is set, so that figures are compared like for like.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def demo_usage(checkout: Path) -> tuple[float, float]:
    """(CPU seconds, peak RSS in MiB) of one fresh ``dpglm demo`` process importing from ``checkout``."""
    with tempfile.TemporaryDirectory() as folder:
        process = subprocess.Popen([sys.executable, "-m", "dpglm.cli", "demo", "--out", str(Path(folder) / "demo")],
                                   cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)},
                                   stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"dpglm demo failed in {checkout}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _summary(label: str, runs: list[tuple[float, float]]) -> str:
    cpu = [c for c, _ in runs]
    peak = statistics.median(p for _, p in runs)
    return (f"{label}: {statistics.median(cpu):.3f} CPU s median (min {min(cpu):.3f}, max {max(cpu):.3f}), "
            f"peak RSS {peak:.0f} MiB, {len(runs)} fresh processes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="counted runs of each checkout (default 5)")
    parser.add_argument("--against", type=Path, help="another checkout, run in turn with this one")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    if args.against is not None and not (args.against / "dpglm" / "cli.py").is_file():
        parser.error(f"--against must be a checkout of the project (no dpglm/cli.py in {args.against})")
    checkouts = [ROOT] if args.against is None else [ROOT, args.against.resolve()]
    print(f"PYTHONDONTWRITEBYTECODE={'set' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'unset'}")
    for checkout in checkouts:  # uncounted: warms the file cache
        demo_usage(checkout)
    runs: list[list[tuple[float, float]]] = [[] for _ in checkouts]
    for _ in range(args.runs):
        for checkout, measured in zip(checkouts, runs, strict=True):
            measured.append(demo_usage(checkout))
    for label, checkout, measured in zip("AB", checkouts, runs, strict=True):
        print(_summary(f"{label} {checkout}", measured))
    if args.against is not None:
        ratios = [a[0] / b[0] for a, b in zip(*runs, strict=True)]
        print(f"A/B CPU (median of pairs): {statistics.median(ratios):.3f}  "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
