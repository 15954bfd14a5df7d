"""Fixes from a review of the minutes: the "*" project, metered evaluation and
search, a future ``now``, the context window's budget and retrieved section, PAIR gaps."""

from __future__ import annotations

import numpy as np
import pytest

from memorist import Memory, ValidationError
from memorist.embed.tokens import token_counter
from memorist.errors import CancelledCallError
from memorist.policies.evaluation import Candidate, EvaluationConfig, plan
from memorist.roles.evaluator import Evaluation, Evaluator, Gap
from memorist.work import Meter, metered

T0 = 1_700_000_000.0


def test_star_is_no_project_and_only_an_unscoped_reindex_reaches_every_project(m: Memory):
    m.minutes.record("status", agent_id="t", project_id="apollo", memory_note="Weekly standup", now=T0 - 40 * 86400)
    assert m.minutes.evaluate(project_id="apollo", now=T0)["pruned"] == 1
    with pytest.raises(ValidationError, match="project_id"):
        m.minutes.record("status", agent_id="x", project_id="*", memory_note="hello")
    with pytest.raises(ValidationError, match="project_id"):
        m.scope(user_id="*").minutes.recent(5)
    with pytest.raises(ValidationError, match="project_id"):
        m.scope(user_id="*").minutes.reindex()  # a handle holds one project, never every one
    assert m.minutes.search("standup", project_id="apollo") == []
    assert m.minutes.reindex(project_id="*")["restored"] == 1  # the whole store, as the CLI's --all-projects


def test_a_key_bound_to_star_or_naming_it_reindexes_nothing(backend):
    pytest.importorskip("fastapi")
    from service_helpers import keyed_service

    keys = {"admin": ("acme", None), "apollo": ("acme", "apollo"), "star": ("acme", "*")}
    with keyed_service(backend.target, keys) as (client, h):
        r = client.post("/api/minutes/", json={"event_type": "status", "agent_id": "t", "project_id": "apollo",
                                               "memory_note": "Weekly standup", "timestamp": T0 - 40 * 86400}, headers=h["apollo"])
        assert r.status_code == 200, r.text
        assert client.post("/api/evaluate/", json={"project_id": "apollo", "now": T0}, headers=h["apollo"]).json()["pruned"] == 1
        for key, body in (("star", {}), ("admin", {"project_id": "*"})):
            r = client.post("/api/minutes/reindex/", json=body, headers=h[key])
            assert r.status_code == 422 and r.json()["error"]["field"] == "project_id", r.text
        found = client.post("/api/minutes/search/", json={"query": "standup", "project_id": "apollo"}, headers=h["apollo"])
        assert found.json()["results"] == []


def _minutes(m: Memory, n: int) -> None:
    for i in range(n):
        m.minutes.record("status", agent_id="a", project_id="big", memory_note=f"note {i} about component {i % 7}", now=T0 - n + i)


@pytest.mark.parametrize("call", ["evaluate", "search", "build_context"])
def test_reading_and_evaluating_the_project_is_charged_and_given_up(m: Memory, call):
    _minutes(m, 60)
    run = {
        "evaluate": lambda: m.minutes.evaluate(project_id="big", now=T0, dry_run=True),
        "search": lambda: m.minutes.search("component 3", project_id="big", touch=False),
        "build_context": lambda: m.minutes.build_context("a", "component 3", project_id="big", now=T0),
    }[call]
    with metered() as meter:
        run()
    # An evaluation reads the log and the index, scores, embeds and compares each minute.
    assert meter.units >= (4 if call == "evaluate" else 1) * 60
    cancelled = Meter()
    cancelled.cancel()
    with pytest.raises(CancelledCallError), metered(cancelled):
        run()


def test_evaluation_compares_a_bounded_number_of_minutes_each_charged():
    n, most = 40, 8
    candidates = [Candidate(f"m{i}", T0 + i, 0.9 - i / 100, None, False) for i in range(n)]
    vectors = np.eye(n, dtype=np.float32)
    vectors[n - 1] = vectors[n - 2]  # the two worst are duplicates, both below the rows compared
    vectors[3] = vectors[0]  # a duplicate of the best
    with metered() as meter:
        removals = plan(candidates, vectors, EvaluationConfig(), most=most)
    assert [(r.id, r.reason, r.link) for r in removals] == [("m3", "duplicate", "m0")]
    assert meter.units == (most + most - 1) * (1 + (n >> 4))  # the rows of both steps (m3 absorbed in the first: no row in the second)
    assert {r.id for r in plan(candidates, vectors, EvaluationConfig(), most=n)} == {"m3", "m39"}


def test_the_report_says_how_many_were_not_compared_with_each_other(m: Memory):
    _minutes(m, 3)
    assert m.minutes.evaluate(project_id="big", now=T0, dry_run=True)["remaining"] == 0


def test_evaluate_refuses_a_time_to_come(m: Memory):
    for i in range(3):
        m.minutes.record("task_completed", agent_id="coder", project_id="p", memory_note=f"shipped feature {i}")
    with pytest.raises(ValidationError, match=r"now: '\+10w' is in the future; an evaluation scores what has happened"):
        m.minutes.evaluate(project_id="p", now="+10w")
    assert len(m.minutes.search("feature", project_id="p", touch=False)) == 3
    assert m.minutes.evaluate(project_id="p", now="+1m")["pruned"] == 0  # clock skew is taken


def test_the_window_stays_within_its_budget_by_the_token_counter(m: Memory):
    for i in range(40):
        m.minutes.record("task_completed", agent_id="coder", project_id="p", memory_note=f"Fixed bug #{i}: a,b;c=d [x] {{y}} 1/2+3/4",
                         data={"task_id": f"t{i}", "success_criteria_met": 90}, now=T0 - 1000 + i)
    m.minutes.record("note", agent_id="coder", project_id="p", memory_note="日本語のメモ：テストは成功しました。" * 20, now=T0)
    count = token_counter()
    for budget in (50, 100, 300, 1000):
        window = m.minutes.build_context("coder", task="bug", budget_tokens=budget, project_id="p", now=T0)
        assert window.tokens == count(window.text) <= budget
    # Another counter, as pack_context takes one: one token a character.
    from memorist.pipelines.context_window import build_context

    window = build_context(m.minutes.engine, "coder", "bug", budget_tokens=300, project_id="p", now=T0, count_tokens=len)
    assert window.tokens == len(window.text) <= 300 and window.cut


def test_the_retrieved_section_is_filled_past_what_other_sections_show(m: Memory):
    for i in range(10):  # old, relevant, outside the 50-minute window
        m.minutes.record("lesson", agent_id="planner", project_id="p", memory_note=f"old note {i}: CSV quoting bug", now=T0 - 86400 * 3 + i)
    for i in range(3):  # recent and relevant: in "recent"
        m.minutes.record("lesson", agent_id="planner", project_id="p", memory_note="CSV quoting bug escape embedded quotes", now=T0 - 3600 + i)
    for i in range(47):
        m.minutes.record("status", agent_id="planner", project_id="p", memory_note=f"standup {i}", now=T0 - 1800 + i)
    window = m.minutes.build_context("coder", task="CSV quoting bug escape embedded quotes", budget_tokens=100_000, project_id="p", now=T0)
    retrieved = window.sections["retrieved"]
    assert len(retrieved) == 5 and all(x["memory_note"].startswith("old note") for x in retrieved)


class _Sloppy(Evaluator):
    def evaluate(self, task, criteria, output):
        return Evaluation(40.0, ["handles quoted fields"], "sloppy", "sloppy")  # type: ignore[list-item]


class _Many(Evaluator):
    def evaluate(self, task, criteria, output):
        return Evaluation(10.0, [Gap(f"gap {i}", "low" if i else "medium", "") for i in range(500)] + [Gap("worst", "high", "")], "", "many")


def test_pair_gaps_are_checked_and_capped(m: Memory, caplog):
    m.minutes.record("task_completed", agent_id="coder", project_id="p", memory_note="quoted fields handled with csv module")
    r = m.minutes.pair_round("CSV importer", "Handles quoted fields", "split(',')", project_id="p", evaluator=_Sloppy())
    assert r["evaluator"] != "sloppy" and r["fallback"].startswith("TypeError")
    r = m.minutes.pair_round("CSV importer", "Handles quoted fields", "x", project_id="p", evaluator=_Many())
    assert r["fallback"] is None and len(r["improvements"]) == len(r["gaps"]) == 10
    assert [g["description"] for g in r["gaps"][:2]] == ["worst", "gap 0"]  # the most severe first
    assert "named 501 gaps" in caplog.text
