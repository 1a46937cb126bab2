"""The base class of every mechanism: charge first, release only what the charge covers, fixed parameters.

A :class:`Mechanism` subclass does two things through this class and nothing else
touches a budget or makes a :class:`~mechanisms.release.Release`:

1. ``receipt = self._charge(cost, releases=k, relation=..., partition=..., note=...)``
   charges its account (``Account.charge``) *before* any noise is drawn and records
   the receipt as granted to **this instance**, covering ``k`` releases (a single
   Gaussian release: 1; a binary tree's one charge: its T prefix sums; a DP-SGD run:
   its one final iterate, whatever its number of steps).
2. ``return self._release(noisy_value, receipt)`` wraps the noisy value. A receipt
   that this instance was not granted (another mechanism's, a hand-built or copied
   ``Receipt``) raises ``TypeError``; a receipt whose releases are used up raises
   ``ValueError``. ``Release(value, receipt)`` called directly raises ``TypeError``.

After construction (the outermost ``__init__`` has returned) a mechanism's public
attributes are read-only: its noise parameters (``sigma``, ``scale``, ``cost``,
``sensitivity``, ``relation``, ``account``, ``horizon``, ``depth``, …) are what its
charge paid for, so ``mechanism.sigma = 1e-9`` raises ``AttributeError``. Public
run state that the mechanism itself advances (e.g. a tree's ``t``) is listed in the
class attribute ``_MUTABLE``; names starting with ``_`` are internal state; a method
may be wrapped on an instance (tests couple two runs that way). Public
array parameters are made read-only too. Copying or pickling a mechanism is refused:
the copy would hold the same charge's noise and grants.

Threat model (docs/mechanisms.md): these checks stop honest mistakes — a stray
assignment, a receipt passed to the wrong mechanism, one receipt reused for many
values, a copied object. They do not stop code in the same process that sets out to
attack (it can call ``object.__setattr__`` or the private ``_release``); no Python
library can, and OpenDP states the same limit for its own. A private capability is
therefore adequate here.
"""

from __future__ import annotations

import abc
import inspect
import weakref
from typing import Any, ClassVar, NoReturn

import numpy as np

from accounting import Chargeable, Cost, Receipt
from accounting.validation import check_int
from mechanisms.release import Release, _mint

__all__ = ["Mechanism"]

_CONSTRUCTED = "_Mechanism__constructed"
_GRANTS = "_Mechanism__grants"
_SPENT = "_Mechanism__spent"
_STOPPED = "_Mechanism__stopped"


class _Constructed(abc.ABCMeta):
    """Marks an instance constructed once the outermost ``__init__`` (a subclass's too) has returned."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        instance = super().__call__(*args, **kwargs)
        if isinstance(instance, Mechanism) and not instance.__dict__.get(_CONSTRUCTED, False):
            for name, value in instance.__dict__.items():
                if isinstance(value, np.ndarray) and instance._is_parameter(name):
                    value.setflags(write=False)
            object.__setattr__(instance, _CONSTRUCTED, True)
        return instance


class Mechanism(metaclass=_Constructed):
    """Base class of a mechanism that charges an account and hands out :class:`~mechanisms.release.Release` values.

    A minimal subclass (the randomized-response count of ``examples/randomized_response.py``)::

        class RandomizedResponseCount(Mechanism):
            def __init__(self, account, p, rng):
                self.account, self.p, self.rng = account, p, rng
                self.cost = PureDP(math.log((1 - p) / p))

            def release(self, bits):
                receipt = self._charge(self.cost, mechanism="RandomizedResponseCount",
                                       relation="replace_one")          # 1. charge, before any draw
                flipped = self.rng.random(len(bits)) < self.p
                count = np.sum(np.where(flipped, 1 - bits, bits))
                return self._release(float(count), receipt)             # 2. wrap what the charge covers

    Class attributes
    ----------------
    _MUTABLE : tuple of str
        Public attributes that are run state the mechanism advances itself (assignable
        after construction). Every other public attribute is read-only then.

    See docs/mechanisms.md for the rules (charge before sampling, the ``partition=``
    keys, the threat model).
    """

    _MUTABLE: ClassVar[tuple[str, ...]] = ()
    #: The account every charge goes to (set by the subclass's ``__init__``; read-only afterwards).
    account: Chargeable

    # -- charging and releasing -------------------------------------------------

    def _charge(self, cost: Cost, *, releases: int = 1, account: Chargeable | None = None, **charge: Any) -> Receipt:
        """Charge ``cost`` to ``account`` (default ``self.account``); the receipt covers ``releases`` releases.

        ``charge`` is passed to ``Account.charge`` (``mechanism``, ``relation``,
        ``partition``, ``note``). Raises ``accounting.BudgetExceeded`` if refused;
        then nothing is recorded, and the caller must not draw noise.
        """
        self._check_running()
        releases = check_int("releases", releases, 1, why="the releases one charge covers")
        payer = self.account if account is None else account
        receipt = payer.charge(cost, **charge)
        grants = self.__dict__.get(_GRANTS)
        if grants is None:
            grants = {}
            object.__setattr__(self, _GRANTS, grants)
        grants[id(receipt)] = [receipt, releases]
        return receipt

    def _release(self, value: Any, receipt: Receipt, *, vouched: bool = False) -> Release:
        """Wrap ``value`` as a :class:`Release` paid for by ``receipt``, one of this instance's granted charges.

        ``vouched=True`` is the subclass's guarantee that ``value`` is a finite float64
        ndarray it computed itself (a tree's noisy prefix sum), checked in bulk where its
        parts were made: the Release's per-value checks are skipped; the receipt check,
        the count and the immutable copy are not.

        Raises
        ------
        TypeError
            If ``receipt`` was not returned by this instance's own :meth:`_charge`.
        ValueError
            If the releases ``receipt`` covers are all made.
        """
        self._check_running()
        grants = self.__dict__.get(_GRANTS, {})
        entry = grants.get(id(receipt))
        if entry is None and self.__dict__.get(_SPENT, {}).get(id(receipt)) is receipt:
            raise ValueError(f"receipt seq={receipt.seq} covers no more releases (all made): charge again")
        if entry is None or entry[0] is not receipt:
            raise TypeError(
                f"receipt was not granted to this {type(self).__name__}'s charge: a Release is made only by the "
                "mechanism instance whose charge paid for it (a receipt of another mechanism, a hand-built or a "
                "copied Receipt is refused)"
            )
        released = _mint(value, receipt, vouched)
        entry[1] -= 1
        if entry[1] == 0:  # forget it; remember it weakly, for the message, while someone holds it
            del grants[id(receipt)]
            spent = self.__dict__.get(_SPENT)
            if spent is None:
                spent = weakref.WeakValueDictionary()
                object.__setattr__(self, _SPENT, spent)
            spent[id(receipt)] = receipt
        return released

    def stop(self, why: str) -> None:
        """Refuse every later charge and release of this instance with ``RuntimeError(why)``.

        A policy's checkpoint stops the mechanisms it saved (docs/service.md, "Checkpoints"):
        their next draws are the restored copy's noise, so this instance must release no more.
        """
        object.__setattr__(self, _STOPPED, str(why))

    def _check_running(self) -> None:
        why = self.__dict__.get(_STOPPED)
        if why is not None:
            raise RuntimeError(why)

    def releases_left(self, receipt: Receipt) -> int:
        """How many more releases ``receipt`` (granted to this instance) covers; 0 if none or not ours."""
        entry = self.__dict__.get(_GRANTS, {}).get(id(receipt))
        return entry[1] if entry is not None and entry[0] is receipt else 0

    # -- read-only parameters ---------------------------------------------------

    @classmethod
    def _is_parameter(cls, name: str) -> bool:
        """A public data attribute that is not run state. Methods may be wrapped on an instance (tests couple
        runs that way); a wrapper cannot make a Release either."""
        if name.startswith("_") or name in cls._MUTABLE:
            return False
        return not inspect.isfunction(getattr(cls, name, None))

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get(_CONSTRUCTED, False) and self._is_parameter(name):
            self._refuse(name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self.__dict__.get(_CONSTRUCTED, False) and self._is_parameter(name):
            self._refuse(name)
        object.__delattr__(self, name)

    def _refuse(self, name: str) -> NoReturn:
        kind = type(self).__name__
        raise AttributeError(
            f"{kind}.{name} is read-only after construction: the charge paid for the parameters given then; "
            f"build a new {kind} (a new charge) to change it"
        )

    # -- no copies ----------------------------------------------------------------

    def __copy__(self) -> NoReturn:
        raise TypeError(f"a {type(self).__name__} cannot be copied: the copy would release again under the same charge")

    def __deepcopy__(self, memo: dict[int, object]) -> NoReturn:
        self.__copy__()

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError(
            f"a {type(self).__name__} cannot be pickled: the copy would release again under the same charge; "
            "build the mechanism where it is used, from its parameters"
        )
