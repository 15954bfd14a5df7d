"""Export and import through the library: whole memories out, the same memories back,
and a second import that changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memorist import ImportLineError, Memory, NotFoundError, ValidationError


def lines_of(memory: Memory, **kwargs) -> list[str]:
    return [json.dumps(item, ensure_ascii=False) for item in memory.export(**kwargs)]


def write(path: Path, lines: list[str | dict]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture
def source(tmp_path: Path) -> Memory:
    """A store with facts, an update, a deletion, verbatim turns, two users and a playbook."""
    m = Memory(str(tmp_path / "source.db"), embedder="hashing")
    m.add("Hi, I'm Alex. I'm a vegetarian and allergic to nuts.", user_id="alex", timestamp="2024-03-01T10:00:00Z")
    m.add("I live in California.", user_id="alex", agent_id="travel", timestamp="2024-03-02T10:00:00Z")
    m.add("Actually I live in San Francisco now.", user_id="alex", agent_id="travel")
    m.add(
        [{"role": "user", "content": "Book the 9am train", "name": "Sam"}, {"role": "assistant", "content": "Done."}],
        user_id="sam",
        run_id="r1",
        infer=False,
        metadata={"channel": "chat"},
    )
    gone = m.add("My cat is called Tom.", user_id="sam", infer=False)["results"][0]["id"]
    m.delete(gone)
    m.playbooks.run_turn(
        {
            "messages": [{"role": "user", "content": "How do I add 1/2 + 1/3?"}],
            "learner_id": "lee",
            "conversation_id": "c1",
            "feedback": "The fraction bars helped me see the common denominator",
            "outcome": "success",
        }
    )
    yield m
    m.close()


def test_export_import_export_gives_the_same_lines(source: Memory, tmp_path: Path) -> None:
    exported = lines_of(source, all_scopes=True)
    kinds = {json.loads(line)["kind"] for line in exported}
    assert {"fact", "turn", "strategy"} <= kinds
    assert all(json.loads(line)["type"] == "memory" for line in exported)
    with Memory(str(tmp_path / "copy.db"), embedder="hashing") as copy:
        summary = copy.import_(write(tmp_path / "all.jsonl", exported))
        assert summary["added"] == len(exported) and summary["unchanged"] == 0
        assert lines_of(copy, all_scopes=True) == exported
        # The copy is searchable, with the ids and dates of the source.
        hit = copy.search("San Francisco", user_id="alex", limit=1)["results"][0]
        original = source.get(hit["id"])
        assert hit["memory"] == original["memory"] == "Lives in San Francisco now"
        assert (hit["created_at"], hit["updated_at"]) == (original["created_at"], original["updated_at"])


def test_importing_twice_changes_nothing(source: Memory, tmp_path: Path) -> None:
    path = write(tmp_path / "alex.jsonl", lines_of(source, user_id="alex"))
    with Memory(str(tmp_path / "copy.db"), embedder="hashing") as copy:
        first = copy.import_(path)
        events = len(copy.events(user_id="alex"))
        second = copy.import_(path)
        assert second["added"] == second["updated"] == 0
        assert second["unchanged"] == first["added"] > 0
        assert len(copy.get_all(user_id="alex")["results"]) == first["added"]
        assert len(copy.events(user_id="alex")) == events  # not even an event
        # Importing into the store it came from is a no-op too.
        assert source.import_(path)["unchanged"] == first["added"]


def test_a_newer_copy_updates_and_an_older_one_does_not(source: Memory, tmp_path: Path) -> None:
    path = write(tmp_path / "before.jsonl", lines_of(source, user_id="sam"))
    turn = next(r for r in source.get_all(user_id="sam")["results"] if r["memory"] == "Done.")
    source.update(turn["id"], "Done: the 9am train is booked.")
    newer = write(tmp_path / "after.jsonl", lines_of(source, user_id="sam"))
    with Memory(str(tmp_path / "copy.db"), embedder="hashing") as copy:
        copy.import_(path)
        summary = copy.import_(newer)
        assert summary["updated"] == 1 and summary["added"] == 0
        assert copy.get(turn["id"])["memory"] == "Done: the 9am train is booked."
        assert [e["event"] for e in copy.history(turn["id"])] == ["ADD", "UPDATE"]
        assert copy.import_(path)["updated"] == 0  # the older file leaves the newer text
        assert copy.get(turn["id"])["memory"] == "Done: the 9am train is booked."


def test_a_later_export_carries_a_consolidation_made_since_the_first(tmp_path: Path) -> None:
    """A consolidation leaves its sources' text and ``updated_at`` alone (it archives
    them): a later export still counts as newer, so the copy does not list the
    merged memory beside the two it replaced."""
    with Memory(str(tmp_path / "a.db"), embedder="hashing") as a, Memory(str(tmp_path / "b.db"), embedder="hashing") as b:
        for i, text in enumerate(["Bob likes espresso in the morning", "Bob likes an espresso in the morning", "Bob drives a Honda"]):
            a.add(text, user_id="bob", infer=False, importance=0.2, timestamp=1_767_225_600 + i)
        b.import_(list(a.export(all_scopes=True)))
        assert a.learning.consolidate(user_id="bob")["merged_count"] == 2
        summary = b.import_(list(a.export(all_scopes=True)))
        assert (summary["added"], summary["updated"]) == (1, 2)
        listed = sorted(r["memory"] for r in b.get_all(user_id="bob")["results"])
        assert listed == sorted(r["memory"] for r in a.get_all(user_id="bob")["results"])
        assert len(listed) == 2
        assert list(b.export(all_scopes=True)) == list(a.export(all_scopes=True))


def test_of_two_copies_of_one_time_the_archived_one_is_newer(source: Memory, tmp_path: Path) -> None:
    """A copy retired without a date (a file of an older release) against the active
    one of the same time: retiring comes after, so the archived copy wins, whichever
    the store holds; and the other way round nothing changes."""
    active = json.loads(lines_of(source, user_id="sam")[0])
    archived = {**active, "status": "archived"}
    with Memory(str(tmp_path / "copy.db"), embedder="hashing") as copy:
        copy.import_([active])
        assert copy.import_([archived])["updated"] == 1
        assert copy.get_all(user_id="sam")["results"] == []
        assert copy.import_([active])["unchanged"] == 1
        assert copy.get_all(user_id="sam")["results"] == []
    with Memory(str(tmp_path / "twice.db"), embedder="hashing") as twice:  # one file naming the id twice
        assert twice.import_([archived, active])["added"] == 1
        assert twice.get_all(user_id="sam")["results"] == []


def test_a_memory_deleted_since_the_export_stays_deleted(source: Memory, tmp_path: Path) -> None:
    path = write(tmp_path / "sam.jsonl", lines_of(source, user_id="sam"))
    victim = source.get_all(user_id="sam")["results"][0]["id"]
    source.delete(victim)
    summary = source.import_(path)
    assert summary["skipped"] == 1 and summary["added"] == 0
    with pytest.raises(NotFoundError):
        source.get(victim)


def test_events_are_exported_on_request_and_not_replayed(source: Memory, tmp_path: Path) -> None:
    plain = lines_of(source, user_id="alex")
    with_events = lines_of(source, user_id="alex", events=True)
    events = [json.loads(x) for x in with_events[len(plain) :]]
    assert with_events[: len(plain)] == plain
    assert events and all(e["type"] == "event" for e in events)
    assert {"TURN", "ADD", "UPDATE"} <= {e["event"] for e in events}
    with Memory(str(tmp_path / "copy.db"), embedder="hashing") as copy:
        summary = copy.import_(with_events)
        assert summary["events"] == len(events) and summary["added"] == len(plain)
        # The copy's log says what happened to it: one import event per memory.
        log = copy.events(user_id="alex")
        assert len(log) == len(plain) and all(e["payload"] == {"import": True} for e in log)


def test_whole_store_export_spans_every_scope_and_needs_asking(source: Memory) -> None:
    everything = [json.loads(x) for x in lines_of(source, all_scopes=True)]
    assert {m["user_id"] for m in everything} == {"alex", "sam", "lee"}
    assert "travel" in {m["agent_id"] for m in everything}
    with pytest.raises(ValidationError, match="user_id"):
        source.export()
    with pytest.raises(ValidationError, match="all_scopes"):
        source.export(user_id="alex", all_scopes=True)


def test_a_bad_line_is_named_and_the_lines_before_it_stay(source: Memory, tmp_path: Path) -> None:
    good = lines_of(source, user_id="alex")
    with Memory(str(tmp_path / "copy.db"), embedder="hashing") as copy:
        for bad, reason in [
            ("{not json", "not valid JSON"),
            ("[1, 2]", "must be a JSON object"),
            (json.dumps({"memory": "x", "id": "m1", "user_id": "u", "created_at": "yesterday"}), "created_at"),
            (json.dumps({"memory": "", "id": "m2", "user_id": "u", "created_at": "2024-01-01"}), "memory"),
            (json.dumps({"memory": "x", "text": "y"}), "exactly one of"),
            (json.dumps({"memory": "x", "id": "m3", "user_id": "u", "created_at": "2024-01-01", "kind": "gossip"}), "kind"),
            # A misspelt field of a conversation line was left out: the memory dated
            # now and without its metadata, and the import said nothing.
            (json.dumps({"text": "x", "user_id": "u", "infer": False, "timestmap": "2001-01-01T00:00:00Z"}),
             "'timestmap' is not a field of a conversation line"),
            (json.dumps({"messages": [{"role": "user", "content": "x"}], "user_id": "u", "metdata": {"a": 1}}), "'metdata'"),
        ]:
            with pytest.raises(ImportLineError) as caught:
                copy.import_([*good, bad, good[0]])
            assert caught.value.line == len(good) + 1
            assert f"line {len(good) + 1}" in str(caught.value) and reason in str(caught.value)
            assert len(copy.get_all(user_id="alex")["results"]) == len(good)


def test_a_negative_energy_is_refused_naming_it(tmp_path: Path) -> None:
    """No store holds a memory with less than no energy (decay only brings it towards
    0); before, an import took ``"energy": -1`` as it came and the memory expired at the
    next maintenance run."""
    with Memory(str(tmp_path / "copy.db"), embedder="hashing") as copy:
        line = {"memory": "Renew the TLS certificate", "id": "m1", "user_id": "u", "created_at": "2024-01-01"}
        for bad in (-1, -1e-9, -1e308):
            with pytest.raises(ImportLineError) as caught:
                copy.import_([{**line, "energy": bad}])
            assert "energy" in str(caught.value) and ">= 0" in str(caught.value)
        assert copy.get_all(user_id="u")["results"] == []
        assert copy.import_([{**line, "energy": 0.0}])["added"] == 1


def test_another_tenants_memory_is_refused(source: Memory, tmp_path: Path) -> None:
    line = json.loads(lines_of(source, user_id="alex")[0]) | {"tenant_id": "acme"}
    with pytest.raises(ImportLineError, match="line 1: .*tenant 'acme'"):
        source.import_([line])
    with Memory(str(tmp_path / "acme.db"), embedder="hashing", tenant_id="acme") as acme:
        assert acme.import_([line])["added"] == 1
        assert next(acme.export(user_id="alex"))["tenant_id"] == "acme"
    # Ids are unique across a store: another tenant's id is an error naming the line.
    with Memory(str(tmp_path / "source.db"), tenant_id="acme") as acme, pytest.raises(
        ImportLineError, match=r"^line 2: id .*another tenant"
    ):
        acme.import_([{"text": "hello", "user_id": "x", "infer": False}, line])


def test_another_scopes_memory_is_refused_and_never_moved(source: Memory) -> None:
    """A file edited to copy alex's memories to alex2: an import never moves a memory,
    whether the line is newer (it would update) or not (it would count as there)."""
    line = json.loads(lines_of(source, user_id="alex")[0])
    before = source.get_all(user_id="alex")["results"]
    newer = line | {"user_id": "alex2", "memory": "Overwritten", "updated_at": "2099-01-01T00:00:00+00:00"}
    for copy in (newer, line | {"user_id": "alex2"}, line | {"agent_id": "travel"}):
        with pytest.raises(ImportLineError, match=rf"^line 2: id '{line['id']}' is already the id of a memory of another scope"):
            source.import_([{"text": "kept", "user_id": "alex2", "infer": False}, copy])
    assert source.get_all(user_id="alex")["results"] == before
    assert [m["memory"] for m in source.get_all(user_id="alex2")["results"]] == ["kept"] * 3
    # Without its id, the line is a copy under a new id.
    copied = {k: v for k, v in newer.items() if k != "id"}
    assert source.import_([copied])["added"] == 1
    assert source.get(line["id"], user_id="alex")["memory"] == line["memory"]


def test_conversation_lines_and_older_exports_import_too(tmp_path: Path) -> None:
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        summary = m.import_(
            [
                {"text": "I'm a vegetarian.", "user_id": "alex"},
                {"messages": [{"role": "user", "content": "hello"}], "infer": False},
                # An export line of Memorist before the "type" field: id, dates, kind.
                {"id": "0ld-1d", "memory": "Likes tea", "user_id": "alex", "created_at": "2024-01-01T00:00:00+00:00",
                 "updated_at": "2024-01-01T00:00:00+00:00", "metadata": {}, "kind": "preference", "memory_class": "semantic"},
            ],
            user_id="bob",
        )
        assert summary["added"] == 3 and summary["calls"] == 2
        assert m.get("0ld-1d")["kind"] == "preference"
        assert [r["memory"] for r in m.get_all(user_id="bob")["results"]] == ["hello"]


def test_import_rejects_what_is_not_lines(tmp_path: Path) -> None:
    with Memory(":memory:", embedder="hashing") as m:
        with pytest.raises(ValidationError, match="source"):
            m.import_(42)
        with pytest.raises(ValidationError, match="cannot read"):
            m.import_(tmp_path / "missing.jsonl")
        with pytest.raises(ValidationError, match="infer"):
            m.import_([], infer="yes")


def test_resolve_id_takes_unique_prefixes(source: Memory) -> None:
    ids = [r["id"] for r in source.get_all(user_id="alex")["results"]]
    for mid in ids:
        assert source.resolve_id(mid[:8]) == mid
        assert source.resolve_id(mid) == mid
    source.import_([{"id": f"abc-{i}", "memory": f"fact {i}", "user_id": "u", "created_at": "2024-01-01"} for i in (1, 2)])
    with pytest.raises(ValidationError, match="several ids.*abc-1, abc-2"):
        source.resolve_id("abc")
    assert source.resolve_id("abc-2") == "abc-2"
    source.delete("abc-2")
    assert source.resolve_id("abc") == "abc-1"  # a deleted id no longer competes
    assert source.resolve_id("abc-2", include_deleted=True) == "abc-2"
    with pytest.raises(NotFoundError):
        source.resolve_id("zzzz")
    with pytest.raises(NotFoundError):
        source.resolve_id("100%")  # LIKE wildcards are plain characters


def test_resolve_id_with_ids_matches_only_that_scope_s_ids(source: Memory) -> None:
    source.import_([{"id": f"abc-{u}", "memory": f"fact of {u}", "user_id": u, "created_at": "2024-01-01"} for u in ("u", "v")])
    assert source.resolve_id("abc", user_id="v") == "abc-v"  # u's id neither shows nor competes
    with pytest.raises(NotFoundError, match="'abc-u'"):
        source.resolve_id("abc-u", user_id="v")
    with pytest.raises(NotFoundError, match="'abc'"):
        source.resolve_id("abc", user_id="w")
    with pytest.raises(ValidationError, match="several ids.*abc-u, abc-v"):
        source.resolve_id("abc")


def test_strategies_an_import_adds_to_a_playbook_are_a_version_of_it(tmp_path: Path) -> None:
    """A playbook of the same name joined by an import: its new strategies are in a
    version, so rolling back to the current version keeps them and an older one can
    come back to them."""
    def patterns(book: dict) -> list[str]:
        return sorted(s["pattern"] for items in book["strategies"].values() for s in items)

    with Memory(str(tmp_path / "a.db"), embedder="hashing") as a, Memory(str(tmp_path / "b.db"), embedder="hashing") as b:
        a.learning.update_playbook([{"pattern": "Chunk large PDFs"}, {"pattern": "Retry with backoff on 429"}], agent_id="bot")
        b.learning.update_playbook([{"pattern": "Answer in French"}], agent_id="bot")
        b.import_(list(a.export(all_scopes=True)))
        joined = b.learning.get_playbook(agent_id="bot")
        assert patterns(joined) == ["Answer in French", "Chunk large PDFs", "Retry with backoff on 429"]
        versions = b.learning.list_playbook_versions(agent_id="bot")
        assert [v["version"] for v in versions] == [1, 2] and joined["version"] == 2
        assert patterns(b.learning.get_playbook_version("default", 2, agent_id="bot")) == patterns(joined)
        assert "nothing to roll back" in b.learning.rollback_playbook("default", 2, agent_id="bot")["message"]
        b.learning.rollback_playbook("default", 1, agent_id="bot")
        assert patterns(b.learning.get_playbook(agent_id="bot")) == ["Answer in French"]
        b.learning.rollback_playbook("default", 2, agent_id="bot")
        assert patterns(b.learning.get_playbook(agent_id="bot")) == patterns(joined)
        # Importing the file again changes nothing, and writes no version.
        assert b.import_(list(a.export(all_scopes=True)))["added"] == 0
        assert len(b.learning.list_playbook_versions(agent_id="bot")) == 4
