"""Checkpoint and restore (issue 24, docs/service.md).

Bit-identical: a run stopped at a random round (inside a batch, right after a refit),
checkpointed, its ledger closed and reopened from the journal, restored, and played on,
makes exactly the actions of the uninterrupted run on the same seeds; the environment is
saved and restored by the same walker (its generators too). The ledger then holds
exactly the uninterrupted run's spend: nothing re-granted. Old, twice-restored,
crashed and foreign checkpoints are refused.
"""

from __future__ import annotations

import numpy as np
import pytest

from accounting import ApproxDP, Ledger
from dpglm.envs import StochasticContextEnv
from dpglm.policies import JointDPGLMBandit, Policy, RSGLinUCB, ShuffleDPGLMBandit
from dpglm.service import CheckpointError, checkpoint
from dpglm.service.walker import decode, encode

D, K, T, S = 2, 5, 160, 1.0


def _env() -> StochasticContextEnv:
    env = StochasticContextEnv("logistic", D, K, S, T, np.random.default_rng([9, 2]))
    env.reset()
    return env


def _make(kind: str, ledger: Ledger | None) -> Policy:
    rng = np.random.default_rng(21)
    if kind == "joint":
        return JointDPGLMBandit("logistic", D, T, S, rng=rng, ledger=ledger)
    if kind == "shuffle":
        return ShuffleDPGLMBandit("logistic", D, T, S, rng, ledger=ledger)
    return RSGLinUCB("logistic", D, T, S)


def _play(policy: Policy, env: StochasticContextEnv, start: int, stop: int) -> list[int]:
    out = []
    for t in range(start, stop):
        a = policy.choose(env.contexts(t))
        policy.observe(env.pull(t, a))
        out.append(a)
    return out


def _ledger(tmp_path, name: str) -> Ledger | None:
    return Ledger(ApproxDP(4, 0.02), journal=tmp_path / f"{name}.db")


def _stop_round(kind: str, policy_for_schedule: Policy) -> list[int]:
    """Rounds to stop at: random ones, one inside a batch (shuffle) or one right after a refit (joint, RS)."""
    rng = np.random.default_rng(5)
    picks = [int(rng.integers(1, T - 1))]
    if kind == "shuffle":
        ends = policy_for_schedule.schedule.ends  # type: ignore[attr-defined]
        picks.append(int(ends[0]) + 3)  # inside batch 2
    return picks


@pytest.mark.parametrize("kind", ["joint", "shuffle", "rs"])
def test_a_clean_stop_restores_bit_identical_actions_and_grants_nothing_again(tmp_path, kind):
    private = kind != "rs"
    full_ledger = _ledger(tmp_path, "full") if private else None
    full = _make(kind, full_ledger)
    want = _play(full, _env(), 0, T)
    stops = _stop_round(kind, full)
    if kind in ("joint", "rs"):  # right after a refit: the first round whose choose refitted θ̂_τ
        probe, env = _make(kind, None if not private else Ledger(ApproxDP(4, 0.02))), _env()
        for t in range(T):
            before = probe.counts["refits_tau"]  # type: ignore[attr-defined]
            _play(probe, env, t, t + 1)
            if probe.counts["refits_tau"] > before:  # type: ignore[attr-defined]
                stops.append(t + 1)
                break
    for i, stop in enumerate(stops):
        journal = tmp_path / f"run{i}.db"
        ledger = Ledger(ApproxDP(4, 0.02), journal=journal) if private else None
        policy, env = _make(kind, ledger), _env()
        got = _play(policy, env, 0, stop)
        path = tmp_path / f"cp{i}.npz"
        policy.checkpoint(path)
        with pytest.raises(RuntimeError, match="stopped"):
            policy.choose(env.contexts(stop))
        env_tree, env_arrays = encode(env, "env")
        del policy, env
        if ledger is not None:
            ledger.close()
        reopened = Ledger.from_journal(journal) if private else None
        restored = type(_make(kind, None if not private else Ledger(ApproxDP(4, 0.02)))).restore(path, ledger=reopened)
        got += _play(restored, decode(env_tree, env_arrays, None), stop, T)
        assert got == want, f"stop at {stop}"
        if private:
            assert reopened is not None and full_ledger is not None
            assert reopened.root.spent == full_ledger.root.spent  # nothing re-granted, nothing lost
            assert [kind for _, kind, _ in reopened.service_rows] == ["stopped", "restored"]  # replayed
            assert "stops and restores" in reopened.report() and '"service_rows"' in reopened.to_json()
            with pytest.raises(CheckpointError, match="already restored"):
                Policy.restore(path, ledger=reopened)
            assert len(reopened.service_rows) == 2
        else:
            assert isinstance(Policy.restore(path), RSGLinUCB)  # nothing private: any number of times


@pytest.mark.parametrize("kind", ["joint", "shuffle"])
def test_old_crashed_and_foreign_checkpoints_are_refused(tmp_path, kind, monkeypatch):
    journal = tmp_path / "j.db"
    ledger = Ledger(ApproxDP(4, 0.02), journal=journal)
    policy, env = _make(kind, ledger), _env()
    _play(policy, env, 0, 40)
    policy.checkpoint(tmp_path / "old.npz")
    first = Policy.restore(tmp_path / "old.npz", ledger=ledger)
    _play(first, env, 40, 80)
    spent = ledger.root.spent
    first.checkpoint(tmp_path / "new.npz")
    with pytest.raises(CheckpointError, match="older one is refused|already restored"):
        Policy.restore(tmp_path / "old.npz", ledger=ledger)
    other = Ledger(ApproxDP(4, 0.02), journal=tmp_path / "other.db")
    with pytest.raises(CheckpointError, match="written against journal"):
        Policy.restore(tmp_path / "new.npz", ledger=other)
    second = Policy.restore(tmp_path / "new.npz", ledger=ledger)
    _play(second, env, 80, 100)
    # A crash between the file and its "stopped" row: refused, and nothing was granted for it.
    monkeypatch.setattr(Ledger, "record_service_row", lambda *a, **k: (_ for _ in ()).throw(OSError("power cut")))
    with pytest.raises(OSError, match="power cut"):
        second.checkpoint(tmp_path / "crash.npz")
    monkeypatch.undo()
    before, rows = ledger.root.spent, len(ledger.service_rows)
    with pytest.raises(CheckpointError, match="no clean stop"):
        Policy.restore(tmp_path / "crash.npz", ledger=ledger)
    assert ledger.root.spent == before and len(ledger.service_rows) == rows  # a refusal writes nothing
    assert spent.eps <= before.eps  # type: ignore[attr-defined]
    with pytest.raises(CheckpointError, match="in memory"):
        _make(kind, Ledger(ApproxDP(4, 0.02))).checkpoint(tmp_path / "mem.npz")
    (tmp_path / "bad.npz").write_bytes((tmp_path / "new.npz").read_bytes()[:-40])
    with pytest.raises(CheckpointError):
        Policy.restore(tmp_path / "bad.npz", ledger=ledger)


def test_two_policies_on_one_journal_restore_independently(tmp_path):
    ledger = Ledger(ApproxDP(8, 0.04), journal=tmp_path / "shared.db")
    shares = ledger.split({"a": 1, "b": 1})  # each policy plans with its account's budget

    def make(name: str, seed: int) -> JointDPGLMBandit:
        return JointDPGLMBandit("logistic", D, T, S, rng=np.random.default_rng(seed), ledger=shares[name])

    a, env_a = make("a", 1), _env()
    _play(a, env_a, 0, 30)
    a.checkpoint(tmp_path / "a.npz")
    b = make("b", 2)
    _play(b, _env(), 0, 30)
    b.checkpoint(tmp_path / "b.npz")  # a later checkpoint, of another policy: a's stays restorable
    with pytest.raises(CheckpointError, match="journal"):
        Policy.restore(tmp_path / "a.npz")  # bound to the journal through its account
    a2 = Policy.restore(tmp_path / "a.npz", ledger=ledger)
    _play(a2, env_a, 30, 40)
    assert isinstance(Policy.restore(tmp_path / "b.npz", ledger=ledger), JointDPGLMBandit)
    with pytest.raises(CheckpointError, match="already restored"):
        Policy.restore(tmp_path / "a.npz", ledger=ledger)


def test_an_array_saved_beside_a_view_of_it_is_refused_naming_both():
    """A view would come back as its own copy and stop seeing its base (the tree's split-levels bug)."""
    from dpglm.service.walker import StateError

    levels = np.zeros((2, 3, 4))
    with pytest.raises(StateError, match=r"policy\['levels'\] and policy\['noisy'\] share memory"):
        encode({"levels": levels, "noisy": levels[1]})
    buffer = np.arange(20.0)  # evens [0, 8], then 1 (inside their span, not shared), then 8 (shared)
    with pytest.raises(StateError, match=r"policy\['a'\] and policy\['c'\] share memory"):
        encode({"a": buffer[0:10:2], "b": buffer[1:2], "c": buffer[8:9]})
    frozen = np.arange(6.0)
    frozen.setflags(write=False)
    tree, arrays = encode({"x": np.zeros(3), "y": np.ones(3), "strided": levels[:, 0][:, ::2],
                           "frozen": frozen, "frozen_view": frozen[2:4]})  # read-only views split harmlessly
    assert len(arrays) == 5
    np.testing.assert_array_equal(decode(tree, arrays, None)["y"], np.ones(3))


def _forge(source, target, digest: str | None = None, **edits) -> None:
    """An attacker's copy of ``source``: ``edits`` applied to its document (``arrays``: name → new array), its
    digest recomputed with the module's own function (or set to ``digest``); no journal touched."""
    document, arrays = checkpoint._read(str(source))
    del document["sha256"]
    arrays.update(edits.pop("arrays", {}))
    document.update(edits)
    document["sha256"] = checkpoint._digest(document, arrays) if digest is None else digest
    checkpoint._write(str(target), document, arrays)


def _refused(path, ledger: Ledger, match: str) -> None:
    """``Policy.restore(path)`` refused in one line matching ``match``, writing no journal row."""
    rows, spent = len(ledger.service_rows), ledger.root.spent
    with pytest.raises(CheckpointError, match=match) as error:
        Policy.restore(path, ledger=ledger)
    assert "\n" not in str(error.value)
    assert len(ledger.service_rows) == rows and ledger.root.spent == spent


@pytest.mark.parametrize("kind", ["joint", "shuffle"])
def test_the_journal_decides_a_restore_an_edited_copy_is_refused(tmp_path, kind):
    """Issue 30: a copy whose lineage was edited and digest recomputed was restored a second time."""
    ledger = _ledger(tmp_path, "j")
    assert ledger is not None
    policy, env = _make(kind, ledger), _env()
    _play(policy, env, 0, 40)
    policy.checkpoint(tmp_path / "cp.npz")
    # Before its one restore: copies edited in the lineage, in the state, in the journal id, or with
    # a stored digest that was not recomputed, are each refused, and leave the genuine file restorable.
    _forge(tmp_path / "cp.npz", tmp_path / "lineage.npz", lineage="0" * 32)
    _refused(tmp_path / "lineage.npz", ledger, "not the file the journal's stopped row .* names")
    arrays = checkpoint._read(str(tmp_path / "cp.npz"))[1]
    name = max(arrays, key=lambda a: arrays[a].size)
    _forge(tmp_path / "cp.npz", tmp_path / "state.npz", arrays={name: arrays[name] + 1})
    _refused(tmp_path / "state.npz", ledger, "not the file the journal's stopped row .* names")
    other = _ledger(tmp_path, "other")
    assert other is not None
    _forge(tmp_path / "cp.npz", tmp_path / "journal.npz", journal_id=other.journal_id)
    _refused(tmp_path / "cp.npz", other, "written against journal")
    _refused(tmp_path / "journal.npz", other, "no clean stop")
    _forge(tmp_path / "cp.npz", tmp_path / "digest.npz", digest="0" * 64, lineage="0" * 32)  # not recomputed
    _refused(tmp_path / "digest.npz", ledger, "SHA-256 does not match")
    restored = Policy.restore(tmp_path / "cp.npz", ledger=ledger)
    # After it: the unedited copy and the lineage-edited copy (the attack of issue 30) are refused.
    (tmp_path / "copy.npz").write_bytes((tmp_path / "cp.npz").read_bytes())
    _refused(tmp_path / "copy.npz", ledger, "already restored once")
    _forge(tmp_path / "cp.npz", tmp_path / "attack.npz", lineage="f" * 32)
    _refused(tmp_path / "attack.npz", ledger, "not the file the journal's stopped row .* names")
    assert [k for _, k, _ in ledger.service_rows] == ["stopped", "restored"]
    _play(restored, env, 40, 60)  # the one restore plays on
