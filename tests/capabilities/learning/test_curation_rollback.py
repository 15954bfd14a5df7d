"""A curation that dropped strategies is undone by memory.rollback(its rollback id), on
both backends: the strategies come back, what it added goes."""

from __future__ import annotations

import pytest

from memorist.errors import ConflictError

FIRST = [{"pattern": "Validate the input before calling the API", "category": "helpful"},
         {"pattern": "Retry with backoff on 429", "category": "helpful"}]


def patterns(mem) -> list[str]:
    book = mem.learning.get_playbook("p", user_id="u")
    return sorted(s["pattern"] for found in book["strategies"].values() for s in found)


def test_a_replacing_update_is_rolled_back(mem) -> None:
    mem.learning.update_playbook(FIRST, "p", user_id="u")
    before = sorted(mem.export(user_id="u"), key=lambda x: x["id"])
    mem.learning.update_playbook([{"pattern": "Log every request", "category": "helpful"}], "p", False, user_id="u")
    assert patterns(mem) == ["Log every request"]
    (curation,) = mem.store.events(None, ops=["curation"])
    result = mem.rollback(curation.seq, user_id="u")
    assert patterns(mem) == sorted(s["pattern"] for s in FIRST)
    assert len(result["restored"]) == 2 and len(result["retired"]) == 1
    after = sorted(mem.export(user_id="u"), key=lambda x: x["id"])
    strategies = [x for x in before if x["kind"] == "strategy"]
    assert [x for x in after if x["kind"] == "strategy"] == strategies
    with pytest.raises(ConflictError):
        mem.rollback(curation.seq, user_id="u")
