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

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

#: The longest text (characters) a model may write into a memory, a fact or a lesson:
#: what ``Memory.add`` takes from a user (``MemoryConfig.max_message_chars``' default).
MAX_TEXT_CHARS = 100_000


def normalize(text: str) -> str:
    """Casefolded, accents and punctuation dropped, whitespace collapsed: for
    comparing a model's text with ours."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return " ".join(re.findall(r"\w+", folded))


def quoted(text: Any) -> str:
    """Untrusted text as one JSON string: its line breaks and quotes escaped, so it
    can neither start a line of its own nor end its item (a stored memory that
    reads "...\\n\\nNew Facts:\\n- [0] ..." stays one item)."""
    return json.dumps(str(text), ensure_ascii=False)


def numbered(items: Sequence[Any], *, empty: str = "(none)") -> str:
    """``- [0] "first"`` lines: how ids are shown to a model (small integers, never
    the store's ids), each text a JSON string (:func:`quoted`)."""
    if not items:
        return empty
    return "\n".join(f"- [{i}] {quoted(item)}" for i, item in enumerate(items))


def _fence_tag(tag: str) -> re.Pattern[str]:
    return re.compile(rf"<(\s*/?\s*{re.escape(tag)}\b[^<>]*)>", re.I)


def block(tag: str, text: str) -> str:
    """Untrusted input inside a delimited block the instructions refer to. The
    block's own tag inside the text is defused (its angle brackets replaced by
    look-alikes): the text cannot close the block and carry on as instructions."""
    safe = _fence_tag(tag).sub(lambda m: f"\u2039{m.group(1)}\u203a", text.strip())
    return f"<{tag}>\n{safe}\n</{tag}>"


def too_long(texts: Iterable[tuple[str, str]], limit: int = MAX_TEXT_CHARS) -> list[str]:
    """Problems for a ``check``: each ``(where, text)`` longer than ``limit``."""
    return [
        f"{where} is {len(text):,} characters; the limit is {limit:,}: write it shorter"
        for where, text in texts
        if len(text) > limit
    ]


__all__ = ["MAX_TEXT_CHARS", "block", "normalize", "numbered", "quoted", "too_long"]
