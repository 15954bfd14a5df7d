"""`import` of conversation lines at bulk speed: verbatim lines of one scope go in
batched add calls even when each line has its own time and metadata, with the same
memories as line by line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from memorist import ImportLineError, Memory, ValidationError
from memorist.pipelines import transfer
from terminal_helpers import run_in_terminal


def turns(n: int, *, user: str = "alex", start: float = 1_683_561_360.0) -> list[dict]:
    return [
        {
            "messages": [{"role": "user", "content": f"Turn {i} about topic{i % 13}", "name": ("Caroline", "Melanie")[i % 2]}],
            "user_id": user,
            "timestamp": start + 60 * i,
            "metadata": {"dia_id": f"D1:{i + 1}", "session": 1},
            "infer": False,
        }
        for i in range(n)
    ]


def memories(m: Memory, user: str) -> list[tuple]:
    return sorted(
        (r["memory"], r["created_at"], r["metadata"]["dia_id"], r["metadata"]["name"], r["metadata"]["session"])
        for r in m.get_all(user_id=user, limit=10_000)["results"]
    )


def test_lines_with_their_own_times_and_metadata_are_batched(tmp_path: Path) -> None:
    lines = turns(600)
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        summary = m.import_(lines)
        assert summary["added"] == 600
        # Batches of IMPORT_BATCH messages: two calls, not 600.
        assert summary["calls"] == 2
        batched = memories(m, "alex")
    with Memory(str(tmp_path / "one.db"), embedder="hashing") as one:
        for line in lines:  # the same lines, one add each
            one.add(line["messages"], user_id="alex", metadata=line["metadata"], timestamp=line["timestamp"], infer=False)
        assert batched == memories(one, "alex")
    assert batched[0][1] == "2023-05-08T15:56:00+00:00"  # each line keeps its own time


def test_a_line_s_own_message_time_and_metadata_win_over_the_line_s(tmp_path: Path) -> None:
    line = {
        "messages": [
            {"role": "user", "content": "first", "timestamp": "2024-01-02T00:00:00+00:00", "metadata": {"session": 9}},
            {"role": "user", "content": "second"},
        ],
        "user_id": "alex", "timestamp": "2024-01-01T00:00:00+00:00", "metadata": {"session": 1, "dia_id": "x"}, "infer": False,
    }
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        assert m.import_([line, *turns(3)])["calls"] == 1
        got = {r["memory"]: r for r in m.get_all(user_id="alex")["results"]}
        assert got["first"]["created_at"].startswith("2024-01-02") and got["first"]["metadata"]["session"] == 9
        assert got["second"]["created_at"].startswith("2024-01-01") and got["second"]["metadata"]["session"] == 1


def test_scopes_and_call_level_metadata_split_batches(tmp_path: Path) -> None:
    lines = turns(5, user="alex") + turns(5, user="bob")
    lines[2] = {**lines[2], "metadata": {"is_test": True}}  # acts on the whole call: alone
    with Memory(str(tmp_path / "m.db"), embedder="hashing", policy="energy") as m:  # test memories are the tiers'
        summary = m.import_(lines)
        assert summary["added"] == 10
        assert summary["calls"] == 4  # alex 0-1, the test line, alex 3-4, bob
        assert len(m.get_all(user_id="bob")["results"]) == 5
        assert len(m.get_all(user_id="alex")["results"]) == 4  # the test line went to the test tenant


def test_a_bad_line_in_a_batch_is_named_and_the_lines_before_it_stay(tmp_path: Path) -> None:
    lines = turns(40)
    lines[25]["messages"][0]["metadata"] = "not an object"
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        with pytest.raises(ImportLineError, match=r"^line 26: .*metadata") as err:
            m.import_(lines)
        assert err.value.summary["added"] == 25
        assert len(m.get_all(user_id="alex")["results"]) == 25
    lines = turns(40)
    lines[30]["timestamp"] = "yesterday-ish"
    with Memory(str(tmp_path / "t.db"), embedder="hashing") as m:
        with pytest.raises(ImportLineError, match=r"^line 31: timestamp"):
            m.import_(lines)
        assert len(m.get_all(user_id="alex")["results"]) == 30


def test_the_first_batches_are_small(tmp_path: Path) -> None:
    sizes: list[int] = []

    def add(messages, **kwargs):
        sizes.append(len(messages))
        return {"results": [{"event": "ADD"} for _ in messages]}

    store = Memory(str(tmp_path / "m.db"), embedder="hashing").store  # empty: asked whether a line is there already

    def importer() -> transfer.Importer:
        return transfer.Importer(store, None, "", add, {"user_id": None, "agent_id": None, "run_id": None})  # type: ignore[arg-type]

    lines = [json.dumps(t) for t in turns(2000)]
    transfer.import_lines(importer(), lines, progress=lambda n: None)  # a progress bar: small first batches
    assert sizes[:4] == [16, 32, 64, 128]
    assert max(sizes) == transfer.IMPORT_BATCH and sum(sizes) == 2000
    sizes.clear()
    transfer.import_lines(importer(), lines)  # nobody watching: whole batches from the start
    assert sizes == [transfer.IMPORT_BATCH] * 4


def test_under_a_progress_bar_lines_of_several_scopes_wait_no_more_than_one_batch(tmp_path: Path) -> None:
    written: list[int] = []
    lag: list[int] = []  # lines read but not written yet, as each line is read: the bar counts them as done

    def add(messages, **kwargs):
        written.append(len(messages))
        return {"results": [{"event": "ADD"} for _ in messages]}

    store = Memory(str(tmp_path / "m.db"), embedder="hashing").store
    importer = transfer.Importer(store, None, "", add, {"user_id": None, "agent_id": None, "run_id": None})  # type: ignore[arg-type]
    lines = [json.dumps(line) for line in rotating(3000)]
    transfer.import_lines(importer, lines, progress=lambda n: lag.append(n - 1 - sum(written)))
    assert sum(written) == 3000 and max(written) <= transfer.IMPORT_BATCH
    assert max(lag) <= transfer.IMPORT_BATCH  # as for one scope's lines: the bar's first rate stays the import's
    assert len(written) < 3000 / 50  # still batched


def test_each_line_keeps_its_own_importance_when_lines_are_batched(tmp_path: Path) -> None:
    lines = turns(40)
    for i, line in enumerate(lines):
        if i % 3:
            line["importance"] = (0.9, 0.2)[i % 2]
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        assert m.import_(lines)["added"] == 40
        got = {r["metadata"]["dia_id"]: r["importance"] for r in m.get_all(user_id="alex", limit=100)["results"]}
    want = {f"D1:{i + 1}": (0.9, 0.2)[i % 2] if i % 3 else 0.5 for i in range(40)}
    assert got == pytest.approx(want)


def _import_in_a_terminal(tmp_path: Path, n: int) -> tuple[list[str], str]:
    """`memorist import` of ``n`` lines with stderr on a pty: the bar's frames and stdout."""
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in turns(n)), encoding="utf-8")
    argv = [sys.executable, "-m", "memorist", "--db", str(tmp_path / "c.db"), "--embedder", "hashing", "import", str(path)]
    frames, out, code = run_in_terminal(argv)
    assert code == 0, frames
    return frames, out


def test_the_import_bar_tells_the_time_left_in_a_terminal(tmp_path: Path) -> None:
    frames, out = _import_in_a_terminal(tmp_path, 6000)
    assert "Read 6000 lines; added 6000 memories" in out
    estimates = [f for f in frames if re.search(r"\d+(\.\d)? s left", f)]
    assert estimates, frames  # an estimate, in tenths of a second for a short job
    assert all("importing" in f and "/6000" in f for f in estimates)
    assert "6000/6000" in frames[-1] and "left" not in frames[-1]  # done: no estimate left on screen


def test_off_a_terminal_the_import_writes_its_label_once_and_no_bar(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in turns(3000)), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "memorist", "--db", str(tmp_path / "c.db"), "--embedder", "hashing", "import", str(path)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Read 3000 lines; added 3000 memories."
    assert proc.stderr == "importing\n"  # for a log: what ran, without a bar's redraws


# lines of several scopes at once, a second run, and where an import stops ------------------
USERS = ("ann", "bo", "cy")


def rotating(n: int, *, start: float = 1_683_561_360.0) -> list[dict]:
    """Verbatim turns whose users take turns line by line, each with its own time."""
    return [
        {
            "messages": [{"role": "user", "content": f"{USERS[i % 3]} says turn {i} about topic{i % 7}", "name": ("Caroline", "Melanie")[i % 2]}],
            "user_id": USERS[i % 3],
            "timestamp": start + 60 * i,
            "metadata": {"dia_id": f"D1:{i + 1}"},
            "infer": False,
        }
        for i in range(n)
    ]


def stored(m: Memory, users=USERS) -> Counter:
    """Every memory of the users, as (user, text, time), with how many times the store holds it."""
    return Counter((u, r["memory"], r["created_at"]) for u in users for r in m.get_all(user_id=u, limit=10_000)["results"])


def expected(lines: list[dict]) -> Counter:
    """What importing ``lines`` stores, each line added alone (the reference)."""
    with Memory(":memory:", embedder="hashing") as one:
        for line in lines:
            one.add(line.get("messages", line.get("text")), user_id=line["user_id"], metadata=line.get("metadata"),
                    timestamp=line.get("timestamp"), infer=False)
        return stored(one)


def test_running_an_import_again_after_it_stopped_adds_nothing_twice(backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 8)  # each user's lines in several batches
    lines = rotating(60)
    lines[10] = {"text": "A plain note", "user_id": "ann", "infer": False, "timestamp": "2024-01-01T10:00:00Z"}
    lines[12] = {  # a system message is not stored; the two others are, a microsecond apart
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Where to?", "name": "Caroline"},
                     {"role": "assistant", "content": "Porto"}],
        "user_id": "bo", "timestamp": "2024-01-01T10:00:00Z", "infer": False,
    }
    lines[14] = {**lines[3], "user_id": "bo"}  # the same words at the same time, of another user
    lines[50] = dict(lines[20])  # the same words twice at one time: the store keeps both
    bad = 40  # line 41 of the file
    text = [json.dumps(line) for line in lines]
    broken = [*text[:bad], '{"messages": [{"role": "user", "content": "broken', *text[bad + 1 :]]
    with Memory(backend.target, embedder="hashing") as m:
        with pytest.raises(ImportLineError) as err:
            m.import_(broken)
        assert err.value.line == bad + 1
        before = expected(lines[:bad])
        assert stored(m) == before and err.value.summary["added"] == before.total()
        again = m.import_(text)  # the fixed file, whole
        assert (again["added"], again["unchanged"]) == (expected(lines).total() - before.total(), before.total())
        assert stored(m) == expected(lines)
        assert [key[1] for key, n in stored(m).items() if n == 2] == [lines[20]["messages"][0]["content"]]
        third = m.import_(text)
        assert (third["added"], third["unchanged"]) == (0, expected(lines).total())
        assert stored(m) == expected(lines)


def test_a_scope_s_lines_of_another_importance_keep_the_file_s_order(backend) -> None:
    lines = [{"messages": [{"role": "user", "content": word}], "user_id": "alex", "infer": False, **extra}
             for word, extra in (("first", {}), ("second", {"importance": 0.9}), ("third", {}), ("fourth", {"importance": 0.9}))]
    with Memory(backend.target, embedder="hashing") as m:
        m.import_(lines)
        rows = sorted(m.get_all(user_id="alex")["results"], key=lambda r: r["created_at"])
    assert [r["memory"] for r in rows] == ["first", "second", "third", "fourth"]
    assert [r["importance"] for r in rows][1::2] == [0.9, 0.9]


def test_interleaved_scopes_and_formats_end_as_the_same_lines_grouped(backend) -> None:
    turns_ = rotating(60)
    memory_lines = [
        {"type": "memory", "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"m{i}")), "memory": f"Fact {i} of {USERS[i % 3]}",
         "user_id": USERS[i % 3], "created_at": f"2024-02-{i + 1:02d}T08:00:00+00:00", "metadata": {"n": i}}
        for i in range(20)
    ]
    interleaved = [line for pair in zip(turns_[::3], turns_[1::3], turns_[2::3], memory_lines, strict=True) for line in pair]
    assert {line["user_id"] for line in interleaved[:3]} == set(USERS)  # each line another user's, a memory line between
    grouped = sorted(interleaved, key=lambda line: USERS.index(line["user_id"]))  # stable: each user's in the file's order

    def imported(lines: list[dict], target: str) -> tuple[dict, list[dict]]:
        with Memory(target, embedder="hashing") as m:
            summary = m.import_(lines)
            items = [{k: v for k, v in item.items() if k not in ("id", "lineage")} if item["kind"] == "turn" else item
                     for item in m.export(all_scopes=True)]
        # The turns get new ids (and their turn event); everything else is the same.
        return summary, sorted(items, key=lambda i: (i["user_id"], i["created_at"], i["memory"]))

    mixed, mixed_items = imported(interleaved, backend.target)
    apart, apart_items = imported(grouped, backend.fresh())
    assert mixed_items == apart_items
    assert mixed["added"] == apart["added"] == 80
    assert mixed["calls"] == apart["calls"] == 3  # one add call per user, as for the grouped file


@pytest.mark.parametrize("how", ["bad JSON", "refused by add", "id of another scope"])
def test_a_bad_line_keeps_exactly_the_lines_before_it_whatever_their_scopes(backend, how: str) -> None:
    lines: list = rotating(30)
    lines.insert(3, {"type": "relation", "subject": ["user", "bo"], "relation": "member", "object": ["group", "team"]})
    lines.insert(25, {"type": "relation", "subject": ["user", "cy"], "relation": "member", "object": ["group", "team"]})
    bad = 18  # line 19 of the file; lines of every user wait around it
    with Memory(backend.target, embedder="hashing") as m:
        other = m.add("Zed's own memory", user_id="zed", infer=False)["results"][0]["id"]
        if how == "bad JSON":
            lines.insert(bad, '{"messages": [')
        elif how == "refused by add":
            lines.insert(bad, {**lines[0], "messages": [{"role": "robot", "content": "beep"}]})
        else:  # found only when memory lines are written: after the lines that follow it were read
            lines.insert(bad, {"type": "memory", "id": other, "memory": "Not zed's", "user_id": "ann", "created_at": "2024-01-01T00:00:00Z"})
        with pytest.raises(ImportLineError) as err:
            m.import_([line if isinstance(line, str) else json.dumps(line) for line in lines])
        assert err.value.line == bad + 1
        turns_before = [line for line in lines[:bad] if isinstance(line, dict) and "messages" in line]
        assert stored(m) == expected(turns_before)
        assert err.value.summary["added"] == len(turns_before)
        assert [t["subject"] for t in m.relations.list(limit=10)["results"]] == [["user", "bo"]]  # the tuple before it only
        assert err.value.summary["calls"] <= len(USERS)  # and the lines before it went in batches


def test_a_new_conversation_of_a_known_user_is_not_looked_up_line_by_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        m.add("Ann's first words", user_id="ann", infer=False, timestamp=1_600_000_000)
        lookups = []
        find = m.store.find_by_hash
        monkeypatch.setattr(m.store, "find_by_hash", lambda *a: lookups.append(a) or find(*a))
        lines = rotating(90)
        assert m.import_(lines)["added"] == 90
        assert lookups == []  # the store held nothing of these times: one read a batch, none a line
        assert m.import_(lines)["unchanged"] == 90 and len(lookups) == 90  # a second run looks each one up


def test_an_import_goes_on_from_a_line_with_the_source_s_line_numbers(tmp_path: Path) -> None:
    whole = turns(12)
    lines = [json.dumps(line) for line in whole]
    lines[7] = '{"messages": ['
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        with pytest.raises(ImportLineError) as err:
            m.import_(lines)
        assert err.value.line == 8
        lines[7], lines[10] = json.dumps(whole[7]), '{"text": 4}'
        seen: list[int] = []
        with pytest.raises(ImportLineError, match=r"^line 11: ") as err:
            m.import_(lines, from_line=8, progress=seen.append)
        assert seen == [8, 9, 10, 11]  # the source's numbers, from the first line imported
        assert err.value.summary["added"] == 3 and err.value.later is None
        lines[10] = json.dumps(whole[10])
        summary = m.import_(lines, from_line=11)
        assert (summary["lines"], summary["added"], summary["unchanged"]) == (2, 2, 0)
        with Memory(str(tmp_path / "whole.db"), embedder="hashing") as reference:
            reference.import_(whole)
            assert memories(m, "alex") == memories(reference, "alex")
        path = tmp_path / "in.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        again = m.import_(path, from_line=12)  # a file: its last line, already there
        assert (again["lines"], again["added"], again["unchanged"]) == (1, 0, 1)
        for bad in (0, -1, True, 1.5, "3", None):
            with pytest.raises(ValidationError, match=r"^from_line: must be a whole number from 1"):
                m.import_(lines, from_line=bad)
        with pytest.raises(ValidationError, match=r"^from_line: is 13, but the source has 12 lines; nothing was imported"):
            m.import_(lines, from_line=13)
        assert len(m.get_all(user_id="alex", limit=100)["results"]) == 12


def test_a_line_failing_as_its_batch_is_written_names_the_later_lines_of_other_scopes_that_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from memorist.cli import cli
    from memorist.errors import StoreError

    monkeypatch.setattr(transfer, "IMPORT_BATCH", 8)
    real_add = Memory.add

    def add(self: Memory, messages, **kwargs):  # the store fails on one line, once its batch is written
        if any("poisoned" in m["content"] for m in messages):
            raise StoreError("the disk is full")
        return real_add(self, messages, **kwargs)

    monkeypatch.setattr(Memory, "add", add)
    first = {"messages": [{"role": "user", "content": "ann's poisoned turn"}], "user_id": "ann", "infer": False}
    lines = [first, *[line for line in rotating(27) if line["user_id"] == "bo"]]  # ann's line 1, then bo's 2 to 10
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        with pytest.raises(ImportLineError, match=r"^line 1: the disk is full \(lines of other scopes after it, up to line 9,") as err:
            m.import_(path)
        assert (err.value.line, err.value.later, err.value.summary["added"]) == (1, 9, 8)
        assert len(m.get_all(user_id="bo")["results"]) == 8 and not m.get_all(user_id="ann")["results"]
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "cli.db"), "--embedder", "hashing", "import", str(path)])
    assert result.exit_code == 1
    assert ("8 memories added and 0 updated from the lines before line 1 and from lines of other scopes after it, "
            "up to line 9, written before it failed") in result.output
    assert "no line after it was imported" not in result.output


def test_an_empty_source_imports_nothing_and_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        for source in ([], empty, iter(())):
            assert m.import_(source)["lines"] == 0
        with pytest.raises(ValidationError, match=r"^from_line: is 2, but the source has 0 lines"):
            m.import_([], from_line=2)


def test_memory_and_relation_lines_written_before_a_failed_turn_are_named_as_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memorist.errors import StoreError

    monkeypatch.setattr(transfer, "IMPORT_BATCH", 8)
    real_add = Memory.add

    def add(self: Memory, messages, **kwargs):
        if any("poisoned" in m["content"] for m in messages):
            raise StoreError("the disk is full")
        return real_add(self, messages, **kwargs)

    monkeypatch.setattr(Memory, "add", add)
    first = {"messages": [{"role": "user", "content": "ann's poisoned turn"}], "user_id": "ann", "infer": False}
    memory_lines = [
        {"type": "memory", "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"later{i}")), "memory": f"Fact {i}", "user_id": "bo",
         "created_at": "2024-02-01T08:00:00+00:00"}
        for i in range(9)
    ]
    relation = {"type": "relation", "subject": ["user", "cy"], "relation": "member", "object": ["group", "team"]}
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        # Lines 2-9 are memory lines of another user, written as their batch fills
        # while the turn of line 1 still waits in its own.
        with pytest.raises(ImportLineError) as err:
            m.import_([first, *memory_lines[:8]])
        assert (err.value.line, err.value.later, err.value.summary["added"]) == (1, 9, 8)
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 2)
    with Memory(str(tmp_path / "r.db"), embedder="hashing") as m:
        with pytest.raises(ImportLineError) as err:
            m.import_([first, relation, {**relation, "subject": ["user", "di"]}])
        assert (err.value.line, err.value.later) == (1, 3)


def text_lines(n: int) -> list[dict]:
    """Text lines ({"text": ...}), verbatim, with their own times and metadata; some without a time."""
    return [
        {"text": f"Note {i} about topic{i % 11}", "user_id": USERS[i % 2], "infer": False,
         **({"timestamp": 1_683_561_360.0 + 60 * i} if i % 5 else {}), **({"metadata": {"n": i, "role": "note"}} if i % 3 else {}),
         **({"importance": 0.8} if i < 2 else {})}
        for i in range(n)
    ]


def kept(m: Memory) -> list[tuple]:
    """Every memory as export shows it, but its id, lineage and (for lines without a time) its dates."""
    items = []
    for item in m.export(all_scopes=True):
        if item.get("type", "memory") != "memory":
            continue
        timed = item["metadata"].get("n", 0) % 5 if isinstance(item["metadata"].get("n"), int) else None
        drop = {"id", "lineage"} | ({"created_at", "updated_at"} if timed == 0 or "n" not in item["metadata"] else set())
        items.append(json.dumps({k: v for k, v in item.items() if k not in drop}, sort_keys=True))
    return sorted(items)


def test_text_lines_are_batched_and_stored_as_add_of_each_text_stores_it(backend) -> None:
    lines = text_lines(300)
    with Memory(backend.target, embedder="hashing") as m:
        summary = m.import_(lines)
        assert summary["added"] == 300
        assert summary["calls"] == 4  # each user's first line (its importance), then the rest of its lines
        batched = kept(m)
        kinds = {r["kind"] for r in m.export(all_scopes=True) if r.get("type", "memory") == "memory"}
        again = m.import_(lines)  # the lines with a time are there already
        assert (again["unchanged"], again["added"]) == (240, 60)
    with Memory(backend.fresh(), embedder="hashing") as one:
        for line in lines:
            one.add(line["text"], user_id=line["user_id"], metadata=line.get("metadata"), timestamp=line.get("timestamp"),
                    infer=False, importance=line.get("importance"))
        assert batched == kept(one)
        assert kinds == {r["kind"] for r in one.export(all_scopes=True) if r.get("type", "memory") == "memory"} == {"fact"}
        hits = one.search("Note 7 about topic7", user_id="bo", limit=1)["results"]
    with Memory(backend.fresh(), embedder="hashing") as m:
        m.import_(lines)
        assert m.search("Note 7 about topic7", user_id="bo", limit=1)["results"][0]["memory"] == hits[0]["memory"]


def test_a_bad_text_line_stops_the_import_with_the_text_lines_before_it_written(tmp_path: Path) -> None:
    lines = text_lines(40)
    lines[25] = {**lines[25], "text": "   "}
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        with pytest.raises(ImportLineError, match=r"^line 26: messages"):
            m.import_(lines)
        assert sum(len(m.get_all(user_id=u)["results"]) for u in USERS[:2]) == 25
