"""Bad input to the policies and BAI algorithms: a one-line TypeError/ValueError naming the argument and its range.

Every case below used to be accepted silently or to fail obscurely (the message it
gave on main before this test is in the comment); the shared checks are in
dpglm/_validation.py.
"""

import warnings

import numpy as np
import pytest

from dpglm._validation import check_int, check_max_steps, check_reward, real_array
from dpglm.bai.successive_elimination import DPSE
from dpglm.bai.top_two import DPTopTwo
from dpglm.policies import GLMUCB, GLOC, ECOLog
from dpglm.policies.batched import ShuffleDPGLMBandit
from dpglm.policies.joint_dp import JointDPGLMBandit
from dpglm.policies.rarely_switching import RSGLinUCB

ARMS = np.array([[0.5, 0.0, 0.0], [0.0, 0.5, 0.0]])


def joint(**changes):
    arguments = {"family": "logistic", "d": 3, "horizon": 40, "S": 1.0, "epsilon": 1.0, "delta": 1e-5,
                 "rng": np.random.default_rng(0)}
    return JointDPGLMBandit(**{**arguments, **changes})


def shuffle(**changes):
    arguments = {"family": "logistic", "d": 3, "horizon": 40, "S": 1.0, "rng": np.random.default_rng(0),
                 "epsilon": 1.0, "delta": 1e-5}
    return ShuffleDPGLMBandit(**{**arguments, **changes})


POLICIES = {
    "joint_dp": lambda: joint(),
    "rs_glinucb": lambda: RSGLinUCB("logistic", 3, 40, 1.0),
    "shuffle": lambda: shuffle(),
    "glm_ucb": lambda: GLMUCB("logistic", 3, horizon=40, delta=0.1, kappa=2.0),
    "gloc": lambda: GLOC("logistic", 3, S=1.0, delta=0.1, kappa=2.0),
    "ecolog": lambda: ECOLog("logistic", 3, S=1.0, delta=0.1),
}


@pytest.mark.parametrize("changes, error, message", [
    # was "math domain error"
    ({"horizon": 0}, ValueError, r"horizon must be an int in \[1, 9007199254740992\] .*, got 0"),
    # was "cannot convert NaN to integer ratio"
    ({"S": float("nan")}, ValueError, r"S must be a finite number > 0, got nan"),
    # was 'can only concatenate str (not "int") to str'
    ({"d": "3"}, TypeError, r"d must be an int in \[1, 9007199254740992\] .*, got str '3'"),
    ({"horizon": 2.0}, TypeError, r"horizon must be an int in \[1, .*, got float 2.0"),
    ({"epsilon": 0}, ValueError, r"epsilon must be a finite number > 0, got 0"),  # was "budget must be positive"
    ({"delta": 1.5}, ValueError, r"delta must be a real number in \(0, 1\), got 1.5"),
    ({"rng": 3}, TypeError, r"rng must be a numpy.random.Generator, got int"),
])
def test_joint_dp_constructor_names_the_argument(changes, error, message):
    with pytest.raises(error, match=message):
        joint(**changes)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_complex_arms_are_refused_not_cast(name):
    # Before: the imaginary part was dropped (with a ComplexWarning) and the policy played on.
    policy = POLICIES[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning either: refused before any cast
        with pytest.raises(TypeError, match=r"arms must be an array of real numbers .* got dtype complex128"):
            policy.choose(ARMS + 0.5j)
    assert policy.choose(ARMS) in (0, 1)  # nothing was left pending by the refused call


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("reward", [None, "1", 1j])
def test_a_reward_that_is_not_a_real_number_is_a_type_error(name, reward):
    # Before: "float() argument must be a string or a real number, not 'NoneType'" (None), or accepted ("1").
    policy = POLICIES[name]()
    policy.choose(ARMS)
    with pytest.raises(TypeError, match=r"reward must be a real number in \[0, R\] = \[0, 1.0\]"):
        policy.observe(reward)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_choose_twice_without_observe_is_refused(name):
    # Before: GLM-UCB, GLOC and ECOLog silently dropped the first chosen arm.
    policy = POLICIES[name]()
    policy.choose(ARMS)
    with pytest.raises(ValueError, match=r"observe\(reward\) must be called before the next choose\(arms\)"):
        policy.choose(ARMS)


@pytest.mark.parametrize("name", ["joint_dp", "rs_glinucb", "shuffle"])
def test_playing_past_the_horizon_is_refused_at_choose(name):
    # Before: RS-GLinUCB played on; the shuffle bandit raised "IndexError: index 3 is out of bounds";
    # the joint-DP bandit failed in its tree's append, after choosing.
    policy = POLICIES[name]()
    for _ in range(40):
        policy.choose(ARMS)
        policy.observe(1.0)
    with pytest.raises(ValueError, match=r"horizon exceeded: all 40 rounds \(horizon=40\) already played"):
        policy.choose(ARMS)


def test_top_two_refuses_a_two_dimensional_mu():
    # Before: flattened into 4 arms.
    with pytest.raises(ValueError, match=r"mu must be a 1-D array .* got shape \(2, 2\)"):
        DPTopTwo(np.array([[0.5, 0.4], [0.3, 0.2]]), 1.0, 0.1)
    with pytest.raises(TypeError, match="mu must be an array of real numbers"):
        DPTopTwo(np.array([0.5, 0.4 + 0.1j]), 1.0, 0.1)


@pytest.mark.parametrize("algorithm", [lambda mu: DPTopTwo(mu, 1.0, 0.1), lambda mu: DPSE(mu, 1.0, 0.1)])
@pytest.mark.parametrize("max_steps, error, message", [
    # was τ = −1
    (-1, ValueError, r"max_steps must be an int in \[3, 9007199254740992\] \(K = 3 arms, each pulled once first; .*\), "
                     r"got -1"),
    (float("nan"), TypeError, r"max_steps must be an int in \[3, .*, got float nan"),  # "please report this bug"
    (2, ValueError, r"got 2"),
    (2.5, TypeError, r"got float 2.5"),
])
def test_max_steps_is_an_int_of_at_least_k(algorithm, max_steps, error, message):
    with pytest.raises(error, match=message):
        algorithm(np.array([0.5, 0.4, 0.3])).run(1, np.random.default_rng(0), max_steps=max_steps)


def test_max_steps_of_k_runs_and_is_respected():
    result = DPTopTwo(np.array([0.5, 0.4, 0.3]), 1.0, 0.1).run(2, np.random.default_rng(0), max_steps=3)
    assert np.all(result.stopping_times == 3)


def test_shared_checks():
    assert check_int("n", np.int64(3)) == 3
    with pytest.raises(TypeError, match="n must be an int >= 1, got bool True"):
        check_int("n", True)
    with pytest.raises(ValueError, match=r"n must be an int >= 2 \(two at least\), got 1"):
        check_int("n", 1, 2, why="two at least")
    assert check_max_steps(10, 3) == 10
    assert check_reward(np.float32(0.5), 1.0) == 0.5
    with pytest.raises(ValueError, match=r"reward must lie in \[0, R\] = \[0, 1.0\], got nan"):
        check_reward(float("nan"), 1.0)
    assert real_array("x", [1, 2]).dtype == np.float64
    for bad in ([True], ["a"], [None]):
        with pytest.raises(TypeError, match="x must be an array of real numbers"):
            real_array("x", bad)
