"""accounting: the privacy ledger, the only code that knows what privacy costs.

Public API (see DESIGN.md, accounting/): cost values :class:`PureDP`,
:class:`ApproxDP`, :class:`ZCDP`, :class:`GDP`; the :class:`Ledger` and its
:class:`Account` tree; :class:`BudgetExceeded` and :class:`Receipt`;
conversions in :mod:`accounting.convert`.
"""

from accounting import convert, gdp, rdp
from accounting.costs import GDP, RDP, RELATIONS, ZCDP, ApproxDP, Cost, PureDP
from accounting.journal import JournalBusyError, JournalMismatchError
from accounting.ledger import Account, BudgetExceeded, Ledger, Receipt

__all__ = [
    "GDP",
    "RDP",
    "RELATIONS",
    "ZCDP",
    "Account",
    "ApproxDP",
    "BudgetExceeded",
    "Cost",
    "JournalBusyError",
    "JournalMismatchError",
    "Ledger",
    "PureDP",
    "Receipt",
    "convert",
    "gdp",
    "rdp",
]
