"""Mechanism base class: releases only from this instance's own granted charges, read-only parameters, no copies.

Every mechanism in mechanisms/ is built once per case below and attacked the ways an
honest mistake would: a receipt from another mechanism or a hand-built one, one
receipt reused for more values than its charge covers, a parameter reassigned after
the charge, a copy or a pickle of the mechanism.
"""

import copy
import dataclasses
import pickle

import numpy as np
import pytest

from accounting import ZCDP, ApproxDP, Ledger, PureDP
from mechanisms import (
    BinaryTreeMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    Mechanism,
    SquareRootFactorizationMechanism,
)
from mechanisms.geometric import GeometricBatchMean
from mechanisms.optim import BallProjection
from mechanisms.optim.dpsgd import DPSGD
from mechanisms.optim.poisson_dpsgd import PoissonDPSGD
from mechanisms.optim.shuffle_pgd import ShufflePGD
from mechanisms.shuffle import ShuffleBitSum, ShuffleVectorSum


def _account(currency):
    budgets = {"zcdp": ZCDP(1000), "pure": PureDP(1000), "approx": ApproxDP(1000, 0.5)}
    return Ledger(budgets[currency]).root


def _rng():
    return np.random.default_rng(3)


def _squared_gradient(theta, X, y):
    return (X @ theta - y)[:, None] * X


# name -> (build, one release (mechanism -> Release), read-only parameters, releases one charge covers)
CASES = {
    "gaussian": (lambda: GaussianMechanism(_account("zcdp"), 1.0, _rng(), sigma=2.0),
                 lambda m: m.release(np.zeros(3)), ("sigma", "cost", "sensitivity", "relation", "account", "rng"), 1),
    "laplace": (lambda: LaplaceMechanism(_account("pure"), 1.0, _rng(), scale=2.0),
                lambda m: m.release(0.0), ("scale", "cost", "sensitivity", "relation", "account"), 1),
    "tree": (lambda: BinaryTreeMechanism(_account("zcdp"), 3, (2,), 1.0, _rng(), sigma=1.0),
             lambda m: m.append(np.zeros(2)),
             ("sigma", "cost", "depth", "horizon", "sensitivity", "charged_sensitivity", "element_bound",
              "relation", "receipt", "account"), 3),
    "factorization": (lambda: SquareRootFactorizationMechanism(_account("zcdp"), 3, (2,), 1.0, _rng(), sigma=1.0),
                      lambda m: m.append(np.zeros(2)),
                      ("sigma", "cost", "horizon", "column_norm_squared", "coefficients", "receipt"), 3),
    "geometric": (lambda: GeometricBatchMean(_account("pure"), 2, 1.0, _rng()),
                  lambda m: m.observe(np.array([1, 0]), np.array([1.0, 0.0]))[0][2],
                  ("epsilon", "scale", "eta", "refresh", "accounts", "sensitivity", "relation", "forget"), 1),
    "bitsum": (lambda: ShuffleBitSum(_account("approx"), 50, _rng(), epsilon=1.0, delta=1e-6),
               lambda m: m.release(np.zeros(50, dtype=int)), ("gamma", "epsilon", "delta", "n_users", "account"), 1),
    "vector": (lambda: ShuffleVectorSum(_account("approx"), 50, (2,), 1.0, _rng(), epsilon=1.0, delta=1e-6),
               lambda m: m.release(np.zeros((50, 2))), ("noise_bits", "levels", "bound", "coordinates", "epsilon"), 1),
    "dpsgd": (lambda: DPSGD(_account("zcdp"), "logistic", _rng(), clip=1.0, engine="vectorised"),
              lambda m: m.fit(np.ones((4, 2)) / 2, np.ones(4), steps=3, lr=0.1, projection=BallProjection(1.0),
                              cost=ZCDP(0.5)),
              ("clip", "account", "loss", "engine", "relation"), 1),
    "poisson_dpsgd": (lambda: PoissonDPSGD(Ledger(ApproxDP(1000, 0.5), relation="add_remove").root, "logistic",
                                           _rng(), clip=1.0),
                      lambda m: m.fit(np.ones((4, 2)) / 2, np.ones(4), steps=3, lr=0.1, projection=BallProjection(1.0),
                                      sample_rate=0.5, noise_multiplier=1.0, normalizer=2, delta=1e-6),
                      ("clip", "account", "loss", "engine", "relation"), 1),
    "shuffle_pgd": (lambda: ShufflePGD(_account("approx"), _squared_gradient, _rng(), clip=1.0, radius=1.0),
                    lambda m: m.fit(np.ones((20, 2)) / 2, np.zeros(20), iterations=2, round_epsilon=1.0,
                                    round_delta=1e-6, delta=1e-5),
                    ("clip", "radius", "account", "projection"), 1),
}


@pytest.fixture(params=sorted(CASES))
def case(request):
    build, release, parameters, covered = CASES[request.param]
    return build, release, parameters, covered


def test_every_mechanism_class_derives_from_the_base(case):
    build, *_ = case
    assert isinstance(build(), Mechanism)


def test_a_receipt_of_another_mechanism_is_refused(case):
    build, release, _, _ = case
    mechanism = build()
    release(mechanism)  # the mechanism has charged for itself
    other = BinaryTreeMechanism(_account("zcdp"), 4, (1,), 1.0, _rng(), sigma=1.0)  # covers 4, none made
    with pytest.raises(TypeError, match="not granted to this"):
        mechanism._release(1.0, other.receipt)


def test_a_hand_built_or_copied_receipt_is_refused(case):
    build, release, _, _ = case
    mechanism = build()
    granted = release(mechanism).receipt
    for forged in (dataclasses.replace(granted), copy.copy(granted), copy.deepcopy(granted)):
        assert forged == granted and forged is not granted  # equal fields, but not the receipt the ledger returned
        with pytest.raises(TypeError, match="not granted to this"):
            mechanism._release(1.0, forged)


def test_one_receipt_wraps_no_more_values_than_its_charge_covers(case):
    build, release, _, covered = case
    mechanism = build()
    receipt = release(mechanism).receipt
    assert mechanism.releases_left(receipt) == covered - 1
    for _ in range(covered - 1):
        mechanism._release(0.0, receipt)  # what the charge still covers (tree: its other prefix sums)
    assert mechanism.releases_left(receipt) == 0
    with pytest.raises(ValueError, match="covers no more releases"):
        mechanism._release(0.0, receipt)


def test_parameters_are_read_only_after_construction(case):
    build, _, parameters, _ = case
    mechanism = build()
    for name in parameters:
        before = getattr(mechanism, name)
        with pytest.raises(AttributeError, match=f"{name} is read-only after construction"):
            setattr(mechanism, name, 1e-9)
        with pytest.raises(AttributeError, match="read-only"):
            delattr(mechanism, name)
        assert getattr(mechanism, name) is before
        if isinstance(before, np.ndarray):
            with pytest.raises(ValueError):
                before[...] = 0.0


@pytest.mark.parametrize("duplicate", [copy.copy, copy.deepcopy, pickle.dumps])
def test_copies_and_pickles_are_refused(case, duplicate):
    build, *_ = case
    with pytest.raises(TypeError, match="cannot be (copied|pickled)"):
        duplicate(build())


def test_gaussian_sigma_cannot_be_lowered_after_the_charge():
    # The attack of the issue: ρ = 0.5 charged for σ = 1, then σ set to 1e-9 to release the raw value.
    mechanism = GaussianMechanism(_account("zcdp"), 1.0, _rng(), cost=ZCDP(0.5))
    with pytest.raises(AttributeError, match="GaussianMechanism.sigma is read-only"):
        mechanism.sigma = 1e-9
    assert mechanism.sigma == pytest.approx(1.0)
    assert abs(mechanism.release(0.0).value) > 1e-6  # the noise is still σ = 1


def test_a_rewound_tree_draws_no_more_releases_than_charged():
    tree = BinaryTreeMechanism(_account("zcdp"), 2, (1,), 1.0, _rng(), sigma=1.0)
    tree.append(np.zeros(1))
    tree.append(np.zeros(1))
    tree.t = 0  # run state, assignable; the charge still covers 2 releases only
    with pytest.raises(ValueError, match="covers no more releases"):
        tree.append(np.zeros(1))


def test_a_subclass_may_set_parameters_inside_its_own_constructor():
    class Halved(GaussianMechanism):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.sigma = self.sigma / 2  # still construction: allowed (the planted audit bugs do this)

    mechanism = Halved(_account("zcdp"), 1.0, _rng(), sigma=2.0)
    assert mechanism.sigma == 1.0
    with pytest.raises(AttributeError):
        mechanism.sigma = 2.0


def test_a_refused_charge_records_no_grant():
    mechanism = GaussianMechanism(Ledger(ZCDP(0.1)).root, 1.0, _rng(), cost=ZCDP(0.5))
    from accounting import BudgetExceeded

    with pytest.raises(BudgetExceeded):
        mechanism.release(0.0)
    assert not mechanism.__dict__.get("_Mechanism__grants")


def test_every_concrete_mechanism_class_is_attacked_above():
    # A mechanism added later without a case here would escape these checks: find them all.
    import importlib
    import inspect
    import pkgutil

    import mechanisms

    for info in pkgutil.walk_packages(mechanisms.__path__, "mechanisms."):
        importlib.import_module(info.name)

    def concrete(cls):
        for sub in cls.__subclasses__():
            ours = sub.__module__.startswith("mechanisms.")
            if ours and not inspect.isabstract(sub) and not sub.__name__.startswith("_"):
                yield sub
            yield from concrete(sub)

    covered = {type(build()) for build, *_ in CASES.values()}
    assert set(concrete(Mechanism)) <= covered
    assert len(covered) == len(CASES) == 10
