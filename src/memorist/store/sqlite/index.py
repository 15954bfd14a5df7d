"""The SQLite store's in-process indexes: one :class:`SpaceIndex` per space, kept current.

A space's index is loaded whole the first time a search needs it, or, for a space
this process creates, built from its writes as they commit (a bulk load's first
search then reads nothing back; the batch's rows are indexed in whole-array
steps, a small share of the write's cost). Afterwards it is
kept current without reloading: this process's commits patch it (when it was
current before them), and other writers' commits — other connections, other
processes — are read back from the event log: only the memories named by events
after the index's last one. So a busy store costs each reader its changes, not
its size.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import CorruptStoreError
from ..base import UNNAMED_CHANGES_SQL
from ..codec import AT, COLUMNS, FIELDS, FROM_MEMORIES, speaker_name
from ..vector_index import Row, SpaceIndex


def index_entry(stored: tuple[Any, ...], vector: np.ndarray | None, speaker: str) -> Row:
    """The in-process index's row for a stored memory row (see ``stored_row``)."""
    created, updated = stored[AT["created_at"]], stored[AT["updated_at"]]
    return Row(
        stored[AT["id"]],
        stored[AT["run_id"]],
        created if updated is None else updated,  # validity runs from the last update
        stored[AT["valid_to"]],
        stored[AT["search_text"]],
        vector,
        created_at=created,
        speaker=speaker,
        stored=stored,
    )



class IndexCache:
    """The loaded indexes of one store connection, by space id.

    Every method runs under the store's lock, with its connection.
    """

    def __init__(self, path: str) -> None:
        self.path = path  # for messages
        self._indexes: dict[int, SpaceIndex] = {}

    def clear(self) -> None:
        """Drop every loaded index (and stop building their graphs)."""
        for index in self._indexes.values():
            index.close()
        self._indexes.clear()

    def loaded(self) -> list[SpaceIndex]:
        """The indexes held now (whatever their generation)."""
        return list(self._indexes.values())

    def current(self, space: int, generation: int) -> SpaceIndex | None:
        """The space's index if it is loaded and current (a read never loads one)."""
        index = self._indexes.get(space)
        return index if index is not None and index.generation == generation else None

    def get(self, conn: sqlite3.Connection, space: int, generation: int, dim: Callable[[], int]) -> SpaceIndex:
        """The space's in-process index, current to ``generation``.

        Loaded whole the first time; afterwards, when other writers (other
        processes, or transactions it could not be patched from) moved the space
        on, only the memories named by the events since the index's last event are
        read again, so a busy store costs each reader its changes, not its size.
        """
        index = self._indexes.get(space)
        if index is not None and index.generation == generation:
            return index
        if index is not None and self._catch_up(conn, index, space):
            index.generation = generation
            return index
        # One snapshot for the three reads (a savepoint: a read transaction of its
        # own, or a part of the caller's).
        conn.execute("SAVEPOINT memorist_load")
        try:
            # The log's end first: the next catch-up starts from here.
            seq = last_seq(conn)
            # Only what the index ranks and filters with: the other columns of a
            # result are read when it is shown, and kept then (SQLiteStore.get_many).
            # Reading every column made a third of a large space's load (and its
            # memory). The vectors come in a read of their own: joined, the sort by
            # rowid carried every blob (0.66 s against 0.35 s for both at 100k).
            rows = conn.execute(
                "SELECT m.rowid, m.id, m.run_id, m.created_at, m.updated_at, m.valid_to, m.search_text, "
                "json_extract(m.metadata, '$.name') FROM memories m "
                "WHERE m.space_id = ? AND m.status = 'active' ORDER BY m.rowid",
                (space,),
            ).fetchall()
            vectors = dict(conn.execute("SELECT memory_rowid, vector FROM embeddings WHERE space_id = ?", (space,)).fetchall())
        finally:
            conn.execute("RELEASE memorist_load")
        index = SpaceIndex(dim(), generation, seq)
        index.upsert([
            Row(mid, run, created if updated is None else updated, valid_to, text, self._vector(mid, vectors.get(rowid), index.dim),
                created_at=created, speaker=speaker_name(name))
            for rowid, mid, run, created, updated, valid_to, text, name in rows
        ])
        self._indexes[space] = index
        return index

    def _vector(self, memory_id: str, blob: bytes | None, dim: int) -> np.ndarray | None:
        """A stored vector blob as an array, refused if it has the wrong dimension."""
        if blob is None:
            return None
        vector = np.frombuffer(blob, dtype=np.float32)
        if vector.shape[0] != dim:
            raise CorruptStoreError(
                f"{self.path}: memory {memory_id} has a {vector.shape[0]}-dim vector but the store's "
                f"embedder has {dim}; run `memorist reindex --embedder ...`"
            )
        return vector

    def _index_entries(self, rows: Sequence[tuple[Any, ...]], dim: int) -> list[Row]:
        """Index rows of ``SELECT {COLUMNS}, vector, metadata name`` rows."""
        width = len(FIELDS)
        return [index_entry(r[:width], self._vector(r[0], r[width], dim), speaker_name(r[width + 1])) for r in rows]

    def _catch_up(self, conn: sqlite3.Connection, index: SpaceIndex, space: int) -> bool:
        """Apply to ``index`` the changes of its space logged after ``index.seq``.

        False when only a reload will do: the log was reset, the store was
        re-embedded, the index predates the store's first vector, or most of the
        space changed.
        """
        if index.dim == 0:
            return False
        seq = log_reaches(conn, index.seq)
        if seq is None:
            return False
        # The space's memories named by events since, whatever their status now.
        rows = conn.execute(
            f"SELECT {COLUMNS}, e.vector, json_extract(m.metadata, '$.name') {FROM_MEMORIES} "
            "LEFT JOIN embeddings e ON e.memory_rowid = m.rowid "
            f"WHERE {NAMED_SINCE} "
            # The unary + keeps the planner on the id index (not every row of the space).
            "AND +m.space_id = :space ORDER BY m.rowid",
            {"space": space, "s": index.seq},
        ).fetchall()
        if len(rows) > max(len(index), 64):
            return False
        status = AT["status"]
        live = [r for r in rows if r[status] == "active"]
        index.remove([r[0] for r in rows if r[status] != "active"])
        if live:
            index.upsert(self._index_entries(live, index.dim))
        index.seq = seq
        return True

    def apply(
        self, generations: dict[int, int], upserts: dict[int, list[Row]], removals: dict[int, list[str]], last_seq: int
    ) -> None:
        """Bring in-process indexes up to date without reloading them.

        An index is only patched when it was current before this transaction (its
        generation is exactly one behind); otherwise another process wrote too, and
        the index catches up from the event log on the next read (see :meth:`get`).
        """
        for space, generation in generations.items():
            index = self._indexes.get(space)
            if index is None:
                if generation == 1 and space in upserts:
                    self._start(space, generation, upserts[space], removals.get(space, ()), last_seq)
                continue
            if index.dim == 0 and any(r.vector is not None for r in upserts.get(space, ())):
                # Loaded before the store had any vector (dimension 0): reload.
                del self._indexes[space]
                continue
            if index.generation != generation - 1:
                continue  # others wrote too: the next read catches up
            if space in upserts:
                index.upsert(upserts[space])
            if space in removals:
                index.remove(removals[space])
            index.generation = generation
            index.seq = max(index.seq, last_seq)


    def _start(self, space: int, generation: int, rows: list[Row], removed: Sequence[str], last_seq: int) -> None:
        """Index a space this transaction created, from the rows it wrote.

        Generation 1 means no transaction wrote to the space before this one, so its
        rows are the whole space: indexing them now costs what patching would, where
        loading the space at its first search would read back every row written
        meanwhile (seconds at 100k after a bulk load).
        """
        dims = {r.vector.shape[0] for r in rows if r.vector is not None}
        if len(dims) != 1:
            return  # no vector yet (or mixed, which the store refuses): loaded when searched
        index = SpaceIndex(dims.pop(), generation, last_seq)
        index.upsert(rows)
        if removed:
            index.remove(list(removed))
        self._indexes[space] = index


#: The memories named by the events of space ``:space`` after seq ``:s`` (as ``m``).
NAMED_SINCE = "m.id IN (SELECT memory_id FROM events WHERE space_id = :space AND seq > :s AND memory_id IS NOT NULL)"


def last_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COALESCE(max(seq), 0) FROM events").fetchone()[0])


def log_reaches(conn: sqlite3.Connection, seq: int) -> int | None:
    """The log's end if the changes since ``seq`` can be read from it; None when
    the log was reset since (it no longer reaches back to ``seq``), the store was
    re-embedded (every vector changed), or memories were erased or moved (no event
    names them). One look at the log."""
    end, reaches_back, reembedded, unnamed = conn.execute(
        "SELECT COALESCE(max(seq), 0), (SELECT 1 FROM events WHERE seq <= :s LIMIT 1), "
        "(SELECT 1 FROM events WHERE space_id IS NULL AND seq > :s AND op = 'reindex' LIMIT 1), "
        f"(SELECT 1 FROM events WHERE seq > :s AND {UNNAMED_CHANGES_SQL} LIMIT 1) FROM events",
        {"s": seq},
    ).fetchone()
    if end < seq or (seq and not reaches_back) or reembedded or unnamed:
        return None
    return int(end)
