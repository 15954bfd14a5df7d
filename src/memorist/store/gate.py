"""Searches side by side, or one erasure: what keeps a search from showing, and
logging, what an erasure removed while it ran.

A search reads its candidates, ranks them and records their retrieval (an event
holding its query and the ids it returned) in several steps; the store's other
callers go on between them. An erasure that ran between two steps would leave the
search showing the erased texts, and its retrieval logged after the erasure, whole.
So a store lets each search (its :meth:`~memorist.store.base.Store.reading` group)
in through :meth:`SearchGate.search`, and each erasure through
:meth:`SearchGate.erasure`: an erasure waits for the searches under way and keeps
new ones out until it has ended; searches never wait for each other.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class SearchGate:
    """Many searches at once, or one erasure (see the module's docstring). Not
    re-entrant: a store enters it at its outermost reading group only."""

    __slots__ = ("_cond", "_erasing", "_searches")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._searches = 0
        self._erasing = False  # an erasure waiting for the searches, or under way

    @contextmanager
    def search(self) -> Iterator[None]:
        with self._cond:
            while self._erasing:
                self._cond.wait()
            self._searches += 1
        try:
            yield
        finally:
            with self._cond:
                self._searches -= 1
                if not self._searches:
                    self._cond.notify_all()

    @contextmanager
    def erasure(self) -> Iterator[None]:
        with self._cond:
            while self._erasing:  # one erasure at a time
                self._cond.wait()
            self._erasing = True  # no new search from now on
            try:
                while self._searches:
                    self._cond.wait()
            except BaseException:
                self._erasing = False
                self._cond.notify_all()
                raise
        try:
            yield
        finally:
            with self._cond:
                self._erasing = False
                self._cond.notify_all()
