"""Context: the prompt block an agent injects before its next turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def format_context(results: Sequence[Mapping[str, Any]], *, title: str = "Relevant memories about the user") -> str:
    """A compact block of retrieved memories, best first, ready for a system prompt.

    Each line carries the date the memory is from, so the model can judge recency.
    Returns an empty string when there is nothing to inject.
    """
    if not results:
        return ""
    lines = [f"## {title}"]
    for item in results:
        when = str(item.get("updated_at") or item.get("created_at") or "")[:10]
        lines.append(f"- {item['memory']}" + (f" ({when})" if when else ""))
    return "\n".join(lines)
