"""Stores of release 0.1.0 need no new schema for importance and consolidation: the
memories table had an importance column (0.5) from its first version. Their memories
read as the default importance, and a consolidation and its rollback work on them."""

from __future__ import annotations

import shutil
from pathlib import Path

from memorist import Memory
from memorist.policies.consolidation import DEFAULT_IMPORTANCE

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _consolidate_and_roll_back(memory: Memory) -> None:
    old = memory.get_all(user_id="alex")["results"]
    assert old and {memory.store.get(r["id"]).importance for r in old} == {DEFAULT_IMPORTANCE}
    for text in ("Plays tennis on Sundays", "Plays tennis on Sundays with Tom"):
        memory.add(text, user_id="alex", infer=False, importance=0.2)
    before = list(memory.export(user_id="alex"))
    report = memory.learning.consolidate(user_id="alex")
    assert report["merged_count"] == 2 and report["preserved_count"] == len(old)
    memory.rollback(report["run_id"], user_id="alex")
    assert list(memory.export(user_id="alex")) == before


def test_a_sqlite_store_of_release_0_1_0_consolidates_and_rolls_back(tmp_path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "legacy-0.1.0.db", path)
    with Memory(str(path)) as memory:
        _consolidate_and_roll_back(memory)


def test_a_postgres_store_of_release_0_1_0_consolidates_and_rolls_back(pg_url) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute((FIXTURES / "legacy-0.1.0-postgres.sql").read_text())
    with Memory(pg_url) as memory:
        _consolidate_and_roll_back(memory)
