"""Every write's log is on disk before the write returns, synced outside the write lock.

What a user relies on: a write that returned survives a power cut (its ``-wal`` was
flushed after the commit and before the call returned), a flush that fails is an
error that says so and loses nothing already committed, and the sync follows the
log when SQLite removes it and makes a new one.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import pytest

from engram import HashingEmbedder, Memory, StoreError
from engram.store import sqlite_checkpoint


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@pytest.fixture
def flushes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every flush: the file flushed and the memories committed in it by then."""
    seen: list[tuple[str, int]] = []
    real = sqlite_checkpoint._flush

    def recording(fd: int) -> None:
        path = _fd_path(fd)
        db = path.removesuffix("-wal")
        # Another connection reads what is committed: the flush comes after the commit.
        with sqlite3.connect(db) as conn:
            committed = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        seen.append((path, committed))
        real(fd)

    monkeypatch.setattr(sqlite_checkpoint, "_flush", recording)
    return seen


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names open files through /proc")
def test_each_write_flushes_its_log_after_the_commit_and_before_returning(tmp_path: Path, flushes: list[tuple[str, int]]) -> None:
    db = tmp_path / "m.db"
    with Memory(str(db), embedder=HashingEmbedder()) as m:
        start = len(flushes)
        m.add("I like green tea", user_id="u", infer=False)
        assert flushes[start:] == [(f"{db}-wal", 1)]
        m.add("I live in Oslo", user_id="u", infer=False)
        m.add([{"role": "user", "content": f"fact {i}"} for i in range(5)], user_id="u", infer=False)
        assert [n for _, n in flushes[start:]] == [1, 2, 7]
        memory_id = m.get_all(user_id="u")["results"][0]["id"]
        m.delete(memory_id, user_id="u")
        assert len(flushes) == start + 4


def test_the_writer_leaves_the_commit_sync_to_engram(tmp_path: Path) -> None:
    """SQLite's own sync at commit would run under the write lock (FULL is 2)."""
    with Memory(str(tmp_path / "m.db"), embedder=HashingEmbedder()) as m:
        assert m.store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # type: ignore[attr-defined]


def test_an_in_memory_store_keeps_sqlites_own_sync() -> None:
    with Memory(":memory:", embedder=HashingEmbedder()) as m:
        m.add("I like green tea", user_id="u", infer=False)
        assert m.get_all(user_id="u")["results"]


def test_a_failed_flush_is_a_store_error_and_keeps_what_was_committed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.db"
    with Memory(str(db), embedder=HashingEmbedder()) as m:
        m.add("I like green tea", user_id="u", infer=False)

        def failing(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(sqlite_checkpoint, "_flush", failing)
        with pytest.raises(StoreError, match="could not be flushed to disk"):
            m.add("I live in Oslo", user_id="u", infer=False)
        monkeypatch.undo()
        # The store keeps working, and the commit it could not flush is there.
        m.add("I work as a nurse", user_id="u", infer=False)
    with Memory(str(db), embedder=HashingEmbedder()) as m:
        assert sorted(r["memory"] for r in m.get_all(user_id="u")["results"]) == ["I like green tea", "I live in Oslo", "I work as a nurse"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names open files through /proc")
def test_the_sync_follows_a_log_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the log file was replaced (removed and made again) since the last sync, the
    new file is flushed, not the old one still held open."""
    flushed: list[int] = []
    monkeypatch.setattr(sqlite_checkpoint, "_flush", lambda fd: flushed.append(os.fstat(fd).st_ino))
    db = tmp_path / "m.db"
    wal = Path(f"{db}-wal")
    wal.write_bytes(b"")
    sync = sqlite_checkpoint.LogSync(str(db))
    try:
        sync.sync()
        old = os.stat(wal).st_ino
        wal.rename(tmp_path / "old-wal")  # the old inode stays alive under another name
        wal.write_bytes(b"")
        assert os.stat(wal).st_ino != old
        sync.sync()
        assert flushed == [old, os.stat(wal).st_ino]
        with pytest.raises(FileNotFoundError):
            wal.unlink()
            sync.sync()
    finally:
        sync.close()
