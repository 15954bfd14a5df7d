"""Spec 003's bounded context window: recent + referenced + the agent's memory +
retrieved for the task, each once, within the token budget, with the cut reported."""

from __future__ import annotations

import pytest

from memorist import ValidationError
from memorist.embed.tokens import token_counter

T0 = 1_700_000_000.0  # in the past: a minute dated in the future is refused


@pytest.fixture
def project(m) -> dict:
    """An early assignment and an early lesson, then 55 status minutes; the last one
    references the assignment (older than the last 50)."""
    made = {}
    made["assignment"] = m.minutes.record("task_assigned", agent_id="planner", project_id="apollo",
                                          memory_note="CSV importer goes to coder", now=T0)
    made["lesson"] = m.minutes.record("task_completed", agent_id="coder", project_id="apollo",
                                      memory_note="Quoted fields in CSV need the csv module, not split",
                                      data={"success_criteria_met": 90}, now=T0 + 1)
    made["status"] = [
        m.minutes.record("status", agent_id="tester" if i % 2 else "reviewer", project_id="apollo",
                         memory_note=f"status update number {i}", now=T0 + 10 + i,
                         context_references=[made["assignment"]["id"]] if i == 54 else None)
        for i in range(55)
    ]
    made["fact"] = m.add("Prefers small pull requests", user_id="apollo", agent_id="coder", infer=False,
                         timestamp=T0 + 5)["results"][0]["id"]
    return made


def ids(items: list[dict]) -> list[str]:
    return [x["id"] for x in items]


def test_all_four_sections_deduplicated_and_rendered(m, project):
    window = m.minutes.build_context("coder", "parse quoted fields in the CSV importer", project_id="apollo", now=T0 + 100)
    sections = window.sections
    assert ids(sections["recent"]) == ids(project["status"][-50:])  # the last 50, oldest first
    assert ids(sections["referenced"]) == [project["assignment"]["id"]]
    agent = ids(sections["agent"])
    assert project["fact"] in agent and project["lesson"]["id"] in agent  # the coder's own memory
    assert project["lesson"]["id"] not in ids(sections["retrieved"])  # each memory once
    every = [x["id"] for items in sections.values() for x in items]
    assert len(every) == len(set(every))
    assert window.cut == [] and window.tokens == token_counter()(window.text) <= window.budget_tokens
    text = window.text
    assert text.startswith("## Coordination context for coder (project apollo)\nTask: parse quoted fields")
    assert "### Earlier events they reference" in text and "CSV importer goes to coder" in text
    assert "Prefers small pull requests" in text and "status update number 54" in text
    assert text.index("status update number 5\n") < text.index("status update number 54")  # oldest first


def test_retrieved_for_the_task_when_not_already_shown(m):
    lesson = m.minutes.record("task_completed", agent_id="coder", project_id="apollo",
                              memory_note="Quoted fields in CSV need the csv module", now=T0)
    for i in range(50):
        m.minutes.record("status", agent_id="tester", project_id="apollo", memory_note=f"update {i}", now=T0 + 1 + i)
    window = m.minutes.build_context("reviewer", "quoted fields in CSV", project_id="apollo", now=T0 + 100)
    assert ids(window.sections["retrieved"])[0] == lesson["id"]  # out of the window, found for the task
    assert len(window.sections["retrieved"]) <= 5
    m.store.flush()  # shown for the task: a retrieval (the evaluator's relevance); in the recent window: not
    assert m.store.get(lesson["id"]).access_count == 1
    assert all(m.store.get(x["id"]).access_count == 0 for x in window.sections["recent"])
    assert m.minutes.build_context("reviewer", project_id="apollo").sections["retrieved"] == []  # no task, no retrieval


def test_a_window_for_an_earlier_time_fills_its_sections_from_what_was_known_then(m):
    # Many later memories must not use up the sections' limits before they are left out.
    early_facts = [m.add(f"early fact {i}: coder prefers tabs variant {i}", user_id="apollo", agent_id="coder", infer=False,
                         timestamp=T0 - (10 - i) * 86_400)["results"][0]["id"] for i in range(3)]
    for i in range(60):
        m.add(f"later fact {i}: something learned on day {i}", user_id="apollo", agent_id="coder", infer=False,
              timestamp=T0 + (i + 1) * 86_400)
    relevant = [m.minutes.record("task_failed", agent_id="tester", project_id="apollo", memory_note=f"CSV importer quoting bug broke run {i}",
                                 now=T0 - (200 - i) * 86_400)["id"] for i in range(5)]
    for i in range(50):
        m.minutes.record("status", agent_id="planner", project_id="apollo", memory_note=f"standup number {i} nothing notable",
                         now=T0 - (100 - i) * 86_400)
    for i in range(8):
        m.minutes.record("task_failed", agent_id="tester", project_id="apollo", memory_note=f"CSV importer quoting bug broke run {100 + i}",
                         now=T0 + (i + 1) * 86_400)
    window = m.minutes.build_context("coder", "CSV importer quoting bug", project_id="apollo", now=T0)
    assert ids(window.sections["agent"]) == early_facts[::-1]  # the coder's facts of then, newest first
    assert sorted(ids(window.sections["retrieved"])) == sorted(relevant)  # five found, none of them later
    every = [x for items in window.sections.values() for x in items]
    assert all(x.get("ts", T0) <= T0 for x in every)


def test_the_agent_s_section_reads_a_bounded_number_of_records(m, monkeypatch):
    """A space of many records the section does not show (trajectories) is read a page
    at a time, never past OWN_MEMORY_READ: the section shows what those held."""
    from memorist.pipelines import context_window

    monkeypatch.setattr(context_window, "OWN_MEMORY_READ", 120)
    fact = m.add("Prefers tabs", user_id="apollo", agent_id="coder", infer=False, timestamp=T0 - 86_400)["results"][0]["id"]
    for i in range(200):
        m.learning.start_trajectory(f"task {i}", user_id="apollo", agent_id="coder")
    read: list[int] = []
    listing = m.store.list

    def counted(*args, **kwargs):
        found = listing(*args, **kwargs)
        read.append(len(found))
        return found

    monkeypatch.setattr(m.store, "list", counted)
    window = m.minutes.build_context("coder", project_id="apollo")
    assert max(read) <= 120 and sum(read) <= 4 * 120
    assert fact not in ids(window.sections["agent"])  # older than the 120 records read: not shown


def test_the_budget_cuts_lowest_priority_first_and_reports_it(m, project):
    full = m.minutes.build_context("coder", "quoted fields", project_id="apollo", now=T0 + 100)
    small = m.minutes.build_context("coder", "quoted fields", budget_tokens=300, project_id="apollo", now=T0 + 100)
    assert small.tokens <= 300 and small.tokens == token_counter()(small.text)
    kept = [x["id"] for items in small.sections.values() for x in items]
    cut = [c["id"] for c in small.cut]
    assert sorted(kept + cut) == sorted(x["id"] for items in full.sections.values() for x in items)
    assert {c["section"] for c in small.cut} >= {"referenced", "agent"}
    # recent first, newest first: the newest minutes stay, the oldest are cut
    assert project["status"][-1]["id"] in kept and project["status"][-50]["id"] in cut
    assert all(c["tokens"] > 0 for c in small.cut)
    tiny = m.minutes.build_context("coder", budget_tokens=5, project_id="apollo")
    assert tiny.text == "" and tiny.tokens == 0 and len(tiny.cut) == sum(len(v) for v in full.sections.values()) - len(full.sections["retrieved"])


def test_bad_input(m):
    with pytest.raises(ValidationError, match="agent_id"):
        m.minutes.build_context("")
    with pytest.raises(ValidationError, match="budget_tokens"):
        m.minutes.build_context("coder", budget_tokens=0)
    with pytest.raises(ValidationError, match="budget_tokens"):
        m.minutes.build_context("coder", budget_tokens="many")
    assert m.minutes.build_context("coder").to_dict()["counts"] == {"recent": 0, "referenced": 0, "agent": 0, "retrieved": 0}
