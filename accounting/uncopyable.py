"""Objects that hold a privacy budget refuse to be copied or pickled.

A copy of a :class:`~accounting.ledger.Ledger` or an
:class:`~accounting.ledger.Account` — made by ``copy.copy``,
``copy.deepcopy``, ``pickle`` or anything built on them (joblib, dask,
multiprocessing) — would be a second, independent budget: each copy could
spend what the original can, so together they would overspend it. A fresh,
never-charged ledger is refused too, because nothing stops the original and
its copy both being charged later. See ``docs/threat-model.md``.

Code that needs a budget in another process sends what the budget *is* (a
cost such as ``ApproxDP(1, 1e-5)``, which pickles, and the relation) and
builds ``Ledger(budget, relation=...)`` there; it sends back the report or
``to_json()``, never the ledger.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["Uncopyable"]


class Uncopyable:
    """Mixin: ``copy.copy``, ``copy.deepcopy`` and pickling raise ``TypeError``.

    A subclass names itself in :attr:`_what` (shown in the message).
    """

    __slots__ = ()
    _what = "object"

    def _refuse(self) -> NoReturn:
        raise TypeError(
            f"a {self._what} cannot be copied or pickled (copy.copy, copy.deepcopy, pickle, joblib, dask): each copy "
            "would be a whole new budget that could be spent again. To use a budget in a worker, send its spec — the "
            "budget cost (e.g. ApproxDP(1, 1e-5)) and the relation, which pickle — build Ledger(budget, "
            "relation=...) inside the worker, and send back its report or to_json()"
        )

    def __copy__(self) -> NoReturn:
        self._refuse()

    def __deepcopy__(self, memo: dict[int, Any]) -> NoReturn:
        self._refuse()

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        self._refuse()

    def __reduce__(self) -> NoReturn:
        self._refuse()

    def __getstate__(self) -> NoReturn:
        self._refuse()
