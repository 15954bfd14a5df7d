"""MemoristStore over a memorist.Client: one item per key when the service serves
several writers, and values as LangGraph's stores take them."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading

import pytest

pytest.importorskip("langgraph")

from client_live import live_server  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from memorist import Client, ValidationError  # noqa: E402
from memorist.integrations import langgraph  # noqa: E402
from memorist.integrations.langgraph import MemoristStore  # noqa: E402
from memorist.server import ServerLimits  # noqa: E402


@pytest.fixture
def service(tmp_path):
    """A development server without a rate limit: the store makes a few requests per call."""
    with live_server(str(tmp_path / "lg.db"), limits=ServerLimits(rate_per_minute=0)) as server:
        yield server


def copies(client, user):
    rows = client.get_all(user_id=user, agent_id="langgraph", limit=1000)["results"]
    return collections.Counter(r["metadata"]["lg_key"] for r in rows)


def test_concurrent_puts_over_a_client_leave_one_item(service):
    async def race(store):
        await asyncio.gather(*[store.aput(("ann", "facts"), "same", {"text": f"value {i}", "i": i}) for i in range(8)])
        found = await store.asearch(("ann", "facts"), limit=100)
        value = (await store.aget(("ann", "facts"), "same")).value
        await store.adelete(("ann", "facts"), "same")
        return len(found), value, await store.aget(("ann", "facts"), "same")

    with Client(service.url) as client:
        for store in (MemoristStore(client), InMemoryStore()):
            for _ in range(3):
                count, value, gone = asyncio.run(race(store))
                assert count == 1 and value == {"text": f"value {value['i']}", "i": value["i"]} and gone is None
        assert copies(client, "ann") == {}


def test_clients_of_several_processes_converge_on_one_copy(service, monkeypatch):
    # Writers that do not share a lock of the key: as several processes using one service.
    monkeypatch.setattr(langgraph, "_lock", lambda *key: contextlib.nullcontext(), raising=False)
    with Client(service.url) as client:
        store = MemoristStore(client)
        for r in range(4):
            start = threading.Barrier(5)

            def put(w, r=r, start=start):
                start.wait()
                with Client(service.url) as own:  # each writer its own connection
                    MemoristStore(own).put(("bob", "facts"), f"k{r}", {"text": f"writer {w}", "w": w})

            threads = [threading.Thread(target=put, args=(w,)) for w in range(5)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert copies(client, "bob") == {f"k{r}": 1 for r in range(4)}
        item = store.get(("bob", "facts"), "k0")
        assert item.value == {"text": f"writer {item.value['w']}", "w": item.value["w"]}
        store.delete(("bob", "facts"), "k0")
        assert store.get(("bob", "facts"), "k0") is None and "k0" not in copies(client, "bob")


def test_values_and_limits_over_a_client(service):
    with Client(service.url) as client:
        store = MemoristStore(client)
        deep = {"a": 1}
        for _ in range(20):
            deep = {"a": deep}
        for value in (deep, {"text": "word " * 14_000}, {"x": float("nan"), "t": "a\x00\ud800"}):
            store.put(("cy", "f"), "k", value)
            assert repr(store.get(("cy", "f"), "k").value) == repr(value)
        store.put(("cy", "f"), "i", {"m": {1: "a"}})
        assert store.get(("cy", "f"), "i").value == {"m": {"1": "a"}}
        with pytest.raises(ValidationError) as info:
            store.put(("cy", "f"), "a\x00", {"text": "x"})
        assert info.value.field == "key"
        with pytest.raises(ValidationError) as info:
            store.put(("cy", "f"), "b", {"text": "x", "blob": "y" * 70_000})
        assert info.value.field == "value"
        client.add("Agent note", agent_id="langgraph", infer=False)  # the store's agent, no user
        assert store.list_namespaces() == [("cy", "f")]
        assert {i.namespace for i in store.search(())} == {("cy", "f")}


def test_cycles_and_deep_values_are_the_values_error_over_a_client(service):
    """Over a Client too, a value JSON cannot hold is refused before any request, with
    or without a main text (without one, a cycle raised a bare RecursionError)."""
    def deep(n):
        value = {}
        for _ in range(n):
            value = {"a": value}
        return value

    cycle = {}
    cycle["self"] = cycle
    with Client(service.url) as client:
        store = MemoristStore(client)
        for value, said in ((cycle, "Circular reference detected"), ({"text": "hi", "c": cycle}, "Circular reference"),
                            (deep(900), "more than 900 levels"), (deep(1200), "nests too deep")):
            with pytest.raises(ValidationError, match=said) as info:
                store.put(("cy", "f"), "k", value)
            assert info.value.field == "value"
        assert copies(client, "cy") == {}
        store.put(("cy", "f"), "k", deep(550))  # 551 levels, no text: kept as JSON text
        assert store.get(("cy", "f"), "k").value == deep(550)
