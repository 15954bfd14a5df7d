"""ServerLimits, the rate syntax of --rate-limit, and the token bucket (pure, with a fake clock)."""

from __future__ import annotations

import threading

import pytest

from memorist.errors import ConfigurationError
from memorist.server import ServerLimits
from memorist.server.errors import describe_validation, field_of
from memorist.server.limits import RateLimiter, parse_rate


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
    for bad in ({"max_body_bytes": 0}, {"max_messages": True}, {"burst": 1.5}, {"rate_per_minute": -1}, {"rate_per_minute": float("nan")}):
        with pytest.raises(ConfigurationError):
            ServerLimits(**bad)


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
