"""Two writers learning the same lesson at the same moment end with one bullet (on each backend)."""

from __future__ import annotations

import threading

import pytest
from ace_helpers import MappedEmbedder

from memorist import Memory, Playbook

LESSON = "Remind the learner that 1/2 becomes 3/6"


def _race(turns, lessons):
    """Both turns load the (empty) playbook first, then both learn at once."""
    for t in turns:
        assert t.size == 0
    barrier = threading.Barrier(len(turns))
    errors: list[BaseException] = []
    results: list[dict] = []

    def work(t, lesson):
        try:
            barrier.wait()
            results.append(t.learn(question="q", lessons=[lesson], topic="fractions"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t, x)) for t, x in zip(turns, lessons, strict=True)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert not errors, errors
    return results


@pytest.mark.parametrize("twin", [LESSON, "remind the learner that 1/2 becomes 3/6.", "Remind the learner: 1/2 becomes 3/6"])
def test_two_memory_instances_on_one_store(backend, twin):
    path = backend.target
    embedder = MappedEmbedder({LESSON: MappedEmbedder.axis(0), twin: MappedEmbedder.at(0.97) if twin != LESSON else MappedEmbedder.axis(0)})
    m1, m2 = Memory(path, embedder=embedder), Memory(path, embedder=embedder)
    try:
        results = _race([Playbook(m1).turn("sam", "c1"), Playbook(m2).turn("sam", "c2")], [LESSON, twin])
        assert sorted(r["num_new_bullets"] for r in results) == [0, 1]
        assert sorted(r["num_updates"] for r in results) == [0, 1]
        for m in (m1, m2):
            (b,) = Playbook(m).bullets("sam")
            assert b.helpful == 2
        assert len(m1.learning.list_playbook_versions("per-learner", user_id="sam")) == 2  # one header for both writers
    finally:
        m1.close()
        m2.close()


def test_two_threads_sharing_one_memory(backend):
    embedder = MappedEmbedder({LESSON: MappedEmbedder.axis(0)})
    with Memory(backend.target, embedder=embedder) as memory:
        pb = Playbook(memory)
        _race([pb.turn("sam", "c1"), pb.turn("sam", "c2")], [LESSON, LESSON])
        (b,) = pb.bullets("sam")
        assert b.helpful == 2
        adds = [e for e in memory.events(user_id="sam") if e["event"] == "ADD"]
        assert sum(e["payload"].get("delta") == "new" for e in adds) == 1  # one bullet
        # Its playbook (spec 001): one header, one version per change.
        assert sum(e["run_id"] == "memorist:playbook" and "scope" in e["payload"] for e in adds) == 1
        assert [v["version"] for v in memory.learning.list_playbook_versions("per-learner", user_id="sam")] == [1, 2]
        assert memory.learning.get_playbook("per-learner", user_id="sam")["version"] == 2
