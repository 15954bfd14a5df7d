"""Stores written by release 0.2.0 keep their learners' playbooks under the name they
have now.

Release 0.2.0 stored the per-learner preset's playbooks under the method's former
name (memorist.reserved.PREVIOUS_PER_LEARNER_PLAYBOOK), which `playbook list` showed
and `playbook get` needed. The fixtures (tests/fixtures/legacy-0.2.0.db and
legacy-0.2.0-postgres.sql, written by make_legacy_020.py against that release) hold:
learner lee's playbook (two strategies, two versions, a trajectory curated into it, a
grant of it to agent coach), and learner kim's, beside a playbook kim had named
"per-learner" herself.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from memorist import Memory
from memorist.ace.playbook import Playbook
from memorist.pipelines.trajectories import RUN_REFLECTIONS
from memorist.reserved import PER_LEARNER_PLAYBOOK, PREVIOUS_PER_LEARNER_PLAYBOOK, RENAMED_APART_PLAYBOOK
from memorist.store.base import ScopeFilter

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
OLD = PREVIOUS_PER_LEARNER_PLAYBOOK


def _patterns(book: dict) -> dict[str, list[str]]:
    return {category: [s["pattern"] for s in items] for category, items in book["strategies"].items() if items}


def _renamed(memory: Memory) -> None:
    learning = memory.learning
    lee = dict(user_id="lee", scope="user")
    assert [p["name"] for p in learning.list_playbooks(**lee)] == [PER_LEARNER_PLAYBOOK]
    book = learning.get_playbook(PER_LEARNER_PLAYBOOK, **lee)
    assert _patterns(book) == {
        "helpful": ["Use the fraction bars; it helped the learner"],
        "harmful": ["Avoid drawing it as pizza slices; it confused the learner"],
    }
    assert learning.get_playbook(OLD, **lee) == book  # the former name still reads it
    assert [v["version"] for v in learning.list_playbook_versions(PER_LEARNER_PLAYBOOK, **lee)] == [1, 2]
    # kim named a playbook "per-learner" herself: it keeps the name, her learner's one is set apart.
    kim = dict(user_id="kim", scope="user")
    assert [p["name"] for p in learning.list_playbooks(**kim)] == [PER_LEARNER_PLAYBOOK, RENAMED_APART_PLAYBOOK]
    assert _patterns(learning.get_playbook(PER_LEARNER_PLAYBOOK, **kim)) == {"helpful": ["Her own strategy"]}
    assert _patterns(learning.get_playbook(RENAMED_APART_PLAYBOOK, **kim)) == {
        "helpful": ["Use counting the rows of dots; it helped the learner"]}
    # The grants of both learners' playbooks to agent coach follow them; kim's own is not granted.
    coach = memory.as_subject(agent_id="coach").learning
    assert _patterns(coach.get_playbook(PER_LEARNER_PLAYBOOK, **lee)) == _patterns(book)
    assert _patterns(coach.get_playbook(RENAMED_APART_PLAYBOOK, **kim)) == {
        "helpful": ["Use counting the rows of dots; it helped the learner"]}
    assert _patterns(coach.get_playbook(PER_LEARNER_PLAYBOOK, **kim)) == {}
    assert sorted(tuple(item["object"]) for item in memory.relations.list()["results"]) == [
        ("playbook", f"user:kim/{RENAMED_APART_PLAYBOOK}"), ("playbook", f"user:lee/{PER_LEARNER_PLAYBOOK}")]
    # The trajectory's reflection was curated into lee's playbook: not twice.
    (reflection,) = memory.store.list(ScopeFilter("", "lee", "", RUN_REFLECTIONS))
    again = learning.curate_playbook([reflection.id], PER_LEARNER_PLAYBOOK, **lee)
    assert again["skipped"] == [reflection.id] and again["reflections"] == []


def _learns_on(memory: Memory) -> None:
    """The tutor keeps teaching lee's playbook, and a rollback keeps its strategies in it."""
    Playbook(memory).run_turn({
        "messages": [{"role": "user", "content": "What is 3/4 - 1/2?"}], "learner_id": "lee", "conversation_id": "c3",
        "feedback": "Lining up the number lines helped", "outcome": "success"})
    lee = dict(user_id="lee", scope="user")
    assert [p["name"] for p in memory.learning.list_playbooks(**lee)] == [PER_LEARNER_PLAYBOOK]
    assert len(memory.learning.get_playbook(PER_LEARNER_PLAYBOOK, **lee)["strategies"]["helpful"]) == 2
    memory.learning.rollback_playbook(PER_LEARNER_PLAYBOOK, 1, **lee)
    assert _patterns(memory.learning.get_playbook(PER_LEARNER_PLAYBOOK, **lee)) == {
        "helpful": ["Use the fraction bars; it helped the learner"]}
    # kim's set-apart playbook rolls back into itself, not into her own "per-learner".
    kim = dict(user_id="kim", scope="user")
    memory.learning.rollback_playbook(RENAMED_APART_PLAYBOOK, 1, **kim)
    assert _patterns(memory.learning.get_playbook(PER_LEARNER_PLAYBOOK, **kim)) == {"helpful": ["Her own strategy"]}
    assert _patterns(memory.learning.get_playbook(RENAMED_APART_PLAYBOOK, **kim)) == {
        "helpful": ["Use counting the rows of dots; it helped the learner"]}


def test_a_sqlite_store_of_release_0_2_0_names_its_learners_playbooks_as_now(tmp_path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "legacy-0.2.0.db", path)
    with Memory(str(path)) as memory:
        _renamed(memory)
        assert memory.check()["healthy"], memory.check()["problems"]
    raw = sqlite3.connect(path)
    # Only the versions' snapshots (history, as written) keep the former name.
    left = raw.execute("SELECT DISTINCT kind FROM memories WHERE instr(metadata, ?) > 0 OR instr(text, ?) > 0", (OLD, OLD)).fetchall()
    assert left == [("playbook_version",)]
    assert raw.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", (OLD,)).fetchone()[0] == 0
    raw.close()
    with Memory(str(path)) as memory:  # opening again changes nothing
        _renamed(memory)
        _learns_on(memory)


def test_a_postgres_store_of_release_0_2_0_names_its_learners_playbooks_as_now(pg_url) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute((FIXTURES / "legacy-0.2.0-postgres.sql").read_text())
    with Memory(pg_url) as memory:
        _renamed(memory)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        left = conn.execute("SELECT DISTINCT kind FROM memorist.memories WHERE strpos(metadata, %s) > 0 OR strpos(text, %s) > 0",
                            (OLD, OLD)).fetchall()
        assert left == [("playbook_version",)]
        assert conn.execute("SELECT count(*) FROM memorist.memories WHERE terms @@ to_tsquery('simple', %s)", (OLD,)).fetchone()[0] == 0
        headers = conn.execute("SELECT speaker FROM memorist.memories WHERE kind = 'playbook' ORDER BY speaker").fetchall()
        assert headers == [(PER_LEARNER_PLAYBOOK,), (PER_LEARNER_PLAYBOOK,), (RENAMED_APART_PLAYBOOK,)]  # a header's name
        # The renamed labels' terms are counted in their space's BM25 statistics.
        drift = conn.execute(
            "SELECT count(*) FROM memorist.spaces s WHERE s.doc_terms <> (SELECT coalesce(sum(term_count), 0) "
            "FROM memorist.memories m WHERE m.space_id = s.id AND m.status = 'active')").fetchone()[0]
        assert drift == 0
    with Memory(pg_url) as memory:
        _renamed(memory)
        _learns_on(memory)


@pytest.mark.parametrize("name", [OLD, PER_LEARNER_PLAYBOOK])
def test_a_new_store_names_the_learners_playbook_per_learner(tmp_path, name) -> None:
    with Memory(str(tmp_path / "new.db"), embedder="hashing") as memory:
        Playbook(memory, preset=name if name == OLD else "per-learner").run_turn({
            "messages": [{"role": "user", "content": "How do I add 1/2 + 1/3?"}], "learner_id": "lee",
            "conversation_id": "c1", "feedback": "The fraction bars helped me", "outcome": "success"})
        assert [p["name"] for p in memory.learning.list_playbooks(user_id="lee", scope="user")] == [PER_LEARNER_PLAYBOOK]
        rows = memory.store.list(ScopeFilter("", "lee", None, None))
        assert rows and not [r for r in rows if OLD in r.text or OLD in str(r.metadata)]
        # A grant that names it by its former name grants it.
        memory.relations.create(("agent", "coach"), "viewer", ("playbook", f"user:lee/{name}"))
        assert [tuple(i["object"]) for i in memory.relations.list()["results"]] == [("playbook", f"user:lee/{PER_LEARNER_PLAYBOOK}")]
        book = memory.as_subject(agent_id="coach").learning.get_playbook(name, user_id="lee", scope="user")
        assert book["name"] == PER_LEARNER_PLAYBOOK and book["strategies"]["helpful"]
