"""``memorist chat``: the tutor as a chat service, with its page.

A separate process from the memory service (``memorist serve``). It keeps its own
small store: the learners' playbooks (what the tutor learned about teaching each
user), the conversations' owners, and its API keys. The learner's *facts* live in the
memory service and are reached only over REST, through :class:`memorist.Client` at
``MEMORY_MANAGEMENT_URL``, and only for a message sent with ``memoryEnabled: true``:

- before answering, the tutor's graph searches them through a
  :class:`~memorist.integrations.langgraph.MemoristStore` over the client (facts
  older than ``MEMORY_DECAY_DAYS`` left out);
- after answering, the learner's message is added to the memory service, which
  extracts and reconciles its facts (its own extractor: the heuristic unless it is
  configured with a model). With ``OPENAI_API_KEY`` set the chat extracts them itself,
  with gpt-5-mini on the Responses API, and stores each fact the user does not
  already have; when that model fails, the memory service extracts the turn.

The facts are kept under the caller's learner id, ``tenant/user``
(``school/alice``): the users of two tenants never meet in the memory service, which
the chat reaches with one key.

When the memory service cannot be reached the chat still answers, and says that
long-term memory is unavailable.

Keys: the chat checks its own keys (``memorist --db CHAT_DB keys create --tenant T
--user U``), because a message without memory must not reach the memory service at
all; each key names its user, who owns the conversations it starts. With no key in
the chat's store it is a development server: loopback only, one user, ``default``.

"Helpful" / "Not helpful" on an answer counts for the playbook bullets that answer
used: the chat keeps each conversation's last answer, and a mark (``POST
/api/ai/chat/outcome``, or the ``outcome`` of the next message) is credited to it.

Routes: ``POST /api/ai/chat``; ``POST /api/ai/chat/outcome``; ``GET /api/ai/memories`` (``limit``, at most 500, and
``more`` when there are others) and ``DELETE /api/ai/memories/{id}`` (the page's memory
drawer, the caller's memories in the memory service); ``GET /healthz``; the page at ``/``; the API's documentation at
``/docs`` and ``/redoc``, from the package's files as ``memorist serve`` serves them,
and every answer with the service's security headers (content-security policy, no
framing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from anyio import to_thread
from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field

from .. import config, validate
from ..ace.runner import Outcome
from ..client import Client
from ..errors import MemoristError, NotFoundError, StoreError, ValidationError
from ..integrations.langgraph import MemoristStore
from ..memory import Memory
from ..policies.text import preview
from ..server.app import HeadAsGet, SecurityHeaders, receive_body, register_docs, with_body
from ..server.deps import is_loopback_host
from ..server.errors import ApiError, install_error_handlers, retry_after
from ..server.keys import KeyStore
from ..server.limits import SPARE_THREADS, RateLimiter, WorkShares
from .conversations import Conversations, learner_of
from .tutor import DEFAULT_MODEL_RETRIES, DEFAULT_MODEL_TIMEOUT, Tutor

log = logging.getLogger("memorist.chat")

STATIC_DIR = Path(__file__).resolve().parent / "static"
#: The agent id of the chat's memories in the memory service.
CHAT_AGENT = "chat"
#: The user of a development chat server (no keys).
DEV_USER = "default"
MAX_MESSAGE_CHARS = 10_000
MAX_HISTORY = 50
#: How many earlier messages of the conversation the tutor reads.
HISTORY_WINDOW = 20
#: The largest request body the chat reads (413 beyond).
MAX_BODY_BYTES = 1_048_576
UNAVAILABLE = "Long-term memory is unavailable right now, so this answer does not use it and this turn was not remembered."
PARTIAL = "Long-term memory became unavailable while this turn was being saved, so only part of it was remembered."
#: How a learner tells the tutor what helped, on the chat's page.
FEEDBACK_HINT = 'mark my answer "Helpful" or "Not helpful"; it goes with your next message'


@dataclass(frozen=True)
class ChatSettings:
    """Where the memory service is and how the chat uses it (default: the
    environment, :func:`memorist.config.chat_environment`)."""

    memory_url: str = config.DEFAULT_MEMORY_MANAGEMENT_URL
    memory_api_key: str | None = None
    decay_days: float = 0.0
    memory_timeout: float = 10.0
    #: Chat requests per user and minute (0: no limit), and how many at once.
    rate_per_minute: float = 120.0
    burst: int = 20
    #: Seconds to wait for the tutor's model (and the chat's extraction model) on each
    #: request, and how many times to try a request again that timed out or failed on the way.
    model_timeout: float = DEFAULT_MODEL_TIMEOUT
    model_retries: int = DEFAULT_MODEL_RETRIES
    #: Messages (and memory-drawer calls) at work at once, in all and of one user
    #: (503 / 429 with ``Retry-After`` beyond): a user waiting on a slow model holds a
    #: few of the worker threads, never all of them.
    max_concurrency: int = 32
    max_per_user: int = 4

    def __post_init__(self) -> None:
        for name in ("max_concurrency", "max_per_user"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(name, f"must be a whole number of 1 or more, got {value!r}")
        if self.max_per_user > self.max_concurrency:
            raise ValidationError("max_per_user", f"must be at most max_concurrency ({self.max_concurrency}), got {self.max_per_user}")

    @classmethod
    def from_env(cls, **overrides: Any) -> ChatSettings:
        values = config.chat_environment()
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


class HistoryMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["user", "assistant", "system"]
    content: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)]


class ChatRequest(BaseModel):
    """``POST /api/ai/chat``'s body."""

    model_config = ConfigDict(extra="ignore")
    message: Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS)]
    conversationHistory: Annotated[list[HistoryMessage], Field(max_length=MAX_HISTORY)] = []
    conversationId: Annotated[str | None, Field(max_length=128)] = None
    memoryEnabled: bool = False
    feedback: Annotated[str | None, Field(max_length=MAX_MESSAGE_CHARS)] = None
    #: The mark on the conversation's previous answer ("Helpful": success).
    outcome: Outcome | None = None


class MarkRequest(BaseModel):
    """``POST /api/ai/chat/outcome``'s body: the mark on the conversation's last answer."""

    model_config = ConfigDict(extra="ignore")
    conversationId: Annotated[str, Field(min_length=1, max_length=128)]
    outcome: Outcome


@dataclass(frozen=True)
class ChatUser:
    """Who is calling: the key's tenant and user."""

    tenant_id: str
    user_id: str

    @property
    def owner(self) -> str:
        return f"{self.tenant_id}\x1f{self.user_id}"

    @property
    def learner_id(self) -> str:
        """The caller's id beyond the chat's keys: the learner of the tutor's playbooks
        and the user of its facts in the memory service. Users of different tenants
        stay apart there ("school/alice", "club/alice"), though the chat reaches the
        memory service with one key; "%" and "/" in a tenant id are escaped, so no
        two callers share an id."""
        return learner_of(self.tenant_id, self.user_id)


class ChatService:
    """What the chat's routes share: the tutor, the keys, the conversations, the
    settings, and how to reach the memory service."""

    def __init__(self, db: str, *, settings: ChatSettings, embedder: Any = None, llm: Any = Tutor._UNSET,
                 extractor: Any = None, local_only: bool = False, require_keys: bool = False, memory_transport: Any = None) -> None:
        self.settings = settings
        self.local_only = local_only
        self.require_keys = require_keys
        self.memory_transport = memory_transport
        self.memory = Memory(db, embedder=embedder) if embedder is not None else Memory(db)
        self.tutor = Tutor(self.memory, llm=llm, remember_facts=False, model_timeout=settings.model_timeout,
                           model_retries=settings.model_retries, feedback_hint=FEEDBACK_HINT)
        self.keys = KeyStore(db)
        self.conversations = Conversations(db, tenant=self.memory.config.tenant_id)
        self.extractor = extractor if extractor is not None else _spec_extractor(settings)
        self.limiter = RateLimiter(settings.rate_per_minute, settings.burst)
        self.at_work = WorkShares(settings.max_concurrency, settings.max_per_user)

    def client(self) -> Client:
        return Client(self.settings.memory_url, self.settings.memory_api_key, timeout=self.settings.memory_timeout,
                      transport=self.memory_transport)

    def close(self) -> None:
        self.keys.close()
        self.conversations.close()
        self.memory.close()


def _spec_extractor(settings: ChatSettings) -> Any:
    """The chat's extraction model: gpt-5-mini on the Responses API when
    ``OPENAI_API_KEY`` is set (the memory service extracts a turn it fails on);
    None otherwise (the memory service extracts)."""
    if not config.openai_api_key():
        return None
    from ..llm import resolve_llm
    from ..roles.llm import LLMExtractor

    return LLMExtractor(resolve_llm("openai:gpt-5-mini", timeout=settings.model_timeout, max_retries=settings.model_retries,
                                    max_retry_after=settings.model_timeout))


# the caller ------------------------------------------------------------------------------
def caller(request: Request) -> Iterator[ChatUser]:
    """The key's user (401 without a valid key, 403 for a key bound to no user, 429
    with ``Retry-After`` beyond the user's rate or its requests at work at once, 503
    beyond the chat's), counted as at work until its request is answered."""
    service: ChatService = request.app.state.chat
    user = _identify(request)
    wait = service.limiter.acquire(user.owner)
    if wait is not None:
        raise ApiError(429, f"too many requests for this user; retry in {wait:.1f} s", headers=retry_after(wait))
    refused = service.at_work.enter(user.owner)
    if refused == "service":
        raise ApiError(503, f"the chat is at its limit of {service.settings.max_concurrency} requests at work at once; retry shortly",
                       headers={"Retry-After": "1"})
    if refused == "caller":
        raise ApiError(429, f"this user has {service.settings.max_per_user} requests at work, the most one user may have at once; "
                       "retry when one is answered", headers={"Retry-After": "1"})
    try:
        yield user
    finally:
        service.at_work.leave(user.owner, None)


def _identify(request: Request) -> ChatUser:
    service: ChatService = request.app.state.chat
    presented = request.headers.get("authorization", "")
    key = presented[7:].strip() if presented.lower().startswith("bearer ") else request.headers.get("x-api-key", "").strip()
    if not key and not service.require_keys and not service.keys.has_active_keys():
        if service.local_only and not is_loopback_host(request.headers.get("host", "")):
            raise ApiError(403, "this development chat server (no API key) answers requests to a loopback host only")
        return ChatUser("", DEV_USER)
    if not key:
        raise ApiError(401, "an API key is required: send 'Authorization: Bearer <key>'", headers={"WWW-Authenticate": "Bearer"})
    record = service.keys.authenticate(key)
    if record is None:
        raise ApiError(401, "the API key is unknown or revoked", headers={"WWW-Authenticate": "Bearer"})
    if not record.user_id:
        raise ApiError(403, "this key is bound to no user; the chat needs a key made with --user")
    return ChatUser(record.tenant_id, record.user_id)


Caller = Annotated[ChatUser, Depends(caller)]


# the routes ------------------------------------------------------------------------------
def _chat(request: Request, body: ChatRequest, user: Caller) -> dict[str, Any]:
    service: ChatService = request.app.state.chat
    # Refused here, before the conversation is claimed, as the memory service would
    # refuse them: a NUL, a lone surrogate or nothing visible (a zero-width space) is
    # bad input, not a sign that long-term memory is unavailable.
    validate.text("message", body.message, max_chars=MAX_MESSAGE_CHARS)
    for i, m in enumerate(body.conversationHistory):
        validate.unicode(f"conversationHistory[{i}].content", m.content)
    if body.feedback is not None:
        validate.unicode("feedback", body.feedback)
    try:
        conversation = service.conversations.claim(user.owner, body.conversationId, learner=user.learner_id)
    except NotFoundError:
        raise ApiError(404, f"conversation {body.conversationId!r} not found", field="conversationId") from None
    mark = _apply_mark(service, user, conversation, body.outcome) if body.outcome else None
    history = [{"role": m.role, "content": m.content} for m in body.conversationHistory if m.role != "system" and m.content.strip()]
    payload = {
        "messages": [*history[-HISTORY_WINDOW:], {"role": "user", "content": body.message}],
        "learner_id": user.learner_id, "conversation_id": conversation,
        "feedback": body.feedback,  # the outcome is the previous answer's: applied above
    }
    memory_status: dict[str, Any] = {"enabled": body.memoryEnabled, "status": "off"}
    client = service.client() if body.memoryEnabled else None
    try:
        store = MemoristStore(client, agent_id=CHAT_AGENT) if client is not None else None
        out = service.tutor.run_turn(payload, store=store, namespace=(user.learner_id,), decay_days=service.settings.decay_days)
        answer = out["answer"]
        service.conversations.set_answer(user.owner, conversation, {
            "bullets": out["scratch"]["injected_ids"], "question": body.message, "answer": answer,
            "mode": out["mode"], "topic": out["scratch"]["topic"]})
        if client is not None:
            error = out["scratch"].get("memory_error")
            if error is None:
                added, error = _remember(service, client, user, conversation, body.message, answer)
                memory_status.update(status="used", used=out["result"]["facts"], added=added)
                if error is not None and added:  # some facts were stored before it failed
                    log.warning("[Chat] memory failed partway for user=%s: %s", user.learner_id, preview(error))
                    memory_status.update(status="partial", message=PARTIAL)
                    answer = f"{answer}\n\n({PARTIAL})"
                    error = None
            if error is not None:
                log.warning("[Chat] memory unavailable for user=%s: %s", user.learner_id, preview(error))
                memory_status.update(status="unavailable", message=UNAVAILABLE, used=[], added=[])
                answer = f"{answer}\n\n({UNAVAILABLE})"
    finally:
        if client is not None:
            client.close()
    log.info("[Chat] user=%s conversation=%s memory=%s mode=%s", user.learner_id, conversation, memory_status["status"],
             out["scratch"]["reasoning_mode"])
    return {
        "response": answer,
        "conversationId": conversation,
        "metadata": {
            "mode": out["mode"],
            "reasoningMode": out["scratch"]["reasoning_mode"],
            "memoryEnabled": body.memoryEnabled,
            "memory": memory_status,
            "outcome": mark,
            "scratch": out["scratch"],
        },
    }


def _mark(request: Request, body: MarkRequest, user: Caller) -> dict[str, Any]:
    """The learner's mark on the conversation's last answer, credited to the bullets it used."""
    service: ChatService = request.app.state.chat
    return {"conversationId": body.conversationId, **_apply_mark(service, user, body.conversationId, body.outcome)}


def _apply_mark(service: ChatService, user: ChatUser, conversation: str, outcome: str) -> dict[str, Any]:
    """``outcome`` applied to the playbook bullets the conversation's last answer used
    (kept by the chat, never named by the caller), once per answer: ``applied`` is
    False when there is no answer left to mark. 404 for another user's conversation."""
    try:
        answer = service.conversations.take_answer(user.owner, conversation)
    except NotFoundError:
        raise ApiError(404, f"conversation {conversation!r} not found", field="conversationId") from None
    if answer is None:
        return {"outcome": outcome, "applied": False, "bullets": [], "ace_delta": None}
    ids = [i for i in answer.get("bullets", []) if isinstance(i, str)]
    playbook = service.tutor.playbook
    try:
        used = [b for b in playbook.bullets(user.learner_id) if b.id in ids]
        # No question: what it taught was learned with it; the mark teaches what the answer did.
        delta = playbook.turn(user.learner_id, conversation, topic=answer.get("topic") or None).learn(
            question="", answer=answer.get("answer", ""), outcome=outcome, used=used, answer_mode=answer.get("mode", ""),
            messages=[{"role": "user", "content": answer.get("question", "")}, {"role": "assistant", "content": answer.get("answer", "")}])
    except MemoristError as exc:
        # The playbook's store failed: the answer stays to be marked again, and the
        # message the mark came with is still answered.
        service.conversations.set_answer(user.owner, conversation, answer)
        log.warning("[Chat] the mark of user=%s conversation=%s was not applied: %s", user.learner_id, conversation, preview(exc))
        return {"outcome": outcome, "applied": False, "bullets": [], "ace_delta": None, "error": str(exc)}
    log.info("[Chat] user=%s conversation=%s outcome=%s bullets=%d", user.learner_id, conversation, outcome, len(used))
    return {"outcome": outcome, "applied": True, "bullets": [b.id for b in used], "ace_delta": delta}


def _remember(service: ChatService, client: Client, user: ChatUser, conversation: str, message: str, answer: str) -> tuple[list[dict[str, Any]], str | None]:
    """Add the turn's facts to the memory service; (what it added, the error if it
    failed: what was added before the failure is kept and returned with it).

    With the chat's extraction model, its facts are stored as written, labelled with
    the model that extracted them. When that model fails (after its retries and its
    repair retry), its fallback's facts are not stored under its name: the turn goes
    to the memory service as it would without a model, and the memory service
    extracts it through its own ingest path (where a model of its own that fails too
    keeps the turn pending for ``reprocess``). Either way the chat's model calls are
    ``llm_call`` events in the chat's own log."""
    meta = {"source": "chat", "session_id": conversation}
    scope = {"user_id": user.learner_id, "agent_id": CHAT_AGENT}
    added: list[dict[str, Any]] = []
    try:
        if service.extractor is None:
            return _extracted_by_service(client, scope, conversation, meta, message), None
        from ..llm.base import recording
        from ..model import Message

        with recording(turn=True) as rec:
            facts = service.extractor.extract([Message("user", message), Message("assistant", answer)])
        _log_model_calls(service, user, conversation, rec)
        failed = rec.failed("extractor")
        if failed is not None:
            log.warning("[Chat] the extraction model failed (%s); the memory service extracts this turn", preview(failed.reason))
            return _extracted_by_service(client, scope, conversation, meta, message), None
        llm = getattr(service.extractor, "llm", None)
        extracted_by = getattr(llm, "model", None) or type(service.extractor).__name__
        for text in dict.fromkeys(f.text.strip() for f in facts if f.text.strip()):
            # The model's facts are stored as written; one the user already has is not stored twice.
            known = client.search(text, **scope, limit=3)["results"]
            if any(k["memory"].strip().casefold() == text.casefold() for k in known):
                continue
            result = client.add(text, **scope, run_id=conversation, metadata={**meta, "extracted_by": extracted_by}, infer=False)
            added.extend(result.get("results", []))
        return added, None
    except (MemoristError, OSError, KeyError, TypeError, AttributeError) as exc:
        # What was added before the failure stays added, and is said so.
        return added, str(exc)


def _extracted_by_service(client: Client, scope: dict[str, str], conversation: str, meta: dict[str, Any], message: str) -> list[dict[str, Any]]:
    """The turn sent whole to the memory service, which extracts its facts."""
    result = client.add([{"role": "user", "content": message}], **scope, run_id=conversation, metadata=meta, infer=True)
    return [r for r in result.get("results", []) if r.get("event") in ("ADD", "UPDATE")]


def _log_model_calls(service: ChatService, user: ChatUser, conversation: str, rec: Any) -> None:
    """The chat's extraction calls as ``llm_call`` events in the chat's store."""
    memory = getattr(service, "memory", None)
    if memory is None or not rec.calls:
        return
    from ..model import Scope
    from ..pipelines.llm_events import write_llm_calls

    try:
        with memory.store.transaction() as batch:
            write_llm_calls(batch, Scope(memory.config.tenant_id, user.learner_id, CHAT_AGENT), rec.calls, conversation=conversation)
    except StoreError as exc:
        log.warning("[Chat] the extraction model's calls could not be logged: %s", preview(exc))


def _decayed(rows: list[dict[str, Any]], days: float) -> list[dict[str, Any]]:
    if not days:
        return rows
    cutoff = time.time() - days * 86400.0
    from datetime import datetime

    def when(row: dict[str, Any]) -> float:
        stamps = [datetime.fromisoformat(row[k]).timestamp() for k in ("created_at", "updated_at") if row.get(k)]
        return max(stamps) if stamps else 0.0

    return [r for r in rows if when(r) >= cutoff]


def _memories(request: Request, user: Caller, query: Annotated[str | None, Query(max_length=1000)] = None,
              limit: Annotated[int, Query(ge=1, le=500)] = 100) -> dict[str, Any]:
    """The caller's newest ``limit`` memories, or its ``limit`` best matches of ``query``;
    ``more``: there are others beyond them (one more row is asked for, never a count)."""
    service: ChatService = request.app.state.chat
    searching = bool(query and query.strip())
    with service.client() as client, _memory_service():
        if searching:
            rows = client.search(query, user_id=user.learner_id, agent_id=CHAT_AGENT, limit=limit + 1)["results"]
        else:
            rows = client.get_all(user_id=user.learner_id, agent_id=CHAT_AGENT, limit=limit + 1)["results"]
    rows = _decayed(rows, service.settings.decay_days)
    if not searching:
        rows.sort(key=lambda r: r.get("created_at") or "", reverse=True)
    keep = ("id", "memory", "created_at", "updated_at", "metadata", "run_id")
    return {"results": [{k: r.get(k) for k in keep} for r in rows[:limit]], "more": len(rows) > limit}


def _delete_memory(request: Request, memory_id: str, user: Caller) -> dict[str, Any]:
    service: ChatService = request.app.state.chat
    with service.client() as client, _memory_service():
        return client.delete(memory_id, user_id=user.learner_id, agent_id=CHAT_AGENT)


@contextmanager
def _memory_service() -> Iterator[None]:
    """A call on the memory service for the memory drawer: its failures are the
    chat's (503, with the service's ``Retry-After`` when it gave one), not the
    caller's, but for an unknown memory (404) or a malformed memory id (422). A key
    the service refuses, or a request of the chat's it finds bad, is the chat's
    configuration: the caller never sent a ``user_id``."""
    try:
        yield
    except NotFoundError:
        raise
    except ValidationError as exc:
        if exc.field == "memory_id":
            raise
        log.warning("[Chat] the memory service refused a request of the chat: %s", preview(exc))
        raise ApiError(503, "long-term memory is unavailable right now: the memory service refused the chat's request") from None
    except StoreError as exc:
        log.warning("[Chat] memory unavailable: %s", preview(exc))
        raise ApiError(503, "long-term memory is unavailable right now: the memory service cannot be reached") from None
    except MemoristError as exc:
        log.warning("[Chat] memory unavailable: %s", preview(exc))
        wait = getattr(exc, "retry_after", None)
        headers = retry_after(wait) if isinstance(wait, int | float) and wait > 0 else None
        raise ApiError(503, "long-term memory is unavailable right now: the memory service refused the chat's request "
                       f"({type(exc).__name__})", headers=headers) from None


class BodyLimit:
    """ASGI middleware: a request body larger than ``limit`` bytes is answered 413
    before it is read whole (a declared length, or as it streams in)."""

    def __init__(self, app: Any, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Read whole before the app sees it (a body streamed without a length too): an
        # app reading it stops at the first error, which would name the JSON, not the size.
        body = await receive_body(scope, receive, send, self.limit, field=None)
        if body is not None:
            await self.app(scope, with_body(body, receive), send)


def create_chat_app(
    db: str,
    *,
    settings: ChatSettings | None = None,
    embedder: Any = None,
    llm: Any = Tutor._UNSET,
    extractor: Any = None,
    local_only: bool = False,
    require_keys: bool = False,
    memory_transport: Any = None,
) -> FastAPI:
    """The chat service over the chat's own store ``db`` (a SQLite file).

    ``settings``: :class:`ChatSettings` (default: from the environment). ``llm``: the
    tutor's model (default: the store's configured one, else Gemini with
    ``GEMINI_API_KEY``, else none). ``extractor``: the fact extractor used before
    sending a turn to the memory service (default: gpt-5-mini with ``OPENAI_API_KEY``, see the module
    docstring). ``memory_transport``: an ``httpx`` transport for the memory client
    (tests).
    """
    service = ChatService(db, settings=settings or ChatSettings.from_env(), embedder=embedder, llm=llm, extractor=extractor,
                          local_only=local_only, require_keys=require_keys, memory_transport=memory_transport)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Each request at work holds a worker thread: the pool outnumbers them, so the
        # page, the health check and other users never wait for a thread.
        limiter = to_thread.current_default_thread_limiter()
        limiter.total_tokens = max(limiter.total_tokens, service.settings.max_concurrency + SPARE_THREADS)
        try:
            yield
        finally:
            service.close()

    app = FastAPI(title="Memorist chat", lifespan=lifespan, docs_url=None, redoc_url=None)  # register_docs: no CDN
    app.state.chat = service
    install_error_handlers(app)
    register_docs(app)
    app.add_api_route("/api/ai/chat", _chat, methods=["POST"], summary="One chat turn with the tutor")
    app.add_api_route("/api/ai/chat/outcome", _mark, methods=["POST"], summary="Mark the conversation's last answer helpful or not")
    app.add_api_route("/api/ai/memories", _memories, methods=["GET"], summary="The caller's memories (newest first) or a search")
    app.add_api_route("/api/ai/memories/{memory_id}", _delete_memory, methods=["DELETE"], summary="Delete one of the caller's memories")

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:  # on the event loop: never behind the worker threads
        return {"status": "ok"}

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "chat.html", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_middleware(BodyLimit)
    app.add_middleware(SecurityHeaders)  # a 413 carries them too
    app.add_middleware(HeadAsGet)
    return app


__all__ = ["CHAT_AGENT", "PARTIAL", "UNAVAILABLE", "ChatRequest", "ChatService", "ChatSettings", "MarkRequest", "create_chat_app"]
