"""The write-ahead log is moved into the database file by a thread, not by writers.

What a user relies on: commits reach the ``.db`` file soon after they return (not
only when the log reaches SQLite's threshold), the thread never holds a store
open after ``close()``, and a store that stops writing stops its thread.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from memorist import HashingEmbedder, Memory
from memorist.store.sqlite import checkpoint as sqlite_checkpoint


def _threads(path: Path) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"memorist-checkpoint {path.name}" and t.is_alive()]


def _rows_in_db_file_alone(db: Path, tmp: Path) -> int:
    """Memories in a copy of the .db without its -wal: what was checkpointed.

    -1 while the copy cannot be read: before the first checkpoint the file holds no
    schema yet, and a copy taken while a checkpoint writes pages may be torn.
    """
    copy = tmp / "copy.db"
    shutil.copyfile(db, copy)
    conn = sqlite3.connect(copy)
    try:
        return conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    except sqlite3.DatabaseError:
        return -1
    finally:
        conn.close()
        copy.unlink()


def _wait(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_a_commit_reaches_the_database_file_without_another_write(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    m = Memory(str(db), embedder=HashingEmbedder())
    try:
        m.add("I like green tea", user_id="u", infer=False)
        # A handful of pages: far below the writer's own checkpoint threshold, so
        # only the thread can have copied them.
        assert _wait(lambda: _rows_in_db_file_alone(db, tmp_path) == 1)
        m.add("I live in Oslo", user_id="u", infer=False)
        assert _wait(lambda: _rows_in_db_file_alone(db, tmp_path) == 2)
    finally:
        m.close()


def test_close_stops_the_thread_and_leaves_no_log(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    m = Memory(str(db), embedder=HashingEmbedder())
    m.add([{"role": "user", "content": f"fact number {i}"} for i in range(200)], user_id="u", infer=False)
    assert _threads(db)
    m.close()
    assert not _threads(db)
    # The last connection's close checkpointed and removed the log: the file alone is whole.
    assert not Path(f"{db}-wal").exists()
    assert _rows_in_db_file_alone(db, tmp_path) == 200


def test_an_idle_store_ends_its_thread_and_a_commit_starts_it_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_checkpoint, "IDLE", 0.1)
    db = tmp_path / "m.db"
    m = Memory(str(db), embedder=HashingEmbedder())
    try:
        m.add("first", user_id="u", infer=False)
        assert _wait(lambda: not _threads(db))
        m.add("second", user_id="u", infer=False)
        assert _wait(lambda: _rows_in_db_file_alone(db, tmp_path) == 2)
        assert m.get_all(user_id="u")["results"]
    finally:
        m.close()


def test_a_reader_holding_a_snapshot_does_not_stall_writers(tmp_path: Path) -> None:
    """PASSIVE checkpoints skip what a reader still needs instead of waiting for it."""
    db = tmp_path / "m.db"
    m = Memory(str(db), embedder=HashingEmbedder())
    reader = sqlite3.connect(db, isolation_level=None)
    try:
        m.add("before the reader", user_id="u", infer=False)
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM memories").fetchone()[0] == 1
        started = time.monotonic()
        for i in range(20):
            m.add(f"while reading {i}", user_id="u", infer=False)
        assert time.monotonic() - started < 10
        # The reader's snapshot is unchanged; the writes are all there for everyone else.
        assert reader.execute("SELECT count(*) FROM memories").fetchone()[0] == 1
        reader.execute("COMMIT")
        assert len(m.get_all(user_id="u")["results"]) == 21
    finally:
        reader.close()
        m.close()
