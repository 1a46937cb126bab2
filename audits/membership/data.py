"""Records to audit on, none downloaded: scikit-learn's bundled sets, generated data, or a ``.npz`` file.

* ``digits`` — scikit-learn's 8×8 handwritten digits (1797 rows, 64 pixels scaled to
  [0, 1] by the public maximum 16, 10 classes); ``digits-binary``: the same, label
  "digit ≥ 5" (for the binary DP-SGD models);
* ``breast-cancer`` — the Wisconsin breast-cancer set (569 rows, 30 features
  standardised once over the whole set, 2 classes);
* ``generated`` — a seeded linear-logistic task (400 rows, 20 Gaussian features), numpy only;
* ``PATH.npz`` — the arrays ``X`` and ``y`` of a file of the user's own.

The preprocessing is fixed before any mask is drawn, so it is the same for every model
and no part of the audited training procedure.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["DATASETS", "generated", "load"]

DATASETS = ("digits", "digits-binary", "breast-cancer", "generated")


def generated(rows: int = 400, features: int = 20, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A linear-logistic task: x ~ N(0, I_d), P[y = 1 | x] = expit(x·w), w ~ N(0, I_d/d), from ``seed``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features))
    w = rng.standard_normal(features) / np.sqrt(features)
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-X @ w))).astype(int)
    return X, y


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of a set named in :data:`DATASETS` or a ``.npz`` path; one-line errors naming ``--data``."""
    if name.endswith(".npz"):
        if not os.path.isfile(name):
            raise ValueError(f"--data: no file {name!r}")
        with np.load(name, allow_pickle=False) as saved:
            if "X" not in saved or "y" not in saved:
                raise ValueError(f"--data: {name} must hold arrays named X and y, has {sorted(saved.files)}")
            return np.asarray(saved["X"]), np.asarray(saved["y"])
    if name == "generated":
        return generated()
    if name not in DATASETS:
        raise ValueError(f"--data must be one of {', '.join(DATASETS)} or a PATH.npz, got {name!r}")
    try:
        from sklearn import datasets
    except ImportError:
        raise ImportError(f'--data {name} needs scikit-learn: pip install "dpglm[membership]"') from None
    if name.startswith("digits"):
        X, y = datasets.load_digits(return_X_y=True)
        return X / 16.0, (y >= 5).astype(int) if name == "digits-binary" else y
    X, y = datasets.load_breast_cancer(return_X_y=True)
    return (X - X.mean(axis=0)) / X.std(axis=0), y
