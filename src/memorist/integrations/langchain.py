"""Memorist's memory as LangChain tools: ``BaseTool`` subclasses over one scope.

::

    from langchain_openai import ChatOpenAI
    from memorist import Memory
    from memorist.integrations.langchain import memory_tools

    tools = memory_tools(Memory("app.db"), user_id="sam")
    model = ChatOpenAI(model="gpt-5-mini").bind_tools(tools)

The tools, in this order: :class:`SearchMemoriesTool` (``search_memories``),
:class:`AddMemoryTool` (``add_memory``), :class:`ListMemoriesTool`
(``list_memories``), :class:`UpdateMemoryTool` (``update_memory``) and
:class:`DeleteMemoryTool` (``delete_memory``); :func:`memory_tools` makes them all (or
those ``include`` names), or make one: ``SearchMemoriesTool(memory, user_id="sam")``.
Each acts for the one scope it was made for, so a model cannot reach another user's
memories whatever arguments it sends. Arguments are pydantic models (``args_schema``),
so ``tool.invoke({...})``, ``await tool.ainvoke({...})`` and a model's tool calls are
checked before anything runs; answers are JSON text.

What the model can fix (an empty query, a limit out of range, an id that names nothing,
arguments of the wrong type) is answered as the tool's output, ``"Error: ..."`` naming
the argument (a ``ToolMessage`` with ``status="error"`` when the tool runs a model's tool
call); any other failure is raised. ``ainvoke`` runs a :class:`~memorist.Memory`'s call
in a worker thread and awaits an :class:`~memorist.AsyncMemory`'s (which has no ``invoke``).
Needs ``pip install 'memorist[langchain]'``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ..errors import MissingDependencyError

try:
    from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
    from langchain_core.tools import BaseTool, ToolException
    from pydantic import BaseModel, Field
    from pydantic import ValidationError as PydanticValidationError
except ImportError as exc:
    raise MissingDependencyError(
        "memorist.integrations.langchain needs LangChain: pip install 'memorist[langchain]'"
    ) from exc

from ._tools import (
    ARGUMENTS,
    DESCRIPTIONS,
    MAX_LIST,
    MAX_SEARCH,
    TOOL_NAMES,
    MemoryTools,
    ModelFixableError,
    check_names,
    error_text,
)


class SearchMemoriesArgs(BaseModel):
    query: str = Field(strict=True, description=ARGUMENTS["query"])
    limit: int = Field(strict=True, default=5, ge=1, le=MAX_SEARCH, description=ARGUMENTS["search_limit"])


class AddMemoryArgs(BaseModel):
    text: str = Field(strict=True, description=ARGUMENTS["text"])
    importance: float | None = Field(strict=True, default=None, ge=0, le=1, description=ARGUMENTS["importance"])


class ListMemoriesArgs(BaseModel):
    limit: int = Field(strict=True, default=20, ge=1, le=MAX_LIST, description=ARGUMENTS["list_limit"])


class UpdateMemoryArgs(BaseModel):
    memory_id: str = Field(strict=True, description=ARGUMENTS["memory_id"])
    text: str = Field(strict=True, description=ARGUMENTS["new_text"])


class DeleteMemoryArgs(BaseModel):
    memory_id: str = Field(strict=True, description=ARGUMENTS["memory_id"])


def _tool_error(error: ToolException) -> str:
    return str(error)


class MemoryTool(BaseTool):
    """A memory tool over one scope (the base of the five; see the module docstring).

    ``MemoryTool(memory, user_id=..., agent_id=..., run_id=...)``, or a scoped handle
    without ids, or ``tools=`` a :class:`~memorist.integrations._tools.MemoryTools`
    shared by several tools. ``infer`` and ``metadata``: see
    :func:`memorist.integrations.langchain.memory_tools`.
    """

    tools: MemoryTools
    handle_tool_error: Any = _tool_error
    #: The MemoryTools method the tool calls (its async twin is ``"a" + call``).
    call: ClassVar[str] = ""

    def __init__(
        self,
        memory: Any = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        infer: bool = False,
        metadata: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if "tools" not in kwargs:
            kwargs["tools"] = MemoryTools(memory, user_id=user_id, agent_id=agent_id, run_id=run_id, infer=infer, metadata=metadata)
        kwargs.setdefault("handle_validation_error", self._validation_error)
        super().__init__(**kwargs)

    def _validation_error(self, error: PydanticValidationError) -> str:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']} (got {e.get('input')!r})" for e in error.errors()
        )
        return f"Error: invalid arguments for {self.name}: {problems}"

    def _run(self, *args: Any, run_manager: CallbackManagerForToolRun | None = None, **kwargs: Any) -> str:
        try:
            return getattr(self.tools, self.call)(*args, **kwargs)
        except ModelFixableError as exc:
            raise ToolException(error_text(exc)) from exc

    async def _arun(self, *args: Any, run_manager: AsyncCallbackManagerForToolRun | None = None, **kwargs: Any) -> str:
        try:
            return await getattr(self.tools, "a" + self.call)(*args, **kwargs)
        except ModelFixableError as exc:
            raise ToolException(error_text(exc)) from exc


class SearchMemoriesTool(MemoryTool):
    name: str = "search_memories"
    description: str = DESCRIPTIONS["search_memories"]
    args_schema: type[BaseModel] = SearchMemoriesArgs
    call: ClassVar[str] = "search"


class AddMemoryTool(MemoryTool):
    name: str = "add_memory"
    description: str = DESCRIPTIONS["add_memory"]
    args_schema: type[BaseModel] = AddMemoryArgs
    call: ClassVar[str] = "add"


class ListMemoriesTool(MemoryTool):
    name: str = "list_memories"
    description: str = DESCRIPTIONS["list_memories"]
    args_schema: type[BaseModel] = ListMemoriesArgs
    call: ClassVar[str] = "list"


class UpdateMemoryTool(MemoryTool):
    name: str = "update_memory"
    description: str = DESCRIPTIONS["update_memory"]
    args_schema: type[BaseModel] = UpdateMemoryArgs
    call: ClassVar[str] = "update"


class DeleteMemoryTool(MemoryTool):
    name: str = "delete_memory"
    description: str = DESCRIPTIONS["delete_memory"]
    args_schema: type[BaseModel] = DeleteMemoryArgs
    call: ClassVar[str] = "delete"


TOOL_CLASSES: dict[str, type[MemoryTool]] = {
    "search_memories": SearchMemoriesTool,
    "add_memory": AddMemoryTool,
    "list_memories": ListMemoriesTool,
    "update_memory": UpdateMemoryTool,
    "delete_memory": DeleteMemoryTool,
}


def memory_tools(
    memory: Any,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    include: Iterable[str] | None = None,
    infer: bool = False,
    metadata: Mapping[str, Any] | None = None,
) -> list[MemoryTool]:
    """The memory tools of one scope, for ``model.bind_tools(...)`` or an agent.

    ``memory`` is a :class:`~memorist.Memory` (or a :class:`~memorist.Client`, an
    :class:`~memorist.AsyncMemory`) with at least one of ``user_id``, ``agent_id`` and
    ``run_id``, or a scoped handle (``memory.scope(user_id="sam")``) without them.
    ``include`` names the tools to make (default: all of :data:`TOOL_NAMES`).
    ``infer=False`` (default) stores what the model gives ``add_memory`` as is (an exact
    repeat answers ``NONE``); ``True`` runs it through Memorist's extractor and
    reconciler. ``metadata`` is stored with every memory the tools add.

    >>> from memorist import Memory
    >>> tools = {t.name: t for t in memory_tools(Memory(":memory:", embedder="hashing"), user_id="sam")}
    >>> tools["add_memory"].invoke({"text": "Is vegetarian"})
    '{"results": [{"id": "...", "memory": "Is vegetarian", "event": "ADD"}], "message": "Added 1 memory successfully"}'
    >>> tools["search_memories"].invoke({"query": ""})
    "Error: query: must be a non-empty text saying what to look for, got ''"
    """
    names = check_names(include)
    shared = MemoryTools(memory, user_id=user_id, agent_id=agent_id, run_id=run_id, infer=infer, metadata=metadata)
    return [TOOL_CLASSES[name](tools=shared) for name in names]


__all__ = [
    "TOOL_CLASSES",
    "TOOL_NAMES",
    "AddMemoryTool",
    "DeleteMemoryTool",
    "ListMemoriesTool",
    "MemoryTool",
    "SearchMemoriesTool",
    "UpdateMemoryTool",
    "memory_tools",
]
