"""The execution seam: local runs chunks in order (in process or worker processes) with the same
numbers; dask, when missing, fails naming what to install."""

import operator
import pickle
import sys

import numpy as np
import pytest

from audits.engine import engine_session, map_chunks, require_engine
from audits.noise import GaussianAudit, LaplaceAudit
from audits.tree import TreeAudit
from dpglm.cli import main


def test_local_maps_in_order_in_process_and_in_workers():
    chunks = [3, -1, 7, 0, 5]
    assert map_chunks(operator.neg, chunks) == [-3, 1, -7, 0, -5]
    assert map_chunks(operator.neg, chunks, n_jobs=2) == [-3, 1, -7, 0, -5]
    assert map_chunks(operator.neg, []) == []


def test_sample_is_its_chunks_on_spawned_generators_wherever_computed():
    audit = LaplaceAudit(1.0)
    audit.chunk = 300
    sizes = [300, 300, 300, 100]
    # Reference written out: one generator spawned per chunk, chunks concatenated in order.
    children = np.random.default_rng(5).spawn(len(sizes))
    expected = np.concatenate([audit.scores(1, size, child).reshape(size, -1)
                               for size, child in zip(sizes, children, strict=True)])
    np.testing.assert_array_equal(audit.sample(1, 1000, np.random.default_rng(5)), expected)
    audit.n_jobs = 2
    np.testing.assert_array_equal(audit.sample(1, 1000, np.random.default_rng(5)), expected)
    # One chunk: computed in process on the caller's generator.
    np.testing.assert_array_equal(audit.sample(0, 300, np.random.default_rng(6)),
                                  audit.scores(0, 300, np.random.default_rng(6)).reshape(300, -1))


@pytest.fixture
def no_dask(monkeypatch):
    """dask absent, whether or not it is installed here (a None entry makes the import fail)."""
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.distributed", None)


def test_missing_dask_names_the_extra(no_dask, tmp_path, capsys):
    with pytest.raises(ImportError, match=r'pip install "dask\[distributed\]"'):
        require_engine("dask")
    with pytest.raises(ImportError, match=r"dask\[distributed\]"):
        map_chunks(operator.neg, [1, 2], engine="dask")
    audit = LaplaceAudit(1.0)
    audit.compute_engine = "dask"
    for runs in (100, 100_001):  # one chunk or several
        with pytest.raises(ImportError, match=r"dask\[distributed\]"):
            audit.sample(0, runs, np.random.default_rng(0))
    with pytest.raises(ImportError, match=r"dask\[distributed\]"), engine_session("dask", 2):
        pass
    # The command refuses before running anything, with the message and exit status 2.
    assert main(["audit", "laplace", "--engine", "dask", "--out", str(tmp_path)]) == 2
    assert 'pip install "dask[distributed]"' in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_local_session_leaves_the_mapping_unchanged():
    with engine_session("local", 2):
        assert map_chunks(operator.neg, [4, 5]) == [-4, -5]


def test_bad_engine_arguments():
    with pytest.raises(ValueError, match="engine"):
        map_chunks(operator.neg, [1], engine="spark")
    with pytest.raises(ValueError, match="n_jobs"):
        map_chunks(operator.neg, [1], n_jobs=0)


@pytest.fixture
def ledgers_unpicklable(monkeypatch):
    """Pickling any Ledger raises TypeError, as a journalled or charged one must."""
    from accounting import Ledger

    def refuse(self):
        raise TypeError("a Ledger is never pickled")

    monkeypatch.setattr(Ledger, "__getstate__", refuse)


@pytest.mark.parametrize("build", [lambda: TreeAudit(1.0, horizon=8), lambda: GaussianAudit(2.0),
                                   lambda: LaplaceAudit(1.0)])
def test_an_audit_is_pickled_as_its_recipe_without_its_ledger(build, ledgers_unpicklable):
    audit = build()
    audit.chunk, audit.n_jobs = 40, 2
    copy = pickle.loads(pickle.dumps(audit))  # would raise if a charged ledger travelled along
    assert (copy.chunk, copy.n_jobs, copy.name) == (40, 2, audit.name)
    # The rebuilt audit is the same game: same scores on the same generator, same claim.
    np.testing.assert_array_equal(copy.scores(1, 50, np.random.default_rng(3)),
                                  audit.scores(1, 50, np.random.default_rng(3)))
    assert copy.claim() == audit.claim()
    # Several chunks over two worker processes: the numbers of the in-process chunks.
    sizes = [40, 40, 20]
    expected = np.concatenate([audit.scores(0, n, g).reshape(n, -1)
                               for n, g in zip(sizes, np.random.default_rng(4).spawn(3), strict=True)])
    np.testing.assert_array_equal(audit.sample(0, 100, np.random.default_rng(4)), expected)


def test_every_chunked_audit_of_the_catalogue_pickles_as_its_recipe():
    from audits.base import Audit
    from audits.catalogue import CATALOGUE

    chunked = 0
    for name, spec in sorted(CATALOGUE.items()):
        audit = spec.build(spec.epsilons[0], True)
        if not isinstance(audit, Audit):
            continue  # single-release and coupling audits run in process
        chunked += 1
        copy = pickle.loads(pickle.dumps(audit))
        assert type(copy) is type(audit) and copy.claim() == audit.claim(), name
    assert chunked >= 10
