"""The store contract on SQLite: a file path, and the same file as a ``sqlite:///`` URL."""

from __future__ import annotations

import pytest
from store_contract import StoreContract


class TestSQLiteContract(StoreContract):
    @pytest.fixture
    def store_target(self, tmp_path):
        return str(tmp_path / "store.db")


class TestSQLiteURLContract(StoreContract):
    @pytest.fixture
    def store_target(self, tmp_path):
        return f"sqlite:///{tmp_path / 'store.db'}"  # an absolute path: sqlite:////tmp/...
