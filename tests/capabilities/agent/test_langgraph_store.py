"""MemoristStore against LangGraph's own API. LangGraph's wheel ships no store
conformance tests, so this suite runs the same operations on LangGraph's
InMemoryStore and on MemoristStore and asserts they agree, plus what only a durable
Memorist-backed store does."""

from __future__ import annotations

import asyncio

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
