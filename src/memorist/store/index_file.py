"""A space's in-process index written to a file, so that another process opens it
without reading and tokenising every row of the store.

Loading a space of 100,000 memories from SQLite takes a new process 1.7 s (the rows,
their vectors, BM25 terms and postings, int8 codes: bench/RESULTS.md); the same
index read from its file takes a small part of that, its vectors mapped rather than
read. The file is a cache: the store stays the system of record, and the reader
checks a file against the store's event log before using it (see
:mod:`memorist.store.sqlite.index`); any file it cannot use is ignored.

Layout: 16 bytes of magic, the header's length (8 bytes, little-endian), the header
(JSON: the format version, the caller's ``meta``, and where each array and the
strings lie), then the arrays, each at a multiple of 64 bytes from the first, and
the strings (runs, speakers, terms, and the ids unless they follow it one a line)
as one JSON object. Written to a temporary file, synced, then renamed over the old
one: a reader sees one whole file or the other, and a crash leaves at most a
temporary file behind.
"""

from __future__ import annotations

import json
import os
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .vector_index import IndexImage

MAGIC = b"MEMORIST-INDEX\n\x00"
VERSION = 2
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
# Rows written to the file per block (a copy of at most this many rows at a time).
_BLOCK_ROWS = 8192


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
    header = json.dumps(
        {"version": VERSION, "dim": image.dim, "meta": meta, "arrays": places, "strings": [offset, len(strings)],
         "ids": [offset + len(strings), len(ids)]}
    ).encode("utf-8")
    # The process's id first (a reader removes the temporary files of processes that
    # ended), then a part of its own: two stores of one process may write at once.
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(temporary, "wb") as out:
            out.write(MAGIC + struct.pack("<Q", len(header)) + header)
            start = _aligned(out.tell())
            for name, array in arrays.items():
                out.seek(start + places[name][2])
                for block in _blocks(array):
                    out.write(block)
            out.seek(start + offset)
            out.write(strings)
            out.write(ids)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read(path: Path) -> tuple[IndexImage, dict[str, Any]]:
    """The image and ``meta`` written to ``path``; :class:`IndexFileError` if the
    file is not a whole index file of this version (``OSError`` if unreadable)."""
    with open(path, "rb") as source:
        size = os.fstat(source.fileno()).st_size
        head = source.read(len(MAGIC) + 8)
        if len(head) < len(MAGIC) + 8 or head[: len(MAGIC)] != MAGIC:
            raise IndexFileError(f"{path} is not an index file")
        (length,) = struct.unpack("<Q", head[len(MAGIC) :])
        if length > size:
            raise IndexFileError(f"{path} is cut short")
        try:
            header = json.loads(source.read(length))
            if header["version"] != VERSION:
                raise IndexFileError(f"{path} is version {header['version']}, not {VERSION}")
            if not isinstance(header["meta"], dict):
                raise IndexFileError(f"{path} is damaged (its header holds no meta)")
            start = _aligned(len(MAGIC) + 8 + length)
            arrays: dict[str, np.ndarray] = {}
            for name, (dtype, shape, offset) in header["arrays"].items():
                if name not in _ARRAYS:
                    raise IndexFileError(f"{path} holds an unknown array {name!r}")
                dtype = np.dtype(dtype)
                count = int(np.prod(shape))
                at = start + int(offset)
                if at + count * dtype.itemsize > size:
                    raise IndexFileError(f"{path} is cut short")
                if name in _MAPPED and count:
                    arrays[name] = np.memmap(path, dtype=dtype, mode="r", offset=at, shape=tuple(shape))
                else:
                    source.seek(at)
                    arrays[name] = np.fromfile(source, dtype=dtype, count=count).reshape(shape)
            at, length = header["strings"]
            if start + at + length > size:
                raise IndexFileError(f"{path} is cut short")
            source.seek(start + at)
            strings = json.loads(source.read(length).decode("utf-8"))
            if strings["ids"] is None:  # one a line
                at, length = header["ids"]
                if start + at + length > size:
                    raise IndexFileError(f"{path} is cut short")
                source.seek(start + at)
                rows = arrays["has_vector"].shape[0]
                strings["ids"] = source.read(length).decode("utf-8").split("\n") if rows else []
            image = IndexImage(
                dim=int(header["dim"]),
                codes=arrays.pop("codes", None),
                code_scale=arrays.pop("code_scale", None),
                **{name: strings[name] for name in _STRINGS},
                **arrays,
            )
            _check(path, image)
        except IndexFileError:
            raise
        except DAMAGE as exc:
            raise IndexFileError(f"{path} is damaged ({type(exc).__name__}: {exc})") from exc
    return image, header["meta"]


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
