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

from memorist import HashingEmbedder, Memory, StoreError
from memorist.store.sqlite import checkpoint as sqlite_checkpoint


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


def test_the_writer_leaves_the_commit_sync_to_memorist(tmp_path: Path) -> None:
    """SQLite's own sync at commit would run under the write lock (FULL is 2)."""
    with Memory(str(tmp_path / "m.db"), embedder=HashingEmbedder()) as m:
        assert m.store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # type: ignore[attr-defined]


def test_an_in_memory_store_keeps_sqlites_own_sync() -> None:
    with Memory(":memory:", embedder=HashingEmbedder()) as m:
        m.add("I like green tea", user_id="u", infer=False)
        assert m.get_all(user_id="u")["results"]


def test_a_failed_flush_is_a_store_error_and_keeps_what_was_committed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit stands; the store then refuses writes (after a failed sync the
    kernel may have dropped the log's pages, and a later sync succeed regardless)
    until it is opened again, and reads go on."""
    db = tmp_path / "m.db"
    with Memory(str(db), embedder=HashingEmbedder()) as m:
        m.add("I like green tea", user_id="u", infer=False)
        m.search("tea", user_id="u")  # a retrieval to record with the next write

        def failing(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(sqlite_checkpoint, "_flush", failing)
        with pytest.raises(StoreError, match="committed but its log could not be flushed"):
            m.add("I live in Oslo", user_id="u", infer=False)
        monkeypatch.undo()
        with pytest.raises(StoreError, match="open it again"):
            m.add("I work as a nurse", user_id="u", infer=False)
        assert sorted(r["memory"] for r in m.get_all(user_id="u")["results"]) == ["I like green tea", "I live in Oslo"]
        retrievals = [e for e in m.events(user_id="u") if e["event"] == "RETRIEVE"]
        assert len(retrievals) == 1  # written by the write whose flush failed
        m.search("tea", user_id="u")  # buffered now; closing does not fail for it
    with Memory(str(db), embedder=HashingEmbedder()) as m:
        m.add("I work as a nurse", user_id="u", infer=False)
        assert sorted(r["memory"] for r in m.get_all(user_id="u")["results"]) == ["I like green tea", "I live in Oslo", "I work as a nurse"]
        # The bookkeeping the failed write committed was not written again.
        assert [e for e in m.events(user_id="u") if e["event"] == "RETRIEVE"] == retrievals


@pytest.mark.skipif(not hasattr(os, "symlink") or not os.path.isdir("/proc/self/fd"), reason="symlinks; names open files through /proc")
def test_the_log_synced_is_the_one_sqlite_writes_whatever_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flushes: list[tuple[str, int]]) -> None:
    """A store opened through a symlink, or by a relative path before the working
    directory changes, syncs the log SQLite writes (next to the real file)."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link.db").symlink_to(real / "m.db")
    with Memory(str(tmp_path / "link.db"), embedder=HashingEmbedder()) as m:
        start = len(flushes)
        m.add("I like green tea", user_id="u", infer=False)
        assert flushes[start:] == [(str(real / "m.db-wal"), 1)]
    monkeypatch.chdir(real)
    with Memory("m.db", embedder=HashingEmbedder()) as m:
        monkeypatch.chdir(tmp_path)  # elsewhere, with no store of that name
        start = len(flushes)
        m.add("I live in Oslo", user_id="u", infer=False)
        assert flushes[start:] == [(str(real / "m.db-wal"), 2)]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names open files through /proc")
def test_searches_never_wait_for_the_disk_and_their_bookkeeping_rides_the_next_sync(
    tmp_path: Path, flushes: list[tuple[str, int]]
) -> None:
    """Retrieval bookkeeping is buffered (a crash loses what is not written yet), so the
    write a search makes every few dozen searches is not synced: that search would wait
    for whatever the disk is flushing (a second, right after a bulk load). The next
    write's sync puts it on disk, and an explicit flush() syncs at once."""
    from memorist.store.touches import FLUSH_EVERY

    db = tmp_path / "m.db"
    with Memory(str(db), embedder=HashingEmbedder()) as m:
        m.add("I like green tea", user_id="u", infer=False)
        start = len(flushes)
        for _ in range(3 * FLUSH_EVERY):
            m.search("tea", user_id="u")
        assert flushes[start:] == []
        with sqlite3.connect(db) as conn:  # written (committed), though not synced yet
            committed = conn.execute("SELECT count(*) FROM events WHERE op = 'retrieve'").fetchone()[0]
        assert committed == 3 * FLUSH_EVERY
        m.add("I live in Oslo", user_id="u", infer=False)
        assert [n for _, n in flushes[start:]] == [2]
        m.search("tea", user_id="u")
        m.store.flush()
        assert len(flushes) == start + 2
    with Memory(str(db), embedder=HashingEmbedder()) as m:
        assert len([e for e in m.events(user_id="u") if e["event"] == "RETRIEVE"]) == 3 * FLUSH_EVERY + 1
