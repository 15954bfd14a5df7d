"""PostgreSQL tests: a real server per test process (see ``pg_url`` in tests/conftest.py).

The contract suite (tests/contract/store_contract.py) is imported by name, as the
SQLite contract tests import it: make it importable when only this folder runs.
``opened(**options)`` opens the test's database as a :class:`PostgresStore` bound to
the hashing embedder (closed after the test).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memorist import HashingEmbedder

_CONTRACT = str(Path(__file__).resolve().parent.parent / "contract")
if _CONTRACT not in sys.path:
    sys.path.insert(0, _CONTRACT)
pytest.register_assert_rewrite("store_contract")


@pytest.fixture
def opened(pg_url):
    from memorist.store import open_store
    from memorist.store.postgres import PostgresStore

    stores: list[PostgresStore] = []
    embedder = HashingEmbedder()

    def _open(**options) -> PostgresStore:
        store = open_store(pg_url, **options)
        assert isinstance(store, PostgresStore)
        store.bind_embedder(embedder.name, embedder.dim)
        stores.append(store)
        return store

    yield _open
    for s in stores:
        s.close()
