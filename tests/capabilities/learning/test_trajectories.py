"""Trajectories (spec 001 §2.2, §3.1, §7.1): start, steps, complete, query, parents,
content-addressed traces, sampling and retention."""

from __future__ import annotations

import pytest
from learning_helpers import DAY, run_task

from memorist import Memory, NotFoundError, ValidationError
from memorist.model import Kind
from memorist.policies.learning import trace_digest
from memorist.store.base import ScopeFilter

STEPS = [("decision", "Use exponential backoff"), ("action", "GET /users"), ("observation", "Got 3 pages", {"pages": 3})]


def traces(m: Memory, agent: str = "bot") -> list:
    return [r for r in m.store.list(ScopeFilter(m.config.tenant_id, None, agent, "memorist:traces")) if r.kind is Kind.TRACE]


def test_a_trajectory_from_start_to_completion(mem, clock) -> None:
    tid = mem.learning.start_trajectory("Fetch user data from API", task_type="api_call", agent_id="bot")
    running = mem.learning.get_trajectory(tid, agent_id="bot")
    assert running["status"] == "running" and running["steps"] == [] and running["completed_at"] is None
    for step in STEPS:
        mem.learning.log_step(tid, *step, agent_id="bot")
    clock.advance(seconds=2.5)
    done = mem.learning.complete_trajectory(tid, "success", 0.95, metrics={"tokens": 1500, "cost_usd": 0.03}, agent_id="bot")
    assert done["status"] == "success" and done["success_score"] == 0.95
    assert done["tokens_used"] == 1500 and done["cost_usd"] == 0.03 and done["duration_ms"] == 2500.0
    assert done["trace_hash"] == trace_digest([{"type": t, "description": d, "metadata": (m[0] if m else {})} for t, d, *m in STEPS])
    got = mem.learning.get_trajectory(tid)
    assert [(s["type"], s["description"]) for s in got["steps"]] == [(t, d) for t, d, *_ in STEPS]
    assert got["steps"][2]["metadata"] == {"pages": 3}
    assert got["agent_id"] == "bot" and got["user_id"] is None and got["task_type"] == "api_call"


def test_defaults_metrics_and_errors(mem) -> None:
    tid = mem.learning.start_trajectory("Parse the invoice")  # no ids: the agent "default"
    assert mem.learning.get_trajectory(tid)["agent_id"] == "default"
    done = mem.learning.complete_trajectory(tid, "failure", error_message="PDF is encrypted", metrics={"duration_ms": 1500})
    assert done["success_score"] == 0.0 and done["error_message"] == "PDF is encrypted" and done["duration_ms"] == 1500
    with pytest.raises(ValidationError, match="already completed"):
        mem.learning.complete_trajectory(tid, "success")
    with pytest.raises(ValidationError, match="already completed"):
        mem.learning.log_step(tid, "action", "too late")
    with pytest.raises(ValidationError, match="status"):
        mem.learning.complete_trajectory(mem.learning.start_trajectory("x"), "done")
    with pytest.raises(ValidationError, match="success_score"):
        mem.learning.complete_trajectory(mem.learning.start_trajectory("x"), "success", 1.5)
    with pytest.raises(ValidationError, match="metrics.tokens"):
        mem.learning.complete_trajectory(mem.learning.start_trajectory("x"), "success", metrics={"tokens": -1})
    with pytest.raises(ValidationError, match="task_description"):
        mem.learning.start_trajectory("   ")
    with pytest.raises(ValidationError, match="step_type"):
        mem.learning.log_step(mem.learning.start_trajectory("x"), "", "y")


def test_by_id_calls_answer_not_found_outside_the_callers_ids(mem, backend) -> None:
    tid = mem.learning.start_trajectory("Alex's task", user_id="alex")
    for ids in ({"user_id": "bob"}, {"agent_id": "other"}):
        with pytest.raises(NotFoundError, match="trajectory not found"):
            mem.learning.get_trajectory(tid, **ids)
        with pytest.raises(NotFoundError):
            mem.learning.log_step(tid, "action", "sneaky", **ids)
        with pytest.raises(NotFoundError):
            mem.learning.complete_trajectory(tid, "success", **ids)
    with pytest.raises(NotFoundError):
        mem.learning.get_trajectory("no-such-id")
    other = Memory(backend.target, embedder="hashing", tenant_id="acme")
    try:
        with pytest.raises(NotFoundError):
            other.learning.get_trajectory(tid)
    finally:
        other.close()
    assert mem.learning.get_trajectory(tid, user_id="alex")["user_id"] == "alex"


def test_query_by_agent_status_type_time_and_parent(mem, clock) -> None:
    parent = mem.learning.start_trajectory("Monthly close", "workflow", agent_id="bot")
    a = run_task(mem, [], "success", task_type="api_call")
    clock.advance(days=2)
    b = run_task(mem, [], "failure", task_type="api_call")
    c = mem.learning.start_trajectory("Step of the close", "reasoning", parent, agent_id="bot")
    run_task(mem, [], "success", agent="other")
    ids = lambda items: [t["trajectory_id"] for t in items]  # noqa: E731
    assert ids(mem.learning.query_trajectories(agent_id="bot")) == [c, b, a, parent]  # newest first
    assert ids(mem.learning.query_trajectories(agent_id="bot", status="failure")) == [b]
    assert ids(mem.learning.query_trajectories(agent_id="bot", status="running")) == [c, parent]
    assert ids(mem.learning.query_trajectories(agent_id="bot", task_type="api_call")) == [b, a]
    assert ids(mem.learning.query_trajectories(agent_id="bot", since=clock.now - DAY)) == [c, b]
    assert ids(mem.learning.query_trajectories(agent_id="bot", until=clock.now - DAY)) == [a, parent]
    assert ids(mem.learning.query_trajectories(agent_id="bot", parent_trajectory_id=parent)) == [c]
    assert mem.learning.get_trajectory(c)["parent_trajectory_id"] == parent
    assert ids(mem.learning.query_trajectories(agent_id="bot", limit=1)) == [c]
    with pytest.raises(NotFoundError):
        mem.learning.start_trajectory("orphan", parent_trajectory_id="missing")


def test_identical_step_sequences_are_stored_once(mem) -> None:
    mem.learning_config = {"trajectory_sample_rate": 1.0}
    first = run_task(mem, STEPS, "success")
    second = run_task(mem, STEPS, "success")
    other = run_task(mem, STEPS[:2], "success")
    (shared, single) = sorted(traces(mem), key=lambda r: -r.metadata["uses"])
    assert shared.metadata["uses"] == 2 and set(shared.metadata["trajectory_ids"]) == {first, second}
    assert single.metadata["trajectory_ids"] == [other]
    a, b = mem.learning.get_trajectory(first), mem.learning.get_trajectory(second)
    assert a["trace_hash"] == b["trace_hash"] == shared.content_hash and a["trace_stored"] and b["trace_stored"]
    assert a["steps"] == b["steps"] and len(a["steps"]) == 3


def test_sampling_keeps_every_failure_and_a_share_of_successes(mem) -> None:
    mem.learning_config = {"trajectory_sample_rate": 0.0}
    ok = run_task(mem, [("decision", "A")], "success")
    bad = run_task(mem, [("decision", "B"), ("observation", "Error: 500")], "failure")
    partial = run_task(mem, [("decision", "C")], "partial")
    stored = {r.metadata["trajectory_ids"][0] for r in traces(mem)}
    assert stored == {bad, partial}
    unsampled = mem.learning.get_trajectory(ok)
    assert not unsampled["trace_stored"] and unsampled["trace_hash"]
    assert [s["description"] for s in unsampled["steps"]] == ["A"]  # still readable from the log
    mem.learning_config = {"trajectory_sample_rate": 0.0, "always_store_failures": False}
    run_task(mem, [("decision", "D")], "failure")
    assert len(traces(mem)) == 2


def test_the_sample_rate_is_a_rate(backend) -> None:
    import random

    m = Memory(backend.target, embedder="hashing")
    try:
        m.learning_config = {"trajectory_sample_rate": 0.25}
        m.learning.trajectories.rng = random.Random(3)
        for i in range(80):
            run_task(m, [("decision", f"step {i}")], "success")
        assert 10 <= len(traces(m)) <= 30
    finally:
        m.close()


def test_retention_deletes_old_trajectories_traces_and_reflections(mem, clock) -> None:
    mem.learning_config = {"trajectory_sample_rate": 1.0, "trajectory_retention_days": 30}
    old = run_task(mem, [("decision", "Old way")], "success")
    reflection = mem.learning.reflect(old, agent_id="bot")["memory_id"]
    clock.advance(days=20)
    kept = run_task(mem, [("decision", "New way")], "failure")
    clock.advance(days=15)  # old: 35 days, kept: 15 days
    assert mem.learning.prune_trajectories(agent_id="bot") == {"trajectories": 1, "traces": 1, "reflections": 1}
    assert [t["trajectory_id"] for t in mem.learning.query_trajectories(agent_id="bot")] == [kept]
    with pytest.raises(NotFoundError):
        mem.learning.get_trajectory(old)
    assert mem.store.get(reflection).status.value == "deleted"
    assert [r.metadata["trajectory_ids"] for r in traces(mem)] == [[kept]]
    assert [e.op for e in mem.store.history(old)][-1] == "expire"  # its history stays in the log


def test_retention_runs_by_itself_every_few_completions(mem, clock) -> None:
    mem.learning_config = {"trajectory_retention_days": 1, "retention_every": 2}
    run_task(mem, [], "success")
    clock.advance(days=3)
    run_task(mem, [], "success")  # the second completion prunes
    assert len(mem.learning.query_trajectories(agent_id="bot")) == 1


def test_learning_settings_come_from_the_environment_when_built(backend, monkeypatch) -> None:
    monkeypatch.setenv("TRAJECTORY_SAMPLE_RATE", "0.5")
    monkeypatch.setenv("TRAJECTORY_RETENTION_DAYS", "7")
    monkeypatch.setenv("PLAYBOOK_VERSION_KEEP_LATEST", "3")
    with Memory(backend.target, embedder="hashing") as m:
        config = m.learning_config
        assert config.trajectory_sample_rate == 0.5 and config.trajectory_retention_days == 7
        assert config.versions.keep_latest == 3 and config.versions.keep_days == 90
    monkeypatch.setenv("TRAJECTORY_SAMPLE_RATE", "lots")
    with Memory(backend.fresh(), embedder="hashing") as m, pytest.raises(Exception, match="TRAJECTORY_SAMPLE_RATE"):
        m.learning_config  # noqa: B018
