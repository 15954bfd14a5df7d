"""SpaceIndex: the in-process index of one space (exact cosine and BM25)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from memorist.policies.text import index_terms
from memorist.store import vector_index
from memorist.store.vector_index import Row, SpaceIndex

DIM = 8


def unit(i: int, dim: int = DIM) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    v[i % dim] = 1.0
    return v


def mixed(weights: dict[int, float]) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    for i, w in weights.items():
        v[i] = w
    return v / np.linalg.norm(v)


def upsert(idx: SpaceIndex, rows: list[Row], vectors: np.ndarray) -> None:
    """Attach each vector to its row, as the store does, and upsert them."""
    idx.upsert([dataclasses.replace(r, vector=v) for r, v in zip(rows, vectors, strict=True)])


def row(mid: str, run: str = "", at: float = 100.0, valid_to: float | None = None) -> Row:
    return Row(mid, run, at, valid_to)


def test_empty_index_returns_nothing():
    idx = SpaceIndex(DIM, 0)
    assert idx.search(unit(0), k=5) == []
    assert len(idx) == 0


def test_upsert_and_search_best_first():
    idx = SpaceIndex(DIM, 0)
    upsert(idx, [row("a"), row("b"), row("c")], np.stack([unit(0), mixed({0: 1, 1: 1}), unit(1)]))
    hits = idx.search(unit(0), k=2)
    assert [h[0] for h in hits] == ["a", "b"]
    assert hits[0][1] == pytest.approx(1.0)
    assert hits[1][1] == pytest.approx(2 ** -0.5, rel=1e-5)
    assert len(idx) == 3


def test_k_none_returns_all_sorted():
    idx = SpaceIndex(DIM, 0)
    vecs = [mixed({0: w, 1: 1.0}) for w in (0.1, 3.0, 1.0, 0.0)]
    upsert(idx, [row(f"m{i}") for i in range(4)], np.stack(vecs))
    hits = idx.search(unit(0), k=None)
    assert [h[0] for h in hits] == ["m1", "m2", "m0", "m3"]
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)


def test_k_larger_than_size_returns_all():
    idx = SpaceIndex(DIM, 0)
    upsert(idx, [row("a"), row("b")], np.stack([unit(0), unit(1)]))
    assert {h[0] for h in idx.search(unit(0), k=50)} == {"a", "b"}


def test_upsert_of_existing_id_replaces_vector_and_times():
    idx = SpaceIndex(DIM, 0)
    upsert(idx, [row("a", at=1.0), row("b")], np.stack([unit(0), unit(1)]))
    upsert(idx, [row("a", at=500.0)], np.stack([unit(1)]))
    assert len(idx) == 2
    hits = dict(idx.search(unit(1), k=None))
    assert hits["a"] == pytest.approx(1.0)
    assert hits["b"] == pytest.approx(1.0)
    assert dict(idx.search(unit(0), k=None))["a"] == pytest.approx(0.0)
    # The replaced row's time counts, not the first one.
    assert {h[0] for h in idx.search(unit(1), k=None, cutoff=400.0)} == {"a"}


def test_remove_hides_rows_and_can_be_re_added():
    idx = SpaceIndex(DIM, 0)
    upsert(idx, [row("a"), row("b")], np.stack([unit(0), unit(1)]))
    idx.remove(["a", "never-there"])
    assert [h[0] for h in idx.search(unit(0), k=None)] == ["b"]
    assert len(idx) == 1
    upsert(idx, [row("a")], np.stack([unit(2)]))
    assert idx.search(unit(2), k=1)[0][0] == "a"


def test_masks_run_cutoff_and_valid_to():
    idx = SpaceIndex(DIM, 0)
    upsert(idx, 
        [row("r1-old", "r1", at=10.0), row("r1-new", "r1", at=200.0), row("r2", "r2", at=200.0),
         row("expired", "", at=200.0, valid_to=150.0), row("expiring", "", at=200.0, valid_to=300.0)],
        np.stack([unit(0)] * 5),
    )
    ids = lambda **kw: {h[0] for h in idx.search(unit(0), k=None, **kw)}  # noqa: E731
    assert ids(run_id="r1") == {"r1-old", "r1-new"}
    assert ids(cutoff=100.0) == {"r1-new", "r2", "expired", "expiring"}
    assert ids(now=160.0) == {"r1-old", "r1-new", "r2", "expiring"}
    assert ids(now=300.0) == {"r1-old", "r1-new", "r2"}  # valid_to is exclusive
    assert ids(run_id="r1", cutoff=100.0, now=160.0) == {"r1-new"}
    assert ids() == {"r1-old", "r1-new", "r2", "expired", "expiring"}


def test_a_runs_rows_follow_every_write_between_two_searches():
    # A run's (and a speaker's) rows are kept as a mask between searches: each write
    # of the index, one row or many, a removal, a compaction, an image, must show.
    idx = SpaceIndex(DIM, 0)
    upsert(idx, [row("a", "r1"), row("b", "r2")], np.stack([unit(0)] * 2))
    ids = lambda index=idx: {h[0] for h in index.search(unit(0), k=None, run_id="r1")}  # noqa: E731
    assert ids() == ids() == {"a"}
    upsert(idx, [row("c", "r1")], np.stack([unit(0)]))  # one row
    assert ids() == {"a", "c"}
    upsert(idx, [row(f"m{i}", "r1" if i % 2 else "r2") for i in range(50)], np.stack([unit(0)] * 50))  # many
    assert ids() == {"a", "c"} | {f"m{i}" for i in range(1, 50, 2)}
    upsert(idx, [row("a", "r2")], np.stack([unit(0)]))  # a row moved to another run
    assert "a" not in ids()
    idx.remove([f"m{i}" for i in range(50)])  # compacts: rows renumbered
    assert ids() == {"c"}
    copy = SpaceIndex.from_image(idx.image(), 0, 0)
    assert ids(copy) == {"c"}
    assert {h[0] for h in idx.search(unit(0), k=None, run_id="r2")} == {"a", "b"}


def test_a_whole_ranking_leaves_out_rows_appended_while_it_multiplied(monkeypatch):
    # A large space multiplies with the store's lock let go; a write may append rows
    # meanwhile. The ranking is of the rows it scored (it raised a "damaged" error).
    from contextlib import contextmanager

    monkeypatch.setattr(vector_index, "_COARSE_ROWS", 32)
    idx = SpaceIndex(DIM, 0)
    upsert(idx, [row(f"m{i}", "r1") for i in range(40)], np.stack([unit(0)] * 40))

    @contextmanager
    def another_thread_writes():
        upsert(idx, [row(f"late{i}", "r1") for i in range(5)], np.stack([unit(0)] * 5))
        yield

    hits = idx.search(unit(1), k=None, run_id="r1", unlocked=another_thread_writes)
    assert {h[0] for h in hits} == {f"m{i}" for i in range(40)}
    assert len(idx.search(unit(1), k=None, run_id="r1")) == 45  # the next search sees them


def test_re_upsert_moves_a_row_into_and_out_of_the_window():
    idx = SpaceIndex(DIM, 0)
    upsert(idx, [row("a", at=10.0)], np.stack([unit(0)]))
    assert idx.search(unit(0), k=None, cutoff=100.0) == []
    upsert(idx, [row("a", at=200.0)], np.stack([unit(0)]))
    assert [h[0] for h in idx.search(unit(0), k=None, cutoff=100.0)] == ["a"]
    upsert(idx, [row("a", at=200.0, valid_to=150.0)], np.stack([unit(0)]))
    assert idx.search(unit(0), k=None, now=160.0) == []
    assert len(idx) == 1


def test_row_without_vector_is_found_by_text_only():
    idx = SpaceIndex(DIM, 0)
    idx.upsert([Row("a", "", 100.0, None, "Collects stamps", None)])
    assert idx.search(unit(0), k=None) == []
    assert [h[0] for h in idx.search_text(index_terms("stamps"), k=5)] == ["a"]


def test_growth_past_initial_capacity_keeps_everything():
    idx = SpaceIndex(DIM, 0)
    for i in range(300):
        upsert(idx, [row(f"m{i}")], np.stack([unit(i)]))
    assert len(idx) == 300
    assert len(idx.search(unit(3), k=None)) == 300
    assert {h[0] for h in idx.search(unit(3), k=None) if h[1] > 0.5} == {f"m{i}" for i in range(3, 300, DIM)}


def test_compaction_past_1024_rows_keeps_results_right():
    rng = np.random.default_rng(7)
    n = 1500
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    idx = SpaceIndex(DIM, 0)
    upsert(idx, [row(f"m{i}", run="even" if i % 2 == 0 else "odd", at=float(i)) for i in range(n)], vecs)
    dead = [f"m{i}" for i in range(n) if i % 5 != 0]  # remove 80%: triggers compaction
    idx.remove(dead)
    alive = [i for i in range(n) if i % 5 == 0]
    assert len(idx) == len(alive)

    query = vecs[10]
    expected = sorted(alive, key=lambda i: -float(vecs[i] @ query))[:10]
    hits = idx.search(query, k=10)
    assert [h[0] for h in hits] == [f"m{i}" for i in expected]
    assert hits[0] == ("m10", pytest.approx(1.0, abs=1e-5))
    # Per-row attributes moved with their rows.
    assert {h[0] for h in idx.search(query, k=None, run_id="even")} == {f"m{i}" for i in alive if i % 2 == 0}
    assert {h[0] for h in idx.search(query, k=None, cutoff=1000.0)} == {f"m{i}" for i in alive if i >= 1000}
    # And the index keeps working after compaction.
    upsert(idx, [row("new")], np.stack([query]))
    idx.remove(["m10"])
    assert idx.search(query, k=1)[0][0] == "new"
    assert len(idx) == len(alive)


def test_repeated_query_sees_rows_written_in_between():
    idx = SpaceIndex(DIM, 0)
    upsert(idx, [row("a"), row("b")], np.stack([unit(0), unit(1)]))
    query = mixed({0: 0.6, 2: 0.8})
    assert [m for m, _ in idx.search(query, k=1)] == ["a"]
    upsert(idx, [row("c")], np.stack([unit(2)]))  # now the best match
    assert [m for m, _ in idx.search(query, k=1)] == ["c"]
    upsert(idx, [row("c")], np.stack([unit(1)]))  # replaced: no longer the best
    assert [m for m, _ in idx.search(query, k=1)] == ["a"]
    query[:] = unit(1)  # the same array, changed in place, is a new query
    assert [m for m, _ in idx.search(query, k=2)] in (["b", "c"], ["c", "b"])


def test_query_of_other_dtype_is_accepted():
    idx = SpaceIndex(DIM, 0)
    upsert(idx, [row("a")], np.stack([unit(0)]))
    assert idx.search(unit(0).astype(np.float64), k=1)[0][0] == "a"


# BM25 over the same rows -------------------------------------------------------------


def text_index(docs: dict[str, str]) -> SpaceIndex:
    idx = SpaceIndex(DIM, 0)
    upsert(idx, [Row(mid, "", 100.0, None, text) for mid, text in docs.items()], np.stack([unit(0)] * len(docs)))
    return idx


def bm25_ids(idx: SpaceIndex, query: str, **kw) -> list[str]:
    return [mid for mid, _ in idx.search_text(index_terms(query), k=kw.pop("k", None), **kw)]


def test_bm25_returns_only_rows_sharing_a_term():
    idx = text_index({"a": "Likes sushi", "b": "Plays chess", "c": "Sushi and chess"})
    assert set(bm25_ids(idx, "sushi")) == {"a", "c"}
    assert bm25_ids(idx, "violin") == []
    assert bm25_ids(idx, "the and of") == []  # stop words carry no signal
    assert idx.search_text([], k=None) == []


def test_bm25_stems_and_folds_case():
    idx = text_index({"a": "Has strong PREFERENCES about coffee", "b": "Plays chess"})
    assert bm25_ids(idx, "prefer") == ["a"]
    assert bm25_ids(idx, "Coffee") == ["a"]


def test_bm25_ranks_rarer_terms_and_more_matches_higher():
    idx = text_index({
        "both": "sushi ramen",
        "common": "sushi",
        "rare": "ramen",
        "f1": "sushi tea",
        "f2": "sushi coffee",
    })
    hits = bm25_ids(idx, "sushi ramen")
    assert hits[0] == "both"
    assert hits.index("rare") < hits.index("common")  # "ramen" is rarer than "sushi"
    scores = [s for _, s in idx.search_text(["sushi", "ramen"], k=None)]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert len(bm25_ids(idx, "sushi ramen", k=2)) == 2


def test_bm25_forgets_removed_and_replaced_text():
    idx = text_index({"a": "Likes sushi", "b": "Likes ramen"})
    idx.remove(["b"])
    assert bm25_ids(idx, "ramen") == []
    upsert(idx, [Row("a", "", 100.0, None, "Collects stamps")], np.stack([unit(0)]))
    assert bm25_ids(idx, "sushi") == []
    assert bm25_ids(idx, "stamps") == ["a"]
    assert len(idx) == 1


def test_bm25_respects_masks():
    idx = SpaceIndex(DIM, 0)
    upsert(idx, 
        [Row("r1", "run-1", 200.0, None, "sushi"), Row("old", "", 10.0, None, "sushi"), Row("ended", "", 200.0, 150.0, "sushi")],
        np.stack([unit(0)] * 3),
    )
    assert set(bm25_ids(idx, "sushi")) == {"r1", "old", "ended"}
    assert bm25_ids(idx, "sushi", run_id="run-1") == ["r1"]
    assert set(bm25_ids(idx, "sushi", cutoff=100.0)) == {"r1", "ended"}
    assert set(bm25_ids(idx, "sushi", now=160.0)) == {"r1", "old"}


def test_bm25_after_compaction_matches_a_fresh_index():
    n = 1200
    docs = {f"m{i}": f"memory {i} about topic{i % 7} and item{i}" for i in range(n)}
    idx = text_index(docs)
    dead = [f"m{i}" for i in range(n) if i % 4 != 0]
    idx.remove(dead)  # 75% removed: compaction
    fresh = text_index({mid: t for mid, t in docs.items() if mid not in set(dead)})
    for query in ("topic3", "item400", "topic0 item8", "memory"):
        got = idx.search_text(index_terms(query), k=20)
        want = fresh.search_text(index_terms(query), k=20)
        assert [m for m, _ in got] == [m for m, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-5)
    assert bm25_ids(idx, "item400") == ["m400"]
    assert bm25_ids(idx, "item401") == []


def naive_bm25(docs: dict[str, str], query: list[str]) -> dict[str, float]:
    """BM25 of each document sharing a term with ``query``, computed directly."""
    import math
    from collections import Counter

    from memorist.store.vector_index import BM25_B, BM25_K1

    terms = {mid: Counter(index_terms(text)) for mid, text in docs.items()}
    avg = sum(sum(c.values()) for c in terms.values()) / len(terms)
    out: dict[str, float] = {}
    for mid, counts in terms.items():
        length = sum(counts.values())
        score = 0.0
        for term in dict.fromkeys(query):
            tf = counts.get(term, 0)
            if not tf:
                continue
            df = sum(1 for c in terms.values() if term in c)
            idf = math.log(1.0 + (len(terms) - df + 0.5) / (df + 0.5))
            score += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / avg))
        if score > 0:
            out[mid] = score
    return out


@pytest.mark.parametrize("batch", [1, 7, 300])
def test_bm25_of_rows_written_in_batches_is_bm25(batch):
    """Postings built a batch at a time (repeated terms, terms new and old, empty
    texts) score every row as BM25 does, and keep doing so after removals and
    replacements."""
    import random

    rng = random.Random(batch)
    vocab = ["apple", "banana", "cherry", "dates", "elder", "figs", "grape", "the", "running", "runs"]
    docs = {f"m{i}": " ".join(rng.choices(vocab, k=rng.randint(0, 9))) for i in range(300)}
    idx = SpaceIndex(DIM, 0)
    items = list(docs.items())
    for start in range(0, len(items), batch):
        idx.upsert([Row(mid, "", 100.0, None, text, unit(i)) for i, (mid, text) in enumerate(items[start : start + batch])])
    queries = [["apple"], ["run", "figs"], ["cherri", "dates", "elder", "grape"], ["banana", "banana"]]

    def check() -> None:
        for q in queries:
            want = naive_bm25(docs, q)
            got = dict(idx.search_text(q, k=None))
            assert got.keys() == want.keys()
            assert all(got[m] == pytest.approx(want[m], rel=1e-5) for m in want)

    check()
    gone = [f"m{i}" for i in range(0, 300, 3)]
    idx.remove(gone)
    for mid in gone:
        del docs[mid]
    docs["m1"] = "apple apple apple figs"
    idx.upsert([Row("m1", "", 100.0, None, docs["m1"], unit(1))])
    check()


def test_the_first_search_of_a_large_index_finds_no_blas_to_set_up(monkeypatch):
    """threadpoolctl's look at the loaded libraries takes milliseconds: a space large
    enough to pin its product to one BLAS thread pays it while it is written, not in
    its first search (the first after a bulk load)."""
    from memorist.store import vector_index

    vector_index._numpy_blas.cache_clear()
    idx = SpaceIndex(DIM, 0, ann_threshold=0)
    rows = [row(f"m{i}") for i in range(vector_index._THREADED_ROWS + 10)]
    upsert(idx, rows, np.stack([unit(i % DIM) for i in range(len(rows))]))
    import threadpoolctl

    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", lambda: pytest.fail("set up during a search"))
    assert idx.search(unit(3), k=1)[0][1] == pytest.approx(1.0)


def test_rows_written_one_by_one_index_as_one_batch_does():
    """Single adds take a scalar path, batches an array one: the index they make is the
    same (cosine, BM25, run, validity, time window and speaker filters, speakers)."""
    rng = np.random.default_rng(7)
    words = ["tea", "hiking", "painting", "sea", "Oslo", "fractions", "denominator", "sister", "stamps", "violin"]
    rows = []
    for i in range(40):
        text = " ".join(rng.choice(words, size=int(rng.integers(0, 9))))
        vector = None if i % 11 == 5 else rng.normal(size=DIM).astype(np.float32)
        rows.append(Row(f"m{i}", f"run{i % 3}", 100.0 + i, None if i % 4 else 150.0 + i, text,
                        None if vector is None else vector / np.linalg.norm(vector), 50.0 + i, ["", "ann", "bo"][i % 3]))
    batch, single, mixed_sizes = SpaceIndex(DIM, 0), SpaceIndex(DIM, 0), SpaceIndex(DIM, 0)
    batch.upsert(rows)
    for r in rows:
        single.upsert([r])
    for lo, hi in [(0, 3), (3, 20), (20, 22), (22, 40)]:
        mixed_sizes.upsert(rows[lo:hi])
    for idx in (single, mixed_sizes):
        assert idx.speakers() == batch.speakers()
        for _ in range(6):
            query = rng.normal(size=DIM).astype(np.float32)
            terms = index_terms(" ".join(rng.choice(words, size=3)))
            for kwargs in ({}, {"run_id": "run1"}, {"now": 160.0}, {"cutoff": 120.0}):
                for ours, theirs in ((idx.search(query, k=None, **kwargs), batch.search(query, k=None, **kwargs)),
                                     (idx.search_text(terms, k=None, **kwargs), batch.search_text(terms, k=None, **kwargs))):
                    assert [m for m, _ in ours] == [m for m, _ in theirs]
                    assert [s for _, s in ours] == pytest.approx([s for _, s in theirs], rel=1e-5)
            assert idx.search(query, k=None, window=(60.0, 80.0)) == batch.search(query, k=None, window=(60.0, 80.0))
            assert idx.search(query, k=None, speaker="ann") == batch.search(query, k=None, speaker="ann")


@pytest.mark.parametrize("size", [10, 5000, 16_384, 100_000])
@pytest.mark.parametrize("count", [1, 16, 164, 2000])
@pytest.mark.parametrize("shape", ["random", "ties", "sorted", "masked", "spike"])
def test_the_largest_values_are_those_a_full_partition_finds(size, count, shape):
    """A large array is cut at a sampled value before it is partitioned: the values
    chosen are the count largest whatever the array looks like."""
    rng = np.random.default_rng(size + count)
    values = {
        "random": lambda: rng.standard_normal(size).astype(np.float32),
        "ties": lambda: rng.integers(0, 5, size).astype(np.float32),
        "sorted": lambda: np.sort(rng.standard_normal(size)).astype(np.float32),
        # Most rows filtered out (-inf), as a search with a filter ranks them.
        "masked": lambda: np.where(rng.random(size) < 0.01, rng.standard_normal(size), -np.inf).astype(np.float32),
        # The best rows all between the sampled positions.
        "spike": lambda: np.where(np.arange(size) % 16 == 3, 5.0, rng.random(size)).astype(np.float32),
    }[shape]()
    got = vector_index._largest(values, count)
    assert len(got) == len(np.unique(got)) == min(count, size)  # positions, each once
    want = np.sort(values)[::-1][: min(count, size)]
    assert np.array_equal(np.sort(values[got])[::-1], want)
    if count < size:  # the smallest kept comes first: where a search's cut is read
        assert values[got[0]] == want[-1]
