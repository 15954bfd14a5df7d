"""Context: the prompt block an agent injects before its next turn.

:func:`format_context` renders search results, best first. With ``max_tokens`` it
packs them into that many tokens instead (:func:`pack_context`): whole memories
only, never a fragment of one; near-duplicates once; and short headers, the date
once for all the memories of a day and the speaker's name beside each one, in the
order they happened.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ValidationError

TITLE = "Relevant memories about the user"
ORDERS = ("rank", "value")
#: Two memories of one speaker sharing this share of their words say the same thing.
NEAR_DUPLICATE = 0.85
_WORDS = re.compile(r"\w+")


def _results(results: Any) -> Sequence[Mapping[str, Any]]:
    """The result items to render: the ``results`` list of a search, or the whole
    search result (the mapping that holds it). Anything else is a
    :class:`~memorist.errors.ValidationError` naming ``results``."""
    if isinstance(results, Mapping):
        if "results" not in results:
            raise ValidationError(
                "results", "give the search's results list (search(...)['results']) or the whole search result, "
                f"not a mapping with keys {', '.join(map(repr, list(results)[:5])) or '(none)'}",
            )
        results = results["results"]
    if results is None:
        return []
    if isinstance(results, str | bytes) or not isinstance(results, Iterable):
        raise ValidationError("results", f"must be the search's results (a list of memories), got {type(results).__name__}")
    if not isinstance(results, Sequence):
        results = list(results)
    for i, item in enumerate(results):
        if not isinstance(item, Mapping) or "memory" not in item:
            raise ValidationError(f"results[{i}]", "must be a search result item (a mapping with 'memory')")
    return results


def format_context(
    results: Sequence[Mapping[str, Any]] | Mapping[str, Any],
    *,
    title: str = TITLE,
    max_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> str:
    """A compact block of retrieved memories, ready for a system prompt.

    Without ``max_tokens``: best first, each memory on one line with the date it is
    from (``created_at``), so the model can judge recency. With it: the block :func:`pack_context` builds
    within that many tokens (counted by ``count_tokens``, by default the embedding
    model's tokenizer when installed). Returns an empty string when there is nothing
    to inject. ``results`` is the search's ``results`` list, or the whole search
    result.
    """
    results = _results(results)
    if max_tokens is not None:
        return pack_context(results, max_tokens=max_tokens, count_tokens=count_tokens, title=title).text
    if not results:
        return ""
    lines = [f"## {title}"]
    for item in results:
        when = _date(item)
        lines.append(f"- {_one_line(item)}" + (f" ({when})" if when else ""))
    return "\n".join(lines)


@dataclass(slots=True)
class PackedContext:
    """A context built within a budget: its ``text`` and ``tokens``, the results it
    holds (``kept``, in the order shown), and those left out as near-duplicates
    (``duplicates``) or for want of room (``cut``)."""

    text: str
    tokens: int
    kept: list[Mapping[str, Any]] = field(default_factory=list)
    duplicates: list[Mapping[str, Any]] = field(default_factory=list)
    cut: list[Mapping[str, Any]] = field(default_factory=list)


def _date(item: Mapping[str, Any]) -> str:
    """The day a memory is from: when it happened (``created_at``), not when it was
    last updated (a turn of May 2023 whose metadata changed today still says what
    "yesterday" was in May 2023)."""
    return _time(item)[:10]


def _time(item: Mapping[str, Any]) -> str:
    return str(item.get("created_at") or item.get("updated_at") or "")


def _one_line(item: Mapping[str, Any]) -> str:
    """The memory's text on one line, whatever it held: a newline in it could end the
    block, or start a heading of its own."""
    return " ".join(str(item["memory"]).split())


def _speaker(item: Mapping[str, Any]) -> str:
    meta = item.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name.strip() if isinstance(name, str) else ""


def _line(item: Mapping[str, Any], bullets: bool = True) -> str:
    speaker = _speaker(item)
    text = _one_line(item)
    if not speaker:
        return f"- {text}"
    # Without bullets a turn reads as a transcript line, one token less (see pack_context).
    return f"- {speaker}: {text}" if bullets else f"{speaker}: {text}"


def _words(item: Mapping[str, Any]) -> frozenset[str]:
    """The words a near-duplicate is judged by; a text without any ("🙂🙂", "!!!") is
    judged by its whole text (as shown): only the same text repeats it."""
    text = str(item["memory"])
    words = frozenset(w.casefold() for w in _WORDS.findall(text))
    return words or frozenset({"\x00" + " ".join(text.split())})


def _duplicate(words: frozenset[str], speaker: str, kept: list[tuple[frozenset[str], str]]) -> bool:
    for other, who in kept:
        if who != speaker:
            continue
        if len(words & other) / len(words | other) >= NEAR_DUPLICATE:
            return True
    return False


def pack_context(
    results: Sequence[Mapping[str, Any]] | Mapping[str, Any],
    *,
    max_tokens: int,
    count_tokens: Callable[[str], int] | None = None,
    title: str = TITLE,
    order: str = "rank",
    dedupe: bool = True,
    bullets: bool = True,
) -> PackedContext:
    """Pack search results into a context of at most ``max_tokens`` tokens.

    Results are taken best first (``order="rank"``), or by value per token
    (``"value"``: the score divided by the square root of the line's tokens, so a
    short memory may pass a long one of nearly the same score). Each is kept whole
    if it still fits, else left out while smaller ones may still fit; with
    ``dedupe``, one that repeats a kept memory of the same speaker (most of the same
    words) is left out. The kept ones are shown in the order they happened
    (``created_at``), oldest first, under one ``[YYYY-MM-DD]`` header per day, each
    as ``- Speaker: text``; with ``bullets=False`` a turn is a transcript line,
    ``Speaker: text``, one token less (memories of no speaker keep their bullet). On
    LoCoMo that holds 0.6 points more questions' evidence at 1,000 tokens but 0.2
    fewer at 500, where a different set of memories fits (bench/RESULTS.md, issue
    29): not the default. ``results`` is the search's ``results`` list, or the whole
    search result.
    """
    results = _results(results)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValidationError("max_tokens", f"must be a positive whole number, got {max_tokens!r}")
    if order not in ORDERS:
        raise ValidationError("order", f"must be one of {', '.join(ORDERS)}, got {order!r}")
    if count_tokens is None:
        from ..embed.tokens import token_counter

        count_tokens = token_counter()
    head = f"## {title}"
    used = count_tokens(head)
    packed = PackedContext("", 0)
    if not results or used > max_tokens:
        packed.cut = list(results)
        return packed
    lines = [(i, item, _line(item, bullets)) for i, item in enumerate(results)]
    costs = {i: count_tokens(line) for i, _, line in lines}
    if order == "value":
        scores = [float(item.get("score") or 0.0) for _, item, _ in lines]
        lines.sort(key=lambda t: (-scores[t[0]] / max(costs[t[0]], 1) ** 0.5, t[0]))
    seen: list[tuple[frozenset[str], str]] = []
    days: set[str] = set()
    chosen: list[tuple[int, Mapping[str, Any], str]] = []
    for i, item, line in lines:
        words, speaker = _words(item), _speaker(item)
        if dedupe and _duplicate(words, speaker, seen):
            packed.duplicates.append(item)
            continue
        day = _date(item)
        cost = costs[i] + (count_tokens(f"[{day}]") if day and day not in days else 0)
        if used + cost > max_tokens:
            packed.cut.append(item)
            continue
        used += cost
        days.add(day)
        seen.append((words, speaker))
        chosen.append((i, item, line))
    while True:
        text = _render(head, chosen)
        tokens = count_tokens(text)
        # Lines are counted apart; a tokenizer that merges across line breaks may
        # count their join differently: then the least valuable go until it fits.
        if tokens <= max_tokens or not chosen:
            break
        packed.cut.append(chosen.pop()[1])
    packed.text, packed.tokens = (text, tokens) if chosen else ("", 0)
    packed.kept = [item for _, item, _ in _in_time_order(chosen)]
    return packed


def _in_time_order(chosen: list[tuple[int, Mapping[str, Any], str]]) -> list[tuple[int, Mapping[str, Any], str]]:
    # Undated memories last; within a day by time, then by rank.
    return sorted(chosen, key=lambda t: (not _date(t[1]), _date(t[1]), _time(t[1]), t[0]))


def _render(head: str, chosen: list[tuple[int, Mapping[str, Any], str]]) -> str:
    out = [head]
    day = None
    for _, item, line in _in_time_order(chosen):
        when = _date(item)
        if when and when != day:
            out.append(f"[{when}]")
        day = when
        out.append(line)
    return "\n".join(out)


__all__ = ["ORDERS", "PackedContext", "format_context", "pack_context"]
