"""The runner protocol end to end: ``python -m memorist run-turn`` in a real subprocess,
JSON on stdin and stdout, spec 000's log lines on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from ace_helpers import MappedEmbedder

from memorist import Memory, Playbook, ValidationError
from memorist.ace.runner import deterministic_answer, run_turn, sanitize_answer

TURN_1 = {
    "messages": [{"role": "user", "content": "I get confused when adding fractions with different denominators"
                  "\u2014please remind me that 1/2 becomes 3/6."}],
    "learner_id": "learner-1",
    "conversation_id": "conversation-1",
    "feedback": "Thanks, that helped!",
}
TURN_2 = {
    "messages": [
        {"role": "user", "content": "Hi again!"},
        {"role": "assistant", "content": "Hello! What shall we work on?"},
        {"role": "user", "content": "How do I add fractions with different denominators, like 1/2 + 1/3?"},
    ],
    "learner_id": "learner-1",
    "conversation_id": "conversation-2",
    "feedback": "That makes sense now, thank you.",
}


def memorist(db: str, payload: object, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORIST_", "ACE_"))}
    return subprocess.run(
        [sys.executable, "-m", "memorist", "--db", db, "--embedder", "hashing", "run-turn", *args],
        input=payload if isinstance(payload, str) else json.dumps(payload),
        capture_output=True, text=True, env=env, timeout=120,
    )


@pytest.mark.sqlite_only("python -m memorist run-turn in a subprocess, on a file")
def test_two_conversations_of_one_learner_through_the_cli(tmp_path):
    db = str(tmp_path / "runner.db")
    first = memorist(db, TURN_1)
    assert first.returncode == 0, first.stderr
    out1 = json.loads(first.stdout)  # stdout is exactly one JSON document
    assert set(out1) == {"answer", "mode", "result", "scratch"}
    assert out1["mode"] == "deterministic"
    assert "No language model is configured" in out1["answer"]
    delta1 = out1["scratch"]["ace_delta"]
    assert delta1["num_new_bullets"] == 2 and delta1["num_removals"] == 0
    assert out1["scratch"]["learner_id"] == "learner-1" and out1["scratch"]["conversation_id"] == "conversation-1"
    err1 = first.stderr.splitlines()
    assert err1.count("[ACE Memory] Loaded 0 bullets from SQLite for learner=learner-1") == 1
    assert "[ACE Runner] Memory delta summary new=2 updates=0 removals=0" in err1

    second = memorist(db, TURN_2)
    assert second.returncode == 0, second.stderr
    out2 = json.loads(second.stdout)
    taught = {b["content"] for b in out2["result"]["bullets"]}
    assert "Learner gets confused when adding fractions with different denominators" in taught
    assert "Learner gets confused when adding fractions with different denominators" in out2["answer"]
    assert out2["result"]["context"].startswith("## ACE playbook (learner learner-1)")
    assert {b["conversation_id"] for b in out2["result"]["bullets"]} == {"conversation-1"}
    delta2 = out2["scratch"]["ace_delta"]
    assert delta2["num_updates"] == len(taught) and delta2["num_new_bullets"] == 0
    err2 = second.stderr.splitlines()
    assert sum(line.startswith("[ACE Memory] Loaded") for line in err2) == 1
    assert "[ACE Memory] Loaded 2 bullets from SQLite for learner=learner-1" in err2
    assert any(line.startswith(f"[ACE Memory][Inject] Retrieved {len(taught)} bullets for question: How do I add") for line in err2)
    assert f"[ACE Runner] Memory delta summary new=0 updates={len(taught)} removals=0" in err2


@pytest.mark.sqlite_only("python -m memorist run-turn in a subprocess, on a file")
def test_bad_input_is_a_clear_error(tmp_path):
    db = str(tmp_path / "bad.db")
    broken = memorist(db, "{not json")
    assert broken.returncode == 2 and "not valid JSON" in broken.stderr and broken.stdout == ""
    blank = memorist(db, {"messages": [{"role": "user", "content": "hi"}], "learner_id": " "})
    assert blank.returncode == 1 and "error: learner_id: must be a non-empty string" in blank.stderr


@pytest.mark.sqlite_only("python -m memorist run-turn in a subprocess, on a file")
def test_spec_000s_own_input_needs_no_learner_id(tmp_path):
    """Spec 000's verification checklist pipes {"messages": [...]} alone into the runner."""
    db = str(tmp_path / "spec.db")
    done = memorist(db, {"messages": [{"role": "user", "content": "Help me multiply 12 by 5."}]})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["scratch"]["learner_id"] == "default" and out["mode"] == "deterministic"
    assert "[ACE Memory] Loaded 0 bullets from SQLite for learner=default" in done.stderr.splitlines()


def test_sanitize_answer_drops_stray_numbers_only():
    assert sanitize_answer("Add the numerators.\n10\nThen simplify.\n\n\n\nDone") == "Add the numerators.\nThen simplify.\n\nDone"
    assert sanitize_answer("  10  ") == "10"  # an answer that is only a number stays
    assert sanitize_answer("1/2 + 1/3 = 5/6\n 3.5 \n") == "1/2 + 1/3 = 5/6"
    assert sanitize_answer(None) == ""


def test_a_configured_model_answers_with_the_injected_context(backend):
    embedder = MappedEmbedder({"Use pizza slices": MappedEmbedder.axis(2), "How do I add 1/2 + 1/3?": MappedEmbedder.axis(2)})
    with Memory(backend.target, embedder=embedder) as memory:
        pb = Playbook(memory)
        pb.turn("sam", "c1").learn(question="q", lessons=["Use pizza slices"], topic="fractions")
        seen = {}

        def model(system, messages):
            seen["system"], seen["messages"] = system, messages
            return "Picture two pizzas.\n10\nThe answer is 5/6."

        out = run_turn(pb, {"messages": [{"role": "user", "content": "How do I add 1/2 + 1/3?"}], "learner_id": "sam",
                            "conversation_id": "c2", "outcome": "success"}, answerer=model)
        assert out["mode"] == "llm" and out["answer"] == "Picture two pizzas.\nThe answer is 5/6."
        assert "helpful=1 harmful=0 :: Use pizza slices" in seen["system"]
        assert out["scratch"]["ace_delta"]["num_updates"] >= 1
        held = {b.content: b for b in pb.bullets("sam")}
        assert held["Use pizza slices"].helpful == 2  # it was in the prompt of a successful turn
        assert "For fractions: Picture two pizzas" in held  # the model's approach worked: a new strategy


def test_a_failing_model_falls_back_to_the_deterministic_answer(backend):
    from memorist import ProviderError

    with Memory(backend.target, embedder="hashing") as memory:
        def broken(system, messages):
            raise ProviderError("the model is down")

        out = Playbook(memory).run_turn({"messages": [{"role": "user", "content": "hi"}], "learner_id": "sam"}, answerer=broken)
        assert out["mode"] == "deterministic" and "No language model is configured" in out["answer"]


def test_protocol_validation_names_the_field(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        pb = Playbook(memory)
        for payload, field in (
            ([], "input"), ({"learner_id": "a"}, "messages"), ({"messages": [{"role": "assistant", "content": "x"}], "learner_id": "a"}, "messages"),
            ({"messages": [{"role": "user"}], "learner_id": "a"}, "messages[0]"),
            ({"messages": [{"role": "user", "content": "x"}], "learner_id": "a", "feedback": 3}, "feedback"),
        ):
            with pytest.raises(ValidationError) as info:
                run_turn(pb, payload)
            assert info.value.field == field


def test_deterministic_answer_says_so():
    assert deterministic_answer("q", []).startswith("No language model is configured")


def test_with_a_model_and_the_switch_on_the_llm_roles_are_used_and_fall_back(backend, monkeypatch):
    from memorist.llm.testing import ScriptedLLM

    monkeypatch.setenv("ACE_CURATOR_USE_LLM", "true")
    llm = ScriptedLLM(default="Picture two pizzas cut into sixths.")  # never valid JSON for the roles
    with Memory(backend.target, embedder="hashing", llm=llm) as memory:
        pb = memory.playbooks
        assert (type(pb.reflector).__name__, type(pb.curator).__name__) == ("LLMReflector", "LLMCurator")
        out = pb.run_turn({"messages": [{"role": "user", "content": "I keep messing up 1/2 + 1/3"}],
                           "learner_id": "sam", "conversation_id": "c1", "outcome": "success"})
        assert out["mode"] == "llm" and out["answer"] == "Picture two pizzas cut into sixths."
        assert llm.requests[0].system.startswith("You are a patient tutor")
        # The roles' replies were unusable: the heuristics learned instead, nothing was lost.
        assert out["scratch"]["ace_delta"]["num_new_bullets"] >= 1
    monkeypatch.setenv("ACE_CURATOR_USE_LLM", "false")
    with Memory(backend.target, embedder="hashing", llm=ScriptedLLM(default="x")) as memory:
        assert type(memory.playbooks.curator).__name__ == "HeuristicCurator"
        assert Playbook(memory, preset="baseline").config.name == "baseline"
