"""Moved to :mod:`accounting.journal.errors` (the journal's own room, docs/design.md).

This old path stays so that old imports keep working: it *is* the new module
(the same module object, so every name, and every patch of one, is shared).
"""

import sys

from accounting.journal import errors

sys.modules[__name__] = errors
