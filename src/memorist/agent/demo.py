"""``memorist demo --agent``: the tutor's graph over two conversations, offline.

1. Monday: the learner asks a fraction question; the router picks ``react`` and
   the calculator answers it exactly, with no model.
2. The learner says what confuses them and what helped: the learning node turns the
   feedback into at most two playbook bullets.
3. Friday, a new conversation: the bullet learned on Monday is injected into the
   solver's context, and the answer shows it.

>>> result = run_agent_demo(None, echo=lambda *a: None, embedder="hashing")
>>> result["monday"]["answer"], result["monday"]["reasoning_mode"]
('1/2 + 1/3 = 5/6', 'react')
>>> result["learned"] <= 2 and result["friday"]["injected_learned_bullet"]
True
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from ..memory import Memory
from .tutor import Tutor

LEARNER = "sam"
TURNS = [
    ("monday", "What is 1/2 + 1/3?", None),
    ("monday", "I get confused when adding fractions with different denominators. Please remind me that 1/2 becomes 3/6.",
     "Thanks, that helped!"),
    ("friday", "How do I add fractions with different denominators, like 1/4 + 1/6?", None),
]


def run_agent_demo(db_path: str | None, *, echo: Callable[[str], Any] = print, embedder: Any = None, keep: bool = False) -> dict[str, Any]:
    """Run the demo against ``db_path`` (None: a new temporary store, removed at the
    end unless ``keep``). Returns what each conversation produced."""
    if db_path is not None:
        return _run(str(db_path), echo, embedder)
    folder = tempfile.mkdtemp(prefix="memorist-demo-agent-")
    try:
        result = _run(os.path.join(folder, "memorist.db"), echo, embedder)
        if keep:
            echo(f"\nThe store is kept at {os.path.join(folder, 'memorist.db')}")
        return result
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _run(path: str, echo: Callable[[str], Any], embedder: Any) -> dict[str, Any]:
    with Memory(path, embedder=embedder) as memory:
        tutor = Tutor(memory, llm=None)
        echo("The tutor's graph: router → planner → solver (cot | tot | react) → critic → learning. No model is configured.\n")
        outs = []
        for conversation, question, feedback in TURNS:
            payload: dict[str, Any] = {"messages": [{"role": "user", "content": question}], "learner_id": LEARNER,
                                       "conversation_id": conversation}
            if feedback:
                payload["feedback"] = feedback
            out = tutor.run_turn(payload)
            outs.append(out)
            delta = out["scratch"]["ace_delta"]
            echo(f"[{conversation}] {LEARNER}: {question}" + (f"   (feedback: {feedback})" if feedback else ""))
            echo(f"  mode: {out['scratch']['reasoning_mode']} ({out['scratch']['route_reason']})")
            for bullet in out["result"]["bullets"]:
                echo(f"  injected from the playbook: {bullet['content']}  (learned in conversation {bullet.get('conversation_id') or '-'})")
            echo("  tutor: " + out["answer"].replace("\n", "\n         "))
            echo(f"  playbook: +{delta.get('num_new_bullets', 0)} new, {delta.get('num_updates', 0)} reinforced, "
                 f"{delta.get('num_removals', 0)} removed\n")
        learned = {b.content for b in tutor.playbook.bullets(LEARNER) if b.conversation_id == "monday"}
        friday = outs[2]
        injected = {b["content"] for b in friday["result"]["bullets"]} & learned
        echo(f"Friday's conversation used {len(injected)} bullet(s) learned on Monday.")
        return {
            "monday": {"answer": outs[0]["answer"], "reasoning_mode": outs[0]["scratch"]["reasoning_mode"]},
            "learned": outs[1]["scratch"]["ace_delta"].get("num_new_bullets", 0),
            "friday": {"answer": friday["answer"], "reasoning_mode": friday["scratch"]["reasoning_mode"],
                       "injected": sorted(injected), "injected_learned_bullet": bool(injected)},
            "playbook_size": len(tutor.playbook.bullets(LEARNER)),
        }


__all__ = ["run_agent_demo"]
