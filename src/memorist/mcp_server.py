"""Memorist's memory as the tools of an MCP host (``memorist mcp``).

:func:`create_server` builds an MCP server (the official ``mcp`` SDK's
``MCPServer``) over one :class:`~memorist.Memory` and one scope — a user, an agent
and/or a run, fixed when the server starts. Its tools are the Memory calls a model
needs (:data:`TOOLS`): remembering, searching, listing, reading, correcting and
forgetting memories, their history, erasure, undoing a merge; with a user or an
agent, sharing (the relation tools) and, without a run, consolidation; under the
energy policy, ``end_conversation``. A server lists only the tools that can work in
its scope. Each is a function of this module whose first argument is the scoped
handle (:class:`~memorist.api.Scoped`, built from the server's configuration); the
server registers it with the handle bound.

No tool takes a user, agent or run id: every call acts through the handle, inside
the configured scope, so whatever the model sends, a host cannot reach another
user's memories (a memory outside the scope is "not found", exactly like a missing
one). Arguments are taken as the tool's schema states them, strictly: ``"3"`` is not
the integer a ``limit`` takes, and an argument the tool does not take is refused by
name, never ignored. The engine validates every argument as it does for the library
(a range the schema states, such as an importance from 0 to 1, is the engine's to
check too); a :class:`~memorist.errors.MemoristError` becomes a tool error result
whose one-line text names the field or the id, never a crash of the server.

>>> from memorist import Memory
>>> from memorist.mcp_server import create_server
>>> server = create_server(Memory(":memory:", embedder="hashing"), user_id="alex")
>>> server.run("stdio")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field

from .api import Scoped
from .errors import MemoristError, MissingDependencyError, ValidationError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools import Tool

    from .memory import Memory

_F = TypeVar("_F", bound=Callable[..., Any])

INSTRUCTIONS = """\
Memorist is the long-term memory of the person you are talking with (the server is \
configured for one user, agent or run; you never pass an id for it). Memories are \
short facts and preferences that last across conversations.

- Before answering anything personal, or at the start of a conversation, call \
search_memories with what you need to know ("food preferences", "where they live").
- When the person tells you something worth remembering (who they are, preferences, \
plans, constraints), call add_memory with the turn; Memorist extracts the facts and \
reconciles them with what it already knows, so repeating a fact does not duplicate it.
- When a memory is wrong, update_memory or delete_memory it by id (ids come from \
search_memories, list_memories and add_memory).
"""


class ChatMessage(BaseModel):
    """One message of a conversation turn (the library's, as :func:`memorist.validate.messages` takes it)."""

    model_config = ConfigDict(strict=True)

    role: Literal["user", "assistant", "system", "tool"] = Field(
        description="Who said it: 'user' (the person), 'assistant' (you), 'tool' (a tool's output) or 'system' (ignored for memory)."
    )
    content: str = Field(description="What was said.")
    name: str | None = Field(default=None, description="The speaker's name, when several people talk.")
    metadata: dict[str, Any] | None = Field(
        default=None, description="Optional JSON object for this message, merged over the call's metadata "
        "(kept when infer is false: with infer, the facts take the call's)."
    )
    timestamp: str | float | None = Field(
        default=None, description="When it was said: ISO-8601 (e.g. '2024-05-01T09:30:00Z') or epoch seconds "
        "(default: now; kept when infer is false: with infer, the facts take the call's timestamp)."
    )


def _version() -> str:
    try:
        return importlib.metadata.version("memorist")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree
        return "0"


def require_sdk() -> Any:
    """The SDK's ``MCPServer`` class; :class:`~memorist.errors.MissingDependencyError`
    naming the pip command when the ``mcp`` extra (SDK 2 or later) is not installed."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError as exc:
        try:
            found = importlib.metadata.version("mcp")
        except importlib.metadata.PackageNotFoundError:
            raise MissingDependencyError(
                "memorist mcp needs the MCP SDK: pip install 'memorist[mcp]'"
            ) from exc
        raise MissingDependencyError(
            f"memorist mcp needs the MCP SDK 2 or later, found mcp {found}: pip install -U 'mcp>=2'"
        ) from exc
    return MCPServer


# the tools -----------------------------------------------------------------------------------
# Each tool is a function of the scoped handle and the model's arguments. create_server
# registers it with the handle bound (see _bound): the SDK reads the rest of its
# signature, its annotations and its docstring for the tool's schema and description.


@dataclass(frozen=True, slots=True)
class _Hints:
    """What a tool may do (the MCP tool annotations a host shows or acts on)."""

    title: str
    read_only: bool
    destructive: bool = False
    idempotent: bool = False
    #: Served only by a server whose Memory runs the energy policy.
    energy: bool = False
    #: Served only by a server with a user or an agent: what it does is theirs (sharing).
    subject: bool = False
    #: Served only by a server with no run: it works on a user's or agent's whole scope.
    no_run: bool = False

    def served(self, ids: dict[str, Any], *, energy: bool) -> bool:
        """Whether a server of scope ``ids`` (and policy) can serve this tool."""
        if self.energy and not energy:
            return False
        if (self.subject or self.no_run) and not (ids.get("user_id") or ids.get("agent_id")):
            return False
        return not (self.no_run and ids.get("run_id"))


#: The tools, in the order they are listed, each with its hints.
TOOLS: list[tuple[Callable[..., Any], _Hints]] = []


def _tool(title: str, *, read_only: bool, destructive: bool = False, idempotent: bool = False,
          energy: bool = False, subject: bool = False, no_run: bool = False) -> Callable[[_F], _F]:
    def register(fn: _F) -> _F:
        TOOLS.append((fn, _Hints(title, read_only, destructive, idempotent, energy, subject, no_run)))
        return fn

    return register


# The bounds of a number from 0 to 1, stated in the schema for the model but checked by
# the engine (as for every surface), whose refusal names the field in one line: a bound
# in the argument model would be checked first, and answered with a validation dump.
_UNIT = {"minimum": 0, "maximum": 1}


# Not marked destructive: reconciliation may update or delete a memory a new fact
# contradicts, but every change stays in the memory's history.
@_tool("Remember", read_only=False)
def add_memory(
    handle: Scoped,
    messages: Annotated[
        list[ChatMessage] | None,
        Field(description="The conversation turn to remember, e.g. [{'role': 'user', 'content': '...'}]. Give messages or text."),
    ] = None,
    text: Annotated[str | None, Field(description="One thing to remember, as plain text. Give text or messages.")] = None,
    metadata: Annotated[
        dict[str, Any] | None,
        Field(description="Optional JSON object stored with the new memories (e.g. {'source': 'chat'}); searchable with filters."),
    ] = None,
    infer: Annotated[
        bool,
        Field(description="True (default): extract short facts and reconcile them with existing memories. False: store each message verbatim."),
    ] = True,
    importance: Annotated[
        float | None,
        Field(description="How much this matters, 0 to 1 (0.8 or more: never merged by consolidation). Default: estimated.",
              json_schema_extra=_UNIT),
    ] = None,
) -> dict[str, Any]:
    """Remember something about the person for future conversations.

    Pass the conversation turn as `messages` or a single statement as `text`.
    With infer=true, Memorist extracts short facts ("Is vegetarian") and reconciles
    them with what it already knows: new facts are added, changed ones updated,
    contradicted ones deleted, known ones left alone. Returns the memories it
    changed: {"results": [{"id", "memory", "event": "ADD" | "UPDATE" | "DELETE"}],
    "message"}.
    """
    if (messages is None) == (text is None):
        raise ValidationError(
            "messages",
            "give either messages (a list of {role, content}) or text, not both"
            if messages is not None
            else "give messages (a list of {role, content}) or text",
        )
    if messages is not None:
        return handle.add([m.model_dump(exclude_none=True) for m in messages], metadata=metadata, infer=infer, importance=importance)
    try:
        return handle.add(text, metadata=metadata, infer=infer, importance=importance)
    except ValidationError as exc:
        if exc.field != "messages":
            raise
        # The library takes the text as its messages; the model gave it as text.
        raise ValidationError("text", str(exc).split(": ", 1)[-1]) from exc


@_tool("Search memories", read_only=True, idempotent=True)
def search_memories(
    handle: Scoped,
    query: Annotated[str, Field(description="What you want to know, in words: 'dietary restrictions', 'where does the user live'.")],
    limit: Annotated[int, Field(description="How many memories to return, most relevant first (default 5).")] = 5,
    filters: Annotated[
        dict[str, Any] | None,
        Field(
            description=(
                "Optional filter on metadata and fields: {'source': 'chat'} (equality), "
                "{'priority': {'gte': 2}}, {'source': {'in': ['chat', 'email']}}, "
                "{'created_at': {'gte': '2024-01-01T00:00:00Z'}}, combined with AND / OR / NOT lists. "
                "Operators: eq, ne, in, nin, gt, gte, lt, lte, contains, exists."
            )
        ),
    ] = None,
) -> dict[str, Any]:
    """Search the person's memories by meaning and keywords; the most relevant first.

    Use it before answering anything that depends on who the person is or what
    they told you before. Returns {"results": [{"id", "memory", "created_at",
    "updated_at", "metadata", "score", "similarity", ...}]}; similarity is the
    cosine of memory and query (1: same meaning, about 0: unrelated).
    """
    return handle.search(query, limit=limit, filters=filters)


@_tool("List memories", read_only=True, idempotent=True)
def list_memories(
    handle: Scoped,
    limit: Annotated[int, Field(description="At most this many memories (default 100).")] = 100,
) -> dict[str, Any]:
    """List the person's memories, newest first.

    Returns {"results": [{"id", "memory", "created_at", "updated_at", "metadata", ...}]}.
    Prefer search_memories when you look for something in particular.
    """
    return handle.get_all(limit=limit)


@_tool("Get a memory", read_only=True, idempotent=True)
def get_memory(
    handle: Scoped,
    memory_id: Annotated[str, Field(description="The memory's id, as returned by search_memories or list_memories.")],
) -> dict[str, Any]:
    """One memory by id: {"id", "memory", "created_at", "updated_at", "metadata", ...}."""
    return handle.get(memory_id)


@_tool("Update a memory", read_only=False, destructive=True, idempotent=True)
def update_memory(
    handle: Scoped,
    memory_id: Annotated[str, Field(description="The id of the memory to change.")],
    text: Annotated[str, Field(description="The memory's new text, a short self-contained fact.")],
    metadata: Annotated[
        dict[str, Any] | None,
        Field(description="Optional JSON object whose keys are merged into the memory's metadata."),
    ] = None,
) -> dict[str, Any]:
    """Replace a memory's text, e.g. to correct it. The old text stays in its history.

    Returns {"id", "memory", "event": "UPDATE", "previous_memory"}.
    """
    return handle.update(memory_id, text, metadata)


@_tool("Delete a memory", read_only=False, destructive=True, idempotent=True)
def delete_memory(
    handle: Scoped,
    memory_id: Annotated[str, Field(description="The id of the memory to delete.")],
) -> dict[str, Any]:
    """Forget one memory (when it is wrong or the person asks you to forget it).

    Its history stays readable with memory_history. Returns {"id", "memory",
    "event": "DELETE", "message"}.
    """
    return handle.delete(memory_id)


@_tool("History of a memory", read_only=True, idempotent=True)
def memory_history(
    handle: Scoped,
    memory_id: Annotated[str, Field(description="The id of the memory (a deleted one too).")],
) -> dict[str, Any]:
    """Every change of one memory, oldest first: when it was added, updated
    (old and new text) and deleted.

    Returns {"results": [{"event": "ADD" | "UPDATE" | "DELETE", "old_memory",
    "new_memory", "created_at", ...}]}.
    """
    return {"results": handle.history(memory_id)}


@_tool("Erase everything of this person", read_only=False, destructive=True, idempotent=True)
def erase_memories(
    handle: Scoped,
    dry_run: Annotated[bool, Field(description="Only count what would be erased; change nothing.")] = False,
) -> dict[str, Any]:
    """Forget this person completely, for good (only when they ask you to forget
    everything about them): every memory, playbook, trajectory, reflection and
    minute of this scope, and the text of its history. Cannot be undone; call it
    with dry_run=true first to see what would go. Returns the counts per kind
    ({"erased": {...}, "vectors", "events", "message"}).
    """
    return handle.erase(dry_run=dry_run)


# sharing: the server acts as its user and/or agent (a server with neither lists no sharing tool)
def _sharing(handle: Scoped) -> Any:
    """The relation calls of the server's subject (its user and/or agent)."""
    return handle.memory.as_subject(user_id=handle.ids["user_id"], agent_id=handle.ids["agent_id"]).relations


_SUBJECT = Field(description="Who: 'agent:<id>', 'user:<id>' or 'group:<id>'.")
_OBJECT = Field(description="What: 'playbook:<agent>/<name>' (e.g. 'playbook:agent_a/default'), "
                            "'scope:user:<id>' or 'scope:agent:<id>' (memories), or 'group:<id>'.")
_RELATION = Field(description="'viewer' (reads), 'editor' (reads and writes), 'owner' (also shares); 'member' of a group.")


@_tool("Share", read_only=False, idempotent=True, subject=True)
def create_relation(handle: Scoped, subject: Annotated[str, _SUBJECT], relation: Annotated[str, _RELATION],
                    object: Annotated[str, _OBJECT]) -> dict[str, Any]:  # noqa: A002
    """Share something you own (your playbook, your memories, a group you own) with
    another agent, user or group. Returns {"subject", "relation", "object", "changed"}."""
    return _sharing(handle).create(subject, relation, object)


@_tool("Stop sharing", read_only=False, destructive=True, idempotent=True, subject=True)
def delete_relation(handle: Scoped, subject: Annotated[str, _SUBJECT], relation: Annotated[str, _RELATION],
                    object: Annotated[str, _OBJECT]) -> dict[str, Any]:  # noqa: A002
    """Revoke a relation you created; the subject loses it at its next call."""
    return _sharing(handle).delete(subject, relation, object)


@_tool("List shares", read_only=True, idempotent=True, subject=True)
def list_relations(handle: Scoped, subject: Annotated[str | None, _SUBJECT] = None, relation: Annotated[str | None, _RELATION] = None,
                   object: Annotated[str | None, _OBJECT] = None,  # noqa: A002
                   limit: Annotated[int, Field(description="At most this many (default 100).")] = 100) -> dict[str, Any]:
    """What is shared with you, or what you share of something you own."""
    return _sharing(handle).list(subject=subject, relation=relation, object=object, limit=limit)


@_tool("Check access", read_only=True, idempotent=True, subject=True)
def check_relation(handle: Scoped, subject: Annotated[str, _SUBJECT], relation: Annotated[str, _RELATION],
                   object: Annotated[str, _OBJECT]) -> dict[str, Any]:  # noqa: A002
    """Whether you (or someone, on what you own) may read ('viewer') or write
    ('editor') something: {"allowed", "via"}."""
    return _sharing(handle).check(subject, relation, object)


@_tool("Consolidate memories", read_only=False, no_run=True)
def consolidate_memories(
    handle: Scoped,
    memory_type: Annotated[str | None, Field(description="Only memories of this kind: 'fact', 'preference', 'experience'... (default: all).")] = None,
    min_importance: Annotated[float, Field(description="Only memories below this importance are merged (default 0.5).",
                                           json_schema_extra=_UNIT)] = 0.5,
    preserve_high_importance: Annotated[bool, Field(description="Never touch a memory at or above importance_threshold (default true).")] = True,
    importance_threshold: Annotated[float, Field(description="What counts as high importance (default 0.8).", json_schema_extra=_UNIT)] = 0.8,
    dry_run: Annotated[bool, Field(description="Only report what would be merged.")] = False,
) -> dict[str, Any]:
    """Merge near-duplicate memories of low importance into one each, keeping every
    name, number and date they hold; important memories are never touched.

    Returns {"merged_count", "consolidated_count", "preserved_count",
    "space_saved_bytes", "results", "rejected", "run_id"}; `rollback` with the
    run_id undoes it.
    """
    return handle.learning.consolidate(memory_type, None, min_importance, preserve_high_importance, importance_threshold, dry_run=dry_run)


@_tool("Undo a merge", read_only=False)
def rollback(
    handle: Scoped,
    event_or_run_id: Annotated[
        Any,
        Field(description="A consolidation's run_id, or the seq of the event of the merge, update or delete to undo.",
              json_schema_extra={"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    ],
) -> dict[str, Any]:
    """Undo a consolidation, or an update or delete that reconciliation made: the
    memories come back exactly as they were. Refused if it was undone already or
    the memories changed again since.

    Returns {"rolled_back", "op", "restored", "retired", "rollback_seq"}.
    """
    return dict(handle.rollback(event_or_run_id))


# The energy tiers: the end of a conversation triggers consolidation
@_tool("End the conversation", read_only=False, idempotent=True, energy=True)
def end_conversation(handle: Scoped) -> dict[str, Any]:
    """Call this when the conversation ends (the person says goodbye).

    Memorist then consolidates this person's memories in the background: energy
    decays, memories nobody came back to expire, and the ones that keep
    mattering are promoted to longer-lived tiers. Returns at once with
    {"scheduled", "coalesced", "running", "waiting", "scopes"}.
    """
    return handle.tiers.end_conversation()


def _bound(fn: Callable[..., Any], handle: Scoped, lock: threading.Lock) -> Callable[..., Any]:
    """``fn`` as the tool of one server: its handle bound, its calls serialized (sync
    tools run on worker threads; the Memory is shared), engine errors turned into tool
    errors (an ``is_error`` result the model reads). It keeps ``fn``'s name, docstring,
    and signature and annotations without the handle, which the SDK reads."""
    from mcp.server.mcpserver.exceptions import ToolError

    signature = inspect.signature(fn, eval_str=True)
    bound = signature.replace(parameters=list(signature.parameters.values())[1:])

    @functools.wraps(fn)
    def tool(*args: Any, **kwargs: Any) -> Any:
        with lock:
            try:
                return fn(handle, *args, **kwargs)
            except MemoristError as exc:
                raise ToolError(str(exc)) from exc

    tool.__signature__ = bound  # type: ignore[attr-defined]
    tool.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k != "handle"}
    return tool


def _takes_json(annotation: Any) -> bool:
    """Whether an argument of this type takes a list or an object."""
    kinds = [annotation, *get_args(annotation)]
    return any((get_origin(kind) or kind) in (list, dict) for kind in kinds)


@functools.cache
def _json_where_taken() -> type:
    """The SDK's ``FuncMetadata``, reading a JSON string as a list or an object only
    for an argument that takes one (the SDK reads it so for any argument but a plain
    ``str``, so ``"null"`` given as an optional text was no text at all)."""
    from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

    class JsonWhereTaken(FuncMetadata):
        def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
            parsed = super().pre_parse_json(data)
            fields = self.arg_model.model_fields
            return {k: parsed[k] if k in fields and _takes_json(fields[k].annotation) else v for k, v in data.items()}

    return JsonWhereTaken


def _strict(tool: Tool) -> Tool:
    """``tool`` taking its arguments as its schema states them: no coercion (``"3"``
    is not an integer, ``"yes"`` not a boolean, as in the library) and no argument it
    does not take (refused by name; the schema says ``additionalProperties: false``).

    A list or an object sent as a JSON string (some hosts send them so) is still read
    as JSON, but only for an argument that takes one: a text is the text it is, even
    ``"null"`` or ``'["a"]'``."""
    meta = tool.fn_metadata
    loose = meta.arg_model
    model = type(loose.__name__, (loose,), {"model_config": ConfigDict(extra="forbid", strict=True), "__module__": __name__})
    fields = {name: getattr(meta, name) for name in type(meta).model_fields}
    tool.fn_metadata = _json_where_taken()(**{**fields, "arg_model": model})
    tool.parameters = model.model_json_schema(by_alias=True)
    return tool


def create_server(
    memory: Memory,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    name: str = "memorist",
) -> MCPServer:
    """An MCP server whose tools act on ``memory`` inside one scope.

    At least one of ``user_id``, ``agent_id`` and ``run_id`` is required
    (:class:`~memorist.errors.ValidationError` otherwise). Run it with
    ``server.run("stdio")`` or ``server.run("streamable-http", host=..., port=...)``.
    Tool calls are served one at a time (the Memory is shared).
    """
    MCPServer = require_sdk()
    from mcp.server.mcpserver.tools import Tool
    from mcp.types import ToolAnnotations

    # Every tool acts through this handle: it takes no ids and reaches nothing outside the scope.
    handle = memory.scope(user_id=user_id, agent_id=agent_id, run_id=run_id)
    lock = threading.Lock()
    shown = ", ".join(f"{k}={v!r}" for k, v in handle.ids.items() if v)
    tools = []
    for fn, hints in TOOLS:
        if not hints.served(handle.ids, energy=bool(memory.energy)):
            continue  # it could only fail in this scope: not offered
        annotations = ToolAnnotations(
            title=hints.title,
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=False,
        )
        tools.append(_strict(Tool.from_function(_bound(fn, handle, lock), title=hints.title, annotations=annotations)))
    return MCPServer(
        name,
        title="Memorist memory",
        description=f"Long-term memory of {shown}",
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level="WARNING",
        tools=tools,
    )


__all__ = ["INSTRUCTIONS", "TOOLS", "ChatMessage", "add_memory", "check_relation", "create_relation", "create_server", "delete_memory",
           "delete_relation", "end_conversation", "erase_memories", "get_memory", "list_relations",
           "list_memories", "memory_history", "require_sdk", "search_memories", "update_memory"]
