"""What an import refuses in a line, and what it forgives: one id for two scopes in
one file, unknown fields of a memory line, a deleted memory, a byte order mark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memorist import ImportLineError, Memory
from memorist.model import MemoryRecord, Scope
from memorist.pipelines import transfer


def line(mid: str, text: str, when: str = "2024-05-01T09:00:00+00:00", **fields: object) -> str:
    return json.dumps({"type": "memory", "id": mid, "memory": text, "created_at": when, **fields})


@pytest.fixture
def m() -> Memory:
    memory = Memory(":memory:", embedder="hashing")
    yield memory
    memory.close()


def test_one_id_for_two_scopes_in_one_file_names_both_lines(m: Memory) -> None:
    lines = [
        line("a0", "Likes tea", user_id="alice"),
        line("m1", "Likes green tea", user_id="alice"),
        line("m1", "Likes black tea", "2024-05-02T09:00:00+00:00", user_id="alice", agent_id="bot1"),
        line("a2", "Plays chess", user_id="alice"),
    ]
    with pytest.raises(ImportLineError) as err:
        m.import_(lines)
    assert err.value.line == 3
    assert "line 2" in str(err.value) and "another scope" in str(err.value)
    # The lines before it are written, none after it; alice keeps line 2's memory.
    assert sorted(r["memory"] for r in m.get_all(user_id="alice")["results"]) == ["Likes green tea", "Likes tea"]
    assert m.get_all(user_id="alice", agent_id="bot1")["results"] == []
    assert err.value.summary["added"] == 2


def test_one_id_twice_in_one_scope_is_still_one_memory_newest_wins(m: Memory) -> None:
    lines = [line("m1", "Likes green tea", user_id="alice"), line("m1", "Likes black tea", "2024-05-02T09:00:00+00:00", user_id="alice")]
    summary = m.import_(lines)
    assert (summary["added"], summary["unchanged"]) == (1, 1)
    assert [r["memory"] for r in m.get_all(user_id="alice")["results"]] == ["Likes black tea"]


def test_an_unknown_field_of_a_memory_line_is_refused_naming_it(m: Memory) -> None:
    with pytest.raises(ImportLineError) as err:
        m.import_([line("m1", "Likes tea", user_id="alice"), line("m2", "Plays chess", user_id="alice", metdata={"a": 1})])
    assert err.value.line == 2 and "'metdata' is not a field of a memory line" in str(err.value)
    assert [r["id"] for r in m.get_all(user_id="alice")["results"]] == ["m1"]


def test_every_field_an_export_writes_is_a_field_of_a_memory_line(m: Memory) -> None:
    record = MemoryRecord(id="m1", scope=Scope("t", "alice", "bot", "r1"), text="Likes tea", search_text="tea, liked")
    assert set(transfer.export_item(record)) <= transfer._MEMORY_KEYS
    m.add("Likes tea", user_id="alice", infer=False, metadata={"k": 1})
    lines = [json.dumps(item) for item in m.export(all_scopes=True, events=True)]
    copy = Memory(":memory:", embedder="hashing")
    try:
        assert copy.import_(lines)["added"] == 1
        assert [json.dumps(item) for item in copy.export(all_scopes=True)] == [x for x in lines if '"type": "memory"' in x]
    finally:
        copy.close()


def test_a_deleted_memory_line_is_refused_not_counted_as_added(m: Memory) -> None:
    with pytest.raises(ImportLineError) as err:
        m.import_([line("m1", "Likes tea", user_id="alice"), line("m2", "Plays chess", user_id="alice", status="deleted")])
    assert err.value.line == 2 and "status" in str(err.value) and "deleted" in str(err.value)
    assert err.value.summary["added"] == 1
    assert m.history("m1") and m.get_all(user_id="alice")["results"][0]["id"] == "m1"
    archived = m.import_([line("m3", "Plays go", user_id="alice", status="archived")])
    assert archived["added"] == 1


def test_a_byte_order_mark_starts_a_file_of_lines(m: Memory, tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_text("\ufeff" + line("m1", "Likes tea", user_id="alice") + "\n" + line("m2", "Plays chess", user_id="alice") + "\n", encoding="utf-8")
    assert m.import_(path)["added"] == 2
    with pytest.raises(ImportLineError) as err:  # only the file's first line may start with one
        m.import_([line("m3", "Plays go", user_id="alice"), "\ufeff" + line("m4", "Sings", user_id="alice")])
    assert err.value.line == 2
