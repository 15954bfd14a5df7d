"""SpaceIndex above its approximate-search threshold: the usearch graph (store/ann.py)."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from memorist.store import ann as ann_module
from memorist.store import vector_index
from memorist.store.ann import AnnIndex, AnnParams, fetch_size
from memorist.store.vector_index import Row, SpaceIndex

pytest.importorskip("usearch")

DIM = 32


def clustered(n: int, seed: int = 0, clusters: int = 40) -> np.ndarray:
    """Unit vectors around a few centres, like embeddings of related texts."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, DIM))
    x = centres[rng.integers(0, clusters, n)] + 0.6 * rng.normal(size=(n, DIM))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


def rows(vectors: np.ndarray, start: int = 0, **fields) -> list[Row]:
    return [
        Row(
            f"m{start + i}",
            fields.get("run", lambda j: "")(start + i),
            float(start + i),
            fields.get("valid_to", lambda j: None)(start + i),
            vector=v,
            created_at=float(start + i),
            speaker=fields.get("speaker", lambda j: "")(start + i),
        )
        for i, v in enumerate(vectors)
    ]


def pair(vectors: np.ndarray, threshold: int = 500, **fields) -> tuple[SpaceIndex, SpaceIndex]:
    """The same rows in an exact index and in one with a graph (caught up)."""
    exact = SpaceIndex(DIM, 0, ann_threshold=0)
    approx = SpaceIndex(DIM, 0, ann_threshold=threshold)
    exact.upsert(rows(vectors, **fields))
    approx.upsert(rows(vectors, **fields))
    assert approx.catch_up_ann()
    return exact, approx


def overlap(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> float:
    return len({m for m, _ in a} & {m for m, _ in b}) / max(len(a), 1)


@pytest.fixture
def no_background(monkeypatch):
    """Rows reach the graph only through catch_up_ann(): the tail stays visible to tests."""
    monkeypatch.setattr(AnnIndex, "notify", lambda self: None)


def test_exact_below_the_threshold_and_a_graph_above_it():
    vectors = clustered(600)
    idx = SpaceIndex(DIM, 0, ann_threshold=500)
    idx.upsert(rows(vectors[:499]))
    assert idx.ann_pending() is None  # exact: no graph
    idx.upsert(rows(vectors[499:], start=499))
    assert idx.ann_pending() is not None
    assert idx.catch_up_ann()
    assert idx.ann_pending() == 0
    assert SpaceIndex(DIM, 0, ann_threshold=0).ann_pending() is None


def test_graph_results_match_exact_ones_with_cosine_scores():
    vectors = clustered(3000)
    exact, approx = pair(vectors)
    queries = clustered(50, seed=1)
    recalls = []
    for q in queries:
        want, got = exact.search(q, k=10), approx.search(q, k=10)
        assert len(got) == 10
        recalls.append(overlap(want, got))
        scores = dict(want)
        for mid, score in got:
            # Scores are exact cosines, whichever way a row was found.
            assert score == pytest.approx(float(vectors[int(mid[1:])] @ q), abs=1e-5)
            if mid in scores:
                assert score == pytest.approx(scores[mid], abs=1e-6)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    assert np.mean(recalls) >= 0.95


def test_rows_written_after_the_graph_are_found_before_it_takes_them(no_background):
    vectors = clustered(1000)
    _, idx = pair(vectors)
    new = clustered(5, seed=9)
    idx.upsert(rows(new, start=5000))
    assert idx.ann_pending() == 5
    for i, q in enumerate(new):
        assert idx.search(q, k=1)[0] == (f"m{5000 + i}", pytest.approx(1.0, abs=1e-5))
    assert idx.catch_up_ann()
    assert idx.ann_pending() == 0
    for i, q in enumerate(new):
        assert idx.search(q, k=1)[0][0] == f"m{5000 + i}"


def test_the_background_thread_feeds_the_graph():
    idx = SpaceIndex(DIM, 0, ann_threshold=500)
    idx.upsert(rows(clustered(800)))
    deadline = time.monotonic() + 30
    while idx.ann_pending() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert idx.ann_pending() == 0


def test_the_graph_waits_while_a_space_is_being_written_unless_it_lags_too_far(monkeypatch):
    """A bulk load keeps the CPU: new rows wait for a pause in the writes (searched
    exactly meanwhile), unless the graph lacks as many rows as the threshold."""
    monkeypatch.setattr(ann_module, "QUIET", 0.5)
    idx = SpaceIndex(DIM, 0, ann_threshold=500)
    vectors = clustered(1400)
    idx.upsert(rows(vectors[:800]))
    assert idx.catch_up_ann() and idx.ann_pending() == 0
    # Writes every 0.1 s: below the lag, the graph takes nothing meanwhile.
    for i in range(4):
        idx.upsert(rows(vectors[800 + 50 * i : 850 + 50 * i], start=800 + 50 * i))
        time.sleep(0.1)
    assert idx.ann_pending() == 200
    new = vectors[800:1000]
    assert all(idx.search(q, k=1)[0][0] == f"m{800 + i}" for i, q in enumerate(new[:20]))  # found exactly
    # Writes stop: after the quiet time the graph takes them.
    deadline = time.monotonic() + 30
    while idx.ann_pending() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert idx.ann_pending() == 0
    # Lagging by the threshold, the graph works even while writes go on.
    idx.upsert(rows(vectors[1000:1400], start=1000))
    idx.upsert(rows(clustered(200, seed=5), start=5000))
    deadline = time.monotonic() + 30
    while idx.ann_pending() >= 500 and time.monotonic() < deadline:
        idx.upsert(rows(clustered(1, seed=6), start=9000))  # the same row again: a write
        time.sleep(0.05)
    assert idx.ann_pending() < 500


def test_removed_and_replaced_rows_are_never_returned():
    vectors = clustered(1000)
    _, idx = pair(vectors)
    q = vectors[7]
    assert idx.search(q, k=1)[0][0] == "m7"
    idx.remove(["m7"])
    assert "m7" not in {m for m, _ in idx.search(q, k=50)}
    # Moving m8 elsewhere: its old vector no longer finds it, its new one does.
    far = -vectors[8]
    idx.upsert([Row("m8", "", 1.0, None, vector=far)])
    assert "m8" not in {m for m, _ in idx.search(vectors[8], k=20)}
    assert idx.search(far, k=1)[0] == ("m8", pytest.approx(1.0, abs=1e-5))
    assert len(idx) == 999


@pytest.mark.parametrize(
    "filters",
    [
        {"run_id": "r1"},  # a third of the rows: through the graph
        {"run_id": "rare"},  # a few rows: scored exactly
        {"cutoff": 1500.0},
        {"now": 1000.0},
        {"window": (100.0, 2500.0)},
        {"speaker": "ann"},
        {"run_id": "r2", "cutoff": 2800.0},
    ],
)
def test_filters_with_the_graph(filters):
    vectors = clustered(3000)
    fields = {
        "run": lambda i: "rare" if i % 500 == 0 else f"r{i % 3}",
        "valid_to": lambda i: 900.0 if i % 4 == 0 else None,
        "speaker": lambda i: "ann" if i % 5 == 0 else "bob",
    }
    exact, approx = pair(vectors, **fields)
    recalls = []
    for q in clustered(20, seed=2):
        want = exact.search(q, k=10, **filters)
        got = approx.search(q, k=10, **filters)
        assert len(got) == len(want)
        assert {m for m, _ in got} <= {m for m, _ in exact.search(q, k=None, **filters)}
        recalls.append(overlap(want, got))
    assert np.mean(recalls) >= 0.95


def test_k_none_returns_every_row():
    vectors = clustered(1200)
    exact, approx = pair(vectors)
    q = vectors[0]
    assert approx.search(q, k=None) == exact.search(q, k=None)
    assert len(approx.search(q, k=None, run_id="")) == 1200


def test_compaction_below_half_the_threshold_drops_the_graph(no_background):
    vectors = clustered(3000)
    exact, approx = pair(vectors, threshold=2000)
    dead = [f"m{i}" for i in range(3000) if i % 5 != 0]  # 80% removed: compaction
    exact.remove(dead)
    approx.remove(dead)
    assert len(approx) == 600
    assert approx._size == 600  # compacted
    # Below half the threshold: the graph is dropped, search is exact again.
    assert approx.ann_pending() is None
    for q in clustered(10, seed=3):
        assert approx.search(q, k=10) == exact.search(q, k=10)


def test_compaction_keeps_a_large_graph_serving_while_a_new_one_builds(no_background):
    vectors = clustered(4000)
    exact, approx = pair(vectors, threshold=1000)
    dead = [f"m{i}" for i in range(4000) if i % 3 == 0 or i % 3 == 1]  # two thirds
    exact.remove(dead)
    approx.remove(dead)
    ann = approx._ann
    assert ann is not None and ann.current is not None and ann.building is not None
    assert ann.covered() == approx._size  # renumbered, still covering every row
    queries = clustered(20, seed=4)
    recalls = [overlap(exact.search(q, k=10), approx.search(q, k=10)) for q in queries]
    assert np.mean(recalls) >= 0.95
    assert all(m not in set(dead) for q in queries for m, _ in approx.search(q, k=10))
    assert approx.catch_up_ann()
    assert ann.building is None and ann.current.dead() == 0
    recalls = [overlap(exact.search(q, k=10), approx.search(q, k=10)) for q in queries]
    assert np.mean(recalls) >= 0.95


def test_a_rebuilt_index_gets_a_new_graph():
    """A space loaded again (another process wrote, say) builds its graph from the rows."""
    vectors = clustered(1500)
    _, first = pair(vectors)
    again = SpaceIndex(DIM, 1, ann_threshold=500)
    again.upsert(rows(vectors))
    assert again.search(vectors[3], k=1)[0][0] == "m3"  # exact until the graph is built
    assert again.catch_up_ann()
    assert again.search(vectors[3], k=1)[0][0] == "m3"
    assert first.search(vectors[3], k=1)[0][0] == "m3"


def test_without_usearch_large_spaces_stay_exact_and_say_so_once(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "usearch", None)
    monkeypatch.setitem(sys.modules, "usearch.index", None)
    monkeypatch.setattr(ann_module, "_warned_missing", False)
    vectors = clustered(700)
    with caplog.at_level(logging.WARNING, logger="memorist.store.ann"):
        for _ in range(2):
            idx = SpaceIndex(DIM, 0, ann_threshold=500)
            idx.upsert(rows(vectors))
            assert idx.ann_pending() is None
            assert not idx.catch_up_ann()
            assert idx.search(vectors[5], k=1)[0][0] == "m5"
    warnings = [r for r in caplog.records if "usearch" in r.getMessage()]
    assert len(warnings) == 1
    assert "pip install 'memorist[ann]'" in warnings[0].getMessage()


def test_a_failing_graph_falls_back_to_exact(no_background, monkeypatch, caplog):
    vectors = clustered(800)
    idx = SpaceIndex(DIM, 0, ann_threshold=500)
    idx.upsert(rows(vectors))

    def broken(self, positions, vectors, threads):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(ann_module._Graph, "add", broken)
    with caplog.at_level(logging.ERROR, logger="memorist.store.ann"):
        assert not idx.catch_up_ann()
    assert idx._ann is not None and idx._ann.broken
    assert idx.search(vectors[9], k=1)[0][0] == "m9"


def test_fetch_grows_as_filters_and_dead_keys_thin_the_graph_out():
    params = AnnParams(overfetch=4, min_fetch=40)
    assert fetch_size(10, 100_000, 100_000, params) == 40
    assert fetch_size(50, 100_000, 100_000, params) == 200
    assert fetch_size(10, 100_000, 10_000, params) == 400  # one key in ten can be returned
    assert fetch_size(10, 30, 30, params) == 30  # never more than the graph holds


def test_write_cost_does_not_grow_with_the_space():
    """Arrays grow by doubling: thousands of small writes reallocate a handful of times."""
    idx = SpaceIndex(DIM, 0, ann_threshold=0)
    vectors = clustered(4000)
    seen = set()
    for i in range(0, 4000, 10):
        idx.upsert([Row(f"m{j}", "", 0.0, None, f"common words and item{j}", vectors[j]) for j in range(i, i + 10)])
        seen.add(id(idx._vectors))
    assert len(seen) <= 8
    postings = idx._postings["common"]
    assert postings.size == 4000 and postings.docs.shape[0] <= 8192
    assert idx.search_text(["item3999"], k=1)[0][0] == "m3999"


def test_a_batch_naming_one_id_twice_keeps_the_last_row():
    idx = SpaceIndex(DIM, 0, ann_threshold=0)
    v = clustered(2, seed=5)
    idx.upsert([Row("a", "", 1.0, None, "first", v[0]), Row("a", "", 2.0, None, "second", v[1])])
    assert len(idx) == 1
    assert idx.search(v[1], k=None) == [("a", pytest.approx(1.0, abs=1e-5))]
    assert idx.search_text(["first"], k=None) == []


def test_time_windows_are_scored_over_their_span():
    """A window leaves rows appended together: scored exactly, as a contiguous product."""
    vectors = clustered(3000)
    exact, approx = pair(vectors)
    for q in clustered(5, seed=6):
        assert approx.search(q, k=10, window=(1000.0, 1050.0)) == exact.search(q, k=10, window=(1000.0, 1050.0))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_searches_exactly_then_builds_its_own_graph():
    vectors = clustered(1500)
    _, idx = pair(vectors)
    pid = os.fork()
    if pid == 0:  # the child: any failure is its exit code
        code = 1
        try:
            assert idx.ann_pending() == 1500  # the parent's graph is not ours: a new one
            assert idx.search(vectors[4], k=1)[0][0] == "m4"  # exact, and feeds the new graph
            assert idx.catch_up_ann()
            assert idx.ann_pending() == 0
            assert idx.search(vectors[4], k=1)[0][0] == "m4"
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert idx.search(vectors[4], k=1)[0][0] == "m4"


def test_the_process_exits_cleanly_while_the_graph_is_being_built(tmp_path):
    """A daemon thread killed inside usearch would abort the interpreter at exit."""
    script = tmp_path / "exit.py"
    script.write_text(
        "import numpy as np\n"
        "from memorist.store.vector_index import Row, SpaceIndex\n"
        "v = np.random.default_rng(0).normal(size=(100_000, 32)).astype(np.float32)\n"
        "v /= np.linalg.norm(v, axis=1, keepdims=True)\n"
        "idx = SpaceIndex(32, 0, ann_threshold=500)\n"
        "idx.upsert([Row(f'm{i}', '', 0.0, None, vector=x) for i, x in enumerate(v)])\n"
        "assert idx.ann_pending()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_memory_search_through_the_store_with_a_graph(tmp_path, monkeypatch):
    """The SQLite store's loaded index gets a graph above the threshold; searches agree with exact."""
    from memorist import Memory
    from memorist.store import vector_index
    from memorist.store.base import ScopeFilter

    monkeypatch.setattr(vector_index, "DEFAULT_THRESHOLD", 300)
    memory = Memory(tmp_path / "m.db", embedder="hashing")
    facts = [f"Fact {i} about topic{i % 37} and thing{i % 11}" for i in range(900)]
    for start in range(0, 900, 300):
        memory.add([{"role": "user", "content": f} for f in facts[start : start + 300]], user_id="u", infer=False)
        memory.search("topic5", user_id="u")  # keeps the index loaded and patched
    (index,) = memory.store._indexes.loaded()
    assert index.catch_up_ann() and index.ann_pending() == 0
    queries = ["topic5 thing3", "topic36 thing10", "topic12 thing0"]
    vectors = [memory.embedder.embed_query(q) for q in queries]

    def both() -> tuple[list, list]:
        memories = [memory.search(q, user_id="u", limit=3)["results"][0]["memory"] for q in queries]
        hits = [memory.store.vector_search(ScopeFilter("", "u"), v, k=10, cutoff=None, now=time.time()) for v in vectors]
        return memories, hits

    approx_top, approx_hits = both()
    index.ann_threshold = 0  # the same index, searched exactly
    exact_top, exact_hits = both()
    assert approx_top == exact_top
    for got, want in zip(approx_hits, exact_hits, strict=True):
        assert overlap(want, got) >= 0.9
        scores = dict(want)
        assert all(s == pytest.approx(scores[m], abs=1e-6) for m, s in got if m in scores)
    memory.close()


def test_a_search_never_waits_long_behind_the_graphs_lock(no_background):
    """A step of the graph that overruns (its thread descheduled with the lock held)
    delays a search by the short wait at most; the search is then exact, and right."""
    import threading

    vectors = clustered(1000)
    exact, idx = pair(vectors)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with idx._ann.lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(5)
        for q in clustered(5, seed=3):
            began = time.perf_counter()
            got = idx.search(q, k=10)
            assert time.perf_counter() - began < 0.5  # the lock is held for 10 s
            assert got == exact.search(q, k=10)
    finally:
        release.set()
        holder.join()


def test_the_background_thread_lets_waiting_searches_in_between_steps():
    ann = SpaceIndex(DIM, 0, ann_threshold=10)
    ann.upsert(rows(clustered(20)))
    graph = ann._ann
    graph.waiting = 1
    began = time.monotonic()
    graph.let_searches_in(limit=0.05)
    assert time.monotonic() - began >= 0.04  # it waited for the search
    graph.waiting = 0
    began = time.monotonic()
    graph.let_searches_in(limit=0.05)
    assert time.monotonic() - began < 0.04  # nobody waiting: no wait


def test_a_space_created_by_this_process_is_indexed_as_it_is_written(tmp_path):
    """A bulk load into a new space keeps its in-process index current from the first
    write, so the first search after the load reads nothing back from the file."""
    from memorist import Memory
    from memorist.store.sqlite import index as sqlite_index

    memory = Memory(tmp_path / "m.db", embedder="hashing")
    memory.add([{"role": "user", "content": f"Fact {i} about topic{i % 7}"} for i in range(50)], user_id="u", infer=False)
    memory.add([{"role": "user", "content": f"Later fact {i} about topic{i % 7}"} for i in range(50)], user_id="u", infer=False)
    (index,) = memory.store._indexes.loaded()
    assert len(index) == 100

    def no_load(*args, **kwargs):
        raise AssertionError("the space was loaded from the file")

    original = sqlite_index.SpaceIndex
    sqlite_index.SpaceIndex = no_load  # type: ignore[assignment,misc]
    try:
        hits = memory.search("Later fact 3 about topic3", user_id="u", limit=3)["results"]
    finally:
        sqlite_index.SpaceIndex = original  # type: ignore[misc]
    # It ties with the older "Fact 3 about topic3" (their ranks by vector and by
    # keywords mirror each other): equal scores come oldest first.
    assert [h["memory"] for h in hits[:2]] == ["Fact 3 about topic3", "Later fact 3 about topic3"]
    assert hits[0]["score"] == hits[1]["score"]
    # A second process (another store on the file) loads it and finds the same.
    other = Memory(tmp_path / "m.db", embedder="hashing")
    assert other.search("Later fact 3 about topic3", user_id="u", limit=3)["results"][0]["memory"] == hits[0]["memory"]
    other.close()
    memory.close()


def test_a_graph_covering_few_rows_is_not_searched(no_background, monkeypatch):
    """Right after a bulk load the graph holds few of the rows: every search scores
    them all exactly (it would score the uncovered ones anyway) instead of paying
    for the graph's search on top; once the graph holds most rows it is used."""
    vectors = clustered(4000)
    exact = SpaceIndex(DIM, 0, ann_threshold=0)
    exact.upsert(rows(vectors))
    idx = SpaceIndex(DIM, 0, ann_threshold=500)
    idx.upsert(rows(vectors[:1000]))
    assert idx.catch_up_ann()
    idx.upsert(rows(vectors[1000:], start=1000))  # 3,000 rows not in the graph
    calls = []
    real = AnnIndex.search
    monkeypatch.setattr(AnnIndex, "search", lambda self, q, n: calls.append(n) or real(self, q, n))
    for q in clustered(5, seed=7):
        assert idx.search(q, k=10) == exact.search(q, k=10)
    assert calls == []
    assert idx.catch_up_ann()
    queries = clustered(5, seed=8)
    for q in queries:
        got = idx.search(q, k=10)
        assert overlap(got, exact.search(q, k=10)) >= 0.8
    assert len(calls) == len(queries)


def test_a_second_ranking_of_the_same_query_reuses_its_exact_scores(monkeypatch):
    """A search ranks one query vector several ways (all rows, a time window): once
    the exact scores of every row are at hand, the other rankings use them."""
    vectors = clustered(3000)
    exact = SpaceIndex(DIM, 0, ann_threshold=0)
    exact.upsert(rows(vectors))
    idx = SpaceIndex(DIM, 0, ann_threshold=500)
    idx.upsert(rows(vectors))
    assert idx.catch_up_ann()
    q = clustered(1, seed=9)[0]
    idx.search(q, k=None)  # every row: the exact product
    monkeypatch.setattr(AnnIndex, "search", lambda self, q, n: pytest.fail("the graph was searched"))
    assert idx.search(q, k=10) == exact.search(q, k=10)
    assert idx.search(q, k=10, window=(100.0, 2000.0)) == exact.search(q, k=10, window=(100.0, 2000.0))


def test_the_graphs_steps_are_short_while_the_space_is_searched(no_background, monkeypatch):
    """During a bulk load nobody searches: the thread's steps are long (fewer turns at
    the GIL, taken from the writer); once searches come, a step that holds the lock
    they wait for is short again."""
    vectors = clustered(1000)
    idx = SpaceIndex(DIM, 0, ann_threshold=500)
    idx.upsert(rows(vectors))
    graph = idx._ann
    assert graph.step_seconds() == ann_module._BULK_STEP_SECONDS
    assert idx.catch_up_ann()
    idx.search(vectors[0], k=10)
    assert graph.step_seconds() == ann_module._STEP_SECONDS < ann_module._BULK_STEP_SECONDS
    monkeypatch.setattr(ann_module, "_SEARCHED", 0.0)
    assert graph.step_seconds() == ann_module._BULK_STEP_SECONDS


def test_a_closed_store_stops_building_its_graphs(tmp_path, monkeypatch):
    """Closing a Memory ends the background work on its spaces' graphs (and frees
    them): it must not go on taking the CPU from whatever the process does next."""
    from memorist import Memory
    from memorist.store import vector_index

    monkeypatch.setattr(vector_index, "DEFAULT_THRESHOLD", 300)
    monkeypatch.setattr(AnnIndex, "notify", lambda self: None)  # nothing built unless asked
    memory = Memory(tmp_path / "m.db", embedder="hashing")
    memory.add([{"role": "user", "content": f"Fact {i} about topic{i % 37}"} for i in range(900)], user_id="u", infer=False)
    (index,) = memory.store._indexes.loaded()
    graph = index._ann
    assert graph is not None and index.ann_pending() == 900
    memory.close()
    assert graph.broken and graph.current is None
    assert not graph.step(seconds=1.0)  # what the background thread would do next: nothing
    assert memory.store._indexes.loaded() == []


# The coarse pass of large exact searches (int8 codes, then exact rescoring) ---------------


@pytest.fixture
def coarse_from(monkeypatch):
    """The coarse pass from 2,000 rows on, so that small test spaces take it."""
    monkeypatch.setattr(vector_index, "_COARSE_ROWS", 2000)


def float32_best(vectors: np.ndarray, query: np.ndarray, k: int, keep: np.ndarray | None = None) -> list[tuple[str, float]]:
    """The best ``k`` of ``vectors`` (of the rows ``keep``) by the float32 product, as ids and scores."""
    scores = vectors @ query.astype(np.float32)
    positions = np.arange(len(vectors)) if keep is None else np.flatnonzero(keep)
    order = positions[np.argsort(-scores[positions], kind="stable")][:k]
    return [(f"m{i}", float(scores[i])) for i in order]


def assert_same(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    """The same rows with the same cosines (rows of equal score may come in either order)."""
    assert len(got) == len(want)
    assert {m for m, _ in got} == {m for m, _ in want}
    assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)


@pytest.mark.parametrize("k", [1, 10, 100, 400])
def test_the_coarse_pass_finds_what_the_float32_product_finds(coarse_from, monkeypatch, k):
    """A large space searched exactly ranks by int8 codes first, then scores its best
    few from the float32 vectors: the same rows, with the same cosines, as the
    float32 product over every row."""
    vectors = clustered(6000, seed=3)
    idx = SpaceIndex(DIM, 0, ann_threshold=0)  # no graph: every search exact
    idx.upsert(rows(vectors))
    assert idx._codes is not None
    dots, passes = vector_index._int8_dots(), []
    monkeypatch.setattr(vector_index, "_int8_dots", lambda: lambda q, r: passes.append(1) or dots(q, r))
    for seed in range(30):
        q = clustered(1, seed=100 + seed)[0]
        assert_same(idx.search(q, k=k), float32_best(vectors, q, k))
    assert len(passes) == 30  # every search took the coarse pass


def test_the_coarse_pass_keeps_filters_removals_and_vectorless_rows(coarse_from):
    vectors = clustered(5000, seed=4)
    idx = SpaceIndex(DIM, 0, ann_threshold=0)
    idx.upsert(rows(vectors, run=lambda j: "a" if j % 3 else "b", speaker=lambda j: "ann" if j % 2 else "bo"))
    idx.upsert([Row("text-only", "a", 1.0, None, text="no vector", vector=None)])
    gone = [f"m{i}" for i in range(0, 5000, 7)]
    idx.remove(gone)
    alive = np.ones(5000, dtype=bool)
    alive[::7] = False
    runs = np.array([j % 3 != 0 for j in range(5000)])
    annes = np.array([j % 2 == 1 for j in range(5000)])
    window = (1000.0, 3000.0)
    in_window = (np.arange(5000) >= 1000) & (np.arange(5000) < 3000)
    for seed in range(10):
        q = clustered(1, seed=200 + seed)[0]
        assert_same(idx.search(q, k=20), float32_best(vectors, q, 20, alive))
        assert_same(idx.search(q, k=20, run_id="a"), float32_best(vectors, q, 20, alive & runs))
        assert_same(idx.search(q, k=20, speaker="ann"), float32_best(vectors, q, 20, alive & annes))
        assert_same(idx.search(q, k=20, window=window), float32_best(vectors, q, 20, alive & in_window))
    assert all(m != "text-only" and int(m[1:]) % 7 for m, _ in idx.search(clustered(1, seed=9)[0], k=5000))


def test_rows_written_one_by_one_get_their_codes(coarse_from):
    """Single adds take a scalar path: their codes are those of a batch."""
    vectors = clustered(2500, seed=5)
    batch = SpaceIndex(DIM, 0, ann_threshold=0)
    batch.upsert(rows(vectors))
    single = SpaceIndex(DIM, 0, ann_threshold=0)
    single.upsert(rows(vectors[:2000]))
    for i in range(2000, 2500):
        single.upsert(rows(vectors[i : i + 1], start=i))
    n = batch._size
    assert np.array_equal(batch._codes[:n], single._codes[:n])
    assert np.array_equal(batch._code_scale[:n], single._code_scale[:n])
    q = clustered(1, seed=6)[0]
    assert single.search(q, k=50) == batch.search(q, k=50)
    assert_same(batch.search(q, k=50), float32_best(vectors, q, 50))


def test_a_search_lets_its_lock_go_for_the_product_and_survives_a_compaction_meanwhile(coarse_from):
    """While the coarse pass multiplies, another thread may write, delete, even
    compact (renumbering every row): the search then answers as of afterwards."""
    vectors = clustered(4000, seed=7)
    idx = SpaceIndex(DIM, 0, ann_threshold=0)
    idx.upsert(rows(vectors))
    released = []

    @contextlib.contextmanager
    def compacting():
        # What another thread could do while the lock is let go: remove most rows
        # (the index compacts) and add a new best match.
        released.append(True)
        if len(released) == 1:
            idx.remove([f"m{i}" for i in range(0, 4000) if i % 4])
            idx.upsert(rows(vectors[:1], start=9999))
        yield

    q = vectors[0]
    got = idx.search(q, k=10, unlocked=compacting)
    assert released and idx._size < 4000  # it was compacted during the search
    keep = np.array([i % 4 == 0 for i in range(4000)])
    want = sorted([("m9999", 1.0), *float32_best(vectors, q, 10, keep)], key=lambda h: -h[1])[:10]
    assert {m for m, _ in got} == {m for m, _ in want}
    assert all(m in idx._pos for m, _ in got)


def test_a_space_is_stored_by_row_from_the_coarse_size_on_and_answers_the_same(coarse_from):
    """From the coarse pass's size on, vectors are kept one row each (the few rows
    scored exactly are then read whole): batch and single adds across the change,
    every kind of search, and a compaction back below it, all answer as the float32
    product over the vectors does."""
    vectors = clustered(3000, seed=11)
    idx = SpaceIndex(DIM, 0, ann_threshold=0)
    idx.upsert(rows(vectors[:1500]))
    assert not idx._by_row and idx._vectors.shape[0] == DIM
    for i in range(1500, 1990):
        idx.upsert(rows(vectors[i : i + 1], start=i))
    assert not idx._by_row
    idx.upsert(rows(vectors[1990:2500], start=1990))  # crosses 2,000 in one batch
    assert idx._by_row and idx._vectors.shape[1] == DIM
    for i in range(2500, 3000):
        idx.upsert(rows(vectors[i : i + 1], start=i))
    everything = np.ones(3000, dtype=bool)
    early = np.arange(3000) < 1200
    for seed in range(8):
        q = clustered(1, seed=300 + seed)[0]
        assert_same(idx.search(q, k=10), float32_best(vectors, q, 10))
        assert_same(idx.search(q, k=None), float32_best(vectors, q, 3000, everything))
        assert_same(idx.search(q, k=10, window=(0.0, 1200.0)), float32_best(vectors, q, 10, early))
        want = {f"m{i}": float(vectors[i] @ q) for i in (0, 1999, 2000, 2999)}
        got = idx.similarities(q, list(want))
        assert got.keys() == want.keys() and np.allclose(list(got.values()), list(want.values()), atol=1e-6)
    idx.remove([f"m{i}" for i in range(3000) if i % 3])  # compacts to 1,000 rows
    assert idx._size == 1000 and not idx._by_row and idx._vectors.shape[0] == DIM
    kept = np.arange(3000) % 3 == 0
    q = clustered(1, seed=9)[0]
    assert_same(idx.search(q, k=10), float32_best(vectors, q, 10, kept))


def test_the_graph_is_fed_from_vectors_stored_by_row(coarse_from, no_background):
    vectors = clustered(3000)
    exact, approx = pair(vectors)
    assert approx._by_row and exact._by_row
    assert approx._ann is not None and approx._ann.covered() == 3000
    found = [overlap(approx.search(q, k=10), exact.search(q, k=10)) for q in clustered(50, seed=1)]
    assert np.mean(found) >= 0.95  # as from the transposed matrix (the test above)
    for q in clustered(5, seed=14):
        for m, score in approx.search(q, k=10):
            assert score == pytest.approx(float(vectors[int(m[1:])] @ q), abs=1e-6)


def test_the_layout_changes_only_while_the_graphs_thread_cannot_read_it(coarse_from, no_background):
    """The graph's thread reads the vectors and their layout without the store's lock,
    under its own: a space growing past the coarse size while it has a graph waits
    for that lock to change layout, so the thread never sees one with the other's flag."""
    import threading

    vectors = clustered(2600, seed=15)
    idx = SpaceIndex(DIM, 0, ann_threshold=500)
    idx.upsert(rows(vectors[:1900]))
    assert idx.catch_up_ann() and not idx._by_row
    idx._ann.lock.acquire()
    writer = threading.Thread(target=idx.upsert, args=(rows(vectors[1900:], start=1900),))
    try:
        writer.start()
        writer.join(0.3)
        assert writer.is_alive()  # waiting for the graph's lock
        assert not idx._by_row and idx._vectors.shape[0] == DIM
    finally:
        idx._ann.lock.release()
    writer.join(10)
    assert idx._by_row and idx._vectors.shape[1] == DIM and idx.catch_up_ann()
    q = clustered(1, seed=16)[0]
    assert_same(idx.search(q, k=10), float32_best(vectors, q, 10))


def test_the_graphs_thread_yields_to_running_searches_but_not_forever(no_background, monkeypatch):
    vectors = clustered(1000)
    idx = SpaceIndex(DIM, 0, ann_threshold=500)
    idx.upsert(rows(vectors))
    graph = idx._ann
    monkeypatch.setattr(ann_module, "QUIET", 0.0)  # no write pause to wait for
    assert graph.deferral() == 0.0
    graph.searching = 1
    graph._last_step = time.monotonic()
    assert graph.deferral() == ann_module._SEARCH_YIELD
    graph._last_step = time.monotonic() - ann_module._YIELD_AT_MOST  # it has waited long enough
    assert graph.deferral() == 0.0
    graph.searching = 0
    idx.search(vectors[0], k=10)
    assert graph.searching == 0  # counted while searching only
