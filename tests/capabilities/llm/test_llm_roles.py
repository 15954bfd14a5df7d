"""Each LLM role through the fake server: its happy path, its id checks, its fallback."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from fake_openai import text

from memorist.llm.base import recording
from memorist.llm.openai import OpenAIResponsesLLM
from memorist.model import Action, Existing, Fact, Message
from memorist.roles.evaluator import HeuristicEvaluator, criteria_items
from memorist.roles.learning import Bullet, CurationInput, Lesson, Reflection, Similar, Trace
from memorist.roles.llm import (
    LLMCurator,
    LLMEvaluator,
    LLMExtractor,
    LLMReconciler,
    LLMReflector,
    curator_uses_llm,
    learning_llm,
)


@pytest.fixture
def llm(fake_openai, waits):
    return OpenAIResponsesLLM(sleep=waits.append)


def prompt_of(request) -> str:
    return request.prompt_text()


# extractor ------------------------------------------------------------------------------


def test_extractor_happy_path(fake_openai, llm) -> None:
    fake_openai.script("responses", text({"facts": [
        {"text": "Name is Alex", "kind": "fact", "source_role": "user"},
        {"text": "Loves hiking", "kind": "preference"},
        {"text": "Loves hiking", "kind": "preference"},  # a duplicate is dropped
    ]}))
    messages = [
        Message("system", "You are a helpful assistant. SECRET-SYSTEM-TEXT"),
        Message("user", "I'm Alex and I love hiking", name="Alex"),
        Message("assistant", "Nice to meet you, Alex!"),
    ]
    facts = LLMExtractor(llm).extract(messages, timestamp=datetime(2024, 5, 8, tzinfo=UTC))
    assert facts == [Fact("Name is Alex", "fact", "user"), Fact("Loves hiking", "preference", "user")]
    body = fake_openai.requests[0].body
    assert "Personal Information Organizer" in body["instructions"]
    user = body["input"][0]["content"]
    assert "2024-05-08 (Wednesday)" in user
    assert "user (Alex): I'm Alex and I love hiking" in user
    assert "SECRET-SYSTEM-TEXT" not in user  # system messages are ignored


def test_extractor_accepts_spec_004s_plain_strings(fake_openai, llm) -> None:
    fake_openai.script("responses", text({"facts": ["Is vegetarian", "Allergic to nuts", ""]}))
    facts = LLMExtractor(llm).extract([Message("user", "I'm a vegetarian and allergic to nuts.")])
    assert [f.text for f in facts] == ["Is vegetarian", "Allergic to nuts"]


def test_extractor_makes_no_call_for_an_empty_turn(fake_openai, llm) -> None:
    assert LLMExtractor(llm).extract([Message("system", "only a system prompt")]) == []
    assert fake_openai.requests == []


def test_extractor_falls_back_to_the_heuristic_on_persistent_garbage(fake_openai, llm) -> None:
    fake_openai.script("responses", text("I cannot help with that."), text("Still no JSON"))
    with recording() as rec:
        facts = LLMExtractor(llm).extract([Message("user", "I'm a vegetarian and allergic to nuts.")])
    assert [f.text for f in facts] == ["Is vegetarian", "Allergic to nuts"]  # the heuristic's
    assert rec.failed("extractor") is not None
    assert "InvalidOutputError" in rec.failed("extractor").reason
    assert len(fake_openai.requests) == 2


def test_extractor_without_a_fallback_returns_nothing(fake_openai, llm) -> None:
    fake_openai.script("responses", text("nope"), text("nope"))
    with recording() as rec:
        assert LLMExtractor(llm, fallback=None).extract([Message("user", "I'm a vegetarian.")]) == []
    assert rec.failed("extractor") is not None


# reconciler -----------------------------------------------------------------------------

EXISTING = [
    [Existing("mem-aaa", "Lives in California", 0.8), Existing("mem-bbb", "Loves pizza", 0.3)],
    [Existing("mem-bbb", "Loves pizza", 0.7)],
    [],
]
FACTS = [Fact("Lives in San Francisco"), Fact("Became vegan, no longer eats pizza"), Fact("Name is John")]


def test_reconciler_happy_path_maps_small_ids_to_store_ids(fake_openai, llm) -> None:
    fake_openai.script("responses", text({"memory": [
        {"id": "0", "event": "UPDATE", "text": "Lives in San Francisco, California", "old_memory": "Lives in California", "fact": 0},
        {"id": "1", "event": "DELETE", "text": "Loves pizza", "fact": 1},
        {"id": None, "event": "add", "text": "Is vegan", "fact": 1},
        {"event": "ADD", "text": "Name is John", "fact": 2},
    ]}))
    decisions = LLMReconciler(llm).reconcile(FACTS, EXISTING)
    assert [(d.action, d.target_id, d.text) for d in decisions] == [
        (Action.UPDATE, "mem-aaa", "Lives in San Francisco, California"),
        (Action.DELETE, "mem-bbb", "Loves pizza"),
        (Action.ADD, None, "Is vegan"),
        (Action.ADD, None, "Name is John"),
    ]
    assert decisions[0].old_text == "Lives in California"
    assert decisions[1].fact == FACTS[1]
    user = fake_openai.requests[0].body["input"][0]["content"]
    assert '- [0] "Lives in California"' in user and '- [1] "Loves pizza"' in user
    assert "mem-aaa" not in user and "mem-bbb" not in user  # store ids never reach the model
    assert '- [2] "Name is John"' in user
    assert "smart memory manager" in fake_openai.requests[0].body["instructions"]


def test_an_invented_id_is_rejected_and_repaired(fake_openai, llm) -> None:
    fake_openai.script(
        "responses",
        text({"memory": [{"id": "7", "event": "DELETE", "text": "Something", "fact": 0},
                         {"event": "NONE", "id": "1", "text": "Loves pizza", "fact": 1},
                         {"event": "ADD", "text": "Name is John", "fact": 2}]}),
        text({"memory": [{"id": "0", "event": "UPDATE", "text": "Lives in San Francisco", "fact": 0},
                         {"event": "NONE", "id": "1", "text": "Loves pizza", "fact": 1},
                         {"event": "ADD", "text": "Name is John", "fact": 2}]}),
    )
    decisions = LLMReconciler(llm).reconcile(FACTS, EXISTING)
    assert [(d.action, d.target_id) for d in decisions] == [(Action.UPDATE, "mem-aaa"), (Action.NONE, "mem-bbb"), (Action.ADD, None)]
    repair = fake_openai.requests[1].body["input"][-1]["content"]
    assert "id '7' is not an existing memory" in repair


def test_an_id_invented_twice_is_never_applied(fake_openai, llm) -> None:
    invented = text({"memory": [{"id": "mem-zzz", "event": "DELETE", "text": "x", "fact": 0},
                                {"event": "ADD", "text": "Became vegan", "fact": 1},
                                {"event": "ADD", "text": "Name is John", "fact": 2}]})
    fake_openai.script("responses", invented, invented)
    with recording() as rec:
        decisions = LLMReconciler(llm).reconcile(FACTS, EXISTING)
    assert rec.failed("reconciler") is not None
    assert all(d.target_id in (None, "mem-aaa", "mem-bbb") for d in decisions)  # the heuristic's, on shown ids
    assert "mem-zzz" not in {d.target_id for d in decisions}


def test_a_fact_left_without_a_decision_is_repaired(fake_openai, llm) -> None:
    fake_openai.script(
        "responses",
        text({"memory": [{"event": "ADD", "text": "Lives in San Francisco", "fact": 0}]}),
        text({"memory": [{"event": "ADD", "text": f.text, "fact": i} for i, f in enumerate(FACTS)]}),
    )
    decisions = LLMReconciler(llm).reconcile(FACTS, EXISTING)
    assert [d.text for d in decisions] == [f.text for f in FACTS]
    assert "has no decision" in fake_openai.requests[1].body["input"][-1]["content"]


def test_a_memory_changed_twice_keeps_the_first_decision(fake_openai, llm) -> None:
    fake_openai.script("responses", text({"memory": [
        {"id": "0", "event": "UPDATE", "text": "Lives in San Francisco", "fact": 0},
        {"id": "0", "event": "DELETE", "text": "Lives in California", "fact": 1},
        {"id": "1", "event": "NONE", "text": "Loves pizza", "fact": 1},
        {"event": "NONE", "text": "Name is John", "fact": 2},
    ]}))
    decisions = LLMReconciler(llm).reconcile(FACTS, EXISTING)
    assert [(d.action, d.target_id) for d in decisions] == [(Action.UPDATE, "mem-aaa"), (Action.NONE, "mem-bbb"), (Action.NONE, None)]


def test_reconciler_asks_no_model_when_nothing_is_stored(fake_openai, llm) -> None:
    decisions = LLMReconciler(llm).reconcile([Fact("Likes tea"), Fact("Likes tea")], [[], []])
    assert [d.action for d in decisions] == [Action.ADD, Action.NONE]
    assert fake_openai.requests == []


# evaluator ------------------------------------------------------------------------------


def test_evaluator_judges_in_a_fresh_context(fake_openai, llm) -> None:
    fake_openai.script("responses", text({
        "success_criteria_met": "60%",
        "identified_gaps": [{"description": "No tests were written", "severity": "HIGH", "criterion": "Has tests"}, "No docs"],
        "summary": "Partly done.",
    }))
    result = LLMEvaluator(llm).evaluate("Write a parser", "Parses JSON\nHas tests", "def parse(s): return json.loads(s)")
    assert result.score == 60 and not result.meets()
    assert [(g.description, g.severity) for g in result.gaps] == [("No tests were written", "high"), ("No docs", "medium")]
    assert result.evaluator == "openai:gpt-5-mini"
    body = fake_openai.requests[0].body
    assert len(body["input"]) == 1  # nothing but task, criteria and output
    content = body["input"][0]["content"]
    assert "<task>\nWrite a parser\n</task>" in content and "<criteria>" in content and "<output>" in content
    assert "Be critical. Identify gaps." in body["instructions"]


def test_evaluator_rejects_an_impossible_score_then_falls_back(fake_openai, llm) -> None:
    fake_openai.script("responses", text({"success_criteria_met": 180}), text({"success_criteria_met": 250}))
    with recording() as rec:
        result = LLMEvaluator(llm).evaluate("Greet", "Says hello; Says goodbye", "hello there")
    assert result.evaluator == "heuristic" and rec.failed("evaluator") is not None
    assert result.score == 50.0 and "goodbye" in result.gaps[0].description


def test_heuristic_evaluator() -> None:
    assert criteria_items("- Parses JSON\n- Has tests; Is fast. Uses no globals") == ["Parses JSON", "Has tests", "Is fast", "Uses no globals"]
    result = HeuristicEvaluator().evaluate("t", "Mentions the deadline\nLists the owners", "The deadline is Friday.")
    assert result.score == 50.0 and result.gaps[0].criterion == "Lists the owners"
    assert HeuristicEvaluator().evaluate("t", "", "x").score == 100.0


def test_evaluators_give_their_score_unrounded(fake_openai, llm) -> None:
    # A threshold is compared with the score: 94.96 (or 189 of 199 criteria) is below 95.
    fake_openai.script("responses", text({"success_criteria_met": 94.96, "identified_gaps": [], "summary": "almost"}))
    result = LLMEvaluator(llm).evaluate("t", "Handles quoted fields", "def load(p): ...")
    assert result.evaluator == "openai:gpt-5-mini" and result.score == 94.96 and not result.meets(95)
    criteria = "\n".join(f"Mentions keyword{chr(97 + i % 26)}{chr(97 + i // 26)}zq" for i in range(199))
    output = " ".join(f"keyword{chr(97 + i % 26)}{chr(97 + i // 26)}zq" for i in range(189))
    heuristic = HeuristicEvaluator().evaluate("t", criteria, output)
    assert len(heuristic.gaps) == 10 and heuristic.score == pytest.approx(100 * 189 / 199) and not heuristic.meets(95)


# reflector and curator ------------------------------------------------------------------

BULLETS = (Bullet("b-1", "Convert fractions to a common denominator first"), Bullet("b-2", "Add numerators and denominators"))


def test_reflector_happy_path(fake_openai, llm) -> None:
    fake_openai.script("responses", text({
        "successful_patterns": ["Convert to a common denominator before adding"],
        "failure_patterns": [{"pattern": "Adding denominators together"}],
        "neutral_observations": [],
        "recommendations": ["Show a worked example with sixths"],
        "learner_observations": ["Learner confuses numerators and denominators"],
        "bullet_tags": [{"id": 0, "tag": "helpful"}, {"id": "1", "tag": "Harmful"}],
        "outcome": "success",
        "summary": "The common-denominator hint worked.",
    }))
    trace = Trace(question="How do I add 1/2 + 1/3?", answer="Use sixths: 3/6 + 2/6 = 5/6.", feedback="That helped!",
                  injected=BULLETS, topic="fractions")
    reflection = LLMReflector(llm).reflect(trace)
    assert [(lesson.type, lesson.content) for lesson in reflection.lessons] == [
        ("strategy", "Convert to a common denominator before adding"),
        ("strategy", "Show a worked example with sixths"),
        ("anti_pattern", "Adding denominators together"),
        ("experience", "Learner confuses numerators and denominators"),
    ]
    assert {(t.id, t.tag) for t in reflection.bullet_tags} == {("b-1", "helpful"), ("b-2", "harmful")}
    assert reflection.outcome == "success"
    content = fake_openai.requests[0].body["input"][0]["content"]
    assert '- [0] "Convert fractions to a common denominator first"' in content and "b-1" not in content
    assert "Helpful patterns" in fake_openai.requests[0].body["instructions"]


def test_reflector_rejects_invented_bullet_ids_then_falls_back(fake_openai, llm) -> None:
    bad = text({"successful_patterns": ["x"], "bullet_tags": [{"id": "9", "tag": "harmful"}]})
    fake_openai.script("responses", bad, bad)
    with recording() as rec:
        reflection = LLMReflector(llm).reflect(Trace(question="q", feedback="That didn't help", injected=BULLETS))
    assert rec.failed("reflector") is not None
    assert {t.id for t in reflection.bullet_tags} <= {"b-1", "b-2"}  # the heuristic's tags


def test_reflector_uses_lessons_a_trace_already_has(fake_openai, llm) -> None:
    reflection = LLMReflector(llm).reflect(Trace(question="q", lessons=(Lesson("Known lesson"),)))
    assert [lesson.content for lesson in reflection.lessons] == ["Known lesson"]
    assert fake_openai.requests == []


def _curation_input(**kw) -> CurationInput:
    reflection = Reflection(
        lessons=(Lesson("Use a common denominator before adding", "strategy", source="l0"),
                 Lesson("Never add denominators together", "anti_pattern", source="l1"),
                 Lesson("Draw pie charts for visual learners", "strategy", source="l2")),
        bullet_tags=(),
    )
    candidates = ((Similar(BULLETS[0], 0.93),), (Similar(BULLETS[1], 0.40),), ())
    return CurationInput(reflection=reflection, question="How do I add fractions?", candidates=candidates, topic="fractions", **kw)


def test_curator_happy_path_and_spec_000_rules(fake_openai, llm) -> None:
    fake_openai.script("responses", text({
        "reasoning": "lesson 0 is bullet 0; 1 and 2 are new",
        "new_bullets": [
            {"lesson": 0, "content": "Use a common denominator", "memory_type": "procedural"},  # >= 0.9: reinforces
            {"lesson": 1, "content": "Never add denominators", "section": "mistakes", "tags": ["Fractions"]},
            {"lesson": 2, "content": "Draw pie charts for visual learners", "memory_type": "semantic"},
        ],
        "reinforce": [],
        "remove": [{"id": "1", "reason": "wrong"}],
    }))
    delta = LLMCurator(llm).curate(_curation_input(max_new=1))
    assert [b.content for b in delta.new] == ["Never add denominators"]
    assert delta.new[0].kind == "anti_pattern" and delta.new[0].sources == ("l1",)
    updates = {u.id: (u.helpful, u.harmful) for u in delta.updates}
    assert updates == {"b-1": (1, 0)}  # the clone became a reinforcement; the overflow had no neighbour
    assert delta.removals == ("b-2",)
    assert delta.metadata["curator"] == "openai:gpt-5-mini"
    request = fake_openai.requests[0].body
    assert "At most 1 new bullets" in request["instructions"]
    assert "similar: [0] (similarity 0.93)" in request["input"][0]["content"]


def test_curator_rejects_invented_ids_then_falls_back_to_the_heuristic(fake_openai, llm) -> None:
    bad = text({"new_bullets": [], "reinforce": [{"lesson": 0, "id": "42"}, {"lesson": 1, "id": "0"}, {"lesson": 2, "id": "0"}]})
    fake_openai.script("responses", bad, bad)
    with recording() as rec:
        delta = LLMCurator(llm).curate(_curation_input())
    assert rec.failed("curator") is not None
    assert "42" not in {u.id for u in delta.updates}
    assert {u.id for u in delta.updates} == {"b-1"} and len(delta.new) == 2  # the heuristic's delta
    assert "id '42' was not listed" in fake_openai.requests[1].body["input"][-1]["content"]


def test_ace_curator_use_llm_switch(monkeypatch, fake_openai) -> None:
    assert not curator_uses_llm() and learning_llm() is None
    monkeypatch.setenv("ACE_CURATOR_USE_LLM", "true")
    with pytest.raises(Exception, match="MEMORIST_LLM"):
        learning_llm()
    monkeypatch.setenv("GEMINI_API_KEY", "g")
    assert learning_llm().name == "gemini:gemini-2.5-flash"
    monkeypatch.setenv("MEMORIST_LLM", "openai:gpt-5-mini")
    assert learning_llm().name == "openai:gpt-5-mini"
    assert learning_llm("none") is None
    assert fake_openai.requests == []


def test_the_json_schemas_carry_the_field_descriptions(fake_openai, llm) -> None:
    fake_openai.script("responses", text({"facts": []}))
    LLMExtractor(llm).extract([Message("user", "hello")])
    schema = fake_openai.requests[0].body["text"]["format"]["schema"]
    fact = schema["$defs"]["ExtractedFact"]["properties"]
    assert "Prefers dark mode" in fact["text"]["description"]
    assert json.dumps(schema)  # plain JSON
