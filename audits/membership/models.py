"""Training procedures to audit: ``fit(X, y, rng)`` and ``score(model, X, y)`` pairs, all picklable.

Every score is the logit of the true label's probability, ``log p_y − log(1 − p_y)``,
computed from the model's class logits z as ``z_y − logsumexp_{k≠y} z_k`` so that it
stays finite for a confident model (Carlini et al. 2022, §IV-B: the score whose
per-example distribution is close to Gaussian).

* :func:`numpy_logistic_fit` — multinomial logistic regression, L-BFGS (scipy), no scikit-learn;
* :func:`logistic_fit` — scikit-learn's ``LogisticRegression``, weakly regularised (C = 100);
* :func:`mlp_fit` — scikit-learn's ``MLPClassifier``, one hidden layer of 64 units;
* :class:`DPSGDLogistic` — the project's ``DPSGD`` (binary logistic, full batch, public
  normaliser) charged to a fresh add/remove ledger per model; its ``claim`` is the (ε, δ)
  it is calibrated to.

:func:`logit_score` scores any of them. scikit-learn is the ``membership`` extra and is
imported only when a scikit-learn model is fitted.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

__all__ = ["DPSGDLogistic", "LinearModel", "logistic_fit", "logit_score", "mlp_fit", "numpy_logistic_fit"]

SKLEARN_INSTALL = 'pip install "dpglm[membership]"  (scikit-learn)'


@dataclass(frozen=True)
class LinearModel:
    """Class logits ``X @ weights + bias`` for the labels ``classes`` (a binary model has one column of logits)."""

    weights: np.ndarray
    bias: np.ndarray
    classes: np.ndarray

    def logits(self, X: np.ndarray) -> np.ndarray:
        z = np.asarray(X, dtype=float).reshape(len(X), -1) @ self.weights + self.bias
        return np.column_stack([np.zeros(len(z)), z[:, 0]]) if z.shape[1] == 1 else z


def _true_label_logit(logits: np.ndarray, classes: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``z_y − logsumexp_{k≠y} z_k`` per row; a label the model never saw scores as its lowest class."""
    column = np.searchsorted(classes, y)
    known = (column < classes.size) & (classes[np.minimum(column, classes.size - 1)] == y)
    column = np.where(known, np.minimum(column, classes.size - 1), 0)
    rows = np.arange(len(y))
    own = logits[rows, column]
    others = logits.copy()
    others[rows, column] = -np.inf
    rest = logsumexp(others, axis=1)
    lowest = logits.min(axis=1) - logsumexp(logits, axis=1)  # log p of the least likely class
    return np.where(known, own - rest, lowest)


def logit_score(model: Any, X: Any, y: Any) -> np.ndarray:
    """The logit of the true label's probability under ``model`` (a :class:`LinearModel` or scikit-learn classifier)."""
    X, y = np.asarray(X), np.asarray(y)
    if isinstance(model, LinearModel):
        return _true_label_logit(model.logits(X), model.classes, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # log of a zero probability: handled below
        log_probabilities = model.predict_log_proba(X)
    return _true_label_logit(np.maximum(log_probabilities, -745.0), np.asarray(model.classes_), y)


def numpy_logistic_fit(X: Any, y: Any, rng: np.random.Generator, *, l2: float = 1e-3,
                       max_iterations: int = 500) -> LinearModel:
    """Multinomial logistic regression minimising mean cross-entropy + (l2/2)‖W‖², by L-BFGS from zero.

    Deterministic (``rng`` is unused): the randomness of the audit is in the masks.
    """
    X = np.asarray(X, dtype=float).reshape(len(X), -1)
    classes, labels = np.unique(np.asarray(y), return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"y must hold at least two classes, got {classes.size}")
    n, d, k = X.shape[0], X.shape[1], classes.size
    onehot = np.zeros((n, k))
    onehot[np.arange(n), labels] = 1.0

    def loss(flat: np.ndarray) -> tuple[float, np.ndarray]:
        weights, bias = flat[: d * k].reshape(d, k), flat[d * k:]
        z = X @ weights + bias
        log_p = z - logsumexp(z, axis=1, keepdims=True)
        residual = (np.exp(log_p) - onehot) / n
        value = -float((onehot * log_p).sum()) / n + 0.5 * l2 * float((weights**2).sum())
        return value, np.concatenate([(X.T @ residual + l2 * weights).ravel(), residual.sum(axis=0)])

    solution = optimize.minimize(loss, np.zeros(d * k + k), jac=True, method="L-BFGS-B",
                                 options={"maxiter": max_iterations})
    return LinearModel(solution.x[: d * k].reshape(d, k), solution.x[d * k:], classes)


def _sklearn() -> Any:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise ImportError(f"this model needs scikit-learn: {SKLEARN_INSTALL}") from None
    return sklearn


def logistic_fit(X: Any, y: Any, rng: np.random.Generator) -> Any:
    """scikit-learn ``LogisticRegression(C=100)``: weakly regularised, lbfgs, up to 2000 iterations."""
    _sklearn()
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of a nearly unregularised fit
        return LogisticRegression(C=100.0, max_iter=2000).fit(X, y)


def mlp_fit(X: Any, y: Any, rng: np.random.Generator) -> Any:
    """scikit-learn ``MLPClassifier``: one hidden layer of 64 ReLU units, Adam, 300 epochs, seeded from ``rng``."""
    _sklearn()
    from sklearn.neural_network import MLPClassifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MLPClassifier((64,), max_iter=300, random_state=int(rng.integers(2**31))).fit(X, y)


@dataclass(frozen=True)
class DPSGDLogistic:
    """``fit`` by the project's DP-SGD: binary logistic regression calibrated to (ε, δ) under add/remove.

    Full batch with the public normaliser N = ``normalizer`` (default 900, about half the
    digits: a public number), charged to a fresh add/remove ledger per model: one clipped
    summand per step, sensitivity C, ρ = μ²/2 with μ the Gaussian parameter of (ε, δ)
    (audits.bounds.gdp_mu_for_epsilon; mechanisms/optim/dpsgd_plan.py, "Add/remove neighbours
    only"), so each model is exactly μ-GDP when one record is added or removed — the relation
    the membership audit tests. Labels must be 0/1; a bias feature of 1 is appended.
    """

    epsilon: float
    delta: float = 1e-5
    steps: int = 100
    lr: float = 2.0
    clip: float = 1.0
    radius: float = 100.0
    normalizer: float = 900.0
    engine: str = "numpy"

    @property
    def claim(self) -> tuple[float, float]:
        return (self.epsilon, self.delta)

    def __call__(self, X: Any, y: Any, rng: np.random.Generator) -> LinearModel:
        from accounting import ZCDP, Ledger
        from audits.bounds import gdp_mu_for_epsilon
        from mechanisms.optim import DPSGD, BallProjection

        X = np.asarray(X, dtype=float).reshape(len(X), -1)
        y = np.asarray(y, dtype=float)
        rho = gdp_mu_for_epsilon(self.epsilon, self.delta) ** 2 / 2
        cost = ZCDP(rho)
        optimiser = DPSGD(Ledger(cost, relation="add_remove").root, "logistic", rng, clip=self.clip,
                          engine=self.engine)
        features = np.column_stack([X, np.ones(len(X))])
        theta = optimiser.fit(features, y, steps=self.steps, lr=self.lr, projection=BallProjection(self.radius),
                              cost=cost, normalizer=self.normalizer, note="membership audit").value
        weights = np.asarray(theta, dtype=float)
        return LinearModel(weights[:-1].reshape(-1, 1), weights[-1:], np.array([0, 1]))
