"""A Top Two simulation advanced block by block (dpglm/bai/session.py; docs/service.md, "DP-TT").

``engine.run`` is ``start(...).advance().result()``: pinned against numbers printed by
``DPTopTwo.run`` on main before sessions existed, and equal when advanced in uneven
chunks. ``start(..., ledger=)`` charges one run's batches to the given ledger.
"""

from __future__ import annotations

import numpy as np
import pytest

from accounting import Ledger, PureDP
from dpglm.bai import DPTopTwo, EBTopTwo

MU4 = (0.75, 0.53125, 0.375, 0.28125, 0.25)
MU6 = (1.0, 0.75, 0.5, 0.25, 0.0)


def test_run_is_start_advance_result_and_keeps_mains_numbers():
    # printed by DPTopTwo(MU6, 3.0, 0.01).run(6, default_rng([0, 5]), max_steps=10**7) on main before sessions
    engine = DPTopTwo(MU6, 3.0, 0.01)
    res = engine.run(6, np.random.default_rng([0, 5]), max_steps=10**7)
    assert res.stopping_times.tolist() == [366, 357, 337, 435, 338, 560]
    assert res.completed_pulls is not None and res.completed_pulls.tolist() == [352, 323, 328, 389, 314, 504]
    assert res.recommendations.tolist() == [0] * 6 and all(ledger.root.spent == PureDP(3) for ledger in res.ledgers)
    # the same, advanced in uneven chunks of blocks
    session = engine.start(6, np.random.default_rng([0, 5]), max_steps=10**7)
    with pytest.raises(RuntimeError, match="still going"):
        session.result()
    chunks = np.random.default_rng(1)
    while not session.done:
        session.advance(int(chunks.integers(1, 5)))
    assert session.result().stopping_times.tolist() == res.stopping_times.tolist()
    # one run charging a given ledger: the numbers of run(1, ...) on the same seed (main: τ = 2007, arm 0)
    ledger = Ledger(PureDP(3))
    one = DPTopTwo(MU4, 3.0, 0.01).start(1, np.random.default_rng(3), ledger=ledger).advance().result()
    assert (one.stopping_times.tolist(), one.recommendations.tolist()) == ([2007], [0])
    assert one.ledgers == [ledger] and ledger.root.spent == PureDP(3)


def test_start_refuses_a_ledger_it_cannot_use():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="n_runs=1"):
        DPTopTwo(MU4, 3.0, 0.01).start(2, rng, ledger=Ledger(PureDP(3)))
    with pytest.raises(ValueError, match="ledger must be None"):
        EBTopTwo(MU4, 0.01).start(1, rng, ledger=Ledger(PureDP(3)))
    with pytest.raises(TypeError, match="ledger must be"):
        DPTopTwo(MU4, 3.0, 0.01).start(1, rng, ledger="budget.db")
    with pytest.raises(ValueError, match="blocks"):
        DPTopTwo(MU4, 3.0, 0.01).start(1, rng).advance(0)
