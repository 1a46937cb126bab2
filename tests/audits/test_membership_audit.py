"""MembershipAudit: the certificate against mechanisms of known ε, bad input refused, resume, engine, command line.

The known-ε mechanisms are exact: a "model" is one noisy release per record of whether
it was in the training set — randomized response (pure ε-DP, precision e^ε/(1 + e^ε)
at best) or the indicator plus Gaussian noise (μ-GDP) — so the true ε of each record's
inclusion is known in closed form, and a valid bound must stay below it.
"""

import math
import os

import numpy as np
import pytest

from audits.bounds import gdp_epsilon
from audits.membership import MembershipAudit
from audits.membership.data import generated
from audits.membership.models import DPSGDLogistic, logit_score, numpy_logistic_fit
from audits.membership.training import inclusion_mask

EXAMPLES = 1000


def _ids(n=EXAMPLES):
    """X holds each record's id and the record count: the mechanisms below see which ids were included."""
    return np.column_stack([np.arange(n), np.full(n, n)]), np.zeros(n, dtype=int)


def _present(X):
    present = np.zeros(int(X[0, 1]) if len(X) else 0, dtype=bool)
    present[X[:, 0].astype(int)] = True
    return present


class RandomizedResponse:
    """Per record: its inclusion bit, flipped with probability 1/(1 + e^ε): ε-DP for adding or removing it."""

    def __init__(self, epsilon):
        self.epsilon = epsilon

    def __call__(self, X, y, rng):
        present = _present(X)
        flip = rng.random(present.size) < 1.0 / (1.0 + math.exp(self.epsilon))
        return (present ^ flip).astype(float)


class GaussianInclusion:
    """Per record: its inclusion bit plus N(0, 1/μ²): μ-GDP for adding or removing it."""

    def __init__(self, mu):
        self.mu = mu

    def __call__(self, X, y, rng):
        present = _present(X)
        return present + rng.normal(0.0, 1.0 / self.mu, present.size)


def read_back(model, X, y):
    return np.asarray(model)[X[:, 0].astype(int)]


@pytest.mark.parametrize("epsilon, seed", [(1.0, 0), (2.0, 2), (4.0, 3)])
def test_randomized_response_bound_is_below_its_epsilon_and_close_to_it(epsilon, seed):
    X, y = _ids()
    result = MembershipAudit(RandomizedResponse(epsilon), read_back, X, y, attack="loss", models=16, rng=seed,
                             delta=1e-5, progress=False).run()
    bound = result.bound
    assert bound.steinke <= epsilon and bound.fdp <= epsilon
    # 8 targets × 1000 records: every guess made, right w.p. e^ε/(1 + e^ε); the bound gets most of ε.
    assert bound.epsilon >= 0.8 * epsilon
    assert bound.steinke <= bound.steinke_ceiling and bound.fdp <= bound.fdp_ceiling


@pytest.mark.parametrize("attack, mu, seed", [("lira", 1.0, 0), ("lira-offline", 2.0, 1), ("rmia", 1.0, 2),
                                              ("loss", 2.0, 3)])
def test_gaussian_inclusion_bounds_stay_below_the_true_privacy(attack, mu, seed):
    X, y = _ids()
    result = MembershipAudit(GaussianInclusion(mu), read_back, X, y, attack=attack, models=16, rng=seed,
                             delta=1e-5, progress=False).run()
    bound = result.bound
    assert bound.epsilon <= gdp_epsilon(mu, 1e-5)
    assert bound.mu <= mu  # the Gaussian reading is exact for this mechanism, so it must hold too
    # ...and has power: at 16 models LiRA's per-example variances rest on ~4 scores each, the weakest here.
    assert bound.mu >= 0.2 * mu and bound.epsilon >= 0.1 * gdp_epsilon(mu, 1e-5)
    assert 0.6 < result.auc < 1.0


def test_masks_are_independent_fair_coins_per_record():
    masks = np.stack([inclusion_mask(7, j, 4000) for j in range(8)])
    assert abs(masks.mean() - 0.5) < 0.01
    assert len({int(row.sum()) for row in masks}) > 1  # not exact halves
    assert abs(np.corrcoef(masks[0], masks[1])[0, 1]) < 0.05


# -- bad input: one line naming the argument, nothing certified --------------------------------------------------------
def fit_raises(X, y, rng):
    raise ZeroDivisionError("boom")


def score_nan(model, X, y):
    values = np.zeros(len(y))
    values[3] = np.nan
    return values


def score_per_model(model, X, y):
    return np.array([0.5])


def score_wrong_shape(model, X, y):
    return np.zeros((len(y), 2))


def constant_fit(X, y, rng):
    return None


def zero_score(model, X, y):
    return np.zeros(len(y))


@pytest.mark.parametrize("arguments, error, message", [
    ({"fit": fit_raises}, ValueError, r"^fit: raised ZeroDivisionError on model 0: boom$"),
    ({"score": score_nan}, ValueError, r"^score: returned NaN for 1 of 20 examples on model 0 \(first at example 3\)"),
    ({"score": score_per_model}, ValueError, r"^score: returned one value on model 0; it must return one value per "
                                             r"example, shape \(20,\)$"),
    ({"score": score_wrong_shape}, ValueError, r"^score: must return one value per example, shape \(20,\), got "
                                               r"\(20, 2\) on model 0$"),
    ({"models": 1}, ValueError, r"^models must be"),
    ({"models": 2, "attack": "lira"}, ValueError, r"^models must be ≥ 3 for the lira attack"),
    ({"attack": "shadow"}, ValueError, r"^attack must be one of"),
    ({"y": np.zeros(19)}, ValueError, r"^y must have shape \(20,\) to match X"),
    ({"fit": lambda X, y, rng: None, "n_jobs": 2}, TypeError, r"^fit: must pickle to run on worker processes"),
    ({"fit": "no_such_module_here:fit"}, ImportError, r"^fit: cannot import 'no_such_module_here'"),
    ({"rng": -1}, ValueError, r"rng"),
])
def test_bad_input_is_one_line_naming_the_argument(arguments, error, message):
    options = {"fit": constant_fit, "score": zero_score, "X": np.zeros((20, 2)), "y": np.zeros(20), "models": 4,
               "attack": "loss", "progress": False, **arguments}
    fit, score, X, y = (options.pop(key) for key in ("fit", "score", "X", "y"))
    with pytest.raises(error, match=message) as caught:
        MembershipAudit(fit, score, X, y, **options).run()
    assert "\n" not in str(caught.value)


# -- resume, engine ---------------------------------------------------------------------------------------------------
class FailsAt:
    """numpy_logistic_fit, raising on the model whose mask has ``size`` rows (a crash partway through)."""

    def __init__(self, size):
        self.size = size

    def __call__(self, X, y, rng):
        if len(y) == self.size:
            raise RuntimeError("interrupted")
        return numpy_logistic_fit(X, y, rng)


def test_an_interrupted_audit_resumes_from_its_store_to_the_same_result(tmp_path):
    X, y = generated(60, 5)
    store = str(tmp_path / "scores.npz")
    sizes = [int(inclusion_mask(3, j, 60).sum()) for j in range(6)]
    assert sizes[4] not in sizes[:4]
    with pytest.raises(ValueError, match="fit: raised RuntimeError on model 4"):
        MembershipAudit(FailsAt(sizes[4]), logit_score, X, y, models=6, rng=3, store=store, progress=False).run()
    with np.load(store) as saved:
        assert saved["done"].tolist() == [True] * 4 + [False] * 2  # scores and masks of the finished models only
        assert sorted(saved.files) == ["cpu", "done", "fingerprint", "masks", "scores", "seed"]
    # FailsAt names another fit, so the store is refused...
    with pytest.raises(ValueError, match="store: .* holds another audit's models"):
        MembershipAudit(numpy_logistic_fit, logit_score, X, y, models=6, rng=3, store=store, progress=False).run()
    # ...while the same kind of fit resumes (the failing model is now fitted: the crash was transient).
    resumed = MembershipAudit(FailsAt(-1), logit_score, X, y, models=6, rng=3, store=store, progress=False).run()
    fresh = MembershipAudit(FailsAt(-1), logit_score, X, y, models=6, rng=3, progress=False).run()
    np.testing.assert_array_equal(resumed.statistics, fresh.statistics)
    assert (resumed.guesses, resumed.correct) == (fresh.guesses, fresh.correct)


def test_a_task_pickles_and_trains_to_the_same_scores():
    """What a worker receives: fit and score by name, the data, j and the seed (never a model or a ledger)."""
    import pickle

    from audits.membership.training import _train

    X, y = generated(80, 5)
    task = ("audits.membership.models:numpy_logistic_fit", "audits.membership.models:logit_score", X, y, 2, 9)
    here, there = _train(task), _train(pickle.loads(pickle.dumps(task)))
    np.testing.assert_array_equal(here[1], there[1])
    assert here[0] == 2 and here[3] is None


@pytest.mark.slow
def test_worker_processes_give_the_serial_numbers():
    X, y = generated(80, 5)
    fit, score = "audits.membership.models:numpy_logistic_fit", "audits.membership.models:logit_score"
    serial = MembershipAudit(fit, score, X, y, models=4, rng=1, progress=False).table()
    parallel = MembershipAudit(fit, score, X, y, models=4, rng=1, n_jobs=2, progress=False).table()
    np.testing.assert_array_equal(serial.scores, parallel.scores)
    np.testing.assert_array_equal(serial.masks, parallel.masks)


# -- the project's DP-SGD, and the command line ------------------------------------------------------------------------
def test_dpsgd_models_are_audited_below_their_claim():
    X, y = generated(300, 5)
    fit = DPSGDLogistic(1.0, steps=20, normalizer=150.0)
    result = MembershipAudit(fit, logit_score, X, y, attack="lira", models=8, rng=0, claim=fit.claim,
                             progress=False).run()
    assert result.verdict == "consistent"
    assert result.bound.epsilon <= 1.0 and result.claim.delta == 1e-5


def test_the_command_line_audits_writes_and_resumes(tmp_path, capsys):
    from dpglm.cli import main

    argv = ["audit", "--membership", "numpy-logistic", "--data", "generated", "--models", "4", "--attack", "loss",
            "--attack", "lira", "--out", str(tmp_path), "--jobs", "1"]
    assert main(argv) == 0
    folder = tmp_path / "membership-generated-numpy-logistic"
    assert {"scores.npz", "loss.json", "loss-roc.csv", "loss-roc.png", "lira.json", "summary.csv"} <= set(
        os.listdir(folder))
    first = capsys.readouterr().out
    assert "TPR" in first and "certified ε ≥" in first and "ceiling" in first
    assert main(argv + ["--no-plots"]) == 0  # resumed from the store: the same lines
    assert capsys.readouterr().out.replace(" ", "") .split("CPU")[0] == first.replace(" ", "").split("CPU")[0]


@pytest.mark.parametrize("extra, message", [
    (["--membership", "nope"], "--membership must be MODULE:FIT,MODULE:SCORE or one of"),
    (["--membership", "numpy-logistic"], "--membership needs --data"),
    (["--membership", "numpy-logistic", "--data", "nowhere"], "--data must be one of"),
    (["--membership", "numpy-logistic", "--data", "generated", "--runs", "10"], "--runs does not apply"),
    (["--membership", "numpy-logistic", "--data", "generated", "--claim", "x"], "--claim must be EPS or EPS,DELTA"),
])
def test_the_command_line_refuses_bad_flags_in_one_line(extra, message, tmp_path, capsys):
    from dpglm.cli import main

    assert main(["audit", *extra, "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and "\n" not in error
