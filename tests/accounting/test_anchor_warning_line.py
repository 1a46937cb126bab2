"""A warning about the user's call points at the user's line, not at a line inside the library."""

import os
import warnings

from accounting import Ledger, PureDP
from accounting.journal import JournalAnchorWarning


def _journal_without_anchor(folder) -> str:
    folder.mkdir()
    path = str(folder / "j.db")
    with Ledger(PureDP(1), journal=path) as ledger:
        ledger.charge(PureDP(0.1), mechanism="Laplace")
    os.remove(path + ".anchor")
    return path


def test_the_missing_anchor_warning_points_at_the_line_that_opened_the_journal(tmp_path):
    for number, opener in enumerate((lambda path: Ledger(PureDP(1), journal=path),  # the user's line: this one
                   lambda path: Ledger.from_journal(path),
                   lambda path: Ledger.from_journal(path, read_only=True))):
        path = _journal_without_anchor(tmp_path / str(number))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            opener(path).close()
        (warning,) = [w for w in caught if issubclass(w.category, JournalAnchorWarning)]
        assert warning.filename == __file__
        assert warning.lineno == opener.__code__.co_firstlineno  # the lambda's own line above
