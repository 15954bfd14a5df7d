"""One caller cannot keep the others waiting: a burst of costly requests of one key
runs one at a time (its requests past its share are 429), so another key's request
is answered while it runs; and callers within their shares never take every worker
thread from the next one. The service over HTTP in one event loop (httpx's ASGI
transport), with searches made slow on purpose."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from memorist import Memory
from memorist.server import ServerLimits
from memorist.server.limits import COSTLY_UNITS
from memorist.work import charge
from service_helpers import bearer

SEARCH = {"query": "tea", "user_id": "u"}


def asgi_client(app: Any, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost", headers=headers, timeout=60)


def test_a_burst_of_costly_searches_of_one_key_does_not_keep_another_key_waiting(
    make_app: Any, new_key: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a search with a large filter does: it keeps the tenant's store for its whole
    run (here 0.25 s) and reports costly work. Let in all at once, 16 such searches
    would each be ahead of the other key's request in the store (4 s)."""
    started = threading.Event()

    def costly_search(self: Memory, query: str, **_: Any) -> dict[str, Any]:
        with self.store.reading():
            started.set()
            charge(COSTLY_UNITS)
            time.sleep(0.25)
        return {"results": []}

    monkeypatch.setattr(Memory, "search", costly_search)
    x, y = new_key("acme"), new_key("acme")
    app = make_app(limits=ServerLimits(rate_per_minute=0))  # the defaults: 64 at work, 16 per caller

    async def scenario() -> tuple[float, int, list[httpx.Response]]:
        async with asgi_client(app, bearer(x)) as cx, asgi_client(app, bearer(y)) as cy:
            burst = [asyncio.ensure_future(cx.post("/api/memories/search/", json=SEARCH)) for _ in range(30)]
            while not started.is_set():
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)  # the whole burst is in
            t0 = time.monotonic()
            other = await cy.get("/api/users/")
            waited = time.monotonic() - t0
            return waited, other.status_code, list(await asyncio.gather(*burst))

    waited, status, answers = asyncio.run(scenario())
    assert status == 200
    assert waited < 1.5, f"the other key waited {waited:.2f} s"
    assert Counter(r.status_code for r in answers) == {200: 16, 429: 14}
    refused = next(r for r in answers if r.status_code == 429)
    assert refused.headers["Retry-After"] == "1"
    assert refused.json()["error"]["type"] == "rate_limited"
    assert "this API key has 16 requests at work" in refused.json()["error"]["message"]


def test_cheap_requests_of_one_caller_run_side_by_side(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller's window opens as its requests turn out cheap: twelve searches of a
    client, each waiting 0.2 s for nothing costly, take far less than 12 x 0.2 s."""
    running = 0
    most = 0

    def idle_search(self: Memory, query: str, **_: Any) -> dict[str, Any]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        time.sleep(0.2)
        running -= 1
        return {"results": []}

    monkeypatch.setattr(Memory, "search", idle_search)
    app = make_app()

    async def scenario() -> tuple[float, list[int]]:
        async with asgi_client(app) as c:
            t0 = time.monotonic()
            answers = await asyncio.gather(*(c.post("/api/memories/search/", json=SEARCH) for _ in range(12)))
            return time.monotonic() - t0, [r.status_code for r in answers]

    took, statuses = asyncio.run(scenario())
    assert statuses == [200] * 12
    assert most >= 4 and took < 12 * 0.2 * 0.6, (most, took)


def test_callers_within_their_shares_leave_a_worker_thread_for_the_next(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """45 clients each with a request at work hold 45 threads, more than the 40 the
    thread pool has by default: the next client still gets one."""
    release = threading.Event()
    holding = 0
    lock = threading.Lock()

    def held_search(self: Memory, query: str, **_: Any) -> dict[str, Any]:
        nonlocal holding
        with lock:
            holding += 1
        release.wait(30)
        return {"results": []}

    monkeypatch.setattr(Memory, "search", held_search)
    app = make_app()

    async def scenario() -> tuple[int, int, list[int]]:
        async with asgi_client(app) as c:
            held = [asyncio.ensure_future(c.post("/api/memories/search/", json=SEARCH, headers={"User-Agent": f"agent {i}"}))
                    for i in range(45)]
            try:
                deadline = time.monotonic() + 10
                while holding < 45 and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                running = holding
                other = await asyncio.wait_for(c.get("/api/users/", headers={"User-Agent": "panel"}), 10)
            finally:
                release.set()
            return running, other.status_code, [r.status_code for r in await asyncio.gather(*held)]

    try:
        running, other, held = asyncio.run(scenario())
    finally:
        release.set()
    assert running == 45, f"only {running} of 45 requests at work got a thread"
    assert other == 200
    assert held == [200] * 45


def test_requests_on_several_event_loops_all_finish(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test client used without ``with`` runs each request on an event loop of its
    own, in its own thread: one client's requests, waiting their turns across loops,
    are all answered (a turn given on another loop's thread used to wake nobody)."""
    def costly_search(self: Memory, query: str, **_: Any) -> dict[str, Any]:
        charge(COSTLY_UNITS)  # so each waits for the one before to end
        time.sleep(0.3)
        return {"results": []}

    monkeypatch.setattr(Memory, "search", costly_search)
    client = TestClient(make_app())  # no `with`: a loop per request
    answers: dict[int, int] = {}

    def one(i: int) -> None:
        answers[i] = client.post("/api/memories/search/", json=SEARCH).status_code

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert answers == {0: 200, 1: 200, 2: 200}, f"answered: {answers}"
