"""PostgreSQL tests: a real server per test process (see ``pg_url`` in tests/conftest.py).

The contract suite (tests/contract/store_contract.py) is imported by name, as the
SQLite contract tests import it: make it importable when only this folder runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_CONTRACT = str(Path(__file__).resolve().parent.parent / "contract")
if _CONTRACT not in sys.path:
    sys.path.insert(0, _CONTRACT)
pytest.register_assert_rewrite("store_contract")
