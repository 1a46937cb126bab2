"""The speed issues' per-round and memory ratios, in two checkouts side by side, in one run (issue 32).

    python -m benchmarks.before_after BEFORE_DIR AFTER_DIR [--alternations 2] [--repeat 3]
                                      [--rounds POLICY:d:K:T ...] [--memory POLICY:d:K:T ...]

Every measurement runs in a fresh process of the checkout it measures (its directory as the
working directory and ``PYTHONPATH``), through that checkout's own benchmarks, so the old
and the new code are timed by the same harness under the same load:

* ``--rounds`` cells: that checkout's ``benchmarks.rounds`` (its warm-up, then ``_cell``:
  policy-only CPU µs per round, env subtracted, the min of ``--repeat`` runs with the numpy
  UCB floor measured alternately in the same process). Each cell runs ``--alternations``
  times per checkout, the checkouts alternating (A B A B); the table gives each checkout's
  smallest policy µs, smallest floor µs and their ratio.
* ``--memory`` cells: that checkout's ``benchmarks.memory`` child (peak RSS of one run in a
  fresh process, :func:`dpglm.policies.run_policy_record`), and the ratio of each cell's peak
  to the first listed cell of the same policy, d and K (e.g. T = 2·10⁵ over T = 2·10⁴).

The defaults are the cells the speed issues (26, 32) set targets on.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ROUNDS = ("Private-GLM:3:20:5000", "RS-GLinUCB:3:20:5000", "RS-GLinUCB:10:100:5000", "ShuffleDP-GLM:10:100:20000",
          "ShuffleDP-GLM:10:100:5000")
MEMORY = ("RS-GLinUCB:10:20:20000", "RS-GLinUCB:10:20:200000", "ShuffleDP-GLM:10:20:20000",
          "ShuffleDP-GLM:10:20:200000", "ShuffleDP-GLM:10:100:100000")

_ROUNDS_CHILD = """\
import sys
from benchmarks.rounds import _cell, per_round
name, d, k, horizon, repeat = sys.argv[1], *map(int, sys.argv[2:])
per_round(name, 3, 20, 200, 1)
floor, us, _, regret = _cell(name, d, k, horizon, repeat)
print(floor, us, regret)
"""


def _cell_spec(text: str) -> tuple[str, int, int, int]:
    try:
        name, d, k, horizon = text.split(":")
        return name, int(d), int(k), int(horizon)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a cell is POLICY:d:K:T, got {text!r}") from None


def _run(tree: str, args: list[str]) -> list[float]:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    out = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, check=True)
    return [float(v) for v in out.stdout.split()]


def _label(tree: str) -> str:
    return os.path.basename(os.path.abspath(tree))[-14:]


def rounds_table(trees: list[str], cells: list[tuple[str, int, int, int]], alternations: int, repeat: int) -> None:
    print(f"policy-only CPU µs/round (env subtracted), min of {repeat} a process, {alternations} processes a checkout")
    head = (f"{'policy':<14} {'d':>3} {'K':>4} {'T':>6} {'checkout':<14} {'µs/round':>9} {'floor µs':>9} {'ratio':>6} "
            f"{'regret':>8}")
    print(head)
    print("-" * len(head))
    for name, d, k, horizon in cells:
        best: dict[str, list[float]] = {tree: [float("inf"), float("inf"), float("nan")] for tree in trees}
        for _ in range(alternations):
            for tree in trees:
                floor, us, regret = _run(tree, ["-c", _ROUNDS_CHILD, name, str(d), str(k), str(horizon), str(repeat)])
                row = best[tree]
                row[0], row[1], row[2] = min(row[0], floor), min(row[1], us), regret
        for tree in trees:
            floor, us, regret = best[tree]
            print(f"{name:<14} {d:>3} {k:>4} {horizon:>6} {_label(tree):<14} {us:>9.1f} {floor:>9.1f} "
                  f"{us / floor:>6.2f} {regret:>8.1f}", flush=True)


def memory_table(trees: list[str], cells: list[tuple[str, int, int, int]]) -> None:
    print("peak RSS of one run in a fresh process (benchmarks.memory's child)")
    head = (f"{'policy':<14} {'d':>3} {'K':>4} {'T':>7} {'checkout':<14} {'setup MB':>9} {'peak MB':>8} "
            f"{'× first T':>9} {'CPU s':>6} {'regret':>8}")
    print(head)
    print("-" * len(head))
    first: dict[tuple[str, str, int, int], float] = {}
    for name, d, k, horizon in cells:
        for tree in trees:
            child = ["-m", "benchmarks.memory", "--child", str(horizon), "--d", str(d), "--K", str(k), "--policy", name]
            setup, peak, seconds, regret = _run(tree, child)
            base = first.setdefault((tree, name, d, k), peak)
            print(f"{name:<14} {d:>3} {k:>4} {horizon:>7} {_label(tree):<14} {setup:>9.1f} {peak:>8.1f} "
                  f"{peak / base:>9.2f} {seconds:>6.1f} {regret:>8.1f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", help="checkouts to measure side by side (e.g. BEFORE AFTER)")
    parser.add_argument("--alternations", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=_cell_spec, nargs="*", default=[_cell_spec(c) for c in ROUNDS])
    parser.add_argument("--memory", type=_cell_spec, nargs="*", default=[_cell_spec(c) for c in MEMORY])
    args = parser.parse_args(argv)
    for tree in args.trees:
        if not os.path.isdir(os.path.join(tree, "benchmarks")):
            raise SystemExit(f"trees: {tree!r} is not a dpglm checkout (no benchmarks/ in it)")
    if args.rounds:
        rounds_table(args.trees, args.rounds, args.alternations, args.repeat)
    if args.memory:
        memory_table(args.trees, args.memory)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
