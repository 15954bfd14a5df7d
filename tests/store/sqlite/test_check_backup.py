"""``memorist backup``: a consistent, checked copy, even of a store another process writes.

Issue 10, item 6: copying the ``.db`` without its ``-wal`` silently gives an empty or
old store; ``memorist backup`` uses SQLite's online backup API instead.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist import Memory, ValidationError
from memorist.cli import cli
from memorist.store.sqlite.check import check_store

_WRITER = """
import sys
from memorist import Memory
m = Memory(sys.argv[1], embedder="hashing")
print("ready", flush=True)
i = 0
while True:
    if i % 5 == 4:  # a batch of 20 in one transaction, now and then
        out = m.add([{"role": "user", "content": f"batch {i} message {j}"} for j in range(20)], user_id="w", infer=False)
    else:
        out = m.add(f"Fact number {i} about the writer", user_id="w", infer=False)
    print(" ".join(r["id"] for r in out["results"]), flush=True)
    i += 1
"""


class _Writer:
    """A process adding memories in a loop; ``acked`` are the ids it reported written, in order."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(db)], stdout=subprocess.PIPE, text=True)
        self.acked: list[str] = []
        self.ready = threading.Event()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line == "ready\n":
                self.ready.set()
            elif line.endswith("\n"):
                with self._lock:
                    self.acked.extend(line.split())

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self.acked)

    def wait_for(self, n: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.snapshot()) < n:
            assert self.proc.poll() is None, "the writer died"
            assert time.monotonic() < deadline, "the writer is too slow"
            time.sleep(0.01)

    def stop(self) -> list[str]:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        return self.snapshot()


def _ids(path: Path) -> set[str]:
    m = Memory(str(path), embedder="hashing")
    try:
        return {r["id"] for r in m.get_all(user_id="w", limit=100_000)["results"]}
    finally:
        m.close()


def test_backup_of_a_store_being_written_is_consistent_and_complete(tmp_path: Path) -> None:
    db, dest = tmp_path / "live.db", tmp_path / "backups" / "copy.db"
    writer = _Writer(db)
    try:
        assert writer.ready.wait(60)
        writer.wait_for(200)
        before = writer.snapshot()  # acknowledged before the backup started
        result = CliRunner().invoke(cli, ["--db", str(db), "--json", "backup", str(dest)])
        assert result.exit_code == 0, result.output
        summary = json.loads(result.output)
        writer.wait_for(len(writer.snapshot()) + 50)  # the writer was never blocked
    finally:
        written = writer.stop()
    assert summary["path"] == str(dest) and summary["memories"] >= len(before)
    report = check_store(str(dest))
    assert report["healthy"], report["problems"]
    copied = _ids(dest)
    assert set(before) <= copied
    # One consistent state: exactly the first writes, in the order they were made
    # (plus, at most, the batch whose acknowledgement the stop cut off).
    prefix = written[: len(copied & set(written))]
    assert copied & set(written) == set(prefix)
    assert len(copied - set(written)) <= 20
    assert not (dest.parent / "copy.db-wal").exists()
    # The copy is a store of its own: it opens, reads and takes writes.
    m = Memory(str(dest), embedder="hashing")
    assert m.search("writer", user_id="w")["results"]
    m.add("Written into the copy", user_id="w", infer=False)
    m.close()


def test_backup_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    db, dest = tmp_path / "a.db", tmp_path / "copy.db"
    m = Memory(str(db), embedder="hashing")
    m.add("First fact", user_id="u", infer=False)
    dest.write_bytes(b"precious")
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", str(db), "backup", str(dest)])
    assert result.exit_code == 1
    assert "DEST" in result.output and "--force" in result.output
    assert dest.read_bytes() == b"precious"
    with pytest.raises(ValidationError, match="force"):
        m.backup(str(dest))
    # --force replaces it, and a stale -wal of the old file is not left to be replayed.
    Path(str(dest) + "-wal").write_bytes(b"stale")
    result = runner.invoke(cli, ["--db", str(db), "backup", "--force", str(dest)])
    assert result.exit_code == 0, result.output
    assert not Path(str(dest) + "-wal").exists()
    m.add("Second fact", user_id="u", infer=False)
    assert m.backup(str(dest), force=True)["memories"] == 2
    m.close()
    assert {r for r in (p["memory"] for p in Memory(str(dest), embedder="hashing").get_all(user_id="u")["results"])} == {"First fact", "Second fact"}
    with pytest.raises(ValidationError, match="store itself"):
        Memory(str(db), embedder="hashing").backup(str(db), force=True)


def test_backup_of_an_in_memory_store(tmp_path: Path) -> None:
    m = Memory(":memory:", embedder="hashing")
    m.add("I'm vegetarian and I live in Oslo.", user_id="u")
    m.search("Oslo", user_id="u")  # buffered retrieval bookkeeping goes into the copy too
    result = m.backup(str(tmp_path / "mem.db"))
    m.close()
    assert result["memories"] == 2
    assert check_store(str(tmp_path / "mem.db"))["healthy"]


def test_copying_the_db_file_alone_misses_recent_writes_but_backup_does_not(tmp_path: Path) -> None:
    """What the README warns about: recent commits live in the -wal file."""
    db = tmp_path / "live.db"
    m = Memory(str(db), embedder="hashing")
    m.add("A fact only the WAL holds", user_id="u", infer=False)
    shutil.copy(db, tmp_path / "plain-copy.db")  # while the store is open: no checkpoint yet
    m.backup(str(tmp_path / "backup.db"))
    m.close()
    assert _count(tmp_path / "plain-copy.db") == 0
    assert _count(tmp_path / "backup.db") == 1


def _count(path: Path) -> int:
    m = Memory(str(path), embedder="hashing")
    try:
        return len(m.get_all(user_id="u")["results"])
    finally:
        m.close()


def test_backup_of_a_damaged_store_fails_and_leaves_nothing(tmp_path: Path) -> None:
    db, dest = tmp_path / "a.db", tmp_path / "copy.db"
    m = Memory(str(db), embedder="hashing")
    m.add([{"role": "user", "content": f"Fact {i}"} for i in range(300)], user_id="u", infer=False)
    m.close()
    data = bytearray(db.read_bytes())
    data[4096 * 3 : 4096 * 4] = b"\x07" * 4096
    db.write_bytes(bytes(data))
    result = CliRunner().invoke(cli, ["--db", str(db), "backup", str(dest)])
    assert result.exit_code == 1
    assert "memorist check" in result.output
    assert list(tmp_path.iterdir()) == [db]


def test_a_store_with_playbooks_trajectories_and_reflections_is_healthy(tmp_path) -> None:
    # Their content hashes are addresses (a playbook's name, a trace's steps), not
    # hashes of their text: the check must not call them damaged.
    with Memory(str(tmp_path / "learning.db"), embedder="hashing") as memory:
        memory.learning.create_playbook("tutoring", agent_id="tutor")
        memory.learning.update_playbook([{"pattern": "Give a worked example first"}], name="tutoring", agent_id="tutor")
        tid = memory.learning.start_trajectory("add fractions", agent_id="tutor")
        memory.learning.log_step(tid, "action", "found a common denominator", agent_id="tutor")
        memory.learning.complete_trajectory(tid, "success", success_score=0.9, agent_id="tutor")
        memory.learning.reflect(tid, agent_id="tutor")
        report = memory.check()
    assert report["healthy"], report["problems"]


def test_a_store_after_a_consolidation_and_its_rollback_is_healthy(tmp_path) -> None:
    """The consolidation run's event, and the rollback of the run, name the run (what
    `memorist rollback` takes) where other events name a memory: the check called
    every consolidated store damaged (exit 1 from `memorist check`)."""
    with Memory(str(tmp_path / "merged.db"), embedder="hashing") as memory:
        memory.add("I love green tea in the morning", user_id="kim", infer=False, importance=0.3)
        memory.add("I love green tea in the mornings", user_id="kim", infer=False, importance=0.3)
        run = memory.learning.consolidate(user_id="kim")
        assert run["consolidated_count"] == 1
        assert memory.check()["healthy"], memory.check()["problems"]
        memory.rollback(run["run_id"], user_id="kim")
        report = memory.check()
        assert report["healthy"], report["problems"]
    # A memory the log names that is really gone is still reported.
    import sqlite3

    conn = sqlite3.connect(tmp_path / "merged.db")
    with conn:
        conn.execute("DELETE FROM memories WHERE id = (SELECT memory_id FROM events WHERE op = 'add' LIMIT 1)")
    conn.close()
    with Memory(str(tmp_path / "merged.db"), embedder="hashing") as memory:
        problems = memory.check()["problems"]
    assert any(p["problem"] == "events naming a memory that does not exist" for p in problems), problems


def test_backup_refuses_the_store_s_own_files_even_with_force(tmp_path: Path) -> None:
    """A backup renamed over the store's write-ahead log (or its shared-memory file, or
    through a link to the store) would destroy the store: refused as the store itself is."""
    db = tmp_path / "a.db"
    m = Memory(str(db), embedder="hashing")
    m.add("First fact", user_id="u", infer=False)
    (tmp_path / "link.db").symlink_to(db)
    for dest, what in ((f"{db}-wal", "write-ahead log"), (f"{db}-shm", "shared-memory file"), (str(tmp_path / "link.db"), "store itself")):
        with pytest.raises(ValidationError, match=what):
            m.backup(dest, force=True)
    assert [r["memory"] for r in m.get_all(user_id="u")["results"]] == ["First fact"]
    m.close()


def test_a_backup_is_not_put_in_place_of_a_store_another_process_has_open(tmp_path: Path) -> None:
    """Restoring with ``backup --db BACKUP STORE --force`` replaced the file under a
    server that had it open: what the server wrote after went to the file taken away."""
    live, saved = tmp_path / "live.db", tmp_path / "saved.db"
    with Memory(str(live), embedder="hashing") as m:
        m.add("Before the backup", user_id="u", infer=False)
        m.backup(str(saved))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from memorist import Memory; m = Memory(sys.argv[1], embedder='hashing'); "
         "m.get_all(user_id='u'); print('open', flush=True); sys.stdin.read(); m.close()", str(live)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        result = CliRunner().invoke(cli, ["--db", str(saved), "backup", "--force", str(live)])
        assert result.exit_code == 1 and "is open in another process" in result.output, result.output
        assert live.exists()
    finally:
        holder.communicate("", timeout=30)
    result = CliRunner().invoke(cli, ["--db", str(saved), "backup", "--force", str(live)])
    assert result.exit_code == 0, result.output  # stopped: the backup is put in place
    with Memory(str(live), embedder="hashing") as m:
        assert [r["memory"] for r in m.get_all(user_id="u")["results"]] == ["Before the backup"]
