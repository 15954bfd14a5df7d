"""The tutor: a LangGraph graph that answers a learner and learns from the outcome.

::

    router ──► planner ──► solver ──► critic ──► learning ──► END
    (cot | tot | react)    (playbook bullets and facts injected, one mode)

- ``router`` loads the learner's playbook (once per turn: one ``[ACE Memory]
  Loaded ...`` line) and chooses the reasoning mode from the question: ``react``
  for arithmetic to work out, ``tot`` for a choice between approaches, ``cot``
  otherwise.
- ``planner`` sets the solver's parameters: scratchpad steps, branches, tool steps,
  and whether the answer may reveal the final result (not when the learner asks for
  a hint or to try alone).
- ``solver`` injects the learner's playbook bullets and relevant facts (read through
  :class:`~memorist.integrations.langgraph.MemoristStore`) and reasons in the chosen
  mode. Its steps go to the log as ``[ACE Thought]`` lines, never to the learner.
  With no model configured, ``react`` still answers arithmetic with its calculator
  and the other modes say so, showing the memories they would use. A model that
  fails (an error, a timeout, an empty or unusable reply, a ``react`` loop still
  calling tools after its last step) gets the same offline answer, which says the
  model failed; the turn's ``mode`` is then ``deterministic``.
- ``critic`` cleans the answer: no tool lines, no stray lone numbers, and no
  premature reveal when the planner said so. A step-by-step answer keeps its
  ``Step N:`` lines: only ``cot``'s scratchpad, before its ``Answer:`` label, is left out.
- ``learning`` runs the Reflector and the Curator on the turn and applies the delta to
  the learner's playbook (at most ``ACE_CURATOR_MAX_NEW``, default 2, new bullets a
  turn; helpful/harmful from the feedback), and remembers the learner's facts.

:meth:`Tutor.run_turn` speaks the runner protocol of ``memorist run-turn``
(:mod:`memorist.ace.runner`): ``{answer, mode, result, scratch}`` with
``scratch.ace_delta``; ``mode`` says who answered (``llm`` or ``deterministic``) and
``scratch.reasoning_mode`` how (``cot``, ``tot``, ``react``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, TypedDict, TypeVar

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import SearchOp
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError("the tutor agent needs LangGraph: pip install 'memorist[agent]'") from exc

from ..ace.context import format_context
from ..ace.playbook import Playbook
from ..ace.runner import FEEDBACK_HINT, check_turn, deterministic_answer, sanitize_answer
from ..errors import (
    ConfigurationError,
    InvalidOutputError,
    MemoristError,
    TransientProviderError,
    ValidationError,
)
from ..integrations.langgraph import MemoristStore
from ..llm.base import ChatMessage, call_with_deadline
from ..pipelines.llm_events import watched
from ..policies.taxonomy import infer_topic, snake_case
from ..policies.text import preview
from ..roles.learning import Bullet, messages_of
from . import prompts
from .calculator import calculate, find_expression

T = TypeVar("T")
log = logging.getLogger("memorist.ace.graph")
thought_log = logging.getLogger("memorist.ace.thought")

MODES = ("cot", "tot", "react")
#: The agent id of the learner's facts in the memory (the tutor's namespace scope).
FACTS_AGENT = "tutor"
#: Facts injected per turn.
FACTS_K = 5
#: Seconds the tutor waits for its model on each request, and how many times a request
#: that timed out or failed on the way is tried again, when the tutor builds its model
#: (a learner waits for the answer: the providers' own defaults, 60 s and 2 retries,
#: let a model that hangs hold a turn for three minutes).
DEFAULT_MODEL_TIMEOUT = 30.0
DEFAULT_MODEL_RETRIES = 1
#: The most retries of a request to the tutor's model (each may wait ``model_timeout``).
MAX_MODEL_RETRIES = 10

_EXPLAIN = re.compile(r"\b(how (do|can|should|would) (i|we|you)|why|explain|understand|confus|what does|what is a|mean)\w*", re.I)
_CHOICE = re.compile(r"\b(best way|ways to|approach(es)?|strateg(y|ies)|options?|compare|which (method|way)|plan|study|practice|prepare|improve|alternatives?)\b", re.I)
_NO_REVEAL = re.compile(r"\b(hint|don'?t (tell|give) me|do not (tell|give) me|let me try|on my own|myself|without (telling|giving) (me )?the answer)\b", re.I)
_ANSWER = re.compile(r"^\s*answer\s*:\s*", re.I)
#: A scratchpad line of ``cot`` (before its ``Answer:``), and of the ReAct loop's (anywhere).
_STEP = re.compile(r"^\s*step\s*\d+\s*[:.)-]", re.I)
_TOOL_LINE = re.compile(r"^\s*(thought|action|observation)\s*[:.)-]", re.I)
_ACTION = re.compile(r"^\s*action\s*:\s*(calculator|memory_search)\s*\[(.*)\]\s*$", re.I | re.M)


def choose_mode(question: str) -> tuple[str, str]:
    """The reasoning mode for ``question`` and why: ``react`` when it asks for
    arithmetic to be worked out, ``tot`` when it asks to choose between approaches,
    ``cot`` otherwise (explanations, and whatever else)."""
    expression = find_expression(question)
    if expression and not _EXPLAIN.search(question):
        return "react", f"arithmetic to work out: {expression}"
    if _CHOICE.search(question):
        return "tot", "a choice between approaches"
    if _EXPLAIN.search(question):
        return "cot", "an explanation, step by step"
    return "cot", "a direct question"


class TurnState(TypedDict, total=False):
    """What flows through the graph in one turn."""

    messages: list[dict[str, str]]
    question: str
    learner_id: str
    conversation_id: str
    feedback: str | None
    outcome: str | None
    topic: str | None
    reasoning_mode: str
    route_reason: str
    params: dict[str, Any]
    bullets: list[dict[str, Any]]
    facts: list[dict[str, Any]]
    context: str
    draft: str
    answer: str
    answer_mode: str
    thoughts: list[str]
    tool_calls: list[dict[str, Any]]
    delta: dict[str, Any]
    facts_added: int
    memory_error: str | None
    model_error: str | None


def _thought(state_thoughts: list[str], text: str) -> None:
    thought_log.info("[ACE Thought] %s", text)
    state_thoughts.append(text)


class Tutor:
    """The tutoring agent over a :class:`~memorist.Memory`.

    ``playbook``: the learner playbooks (default: ``Playbook(memory)``); ``llm``: the
    model (default: the Memory's, else Gemini when ``GEMINI_API_KEY`` is set; None:
    none); ``store``: the LangGraph store of the learner's facts (default: a
    :class:`~memorist.integrations.langgraph.MemoristStore` of ``memory``);
    ``remember_facts``: whether a turn adds the learner's facts to the memory.
    ``model_timeout`` (seconds per request) and ``model_retries`` bound the default
    model's requests (a model passed as ``llm`` keeps its own settings);
    ``feedback_hint`` is how the learner says what helped, as the offline answer names it.

    >>> from memorist import Memory
    >>> tutor = Tutor(Memory(":memory:", embedder="hashing"), llm=None)
    >>> out = tutor.run_turn({"messages": [{"role": "user", "content": "Help me multiply 12 by 5."}]})
    >>> out["answer"], out["scratch"]["reasoning_mode"]
    ('12 * 5 = 60', 'react')
    """

    _UNSET: Any = object()

    def __init__(
        self,
        memory: Any,
        *,
        playbook: Playbook | None = None,
        llm: Any = _UNSET,
        store: Any = None,
        remember_facts: bool = True,
        model_timeout: float = DEFAULT_MODEL_TIMEOUT,
        model_retries: int = DEFAULT_MODEL_RETRIES,
        feedback_hint: str = FEEDBACK_HINT,
    ) -> None:
        if isinstance(model_timeout, bool) or not isinstance(model_timeout, int | float) or not math.isfinite(model_timeout) \
                or model_timeout <= 0:
            raise ValidationError("model_timeout", f"must be a number of seconds above 0, got {model_timeout!r}")
        if isinstance(model_retries, bool) or not isinstance(model_retries, int) or not 0 <= model_retries <= MAX_MODEL_RETRIES:
            raise ValidationError("model_retries", f"must be a whole number from 0 to {MAX_MODEL_RETRIES}, got {model_retries!r}")
        self.memory = memory
        self.playbook = playbook if playbook is not None else Playbook(memory)
        # A provider's Retry-After longer than one request's timeout is not waited for
        # (the request fails at once and the turn answers offline), so it cannot hold a
        # turn for minutes past what model_timeout and model_retries allow.
        bounds = {"timeout": float(model_timeout), "max_retries": model_retries, "max_retry_after": float(model_timeout)}
        llm = _default_llm(memory, **bounds) if llm is Tutor._UNSET else llm
        # Its calls are the memory's too (``memory.llm_usage()``), as its learning's are.
        self.llm = watched(memory, llm) if llm is not None else None
        self.turn_seconds = _turn_seconds(self.llm, float(model_timeout), model_retries)
        self.feedback_hint = feedback_hint
        self.store = store if store is not None else MemoristStore(memory, agent_id=FACTS_AGENT)
        self.remember_facts = remember_facts
        self.graph = self._build()

    # the graph ----------------------------------------------------------------------------
    def _build(self) -> Any:
        graph = StateGraph(TurnState)
        graph.add_node("router", self._router)
        graph.add_node("planner", self._planner)
        graph.add_node("solver", self._solver)
        graph.add_node("critic", self._critic)
        graph.add_node("learning", self._learning)
        graph.add_edge(START, "router")
        graph.add_edge("router", "planner")
        graph.add_edge("planner", "solver")
        graph.add_edge("solver", "critic")
        graph.add_edge("critic", "learning")
        graph.add_edge("learning", END)
        return graph.compile(store=self.store, name="tutor")

    def mermaid(self) -> str:
        """The graph as LangGraph draws it (Mermaid text)."""
        return self.graph.get_graph().draw_mermaid()

    def run_turn(self, payload: Mapping[str, Any], *, store: Any = _UNSET, namespace: tuple[str, ...] | None = None,
                 decay_days: float | None = None) -> dict[str, Any]:
        """One turn of the runner protocol (see the module docstring).

        ``store``: where this turn reads the learner's facts (default: :attr:`store`;
        None: no facts), in ``namespace`` (default: ``(learner_id,)``). ``decay_days``: facts neither created nor updated in that
        many days are left out (None or 0: no decay). A store that fails leaves the
        turn without facts and says so in ``scratch.memory_error``."""
        messages, learner, conversation, feedback, outcome, topic = check_turn(payload, max_chars=self.memory.config.max_message_chars)
        question = next(m["content"] for m in reversed(messages) if m["role"] == "user" and m["content"].strip())
        log.info("[ACE Runner] Turn learner=%s conversation=%s question=%s", learner, conversation or "-", preview(question))
        turn = self.playbook.turn(learner, conversation, topic=topic)
        state: TurnState = {
            "messages": messages, "question": question, "learner_id": learner, "conversation_id": conversation,
            "feedback": feedback, "outcome": outcome, "topic": topic, "thoughts": [], "tool_calls": [],
        }
        facts_store = self.store if store is Tutor._UNSET else store
        out = self.graph.invoke(state, config={"configurable": {
            "turn": turn, "store": facts_store, "namespace": namespace or (learner,), "decay_days": decay_days}})
        topic_name = snake_case(topic) if topic else infer_topic(question)
        delta = out["delta"]
        return {
            "answer": out["answer"],
            "mode": out["answer_mode"],
            "result": {
                "answer": out["answer"],
                "context": out["context"],
                "bullets": out["bullets"],
                "facts": out["facts"],
                "topic": topic_name,
                "reasoning_mode": out["reasoning_mode"],
            },
            "scratch": {
                "learner_id": learner,
                "conversation_id": conversation,
                "topic": topic_name,
                "ace_memory_loaded": True,
                "ace_delta": delta,
                "injected_ids": [b["id"] for b in out["bullets"]],
                "lessons": delta.get("lessons", []),
                "reasoning_mode": out["reasoning_mode"],
                "route_reason": out["route_reason"],
                "params": out["params"],
                "tool_calls": out["tool_calls"],
                "facts_added": out.get("facts_added", 0),
                "memory_error": out.get("memory_error"),
                "model_error": out.get("model_error"),
            },
        }

    # nodes --------------------------------------------------------------------------------
    def _router(self, state: TurnState, config: RunnableConfig) -> dict[str, Any]:
        turn = config["configurable"]["turn"]
        turn.state  # noqa: B018 - loads the learner's playbook: once per turn
        mode, reason = choose_mode(state["question"])
        log.info("[ACE Graph] router mode=%s reason=%s", mode, reason)
        return {"reasoning_mode": mode, "route_reason": reason}

    def _planner(self, state: TurnState) -> dict[str, Any]:
        mode = state["reasoning_mode"]
        params: dict[str, Any] = {"reveal_answer": not _NO_REVEAL.search(state["question"])}
        if mode == "cot":
            params["steps"] = 4
        elif mode == "tot":
            params["branches"] = 3
        else:
            params["max_steps"] = 4
            params["tools"] = ["calculator", "memory_search"]
        params["model"] = getattr(self.llm, "name", None) if self.llm is not None else None
        log.info("[ACE Graph] planner mode=%s params=%s", mode, {k: v for k, v in params.items() if k != "model"})
        return {"params": params}

    def _solver(self, state: TurnState, config: RunnableConfig) -> dict[str, Any]:
        turn = config["configurable"]["turn"]
        question, mode, params = state["question"], state["reasoning_mode"], state["params"]
        bullets = turn.retrieve(question)
        conf = config["configurable"]
        facts, memory_error = self._facts(conf.get("store", self.store), conf["namespace"], question, conf.get("decay_days"))
        context = format_context(bullets, title=f"ACE playbook (learner {state['learner_id']})")
        if facts:
            context = (context + "\n\n" if context else "") + "## Facts about the learner\n" + "\n".join(f"- {f['text']}" for f in facts)
        log.info("[ACE Graph] solver mode=%s bullets=%d facts=%d", mode, len(bullets), len(facts))
        thoughts: list[str] = list(state.get("thoughts", []))
        tools: list[dict[str, Any]] = list(state.get("tool_calls", []))
        system = prompts.TUTOR + ("\n\n" + context if context else "")
        reveal = prompts.REVEAL if params["reveal_answer"] else prompts.NO_REVEAL
        draft, answer_mode, failure = "", "deterministic", None
        if self.llm is not None:
            try:
                solve = {"cot": self._cot, "tot": self._tot, "react": self._react}[mode]
                # One deadline for all the turn's requests to the model (react makes up to five).
                draft = solve(state, system, reveal, thoughts, tools, {**conf, "deadline": time.monotonic() + self.turn_seconds})
                if not clean_answer(draft):
                    raise _NoAnswer("its reply held no answer")
                answer_mode = "llm"
            except MemoristError as exc:
                failure = model_failure(exc)
                log.warning("[ACE Runner] The model failed (%s); answering deterministically", preview(exc))
                thoughts.clear()
                tools.clear()
        if answer_mode == "deterministic":
            draft = self._offline(state, bullets, facts, thoughts, tools, conf, failure)
        return {
            "bullets": [b.to_dict() for b in bullets], "facts": facts, "context": context, "draft": draft,
            "answer_mode": answer_mode, "thoughts": thoughts, "tool_calls": tools, "memory_error": memory_error,
            "model_error": failure,
        }

    def _critic(self, state: TurnState) -> dict[str, Any]:
        answer, answer_mode = clean_answer(state.get("draft", "")), state["answer_mode"]
        masked = False
        if not state["params"]["reveal_answer"]:
            answer, masked = mask_reveal(answer, state.get("tool_calls", []), state["question"])
        if not answer:  # the solver answers something; should it not, say so truthfully
            answer = deterministic_answer(state["question"], [], failure=state.get("model_error"), feedback_hint=self.feedback_hint)
            answer, answer_mode = sanitize_answer(answer), "deterministic"
        log.info("[ACE Graph] critic masked=%s", masked)
        log.info("[ACE Runner] Answer mode=%s %s", answer_mode, preview(answer))
        return {"answer": answer, "answer_mode": answer_mode}

    def _learning(self, state: TurnState, config: RunnableConfig) -> dict[str, Any]:
        turn = config["configurable"]["turn"]
        delta = turn.learn(
            question=state["question"], answer=state["answer"], feedback=state.get("feedback"),
            outcome=state.get("outcome"), messages=messages_of(state["messages"]), answer_mode=state["answer_mode"],
        )
        added = 0
        if self.remember_facts:
            added = self._remember(state)
        log.info("[ACE Graph] learning new=%d updates=%d removals=%d facts_added=%d",
                 delta.get("num_new_bullets", 0), delta.get("num_updates", 0), delta.get("num_removals", 0), added)
        return {"delta": delta, "facts_added": added}

    # memory -------------------------------------------------------------------------------
    def _facts(self, store: Any, namespace: tuple[str, ...], query: str, decay_days: float | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """The learner's facts relevant to ``query`` from ``store``, and the store's
        error if it failed (the turn goes on without facts)."""
        if store is None:
            return [], None
        try:
            # An op given to batch: a learner id may hold periods (an e-mail address),
            # which LangGraph's search method would refuse as a label.
            items = store.batch([SearchOp(namespace, query=query, limit=FACTS_K)])[0]
            if decay_days:
                cutoff = time.time() - decay_days * 86400.0
                items = [i for i in items if max(i.created_at.timestamp(), i.updated_at.timestamp()) >= cutoff]
            facts = [{"key": i.key, "text": str(i.value.get("text", i.value)), "score": i.score} for i in items
                     if i.score is None or i.score > 0]
        except MemoristError as exc:
            log.warning("[ACE Memory][Facts] unavailable (%s)", preview(exc))
            return [], str(exc)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # A remote store (the memory service) answered rows it could not read: it is
            # unavailable to this turn, not the turn's error.
            log.warning("[ACE Memory][Facts] unreadable (%s: %s)", type(exc).__name__, preview(exc))
            return [], f"the memory store answered what could not be read ({type(exc).__name__}: {preview(exc)})"
        log.info("[ACE Memory][Facts] Retrieved %d facts for question: %s", len(facts), preview(query))
        return facts, None

    def _remember(self, state: TurnState) -> int:
        """The learner's facts of this turn's last message, added to the memory (the
        Memory's extractor and reconciler decide what is a fact and what is new)."""
        last = {"role": "user", "content": state["question"]}
        try:
            result = self.memory.add([last], user_id=state["learner_id"], agent_id=self.store.agent_id,
                                     run_id=state["conversation_id"] or None, infer=True)
        except MemoristError as exc:
            log.warning("[ACE Memory][Facts] not remembered (%s)", preview(exc))
            return 0
        return sum(1 for r in result.get("results", []) if r.get("event") in ("ADD", "UPDATE"))

    def _search_tool(self, conf: Mapping[str, Any], query: str) -> str:
        """The memory search tool: the learner's facts and playbook bullets for ``query``."""
        facts, _ = self._facts(conf.get("store", self.store), conf["namespace"], query, conf.get("decay_days"))
        turn = conf["turn"]
        bullets = self.playbook.pipeline.retrieve(turn.state, query, touch=False)
        found = [f["text"] for f in facts] + [b.content for b in bullets]
        return "; ".join(found) if found else "nothing stored matches"

    # modes --------------------------------------------------------------------------------
    def _chat(self, state: TurnState) -> list[ChatMessage]:
        return [ChatMessage(m["role"], m["content"]) for m in state["messages"]
                if m["role"] in ("user", "assistant") and m["content"].strip()]

    def _cot(self, state: TurnState, system: str, reveal: str, thoughts: list[str], tools: list[dict[str, Any]], conf: Mapping[str, Any]) -> str:
        steps = state["params"]["steps"]
        reply = self._ask(conf, self.llm.generate, self._chat(state), system=system + "\n\n" + prompts.COT.format(steps=steps, reveal=reveal),
                          role="tutor", prompt_version=prompts.COT_VERSION)
        scratch, answer = _scratchpad(reply, steps_too=True)
        for line in scratch:
            _thought(thoughts, f"cot {line}")
        return answer

    def _tot(self, state: TurnState, system: str, reveal: str, thoughts: list[str], tools: list[dict[str, Any]], conf: Mapping[str, Any]) -> str:
        n = state["params"]["branches"]
        conversation = "\n".join(f"{m.role}: {m.content}" for m in self._chat(state))
        tree = self._ask(conf, self.llm.generate_json, prompts.Branches, prompts.TOT_BRANCHES.format(branches=n) + "\n\n" + conversation,
                         system=system, role="tutor", prompt_version=prompts.TOT_VERSION)
        branches = sorted(tree.branches[: max(n, 1)], key=lambda b: -b.score)
        if not branches:
            raise ValidationError("branches", "the model proposed no approach")
        for i, b in enumerate(tree.branches[:n], 1):
            _thought(thoughts, f"tot branch {i} score={b.score:g} approach={preview(b.approach)}")
        best = branches[0]
        _thought(thoughts, f"tot chose score={best.score:g} approach={preview(best.approach)}")
        return self._ask(conf, self.llm.generate, self._chat(state),
                         system=system + "\n\n" + prompts.TOT_ANSWER.format(approach=best.approach, reveal=reveal),
                         role="tutor", prompt_version=prompts.TOT_VERSION)

    def _react(self, state: TurnState, system: str, reveal: str, thoughts: list[str], tools: list[dict[str, Any]], conf: Mapping[str, Any]) -> str:
        observations: list[str] = []
        chat = self._chat(state)
        for step in range(1, state["params"]["max_steps"] + 1):
            instructions = prompts.REACT.format(reveal=reveal)
            if observations:
                instructions += "\n\n" + "\n".join(observations)
            reply = self._ask(conf, self.llm.generate, chat, system=system + "\n\n" + instructions, role="tutor",
                              prompt_version=prompts.REACT_VERSION)
            action = _ACTION.search(reply)
            if action is None:
                return _scratchpad(reply, steps_too=False)[1]
            tool, argument = action.group(1).lower(), action.group(2).strip()
            result = self._tool(state, tool, argument, thoughts, tools, step, conf)
            observations.append(f"Action: {tool}[{argument}]\nObservation: {result}")
        # Out of steps: one request more, without tools, for the answer. A tool's result
        # is never the answer itself (it may be a stored fact, or an error).
        steps = state["params"]["max_steps"]
        _thought(thoughts, f"react out of tool steps ({steps}); asking for the answer")
        instructions = prompts.REACT_FINAL.format(reveal=reveal) + "\n\n" + "\n".join(observations)
        reply = self._ask(conf, self.llm.generate, chat, system=system + "\n\n" + instructions, role="tutor",
                          prompt_version=prompts.REACT_FINAL_VERSION)
        if _ACTION.search(reply):
            raise _NoAnswer(f"it did not finish within {steps} tool steps")
        return _scratchpad(reply, steps_too=False)[1]

    def _ask(self, conf: Mapping[str, Any], request: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``request(*args, **kwargs)`` to the model, given only what is left of the turn's time: a
        turn of many requests is bounded as one request is (``model_timeout`` and
        ``model_retries``), not by their sum."""
        name = getattr(self.llm, "name", "the model")
        left = conf["deadline"] - time.monotonic()
        if left <= 0:
            raise TransientProviderError(f"{name}: the request timed out (the turn's {self.turn_seconds:g}s are up)")
        return call_with_deadline(functools.partial(request, *args, **kwargs), left, name)

    def _tool(self, state: TurnState, tool: str, argument: str, thoughts: list[str], tools: list[dict[str, Any]], step: int,
              conf: Mapping[str, Any]) -> str:
        if tool == "calculator":
            try:
                result = calculate(argument).text
            except ValidationError as exc:
                result = f"error: {exc}"
        else:
            result = self._search_tool(conf, argument or state["question"])
        _thought(thoughts, f"react step {step} tool={tool} input={preview(argument)}")
        _thought(thoughts, f"react step {step} result={preview(result)}")
        tools.append({"tool": tool, "input": argument, "result": result})
        return result

    def _offline(self, state: TurnState, bullets: Sequence[Bullet], facts: Sequence[Mapping[str, Any]],
                 thoughts: list[str], tools: list[dict[str, Any]], conf: Mapping[str, Any], failure: str | None = None) -> str:
        question, mode = state["question"], state["reasoning_mode"]
        refused = ""
        if mode == "react":
            expression = find_expression(question)
            if expression:
                result = self._tool(state, "calculator", expression, thoughts, tools, 1, conf)
                if not result.startswith("error:"):
                    answer = f"{calculate(expression).expression} = {result}"
                    if bullets:
                        answer += "\n\nWhat helped you before:\n" + "\n".join(f"- {b.content}" for b in bullets)
                    return answer
                reason = result.removeprefix("error: ").removeprefix("expression: ")
                refused = f"The calculator cannot work out {expression}: the expression {reason}.\n\n"
        why = f"the model failed ({failure})" if failure else "no model is configured"
        _thought(thoughts, f"{mode} {why}; {len(bullets)} playbook bullets and {len(facts)} facts would be used")
        for b in bullets:
            _thought(thoughts, f"{mode} would use bullet id={b.id} content={preview(b.content)}")
        answer = refused + deterministic_answer(question, bullets, failure=failure, feedback_hint=self.feedback_hint)
        if facts:
            answer += "\n\nWhat I know about you that fits:\n" + "\n".join(f"- {f['text']}" for f in facts)
        return answer


class _NoAnswer(InvalidOutputError):
    """The model answered, but with no answer: an empty reply, or a ReAct loop still
    calling tools after its last step."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the model gave no answer: {reason}")
        self.reason = reason


def _scratchpad(reply: str, *, steps_too: bool) -> tuple[list[str], str]:
    """``reply`` split into its scratchpad lines and the learner's answer: what follows
    the first ``Answer:`` label, when there is one; else the reply without its tool
    lines (and, with ``steps_too``, for ``cot``, without its ``Step N:`` lines)."""
    lines = reply.splitlines()
    label = next((i for i, line in enumerate(lines) if _ANSWER.match(line)), None)
    if label is not None:
        return [x.strip() for x in lines[:label] if x.strip()], "\n".join([_ANSWER.sub("", lines[label]), *lines[label + 1:]]).strip()
    scratch = [bool(_TOOL_LINE.match(x) or (steps_too and _STEP.match(x))) for x in lines]
    return ([x.strip() for x, s in zip(lines, scratch, strict=True) if s],
            "\n".join(x for x, s in zip(lines, scratch, strict=True) if not s).strip())


def clean_answer(draft: Any) -> str:
    """The learner's part of a reply: no tool lines, no ``Answer:`` label, no
    ``[ACE ...]`` log text, no stray lone numbers. ``Step N:`` lines stay: they are
    how a step-by-step answer is written (the solver leaves out ``cot``'s scratchpad)."""
    lines = [line for line in str(draft or "").replace("\r\n", "\n").split("\n") if not _TOOL_LINE.match(line)]
    text = "\n".join(_ANSWER.sub("", line) for line in lines)
    return sanitize_answer(re.sub(r"\[ACE [^\]]*\][^\n]*", "", text))


def model_failure(exc: BaseException) -> str:
    """Why the model gave no answer, in a few words the learner may read (the
    details, which may name a server, go to the log)."""
    if isinstance(exc, _NoAnswer):
        return exc.reason
    if isinstance(exc, InvalidOutputError | ValidationError):
        return "its reply could not be used"
    status = getattr(exc, "status", None)
    if status is None:
        found = re.search(r"\bHTTP (\d{3})\b", str(exc))
        status = int(found.group(1)) if found else None
    if status:
        return f"its service answered HTTP {status}"
    if isinstance(exc, TransientProviderError) and "timed out" in str(exc):
        return "it did not answer in time"
    if isinstance(exc, TransientProviderError) and "connection failed" in str(exc):
        return "it could not be reached"
    return "it returned an error"


def mask_reveal(answer: str, tool_calls: Sequence[Mapping[str, Any]], question: str = "") -> tuple[str, bool]:
    """``answer`` with the final result hidden: every number in it worth a result a tool
    computed, or the result of the arithmetic ``question`` asks about (a model may
    state it without the calculator), however it is written (``60``, ``60.0``,
    ``5/6``, ``5 / 6``, ``10/12``, ``0.833``, ``0.8333...``), and a trailing
    ``= <number>``, become ``?``. Returns the text and whether it changed."""
    results: list[Fraction] = []
    for call in tool_calls:
        if call.get("tool") == "calculator":
            with contextlib.suppress(ValidationError):  # an error, not a result
                results.append(calculate(str(call.get("result", "")).split(" (=")[0]).value)
    expression = find_expression(question) if question else None
    if expression is not None:
        with contextlib.suppress(ValidationError):  # not arithmetic after all: nothing of it to hide
            results.append(calculate(expression).value)
    masked = _NUMBER_TEXT.sub(lambda m: "?" if any(_worth(m, r) for r in results) else m.group(0), answer) if results else answer
    masked = re.sub(r"=\s*-?\d+(?:[./]\d+)?(?=\s*$|\s*[.!])", "= ?", masked, flags=re.M)
    if masked != answer:
        masked = masked.rstrip() + "\n\nTry the last step yourself, then tell me what you get."
    return masked, masked != answer


_NUM_TEXT = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+"
#: A number as a model writes a result: ``60``, ``-3``, ``1,000``, ``60.0``, ``5/6``,
#: ``5 / 6``, ``0.8333...`` (an ellipsis: cut short).
_NUMBER_TEXT = re.compile(
    rf"(?<![\w.,/])(?P<sign>-(?=[\d.]))?(?P<a>{_NUM_TEXT})(?:\s*/\s*(?P<b>{_NUM_TEXT}))?(?P<cut>\.\.\.|…)?(?![\w/]|[.,]\d)")


def _worth(match: re.Match[str], result: Fraction) -> bool:
    """Whether the number ``match`` found is ``result``: exactly, or, written as a
    decimal of two places or more, rounded (or cut short, before an ellipsis) from it."""
    a, b = match.group("a").replace(",", ""), match.group("b")
    try:
        value = Fraction(a) / (Fraction(b.replace(",", "")) if b else 1)
    except ZeroDivisionError:
        return False
    if match.group("sign"):
        value = -value
    if value == result:
        return True
    places = len(a.partition(".")[2])
    if b or places < 2:
        return False
    return abs(value - result) <= Fraction(1 if match.group("cut") else 5, 10 ** (places + (0 if match.group("cut") else 1)))


def _turn_seconds(llm: Any, timeout: float, retries: int) -> float:
    """The most one turn waits for its model: what one request may take, its retries
    and their backoff included (the model's own settings, else the tutor's bounds)."""
    number = lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0  # noqa: E731
    own_timeout, own_retries = getattr(llm, "timeout", None), getattr(llm, "max_retries", None)
    timeout = float(own_timeout) if number(own_timeout) and own_timeout > 0 else timeout
    retries = int(own_retries) if number(own_retries) else retries
    backoff, most = getattr(llm, "backoff", 0.5), getattr(llm, "max_backoff", 8.0)
    backoff, most = (backoff if number(backoff) else 0.5), (most if number(most) else 8.0)
    return timeout * (retries + 1) + sum(min(most, backoff * 2.0 ** i) for i in range(retries))


def _default_llm(memory: Any, **bounds: Any) -> Any:
    """The Memory's model, else Gemini with ``GEMINI_API_KEY``, else None; built with
    ``bounds`` (``timeout``, ``max_retries``, ``max_retry_after``) unless the Memory was given a model object."""
    from .. import config
    from ..llm import resolve_llm

    spec = getattr(getattr(memory, "config", None), "llm", None)
    # A Memory named its model by a spec string: the tutor builds the same model with
    # its own bounds (the Memory's extraction keeps the provider's).
    llm = resolve_llm(spec, **bounds) if isinstance(spec, str) else getattr(memory, "llm", None)
    if llm is not None:
        return llm
    if config.gemini_api_key():
        try:
            return resolve_llm("gemini", **bounds)
        except ConfigurationError as exc:
            log.warning("[ACE Runner] Gemini is not usable (%s); answering without a model", exc)
    return None


def build_tutor_graph(memory: Any, **options: Any) -> Any:
    """The compiled LangGraph graph of a :class:`Tutor` of ``memory``."""
    return Tutor(memory, **options).graph


__all__ = [
    "DEFAULT_MODEL_RETRIES", "DEFAULT_MODEL_TIMEOUT", "FACTS_AGENT", "FEEDBACK_HINT", "MAX_MODEL_RETRIES", "MODES", "Tutor", "TurnState",
    "build_tutor_graph", "choose_mode", "clean_answer", "mask_reveal", "model_failure",
]
