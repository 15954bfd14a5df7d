"""AsyncMemory's queue and its waits: calls queued on a busy instance hold no thread of
the event loop's default executor, a call cancelled before its turn never runs, the
waits for background runs are not queued behind the instance's calls, and the
playbooks' calls are awaited.

The slow point is a gate (an embedder whose query embedding waits for an event), not a
timing: each test checks what happens while the gate is shut, then opens it."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memorist import AsyncMemory, Memory, MemoryConfig, ValidationError
from memorist.embed import resolve_embedder

#: How long a test waits for something that must happen at once (a failure waits this long).
PROMPT = 10.0


class Gate:
    """A hashing embedder whose query embeddings, once ``shut()``, wait until ``open()``;
    ``entered`` is set when one is waiting, ``inside`` counts those running."""

    def __init__(self) -> None:
        self.embedder = resolve_embedder("hashing")
        self.entered = threading.Event()
        self._open = threading.Event()
        self._open.set()
        self.inside = 0
        self.most_inside = 0
        self._count = threading.Lock()
        query = self.embedder.embed_query

        def gated(text: str) -> Any:
            with self._count:
                self.inside += 1
                self.most_inside = max(self.most_inside, self.inside)
            try:
                if not self._open.is_set():
                    self.entered.set()
                    self._open.wait(60)
                return query(text)
            finally:
                with self._count:
                    self.inside -= 1

        self.embedder.embed_query = gated  # type: ignore[method-assign]

    def shut(self) -> None:
        self.entered.clear()
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    async def reached(self) -> None:
        """Until a query embedding waits at the gate (polled on the loop: no thread)."""
        for _ in range(int(PROMPT / 0.01)):
            if self.entered.is_set():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("no call reached the gate")


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.open()


async def _settle() -> None:
    """Let every task created so far run up to its first real wait."""
    for _ in range(20):
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)


def test_calls_queued_on_a_busy_instance_hold_no_thread_of_the_loop(tmp_path, gate: Gate) -> None:
    async def main() -> None:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2))
        slow = AsyncMemory(str(tmp_path / "slow.db"), embedder=gate.embedder)
        fast = AsyncMemory(str(tmp_path / "fast.db"), embedder="hashing")
        burst: list[asyncio.Task[Any]] = []
        try:
            await slow.add("I like tea", user_id="u", infer=False)
            await fast.add("I like coffee", user_id="u", infer=False)
            gate.shut()
            # More calls than the default executor has threads (distinct queries: no cache).
            burst = [asyncio.create_task(slow.search(f"tea {i}", user_id="u")) for i in range(8)]
            await gate.reached()
            await _settle()
            # The application's own thread work and another instance go on meanwhile.
            assert await asyncio.wait_for(asyncio.to_thread(lambda: "done"), PROMPT) == "done"
            found = await asyncio.wait_for(fast.search("coffee", user_id="u"), PROMPT)
            assert [r["memory"] for r in found["results"]] == ["I like coffee"]
            assert not any(task.done() for task in burst), "the slow instance's calls ran past its gate"
        finally:
            gate.open()
            results = await asyncio.gather(*burst, return_exceptions=True)
            await slow.aclose()
            await fast.aclose()
        assert all(isinstance(r, dict) for r in results), results
        assert gate.most_inside == 1, "the instance's calls ran one at a time"

    asyncio.run(main())


def test_a_call_cancelled_before_its_turn_never_runs(tmp_path, gate: Gate) -> None:
    async def main() -> None:
        async with AsyncMemory(str(tmp_path / "m.db"), embedder=gate.embedder) as memory:
            await memory.add("I like tea", user_id="u", infer=False)
            gate.shut()
            busy = asyncio.create_task(memory.search("tea", user_id="u"))
            await gate.reached()
            queued = asyncio.create_task(memory.add("Lives in Oslo", user_id="u", infer=False))
            await _settle()
            queued.cancel()
            with pytest.raises(asyncio.CancelledError):
                await queued
            gate.open()
            await busy
            assert [r["memory"] for r in (await memory.get_all(user_id="u"))["results"]] == ["I like tea"]

    asyncio.run(main())


def test_one_instance_serves_several_event_loops_one_call_at_a_time(tmp_path, gate: Gate) -> None:
    memory = AsyncMemory(str(tmp_path / "m.db"), embedder=gate.embedder)
    asyncio.run(memory.add("I like tea", user_id="u", infer=False))
    errors: list[BaseException] = []

    def other_loop(i: int) -> None:
        try:
            asyncio.run(memory.search(f"tea from loop {i}", user_id="u"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    gate.shut()
    threads = [threading.Thread(target=other_loop, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    assert gate.entered.wait(PROMPT)
    gate.open()
    for t in threads:
        t.join(PROMPT)
    assert not errors and not any(t.is_alive() for t in threads)
    assert gate.most_inside == 1
    asyncio.run(memory.aclose())
    # A closed instance answers as a closed Memory does (its worker is made again).
    with pytest.raises(Exception, match="closed"):
        asyncio.run(memory.get_all(user_id="u"))


# the waits for background runs ------------------------------------------------------------------
def test_wait_consolidation_is_awaited_with_memory_s_parameters() -> None:
    method = AsyncMemory.learning.fget(object.__new__(AsyncMemory)).wait_consolidation  # type: ignore[attr-defined]
    assert inspect.iscoroutinefunction(method)
    with Memory(":memory:", embedder="hashing") as m:
        assert inspect.signature(method).parameters.keys() == inspect.signature(m.learning.wait_consolidation).parameters.keys()


def test_wait_consolidation_waits_for_the_runs_adds_started(tmp_path) -> None:
    config = MemoryConfig(auto_consolidate_threshold=3, run_consolidation_async=True)
    texts = ["Drinks green tea every morning", "Drinks green tea every morning at 7am",
             "Met Sarah from Google on 2024-03-02", "Met Sarah from Google on 2024-03-02 in Zurich",
             "Plays tennis on Sundays", "Plays tennis on Sundays with Tom"]

    async def main() -> None:
        async with AsyncMemory(str(tmp_path / "m.db"), embedder="hashing", config=config) as memory:
            for text in texts:
                await memory.add(text, user_id="u", infer=False, importance=0.3)
            assert await memory.learning.wait_consolidation(30) is True
            assert [e for e in await memory.events(user_id="u") if e["event"] == "CONSOLIDATION"]

    asyncio.run(main())


@pytest.mark.parametrize(("capability", "wait"), [("learning", "wait_consolidation"), ("tiers", "wait")])
def test_a_wait_is_not_queued_behind_the_instance_s_calls(tmp_path, gate: Gate, capability: str, wait: str) -> None:
    async def main() -> None:
        async with AsyncMemory(str(tmp_path / "m.db"), embedder=gate.embedder) as memory:
            await memory.add("I like tea", user_id="u", infer=False)
            gate.shut()
            busy = asyncio.create_task(memory.search("tea", user_id="u"))
            try:
                await gate.reached()
                waited = getattr(getattr(memory, capability), wait)
                assert await asyncio.wait_for(waited(5), PROMPT) is True  # nothing runs in the background
                assert not busy.done()
            finally:
                gate.open()
                await busy

    asyncio.run(main())


def test_tiers_wait_checks_its_timeout_as_memory_does() -> None:
    async def main() -> None:
        async with AsyncMemory(":memory:", embedder="hashing") as memory:
            with pytest.raises(ValidationError, match="timeout"):
                await memory.tiers.wait(-1)

    asyncio.run(main())


# the playbooks ----------------------------------------------------------------------------------
def test_the_playbooks_calls_are_awaited_on_the_instance_s_worker(tmp_path, gate: Gate) -> None:
    async def main() -> None:
        async with AsyncMemory(str(tmp_path / "m.db"), embedder=gate.embedder) as memory:
            playbooks = memory.playbooks
            for name in ("retrieve", "learn", "run_turn", "bullets", "search", "stats", "cleanup"):
                assert inspect.iscoroutinefunction(getattr(playbooks, name)), name
            turn = playbooks.turn("alice", "c1")
            for name in ("retrieve", "context", "learn"):
                assert inspect.iscoroutinefunction(getattr(turn, name)), name
            learned = await turn.learn(question="How do I add fractions?", answer="Find a common denominator first.",
                                       feedback="correct", lessons=["Find a common denominator before adding fractions"])
            assert learned["num_new_bullets"] == 1
            # A playbook search runs on the worker thread, not on the loop: the loop stays free.
            gate.shut()
            search = asyncio.create_task(playbooks.search("fractions", learner_id="alice"))
            await gate.reached()
            assert await asyncio.wait_for(asyncio.sleep(0, "free"), PROMPT) == "free"
            gate.open()
            assert [b.content for b in await search] == ["Find a common denominator before adding fractions"]
            assert (await playbooks.stats("alice"))["total_bullets"] == 1
            bullets = await playbooks.turn("alice").retrieve("adding fractions")
            assert [b.content for b in bullets] == ["Find a common denominator before adding fractions"]
            with pytest.raises(ValidationError):
                playbooks.turn("")

    asyncio.run(main())
