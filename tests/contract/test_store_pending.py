"""The store contract's ``pending_turns``: pending is expressed by append-only events.

Both the SQLite query and the contract's default (built on ``events``) run on the
same log and must agree."""

from __future__ import annotations

import pytest

from engram import Memory
from engram.model import Scope
from engram.store.base import ScopeFilter, Store
from engram.store.sqlite import SQLiteStore

ALEX = Scope("", "alex", "", "chat-1")
BOB = Scope("", "bob", "", "")
OTHER_TENANT = Scope("acme", "alex", "", "")


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(tmp_path / "s.db")
    yield s
    s.close()


def turn(store: SQLiteStore, scope: Scope, *, pending: bool) -> int:
    with store.transaction() as batch:
        payload = {"messages": [{"role": "user", "content": "hi"}]}
        if pending:
            payload |= {"pending": True, "reason": "extraction failed: test"}
        return batch.event("turn", scope, payload=payload)


def resolve(store: SQLiteStore, scope: Scope, seq: int) -> None:
    with store.transaction() as batch:
        batch.event("turn_processed", scope, payload={"turn_event": seq})


def both(store: SQLiteStore, scope: ScopeFilter | None = None, **kw) -> list[int]:
    fast = [e.seq for e in store.pending_turns(scope, **kw)]
    default = [e.seq for e in Store.pending_turns(store, scope, **kw)]
    assert fast == default
    return fast


def test_pending_turns_until_processed(store) -> None:
    a = turn(store, ALEX, pending=True)
    turn(store, ALEX, pending=False)
    b = turn(store, BOB, pending=True)
    c = turn(store, OTHER_TENANT, pending=True)
    with store.transaction() as batch:  # an unrelated event naming the turn resolves nothing
        batch.event("reprocess_failed", ALEX, payload={"turn_event": a})
    assert both(store) == [a, b, c]
    assert both(store, ScopeFilter("", "alex")) == [a]
    assert both(store, ScopeFilter("", None, None, "chat-1")) == [a]
    assert both(store, ScopeFilter("acme", "alex")) == [c]
    assert both(store, ScopeFilter("")) == [a, b]
    assert both(store, limit=1) == [a]
    resolve(store, ALEX, a)
    assert both(store) == [b, c]
    resolve(store, BOB, b)
    resolve(store, OTHER_TENANT, c)
    assert both(store) == []


def test_a_resolution_in_another_space_does_not_count(store) -> None:
    a = turn(store, ALEX, pending=True)
    resolve(store, BOB, a)
    assert both(store) == [a]


def test_pending_survives_reopening(tmp_path) -> None:
    s = SQLiteStore(tmp_path / "p.db")
    a = turn(s, ALEX, pending=True)
    s.close()
    s = SQLiteStore(tmp_path / "p.db")
    assert [e.seq for e in s.pending_turns()] == [a]
    assert s.pending_turns()[0].payload["reason"] == "extraction failed: test"
    s.close()


def test_a_space_with_turns_but_no_vectors_can_be_searched_and_written(tmp_path) -> None:
    """Regression: a first turn that yields no memory creates the space but no vector;
    searching it, and adding a memory to it afterwards, used to fail."""
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        assert m.add("ok thanks", user_id="alex")["results"] == []
        assert m.search("vegetarian", user_id="alex")["results"] == []
        assert m.add("I'm a vegetarian.", user_id="alex")["results"][0]["memory"] == "Is vegetarian"
        assert m.search("vegetarian", user_id="alex")["results"][0]["memory"] == "Is vegetarian"
