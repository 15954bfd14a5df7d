"""The memory tools every agent framework gets, written once: :class:`MemoryTools`.

:mod:`memorist.integrations.openai_agents` and :mod:`memorist.integrations.langchain`
wrap these calls in their framework's tool classes; the names, the descriptions the
model reads and the answers are the same in both.

A tool set acts for one scope, through a scoped handle (:meth:`memorist.Memory.scope`),
so a model cannot reach another user's memories whatever arguments it invents. Answers
are compact JSON text, which is what a tool result is to a model. What a model can fix
(an empty query, a limit out of range, an unknown id) is a :class:`ModelFixableError`
whose message names the argument; each framework hands it to the model as the tool's
answer. A failing store or provider is the operator's problem and is raised as is.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..api import SCOPE_IDS, Scoped
from ..errors import ConfigurationError, ConflictError, NotFoundError, PermissionDeniedError, ValidationError

#: What a model may fix by calling the tool again with other arguments.
ModelFixableError = (ValidationError, NotFoundError, PermissionDeniedError, ConflictError)

#: The most memories one search returns (a tool result goes into the prompt).
MAX_SEARCH = 50
#: The most memories one listing returns.
MAX_LIST = 100
#: The tools, in the order a framework lists them.
TOOL_NAMES = ("search_memories", "add_memory", "list_memories", "update_memory", "delete_memory")

# The descriptions the model reads, one per tool and argument, shared by every framework.
DESCRIPTIONS = {
    "search_memories": (
        "Search the long-term memory of this user for what is relevant to a question, most relevant "
        "first. Use it before answering anything that depends on who the user is or what they said "
        "in earlier conversations. Returns JSON: {\"results\": [{\"id\", \"memory\", \"created_at\", "
        "\"similarity\"}]}; similarity is 1 for the same meaning, about 0 for unrelated."
    ),
    "add_memory": (
        "Remember one thing about the user for future conversations: a short, self-contained "
        "fact or preference in plain words (\"Is vegetarian\", \"Prefers answers in French\"). "
        "Call it once per fact. Returns JSON: {\"results\": [{\"id\", \"memory\", \"event\"}], "
        "\"message\"}; event is ADD for a new memory, NONE when it was already remembered."
    ),
    "list_memories": (
        "List what is remembered about the user, newest first. Prefer search_memories when you "
        "look for something in particular. Returns JSON: {\"results\": [{\"id\", \"memory\", \"created_at\"}]}."
    ),
    "update_memory": (
        "Correct a remembered fact that changed (\"Moved to Lyon\"). Takes the id from "
        "search_memories or list_memories; the old text stays in the memory's history. Returns "
        "JSON: {\"id\", \"memory\", \"previous_memory\", \"event\": \"UPDATE\"}."
    ),
    "delete_memory": (
        "Forget one remembered fact, when it is wrong or the user asks you to forget it. Takes "
        "the id from search_memories or list_memories. Returns JSON: {\"id\", \"memory\", \"event\": \"DELETE\"}."
    ),
}
ARGUMENTS = {
    "query": "What you want to know, in words: 'dietary restrictions', 'where does the user live'.",
    "search_limit": f"How many memories to return, most relevant first (1 to {MAX_SEARCH}).",
    "list_limit": f"How many memories to return, newest first (1 to {MAX_LIST}).",
    "text": "The fact to remember, short and self-contained, in plain words.",
    "importance": "How much this matters, 0 to 1; null to let Memorist estimate it.",
    "memory_id": "The memory's id, as search_memories or list_memories returned it.",
    "new_text": "The memory's new text, a short self-contained fact.",
}


def _number(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(name, f"must be a whole number from {low} to {high}, got {value!r}")
    if not low <= value <= high:
        raise ValidationError(name, f"must be from {low} to {high}, got {value}")
    return value


def _shown(row: Mapping[str, Any], *, similarity: bool = False) -> dict[str, Any]:
    item: dict[str, Any] = {"id": row["id"], "memory": row["memory"], "created_at": row.get("created_at")}
    if similarity and row.get("similarity") is not None:
        item["similarity"] = round(float(row["similarity"]), 3)
    if row.get("metadata"):
        item["metadata"] = row["metadata"]
    return item


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


@contextmanager
def _refused_as_text() -> Iterator[None]:
    """What the search for a repeat refuses in the text (its length) is refused as the
    add's ``text``, the argument the model gave."""
    try:
        yield
    except ValidationError as exc:
        if exc.field != "query":
            raise
        raise ValidationError("text", str(exc).split(": ", 1)[-1]) from exc


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class MemoryTools:
    """The memory tools' calls over one scope; each returns the JSON text the model reads.

    ``memory`` is a :class:`~memorist.Memory` (or :class:`~memorist.Client`,
    :class:`~memorist.AsyncMemory`, :class:`~memorist.AsyncClient`) with the scope's ids,
    or a handle already scoped (``memory.scope(user_id="sam")``) without them.

    ``infer`` is how :meth:`add` stores what the model gives it: ``False`` (default)
    as is, since the model already wrote a fact, an exact repeat of a memory of the
    scope answering ``NONE`` instead of piling up; ``True`` through the extractor and
    reconciler (worth it with an LLM extractor configured: the default heuristic one
    reads a person's own words, "I'm vegetarian", not notes about them).
    ``metadata`` is stored with every memory the tools add (e.g. ``{"source": "agent"}``).
    """

    def __init__(
        self,
        memory: Any,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        infer: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        if isinstance(memory, Scoped):
            given = [k for k, v in ids.items() if v is not None]
            if given:
                raise ValidationError(given[0], f"the handle is scoped already ({memory!r}): give the ids or a scoped handle, not both")
            self.handle = memory
        else:
            if not all(callable(getattr(memory, name, None)) for name in ("search", "add", "get_all", "scope")):
                raise ValidationError("memory", f"must be a Memorist Memory, Client or scoped handle, got {type(memory).__name__}")
            self.handle = memory.scope(**ids)
        if not isinstance(infer, bool):
            raise ValidationError("infer", f"must be True or False, got {infer!r}")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ValidationError("metadata", f"must be a mapping, got {type(metadata).__name__}")
        self.infer = infer
        self.metadata = dict(metadata) if metadata else None
        # AsyncMemory / AsyncClient: their calls are awaited; a sync Memory's run in a thread.
        self.is_async = inspect.iscoroutinefunction(getattr(self.handle.memory, "search", None))
        self._lock = threading.Lock()
        self._alock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    @property
    def scope(self) -> dict[str, str | None]:
        """The ids the tools act for."""
        return {k: self.handle.ids[k] for k in SCOPE_IDS}

    # the calls, each in two halves: what to ask the handle, and what to answer ----------------
    def _search(self, query: Any, limit: Any = 5) -> tuple[Callable[[], Any], Callable[[Any], str]]:
        _number("limit", limit, 1, MAX_SEARCH)
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query", f"must be a non-empty text saying what to look for, got {query!r}")
        return (lambda: self.handle.search(query, limit=limit)), (
            lambda found: _json({"results": [_shown(r, similarity=True) for r in found["results"]]})
        )

    def _list(self, limit: Any = 20) -> tuple[Callable[[], Any], Callable[[Any], str]]:
        _number("limit", limit, 1, MAX_LIST)
        return (lambda: self.handle.get_all(limit=limit)), (
            lambda found: _json({"results": [_shown(r) for r in found["results"]]})
        )

    def _add(self, text: Any, importance: Any = None) -> tuple[Callable[[], Any], Callable[[Any], str]]:
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("text", f"must be a non-empty fact to remember, got {text!r}")
        if importance is not None and (isinstance(importance, bool) or not isinstance(importance, int | float) or not 0 <= importance <= 1):
            raise ValidationError("importance", f"must be a number from 0 to 1 (or null), got {importance!r}")

        def add() -> Any:
            return self.handle.add(text, infer=self.infer, metadata=self.metadata, importance=importance)

        return add, lambda result: _json({"results": result["results"], "message": result["message"]})

    def _repeat_search(self, text: str) -> Callable[[], Any]:
        """The search for a memory of the scope that says ``text`` already."""

        def search() -> Any:
            with _refused_as_text():
                return self.handle.search(text, limit=5)

        async def asearch() -> Any:
            with _refused_as_text():
                return await self.handle.search(text, limit=5)

        return asearch if self.is_async else search

    def _repeat(self, text: str, found: Any) -> str | None:
        """The answer to an add of ``text`` when the scope remembers it word for word."""
        for row in found["results"]:
            if _same(row["memory"], text):
                return _json({"results": [{"id": row["id"], "memory": row["memory"], "event": "NONE"}],
                              "message": "Already remembered; nothing changed"})
        return None

    def _update(self, memory_id: Any, text: Any) -> tuple[Callable[[], Any], Callable[[Any], str]]:
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise ValidationError("memory_id", f"must be the id of a memory, got {memory_id!r}")
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("text", f"must be the memory's new text, got {text!r}")
        return (lambda: self.handle.update(memory_id, text)), (
            lambda r: _json({k: r[k] for k in ("id", "memory", "previous_memory", "event")})
        )

    def _delete(self, memory_id: Any) -> tuple[Callable[[], Any], Callable[[Any], str]]:
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise ValidationError("memory_id", f"must be the id of a memory, got {memory_id!r}")
        return (lambda: self.handle.delete(memory_id)), (lambda r: _json({k: r[k] for k in ("id", "memory", "event")}))

    # sync ------------------------------------------------------------------------------------
    def _call(self, ask: Callable[[], Any]) -> Any:
        if self.is_async:
            raise ConfigurationError("these memory tools are bound to an async memory: call them asynchronously (ainvoke)")
        return ask()

    def _sync(self, plan: tuple[Callable[[], Any], Callable[[Any], str]]) -> str:
        ask, answer = plan
        return answer(self._call(ask))

    def search(self, query: str, limit: int = 5) -> str:
        """search_memories: the scope's memories most relevant to ``query``."""
        return self._sync(self._search(query, limit))

    def list(self, limit: int = 20) -> str:
        """list_memories: the scope's memories, newest first."""
        return self._sync(self._list(limit))

    def add(self, text: str, importance: float | None = None) -> str:
        """add_memory: remember ``text`` (see ``infer``)."""
        plan = self._add(text, importance)
        # A model may call add_memory several times at once (the tools run in threads):
        # the look for a repeat and the write are one step.
        with self._lock:
            if not self.infer:
                repeat = self._repeat(text, self._call(self._repeat_search(text)))
                if repeat is not None:
                    return repeat
            return self._sync(plan)

    def update(self, memory_id: str, text: str) -> str:
        """update_memory: replace a memory's text."""
        return self._sync(self._update(memory_id, text))

    def delete(self, memory_id: str) -> str:
        """delete_memory: forget one memory."""
        return self._sync(self._delete(memory_id))

    # async -----------------------------------------------------------------------------------
    async def _ask(self, ask: Callable[[], Any]) -> Any:
        if self.is_async:
            return await ask()
        return await asyncio.to_thread(ask)

    async def _async(self, plan: tuple[Callable[[], Any], Callable[[Any], str]]) -> str:
        ask, answer = plan
        return answer(await self._ask(ask))

    async def asearch(self, query: str, limit: int = 5) -> str:
        return await self._async(self._search(query, limit))

    async def alist(self, limit: int = 20) -> str:
        return await self._async(self._list(limit))

    async def aadd(self, text: str, importance: float | None = None) -> str:
        if not self.is_async:
            self._add(text, importance)  # bad arguments refused before any thread starts
            return await asyncio.to_thread(self.add, text, importance)
        plan = self._add(text, importance)
        async with self._async_lock():
            if not self.infer:
                repeat = self._repeat(text, await self._ask(self._repeat_search(text)))
                if repeat is not None:
                    return repeat
            return await self._async(plan)

    def _async_lock(self) -> asyncio.Lock:
        """The lock of the running event loop's adds (an asyncio lock serves one loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._alock is None or self._alock[0] is not loop:
                self._alock = (loop, asyncio.Lock())
            return self._alock[1]

    async def aupdate(self, memory_id: str, text: str) -> str:
        return await self._async(self._update(memory_id, text))

    async def adelete(self, memory_id: str) -> str:
        return await self._async(self._delete(memory_id))

    def __repr__(self) -> str:
        return f"MemoryTools({self.handle!r})"


def check_names(include: Any) -> tuple[str, ...]:
    """``include`` (tool names) checked against :data:`TOOL_NAMES`, in their order."""
    if include is None:
        return TOOL_NAMES
    if isinstance(include, str) or not all(isinstance(n, str) for n in include):
        raise ValidationError("include", f"must be a list of tool names from {list(TOOL_NAMES)}, got {include!r}")
    unknown = sorted(set(include) - set(TOOL_NAMES))
    if unknown:
        raise ValidationError("include", f"unknown tool {unknown[0]!r}; the tools are {', '.join(TOOL_NAMES)}")
    if not include:
        raise ValidationError("include", "names no tool")
    return tuple(n for n in TOOL_NAMES if n in include)


def error_text(exc: BaseException) -> str:
    """A model-fixable error as the model reads it."""
    return f"Error: {exc}"


__all__ = ["ARGUMENTS", "DESCRIPTIONS", "MAX_LIST", "MAX_SEARCH", "TOOL_NAMES", "MemoryTools", "ModelFixableError", "check_names", "error_text"]
