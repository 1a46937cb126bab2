"""The plug-in example: joint-DP LinUCB built from the public accounting + mechanisms API."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from accounting import ZCDP, Ledger

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "private_linucb.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("private_linucb_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def instance(horizon, d, n_arms, seed):
    """Arms uniform in the unit ball (shrunk by 0.999), ‖θ*‖ = 1/2: rewards stay inside [−1, 1]."""
    generator = np.random.default_rng(seed)
    directions = generator.normal(size=(horizon, n_arms, d))
    radii = 0.999 * generator.uniform(size=(horizon, n_arms, 1)) ** (1 / d)
    contexts = directions / np.linalg.norm(directions, axis=2, keepdims=True) * radii
    theta = generator.normal(size=d)
    return contexts, theta * 0.5 / np.linalg.norm(theta)


def play(example, rho, seed=1, horizon=600, d=3, n_arms=10):
    contexts, theta = instance(horizon, d, n_arms, seed)
    means = contexts @ theta
    noise = np.random.default_rng(seed + 100).uniform(-0.5, 0.5, size=means.shape)
    account = Ledger(ZCDP(rho)).split({"linucb": 1}, currency={"linucb": "zcdp"})["linucb"]
    chosen = example.private_linucb(contexts, lambda t, k: means[t, k] + noise[t, k], account,
                                    np.random.default_rng(seed))
    regret = np.sum(means.max(axis=1) - means[np.arange(horizon), chosen])
    uniform = np.sum(means.max(axis=1) - means.mean(axis=1))
    return regret, uniform, account


def test_learns_with_a_generous_budget_and_spends_it_once(example):
    regret, uniform, account = play(example, rho=50.0)
    assert regret < 0.5 * uniform
    assert account.remaining.rho == 0 and account.spent.rho == 50
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    contexts, _ = instance(10, 3, 4, 0)
    with pytest.raises(ValueError, match="no remaining zCDP budget"):
        example.private_linucb(contexts, lambda t, k: 0.0, account, rng)
    assert rng.bit_generator.state == state


def test_more_privacy_costs_regret(example):
    generous, _, _ = play(example, rho=50.0)
    strict, uniform, _ = play(example, rho=0.01)
    assert generous < strict
    assert strict < 1.5 * uniform


def test_demo_runs_and_prints_the_ledger(example, capsys):
    regret = example.main(horizon=200, d=2, n_arms=5, epsilon=2.0, delta=1e-5, seed=3)
    assert regret.shape == (200,) and np.all(np.diff(regret) >= 0)
    out = capsys.readouterr().out
    assert "BinaryTreeMechanism" in out and "linucb" in out
