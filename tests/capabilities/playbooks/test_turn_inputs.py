"""What a playbook turn refuses, through the library (``PlaybookTurn``), the runner
protocol and ``memorist run-turn``: each refusal is a ValidationError naming the
argument, and nothing is stored. On each backend."""

from __future__ import annotations

import json

import pytest

from memorist import Lesson, Playbook, ValidationError
from memorist.ace.runner import OUTCOMES, run_turn

LIMIT = 100_000  # MemoryConfig.max_message_chars' default
HI = [{"role": "user", "content": "How do I add 1/2 + 1/3?"}]


@pytest.fixture
def seeded(mem):
    """A playbook holding one bullet of sam's, and what the store holds (its events, and
    the bullets with their counters and scores, which a touch changes)."""
    pb = Playbook(mem)
    pb.turn("sam", "c0").learn(question="q", lessons=["Walk along a number line"], topic="fractions")
    return pb, lambda: (mem.stats()["events"], pb.bullets())


@pytest.mark.parametrize(("arguments", "field"), [
    # A string is not a list of lessons: its letters must not become bullets.
    ({"lessons": "Walk along a number line"}, "lessons"),
    ({"lessons": {"content": "Walk along a number line"}}, "lessons"),
    ({"lessons": ["Draw it", "a\x00b"]}, "lessons[1]"),
    ({"lessons": ["x" * (LIMIT + 1)]}, "lessons[0]"),
    ({"lessons": [{"content": "Draw the fractions", "type": "bogus"}]}, "lessons[0].type"),
    ({"lessons": [{"content": "Draw the fractions\x00"}]}, "lessons[0].content"),
    ({"lessons": [{"content": "Draw the fractions", "tags": "visual"}]}, "lessons[0].tags"),
    ({"lessons": [{"content": "Draw the fractions", "tags": ["visual", None]}]}, "lessons[0].tags[1]"),
    ({"lessons": [{"content": "Draw the fractions", "memory_type": "long_term"}]}, "lessons[0].memory_type"),
    ({"lessons": [{"content": "Draw the fractions", "concept": "halves\x00"}]}, "lessons[0].concept"),
    ({"lessons": [{"content": "Draw the fractions", "source": 7}]}, "lessons[0].source"),
    ({"lessons": [Lesson("Draw the fractions", topic="t" * 300)]}, "lessons[0].topic"),
    ({"outcome": "succes"}, "outcome"),
    ({"feedback": "That helped\x00"}, "feedback"),
    ({"feedback": "That helped. " * 10_000}, "feedback"),
    ({"question": "I get confused " * 10_000}, "question"),
    ({"answer": "Use pizza\x00"}, "answer"),
    ({"topic": 5}, "topic"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "user", "content": "I get confused\x00"}]}, "messages[0].content"),
    ({"used": "abc"}, "used"),
    ({"used": [{"id": "b1"}]}, "used[0]"),
])
def test_learn_refuses_bad_arguments_by_name_and_stores_nothing(seeded, arguments, field):
    pb, stored = seeded
    turn = pb.turn("sam", "c1")
    turn.retrieve("Walk along a number line")
    before = stored()
    with pytest.raises(ValidationError) as info:
        turn.learn(**{"question": "q", "feedback": "Thanks, that helped!", **arguments})
    assert info.value.field == field
    assert stored() == before


def test_the_refusals_list_what_is_accepted(seeded):
    pb, _ = seeded
    with pytest.raises(ValidationError, match="success, failure") as outcome:
        pb.turn("sam", "c1").learn(question="q", outcome="succes")
    assert "'succes'" in str(outcome.value)
    with pytest.raises(ValidationError) as kind:
        pb.turn("sam", "c1").learn(question="q", lessons=[{"content": "Draw it", "type": "bogus"}])
    assert all(name in str(kind.value) for name in ("strategy", "anti_pattern", "experience", "preference", "fact"))


@pytest.mark.parametrize(("call", "field"), [
    (lambda pb: pb.turn("a\x00b"), "learner_id"),
    (lambda pb: pb.turn("sam", "c\x00"), "conversation_id"),
    (lambda pb: pb.turn("sam", "c1", topic="fractions\x00"), "topic"),
    (lambda pb: pb.learn(learner_id="a\x00b", question="q", lessons=["Draw it"]), "learner_id"),
    (lambda pb: pb.retrieve("fractions", learner_id="a\x00b"), "learner_id"),
    # Inspecting and cleaning: search took a None query, a limit of 10**30 or 0 and a
    # NUL in a learner id; cleanup a NaN threshold (merging nothing, silently).
    (lambda pb: pb.search(None), "query"),
    (lambda pb: pb.search("x" * 100_001), "query"),
    (lambda pb: pb.search("fractions", limit=0), "limit"),
    (lambda pb: pb.search("fractions", limit=10**30), "limit"),
    (lambda pb: pb.search("fractions", learner_id="s\x00m"), "learner_id"),
    (lambda pb: pb.bullets("\u200b"), "learner_id"),
    (lambda pb: pb.cleanup(threshold=float("nan")), "threshold"),
    (lambda pb: pb.cleanup(threshold=None), "threshold"),
    (lambda pb: pb.cleanup(dry_run="yes"), "dry_run"),
])
def test_ids_and_arguments_of_a_playbook_s_calls_are_checked(seeded, call, field):
    pb, stored = seeded
    before = stored()
    with pytest.raises(ValidationError) as info:
        call(pb)
    assert info.value.field == field
    assert stored() == before


@pytest.mark.parametrize(("options", "field"), [
    ({"query": "number line\x00"}, "query"),
    ({"query": "x" * (LIMIT + 1)}, "query"),
    ({"top_k": 10**12}, "top_k"),
    ({"memory_types": "procedural"}, "memory_types"),
    ({"memory_types": ["long_term"]}, "memory_types[0]"),
    ({"tags": "fractions"}, "tags"),
    ({"tags": [3]}, "tags[0]"),
    ({"topic": "fractions\x00"}, "topic"),
    ({"touch": "yes"}, "touch"),
])
def test_retrieve_refuses_bad_arguments_before_touching_anything(seeded, options, field):
    pb, stored = seeded
    options = {"query": "Walk along a number line", **options}
    before = stored()
    with pytest.raises(ValidationError) as info:
        pb.turn("sam", "c1").retrieve(options.pop("query"), **options)
    assert info.value.field == field
    assert stored() == before


def test_every_accepted_value_still_learns(mem):
    pb = Playbook(mem)
    for outcome in (*OUTCOMES, None):
        pb.turn("sam", "c1").learn(question="q", outcome=outcome, lessons=[
            {"content": "Draw the fractions as pizzas", "type": "anti_pattern", "tags": ["Visual"], "memory_type": "procedural",
             "concept": "halves", "section": "common_mistakes", "topic": "fractions", "source": "k1"},
            Lesson("Sam prefers one example at a time", type="preference"),
        ])
    turn = pb.turn("sam", "c2")
    assert [b.content for b in turn.retrieve("pizzas", memory_types=["Procedural"], tags=["visual"])] == ["Draw the fractions as pizzas"]
    assert {b.content for b in pb.bullets("sam")} == {"Draw the fractions as pizzas", "Sam prefers one example at a time"}


# --- the runner protocol and memorist run-turn --------------------------------------------------
@pytest.mark.parametrize(("change", "field"), [
    ({"learner_id": "l\x00x"}, "learner_id"),
    ({"conversation_id": "c\x00"}, "conversation_id"),
    ({"outcome": "great"}, "outcome"),
    ({"feedback": "helped\x00"}, "feedback"),
    ({"topic": "fractions\x00"}, "topic"),
    ({"messages": [{"role": "user", "content": "hi\x00"}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": "x" * (LIMIT + 1)}]}, "messages[0].content"),
])
def test_the_protocol_refuses_a_bad_turn_before_it_reads_or_writes(seeded, change, field):
    pb, stored = seeded
    before = stored()
    with pytest.raises(ValidationError) as info:
        run_turn(pb, {"messages": HI, "learner_id": "sam", "feedback": "Thanks, that helped!", **change})
    assert info.value.field == field
    assert stored() == before


def test_what_text_cannot_hold_is_dropped_from_a_models_answer(mem):
    out = run_turn(Playbook(mem), {"messages": HI, "learner_id": "sam", "outcome": "success"},
                   answerer=lambda system, messages: "Use sixths:\x00 1/2 + 1/3 = 5/6 \ud800")
    assert out["answer"] == "Use sixths: 1/2 + 1/3 = 5/6 ?"
    assert out["scratch"]["ace_delta"]["num_new_bullets"] >= 1  # it learned from the answer


def test_the_chat_takes_the_outcomes_a_turn_takes():
    pytest.importorskip("fastapi")
    import pydantic

    from memorist.agent.chat import ChatRequest

    assert OUTCOMES == ("success", "failure")
    for outcome in OUTCOMES:
        assert ChatRequest(message="hi", outcome=outcome).outcome == outcome
    with pytest.raises(pydantic.ValidationError):
        ChatRequest(message="hi", outcome="great")


@pytest.mark.parametrize(("change", "message"), [
    ({"learner_id": "l\x00x"}, "error: learner_id: holds a NUL character (U+0000) at position 1"),
    ({"outcome": "great"}, "error: outcome: must be one of success, failure (or left out), got 'great'"),
    ({"messages": [{"role": "user", "content": "\u200b"}]}, "error: messages[0].content: must not be empty (it has no visible character)"),
])
def test_run_turn_reports_a_bad_turn_in_one_line_and_creates_no_store(tmp_path, change, message):
    pytest.importorskip("langgraph")
    from click.testing import CliRunner

    from memorist.cli import cli

    db = tmp_path / "turns.db"
    payload = json.dumps({"messages": [{"role": "user", "content": "hi"}], **change})
    result = CliRunner().invoke(cli, ["--db", str(db), "--embedder", "hashing", "run-turn"], input=payload)
    assert result.exit_code == 1
    assert result.stderr.startswith(message) and len(result.stderr.splitlines()) == 1  # no traceback
    assert result.stdout == "" and not db.exists()
