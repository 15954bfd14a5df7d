"""Index files: a large scope's index written beside the store when it closes, and
opened from there by the next process instead of reading every row.

What a process finds through a file must be exactly what it finds when it reads
the scope from the store, whatever other processes wrote since the file was
written; a file it cannot trust (another store's, damaged, from before an erasure)
is never used, and an erasure leaves no file holding what it erased.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from memorist import Memory
from memorist.store import index_file, vector_index
from memorist.store.sqlite import SQLiteStore
from memorist.store.sqlite import index as sqlite_index
from memorist.store.vector_index import Row, SpaceIndex

TOPICS = ["greyhound", "pottery", "theremin", "lighthouse", "marathon", "sourdough", "chess", "kayak"]
QUERIES = ["greyhound walks", "pottery class", "lighthouse tour in Maine", "what does Maya bake", "kayak"]


@pytest.fixture(autouse=True, params=["transposed", "by row"])
def small_files(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files for scopes of 20 rows and more (the default is 16,384), rewritten after 5
    events; each test also runs with scopes laid out as large ones are (vectors one row
    each, ranked by int8 codes first, mapped from the file), from 32 rows on."""
    monkeypatch.setattr(sqlite_index, "FILE_ROWS", 20)
    monkeypatch.setattr(sqlite_index, "FILE_EVENTS", 5)
    if request.param == "by row":
        if vector_index._int8_dots() is None:
            pytest.fail("no int8 kernel here: the large-scope layout cannot be tested")
        monkeypatch.setattr(vector_index, "_COARSE_ROWS", 32)


def notes(count: int, start: int = 0) -> list[str]:
    return [f"Maya {TOPICS[i % len(TOPICS)]} note {i}: day {i % 7} with Sam" for i in range(start, start + count)]


def turns(texts: list[str]) -> list[dict[str, str]]:
    return [{"role": "user", "content": text} for text in texts]


def fill(path: str, count: int = 60, user: str = "maya") -> None:
    with Memory(path, embedder="hashing") as writer:
        writer.add(
            [{"role": "user", "content": text, "name": "Maya" if i % 2 else "Sam"} for i, text in enumerate(notes(count))],
            user_id=user,
            infer=False,
        )
        writer.add("Maya runs a pottery class on Thursdays", user_id=user, run_id="r2", infer=False)


def found(memory: Memory, user: str = "maya") -> list[list[tuple[str, str, float]]]:
    return [
        [(r["id"], r["memory"], round(r["score"], 6)) for r in memory.search(q, user_id=user, limit=8)["results"]]
        for q in [*QUERIES, "pottery"]
    ] + [[(r["id"], r["memory"], 0.0) for r in memory.search("pottery", user_id=user, run_id="r2", limit=8)["results"]]]


def from_store(path: str, user: str = "maya") -> list[list[tuple[str, str, float]]]:
    """What a process that reads the scope from the store finds."""
    with Memory(store=SQLiteStore(path, index_files=False), embedder="hashing") as plain:
        return found(plain, user)


def opened_from_file(memory: Memory) -> bool:
    indexes = memory.store._indexes.loaded()  # type: ignore[attr-defined]
    return bool(indexes) and all(index.file_seq is not None for index in indexes)


def files(path: str) -> list[Path]:
    directory = Path(f"{path}-index")
    return sorted(directory.iterdir()) if directory.is_dir() else []


@pytest.fixture
def path(tmp_path: Path) -> str:
    db = str(tmp_path / "m.db")
    fill(db)
    return db


def test_closing_writes_a_large_scope_s_file_and_the_next_process_opens_it(path: str) -> None:
    assert [p.name.startswith("space-") and p.suffix == ".index" for p in files(path)] == [True]
    want = from_store(path)
    with Memory(path, embedder="hashing") as reader:
        assert found(reader) == want
        assert opened_from_file(reader)
        assert reader.get_all(user_id="maya", limit=200)["results"]
        (index,) = reader.store._indexes.loaded()  # type: ignore[attr-defined]
        # Laid out as a large scope: its vectors mapped from the file, not read.
        assert isinstance(index._vectors, np.memmap) == (len(index) >= vector_index._COARSE_ROWS)


def test_a_small_scope_gets_no_file(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    fill(db, count=5)
    with Memory(db, embedder="hashing") as reader:
        reader.search("pottery", user_id="maya")
    assert files(db) == []


def test_no_files_when_switched_off(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    with Memory(store=SQLiteStore(db, index_files=False), embedder="hashing") as writer:
        writer.add(turns(notes(60)), user_id="maya", infer=False)
    assert not Path(f"{db}-index").exists()


def test_a_file_catches_up_with_what_others_wrote_since(path: str) -> None:
    with Memory(store=SQLiteStore(path, index_files=False), embedder="hashing") as other:
        added = other.add(turns(notes(3, start=100)), user_id="maya", infer=False)["results"]
        hits = other.search("greyhound", user_id="maya", limit=3)["results"]
        other.delete(hits[0]["id"])
        other.update(hits[1]["id"], "Maya's greyhound learned to open doors")
    want = from_store(path)
    with Memory(path, embedder="hashing") as reader:
        assert found(reader) == want
        assert opened_from_file(reader)
        ids = {r["id"] for r in reader.search("note 101 day", user_id="maya", limit=100)["results"]}
        assert {a["id"] for a in added} <= ids
        assert hits[0]["id"] not in ids


def test_a_scope_opened_from_its_file_takes_writes_removals_and_compaction(path: str) -> None:
    with Memory(path, embedder="hashing") as writer:
        writer.search("pottery", user_id="maya")
        assert opened_from_file(writer)
        writer.add(turns(notes(10, start=200)), user_id="maya", infer=False)
        everything = writer.get_all(user_id="maya", limit=500)["results"]
        for item in everything[: len(everything) * 2 // 3]:  # most of it: the index compacts
            writer.delete(item["id"])
        after_writes = found(writer)
    assert after_writes == from_store(path)
    with Memory(path, embedder="hashing") as reader:  # the file written on that close
        assert found(reader) == after_writes


def test_an_erasure_removes_the_files_and_leaves_none_of_its_terms(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    fill(db, user="maya")
    fill(db, user="sam")
    with Memory(db, embedder="hashing") as writer:
        secret = writer.add("Maya hid the spare key under the blue flowerpot", user_id="maya", infer=False)["results"][0]["id"]
        writer.add(turns(notes(6, start=300)), user_id="maya", infer=False)  # enough events for a new file
        writer.search("greyhound", user_id="maya")
        writer.search("greyhound", user_id="sam")
    assert len(files(db)) == 2 and any(b"flowerpot" in f.read_bytes() for f in files(db))
    with Memory(db, embedder="hashing") as holder, Memory(db, embedder="hashing") as eraser:
        # Another process holds the scope (with the erased rows) while it is erased:
        # closing it afterwards must not write them back to a file.
        holder.search("greyhound", user_id="maya")
        holder.add(turns(notes(6, start=400)), user_id="maya", infer=False)  # it would write a new file
        holder.search("greyhound", user_id="sam")
        eraser.erase(user_id="maya")
        assert files(db) == []
    for file in files(db):
        assert b"flowerpot" not in file.read_bytes() and secret.encode() not in file.read_bytes()
    with Memory(db, embedder="hashing") as reader:
        assert reader.search("greyhound", user_id="maya")["results"] == []
        assert reader.search("greyhound", user_id="sam")["results"]


def test_a_file_written_before_an_erasure_is_not_used(path: str) -> None:
    old = files(path)[0]
    kept = old.read_bytes()
    with Memory(path, embedder="hashing") as eraser:
        eraser.erase(user_id="maya")
    fill(path)  # the scope again, with new memories
    for file in files(path):
        file.unlink()
    old.write_bytes(kept)  # the old file put back
    want = from_store(path)
    with Memory(path, embedder="hashing") as reader:
        assert found(reader) == want


def test_another_store_s_file_at_the_same_path_is_not_used(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    fill(db)
    old = files(db)[0]
    kept = old.read_bytes()
    for leftover in Path(tmp_path).glob("m.db*"):
        if leftover.is_file():
            leftover.unlink()
    fill(db, count=40)  # a new store, same path, same space id
    old.write_bytes(kept)
    want = from_store(db)
    with Memory(db, embedder="hashing") as reader:
        assert found(reader) == want
        assert not opened_from_file(reader)


@pytest.mark.parametrize("damage", ["truncated", "header", "vectors", "empty", "postings"])
def test_a_damaged_file_is_not_used(path: str, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    file = files(path)[0]
    data = bytearray(file.read_bytes())
    if damage == "truncated":
        del data[len(data) // 2 :]
    elif damage == "header":
        data[20:40] = b"x" * 20
    elif damage == "empty":
        data = bytearray()
    else:
        image, meta = index_file.read(file)
        if damage == "vectors":  # every row's vector changed: the sampled rows disagree
            image.vectors = np.asarray(image.vectors) + np.float32(0.5)
        else:  # postings that point past the rows
            image.posting_rows = image.posting_rows + np.int32(len(image))
        index_file.write(file, image, meta)
        data = bytearray(file.read_bytes())
    file.write_bytes(bytes(data))
    want = from_store(path)
    with caplog.at_level(logging.INFO, logger="memorist"), Memory(path, embedder="hashing") as reader:
        assert found(reader) == want
        assert not opened_from_file(reader)
    assert "not used" in caplog.text


def test_a_reindex_removes_the_files(path: str) -> None:
    with Memory(path, embedder="hashing") as memory:
        memory.store.reindex()
    assert files(path) == []


def same_hits(got: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    """The same memories in the same order, with the same cosines to float32's precision:
    an image lays its vectors out at its own size, and a product over a matrix of other
    strides may round otherwise in the last place (the BLAS kernel chosen per CPU and
    layout); results report six digits."""
    assert [m for m, _ in got] == [m for m, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-6)


def test_an_image_makes_the_same_index() -> None:
    rng = np.random.default_rng(7)
    index = SpaceIndex(16, 1, 5)
    vectors = rng.normal(size=(40, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index.upsert([
        Row(f"m{i}", "r1" if i % 3 else "", float(i), 30.0 if i == 4 else None, notes(1, start=i)[0],
            None if i == 7 else vectors[i], created_at=float(i), speaker="maya" if i % 2 else "sam")
        for i in range(40)
    ])
    index.remove(["m3", "m9"], compact=False)  # dead rows are left out of the image
    copy = SpaceIndex.from_image(index.image(), 1, 5)
    query = vectors[11]
    for kwargs in ({}, {"run_id": "r1"}, {"speaker": "maya"}, {"window": (5.0, 20.0)}, {"cutoff": 25.0, "now": 35.0}):
        same_hits(copy.search(query, k=10, **kwargs), index.search(query, k=10, **kwargs))
    assert copy.search_text(["greyhound", "note", "sam"], k=None) == index.search_text(["greyhound", "note", "sam"], k=None)
    assert len(copy) == len(index) == 38
    assert copy.speakers() == index.speakers()
    copy.remove(["m5"])
    index.remove(["m5"])
    assert copy.search_text(["greyhound", "note"], k=None) == index.search_text(["greyhound", "note"], k=None)


def test_a_file_is_written_again_once_enough_has_changed(path: str) -> None:
    file = files(path)[0]
    first = file.stat().st_mtime_ns, file.read_bytes()
    with Memory(path, embedder="hashing") as memory:
        for query in QUERIES * 10:  # retrievals are logged, and change nothing of the index
            memory.search(query, user_id="maya")
        memory.add(turns(notes(2, start=500)), user_id="maya", infer=False)  # fewer events than FILE_EVENTS
    assert (file.stat().st_mtime_ns, file.read_bytes()) == first
    with Memory(path, embedder="hashing") as memory:
        memory.search("pottery", user_id="maya")
        memory.add(turns(notes(6, start=600)), user_id="maya", infer=False)
    assert file.read_bytes() != first[1]
    want = from_store(path)
    with Memory(path, embedder="hashing") as reader:
        assert found(reader) == want
        assert opened_from_file(reader)


def test_a_killed_writer_s_temporary_file_is_removed(path: str) -> None:
    import subprocess
    import sys

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    file = files(path)[0]
    abandoned = file.with_name(f"{file.name}.{ended.pid}.tmp")
    abandoned.write_bytes(b"half a file")
    with Memory(path, embedder="hashing") as memory:
        memory.search("pottery", user_id="maya")
        memory.add(turns(notes(6, start=700)), user_id="maya", infer=False)
    assert not abandoned.exists()
    assert [f.name for f in files(path)] == [file.name]


def test_a_store_without_files_still_removes_other_processes_files(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    fill(db, user="maya")
    fill(db, user="sam")
    assert len(files(db)) == 2
    with Memory(store=SQLiteStore(db, index_files=False), embedder="hashing") as eraser:
        eraser.erase(user_id="maya")
    assert files(db) == []
    fill(db, user="maya")
    with Memory(store=SQLiteStore(db, index_files=False), embedder="hashing") as resetter:
        resetter.reset()
    assert files(db) == []


def test_files_of_a_store_opened_through_a_link_are_the_store_s(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    fill(db)
    link = tmp_path / "link.db"
    link.symlink_to(db)
    with Memory(str(link), embedder="hashing") as reader:
        assert found(reader) == from_store(db)
        assert opened_from_file(reader)  # the file the real path's writer left
        reader.search("greyhound", user_id="maya")
        with Memory(db, embedder="hashing") as eraser:
            eraser.erase(user_id="maya")
    assert files(db) == [] and not Path(f"{link}-index").exists()


def test_an_erasure_without_a_logged_scope_is_seen_by_other_processes(path: str) -> None:
    """The store's own erase, called without ``log``: other processes must still learn
    that their index of the scope holds what it removed."""
    from memorist.store.base import ScopeFilter

    with Memory(path, embedder="hashing") as holder:
        assert holder.search("pottery", user_id="maya")["results"]
        store = SQLiteStore(path)
        try:
            assert store.erase([ScopeFilter(user_id="maya")]).vectors == 61
        finally:
            store.close()
        assert holder.search("pottery", user_id="maya")["results"] == []
    assert files(path) == []
    with Memory(path, embedder="hashing") as reader:
        assert reader.search("pottery", user_id="maya")["results"] == []


def edited_header(file: Path, edit) -> None:  # type: ignore[no-untyped-def]
    """Change the header's JSON in place, padded to its length (the arrays stay where they were)."""
    import json
    import struct

    data = bytearray(file.read_bytes())
    start = len(index_file.MAGIC)
    (length,) = struct.unpack("<Q", data[start : start + 8])
    header = json.loads(data[start + 8 : start + 8 + length])
    edit(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= length
    data[start + 8 : start + 8 + length] = text.ljust(length)
    file.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "edit",
    [
        lambda h: h["arrays"]["has_vector"].__setitem__(1, []),  # a shape of no rows
        lambda h: h.__setitem__("arrays", list(h["arrays"])),
        lambda h: h.__setitem__("meta", 7),
        lambda h: h["arrays"]["term_ids"].__setitem__(0, "<i4x"),
    ],
    ids=["shape", "arrays", "meta", "dtype"],
)
def test_a_file_with_a_damaged_header_is_not_used(path: str, edit) -> None:  # type: ignore[no-untyped-def]
    edited_header(files(path)[0], edit)
    want = from_store(path)
    with Memory(path, embedder="hashing") as reader:
        assert found(reader) == want
        assert not opened_from_file(reader)
    with Memory(path, embedder="hashing") as again:  # the damaged file was removed, a new one written
        assert found(again) == want


def test_two_stores_of_one_process_closing_at_once_both_write_whole_files(path: str, caplog: pytest.LogCaptureFixture) -> None:
    import threading

    memories = [Memory(path, embedder="hashing") for _ in range(2)]
    for memory in memories:
        memory.search("pottery", user_id="maya")
        memory.add(turns(notes(6, start=800)), user_id="maya", infer=False)
    for memory in memories:  # each one current again (the other wrote)
        memory.search("pottery", user_id="maya")
    start = threading.Barrier(2)

    def close(memory: Memory) -> None:
        start.wait()
        memory.close()

    with caplog.at_level(logging.INFO, logger="memorist"):
        threads = [threading.Thread(target=close, args=(m,)) for m in memories]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert "not written" not in caplog.text
    assert [f.suffix for f in files(path)] == [".index"]
    with Memory(path, embedder="hashing") as reader:
        assert found(reader) == from_store(path)
        assert opened_from_file(reader)


def test_a_script_that_never_closes_its_store_still_leaves_the_file(tmp_path: Path) -> None:
    """The index files are written when the interpreter exits, as closing would."""
    import subprocess
    import sys
    import textwrap

    db = tmp_path / "m.db"
    script = textwrap.dedent(f"""
        import memorist.store.sqlite.index as index
        from memorist import Memory
        index.FILE_ROWS = 20
        memory = Memory({str(db)!r}, embedder="hashing")
        memory.add([{{"role": "user", "content": f"Maya note {{i}} about pottery"}} for i in range(40)], user_id="maya", infer=False)
        memory.search("pottery", user_id="maya")
        # no close()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert [f.suffix for f in files(str(db))] == [".index"]
    with Memory(str(db), embedder="hashing") as reader:
        assert reader.search("pottery", user_id="maya", limit=50)["results"]
        assert opened_from_file(reader)


@pytest.mark.parametrize("ids", [["m0", "m1", "m2"], ["m0", "line\nbreak", "ünïcode ✓"]], ids=["plain", "odd"])
def test_an_index_file_keeps_any_id(tmp_path: Path, ids: list[str]) -> None:
    index = SpaceIndex(4, 1, 9)
    index.upsert([Row(mid, "", float(i), None, f"note {i} about kayaks", np.eye(4, dtype=np.float32)[i]) for i, mid in enumerate(ids)])
    file = tmp_path / "space-1.index"
    index_file.write(file, index.image(), {"seq": 9})
    image, meta = index_file.read(file)
    assert image.ids == ids and meta == {"seq": 9}
    copy = SpaceIndex.from_image(image, 1, 9)
    assert copy.search_text(["kayak"], k=None) == index.search_text(["kayak"], k=None)
    assert [copy.run_of(i) for i in ids] == [""] * 3 and len(copy) == 3  # each id found


# A file's bytes not as written ------------------------------------------------------


def parts(file: Path) -> tuple[dict, int]:  # type: ignore[type-arg]
    """An index file's header and where its parts start (after the header and its checksum)."""
    import json
    import struct

    data = file.read_bytes()
    start = len(index_file.MAGIC)
    (length,) = struct.unpack("<Q", data[start : start + 8])
    return json.loads(data[start + 8 : start + 8 + length]), -(-(start + 8 + length + 4) // 64) * 64


def damage(file: Path, part: str, edit) -> None:  # type: ignore[no-untyped-def]
    """Change part ``part`` of ``file`` in place (an array as its dtype, "strings" or
    "ids" as bytes), as a disk or a person would: its checksum is left as it was."""
    header, start = parts(file)
    data = bytearray(file.read_bytes())
    if part in ("strings", "ids"):
        at, length = header[part]
        view = np.frombuffer(data, dtype=np.uint8, count=length, offset=start + at)
    else:
        dtype, shape, at = header["arrays"][part]
        view = np.frombuffer(data, dtype=np.dtype(dtype), count=int(np.prod(shape)), offset=start + at).reshape(shape)
    edit(view)
    file.write_bytes(bytes(data))


def _replace(view: np.ndarray, old: bytes, new: bytes) -> None:
    """Replace the first ``old`` in ``view`` (bytes) by ``new``, of the same length."""
    at = view.tobytes().index(old)
    view[at : at + len(new)] = np.frombuffer(new, dtype=np.uint8)


DAMAGES = {
    # What the reviewer did to a file of 30,000 rows, and the like for every other part.
    "valid_to": lambda a: a.__setitem__(slice(0, a.shape[0] // 2), 1.0),  # half the rows ended long ago
    "effective": lambda a: a.__setitem__(slice(0, a.shape[0] // 2), 5.0),
    "codes": lambda a: a.__setitem__(slice(5, None), np.random.default_rng(1).integers(-127, 127, a[5:].shape, dtype=np.int8)),
    "posting_tfs": lambda a: a.__setitem__(slice(0, a.shape[0] // 2), 50.0),
    "term_ids": lambda a: a.__setitem__(slice(0, a.shape[0] // 2), 0),
    "vectors": lambda a: a.__setitem__(a.shape[0] // 2 + 1, 0.05),
    "ids": lambda a: a.__setitem__(40, a[40] ^ 1),  # a character of the second id
    "strings": lambda a: _replace(a, b"greyhound", b"greyhounx"),  # a term
}


@pytest.mark.parametrize("part", list(DAMAGES))
def test_a_file_not_as_written_is_refused(path: str, part: str, caplog: pytest.LogCaptureFixture) -> None:
    """Each part of a file changed in place, its shapes and ranges still whole: the file
    is refused and removed, and searches are the store's."""
    file = files(path)[0]
    damage(file, part, DAMAGES[part])
    want = from_store(path)
    with caplog.at_level(logging.WARNING, logger="memorist"), Memory(path, embedder="hashing") as reader:
        reader.search("pottery", user_id="maya")  # opens the file
        assert reader.store._indexes.wait_for_checks(30)  # type: ignore[attr-defined]
        assert found(reader) == want
        assert not opened_from_file(reader)
        assert not file.exists()  # not left for the next process
    assert "not used" in caplog.text and "damaged" in caplog.text
    with Memory(path, embedder="hashing") as again:  # the file written on that close, from the store
        assert found(again) == want
        assert opened_from_file(again)


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The vectors' and codes' checksums compared only once the test sets the event;
    two rows sampled when a file is opened (a damage the samples miss)."""
    import threading

    monkeypatch.setattr(sqlite_index, "_SAMPLED_ROWS", 2)
    monkeypatch.setattr(index_file, "SAMPLED_CODES", 2)
    gate = threading.Event()
    compare = index_file.Checksums._compare

    def waiting(self: index_file.Checksums, parts: list) -> bool:  # type: ignore[type-arg]
        if parts is self._late:
            gate.wait(30)
        return compare(self, parts)

    monkeypatch.setattr(index_file.Checksums, "_compare", waiting)
    yield gate
    gate.set()


def flip_a_low_bit(vectors: np.ndarray) -> None:
    """The last bit of one component of a middle row: its int8 codes stay the same."""
    vectors.view(np.uint32)[vectors.shape[0] // 2, 3] ^= 1


def test_vectors_changed_past_the_samples_are_refused_once_their_checksum_is_compared(
    path: str, gated, caplog: pytest.LogCaptureFixture  # type: ignore[no-untyped-def]
) -> None:
    file = files(path)[0]
    damage(file, "vectors", flip_a_low_bit)
    want = from_store(path)
    with caplog.at_level(logging.WARNING, logger="memorist"), Memory(path, embedder="hashing") as reader:
        reader.search("pottery", user_id="maya")
        assert opened_from_file(reader)  # used while the checksum is compared
        gated.set()
        assert reader.store._indexes.wait_for_checks(30)  # type: ignore[attr-defined]
        assert not file.exists()
        assert found(reader) == want  # read from the store now
        assert not opened_from_file(reader)
    assert "vectors are not those written" in caplog.text


def test_an_index_read_from_a_file_that_fails_its_check_is_not_written_again(path: str, gated) -> None:  # type: ignore[no-untyped-def]
    file = files(path)[0]
    damage(file, "vectors", flip_a_low_bit)
    with Memory(path, embedder="hashing") as reader:
        reader.search("pottery", user_id="maya")
        reader.add(turns(notes(6, start=900)), user_id="maya", infer=False)  # enough for a new file on close
        reader.search("pottery", user_id="maya")
        assert opened_from_file(reader)
        gated.set()
    # Closing waited for the check: no file from the index read from the damaged one.
    assert files(path) == []
    with Memory(path, embedder="hashing") as again:
        assert found(again) == from_store(path)


def test_a_good_file_passes_its_checks_and_stays_in_use(path: str) -> None:
    file = files(path)[0]
    with Memory(path, embedder="hashing") as reader:
        reader.search("pottery", user_id="maya")
        assert reader.store._indexes.wait_for_checks(30)  # type: ignore[attr-defined]
        assert found(reader) == from_store(path)
        assert opened_from_file(reader)
        assert file.exists()


def write_version_2(file: Path, image: vector_index.IndexImage, meta: dict) -> None:  # type: ignore[type-arg]
    """``image`` in an index file as version 2 wrote them: no checksums."""
    import json
    import struct

    def aligned(n: int) -> int:
        return -(-n // 64) * 64

    arrays = {name: np.ascontiguousarray(getattr(image, name)) for name in index_file._ARRAYS if getattr(image, name) is not None}
    strings = json.dumps({"ids": None, "runs": image.runs, "speakers": image.speakers, "vocab": image.vocab}).encode()
    ids = "\n".join(image.ids).encode()
    places, offset = {}, 0
    for name, array in arrays.items():
        places[name] = [array.dtype.str, list(array.shape), offset]
        offset = aligned(offset + array.nbytes)
    header = json.dumps(
        {"version": 2, "dim": image.dim, "meta": meta, "arrays": places, "strings": [offset, len(strings)],
         "ids": [offset + len(strings), len(ids)]}
    ).encode()
    start = aligned(len(index_file.MAGIC) + 8 + len(header))
    data = bytearray(start + offset)
    data[: len(index_file.MAGIC) + 8 + len(header)] = index_file.MAGIC + struct.pack("<Q", len(header)) + header
    for name, array in arrays.items():
        data[start + places[name][2] : start + places[name][2] + array.nbytes] = array.tobytes()
    file.write_bytes(bytes(data) + strings + ids)


def test_a_file_of_the_previous_version_is_refused_and_written_again(path: str, caplog: pytest.LogCaptureFixture) -> None:
    file = files(path)[0]
    write_version_2(file, *index_file.read(file))
    want = from_store(path)
    with caplog.at_level(logging.WARNING, logger="memorist"), Memory(path, embedder="hashing") as reader:
        assert found(reader) == want
        assert not opened_from_file(reader)
    assert f"is version 2, not {index_file.VERSION}" in caplog.text
    with Memory(path, embedder="hashing") as again:  # written again, in this version
        assert found(again) == want
        assert opened_from_file(again)


def flip_a_middle_bit(part: np.ndarray) -> None:
    data = part.reshape(-1).view(np.uint8)
    data[data.shape[0] // 2] ^= 1


def test_every_part_of_an_index_file_is_checked(tmp_path: Path) -> None:
    """One bit changed anywhere in a part of a file (an array, the strings, the ids,
    the header) and :func:`index_file.read` refuses it."""
    index = SpaceIndex(8, 1, 3)
    vectors = np.random.default_rng(3).normal(size=(24, 8)).astype(np.float32)
    index.upsert([Row(f"m{i}", "r1" if i % 2 else "", float(i), None, notes(1, start=i)[0], vectors[i], speaker="maya") for i in range(24)])
    good = tmp_path / "space-1.index"
    index_file.write(good, index.image(), {"seq": 3})
    header, start = parts(good)
    names = [*header["arrays"], "strings", "ids"]
    assert len(names) == len(header["sums"])
    for name in [*names, "header"]:
        file = tmp_path / f"{name}.index"
        file.write_bytes(good.read_bytes())
        if name == "header":  # the meta (still a valid header)
            data = file.read_bytes()
            file.write_bytes(data.replace(b'"seq": 3', b'"seq": 4', 1))
        else:
            damage(file, name, flip_a_middle_bit)
        assert file.read_bytes() != good.read_bytes()
        with pytest.raises(index_file.IndexFileError):
            index_file.read(file)
    image, meta = index_file.read(good)
    assert image.ids == index.image().ids and meta == {"seq": 3}
