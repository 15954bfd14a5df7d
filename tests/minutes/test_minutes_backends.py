"""Spec 003's data flow on both storage backends: minutes → index → context →
evaluation → reindex → PAIR, on a SQLite file and on PostgreSQL (``pg_url``)."""

from __future__ import annotations

import pytest

from memorist import Memory
from memorist.roles.evaluator import ScriptedEvaluator

T0 = 1_800_000_000.0
DAY = 86_400.0


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "m.db")


def test_the_whole_flow(target):
    with Memory(target, embedder="hashing") as m:
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

    with Memory(target, embedder="hashing") as m:  # a new session: all of it was stored
        assert m.minutes.reindex(project_id="apollo")["restored"] == 1
        assert old["id"] in {x["id"] for x in m.minutes.search("ancient standup", 10, project_id="apollo")}
        window = m.minutes.build_context("coder", "quoting bug", budget_tokens=200, project_id="apollo", now=T0)
        assert window.tokens <= 200 and done["id"] in [x["id"] for x in window.sections["recent"]]
        result = m.minutes.pair("Write the CSV importer", "Has unit tests", "v1", lambda out, imps: out + " v2", project_id="apollo",
                        evaluator=ScriptedEvaluator([40, 100]))
        assert result.converged and len(m.store.events(ops=["pair_round"])) == 2
        assert result.rounds[0].improvements[0]["memories"][0]["id"] == done["id"]
