"""Request and response shapes of the REST API (they are what ``/openapi.json`` shows).

Requests are checked here for their shape (types, required fields, id lengths,
``limit`` bounds); what the engine checks beyond that (blank text, control
characters, metadata size, filter syntax) comes back from :class:`~memorist.Memory`
as a ValidationError naming the field, so both answer 422 the same way.
Responses are documented, not re-validated: routes return what Memory returns.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .. import model
from ..model import AddResult, DeleteAllResult, DeleteResult, UpdateResult
from ..validate import MAX_EPOCH, MAX_ID_CHARS, MAX_LIMIT


def _ranges(*categories: str) -> str:
    """A regex character-class body of the characters of the Unicode categories
    (those of the Basic Multilingual Plane: ``\\uXXXX`` is portable regex syntax)."""
    spans: list[list[int]] = []
    for code in range(0x10000):
        if unicodedata.category(chr(code)) in categories:
            if spans and spans[-1][1] == code - 1:
                spans[-1][1] = code
            else:
                spans.append([code, code])
    return "".join(f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in spans)


# What the engine refuses, said in the schema too (there it documents; the engine
# checks): an id holds no control character and something besides whitespace; a
# text holds a visible character (not only whitespace, control and format ones).
_CONTROL = _ranges("Cc")
_INVISIBLE = _ranges("Cc", "Cf")
ID_PATTERN = f"^[^{_CONTROL}]*[^\\s{_CONTROL}][^{_CONTROL}]*$"
TEXT_PATTERN = f"^[\\s\\S]*[^\\s{_INVISIBLE}][\\s\\S]*$"
CONTENT_PATTERN = f"^(\\s*|[\\s\\S]*[^\\s{_INVISIBLE}][\\s\\S]*)$"


# A date the engine takes: ISO-8601 from 1971 to 9999 (a looser form may still be
# accepted), or epoch seconds.
DATE_PATTERN = (
    "^(197[1-9]|19[89][0-9]|[2-9][0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"
    "([T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\\.[0-9]{1,6})?)?(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9])?)?$"
)
Date = Annotated[str, Field(json_schema_extra={"pattern": DATE_PATTERN})] | Annotated[float, Field(ge=0, le=MAX_EPOCH)]


def id_schema(description: str) -> dict[str, Any]:
    """The keyword arguments of a Field, Query or Path that holds an id."""
    return {"min_length": 1, "max_length": MAX_ID_CHARS, "description": description, "json_schema_extra": {"pattern": ID_PATTERN}}


def _id(what: str) -> Any:
    return Field(default=None, **id_schema(f"The {what} id of the memories' scope."))


def _text(description: str) -> Any:
    # minLength in the schema only: an empty text gets the engine's message.
    return Field(description=description, json_schema_extra={"minLength": 1, "pattern": TEXT_PATTERN})


class _Open(BaseModel):
    """A response shape that may grow fields: clients must ignore unknown ones."""

    model_config = ConfigDict(extra="allow")


# requests -------------------------------------------------------------------------------
class _Request(BaseModel):
    """A request body: JSON types as they are (no "5" for 5, no 1 for true)."""

    model_config = ConfigDict(strict=True)


class MessageIn(_Request):
    """One conversation message."""

    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(description="The text (whitespace alone: a message without text).", json_schema_extra={"pattern": CONTENT_PATTERN})
    name: str | None = Field(default=None, description="The speaker's name (a verbatim memory is keyed by it).")
    metadata: dict[str, Any] | None = Field(default=None, description="Merged over the request's metadata for this message.")
    timestamp: Date | None = Field(default=None, description="When it was said: ISO-8601 or epoch seconds.")


_TURN = Field(
    description="The messages of a conversation turn: one at least, not a system message, has text.",
    json_schema_extra={
        "minItems": 1,
        "contains": {
            "type": "object",
            "properties": {"role": {"enum": ["user", "assistant", "tool"]}, "content": {"type": "string", "pattern": TEXT_PATTERN}},
            "required": ["role", "content"],
        }
    },
)


class AddRequest(_Request):
    messages: Annotated[str, _text("A text.")] | Annotated[list[MessageIn], _TURN] = Field(
        description="A text, or the messages of a conversation turn."
    )
    user_id: str | None = _id("user")
    agent_id: str | None = _id("agent")
    run_id: str | None = _id("run")
    metadata: dict[str, Any] | None = None
    infer: bool = Field(default=True, description="Extract facts (true) or store each message as it is (false).")
    timestamp: Date | None = Field(default=None, description="When the conversation happened: ISO-8601 or epoch seconds (default: now).")
    test: bool = Field(default=False, description="Test memories: kept apart, never returned by the normal calls (energy tiers' tests).")
    importance: float | None = Field(
        default=None, ge=0, le=1, allow_inf_nan=False,
        description="How much the memories matter, 0 to 1 (default: the extractor's estimate; 0.5 with infer=false). "
        "Consolidation never merges a memory at or above its threshold (0.8).",
    )

    model_config = ConfigDict(
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "messages": [
                        {"role": "user", "content": "I am Alex and I love hiking"},
                        {"role": "assistant", "content": "Nice to meet you Alex!"},
                    ],
                    "user_id": "alex",
                }
            ]
        }
    )


class SearchRequest(_Request):
    query: str = _text("What to look for.")
    user_id: str | None = _id("user")
    agent_id: str | None = _id("agent")
    run_id: str | None = _id("run")
    limit: int = Field(default=5, ge=1, le=MAX_LIMIT)
    filters: dict[str, Any] | None = Field(default=None, description="Metadata and field filters (memorist.policies.filters).")
    threshold: float | None = Field(default=None, ge=-1, le=1, description="Minimum cosine similarity of a result.")
    reference_time: Date | None = Field(default=None, description="When the question is asked, for time expressions (default: now).")

    model_config = ConfigDict(strict=True, json_schema_extra={"examples": [{"query": "outdoor activities", "user_id": "alex", "limit": 3}]})


class EraseRequest(_Request):
    user_id: str | None = _id("user")
    agent_id: str | None = _id("agent")
    run_id: str | None = _id("run")
    dry_run: bool = Field(default=False, description="Only count what would be erased; change nothing.")

    model_config = ConfigDict(strict=True, json_schema_extra={"examples": [{"user_id": "alex", "dry_run": True}]})


class UpdateRequest(_Request):
    text: str = _text("The memory's new text.")
    metadata: dict[str, Any] | None = Field(default=None, description="Keys merged into the memory's metadata.")


# learning -------------------------------------------------------------------------------
_Owner = Field(default=None, **id_schema("The user id (a user-bound key: its user)."))
_Agent = Field(default=None, **id_schema("The agent id (no user and no agent: the agent 'default')."))
_ScopeField = Field(default=None, description="Whose playbook: agent, user, tenant or global (default: from the ids).")
PlaybookScope = Literal["agent", "user", "tenant", "global"]


class StartTrajectoryRequest(_Request):
    task_description: str = _text("The task.")
    task_type: str | None = Field(default=None, min_length=1, max_length=64, description="e.g. api_call, reasoning.")
    parent_trajectory_id: str | None = Field(default=None, **id_schema("The parent trajectory (multi-step workflows)."))
    user_id: str | None = _Owner
    agent_id: str | None = _Agent


class StepRequest(_Request):
    step_type: str = Field(min_length=1, max_length=64, description="decision, action or observation.")
    description: str = _text("What happened.")
    metadata: dict[str, Any] | None = Field(default=None, description="Tool calls, model answers, ...")
    user_id: str | None = _Owner
    agent_id: str | None = _Agent


class CompleteRequest(_Request):
    status: Literal["success", "failure", "partial"]
    success_score: float | None = Field(default=None, ge=0, le=1, description="0 to 1 (default: 1, 0.5 or 0 by status).")
    error_message: str | None = Field(default=None, description="The error, when it failed.")
    metrics: dict[str, Any] | None = Field(default=None, description='{"tokens", "cost_usd", "duration_ms", ...}')
    user_id: str | None = _Owner
    agent_id: str | None = _Agent


class OwnerRequest(_Request):
    user_id: str | None = _Owner
    agent_id: str | None = _Agent


class BatchReflectRequest(_Request):
    agent_id: str | None = _Agent
    user_id: str | None = _Owner
    since: Date | None = Field(default=None, description="Only trajectories started at or after.")
    until: Date | None = Field(default=None, description="Only trajectories started at or before.")
    task_type: str | None = Field(default=None, min_length=1, max_length=64)
    min_trajectories: int = Field(default=5, ge=1, le=MAX_LIMIT, description="The fewest trajectories a pattern search needs.")


class RelationRequest(_Request):
    """A relation tuple: ``subject`` has ``relation`` on ``object``."""

    subject: str | list[str] = Field(description="('user'|'agent'|'group', id), as [type, id] or 'type:id'.")
    relation: str = Field(max_length=16, description="owner, editor or viewer (member: of a group).")
    object: str | list[str] = Field(description="('playbook'|'scope'|'group', id), as [type, id] or 'type:id': "
                                    "'playbook:agent_a/default', 'scope:user:alex', 'group:team'.")


class UpdatePlaybookRequest(_Request):
    strategies: list[dict[str, Any]] = Field(
        description='[{"category": "helpful|harmful|neutral", "pattern", "context"?, "confidence"?, "evidence_count"?, "examples"?}]'
    )
    merge: bool = Field(default=True, description="Merge into what the playbook holds (false: replace it).")
    major: bool = Field(default=False, description="Make this a major version.")
    user_id: str | None = _Owner
    agent_id: str | None = _Agent
    scope: PlaybookScope | None = _ScopeField


class CuratePlaybookRequest(_Request):
    reflections: list[Annotated[str, Field(**id_schema("A reflection's memory id."))]] = Field(description="Reflection memory ids.")
    user_id: str | None = _Owner
    agent_id: str | None = _Agent
    scope: PlaybookScope | None = _ScopeField


class RollbackRequest(_Request):
    version: int = Field(ge=1, le=MAX_LIMIT, description="The kept version to return to.")
    user_id: str | None = _Owner
    agent_id: str | None = _Agent
    scope: PlaybookScope | None = _ScopeField


# minutes --------------------------------------------------------------------------------
_CATEGORIES = "^(agent_capability|coordination_pattern|conflict_resolution|task_assignment|failure_pattern|project_knowledge)$"


def _maybe_id(description: str) -> Any:
    return Field(default=None, **id_schema(description))


class InsightIn(_Request):
    type: str = Field(description="outcome, assignment, resolution, capability, failure, pattern or observation.")
    finding: str = _text("What was learned.")
    confidence: float = Field(default=0.5, ge=0, le=1)
    contexts: list[str] = Field(default_factory=list, description="When it applies.")


class MinuteRequest(_Request):
    event_type: str = Field(min_length=1, max_length=64, description="e.g. task_assigned, conflict_resolved, handoff.")
    agent_id: str | None = _maybe_id("The agent involved.")
    project_id: str | None = _maybe_id("The project (default: 'default'; a user-bound key: its user).")
    run_id: str | None = _maybe_id("A session id.")
    data: dict[str, Any] | None = Field(default=None, description="Event data: task_id, assignment_reasoning, conflict_type, resolution, success_criteria_met (0-100)...")
    context_references: list[str] | None = Field(default=None, description="Ids of earlier minutes this one refers to.")
    memory_note: str | None = Field(default=None, description="A human-readable summary.")
    category: str | None = Field(default=None, pattern=_CATEGORIES, description="Default: from the event's words and data.")
    insights: list[InsightIn] | None = Field(default=None, description="What it taught; an outcome insight is derived from success_criteria_met.")
    timestamp: Date | None = Field(default=None, description="When it happened (default: now).")


class MinuteSearchRequest(_Request):
    query: str = _text("What to look for.")
    project_id: str | None = _maybe_id("The project.")
    agent_id: str | None = _maybe_id("Only this agent's minutes.")
    category: str | None = Field(default=None, pattern=_CATEGORIES)
    limit: int = Field(default=5, ge=1, le=MAX_LIMIT)


class ProjectRequest(_Request):
    project_id: str | None = _maybe_id("The project.")


class ContextRequest(_Request):
    agent_id: str = Field(**id_schema("The agent the context is for."))
    task: str | None = Field(default=None, description="What the agent is about to do.", json_schema_extra={"pattern": TEXT_PATTERN})
    budget_tokens: int = Field(default=4000, ge=1, le=1_000_000, description="Token budget (about 4 characters a token).")
    project_id: str | None = _maybe_id("The project.")
    now: Date | None = Field(default=None, description="Build it as of this time: ISO-8601, epoch seconds or an offset such as -2d (default: now).")


class EvaluateRequest(_Request):
    project_id: str | None = _maybe_id("The project.")
    dry_run: bool = Field(default=False, description="Report only; change nothing.")
    now: Date | None = Field(default=None, description="Score as of this time: ISO-8601, epoch seconds or an offset such as -1d, at most 5 minutes ahead (default: now).")


class PairRequest(_Request):
    task: str = _text("The original task.")
    criteria: str = _text("The success criteria.")
    output: str = _text("The output to evaluate.")
    threshold: float = Field(default=95, ge=0, le=100)
    memories_per_gap: int = Field(default=5, ge=1, le=100)
    project_id: str | None = _maybe_id("The project.")
    agent_id: str | None = _maybe_id("The agent whose output it is.")


# energy tiers ---------------------------------------------------------------------------
_NOW = Field(default=None, description="The time of the operation: ISO-8601 or epoch seconds (default: now).")


class MaintainRequest(_Request):
    user_id: str | None = _maybe_id("Only this user's memories (a user-bound key: its user).")
    agent_id: str | None = _maybe_id("Only this agent's memories.")
    run_id: str | None = _maybe_id("Only this run's memories.")
    now: Date | None = _NOW
    test_only: bool = Field(default=False, description="Run over the test memories only.")


class EndConversationRequest(_Request):
    user_id: str | None = _maybe_id("The user whose conversation ended (a user-bound key: its user).")
    agent_id: str | None = _maybe_id("The agent.")
    run_id: str | None = _maybe_id("The conversation (run) that ended.")
    now: Date | None = _NOW


class BoostRequest(_Request):
    memory_id: str = Field(**id_schema("The memory to boost."))
    amount: float | None = Field(default=None, gt=0, le=1e9, description="Energy to add (default: the configured boost, 1.0).")
    user_id: str | None = _maybe_id("The memory's user (a user-bound key: its user).")
    agent_id: str | None = _maybe_id("The memory's agent.")
    run_id: str | None = _maybe_id("The memory's run.")
    now: Date | None = _NOW


class ConfigRequest(_Request):
    changes: dict[str, Any] | None = Field(
        default=None, description='Settings to change, e.g. {"decay_batch": 50, "start_energy.reminder": 3.0}.'
    )
    reset: bool = Field(default=False, description="Start from the default settings.")


# responses ------------------------------------------------------------------------------
# The memory calls' results are the library's own types (memorist.model): one shape,
# described once, for Memory, the clients and these routes.
AddResponse = AddResult
MemoryList = model.MemoryList
MemoryItem = model.MemoryItem
EventList = model.EventList
UpdateResponse = UpdateResult
DeleteResponse = DeleteResult
DeleteAllResponse = DeleteAllResult
EraseResponse = model.EraseResult
DeletedPlaybook = model.DeletedPlaybook


class UserItem(_Open):
    user_id: str
    memories: int


class UserList(_Open):
    results: list[UserItem]


class Health(_Open):
    status: Literal["ok", "damaged", "unavailable"]
    version: str
    store: dict[str, Any] = Field(default_factory=dict, description='{"healthy": bool, "problem": str (when damaged or unavailable)}')


# The learning loop's and the energy tiers' answers are the library's types too.
TrajectoryItem = model.TrajectoryItem
TrajectoryStarted = model.TrajectoryStarted
StepLogged = model.StepLogged
TrajectoryList = model.TrajectoryList
ReflectionItem = model.ReflectionItem
ReflectionList = model.ReflectionList
StrategyItem = model.StrategyItem
PlaybookItem = model.PlaybookItem
PlaybookList = model.PlaybookList
VersionItem = model.VersionItem
VersionList = model.VersionList
TierRun = model.TierRun
RelationChange = model.RelationChange
RelationList = model.RelationList
RelationCheck = model.RelationCheck
Scheduled = model.Scheduled
TierItem = model.TierItem
TierItems = model.TierItems
TierStatus = model.TierStatus
TierHealth = model.TierHealth
TierConfig = model.TierConfig
CurationResponse = model.CurationResult
ConsolidationReport = model.ConsolidationReport
RollbackResult = model.RollbackResult


class ConsolidateRequest(_Request):
    user_id: str | None = _id("user")
    agent_id: str | None = _id("agent")
    memory_type: str | None = Field(default=None, max_length=64, description="Only memories of this kind: fact, preference, experience...")
    scope: Literal["user", "agent"] | None = Field(default=None, description="'user': every memory of the user (any agent); 'agent': of the agent; none: of exactly the ids.")
    min_importance: float = Field(default=0.5, ge=0, le=1, allow_inf_nan=False, description="Only memories below this importance are merged.")
    preserve_high_importance: bool = Field(default=True, description="Never touch a memory at or above importance_threshold.")
    importance_threshold: float = Field(default=0.8, ge=0, le=1, allow_inf_nan=False, description="What counts as high importance.")
    dry_run: bool = Field(default=False, description="Report what would be merged; write nothing.")


class MemoryRollbackRequest(_Request):
    event_or_run_id: Annotated[int, Field(ge=1, le=2**63 - 1)] | Annotated[str, Field(min_length=1, max_length=200)] = Field(
        description="A consolidation's run_id, or the seq of the event of the operation to undo."
    )
    user_id: str | None = _id("user")
    agent_id: str | None = _id("agent")
    run_id: str | None = _id("run")


class ErrorDetail(BaseModel):
    type: str = Field(description="unauthorized, forbidden, not_found, method_not_allowed, payload_too_large, validation_error, rate_limited, unavailable or internal.")
    message: str
    field: str | None = Field(description="The request field at fault (422, 413), else null.")


class ErrorResponse(BaseModel):
    error: ErrorDetail


__all__ = [
    "BoostRequest",
    "ConfigRequest",
    "ContextRequest",
    "EndConversationRequest",
    "EvaluateRequest",
    "InsightIn",
    "MaintainRequest",
    "MinuteRequest",
    "MinuteSearchRequest",
    "PairRequest",
    "ProjectRequest",
    "Scheduled",
    "TierConfig",
    "TierHealth",
    "TierItem",
    "TierItems",
    "TierRun",
    "RelationChange",
    "RelationCheck",
    "RelationList",
    "RelationRequest",
    "TierStatus",
    "AddRequest",
    "BatchReflectRequest",
    "CompleteRequest",
    "CuratePlaybookRequest",
    "CurationResponse",
    "ConsolidateRequest",
    "ConsolidationReport",
    "MemoryRollbackRequest",
    "RollbackResult",
    "OwnerRequest",
    "PlaybookItem",
    "PlaybookList",
    "ReflectionItem",
    "ReflectionList",
    "RollbackRequest",
    "StartTrajectoryRequest",
    "StepLogged",
    "StepRequest",
    "StrategyItem",
    "TrajectoryItem",
    "TrajectoryList",
    "TrajectoryStarted",
    "UpdatePlaybookRequest",
    "VersionItem",
    "VersionList",
    "AddResponse",
    "DeleteAllResponse",
    "DeleteResponse",
    "ErrorResponse",
    "EventList",
    "Health",
    "MemoryItem",
    "MemoryList",
    "MessageIn",
    "SearchRequest",
    "UpdateRequest",
    "UpdateResponse",
    "UserItem",
    "UserList",
]
