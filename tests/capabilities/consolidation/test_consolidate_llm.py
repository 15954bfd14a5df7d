"""Consolidation with a model (the fake OpenAI server): the brevity-bias guard in the
prompt, a merge that drops a number or a name rejected with its sources kept, a failing
model falling back to the heuristic merge; the extractor's proposed importance."""

from __future__ import annotations

import json

from fake_openai import error, text

from memorist import Memory

PAIR = ["Paid 1,200 euros for the Lisbon flat deposit", "Paid 1,200 euros for the Lisbon flat deposit on 2024-05-03"]


def fill(m: Memory) -> list[str]:
    return [m.add(t, user_id="u", infer=False, importance=0.2)["results"][0]["id"] for t in PAIR]


def test_the_model_s_merge_is_stored_when_it_keeps_every_detail(backend, fake_openai) -> None:
    fake_openai.script("responses", text({"memory": "Paid 1200 euros for the Lisbon flat deposit on 2024-05-03"}))
    with Memory(backend.target, embedder="hashing", llm="openai:gpt-5-mini") as m:
        ids = fill(m)
        report = m.learning.consolidate(user_id="u")
        assert report["rejected"] == [] and report["merged_count"] == 2
        assert report["results"][0]["memory"] == "Paid 1200 euros for the Lisbon flat deposit on 2024-05-03"
        assert all(m.store.get(i).status.value == "archived" for i in ids)
    (request,) = fake_openai.requests
    instructions, prompt = request.body["instructions"], request.body["input"][0]["content"]
    assert "Do not summarise for brevity" in instructions and "EVERY number" in instructions
    assert all(t in prompt for t in PAIR) and "2024-05-03" in prompt.split("must all appear")[1]


def test_a_merge_that_drops_a_number_is_rejected_and_the_sources_are_kept(backend, fake_openai) -> None:
    fake_openai.script("responses", text({"memory": "Paid a deposit for the Lisbon flat"}))
    with Memory(backend.target, embedder="hashing") as m:
        ids = fill(m)
        before = list(m.export(user_id="u"))
        report = m.learning.consolidate(user_id="u", llm="openai:gpt-5-mini")
        assert report["merged_count"] == 0 and report["consolidated_count"] == 0
        (rejected,) = report["rejected"]
        assert rejected["consolidated_from"] == ids and rejected["memory"] == "Paid a deposit for the Lisbon flat"
        assert {"1200", "2024-05-03"} <= set(rejected["missing"]) and "dropped" in rejected["reason"]
        assert list(m.export(user_id="u")) == before  # nothing written


def test_a_merge_that_drops_a_name_is_rejected(backend, fake_openai) -> None:
    fake_openai.script("responses", text({"memory": "Paid 1,200 euros for the flat deposit on 2024-05-03"}))
    with Memory(backend.target, embedder="hashing") as m:
        fill(m)
        report = m.learning.consolidate(user_id="u", llm="openai:gpt-5-mini")
        assert report["rejected"][0]["missing"] == ["lisbon"]


def test_a_failing_model_falls_back_to_the_heuristic_merge(backend, fake_openai) -> None:
    fake_openai.default["responses"] = error(500, "down")
    with Memory(backend.target, embedder="hashing") as m:
        fill(m)
        llm = __import__("memorist.llm", fromlist=["resolve_llm"]).resolve_llm("openai:gpt-5-mini", max_retries=0)
        report = m.learning.consolidate(user_id="u", llm=llm)
        assert report["merged_count"] == 2 and report["results"][0]["memory"] == PAIR[1]
        assert "fallback" in report["results"][0]


def test_the_llm_extractor_s_importance_is_stored_and_a_malformed_one_is_ignored(db_path, fake_openai) -> None:
    fake_openai.script("responses", text({"facts": [
        {"text": "Is allergic to penicillin", "importance": 0.97},
        {"text": "Likes jazz", "importance": "high"},
        {"text": "Has a cat", "importance": 7},
        {"text": "Plays chess", "importance": "40%"},
    ]}))
    with Memory(db_path, embedder="hashing", llm="openai:gpt-5-mini") as m:
        m.add("hello", user_id="u")
        found = {r["memory"]: m.store.get(r["id"]).importance for r in m.get_all(user_id="u")["results"]}
    assert found == {"Is allergic to penicillin": 0.97, "Likes jazz": 0.5, "Has a cat": 1.0, "Plays chess": 0.4}
    assert '"importance"' in json.dumps(fake_openai.requests[0].body)


def test_a_model_may_merge_sources_longer_than_a_merged_memory_into_one_that_fits(backend, fake_openai) -> None:
    """The length guard before any merge is the heuristic's (it keeps every clause);
    a model is asked, and its merge is checked like any other."""
    fake_openai.script("responses", text({"memory": "Drinks green tea every morning at 7am"}))
    long = "Drinks green tea every morning at 7am. " * 120  # 4,680 characters
    with Memory(backend.target, embedder="hashing", llm="openai:gpt-5-mini") as m:
        m.add(long, user_id="u", infer=False, importance=0.2)
        m.add(long + "Really.", user_id="u", infer=False, importance=0.2)
        report = m.learning.consolidate(user_id="u")
        assert report["rejected"] == [] and report["merged_count"] == 2, report["rejected"]
        assert report["results"][0]["memory"] == "Drinks green tea every morning at 7am"
    assert len(fake_openai.requests) == 1
