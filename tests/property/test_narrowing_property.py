"""A filter's narrowing, checked by the store (SQLite, PostgreSQL), keeps every memory the filter keeps.

A filtered read first asks the store for the memories its conditions can keep
(``Store.narrowed_ids``) and checks only those; a narrowing that dropped one memory
the filter keeps would hide it from every filtered search and listing. Here, any
filter of the language over memories whose metadata holds the values JSON and SQL
disagree on (numbers as integers and floats, large and tiny, booleans beside 0 and
1, text that casefolds, nulls, lists, objects, keys a JSON path must quote) keeps a
subset of what the store narrows it to, and a filtered search and listing give
exactly what checking every memory gives.
"""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memorist import HashingEmbedder, Memory, ValidationError
from memorist.config import MemoryConfig, RetrievalConfig
from memorist.model import Kind, MemoryRecord, Scope
from memorist.policies.filters import compile_filters
from memorist.policies.text import content_hash
from memorist.store import open_store
from memorist.store.base import ScopeFilter

VALUES = [
    "a", "A", "ß", "SS", "1", "", "0.1", "x.y", "ünï", "a" * 300, "\u212a", "k", "ﬁ", "FI", "50%_x\\y", "%", "_", "\\",
    0, 1, -1, 2, 1.0, 0.1, 0.30000000000000004, 1e20, 10**20, 2**53 + 1, 2**63 - 1, 2**64, -0.0, 1e-300, 1.5e308, 1.7976931348623157e308, -5e-324,
    True, False, None, ["a", 1], [True], [], ["A", "ß"], [0.1, 2**63 - 1], {"x": 1}, [["a"]], {},
]
KEYS = ["k", "a.b", "sp ace", "ünï", 'q"t', "b\\s", "[0]", "$"]
KINDS = [Kind.FACT, Kind.PREFERENCE, Kind.STRATEGY]
NOW = time.time()
SCOPE = Scope(user_id="alex")
EMB = HashingEmbedder()


def _records() -> list[MemoryRecord]:
    out = []
    for n, value in enumerate(VALUES * 2):
        key = KEYS[n % len(KEYS)]
        other = VALUES[(n * 7 + 3) % len(VALUES)]
        metadata = {key: value, "k" if key != "k" else "n": other}
        if n % 5 == 0:
            metadata.pop(key)
        text = f"memory {n} about {key}"
        out.append(MemoryRecord(
            id=f"m{n:03d}", scope=SCOPE, text=text, search_text=text, content_hash=content_hash(text),
            kind=KINDS[n % len(KINDS)], topic=["", "food", "Food", "ß"][n % 4], importance=[0.1, 0.5, 0.9, 1.0][n % 4],
            helpful=n % 3, created_at=NOW - 3600 * n, updated_at=None if n % 2 else NOW - 60 * n, metadata=metadata,
        ))
    return out


class Stored:
    def __init__(self, store, records):
        self.store, self.records = store, records

    def __iter__(self):
        return iter((self.store, self.records))

    def __repr__(self) -> str:
        return f"<store of {len(self.records)} memories>"


@pytest.fixture
def stored(backend):
    store = open_store(backend.target)
    store.bind_embedder(EMB.name, EMB.dim)
    with store.transaction() as batch:
        for record in _records():
            batch.add(record, EMB.embed_one(record.text))
    yield Stored(store, store.list(ScopeFilter("", "alex")))
    store.close()


FIELDS = [*KEYS, "metadata.k", "metadata.kind", "missing", "created_at", "updated_at", "importance", "helpful",
          "kind", "topic", "tags", "run_id"]
scalars = st.sampled_from([v for v in VALUES if not isinstance(v, list | dict)] + ["preference", "food", NOW - 7200])


def _condition(draw_value: st.SearchStrategy) -> st.SearchStrategy:
    ops = st.one_of(
        draw_value,
        st.fixed_dictionaries({"eq": draw_value}),
        st.fixed_dictionaries({"in": st.lists(draw_value, max_size=4)}),
        st.fixed_dictionaries({"nin": st.lists(draw_value, max_size=3)}),
        st.fixed_dictionaries({"ne": draw_value}),
        st.builds(lambda op, v: {op: v}, st.sampled_from(["gt", "gte", "lt", "lte"]), draw_value),
        st.builds(lambda v: {"exists": v}, st.booleans()),
        st.builds(lambda v: {"contains": v}, draw_value),
    )
    return st.builds(lambda key, spec: {key: spec}, st.sampled_from(FIELDS), ops)


leaves = _condition(st.one_of(scalars, st.sampled_from(VALUES)))
filters = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.builds(lambda parts: {"AND": parts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda parts: {"OR": parts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda part: {"NOT": part}, inner),
        st.builds(lambda a, b: {**a, **b}, inner, inner),
    ),
    max_leaves=6,
)


def _compiled(spec):
    try:
        return compile_filters(spec)
    except ValidationError:
        return None


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(filters)
def test_the_store_narrows_a_filter_to_a_superset_of_what_it_keeps(stored, spec):
    store, records = stored
    predicate = _compiled(spec)
    if predicate is None or predicate.narrowing is None:
        return
    kept = {r.id for r in records if predicate(r)}
    event(f"keeps {'none' if not kept else 'some'}")
    narrowed = store.narrowed_ids(ScopeFilter("", "alex"), predicate.narrowing, cutoff=None, now=NOW + 1, limit=10_000)
    event("narrowed" if narrowed is not None else "not narrowed")
    if narrowed is None:  # only a key no JSON path can name leaves nothing to check
        assert any(key in str(spec) for key in ('q"t', "b\\\\s")), spec
        return
    missing = kept - set(narrowed)
    assert not missing, f"{spec!r} keeps {sorted(missing)} but the store narrowed it to {len(narrowed)} others"


def test_narrowed_ids_are_newest_first_and_bounded(stored):
    store, records = stored
    narrowing = compile_filters({"importance": {"gte": 0.5}}).narrowing
    ids = store.narrowed_ids(ScopeFilter("", "alex"), narrowing, cutoff=None, now=NOW + 1, limit=10_000)
    expected = [r.id for r in records if r.importance >= 0.5]  # store.list: newest first
    assert ids == expected
    # More than the limit: the store says so rather than giving a part.
    assert store.narrowed_ids(ScopeFilter("", "alex"), narrowing, cutoff=None, now=NOW + 1, limit=len(expected) - 1) is None
    assert store.narrowed_ids(ScopeFilter("", "alex"), narrowing, cutoff=None, now=NOW + 1, limit=len(expected)) == expected
    # Another user's scope holds none of them.
    assert store.narrowed_ids(ScopeFilter("", "bob"), narrowing, cutoff=None, now=NOW + 1, limit=10) == []


@pytest.fixture
def memory(backend):
    # One candidate a ranking: a search of one result reads 4, then 32, then asks the
    # store to narrow its filter, on a scope of a hundred memories.
    config = MemoryConfig(retrieval=RetrievalConfig(candidates=1))
    memory = Memory(backend.target, embedder="hashing", config=config)
    storable = [v for v in VALUES if not (isinstance(v, int) and abs(v) >= 2**63)]  # 64-bit whole numbers
    for n, (value, key) in enumerate(zip(storable * 3, itertools.cycle(KEYS), strict=False)):
        memory.add(f"note {n}: the {['red', 'blue', 'green'][n % 3]} kite flew over the {key} hill", user_id="alex",
                   metadata={key: value, "n": n % 7}, infer=False)
    yield memory
    memory.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(filters)
def test_filtered_search_and_listing_give_what_checking_every_memory_gives(memory, spec):
    predicate = _compiled(spec)
    event("valid" if predicate is not None else "invalid")
    if predicate is None:
        return
    everything = memory.get_all(user_id="alex", limit=1000)["results"]
    kept = [item["id"] for item in everything if predicate(memory._get_record(item["id"], "alex", None, None))]
    listed = [item["id"] for item in memory.get_all(user_id="alex", limit=1000, filters=spec)["results"]]
    assert listed == kept  # newest first, as without a filter
    found = {item["id"] for item in memory.search("kite over the hill", user_id="alex", limit=1000, filters=spec)["results"]}
    assert found == set(kept)
    # A search of one, narrowed by the store when what the filter keeps is not among the first 32.
    for limit in (1, 2):
        best = [item["id"] for item in memory.search("the red kite", user_id="alex", limit=limit, filters=spec)["results"]]
        assert set(best) <= set(kept) and len(best) == min(limit, len(kept))


TEXTS = ["Green tea", "GREEN TEA at noon", "greentea", "tea", "50% off_the\\shelf", "50 percent", "Straße", "STRASSE",
         "\u212aelvin", "kelvin", "ﬁne", "FINE", "café au lait", "CAFÉ", "", ["green tea", "x"], ["TEA"], 7, None,
         "wow! 100%", "Green tea at noon" * 4, "GREEN TEA AT NOON and more words than the narrowing looks for, and more"]
NEEDLES = ["tea", "TEA", "green t", "%", "_", "\\", "% off_", "ß", "ss", "k", "K", "\u212a", "fi", "ﬁ", "é", "É", "", "zz",
           "!", "! 1", "wow!", "green tea at noon" * 3, "GREEN TEA AT NOON and more words than the narrowing looks for"]


def test_contains_is_narrowed_by_the_text_it_asks_for(backend):
    """A ``contains`` of a text keeps, of the ASCII texts, only those holding it but
    for case (LIKE's own characters taken literally); a text that is not ASCII is
    kept for the filter to decide, as casefolding may make it hold the needle."""
    store = open_store(backend.target)
    store.bind_embedder(EMB.name, EMB.dim)
    records = []
    with store.transaction() as batch:
        for n, value in enumerate(TEXTS):
            text = f"note {n}"
            record = MemoryRecord(id=f"t{n:02d}", scope=SCOPE, text=text, search_text=text, content_hash=content_hash(text),
                                  created_at=NOW - n, metadata={"say": value})
            batch.add(record, EMB.embed_one(text))
            records.append(record)
    try:
        for needle in NEEDLES:
            flt = compile_filters({"say": {"contains": needle}})
            kept = {r.id for r in records if flt(r)}
            narrowed = set(store.narrowed_ids(ScopeFilter("", "alex"), flt.narrowing, cutoff=None, now=NOW + 1, limit=100))
            assert kept <= narrowed, (needle, kept - narrowed)
            # Beyond what it keeps, only texts that are not ASCII, and lists.
            extra = [r.metadata["say"] for r in records if r.id in narrowed - kept]
            assert all(isinstance(v, list) or not v.isascii() for v in extra), (needle, extra)
    finally:
        store.close()
