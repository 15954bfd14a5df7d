"""The learning loop through the public API: reinforce vs clone, the cap, pruning,
merging, the single-class invariant, retrieval, persistence and load cadence."""

from __future__ import annotations

import re

import pytest
from ace_helpers import STORE_NAMES, MappedEmbedder

from memorist import Bullet, Curator, Delta, Lesson, Memory, Playbook, PlaybookConfig, ValidationError
from memorist.ace import format_context
from memorist.policies.decay import CLASSES
from memorist.policies.taxonomy import CLASS_KEYWORDS
from memorist.roles.learning import CurationInput, NewBullet, Reflection, Similar

at, axis = MappedEmbedder.at, MappedEmbedder.axis


def learn(pb: Playbook, *lessons: str | dict, learner: str = "sam", conv: str = "c1", topic: str = "fractions", **trace) -> dict:
    items = [x if isinstance(x, dict) else {"content": x, "type": "strategy"} for x in lessons]
    return pb.turn(learner, conv).learn(question=trace.pop("question", "q"), lessons=items, topic=topic, **trace)


def bullets(pb: Playbook, learner: str = "sam") -> dict[str, Bullet]:
    return {b.content: b for b in pb.bullets(learner)}


def assert_single_class(pb: Playbook, learner: str = "sam") -> None:
    state = pb.pipeline.load(learner)
    for record in state.records.values():
        cls = record.memory_class.value
        assert [c for c in CLASSES if record.strengths[c] > 0] == [cls]
        assert [t for t in record.tags if t in CLASS_KEYWORDS] == [cls]
    # The category index is exactly the tags.
    expected: dict[str, set[str]] = {}
    for record in state.records.values():
        for tag in record.tags:
            expected.setdefault(tag, set()).add(record.id)
    assert state.categories == expected


# --- reinforce over clone -------------------------------------------------------------------
@pytest.mark.parametrize(("similarity", "reinforced"), [(0.9, True), (0.95, True), (0.89, False), (0.5, False)])
def test_reinforce_over_clone_on_both_sides_of_0_9(embedder, playbook, similarity, reinforced, ace_logs):
    embedder.mapping.update({"Find a common denominator": axis(0), "Variant lesson": at(similarity)})
    assert learn(playbook, "Find a common denominator")["num_new_bullets"] == 1
    ace_logs.clear()
    result = learn(playbook, {"content": "Variant lesson", "type": "strategy", "source": "k2"}, conv="c2")
    held = bullets(playbook)
    if reinforced:
        assert (result["num_new_bullets"], result["num_updates"]) == (0, 1)
        assert list(held) == ["Find a common denominator"]
        base = held["Find a common denominator"]
        assert base.helpful == 2 and "k2" in base.sources
        assert f"[Curator][Heuristic Reinforce] id={base.id} score={similarity:.3f} content=Variant lesson" in ace_logs()
    else:
        assert (result["num_new_bullets"], result["num_updates"]) == (1, 0)
        assert set(held) == {"Find a common denominator", "Variant lesson"}
        assert held["Find a common denominator"].helpful == 1


def test_reinforcement_stays_within_the_topic(embedder, playbook):
    embedder.mapping.update({"Draw a picture": axis(0), "Draw a picture first": at(0.97)})
    learn(playbook, "Draw a picture", topic="fractions")
    assert learn(playbook, "Draw a picture first", topic="geometry")["num_new_bullets"] == 1
    assert len(bullets(playbook)) == 2


def test_the_same_lesson_twice_in_one_turn_is_one_bullet(embedder, playbook):
    embedder.mapping.update({"Use a number line": axis(3), "Use a number line.": axis(3)})
    result = learn(playbook, {"content": "Use a number line", "source": "a"}, {"content": "Use a number line.", "source": "b"})
    assert result["num_new_bullets"] == 1
    (b,) = bullets(playbook).values()
    assert b.helpful == 2 and set(b.sources) == {"a", "b"}


# --- the cap on new bullets ------------------------------------------------------------------------
def test_at_most_max_new_per_turn_and_the_overflow_reinforces(embedder, playbook, ace_logs):
    embedder.mapping.update({"Existing": axis(0), **{f"Lesson {i}": at(0.3 + 0.1 * i, 0, 2 + i) for i in range(4)}})
    learn(playbook, "Existing")
    ace_logs.clear()
    result = learn(playbook, "Lesson 0", "Lesson 1", "Lesson 2", "Lesson 3", conv="c2")
    assert result["num_new_bullets"] == 2
    held = bullets(playbook)
    assert set(held) == {"Existing", "Lesson 0", "Lesson 1"}
    assert held["Existing"].helpful == 3  # 1 + the two overflowing lessons
    overflow = [m for m in ace_logs() if m.startswith("[Curator][Heuristic ReinforceOverflow]")]
    assert overflow == [
        f"[Curator][Heuristic ReinforceOverflow] id={held['Existing'].id} score=0.500 content=Lesson 2",
        f"[Curator][Heuristic ReinforceOverflow] id={held['Existing'].id} score=0.600 content=Lesson 3",
    ]


def test_max_new_comes_from_the_environment_at_build_time(embedder, mem, monkeypatch):
    monkeypatch.setenv("ACE_CURATOR_MAX_NEW", "3")
    pb = Playbook(mem)
    monkeypatch.setenv("ACE_CURATOR_MAX_NEW", "1")  # too late for this playbook
    embedder.mapping.update({f"L{i}": axis(2 + i) for i in range(5)})
    assert learn(pb, *(f"L{i}" for i in range(5)))["num_new_bullets"] == 3
    assert Playbook(mem).config.max_new == 1


def test_overflow_without_any_bullet_is_dropped_and_logged(embedder, mem, ace_logs):
    pb = Playbook(mem, max_new=1)
    embedder.mapping.update({"A": axis(2), "B": axis(3)})
    assert learn(pb, "A", "B")["num_new_bullets"] == 1
    assert any(m.startswith("[Curator][Heuristic ReinforceOverflow] id=- score=0.000 dropped") for m in ace_logs())


class GreedyCurator(Curator):
    """Proposes a new bullet for every lesson, ignoring the cap."""

    def _curate(self, data: CurationInput) -> Delta:
        return Delta(new=tuple(NewBullet(x.content, topic=data.topic, memory_type="procedural") for x in data.reflection.lessons))


def test_the_pipeline_enforces_the_cap_whatever_the_curator_proposes(embedder, mem, ace_logs):
    pb = Playbook(mem, curator=GreedyCurator(), use_llm=True)
    embedder.mapping.update({f"L{i}": axis(2 + i) for i in range(4)})
    assert learn(pb, "L0", "L1", "L2", "L3")["num_new_bullets"] == 2
    assert len(bullets(pb)) == 2
    assert sum(m.startswith("[Curator][Heuristic ReinforceOverflow]") for m in ace_logs()) == 2


# --- pruning ----------------------------------------------------------------------------------------
PRUNE_LINE = re.compile(
    r"^\[ACE Memory\]\[Prune\] Removing id=(?P<id>\S+) score=(?P<score>\d+\.\d{3}) helpful=(?P<h>\d+) "
    r"harmful=(?P<m>\d+) tags=\[(?P<tags>.*)\] content=(?P<content>.+)$"
)


def test_prune_keeps_max_bullets_ranked_by_score(embedder, mem, ace_logs):
    pb = Playbook(mem, max_bullets=2)
    embedder.mapping.update({"A": axis(2), "B": axis(3), "C": axis(4), "about A": axis(2)})
    learn(pb, "A", conv="c1")
    learn(pb, "B", conv="c2")
    pb.turn("sam", "c3").retrieve("about A")  # an access event: A is touched, B decays
    ace_logs.clear()
    result = learn(pb, "C", conv="c4")
    assert set(bullets(pb)) == {"A", "C"}  # B is newer than A but scores lower
    assert result["num_removals"] == 1 and result["num_new_bullets"] == 1
    lines = [m for m in ace_logs() if "[Prune]" in m or "Pruned" in m]
    m = PRUNE_LINE.match(lines[0])
    assert m and m["content"] == "B" and m["score"] == f"{0.998:.3f}" and (m["h"], m["m"]) == ("1", "0")
    assert m["tags"] == "'strategy', 'fractions', 'procedural'"
    assert lines[1] == "[ACE Memory] Pruned 1 low-quality bullets"


def test_prune_tie_break_is_helpful_then_newest(embedder, mem):
    pb = Playbook(mem, max_bullets=2)
    embedder.mapping.update({"A": axis(2), "B": axis(3), "C": axis(4)})
    learn(pb, "A", conv="c1")
    learn(pb, "B", conv="c2")
    learn(pb, "C", conv="c3")  # all score 1.0 and helpful 1: the oldest goes
    assert set(bullets(pb)) == {"B", "C"}
    pb2 = Playbook(mem, max_bullets=2)
    embedder.mapping.update({"D": axis(5)})
    learn(pb2, "D", conv="c4", outcome="success")  # no bullet was injected: nothing else changes
    assert set(bullets(pb2)) == {"C", "D"}


def test_prune_threshold_filters_retrieval_not_storage(embedder, mem):
    pb = Playbook(mem, decay_rates={"episodic": 0.5}, prune_threshold=0.3)
    embedder.mapping.update({"Sam mixes up signs": axis(2), "Use a number line": axis(3), "signs?": axis(2), "line?": axis(3)})
    learn(pb, {"content": "Sam mixes up signs", "type": "experience"}, {"content": "Use a number line", "type": "strategy"})
    turn = pb.turn("sam", "c2")
    for _ in range(2):  # two access events that do not touch the episodic bullet: 0.5 ** 2 = 0.25
        turn.retrieve("line?")
    assert [b.content for b in pb.turn("sam", "c3").retrieve("signs?")] == []
    assert "Sam mixes up signs" in bullets(pb)  # still stored: the threshold only filters retrieval


# --- merging -------------------------------------------------------------------------------------------
def test_a_new_bullet_that_duplicates_one_is_merged_on_write(embedder, mem, ace_logs):
    pb = Playbook(mem, reinforce_threshold=0.95)  # the curator adds it; the write-time check catches it
    embedder.mapping.update({"Draw the pizza": axis(0), "Draw a pizza": at(0.92)})
    learn(pb, "Draw the pizza")
    ace_logs.clear()
    result = learn(pb, {"content": "Draw a pizza", "source": "k9"}, conv="c2")
    (b,) = bullets(pb).values()
    assert (result["num_new_bullets"], result["num_updates"]) == (0, 1)
    assert b.helpful == 2 and "k9" in b.sources
    assert f"[ACE Memory][Delta Merge] kept={b.id} merged_score=0.920" in ace_logs()


def test_cleanup_merges_into_the_canonical_survivor(embedder, mem, ace_logs):
    loose = Playbook(mem, reinforce_threshold=0.99, dedup_threshold=0.99)
    embedder.mapping.update({"Old lesson": axis(0), "New lesson": at(0.95), "Far lesson": axis(6)})
    learn(loose, {"content": "Old lesson", "type": "experience", "tags": ["Visual"], "source": "s1"}, conv="c1")
    learn(loose, {"content": "New lesson", "type": "strategy", "tags": ["pizza"], "source": "s2"}, "Far lesson", conv="c2")
    held = bullets(loose)
    old, new = held["Old lesson"], held["New lesson"]
    plan = loose.cleanup("sam", dry_run=True)
    assert plan["would_merge"] == 1 and plan["clusters"][0]["kept"] == new.id  # same net signal: the newer
    assert len(bullets(loose)) == 3  # a dry run writes nothing
    ace_logs.clear()
    done = loose.cleanup("sam")
    assert done["merged"] == 1
    assert f"[ACE Memory][Dedup Merge] kept={new.id} merged={old.id}" in ace_logs()
    after = bullets(loose)
    survivor = after["New lesson"]
    assert set(after) == {"New lesson", "Far lesson"}
    assert survivor.id == new.id and survivor.helpful == 2  # ids stable, counters summed
    assert set(survivor.sources) == {"s1", "s2"} and "visual" in survivor.tags and "pizza" in survivor.tags
    assert survivor.memory_type == "procedural"
    assert [e.op for e in mem.store.history(old.id)][-1] == "merge"
    assert mem.store.get(old.id).lineage["merged_into"] == new.id
    assert_single_class(loose)


def test_the_dedup_pass_merges_what_a_turn_changed(embedder, mem, ace_logs):
    loose = Playbook(mem, reinforce_threshold=0.99, dedup_threshold=0.99)
    embedder.mapping.update({"Tip A": axis(0), "Tip B": at(0.95), "Tip A again": at(0.999)})
    learn(loose, "Tip A", conv="c1")
    learn(loose, "Tip B", conv="c2")
    assert len(bullets(loose)) == 2
    strict = Playbook(mem)  # the default 0.9: the two are now duplicates
    ace_logs.clear()
    result = learn(strict, "Tip A again", conv="c3")  # reinforces Tip A, then the dedup pass merges Tip B
    assert result["num_removals"] == 1 and len(result["merged"]) == 1
    assert any(m.startswith("[ACE Memory][Dedup Merge] kept=") for m in ace_logs())
    (survivor,) = bullets(strict).values()
    assert survivor.helpful == 3


def test_merge_across_classes_keeps_one_class(embedder, mem):
    loose = Playbook(mem, reinforce_threshold=None, dedup_threshold=0.999, cap_new=False)
    embedder.mapping.update({"X1": axis(0), "X2": at(0.97), "X3": at(0.96, 0, 2)})
    learn(loose, {"content": "X1", "type": "experience"}, {"content": "X2", "type": "strategy"}, {"content": "X3", "type": "fact"})
    assert {b.memory_type for b in bullets(loose).values()} == {"episodic", "procedural", "semantic"}
    loose.cleanup("sam", threshold=0.9)
    (left,) = bullets(loose).values()
    assert left.helpful == 3
    assert_single_class(loose)


# --- retrieval ---------------------------------------------------------------------------------------------
def test_retrieval_ranks_procedural_then_episodic_then_semantic(embedder, playbook):
    embedder.mapping.update({t: axis(2) for t in ("A fact", "An experience", "A strategy", "query")})
    for content, kind, topic in (("A fact", "fact", "t1"), ("An experience", "experience", "t2"), ("A strategy", "strategy", "t3")):
        learn(playbook, {"content": content, "type": kind}, topic=topic)
    got = playbook.turn("sam", "c9").retrieve("query")
    assert [b.memory_type for b in got] == ["procedural", "episodic", "semantic"]
    assert [b.content for b in playbook.turn("sam", "c9").retrieve("query", memory_types=["episodic"])] == ["An experience"]
    assert [b.content for b in playbook.turn("sam", "c9").retrieve("query", tags=["Fact"])] == ["A fact"]
    assert len(playbook.turn("sam", "c9").retrieve("query", top_k=1)) == 1
    # Within a class, at equal relevance, the bullet of the question's topic comes first.
    embedder.mapping["Another strategy"] = axis(2)
    learn(playbook, "Another strategy", topic="t4")
    assert [b.content for b in playbook.turn("sam", "c9").retrieve("query", topic="t4")][:2] == ["Another strategy", "A strategy"]
    assert [b.content for b in playbook.turn("sam", "c9").retrieve("query", topic="t3")][:2] == ["A strategy", "Another strategy"]


def test_retrieval_skips_unrelated_bullets_and_touches_what_it_returns(embedder, mem, playbook):
    embedder.mapping.update({"Relevant": axis(2), "Unrelated": axis(3), "question": at(0.8, 2, 4)})
    learn(playbook, "Relevant", "Unrelated")
    scope = playbook.pipeline.space("sam")
    assert mem.store.access_clock(scope) == 0
    got = playbook.turn("sam", "c2").retrieve("question")
    assert [b.content for b in got] == ["Relevant"] and got[0].relevance == pytest.approx(0.8, abs=1e-5)
    assert mem.store.access_clock(scope) == 1
    state = playbook.pipeline.load("sam")
    touched = {r.text: r.last_access["procedural"] for r in state.records.values()}
    assert touched == {"Relevant": 1, "Unrelated": 0}


def test_format_context_groups_by_section_in_ace_style():
    text = format_context([
        Bullet("s1", "Draw it", section="strategies_and_hard_rules", helpful=3, harmful=1),
        Bullet("p1", "Confuses signs", section="learner_profile", helpful=1),
        Bullet("m1", "Do not rush", section="common_mistakes"),
        Bullet("s2", "Use money", section="strategies_and_hard_rules"),
    ], title="Playbook")
    assert text.splitlines() == [
        "## Playbook",
        "### strategies_and_hard_rules",
        "[s1] helpful=3 harmful=1 :: Draw it",
        "[s2] helpful=0 harmful=0 :: Use money",
        "### common_mistakes",
        "[m1] helpful=0 harmful=0 :: Do not rush",
        "### learner_profile",
        "[p1] helpful=1 harmful=0 :: Confuses signs",
    ]
    assert format_context([]) == ""


# --- feedback on injected bullets ---------------------------------------------------------------------------
@pytest.mark.parametrize(("outcome", "feedback", "counts"), [
    ("success", None, (2, 0)), ("failure", None, (1, 1)), (None, "That didn't help at all", (1, 1)),
    (None, "Thanks, got it!", (2, 0)), (None, "ok", (1, 0)),
])
def test_injected_bullets_are_tagged_by_the_outcome(embedder, playbook, outcome, feedback, counts):
    embedder.mapping.update({"Use pizza slices": axis(2), "help with fractions": axis(2)})
    learn(playbook, "Use pizza slices")
    turn = playbook.turn("sam", "c2")
    assert [b.content for b in turn.retrieve("help with fractions")] == ["Use pizza slices"]
    turn.learn(question="help with fractions", outcome=outcome, feedback=feedback)
    b = bullets(playbook)["Use pizza slices"]
    assert (b.helpful, b.harmful) == counts


# --- persistence and load cadence ------------------------------------------------------------------------------
def test_a_new_conversation_of_the_same_learner_sees_what_was_learned(backend, embedder):
    path = backend.target
    embedder.mapping.update({"Remind Sam that 1/2 = 3/6": axis(2), "How do I add 1/2 + 1/3?": at(0.7, 2, 5)})
    with Memory(path, embedder=embedder) as m1:
        first = Playbook(m1).turn("sam", "monday")
        first.learn(question="I keep forgetting", lessons=["Remind Sam that 1/2 = 3/6"], topic="fractions")
    with Memory(path, embedder=embedder) as m2:  # a new process, days later
        turn = Playbook(m2).turn("sam", "friday")
        got = turn.retrieve("How do I add 1/2 + 1/3?")
        assert [b.content for b in got] == ["Remind Sam that 1/2 = 3/6"]
        assert got[0].conversation_id == "monday" and got[0].learner_id == "sam"
        assert turn.learn(question="How do I add 1/2 + 1/3?", outcome="success")["num_updates"] == 1
        assert Playbook(m2).turn("ana", "friday").retrieve("How do I add 1/2 + 1/3?") == []  # another learner
        assert m2.get_all(user_id="sam")["results"] == []  # a playbook's bullet is no fact
        playbook = m2.learning.get_playbook("per-learner", user_id="sam")  # it is the learner's playbook (spec 001)
        assert [e["pattern"] for e in playbook["strategies"]["helpful"]] == ["Remind Sam that 1/2 = 3/6"]


def test_state_is_loaded_once_per_turn(embedder, playbook, ace_logs, backend):
    embedder.mapping.update({"Draw it": axis(2), "q": axis(2)})
    learn(playbook, "Draw it")
    ace_logs.clear()
    turn = playbook.turn("sam", "c2")
    turn.retrieve("q")
    turn.retrieve("q")
    turn.learn(question="q", outcome="success", lessons=["Draw it"])
    loaded = [m for m in ace_logs() if m.startswith("[ACE Memory] Loaded")]
    assert loaded == [f"[ACE Memory] Loaded 1 bullets from {STORE_NAMES[backend.name]} for learner=sam"]


def test_the_baseline_reloads_on_every_access(embedder, mem, ace_logs):
    pb = Playbook.baseline(mem)
    embedder.mapping.update({"Draw it": axis(2), "q": axis(2)})
    turn = pb.turn("sam", "c1")
    turn.retrieve("q")
    turn.learn(question="q", lessons=["Draw it"])
    assert sum(m.startswith("[ACE Memory] Loaded") for m in ace_logs()) == 2


def test_the_baseline_shares_one_playbook_and_always_appends(embedder, mem):
    pb = Playbook.baseline(mem)
    embedder.mapping.update({"Draw the pizza": axis(0), "Draw a pizza": at(0.95)})
    learn(pb, "Draw the pizza", learner="sam")
    learn(pb, "Draw a pizza", learner="ana")
    shared = pb.bullets()
    assert {b.content for b in shared} == {"Draw the pizza", "Draw a pizza"}
    assert {b.learner_id for b in shared} == {"ace-shared"}
    # sam's bullet is seen by ana; ana's own ranks first (spec 000's learner boost), sam's first for sam.
    assert [b.content for b in pb.turn("ana", "c").retrieve("Draw the pizza")][:2] == ["Draw a pizza", "Draw the pizza"]
    assert [b.content for b in pb.turn("sam", "c").retrieve("Draw the pizza")][:2] == ["Draw the pizza", "Draw a pizza"]
    # Jaccard dedup keeps the first seen.
    learn(pb, "Draw the pizza slices now", learner="ana")  # jaccard 4/5 with "Draw the pizza": kept
    learn(pb, "draw the pizza  ", learner="ana")  # the same text: merged into the first
    held = {b.content: b for b in pb.bullets()}
    assert held["Draw the pizza"].helpful == 2 and "draw the pizza  " not in held


# --- the role seams -----------------------------------------------------------------------------------
class BrokenCurator(Curator):
    def _curate(self, data: CurationInput) -> Delta:
        raise ValueError("the model said something that is not JSON")


def test_a_failing_curator_falls_back_to_the_heuristic(embedder, mem, ace_logs):
    pb = Playbook(mem, curator=BrokenCurator(), use_llm=True)
    embedder.mapping.update({"Draw it": axis(2)})
    assert learn(pb, "Draw it")["num_new_bullets"] == 1
    assert any(m.startswith("[Curator] Falling back to HeuristicCurator: ValueError") for m in ace_logs())


def test_given_roles_are_used_only_when_the_switch_is_on(embedder, mem, monkeypatch):
    monkeypatch.delenv("ACE_CURATOR_USE_LLM", raising=False)
    off = Playbook(mem, curator=GreedyCurator())
    assert type(off.curator).__name__ == "HeuristicCurator"
    monkeypatch.setenv("ACE_CURATOR_USE_LLM", "true")
    on = Playbook(mem, curator=GreedyCurator())
    assert isinstance(on.curator, GreedyCurator) and type(on.curator.fallback).__name__ == "HeuristicCurator"


def test_role_data_round_trips_through_json():
    import json

    delta = Delta(new=(NewBullet("Draw it", tags=("a",), sources=("k",)),), removals=("x",), reasoning="r")
    assert Delta.from_dict(json.loads(json.dumps(delta.to_dict()))) == delta
    data = CurationInput(
        reflection=Reflection(lessons=(Lesson("L", tags=("t",)),)),
        candidates=((Similar(Bullet("b", "B"), 0.5),),),
        existing=(Bullet("b", "B"),),
        lesson_similarity=((1.0,),),
    )
    assert CurationInput.from_dict(json.loads(json.dumps(data.to_dict()))) == data


def test_bad_arguments_name_the_field(mem):
    pb = Playbook(mem)
    with pytest.raises(ValidationError, match="learner_id"):
        pb.turn("", "c1")
    with pytest.raises(ValidationError, match="max_bulets"):
        Playbook(mem, max_bulets=3)
    with pytest.raises(ValidationError, match="query"):
        pb.turn("sam").retrieve("  ")
    with pytest.raises(ValidationError, match="lessons"):
        pb.turn("sam").learn(question="q", lessons=[{"text": "no content key"}])


def test_playbook_config_object_and_memory_share_the_store(mem, embedder):
    pb = Playbook(mem, PlaybookConfig.per_learner_preset(max_bullets=7))
    assert pb.config.max_bullets == 7 and pb.memory is mem
