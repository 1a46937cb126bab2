"""accounting: the privacy ledger, the only code that knows what privacy costs.

Public API (see docs/design.md, accounting/): cost values :class:`PureDP`,
:class:`ApproxDP`, :class:`ZCDP`, :class:`GDP`; the :class:`Ledger` and its
:class:`Account` tree; :class:`BudgetExceeded` and :class:`Receipt`; the
:class:`Chargeable` protocol a mechanism needs of an account (with
:class:`Budgeted`, which also shows its budget, and :class:`EventChargeable`,
which also takes dp-accounting events); the type aliases :data:`Number` (what a
cost field accepts), :data:`Currency`, :data:`Relation` and :data:`PartitionKey`; the
journal's errors (:mod:`accounting.journal`, docs/threat-model.md);
conversions in :mod:`accounting.convert`; noise calibrated to what an account
has left, :func:`calibrate_noise_multiplier` and :func:`calibrate_gaussian_sigma`
(:mod:`accounting.calibrate`).
"""

from accounting import convert, gdp, rdp
from accounting.calibrate import calibrate_gaussian_sigma, calibrate_noise_multiplier
from accounting.chargeable import Budgeted, Chargeable, EventChargeable, PartitionKey
from accounting.costs import GDP, RDP, RELATIONS, ZCDP, ApproxDP, Cost, Number, PureDP, Relation
from accounting.journal import (
    JournalAnchorWarning,
    JournalBusyError,
    JournalCorruptError,
    JournalDiskFullError,
    JournalMismatchError,
    JournalPathError,
    JournalReadOnlyError,
    JournalReplacedError,
    NetworkFilesystemError,
)
from accounting.ledger import Account, BudgetExceeded, Ledger, Receipt
from accounting.spend import CURRENCIES, Currency

__all__ = [
    "CURRENCIES",
    "GDP",
    "RDP",
    "RELATIONS",
    "ZCDP",
    "Account",
    "ApproxDP",
    "BudgetExceeded",
    "Budgeted",
    "Chargeable",
    "Cost",
    "Currency",
    "EventChargeable",
    "JournalAnchorWarning",
    "JournalBusyError",
    "JournalCorruptError",
    "JournalDiskFullError",
    "JournalMismatchError",
    "JournalPathError",
    "JournalReadOnlyError",
    "JournalReplacedError",
    "Ledger",
    "NetworkFilesystemError",
    "Number",
    "PartitionKey",
    "PureDP",
    "Receipt",
    "Relation",
    "calibrate_gaussian_sigma",
    "calibrate_noise_multiplier",
    "convert",
    "gdp",
    "rdp",
]
