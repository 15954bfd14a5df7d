"""What one request may cost: :class:`ServerLimits`, the per-key :class:`RateLimiter`
and the requests at work, :class:`WorkShares`.

The limits are data, read when the app is built (``create_app(limits=...)``,
``memorist serve --max-body-bytes ...``); the rate limiter is a token bucket per
caller (an API key, or the client of a development server). A request takes one
token when it is admitted and, when it is done, one more per :data:`WORK_PER_TOKEN`
units of work it did (:mod:`memorist.work`: memories read or scored, filter
conditions checked), so a costly search drains its caller's bucket as a hundred
cheap ones would. Failed key guesses have their own bucket per client address.

The bucket alone cannot keep callers apart: a request's work is known only when it
is done, so a burst of costly requests is all admitted before the first is charged,
and while they run they hold the worker threads, and the tenant's store, every other
caller needs. So one caller has at most a share of the requests at work (a quarter
of them by default), and runs them as its work so far allows (:class:`WorkShares`):
costly ones one at a time, cheap ones side by side.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
import time
from collections import deque
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
#: Erasures one API key may start per minute (each rewrites the whole store: see
#: ``erasures_per_minute``).
DEFAULT_ERASURES_PER_MINUTE = 2.0
#: Units of work (memorist.work) one rate-limit token pays for, beyond the token
#: every request takes: a plain search does a few hundred, a filter checked for as
#: long as one call may five million (about a second of CPU: 500 tokens).
WORK_PER_TOKEN = 10_000
#: The largest whole-number limit (a body of about 1 GB, as many messages...).
MAX_WHOLE = MAX_LIMIT * 1024
#: Units of work after which a request counts as costly for its caller's window
#: (:class:`WorkShares`): about 40 ms of CPU.
COSTLY_UNITS = 20 * WORK_PER_TOKEN
#: Worker threads beyond ``max_concurrency``: for what runs outside the requests at
#: work (checking keys, ``/healthz``, the panel's files), so that it never waits for them.
SPARE_THREADS = 16


def default_caller_share(max_concurrency: int) -> int:
    """The requests one caller may have at work when nothing says otherwise: a
    quarter of ``max_concurrency`` (at least 2)."""
    return max(2, max_concurrency // 4)


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
    make (bursts of as many); beyond, that address's wrong keys get 429 (a valid key
    is always served). 0: no limit.
    ``erasures_per_minute``: erasures (not dry runs) one API key (without keys: one
    client) may start, in bursts of two; beyond, 429 with ``Retry-After``. An erasure
    rewrites the whole store to scrub it, holding every other write meanwhile (seconds
    on a large store): one key must not hold them again and again. 0: no limit.
    ``max_concurrency``: ``/api/`` requests at work at once (their bodies read:
    running, or waiting their caller's turn); beyond, 503 with ``Retry-After``
    (``/healthz`` is never refused).
    ``max_concurrency_per_caller``: those of one caller (an API key; on a
    development server, a client: address and ``User-Agent``, as its bucket);
    beyond, 429 with ``Retry-After``. None: :func:`default_caller_share`; never
    more than ``max_concurrency`` (:attr:`caller_share`).
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
    erasures_per_minute: float = DEFAULT_ERASURES_PER_MINUTE
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    timeout_keep_alive: float = DEFAULT_TIMEOUT_KEEP_ALIVE
    timeout_head: float = DEFAULT_TIMEOUT_HEAD
    timeout_body: float = DEFAULT_TIMEOUT_BODY
    max_connections: int | None = None
    max_concurrency_per_caller: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_messages", "max_text_chars", "burst", "max_concurrency", "max_connections",
                     "max_concurrency_per_caller"):
            value = getattr(self, name)
            if value is None and name in ("max_connections", "max_concurrency_per_caller"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WHOLE:
                raise ConfigurationError(f"{name} must be a whole number from 1 to {MAX_WHOLE:,}, got {value!r}")
        for name in ("rate_per_minute", "auth_failures_per_minute", "erasures_per_minute"):
            rate = getattr(self, name)
            if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate) or rate < 0:
                raise ConfigurationError(f"{name} must be a number >= 0 (0: no limit), got {rate!r}")
        for name in ("timeout_keep_alive", "timeout_head", "timeout_body"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 < value <= 86_400:
                raise ConfigurationError(f"{name} must be a number of seconds > 0 (at most a day), got {value!r}")

    @property
    def caller_share(self) -> int:
        """The ``/api/`` requests one caller may have at work at once."""
        share = self.max_concurrency_per_caller or default_caller_share(self.max_concurrency)
        return min(share, self.max_concurrency)


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
    rate = float(match.group(1)) * factor
    if not math.isfinite(rate):  # 400 digits are a float's infinity
        raise ConfigurationError(f"a rate must be a finite number, got {text!r}")
    return rate


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


class _Ticket:
    """A request waiting its turn: the event loop it waits on (a service may run on
    several, one a thread), its future there, and whether its turn was given."""

    __slots__ = ("future", "granted", "loop")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[None] = self.loop.create_future()
        self.granted = False

    def grant(self) -> None:
        """Its turn: woken on its own loop (never a future of another loop set here);
        RuntimeError if that loop is closed."""
        self.loop.call_soon_threadsafe(_wake, self.future)
        self.granted = True


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Share:
    """One caller's requests at work: how many run, those waiting their turn, and how
    many it may run at once (its window)."""

    __slots__ = ("in_service", "running", "waiting", "window")

    def __init__(self) -> None:
        self.in_service = 0  # running or waiting
        self.running = 0
        self.waiting: deque[_Ticket] = deque()
        self.window = 1


class WorkShares:
    """The ``/api/`` requests at work: at most ``total`` at once, at most ``per_caller``
    of one caller, and of those, as many running at once as the caller's window.

    A caller's requests beyond its window wait their turn here, in order; other
    callers' requests do not wait behind them. The window opens by one each time a
    request of the caller ends having done little work, up to ``per_caller``, and
    halves (to one at least) each time one did ``costly_units`` or more
    (:mod:`memorist.work`). A caller starts at one, so a burst of costly requests runs
    one at a time from the first: a tenant's store answers its reads one at a time,
    and a costly search keeps it while it checks its filter, so requests let in all
    at once would each keep every other caller of the tenant waiting, and would hold
    as many threads. Cheap requests open the window within a few answers; what a
    caller's window became is kept while it is known (its first requests, or those
    after a costly one, take turns even when they are only slow).

    The counts are kept under a lock and a waiter is woken on its own event loop: a
    service may run requests on several loops (a test client used without ``with``
    runs each on one of its own). What it knows of idle callers (their windows) is
    forgotten when there are many.
    """

    _PRUNE_AT = 10_000

    def __init__(self, total: int, per_caller: int, *, costly_units: int = COSTLY_UNITS) -> None:
        self.total = total
        self.per_caller = per_caller
        self.costly_units = costly_units
        self.at_work = 0
        self._shares: dict[str, _Share] = {}
        self._lock = threading.Lock()

    def enter(self, caller: str) -> str | None:
        """Count a request of ``caller`` as at work: None when it is, else which limit
        is reached: ``"service"`` (``total``) or ``"caller"`` (``per_caller``). A
        request counted must :meth:`leave`, and may run once :meth:`turn` says so."""
        with self._lock:
            if self.at_work >= self.total:
                return "service"
            share = self._shares.get(caller)
            if share is None:
                if len(self._shares) >= self._PRUNE_AT:
                    self._prune()
                share = self._shares[caller] = _Share()
            if share.in_service >= self.per_caller:
                return "caller"
            share.in_service += 1
            self.at_work += 1
            return None

    async def turn(self, caller: str, gone: asyncio.Event) -> bool:
        """Wait until the request may run: True then (it runs), False if ``gone`` was
        set first (its client left; it never ran)."""
        with self._lock:
            share = self._shares[caller]
            if share.running < share.window and not share.waiting:
                share.running += 1
                return True
            ticket = _Ticket()
            share.waiting.append(ticket)
        left = asyncio.ensure_future(gone.wait())
        try:
            await asyncio.wait((ticket.future, left), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            self._give_back(share, ticket)
            raise
        finally:
            left.cancel()
        with self._lock:
            if ticket.granted:
                return True  # its turn came (running counts it): it runs, even if its client just left
        self._give_back(share, ticket)
        return False

    def leave(self, caller: str, units: int | None) -> None:
        """A request :meth:`enter` counted is answered (or given up). ``units``: the work
        it did, None if it never ran."""
        with self._lock:
            share = self._shares[caller]
            share.in_service -= 1
            self.at_work -= 1
            if units is not None:
                share.running -= 1
                share.window = max(1, share.window // 2) if units >= self.costly_units else min(self.per_caller, share.window + 1)
            self._next(share)

    def window(self, caller: str) -> int:
        """The requests ``caller`` may run at once now."""
        with self._lock:
            share = self._shares.get(caller)
            return share.window if share is not None else 1

    def running(self, caller: str) -> int:
        """``caller``'s requests running now (not those waiting their turn)."""
        with self._lock:
            share = self._shares.get(caller)
            return share.running if share is not None else 0

    def _give_back(self, share: _Share, ticket: _Ticket) -> None:
        """A waiter that will not run: out of the line, or, if its turn was given, the
        turn to the next."""
        with self._lock:
            if ticket.granted:
                share.running -= 1
                self._next(share)
            elif ticket in share.waiting:
                share.waiting.remove(ticket)
        ticket.future.cancel()

    def _next(self, share: _Share) -> None:
        """Give turns while the window allows (the lock held)."""
        while share.waiting and share.running < share.window:
            ticket = share.waiting.popleft()
            try:
                ticket.grant()
            except RuntimeError:  # its loop is closed: nobody waits there any more
                continue
            share.running += 1

    def _prune(self) -> None:
        for caller in [c for c, share in self._shares.items() if not share.in_service]:
            del self._shares[caller]


__all__ = ["COSTLY_UNITS", "SPARE_THREADS", "WORK_PER_TOKEN", "RateLimiter", "ServerLimits", "WorkShares", "default_caller_share", "parse_rate"]
