"""Declarative sweeps: seeding contract, scheduling independence, the tidy CSV."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest

from dpglm.envs import StochasticContextEnv
from dpglm.experiments.sweep import COLUMNS, Instance, Sweep, read_results, run_sweep, split_label
from dpglm.policies import run_policy_record
from dpglm.policies.rarely_switching import RSGLinUCB

INSTANCES = (Instance("probit", 3, 6, 2.0, 120), Instance("probit", 3, 6, 3.0, 120))


def _strip(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_rows_follow_the_seed_sequence_contract():
    sweep = Sweep(algorithms=("RS-GLinUCB",), instances=INSTANCES, seeds=2, root_seed=7, record_every=40)
    rows = run_sweep(sweep, progress=False)
    assert [r["t"] for r in rows[:3]] == [40, 80, 120]
    # Rebuild cell (S = 3, seed 1) by hand: SeedSequence(root, spawn_key=4 little-endian words of
    # BLAKE2b-128 over the JSON of the environment's own parameters), written out here.
    text = json.dumps(["environment", "probit", 3, 6, 3.0, 120, 1], separators=(",", ":"))
    digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
    key = tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4))
    seed = np.random.SeedSequence(7, spawn_key=key)
    env = StochasticContextEnv("probit", 3, 6, 3.0, 120, np.random.default_rng(seed))
    expected = run_policy_record(RSGLinUCB("probit", 3, 120, 3.0, delta=0.02), env).regret
    mine = [r for r in rows if r["S"] == 3.0 and r["seed"] == 1]
    assert [r["regret"] for r in mine] == [expected[39], expected[79], expected[119]]
    assert mine[0]["kappa"] == pytest.approx(env.kappa)
    assert mine[0]["epsilon"] == math.inf and mine[0]["guarantee_epsilon"] == ""


def test_results_do_not_depend_on_scheduling_or_other_cells():
    both = Sweep(algorithms=("GLOC", "RS-GLinUCB"), instances=INSTANCES, seeds=2, record_every=60)
    alone = Sweep(algorithms=("RS-GLinUCB",), instances=INSTANCES, seeds=2, record_every=60)
    serial = _strip(run_sweep(both, progress=False))
    parallel = _strip(run_sweep(both, jobs=2, progress=False))
    assert serial == parallel
    rs_only = _strip(run_sweep(alone, progress=False))
    assert [r for r in serial if r["algorithm"] == "RS-GLinUCB"] == rs_only
    # Adding an instance in front of the grid changes no other cell (keys are not positions).
    grown = Sweep(algorithms=("RS-GLinUCB",), instances=(Instance("probit", 3, 6, 2.5, 120),) + INSTANCES, seeds=2,
                  record_every=60)
    assert [r for r in _strip(run_sweep(grown, progress=False)) if r["S"] != 2.5] == rs_only
    # Common random numbers: both algorithms of one (instance, seed) saw the same problem.
    kappas = {(r["algorithm"], r["S"], r["seed"]): r["kappa"] for r in serial}
    assert kappas[("GLOC", 3.0, 1)] == kappas[("RS-GLinUCB", 3.0, 1)]


def test_private_cells_and_csv(tmp_path):
    sweep = Sweep(algorithms=("Private-GLM:calibrated",), instances=INSTANCES[:1], epsilons=(2.0, 8.0),
                  seeds=1, record_every=120)
    path = tmp_path / "sweep.csv"
    rows = run_sweep(sweep, path, progress=False)
    assert [(r["epsilon"], r["preset"]) for r in rows] == [(2.0, "calibrated"), (8.0, "calibrated")]
    for r in rows:
        assert 0 < r["guarantee_epsilon"] <= r["epsilon"] and 0 < r["guarantee_delta"] <= 0.02
        assert r["criterion_I"] == "" and r["criterion_II"] >= 0  # Criterion I's count is private: blank
    with open(path) as fh:
        assert fh.readline().strip().split(",") == list(COLUMNS)
    assert _strip(read_results(path)) == _strip(rows)


def test_bad_sweeps_are_rejected():
    with pytest.raises(ValueError, match="algorithms"):
        Sweep(algorithms=("UCB1",), instances=INSTANCES)
    with pytest.raises(ValueError, match="epsilons"):
        Sweep(algorithms=("Private-GLM",), instances=INSTANCES, epsilons=(0.0,))
    with pytest.raises(ValueError, match="delta"):
        Sweep(algorithms=("GLOC",), instances=INSTANCES, delta=0.0)
    with pytest.raises(ValueError, match="seeds"):
        Sweep(algorithms=("GLOC",), instances=INSTANCES, seeds=0)
    with pytest.raises(ValueError, match="S"):
        Instance("probit", 3, 6, -1.0, 10)
    with pytest.raises(ValueError, match="jobs"):
        run_sweep(Sweep(algorithms=("GLOC",), instances=INSTANCES[:1], seeds=1), jobs=0)
    assert split_label("Private-GLM:theory") == ("Private-GLM", "theory")
