"""The only thing a mechanism hands out: a read-only noisy value plus the receipt of its charge.

Policies decide only from ``Release`` values (docs/design.md, mechanisms/), so a release
must not be mutable after the fact, nor forgeable: the array is copied into an
immutable ``bytes`` buffer (numpy refuses to make an array over it writeable
again, through the value or through its ``base``), the dataclass is frozen,
and a release is made only by the mechanism instance whose charge was granted
(:meth:`mechanisms.base.Mechanism._release`, which holds the private capability
this module checks): ``Release(value, receipt)`` from user code, a
``dataclasses.replace`` of a release and unpickling are refused with
``TypeError``. Threat model in docs/mechanisms.md.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from accounting import RELATIONS, Chargeable, Receipt
from accounting.costs import check_relation  # re-exported: the one check of a neighbouring relation
from accounting.validation import check_generator, check_positive  # re-exported: the shared checks

__all__ = ["RELATIONS", "Release", "check_account", "check_generator", "check_positive", "check_relation"]


#: The capability to make a Release; only :mod:`mechanisms.base` uses it (through :func:`_mint`).
_CAPABILITY = object()


def _mint(value: npt.NDArray[Any] | float, receipt: Receipt, vouched: bool = False) -> Release:
    """Make a Release; called only by ``Mechanism._release`` after it checked the receipt is its own.

    ``vouched``: the mechanism guarantees ``value`` is a finite float64 array it computed
    itself (a continual release: sums of checked elements and lattice noise), so the
    per-value checks of ``Release.__post_init__`` are skipped. The value is still copied
    into an immutable buffer, and the receipt was still checked and counted by the caller.
    """
    if vouched:
        release = object.__new__(Release)
        frozen = np.ndarray(value.shape, np.float64, value.tobytes())  # type: ignore[union-attr]  # over bytes
        object.__setattr__(release, "value", frozen)
        object.__setattr__(release, "receipt", receipt)
        return release
    return Release(value, receipt, _CAPABILITY)


@dataclass(frozen=True)
class Release:
    """A noisy value released by a mechanism, with the receipt of the charge that paid for it.

    Made only by the mechanism whose charge paid for it
    (:meth:`mechanisms.base.Mechanism._release`); calling ``Release(value, receipt)``
    raises ``TypeError``. Copies (``copy.copy``, ``copy.deepcopy``) are the release
    itself (it is immutable); pickling is refused (pickle ``release.value`` instead).

    Parameters
    ----------
    value : numpy.ndarray or float
        The released value. An array is copied into an immutable ``bytes``
        buffer and exposed as a read-only float array over it:
        ``value.setflags(write=True)`` (or on its ``base``) raises ``ValueError``,
        so neither the caller nor the mechanism can alter it afterwards; a Python
        or numpy scalar is stored as ``float``.
    receipt : accounting.Receipt
        The receipt returned by ``Account.charge`` for this release (for a
        continual-release mechanism, the one charge made for the whole horizon).
        Anything else is refused: a release without a granted charge is a forgery.

    Raises
    ------
    TypeError
        If not made by a mechanism, if ``value`` is neither a real array nor a real
        scalar, or ``receipt`` is not an ``accounting.Receipt``.
    ValueError
        If ``value`` contains NaN or infinity.
    """

    value: npt.NDArray[np.float64] | float
    receipt: Receipt
    _capability: InitVar[object] = None

    def __post_init__(self, _capability: object) -> None:
        if _capability is not _CAPABILITY:
            raise TypeError(
                "a Release is made only by the mechanism whose charge paid for it (Mechanism._release), "
                "not by Release(value, receipt): see docs/mechanisms.md"
            )
        if not isinstance(self.receipt, Receipt):
            raise TypeError(
                "receipt must be the accounting.Receipt returned by Account.charge, "
                f"got {type(self.receipt).__name__}"
            )
        value = self.value
        if isinstance(value, (bool, np.bool_)):
            raise TypeError("value must be a real number or a real array, got a bool")
        if isinstance(value, np.ndarray):
            if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)):
                raise TypeError(f"value must be a real array, got dtype {value.dtype}")
            if value.ndim == 0:
                value = value.item()
            else:
                copied = np.array(value, dtype=float, copy=True)
                if not np.all(np.isfinite(copied)):
                    raise ValueError("value must be finite (no NaN or infinity)")
                frozen = np.frombuffer(copied.tobytes(), dtype=float).reshape(copied.shape)
                object.__setattr__(self, "value", frozen)
                return
        if not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"value must be a real number or a numpy array, got {type(value).__name__}")
        scalar = float(value)
        if not np.isfinite(scalar):
            raise ValueError("value must be finite (no NaN or infinity)")
        object.__setattr__(self, "value", scalar)

    def __copy__(self) -> Release:
        """A release is immutable: its copy is itself."""
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Release:
        return self

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError(
            "a Release cannot be pickled: only the mechanism whose charge paid for it makes one; "
            "pickle release.value (and the receipt's fields) instead"
        )


def check_account(account: object, currencies: tuple[str, ...], user: str) -> Chargeable:
    """Return ``account`` if it is an :class:`accounting.Chargeable` in one of ``currencies``.

    Structural on purpose (``Chargeable`` is a protocol): views that forward to an
    ``accounting.Account`` (e.g. one fixing a partition key) are accepted; what matters
    is that a charge reaches a ledger and that the ledger can take the mechanism's cost
    in that currency.

    Parameters
    ----------
    account : accounting.Account
    currencies : tuple of str
        Currencies that can pay the mechanism's cost (``"pure"``, ``"approx"``, ``"zcdp"``).
    user : str
        The mechanism, for the message.

    Raises
    ------
    TypeError
        If ``account`` is not ``Chargeable`` (``charge`` and ``currency``) or its
        ``currency`` is not allowed;
        the message names ``account`` and the allowed currencies.
    """
    if not isinstance(account, Chargeable) or not callable(account.charge):
        raise TypeError(f"account must be an accounting.Account (with a charge method), got {type(account).__name__}")
    currency = account.currency
    if currency not in currencies:
        allowed = " or ".join(repr(c) for c in currencies)
        raise TypeError(f"account must charge in currency {allowed} for {user}, got currency {currency!r}")
    return account
