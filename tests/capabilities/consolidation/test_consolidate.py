"""memory.learning.consolidate on both backends: similar low-importance memories folded
into one that keeps every name, number and date; high importance never touched; the
run undone exactly by memory.rollback (exports compared)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "learning"))  # the mapped embedder

from learning_helpers import Mapped  # noqa: E402

from memorist import Memory, MemoryConfig  # noqa: E402
from memorist.errors import ConflictError, NotFoundError, StoreError, ValidationError  # noqa: E402
from memorist.policies.consolidation import key_terms  # noqa: E402

LOW = [
    "Drinks green tea every morning",
    "Drinks green tea every morning at 7am",
    "Met Sarah from Google on 2024-03-02",
    "Met Sarah from Google on 2024-03-02 in Zurich",
    "Plays tennis on Sundays",
    "Plays tennis on Sundays with Tom",
]
HIGH = ["Carries an EpiPen for a shellfish allergy", "Carries an EpiPen for a shellfish allergy at all times"]
OTHER = "Owns a red bicycle"


def fill(m: Memory, user: str = "u") -> None:
    for text in LOW:
        m.add(text, user_id=user, infer=False, importance=0.3)
    for text in HIGH:
        m.add(text, user_id=user, infer=False, importance=0.9)
    m.add(OTHER, user_id=user, infer=False, importance=0.2)


def texts(m: Memory, user: str = "u") -> set[str]:
    return {r["memory"] for r in m.get_all(user_id=user)["results"]}


def memories_only(m: Memory, user: str = "u") -> list[dict]:
    return list(m.export(user_id=user))


def test_similar_low_importance_memories_become_one_each_and_high_importance_ones_stay(mem) -> None:
    fill(mem)
    report = mem.learning.consolidate(user_id="u")
    assert (report["merged_count"], report["consolidated_count"], report["preserved_count"]) == (6, 3, 2)
    assert report["rejected"] == [] and report["run_id"]
    assert report["space_saved_bytes"] == sum(len(t.encode()) for t in LOW) - sum(len(r["memory"].encode()) for r in report["results"])
    left = texts(mem)
    assert set(HIGH) <= left and OTHER in left  # high importance untouched; an unlike memory untouched
    active = mem.get_all(user_id="u")["results"]
    assert sorted(r["kind"] for r in active) == ["consolidated"] * 3 + ["fact"] * 3
    merged = [r["memory"] for r in report["results"]]
    for text in LOW:  # every name, number and date of every source is in a merged memory
        assert any(all(t in m.casefold() for t in key_terms(text)) for m in merged), text
    assert any("7am" in m for m in merged) and any("Zurich" in m and "2024-03-02" in m for m in merged) and any("Tom" in m for m in merged)


def test_the_consolidated_memory_has_lineage_and_the_sources_are_archived_not_deleted(mem) -> None:
    fill(mem)
    report = mem.learning.consolidate(user_id="u")
    item = report["results"][0]
    record = mem.store.get(item["id"])
    assert record.kind.value == "consolidated" and record.lineage["consolidated_from"] == item["consolidated_from"]
    assert record.importance == 0.3
    for source_id in item["consolidated_from"]:
        source = mem.store.get(source_id)
        assert source.status.value == "archived" and source.lineage["consolidated_into"] == item["id"]
    assert [r["memory"] for r in mem.search("tennis", user_id="u")["results"]][0] == next(
        r["memory"] for r in report["results"] if "tennis" in r["memory"])


def test_nothing_at_or_above_the_threshold_is_touched_even_when_min_importance_reaches_it(mem) -> None:
    fill(mem)
    high = {r["id"] for r in mem.get_all(user_id="u")["results"] if r["memory"] in HIGH}
    report = mem.learning.consolidate(user_id="u", min_importance=1.0)
    assert report["preserved_count"] == 2 and report["merged_count"] == 6
    assert all(mem.store.get(i).status.value == "active" for i in high)
    without = mem.learning.consolidate(user_id="u", min_importance=1.0, preserve_high_importance=False)
    assert without["merged_count"] == 2 and all(mem.store.get(i).status.value == "archived" for i in high)
    assert any("EpiPen" in r["memory"] and "all times" in r["memory"] for r in without["results"])


def test_a_dry_run_reports_the_same_and_writes_nothing(mem) -> None:
    fill(mem)
    before = list(mem.export(user_id="u", events=True))
    dry = mem.learning.consolidate(user_id="u", dry_run=True)
    assert list(mem.export(user_id="u", events=True)) == before
    assert dry["run_id"] is None and dry["dry_run"] is True
    real = mem.learning.consolidate(user_id="u")
    for key in ("merged_count", "consolidated_count", "preserved_count", "space_saved_bytes"):
        assert dry[key] == real[key]
    assert [r["memory"] for r in dry["results"]] == [r["memory"] for r in real["results"]]


def test_rollback_restores_the_store_exactly_and_is_logged(mem) -> None:
    fill(mem)
    mem.search("tea", user_id="u")  # access counts and marks are part of what comes back
    mem.store.flush()
    before = memories_only(mem)
    report = mem.learning.consolidate(user_id="u")
    assert memories_only(mem) != before
    result = mem.rollback(report["run_id"], user_id="u")
    assert memories_only(mem) == before
    assert sorted(result["restored"]) == sorted(i for r in report["results"] for i in r["consolidated_from"])
    assert sorted(result["retired"]) == sorted(r["id"] for r in report["results"])
    logged = [e for e in mem.events(user_id="u") if e["event"] == "ROLLBACK"]
    assert logged and logged[-1]["payload"]["rolled_back"] == report["run_id"]
    with pytest.raises(ConflictError, match="already rolled back"):
        mem.rollback(report["run_id"], user_id="u")
    with pytest.raises(ConflictError, match="already rolled back"):
        mem.rollback(report["event_seqs"][0])


def test_the_seq_of_the_run_s_event_rolls_the_run_back_too(mem) -> None:
    fill(mem)
    before = memories_only(mem)
    report = mem.learning.consolidate(user_id="u")
    mem.rollback(str(report["event_seqs"][0]))
    assert memories_only(mem) == before


def test_rollback_refuses_unknown_ids_other_scopes_and_events_that_are_no_merge(mem) -> None:
    fill(mem)
    report = mem.learning.consolidate(user_id="u")
    with pytest.raises(NotFoundError):
        mem.rollback("consolidation-0000", user_id="u")
    with pytest.raises(NotFoundError):
        mem.rollback(report["run_id"], user_id="someone-else")
    with pytest.raises(NotFoundError):
        mem.rollback(1)  # the first event: no merge
    with pytest.raises(NotFoundError):
        mem.rollback(10**9)
    for bad in (None, True, 0, -3, 1.5, "", 10**30, "9" * 25):  # past 2**63 - 1 too
        with pytest.raises(ValidationError):
            mem.rollback(bad)
    assert mem.rollback(report["run_id"], user_id="u")["retired"]


def test_a_rollback_after_a_later_change_is_refused_naming_the_later_event(mem) -> None:
    fill(mem)
    report = mem.learning.consolidate(user_id="u")
    merged_id = report["results"][0]["id"]
    changed = mem.update(merged_id, "Drinks green tea every morning at 7am, with honey", user_id="u")
    assert changed["event"] == "UPDATE"
    later = [e for e in mem.history(merged_id, user_id="u") if e["event"] == "UPDATE"][-1]
    with pytest.raises(ConflictError) as info:
        mem.rollback(report["run_id"], user_id="u")
    assert f"event {later['seq']}" in str(info.value)
    assert "honey" in mem.get(merged_id, user_id="u")["memory"]  # nothing was rolled back


def test_runs_rolled_back_newest_first_return_the_store_to_before_the_first(mem) -> None:
    # A later run merged the first run's merged memory again: rolled back first, it
    # leaves nothing in the way of the first run's rollback.
    mem.add("Drinks green tea every morning", user_id="u", infer=False, importance=0.3)
    mem.add("Drinks green tea every morning at 7am", user_id="u", infer=False, importance=0.3)
    before = memories_only(mem)
    first = mem.learning.consolidate(user_id="u")
    mem.add("Drinks green tea every morning at 7am with honey", user_id="u", infer=False, importance=0.3)
    middle = memories_only(mem)
    second = mem.learning.consolidate(user_id="u")
    assert first["merged_count"] == 2 and second["merged_count"] == 2
    with pytest.raises(ConflictError, match=f"roll run {second['run_id']} back first"):
        mem.rollback(first["run_id"], user_id="u")
    mem.rollback(second["run_id"], user_id="u")
    assert memories_only(mem) == middle
    mem.rollback(first["run_id"], user_id="u")
    assert sorted(r["memory"] for r in memories_only(mem)) == sorted(
        [r["memory"] for r in before] + ["Drinks green tea every morning at 7am with honey"]
    )


def test_an_update_rolled_back_after_a_consolidation_of_its_memory_was_rolled_back(mem) -> None:
    mem.add("I live in California.", user_id="u")
    moved = mem.add("Actually I live in San Francisco now.", user_id="u")["results"][0]
    assert moved["event"] == "UPDATE"  # the reconciler's, reversible
    update = mem.history(moved["id"], user_id="u")[-1]
    mem.add("Lives in San Francisco now with Sam", user_id="u", infer=False, importance=0.3)
    report = mem.learning.consolidate(user_id="u", min_importance=0.6)
    assert report["merged_count"] == 2
    mem.rollback(report["run_id"], user_id="u")
    mem.rollback(update["seq"], user_id="u")
    assert "California" in mem.get(moved["id"], user_id="u")["memory"]


def test_a_later_change_that_cannot_be_rolled_back_is_named_as_such(mem) -> None:
    fill(mem)
    report = mem.learning.consolidate(user_id="u")
    merged_id = report["results"][0]["id"]
    mem.delete(merged_id, user_id="u")
    with pytest.raises(ConflictError, match="which cannot be rolled back") as info:
        mem.rollback(report["run_id"], user_id="u")
    assert "back first" not in str(info.value)


def test_a_group_with_a_source_longer_than_a_merged_memory_may_be_is_left_as_it_is(mem) -> None:
    long = "Drinks green tea every morning at 7am. " * 120  # 4,680 characters: over the 4,000 of a merge
    mem.add(long, user_id="u", infer=False, importance=0.3)
    mem.add("Drinks green tea every morning at 7am", user_id="u", infer=False, importance=0.3)
    report = mem.learning.consolidate(user_id="u")
    assert report["merged_count"] == 0
    (rejected,) = report["rejected"]
    assert f"a source has {len(long)} characters; the limit of a merged memory is 4000" in rejected["reason"]
    assert len(mem.get_all(user_id="u")["results"]) == 2


def test_memories_hidden_by_decay_are_not_merged_back_into_view(backend) -> None:
    with Memory(backend.target, embedder="hashing", decay_days=30) as m:
        old = m.add("Drinks green tea every morning at 7am", user_id="u", infer=False, importance=0.3,
                    timestamp=time.time() - 90 * 86_400)["results"][0]["id"]
        m.add("Drinks green tea every morning", user_id="u", infer=False, importance=0.3)
        report = m.learning.consolidate(user_id="u")
        assert report["considered"] == 1 and report["merged_count"] == 0
        assert texts(m) == {"Drinks green tea every morning"}
        assert m.store.get(old).status.value == "active"  # left as it was, not archived


def test_a_group_is_found_across_batches_and_never_by_chaining(backend) -> None:
    a, b, c = Mapped.axis(0), Mapped.at(0.92), Mapped.at(0.693)  # b is 0.92 from a and from c; a and c 0.69
    embedder = Mapped({"Alpha fact": a, "Beta fact": b, "Gamma fact": c, "Alpha again": Mapped.at(0.95)})
    config = MemoryConfig(consolidation_batch_size=2)
    with Memory(backend.target, embedder=embedder, config=config) as m:
        for text in ["Alpha fact", "Unrelated one", "Unrelated two", "Alpha again"]:  # the pair is two batches apart
            m.add(text, user_id="u", infer=False, importance=0.1)
        report = m.learning.consolidate(user_id="u")
        assert report["batches"] == 2 and report["merged_count"] == 2
        assert report["results"][0]["memory"] == "Alpha fact; Alpha again"
    with Memory(backend.fresh(), embedder=embedder) as m:
        for text in ["Alpha fact", "Beta fact", "Gamma fact"]:  # a~b, b~c, but a is not c's
            m.add(text, user_id="u", infer=False, importance=0.1)
        report = m.learning.consolidate(user_id="u")
        assert [r["memory"] for r in report["results"]] == ["Alpha fact; Beta fact"]
        assert "Gamma fact" in texts(m)


def test_memory_type_and_scope_choose_what_is_consolidated(mem) -> None:
    for text in ["Plays tennis on Sundays", "Plays tennis on Sundays with Tom"]:
        mem.add(text, user_id="u", agent_id="coach", infer=False, importance=0.2)
        mem.add(text, user_id="u", agent_id="doctor", infer=False, importance=0.2)
    assert mem.learning.consolidate(user_id="u", memory_type="preference")["merged_count"] == 0
    assert mem.learning.consolidate(user_id="u", agent_id="coach")["merged_count"] == 2
    by_user = mem.learning.consolidate(user_id="u", scope="user")
    assert by_user["merged_count"] == 2  # the doctor's pair, never mixed with the coach's merged one
    with pytest.raises(ValidationError, match="memory_type"):
        mem.learning.consolidate(user_id="u", memory_type="strategy")
    with pytest.raises(ValidationError, match="user_id"):
        mem.learning.consolidate()
    with pytest.raises(ValidationError, match="min_importance"):
        mem.learning.consolidate(user_id="u", min_importance=float("nan"))


def test_the_learning_loop_s_objects_are_never_consolidated(mem) -> None:
    mem.learning.update_playbook([{"pattern": "Validate the input first", "category": "helpful"},
                                  {"pattern": "Validate the input first, always", "category": "helpful"}], "p", user_id="u")
    report = mem.learning.consolidate(user_id="u", scope="user", min_importance=1.0, preserve_high_importance=False)
    assert report["considered"] == 0 and report["merged_count"] == 0


@pytest.mark.parametrize("background", [False, True])
def test_a_scope_over_the_automatic_threshold_is_consolidated_after_adds(backend, background) -> None:
    config = MemoryConfig(auto_consolidate_threshold=3, run_consolidation_async=background)
    with Memory(backend.target, embedder="hashing", config=config) as m:
        for text in LOW:
            m.add(text, user_id="u", infer=False, importance=0.3)
        assert m.learning.wait_consolidation(30)
        left = texts(m)
        assert len(left) == 3 and all(any(t in kept for kept in left) for t in ("7am", "Zurich", "Tom"))
        runs = [e for e in m.events(user_id="u") if e["event"] == "CONSOLIDATION"]
        assert runs and runs[0]["actor"] == "auto-consolidation"


@pytest.mark.parametrize("background", [False, True])
def test_a_run_only_add_over_the_threshold_is_stored_and_no_consolidation_is_tried(backend, background, caplog) -> None:
    """Consolidation acts on a user's or an agent's memories. A run-only add counted
    the whole tenant's memories, then its consolidation was refused: the add raised
    after it was stored (a retry stored it twice)."""
    config = MemoryConfig(auto_consolidate_threshold=3, run_consolidation_async=background)
    with Memory(backend.target, embedder="hashing", config=config) as m:
        for i in range(2):
            m.add(f"Other user's note number {i}", user_id="alice", infer=False)
        for i in range(4):
            m.add(f"Meeting note number {i}", run_id="chat-1", infer=False)
        assert m.learning.wait_consolidation(30)
        assert len(m.get_all(run_id="chat-1")["results"]) == 4
        assert not [e for e in m.events(run_id="chat-1") if e["event"] == "CONSOLIDATION"]
    assert "auto-consolidation" not in caplog.text


def test_an_automatic_consolidation_that_fails_leaves_the_add_stored_and_says_so(backend, monkeypatch, caplog) -> None:
    config = MemoryConfig(auto_consolidate_threshold=3, run_consolidation_async=False)
    with Memory(backend.target, embedder="hashing", config=config) as m:
        def broken(*_args, **_kwargs):
            raise StoreError("the disk is full")

        monkeypatch.setattr(m.learning, "_consolidate", broken)
        for text in LOW:
            m.add(text, user_id="u", infer=False, importance=0.3)  # none raises: each is stored
        assert texts(m) == set(LOW)
    assert "auto-consolidation (user_id='u', agent_id=None) failed after the add was stored" in caplog.text
    assert "the disk is full" in caplog.text


def test_the_automatic_threshold_is_off_by_default(mem) -> None:
    for text in LOW * 20:
        mem.add(text + ".", user_id="u", infer=False, importance=0.3)
    assert not [e for e in mem.events(user_id="u") if e["event"] == "CONSOLIDATION"]


def test_a_consolidation_counts_its_work_and_stops_when_its_caller_left(mem) -> None:
    """Comparing every candidate with every other is the run's work: the service's
    meter counts it (and charges the caller), and gives the run up when its caller
    has left, as it does a search. 50,000 candidates took 50 s that nothing saw."""
    from memorist.errors import CancelledCallError
    from memorist.work import Meter, metered

    fill(mem)
    with metered() as meter:
        mem.learning.consolidate(user_id="u", dry_run=True)
    assert meter.units >= len(LOW) + 1  # every candidate embedded and compared
    gone = Meter()
    gone.cancel()
    with metered(gone), pytest.raises(CancelledCallError):
        mem.learning.consolidate(user_id="u")
    assert texts(mem) == set(LOW) | set(HIGH) | {OTHER}  # nothing written


def test_a_merged_memory_expires_when_the_last_of_its_sources_would_have(mem) -> None:
    """Memories valid until a date (an import's ``valid_to``) merged: the merged memory
    holds what they said, so it expires with the last of them; with a source that
    never expires, it never does."""
    soon = time.time() + 3600
    at = "2026-01-01T00:00:00+00:00"
    stay = "Is staying at the Hilton in room 42 this week"
    mem.import_([
        {"memory": stay, "user_id": "u", "importance": 0.3, "valid_to": soon, "created_at": at},
        {"memory": stay + " with Bob", "user_id": "u", "importance": 0.3, "valid_to": soon + 60, "created_at": at},
        {"memory": "Plays tennis on Sundays", "user_id": "u", "importance": 0.3, "valid_to": soon, "created_at": at},
        {"memory": "Plays tennis on Sundays with Tom", "user_id": "u", "importance": 0.3, "created_at": at},
    ])
    report = mem.learning.consolidate(user_id="u")
    valid_to = {r["memory"]: mem.store.get(r["id"]).valid_to for r in report["results"]}
    assert valid_to == {stay + " with Bob": soon + 60, "Plays tennis on Sundays with Tom": None}


def test_runs_that_cannot_take_every_candidate_go_round_the_scope(backend) -> None:
    """A run takes at most 50 batches of candidates. Old memories that merge with
    nothing stay candidates: if every run began at the oldest again, newer
    duplicates past that window would never merge. The next run starts where the
    last one stopped."""
    with Memory(backend.target, embedder="hashing", config=MemoryConfig(consolidation_batch_size=2)) as m:
        at = time.time() - 3600
        for i in range(120):  # the window is 50 × 2 = 100 candidates
            m.add(f"Distinct note number {i} about topic{i} and code{i}x", user_id="u", infer=False, importance=0.3,
                  timestamp=at + i)
        m.add(LOW[0], user_id="u", infer=False, importance=0.3, timestamp=at + 200)
        m.add(LOW[1], user_id="u", infer=False, importance=0.3, timestamp=at + 201)
        first = m.learning.consolidate(user_id="u")
        assert (first["merged_count"], first["remaining"]) == (0, 22)
        assert m.learning.consolidate(user_id="u", dry_run=True)["merged_count"] == 2  # a preview marks nothing
        second = m.learning.consolidate(user_id="u")
        assert second["merged_count"] == 2 and LOW[1] in texts(m) and LOW[0] not in texts(m)
        m.rollback(second["run_id"], user_id="u")  # the window's mark is bookkeeping
        assert {LOW[0], LOW[1]} <= texts(m)
