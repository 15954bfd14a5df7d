"""The connections of ``memorist serve``: deadlines for each, and a cap on them all.

uvicorn closes a kept-alive connection left idle for ``timeout_keep_alive``
seconds, but nothing else: a connection that sends nothing, or a request head one
byte at a time, or a body that never ends, stays open for as long as its client
likes, and its ``limit_concurrency`` counts open connections, so a client that
holds many of them has every other request refused. At the process's descriptor
limit the server cannot even accept a health check. :class:`ConnectionGuard`
(through :class:`GuardedH11Protocol`, the HTTP protocol ``memorist serve`` gives
uvicorn) adds what is missing:

- a **head deadline**: from the moment a connection waits for a request (it was
  opened, or its last answer was sent), the request's line and headers must have
  arrived within ``timeout_head`` seconds, however they trickle in;
- a **body deadline**: a request's body must have arrived ``timeout_body`` seconds
  after its head (the service answers 408 then; the connection is closed a few
  seconds later if the application did not read the body);
- a **reading deadline**: an answer the client stops reading (the socket's buffer
  full, so the application waits to write) must start moving again within
  ``timeout_body`` seconds, else the connection is closed and the request's work
  slot freed;
- a **cap** of ``max_connections`` open connections, kept under the descriptor
  limit with room to spare: asyncio accepts up to ``backlog`` connections at a time
  before any of them is seen here, so the listening backlog is kept to a quarter
  of that room (:func:`accept_backlog`). A connection accepted over the cap closes another: of the connections
  that are waiting (for a request's head or body, not being answered), the one
  that has waited longest. Not the newest: the newest is the one just accepted,
  most likely a health check or a real client about to send its request, and an
  attacker opening connections as fast as it can would otherwise shed every
  newcomer; the one waiting longest is the nearest to its own deadline anyway, so
  shedding it only brings that deadline forward. Only when every other connection
  is being answered is the newcomer closed itself.

The deadlines are checked once a second (:attr:`ConnectionGuard.period`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("memorist.server")

#: Descriptors kept free of connections: the store's files, the thread pool's, logs,
#: and the connections accepted in one go before the cap sees them.
RESERVED_DESCRIPTORS = 256


def descriptor_limit(*, raise_soft: bool = True) -> int:
    """The process's open-file limit, after raising the soft limit to the hard one
    (as servers do: the hard limit is what the operator allowed)."""
    try:
        import resource
    except ImportError:  # pragma: no cover (Windows: no descriptor limit of this kind)
        return 8192
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if raise_soft and hard != resource.RLIM_INFINITY and soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # pragma: no cover (a platform that refuses)
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def default_max_connections(limit: int) -> int:
    """The connection cap under a descriptor limit: what the reserve leaves, at least 16."""
    return max(16, limit - max(RESERVED_DESCRIPTORS, limit // 4))


def accept_backlog(limit: int, max_connections: int) -> int:
    """The listening backlog: asyncio accepts as many connections in one go, each a
    descriptor before the guard sees it, so it is a quarter of the descriptors the
    cap leaves (from 16 to 2048)."""
    return max(16, min(2048, (limit - max_connections) // 4))


class ConnectionGuard:
    """The open connections of one server, their deadlines and their cap."""

    period = 1.0

    def __init__(self, *, max_connections: int, timeout_head: float, timeout_body: float) -> None:
        self.max_connections = max_connections
        self.timeout_head = timeout_head
        self.timeout_body = timeout_body
        # The service answers 408 at timeout_body; past this the connection goes.
        self.body_deadline = timeout_body + 5.0
        self.open: dict[GuardedH11Protocol, None] = {}
        # Dropped by the guard, not yet gone (their descriptors go on the loop's next
        # turn): in ``open`` until then, but not counted for the cap (a newcomer then
        # closes no other) and never chosen again.
        self.closing: set[GuardedH11Protocol] = set()
        self.shed = 0  # connections closed for the cap
        self.expired = 0  # connections closed for a deadline
        self._sweeping: asyncio.TimerHandle | None = None

    def opened(self, conn: GuardedH11Protocol) -> None:
        self.open[conn] = None
        if len(self.open) - len(self.closing) > self.max_connections:
            self._shed(conn)
        if self._sweeping is None:
            self._sweeping = conn.loop.call_later(self.period, self._sweep, conn.loop)

    def closed(self, conn: GuardedH11Protocol) -> None:
        self.open.pop(conn, None)
        self.closing.discard(conn)

    def _close(self, conn: GuardedH11Protocol) -> None:
        """Drop ``conn`` at once, with whatever it still had to send (see
        :meth:`GuardedH11Protocol.close`)."""
        self.closing.add(conn)
        conn.close()

    def _shed(self, newcomer: GuardedH11Protocol) -> None:
        victim, since = newcomer, None
        for conn in self.open:
            if conn in self.closing:
                continue
            waiting = conn.waiting_since()
            if conn is not newcomer and waiting is not None and (since is None or waiting < since):
                victim, since = conn, waiting
        if self.shed % 1000 == 0:
            log.warning("%d connections open (the cap): closing the one waiting longest", len(self.open))
        self.shed += 1
        self._close(victim)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = time.monotonic()
        for conn in list(self.open):
            if conn in self.closing:
                continue
            waiting = conn.waiting_since()
            if waiting is None:
                continue
            if conn.writing_paused():
                limit = self.timeout_body
            elif conn.receiving_body():
                limit = self.body_deadline
            else:
                limit = self.timeout_head
            if now - waiting > limit:
                self.expired += 1
                self._close(conn)
        self._sweeping = loop.call_later(self.period, self._sweep, loop) if self.open else None


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under a :class:`ConnectionGuard` (``guard``, set by
    :func:`protocol_class`)."""

    guard: ConnectionGuard

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._idle_since: float | None = None  # waiting for a request's head since
        self._head_at = 0.0  # the current request's head arrived at
        self._seen: object = None
        self._paused_at: float | None = None  # the client stopped reading our answer at

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._idle_since = time.monotonic()
        self.guard.opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.closed(self)
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and self.cycle is not self._seen:
            self._seen = self.cycle
            self._head_at = time.monotonic()

    def on_response_complete(self) -> None:
        self._idle_since = time.monotonic()
        super().on_response_complete()

    def pause_writing(self) -> None:
        super().pause_writing()
        self._paused_at = time.monotonic()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._paused_at = None

    def writing_paused(self) -> bool:
        return self._paused_at is not None

    def receiving_body(self) -> bool:
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete and cycle.more_body

    def waiting_since(self) -> float | None:
        """Since when the connection waits for its client (to send a head or a body, or
        to read an answer), or None while its request is being worked on."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return self._idle_since
        if cycle.more_body:
            return self._head_at
        return self._paused_at

    def close(self) -> None:
        """Drop the connection now. Not ``transport.close()``: that waits until what
        is left to send has been sent, which a client that stopped reading never lets
        happen, so the connection (its descriptor, its buffered answer) stayed, and a
        shutdown waited for it."""
        self.transport.abort()


def protocol_class(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """The protocol class to give uvicorn (``http=``) for connections under ``guard``."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": guard})


__all__ = ["ConnectionGuard", "GuardedH11Protocol", "accept_backlog", "default_max_connections", "descriptor_limit", "protocol_class"]
