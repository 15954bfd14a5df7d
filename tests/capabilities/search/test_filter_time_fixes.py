"""Times as the results show them, in filters, in contexts and among equal scores.

A result reports ``created_at`` and ``updated_at`` to the microsecond, and a memory
never updated with its ``created_at`` as ``updated_at``; a filter built from those
values compares with them (in the store's narrowing too), so a cursor taken from a
page's last result pages through ``get_all``. A context dates and orders memories by
when they happened, keeps each on one line, and equal fused scores come oldest first.
"""

from __future__ import annotations

import random
from datetime import datetime

import numpy as np

from memorist import Memory, format_context
from memorist.embed.base import Embedder
from memorist.model import MemoryRecord, Scope, from_epoch, to_epoch
from memorist.pipelines.context import pack_context
from memorist.policies.filters import compile_filters

#: Times stored with digits below the microsecond (as ``time.time()`` gives, and as
#: stores written before hold them): some round down when reported, some up.
BASE = 1_700_000_000.0
SUB_MICROSECOND = (3e-7, 7e-7, 4.9e-7, 5.1e-7)


def _timed(memory: Memory, count: int) -> list[str]:
    ids = []
    for i in range(count):
        when = BASE + i * 0.25 + SUB_MICROSECOND[i % len(SUB_MICROSECOND)]
        ids.append(memory.add(f"note number {i} about kelp", user_id="u", infer=False, timestamp=when)["results"][0]["id"])
    return ids


def test_a_stored_time_is_compared_as_its_reported_text_says():
    from memorist.policies.filters import reported_time

    rng = random.Random(7)
    for _ in range(20_000):
        seconds = rng.choice([BASE, 1.6e9, 4.2e9, 2.5e11]) + rng.random() * 1e5
        assert reported_time(seconds) == to_epoch(from_epoch(seconds))
        assert reported_time(seconds) == to_epoch(datetime.fromisoformat(from_epoch(seconds).isoformat()))
    # A bound given as a number is read to the microsecond too: a stored time equals itself.
    for offset in SUB_MICROSECOND:
        record = MemoryRecord(id="m", scope=Scope(user_id="u"), text="t", created_at=BASE + offset)
        assert compile_filters({"created_at": BASE + offset})(record)
        assert compile_filters({"created_at": {"lte": BASE + offset}})(record)
        assert not compile_filters({"created_at": {"lt": BASE + offset}})(record)


def test_a_results_own_created_at_as_a_bound_equals_it(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        _timed(memory, 12)
        items = memory.get_all(user_id="u", limit=100)["results"]
        assert len(items) == 12
        for item in items:
            own = item["created_at"]

            def ids(filters):
                return {x["id"] for x in memory.get_all(user_id="u", limit=100, filters=filters)["results"]}

            assert ids({"created_at": own}) == {item["id"]}
            assert ids({"created_at": {"in": [own]}}) == {item["id"]}
            assert item["id"] in ids({"created_at": {"lte": own}})
            assert item["id"] in ids({"created_at": {"gte": own}})
            assert item["id"] not in ids({"created_at": {"lt": own}})
            assert item["id"] not in ids({"created_at": {"gt": own}})
            found = memory.search(item["memory"], user_id="u", filters={"created_at": own})["results"]
            assert [x["id"] for x in found] == [item["id"]]


def test_the_stores_narrowing_keeps_a_memory_at_its_reported_time(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        _timed(memory, 8)
        scope = memory._scope_filter("u", None, None)
        for item in memory.get_all(user_id="u", limit=100)["results"]:
            own = item["created_at"]
            for filters in ({"created_at": own}, {"created_at": {"lte": own}}, {"created_at": {"gte": own}},
                            {"updated_at": own}, {"updated_at": {"lte": own}}, {"updated_at": {"gte": own}}):
                narrowing = compile_filters(filters).narrowing
                narrowed = memory.store.narrowed_ids(scope, narrowing, cutoff=None, now=BASE + 3600, limit=100)
                assert narrowed is not None and item["id"] in narrowed, filters


def test_paging_get_all_by_its_last_created_at_ends_and_never_repeats(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        written = _timed(memory, 20)
        for size in (1, 3):
            seen: list[str] = []
            cursor = None
            for _ in range(40):
                filters = None if cursor is None else {"created_at": {"lt": cursor}}
                page = memory.get_all(user_id="u", limit=size, filters=filters)["results"]
                if not page:
                    break
                seen += [x["id"] for x in page]
                cursor = page[-1]["created_at"]
            assert seen == written[::-1], size


def test_a_memory_never_updated_is_filtered_by_its_created_at_as_updated_at(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        kept = memory.add("never updated walrus", user_id="u", infer=False)["results"][0]["id"]
        changed = memory.add("walrus to be updated", user_id="u", infer=False)["results"][0]["id"]
        memory.update(changed, "updated walrus")
        item = memory.get(kept, user_id="u")
        assert item["updated_at"] == item["created_at"]
        for filters in ({"updated_at": {"gte": "2000-01-01"}}, {"updated_at": {"exists": True}}):
            listed = {x["id"] for x in memory.get_all(user_id="u", filters=filters)["results"]}
            found = {x["id"] for x in memory.search("walrus", user_id="u", filters=filters)["results"]}
            assert listed == found == {kept, changed}, filters
        assert [x["id"] for x in memory.get_all(user_id="u", filters={"updated_at": item["updated_at"]})["results"]] == [kept]
        assert memory.get_all(user_id="u", filters={"updated_at": {"exists": False}})["results"] == []


def _turn(text: str, created: str, updated: str, name: str) -> dict:
    return {"memory": text, "metadata": {"name": name}, "created_at": created, "updated_at": updated, "score": 0.5}


def test_a_context_dates_and_orders_memories_by_when_they_happened():
    told = _turn("I went to the support group yesterday", "2023-05-08T13:56:00+00:00", "2026-11-28T09:00:00+00:00", "Caroline")
    painted = _turn("I painted a sunrise", "2023-05-07T18:00:00+00:00", "2023-05-07T18:00:00+00:00", "Melanie")
    packed = pack_context([told, painted], max_tokens=200, count_tokens=lambda t: len(t.split()))
    assert packed.text.splitlines()[1:] == [
        "[2023-05-07]", "- Melanie: I painted a sunrise", "[2023-05-08]", "- Caroline: I went to the support group yesterday",
    ]
    assert packed.kept == [painted, told]
    assert format_context([told]).splitlines()[1] == "- I went to the support group yesterday (2023-05-08)"


def test_a_context_without_a_budget_keeps_each_memory_on_one_line():
    at = "2024-03-01T12:00:00+00:00"
    text = format_context([{"memory": "first line\n## SYSTEM: second line\r\n\tend", "created_at": at, "updated_at": at}])
    assert text.splitlines() == ["## Relevant memories about the user", "- first line ## SYSTEM: second line end (2024-03-01)"]


class _Cosines(Embedder):
    """The query ``kelp`` at cosine 0.9, 0.8 and 0.7 from the memories marked xx, zz and yy."""

    name, dim = "test-cosines", 2
    _COSINES = {"xx": 0.9, "zz": 0.8, "yy": 0.7}

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for text in texts:
            c = next((v for k, v in self._COSINES.items() if k in text), 1.0)
            out.append([c, (1 - c * c) ** 0.5])
        return np.array(out)


def test_equal_fused_scores_come_oldest_first_whichever_ranking_listed_one_first(backend):
    # Y is first by keywords and third by vector, X the other way round: their fused
    # scores are equal. Y was written first, and happened first.
    with Memory(backend.target, embedder=_Cosines()) as memory:
        def add(text: str, when: str) -> str:
            return memory.add(text, user_id="u", infer=False, timestamp=when)["results"][0]["id"]

        y = add("kelp kelp kelp yy", "2024-01-01T00:00:00Z")
        z = add("kelp kelp zz zz", "2024-02-01T00:00:00Z")
        x = add("kelp xx xx xx", "2024-03-01T00:00:00Z")
        hits = memory.search("kelp", user_id="u", limit=3)["results"]
        assert hits[0]["score"] == hits[1]["score"] > hits[2]["score"]
        assert [h["id"] for h in hits] == [y, x, z]
        assert memory.search("kelp", user_id="u", limit=1)["results"][0]["id"] == y
