"""Bad input over the public API: every constructor and main method answers a bad argument with a clear error.

Each call replaces ONE argument of a valid call (a small valid problem per callable,
below) with a bad value and classifies the outcome:

``clear``
    a ``TypeError``/``ValueError`` (or a subclass) whose one-line message names the argument;
``silent``
    no error, although the value is not in the argument's declared domain;
``obscure``
    any other exception (``IndexError``, ``OverflowError``, "truth value of an array is
    ambiguous", a float() error, a message that does not name the argument, ...);
``hang``
    no answer within the per-call time limit (``signal.alarm``); for a valid value of an
    argument a target declares as ``work`` (its cost grows with the value), running out of
    time counts as ``valid``.

A value that IS in the argument's domain (``0`` for a ridge λ ≥ 0, ``np.float32(0.5)`` for
an ε) is ``valid``: it must be accepted (or refused by the ledger, ``BudgetExceeded``), and
it is not counted above; ``refused-valid`` counts those refused otherwise. Domains are
declared per argument (:data:`KINDS`; counts and sizes are ints up to 2**53); what a kind
admits is :func:`admits`. A ``BudgetExceeded`` for a bad value is ``clear``: the ledger
refused it and nothing was spent.

The default suite runs a hypothesis sample (a few seconds); the slow test runs every
(callable, argument, value) of the grid. ``python tests/test_fuzz_api.py`` prints the
grid's counts (issue 21 asks for them before and after the fixes; the run on main before
them is in CHANGELOG.md).
"""

from __future__ import annotations

import math
import numbers
import re
import signal
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# -- the bad values (26 kinds) ----------------------------------------------------------

BAD_VALUES: dict[str, Callable[[], Any]] = {
    "nan": lambda: float("nan"),
    "inf": lambda: float("inf"),
    "-inf": lambda: -float("inf"),
    "-1": lambda: -1,
    "0": lambda: 0,
    "0.5": lambda: 0.5,
    "10**400": lambda: 10**400,
    "-10**400": lambda: -(10**400),
    "2**64": lambda: 2**64,
    "str": lambda: "1",
    "empty-str": lambda: "",
    "None": lambda: None,
    "True": lambda: True,
    "False": lambda: False,
    "complex": lambda: 1 + 1j,
    "list": lambda: [1, 2],
    "ragged": lambda: [[1.0, 2.0], [3.0]],
    "array-3d": lambda: np.zeros((2, 3, 4)),
    "array-empty": lambda: np.zeros(0),
    "float32-nan": lambda: np.float32("nan"),
    "float16-0.1": lambda: np.float16(0.1),
    "int8--1": lambda: np.int8(-1),
    "uint64-max": lambda: np.uint64(2**64 - 1),
    "bool_": lambda: np.bool_(True),
    "object": lambda: object(),
    "dict": lambda: {},
}


def _real(value: object) -> float | None:
    """``value`` as a float if it is a real number (no bool), else None; ±inf beyond the float range."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf  # type: ignore[operator]


def _in(low: float, high: float, low_open: bool = False, high_open: bool = False) -> Callable[[object], bool]:
    def admits(value: object) -> bool:
        x = _real(value)
        if x is None or not math.isfinite(x):
            return False
        return (x > low if low_open else x >= low) and (x < high if high_open else x <= high)
    return admits


def _int_in(low: int, high: float = math.inf) -> Callable[[object], bool]:
    def admits(value: object) -> bool:
        return (isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
                and low <= int(value) <= high)
    return admits


def _statistic(value: object) -> bool:
    """A real number or a non-empty rectangular array of them, finite (a mechanism's statistic)."""
    if isinstance(value, (bool, np.bool_)):
        return False
    try:
        array = np.asarray(value)
    except ValueError:
        return False
    return array.dtype.kind in "iuf" and array.size > 0 and bool(np.all(np.isfinite(array)))


def _shape_of(value: object) -> tuple[int, ...] | None:
    """The shape of ``value`` as a real array, or None (not a rectangular real array)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        array = np.asarray(value)
    except ValueError:
        return None
    return array.shape if array.dtype.kind in "iuf" else None


def _choice(*allowed: str) -> Callable[[object], bool]:
    return lambda value: isinstance(value, str) and value in allowed


KINDS: dict[str, Callable[[object], bool]] = {
    "positive": _in(0.0, math.inf, low_open=True),
    "nonneg": _in(0.0, math.inf),
    "probability": _in(0.0, 1.0, low_open=True, high_open=True),
    "unit": _in(0.0, 1.0),
    "real": _in(-math.inf, math.inf),
    "atleast1": _in(1.0, math.inf),
    "int": _int_in(1, 2**53),  # a count or a size: beyond 2**53 a float cannot hold it
    "int2": _int_in(2, 2**53),
    "steps3": _int_in(3, 2**53),  # a BAI step budget with K = 3 arms: each arm is pulled once first
    "runs3": _int_in(1, 10**7 // 3),  # lockstep BAI runs with K = 3 arms (dpglm._validation.check_n_runs)
    "exact": lambda value: KINDS["nonneg"](value) or (_int_in(0)(value)),  # exact costs: any int >= 0
    "zero": _int_in(0, 0),  # the only valid round or arm index in the call made
    "never": lambda value: False,  # a generator, an account, an array of a fixed shape, a choice of names
    "text": lambda value: isinstance(value, str),
    "name": lambda value: isinstance(value, str) and bool(value.strip()),
    "mapping": lambda value: isinstance(value, dict) and not value,  # of the bad values only {} is a mapping
    "statistic": lambda value: _statistic(value),
    # Reward sums of two arms: any real values (saturated into [0, counts], NaN as 0: docs/mechanisms.md).
    "sums": lambda value: _statistic(np.nan_to_num(np.asarray(value, dtype=float)))
    if _shape_of(value) == (2,) else False,
    "bool": lambda value: isinstance(value, (bool, np.bool_)),
}


def admits(kind: str, value: object) -> bool:
    """Whether ``value`` is in the domain ``kind`` (``"positive|None"``: also None)."""
    return any(value is None if k == "None" else (isinstance(value, float) and value == math.inf) if k == "inf"
               else KINDS[k](value) for k in kind.split("|"))


# -- the public API: one valid call per callable, and the domain of each argument ---------------


@dataclass
class Target:
    """A callable under test: ``call(kw)`` makes a fresh valid call with ``kw`` (``base`` updated)."""

    name: str
    call: Callable[[dict[str, Any]], Any]
    base: dict[str, Any]
    arguments: dict[str, str]  # argument -> kind
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)  # other names a message may use
    #: arguments whose large valid values cost work in proportion (runs simulated, rounds composed exactly
    #: before the ledger can refuse them): a valid value that runs out of time is slow, not hung
    work: tuple[str, ...] = ()


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _ledger(budget: Any = None, relation: str = "replace_one") -> Any:
    from accounting import ApproxDP, Ledger

    return Ledger(ApproxDP(4, Fraction(1, 50)) if budget is None else budget, relation=relation)


def _account(currency: str) -> Any:
    return _ledger().split({"a": 1}, currency={"a": currency})["a"]


ARMS = np.array([[0.5, 0.0, 0.0], [0.0, 0.5, 0.0]])
X = np.full((6, 3), 0.3)
Y = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.0])


def _accounting() -> list[Target]:
    from accounting import GDP, RDP, ZCDP, ApproxDP, Ledger, PureDP
    from accounting.rdp import ORDERS

    def charge(kw: dict[str, Any]) -> Any:
        return _ledger().charge(kw["cost"], mechanism=kw["mechanism"], partition=kw["partition"], note=kw["note"])

    return [
        Target("PureDP", lambda kw: PureDP(kw["eps"]), {"eps": 1}, {"eps": "exact"}),
        Target("ApproxDP", lambda kw: ApproxDP(kw["eps"], kw["delta"]), {"eps": 1, "delta": 0.1},
               {"eps": "exact", "delta": "unit"}),
        Target("ZCDP", lambda kw: ZCDP(kw["rho"]), {"rho": 1}, {"rho": "exact"}),
        Target("GDP", lambda kw: GDP(kw["mu"]), {"mu": 1}, {"mu": "exact"}),
        Target("RDP", lambda kw: RDP(kw["epsilons"]), {"epsilons": [0.1] * len(ORDERS)}, {"epsilons": "never"}),
        Target("Ledger", lambda kw: Ledger(kw["budget"], kw["journal"], relation=kw["relation"]),
               {"budget": ApproxDP(1, 0.1), "journal": None, "relation": "replace_one"},
               {"budget": "never", "relation": "never"}),
        Target("Ledger.split", lambda kw: _ledger().split(kw["weights"], currency=kw["currency"]),
               {"weights": {"a": 1}, "currency": None}, {"weights": "never", "currency": "mapping|None"}),
        Target("Ledger.charge", charge,
               {"cost": ApproxDP(1, 0.01), "mechanism": "m", "partition": None, "note": ""},
               {"cost": "never", "mechanism": "name", "note": "text"}),
        Target("Ledger.guarantee", lambda kw: _ledger().guarantee(kw["delta"]), {"delta": None},
               {"delta": "unit|None"}),
    ]


def _mechanisms() -> list[Target]:
    from accounting import ZCDP
    from mechanisms import BinaryTreeMechanism, GaussianMechanism, LaplaceMechanism, SquareRootFactorizationMechanism
    from mechanisms.geometric import GeometricBatchMean
    from mechanisms.optim import DPSGD, BallProjection, ShufflePGD
    from mechanisms.shuffle import ShuffleBitSum, ShuffleVectorSum

    def gaussian(kw: dict[str, Any]) -> Any:
        return GaussianMechanism(_account("zcdp"), kw["sensitivity"], _rng(), sigma=kw["sigma"])

    def tree(kw: dict[str, Any]) -> Any:
        return BinaryTreeMechanism(_account("zcdp"), kw["horizon"], kw["shape"], kw["sensitivity"], _rng(),
                                   sigma=kw["sigma"])

    def geometric(kw: dict[str, Any]) -> Any:
        return GeometricBatchMean(_account("pure"), kw["n_arms"], kw["epsilon"], _rng(), eta=kw["eta"])

    def dpsgd(kw: dict[str, Any]) -> Any:
        return DPSGD(_account("zcdp"), "logistic", _rng(), clip=kw["clip"], engine="vectorised")

    def pgd(kw: dict[str, Any]) -> Any:
        return ShufflePGD(_account("approx"), lambda theta, X, y: X * 0.0, _rng(), clip=kw["clip"],
                          radius=kw["radius"])

    def dpsgd_fit(kw: dict[str, Any]) -> Any:
        return dpsgd({"clip": 1.0}).fit(kw["X"], kw["y"], steps=kw["steps"], lr=kw["lr"],
                                        projection=BallProjection(1.0), cost=ZCDP(Fraction(1, 10)), lam=kw["lam"])

    return [
        Target("GaussianMechanism", gaussian, {"sensitivity": 1.0, "sigma": 1.0},
               {"sensitivity": "positive", "sigma": "positive"}),
        Target("GaussianMechanism.release",
               lambda kw: gaussian({"sensitivity": 1.0, "sigma": 1.0}).release(kw["x"], note=kw["note"]),
               {"x": 1.0, "note": ""}, {"x": "statistic", "note": "text"}),
        Target("LaplaceMechanism", lambda kw: LaplaceMechanism(_account("pure"), kw["sensitivity"], _rng(),
                                                               scale=kw["scale"]),
               {"sensitivity": 1.0, "scale": 1.0}, {"sensitivity": "positive", "scale": "positive"}),
        Target("BinaryTreeMechanism", tree, {"horizon": 8, "shape": (2,), "sensitivity": 1.0, "sigma": 2.0},
               {"horizon": "int", "shape": "int", "sensitivity": "positive", "sigma": "positive|None"}),
        Target("BinaryTreeMechanism.append",
               lambda kw: tree({"horizon": 8, "shape": (2,), "sensitivity": 1.0, "sigma": 2.0}).append(kw["x"]),
               {"x": np.zeros(2)}, {"x": "never"}),
        Target("SquareRootFactorizationMechanism",
               lambda kw: SquareRootFactorizationMechanism(_account("zcdp"), kw["horizon"], (2,), 1.0, _rng(),
                                                           sigma=kw["sigma"]),
               {"horizon": 8, "sigma": 2.0}, {"horizon": "int", "sigma": "positive|None"}),
        Target("ShuffleBitSum",
               lambda kw: ShuffleBitSum(_account("approx"), kw["n_users"], _rng(), epsilon=kw["epsilon"],
                                        delta=kw["delta"]),
               {"n_users": 100, "epsilon": 1.0, "delta": 1e-6},
               {"n_users": "int2", "epsilon": "positive", "delta": "probability"}),
        Target("ShuffleVectorSum",
               lambda kw: ShuffleVectorSum(_account("approx"), 50, kw["shape"], kw["bound"], _rng(), epsilon=1.0,
                                           delta=1e-6),
               {"shape": (2,), "bound": 1.0}, {"shape": "never", "bound": "positive"}),
        Target("GeometricBatchMean", geometric, {"n_arms": 2, "epsilon": 1.0, "eta": 1.0},
               {"n_arms": "int", "epsilon": "positive", "eta": "positive"}),
        Target("GeometricBatchMean.observe",
               lambda kw: geometric({"n_arms": 2, "epsilon": 1.0, "eta": 1.0}).observe(kw["counts"],
                                                                                         kw["reward_sums"]),
               {"counts": np.array([1, 1]), "reward_sums": np.array([0.5, 0.5])},
               {"counts": "never", "reward_sums": "sums"}),
        Target("DPSGD", dpsgd, {"clip": 1.0}, {"clip": "positive"}),
        Target("DPSGD.fit", dpsgd_fit, {"X": X, "y": Y, "steps": 3, "lr": 0.5, "lam": 0.0},
               {"X": "never", "y": "never", "steps": "int", "lr": "positive", "lam": "nonneg"},
               work=("steps",)),  # 242,411 valid steps ran past 60 s once under load, not when retried
        Target("ShufflePGD", pgd, {"clip": 1.0, "radius": 1.0}, {"clip": "positive", "radius": "positive"}),
        Target("ShufflePGD.fit",
               lambda kw: pgd({"clip": 1.0, "radius": 1.0}).fit(X, Y, iterations=kw["iterations"], delta=kw["delta"],
                                                                noise_bits=3000),
               {"iterations": 2, "delta": 1e-6}, {"iterations": "int", "delta": "probability"},
               work=("iterations",)),  # 287,577 rounds: 20 s of exact PLD composition on an idle core
        Target("BallProjection", lambda kw: BallProjection(kw["radius"]), {"radius": 1.0}, {"radius": "positive"}),
    ]


def _policies() -> list[Target]:
    from dpglm.policies import GLMUCB, GLOC, BGLinCB, ECOLog, JointDPGLMBandit, RSGLinUCB, ShuffleDPGLMBandit

    def joint(kw: dict[str, Any], invalid: str = "clip") -> Any:
        return JointDPGLMBandit(kw["family"], kw["d"], kw["horizon"], kw["S"], kw["epsilon"], kw["delta"], _rng(),
                                clip=kw["clip"], invalid=invalid)

    joint_base = {"family": "logistic", "d": 3, "horizon": 30, "S": 1.0, "epsilon": 1.0, "delta": 1e-5, "clip": 1.0}

    def played(kw: dict[str, Any]) -> Any:
        policy = RSGLinUCB("logistic", 3, 30, 1.0)
        policy.choose(ARMS)
        return policy.observe(kw["reward"])

    return [
        Target("JointDPGLMBandit", joint, joint_base,
               {"family": "never", "d": "int", "horizon": "int|None", "S": "positive", "epsilon": "positive",
                "delta": "probability", "clip": "positive"}),  # horizon=None: anytime (docs/service.md)
        # invalid="raise": out-of-ball and NaN arms are errors; under the default "clip" they are a
        # user's data and are clipped (tests/dpglm/policies/test_invalid_users.py)
        Target("JointDPGLMBandit.choose", lambda kw: joint(joint_base, "raise").choose(kw["arms"]), {"arms": ARMS},
               {"arms": "never"}),
        Target("ShuffleDPGLMBandit",
               lambda kw: ShuffleDPGLMBandit("logistic", kw["d"], kw["horizon"], kw["S"], _rng(), epsilon=kw["epsilon"],
                                             delta=kw["delta"]),
               {"d": 3, "horizon": 30, "S": 1.0, "epsilon": 1.0, "delta": 1e-5},
               {"d": "int", "horizon": "int|None", "S": "positive", "epsilon": "positive", "delta": "probability"}),
        Target("RSGLinUCB", lambda kw: RSGLinUCB("logistic", kw["d"], kw["horizon"], kw["S"], delta=kw["delta"]),
               {"d": 3, "horizon": 30, "S": 1.0, "delta": 0.02},
               {"d": "int", "horizon": "int", "S": "positive", "delta": "probability"}),
        Target("RSGLinUCB.observe", played, {"reward": 1.0}, {"reward": "unit"}),
        Target("BGLinCB", lambda kw: BGLinCB("logistic", kw["d"], kw["horizon"], kw["S"], _rng()),
               {"d": 3, "horizon": 30, "S": 1.0}, {"d": "int", "horizon": "int", "S": "positive"}),
        Target("GLMUCB", lambda kw: GLMUCB("logistic", 3, horizon=kw["horizon"], delta=kw["delta"], kappa=kw["kappa"]),
               {"horizon": 30, "delta": 0.1, "kappa": 2.0},
               {"horizon": "int", "delta": "probability", "kappa": "atleast1"}),
        Target("GLOC", lambda kw: GLOC("logistic", 3, S=kw["S"], delta=kw["delta"], kappa=kw["kappa"]),
               {"S": 1.0, "delta": 0.1, "kappa": 2.0}, {"S": "positive", "delta": "probability", "kappa": "atleast1"}),
        Target("ECOLog", lambda kw: ECOLog("logistic", 3, S=kw["S"], delta=kw["delta"], lam=kw["lam"]),
               {"S": 1.0, "delta": 0.1, "lam": 10.0}, {"S": "positive", "delta": "probability", "lam": "positive"}),
        Target("ECOLog.choose", lambda kw: ECOLog("logistic", 3, S=1.0, delta=0.1).choose(kw["arms"]),
               {"arms": ARMS}, {"arms": "never"}),
    ]


def _pulled(env: Callable[[dict[str, Any]], Any], kw: dict[str, Any]) -> Any:
    played = env({"d": 3, "n_arms": 2, "S": 1.0, "horizon": 10})
    played.contexts(0)
    return played.pull(kw["t"], kw["index"])


def _envs_and_bai() -> list[Target]:
    from dpglm.bai import DPSE, DPTopTwo, EBTopTwo, characteristic_time
    from dpglm.envs import AdversarialContextEnv, StochasticContextEnv

    def env(kw: dict[str, Any]) -> Any:
        return StochasticContextEnv("logistic", kw["d"], kw["n_arms"], kw["S"], kw["horizon"], _rng())

    mu = np.array([0.9, 0.5, 0.1])
    ebtt = {"mu": "never", "delta": "probability", "beta": "probability"}
    return [
        Target("StochasticContextEnv", env, {"d": 3, "n_arms": 2, "S": 1.0, "horizon": 10},
               {"d": "int", "n_arms": "int", "S": "positive", "horizon": "int"}),
        Target("StochasticContextEnv.pull", lambda kw: _pulled(env, kw),
               {"t": 0, "index": 0}, {"t": "zero", "index": "zero"}),
        Target("AdversarialContextEnv",
               lambda kw: AdversarialContextEnv("logistic", kw["theta_star"], kw["contexts"], _rng()),
               {"theta_star": np.array([0.5, 0.0, 0.0]), "contexts": np.tile(ARMS, (4, 1, 1))},
               {"theta_star": "never", "contexts": "never"}),
        Target("DPTopTwo", lambda kw: DPTopTwo(kw["mu"], kw["epsilon"], kw["delta"]),
               {"mu": mu, "epsilon": 1.0, "delta": 0.1},
               {"mu": "never", "epsilon": "positive|inf", "delta": "probability"}),
        Target("DPTopTwo.run", lambda kw: DPTopTwo(mu, 1.0, 0.1).run(kw["n_runs"], _rng(), max_steps=kw["max_steps"]),
               {"n_runs": 1, "max_steps": 50}, {"n_runs": "runs3", "max_steps": "steps3"},
               work=("n_runs", "max_steps")),  # 8871 lockstep runs: over 60 s once under load, not the next time
        Target("DPSE", lambda kw: DPSE(kw["mu"], kw["epsilon"], kw["delta"]), {"mu": mu, "epsilon": 1.0, "delta": 0.1},
               {"mu": "never", "epsilon": "positive", "delta": "probability"}),
        Target("EBTopTwo", lambda kw: EBTopTwo(kw["mu"], kw["delta"], beta=kw["beta"]),
               {"mu": mu, "delta": 0.1, "beta": 0.5}, ebtt),
        Target("characteristic_time", lambda kw: characteristic_time(kw["mu"], kw["eps"]), {"mu": mu, "eps": 1.0},
               {"mu": "never", "eps": "positive|inf"}),
    ]


def targets() -> list[Target]:
    """Every callable under test."""
    return [*_accounting(), *_mechanisms(), *_policies(), *_envs_and_bai()]


# -- running one call ---------------------------------------------------------------------------


class _Timeout(BaseException):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Timeout


def outcome(target: Target, argument: str, value: object, seconds: int = 5) -> tuple[str, str]:
    """(class, detail) of ``target`` called with ``argument`` = ``value``: valid, clear, silent, obscure or hang."""
    from accounting import BudgetExceeded

    valid = admits(target.arguments[argument], value)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            target.call({**target.base, argument: value})
    except _Timeout:
        if valid and argument in target.work:
            return "valid", ""  # still working on a valid request whose cost grows with the value
        return "hang", f"no answer in {seconds} s"
    except BudgetExceeded:  # the ledger's refusal: spends nothing, whatever the value
        return ("valid" if valid else "clear"), ""
    except (TypeError, ValueError) as error:
        message = str(error)
        names = (argument, *target.aliases.get(argument, ()))
        if any(re.search(rf"\b{re.escape(name)}\b", message) for name in names) and "\n" not in message.strip():
            return "clear", ""  # for a value admitted by its kind too: the argument's real domain is narrower
        if valid:
            return "refused-valid", f"{type(error).__name__}: {message[:160]}"
        return "obscure", f"{type(error).__name__}: {message[:160]}".replace("\n", " ")
    except Exception as error:  # noqa: BLE001  # anything else is what the test counts
        return ("refused-valid" if valid else "obscure"), f"{type(error).__name__}: {str(error)[:160]}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return ("valid" if valid else "silent"), ""


def grid() -> list[tuple[Target, str, str]]:
    """Every (target, argument, bad-value name)."""
    return [(t, a, v) for t in targets() for a in t.arguments for v in BAD_VALUES]


def warm_up() -> None:
    """Make every valid base call once, untimed: imports (torch, scipy) happen here, not under the alarm."""
    for target in targets():
        target.call(dict(target.base))


def tally(seconds: int = 5) -> tuple[Counter[str], list[str]]:
    """Run the whole grid: counts per class and one line per call that is not clear or valid."""
    warm_up()
    counts: Counter[str] = Counter()
    lines = []
    for target, argument, name in grid():
        kind, detail = outcome(target, argument, BAD_VALUES[name](), seconds)
        counts[kind] += 1
        if kind not in ("clear", "valid"):
            lines.append(f"{kind:13s} {target.name}({argument}={name}) {detail}")
    return counts, lines


# -- the tests ----------------------------------------------------------------------------------

_TARGETS = {t.name: t for t in targets()}
_CELLS = [(t.name, a, v) for t in _TARGETS.values() for a in t.arguments for v in BAD_VALUES]

#: Extra values hypothesis draws beside the 26 named kinds.
_EXTRA = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**30), 10**30),
                   st.text(max_size=3),
                   st.sampled_from([np.float32(-2.5), np.int32(0), np.uint8(3), np.float64(1e308)]))


def _assert_fine(name: str, argument: str, value: object) -> None:
    # A generous limit in the suite: a loaded machine (or a first import, e.g. torch) must not
    # turn a slow call into a "hang"; the grid's tally (slow test, the script) warms up, then uses 5 s.
    kind, detail = outcome(_TARGETS[name], argument, value, seconds=60)
    assert kind in ("clear", "valid"), f"{name}({argument}={value!r}): {kind} {detail}"


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(cell=st.sampled_from(_CELLS))
def test_a_sample_of_bad_arguments_gets_clear_errors(cell):
    name, argument, value = cell
    _assert_fine(name, argument, BAD_VALUES[value]())


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(target=st.sampled_from(sorted(_TARGETS)), data=st.data())
def test_drawn_values_get_clear_errors_or_are_valid(target, data):
    argument = data.draw(st.sampled_from(sorted(_TARGETS[target].arguments)))
    _assert_fine(target, argument, data.draw(_EXTRA))


@pytest.mark.slow
def test_every_bad_argument_of_the_grid_gets_a_clear_error():
    counts, lines = tally()
    assert counts["silent"] == counts["obscure"] == counts["hang"] == counts["refused-valid"] == 0, "\n".join(lines)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(target=st.sampled_from(sorted(_TARGETS)), data=st.data())
def test_many_drawn_values_get_clear_errors_or_are_valid(target, data):
    argument = data.draw(st.sampled_from(sorted(_TARGETS[target].arguments)))
    _assert_fine(target, argument, data.draw(_EXTRA))


if __name__ == "__main__":
    counts, lines = tally()
    print("\n".join(lines))
    print(f"{len(_TARGETS)} callables, {sum(len(t.arguments) for t in _TARGETS.values())} arguments, "
          f"{len(BAD_VALUES)} kinds of bad values, {sum(counts.values())} calls: {dict(sorted(counts.items()))}")
    sys.exit(0)
