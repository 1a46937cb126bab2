"""Moved to :mod:`accounting.journal.witness`: the client-side anchors of PostgreSQL journals became the host's
witness of every journal, file journals too (issue 30; docs/threat-model.md).

This old path stays so that old imports keep working: it *is* the new module
(the same module object, so every name, and every patch of one, is shared).
"""

import sys

from accounting.journal import witness

sys.modules[__name__] = witness
