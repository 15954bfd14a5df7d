"""Operations undone newest first return the store to before the oldest, on both
backends: chains of playbook merges, curations and minutes evaluations (an operation
writes several events; once it is rolled back none of them stands in the way of an
earlier one), bookkeeping written since (an energy decay, a fact's validity renewed)
that does not take the undo away, and a consolidation that keeps what matters of its
sources: their energy, their counters as they are, their speakers and dates."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "playbooks"))  # the mapped embedder

from ace_helpers import MappedEmbedder  # noqa: E402

from memorist import Memory, Playbook  # noqa: E402
from memorist.errors import ConflictError  # noqa: E402
from memorist.model import Status  # noqa: E402

at, axis = MappedEmbedder.at, MappedEmbedder.axis
T0 = 1_700_000_000.0  # minutes are dated in the past


def strategies(mem: Memory, user: str = "u") -> list[dict]:
    return sorted((x for x in mem.export(user_id=user) if x["kind"] == "strategy"), key=lambda x: x["id"])


# chains of multi-event operations ---------------------------------------------------------
def test_a_cleanup_that_merged_three_bullets_is_undone_merge_by_merge_newest_first(backend) -> None:
    embedder = MappedEmbedder({"Old lesson": axis(0), "New lesson": at(0.95), "Third lesson": at(0.96, 0, 2)})
    with Memory(backend.target, embedder=embedder) as mem:
        book = Playbook(mem, reinforce_threshold=0.99, dedup_threshold=0.99)
        for conv, lesson in (("c1", "Old lesson"), ("c2", "New lesson"), ("c3", "Third lesson")):
            book.turn("sam", conv).learn(question="q", lessons=[{"content": lesson, "type": "strategy"}], topic="fractions")
        before = {b.id: (b.content, b.helpful, b.harmful, b.tags, b.created_at) for b in book.bullets("sam")}
        assert len(before) == 3
        assert book.cleanup("sam")["merged"] == 2
        older, newer = sorted((e for e in mem.store.events(None, ops=["merge"]) if "undo" in e.payload), key=lambda e: e.seq)
        # The newer merge changed the survivor after the older one: it must go first, and
        # the refusal names its undo record, not the event of the survivor it wrote.
        with pytest.raises(ConflictError, match=f"roll event {newer.seq} back first"):
            mem.rollback(older.seq)
        mem.rollback(newer.seq)
        mem.rollback(older.seq)
        assert {b.id: (b.content, b.helpful, b.harmful, b.tags, b.created_at) for b in book.bullets("sam")} == before
        with pytest.raises(ConflictError, match="already rolled back"):
            mem.rollback(older.seq)


def _undone_newest_first(mem: Memory, first: Any, second: Any, middle: Any, before: Any) -> None:
    """The older curation cannot go first (the refusal names the newer); the newer, then
    the older, give back the playbook as it was before each."""
    with pytest.raises(ConflictError, match=f"roll event {second.seq} back first"):
        mem.rollback(first.seq, user_id="u")
    mem.rollback(second.seq, user_id="u")
    assert strategies(mem) == middle
    mem.rollback(first.seq, user_id="u")
    assert strategies(mem) == before


def test_curations_that_replaced_a_playbook_are_undone_newest_first(backend) -> None:
    with Memory(backend.target, embedder="hashing") as mem:
        mem.learning.update_playbook([{"pattern": "Validate the input before calling the API", "category": "helpful"},
                                      {"pattern": "Retry with backoff on 429", "category": "helpful"}], "p", user_id="u")
        before = strategies(mem)
        mem.learning.update_playbook([{"pattern": "Log every request", "category": "helpful"}], "p", False, user_id="u")
        middle = strategies(mem)
        mem.learning.update_playbook([{"pattern": "Cache the answers for an hour", "category": "helpful"}], "p", False, user_id="u")
        first, second = sorted(mem.store.events(None, ops=["curation"]), key=lambda e: e.seq)
        _undone_newest_first(mem, first, second, middle, before)


def test_a_curation_that_reinforced_what_an_earlier_one_made_is_undone_first(backend) -> None:
    with Memory(backend.target, embedder="hashing") as mem:
        mem.learning.update_playbook([{"pattern": "Validate the input before calling the API", "category": "helpful"}], "p", user_id="u")
        before = strategies(mem)
        mem.learning.update_playbook([{"pattern": "Log every request", "category": "helpful"},
                                      {"pattern": "Cache the answers for an hour", "category": "helpful"}], "p", False, user_id="u")
        middle = strategies(mem)
        curation = mem.learning.curation
        curation.config = dataclasses.replace(curation.config, max_strategies=1)
        # "Log every request" is reinforced, the other dropped for room: one operation, three events.
        mem.learning.update_playbook([{"pattern": "Log every request", "category": "helpful"}], "p", user_id="u")
        first, second = sorted(mem.store.events(None, ops=["curation"]), key=lambda e: e.seq)
        assert [e.op for e in mem.store.history(second.payload["undo"]["before"][-1]["id"])][-1] == "reinforce"
        _undone_newest_first(mem, first, second, middle, before)


def test_a_playbook_returned_to_a_version_since_is_a_later_change_a_curation_s_rollback_does_not_overwrite(backend) -> None:
    with Memory(backend.target, embedder="hashing") as mem:
        mem.learning.update_playbook([{"pattern": "Validate the input before calling the API", "category": "helpful"}], "p", user_id="u")
        mem.learning.update_playbook([{"pattern": "Log every request", "category": "helpful"}], "p", False, user_id="u")  # v2
        mem.learning.update_playbook([{"pattern": "Cache the answers for an hour", "category": "helpful"}], "p", user_id="u")  # v3
        (curation,) = mem.store.events(None, ops=["curation"])
        mem.learning.rollback_playbook("p", 2, user_id="u")  # rewrites "Log every request", which the curation made
        with pytest.raises(ConflictError, match="cannot be rolled back"):
            mem.rollback(curation.seq, user_id="u")


def test_minutes_evaluations_are_undone_newest_first_back_to_before_the_first(backend) -> None:
    with Memory(backend.target, embedder="hashing") as mem:
        for note, days in [("the team agreed on weekly demos", 3), ("the team agreed on weekly demos", 2),
                           ("the team agreed on weekly demos", 1), ("ancient standup notes", 40), ("parser shipped", 5)]:
            mem.minutes.record("status", memory_note=note, now=T0 - days * 86_400, project_id="apollo", agent_id="coder")
        scope = mem.minutes.engine.scope("apollo")

        def index() -> dict:
            return {r.id: dataclasses.replace(r, scope=None) for st in Status for r in mem.store.list(scope, status=st)}

        before = index()
        first = mem.minutes.evaluate(project_id="apollo", now=T0)
        second = mem.minutes.evaluate(project_id="apollo", now=T0 + 30 * 86_400)  # prunes the first's survivor
        assert first["removed"] and second["removed"]
        with pytest.raises(ConflictError, match=f"roll event {second['rollback_id']} back first"):
            mem.rollback(first["rollback_id"], user_id="apollo")
        # The report's event_seq (its summary event) names the run as its rollback_id does.
        assert mem.rollback(second["event_seq"], user_id="apollo")["event_seqs"] == [second["rollback_id"]]
        # Any event of an operation names it: here the first evaluation's removal of a minute.
        (removal,) = [e for e in mem.store.history(first["removed"][0]["id"]) if e.op.startswith("minute_") and e.seq < first["rollback_id"]]
        assert mem.rollback(removal.seq, user_id="apollo")["event_seqs"] == [first["rollback_id"]]
        assert index() == before


# bookkeeping since does not take the undo away ------------------------------------------------
def test_a_fact_said_again_renews_its_validity_without_taking_away_the_undo(backend) -> None:
    with Memory(backend.target, embedder="hashing", decay_days=30) as mem:
        mem.add("Drinks green tea every morning", user_id="u", infer=False, importance=0.3)
        mem.add("Drinks green tea every morning at 7am", user_id="u", infer=False, importance=0.3)
        before = list(mem.export(user_id="u"))
        report = mem.learning.consolidate(user_id="u")
        merged = report["results"][0]["id"]
        mem.add("I drink green tea every morning at 7am", user_id="u")  # the merged fact, said again
        renewal = mem.store.history(merged)[-1]
        assert renewal.op == "update" and renewal.payload.get("bookkeeping") == "validity"
        mem.rollback(report["run_id"], user_id="u")
        assert list(mem.export(user_id="u")) == before
        assert mem.store.get(merged).status is Status.DELETED

        mem.add("I live in Berlin.", user_id="v")
        moved = mem.add("I live in Munich now.", user_id="v")["results"][0]
        assert moved["event"] == "UPDATE"
        update = mem.store.history(moved["id"])[-1]
        mem.add("I live in Munich now.", user_id="v")  # renews the updated memory
        assert mem.store.history(moved["id"])[-1].payload.get("bookkeeping") == "validity"
        mem.rollback(update.seq, user_id="v")
        assert [r["memory"] for r in mem.get_all(user_id="v")["results"]] == ["Lives in Berlin"]


def test_a_consolidated_memory_keeps_its_sources_energy_and_its_run_stays_reversible(backend) -> None:
    with Memory(backend.target, embedder="hashing", policy="energy") as mem:
        now = time.time()
        ids = [mem.add(text, user_id="u", infer=False, importance=0.3, timestamp=now - 10 * 3600)["results"][0]["id"]
               for text in ("Drinks green tea every morning", "Drinks green tea every morning at 7am")]
        for mid in ids:
            mem.tiers.boost(mid, 3.0, now=now, user_id="u")
        mem.tiers.maintain(now=now)  # boosted past 2.0: short-term
        sources = [mem.get(mid, user_id="u") for mid in ids]
        assert {s["tier"] for s in sources} == {"short_term"}
        before = list(mem.export(user_id="u"))
        report = mem.learning.consolidate(user_id="u")
        merged = mem.get(report["results"][0]["id"], user_id="u")
        # The sources' state, not a new memory's start energy decayed from the oldest's creation.
        assert merged["tier"] == "short_term"
        assert merged["energy"] == pytest.approx(max(s["energy"] for s in sources), abs=1e-3)
        assert merged["energy_at_last_decay"] == pytest.approx(merged["energy"], abs=1e-3)
        run = mem.tiers.maintain(now=now + 60)
        assert run["expired"] == 0 and run["decayed"] == 1  # its decay counts from the merge
        mem.rollback(report["run_id"], user_id="u")  # the decay since is bookkeeping
        assert list(mem.export(user_id="u")) == before


# what a consolidation keeps -------------------------------------------------------------------
def test_the_consolidated_memory_counts_retrievals_not_yet_flushed(backend) -> None:
    with Memory(backend.target, embedder="hashing") as mem:
        mem.add("Drinks green tea every morning", user_id="u", infer=False, importance=0.3)
        mem.add("Drinks green tea every morning at 7am", user_id="u", infer=False, importance=0.3)
        for _ in range(3):
            assert len(mem.search("green tea", user_id="u")["results"]) == 2  # buffered, not written
        report = mem.learning.consolidate(user_id="u")
        merged = mem.store.get(report["results"][0]["id"])
        assert merged.access_count == 6
        assert merged.last_access["semantic"] == 3
        mem.rollback(report["run_id"], user_id="u")
        assert [r.access_count for r in mem.store.list(mem._scope_filter("u", None, None))] == [3, 3]


def test_different_speakers_and_conflicting_metadata_are_never_merged(backend) -> None:
    with Memory(backend.target, embedder="hashing") as mem:
        def turn(name: str, text: str) -> None:
            mem.add([{"role": "user", "name": name, "content": text}], user_id="u", infer=False, importance=0.3)

        turn("Alice", "I visited Lisbon in May")
        turn("Bob", "I visited Lisbon in May with my sister")
        mem.add("I visited Lisbon in May with my sister", user_id="u", infer=False, importance=0.3)  # no speaker
        report = mem.learning.consolidate(user_id="u")
        assert report["merged_count"] == 0
        turn("Alice", "I visited Lisbon in May with my sister")
        report = mem.learning.consolidate(user_id="u")
        (merged,) = report["results"]
        item = mem.get(merged["id"], user_id="u")
        assert item["metadata"] == {"role": "user", "name": "Alice"}
        assert mem.store.get(merged["id"]).search_text.startswith("Alice: ")  # still found by who said it
        names = sorted(r["metadata"].get("name", "") for r in mem.get_all(user_id="u")["results"])
        assert names == ["", "Alice", "Bob"]

        for session in (1, 2):
            mem.add("Plays tennis on Sundays", user_id="w", infer=False, importance=0.3, metadata={"session": session})
        assert mem.learning.consolidate(user_id="w")["merged_count"] == 0


def test_what_happened_on_another_day_stays_apart_and_a_later_fact_s_date_is_kept(backend) -> None:
    with Memory(backend.target, embedder="hashing") as mem:
        day = 86_400
        for when in (T0, T0 + 3 * day):  # two turns, said on two days: two events
            mem.add([{"role": "user", "name": "Alice", "content": "I went to the gym yesterday"}], user_id="u",
                    infer=False, importance=0.3, timestamp=when)
        assert mem.learning.consolidate(user_id="u")["merged_count"] == 0
        mem.add("Drinks green tea every morning", user_id="v", infer=False, importance=0.3, timestamp=T0)
        mem.add("Drinks green tea every morning at 7am", user_id="v", infer=False, importance=0.3, timestamp=T0 + 3 * day)
        (merged,) = mem.learning.consolidate(user_id="v")["results"]
        record = mem.store.get(merged["id"])
        assert (record.created_at, record.updated_at) == (T0, T0 + 3 * day)  # first known, last said


def test_a_contradicted_memory_is_replaced_as_one_operation_whichever_event_is_rolled_back(backend) -> None:
    """The reconciler deletes a contradicted memory and adds the new fact: rolling back
    the DELETE restored the old memory beside the new one (two contradicting memories)
    and the ADD could not be rolled back at all ("reversible operation not found")."""
    for undo in ("ADD", "DELETE"):
        with Memory(backend.target, embedder="hashing") as mem:
            user = f"kim-{undo}"
            mem.add("I drink coffee.", user_id=user)
            changed = mem.add("I no longer drink coffee.", user_id=user)["results"]
            assert [(r["event"], r["memory"]) for r in changed] == [("DELETE", "Drinks coffee"), ("ADD", "No longer drinks coffee")]
            event = next(e["seq"] for e in mem.history(changed[0 if undo == "DELETE" else 1]["id"], user_id=user) if e["event"] == undo)
            done = mem.rollback(event, user_id=user)
            assert done["restored"] == [changed[0]["id"]] and done["retired"] == [changed[1]["id"]]
            assert [m["memory"] for m in mem.get_all(user_id=user)["results"]] == ["Drinks coffee"]
            other = next(e["seq"] for e in mem.history(changed[1 if undo == "DELETE" else 0]["id"], user_id=user) if e["event"] == ("ADD" if undo == "DELETE" else "DELETE"))
            with pytest.raises(ConflictError, match="already rolled back"):
                mem.rollback(other, user_id=user)  # the other event is of the same operation


def test_a_fact_that_contradicts_two_memories_is_undone_whole_from_any_of_its_events(backend) -> None:
    from memorist.model import Action, Decision
    from memorist.roles.base import Reconciler
    from memorist.roles.reconciler import HeuristicReconciler

    class Replacing(Reconciler):
        """Deletes every memory shown for a fact starting "Now", then adds the fact."""

        local = True

        def reconcile(self, facts, existing):
            if not facts[0].text.startswith("Now"):
                return HeuristicReconciler().reconcile(facts, existing)
            fact = facts[0]
            shown = [e for group in existing for e in group]
            return [*(Decision(Action.DELETE, e.text, target_id=e.id, old_text=e.text, fact=fact) for e in shown),
                    Decision(Action.ADD, fact.text, fact=fact)]

    for pick in (0, 1, 2):
        with Memory(backend.target, embedder="hashing", reconciler=Replacing()) as mem:
            user = f"sam-{pick}"
            mem.add("Likes tea", user_id=user, infer=False)
            mem.add("Works at a bank", user_id=user, infer=False)
            changed = mem.add("Now likes only coffee", user_id=user)["results"]
            assert [r["event"] for r in changed] == ["DELETE", "DELETE", "ADD"]
            event = [next(e["seq"] for e in mem.history(r["id"], user_id=user) if e["event"] == r["event"]) for r in changed][pick]
            mem.rollback(event, user_id=user)
            assert sorted(m["memory"] for m in mem.get_all(user_id=user)["results"]) == ["Likes tea", "Works at a bank"]


def test_a_replacement_groups_its_deletes_once_even_if_the_fact_is_added_twice() -> None:
    """A model reconciler may add one fact twice: its DELETEs are written once, after
    the first ADD (the second pass found them gone and dropped them from the results)."""
    from memorist.model import Action, Decision, Fact
    from memorist.pipelines.ingest import _replacements

    fact, other = Fact(text="Now likes coffee"), Fact(text="Lives in Oslo")
    decisions = [Decision(Action.DELETE, "Likes tea", target_id="a", fact=fact), Decision(Action.UPDATE, "Lives in Oslo", target_id="c", fact=other),
                 Decision(Action.ADD, fact.text, fact=fact), Decision(Action.DELETE, "Likes milk", target_id="b", fact=fact),
                 Decision(Action.ADD, fact.text, fact=fact)]
    assert _replacements(decisions) == [[1], [2, 0, 3], [4]]
