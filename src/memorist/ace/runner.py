"""The runner protocol: one turn in, one JSON answer out.

Input (``memorist run-turn`` reads it on stdin)::

    {"messages": [{"role": "user", "content": "..."}, ...],
     "learner_id"?: "sam", "conversation_id"?: "c-42",
     "feedback"?: "That helped!", "outcome"?: "success" | "failure", "topic"?: "fractions"}

The shortest input, ``{"messages": [...]}`` alone, is a turn of the learner
``"default"`` (:data:`DEFAULT_LEARNER`) in no named conversation.

Output::

    {"answer": "...", "mode": "llm" | "deterministic",
     "result": {"answer", "context", "bullets", "topic"},
     "scratch": {"ace_delta": {"num_new_bullets", "num_updates", "num_removals", ...},
                 "learner_id", "conversation_id", "topic", "ace_memory_loaded", "injected_ids", "lessons"}}

The turn loads the learner's playbook once, injects the bullets relevant to the last
user message, answers (with the model when one is configured, else a deterministic
reply that says so), and learns from the feedback — all logged on the
``memorist.ace`` loggers, which ``memorist run-turn`` sends to stderr.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, get_args

from .. import validate
from ..errors import MemoristError, ValidationError
from ..policies.taxonomy import infer_topic, snake_case
from ..policies.text import preview
from ..prompts import MAX_TEXT_CHARS
from ..roles.learning import Bullet, messages_of
from .context import format_context


class TurnLike(Protocol):
    """What a turn of the protocol does in the learner's playbook (a
    :class:`~memorist.ace.playbook.PlaybookTurn`)."""

    def retrieve(self, query: str) -> list[Bullet]: ...

    def learn(
        self,
        *,
        question: str | None = None,
        answer: str = "",
        feedback: str | None = None,
        outcome: str | None = None,
        messages: Sequence[Any] = (),
        answer_mode: str = "",
    ) -> dict[str, Any]: ...


class PlaybookLike(Protocol):
    """What a turn needs of a :class:`~memorist.Playbook`. Described here, not
    imported: the playbook imports this module (:meth:`~memorist.Playbook.run_turn`)."""

    memory: Any

    def turn(self, learner_id: str, conversation_id: str | None = None, *, topic: str | None = None) -> TurnLike: ...


runner_log = logging.getLogger("memorist.ace.runner")

SYSTEM_PROMPT = (
    "You are a patient tutor. Answer the learner's last message. The playbook below is "
    "what earlier conversations taught about teaching this learner: follow its "
    "strategies, avoid its common mistakes, and do not mention it."
)
_LONE_NUMBER = re.compile(r"^\s*[-+]?\d+(?:[.,]\d+)?\s*$")

#: The learner of a turn that names none (the runner protocol's verification input has no learner id).
DEFAULT_LEARNER = "default"

#: ``answerer(system, messages) -> answer``: how the runner asks a model.
Answerer = Callable[[str, Sequence[Mapping[str, str]]], str]

#: How a turn went, as its caller says: the protocol's ``"outcome"``,
#: :meth:`~memorist.PlaybookTurn.learn`'s ``outcome`` and the chat's. None (not said)
#: leaves the verdict to the feedback; any other word would be lost, so it is refused.
Outcome = Literal["success", "failure"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)


def check_outcome(value: Any, name: str = "outcome") -> str | None:
    """``value`` if it is one of :data:`OUTCOMES` or None; else a ValidationError naming ``name``."""
    if value is not None and (not isinstance(value, str) or value not in OUTCOMES):
        raise ValidationError(name, f"must be one of {', '.join(OUTCOMES)} (or left out), got {validate.show(value)}")
    return value


def optional_text(value: Any, name: str, *, max_chars: int) -> str | None:
    """Text that may be empty or None (a question, feedback, a message): a string of at
    most ``max_chars`` characters that can be stored (no NUL, no lone surrogate)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(name, f"must be a string, got {type(value).__name__}")
    if len(value) > max_chars:
        raise ValidationError(name, f"is {len(value):,} characters; the limit is {max_chars:,}")
    return validate.unicode(name, value)


def optional_id(value: Any, name: str) -> str | None:
    """An id or a label that may be left out (None or ""): otherwise the rules of the
    scope ids (at most 256 characters, something visible, no control character)."""
    return None if value is None or value == "" else validate.scope_id(name, value)


def sanitize_answer(text: Any) -> str:
    """The answer without stray lone numeric lines (a ``10`` on a line of its own in a
    longer reply) and without runs of blank lines. An answer that is only a number stays.

    What text cannot hold goes too (a NUL; a lone surrogate becomes ``?``): the turn
    learns from its answer, and must not refuse the model's own reply."""
    text = str(text or "").replace("\r\n", "\n").replace("\x00", "").strip()
    text = text.encode("utf-8", "replace").decode("utf-8")
    lines = text.split("\n")
    if any(line.strip() and not _LONE_NUMBER.match(line) for line in lines):
        lines = [line for line in lines if not _LONE_NUMBER.match(line)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


#: How the learner is told to say what helped (``run-turn``'s field; the chat names its buttons).
FEEDBACK_HINT = 'the "feedback" field'


def deterministic_answer(question: str, bullets: Sequence[Bullet], *, failure: str | None = None,
                         feedback_hint: str = FEEDBACK_HINT) -> str:
    """The reply without a model's answer: why there is none (no model is configured;
    or ``failure``, e.g. "it did not answer in time": the model failed), and what the
    learner's playbook holds for the question."""
    why = f"The language model could not answer ({failure})" if failure else "No language model is configured"
    head = f"{why}, so this is a deterministic reply from Memorist's playbook, not a generated answer."
    if not bullets:
        return (
            f"{head} I have no lessons for this learner that fit this question yet; tell me what "
            f"helped or what did not ({feedback_hint}) and I will remember it."
        )
    lines = [f"{head} What I have learned for this learner that fits this question:"]
    lines.extend(f"- {b.content}" for b in bullets)
    return "\n".join(lines)


def _check(payload: Any, max_chars: int) -> tuple[list[dict[str, str]], str, str, str | None, str | None, str | None]:
    if not isinstance(payload, Mapping):
        raise ValidationError("input", f"must be a JSON object, got {type(payload).__name__}")
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValidationError("messages", "must be a non-empty list of {\"role\", \"content\"} objects")
    clean: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("content"), str) or not isinstance(m.get("role", "user"), str):
            raise ValidationError(f"messages[{i}]", "must be an object with a string \"role\" and \"content\"")
        optional_text(m["content"], f"messages[{i}].content", max_chars=max_chars)
        clean.append({"role": m.get("role", "user"), "content": m["content"]})
    if not any(m["role"] == "user" and m["content"].strip() for m in clean):
        raise ValidationError("messages", "need at least one user message with content")
    # The question (the last user message with content) must have something visible:
    # one of only a zero-width space would fail later, named as the playbook's "query".
    at = next(i for i in range(len(clean) - 1, -1, -1) if clean[i]["role"] == "user" and clean[i]["content"].strip())
    validate.text(f"messages[{at}].content", clean[at]["content"], max_chars=max_chars)
    learner = payload.get("learner_id", payload.get("learnerId"))
    if learner is None:
        learner = DEFAULT_LEARNER
    if not isinstance(learner, str) or not learner.strip():
        raise ValidationError("learner_id", f"must be a non-empty string when given, got {validate.show(learner)}")
    # The learner names the playbook's space and the facts' namespace: an id's rules.
    validate.scope_id("learner_id", learner)
    conversation = optional_id(payload.get("conversation_id", payload.get("conversationId")), "conversation_id") or ""
    feedback = optional_text(payload.get("feedback"), "feedback", max_chars=max_chars)
    outcome = check_outcome(payload.get("outcome"))
    topic = optional_id(payload.get("topic"), "topic")
    return clean, learner, conversation, feedback, outcome, topic


def _runner_model(memory: Any) -> Any:
    """The model that answers: the Memory's, else the one the environment names
    (``MEMORIST_LLM``, else ``GEMINI_API_KEY`` alone: Gemini); None when neither is."""
    llm = getattr(memory, "llm", None)
    if llm is not None:
        return llm
    from ..errors import ConfigurationError
    from ..pipelines.llm_events import watched
    from ..roles.llm import learning_llm

    try:
        return watched(memory, learning_llm(None, enabled=True))
    except ConfigurationError:
        return None


def _model_answerer(memory: Any) -> Answerer | None:
    llm = _runner_model(memory)
    if llm is None:
        return None

    def answer(system: str, messages: Sequence[Mapping[str, str]]) -> str:
        from ..llm.base import ChatMessage

        chat = [ChatMessage(m["role"], m["content"]) for m in messages if m["role"] in ("user", "assistant") and m["content"].strip()]
        return llm.generate(chat, system=system, role="tutor", prompt_version="ace-tutor/1")

    return answer


def check_turn(payload: Any, *, max_chars: int = MAX_TEXT_CHARS) -> tuple[list[dict[str, str]], str, str, str | None, str | None, str | None]:
    """The protocol's input checked: ``(messages, learner_id, conversation_id,
    feedback, outcome, topic)``; a :class:`~memorist.errors.ValidationError` names the
    wrong field. Every runner of the protocol (this one, the tutor's graph) reads its
    input through it, before the turn reads or writes anything, so a refused turn
    changes nothing. ``max_chars``: the longest message or feedback (the Memory's
    ``max_message_chars``)."""
    return _check(payload, max_chars)


def run_turn(playbook: PlaybookLike, payload: Mapping[str, Any], *, answerer: Answerer | None = None) -> dict[str, Any]:
    """Run one turn of the protocol above and return the output object."""
    messages, learner, conversation, feedback, outcome, topic = _check(payload, playbook.memory.config.max_message_chars)
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user" and m["content"].strip())
    runner_log.info("[ACE Runner] Turn learner=%s conversation=%s question=%s", learner, conversation or "-", preview(question))
    turn = playbook.turn(learner, conversation, topic=topic)
    bullets = turn.retrieve(question)
    context = format_context(bullets, title=f"ACE playbook (learner {learner})")
    answerer = answerer or _model_answerer(playbook.memory)
    mode = "deterministic"
    answer = ""
    if answerer is not None:
        system = SYSTEM_PROMPT + ("\n\n" + context if context else "")
        try:
            answer = answerer(system, messages)
            mode = "llm"
        except MemoristError as exc:
            runner_log.warning("[ACE Runner] The model failed (%s); answering deterministically", preview(exc))
    if mode == "deterministic":
        answer = deterministic_answer(question, bullets)
    answer = sanitize_answer(answer)
    runner_log.info("[ACE Runner] Answer mode=%s %s", mode, preview(answer))
    delta = turn.learn(
        question=question,
        answer=answer,
        feedback=feedback,
        outcome=outcome,
        messages=messages_of(messages),
        answer_mode=mode,
    )
    topic = snake_case(topic) if topic else infer_topic(question)
    return {
        "answer": answer,
        "mode": mode,
        "result": {
            "answer": answer,
            "context": context,
            "bullets": [b.to_dict() for b in bullets],
            "topic": topic,
        },
        "scratch": {
            "learner_id": learner,
            "conversation_id": conversation,
            "topic": topic,
            "ace_memory_loaded": True,
            "ace_delta": delta,
            "injected_ids": [b.id for b in bullets],
            "lessons": delta.get("lessons", []),
        },
    }


__all__ = [
    "DEFAULT_LEARNER", "FEEDBACK_HINT", "OUTCOMES", "SYSTEM_PROMPT", "Outcome", "PlaybookLike", "TurnLike", "check_outcome", "check_turn",
    "deterministic_answer", "optional_id", "optional_text", "run_turn", "sanitize_answer",
]
