"""Nothing computed from raw private data is published (issue 30; docs/service.md, "What a run publishes").

Coupling. Two runs share every seed; their users differ — in one valid user's context, or
by five users with invalid contexts (``invalid="skip"`` or ``"clip"``) against the same
users valid. The second run is handed the first's releases (``tests/coupling.py``: its
real mechanisms charge and draw, and the value is the first run's, i.e. S′ + Z′ with
Z′ = Z + (S − S′)), so their ledger releases are identical. Then everything the runs
publish must be identical: ``diagnostics()``, the results rows (the sweeps' and Table 2's
columns; the shuffle experiment's columns and ledger record) and ``dpglm demo``'s printout
and ``summary.json``. Left out, and only these: the simulation's evaluation against its
θ* (regret, κ) and its CPU time, which are not outputs of the policy.

Each case checks the coupling is not vacuous: the runs differ in the private quantity
the operator sees (Criterion I's count, the number of invalid users), which main
published (``criterion_I`` read 295 against 300; ``unplanned_rounds`` too; a NaN context
halted the shuffle run's plan). Every other user's action is identical too.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from argparse import Namespace
from typing import Any

import numpy as np
import pytest

from dpglm.envs import StochasticContextEnv
from dpglm.experiments import shuffle, sweep
from dpglm.experiments.cells import Cell, Instance
from dpglm.experiments.diagnostics import RunDiagnostics
from dpglm.experiments.registry import Request, Run, entry, play
from tests.coupling import couple

T, DELTA = 300, 0.02
INSTANCE = Instance("probit", 3, 20, 2.5, T)
EVALUATION = ("regret", "kappa", "seconds")  # the simulation's, against θ*; not the policy's outputs
#: (algorithm, options, ε): Criterion I fires in every round of ``theory``; ``tight`` at ε = 1e4 has a
#: V-tree, θ̂_o and θ̂_τ refits and Criterion II switches all active.
POLICIES = {
    "theory": ("Private-GLM", {"preset": "theory"}, 4.0),
    "tight": ("Private-GLM", {"preset": "tight"}, 1e4),
    "shuffle": ("ShuffleDP-GLM", {}, 4.0),
}


class _Edited(StochasticContextEnv):
    """The paper's environment with some users' arm sets replaced (``edits``: round → arms)."""

    def __init__(self, edits: dict[int, np.ndarray]) -> None:
        self.edits = edits
        super().__init__(INSTANCE.family, INSTANCE.d, INSTANCE.n_arms, INSTANCE.S, T, np.random.default_rng(1))

    def _arms(self, t: int) -> np.ndarray:
        return self.edits[t] if t in self.edits else super()._arms(t)

    def context_window(self, start: int, stop: int) -> np.ndarray:
        window = np.array(super().context_window(start, stop))
        for t, arms in self.edits.items():
            if start <= t < stop:
                window[t - start] = arms
        return window


def _mechanisms(policy: Any) -> list[tuple[str, object, str]]:
    """Every release a policy's next users see: (log key, object, method)."""
    if hasattr(policy, "design_sum"):  # ShuffleDP-GLM: the batch's V/H_k and θ̂_k
        return [("design", policy.design_sum, "matrix"), ("theta", policy.estimator, "fit")]
    slots = [("h", policy.design_h.tree, "append")]
    if policy.exploration_possible:
        slots += [("v", policy.design_v.tree, "append"), ("o", policy.estimator_o.dpsgd, "fit_blocks")]
    return slots + [("tau", policy.estimator_tau.dpsgd, "fit_blocks")]


def _run(kind: str, edits: dict[int, np.ndarray], logs: dict[str, list], replay: bool, invalid: str,
         tmp_path) -> tuple[dict[str, Any], Any]:
    """Play one run through the registry; what it publishes, and the policy (for the operator's counts)."""
    algorithm, options, eps = POLICIES[kind]
    options = {**options, "invalid": invalid}
    env = _Edited(edits)
    spec = entry(algorithm)
    policy = spec.build(Request(INSTANCE, eps, DELTA, np.random.default_rng(2), env, options))
    explored: list[int] = []
    if hasattr(policy, "counts") and "criterion_I" in policy.counts:
        choose = policy.choose

        def watched(arms: np.ndarray) -> int:
            before = policy.counts["criterion_I"]
            action = choose(arms)
            if policy.counts["criterion_I"] > before:
                explored.append(policy.t)
            return action

        policy.choose = watched
    for key, obj, method in _mechanisms(policy):
        couple(obj, method, logs.setdefault(key, []), replay)
    record = play(algorithm, policy, env)
    label = f"{algorithm}:{options['preset']}" if "preset" in options else algorithm
    cell = Cell(label, INSTANCE, eps, DELTA, 0, 0, T // 3, options)
    run = Run(cell, policy, env, record, 0.0, RunDiagnostics.of(policy, reports=spec.reports, private=True))
    columns = shuffle.COLUMNS if kind == "shuffle" else sweep.COLUMNS
    published: dict[str, Any] = {
        "diagnostics": policy.diagnostics(),
        "rows": [{c: v for c, v in row.items() if c not in EVALUATION} for row in run.rows(columns)],
    }
    if kind == "shuffle":
        published["ledger record"] = shuffle._ledger_record(policy, cell)
    else:
        published["demo"] = _demo(policy, env, record, eps, options["preset"], tmp_path / ("b" if replay else "a"))
    operator = {"explored": explored, "invalid users": policy.operator_invalid_users, "actions": record.actions}
    return published, operator


def _demo(policy: Any, env: Any, record: Any, eps: float, preset: str, out) -> dict[str, Any]:
    """What ``dpglm demo`` prints and saves for this run, less the simulation's evaluation."""
    from dpglm.commands import demo

    out.mkdir()
    args = Namespace(horizon=T, epsilon=eps, delta=DELTA, S=INSTANCE.S, preset=preset, seed=0, out=str(out))
    records = {"Private-GLM": record}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        demo._report(args, env, policy, records)
    demo._save(args, out, env, policy, records)
    summary = json.loads((out / "summary.json").read_text())
    for key in ("final_regret", "seconds"):
        del summary[key]
    del summary["setting"]["kappa"]
    lines = [re.sub(r"κ=[0-9.]+", "κ=…", line) for line in printed.getvalue().splitlines()
             if "cumulative regret" not in line]
    return {"printed": lines, "summary.json": summary}


def _arms(t: int) -> np.ndarray:
    """User t's arm set in the unedited run."""
    return np.array(_Edited({}).context_window(t, t + 1)[0])


def _one_nan(arms: np.ndarray) -> np.ndarray:
    out = arms.copy()
    out[0, 0] = np.nan
    return out


def _couple_pair(kind: str, neighbour: str, tmp_path) -> None:
    """Play the unedited run, then its neighbour with the first's releases; assert both publish the same."""
    invalid = "clip" if neighbour == "clip" else "skip"
    logs: dict[str, list] = {}
    clean, seen = _run(kind, {}, logs, False, invalid, tmp_path)
    explored = seen["explored"]
    if neighbour == "context":  # one valid user who explored gets zero arms (valid data): it no longer does
        users = explored[len(explored) // 2:][:1] if explored else [T // 2]
        edits = {t: np.zeros_like(_arms(t)) for t in users}
    else:  # five users with one NaN entry (skipped), or all NaN (clipped to zero arms)
        users = (explored[:: max(1, len(explored) // 5)] if explored else [10, 50, 100, 150, 200])[:5]
        bad = _one_nan if neighbour == "skip" else (lambda arms: np.full_like(arms, np.nan))
        edits = {t: bad(_arms(t)) for t in users}
    edited, other = _run(kind, edits, logs, True, invalid, tmp_path)
    # Not vacuous: the private quantity differs, and main published it.
    if kind != "shuffle":
        assert set(explored) - set(other["explored"]) == set(users)
    assert other["invalid users"] == (0 if neighbour == "context" else 5) and seen["invalid users"] == 0
    for key in clean:
        assert edited[key] == clean[key], key
    others = np.setdiff1d(np.arange(T), users)
    np.testing.assert_array_equal(other["actions"][others], seen["actions"][others])  # joint DP, as a check


@pytest.mark.parametrize(("kind", "neighbour"), [("theory", "skip"), ("tight", "context"), ("shuffle", "skip")])
def test_neighbouring_runs_with_identical_releases_publish_identical_everything(kind, neighbour, tmp_path):
    _couple_pair(kind, neighbour, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "neighbour"), [
    ("theory", "context"), ("theory", "clip"), ("tight", "skip"), ("tight", "clip"),
    ("shuffle", "clip"), ("shuffle", "context"),
])
def test_every_neighbouring_pair_publishes_identical_everything(kind, neighbour, tmp_path):
    _couple_pair(kind, neighbour, tmp_path)
