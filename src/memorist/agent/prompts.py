"""The tutor's prompts, one per reasoning mode, versioned beside their reply shapes.

A change to a prompt is a change of its version string, so the event log's LLM
records say which prompt produced which answer.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

TUTOR = (
    "You are a patient tutor. Answer the learner's last message. The playbook below is "
    "what earlier conversations taught about teaching this learner, and the facts are "
    "what the learner told you before: follow the strategies, avoid the mistakes, use "
    "the facts where they help, and do not mention any of them."
)

COT_VERSION = "tutor-cot/1"
COT = (
    "Reason step by step in a scratchpad before you answer. Write at most {steps} lines "
    "that start with 'Step 1:', 'Step 2:' and so on, then one line that starts with "
    "'Answer:' followed by the reply the learner will read. {reveal}"
)

TOT_VERSION = "tutor-tot/1"
TOT_BRANCHES = (
    "Propose {branches} different ways to help the learner with their last message, and "
    "score each from 0 (poor for this learner) to 10 (best for this learner), using the "
    "playbook and the facts."
)
TOT_ANSWER = (
    "Help the learner with their last message by following this approach: {approach}. "
    "{reveal}"
)


class Branch(BaseModel):
    """One way to help the learner."""

    approach: str = Field(description="The approach, in one sentence.")
    score: float = Field(ge=0, le=10, description="How well it suits this learner, 0 to 10.")


class Branches(BaseModel):
    """The tree of thought's first level."""

    branches: list[Branch] = Field(description="The candidate approaches, best first or in any order.")


REACT_VERSION = "tutor-react/1"
REACT = (
    "Solve the learner's last message with tools. Reply with exactly one line, either "
    "'Action: calculator[<arithmetic expression>]' (exact arithmetic on integers, "
    "decimals and fractions), 'Action: memory_search[<query>]' (the learner's facts and "
    "playbook), or 'Answer: <the reply the learner will read>'. The tool results so far "
    "follow as 'Observation:' lines. {reveal}"
)

REACT_FINAL_VERSION = "tutor-react-final/1"
REACT_FINAL = (
    "You have used all your tool steps. Using the tool results below, reply with exactly "
    "one line, 'Answer: <the reply the learner will read>', and call no tool. {reveal}"
)

REVEAL = "Give the final result."
NO_REVEAL = (
    "The learner wants to work it out: guide them to the last step and do not state the "
    "final result."
)
