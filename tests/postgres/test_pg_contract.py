"""The store contract on PostgreSQL: a fresh database per test, opened by URL."""

from __future__ import annotations

import pytest
from store_contract import StoreContract


class TestPostgresContract(StoreContract):
    @pytest.fixture
    def store_target(self, pg_url):
        return pg_url
