"""T*_ε check values from docs/references.md (μ1 instance) and closed-form limits."""

import numpy as np
import pytest

from dpglm.bai.characteristic_time import characteristic_time
from dpglm.bai.divergences import transport_cost

MU1 = (0.95, 0.9, 0.9, 0.9, 0.5)


@pytest.mark.parametrize(
    "eps, expected, rel",
    [(np.inf, 395.5, 2e-4), (0.1, 931.0, 1e-3), (1e-3, 8.23e4, 1e-3), (0.464, 399.0, 1e-3)],
)
def test_mu1_check_values(eps, expected, rel):
    assert characteristic_time(MU1, eps).value == pytest.approx(expected, rel=rel)


def test_second_check_instance():
    assert characteristic_time((0.75, 0.7, 0.7, 0.7, 0.7)).value == pytest.approx(1424.7, rel=1e-4)


def test_optimal_allocation_equalises_costs_and_is_max_min():
    # the defining property: the optimal w equalises the costs and T*⁻¹ equals them
    res = characteristic_time(MU1, 0.1)
    w = res.allocation
    costs = transport_cost(MU1[0], np.array(MU1[1:]), w[0], w[1:], 0.1)
    assert np.allclose(costs, 1 / res.value, rtol=1e-6)
    assert w.sum() == pytest.approx(1.0)
    # no allocation on a coarse simplex grid does better (it is a max–min)
    rng = np.random.default_rng(0)
    for v in rng.dirichlet(np.ones(5), 300):
        assert transport_cost(MU1[0], np.array(MU1[1:]), v[0], v[1:], 0.1).min() <= 1 / res.value * (1 + 1e-6)


def test_rejects_ties_and_bad_eps():
    with pytest.raises(ValueError, match="unique best"):
        characteristic_time((0.5, 0.5))
    with pytest.raises(ValueError, match="eps"):
        characteristic_time(MU1, -1.0)
