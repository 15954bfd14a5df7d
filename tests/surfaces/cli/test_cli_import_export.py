"""``memorist import`` and ``memorist export`` at their edges: what they refuse, what
they say, and that a file they write imports again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memorist.cli import cli

ENV_VARS = ("MEMORIST_DB", "MEMORIST_EMBEDDER", "MEMORIST_DECAY_DAYS", "MEMORY_DECAY_DAYS", "MEMORIST_TENANT")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def run(*args: str, code: int = 0, input: str | None = None) -> Result:
    result = CliRunner().invoke(cli, ["--embedder", "hashing", *args], input=input)
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    return result


def write(path: Path, lines: list[dict | str]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines), encoding="utf-8")
    return path


def memory_line(mid: str, text: str, **fields: object) -> dict:
    return {"type": "memory", "id": mid, "memory": text, "created_at": "2024-05-01T09:00:00+00:00", **fields}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "s.db"
    run("--db", str(db), "add", "--user", "alice", "--no-infer", "Likes green tea")
    return db


def count(db: Path, *scope: str) -> int:
    return len(json.loads(run("--db", str(db), "--json", "list", *scope).output)["results"])


# export never writes over the store -----------------------------------------------------------
@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_export_refuses_to_write_over_the_store_or_its_files(store: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    target = Path(f"{store}{suffix}")
    target.touch()
    before = target.read_bytes()
    result = run("--db", str(store), "export", "--all", "-o", str(target), code=1)
    assert "name another file" in result.output and str(target) in result.output
    assert target.read_bytes() == before
    assert count(store, "--user", "alice") == 1


def test_export_refuses_the_store_named_by_url_and_relative_path(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(store.parent)
    result = run("--db", "sqlite:///s.db", "export", "--all", "-o", "./s.db", code=1)
    assert "is the store itself; name another file" in result.output
    assert count(store, "--user", "alice") == 1
    run("--db", "sqlite:///s.db", "export", "--all", "-o", "copy.jsonl")  # another file is fine
    assert (store.parent / "copy.jsonl").read_text(encoding="utf-8").count("\n") == 1


# import errors ------------------------------------------------------------------------------
def test_import_errors_name_the_line_s_field_not_a_flag(store: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "in.jsonl", [memory_line("m1", "Likes tea", user_id="bob"), memory_line("m2", "Plays chess", user_id=42)])
    result = run("--db", str(store), "import", str(path), code=1)
    assert "error: line 2: user_id: must be a string, got int" in result.output
    assert "--user" not in result.output.splitlines()[-1]


def test_an_import_line_without_scope_says_how_to_give_one(store: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "in.jsonl", [{"text": "Likes tea", "infer": False}])
    result = run("--db", str(store), "import", str(path), code=1)
    assert "--user, --agent or --run" in result.output.splitlines()[-1]


def test_one_id_for_two_scopes_stops_the_import_naming_both_lines(store: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "in.jsonl", [
        memory_line("m1", "Likes tea", user_id="alice"),
        memory_line("m1", "Likes coffee", user_id="alice", agent_id="bot1"),
    ])
    result = run("--db", str(store), "import", str(path), code=1)
    assert "error: line 2: id 'm1' is also the id of line 1's memory, of another scope" in result.output
    assert "--from-line 2" in result.output
    assert count(store, "--user", "alice", "--agent", "bot1") == 0


@pytest.mark.parametrize("text", ['[\n  {"id": "mem_1", "memory": "Likes tea"}\n]\n', '[{"id": "mem_1", "memory": "Likes tea"}]\n'])
def test_a_memories_json_file_imported_as_lines_gets_the_format_hint(store: Path, tmp_path: Path, text: str) -> None:
    path = tmp_path / "memories.json"
    path.write_text(text, encoding="utf-8")
    result = run("--db", str(store), "import", str(path), code=1)
    assert result.output.splitlines()[-1].endswith("add --format memories-json")


def test_a_byte_order_mark_at_the_start_of_lines_is_read(store: Path, tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_text("\ufeff" + json.dumps(memory_line("m1", "Likes tea", user_id="bob")) + "\n", encoding="utf-8")
    assert "added 1 memories" in run("--db", str(store), "import", str(path)).output


def test_export_output_imports_again_field_for_field(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "all.jsonl"
    run("--db", str(store), "export", "--all", "--events", "-o", str(out))
    copy = tmp_path / "copy.db"
    run("--db", str(copy), "import", str(out))
    again = tmp_path / "again.jsonl"
    run("--db", str(copy), "export", "--all", "-o", str(again))
    memories = [x for x in out.read_text(encoding="utf-8").splitlines() if '"type": "memory"' in x]
    assert again.read_text(encoding="utf-8").splitlines() == memories


# Ctrl-C -------------------------------------------------------------------------------------
def test_ctrl_c_during_an_import_says_what_was_written_and_where_to_go_on(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memorist.pipelines.transfer as transfer

    monkeypatch.setattr(transfer, "IMPORT_BATCH", 3)
    feed = transfer.Importer.feed

    def interrupted_at_8(self: transfer.Importer, line_no: int, raw: object) -> None:
        if line_no == 8:
            raise KeyboardInterrupt
        feed(self, line_no, raw)

    monkeypatch.setattr(transfer.Importer, "feed", interrupted_at_8)
    path = write(tmp_path / "in.jsonl", [memory_line(f"m{i}", f"Fact number {i}", user_id="bob") for i in range(1, 11)])
    result = run("--db", str(store), "import", str(path), code=130)
    # Lines 1 to 6 went in two batches of three; line 7 waited in the third.
    assert "Interrupted: 6 memories added and 0 updated from the lines before line 7" in result.output
    assert "--from-line 7" in result.output and "Aborted" not in result.output
    assert count(store, "--user", "bob") == 6
    monkeypatch.setattr(transfer.Importer, "feed", feed)
    assert "added 4 memories" in run("--db", str(store), "import", str(path), "--from-line", "7").output
    assert count(store, "--user", "bob") == 10


def test_ctrl_c_reports_turns_already_there_as_written(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import memorist.pipelines.transfer as transfer

    turns = [{"text": f"Said {i}", "user_id": "bob", "infer": False, "timestamp": f"2024-05-0{i}T09:00:00Z"} for i in range(1, 6)]
    first = write(tmp_path / "first.jsonl", turns[:2])
    run("--db", str(store), "import", str(first))
    path = write(tmp_path / "in.jsonl", turns)
    calls = transfer.Importer._call

    def interrupted(self: transfer.Importer, messages: object, kwargs: dict, *, plain: bool = False) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(transfer.Importer, "_call", interrupted)
    result = run("--db", str(store), "import", str(path), code=130)
    assert "--from-line 1 " in result.output  # the batch of lines 1 to 5 was being written
    monkeypatch.setattr(transfer.Importer, "_call", calls)
    assert "added 3 memories, 2 already there" in run("--db", str(store), "import", str(path)).output


# option values --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [["list", "--user", "alice", "--limit", "0"], ["search", "tea", "--user", "alice", "--limit", "0"],
     ["search", "tea", "--user", "alice", "--threshold", "2"], ["events", "--limit", "-1"]],
)
def test_a_bad_option_value_is_a_usage_error(store: Path, args: list[str]) -> None:
    result = run("--db", str(store), *args, code=2)
    assert "Invalid value for '--" in result.output
