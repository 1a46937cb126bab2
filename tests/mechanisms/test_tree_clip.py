"""Continual release with ``invalid="clip"``: an element beyond the bounds is mapped into them before its noise.

Independent sources: the clipped elements are computed here from their definition (x·B/‖x‖,
NaN → 0, (A + Aᵀ)/2, negative eigenvalues of numpy's eigh set to 0) and fed to a
``invalid="raise"`` stream on the same seed, which must release the same floats; the
sensitivity claim is checked on the map itself: any two mapped elements differ by ≤ Δ.
"""

import doctest
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from accounting import ZCDP, Ledger
from mechanisms import BinaryTreeMechanism, SquareRootFactorizationMechanism
from mechanisms import tree as tree_module
from mechanisms.tree import NORM_SLACK, StreamElements


def _stream(cls=BinaryTreeMechanism, invalid="clip", shape=(2,), sensitivity=2.0, psd=False, seed=0, **kw):
    return cls(Ledger(ZCDP(1e6)).root, horizon=16, shape=shape, sensitivity=sensitivity,
               rng=np.random.default_rng(seed), cost=ZCDP(1.0), psd=psd, invalid=invalid, **kw)


def _scaled(x, bound):
    norm = np.linalg.norm(x)
    return x * (bound / norm) if norm > bound else x


@pytest.mark.parametrize("cls", [BinaryTreeMechanism, SquareRootFactorizationMechanism])
def test_clipped_vectors_release_what_the_clipped_elements_would(cls):
    raw = [np.array([3.0, 4.0]), np.array([0.3, -0.2]), np.array([np.nan, 0.5]), np.array([-1e200, 1e200]),
           np.array([np.inf, -7.0])]
    expected = [np.array([0.6, 0.8]), np.array([0.3, -0.2]), np.array([0.0, 0.5]),
                np.array([-1.0, 1.0]) / math.sqrt(2), np.array([0.0, -1.0])]
    clipping, reference = _stream(cls), _stream(cls, invalid="raise")
    for x, clipped in zip(raw, expected, strict=True):
        np.testing.assert_array_equal(clipping.append(x).value, reference.append(clipped).value)
    assert clipping.element_bound == 1.0  # replace-one: Δ/2
    assert clipping.receipt.cost == reference.receipt.cost == ZCDP(1)


def test_raise_still_refuses_after_the_charge_and_clip_is_chosen_before_it():
    ledger = Ledger(ZCDP(10))
    tree = BinaryTreeMechanism(ledger.root, horizon=4, shape=(2,), sensitivity=2.0, rng=np.random.default_rng(0),
                               cost=ZCDP(1))
    with pytest.raises(ValueError, match="L2 norm 5.0 > 1.0"):
        tree.append(np.array([3.0, 4.0]))
    assert tree.t == 0 and ledger.root.spent == ZCDP(1)
    with pytest.raises(ValueError, match="invalid must be one of"):
        BinaryTreeMechanism(ledger.root, horizon=4, shape=(2,), sensitivity=2.0, rng=np.random.default_rng(0),
                            cost=ZCDP(1), invalid="skip")
    assert ledger.root.spent == ZCDP(1)  # refused before the charge


def test_matrices_are_symmetrised_made_psd_and_scaled():
    a = np.array([[2.0, 1.0], [0.0, -3.0]])  # asymmetric, and its symmetric part is indefinite
    sym = (a + a.T) / 2
    values, vectors = np.linalg.eigh(sym)
    psd = (vectors * np.maximum(values, 0)) @ vectors.T
    psd = (psd + psd.T) / 2
    bound = math.sqrt(2) / math.sqrt(2)  # replace-one, psd: Δ/√2 with Δ = √2
    expected = _scaled(psd, bound)
    clipping = _stream(shape=(2, 2), sensitivity=math.sqrt(2), psd=True)
    reference = _stream(shape=(2, 2), sensitivity=math.sqrt(2), psd=True, invalid="raise")
    np.testing.assert_array_equal(clipping.append(a).value, reference.append(expected).value)
    # the OuterProduct path (the policies' leaves): w·x xᵀ of norm w‖x‖² = 25 becomes (B/25)·x xᵀ
    x = np.array([3.0, 4.0])
    outer = _stream(shape=(2, 2), sensitivity=math.sqrt(2), psd=True, seed=3)
    manual = _stream(shape=(2, 2), sensitivity=math.sqrt(2), psd=True, seed=3, invalid="raise")
    np.testing.assert_array_equal(outer.append(x, 1.0).value, manual.append(x, bound / 25.0).value)


_entries = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e3, 1e3))


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, (3, 3), elements=_entries), arrays(np.float64, (3, 3), elements=_entries),
       st.booleans(), st.sampled_from(["replace_one", "add_remove"]))
def test_any_two_clipped_elements_are_within_the_charged_sensitivity(x, y, psd, relation):
    """The claim behind the charge: whatever the inputs, the mapped elements differ by at most Δ(1 + 2η)
    (the neighbour under add/remove is the zero element)."""
    elements = StreamElements(10, (3, 3), 2.0, relation, psd, invalid="clip")
    fx = elements.check(x, 0)
    fy = elements.check(y, 0) if relation == "replace_one" else np.zeros((3, 3))
    assert np.all(np.isfinite(fx)) and np.array_equal(fx, fx.T)
    assert np.linalg.norm(fx - fy) <= 2.0 * (1 + 2 * NORM_SLACK)
    # what clip returns, the refusing checks (norm, finiteness, symmetry, PSD within τ) accept
    StreamElements(10, (3, 3), 2.0, relation, psd).check(fx, 0)


def test_the_docstring_example_runs():
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner()
    for test in finder.find(BinaryTreeMechanism, "BinaryTreeMechanism", module=tree_module):
        runner.run(test)
    assert runner.summarize(verbose=False).attempted >= 6 and runner.summarize(verbose=False).failed == 0
