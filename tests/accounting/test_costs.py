"""Cost values: exact fields, the float-as-printed rule, validation."""

import dataclasses
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from accounting import ZCDP, ApproxDP, PureDP
from accounting.costs import cost_from_dict, cost_to_dict


def test_float_is_read_as_the_decimal_it_prints_as():
    assert PureDP(0.1).eps == Fraction(1, 10)
    assert ApproxDP(4 / 3, 1e-6).delta == Fraction(1, 10**6)
    assert ZCDP(np.float64(0.3)).rho == Fraction(3, 10)
    assert PureDP(np.int64(2)).eps == 2
    assert ZCDP(Decimal("0.25")).rho == Fraction(1, 4)
    assert ZCDP(Fraction(1, 3)).rho == Fraction(1, 3)


def test_fields_are_fractions_and_values_are_frozen():
    cost = ApproxDP(1, 0.5)
    assert isinstance(cost.eps, Fraction) and isinstance(cost.delta, Fraction)
    assert ZCDP(1).delta == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        cost.eps = Fraction(2)  # type: ignore[misc]
    assert ApproxDP(1, 0.5) == ApproxDP(Fraction(1), Fraction(1, 2))
    assert hash(PureDP(0.1)) == hash(PureDP(Fraction(1, 10)))


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: PureDP(-0.1), "eps"),
        (lambda: PureDP(math.nan), "eps"),
        (lambda: PureDP(math.inf), "eps"),
        (lambda: ApproxDP(1, 1), "delta"),
        (lambda: ApproxDP(1, -1e-9), "delta"),
        (lambda: ApproxDP(-1, 0.1), "eps"),
        (lambda: ZCDP(-1e-3), "rho"),
        (lambda: ZCDP(math.nan), "rho"),
        (lambda: ZCDP(0.1, 1.5), "delta"),
    ],
)
def test_invalid_values_raise_value_error_naming_the_field(make, field):
    with pytest.raises(ValueError, match=field):
        make()


@pytest.mark.parametrize("bad", [True, "0.1", None, [0.1], 1j])
def test_non_numbers_raise_type_error(bad):
    with pytest.raises(TypeError, match="eps"):
        PureDP(bad)


@pytest.mark.parametrize("cost", [PureDP(Fraction(1, 3)), ApproxDP(0.7, 1e-7), ZCDP(0.125, 1e-9)])
def test_dict_round_trip_is_exact(cost):
    assert cost_from_dict(cost_to_dict(cost)) == cost


def test_replace_and_pickle_keep_the_exact_fields():
    import pickle

    cost = ApproxDP(eps=1, delta=1e-6)
    changed = dataclasses.replace(cost, eps=0.1)  # goes through the converting constructor
    assert changed == ApproxDP(Fraction(1, 10), Fraction(1, 10**6)) and type(changed.eps) is Fraction
    with pytest.raises(ValueError, match=r"^delta must be a real number in \[0, 1\), got 1$"):
        dataclasses.replace(cost, delta=1)
    for value in (PureDP(Fraction(1, 3)), cost, ZCDP(0.125, 1e-9)):
        assert pickle.loads(pickle.dumps(value)) == value
    assert [f.name for f in dataclasses.fields(ZCDP)] == ["rho", "delta"]


def test_the_order_grid_is_dp_accountings_default_grid():
    # ORDERS is written out so that the ledger imports without dp-accounting; this is its source.
    from dp_accounting.rdp import rdp_privacy_accountant

    from accounting.costs import ORDERS

    expected = tuple(Fraction(repr(float(order))) for order in rdp_privacy_accountant.DEFAULT_RDP_ORDERS)
    assert expected == ORDERS
    assert [float(order) for order in ORDERS] == [float(order) for order in rdp_privacy_accountant.DEFAULT_RDP_ORDERS]
