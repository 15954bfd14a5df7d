"""``memorist import`` and ``memorist export`` at their edges: what they refuse, what
they say, and that a file they write imports again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memorist.cli import cli

ENV_VARS = ("MEMORIST_DB", "MEMORIST_EMBEDDER", "MEMORIST_DECAY_DAYS", "MEMORY_DECAY_DAYS", "MEMORIST_TENANT")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def run(*args: str, code: int = 0, input: str | None = None) -> Result:
    result = CliRunner().invoke(cli, ["--embedder", "hashing", *args], input=input)
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    return result


def write(path: Path, lines: list[dict | str]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines), encoding="utf-8")
    return path


def memory_line(mid: str, text: str, **fields: object) -> dict:
    return {"type": "memory", "id": mid, "memory": text, "created_at": "2024-05-01T09:00:00+00:00", **fields}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "s.db"
    run("--db", str(db), "add", "--user", "alice", "--no-infer", "Likes green tea")
    return db


def count(db: Path, *scope: str) -> int:
    return len(json.loads(run("--db", str(db), "--json", "list", *scope).output)["results"])


# export never writes over the store -----------------------------------------------------------
@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_export_refuses_to_write_over_the_store_or_its_files(store: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    target = Path(f"{store}{suffix}")
    target.touch()
    before = target.read_bytes()
    result = run("--db", str(store), "export", "--all", "-o", str(target), code=1)
    assert "name another file" in result.output and str(target) in result.output
    assert target.read_bytes() == before
    assert count(store, "--user", "alice") == 1


def test_export_refuses_the_store_named_by_url_and_relative_path(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(store.parent)
    result = run("--db", "sqlite:///s.db", "export", "--all", "-o", "./s.db", code=1)
    assert "is the store itself; name another file" in result.output
    assert count(store, "--user", "alice") == 1
    run("--db", "sqlite:///s.db", "export", "--all", "-o", "copy.jsonl")  # another file is fine
    assert (store.parent / "copy.jsonl").read_text(encoding="utf-8").count("\n") == 1
