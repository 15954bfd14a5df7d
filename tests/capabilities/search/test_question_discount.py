"""retrieval.question_discount: a memory that asks a question ranks below the ones that
tell, when they match a query about equally."""

from __future__ import annotations

import dataclasses
import random
import time

import pytest

from memorist import Memory
from memorist.config import MemoryConfig, RetrievalConfig
from memorist.errors import ConfigurationError
from memorist.policies.text import about_asking, asks

# The asking turn shares more of the query's words than the telling one: without the
# discount it ranks first.
ASKING = "What did you paint last week at the lake? The lake painting?"
TELLING = "I painted a sunset over the water, my best one yet."
QUERY = "What did Caroline paint at the lake?"


@pytest.mark.parametrize(
    ("text", "asked"),
    [
        ("How did it go?", True),
        ("That's great! How did it go? Tell me everything.", True),
        ("Really?!", True),
        ("She said (really?) twice.", True),
        ('"Why not?" she asked.', True),
        ("How was it?😊", True),
        ("**Why?** Because.", True),
        ('She said "why?", then left.', True),
        ("¿Qué pintaste?", True),
        ("你画了什么？我很好奇。", True),
        ("We went camping.", False),
        ("See https://example.com/search?q=tea for the recipe.", False),
        ("/find?=all", False),
        ("Wow!! Great news!", False),
        ("", False),
    ],
)
def test_asks_is_a_sentence_ending_in_a_question_mark(text, asked):
    assert asks(text) is asked


def test_asks_is_a_run_of_marks_holding_a_question_mark_not_followed_by_a_word():
    """Against the plain pattern (quadratic on long runs, exact on short texts)."""
    import re

    pattern = re.compile(r"(?<![?!])[?!]*\?[?!]*(?![?!])(?![\w=])|[？؟﹖⁇]")
    rng = random.Random(5)
    alphabet = list("a?!= .😊_1？\n\"'é")
    for _ in range(20_000):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 12)))
        assert asks(text) is (pattern.search(text) is not None), repr(text)


def test_asks_costs_linear_time():
    """A long run of marks not ending a sentence: a backtracking pattern took 78 s on
    100,000 of them, and every search looks at each candidate's text."""
    for text in ("?" * 100_000 + "a", "?!" * 50_000 + "a", "!" * 100_000 + "?a", "a?" * 50_000 + "b"):
        started = time.monotonic()
        assert asks(text) is False
        assert time.monotonic() - started < 0.5, text[:10]


def _memory(tmp_path, discount: float | None = None, *, extra: tuple[str, ...] = ()) -> Memory:
    memory = Memory(str(tmp_path / "m.db"), embedder="hashing")
    if discount is not None:
        memory.config.retrieval = dataclasses.replace(RetrievalConfig(), question_discount=discount)
    # Far apart in time: no episode lifts one toward the other.
    memory.add([{"role": "user", "content": ASKING}], user_id="u", infer=False, timestamp=1_000_000)
    memory.add([{"role": "user", "content": TELLING}], user_id="u", infer=False, timestamp=2_000_000)
    for i, text in enumerate(extra):
        memory.add([{"role": "user", "content": text}], user_id="u", infer=False, timestamp=3_000_000 + i * 10_000)
    return memory


def test_on_by_default_and_checked():
    assert RetrievalConfig().question_discount == 0.25
    for bad in (-0.1, 1.5, float("nan"), "0.2", True):
        with pytest.raises(ConfigurationError, match="retrieval.question_discount"):
            Memory(config=MemoryConfig(path=":memory:", embedder="hashing", retrieval=RetrievalConfig(question_discount=bad)))


def test_the_telling_memory_ranks_above_the_asking_one(tmp_path):
    memory = _memory(tmp_path, 0.0)
    try:
        hits = memory.search(QUERY, user_id="u", limit=2)["results"]
        assert [h["memory"] for h in hits] == [ASKING, TELLING]  # off: the words decide
        off = {h["memory"]: h["score"] for h in hits}
        memory.config.retrieval = RetrievalConfig()
        hits = memory.search(QUERY, user_id="u", limit=2)["results"]
        assert [h["memory"] for h in hits] == [TELLING, ASKING]
        on = {h["memory"]: h["score"] for h in hits}
        # Only the asking memory's score is lowered, and by the discount.
        assert on[ASKING] / off[ASKING] * (off[TELLING] / on[TELLING]) == pytest.approx(0.75, rel=1e-6)
    finally:
        memory.close()


def test_a_search_for_one_reads_past_a_first_result_that_asks(tmp_path):
    """With ``limit=1`` only the first fused candidate would be read: the one after it
    must be read too, since it may rank above a first one that asks."""
    memory = _memory(tmp_path, extra=("The weather was cold in March.", "My brother bought a red bike."))
    try:
        assert [h["memory"] for h in memory.search(QUERY, user_id="u", limit=1)["results"]] == [TELLING]
        memory.config.retrieval = dataclasses.replace(RetrievalConfig(), question_discount=0.0)
        assert [h["memory"] for h in memory.search(QUERY, user_id="u", limit=1)["results"]] == [ASKING]
    finally:
        memory.close()


@pytest.mark.parametrize(
    ("query", "about"),
    [
        ("What did I ask about the lake?", True),
        ("Which questions did Caroline have about painting?", True),
        ("What was she WONDERING about the trip", True),
        ("Did Mel enquire about the class?", True),
        ("What did Caroline paint at the lake?", False),
        ("Tell me about Asker's painting", False),  # a name, not the word
        ("", False),
    ],
)
def test_a_query_is_about_asking_when_it_names_asking(query, about):
    assert about_asking(query) is about


def test_a_query_about_asking_finds_the_memories_that_ask_first(tmp_path):
    """"What did I ask about the lake painting?" looks for the turn that asks: it is
    not ranked lower for asking, as it is for a query about what was painted."""
    memory = _memory(tmp_path)
    try:
        assert memory.search(QUERY, user_id="u", limit=1)["results"][0]["memory"] == TELLING
        about = "What did I ask about the lake painting last week?"
        first = memory.search(about, user_id="u", limit=2)["results"]
        memory.config.retrieval = dataclasses.replace(RetrievalConfig(), question_discount=0.0)
        off = memory.search(about, user_id="u", limit=2)["results"]
        assert [h["memory"] for h in first] == [h["memory"] for h in off] == [ASKING, TELLING]
        assert [h["score"] for h in first] == pytest.approx([h["score"] for h in off])
    finally:
        memory.close()


def test_a_discount_of_one_keeps_asking_memories_found(tmp_path):
    """The discount orders; it never hides: an asking memory is still found when it is
    all there is."""
    memory = Memory(str(tmp_path / "m.db"), embedder="hashing")
    try:
        memory.config.retrieval = dataclasses.replace(RetrievalConfig(), question_discount=1.0)
        memory.add([{"role": "user", "content": ASKING}], user_id="u", infer=False)
        hits = memory.search(QUERY, user_id="u", limit=5)["results"]
        assert [h["memory"] for h in hits] == [ASKING]
    finally:
        memory.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request, tmp_path) -> tuple[str, dict]:
    """A store's location, and the options it is opened with: SQLite, or PostgreSQL
    with its in-process index answering every search (``text_index_above=1``)."""
    if request.param == "sqlite":
        return str(tmp_path / "m.db"), {}
    return request.getfixturevalue("pg_url"), {"text_index_above": 1}


@pytest.mark.parametrize("seed", range(4))
def test_a_search_for_a_few_equals_the_best_few_of_all(where, seed):
    """``search(limit=k)`` reads only a few candidates past ``k``; it must give the
    first ``k`` of the same search that reads every candidate (a scope smaller than
    the rankings' depth: the fused scores are the same at any limit)."""
    from memorist.store import open_store

    rng = random.Random(seed)
    vocab = "lake paint sunset river boat dog park tea guitar class book train bike garden".split()
    texts = []
    for _ in range(60):
        words = " ".join(rng.choices(vocab, k=rng.randint(3, 8))).capitalize()
        texts.append(words + ("?" if rng.random() < 0.5 else "."))
    url, options = where
    memory = Memory(url, embedder="hashing", store=open_store(url, **options))
    try:
        # Apart in time: no episodes, which would only lift the best few.
        for i, text in enumerate(texts):
            memory.add([{"role": "user", "content": text}], user_id="u", infer=False, timestamp=1_000_000 + i * 100_000)
        for discount in (0.25, 0.5, 0.9):
            memory.config.retrieval = dataclasses.replace(RetrievalConfig(), question_discount=discount)
            for query in rng.sample(vocab, 4):
                everything = [h["id"] for h in memory.search(query, user_id="u", limit=60)["results"]]
                for k in (1, 2, 3, 5, 8):
                    assert [h["id"] for h in memory.search(query, user_id="u", limit=k)["results"]] == everything[:k], (discount, query, k)
    finally:
        memory.close()
