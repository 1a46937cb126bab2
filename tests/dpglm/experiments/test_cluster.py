"""A real dask cluster: a scheduler and two single-threaded workers started here as subprocesses
on 127.0.0.1, a 2 × 2 × 2 sweep and a multi-chunk audit sent through ``--address``, bitwise the
same as in this process, spread over both workers. Run by ``.ci/run`` after installing the dask
extra (``pytest -m cluster``); the default ``pytest`` skips it."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[3]
SWEEP = ["reproduce", "shuffle", "--families", "probit", "--dims", "2", "3", "--horizons", "400",
         "--algorithms", "RS-GLinUCB", "B-GLinCB", "--runs", "2", "--no-progress"]
AUDIT = ["audit", "laplace", "--epsilon", "1", "--runs", "250000", "--no-plots"]  # 100 000 runs a chunk: 3 chunks


@pytest.fixture
def cluster(tmp_path):
    """(address, processes): a scheduler on port 0 and two --nthreads 1 workers, stopped afterwards."""
    pytest.importorskip("dask.distributed")
    scheduler_file = tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           **{v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
    started = []
    try:
        started.append(subprocess.Popen(
            [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(scheduler_file)], env=env, cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 120
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written in one go, but give it a moment
        address = json.loads(scheduler_file.read_text())["address"]
        for _ in range(2):
            started.append(subprocess.Popen(
                [sys.executable, "-m", "dask", "worker", "--scheduler-file", str(scheduler_file), "--nthreads", "1",
                 "--nworkers", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"], env=env, cwd=tmp_path,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        from dask.distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        yield address, started
    finally:
        for process in reversed(started):  # only the processes this fixture started
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]


def _record(path: Path) -> dict:
    return {k: v for k, v in json.loads(path.read_text()).items() if k != "seconds"}


def test_sweep_and_audit_on_a_real_cluster_match_this_process(cluster, tmp_path, capsys):
    from dpglm.cli import main
    from dpglm.engine.engine import Engine, EngineSpec
    from dpglm.experiments.sweep import Instance, Sweep, run_sweep

    address, started = cluster
    # The 2 × 2 × 2 sweep (d × algorithm × seed) through the command line.
    assert main([*SWEEP, "--jobs", "1", "--out", str(tmp_path / "serial")]) == 0
    assert main([*SWEEP, "--address", address, "--out", str(tmp_path / "cluster")]) == 0
    err = capsys.readouterr().err
    sys.__stderr__.write(err)
    serial, remote = _csv(tmp_path / "serial" / "shuffle_runs.csv"), _csv(tmp_path / "cluster" / "shuffle_runs.csv")
    assert len({(r["algorithm"], r["d"], r["seed"]) for r in serial}) == 8
    assert remote == serial  # strings of the same floats: bitwise equal
    assert f"dask at {address}" in err

    # Cells ran in at least two worker processes, none of them this one.
    sweep = Sweep(algorithms=("RS-GLinUCB", "GLOC"), instances=(Instance("probit", 2, 5, 2.0, 300),
                                                                Instance("probit", 3, 5, 2.0, 300)), seeds=2)
    with Engine(EngineSpec("dask", 1, address=address)) as engine:
        rows = run_sweep(sweep, engine=engine.spec, progress=False)
        pids = set(engine.pids)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in run_sweep(sweep, progress=False)]
    worker_pids = {p.pid for p in started[1:]}
    sys.__stderr__.write(f"sweep cells ran in worker processes {sorted(pids)}; started workers {sorted(worker_pids)}\n")
    assert len(pids) >= 2 and pids <= worker_pids

    # A multi-chunk audit through --address: the same record as in this process.
    assert main([*AUDIT, "--jobs", "1", "--out", str(tmp_path / "audit-serial")]) == 0
    assert main([*AUDIT, "--address", address, "--out", str(tmp_path / "audit-cluster")]) == 0
    err = capsys.readouterr().err
    sys.__stderr__.write(err)
    # Each audit command writes into its own subfolder of --out (audits/command.py): OUT/laplace.
    assert _record(tmp_path / "audit-cluster" / "laplace" / "laplace-eps1.json") == \
        _record(tmp_path / "audit-serial" / "laplace" / "laplace-eps1.json")
    assert f"dask at {address}" in err and "ran in 2 process(es)" in err
