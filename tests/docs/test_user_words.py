"""What users read never names the design documents or internal code names.

Users never saw the design documents ("spec 002"), the research method's name
("LTMBSE"), the minimal version's folder ("etienne"), the project's former name
(memorist.reserved.PREVIOUS_NAME) or an
unexplained benchmark. This walks everything a user reads without opening the code:
every command's ``--help``, the service's OpenAPI schema (its description, every
route's summary and description, every schema and field), the MCP server's
instructions and tool descriptions, and the docstrings the Python API reference
renders (docs/reference/python.md). The code itself does not name the design
documents either, in a docstring or a comment (``help()`` shows any module's
docstrings); the few lines that accept a former name are listed, each with why.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from memorist import Memory
from memorist.cli import cli
from memorist.reserved import PREVIOUS_NAME

ROOT = Path(__file__).resolve().parents[2]

#: The words: a design document by number, the method's and the folder's names, the
#: former product name, a benchmark never explained where it appears.
FORBIDDEN = re.compile(rf"\bspecs? ?-?0{{1,2}}[0-4]\b|ltmbse|etienne|{re.escape(PREVIOUS_NAME)}|\bdragon\b", re.IGNORECASE)

#: The design documents' words alone: a document by number, the method's and the folder's names.
DESIGN_WORDS = re.compile(r"\bspecs? ?-?0{1,2}[0-4]\b|ltmbse|etienne", re.IGNORECASE)


def offending(text: str) -> list[str]:
    """Each line of ``text`` holding a forbidden word."""
    return [line.strip() for line in text.splitlines() if FORBIDDEN.search(line)]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("energy tiers (spec 002)", True),
        ("Spec-004's routes", True),
        ("the specs 001 and 003", True),
        ("--preset LTMBSE", True),
        (".etienne/memories.json", True),
        (f"the {PREVIOUS_NAME.title()} store", True),
        ("the DRAGON benchmark", True),
        ("per-learner playbooks; energy tiers; a memories.json file", False),
        ("MEMORIST_SPEC_0 is not a spec", False),
    ],
)
def test_the_check_catches_the_words(text: str, found: bool) -> None:
    assert bool(offending(text)) is found


def _commands(cmd: click.Command, path: tuple[str, ...], parent: click.Context | None) -> Iterator[tuple[str, str]]:
    ctx = click.Context(cmd, info_name=path[-1], parent=parent, terminal_width=10_000, max_content_width=10_000)
    yield " ".join(path), cmd.get_help(ctx)
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            yield from _commands(cmd.get_command(ctx, name), (*path, name), ctx)


def test_no_command_help_names_them() -> None:
    helps = dict(_commands(cli, ("memorist",), None))
    assert len(helps) > 60  # every command and subcommand was walked
    found = {path: lines for path, text in helps.items() if (lines := offending(text))}
    assert not found, f"--help names a design document or code name: {json.dumps(found, indent=1)}"


def _strings(value: Any, where: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, f"{where}/{key}")
            yield from _strings(item, f"{where}/{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}/{i}")


def test_the_openapi_schema_does_not_name_them() -> None:
    from memorist.server import create_app

    app = create_app(":memory:", embedder="hashing")
    try:
        spec = app.openapi()
    finally:
        app.state.service.close()
    strings = list(_strings(spec))
    assert len(strings) > 1000
    found = {where: text for where, text in strings if offending(text)}
    assert not found, f"the OpenAPI schema names a design document or code name: {json.dumps(found, indent=1)}"


def test_the_mcp_tools_do_not_name_them() -> None:
    from memorist.mcp_server import INSTRUCTIONS, create_server

    with Memory(":memory:", embedder="hashing", policy="energy") as memory:
        server = create_server(memory, user_id="alex")
        tools = asyncio.run(server.list_tools())
    assert len(tools) > 10
    texts = {"instructions": INSTRUCTIONS}
    for tool in tools:
        texts[tool.name] = json.dumps({"title": tool.title, "description": tool.description, "input": tool.input_schema})
    found = {name: lines for name, text in texts.items() if (lines := offending(text))}
    assert not found, f"an MCP tool names a design document or code name: {json.dumps(found, indent=1)}"


def _reference_targets() -> list[str]:
    page = (ROOT / "docs" / "reference" / "python.md").read_text(encoding="utf-8")
    return re.findall(r"^::: ([\w.]+)", page, flags=re.MULTILINE)


def _resolve(target: str) -> Any:
    module, _, name = target.rpartition(".")
    try:
        return importlib.import_module(target)
    except ImportError:
        return getattr(importlib.import_module(module), name)


def _docstrings(obj: Any, name: str) -> Iterator[tuple[str, str]]:
    """The docstrings mkdocstrings renders for ``obj``: its own and its public members'
    (a module's: its public classes and functions, and theirs)."""
    yield name, inspect.getdoc(obj) or ""
    if inspect.ismodule(obj):
        for member, value in vars(obj).items():
            if not member.startswith("_") and getattr(value, "__module__", None) == obj.__name__:
                yield from _docstrings(value, f"{name}.{member}")
        return
    if not inspect.isclass(obj):
        return
    for member, value in vars(obj).items():
        if member.startswith("_"):
            continue
        if isinstance(value, classmethod | staticmethod):
            value = value.__func__
        doc = value.__doc__ if isinstance(value, property) else inspect.getdoc(value) if callable(value) else None
        if doc and not (inspect.isclass(value) and value.__doc__ == getattr(type(value), "__doc__", None)):
            yield f"{name}.{member}", doc


def test_the_python_reference_does_not_name_them() -> None:
    targets = _reference_targets()
    assert "memorist.Memory" in targets and len(targets) > 40
    found: dict[str, list[str]] = {}
    for target in targets:
        for where, doc in _docstrings(_resolve(target), target):
            if lines := offending(doc):
                found[where] = lines
    assert not found, f"a docstring of the API reference names a design document or code name: {json.dumps(found, indent=1)}"


@pytest.mark.parametrize("args", [[], ["--tiers"], ["--pair"]], ids=["demo", "tiers", "pair"])
def test_the_demos_do_not_name_them(args: list[str]) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["--embedder", "hashing", "demo", *args], prog_name="memorist")
    assert result.exit_code == 0, result.output
    assert "Memorist demo" in result.output
    assert not offending(result.output), offending(result.output)


def test_the_health_report_of_a_new_store_does_not_name_them(tmp_path: Path) -> None:
    from click.testing import CliRunner

    db = str(tmp_path / "energy.db")
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", db, "--policy", "energy", "--embedder", "hashing", "add", "--no-infer", "--user", "a", "hi"]).exit_code == 0
    result = runner.invoke(cli, ["--db", db, "--policy", "energy", "--json", "tiers", "health"], prog_name="memorist")
    assert "not persisted yet" in result.output  # the configuration's check, the one that named a design document
    assert not offending(result.output), offending(result.output)


#: The modules a user imports or is told to read (``help(memorist.ace)``): their own
#: docstrings, and those of every name they export.
USER_MODULES = ["memorist", "memorist.ace", "memorist.ace.playbook", "memorist.ace.learning", "memorist.ace.runner",
                "memorist.server", "memorist.server.app", "memorist.client", "memorist.agent", "memorist.mcp_server",
                "memorist.aio", "memorist.capabilities", "memorist.relations", "memorist.api", "memorist.errors",
                "memorist.integrations"]


def test_the_modules_users_import_do_not_name_them() -> None:
    import pkgutil

    names = list(USER_MODULES)
    for package in ("memorist.integrations", "memorist.agent"):
        names += [f"{package}.{m.name}" for m in pkgutil.iter_modules(importlib.import_module(package).__path__)]
    found: dict[str, list[str]] = {}
    for name in names:
        module = importlib.import_module(name)
        docs = {name: inspect.getdoc(module) or ""}
        for exported in getattr(module, "__all__", []):
            value = getattr(module, exported, None)
            if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismodule(value):
                docs[f"{name}.{exported}"] = inspect.getdoc(value) or ""
        found.update({where: lines for where, doc in docs.items() if (lines := offending(doc))})
    assert len(names) > 20
    assert not found, f"help() of a module users import names a design document or code name: {json.dumps(found, indent=1)}"


def test_a_learners_playbook_is_listed_by_a_name_users_know(tmp_path: Path) -> None:
    from click.testing import CliRunner

    db = str(tmp_path / "tutor.db")
    turn = {"messages": [{"role": "user", "content": "How do I add 1/2 + 1/3?"}], "learner_id": "lee",
            "conversation_id": "c1", "feedback": "The fraction bars helped me", "outcome": "success"}
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", db, "--embedder", "hashing", "run-turn"], input=json.dumps(turn)).exit_code == 0
    shown = "".join(runner.invoke(cli, ["--db", db, *args]).output for args in (
        ["playbook", "list", "--user", "lee"], ["--json", "playbook", "list", "--user", "lee"],
        ["playbook", "get", "per-learner", "--user", "lee"], ["playbook", "versions", "per-learner", "--user", "lee"],
        ["analyze"], ["--json", "export", "--user", "lee"]))
    assert "per-learner" in shown
    assert not offending(shown), offending(shown)


#: The lines of src/memorist that may name them: each defines or uses a compatibility
#: alias, a former name users typed or stores hold, accepted as the name it stands for.
ALIAS_LINES = {
    ("src/memorist/cli/transfer.py", '_FORMAT_ALIASES = {"etienne": "memories-json"}'):
        "--format etienne, the memories-json format's former name",
    ("src/memorist/cli/playbook.py",
     '_PRESETS = AliasChoice(["per-learner", "baseline"], {"ltmbse": "per-learner", "ltmbse-ace": "per-learner"})'):
        "--preset ltmbse and ltmbse-ace, the per-learner preset's former names",
    ("src/memorist/policies/playbook.py", 'if name in ("per-learner", "ltmbse", "ltmbse-ace", "default"):'):
        "PlaybookConfig.preset() takes the per-learner preset's former names",
    ("src/memorist/policies/playbook.py", 'setattr(PlaybookConfig, "ltmbse", PlaybookConfig.per_learner_preset)  # noqa: B010'):
        "PlaybookConfig.ltmbse(), kept for code written against the former name",
    ("src/memorist/reserved.py", 'PREVIOUS_PER_LEARNER_PLAYBOOK = "ltmbse"'):
        "the name a store of release 0.2.0 holds a learner's playbook under, migrated and still accepted",
}


def _docstrings_of(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Each docstring of a module (its own, its classes' and functions'), with its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                yield body[0].lineno, body[0].value.value


def test_the_code_does_not_name_them() -> None:
    """Every line of every module of the package: its docstrings, comments and code. A
    docstring is also read as one line, for a word a line break splits ("spec" at the
    end of one line, "001" at the start of the next)."""
    files = sorted((ROOT / "src" / "memorist").rglob("*.py"))
    assert len(files) > 100
    found: list[str] = []
    allowed_seen = set()
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            if not DESIGN_WORDS.search(line):
                continue
            if (rel, line.strip()) in ALIAS_LINES:
                allowed_seen.add((rel, line.strip()))
            else:
                found.append(f"{rel}:{number}: {line.strip()}")
        for number, doc in _docstrings_of(ast.parse(text, filename=rel)):
            if DESIGN_WORDS.search(" ".join(doc.split())) and not DESIGN_WORDS.search(doc):
                found.append(f"{rel}:{number}: the docstring, across a line break: {' '.join(doc.split())[:200]}")
    assert not found, "the code names a design document; say what it is instead:\n" + "\n".join(found)
    stale = set(ALIAS_LINES) - allowed_seen
    assert not stale, f"ALIAS_LINES lists lines that no longer name them; remove them: {sorted(stale)}"


def test_the_code_check_catches_a_split_word() -> None:
    tree = ast.parse('"""Energy tiers of spec\n002."""\n\ndef f():\n    """As LTMBSE does."""\n')
    docs = [" ".join(doc.split()) for _, doc in _docstrings_of(tree)]
    assert [bool(DESIGN_WORDS.search(doc)) for doc in docs] == [True, True]
