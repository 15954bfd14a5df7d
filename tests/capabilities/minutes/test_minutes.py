"""Spec 003's minutes through ``Memory.minutes``: the append-only log, its index,
categories and insights, the wall between minutes and facts, and the whole flow
across two sessions; on each backend."""

from __future__ import annotations

import pytest

from memorist import Memory, NotFoundError, ValidationError
from memorist.model import Kind, Scope
from memorist.policies.minutes import Category, Minute, categorize, derive_insights, minute_text
from memorist.roles.evaluator import ScriptedEvaluator

T0 = 1_700_000_000.0  # in the past: a minute dated in the future is refused
DAY = 86_400.0


def record(m: Memory, kind: str = "status", **kw) -> dict:
    kw.setdefault("project_id", "apollo")
    return m.minutes.record(kind, **kw)


def test_record_returns_the_minute_and_recent_reads_the_log_oldest_first(m):
    a = record(m, "task_assigned", agent_id="planner", data={"task_id": "t1"}, memory_note="t1 to coder", now=T0)
    b = record(m, "task_completed", agent_id="coder", data={"task_id": "t1", "success_criteria_met": 80},
               context_references=[a["id"]], now=T0 + 60)
    c = record(m, "handoff", agent_id="coder", now=T0 + 120)
    record(m, "status", project_id="other", now=T0 + 180)
    assert a["event_type"] == "task_assigned" and a["agent_id"] == "planner" and a["project_id"] == "apollo"
    assert a["timestamp"].startswith("2023-11-14T22:13:20") and a["ts"] == T0 and a["memory_note"] == "t1 to coder"
    assert b["context_references"] == [a["id"]]
    assert [x["id"] for x in m.minutes.recent(50, project_id="apollo")] == [a["id"], b["id"], c["id"]]
    assert [x["id"] for x in m.minutes.recent(2, project_id="apollo")] == [b["id"], c["id"]]  # the last n
    assert [x["id"] for x in m.minutes.recent(5, project_id="apollo", agent_id="coder")] == [b["id"], c["id"]]
    assert len(m.minutes.recent(5, project_id="other")) == 1
    assert m.minutes.recent(5, project_id="nobody") == []


def test_by_ids_resolves_references_in_the_order_asked(m):
    a = record(m, "task_assigned")
    b = record(m, "task_completed", context_references=[a["id"]])
    elsewhere = record(m, "status", project_id="other")
    refs = m.minutes.by_ids(b["context_references"])
    assert [x["id"] for x in refs] == [a["id"]] and refs[0]["event_type"] == "task_assigned"
    assert [x["id"] for x in m.minutes.by_ids([b["id"], "no-such-id", a["id"]])] == [b["id"], a["id"]]
    assert [x["id"] for x in m.minutes.by_ids([a["id"], elsewhere["id"]], project_id="apollo")] == [a["id"]]
    assert m.minutes.get(a["id"])["indexed"] is True
    with pytest.raises(NotFoundError):
        m.minutes.get("no-such-id")


def test_references_must_name_earlier_minutes(m):
    fact = m.add("Likes tea", user_id="apollo", infer=False)["results"][0]["id"]
    with pytest.raises(ValidationError, match="context_references"):
        record(m, context_references=["not-a-minute"])
    with pytest.raises(ValidationError, match="context_references"):
        record(m, context_references=[fact])  # a fact is not a minute
    assert m.minutes.history(project_id="apollo")["minutes"] == []  # nothing half-written


def test_a_back_filled_minute_cannot_reference_a_later_one(m):
    done = record(m, "task_completed", agent_id="coder", memory_note="Importer shipped", now=T0 + DAY)
    with pytest.raises(ValidationError, match=f"'{done['id']}' happened at 2023-11-15T22:13:20\\+00:00, after this minute") as info:
        record(m, "task_assigned", agent_id="planner", memory_note="Importer assigned", context_references=[done["id"]], now=T0)
    assert info.value.field == "context_references"
    assert [x["id"] for x in m.minutes.history(project_id="apollo")["minutes"]] == [done["id"]]  # nothing written
    # Clocks of two machines drift apart: a reference a little ahead is taken, as a minute's own time is.
    ahead = record(m, "status", agent_id="coder", now=T0 + 2 * DAY + 120)
    assert record(m, "status", agent_id="planner", context_references=[ahead["id"]], now=T0 + 2 * DAY)["context_references"] == [ahead["id"]]


def test_a_window_never_shows_a_minute_dated_after_its_time(m):
    # A store written before references were checked may hold one to a later minute.
    later = record(m, "task_completed", agent_id="coder", memory_note="Importer shipped", now=T0 + DAY)
    earlier = record(m, "task_assigned", agent_id="planner", memory_note="Importer assigned", now=T0)
    m.minutes.record("status", agent_id="planner", project_id="apollo", memory_note="waiting", now=T0 + 60,
                     context_references=[earlier["id"]])
    window = m.minutes.build_context("planner", "Importer", project_id="apollo", now=T0 + 3600)
    shown = [x["id"] for items in window.sections.values() for x in items]
    assert earlier["id"] in shown and later["id"] not in shown
    payload = {k: v for k, v in m.minutes.get(earlier["id"]).items() if k not in ("seq", "indexed", "lineage")}
    with m.store.transaction() as batch:  # the reference the check now refuses, written as an older store holds it
        batch.event("minute", Scope(m.config.tenant_id, "apollo", "planner", ""), memory_id="old-style", actor="planner",
                    payload={**payload, "id": "old-style", "ts": T0 + 120, "context_references": [later["id"]],
                             "timestamp": "2023-11-14T22:15:20+00:00"})
    window = m.minutes.build_context("planner", "Importer", project_id="apollo", now=T0 + 3600)
    assert "old-style" in [x["id"] for x in window.sections["recent"]]
    assert later["id"] not in [x["id"] for items in window.sections.values() for x in items]
    assert "Importer shipped" not in window.text


def test_history_pages_through_the_whole_log(m):
    made = [record(m, now=T0 + i)["id"] for i in range(5)]
    first = m.minutes.history(project_id="apollo", limit=2)
    second = m.minutes.history(project_id="apollo", limit=2, since=first["next"])
    last = m.minutes.history(project_id="apollo", limit=2, since=second["next"])
    assert [x["id"] for x in first["minutes"] + second["minutes"] + last["minutes"]] == made
    assert last["next"] is None


@pytest.mark.parametrize(
    ("kind", "data", "note", "expected"),
    [
        ("status", {"conflict_type": "ownership", "resolution": "author writes tests"}, "", Category.CONFLICT_RESOLUTION),
        ("task_completed", {"success_criteria_met": 20}, "", Category.FAILURE_PATTERN),
        ("task_completed", {"success_criteria_met": 90}, "fixed the bug", Category.PROJECT_KNOWLEDGE),
        ("status", {"assignment_reasoning": "knows the parser"}, "", Category.TASK_ASSIGNMENT),
        ("task_assigned", {}, "", Category.TASK_ASSIGNMENT),
        ("deploy", {}, "the deploy failed with a timeout", Category.FAILURE_PATTERN),
        ("profile", {}, "coder is an expert at SQL", Category.AGENT_CAPABILITY),
        ("handoff", {}, "", Category.COORDINATION_PATTERN),
        ("note", {}, "the API lives under /v2", Category.PROJECT_KNOWLEDGE),
    ],
)
def test_categories(kind, data, note, expected):
    assert categorize(Minute("x", T0, kind, "p", "a", data, (), note)) is expected


def test_insights_derived_and_given(m):
    minute = Minute("x", T0, "task_completed", "p", "coder", {"task_id": "t7", "success_criteria_met": 85,
                    "assignment_reasoning": "knows CSV"}, ())
    found = {i.type: i for i in derive_insights(minute)}
    assert found["outcome"].confidence == 0.85 and "t7" in found["outcome"].finding
    assert "task_id=t7" in found["outcome"].contexts and "agent=coder" in found["outcome"].contexts
    assert found["assignment"].finding == "knows CSV"
    assert "knows CSV" in minute_text(minute) and "task completed by coder" in minute_text(minute)

    stored = record(m, "task_completed", data={"success_criteria_met": 40},
                    insights=[{"type": "outcome", "finding": "worked after all", "confidence": 0.9, "contexts": ["csv"]},
                              {"type": "capability", "finding": "coder is fast", "confidence": 0.7}],
                    category="agent_capability")
    assert stored["category"] == "agent_capability"  # the caller's category wins
    assert [(i["type"], i["confidence"]) for i in stored["insights"]] == [("outcome", 0.9), ("capability", 0.7)]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"event_type": ""}, "event_type"),
        ({"event_type": "x" * 65}, "event_type"),
        ({"category": "gossip"}, "category"),
        ({"data": ["not", "an", "object"]}, "data"),
        ({"insights": [{"type": "rumour", "finding": "x"}]}, "insights[0].type"),
        ({"insights": [{"type": "outcome", "finding": "x", "confidence": 2}]}, "insights[0].confidence"),
        ({"insights": [{"type": "outcome", "finding": "x", "contexts": 5}]}, "insights[0].contexts"),
        ({"insights": [{"type": "outcome", "finding": "x", "contexts": "csv"}]}, "insights[0].contexts"),
        ({"insights": [{"type": "outcome", "finding": "x", "contexts": ["csv", None]}]}, "insights[0].contexts[1]"),
        ({"insights": [{"type": "outcome", "finding": "x", "applicable_contexts": 5}]}, "insights[0].applicable_contexts"),
        ({"insights": [{"type": "outcome", "finding": "ok\x00bad"}]}, "insights[0].finding"),
        ({"insights": [{"type": "outcome", "finding": "y" * 4001}]}, "insights[0].finding"),
        ({"insights": [{"type": "outcome", "finding": "x", "contexts": ["a\x00b"]}]}, "insights[0].contexts[0]"),
        ({"insights": [{"type": "outcome", "finding": "x", "contexts": ["c" * 257]}]}, "insights[0].contexts[0]"),
        ({"insights": [{"type": "outcome", "finding": "x", "contexts": ["c"] * 101}]}, "insights[0].contexts"),
        ({"insights": [{"type": "outcome", "finding": "x"}] * 101}, "insights"),
        ({"context_references": "abc"}, "context_references"),
        ({"project_id": ""}, "project_id"),
        ({"now": "not a date"}, "now"),
    ],
)
def test_bad_input_names_the_field(m, kwargs, field):
    kwargs = dict(kwargs)  # the parameters are shared by both backends' runs: pop from a copy
    kind = kwargs.pop("event_type", "status")
    with pytest.raises(ValidationError) as info:
        m.minutes.record(kind, **kwargs)
    assert info.value.field == field


def test_minutes_are_never_facts(m):
    fact = m.add("Deploys happen on Fridays", user_id="apollo", infer=False)["results"][0]["id"]
    minute = record(m, "note", memory_note="Deploys happen on Fridays after review")
    assert [r["id"] for r in m.search("deploys Fridays", user_id="apollo", limit=10)["results"]] == [fact]
    assert [r["id"] for r in m.get_all(user_id="apollo")["results"]] == [fact]
    with pytest.raises(NotFoundError):
        m.get(minute["id"], user_id="apollo")
    with pytest.raises(NotFoundError):
        m.delete(minute["id"])
    m.delete_all(user_id="apollo")
    assert m.minutes.get(minute["id"])["indexed"] is True  # delete_all leaves the minutes
    assert [x["id"] for x in m.minutes.search("deploys Fridays", project_id="apollo")] == [minute["id"]]
    assert m.store.get(minute["id"]).kind is Kind.MINUTE


def test_search_finds_indexed_minutes_and_counts_retrievals(m):
    tests = record(m, "task_completed", memory_note="Writing unit tests first caught the bug")
    record(m, "status", memory_note="Lunch moved to noon")
    record(m, "conflict", data={"conflict_type": "ownership", "resolution": "author writes tests"})
    hits = m.minutes.search("unit tests", 2, project_id="apollo")
    assert hits[0]["id"] == tests["id"] and 0 < hits[0]["similarity"] <= 1 and hits[0]["score"] == 1.0
    assert len(hits) == 2
    only = m.minutes.search("unit tests", 5, project_id="apollo", category="conflict_resolution")
    assert [h["category"] for h in only] == ["conflict_resolution"]
    m.store.flush()
    assert m.store.get(tests["id"]).access_count == 1  # a retrieval: the evaluator's relevance


def test_pruning_leaves_the_log_and_reindex_restores_the_index(backend):
    path = backend.target
    with Memory(path, embedder="hashing") as m:
        old = record(m, "status", memory_note="weekly standup happened", now=T0 - 60 * DAY)
        kept = record(m, "task_completed", memory_note="standup notes were shared", data={"success_criteria_met": 100}, now=T0)
        report = m.minutes.evaluate(project_id="apollo", now=T0)
        assert [x["id"] for x in report["removed"]] == [old["id"]]
        assert [x["id"] for x in m.minutes.search("standup", 10, project_id="apollo")] == [kept["id"]]
        assert [x["id"] for x in m.minutes.history(project_id="apollo")["minutes"]] == [old["id"], kept["id"]]
        assert m.minutes.get(old["id"])["indexed"] is False
        assert [x["id"] for x in m.minutes.by_ids([old["id"]])] == [old["id"]]  # references still resolve
        assert [x["id"] for x in m.minutes.recent(10, project_id="apollo")] == [old["id"], kept["id"]]
    with Memory(path, embedder="hashing") as m:  # durable, and rebuilt from the log
        assert m.minutes.reindex(project_id="apollo") == {"minutes": 2, "restored": 1, "created": 0, "unchanged": 1}
        assert {x["id"] for x in m.minutes.search("standup", 10, project_id="apollo")} == {old["id"], kept["id"]}
        assert m.minutes.get(old["id"])["indexed"] is True
        assert m.minutes.reindex(project_id="apollo")["unchanged"] == 2
        ops = [e.op for e in m.store.history(old["id"])]
        assert ops == ["minute", "add", "minute_prune", "minute_reindex"]


def test_a_reindex_counts_the_log_it_reads_and_stops_when_its_caller_left(m):
    """A project's log may be long: a reindex (a service route) counts each minute it
    reads on the call's meter, and is given up when its client has left."""
    from memorist.errors import CancelledCallError
    from memorist.work import Meter, metered

    for i in range(3):
        record(m, "status", memory_note=f"standup {i} happened", now=T0 + i)
    with metered() as meter:
        assert m.minutes.reindex(project_id="apollo")["minutes"] == 3
    assert meter.units >= 3
    gone = Meter()
    gone.cancel()
    with metered(gone), pytest.raises(CancelledCallError):
        m.minutes.reindex(project_id="apollo")


def test_an_exported_project_imports_with_its_log_so_reindex_keeps_it(m, backend):
    first = record(m, "task_assigned", agent_id="planner", memory_note="t1 to coder", now=T0)
    second = record(m, "task_completed", agent_id="coder", memory_note="t1 done", data={"success_criteria_met": 90},
                    context_references=[first["id"]], now=T0 + DAY)
    old = record(m, "status", agent_id="tester", memory_note="standup", now=T0 - 60 * DAY)
    m.minutes.evaluate(project_id="apollo", now=T0 + DAY)  # prunes the old one from the index: archived, still exported
    lines = list(m.export(all_scopes=True))
    other = Memory(backend.fresh(), embedder="hashing")
    try:
        other.import_(lines)
        # The export is oldest first, so is the imported log.
        assert [x["id"] for x in other.minutes.history(project_id="apollo")["minutes"]] == [old["id"], first["id"], second["id"]]
        assert [x["id"] for x in other.minutes.by_ids([first["id"]], project_id="apollo")] == [first["id"]]
        other.minutes.reindex(project_id="apollo")  # the log stands behind every entry: nothing is dropped
        assert {h["memory_note"] for h in other.minutes.search("t1", 5, project_id="apollo")} >= {"t1 to coder", "t1 done"}
        assert other.import_(lines)["added"] == 0  # importing twice adds no second log entry
        assert len(other.minutes.history(project_id="apollo")["minutes"]) == 3
    finally:
        other.close()


def test_the_whole_flow_across_two_sessions(backend):
    """Minutes → index → context → evaluation → reindex → PAIR, the store reopened midway."""
    with Memory(backend.target, embedder="hashing") as m:
        old = m.minutes.record("status", agent_id="tester", project_id="apollo", memory_note="ancient standup", now=T0 - 60 * DAY)
        assigned = m.minutes.record("task_assigned", agent_id="planner", project_id="apollo", memory_note="CSV importer to coder",
                                    data={"assignment_reasoning": "knows CSV"}, now=T0 - DAY)
        done = m.minutes.record("task_completed", agent_id="coder", project_id="apollo", memory_note="Unit tests caught the quoting bug",
                                data={"success_criteria_met": 90}, context_references=[assigned["id"]], now=T0)
        m.minutes.record("status", project_id="other", now=T0)
        assert [x["id"] for x in m.minutes.recent(2, project_id="apollo")] == [assigned["id"], done["id"]]
        assert [x["id"] for x in m.minutes.by_ids(done["context_references"])] == [assigned["id"]]

        report = m.minutes.evaluate(project_id="apollo", now=T0)
        assert [x["id"] for x in report["removed"]] == [old["id"]] and report["in_log"] == 3
        assert m.minutes.get(old["id"])["indexed"] is False
        assert [x["id"] for x in m.minutes.history(project_id="apollo")["minutes"]] == [old["id"], assigned["id"], done["id"]]
        assert old["id"] not in {x["id"] for x in m.minutes.search("ancient standup", 10, project_id="apollo")}
        assert m.search("standup", user_id="apollo")["results"] == [] and m.get_all(user_id="apollo")["results"] == []

    with Memory(backend.target, embedder="hashing") as m:  # a new session: all of it was stored
        assert m.minutes.reindex(project_id="apollo")["restored"] == 1
        assert old["id"] in {x["id"] for x in m.minutes.search("ancient standup", 10, project_id="apollo")}
        window = m.minutes.build_context("coder", "quoting bug", budget_tokens=200, project_id="apollo", now=T0)
        assert window.tokens <= 200 and done["id"] in [x["id"] for x in window.sections["recent"]]
        result = m.minutes.pair("Write the CSV importer", "Has unit tests", "v1", lambda out, imps: out + " v2", project_id="apollo",
                        evaluator=ScriptedEvaluator([40, 100]))
        assert result.converged and len(m.store.events(ops=["pair_round"])) == 2
        assert result.rounds[0].improvements[0]["memories"][0]["id"] == done["id"]
