"""One policy registry for every runner, and the typed diagnostics record that replaced dict look-ups."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accounting import ApproxDP, Ledger
from dpglm.envs import StochasticContextEnv
from dpglm.experiments import shuffle
from dpglm.experiments.cells import Cell, Instance
from dpglm.experiments.diagnostics import COUNTERS, RunDiagnostics
from dpglm.experiments.registry import REGISTRY, PolicyEntry, entry, play_cell
from dpglm.experiments.sweep import COLUMNS, Sweep, run_cell, run_sweep
from dpglm.policies import run_policy_record
from dpglm.policies.batched import BGLinCB, ShuffleDPGLMBandit

INSTANCE = Instance("probit", 3, 6, 2.0, 150)


def _cell(algorithm, epsilon=math.inf, options=None):
    return Cell(algorithm, INSTANCE, epsilon, 0.02, 0, 3, 50, options or {})


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_entry_plays_and_reports_what_it_declares(name):
    spec = entry(name)
    run = play_cell(_cell(name, 8.0 if spec.private else math.inf))
    assert len(run.record.regret) == INSTANCE.horizon and run.record.regret[-1] > 0
    for field in spec.reports:
        assert getattr(run.diagnostics, field) is not None
    if spec.private:  # the guarantee is the ledger's own, within the asked budget
        guarantee = run.policy.ledger.guarantee()
        assert run.diagnostics.guarantee_epsilon == float(guarantee.eps) <= 8.0
        assert run.diagnostics.guarantee_delta == float(guarantee.delta) <= 0.02
    else:
        assert run.diagnostics.guarantee_epsilon is None


def test_the_batched_entry_plays_what_a_hand_built_policy_plays():
    # The shuffle experiment's run path is the sweep's: one cell, one number, either way.
    cell = _cell("ShuffleDP-GLM", 8.0)
    env = StochasticContextEnv("probit", 3, 6, 2.0, 150, np.random.default_rng(cell.env_seed()))
    policy = ShuffleDPGLMBandit("probit", 3, 150, 2.0, np.random.default_rng(cell.policy_seed()), epsilon=8.0,
                                delta=0.02)
    expected = run_policy_record(policy, env).regret  # played round by round, no batch planning
    sweep_rows = run_cell(cell)
    shuffle_rows, ledger = shuffle.run_cell(cell)
    assert [r["regret"] for r in sweep_rows] == [r["regret"] for r in shuffle_rows] == list(expected[[49, 99, 149]])
    assert sweep_rows[0]["guarantee_epsilon"] == shuffle_rows[0]["guarantee_epsilon"] == ledger["guaranteed"]["epsilon"]
    assert shuffle_rows[0]["batch_lengths"] == " ".join(map(str, policy.schedule.lengths))


def test_a_sweep_of_the_shuffle_bandit_fills_its_guarantee_columns():
    # Before the typed record: ShuffleDP-GLM reported "guarantee_eps" and the sweep read
    # "guarantee_epsilon", so this column would have come out blank.
    rows = run_sweep(Sweep(("ShuffleDP-GLM", "B-GLinCB"), (INSTANCE,), epsilons=(4.0,), seeds=1, record_every=150),
                     progress=False)
    private = [r for r in rows if r["algorithm"] == "ShuffleDP-GLM"]
    assert private and all(0 < r["guarantee_epsilon"] <= 4.0 and 0 < r["guarantee_delta"] <= 0.02 for r in private)
    assert all(r["guarantee_epsilon"] == "" for r in rows if r["algorithm"] == "B-GLinCB")
    assert all(list(r) == [c for c in COLUMNS if c not in ("t", "regret")] + ["t", "regret"] for r in rows)


class _Misspelt:
    """A policy whose diagnostics spell a counter differently from the record."""

    name = "misspelt"

    def __init__(self):
        self.ledger = Ledger(ApproxDP(1, 0.01))

    def diagnostics(self):
        return {"criterion_1": 3, "guarantee_eps": 0.5}


def test_a_declared_counter_the_policy_does_not_report_fails_loudly():
    with pytest.raises(KeyError, match="criterion_I"):
        RunDiagnostics.of(_Misspelt(), reports=COUNTERS)
    # The guarantee is read from the ledger, whatever the dict calls it: nothing charged yet.
    assert RunDiagnostics.of(_Misspelt(), private=True).guarantee_epsilon == 0.0
    with pytest.raises(ValueError, match="guarantee_eps"):
        PolicyEntry("bad", lambda request: None, reports=("guarantee_eps",))


def test_a_private_entry_declares_released_quantities_only():
    """Criterion I's count is computed from users' own arms (docs/joint-dp-privacy.md, step 4): no private
    entry may declare it, and the private policy's published counts are exactly the released ones."""
    from dpglm.experiments.diagnostics import RELEASED_COUNTERS
    from dpglm.policies.joint_dp import RELEASED_COUNTS

    assert RELEASED_COUNTERS == RELEASED_COUNTS and "criterion_I" not in RELEASED_COUNTS
    with pytest.raises(ValueError, match=r"^reports of a private algorithm must be released quantities .*"
                                         r"got \['criterion_I'\]$"):
        PolicyEntry("leaky", lambda request: None, private=True, reports=COUNTERS)
    PolicyEntry("baseline", lambda request: None, reports=COUNTERS)  # a non-private baseline may report it
    assert [name for name, spec in REGISTRY.items() if spec.private and "criterion_I" in spec.reports] == []


def test_columns_are_blank_only_where_the_run_has_no_such_quantity():
    columns = RunDiagnostics(criterion_I=2, batch_lengths=(3, 4, 5)).columns()
    assert columns["criterion_I"] == 2 and columns["batch_lengths"] == "3 4 5"
    assert columns["guarantee_epsilon"] == "" and columns["refits_o"] == ""
    assert set(columns) == set(COUNTERS) | {"guarantee_epsilon", "guarantee_delta", "batch_lengths"}


def test_unknown_algorithm_and_column_are_refused():
    with pytest.raises(ValueError, match="algorithm must be one of"):
        entry("UCB1")
    run = play_cell(_cell("B-GLinCB"))
    with pytest.raises(ValueError, match="regret_at_t"):
        run.rows(("algorithm", "regret_at_t"))
    assert isinstance(run.policy, BGLinCB)
