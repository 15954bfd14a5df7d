"""Approximate nearest-neighbour search for large spaces: an HNSW graph from usearch.

Below :data:`DEFAULT_THRESHOLD` live vectors a space is searched exactly (one
matrix-vector product, see :mod:`.vector_index`); above it the exact product grows
past a few milliseconds (about 6 ms at 100k memories, 60 ms at 1M on one core
here), so the space also gets a graph. The design, and why:

- **The graph only proposes candidates; scores stay exact cosines.** usearch keeps
  its own copy of each vector quantised to int8 (384 bytes at 384 dims, a quarter
  of the float32 copy the space index keeps anyway) and ranks with it; the
  candidates are then scored from the float32 vectors, so a search through the
  graph returns the same scores as the exact search, only possibly missing some
  of the true top ``k``. Fetching several times ``k`` before rescoring is what
  keeps recall@10 >= 0.95 despite the int8 distances (bench/scale.py).
- **Writes never wait for the graph.** Inserting into an HNSW graph costs about
  0.1-0.2 ms a vector here, more than a whole batched add, so rows are appended
  to the space index as before and one background thread per process inserts
  them into the graph in short steps (usearch releases the GIL meanwhile). Rows
  the graph does not cover yet form a contiguous tail of positions that every
  search scores exactly, so a search never misses a row because the graph lags,
  and a space loaded from the store is searched exactly until its graph is built.
- **A bulk load keeps the CPU.** While a space is being written to, the thread
  waits until writes pause for :data:`QUIET` seconds, unless the rows the graph
  lacks reach the space's threshold (the size up to which exact search is cheap):
  on two cores the graph's inserts (about 0.4 ms a vector at 1M) took a third of a
  bulk load's speed away, for rows it could not keep up with anyway.
- **Graph keys are the graph's own sequence numbers**, mapped to positions of the
  space index by one array. Removed rows stay in the graph as dead keys and are
  dropped when candidates are checked; when the space index compacts, the map is
  renumbered in one numpy step and, if most keys are dead, a fresh graph is built
  in the background while the old one keeps serving.
- **Filters** (run, validity, time window, speaker) are applied to the candidates:
  the fetch grows with how many of the graph's keys a filter leaves, and a filter
  that leaves few rows is searched exactly over just those rows (see
  ``SpaceIndex.search``).
- **Nothing is persisted.** A graph lives as long as its space index and is
  rebuilt from the store's rows when a process loads the space (about
  5-10k vectors/s per core here), searched exactly until then.

usearch is the optional extra ``ann`` (``pip install 'memorist[ann]'``); without it
large spaces are searched exactly, and the first one to cross the threshold logs
how to enable it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: Live vectors above which a space is searched through a graph (0 turns it off).
#: Measured in bench/scale.py: below about 20k the exact product (about 1 ms) is
#: as fast as the graph plus rescoring, and needs no build.
DEFAULT_THRESHOLD = 20_000
#: Seconds without writes to a space after which its graph takes the rows it lacks.
QUIET = 1.0


@dataclass(frozen=True, slots=True)
class AnnParams:
    """usearch settings (bench/scale.py measured them on clustered 384-dim vectors)."""

    connectivity: int = 32  # HNSW neighbours per node
    expansion_add: int = 64  # beam width while inserting: build speed against graph quality
    expansion_search: int = 128  # beam width of a search up to 100k (see expansion_for)
    dtype: str = "i8"  # the graph's copy of each vector; scores come from float32
    overfetch: int = 2  # candidates fetched per result wanted, before rescoring
    min_fetch: int = 40


# One step of the background thread holds a graph's lock this long at most (roughly):
# a search waits for it, so it is short. usearch releases the GIL while it inserts,
# so the rest of the process runs meanwhile; only a search of this graph waits.
_STEP_SECONDS = 0.002
# A step while nobody has searched the space for :data:`_SEARCHED` seconds (a bulk
# load): longer, so that the thread takes the GIL back from the writer a tenth as
# often (each short step does some Python work around usearch's call).
_BULK_STEP_SECONDS = 0.02
_SEARCHED = 1.0
# The longest a search waits for a step to end before searching exactly instead
# (an exact search of 100k rows costs a few ms: waiting longer does not pay).
_SEARCH_WAIT = 0.002
# The fewest rows a step inserts (a row costs 0.1-0.5 ms, more as the graph grows).
_STEP_MIN_ROWS = 4
# While searches of the space are running the thread waits this long between looks,
# so that they have the cores (on two cores a building thread took a third off a burst
# of searches right after a bulk load)...
_SEARCH_YIELD = 0.002
# ... but takes a step at least this often, so that a space searched without pause
# still gets its graph.
_YIELD_AT_MOST = 0.05

# (published, the vectors at given positions (one row each), has_vector, alive) of
# the space index, or None once it is gone.
Source = Callable[[], "tuple[int, Callable[[np.ndarray], np.ndarray], np.ndarray, np.ndarray] | None"]

_warned_missing = False


def usearch_index() -> Any | None:
    """usearch's ``Index`` class, or None (logged once) when the extra is not installed."""
    global _warned_missing
    try:
        from usearch.index import Index
    except ImportError:
        if not _warned_missing:
            _warned_missing = True
            log.warning(
                "a space holds more memories than the approximate-search threshold, but usearch is not "
                "installed: searching it exactly (slower as it grows). pip install 'memorist[ann]' to enable it"
            )
        return None
    return Index


def expansion_for(keys: int, base: int) -> int:
    """The search beam for a graph of ``keys``: ``base`` up to 100k, then ``base`` more
    per tenfold growth. At a fixed beam HNSW's recall falls as the graph grows: with
    128, recall@10 was 0.99 at 100k but 0.95 at 1M (bench/scale.py); 256 at 1M
    gives 0.98 for about 0.6 ms more.
    """
    return max(base, int(base * math.log10(max(keys, 1) / 10_000)))


class _Graph:
    """One usearch graph; key ``i`` stands for position ``ids[i]`` of the space index (-1: gone)."""

    __slots__ = ("index", "ids", "count", "covered", "_base_expansion")

    def __init__(self, index_cls: Any, dim: int, params: AnnParams) -> None:
        self.index = index_cls(
            ndim=dim,
            metric="cos",
            dtype=params.dtype,
            connectivity=params.connectivity,
            expansion_add=params.expansion_add,
            expansion_search=params.expansion_search,
        )
        self._base_expansion = params.expansion_search
        self.ids = np.full(1024, -1, dtype=np.int64)
        self.count = 0  # keys used
        self.covered = 0  # positions below this were offered to the graph

    def add(self, positions: np.ndarray, vectors: np.ndarray, threads: int) -> None:
        end = self.count + positions.shape[0]
        if end > self.ids.shape[0]:
            ids = np.full(max(end, 2 * self.ids.shape[0]), -1, dtype=np.int64)
            ids[: self.count] = self.ids[: self.count]
            self.ids = ids
        self.index.add(np.arange(self.count, end, dtype=np.uint64), vectors, threads=threads)
        self.ids[self.count : end] = positions
        self.count = end
        expansion = expansion_for(end, self._base_expansion)
        if expansion != self.index.expansion_search:
            self.index.expansion_search = expansion

    def search(self, query: np.ndarray, count: int) -> np.ndarray:
        # usearch widens its beam to ``count`` when that is larger than expansion_search.
        found = self.index.search(query, count, threads=1)
        return self.ids[np.asarray(found.keys, dtype=np.int64)]

    def dead(self) -> int:
        return int(np.count_nonzero(self.ids[: self.count] < 0))


class AnnIndex:
    """The graph of one space index, kept in step with it by the background thread.

    The space index appends rows and then publishes how many positions are written
    (``Source``); the thread inserts published rows into the graph. Every use of a
    graph holds :attr:`lock`.
    """

    def __init__(self, dim: int, source: Source, index_cls: Any, params: AnnParams | None = None) -> None:
        self.dim = dim
        self.params = params or AnnParams()
        self.lock = threading.RLock()
        self._source = source
        self._index_cls = index_cls
        # What searches use: the first graph serves as it grows (the rows it does
        # not cover yet are scored exactly).
        self.current: _Graph | None = self._new_graph()
        self.building: _Graph | None = None  # a fresh graph being built to replace it
        self.broken = False  # usearch failed, or the space dropped its graph: searches stay exact
        self._rate = 2000.0  # vectors inserted per second, to size steps
        self._queued = False
        self._dirty = False
        #: Rows the graph may lag behind by while writes go on (the space's threshold).
        self.lag = DEFAULT_THRESHOLD
        self._last_write = 0.0
        self._last_search = -math.inf
        # Searches waiting for :attr:`lock`: the background thread lets them in
        # between its steps (a released lock is not handed to a waiter).
        self.waiting = 0
        # Searches of the space running now (counted by the space index, under its
        # store's lock): the thread yields to them (:meth:`deferral`).
        self.searching = 0
        self._last_step = 0.0
        _ALL.add(self)

    def _new_graph(self) -> _Graph:
        return _Graph(self._index_cls, self.dim, self.params)

    def notify(self) -> None:
        """Rows were published: let the background thread insert them."""
        self._last_write = time.monotonic()
        if not self.broken:
            _worker().submit(self)

    def covered(self) -> int:
        """Positions below this are in the searchable graph (0: no graph yet)."""
        graph = self.current
        return 0 if graph is None else graph.covered

    def keys(self) -> int:
        """Keys in the searchable graph, dead ones included."""
        graph = self.current
        return 0 if graph is None else graph.count

    def pending(self) -> int:
        """Published rows the searchable graph does not cover yet."""
        source = self._source()
        return 0 if source is None else max(0, source[0] - self.covered())

    def deferral(self) -> float:
        """Seconds the background thread waits before inserting (0: at once).

        Writes are going on and the graph lacks fewer rows than :attr:`lag`: they
        are searched exactly meanwhile, and the writer keeps the CPU. Searches are
        running: they keep the cores, for :data:`_YIELD_AT_MOST` at most.
        """
        now = time.monotonic()
        if self.searching and now - self._last_step < _YIELD_AT_MOST:
            return _SEARCH_YIELD
        wait = self._last_write + QUIET - now
        return wait if wait > 0 and self.pending() < self.lag else 0.0

    def step_seconds(self) -> float:
        """How long the background thread's next step may hold :attr:`lock`: short
        while the space is being searched, longer when nobody searched it lately."""
        return _STEP_SECONDS if time.monotonic() - self._last_search < _SEARCHED else _BULK_STEP_SECONDS

    def step(self, *, seconds: float = _STEP_SECONDS, threads: int = 1, background: bool = False) -> bool:
        """Insert about ``seconds`` worth of published rows; whether more remain.

        ``background``: not while writes go on (:meth:`deferral`, checked again
        here: rows may have been published while this waited for the lock).
        """
        with self.lock:
            if background and self.deferral():
                return True
            graph = self.building or self.current
            source = self._source()
            if graph is None or source is None or self.broken:
                return False
            published, rows_at, has_vector, alive = source
            start = graph.covered
            if start < published:
                end = min(published, start + max(_STEP_MIN_ROWS, int(self._rate * seconds * max(threads, 1))))
                positions = start + np.flatnonzero(has_vector[start:end] & alive[start:end])
                if positions.size:
                    began = time.perf_counter()
                    try:
                        graph.add(positions, rows_at(positions), threads)
                    except Exception:
                        self.broken = True
                        self.current = self.building = None
                        log.exception("the approximate-search graph failed; searching this space exactly")
                        return False
                    elapsed = time.perf_counter() - began
                    if elapsed > 0:
                        # Smoothed, per thread: steps stay near their time budget.
                        self._rate = 0.7 * self._rate + 0.3 * positions.size / elapsed / max(threads, 1)
                graph.covered = end
                self._last_step = time.monotonic()
            if graph is self.building and graph.covered >= published:
                self.current, self.building = graph, None  # caught up: it takes over
            return graph.covered < published

    def catch_up(self, *, threads: int = 0, timeout: float | None = None) -> bool:
        """Insert every published row now, in this thread; False if ``timeout`` ran out.

        ``threads=0`` uses every core (the background thread uses one).
        """
        threads = threads or os.cpu_count() or 1
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.step(seconds=0.25, threads=threads):
            if deadline is not None and time.monotonic() > deadline:
                return False
        return not self.broken

    def search(self, query: np.ndarray, count: int) -> tuple[np.ndarray, int, int] | None:
        """Positions of up to ``count`` near neighbours (-1: removed since), the
        positions the graph covers, and the keys it holds; None without a graph."""
        self._last_search = time.monotonic()
        self.waiting += 1
        try:
            got = self.lock.acquire(timeout=_SEARCH_WAIT)
        finally:
            self.waiting -= 1
        if not got:
            return None  # a step overran (its thread descheduled): search exactly
        try:
            graph = self.current
            if graph is None or graph.count == 0:
                return None
            return graph.search(query, count), graph.covered, graph.count
        finally:
            self.lock.release()

    def let_searches_in(self, limit: float = 0.05) -> None:
        """Wait (up to ``limit`` seconds) while searches wait for the lock: called
        by the background thread between steps, so that a search waits for one
        step at most, not for a run of them."""
        deadline = time.monotonic() + limit
        while self.waiting and time.monotonic() < deadline:
            time.sleep(0.0001)

    def renumber(self, keep: np.ndarray) -> None:
        """The space index kept only positions ``keep`` (sorted), renumbered 0, 1, ...

        Call with :attr:`lock` held, before the index publishes its new rows. A graph
        that is mostly dead keys afterwards is replaced by a fresh one, built in the
        background while it keeps serving.
        """
        old_size = int(keep[-1]) + 1 if keep.size else 0
        for graph in (self.current, self.building):
            if graph is None:
                continue
            size = max(old_size, int(graph.ids[: graph.count].max(initial=-1)) + 1)
            new_of_old = np.full(size + 1, -1, dtype=np.int64)  # the last slot maps -1 to -1
            new_of_old[keep] = np.arange(keep.shape[0], dtype=np.int64)
            graph.ids[: graph.count] = new_of_old[graph.ids[: graph.count]]
            graph.covered = int(np.searchsorted(keep, graph.covered))
        if self.current is not None and self.building is None and 2 * self.current.dead() > self.current.count:
            self.building = self._new_graph()

    def close(self) -> None:
        """No longer wanted: free the graphs, and let the background thread drop it."""
        with self.lock:
            self.broken = True
            self.current = self.building = None

    def _forget(self) -> None:
        """After a fork: the parent's threads and locks are not ours.

        The graphs are left alone, not freed: the parent's thread may have been
        inside one of them, holding its internal locks. A new graph is built (from
        the next search or write on); searches are exact until then.
        """
        _ORPHANS.extend(g for g in (self.current, self.building) if g is not None)
        self.lock = threading.RLock()
        self.current = None if self.broken else self._new_graph()
        self.building = None
        self._queued = self._dirty = False


class _Worker:
    """The process's background thread: inserts published rows into graphs, a step at a time."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[AnnIndex] = deque()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def submit(self, ann: AnnIndex) -> None:
        with self._cond:
            if self._stopping:
                return
            if ann._queued:
                ann._dirty = True  # it is being worked on: look again after this step
                return
            ann._queued = True
            self._queue.append(ann)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="memorist-ann", daemon=True)
                self._thread.start()
            self._cond.notify()

    def stop(self, timeout: float) -> None:
        """Let the current step finish and end the thread.

        At exit: a daemon thread killed inside usearch (which runs its own C++
        threads) aborts the whole process.
        """
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        # Background work yields the CPU to the process's requests (Linux: per
        # thread); at full priority it took half a bulk load's speed. Niced, it may
        # be descheduled in the middle of a step with the graph's lock held: a search
        # waits _SEARCH_WAIT (2 ms) at most for it, then searches exactly.
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                ann = self._queue.popleft()
                delay = ann.deferral()
                if delay:
                    # Still queued; a write or the end of the quiet time wakes this.
                    self._queue.append(ann)
                    self._cond.wait(delay)
                    continue
                ann._dirty = False
            try:
                more = ann.step(seconds=ann.step_seconds(), background=True)
                ann.let_searches_in()
            except Exception:  # a bug must not kill the thread every other space relies on
                log.exception("approximate-search indexing step failed")
                ann.broken = True
                more = False
            with self._cond:
                if more or ann._dirty:
                    ann._dirty = False
                    self._queue.append(ann)  # round robin between spaces
                else:
                    ann._queued = False


_ALL: weakref.WeakSet[AnnIndex] = weakref.WeakSet()
_ORPHANS: list[_Graph] = []  # graphs a forked child inherited and must never touch
_WORKER: _Worker | None = None
_WORKER_LOCK = threading.Lock()


def _worker() -> _Worker:
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = _Worker()
        return _WORKER


def _after_fork_in_child() -> None:
    global _WORKER, _WORKER_LOCK
    _WORKER = None
    _WORKER_LOCK = threading.Lock()
    for ann in list(_ALL):
        ann._forget()


def _stop_at_exit() -> None:
    with _WORKER_LOCK:
        worker = _WORKER
    if worker is not None:
        worker.stop(timeout=5.0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_stop_at_exit)


def fetch_size(k: int, keys: int, eligible: int, params: AnnParams) -> int:
    """Candidates to ask the graph for so that about ``k`` survive the filters.

    ``keys`` is what the graph holds (dead keys included), ``eligible`` how many of
    them a search may return.
    """
    share = eligible / max(keys, 1)
    return min(keys, max(params.min_fetch, math.ceil(params.overfetch * k / max(share, 1e-9))))
