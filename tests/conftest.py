import importlib.util
from pathlib import Path

import numpy as np
import pytest


def _load(name: str, filename: str):
    """A helper module of tests/accounting/ (tests run with --import-mode=importlib: no package ``tests``)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("accounting") / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_reference = _load("claims_reference", "reference.py")


@pytest.fixture(scope="session")
def claims():
    """The float reference of a ledger's claim (tests/accounting/reference.py): ``claim_reference``, ``best_order``,
    ``RUNG_ORDERS`` (docs/accounting.md, "Claims")."""
    return _reference


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed-seed generator: tests are reproducible run to run."""
    return np.random.default_rng(20261129)


@pytest.fixture(autouse=True, scope="session")
def _calibration_cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """Shuffle calibrations are cached in a session tmp dir, never in the user's ~/.cache/dpglm."""
    import os

    previous = os.environ.get("DPGLM_CACHE_DIR")
    os.environ["DPGLM_CACHE_DIR"] = str(tmp_path_factory.mktemp("dpglm-cache"))
    yield
    if previous is None:
        os.environ.pop("DPGLM_CACHE_DIR", None)
    else:
        os.environ["DPGLM_CACHE_DIR"] = previous


@pytest.fixture(autouse=True, scope="session")
def _witness_dir(tmp_path_factory: pytest.TempPathFactory):
    """Journals are witnessed in a session tmp dir, never in the user's ~/.local/state/dpglm (DPGLM_ANCHOR_DIR)."""
    import os

    previous = os.environ.get("DPGLM_ANCHOR_DIR")
    os.environ["DPGLM_ANCHOR_DIR"] = str(tmp_path_factory.mktemp("dpglm-witness"))
    yield
    if previous is None:
        os.environ.pop("DPGLM_ANCHOR_DIR", None)
    else:
        os.environ["DPGLM_ANCHOR_DIR"] = previous


_workload = _load("snapshot_workload", "snapshot_workload.py")


@pytest.fixture(scope="session")
def snapshot_workload():
    """A ledger using every part of a snapshot's state, its state as plain data, and the replay of every row
    (tests/accounting/snapshot_workload.py)."""
    return _workload
