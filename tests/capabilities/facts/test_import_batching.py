"""`import` of conversation lines at bulk speed: verbatim lines of one scope go in
batched add calls even when each line has its own time and metadata, with the same
memories as line by line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memorist import ImportLineError, Memory
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


def test_the_first_batches_are_small(monkeypatch) -> None:
    sizes: list[int] = []

    def add(messages, **kwargs):
        sizes.append(len(messages))
        return {"results": [{"event": "ADD"} for _ in messages]}

    def importer() -> transfer.Importer:
        return transfer.Importer(None, None, "", add, {"user_id": None, "agent_id": None, "run_id": None})  # type: ignore[arg-type]

    lines = [json.dumps(t) for t in turns(2000)]
    transfer.import_lines(importer(), lines, progress=lambda n: None)  # a progress bar: small first batches
    assert sizes[:4] == [16, 32, 64, 128]
    assert max(sizes) == transfer.IMPORT_BATCH and sum(sizes) == 2000
    sizes.clear()
    transfer.import_lines(importer(), lines)  # nobody watching: whole batches from the start
    assert sizes == [transfer.IMPORT_BATCH] * 4


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
