"""Searches with a filter: the best memories that pass it, found without reading every
memory of the scope when the filter keeps a fair share of them.

The rankings are read as deep as an unfiltered search reads them; only when too few
of the memories they bring pass the filter are they read deeper (eight times, and so
on), until enough pass or the scope has nothing more. So a filter that keeps every
memory gives what no filter gives, and a filter keeping a few memories still finds
them, however low they rank. Before reading deeper than eight times, the store is
asked to check the filter's conditions itself: a filter keeping a few memories, or
none, of a large scope then reads those few, not the scope.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from memorist import Memory

WORDS = ["kayak", "pottery", "sourdough", "chess", "lighthouse", "theremin", "greyhound", "marathon", "orchard", "violin"]
QUERIES = ["kayak trip on the lake", "pottery class", "baking sourdough bread", "a chess game", "the old lighthouse"]


def group(i: int) -> int:
    """One of 50 groups, whatever the memory's words."""
    return random.Random(i).randrange(50)


def fill(memory: Memory, count: int, *, user: str = "maya") -> None:
    for start in range(0, count, 1000):
        memory.add(
            [{"role": "user", "content": f"Maya {WORDS[i % 10]} {WORDS[(i // 10) % 10]} note {i}", "metadata": {"n": i, "group": group(i)}}
             for i in range(start, min(count, start + 1000))],
            user_id=user,
            infer=False,
        )


def reads(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many records each search reads from the store (its get_many calls), appended to."""
    counted: list[int] = []
    get_many = memory.store.get_many

    def counting(ids: Any, *args: Any, **kwargs: Any) -> Any:
        counted.append(len(ids))
        return get_many(ids, *args, **kwargs)

    monkeypatch.setattr(memory.store, "get_many", counting)
    return counted


def found(memory: Memory, query: str, **kwargs: Any) -> list[tuple[str, float]]:
    return [(r["id"], r["score"]) for r in memory.search(query, user_id="maya", **kwargs)["results"]]


def test_a_filter_that_keeps_every_memory_gives_what_no_filter_gives(backend) -> None:
    with Memory(backend.target, embedder="hashing") as memory:
        fill(memory, 1500)
        for query in QUERIES:
            for limit in (1, 10, 40):
                assert found(memory, query, limit=limit, filters={"n": {"gte": 0}}) == found(memory, query, limit=limit)


def test_where_the_rankings_hold_the_whole_scope_the_filter_keeps_the_unfiltered_order(backend) -> None:
    with Memory(backend.target, embedder="hashing") as memory:
        fill(memory, 80)
        for query in QUERIES:
            everything = memory.search(query, user_id="maya", limit=80)["results"]
            passing = [r["id"] for r in everything if r["metadata"]["group"] in (3, 7, 11)]
            got = [r["id"] for r in memory.search(query, user_id="maya", limit=5, filters={"group": {"in": [3, 7, 11]}})["results"]]
            assert got == passing[:5]


def test_a_filter_keeping_two_percent_of_the_memories_reads_a_few_hundred_not_all(backend, monkeypatch: pytest.MonkeyPatch) -> None:
    with Memory(backend.target, embedder="hashing") as memory:
        fill(memory, 5000)
        counted = reads(memory, monkeypatch)
        for query in QUERIES:
            counted.clear()
            results = memory.search(query, user_id="maya", limit=10, filters={"group": 7})["results"]
            assert len(results) == 10 and all(r["metadata"]["group"] == 7 for r in results)
            assert sum(counted) <= 1500, f"{query!r}: {sum(counted)} memories read for 10 results"


def test_a_filter_keeping_one_memory_finds_it_however_low_it_ranks(backend) -> None:
    with Memory(backend.target, embedder="hashing") as memory:
        fill(memory, 3000)
        memory.add("Zebra crossing by the harbour", user_id="maya", metadata={"n": -1, "group": 99}, infer=False)
        for query in QUERIES:
            results = memory.search(query, user_id="maya", limit=5, filters={"group": 99})["results"]
            assert [r["memory"] for r in results] == ["Zebra crossing by the harbour"]
        assert memory.search("kayak", user_id="maya", filters={"group": 1000})["results"] == []


def test_a_filter_keeping_none_or_a_few_memories_reads_those_not_the_scope(backend, monkeypatch: pytest.MonkeyPatch) -> None:
    with Memory(backend.target, embedder="hashing") as memory:
        fill(memory, 6000)
        memory.add("Zebra crossing by the harbour", user_id="maya", metadata={"n": -1, "group": 99, "tag": "rare"}, infer=False)
        memory.add("Kayak pottery at dawn", user_id="maya", metadata={"n": -2, "group": 99, "tag": ["rare", "x"]}, infer=False)
        counted = reads(memory, monkeypatch)
        cases = [
            ({"group": 1000}, set()),
            ({"tag": "none-such"}, set()),
            ({"group": 99}, {"Zebra crossing by the harbour", "Kayak pottery at dawn"}),
            ({"tag": "rare", "n": {"lt": -1}}, {"Kayak pottery at dawn"}),  # an element of a list, and a comparison
            ({"OR": [{"n": -1}, {"group": 1000}]}, {"Zebra crossing by the harbour"}),
            ({"group": 99, "NOT": {"n": -1}}, {"Kayak pottery at dawn"}),  # a NOT the store does not check
        ]
        for query in QUERIES:
            for filters, expected in cases:
                counted.clear()
                results = memory.search(query, user_id="maya", limit=5, filters=filters)["results"]
                assert {r["memory"] for r in results} == expected, filters
                # The first two readings (vector and keyword rankings 100, then 800
                # deep), then the few the store kept: not the scope's 6,002.
                assert sum(counted) <= 1800 + len(expected), f"{filters}: {sum(counted)} memories read"
        for filters, expected in cases:
            counted.clear()
            assert {r["memory"] for r in memory.get_all(user_id="maya", filters=filters)["results"]} == expected
            assert sum(counted) <= len(expected) + 2, f"{filters}: {sum(counted)} memories read to list {len(expected)}"


def test_a_filtered_listing_is_newest_first_and_reads_little_more_than_its_page(backend, monkeypatch: pytest.MonkeyPatch) -> None:
    with Memory(backend.target, embedder="hashing") as memory:
        fill(memory, 3000)
        newest = [r["id"] for r in memory.get_all(user_id="maya", limit=3000)["results"]]
        listed = memory.store.list
        seen: list[int] = []

        def counting(*args: Any, **kwargs: Any) -> Any:
            rows = listed(*args, **kwargs)
            seen.append(len(rows))
            return rows

        monkeypatch.setattr(memory.store, "list", counting)
        by_id = {r["id"]: r for r in memory.get_all(user_id="maya", limit=3000)["results"]}
        for filters in ({"n": {"gte": 0}}, {"group": {"in": [1, 2, 3, 4, 5]}}, {"NOT": {"group": 7}}):
            seen.clear()
            page = [r["id"] for r in memory.get_all(user_id="maya", limit=20, filters=filters)["results"]]
            keep = [mid for mid in newest if _passes(by_id[mid]["metadata"], filters)]
            assert page == keep[:20], filters
            assert sum(seen) <= 1000, f"{filters}: {sum(seen)} memories listed for a page of 20"
        # A filter the store does not check, keeping nothing: each memory listed about once.
        seen.clear()
        assert memory.get_all(user_id="maya", limit=5, filters={"NOT": {"n": {"gte": 0}}})["results"] == []
        assert sum(seen) <= 3100, f"{sum(seen)} memories listed to find none of 3,000"


@pytest.mark.sqlite_only("SQLite counts its scan as it goes (a progress handler); PostgreSQL counts the ids it returns")
def test_the_stores_check_of_a_filter_counts_on_the_work_meter(backend) -> None:
    from memorist.work import metered

    with Memory(backend.target, embedder="hashing") as memory:
        fill(memory, 6000)
        with metered() as meter:
            assert memory.get_all(user_id="maya", filters={"group": 1000})["results"] == []
        assert meter.units >= 100, meter.units  # (0 when the scan went uncounted)


def test_a_filtered_listing_pages_through_memories_of_one_moment(backend) -> None:
    with Memory(backend.target, embedder="hashing") as memory:
        memory.add([{"role": "user", "content": f"Maya note {i}", "timestamp": "2024-05-01T10:00:00Z", "metadata": {"n": i}}
                    for i in range(300)], user_id="maya", infer=False)
        newest = [r["id"] for r in memory.get_all(user_id="maya", limit=300)["results"]]
        by_id = {r["id"]: r["metadata"]["n"] for r in memory.get_all(user_id="maya", limit=300)["results"]}
        for limit in (5, 20, 300):
            page = [r["id"] for r in memory.get_all(user_id="maya", limit=limit, filters={"NOT": {"n": {"gte": 250}}})["results"]]
            assert page == [mid for mid in newest if by_id[mid] < 250][:limit]


@pytest.mark.parametrize("terms", [False, True], ids=["no ranking terms", "a recency term"])
def test_narrowed_and_unnarrowed_filters_keeping_the_same_memories_give_the_same_results(backend, terms: bool) -> None:
    from memorist.config import MemoryConfig, RetrievalConfig
    from memorist.policies.ranking import RankingPolicy, recency_term

    # Eight candidates a ranking: the deeper readings, and the store's check, come
    # early; with ranking terms every candidate read is ranked again.
    options: dict[str, Any] = {"config": MemoryConfig(retrieval=RetrievalConfig(candidates=8))}
    if terms:
        options["ranking"] = RankingPolicy(terms=((0.05, recency_term(0.01)),))
    with Memory(backend.target, embedder="hashing", **options) as memory:
        fill(memory, 3000)
        for i in range(12):
            memory.add(f"Maya {WORDS[i % 10]} and the harbour {i}", user_id="maya", metadata={"n": -1 - i, "group": 99}, infer=False)
        for query in QUERIES:
            for limit in (1, 3, 10):
                for filters in ({"group": 99}, {"group": 7}, {"group": {"in": [7, 99]}}):
                    # The store checks the first, never the second (NOT), which keeps the same memories.
                    narrowed = found(memory, query, limit=limit, filters=filters)
                    checked = found(memory, query, limit=limit, filters={"NOT": {"NOT": filters}})
                    assert [m for m, _ in narrowed] == [m for m, _ in checked], (query, limit, filters)
                    # (A recency term counts from the moment of each call: scores a hair apart.)
                    assert [s for _, s in narrowed] == pytest.approx([s for _, s in checked], abs=1e-4 if terms else 0)


def _passes(metadata: dict[str, Any], filters: dict[str, Any]) -> bool:
    if "NOT" in filters:
        return metadata["group"] != filters["NOT"]["group"]
    if "n" in filters:
        return metadata["n"] >= 0
    return metadata["group"] in filters["group"]["in"]


def test_with_a_threshold_the_rankings_are_not_read_below_it(backend, monkeypatch: pytest.MonkeyPatch) -> None:
    with Memory(backend.target, embedder="hashing") as memory:
        fill(memory, 3000)
        counted = reads(memory, monkeypatch)
        # Nothing passes the filter: without a threshold every memory is read; with
        # one, no deeper than the first memory less similar than it.
        assert memory.search("kayak trip", user_id="maya", filters={"group": 1000}, threshold=0.9)["results"] == []
        assert sum(counted) <= 1000


@pytest.mark.sqlite_only("the approximate graph is the SQLite store's in-process index")
def test_a_filter_and_a_threshold_find_every_memory_they_keep_in_a_space_with_a_graph(
    backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A space's approximate graph may skip memories: when too few pass, the last
    reading of the vector ranking is exact."""
    import time

    from memorist.pipelines.search import reported_similarity
    from memorist.store import vector_index

    monkeypatch.setattr(vector_index, "DEFAULT_THRESHOLD", 500)
    with Memory(backend.target, embedder="hashing") as memory:
        fill(memory, 3000)
        scope = memory._scope_filter("maya", None, None)
        index = memory.store._index(*memory.store._spaces(scope)[0])  # type: ignore[attr-defined]
        deadline = time.monotonic() + 60
        while index._ann is None or index._ann.covered() < len(index):
            assert time.monotonic() < deadline, "the graph was not built in a minute"
            memory.search("kayak", user_id="maya")  # (searches let the graph's builder go on)
            time.sleep(0.05)
        records = memory.store.list(scope, now=time.time())
        kept = [1, 2, 3]
        for query, threshold in (("zzzz unrelated", 0.12), ("orchard violin lake", 0.4), ("kayak kiln", 0.34), ("chess club apples", 0.29)):
            similarity = memory.store.similarities(scope, memory._query_vector(query), [r.id for r in records])
            truth = {r.id for r in records if r.metadata["group"] in kept and reported_similarity(similarity[r.id]) >= threshold}
            assert 0 < len(truth) < 10, (query, len(truth))
            found_ids = {r["id"] for r in memory.search(query, user_id="maya", limit=10, filters={"group": {"in": kept}},
                                                        threshold=threshold)["results"]}
            assert found_ids == truth, query
