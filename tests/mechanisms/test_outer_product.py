"""Tree elements formed by the mechanism (w·x xᵀ, w ≥ 0 checked): no eigendecomposition, same releases.

Also ``append(x, weight)``, the same element without the OuterProduct.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from accounting import ZCDP, Ledger
from mechanisms.tree import BinaryTreeMechanism, OuterProduct


def _tree(seed: int, psd: bool = True) -> BinaryTreeMechanism:
    return BinaryTreeMechanism(Ledger(ZCDP(100)).root, 8, (3, 3), 2**0.5, np.random.default_rng(seed),
                               cost=ZCDP(1), psd=psd)


def test_outer_product_releases_equal_the_matrix_path_bitwise():
    xs = np.random.default_rng(0).normal(size=(8, 3)) / 2
    weights = np.random.default_rng(1).random(8)
    by_matrix, by_outer = _tree(5), _tree(5)
    for x, w in zip(xs, weights, strict=True):
        x = x / max(1.0, np.linalg.norm(x))
        a = by_matrix.append(w * (x[:, None] * x)).value
        b = by_outer.append(OuterProduct(x, w)).value
        assert np.array_equal(a, b)


def test_append_x_weight_releases_equal_the_matrix_path_bitwise(monkeypatch):
    xs = np.random.default_rng(0).normal(size=(8, 3)) / 2
    weights = np.random.default_rng(1).random(8)
    weights[3] = 0.0
    by_matrix, by_pair = _tree(5), _tree(5)
    for x, w in zip(xs, weights, strict=True):
        x = x / max(1.0, np.linalg.norm(x))
        a = by_matrix.append(w * (x[:, None] * x)).value
        with monkeypatch.context() as patched:
            patched.setattr(np.linalg, "eigvalsh", None)  # the pair is formed here: no eigendecomposition
            b = by_pair.append(x, float(w)).value
        assert np.array_equal(a, b)
    assert by_pair.t == 8


@pytest.mark.parametrize("x, weight, error, match", [
    (np.ones(3) * 0.1, -0.1, ValueError, "weight"), (np.ones(3) * 0.1, float("nan"), ValueError, "weight"),
    (np.ones(3) * 0.1, True, TypeError, "weight"), (np.ones(2) * 0.1, 1.0, ValueError, "shape"),
    (np.array([0.1, np.nan, 0.0]), 1.0, ValueError, "finite"),
    (np.array([1.0, 1.0, 0.0]), 1.0, ValueError, "Frobenius"),
    ([0.1, 0.2, 0.0], 1.0, None, None),  # a list: the general path, accepted
])
def test_append_x_weight_refuses_what_outer_product_refuses(x, weight, error, match):
    tree = _tree(6)
    if error is None:
        assert np.array_equal(tree.append(x, weight).value, _tree(6).append(OuterProduct(x, weight)).value)
        return
    with pytest.raises(error, match=match):
        tree.append(x, weight)
    assert tree.t == 0  # refused before the element counted


def test_no_eigendecomposition_for_an_outer_product(monkeypatch):
    tree = _tree(2)

    def refuse(*args, **kwargs):
        raise AssertionError("eigvalsh called")

    monkeypatch.setattr(np.linalg, "eigvalsh", refuse)
    tree.append(OuterProduct(np.array([0.6, 0.0, 0.8]), 0.5))
    with pytest.raises(AssertionError, match="eigvalsh"):
        tree.append(np.eye(3) * 0.3)  # an arbitrary matrix keeps its check


def test_the_norm_bound_still_holds():
    with pytest.raises(ValueError, match="Frobenius norm"):
        _tree(3).append(OuterProduct(np.array([1.0, 1.0, 0.0]), 1.0))  # ‖x xᵀ‖_F = 2 > Δ/√2 = 1


@pytest.mark.parametrize("x, weight, error", [
    (np.ones(3), -0.1, ValueError), (np.ones(3), float("nan"), ValueError), (np.ones(3), True, TypeError),
    (np.ones((3, 1)), 1.0, ValueError), (np.array([1.0, np.inf, 0.0]), 1.0, ValueError),
    (np.array(["a"]), 1.0, TypeError),
])
def test_bad_outer_products(x, weight, error):
    with pytest.raises(error):
        OuterProduct(x, weight)


def test_derived_arrays_are_plain_and_checked():
    o = OuterProduct(np.array([0.5, 0.5, 0.0]), 1.0)
    assert type(o + np.eye(3)) is np.ndarray and o.flags.writeable is False
    assert o[:2].vector is None  # a view vouches for nothing: checked as a plain matrix
    with pytest.raises(ValueError, match="shape"):
        _tree(4).append(OuterProduct(np.ones(2) * 0.1))
    released = _tree(4, psd=False).append(OuterProduct(np.array([0.3, 0.0, 0.0])))  # psd=False: a plain matrix
    assert released.value.shape == (3, 3)


def test_the_weight_times_norm_check_certifies_the_formed_element():
    """The (x, w) check is w·(x·x) ≤ B(1 + η); the formed w·xᵢxⱼ then has exact ‖·‖_F ≤ B(1 + 2η) (rationals)."""
    elements = _tree(0)._elements
    rng = np.random.default_rng(8)
    for _ in range(200):
        x = rng.normal(size=3)
        w = elements.accepted_norm / float(x.dot(x))
        while w * float(x.dot(x)) > elements.accepted_norm:  # the largest weight the check accepts
            w = float(np.nextafter(w, 0.0))
        formed = elements.outer(x, w, 0)  # the element as the tree adds it
        frobenius_sq = sum(Fraction(float(e)) ** 2 for e in formed.ravel())
        assert frobenius_sq <= (Fraction(elements.element_bound) * (1 + Fraction(2, 10**9))) ** 2
        with pytest.raises(ValueError, match="Frobenius"):
            elements.outer(x, w * (1 + 1e-12), 0)
