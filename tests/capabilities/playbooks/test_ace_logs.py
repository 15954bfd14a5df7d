"""Every log line spec 000 names, captured in its exact format."""

from __future__ import annotations

import re

from ace_helpers import STORE_NAMES, MappedEmbedder

from memorist import Playbook
from memorist.policies.text import preview

at, axis = MappedEmbedder.at, MappedEmbedder.axis

ID = r"[0-9a-f-]{36}"
SPEC_LINES = {
    "loaded": r"^\[ACE Memory\] Loaded \d+ bullets from {store} for learner=sam$",
    "inject": r"^\[ACE Memory\]\[Inject\] Retrieved \d+ bullets for question: .+$",
    "inject_bullet": rf"^\[ACE Memory\]\[Inject\] id={ID} score=\d+\.\d{{3}} helpful=\d+ harmful=\d+ tags=\[.*\] content=.+$",
    "reinforce": rf"^\[Curator\]\[Heuristic Reinforce\] id={ID} score=0\.9\d\d content=.+$",
    "overflow": rf"^\[Curator\]\[Heuristic ReinforceOverflow\] id={ID} score=\d\.\d{{3}} content=.+$",
    "delta_merge": rf"^\[ACE Memory\]\[Delta Merge\] kept={ID} merged_score=0\.9\d\d$",
    "dedup_merge": rf"^\[ACE Memory\]\[Dedup Merge\] kept={ID} merged={ID}$",
    "prune": rf"^\[ACE Memory\]\[Prune\] Removing id={ID} score=\d+\.\d{{3}} helpful=\d+ harmful=\d+ tags=\[.*\] content=.+$",
    "pruned": r"^\[ACE Memory\] Pruned \d+ low-quality bullets$",
    "summary": r"^\[ACE Runner\] Memory delta summary new=\d+ updates=\d+ removals=\d+$",
}


def test_every_spec_log_line_is_emitted(embedder, mem, ace_logs, backend):
    embedder.mapping.update({
        "Draw the fractions": axis(0), "Draw the fractions again": at(0.95),  # reinforce
        "Near twin": at(0.93, 0, 3),  # merged on write (curator threshold raised below)
        "A": axis(5), "B": axis(6),
        "C": at(0.8, 0, 7),  # past the cap: reinforces "Draw the fractions" (similar enough; an unrelated one is dropped)
        "How do I add 1/2 + 1/3?": at(0.9, 0, 4),
    })
    pb = Playbook(mem, max_bullets=3, max_new=2)
    turn = pb.turn("sam", "c1")
    turn.retrieve("How do I add 1/2 + 1/3?")
    turn.learn(question="How do I add 1/2 + 1/3?", lessons=["Draw the fractions"], topic="fractions")
    turn = pb.turn("sam", "c2")
    turn.retrieve("How do I add 1/2 + 1/3?")
    turn.learn(question="How do I add 1/2 + 1/3?", outcome="success", topic="fractions",
               lessons=["Draw the fractions again", "A", "B", "C"])  # reinforce, two new, one overflow, prune
    strict = Playbook(mem, reinforce_threshold=0.99, max_bullets=3)
    strict.turn("sam", "c3").learn(question="q", lessons=["Near twin"], topic="fractions")
    loose = Playbook(mem, reinforce_threshold=None, dedup_threshold=0.999, cap_new=False, max_bullets=4)
    embedder.mapping.update({"Twin 1": axis(9), "Twin 2": at(0.97, 9, 10)})
    loose.turn("sam", "c4").learn(question="q", lessons=["Twin 1", "Twin 2"], topic="algebra")
    Playbook(mem, max_bullets=10).cleanup("sam")

    messages = ace_logs()
    for name, pattern in SPEC_LINES.items():
        pattern = pattern.replace("{store}", STORE_NAMES[backend.name])
        assert any(re.match(pattern, m) for m in messages), f"no {name} line matching {pattern!r} in:\n" + "\n".join(messages)
    assert "[Curator] Using heuristic delta generation (LLM disabled)." in messages


def test_log_previews_show_prefix_and_length():
    assert preview("short") == "short"
    long = "x" * 300
    assert preview(long) == "x" * 120 + "… [len=300]"
    assert preview(long, 10) == "xxxxxxxxxx… [len=300]"


def test_inject_logs_the_question_shortened(embedder, playbook, ace_logs):
    question = "How do I add fractions? " * 20
    playbook.turn("sam", "c1").retrieve(question)
    (line,) = [m for m in ace_logs() if "Retrieved" in m]
    assert line == f"[ACE Memory][Inject] Retrieved 0 bullets for question: {question[:120]}… [len={len(question)}]"
