"""Checkpoint and restore of a DP-TT session (issue 24; docs/service.md, "DP-TT").

A one-run session charging a journal ledger, stopped at random block counts,
checkpointed, its ledger closed and reopened, restored and run to the end, ends
bit-identical to the uninterrupted run: the same stopping time, recommendation and
completed pulls, the same generator states (the Bernoulli pulls', the noise's, the
tie-breaks'), the same charges on the ledger. A second restore, an older checkpoint,
a crash between file and row and a foreign journal are refused and write no row; runs
charging in-memory ledgers cannot be checkpointed.
"""

from __future__ import annotations

import numpy as np
import pytest

from accounting import Ledger, PureDP
from dpglm.bai import AdaPTT, DPTopTwo
from dpglm.bai.top_two import TopTwoEngine, TopTwoSession
from dpglm.service import CheckpointError, checkpoint_policy

MU2 = (0.75, 0.625, 0.5, 0.375, 0.25)
MU4 = (0.75, 0.53125, 0.375, 0.28125, 0.25)
MU6 = (1.0, 0.75, 0.5, 0.25, 0.0)

ENGINES = {
    "dp-tt": lambda: DPTopTwo(MU4, 3.0, 0.01),
    "dp-tt cumulative": lambda: DPTopTwo(MU2, 0.5, 0.01, estimator="cumulative"),
    "adap-tt": lambda: AdaPTT(MU6, 3.0, 0.01),
    "dp-tt eps=inf": lambda: DPTopTwo(MU4, np.inf, 0.01),
    "dp-tt ids": lambda: DPTopTwo(MU4, 0.05, 0.01, beta="ids"),  # its β-sums are state too
}


def _journal_ledger(engine: TopTwoEngine, path) -> Ledger | None:
    return Ledger(PureDP(engine.epsilon), journal=path) if np.isfinite(engine.epsilon) else None


def _fingerprint(session: TopTwoSession) -> dict[str, object]:
    res = session.result()
    mech = getattr(session.est, "mech", None)
    return {"tau": res.stopping_times.tolist(), "rec": res.recommendations.tolist(),
            "stopped": res.stopped.tolist(), "completed": np.asarray(res.completed_pulls).tolist(),
            "pulls": session.runs.pulls.tolist(), "credit": session.runs.beta_credit.tolist(),
            "blocks": session.blocks,
            "env": session.env_rng.bit_generator.state, "ties": session.tie_rng.bit_generator.state,
            "noise": None if mech is None else mech.rng.bit_generator.state,
            "spent": None if session.ledger is None else session.ledger.root.spent,
            "usage": None if session.ledger is None else session.ledger.root.usage()}


@pytest.mark.parametrize("name", list(ENGINES))
# seed 3 (default suite) already fails on a tie, Bernoulli, noise generator or β-sum off by one draw
# after a restore, on every engine; seed 11 (other stop blocks) is the slow second sample
@pytest.mark.parametrize("seed", [3, pytest.param(11, marks=pytest.mark.slow)])
def test_clean_stops_at_random_blocks_restore_bit_identically(tmp_path, name, seed):
    engine = ENGINES[name]()
    full = engine.start(1, np.random.default_rng(seed), ledger=_journal_ledger(engine, tmp_path / "full.db"))
    want = _fingerprint(full.advance())
    assert want["tau"] == engine.run(1, np.random.default_rng(seed)).stopping_times.tolist()
    blocks = int(want["blocks"])  # type: ignore[call-overload]
    assert blocks >= 3, "the instance must take several blocks"
    pick = np.random.default_rng([seed, blocks])
    first = int(pick.integers(0, blocks // 2))
    stops = [first, int(pick.integers(first + 1, blocks))]  # two clean stops at random blocks, in a chain
    journal = tmp_path / "run.db"
    ledger = _journal_ledger(engine, journal)
    session = ENGINES[name]().start(1, np.random.default_rng(seed), ledger=ledger)
    for i, stop in enumerate(stops):
        if stop > session.blocks:
            session.advance(stop - session.blocks)
        assert session.blocks == stop and not session.done
        path = tmp_path / f"cp{i}.npz"
        session.checkpoint(path)
        with pytest.raises(RuntimeError, match="stopped by checkpoint"):
            session.advance(1)
        del session
        if ledger is not None:
            ledger.close()
            ledger = Ledger.from_journal(journal)
        session = TopTwoSession.restore(path, ledger=ledger)
        assert session.ledger is ledger
    got = _fingerprint(session.advance())
    assert got == want, f"stops at blocks {stops}"
    if ledger is None:  # nothing private (ε = ∞): restored again, any number of times
        assert isinstance(TopTwoSession.restore(tmp_path / "cp1.npz"), TopTwoSession)
        return
    assert [kind for _, kind, _ in ledger.service_rows] == ["stopped", "restored"] * 2
    for i in range(2):
        with pytest.raises(CheckpointError, match="already restored"):
            TopTwoSession.restore(tmp_path / f"cp{i}.npz", ledger=ledger)
    assert len(ledger.service_rows) == 4 and ledger.root.spent == PureDP(engine.epsilon)


def test_old_crashed_and_foreign_checkpoints_are_refused(tmp_path, monkeypatch):
    journal = tmp_path / "j.db"
    ledger = Ledger(PureDP(3), journal=journal)
    session = DPTopTwo(MU4, 3.0, 0.01).start(1, np.random.default_rng(5), ledger=ledger).advance(3)
    session.checkpoint(tmp_path / "old.npz")
    first = TopTwoSession.restore(tmp_path / "old.npz", ledger=ledger).advance(3)
    first.checkpoint(tmp_path / "new.npz")
    with pytest.raises(CheckpointError, match="older one is refused|already restored"):
        TopTwoSession.restore(tmp_path / "old.npz", ledger=ledger)
    other = Ledger(PureDP(3), journal=tmp_path / "other.db")
    with pytest.raises(CheckpointError, match="written against journal"):
        TopTwoSession.restore(tmp_path / "new.npz", ledger=other)
    with pytest.raises(CheckpointError, match="give ledger="):
        TopTwoSession.restore(tmp_path / "new.npz")
    second = TopTwoSession.restore(tmp_path / "new.npz", ledger=ledger).advance(2)
    # a crash between the file and its "stopped" row: refused, and the refusal writes nothing
    monkeypatch.setattr(Ledger, "record_service_row", lambda *a, **k: (_ for _ in ()).throw(OSError("power cut")))
    with pytest.raises(OSError, match="power cut"):
        second.checkpoint(tmp_path / "crash.npz")
    monkeypatch.undo()
    rows, spent = len(ledger.service_rows), ledger.root.spent
    with pytest.raises(CheckpointError, match="no clean stop"):
        TopTwoSession.restore(tmp_path / "crash.npz", ledger=ledger)
    assert len(ledger.service_rows) == rows and ledger.root.spent == spent
    assert [kind for _, kind, _ in ledger.service_rows] == ["stopped", "restored"] * 2


def test_runs_on_in_memory_ledgers_and_a_failed_block_cannot_be_checkpointed(tmp_path, monkeypatch):
    many = DPTopTwo(MU4, 3.0, 0.01).start(3, np.random.default_rng(0)).advance(2)
    with pytest.raises(CheckpointError, match="in-memory ledgers"):
        many.checkpoint(tmp_path / "many.npz")
    with pytest.raises(CheckpointError, match="a ledger other than the policy's"):
        checkpoint_policy(many, tmp_path / "many.npz")  # the walker refuses the per-run ledgers too
    with pytest.raises(CheckpointError, match="in memory"):
        DPTopTwo(MU4, 3.0, 0.01).start(1, np.random.default_rng(0), ledger=Ledger(PureDP(3))).checkpoint(
            tmp_path / "memory.npz")
    assert not list(tmp_path.iterdir())  # nothing written
    session = DPTopTwo(MU4, 3.0, 0.01).start(1, np.random.default_rng(0), ledger=Ledger(PureDP(3),
                                                                                        journal=tmp_path / "j.db"))
    monkeypatch.setattr(session.est, "observe", lambda *a: (_ for _ in ()).throw(OSError("disk gone")))
    with pytest.raises(OSError, match="disk gone"):
        session.advance(1)
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="failed part-way"):
        session.advance(1)
    with pytest.raises(CheckpointError, match="in progress"):
        session.checkpoint(tmp_path / "failed.npz")
