"""Moving from spec 004's minimal version: ``memorist import --format etienne`` reads its
``.etienne/memories.json`` (a JSON array of memories) keeping ids and dates, and
``memorist export --format etienne`` writes that file back."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memorist import Memory
from memorist.cli import cli

#: As spec 004's version writes it: naive and "Z" dates, updated_at missing or equal
#: to created_at for a memory never updated, metadata missing, empty or set.
ETIENNE = [
    {
        "id": "mem_1",
        "memory": "Name is Alex",
        "user_id": "alex",
        "created_at": "2024-01-15T10:30:00",
        "updated_at": "2024-01-15T10:30:00",
        "metadata": {"session_id": "session_123", "source": "chat"},
    },
    {
        "id": "mem_2",
        "memory": "Is vegetarian",
        "user_id": "alex",
        "created_at": "2024-01-15T10:30:00.250Z",
        "updated_at": "2024-02-01T08:00:00.000Z",
        "metadata": {"session_id": "session_123", "nested": {"tags": ["food", "diet"], "n": 2}},
    },
    {"id": "mem_3", "memory": "Allergic to nuts", "user_id": "alex", "created_at": "2024-01-16T09:00:00Z"},
    {
        "id": "6f1c1f0e-9d5c-4d1e-9a4e-5b0c2f7f8a11",
        "memory": "Prefers oat milk in coffee ☕",
        "user_id": "alex",
        "created_at": "2024-03-01T12:00:00+02:00",
        "updated_at": None,
        "metadata": {},
    },
]


def instant(value: str) -> datetime:
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def same_memory(exported: dict[str, Any], original: dict[str, Any]) -> None:
    assert exported["id"] == original["id"]
    assert exported["memory"] == original["memory"]
    assert exported["user_id"] == original["user_id"]
    assert exported["metadata"] == (original.get("metadata") or {})
    assert instant(exported["created_at"]) == instant(original["created_at"])
    # spec 004 shows a memory never updated with updated_at == created_at.
    updated = original.get("updated_at") or original["created_at"]
    assert instant(exported["updated_at"]) == instant(updated)


class Memorist:
    def __init__(self, db: str) -> None:
        self.db = db
        self.runner = CliRunner()

    def __call__(self, *args: str, code: int = 0, input: str | None = None) -> Result:
        result = self.runner.invoke(cli, ["--db", self.db, "--embedder", "hashing", *args], input=input)
        assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
        if code:
            assert "Traceback" not in result.stderr and isinstance(result.exception, SystemExit)
        return result


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "memorist.db")


@pytest.fixture
def memorist(db: str) -> Memorist:
    return Memorist(db)


def etienne_file(tmp_path: Path, data: Any, *, raw: str | None = None) -> str:
    folder = tmp_path / "workspace" / "project" / ".etienne"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "memories.json"
    path.write_text(raw if raw is not None else json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_import_then_export_gives_the_same_memories(memorist: Memorist, db: str, tmp_path: Path) -> None:
    source = etienne_file(tmp_path, ETIENNE)
    result = memorist("import", "--format", "etienne", source)
    assert "Read 4 memories; added 4 memories." in result.stdout

    # The engine holds them with their ids and dates.
    with Memory(db, embedder="hashing") as memory:
        got = memory.get("mem_2", user_id="alex")
        assert got["memory"] == "Is vegetarian"
        assert got["created_at"] == "2024-01-15T10:30:00.250000+00:00"
        assert got["updated_at"] == "2024-02-01T08:00:00+00:00"
        assert memory.search("vegetarian", user_id="alex", limit=1)["results"][0]["id"] == "mem_2"

    out = tmp_path / "export.json"
    result = memorist("export", "--format", "etienne", "--user", "alex", "-o", str(out))
    assert "Exported 4 memories" in result.stderr
    exported = json.loads(out.read_text(encoding="utf-8"))
    assert isinstance(exported, list) and len(exported) == len(ETIENNE)
    by_id = {m["id"]: m for m in exported}
    for original in ETIENNE:
        same_memory(by_id[original["id"]], original)
    # Oldest first, as the minimal version appends them; only spec 004's keys.
    assert [m["id"] for m in exported] == [m["id"] for m in ETIENNE]
    assert all(list(m) == ["id", "memory", "user_id", "created_at", "updated_at", "metadata"] for m in exported)

    # The exported file imports again without changing anything, and exports the same.
    result = memorist("import", "--format", "etienne", str(out))
    assert "added 0 memories, 4 already there" in result.stdout
    again = memorist("export", "--format", "etienne", "--user", "alex")
    assert json.loads(again.stdout) == exported  # stdout: the one JSON array, nothing else


def test_export_leaves_out_deleted_memories_and_keeps_other_ids(memorist: Memorist, db: str, tmp_path: Path) -> None:
    with Memory(db, embedder="hashing") as memory:
        keep = memory.add("Likes jazz", user_id="alex", agent_id="music", infer=False, metadata={"k": 1})
        gone = memory.add("Likes techno", user_id="alex", infer=False)
        memory.add("Bob's memory", user_id="bob", infer=False)
        memory.delete(gone["results"][0]["id"])
    exported = json.loads(memorist("export", "--format", "etienne", "--user", "alex").stdout)
    assert [m["memory"] for m in exported] == ["Likes jazz"]
    assert exported[0]["id"] == keep["results"][0]["id"]
    assert exported[0]["agent_id"] == "music" and exported[0]["metadata"] == {"k": 1}
    # --json with no --output: still the array itself.
    assert json.loads(memorist("--json", "export", "--format", "etienne", "--user", "bob").stdout)[0]["user_id"] == "bob"
    assert json.loads(memorist("export", "--format", "etienne", "--user", "nobody").stdout) == []


def test_an_id_twice_in_the_file_is_one_memory_the_newest_copy(memorist: Memorist, db: str, tmp_path: Path) -> None:
    newer = {**ETIENNE[0], "memory": "Name is Alexandra", "updated_at": "2024-06-01T00:00:00Z"}
    memorist("import", "--format", "etienne", etienne_file(tmp_path, [newer, ETIENNE[0]]))
    with Memory(db, embedder="hashing") as memory:
        assert [m["memory"] for m in memory.get_all(user_id="alex")["results"]] == ["Name is Alexandra"]


def test_memories_without_a_user_get_the_user_option(memorist: Memorist, db: str, tmp_path: Path) -> None:
    source = etienne_file(tmp_path, [{"id": "m1", "memory": "Uses TypeScript", "created_at": "2024-05-01T00:00:00Z"}])
    memorist("import", "--format", "etienne", source, "--user", "project-x")
    with Memory(db, embedder="hashing") as memory:
        assert memory.get("m1", user_id="project-x")["memory"] == "Uses TypeScript"


@pytest.mark.parametrize(
    ("data", "raw", "message"),
    [
        (None, '[{"id": "m1", ', "memories.json: is not valid JSON: Expecting property name enclosed in double quotes (line 1, column 15)"),
        (None, '{"type": "memory", "id": "a"}\n{"type": "memory", "id": "b"}\n', "json: is not valid JSON: Extra data (line 2, column 1); it looks like JSON lines (one object per line)"),
        ({"results": []}, None, 'memories.json: must be a JSON array of memories {id, memory, user_id, created_at, updated_at?, metadata?}'),
        ({"results": []}, None, 'an API response? its memories are under "results"'),
        (["Name is Alex"], None, "memories[0]: must be a memory object {id, memory, user_id, created_at"),
        ([{**ETIENNE[0]}, {"memory": "x", "user_id": "alex", "created_at": "2024-01-01"}], None, "memories[1].id: is required"),
        ([{"id": "a", "user_id": "alex", "created_at": "2024-01-01"}], None, "memories[0].memory: is required"),
        ([{"id": "a", "memory": "x", "user_id": "alex"}], None, "memories[0].created_at: is required"),
        ([{"id": "a", "memory": "x", "user_id": "alex", "created_at": "yesterday"}], None, "memories[0].created_at: not an ISO-8601 date: 'yesterday' (memory 'a')"),
        ([{"id": "a", "memory": "x", "user_id": "alex", "created_at": "2024-01-01", "updated_at": 1e20}], None, "memories[0].updated_at: must be a time from 1970 to 9999"),
        ([{"id": "a", "memory": "x", "user_id": "alex", "created_at": "2024-01-01", "metadata": ["a"]}], None, "memories[0].metadata:"),
        ([{"id": 7, "memory": "x", "user_id": "alex", "created_at": "2024-01-01"}], None, "memories[0].id: must be a non-empty string, got 7"),
        ([{"id": "a", "memory": "   ", "user_id": "alex", "created_at": "2024-01-01"}], None, "memories[0].memory: must not be empty"),
        ([{"id": "a", "memory": "x", "created_at": "2024-01-01"}], None, "memories[0].user_id: is missing, and no default scope was given (give one with --user"),
        (
            [{**ETIENNE[0]}, {**ETIENNE[1]}, {**ETIENNE[0], "user_id": "bob"}],
            None,
            "memories[2].id: 'mem_1' is also the id of memories[0], of another scope",
        ),
        (None, "[" + "1" * 5000 + "]", "memories.json: is not usable JSON: Exceeds the limit"),
    ],
)
def test_a_bad_file_is_refused_whole_with_an_error_naming_what_is_wrong(
    memorist: Memorist, db: str, tmp_path: Path, data: Any, raw: str | None, message: str
) -> None:
    source = etienne_file(tmp_path, data, raw=raw)
    result = memorist("import", "--format", "etienne", source, code=1)
    assert result.stderr.startswith(f"error: {source}: ")
    assert message in result.stderr
    assert not Path(db).exists()  # nothing imported, no store created


def test_an_id_of_another_project_is_not_overwritten(memorist: Memorist, db: str, tmp_path: Path) -> None:
    memorist("import", "--format", "etienne", etienne_file(tmp_path, ETIENNE))
    other = [{"id": "mem_9", "memory": "Other new", "user_id": "bob", "created_at": "2024-01-01"}]
    other.append({"id": "mem_1", "memory": "Other project", "user_id": "bob", "created_at": "2025-01-01"})
    result = memorist("import", "--format", "etienne", etienne_file(tmp_path, other), code=1)
    assert "memories[1].id: 'mem_1' is already the id of a memory of another scope" in result.stderr
    with Memory(db, embedder="hashing") as memory:
        assert memory.get("mem_1", user_id="alex")["memory"] == "Name is Alex"
        assert memory.get_all(user_id="bob")["results"] == []  # nothing of that file was imported


def test_options_that_do_not_apply_to_an_etienne_file(memorist: Memorist, tmp_path: Path) -> None:
    source = etienne_file(tmp_path, ETIENNE)
    assert "--infer/--no-infer is for conversation lines" in memorist("import", "--format", "etienne", "--no-infer", source, code=2).stderr
    assert "--events cannot go in a memories-json file" in memorist("export", "--format", "etienne", "--events", "--user", "a", code=2).stderr
    # JSON lines stay the default of both commands.
    memorist("import", source, code=1)
    assert "jsonl" in memorist("import", "--help").stdout


def test_the_format_is_named_memories_json_and_its_former_name_still_works(memorist: Memorist, tmp_path: Path) -> None:
    source = etienne_file(tmp_path, ETIENNE)
    assert "Read 4 memories; added 4 memories." in memorist("import", "--format", "memories-json", source).stdout
    by_name = json.loads(memorist("export", "--format", "memories-json", "--user", "alex").stdout)
    assert [m["id"] for m in by_name] == [m["id"] for m in ETIENNE]
    assert json.loads(memorist("export", "--format", "etienne", "--user", "alex").stdout) == by_name
    shown = memorist("import", "--help").stdout
    assert "[jsonl|memories-json]" in shown and "etienne" not in shown
