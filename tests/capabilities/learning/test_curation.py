"""Curation (spec 001 §3.1, §6.2, §6.3): reflections and strategies into a playbook —
merged at cosine >= 0.85 with evidence combined, confidence from evidence,
anti-patterns kept, a bounded playbook, and the diff."""

from __future__ import annotations

import pytest
from learning_helpers import Mapped, run_task

from memorist import NotFoundError, ValidationError

at, axis = Mapped.at, Mapped.axis


def helpful(m, name="api_client", **ids):
    ids = ids or {"agent_id": "bot"}
    return {s["pattern"]: s for s in m.learning.get_playbook(name, **ids)["strategies"]["helpful"]}


def test_update_playbook_adds_and_merges_at_085(mapped_mem, embedder) -> None:
    embedder.mapping.update({"Validate inputs": axis(0), "Validate the inputs first": at(0.86), "Validate outputs": at(0.84)})
    pid = mapped_mem.learning.update_playbook([{"category": "helpful", "pattern": "Validate inputs", "context": "API calls",
                                       "confidence": 0.9, "evidence_count": 5}], "api_client", agent_id="bot")
    assert helpful(mapped_mem)["Validate inputs"]["confidence"] == 0.9  # as given, until trajectories speak
    assert mapped_mem.learning.update_playbook([{"pattern": "Validate the inputs first", "confidence": 0.7, "evidence_count": 5},
                                       {"pattern": "Validate outputs"}], "api_client", agent_id="bot") == pid
    held = helpful(mapped_mem)
    assert set(held) == {"Validate inputs", "Validate outputs"}  # 0.86 merged, 0.84 did not
    assert held["Validate inputs"]["evidence_count"] == 10 and held["Validate inputs"]["confidence"] == 0.8
    assert held["Validate inputs"]["context"] == "API calls"
    with pytest.raises(ValidationError, match=r"strategies\[0\].category"):
        mapped_mem.learning.update_playbook([{"pattern": "x", "category": "sometimes"}], "api_client", agent_id="bot")
    with pytest.raises(ValidationError, match=r"strategies\[0\].pattern"):
        mapped_mem.learning.update_playbook([{"category": "helpful"}], "api_client", agent_id="bot")


@pytest.mark.parametrize(
    ("strategy", "field"),
    [
        ({"pattern": "p", "context": "API\x00calls"}, "strategies[0].context"),
        ({"pattern": "p", "context": "x" * 100_001}, "strategies[0].context"),
        ({"pattern": "p", "examples": ["t-1", "t\x002"]}, "strategies[0].examples[1]"),
        ({"pattern": "p", "examples": ["t" * 257]}, "strategies[0].examples[0]"),
        # Summed into whole-number columns: 2**64 - 1 raised OverflowError (a 500 from the service).
        ({"pattern": "p", "evidence_count": 2**64 - 1}, "strategies[0].evidence_count"),
        ({"pattern": "p", "evidence_count": 2**63}, "strategies[0].evidence_count"),
        ({"pattern": "p", "evidence_count": 1_000_000_001}, "strategies[0].evidence_count"),
    ],
)
def test_a_strategy_holds_no_nul_and_no_unbounded_text(mem, strategy, field) -> None:
    with pytest.raises(ValidationError) as info:
        mem.learning.update_playbook([strategy], "p", agent_id="bot")
    assert info.value.field == field
    assert mem.learning.get_playbook("p", agent_id="bot")["size"] == 0  # nothing written
    mem.learning.update_playbook([{"pattern": "p", "context": "x" * 100_000, "examples": ["t" * 256], "evidence_count": 1_000_000_000}],
                                 "p", agent_id="bot")
    assert mem.learning.get_playbook("p", agent_id="bot")["size"] == 1


def test_replace_makes_a_major_version(mapped_mem) -> None:
    mapped_mem.learning.update_playbook(["A", "B"], "p", agent_id="bot")
    mapped_mem.learning.update_playbook([{"pattern": "C", "category": "✗"}], "p", merge=False, agent_id="bot")
    playbook = mapped_mem.learning.get_playbook("p", agent_id="bot")
    assert playbook["size"] == 1 and [s["pattern"] for s in playbook["strategies"]["harmful"]] == ["C"]
    assert [(v["version"], v["major"]) for v in mapped_mem.learning.list_playbook_versions("p", agent_id="bot")] == [(1, True), (2, True)]


def test_curate_playbook_returns_the_diff_and_combines_evidence(mem) -> None:
    first = [run_task(mem, [("decision", "Use exponential backoff")], "success") for _ in range(3)]
    failed = run_task(mem, [("decision", "Use exponential backoff"), ("decision", "Retry immediately"),
                            ("observation", "Error: HTTP 429")], "failure")
    reflections = [mem.learning.reflect(t, agent_id="bot")["memory_id"] for t in [*first, failed]]
    result = mem.learning.curate_playbook(reflections[:1], "api_client", agent_id="bot")
    assert [s["pattern"] for s in result["added"]] == ["Use exponential backoff"] and result["version"] == 1
    result = mem.learning.curate_playbook(reflections, "api_client", agent_id="bot")
    assert result["skipped"] == reflections[:1]  # never curated twice
    assert [s["pattern"] for s in result["added"]] == ["Retry immediately"]
    assert [s["pattern"] for s in result["updated"]] == ["Use exponential backoff"]
    assert result["removed"] == [] and result["version"] == 2
    playbook = mem.learning.get_playbook("api_client", agent_id="bot")
    (backoff,) = playbook["strategies"]["helpful"]
    (retry,) = playbook["strategies"]["harmful"]  # the failure is kept, as an anti-pattern
    # 3 successes and 1 failure it was taken in (a neutral observation there): 0.75 + 0.04.
    assert backoff["evidence_count"] == 4 and backoff["confidence"] == 0.79 and set(backoff["examples"]) == {*first, failed}
    assert retry["symbol"] == "✗" and retry["confidence"] == 1.0 and retry["examples"] == [failed]
    assert playbook["total_trajectories_analyzed"] == 4


def test_old_evidence_decays(mem, clock) -> None:
    tid = run_task(mem, [("decision", "Cache the token")], "success")
    mem.learning.curate_playbook([mem.learning.reflect(tid, agent_id="bot")["memory_id"]], "p", agent_id="bot")
    assert helpful(mem, "p")["Cache the token"]["confidence"] == 1.0
    clock.advance(days=90)  # one half life of the evidence
    assert helpful(mem, "p")["Cache the token"]["confidence"] == 0.5


def test_a_strategy_that_keeps_failing_loses_its_confidence(mem) -> None:
    ok = run_task(mem, [("decision", "Poll every second")], "success")
    mem.learning.curate_playbook([mem.learning.reflect(ok, agent_id="bot")["memory_id"]], "p", agent_id="bot")
    for _ in range(5):  # each failure directly follows it: a failure pattern, the same strategy
        bad = run_task(mem, [("decision", "Poll every second"), ("observation", "Error: rate limited")], "failure")
        mem.learning.curate_playbook([mem.learning.reflect(bad, agent_id="bot")["memory_id"]], "p", agent_id="bot")
    (entry,) = mem.learning.get_playbook("p", agent_id="bot")["strategies"]["helpful"]
    assert entry["pattern"] == "Poll every second" and entry["evidence_count"] == 6
    assert entry["confidence"] == round(1 / 6 + 0.06, 4)  # one success in six, plus the evidence boost


def test_a_neutral_observation_that_keeps_succeeding_becomes_helpful(mem) -> None:
    def learn(steps: list[tuple[str, str]], status: str) -> None:
        tid = run_task(mem, steps, status)
        mem.learning.curate_playbook([mem.learning.reflect(tid, agent_id="bot")["memory_id"]], "p", agent_id="bot")

    learn([("decision", "Cache the token"), ("decision", "Skip validation"), ("observation", "Error: 400")], "failure")
    assert [s["pattern"] for s in mem.learning.get_playbook("p", agent_id="bot")["strategies"]["neutral"]] == ["Cache the token"]
    learn([("decision", "Cache the token")], "success")
    learn([("decision", "Cache the token")], "success")
    # Two successes and one failure with it: the runs do not say yet (a share of successes alone does not).
    assert [s["pattern"] for s in mem.learning.get_playbook("p", agent_id="bot")["strategies"]["neutral"]] == ["Cache the token"]
    for _ in range(4):  # the failures go without it, the successes with it: the association says ✓
        learn([("decision", "Skip validation"), ("observation", "Error: 400")], "failure")
        learn([("decision", "Cache the token")], "success")
    playbook = mem.learning.get_playbook("p", agent_id="bot")
    assert playbook["strategies"]["neutral"] == []
    (entry,) = playbook["strategies"]["helpful"]
    assert entry["pattern"] == "Cache the token" and entry["evidence_count"] == 7
    assert [s["pattern"] for s in playbook["strategies"]["harmful"]] == ["Skip validation"]


def test_curation_merges_duplicates_among_strategies(mapped_mem, embedder) -> None:
    embedder.mapping.update({"Back off on 429": axis(3), "Back off when rate limited": at(0.9, 3, 4)})
    mapped_mem.learning_config = {"merge_threshold": 0.95}  # let both in
    mapped_mem.learning.update_playbook(["Back off on 429", "Back off when rate limited"], "p", agent_id="bot")
    assert len(helpful(mapped_mem, "p")) == 2
    mapped_mem.learning_config = {"merge_threshold": 0.85}
    result = mapped_mem.learning.update_playbook(["Something new"], "p", agent_id="bot")
    held = helpful(mapped_mem, "p")
    assert set(held) == {"Back off on 429", "Something new"} and held["Back off on 429"]["evidence_count"] == 0 or result
    versions = mapped_mem.learning.list_playbook_versions("p", agent_id="bot")
    change = mapped_mem.learning.get_playbook_version("p", versions[-1]["version"], agent_id="bot")["change"]
    assert len(change["removed"]) == 1  # the merged twin


def test_the_playbook_is_bounded(mem) -> None:
    mem.learning_config = {"max_strategies": 5}
    mem.learning.update_playbook([{"pattern": f"Tip {i}", "confidence": i / 10} for i in range(1, 9)], "p", agent_id="bot")
    held = helpful(mem, "p")
    assert sorted(held) == ["Tip 4", "Tip 5", "Tip 6", "Tip 7", "Tip 8"]  # the lowest-confidence went


def test_curation_needs_the_callers_reflections(mem) -> None:
    tid = run_task(mem, [("decision", "x")], "success", agent="alice-bot")
    reflection = mem.learning.reflect(tid)["memory_id"]
    with pytest.raises(NotFoundError, match="reflection"):
        mem.learning.curate_playbook([reflection], "p", agent_id="bob-bot")
    with pytest.raises(NotFoundError, match="reflection"):
        mem.learning.curate_playbook([tid], "p", agent_id="alice-bot")  # a trajectory id is not a reflection
    with pytest.raises(ValidationError):
        mem.learning.curate_playbook(reflection, "p")  # a string, not a list
    assert mem.learning.curate_playbook([reflection], "p", agent_id="alice-bot")["added"]


def test_scopes_of_playbooks(backend) -> None:
    from memorist import Memory

    with Memory(backend.target, embedder="hashing", tenant_id="acme") as m:
        m.learning.update_playbook(["Agent tip"], "p", agent_id="bot")
        m.learning.update_playbook(["User tip"], "p", user_id="alex", scope="user")
        m.learning.update_playbook(["Tenant tip"], "p", scope="tenant")
        with pytest.raises(ValidationError, match="default tenant"):
            m.learning.update_playbook(["Global tip"], "p", scope="global")
        assert list(helpful(m, "p", agent_id="bot")) == ["Agent tip"]
        assert list(helpful(m, "p", user_id="alex")) == ["User tip"]
        assert list(helpful(m, "p", scope="tenant")) == ["Tenant tip"]
        assert m.learning.get_playbook("p", scope="tenant")["visibility"] == "shared"
        assert m.learning.get_playbook("p", agent_id="bot")["visibility"] == "private"
        assert m.learning.get_playbook("nothing", agent_id="bot")["version"] == 0  # never written: empty
    with Memory(backend.target, embedder="hashing") as default:
        default.learning.update_playbook(["Global tip"], "p", scope="global")
    with Memory(backend.target, embedder="hashing", tenant_id="acme") as m:
        assert list(helpful(m, "p", scope="global")) == ["Global tip"]  # every tenant reads it
        assert list(helpful(m, "p", scope="tenant")) == ["Tenant tip"]


def test_a_playbook_past_its_capacity_says_what_it_removed(mem, caplog) -> None:
    """Strategies past ``max_strategies`` were removed with no word: the call returns the
    playbook's id only, and the page did not name the bound."""
    mem.learning_config = {"max_strategies": 5}
    with caplog.at_level("WARNING", logger="memorist.curation"):
        mem.learning.update_playbook([{"pattern": f"Strategy number {i} about topic {i * 7}"} for i in range(8)], "p", agent_id="bot")
    assert mem.learning.get_playbook("p", agent_id="bot")["size"] == 5
    assert any("at most 5 strategies" in r.getMessage() and "removed the 3" in r.getMessage() for r in caplog.records), caplog.text
