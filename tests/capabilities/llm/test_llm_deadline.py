"""A timed-out attempt really ends: the worker thread exits and its connection is
closed, even against a server that keeps the reply alive with a byte now and then."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from memorist.errors import TransientProviderError
from memorist.llm.openai import OpenAIResponsesLLM
from memorist.llm.openai_compatible import OpenAICompatibleLLM


class DripServer:
    """Answers every request with 200 headers, then one byte every 0.2 s for ever;
    counts the connections still open (a connection ends when a send fails). With
    ``headers=True`` the headers themselves are dripped and never finished."""

    def __init__(self, *, headers: bool = False) -> None:
        self.headers = headers
        self.open = 0
        self.seen = 0
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.open += 1
                self.seen += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            if self.headers:
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{")
            while not self._stop.is_set():
                conn.sendall(b"x" if self.headers else b" ")
                time.sleep(0.2)
        except OSError:
            pass
        finally:
            conn.close()
            with self._lock:
                self.open -= 1

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()


def _workers() -> int:
    return sum(t.name == "memorist-llm-request" and t.is_alive() for t in threading.enumerate())


@pytest.mark.parametrize("make", [
    lambda url: OpenAICompatibleLLM("m", base_url=url, api_key="k", timeout=1, max_retries=0),
    lambda url: OpenAIResponsesLLM("m", base_url=url, api_key="k", timeout=1, max_retries=0),
], ids=["chat", "responses"])
@pytest.mark.parametrize("headers", [False, True], ids=["body", "headers"])
def test_a_timed_out_attempt_ends_its_worker_and_connection(make, headers: bool) -> None:
    """A server sending a byte every 0.2 s of its body, or of its headers (then the
    body is never reached: the socket reads themselves must stop at the deadline):
    no read timeout fires, yet the worker ends and the connection closes."""
    server = DripServer(headers=headers)
    llm = make(server.base_url)
    try:
        llm.client  # noqa: B018 - the SDK imported before the clock starts
        for _ in range(3):
            with pytest.raises(TransientProviderError, match="timed out"):
                llm.generate("hi")
        assert server.seen == 3
        end = time.monotonic() + 5
        while (server.open or _workers()) and time.monotonic() < end:
            time.sleep(0.05)
        assert server.open == 0, "the upstream connections were left open"
        assert _workers() == 0, "memorist-llm-request threads were left running"
    finally:
        llm.close()
        server.stop()


def test_close_closes_the_client_built_but_not_one_passed() -> None:
    llm = OpenAICompatibleLLM("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    built = llm.client
    llm.close()
    assert built.is_closed()
    assert llm.client is not built  # the next call builds another
    llm.close()
    llm.close()  # twice is fine

    import openai

    mine = openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    passed = OpenAIResponsesLLM("m", api_key="k", client=mine)
    passed.close()
    assert not mine.is_closed()
    mine.close()
