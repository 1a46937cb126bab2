"""The only thing a mechanism hands out: a read-only noisy value plus the receipt of its charge.

Policies decide only from ``Release`` values (DESIGN.md, mechanisms/), so a release
must not be mutable after the fact: the array is copied and frozen, and the
dataclass itself is frozen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from accounting import RELATIONS

__all__ = ["Release", "RELATIONS", "check_generator", "check_positive", "check_relation"]


@dataclass(frozen=True)
class Release:
    """A noisy value released by a mechanism, with the receipt of the charge that paid for it.

    Parameters
    ----------
    value : numpy.ndarray or float
        The released value. An array is copied into a new float array whose
        ``writeable`` flag is cleared, so neither the caller nor the mechanism can
        alter it afterwards; a Python or numpy scalar is stored as ``float``.
    receipt : accounting.Receipt
        The receipt returned by ``Account.charge`` for this release (for a
        continual-release mechanism, the one charge made for the whole horizon).

    Raises
    ------
    TypeError
        If ``value`` is neither a real array nor a real scalar, or ``receipt`` is None.
    ValueError
        If ``value`` contains NaN or infinity.
    """

    value: np.ndarray | float
    receipt: Any

    def __post_init__(self) -> None:
        if self.receipt is None:
            raise TypeError("receipt must be the accounting Receipt of the charge, got None")
        value = self.value
        if isinstance(value, (bool, np.bool_)):
            raise TypeError("value must be a real number or a real array, got a bool")
        if isinstance(value, np.ndarray):
            if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)):
                raise TypeError(f"value must be a real array, got dtype {value.dtype}")
            if value.ndim == 0:
                value = value.item()
            else:
                frozen = np.array(value, dtype=float, copy=True)
                if not np.all(np.isfinite(frozen)):
                    raise ValueError("value must be finite (no NaN or infinity)")
                frozen.setflags(write=False)
                object.__setattr__(self, "value", frozen)
                return
        if not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"value must be a real number or a numpy array, got {type(value).__name__}")
        scalar = float(value)
        if not np.isfinite(scalar):
            raise ValueError("value must be finite (no NaN or infinity)")
        object.__setattr__(self, "value", scalar)



def check_relation(relation: str) -> str:
    """Return ``relation`` if it is a neighbouring relation this project knows.

    ``"replace_one"`` (the project default): neighbouring data sets differ by one
    user's data replaced; ``"add_remove"``: by one user's data added or removed.

    Raises
    ------
    ValueError
        If ``relation`` is not one of ``"replace_one"``, ``"add_remove"``.
    """
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
    return relation


def check_generator(rng: object) -> np.random.Generator:
    """Return ``rng`` if it is an explicit ``numpy.random.Generator`` (never global state).

    Raises
    ------
    TypeError
        If ``rng`` is not a ``numpy.random.Generator``.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def check_positive(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite real number > 0.

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        If ``value`` is not finite or not > 0; the message names ``name``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    number = float(value)
    if not np.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number
