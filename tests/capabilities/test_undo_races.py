"""A rollback and another writer at once: what the rollback checked before it wrote
may have changed meanwhile (another process's erasure, update or rollback). It is
judged again under the write lock, on both backends: an erased memory never comes
back, a later update is never overwritten, and one operation is undone once.

Each race is made certain by running the other writer (another Memory on the same
store: another connection, as another process) right before the rollback's
transaction begins, after its first checks passed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from memorist import Memory
from memorist.errors import ConflictError, NotFoundError


def _moved(mem: Memory) -> tuple[str, int]:
    """A memory the reconciler updated (California, then San Francisco): its id and
    the seq of the UPDATE that rollback undoes."""
    mem.add("I live in California", user_id="u")
    mid = mem.add("Actually I live in San Francisco now", user_id="u")["results"][0]["id"]
    update = next(e for e in mem.history(mid, user_id="u") if e["event"] == "UPDATE")
    return mid, update["seq"]


def _first(mem: Memory, other_writer: Callable[[], object]) -> None:
    """Run ``other_writer`` once, right before ``mem``'s next transaction begins."""
    real = mem.store.transaction
    done: list[bool] = []

    @contextmanager
    def transaction() -> Iterator[object]:
        if not done:
            done.append(True)
            other_writer()
        with real() as batch:
            yield batch

    mem.store.transaction = transaction  # type: ignore[method-assign]


def test_a_rollback_racing_an_erasure_brings_nothing_back(backend) -> None:
    with Memory(backend.target, embedder="hashing") as mem, Memory(backend.target, embedder="hashing") as other:
        _, seq = _moved(mem)
        _first(mem, lambda: other.erase(user_id="u"))
        with pytest.raises(NotFoundError):
            mem.rollback(seq, user_id="u")
        assert other.get_all(user_id="u")["results"] == []
        assert mem.search("California", user_id="u")["results"] == []


def test_a_rollback_racing_an_update_does_not_overwrite_it(backend) -> None:
    with Memory(backend.target, embedder="hashing") as mem, Memory(backend.target, embedder="hashing") as other:
        mid, seq = _moved(mem)
        _first(mem, lambda: other.update(mid, "Lives in Berkeley", user_id="u"))
        with pytest.raises(ConflictError, match="changed after"):
            mem.rollback(seq, user_id="u")
        assert other.get(mid, user_id="u")["memory"] == "Lives in Berkeley"


def test_two_rollbacks_of_one_operation_at_once_undo_it_once(backend) -> None:
    with Memory(backend.target, embedder="hashing") as mem, Memory(backend.target, embedder="hashing") as other:
        mid, seq = _moved(mem)
        _first(mem, lambda: other.rollback(seq, user_id="u"))
        with pytest.raises(ConflictError, match="already rolled back"):
            mem.rollback(seq, user_id="u")
        assert other.get(mid, user_id="u")["memory"] == "Lives in California"
        assert [e["event"] for e in other.history(mid, user_id="u")].count("ROLLBACK") == 1


def test_a_second_rollback_names_the_event_the_first_returned(backend) -> None:
    with Memory(backend.target, embedder="hashing") as mem:
        _, seq = _moved(mem)
        first = mem.rollback(seq, user_id="u")["rollback_seq"]
        with pytest.raises(ConflictError, match=rf"already rolled back \(event {first}\)"):
            mem.rollback(seq, user_id="u")
