"""What the charged shuffle protocols of :mod:`mechanisms.shuffle` share: the shuffler, argument checks, one charge.

Split from :mod:`mechanisms.shuffle` (which re-exports :func:`shuffle_messages`) along
the seam between the shuffle model's common parts and its two protocols.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from accounting import ApproxDP, Receipt
from accounting.costs import as_fraction
from accounting.validation import check_memory, check_positive, check_probability, check_size
from mechanisms.base import Mechanism
from mechanisms.release import check_account, check_generator

__all__ = ["MAX_MESSAGES", "check_method", "shuffle_messages"]

#: Refuse to build more messages than this on the message-level path (memory guard).
MAX_MESSAGES = 20_000_000
_METHODS = ("counts", "messages")


def check_method(method: str) -> str:
    if not isinstance(method, str) or method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    return method


def _check_relation(relation: str) -> str:
    if relation != "replace_one":
        raise ValueError(
            "relation must be 'replace_one' (the shuffle accountant analyses one user's data replaced), "
            f"got {relation!r}"
        )
    return relation


def _check_budget(epsilon: object, delta: object) -> tuple[float, float]:
    return check_positive("epsilon", epsilon), check_probability("delta", delta)


def _float_at_most(x: float) -> float:
    """The largest float not above the decimal ``x`` prints as (the value the ledger charges)."""
    return x if Fraction(x) <= Fraction(repr(x)) else math.nextafter(x, -math.inf)


class _ChargedShuffleSum(Mechanism):
    """What the charged shuffle protocols share: checked arguments and one charge per release.

    A subclass names itself in ``_MECHANISM`` (recorded with every charge), calls
    :meth:`_open` first in ``__init__``, and in ``release`` calls :meth:`_charge_release`
    before the protocol draws anything from ``rng``.
    """

    _MECHANISM: str

    def _open(self, account: object, n_users: int, rng: np.random.Generator, epsilon: float, delta: float,
              relation: str) -> None:
        self.account = check_account(account, ("approx",), f"{self._MECHANISM} (an ApproxDP(epsilon, delta) cost)")
        self.n_users = check_size("n_users", n_users, 2)
        check_memory("n_users", self.n_users, 64 * self.n_users, "the accountant's distributions over the users")
        self.rng = check_generator(rng)
        self.epsilon, self.delta = _check_budget(epsilon, delta)
        # The ledger charges the decimals ε and δ print as; the accountant certifies the
        # floats it is given. Certify floats at or below those decimals, so the charge is
        # never below what was certified.
        self._certified = (_float_at_most(self.epsilon), _float_at_most(self.delta))
        self.relation = _check_relation(relation)

    @staticmethod
    def _after_charge(check: Callable[[], np.ndarray]) -> np.ndarray:
        """Run ``check`` of the private values once the charge is made: its refusal stays charged.

        The public checks (kind, shape, users) ran before the charge; what ``check`` can
        still refuse depends on the data, and a free refusal would tell the caller about
        it (docs/mechanisms.md, "Refusals that depend on the data").
        """
        try:
            return check()
        except ValueError as error:
            raise ValueError(f"{error} (refused after the charge, which stays spent: the check depends on the data)"
                             ) from None

    def _charge_release(self, partition: str | None, note: str) -> Receipt:
        """Charge ApproxDP(epsilon, delta) for one release (raises ``BudgetExceeded`` before any draw)."""
        return self._charge(
            ApproxDP(as_fraction(self.epsilon, "epsilon"), as_fraction(self.delta, "delta")),
            mechanism=self._MECHANISM,
            relation=self.relation,
            partition=partition,
            note=note,
        )


def shuffle_messages(messages: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The shuffler: a uniformly random permutation of the messages (along the first axis)."""
    rng = check_generator(rng)
    return np.asarray(messages)[rng.permutation(len(messages))]
