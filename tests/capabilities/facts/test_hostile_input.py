"""Hostile input (issue 10, items 3-5): every bad argument is a ValidationError naming
it, nothing is stored, and the instance keeps working afterwards.

Each case here raised a raw exception (UnicodeEncodeError, RecursionError,
OverflowError, ValueError, TypeError) or was silently accepted before the fix.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from memorist import Memory, MemoryConfig, ValidationError
from memorist.store.codec import UNREADABLE_KEY
from memorist.store.codec import dumps as _dumps
from memorist.store.codec import loads as _loads

SURROGATE = "\ud800"


def nested(depth: int, leaf: object = 1) -> dict:
    value: object = leaf
    for _ in range(depth - 1):
        value = {"k": value}
    return {"k": value}


def not_chain(depth: int) -> dict:
    value: dict = {"category": "food"}
    for _ in range(depth):
        value = {"NOT": value}
    return value


@pytest.fixture
def m(db_path):
    mem = Memory(db_path, embedder="hashing")
    mem.add("I like green tea.", user_id="alice", infer=False)
    yield mem
    mem.close()


def state(m: Memory) -> tuple:
    """What the store holds: every event and every memory of the users the tests use."""
    events = [(e.seq, e.op, e.memory_id, json.dumps(e.payload, sort_keys=True)) for e in m.store.events()]
    rows = {u: m.get_all(user_id=u, limit=1000)["results"] for u in ("alice", "bob")}
    return events, rows, m.stats()["memories"], m.stats()["events"]


def still_works(m: Memory) -> None:
    """A following add, search and close succeed."""
    assert m.add("I live in Oslo.", user_id="carol", infer=False)["results"]
    assert m.search("where do I live", user_id="carol")["results"]
    for _ in range(40):  # past the retrieval buffer's flush
        m.search("tea", user_id="alice")
    assert m.add("I live in Prague.", user_id="dave", infer=False)["results"]


def alice_id(m: Memory) -> str:
    return m.get_all(user_id="alice")["results"][0]["id"]


# The call, and the field its ValidationError must name. ``m`` is the Memory.
CASES = {
    # lone surrogates (UnicodeEncodeError before)
    "text": (lambda m: m.add("tea " + SURROGATE, user_id="alice"), "messages"),
    "text verbatim": (lambda m: m.add("tea " + SURROGATE, user_id="alice", infer=False), "messages"),
    "message content": (lambda m: m.add([{"role": "user", "content": "hi " + SURROGATE}], user_id="alice", infer=False), "messages[0].content"),
    "message name": (lambda m: m.add([{"role": "user", "content": "hi there", "name": SURROGATE}], user_id="alice", infer=False), "messages[0].name"),
    "message metadata": (lambda m: m.add([{"role": "user", "content": "hi there", "metadata": {"k": SURROGATE}}], user_id="alice", infer=False), "messages[0].metadata"),
    "user_id": (lambda m: m.add("I like tea.", user_id=SURROGATE), "user_id"),
    "agent_id": (lambda m: m.add("I like tea.", user_id="alice", agent_id="a" + SURROGATE), "agent_id"),
    "run_id": (lambda m: m.add("I like tea.", user_id="alice", run_id=SURROGATE), "run_id"),
    "metadata key": (lambda m: m.add("I like tea.", user_id="alice", metadata={SURROGATE: 1}), "metadata"),
    "metadata value": (lambda m: m.add("I like tea.", user_id="alice", metadata={"k": ["x", SURROGATE]}), "metadata"),
    "metadata nested key": (lambda m: m.add("I like tea.", user_id="alice", metadata={"k": {SURROGATE: 1}}), "metadata"),
    "update text": (lambda m: m.update(alice_id(m), "tea " + SURROGATE), "text"),
    "update metadata": (lambda m: m.update(alice_id(m), "I like tea.", metadata={"k": SURROGATE}), "metadata"),
    "get id": (lambda m: m.get(SURROGATE), "memory_id"),
    "delete id": (lambda m: m.delete("x" + SURROGATE), "memory_id"),
    "history id": (lambda m: m.history(SURROGATE), "memory_id"),
    "search scope": (lambda m: m.search("tea", user_id=SURROGATE), "user_id"),
    "get_all scope": (lambda m: m.get_all(user_id=SURROGATE), "user_id"),
    "delete_all scope": (lambda m: m.delete_all(user_id=SURROGATE), "user_id"),
    "filter value": (lambda m: m.search("tea", user_id="alice", filters={"k": SURROGATE}), "filters.k.eq"),
    "filter key": (lambda m: m.search("tea", user_id="alice", filters={SURROGATE: 1}), "filters"),
    # deep nesting (RecursionError, or stored and then unreadable, before)
    "metadata 201 deep": (lambda m: m.add("I like tea.", user_id="alice", metadata=nested(201), infer=False), "metadata"),
    "metadata 5000 deep": (lambda m: m.add("I like tea.", user_id="alice", metadata=nested(5000)), "metadata"),
    "update metadata deep": (lambda m: m.update(alice_id(m), "I like tea.", metadata=nested(5000)), "metadata"),
    "message metadata deep": (lambda m: m.add([{"role": "user", "content": "hi there", "metadata": nested(5000)}], user_id="alice", infer=False), "messages[0].metadata"),
    "NOT filter deep": (lambda m: m.search("tea", user_id="alice", filters=not_chain(5000)), "filters" + ".NOT" * 32),
    "get_all NOT filter deep": (lambda m: m.get_all(user_id="alice", filters=not_chain(5000)), "filters" + ".NOT" * 32),
    # extreme numbers (OverflowError before)
    "timestamp 1e20": (lambda m: m.add("I like tea.", user_id="alice", timestamp=1e20), "timestamp"),
    "timestamp huge int": (lambda m: m.add("I like tea.", user_id="alice", timestamp=10**400), "timestamp"),
    "message timestamp 1e20": (lambda m: m.add([{"role": "user", "content": "hi there", "timestamp": 1e20}], user_id="alice", infer=False), "messages[0].timestamp"),
    "reference_time 1e20": (lambda m: m.search("what did I drink last week", user_id="alice", reference_time=1e20), "reference_time"),
    "get_all limit": (lambda m: m.get_all(user_id="alice", limit=10**30), "limit"),
    # Ids must hold something visible: a zero-width space alone was taken as a user.
    "invisible user id": (lambda m: m.add("I like tea.", user_id="\u200b", infer=False), "user_id"),
    "invisible agent id": (lambda m: m.search("tea", agent_id="\u200b\u2060 "), "agent_id"),
    "search limit": (lambda m: m.search("tea", user_id="alice", limit=10**30), "limit"),
    "events limit": (lambda m: m.events(user_id="alice", limit=10**30), "limit"),
    "pending limit": (lambda m: m.pending(limit=10**30), "limit"),
    "events since": (lambda m: m.events(user_id="alice", since=10**30), "since"),
    "llm_usage since": (lambda m: m.llm_usage(user_id="alice", since=10**30), "since"),
    "threshold huge int": (lambda m: m.search("tea", user_id="alice", threshold=10**400), "threshold"),
    # accepted silently before
    "nested int key": (lambda m: m.add("I like tea.", user_id="alice", metadata={"k": {1: "x"}}, infer=False), "metadata"),
    "metadata int beyond 64 bits": (lambda m: m.add("I like tea.", user_id="alice", metadata={"k": 2**64}, infer=False), "metadata"),
    "timestamp year 1": (lambda m: m.add("I like tea.", user_id="alice", timestamp="0001-01-01T00:00:00", infer=False), "timestamp"),
    "timestamp 1969": (lambda m: m.add("I like tea.", user_id="alice", timestamp=datetime(1969, 12, 31, tzinfo=UTC), infer=False), "timestamp"),
    "timestamp year 10000": (lambda m: m.add("I like tea.", user_id="alice", timestamp=253_402_300_800, infer=False), "timestamp"),
    "filter NaN": (lambda m: m.search("tea", user_id="alice", filters={"k": math.nan}), "filters.k.eq"),
    "filter object": (lambda m: m.search("tea", user_id="alice", filters={"k": object()}), "filters.k.eq"),
    "filter NaN in list": (lambda m: m.get_all(user_id="alice", filters={"k": {"in": [1, math.nan]}}), "filters.k.in"),
    "filter NaN gt": (lambda m: m.get_all(user_id="alice", filters={"k": {"gt": math.nan}}), "filters.k.gt"),
    "filter object contains": (lambda m: m.get_all(user_id="alice", filters={"k": {"contains": object()}}), "filters.k.contains"),
    "llm_usage since not a number": (lambda m: m.llm_usage(user_id="alice", since="yesterday"), "since"),
    "limit above the maximum": (lambda m: m.get_all(user_id="alice", limit=1_000_001), "limit"),
    # control characters, unhashable roles
    "query of control characters": (lambda m: m.search("\x00\x1b\u200b", user_id="alice"), "query"),
    "text of control characters": (lambda m: m.add("\x00\x01\x1b", user_id="alice", infer=False), "messages"),
    "content of control characters": (lambda m: m.add([{"role": "user", "content": "\x00\x07"}], user_id="alice", infer=False), "messages[0].content"),
    "user_id with NUL": (lambda m: m.add("I like tea.", user_id="al\x00ice", infer=False), "user_id"),
    # NUL (U+0000) anywhere in stored text: PostgreSQL's text cannot hold it and C tools cut at it
    "text with NUL": (lambda m: m.add("tea\x00 time", user_id="alice", infer=False), "messages"),
    "content with NUL": (lambda m: m.add([{"role": "user", "content": "tea\x00 time"}], user_id="alice", infer=False), "messages[0].content"),
    "message metadata with NUL": (lambda m: m.add([{"role": "user", "content": "tea", "metadata": {"a": "b\x00"}}], user_id="alice", infer=False), "messages[0].metadata"),
    "metadata value with NUL": (lambda m: m.add("tea time", user_id="alice", metadata={"a": "b\x00c"}, infer=False), "metadata"),
    "metadata key with NUL": (lambda m: m.add("tea time", user_id="alice", metadata={"a\x00": 1}, infer=False), "metadata"),
    "nested metadata with NUL": (lambda m: m.add("tea time", user_id="alice", metadata={"a": [{"b": ["ok", "x\x00"]}]}, infer=False), "metadata"),
    "nested metadata key with NUL": (lambda m: m.add("tea time", user_id="alice", metadata={"a": {"b\x00": 1}}, infer=False), "metadata"),
    "update text with NUL": (lambda m: m.update(m.get_all(user_id="alice")["results"][0]["id"], "green\x00tea"), "text"),
    "update metadata with NUL": (lambda m: m.update(m.get_all(user_id="alice")["results"][0]["id"], "green tea", metadata={"x": "\x00"}), "metadata"),
    "import text with NUL": (lambda m: m.import_([{"text": "tea\x00", "user_id": "alice", "infer": False}]), "line 1"),
    "role not hashable": (lambda m: m.add([{"role": ["user"], "content": "hi there"}], user_id="alice"), "messages[0].role"),
    "name with control character": (lambda m: m.add([{"role": "user", "content": "hi there", "name": "Al\x1bex"}], user_id="alice", infer=False), "messages[0].name"),
    # import
    "import path with surrogate": (lambda m: m.import_("/tmp/" + SURROGATE), "source"),
    "import path with NUL": (lambda m: m.import_("/tmp/a\x00b"), "source"),
    "import progress": (lambda m: m.import_([], progress=3), "progress"),
    "import deep line": (lambda m: m.import_(['{"memory": ' + "[" * 5000 + "]" * 5000 + "}"]), "line 1"),
    "import surrogate text": (lambda m: m.import_([{"text": "tea " + SURROGATE, "user_id": "alice", "infer": False}]), "line 1"),
    "import surrogate escape": (lambda m: m.import_(['{"memory": "tea \\ud800", "user_id": "alice", "created_at": 5}']), "line 1"),
    "import deep metadata turn": (lambda m: m.import_([{"text": "I like tea.", "user_id": "alice", "infer": False, "metadata": nested(5000)}]), "line 1"),
    "import deep lineage": (lambda m: m.import_([{"memory": "I like tea.", "user_id": "alice", "created_at": 5, "lineage": nested(5000)}]), "line 1"),
    "import count overflow": (lambda m: m.import_([{"memory": "I like tea.", "user_id": "alice", "created_at": 5, "helpful": 10**30}]), "line 1"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_a_validation_error_and_changes_nothing(m, case):
    call, field = CASES[case]
    before = state(m)
    with pytest.raises(ValidationError) as info:
        call(m)
    assert info.value.field == field
    # The message is printable as is (no surrogate echoed back).
    str(info.value).encode("utf-8")
    assert state(m) == before
    still_works(m)


def test_a_nul_is_refused_by_name_wherever_it_is(m):
    """The error says what was wrong (a NUL) and where, at any depth of the metadata."""
    with pytest.raises(ValidationError, match=r"NUL character \(U\+0000\) at position 3"):
        m.add("tea\x00 time", user_id="alice", infer=False)
    with pytest.raises(ValidationError, match=r"at \"metadata\['a'\]\[0\]\['b'\]\[1\]\": holds a NUL"):
        m.add("tea time", user_id="alice", metadata={"a": [{"b": ["ok", "x\x00"]}]}, infer=False)
    with pytest.raises(ValidationError, match=r"a key holds a NUL"):
        m.add("tea time", user_id="alice", metadata={"a": {"b\x00": 1}}, infer=False)


# item 3: one bad search must not disable the instance ------------------------------------
def test_search_with_a_surrogate_leaves_every_later_write_working(m):
    with pytest.raises(ValidationError) as info:
        m.search("tea " + SURROGATE, user_id="alice")
    assert info.value.field == "query"
    still_works(m)
    m.close()


def test_an_unencodable_buffered_query_cannot_poison_later_writes(m):
    """Defence in depth: even a query that reached the retrieval buffer unchecked is
    written (escaped) with the next write instead of failing it and every later one."""
    record = m.store.list(m._scope_filter("alice", None, None))[0]
    m.store.touch([record], query="tea " + SURROGATE)
    still_works(m)  # writes, searches past the flush, more writes
    logged = [e.payload["query"] for e in m.store.events() if e.op == "retrieve"]
    assert "tea " + SURROGATE in logged
    m.close()


def test_dumps_escapes_what_utf8_cannot_hold():
    text = _dumps({"q": "a" + SURROGATE + "é"})
    text.encode("utf-8")
    assert _loads(text) == {"q": "a" + SURROGATE + "é"}
    assert _dumps({"q": "é"}) == '{"q":"é"}'  # readable text stays as it was


# item 4: metadata limits, and rows stored before them ------------------------------------
def test_metadata_limits_default_and_configured(db_path):
    with Memory(db_path, embedder="hashing") as mem:
        assert mem.add("tea", user_id="u", metadata=nested(16), infer=False)["results"]  # 16 objects deep
        with pytest.raises(ValidationError, match="deeper than 16"):
            mem.add("tea", user_id="u", metadata=nested(17), infer=False)
        assert mem.add("tea", user_id="u", metadata={"s": "x" * 60_000}, infer=False)["results"]
        with pytest.raises(ValidationError, match="65,536") as info:
            mem.add("tea", user_id="u", metadata={"s": "é" * 33_000}, infer=False)  # 66,000 bytes as UTF-8
        assert info.value.field == "metadata"
        for bad in ([math.nan], [math.inf], {"o": object()}, {"b": b"x"}, {"s": {1, 2}}):
            with pytest.raises(ValidationError, match="finite|JSON data"):
                mem.add("tea", user_id="u", metadata={"k": bad}, infer=False)
        wide = [list(range(1000))] * 1000  # one list shared a thousand times: no slow walk
        with pytest.raises(ValidationError, match="larger than"):
            mem.add("tea", user_id="u", metadata={"w": wide}, infer=False)
        # Merging by update cannot grow a memory's metadata past the limit either.
        mid = mem.add("tea", user_id="u", metadata={"a": "x" * 40_000}, infer=False)["results"][0]["id"]
        with pytest.raises(ValidationError, match="merged into the memory's metadata") as info:
            mem.update(mid, "tea", metadata={"b": "y" * 40_000})
        assert info.value.field == "metadata"
        assert mem.update(mid, "tea", metadata={"a": "y" * 40_000})["event"] == "UPDATE"  # replaces a key
    config = MemoryConfig(max_metadata_depth=3, max_metadata_bytes=100)
    with Memory(db_path, embedder="hashing", config=config) as mem:
        assert mem.add("tea", user_id="u", metadata={"a": {"b": [1]}}, infer=False)["results"]
        with pytest.raises(ValidationError, match="deeper than 3"):
            mem.add("tea", user_id="u", metadata={"a": {"b": [[1]]}}, infer=False)
        with pytest.raises(ValidationError, match="deeper than 3") as info:
            mem.add([{"role": "user", "content": "hi there", "metadata": {"a": {"b": {"c": [1]}}}}], user_id="u", infer=False)
        assert info.value.field == "messages[0].metadata"
        with pytest.raises(ValidationError, match="the limit is 100"):
            mem.add("tea", user_id="u", metadata={"s": "x" * 100}, infer=False)
        with pytest.raises(ValidationError) as info:
            mem.import_([{"memory": "tea", "user_id": "u", "created_at": 5, "metadata": {"s": "x" * 100}}])
        assert "the limit is 100" in str(info.value)


def test_tuples_are_taken_as_lists_and_json_types_pass(m):
    meta = {"t": (1, 2.5, "x", None, True), "n": {"deep": [{"a": -(2**63)}]}}
    mid = m.add("I like tea.", user_id="bob", metadata=meta, infer=False)["results"][0]["id"]
    got = m.get(mid)["metadata"]
    assert got["t"] == [1, 2.5, "x", None, True]
    assert got["n"] == {"deep": [{"a": -(2**63)}]}


def test_a_deep_row_written_by_an_older_version_stays_usable(db_path):
    """Metadata nested 201 deep (past pydantic-core's limit) and 5,000 deep (past
    json.loads and SQLite's): read, exported, updated, deleted; nothing lost."""
    mem = Memory(db_path, embedder="hashing")
    ids = [mem.add(f"I like tea number {i}.", user_id="alice", infer=False)["results"][0]["id"] for i in range(3)]
    deep201 = json.dumps(nested(201), separators=(",", ":"))
    deep5000 = '{"k":' * 5000 + "1" + "}" * 5000
    mem.store._conn.execute("UPDATE memories SET metadata = ? WHERE id = ?", (deep201, ids[0]))
    mem.store._conn.execute("UPDATE memories SET metadata = ? WHERE id = ?", (deep5000, ids[1]))
    mem.close()

    mem = Memory(db_path, embedder="hashing")
    by_id = {r["id"]: r for r in mem.get_all(user_id="alice")["results"]}
    assert by_id[ids[0]]["metadata"] == nested(201)  # read in full
    assert by_id[ids[1]]["metadata"] == {UNREADABLE_KEY: deep5000}  # kept whole, as text
    assert mem.get(ids[1])["metadata"] == {UNREADABLE_KEY: deep5000}
    # A filter on the key it is shown under finds it (the store's own check of a
    # filter cannot see that key, and leaves it to the filter).
    found = mem.get_all(user_id="alice", filters={UNREADABLE_KEY: {"exists": True}})["results"]
    assert [r["id"] for r in found] == [ids[1]]
    exported = {item["id"]: item for item in mem.export(user_id="alice")}
    assert exported[ids[1]]["metadata"][UNREADABLE_KEY] == deep5000
    assert mem.update(ids[0], "I like black tea.")["event"] == "UPDATE"
    assert len(mem.history(ids[0])) == 2
    assert mem.delete(ids[1])["event"] == "DELETE"
    assert len(mem.history(ids[1])) == 2
    assert mem.delete_all(user_id="alice")["deleted"] == 2
    assert mem.get_all(user_id="alice")["results"] == []
    still_works(mem)
    mem.close()


# item 5: the edges that stay accepted ------------------------------------------------------
def test_bounds_that_stay_accepted(m):
    assert m.get_all(user_id="alice")["results"]  # default limit 100
    assert m.get_all(user_id="alice", limit=1_000_000)["results"]
    assert m.search("tea", user_id="alice", limit=1_000_000)["results"]
    assert m.events(user_id="alice", since=2**63 - 1) == []
    assert m.add("tea", user_id="bob", timestamp=0, infer=False)["results"]
    assert m.add("tea", user_id="bob", timestamp="9999-12-31T23:59:59Z", infer=False)["results"]
    assert len(m.search("tea", user_id="alice", filters=not_chain(31))["results"]) == 1  # 32 levels: odd NOTs
    with pytest.raises(ValidationError, match="deeper than 32"):
        m.search("tea", user_id="alice", filters=not_chain(32))
    assert m.search("tea", user_id="alice", filters={"created_at": {"gte": datetime(2000, 1, 1)}})["results"]
    # Text with control characters (other than NUL) among visible ones is text; a
    # message of spaces only is a message without text, as before.
    assert m.add("tea\x1b time", user_id="bob", infer=False)["results"]
    assert m.add([{"role": "user", "content": "  "}, {"role": "user", "content": "I like tea."}], user_id="bob", infer=False)["results"]
    assert m.add([{"role": "user", "content": "hi there", "name": ""}], user_id="bob", infer=False)["results"]


def test_an_import_file_that_is_not_utf8_keeps_the_lines_before(m, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"text": "I like tea.", "user_id": "bob", "infer": false}\n{"text": "caf\xe9", "user_id": "bob"}\n')
    with pytest.raises(ValidationError) as info:
        m.import_(str(path))
    assert info.value.field == "line 2"
    assert "UTF-8" in str(info.value)
    assert [r["memory"] for r in m.get_all(user_id="bob")["results"]] == ["I like tea."]
    still_works(m)
