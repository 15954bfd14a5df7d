"""The documentation site: it builds with ``mkdocs build --strict`` (a broken link, a
page missing from the navigation or a bad docstring fails), it serves only its own
files (no web font, script or stylesheet from elsewhere), and the design documents
Memorist was made from are named on one page, docs/origins.md, and nowhere else."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import doc_examples
import pytest

ROOT = doc_examples.ROOT



@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**doc_examples.child_env(), "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


# src= and href= of the tags that load something (a link to another site is fine).
_LOADS = re.compile(r"<(script|link|img|iframe|source)\b[^>]*?\b(?:src|href)=[\"']?([^\"' >]+)", re.I)
_CSS_URL = re.compile(r"url\(\s*[\"']?([^\"')]+)", re.I)
_IMPORT = re.compile(r"@import\s+[\"']([^\"']+)", re.I)


def _off_site(url: str) -> bool:
    return bool(re.match(r"^(https?:)?//", url.strip()))


def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    assert (site / "index.html").exists()
    for page in sorted((ROOT / "docs").rglob("*.md")):
        rel = page.relative_to(ROOT / "docs").with_suffix("")
        built = site / ("index.html" if rel.name == "index" else rel / "index.html")
        assert built.exists(), f"{page.relative_to(ROOT)} was not built"


def test_no_page_loads_anything_from_another_site(site: Path) -> None:
    found = []
    for html in site.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        for tag, url in _LOADS.findall(text):
            if tag.lower() == "link" and not re.search(
                rf"<link\b[^>]*rel=[\"']?(stylesheet|preload|preconnect|icon|modulepreload)[^>]*{re.escape(url)}", text
            ) and not re.search(rf"<link\b[^>]*{re.escape(url)}[^>]*rel=[\"']?(stylesheet|preload|preconnect|icon|modulepreload)", text):
                continue  # a <link rel="canonical"> or an alternate is a link, not a load
            if _off_site(url):
                found.append(f"{html.relative_to(site)}: <{tag}> {url}")
    for css in site.rglob("*.css"):
        text = css.read_text(encoding="utf-8", errors="replace")
        found += [f"{css.relative_to(site)}: {u}" for u in _CSS_URL.findall(text) + _IMPORT.findall(text) if _off_site(u)]
    assert not found, "the site loads from elsewhere:\n" + "\n".join(found[:20])
    pages = [p.read_text(encoding="utf-8") for p in site.rglob("*.html")]
    assert not any("fonts.googleapis" in text or "fonts.gstatic" in text for text in pages)
    # Material's repository widget makes the reader's browser ask GitHub's API.
    assert not any('data-md-component="source"' in text for text in pages)


def test_the_off_site_check_sees_a_load() -> None:
    page = '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto"><script src="//cdn.example/x.js">'
    assert [url for _, url in _LOADS.findall(page) if _off_site(url)] == [
        "https://fonts.googleapis.com/css?family=Roboto",
        "//cdn.example/x.js",
    ]


# What only the origins page may say: the design documents' names and their words.
_DESIGN_WORDS = re.compile(r"\bspecs? ?0{0,2}[0-4]\b|\bspec(?:ification)? 00\d|LTMBSE|etienne|/spec/", re.I)


def test_the_design_documents_are_named_only_on_the_origins_page() -> None:
    origins = ROOT / "docs" / "origins.md"
    assert len(re.findall(r"\b00[0-4]\b", origins.read_text(encoding="utf-8"))) >= 5
    found = []
    for page in doc_examples.pages():
        if page == origins:
            continue
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if _DESIGN_WORDS.search(line):
                found.append(f"{page.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "name the design documents on docs/origins.md only:\n" + "\n".join(found)


def test_terms_from_research_are_explained_where_they_appear() -> None:
    """PAIR, LoCoMo and DRAGON are names users meet; a page that uses one links to the
    origins page, which explains it."""
    for page in doc_examples.pages():
        text = page.read_text(encoding="utf-8")
        used = [term for term in ("PAIR", "LoCoMo", "DRAGON") if re.search(rf"\b{term}\b", text)]
        if used and page.name != "origins.md":
            assert "origins" in text, f"{page.relative_to(ROOT)} uses {used} without linking to the origins page"
