"""MemoristStore against LangGraph's own API. LangGraph's wheel ships no store
conformance tests, so this suite runs the same operations on LangGraph's
InMemoryStore and on MemoristStore and asserts they agree, plus what only a durable
Memorist-backed store does."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import subprocess
import sys
import threading

import pytest
from langgraph.graph import START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from memorist import Memory, ValidationError
from memorist.integrations.langgraph import MemoristStore

ITEMS = [
    (("sam", "facts"), "pets", {"text": "Has a cat named Miso", "age": 3, "tags": ["pets"]}),
    (("sam", "facts"), "food", {"text": "Is vegetarian", "age": 10, "meta": {"source": "chat"}}),
    (("sam", "prefs", "ui"), "theme", {"text": "Prefers dark mode", "age": 5}),
    (("ann", "facts"), "pets", {"text": "Has two dogs", "age": 7}),
    (("ann", "notes", "ui"), "font", {"text": "Likes large fonts", "age": 1}),
]


@pytest.fixture
def stores(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        ours, theirs = MemoristStore(memory), InMemoryStore()
        for store in (ours, theirs):
            for ns, key, value in ITEMS:
                store.put(ns, key, value)
        yield ours, theirs, memory


def keys(items):
    return sorted((tuple(i.namespace), i.key) for i in items)


def test_it_is_a_langgraph_store(stores):
    ours, _, _ = stores
    assert isinstance(ours, BaseStore)


def test_get_put_delete_agree_with_langgraph(stores):
    ours, theirs, _ = stores
    for store in (ours, theirs):
        assert store.get(("sam", "facts"), "pets").value == ITEMS[0][2]
        assert store.get(("sam", "facts"), "nope") is None
        assert store.get(("sam",), "pets") is None  # a key lives in its exact namespace
        store.put(("sam", "facts"), "pets", {"text": "Has a cat named Miso and a hamster"})
        item = store.get(("sam", "facts"), "pets")
        assert item.value == {"text": "Has a cat named Miso and a hamster"} and item.updated_at >= item.created_at
        store.delete(("sam", "facts"), "pets")
        assert store.get(("sam", "facts"), "pets") is None
        store.put(("sam", "facts"), "food", None)  # a put of None deletes too
        assert store.get(("sam", "facts"), "food") is None
        store.delete(("sam", "facts"), "never-there")  # deleting a missing key is no error


@pytest.mark.parametrize(("prefix", "flt"), [
    (("sam",), None),
    (("sam", "facts"), None),
    (("sam", "prefs"), None),
    (("ann",), {"age": 7}),
    (("sam",), {"age": {"$gte": 4}}),
    (("sam",), {"age": {"$lt": 4}, "text": {"$ne": "x"}}),
    (("sam",), {"meta": {"source": "chat"}}),
    (("sam",), {"tags": ["pets"]}),
    ((), None),
    ((), {"age": {"$gt": 2, "$lte": 7}}),
])
def test_search_without_a_query_finds_what_langgraph_finds(stores, prefix, flt):
    ours, theirs, _ = stores
    assert keys(ours.search(prefix, filter=flt, limit=100)) == keys(theirs.search(prefix, filter=flt, limit=100))


def test_limit_and_offset_page_through_the_results(stores):
    ours, _, _ = stores
    every = ours.search(("sam",), limit=100)
    assert len(every) == 3
    pages = [ours.search(("sam",), limit=1, offset=i) for i in range(4)]
    assert [len(p) for p in pages] == [1, 1, 1, 0]
    assert keys([p[0] for p in pages[:3]]) == keys(every)
    # An offset past everything finds nothing, as LangGraph's own store answers (it was
    # refused, naming the limit).
    for offset in (10**6, 10**6 - 5, 10**9):
        assert ours.search(("sam",), limit=10, offset=offset) == []
        assert ours.search(("sam",), query="tea", limit=10, offset=offset) == []


@pytest.mark.parametrize("kwargs", [
    {},
    {"prefix": ("sam",)},
    {"suffix": ("ui",)},
    {"prefix": ("*", "facts")},
    {"max_depth": 1},
    {"max_depth": 2, "prefix": ("sam",)},
    {"limit": 2, "offset": 1},
])
def test_list_namespaces_agrees_with_langgraph(stores, kwargs):
    ours, theirs, _ = stores
    assert ours.list_namespaces(**kwargs) == theirs.list_namespaces(**kwargs)


def test_search_by_query_ranks_with_memorist(stores):
    ours, _, _ = stores
    found = ours.search(("sam",), query="cat named Miso", limit=2)
    assert found[0].key == "pets" and found[0].score is not None and found[0].score > 0.5
    assert all(i.namespace[0] == "sam" for i in found)
    with_filter = ours.search(("sam",), query="cat named Miso", filter={"age": {"$gt": 4}})
    assert "pets" not in {i.key for i in with_filter}
    ours.put(("sam", "facts"), "secret", {"text": "cat named Miso again"}, index=False)
    assert "secret" not in {i.key for i in ours.search(("sam",), query="cat named Miso")}
    assert ours.get(("sam", "facts"), "secret") is not None  # kept, only not indexed


def test_batch_and_abatch_run_every_op_in_order(stores):
    ours, _, _ = stores
    ops = [
        PutOp(("bob", "facts"), "k", {"text": "Plays chess"}),
        GetOp(("bob", "facts"), "k"),
        SearchOp(("bob",), None, 10, 0, "chess"),
        ListNamespacesOp((MatchCondition("prefix", ("bob",)),), None, 10, 0),
        PutOp(("bob", "facts"), "k", None),
        GetOp(("bob", "facts"), "k"),
    ]
    put, got, found, spaces, gone, missing = ours.batch(ops)
    assert put is None and got.value == {"text": "Plays chess"} and [i.key for i in found] == ["k"]
    assert spaces == [("bob", "facts")] and gone is None and missing is None
    result = asyncio.run(ours.abatch([PutOp(("bob", "x"), "a", {"text": "async"}), GetOp(("bob", "x"), "a")]))
    assert result[1].value == {"text": "async"}
    assert asyncio.run(ours.aget(("bob", "x"), "a")).key == "a"


def test_namespaces_are_scopes(stores):
    ours, _, memory = stores
    seen = memory.get_all(user_id="sam", agent_id="langgraph")["results"]
    assert {m["memory"] for m in seen} == {"Has a cat named Miso", "Is vegetarian", "Prefers dark mode"}
    assert memory.search("dogs", user_id="sam", agent_id="langgraph", threshold=0.5)["results"] == []
    # A memory of that scope written without the store is an item of ("sam",).
    added = memory.add("Speaks French", user_id="sam", agent_id="langgraph", infer=False)["results"][0]["id"]
    item = ours.get(("sam",), added)
    assert item.value == {"text": "Speaks French"}
    assert ("sam",) in ours.list_namespaces(prefix=("sam",))


@pytest.mark.sqlite_only("reopens a store file")
def test_items_outlive_the_process(tmp_path):
    path = str(tmp_path / "lg.db")
    with Memory(path, embedder="hashing") as memory:
        MemoristStore(memory).put(("sam", "facts"), "pets", {"text": "Has a cat"})
    with Memory(path, embedder="hashing") as memory:
        assert MemoristStore(memory).get(("sam", "facts"), "pets").value == {"text": "Has a cat"}


def test_bad_input_is_named_and_loses_nothing(stores):
    ours, _, _ = stores
    for bad in [(), ("a.b",), ("",), ("sam", 3)]:
        with pytest.raises(InvalidNamespaceError):
            ours.put(bad, "k", {"text": "x"})
    with pytest.raises(ValidationError, match="value"):
        ours.batch([PutOp(("sam",), "k", ["not", "a", "dict"])])
    with pytest.raises(ValidationError, match="operator"):
        ours.search(("sam",), filter={"age": {"$regex": "x"}})
    with pytest.raises(ValidationError, match="limit"):
        ours.batch([SearchOp(("sam",), None, -1, 0, None)])
    assert len(ours.search(("sam",), limit=100)) == 3


def test_a_langgraph_graph_uses_it_as_its_store(stores):
    ours, _, _ = stores

    def remember(state: dict, *, store: BaseStore) -> dict:
        store.put(("zoe", "facts"), "likes", {"text": state["fact"]})
        return {"found": [i.value["text"] for i in store.search(("zoe",), query=state["fact"])]}

    builder = StateGraph(dict)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    out = builder.compile(store=ours).invoke({"fact": "Likes origami"})
    assert out["found"] == ["Likes origami"]
    assert ours.get(("zoe", "facts"), "likes").value == {"text": "Likes origami"}


def test_labels_are_never_joined(stores):
    ours, _, _ = stores
    ours.batch([PutOp(("sam.lee@example.com", "facts"), "k", {"text": "Dotted user"}),
                PutOp(("u", "a.b"), "k", {"text": "Under a.b"}), PutOp(("u", "a", "b"), "k", {"text": "Under a, b"})])
    assert ours.batch([GetOp(("sam.lee@example.com", "facts"), "k")])[0].value == {"text": "Dotted user"}
    assert [i.namespace for i in ours.batch([SearchOp(("u", "a"), None, 10, 0, None)])[0]] == [("u", "a", "b")]
    assert [i.namespace for i in ours.batch([SearchOp(("u", "a.b"), None, 10, 0, None)])[0]] == [("u", "a.b")]
    with pytest.raises(InvalidNamespaceError):  # LangGraph's own methods keep LangGraph's rule
        ours.put(("u", "a.b"), "k", {"text": "x"})


# The cases LangGraph's own repository tests its stores with (list_namespaces with
# prefixes, suffixes, wildcards, depth and paging; re-embedding on update), asked of
# both stores: MemoristStore must answer as InMemoryStore does.
TREE = [
    ("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f"),
    ("users", "123"), ("users", "456", "settings"), ("admin", "users", "789"), ("guests", "456", "preferences"),
    ("h", "i", "j", "k"), ("a", "g"),
]


@pytest.fixture
def tree(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        ours, theirs = MemoristStore(memory), InMemoryStore()
        for store in (ours, theirs):
            for i, ns in enumerate(TREE):
                store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
            for i in range(12):
                store.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": f"value_{i:02d}"})
        yield ours, theirs


@pytest.mark.parametrize("kwargs", [
    {"prefix": ("a", "b")}, {"suffix": ("f",)}, {"prefix": ("a",), "suffix": ("f",)},
    {"prefix": ("a", "b"), "max_depth": 3}, {"prefix": ("a", "b"), "limit": 2}, {"prefix": ("a", "b"), "offset": 2},
    {"prefix": ("a", "*", "f")}, {"suffix": ("*", "f")}, {"prefix": ("nonexistent",)}, {"prefix": ("users", "123")},
    {"prefix": ("users", "*")}, {"suffix": ("*", "preferences")}, {"prefix": ("*", "users"), "suffix": ("*", "settings")},
    {"prefix": ("namespace",), "limit": 5, "offset": 0}, {"prefix": ("namespace",), "limit": 5, "offset": 5},
    {"prefix": ("namespace",), "limit": 5, "offset": 10}, {"max_depth": 2}, {},
])
def test_list_namespaces_as_langgraph_lists_them(tree, kwargs):
    ours, theirs = tree
    assert ours.list_namespaces(**kwargs) == theirs.list_namespaces(**kwargs)


def test_an_empty_store_lists_no_namespace(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        assert MemoristStore(memory).list_namespaces() == []


def test_an_update_is_searched_by_its_new_text(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        store = MemoristStore(memory)
        store.put(("test", "docs"), "doc1", {"text": "zany zebra Xerxes"})
        store.put(("test", "docs"), "doc2", {"text": "something about dogs"})
        first = store.search(("test",), query="Zany Xerxes")
        assert first[0].key == "doc1"
        store.put(("test", "docs"), "doc1", {"text": "new text about dogs"})
        after = {i.key: i.score for i in store.search(("test",), query="Zany Xerxes")}
        assert after.get("doc1", 0.0) < first[0].score
        assert store.search(("test",), query="new text about dogs")[0].key == "doc1"
        assert len(store.search(("test",), limit=10)) == 2  # updated in place, not added


def test_langgraphs_own_rules_on_namespaces_hold(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        store = MemoristStore(memory)
        for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
            with pytest.raises(InvalidNamespaceError):
                store.put(bad, "foo", {"foo": "bar"})
        store.put(("foo", "langgraph", "foo"), "bar", {"foo": "bar"})
        assert store.get(("foo", "langgraph", "foo"), "bar").value == {"foo": "bar"}
        store.delete(("foo", "langgraph", "foo"), "bar")
        assert store.get(("foo", "langgraph", "foo"), "bar") is None


# One item per key under concurrent writes ------------------------------------------------
def test_concurrent_puts_of_one_key_leave_one_item_as_in_langgraph(backend):
    async def race(store, ns):
        await asyncio.gather(*[store.aput(ns, "same", {"text": f"value {i}", "i": i}) for i in range(8)])
        found = await store.asearch(ns, limit=100)
        value = (await store.aget(ns, "same")).value
        await store.adelete(ns, "same")
        return len(found), value, await store.aget(ns, "same"), await store.asearch(ns, limit=100)

    with Memory(backend.target, embedder="hashing") as memory:
        ours, theirs = MemoristStore(memory), InMemoryStore()
        for store in (ours, theirs):
            for n in range(5):
                count, value, gone, left = asyncio.run(race(store, ("sam", f"facts{n}")))
                assert count == 1 and value == {"text": f"value {value['i']}", "i": value["i"]}
                assert gone is None and left == []
        assert memory.get_all(user_id="sam", agent_id="langgraph")["results"] == []
        ours.put(("sam", "facts"), "same", {"text": "first"})
        ours.put(("sam", "facts"), "same", {"text": "last"})  # the last write wins
        assert ours.get(("sam", "facts"), "same").value == {"text": "last"}


def _as_separate_processes(monkeypatch):
    """Writers that do not share the process's lock of a key: as several processes on
    one store (or one service) are."""
    from memorist.integrations import langgraph

    monkeypatch.setattr(langgraph, "_lock", lambda *key: contextlib.nullcontext(), raising=False)


def _race(store, rounds=6, writers=6):
    """``writers`` threads put each round's key at once; the values they wrote."""
    for r in range(rounds):
        start = threading.Barrier(writers)

        def put(w, r=r, start=start):
            start.wait()
            store.put(("sam", "facts"), f"k{r}", {"text": f"writer {w} round {r}", "w": w})

        threads = [threading.Thread(target=put, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def copies(memory, user="sam"):
    rows = memory.get_all(user_id=user, agent_id="langgraph", limit=1000)["results"]
    return collections.Counter(r["metadata"]["lg_key"] for r in rows)


def test_writers_of_several_processes_converge_on_one_copy(backend, monkeypatch):
    _as_separate_processes(monkeypatch)
    with Memory(backend.target, embedder="hashing") as memory:
        store = MemoristStore(memory)
        _race(store)
        assert copies(memory) == {f"k{r}": 1 for r in range(6)}
        for r in range(6):
            item = store.get(("sam", "facts"), f"k{r}")
            assert item.value == {"text": f"writer {item.value['w']} round {r}", "w": item.value["w"]}
        assert len(store.search(("sam",), limit=100)) == 6


def test_copies_left_by_other_processes_are_healed_and_all_deleted(backend):
    """Copies a crashed writer of another process left (or an older version of the
    store): the newest is the item, a read removes the others, a delete removes all."""
    with Memory(backend.target, embedder="hashing") as memory:
        store = MemoristStore(memory)
        store.put(("sam", "facts"), "k", {"text": "first"})
        meta = memory.get_all(user_id="sam", agent_id="langgraph")["results"][0]["metadata"]
        memory.add("second", user_id="sam", agent_id="langgraph", metadata={**meta, "lg_value": {"text": "second"}}, infer=False)
        assert [i.value for i in store.search(("sam",), limit=10)] == [{"text": "second"}]
        assert store.get(("sam", "facts"), "k").value == {"text": "second"} and copies(memory) == {"k": 1}
        for text in ("a", "b"):
            memory.add(text, user_id="sam", agent_id="langgraph", metadata={**meta, "lg_value": {"text": text}}, infer=False)
        store.delete(("sam", "facts"), "k")
        assert store.get(("sam", "facts"), "k") is None and copies(memory) == {}


_WRITER = """
import os, sys, time
from memorist import Memory
from memorist.integrations.langgraph import MemoristStore
path, folder, me, writers, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
with Memory(path, embedder="hashing") as memory:
    store = MemoristStore(memory)
    for r in range(rounds):
        open(os.path.join(folder, f"{r}-{me}"), "w").close()
        while sum(os.path.exists(os.path.join(folder, f"{r}-{w}")) for w in range(writers)) < writers:
            time.sleep(0.001)
        store.put(("sam", "facts"), f"k{r}", {"text": f"writer {me} round {r}"})
"""


@pytest.mark.sqlite_only("processes share one store file")
def test_processes_sharing_a_store_file_keep_one_item_per_key(tmp_path):
    path, rounds, writers = str(tmp_path / "shared.db"), 12, 3
    Memory(path, embedder="hashing").close()
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, path, str(tmp_path), str(w), str(writers), str(rounds)],
                              stderr=subprocess.PIPE, text=True) for w in range(writers)]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    with Memory(path, embedder="hashing") as memory:
        assert copies(memory) == {f"k{r}": 1 for r in range(rounds)}


# Memories that are no items of the store ---------------------------------------------------
def test_memories_that_are_no_items_are_skipped(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        ours, theirs = MemoristStore(memory), InMemoryStore()
        memory.add("Agent-level note", agent_id="langgraph", infer=False)  # the store's agent, no user
        memory.add("Odd one", user_id="sam", agent_id="langgraph", metadata={"lg_key": 5, "lg_depth": 2}, infer=False)
        memory.add("Odd two", user_id="sam", agent_id="langgraph", metadata={"lg_key": "k", "lg_namespace": "x"}, infer=False)
        # A key that is not a string (a list cannot even be a dictionary key).
        memory.add("Odd three", user_id="sam", agent_id="langgraph", metadata={"lg_key": ["x"], "lg_ns": ["facts"], "lg_depth": 2},
                   infer=False)
        for store in (ours, theirs):
            store.put(("sam", "facts"), "k", {"text": "hello"})
        for store in (ours, theirs):
            assert [i.namespace for i in store.search(())] == [("sam", "facts")]
            assert store.list_namespaces() == [("sam", "facts")]
            assert store.list_namespaces(suffix=("facts",)) == [("sam", "facts")]
            assert [(i.namespace, i.key) for i in store.search(("sam",), query="odd one")] == [(("sam", "facts"), "k")]


# Values as LangGraph's stores take them ------------------------------------------------------
def _deep(n):
    value = 1
    for _ in range(n):
        value = {"a": value}
    return value


VALUES = {
    "deep16": _deep(16),
    "deep200": _deep(200),
    "70KB text": {"text": "word " * 14_000, "n": 1},
    "70KB of one string": {"blob": "word " * 14_000},
    "NaN and infinity": {"x": float("nan"), "y": float("inf")},
    "NUL": {"text": "a\x00b", "z": "\x00"},
    "lone surrogate": {"text": "a\ud800b", "list": ["\udfff"]},
    "big integer": {"n": 2**70},
    "no text": {},
    "empty text": {"text": ""},
}


def _same(a, b):
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.parametrize("name", VALUES)
def test_values_langgraph_takes_are_kept(backend, name):
    value = VALUES[name]
    with Memory(backend.target, embedder="hashing") as memory:
        ours, theirs = MemoristStore(memory), InMemoryStore()
        for store in (ours, theirs):
            store.put(("sam", "facts"), "k", value)
            assert _same(store.get(("sam", "facts"), "k").value, value)
            assert _same(store.search(("sam",))[0].value, value)
        ours.put(("sam", "facts"), "k", {"text": "small again"})  # each form of the value replaces the other
        assert ours.get(("sam", "facts"), "k").value == {"text": "small again"}
        ours.put(("sam", "facts"), "k", value)
        assert _same(ours.get(("sam", "facts"), "k").value, value)
        assert copies(memory) == {"k": 1}


def test_values_are_kept_as_json_as_langgraphs_postgres_store_keeps_them(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        store = MemoristStore(memory)
        store.put(("sam", "facts"), "k", {"m": {1: "a"}, "t": (1, (2, 3))})
        assert store.get(("sam", "facts"), "k").value == {"m": {"1": "a"}, "t": [1, [2, 3]]}


def test_a_large_value_is_searched_by_its_text(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        store = MemoristStore(memory)
        store.put(("sam", "docs"), "big", {"text": "zebra " * 14_000, "source": "upload"})
        store.put(("sam", "docs"), "small", {"text": "about dogs"})
        found = store.search(("sam",), query="zebra")
        assert found[0].key == "big" and found[0].value["source"] == "upload"


def test_limits_that_remain_are_named_and_checked_first(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        store = MemoristStore(memory)
        with pytest.raises(ValidationError, match=r"value: is [\d,]+ bytes as JSON; the limit is [\d,]+") as info:
            store.put(("sam", "f"), "k", {"text": "short", "blob": "x" * 70_000})
        assert info.value.field == "value"
        with pytest.raises(ValidationError) as info:
            store.put(("sam", "f"), "k", {"when": object()})
        assert info.value.field == "value"
        for key in ("a\x00b", "a\ud800"):
            with pytest.raises(ValidationError) as info:
                store.put(("sam", "f"), key, {"text": "x"})
            assert info.value.field == "key"
            assert store.get(("sam", "f"), key) is None  # never stored, as InMemoryStore would not have it
        with pytest.raises(ValidationError, match="key: is too large") as info:
            store.put(("sam", "f"), "k" * 40_000, {"text": "x"})
        for label in ("a\tb", " ", "u" * 300):
            with pytest.raises(InvalidNamespaceError, match="namespace: its first label is a Memorist user id"):
                store.put((label, "f"), "k", {"text": "x"})
            assert store.get((label, "f"), "k") is None and store.search((label,)) == []
            assert store.list_namespaces(prefix=(label,)) == []
            store.delete((label, "f"), "k")
        store.put(("sam", "a\tb"), "k\tk", {"text": "x"})  # later labels and keys may hold them
        assert store.get(("sam", "a\tb"), "k\tk").value == {"text": "x"}
        assert store.list_namespaces() == [("sam", "a\tb")]


def _cycle(text=None):
    value = {"text": text} if text else {}
    value["self"] = value
    return value


def _list_cycle():
    inner = []
    inner.append({"back": inner})
    return {"l": inner}


def _shared(levels):
    """A small structure whose JSON doubles at each level (the same list twice)."""
    value = [1]
    for _ in range(levels):
        value = [value, value]
    return {"x": value}


# Values JSON cannot hold, whether or not they have a main text: each is the value's
# ValidationError, on every path (a value without a text was walked recursively for its
# strings and raised a bare RecursionError, at half the depth the JSON path took).
REFUSED = {
    "a cycle": (_cycle(), "Circular reference detected"),
    "a cycle with a text": (_cycle("hello"), "Circular reference detected"),
    "a cycle through a list": (_list_cycle(), "Circular reference detected"),
    "901 levels": (_deep(901), "nests too deep to be stored as JSON: more than 900 levels"),
    "901 levels with a text": ({"text": "hello", "d": _deep(900)}, "nests too deep to be stored as JSON"),
    "1200 levels": (_deep(1200), "nests too deep to be stored as JSON"),
    "1200 levels with a text": ({"text": "hello", "d": _deep(1200)}, "nests too deep to be stored as JSON"),
    "2**80 shared items": (_shared(80), r"is larger than [\d,]+ bytes as JSON"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_a_value_json_cannot_hold_is_the_values_error_and_nothing_is_written(backend, name):
    value, said = REFUSED[name]
    with Memory(backend.target, embedder="hashing") as memory:
        store = MemoristStore(memory)
        store.put(("sam", "f"), "kept", {"text": "kept"})
        for namespace, index in ((("sam",), None), (("sam", "f"), None), (("sam", "f"), ["text"]), (("sam",), False)):
            with pytest.raises(ValidationError, match=said) as info:
                store.put(namespace, "k", value, index=index)
            assert info.value.field == "value"
            assert store.get(namespace, "k") is None
        assert copies(memory) == {"kept": 1}


def test_values_nest_up_to_max_value_depth_with_or_without_a_text(backend):
    from memorist.integrations.langgraph import MAX_VALUE_DEPTH

    assert MAX_VALUE_DEPTH == 900
    with Memory(backend.target, embedder="hashing") as memory:
        store = MemoristStore(memory)
        for key, value in (("bare", _deep(500)), ("deepest", _deep(MAX_VALUE_DEPTH)),
                           ("text", {"text": "hello", "d": _deep(MAX_VALUE_DEPTH - 1)})):
            store.put(("sam", "f"), key, value)
            assert store.get(("sam", "f"), key).value == value
        assert {i.key for i in store.search(("sam",), query="hello")} >= {"text"}
        assert copies(memory) == {"bare": 1, "deepest": 1, "text": 1}


def test_what_the_store_cannot_use_is_refused_when_it_is_made(tmp_path):
    """Before, an AsyncMemory, a scoped handle or any object was taken, and every
    operation then failed (a coroutine never awaited, a TypeError)."""
    from memorist import AsyncMemory

    with Memory(str(tmp_path / "m.db"), embedder="hashing") as memory:
        for wrong, says in ((memory.scope(user_id="sam"), "scoped handle"), ("memory.db", "got str")):
            with pytest.raises(ValidationError, match=says) as info:
                MemoristStore(wrong)
            assert info.value.field == "memory"
    concurrent = AsyncMemory(str(tmp_path / "a.db"), embedder="hashing")
    try:
        with pytest.raises(ValidationError, match="synchronous") as info:
            MemoristStore(concurrent)
        assert info.value.field == "memory"
    finally:
        concurrent.memory.close()


def test_an_add_that_infers_facts_never_rewrites_a_store_item(backend):
    """A store's item is its value: a model's reconciler shown it updated the memory
    under it, and the store then returned the old value under a text that said
    otherwise. It is not shown: the fact is added beside it."""
    from memorist import ScriptedLLM

    model = ScriptedLLM(default=None)
    with Memory(backend.target, embedder="hashing", llm=model) as memory:
        store = MemoristStore(memory)
        store.put(("sam", "prefs"), "diet", {"text": "Sam is vegetarian", "since": 2019})
        shown: list[str] = []

        def decide(request):
            shown.append(json.dumps(request.messages[-1].content if request.messages else ""))
            return {"memory": [{"event": "UPDATE", "id": "0", "text": "Sam is no longer vegetarian", "fact": 0}]}

        model.push({"facts": ["Sam is no longer vegetarian"]}, decide)
        events = [r["event"] for r in memory.add("I'm not vegetarian anymore.", user_id="sam", agent_id="langgraph")["results"]]
        assert events == ["ADD"] and not any("Sam is vegetarian" in s for s in shown)
        assert store.get(("sam", "prefs"), "diet").value == {"text": "Sam is vegetarian", "since": 2019}
