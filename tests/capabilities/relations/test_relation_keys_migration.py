"""Relation tuples stored before ids were percent-encoded in keys keep the owner they
named: the schema's migration re-keys them (an id holding ``%``, ``/`` or ``:``)."""

from __future__ import annotations

import sqlite3

from memorist import Memory
from memorist.store.postgres.schema import MIGRATIONS as PG_MIGRATIONS
from memorist.store.postgres.schema import relation_keys
from memorist.store.sqlite.schema import MIGRATIONS as SQLITE_MIGRATIONS
from memorist.store.sqlite.schema import relation_keys as sqlite_relation_keys

# Each schema's version before its re-keying step.
PG_BEFORE = PG_MIGRATIONS.index(relation_keys)
SQLITE_BEFORE = SQLITE_MIGRATIONS.index(sqlite_relation_keys)

# As release 0.2.0 stored them: ids written as they were, not encoded.
OLD = [
    ("user", "helper", "viewer", "scope", "user:50%2Foff"),  # user "50%2Foff", not "50/off"
    ("user", "helper", "viewer", "scope", "user:user:123"),  # user "user:123"
    ("agent", "b", "viewer", "playbook", "a/ops:v2"),  # agent a's playbook "ops:v2"
]


def _store_as_before(backend) -> None:
    """A store holding OLD's tuples at the schema version before the re-keying."""
    with Memory(backend.target, embedder="hashing") as m:
        for user in ("50%2Foff", "50/off", "user:123"):
            m.add(f"A note of {user}", user_id=user, infer=False)
        m.learning.update_playbook([{"pattern": "Ship on Fridays"}], "ops:v2", agent_id="a")
        rows = [("", st, sid, rel, ot, oid, 1.0) for st, sid, rel, ot, oid in OLD]
        if backend.name == "sqlite":
            m.close()
            conn = sqlite3.connect(m.store.path if hasattr(m.store, "path") else backend.target)
            conn.executemany("INSERT INTO relations VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SQLITE_BEFORE),))
            conn.commit()
            conn.close()
            return
        with m.store.connection() as conn:
            conn.cursor().executemany("INSERT INTO relations VALUES (%s, %s, %s, %s, %s, %s, %s)", rows)
            conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", (str(PG_BEFORE),))


def test_tuples_stored_before_keep_the_owner_they_named(backend) -> None:
    _store_as_before(backend)
    with Memory(backend.target, embedder="hashing") as m:  # migrates
        helper = m.as_subject(user_id="helper")
        assert [r["memory"] for r in helper.get_all(user_id="50%2Foff")["results"]] == ["A note of 50%2Foff"]
        assert helper.get_all(user_id="50/off")["results"] == []  # nobody granted this one
        assert [r["memory"] for r in helper.get_all(user_id="user:123")["results"]] == ["A note of user:123"]
        book = m.as_subject(agent_id="b").learning.get_playbook("ops:v2", agent_id="a")
        assert [s["pattern"] for s in book["strategies"]["helpful"]] == ["Ship on Fridays"]
        # Every tuple listed can be revoked as it is shown, and then grants nothing.
        for item in m.relations.list()["results"]:
            assert m.relations.delete(tuple(item["subject"]), item["relation"], tuple(item["object"]))["changed"]
        assert m.relations.list()["results"] == []
        assert helper.get_all(user_id="user:123")["results"] == []
