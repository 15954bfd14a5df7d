"""The PostgreSQL + pgvector backend (the ``postgres`` extra): one database shared by
many processes and machines.

- :mod:`~memorist.store.postgres.store`: :class:`PostgresStore`, the store contract
  over a pool of connections (how each of its rules is kept is told there);
- :mod:`~memorist.store.postgres.schema`: its versioned schema in a PostgreSQL schema
  of its own, and the migrations that bring a database up to it;
- :mod:`~memorist.store.postgres.hnsw`: the HNSW index of each large space, the
  searches that use it, and its lifecycle (built in the background, rows graphed
  once writes pause, replaced after a bulk load);
- :mod:`~memorist.store.postgres.text`: full text: the terms written, BM25 in SQL,
  and the in-process indexes of large spaces.

Importing it without the extra raises a :class:`~memorist.errors.MissingDependencyError`
naming the pip command.
"""

from .hnsw import EF_SEARCH, EXACT_BELOW
from .store import PostgresStore
from .text import full_text, query_terms

__all__ = ["EF_SEARCH", "EXACT_BELOW", "PostgresStore", "full_text", "query_terms"]
