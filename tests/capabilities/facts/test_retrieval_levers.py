"""Each retrieval lever of Memory.search, through the public API.

Speaker keys, context keys, fact keys (ingest side), the time ranking, the speaker
ranking and the fusion weights (search side). Every test uses the deterministic
hashing embedder except the one semantic test, which uses the bundled
all-MiniLM-L6-v2 model.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memorist import ConfigurationError, Memory
from memorist.config import MemoryConfig, RetrievalConfig


def D(month: int, day: int, hour: int = 15) -> datetime:
    return datetime(2023, month, day, hour, tzinfo=UTC)


def open_memory(tmp_path: Path, name: str = "m.db", embedder: Any = "hashing", **retrieval: Any) -> Memory:
    config = MemoryConfig(retrieval=RetrievalConfig(**retrieval))
    return Memory(str(tmp_path / name), embedder=embedder, config=config)


def turns(*pairs: tuple[str, str], start: datetime | None = None) -> list[dict[str, Any]]:
    """Messages of a conversation, one per (speaker, text), a second apart."""
    out = []
    for i, (name, text) in enumerate(pairs):
        message: dict[str, Any] = {"role": "user", "name": name, "content": text}
        if start is not None:
            message["timestamp"] = start.timestamp() + i
        out.append(message)
    return out


def texts(results: dict[str, Any]) -> list[str]:
    return [r["memory"] for r in results["results"]]


def key_of(memory: Memory, memory_id: str) -> str:
    record = memory.store.get(memory_id)
    assert record is not None
    return record.search_text


# speaker keys ----------------------------------------------------------------------------
COUNSELOR = "I work as a counselor at a youth center."
PAINTER = "For work, I do pottery classes and I work as a painter."


def _jobs(memory: Memory) -> dict[str, str]:
    # Separate calls: no reply context between the two turns.
    a = memory.add(turns(("Caroline", COUNSELOR)), user_id="u", infer=False)["results"][0]["id"]
    b = memory.add(turns(("Melanie", PAINTER)), user_id="u", infer=False)["results"][0]["id"]
    return {"caroline": a, "melanie": b}


def test_speaker_keys_let_a_third_person_question_find_a_first_person_turn(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        _jobs(memory)
        found = texts(memory.search("What does Caroline do for work?", user_id="u", limit=2))
        assert found[0] == COUNSELOR, found
        # The other speaker's turn, which shares more words with the question, is second.
        found = texts(memory.search("What does Melanie do for work?", user_id="u", limit=2))
        assert found[0] == PAINTER, found


def test_without_speaker_keys_the_name_does_not_help(tmp_path: Path) -> None:
    # The control for the test above: the same data, the lever off, the other turn wins.
    with open_memory(tmp_path, speaker_keys=False) as memory:
        _jobs(memory)
        found = texts(memory.search("What does Caroline do for work?", user_id="u", limit=2))
        assert found[0] == PAINTER, found


def test_speaker_keys_leave_the_stored_text_verbatim(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        ids = _jobs(memory)
        got = memory.get(ids["caroline"])
        assert got["memory"] == COUNSELOR
        assert got["metadata"]["name"] == "Caroline"
        assert key_of(memory, ids["caroline"]).startswith("Caroline: " + COUNSELOR)
        # search and get_all hand back the verbatim text too
        assert COUNSELOR in texts(memory.search("counselor", user_id="u"))
        assert all(not r["memory"].startswith(("Caroline:", "Melanie:")) for r in memory.get_all(user_id="u")["results"])


def test_speaker_keys_off_keys_are_the_bare_text(tmp_path: Path) -> None:
    with open_memory(tmp_path, speaker_keys=False, context_keys=False, fact_keys=False) as memory:
        ids = _jobs(memory)
        assert key_of(memory, ids["caroline"]) == COUNSELOR
        assert key_of(memory, ids["melanie"]) == PAINTER
    with open_memory(tmp_path, "n.db", speaker_keys=False) as memory:
        ids = _jobs(memory)
        assert "Caroline" not in key_of(memory, ids["caroline"])


def test_plain_text_memories_keep_their_text_as_key(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        mid = memory.add("I went to Rome yesterday.", user_id="u", infer=False)["results"][0]["id"]
        assert key_of(memory, mid) == "I went to Rome yesterday."


@pytest.fixture(scope="module")
def minilm() -> Any:
    from memorist.embed.sentence_transformers import SentenceTransformerEmbedder, available

    if not available():  # the dev install includes the extra; a missing model is a broken install
        pytest.fail("the bundled all-MiniLM-L6-v2 is not installed", pytrace=False)
    return SentenceTransformerEmbedder()


def test_speaker_keys_answer_a_paraphrased_question_about_a_person(tmp_path: Path, minilm: Any) -> None:
    """Semantic: "job" shares no word with "I work as a counselor"; the name decides."""
    conversation = [
        ("Melanie", "I work as a painter, mostly landscapes."),
        ("Caroline", "I work as a counselor."),
        ("Melanie", "My kids love swimming in the lake."),
        ("Caroline", "I went hiking with friends."),
    ]
    for speaker_keys, first in ((True, "I work as a counselor."), (False, "I work as a painter, mostly landscapes.")):
        with open_memory(tmp_path, f"st-{speaker_keys}.db", embedder=minilm, speaker_keys=speaker_keys) as memory:
            for pair in conversation:  # one call each: no reply context
                memory.add(turns(pair), user_id="u", infer=False)
            found = texts(memory.search("What is Caroline's job?", user_id="u", limit=4))
            assert found[0] == first, (speaker_keys, found)


# context keys ----------------------------------------------------------------------------
CHAT = [
    ("Melanie", "How have you been? Work has been hectic for me."),
    ("Caroline", "Pretty good, I have been busy with choir practice."),
    ("Melanie", "Did you end up running the charity race for the animal shelter?"),
    ("Caroline", "Yes, last Sunday!"),
    ("Melanie", "Amazing, how did it go?"),
    ("Caroline", "I finished in under an hour and raised some money."),
    ("Melanie", "My kids are starting swimming lessons next month."),
    ("Caroline", "They will love it, swimming is so much fun."),
]
QUESTION = "When did Caroline run the charity race for the animal shelter?"


def test_context_keys_find_an_answer_by_the_question_it_replied_to(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        added = memory.add(turns(*CHAT), user_id="u", infer=False, timestamp=D(5, 8))["results"]
        answer = added[3]["id"]
        assert added[3]["memory"] == "Yes, last Sunday!"
        assert "Did you end up running the charity race" in key_of(memory, answer)
        assert memory.get(answer)["memory"] == "Yes, last Sunday!"
        found = texts(memory.search(QUESTION, user_id="u", limit=2))
        assert "Yes, last Sunday!" in found, found


def test_without_context_keys_the_bare_answer_is_not_found(tmp_path: Path) -> None:
    with open_memory(tmp_path, context_keys=False) as memory:
        added = memory.add(turns(*CHAT), user_id="u", infer=False, timestamp=D(5, 8))["results"]
        assert "charity" not in key_of(memory, added[3]["id"])
        found = texts(memory.search(QUESTION, user_id="u", limit=2))
        assert "Yes, last Sunday!" not in found, found


def test_the_first_turn_of_a_call_has_no_context(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        memory.add(turns(*CHAT[:2]), user_id="u", infer=False)
        added = memory.add(turns(*CHAT[2:4]), user_id="u", infer=False)["results"]
        # A new add() is a new conversation: its first turn does not reply to the last one.
        assert "choir" not in key_of(memory, added[0]["id"])
        assert "charity race" in key_of(memory, added[1]["id"])


@pytest.mark.parametrize("name", [None, "Caroline"], ids=["no-name", "named"])
def test_consecutive_messages_of_one_speaker_get_no_context(tmp_path: Path, name: str | None) -> None:
    # A list of facts from one speaker is not a dialogue: each stays its own key, so
    # exact lookups keep working (a fact's key must not hold its neighbour's words).
    messages = []
    for i in range(1000):
        message: dict[str, Any] = {"role": "user", "content": f"item{i} is stored in box {i % 37}"}
        if name:
            message["name"] = name
        messages.append(message)
    with open_memory(tmp_path) as memory:
        added = memory.add(messages, user_id="u", infer=False)["results"]
        assert len(added) == 1000
        for i in (0, 1, 500, 736, 737, 738, 999):
            assert "replying to" not in key_of(memory, added[i]["id"])
            found = texts(memory.search(f"item{i}", user_id="u", limit=3))
            assert found[0] == f"item{i} is stored in box {i % 37}", (i, found)
            assert f"item{i + 1} is stored in box {(i + 1) % 37}" not in found, (i, found)


def test_alternating_speakers_do_get_context(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        added = memory.add(
            turns(("Caroline", "I adopted a puppy."), ("Caroline", "She is a beagle."), ("Melanie", "So cute!")),
            user_id="u",
            infer=False,
        )["results"]
        assert "puppy" not in key_of(memory, added[1]["id"])  # same speaker: none
        assert "beagle" in key_of(memory, added[2]["id"])  # a reply: the turn before


# fact keys -------------------------------------------------------------------------------
def test_fact_keys_resolve_a_relative_date_in_the_third_person(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        message = {"role": "user", "name": "Caroline", "content": "I went to Rome yesterday", "timestamp": "2024-05-08T10:00:00+00:00"}
        # The message's own timestamp counts, not the call's.
        added = memory.add([message], user_id="u", infer=False, timestamp="2024-06-30T10:00:00+00:00")["results"]
        key = key_of(memory, added[0]["id"])
        assert "went to Rome on 2024-05-07" in key, key
        assert "Caroline went to Rome on 2024-05-07" in key, key
        assert memory.get(added[0]["id"])["memory"] == "I went to Rome yesterday"


def test_fact_keys_fall_back_to_the_call_timestamp(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        message = {"role": "user", "name": "Caroline", "content": "I went to Rome yesterday"}
        added = memory.add([message], user_id="u", infer=False, timestamp="2024-05-08T10:00:00+00:00")["results"]
        assert "went to Rome on 2024-05-07" in key_of(memory, added[0]["id"])


def test_fact_keys_make_a_dated_question_find_a_relative_turn(tmp_path: Path) -> None:
    with open_memory(tmp_path, time_weight=0.0) as memory:  # keys alone, no time ranking
        memory.add(
            turns(("Caroline", "I went to Rome yesterday"), ("Caroline", "I went to Rome last year for a wedding"), start=D(5, 8)),
            user_id="u",
            infer=False,
        )
        found = texts(memory.search("Who went to Rome on 2023-05-07?", user_id="u", limit=2))
        assert found[0] == "I went to Rome yesterday", found


def test_without_fact_keys_the_key_has_no_facts(tmp_path: Path) -> None:
    with open_memory(tmp_path, fact_keys=False) as memory:
        message = {"role": "user", "name": "Caroline", "content": "I went to Rome yesterday", "timestamp": "2024-05-08T10:00:00+00:00"}
        added = memory.add([message], user_id="u", infer=False)["results"]
        assert key_of(memory, added[0]["id"]) == "Caroline: I went to Rome yesterday"


# the time ranking ------------------------------------------------------------------------
# Two speakers, five sessions at least 16 days apart: "last week" (a generous
# window, see memorist.policies.timeparse) five days after a session holds that
# session only.
SESSIONS = [
    (D(4, 1), [
        ("Caroline", "I went to a support group for trans people, it was really powerful."),
        ("Melanie", "That sounds amazing! I painted a sunrise over the lake."),
        ("Caroline", "I want to study psychology and become a counselor."),
        ("Melanie", "You'd be great at it. My kids loved the museum trip."),
    ]),
    (D(4, 18), [
        ("Melanie", "We went camping at the beach with the kids."),
        ("Caroline", "I started researching adoption agencies."),
        ("Melanie", "That is a big step, I am proud of you."),
        ("Caroline", "Thanks! I also joined a choir at the community center."),
    ]),
    (D(5, 5), [
        ("Caroline", "I gave a talk at a school about my journey."),
        ("Melanie", "I signed up for a pottery class, it is so relaxing."),
        ("Caroline", "My friends threw me a birthday party with a huge cake."),
        ("Melanie", "I ran a charity race for mental health."),
    ]),
    (D(5, 22), [
        ("Melanie", "My husband and I celebrated our anniversary in the mountains."),
        ("Caroline", "I got my first tattoo, a small sunflower on my wrist."),
        ("Melanie", "Sunflowers suit you! The kids want one too, haha."),
        ("Caroline", "I am reading a novel about a lighthouse keeper."),
    ]),
    (D(6, 9), [
        ("Caroline", "I finally bought new running shoes for the marathon training."),
        ("Melanie", "Nice, my daughter just learned how to swim."),
        ("Caroline", "I visited my grandmother in the hospital, she is recovering."),
        ("Melanie", "I'm glad she is getting better. We adopted a puppy named Oliver."),
    ]),
]


def _sessions(memory: Memory) -> None:
    for date, pairs in SESSIONS:
        memory.add(turns(*pairs, start=date), user_id="u", infer=False, metadata={"session": date.date().isoformat()})


@pytest.mark.parametrize("speaker", ["Caroline", "Melanie"])
def test_what_did_a_speaker_say_last_week_ranks_their_turns_of_that_week_first(tmp_path: Path, speaker: str) -> None:
    """The issue's example, for both speakers and every week of the conversation."""
    with open_memory(tmp_path) as memory:
        _sessions(memory)
        misses = []
        for date, pairs in SESSIONS:
            asked = date + timedelta(days=5)
            wanted = {text for name, text in pairs if name == speaker}
            results = memory.search(f"What did {speaker} say last week?", user_id="u", limit=len(wanted), reference_time=asked)
            got = {r["memory"] for r in results["results"]}
            if got != wanted:
                misses.append(
                    (asked.date().isoformat(), [(r["metadata"]["name"], r["created_at"][:10], r["memory"]) for r in results["results"]])
                )
        assert not misses, f"not {speaker}'s turns of that week first: {misses}"


def test_reference_time_moves_the_window(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        _sessions(memory)
        early = memory.search("What did Caroline say last week?", user_id="u", limit=1, reference_time=D(4, 23))
        late = memory.search("What did Caroline say last week?", user_id="u", limit=1, reference_time="2023-06-14T15:00:00+00:00")
        assert early["results"][0]["created_at"].startswith("2023-04-18"), early
        assert late["results"][0]["created_at"].startswith("2023-06-09"), late


@pytest.mark.parametrize("query", ["What happened on 22 May 2023?", "What did we discuss on May 22, 2023?"])
def test_a_named_date_finds_that_days_turns(tmp_path: Path, query: str) -> None:
    with open_memory(tmp_path) as memory:
        _sessions(memory)
        results = memory.search(query, user_id="u", limit=4, reference_time=D(12, 1))
        assert {r["memory"] for r in results["results"]} == {t for _, t in SESSIONS[3][1]}, texts(results)


def test_reference_time_defaults_to_now(tmp_path: Path) -> None:
    with open_memory(tmp_path) as memory:
        _sessions(memory)
        recent = datetime.now(UTC) - timedelta(days=3)
        memory.add(turns(("Caroline", "I planted tomatoes in the garden."), start=recent), user_id="u", infer=False)
        found = texts(memory.search("What did Caroline say last week?", user_id="u", limit=1))
        assert found == ["I planted tomatoes in the garden."], found


@pytest.mark.parametrize(
    "query",
    [
        "What did Caroline say?",
        "What did Caroline say about the puppy?",
        "Was Caroline in junior high when she started running?",  # "in jun..." is not June
    ],
)
def test_a_query_without_a_time_expression_ignores_reference_time(tmp_path: Path, query: str) -> None:
    with open_memory(tmp_path) as memory:
        _sessions(memory)

        def ranked(reference: Any) -> list[tuple[str, float]]:
            results = memory.search(query, user_id="u", limit=20, reference_time=reference)["results"]
            return [(r["memory"], r["score"]) for r in results]

        baseline = ranked(None)
        for reference in (D(4, 2), D(5, 23), D(3, 20), D(9, 1), "2024-03-15T00:00:00+00:00"):
            got = ranked(reference)
            assert got == baseline, (reference, got[:3], baseline[:3])


def test_time_weight_zero_turns_the_time_ranking_off(tmp_path: Path) -> None:
    with open_memory(tmp_path, time_weight=0.0) as memory:
        _sessions(memory)
        query = "What did Caroline say last week?"
        a = [r["id"] for r in memory.search(query, user_id="u", limit=20, reference_time=D(4, 23))["results"]]
        b = [r["id"] for r in memory.search(query, user_id="u", limit=20, reference_time=D(6, 14))["results"]]
        assert a == b


# the speaker ranking ---------------------------------------------------------------------
HIKING = [
    ("Melanie", "I love hiking, I go hiking in the hills every weekend."),
    ("Caroline", "I enjoy long walks in the mountains with my dog."),
    ("Melanie", "Hiking boots are the best gift."),
    ("Caroline", "I am learning to play the guitar."),
    ("Melanie", "We went hiking at the lake with the kids."),
]


def _hiking(memory: Memory) -> None:
    for pair in HIKING:
        memory.add(turns(pair), user_id="u", infer=False)


def _speakers(memory: Memory, query: str) -> list[str]:
    return [r["metadata"]["name"] for r in memory.search(query, user_id="u", limit=5)["results"]]


def test_speaker_weight_ranks_the_named_speakers_memories_higher(tmp_path: Path) -> None:
    with open_memory(tmp_path, "off.db", speaker_weight=0.0) as memory:
        _hiking(memory)
        off = _speakers(memory, "Does Caroline like hiking?")
    with open_memory(tmp_path, "on.db", speaker_weight=0.5) as memory:
        _hiking(memory)
        on = _speakers(memory, "Does Caroline like hiking?")
    # Without the lever a Melanie hiking turn sits between Caroline's two turns.
    assert off[:2] != ["Caroline", "Caroline"], off
    assert on[:2] == ["Caroline", "Caroline"], on
    last_caroline = lambda names: max(i for i, n in enumerate(names) if n == "Caroline")  # noqa: E731
    assert last_caroline(on) < last_caroline(off)


def test_speaker_weight_from_a_config_mapping(tmp_path: Path) -> None:
    memory = Memory.from_config({"path": str(tmp_path / "m.db"), "embedder": "hashing", "retrieval": {"speaker_weight": 1.0}})
    with memory:
        assert memory.config.retrieval.speaker_weight == 1.0
        _hiking(memory)
        assert _speakers(memory, "Does Caroline like hiking?")[:2] == ["Caroline", "Caroline"]


def test_speaker_weight_changes_nothing_when_no_speaker_is_named(tmp_path: Path) -> None:
    def ranked(weight: float) -> list[tuple[str, float]]:
        with open_memory(tmp_path, f"w{weight}.db", speaker_weight=weight) as memory:
            _hiking(memory)
            return [(r["memory"], r["score"]) for r in memory.search("Who likes hiking?", user_id="u", limit=5)["results"]]

    assert ranked(1.0) == ranked(0.0)


def test_a_name_inside_another_word_is_not_a_speaker(tmp_path: Path) -> None:
    with open_memory(tmp_path, speaker_weight=1.0) as memory:
        memory.add(turns(("Al", "I bake bread on Sundays.")), user_id="u", infer=False)
        memory.add(turns(("Bo", "I like almonds and salad.")), user_id="u", infer=False)
        # "almonds" and "salad" contain "al" but name nobody
        found = texts(memory.search("Who likes almonds?", user_id="u", limit=1))
        assert found == ["I like almonds and salad."], found


# fusion weights --------------------------------------------------------------------------
DOCS = [
    "Cheap flights to Lisbon are easiest to find in spring.",
    "Lisbon, Lisbon, Lisbon: tram 28 and pastel de nata.",
    "I booked flights for the spring holiday.",
    "Cheap hotels near the airport.",
    "Spring flowers in the garden.",
    "My flight to Porto was delayed.",
    "Travel tips: fly midweek for cheap fares to Portugal.",
    "The Lisbon marathon is in October.",
]
FLIGHTS = "cheap flights to Lisbon in spring"


def _docs(memory: Memory) -> None:
    for text in DOCS:
        memory.add(text, user_id="u", infer=False)  # plain text: the key is the text


def _cosines(memory: Memory, query: str) -> dict[str, float]:
    vectors = np.asarray(memory.embedder.embed(DOCS), dtype=np.float64)
    q = np.asarray(memory.embedder.embed_one(query), dtype=np.float64)
    sims = vectors @ q / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(q))
    return dict(zip(DOCS, sims.tolist(), strict=True))


def test_text_weight_zero_ranks_by_vector_similarity_alone(tmp_path: Path) -> None:
    with open_memory(tmp_path, "v.db", text_weight=0.0) as memory:
        _docs(memory)
        cos = _cosines(memory, FLIGHTS)
        found = texts(memory.search(FLIGHTS, user_id="u", limit=len(DOCS)))
        assert sorted(found) == sorted(DOCS)
        got = [cos[t] for t in found]
        assert all(a >= b - 1e-6 for a, b in zip(got, got[1:], strict=False)), list(zip(found, got, strict=True))
        assert found == sorted(DOCS, key=lambda t: -cos[t])
    # The default fusion does not rank purely by vector on this set (so the
    # assertion above can tell the difference).
    with open_memory(tmp_path, "d.db") as memory:
        _docs(memory)
        fused = texts(memory.search(FLIGHTS, user_id="u", limit=len(DOCS)))
        assert fused != sorted(DOCS, key=lambda t: -cos[t])


def test_vector_weight_zero_returns_only_lexical_matches(tmp_path: Path) -> None:
    with open_memory(tmp_path, vector_weight=0.0) as memory:
        _docs(memory)
        found = texts(memory.search("Lisbon tram", user_id="u", limit=len(DOCS)))
        assert set(found) == {t for t in DOCS if "Lisbon" in t}, found
        assert found[0] == "Lisbon, Lisbon, Lisbon: tram 28 and pastel de nata."


def test_rrf_k_is_used_by_search(tmp_path: Path) -> None:
    # Fused scores are weight / (rrf_k + rank) summed and divided by the best
    # possible total: a small rrf_k lets the top ranks dominate, spreading scores.
    scores = {}
    for k in (0, 60):
        with open_memory(tmp_path, f"k{k}.db", rrf_k=k) as memory:
            _docs(memory)
            results = memory.search("Lisbon tram", user_id="u", limit=len(DOCS))["results"]
            scores[k] = sorted((r["score"] for r in results), reverse=True)
    assert scores[0] != scores[60]
    # A smaller rrf_k spreads the scores further apart.
    assert scores[0][0] - scores[0][-1] > scores[60][0] - scores[60][-1]


def test_the_threshold_agrees_with_the_similarity_reported(tmp_path: Path) -> None:
    """Before, the threshold was compared with the unrounded similarity: a result's
    own reported similarity, used as the threshold, dropped it (9 of 25 here), and a
    result could come back reported below the threshold asked for."""
    with open_memory(tmp_path) as memory:
        for text in ["tea hiking paris note0", "dog cat sushi note1", "guitar march running note2",
                     "piano berlin tea note3", "coffee dog piano note4"]:
            memory.add(text, user_id="u", infer=False)
        for query in ["tea", "dog", "piano", "march", "coffee hiking", "note5"]:
            for result in memory.search(query, user_id="u", limit=5)["results"]:
                shown = result["similarity"]
                kept = memory.search(query, user_id="u", limit=5, threshold=shown)["results"]
                assert result["id"] in {r["id"] for r in kept}, (query, result["memory"], shown)
                assert all(r["similarity"] >= shown for r in kept)
                above = min(1.0, shown + 1e-10)
                if above > shown:
                    higher = memory.search(query, user_id="u", limit=5, threshold=above)["results"]
                    assert result["id"] not in {r["id"] for r in higher}, (query, result["memory"], shown)
                    assert all(r["similarity"] >= above for r in higher)


@pytest.mark.parametrize(
    "settings, named",
    [
        ({"rrf_k": 2.5}, "retrieval.rrf_k"),
        ({"rrf_k": 10.0}, "retrieval.rrf_k"),
        ({"rrf_k": True}, "retrieval.rrf_k"),
        ({"candidates": 100.5}, "retrieval.candidates"),
        ({"candidates": "100"}, "retrieval.candidates"),
        ({"vector_weight": 0, "text_weight": 0}, "retrieval.vector_weight and retrieval.text_weight"),
        ({"vector_weight": 0.0, "text_weight": 0.0, "time_weight": 1.0, "speaker_weight": 1.0}, "retrieval.vector_weight"),
        ({"time_from_latest": "no"}, "retrieval.time_from_latest"),
        ({"speaker_keys": 1}, "retrieval.speaker_keys"),
        ({"context_keys": None}, "retrieval.context_keys"),
        ({"fact_keys": "false"}, "retrieval.fact_keys"),
    ],
)
def test_retrieval_settings_every_search_would_fail_or_misread_are_refused_by_name(tmp_path: Path, settings: dict[str, Any], named: str) -> None:
    """Before, a fractional rrf_k or candidates was taken and every search then raised
    TypeError; both weights at 0 made every search empty; "no" counted as true."""
    with pytest.raises(ConfigurationError, match=named):
        Memory(str(tmp_path / "m.db"), embedder="hashing", config=MemoryConfig.from_mapping({"retrieval": settings}))


@pytest.mark.parametrize("settings", [{"rrf_k": 0}, {"candidates": 1}, {"vector_weight": 0}, {"text_weight": 0}, {"time_from_latest": False}])
def test_whole_numbers_and_one_ranking_left_are_taken(tmp_path: Path, settings: dict[str, Any]) -> None:
    with Memory(str(tmp_path / "m.db"), embedder="hashing", config=MemoryConfig.from_mapping({"retrieval": settings})) as memory:
        memory.add("I like green tea", user_id="u", infer=False)
        assert [r["memory"] for r in memory.search("green tea", user_id="u")["results"]] == ["I like green tea"]


def test_a_retrieval_setting_changed_on_a_live_memory_is_checked_and_a_refused_one_changes_nothing(tmp_path: Path) -> None:
    """Settings were checked only when the Memory was built: ``rrf_k = -1`` set on its
    config afterwards was taken, and a dict assigned as ``retrieval`` made every
    search raise AttributeError."""
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as memory:
        memory.add("I like green tea", user_id="u", infer=False)
        retrieval = memory.config.retrieval
        for name, bad in (("rrf_k", -1), ("candidates", 0), ("question_discount", float("nan")), ("fact_keys", "no")):
            before = getattr(retrieval, name)
            with pytest.raises(ConfigurationError, match=f"retrieval.{name}"):
                setattr(retrieval, name, bad)
            assert getattr(retrieval, name) == before
        retrieval.vector_weight = 0
        with pytest.raises(ConfigurationError, match="retrieval.vector_weight and retrieval.text_weight"):
            retrieval.text_weight = 0
        assert retrieval.text_weight == 1.0
        retrieval.vector_weight = 1.0
        with pytest.raises(ConfigurationError, match="retrieval.candidates"):
            RetrievalConfig(candidates=0)
        with pytest.raises(ConfigurationError, match="retrieval.rrf_k"):
            dataclasses.replace(retrieval, rrf_k=2.5)
        for bad, named in (("fast", "RetrievalConfig or a mapping"), (None, "RetrievalConfig or a mapping"), ({"rrf": 5}, "unknown retrieval key"), ({"rrf_k": -3}, "retrieval.rrf_k")):
            with pytest.raises(ConfigurationError, match=named):
                memory.config.retrieval = bad
            assert memory.config.retrieval is retrieval
        memory.config.retrieval = {"rrf_k": 7}  # a mapping of settings, as at the start
        assert memory.config.retrieval == RetrievalConfig(rrf_k=7)
        assert [r["memory"] for r in memory.search("green tea", user_id="u")["results"]] == ["I like green tea"]


def test_a_mapping_given_as_the_retrieval_of_a_memory_config_is_taken_and_checked(tmp_path: Path) -> None:
    config = MemoryConfig(path=str(tmp_path / "m.db"), embedder="hashing", retrieval={"candidates": 50})
    assert config.retrieval == RetrievalConfig(candidates=50)
    with Memory(config=config) as memory:
        assert memory.config.retrieval.candidates == 50
    with pytest.raises(ConfigurationError, match=r"unknown retrieval key\(s\) 1"):
        MemoryConfig(retrieval={1: 2})
