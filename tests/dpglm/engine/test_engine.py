"""The engine: same numbers everywhere, tasks grouped, failures retried once and recorded once,
workers stopped on exit."""

from __future__ import annotations

import json
import os
import time

import pytest

from dpglm.engine.engine import Engine, EngineSpec, group_tasks
from dpglm.experiments.sweep import Instance, Sweep, run_sweep

SWEEP = Sweep(algorithms=("RS-GLinUCB", "GLOC"), instances=(Instance("probit", 3, 6, 2.0, 150),
                                                            Instance("logistic", 2, 4, 3.0, 150)),
              seeds=2, record_every=50)


def _strip(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) is not running
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_serial_and_worker_processes_give_bitwise_the_same_rows_and_stop_their_workers():
    serial = _strip(run_sweep(SWEEP, progress=False))
    with Engine(EngineSpec("local", 2)) as engine:
        parallel = _strip(run_sweep(SWEEP, engine=engine.spec, progress=False))
        pool_pids = set(engine.pids)
    assert parallel == serial  # == on floats: bitwise (no tolerance)
    assert len(serial) == 8 * 3
    spec = EngineSpec("local", 2)
    with Engine(spec) as engine:
        assert engine.map(_pid, list(range(6))) and len(engine.pids) == 2
        pids = set(engine.pids)
    time.sleep(0.2)
    assert not any(_alive(pid) for pid in pids), "a worker outlived its engine"
    assert pool_pids  # the sweep ran somewhere


def _pid(_: int) -> int:
    time.sleep(0.05)
    return os.getpid()


def test_local_dask_cluster_gives_the_same_rows():
    pytest.importorskip("dask.distributed")
    serial = _strip(run_sweep(SWEEP, progress=False))
    assert _strip(run_sweep(SWEEP, engine=EngineSpec("dask", 2), progress=False)) == serial


def test_groups_cover_every_item_once_in_order_and_reach_the_target():
    costs = [0.3, 0.3, 0.5, 2.0, 0.1, 0.1, 0.1, 0.9, 0.05]
    groups = group_tasks(costs, workers=2, target_seconds=1.0)
    assert [i for g in groups for i in g] == list(range(len(costs)))
    assert all(sum(costs[i] for i in g) >= 1.0 for g in groups[:-1])
    # A job too small for the target still gives every worker a group.
    assert len(group_tasks([0.01] * 8, workers=4)) >= 4


def _flaky(task: tuple[str, int]) -> int:
    """Fails on its first attempt (marker file per task), succeeds on the second; -1 always fails."""
    folder, value = task
    if value < 0:
        raise ValueError("always fails")
    marker = os.path.join(folder, f"{value}.tried")
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("first attempt fails")
    return value * 10


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_failed_task_is_retried_once_and_recorded_once(tmp_path, jobs):
    tasks = [(str(tmp_path), v) for v in (1, 2, -1, 3)]
    with Engine(EngineSpec("local", jobs)) as engine:
        results = dict(engine.imap(_flaky, tasks))
    assert results == {0: 10, 1: 20, 3: 30}
    assert len(engine.failures) == 1 and engine.failures[0][0] == 2 and "always fails" in engine.failures[0][1]
    assert sorted(os.listdir(tmp_path)) == ["1.tried", "2.tried", "3.tried"]


def _die_once(task: tuple[str, int]) -> int:
    folder, value = task
    marker = os.path.join(folder, "died")
    if value == 0 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(3)  # the worker is lost, not an exception
    return value


def test_a_lost_worker_is_replaced_and_its_tasks_rerun(tmp_path):
    with Engine(EngineSpec("local", 2)) as engine:
        results = dict(engine.imap(_die_once, [(str(tmp_path), v) for v in range(4)]))
    assert results == {0: 0, 1: 1, 2: 2, 3: 3} and engine.failures == []


def test_strict_json_and_parquet_with_the_same_columns(tmp_path):
    pytest.importorskip("pyarrow")
    from dpglm.engine.results import read_table, strict_json
    from dpglm.experiments.sweep import COLUMNS, read_results

    text = strict_json({"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": "x"})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")) == \
        {"a": None, "b": [None, None, 1.5], "c": "x"}
    rows = run_sweep(SWEEP, tmp_path / "t.parquet", progress=False)
    back = read_table(tmp_path / "t.parquet")
    assert list(back[0]) == list(COLUMNS) and "horizon" in COLUMNS and "T" not in COLUMNS
    csv_rows = (run_sweep(SWEEP, tmp_path / "t.csv", progress=False), read_results(tmp_path / "t.csv"))[1]
    assert _strip(back) == _strip(rows) and _strip(csv_rows) == _strip(rows)


def test_flags_choose_the_engine(monkeypatch, tmp_path):
    import argparse

    from dpglm.engine.engine import add_engine_arguments, engine_from_args

    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    assert engine_from_args(parser.parse_args([])) == EngineSpec("local", 2)
    pytest.importorskip("dask.distributed")
    assert engine_from_args(parser.parse_args(["--address", "tcp://127.0.0.1:8786"])) == \
        EngineSpec("dask", 2, address="tcp://127.0.0.1:8786")
    assert engine_from_args(parser.parse_args(["--engine", "dask", "--jobs", "3"])) == EngineSpec("dask", 3)
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://10.0.0.1:8786")  # dask's convention is honoured
    assert engine_from_args(parser.parse_args(["--engine", "dask"])).address == "tcp://10.0.0.1:8786"
    assert engine_from_args(parser.parse_args([])).engine == "local"  # but never turns local into dask
