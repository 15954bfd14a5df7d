"""The minutes: what a coordination event is, and the pure rules over it.

A *minute* is one coordination event (a task assigned, a conflict resolved, a
hand-off, an outcome) as the append-only log keeps it. Its search-index entry
carries a :class:`Category` and :class:`Insight` s, derived here by rules that read
only the minute itself, so a reindex from the log always derives the same ones.

>>> m = Minute(id="m1", ts=0.0, event_type="task_completed", project_id="apollo",
...            agent_id="coder", data={"task_id": "t7", "success_criteria_met": 80})
>>> categorize(m)
<Category.PROJECT_KNOWLEDGE: 'project_knowledge'>
>>> [(i.type, i.confidence) for i in derive_insights(m)]
[('outcome', 0.8)]
>>> estimate_tokens("twelve chars")
3
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


class Category(enum.StrEnum):
    """The categories of a minute."""

    AGENT_CAPABILITY = "agent_capability"
    COORDINATION_PATTERN = "coordination_pattern"
    CONFLICT_RESOLUTION = "conflict_resolution"
    TASK_ASSIGNMENT = "task_assignment"
    FAILURE_PATTERN = "failure_pattern"
    PROJECT_KNOWLEDGE = "project_knowledge"


#: Insight types: ``outcome`` is the one the evaluator's accuracy reads.
INSIGHT_TYPES = ("outcome", "assignment", "resolution", "capability", "failure", "pattern", "observation")


@dataclass(frozen=True, slots=True)
class Insight:
    """What a minute taught: ``confidence`` in [0, 1]; ``contexts``: when it applies."""

    type: str
    finding: str
    confidence: float = 0.5
    contexts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "finding": self.finding, "confidence": self.confidence, "contexts": list(self.contexts)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Insight:
        return cls(str(data["type"]), str(data["finding"]), float(data.get("confidence", 0.5)),
                   tuple(str(c) for c in data.get("contexts") or ()))


@dataclass(frozen=True, slots=True)
class Minute:
    """One coordination event. ``ts`` is when it happened (epoch seconds, UTC)."""

    id: str
    ts: float
    event_type: str
    project_id: str
    agent_id: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    context_references: tuple[str, ...] = ()
    memory_note: str = ""
    category: Category = Category.PROJECT_KNOWLEDGE
    insights: tuple[Insight, ...] = ()
    run_id: str = ""

    def to_payload(self) -> dict[str, Any]:
        """The minute as its log event's payload (and as the public API shows it)."""
        return {
            "id": self.id,
            "timestamp": datetime.fromtimestamp(self.ts, UTC).isoformat(),
            "ts": self.ts,
            "event_type": self.event_type,
            "agent_id": self.agent_id or None,
            "project_id": self.project_id,
            "run_id": self.run_id or None,
            "data": dict(self.data),
            "context_references": list(self.context_references),
            "memory_note": self.memory_note or None,
            "category": self.category.value,
            "insights": [i.to_dict() for i in self.insights],
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Minute:
        return cls(
            id=str(payload["id"]),
            ts=float(payload["ts"]),
            event_type=str(payload["event_type"]),
            project_id=str(payload["project_id"]),
            agent_id=str(payload.get("agent_id") or ""),
            data=dict(payload.get("data") or {}),
            context_references=tuple(str(r) for r in payload.get("context_references") or ()),
            memory_note=str(payload.get("memory_note") or ""),
            category=Category(payload.get("category") or Category.PROJECT_KNOWLEDGE),
            insights=tuple(Insight.from_dict(i) for i in payload.get("insights") or ()),
            run_id=str(payload.get("run_id") or ""),
        )


# categories --------------------------------------------------------------------------------
# First rule that matches wins; the words are read in the event type, the note and
# the data's keys (stemmed loosely by prefix).
_RULES: tuple[tuple[Category, re.Pattern[str]], ...] = (
    (Category.CONFLICT_RESOLUTION, re.compile(r"\b(conflict\w*|disput\w*|disagree\w*|escalat\w*|deadlock\w*|contention)\b")),
    (Category.FAILURE_PATTERN, re.compile(r"\b(fail\w*|error\w*|crash\w*|timeout\w*|timed out|broke\w*|regress\w*|bug\w*|incident\w*|rollback\w*|retry\w*)\b")),
    (Category.TASK_ASSIGNMENT, re.compile(r"\b(assign\w*|delegat\w*|allocat\w*|dispatch\w*|claim\w*|reassign\w*)\b")),
    (Category.AGENT_CAPABILITY, re.compile(r"\b(capabilit\w*|skill\w*|expert\w*|strength\w*|specialt\w*|proficien\w*|good at|best at|performance)\b")),
    (Category.COORDINATION_PATTERN, re.compile(r"\b(handoff\w*|hand off|hand-off|handover|sync\w*|coordinat\w*|review\w*|approv\w*|pair\w*|standup|meeting|protocol|workflow|pattern)\b")),
)
_FAILED_BELOW = 50.0  # success_criteria_met under this is a failure


def _words_of(event_type: str, note: str, data: Mapping[str, Any]) -> str:
    keys = " ".join(str(k) for k in data)
    return " ".join((event_type, note, keys)).replace("_", " ").lower()


def success_of(data: Mapping[str, Any]) -> float | None:
    """``data["success_criteria_met"]`` as a percentage (0-100), if it is one."""
    value = data.get("success_criteria_met")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(min(100.0, max(0.0, value)))


def categorize(minute: Minute) -> Category:
    """The category of a minute, by keyword rules (deterministic, offline).

    A conflict in the data (``conflict_type``) is a conflict resolution; an outcome
    under 50% of the criteria is a failure pattern; an ``assignment_reasoning`` is a
    task assignment; then the words of the event type, the note and the data's keys;
    anything else is project knowledge.
    """
    data = minute.data
    if data.get("conflict_type"):
        return Category.CONFLICT_RESOLUTION
    success = success_of(data)
    if success is not None and success < _FAILED_BELOW:
        return Category.FAILURE_PATTERN
    if data.get("assignment_reasoning"):
        return Category.TASK_ASSIGNMENT
    words = _words_of(minute.event_type, minute.memory_note, data)
    for category, pattern in _RULES:
        if category is Category.FAILURE_PATTERN and success is not None:
            continue  # a known outcome of 50% or more is no failure, whatever the words
        if pattern.search(words):
            return category
    return Category.PROJECT_KNOWLEDGE


def _contexts(minute: Minute) -> tuple[str, ...]:
    found = [minute.event_type]
    for key in ("task_id", "conflict_type"):
        value = minute.data.get(key)
        if isinstance(value, str) and value:
            found.append(f"{key}={value}")
    if minute.agent_id:
        found.append(f"agent={minute.agent_id}")
    return tuple(dict.fromkeys(found))


def derive_insights(minute: Minute) -> list[Insight]:
    """The insights a minute's data states:

    - ``outcome`` from ``success_criteria_met`` (confidence = the percentage / 100):
      what the evaluator's accuracy reads;
    - ``assignment`` from ``assignment_reasoning`` (confidence 0.6: a reason given,
      not yet a result);
    - ``resolution`` from ``conflict_type`` with ``resolution`` (0.7: it ended the conflict).
    """
    contexts = _contexts(minute)
    data = minute.data
    found: list[Insight] = []
    success = success_of(data)
    if success is not None:
        task = data.get("task_id")
        what = f"{task}: " if isinstance(task, str) and task else ""
        who = f" by {minute.agent_id}" if minute.agent_id else ""
        found.append(Insight("outcome", f"{what}{minute.event_type}{who} met {success:g}% of the success criteria",
                             round(success / 100.0, 4), contexts))
    reasoning = data.get("assignment_reasoning")
    if isinstance(reasoning, str) and reasoning.strip():
        found.append(Insight("assignment", reasoning.strip(), 0.6, contexts))
    conflict, resolution = data.get("conflict_type"), data.get("resolution")
    if conflict and resolution is not None:
        found.append(Insight("resolution", f"{conflict} resolved: {_short(resolution)}", 0.7, contexts))
    return found


def merge_insights(given: Iterable[Insight], derived: Iterable[Insight]) -> tuple[Insight, ...]:
    """The caller's insights, then the derived ones of a type the caller did not give."""
    given = list(given)
    types = {i.type for i in given}
    return tuple(given + [i for i in derived if i.type not in types])


def outcome_of(insights: Iterable[Insight]) -> Insight | None:
    return next((i for i in insights if i.type == "outcome"), None)


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value) if not isinstance(value, dict | list) else _flat(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_flat(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_flat(v) for v in value)
    return str(value)


def minute_text(minute: Minute) -> str:
    """What the index embeds and searches: the
    event type, who, the note, the data as ``key: value`` and the findings."""
    head = minute.event_type.replace("_", " ")
    if minute.agent_id:
        head += f" by {minute.agent_id}"
    parts = [head]
    if minute.memory_note:
        parts.append(minute.memory_note)
    if minute.data:
        parts.append(_short(minute.data, 600))
    parts.extend(i.finding for i in minute.insights if i.finding not in parts)
    return ". ".join(p.strip().rstrip(".") for p in parts if p.strip())


_NEGATION = re.compile(r"\b(not|never|no longer|cannot|can't|didn't|doesn't|don't|won't|failed to|unable to|without success)\b", re.I)


def is_negated(text: str) -> bool:
    """Whether a note states something negatively ("did not", "never", "failed to")."""
    return bool(_NEGATION.search(text))


def references_of(minutes: Iterable[Minute]) -> list[str]:
    """The ids the minutes reference, first seen first."""
    return list(dict.fromkeys(ref for m in minutes for ref in m.context_references))


# the context window's token estimate -------------------------------------------------------------
def estimate_tokens(text: str) -> int:
    """About four characters a token (English text with GPT-style tokenizers; the
    same estimate as :class:`memorist.llm.testing.ScriptedLLM`). No tokenizer to
    download; a budget is a bound on size, not a bill."""
    return math.ceil(len(text) / 4) if text else 0


def render_minute_line(view: Mapping[str, Any]) -> str:
    """One minute as a context line: time, event, agent, note (or data), references."""
    when = str(view.get("timestamp") or "")[:16].replace("T", " ")
    who = f" [{view['agent_id']}]" if view.get("agent_id") else ""
    body = view.get("memory_note") or _short(view.get("data") or {}, 200) or ""
    refs = view.get("context_references") or []
    tail = f" (refs: {', '.join(str(r)[:8] for r in refs)})" if refs else ""
    return f"- {when} {view.get('event_type')}{who} #{str(view.get('id'))[:8]}: {body}{tail}".rstrip(": ")


def split_ids(ids: Sequence[str]) -> list[str]:
    """Ids in order, each once."""
    return list(dict.fromkeys(ids))


__all__ = [
    "INSIGHT_TYPES",
    "Category",
    "Insight",
    "Minute",
    "categorize",
    "derive_insights",
    "estimate_tokens",
    "is_negated",
    "merge_insights",
    "minute_text",
    "outcome_of",
    "references_of",
    "render_minute_line",
    "split_ids",
    "success_of",
]
