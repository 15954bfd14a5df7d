"""Every example on the docs site runs and prints what it says (doc_examples.py says
how a page writes what a block prints)."""

from __future__ import annotations

from pathlib import Path

import doc_examples
import pytest

PAGES = [page for page in doc_examples.pages() if page.name != "README.md"]


@pytest.fixture(scope="module")
def _model_ready() -> None:
    """The embedding model prepared once (its first use may say so on stderr, which a
    transcript does not show), so that every console command sees what a user's
    second command sees."""
    from memorist import Memory

    memory = Memory(":memory:")
    memory.add("warming up", user_id="docs", infer=False)
    memory.close()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(doc_examples.ROOT)))
def test_python_blocks_print_what_the_page_says(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORIST_DB", str(tmp_path / "docs.db"))
    for block in doc_examples.blocks(page, "python"):
        doc_examples.run_python(block)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(doc_examples.ROOT)))
def test_console_blocks_print_what_the_page_says(page: Path, tmp_path: Path, _model_ready: None) -> None:
    env = doc_examples.child_env()
    env.pop("MEMORIST_DB", None)
    env["MEMORIST_DB"] = str(tmp_path / "default.db")
    for block in doc_examples.blocks(page, "console"):
        doc_examples.run_console(block, tmp_path, env)


def test_the_site_shows_many_checked_examples() -> None:
    """The mechanism above proves little if pages stop writing their output beside
    their examples: the site as a whole checks many printed results."""
    promised = sum(
        len(doc_examples.expected_outputs(block.code)) for page in PAGES for block in doc_examples.blocks(page, "python")
    )
    commands = sum(len(doc_examples.console_steps(block)) for page in PAGES for block in doc_examples.blocks(page, "console"))
    assert promised >= 30, promised
    assert commands >= 15, commands


def test_a_wrong_promise_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    right = doc_examples.Block("t:1", "python", "print(1 + 1)\n# 2\n")
    wrong = doc_examples.Block("t:1", "python", "print(1 + 1)\n# 3\n")
    assert doc_examples.run_python(right) == 1
    with pytest.raises(AssertionError, match="printed '2'"):
        doc_examples.run_python(wrong)
    console = doc_examples.Block("t:1", "console", "$ echo hello\nhello\n$ echo again\nwrong\n")
    with pytest.raises(AssertionError, match="echo again"):
        doc_examples.run_console(console, tmp_path, doc_examples.child_env())


def test_ids_and_times_stand_for_any() -> None:
    promised = "ADD  ccb03307-71c3-4be4-b98a-7359c9096985  2026-11-22 19:22  [50b5afc7-…]"
    assert doc_examples.matches("ADD  0a1b2c3d-0000-4111-8222-333344445555  2027-01-02 03:04  [deadbeef-1234]", promised)
    assert not doc_examples.matches("UPDATE  0a1b2c3d-0000-4111-8222-333344445555  2027-01-02 03:04  [x]", promised)
