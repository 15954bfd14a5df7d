"""A space's in-process index written to a file, so that another process opens it
without reading and tokenising every row of the store.

Loading a space of 100,000 memories from SQLite takes a new process 1.7 s (the rows,
their vectors, BM25 terms and postings, int8 codes: bench/RESULTS.md); the same
index read from its file takes a small part of that, its vectors mapped rather than
read. The file is a cache: the store stays the system of record, and the reader
checks a file against the store's event log before using it (see
:mod:`memorist.store.sqlite.index`); any file it cannot use is ignored.

Layout: 16 bytes of magic, the header's length (8 bytes, little-endian), the header
(JSON: the format version, the caller's ``meta``, where each array and the strings
lie, and each one's CRC-32), the header's own CRC-32 (4 bytes), then the arrays,
each at a multiple of 64 bytes from the first, and the strings (runs, speakers,
terms, and the ids unless they follow it one a line) as one JSON object. Written
to a temporary file, synced, then renamed over the old one: a reader sees one
whole file or the other, and a crash leaves at most a temporary file behind.

A reader refuses a file whose bytes are not those written (a disk's or a person's
damage). :func:`read` compares every checksum before it returns; :func:`open_image`
leaves them to a :class:`Checksums` the caller runs on a thread of its own while it
goes on with the image: first those of every part but the vectors and their int8
codes (about 17 MB at 100,000 rows of 384 dimensions, 4 ms), which the caller waits
for before it uses the image, then those two (190 MB there, 50–70 ms), which it need
not wait for: meanwhile a sample of rows' codes, quantised again from their vectors
as the file is read, stands for them.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import threading
import uuid
import weakref
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .vector_index import IndexImage, _quantize

MAGIC = b"MEMORIST-INDEX\n\x00"
#: 3: each part's CRC-32 and the header's (files of version 2 had none: refused).
VERSION = 3
_ALIGN = 64
# Arrays mapped from the file rather than read: the large ones, which a search reads
# in part (the few rows scored exactly) or not at all until then. Windows cannot
# replace a file another process has mapped, so there every array is read.
_MAPPED = ("vectors", "codes", "term_ids", "posting_rows", "posting_tfs") if os.name != "nt" else ()
_ARRAYS = (
    "vectors", "codes", "code_scale", "has_vector", "effective", "created", "valid_to", "run_codes", "speaker_codes",
    "term_ids", "term_offsets", "posting_starts", "posting_rows", "posting_tfs",
)
_STRINGS = ("ids", "runs", "speakers", "vocab")
# The parts whose checksums are compared last (Checksums): the rows x dim ones, which
# a search reads a part of (or, for the codes, reads whole anyway).
_LATE = ("vectors", "codes")
# Rows written to the file per block (a copy of at most this many rows at a time).
_BLOCK_ROWS = 8192
# Bytes of a mapped part checksummed per mapping of its own (Checksums): the pages
# read leave the process with it, where the index's own mapping would keep them all.
_CHECK_WINDOW = 1 << 23
#: Rows whose int8 codes are quantised again from their vectors when a file is read,
#: while the codes' checksum waits (Checksums): blocks of :data:`_SAMPLED_BLOCK`
#: consecutive rows (a read each) spread across the file.
SAMPLED_CODES = 256
_SAMPLED_BLOCK = 16


class IndexFileError(ValueError):
    """An index file that cannot be used: not one, another version, or damaged."""


#: What reading a damaged file's values raises (a field missing, of the wrong type or
#: shape): here while it is read, and in the caller while it is checked and used.
DAMAGE = (KeyError, TypeError, ValueError, IndexError, AttributeError)


def write(path: Path, image: IndexImage, meta: dict[str, Any]) -> None:
    """Write ``image`` and ``meta`` (JSON values) to ``path``, replacing it whole."""
    arrays = {name: getattr(image, name) for name in _ARRAYS if getattr(image, name) is not None}
    # The ids one a line when none holds a line break (memory ids never do): splitting
    # them costs a third of decoding them as JSON, and they are most of the strings.
    as_lines = not any("\n" in i for i in image.ids)
    values = {name: getattr(image, name) for name in _STRINGS}
    if as_lines:
        values["ids"] = None
    strings = json.dumps(values, ensure_ascii=False).encode("utf-8")
    ids = "\n".join(image.ids).encode("utf-8") if as_lines else b""
    places: dict[str, Any] = {}
    offset = 0
    for name, array in arrays.items():
        places[name] = [np.dtype(array.dtype).str, list(array.shape), offset]
        offset = _aligned(offset + array.nbytes)
    # Each part's CRC-32 as 8 hex digits: the header's length does not depend on them,
    # so it is written first and again, with them, once the arrays are (one pass over them).
    sums = dict.fromkeys([*arrays, "strings", "ids"], f"{0:08x}")

    def encoded() -> bytes:
        return json.dumps(
            {"version": VERSION, "dim": image.dim, "meta": meta, "arrays": places, "strings": [offset, len(strings)],
             "ids": [offset + len(strings), len(ids)], "sums": sums}
        ).encode("utf-8")

    header = encoded()
    # The process's id first (a reader removes the temporary files of processes that
    # ended), then a part of its own: two stores of one process may write at once.
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(temporary, "wb") as out:
            out.write(MAGIC + struct.pack("<Q", len(header)) + header + bytes(4))
            start = _aligned(out.tell())
            for name, array in arrays.items():
                out.seek(start + places[name][2])
                crc = 0
                for block in _blocks(array):
                    crc = zlib.crc32(block, crc)
                    out.write(block)
                sums[name] = f"{crc:08x}"
            out.seek(start + offset)
            out.write(strings)
            out.write(ids)
            sums["strings"], sums["ids"] = f"{zlib.crc32(strings):08x}", f"{zlib.crc32(ids):08x}"
            final = encoded()
            if len(final) != len(header):  # (cannot happen: the sums are of fixed width)
                raise ValueError("an index file's header changed length")
            out.seek(len(MAGIC) + 8)
            out.write(final + struct.pack("<I", zlib.crc32(final)))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read(path: Path) -> tuple[IndexImage, dict[str, Any]]:
    """The image and ``meta`` written to ``path``, every checksum compared;
    :class:`IndexFileError` if the file is not a whole index file of this version,
    as written (``OSError`` if unreadable)."""
    image, meta, check = open_image(path)
    check.run()
    return image, meta


def open_image(path: Path) -> tuple[IndexImage, dict[str, Any], Checksums]:
    """:func:`read` but for the checksums of the parts (only the header's is compared,
    and the codes of :data:`SAMPLED_CODES` rows): the returned :class:`Checksums`
    compares them when run, on any thread, while the caller goes on."""
    with open(path, "rb") as source:
        stat = os.fstat(source.fileno())
        size = stat.st_size
        head = source.read(len(MAGIC) + 8)
        if len(head) < len(MAGIC) + 8 or head[: len(MAGIC)] != MAGIC:
            raise IndexFileError(f"{path} is not an index file")
        (length,) = struct.unpack("<Q", head[len(MAGIC) :])
        if length + 4 > size:
            raise IndexFileError(f"{path} is cut short")
        try:
            raw = source.read(length)
            header = json.loads(raw)
            if header["version"] != VERSION:
                raise IndexFileError(f"{path} is version {header['version']}, not {VERSION}")
            if source.read(4) != struct.pack("<I", zlib.crc32(raw)):
                raise IndexFileError(f"{path} is damaged (its header is not the one written)")
            if not isinstance(header["meta"], dict):
                raise IndexFileError(f"{path} is damaged (its header holds no meta)")
            sums = {name: int(value, 16) for name, value in header["sums"].items()}
            start = _aligned(len(MAGIC) + 8 + length + 4)
            arrays: dict[str, np.ndarray] = {}
            # What each checksum is compared with: a part in memory, or (mapped) where it lies.
            early: list[tuple[str, int, Any]] = []
            late: list[tuple[str, int, Any]] = []
            for name, (dtype, shape, offset) in header["arrays"].items():
                if name not in _ARRAYS:
                    raise IndexFileError(f"{path} holds an unknown array {name!r}")
                dtype = np.dtype(dtype)
                count = int(np.prod(shape))
                at = start + int(offset)
                if at + count * dtype.itemsize > size:
                    raise IndexFileError(f"{path} is cut short")
                if name in _MAPPED and count:
                    # From the file opened here (not its path: another process may
                    # have renamed a new one over it since).
                    array = np.memmap(source, dtype=dtype, mode="r", offset=at, shape=tuple(shape))
                else:
                    source.seek(at)
                    array = np.fromfile(source, dtype=dtype, count=count).reshape(shape)
                    if array.size != count:
                        raise IndexFileError(f"{path} is cut short")
                arrays[name] = array
                # A mapped part is read from the file (see Checksums), not through its mapping.
                (late if name in _LATE else early).append((name, sums[name], (at, array.nbytes) if isinstance(array, np.memmap) else array))
            at, length = header["strings"]
            if start + at + length > size:
                raise IndexFileError(f"{path} is cut short")
            source.seek(start + at)
            text = source.read(length)
            early.append(("strings", sums["strings"], text))
            strings = json.loads(text.decode("utf-8"))
            if strings["ids"] is None:  # one a line
                at, length = header["ids"]
                if start + at + length > size:
                    raise IndexFileError(f"{path} is cut short")
                source.seek(start + at)
                text = source.read(length)
                early.append(("ids", sums["ids"], text))
                rows = arrays["has_vector"].shape[0]
                strings["ids"] = text.decode("utf-8").split("\n") if rows else []
            image = IndexImage(
                dim=int(header["dim"]),
                codes=arrays.pop("codes", None),
                code_scale=arrays.pop("code_scale", None),
                **{name: strings[name] for name in _STRINGS},
                **arrays,
            )
            _check(path, image)
            _check_codes(path, image, source)
            # Its own descriptor: the file's, whatever is renamed over its path meanwhile.
            fd = os.dup(source.fileno()) if any(isinstance(part, tuple) for _, _, part in early + late) else None
        except IndexFileError:
            raise
        except DAMAGE as exc:
            raise IndexFileError(f"{path} is damaged ({type(exc).__name__}: {exc})") from exc
    return image, header["meta"], Checksums(path, early, late, fd, (stat.st_dev, stat.st_ino))


class Checksums:
    """The checksums of an index file's parts, compared after it was read
    (:func:`open_image`) by :meth:`run`, on whatever thread runs it: first the
    ``early`` parts (all but the vectors and codes: 17 MB at 100,000 rows, 4 ms; then
    :attr:`early` is set), then the ``late`` ones (190 MB, 50–70 ms).

    A part is checksummed in memory, or, if mapped, read from the file a window of
    :data:`_CHECK_WINDOW` bytes at a time, each mapped on its own: the index's own
    mapping would keep every page read in the process's memory. ``error``: why the file was refused
    (set before :attr:`early` is). ``identity``: the file's (device, inode), for the
    caller to remove the path only while it is still this file.
    """

    def __init__(
        self, path: Path, early: list[tuple[str, int, Any]], late: list[tuple[str, int, Any]], fd: int | None,
        identity: tuple[int, int],
    ) -> None:
        self.path = path
        self.identity = identity
        self.error: BaseException | None = None
        self.early = threading.Event()
        self._early, self._late = early, late
        self._fd = fd
        # The descriptor is closed when the comparing ends, is cancelled, or this is dropped.
        self._closer = weakref.finalize(self, os.close, fd) if fd is not None else None
        self._lock = threading.Lock()
        self._state = "waiting"  # then "running", "cancelled" or "ended"

    def run(self) -> None:
        """Compare the checksums: :class:`IndexFileError` for a part that is not the
        one written (``OSError`` if unreadable); returns at once once cancelled."""
        with self._lock:
            if self._state != "waiting":
                return
            self._state = "running"
        try:
            if self._compare(self._early):
                self._early = []  # (the strings' bytes: not kept)
                self.early.set()
                self._compare(self._late)
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self.early.set()
            with self._lock:
                self._state = "ended" if self._state == "running" else self._state
                self._close()

    def _compare(self, parts: list[tuple[str, int, Any]]) -> bool:
        """Raise for the first of ``parts`` not as written; False if cancelled."""
        for name, expected, part in parts:
            crc = self._file_crc(*part) if isinstance(part, tuple) else zlib.crc32(part)
            if crc is None:
                return False
            if crc != expected:
                raise IndexFileError(f"{self.path} is damaged (its {name} are not those written)")
        return self._state != "cancelled"

    def cancel(self) -> None:
        """Stop comparing (at the next part or window) and let go of the file."""
        with self._lock:
            running = self._state == "running"
            self._state = "cancelled"
            if not running:
                self._close()

    def _close(self) -> None:  # under the lock
        self._fd = None
        if self._closer is not None:
            self._closer()

    def _file_crc(self, at: int, length: int) -> int | None:
        """The CRC-32 of ``length`` bytes of the file from ``at`` (None: cancelled)."""
        crc = 0
        grain = mmap.ALLOCATIONGRANULARITY
        while length:
            if self._state == "cancelled" or self._fd is None:
                return None
            lo = at - at % grain
            count = min(_CHECK_WINDOW, length)
            window = mmap.mmap(self._fd, at - lo + count, access=mmap.ACCESS_READ, offset=lo)
            try:
                with memoryview(window) as view:
                    crc = zlib.crc32(view[at - lo :], crc)
            finally:
                window.close()
            at += count
            length -= count
        return crc


def _check(path: Path, image: IndexImage) -> None:
    """Refuse an image whose parts disagree (what a damaged file would give)."""
    n = len(image)
    rows = (image.vectors, image.has_vector, image.effective, image.created, image.valid_to, image.run_codes, image.speaker_codes)
    problems = [
        any(a.shape[0] != n for a in rows) or image.term_offsets.shape[0] != n + 1,
        image.vectors.ndim != 2 or image.vectors.shape[1] != image.dim,
        image.codes is not None and image.codes.shape != image.vectors.shape,
        image.code_scale is not None and image.code_scale.shape[0] != n,
        (image.codes is None) != (image.code_scale is None),
        n and (int(image.run_codes.max()) >= len(image.runs) or int(image.speaker_codes.max()) >= len(image.speakers)),
        n and (int(image.run_codes.min()) < 0 or int(image.speaker_codes.min()) < 0),
        bool(np.any(np.diff(image.term_offsets) < 0)) or int(image.term_offsets[0]) != 0,
        int(image.term_offsets[-1]) != image.term_ids.shape[0],
        image.term_ids.shape[0] and (int(image.term_ids.min()) < 0 or int(image.term_ids.max()) >= len(image.vocab)),
        image.posting_starts.shape[0] != len(image.vocab) + 1 or int(image.posting_starts[0]) != 0,
        bool(np.any(np.diff(image.posting_starts) < 0)) or int(image.posting_starts[-1]) != image.posting_rows.shape[0],
        image.posting_tfs.shape != image.posting_rows.shape,
        image.posting_rows.shape[0] and (int(image.posting_rows.min()) < 0 or int(image.posting_rows.max()) >= n),
    ]
    if any(problems):
        raise IndexFileError(f"{path} is damaged (its parts disagree)")


def _check_codes(path: Path, image: IndexImage, source: Any) -> None:
    """Refuse an image whose int8 codes, at :data:`SAMPLED_CODES` rows spread across
    it, are not those of its vectors (damage the codes' checksum, compared later,
    would show: meanwhile the codes rank every search of a large space). A mapped
    part's rows are read from ``source``, the file, not through the mapping."""
    n = len(image)
    if image.codes is None or image.code_scale is None or not n:
        return
    # Neither np.unique nor np.allclose here: the first call imports numpy.ma (10 ms).
    blocks = max(SAMPLED_CODES // _SAMPLED_BLOCK, 2)
    if n <= blocks * _SAMPLED_BLOCK:
        spans = [(0, n)]
    else:  # the first block, the last, and others evenly between (none overlapping)
        spans = [(lo, lo + _SAMPLED_BLOCK) for lo in (np.arange(blocks) * (n - _SAMPLED_BLOCK) // (blocks - 1)).tolist()]
    for lo, hi in spans:
        codes, scale = _quantize(_rows(image.vectors, lo, hi, source).astype(np.float32, copy=False))
        written = np.asarray(image.code_scale[lo:hi], dtype=np.float32)
        # Quantised as the writer did (the same steps, row by row); a step of rounding
        # is let pass, in case another build of numpy rounds a half the other way.
        if not (
            bool(np.all(np.abs(scale - written) <= 1e-6 * np.abs(written)))
            and int(np.abs(codes.astype(np.int16) - _rows(image.codes, lo, hi, source)).max(initial=0)) <= 1
        ):
            raise IndexFileError(f"{path} is damaged (its codes are not those of its vectors)")


def _rows(array: np.ndarray, lo: int, hi: int, source: Any) -> np.ndarray:
    """Rows ``lo:hi`` of ``array``; of a mapped one, read from ``source``: a page
    touched through the mapping stays in the process's memory, with its neighbours
    (2 MB a row here, where the page cache holds the file in large folios)."""
    if not isinstance(array, np.memmap):
        return np.asarray(array[lo:hi])
    width = array.dtype.itemsize * int(np.prod(array.shape[1:]))
    source.seek(int(array.offset) + lo * width)
    data = source.read((hi - lo) * width)
    if len(data) != (hi - lo) * width:
        raise IndexFileError(f"{source.name} is cut short")
    return np.frombuffer(data, dtype=array.dtype).reshape((hi - lo, *array.shape[1:]))


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def _blocks(array: np.ndarray) -> Iterator[bytes]:
    """``array``'s bytes in C order, a block of rows at a time (a view of a larger,
    or transposed, matrix is copied a block at a time, not whole)."""
    if array.ndim < 2 or array.flags.c_contiguous:
        yield memoryview(np.ascontiguousarray(array)).cast("B")
        return
    for lo in range(0, array.shape[0], _BLOCK_ROWS):
        yield np.ascontiguousarray(array[lo : lo + _BLOCK_ROWS]).tobytes()
