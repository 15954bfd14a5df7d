"""Tables print a memory's control characters escaped, as ``--json`` does: a stored
text cannot retitle or recolour the terminal that lists it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist import Memory
from memorist.cli import cli

HOSTILE = "Likes tea \x1b]0;owned\x07 and \x1b[31mred\x1b[0m\x9b2J\x7f\rdone\nnext\tline"


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("MEMORIST_DB", raising=False)
    path = str(tmp_path / "s.db")
    memory = Memory(path, embedder="hashing")
    memory.add(HOSTILE, user_id="alice", infer=False)
    memory.close()
    return path


def run(db: str, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--db", db, "--embedder", "hashing", *args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", [["list"], ["search", "tea"], ["get"], ["history"]])
def test_tables_escape_control_characters(db: str, command: list[str]) -> None:
    mid = json.loads(run(db, "--json", "list", "--user", "alice"))["results"][0]["id"]
    args = [*command, mid] if command[0] in ("get", "history") else [*command, "--user", "alice"]
    out = run(db, *args)
    for raw in ("\x1b", "\x07", "\x9b", "\x7f", "\r"):
        assert raw not in out
    out = re.sub(r"\s+", "", out)  # a narrow column wraps the text
    assert "\\u001b]0;owned\\u0007" in out and "\\u001b[31mred" in out and "\\u009b2J\\u007f\\u000ddone" in out


def test_json_output_is_unchanged(db: str) -> None:
    item = json.loads(run(db, "--json", "list", "--user", "alice"))["results"][0]
    assert item["memory"] == HOSTILE


def test_commands_that_print_stored_words_escape_them_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond tables: the playbook audit prints each bullet's words as a line."""
    from memorist import Playbook

    monkeypatch.delenv("MEMORIST_DB", raising=False)
    path = str(tmp_path / "p.db")
    with Memory(path, embedder="hashing") as memory:
        Playbook(memory).turn("sam", "c1").learn(question="q", lessons=[{"content": HOSTILE, "type": "strategy"}], topic="tea")
    out = run(path, "analyze", "export")
    for raw in ("\x1b", "\x07", "\x9b", "\x7f", "\r"):
        assert raw not in out
    assert "\\u001b]0;owned\\u0007" in out
