"""Reflection (spec 001 §3.1, §4 Phase 5): ``reflect`` and ``batch_reflect``, the
heuristic reflector, and the LLM reflector through the real ``openai`` SDK against
the fake server — with a fallback that loses nothing."""

from __future__ import annotations

import json

import pytest
from fake_openai import error, text
from learning_helpers import run_task

from memorist import Memory, ValidationError
from memorist.llm.openai import OpenAIResponsesLLM
from memorist.model import Kind
from memorist.roles.learning import Step, Trajectory
from memorist.roles.llm import LLMReflector
from memorist.roles.reflector import HeuristicReflector

RETRY_FAIL = [
    ("decision", "Decided to call the API without a token"),
    ("action", "GET /users"),
    ("observation", "HTTP 200: page 1", {"ok": True}),
    ("decision", "Retry immediately"),
    ("observation", "Error: HTTP 429 Too Many Requests"),
]


def test_reflect_returns_the_specs_shape_and_stores_a_linked_reflection(mem) -> None:
    tid = run_task(mem, [("decision", "Use exponential backoff for retries"), ("decision", "Validate input before the API call"),
                         ("observation", "Got 3 pages")], "success")
    result = mem.learning.reflect(tid, agent_id="bot")
    assert set(result["insights"]) == {"successful_patterns", "failure_patterns", "neutral_observations", "recommendations"}
    assert result["insights"]["successful_patterns"] == ["Use exponential backoff for retries", "Validate input before the API call"]
    record = mem.store.get(result["memory_id"])
    assert record.kind is Kind.REFLECTION and record.lineage == {"trajectory_id": tid}
    assert result["trajectory_id"] == tid and result["status"] == "success"


def test_the_heuristic_names_the_decision_an_error_followed() -> None:
    insights = HeuristicReflector().reflect_trajectory(Trajectory(
        task="t", status="failure", steps=tuple(Step(*s[:2], s[2] if len(s) > 2 else {}) for s in RETRY_FAIL)))
    assert insights.failure_patterns == ("Retry immediately",)
    assert insights.neutral_observations == ("Call the API without a token",)
    assert insights.successful_patterns == ()
    # Error text is an observation, never a pattern: the summary says what was seen.
    alone = HeuristicReflector().reflect_trajectory(Trajectory(task="t", status="failure", steps=(
        Step("action", "GET /users"), Step("observation", "HTTP 503 Service Unavailable")), error="gave up"))
    assert alone.lists() == {"successful_patterns": [], "failure_patterns": [], "neutral_observations": [], "recommendations": []}
    assert "errors seen: HTTP 503 Service Unavailable" in alone.summary
    bare = HeuristicReflector().reflect_trajectory(Trajectory(task="t", status="failure", error="Disk full"))
    assert bare.failure_patterns == () and "errors seen: Disk full" in bare.summary


def test_a_running_trajectory_cannot_be_reflected_on(mem) -> None:
    with pytest.raises(ValidationError, match="still running"):
        mem.learning.reflect(mem.learning.start_trajectory("Not done"))


def test_batch_reflect_finds_patterns_across_trajectories(mem) -> None:
    tids = []
    for i in range(10):
        steps = [("decision", "Use exponential backoff")]
        if i % 3 == 0:
            steps += [("decision", "Retry immediately"), ("observation", "Error: HTTP 429")]
        tids.append(run_task(mem, steps, "failure" if i % 3 == 0 else "success"))
    run_task(mem, [("decision", "Something else")], "success", task_type="reasoning")
    assert mem.learning.batch_reflect(agent_id="bot", min_trajectories=11) == []
    (result,) = mem.learning.batch_reflect(agent_id="bot", task_type="api_call", since="2000-01-01T00:00:00Z", min_trajectories=10)
    assert result["trajectory_count"] == 10 and result["task_type"] == "api_call" and result["success_rate"] == 0.6
    assert result["insights"]["successful_patterns"] == ["Use exponential backoff"]
    assert result["insights"]["failure_patterns"] == ["Retry immediately"]
    assert set(result["evidence"]["Use exponential backoff"]) == set(tids)  # every run that took it
    assert len(result["evidence"]["Retry immediately"]) == 4
    per_type = mem.learning.batch_reflect(agent_id="bot", min_trajectories=1)
    assert sorted(r["task_type"] for r in per_type) == ["api_call", "reasoning"]


@pytest.fixture
def llm_mem(backend, fake_openai, clock):
    m = Memory(backend.target, embedder="hashing", llm=OpenAIResponsesLLM(sleep=lambda _s: None))
    m.learning.clock = clock
    yield m
    m.close()


def test_the_llm_reflector_uses_the_specs_prompt_and_json(llm_mem, fake_openai) -> None:
    fake_openai.script("responses", text({
        "successful_patterns": ["Used exponential backoff for retries"],
        "failure_patterns": ["Did not check rate limit headers"],
        "neutral_observations": [{"pattern": "Pages vary in size"}],
        "recommendations": ["Add rate limit monitoring"],
        "summary": "Worked after backoff.",
    }))
    tid = run_task(llm_mem, [("decision", "Back off"), ("observation", "Error: HTTP 429")], "partial")
    result = llm_mem.learning.reflect(tid, agent_id="bot")
    assert result["insights"] == {
        "successful_patterns": ["Used exponential backoff for retries"],
        "failure_patterns": ["Did not check rate limit headers"],
        "neutral_observations": ["Pages vary in size"],
        "recommendations": ["Add rate limit monitoring"],
    }
    (request,) = fake_openai.requests
    prompt = request.prompt_text()
    assert "What strategies were successful? (✓ Helpful patterns)" in prompt
    assert "Task:" in prompt and "Status: partial" in prompt and "1. [decision] Back off" in prompt
    assert request.body["text"]["format"]["type"] == "json_schema"


def test_the_llm_reflector_falls_back_to_the_heuristic_and_loses_nothing(llm_mem, fake_openai, caplog) -> None:
    fake_openai.default["responses"] = error(500, "model down")
    tid = run_task(llm_mem, RETRY_FAIL, "failure")
    result = llm_mem.learning.reflect(tid, agent_id="bot")
    assert result["insights"]["failure_patterns"] == ["Retry immediately"]  # the heuristic's answer
    assert any("Falling back to HeuristicReflector" in r.getMessage() for r in caplog.records)
    assert llm_mem.store.get(result["memory_id"]) is not None


def test_the_llm_batch_reflection_names_its_trajectories(llm_mem, fake_openai) -> None:
    tids = [run_task(llm_mem, [("decision", f"Step {i}")], "success") for i in range(3)]
    bad = text({"successful_patterns": [{"pattern": "Cache answers", "trajectories": [0, 7]}]})
    good = text({"successful_patterns": [{"pattern": "Cache answers", "trajectories": [0, 2]}], "summary": "s"})
    fake_openai.script("responses", bad, good)
    (result,) = llm_mem.learning.batch_reflect(agent_id="bot", min_trajectories=3)
    assert result["insights"]["successful_patterns"] == ["Cache answers"]
    assert set(result["evidence"]["Cache answers"]) == {tids[0], tids[2]}  # oldest first, as listed
    assert "not listed" in json.dumps(fake_openai.requests[1].body)  # the repair retry said why


def test_a_model_per_call(mem, fake_openai) -> None:
    fake_openai.script("responses", text({"successful_patterns": ["From the model"]}))
    tid = run_task(mem, [("decision", "x")], "success")
    assert mem.learning.reflect(tid, llm=OpenAIResponsesLLM(sleep=lambda _s: None))["insights"]["successful_patterns"] == ["From the model"]
    assert mem.learning.reflect(tid)["insights"]["successful_patterns"] == ["X"]  # the Memory has no model: the heuristic


def test_llm_reflector_unit(fake_openai) -> None:
    fake_openai.script("responses", text({"failure_patterns": ["A", "a", " "]}))
    insights = LLMReflector(OpenAIResponsesLLM(sleep=lambda _s: None)).reflect_trajectory(Trajectory(task="t", status="failure"))
    assert insights.failure_patterns == ("A",)


def test_a_long_trajectory_reaches_the_model_within_a_bounded_prompt(llm_mem, fake_openai) -> None:
    """A trajectory may log any number of steps of up to a message's length: the
    reflection's prompt shows how it began and how it ended, and says how many steps
    it left out, instead of sending megabytes (which no model would take)."""
    long = "x" * 20_000
    steps = [("action", f"Call {i}: {long}") for i in range(300)]
    tid = run_task(llm_mem, [("decision", "Start with the cached token"), *steps, ("observation", "Finished: HTTP 200")],
                   "success", task="T" * 50_000)
    fake_openai.script("responses", text({"successful_patterns": ["Reuse a cached token"]}))
    assert llm_mem.learning.reflect(tid, agent_id="bot")["insights"]["successful_patterns"] == ["Reuse a cached token"]
    prompt = json.dumps(fake_openai.requests[-1].body)
    assert len(prompt) < 60_000  # 6 MB of steps and a 50,000-character task
    assert "Start with the cached token" in prompt and "Finished: HTTP 200" in prompt
    assert "steps left out" in prompt and "more characters" in prompt


def test_a_batch_reflection_reads_the_newest_trajectories_of_a_task_type(llm_mem, fake_openai) -> None:
    """One prompt lists every trajectory of a batch: past 50 of one task type, the
    newest 50, each shown within a bound."""
    from memorist.ace.learning import BATCH_TRAJECTORIES

    tids = [run_task(llm_mem, [("decision", f"Step #{i}."), ("observation", "y" * 30_000)], "success")
            for i in range(BATCH_TRAJECTORIES + 5)]
    fake_openai.script("responses", text({"successful_patterns": [{"pattern": "Cache answers", "trajectories": [0, 49]}]}))
    (result,) = llm_mem.learning.batch_reflect(agent_id="bot", min_trajectories=3)
    assert set(result["evidence"]["Cache answers"]) == {tids[5], tids[-1]}  # listed oldest first, from the 6th
    prompt = json.dumps(fake_openai.requests[-1].body)
    assert "Step #4." not in prompt and "Step #5." in prompt and f"Step #{BATCH_TRAJECTORIES + 4}." in prompt
    assert len(prompt) < 200_000  # 55 trajectories of 30,000 characters each


def test_a_batch_reflection_counts_what_it_reads_and_stops_when_its_caller_left(mem) -> None:
    from memorist.errors import CancelledCallError
    from memorist.work import Meter, metered

    for i in range(6):
        run_task(mem, [("decision", "Use exponential backoff for retries"), ("observation", f"Page {i}")], "success")
    with metered() as meter:
        assert len(mem.learning.batch_reflect(agent_id="bot")) == 1
    assert meter.units >= 6 * 3  # each trajectory and its steps
    gone = Meter()
    gone.cancel()
    with metered(gone), pytest.raises(CancelledCallError):
        mem.learning.batch_reflect(agent_id="bot")
    assert mem.store.stats()["by_kind"]["reflection"] == 1  # the first batch's, and no other
