"""accounting: the privacy ledger, the only code that knows what privacy costs.

Public API (see DESIGN.md, accounting/): cost values :class:`PureDP`,
:class:`ApproxDP`, :class:`ZCDP`; the :class:`Ledger` and its
:class:`Account` tree; :class:`BudgetExceeded` and :class:`Receipt`;
conversions in :mod:`accounting.convert`.
"""

from accounting import convert
from accounting.costs import RELATIONS, ApproxDP, Cost, PureDP, ZCDP
from accounting.journal import JournalBusyError, JournalMismatchError
from accounting.ledger import Account, BudgetExceeded, Ledger, Receipt

__all__ = [
    "Account",
    "ApproxDP",
    "BudgetExceeded",
    "Cost",
    "JournalBusyError",
    "JournalMismatchError",
    "Ledger",
    "PureDP",
    "RELATIONS",
    "Receipt",
    "ZCDP",
    "convert",
]
