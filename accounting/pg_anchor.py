"""Moved to :mod:`accounting.journal.pg_anchor`, now :mod:`accounting.journal.witness` (docs/design.md).

This old path stays so that old imports keep working: it *is* the new module
(the same module object, so every name, and every patch of one, is shared).
"""

import sys

from accounting.journal import pg_anchor

sys.modules[__name__] = pg_anchor
