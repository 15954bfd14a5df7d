"""Playbook.cleanup (``memorist analyze cleanup``) merges only alike advice, and keeps
the evidence of what it merges."""

from __future__ import annotations

from ace_helpers import MappedEmbedder

from memorist import Playbook

at, axis = MappedEmbedder.at, MappedEmbedder.axis

WITH = "Retry the request with exponential backoff on HTTP 429"
ALSO = "Retry the request with exponential backoff when rate limited"
WITHOUT = "Retry the request without exponential backoff on HTTP 429"
OBSERVED = "Retried the request with exponential backoff"


def _strategies(mem) -> dict[str, list[tuple[str, int, float]]]:
    book = mem.learning.get_playbook("api", user_id="sam")
    return {c: sorted((s["pattern"], s["evidence_count"], s["confidence"]) for s in found) for c, found in book["strategies"].items()}


def test_cleanup_never_merges_a_strategy_into_an_anti_pattern(mem, embedder) -> None:
    """A ✓ strategy and the ✗ anti-pattern of its opposite (cosine 0.94) were merged:
    the ✓ advice was gone, and so was its evidence."""
    mem.learning_config = {"merge_threshold": 0.99}  # curation leaves them apart
    embedder.mapping.update({WITH: axis(0), ALSO: at(0.93), WITHOUT: at(0.94), OBSERVED: at(0.95, 0, 2)})
    learning = mem.learning
    learning.update_playbook([{"pattern": WITH, "category": "helpful", "confidence": 0.9, "evidence_count": 20}], "api", user_id="sam")
    learning.update_playbook([{"pattern": WITHOUT, "category": "harmful", "confidence": 0.9, "evidence_count": 20}], "api", user_id="sam")
    learning.update_playbook([{"pattern": OBSERVED, "category": "neutral"}], "api", user_id="sam")
    plan = Playbook(mem).cleanup("sam", dry_run=True)
    assert plan["clusters"] == [] and plan["would_merge"] == 0
    assert Playbook(mem).cleanup("sam")["merged"] == 0
    assert _strategies(mem) == {"helpful": [(WITH, 20, 0.9)], "harmful": [(WITHOUT, 20, 0.9)], "neutral": [(OBSERVED, 0, 0.5)]}


def test_a_cleanup_merge_keeps_the_evidence_of_both(mem, embedder) -> None:
    """The merged strategy's evidence was dropped: the survivor kept its own count and
    confidence only."""
    mem.learning_config = {"merge_threshold": 0.99}
    embedder.mapping.update({WITH: axis(0), ALSO: at(0.93), WITHOUT: at(0.94)})
    learning = mem.learning
    learning.update_playbook([{"pattern": WITH, "category": "helpful", "confidence": 0.9, "evidence_count": 20}], "api", user_id="sam")
    learning.update_playbook([{"pattern": ALSO, "category": "helpful", "confidence": 0.6, "evidence_count": 10}], "api", user_id="sam")
    learning.update_playbook([{"pattern": WITHOUT, "category": "harmful", "confidence": 0.9, "evidence_count": 20}], "api", user_id="sam")
    result = Playbook(mem).cleanup("sam")
    assert result["merged"] == 1
    (cluster,) = result["clusters"]
    assert cluster["merged_content"] == [ALSO]
    assert _strategies(mem) == {"helpful": [(WITH, 30, 0.8)], "harmful": [(WITHOUT, 20, 0.9)], "neutral": []}
    # The merge is undone as a run-time one is: both come back as they were.
    (merge,) = [e for e in mem.store.events(None, ops=["merge"]) if "undo" in e.payload]
    mem.rollback(merge.seq)
    assert _strategies(mem)["helpful"] == sorted([(WITH, 20, 0.9), (ALSO, 10, 0.6)])


def test_cleanup_never_merges_a_tutoring_strategy_into_an_anti_pattern(mem, embedder) -> None:
    loose = Playbook(mem, reinforce_threshold=0.99, dedup_threshold=0.99)
    embedder.mapping.update({"Use pizza slices for fractions": axis(0), "Never use pizza slices for fractions": at(0.95)})
    turn = loose.turn("sam", "c1")
    turn.learn(question="q", topic="fractions", lessons=[{"content": "Use pizza slices for fractions", "type": "strategy"},
                                                          {"content": "Never use pizza slices for fractions", "type": "anti_pattern"}])
    assert len(loose.bullets("sam")) == 2
    assert loose.cleanup("sam")["merged"] == 0
    assert sorted(b.content for b in loose.bullets("sam")) == ["Never use pizza slices for fractions", "Use pizza slices for fractions"]
