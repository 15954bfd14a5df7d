"""The reference pages build into a site with ``mkdocs build --strict``, and the Python
API reference renders the docstrings as prose, not as their markup.

The site is built from the pages alone, with the configuration scripts/reference.py
states for them (MKDOCS_CONFIG: what the repository's mkdocs.yml must hold), so a
docstring that breaks the build (a bracket read as a link, a cross-reference to
nothing) or renders its reST roles literally fails here, in the test of the pages.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _config() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("memorist_reference_config", ROOT / "scripts" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.MKDOCS_CONFIG


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    docs = folder / "docs"
    shutil.copytree(ROOT / "docs" / "reference", docs / "reference")
    # The pages link to the origins page (the whole site is built by test_site.py).
    (docs / "origins.md").write_text("# Origins\n", encoding="utf-8")
    (docs / "index.md").write_text("# Memorist\n\nThe reference: [Python](reference/python.md), [CLI](reference/cli.md), "
                                   "[REST](reference/rest.md), [MCP](reference/mcp.md).\n", encoding="utf-8")
    config = _config()
    handler = config["plugins"][-1]["mkdocstrings"]["handlers"]["python"]
    handler["paths"] = [str(ROOT / "src")]
    handler["options"]["extensions"] = [str(ROOT / e) for e in handler["options"]["extensions"]]
    config = {"site_name": "Memorist", "theme": {"name": "material"}, "strict": True,
              "nav": ["index.md", "origins.md", {"Reference": [f"reference/{p}.md" for p in ("python", "cli", "rest", "mcp")]}], **config}
    (folder / "mkdocs.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder / "site")],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    return folder / "site"


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


def test_every_reference_page_builds(site: Path) -> None:
    for name in ("python", "cli", "rest", "mcp"):
        assert (site / "reference" / name / "index.html").is_file()
    assert (site / "reference" / "openapi.json").is_file()  # the schema the REST page links to


def test_the_python_reference_renders_the_docstrings(site: Path) -> None:
    page = (site / "reference" / "python" / "index.html").read_text(encoding="utf-8")
    for anchor in ("memorist.Memory", "memorist.Memory.add", "memorist.Memory.search", "memorist.api.Scoped",
                   "memorist.ace.learning.Learning.reflect", "memorist.capabilities.Tiers.maintain", "memorist.errors.ValidationError"):
        assert f'id="{anchor}"' in page, anchor
    text = _text(site / "reference" / "python" / "index.html")
    # Memory.add's docstring is written once, on the declaration (memorist.api); the page shows it.
    assert "Remember a conversation turn (a string, one message, or a list of messages)." in " ".join(text.split())
    roles = re.findall(r":(?:class|meth|func|attr|mod|data|exc):`", text)
    assert not roles, f"reST roles rendered as text: {roles[:5]}"
    assert ">>>" in text  # the examples are there, as code


def test_the_reference_pages_do_not_name_the_design_documents(site: Path) -> None:
    # What the pages render beyond the docstrings (signatures, defaults, member names)
    # is read too: a former name kept as an alias or a stored default once showed here.
    from test_user_words import offending

    found = {name: lines for name in ("python", "cli", "rest", "mcp")
             if (lines := offending(_text(site / "reference" / name / "index.html")))}
    assert not found, f"a reference page names a design document or code name: {found}"
