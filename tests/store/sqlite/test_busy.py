"""Lock contention: the busy timeout is a setting, and imports wait, retry and stay whole.

Issue 10, item 9: 3 of 8 concurrent 20,000-message imports failed with
``StoreError: database is locked`` after about 14 s. The store waited a fixed 10 s
for the write lock (SQLite's busy handler, which under steady contention lets a
waiting writer starve while the others take turns), ignored ``busy_timeout``, and
the importer answered a locked batch by replaying it line by line (one transaction
per line, the first of which failed the same way, reported as a bad line).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memorist import ImportLineError, Memory, MemoryConfig, StoreError
from memorist.pipelines import transfer
from memorist.store.sqlite import SQLiteStore


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def test_busy_timeout_is_the_configured_one(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    Memory(str(path), embedder="hashing").close()
    m = Memory(config=MemoryConfig(path=str(path), embedder="hashing", busy_timeout=0.3))
    hog = _hold_write_lock(path)
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match="busy timeout"):
            m.add("I like tea", user_id="u", infer=False)
        waited = time.monotonic() - started
    finally:
        hog.rollback()
        hog.close()
    assert 0.25 <= waited < 2.5  # not SQLite's old fixed 10 s
    assert m.add("I like tea", user_id="u", infer=False)["results"]  # the lock is free again
    m.close()


def test_busy_timeout_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MemoryConfig().resolved().busy_timeout == 30.0
    monkeypatch.setenv("MEMORIST_BUSY_TIMEOUT", "2.5")
    assert MemoryConfig().resolved().busy_timeout == 2.5
    assert MemoryConfig(busy_timeout=7).resolved().busy_timeout == 7.0  # the argument wins
    m = Memory(":memory:", embedder="hashing")
    assert m.store.busy_timeout == 2.5
    m.close()


def _lines(user: str, n: int) -> list[str]:
    return [json.dumps({"messages": [{"role": "user", "content": f"{user} says line {i}"}], "user_id": user}) for i in range(n)]


def _turns(m: Memory, user: str) -> int:
    return sum(1 for e in m.events(user_id=user) if e["event"] == "TURN")


def _lock_failures(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[int]:
    """The next ``failures`` write transactions find the store locked (as if another
    process held it past the busy timeout); returns the running count of attempts."""
    attempts = [0]
    real = SQLiteStore._write

    def write(self: SQLiteStore):  # type: ignore[no-untyped-def]
        attempts[0] += 1
        if attempts[0] <= failures:
            raise sqlite3.OperationalError("database is locked")
        return real(self)

    monkeypatch.setattr(SQLiteStore, "_write", write)
    return attempts


def test_a_locked_import_batch_is_retried_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = Memory(str(tmp_path / "s.db"), embedder="hashing")
    lines = _lines("u", 1200)  # three batches: 500, 500, 200
    attempts = _lock_failures(monkeypatch, 2)
    summary = m.import_(lines, infer=False)
    assert summary["added"] == 1200
    assert summary["calls"] == 3
    assert attempts[0] == 3 + 2  # each batch one transaction; the locked one twice more
    # Batches were written whole, not replayed line by line.
    assert _turns(m, "u") == 3
    assert len(m.get_all(user_id="u", limit=5000)["results"]) == 1200
    m.close()


def test_exported_memories_are_retried_whole_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = Memory(str(tmp_path / "a.db"), embedder="hashing")
    source.add([{"role": "user", "content": f"Fact {i}"} for i in range(700)], user_id="u", infer=False)
    exported = list(source.export(user_id="u"))
    source.close()
    m = Memory(str(tmp_path / "b.db"), embedder="hashing")
    _lock_failures(monkeypatch, 2)
    assert m.import_(exported)["added"] == 700
    assert len(m.get_all(user_id="u", limit=5000)["results"]) == 700
    m.close()


def test_an_import_that_stays_locked_stops_with_a_store_error_keeping_whole_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = Memory(str(tmp_path / "s.db"), embedder="hashing")
    real = SQLiteStore._write
    calls = [0]

    def write(self: SQLiteStore):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] > 1:  # the first batch goes through, then the store stays locked
            raise sqlite3.OperationalError("database is locked")
        return real(self)

    monkeypatch.setattr(SQLiteStore, "_write", write)
    monkeypatch.setattr(transfer, "IMPORT_BUSY_ATTEMPTS", 2)
    with pytest.raises(StoreError, match="locked") as info:
        m.import_(_lines("u", 1200), infer=False)
    assert not isinstance(info.value, ImportLineError)  # no line is bad
    assert "500 added" in str(info.value)
    monkeypatch.setattr(SQLiteStore, "_write", real)
    assert len(m.get_all(user_id="u", limit=5000)["results"]) == 500  # the first batch, whole
    assert _turns(m, "u") == 1
    m.close()


def test_concurrent_imports_into_a_new_store_all_succeed(tmp_path: Path) -> None:
    """Four ``memorist import`` processes into one new store, held locked for longer
    than the old fixed 10 s timeout by another connection when they start; they
    create the store together (one migrates it), wait, and import in whole batches."""
    db = tmp_path / "shared.db"
    n = 2000
    files = []
    for p in range(4):
        f = tmp_path / f"in{p}.jsonl"
        f.write_text("\n".join(_lines(f"user{p}", n)) + "\n")
        files.append(f)
    hog = _hold_write_lock(db)  # an empty file, locked
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "memorist", "--db", str(db), "--embedder", "hashing", "--json", "import", "--no-infer", str(f)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for f in files
    ]
    try:
        time.sleep(11)
    finally:
        hog.rollback()
        hog.close()
    outputs = [proc.communicate(timeout=300) for proc in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert json.loads(out)["added"] == n
    m = Memory(str(db), embedder="hashing")
    for p in range(4):
        texts = {r["memory"] for r in m.get_all(user_id=f"user{p}", limit=10_000)["results"]}
        assert texts == {f"user{p} says line {i}" for i in range(n)}
        assert _turns(m, f"user{p}") == n // transfer.IMPORT_BATCH  # batches stayed whole
    assert m.check()["healthy"]
    m.close()


def test_searches_do_not_wait_for_another_writer_to_write_their_bookkeeping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every 32 searches their access counts are written. While another process held
    the write lock (an import's batch), that search waited for it, up to the busy
    timeout, and then failed with it. Now they stay buffered until the lock is free,
    up to FLUSH_WAIT of them; past that a search waits (and says so) as a write does."""
    from memorist.store.sqlite import store as sqlite_store

    path = tmp_path / "s.db"
    with Memory(str(path), embedder="hashing") as first:
        first.add("I like green tea", user_id="u", infer=False)
    m = Memory(config=MemoryConfig(path=str(path), embedder="hashing", busy_timeout=0.5))
    monkeypatch.setattr(sqlite_store, "FLUSH_WAIT", 100)
    hog = _hold_write_lock(path)
    try:
        started = time.monotonic()
        for _ in range(99):
            assert m.search("tea", user_id="u")["results"]
        assert time.monotonic() - started < 0.5 * 3  # not one busy timeout per 32 searches
        assert len(m.store._touches) == 99
        with pytest.raises(StoreError, match="busy timeout"):
            m.search("tea", user_id="u")  # the 100th waits for the lock
    finally:
        hog.rollback()
        hog.close()
    assert m.search("tea", user_id="u")["results"]  # the lock is free: written
    assert len(m.store._touches) == 0
    (memory,) = m.get_all(user_id="u")["results"]
    m.close()
    with Memory(str(path), embedder="hashing") as again:
        assert again._get_record(memory["id"], "u", None, None).access_count == 101
