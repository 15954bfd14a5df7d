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


def test_a_loaded_scope_erased_shows_nothing_of_what_was_erased(path: str) -> None:
    with Memory(path, embedder="hashing") as reader, Memory(path, embedder="hashing") as writer:
        hits = reader.search("greyhound", user_id="maya", limit=5)["results"]
        assert hits
        writer.delete_all(user_id="maya")
        assert reader.search("greyhound", user_id="maya", limit=5)["results"] == []
