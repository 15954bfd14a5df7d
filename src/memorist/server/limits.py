"""What one request may cost: :class:`ServerLimits` and the per-key :class:`RateLimiter`.

The limits are data, read when the app is built (``create_app(limits=...)``,
``memorist serve --max-body-bytes ...``); the rate limiter is a token bucket per
caller (an API key, or the client of a development server). A request takes one
token when it is admitted and, when it is done, one more per :data:`WORK_PER_TOKEN`
units of work it did (:mod:`memorist.work`: memories read or scored, filter
conditions checked), so a costly search drains its caller's bucket as a hundred
cheap ones would. Failed key guesses have their own bucket per client address.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ConfigurationError
from ..validate import MAX_LIMIT

#: Defaults of :class:`ServerLimits` (and of ``memorist serve``'s options).
DEFAULT_MAX_BODY_BYTES = 1_048_576
DEFAULT_MAX_MESSAGES = 100
DEFAULT_MAX_TEXT_CHARS = 100_000
DEFAULT_RATE_PER_MINUTE = 600.0
DEFAULT_BURST = 60
DEFAULT_MAX_CONCURRENCY = 64
DEFAULT_TIMEOUT_KEEP_ALIVE = 5.0
DEFAULT_TIMEOUT_HEAD = 10.0
DEFAULT_TIMEOUT_BODY = 30.0
DEFAULT_AUTH_FAILURES_PER_MINUTE = 20.0
#: Units of work (memorist.work) one rate-limit token pays for, beyond the token
#: every request takes: a plain search does a few hundred, a 1,000-condition filter
#: checked against 5,000 memories five million (about a second of CPU: 500 tokens).
WORK_PER_TOKEN = 10_000


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Bounds on one request, and the request rate of one caller.

    ``max_body_bytes``: a larger body is refused with 413 (checked on the
    ``Content-Length`` header and on the bytes actually received).
    ``max_messages``: more messages in one add is 413.
    ``max_text_chars``: a longer message, query or memory text is 422 (the
    Memory's ``max_message_chars``).
    ``rate_per_minute`` and ``burst``: each caller's token bucket; 0 turns rate
    limiting off.
    ``auth_failures_per_minute``: requests with a wrong key one client address may
    make (bursts of as many); beyond, 429 before the key is even looked at. 0: no
    limit.
    ``max_concurrency``: ``/api/`` requests at work at once (their bodies read);
    beyond, 503 with ``Retry-After`` (``/healthz`` is never refused).
    ``timeout_body``: seconds a request's body may take to arrive (408 beyond).
    ``timeout_keep_alive``, ``timeout_head`` and ``max_connections`` bound the
    connections (:mod:`.connections`, used by ``memorist serve``): seconds an idle
    kept-alive connection stays open, seconds a request's head (its line and
    headers) may take from the moment the connection waits for it, and the open
    connections (None: from the process's descriptor limit).
    """

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_messages: int = DEFAULT_MAX_MESSAGES
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
    rate_per_minute: float = DEFAULT_RATE_PER_MINUTE
    burst: int = DEFAULT_BURST
    auth_failures_per_minute: float = DEFAULT_AUTH_FAILURES_PER_MINUTE
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    timeout_keep_alive: float = DEFAULT_TIMEOUT_KEEP_ALIVE
    timeout_head: float = DEFAULT_TIMEOUT_HEAD
    timeout_body: float = DEFAULT_TIMEOUT_BODY
    max_connections: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_messages", "max_text_chars", "burst", "max_concurrency", "max_connections"):
            value = getattr(self, name)
            if value is None and name == "max_connections":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT * 1024:
                raise ConfigurationError(f"{name} must be a whole number >= 1, got {value!r}")
        for name in ("rate_per_minute", "auth_failures_per_minute"):
            rate = getattr(self, name)
            if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate) or rate < 0:
                raise ConfigurationError(f"{name} must be a number >= 0 (0: no limit), got {rate!r}")
        for name in ("timeout_keep_alive", "timeout_head", "timeout_body"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 < value <= 86_400:
                raise ConfigurationError(f"{name} must be a number of seconds > 0 (at most a day), got {value!r}")


_UNITS = {"s": 60.0, "sec": 60.0, "second": 60.0, "m": 1.0, "min": 1.0, "minute": 1.0, "h": 1 / 60, "hour": 1 / 60}
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*([a-z]+))?\s*$")


def parse_rate(text: str) -> float:
    """``"600/min"`` (also ``/s``, ``/h``; a bare number is per minute; ``"0"`` or
    ``"off"``: no limit) as requests per minute."""
    if text.strip().lower() in ("off", "none", "0"):
        return 0.0
    match = _RATE.match(text.lower())
    unit = match.group(2) if match else None
    if match is None or (unit is not None and unit.rstrip("s") not in _UNITS and unit not in _UNITS):
        raise ConfigurationError(f"a rate is N/min, N/s or N/h (or 'off'), got {text!r}")
    factor = _UNITS.get(unit, _UNITS.get(unit.rstrip("s"), 1.0)) if unit else 1.0
    return float(match.group(1)) * factor


class RateLimiter:
    """A token bucket per caller: ``burst`` requests at once, refilled at
    ``rate_per_minute``. Thread-safe; buckets that are full again are forgotten
    when there are many, so memory stays bounded; the scan that finds them runs each
    time the buckets have doubled, so its cost per request stays constant."""

    _PRUNE_AT = 10_000

    def __init__(self, rate_per_minute: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate_per_minute / 60.0  # tokens per second
        self.burst = float(burst)
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens, at)
        # The size at which the next prune scans: twice what the last one kept, so a
        # scan that finds few full buckets is not repeated on every request after it.
        self._prune_next = 0

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def acquire(self, caller: str) -> float | None:
        """Take a token for ``caller``: None when allowed, else the seconds to wait."""
        if not self.enabled:
            return None
        now = self._clock()
        with self._lock:
            tokens, at = self._buckets.get(caller, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            if tokens >= 1.0:
                self._buckets[caller] = (tokens - 1.0, now)
                if len(self._buckets) > max(self._PRUNE_AT, self._prune_next):
                    self._prune(now)
                    self._prune_next = 2 * len(self._buckets)
                return None
            self._buckets[caller] = (tokens, now)
            return (1.0 - tokens) / self.rate

    def wait(self, caller: str) -> float | None:
        """Like :meth:`acquire` without taking the token: None when one is there."""
        if not self.enabled:
            return None
        now = self._clock()
        with self._lock:
            tokens, at = self._buckets.get(caller, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        return None if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def charge(self, caller: str, tokens: float) -> None:
        """Take ``tokens`` more from ``caller``'s bucket for work already done: it may go
        below zero, and the caller then waits until it has refilled past one."""
        if not self.enabled or tokens <= 0:
            return
        now = self._clock()
        with self._lock:
            have, at = self._buckets.get(caller, (self.burst, now))
            have = min(self.burst, have + (now - at) * self.rate)
            self._buckets[caller] = (have - tokens, now)

    def _prune(self, now: float) -> None:
        full = [k for k, (tokens, at) in self._buckets.items() if tokens + (now - at) * self.rate >= self.burst]
        for key in full:
            del self._buckets[key]


__all__ = ["WORK_PER_TOKEN", "RateLimiter", "ServerLimits", "parse_rate"]
