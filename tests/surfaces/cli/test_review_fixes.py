"""What an outside review of ``memorist`` found, fixed: each test is a behaviour a user
relies on (a clear one-line error and a non-zero exit, never a traceback; nothing
stored lost; help texts that say what the command does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memorist import Memory
from memorist.cli import cli, main

ENV_VARS = ("MEMORIST_DB", "MEMORIST_EMBEDDER", "MEMORIST_DECAY_DAYS", "MEMORY_DECAY_DAYS", "MEMORIST_TENANT", "MEMORIST_POLICY")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "m.db")
    with Memory(path, embedder="hashing") as m:
        m.add("Alex likes tea", user_id="alex", infer=False)
    return path


def run(db: str, *args: str, code: int = 0, input: str | None = None) -> Result:
    """``memorist --db DB --embedder hashing ARGS``, its exit code checked; a failure is
    one ``error:`` line (or a usage error), never a traceback."""
    result = CliRunner().invoke(cli, ["--db", db, "--embedder", "hashing", *args], input=input)
    assert result.exit_code == code, f"exit {result.exit_code} != {code}\n{result.output}\n{result.exception!r}"
    if code:
        assert isinstance(result.exception, SystemExit), result.exception
        assert "Traceback" not in result.output
    return result


def memories(db: str, user: str = "alex") -> list[str]:
    with Memory(db, embedder="hashing") as m:
        return sorted(r["memory"] for r in m.get_all(user_id=user)["results"])


def error_line(result: Result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith(("error: ", "Error: ")), result.stderr
    return lines[-1]


# 1. a closed stdin, stdout or stderr -----------------------------------------------------
def _main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str, closed: str = "stdin") -> tuple[int, str]:
    """``memorist ARGS`` as the console script runs it, started with ``closed`` closed
    (Python then makes it None); the exit code and what went to stderr."""
    monkeypatch.setattr(sys, closed, None)
    with pytest.raises(SystemExit) as ended:
        main(list(args))
    assert getattr(sys, closed) is None  # the stand-in is gone once the command ends
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return ended.value.code, err


@pytest.mark.parametrize(
    "args",
    [
        ["add", "--user", "alex", "--no-infer", "-"],
        ["trajectory", "start", "--agent", "ag1", "-"],
        ["import", "-"],
        ["playbook", "update", "--agent", "ag1", "pbx", "--file", "-"],
        ["pair", "--task", "t", "--criteria", "c", "--output-file", "-"],
        ["analyze", "interactive"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_reading_a_closed_stdin_is_an_error_saying_so(
    db: str, args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _main(monkeypatch, capsys, "--db", db, "--embedder", "hashing", *args)
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("error: stdin is closed"), err
    assert memories(db) == ["Alex likes tea"]


@pytest.mark.parametrize(
    "args",
    [["delete-all", "--user", "alex"], ["erase", "--user", "alex"], ["reset"]],
    ids=lambda args: args[0],
)
def test_a_question_on_a_closed_stdin_counts_as_no(
    db: str, args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _main(monkeypatch, capsys, "--db", db, "--embedder", "hashing", *args)
    assert code == 1 and err.startswith("error: ") and "--yes" in err, err
    assert memories(db) == ["Alex likes tea"]  # nothing deleted


def test_a_closed_stdout_is_an_error_and_what_was_stored_stays(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _main(monkeypatch, capsys, "--db", db, "--embedder", "hashing", "add", "--user", "alex", "--no-infer", "Alex owns a cat", closed="stdout")
    assert code == 1 and err.startswith("error: stdout is closed") and "kept" in err, err
    assert memories(db) == ["Alex likes tea", "Alex owns a cat"]
    code, err = _main(monkeypatch, capsys, "--db", db, "--json", "list", "--user", "alex", closed="stdout")
    assert code == 1 and err.startswith("error: stdout is closed"), err


def test_a_closed_stderr_still_exits_with_the_error_s_code(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = _main(monkeypatch, capsys, "--db", db, "get", "nonexist", closed="stderr")
    assert code == 1


def test_the_console_script_started_with_stdin_closed(db: str) -> None:
    """The real thing: a shell's ``<&-``."""
    command = [sys.executable, "-m", "memorist", "--db", db, "--embedder", "hashing", "add", "--user", "alex", "--no-infer", "-"]
    ran = subprocess.run(["sh", "-c", 'exec "$@" <&-', "sh", *command], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MEMORIST_DB": ""})
    assert ran.returncode == 1, ran.stderr
    assert ran.stderr.startswith("error: stdin is closed") and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
