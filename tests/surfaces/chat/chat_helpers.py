"""A memory service and a chat service served by uvicorn in threads, on free
loopback ports, and a recorder of what reaches the memory service."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Recorder:
    """ASGI middleware: every HTTP request (method, path, Authorization) is kept."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[tuple[str, str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            self.requests.append((scope["method"], scope["path"], headers.get("authorization", "")))
        await self.app(scope, receive, send)


class Live:
    def __init__(self, app: Any) -> None:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self._sock = sock
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=1))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the service did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


@contextmanager
def live(app: Any) -> Iterator[Live]:
    server = Live(app)
    try:
        yield server
    finally:
        server.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chat_app(db: str, memory: Any, *, url: str | None = None, decay_days: float = 0.0, rate: float = 0.0, burst: int = 20,
             **kwargs: Any):
    from memorist.agent.chat import ChatSettings, create_chat_app

    settings = ChatSettings(memory_url=url or memory.url, memory_api_key=memory.key if memory else None,
                            decay_days=decay_days, memory_timeout=5.0, rate_per_minute=rate, burst=burst)
    return create_chat_app(db, settings=settings, embedder="hashing", llm=None, **kwargs)
