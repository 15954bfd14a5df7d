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


def test_an_undone_curation_is_a_version_of_the_playbook(mem) -> None:
    """Before, the undo changed the strategies and wrote no version: the current
    version held what the undone curation made, and rolling back to the version the
    playbook held again answered 'nothing to roll back'."""
    mem.learning.update_playbook(FIRST, "p", user_id="u")
    mem.learning.update_playbook([{"pattern": "Log every request", "category": "helpful"}], "p", False, user_id="u")
    (curation,) = mem.store.events(None, ops=["curation"])
    mem.rollback(curation.seq, user_id="u")
    book = mem.learning.get_playbook("p", user_id="u")
    assert book["version"] == 3
    current = mem.learning.get_playbook_version("p", 3, user_id="u")
    assert current["reason"] == "undo" and current["change"]["rolled_back"] == curation.seq
    assert sorted(s["pattern"] for found in current["strategies"].values() for s in found) == patterns(mem)
    # Version 2 (what the curation made) can be come back to, and version 3 again.
    mem.learning.rollback_playbook("p", 2, user_id="u")
    assert patterns(mem) == ["Log every request"]
    mem.learning.rollback_playbook("p", 3, user_id="u")
    assert patterns(mem) == sorted(s["pattern"] for s in FIRST)
    # An undo of what is no playbook's (a fact's reconciliation) writes no version.
    mem.add("I live in California.", user_id="u")
    updated = mem.add("Actually I live in San Francisco now.", user_id="u")["results"]
    (update,) = [e for e in mem.events(user_id="u") if e["event"] == "UPDATE" and e["memory_id"] == updated[0]["id"]]
    mem.rollback(update["seq"], user_id="u")
    assert [v["version"] for v in mem.learning.list_playbook_versions("p", user_id="u")] == [1, 2, 3, 4, 5]
