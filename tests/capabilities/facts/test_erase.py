"""Forgetting a person: Memory.erase on both backends.

A store is filled for two users in every capability (facts, an updated and a deleted
one, metadata, a test memory, a search, a playbook with versions, a trajectory with
steps and its reflection, minutes of the user's project, energy-tier state), one is
erased, and then: nothing of it is readable through any call, the other is exactly as
before (its export and its log compared), the erased events keep their shape, and no
byte of several distinctive strings (in texts, metadata, bullets, steps, minutes,
queries) is left in the store: the SQLite file and its -wal after the checkpoint, the
PostgreSQL tables' contents and their relation files. A positive control before the
erasure finds every one of them, so the scan is not blind.
"""

from __future__ import annotations

import glob
import json
import os
import sqlite3

import pytest

from memorist import Memory
from memorist.errors import NotFoundError, StoreError, ValidationError
from memorist.pipelines import tiers
from memorist.store.base import ScopeFilter

# One distinctive word per place the erased text lives (stems the full-text indexes
# keep unchanged, so their lower-case form is what an index would hold).
SECRETS = {
    "fact": "Zorvathk",
    "metadata": "Quillmesk",
    "updated_away": "Brontifax",
    "deleted_fact": "Plovnik",
    "bullet": "Skarnvelt",
    "task": "Drumqizz",
    "step": "Yelvorth",
    "minute_data": "Twinkrasp",
    "minute_note": "Glemmorq",
    "query": "Frobnaxt",
    "test_memory": "Hazzelqent",
    "agent_fact": "Krimpwolt",
}
KEPT = "Bobblestrux"  # the other user's: must still be there (the scan is not blind)


def _fill(m: Memory, user: str, words: dict[str, str]) -> None:
    m.add(f"My favourite word is {words['fact']}", user_id=user, infer=False, metadata={"code": words["metadata"]})
    changed = m.add(f"I once lived in {words['updated_away']}", user_id=user, infer=False)["results"][0]["id"]
    m.update(changed, "I once lived somewhere else", user_id=user)
    gone = m.add(f"My old password was {words['deleted_fact']}", user_id=user, infer=False)["results"][0]["id"]
    m.delete(gone, user_id=user)
    m.add(f"Testing {words['test_memory']}", user_id=user, infer=False, test=True)
    m.add(f"The tutor knows {words['agent_fact']}", user_id=user, agent_id="tutor", infer=False)
    m.search(f"what about {words['query']}", user_id=user)
    m.learning.update_playbook([{"pattern": f"Explain with {words['bullet']} diagrams"}], "study", user_id=user)
    m.learning.update_playbook([{"pattern": "Ask before answering"}], "study", user_id=user)
    tid = m.learning.start_trajectory(f"Solve the {words['task']} exercise", user_id=user)
    m.learning.log_step(tid, "action", f"Tried the {words['step']} approach", user_id=user)
    m.learning.complete_trajectory(tid, "success", 0.9, user_id=user)
    m.learning.reflect(tid, user_id=user)
    first = m.minutes.record("task_assigned", agent_id="planner", project_id=user, data={"task_id": "t1", "detail": words["minute_data"]})
    m.minutes.record("task_completed", agent_id="coder", project_id=user, data={"task_id": "t1", "success_criteria_met": 90},
                     context_references=[first["id"]], memory_note=f"Done with {words['minute_note']}")
    m.tiers.maintain(user_id=user)
    m.store.flush()


def _export(m: Memory, user: str) -> list[dict]:
    return sorted((json.dumps(x, sort_keys=True) for x in m.export(user_id=user, events=True)), key=str)  # type: ignore[return-value]


def _sqlite_bytes(path: str) -> bytes:
    data = b""
    for name in (path, path + "-wal"):
        if os.path.exists(name):
            with open(name, "rb") as handle:
                data += handle.read()
    return data


def _pg_bytes(m: Memory) -> tuple[bytes, bytes]:
    """The tables' contents as text, and the bytes of their relation files (heap,
    indexes, TOAST) read from the server's data directory after a checkpoint."""
    store = m.store
    tables = b""
    files = b""
    with store.connection() as conn:
        for table in ("memories", "embeddings", "events", "spaces", "meta"):
            for (row,) in conn.execute(f"SELECT t::text FROM {table} t"):
                tables += row.encode("utf-8") + b"\n"
        conn.execute("CHECKPOINT")
        directory = conn.execute("SHOW data_directory").fetchone()[0]
        relations = conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
            "UNION SELECT pg_relation_filepath(t.oid) FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid "
            "WHERE c.relnamespace = current_schema()::regnamespace "
            "UNION SELECT pg_relation_filepath(i.indexrelid) FROM pg_class c JOIN pg_index i ON i.indrelid = c.reltoastrelid "
            "WHERE c.relnamespace = current_schema()::regnamespace "
            # The planner's statistics sample the tables' values (with their TOAST table).
            "UNION SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.oid = 'pg_catalog.pg_statistic'::regclass "
            "OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = 'pg_catalog.pg_statistic'::regclass)"
        ).fetchall()
    for (relation,) in relations:
        if relation is None:
            continue
        for name in glob.glob(os.path.join(directory, relation) + "*"):
            with open(name, "rb") as handle:
                files += handle.read()
    return tables, files


def _scan(m: Memory, backend) -> dict[str, bytes]:
    if backend.name == "sqlite":
        m.store.flush()
        with m.store._lock:
            m.store._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        return {"file and -wal": _sqlite_bytes(m.store.path)}
    tables, files = _pg_bytes(m)
    return {"tables": tables, "relation files": files}


def _found(blobs: dict[str, bytes], word: str) -> list[str]:
    return [where for where, data in blobs.items() for form in (word, word.lower()) if form.encode("utf-8") in data]


@pytest.fixture
def filled(backend):
    m = Memory(backend.target, embedder="hashing", policy="energy")
    _fill(m, "alex", SECRETS)
    _fill(m, "bob", {k: f"{KEPT}{i}" if k == "fact" else f"Bobword{k.replace('_', '')}" for i, k in enumerate(SECRETS)})
    yield m
    m.close()


def test_the_store_writes_text_as_utf8_so_a_byte_scan_is_meaningful(filled, backend) -> None:
    if backend.name == "sqlite":
        with filled.store._lock:
            assert filled.store._conn.execute("PRAGMA encoding").fetchone()[0] == "UTF-8"
    else:
        with filled.store.connection() as conn:
            assert conn.execute("SHOW server_encoding").fetchone()[0] == "UTF8"
    blobs = _scan(filled, backend)
    missing = [word for word in SECRETS.values() if not all(_found({k: v}, word) for k, v in blobs.items())]
    assert not missing, f"the positive control must find every string in every scanned place before the erasure: {missing}"


def test_erase_forgets_everything_of_the_user_and_nothing_of_the_other(filled, backend) -> None:
    m = filled
    before = _export(m, "bob")
    alex_events = [(e["seq"], e["event"], e["memory_id"], e["user_id"], e["agent_id"]) for e in m.events(user_id="alex")]
    assert alex_events
    test_events = m.store.events(ScopeFilter(tiers.test_tenant(""), "alex"))  # the test memory's turn and add
    assert len(test_events) == 2

    preview = m.erase(user_id="alex", dry_run=True)
    assert preview["dry_run"] and preview["event"] is None
    assert m.get_all(user_id="alex")["results"], "a dry run changes nothing"
    users = m.stats()["users"]
    result = m.erase(user_id="alex")
    assert m.stats()["users"] == users - 1  # an erased user is not counted
    assert result["erased"] == preview["erased"]
    counts = result["erased"]
    assert counts["facts"] == 4  # the one kept, the updated one, the deleted one and the tutor's
    assert counts["test_memories"] == 1
    assert counts["playbook_bullets"] == 2 and counts["playbooks"] == 1 and counts["playbook_versions"] >= 2
    # reflections: the reflection, and the ledger of its task type's outcomes (it names the decisions)
    assert counts["trajectories"] >= 1 and counts["reflections"] == 2 and counts["minutes"] == 2
    assert result["events"] == len(alex_events) + len(test_events) and result["vectors"] > 0
    assert result["store"]["complete"] is True, result["store"]

    # Nothing of alex is readable any more.
    assert m.get_all(user_id="alex")["results"] == []
    assert m.get_all(user_id="alex", agent_id="tutor")["results"] == []
    assert m.search(SECRETS["fact"], user_id="alex")["results"] == []
    assert m.tiers.test_memories(user_id="alex")["results"] == []
    playbook = m.learning.get_playbook("study", user_id="alex")
    assert (playbook["playbook_id"], playbook["version"], playbook["size"]) == (None, 0, 0)
    assert m.learning.list_playbooks(user_id="alex") == []
    assert m.learning.query_trajectories(user_id="alex") == []
    assert m.minutes.recent(50, project_id="alex") == []
    assert m.minutes.history(project_id="alex")["minutes"] == []
    assert m.minutes.search("task", project_id="alex") == []
    exported = [json.loads(x) for x in _export(m, "alex")]
    assert all(x.get("type") == "event" for x in exported), "the export holds no memory of alex"

    # The log keeps each event's shape, without its text or payload.
    after = m.events(user_id="alex")
    assert [(e["seq"], e["event"], e["memory_id"], e["user_id"], e["agent_id"]) for e in after] == alex_events
    assert all(e["old_memory"] is None and e["new_memory"] is None and e["payload"] == {"erased": True} for e in after)
    erasures = m.store.events(None, ops=("erase",))
    assert len(erasures) == 1 and erasures[0].seq == result["event"]
    assert erasures[0].payload["erased"] == {"user_id": "alex"} and erasures[0].payload["counts"] == counts

    # The other user is exactly as before, and the store is sound.
    assert _export(m, "bob") == before
    if backend.name == "sqlite":
        report = m.check()
        assert report["healthy"], report["problems"]

    # Not a byte of alex's text is left in the store; bob's is.
    blobs = _scan(m, backend)
    leaks = {word: _found(blobs, word) for word in SECRETS.values() if _found(blobs, word)}
    assert not leaks, f"erased text still in the store: {leaks}"
    assert all(_found({k: v}, KEPT) for k, v in blobs.items())


def _pg_scan(m: Memory) -> dict[str, bytes]:
    return dict(zip(("tables", "relation files"), _pg_bytes(m), strict=True))


def test_no_statistic_the_database_sampled_before_keeps_the_erased_text(pg_url) -> None:
    """PostgreSQL's ANALYZE (autovacuum's, or an earlier erasure's) samples the tables'
    values into pg_statistic: the erasure rewrites that too."""
    scan = _pg_scan
    with Memory(pg_url, embedder="hashing") as m:
        for i in range(100):
            m.add(f"Quetzalgrimp visited the harbour {i}", user_id="bob", infer=False)
            m.add(f"An ordinary note {i}", user_id="carol", infer=False)
        with m.store.connection() as conn:
            conn.execute("ANALYZE")  # as autovacuum would
        assert _found(scan(m), "Quetzalgrimp")
        result = m.erase(user_id="bob")
        assert result["store"]["complete"] is True and result["store"]["statistics"] == "rewritten", result["store"]
        assert not _found(scan(m), "Quetzalgrimp")
        assert _found(scan(m), "ordinary")


def test_a_scrub_cut_short_after_the_erasure_committed_is_done_by_the_next_erasure(pg_url, monkeypatch) -> None:
    """A process that dies between the erasure's commit and the tables' rewrite leaves
    the text in dead row versions: the next erasure, even of someone already erased
    (no row changed), rewrites them, and the one after has nothing owed."""
    scan = _pg_scan
    with Memory(pg_url, embedder="hashing") as m:
        for i in range(50):
            m.add(f"Vorpelquist lives by the canal {i}", user_id="victim", infer=False)
            m.add(f"An ordinary note {i}", user_id="carol", infer=False)
        scrub = type(m.store)._scrub_tables

        def killed(self, conn):
            raise KeyboardInterrupt  # as the process killed right after the commit

        monkeypatch.setattr(type(m.store), "_scrub_tables", killed)
        with pytest.raises(KeyboardInterrupt):
            m.erase(user_id="victim")
        monkeypatch.setattr(type(m.store), "_scrub_tables", scrub)
        assert m.get_all(user_id="victim")["results"] == []
        assert _found(scan(m), "Vorpelquist"), "the cut scrub left the text in the files (what this test is about)"

    with Memory(pg_url, embedder="hashing") as m:  # another process, later
        again = m.erase(user_id="victim")
        assert sum(again["erased"].values()) == 0
        assert again["store"]["complete"] is True and again["store"]["vacuum"] == "full", again["store"]
        assert not _found(scan(m), "Vorpelquist")
        assert _found(scan(m), "ordinary")
        assert m.erase(user_id="victim")["store"]["vacuum"] == "not needed (no row changed)"


def test_erase_survives_reopening_and_a_second_erase_finds_nothing(filled, backend) -> None:
    filled.erase(user_id="alex")
    filled.close()
    with Memory(backend.target, embedder="hashing", policy="energy") as m:
        assert m.get_all(user_id="alex")["results"] == []
        again = m.erase(user_id="alex")
        assert sum(again["erased"].values()) == 0 and again["vectors"] == 0
        assert again["events"] > 0  # the tombstones are still the user's events
        assert again["store"]["complete"] is True
        assert again["store"]["vacuum"] in (False, "not needed (no row changed)"), "nothing changed: no rewrite of the store"
        assert len(m.store.events(None, ops=("erase",))) == 2  # each erasure is logged


def test_a_search_made_elsewhere_before_the_erasure_is_not_logged_after_it(backend) -> None:
    """Another process's buffered retrieval of the owner (its query, the erased ids)
    was written into the owner's space when it flushed, after the erasure."""
    with Memory(backend.target, embedder="hashing") as searcher:
        searcher.add("Alex was diagnosed with Qwertaxia last spring", user_id="alex", infer=False)
        searcher.add("Bob plays chess on Sundays", user_id="bob", infer=False)
        searcher.store.flush()
        assert searcher.search("what about my Zylophrenia treatment", user_id="alex")["results"]
        assert searcher.search("Queenside chess openings", user_id="bob")["results"]
        with Memory(backend.target, embedder="hashing") as eraser:
            assert eraser.erase(user_id="alex")["erased"]["facts"] == 1
        searcher.store.flush()  # what it still held is written now
    with Memory(backend.target, embedder="hashing") as m:
        assert _found(_scan(m, backend), "Zylophrenia") == []
        logged = [e["payload"]["query"] for e in m.events(user_id="bob") if e["event"] == "RETRIEVE"]
        assert logged == ["Queenside chess openings"]  # the others' retrievals are logged as before


def test_erasing_an_agent_or_a_run_takes_only_theirs(backend) -> None:
    with Memory(backend.target, embedder="hashing") as m:
        m.add("Alex alone knows Vexmorlk", user_id="alex", infer=False)
        m.add("The tutor told alex Quorlibt", user_id="alex", agent_id="tutor", infer=False)
        m.add("The tutor told sam Quorlibt too", user_id="sam", agent_id="tutor", infer=False)
        m.add("Run one said Dralvenk", user_id="sam", run_id="r1", infer=False)
        m.add("Run two said Plimzorg", user_id="sam", run_id="r2", infer=False)
        assert m.erase(agent_id="tutor")["erased"]["facts"] == 2
        assert [r["memory"] for r in m.get_all(user_id="alex")["results"]] == ["Alex alone knows Vexmorlk"]
        assert m.erase(user_id="sam", run_id="r1")["erased"]["facts"] == 1
        assert [r["memory"] for r in m.get_all(user_id="sam")["results"]] == ["Run two said Plimzorg"]


def test_erasing_a_run_takes_what_its_turns_changed_in_other_runs(backend) -> None:
    """A turn of one run may update or delete a memory another run made (reconciling
    is per user and agent, across conversations): the memory then holds that run's
    words, in rows of the other run. Erasing the run left them: erasing Tuesday kept
    "Plays chess every Sunday at the Plimzorg club", readable and in the file."""
    with Memory(backend.target, embedder="hashing") as m:
        m.add("I play chess.", user_id="alex", run_id="mon")
        changed = m.add("I play chess every Sunday at the Plimzorg club.", user_id="alex", run_id="tue")["results"]
        assert [(r["event"], r["memory"]) for r in changed] == [("UPDATE", "Plays chess every Sunday at the Plimzorg club")]
        m.add("I drink coffee.", user_id="alex", run_id="mon")
        dropped = m.add("I no longer drink coffee, Vexmorlk says it is bad.", user_id="alex", run_id="tue")["results"]
        assert "DELETE" in [r["event"] for r in dropped]
        m.add("I live in Lyon.", user_id="alex", run_id="wed")
        m.add("I live in Lyon.", user_id="alex", run_id="tue")  # a repeat: renews, writes no text of tue
        m.add("I play the flute.", user_id="sam", run_id="tue")  # another user's run of that name
        if backend.name == "sqlite":
            before = _sqlite_bytes(backend.target)
            assert b"Plimzorg" in before and b"Vexmorlk" in before  # the scan below is not blind
        planned = m.erase(user_id="alex", run_id="tue", dry_run=True)
        done = m.erase(user_id="alex", run_id="tue")
        assert (planned["erased"], planned["vectors"], planned["events"]) == (done["erased"], done["vectors"], done["events"])
        left = {r["memory"]: r["run_id"] for r in m.get_all(user_id="alex")["results"]}
        assert left == {"Lives in Lyon": "wed"}, left
        assert "Plimzorg" not in json.dumps(_export(m, "alex")) and "Vexmorlk" not in json.dumps(_export(m, "alex"))
        assert [r["memory"] for r in m.get_all(user_id="sam")["results"]] == ["Plays the flute"]
        if backend.name == "sqlite":
            assert m.check()["healthy"], m.check()["problems"]
            after = _sqlite_bytes(backend.target)
            assert b"Plimzorg" not in after and b"Vexmorlk" not in after
            assert b"Lyon" in after
        else:
            tables, files = _pg_bytes(m)
            for word in (b"Plimzorg", b"Vexmorlk"):
                assert word not in tables and word not in files
            assert b"Lyon" in tables


def test_erasing_a_run_takes_what_its_turns_changed_in_a_store_it_was_imported_into(backend, tmp_path) -> None:
    """An export carries no event: in the store it is imported into, the log names no
    turn of Tuesday's, and erasing Tuesday left the memory its turn had changed (it
    reads "Plimzorg" under Monday's run). The memory's lineage names the runs that
    changed it, and travels with it."""
    with Memory(str(tmp_path / "source.db"), embedder="hashing") as source:
        source.add("I play chess.", user_id="alex", run_id="mon")
        changed = source.add("I play chess every Sunday at the Plimzorg club.", user_id="alex", run_id="tue")["results"]
        assert [r["event"] for r in changed] == ["UPDATE"]
        source.add("I live in Lyon.", user_id="alex", run_id="wed")
        lines = list(source.export(all_scopes=True))
    assert [line["lineage"].get("changed_by_runs") for line in lines if "Plimzorg" in line["memory"]] == [["tue"]]
    with Memory(backend.target, embedder="hashing") as m:
        m.import_(lines)
        assert m.erase(user_id="alex", run_id="tue", dry_run=True)["erased"]["facts"] == 1
        done = m.erase(user_id="alex", run_id="tue")
        assert done["erased"]["facts"] == 1
        assert [r["memory"] for r in m.get_all(user_id="alex")["results"]] == ["Lives in Lyon"]
        assert m.erase(user_id="alex", run_id="mon")["erased"]["facts"] == 0  # (its memory is gone with Tuesday's words)
        if backend.name == "sqlite":
            assert b"Plimzorg" not in _sqlite_bytes(backend.target)
        else:
            tables, files = _pg_bytes(m)
            assert b"Plimzorg" not in tables and b"Plimzorg" not in files


def test_erasing_a_run_takes_what_a_memory_it_changed_was_consolidated_into(backend) -> None:
    """A memory Tuesday's turn changed, merged since into another by consolidation: the
    merged memory holds Tuesday's words too, and stayed when Tuesday was erased."""
    with Memory(backend.target, embedder="hashing") as m:
        m.add("I play chess.", user_id="kim", run_id="mon", importance=0.3)
        m.add("I play chess every Sunday at the Plimzorg club.", user_id="kim", run_id="tue")
        m.add("Plays chess every Sunday at the club", user_id="kim", run_id="mon", infer=False, importance=0.3)
        m.add("Lives in Lyon", user_id="kim", run_id="mon", infer=False)
        assert m.learning.consolidate(user_id="kim")["consolidated_count"] == 1
        planned = m.erase(user_id="kim", run_id="tue", dry_run=True)
        done = m.erase(user_id="kim", run_id="tue")
        assert (planned["erased"], planned["events"]) == (done["erased"], done["events"])
        assert [r["memory"] for r in m.get_all(user_id="kim")["results"]] == ["Lives in Lyon"]
        if backend.name == "sqlite":
            assert m.check()["healthy"], m.check()["problems"]
            assert b"Plimzorg" not in _sqlite_bytes(backend.target)
        else:
            tables, files = _pg_bytes(m)
            assert b"Plimzorg" not in tables and b"Plimzorg" not in files


def test_erase_takes_a_scope_and_a_boolean_dry_run(backend) -> None:
    with Memory(backend.target, embedder="hashing") as m:
        m.add("Kept", user_id="alex", infer=False)
        with pytest.raises(ValidationError, match="user_id"):
            m.erase()
        with pytest.raises(ValidationError, match="dry_run"):
            m.erase(user_id="alex", dry_run="yes")  # type: ignore[arg-type]
        assert len(m.get_all(user_id="alex")["results"]) == 1, "a refused erasure loses nothing"


def test_the_log_refuses_any_other_rewrite(backend) -> None:
    """The append-only rule lets an erasure's tombstone through, and nothing else."""
    with Memory(backend.target, embedder="hashing") as m:
        m.add("Some text", user_id="alex", infer=False)
        store = m.store
        if backend.name == "sqlite":
            def run(sql: str) -> None:
                with store._lock:
                    store._conn.execute("BEGIN IMMEDIATE")
                    try:
                        store._conn.execute(sql)
                    finally:
                        store._conn.execute("ROLLBACK")
            refused: type[Exception] = sqlite3.DatabaseError
        else:
            import psycopg

            def run(sql: str) -> None:
                with store.connection() as conn, conn.transaction():
                    conn.execute(sql)
                    raise psycopg.Rollback  # leaves the transaction, rolled back, without an error
            refused = psycopg.Error
        for sql in (
            "UPDATE events SET new_text = 'forged'",
            "UPDATE events SET payload = '{}'",
            "UPDATE events SET op = 'add', old_text = NULL, new_text = NULL, payload = '{\"erased\":true}'",
            "UPDATE events SET actor = 'x', old_text = NULL, new_text = NULL, payload = '{\"erased\":true}'",
            "UPDATE events SET ts = 0, old_text = NULL, new_text = NULL, payload = '{\"erased\":true}'",
        ):
            with pytest.raises(refused, match="append-only"):
                run(sql)
        run("UPDATE events SET old_text = NULL, new_text = NULL, payload = '{\"erased\":true}'")  # the tombstone: let through
        assert m.events(user_id="alex")[-1]["new_memory"] == "Some text"  # (and rolled back here)


@pytest.mark.sqlite_only("refuse_writes is the SQLite store's, for a damaged file")
def test_a_store_that_takes_no_write_erases_nothing(backend) -> None:
    with Memory(backend.target, embedder="hashing") as m:
        m.add("Still here", user_id="alex", infer=False)
        m.store.refuse_writes("damaged")
        with pytest.raises(StoreError, match="takes no write"):
            m.erase(user_id="alex")
        assert m.get_all(user_id="alex")["results"]


def test_an_erased_user_s_minute_is_not_found(filled) -> None:
    minute = filled.minutes.recent(1, project_id="alex")[0]
    filled.erase(user_id="alex")
    with pytest.raises(NotFoundError):
        filled.minutes.get(minute["id"])


@pytest.mark.sqlite_only("a reader of another connection holding SQLite's write-ahead log")
def test_a_log_another_reader_holds_is_reported_not_truncated_and_scrubbed_later(backend) -> None:
    m = Memory.from_config({"path": backend.target, "embedder": "hashing", "busy_timeout": 0.3})
    m.add("I love Fumblorx tea", user_id="zed", infer=False)
    m.add("Amy is here", user_id="amy", infer=False)
    m.store.flush()
    reader = sqlite3.connect(backend.target)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM memories").fetchone()[0] == 2  # a snapshot that pins the log
    try:
        result = m.erase(user_id="zed")
    finally:
        reader.execute("ROLLBACK")
        reader.close()
    assert result["store"]["complete"] is False and "not truncated" in result["store"]["log"]
    assert "still hold the text" in result["message"]
    assert m.get_all(user_id="zed")["results"] == [], "the erasure itself committed"
    m.close()  # the last connection's checkpoint takes the log into the rewritten file
    assert b"Fumblorx" not in _sqlite_bytes(backend.target)


def test_copies_of_the_user_s_memories_logged_in_a_wider_scope_go_too(backend) -> None:
    """A consolidation over an agent logs, in the agent's space, the memories it merged
    as they were (to undo it): the erased user's copies go; another user's stay."""
    with Memory(backend.target, embedder="hashing") as m:
        for text in ("Alex drinks Zorblatt tea every morning", "Alex drinks Zorblatt tea each morning"):
            m.add(text, user_id="alex", agent_id="tutor", infer=False)
        for text in ("Sam reads Quentrix books every night", "Sam reads Quentrix books each night"):
            m.add(text, user_id="sam", agent_id="tutor", infer=False)
        report = m.learning.consolidate(agent_id="tutor", min_importance=1.0)
        assert report["merged_count"] == 4
        runs = m.store.events(None, ops=("consolidation",))
        assert {tuple(s["scope"][1:3]) for e in runs for s in e.payload["undo"]["before"]} == {("alex", "tutor"), ("sam", "tutor")}
        assert all(e.scope.user_id == "" for e in runs), "logged in the agent's space, beyond alex's"

        preview = m.erase(user_id="alex", dry_run=True)
        result = m.erase(user_id="alex")
        assert result["events"] == preview["events"]
        after = {e.seq: e for e in m.store.events(None, ops=("consolidation",))}
        held = {e.seq for e in runs if any(s["scope"][1] == "alex" for s in e.payload["undo"]["before"])}
        assert held and all(after[seq].erased for seq in held)
        assert not any(after[e.seq].erased for e in runs if e.seq not in held), "sam's copies stay"
        blobs = _scan(m, backend)
        assert not _found(blobs, "Zorblatt") and all(_found({k: v}, "Quentrix") for k, v in blobs.items())


def test_an_erased_user_is_no_longer_listed_among_the_users(backend) -> None:
    """The panel's and GET /api/users/'s list kept an erased user (with 0 memories):
    its id, perhaps an e-mail address, outlived the erasure."""
    import time

    from memorist.server.tenants import users_of

    with Memory(backend.target, embedder="hashing") as m:
        m.add("Kept", user_id="bob@example.com", infer=False)
        m.add("Gone", user_id="ann@example.com", infer=False)
        deleted = m.add("Deleted, not erased", user_id="cal@example.com", infer=False)["results"][0]["id"]
        m.delete(deleted, user_id="cal@example.com")
        assert [u["user_id"] for u in users_of(m)] == ["ann@example.com", "bob@example.com", "cal@example.com"]
        m.erase(user_id="ann@example.com")
        listed = users_of(m)
        assert [(u["user_id"], u["memories"]) for u in listed] == [("bob@example.com", 1), ("cal@example.com", 0)]
        assert m.store.user_counts("", now=time.time(), only="ann@example.com") == {}


def test_a_search_under_way_ends_before_an_erasure_and_logs_nothing_after_it(backend, monkeypatch) -> None:
    """A search reads, ranks, checks its filter and logs its retrieval (its query and
    the ids it returned) in steps, other callers going on between them. An erasure
    that ran between two steps left the retrieval logged after it, whole. Here the
    erasure starts while the search checks its filter: it waits for the search, and
    then blanks its retrieval with the rest; a search after it finds nothing."""
    import threading

    from memorist.policies import filters

    m = Memory(backend.target, embedder="hashing")
    for i in range(20):
        m.add(f"My {SECRETS['fact']} note number {i}", user_id="alex", infer=False, metadata={"n": i})
    checked = filters.Filter.__call__
    erased: list[dict] = []
    eraser = threading.Thread(target=lambda: erased.append(m.erase(user_id="alex")))
    waited: list[bool] = []

    def check(self, record):
        if not eraser.is_alive() and not waited:
            eraser.start()
            eraser.join(0.5)
            waited.append(eraser.is_alive())  # the erasure waits for this search
        return checked(self, record)

    monkeypatch.setattr(filters.Filter, "__call__", check)
    found = m.search(f"{SECRETS['query']} {SECRETS['fact']}", user_id="alex", filters={"n": {"gte": 0}})["results"]
    eraser.join(30)
    assert waited == [True] and found and erased and erased[0]["erased"]["facts"] == 20
    assert m.search(SECRETS["fact"], user_id="alex", filters={"n": {"gte": 0}})["results"] == []
    blobs = _scan(m, backend)
    assert _found(blobs, SECRETS["query"]) == [] and _found(blobs, SECRETS["fact"]) == []
    m.close()
