"""Stores written by release 0.1.0, before the rename, open and migrate.

The fixtures (tests/fixtures, made by the scripts beside them against that release)
hold facts, a corrected fact with its history, a verbatim turn, a playbook with a
bullet, a trajectory and a minute; the store carried the old name in its reserved
run ids, a playbook header's content address and, in PostgreSQL, its schema and
trigger functions.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from memorist import Memory, StoreError
from memorist.reserved import PREVIOUS_NAME, RUN_PREFIX
from memorist.store.sqlite.schema import SCHEMA_VERSION

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _everything_is_there(memory: Memory) -> None:
    facts = {m["memory"] for m in memory.get_all(user_id="sam")["results"]}
    assert {"Name is Sam", "Gets confused when adding fractions with different denominators"} <= facts
    alex = {m["memory"]: m["id"] for m in memory.get_all(user_id="alex")["results"]}
    assert {"Is a vegan", "Lives in Lisbon"} <= set(alex)
    assert [e["event"] for e in memory.history(alex["Is a vegan"], user_id="alex")] == ["ADD", "UPDATE"]
    assert memory.search("lisbon", user_id="alex")["results"][0]["memory"] == "Lives in Lisbon"

    playbook = memory.learning.get_playbook("tutoring", agent_id="tutor")
    assert [s["pattern"] for s in playbook["strategies"]["helpful"]] == ["Give a worked example before the rule"]
    assert playbook["description"] == "how to tutor"

    trajectories = memory.learning.query_trajectories(agent_id="tutor")
    assert [t["task_description"] for t in trajectories] == ["add fractions"]
    assert [m["memory_note"] for m in memory.minutes.recent(project_id="proj-a")] == ["Use SQLite by default"]
    assert all(not (e["run_id"] or "").startswith(f"{PREVIOUS_NAME}:") for e in memory.events(agent_id="tutor"))
    assert memory.events(agent_id="tutor")[0]["run_id"].startswith(RUN_PREFIX)


def _writes_find_what_was_there(memory: Memory) -> None:
    # The header is found again by its content address: updating the playbook does
    # not make a second one.
    memory.learning.update_playbook([{"pattern": "Check the answer by estimating"}], name="tutoring", agent_id="tutor")
    assert [p["name"] for p in memory.learning.list_playbooks(agent_id="tutor")] == ["tutoring"]
    assert len(memory.learning.get_playbook("tutoring", agent_id="tutor")["strategies"]["helpful"]) == 2
    added = memory.add("I love green tea.", user_id="alex")["results"]
    assert added and added[0]["event"] == "ADD"
    assert added[0]["id"] in {m["id"] for m in memory.get_all(user_id="alex")["results"]}


def test_a_sqlite_store_of_release_0_1_0_opens_and_migrates(tmp_path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "legacy-0.1.0.db", path)
    with Memory(str(path)) as memory:
        assert memory.stats()["schema_version"] == SCHEMA_VERSION  # migrated to the current version
        _everything_is_there(memory)
        assert memory.check()["healthy"], memory.check()["problems"]
    raw = sqlite3.connect(path)
    for table in ("memories", "events"):
        left = raw.execute(f"SELECT count(*) FROM {table} WHERE run_id LIKE ?", (f"{PREVIOUS_NAME}:%",)).fetchone()[0]
        assert left == 0, table
    raw.close()
    with Memory(str(path)) as memory:  # opening again migrates nothing and loses nothing
        _everything_is_there(memory)
        _writes_find_what_was_there(memory)


def test_an_unmigrated_store_is_not_damaged_and_the_service_serves_it_for_writes(tmp_path) -> None:
    # `memorist check` on a store of the earlier release said DAMAGED (exit 1) for its
    # older schema, and `memorist serve` took it for damaged and refused every write.
    from click.testing import CliRunner

    from memorist.cli import cli
    from memorist.server import create_app
    from memorist.server.app import service_of
    from memorist.server.deps import store_damage

    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "legacy-0.1.0.db", path)
    done = CliRunner().invoke(cli, ["--db", str(path), "check"])
    assert done.exit_code == 0, done.output
    assert "note: schema version 2 is older" in done.output and "healthy" in done.output
    assert store_damage(str(path)) is None
    app = create_app(str(path), embedder="hashing")
    try:
        from fastapi.testclient import TestClient

        with TestClient(app) as client:
            added = client.post("/api/memories/", json={"messages": "I like tea", "user_id": "sam", "infer": False})
            assert added.status_code == 200, added.text
            assert client.get("/healthz").json()["status"] == "ok"
    finally:
        service_of(app).close()


def test_a_store_under_the_energy_policy_keeps_its_tiers(tmp_path) -> None:
    path = tmp_path / "energy.db"
    shutil.copy(FIXTURES / "legacy-0.1.0-energy.db", path)
    with Memory(str(path), policy="energy") as memory:
        (reminder,) = memory.get_all(user_id="alex")["results"]
        assert reminder["memory"] == "Wants to be reminded to call the dentist on Friday"
        assert memory.stats()["policy"] == "energy"


@pytest.mark.parametrize("schema", [None, "elsewhere"])
def test_a_postgres_store_of_release_0_1_0_opens_and_migrates(pg_url, schema) -> None:
    import psycopg

    dump = (FIXTURES / "legacy-0.1.0-postgres.sql").read_text()
    if schema:  # the old store lives in a schema the URL names: it stays there
        dump = dump.replace(f"{PREVIOUS_NAME}.", f"{schema}.").replace(f"SCHEMA {PREVIOUS_NAME};", f"SCHEMA {schema};")
        dump = dump.replace(f"'{PREVIOUS_NAME}', 'public'", f"'{schema}', 'public'")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(dump)
    url = pg_url + (f"&schema={schema}" if "?" in pg_url else f"?schema={schema}") if schema else pg_url
    from memorist.store.postgres.schema import SCHEMA_VERSION as PG_SCHEMA_VERSION

    with Memory(url) as memory:
        assert memory.stats()["schema_version"] == PG_SCHEMA_VERSION  # migrated to the current version
        _everything_is_there(memory)
        _writes_find_what_was_there(memory)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        schemas = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace")}
        assert PREVIOUS_NAME not in schemas
        functions = [r[0] for r in conn.execute("SELECT proname FROM pg_proc WHERE proname LIKE %s", (f"{PREVIOUS_NAME}%",))]
        assert functions == []


def test_the_default_store_of_release_0_1_0_is_opened_where_it_is(tmp_path, monkeypatch) -> None:
    from memorist.config import default_db_path

    monkeypatch.delenv("MEMORIST_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_db_path() == tmp_path / "memorist" / "memorist.db"  # nothing anywhere: the new place
    previous = tmp_path / PREVIOUS_NAME / f"{PREVIOUS_NAME}.db"
    previous.parent.mkdir()
    shutil.copy(FIXTURES / "legacy-0.1.0.db", previous)
    assert default_db_path() == previous
    with Memory() as memory:  # no path: the old default store, migrated in place
        assert memory.stats()["schema_version"] == SCHEMA_VERSION  # migrated to the current version
        assert {"Is a vegan", "Lives in Lisbon"} <= {m["memory"] for m in memory.get_all(user_id="alex")["results"]}
    current = tmp_path / "memorist" / "memorist.db"
    current.parent.mkdir()
    Memory(str(current), embedder="hashing").close()
    assert default_db_path() == current  # once there is a store in the new place, it is the one


def test_a_process_open_when_a_newer_memorist_migrates_the_store_writes_nothing_more(backend) -> None:
    """The schema version was read when a store was opened: a process open while a
    newer Memorist migrated the store went on writing the old format (a learner then had
    playbooks under both layouts, and the migration never ran again)."""
    import psycopg

    with Memory(backend.target, embedder="hashing") as running:
        kept = running.add("Likes green tea", user_id="sam", infer=False)["results"][0]["id"]
        newer = SCHEMA_VERSION + 5  # a newer Memorist's migration, by another process
        if backend.name == "sqlite":
            with sqlite3.connect(backend.target) as conn:
                conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(newer),))
        else:
            with psycopg.connect(backend.target.split("&schema=")[0].split("?schema=")[0], autocommit=True) as conn:
                schema = running.store.schema
                conn.execute(f'UPDATE "{schema}".meta SET value = %s WHERE key = %s', (str(newer), "schema_version"))
        for write in (lambda: running.add("Plays chess", user_id="sam", infer=False),
                      lambda: running.delete(kept, user_id="sam"),
                      lambda: running.update(kept, "Likes black tea", user_id="sam")):
            with pytest.raises(StoreError, match=f"upgraded to schema version {newer} by a newer Memorist"):
                write()
        assert [m["memory"] for m in running.get_all(user_id="sam")["results"]] == ["Likes green tea"]  # reads go on
        for _ in range(40):  # past a flush of their bookkeeping, which is dropped
            assert running.search("green tea", user_id="sam")["results"]
    # (and the process closes its store)
