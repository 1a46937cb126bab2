"""Objects that hold a privacy budget refuse to be copied or pickled.

A copy of a :class:`~accounting.ledger.Ledger` or an
:class:`~accounting.ledger.Account` — made by ``copy.copy``,
``copy.deepcopy``, ``pickle`` or anything built on them (joblib, dask,
multiprocessing) — would be a second, independent budget: each copy could
spend what the original can, so together they would overspend it. A fresh,
never-charged ledger is refused too, because nothing stops the original and
its copy both being charged later. See ``docs/threat-model.md``.

Code that needs the budget in another process sends what the budget *is* (a
cost such as ``ApproxDP(1, 1e-5)``, which pickles, the relation, and the
journal's path or URL) and opens the same journal there:
``Ledger(budget, journal="run.db" or "postgresql://...", relation=...)``; every
ledger on that journal charges the one budget (docs/accounting.md, "The file
journal: one budget, many processes"). Without ``journal=`` a worker's ledger
is a fresh, full budget of its own: right only for a worker given its own
share (a budget the parent no longer spends), never for sharing one.
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
            "would be a whole new budget that could be spent again. To share one budget with workers, send its spec "
            "(the budget cost, e.g. ApproxDP(1, 1e-5), the relation and the journal path or URL, which pickle) and "
            "build Ledger(budget, journal=PATH_OR_URL, relation=...) inside each worker: every ledger on that journal "
            "charges the same budget. Without journal= each worker would get a fresh, full budget of its own"
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
