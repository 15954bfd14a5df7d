"""The embedded SQLite backend, the default store: one file, WAL, real transactions.

- :mod:`~memorist.store.sqlite.store`: :class:`SQLiteStore`, the store contract over
  one file;
- :mod:`~memorist.store.sqlite.schema`: its versioned schema and the migrations that
  bring a file up to it;
- :mod:`~memorist.store.sqlite.index`: the in-process index of each space (vectors
  and BM25), kept current from the event log;
- :mod:`~memorist.store.sqlite.checkpoint`: the write-ahead log's checkpoints, and the
  sync that makes each commit durable;
- :mod:`~memorist.store.sqlite.errors`: what a SQLite failure means, and how long to
  wait for another writer;
- :mod:`~memorist.store.sqlite.check`: ``memorist check`` and ``memorist backup``, on
  the file itself.
"""

from .store import SQLiteStore

__all__ = ["SQLiteStore"]
