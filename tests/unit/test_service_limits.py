"""ServerLimits, the rate syntax of --rate-limit, the token bucket (pure, with a fake
clock) and the callers' shares of the requests at work (on an event loop, no server)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memorist.errors import ConfigurationError
from memorist.server import ServerLimits
from memorist.server.errors import describe_validation, field_of
from memorist.server.limits import COSTLY_UNITS, RateLimiter, WorkShares, parse_rate


@pytest.mark.parametrize(
    ("text", "per_minute"),
    [("600/min", 600), ("600", 600), ("10/s", 600), ("10/sec", 600), ("3600/h", 60), ("5/minute", 5), ("2.5/m", 2.5), ("off", 0), ("0", 0)],
)
def test_parse_rate(text: str, per_minute: float) -> None:
    assert parse_rate(text) == pytest.approx(per_minute)


@pytest.mark.parametrize("text", ["", "fast", "10/fortnight", "-1/min", "1e9/min/s"])
def test_parse_rate_refuses(text: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_rate(text)


def test_limits_are_checked() -> None:
    assert ServerLimits().max_body_bytes == 1_048_576 and ServerLimits().burst == 60
    for bad in ({"max_body_bytes": 0}, {"max_messages": True}, {"burst": 1.5}, {"rate_per_minute": -1}, {"rate_per_minute": float("nan")},
                {"max_concurrency_per_caller": 0}, {"max_body_bytes": 10**12}):
        with pytest.raises(ConfigurationError):
            ServerLimits(**bad)


def test_a_rate_too_large_for_a_number_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="finite"):
        parse_rate("9" * 400)  # float() of it is infinity


def test_a_callers_share_is_a_quarter_of_the_requests_at_work_by_default() -> None:
    assert ServerLimits().caller_share == 16  # of 64
    assert ServerLimits(max_concurrency=5).caller_share == 2
    assert ServerLimits(max_concurrency=1).caller_share == 1  # never more than the whole
    assert ServerLimits(max_concurrency=64, max_concurrency_per_caller=3).caller_share == 3
    assert ServerLimits(max_concurrency=4, max_concurrency_per_caller=30).caller_share == 4


def test_a_caller_past_its_share_or_a_full_service_is_refused() -> None:
    shares = WorkShares(total=5, per_caller=2)
    assert [shares.enter("x") for _ in range(3)] == [None, None, "caller"]
    assert [shares.enter("y") for _ in range(3)] == [None, None, "caller"]
    assert shares.enter("z") is None
    assert shares.enter("w") == "service"  # five at work
    shares.leave("x", None)
    assert shares.enter("w") is None and shares.at_work == 5


async def settle() -> None:
    """Let the tasks woken so far run (a turn given wakes its waiter a few steps later)."""
    for _ in range(10):
        await asyncio.sleep(0)


def test_costly_requests_of_a_caller_run_one_at_a_time_and_cheap_ones_open_its_window() -> None:
    async def scenario() -> None:
        shares = WorkShares(total=64, per_caller=16)
        gone = asyncio.Event()
        for _ in range(4):
            assert shares.enter("x") is None
        turns = [asyncio.ensure_future(shares.turn("x", gone)) for _ in range(4)]
        await settle()
        assert [t.done() for t in turns] == [True, False, False, False]  # a new caller runs one at first
        # another caller is not behind x's line
        assert shares.enter("y") is None and await shares.turn("y", gone)
        shares.leave("x", COSTLY_UNITS)  # costly: the window stays at one
        await settle()
        assert [t.done() for t in turns] == [True, True, False, False] and shares.window("x") == 1
        shares.leave("x", 10)  # cheap: the window opens, the two left run side by side
        await settle()
        assert all(t.done() for t in turns) and shares.window("x") == 2 and shares.running("x") == 2
        shares.leave("x", 10)
        assert shares.window("x") == 3
        shares.leave("x", COSTLY_UNITS)  # a costly one halves it
        assert shares.window("x") == 1 and shares.running("x") == 0
        for _ in range(40):  # cheap answers open it up to the share, no further
            shares.enter("x")
            await shares.turn("x", gone)
            shares.leave("x", 0)
        assert shares.window("x") == 16
        shares.leave("y", 0)
        assert shares.at_work == 0

    asyncio.run(scenario())


def test_a_request_whose_client_leaves_while_waiting_never_runs_and_frees_its_place() -> None:
    async def scenario() -> None:
        shares = WorkShares(total=64, per_caller=3)
        stays, leaves = asyncio.Event(), asyncio.Event()
        for _ in range(3):
            shares.enter("x")
        assert await shares.turn("x", stays)
        waiting = asyncio.ensure_future(shares.turn("x", leaves))
        behind = asyncio.ensure_future(shares.turn("x", stays))
        await settle()
        leaves.set()
        assert await waiting is False
        shares.leave("x", None)  # never ran
        assert shares.enter("x") is None  # its place is free again
        shares.leave("x", 0)  # the first ends: the turn goes to the one still waiting
        assert await behind is True and shares.running("x") == 1

    asyncio.run(scenario())


def test_a_cancelled_waiter_hands_its_turn_on() -> None:
    async def scenario() -> None:
        shares = WorkShares(total=64, per_caller=3)
        never = asyncio.Event()
        for _ in range(3):
            shares.enter("x")
        assert await shares.turn("x", never)
        second = asyncio.ensure_future(shares.turn("x", never))
        third = asyncio.ensure_future(shares.turn("x", never))
        await settle()
        shares.leave("x", COSTLY_UNITS)  # the turn is the second's...
        second.cancel()  # ...which is cancelled (the server shutting down) before it runs
        with pytest.raises(asyncio.CancelledError):
            await second
        assert await third is True and shares.running("x") == 1

    asyncio.run(scenario())


def test_idle_callers_are_forgotten_when_there_are_many() -> None:
    shares = WorkShares(total=10, per_caller=2)
    shares._PRUNE_AT = 100
    shares.enter("busy")
    for i in range(250):
        assert shares.enter(f"c{i}") is None
        shares.leave(f"c{i}", None)
    assert len(shares._shares) <= 101 and "busy" in shares._shares


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket() -> None:
    clock = Clock()
    limiter = RateLimiter(60, 3, clock=clock)  # one a second, three at once
    assert [limiter.acquire("a") for _ in range(3)] == [None, None, None]
    wait = limiter.acquire("a")
    assert wait == pytest.approx(1.0)
    assert limiter.acquire("b") is None  # its own bucket
    clock.now += 0.5
    assert limiter.acquire("a") == pytest.approx(0.5)
    clock.now += 0.5
    assert limiter.acquire("a") is None
    clock.now += 100  # refills up to the burst, no more
    assert [limiter.acquire("a") for _ in range(4)][-1] is not None
    assert RateLimiter(0, 1).acquire("a") is None  # off


def test_token_bucket_is_thread_safe() -> None:
    limiter = RateLimiter(1, 500, clock=lambda: 0.0)
    allowed = []

    def hammer() -> None:
        allowed.extend(x is None for x in (limiter.acquire("k") for _ in range(200)))

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(allowed) == 500


def test_buckets_are_pruned() -> None:
    clock = Clock()
    limiter = RateLimiter(60, 1, clock=clock)
    limiter._PRUNE_AT = 10
    for i in range(10):
        limiter.acquire(f"c{i}")
    clock.now += 10
    limiter.acquire("last")
    assert len(limiter._buckets) == 1


def test_pruning_costs_no_scan_per_request_when_no_bucket_is_full() -> None:
    """Many callers inside one refill window (wrong keys from many addresses, a local
    script changing its User-Agent) leave no bucket full. Before, every request past
    the pruning size then scanned every bucket, finding none to forget: work per
    request growing with the callers, quadratic in all."""
    clock = Clock()
    limiter = RateLimiter(20, 20, clock=clock)  # as --auth-failures 20: 3 s to refill one
    limiter._PRUNE_AT = 100
    scans = 0
    prune = limiter._prune

    def counting(now: float) -> None:
        nonlocal scans
        scans += 1
        prune(now)

    limiter._prune = counting  # type: ignore[method-assign]
    for i in range(5_000):
        limiter.acquire(f"address:{i}")
    assert len(limiter._buckets) == 5_000  # none was full: none forgotten
    assert scans <= 10  # each scan once the buckets doubled, not one per request
    clock.now += 10  # all full again: the next scan forgets them
    for i in range(5_000, 15_000):
        limiter.acquire(f"address:{i}")
    assert len(limiter._buckets) < 15_000 and scans <= 20


def test_validation_locations_become_field_names() -> None:
    assert field_of(("body", "messages", "list[MessageIn]", 0, "content")) == "messages[0].content"
    assert field_of(("body", "messages", "str")) == "messages"
    assert field_of(("query", "limit")) == "limit"
    assert field_of(("body",)) == "body"
    errors = [
        {"type": "string_type", "loc": ("body", "messages", "str"), "msg": "Input should be a valid string"},
        {"type": "list_type", "loc": ("body", "messages", "list[MessageIn]"), "msg": "Input should be a valid list"},
    ]
    assert describe_validation(errors) == ("messages", "must be a string or a list")
