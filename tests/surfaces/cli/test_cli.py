"""The ``memorist`` command line, through click's runner and two real subprocesses.

Every test uses the hashing embedder and a fresh store in ``tmp_path`` except the
subprocess demo, which runs the default (semantic) embedder like a new user would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import memorist.cli.memories as cli_memories
import memorist.pipelines.transfer as transfer
from memorist.cli import cli

ENV_VARS = ("MEMORIST_DB", "MEMORIST_EMBEDDER", "MEMORIST_DECAY_DAYS", "MEMORY_DECAY_DAYS", "MEMORIST_TENANT")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    # The demo's default store is a new temporary folder: keep it inside tmp_path.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "store" / "memorist.db")


class Memorist:
    """Runs ``memorist --db <db> --embedder hashing ARGS`` and checks the exit code."""

    def __init__(self, db: str) -> None:
        self.db = db
        self.runner = CliRunner()

    def __call__(
        self,
        *args: str,
        code: int = 0,
        input: str | None = None,
        env: dict[str, str] | None = None,
        db: str | None = "",
        embedder: str | None = "hashing",
    ) -> Result:
        argv: list[str] = []
        if db is not None:
            argv += ["--db", db or self.db]
        if embedder is not None:
            argv += ["--embedder", embedder]
        result = self.runner.invoke(cli, [*argv, *args], input=input, env=env)
        assert result.exit_code == code, (
            f"exit {result.exit_code} != {code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}\n{result.exception!r}"
        )
        if code != 0:
            assert "Traceback" not in result.stderr and isinstance(result.exception, SystemExit), (
                result.exception
            )
        return result

    def json(self, *args: str, **kwargs) -> object:
        result = self("--json", *args, **kwargs)
        return json.loads(result.stdout)  # exactly one JSON document, nothing else

    def add(self, text: str, *options: str, user: str = "alex") -> dict:
        return self.json("add", "--user", user, "--no-infer", *options, text)["results"][0]

    def memories(self, user: str = "alex", **kwargs) -> list[dict]:
        return self.json("list", "--user", user, **kwargs)["results"]


@pytest.fixture
def memorist(db: str) -> Memorist:
    return Memorist(db)


def write_lines(path: Path, *lines: object) -> str:
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8"
    )
    return str(path)


# help and startup ---------------------------------------------------------------------------
def test_help_lists_every_command_and_opens_nothing(
    memorist: Memorist, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memorist.memory as memory_module

    def no_memory(*args, **kwargs):
        raise AssertionError("--help must not open a Memory")

    monkeypatch.setattr(memory_module, "Memory", no_memory)
    out = memorist("--help", db=None, embedder=None, env={"MEMORIST_DB": db}).stdout
    for command in (
        "add",
        "search",
        "list",
        "get",
        "update",
        "delete",
        "delete-all",
        "history",
        "stats",
        "reset",
        "import",
        "export",
        "reindex",
        "demo",
    ):
        assert f"  {command} " in out
    assert "MEMORIST_DB" in out and "MEMORIST_EMBEDDER" in out and "MEMORIST_DECAY_DAYS" in out
    assert db in out.replace("\n", "").replace(" ", "")  # the default store, read at run time
    assert not os.path.exists(db)


def test_python_m_memorist_help_loads_no_model() -> None:
    code = (
        "import sys\n"
        "from memorist.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('LOADED', sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Usage: memorist" in run.stdout and "LOADED []" in run.stdout
    run = subprocess.run(
        [sys.executable, "-m", "memorist", "--help"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("Usage: memorist") and "reindex" in run.stdout


def test_json_flag_works_after_the_command_too(memorist: Memorist) -> None:
    memorist.add("Likes tea")
    after = json.loads(memorist("list", "--user", "alex", "--json").stdout)
    assert after == json.loads(memorist("--json", "list", "--user", "alex").stdout)
    assert [m["memory"] for m in after["results"]] == ["Likes tea"]


# add --------------------------------------------------------------------------------------
def test_add_with_inference_extracts_facts(memorist: Memorist) -> None:
    result = memorist("add", "--user", "alex", "Hi, I'm Alex. I'm a vegetarian and allergic to nuts.")
    assert "ADD" in result.stdout and "Is vegetarian" in result.stdout
    assert "memories successfully" in result.stdout
    stored = [m["memory"] for m in memorist.memories()]
    assert "Is vegetarian" in stored and len(stored) >= 2
    assert not any("Hi, I'm Alex" in m for m in stored)  # facts, not the raw sentence


def test_add_no_infer_stores_the_text_verbatim_and_prints_it_literally(memorist: Memorist) -> None:
    text = "Likes tea with [bold]milk[/bold]"
    result = memorist("add", "--user", "alex", "--no-infer", *text.split())
    assert "[bold]milk[/bold]" in result.stdout  # rich markup is not interpreted
    assert "Added 1 memory successfully" in result.stdout
    assert [m["memory"] for m in memorist.memories()] == [text]


def test_add_options_role_metadata_timestamp_and_stdin(memorist: Memorist) -> None:
    item = memorist.json(
        "add",
        "--user",
        "alex",
        "--agent",
        "tutor",
        "--run",
        "r1",
        "--no-infer",
        "--role",
        "assistant",
        "--metadata",
        '{"topic": "maths"}',
        "--timestamp",
        "2024-03-01T10:00:00Z",
        "Try common denominators",
    )["results"][0]
    got = memorist.json("get", item["id"])
    assert got["memory"] == "Try common denominators"
    assert (got["user_id"], got["agent_id"], got["run_id"]) == ("alex", "tutor", "r1")
    assert got["metadata"] == {"topic": "maths", "role": "assistant"}
    assert got["kind"] == "turn"
    assert got["created_at"].startswith("2024-03-01T10:00:00")

    piped = memorist.json("add", "--user", "alex", "--no-infer", "-", input="read from stdin\n")
    assert piped["results"][0]["memory"] == "read from stdin"


# search, list, get ------------------------------------------------------------------------------
def test_search_table_json_and_filters(memorist: Memorist) -> None:
    food = memorist.add("Loves spicy ramen noodles", "--metadata", '{"category": "food"}')
    memorist.add("Plays chess on weekends", "--metadata", '{"category": "hobby"}')
    memorist.add("Ramen shop visits every Friday", user="someone-else")

    out = memorist("search", "--user", "alex", "ramen", "noodles").stdout
    lines = out.splitlines()
    assert lines[0].split() == ["#", "similarity", "memory", "id", "created", "(UTC)"]
    first = next(line for line in lines if line.strip().startswith("1 "))
    assert "Loves spicy ramen noodles" in first and food["id"] in first

    found = memorist.json("search", "--user", "alex", "ramen", "--limit", "1")["results"]
    assert [r["id"] for r in found] == [food["id"]] and isinstance(found[0]["score"], float)

    filtered = memorist.json(
        "search", "--user", "alex", "weekend hobby food", "--filters", '{"category": "hobby"}'
    )["results"]
    assert [r["memory"] for r in filtered] == ["Plays chess on weekends"]

    other = memorist.json("search", "--user", "someone-else", "ramen")["results"]
    assert [r["memory"] for r in other] == ["Ramen shop visits every Friday"]  # scopes stay apart


def test_list_newest_first_with_limit(memorist: Memorist) -> None:
    memorist.add("First memory", "--timestamp", "2024-01-01T00:00:00Z")
    memorist.add("Second memory", "--timestamp", "2024-02-01T00:00:00Z")
    out = memorist("list", "--user", "alex").stdout
    assert out.index("Second memory") < out.index("First memory")
    assert "2 memories" in out
    assert [m["memory"] for m in memorist.memories()] == ["Second memory", "First memory"]
    limited = memorist("list", "--user", "alex", "--limit", "1").stdout
    assert "Second memory" in limited and "First memory" not in limited
    assert "No memories." in memorist("list", "--user", "nobody").stdout


def test_get_shows_one_memory(memorist: Memorist) -> None:
    item = memorist.add("Prefers dark mode", "--metadata", '{"source": "settings"}')
    out = memorist("get", item["id"]).stdout
    assert item["id"] in out and "Prefers dark mode" in out and '{"source": "settings"}' in out
    assert memorist.json("get", item["id"])["metadata"] == {"source": "settings"}


# update, history, delete, delete-all ---------------------------------------------------------------
def test_update_then_history_shows_both_events(memorist: Memorist) -> None:
    item = memorist.add("Lives in Paris")
    result = memorist.json("update", item["id"], "Lives", "in", "Lyon", "--metadata", '{"moved": true}')
    assert result["event"] == "UPDATE" and result["previous_memory"] == "Lives in Paris"
    assert memorist.json("get", item["id"])["metadata"] == {"moved": True}
    assert "Lives in Lyon" in memorist("update", item["id"], "Lives in Lyon").stdout

    events = memorist.json("history", item["id"])
    assert [e["event"] for e in events] == ["ADD", "UPDATE", "UPDATE"]
    assert (events[1]["old_memory"], events[1]["new_memory"]) == ("Lives in Paris", "Lives in Lyon")
    table = memorist("history", item["id"]).stdout.splitlines()
    assert table[0].split()[:5] == ["seq", "event", "old", "new", "when"]
    update_row = next(line for line in table if " UPDATE " in line)
    assert "Lives in Paris" in update_row and "Lives in Lyon" in update_row


def test_delete_removes_one_memory_and_keeps_its_history(memorist: Memorist) -> None:
    keep = memorist.add("Keeps this")
    gone = memorist.add("Forget this")
    assert "Deleted" in memorist("delete", gone["id"]).stdout
    assert [m["id"] for m in memorist.memories()] == [keep["id"]]
    result = memorist("get", gone["id"], code=1)
    assert result.stderr.startswith("error:") and gone["id"] in result.stderr
    assert [e["event"] for e in memorist.json("history", gone["id"])] == ["ADD", "DELETE"]


def test_an_id_prefix_with_a_user_is_matched_among_that_user_s_memories_only(memorist: Memorist, tmp_path: Path) -> None:
    """Another user's memory answers exactly like a missing one: its full id is never
    shown, and it makes no prefix ambiguous."""
    lines = [{"type": "memory", "id": mid, "memory": f"Fact {mid}", "user_id": user, "created_at": "2024-01-01"}
             for mid, user in (("5ecret-a1", "alex"), ("5ecret-a2", "alex"), ("5ecret-b1", "bob"))]
    memorist("import", write_lines(tmp_path / "m.jsonl", *lines))
    for args in (("get",), ("history",), ("delete",), ("update", "-")):
        for prefix in ("5ecret", "5ecret-a"):  # alex's two ids; one of alex's only
            result = memorist(args[0], prefix, *args[1:], "--user", "carol", input="new text", code=1)
            assert result.stderr == f"error: memory not found: {prefix!r}\n", (args, result.stderr)
        assert memorist(args[0], "5ecret-a1", *args[1:], "--user", "bob", input="x", code=1).stderr == (
            "error: memory not found: '5ecret-a1'\n"
        )
    # Bob's prefix is unique among bob's memories, however many of alex's share it.
    assert memorist.json("get", "5ecret", "--user", "bob")["id"] == "5ecret-b1"
    assert memorist.json("history", "5ec", "--user", "bob")[0]["memory_id"] == "5ecret-b1"
    assert "several ids (5ecret-a1, 5ecret-a2)" in memorist("get", "5ecret", "--user", "alex", code=1).stderr
    assert sorted(m["memory"] for m in memorist.memories()) == ["Fact 5ecret-a1", "Fact 5ecret-a2"]  # nothing changed


def test_delete_all_asks_for_confirmation(memorist: Memorist) -> None:
    memorist.add("Alex fact one")
    memorist.add("Alex fact two")
    memorist.add("Sam fact", user="sam")

    refused = memorist("delete-all", "--user", "alex", input="n\n", code=1)
    assert "alex" in refused.stderr  # the prompt names the scope
    assert len(memorist.memories()) == 2
    memorist("delete-all", "--user", "alex", code=1)  # no answer at all: nothing is deleted
    assert len(memorist.memories()) == 2

    assert "Deleted 2 memories" in memorist("delete-all", "--user", "alex", input="y\n").stdout
    assert memorist.memories() == []
    assert [m["memory"] for m in memorist.memories("sam")] == ["Sam fact"]

    assert memorist.json("delete-all", "--user", "sam", "--yes")["deleted"] == 1
    assert memorist.memories("sam") == []


def test_delete_all_without_a_scope_is_refused_by_the_engine(memorist: Memorist) -> None:
    memorist.add("Still here")
    result = memorist("delete-all", "--yes", code=1)
    assert result.stderr.startswith("error:") and "--user" in result.stderr
    assert len(memorist.memories()) == 1


# stats, reset ---------------------------------------------------------------------------------
def test_stats_reports_counts_and_embedder(memorist: Memorist, db: str) -> None:
    memorist.add("One")
    memorist.add("Two", user="sam")
    data = memorist.json("stats")
    assert (data["memories"], data["users"], data["embedder"], data["dim"]) == (2, 2, "hashing-v1-384", 384)
    assert data["path"] == db
    out = memorist("stats").stdout
    assert any(line.split()[:2] == ["memories", "2"] for line in out.splitlines())
    assert "hashing-v1-384" in out


def test_reset_refuses_without_a_terminal_or_yes(memorist: Memorist) -> None:
    memorist.add("Precious")
    result = memorist("reset", input="y\n", code=1)  # piped input is not a confirmation
    assert "--yes" in result.stderr and result.stderr.startswith("error:")
    assert len(memorist.memories()) == 1
    assert memorist.json("reset", "--yes")["reset"] is True
    assert memorist.memories() == []
    assert memorist.json("stats")["events"] == 1  # the store's policy, recorded again


def test_reset_on_a_terminal_asks(memorist: Memorist, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_memories, "stdin_is_tty", lambda: True)
    memorist.add("Precious")
    memorist("reset", input="n\n", code=1)
    assert len(memorist.memories()) == 1
    assert "Reset" in memorist("reset", input="y\n").stdout
    assert memorist.memories() == []


# import / export -------------------------------------------------------------------------------
def test_import_conversation_lines_and_exported_memories(memorist: Memorist, tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "in.jsonl",
        {"messages": [{"role": "user", "content": "I'm a vegetarian."}], "user_id": "alex"},
        {"text": "Prefers window seats", "infer": False},  # no ids: gets --user
        "",  # blank lines are skipped
        {
            "memory": "Speaks French",
            "user_id": "alex",
            "metadata": {"source": "crm"},
            "created_at": "2023-05-06T07:08:09+00:00",
        },
        {"text": "Sam likes jazz", "user_id": "sam", "infer": False},
    )
    result = memorist.json("import", path, "--user", "alex")
    assert result["lines"] == 5 and result["added"] == 4
    by_text = {m["memory"]: m for m in memorist.memories()}
    assert set(by_text) == {"Is vegetarian", "Prefers window seats", "Speaks French"}
    assert by_text["Speaks French"]["metadata"] == {"source": "crm"}
    assert by_text["Speaks French"]["created_at"] == "2023-05-06T07:08:09+00:00"
    assert [m["memory"] for m in memorist.memories("sam")] == ["Sam likes jazz"]

    piped = memorist.json("import", "-", "--user", "carol", input='{"text": "Piped in", "infer": false}\n')
    assert piped["added"] == 1
    assert [m["memory"] for m in memorist.memories("carol")] == ["Piped in"]

    human = memorist("import", path, "--user", "alex")
    assert "Read 5 lines" in human.stdout
    assert "importing" in human.stderr  # the progress bar is on stderr


def test_import_batches_consecutive_verbatim_lines(
    memorist: Memorist, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [
        {"messages": [{"role": "user", "content": f"Note number {i}"}], "infer": False} for i in range(5)
    ]
    path = write_lines(tmp_path / "in.jsonl", *lines)
    assert memorist.json("import", path, "--user", "alex")["calls"] == 1
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 2)
    result = memorist.json("import", path, "--user", "bo")
    assert (result["added"], result["calls"]) == (5, 3)
    assert sorted(m["memory"] for m in memorist.memories("bo")) == [f"Note number {i}" for i in range(5)]


def test_import_bad_line_names_it_and_keeps_earlier_lines(memorist: Memorist, tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "in.jsonl",
        {"text": "Line one", "infer": False},
        {"messages": [{"role": "user", "content": "Line two"}], "infer": False},
        '{"text": "broken", ',
        {"text": "Line four", "infer": False},
    )
    result = memorist("import", path, "--user", "alex", code=1)
    assert "error: line 3:" in result.stderr and "JSON" in result.stderr
    assert "2 memories added and 0 updated from the lines before line 3; they stay" in result.stderr
    assert sorted(m["memory"] for m in memorist.memories()) == ["Line one", "Line two"]


def test_import_from_line_goes_on_where_the_import_stopped(memorist: Memorist, tmp_path: Path) -> None:
    def note(text: str) -> dict:
        return {"text": text, "infer": False}  # no time: a second run of the whole file would add it again

    path = tmp_path / "in.jsonl"
    write_lines(path, note("Line one"), note("Line two"), '{"text": "Line three", ', note("Line four"))
    result = memorist("import", str(path), "--user", "alex", code=1)
    assert "error: line 3:" in result.stderr
    assert "run the import again with --from-line 3 to go on from it" in result.stderr
    write_lines(path, note("Line one"), note("Line two"), note("Line three"), note("Line four"))
    done = memorist("import", str(path), "--user", "alex", "--from-line", "3")
    assert "Read 2 lines from line 3; added 2 memories." in done.stdout
    assert sorted(m["memory"] for m in memorist.memories()) == ["Line four", "Line one", "Line three", "Line two"]
    assert memorist.json("import", str(path), "--user", "cy", "--from-line", "2")["lines"] == 3  # the lines read
    # Line numbers stay the file's.
    write_lines(path, note("Line one"), note("Line two"), note("Line three"), '{"text": 4}')
    result = memorist("import", str(path), "--user", "bo", "--from-line", "3", code=1)
    assert "error: line 4:" in result.stderr and "1 memories added and 0 updated from the lines before line 4" in result.stderr
    assert [m["memory"] for m in memorist.memories("bo")] == ["Line three"]
    result = memorist("import", str(path), "--user", "alex", "--from-line", "9", code=2)
    assert "--from-line 9" in result.stderr and "has 4 lines" in result.stderr


def test_import_line_rejected_by_the_engine_inside_a_batch(memorist: Memorist, tmp_path: Path) -> None:
    def msg(text: str, role: str = "user") -> dict:
        return {"messages": [{"role": role, "content": text}], "infer": False}

    path = write_lines(
        tmp_path / "in.jsonl", msg("Kept A"), msg("Kept B"), msg("Bad", role="robot"), msg("Never")
    )
    result = memorist("import", path, "--user", "alex", code=1)
    assert "line 3:" in result.stderr and "role" in result.stderr
    assert sorted(m["memory"] for m in memorist.memories()) == ["Kept A", "Kept B"]

    missing = write_lines(tmp_path / "scope.jsonl", {"text": "No scope anywhere", "infer": False})
    result = memorist("import", missing, code=1)
    assert "line 1:" in result.stderr and "--user" in result.stderr

    shape = write_lines(tmp_path / "shape.jsonl", ["not", "an", "object"], {"foo": 1})
    assert "line 1:" in memorist("import", shape, "--user", "alex", code=1).stderr


def test_export_then_import_round_trips_into_another_store(memorist: Memorist, tmp_path: Path) -> None:
    memorist("add", "--user", "alex", "Hi, I'm Alex. I'm a vegetarian and allergic to nuts.")
    memorist.add("Has a cat named Miso", "--metadata", '{"pets": 1}', "--timestamp", "2022-02-02T02:02:02Z")
    memorist.json(
        "add", "--user", "alex", "--run", "r9", "--no-infer", "--role", "assistant", "Try the lentil soup"
    )
    original = memorist.memories()
    assert len(original) == 5

    out = tmp_path / "alex.jsonl"
    result = memorist("export", "--user", "alex", "--output", str(out))
    assert "Exported 5 lines" in result.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5 and all(json.loads(line)["user_id"] == "alex" for line in lines)
    assert memorist("export", "--user", "alex").stdout.splitlines() == lines  # stdout is the same JSONL

    other = str(tmp_path / "other" / "memorist.db")
    summary = memorist.json("import", str(out), db=other)
    assert (summary["lines"], summary["added"]) == (5, 5)

    def comparable(items: list[dict]) -> list[tuple]:
        return sorted(
            (
                m["memory"],
                m["user_id"],
                m["agent_id"],
                m["run_id"],
                m["created_at"],
                json.dumps(m["metadata"], sort_keys=True),
                m["kind"],
            )
            for m in items
        )

    assert comparable(memorist.memories(db=other)) == comparable(original)
    assert memorist.json("export", "--user", "alex")["results"][0]["memory"] == original[-1]["memory"]


# reindex ------------------------------------------------------------------------------------------
def test_reindex_rebuilds_and_reembeds(memorist: Memorist) -> None:
    memorist.add("Enjoys hiking in the Alps")
    memorist.add("Drinks oat milk")
    assert memorist.json("reindex") == {"indexed": 2, "re_embedded": 0, "embedder": "hashing-v1-384"}
    assert "Indexed 2 memories" in memorist("reindex").stdout

    result = memorist.json("reindex", "--embedder", "hashing:256")
    assert (result["re_embedded"], result["embedder"]) == (2, "hashing-v1-256")
    stats = memorist.json("stats", embedder=None)
    assert (stats["embedder"], stats["dim"]) == ("hashing-v1-256", 256)

    # The old embedder is now the wrong one; the store's own is used by default.
    mismatch = memorist("search", "--user", "alex", "hiking", code=1)
    assert "error:" in mismatch.stderr and "reindex" in mismatch.stderr
    found = memorist.json("search", "--user", "alex", "hiking", "Alps", embedder=None)["results"]
    assert found[0]["memory"] == "Enjoys hiking in the Alps"


def test_a_read_on_a_new_store_does_not_pin_its_embedder(memorist: Memorist) -> None:
    # ENGINE BUG: Memory() records the embedder's identity when it opens a store,
    # even for a read of a store that holds no vectors at all. After one harmless
    # `memorist list` (default embedder), the first write with another embedder fails
    # with "this store's vectors were made by ..." although there are none.
    from memorist import Memory

    Memory(memorist.db, embedder="hashing:256").close()  # a new, empty store
    assert memorist.json("list", "--user", "alex", embedder="hashing:256")["results"] == []
    memorist("add", "--user", "alex", "--no-infer", "First memory", embedder="hashing")
    assert memorist.json("stats")["embedder"] == "hashing-v1-384"


def test_the_embedder_a_mismatch_error_suggests_can_be_used(memorist: Memorist) -> None:
    # ENGINE BUG: EmbedderMismatchError says "open it with embedder='hashing-v1-384'",
    # the identity name, which is not an embedder spec ("hashing:384" is); following
    # the advice fails with "unknown embedder provider".
    memorist.add("Enjoys hiking")
    error = memorist("stats", embedder="hashing:256", code=1).stderr
    match = re.search(r"open it with embedder='([^']+)'", error)
    assert match, error
    assert memorist.json("stats", embedder=match.group(1))["memories"] == 1


# configuration ------------------------------------------------------------------------------------
def test_memorist_db_environment_variable_is_honoured(memorist: Memorist, tmp_path: Path) -> None:
    path = str(tmp_path / "from-env" / "env.db")
    memorist("add", "--user", "alex", "--no-infer", "Stored via MEMORIST_DB", db=None, env={"MEMORIST_DB": path})
    assert os.path.exists(path) and not os.path.exists(memorist.db)
    assert [m["memory"] for m in memorist.memories(db=path)] == ["Stored via MEMORIST_DB"]


def test_decay_days_hides_old_memories(memorist: Memorist) -> None:
    memorist.add("Old news", "--timestamp", "2001-01-01T00:00:00Z")
    memorist.add("Fresh news")
    assert [m["memory"] for m in memorist.memories()] == ["Fresh news", "Old news"]
    visible = memorist.json("--decay-days", "30", "list", "--user", "alex")["results"]
    assert [m["memory"] for m in visible] == ["Fresh news"]
    env = memorist.json("list", "--user", "alex", env={"MEMORIST_DECAY_DAYS": "30"})["results"]
    assert [m["memory"] for m in env] == ["Fresh news"]


# errors ------------------------------------------------------------------------------------------
def test_unknown_id_is_a_clean_error(memorist: Memorist) -> None:
    memorist.add("Something")
    for command in ("get", "delete", "history"):
        result = memorist(command, "no-such-id", code=1)
        assert result.stderr.startswith("error:") and "no-such-id" in result.stderr
        assert result.stdout == ""
    result = memorist("update", "no-such-id", "text", code=1)
    assert "no-such-id" in result.stderr and "Traceback" not in result.stderr


def test_missing_scope_names_user_id(memorist: Memorist) -> None:
    memorist.add("Something")
    for args in (("add", "--no-infer", "hello"), ("search", "hello"), ("list",)):
        result = memorist(*args, code=1)
        assert result.stderr.startswith("error:") and "--user" in result.stderr, args
        assert "user_id" not in result.stderr, args


def test_bad_json_options_are_usage_errors(memorist: Memorist) -> None:
    result = memorist("add", "--user", "alex", "--metadata", "{not json", "hello", code=2)
    assert "--metadata" in result.stderr
    result = memorist("add", "--user", "alex", "--metadata", "[1, 2]", "hello", code=2)
    assert "--metadata" in result.stderr and "object" in result.stderr
    result = memorist("search", "--user", "alex", "--filters", "nope", "hello", code=2)
    assert "--filters" in result.stderr
    assert not os.path.exists(memorist.db)  # nothing was opened


def test_engine_validation_errors_are_translated(memorist: Memorist) -> None:
    assert "timestamp" in memorist("add", "--user", "a", "--timestamp", "yesterday", "hi", code=1).stderr
    assert "--reference-time" in memorist("search", "--user", "a", "--reference-time", "soon", "hi", code=1).stderr
    # A limit past the engine's most is refused by the option itself: a usage error.
    assert "--limit" in memorist("search", "--user", "a", "--limit", "2000000", "hi", code=2).stderr
    assert "embedder" in memorist("stats", embedder="nonsense", code=1).stderr
    assert "--decay-days" in memorist("--decay-days", "-1", "stats", code=2).stderr


def test_a_nul_in_text_or_metadata_is_refused(memorist: Memorist) -> None:
    """A NUL reaches the command through stdin or a JSON escape (argv cannot hold one)."""
    assert "NUL character" in memorist("add", "--user", "a", "--no-infer", "-", input="tea\x00 time\n", code=1).stderr
    result = memorist("add", "--user", "a", "--no-infer", "--metadata", '{"a": {"b": ["\\u0000"]}}', "tea", code=1)
    assert "metadata" in result.stderr and "NUL character" in result.stderr
    assert "NUL character" in memorist("add", "--user", "a", "--no-infer", "--metadata", '{"\\u0000": 1}', "tea", code=1).stderr
    item = memorist.add("tea time", user="a")
    assert "NUL character" in memorist("update", item["id"], "-", input="co\x00ffee", code=1).stderr
    assert [m["memory"] for m in memorist.memories(user="a")] == ["tea time"]


@pytest.mark.parametrize(
    ("args", "stdin", "where"),
    [
        (("import", "{bad}"), None, "{bad}"),
        (("import", "-"), True, "stdin"),
        (("import", "--format", "memories-json", "{bad}"), None, "{bad}"),
        (("playbook", "update", "default", "--user", "a", "--file", "{bad}"), None, "{bad}"),
        (("run-turn", "--input", "{bad}"), None, "{bad}"),
        (("run-turn",), True, "stdin"),
        (("pair", "--task", "t", "--criteria", "c", "--output-file", "{bad}"), None, "{bad}"),
        (("add", "--user", "a", "--no-infer", "-"), True, "stdin"),
    ],
)
def test_input_that_is_not_utf8_is_a_one_line_error_naming_it(
    memorist: Memorist, tmp_path: Path, args: tuple[str, ...], stdin: bool | None, where: str
) -> None:
    """Every command reading a file or stdin says which one is not UTF-8, and where
    (a later line too), with nothing written."""
    memorist.add("seed text", user="a")
    data = b'{"text": "hello", "user_id": "a", "infer": false}\n\xff\n'
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(data)
    result = memorist(*(a.format(bad=bad) for a in args), input=data if stdin else None, code=1)  # type: ignore[arg-type]
    assert result.stderr.splitlines()[-1] == f"error: {where.format(bad=bad)}: is not UTF-8 text (invalid start byte at byte 50, line 2)"
    assert [m["memory"] for m in memorist.memories(user="a")] == ["seed text"]


# demo ---------------------------------------------------------------------------------------------
def _fraction(items: list[dict]) -> list[dict]:
    return [m for m in items if "3/6" in m["memory"] or "fraction" in m["memory"].lower()]


def test_demo_json_stores_and_retrieves_the_fraction_memory(memorist: Memorist, tmp_path: Path) -> None:
    user_db = str(tmp_path / "user" / "memorist.db")
    result = memorist.json("demo", "--keep", db=None, env={"MEMORIST_DB": user_db})
    assert not os.path.exists(user_db)  # the demo never touches the user's store
    assert result["db_path"].startswith(str(tmp_path / "tmp"))
    assert result["embedder"] == "hashing-v1-384"
    assert _fraction(result["stored"]["results"])
    assert _fraction(result["retrieved"]["results"])
    assert any("3/6" in m["memory"] for m in result["retrieved"]["results"])
    assert "3/6" in result["context"]
    assert result["conversation_1"]["run_id"] != result["conversation_2"]["run_id"]
    # What it stored is really in the file it names.
    assert _fraction(memorist.memories("learner-1", db=result["db_path"]))


def test_demo_walkthrough_with_a_given_store(memorist: Memorist, tmp_path: Path) -> None:
    path = str(tmp_path / "demo.db")
    out = memorist("demo", "--db", path).stdout
    for expected in (
        "Conversation 1",
        "1/2 becomes 3/6",
        "closed",
        "Conversation 2",
        "reopened",
        "1/2 + 1/3",
        "## Relevant memories",
        "embedder: hashing-v1-384",
        path,
    ):
        assert expected in out, expected
    assert (
        out.index("Conversation 1") < out.index("closed") < out.index("reopened") < out.index("## Relevant")
    )
    assert os.path.exists(path)


def test_run_demo_returns_the_results() -> None:
    from memorist.demo import run_demo

    lines: list[str] = []
    result = run_demo(None, echo=lines.append, embedder="hashing")
    assert "3/6" in result["context"] and _fraction(result["retrieved"]["results"])
    assert any("3/6" in line for line in lines) and any(result["embedder"] in line for line in lines)


@pytest.mark.model
def test_python_m_memorist_demo_json_with_the_default_embedder(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env["TMPDIR"] = str(tmp_path)
    run = subprocess.run(
        [sys.executable, "-m", "memorist", "demo", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["db_path"] is None and not list(tmp_path.glob("memorist-demo-*"))  # removed
    assert any("3/6" in m["memory"] for m in result["retrieved"]["results"])
    assert _fraction(result["stored"]["results"])
    assert "3/6" in result["context"]
    assert result["embedder"]  # the default: MiniLM when installed, else hashing
