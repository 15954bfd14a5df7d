"""The minutes' edges a user meets (issue 25, item 8): "recent" is the latest in time,
not the last appended; an outcome outside 0-100 and a minute dated in the future are
refused; PAIR compares the score as the evaluator gave it; the context window and an
evaluation run take ``now`` on every surface. On each backend."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from memorist import ValidationError
from memorist.cli import cli
from memorist.llm.testing import ScriptedLLM
from memorist.pipelines.minutes import CLOCK_SKEW
from memorist.roles.evaluator import ScriptedEvaluator
from memorist.roles.llm import LLMEvaluator

T0 = 1_700_000_000.0  # 2023-11-14


def note(m, text: str, at: float, **kw):
    return m.minutes.record("status", agent_id="tester", project_id="apollo", memory_note=text, now=at, **kw)


def test_recent_is_the_latest_in_time_not_the_last_appended(m):
    made = [note(m, f"update {i}", T0 + 60 * i) for i in range(5)]
    backfilled = note(m, "a standup of last year, written down today", T0 - 365 * 86_400)
    late_but_latest = note(m, "the newest update, recorded after the back-fill", T0 + 3600)
    ids = [x["id"] for x in m.minutes.recent(3, project_id="apollo")]
    assert ids == [made[3]["id"], made[4]["id"], late_but_latest["id"]]  # oldest first, by time
    everything = [x["id"] for x in m.minutes.recent(50, project_id="apollo")]
    assert everything[0] == backfilled["id"] and everything[-1] == late_but_latest["id"] and len(everything) == 7
    # Equal times keep the order they were recorded in.
    twins = [note(m, f"twin {i}", T0 + 7200) for i in range(2)]
    assert [x["id"] for x in m.minutes.recent(2, project_id="apollo")] == [t["id"] for t in twins]
    # The context window's recent section is the same.
    window = m.minutes.build_context("coder", project_id="apollo", now=T0 + 7200)
    assert backfilled["id"] not in [x["id"] for x in window.sections["recent"][-5:]]


def test_recent_reads_the_log_from_its_end_and_stops_when_no_earlier_minute_can_count(m, monkeypatch):
    import memorist.pipelines.minutes as minutes_module

    monkeypatch.setattr(minutes_module, "_PAGE", 4)
    real_time = time.time
    now = real_time()
    for i in range(30):  # recorded a month ago, each when it happened
        at = now - 30 * 86_400 + 60 * i
        with monkeypatch.context() as then:
            then.setattr(time, "time", lambda at=at: at)
            note(m, f"old {i}", at)
    late = note(m, "recorded now, happened ten days ago", now - 10 * 86_400)
    latest = [note(m, f"new {i}", now - 120 + i) for i in range(3)]
    pages = []
    real = m.store.events

    def counted(*args, **kwargs):
        pages.append(kwargs.get("before"))
        return real(*args, **kwargs)

    monkeypatch.setattr(m.store, "events", counted)
    assert [x["id"] for x in m.minutes.recent(3, project_id="apollo")] == [x["id"] for x in latest]
    assert len(pages) == 2  # not the 9 pages of the log: the rest was recorded too early to count
    pages.clear()
    assert [x["id"] for x in m.minutes.recent(4, project_id="apollo")] == [late["id"], *(x["id"] for x in latest)]
    pages.clear()
    everything = m.minutes.recent(100, project_id="apollo")
    assert everything[0]["memory_note"] == "old 0" and len(everything) == 34 and len(pages) == 9


@pytest.mark.parametrize("value", [250, -5, 100.5, -0.01, True, "90", [90], {"pct": 90}])
def test_an_outcome_outside_0_to_100_is_refused(m, value):
    with pytest.raises(ValidationError, match="a number from 0 to 100") as info:
        note(m, "task done", T0, data={"success_criteria_met": value})
    assert info.value.field == "data.success_criteria_met"
    assert m.minutes.recent(10, project_id="apollo") == []


def test_an_outcome_of_0_to_100_is_taken(m):
    for value in (0, 49.5, 100, None):
        kept = note(m, "task done", T0, data={"success_criteria_met": value})
        assert kept["data"]["success_criteria_met"] == value
    assert [i["confidence"] for i in note(m, "done", T0, data={"success_criteria_met": 100})["insights"]] == [1.0]


def test_a_minute_dated_in_the_future_is_refused_beyond_clock_skew(m):
    assert CLOCK_SKEW == 300.0
    for future in (time.time() + 3600, "+2h", "2999-01-01T00:00:00Z", time.time() + CLOCK_SKEW + 30):
        with pytest.raises(ValidationError, match="in the future") as info:
            note(m, "from tomorrow", future)
        assert info.value.field == "now"
    assert m.minutes.recent(10, project_id="apollo") == []
    # Within the skew, and any time in the past, is taken; no time at all is now.
    assert note(m, "a clock a minute ahead", time.time() + 60)
    assert note(m, "yesterday", "-1d")["ts"] == pytest.approx(time.time() - 86_400, abs=5)
    assert note(m, "now", None)["ts"] == pytest.approx(time.time(), abs=5)


def test_pair_compares_the_unrounded_score_with_its_threshold(m):
    below = m.minutes.pair_round("t", "c", "o", threshold=95, project_id="apollo", evaluator=ScriptedEvaluator([94.99]))
    assert below["met"] is False and below["score"] == 94.99 and below["improvements"]
    at_threshold = m.minutes.pair_round("t", "c", "o", threshold=95, project_id="apollo", evaluator=ScriptedEvaluator([95]))
    assert at_threshold["met"] is True and not at_threshold["improvements"]
    result = m.minutes.pair("t", "c", "o", lambda output, improvements: output + "!", threshold=95, max_rounds=3,
                            project_id="apollo", evaluator=ScriptedEvaluator([94.99, 94.999, 94.9999]))
    assert result.converged is False and len(result.rounds) == 3 and result.score == 94.9999
    assert [r.met for r in result.rounds] == [False, False, False]
    done = m.minutes.pair("t", "c", "o", lambda output, improvements: output, threshold=95, max_rounds=3,
                          project_id="apollo", evaluator=ScriptedEvaluator([94.99, 95.0]))
    assert done.converged is True and len(done.rounds) == 2


def test_pair_with_a_model_decides_on_its_unrounded_score(m):
    reply = {"success_criteria_met": 94.96, "identified_gaps": [{"description": "edge case", "criterion": "c"}], "summary": "almost"}
    evaluator = LLMEvaluator(ScriptedLLM(default=reply))
    below = m.minutes.pair_round("t", "c", "o", threshold=95, project_id="apollo", evaluator=evaluator)
    assert below["met"] is False and below["score"] == 94.96 and below["evaluator"] == "scripted:scripted"
    result = m.minutes.pair("t", "c", "o", lambda output, improvements: output + "!", threshold=95, max_rounds=2,
                            project_id="apollo", evaluator=evaluator)
    assert result.converged is False and [r.score for r in result.rounds] == [94.96, 94.96]


def test_the_context_window_and_evaluation_honour_now(m):
    early = note(m, "the parser work starts", T0)
    later = note(m, "the parser work is done", T0 + 86_400)
    window = m.minutes.build_context("coder", "parser work", project_id="apollo", now=T0 + 60)
    shown = [x["id"] for items in window.sections.values() for x in items]
    assert early["id"] in shown and later["id"] not in shown  # it had not happened yet
    report = m.minutes.evaluate(project_id="apollo", now=T0 + 60, dry_run=True)
    assert (report["in_log"], report["in_index"]) == (1, 1) and list(report["scores"]) == [early["id"]]
    fresh = m.minutes.evaluate(project_id="apollo", now=T0 + 86_400, dry_run=True)["scores"]
    assert fresh[later["id"]]["recency"] == 1.0  # scored as of now: a day old at most
    assert set(fresh) == {early["id"], later["id"]}


def test_context_and_evaluate_take_now_on_the_command_line(backend):
    runner = CliRunner()

    def memorist(*args: str, code: int = 0):
        result = runner.invoke(cli, ["--db", backend.target, "--embedder", "hashing", *args])
        assert result.exit_code == code, (result.stdout, result.stderr)
        return result

    memorist("minutes", "record", "status", "--project", "apollo", "--note", "two days ago", "--at", "-2d")
    memorist("minutes", "record", "status", "--project", "apollo", "--note", "an hour ago", "--at", "-1h")
    context = json.loads(memorist("--json", "context", "coder", "--project", "apollo", "--now", "-1d").stdout)
    assert [x["memory_note"] for x in context["sections"]["recent"]] == ["two days ago"]
    both = json.loads(memorist("--json", "context", "coder", "--project", "apollo").stdout)
    assert [x["memory_note"] for x in both["sections"]["recent"]] == ["two days ago", "an hour ago"]
    report = json.loads(memorist("--json", "evaluate", "--project", "apollo", "--dry-run", "--now", "-1d").stdout)
    assert report["in_log"] == 1
    assert "--now" in memorist("context", "coder", "--now", "last tuesday", code=1).stderr
    assert "--at" in memorist("minutes", "record", "status", "--at", "+1d", code=1).stderr
