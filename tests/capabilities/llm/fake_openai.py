"""A fake OpenAI server: ``POST /v1/responses`` and ``POST /v1/chat/completions``
with the real wire formats, scripted per test, served by uvicorn on 127.0.0.1.

Memorist talks to it through the official ``openai`` SDK over real HTTP, so what is
tested is the request the SDK really sends and the response it really parses.

    server.script("responses", text('{"facts": []}'), error(429, headers={"retry-after": "1"}))
    server.script("chat", tool_calls(("search_memories", {"query": "pets"})), text("You have a cat."))

A ``tool_calls(...)`` reply is the model calling functions: a ``function_call`` output
item on the Responses API, ``message.tool_calls`` on Chat Completions; the tools'
results come back in the next request (``Request.tool_outputs()``).

Each reply is taken once, in order, per endpoint ("responses" or "chat"); a callable
reply receives the request's JSON body and returns a reply. With the script empty,
``server.default[endpoint]`` answers, else a 500 saying the script ran out. Every
request is kept in ``server.requests`` (path, headers, JSON body).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

ENDPOINTS = {"/v1/responses": "responses", "/v1/chat/completions": "chat"}


@dataclass
class Reply:
    status: int = 200
    text: str | None = None  # the model's output text (200 replies)
    body: Any = None  # a raw body instead (errors, broken payloads)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    usage: tuple[int, int] | None = None  # (input, output) tokens; estimated when None
    tool_calls: list[dict[str, str]] | None = None  # the model calls functions: [{"call_id", "name", "arguments"}]
    drip: float = 0.0  # > 0: the body is sent a few bytes at a time, this many seconds apart
    content_type: str | None = None  # a raw ``body`` (str) sent as is with this type (e.g. an HTML page)


def text(output: str | dict | list, *, usage: tuple[int, int] | None = None, delay: float = 0.0) -> Reply:
    """A successful completion whose output text is ``output`` (JSON-encoded if not a str)."""
    return Reply(text=output if isinstance(output, str) else json.dumps(output), usage=usage, delay=delay)


def tool_calls(*calls: tuple[str, dict | str]) -> Reply:
    """A completion in which the model calls functions: each call a ``(name, arguments)``
    pair, the arguments a dict (sent as JSON) or a raw string (to send broken JSON)."""
    made = [
        {"call_id": f"call_{uuid.uuid4().hex[:24]}", "name": name,
         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}
        for name, arguments in calls
    ]
    return Reply(text="", tool_calls=made)


def error(status: int, message: str = "", *, headers: dict[str, str] | None = None, type: str = "", code: str | None = None) -> Reply:
    """An API error in OpenAI's error format."""
    kind = type or {400: "invalid_request_error", 401: "invalid_request_error", 429: "requests"}.get(status, "server_error")
    body = {"error": {"message": message or f"fake error {status}", "type": kind, "param": None, "code": code}}
    return Reply(status=status, body=body, headers=headers or {})


def delay(seconds: float, reply: Reply) -> Reply:
    reply.delay = seconds
    return reply


def drip(seconds: float, reply: Reply) -> Reply:
    """``reply`` sent 40 bytes at a time, ``seconds`` apart: a server that never goes
    silent long enough for a read timeout, yet takes ages to finish."""
    reply.drip = seconds
    return reply


def html(page: str, status: int = 200) -> Reply:
    """A web page where the API's JSON should be (a proxy's or a gateway's)."""
    return Reply(status=status, body=page, content_type="text/html")


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def endpoint(self) -> str | None:
        return ENDPOINTS.get(self.path)

    def prompt_text(self) -> str:
        """Everything the model would read: instructions/system and input/messages."""
        b = self.body if isinstance(self.body, dict) else {}
        parts = [b.get("instructions") or ""]
        items = b.get("input") if "input" in b else b.get("messages")
        if isinstance(items, str):
            parts.append(items)
        for item in items or []:
            if isinstance(item, dict):
                content = item.get("content")
                if isinstance(content, str):
                    parts.append(content)
                elif isinstance(content, list):
                    parts.extend(c.get("text", "") for c in content if isinstance(c, dict))
        return "\n".join(parts)

    def tool_outputs(self) -> list[str]:
        """What the tools answered, as this request sends it back to the model, oldest
        first: ``function_call_output`` items (Responses) or ``tool`` messages (Chat)."""
        b = self.body if isinstance(self.body, dict) else {}
        items = b.get("input") if "input" in b else b.get("messages")
        found = []
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call_output":
                found.append(item.get("output"))
            elif item.get("role") == "tool":
                content = item.get("content")
                found.append(content if isinstance(content, str) else "".join(c.get("text", "") for c in content or []))
        return [o if isinstance(o, str) else json.dumps(o) for o in found]


def _estimate(text: str) -> int:
    return max(1, len(text.split()))


def _responses_body(req: dict[str, Any], output: str, usage: tuple[int, int], calls: list[dict[str, str]] | None = None) -> dict[str, Any]:
    i, o = usage
    items: list[dict[str, Any]] = [
        {"id": f"fc_{uuid.uuid4().hex}", "type": "function_call", "status": "completed", **call} for call in calls or ()
    ] or [
        {
            "id": f"msg_{uuid.uuid4().hex}",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": output, "annotations": [], "logprobs": []}],
        },
    ]
    return {
        "id": f"resp_{uuid.uuid4().hex}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": req.get("instructions"),
        "max_output_tokens": req.get("max_output_tokens"),
        # The API answers with the dated snapshot of the model it ran.
        "model": f"{req.get('model')}-2025-08-07",
        "output": [{"id": f"rs_{uuid.uuid4().hex}", "type": "reasoning", "summary": []}, *items],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "medium", "summary": None},
        "service_tier": "default",
        "store": req.get("store", True),
        "temperature": req.get("temperature", 1.0),
        "text": req.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": {
            "input_tokens": i,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": o,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": i + o,
        },
        "user": None,
        "metadata": {},
    }


def _chat_body(req: dict[str, Any], output: str, usage: tuple[int, int], calls: list[dict[str, str]] | None = None) -> dict[str, Any]:
    i, o = usage
    message: dict[str, Any] = {"role": "assistant", "content": output, "refusal": None, "annotations": []}
    if calls:
        message["content"] = None
        message["tool_calls"] = [
            {"id": c["call_id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.get("model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": i,
            "completion_tokens": o,
            "total_tokens": i + o,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }


def _check(endpoint: str, body: Any) -> Reply | None:
    """The request checks the real API makes that matter here."""
    if not isinstance(body, dict):
        return error(400, "We could not parse the JSON body of your request.")
    if not body.get("model"):
        return error(400, "Missing required parameter: 'model'.", code="missing_required_parameter")
    if endpoint == "responses":
        if "messages" in body:
            return error(400, "Unknown parameter: 'messages'.", code="unknown_parameter")
        if "input" not in body:
            return error(400, "Missing required parameter: 'input'.", code="missing_required_parameter")
    else:
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return error(400, "Missing required parameter: 'messages'.", code="missing_required_parameter")
        if "input" in body:
            return error(400, "Unrecognized request argument supplied: input")
    return None


class FakeOpenAIServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Any]] = {"responses": deque(), "chat": deque()}
        self.default: dict[str, Any] = {}
        self.requests: list[Request] = []
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # scripting ---------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, endpoint: str, *replies: Any) -> None:
        assert endpoint in self._queues, endpoint
        with self._lock:
            self._queues[endpoint].extend(replies)

    def reset(self) -> None:
        with self._lock:
            for q in self._queues.values():
                q.clear()
            self.default.clear()
            self.requests.clear()

    def remaining(self, endpoint: str) -> int:
        with self._lock:
            return len(self._queues[endpoint])

    def calls(self, endpoint: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.endpoint == endpoint]

    def _next(self, endpoint: str, body: Any) -> Reply:
        with self._lock:
            reply = self._queues[endpoint].popleft() if self._queues[endpoint] else self.default.get(endpoint)
        if reply is None:
            return error(500, f"fake server: no scripted reply left for /{endpoint}")
        if callable(reply):
            reply = reply(body)
        return reply

    # the ASGI app ----------------------------------------------------------------------
    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request as StarletteRequest
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route

        async def handle(request: StarletteRequest) -> Response:
            raw = await request.body()
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = raw.decode("utf-8", "replace")
            headers = {k.lower(): v for k, v in request.headers.items()}
            with self._lock:
                self.requests.append(Request(request.url.path, headers, body))
            endpoint = ENDPOINTS[request.url.path]
            if not headers.get("authorization", "").startswith("Bearer "):
                reply = error(401, "You didn't provide an API key.")
            else:
                reply = _check(endpoint, body) or self._next(endpoint, body)
            if reply.delay:
                await asyncio.sleep(reply.delay)
            extra = {"x-request-id": f"req_{uuid.uuid4().hex}", **reply.headers}
            if reply.content_type is not None:
                return Response(reply.body, status_code=reply.status, headers=extra, media_type=reply.content_type)
            if reply.status != 200 or reply.text is None:
                payload: Any = reply.body
            else:
                usage = reply.usage or (_estimate(Request("", {}, body).prompt_text()), _estimate(reply.text))
                build = _responses_body if endpoint == "responses" else _chat_body
                payload = build(body, reply.text, usage, reply.tool_calls)
            if reply.drip:
                data = json.dumps(payload).encode()

                async def chunks() -> Any:
                    for i in range(0, len(data), 40):
                        yield data[i:i + 40]
                        await asyncio.sleep(reply.drip)

                return StreamingResponse(chunks(), status_code=reply.status, media_type="application/json",
                                         headers={**extra, "content-length": str(len(data))})
            return JSONResponse(payload, status_code=reply.status, headers=extra)

        async def not_found(request: StarletteRequest) -> JSONResponse:
            with self._lock:
                self.requests.append(Request(request.url.path, dict(request.headers), None))
            return JSONResponse(
                {"error": {"message": f"Invalid URL ({request.method} {request.url.path})", "type": "invalid_request_error", "param": None, "code": None}},
                status_code=404,
            )

        routes = [Route(path, handle, methods=["POST"]) for path in ENDPOINTS]
        routes.append(Route("/{path:path}", not_found, methods=["GET", "POST", "DELETE", "PUT"]))
        return Starlette(routes=routes)

    # lifecycle ----------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app(), log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=0.2
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake OpenAI server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
