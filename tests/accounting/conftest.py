"""Fixtures of the accounting tests: the shared slow references in ``reference.py``.

Tests run with ``--import-mode=importlib`` (no package ``tests``), so the module is
loaded from its path once and handed out as fixtures.
"""

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("accounting_test_reference", Path(__file__).with_name("reference.py"))
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)


@pytest.fixture(scope="session")
def cks_by_dense_grid():
    """:func:`reference.cks_by_dense_grid`: CKS ε minimised over a dense grid of real orders."""
    return reference.cks_by_dense_grid
