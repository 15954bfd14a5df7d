"""The energy tiers on PostgreSQL (the ``pg_url`` fixture: a real server, pgserver):
the same run, through the same store contract, as on SQLite."""

from __future__ import annotations

import pytest
from tiers_helpers import at, remember

from memorist import Memory, NotFoundError


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "tiers.db")


def test_a_maintenance_run_on_each_backend(target):
    with Memory(target, embedder="hashing", policy="energy") as mem:
        mem.tiers.config({"use_boost": 0})
        promoted = remember(mem, "Renew the TLS certificate", metadata={"type": "reminder"})
        dying = remember(mem, "Had pasta for lunch")
        test = remember(mem, "A test memory", test=True, metadata={"energy": 0.05})
        mem.tiers.boost(promoted, now=at(1))  # 2.5 e^-0.5 + 1 = 2.516
        result = mem.tiers.maintain(now=at(5))
        assert result["memories"] == 2
        # 2.516 * e^-2 = 0.34: decayed, not promoted (the boost came an hour in).
        assert (result["expired"], result["promoted"]) == (1, 0)
        mem.tiers.boost(promoted, amount=2.0, now=at(5))
        second = mem.tiers.maintain(now=at(5))
        assert second["promoted_to_short_term"] == 1
        live = mem.get_all(user_id="alex")["results"]
        assert [(r["memory"], r["tier"]) for r in live] == [("Renew the TLS certificate", "short_term")]
        assert mem.get(promoted, user_id="alex")["id"] == second["results"][0]["promoted_to"]
        with pytest.raises(NotFoundError):
            mem.get(dying, user_id="alex")
        assert [h["event"] for h in mem.history(dying, user_id="alex")] == ["ADD", "EXPIRE"]
        assert mem.tiers.test_memories()["results"][0]["id"] == test
        assert mem.tiers.maintain(now=at(5), test_only=True)["expired"] == 1
        assert mem.tiers.status(now=at(5))["archived"] == 1
        assert mem.tiers.health(now=at(5))["healthy"]
        mem.tiers.end_conversation(user_id="alex", now=at(6))
        assert mem.tiers.wait(timeout=30)
    with Memory(target, embedder="hashing", policy="energy") as again:  # the configuration persisted
        assert again.tiers.config()["config"]["use_boost"] == 0
        assert again.tiers.status(now=at(6))["last_run"]["operation"] == "end_conversation"
