"""Prompts as versioned code, each module beside the pydantic schema of its response.

A module holds ``VERSION`` (recorded with every call in the event log), ``SYSTEM``
(the instructions), a response model whose field descriptions are what the model
sees as its output schema, and ``render(...)`` for the input. Changing a prompt is a
reviewable diff and a new ``VERSION``.

==================  ==========================================================  =====
module              role                                                        spec
==================  ==========================================================  =====
``extraction``      facts from a conversation                                   004
``memory_update``   ADD / UPDATE / DELETE / NONE against stored memories        004
``reflection``      what worked, what failed, helpful/harmful bullets            001
``curation``        current bullets + lessons → a delta                          000
``evaluation``      a fresh context judges output against success criteria      003
``consolidation``   similar memories → one that keeps every name, number, date  001
==================  ==========================================================  =====
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any


def normalize(text: str) -> str:
    """Casefolded, accents and punctuation dropped, whitespace collapsed: for
    comparing a model's text with ours."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return " ".join(re.findall(r"\w+", folded))


def numbered(items: Sequence[Any], *, empty: str = "(none)") -> str:
    """``- [0] first`` lines: how ids are shown to a model (small integers, never
    the store's ids)."""
    if not items:
        return empty
    return "\n".join(f"- [{i}] {item}" for i, item in enumerate(items))


def block(tag: str, text: str) -> str:
    """Untrusted input inside a delimited block the instructions refer to."""
    return f"<{tag}>\n{text.strip()}\n</{tag}>"


__all__ = ["block", "normalize", "numbered"]
