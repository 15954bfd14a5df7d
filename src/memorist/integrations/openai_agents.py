"""Memorist's memory as tools of the OpenAI Agents SDK: :func:`memory_tools`.

::

    from agents import Agent, Runner
    from memorist import Memory
    from memorist.integrations.openai_agents import memory_tools, remember_run

    memory = Memory("app.db")
    agent = Agent(name="Assistant", instructions="Use your memory tools.",
                  tools=memory_tools(memory, user_id="sam"))
    result = Runner.run_sync(agent, "I'm vegetarian. What should I cook tonight?")
    remember_run(memory, result, user_id="sam")   # the exchange, as memories

The tools (``agents.FunctionTool``, in this order): ``search_memories``,
``add_memory``, ``list_memories``, ``update_memory``, ``delete_memory``; ``include``
picks some. Each acts for the one scope it was made for (user, agent and/or run), so
a model cannot reach another user's memories whatever arguments it sends. Their
parameters are typed and described for the model (strict JSON schemas); their answers
are JSON text. What the model can fix (an empty query, a limit out of range, an id
that names nothing, arguments of the wrong type or broken JSON) comes back to it as
the tool's answer, ``"Error: ..."`` naming the argument; any other failure is answered
as the SDK's default error handler answers it (a generic message, the error logged).

The tools are coroutines: a :class:`~memorist.Memory`'s calls run in a worker thread, an
:class:`~memorist.AsyncMemory`'s are awaited. Needs ``pip install 'memorist[openai-agents]'``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from ..errors import MissingDependencyError, ValidationError

try:
    from agents import FunctionTool, RunContextWrapper, function_tool
    from agents.exceptions import ModelBehaviorError
    from agents.function_schema import function_schema
    from agents.tool import default_tool_error_function
    from pydantic import BaseModel, Field
    from pydantic import ValidationError as PydanticValidationError
except ImportError as exc:
    raise MissingDependencyError(
        "memorist.integrations.openai_agents needs the OpenAI Agents SDK: pip install 'memorist[openai-agents]'"
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


def _problems(error: PydanticValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']} (got {e.get('input')!r})" for e in error.errors()
    )


def _arguments_error(ctx: RunContextWrapper[Any], model: type[BaseModel] | None) -> str:
    """Why the model's arguments were refused, worked out again from the call itself: the
    SDK keeps the details out of its error (and its logs) unless told to log tool data."""
    name = getattr(ctx, "tool_name", "the tool")
    raw = getattr(ctx, "tool_arguments", None)
    if model is None or not isinstance(raw, str):
        return f"Error: invalid arguments for {name}: send a JSON object matching the tool's parameters"
    try:
        model.model_validate_json(raw or "{}")
    except PydanticValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            return f"Error: the arguments of {name} are not valid JSON: send one JSON object, got {raw[:200]!r}"
        return f"Error: invalid arguments for {name}: {_problems(exc)}"
    return f"Error: invalid arguments for {name}: send a JSON object matching the tool's parameters"


def tool_error(ctx: RunContextWrapper[Any], error: Exception, model: type[BaseModel] | None = None) -> str:
    """The tools' ``failure_error_function``: what the model may fix, said plainly (for
    refused arguments, checked against ``model``, the tool's parameters); any other
    failure as the SDK's default error function says it."""
    if isinstance(error, ModelBehaviorError):
        return _arguments_error(ctx, model)
    if isinstance(error, ModelFixableError):
        return error_text(error)
    return default_tool_error_function(ctx, error)


def _functions(tools: MemoryTools) -> dict[str, Any]:
    """One coroutine per tool, its parameters annotated for the schema the model sees."""

    async def search_memories(
        query: Annotated[str, Field(strict=True, description=ARGUMENTS["query"])],
        limit: Annotated[int, Field(strict=True, description=ARGUMENTS["search_limit"], ge=1, le=MAX_SEARCH)] = 5,
    ) -> str:
        return await tools.asearch(query, limit)

    async def add_memory(
        text: Annotated[str, Field(strict=True, description=ARGUMENTS["text"])],
        importance: Annotated[float | None, Field(strict=True, description=ARGUMENTS["importance"], ge=0, le=1)] = None,
    ) -> str:
        return await tools.aadd(text, importance)

    async def list_memories(
        limit: Annotated[int, Field(strict=True, description=ARGUMENTS["list_limit"], ge=1, le=MAX_LIST)] = 20,
    ) -> str:
        return await tools.alist(limit)

    async def update_memory(
        memory_id: Annotated[str, Field(strict=True, description=ARGUMENTS["memory_id"])],
        text: Annotated[str, Field(strict=True, description=ARGUMENTS["new_text"])],
    ) -> str:
        return await tools.aupdate(memory_id, text)

    async def delete_memory(
        memory_id: Annotated[str, Field(strict=True, description=ARGUMENTS["memory_id"])],
    ) -> str:
        return await tools.adelete(memory_id)

    return {
        "search_memories": search_memories,
        "add_memory": add_memory,
        "list_memories": list_memories,
        "update_memory": update_memory,
        "delete_memory": delete_memory,
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
) -> list[FunctionTool]:
    """The memory tools of one scope, for ``Agent(tools=...)``.

    ``memory`` is a :class:`~memorist.Memory` (or a :class:`~memorist.Client`, an
    :class:`~memorist.AsyncMemory`) with at least one of ``user_id``, ``agent_id`` and
    ``run_id``, or a scoped handle (``memory.scope(user_id="sam")``) without them.
    ``include`` names the tools to make (default: all of :data:`TOOL_NAMES`).
    ``infer=False`` (default) stores what the model gives ``add_memory`` as is (an exact
    repeat answers ``NONE``); ``True`` runs it through Memorist's extractor and
    reconciler. ``metadata`` is stored with every memory the tools add.

    >>> from memorist import Memory
    >>> [t.name for t in memory_tools(Memory(":memory:", embedder="hashing"), user_id="sam")]
    ['search_memories', 'add_memory', 'list_memories', 'update_memory', 'delete_memory']
    """
    names = check_names(include)
    functions = _functions(MemoryTools(memory, user_id=user_id, agent_id=agent_id, run_id=run_id, infer=infer, metadata=metadata))
    made = []
    for name in names:
        model = function_schema(functions[name], name_override=name, use_docstring_info=False).params_pydantic_model
        made.append(function_tool(
            functions[name],
            name_override=name,
            description_override=DESCRIPTIONS[name],
            use_docstring_info=False,
            failure_error_function=functools.partial(tool_error, model=model),
        ))
    return made


def _messages(items: Any) -> list[dict[str, str]]:
    """The user and assistant messages of a run's input (a string or a list of items)."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    found = []
    for item in items or ():
        if not isinstance(item, Mapping) or item.get("role") not in ("user", "assistant"):
            continue  # tool calls and their outputs, reasoning: not what the user said
        content = item.get("content")
        if isinstance(content, list):
            content = "".join(c.get("text", "") for c in content if isinstance(c, Mapping))
        if isinstance(content, str) and content.strip():
            found.append({"role": item["role"], "content": content})
    return found


def remember_run(
    memory: Any,
    result: Any,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    infer: bool = True,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Remember a finished run's exchange: its input's user (and assistant) messages
    and its final output, as one conversation turn of the scope (``memory.add``).

    ``result`` is what ``Runner.run`` / ``Runner.run_sync`` returned. With ``infer=True``
    (default) Memorist extracts facts from the turn and reconciles them with what the
    scope holds (the turn is in the event log even when nothing is extracted); with
    ``False`` each message is stored as is. Returns ``memory.add``'s result. With an
    :class:`~memorist.AsyncMemory` it returns the coroutine to await.
    """
    if not hasattr(result, "input") or not hasattr(result, "final_output"):
        raise ValidationError("result", f"must be the result of Runner.run, got {type(result).__name__}")
    turn = _messages(result.input)
    if result.final_output is not None:
        output = result.final_output if isinstance(result.final_output, str) else str(result.final_output)
        if output.strip():
            turn.append({"role": "assistant", "content": output})
    if not turn:
        raise ValidationError("result", "the run holds no user message and no final output to remember")
    handle = MemoryTools(memory, user_id=user_id, agent_id=agent_id, run_id=run_id).handle
    return handle.add(turn, infer=infer, metadata=dict(metadata) if metadata else None)


__all__ = ["TOOL_NAMES", "memory_tools", "remember_run", "tool_error"]
