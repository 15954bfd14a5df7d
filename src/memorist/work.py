"""The work of one call, counted as it is done, and given up when its caller leaves.

A library call runs to its end in the caller's thread. A service needs two more
things of the calls it makes for its clients: to stop one whose client has gone
(the client cannot be answered, so the rest of the work is waste), and to know
what a call cost, so that its rate limiter charges a costly call more than a cheap
one. :func:`metered` opens a :class:`Meter` around a call; the loops whose length
grows with the store (the candidates a search reads, the checks of a filter)
report their work with :func:`charge`, which adds it to the meter and raises
:class:`~memorist.errors.CancelledCallError` once the meter was cancelled.

The meter is a context variable rather than an argument of every call because it
belongs to the caller's request, not to the call's meaning, and because it must
follow the call into the thread that runs it (``asyncio``, AnyIO and Starlette's
thread pools copy the context). Outside :func:`metered` a charge is one look-up
and nothing else.

Units: one unit is one memory record read or scored, or one unit of a filter's checking
(about 0.2 µs: :mod:`memorist.policies.filters`, where a condition checked against one
memory costs four).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .errors import CancelledCallError


class Meter:
    """The work counted for one call (``units``), and whether its caller has left.

    Thread-safe enough for its use: one call's thread charges, another thread (the
    service's event loop) cancels; a lost update of ``units`` only under-counts by
    one charge.
    """

    __slots__ = ("_cancelled", "units")

    def __init__(self) -> None:
        self.units = 0
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Give the call up: its next :func:`charge` raises."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def charge(self, units: int) -> None:
        self.units += units
        if self._cancelled.is_set():
            raise CancelledCallError("the call was given up: its caller left before it ended")


_current: ContextVar[Meter | None] = ContextVar("memorist_work_meter", default=None)


@contextmanager
def metered(meter: Meter | None = None) -> Iterator[Meter]:
    """Count the work of the calls made inside the block on ``meter`` (a new one by default)."""
    meter = meter if meter is not None else Meter()
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def charge(units: int) -> None:
    """Count ``units`` of work on the current meter (if any); raise
    :class:`~memorist.errors.CancelledCallError` if its caller has left."""
    meter = _current.get()
    if meter is not None:
        meter.charge(units)


def current() -> Meter | None:
    """The meter of the call being made, or None."""
    return _current.get()


__all__ = ["Meter", "charge", "current", "metered"]
