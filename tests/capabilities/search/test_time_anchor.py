"""retrieval.time_from_latest: a relative time expression counted from the scope's own dates.

An imported conversation from 2023 asked "what did Caroline say in June?" today: counted
from now, "in June" is a June with nothing in it, so the time ranking added nothing.
Counted from the scope's newest memory, it is the conversation's June. Deterministic
hashing embedder throughout.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memorist import Memory
from memorist.config import MemoryConfig, RetrievalConfig


def D(month: int, day: int) -> datetime:
    return datetime(2023, month, day, 15, tzinfo=UTC)


# Caroline speaks in every session, about the same few things, so that only the date
# tells her June turns from the others.
SESSIONS = [
    (D(3, 2), ["I went to the support group again, it was powerful.", "I am painting a sunrise over the lake."]),
    (D(4, 18), ["I went to the beach with friends, it was lovely.", "I am painting the old lighthouse."]),
    (D(5, 5), ["I went to a pottery class, it was relaxing.", "I am painting my grandmother's garden."]),
    (D(6, 9), ["I went to the museum with my niece, it was fun.", "I am painting a portrait of my dog."]),
    (D(6, 28), ["I went to a concert downtown, it was loud.", "I am painting the city at night."]),
]
JUNE = {text for date, said in SESSIONS if date.month == 6 for text in said}
LAST_WEEK = set(SESSIONS[-1][1])  # "last week" (two weeks back, generously) before the newest memory


def _open(tmp_path: Path | str, **retrieval: Any) -> Memory:
    target = str(tmp_path / "t.db") if isinstance(tmp_path, Path) else tmp_path
    return Memory(target, embedder="hashing", config=MemoryConfig(retrieval=RetrievalConfig(**retrieval)))


def _fill(memory: Memory) -> None:
    for date, said in SESSIONS:
        messages = [{"role": "user", "name": "Caroline", "content": t, "timestamp": date.timestamp() + i} for i, t in enumerate(said)]
        memory.add(messages, user_id="u", infer=False)


def _found(memory: Memory, query: str, n: int, **kw: Any) -> set[str]:
    return {r["memory"] for r in memory.search(query, user_id="u", limit=n, **kw)["results"]}


@pytest.mark.parametrize("query, wanted", [("What did Caroline say in June?", JUNE), ("What did Caroline do last week?", LAST_WEEK)])
def test_a_relative_time_is_counted_from_the_scopes_newest_memory(backend: Any, query: str, wanted: set[str]) -> None:
    # Both backends: the newest memory is read through the store contract.
    with _open(backend.target) as memory:
        _fill(memory)
        assert RetrievalConfig().time_from_latest is True  # the default
        assert _found(memory, query, len(wanted)) == wanted
        # The control: counted from now (2026 or later), the window is empty and the
        # same search does not find that period's turns first.
        memory.config.retrieval = dataclasses.replace(RetrievalConfig(), time_from_latest=False)
        assert _found(memory, query, len(wanted)) != wanted


def test_a_reference_time_given_is_kept_even_when_its_window_is_empty(tmp_path: Path) -> None:
    with _open(tmp_path) as memory:
        _fill(memory)
        query = "What did Caroline say in June?"
        # Asked as of March 2024: "in June" is June 2023, found.
        assert _found(memory, query, 4, reference_time="2024-03-01T00:00:00+00:00") == JUNE
        # Asked as of 1 June 2022: "in June" is June 2022, which holds nothing; the caller
        # said when the question is asked, so the window does not move.
        assert _found(memory, query, 4, reference_time="2022-06-01T00:00:00+00:00") != JUNE


def test_a_window_that_holds_memories_from_now_stays_where_it_is(tmp_path: Path) -> None:
    with _open(tmp_path) as memory:
        _fill(memory)
        recent = datetime.now(UTC) - timedelta(days=3)
        memory.add([{"role": "user", "name": "Caroline", "content": "I went to the garden centre, it was calm.", "timestamp": recent.timestamp()}],
                   user_id="u", infer=False)
        # Last week counted from now holds the new turn: it is first, June 2023 is not pulled in.
        results = memory.search("What did Caroline do last week?", user_id="u", limit=1)["results"]
        assert [r["memory"] for r in results] == ["I went to the garden centre, it was calm."]


@pytest.mark.parametrize("query", ["What did Caroline say in May 2023?", "What did Caroline say?"])
def test_an_absolute_date_or_no_time_word_is_not_changed(tmp_path: Path, query: str) -> None:
    with _open(tmp_path) as memory:
        _fill(memory)
        on = [(r["id"], r["score"]) for r in memory.search(query, user_id="u", limit=10)["results"]]
        memory.config.retrieval = dataclasses.replace(RetrievalConfig(), time_from_latest=False)
        off = [(r["id"], r["score"]) for r in memory.search(query, user_id="u", limit=10)["results"]]
        assert on == off


@pytest.mark.parametrize(
    "query, reference",
    [
        ("What happened 5000 years ago?", None),
        ("The pyramids were built 4500 years ago", None),
        ("what did Caroline paint 99999999999 days ago", None),
        ("plans for 31 December 9999", None),
        ("January 1, 0001", None),
        ("What did Caroline say today?", "9999-12-31T12:00:00Z"),
        ("What did Caroline paint this year?", "9999-12-31T23:59:59Z"),
    ],
)
def test_a_time_no_date_holds_is_searched_without_a_window(tmp_path: Path, query: str, reference: str | None) -> None:
    """Before, these raised OverflowError from every search (and so from the CLI, the
    REST service, MCP and the LangChain tools): now the phrase gives no time window."""
    with _open(tmp_path) as memory:
        _fill(memory)
        found = memory.search(query, user_id="u", limit=3, reference_time=reference)["results"]
        assert len(found) == 3
        memory.config.retrieval = dataclasses.replace(RetrievalConfig(), time_weight=0.0)
        assert [r["id"] for r in memory.search(query, user_id="u", limit=3, reference_time=reference)["results"]] == [r["id"] for r in found]

