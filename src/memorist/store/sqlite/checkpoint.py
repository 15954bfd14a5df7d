"""The write-ahead log: its checkpoints, taken on a thread of their own, and the
sync that makes each commit durable, taken after the write lock is released.

In WAL mode a commit appends the pages it changed to the ``-wal`` file; a
checkpoint copies them into the database file. SQLite runs one inside the commit
that takes the log past ``wal_autocheckpoint`` pages, so that writer waits for the
copy of everything written since the last one and its fsync. In a large scope the
pages a batch changes lie all over the file (one per row in the content-hash index):
every few batches one of them paid ~100 ms at a million memories (bench/RESULTS.md).

Here a thread checkpoints after commits instead, at most every ``INTERVAL``
seconds, on its own connection and in ``PASSIVE`` mode: it never waits for a lock
and never blocks a reader or a writer; pages a reader still needs stay in the log
for the next pass. The writer's own checkpoint stays as a backstop at
``BACKSTOP_PAGES`` (the thread may fall behind a bulk load on a busy machine).
The thread ends after ``IDLE`` seconds without commits, closing its connection,
and starts again with the next commit, so a store that stopped writing holds none.

The sync: with ``synchronous=FULL`` SQLite fsyncs the log inside every commit,
while it holds the file's one write lock, so every other writer of the file waits
for that disk flush too (about half of a small transaction's time under the lock,
bench/RESULTS.md). Memorist's writer connection runs ``synchronous=NORMAL`` (the log
is synced at checkpoints, never at commit) and :class:`LogSync` syncs the log
itself right after each commit, before the write returns: what FULL adds to
NORMAL, but outside the lock, so writers' syncs overlap and one flush can cover
several processes' commits (the retrieval bookkeeping a search writes every few
dozen searches is the exception: it rides the next sync, see touches.py). A write
that returned is on disk either way; what
changes is that another connection may see a commit a fraction of a millisecond
before it is on disk (a power cut then loses it, as it loses any write that had
not returned). (FULL also pads a commit to a disk sector on file systems that are
not power-safe for overwrites; SQLite's Unix builds assume they are, so NORMAL and
FULL write the same bytes there.) A failed sync is not retried: after it the
kernel may have dropped the log's pages and a later sync succeed anyway, so the
store refuses further writes until it is opened again.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import weakref

logger = logging.getLogger("memorist")

#: Pages the log may hold before the writer checkpoints itself (SQLite's default is
#: 1,000; 4 KiB pages).
BACKSTOP_PAGES = 10_000
INTERVAL = 0.2
IDLE = 5.0


class Checkpointer:
    """Checkpoints one database file after its commits (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._wake = threading.Condition()
        self._pending = False
        self._closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        _ALL.add(self)

    def _forget(self) -> None:
        # A forked child has no thread; the parent's connection is the parent's.
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._thread = None
        self._pending = False

    def committed(self) -> None:
        """Called after a commit: a checkpoint is due within ``INTERVAL``."""
        with self._wake:
            if self._closed:
                return
            self._pending = True
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=f"memorist-checkpoint {os.path.basename(self.path)}", daemon=True)
                self._thread.start()
            else:
                self._wake.notify()

    def close(self) -> None:
        """Stop the thread (after the pass it may be running); idempotent."""
        with self._wake:
            self._closed = True
            self._stop.set()
            self._wake.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                with self._wake:
                    if not self._pending and not self._closed:
                        self._wake.wait(IDLE)
                    if self._closed or not self._pending:
                        # Closed, or idle: the thread ends; a commit starts another.
                        self._thread = None if self._thread is threading.current_thread() else self._thread
                        return
                    self._pending = False
                if conn is None:
                    conn = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                self._stop.wait(INTERVAL)  # commits meanwhile wait for the next pass
        except sqlite3.Error as exc:
            # The writer's own checkpoint still bounds the log: nothing is lost.
            logger.debug("memorist: background checkpoint of %s stopped: %s", self.path, exc)
        finally:
            if conn is not None:
                conn.close()


class LogSync:
    """Syncs a database's ``-wal`` file after commits (see the module docstring).

    ``database`` is the file SQLite itself opened (``PRAGMA database_list``: symlinks
    resolved, an absolute path), so the log synced is the one its commits went to,
    whatever the path the store was opened by or the working directory since. The
    log is opened once: while the store's connection is open SQLite never replaces
    it. Called under the store's lock.
    """

    def __init__(self, database: str) -> None:
        self.path = f"{database}-wal"
        self._fd: int | None = None

    def sync(self) -> None:
        """Flush the log to disk; raises OSError when it cannot be."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR)
        _flush(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# What SQLite's own sync uses on Linux: the data and what reading it back needs.
_flush = getattr(os, "fdatasync", os.fsync)

_ALL: weakref.WeakSet[Checkpointer] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for checkpointer in list(_ALL):
        checkpointer._forget()


os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["BACKSTOP_PAGES", "Checkpointer", "LogSync"]
