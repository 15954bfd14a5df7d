"""Playbook versions (spec 001 §2.2, §7.3): every change an immutable version; list,
read, roll back; retention keeps the latest 5, every major one and the last 90 days,
configurably — pruned versions are deleted memories."""

from __future__ import annotations

import pytest

from memorist import NotFoundError, Playbook, Status
from memorist.model import Kind
from memorist.store.base import ScopeFilter


def versions(m, name="p", **ids):
    return [v["version"] for v in m.learning.list_playbook_versions(name, **(ids or {"agent_id": "bot"}))]



def test_every_change_is_a_version_and_versions_are_immutable(mem) -> None:
    mem.learning.update_playbook(["A"], "p", agent_id="bot")
    mem.learning.update_playbook(["B"], "p", agent_id="bot")
    mem.learning.update_playbook([{"pattern": "C", "category": "harmful"}], "p", agent_id="bot")
    assert versions(mem) == [1, 2, 3]
    playbook = mem.learning.get_playbook("p", agent_id="bot")
    assert playbook["version"] == 3 and playbook["version_label"] == "1.2"
    v1 = mem.learning.get_playbook_version("p", 1, agent_id="bot")
    assert [s["pattern"] for s in v1["strategies"]["helpful"]] == ["A"] and v1["major"] and v1["version_label"] == "1.0"
    v2 = mem.learning.get_playbook_version("p", 2, agent_id="bot")
    assert {s["pattern"] for s in v2["strategies"]["helpful"]} == {"A", "B"} and v2["change"]["added"]
    with pytest.raises(NotFoundError):
        mem.learning.get_playbook_version("p", 9, agent_id="bot")
    assert mem.learning.get_playbook_version("p", 1, agent_id="bot") == v1  # unchanged by later versions


def test_rollback_makes_a_new_version_equal_to_the_old_one(mem) -> None:
    mem.learning.update_playbook([{"pattern": "A", "confidence": 0.9, "evidence_count": 3}], "p", agent_id="bot")
    mem.learning.update_playbook(["B"], "p", agent_id="bot")
    mem.learning.update_playbook(["C"], "p", merge=False, agent_id="bot")  # A and B deleted
    result = mem.learning.rollback_playbook("p", 2, agent_id="bot")
    assert result["version"] == 4 and result["rolled_back_to"] == 2 and result["version_label"] == "3.0"
    assert {s["pattern"] for s in result["added"]} == {"A", "B"} and [s["pattern"] for s in result["removed"]] == ["C"]
    now = mem.learning.get_playbook("p", agent_id="bot")
    then = mem.learning.get_playbook_version("p", 2, agent_id="bot")
    strip = lambda v: sorted((s["pattern"], s["category"], s["confidence"], s["evidence_count"]) for c in v["strategies"].values() for s in c)  # noqa: E731
    assert strip(now) == strip(then)
    assert mem.learning.list_playbook_versions("p", agent_id="bot")[-1]["major"]
    with pytest.raises(NotFoundError):
        mem.learning.rollback_playbook("p", 99, agent_id="bot")


def test_rolling_back_to_what_the_playbook_holds_writes_nothing(mem) -> None:
    mem.learning.update_playbook([{"pattern": "Use cursor pagination", "confidence": 0.9, "evidence_count": 3}], "p", agent_id="bot")
    before = mem.learning.get_playbook("p", agent_id="bot")
    same = mem.learning.rollback_playbook("p", 1, agent_id="bot")
    assert (same["version"], same["version_label"], same["rolled_back_to"]) == (1, "1.0", 1)
    assert same["added"] == same["updated"] == same["removed"] == []
    assert same["message"] == ("Playbook 'p' already holds the strategies of version 1: nothing to roll back, "
                               "no version written (it stays at version 1).")
    assert versions(mem) == [1] and mem.learning.get_playbook("p", agent_id="bot") == before  # nothing bumped
    # After a change, back to version 1 writes version 3; rolling back to that one again writes nothing.
    mem.learning.update_playbook(["Log every request"], "p", agent_id="bot")
    back = mem.learning.rollback_playbook("p", 1, agent_id="bot")
    assert back["version"] == 3 and [s["pattern"] for s in back["removed"]] == ["Log every request"] and "message" not in back
    assert mem.learning.rollback_playbook("p", 3, agent_id="bot")["version"] == 3 and versions(mem) == [1, 2, 3]


def test_retention_keeps_latest_five_majors_and_the_last_90_days(mem, clock) -> None:
    mem.learning.update_playbook(["v1"], "p", agent_id="bot")  # major (the first)
    clock.advance(days=1)
    for i in range(2, 11):
        mem.learning.update_playbook([f"v{i}"], "p", agent_id="bot", major=(i == 4))
        clock.advance(days=1)
    assert versions(mem) == list(range(1, 11))  # all within 90 days
    clock.advance(days=100)
    mem.learning.update_playbook(["v11"], "p", agent_id="bot")
    assert versions(mem) == [1, 4, 7, 8, 9, 10, 11]  # majors + the latest five
    kinds = [r for r in mem.store.list(ScopeFilter(mem.config.tenant_id, None, "bot", "memorist:playbook-versions"), status=Status.DELETED)
             if r.kind is Kind.PLAYBOOK_VERSION]
    assert sorted(r.metadata["version"] for r in kinds) == [2, 3, 5, 6]  # pruned: deleted memories, their history kept


def test_retention_is_configurable(mem) -> None:
    mem.learning_config = {"versions": {"keep_latest": 2, "keep_all_major": False, "keep_days": None}}
    for i in range(5):
        mem.learning.update_playbook([f"tip {i}"], "p", agent_id="bot")
    assert versions(mem) == [4, 5]


@pytest.mark.parametrize(("bad", "named"), [
    ({"max_strategies": 0}, "max_strategies"),
    ({"versions": {"keep_lates": 3}}, "keep_lates"),
    ({"versions": 5}, "versions must be"),
    ({"versions": {"keep_latest": "3"}}, "versions.keep_latest"),
    ({"versions": {"keep_days": float("nan")}}, "versions.keep_days"),
    ({"versions": {"keep_all_major": "no"}}, "versions.keep_all_major"),
])
def test_a_refused_learning_setting_names_it_and_leaves_the_one_in_force(mem, bad, named) -> None:
    """Before, a refused setting was kept all the same on a Memory that had not used
    learning yet, and every later learning call failed with it; a malformed
    ``versions`` was a TypeError or an AttributeError."""
    from memorist import ConfigurationError

    with pytest.raises(ConfigurationError, match=named):
        mem.learning_config = bad
    mem.learning.update_playbook(["A"], "p", agent_id="bot")  # learning still works, with the defaults
    assert versions(mem) == [1] and mem.learning_config.versions.keep_latest == 5


def test_spec_000_learning_turns_are_versions_of_the_learners_playbook(mem) -> None:
    pb = Playbook(mem)
    pb.turn("sam", "c1").learn(question="q", lessons=["Draw the fractions first"], topic="fractions")
    pb.turn("sam", "c2").learn(question="q", lessons=["Draw the fractions first"], topic="fractions")  # a reinforcement
    assert versions(mem, "per-learner", user_id="sam") == [1, 2]
    v1 = mem.learning.get_playbook_version("per-learner", 1, user_id="sam")
    (entry,) = v1["strategies"]["helpful"]
    assert entry["pattern"] == "Draw the fractions first" and entry["evidence_count"] == 1
    assert mem.learning.get_playbook("per-learner", user_id="sam")["strategies"]["helpful"][0]["evidence_count"] == 2
    mem.learning.rollback_playbook("per-learner", 1, user_id="sam")
    (bullet,) = pb.bullets("sam")
    assert bullet.helpful == 1  # spec 000's view follows the rollback
    assert pb.turn("sam", "c3").retrieve("Draw the fractions first")[0].content == "Draw the fractions first"


def test_an_empty_playbook_name_is_named_as_the_argument_that_gave_it(mem) -> None:
    from memorist import ValidationError

    for call in (lambda: mem.learning.execute_with_learning(lambda run: 1, "Call the API", playbook_name="", agent_id="bot"),
                 lambda: mem.learning.curate_playbook([], playbook_name=" ", agent_id="bot")):
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == "playbook_name"
    with pytest.raises(ValidationError) as info:
        mem.learning.get_playbook("", agent_id="bot")
    assert info.value.field == "name"


def test_one_update_takes_a_bounded_number_of_strategies(mem) -> None:
    """Curating is quadratic in the strategies of a call (4,000 took 24 s and held the
    store): a call takes at most 500, or the playbook's max_strategies if larger, and
    more is refused before anything is written."""
    from memorist import ValidationError
    from memorist.ace.learning import MAX_STRATEGIES_PER_CALL

    too_many = [f"tip {i}" for i in range(MAX_STRATEGIES_PER_CALL + 1)]
    with pytest.raises(ValidationError, match="at most 500") as info:
        mem.learning.update_playbook(too_many, "p", agent_id="bot")
    assert info.value.field == "strategies" and versions(mem) == []
    mem.learning.update_playbook(too_many[:MAX_STRATEGIES_PER_CALL], "p", agent_id="bot")
    assert versions(mem) == [1]
