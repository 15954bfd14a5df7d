"""Invariants under arbitrary streams of lessons (hypothesis): a playbook never grows
past ``max_bullets``, a turn never adds more than ``max_new``, every bullet keeps one
memory class, and the category index matches the tags. On each backend."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorist import Memory, Playbook
from memorist.policies.decay import CLASSES
from memorist.policies.taxonomy import CLASS_KEYWORDS

BASES = [
    "Find a common denominator before adding",
    "Use pizza slices to show equal parts",
    "Sam adds the denominators",
    "Line decimals up and pad with zeros",
    "Walk along a number line",
    "Circle the multiplication first",
    "Tile the rectangle with unit squares",
    "Sam prefers one example at a time",
]
SUFFIXES = ["", ".", " first", " every time", " please", " again and again"]
lesson = st.fixed_dictionaries({
    "content": st.tuples(st.sampled_from(BASES), st.sampled_from(SUFFIXES)).map("".join),
    "type": st.sampled_from(["strategy", "anti_pattern", "experience", "preference", "fact", "observation"]),
    "tags": st.lists(st.sampled_from(["Visual", "semantic", "procedural", "fractions", "Step By Step"]), max_size=3),
})
turn = st.tuples(
    st.sampled_from(["sam", "ana"]),
    st.sampled_from(["fractions", "decimals", "general"]),
    st.lists(lesson, max_size=5),
    st.sampled_from([None, "success", "failure"]),
)


# ``backend`` is shared by the examples; each opens a store of its own (``backend.fresh()``).
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    max_bullets=st.integers(min_value=1, max_value=6),
    max_new=st.integers(min_value=0, max_value=3),
    preset=st.sampled_from(["ltmbse", "baseline"]),
    turns=st.lists(turn, min_size=1, max_size=8),
)
def test_no_stream_of_lessons_breaks_the_bounds(backend, max_bullets, max_new, preset, turns):
    with Memory(backend.fresh(), embedder="hashing") as memory:  # an empty store for each example
        pb = Playbook(memory, preset=preset, max_bullets=max_bullets, max_new=max_new)
        for i, (learner, topic, lessons, outcome) in enumerate(turns):
            t = pb.turn(learner, f"c{i}")
            t.retrieve(lessons[0]["content"] if lessons else "anything")
            result = t.learn(question="q", lessons=lessons, topic=topic, outcome=outcome)
            if preset == "ltmbse":
                assert result["num_new_bullets"] <= max_new
            for who in {"sam", "ana"}:
                state = pb.pipeline.load(who)
                assert len(state) <= max_bullets
                for record in state.records.values():
                    cls = record.memory_class.value
                    assert [c for c in CLASSES if record.strengths[c] > 0] == [cls]
                    if preset == "ltmbse":
                        assert [x for x in record.tags if x in CLASS_KEYWORDS] == [cls]
                        assert all(x == x.lower() and " " not in x for x in record.tags)
                expected: dict[str, set[str]] = {}
                for record in state.records.values():
                    for tag in record.tags:
                        expected.setdefault(tag, set()).add(record.id)
                assert state.categories == expected
