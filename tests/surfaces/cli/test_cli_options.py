"""The CLI as a new user guesses it: options in either place, reads that never create a
store, short ids, errors in the CLI's own words, a readable score."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from memorist.cli import cli

GLOBAL = ("--db", "--json", "--embedder", "--decay-days")


@pytest.fixture(autouse=True)
def _temp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))


def run(*args: str, code: int = 0, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(cli, list(args), input=input, env=env)
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}\n{result.exception!r}"
    if code:
        assert "Traceback" not in result.stderr
    return result


def fraction_turn() -> dict:
    """A run-turn input whose feedback teaches the learner's playbook a strategy."""
    return {
        "messages": [{"role": "user", "content": "How do I add 1/2 + 1/3?"}],
        "learner_id": "lee",
        "conversation_id": "c1",
        "feedback": "The fraction bars helped me see the common denominator",
        "outcome": "success",
    }


def leaves(group: click.Group, path: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        yield path + (name,), command
        if isinstance(command, click.Group):
            yield from leaves(command, path + (name,))


def test_every_command_takes_the_global_options_after_its_name() -> None:
    for path, command in leaves(cli):
        opts = {o for p in command.params for o in getattr(p, "opts", ())}
        missing = [g for g in GLOBAL if g not in opts]
        # reindex's own --embedder is the embedder to re-embed with.
        assert not missing, f"memorist {' '.join(path)} lacks {missing}"


def test_options_after_the_command_mean_what_they_mean_before(tmp_path: Path) -> None:
    db = str(tmp_path / "alex.db")
    run("add", "--db", db, "--embedder", "hashing", "--user", "alex", "I'm a vegetarian and allergic to nuts.")
    before = json.loads(run("--db", db, "--json", "search", "--user", "alex", "nuts").stdout)
    after = json.loads(run("search", "--user", "alex", "nuts", "--db", db, "--json").stdout)
    assert [r["id"] for r in before["results"]] == [r["id"] for r in after["results"]]
    listed = json.loads(run("list", "--user", "alex", "--db", db, "--json").stdout)["results"]
    assert sorted(r["memory"] for r in listed) == ["Allergic to nuts", "Is vegetarian"]
    assert json.loads(run("stats", "--embedder", "hashing", "--db", db, "--json").stdout)["memories"] == 2
    # After the command wins over before it (the option typed last).
    other = str(tmp_path / "other.db")
    run("--db", other, "add", "--user", "bob", "--db", db, "--embedder", "hashing", "I like tea.")
    assert not os.path.exists(other)
    # ... and over the environment.
    assert "Is vegetarian" in run("list", "--user", "alex", "--db", db, env={"MEMORIST_DB": other}).stdout
    # Nested groups too.
    out = run("analyze", "top", "--db", db, "--json").stdout
    assert json.loads(out) == {"results": []}


def test_decay_days_after_the_command(tmp_path: Path) -> None:
    db = str(tmp_path / "d.db")
    run("add", "--db", db, "--embedder", "hashing", "--user", "a", "--no-infer", "--timestamp", "2001-01-01T00:00:00Z", "old news")
    assert "old news" in run("list", "--user", "a", "--db", db).stdout
    assert "No memories." in run("list", "--user", "a", "--db", db, "--decay-days", "30").stdout
    assert "--decay-days" in run("list", "--db", db, "--user", "a", "--decay-days", "-1", code=2).stderr


@pytest.mark.parametrize(
    "args",
    [
        ["list", "--user", "a"],
        ["search", "--user", "a", "nuts"],
        ["get", "abc"],
        ["history", "abc"],
        ["update", "abc", "new text"],
        ["delete", "abc"],
        ["delete-all", "--user", "a", "--yes"],
        ["stats"],
        ["export", "--all"],
        ["reset", "--yes"],
        ["reindex"],
        ["reindex", "--embedder", "hashing"],
        ["analyze"],
        ["analyze", "cleanup"],
        ["reprocess", "--list"],
    ],
)
def test_a_command_on_a_missing_store_names_it_and_creates_nothing(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "nope" / "x.db"
    result = run(*args, "--db", str(db), code=1)
    assert f"no store at {db}" in result.stderr
    assert not db.parent.exists()


def test_commands_that_write_create_the_store(tmp_path: Path) -> None:
    db = tmp_path / "new" / "x.db"
    run("add", "--db", str(db), "--embedder", "hashing", "--user", "a", "hello there")
    assert db.is_file()
    turn = json.dumps({"messages": [{"role": "user", "content": "hi"}], "learner_id": "l", "conversation_id": "c"})
    db2 = tmp_path / "new2" / "y.db"
    run("run-turn", "--db", str(db2), "--embedder", "hashing", input=turn)
    assert db2.is_file()


def test_short_ids_work_wherever_an_id_is_taken(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    mid = json.loads(run("add", "--db", db, "--embedder", "hashing", "--user", "a", "--no-infer", "--json", "Likes tea")
                     .stdout)["results"][0]["id"]
    short = mid[:8]
    assert json.loads(run("get", short, "--db", db, "--json").stdout)["id"] == mid
    assert json.loads(run("update", short, "Likes green tea", "--db", db, "--json").stdout)["id"] == mid
    assert [e["event"] for e in json.loads(run("history", short, "--db", db, "--json").stdout)] == ["ADD", "UPDATE"]
    assert json.loads(run("delete", short, "--db", db, "--json").stdout)["id"] == mid
    # A deleted memory keeps its history, reachable by its short id.
    assert len(json.loads(run("history", short, "--db", db, "--json").stdout)) == 3
    assert "memory not found: 'zzzz'" in run("get", "zzzz", "--db", db, code=1).stderr


def test_an_ambiguous_short_id_lists_the_candidates(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    lines = tmp_path / "two.jsonl"
    lines.write_text("".join(json.dumps({"id": f"abc-{i}", "memory": f"fact {i}", "user_id": "u", "created_at": "2024-01-01"}) + "\n" for i in (1, 2)))
    run("import", str(lines), "--db", db, "--embedder", "hashing")
    err = run("get", "abc", "--db", db, code=1).stderr
    assert "several ids" in err and "abc-1" in err and "abc-2" in err


def test_analyze_prints_ids_of_the_learners_playbook(tmp_path: Path) -> None:
    db = str(tmp_path / "p.db")
    turn = fraction_turn()
    run("run-turn", "--db", db, "--embedder", "hashing", input=json.dumps(turn))
    table = run("analyze", "top", "--db", db).stdout
    short = next(line.split()[0] for line in table.splitlines() if "fraction bars" in line.lower())
    # A bullet is a strategy of the learner's playbook (spec 001), not a fact (issue 14).
    playbook = json.loads(run("playbook", "get", "per-learner", "--user", "lee", "--db", db, "--json").stdout)
    (entry,) = [e for e in playbook["strategies"]["helpful"] if e["id"].startswith(short)]
    assert "fraction bars" in entry["pattern"].lower()
    assert "memory not found" in run("get", short, "--db", db, code=1).stderr


@pytest.mark.parametrize(
    ("args", "expected", "python_name"),
    [
        (["add", "I like tea"], "--user: one of --user, --agent or --run is required", "user_id"),
        (["search", "tea"], "one of --user, --agent or --run", "agent_id"),
        (["list"], "one of --user, --agent or --run", "run_id"),
        (["add", "--user", "a", " "], "TEXT: must not be empty", "messages"),
        (["add", "--user", "a", "--role", "user", " "], "TEXT: has no user or assistant text", "messages"),
        (["search", "--user", "a", " "], "QUERY: must not be empty", "query"),
        (["search", "--user", "a", "--reference-time", "soon", "tea"], "--reference-time: not an ISO-8601 date", "reference_time"),
        (["search", "--user", "a", "--filters", '{"x": {"near": 1}}', "tea"], "--filters", "filters:"),
        (["add", "--user", "a", "--timestamp", "soon", "tea"], "--timestamp: not an ISO-8601 date", "timestamp:"),
        (["add", "--user", " ", "tea"], "--user: must not be empty", "user_id"),
    ],
)
def test_errors_name_the_flags_a_user_typed(tmp_path: Path, args: list[str], expected: str, python_name: str) -> None:
    db = str(tmp_path / "e.db")
    run("add", "--db", db, "--embedder", "hashing", "--user", "seed", "--no-infer", "seed")
    err = run(*args, "--db", db, code=1).stderr
    assert expected in err
    assert not re.search(rf"(?<![-\w]){re.escape(python_name)}", err), err


def test_search_shows_similarity_and_takes_a_threshold(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    for text in ("I'm a vegetarian.", "I'm allergic to nuts.", "I live in San Francisco."):
        run("add", "--db", db, "--embedder", "hashing", "--user", "alex", text)
    found = json.loads(run("search", "--user", "alex", "nuts allergy", "--db", db, "--json", "--limit", "3").stdout)["results"]
    assert len(found) == 3 and all(-1.0 <= r["similarity"] <= 1.0 for r in found)
    table = run("search", "--user", "alex", "nuts allergy", "--db", db, "--limit", "3").stdout
    assert "similarity" in table.splitlines()[0]
    for r in found:
        assert f"{r['similarity']:.2f}" in table
    best = max(r["similarity"] for r in found)
    kept = json.loads(run("search", "--user", "alex", "nuts allergy", "--db", db, "--json", "--threshold", str(best)).stdout)["results"]
    assert kept and all(r["similarity"] >= best - 1e-6 for r in kept)
    assert "No memories found." in run("search", "--user", "alex", "nuts", "--db", db, "--threshold", "1").stdout
    assert "--threshold" in run("search", "--user", "alex", "nuts", "--db", db, "--threshold", "2", code=2).stderr


def test_run_turn_on_empty_input_says_no_input(tmp_path: Path) -> None:
    err = run("run-turn", "--db", str(tmp_path / "r.db"), input="", code=2).stderr
    assert "no input" in err and "not valid JSON" not in err
    assert "not valid JSON" in run("run-turn", "--db", str(tmp_path / "r.db"), input="{", code=2).stderr


def test_run_turn_prints_iso_dates(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    turn = fraction_turn()
    run("run-turn", "--db", db, "--embedder", "hashing", input=json.dumps(turn))
    turn["messages"][0]["content"] = "Would fraction bars help me see a common denominator?"
    out = json.loads(run("run-turn", "--db", db, "--embedder", "hashing", input=json.dumps(turn)).stdout)
    bullets = out["result"]["bullets"]
    assert bullets, out
    for bullet in bullets:
        assert isinstance(bullet["created_at"], str) and bullet["created_at"].startswith("20")
    analyzed = json.loads(run("analyze", "top", "--db", db, "--json").stdout)["results"]
    assert all(isinstance(b["created_at"], str) for b in analyzed)


def test_stats_size_counts_the_write_ahead_log(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    run("add", "--db", str(db), "--embedder", "hashing", "--user", "a", "--no-infer", "x " * 2000)
    size = json.loads(run("stats", "--db", str(db), "--json").stdout)["size_bytes"]
    on_disk = sum(p.stat().st_size for p in tmp_path.glob("w.db*") if not p.name.endswith("-shm"))
    assert size == on_disk > 4096


def test_demo_leaves_nothing_behind_unless_asked(tmp_path: Path) -> None:
    tmp = Path(tempfile.gettempdir())
    out = run("demo", "--embedder", "hashing").stdout
    assert "3/6" in out and not list(tmp.iterdir())
    kept = json.loads(run("demo", "--embedder", "hashing", "--keep", "--json").stdout)["db_path"]
    assert os.path.isfile(kept) and Path(kept).parent.parent == tmp


def test_demo_writes_only_into_a_store_named_on_the_command_line(tmp_path: Path) -> None:
    mine = tmp_path / "mine.db"
    out = json.loads(run("demo", "--embedder", "hashing", "--json", env={"MEMORIST_DB": str(mine)}).stdout)
    assert out["db_path"] is None and not mine.exists()
    named = tmp_path / "demo.db"
    assert json.loads(run("demo", "--db", str(named), "--embedder", "hashing", "--json").stdout)["db_path"] == str(named)
    assert json.loads(run("--db", str(named), "--json", "demo").stdout)["db_path"] == str(named)
    assert named.is_file()


def test_export_import_round_trip_through_the_cli(tmp_path: Path) -> None:
    db, copy = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    run("add", "--db", db, "--embedder", "hashing", "--user", "alex", "Hi, I'm Alex. I'm a vegetarian and allergic to nuts.")
    run("add", "--db", db, "--user", "bob", "--agent", "tutor", "I live in Berlin.")
    first, second, events = tmp_path / "1.jsonl", tmp_path / "2.jsonl", tmp_path / "e.jsonl"
    run("export", "--all", "--db", db, "-o", str(first))
    assert "name a scope" in run("export", "--db", db, code=2).stderr
    out = run("import", str(first), "--db", copy, "--embedder", "hashing").stdout
    assert "added 4 memories" in out
    again = run("import", str(first), "--db", copy, "--json").stdout
    assert json.loads(again)["added"] == 0 and json.loads(again)["unchanged"] == 4
    run("export", "--all", "--db", copy, "-o", str(second))
    assert first.read_bytes() == second.read_bytes()
    run("export", "--user", "alex", "--events", "--db", db, "-o", str(events))
    assert "event lines not replayed" in run("import", str(events), "--db", copy).stdout
    assert len(json.loads(run("list", "--user", "alex", "--db", copy, "--json").stdout)["results"]) == 3
