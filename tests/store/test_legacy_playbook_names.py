"""Stores written by release 0.2.0 keep their learners' playbooks under the name they
have now.

Release 0.2.0 stored the per-learner preset's playbooks under the method's former
name (memorist.reserved.PREVIOUS_PER_LEARNER_PLAYBOOK), which `playbook list` showed
and `playbook get` needed. The fixtures (tests/fixtures/legacy-0.2.0.db,
legacy-0.2.0-postgres.sql and lee's export legacy-0.2.0-lee.jsonl, written by
make_legacy_020.py against that release) hold:

- lee: a learner's playbook, a task curated into it, then replaced by hand (an
  undoable curation), granted to agent coach;
- kim: a learner's playbook beside two she named "per-learner" and "per-learner-own"
  by hand, the first replaced by hand (an undoable curation); the learner's one
  granted to coach;
- dan: a playbook he named "per-learner", granted to coach and deleted, then a
  learner's playbook;
- zed: a grant to coach of a "per-learner" playbook he never wrote, then a
  learner's playbook;
- a global playbook named "per-learner" by hand, which coach may edit and lee ran a
  task with;
- eve: a fact whose text and metadata name the former name;
- tenant acme: a tenant-wide playbook under the former name.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from memorist import ImportLineError, Memory
from memorist.ace.playbook import Playbook
from memorist.pipelines.trajectories import RUN_REFLECTIONS
from memorist.reserved import OWN_PLAYBOOK, PER_LEARNER_PLAYBOOK, PREVIOUS_PER_LEARNER_PLAYBOOK
from memorist.store.base import ScopeFilter

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
OLD = PREVIOUS_PER_LEARNER_PLAYBOOK
NEW = PER_LEARNER_PLAYBOOK
LEE, KIM, DAN = (dict(user_id=user, scope="user") for user in ("lee", "kim", "dan"))


def _patterns(book: dict) -> dict[str, list[str]]:
    return {category: sorted(s["pattern"] for s in items) for category, items in book["strategies"].items() if items}


def _names(memory: Memory, ids: dict) -> list[str]:
    return [p["name"] for p in memory.learning.list_playbooks(**ids)]


def _turn(memory: Memory, learner: str, feedback: str) -> None:
    Playbook(memory).run_turn({"messages": [{"role": "user", "content": "What is 3/4 - 1/2?"}], "learner_id": learner,
                               "conversation_id": "after", "feedback": feedback, "outcome": "success"})


def _renamed(memory: Memory, target: str) -> None:
    learning = memory.learning
    assert _names(memory, LEE) == [NEW]
    book = learning.get_playbook(NEW, **LEE)
    assert _patterns(book) == {"helpful": ["Only this"]}
    assert learning.get_playbook(OLD, **LEE) == book  # the former name still reads it
    assert len(learning.list_playbook_versions(NEW, **LEE)) >= 3
    # kim's learner's playbook takes the name; the ones she named by hand move aside.
    assert _names(memory, KIM) == [NEW, OWN_PLAYBOOK, f"{OWN_PLAYBOOK}-2"]
    assert _patterns(learning.get_playbook(NEW, **KIM)) == {"helpful": ["Use counting the rows of dots; it helped the learner"]}
    assert _patterns(learning.get_playbook(f"{OWN_PLAYBOOK}-2", **KIM)) == {"helpful": ["Her replacement"]}
    assert _patterns(learning.get_playbook(OWN_PLAYBOOK, **KIM)) == {"helpful": ["Her other strategy"]}
    # The grants follow the playbooks they were given on: coach never sees what was not granted.
    coach = memory.as_subject(agent_id="coach").learning
    assert _patterns(coach.get_playbook(NEW, **LEE)) == _patterns(book)
    assert _patterns(coach.get_playbook(NEW, **KIM)) == {"helpful": ["Use counting the rows of dots; it helped the learner"]}
    assert _patterns(coach.get_playbook(f"{OWN_PLAYBOOK}-2", **KIM)) == {}
    assert _names(memory, DAN) == [NEW]
    assert _patterns(learning.get_playbook(NEW, **DAN)) == {"helpful": ["Use songs; it helped the learner"]}
    assert _patterns(coach.get_playbook(NEW, **DAN)) == {}  # the grant was of dan's own, deleted, playbook
    assert _patterns(learning.get_playbook(NEW, user_id="zed", scope="user")) == {"helpful": ["Use stories; it helped the learner"]}
    assert _patterns(coach.get_playbook(NEW, user_id="zed", scope="user")) == {}  # the grant was of one he never wrote
    assert sorted(tuple(item["object"]) for item in memory.relations.list()["results"]) == [
        ("playbook", f"global/{NEW}"), ("playbook", f"user:dan/{OWN_PLAYBOOK}"), ("playbook", f"user:kim/{NEW}"),
        ("playbook", f"user:lee/{NEW}"), ("playbook", f"user:zed/{OWN_PLAYBOOK}")]
    # The global playbook named so by hand keeps its name, its grant and the tasks run with it,
    # whatever another tenant's own tenant-wide playbook was called.
    assert _names(memory, dict(scope="global")) == [NEW]
    assert "Everyone's tip" in _patterns(learning.get_playbook(NEW, scope="global"))["helpful"]
    tasks = {t["task_description"]: t["playbook"] for t in learning.query_trajectories(user_id="lee")}
    assert tasks == {"practise decimals": NEW, "practise fractions": NEW}
    with Memory(target, tenant_id="acme") as acme:
        assert _names(acme, dict(scope="tenant")) == [NEW]
    # A fact is the user's own words: never renamed.
    (fact,) = memory.get_all(user_id="eve")["results"]
    assert (fact["memory"], fact["metadata"]) == ("My project is called ltmbse", {"playbook": OLD, "note": OLD})
    # The task's reflection was curated into lee's playbook: not twice.
    (reflection,) = [r for r in memory.store.list(ScopeFilter("", "lee", "", RUN_REFLECTIONS)) if "practise fractions" in r.text]
    again = learning.curate_playbook([reflection.id], NEW, **LEE)
    assert again["skipped"] == [reflection.id] and again["reflections"] == []


def _learns_on(memory: Memory) -> None:
    """Undo, rollback, grants and the tutor go on with the renamed playbooks."""
    learning = memory.learning
    memory.as_subject(agent_id="coach").learning.update_playbook([{"pattern": "Coach's tip"}], NEW, scope="global")
    assert _patterns(learning.get_playbook(NEW, scope="global")) == {"helpful": ["Coach's tip", "Everyone's tip"]}
    # Undoing lee's replacement (made by release 0.2.0) brings the learner's strategies back into it.
    (replaced,) = [e["seq"] for e in memory.events(user_id="lee") if e["event"].lower() == "curation"][-1:]
    memory.rollback(replaced, user_id="lee")
    assert _patterns(learning.get_playbook(NEW, **LEE)) == {
        "helpful": ["Use the fraction bars; it helped the learner"],
        "harmful": ["Avoid drawing it as pizza slices; it confused the learner"]}
    _turn(memory, "lee", "Lining up the number lines helped")
    assert _names(memory, LEE) == [NEW]
    assert len(learning.get_playbook(NEW, **LEE)["strategies"]["helpful"]) == 2
    learning.rollback_playbook(NEW, 1, **LEE)
    assert _patterns(learning.get_playbook(NEW, **LEE)) == {"helpful": ["Use the fraction bars; it helped the learner"]}
    # Undoing kim's replacement (made by release 0.2.0 under the name her playbook had then)
    # brings her strategy back into her playbook, not into the learner's that took its name.
    (replaced,) = [e["seq"] for e in memory.events(user_id="kim") if e["event"].lower() == "curation"][-1:]
    memory.rollback(replaced, user_id="kim")
    assert _patterns(learning.get_playbook(f"{OWN_PLAYBOOK}-2", **KIM)) == {"helpful": ["Her own strategy"]}
    assert _patterns(learning.get_playbook(NEW, **KIM)) == {"helpful": ["Use counting the rows of dots; it helped the learner"]}
    assert _names(memory, KIM) == [NEW, OWN_PLAYBOOK, f"{OWN_PLAYBOOK}-2"]
    # kim's tutor goes on in her learner's playbook; hers stay as she left them.
    _turn(memory, "kim", "Drawing arrays helped")
    assert len(learning.get_playbook(NEW, **KIM)["strategies"]["helpful"]) == 2
    assert _patterns(learning.get_playbook(f"{OWN_PLAYBOOK}-2", **KIM)) == {"helpful": ["Her own strategy"]}


def test_a_sqlite_store_of_release_0_2_0_names_its_learners_playbooks_as_now(tmp_path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "legacy-0.2.0.db", path)
    with Memory(str(path)) as memory:
        _renamed(memory, str(path))
        assert memory.check()["healthy"], memory.check()["problems"]
    raw = sqlite3.connect(path)
    # Only the versions' snapshots (history, as written) and eve's fact keep the former name.
    left = raw.execute("SELECT DISTINCT kind FROM memories WHERE instr(metadata, ?) > 0 OR instr(text, ?) > 0 ORDER BY kind",
                       (OLD, OLD)).fetchall()
    assert left == [("fact",), ("playbook_version",)]
    assert raw.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", (OLD,)).fetchone()[0] == 1  # eve's fact
    raw.close()
    with Memory(str(path)) as memory:  # opening again changes nothing
        _renamed(memory, str(path))
        _learns_on(memory)


def test_a_postgres_store_of_release_0_2_0_names_its_learners_playbooks_as_now(pg_url) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute((FIXTURES / "legacy-0.2.0-postgres.sql").read_text())
    with Memory(pg_url) as memory:
        _renamed(memory, pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        left = conn.execute("SELECT DISTINCT kind FROM memorist.memories WHERE strpos(metadata, %s) > 0 OR strpos(text, %s) > 0 "
                            "ORDER BY kind", (OLD, OLD)).fetchall()
        assert left == [("fact",), ("playbook_version",)]
        assert conn.execute("SELECT count(*) FROM memorist.memories WHERE terms @@ to_tsquery('simple', %s)", (OLD,)).fetchone()[0] == 1
        headers = conn.execute("SELECT speaker, metadata FROM memorist.memories WHERE kind = 'playbook'").fetchall()
        assert len(headers) >= 8 and all(speaker == json.loads(meta)["name"] for speaker, meta in headers)  # a header's name
        # The renamed labels' terms are counted in their space's BM25 statistics.
        drift = conn.execute(
            "SELECT count(*) FROM memorist.spaces s WHERE s.doc_terms <> (SELECT coalesce(sum(term_count), 0) "
            "FROM memorist.memories m WHERE m.space_id = s.id AND m.status = 'active')").fetchone()[0]
        assert drift == 0
    with Memory(pg_url) as memory:
        _renamed(memory, pg_url)
        _learns_on(memory)


def test_an_export_of_release_0_2_0_imports_under_the_current_name(tmp_path) -> None:
    with Memory(str(tmp_path / "new.db"), embedder="hashing") as memory:
        memory.import_(str(FIXTURES / "legacy-0.2.0-lee.jsonl"))
        assert _names(memory, LEE) == [NEW]
        book = memory.learning.get_playbook(OLD, **LEE)
        assert book["name"] == NEW and _patterns(book) == {"helpful": ["Only this"]} and book["version"] >= 3
        _turn(memory, "lee", "Lining up the number lines helped")  # found again by its address: still one playbook
        assert _names(memory, LEE) == [NEW]
        rows = memory.store.list(ScopeFilter("", "lee", None, None))
        assert not [r for r in rows if r.kind.value != "playbook_version" and (OLD in r.text or OLD in json.dumps(r.metadata))]


def test_an_export_of_release_0_2_0_with_two_playbooks_of_one_name_makes_one(tmp_path, caplog) -> None:
    """kim's export holds her learner's playbook (the former name, now "per-learner")
    and one she named "per-learner" herself: a scope holds one playbook of a name, so
    the second joins the first (its strategies added, its header left out) with a
    warning; opening her store instead keeps them apart (the tests above)."""
    with Memory(str(tmp_path / "new.db"), embedder="hashing") as memory, caplog.at_level("WARNING", "memorist.import"):
        counts = memory.import_(str(FIXTURES / "legacy-0.2.0-kim.jsonl"))
        assert counts["skipped"] >= 1
        assert _names(memory, KIM) == [NEW, OWN_PLAYBOOK]
        assert _patterns(memory.learning.get_playbook(NEW, **KIM)) == {
            "helpful": ["Her replacement", "Use counting the rows of dots; it helped the learner"]}
    assert "the playbook 'per-learner' of user 'kim' is there already" in caplog.text


def test_a_backup_restored_after_its_playbook_was_made_again_joins_it(tmp_path, caplog) -> None:
    with Memory(str(tmp_path / "a.db"), embedder="hashing") as memory:
        _turn(memory, "lee", "The fraction bars helped me")
        backup = "".join(json.dumps(item) + "\n" for item in memory.export(user_id="lee"))
        (tmp_path / "lee.jsonl").write_text(backup)
        # Deleted and made again: the backup's playbook is the deleted one, which stays deleted.
        memory.learning.delete_playbook(NEW, **LEE)
        _turn(memory, "lee", "Drawing it helped me")
        counts = memory.import_(str(tmp_path / "lee.jsonl"))
        assert counts["added"] == 0 and _names(memory, LEE) == [NEW]
        assert _patterns(memory.learning.get_playbook(NEW, **LEE)) == {"helpful": ["Use drawing it; it helped the learner"]}
    with Memory(str(tmp_path / "b.db"), embedder="hashing") as memory, caplog.at_level("WARNING", "memorist.import"):
        _turn(memory, "lee", "Drawing it helped me")  # the same playbook, other ids
        memory.import_(str(tmp_path / "lee.jsonl"))
        assert _names(memory, LEE) == [NEW]  # one header: the store's
        book = memory.learning.get_playbook(NEW, **LEE)
        assert _patterns(book) == {"helpful": ["Use drawing it; it helped the learner", "Use the fraction bars; it helped the learner"]}
        # The file's versions are left out; the join is a version of its own, so a
        # rollback to the current version keeps the strategies that joined.
        assert [v["version"] for v in memory.learning.list_playbook_versions(NEW, **LEE)] == [1, 2]
        joined = memory.learning.get_playbook_version(NEW, 2, **LEE)
        assert (joined["reason"], _patterns(joined)) == ("import", _patterns(book))
        assert "nothing to roll back" in memory.learning.rollback_playbook(NEW, 2, **LEE)["message"]
        memory.learning.rollback_playbook(NEW, 1, **LEE)
        assert _patterns(memory.learning.get_playbook(NEW, **LEE)) == {"helpful": ["Use drawing it; it helped the learner"]}
        memory.learning.rollback_playbook(NEW, 2, **LEE)  # the joined strategies come back
        assert _patterns(memory.learning.get_playbook(NEW, **LEE)) == _patterns(book)
        _turn(memory, "lee", "Lining up the number lines helped")
        assert _names(memory, LEE) == [NEW]
    assert "joins it" in caplog.text


def test_a_playbook_exported_and_imported_is_the_same_playbook(tmp_path) -> None:
    with Memory(str(tmp_path / "a.db"), embedder="hashing") as memory:
        _turn(memory, "lee", "The fraction bars helped me")
        before = memory.learning.get_playbook(NEW, **LEE)
        (tmp_path / "lee.jsonl").write_text("".join(json.dumps(item) + "\n" for item in memory.export(user_id="lee")))
    with Memory(str(tmp_path / "b.db"), embedder="hashing") as memory:
        memory.import_(str(tmp_path / "lee.jsonl"))
        after = memory.learning.get_playbook(NEW, **LEE)
        assert (after["playbook_id"], after["version"], _patterns(after)) == (before["playbook_id"], before["version"], _patterns(before))
        memory.learning.update_playbook([{"pattern": "Check by estimating"}], NEW, **LEE)
        assert _names(memory, LEE) == [NEW]
        assert memory.learning.get_playbook(NEW, **LEE)["version"] == before["version"] + 1


def test_a_new_store_names_the_learners_playbook_per_learner(tmp_path) -> None:
    for preset in (OLD, "per-learner"):
        with Memory(str(tmp_path / f"{preset}.db"), embedder="hashing") as memory:
            Playbook(memory, preset=preset).run_turn({
                "messages": [{"role": "user", "content": "How do I add 1/2 + 1/3?"}], "learner_id": "lee",
                "conversation_id": "c1", "feedback": "The fraction bars helped me", "outcome": "success"})
            assert _names(memory, LEE) == [NEW]
            rows = memory.store.list(ScopeFilter("", "lee", None, None))
            assert rows and not [r for r in rows if OLD in r.text or OLD in json.dumps(r.metadata)]
            # A grant that names it by its former name grants it.
            memory.relations.create(("agent", "coach"), "viewer", ("playbook", f"user:lee/{OLD}"))
            assert [tuple(i["object"]) for i in memory.relations.list()["results"]] == [("playbook", f"user:lee/{NEW}")]
            book = memory.as_subject(agent_id="coach").learning.get_playbook(OLD, **LEE)
            assert book["name"] == NEW and book["strategies"]["helpful"]


def test_a_playbook_joins_across_import_batches(tmp_path) -> None:
    """The header and its strategies may fall in different batches of an import."""
    from memorist.pipelines.transfer import IMPORT_BATCH

    with Memory(str(tmp_path / "a.db"), embedder="hashing") as memory:
        memory.add([{"role": "user", "content": f"Note {i}"} for i in range(IMPORT_BATCH - 1)], user_id="lee", infer=False)
        _turn(memory, "lee", "The fraction bars helped me")
        lines = [json.dumps(item) for item in memory.export(user_id="lee")]
    assert len(lines) > IMPORT_BATCH
    (tmp_path / "lee.jsonl").write_text("\n".join(lines) + "\n")
    with Memory(str(tmp_path / "b.db"), embedder="hashing") as memory:
        _turn(memory, "lee", "Drawing it helped me")
        memory.import_(str(tmp_path / "lee.jsonl"))
        assert _names(memory, LEE) == [NEW]
        assert len(memory.learning.get_playbook(NEW, **LEE)["strategies"]["helpful"]) == 2
        assert len(memory.get_all(user_id="lee", limit=1000)["results"]) == IMPORT_BATCH - 1


def test_a_whole_tenant_export_with_tenant_and_global_playbooks_imports(tmp_path) -> None:
    """A tenant's or the global playbook's strategies belong to no user, agent or run."""
    with Memory(str(tmp_path / "a.db"), embedder="hashing") as memory:
        memory.learning.update_playbook([{"pattern": "Cite the source"}], "house-style", scope="tenant")
        memory.learning.update_playbook([{"pattern": "Be kind"}], "manners", scope="global")
        _turn(memory, "lee", "The fraction bars helped me")
        lines = "".join(json.dumps(item) + "\n" for item in memory.export(all_scopes=True))
    (tmp_path / "all.jsonl").write_text(lines)
    with Memory(str(tmp_path / "b.db"), embedder="hashing") as memory:
        memory.import_(str(tmp_path / "all.jsonl"))
        assert _patterns(memory.learning.get_playbook("house-style", scope="tenant")) == {"helpful": ["Cite the source"]}
        assert _patterns(memory.learning.get_playbook("manners", scope="global")) == {"helpful": ["Be kind"]}
        assert _names(memory, LEE) == [NEW]
        assert memory.import_(str(tmp_path / "all.jsonl"))["added"] == 0  # again: nothing new


def test_a_tenants_strategies_stay_the_tenants_when_an_import_names_a_user(tmp_path) -> None:
    with Memory(str(tmp_path / "a.db"), embedder="hashing") as memory:
        memory.learning.update_playbook([{"pattern": "Cite the source"}], "house-style", scope="tenant")
        memory.add("I like tea", user_id="lee", infer=False)
        items = list(memory.export(all_scopes=True))
    (tmp_path / "all.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items))
    fact = {**next(i for i in items if i.get("user_id") == "lee"), "id": "f-1", "user_id": None, "section": "x"}
    (tmp_path / "fact.jsonl").write_text(json.dumps(fact) + "\n")
    with Memory(str(tmp_path / "b.db"), embedder="hashing") as memory:
        memory.import_(str(tmp_path / "all.jsonl"), user_id="bob")  # the default user is for lines that name none
        assert _patterns(memory.learning.get_playbook("house-style", scope="tenant")) == {"helpful": ["Cite the source"]}
        assert _patterns(memory.learning.get_playbook("house-style", user_id="bob", scope="user")) == {}
        # A fact with a section is no strategy: naming no one, it is refused, not stored tenant-wide.
        with pytest.raises(ImportLineError, match="needs one of user_id, agent_id or run_id"):
            memory.import_(str(tmp_path / "fact.jsonl"))


def test_an_import_never_renames_a_playbook_onto_another(tmp_path) -> None:
    """A newer line of a header the store holds, naming another playbook of its scope
    (a file edited by hand), updates it without taking that name: a scope keeps one
    playbook of a name, and the strategies stay where they are."""
    with Memory(str(tmp_path / "a.db"), embedder="hashing") as memory:
        for name in ("alpha", "beta"):
            memory.learning.update_playbook([{"pattern": f"{name} tip"}], name, user_id="lee", scope="user")
        items = list(memory.export(user_id="lee"))
        header = next(i for i in items if i["run_id"] == "memorist:playbook" and i["metadata"]["name"] == "alpha")
        edited = {**header, "metadata": {**header["metadata"], "name": "beta", "description": "edited"},
                  "memory": "Playbook beta", "updated_at": "2030-01-01T00:00:00+00:00"}
        (tmp_path / "edited.jsonl").write_text(json.dumps(edited) + "\n")
        memory.import_(str(tmp_path / "edited.jsonl"))
        assert _names(memory, LEE) == ["alpha", "beta"]
        assert memory.learning.get_playbook("alpha", **LEE)["description"] == "edited"
        assert _patterns(memory.learning.get_playbook("beta", **LEE)) == {"helpful": ["beta tip"]}
