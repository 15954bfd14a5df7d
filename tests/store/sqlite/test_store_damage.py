"""A damaged store file: every failure is a StoreError, and ``memorist check`` sees it.

Issue 10, item 6: after random single-page overwrites of a closed store, most stores
opened and then raised raw ``sqlite3.DatabaseError`` from stats, get_all and search,
and some damage was never noticed. Here every call on such a store returns or raises
a :class:`~memorist.MemoristError` (a :class:`~memorist.CorruptStoreError` where SQLite
says the file is damaged), and ``memorist check`` reports every one of them.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist import CorruptStoreError, MemoristError, Memory, StoreError
from memorist.cli import cli
from memorist.store.sqlite.check import check_store
from memorist.store.sqlite.schema import SCHEMA_VERSION

PAGE = 4096


def _build(path: Path) -> None:
    m = Memory(str(path), embedder="hashing")
    for u in range(3):
        m.add(
            [{"role": "user", "content": f"user {u} line {i} likes tea number {i % 17} and walks"} for i in range(150)],
            user_id=f"u{u}",
            infer=False,
        )
        m.add("I live in Oslo and I am vegetarian", user_id=f"u{u}")
        m.add("I live in Paris now", user_id=f"u{u}")
    first = m.get_all(user_id="u0", limit=1)["results"][0]["id"]
    m.delete(first)
    m.search("tea", user_id="u0")
    m.close()  # the last connection: the WAL is checkpointed into the file


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("damage") / "base.db"
    _build(path)
    assert not Path(str(path) + "-wal").exists() or Path(str(path) + "-wal").stat().st_size == 0
    return path


def _free_leaves(path: Path) -> set[int]:
    """Pages on SQLite's freelist whose content means nothing (overwriting them is harmless)."""
    data = path.read_bytes()
    size = struct.unpack(">H", data[16:18])[0]
    size = 65536 if size == 1 else size
    trunk, leaves = struct.unpack(">I", data[32:36])[0], set()
    while trunk:
        at = (trunk - 1) * size
        trunk, n = struct.unpack(">II", data[at : at + 8])
        leaves |= set(struct.unpack(f">{n}I", data[at + 8 : at + 8 + 4 * n]))
    return leaves


def _damage(base: Path, target: Path, rng: random.Random) -> int:
    """Copy ``base`` to ``target`` and write random bytes over one page's worth at a
    random offset (not only inside free pages); returns the offset."""
    shutil.copy(base, target)
    size = target.stat().st_size
    free = _free_leaves(base)
    while True:
        offset = rng.randrange(0, size - PAGE)
        if not {offset // PAGE + 1, (offset + PAGE - 1) // PAGE + 1} <= free:
            break
    with open(target, "r+b") as f:
        f.seek(offset)
        f.write(rng.randbytes(PAGE))
    return offset


def _calls(m: Memory) -> list:
    return [
        ("stats", m.stats),
        ("get_all", lambda: m.get_all(user_id="u1")),
        ("search", lambda: m.search("tea walks", user_id="u2")),
        ("search", lambda: m.search("Oslo", user_id="u0")),
        ("history", lambda: m.events(user_id="u0")),
        ("export", lambda: list(m.export(all_scopes=True))),
        ("add", lambda: m.add("A new fact about cats", user_id="u1", infer=False)),
        ("close", m.close),
    ]


@pytest.mark.parametrize("seed", range(12))
def test_a_damaged_page_raises_only_store_errors_and_check_reports_it(base: Path, tmp_path: Path, seed: int) -> None:
    path = tmp_path / "damaged.db"
    offset = _damage(base, path, random.Random(seed))
    raw: list[str] = []
    try:
        m = Memory(str(path), embedder="hashing")
    except MemoristError as exc:
        assert isinstance(exc, StoreError), exc
    else:
        for name, call in _calls(m):
            try:
                call()
            except MemoristError:
                pass
            except Exception as exc:  # what the issue saw: sqlite3.DatabaseError
                raw.append(f"{name}: {type(exc).__name__}: {exc}")
    assert not raw, f"offset {offset}: {raw}"
    report = check_store(str(path))
    assert not report["healthy"], f"damage at offset {offset} went unnoticed"
    assert report["problems"]


def _root_page(path: Path, table: str) -> int:
    with sqlite3.connect(path) as c:
        return c.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]


def test_reads_of_a_damaged_table_raise_corrupt_store_error(base: Path, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    shutil.copy(base, path)
    page = _root_page(path, "memories")
    with open(path, "r+b") as f:
        f.seek((page - 1) * PAGE)
        f.write(b"\xff" * PAGE)
    m = Memory(str(path), embedder="hashing")  # the schema is intact: it opens
    for call in (
        lambda: m.get_all(user_id="u1"),
        lambda: m.search("tea walks", user_id="u2"),
        lambda: list(m.export(all_scopes=True)),
        lambda: m.add("A new fact about cats", user_id="u1", infer=False),
    ):
        with pytest.raises(CorruptStoreError, match="memorist check"):
            call()
    m.close()


def test_a_file_that_is_not_a_database_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(b"x" * 3 * PAGE)
    with pytest.raises(CorruptStoreError, match=str(path)):
        Memory(str(path), embedder="hashing")


# memorist check ----------------------------------------------------------------------------------
def _check(path: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", str(path), "check", *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def test_a_schema_version_that_is_no_number_or_a_foreign_meta_table_is_refused_at_open(tmp_path: Path) -> None:
    """Both raised a raw ValueError or sqlite3 error, which no caller catches as a store's."""
    damaged = tmp_path / "damaged.db"
    Memory(str(damaged), embedder="hashing").close()
    with sqlite3.connect(damaged) as conn:
        conn.execute("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'")
    with pytest.raises(CorruptStoreError, match="schema version 'abc' is not a number"):
        Memory(str(damaged), embedder="hashing")
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE meta (name TEXT, setting TEXT)")
    with pytest.raises(CorruptStoreError, match="not a Memorist store"):
        Memory(str(foreign), embedder="hashing")


def test_check_a_healthy_store(base: Path, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    shutil.copy(base, path)
    code, out = _check(path)
    assert code == 0, out
    assert "healthy" in out
    code, out = _check(path, "--json", "--quick")
    assert code == 0
    report = json.loads(out)
    assert report["healthy"] is True and report["problems"] == [] and report["quick"] is True
    assert report["counts"]["active"] == report["counts"]["fts_documents"] == report["counts"]["vectors"] == 455
    assert report["schema_version"] == SCHEMA_VERSION and report["embedder"].startswith("hashing")


def test_check_a_damaged_store(base: Path, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    shutil.copy(base, path)
    page = _root_page(path, "events")
    with open(path, "r+b") as f:
        f.seek((page - 1) * PAGE + 100)
        f.write(random.Random(1).randbytes(PAGE))
    code, out = _check(path)
    assert code == 1
    assert "DAMAGED" in out
    code, out = _check(path, "--json")
    assert code == 1
    report = json.loads(out)
    assert report["healthy"] is False
    assert {p["check"] for p in report["problems"]} & {"sqlite", "events"}


@pytest.mark.parametrize("content", [b"", b"not a database at all\n" * 400, b"SQLite format 3\x00" + b"\x00" * 4080])
def test_check_a_file_that_does_not_open(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(content)
    code, out = _check(path, "--json")
    assert code == 1
    report = json.loads(out)
    assert report["healthy"] is False
    assert report["problems"][0]["check"] in ("open", "schema")
    assert "Traceback" not in out


def test_check_a_missing_store_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "nope.db"), "check"])
    assert result.exit_code == 1
    assert "no store at" in result.output


# Memorist's own invariants, broken one at a time with plain SQL -----------------------------------
def _store(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "store.db"
    m = Memory(str(path), embedder="hashing")
    ids = [r["id"] for r in m.add([{"role": "user", "content": f"Fact number {i} about tea"} for i in range(5)], user_id="a", infer=False)["results"]]
    m.add("I'm Alex, I live in Oslo and I'm allergic to nuts.", user_id="a")
    m.add("I live in Prague.", user_id="a")  # reconciled against Oslo
    m.update(ids[1], "Fact number one, corrected")
    m.delete(ids[2])
    exported = list(m.export(user_id="a"))
    m2 = Memory(str(tmp_path / "other.db"), embedder="hashing")
    m2.import_(exported)
    m2.close()
    m.search("tea", user_id="a")
    m.close()
    return path, ids


def _problems(path: Path) -> list[tuple[str, str]]:
    return [(p["check"], p["problem"]) for p in check_store(str(path))["problems"]]


def test_a_store_used_every_way_is_healthy(tmp_path: Path) -> None:
    path, _ = _store(tmp_path)
    assert _problems(path) == []
    assert _problems(tmp_path / "other.db") == []  # made by import
    m = Memory(":memory:", embedder="hashing")
    m.add("I'm vegetarian.", user_id="a")
    assert m.check()["healthy"] is True
    m.close()


def _sql(path: Path, *statements: str) -> None:
    with sqlite3.connect(path) as c:
        for s in statements:
            c.execute(s)


def test_check_finds_a_memory_missing_from_the_text_index_and_reindex_repairs_it(tmp_path: Path) -> None:
    path, ids = _store(tmp_path)
    _sql(
        path,
        "INSERT INTO memories_fts (memories_fts, rowid, search_text, scope_key) "
        f"SELECT 'delete', rowid, search_text, scope_key FROM memories WHERE id = '{ids[0]}'",
    )
    report = check_store(str(path))
    assert not report["healthy"]
    (problem,) = report["problems"]
    assert problem["check"] == "fts" and problem["count"] == 1 and problem["examples"] == [ids[0]]
    m = Memory(str(path), embedder="hashing")
    m.reindex()
    assert m.check()["healthy"]
    m.close()


@pytest.mark.parametrize(
    "damage, check, words",
    [
        ("DELETE FROM embeddings WHERE memory_rowid = (SELECT rowid FROM memories WHERE id = '{0}')", "vectors", "without a vector"),
        ("INSERT INTO embeddings SELECT rowid, space_id, zeroblob(1536) FROM memories WHERE id = '{2}'", "vectors", "deleted or archived"),
        ("UPDATE embeddings SET vector = zeroblob(12) WHERE memory_rowid = (SELECT rowid FROM memories WHERE id = '{0}')", "vectors", "dimensions"),
        ("UPDATE embeddings SET vector = CAST(randomblob(1536) AS BLOB) WHERE memory_rowid = (SELECT rowid FROM memories WHERE id = '{0}')", "vectors", "unit vectors"),
        ("DELETE FROM events WHERE memory_id = '{3}' AND op = 'add'", "events", "'add' event"),
        ("UPDATE sqlite_sequence SET seq = 1 WHERE name = 'events'", "events", "sequence counter"),
        ("UPDATE memories SET text = 'Something else entirely' WHERE id = '{4}'", "rows", "content hash"),
        ("UPDATE memories SET kind = 'gibberish' WHERE id = '{4}'", "rows", "cannot be decoded"),
        ("DROP TRIGGER events_no_update", "schema", "missing"),
    ],
    ids=[
        "vector-missing",
        "vector-of-deleted",
        "vector-size",
        "vector-garbage",
        "add-event-missing",
        "sequence-behind",
        "text-changed",
        "kind-unknown",
        "trigger-dropped",
    ],
)
def test_check_finds_each_broken_invariant(tmp_path: Path, damage: str, check: str, words: str) -> None:
    path, ids = _store(tmp_path)
    _sql(path, damage.format(*ids))
    problems = _problems(path)
    assert any(c == check and words in p for c, p in problems), problems


def test_check_reads_while_another_connection_holds_the_write_lock(tmp_path: Path) -> None:
    path, _ = _store(tmp_path)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE spaces SET access_clock = access_clock + 1")  # uncommitted
    try:
        report = check_store(str(path), busy_timeout=0.5)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert report["healthy"], report["problems"]
