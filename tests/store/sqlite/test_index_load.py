"""A scope's index loaded from the store by a process that did not write it (a CLI
call, a second worker, a restart): it reads only what it ranks with, reads the rest
of a result when the result is first shown, and keeps it. What it shows must be what
the writing process shows, and must follow later writes of other processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memorist import Memory

NOTES = [
    ("Maya adopted a greyhound called Pixel", {"topic": "pets"}, "r1"),
    ("Maya runs a pottery class on Thursdays", {"topic": "hobbies"}, "r1"),
    ("Maya's greyhound Pixel hates thunderstorms", {"topic": "pets", "source": "chat"}, "r2"),
    ("Maya is learning the theremin", {"topic": "music"}, "r2"),
    ("Maya booked a lighthouse tour in Maine", {"topic": "travel"}, "r1"),
]


def shown(results: dict) -> list[tuple]:
    return [
        (r["id"], r["memory"], r["metadata"], r["created_at"], r["updated_at"], r.get("run_id"), round(r["score"], 6))
        for r in results["results"]
    ]


@pytest.fixture
def path(tmp_path: Path) -> str:
    db = str(tmp_path / "m.db")
    with Memory(db, embedder="hashing") as writer:
        for text, metadata, run in NOTES:
            writer.add(text, user_id="maya", run_id=run, metadata=metadata, infer=False)
    return db


@pytest.mark.parametrize("query", ["greyhound Pixel", "what does Maya do on Thursdays", "travel plans"])
def test_a_loaded_scope_shows_what_the_writing_process_shows(path: str, query: str) -> None:
    with Memory(path, embedder="hashing") as first, Memory(path, embedder="hashing") as again:
        want = shown(first.search(query, user_id="maya", limit=5))
        assert shown(again.search(query, user_id="maya", limit=5)) == want  # read when shown
        assert shown(again.search(query, user_id="maya", limit=5)) == want  # kept since
        assert [r[1] for r in shown(again.search(query, user_id="maya", run_id="r2", limit=5))] == [
            r[1] for r in want if r[5] == "r2"
        ]


def test_kept_results_follow_another_process_s_writes(path: str) -> None:
    with Memory(path, embedder="hashing") as reader, Memory(path, embedder="hashing") as writer:
        before = reader.search("greyhound Pixel", user_id="maya", limit=5)["results"]
        top, other = before[0], before[1]
        writer.update(top["id"], "Maya's greyhound Pixel sleeps on the sofa", metadata={"topic": "pets", "edited": True})
        writer.delete(other["id"])
        after = {r["id"]: r for r in reader.search("greyhound Pixel", user_id="maya", limit=5)["results"]}
        assert after[top["id"]]["memory"] == "Maya's greyhound Pixel sleeps on the sofa"
        assert after[top["id"]]["metadata"]["edited"] is True
        assert other["id"] not in after
        assert reader.get(top["id"])["memory"] == "Maya's greyhound Pixel sleeps on the sofa"


def test_a_loaded_scope_whose_memories_another_process_deleted_shows_none(path: str) -> None:
    with Memory(path, embedder="hashing") as reader, Memory(path, embedder="hashing") as writer:
        hits = reader.search("greyhound", user_id="maya", limit=5)["results"]
        assert hits
        writer.delete_all(user_id="maya")
        assert reader.search("greyhound", user_id="maya", limit=5)["results"] == []


@pytest.mark.parametrize("shown_first", [2, 5])
def test_a_loaded_scope_erased_by_another_process_shows_nothing_of_it(path: str, shown_first: int) -> None:
    """An erasure deletes the rows and names none of them in the log (it keeps no
    trace of their text): a reader that had loaded the scope, and kept some of its
    results, reloads it instead of catching up."""
    with Memory(path, embedder="hashing") as reader, Memory(path, embedder="hashing") as writer:
        kept = reader.search("greyhound Pixel", user_id="maya", limit=shown_first)["results"]
        assert len(kept) == shown_first
        writer.erase(user_id="maya")
        assert reader.search("greyhound Pixel", user_id="maya", limit=5)["results"] == []
        assert reader.search("greyhound Pixel", user_id="maya", run_id="r1", limit=5)["results"] == []
        assert reader.get_all(user_id="maya")["results"] == []


def test_a_scope_adopted_into_a_tenant_by_another_process_is_left_by_its_reader(path: str) -> None:
    """keys adopt moves a scope's memories into a tenant without an event naming each:
    the reader's index of the old scope reloads, and finds them under the new one."""
    from memorist.model import Scope

    with Memory(path, embedder="hashing") as writer, writer.store.transaction() as batch:
        batch.event("note", Scope("acme", "maya", ""))  # acme/maya exists: the adopt merges into it
    with (
        Memory(path, embedder="hashing") as reader,
        Memory(path, embedder="hashing", tenant_id="acme") as acme,
        Memory(path, embedder="hashing") as writer,
    ):
        assert reader.search("greyhound Pixel", user_id="maya", limit=2)["results"]
        assert acme.search("greyhound Pixel", user_id="maya", limit=2)["results"] == []  # loaded, empty
        assert writer.store.adopt([("", "acme")])["memories"] == len(NOTES)
        assert reader.search("greyhound Pixel", user_id="maya", limit=5)["results"] == []
        moved = acme.search("greyhound Pixel", user_id="maya", limit=5)["results"]
        assert {r["memory"] for r in moved} >= {"Maya adopted a greyhound called Pixel"}


def test_a_result_first_shown_inside_a_rolled_back_write_is_not_kept(path: str) -> None:
    import time

    with Memory(path, embedder="hashing") as m:
        m.search("theremin", user_id="maya", limit=1)  # the scope loaded, one result shown
        target = next(r for r in m.get_all(user_id="maya")["results"] if "called Pixel" in r["memory"])
        with pytest.raises(RuntimeError), m.store.transaction() as batch:
            record = batch.get_many([target["id"]])[target["id"]]
            batch.update(record.copy(text="Uncommitted greyhound text", updated_at=time.time()), None, old_text=record.text)
            inside = m.search("greyhound Pixel", user_id="maya", limit=5)["results"]
            assert "Uncommitted greyhound text" in {r["memory"] for r in inside}  # the write's own view
            raise RuntimeError("roll back")
        after = {r["id"]: r["memory"] for r in m.search("greyhound Pixel", user_id="maya", limit=5)["results"]}
        assert after[target["id"]] == "Maya adopted a greyhound called Pixel"
