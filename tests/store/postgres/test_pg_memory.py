"""``Memory("postgresql://…")`` end to end, the CLI on a database, export and import
between the two backends, and ``memorist bench locomo --db``.

tests/capabilities/facts/test_memory_backends.py runs the Memory API on both backends; this
file walks one store through every public call the way a user would, and covers
what only a URL changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist import Memory, NotFoundError
from memorist.cli import cli


def texts(result) -> list[str]:
    return [r["memory"] for r in result["results"]]


def test_every_public_call_on_postgresql(pg_url: str) -> None:
    m = Memory(pg_url, embedder="hashing")
    try:
        # infer=True: facts are extracted and reconciled.
        added = m.add("Hi, I'm Alex. I'm a vegetarian and I live in Oslo.", user_id="alex")
        assert {r["event"] for r in added["results"]} == {"ADD"}
        assert "Lives in Oslo" in texts(m.get_all(user_id="alex"))
        assert [r["event"] for r in m.add("I live in Lisbon.", user_id="alex")["results"]] == ["UPDATE"]
        assert "Lives in Lisbon" in texts(m.get_all(user_id="alex")) and "Lives in Oslo" not in texts(m.get_all(user_id="alex"))
        # infer=False: messages verbatim, with metadata and a run.
        turn = m.add(
            [{"role": "user", "content": "Book the 9am train to Bergen", "name": "Alex"}, {"role": "assistant", "content": "Booked."}],
            user_id="alex", agent_id="travel", run_id="r1", infer=False, metadata={"channel": "chat"},
        )
        assert len(turn["results"]) == 2
        train = turn["results"][0]["id"]

        hits = m.search("train to Bergen", user_id="alex")["results"]
        assert hits[0]["id"] == train and hits[0]["metadata"]["channel"] == "chat"
        assert m.search("train", user_id="alex", agent_id="travel", run_id="r1", limit=1)["results"][0]["id"] == train
        assert m.search("train", user_id="alex", agent_id="nobody")["results"] == []
        assert [r["id"] for r in m.search("train", user_id="alex", filters={"channel": "chat"})["results"]][:1] == [train]
        assert m.search("Bergen", user_id="alex", filters={"channel": "mail"})["results"] == []
        assert texts(m.get_all(user_id="alex", filters={"role": "assistant"})) == ["Booked."]

        assert m.get(train)["memory"] == "Book the 9am train to Bergen"
        m.update(train, "Book the 10am train to Bergen")
        assert m.get(train)["memory"] == "Book the 10am train to Bergen"
        assert [e["event"] for e in m.history(train)] == ["ADD", "UPDATE"]
        m.delete(train)
        with pytest.raises(NotFoundError):
            m.get(train)
        assert [e["event"] for e in m.history(train)] == ["ADD", "UPDATE", "DELETE"]

        # Users and tenants never see each other.
        m.add("I like jazz.", user_id="sam", infer=False)
        assert "I like jazz." not in texts(m.search("jazz", user_id="alex"))
        with Memory(pg_url, embedder="hashing", tenant_id="acme") as acme:
            assert acme.get_all(user_id="sam")["results"] == []
            acme.add("I like opera.", user_id="sam", infer=False)
            assert texts(acme.get_all(user_id="sam")) == ["I like opera."]
        assert texts(m.get_all(user_id="sam")) == ["I like jazz."]

        assert m.delete_all(user_id="sam")["deleted"] == 1
        assert m.get_all(user_id="sam")["results"] == []
        stats = m.stats()
        assert stats["memories"] == len(m.get_all(user_id="alex", limit=1000)["results"])  # a tenant counts its own only
        with Memory(pg_url, embedder="hashing", tenant_id="acme") as acme:
            assert (acme.stats()["memories"], acme.stats()["users"], acme.stats()["tenant_id"]) == (1, 1, "acme")
        assert stats["schema_version"] >= 1 and stats["size_bytes"] > 0
        m.reset()
        assert m.get_all(user_id="alex")["results"] == [] and m.stats()["events"] == 1  # the policy, kept
        m.add("A fresh start.", user_id="alex", infer=False)
        assert texts(m.search("fresh start", user_id="alex")) == ["A fresh start."]
    finally:
        m.close()


def test_the_cli_on_a_database(pg_url: str) -> None:
    runner = CliRunner()

    def memorist(*args: str) -> str:
        result = runner.invoke(cli, ["--db", pg_url, "--embedder", "hashing", *args])
        assert result.exit_code == 0, result.output
        return result.output

    memorist("add", "I love hiking in the Alps", "--user", "alex", "--no-infer")
    assert "hiking" in memorist("list", "--user", "alex")
    found = json.loads(memorist("--json", "search", "mountains hiking", "--user", "alex"))
    memory_id = found["results"][0]["id"]
    assert "ADD" in memorist("history", memory_id[:8])
    stats = json.loads(memorist("--json", "stats"))
    assert stats["memories"] == 1 and stats["path"].startswith("postgresql://")
    memorist("delete", memory_id[:8])
    assert "hiking" not in memorist("list", "--user", "alex")
    memorist("reset", "--yes")
    assert json.loads(memorist("--json", "stats"))["events"] == 1  # the store's policy, recorded again


def test_export_and_import_between_sqlite_and_postgresql(pg_url: str, tmp_path: Path) -> None:
    source = Memory(str(tmp_path / "source.db"), embedder="hashing")
    source.add("I'm a vegetarian and allergic to nuts.", user_id="alex", timestamp="2024-03-01T10:00:00Z")
    source.add([{"role": "user", "content": "tea\x1b time \U0010fffe", "name": "Sam"}], user_id="sam", run_id="r1", infer=False)
    gone = source.add("My cat is called Tom.", user_id="sam", infer=False)["results"][0]["id"]
    source.delete(gone)
    lines = [json.dumps(item) for item in source.export(all_scopes=True)]
    dump = tmp_path / "dump.jsonl"
    dump.write_text("\n".join(lines) + "\n", encoding="utf-8")

    with Memory(pg_url, embedder="hashing") as pg:
        pg.import_(str(dump))
        assert [json.dumps(item) for item in pg.export(all_scopes=True)] == lines
        pg.import_(str(dump))  # twice changes nothing
        assert [json.dumps(item) for item in pg.export(all_scopes=True)] == lines
        back = tmp_path / "back.jsonl"
        back.write_text("\n".join(json.dumps(item) for item in pg.export(all_scopes=True)) + "\n", encoding="utf-8")
    again = Memory(str(tmp_path / "again.db"), embedder="hashing")
    again.import_(str(back))
    assert [json.dumps(item) for item in again.export(all_scopes=True)] == lines
    source.close()
    again.close()


CONVERSATION = {
    "sample_id": "conv-pg",
    "conversation": {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Guess what, I adopted a greyhound and named her Zephyrine."},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "I started theremin lessons, spooky sounds everywhere."},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "I volunteered at the lighthouse museum on Saturday."},
        ],
    },
    "qa": [
        {"question": "What did Caroline name her greyhound?", "answer": "Zephyrine", "evidence": ["D1:1"], "category": 4},
        {"question": "What lessons did Melanie start?", "answer": "theremin", "evidence": ["D1:2"], "category": 4},
        {"question": "Where did Caroline volunteer?", "answer": "lighthouse museum", "evidence": ["D1:3"], "category": 4},
    ],
}


def test_bench_locomo_runs_in_a_database_and_leaves_it_as_it_was(pg_url: str, tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([CONVERSATION]), encoding="utf-8")
    with Memory(pg_url, embedder="hashing") as m:
        m.add("Someone else's memory", user_id="conv-pg", infer=False)
    runner = CliRunner()
    args = ["--embedder", "hashing", "--json", "bench", "locomo", "--data", str(data), "--k", "1,3"]
    on_pg = runner.invoke(cli, ["--db", pg_url, *args])
    on_sqlite = runner.invoke(cli, args)  # no --db: a temporary SQLite file
    assert on_pg.exit_code == 0 and on_sqlite.exit_code == 0, on_pg.output + on_sqlite.output
    pg_result, sqlite_result = (json.loads(r.stdout.strip().splitlines()[-1]) for r in (on_pg, on_sqlite))
    assert pg_result["recall"] == sqlite_result["recall"]
    assert pg_result["questions"] == 3 and pg_result["recall"]["3"]["overall"] == 1.0
    with Memory(pg_url, embedder="hashing") as m:  # the run's own tenant was emptied; the default one untouched
        assert texts(m.get_all(user_id="conv-pg")) == ["Someone else's memory"]
        assert m.stats()["memories"] == 1
