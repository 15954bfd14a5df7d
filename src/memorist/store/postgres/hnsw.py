"""The PostgreSQL store's per-space HNSW indexes: what each one holds, the searches
that use it, and its lifecycle (built, kept current, replaced, dropped).

A space holding more than ``exact_below`` vectors (:data:`EXACT_BELOW`) gets its own
HNSW index (``vector_cosine_ops`` on the column cast to the store's dimension,
partial: that space's rows only), built concurrently in the background by the first
search that needs it (or at once by
:meth:`~memorist.store.postgres.PostgresStore.build_indexes`); until it is ready that
space is searched exactly. Why per space and not one index over the table: an HNSW
insert costs ~5-10 ms here against ~0.5 ms for the rest of an add
(bench/RESULTS.md), which every write to every small space would pay for an index
only large scopes use; and pgvector filters a scope after its index scan, so one
shared index returns fewer than ``k`` hits for a scope that is a small share of the
table, while a space's own index holds nothing else.

**No add waits for the graph.** A space's index holds its rows up to a watermark
(its newest row when the index was built, part of the index's name:
:func:`index_name`) and the rows marked ``graphed`` since (:func:`graph_rows`).
Rows added later are not in it (:func:`waiting_rows`): a search of the space takes
the index's candidates and those rows' exact distances (a range of the partial
index of rows never graphed), so they are found at once, and an add costs what it
costs in a small space. A background pass (:meth:`HnswIndexes.maintain`, started by
searches) puts them in the graph in short chunks once the space's writes pause for
``QUIET`` seconds, or at once when ``exact_below`` of them wait; when more wait than
the index holds (a bulk load), it builds a new index up to the newest row instead
and drops the old one.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from .schema import lock_key, quote_ident

logger = logging.getLogger(__name__)

#: Scopes with at most this many vectors are searched exactly (see the module docstring).
EXACT_BELOW = 20_000
#: The least ``hnsw.ef_search`` of an HNSW search; pgvector allows at most 1,000. A
#: space larger than ``EF_SCALE_FROM`` vectors searches wider, by the square root of
#: how much larger: recall@10 against exact search at a million vectors was 0.93-0.95
#: with 100 and 0.97 with 200, while 100 gives 0.99 at 100k (bench/RESULTS.md).
EF_SEARCH = 100
EF_SCALE_FROM = 250_000
EF_SEARCH_MAX = 1000
#: Rows put into a space's graph per transaction, once its writes paused ``QUIET`` s.
GRAPH_CHUNK = 64
QUIET = 1.0
#: Seconds between two maintenance passes started by searches of indexed spaces.
MAINTAIN_EVERY = 2.0
#: The least maintenance_work_mem of an index build (HNSW builds fast while its graph
#: fits); a server configured with more keeps its own.
_BUILD_MEMORY = "512MB"


#: HNSW parameters of the vector index (pgvector's defaults, written down).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
_INDEX_PREFIX = "embeddings_hnsw_"


def index_name(dim: int, space_id: int, watermark: int) -> str:
    """The name of the HNSW index of one space's ``dim``-dimensional vectors up to
    ``watermark`` (see :func:`graph_rows`)."""
    return f"{_INDEX_PREFIX}{int(dim)}_{int(space_id)}_{int(watermark)}"


def graph_rows(space_id: int, watermark: int, alias: str = "") -> str:
    """The rows of a space's HNSW index: up to its watermark, and those graphed since.

    The condition of the partial index and of the searches that use it: PostgreSQL
    uses a partial index only when it can prove its condition from the query's text.
    """
    a = f"{alias}." if alias else ""
    return f"{a}space_id = {int(space_id)} AND ({a}memory_rowid <= {int(watermark)} OR {a}graphed)"


def waiting_rows(space_id: int, watermark: int, alias: str = "") -> str:
    """The rows of a space that its HNSW index does not hold (searched exactly)."""
    a = f"{alias}." if alias else ""
    return f"{a}space_id = {int(space_id)} AND {a}memory_rowid > {int(watermark)} AND NOT {a}graphed"


def _prefixed_indexes(conn: Any) -> list[tuple[str, bool]]:
    return conn.execute(
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = 'embeddings'::regclass AND c.relname LIKE %s",
        (_INDEX_PREFIX.replace("_", "\\_") + "%",),
    ).fetchall()


def vector_indexes(conn: Any) -> dict[str, tuple[int, int, int, bool]]:
    """The HNSW indexes of the embeddings table in the current schema: name ->
    (dimension, space id, watermark, whether it is valid: a concurrent build that
    was interrupted leaves an invalid one)."""
    out = {}
    for name, valid in _prefixed_indexes(conn):
        parts = name[len(_INDEX_PREFIX) :].split("_")
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            out[name] = (int(parts[0]), int(parts[1]), int(parts[2]), bool(valid))
    return out


def stale_indexes(conn: Any) -> list[str]:
    """HNSW indexes no search uses: invalid ones (an interrupted concurrent build,
    which may still be updated by every insert) and ones named as before schema v2
    (built by an older Memorist still running against the database)."""
    current = vector_indexes(conn)
    return [name for name, valid in _prefixed_indexes(conn) if not valid or name not in current]


def build_space_index(conn: Any, dim: int, space_id: int, watermark: int, *, concurrently: bool) -> bool:
    """Build the HNSW index of one space's vectors up to ``watermark`` (a partial
    index: :func:`graph_rows`), replacing an invalid one of that name; False if a
    valid one was there. ``concurrently`` (outside any transaction): writers go on
    meanwhile."""
    name = index_name(dim, space_id, watermark)
    found = vector_indexes(conn).get(name)
    if found is not None and found[3]:
        return False
    how = "CONCURRENTLY " if concurrently else ""
    if found is not None:
        conn.execute(f"DROP INDEX {how}IF EXISTS {quote_ident(name)}")
    conn.execute(
        f"CREATE INDEX {how}IF NOT EXISTS {quote_ident(name)} ON embeddings "
        f"USING hnsw ((vector::vector({int(dim)})) vector_cosine_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) WHERE {graph_rows(space_id, watermark)}"
    )
    return True


def drop_vector_indexes(conn: Any, *, keep_dim: int | None = None, concurrently: bool = False, names: list[str] | None = None) -> None:
    """Drop the HNSW indexes: those ``names``, or all but the current ones of
    dimension ``keep_dim`` (stale ones included)."""
    how = "CONCURRENTLY " if concurrently else ""
    current = vector_indexes(conn)
    for name, _ in _prefixed_indexes(conn):
        keep = name in current and current[name][0] == keep_dim
        if (names is None and not keep) or (names is not None and name in names):
            conn.execute(f"DROP INDEX {how}IF EXISTS {quote_ident(name)}")


class HnswIndexes:
    """The HNSW indexes of one store's large spaces, and their maintenance.

    ``search_path`` is the store's (a background pass runs on a connection of its
    own, from ``connect``); ``is_open`` tells whether the store is still open (a pass
    stops when it is not); ``scrub`` takes passwords out of a message.
    """

    def __init__(
        self,
        label: str,
        schema: str,
        search_path: str,
        *,
        connect: Callable[[], AbstractContextManager[Any]],
        is_open: Callable[[], bool],
        scrub: Callable[[str], str],
        exact_below: int = EXACT_BELOW,
        ef_search: int = EF_SEARCH,
    ) -> None:
        self.label = label
        self.schema = schema
        self.search_path = search_path
        self.exact_below = int(exact_below)
        self.ef_search = min(max(int(ef_search), 1), EF_SEARCH_MAX)
        self._connect = connect
        self._is_open = is_open
        self._scrub = scrub
        self._building = False  # a background pass of this store is under way
        self._builds_lock = threading.Lock()
        self._maintained = 0.0  # when a search last started the maintenance pass
        self._looks: dict[int, tuple[int, float]] = {}  # space -> (version, since when), for QUIET

    def ready(self, conn: Any, dim: int, large: Sequence[int], *, build: Sequence[int] | None = None) -> dict[int, int]:
        """The ``large`` spaces that have a usable HNSW index, with its watermark (the
        newest, while a successor's build is under way); the others (of ``build``, if
        given) get one built (in the background) and are searched exactly until it is
        ready."""
        wanted = {int(space_id) for space_id in large}
        ready: dict[int, int] = {}
        for d, space_id, watermark, valid in vector_indexes(conn).values():
            if valid and d == dim and space_id in wanted:
                ready[space_id] = max(ready.get(space_id, 0), watermark)
        missing = wanted.difference(ready)
        if build is not None:
            missing.intersection_update(build)
        if missing:
            self._build_later()
        return dict(sorted(ready.items()))

    def _waiting_seen(self) -> None:
        """A search found rows its space's graph does not hold yet: the maintenance
        pass graphs them (started at most every ``MAINTAIN_EVERY`` seconds)."""
        now = time.monotonic()
        if now - self._maintained > MAINTAIN_EVERY:
            self._maintained = now
            self._build_later()

    def search(self, conn: Any, dim: int, space_id: int, watermark: int, query: np.ndarray, filters: str, filter_args: list[Any], k: int, vectors: int) -> list[tuple[str, float]]:
        """The ``k`` nearest of one space: its HNSW index's candidates, and the rows
        added since the index's watermark and not graphed yet, exactly."""
        least = max(self.ef_search, 2 * k)
        if least > EF_SEARCH_MAX:
            return []
        ef = min(int(least * max(1.0, math.sqrt(vectors / EF_SCALE_FROM))), EF_SEARCH_MAX)
        conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef),))
        typed = f"e.vector::vector({dim}) <=> %b::vector({dim})"
        # The index's condition is written into the statement: the planner can only
        # use a partial index whose condition it can prove from the query text.
        # The waiting rows' ids first, from their partial index alone (MATERIALIZED:
        # the planner, guessing space and rowid independent, would rather filter the
        # whole rowid range above the watermark, every space's rows included).
        rows = conn.execute(
            f"WITH waiting AS MATERIALIZED (SELECT w.memory_rowid FROM embeddings w WHERE {waiting_rows(space_id, watermark, 'w')}) "
            "SELECT m.id, c.score, (SELECT count(*) FROM waiting) FROM ("
            f"(SELECT e.memory_rowid, 1 - ({typed}) AS score FROM embeddings e "
            f"WHERE {graph_rows(space_id, watermark, 'e')} ORDER BY {typed} LIMIT %s) "
            "UNION ALL "
            "(SELECT e.memory_rowid, -(e.vector <#> %b) AS score FROM waiting JOIN embeddings e USING (memory_rowid) "
            "ORDER BY score DESC LIMIT %s)"
            f") c JOIN memories m ON m.rowid = c.memory_rowid WHERE m.status = 'active'{filters} "
            "ORDER BY c.score DESC, m.rowid LIMIT %s",
            [query, query, ef, query, ef, *filter_args, int(k)],
        ).fetchall()
        if rows and rows[0][2]:
            self._waiting_seen()
        return [(mid, 0.0 if math.isnan(score) else float(score)) for mid, score, _ in rows]

    def _build_later(self) -> None:
        """Run the index maintenance pass (:meth:`maintain`) in a background thread;
        searches go on meanwhile (exactly where no index is ready)."""
        with self._builds_lock:
            if self._building or not self._is_open():
                return
            self._building = True
        threading.Thread(target=self._build_in_background, name="memorist-hnsw", daemon=True).start()

    def _build_in_background(self) -> None:
        try:
            # Its own connection: a build takes long, and must not hold one of the pool's.
            with self._connect() as conn:
                # Passes until no row waits for writes to pause (at most a minute of
                # them; the next search starts another), the lock free between them.
                for _ in range(int(60 / QUIET)):
                    if not self.maintain(conn, wait=False)[1] or not self._is_open():
                        break
                    time.sleep(QUIET)
        except Exception as exc:  # searches stay exact; a later one tries again
            logger.warning("memorist: building vector indexes in %s failed: %s", self.label, self._scrub(str(exc)))
        finally:
            with self._builds_lock:
                self._building = False

    def maintain(self, conn: Any, *, wait: bool) -> tuple[list[int], bool]:
        """The vector indexes' maintenance pass; returns the spaces that hold an index,
        and whether rows were left waiting because their space's writes go on.

        1. Every space holding more than ``exact_below`` vectors and no valid index
           gets one (built concurrently: writers go on), up to the space's newest row.
        2. The rows added to an indexed space since its watermark are searched
           exactly until they are put in the graph: in chunks (``GRAPH_CHUNK``,
           each a short transaction that skips rows a writer holds) once writes to
           the space paused for ``QUIET`` seconds, or at once when ``exact_below`` of
           them wait. When more wait than the index holds (a bulk load), a new index
           up to the newest row is built instead and the old one dropped: one build
           is cheaper than that many graph inserts.

        One maintainer at a time per store, across processes (two concurrent builds
        on one table deadlock); with ``wait=False`` another at work means nothing to
        do here, and step 2 waits for quiet spaces. ``wait=True`` (``build_indexes``)
        does everything now.
        """
        conn.execute(f"SET search_path TO {self.search_path}")
        key = lock_key("memorist", self.schema, "index")
        if wait:
            # A background pass may be building a large index: wait for it, however
            # long, but between tries, not in pg_advisory_lock: a waiting statement
            # holds a snapshot, which a concurrent index build waits for in turn.
            while not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
                time.sleep(0.2)
        elif not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            return [], False
        try:
            conn.execute(
                "SELECT set_config('maintenance_work_mem', %s, false) "
                "WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes(%s)",
                (_BUILD_MEMORY, _BUILD_MEMORY),
            )
            dim = conn.execute("SELECT value FROM meta WHERE key = 'embedder_dim'").fetchone()
            if dim is None:
                return [], False
            dim = int(dim[0])
            # Interrupted builds (which inserts may still update) and indexes of an
            # older Memorist: no search uses them.
            drop_vector_indexes(conn, concurrently=True, names=stale_indexes(conn))
            large = [int(r[0]) for r in conn.execute("SELECT id FROM spaces WHERE vectors > %s ORDER BY id", (self.exact_below,))]
            built = False
            for space_id in large:
                built |= self._index_space(conn, dim, space_id)
            if built:
                # Statistics now, not at autovacuum's next look: without them the
                # planner may not see that the new index is the cheap way.
                conn.execute("ANALYZE embeddings")
            return large, self._graph_waiting(conn, dim, large, wait=wait)
        finally:
            conn.execute("RESET maintenance_work_mem")
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def _watermarks(self, conn: Any, dim: int, space_id: int) -> list[tuple[int, str]]:
        """The space's valid indexes of this dimension: (watermark, name), newest last."""
        return sorted(
            (watermark, name)
            for name, (d, space, watermark, valid) in vector_indexes(conn).items()
            if d == dim and space == space_id and valid
        )

    def _index_space(self, conn: Any, dim: int, space_id: int) -> bool:
        """Build the space's index if it has none (step 1 of :meth:`maintain`)."""
        if self._watermarks(conn, dim, space_id):
            return False
        top = conn.execute("SELECT COALESCE(max(memory_rowid), 0) FROM embeddings WHERE space_id = %s", (space_id,)).fetchone()[0]
        return build_space_index(conn, dim, space_id, int(top), concurrently=True)

    def _graph_waiting(self, conn: Any, dim: int, spaces: Sequence[int], *, wait: bool) -> bool:
        """Step 2 of :meth:`maintain`: the rows added since each index's watermark.
        True when some were left for a later pass (their space's writes go on)."""
        deferred = False
        stuck = 0
        for space_id in spaces:
            marks = self._watermarks(conn, dim, space_id)
            while marks and self._is_open():
                if len(marks) > 1:
                    # A successor is ready: its predecessors go (graphing a row would
                    # also insert it into them).
                    drop_vector_indexes(conn, concurrently=True, names=[n for _, n in marks[:-1]])
                    marks = marks[-1:]
                watermark = marks[-1][0]
                row = conn.execute(
                    f"SELECT (SELECT count(*) FROM embeddings WHERE {waiting_rows(space_id, watermark)}), "
                    "s.vectors, s.generation FROM spaces s WHERE s.id = %s",
                    (space_id,),
                ).fetchone()
                if row is None or not row[0]:  # nothing waits (or a reset removed the space)
                    break
                waiting, vectors, generation = row
                if waiting > max(vectors - waiting, self.exact_below):
                    # A bulk load: one build up to the newest row, then the old index goes.
                    top = conn.execute("SELECT max(memory_rowid) FROM embeddings WHERE space_id = %s", (space_id,)).fetchone()[0]
                    build_space_index(conn, dim, space_id, int(top), concurrently=True)
                    conn.execute("ANALYZE embeddings")
                    marks = self._watermarks(conn, dim, space_id)
                    continue
                # Quiet: the space's version has not moved since a look QUIET s ago
                # (this pass's or an earlier one's).
                now = time.monotonic()
                seen = self._looks.get(space_id)
                if seen is None or seen[0] != generation:
                    self._looks[space_id] = (generation, now)
                quiet = seen is not None and seen[0] == generation and now - seen[1] >= QUIET
                if not (wait or quiet or waiting >= self.exact_below):
                    deferred = True  # writes go on: a later pass
                    break
                # The chunk's ids from the waiting rows' own index (see search),
                # then only the rows no writer holds: this pass never waits for one.
                graphed = conn.execute(
                    f"WITH ids AS MATERIALIZED (SELECT memory_rowid FROM embeddings WHERE {waiting_rows(space_id, watermark)} "
                    "ORDER BY memory_rowid LIMIT %s), "
                    "free AS (SELECT e.memory_rowid FROM embeddings e JOIN ids USING (memory_rowid) WHERE NOT e.graphed FOR UPDATE OF e SKIP LOCKED) "
                    "UPDATE embeddings SET graphed = true WHERE memory_rowid IN (SELECT memory_rowid FROM free)",
                    (GRAPH_CHUNK,),
                ).rowcount
                if graphed:
                    stuck = 0
                elif (stuck := stuck + 1) > 20:
                    deferred = True  # held by writers for a second: a later pass
                    break
                else:
                    time.sleep(0.05)  # every one held by a writer: let them finish
        return deferred


__all__ = [
    "EF_SEARCH",
    "EXACT_BELOW",
    "HnswIndexes",
    "build_space_index",
    "drop_vector_indexes",
    "graph_rows",
    "index_name",
    "stale_indexes",
    "vector_indexes",
    "waiting_rows",
]
