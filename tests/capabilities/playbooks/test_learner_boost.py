"""Spec 000's learner boost acts: a bullet carries the learner whose turn taught it, and
in the shared (baseline) playbook each learner's own bullets rank first."""

from __future__ import annotations

from memorist import Memory, Playbook


def test_each_learner_s_own_bullet_ranks_first_in_the_shared_playbook(backend) -> None:
    with Memory(backend.target, embedder="hashing") as memory:
        playbook = Playbook(memory, preset="baseline")
        playbook.learn(learner_id="sam", question="Please remind me that a fraction bar means division.", outcome="success")
        playbook.learn(learner_id="kim", question="Please remind me that the fraction bar means divide the top by the bottom.", outcome="success")
        query = "what does the fraction bar mean"
        sam = [b.content for b in playbook.retrieve(query, learner_id="sam")]
        kim = [b.content for b in playbook.retrieve(query, learner_id="kim")]
        assert sam[0] == "Remind the learner that a fraction bar means division"
        assert kim[0] == "Remind the learner that the fraction bar means divide the top by the bottom"
        bullets = {b.id: b.content for b in playbook.retrieve(query, learner_id="sam")}
        owners = {bullets[i]: r.metadata.get("learner_id") for i, r in memory.store.get_many(list(bullets)).items()}
        assert owners == {sam[0]: "sam", kim[0]: "kim"}
