"""The journal's room (accounting/journal/): the old module paths are the same modules under their old names."""

import importlib

import pytest

import accounting
import accounting.journal

MOVED = {
    "accounting.journal_rows": "accounting.journal.rows",
    "accounting.journal_errors": "accounting.journal.errors",
    "accounting.anchor": "accounting.journal.anchor",
    "accounting.sidelock": "accounting.journal.sidelock",
    "accounting.store": "accounting.journal.store",
    "accounting.persistence": "accounting.journal.persistence",
    "accounting.pg_anchor": "accounting.journal.witness",
    "accounting._pgserver": "accounting.journal._pgserver",
}

# what the single module accounting/journal.py exported before the move
OLD_JOURNAL_EXPORTS = [
    "FORMAT",
    "Journal",
    "JournalAnchorWarning",
    "JournalBusyError",
    "JournalCorruptError",
    "JournalDiskFullError",
    "JournalMismatchError",
    "JournalPathError",
    "JournalReadOnlyError",
    "JournalReplacedError",
    "NetworkFilesystemError",
]


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_path_is_the_new_module(old, new):
    moved = importlib.import_module(new)
    assert importlib.import_module(old) is moved
    # `import accounting.X` binds the attribute the old code reads
    assert getattr(accounting, old.rpartition(".")[2]) is moved


def test_the_postgres_journal_keeps_its_old_path():
    pytest.importorskip("psycopg")
    moved = importlib.import_module("accounting.journal.postgres")
    assert importlib.import_module("accounting.postgres_journal") is moved


def test_the_journal_package_exports_what_the_module_did():
    from accounting.journal import errors, rows, sqlite

    assert sorted(accounting.journal.__all__) == sorted(OLD_JOURNAL_EXPORTS)
    assert accounting.journal.Journal is sqlite.Journal
    assert accounting.journal.FORMAT is rows.FORMAT
    for name in OLD_JOURNAL_EXPORTS:
        if name.endswith(("Error", "Warning")):
            assert getattr(accounting.journal, name) is getattr(errors, name) is getattr(accounting, name)


def test_a_patch_through_an_old_path_reaches_the_code(monkeypatch):
    import accounting.journal.sidelock as sidelock

    monkeypatch.setattr("accounting.sidelock.filesystem_type", lambda path: "planted")
    assert sidelock.filesystem_type("/") == "planted"
