"""What ``add`` reconciles against, how much one turn may cost, and what it may write:
a run-only conversation keeps to itself, a turn gives at most MAX_FACTS_PER_TURN
facts, merged metadata keeps to the limits, a qualified negation deletes nothing, a
LangGraph store's item is no stored fact, and an UPDATE makes no second copy."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from datetime import datetime

import pytest

from memorist import Extractor, Memory, NotFoundError, ScriptedLLM, ValidationError
from memorist.model import Existing, Fact, Message
from memorist.roles import extractor as extractors
from memorist.roles import reconciler as heuristic
from memorist.roles.reconciler import HeuristicReconciler


def changes(result: dict) -> list[tuple[str, str]]:
    return [(r["event"], r["memory"]) for r in result["results"]]


def texts(listing: dict) -> list[str]:
    return sorted(r["memory"] for r in listing["results"])


def metadata_bytes(metadata: dict) -> int:
    return len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode())


# A run-only add keeps to its run ------------------------------------------------------


def test_a_run_only_add_neither_changes_nor_absorbs_another_runs_memories(backend) -> None:
    """Adds with a run_id alone share one space (no user, no agent): chat-2's "I live
    in Prague" rewrote chat-1's "Lives in Oslo", and its "I like tea" was taken as
    already stored by chat-1's, so chat-2 kept nothing of its own."""
    with Memory(backend.target, embedder="hashing") as m:
        assert changes(m.add("I live in Oslo. I like tea.", run_id="chat-1")) == [("ADD", "Lives in Oslo"), ("ADD", "Likes tea")]
        second = m.add("I live in Prague. I like tea.", run_id="chat-2")
        assert changes(second) == [("ADD", "Lives in Prague"), ("ADD", "Likes tea")]
        assert texts(m.get_all(run_id="chat-1")) == ["Likes tea", "Lives in Oslo"]
        assert texts(m.get_all(run_id="chat-2")) == ["Likes tea", "Lives in Prague"]
        assert [r["memory"] for r in m.search("tea", run_id="chat-2")["results"]][:1] == ["Likes tea"]
        for change in second["results"]:  # every id an add returns is its scope's
            assert m.get(change["id"], run_id="chat-2")["run_id"] == "chat-2"
        # Within one run the reconciler still works.
        again = m.add("I live in Rome.", run_id="chat-2")
        assert [(r["event"], r["memory"], r.get("previous_memory")) for r in again["results"]] == [("UPDATE", "Lives in Rome", "Lives in Prague")]
        m.get(again["results"][0]["id"], run_id="chat-2")
        with pytest.raises(NotFoundError):
            m.get(again["results"][0]["id"], run_id="chat-1")
        assert texts(m.get_all(run_id="chat-1")) == ["Likes tea", "Lives in Oslo"]


def test_a_users_runs_still_reconcile_with_each_other(backend) -> None:
    """A user's memories last across conversations (a run is a tag inside the user's
    space): Tuesday's move updates Monday's address, and Tuesday's repeat is known."""
    with Memory(backend.target, embedder="hashing") as m:
        m.add("I live in Oslo. I like jazz.", user_id="kim", run_id="monday")
        moved = m.add("I live in Prague.", user_id="kim", run_id="tuesday")
        assert [(r["event"], r["memory"]) for r in moved["results"]] == [("UPDATE", "Lives in Prague")]
        assert m.get(moved["results"][0]["id"], user_id="kim")["memory"] == "Lives in Prague"
        assert m.add("I like jazz.", user_id="kim", run_id="tuesday")["results"] == []
        assert texts(m.get_all(user_id="kim")) == ["Likes jazz", "Lives in Prague"]


# One turn's cost is bounded ----------------------------------------------------------


def test_a_turn_keeps_at_most_max_facts_per_turn_facts_and_logs_the_cut(backend, caplog) -> None:
    """The heuristic extractor kept every fact of a message: one of 100,000 characters
    gave about 5,500 memories, and adding it again took most of a minute."""
    cap = extractors.MAX_FACTS_PER_TURN
    text = " ".join(f"I like hobby{i}." for i in range(cap + 70))
    with Memory(backend.target, embedder="hashing") as m, caplog.at_level(logging.WARNING, logger="memorist"):
        result = m.add(text, user_id="kim")
        assert changes(result) == [("ADD", f"Likes hobby{i}") for i in range(cap)]
        assert len(m.get_all(user_id="kim", limit=1000)["results"]) == cap
        assert any(f"found {cap + 70} facts in one turn; keeping the first {cap}" in r.getMessage() for r in caplog.records)


class _Chatty(Extractor):
    """An extractor of the caller's that finds a fact in every word."""

    def extract(self, messages: Sequence[Message], *, timestamp: datetime | None = None) -> list[Fact]:
        return [Fact(f"Knows the word {w}") for m in messages for w in m.content.split()]


def test_any_extractors_facts_are_capped_per_turn(backend, caplog) -> None:
    cap = extractors.MAX_FACTS_PER_TURN
    words = " ".join(f"w{i}" for i in range(cap * 2))
    with Memory(backend.target, embedder="hashing", extractor=_Chatty()) as m, caplog.at_level(logging.WARNING, logger="memorist"):
        assert len(m.add(words, user_id="kim")["results"]) == cap
        assert any(f"the _Chatty found {cap * 2} facts in one turn" in r.getMessage() for r in caplog.records)


def test_the_heuristic_reconciler_compares_a_fact_with_its_own_candidates(monkeypatch) -> None:
    """Each fact was compared with the candidates of every other fact, and with every
    earlier fact of the call: the work grew with the square of the facts."""
    calls = {"_captured_by": 0, "_contradicts": 0}

    def counting(name: str):
        rule = getattr(heuristic, name)

        def counted(*args):
            calls[name] += 1
            return rule(*args)

        return counted

    for name in calls:
        monkeypatch.setattr(heuristic, name, counting(name))
    n = 400
    facts = [Fact(f"Likes hobby{i}") for i in range(n)]
    existing = [[Existing(f"m{j}", f"Likes hobby{j}", 0.9) for j in range(max(0, i - 2), min(n, i + 3))] for i in range(n)]
    decisions = HeuristicReconciler().reconcile(facts, existing)
    assert [(d.action.value, d.target_id) for d in decisions] == [("NONE", f"m{i}") for i in range(n)]
    assert max(calls.values()) <= 8 * n, calls


def test_a_fact_still_finds_its_text_or_its_slot_among_other_facts_candidates() -> None:
    decisions = HeuristicReconciler().reconcile(
        [Fact("Likes tea"), Fact("Lives in Munich"), Fact("Plays chess")],
        [[Existing("m1", "Lives in Berlin", 0.3)], [Existing("m2", "Plays chess", 0.2)], [Existing("m3", "Likes tea", 0.9)]],
    )
    assert [(d.action.value, d.text, d.target_id) for d in decisions] == [
        ("NONE", "Likes tea", "m3"), ("UPDATE", "Lives in Munich", "m1"), ("NONE", "Plays chess", "m2")]


# Merged metadata keeps to the limits ------------------------------------------------


def test_verbatim_metadata_merged_past_the_limit_is_refused_naming_the_message(backend) -> None:
    """The call's metadata and a message's, each within the limit, were stored merged
    past it: the memory then could not be updated, nor its export imported."""
    with Memory(backend.target, embedder="hashing") as m:
        limit = m.config.max_metadata_bytes
        half = {"a": "x" * (limit // 2 + 100)}
        with pytest.raises(ValidationError) as refused:
            m.add([{"role": "user", "content": "Fine words"},
                   {"role": "user", "content": "Notes from the meeting", "metadata": {"b": "y" * (limit // 2 + 100)}}],
                  user_id="kim", metadata=half, infer=False)
        assert refused.value.field == "messages[1].metadata"
        assert "merged with the call's metadata" in str(refused.value) and f"{limit:,}" in str(refused.value)
        assert m.get_all(user_id="kim")["results"] == []  # nothing written, not even the first message
        kept = m.add([{"role": "user", "content": "Notes", "metadata": {"b": "y"}}], user_id="kim", metadata=half, infer=False)
        stored = m.get(kept["results"][0]["id"], user_id="kim")["metadata"]
        assert stored["b"] == "y" and metadata_bytes(stored) <= limit


@pytest.mark.parametrize("limit", [2_000, 200_000])
def test_the_merge_keeps_to_the_memorys_configured_limit(tmp_path, limit) -> None:
    with Memory(str(tmp_path / "m.db"), embedder="hashing", max_metadata_bytes=limit) as m:
        half = {"a": "x" * (limit // 2 + 100)}
        with pytest.raises(ValidationError) as refused:
            m.add([{"role": "user", "content": "Notes", "metadata": {"b": "y" * (limit // 2 + 100)}}],
                  user_id="kim", metadata=half, infer=False)
        assert refused.value.field == "messages[0].metadata" and f"{limit:,}" in str(refused.value)
        within = {"b": "y" * (limit // 2 - 200)}
        assert m.add([{"role": "user", "content": "Notes", "metadata": within}], user_id="kim",
                     metadata={"a": "x" * (limit // 2 - 200)}, infer=False)["results"]


def test_a_reconciler_update_keeps_the_memorys_metadata_when_the_merge_is_too_large(backend) -> None:
    with Memory(backend.target, embedder="hashing") as m:
        limit = m.config.max_metadata_bytes
        m.add("I drink coffee.", user_id="kim", metadata={"a": "x" * (limit // 2 + 100)})
        result = m.add("I drink coffee with oat milk.", user_id="kim", metadata={"b": "y" * (limit // 2 + 100)})
        assert changes(result) == [("UPDATE", "Drinks coffee with oat milk")]
        memory = m.get(result["results"][0]["id"], user_id="kim")
        assert sorted(memory["metadata"]) == ["a"] and metadata_bytes(memory["metadata"]) <= limit
        m.update(memory["id"], memory["memory"], metadata={"c": 1}, user_id="kim")  # still updatable
        with Memory(backend.fresh(), embedder="hashing") as other:
            other.import_(list(m.export(user_id="kim")))  # and importable
            assert texts(other.get_all(user_id="kim")) == ["Drinks coffee with oat milk"]
        # A merge within the limit is still made.
        merged = m.add("I drink coffee with oat milk every morning.", user_id="kim", metadata={"d": 2})
        assert changes(merged) == [("UPDATE", "Drinks coffee with oat milk every morning")]
        assert sorted(m.get(merged["results"][0]["id"], user_id="kim")["metadata"]) == ["a", "c", "d"]


# A qualified negation deletes nothing -------------------------------------------------


@pytest.mark.parametrize(("said", "denied", "added"), [
    ("I love pizza.", "I don't like pineapple on pizza.", "Does not like pineapple on pizza"),
    ("I drink coffee.", "I don't drink coffee after 6pm.", "Does not drink coffee after 6pm"),
    ("I play tennis.", "I don't play tennis on weekdays.", "Does not play tennis on weekdays"),
])
def test_a_negation_that_narrows_a_fact_is_added_beside_it(backend, said: str, denied: str, added: str) -> None:
    with Memory(backend.target, embedder="hashing") as m:
        (first,) = [r["memory"] for r in m.add(said, user_id="kim")["results"]]
        assert changes(m.add(denied, user_id="kim")) == [("ADD", added)]
        assert texts(m.get_all(user_id="kim")) == sorted([first, added])


def test_a_plain_negation_still_deletes_what_it_contradicts(backend) -> None:
    with Memory(backend.target, embedder="hashing") as m:
        m.add("I love pizza. I drink coffee with oat milk.", user_id="kim")
        assert changes(m.add("I became vegan and no longer eat pizza.", user_id="kim")) == [
            ("ADD", "Became vegan"), ("DELETE", "Loves pizza"), ("ADD", "No longer eats pizza")]
        assert changes(m.add("I no longer drink coffee.", user_id="kim")) == [
            ("DELETE", "Drinks coffee with oat milk"), ("ADD", "No longer drinks coffee")]


# A LangGraph store's item is no stored fact ------------------------------------------


def test_a_fact_is_stored_beside_a_langgraph_item_of_the_same_text(backend) -> None:
    """The fact was taken as already stored by the app's item, and was gone with it."""
    from memorist.integrations.langgraph import MemoristStore

    with Memory(backend.target, embedder="hashing") as m:
        store = MemoristStore(m)
        store.put(("sam", "prefs"), "k1", {"text": "Likes tea"})
        assert changes(m.add("I like tea.", user_id="sam", agent_id="langgraph")) == [("ADD", "Likes tea")]
        assert changes(m.add("I like tea.", user_id="sam", agent_id="langgraph")) == []  # the fact itself is known
        store.delete(("sam", "prefs"), "k1")
        assert texts(m.get_all(user_id="sam", agent_id="langgraph")) == ["Likes tea"]
        assert [r["memory"] for r in m.search("tea", user_id="sam", agent_id="langgraph")["results"]] == ["Likes tea"]


# An UPDATE makes no second copy ---------------------------------------------------------


def _update_tea_to_green_tea(request) -> dict:
    """The model's decision: UPDATE the memory shown as "Likes tea" to "Likes green tea"."""
    shown = request.messages[-1].content
    index = next(line.split("[")[1].split("]")[0] for line in shown.splitlines() if line.endswith('"Likes tea"'))
    return {"memory": [{"event": "UPDATE", "id": index, "text": "Likes green tea", "old_memory": "Likes tea", "fact": 0}]}


def test_a_model_update_to_a_text_already_stored_retires_its_target(backend) -> None:
    """The store held "Likes tea" and "Likes green tea"; the model updated the first to
    the second's text, and two identical memories were left."""
    model = ScriptedLLM([{"facts": [{"text": "Likes green tea"}]}, _update_tea_to_green_tea])
    with Memory(backend.target, embedder="hashing", llm=model) as m:
        m.add("Likes tea", user_id="kim", infer=False)
        green = m.add("Likes green tea", user_id="kim", infer=False)["results"][0]["id"]
        result = m.add([{"role": "user", "content": "I like green tea now."}], user_id="kim")
        assert changes(result) == [("DELETE", "Likes tea")]
        assert [(r["id"], r["memory"]) for r in m.get_all(user_id="kim")["results"]] == [(green, "Likes green tea")]
        (deleted,) = [e for e in m.events(user_id="kim") if e["event"] == "DELETE"]
        assert "already holds" in json.dumps(deleted)
        m.rollback(deleted["seq"], user_id="kim")  # undone, the old memory is back
        assert texts(m.get_all(user_id="kim")) == ["Likes green tea", "Likes tea"]


def test_an_update_to_a_text_an_expired_memory_holds_brings_that_memory_back_in_view(backend) -> None:
    """Under a decay window, the memory already holding the text may have expired: the
    UPDATE retired its target and the user's fact was in view nowhere."""
    model = ScriptedLLM([{"facts": [{"text": "Likes green tea"}]}, _update_tea_to_green_tea])
    now = time.time()
    with Memory(backend.target, embedder="hashing", llm=model, decay_days=30) as m:
        m.add("Likes green tea", user_id="kim", infer=False, timestamp=now - 90 * 86_400)  # out of the window
        m.add("Likes tea", user_id="kim", infer=False, timestamp=now - 5 * 86_400)
        assert texts(m.get_all(user_id="kim")) == ["Likes tea"]
        result = m.add([{"role": "user", "content": "I like green tea now."}], user_id="kim")
        assert changes(result) == [("DELETE", "Likes tea")]
        assert texts(m.get_all(user_id="kim")) == ["Likes green tea"]

