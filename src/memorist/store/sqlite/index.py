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

A large space's index is also written to a file beside the store when the store
closes (:mod:`memorist.store.index_file`), and the next process opens it from
there, catching up from the event log as above, instead of reading every row. A
file whose bytes are not those written is refused: its checksums are compared on a
thread (:class:`_FileCheck`), those of all but its vectors and codes before its
index is used, those two while the first searches run; if they differ, the index
opened from it is dropped before its next use and the space read from the store.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import CorruptStoreError
from .. import index_file
from ..base import UNNAMED_CHANGES_SQL
from ..codec import AT, COLUMNS, FIELDS, FROM_MEMORIES, speaker_name
from ..vector_index import Row, SpaceIndex

log = logging.getLogger(__name__)

#: Live rows from which a space's index is written to a file when the store closes:
#: below it a space loads from the store in a few tenths of a second at most.
FILE_ROWS = 16_384
#: Events of a space naming a memory since its file was read or written, after which
#: closing writes it again (or one for each hundredth of its rows, if more): the
#: catch-up from the log that opening an older file costs stays short.
FILE_EVENTS = 1_000
#: Rows of a file compared with the store when it is opened (vector and id).
_SAMPLED_ROWS = 16
#: Seconds closing the store waits for the checksums of a file it opened to be
#: compared (:class:`_FileCheck`), to remove the file if they differ and not to write
#: a file again from what was read from it: 60–70 ms at 100,000 rows when the file
#: is in the page cache, a few seconds from a slow disk.
CHECK_WAIT = 30.0


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

    def __init__(self, path: str, *, files: bool = True) -> None:
        self.path = path  # for messages
        self._indexes: dict[int, SpaceIndex] = {}
        # Where index files go: beside the store (the file itself, through any link), as
        # SQLite's own -wal and -shm do. ``files`` off: none is read or written, but
        # those of other processes are still removed when they must be (remove_files).
        self.directory = Path(f"{os.path.realpath(path)}-index") if path not in ("", ":memory:") else None
        self.files = files and self.directory is not None
        # The checks of the files opened, by space, until their outcome is taken (_settle).
        self._checks: dict[int, _FileCheck] = {}

    def clear(self) -> None:
        """Drop every loaded index (and stop building their graphs). The checks of
        the files opened go on: one that fails still removes its file."""
        for index in self._indexes.values():
            index.close()
        self._indexes.clear()
        self._checks.clear()

    def wait_for_checks(self, timeout: float | None = None) -> bool:
        """Wait until the checksums of the files opened are compared (False: ``timeout``
        ran out); the indexes of those that differ are dropped at their next use."""
        return all(check.wait(timeout) for check in list(self._checks.values()))

    def _settle(self, space: int) -> None:
        """Take the outcome of the space's file check once it is known: if the file's
        vectors or codes were not those written, drop the index opened from it (the
        next read loads the space from the store)."""
        check = self._checks.get(space)
        if check is None or not check.done():
            return
        del self._checks[space]
        index = self._indexes.get(space)
        if check.failure is not None and index is not None and check.index is not None and index is check.index():
            del self._indexes[space]
            index.close()

    def loaded(self) -> list[SpaceIndex]:
        """The indexes held now (whatever their generation)."""
        return list(self._indexes.values())

    def current(self, space: int, generation: int) -> SpaceIndex | None:
        """The space's index if it is loaded and current (a read never loads one)."""
        self._settle(space)
        index = self._indexes.get(space)
        return index if index is not None and index.generation == generation else None

    def get(self, conn: sqlite3.Connection, space: int, generation: int, dim: Callable[[], int]) -> SpaceIndex:
        """The space's in-process index, current to ``generation``.

        Loaded whole the first time; afterwards, when other writers (other
        processes, or transactions it could not be patched from) moved the space
        on, only the memories named by the events since the index's last event are
        read again, so a busy store costs each reader its changes, not its size.
        """
        self._settle(space)
        index = self._indexes.get(space)
        if index is not None and index.generation == generation:
            return index
        if index is not None and self._catch_up(conn, index, space):
            index.generation = generation
            return index
        if index is None:
            index = self._open_file(conn, space, generation, dim)
            if index is not None:
                self._indexes[space] = index
                self._settle(space)  # the file's vectors may be found damaged already
                if self._indexes.get(space) is index:
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

    # Index files ----------------------------------------------------------------------

    def _file(self, space: int) -> Path | None:
        return None if self.directory is None else self.directory / f"space-{space}.index"

    def _open_file(self, conn: sqlite3.Connection, space: int, generation: int, dim: Callable[[], int]) -> SpaceIndex | None:
        """The space's index from its file, caught up with the log; None (and the file
        removed) when there is none this store can use: written for another store or
        an earlier one at this path (the space's creation time and the logged event
        it ends at differ), for another embedder, before an erasure or a keys adopt
        (the log cannot tell what they removed), not as written (its checksums), or
        unreadable.

        The checksums are compared on a thread (:class:`_FileCheck`) while the index
        is made and caught up: those of every part but the vectors and codes before
        the index is used, those two afterwards (:meth:`_settle` takes the outcome)."""
        path = self._file(space)
        if path is None or not self.files or not path.exists():
            return None
        try:
            image, meta, checksums = index_file.open_image(path)
        except (OSError, index_file.IndexFileError) as exc:
            log.warning("index file not used, the space is read from the store: %s", exc)
            self._remove(path)
            return None
        check = _FileCheck(checksums)
        index: SpaceIndex | None = None
        why: str | None = None
        try:
            if meta != self._meta(conn, space, int(meta.get("generation", 0)), int(meta.get("seq", 0)))[0] or image.dim != dim():
                why = "it was written for another store, embedder or state of this one"
            else:
                index = SpaceIndex.from_image(image, int(meta["generation"]), int(meta["seq"]))
                if index.generation != generation and not self._catch_up(conn, index, space):
                    why = "the changes since it was written cannot be read from the log"
                elif not self._agrees(conn, space, index):
                    why = "its rows differ from the store's"
                elif not checksums.early.wait(CHECK_WAIT):
                    why = "its checksums were not compared in time"
                elif checksums.error is None:
                    index.generation = generation
                    index.file_seq = int(meta["seq"])
                    check.index = weakref.ref(index)
                    self._checks[space] = check
                    return index
                else:  # not as written: the check's thread says so (a warning), and ends
                    check.wait(CHECK_WAIT)
        except index_file.DAMAGE as exc:
            why = f"it is damaged ({type(exc).__name__}: {exc})"
        except BaseException:
            checksums.cancel()
            raise
        checksums.cancel()
        if index is not None:
            index.close()
        if why is not None:
            log.info("%s not used (%s): the space is read from the store", path, why)
        self._remove(path, checksums.identity)
        return None

    @staticmethod
    def _meta(conn: sqlite3.Connection, space: int, generation: int, seq: int) -> tuple[dict[str, Any] | None, int | None]:
        """What an index file of ``space`` at ``generation`` and event ``seq`` records
        of the store, to be compared when it is read (None: no such state here), and
        the space's generation now (None: no such space)."""
        row = conn.execute(
            "SELECT s.created_at, s.generation, e.ts, e.op, (SELECT value FROM meta WHERE key = 'embedder_name') "
            "FROM spaces s LEFT JOIN events e ON e.seq = ? WHERE s.id = ?",
            (seq, space),
        ).fetchone()
        if row is None:
            return None, None
        created, current, ts, op, embedder = row
        if ts is None or current < generation:
            return None, current
        return {"space": space, "space_created": created, "generation": generation, "seq": seq, "event": [ts, op], "embedder": embedder}, current

    def _agrees(self, conn: sqlite3.Connection, space: int, index: SpaceIndex) -> bool:
        """Whether rows sampled across ``index`` are in the store, live in the space,
        with the same vector (a file damaged in a way its layout does not show)."""
        sample = index.sample(_SAMPLED_ROWS)
        if not sample:
            return True
        marks = ",".join("?" * len(sample))
        stored = dict(
            conn.execute(
                f"SELECT m.id, e.vector FROM memories m LEFT JOIN embeddings e ON e.memory_rowid = m.rowid "
                # The unary + keeps the planner on the id index (not every row of the space).
                f"WHERE m.id IN ({marks}) AND +m.space_id = ? AND m.status = 'active'",
                (*sample, space),
            ).fetchall()
        )
        return all(
            mid in stored and (vector is None) == (stored[mid] is None) and (vector is None or vector.tobytes() == stored[mid])
            for mid, vector in sample.items()
        )

    def save(self, conn: sqlite3.Connection) -> None:
        """Write the index file of each loaded space of at least :data:`FILE_ROWS` rows
        that is current and has none, or one :data:`FILE_EVENTS` events behind.

        Called as the store closes. An erasure (or keys adopt) that commits while a
        file is written removes the files after its commit; one that committed before
        is seen by the check after the write, which then removes the file itself.
        """
        if not self.files:
            return
        for space, check in list(self._checks.items()):
            # Never a file again from an index read from one whose checksums differ.
            if not check.wait(CHECK_WAIT):
                log.info("index file %s not written: its checksums were not compared in time", self._file(space))
                self._discard(space)
            self._settle(space)
        for space, index in list(self._indexes.items()):
            if index.dim == 0:
                continue
            if len(index) < FILE_ROWS:
                if index.file_seq is not None:  # opened from its file, and small now: read from the store
                    self._remove(self._file(space))
                continue
            meta, current = self._meta(conn, space, index.generation, index.seq)
            if meta is None or current != index.generation or log_reaches(conn, index.seq) is None:
                continue  # others wrote since this process last read: its index is not the store's
            if index.file_seq is not None:
                # What opening the file would catch up with: the events naming a memory
                # (retrievals name none, and change nothing the index holds).
                since = conn.execute(
                    "SELECT count(*) FROM events WHERE space_id = ? AND seq > ? AND memory_id IS NOT NULL", (space, index.file_seq)
                ).fetchone()[0]
                if since < max(FILE_EVENTS, len(index) // 100):
                    continue
            path = self._file(space)
            assert path is not None and self.directory is not None
            try:
                self.directory.mkdir(exist_ok=True)
                self._remove_abandoned(path)
                index_file.write(path, index.image(), meta)
            except OSError as exc:  # a read-only or full disk: the next process reads the store
                log.info("index file %s not written: %s", path, exc)
                continue
            if log_reaches(conn, index.seq) is None:
                self._remove(path)
            else:
                index.file_seq = index.seq

    def remove_files(self) -> None:
        """Remove every index file of the store (an erasure's and a keys adopt's
        commit: the files hold the removed or moved memories' ids, terms and vectors)."""
        if self.directory is None or not self.directory.is_dir():
            return
        for path in self.directory.iterdir():
            if path.name.startswith("space-"):
                self._remove(path)

    def _remove_abandoned(self, path: Path) -> None:
        """Remove the temporary files of ``path`` that a process which has ended left
        (killed while writing it): each is as large as the file."""
        for temporary in path.parent.glob(f"{path.name}.*.tmp"):
            pid = temporary.name[len(path.name) + 1 :].split(".", 1)[0]  # see index_file.write
            if pid.isdigit() and not _running(int(pid)):
                self._remove(temporary)

    def _discard(self, space: int) -> None:
        """Drop the space's index without writing it (its file check has not ended)."""
        index = self._indexes.pop(space, None)
        if index is not None:
            index.close()
        self._checks.pop(space, None)

    @staticmethod
    def _remove(path: Path | None, identity: tuple[int, int] | None = None) -> None:
        """Remove ``path``; with ``identity`` (device, inode) only while it is that file,
        not one another process renamed over it since."""
        if path is None:
            return
        try:
            if identity is not None:
                stat = os.stat(path)
                if (stat.st_dev, stat.st_ino) != identity:
                    return
            path.unlink(missing_ok=True)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("index file %s could not be removed: %s", path, exc)

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


class _FileCheck:
    """The checksums of an opened index file (:class:`index_file.Checksums`), compared
    on a thread of their own; if one differs, the file is removed there (and a
    warning logged), and the index opened from it (``index``), if it was taken, is
    dropped at its next use (:meth:`IndexCache._settle`)."""

    def __init__(self, checksums: index_file.Checksums) -> None:
        self.checksums = checksums
        self.index: weakref.ref[SpaceIndex] | None = None
        self.failure: str | None = None  # why the file was refused
        self._done = threading.Event()
        try:
            threading.Thread(target=self._run, name=f"memorist index check {checksums.path.name}", daemon=True).start()
        except RuntimeError:  # no thread to be had: compared here
            self._run()

    def _run(self) -> None:
        checksums = self.checksums
        try:
            checksums.run()
        except Exception as exc:  # damaged, unreadable, or anything else: not trusted
            self.failure = str(exc) if isinstance(exc, index_file.IndexFileError) else f"{checksums.path}: {type(exc).__name__}: {exc}"
            log.warning("index file not used, the space is read from the store: %s", self.failure)
            IndexCache._remove(checksums.path, checksums.identity)
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)


def _running(pid: int) -> bool:
    """Whether a process ``pid`` runs here (True when that cannot be told)."""
    if pid == os.getpid():
        return True
    if os.name == "nt":
        return True  # no cheap check: a file of a killed process waits for an erasure or a reset
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it runs, as another user
    return True


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
