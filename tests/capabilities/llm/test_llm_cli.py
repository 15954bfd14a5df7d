"""``memorist reprocess`` through click's runner, against the fake server."""

from __future__ import annotations

import json

from click.testing import CliRunner
from fake_openai import text

from memorist import Memory
from memorist.cli import cli

FACTS = {"facts": ["Name is Alex", "Is a vegetarian"]}


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def test_memorist_reprocess_lists_and_recovers_pending_turns(fake_openai, db_path, monkeypatch) -> None:
    fake_openai.default["responses"] = text("Sorry, I can't do JSON today.")
    with Memory(db_path, embedder="hashing", llm="openai:gpt-5-mini") as m:
        assert m.add("Hi, I'm Alex. I'm a vegetarian.", user_id="alex")["pending"]

    listed = run("--db", db_path, "reprocess", "--list", "--json")
    (item,) = json.loads(listed.output)["results"]
    assert item["payload"]["messages"][0]["content"] == "Hi, I'm Alex. I'm a vegetarian."
    human = run("--db", db_path, "reprocess", "--list")
    assert "extraction failed" in human.output and "Hi, I'm Alex" in human.output

    run("--db", db_path, "reprocess", code=1)  # no LLM configured: a clear error

    fake_openai.default["responses"] = text(FACTS)
    monkeypatch.setenv("MEMORIST_LLM", "openai:gpt-5-mini")
    done = json.loads(run("--db", db_path, "reprocess", "--user", "alex", "--json").output)
    assert (done["processed"], done["failed"], done["pending"]) == (1, 0, 0)
    assert done["results"][0]["turn_event"] == item["seq"]
    assert "No pending turns." in run("--db", db_path, "reprocess", "--list").output
    again = run("--db", db_path, "reprocess", "--llm", "openai")
    assert "Reprocessed 0 turns" in again.output
    with Memory(db_path, embedder="hashing") as m:
        assert sorted(r["memory"] for r in m.get_all(user_id="alex")["results"]) == sorted(FACTS["facts"])
    assert fake_openai.calls("chat") == []


def test_reprocess_reports_a_missing_key(db_path) -> None:
    Memory(db_path, embedder="hashing").close()
    result = CliRunner().invoke(cli, ["--db", db_path, "reprocess", "--llm", "openai"])
    assert result.exit_code == 1 and "OPENAI_API_KEY" in result.output
