"""Release: a frozen, read-only value plus its receipt; the shared boundary checks."""

import copy
import dataclasses
import pickle
from types import SimpleNamespace

import numpy as np
import pytest

from accounting import Ledger, ZCDP
from mechanisms import Release
from mechanisms.release import check_generator, check_positive, check_relation


@pytest.fixture
def receipt():
    ledger = Ledger(ZCDP(1))
    return ledger.root.charge(ZCDP(0.25), mechanism="test")


def test_array_value_is_a_read_only_copy(receipt):
    source = np.arange(6, dtype=float).reshape(2, 3)
    release = Release(source, receipt)
    source[0, 0] = 100.0
    assert release.value[0, 0] == 0.0
    assert not release.value.flags.writeable
    with pytest.raises(ValueError):
        release.value[0, 0] = 1.0
    assert release.receipt is receipt


def test_integer_array_becomes_float(receipt):
    release = Release(np.array([1, 2, 3]), receipt)
    assert release.value.dtype == np.float64
    np.testing.assert_array_equal(release.value, [1.0, 2.0, 3.0])


def test_scalars_become_float(receipt):
    assert Release(np.float32(2.5), receipt).value == 2.5
    assert isinstance(Release(np.array(3.0), receipt).value, float)
    assert isinstance(Release(4, receipt).value, float)


def test_dataclass_is_frozen(receipt):
    release = Release(1.0, receipt)
    with pytest.raises(dataclasses.FrozenInstanceError):
        release.value = 2.0  # type: ignore[misc]


@pytest.mark.parametrize("value", [np.array([1.0, np.nan]), float("inf"), np.array([[np.inf]])])
def test_non_finite_value_raises(value, receipt):
    with pytest.raises(ValueError, match="value must be finite"):
        Release(value, receipt)


@pytest.mark.parametrize("value", [True, "1.0", np.array(["a"]), [1.0, 2.0], np.array([True])])
def test_non_real_value_raises(value, receipt):
    with pytest.raises(TypeError, match="value"):
        Release(value, receipt)


def test_missing_receipt_raises():
    with pytest.raises(TypeError, match="receipt"):
        Release(1.0, None)


@pytest.mark.parametrize("forged", ["granted", 1, object(), SimpleNamespace(seq=1, account="", mechanism="x")])
def test_anything_but_an_accounting_receipt_is_refused(forged):
    # A release is proof that a charge was granted: a look-alike receipt is a forgery.
    with pytest.raises(TypeError, match="accounting.Receipt"):
        Release(np.zeros(2), forged)


def test_read_only_flag_cannot_be_set_back(receipt):
    release = Release(np.arange(4.0).reshape(2, 2), receipt)
    with pytest.raises(ValueError):
        release.value.setflags(write=True)
    # Nor through the array the value is a view of, nor its base.
    base = release.value
    while isinstance(base, np.ndarray):
        with pytest.raises(ValueError):
            base.setflags(write=True)
        base = base.base
    np.testing.assert_array_equal(release.value, [[0.0, 1.0], [2.0, 3.0]])


@pytest.mark.parametrize("duplicate", [copy.copy, copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))])
def test_copies_stay_frozen(duplicate, receipt):
    copied = duplicate(Release(np.array([1.0, 2.0]), receipt))
    assert isinstance(copied, Release)
    assert not copied.value.flags.writeable
    with pytest.raises(ValueError):
        copied.value.setflags(write=True)
    np.testing.assert_array_equal(copied.value, [1.0, 2.0])


def test_checks_name_the_argument():
    with pytest.raises(ValueError, match="relation must be one of"):
        check_relation("swap")
    assert check_relation("add_remove") == "add_remove"
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        check_generator(np.random.RandomState(0))
    with pytest.raises(ValueError, match="sigma must be a finite number > 0"):
        check_positive("sigma", 0.0)
    with pytest.raises(ValueError, match="sigma"):
        check_positive("sigma", float("nan"))
    with pytest.raises(TypeError, match="sigma must be a real number"):
        check_positive("sigma", "1")
    assert check_positive("sigma", np.float32(0.5)) == 0.5
