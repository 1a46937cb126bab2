"""Release: a frozen, read-only value plus its receipt, made only by a mechanism; the shared boundary checks."""

import copy
import dataclasses
import pickle

import numpy as np
import pytest

from accounting import ZCDP, Ledger
from mechanisms import Mechanism, Release
from mechanisms.release import check_generator, check_positive, check_relation


class Wrapper(Mechanism):
    """A test stub: charges ZCDP(1/4) per release and wraps the value it is given (no noise)."""

    def __init__(self):
        self.account = Ledger(ZCDP(100)).root

    def wrap(self, value):
        return self._release(value, self._charge(ZCDP(0.25), mechanism="test", relation="replace_one"))


@pytest.fixture
def wrap():
    return Wrapper().wrap


@pytest.fixture
def receipt():
    ledger = Ledger(ZCDP(1))
    return ledger.root.charge(ZCDP(0.25), mechanism="test")


def test_array_value_is_a_read_only_copy(wrap):
    source = np.arange(6, dtype=float).reshape(2, 3)
    release = wrap(source)
    source[0, 0] = 100.0
    assert release.value[0, 0] == 0.0
    assert not release.value.flags.writeable
    with pytest.raises(ValueError):
        release.value[0, 0] = 1.0
    assert release.receipt.mechanism == "test"


def test_integer_array_becomes_float(wrap):
    release = wrap(np.array([1, 2, 3]))
    assert release.value.dtype == np.float64
    np.testing.assert_array_equal(release.value, [1.0, 2.0, 3.0])


def test_scalars_become_float(wrap):
    assert wrap(np.float32(2.5)).value == 2.5
    assert isinstance(wrap(np.array(3.0)).value, float)
    assert isinstance(wrap(4).value, float)


def test_dataclass_is_frozen(wrap):
    release = wrap(1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        release.value = 2.0  # type: ignore[misc]


@pytest.mark.parametrize("value", [np.array([1.0, np.nan]), float("inf"), np.array([[np.inf]])])
def test_non_finite_value_raises(value, wrap):
    with pytest.raises(ValueError, match="value must be finite"):
        wrap(value)


@pytest.mark.parametrize("value", [True, "1.0", np.array(["a"]), [1.0, 2.0], np.array([True])])
def test_non_real_value_raises(value, wrap):
    with pytest.raises(TypeError, match="value"):
        wrap(value)


@pytest.mark.parametrize("value", [1.0, np.zeros(2)])
def test_release_cannot_be_built_by_hand_even_with_a_granted_receipt(value, receipt):
    # A release is proof that a mechanism's charge paid for it; a receipt alone proves nothing about the value.
    with pytest.raises(TypeError, match="made only by the mechanism whose charge paid for it"):
        Release(value, receipt)
    with pytest.raises(TypeError, match="made only by the mechanism"):
        Release(value=value, receipt=receipt)
    with pytest.raises(TypeError, match="made only by the mechanism"):
        Release(value, receipt, object())


def test_replace_cannot_rewrap_a_release(wrap):
    release = wrap(np.zeros(2))
    with pytest.raises((TypeError, ValueError)):
        dataclasses.replace(release, value=np.ones(2))


def test_read_only_flag_cannot_be_set_back(wrap):
    release = wrap(np.arange(4.0).reshape(2, 2))
    with pytest.raises(ValueError):
        release.value.setflags(write=True)
    # Nor through the array the value is a view of, nor its base.
    base = release.value
    while isinstance(base, np.ndarray):
        with pytest.raises(ValueError):
            base.setflags(write=True)
        base = base.base
    np.testing.assert_array_equal(release.value, [[0.0, 1.0], [2.0, 3.0]])


@pytest.mark.parametrize("duplicate", [copy.copy, copy.deepcopy])
def test_a_copy_is_the_release_itself(duplicate, wrap):
    release = wrap(np.array([1.0, 2.0]))
    assert duplicate(release) is release


def test_pickling_is_refused(wrap):
    # Unpickling would make a release no mechanism made (from a file that may have been edited).
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(wrap(np.array([1.0, 2.0])))


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
