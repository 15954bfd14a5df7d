"""The store contract on PostgreSQL: a fresh database per test, opened by URL; once
as configured by default (small spaces ranked by BM25 in SQL) and once with every
space ranked by its in-process full-text index (memorist.store.postgres.text)."""

from __future__ import annotations

import pytest
from store_contract import StoreContract


class TestPostgresContract(StoreContract):
    @pytest.fixture
    def store_target(self, pg_url):
        return pg_url


class TestPostgresInProcessTextContract(StoreContract):
    @pytest.fixture
    def store_target(self, pg_url):
        return pg_url + ("&" if "?" in pg_url else "?") + "text_index_above=1"
