"""Facts and the learning loop's objects share a space but never mix (issue 14, item 1).

Strategies (spec 001's and spec 000's bullets), trajectories, traces, reflections,
playbook headers and versions live in the same (tenant, user, agent) space as the
facts. No fact call returns, matches or deletes them; the learning calls see them.
Run on SQLite and PostgreSQL: everything goes through the store contract.
"""

from __future__ import annotations

import pytest
from learning_helpers import run_task

from memorist import Memory, NotFoundError, Playbook
from memorist.model import Existing, Kind, is_fact
from memorist.roles.reconciler import HeuristicReconciler

STRATEGY = "Use exponential backoff on HTTP 429"


def _learning_objects(m: Memory, *, user: str | None = None, agent: str | None = None) -> dict[str, list[str]]:
    """Every active learning object of the space, by kind (straight from the store)."""
    from memorist.store.base import ScopeFilter

    out: dict[str, list[str]] = {}
    for r in m.store.list(ScopeFilter(m.config.tenant_id, user, agent)):
        if not is_fact(r):
            out.setdefault(r.kind.value, []).append(r.id)
    return out


@pytest.fixture
def filled(mem):
    """An agent space with facts, a curated playbook, trajectories, a reflection and versions."""
    m = mem
    m.add("The partner API lives at api.example.com", agent_id="bot", infer=False)
    m.add("Invoices are due on the first of the month", agent_id="bot", infer=False)
    tid = run_task(m, [("decision", STRATEGY), ("observation", "All pages fetched")], "success")
    reflection = m.learning.reflect(tid, agent_id="bot")
    m.learning.curate_playbook([reflection["memory_id"]], "api_client", agent_id="bot")
    m.learning.update_playbook([{"category": "harmful", "pattern": "Retry immediately after a 429"}], "api_client", agent_id="bot")
    kinds = _learning_objects(m, agent="bot")
    assert {"strategy", "anti_pattern", "trajectory", "reflection", "playbook", "playbook_version"} <= set(kinds)
    return m, kinds


def test_search_and_get_all_return_only_facts(filled) -> None:
    m, _ = filled
    assert {r["memory"] for r in m.get_all(agent_id="bot")["results"]} == {
        "The partner API lives at api.example.com", "Invoices are due on the first of the month"}
    for query in (STRATEGY, "exponential backoff", "Fetch users", "Playbook api_client", "Reflection", "retry"):
        found = m.search(query, agent_id="bot", limit=50)["results"]
        assert all(r["kind"] == "fact" for r in found), (query, found)
    assert m.search("backoff retry 429", agent_id="bot", filters={"kind": "strategy"})["results"] == []


def test_by_id_calls_do_not_see_learning_objects(filled) -> None:
    m, kinds = filled
    for ids in kinds.values():
        for mid in ids:
            for call in (m.get, m.history, m.delete):
                with pytest.raises(NotFoundError):
                    call(mid, agent_id="bot")
            with pytest.raises(NotFoundError):
                m.update(mid, "overwritten", agent_id="bot")
    assert _learning_objects(m, agent="bot") == kinds  # nothing changed


def test_delete_all_keeps_playbooks_and_trajectories(filled) -> None:
    m, kinds = filled
    assert m.delete_all(agent_id="bot")["deleted"] == 2
    assert m.get_all(agent_id="bot")["results"] == []
    assert _learning_objects(m, agent="bot") == kinds
    playbook = m.learning.get_playbook("api_client", agent_id="bot")
    assert [s["pattern"] for s in playbook["strategies"]["helpful"]] == [STRATEGY]
    assert len(m.learning.query_trajectories(agent_id="bot")) == 1


def test_the_reconciler_is_never_shown_a_strategy(mem) -> None:
    m = mem
    m.learning.update_playbook([{"pattern": "Is vegetarian"}], "habits", user_id="alex", scope="user")
    seen: list[list[Existing]] = []

    class Recording(HeuristicReconciler):
        def reconcile(self, facts, existing):
            seen.extend(existing)
            return super().reconcile(facts, existing)

    m.reconciler = m._ingest.reconciler = Recording()
    result = m.add("I'm a vegetarian.", user_id="alex")
    # The fact is added although a strategy with the same words exists in the space.
    assert [r["event"] for r in result["results"]] == ["ADD"]
    assert all(e.text != "Is vegetarian" or m.store.get(e.id).kind is Kind.FACT for group in seen for e in group)
    assert [r["memory"] for r in m.get_all(user_id="alex")["results"]] == ["Is vegetarian"]
    assert [s["pattern"] for s in m.learning.get_playbook("habits", user_id="alex", scope="user")["strategies"]["helpful"]] == ["Is vegetarian"]


def test_spec_000_bullets_are_not_facts_either(mem) -> None:
    m = mem
    Playbook(m).turn("sam", "c1").learn(question="q", lessons=["Draw the fractions first"], topic="fractions")
    m.add("Sam likes football", user_id="sam", infer=False)
    assert [r["memory"] for r in m.get_all(user_id="sam")["results"]] == ["Sam likes football"]
    assert [r["memory"] for r in m.search("Draw the fractions first", user_id="sam")["results"]] == ["Sam likes football"]
    m.delete_all(user_id="sam")
    (bullet,) = Playbook(m).bullets("sam")
    assert bullet.content == "Draw the fractions first"
    assert [s["pattern"] for s in m.learning.get_playbook("per-learner", user_id="sam")["strategies"]["helpful"]] == ["Draw the fractions first"]


def test_search_still_finds_facts_crowded_out_by_learning_objects(backend) -> None:
    """Many strategies nearer the query than the one fact: the fact still comes back."""
    from memorist import RetrievalConfig
    from memorist.config import MemoryConfig

    config = MemoryConfig(path=backend.target, embedder="hashing", retrieval=RetrievalConfig(candidates=5))
    with Memory(config=config) as m:
        m.learning.update_playbook([{"pattern": f"Back off on error {i} from the payments API"} for i in range(40)], "big", agent_id="bot")
        m.add("The payments API has a sandbox", agent_id="bot", infer=False)
        ks: list[int | None] = []
        real = m.store.vector_search

        def spy(*args, **kwargs):
            ks.append(kwargs.get("k"))
            return real(*args, **kwargs)

        m.store.vector_search = spy  # type: ignore[method-assign]
        found = m.search("Back off on error from the payments API", agent_id="bot", limit=3)["results"]
        assert [r["memory"] for r in found] == ["The payments API has a sandbox"]
        assert ks == [12, 96]  # the pools were full of strategies: the rankings were read eight times deeper once
        assert [r["memory"] for r in m.get_all(agent_id="bot", limit=1)["results"]] == ["The payments API has a sandbox"]
