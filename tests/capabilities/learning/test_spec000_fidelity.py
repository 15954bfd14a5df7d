"""Spec 000 read against the code (issue 14, item 8): one access per bullet retrieved
or reinforced; ``ACE_CURATOR_USE_LLM`` with only ``GEMINI_API_KEY`` uses Gemini; the
"(LLM disabled)" line only when the model is switched off; the cap on new bullets in
one place."""

from __future__ import annotations

import logging

from fake_openai import error, text
from learning_helpers import Mapped

from memorist import Memory, Playbook
from memorist.roles.learning import CurationInput, Curator, Delta, Lesson, NewBullet, Reflection

axis, at = Mapped.axis, Mapped.at


def test_every_retrieved_bullet_is_one_access(mapped_mem, embedder) -> None:
    embedder.mapping.update({"A": axis(2), "B": at(0.85, 2, 3), "C": at(0.8, 2, 4), "q": axis(2)})
    pb = Playbook(mapped_mem, max_new=3)
    pb.turn("sam", "c1").learn(question="q", lessons=["A", "B", "C"], topic="t", outcome=None)
    scope = pb.pipeline.space("sam")
    before = mapped_mem.store.access_clock(scope)
    got = pb.turn("sam", "c2").retrieve("q")
    assert [b.content for b in got] == ["A", "B", "C"]
    assert mapped_mem.store.access_clock(scope) == before + 3  # _touch_bullet: one tick per bullet
    stamps = {r.text: r.last_access["procedural"] for r in pb.pipeline.load("sam").records.values()}
    assert stamps == {"A": before + 1, "B": before + 2, "C": before + 3}


def test_every_reinforced_bullet_is_one_access(mapped_mem, embedder) -> None:
    embedder.mapping.update({"A": axis(2), "B": axis(5)})
    pb = Playbook(mapped_mem)
    pb.turn("sam", "c1").learn(question="q", lessons=["A", "B"], topic="t")
    scope = pb.pipeline.space("sam")
    before = mapped_mem.store.access_clock(scope)
    result = pb.turn("sam", "c2").learn(question="q", lessons=["A", "B"], topic="t")
    assert result["num_updates"] == 2
    assert mapped_mem.store.access_clock(scope) == before + 2
    stamps = sorted(r.last_access["procedural"] for r in pb.pipeline.load("sam").records.values())
    assert stamps == [before + 1, before + 2]


def test_ace_curator_use_llm_with_only_a_gemini_key_calls_gemini(backend, fake_openai, monkeypatch) -> None:
    monkeypatch.setenv("ACE_CURATOR_USE_LLM", "true")
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    monkeypatch.setenv("GEMINI_BASE_URL", fake_openai.base_url)
    fake_openai.script("chat", text({"successful_patterns": ["Draw the fractions"], "summary": "ok"}),
                       text({"reasoning": "new", "new_bullets": [{"lesson": 0, "content": "Draw the fractions first"}]}))
    with Memory(backend.target, embedder="hashing") as m:  # the Memory itself has no model
        pb = Playbook(m)
        assert type(pb.reflector).__name__ == "LLMReflector" and type(pb.curator).__name__ == "LLMCurator"
        result = pb.turn("sam", "c1").learn(question="How do I add 1/2 + 1/3?", answer="Draw them.", feedback="That helped")
    assert result["num_new_bullets"] == 1
    assert [r.endpoint for r in fake_openai.requests] == ["chat", "chat"]
    assert fake_openai.requests[0].body["model"] == "gemini-2.5-flash"


def test_llm_disabled_is_said_only_when_it_is(backend, fake_openai, monkeypatch, caplog) -> None:
    caplog.set_level(logging.INFO, logger="memorist")
    with Memory(backend.target, embedder="hashing") as m:
        Playbook(m).turn("sam", "c1").learn(question="q", lessons=["Draw it"], topic="t")
        assert "[Curator] Using heuristic delta generation (LLM disabled)." in caplog.messages
        caplog.clear()
        monkeypatch.setenv("ACE_CURATOR_USE_LLM", "true")
        monkeypatch.setenv("GEMINI_API_KEY", "g-test")
        monkeypatch.setenv("GEMINI_BASE_URL", fake_openai.base_url)
        fake_openai.default["chat"] = error(400, "bad request")  # the model fails: the heuristics stand in
        result = Playbook(m).turn("sam", "c2").learn(question="q", lessons=["Use pizza slices"], topic="t")
    assert result["num_new_bullets"] == 1  # nothing lost
    assert "[Curator] Using heuristic delta generation (LLM disabled)." not in caplog.messages
    assert "[Curator] Using heuristic delta generation (LLM failed; the heuristic stands in)." in caplog.messages


class Greedy(Curator):
    by = "Greedy"

    def _curate(self, data: CurationInput) -> Delta:
        return Delta(new=tuple(NewBullet(x.content, topic=data.topic, lesson=i) for i, x in enumerate(data.reflection.lessons)))


def test_the_cap_is_the_curator_bases_and_applies_to_any_curator(caplog) -> None:
    caplog.set_level(logging.INFO, logger="memorist")
    data = CurationInput(reflection=Reflection(lessons=tuple(Lesson(f"L{i}") for i in range(4))), max_new=2)
    delta = Greedy().curate(data)
    assert [b.content for b in delta.new] == ["L0", "L1"]
    assert [m for m in caplog.messages if "ReinforceOverflow" in m] == [
        "[Curator][Greedy ReinforceOverflow] id=- score=0.000 dropped (no similar bullet) content=L2",
        "[Curator][Greedy ReinforceOverflow] id=- score=0.000 dropped (no similar bullet) content=L3",
    ]
    assert [m for m in caplog.messages if " New " in m][0].startswith("[Curator][Greedy New 1]")
