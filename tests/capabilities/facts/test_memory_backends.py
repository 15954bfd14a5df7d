"""The public API through ``memorist.Memory`` on every storage backend.

The Memory tests that depend on what the store keeps and how it isolates writers,
run once per backend (``backend``, tests/conftest.py): ``memory_target`` is a SQLite
file or the URL of a fresh PostgreSQL database. Everything uses the hashing embedder.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from memorist import EmbedderMismatchError, Memory, NotFoundError, ValidationError

DAY = 86_400.0
CITIES = ["Oslo", "Prague", "Lisbon", "Vienna", "Madrid", "Dublin"]


@pytest.fixture
def memory_target(backend) -> str:
    return backend.target


@pytest.fixture
def opened(memory_target: str) -> Iterator[Callable[..., Memory]]:
    """``opened(**options)``: a Memory on the test's store (closed after the test)."""
    memories: list[Memory] = []

    def _open(**options) -> Memory:
        options.setdefault("embedder", "hashing")
        m = Memory(memory_target, **options)
        memories.append(m)
        return m

    yield _open
    for m in memories:
        m.close()


@pytest.fixture
def memory(opened) -> Memory:
    return opened()


def texts(result) -> list[str]:
    return [r["memory"] for r in result["results"]]


def ids(result) -> set[str]:
    return {r["id"] for r in result["results"]}


def remember(m: Memory, text: str, **kw) -> str:
    kw.setdefault("user_id", "alex")
    return m.add(text, infer=False, **kw)["results"][0]["id"]


def run_threads(work: Callable[[int], None], n: int) -> None:
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a writer did not finish"
    assert not errors, errors


# add, search, get ------------------------------------------------------------------


def test_verbatim_add_then_search_get_and_get_all(memory):
    mid = remember(memory, "I like sushi", metadata={"category": "food", "note": "ünïcode ✓"})
    remember(memory, "Plays chess on weekends")
    [best, *_] = memory.search("sushi", user_id="alex")["results"]
    assert (best["id"], best["memory"], best["user_id"]) == (mid, "I like sushi", "alex")
    assert best["metadata"] == {"category": "food", "note": "ünïcode ✓"}
    assert 0 < best["score"] <= 1.0
    item = memory.get(mid)
    assert (item["id"], item["memory"], item["metadata"]) == (mid, "I like sushi", {"category": "food", "note": "ünïcode ✓"})
    assert texts(memory.get_all(user_id="alex")) == ["Plays chess on weekends", "I like sushi"]  # newest first
    assert texts(memory.search("chess weekends", user_id="alex", limit=1)) == ["Plays chess on weekends"]


def test_inferred_add_extracts_and_the_same_fact_is_kept_once(memory):
    out = memory.add("Hi, I'm Alex. I'm a vegetarian and allergic to nuts.", user_id="alex")
    assert sorted(texts(out)) == ["Allergic to nuts", "Is vegetarian", "Name is Alex"]
    again = memory.add("I'm a vegetarian.", user_id="alex")
    assert again["results"] == []  # already known
    assert sorted(texts(memory.get_all(user_id="alex"))) == ["Allergic to nuts", "Is vegetarian", "Name is Alex"]
    assert texts(memory.search("what does alex eat? vegetarian", user_id="alex", limit=1)) == ["Is vegetarian"]
    assert [e["event"] for e in memory.events(user_id="alex")].count("TURN") == 2


def test_a_contradiction_replaces_the_old_fact(memory):
    memory.add("I live in Oslo.", user_id="alex")
    memory.add("I live in Prague.", user_id="alex")
    lives = [t for t in texts(memory.get_all(user_id="alex")) if t.startswith("Lives in")]
    assert lives == ["Lives in Prague"]


def test_a_turn_with_nothing_to_remember_then_search_and_add(memory):
    """A first turn that yields no memory makes the space but no vector; searching
    it, and adding to it afterwards, must work."""
    assert memory.add("ok thanks", user_id="alex")["results"] == []
    assert memory.search("vegetarian", user_id="alex")["results"] == []
    assert memory.add("I'm a vegetarian.", user_id="alex")["results"][0]["memory"] == "Is vegetarian"
    assert memory.search("vegetarian", user_id="alex")["results"][0]["memory"] == "Is vegetarian"


def test_filters_through_search_and_get_all(memory):
    remember(memory, "Likes spicy ramen", metadata={"category": "food", "priority": 3})
    remember(memory, "Likes sushi", metadata={"category": "food", "priority": 1})
    remember(memory, "Works as a nurse", metadata={"category": "work", "priority": 2})
    remember(memory, "Likes hiking")
    assert set(texts(memory.search("likes", user_id="alex", filters={"category": "food"}, limit=10))) == {
        "Likes spicy ramen", "Likes sushi"}
    assert set(texts(memory.get_all(user_id="alex", filters={"priority": {"gte": 2}}))) == {
        "Likes spicy ramen", "Works as a nurse"}
    assert texts(memory.get_all(user_id="alex", filters={"category": "work"})) == ["Works as a nurse"]
    assert len(memory.get_all(user_id="alex", limit=2)["results"]) == 2


def test_decay_hides_memories_not_updated_for_n_days(opened):
    m = opened()
    old = remember(m, "Old note about gardening", timestamp=time.time() - 10 * DAY)
    new = remember(m, "New note about gardening")
    decayed = opened(decay_days=6)
    assert ids(decayed.get_all(user_id="alex")) == {new}
    assert ids(decayed.search("note about gardening", user_id="alex", limit=10)) == {new}
    assert ids(m.search("note about gardening", user_id="alex", limit=10)) == {old, new}
    with pytest.raises(NotFoundError):  # as get: a write by id never brings it back
        decayed.update(old, "Old note about gardening, revisited")
    assert ids(decayed.get_all(user_id="alex")) == {new}
    m.update(old, "Old note about gardening, revisited")  # a Memory that sees it renews it
    assert ids(decayed.get_all(user_id="alex")) == {old, new}


# update, delete, history, reset ------------------------------------------------------------


def test_update_changes_the_text_everywhere_and_logs_it(memory):
    mid = remember(memory, "Likes sushi", metadata={"category": "food"})
    before = memory.get(mid)
    out = memory.update(mid, "Loves sushi", metadata={"source": "email"})
    assert (out["memory"], out["event"]) == ("Loves sushi", "UPDATE")
    after = memory.get(mid)
    assert after["memory"] == "Loves sushi"
    assert after["created_at"] == before["created_at"]
    assert after["metadata"] == {"category": "food", "source": "email"}
    assert [(e["event"], e["old_memory"], e["new_memory"]) for e in memory.history(mid)] == [
        ("ADD", None, "Likes sushi"), ("UPDATE", "Likes sushi", "Loves sushi")]
    assert texts(memory.search("loves", user_id="alex")) == ["Loves sushi"]
    assert texts(memory.search("sushi", user_id="alex", limit=10)) == ["Loves sushi"]


def test_deleted_memories_are_never_returned(memory):
    keep = remember(memory, "Likes sushi")
    gone = remember(memory, "Likes ramen")
    assert memory.delete(gone)["event"] == "DELETE"
    assert ids(memory.search("Likes ramen", user_id="alex", limit=50)) == {keep}
    assert ids(memory.get_all(user_id="alex")) == {keep}
    for call in (memory.get, memory.delete, lambda mid: memory.update(mid, "Likes udon")):
        with pytest.raises(NotFoundError):
            call(gone)
    assert [(e["event"], e["old_memory"], e["new_memory"]) for e in memory.history(gone)] == [
        ("ADD", None, "Likes ramen"), ("DELETE", "Likes ramen", None)]
    memory.reindex()
    assert ids(memory.search("ramen", user_id="alex", limit=50)) <= {keep}


def test_delete_all_of_one_user_leaves_the_other_untouched(memory):
    a = {remember(memory, t, user_id="alex") for t in ("Likes sushi", "Plays chess")}
    b = {remember(memory, t, user_id="bob") for t in ("Likes sushi", "Plays the violin")}
    assert memory.delete_all(user_id="alex")["deleted"] == 2
    assert memory.get_all(user_id="alex")["results"] == []
    assert memory.search("sushi", user_id="alex")["results"] == []
    assert ids(memory.get_all(user_id="bob")) == b
    for mid in a:
        with pytest.raises(NotFoundError):
            memory.get(mid)
    with pytest.raises(ValidationError):
        memory.delete_all()
    assert ids(memory.get_all(user_id="bob")) == b


def test_reset_empties_the_store_but_keeps_it_usable(memory):
    remember(memory, "Likes sushi")
    memory.reset()
    assert memory.get_all(user_id="alex")["results"] == []
    assert memory.events(user_id="alex") == []
    assert memory.stats()["memories"] == 0
    remember(memory, "Plays chess")
    assert texts(memory.search("chess", user_id="alex")) == ["Plays chess"]


def test_events_and_stats(memory):
    a = remember(memory, "Likes sushi")
    remember(memory, "Plays the violin", user_id="bob")
    memory.search("sushi", user_id="alex")
    memory.delete(a)
    events = memory.events(user_id="alex")
    assert {"TURN", "ADD", "DELETE"} <= {e["event"] for e in events}
    assert {e["user_id"] for e in events} == {"alex"}
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    later = memory.events(user_id="alex", since=events[0]["seq"])
    assert [e["seq"] for e in later] == [e["seq"] for e in events[1:]]
    stats = memory.stats()
    # alex's only memory is deleted: alex keeps a history, and is no user counted
    assert (stats["memories"], stats["deleted"], stats["users"]) == (1, 1, 1)
    assert (stats["embedder"], stats["dim"]) == ("hashing-v1-384", 384)


def test_resolve_id_by_prefix(memory):
    mid = remember(memory, "Likes sushi")
    assert memory.resolve_id(mid[:8]) == mid
    memory.delete(mid)
    with pytest.raises(NotFoundError):
        memory.resolve_id(mid[:8])
    assert memory.resolve_id(mid[:8], include_deleted=True) == mid


# isolation -----------------------------------------------------------------------------------


def test_users_never_see_each_other(memory):
    a = {remember(memory, t, user_id="alex") for t in ("Likes sushi", "Plays chess")}
    b = {remember(memory, t, user_id="bob") for t in ("Likes sushi", "Plays the violin")}
    for query in ("Likes sushi", "Plays the violin", "chess", "violin"):
        assert ids(memory.search(query, user_id="alex", limit=50)) <= a
        assert ids(memory.search(query, user_id="bob", limit=50)) <= b
    assert ids(memory.get_all(user_id="alex")) == a
    assert {e["memory_id"] for e in memory.events(user_id="alex") if e["memory_id"]} == a
    violin = next(iter(ids(memory.search("violin", user_id="bob", limit=1))))
    with pytest.raises(NotFoundError):
        memory.get(violin, user_id="alex")
    assert memory.get(violin, user_id="bob")["memory"] == "Plays the violin"


def test_agent_and_run_scopes_narrow_results(memory):
    x = remember(memory, "Likes sushi", agent_id="chef")
    y = remember(memory, "Likes sushi rolls", agent_id="travel", run_id="trip-1")
    assert ids(memory.search("sushi", user_id="alex")) == {x, y}
    assert ids(memory.search("sushi", user_id="alex", agent_id="chef")) == {x}
    assert ids(memory.search("sushi", run_id="trip-1")) == {y}
    assert ids(memory.get_all(agent_id="travel")) == {y}


def test_tenants_of_one_store_are_isolated(opened):
    acme, globex = opened(tenant_id="acme"), opened(tenant_id="globex")
    mid = remember(acme, "Likes sushi")
    assert globex.get_all(user_id="alex")["results"] == []
    assert globex.search("sushi", user_id="alex")["results"] == []
    assert globex.events(user_id="alex") == []
    for call in (globex.get, globex.delete, globex.history):
        with pytest.raises(NotFoundError):
            call(mid)
    remember(globex, "Plays chess")
    assert texts(acme.get_all(user_id="alex")) == ["Likes sushi"]
    assert texts(globex.get_all(user_id="alex")) == ["Plays chess"]


# durability and embedders ------------------------------------------------------------------


def test_everything_survives_close_and_reopen(opened, memory_target):
    m = opened()
    a = remember(m, "Likes sushi", metadata={"category": "food"})
    b = remember(m, "Plays chess")
    c = remember(m, "Plays the violin", user_id="bob")
    m.update(b, "Plays chess every Sunday")
    m.delete(c)
    m.search("sushi", user_id="alex")
    m.close()
    with Memory(memory_target) as again:  # the store's own embedder
        assert (again.embedder.name, again.embedder.dim) == ("hashing-v1-384", 384)
        assert ids(again.get_all(user_id="alex")) == {a, b}
        assert again.get(b)["memory"] == "Plays chess every Sunday"
        assert again.get(a)["metadata"] == {"category": "food"}
        assert texts(again.search("sushi", user_id="alex"))[0] == "Likes sushi"
        assert texts(again.search("chess sunday", user_id="alex"))[0] == "Plays chess every Sunday"
        assert again.get_all(user_id="bob")["results"] == []
        assert [e["event"] for e in again.history(b)] == ["ADD", "UPDATE"]
        assert [e["event"] for e in again.history(c)] == ["ADD", "DELETE"]
        assert "RETRIEVE" in {e["event"] for e in again.events(user_id="alex")}


def test_another_embedder_is_refused_and_reindex_switches(opened, memory_target):
    m = opened()
    remember(m, "Likes sushi")
    gone = remember(m, "Drives a blue car")
    m.delete(gone)
    with pytest.raises(EmbedderMismatchError, match="hashing-v1-256"):
        Memory(memory_target, embedder="hashing:256")
    assert m.reindex(embedder="hashing:256")["re_embedded"] == 1
    assert texts(m.search("sushi", user_id="alex")) == ["Likes sushi"]
    m.close()
    again = opened(embedder="hashing:256")
    assert texts(again.search("Likes sushi", user_id="alex", limit=1)) == ["Likes sushi"]
    remember(again, "Plays chess")
    assert texts(again.search("chess", user_id="alex", limit=1)) == ["Plays chess"]


@pytest.mark.parametrize("other", ["hashing:256", "hashing-other"])
def test_a_process_open_while_another_re_embeds_never_writes_the_old_embedders_vectors(opened, other):
    """A process checked the store's embedder once: after another re-embedded the store
    (another dimension, or the same), its adds still wrote vectors of the old one, and
    every search of the scope failed, or compared two models' vectors in silence."""
    from memorist.embed import HashingEmbedder

    running = opened()
    remember(running, "Likes sushi")
    remember(running, "Plays chess")
    elsewhere = opened(embedder="hashing")
    new = HashingEmbedder(dim=256) if other == "hashing:256" else HashingEmbedder()
    if other == "hashing-other":
        new.name = "hashing-other"  # the same dimension, another model
    elsewhere.store.reindex(new.embed, name=new.name, dim=new.dim)
    with pytest.raises(EmbedderMismatchError, match=f"holds vectors of {new.name}"):
        running.add("Walks the dog", user_id="alex", infer=False)
    assert texts(elsewhere.get_all(user_id="alex")) and "Walks the dog" not in texts(elsewhere.get_all(user_id="alex"))
    with pytest.raises(EmbedderMismatchError, match=f"holds vectors of {new.name}"):
        running.search("sushi", user_id="alex")  # its query's vector is the old model's


# concurrent writers ----------------------------------------------------------------------------


def lives_in(m: Memory, user: str) -> list[str]:
    return [t for t in texts(m.get_all(user_id=user)) if t.startswith("Lives in")]


def test_threads_adding_contradicting_facts_leave_one(memory):
    def writer(i: int) -> None:
        for slot in range(4):
            memory.add(f"I live in {CITIES[i]}.", user_id=f"slot{slot}")

    run_threads(writer, 6)
    assert [len(lives_in(memory, f"slot{slot}")) for slot in range(4)] == [1] * 4


def test_writers_on_separate_instances_adding_contradicting_facts_leave_one(opened):
    """As several processes would: each writer has its own Memory on the store."""
    writers = [opened() for _ in range(4)]
    barrier = threading.Barrier(4)

    def writer(i: int) -> None:
        barrier.wait(30)
        for slot in range(4):
            writers[i].add(f"I live in {CITIES[i]}.", user_id=f"slot{slot}")

    run_threads(writer, 4)
    reader = opened()
    assert [len(lives_in(reader, f"slot{slot}")) for slot in range(4)] == [1] * 4
    assert all(len(reader.events(user_id=f"slot{slot}")) >= 4 for slot in range(4))  # every turn logged


def test_the_same_facts_from_many_writers_are_kept_once(opened):
    writers = [opened() for _ in range(4)]
    barrier = threading.Barrier(4)
    foods = ["peanuts", "shellfish", "gluten", "kiwi", "sesame"]

    def writer(i: int) -> None:
        for food in foods:
            barrier.wait(30)
            writers[i].add(f"I'm allergic to {food}.", user_id="alex")

    run_threads(writer, 4)
    assert sorted(texts(opened().get_all(user_id="alex"))) == sorted(f"Allergic to {food}" for food in foods)
