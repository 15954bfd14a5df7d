"""The tutor's graph: nodes and modes in the log, the offline arithmetic, the
playbook growing by at most two bullets a turn, a model in every mode (a scripted
one, and the OpenAI SDK against the fake server)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import pytest

from memorist import Memory, Playbook, ProviderError, TransientProviderError
from memorist.agent.tutor import Tutor, choose_mode, mask_reveal
from memorist.llm.testing import ScriptedLLM
from memorist.roles.learning import Lesson, Reflection
from memorist.roles.reflector import HeuristicReflector

NODES = ["router", "planner", "solver", "critic", "learning"]


def run_turn(db: str, payload: dict, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORIST_", "ACE_", "GEMINI_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "memorist", "--db", db, "--embedder", "hashing", "run-turn", *args],
        input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=120,
    )


def graph_lines(stderr: str) -> list[str]:
    return [line.split()[2] for line in stderr.splitlines() if line.startswith("[ACE Graph] ")]


@pytest.mark.sqlite_only("memorist run-turn in a subprocess, on a file")
def test_run_turn_is_the_graph_and_answers_arithmetic_offline(tmp_path):
    db = str(tmp_path / "tutor.db")
    done = run_turn(db, {"messages": [{"role": "user", "content": "Help me multiply 12 by 5."}], "learner_id": "sam"})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"answer", "mode", "result", "scratch"}
    assert out["answer"] == "12 * 5 = 60" and out["mode"] == "deterministic"
    assert out["scratch"]["reasoning_mode"] == "react" and "ace_delta" in out["scratch"]
    assert out["scratch"]["tool_calls"] == [{"tool": "calculator", "input": "12 * 5", "result": "60"}]
    err = done.stderr.splitlines()
    assert graph_lines(done.stderr) == NODES  # every node ran, once, in order
    assert "[ACE Graph] router mode=react reason=arithmetic to work out: 12 * 5" in err
    assert "[ACE Thought] react step 1 tool=calculator input=12 * 5" in err
    assert "[ACE Thought] react step 1 result=60" in err
    assert sum(line.startswith("[ACE Memory] Loaded") for line in err) == 1
    assert "[ACE" not in done.stdout  # the thoughts go to the log, never to the learner

    fractions = run_turn(db, {"messages": [{"role": "user", "content": "1/2 + 1/3"}], "learner_id": "sam"})
    assert json.loads(fractions.stdout)["answer"] == "1/2 + 1/3 = 5/6", fractions.stderr


@pytest.mark.sqlite_only("memorist run-turn in a subprocess, on a file")
def test_offline_modes_say_so_and_show_the_memories_they_would_use(tmp_path):
    db = str(tmp_path / "tutor.db")
    first = run_turn(db, {"messages": [{"role": "user", "content": "I get confused when adding fractions with different denominators"}],
                          "learner_id": "sam", "conversation_id": "monday", "feedback": "Thanks, that helped!"})
    assert first.returncode == 0, first.stderr
    second = run_turn(db, {"messages": [{"role": "user", "content": "Why do fractions with different denominators need a common one?"}],
                           "learner_id": "sam", "conversation_id": "friday"})
    out = json.loads(second.stdout)
    assert out["scratch"]["reasoning_mode"] == "cot" and out["mode"] == "deterministic"
    assert "No language model is configured" in out["answer"]
    assert "Learner gets confused when adding fractions with different denominators" in out["answer"]
    assert "[ACE Thought] cot no model is configured; " in second.stderr
    plan = run_turn(db, {"messages": [{"role": "user", "content": "What is the best way to practice fractions?"}], "learner_id": "sam"})
    assert json.loads(plan.stdout)["scratch"]["reasoning_mode"] == "tot"
    assert "[ACE Graph] solver mode=tot" in plan.stderr


@pytest.mark.parametrize(("question", "mode"), [
    ("Help me multiply 12 by 5.", "react"),
    ("What is 3/4 - 1/8?", "react"),
    ("I keep messing up 1/2 + 1/3.", "react"),
    ("How do I add fractions with different denominators, like 1/2 + 1/3?", "cot"),
    ("Explain what a denominator is", "cot"),
    ("Which method is the best way to compare fractions?", "tot"),
    ("Hello!", "cot"),
    ("What is 1,000 + 1?", "react"),
    ("What is 7 % 3?", "react"),
    ("what is 2 to the power of 10", "react"),
    ("Can you help me prepare for my test on 12/5?", "tot"),  # a date, not a division
    ("My number is 555-1234", "cot"),
])
def test_the_router_chooses_the_mode_from_the_question(question, mode):
    assert choose_mode(question)[0] == mode


class ManyLessons(HeuristicReflector):
    """A reflector that finds five new lessons in every turn."""

    def _reflect(self, trace):
        base = super()._reflect(trace)
        lessons = tuple(Lesson(content=f"Lesson {i} about {trace.question[:30]}", type="strategy") for i in range(5))
        return Reflection(lessons=lessons, bullet_tags=base.bullet_tags, outcome=base.outcome)


def test_the_playbook_grows_by_at_most_two_bullets_a_turn(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        playbook = Playbook(memory, reflector=ManyLessons(), use_llm=True)
        tutor = Tutor(memory, playbook=playbook, llm=None)
        sizes = [0]
        for i, question in enumerate(["How do fractions work?", "Why is 1/2 bigger than 1/3?", "What about decimals and percentages?"]):
            out = tutor.run_turn({"messages": [{"role": "user", "content": question}], "learner_id": "sam",
                                  "conversation_id": f"c{i}", "feedback": "That helped"})
            assert out["scratch"]["ace_delta"]["num_new_bullets"] <= 2
            sizes.append(len(playbook.bullets("sam")))
        assert all(0 < b - a <= 2 for a, b in zip(sizes, sizes[1:], strict=False)), sizes


def test_one_load_per_turn_and_the_facts_come_through_the_store(backend, caplog):
    caplog.set_level(logging.INFO, logger="memorist")
    with Memory(backend.target, embedder="hashing") as memory:
        tutor = Tutor(memory, llm=None)
        tutor.store.put(("sam", "profile"), "pets", {"text": "Has a dog named Biscuit and loves fractions with pizza"})
        caplog.clear()
        out = tutor.run_turn({"messages": [{"role": "user", "content": "Tell me about fractions with pizza"}], "learner_id": "sam"})
        assert sum(r.getMessage().startswith("[ACE Memory] Loaded") for r in caplog.records) == 1
        assert [f["key"] for f in out["result"]["facts"]] == ["pets"]
        assert "Has a dog named Biscuit" in out["answer"] and "## Facts about the learner" in out["result"]["context"]
        # Another learner never sees them.
        other = tutor.run_turn({"messages": [{"role": "user", "content": "Tell me about fractions with pizza"}], "learner_id": "ann"})
        assert other["result"]["facts"] == [] and "Biscuit" not in other["answer"]


def test_a_model_answers_in_each_mode_and_its_thoughts_stay_in_the_log(backend, caplog):
    caplog.set_level(logging.INFO, logger="memorist")
    with Memory(backend.target, embedder="hashing") as memory:
        llm = ScriptedLLM([
            # cot: a scratchpad, then the answer
            "Step 1: find a common denominator, 6.\nStep 2: 3/6 + 2/6.\nAnswer: Rewrite both as sixths: 3/6 + 2/6 = 5/6.",
            # tot: the branches, then the answer along the best one
            {"branches": [{"approach": "pizza slices", "score": 9}, {"approach": "number line", "score": 4}]},
            "Think of a pizza cut into sixths.",
            # react: a tool call, then the answer
            "Action: calculator[3/4 - 1/8]",
            "Answer: 3/4 - 1/8 is 5/8.",
        ])
        tutor = Tutor(memory, llm=llm)
        ask = lambda q: tutor.run_turn({"messages": [{"role": "user", "content": q}], "learner_id": "sam"})  # noqa: E731
        cot = ask("How do I add 1/2 and 1/3?")
        assert (cot["mode"], cot["scratch"]["reasoning_mode"]) == ("llm", "cot")
        assert cot["answer"] == "Rewrite both as sixths: 3/6 + 2/6 = 5/6."
        tot = ask("What is the best way to understand fractions?")
        assert (tot["scratch"]["reasoning_mode"], tot["answer"]) == ("tot", "Think of a pizza cut into sixths.")
        assert "pizza slices" in llm.requests[2].system  # the best branch was followed
        react = ask("What is 3/4 - 1/8?")
        assert react["scratch"]["reasoning_mode"] == "react" and react["answer"] == "3/4 - 1/8 is 5/8."
        assert react["scratch"]["tool_calls"] == [{"tool": "calculator", "input": "3/4 - 1/8", "result": "5/8 (= 0.625)"}]
        assert "Observation: 5/8 (= 0.625)" in llm.requests[4].system
        thoughts = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[ACE Thought]")]
        assert "[ACE Thought] cot Step 1: find a common denominator, 6." in thoughts
        assert "[ACE Thought] tot branch 1 score=9 approach=pizza slices" in thoughts
        assert "[ACE Thought] react step 1 tool=calculator input=3/4 - 1/8" in thoughts
        for out in (cot, tot, react):
            assert "Step 1" not in out["answer"] and "Action:" not in out["answer"]


def test_the_openai_sdk_answers_through_the_fake_server(fake_openai, backend):
    from fake_openai import text

    fake_openai.script("responses", text("Step 1: 12 fives.\nAnswer: Twelve fives make 60."))
    with Memory(backend.target, embedder="hashing", llm="openai") as memory:
        out = Tutor(memory).run_turn({"messages": [{"role": "user", "content": "Explain why 12 times 5 is 60"}], "learner_id": "sam"})
    assert out["mode"] == "llm" and out["answer"] == "Twelve fives make 60."
    call = fake_openai.calls("responses")[0]
    assert "Step 1:" in json.dumps(call.body)  # the cot instructions reached the model


def test_a_failing_model_falls_back_and_still_computes(backend):
    from memorist import ProviderError

    with Memory(backend.target, embedder="hashing") as memory:
        tutor = Tutor(memory, llm=ScriptedLLM([ProviderError("down")] * 10, max_retries=0))
        out = tutor.run_turn({"messages": [{"role": "user", "content": "Help me multiply 12 by 5."}], "learner_id": "sam"})
        assert out["mode"] == "deterministic" and out["answer"] == "12 * 5 = 60"


def test_the_critic_masks_a_premature_reveal(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        out = Tutor(memory, llm=None).run_turn(
            {"messages": [{"role": "user", "content": "Give me a hint for 7 times 8, don't tell me the answer"}], "learner_id": "sam"})
        assert "56" not in out["answer"] and "7 * 8 = ?" in out["answer"]
        assert out["scratch"]["params"]["reveal_answer"] is False
    assert mask_reveal("So 1/2 + 1/3 = 5/6.", [{"tool": "calculator", "result": "5/6"}])[0].startswith("So 1/2 + 1/3 = ?.")
    assert mask_reveal("Add the tops.", []) == ("Add the tops.", False)
    assert "0.3" not in mask_reveal("That makes 0.3 in all.", [{"tool": "calculator", "result": "3/10 (= 0.3)"}])[0]


@pytest.mark.parametrize("reply", ["Answer: The product is 84.", "It's 84, since 12 times 7 is 84.", "Answer: 84"])
def test_the_critic_masks_a_result_the_model_states_without_the_calculator(reply):
    """Before, only a result the calculator computed, or a trailing "= N", was hidden."""
    with Memory(":memory:", embedder="hashing") as memory:
        tutor = Tutor(memory, llm=ScriptedLLM([], default=reply), remember_facts=False)
        for question in ("Give me a hint for 12 * 7, don't tell me the answer",
                         "Just a hint for 12 times 7 please, let me try on my own"):
            out = tutor.run_turn({"messages": [{"role": "user", "content": question}], "learner_id": "sam"})
            assert out["scratch"]["params"]["reveal_answer"] is False, question
            assert "84" not in out["answer"] and "?" in out["answer"], (question, out["answer"])
        # Asked outright, the answer is given.
        out = tutor.run_turn({"messages": [{"role": "user", "content": "What is 12 * 7?"}], "learner_id": "sam"})
        assert "84" in out["answer"]


def test_the_graph_draws_itself():
    with Memory(":memory:", embedder="hashing") as memory:
        drawing = Tutor(memory, llm=None).mermaid()
    for a, b in zip(["__start__", *NODES], [*NODES, "__end__"], strict=True):
        assert f"{a} --> {b};" in drawing


def test_react_searches_the_learners_memory_with_its_tool(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        llm = ScriptedLLM(["Action: memory_search[favourite pizza]", "Answer: Use your favourite pizza: cut it in sixths."])
        tutor = Tutor(memory, llm=llm)
        tutor.store.put(("sam", "profile"), "food", {"text": "Favourite pizza is margherita"})
        out = tutor.run_turn({"messages": [{"role": "user", "content": "Help me compute 1/2 + 1/3 with pizza"}], "learner_id": "sam"})
        assert out["scratch"]["reasoning_mode"] == "react"
        call = out["scratch"]["tool_calls"][0]
        assert call["tool"] == "memory_search" and "Favourite pizza is margherita" in call["result"]
        assert "Observation: Favourite pizza is margherita" in llm.requests[1].system
        assert out["answer"] == "Use your favourite pizza: cut it in sixths."


def test_the_docs_show_the_graph_as_langgraph_draws_it():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "agent.md").read_text(encoding="utf-8")
    with Memory(":memory:", embedder="hashing") as memory:
        drawing = Tutor(memory, llm=None).mermaid()
    assert "```mermaid\n" + drawing.rstrip() + "\n```" in page


def test_gemini_from_its_own_variables_answers_the_react_mode(fake_server, monkeypatch, backend):
    from fake_openai import text

    fake_server.reset()
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    monkeypatch.setenv("GEMINI_MODEL", "gemini-2.5-pro")
    monkeypatch.setenv("GEMINI_BASE_URL", fake_server.base_url)
    monkeypatch.setenv("ACE_LLM_TEMPERATURE", "0.4")
    fake_server.script("chat", text("Action: calculator[12 * 5]"), text("Answer: 12 times 5 is 60."))
    with Memory(backend.target, embedder="hashing") as memory:
        tutor = Tutor(memory)
        assert tutor.llm.name == "gemini:gemini-2.5-pro"
        out = tutor.run_turn({"messages": [{"role": "user", "content": "Help me multiply 12 by 5."}], "learner_id": "sam"})
    assert out["mode"] == "llm" and out["answer"] == "12 times 5 is 60."
    calls = fake_server.calls("chat")
    assert len(calls) == 2 and calls[0].body["model"] == "gemini-2.5-pro" and calls[0].body["temperature"] == 0.4
    assert "Observation: 60" in json.dumps(calls[1].body)
    fake_server.reset()


def test_a_learner_id_with_periods_gets_its_facts(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        tutor = Tutor(memory, llm=None)
        learner = "sam.lee@example.com"
        memory.add("Loves pizza fractions", user_id=learner, agent_id="tutor", infer=False)
        out = tutor.run_turn({"messages": [{"role": "user", "content": "Tell me about pizza fractions"}], "learner_id": learner})
        assert [f["text"] for f in out["result"]["facts"]] == ["Loves pizza fractions"]
        assert out["scratch"]["memory_error"] is None


def test_bad_turns_name_the_field_and_store_nothing(backend):
    from memorist import ValidationError

    with Memory(backend.target, embedder="hashing") as memory:
        tutor = Tutor(memory, llm=None)
        events = memory.stats()["events"]
        for payload, field in (
            ([], "input"), ({"messages": []}, "messages"), ({"messages": [{"role": "user"}]}, "messages[0]"),
            ({"messages": [{"role": "user", "content": "hi"}], "learner_id": 7}, "learner_id"),
            ({"messages": [{"role": "user", "content": "hi"}], "outcome": 1}, "outcome"),
        ):
            with pytest.raises(ValidationError) as info:
                tutor.run_turn(payload)
            assert info.value.field == field
        assert memory.stats()["events"] == events  # nothing was written
        assert tutor.playbook.bullets() == []


def test_memorist_demo_agent_runs_two_conversations_offline(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORIST_", "ACE_", "GEMINI_", "OPENAI_"))}
    done = subprocess.run([sys.executable, "-m", "memorist", "--embedder", "hashing", "demo", "--agent"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "[monday] sam: What is 1/2 + 1/3?" in done.stdout and "tutor: 1/2 + 1/3 = 5/6" in done.stdout
    assert "injected from the playbook: Remind the learner that 1/2 becomes 3/6  (learned in conversation monday)" in done.stdout
    assert "Friday's conversation used 2 bullet(s) learned on Monday." in done.stdout
    as_json = subprocess.run([sys.executable, "-m", "memorist", "--embedder", "hashing", "--json", "demo", "--agent"],
                             capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    result = json.loads(as_json.stdout)
    assert result["learned"] <= 2 and result["friday"]["injected_learned_bullet"] and result["monday"]["reasoning_mode"] == "react"
    assert list(tmp_path.iterdir()) == []  # the demo's store was temporary


@pytest.mark.parametrize(("question", "answer"), [
    ("What is 1,000 + 1?", "1000 + 1 = 1001"),
    ("What is 1,000,000 / 2?", "1000000 / 2 = 500000"),
    ("What is 2.5e3 + 1?", "2.5e3 + 1 = 2501"),
    ("My number is 555-1234, what is 3+3?", "3+3 = 6"),
    ("What is 7 // 2?", "7 // 2 = 3"),
])
def test_the_offline_calculator_answers_the_arithmetic_asked_about(question, answer):
    """Before: `000 + 1 = 1`, `000 / 2 = 0`, `3 + 1 = 4`, `555-1234 = -679`, and `7 // 2`
    was not arithmetic at all."""
    with Memory(":memory:", embedder="hashing") as memory:
        out = Tutor(memory, llm=None, remember_facts=False).run_turn({"messages": [{"role": "user", "content": question}]})
    assert (out["answer"], out["mode"], out["scratch"]["reasoning_mode"]) == (answer, "deterministic", "react")


def test_a_number_the_calculator_refuses_is_not_answered_wrongly():
    with Memory(":memory:", embedder="hashing") as memory:
        out = Tutor(memory, llm=None, remember_facts=False).run_turn({"messages": [{"role": "user", "content": "what's 1e400 * 2"}]})
    assert out["answer"].startswith("The calculator cannot work out 1e400 * 2: the expression has a number of more than 200 digits")
    assert "800" not in out["answer"] and "No language model is configured" in out["answer"]


@pytest.mark.parametrize(("final", "question"), [
    ("Action: calculator[12*5]", "What is 12 * 5?"),  # a model that keeps computing
    ('Action: calculator[__import__("os")]', "What is 12 * 5?"),  # whose tool says "error: ..."
    ("Action: memory_search[fractions]", "What is 12 * 5?"),  # whose tool returns stored facts
])
def test_a_react_model_out_of_steps_never_answers_with_a_tool_result(final, question):
    """Before, the last tool result became the answer (`'60'`, `'error: expression: has
    Call ...'`, a stored fact), with mode llm."""
    with Memory(":memory:", embedder="hashing") as memory:
        llm = ScriptedLLM([final] * 5, max_retries=0)
        tutor = Tutor(memory, llm=llm, remember_facts=False)
        tutor.store.put(("default", "profile"), "f", {"text": "Learner gets confused when adding fractions"})
        out = tutor.run_turn({"messages": [{"role": "user", "content": question}]})
        # The fifth request asked for the answer without tools; the model still called one.
        assert len(llm.requests) == 5 and "You have used all your tool steps" in llm.requests[4].system
    assert out["mode"] == "deterministic" and out["answer"] == "12 * 5 = 60"  # the offline calculator, truthfully
    assert out["scratch"]["model_error"] == "it did not finish within 4 tool steps"
    assert "error:" not in out["answer"] and "confused" not in out["answer"]


def test_a_react_model_out_of_steps_is_asked_for_its_answer():
    with Memory(":memory:", embedder="hashing") as memory:
        llm = ScriptedLLM(["Action: calculator[12*5]"] * 4 + ["Answer: Twelve fives are 60."])
        out = Tutor(memory, llm=llm, remember_facts=False).run_turn({"messages": [{"role": "user", "content": "What is 12 * 5?"}]})
    assert (out["mode"], out["answer"]) == ("llm", "Twelve fives are 60.")
    assert "Observation: 60" in llm.requests[4].system and len(out["scratch"]["tool_calls"]) == 4


@pytest.mark.parametrize(("script", "question", "reason"), [
    ([TransientProviderError("openai-compatible:m: the request timed out")] * 2, "Why do we flip the fraction?", "it did not answer in time"),
    ([TransientProviderError("openai-compatible:m: connection failed: refused")] * 2, "Why do we flip the fraction?", "it could not be reached"),
    ([TransientProviderError("openai-compatible:m: HTTP 500: boom", status=500)] * 2, "Why do we flip the fraction?", "its service answered HTTP 500"),
    ([TransientProviderError("openai-compatible:m: the completion had no choices")] * 2, "Why do we flip the fraction?", "it returned an error"),
    ([ProviderError("openai-compatible:m: HTTP 401, the API key was refused: no")], "Why do we flip the fraction?", "its service answered HTTP 401"),
    (["not json", "still not json"], "What is the best way to study fractions?", "its reply could not be used"),
    ([""], "Why do we flip the second fraction when dividing?", "its reply held no answer"),
    (["Step 1: think.\nStep 2: more."], "Why do we flip the fraction?", "its reply held no answer"),
])
def test_a_failed_model_is_named_as_failed_and_the_mode_says_who_answered(script, question, reason):
    """Before, every failure read "No language model is configured", and an empty reply
    gave that text with mode llm."""
    with Memory(":memory:", embedder="hashing") as memory:
        tutor = Tutor(memory, llm=ScriptedLLM(script, max_retries=1), remember_facts=False)
        out = tutor.run_turn({"messages": [{"role": "user", "content": question}]})
    assert out["mode"] == "deterministic" and out["scratch"]["model_error"] == reason
    assert out["answer"].startswith(f"The language model could not answer ({reason}), so this is a deterministic reply")
    assert "No language model is configured" not in out["answer"]


def test_the_tutor_bounds_its_model_and_a_hanging_model_fails_fast(fake_server, monkeypatch):
    """Before, the tutor used the provider's 60 s and 2 retries: a model that hangs held
    one turn for three minutes."""
    from fake_openai import delay, text

    fake_server.reset()
    monkeypatch.setenv("MEMORIST_LLM_BASE_URL", fake_server.base_url)
    # The model answers after a minute (a model that hangs): the tutor must not wait for it.
    fake_server.script("chat", delay(60, text("Answer: late")), delay(60, text("Answer: late")))
    with Memory(":memory:", embedder="hashing", llm="openai-compatible:fake") as memory:
        assert (memory.llm.timeout, memory.llm.max_retries) == (60.0, 2)  # the provider's defaults
        bounded = Tutor(memory, remember_facts=False)
        assert (bounded.llm.name, bounded.llm.timeout, bounded.llm.max_retries) == ("openai-compatible:fake", 30.0, 1)
        tutor = Tutor(memory, remember_facts=False, model_timeout=0.5, model_retries=1)
        assert tutor.llm.client is not None  # the SDK imported before the clock starts
        started = time.monotonic()
        out = tutor.run_turn({"messages": [{"role": "user", "content": "Why do fractions need a common denominator?"}]})
        took = time.monotonic() - started
    assert took < 20, took  # 2 x 0.5 s and a backoff; the provider's defaults: 3 x 60 s
    assert len(fake_server.calls("chat")) == 2  # the request and one retry
    assert out["mode"] == "deterministic" and out["scratch"]["model_error"] == "it did not answer in time"
    assert "did not answer in time" in out["answer"]
    fake_server.reset()


def test_a_providers_retry_after_longer_than_the_timeout_is_not_waited_for(fake_server, monkeypatch):
    """A rate-limited provider asking to wait 55 s held a turn for minutes, whatever
    the tutor's timeout: a wait longer than one request's timeout fails the request at
    once, and the turn does not ask that model again."""
    from fake_openai import error, text

    fake_server.reset()
    monkeypatch.setenv("MEMORIST_LLM_BASE_URL", fake_server.base_url)
    limited = error(429, "slow down", headers={"retry-after": "55"})
    fake_server.script("chat", limited, limited, text("Answer: late"))
    with Memory(":memory:", embedder="hashing", llm="openai-compatible:fake") as memory:
        tutor = Tutor(memory, remember_facts=False, model_timeout=3, model_retries=1)
        assert tutor.llm.max_retry_after == 3.0
        # "tot" asks the model twice in a turn when it answers
        out = tutor.run_turn({"messages": [{"role": "user", "content": "What is the best way to study fractions?"}]})
    assert len(fake_server.calls("chat")) == 1  # not retried after 55 s, not asked again
    assert out["mode"] == "deterministic" and "could not answer" in out["answer"]
    fake_server.reset()


@pytest.mark.parametrize(("option", "value"), [("model_timeout", 0), ("model_timeout", float("nan")), ("model_retries", -1),
                                               ("model_retries", 1.5), ("model_retries", 11), ("model_retries", 99)])
def test_the_model_bounds_are_checked(option, value):
    from memorist import ValidationError

    with Memory(":memory:", embedder="hashing") as memory, pytest.raises(ValidationError) as info:
        Tutor(memory, llm=None, **{option: value})
    assert info.value.field == option


BRANCHES = {"branches": [{"approach": "a weekly practice plan", "score": 9}]}
PLAN_QUESTION = "What is the best way to study fractions? Give me a step by step plan."


@pytest.mark.parametrize("plan", [
    "Here is a plan for you:\nStep 1: Review equivalent fractions.\nStep 2: Practise adding with like denominators.",
    "Step 1: Review equivalent fractions.\nStep 2: Practise adding with like denominators.",
])
def test_a_step_by_step_answer_reaches_the_learner_with_its_steps(plan):
    """Before, every `Step N:` line was cut from the answer: the plan reached the
    learner as its first line only, and a plan made of steps alone was thrown away
    for the offline answer ("its reply held no answer")."""
    with Memory(":memory:", embedder="hashing") as memory:
        out = Tutor(memory, llm=ScriptedLLM([BRANCHES, plan]), remember_facts=False).run_turn(
            {"messages": [{"role": "user", "content": PLAN_QUESTION}]})
    assert (out["mode"], out["scratch"]["reasoning_mode"], out["scratch"]["model_error"]) == ("llm", "tot", None)
    assert out["answer"] == plan


def test_cot_leaves_out_its_scratchpad_but_keeps_the_steps_of_its_answer():
    reply = ("Step 1: the learner wants steps.\nAnswer: To add 1/4 + 1/6:\nStep 1: find the common denominator, 12.\n"
             "Step 2: rewrite as 3/12 + 2/12.")
    with Memory(":memory:", embedder="hashing") as memory:
        out = Tutor(memory, llm=ScriptedLLM([reply]), remember_facts=False).run_turn(
            {"messages": [{"role": "user", "content": "Explain how to add fractions with unlike denominators, step by step"}]})
    assert out["scratch"]["reasoning_mode"] == "cot"
    assert out["answer"] == "To add 1/4 + 1/6:\nStep 1: find the common denominator, 12.\nStep 2: rewrite as 3/12 + 2/12."


def test_a_react_turn_is_bounded_as_one_request_is_however_many_it_makes():
    """Before, each of react's five requests had the whole timeout: a slow model held
    the turn five times as long as a cot turn."""
    def slow(request):
        time.sleep(0.5)
        return "Action: calculator[12*5]"

    with Memory(":memory:", embedder="hashing") as memory:
        llm = ScriptedLLM(slow, timeout=1.2, max_retries=0)
        tutor = Tutor(memory, llm=llm, remember_facts=False)
        started = time.monotonic()
        out = tutor.run_turn({"messages": [{"role": "user", "content": "What is 12 * 5?"}]})
        took = time.monotonic() - started
    assert took < 2.0, took  # five requests of 0.5 s would take 2.5 s
    assert out["mode"] == "deterministic" and out["scratch"]["model_error"] == "it did not answer in time"
    assert out["answer"].startswith("12 * 5 = 60")  # the offline calculator answers in its place


@pytest.mark.parametrize(("question", "reply", "hidden", "kept"), [
    ("What is 12 * 5? just a hint please", "Answer: Think of 10*5 + 2*5. You should get 60.0 in the end.", "60", "10*5 + 2*5"),
    ("What is 1/2 + 1/3? hint only", "Answer: Common denominator 6: 3/6 + 2/6 = 5 / 6 exactly.", "5 / 6", "3/6 + 2/6"),
    ("What is 1/2 + 1/3? hint only", "Answer: Common denominator 6, so you get 0.8333...", "0.83", "denominator 6"),
    ("What is 1/2 + 1/3? hint only", "Answer: Rewrite both in twelfths and you get 10/12, about 0.83.", "10/12", "twelfths"),
])
def test_the_critic_masks_the_result_however_the_model_writes_it(question, reply, hidden, kept):
    """Before, only the result written exactly as the calculator writes it was hidden:
    "60.0", "5 / 6" and "0.8333..." reached a learner who asked for a hint."""
    with Memory(":memory:", embedder="hashing") as memory:
        out = Tutor(memory, llm=ScriptedLLM([reply]), remember_facts=False).run_turn({"messages": [{"role": "user", "content": question}]})
    assert out["scratch"]["params"]["reveal_answer"] is False
    assert hidden not in out["answer"] and "?" in out["answer"] and kept in out["answer"], out["answer"]
    assert "0.83" not in out["answer"]


def test_a_question_of_nothing_visible_is_refused_by_its_field_and_stores_nothing(backend):
    from memorist import ValidationError

    with Memory(backend.target, embedder="hashing") as memory:
        tutor = Tutor(memory, llm=None)
        events = memory.stats()["events"]
        with pytest.raises(ValidationError) as info:
            tutor.run_turn({"messages": [{"role": "user", "content": "Hi"}, {"role": "user", "content": "\u200b"}]})
        assert info.value.field == "messages[1].content"  # before, "query"
        assert memory.stats()["events"] == events and tutor.playbook.bullets() == []


def test_floor_division_is_held_to_the_calculators_size_cap():
    from memorist import ValidationError
    from memorist.agent.calculator import MAX_DIGITS, calculate

    with pytest.raises(ValidationError, match=f"more than {MAX_DIGITS} digits"):
        calculate("9**64*9**64*9**64//(1/9**64)//(1/9**64)//(1/9**64)//(1/9**64)//(1/9**64)")
    assert calculate("7 // 2").text == "3"


class _Rows:
    """A store whose search answers rows a memory service should not send."""

    def batch(self, ops):
        raise KeyError("created_at")  # as MemoristStore does on a row without created_at


def test_a_store_answering_unreadable_rows_leaves_the_turn_without_facts():
    """Before, the KeyError escaped the turn (the chat answered 500)."""
    with Memory(":memory:", embedder="hashing") as memory:
        out = Tutor(memory, llm=None, remember_facts=False).run_turn(
            {"messages": [{"role": "user", "content": "What is 2+2?"}]}, store=_Rows())
    assert out["answer"] == "2+2 = 4" and out["result"]["facts"] == []
    assert "could not be read" in out["scratch"]["memory_error"]
