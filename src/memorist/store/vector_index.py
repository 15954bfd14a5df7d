"""The in-process search index of one space, kept in step with the store.

It holds, per active memory, its unit vector (cosine similarity is one
matrix-vector product), its BM25 terms in an inverted index, and what the engine
filters on before ranking (run id, effective time, end of validity). Exact search
needs no training and is never stale; over 10k memories both rankings take well
under a millisecond, where SQLite FTS5's bm25() alone takes several (measured in
bench/RESULTS.md). Above :data:`~.ann.DEFAULT_THRESHOLD` vectors the product grows
past a millisecond, so a large space is also searched through an approximate
graph (:mod:`.ann`), which proposes candidates that are then scored exactly here.
The store stays the system of record: this index is rebuilt from it whenever it
is missing or another process has written.

A write costs the same whatever the size of the space: arrays grow by doubling,
a batch's vectors are copied in one block, a batch's postings are appended per
term in one step, and the graph is fed by a background thread (bench/scale.py
measures batched adds at 1k and 1M memories).
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import weakref
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ..policies.text import many_index_terms
from .ann import DEFAULT_THRESHOLD, AnnIndex, fetch_size, usearch_index

log = logging.getLogger(__name__)

BM25_K1 = 1.2
BM25_B = 0.75
# Below this many rows OpenBLAS computes a query's product on one thread anyway.
_THREADED_ROWS = 1024
# With the graph in use, a filter that leaves at most this many rows (or 1/32 of
# the space) is searched exactly over just those rows: scoring a row gathered from
# the transposed matrix costs about 30 times a row of the full product (a row read
# whole from a space stored by row: about as much when cached, ten times when not),
# and a graph search asking for enough candidates to survive such a filter costs more.
_GATHER_ROWS = 2048
_GATHER_SHARE = 32
# The most candidates asked of the graph before an exact search is cheaper.
_MAX_FETCH = 4096
# Rows appended per block copy: loading a whole space needs no second copy of it.
_APPEND_CHUNK = 8192
#: How many run and speaker masks a space keeps (see SpaceIndex._label_mask).
_LABEL_MASKS = 32
# From this many rows on, an exact search first ranks every row by an int8 copy of
# the vectors (a quarter of the memory to read: 1.9 ms instead of 6.5 ms at 100k
# rows of 384 dims on one core here), then scores the best few exactly
# (:meth:`SpaceIndex._coarse_search`). Below it the float32 product is cheap already.
_COARSE_ROWS = 16_384


#: Where the int8 kernels come from, in order: NumKong (which usearch, the ``ann``
#: extra, brings) and SimSIMD (its predecessor, 2 MB, part of the default install).
#: Both release the GIL while they multiply.
_INT8_KERNELS = ("numkong", "simsimd")


@functools.lru_cache(maxsize=1)
def _int8_dots() -> Any:
    """A function giving the dot products of an int8 vector with each row of an int8
    matrix, or None when no kernel works here. numpy has no fast int8 product:
    without a kernel searches stay float32.

    Each kernel is checked once against numpy before it is used: usearch (2.25)
    carries SimSIMD's symbols, and when it is imported first SimSIMD's own module
    refuses int8 arrays (NumKong, taken first, comes with that usearch anyway).
    """
    for name in _INT8_KERNELS:
        try:
            cdist = importlib.import_module(name).cdist
        except ImportError:
            continue
        except Exception as exc:  # a broken or foreign build under that name
            log.warning("%s cannot be used for int8 products (%s: %s)", name, type(exc).__name__, exc)
            continue
        dots = functools.partial(_cdist_dots, cdist)
        if _kernel_works(dots):
            return dots
        log.warning("%s's int8 kernel does not work in this process; large scopes are searched without it", name)
    return None


def _cdist_dots(cdist: Callable[..., Any], query: np.ndarray, rows: np.ndarray) -> np.ndarray:
    # Sums of at most dim * 127 * 127 are exact in float32 up to 1,040 dimensions
    # (6.2M at 384); past that they round by a part in ten million, nothing for a
    # first pass whose candidates are scored again.
    return np.asarray(cdist(query[None, :], rows, metric="dot", threads=1, out_dtype="float32")).reshape(-1)


def _kernel_works(dots: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> bool:
    """Whether ``dots`` gives numpy's products (a SIMD body and a tail: 67 dimensions)."""
    rows = ((np.arange(5 * 67).reshape(5, 67) * 37) % 255 - 127).astype(np.int8)
    query = rows[2][::-1].copy()
    try:
        got = dots(query, rows)
    except Exception:  # a broken or mismatched build: not used
        return False
    return bool(np.array_equal(got, rows.astype(np.float32) @ query.astype(np.float32)))


#: From this many values on, :func:`_largest` cuts at a sampled value first.
_SAMPLED_SELECT = 16_384


def _largest(values: np.ndarray, count: int) -> np.ndarray:
    """Positions of the ``count`` largest ``values`` (0 < ``count``), the smallest of
    them first and the others in no particular order (all positions, in order, when
    ``count`` is not below their number).

    A large array is first cut at a value read from every 16th element (about twice
    as many sampled values pass it as are wanted), so only the few hundred above the
    cut are partitioned: 0.06 ms instead of 0.8 ms for 164 of 100,000. If fewer than
    ``count`` pass (a sample unlike the whole), the whole array is partitioned.
    """
    size = values.shape[0]
    if count >= size:
        return np.arange(size)
    if size >= _SAMPLED_SELECT:
        sample = values[::16]
        take = min(sample.shape[0], 2 * (count // 16) + 8)
        cut = np.partition(sample, sample.shape[0] - take)[sample.shape[0] - take]
        above = np.flatnonzero(values >= cut)
        if above.shape[0] >= count:
            return above[np.argpartition(values[above], above.shape[0] - count)[above.shape[0] - count :]]
    # argpartition on the values as they are: the count largest are the last count.
    return np.argpartition(values, size - count)[size - count :]


def _dots_at(query: np.ndarray, vectors: np.ndarray, by_row: bool, positions: np.ndarray | slice) -> np.ndarray:
    """The products of ``query`` with the vectors at ``positions``, stored one row
    each (``by_row``) or transposed (see :meth:`SpaceIndex._reset`)."""
    return vectors[positions] @ query if by_row else query @ vectors[:, positions]


def _rows_at(vectors: np.ndarray, by_row: bool, positions: np.ndarray) -> np.ndarray:
    """The vectors at ``positions``, one contiguous row each (a copy)."""
    return vectors[positions] if by_row else np.ascontiguousarray(vectors[:, positions].T)


def _quantize(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``block`` (count x dim, float32) as int8 codes and one scale per row:
    ``codes * scale`` is the row to within half a step of its largest component."""
    scale = np.abs(block).max(axis=1) / 127.0 if block.shape[1] else np.zeros(block.shape[0], dtype=np.float32)
    scale = scale.astype(np.float32)
    scale[scale == 0] = 1.0  # a zero (or vectorless) row: codes 0
    codes = np.rint(block / scale[:, None]).astype(np.int8)
    return codes, scale


@functools.lru_cache(maxsize=1)
def _numpy_blas() -> Any:
    """threadpoolctl's handle on the BLAS numpy itself uses (not torch's, say)."""
    from threadpoolctl import ThreadpoolController

    blas = ThreadpoolController().select(user_api="blas")
    own = [info["filepath"] for info in blas.info() if "numpy" in info["filepath"]]
    return blas.select(filepath=own) if own else blas


def _warm_blas() -> None:
    """Find numpy's BLAS now, on the write path, once per process: it takes
    threadpoolctl several milliseconds, which the first search of a large space
    (the first after a bulk load, say) would otherwise wait for."""
    with suppress(Exception):  # one_blas_thread runs without it
        _numpy_blas()


def one_blas_thread(rows: int) -> AbstractContextManager[Any]:
    """Run a query's vector product on one BLAS thread.

    OpenBLAS splits a large matrix-vector product over its threads, which then spin
    waiting for more work. One search gains ~0.1 ms from it at 10k memories on 2
    cores, but several processes (or threads) searching at once lose far more: with
    8 writers on 2 cores each search took ~5 ms instead of ~0.2 ms, their spinning
    threads fighting for the cores (bench/concurrency.py). Memorist is served by
    several processes, so its products stay on one thread.
    """
    if rows < _THREADED_ROWS:
        return nullcontext()
    try:
        return _numpy_blas().limit(limits=1)
    except Exception:  # no threadpoolctl support for this BLAS: run as it is
        return nullcontext()


@dataclass(slots=True)
class Row:
    memory_id: str
    run_id: str
    effective_at: float  # updated_at, or created_at when never updated
    valid_to: float | None
    text: str = ""  # what BM25 indexes (the memory's search text)
    vector: np.ndarray | None = None  # None: found by BM25 only
    created_at: float = 0.0  # when it happened (time windows of queries)
    speaker: str = ""  # the casefolded name of who said it, if known
    # The row as the store holds it (an immutable tuple in the store's column
    # order), so that showing a result needs no read: see SQLiteStore.get_many.
    stored: tuple[Any, ...] | None = None


#: Up to this many rows, :meth:`SpaceIndex._append` writes postings term by term.
_SMALL_APPEND = 4


class _Postings:
    """Positions and term frequencies of one term, in arrays that grow by doubling."""

    __slots__ = ("docs", "tfs", "size", "live", "_weights")

    def __init__(self) -> None:
        self.docs = np.empty(0, dtype=np.int32)
        self.tfs = np.empty(0, dtype=np.float32)
        self.size = 0
        self.live = 0  # documents still alive that contain the term
        self._weights: tuple[tuple[float, int, int, int], np.ndarray] | None = None

    def _reserve(self, end: int) -> None:
        """Room for ``end`` positions (the arrays double as they grow)."""
        if end > self.docs.shape[0]:
            capacity = max(end, 2 * self.docs.shape[0], 4)
            for name, dtype in (("docs", np.int32), ("tfs", np.float32)):
                grown = np.empty(capacity, dtype=dtype)
                grown[: self.size] = getattr(self, name)[: self.size]
                setattr(self, name, grown)

    def extend(self, docs: list[int], tfs: list[int]) -> None:
        end = self.size + len(docs)
        self._reserve(end)
        self.docs[self.size : end] = docs
        self.tfs[self.size : end] = tfs
        self.size = end
        self.live += len(docs)

    def append(self, doc: int, tf: int) -> None:
        """One position (a row written alone: scalar steps, no arrays made)."""
        self._reserve(self.size + 1)
        self.docs[self.size] = doc
        self.tfs[self.size] = tf
        self.size += 1
        self.live += 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.docs[: self.size], self.tfs[: self.size]

    def weights(self, lengths: np.ndarray, avg_length: float, live: int, containing: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Positions and their BM25 contributions (term weight times idf).

        They depend on the average document length, the number of live documents
        and of those ``containing`` the term (by default this index's), so they are
        cached for exactly those: recomputed after a write, reused by every search in
        between.
        """
        docs, tfs = self.arrays()
        df = self.live if containing is None else containing
        key = (avg_length, live, df, self.size)
        if self._weights is None or self._weights[0] != key:
            norm = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths[docs] / avg_length)
            idf = math.log(1.0 + (live - df + 0.5) / (df + 0.5))
            self._weights = (key, tfs * (BM25_K1 + 1.0) / (tfs + norm) * np.float32(idf))
        return docs, self._weights[1]


_T = TypeVar("_T")


def _term_ids(terms: list[list[str]], lengths: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The distinct terms of rows' ``terms`` (``lengths`` each) as first seen, and
    each term's id in that list, row after row."""
    vocab: dict[str, int] = {}
    ids = np.fromiter((vocab.setdefault(t, len(vocab)) for row in terms for t in row), dtype=np.int64, count=int(lengths.sum()))
    return list(vocab), ids


def _pairs(term_ids: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Postings of rows' ``term_ids`` (``lengths`` each): each (term, row) pair once,
    grouped by term with the rows in order, as its term id, its row (from 0) and the
    term's frequency in that row."""
    width = max(lengths.shape[0], 1)
    pairs, tfs = np.unique(term_ids.astype(np.int64) * width + np.repeat(np.arange(lengths.shape[0]), lengths), return_counts=True)
    return pairs // width, pairs % width, tfs


class _FilePostings(dict[str, _Postings]):
    """Postings by term, those of an :class:`IndexImage` made into :class:`_Postings`
    when a term is first asked for: a search asks for a few terms, and making tens of
    thousands of them up front would cost most of what opening a file saves. Their
    arrays are views of the image's, copied when the term grows (:meth:`_Postings._reserve`)."""

    def __init__(self, vocab: list[str], starts: np.ndarray, docs: np.ndarray, tfs: np.ndarray) -> None:
        super().__init__()
        self._where = dict(zip(vocab, range(len(vocab)), strict=True))
        self._starts, self._docs, self._tfs = starts, docs, tfs

    def __missing__(self, term: str) -> _Postings:
        postings = self._made(term)
        if postings is None:
            raise KeyError(term)
        return postings

    def get(self, term: str, default: Any = None) -> Any:  # type: ignore[override]
        postings = dict.get(self, term)
        if postings is None:
            postings = self._made(term)
        return default if postings is None else postings

    def _made(self, term: str) -> _Postings | None:
        at = self._where.pop(term, None)
        if at is None:
            return None
        lo, hi = int(self._starts[at]), int(self._starts[at + 1])
        postings = _Postings()
        postings.docs, postings.tfs = self._docs[lo:hi], self._tfs[lo:hi]
        postings.size = postings.live = hi - lo
        self[term] = postings
        return postings


class _RowTerms:
    """Each row's BM25 terms: an :class:`IndexImage`'s rows decoded when asked for (a
    removal or a compaction asks), the rows appended since kept as lists."""

    __slots__ = ("_vocab", "_ids", "_offsets", "_count", "_added")

    def __init__(self, vocab: list[str], ids: np.ndarray, offsets: np.ndarray) -> None:
        self._vocab, self._ids, self._offsets = vocab, ids, offsets
        self._count = offsets.shape[0] - 1
        self._added: list[list[str]] = []

    def __len__(self) -> int:
        return self._count + len(self._added)

    def __getitem__(self, pos: int) -> list[str]:
        if pos < self._count:
            vocab = self._vocab
            return [vocab[t] for t in self._ids[self._offsets[pos] : self._offsets[pos + 1]].tolist()]
        return self._added[pos - self._count]

    def append(self, terms: list[str]) -> None:
        self._added.append(terms)

    def extend(self, terms: list[list[str]]) -> None:
        self._added.extend(terms)


@dataclass(frozen=True, slots=True)
class TextStats:
    """What BM25 scores with: the live rows, their total length in terms, and how
    many of them contain each query term (None: the index's own counts)."""

    live: int
    total_length: float
    containing: dict[str, int] | None

    @staticmethod
    def pooled(parts: list[TextStats]) -> TextStats:
        """The statistics of several indexes searched as one."""
        containing: dict[str, int] = {}
        for part in parts:
            for term, count in (part.containing or {}).items():
                containing[term] = containing.get(term, 0) + count
        return TextStats(sum(p.live for p in parts), sum(p.total_length for p in parts), containing)


@dataclass(slots=True)
class IndexImage:
    """The live rows of a :class:`SpaceIndex` as flat arrays, in row order: what an
    index file holds (:mod:`memorist.store.index_file`). ``runs`` and ``speakers``
    are the distinct values, ``run_codes`` and ``speaker_codes`` each row's; the
    BM25 terms are ``vocab`` ids, row ``i``'s at ``term_ids[term_offsets[i]:
    term_offsets[i + 1]]``, and term ``t``'s postings (rows, frequencies) at
    ``[posting_starts[t]:posting_starts[t + 1]]`` of ``posting_rows``/``posting_tfs``."""

    dim: int
    ids: list[str]
    runs: list[str]
    run_codes: np.ndarray  # int32
    speakers: list[str]
    speaker_codes: np.ndarray  # int32
    vectors: np.ndarray  # rows x dim, float32 (zeros where there is none)
    codes: np.ndarray | None  # rows x dim, int8; None: quantised when opened
    code_scale: np.ndarray | None  # float32
    has_vector: np.ndarray  # bool
    effective: np.ndarray  # float64
    created: np.ndarray  # float64
    valid_to: np.ndarray  # float64, +inf when unbounded
    vocab: list[str]
    term_ids: np.ndarray  # int32
    term_offsets: np.ndarray  # int64, rows + 1
    posting_starts: np.ndarray  # int64, terms + 1
    posting_rows: np.ndarray  # int32
    posting_tfs: np.ndarray  # float32

    def __len__(self) -> int:
        return len(self.ids)


class _RowsMoved(Exception):
    """The index was compacted while a search had let its lock go."""


class SpaceIndex:
    """Cosine and BM25 index of the active memories of one space.

    ``ann_threshold``: live vectors above which the space is also searched through
    an approximate graph (None: :data:`~.ann.DEFAULT_THRESHOLD`; 0: never).
    """

    def __init__(self, dim: int, generation: int, seq: int = 0, *, ann_threshold: int | None = None) -> None:
        self.dim = dim
        self.generation = generation
        # The last event of the store this index reflects: the changes written since
        # are the events after it (see SQLiteStore._index).
        self.seq = seq
        self._ann_threshold = DEFAULT_THRESHOLD if ann_threshold is None else ann_threshold
        self._ann: AnnIndex | None = None
        self._ann_unavailable = False  # usearch is not installed
        self._epoch = 0  # how many times the rows were renumbered (reset, compacted)
        # The last event of the index file last read or written for this index (None:
        # none): whether closing the store should write one (see IndexCache.save).
        self.file_seq: int | None = None
        self._reset()

    def _reset(self) -> None:
        """Empty rows and terms (the graph, if any, is the caller's business)."""
        self._epoch += 1
        self._size = 0
        # Rows below this are completely written: what the graph's thread may read.
        self._published = 0
        # Stored transposed (dim x capacity): a row-vector times this layout is
        # about twice as fast as matrix times vector for the usual sizes. From
        # _COARSE_ROWS rows on (with int8 codes) they are stored one row each
        # (capacity x dim) instead: such a space is ranked by its codes, and the few
        # rows scored exactly are then read whole (24 cache lines a row of 384 dims
        # against 384 from the transposed matrix: 0.1 ms instead of 0.56 ms for 164
        # rows of 100,000, a step that holds the GIL).
        self._by_row = False
        self._vectors = np.zeros((self.dim, 0), dtype=np.float32)
        # The same vectors as int8 codes, one row each, and each row's scale: what
        # the coarse pass of a large exact search reads (None without the kernel).
        self._codes: np.ndarray | None = np.zeros((0, self.dim), dtype=np.int8) if _int8_dots() is not None else None
        self._code_scale = np.zeros(0, dtype=np.float32)
        self._alive = np.zeros(0, dtype=bool)
        self._has_vector = np.zeros(0, dtype=bool)
        self._effective = np.zeros(0, dtype=np.float64)
        self._created = np.zeros(0, dtype=np.float64)
        self._speaker = np.zeros(0, dtype=object)
        self._speakers: dict[str, int] = {}  # live rows per speaker
        self._valid_to = np.zeros(0, dtype=np.float64)  # +inf when unbounded
        self._length = np.zeros(0, dtype=np.float32)  # BM25 document length
        self._run = np.zeros(0, dtype=object)
        # The rows of one run or speaker, as masks of the first n rows: a search asks
        # the same one for each of its rankings, and comparing 100,000 strings costs
        # ~2 ms (see _label_mask).
        self._label_masks: dict[tuple[str, str], np.ndarray] = {}
        self._ids = np.zeros(0, dtype=object)  # memory id per position
        self._stored = np.zeros(0, dtype=object)  # Row.stored per position
        # Each row's BM25 terms, as index_terms gives them.
        self._terms: list[list[str]] | _RowTerms = []
        self._pos: dict[str, int] = {}
        self._postings: dict[str, _Postings] = {}
        self._total_length = 0.0
        self._vectorless = 0  # live rows with no vector (BM25 only)
        self._expiring = 0  # live rows with an end of validity
        # The similarities of the last query, while no row was appended: one search
        # asks several rankings (time window, speaker) of the same query vector.
        self._last_sims: tuple[np.ndarray, int, np.ndarray] | None = None
        # The same for the coarse pass's approximate scores.
        self._last_coarse: tuple[np.ndarray, int, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._pos)

    @property
    def ann_threshold(self) -> int:
        """Live vectors above which searches go through the approximate graph (0: never).

        Changing it applies at once: a space now above it starts its graph; one
        below it (or at 0) is searched exactly, its graph kept until it compacts.
        """
        return self._ann_threshold

    @ann_threshold.setter
    def ann_threshold(self, value: int) -> None:
        self._ann_threshold = value
        if self._ann is not None and value:
            self._ann.lag = value
        self._feed_graph()

    def _grow(self, extra: int) -> None:
        need = self._size + extra
        cap = self._vectors.shape[0 if self._by_row else 1]
        to_rows = not self._by_row and self._codes is not None and need >= _COARSE_ROWS
        if need <= cap and not to_rows:
            return
        # Doubling: each row is copied about once on average, whatever the size.
        new_cap = max(need, cap * 2, 64) if need > cap else cap
        if new_cap >= _THREADED_ROWS:
            _warm_blas()
        by_row = self._by_row or to_rows
        vectors = np.zeros((new_cap, self.dim) if by_row else (self.dim, new_cap), dtype=np.float32)
        (vectors if by_row else vectors.T)[: self._size] = self._rows()[: self._size]
        # The graph's thread reads the array and its layout without the store's lock
        # (_ann_source): a change of layout happens while it cannot.
        ann = self._ann if to_rows else None
        with ann.lock if ann is not None else nullcontext():
            self._vectors = vectors
            self._by_row = by_row
        if self._codes is not None:
            codes = np.zeros((new_cap, self.dim), dtype=np.int8)
            codes[: self._size] = self._codes[: self._size]
            self._codes = codes
            self._code_scale = np.concatenate((self._code_scale[: self._size], np.ones(new_cap - self._size, dtype=np.float32)))
        for name, fill in (("_alive", False), ("_has_vector", False), ("_effective", 0.0), ("_created", 0.0), ("_valid_to", np.inf), ("_length", 0.0)):
            old = getattr(self, name)
            new = np.full(new_cap, fill, dtype=old.dtype)
            new[: self._size] = old[: self._size]
            setattr(self, name, new)
        for name in ("_ids", "_stored", "_run", "_speaker"):
            old = getattr(self, name)
            new = np.full(new_cap, "", dtype=object)
            new[: self._size] = old[: self._size]
            setattr(self, name, new)

    def _rows(self) -> np.ndarray:
        """The vectors one row each (capacity x dim), whichever way they are stored:
        a view, to write or read a few rows through (not to gather many from a
        transposed matrix: :func:`_rows_at` does that faster)."""
        return self._vectors if self._by_row else self._vectors.T

    def upsert(self, rows: list[Row]) -> None:
        """Add rows; a row whose id is present (or comes again later in ``rows``) replaces the old one."""
        if len({r.memory_id for r in rows}) < len(rows):
            rows = list({r.memory_id: r for r in rows}.values())
        self.remove([r.memory_id for r in rows if r.memory_id in self._pos], compact=False)
        self._grow(len(rows))
        for start in range(0, len(rows), _APPEND_CHUNK):
            chunk = rows[start : start + _APPEND_CHUNK]
            self._append(chunk, many_index_terms([row.text for row in chunk]))
        self._published = self._size
        self._feed_graph()

    def _append(self, rows: list[Row], terms: list[list[str]]) -> None:
        """Put rows (and their BM25 terms: ``terms[i]`` of ``rows[i]``) at the next positions.

        Whole-array steps, not a Python loop per row and field: this runs on the write
        path of every space indexed as it is written (a bulk add pays it per row).
        """
        count = len(rows)
        if not count:
            return
        if count <= _SMALL_APPEND:
            self._append_few(rows, terms)
            return
        self._grow(count)
        start = self._size
        end = start + count
        ids = [row.memory_id for row in rows]
        has_vector = np.fromiter((row.vector is not None for row in rows), dtype=bool, count=count)
        if has_vector.any():
            # One block copy: writing columns one at a time strides across the whole
            # matrix, and costs more the larger the space.
            block = np.zeros((count, self.dim), dtype=np.float32)
            for i in np.flatnonzero(has_vector).tolist():
                block[i] = rows[i].vector
            self._rows()[start:end] = block
            if self._codes is not None:
                self._codes[start:end], self._code_scale[start:end] = _quantize(block)
        self._pos.update(zip(ids, range(start, end), strict=True))
        self._ids[start:end] = ids
        self._stored[start:end] = [row.stored for row in rows]
        self._has_vector[start:end] = has_vector
        self._vectorless += count - int(np.count_nonzero(has_vector))
        valid_to = np.fromiter((np.inf if row.valid_to is None else row.valid_to for row in rows), dtype=np.float64, count=count)
        self._valid_to[start:end] = valid_to
        self._expiring += int(np.count_nonzero(np.isfinite(valid_to)))
        self._alive[start:end] = True
        self._effective[start:end] = np.fromiter((row.effective_at for row in rows), dtype=np.float64, count=count)
        self._created[start:end] = np.fromiter((row.created_at for row in rows), dtype=np.float64, count=count)
        self._run[start:end] = [row.run_id for row in rows]
        speakers = [row.speaker for row in rows]
        self._speaker[start:end] = speakers
        for speaker, n in Counter(s for s in speakers if s).items():
            self._speakers[speaker] = self._speakers.get(speaker, 0) + n
        self._terms.extend(terms)
        lengths = np.fromiter(map(len, terms), dtype=np.int64, count=count)
        self._length[start:end] = lengths
        self._total_length += float(lengths.sum())
        self._size = end
        if not lengths.any():
            return
        # Postings of the whole batch at once.
        names, token_ids = _term_ids(terms, lengths)
        pair_terms, pair_rows, tfs = _pairs(token_ids, lengths)
        bounds = np.flatnonzero(np.diff(pair_terms)) + 1
        doc_of_pair = (pair_rows + start).astype(np.int32)
        tfs = tfs.astype(np.float32)
        for term_id, lo, hi in zip(
            pair_terms[np.concatenate(([0], bounds))].tolist(), [0, *bounds.tolist()], [*bounds.tolist(), pair_terms.shape[0]], strict=True
        ):
            term = names[term_id]
            posting = self._postings.get(term)
            if posting is None:
                posting = self._postings[term] = _Postings()
            posting.extend(doc_of_pair[lo:hi], tfs[lo:hi])

    def _append_few(self, rows: list[Row], terms: list[list[str]]) -> None:
        """:meth:`_append` for a few rows (single adds), in scalar steps: at this size
        the batch's array operations cost more than the work they do."""
        self._grow(len(rows))
        for row, row_terms in zip(rows, terms, strict=True):
            pos = self._size
            self._pos[row.memory_id] = pos
            self._ids[pos] = row.memory_id
            self._stored[pos] = row.stored
            has_vector = row.vector is not None
            if has_vector:
                self._rows()[pos] = row.vector
                if self._codes is not None:
                    codes, scale = _quantize(np.asarray(row.vector, dtype=np.float32).reshape(1, -1))
                    self._codes[pos], self._code_scale[pos] = codes[0], scale[0]
            self._has_vector[pos] = has_vector
            self._vectorless += not has_vector
            valid_to = math.inf if row.valid_to is None else row.valid_to
            self._valid_to[pos] = valid_to
            self._expiring += math.isfinite(valid_to)
            self._alive[pos] = True
            self._effective[pos] = row.effective_at
            self._created[pos] = row.created_at
            self._run[pos] = row.run_id
            self._speaker[pos] = row.speaker
            if row.speaker:
                self._speakers[row.speaker] = self._speakers.get(row.speaker, 0) + 1
            self._terms.append(row_terms)
            self._length[pos] = len(row_terms)
            self._total_length += float(len(row_terms))
            self._size = pos + 1
            for term, tf in Counter(row_terms).items():
                posting = self._postings.get(term)
                if posting is None:
                    posting = self._postings[term] = _Postings()
                posting.append(pos, tf)

    def remove(self, memory_ids: list[str], *, compact: bool = True) -> None:
        for mid in memory_ids:
            pos = self._pos.pop(mid, None)
            if pos is None:
                continue
            self._alive[pos] = False
            self._stored[pos] = None  # the row is gone: free what it held
            speaker = self._speaker[pos]
            if speaker:
                self._speakers[speaker] -= 1
                if not self._speakers[speaker]:
                    del self._speakers[speaker]
            self._vectorless -= not self._has_vector[pos]
            self._expiring -= bool(np.isfinite(self._valid_to[pos]))
            self._total_length -= float(self._length[pos])
            for term in dict.fromkeys(self._terms[pos]):
                self._postings[term].live -= 1
        # Compact once dead rows dominate, so memory stays proportional to live rows.
        if compact and self._size > 1024 and len(self._pos) < self._size // 2:
            self._compact()

    def _compact(self) -> None:
        """Rebuild with the live rows only (their terms are kept, not re-tokenised)."""
        keep = np.flatnonzero(self._alive[: self._size])
        vectors = self._rows()
        rows = [
            Row(
                self._ids[i],
                self._run[i],
                float(self._effective[i]),
                None if math.isinf(self._valid_to[i]) else float(self._valid_to[i]),
                vector=vectors[i] if self._has_vector[i] else None,
                created_at=float(self._created[i]),
                speaker=self._speaker[i],
                stored=self._stored[i],
            )
            for i in keep
        ]
        terms = [self._terms[i] for i in keep]
        ann = self._ann
        # The graph's thread reads the arrays: it waits while they are rebuilt.
        with ann.lock if ann is not None else nullcontext():
            self._reset()
            self._grow(len(rows))
            for start in range(0, len(rows), _APPEND_CHUNK):
                self._append(rows[start : start + _APPEND_CHUNK], terms[start : start + _APPEND_CHUNK])
            if ann is not None:
                ann.renumber(keep)
            self._published = self._size
        if ann is not None:
            if self._live_vectors() < self.ann_threshold // 2:
                ann.close()  # small again: exact search, and the graph's memory back
                self._ann = None
            else:
                ann.notify()

    # Index files --------------------------------------------------------------------

    def image(self) -> IndexImage:
        """The live rows as flat arrays (see :class:`IndexImage`), for an index file."""
        n = self._size
        keep = np.flatnonzero(self._alive[:n])
        count = keep.shape[0]
        if count == n:  # no dead rows: views, not copies
            vectors = self._vectors[:n] if self._by_row else self._vectors[:, :n].T
            codes = None if self._codes is None else self._codes[:n]
        else:
            vectors = _rows_at(self._vectors, self._by_row, keep)
            codes = None if self._codes is None else self._codes[keep]
        row_terms = [self._terms[i] for i in keep.tolist()]
        lengths = np.fromiter(map(len, row_terms), dtype=np.int64, count=count)
        vocab, term_ids = _term_ids(row_terms, lengths)
        pair_terms, pair_rows, tfs = _pairs(term_ids, lengths)  # as _append makes them
        # Unique over the strings themselves (a fixed-width copy would drop trailing NULs).
        runs, run_codes = np.unique(self._run[keep], return_inverse=True)
        speakers, speaker_codes = np.unique(self._speaker[keep], return_inverse=True)
        return IndexImage(
            dim=self.dim,
            ids=self._ids[keep].tolist(),
            runs=runs.tolist(),
            run_codes=run_codes.astype(np.int32),
            speakers=speakers.tolist(),
            speaker_codes=speaker_codes.astype(np.int32),
            vectors=vectors,
            codes=codes,
            code_scale=None if self._codes is None else self._code_scale[keep],
            has_vector=self._has_vector[keep],
            effective=self._effective[keep],
            created=self._created[keep],
            valid_to=self._valid_to[keep],
            vocab=vocab,
            term_ids=term_ids.astype(np.int32),
            term_offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
            posting_starts=np.searchsorted(pair_terms, np.arange(len(vocab) + 1)).astype(np.int64),
            posting_rows=pair_rows.astype(np.int32),
            posting_tfs=tfs.astype(np.float32),
        )

    def sample(self, count: int) -> dict[str, np.ndarray | None]:
        """Up to ``count`` live rows spread across the index: id -> vector (None if it has none)."""
        live = np.flatnonzero(self._alive[: self._size])
        if live.shape[0] == 0:
            return {}
        rows = live[np.unique(np.linspace(0, live.shape[0] - 1, min(count, live.shape[0])).astype(np.int64))]
        vectors = _rows_at(self._vectors, self._by_row, rows)
        return {
            self._ids[p]: (vectors[i] if self._has_vector[p] else None) for i, p in enumerate(rows.tolist())
        }

    @classmethod
    def from_image(cls, image: IndexImage, generation: int, seq: int) -> SpaceIndex:
        """An index holding ``image``'s rows, reflecting the store at event ``seq``.

        The image's arrays are used as they are (those of a file are mapped, not
        read): rows below the index's size are never written in place, and the
        first row appended copies every array (they hold no spare room).
        """
        index = cls(image.dim, generation, seq)
        index._fill(image)
        return index

    def _fill(self, image: IndexImage) -> None:
        n = len(image)
        if self._codes is not None:
            if image.codes is None or image.code_scale is None:
                self._codes, self._code_scale = _quantize(np.asarray(image.vectors, dtype=np.float32))
            else:
                self._codes, self._code_scale = image.codes, image.code_scale
        # One row each where an int8 pass ranks them (as _grow lays them out), else transposed.
        self._by_row = self._codes is not None and n >= _COARSE_ROWS
        self._vectors = image.vectors if self._by_row else np.ascontiguousarray(np.asarray(image.vectors).T)
        self._alive = np.ones(n, dtype=bool)
        self._has_vector = np.array(image.has_vector, dtype=bool)
        self._effective = np.array(image.effective, dtype=np.float64)
        self._created = np.array(image.created, dtype=np.float64)
        self._valid_to = np.array(image.valid_to, dtype=np.float64)
        lengths = np.diff(image.term_offsets)
        self._length = lengths.astype(np.float32)
        self._ids = np.array(image.ids, dtype=object)
        self._stored = np.full(n, None, dtype=object)
        self._run = np.array(image.runs, dtype=object)[image.run_codes] if n else np.zeros(0, dtype=object)
        self._speaker = np.array(image.speakers, dtype=object)[image.speaker_codes] if n else np.zeros(0, dtype=object)
        counts = np.bincount(image.speaker_codes, minlength=len(image.speakers))
        self._speakers = {name: int(c) for name, c in zip(image.speakers, counts.tolist(), strict=True) if name and c}
        self._terms = _RowTerms(image.vocab, image.term_ids, image.term_offsets)
        self._pos = dict(zip(image.ids, range(n), strict=True))
        if len(self._pos) != n:
            raise ValueError("an index image holds an id twice")
        self._postings = _FilePostings(image.vocab, image.posting_starts, image.posting_rows, image.posting_tfs)
        self._total_length = float(lengths.sum())
        self._vectorless = n - int(np.count_nonzero(self._has_vector))
        self._expiring = int(np.count_nonzero(np.isfinite(self._valid_to)))
        self._size = self._published = n
        self._feed_graph()

    # The approximate graph ---------------------------------------------------------

    def _live_vectors(self) -> int:
        return len(self._pos) - self._vectorless

    def _ann_source(self) -> tuple[int, Callable[[np.ndarray], np.ndarray], np.ndarray, np.ndarray]:
        """What the graph's thread reads: published rows, the vectors at given
        positions (one row each), which rows have one, which are alive."""
        return self._published, functools.partial(_rows_at, self._vectors, self._by_row), self._has_vector, self._alive

    def _feed_graph(self) -> None:
        """Start the space's graph once it is large enough, and hand it new rows."""
        if self._ann is None:
            if not self.ann_threshold or self.dim == 0 or self._ann_unavailable:
                return
            if self._live_vectors() < self.ann_threshold:
                return
            index_cls = usearch_index()
            if index_cls is None:
                self._ann_unavailable = True
                return
            # The graph's thread must not keep a dropped index (and its arrays) alive.
            ref = weakref.WeakMethod(self._ann_source)

            def source() -> tuple[int, Callable[[np.ndarray], np.ndarray], np.ndarray, np.ndarray] | None:
                method = ref()
                return None if method is None else method()

            self._ann = AnnIndex(self.dim, source, index_cls)
            self._ann.lag = self.ann_threshold
        self._ann.notify()

    def close(self) -> None:
        """Dropped by its store: the background thread stops building its graph (it
        went on for a closed store as long as the application held the store)."""
        if self._ann is not None:
            self._ann.close()
            self._ann = None
        self._ann_unavailable = True  # no new graph either; searches stay exact

    def ann_pending(self) -> int | None:
        """Rows not yet in the approximate graph (searched exactly meanwhile); None: no graph."""
        return None if self._ann is None else self._ann.pending()

    def catch_up_ann(self, *, threads: int = 0, timeout: float | None = None) -> bool:
        """Put every row in the approximate graph now, on ``threads`` cores (0: all).

        The background thread does this anyway; benchmarks and tests wait for it
        here. False when there is no graph or ``timeout`` ran out.
        """
        return self._ann is not None and self._ann.catch_up(threads=threads, timeout=timeout)

    # Searching ------------------------------------------------------------------------

    def stored(self, memory_id: str) -> tuple[Any, ...] | None:
        """The stored columns of a live row, if it carries them."""
        pos = self._pos.get(memory_id)
        return None if pos is None else self._stored[pos]

    def keep_stored(self, memory_id: str, stored: tuple[Any, ...]) -> None:
        """Keep the stored columns of a live row that has none (a space loaded from the
        store reads them when a result is first shown). The caller read them while
        this index was current."""
        pos = self._pos.get(memory_id)
        if pos is not None and self._stored[pos] is None:
            self._stored[pos] = stored

    def run_of(self, memory_id: str) -> str | None:
        """The run id of a live row; None when the row is not live here."""
        pos = self._pos.get(memory_id)
        return None if pos is None else self._run[pos]

    def in_run(self, values: dict[str, _T], run_id: str | None) -> dict[str, _T]:
        """``values`` (by memory id) of the live rows of run ``run_id`` (None: all of them)."""
        if run_id is None:
            return values
        return {m: v for m, v in values.items() if self.run_of(m) == run_id}

    def speakers(self) -> set[str]:
        """The casefolded speaker names of the live rows."""
        return set(self._speakers)

    def _mask(
        self,
        run_id: str | None,
        cutoff: float | None,
        now: float | None,
        window: tuple[float, float] | None = None,
        speaker: str | None = None,
    ) -> np.ndarray | None:
        """Rows a search may return, or None when that is every row (the usual case)."""
        n = self._size
        if (
            run_id is None
            and cutoff is None
            and window is None
            and speaker is None
            and len(self._pos) == n
            and (now is None or self._expiring == 0)
        ):
            return None
        mask = self._alive[:n].copy()
        if window is not None:
            mask &= (self._created[:n] >= window[0]) & (self._created[:n] < window[1])
        if speaker is not None:
            mask &= self._label_mask("_speaker", speaker)
        if run_id is not None:
            mask &= self._label_mask("_run", run_id)
        if cutoff is not None:
            mask &= self._effective[:n] >= cutoff
        if now is not None:
            mask &= self._valid_to[:n] > now
        return mask

    def _label_mask(self, column: str, value: str) -> np.ndarray:
        """The rows whose ``column`` (``_run`` or ``_speaker``) is ``value``, the same
        array again while the index holds as many rows (read only: callers combine
        it into masks of their own). A row's run and speaker never change in place:
        a write appends the row anew, and only ``_reset`` (a compaction, which
        clears these masks) renumbers rows."""
        n = self._size
        key = (column, value)
        cached = self._label_masks.get(key)
        if cached is not None and cached.shape[0] == n:
            return cached
        mask = getattr(self, column)[:n] == value
        if len(self._label_masks) >= _LABEL_MASKS:
            self._label_masks.clear()
        self._label_masks[key] = mask
        return mask

    def _top(self, scores: np.ndarray, candidates: np.ndarray | None, k: int | None) -> list[tuple[str, float]]:
        """The ``k`` best rows by score, best first (all candidates when ``k`` is None).

        ``candidates`` are the positions that may be returned (None: every row).
        """
        return self._best(scores if candidates is None else scores[candidates], candidates, k)

    def _best(self, values: np.ndarray, positions: np.ndarray | None, k: int | None) -> list[tuple[str, float]]:
        """The ``k`` best of ``positions`` (None: every row) by ``values``, their scores."""
        size = values.shape[0]
        if size == 0:
            return []
        if k is not None and k < size:
            top = _largest(values, k)
            low = values[top[0]]  # the smallest kept
            if np.count_nonzero(values >= low) > k:
                # Ties across the cut (only rows equal to the lowest kept can pass it
                # too): the first rows of them (the order written), not any, as
                # PostgreSQL's SQL orders them: the backends return the same.
                above = np.flatnonzero(values > low)
                top = np.concatenate([above, np.flatnonzero(values == low)[: k - above.shape[0]]])
            # Best first, equal values in the order of their rows (argpartition leaves any).
            top.sort()
            order = top[np.argsort(-values[top], kind="stable")]
        else:
            order = np.argsort(-values, kind="stable")
        chosen = order if positions is None else positions[order]
        # Whole-array steps: indexing numpy arrays element by element costs ~1 µs a hit.
        return list(zip(self._ids[chosen].tolist(), values[order].tolist(), strict=True))

    def search(
        self,
        query: np.ndarray,
        *,
        k: int | None,
        run_id: str | None = None,
        cutoff: float | None = None,
        now: float | None = None,
        window: tuple[float, float] | None = None,
        speaker: str | None = None,
        unlocked: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> list[tuple[str, float]]:
        """The ``k`` live rows most similar to ``query`` (all of them when ``k`` is None),
        optionally only those created inside ``window`` or said by ``speaker``.

        ``unlocked``: a context in which the caller's lock is let go while a large
        space's vectors are multiplied, so that other threads use the store meanwhile
        (searches of one process then share the cores). That is safe because the
        rows below the index's size never change in place: appends write past them,
        growing copies them to new arrays, removals only clear ``_alive`` (read
        again afterwards). Only a compaction renumbers rows; if one happened
        meanwhile the search is done again with the lock held.
        """
        mask_args = (run_id, cutoff, now, window, speaker)
        ann = self._ann
        if ann is not None:
            ann.searching += 1  # the graph's thread yields meanwhile
        try:
            return self._search(query, k, mask_args, unlocked)
        except _RowsMoved:
            return self._search(query, k, mask_args, nullcontext)
        finally:
            if ann is not None:
                ann.searching -= 1

    def _search(
        self, query: np.ndarray, k: int | None, mask_args: tuple[Any, ...], unlocked: Callable[[], AbstractContextManager[Any]]
    ) -> list[tuple[str, float]]:
        n = self._size
        if n == 0 or (k is not None and k <= 0):
            return []
        query = query.astype(np.float32, copy=False)
        mask = self._mask(*mask_args)
        last = self._last_sims
        cached = last is not None and last[1] == n and np.array_equal(last[0], query)
        # With this query's similarities at hand (a search ranks one query several
        # ways), the exact ranking costs less than the graph's.
        if not cached and k is not None and self._ann is not None and 0 < self.ann_threshold <= self._live_vectors():
            hits = self._search_graph(query, k, mask)
            if hits is not None:
                return hits
        if not cached and k is not None and self._codes is not None and n >= _COARSE_ROWS:
            return self._coarse_search(query, k, mask, unlocked)
        if cached:
            assert last is not None
            sims = last[2]
        else:
            vectors, by_row = self._vectors, self._by_row

            def product() -> np.ndarray:
                with one_blas_thread(n):
                    return _dots_at(query, vectors, by_row, slice(0, n))

            if n >= _COARSE_ROWS:
                sims = self._outside_lock(unlocked, product)
                # As rows are now (some may have gone meanwhile), over the n scored
                # (rows appended meanwhile came after this search began).
                mask = self._mask(*mask_args)
                if mask is not None:
                    mask = mask[:n]
            else:
                sims = product()
            self._last_sims = (query.copy(), n, sims)
        if mask is None and self._vectorless == 0:
            return self._top(sims, None, k)
        usable = self._has_vector[:n] if mask is None else mask & self._has_vector[:n]
        return self._top(sims, np.flatnonzero(usable), k)

    def _outside_lock(self, unlocked: Callable[[], AbstractContextManager[Any]], work: Callable[[], _T]) -> _T:
        """``work()`` (numpy on arrays it holds) with the caller's lock let go; raises
        :class:`_RowsMoved` if the rows were renumbered (compacted) meanwhile."""
        epoch = self._epoch
        with unlocked():
            out = work()
        if self._epoch != epoch:
            raise _RowsMoved
        return out

    def _coarse_search(
        self, query: np.ndarray, k: int, mask: np.ndarray | None, unlocked: Callable[[], AbstractContextManager[Any]]
    ) -> list[tuple[str, float]]:
        """The exact search of a large space in two passes: every row ranked by its
        int8 codes, then the best ``k`` + 64 (+ ``k`` / 4 past 256) scored exactly from
        the float32 vectors. The scores returned are exact cosines; a row of the true
        best ``k`` is missed only if quantising moved it below that many others (int8
        codes with a scale per row move a cosine by a few thousandths at most; the
        tests compare with the float32 product)."""
        n = self._size
        assert self._codes is not None
        usable = (self._has_vector[:n] if mask is None else mask & self._has_vector[:n]) & self._alive[:n]
        eligible = int(np.count_nonzero(usable))
        if eligible == 0:
            return []
        fetch = min(eligible, k + max(64, k // 4))
        last = self._last_coarse
        known = last[2] if last is not None and last[1] == n and np.array_equal(last[0], query) else None
        query_codes = _quantize(query.reshape(1, -1))[0][0]
        # The arrays as they are now: a compaction while the lock is let go replaces
        # them (and the search is done again), it never changes these.
        codes, scale, dots = self._codes[:n], self._code_scale[:n], _int8_dots()
        vectors, by_row = self._vectors, self._by_row

        def passes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            approx = dots(query_codes, codes) * scale if known is None else known
            ranked = approx if eligible == n else np.where(usable, approx, -np.inf)
            candidates = np.sort(_largest(ranked, fetch))  # ascending: cheaper to gather
            candidates = candidates[usable[candidates]]
            return approx, candidates, _dots_at(query, vectors, by_row, candidates)

        approx, candidates, exact = self._outside_lock(unlocked, passes)
        self._last_coarse = (query.copy(), n, approx)
        alive = self._alive[candidates]  # rows removed while the lock was let go
        return self._best(exact[alive], candidates[alive], k)

    def _search_graph(self, query: np.ndarray, k: int, mask: np.ndarray | None) -> list[tuple[str, float]] | None:
        """Search through the approximate graph, scoring its candidates exactly.

        None when an exact search over every row is the better way: no graph yet,
        or filters that leave too many rows to gather but too few for the graph.
        """
        ann = self._ann  # (once: close() may clear it meanwhile, from another thread)
        if ann is None:
            return None
        n = self._size
        if mask is None:
            ok = None  # every live row with a vector: no O(n) mask to build
            eligible = self._live_vectors()
        else:
            ok = mask & self._has_vector[:n]
            eligible = int(np.count_nonzero(ok))
            if eligible <= max(_GATHER_ROWS, n // _GATHER_SHARE):
                # A selective filter: score just the rows it leaves.
                positions = np.flatnonzero(ok)
                return self._best(self._gathered(query, positions), positions, k)
        if eligible == 0:
            return []
        covered = ann.covered()
        if covered == 0:
            ann.notify()  # (a forked child has rows for a graph it never fed)
            return None  # the graph is still being built: exact meanwhile
        in_graph = eligible - self._eligible_from(covered, ok).shape[0]
        if 2 * in_graph < eligible or (self._codes is not None and eligible - in_graph >= _COARSE_ROWS):
            # Most rows are not in the graph yet (right after a bulk load): they are
            # scored exactly anyway, and the graph's search would only add to it; and
            # the coarse pass over every row costs less than a float32 product over
            # that many rows the graph lacks.
            return None
        fetch = fetch_size(k, ann.keys(), in_graph, ann.params)
        while in_graph > 0:
            if fetch > _MAX_FETCH:
                return None
            found = ann.search(query, fetch)
            if found is None:
                return None
            positions, covered, keys = found
            positions = positions[positions >= 0]
            positions = positions[self._alive[positions] & self._has_vector[positions] if ok is None else ok[positions]]
            # Enough survived the filters, or the graph gave all it has.
            if positions.shape[0] >= k or fetch >= keys:
                break
            fetch *= 4
        else:
            positions = np.zeros(0, dtype=np.int64)
        tail = self._eligible_from(covered, ok)  # rows not in the graph yet: scored exactly
        values = np.concatenate((self._gathered(query, positions), self._gathered(query, tail)))
        return self._best(values, np.concatenate((positions, tail)), k)

    def _eligible_from(self, start: int, ok: np.ndarray | None) -> np.ndarray:
        """Positions from ``start`` on that a search may return (``ok``, or live with a vector)."""
        n = self._size
        usable = self._alive[start:n] & self._has_vector[start:n] if ok is None else ok[start:]
        return start + np.flatnonzero(usable)

    def _gathered(self, query: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The cosines of ``query`` with the rows at ``positions`` (ascending or not)."""
        vectors, by_row = self._vectors, self._by_row
        if not by_row and positions.shape[0] > 1:
            lo, hi = int(positions.min()), int(positions.max()) + 1
            # Columns gathered from the transposed matrix cost about 30 times a column
            # of a contiguous product: rows close together (a time window: rows are
            # appended in time order) are cheaper as the product over their span.
            if hi - lo <= _GATHER_SHARE * positions.shape[0]:
                with one_blas_thread(hi - lo):
                    return (query @ vectors[:, lo:hi])[positions - lo]
        return _dots_at(query, vectors, by_row, positions)

    def similarities(self, query: np.ndarray, memory_ids: list[str]) -> dict[str, float]:
        """The cosine of ``query`` with each of ``memory_ids`` that is a live row with a vector."""
        n = self._size
        positions = [p for p in (self._pos.get(m) for m in memory_ids) if p is not None and self._has_vector[p]]
        if not positions:
            return {}
        query = query.astype(np.float32, copy=False)
        last = self._last_sims
        if last is not None and last[1] == n and np.array_equal(last[0], query):
            values = last[2][positions]
        else:
            values = _dots_at(query, self._vectors, self._by_row, np.asarray(positions))
        return dict(zip(self._ids[positions].tolist(), values.tolist(), strict=True))

    def created_times(self, memory_ids: list[str]) -> dict[str, float]:
        """When each of ``memory_ids`` that is a live row was created (its time)."""
        positions = [p for p in (self._pos.get(m) for m in memory_ids) if p is not None and self._alive[p]]
        return dict(zip(self._ids[positions].tolist(), self._created[positions].tolist(), strict=True))

    def text_stats(self, terms: list[str]) -> TextStats:
        """This index's BM25 statistics for ``terms`` (summed over several indexes by
        :meth:`TextStats.pooled`)."""
        containing = {}
        for term in dict.fromkeys(terms):
            postings = self._postings.get(term)
            containing[term] = 0 if postings is None else max(postings.live, 0)
        return TextStats(len(self._pos), self._total_length, containing)

    def search_text(
        self,
        terms: list[str],
        *,
        k: int | None,
        run_id: str | None = None,
        cutoff: float | None = None,
        now: float | None = None,
        stats: TextStats | None = None,
    ) -> list[tuple[str, float]]:
        """BM25 over the live rows; only rows containing at least one term are returned.

        ``stats``: the statistics to score with, when several indexes are searched as
        one (:meth:`TextStats.pooled`): their scores then compare, and are those one
        index holding all their rows would give."""
        live = len(self._pos)
        if live == 0 or not terms or (k is not None and k <= 0):
            return []
        if stats is None:
            stats = TextStats(live, self._total_length, None)
        avg_length = max(stats.total_length / max(stats.live, 1), 1e-9)
        docs: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        for term in dict.fromkeys(terms):
            postings = self._postings.get(term)
            if postings is None or postings.live <= 0:
                continue
            containing = None if stats.containing is None else stats.containing.get(term)
            positions, contributions = postings.weights(self._length, avg_length, stats.live, containing)
            docs.append(positions)
            weights.append(contributions)
        if not docs:
            return []
        # One pass sums every term's contribution per row.
        scores = np.bincount(np.concatenate(docs), weights=np.concatenate(weights), minlength=self._size)
        # idf and the term weights are positive, so a score above 0 means a match.
        mask = self._mask(run_id, cutoff, now)
        hit = scores > 0  # nonzero() of a boolean array is several times cheaper
        return self._top(scores, np.flatnonzero(hit if mask is None else mask & hit), k)
