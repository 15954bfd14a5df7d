"""Running the examples of the README and of the documentation site (docs/).

Two kinds of fenced block run, and each says what it prints right beside it:

- ```` ```python ```` blocks are executed, each in a fresh namespace, in a temporary
  working directory. The ``# ...`` comment lines right after a line that calls
  ``print(...)`` are what that call prints.
- ```` ```console ```` blocks are shell transcripts: each ``$ `` line is run by bash
  (``memorist`` being this checkout's CLI), one block in one temporary directory, and
  the lines up to the next ``$ `` line are what it prints (stdout and stderr, in order).

Blocks of any other language (``text``, ``bash``, ``json``) are shown, not run: they
show commands that need a server, a key or a file of the reader's.

In promised output an ellipsis (``…`` or ``...``) stands for any text, and ids and
times that differ per run (a UUID, its first 8 hex digits, a ``YYYY-MM-DD HH:MM``
time) stand for any such value; an id a transcript shows, used by a later command of
the block, is replaced there by the id this run printed in its place.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@dataclass(frozen=True)
class Block:
    source: str  # e.g. "docs/guides/tiers.md:42"
    lang: str
    code: str


def blocks(path: Path, lang: str) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in re.finditer(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M):
        line = text.count("\n", 0, match.start()) + 2
        found.append(Block(f"{path.relative_to(ROOT)}:{line}", lang, match.group(1)))
    return found


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_ID_WRITTEN = re.compile(r"(?<![0-9a-f])([0-9a-f]{8})(?:-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?![0-9a-z]))")
_TIME_WRITTEN = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d")


def _pattern(promised: str) -> tuple[str, list[str]]:
    """The regular expression ``promised`` stands for, and the ids it writes (each
    captured, in order, by a group of the expression)."""
    parts, ids, at = [], [], 0
    tokens = sorted(
        [(m.start(), m.end(), "id") for m in _ID_WRITTEN.finditer(promised)]
        + [(m.start(), m.end(), "time") for m in _TIME_WRITTEN.finditer(promised)]
    )
    for start, end, kind in tokens:
        if start < at:
            continue
        parts.append(re.escape(promised[at:start]))
        if kind == "id":
            ids.append(promised[start:end])
            parts.append(f"({_UUID})" if end - start > 8 else "([0-9a-f]{8})")
        else:
            parts.append(r"\d{4}-\d\d-\d\d \d\d:\d\d")
        at = end
    parts.append(re.escape(promised[at:]))
    pattern = "".join(parts).replace("…", "(?:.*?)").replace(re.escape("..."), "(?:.*?)")
    return pattern, ids


def match_ids(printed: str, promised: str) -> dict[str, str] | None:
    """None if ``printed`` is not what ``promised`` says; else which id (8 hex digits)
    the page wrote stands for which id this run printed."""
    pattern, ids = _pattern(promised)
    found = re.fullmatch(pattern, printed, flags=re.S)
    if found is None:
        return None
    seen = {}
    for written, actual in zip(ids, found.groups(), strict=True):
        seen[written] = actual
        seen[written[:8]] = actual[:8]
    return seen


def matches(printed: str, promised: str) -> bool:
    """Whether ``printed`` is what ``promised`` (as written on the page) says."""
    return match_ids(printed, promised) is not None


def expected_outputs(code: str) -> dict[int, str]:
    """The output a Python snippet promises: the ``# ...`` comment lines right after a
    line that prints, by the printing line's number (1-based, as frames report it)."""
    lines = code.splitlines()
    promised = {}
    for i, line in enumerate(lines):
        if not (line.lstrip().startswith("print(") and line.split("  #")[0].rstrip().endswith(")")):
            continue
        shown = []
        for nxt in lines[i + 1 :]:
            if not nxt.strip().startswith("# "):
                break
            shown.append(nxt.strip()[2:])
        if shown:
            promised[i + 1] = "\n".join(shown)
    return promised


def run_python(block: Block) -> int:
    """Runs one Python block in the current directory; returns how many printed
    outputs it checked. A wrong or missing output is an AssertionError naming it."""
    printed: dict[int, list[str]] = {}

    def record(*args: object, sep: str = " ", **_: object) -> None:
        printed.setdefault(sys._getframe(1).f_lineno, []).append(sep.join(str(a) for a in args))

    exec(compile(block.code, block.source, "exec"), {"__name__": "__docs__", "print": record})
    lines = block.code.splitlines()
    promised = expected_outputs(block.code)
    for line, expected in promised.items():
        outputs = printed.get(line)
        shown = lines[line - 1].strip()
        assert outputs, f"{block.source}: line {line} ({shown!r}) printed nothing"
        assert matches(outputs[0], expected), f"{block.source}: {shown!r} printed {outputs[0]!r}, the page says {expected!r}"
    return len(promised)


def _complete(command: str) -> bool:
    """Whether a shell command has closed its quotes."""
    try:
        shlex.split(command)
    except ValueError:
        return False
    return True


def console_steps(block: Block) -> list[tuple[str, str]]:
    """The ``(command, promised output)`` pairs of a console block; a command goes on
    over the lines that end with a backslash or that a quote it opened spans."""
    steps: list[tuple[str, list[str]]] = []
    lines = block.code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command = line[2:]
            while (command.endswith("\\") or not _complete(command)) and i + 1 < len(lines):
                i += 1
                command += "\n" + lines[i]
            steps.append((command, []))
        else:
            assert steps, f"{block.source}: a console block starts with a `$ ` command"
            steps[-1][1].append(line.rstrip())
        i += 1
    return [(command, "\n".join(out).rstrip("\n")) for command, out in steps]


def run_console(block: Block, cwd: Path, env: dict[str, str]) -> int:
    """Runs a console block's commands in ``cwd``, in order; returns how many it checked.
    A command may start a server in the background and write its pid to a ``*.pid``
    file of ``cwd``: the process is stopped when the block is done, passed or not."""
    shim = cwd / ".memorist-bin"
    shim.mkdir(exist_ok=True)
    (shim / "memorist").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m memorist "$@"\n', encoding="utf-8")
    (shim / "memorist").chmod(0o755)
    env = {**env, "PATH": f"{shim}{os.pathsep}{env.get('PATH', '')}", "PYTHONUNBUFFERED": "1", "COLUMNS": "80"}
    steps = console_steps(block)
    seen: dict[str, str] = {}  # an id the page shows -> the one this run made
    try:
        for command, promised in steps:
            for written in sorted(seen, key=len, reverse=True):
                command = command.replace(written, seen[written])
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=120,
            )
            printed = "\n".join(line.rstrip() for line in done.stdout.splitlines()).rstrip("\n")
            ids = match_ids(printed, promised)
            assert ids is not None, f"{block.source}: `$ {command}` printed\n{printed}\nthe page says\n{promised}"
            seen.update(ids)
    finally:
        for pid_file in cwd.glob("*.pid"):
            with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            pid_file.unlink()
    return len(steps)


def child_env() -> dict[str, str]:
    """The environment a console command runs in: this checkout's package first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    return env
