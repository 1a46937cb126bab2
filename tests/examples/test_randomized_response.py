"""The own-mechanism example: a randomized-response count on the Mechanism base class."""

import importlib.util
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from accounting import ZCDP, BudgetExceeded, Ledger, PureDP

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "randomized_response.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("randomized_response_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_charge_is_ln_of_the_odds_rounded_up(example):
    mechanism = example.RandomizedResponseCount(Ledger(PureDP(10)).root, 0.25, np.random.default_rng(0))
    eps = mechanism.cost.eps
    assert mechanism.p == Fraction(1, 4)
    # The loss is ln((1 - p)/p) = ln 3 (math.log, independently): charged above it, by less than 1e-11.
    assert 0 < float(eps) - math.log(3) < 1e-11


def test_count_has_the_binomial_mean_and_variance(example):
    n, ones, p, runs = 100, 30, 0.25, 1000
    mechanism = example.RandomizedResponseCount(Ledger(PureDP(10**4)).root, p, np.random.default_rng(1))
    bits = np.r_[np.ones(ones, dtype=int), np.zeros(n - ones, dtype=int)]
    counts = np.array([mechanism.release(bits).value for _ in range(runs)])
    mean = ones * (1 - p) + (n - ones) * p  # 40: closed form of Bin(30, 3/4) + Bin(70, 1/4)
    variance = n * p * (1 - p)  # 18.75
    assert abs(counts.mean() - mean) < 4 * math.sqrt(variance / runs)
    assert abs(counts.var() / variance - 1) < 0.2  # sd of the ratio ≈ sqrt(2/runs) = 0.045
    estimates = mechanism.estimate(counts, n)
    assert abs(estimates.mean() - ones) < 4 * math.sqrt(variance / runs) / (1 - 2 * p)


def test_one_user_report_ratio_is_the_charged_odds(example):
    # n = 1: P(report 1 | bit 1) = 3/4, P(report 1 | bit 0) = 1/4; the ratio 3 = e^ln3 is what is charged.
    mechanism = example.RandomizedResponseCount(Ledger(PureDP(10**6)).root, 0.25, np.random.default_rng(2))
    ones = np.mean([mechanism.release(np.array([1])).value for _ in range(4000)])
    zeros = np.mean([mechanism.release(np.array([0])).value for _ in range(4000)])
    assert abs(ones - 0.75) < 0.03 and abs(zeros - 0.25) < 0.03  # 4.4 standard deviations


def test_refused_charge_draws_nothing_and_a_zcdp_account_pays_eps_squared_over_two(example):
    rng = np.random.default_rng(3)
    mechanism = example.RandomizedResponseCount(Ledger(PureDP(1)).root, 0.25, rng)  # ln 3 > 1
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceeded):
        mechanism.release(np.array([0, 1]))
    assert rng.bit_generator.state == state
    zcdp = Ledger(ZCDP(1)).root
    example.RandomizedResponseCount(zcdp, 0.25, rng).release(np.array([0, 1]))
    assert zcdp.spent.rho == mechanism.cost.eps**2 / 2


@pytest.mark.parametrize("p", [0, 0.5, 0.7, -0.1])
def test_bad_flip_probability_is_refused(example, p):
    with pytest.raises(ValueError, match=r"p must be a flip probability in \(0, 1/2\)"):
        example.RandomizedResponseCount(Ledger(PureDP(1)).root, p, np.random.default_rng(0))


def test_demo_runs_until_refused_and_prints_the_ledger(example, capsys):
    estimates = example.main(n=1000, ones=300, p=0.25, budget=2.5, seed=0)
    assert len(estimates) == 2  # 2 ln 3 = 2.197 <= 2.5 < 3 ln 3
    out = capsys.readouterr().out
    assert "refused" in out and "RandomizedResponseCount ×2" in out
