"""Full text in the PostgreSQL store: the terms it writes, BM25 in SQL, and the
in-process indexes (BM25 and vectors) of its large spaces.

A memory's terms are a ``tsvector`` of :func:`memorist.policies.text.index_terms`
(the same stemmed terms SQLite's index holds), written by the store with positions
(:func:`full_text`), under a GIN index; a query matches memories holding any of its
terms (:func:`tsquery`), ranked by BM25 computed in the database with SQLite's
formula and statistics (:data:`BM25`: the scope's document count and average
length, kept per space by triggers). Not ``ts_rank``: it has no inverse document
frequency, and LoCoMo's recall fell 1.5 to 4.6 points with it (bench/RESULTS.md).

BM25 in SQL reads and scores every memory holding a query term: ~5 ms at 10k memories, ~70 ms at 100k and ~600 ms at a
million in one space (bench/RESULTS.md), because common words are held by a large
share of a space. The same ranking over an in-process inverted index
(:class:`~memorist.store.vector_index.SpaceIndex`, the one SQLite's store keeps)
takes ~2 ms at a million. Vectors likewise: pgvector scans a space exactly until its
HNSW index is built (hundreds of ms a search at 100k, and the build takes about a
minute), where the in-process index ranks by int8 codes, then exactly, in a few ms,
and by its own approximate graph once built (the ``ann`` extra). So a space of at
least ``above`` active memories is ranked in this process, by text and by vector:

- **Loaded** the first time a search needs it: at once when it is small enough
  (:data:`INLINE_LOAD` memories, under a second), on the search's own snapshot;
  a larger one in a background thread, which its searches wait for up to
  :data:`LOAD_WAIT` seconds before SQL answers them.
- **Kept current from the event log**, whichever process or machine wrote: each
  search reads the space's generation (moved by every write to it) and its last
  event in the same statement; when the generation moved, the memories named by
  the space's events since the index's last one are read again. A space's writers
  hold its advisory lock through their commit, so a space's events commit in
  ``seq`` order: a snapshot that holds one of them holds every earlier one, and no
  later commit can land below a position read. Terms are computed here from the
  memory's search text by this process's own :func:`~memorist.policies.text.index_terms`.
- **Warmed by bulk writes**: a write of :data:`WARM_AFTER` memories or more to one
  space brings its index up to date as soon as it commits (loading it once the space
  reaches ``above``), so the first search after a bulk load finds it ready.
- **Bounded**: at most ``max_rows`` memories over all loaded spaces (about 0.7 KB
  each for sentence-length memories, and 1.9 KB more for a 384-dimension vector,
  bench/RESULTS.md); the least recently searched
  space goes first, but not one searched in the last :data:`KEEP_FOR` seconds: a
  space that would need that stays in SQL, as does one larger than the bound, so
  two large spaces searched in turn do not reload each other forever. One space
  loads at a time (on one pooled connection); searches of the others go on in SQL.
- **Committed state only**: a search inside a write transaction is answered by SQL,
  which sees the transaction's own writes; the shared index holds none of them.
- **Reloaded after a reindex** that wrote every vector again, or when the store's
  first vector is written (:class:`Space`'s ``vectors``): no event of the space
  names those changes.

Scores are those of SQLite's index, and of the SQL path except for texts holding a
term more than 256 times or running past 16,383 terms (a ``tsvector`` keeps 256
positions of a term, up to position 16,383: SQL counts such a term less often).
Equal scores may come in another order. Vector scores are the cosines SQL gives
(float32); equal ones may come in another order too.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any, NamedTuple, TypeVar

from ...policies.text import index_terms
from ..base import UNNAMED_CHANGES_SQL
from ..vector_index import Row, SpaceIndex

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

# tsvector limits: a lexeme is at most 2,047 bytes, positions run to 16,383.
_LEXEME_BYTES = 2046
_MAX_POSITION = 16_383
_MAX_POSITIONS = 256


def _quote_lexeme(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def _usable(term: str) -> bool:
    return len(term.encode("utf-8", "surrogatepass")) <= _LEXEME_BYTES


def full_text(text: str) -> tuple[str, int]:
    """The ``tsvector`` literal of ``text``'s full-text terms with their positions, and
    how many terms it has (BM25's document length).

    Written out here, not parsed by PostgreSQL, so the stored terms are exactly
    :func:`~memorist.policies.text.index_terms` (the stemmer is Python's). A term's
    frequency is its number of positions (PostgreSQL keeps 256 of a term, and
    positions up to 16,383: a longer text's later repeats count less)."""
    terms = index_terms(text)
    positions: dict[str, list[int]] = {}
    for i, term in enumerate(terms, 1):
        if _usable(term):
            positions.setdefault(term, []).append(min(i, _MAX_POSITION))
    literal = " ".join(
        _quote_lexeme(t) + ":" + ",".join(map(str, sorted(set(p))[:_MAX_POSITIONS])) for t, p in positions.items()
    )
    return literal, len(terms)


def tsquery(terms: Sequence[str]) -> str:
    """The ``tsquery`` literal matching a memory that holds any of ``terms``."""
    return " | ".join(_quote_lexeme(t) for t in terms)


def query_terms(query: str) -> list[str]:
    """The distinct full-text terms of a query, as the index holds them."""
    return [t for t in dict.fromkeys(index_terms(query)) if _usable(t)]


# BM25 over the active memories of the scope's spaces, as SQLite's index computes it
# (memorist.store.vector_index): the document count and average length are the
# spaces' (kept by triggers), a term's document frequency is counted among the
# memories holding any query term (which include every one holding that term), and
# validity and run filter the scored memories afterwards, so they change no
# statistic. {spaces} and {keep} are SQL built from fixed text; values are parameters.
BM25 = (
    "WITH stats AS (SELECT sum(s.docs)::float8 AS n, sum(s.doc_terms)::float8 / greatest(sum(s.docs), 1) AS avgdl "
    "FROM spaces s WHERE {spaces}), "
    "hits AS (SELECT m.rowid, m.id, m.terms, m.term_count, m.run_id, m.created_at, m.updated_at, m.valid_to "
    "FROM memories m JOIN spaces s ON s.id = m.space_id WHERE {spaces} AND m.status = 'active' AND m.terms @@ %s::tsquery), "
    # Each matching term of each hit, with the columns its score and the filters read:
    # no join back to the hits on their rowid, which a planner that thinks a freshly
    # loaded table is empty made a nested loop of (4 s a search at 8,000 memories).
    "tf AS (SELECT h.rowid, h.id, h.term_count, h.run_id, h.created_at, h.updated_at, h.valid_to, t.lexeme, "
    "cardinality(t.positions) AS tf FROM hits h, unnest(h.terms) t WHERE t.lexeme = ANY(%s::text[])), "
    "df AS (SELECT lexeme, count(*)::float8 AS n FROM tf GROUP BY lexeme) "
    "SELECT m.id, sum(ln(1 + (st.n - df.n + 0.5) / (df.n + 0.5)) * m.tf * 2.2 "
    "/ (m.tf + 1.2 * (0.25 + 0.75 * m.term_count / greatest(st.avgdl, 1e-9)))) AS score "
    "FROM tf m JOIN df USING (lexeme) CROSS JOIN stats st "
    "WHERE true{keep} GROUP BY m.id, m.rowid ORDER BY score DESC, m.rowid LIMIT %s"
)

# in-process indexes ------------------------------------------------------------------
#: Active memories from which a space is ranked in process (0: never).
TEXT_INDEX_ABOVE = 10_000
#: The most memories held by the loaded indexes of one store (0: none).
TEXT_INDEX_ROWS = 1_000_000
#: Spaces of at most this many memories load inside the search that needs them.
INLINE_LOAD = 50_000
#: Seconds a search waits for a background load of its space before SQL answers it
#: (100,000 memories load in about 4 s here: SQL's searches meanwhile, an exact
#: scan each, took as long and slowed the load down).
LOAD_WAIT = 5.0
#: A catch-up naming more memories than this reloads the space instead.
CATCH_UP_MOST = 50_000
#: A write of at least this many memories to one space brings its index up to date at
#: once, loading it if it reached ``above`` (a bulk load: the first search after it
#: finds the space indexed); fewer are caught up by the next search.
WARM_AFTER = 100
#: The ``meta`` key a reindex that writes every vector again sets (see :class:`Space`).
VECTORS_REWRITTEN = "vectors_rewritten"
#: Seconds before a space whose load failed is tried again.
RETRY_AFTER = 60.0
#: A space searched this recently is not evicted to make room for another.
KEEP_FOR = 60.0
_CHUNK = 8192

_COLUMNS = "m.id, m.run_id, m.created_at, m.updated_at, m.valid_to, m.search_text, m.speaker, e.vector"
_FROM = "FROM memories m LEFT JOIN embeddings e ON e.memory_rowid = m.rowid"
_LOAD = f"SELECT {_COLUMNS} {_FROM} WHERE m.space_id = %s AND m.status = 'active' ORDER BY m.rowid"
# Two steps, each on its own index whatever the planner thinks of a freshly loaded
# table: the memories the space's events name (events_space), then those rows by id.
_NAMED_SINCE = (
    "SELECT DISTINCT memory_id FROM events WHERE space_id = %s AND seq > %s AND seq <= %s "
    "AND memory_id IS NOT NULL LIMIT %s"
)
_BY_ID = f"SELECT {_COLUMNS}, m.status {_FROM} WHERE m.id = ANY(%s) AND m.space_id = %s"
# The last event that changed memories without naming each (memorist.store.base.
# UNNAMED_CHANGES; found through the events_unnamed index): an index loaded before it
# reloads instead of catching up.
_UNNAMED_END = f"SELECT COALESCE(max(seq), 0) FROM events WHERE {UNNAMED_CHANGES_SQL}"


class _Entry:
    __slots__ = ("index", "lock", "unnamed", "used", "vectors")

    def __init__(self, index: SpaceIndex, unnamed: int, vectors: tuple[str | None, str | None]) -> None:
        self.index = index
        self.lock = threading.Lock()
        self.unnamed = unnamed  # the last such event when the index was loaded
        self.used = time.monotonic()  # when last searched
        self.vectors = vectors  # the store's vectors when loaded (see Space.vectors)


class Space(NamedTuple):
    """One space as a snapshot shows it."""

    id: int
    generation: int
    docs: int  # active memories
    end: int  # its last event
    #: The store's vector dimension and the last rewrite of every vector (a reindex):
    #: an index loaded under other values reloads (no event of the space names them).
    vectors: tuple[str | None, str | None]
    #: The store's embedder now (None: none recorded): another process may have
    #: re-embedded the store since this one bound its own.
    embedder: str | None = None


_SPACE = (
    "SELECT s.id, s.generation, s.docs, (SELECT COALESCE(max(e.seq), 0) FROM events e WHERE e.space_id = s.id), "
    f"(SELECT value FROM meta WHERE key = 'embedder_dim'), (SELECT value FROM meta WHERE key = '{VECTORS_REWRITTEN}'), "
    "(SELECT value FROM meta WHERE key = 'embedder_name') "
    "FROM spaces s WHERE {spaces} LIMIT 2"
)


class TextIndexes:
    """The loaded in-process indexes (BM25 and vectors) of one PostgreSQL store, by space id.

    ``connect`` gives a pooled connection (for background loads); ``decode`` turns a
    stored text column back into the text (the store's NUL escape).
    """

    def __init__(
        self,
        label: str,
        connect: Callable[[], AbstractContextManager[Any]],
        decode: Callable[[Any], Any],
        *,
        above: int = TEXT_INDEX_ABOVE,
        max_rows: int = TEXT_INDEX_ROWS,
    ) -> None:
        self.label = label
        self.above = above
        self.max_rows = max_rows
        self._connect = connect
        self._decode = decode
        self._lock = threading.Lock()
        self._entries: OrderedDict[int, _Entry] = OrderedDict()  # least recently searched first
        self._loading: dict[int, threading.Thread | None] = {}  # None: loading inside a search
        self._failed: dict[int, float] = {}  # space -> when its load failed (monotonic)
        self._closed = False

    @property
    def enabled(self) -> bool:
        return self.above > 0 and self.max_rows > 0

    # reading ------------------------------------------------------------------------------
    def read(
        self, conn: Any, found: Space | None, read: Callable[[SpaceIndex, Callable[[], AbstractContextManager[Any]]], _T]
    ) -> _T | None:
        """``read(index, unlocked)`` of the space ``found``'s (:func:`one_space`)
        in-process index as ``conn``'s snapshot holds it (``unlocked``: a context
        letting the index's lock go, see :meth:`SpaceIndex.search`); None when SQL must
        answer: several spaces, a small one, one still loading or too large, an index
        newer than the snapshot (or ``read`` answered None)."""
        with self._current(conn, found) as current:
            if current is None:
                return None
            try:
                return read(*current)
            except _Overtaken:
                return None  # caught up past the snapshot while its lock was let go: SQL reads it

    @contextmanager
    def _current(
        self, conn: Any, found: Space | None, *, wait: bool = True
    ) -> Iterator[tuple[SpaceIndex, Callable[[], AbstractContextManager[Any]]] | None]:
        """The index of ``found`` as ``conn``'s snapshot holds it, with its lock held,
        and a context that lets that lock go (while a search multiplies vectors:
        :meth:`SpaceIndex.search`); None when SQL must answer. ``wait``: see :meth:`_ready`."""
        entry = None if found is None else self._ready(conn, found, wait=wait)
        if found is None or entry is None:
            yield None
            return
        with entry.lock:
            index = entry.index
            if index.seq > found.end:
                yield None  # caught up past this snapshot: SQL reads the snapshot
                return
            if index.generation != found.generation:
                grown = len(index)
                if not self._catch_up(conn, entry, found):
                    self.forget(found.id)
                    yield None
                    return
                if len(index) > grown:
                    self._trim(found.id)
            yield index, functools.partial(_released, entry, index, found.end)

    def _ready(self, conn: Any, found: Space, *, wait: bool = True) -> _Entry | None:
        """The space's loaded index (loaded now if small enough, in the background if
        large, waited for up to :data:`LOAD_WAIT` seconds with ``wait``); None while
        there is none."""
        space = found.id
        entry = self._entry(space)
        if entry is not None and entry.vectors != found.vectors:
            self.forget(space)  # every vector was written again, or the first one
            entry = None
        if entry is None:
            if found.docs < self.above:
                return None
            if found.docs > INLINE_LOAD:
                if self._admit(space, found.docs, inline=False):
                    self._start_loading(space)
                return self._loaded(space) if wait else None
            if not self._admit(space, found.docs, inline=True):
                return None
            entry = self._load_inline(conn, found)
        return entry

    def _loaded(self, space: int) -> _Entry | None:
        """The space's index once its background load ends, waited for up to
        :data:`LOAD_WAIT` seconds (None: not loaded by then; SQL answers)."""
        with self._lock:
            thread = self._loading.get(space)
        if thread is not None:
            thread.join(LOAD_WAIT)
        return self._entry(space)

    def after_write(self, conn: Any, written: dict[int, int]) -> None:
        """Bring up to date, right after a write committed, the indexes of the spaces
        it wrote :data:`WARM_AFTER` memories or more to (``written``: space id ->
        memories written), loading those that reached ``above``: the first search after
        a bulk load finds its space indexed (fewer writes are caught up by the next
        search). ``conn``: an autocommit connection, out of any transaction. A
        failure is logged, never raised: the write is done."""
        for space, count in written.items():
            if count < WARM_AFTER or not self.enabled or self._closed:
                continue
            try:
                with snapshot(conn), self._current(conn, one_space(conn, "s.id = %s", [space]), wait=False):
                    pass
            except Exception as exc:
                self.forget(space)
                logger.warning("%s: updating space %d's in-process index after a write failed (the next search does it): %s",
                               self.label, space, _first_line(exc))

    def _entry(self, space: int) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(space)
            if entry is not None:
                self._entries.move_to_end(space)
                entry.used = time.monotonic()
            return entry

    def _admit(self, space: int, docs: int, *, inline: bool) -> bool:
        """Whether to load the space now (an ``inline`` load is marked as loading
        here; a background one when its thread starts): not closed, not loading already (nor, for a background load, any
        other space), not failed lately, and room for it without evicting a space
        searched in the last :data:`KEEP_FOR` seconds."""
        with self._lock:
            if self._closed or space in self._loading or (not inline and any(self._loading.values())):
                return False
            failed = self._failed.get(space)
            if failed is not None and time.monotonic() - failed < RETRY_AFTER:
                return False
            if docs > self.max_rows:
                return False
            held = sum(len(e.index) for e in self._entries.values())
            if held + docs > self.max_rows:
                recent = time.monotonic() - KEEP_FOR
                evictable = sum(len(e.index) for e in self._entries.values() if e.used < recent)
                if held - evictable + docs > self.max_rows:
                    return False
            if inline:
                self._loading[space] = None
            return True

    def _load_inline(self, conn: Any, found: Space) -> _Entry | None:
        """Load a small space inside the search that needs it; None (SQL answers)
        when that failed and SQL still can."""
        space = found.id
        try:
            # In a savepoint: a failed load leaves the search's snapshot usable by SQL.
            with conn.transaction():
                return self._load(conn, found)
        except _Closed:
            return None
        except Exception as exc:
            with self._lock:
                self._failed[space] = time.monotonic()
            logger.warning("%s: loading space %d's full-text index failed (searched in SQL): %s", self.label, space, _first_line(exc))
            from psycopg.pq import TransactionStatus  # the postgres extra, there when a store is

            if conn.info.transaction_status == TransactionStatus.INERROR:
                raise  # the search's snapshot is lost with it
            return None
        finally:
            with self._lock:
                self._loading.pop(space, None)

    def _trim(self, keep: int) -> None:
        """Evict the least recently searched spaces (never ``keep``) while the loaded
        indexes hold more than ``max_rows`` memories."""
        with self._lock:
            held = sum(len(e.index) for e in self._entries.values())
            for other in list(self._entries):
                if held <= self.max_rows:
                    break
                if other != keep:
                    gone = self._entries.pop(other).index
                    held -= len(gone)
                    gone.close()

    def _catch_up(self, conn: Any, entry: _Entry, found: Space) -> bool:
        """Apply the space's changes logged after the index's last event, up to
        ``found.end``; False when so many changed that a reload is cheaper, or memories
        were erased or moved since the load (no event of the space names them)."""
        index, space, end = entry.index, found.id, found.end
        if int(conn.execute(_UNNAMED_END).fetchone()[0]) > entry.unnamed:
            return False
        if end > index.seq:
            named = [r[0] for r in conn.execute(_NAMED_SINCE, (space, index.seq, end, CATCH_UP_MOST + 1))]
            if len(named) > CATCH_UP_MOST:
                return False
            changed = conn.execute(_BY_ID, (named, space), binary=True).fetchall()
            index.remove([r[0] for r in changed if r[8] != "active"])
            live = [self._row(r, index.dim) for r in changed if r[8] == "active"]
            if live:
                index.upsert(live)
            index.seq = end
        index.generation = found.generation
        return True

    # loading -------------------------------------------------------------------------------
    def _row(self, r: Sequence[Any], dim: int) -> Row:
        mid, run_id, created, updated, valid_to, text, speaker, vector = r[:8]
        if vector is not None and vector.shape[0] != dim:
            vector = None  # not of the store's dimension: not searched by vector (as in SQL)
        return Row(
            mid, run_id, created if updated is None else updated, valid_to, self._decode(text), vector,
            created_at=created, speaker=self._decode(speaker) or "",
        )

    def _rows(self, conn: Any, space: int, dim: int) -> Iterator[list[Row]]:
        """The space's active memories, in chunks streamed by a named cursor (the
        caller's transaction, or one opened here on an autocommit connection)."""
        from psycopg.pq import TransactionStatus  # the postgres extra, there when a store is

        with ExitStack() as stack:
            if conn.info.transaction_status == TransactionStatus.IDLE:
                stack.enter_context(conn.transaction())
            # Binary: a vector as text takes ten times as long to parse.
            cur = stack.enter_context(conn.cursor(name=f"memorist_text_{space}", binary=True))
            cur.itersize = _CHUNK
            cur.execute(_LOAD, (space,))
            while chunk := cur.fetchmany(_CHUNK):
                if self._closed:
                    raise _Closed
                yield [self._row(r, dim) for r in chunk]

    def _load(self, conn: Any, found: Space) -> _Entry:
        """Load the space on ``conn`` as of ``found.end``, the space's last event in a
        snapshot no older than the rows'."""
        # Before the rows: an erasure committed between the two only makes the next
        # search reload once more.
        unnamed = int(conn.execute(_UNNAMED_END).fetchone()[0])
        dim = int(found.vectors[0] or 0)
        index = SpaceIndex(dim, found.generation, found.end)
        try:
            for rows in self._rows(conn, found.id, dim):
                index.upsert(rows)
        except BaseException:
            index.close()  # (its graph's thread, if it started one)
            raise
        entry = _Entry(index, unnamed, found.vectors)
        with self._lock:
            if self._closed:
                index.close()
                raise _Closed
            replaced = self._entries.pop(found.id, None)
            self._entries[found.id] = entry
            self._failed.pop(found.id, None)
        if replaced is not None:
            replaced.index.close()
        self._trim(found.id)
        return entry

    def _start_loading(self, space: int) -> None:
        thread = threading.Thread(target=self._load_in_background, args=(space,), name=f"memorist-text-{space}", daemon=True)
        with self._lock:
            self._loading[space] = thread
        thread.start()

    def _load_in_background(self, space: int) -> None:
        started = time.perf_counter()
        try:
            with self._connect() as conn, conn.transaction():
                # The log's end first: whatever the rows miss commits after it, and the
                # next search catches up from there (generation -1: it always looks).
                found = one_space(conn, "s.id = %s", [space])
                if found is None:
                    return  # the space went (reset) meanwhile
                entry = self._load(conn, found._replace(generation=-1))
            logger.info("%s: space %d's in-process index loaded (%d memories, %.1f s)", self.label, space, len(entry.index), time.perf_counter() - started)
        except _Closed:
            pass
        except Exception as exc:  # a search goes on in SQL; tried again later
            with self._lock:
                self._failed[space] = time.monotonic()
                if self._closed:
                    return  # the store closed under it: nothing to report
            logger.warning("%s: loading space %d's full-text index failed (searched in SQL meanwhile): %s", self.label, space, _first_line(exc))
        finally:
            with self._lock:
                self._loading.pop(space, None)

    def load(self, conn: Any, spaces: str, space_args: Sequence[Any]) -> bool:
        """Load the one space ``spaces`` selects now, whatever its size (within the
        bound); True when its searches are now ranked in process."""
        found = one_space(conn, spaces, space_args) if self.enabled else None
        if found is None:
            return False
        entry = self._entry(found.id)
        if entry is None or entry.vectors != found.vectors:
            if found.docs > self.max_rows:
                return False
            self._load(conn, found)
        return True

    # upkeep --------------------------------------------------------------------------------
    def forget(self, space: int | None = None) -> None:
        """Drop one space's index (None: every index)."""
        with self._lock:
            if space is None:
                gone = list(self._entries.values())
                self._entries.clear()
            else:
                entry = self._entries.pop(space, None)
                gone = [] if entry is None else [entry]
        for entry in gone:
            entry.index.close()

    def loading(self, space: int) -> bool:
        """Whether the space's index is being loaded (in the background, or by a search)."""
        with self._lock:
            return space in self._loading

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"spaces": len(self._entries), "memories": sum(len(e.index) for e in self._entries.values()), "loading": len(self._loading)}

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the background loads under way (tests, benchmarks)."""
        with self._lock:
            threads = [t for t in self._loading.values() if t is not None]
        for thread in threads:
            thread.join(timeout)

    def close(self) -> None:
        """Drop every index; a background load stops at its next chunk (waited for up
        to 5 s in all, so that it lets go of its pooled connection)."""
        with self._lock:
            self._closed = True
            threads = [t for t in self._loading.values() if t is not None]
            gone = list(self._entries.values())
            self._entries.clear()
        for entry in gone:
            entry.index.close()
        deadline = time.monotonic() + 5.0
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def one_space(conn: Any, spaces: str, space_args: Sequence[Any]) -> Space | None:
    """The one space ``spaces`` (a condition on ``spaces s``) selects, read in one
    snapshot; None unless exactly one."""
    rows = conn.execute(_SPACE.format(spaces=spaces), list(space_args)).fetchall()
    if len(rows) != 1:
        return None
    space, generation, docs, end, dim, rewritten, embedder = rows[0]
    return Space(int(space), int(generation), int(docs), int(end), (dim, rewritten), embedder)


@contextmanager
def _released(entry: _Entry, index: SpaceIndex, end: int) -> Iterator[None]:
    """``entry``'s lock, held by the caller, let go meanwhile; :class:`_Overtaken` if
    its index was caught up past ``end`` (the reader's snapshot) or replaced."""
    entry.lock.release()
    try:
        yield
    finally:
        entry.lock.acquire()
    if entry.index is not index or index.seq > end:
        raise _Overtaken


@contextmanager
def snapshot(conn: Any) -> Iterator[None]:
    """The reads inside in one repeatable-read snapshot on ``conn``, unless it is in
    a transaction already (a search's reading block, a write's)."""
    from psycopg.pq import TransactionStatus  # the postgres extra, there when a store is

    if conn.info.transaction_status != TransactionStatus.IDLE:
        yield
        return
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


class _Overtaken(Exception):
    """An index was caught up past a reader's snapshot while the reader let its lock go."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Closed(Exception):
    """The store closed while a space was loading."""
