"""What only the PostgreSQL store does: a real server per test process (see ``pg_url``
in tests/conftest.py); the store contract itself runs on it in tests/store/contract.
``opened(**options)`` opens the test's database as a :class:`PostgresStore` bound to
the hashing embedder (closed after the test).
"""

from __future__ import annotations

import pytest

from memorist import HashingEmbedder


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
