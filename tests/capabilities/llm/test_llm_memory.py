"""``Memory(..., llm="openai:gpt-5-mini")`` against the fake server: facts stored,
token accounting in the log, failures that never lose a turn, and reprocess."""

from __future__ import annotations

import json

import pytest
from fake_openai import error, text

from memorist import Memory
from memorist.errors import ConfigurationError
from memorist.llm.openai import OpenAIResponsesLLM
from memorist.roles.llm import LLMExtractor, LLMReconciler

ALEX = "Hi, I'm Alex. I'm a vegetarian and allergic to nuts."
FACTS = {"facts": ["Name is Alex", "Is a vegetarian", "Allergic to tree nuts"]}


def behaving_model(body: dict):
    """A fake model that does its job: the facts for extraction, ADD for every new
    fact on the update prompt."""
    if "memory manager" in body.get("instructions", ""):
        facts = [line for line in body["input"][0]["content"].split("New Facts:")[1].splitlines() if line.startswith("- [")]
        return text({"memory": [{"event": "ADD", "text": json.loads(f.split("] ", 1)[1]), "fact": i} for i, f in enumerate(facts)]})
    return text(FACTS)


def memories(m: Memory, user: str = "alex") -> list[str]:
    return sorted(r["memory"] for r in m.get_all(user_id=user)["results"])


def ops(m: Memory, user: str = "alex") -> list[str]:
    return [e["event"] for e in m.events(user_id=user) if e["event"] != "RETRIEVE"]


@pytest.fixture
def mem(fake_openai, db_path):
    m = Memory(db_path, embedder="hashing", llm="openai:gpt-5-mini")
    yield m
    m.close()


def test_add_calls_the_responses_api_and_stores_the_models_facts(mem, fake_openai) -> None:
    fake_openai.script("responses", text(FACTS, usage=(400, 30)))
    result = mem.add(ALEX, user_id="alex")
    assert sorted(r["memory"] for r in result["results"]) == sorted(FACTS["facts"])
    assert result["message"] == "Added 3 memories successfully" and "pending" not in result
    assert memories(mem) == sorted(FACTS["facts"])
    assert [r.path for r in fake_openai.requests] == ["/v1/responses"]  # nothing stored yet: no update call
    assert ALEX in fake_openai.requests[0].body["input"][0]["content"]
    turn = next(e for e in mem.events(user_id="alex") if e["event"] == "TURN")
    assert "pending" not in turn["payload"] and turn["payload"]["facts"] == FACTS["facts"]


def test_every_llm_call_is_in_the_event_log_with_tokens_and_cost(mem, fake_openai) -> None:
    fake_openai.script("responses", text(FACTS, usage=(400, 30)))
    mem.add(ALEX, user_id="alex")
    turn = next(e for e in mem.events(user_id="alex") if e["event"] == "TURN")
    (call,) = [e for e in mem.events(user_id="alex") if e["event"] == "LLM_CALL"]
    p = call["payload"]
    assert p["turn_event"] == turn["seq"] and call["user_id"] == "alex"
    assert (p["role"], p["provider"], p["model"], p["prompt"], p["ok"]) == ("extractor", "openai", "gpt-5-mini", "extraction/2", True)
    assert (p["input_tokens"], p["output_tokens"]) == (400, 30)
    assert p["cost_usd"] == pytest.approx((400 * 0.25 + 30 * 2.0) / 1e6)
    assert p["latency_ms"] >= 0 and p["response_id"].startswith("resp_")
    usage = mem.llm_usage(user_id="alex")
    assert usage["calls"] == 1 and usage["input_tokens"] == 400 and usage["by_role"]["extractor"]["output_tokens"] == 30


def test_a_second_turn_is_reconciled_by_the_model(mem, fake_openai) -> None:
    fake_openai.script("responses", text({"facts": ["Lives in California"]}))
    mem.add("I live in California", user_id="alex")

    def update(body):
        user = body["input"][0]["content"]
        assert '- [0] "Lives in California"' in user
        return text({"memory": [{"id": "0", "event": "UPDATE", "text": "Lives in San Francisco",
                                 "old_memory": "Lives in California", "fact": 0}]})

    fake_openai.script("responses", text({"facts": ["Lives in San Francisco"]}), update)
    result = mem.add("I moved to San Francisco", user_id="alex")
    assert [(r["event"], r["memory"], r.get("previous_memory")) for r in result["results"]] == [
        ("UPDATE", "Lives in San Francisco", "Lives in California")
    ]
    assert memories(mem) == ["Lives in San Francisco"]
    roles = [e["payload"]["role"] for e in mem.events(user_id="alex") if e["event"] == "LLM_CALL"]
    assert roles == ["extractor", "extractor", "reconciler"]
    assert fake_openai.calls("chat") == []


def test_garbage_keeps_the_turn_pending_and_reprocess_recovers_it(mem, fake_openai) -> None:
    fake_openai.default["responses"] = text("<html>upstream proxy error</html>")
    result = mem.add(ALEX, user_id="alex", metadata={"session": "s1"})
    # The heuristic's facts stand in, provisionally; the turn is kept and pending.
    assert memories(mem) == ["Allergic to nuts", "Is vegetarian", "Name is Alex"]
    assert result["pending"]["reason"].startswith("extraction failed")
    (pending,) = mem.pending(user_id="alex")
    assert pending["seq"] == result["pending"]["turn_event"]
    assert pending["payload"]["messages"] == [{"role": "user", "content": ALEX}]
    assert pending["payload"]["pending"] is True
    calls = [e["payload"] for e in mem.events(user_id="alex") if e["event"] == "LLM_CALL"]
    assert [c["ok"] for c in calls] == [True, True] and all(c["role"] == "extractor" for c in calls)

    # The model behaves again.
    fake_openai.default["responses"] = behaving_model
    outcome = mem.reprocess()
    assert (outcome["processed"], outcome["failed"], outcome["pending"]) == (1, 0, 0)
    assert memories(mem) == sorted(FACTS["facts"])
    assert mem.pending() == []
    (turn,) = outcome["results"]
    assert turn["status"] == "processed" and turn["kept"] == 1  # "Name is Alex" was right already
    retracted = sorted(r["memory"] for r in turn["results"] if r.get("reason") == "retracted")
    assert retracted == ["Allergic to nuts", "Is vegetarian"]
    processed = [e for e in mem.events(user_id="alex") if e["event"] == "TURN_PROCESSED"]
    assert processed[0]["payload"]["turn_event"] == pending["seq"]
    kept = next(r for r in mem.get_all(user_id="alex")["results"] if r["memory"] == "Allergic to tree nuts")
    assert kept["metadata"] == {"session": "s1"}
    # A retracted memory keeps its history, and says why it went.
    gone = next(e for e in mem.events(user_id="alex") if e["event"] == "DELETE")
    assert "reprocessed" in gone["payload"]["reason"]
    assert mem.reprocess()["results"] == []  # nothing left to do
    roles = [e["payload"]["role"] for e in mem.events(user_id="alex") if e["event"] == "LLM_CALL"]
    assert roles == ["extractor", "extractor", "extractor", "reconciler"]
    assert all(e["payload"]["turn_event"] == pending["seq"] for e in mem.events(user_id="alex") if e["event"] == "LLM_CALL")


def test_a_server_that_answers_everything_with_facts_still_recovers(mem, fake_openai) -> None:
    """A cruder fake model (facts for every request, even the update prompt): the
    reconciler's fallback decides, and the turn is processed all the same."""
    fake_openai.default["responses"] = text("garbage")
    mem.add(ALEX, user_id="alex")
    fake_openai.default["responses"] = text(FACTS)
    outcome = mem.reprocess()
    assert (outcome["processed"], outcome["pending"]) == (1, 0)
    assert memories(mem) == sorted(FACTS["facts"])


def test_reprocess_while_the_model_still_fails_changes_nothing(fake_openai, db_path, waits) -> None:
    fake_openai.default["responses"] = error(503, "overloaded")
    with Memory(db_path, embedder="hashing", llm=OpenAIResponsesLLM(sleep=waits.append)) as m:
        m.add(ALEX, user_id="alex")
        before = memories(m)
        outcome = m.reprocess(user_id="alex")
        assert (outcome["processed"], outcome["failed"], outcome["pending"]) == (0, 1, 1)
        assert "503" in outcome["results"][0]["reason"]
        assert memories(m) == before
        assert "REPROCESS_FAILED" in ops(m)
        assert len(waits) == 4  # two retries with backoff, in add and in reprocess
        fake_openai.default["responses"] = behaving_model
        assert m.reprocess(user_id="alex")["processed"] == 1


def test_a_timeout_falls_back_and_keeps_the_turn(fake_openai, db_path, waits) -> None:
    fake_openai.default["responses"] = text(FACTS, delay=2.0)
    llm = OpenAIResponsesLLM(timeout=0.2, max_retries=1, sleep=waits.append)
    with Memory(db_path, embedder="hashing", llm=llm) as m:
        result = m.add(ALEX, user_id="alex")
        assert "timed out" in result["pending"]["reason"]
        assert memories(m) == ["Allergic to nuts", "Is vegetarian", "Name is Alex"]
        failures = [e["payload"] for e in m.events(user_id="alex") if e["event"] == "LLM_CALL"]
        assert [f["ok"] for f in failures] == [False, False] and "timed out" in failures[0]["error"]


def test_a_rate_limit_is_waited_out_without_losing_anything(fake_openai, db_path, waits) -> None:
    fake_openai.script("responses", error(429, headers={"retry-after": "1"}), text(FACTS))
    with Memory(db_path, embedder="hashing", llm=OpenAIResponsesLLM(sleep=waits.append)) as m:
        result = m.add(ALEX, user_id="alex")
        assert "pending" not in result and waits == [1.0]
        assert memories(m) == sorted(FACTS["facts"])


def test_an_invented_id_never_touches_a_memory(mem, fake_openai) -> None:
    fake_openai.script("responses", text({"facts": ["Loves pizza"]}))
    mem.add("I love pizza", user_id="alex")
    fake_openai.script("responses", text({"facts": ["Loves pizza"]}))
    mem.add("I love pizza", user_id="bob")
    bob_id = mem.get_all(user_id="bob")["results"][0]["id"]
    invent = text({"memory": [{"id": bob_id, "event": "DELETE", "text": "Loves pizza", "fact": 0},
                              {"event": "ADD", "text": "Became vegan", "fact": 0}]})
    fake_openai.script("responses", text({"facts": ["Became vegan, no longer eats pizza"]}), invent, invent)
    result = mem.add("I became vegan and don't eat pizza anymore", user_id="alex")
    assert memories(mem, "bob") == ["Loves pizza"]  # another user's memory: untouched
    assert "pending" not in result  # extraction worked; only the reconciler fell back
    turn = [e for e in mem.events(user_id="alex") if e["event"] == "TURN"][-1]
    assert turn["payload"]["fallback"][0]["role"] == "reconciler"


def test_an_extractor_without_fallback_stores_nothing_until_reprocessed(fake_openai, db_path) -> None:
    llm = OpenAIResponsesLLM()
    fake_openai.default["responses"] = text("garbage")
    with Memory(db_path, embedder="hashing", llm=llm, extractor=LLMExtractor(llm, fallback=None)) as m:
        result = m.add(ALEX, user_id="alex")
        assert result["results"] == [] and result["pending"]
        assert memories(m) == []
        fake_openai.default["responses"] = text(FACTS)
        assert m.reprocess()["processed"] == 1
        assert memories(m) == sorted(FACTS["facts"])


def test_pending_turns_survive_reopening_the_store(fake_openai, db_path) -> None:
    fake_openai.default["responses"] = text("nope")
    with Memory(db_path, embedder="hashing", llm="openai") as m:
        m.add(ALEX, user_id="alex")
    with Memory(db_path, embedder="hashing") as m:  # no LLM: pending is still readable
        assert len(m.pending()) == 1
        with pytest.raises(ConfigurationError, match="MEMORIST_LLM"):
            m.reprocess()
    fake_openai.default["responses"] = text(FACTS)
    with Memory(db_path, embedder="hashing", llm="openai:gpt-5-mini") as m:
        assert m.reprocess()["processed"] == 1 and m.pending() == []


def test_memorist_llm_and_from_config_configure_the_roles(fake_openai, db_path, monkeypatch) -> None:
    with Memory.from_config({"path": db_path, "embedder": "hashing", "llm": "openai:gpt-5-mini"}) as m:
        assert isinstance(m.extractor, LLMExtractor) and isinstance(m.reconciler, LLMReconciler)
        assert m.llm.name == "openai:gpt-5-mini"
    monkeypatch.setenv("MEMORIST_LLM", "openai")
    fake_openai.script("responses", text(FACTS))
    with Memory(db_path, embedder="hashing") as m:
        assert m.llm.name == "openai:gpt-5-mini"
        m.add(ALEX, user_id="carol")
        assert memories(m, "carol") == sorted(FACTS["facts"])
    with Memory(db_path, embedder="hashing", llm="none") as m:  # an explicit "none" wins over MEMORIST_LLM
        assert m.llm is None


def test_verbatim_adds_never_call_the_model(mem, fake_openai) -> None:
    mem.add("remember this exactly", user_id="alex", infer=False)
    assert fake_openai.requests == []
