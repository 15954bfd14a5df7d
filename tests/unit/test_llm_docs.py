"""The docstring examples of the LLM modules run (none of them makes a network call)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "memorist.llm.base",
    "memorist.llm.openai",
    "memorist.llm.openai_compatible",
    "memorist.llm.gemini",
    "memorist.llm.testing",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0, f"{name} has no example"
