"""Bad public arguments spend nothing: every public mechanism and private policy refuses them before its charge.

Each case builds a journalled ledger (ApproxDP(4, 0.02), or the currency the
mechanism needs), prepares what the mechanism needs on it (accounts split off, a
built mechanism), then makes ONE call with one bad public argument (a shape, a size,
a step count, a clip, a method name — never the private data). The call must raise
a ``TypeError``/``ValueError`` whose message names the argument, and leave the budget
exactly as it was: the same ``report()`` and ``remaining`` of every account, and the
same number of journal rows as a control run of the same preparation without the bad
call (issue 21, "Fail before charging on public arguments").

What a refusal on PRIVATE data does instead (charge then refuse, or saturate) is in
docs/mechanisms.md and tested beside each mechanism.
"""

from __future__ import annotations

import functools
import math
import sqlite3
from fractions import Fraction

import numpy as np
import pytest

from accounting import ZCDP, ApproxDP, Ledger, PureDP
from dpglm.policies.batched import ShuffleDPGLMBandit
from dpglm.policies.batched.private import ShuffledDesignSum, ShufflePGDEstimator
from dpglm.policies.joint_dp import JointDPGLMBandit
from dpglm.policies.tree_pair import build_tree_pair
from mechanisms import BinaryTreeMechanism, GaussianMechanism, LaplaceMechanism, SquareRootFactorizationMechanism
from mechanisms.geometric import GeometricBatchMean
from mechanisms.optim import DPSGD, BallProjection, ShufflePGD
from mechanisms.optim.poisson_dpsgd import PoissonDPSGD
from mechanisms.shuffle import ShuffleBitSum, ShuffleVectorSum

RNG = np.random.default_rng
X3 = np.full((6, 3), 0.3)
Y6 = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.0])


def _ledger(path, budget=None, relation="replace_one"):
    return Ledger(ApproxDP(4, Fraction(1, 50)) if budget is None else budget, journal=str(path), relation=relation)


def _account(currency):
    """Prepare: split one account of ``currency`` off the ledger; the call gets it."""
    def prepare(ledger):
        return ledger.split({"a": 1}, currency={"a": currency})["a"]
    return prepare


def _built(currency, factory):
    """Prepare: split an account and build a mechanism on it (its construction may charge: part of the control)."""
    def prepare(ledger):
        return factory(ledger.split({"a": 1}, currency={"a": currency})["a"])
    return prepare


def _root(ledger):
    return ledger


def _gaussian(account):
    return GaussianMechanism(account, 1.0, RNG(0), sigma=2.0)


def _laplace(account):
    return LaplaceMechanism(account, 1.0, RNG(0), scale=2.0)


def _bitsum(account):
    return ShuffleBitSum(account, 100, RNG(0), epsilon=1.0, delta=1e-6)


def _vectorsum(account):
    return ShuffleVectorSum(account, 50, (2,), 1.0, RNG(0), epsilon=1.0, delta=1e-6)


def _vectormatrix(account):
    return ShuffleVectorSum(account, 50, (2, 2), 1.0, RNG(0), epsilon=1.0, delta=1e-6)


def _geometric(account):
    return GeometricBatchMean(account, 2, 1.0, RNG(0))


def _dpsgd(account):
    return DPSGD(account, "logistic", RNG(0), clip=1.0, engine="vectorised")


def _pgd(account):
    return ShufflePGD(account, lambda theta, X, y: X * 0.0, RNG(0), clip=1.0, radius=1.0)


def _joint(ledger, **bad):
    arguments = {"family": "logistic", "d": 3, "horizon": 50, "S": 1.0, "rng": RNG(0), "ledger": ledger,
                 "preset": "tight", **bad}
    return JointDPGLMBandit(**arguments)


def _shuffle_policy(ledger, **bad):
    arguments = {"family": "logistic", "d": 3, "horizon": 50, "S": 1.0, "rng": RNG(0), "ledger": ledger, **bad}
    return ShuffleDPGLMBandit(**arguments)


BAD_CLIPS = [-1, 0, -0.0, float("nan"), float("inf"), -float("inf"), "1", None, True, False, 1j, [1.0],
             np.array([1.0, 2.0]), object(), 10**400, -(10**400), -1e-300, np.float64("nan"), np.int64(-3),
             np.bool_(True), b"1"]
assert len(BAD_CLIPS) == 21  # the "clip=-1 and the other 20 bad clip values"

BALL = BallProjection(1.0)
FIT = {"steps": 5, "lr": 0.5, "projection": BALL, "cost": ZCDP(Fraction(1, 10))}
PGD_FIT = {"iterations": 3, "delta": 1e-6, "noise_bits": 200}

# (id, prepare(ledger) -> target, call(target), the argument the message must name)
CASES = [
    # -- continual release: shapes, horizon, memory (the whole horizon is charged at construction)
    ("tree_shape_1e12", _account("zcdp"),
     lambda a: BinaryTreeMechanism(a, 100, (10**12,), 1.0, RNG(0), cost=ZCDP(Fraction(1, 10))), "shape"),
    ("tree_matrix_1e6", _account("zcdp"),
     lambda a: BinaryTreeMechanism(a, 100, (10**6, 10**6), 1.0, RNG(0), cost=ZCDP(Fraction(1, 10))), "shape"),
    ("tree_gdp_shape_1e12", _account("gdp"),
     lambda a: BinaryTreeMechanism(a, 100, (10**12,), 1.0, RNG(0), sigma=1.0), "shape"),
    ("tree_psd_vector", _account("zcdp"),
     lambda a: BinaryTreeMechanism(a, 100, (3,), 1.0, RNG(0), cost=ZCDP(Fraction(1, 10)), psd=True), "psd"),
    ("tree_relation", _account("zcdp"),
     lambda a: BinaryTreeMechanism(a, 100, (3,), 1.0, RNG(0), cost=ZCDP(Fraction(1, 10)), relation="swap"), "relation"),
    ("tree_rng", _account("zcdp"),
     lambda a: BinaryTreeMechanism(a, 100, (3,), 1.0, 7, cost=ZCDP(Fraction(1, 10))), "rng"),
    ("factorization_horizon_1e9", _account("zcdp"),
     lambda a: SquareRootFactorizationMechanism(a, 10**9, (3,), 1.0, RNG(0), cost=ZCDP(Fraction(1, 10))), "horizon"),
    ("factorization_shape_1e12", _account("gdp"),
     lambda a: SquareRootFactorizationMechanism(a, 100, (10**12,), 1.0, RNG(0), sigma=1.0), "shape"),
    # -- additive noise: the statistic's kind and shape are public; note and partition too
    ("gaussian_string", _built("zcdp", _gaussian), lambda m: m.release("abc"), "x"),
    ("gaussian_object", _built("zcdp", _gaussian), lambda m: m.release(np.array([object()])), "x"),
    ("gaussian_note", _built("zcdp", _gaussian), lambda m: m.release(1.0, note=object()), "note"),
    ("gaussian_partition", _built("zcdp", _gaussian), lambda m: m.release(1.0, partition=[1]), "partition"),
    ("gaussian_sum_ragged", _built("zcdp", _gaussian), lambda m: m.release_sum([[1.0, 2.0], [3.0]]),
     "contributions"),
    ("gaussian_gdp_huge", _built("gdp", lambda a: GaussianMechanism(a, 1.0, RNG(0), sigma=2.0)),
     lambda m: m.release(np.zeros(0)), "x"),
    ("laplace_note", _built("pure", _laplace), lambda m: m.release(1.0, note=3), "note"),
    ("laplace_string", _built("pure", _laplace), lambda m: m.release(["a", "b"]), "x"),
    # -- shuffle protocols: the number of users and the method are public
    ("bitsum_length", _built("approx", _bitsum), lambda m: m.release(np.zeros(99, dtype=int)), "bits"),
    ("bitsum_method", _built("approx", _bitsum), lambda m: m.release(np.zeros(100, dtype=int), method="x"),
     "method"),
    ("bitsum_partition", _built("approx", _bitsum), lambda m: m.release(np.zeros(100, dtype=int), partition=3.5),
     "partition"),
    ("vectorsum_shape", _built("approx", _vectorsum), lambda m: m.release(np.zeros((50, 3))), "values"),
    ("vectorsum_users", _built("approx", _vectorsum), lambda m: m.release(np.zeros((49, 2))), "values"),
    ("vectorsum_method", _built("approx", _vectorsum), lambda m: m.release(np.zeros((50, 2)), method="x"),
     "method"),
    ("vectorsum_weights_vector", _built("approx", _vectorsum),
     lambda m: m.release(np.zeros((50, 2)), weights=np.zeros(50)), "weights"),
    ("vectorsum_weights_shape", _built("approx", _vectormatrix),
     lambda m: m.release(np.zeros((50, 2)), weights=np.zeros(49)), "weights"),
    ("vectorsum_weights_factors", _built("approx", _vectormatrix),
     lambda m: m.release(np.zeros((50, 2, 2)), weights=np.zeros(50)), "values"),
    ("vectorsum_weights_messages", _built("approx", _vectormatrix),
     lambda m: m.release(np.zeros((50, 2)), weights=np.zeros(50), method="messages"), "weights"),
    ("vectorsum_weights_kind", _built("approx", _vectormatrix),
     lambda m: m.release(np.zeros((50, 2)), weights=["a"] * 50), "weights"),
    # -- geometric batch means: shapes and dtypes (counts are public actions)
    ("geometric_shape", _built("pure", _geometric), lambda m: m.observe(np.array([1, 1]), np.zeros(3)),
     "reward_sums"),
    ("geometric_strings", _built("pure", _geometric), lambda m: m.observe(np.array([1, 1]), np.array(["a", "b"])),
     "reward_sums"),
    ("geometric_counts_float", _built("pure", _geometric), lambda m: m.observe(np.array([1.0, 1.0]), np.zeros(2)),
     "counts"),
    # -- DP-SGD: the run's plan and every public input
    ("dpsgd_steps", _built("zcdp", _dpsgd), lambda m: m.fit(X3, Y6, **{**FIT, "steps": -1}), "steps"),
    ("dpsgd_lr", _built("zcdp", _dpsgd), lambda m: m.fit(X3, Y6, **{**FIT, "lr": float("nan")}), "lr"),
    ("dpsgd_projection", _built("zcdp", _dpsgd), lambda m: m.fit(X3, Y6, **{**FIT, "projection": None}),
     "projection"),
    ("dpsgd_theta0", _built("zcdp", _dpsgd), lambda m: m.fit(X3, Y6, **FIT, theta0=np.zeros(4)), "theta0"),
    ("dpsgd_batch", _built("zcdp", _dpsgd), lambda m: m.fit(X3, Y6, **FIT, batch_size=0), "batch_size"),
    ("dpsgd_y_shape", _built("zcdp", _dpsgd), lambda m: m.fit(X3, Y6[:5], **FIT), "y"),
    ("dpsgd_preconditioner", _built("zcdp", _dpsgd),
     lambda m: m.fit(X3, Y6, **FIT, preconditioner=np.eye(2)), "preconditioner"),
    ("dpsgd_note", _built("zcdp", _dpsgd), lambda m: m.fit(X3, Y6, **FIT, note=1), "note"),
    ("poisson_rate", _built("rdp", lambda a: PoissonDPSGD(a, "logistic", RNG(0), clip=1.0)),
     lambda m: m.fit(X3, Y6, steps=3, lr=0.5, projection=BALL, sample_rate=2.0, noise_multiplier=1.0,
                     normalizer=6.0), "sample_rate"),
    ("shuffle_pgd_iterations", _built("approx", _pgd), lambda m: m.fit(X3, Y6, **{**PGD_FIT, "iterations": 0}),
     "iterations"),
    ("shuffle_pgd_method", _built("approx", _pgd), lambda m: m.fit(X3, Y6, **PGD_FIT, method="x"), "method"),
    ("shuffle_pgd_delta", _built("approx", _pgd), lambda m: m.fit(X3, Y6, **{**PGD_FIT, "delta": 2.0}), "delta"),
    ("shuffle_pgd_partition", _built("approx", _pgd), lambda m: m.fit(X3, Y6, **PGD_FIT, partition=[]),
     "partition"),
    # -- the private policies: every public argument is checked before the ledger is split or charged
    *[(f"joint_clip_{i}", _root, functools.partial(_joint, clip=clip), "clip") for i, clip in enumerate(BAD_CLIPS)],
    *[(f"joint_{name}_{preset}", _root, functools.partial(_joint, preset=preset, **bad), arg)
      for preset in ("tight", "paper-simulation")
      for name, bad, arg in [("S_1e300", {"S": 1e300}, "S"), ("S_40", {"S": 40.0}, "S"),
                             ("steps", {"steps": -1}, "steps"), ("lr", {"lr": -1.0}, "lr"),
                             ("refits_tau", {"refits_tau": -1}, "refits_tau"),
                             ("refits_o", {"refits_o": 0}, "refits_o"),
                             ("backend", {"optimizer_backend": "x"}, "optimizer_backend"),
                             ("d_1e6", {"d": 10**6}, "d")]],
    ("joint_tree_share", _root, lambda ledger: _joint(ledger, tree_share=5), "tree_share"),
    ("joint_o_share", _root, lambda ledger: _joint(ledger, o_share=float("nan")), "o_share"),
    ("joint_noise_term", _root, lambda ledger: _joint(ledger, noise_term=-1.0), "noise_term"),
    ("joint_params", _root, lambda ledger: _joint(ledger, params={"lam": 1}), "params"),
    ("joint_family", _root, lambda ledger: _joint(ledger, family="poisson"), "family"),
    ("joint_horizon_1e400", _root, lambda ledger: _joint(ledger, horizon=10**400), "horizon"),
    ("shuffle_levels", _root, lambda ledger: _shuffle_policy(ledger, levels=-2), "levels"),
    ("shuffle_d", _root, lambda ledger: _shuffle_policy(ledger, d=0), "d"),
    ("shuffle_S", _root, lambda ledger: _shuffle_policy(ledger, S=1e300), "S"),
    ("shuffle_horizon", _root, lambda ledger: _shuffle_policy(ledger, horizon=1.5), "horizon"),
    ("shuffle_params", _root, lambda ledger: _shuffle_policy(ledger, params=3), "params"),
    ("shuffle_estimator", _root, lambda ledger: _shuffle_policy(ledger, estimator=3), "estimator"),
    ("tree_pair_d", _account("gdp"),
     lambda a: build_tree_pair(a, 50, 10**6, (math.sqrt(2), 0.5), RNG(0), 0.5), "d"),
    ("tree_pair_horizon", _account("gdp"),
     lambda a: build_tree_pair(a, 0, 3, (math.sqrt(2), 0.5), RNG(0), 0.5), "horizon"),
    ("design_sum_batch", _account("approx"),
     lambda a: ShuffledDesignSum(a, 1.0, RNG(0), n_batches=3, width_delta=0.01).matrix(np.zeros((4, 3)), np.ones(4), 0,
                                                                                      -1.0), "bound"),
    ("pgd_estimator_iterations", _account("approx"),
     lambda a: ShufflePGDEstimator(_family(), 1.0, 1.0, a, RNG(0), max_iterations=0).fit(X3, Y6, 0),
     "max_iterations"),
]


def _family():
    from dpglm.glm import get_family

    return get_family("logistic")


def _rows(path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])


def _state(ledger):
    return ledger.report(), [(a.path, a.remaining, a.spent) for a in ledger.accounts()]


@pytest.fixture(scope="module")
def control_rows(tmp_path_factory):
    """Journal rows of a control run of a preparation alone: one run per distinct preparation (its code and
    what it closes over) and relation, shared by the cases that prepare alike (a journal costs disk syncs)."""
    rows: dict[tuple[object, ...], int] = {}

    def count(prepare, relation: str) -> int:
        key = (prepare.__code__, *(cell.cell_contents for cell in prepare.__closure__ or ()), relation)
        if key not in rows:
            path = tmp_path_factory.mktemp("control") / "control.db"
            control = _ledger(path, relation=relation)
            prepare(control)
            control.close()
            rows[key] = _rows(path)
        return rows[key]

    return count


@pytest.mark.parametrize("name, prepare, call, argument", CASES, ids=[case[0] for case in CASES])
def test_bad_public_argument_spends_nothing(tmp_path, control_rows, name, prepare, call, argument):
    relation = "add_remove" if name.startswith("poisson") else "replace_one"  # Poisson DP-SGD's relation
    ledger = _ledger(tmp_path / "journal.db", relation=relation)
    target = prepare(ledger)
    before = _state(ledger)
    with pytest.raises((TypeError, ValueError)) as refused:
        call(target)
    message = str(refused.value)
    assert argument in message, f"{name}: the message does not name {argument!r}: {message}"
    assert "\n" not in message.strip(), f"{name}: not a one-line error: {message!r}"
    assert _state(ledger) == before, f"{name}: the refused call changed the budget"
    ledger.close()
    assert _rows(tmp_path / "journal.db") == control_rows(prepare, relation), f"{name}: a journal row was written"


def test_the_sweep_covers_every_public_mechanism_and_private_policy():
    import mechanisms
    import mechanisms.optim

    names = {case[0].split("_")[0] for case in CASES}
    covered = {"tree": "BinaryTreeMechanism", "factorization": "SquareRootFactorizationMechanism",
               "gaussian": "GaussianMechanism", "laplace": "LaplaceMechanism", "bitsum": "ShuffleBitSum",
               "vectorsum": "ShuffleVectorSum", "geometric": "GeometricBatchMean", "dpsgd": "DPSGD",
               "poisson": "PoissonDPSGD", "shuffle": "ShufflePGD"}
    assert set(covered) <= names
    public = {n for n in mechanisms.__all__ if n not in ("Mechanism", "Release")}
    public |= {n for n in mechanisms.optim.__all__ if n in ("DPSGD", "PoissonDPSGD", "ShufflePGD")}
    assert public <= set(covered.values()) | {"GeometricBatchMean", "ShuffleBitSum", "ShuffleVectorSum"}


def test_pure_budget_ledger_is_untouched_by_a_refused_laplace_release(tmp_path):
    # A pure-DP ledger too (the sweep's ledgers are ApproxDP).
    ledger = _ledger(tmp_path / "pure.db", PureDP(1))
    mechanism = LaplaceMechanism(ledger, 1.0, RNG(0), scale=2.0)
    with pytest.raises(TypeError, match="note"):
        mechanism.release(1.0, note=b"bytes")
    assert ledger.remaining == PureDP(1)
